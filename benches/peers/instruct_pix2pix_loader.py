"""The data path of diffusers' `train_instruct_pix2pix.py` (and its SDXL and LoRA copies), torch
against hpuload: a `datasets` table of the script's default columns (`input_image`,
`edit_prompt`, `edited_image`, as `fusing/instructpix2pix-1000-samples` holds them;
`save_to_disk`, the images' bytes embedded), the script's `preprocess_train` as written there
(each image `.convert("RGB").resize((r, r))` by Pillow, `np.array`, transposed, both columns
stacked, `2 * (images / 255) - 1`, then `RandomCrop(r)` or `CenterCrop(r)` and
`RandomHorizontalFlip()` on the stack; the prompts tokenized), its `collate_fn`, shuffled. Only
the DataLoader differs.

The edited images are real edits of each photo (Pillow: posterized, its colours shifted, a
little blurred), saved as JPEG beside it; the tokenizer is a real fast tokenizer trained here
on the prompts (CLIP's cannot be downloaded offline), called as the script calls CLIP's.

usage:
  python instruct_pix2pix_loader.py make --corpus DIR --out SAVED_DIR [--images 800]
  python instruct_pix2pix_loader.py run --loader torch|hpuload --data SAVED_DIR
        [--resolution 256] [--epochs 3] [--workers 2] [--batch 4] [--center-crop] [--no-flip]
  python instruct_pix2pix_loader.py parity --data SAVED_DIR [--batches 8]
`run` prints one JSON line: image pairs/s (median of the epochs after a warm-up one) and the
RSS after each epoch. `parity` compares hpuload's batches with torch's, unshuffled and without
the flip, on the CPU path (exact) and on the media engine (PSNR)."""

import argparse
import glob
import io
import json
import math
import os
import random
import statistics
import sys
import time

import datasets
import numpy as np
import torch
from torchvision import transforms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from controlnet_loader import psnr, tokenizer_for  # noqa: E402


def rss_mib() -> int:
    with open("/proc/self/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) // 1024


def make(a):
    from PIL import Image, ImageEnhance, ImageFilter, ImageOps

    files = sorted(glob.glob(f"{a.corpus}/**/*.jpg", recursive=True))[: a.images]
    rng = random.Random(0)
    edits = ["make it look like a poster", "turn it warmer", "make it dreamy", "make it an old photo", "add autumn colours"]
    rows = {"input_image": [], "edit_prompt": [], "edited_image": []}
    for k, path in enumerate(files):
        with open(path, "rb") as f:
            data = f.read()
        with Image.open(io.BytesIO(data)) as im:
            rgb = im.convert("RGB")
        edited = ImageOps.posterize(rgb, 4) if k % 2 else ImageEnhance.Color(rgb).enhance(1.8)
        edited = edited.filter(ImageFilter.GaussianBlur(1.0))
        out = io.BytesIO()
        edited.save(out, format="JPEG", quality=90)
        rows["input_image"].append({"bytes": data, "path": os.path.basename(path)})
        rows["edited_image"].append({"bytes": out.getvalue(), "path": "edited-" + os.path.basename(path)})
        rows["edit_prompt"].append(rng.choice(edits) + " " + " ".join(rng.choices(["please", "now", "softly", "strongly"], k=2)))
    features = datasets.Features(
        {"input_image": datasets.Image(), "edit_prompt": datasets.Value("string"), "edited_image": datasets.Image()}
    )
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(a.out)
    print(f"wrote {len(files)} rows to {a.out}")


def convert_to_np(image, resolution):
    image = image.convert("RGB").resize((resolution, resolution))
    return np.array(image).transpose(2, 0, 1)


def train_dataset(data: str, resolution: int, center_crop: bool, random_flip: bool):
    """The script's data preparation over the saved table (its column defaults)."""
    ds = datasets.load_from_disk(data)
    tokenizer = tokenizer_for(ds, "edit_prompt", 300)
    original_image_column, edit_prompt_column, edited_image_column = ds.column_names

    def tokenize_captions(captions):
        inputs = tokenizer(captions, max_length=tokenizer.model_max_length, padding="max_length", truncation=True, return_tensors="pt")
        return inputs.input_ids

    train_transforms = transforms.Compose(
        [
            transforms.CenterCrop(resolution) if center_crop else transforms.RandomCrop(resolution),
            transforms.RandomHorizontalFlip() if random_flip else transforms.Lambda(lambda x: x),
        ]
    )

    def preprocess_images(examples):
        original_images = np.concatenate([convert_to_np(image, resolution) for image in examples[original_image_column]])
        edited_images = np.concatenate([convert_to_np(image, resolution) for image in examples[edited_image_column]])
        # Both images of a row undergo the same augmentation.
        images = np.stack([original_images, edited_images])
        images = torch.tensor(images)
        images = 2 * (images / 255) - 1
        return train_transforms(images)

    def preprocess_train(examples):
        preprocessed_images = preprocess_images(examples)
        original_images, edited_images = preprocessed_images
        original_images = original_images.reshape(-1, 3, resolution, resolution)
        edited_images = edited_images.reshape(-1, 3, resolution, resolution)
        examples["original_pixel_values"] = original_images
        examples["edited_pixel_values"] = edited_images
        captions = list(examples[edit_prompt_column])
        examples["input_ids"] = tokenize_captions(captions)
        return examples

    return ds.with_transform(preprocess_train)


def collate_fn(examples):
    original_pixel_values = torch.stack([example["original_pixel_values"] for example in examples])
    original_pixel_values = original_pixel_values.to(memory_format=torch.contiguous_format).float()
    edited_pixel_values = torch.stack([example["edited_pixel_values"] for example in examples])
    edited_pixel_values = edited_pixel_values.to(memory_format=torch.contiguous_format).float()
    input_ids = torch.stack([example["input_ids"] for example in examples])
    return {"original_pixel_values": original_pixel_values, "edited_pixel_values": edited_pixel_values, "input_ids": input_ids}


def run(a):
    if a.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    torch.manual_seed(0)
    loader = DataLoader(
        train_dataset(a.data, a.resolution, a.center_crop, not a.no_flip),
        shuffle=True,
        collate_fn=collate_fn,
        batch_size=a.batch,
        num_workers=a.workers,
    )
    rates, rss = [], []
    for _ in range(a.epochs + 1):
        start, n = time.perf_counter(), 0
        for batch in loader:
            n += batch["original_pixel_values"].shape[0]
        rates.append(n / (time.perf_counter() - start))
        rss.append(rss_mib())
    print(json.dumps({
        "loader": a.loader, "pairs_per_s": round(statistics.median(rates[1:]), 1), "epochs": [round(r, 1) for r in rates],
        "rss_mib": rss, "kind": type(loader).__name__,
    }))


def parity(a):
    from torch.utils.data import DataLoader as TorchLoader

    from hpuload.torch import DataLoader

    ds = train_dataset(a.data, a.resolution, a.center_crop, False)
    want = [b for _, b in zip(range(a.batches), TorchLoader(ds, batch_size=a.batch, collate_fn=collate_fn))]
    for backend in ("cpu", "auto"):
        got = DataLoader(ds, batch_size=a.batch, collate_fn=collate_fn, backend=backend)
        worst = {"original_pixel_values": math.inf, "edited_pixel_values": math.inf}
        exact = True
        for g, w in zip(got, want):
            assert torch.equal(g["input_ids"], w["input_ids"])
            for key in worst:
                exact = exact and torch.equal(g[key], w[key])
                for i in range(g[key].shape[0]):
                    worst[key] = min(worst[key], psnr(g[key][i], w[key][i], 2.0))
        print(json.dumps({"backend": backend, "exact": exact, "lowest_psnr_db": {k: round(v, 1) for k, v in worst.items()}}))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--corpus", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--images", type=int, default=800)
    for name in ("run", "parity"):
        r = sub.add_parser(name)
        r.add_argument("--data", required=True)
        r.add_argument("--resolution", type=int, default=256)
        r.add_argument("--batch", type=int, default=4)
        r.add_argument("--center-crop", action="store_true")
        if name == "run":
            r.add_argument("--loader", choices=["torch", "hpuload"], required=True)
            r.add_argument("--epochs", type=int, default=3)
            r.add_argument("--workers", type=int, default=2)
            r.add_argument("--no-flip", action="store_true")
        else:
            r.add_argument("--batches", type=int, default=8)
    a = p.parse_args()
    {"make": make, "run": run, "parity": parity}[a.command](a)


if __name__ == "__main__":
    main()
