"""Beginner scripts' torchvision transforms over an ImageFolder, through torch's DataLoader or
hpuload's drop-in (only the import differs), each of which hpuload once handed to torch's
loader (a FallbackWarning):
- `before` (the default): pixel steps before the resize (`RandomHorizontalFlip`,
  `RandomRotation(10)`, `ColorJitter(0.2, 0.2, 0.2)`, then `Resize((224, 224))`, `ToTensor`,
  `Normalize`); native since session 77, on each whole decoded image;
- `grey`: an X-ray script's one grey channel (`Grayscale()`, `Resize((224, 224))`,
  `RandomHorizontalFlip()`, `ToTensor()`, `Normalize((0.5,), (0.5,))`); native since session 78;
- `flip_crop`: a flip between the resize and its crop (`Resize(256)`,
  `RandomHorizontalFlip()`, `CenterCrop(224)`, `ToTensor`, `Normalize`); native since session 78;
- `rot_between`: a rotation and a colour jitter between the resize and its crop (`Resize(256)`,
  `RandomRotation(15)`, `ColorJitter(0.4, 0.4, 0.4)`, `CenterCrop(224)`, `ToTensor`,
  `Normalize`); native since session 79, on each whole resize;
- `float_first`: `ToTensor()` first, then `Resize((224, 224))`, `RandomHorizontalFlip()`,
  `Normalize` (torchvision resizes the float tensor with torch's float kernel); native since
  session 80, torch's floats unrounded.
Prints one JSON line: the loader's type and images/s over the measured epochs (the first warms
up).

usage: python before_geometry.py --data DIR --loader hpuload|torch [--script before|grey|flip_crop|rot_between|float_first]
       [--epochs 1] [--workers 2] [--batch 64]
"""

import argparse
import json
import time

import torch
from torchvision import datasets
from torchvision import transforms as T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--loader", choices=["hpuload", "torch"], required=True)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--script", choices=["before", "grey", "flip_crop", "rot_between", "float_first"], default="before")
    a = ap.parse_args()
    if a.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    norm = T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    tf = T.Compose({
        "before": [T.RandomHorizontalFlip(), T.RandomRotation(10), T.ColorJitter(0.2, 0.2, 0.2), T.Resize((224, 224)),
                   T.ToTensor(), norm],
        "grey": [T.Grayscale(), T.Resize((224, 224)), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize((0.5,), (0.5,))],
        "flip_crop": [T.Resize(256), T.RandomHorizontalFlip(), T.CenterCrop(224), T.ToTensor(), norm],
        "rot_between": [T.Resize(256), T.RandomRotation(15), T.ColorJitter(0.4, 0.4, 0.4), T.CenterCrop(224), T.ToTensor(),
                        norm],
        "float_first": [T.ToTensor(), T.Resize((224, 224)), T.RandomHorizontalFlip(), norm],
    }[a.script])
    ds = datasets.ImageFolder(a.data, tf)
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers, drop_last=True,
                        persistent_workers=a.workers > 0)
    n, t1 = 0, None
    for epoch in range(a.epochs + 1):
        if epoch == 1:
            n, t1 = 0, time.perf_counter()
        for x, _ in loader:
            assert x.dtype == torch.float32
            n += x.shape[0]
    print(json.dumps({"loader": a.loader, "script": a.script, "type": type(loader).__module__,
                      "images_per_s": round(n / (time.perf_counter() - t1), 1)}), flush=True)


if __name__ == "__main__":
    main()
