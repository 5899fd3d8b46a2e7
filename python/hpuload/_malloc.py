"""glibc malloc tuning for a user's collate_fn on the fast path."""

from __future__ import annotations

import os

#: Whether hpuload raised glibc's malloc thresholds in this process (see `_tune_malloc`).
malloc_tuned = False
#: glibc, once `tune_malloc` raised its thresholds (for `trim`).
_libc = None

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
    global _libc
    _libc = libc if ok else None


def trim() -> None:
    """At an epoch's end, where `tune_malloc` raised the thresholds: glibc's free heap pages
    handed back (`malloc_trim(0)`). With batch-sized tensors on the heap, the holes freed
    tensors leave between smaller blocks stay resident otherwise, and a loader whose
    collate_fn makes a new batch-sized tensor per batch (`run_semantic_segmentation.py`'s
    int64 masks, 16 MiB a batch) grew its RSS in steps, epoch after epoch (BENCHMARKS.md,
    session 99); trimmed once an epoch, it stays flat. One walk of the heap an epoch."""
    if _libc is not None:
        try:
            _libc.malloc_trim(0)
        except (OSError, AttributeError):  # pragma: no cover - glibc has it since 2.0
            pass
