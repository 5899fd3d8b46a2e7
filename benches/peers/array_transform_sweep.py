"""A sweep of torchvision transforms with their random parameters pinned (degenerate ranges,
p=1), v1 and v2, over torchvision's in-memory datasets: `CIFAR10` (RGB) and `MNIST` (grey,
where Pillow's ops run on "L" images), each holding real photographs shrunk to their size.
Each sample through hpuload.torch.DataLoader (CPU path) and through the dataset itself,
compared value by value; the pixel ops are `transform_sweep.py`'s. Session 65's search for
silent differences (BENCHMARKS.md).

usage: python array_transform_sweep.py PHOTOS [SUBSTRING]
  PHOTOS  a folder of JPEG photos (the reference corpus); its first 24 are taken
  prints one line per case: ok/BAD, the largest difference in levels, how many values differ
  by more than one, and the warnings hpuload gave (fallback, Python tail)
"""
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision import datasets
from torchvision import transforms as T
from torchvision.transforms import v2

from hpuload.torch import DataLoader, FallbackWarning, PythonTailWarning
from transform_sweep import pixel_ops

PHOTOS = Path(sys.argv[1])
only = sys.argv[2] if len(sys.argv) > 2 else None


def photos(size: int, mode: str) -> np.ndarray:
    """The first 24 photos, centre-cropped square and shrunk to `size`, in `mode`."""
    out = []
    for f in sorted(PHOTOS.rglob("*.jpg"))[:24]:
        im = Image.open(f).convert("RGB")
        side = min(im.size)
        left, top = (im.width - side) // 2, (im.height - side) // 2
        out.append(np.asarray(im.crop((left, top, left + side, top + side)).resize((size, size), Image.BILINEAR).convert(mode)))
    return np.stack(out)


def cifar(transform):
    ds = datasets.CIFAR10.__new__(datasets.CIFAR10)
    ds.root, ds.transform, ds.target_transform, ds.transforms, ds.train = "/nowhere", transform, None, None, True
    ds.data = photos(32, "RGB")
    ds.targets = [i % 10 for i in range(len(ds.data))]
    ds.classes = [f"class{i}" for i in range(10)]
    return ds


def mnist(transform):
    ds = datasets.MNIST.__new__(datasets.MNIST)
    ds.root, ds.train, ds.transform, ds.target_transform, ds.transforms = "/nowhere", True, transform, None, None
    ds.data = torch.from_numpy(photos(28, "L"))
    ds.targets = torch.tensor([i % 10 for i in range(len(ds.data))])
    return ds


def cases():
    for M, tag in ((T, "v1"), (v2, "v2")):
        to_float = [M.ToTensor()] if M is T else [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
        to_u8 = [M.PILToTensor()]
        geometry = [
            ("none", []), ("ccrop24", [M.CenterCrop(24)]), ("resize40", [M.Resize(40)]),
            ("resize20x30", [M.Resize((20, 30))]), ("pad4ccrop", [M.Pad(4), M.CenterCrop(28)]),
            ("pad4reflect", [M.Pad(4, padding_mode="reflect"), M.CenterCrop(30)]),
        ]
        for gname, g in geometry:
            yield f"{tag} {gname}+float", g + to_float
            yield f"{tag} {gname}+u8", g + to_u8
        for name, op in pixel_ops(M):
            yield f"{tag} {name}", [op] + to_u8
            yield f"{tag} ccrop24+{name}", [M.CenterCrop(24), op] + to_u8
        yield f"{tag} normalize1", to_float + [M.Normalize((0.5,), (0.25,))]
    # (RandomCrop's and RandomErasing's positions are draws no range pins: the tests compare
    # them with torchvision at the offsets the loader drew.)


def compare(ds):
    want = [ds[i] for i in range(len(ds))]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = [(x[0], y[0]) for x, y in DataLoader(ds, batch_size=1, backend="cpu")]
        except Exception as e:
            return f"BAD   hpuload raised {type(e).__name__}: {str(e)[:150]}", 1
    notes = sorted({("torch: " + str(w.message)[50:130]) if issubclass(w.category, FallbackWarning) else "tail"
                    for w in caught if issubclass(w.category, (FallbackWarning, PythonTailWarning))})
    worst, over = 0.0, 0
    for (x, y), (wx, wy) in zip(got, want):
        wx = torch.as_tensor(np.asarray(wx)) if not isinstance(wx, torch.Tensor) else wx
        if x.shape != wx.shape or x.dtype != wx.dtype or int(y) != int(wy):
            return f"BAD   {tuple(x.shape)} {x.dtype} vs {tuple(wx.shape)} {wx.dtype} {notes}", 1
        d = (x.double() - wx.double()).abs() * (255 if x.is_floating_point() else 1)
        if x.is_floating_point() and (x.min() < -0.01 or wx.min() < -0.01):
            d = d * 0.25  # normalized: levels of the input
        worst, over = max(worst, float(d.max())), over + int((d > 1.001).sum())
    bad = worst > 1.001
    return f"{'BAD' if bad else 'ok '}   max {worst:.2f} >1: {over} {' | '.join(notes)}", int(bad)


def main():
    bad = 0
    for name, steps in cases():
        for kind, make in (("cifar", cifar), ("mnist", mnist)):
            label = f"{kind} {name}"
            if only and only not in label:
                continue
            M = v2 if name.startswith("v2") else T
            ds = make(M.Compose(steps))
            try:
                ds[0]
            except Exception as e:  # torchvision itself cannot: nothing to compare
                print(f"skip  {label}: {type(e).__name__}: {str(e)[:80]}")
                continue
            line, b = compare(ds)
            bad += b
            print(f"{label:40s} {line}", flush=True)
    print(f"{bad} BAD")


if __name__ == "__main__":
    main()
