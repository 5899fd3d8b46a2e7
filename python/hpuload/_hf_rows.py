"""A `datasets` table of an image and columns other than a label (a text-to-image table: an
image and its captions), whose `with_transform` function makes more than the image tensor
(diffusers' `train_text_to_image.py`: `pixel_values` by a torchvision transform, `input_ids`
by tokenizing the captions). hpuload decodes and transforms the images natively, and runs the
user's function itself on each batch's other columns, once per batch as torch's loader does
through `datasets`' `__getitems__`, with the images stood in for (`_Row`: `.convert("RGB")`
only) and the transform it applies stood in for by one that gives each row's native tensor
(`_Transform`). Everything else the function does (tokenizing, choosing one of several
captions, adding keys) runs as written.

`RowFunction.check` shows the function does only that to the images: on five rows, under the
same seeded draws, what the dataset gives equals what the function gives with the stand-ins
and the transform's output on the row's RGB image; a function that reads the image otherwise
(its size, its mode) or draws from torch's generator beside the transform (so that its draws
would differ) is refused, named, and the dataset goes to torch's loader."""

from __future__ import annotations

import dis
import types
from collections.abc import Mapping
from typing import Any

import torch

from ._fallback import FallbackReason, Unfit


class NeedsImage(Exception):
    """The function did something with a row's image other than `.convert("RGB")` and the
    transform."""


class _Row:
    """A batch row's image, stood in for: `convert("RGB")` gives itself (hpuload decodes to
    RGB); anything else raises `NeedsImage`."""

    __slots__ = ("k", "converted")

    def __init__(self, k: int):
        self.k = k
        self.converted = False

    def convert(self, mode=None, *args, **kwargs):
        if mode == "RGB" and not args and not kwargs:
            self.converted = True
            return self
        raise NeedsImage(f"the function converts the image with convert({mode!r}, ...), not convert('RGB')")

    def __getattr__(self, name: str):
        raise NeedsImage(f"the function reads the image's {name!r}")


class _Transform:
    """The transform the function applies, stood in for: a row's image gives that row's
    native tensor."""

    def __init__(self, views):
        self.views = views
        #: An image was handed over without `convert("RGB")` (in its own mode, with torch's).
        self.unconverted = False

    def __call__(self, image, *rest, **kwargs):
        if isinstance(image, _Row) and not rest and not kwargs:
            self.unconverted |= not image.converted
            return self.views[image.k]
        raise NeedsImage(f"the function calls its transform on a {type(image).__name__}, not a row's image")


def _stores_globals(code) -> bool:
    """Whether `code` (or a code object inside it) assigns a global name: a function run with
    a copy of its module's globals would lose that."""
    if any(op.opname in ("STORE_GLOBAL", "DELETE_GLOBAL") for op in dis.get_instructions(code)):
        return True
    return any(_stores_globals(c) for c in code.co_consts if isinstance(c, types.CodeType))


def _holds(cell, obj) -> bool:
    try:
        return cell.cell_contents is obj
    except ValueError:  # an empty cell
        return False


class RowFunction:
    """The dataset's function, run on a batch's other columns with the images and the
    transform (`found`) stood in for; see the module docstring."""

    def __init__(self, dataset, image_column: str, found):
        T = FallbackReason.TRANSFORM
        fn = dataset._format_kwargs.get("transform")
        name = getattr(fn, "__name__", type(fn).__name__)
        if not isinstance(fn, types.FunctionType):
            raise Unfit(f"{name} (the dataset's transform) is no plain function, which hpuload runs with its images stood in for", T)
        if _stores_globals(fn.__code__):
            raise Unfit(f"{name} (the dataset's transform) assigns global names", T)
        if getattr(dataset, "_format_columns", None) is not None:
            raise Unfit(f"{name} (the dataset's transform) is given only some columns (with_transform(columns=...))", T)
        if not (type(found).__module__.startswith("torchvision.transforms") or type(found).__module__.startswith("timm.data")):
            raise Unfit(f"{name} applies {type(found).__name__} beside the captions (hpuload runs a torchvision transform there)", T)
        self.dataset, self.fn, self.found, self.image_column = dataset, fn, found, image_column
        self.name = name
        self.order = list(dataset.features)
        others = [k for k in self.order if k != image_column]
        self.raw = dataset.with_format(None).select_columns(others) if others else None
        #: The check saw the function hand an image to the transform without converting it
        #: to RGB: then every image must be RGB (`_hf.hf_source` reads their modes).
        self.unconverted = False

    def _bound(self, stand: _Transform):
        """The function with `stand` in place of the transform in its globals (a copy, made
        per batch: the module's other names as they are now) and its closure."""
        fn = self.fn
        found = self.found
        names = dict(fn.__globals__)
        for key, value in fn.__globals__.items():
            if value is found:
                names[key] = stand
        closure = fn.__closure__
        if closure is not None:
            closure = tuple(types.CellType(stand) if _holds(c, found) else c for c in closure)
        bound = types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, closure)
        bound.__kwdefaults__ = fn.__kwdefaults__
        return bound

    def samples(self, views, indices: list[int]) -> list[dict]:
        """Each sample of a batch as `datasets`' `__getitems__` gives it: `views` the batch's
        native image tensors, `indices` the dataset's rows. The key that held the images (the
        image column, when the function returns its input) is left out: its values are no
        images here."""
        n = len(indices)
        other = self.raw[list(indices)] if self.raw is not None else {}
        batch = {k: ([_Row(i) for i in range(n)] if k == self.image_column else other[k]) for k in self.order}
        stand = _Transform(views)
        out = self._bound(stand)(batch)
        self.unconverted |= stand.unconverted
        if not isinstance(out, Mapping):
            raise TypeError(f"{self.name} (the dataset's transform) returned a {type(out).__name__}, not a dict")
        samples: list[dict[str, Any]] = [{} for _ in range(n)]
        for key, values in out.items():
            if len(values) != n:
                raise ValueError(f"{self.name} (the dataset's transform) returned {len(values)} values of {key!r} for {n} rows")
            if n and isinstance(values[0], _Row):
                continue
            for i in range(n):
                samples[i][key] = values[i]
        return samples

    def check(self, transform, rows: list[int], draws_from) -> None:
        """`Unfit` unless, on each of `rows`, the dataset's own sample equals this function's
        (the image key's tensor the transform's output on the row's RGB image), both under
        `draws_from(row + 1)`."""
        from ._behaviour import generators_kept

        T = FallbackReason.TRANSFORM
        raw = self.dataset.with_format(None)
        ran, failure = 0, None
        with generators_kept():
            for row in rows:
                try:
                    draws_from(row + 1)
                    want = self.dataset[row]
                    draws_from(row + 1)
                    image = transform(raw[row][self.image_column].convert("RGB"))
                except Exception as e:  # a damaged row: the loader names and skips it when read
                    failure = failure or f"row {row}: {type(e).__name__}: {e}"
                    continue
                draws_from(row + 1)
                try:
                    (got,) = self.samples([image], [row])
                except NeedsImage as e:
                    raise Unfit(f"{self.name} (the dataset's transform) on row {row}: {e} (hpuload hands it stand-ins)", T) from None
                ran += 1
                mine = {k: v for k, v in want.items() if k != self.image_column}
                if list(mine) != list(got) or not all(_same(mine[k], got[k]) for k in got):
                    which = next((k for k in got if k not in mine or not _same(mine[k], got[k])), None)
                    raise Unfit(
                        f"{self.name} (the dataset's transform) gives row {row} another {which!r} when hpuload runs it "
                        "with the images stood in for (it reads the images otherwise, or draws from torch's generator "
                        "beside the transform)",
                        T,
                    )
        if rows and not ran:
            raise Unfit(f"{self.name} (the dataset's transform) could not be checked on any row ({failure})", T)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    try:
        import numpy as np

        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    except ImportError:  # pragma: no cover
        pass
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b
