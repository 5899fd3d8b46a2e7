"""The steps of a user's transform that hpuload does not translate, run in Python on what the
native prefix made (see `_transforms.translate_split`).

Each sample's tail runs with Python's `random`, NumPy's global generator and torch's CPU
generator seeded from `(seed, epoch, dataset index)`, as hpuload's own draws are: the same
run gives the same samples, a resumed one continues with them, and two samples never share a
draw. The generators' states are saved before a batch's tails and restored after, so the
training loop's own draws (dropout, its shuffles) go on exactly as if no tail had run. That is
why the tail never runs in a thread of ours beside the training loop, which would share those
generators with it: it runs either in the thread that iterates, between the generators' save
and restore, or in `num_workers` forked processes (`Pool`), as torch's DataLoader runs a whole
transform, one batch ahead of the one handed out. With `num_workers` of 0 or 1 it is the
thread; with more, `Placement` times the first batches in the thread and keeps the tail there
when the thread keeps up with the native workers (a cheap tail, such as a `Lambda` over the
tensor), since the processes' copies cost more than such a tail's own work.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import hashlib
import math
import os
import random
import struct
import sys
import threading
import weakref
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


def image_seed(seed: int, image: int) -> int:
    """The seed the tail of image `image` of each sample draws from, where a sample holds
    several (`_cores`): image 0 the loader's own, every other one of its own."""
    if image == 0:
        return seed
    key = struct.pack("<QQ", seed & (2**64 - 1), image)
    return int.from_bytes(hashlib.blake2b(key, digest_size=8, person=b"hpuload-image").digest(), "little") >> 1


def batch_seed(seed: int, epoch: int, step: int, person: bytes = b"hpuload-collate") -> int:
    """A 63-bit seed for the `collate_fn` of an epoch's batch `step`, apart from every sample's
    (`person`: another use's seeds, apart from these)."""
    key = struct.pack("<QQQ", seed & (2**64 - 1), epoch & (2**64 - 1), step & (2**64 - 1))
    digest = hashlib.blake2b(key, digest_size=8, person=person).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


@contextlib.contextmanager
def seeded_batch(seed: int, epoch: int, step: int, person: bytes = b"hpuload-collate"):
    """Runs the block (a batch's `collate_fn`) with Python's, NumPy's and torch's global
    generators seeded from `(seed, epoch, step)`, their states before restored after: the
    collate's draws (MixUp's, CutMix's, a copy-paste's) repeat on a resumed run, and the
    training loop's own draws go on as if it had not run, as with torch's worker processes,
    whose collate draws from their own generators. `person` keeps another use's seeds apart
    from these (`seeded_sample`).

    Only on the main thread. A loader iterated on another thread (a prefetching wrapper) runs
    beside a training loop that may draw from the same global generators meanwhile; seeding and
    restoring them there would hand the loop the collate's numbers and then rewind it, so the
    block runs on the generators as they are."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with _Isolated():
        _seed_all(batch_seed(seed, epoch, step, person))
        yield


@contextlib.contextmanager
def seeded_sample(seed: int, epoch: int, index: int):
    """`seeded_batch` for the values a Dataset's code draws for sample `index` of an epoch
    (`_probe.DrawnExtras`), from seeds apart from the batches'."""
    with seeded_batch(seed, epoch, index, person=b"hpuload-sample"):
        yield


@contextlib.contextmanager
def seeded_samples(seed: int, epoch: int):
    """`seeded_sample` for many samples in a row: gives `seed(index)`, which seeds the global
    generators for sample `index` as `seeded_sample` does; their states before are restored
    once, after the block (saving and restoring NumPy's state costs more than the draws of a
    sample). Only on the main thread, as `seeded_batch`."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda index: None
        return
    with _Isolated():
        yield lambda index: _seed_all(batch_seed(seed, epoch, index, b"hpuload-sample"))


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


def _input(view: torch.Tensor, gives: str, own: bool = False, channels_last: bool = False) -> Any:
    """One sample of the prefix's batch as the tail's first step gets it from the user's code.
    `own`: the view is of a buffer this tail alone reads (a pool's shared input, or the native
    batch once `_run` writes its outputs into a batch), which it may change in place, so a
    tensor is not copied first. `channels_last`: a CHW tensor is handed in channels-last
    memory, as the user's steps would hand it (`Tail.channels_last`)."""
    if gives == "pil":
        from PIL import Image

        # The batch is NHWC uint8 for a PIL tail: one row is the image's bytes in PIL's order.
        return Image.fromarray(view.numpy())
    if gives == "array":
        # An albumentations tail: the `[H, W, C]` uint8 NumPy array cv2.imread's image is.
        return view.numpy().copy()
    if channels_last:
        x = view.permute(1, 2, 0).contiguous().permute(2, 0, 1)  # a copy: the tail may change it
    else:
        x = view if own else view.clone()  # the tail may work in place; the loader's buffer is reused
    if gives == "image":
        from torchvision import tv_tensors

        return tv_tensors.Image(x)
    return x


def run(
    tail, images: torch.Tensor, indices: list[int], seed: int, epoch: int, one_thread: bool = False, batches: "Batches | None" = None
) -> torch.Tensor | list:
    """The tail's output for each sample of a batch (`images`' rows, dataset `indices`): one
    batch tensor whose rows are the outputs when they are plain tensors of one shape and dtype
    (each written into its row as it is made, so no stack copies them again), else the list.

    `one_thread`: torch's operations run on one thread meanwhile, as in torch's
    DataLoader workers (where the user's transform would run), so they give those workers'
    bits, and idle intra-op threads spinning after each small operation take no cores from
    the native workers. `batches`: where the batch tensor comes from (new memory otherwise)."""
    with single_threaded() if one_thread else contextlib.nullcontext():
        return _run(tail, images, indices, seed, epoch, batches)


@contextlib.contextmanager
def single_threaded():
    """torch's operations on one intra-op thread meanwhile, as in torch's DataLoader workers
    (where the user's Python would run): their bits, and no idle threads spinning beside the
    native workers."""
    threads = torch.get_num_threads()
    if threads != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if threads != 1:
            torch.set_num_threads(threads)


def _run(tail, images: torch.Tensor, indices: list[int], seed: int, epoch: int, batches) -> torch.Tensor | list:
    out: list = []
    batch = None
    with _Isolated():
        for row, (view, index) in enumerate(zip(images.unbind(0), indices)):
            _seed_all(sample_seed(seed, epoch, index))
            # Once the outputs go into a batch (copied there), a sample's tensor is the native
            # batch's row itself, not a copy: only this tail reads that row, so a step that
            # works in place changes bytes no one else reads, and its output then replaces them.
            y = tail(_input(view, tail.gives, own=batch is not None, channels_last=getattr(tail, "channels_last", False)))
            if row == 0 and type(y) is torch.Tensor:
                if y.shape == images.shape[1:] and y.dtype == images.dtype:
                    # The outputs take the rows they came from: the native batch is handed
                    # out as the batch, as without a tail, and each output is written where
                    # its input was just read (in cache), not into a batch of its own.
                    batch = images[: len(indices)]
                else:
                    shape = (len(indices), *y.shape)
                    batch = batches.get(shape, y.dtype) if batches is not None else torch.empty(shape, dtype=y.dtype)
            if batch is not None:
                if _fits(y, batch):
                    _put(batch[row], y)
                    continue
                # Not uniform after all: the rows so far become a list.
                out, batch = list(_unaliased(batch[:row], images).unbind(0)), None
            # What goes back as itself must not be a view of the native batch, which the loader
            # writes again.
            out.append(_unaliased(y, images))
    return batch if batch is not None else out


class Placement:
    """Where a tail runs when the loader has worker processes for it: in the thread that
    iterates when that is cheaper, in the processes (`Pool`) otherwise. It only moves work:
    both run each sample with the same seeded generators on the same input, so the output is
    the same either way.

    The first `PROBE` batches run in the thread, timed. In the thread a tail costs its own time
    and nothing else, but that thread runs it serially while the native workers load the next
    batches; in the processes it runs beside them, and each batch also costs a copy into
    shared memory and back, and the processes' own bookkeeping (on 2 cores and a batch of 256
    224x224 float images, about 140 ms of CPU a batch beside the tail's own work, BENCHMARKS.md,
    session 31). So the thread is chosen when it keeps up: when the tail's time per sample is
    at most the native workers' CPU time per sample divided by how many of them run at once
    (the loader's workers, at most the cores this process may use), measured over the last
    probe batch. Not the first two: a batch made in the thread is new memory until the loop
    lets go of one (the third reuses the first's, `Batches`), and faulting in fresh pages
    would count as the tail's own time. A tail that costs more than twice what the thread can
    take is sent to the processes after the second."""

    PROBE = 3

    def __init__(self, native_workers: int):
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # pragma: no cover - not Linux
            cores = os.cpu_count() or 1
        self.parallel = max(1, min(native_workers, cores))
        #: "thread" or "processes" once decided; None while probing.
        self.where: str | None = None
        self._probed = 0
        self._marks: tuple[float, float] | None = None
        #: The measured CPU seconds per sample: the tail's, the native side's.
        self.measured: tuple[float, float] | None = None
        #: The batches the tail makes in the thread, reused once the loop lets go of them.
        self.batches = Batches(lambda shape, dtype: torch.empty(shape, dtype=dtype))

    def probe(self, work):
        """Runs `work` (the tail on one batch, in this thread), timed; decides after `PROBE`."""
        import time

        before = time.thread_time()
        result = work()
        after_thread, after_process = time.thread_time(), time.process_time()
        self._probed += 1
        if self._marks is not None:
            process = after_process - self._marks[0]
            thread = after_thread - self._marks[1]
            n = max(1, len(result))
            tail = (after_thread - before) / n
            native = max(0.0, process - thread) / n
            # A tail at more than twice what the thread can take goes to the processes at
            # once: fresh pages cannot account for that much.
            if self._probed >= self.PROBE or tail * self.parallel > 2 * native:
                self.measured = (tail, native)
                self.where = "thread" if tail * self.parallel <= native else "processes"
        self._marks = (after_process, after_thread)
        return result


# --- worker processes ---------------------------------------------------------------------
#
# With `Pool`, the tail (the user's Python) runs in forked processes, as torch's DataLoader
# runs a whole transform: in parallel despite the GIL, and with draws from the global
# generators that touch neither the training loop's generators nor each other's. A fork
# inherits the tail as it is (lambdas included); the children only ever run `_chunk`, never
# the loader. Bytes cross once each way through shared memory: the parent copies the native
# batch into one of two input buffers it keeps, and the children write their outputs straight
# into the rows of one shared output batch (once the outputs' shape is known from the first
# batch), which is handed out as the batch itself, as torch's workers collate into shared
# memory. Unlike torch's workers, the parent writes into an output batch again once nothing
# holds it, and the children keep the buffers mapped: on a 2-core host, fresh shared memory
# per batch (mapped, zeroed and faulted in by two processes) cost more than the tail's work.

#: The tails pools run, by key: set in the parent before its children fork, so they have it.
_forked_tails: dict = {}


#: How many output batches a pool keeps for reuse: the one in flight, the one handed out, and
#: two the loop may still hold (a batch kept for logging, a prefetching wrapper).
_KEPT = 4


#: In a child: the shared buffers of the last few tasks. Holding them keeps torch's cache of
#: received shared memory warm, so a buffer the parent sends again is not mapped again (whose
#: page faults cost a child more than the tail's own work on a batch of 224x224 floats). The
#: parent keeps two input and at most `_KEPT` output buffers, so nothing it let go of stays.
_recent: collections.deque = collections.deque(maxlen=2 + _KEPT)


def _child_init() -> None:
    # One intra-op thread per child, as torch's workers: forked OpenMP pools are unusable, and
    # the children already share the cores.
    torch.set_num_threads(1)


def _chunk(key: int, images: torch.Tensor, rows: range, seeds: list[int], out) -> tuple[str, Any]:
    """The tail on `rows` of the shared input batch. Outputs that are plain tensors of the
    shape and dtype of `out`'s rows are written there ("written"); otherwise the outputs
    themselves come back ("list")."""
    tail = _forked_tails[key]
    _recent.extend(b for b in (images, out) if b is not None)
    results = []
    for row, s in zip(rows, seeds):
        _seed_all(s)
        results.append(tail(_input(images[row], tail.gives, own=True, channels_last=getattr(tail, "channels_last", False))))
    if out is not None and all(_fits(y, out) for y in results):
        for row, y in zip(rows, results):
            out[row].copy_(y)
        return "written", None
    # Outputs that go back as themselves must not be views of the input buffer, which the
    # batch after next overwrites.
    return "list", [_unaliased(y, images) for y in results]


def _put(row: torch.Tensor, y: torch.Tensor) -> None:
    """Writes `y` into `row`, which it may overlap: the output of a step that worked in place
    (nothing to do) or a view of its input in another order (copied out first)."""
    if y.untyped_storage().data_ptr() == row.untyped_storage().data_ptr():
        if y.data_ptr() == row.data_ptr() and y.stride() == row.stride():
            return
        y = y.clone()
    row.copy_(y)


def _unaliased(y, buffer: torch.Tensor):
    """`y` with every tensor and NumPy array in it that shares `buffer`'s memory copied."""
    start = buffer.untyped_storage().data_ptr()
    end = start + buffer.untyped_storage().nbytes()
    if isinstance(y, torch.Tensor):
        return y.clone() if y.untyped_storage().data_ptr() == start else y
    if _np is not None and isinstance(y, _np.ndarray):
        return y.copy() if start <= y.__array_interface__["data"][0] < end else y
    if isinstance(y, (list, tuple)) and not hasattr(y, "_fields"):
        return type(y)(_unaliased(v, buffer) for v in y)
    if isinstance(y, dict):
        return {k: _unaliased(v, buffer) for k, v in y.items()}
    return y


def _fits(y, out: torch.Tensor) -> bool:
    return type(y) is torch.Tensor and y.shape == out.shape[1:] and y.dtype == out.dtype


def _holders(buffer: torch.Tensor) -> tuple[int, int] | None:
    """How many references `buffer`'s memory has: in C++ (each tensor or view over it, a NumPy
    array, the storage's Python object) and to that Python object; None on an older torch
    without the count. A buffer whose holders are those it had when it was made has nothing
    handed out over it any more."""
    count = getattr(torch._C, "_storage_Use_Count", None)
    if count is None:  # pragma: no cover - older torch
        return None
    storage = buffer.untyped_storage()
    return count(storage._cdata), sys.getrefcount(storage)


def _shared(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """A new tensor in shared memory, its contents not copied from anywhere."""
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    try:
        storage = torch.UntypedStorage._new_shared(nbytes)
    except AttributeError:  # pragma: no cover - older torch
        return torch.empty(shape, dtype=dtype).share_memory_()
    return torch.empty((0,), dtype=dtype).set_(storage).view(shape)


class Batches:
    """Output batches handed out before, to write into again once nothing holds them (their
    storage's use count is back to what it was when made: a tensor, a view or a NumPy array of
    the user's keeps one), at most `_KEPT`; a loop that keeps batches gets new ones. A new
    batch costs more than its contents: mapping, zeroing and faulting in the pages of 256
    float images of 224x224 took 170-200 ms here, writing them again 24-50 ms (BENCHMARKS.md,
    session 25); glibc's heap does not reliably hand the same block back either."""

    def __init__(self, make):
        #: `make(shape, dtype)`: a new batch.
        self._make = make
        #: Each kept batch with its holders when nothing else held it.
        self._kept: list[tuple[torch.Tensor, tuple[int, int]]] = []

    def get(self, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
        """A batch of `shape` (its contents undefined)."""
        n, sample = shape[0], tuple(shape[1:])
        for k, (buffer, alone) in enumerate(self._kept):
            if tuple(buffer.shape[1:]) == sample and buffer.dtype == dtype and buffer.shape[0] >= n and _holders(buffer) == alone:
                # To the back: the batch handed out longest ago is the first looked at.
                self._kept.append(self._kept.pop(k))
                return buffer[:n]
        buffer = self._make((n, *sample), dtype)
        alone = _holders(buffer)
        kept = [b for b in self._kept if tuple(b[0].shape[1:]) == sample and b[0].dtype == dtype]
        self._kept = kept[-(_KEPT - 1) :] + ([(buffer, alone)] if alone is not None else [])
        return buffer[:n]


class Pool:
    """`workers` forked processes running one tail. `images`: the batches submitted per step
    (a sample's several images, `_cores`: one batch each)."""

    def __init__(self, tail, workers: int, images: int = 1):
        import torch.multiprocessing as tmp

        self.tail = tail
        self.workers = workers
        self.key = id(self)
        self.owner = os.getpid()
        _forked_tails[self.key] = tail
        self._pool = tmp.get_context("fork").Pool(workers, initializer=_child_init)
        self._pids = {p.pid for p in self._pool._pool}
        # Stopped before the interpreter's teardown, which leaves multiprocessing's own
        # finalizer half gone ("Exception ignored in Pool.__del__").
        atexit.register(_close_if_alive, weakref.ref(self))
        #: Two input buffers per image of a sample (a step's batches in flight while the
        #: previous step's are handed out).
        self._depth = 2 * images
        self._inputs: list[torch.Tensor] = []
        self._turn = 0
        #: Output batches in shared memory, kept for reuse.
        self._outputs = Batches(_shared)
        #: The outputs' (shape, dtype) when the last batch's were uniform plain tensors.
        self.sample: tuple | None = None

    def _input_buffer(self, images: torch.Tensor) -> torch.Tensor:
        shape, dtype = tuple(images.shape), images.dtype
        if not self._inputs or self._inputs[0].shape[1:] != shape[1:] or self._inputs[0].dtype != dtype or self._inputs[0].shape[0] < shape[0]:
            self._inputs = [_shared(shape, dtype) for _ in range(self._depth)]
        buffer = self._inputs[self._turn][: shape[0]]
        self._turn = (self._turn + 1) % self._depth
        buffer.copy_(images)
        return buffer

    def _output(self, n: int) -> torch.Tensor:
        """Shared memory for a batch of `n` outputs of the sample's shape (see `Batches`)."""
        shape, dtype = self.sample
        return self._outputs.get((n, *shape), dtype)

    def submit(self, images: torch.Tensor, indices: list[int], seed: int, epoch: int) -> "Pending":
        """Starts the tail on a batch (the batch's buffer is the loader's to reuse: its bytes
        are copied into shared memory first)."""
        shared = self._input_buffer(images)
        n = len(indices)
        out = self._output(n) if self.sample is not None else None
        per = -(-n // self.workers)
        jobs = []
        for start in range(0, n, per):
            rows = range(start, min(n, start + per))
            seeds = [sample_seed(seed, epoch, indices[r]) for r in rows]
            jobs.append((rows, self._pool.apply_async(_chunk, (self.key, shared, rows, seeds, out))))
        return Pending(self, jobs, out, n)

    def check(self) -> None:
        """Raises when a child died (its task would never finish)."""
        for p in self._pool._pool:
            if p.pid not in self._pids or (p.exitcode is not None and p.exitcode != 0):
                raise RuntimeError(
                    f"hpuload: a worker process running the transform's Python steps ({', '.join(self.tail.names)}) "
                    f"died (exit code {p.exitcode}); the batch it had is lost"
                )

    def close(self) -> None:
        """Stops the children (only from the process that made them: a copy of this object in
        a forked process must not signal them)."""
        if self._pool is None or os.getpid() != self.owner:
            return
        self._pool.terminate()
        self._pool.join()
        self._pool = None
        _forked_tails.pop(self.key, None)


def _close_if_alive(ref) -> None:
    pool = ref()
    if pool is not None:
        pool.close()


class Pending:
    """A batch whose tail runs in the pool."""

    def __init__(self, pool: Pool, jobs: list, out: torch.Tensor | None, n: int):
        self.pool = pool
        self.jobs = jobs
        self.out = out
        self.n = n

    def result(self, timeout: float | None = None) -> torch.Tensor | list:
        """The batch's outputs: the shared output batch when every sample's output was
        written there (its rows are the samples), else the list of outputs."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        written, out = 0, []
        for rows, job in self.jobs:
            while not job.ready():
                job.wait(0.5)
                if not job.ready():
                    self.pool.check()
                    if deadline is not None and time.monotonic() > deadline:
                        raise TimeoutError(f"hpuload: the transform's Python steps took more than {timeout} s for a batch")
            kind, value = job.get()
            if kind == "written":
                written += 1
                value = list(self.out[rows.start : rows.stop])
            out.extend(value)
        if written == len(self.jobs):
            return self.out
        # The next batch's outputs go straight into shared rows when these were uniform.
        first = out[0] if out else None
        uniform = first is not None and all(
            type(y) is torch.Tensor and y.shape == first.shape and y.dtype == first.dtype for y in out
        )
        self.pool.sample = (tuple(first.shape), first.dtype) if uniform else None
        return out
