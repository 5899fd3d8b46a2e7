"""hpuload's bad-input policy on torch's loader: a fallback reads the user's map-style Dataset
through `Guarded`, so a damaged or missing file is named and its sample replaced (or, under
`on_error="fail"`, raised as `hpuload.SampleError` naming it), as on hpuload's own path, where
torch's loader would stop the run with an error that often names no file.

Only failures of reading or decoding are taken as bad input: an `OSError` (a missing file,
Pillow's `UnidentifiedImageError` and "image file is truncated"), Pillow's
`DecompressionBombError`, `hpuload.LoaderError` (hpuload's video reader answering decord's or
torchcodec's), or any error raised inside a library that reads media (Pillow,
torchvision's readers, OpenCV, imageio, decord, torchcodec, PyAV, scipy's `loadmat`). A bug in
the Dataset's own code is raised as torch's loader raises it."""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import warnings

#: Modules (and their submodules) whose errors are a file that cannot be read or decoded.
_READERS = ("PIL", "torchvision.io", "cv2", "imageio", "decord", "torchcodec", "av", "scipy.io", "tifffile")

#: How many later indices are tried, in turn, for a sample that fails.
TRIES = 16


def read_failure(error: BaseException) -> bool:
    """Whether `error` is a file that could not be read or decoded (module docstring)."""
    from . import LoaderError

    if isinstance(error, (OSError, LoaderError)):  # LoaderError: hpuload's own video reader's
        return True
    try:
        from PIL import Image

        if isinstance(error, Image.DecompressionBombError):
            return True
    except ImportError:  # pragma: no cover - Pillow is torchvision's dependency
        pass
    tb = error.__traceback__
    while tb is not None:
        if _in_reader(tb.tb_frame):
            return True
        tb = tb.tb_next
    return False


def _in_reader(frame) -> bool:
    module = frame.f_globals.get("__name__") or ""
    return any(module == r or module.startswith(r + ".") for r in _READERS)


#: Names a reading library's frames give the path they read (a missing file's too).
_PATH_NAMES = ("path", "filename", "fp", "file", "uri", "source")


def _file_in(error: BaseException) -> str | None:
    """The file the failing read was of, where the error or its frames say, innermost frame
    first: the error's own `filename`, a path a reading library's frame was given (one that
    does not exist too), a Pillow image's `filename`, or a local path (a string holding a
    separator) naming a file."""
    name = getattr(error, "filename", None)
    if isinstance(name, (str, os.PathLike)):
        return os.fspath(name)
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        reader = _in_reader(frame)
        for key, value in frame.f_locals.items():
            if reader and key in _PATH_NAMES and isinstance(value, (str, os.PathLike)):
                return os.fspath(value)
            own = getattr(value, "filename", None) if type(value).__module__.startswith("PIL.") else None
            for candidate in (own, value):
                # A path, not any string (a mode such as "RGB" could name a file here).
                if isinstance(candidate, os.PathLike) or (isinstance(candidate, str) and os.sep in candidate):
                    try:
                        if os.path.isfile(candidate):
                            return os.fspath(candidate)
                    except (OSError, ValueError, TypeError):
                        pass
    return None


def _listed_file(dataset, index: int) -> str | None:
    """The file a torchvision-style dataset lists for `index` (`samples`, `imgs`, `images`),
    through `Subset`s and `ConcatDataset`s."""
    import bisect

    import torch.utils.data as tud

    for _ in range(16):  # nested at most this deep
        if isinstance(dataset, tud.Subset):
            dataset, index = dataset.dataset, dataset.indices[index]
        elif isinstance(dataset, tud.ConcatDataset):
            part = bisect.bisect_right(dataset.cumulative_sizes, index)
            index -= dataset.cumulative_sizes[part - 1] if part else 0
            dataset = dataset.datasets[part]
        else:
            break
    for attribute in ("samples", "imgs", "images"):
        listed = getattr(dataset, attribute, None)
        try:
            item = listed[index]
        except Exception:
            continue
        if isinstance(item, (tuple, list)) and item:
            item = item[0]
        if isinstance(item, (str, os.PathLike)):
            return os.fspath(item)
    return None


class Guarded:
    """The map-style `dataset` with hpuload's policy for samples that cannot be read; see
    the module docstring. The failures of an epoch are counted across the loader's worker
    processes (`failed`, shared memory; the loader resets it at each epoch's start) against
    `error_budget` of the dataset's length, past which `hpuload.ErrorBudgetExceeded` is raised,
    as on hpuload's own path."""

    def __init__(self, dataset, on_error: str, error_budget: float, context=None):
        if on_error not in ("skip", "fail"):
            raise ValueError(f"on_error={on_error!r}: give 'skip' or 'fail'")
        self.dataset = dataset
        self.on_error = on_error
        self.budget = max(1, math.ceil(len(dataset) * error_budget))
        try:
            self.failed = (context or multiprocessing).Value("l", 0)
        except (OSError, ImportError):  # no shared memory or semaphores here: counted per process
            self.failed = _Count()

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index):
        try:
            return self.dataset[index]
        except Exception as e:
            if not read_failure(e):
                raise
            return self._replaced(index, e)

    def _name(self, index: int, error: BaseException) -> tuple[str, str]:
        """`("index (file)", file)`: the sample and, where known, the file that failed (else
        the index alone, twice)."""
        found = _file_in(error) or _listed_file(self.dataset, index)
        return (f"{index} ({found})", found) if found else (str(index), str(index))

    def _replaced(self, index: int, error: BaseException):
        """The sample of the first later index that loads, for sample `index`, which failed
        with `error` (each failure named and counted)."""
        from . import ErrorBudgetExceeded, SampleError
        from .torch import SkippedSampleWarning

        n = len(self.dataset)
        for _ in range(TRIES):
            what, path = self._name(index, error)
            reason = f"{type(error).__name__}: {error}"
            if self.on_error == "fail":
                raise SampleError(f"hpuload: sample {what}: cannot be loaded: {reason}", path, reason) from error
            with self.failed.get_lock():
                self.failed.value += 1
                failed = self.failed.value
            if failed > self.budget:
                raise ErrorBudgetExceeded(
                    f"{failed} samples failed this epoch, over the error budget of {self.budget}; the dataset "
                    f"looks misconfigured (last: sample {what}: {reason})"
                ) from error
            other = (index + 1) % n
            warnings.warn(
                f"hpuload: skipped sample {what}: cannot be loaded; replaced by sample {other}. {reason}",
                SkippedSampleWarning,
                stacklevel=3,
            )
            try:
                return self.dataset[other]
            except Exception as e:
                if not read_failure(e):
                    raise
                index, error = other, e
        raise ErrorBudgetExceeded(
            f"{TRIES} samples in a row cannot be loaded (last: sample {self._name(index, error)[0]}: {error})"
        ) from error


class _Count:
    """A count of one process, shaped as `multiprocessing.Value`."""

    value = 0

    @staticmethod
    def get_lock():
        return contextlib.nullcontext()


class GuardedBatches(Guarded):
    """A `Guarded` dataset that has `__getitems__` (a batch fetched at once, as Hugging Face's
    datasets do): the batch as the dataset gives it, or sample by sample when a read fails."""

    def __getitems__(self, indices):
        try:
            return self.dataset.__getitems__(indices)
        except Exception as e:
            if not read_failure(e):
                raise
            return [self[i] for i in indices]


def guard(dataset, on_error: str, error_budget: float, context=None) -> Guarded | None:
    """`dataset` under hpuload's policy, or None for one without indices (an
    `IterableDataset`) or without a length."""
    import torch.utils.data as tud

    if isinstance(dataset, tud.IterableDataset) or not hasattr(dataset, "__getitem__"):
        return None
    try:
        len(dataset)
    except Exception:  # no length (TypeError, or a NotImplementedError of the class's own)
        return None
    kind = GuardedBatches if hasattr(dataset, "__getitems__") else Guarded
    return kind(dataset, on_error, error_budget, context)
