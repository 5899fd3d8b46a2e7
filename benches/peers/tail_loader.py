"""A training transform that hpuload translates only in part, through torch's DataLoader and
through hpuload's drop-in (the script is the same; only the loader differs). Prints one JSON
line per measured epoch: images/s.

- `--tail lambda`: the ResNet-50 training transform, then a `Lambda` that turns RGB into BGR
  (what scripts ported from Caffe weights do). hpuload runs the crop, flip, tensor conversion
  and Normalize natively and the Lambda in Python.
- `--tail deit3`: DeiT III's ThreeAugment as its script builds it with `--src` (a random
  resized crop, bicubic, and a flip; then one of grey, solarize or a Pillow Gaussian blur of a
  random radius, each a small class of the script's own; then ColorJitter 0.3, the tensor
  conversion and Normalize). hpuload runs the crop and flip natively and the rest in Python.
- `--tail none`: the `lambda` transform without its Lambda: what the native prefix alone
  gives, the bound for `lambda`.
- `--tail 3a`: timm's `create_transform(224, is_training=True, auto_augment="3a")` (timm's
  own form of the same policy), which hpuload runs natively whole (no tail: the comparison
  point for `deit3`).

usage: python tail_loader.py --data DIR --loader torch|hpuload [--tail lambda|none|deit3|3a] [--epochs 2]
"""

import argparse
import json
import random
import time
import warnings

import torch.utils.data as tud
from torchvision import datasets
from torchvision import transforms as T


class Grey:
    """The script's own: the image in grey, three channels."""

    def __call__(self, img):
        return img.convert("L").convert("RGB")


class Solarize:
    """The script's own: Pillow's solarize at 128."""

    def __call__(self, img):
        from PIL import ImageOps

        return ImageOps.solarize(img)


class Blur:
    """The script's own: a Pillow Gaussian blur of a radius drawn from Python's `random`."""

    def __call__(self, img):
        from PIL import ImageFilter

        return img.filter(ImageFilter.GaussianBlur(radius=random.uniform(0.1, 2.0)))


def transform(kind):
    if kind == "deit3":
        return T.Compose([
            T.RandomResizedCrop(224, interpolation=T.InterpolationMode.BICUBIC), T.RandomHorizontalFlip(),
            T.RandomChoice([Grey(), Solarize(), Blur()]), T.ColorJitter(0.3, 0.3, 0.3), T.ToTensor(),
            T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ])
    if kind == "3a":
        from timm.data import create_transform

        return create_transform(224, is_training=True, auto_augment="3a")
    steps = [
        T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ]
    if kind == "lambda":
        steps.append(T.Lambda(lambda x: x.flip(0)))
    return T.Compose(steps)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--loader", choices=["torch", "hpuload"], required=True)
    ap.add_argument("--tail", choices=["lambda", "none", "deit3", "3a"], default="lambda")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    a = ap.parse_args()
    if a.loader == "hpuload":
        from hpuload.torch import DataLoader, FallbackWarning

        warnings.simplefilter("error", FallbackWarning)
    else:
        DataLoader = tud.DataLoader
    loader = DataLoader(
        datasets.ImageFolder(a.data, transform(a.tail)), batch_size=a.batch, shuffle=True,
        num_workers=a.workers, drop_last=True,
    )
    for epoch in range(a.epochs + 1):  # the first is a warm-up
        start, n = time.perf_counter(), 0
        for x, _ in loader:
            n += x.shape[0]
        if epoch:
            rate = n / (time.perf_counter() - start)
            line = {"loader": a.loader, "tail": a.tail, "epoch": epoch, "images_per_s": round(rate, 1)}
            if a.loader == "hpuload" and a.tail not in ("none", "3a"):
                # Where the tail ran (the thread or the processes), on a wheel that says.
                line["runs_in"] = loader.report()["python_tail"].get("runs_in", {}).get("where")
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
