"""What probing a user's Dataset class costs an index: `_probe.probe` over every index of a
CSV-style class (`Image.open(path).convert("RGB")`, `self.transform`), the loader's reading at
its build and again at each epoch's start (`_SamplesWatch`). Prints the best of three passes,
per index, for a torchvision Compose alone and with a step of the user's own after it.

usage: python probe_cost.py FOLDER [IMAGES=3000]
"""

import glob
import os
import sys
import time

import torch.utils.data as tud
import torchvision.transforms as T
from PIL import Image

from hpuload import _probe


class Scales:
    """A step of the user's own (hpuload runs it in Python after the native ones)."""

    def __call__(self, x):
        return x * 1


class CsvLike(tud.Dataset):
    def __init__(self, files, transform):
        self.files, self.transform = files, transform

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return self.transform(Image.open(self.files[i]).convert("RGB")), i % 3


def main():
    root, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    files = sorted(glob.glob(os.path.join(root, "*", "*.jpg")))[:count]
    base = [T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor()]
    for name, transform in (("Compose", T.Compose(base)), ("Compose + user step", T.Compose([*base, Scales()]))):
        ds = CsvLike(files, transform)
        _probe.probe(ds, list(range(100)))  # warm
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            _probe.probe(ds)
            best = min(best, time.perf_counter() - start)
        print(f"{name}: {best / len(files) * 1e6:.1f} us an index ({len(files)} indices)")


if __name__ == "__main__":
    main()
