"""CIFAR-10's classic training loader (the recipe of most CIFAR scripts: RandomCrop(32,
padding=4), a flip, ToTensor, Normalize; batches of 128, shuffled, 2 workers), with torch's
DataLoader or hpuload's drop-in (only the import differs), timed over full passes.

This machine cannot download CIFAR-10, so the dataset is torchvision's `CIFAR10` object as it
holds the set once loaded (`data`, a 50,000 x 32 x 32 x 3 uint8 array, and `targets`), made
from the reference corpus's photos: each photo's centre, resized to 32x32 by Pillow, the set
repeated to 50,000 images (cached as a .npy file beside the corpus copy in /tmp).

usage: python cifar_loader.py --loader torch|hpuload --data DIR [--recipe train|eval|train_reflect]
       [--workers 2] [--batch 128] [--epochs 3]
Prints one JSON line: images/s over the epochs after the first.
"""

import argparse
import json
import os
import time

import numpy as np
import torch
from PIL import Image
from torchvision import datasets
from torchvision import transforms as T

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)


def photos_as_cifar(root, n=50_000):
    """`n` 32x32 images from the photos under `root` (their centres), as CIFAR holds them."""
    cache = f"/tmp/cifar_{os.path.basename(os.path.normpath(root))}_{n}.npy"
    if os.path.exists(cache):
        return np.load(cache)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.lower().endswith((".jpg", ".jpeg", ".png")))
    small = []
    for path in files:
        image = Image.open(path).convert("RGB")
        side = min(image.size)
        left, top = (image.width - side) // 2, (image.height - side) // 2
        small.append(np.asarray(image.crop((left, top, left + side, top + side)).resize((32, 32), Image.BILINEAR)))
    data = np.stack([small[i % len(small)] for i in range(n)])
    np.save(cache, data)
    return data


def cifar10(data, transform):
    """torchvision's CIFAR10 as it stands after loading its files: `data`, `targets`, the
    transform; its own `__getitem__`."""
    ds = datasets.CIFAR10.__new__(datasets.CIFAR10)
    ds.root, ds.train, ds.transform, ds.target_transform, ds.transforms = "/data", True, transform, None, None
    ds.data = data
    ds.targets = [i % 10 for i in range(len(data))]
    ds.classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    return ds


RECIPES = {
    "train": lambda: T.Compose(
        [T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)]
    ),
    "train_reflect": lambda: T.Compose(
        [
            T.RandomCrop(32, padding=4, padding_mode="reflect"),
            T.RandomHorizontalFlip(),
            T.ToTensor(),
            T.Normalize(MEAN, STD),
        ]
    ),
    "eval": lambda: T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)]),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--loader", choices=["torch", "hpuload"], required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--recipe", choices=sorted(RECIPES), default="train")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--epochs", type=int, default=3)
    a = p.parse_args()
    if a.loader == "torch":
        from torch.utils.data import DataLoader
    else:
        from hpuload.torch import DataLoader
    dataset = cifar10(photos_as_cifar(a.data), RECIPES[a.recipe]())
    loader = DataLoader(dataset, batch_size=a.batch, shuffle=a.recipe != "eval", num_workers=a.workers)
    rates, first = [], None
    for epoch in range(a.epochs):
        start, n = time.perf_counter(), 0
        for images, labels in loader:
            if first is None:
                first = time.perf_counter() - start
            n += images.shape[0]
        rates.append(n / (time.perf_counter() - start))
    after = sorted(rates[1:]) or rates
    print(
        json.dumps(
            {
                "loader": a.loader,
                "recipe": a.recipe,
                "images_per_s": round(after[len(after) // 2], 1),
                "epochs": [round(r, 1) for r in rates],
                "first_batch_s": round(first, 3),
                "shape": list(images.shape),
                "dtype": str(images.dtype),
            }
        )
    )


if __name__ == "__main__":
    main()
