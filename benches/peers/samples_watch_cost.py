"""What reading a dataset's files and labels again at each epoch's start costs (session 65):
`_SamplesWatch.changed()` alone for an ImageFolder and for a CSV Dataset class over the same
photos, and for CIFAR-10 held in memory (50,000 images) whole epochs with the watch and
without it (as `persistent_workers=True` runs), alternated.

usage: python samples_watch_cost.py PHOTOS [ROUNDS]
  PHOTOS  an ImageFolder of photos (the reference corpus)
Prints one JSON line of medians (seconds).
"""
import csv
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch.utils.data as tud
from PIL import Image
from torchvision import datasets
from torchvision import transforms as T

from hpuload.torch import DataLoader

ROOT = Path(sys.argv[1])
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 8
TRAIN = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor()])


class CsvDataset(tud.Dataset):
    def __init__(self, path, transform):
        with open(path) as f:
            self.rows = [(r[0], int(r[1])) for r in csv.reader(f)]
        self.transform = transform

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        path, label = self.rows[i]
        return self.transform(Image.open(path).convert("RGB")), label


def watch_seconds(dataset) -> float:
    loader = DataLoader(dataset, batch_size=256, num_workers=2)
    watch = loader._samples_watch
    times = []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        watch.changed()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def cifar_epochs() -> dict:
    ds = datasets.CIFAR10.__new__(datasets.CIFAR10)
    ds.root, ds.target_transform, ds.transforms, ds.train = "/nowhere", None, None, True
    ds.transform = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.ToTensor(),
                              T.Normalize((0.49, 0.48, 0.45), (0.2, 0.2, 0.2))])
    ds.data = np.random.default_rng(0).integers(0, 256, (50_000, 32, 32, 3), dtype=np.uint8)
    ds.targets = [i % 10 for i in range(50_000)]
    ds.classes = [str(i) for i in range(10)]
    loader = DataLoader(ds, batch_size=128, shuffle=True, num_workers=2)
    watch, times = loader._samples_watch, {"with the watch": [], "without (persistent_workers)": []}
    for _ in loader:
        pass
    for _ in range(ROUNDS):
        for k in times:
            loader._samples_watch = watch if k == "with the watch" else None
            t = time.perf_counter()
            for _ in loader:
                pass
            times[k].append(time.perf_counter() - t)
    return {k: round(statistics.median(v), 4) for k, v in times.items()}


def main():
    folder = datasets.ImageFolder(ROOT, TRAIN)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.csv"
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows(folder.samples)
        out = {
            "images": len(folder),
            "ImageFolder changed() s": round(watch_seconds(folder), 6),
            "CSV class changed() s": round(watch_seconds(CsvDataset(path, TRAIN)), 4),
            "CIFAR-10 epoch s": cifar_epochs(),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
