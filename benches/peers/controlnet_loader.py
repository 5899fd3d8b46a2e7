"""The data path of diffusers' and optimum-habana's `train_controlnet.py`, torch against
hpuload: a `datasets` table of three columns in the order the script's defaults take them (`image`,
`text`, `conditioning_image`; `save_to_disk`, the images' bytes embedded), the script's `make_train_dataset`
(`with_transform(preprocess_train)`: each column's images `.convert("RGB")` and put through a
transform of its own, `Resize(resolution)` bilinear and `CenterCrop(resolution)` then
`ToTensor`, `Normalize([0.5], [0.5])` for the image only; the captions tokenized, an empty one
drawn with `proportion_empty_prompts`), its `collate_fn`, shuffled. Only the DataLoader differs.

The conditioning images are real: each photo's edges (Pillow's `FIND_EDGES` of its grey
image, as white lines on black, like fill50k's and the Canny examples'), saved as PNG beside
the photo's JPEG. The tokenizer is a real fast tokenizer trained here on the captions (CLIP's
cannot be downloaded offline), called as the script calls CLIP's.

usage:
  python controlnet_loader.py make --corpus DIR --out SAVED_DIR [--images 800]
  python controlnet_loader.py run --loader torch|hpuload --data SAVED_DIR
        [--resolution 512] [--epochs 3] [--workers 2] [--batch 8] [--empty 0.0]
  python controlnet_loader.py parity --data SAVED_DIR [--batches 4]
`run` prints one JSON line: image pairs/s (median of the epochs after a warm-up one). `parity`
compares hpuload's batches with torch's, unshuffled, on the CPU path (exact) and on the media
engine (PSNR)."""

import argparse
import glob
import io
import json
import math
import os
import random
import sys

import datasets
import numpy as np
import torch
from torchvision import transforms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clip_loader import timed_epochs  # noqa: E402


def make(a):
    from PIL import Image, ImageFilter

    files = sorted(glob.glob(f"{a.corpus}/**/*.jpg", recursive=True))[: a.images]
    rng = random.Random(0)
    words = "a photo of the small large red blue dog cat tree house street by near at night in snow".split()
    rows = {"image": [], "text": [], "conditioning_image": []}
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        with Image.open(io.BytesIO(data)) as im:
            edges = im.convert("L").filter(ImageFilter.FIND_EDGES).point(lambda v: 255 if v > 40 else 0).convert("RGB")
        out = io.BytesIO()
        edges.save(out, format="PNG")
        rows["image"].append({"bytes": data, "path": os.path.basename(path)})
        rows["conditioning_image"].append({"bytes": out.getvalue(), "path": os.path.basename(path)[:-4] + ".png"})
        rows["text"].append(" ".join(rng.choices(words, k=rng.randint(5, 14))))
    features = datasets.Features(
        {"image": datasets.Image(), "text": datasets.Value("string"), "conditioning_image": datasets.Image()}
    )
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(a.out)
    print(f"wrote {len(files)} rows to {a.out}")


def tokenizer_for(ds, column: str = "text", vocab: int = 500):
    """A real fast tokenizer trained on the table's `column` of captions, called as CLIP's."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel()
    bpe.train_from_iterator(ds.with_format(None)[column], trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<pad>", "<unk>"]))
    return PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", unk_token="<unk>", model_max_length=77)


def train_dataset(data: str, resolution: int, empty: float):
    """The script's `make_train_dataset` over the saved table (its column defaults: the
    features' order)."""
    ds = datasets.load_from_disk(data)
    tokenizer = tokenizer_for(ds)
    image_column, caption_column, conditioning_image_column = ds.column_names

    def tokenize_captions(examples, is_train=True):
        captions = []
        for caption in examples[caption_column]:
            if random.random() < empty:
                captions.append("")
            elif isinstance(caption, str):
                captions.append(caption)
            elif isinstance(caption, (list, np.ndarray)):
                captions.append(random.choice(caption) if is_train else caption[0])
            else:
                raise ValueError(f"Caption column `{caption_column}` should hold strings or lists of them.")
        inputs = tokenizer(captions, max_length=tokenizer.model_max_length, padding="max_length", truncation=True, return_tensors="pt")
        return inputs.input_ids

    image_transforms = transforms.Compose(
        [
            transforms.Resize(resolution, interpolation=transforms.InterpolationMode.BILINEAR),
            transforms.CenterCrop(resolution),
            transforms.ToTensor(),
            transforms.Normalize([0.5], [0.5]),
        ]
    )
    conditioning_image_transforms = transforms.Compose(
        [
            transforms.Resize(resolution, interpolation=transforms.InterpolationMode.BILINEAR),
            transforms.CenterCrop(resolution),
            transforms.ToTensor(),
        ]
    )

    def preprocess_train(examples):
        images = [image.convert("RGB") for image in examples[image_column]]
        images = [image_transforms(image) for image in images]
        conditioning_images = [image.convert("RGB") for image in examples[conditioning_image_column]]
        conditioning_images = [conditioning_image_transforms(image) for image in conditioning_images]
        examples["pixel_values"] = images
        examples["conditioning_pixel_values"] = conditioning_images
        examples["input_ids"] = tokenize_captions(examples)
        return examples

    return ds.with_transform(preprocess_train)


def collate_fn(examples):
    pixel_values = torch.stack([example["pixel_values"] for example in examples])
    pixel_values = pixel_values.to(memory_format=torch.contiguous_format).float()
    conditioning_pixel_values = torch.stack([example["conditioning_pixel_values"] for example in examples])
    conditioning_pixel_values = conditioning_pixel_values.to(memory_format=torch.contiguous_format).float()
    input_ids = torch.stack([example["input_ids"] for example in examples])
    return {"pixel_values": pixel_values, "conditioning_pixel_values": conditioning_pixel_values, "input_ids": input_ids}


def run(a):
    if a.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    torch.manual_seed(0)
    loader = DataLoader(
        train_dataset(a.data, a.resolution, a.empty), shuffle=True, collate_fn=collate_fn, batch_size=a.batch,
        num_workers=a.workers,
    )
    timed = timed_epochs(loader, a.epochs)  # `pixel_values` rows: image pairs
    print(json.dumps({"loader": a.loader, "pairs_per_s": timed.pop("images_per_s"), **timed}))


def psnr(got: torch.Tensor, want: torch.Tensor, span: float) -> float:
    mse = float(((got.double() - want.double()) ** 2).mean())
    return math.inf if mse == 0 else 10 * math.log10(span * span / mse)


def parity(a):
    from torch.utils.data import DataLoader as TorchLoader

    from hpuload.torch import DataLoader

    ds = train_dataset(a.data, a.resolution, 0.0)
    want = [b for _, b in zip(range(a.batches), TorchLoader(ds, batch_size=a.batch, collate_fn=collate_fn))]
    for backend in ("cpu", "auto"):
        got = DataLoader(ds, batch_size=a.batch, collate_fn=collate_fn, backend=backend)
        worst = {"pixel_values": math.inf, "conditioning_pixel_values": math.inf}
        exact = True
        for g, w in zip(got, want):
            assert torch.equal(g["input_ids"], w["input_ids"])
            for key, span in (("pixel_values", 2.0), ("conditioning_pixel_values", 1.0)):
                exact = exact and torch.equal(g[key], w[key])
                for i in range(g[key].shape[0]):
                    worst[key] = min(worst[key], psnr(g[key][i], w[key][i], span))
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
        r.add_argument("--resolution", type=int, default=512)
        r.add_argument("--batch", type=int, default=8)
        if name == "run":
            r.add_argument("--loader", choices=["torch", "hpuload"], required=True)
            r.add_argument("--epochs", type=int, default=3)
            r.add_argument("--workers", type=int, default=2)
            r.add_argument("--empty", type=float, default=0.0)
        else:
            r.add_argument("--batches", type=int, default=4)
    a = p.parse_args()
    {"make": make, "run": run, "parity": parity}[a.command](a)


if __name__ == "__main__":
    main()
