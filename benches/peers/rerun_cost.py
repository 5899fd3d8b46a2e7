"""What running a Dataset's `__getitem__` again for each sample the loader hands out costs
(`_probe.DrawnExtras.rows`: a class that draws its own flips, or the values beside its
image): `functional_dataset.py`'s `flip` class (`TF.resize`, `RandomCrop.get_params` then
`TF.crop`, a flip drawn with `random`, `TF.to_tensor`, `TF.normalize`), rows of batches of 64
read the way the loader reads them, with its plans. Prints the best of three passes over the
indices, per sample.

usage: python rerun_cost.py FOLDER [IMAGES=1000]
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from functional_dataset import FunctionalDataset  # noqa: E402
from torchvision import datasets  # noqa: E402

from hpuload.torch import DataLoader  # noqa: E402


def main():
    root, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    samples = datasets.ImageFolder(root).samples
    samples = samples[:: max(1, len(samples) // count)][:count]
    ds = FunctionalDataset(samples, "flip", False)
    loader = DataLoader(ds, batch_size=64, backend="cpu")
    next(iter(loader))  # armed, the plans in place
    drawn = loader._extras
    best = float("inf")
    for round in range(3):
        start = time.perf_counter()
        for at in range(0, len(ds), 64):
            drawn._last = None  # read as a new batch's
            drawn.rows(list(range(at, min(at + 64, len(ds)))))
        best = min(best, time.perf_counter() - start)
    print(f"rows: {best / len(ds) * 1e6:.1f} us a sample ({len(ds)} samples)")


if __name__ == "__main__":
    main()
