"""The steps of a user's transform that hpuload does not translate, run in Python on what the
native prefix made (see `_transforms.translate_split`).

Each sample's tail runs with Python's `random`, NumPy's global generator and torch's CPU
generator seeded from `(seed, epoch, dataset index)`, as hpuload's own draws are: the same
run gives the same samples, a resumed one continues with them, and two samples never share a
draw. The generators' states are saved before a batch's tails and restored after, so the
training loop's own draws (dropout, its shuffles) go on exactly as if no tail had run. That is
why the tail runs in the thread that iterates: a thread of ours beside the training loop would
share those global generators with it while it runs.
"""

from __future__ import annotations

import hashlib
import random
import struct
from typing import Any

import torch

try:  # NumPy is optional for hpuload, as for torch
    import numpy as _np
except ImportError:  # pragma: no cover
    _np = None


def sample_seed(seed: int, epoch: int, index: int) -> int:
    """A 63-bit seed for one sample's tail, independent of hpuload's own draws for it."""
    key = struct.pack("<QQQ", seed & (2**64 - 1), epoch & (2**64 - 1), index & (2**64 - 1))
    digest = hashlib.blake2b(key, digest_size=8, person=b"hpuload-tail").digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


class _Isolated:
    """Saves the global generators' states on entry and restores them on exit."""

    def __enter__(self):
        self.state = (
            random.getstate(),
            torch.default_generator.get_state(),
            _np.random.get_state() if _np is not None else None,
        )
        return self

    def __exit__(self, *exc):
        py, th, np_state = self.state
        random.setstate(py)
        torch.default_generator.set_state(th)
        if np_state is not None:
            _np.random.set_state(np_state)
        return False


def _seed_all(s: int) -> None:
    random.seed(s)
    torch.default_generator.manual_seed(s)
    if _np is not None:
        _np.random.seed(s & 0xFFFFFFFF)


def _input(view: torch.Tensor, gives: str) -> Any:
    """One sample of the prefix's batch as the tail's first step gets it from the user's code."""
    if gives == "pil":
        from PIL import Image

        # The batch is NHWC uint8 for a PIL tail: one row is the image's bytes in PIL's order.
        return Image.fromarray(view.numpy())
    x = view.clone()  # the tail may work in place; the batch buffer is reused
    if gives == "image":
        from torchvision import tv_tensors

        return tv_tensors.Image(x)
    return x


def run(tail, images: torch.Tensor, indices: list[int], seed: int, epoch: int) -> list:
    """The tail's output for each sample of a batch (`images`' rows, dataset `indices`)."""
    out = []
    with _Isolated():
        for view, index in zip(images.unbind(0), indices):
            _seed_all(sample_seed(seed, epoch, index))
            out.append(tail(_input(view, tail.gives)))
    return out
