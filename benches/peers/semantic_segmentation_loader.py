"""The data path of transformers' `run_semantic_segmentation.py` (and optimum-habana's copy
of it), torch against hpuload: a `datasets` table of `image` and `label` Image columns (the
names the script renames `segments/sidewalk-semantic`'s to; `save_to_disk`, the bytes
embedded), `set_transform(partial(preprocess_batch, transforms=train_transforms))` with the
script's training `Compose` (the labels reduced by a `Lambda`, `PadIfNeeded` and `RandomCrop`
to the image processor's 512x512, a flip, `Normalize` with ImageNet's statistics,
`ToTensorV2`), transformers' `default_data_collator`, shuffled, as the Trainer loads it
(`--remove_unused_columns False`). Only the DataLoader differs.

The images are the corpus's photos (JPEG). Each mask is made from its photo: the smoothed
grey levels in 35 classes (sidewalk-semantic has 35), a grey PNG of the photo's size, so that
masks have regions and edges as real label maps do.

usage:
  python semantic_segmentation_loader.py make --corpus DIR --out SAVED_DIR [--images 800] [--rgb-only]
  python semantic_segmentation_loader.py run --loader torch|hpuload --data SAVED_DIR
        [--size 512] [--epochs 3] [--workers 2] [--batch 8] [--split train|eval]
        [--recipe script|guide]
  python semantic_segmentation_loader.py parity --data SAVED_DIR [--batches 4] [--split train|eval]
        [--recipe script|guide]
`--recipe guide` takes transformers' semantic segmentation guide's functions instead (Segformer's
image processor given the images and their maps, each image through `ColorJitter` first to
train). `--split eval` takes the script's evaluation transform (`Resize` of image and mask) and the
Trainer's evaluation order. `run` prints one JSON line: images/s (median of the epochs after a
warm-up one). `parity` checks each of hpuload's samples against albumentations' own for the offset and flip hpuload
drew (image and mask), on the CPU path (exact) and on the media engine (PSNR)."""

import argparse
import glob
import io
import json
import math
import os
import sys
from functools import partial

import albumentations as A
import datasets
import numpy as np
import torch
from albumentations.pytorch import ToTensorV2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clip_loader import timed_epochs  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def make(a):
    from PIL import Image, ImageFilter

    files = sorted(glob.glob(f"{a.corpus}/**/*.jpg", recursive=True))[: a.images]
    rows = {"image": [], "label": []}
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        with Image.open(io.BytesIO(data)) as im:
            if a.rgb_only and im.mode != "RGB":
                continue
            grey = im.convert("L").filter(ImageFilter.GaussianBlur(6))
        mask = Image.fromarray((np.asarray(grey).astype(np.uint16) * 35 // 256).astype(np.uint8), mode="L")
        out = io.BytesIO()
        mask.save(out, format="PNG")
        rows["image"].append({"bytes": data, "path": os.path.basename(path)})
        rows["label"].append({"bytes": out.getvalue(), "path": os.path.basename(path)[:-4] + ".png"})
    features = datasets.Features({"image": datasets.Image(), "label": datasets.Image()})
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(a.out)
    print(f"wrote {len(rows['image'])} rows to {a.out}")


def reduce_labels_transform(labels: np.ndarray, **kwargs) -> np.ndarray:
    labels[labels == 0] = 255
    labels = labels - 1
    labels[labels == 254] = 255
    return labels


def train_dataset(data: str, size: int, do_reduce_labels: bool = True, split: str = "train"):
    """The script's training (or evaluation) transforms and `preprocess_batch` over the
    saved table."""
    height, width = size, size
    val_transforms = A.Compose(
        [
            A.Lambda(name="reduce_labels", mask=reduce_labels_transform if do_reduce_labels else None, p=1.0),
            A.Resize(height=height, width=width, p=1.0),
            A.Normalize(mean=MEAN, std=STD, max_pixel_value=255.0, p=1.0),
            ToTensorV2(),
        ]
    )
    train_transforms = A.Compose(
        [
            A.Lambda(name="reduce_labels", mask=reduce_labels_transform if do_reduce_labels else None, p=1.0),
            # pad image with 255, because it is ignored by loss
            A.PadIfNeeded(min_height=height, min_width=width, border_mode=0, value=255, p=1.0),
            A.RandomCrop(height=height, width=width, p=1.0),
            A.HorizontalFlip(p=0.5),
            A.Normalize(mean=MEAN, std=STD, max_pixel_value=255.0, p=1.0),
            ToTensorV2(),
        ]
    )

    def preprocess_batch(example_batch, transforms: A.Compose):
        pixel_values = []
        labels = []
        for image, target in zip(example_batch["image"], example_batch["label"]):
            transformed = transforms(image=np.array(image.convert("RGB")), mask=np.array(target))
            pixel_values.append(transformed["image"])
            labels.append(transformed["mask"])
        encoding = {}
        encoding["pixel_values"] = torch.stack(pixel_values).to(torch.float)
        encoding["labels"] = torch.stack(labels).to(torch.long)
        return encoding

    transforms = train_transforms if split == "train" else val_transforms
    ds = datasets.load_from_disk(data)
    ds.set_transform(partial(preprocess_batch, transforms=transforms))
    return ds, transforms


def guide_dataset(data: str, size: int, split: str = "train"):
    """transformers' semantic segmentation guide's functions over the saved table (its masks
    column is `label` here, `annotation` in the guide's `scene_parse_150`): `ColorJitter` of
    each image to train, then Segformer's image processor (`do_reduce_labels=True`, as the
    guide loads `nvidia/mit-b0`'s) given the images and their maps."""
    from torchvision.transforms import ColorJitter
    from transformers import SegformerImageProcessor

    image_processor = SegformerImageProcessor(do_reduce_labels=True, size={"height": size, "width": size})
    jitter = ColorJitter(brightness=0.25, contrast=0.25, saturation=0.25, hue=0.1)

    def train_transforms(example_batch):
        images = [jitter(x) for x in example_batch["image"]]
        labels = [x for x in example_batch["label"]]
        inputs = image_processor(images, labels)
        return inputs

    def val_transforms(example_batch):
        images = [x for x in example_batch["image"]]
        labels = [x for x in example_batch["label"]]
        inputs = image_processor(images, labels)
        return inputs

    ds = datasets.load_from_disk(data)
    ds.set_transform(train_transforms if split == "train" else val_transforms)
    return ds, image_processor


def run(a):
    from transformers import default_data_collator

    if a.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    torch.manual_seed(0)
    ds, _ = (train_dataset if a.recipe == "script" else guide_dataset)(a.data, a.size, split=a.split)
    # The Trainer's evaluation loader keeps the table's order.
    shuffle = a.split == "train"
    loader = DataLoader(ds, shuffle=shuffle, collate_fn=default_data_collator, batch_size=a.batch, num_workers=a.workers)
    timed = timed_epochs(loader, a.epochs)
    print(json.dumps({"loader": a.loader, "recipe": a.recipe, "split": a.split, **timed}))


def psnr(got: torch.Tensor, want: torch.Tensor, span: float) -> float:
    mse = float(((got.double() - want.double()) ** 2).mean())
    return math.inf if mse == 0 else 10 * math.log10(span * span / mse)


def parity(a):
    from transformers import default_data_collator

    from hpuload.torch import DataLoader

    if a.split == "eval":
        # Nothing drawn: torch's loader's batches, which the CPU path gives exactly (the
        # guide's processor: within float rounding, its fused rescale and normalize).
        ds, _ = (train_dataset if a.recipe == "script" else guide_dataset)(a.data, a.size, split="eval")
        theirs = torch.utils.data.DataLoader(ds, batch_size=a.batch, collate_fn=default_data_collator)
        span = float(max((1 - m) / s for m, s in zip(MEAN, STD)) - min((0 - m) / s for m, s in zip(MEAN, STD)))
        for backend in ("cpu", "auto"):
            ours = DataLoader(ds, batch_size=a.batch, collate_fn=default_data_collator, backend=backend)
            exact = masks_exact = True
            worst = math.inf
            for _, x, y in zip(range(a.batches), ours, theirs):
                exact = exact and bool((x["pixel_values"] - y["pixel_values"]).abs().max() < (1e-5 if a.recipe == "guide" else 1e-12))
                masks_exact = masks_exact and torch.equal(x["labels"], y["labels"])
                worst = min(worst, psnr(x["pixel_values"], y["pixel_values"], span))
            print(json.dumps({"recipe": a.recipe, "split": "eval", "backend": backend, "images_exact": exact, "masks_exact": masks_exact, "lowest_psnr_db": round(worst, 1)}))
        return
    if a.recipe == "guide":
        sys.exit("the guide's training jitter is drawn: its parity is checked on --split eval (and by the tests)")
    ds, compose = train_dataset(a.data, a.size)
    lam, pad, crop, flip, norm, to_tensor = compose.transforms
    raw = ds.with_format(None)
    span = float(max((1 - m) / s for m, s in zip(MEAN, STD)) - min((0 - m) / s for m, s in zip(MEAN, STD)))
    for backend in ("cpu", "auto"):
        loader = DataLoader(ds, batch_size=a.batch, collate_fn=default_data_collator, backend=backend, seed=1)
        worst, exact, masks_exact = math.inf, True, True
        for b, batch in zip(range(a.batches), loader):
            for k in range(batch["labels"].shape[0]):
                index = b * a.batch + k
                row = raw[index]
                image, mask = np.array(row["image"].convert("RGB")), np.array(row["label"])
                plan = json.loads(loader._core.sample_plan(0, index, image.shape[1], image.shape[0]))
                padded = A.Compose([pad])(image=image, mask=lam.apply_to_mask(mask.copy()))
                top, left = plan["resized_crop"]["at"]
                image = padded["image"][top : top + crop.height, left : left + crop.width]
                mask = padded["mask"][top : top + crop.height, left : left + crop.width]
                if plan.get("flip") or {"op": "hflip"} in plan.get("ops", []):
                    image, mask = flip.apply(image), flip.apply_to_mask(mask)
                want = to_tensor(image=norm.apply(image), mask=mask)
                exact = exact and torch.equal(batch["pixel_values"][k], want["image"].float())
                masks_exact = masks_exact and torch.equal(batch["labels"][k], want["mask"].long())
                worst = min(worst, psnr(batch["pixel_values"][k], want["image"].float(), span))
        print(json.dumps({"backend": backend, "images_exact": exact, "masks_exact": masks_exact, "lowest_psnr_db": round(worst, 1)}))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--corpus", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--images", type=int, default=800)
    # The guide's function hands Segformer's processor each image in its own mode, which
    # fails on a grey one in torch's loader too.
    m.add_argument("--rgb-only", action="store_true")
    for name in ("run", "parity"):
        r = sub.add_parser(name)
        r.add_argument("--data", required=True)
        r.add_argument("--size", type=int, default=512)
        r.add_argument("--batch", type=int, default=8)
        r.add_argument("--split", choices=["train", "eval"], default="train")
        r.add_argument("--recipe", choices=["script", "guide"], default="script")
        if name == "run":
            r.add_argument("--loader", choices=["torch", "hpuload"], required=True)
            r.add_argument("--epochs", type=int, default=3)
            r.add_argument("--workers", type=int, default=2)
        else:
            r.add_argument("--batches", type=int, default=4)
    a = p.parse_args()
    {"make": make, "run": run, "parity": parity}[a.command](a)


if __name__ == "__main__":
    main()
