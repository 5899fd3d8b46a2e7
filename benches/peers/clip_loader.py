"""The data path of transformers' (and optimum-habana's) `run_clip.py`, torch against hpuload:
a JSON lines file of `image_path` and `caption` loaded by `load_dataset("json")`, filtered by
the script's `filter_corrupt_images` (`Image.open` of each path), the captions tokenized by
`map` (`max_length=77`, `padding="max_length"`, `truncation=True`) and removed, the script's
`transform_images` set with `set_transform` (each path read by torchvision's `read_image` in
RGB, put through the script's `Transform`: a `torch.nn.Sequential` of Resize([224]) bicubic,
CenterCrop(224), ConvertImageDtype(float), Normalize(CLIP's mean and std)), compiled by
`torch.jit.script` as transformers' copy does (`--no-script`: as optimum-habana's does not),
its `collate_fn`, shuffled. Only the DataLoader differs.

The tokenizer is a real fast tokenizer (`PreTrainedTokenizerFast`, a byte-level BPE trained
here on the captions, since CLIP's vocabulary cannot be downloaded offline).

usage:
  python clip_loader.py make --corpus DIR --out FILE.json [--images 1000]
  python clip_loader.py run --loader torch|hpuload --data FILE.json [--no-script]
        [--size 224] [--epochs 3] [--workers 2] [--batch 16]
  python clip_loader.py parity --data FILE.json [--backend auto|cpu] [--rows 256]
  python clip_loader.py make-parquet --corpus DIR --out FILE.parquet [--images 1000]
  python clip_loader.py run-parquet --loader torch|hpuload --data FILE.parquet [--batch 64]
`run-parquet`: the same loop over an img2dataset-style Parquet shard (the encoded images in a
binary `jpg` column), the function opening each from its bytes (`Image.open(io.BytesIO(b))`)
and tokenizing the captions itself.
`run` prints one JSON line: images/s (median of the epochs after a warm-up one); `parity` one
with the PSNR of hpuload's images against the dataset's own (lowest, median)."""

import argparse
import glob
import json
import os
import random
import statistics
import tempfile
import time

import datasets
import torch
from PIL import Image
from torchvision.io import ImageReadMode, read_image
from torchvision.transforms import CenterCrop, ConvertImageDtype, Normalize, Resize
from torchvision.transforms.functional import InterpolationMode

MEAN, STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]


class Transform(torch.nn.Module):
    def __init__(self, image_size, mean, std):
        super().__init__()
        self.transforms = torch.nn.Sequential(
            Resize([image_size], interpolation=InterpolationMode.BICUBIC),
            CenterCrop(image_size),
            ConvertImageDtype(torch.float),
            Normalize(mean, std),
        )

    def forward(self, x) -> torch.Tensor:
        with torch.no_grad():
            x = self.transforms(x)
        return x


def collate_fn(examples):
    pixel_values = torch.stack([example["pixel_values"] for example in examples])
    input_ids = torch.tensor([example["input_ids"] for example in examples], dtype=torch.long)
    attention_mask = torch.tensor([example["attention_mask"] for example in examples], dtype=torch.long)
    return {"pixel_values": pixel_values, "input_ids": input_ids, "attention_mask": attention_mask, "return_loss": True}


def timed_epochs(loader, epochs: int) -> dict:
    """Images/s of `epochs` epochs after a warm-up one (their median), each epoch's, and the
    loader's class (hpuload's, or torch's where it fell back)."""
    rates = []
    for _ in range(epochs + 1):
        start, n = time.perf_counter(), 0
        for batch in loader:
            n += batch["pixel_values"].shape[0]
        rates.append(n / (time.perf_counter() - start))
    return {"images_per_s": round(statistics.median(rates[1:]), 1), "epochs": [round(r, 1) for r in rates],
            "kind": type(loader).__name__}


def make(a):
    files = sorted(glob.glob(f"{a.corpus}/**/*.jpg", recursive=True))[: a.images]
    rng = random.Random(0)
    words = "a photo of the small large red blue dog cat tree house street by near at night in snow".split()
    with open(a.out, "w") as f:
        for path in files:
            caption = " ".join(rng.choices(words, k=rng.randint(5, 14)))
            f.write(json.dumps({"image_path": os.path.abspath(path), "caption": caption}) + "\n")
    print(f"wrote {len(files)} rows to {a.out}")


def tokenizer_for(captions):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel()
    bpe.train_from_iterator(captions, trainers.BpeTrainer(vocab_size=500, special_tokens=["<pad>", "<unk>"]))
    return PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", unk_token="<unk>")


def run(a):
    if a.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    torch.manual_seed(0)
    cache = tempfile.mkdtemp(prefix="clip-cache-")
    dataset = datasets.load_dataset("json", data_files={"train": a.data}, cache_dir=cache)
    image_column, caption_column = "image_path", "caption"
    column_names = dataset["train"].column_names
    tokenizer = tokenizer_for(dataset["train"][caption_column])
    image_transformations = Transform(a.size, MEAN, STD)
    if a.script:
        image_transformations = torch.jit.script(image_transformations)

    def tokenize_captions(examples):
        captions = list(examples[caption_column])
        text_inputs = tokenizer(captions, max_length=77, padding="max_length", truncation=True)
        examples["input_ids"] = text_inputs.input_ids
        examples["attention_mask"] = text_inputs.attention_mask
        return examples

    def transform_images(examples):
        images = [read_image(image_file, mode=ImageReadMode.RGB) for image_file in examples[image_column]]
        examples["pixel_values"] = [image_transformations(image) for image in images]
        return examples

    def filter_corrupt_images(examples):
        valid_images = []
        for image_file in examples[image_column]:
            try:
                Image.open(image_file)
                valid_images.append(True)
            except Exception:
                valid_images.append(False)
        return valid_images

    train_dataset = dataset["train"].filter(filter_corrupt_images, batched=True)
    train_dataset = train_dataset.map(
        function=tokenize_captions, batched=True, remove_columns=[c for c in column_names if c != image_column]
    )
    train_dataset.set_transform(transform_images)
    loader = DataLoader(train_dataset, shuffle=True, collate_fn=collate_fn, batch_size=a.batch, num_workers=a.workers)
    print(json.dumps({"loader": a.loader, "scripted": a.script, **timed_epochs(loader, a.epochs)}))


def make_parquet(a):
    """An img2dataset-style Parquet shard of the corpus: `key`, `jpg` (the encoded photo) and
    `txt` (its caption)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted(glob.glob(f"{a.corpus}/**/*.jpg", recursive=True))[: a.images]
    rng = random.Random(0)
    words = "a photo of the small large red blue dog cat tree house street by near at night in snow".split()
    table = pa.table(
        {
            "key": [f"{k:09}" for k in range(len(files))],
            "jpg": pa.array([open(f, "rb").read() for f in files], pa.binary()),
            "txt": [" ".join(rng.choices(words, k=rng.randint(5, 14))) for _ in files],
        }
    )
    pq.write_table(table, a.out, row_group_size=256)
    print(f"wrote {len(files)} rows to {a.out}")


def run_parquet(a):
    """The same loop over the Parquet shard: the function opens each image from its bytes
    (`Image.open(io.BytesIO(...))`), applies a CLIP training transform (RandomResizedCrop 224
    bicubic, scale 0.9-1, ToTensor, Normalize) and tokenizes the captions."""
    import io

    from torchvision import transforms as T

    if a.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    torch.manual_seed(0)
    ds = datasets.load_dataset("parquet", data_files=a.data, split="train", cache_dir=tempfile.mkdtemp(prefix="clip-cache-"))
    tokenizer = tokenizer_for(ds["txt"])
    train = T.Compose(
        [
            T.RandomResizedCrop(a.size, scale=(0.9, 1.0), interpolation=T.InterpolationMode.BICUBIC),
            T.ToTensor(),
            T.Normalize(MEAN, STD),
        ]
    )

    def preprocess(examples):
        examples["pixel_values"] = [train(Image.open(io.BytesIO(b)).convert("RGB")) for b in examples["jpg"]]
        text = tokenizer(examples["txt"], max_length=77, padding="max_length", truncation=True)
        examples["input_ids"], examples["attention_mask"] = text.input_ids, text.attention_mask
        return examples

    ds.set_transform(preprocess)
    loader = DataLoader(ds, shuffle=True, collate_fn=collate_fn, batch_size=a.batch, num_workers=a.workers)
    print(json.dumps({"loader": a.loader, "table": "parquet bytes", **timed_epochs(loader, a.epochs)}))


def parity(a):
    """PSNR of hpuload's batches (`--backend`) against the dataset's own, per image, over the
    first `--rows` rows: the lowest and the median, and the largest difference in levels."""
    from hpuload.torch import DataLoader

    ds = datasets.load_dataset("json", data_files={"train": a.data}, cache_dir=tempfile.mkdtemp(prefix="clip-cache-"))
    ds = ds["train"].select(range(a.rows))
    transform = torch.jit.script(Transform(a.size, MEAN, STD))

    def transform_images(examples):
        examples["pixel_values"] = [transform(read_image(p, mode=ImageReadMode.RGB)) for p in examples["image_path"]]
        return examples

    def stack(examples):
        return torch.stack([e["pixel_values"] for e in examples])

    ds.set_transform(transform_images)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    psnr, largest = [], 0.0
    theirs = torch.utils.data.DataLoader(ds, batch_size=64, collate_fn=stack)
    for ours, want in zip(DataLoader(ds, batch_size=64, collate_fn=stack, backend=a.backend), theirs, strict=True):
        levels = (ours - want) * std * 255
        largest = max(largest, levels.abs().max().item())
        mse = (levels**2).mean(dim=(1, 2, 3)).clamp_min(1e-12)
        psnr += (10 * torch.log10(255**2 / mse)).tolist()
    psnr.sort()
    print(json.dumps({"backend": a.backend, "rows": a.rows, "psnr_min": round(psnr[0], 1),
                      "psnr_median": round(psnr[len(psnr) // 2], 1), "largest_level_difference": round(largest, 2)}))


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
    r.add_argument("--no-script", dest="script", action="store_false")
    r.add_argument("--size", type=int, default=224)
    r.add_argument("--epochs", type=int, default=3)
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--batch", type=int, default=16)
    mp = sub.add_parser("make-parquet")
    mp.add_argument("--corpus", required=True)
    mp.add_argument("--out", required=True)
    mp.add_argument("--images", type=int, default=1000)
    rp = sub.add_parser("run-parquet")
    rp.add_argument("--loader", choices=["torch", "hpuload"], required=True)
    rp.add_argument("--data", required=True)
    rp.add_argument("--size", type=int, default=224)
    rp.add_argument("--epochs", type=int, default=3)
    rp.add_argument("--workers", type=int, default=2)
    rp.add_argument("--batch", type=int, default=64)
    q = sub.add_parser("parity")
    q.add_argument("--data", required=True)
    q.add_argument("--backend", choices=["auto", "cpu"], default="auto")
    q.add_argument("--rows", type=int, default=256)
    q.add_argument("--size", type=int, default=224)
    a = p.parse_args()
    commands = {"make": make, "run": run, "parity": parity, "make-parquet": make_parquet, "run-parquet": run_parquet}
    commands[a.command](a)


if __name__ == "__main__":
    main()
