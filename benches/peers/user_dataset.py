"""A user's own Dataset class (a CSV of paths and labels, `Image.open(path).convert("RGB")`,
`self.transform`) against the same images through torchvision's ImageFolder, both through
hpuload's drop-in with the ResNet-50 training transform. Prints, as one JSON line per run,
the construction time (the CSV dataset's includes hpuload's probe of its `__getitem__`) and the
images/s of the measured epochs.

usage: python user_dataset.py --data DIR [--kind imagefolder|csv] [--epochs 2] [--workers 2]
"""

import argparse
import csv
import json
import os
import tempfile
import time

import torch.utils.data as tud
from PIL import Image
from torchvision import datasets
from torchvision import transforms as T

from hpuload.torch import DataLoader


class CsvImageDataset(tud.Dataset):
    def __init__(self, csv_path, transform=None):
        with open(csv_path) as f:
            self.rows = [(r["file"], int(r["label"])) for r in csv.DictReader(f)]
        self.transform = transform

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        path, label = self.rows[i]
        image = Image.open(path).convert("RGB")
        if self.transform is not None:
            image = self.transform(image)
        return image, label


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--kind", choices=["imagefolder", "csv"], default="csv")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    a = ap.parse_args()
    tf = T.Compose([
        T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    folder = datasets.ImageFolder(a.data, tf)
    with tempfile.TemporaryDirectory() as tmp:
        if a.kind == "csv":
            path = os.path.join(tmp, "train.csv")
            with open(path, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["file", "label"])
                w.writerows(folder.samples)
            start = time.perf_counter()
            ds = CsvImageDataset(path, tf)
        else:
            start = time.perf_counter()
            ds = folder
        loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers, drop_last=True)
        built = time.perf_counter() - start
        for _ in loader:  # warm-up epoch
            pass
        n, start = 0, time.perf_counter()
        for _ in range(a.epochs):
            for x, _ in loader:
                n += x.shape[0]
        took = time.perf_counter() - start
    print(json.dumps({"kind": a.kind, "build_s": round(built, 3), "images_per_sec": round(n / took, 1), "images": len(ds)}))


if __name__ == "__main__":
    main()
