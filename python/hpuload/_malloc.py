"""glibc malloc tuning for a user's collate_fn on the fast path."""

from __future__ import annotations

import os

#: Whether hpuload raised glibc's malloc thresholds in this process (see `_tune_malloc`).
malloc_tuned = False

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def tune_malloc() -> None:
    """A user's collate_fn allocates a new batch-sized tensor per batch (`torch.stack`,
    MixUp's blend): tens of MB, above glibc's mmap threshold (at most 32 MiB when it adapts),
    so each one is a fresh mapping whose every page faults in, which costs more than the copy
    itself. Raising the mmap threshold to 256 MiB and the trim threshold to 512 MiB lets freed
    batches be reused from the heap, as tcmalloc and jemalloc (which Intel recommends for
    PyTorch on CPU) do. Done once per process, on glibc only, and not when the user set
    MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_ or HPULOAD_MALLOC_TUNING=0."""
    global malloc_tuned
    if malloc_tuned or os.environ.get("HPULOAD_MALLOC_TUNING", "1") == "0":
        return
    if any(v in os.environ for v in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")):
        return
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return
    try:
        libc = ctypes.CDLL(None)
        ok = libc.mallopt(_M_MMAP_THRESHOLD, 256 << 20) == 1
        ok = libc.mallopt(_M_TRIM_THRESHOLD, 512 << 20) == 1 and ok
    except (OSError, AttributeError):
        return
    malloc_tuned = ok
