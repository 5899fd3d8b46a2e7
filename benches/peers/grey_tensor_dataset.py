"""A Dataset that reads each image grey with torchvision's reader (`read_image(path,
ImageReadMode.GRAY)`, a `[1, H, W]` uint8 tensor) and puts it through a v2 transform
(RandomResizedCrop 224, RandomHorizontalFlip, ToDtype(float32, scale=True), Normalize([0.5],
[0.5])), through torch's DataLoader or hpuload's drop-in (only the import differs); natively
since session 89 (it went to torch's DataLoader before). `--read pil`: each image opened by
Pillow and made grey (`Image.open(path).convert("L")`), then torchvision's v1 transform
(RandomResizedCrop 224, RandomHorizontalFlip, ToTensor, Normalize([0.5], [0.5])): the CPU path
before session 90, the media engine since. Prints one JSON line per run: construction time,
the loader's type and images/s over the measured epochs.

usage: python grey_tensor_dataset.py --data DIR --loader hpuload|torch [--read gray|pil] [--epochs 2] [--workers 2] [--batch 64]
"""

import argparse
import json
import os
import time

import torch
import torch.utils.data as tud
from PIL import Image
from torchvision import transforms as T
from torchvision.io import ImageReadMode, read_image
from torchvision.transforms import v2


class GreyScans(tud.Dataset):
    def __init__(self, files, labels, transform):
        self.files, self.labels, self.transform = files, labels, transform

    def __len__(self):
        return len(self.files)

    def __getitem__(self, idx):
        image = read_image(self.files[idx], ImageReadMode.GRAY)
        return self.transform(image), self.labels[idx]


class GreyPhotos(GreyScans):
    def __getitem__(self, idx):
        image = Image.open(self.files[idx]).convert("L")
        return self.transform(image), self.labels[idx]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--loader", choices=["hpuload", "torch"], required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--read", choices=["gray", "pil"], default="gray")
    a = ap.parse_args()
    if a.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    tf = v2.Compose([
        v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(),
        v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.5], [0.5]),
    ])
    if a.read == "pil":
        tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize([0.5], [0.5])])
    classes = sorted(os.listdir(a.data))
    files = sorted(os.path.join(a.data, c, f) for c in classes for f in os.listdir(os.path.join(a.data, c)))
    labels = [classes.index(os.path.basename(os.path.dirname(f))) for f in files]
    t0 = time.perf_counter()
    dataset = (GreyPhotos if a.read == "pil" else GreyScans)(files, labels, tf)
    loader = DataLoader(dataset, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                        drop_last=True, persistent_workers=a.workers > 0)
    built = time.perf_counter() - t0
    n, t1 = 0, None
    for epoch in range(a.epochs + 1):  # the first epoch warms up
        if epoch == 1:
            n, t1 = 0, time.perf_counter()
        for x, y in loader:
            n += x.shape[0]
    rate = n / (time.perf_counter() - t1)
    print(json.dumps({"loader": a.loader, "type": type(loader).__qualname__, "shape": list(x.shape),
                      "built_s": round(built, 2), "images_per_s": round(rate, 1)}), flush=True)


if __name__ == "__main__":
    main()
