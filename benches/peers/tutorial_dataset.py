"""The PyTorch tutorial's own Dataset ("Datasets & DataLoaders": a pandas table of file names
and labels, `decode_image(path)` imported by name from `torchvision.io`) with a v2 training
transform on its uint8 tensors, through torch's DataLoader or hpuload's drop-in (only the
import differs). Prints one JSON line per run: construction time (hpuload's includes its probe
of `__getitem__`), the loader's type, and images/s over the measured epochs.

usage: python tutorial_dataset.py --data DIR --loader hpuload|torch [--epochs 2] [--workers 2]
       [--batch 256] [--exif]   (--exif: read with apply_exif_orientation=True)
"""

import argparse
import json
import os
import tempfile
import time

import pandas as pd
import torch
from torch.utils.data import Dataset
from torchvision import datasets
from torchvision.io import decode_image
from torchvision.transforms import v2

EXIF = False


class CustomImageDataset(Dataset):
    def __init__(self, annotations_file, img_dir, transform=None, target_transform=None):
        self.img_labels = pd.read_csv(annotations_file)
        self.img_dir = img_dir
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return len(self.img_labels)

    def __getitem__(self, idx):
        img_path = os.path.join(self.img_dir, self.img_labels.iloc[idx, 0])
        image = decode_image(img_path, mode="RGB", apply_exif_orientation=EXIF)
        label = self.img_labels.iloc[idx, 1]
        if self.transform:
            image = self.transform(image)
        if self.target_transform:
            label = self.target_transform(label)
        return image, label


def main():
    global EXIF
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--loader", choices=["hpuload", "torch"], required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--exif", action="store_true")
    a = ap.parse_args()
    EXIF = a.exif
    if a.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    tf = v2.Compose([
        v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip(),
        v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    folder = datasets.ImageFolder(a.data)
    with tempfile.TemporaryDirectory() as tmp:
        table = os.path.join(tmp, "labels.csv")
        pd.DataFrame([(os.path.relpath(p, a.data), t) for p, t in folder.samples]).to_csv(table, index=False)
        t0 = time.perf_counter()
        ds = CustomImageDataset(table, a.data, transform=tf)
        loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers, drop_last=True,
                            persistent_workers=a.workers > 0)
        built = time.perf_counter() - t0
        n, t1 = 0, None
        for epoch in range(a.epochs + 1):  # the first epoch warms up
            if epoch == 1:
                n, t1 = 0, time.perf_counter()
            for x, y in loader:
                n += x.shape[0]
        rate = n / (time.perf_counter() - t1)
    print(json.dumps({"loader": a.loader, "type": type(loader).__module__, "built_s": round(built, 2),
                      "images_per_s": round(rate, 1), "exif": a.exif}), flush=True)


if __name__ == "__main__":
    main()
