"""The data path of diffusers' `train_text_to_image.py`, torch against hpuload: a `datasets`
table of images and captions (`save_to_disk`, the bytes embedded), the script's
`preprocess_train` function set with `with_transform` (each image `.convert("RGB")`, its
`train_transforms`: Resize(resolution) bilinear, RandomCrop or CenterCrop, RandomHorizontalFlip
or an identity Lambda, ToTensor, Normalize([0.5], [0.5]); the captions tokenized, one drawn
where a row has several), its `collate_fn`, shuffled. Only the DataLoader differs.

The tokenizer is a real fast tokenizer (`PreTrainedTokenizerFast`, a byte-level BPE trained here
on the captions, since CLIP's vocabulary cannot be downloaded offline), called as the script
calls CLIP's: `max_length=77`, `padding="max_length"`, `truncation=True`, `return_tensors="pt"`.

usage:
  python text_to_image.py make --corpus DIR --out SAVED_DIR [--images 1000]
  python text_to_image.py run --loader torch|hpuload --data SAVED_DIR
        [--resolution 512] [--center-crop] [--random-flip] [--epochs 3] [--workers 2] [--batch 16]
`run` prints one JSON line: images/s (median of the epochs after a warm-up one)."""

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

    train_transforms = transforms.Compose(
        [
            transforms.Resize(a.resolution, interpolation=transforms.InterpolationMode.BILINEAR),
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
    rates = []
    for _ in range(a.epochs + 1):
        start, n = time.perf_counter(), 0
        for batch in loader:
            n += batch["pixel_values"].shape[0]
        rates.append(n / (time.perf_counter() - start))
    print(json.dumps({"loader": a.loader, "images_per_s": round(statistics.median(rates[1:]), 1),
                      "epochs": [round(r, 1) for r in rates], "kind": type(loader).__name__}))


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
