"""Where the ResNet-50 v2 recipe's time goes on hpuload: the same loader (recipes.py's
resnet50_v2) with no collate_fn, with the identity, and with the recipe's own
`mix(*default_collate(batch))` timed around each call.

usage: python collate_cost.py --data DIR [--workers 2] [--batch 256]
Prints, per mode, images/s of the second epoch and the seconds spent in the collate_fn.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import recipes  # noqa: E402
from hpuload.torch import DataLoader  # noqa: E402


def run(data, mode, workers, batch):
    dataset, kw = recipes.resnet50_v2(data)
    collate = kw.pop("collate_fn")
    spent = [0.0]

    def timed(b):
        t = time.perf_counter()
        out = collate(b)
        spent[0] += time.perf_counter() - t
        return out

    if mode == "identity":
        kw["collate_fn"] = lambda b: b
    elif mode == "recipe":
        kw["collate_fn"] = timed
    loader = DataLoader(dataset, batch_size=batch, num_workers=workers, drop_last=True, **kw)
    for epoch in range(2):
        kw["sampler"].set_epoch(epoch)
        spent[0] = 0.0
        t, n = time.perf_counter(), 0
        for _ in loader:
            n += batch
        dt = time.perf_counter() - t
    print(f"{mode:8s} {n / dt:6.0f}/s  collate {spent[0]:.2f} s of {dt:.2f} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    for mode in ("none", "identity", "recipe"):
        run(args.data, mode, args.workers, args.batch)


if __name__ == "__main__":
    main()
