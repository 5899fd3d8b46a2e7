"""The data path of diffusers' `train_text_to_image.py`, torch against hpuload: a `datasets`
table of images and captions (`save_to_disk`, the bytes embedded), the script's
`preprocess_train` function set with `with_transform` (each image `.convert("RGB")`, its
`train_transforms`: Resize(resolution) bilinear, RandomCrop or CenterCrop, RandomHorizontalFlip
or an identity Lambda, ToTensor, Normalize([0.5], [0.5]); the captions tokenized, one drawn
where a row has several), its `collate_fn`, shuffled. Only the DataLoader differs.

The tokenizer is a real fast tokenizer (`PreTrainedTokenizerFast`, a byte-level BPE trained here
on the captions, since CLIP's vocabulary cannot be downloaded offline), called as the script
calls CLIP's: `max_length=77`, `padding="max_length"`, `truncation=True`, `return_tensors="pt"`.

`--recipe sdxl`: `train_text_to_image_sdxl.py`'s data path instead: its `preprocess_train`
notes each image's `(height, width)`, resizes it with `train_resize`, cuts it with
`train_crop.get_params` and `crop` (or its `CenterCrop`), mirrors it with
`RandomHorizontalFlip(p=1.0)` when `random.random() < 0.5` (noting the corner's column from
the right), and notes the corner; its `collate_fn` stacks the images and lists the sizes and
corners (the script's table also holds precomputed embeddings, left out here).
`--interpolation lanczos`: the scripts' current default resize (`--image_interpolation_mode`).

usage:
  python text_to_image.py make --corpus DIR --out SAVED_DIR [--images 1000]
  python text_to_image.py run --loader torch|hpuload --data SAVED_DIR [--recipe diffusers|sdxl]
        [--resolution 512] [--interpolation bilinear|lanczos] [--center-crop] [--random-flip]
        [--epochs 3] [--workers 2] [--batch 16]
`run` prints one JSON line: images/s (median of the epochs after a warm-up one), each epoch's,
the process's resident memory after each epoch, and the loader's module."""

import argparse
import glob
import json
import random
import statistics
import time

import datasets
import numpy as np
import torch
from torchvision import transforms
from torchvision.transforms.functional import crop


def make(a):
    files = sorted(glob.glob(f"{a.corpus}/**/*.jpg", recursive=True))[: a.images]
    rng = random.Random(0)
    words = "a photo of the small large red blue dog cat tree house street by near at night in snow".split()
    captions = [[" ".join(rng.choices(words, k=rng.randint(5, 14))) for _ in range(3)] for _ in files]
    ds = datasets.Dataset.from_dict({"image": files, "text": captions}).cast_column("image", datasets.Image())
    ds.save_to_disk(a.out)
    print(f"wrote {len(files)} rows to {a.out}")


def tokenizer_for(ds):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<pad>", "<unk>"])
    bpe.train_from_iterator((c for row in ds.with_format(None)["text"] for c in row), trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", unk_token="<unk>")


def run(a):
    if a.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    torch.manual_seed(0)
    ds = datasets.load_from_disk(a.data)
    tokenizer = tokenizer_for(ds)
    image_column, caption_column = "image", "text"

    def tokenize_captions(examples, is_train=True):
        captions = []
        for caption in examples[caption_column]:
            if isinstance(caption, str):
                captions.append(caption)
            elif isinstance(caption, (list, np.ndarray)):
                captions.append(random.choice(caption) if is_train else caption[0])
        inputs = tokenizer(captions, max_length=77, padding="max_length", truncation=True, return_tensors="pt")
        return inputs.input_ids

    interpolation = getattr(transforms.InterpolationMode, a.interpolation.upper())
    if a.recipe == "sdxl":
        return run_sdxl(a, ds, DataLoader, interpolation)
    train_transforms = transforms.Compose(
        [
            transforms.Resize(a.resolution, interpolation=interpolation),
            transforms.CenterCrop(a.resolution) if a.center_crop else transforms.RandomCrop(a.resolution),
            transforms.RandomHorizontalFlip() if a.random_flip else transforms.Lambda(lambda x: x),
            transforms.ToTensor(),
            transforms.Normalize([0.5], [0.5]),
        ]
    )

    def preprocess_train(examples):
        images = [image.convert("RGB") for image in examples[image_column]]
        examples["pixel_values"] = [train_transforms(image) for image in images]
        examples["input_ids"] = tokenize_captions(examples)
        return examples

    train_dataset = ds.with_transform(preprocess_train)

    def collate_fn(examples):
        pixel_values = torch.stack([example["pixel_values"] for example in examples])
        pixel_values = pixel_values.to(memory_format=torch.contiguous_format).float()
        input_ids = torch.stack([example["input_ids"] for example in examples])
        return {"pixel_values": pixel_values, "input_ids": input_ids}

    loader = DataLoader(
        train_dataset, shuffle=True, collate_fn=collate_fn, batch_size=a.batch, num_workers=a.workers
    )
    measure(a, loader)


def run_sdxl(a, ds, DataLoader, interpolation):
    train_resize = transforms.Resize(a.resolution, interpolation=interpolation)
    train_crop = transforms.CenterCrop(a.resolution) if a.center_crop else transforms.RandomCrop(a.resolution)
    train_flip = transforms.RandomHorizontalFlip(p=1.0)
    train_transforms = transforms.Compose([transforms.ToTensor(), transforms.Normalize([0.5], [0.5])])

    def preprocess_train(examples):
        images = [image.convert("RGB") for image in examples["image"]]
        original_sizes, all_images, crop_top_lefts = [], [], []
        for image in images:
            original_sizes.append((image.height, image.width))
            image = train_resize(image)
            if a.center_crop:
                y1 = max(0, int(round((image.height - a.resolution) / 2.0)))
                x1 = max(0, int(round((image.width - a.resolution) / 2.0)))
                image = train_crop(image)
            else:
                y1, x1, h, w = train_crop.get_params(image, (a.resolution, a.resolution))
                image = crop(image, y1, x1, h, w)
            if a.random_flip and random.random() < 0.5:
                x1 = image.width - x1
                image = train_flip(image)
            crop_top_lefts.append((y1, x1))
            all_images.append(train_transforms(image))
        examples["original_sizes"] = original_sizes
        examples["crop_top_lefts"] = crop_top_lefts
        examples["pixel_values"] = all_images
        return examples

    def collate_fn(examples):
        return {
            "pixel_values": torch.stack([example["pixel_values"] for example in examples]),
            "original_sizes": [example["original_sizes"] for example in examples],
            "crop_top_lefts": [example["crop_top_lefts"] for example in examples],
        }

    loader = DataLoader(
        ds.with_transform(preprocess_train), shuffle=True, collate_fn=collate_fn, batch_size=a.batch, num_workers=a.workers
    )
    measure(a, loader)


def measure(a, loader):
    rates, rss = [], []
    for _ in range(a.epochs + 1):
        start, n = time.perf_counter(), 0
        for batch in loader:
            n += batch["pixel_values"].shape[0]
        rates.append(n / (time.perf_counter() - start))
        with open("/proc/self/status") as f:  # this process's resident memory after the epoch
            rss.append(int(f.read().split("VmRSS:")[1].split()[0]) // 1024)
    print(json.dumps({"loader": a.loader, "images_per_s": round(statistics.median(rates[1:]), 1),
                      "epochs": [round(r, 1) for r in rates], "rss_mib": rss, "module": type(loader).__module__}))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--corpus", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--images", type=int, default=1000)
    r = sub.add_parser("run")
    r.add_argument("--loader", choices=["torch", "hpuload"], required=True)
    r.add_argument("--data", required=True)
    r.add_argument("--recipe", choices=["diffusers", "sdxl"], default="diffusers")
    r.add_argument("--interpolation", choices=["bilinear", "lanczos"], default="bilinear")
    r.add_argument("--resolution", type=int, default=512)
    r.add_argument("--center-crop", action="store_true")
    r.add_argument("--random-flip", action="store_true")
    r.add_argument("--epochs", type=int, default=3)
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--batch", type=int, default=16)
    a = p.parse_args()
    make(a) if a.command == "make" else run(a)


if __name__ == "__main__":
    main()
