"""A random search over torchvision grey reads on the media engine: random v2 compositions
(an antialiased resize or crop, flips, ToDtype, a one-channel Normalize) of
`read_image(path, ImageReadMode.GRAY)` JPEGs, hpuload's batches on the CPU backend (exact:
the test suite checks them against torch's) against the engine's (`backend="auto"`), batch by
batch: same draws (both from hpuload's seed), so the PSNR (on the values' range) is the
engine's difference alone. A case is `near` at 40 dB or more (the README's floor), `FAR`
below, `fallback` where hpuload gives torch's loader.

usage: python grey_read_search.py FOLDER [CASES=40] [SEED=0]
  FOLDER  a folder of JPEG photos (e.g. one class of the reference corpus)
"""
import math
import os
import random
import sys
import warnings

import torch
import torch.utils.data as tud
from torchvision.io import ImageReadMode, read_image
from torchvision.transforms import v2

from hpuload.torch import DataLoader, FallbackWarning


class Grey(tud.Dataset):
    def __init__(self, files, tf):
        self.files, self.tf = files, tf

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return self.tf(read_image(self.files[i], ImageReadMode.GRAY)), i % 3


def composition(rng):
    size = rng.choice([32, 64, 96, 128, 224])
    geometry = rng.choice([
        lambda: [v2.RandomResizedCrop(size, scale=(rng.uniform(0.05, 0.5), 1.0), antialias=True)],
        lambda: [v2.Resize((size, size + rng.randint(-8, 8)), antialias=True)],
        lambda: [v2.Resize(size + 32, antialias=True), v2.CenterCrop(size)],
        lambda: [v2.Resize(size + 32, antialias=True), v2.RandomCrop(size)],
    ])()
    flips = [v2.RandomHorizontalFlip(rng.choice([0.0, 0.5, 1.0])), v2.RandomVerticalFlip(rng.choice([0.0, 0.5]))]
    tail = rng.choice([
        [],
        [v2.ToDtype(torch.float32, scale=True)],
        [v2.ToDtype(torch.float32, scale=True), v2.Normalize([rng.uniform(0.3, 0.6)], [rng.uniform(0.15, 0.3)])],
    ])
    return v2.Compose(geometry + [f for f in flips if rng.random() < 0.5] + tail)


def psnr(a, b):
    a, b = a.float(), b.float()
    peak = float(b.max() - b.min()) or 1.0
    return 10 * math.log10(peak**2 / max(float(((a - b) ** 2).mean()), 1e-12))


def main():
    folder = sys.argv[1]
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.lower().endswith((".jpg", ".jpeg")))
    tally = {}
    for case in range(cases):
        ds = Grey(files, composition(rng))
        batches = {}
        for backend in ("cpu", "auto"):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                loader = DataLoader(ds, batch_size=8, backend=backend, seed=case)
            if any(issubclass(x.category, FallbackWarning) for x in w):
                break
            batches[backend] = [x for x, _ in loader]
        if len(batches) < 2:
            outcome, detail = "fallback", ""
        else:
            worst = min(psnr(a, b) for a, b in zip(batches["auto"], batches["cpu"]))
            outcome, detail = ("near" if worst >= 40 else "FAR"), f"{worst:.1f} dB"
        tally[outcome] = tally.get(outcome, 0) + 1
        print(f"{case:4d} {outcome:8s} {detail:9s} {[type(t).__name__ for t in ds.tf.transforms]}", flush=True)
    print(tally)


if __name__ == "__main__":
    main()
