"""What the Python tail's worker processes cost per batch, apart from the loader: a batch of
256 float images of 224x224 (154 MB) through `hpuload._tail.Pool` with a tail that flips
the channels (the `lambda` of tail_loader.py), submitted and waited for in turn. Prints the
wall time per batch, the parent's share in `submit` (the copy into shared memory), and the
parent's and the children's CPU time.

usage: python tail_pool_cost.py [--batches 10] [--workers 2]"""

import argparse
import os
import time

import torch

from hpuload import _tail


class Flip:
    gives = "tensor"
    names = ["Lambda"]

    def __call__(self, x):
        return x.flip(0)


def cpu_seconds(pids) -> float:
    total = 0
    for p in pids:
        fields = open(f"/proc/{p}/stat").read().split(")")[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    pool = _tail.Pool(Flip(), a.workers)
    images = torch.randn(256, 3, 224, 224)
    indices = list(range(256))
    for _ in range(2):  # the first learns the outputs' shape; the second makes the buffers
        out = pool.submit(images, indices, 0, 0).result()
        del out
    c0, p0, w0, submit = cpu_seconds(pool._pids), time.process_time(), time.perf_counter(), 0.0
    for _ in range(a.batches):
        s = time.perf_counter()
        pending = pool.submit(images, indices, 0, 0)
        submit += time.perf_counter() - s
        out = pending.result()
        del out, pending
    n = a.batches
    print(
        f"per batch: wall {1e3 * (time.perf_counter() - w0) / n:.0f} ms, submit {1e3 * submit / n:.0f} ms, "
        f"parent CPU {1e3 * (time.process_time() - p0) / n:.0f} ms, children CPU {1e3 * (cpu_seconds(pool._pids) - c0) / n:.0f} ms"
    )
    pool.close()


if __name__ == "__main__":
    main()
