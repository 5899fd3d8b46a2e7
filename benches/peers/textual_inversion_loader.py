"""The data path of diffusers' `textual_inversion.py` (and optimum-habana's copy), torch against
hpuload: the script's `TextualInversionDataset` over a folder of a few photos, as it is written
there (`Image.open`, converted to RGB where it is not, `np.array`, `Image.fromarray`, Pillow's
resize to `resolution` squared, torchvision's `RandomHorizontalFlip(0.5)`, `(x / 127.5 -
1.0).astype(np.float32)`, a prompt template picked with `random.choice` and tokenized on each
call), `repeats` copies of the folder an epoch, shuffled, batch 16 and no worker processes (the
script's defaults). Only the DataLoader differs.

The tokenizer is a real fast tokenizer trained here on the templates (CLIP's cannot be
downloaded offline), called as the script calls CLIP's.

usage:
  python textual_inversion_loader.py make --corpus DIR --out FOLDER [--images 5] [--scale 1.0]
  python textual_inversion_loader.py run --loader torch|hpuload --data FOLDER
        [--resolution 512] [--center_crop] [--epochs 2] [--workers 0] [--batch 16] [--repeats 100]
  python textual_inversion_loader.py parity --data FOLDER [--resolution 512] [--center_crop]
`--sdxl`: `textual_inversion_sdxl.py`'s Dataset (its random or centre crop to `resolution`,
which must fit in every photo, the corner and size noted, two tokenizers; session 107).
`run` prints one JSON line: samples/s (median of the epochs after a warm-up one) and the RSS
after each epoch. `parity` compares hpuload's batches with torch's, unshuffled, one template
and no flip: the CPU path exactly, the media engine by PSNR."""

import argparse
import glob
import json
import os
import random
import shutil
import statistics
import sys
import time

import numpy as np
import PIL
import torch
from PIL import Image
from torch.utils.data import Dataset
from torchvision import transforms

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from controlnet_loader import psnr  # noqa: E402

#: Prompt templates of the script's kind ("a photo of a {}" and the like), written here.
TEMPLATES = [
    f"{look} {kind} of {article} {{}}"
    for look in ("a", "a bright", "a dark", "a close-up", "a cropped", "a small")
    for kind in ("photo", "rendering", "picture")
    for article in ("a", "the")
]


def tokenizer(max_length: int = 77):
    """A real fast tokenizer trained on the templates, called as CLIP's."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel()
    bpe.train_from_iterator([t.format("*") for t in TEMPLATES], trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<unk>"]))
    return PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", unk_token="<unk>", model_max_length=max_length)


class TextualInversionDataset(Dataset):
    """The script's Dataset, its code as it is written there."""

    def __init__(self, data_root, tokenizer, size=512, repeats=100, interpolation="bicubic", flip_p=0.5, templates=TEMPLATES, center_crop=False):
        self.data_root, self.tokenizer, self.size = data_root, tokenizer, size
        self.placeholder_token, self.center_crop, self.flip_p = "*", center_crop, flip_p
        self.image_paths = [os.path.join(self.data_root, f) for f in os.listdir(self.data_root)]
        self.num_images = len(self.image_paths)
        self._length = self.num_images * repeats
        self.interpolation = {"bilinear": PIL.Image.Resampling.BILINEAR, "bicubic": PIL.Image.Resampling.BICUBIC}[interpolation]
        self.templates = templates
        self.flip_transform = transforms.RandomHorizontalFlip(p=self.flip_p)

    def __len__(self):
        return self._length

    def __getitem__(self, i):
        example = {}
        image = Image.open(self.image_paths[i % self.num_images])
        if not image.mode == "RGB":
            image = image.convert("RGB")
        text = random.choice(self.templates).format(self.placeholder_token)
        example["input_ids"] = self.tokenizer(
            text, padding="max_length", truncation=True, max_length=self.tokenizer.model_max_length, return_tensors="pt"
        ).input_ids[0]
        img = np.array(image).astype(np.uint8)
        if self.center_crop:
            crop = min(img.shape[0], img.shape[1])
            (h, w,) = (img.shape[0], img.shape[1],)
            img = img[(h - crop) // 2 : (h + crop) // 2, (w - crop) // 2 : (w + crop) // 2]
        image = Image.fromarray(img)
        image = image.resize((self.size, self.size), resample=self.interpolation)
        image = self.flip_transform(image)
        image = np.array(image).astype(np.uint8)
        image = (image / 127.5 - 1.0).astype(np.float32)
        example["pixel_values"] = torch.from_numpy(image).permute(2, 0, 1)
        return example


class SDXLTextualInversionDataset(TextualInversionDataset):
    """`textual_inversion_sdxl.py`'s Dataset, its code as it is written there: two tokenizers,
    the image's size noted, `self.crop` (a `RandomCrop`, asked for a corner with `get_params`
    then cut with `functional.crop`; with `--center_crop` a `CenterCrop`) and the corner
    noted, an array and back, Pillow's resize to `resolution` squared (the crop's own size),
    the flip and `x / 127.5 - 1`."""

    def __init__(self, data_root, tokenizer, size=512, center_crop=False, **kw):
        super().__init__(data_root, tokenizer, size=size, center_crop=center_crop, **kw)
        self.tokenizer_1 = self.tokenizer_2 = tokenizer
        del self.tokenizer
        self.crop = transforms.CenterCrop(size) if center_crop else transforms.RandomCrop(size)

    def __getitem__(self, i):
        example = {}
        image = Image.open(self.image_paths[i % self.num_images])
        if not image.mode == "RGB":
            image = image.convert("RGB")
        text = random.choice(self.templates).format(self.placeholder_token)
        example["original_size"] = (image.height, image.width)
        if self.center_crop:
            y1 = max(0, int(round((image.height - self.size) / 2.0)))
            x1 = max(0, int(round((image.width - self.size) / 2.0)))
            image = self.crop(image)
        else:
            y1, x1, h, w = self.crop.get_params(image, (self.size, self.size))
            image = transforms.functional.crop(image, y1, x1, h, w)
        example["crop_top_left"] = (y1, x1)
        example["input_ids_1"] = self.tokenizer_1(
            text, padding="max_length", truncation=True, max_length=self.tokenizer_1.model_max_length, return_tensors="pt"
        ).input_ids[0]
        example["input_ids_2"] = self.tokenizer_2(
            text, padding="max_length", truncation=True, max_length=self.tokenizer_2.model_max_length, return_tensors="pt"
        ).input_ids[0]
        img = np.array(image).astype(np.uint8)
        image = Image.fromarray(img)
        image = image.resize((self.size, self.size), resample=self.interpolation)
        image = self.flip_transform(image)
        image = np.array(image).astype(np.uint8)
        image = (image / 127.5 - 1.0).astype(np.float32)
        example["pixel_values"] = torch.from_numpy(image).permute(2, 0, 1)
        return example


def dataset(args, **kw):
    kind = SDXLTextualInversionDataset if args.sdxl else TextualInversionDataset
    return kind(args.data, tokenizer(), size=args.resolution, center_crop=args.center_crop, **kw)


def make(args) -> None:
    """`--images` corpus photos, one from each class folder in turn, into a flat folder."""
    os.makedirs(args.out, exist_ok=True)
    classes = sorted(glob.glob(os.path.join(args.corpus, "*", "")))
    for k in range(args.images):
        photos = sorted(glob.glob(os.path.join(classes[k % len(classes)], "*.jpg")))
        out = os.path.join(args.out, f"{k}.jpg")
        if args.scale == 1.0:
            shutil.copy(photos[k // len(classes)], out)
            continue
        # `--scale`: each photo resized by that factor (Lanczos) and saved at quality 95, for
        # crops larger than the corpus's photos (SDXL's resolution).
        image = Image.open(photos[k // len(classes)]).convert("RGB")
        size = (round(image.width * args.scale), round(image.height * args.scale))
        image.resize(size, Image.Resampling.LANCZOS).save(out, quality=95)


def loader_of(kind: str, ds, args, shuffle=True):
    if kind == "torch":
        return torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=shuffle, num_workers=args.workers)
    from hpuload.torch import DataLoader

    backend = getattr(args, "backend", None)
    extra = {} if backend is None else {"backend": backend}
    return DataLoader(ds, batch_size=args.batch, shuffle=shuffle, num_workers=args.workers, **extra)


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run(args) -> None:
    ds = dataset(args, repeats=args.repeats)
    loader = loader_of(args.loader, ds, args)
    rates, rss = [], []
    for epoch in range(args.epochs + 1):
        start, n = time.perf_counter(), 0
        for batch in loader:
            n += len(batch["pixel_values"])
        if epoch:
            rates.append(n / (time.perf_counter() - start))
        rss.append(round(rss_mib(), 1))
    kind = type(loader).__module__.split(".")[0]
    print(json.dumps({"loader": args.loader, "ran": kind, "workers": args.workers, "samples_per_s": round(statistics.median(rates), 1), "rss_mib": rss}))


def parity(args) -> None:
    ds = dataset(args, repeats=1, flip_p=0.0, templates=TEMPLATES[:1])
    args.batch, args.workers = 4, 0
    want = list(loader_of("torch", ds, args, shuffle=False))
    for backend in ("cpu", "auto"):
        args.backend = backend
        got = list(loader_of("hpuload", ds, args, shuffle=False))
        if args.sdxl and not args.center_crop:
            # Torch's crops are its own draws: each of hpuload's images against the photo cut
            # at the corner handed out beside it.
            want = [sdxl_cuts(ds, batch, k * args.batch) for k, batch in enumerate(got)]
        ids = ("input_ids_1", "input_ids_2") if args.sdxl else ("input_ids",)
        same = all(torch.equal(a["pixel_values"], b["pixel_values"]) and all(torch.equal(a[k], b[k]) for k in ids) for a, b in zip(got, want))
        low = min(psnr(a["pixel_values"], b["pixel_values"], 2.0) for a, b in zip(got, want))
        print(json.dumps({"backend": backend, "batches": len(got), "exact": same, "psnr_db_lowest": round(low, 1)}))


def sdxl_cuts(ds, batch, first: int) -> dict:
    """`batch` with its pixel values replaced by the script's of each photo cut at the corner
    the batch hands out beside it (no flip)."""
    cuts = []
    for k in range(len(batch["pixel_values"])):
        top, left = int(batch["crop_top_left"][0][k]), int(batch["crop_top_left"][1][k])
        image = np.array(Image.open(ds.image_paths[(first + k) % ds.num_images]).convert("RGB"))
        image = image[top : top + ds.size, left : left + ds.size]
        cuts.append(torch.from_numpy((image / 127.5 - 1.0).astype(np.float32)).permute(2, 0, 1))
    return {**batch, "pixel_values": torch.stack(cuts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--corpus", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--images", type=int, default=5)
    m.add_argument("--scale", type=float, default=1.0, help="resize each photo by this factor (session 107)")
    r = sub.add_parser("run")
    r.add_argument("--loader", choices=("torch", "hpuload"), required=True)
    p = sub.add_parser("parity")
    for s in (r, p):
        s.add_argument("--data", required=True)
        s.add_argument("--resolution", type=int, default=512)
        s.add_argument("--center_crop", action="store_true", help="the script's --center_crop")
        s.add_argument("--sdxl", action="store_true", help="textual_inversion_sdxl.py's Dataset")
    r.add_argument("--epochs", type=int, default=2)
    r.add_argument("--workers", type=int, default=0)
    r.add_argument("--batch", type=int, default=16)
    r.add_argument("--repeats", type=int, default=100)
    args = parser.parse_args()
    {"make": make, "run": run, "parity": parity}[args.cmd](args)


if __name__ == "__main__":
    main()
