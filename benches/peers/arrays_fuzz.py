"""Random torchvision compositions (transform_fuzz.py's grammar, every draw pinned) over
torchvision's in-memory datasets (CIFAR10, SVHN, MNIST, FashionMNIST, made as their classes
hold them, from crops of real photos), run through hpuload.torch.DataLoader (CPU path) and
through the dataset itself, compared value by value: the search of transform_fuzz.py
(session 81) for the arrays path (session 82).

usage: python arrays_fuzz.py FOLDER [CASES=300] [SEED=0]
  FOLDER  any folder of photos (transform_sweep_images.py's set)
Outcomes as transform_fuzz.py's.
"""
import os
import sys

import numpy as np
import torch
from PIL import Image
from torchvision import datasets

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dataset_fuzz  # noqa: E402
import transform_fuzz  # noqa: E402


ROOT = sys.argv[1] if __name__ == "__main__" else None


def photos(size, grey):
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(ROOT) for f in fs)
    out = []
    for f in files:
        im = Image.open(f).convert("L" if grey else "RGB").resize((size, size), Image.BILINEAR)
        out.append(np.asarray(im))
    return np.stack(out)


def in_memory(kind, tf):
    cls = {"cifar": datasets.CIFAR10, "svhn": datasets.SVHN, "mnist": datasets.MNIST, "fashion": datasets.FashionMNIST}[kind]
    ds = cls.__new__(cls)
    ds.root, ds.transform, ds.target_transform, ds.transforms = "/nowhere", tf, None, None
    if kind == "cifar":
        ds.data = photos(32, False)
        ds.targets = [i % 10 for i in range(len(ds.data))]
        ds.classes = [f"class{i}" for i in range(10)]
        ds.train = True
    elif kind == "svhn":
        ds.data = photos(32, False).transpose(0, 3, 1, 2).copy()
        ds.labels = np.arange(len(ds.data)) % 10
        ds.split = "train"
    else:
        ds.data = torch.from_numpy(photos(28, True))
        ds.targets = torch.arange(len(ds.data)) % 10
        ds.train = True
    return ds


def main():
    cases, rng = transform_fuzz.arguments(300)
    tally = {}
    for i in range(cases):
        kind = rng.choice(["cifar", "cifar", "svhn", "mnist", "fashion"])
        tname, tf = transform_fuzz.composition(rng)
        try:
            outcome, detail = dataset_fuzz.run_dataset(in_memory(kind, tf), "Normalize" in tname)
        except Exception as e:
            outcome, detail = "HARNESS", f"{type(e).__name__}: {e}"
        transform_fuzz.count(tally, i, outcome, detail, f"[{kind}] {tname}")
    print(tally)


if __name__ == "__main__":
    main()
