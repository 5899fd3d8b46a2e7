"""A training transform that hpuload translates only in part, through torch's DataLoader and
through hpuload's drop-in (the script is the same; only the loader differs). Prints one JSON
line per measured epoch: images/s.

- `--tail lambda`: the ResNet-50 training transform, then a `Lambda` that turns RGB into BGR
  (what scripts ported from Caffe weights do). hpuload runs the crop, flip, tensor conversion
  and Normalize natively and the Lambda in Python.
- `--tail 3a`: timm's `create_transform(224, is_training=True, auto_augment="3a")` (DeiT III's
  ThreeAugment policy, one of grey, solarize or blur, then ColorJitter 0.4). hpuload runs the
  crop and flip natively and the policy, ColorJitter, the tensor conversion and Normalize in
  Python.

usage: python tail_loader.py --data DIR --loader torch|hpuload [--tail lambda|3a] [--epochs 2]
"""

import argparse
import json
import time
import warnings

import torch.utils.data as tud
from torchvision import datasets
from torchvision import transforms as T


def transform(kind):
    if kind == "3a":
        from timm.data import create_transform

        return create_transform(224, is_training=True, auto_augment="3a")
    return T.Compose([
        T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        T.Lambda(lambda x: x.flip(0)),
    ])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--loader", choices=["torch", "hpuload"], required=True)
    ap.add_argument("--tail", choices=["lambda", "3a"], default="lambda")
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
            print(json.dumps({"loader": a.loader, "tail": a.tail, "epoch": epoch, "images_per_s": round(rate, 1)}), flush=True)


if __name__ == "__main__":
    main()
