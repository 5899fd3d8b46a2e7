"""A user's own Dataset class that transforms its images with torchvision's functional API
itself, through torch's DataLoader or hpuload's drop-in (only the import differs). Three shapes:
`eval` (the classic validation pattern: `TF.resize(image, 256)`, `TF.center_crop(image, 224)`,
`TF.to_tensor`, `TF.normalize`, no transform) and `train` (`self.transform` of
`RandomResizedCrop(224)` and a flip gives a PIL image, then `TF.to_tensor` and `TF.normalize`
on what it gave), `class` (the calls of `eval` in a transform class of the user's own, held
as `self.transform`), `flip` (the training pattern written by hand: `TF.resize(image, 256)`,
`RandomCrop.get_params` then `TF.crop` to 224, `if random.random() < 0.5: TF.hflip(image)`,
`TF.to_tensor`, `TF.normalize`), `unlabelled` (diffusers' unconditional training: `return
self.transform(image)`, the image alone, through `Resize(224)`, `CenterCrop(224)`, a flip,
`ToTensor` and `Normalize` to [-1, 1]), `views` (SimCLR's two calls written by hand:
`return self.transform(image), self.transform(image), label` with `RandomResizedCrop(224)`,
a flip, `ColorJitter`, `ToTensor`, `Normalize`); `--v2`: the same with v2's functionals (`to_image`, `to_dtype`). Prints one
JSON line per run: construction time (hpuload's includes its probe of `__getitem__`), the
loader's type, and images/s over the measured epochs.

usage: python functional_dataset.py --data DIR --loader hpuload|torch [--kind eval|train|class|flip|unlabelled|views]
       [--v2] [--epochs 2] [--workers 2] [--batch 64] [--images 1000]
       python functional_dataset.py --data DIR --parity auto|cpu [--v2] [--images 1000]
         (`eval` through hpuload's backend against torch's loader: the lowest PSNR of an
         image, over its values in [0, 1], and the largest difference)
"""

import argparse
import json
import random
import time

import torch
import torchvision.transforms.functional as TF
import torchvision.transforms.v2.functional as F2
from PIL import Image
from torch.utils.data import Dataset
from torchvision import datasets
from torchvision import transforms as T

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


class EvalTransform:
    """A transform class of the user's own that makes the same calls as `eval` (`--kind class`)."""

    def __init__(self, resize=256, crop=224):
        self.resize, self.crop = resize, crop

    def __call__(self, image):
        image = TF.center_crop(TF.resize(image, self.resize), self.crop)
        return TF.normalize(TF.to_tensor(image), MEAN, STD)


class FunctionalDataset(Dataset):
    def __init__(self, samples, train, v2, transform=None):
        self.samples, self.train, self.v2, self.transform = samples, train, v2, transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        path, label = self.samples[idx]
        image = Image.open(path).convert("RGB")
        if isinstance(self.transform, EvalTransform):
            return self.transform(image), label
        if self.train == "unlabelled":
            return self.transform(image)
        if self.train == "views":
            return self.transform(image), self.transform(image), label
        if self.train == "flip":
            image = TF.resize(image, 256)
            top, left, h, w = T.RandomCrop.get_params(image, (224, 224))
            image = TF.crop(image, top, left, h, w)
            if random.random() < 0.5:
                image = TF.hflip(image)
        elif self.train:
            image = self.transform(image)
        else:
            image = TF.resize(image, 256)
            image = TF.center_crop(image, 224)
        if self.v2:
            x = F2.to_dtype(F2.to_image(image), torch.float32, scale=True)
            return F2.normalize(x, MEAN, STD), label
        return TF.normalize(TF.to_tensor(image), MEAN, STD), label


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--loader", choices=["hpuload", "torch"], default="hpuload")
    ap.add_argument("--kind", choices=["eval", "train", "class", "flip", "unlabelled", "views"], default="eval")
    ap.add_argument("--v2", action="store_true")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--parity", choices=["auto", "cpu"])
    a = ap.parse_args()
    if a.parity:
        return parity(a)
    samples = datasets.ImageFolder(a.data).samples
    samples = samples[:: max(1, len(samples) // a.images)][: a.images]
    train = a.kind if a.kind in ("flip", "unlabelled", "views") else a.kind == "train"
    transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()]) if train is True else None
    if a.kind == "class":
        transform = EvalTransform()
    if a.kind == "views":
        transform = T.Compose(
            [T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ColorJitter(0.4, 0.4, 0.4), T.ToTensor(), T.Normalize(MEAN, STD)]
        )
    if a.kind == "unlabelled":
        transform = T.Compose(
            [T.Resize(224), T.CenterCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize([0.5], [0.5])]
        )
    ds = FunctionalDataset(samples, train, a.v2, transform)
    if a.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    t0 = time.perf_counter()
    loader = DataLoader(ds, batch_size=a.batch, shuffle=bool(train), num_workers=a.workers)
    built = time.perf_counter() - t0
    rates = []
    for _ in range(a.epochs + 1):  # the first epoch warms up
        t0, n = time.perf_counter(), 0
        for batch in loader:
            n += len(batch if a.kind == "unlabelled" else batch[0]) * (2 if a.kind == "views" else 1)
        rates.append(n / (time.perf_counter() - t0))
    measured = sorted(rates[1:])
    print(
        json.dumps(
            {
                "loader": a.loader,
                "type": type(loader).__module__ + "." + type(loader).__name__,
                "kind": a.kind,
                "v2": a.v2,
                "workers": a.workers,
                "built_s": round(built, 3),
                "images_per_s": round(measured[len(measured) // 2], 1),
            }
        )
    )


def parity(a):
    import math

    import torch.utils.data as tud

    from hpuload.torch import DataLoader

    samples = datasets.ImageFolder(a.data).samples
    samples = samples[:: max(1, len(samples) // a.images)][: a.images]
    ds = FunctionalDataset(samples, False, a.v2)
    mean, std = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
    lowest, largest = math.inf, 0.0
    ours = DataLoader(ds, batch_size=a.batch, backend=a.parity)
    for (x1, _), (x2, _) in zip(ours, tud.DataLoader(ds, batch_size=a.batch)):
        x1, x2 = x1 * std + mean, x2 * std + mean
        mse = ((x1 - x2) ** 2).flatten(1).mean(1)
        lowest = min(lowest, (10 * torch.log10(1 / mse.clamp(min=1e-12))).min().item())
        largest = max(largest, (x1 - x2).abs().max().item() * 255)
    print(json.dumps({"backend": a.parity, "v2": a.v2, "images": len(ds), "lowest_psnr_db": round(lowest, 1), "largest_levels": round(largest, 3)}))


if __name__ == "__main__":
    main()
