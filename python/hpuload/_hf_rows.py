"""A `datasets` table of an image and columns other than a label (a text-to-image table: an
image and its captions), whose `with_transform` function makes more than the image tensor
(diffusers' `train_text_to_image.py`: `pixel_values` by a torchvision transform, `input_ids`
by tokenizing the captions). hpuload decodes and transforms the images natively, and runs the
user's function itself on each batch's other columns, once per batch as torch's loader does
through `datasets`' `__getitems__`, with the images stood in for (`_Row`: `.convert("RGB")`
only) and the transform it applies stood in for by one that gives each row's native tensor
(`_Transform`). Everything else the function does (tokenizing, choosing one of several
captions, adding keys) runs as written.

A table may hold the images' paths (transformers' `run_clip.py`) or their encoded bytes
(img2dataset's Parquet) instead of an Image column, which the function reads itself: the
column's values are handed over as `_Path`s or `_Encoded`s (the strings or bytes themselves,
carrying their row), and the reads of them (torchvision's `read_image`/`decode_image`,
Pillow's `Image.open` of a path or of `io.BytesIO` of the bytes) are stood in for by
`_Readers`, which give the row's `_Row`.

`RowFunction.check` shows the function does only that to the images: on five rows, under the
same seeded draws, what the dataset gives equals what the function gives with the stand-ins
and the transform's output on the row's RGB image; a function that reads the image otherwise
(its size, its mode) or draws from torch's generator beside the transform (so that its draws
would differ) is refused, named, and the dataset goes to torch's loader."""

from __future__ import annotations

import dis
import functools
import io
import types
from collections.abc import Mapping
from typing import Any

import torch

from ._fallback import FallbackReason, Unfit


class NeedsImage(Exception):
    """The function did something with a row's image other than `.convert("RGB")` and the
    transform."""


class _Path(str):
    """A row's path in a table of paths (the column's own string), carrying the row, so that
    the readers stood in for know which image it names."""

    k: int


def _path(value: str, k: int) -> _Path:
    path = _Path(value)
    path.k = k
    return path


class _Encoded(bytes):
    """A row's encoded image in a table of them (the column's own bytes), carrying the row."""

    k: int


def _encoded(value: bytes, k: int) -> _Encoded:
    data = _Encoded(value)
    data.k = k
    return data


class _Stream:
    """`io.BytesIO` of a row's `_Encoded` bytes, stood in for: what Pillow's `Image.open`
    stand-in reads (`_Readers.open`)."""

    __slots__ = ("data",)

    def __init__(self, data: _Encoded):
        self.data = data

    def __getattr__(self, name: str):
        raise NeedsImage(f"the function reads the image's bytes itself (.{name} of its BytesIO)")


class _IOModule:
    """`io` as the function sees it: `BytesIO` of a row's bytes is a `_Stream`, the rest the
    module's own."""

    def BytesIO(self, initial_bytes=b"", *args, **kwargs):  # noqa: N802 - the module's name
        if isinstance(initial_bytes, _Encoded) and not args and not kwargs:
            return _Stream(initial_bytes)
        return io.BytesIO(initial_bytes, *args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(io, name)


class _Row:
    """A batch row's image, stood in for. A PIL image (an Image column's, or `Image.open` of a
    path): `convert("RGB")` gives it in RGB (hpuload decodes to RGB) and a `with` block holds
    it; torchvision's reader's uint8 tensor (`tensor`): nothing. Anything else raises
    `NeedsImage`. While checking, `real` is the image itself."""

    __slots__ = ("k", "converted", "tensor", "real", "column", "arrayed", "shape", "log")

    def __init__(
        self,
        k: int,
        real=None,
        *,
        tensor: bool = False,
        converted: bool = False,
        column: str | None = None,
        arrayed: bool = False,
        shape: tuple[int, int] | None = None,
        log: set | None = None,
    ):
        self.k = k
        #: The image's `(width, height)` as `datasets` decodes it, where the loader knows it
        #: (`RowFunction.facts`), answered as `size`, `width` and `height`; `log` notes that
        #: the function read it.
        self.shape, self.log = shape, log
        self.real = real
        self.tensor = tensor
        #: In RGB, whatever the file holds (converted, or read in RGB mode).
        self.converted = converted
        #: The image column the image is of (None: the table's one).
        self.column = column
        #: Made a NumPy array (`np.array(image)`, for an albumentations `Compose`).
        self.arrayed = arrayed

    @property
    def form(self) -> tuple[bool, bool, bool]:
        """`(tensor, rgb, array)`: how the function holds the image it hands its transform."""
        return self.tensor, self.converted, self.arrayed

    def __array__(self, dtype=None, copy=None):
        """`np.array(image)`: a 0-d array of objects holding the image, arrayed (what an
        albumentations stand-in unwraps, `_unwrapped`); its pixels are hpuload's."""
        import numpy as np

        if self.tensor or self.arrayed or dtype is not None:
            raise NeedsImage("the function makes a NumPy array of the image otherwise than np.array(image)")
        held = np.empty((), dtype=object)
        held[()] = _Row(self.k, self.real, converted=self.converted, column=self.column, arrayed=True)
        return held

    def convert(self, mode=None, *args, **kwargs):
        if self.tensor:
            raise NeedsImage("the function calls .convert on the tensor torchvision's reader gave")
        if mode == "RGB" and not args and not kwargs:
            real = None if self.real is None else self.real.convert("RGB")
            return _Row(self.k, real, converted=True, column=self.column, shape=self.shape, log=self.log)
        raise NeedsImage(f"the function converts the image with convert({mode!r}, ...), not convert('RGB')")

    def __enter__(self):
        if self.tensor:
            raise NeedsImage("the function holds the tensor torchvision's reader gave in a with block")
        return self

    def __exit__(self, *exc):
        return False

    def __getattr__(self, name: str):
        if name.startswith("__array_"):  # NumPy's other ways in: `__array__` is the one
            raise AttributeError(name)
        if name in ("size", "width", "height") and self.shape is not None and not self.tensor and not self.arrayed:
            if self.log is not None:
                self.log.add("size")
            return self.shape if name == "size" else self.shape[name == "height"]
        raise NeedsImage(f"the function reads the image's {name!r}")


def _unwrapped(value):
    """The arrayed `_Row` a 0-d array of `np.array(image)` holds, else `value` itself."""
    import numpy as np

    if isinstance(value, np.ndarray) and value.dtype == object and value.shape == () and isinstance(value[()], _Row):
        return value[()]
    return value


class _Seen:
    """What the stand-in transforms of one run of the function saw, shared between them: the
    forms each image column's images were handed over in (`forms`), and which transform each
    column's images went through (`transform_of`). Outside the check, `form` and
    `transform_of` are what the check learnt, and every batch must do the same. While
    checking, `drawn` holds each row's generator states after its last transform, so that a
    row's transforms draw in turn from one stream, as torch's loader runs them."""

    def __init__(self, form: dict | None = None, transform_of: dict | None = None, chained: dict | None = None):
        self.forms: dict = {}
        self.form = form
        self.checking = form is None
        self.transform_of: dict = dict(transform_of or {})
        self.drawn: dict = {}
        #: While checking, each (column, row)'s first output: a second call on the same image
        #: gets the same native tensor, which is torch's only where the draws change nothing.
        self.first: dict = {}
        #: The column whose images an albumentations `Compose` is given as the mask of each
        #: image column's images (`compose(image=..., mask=...)`).
        self.mask_of: dict = {}
        #: What each transform gave for a row's image, by its id: `(column, row, transform,
        #: output)`, so that a transform handed another's outputs (an image processor given
        #: the jittered images) knows whose they are.
        self.made: dict = {}
        #: Per image column, `(first, then)`: the transforms its images go through in turn,
        #: or None where one transform makes them (`chain` outside the check: what it learnt).
        self.chain: dict = {}
        #: Outside the check, the chains the check learnt (`RowFunction.chain_of`).
        self.chained = chained
        #: `(column, row)` of each image the processor of a chain was given.
        self.processed: set = set()


class _Transform:
    """A transform the function applies (`found`, the `which`-th it reaches), stood in for: a
    row's image gives that row's native tensor (`views[column][k]`). While checking (`check`:
    the row's draws), it gives the transform's output on the row's real image instead: a row's
    first transform draws under `check(row + 1)`, its next ones on from there, with the
    generators as they were around them, as if the transforms had drawn first."""

    def __init__(self, views, found, which: int, seen: _Seen, check=None, rows=None, masks=None):
        self.views, self.found, self.which, self.seen, self.check, self.rows = views, found, which, seen, check, rows
        #: Per mask column, the batch's native masks (`_segmentation.TableMasks`).
        self.masks = masks or {}

    def __call__(self, *args, **kwargs):
        from ._albumentations import is_compose
        from ._hf import _is_image_processor

        if is_compose(self.found):
            return self._albumentations(args, kwargs)
        if _is_image_processor(self.found):
            return self._processor(args, kwargs)
        image = args[0] if args else None
        if not isinstance(image, _Row) or len(args) != 1 or kwargs:
            raise NeedsImage(f"the function calls its transform on a {type(image).__name__}, not a row's image")
        if image.arrayed:
            raise NeedsImage("the function hands a torchvision transform a NumPy array of the image")
        return self._one(image, lambda real: self.found(real))

    def _albumentations(self, args, kwargs):
        """An albumentations `Compose` called as `compose(image=np.array(image))`, or with
        `mask=np.array(mask)` of another image column of the row (its mask, moved with it):
        the dict it returns, of the row's native tensor (and mask)."""
        image, mask = _unwrapped(kwargs.get("image")), _unwrapped(kwargs.get("mask"))
        if args or set(kwargs) - {"image", "mask"} or not isinstance(image, _Row) or not image.arrayed:
            given = ", ".join([type(a).__name__ for a in args] + [f"{k}=" for k in kwargs])
            raise NeedsImage(f"the function calls its albumentations Compose with ({given}), not image=np.array(image)")
        if not image.converted:
            raise NeedsImage("the function hands its albumentations Compose an array of the image in its own mode, not in RGB")
        seen, named = self.seen, "" if image.column is None else f" of column {image.column!r}"
        if "mask" in kwargs:
            if not isinstance(mask, _Row) or not mask.arrayed or mask.k != image.k or mask.column == image.column:
                raise NeedsImage(f"the function hands its albumentations Compose a mask that is not np.array of the row's other image")
            if mask.converted:
                raise NeedsImage("the function converts the mask it hands its albumentations Compose")
        want = mask.column if "mask" in kwargs else None
        if seen.mask_of.setdefault(image.column, want) != want:
            raise NeedsImage(f"the function hands the Compose a mask with the images{named} on some rows and not on others")
        if self.check is None:
            out = {"image": self.views[image.column][image.k]}
            if want is not None:
                out["mask"] = self.masks[want][image.k]
            return {k: out[k] for k in kwargs}

        def real(rgb):
            import numpy as np

            given = {"image": np.array(rgb)}
            if want is not None:
                given["mask"] = np.array(mask.real)
            return self.found(**{k: given[k] for k in kwargs})

        return self._one(image, real)

    def _processor(self, args, kwargs):
        """A transformers image processor called on a batch's images (a list of rows, or one
        row), and with `segmentation_maps` the same rows' images of another column (their
        masks, moved with them: Segformer's `processor(images, labels)`): the `BatchFeature`
        it returns, of the rows' native tensors (and masks)."""
        from transformers import BatchFeature

        def bound(images, segmentation_maps=None, return_tensors=None):
            return images, segmentation_maps, return_tensors

        try:
            images, maps, return_tensors = bound(*args, **kwargs)
        except TypeError:
            given = ", ".join([type(a).__name__ for a in args] + [f"{k}=" for k in kwargs])
            raise NeedsImage(
                f"the function calls its image processor with ({given}), not the images, segmentation maps and return_tensors"
            ) from None
        one = isinstance(images, _Row) or id(images) in self.seen.made
        given = [images] if one else images
        if not isinstance(given, (list, tuple)) or not given:
            raise NeedsImage("the function hands its image processor other than the PIL images of the batch's rows")
        made = [self.seen.made.get(id(g)) for g in given]
        if all(m is not None for m in made):
            # The outputs of another transform of the rows' images (the guide's `jitter(x)`):
            # the processor after it.
            befores = {m[2] for m in made}
            if len(befores) != 1 or self.which in befores:
                raise NeedsImage("the function hands its image processor the outputs of several transforms")
            before = befores.pop()
            rows = [_Row(k, column=column) for column, k, _, _ in made]
        elif all(isinstance(g, _Row) and not g.arrayed and not g.tensor for g in given):
            before, rows = None, given
        else:
            raise NeedsImage("the function hands its image processor other than the PIL images of the batch's rows")
        for r in rows:
            chain = None if before is None else (before, self.which)
            named = "" if r.column is None else f" of column {r.column!r}"
            if self.seen.chain.setdefault(r.column, chain) != chain or (
                self.seen.chained is not None and self.seen.chained.get(r.column) != chain
            ):
                raise NeedsImage(f"the function hands its image processor the images{named} through another transform than on the rows checked")
        one_map = isinstance(maps, _Row)
        if maps is not None:
            maps = [maps] if one_map else maps
            if (
                not isinstance(maps, (list, tuple))
                or len(maps) != len(rows)
                or not all(
                    isinstance(m, _Row) and not m.arrayed and not m.tensor and m.k == r.k and m.column != r.column
                    for m, r in zip(maps, rows)
                )
            ):
                raise NeedsImage("the function hands its image processor segmentation maps that are not the rows' other images")
            if any(m.converted for m in maps):
                raise NeedsImage("the function converts the segmentation maps it hands its image processor")
            if len({m.column for m in maps}) != 1:
                raise NeedsImage("the function hands its image processor segmentation maps of several columns")
        want = None if maps is None else maps[0].column
        for r in rows:
            named = "" if r.column is None else f" of column {r.column!r}"
            if self.seen.mask_of.setdefault(r.column, want) != want:
                raise NeedsImage(f"the function hands its image processor segmentation maps with the images{named} on some rows and not on others")
        if self.check is None:
            self.seen.processed.update((r.column, r.k) for r in rows)
            data = {"pixel_values": [self._one(r, None) if before is None else self.views[r.column][r.k] for r in rows]}
            if want is not None:
                data["labels"] = [self.masks[want][r.k] for r in rows]
            return BatchFeature(data=data, tensor_type=return_tensors)
        real = [self._one(r, lambda image: image) for r in rows] if before is None else list(given)
        given_too = {} if return_tensors is None else {"return_tensors": return_tensors}
        if maps is not None:
            real_maps = [m.real for m in maps]
            given_too["segmentation_maps"] = real_maps[0] if one_map else real_maps
        out = self.found(real[0] if one else real, **given_too)
        keys = ["pixel_values"] + ([] if maps is None else ["labels"])
        if not isinstance(out, Mapping) or list(out) != keys:
            given = list(out) if isinstance(out, Mapping) else type(out).__name__
            raise NeedsImage(f"the function's image processor gives {given}, where hpuload makes {keys}")
        return out

    def _one(self, image: _Row, run):
        seen, column = self.seen, image.column
        named = "" if column is None else f" of column {column!r}"
        if seen.form is not None and image.form != seen.form.get(column):
            raise NeedsImage(
                f"the function hands its transform row {image.k}'s image{named} as {_form_words(image.form)}, "
                f"where it handed the rows checked {_form_words(seen.form.get(column))}"
            )
        seen.forms.setdefault(column, set()).add(image.form)
        if seen.transform_of.setdefault(column, self.which) != self.which:
            raise NeedsImage(
                f"the function hands the images{named} to another transform than "
                + ("on other rows" if seen.checking else "on the rows checked")
            )
        if self.check is None:
            return self._made(column, image.k, self.views[column][image.k])
        from ._behaviour import generator_states, generators_kept, set_generator_states

        with generators_kept():
            drawn = seen.drawn.get(image.k)
            if drawn is None:
                self.check(self.rows[image.k] + 1)
            else:
                set_generator_states(drawn)
            out = run(image.real)
            seen.drawn[image.k] = generator_states()
        first = seen.first.setdefault((column, image.k), out)
        if first is not out and not _same(first, out):
            raise NeedsImage(f"the function hands row {image.k}'s image{named} to a random transform twice")
        return self._made(column, image.k, out)

    def _made(self, column, k: int, out):
        """`out`, what this transform gave for row `k`'s image of `column`, noted as such."""
        self.seen.made[id(out)] = (column, k, self.which, out)
        return out


class Chained:
    """Two transforms a column's images go through in turn (`RowFunction.chain_of`): the
    segmentation guide's `jitter` of each image, then the image processor given them all."""

    def __init__(self, first, then):
        self.first, self.then = first, then

    def __call__(self, image):
        return self.then(self.first(image))


def _form_words(form: tuple[bool, bool, bool] | None) -> str:
    if form is None:
        return "no image"
    tensor, rgb, arrayed = form
    held = "torchvision's uint8 tensor" if tensor else "a NumPy array of a PIL image" if arrayed else "a PIL image"
    return held + (" in RGB" if rgb else " in its own mode")


class _Readers:
    """Stand-ins for the calls that read a row's path (torchvision's `read_image` and
    `decode_image`, also through a stand-in of the `torchvision.io` module, and Pillow's
    `Image.open`, also through one of the `PIL.Image` module): each gives the row's `_Row`
    (with the image itself while checking, `real`)."""

    def __init__(self, real: bool, column: str):
        self.real = real
        self.column = column

    def read_image(self, path, mode=None, apply_exif_orientation=False):
        return self._tensor("read_image", path, mode, apply_exif_orientation)

    def decode_image(self, input, mode=None, apply_exif_orientation=False):
        return self._tensor("decode_image", input, mode, apply_exif_orientation)

    def _tensor(self, name: str, path, mode, apply_exif_orientation) -> _Row:
        from torchvision import io as tio

        mode = tio.ImageReadMode.UNCHANGED if mode is None else mode
        if not isinstance(path, _Path):
            raise NeedsImage(f"the function's {name} reads a {type(path).__name__}, not the table's path")
        if mode not in (tio.ImageReadMode.RGB, tio.ImageReadMode.UNCHANGED) or apply_exif_orientation:
            raise NeedsImage(f"the function's {name} reads in mode {mode} (apply_exif_orientation={apply_exif_orientation})")
        real = getattr(tio, name)(str(path), mode, apply_exif_orientation) if self.real else None
        return _Row(path.k, real, tensor=True, converted=mode == tio.ImageReadMode.RGB, column=self.column)

    def open(self, fp, mode="r", formats=None):
        from PIL import Image

        if not isinstance(fp, (_Path, _Stream)) or mode != "r" or formats is not None:
            raise NeedsImage(f"the function's Image.open reads a {type(fp).__name__}, not the table's path or bytes")
        if isinstance(fp, _Stream):
            return _Row(fp.data.k, Image.open(io.BytesIO(bytes(fp.data))) if self.real else None, column=self.column)
        return _Row(fp.k, Image.open(str(fp)) if self.real else None, column=self.column)


class _TorchvisionIO:
    """`torchvision.io` as the function sees it (`from torchvision import io`): `read_image`
    and `decode_image` are `_Readers`', the rest torchvision's."""

    def __init__(self, readers: _Readers):
        self.read_image, self.decode_image = readers.read_image, readers.decode_image

    def __getattr__(self, name: str):
        from torchvision import io

        return getattr(io, name)


class _PILImage:
    """`PIL.Image` as the function sees it: `open` is `_Readers.open`, the rest Pillow's."""

    def __init__(self, readers: _Readers):
        self._readers = readers

    def open(self, fp, mode="r", formats=None):
        return self._readers.open(fp, mode, formats)

    def __getattr__(self, name: str):
        from PIL import Image

        return getattr(Image, name)


def _stores_globals(code) -> bool:
    """Whether `code` (or a code object inside it) assigns a global name: a function run with
    a copy of its module's globals would lose that."""
    if any(op.opname in ("STORE_GLOBAL", "DELETE_GLOBAL") for op in dis.get_instructions(code)):
        return True
    return any(_stores_globals(c) for c in code.co_consts if isinstance(c, types.CodeType))


class RowFunction:
    """The dataset's function, run on a batch's other columns with the images and the
    transforms it applies (`found`: one object, or one per image column) stood in for; see
    the module docstring. `image_columns`: the table's image column, or its several (a
    ControlNet table's image and conditioning image), each made natively by a loader of its
    own. `reads`: the image column holds what the function reads the images from itself,
    their paths ("paths") or their encoded bytes ("bytes"; `_Readers`)."""

    def __init__(self, dataset, image_columns, found, reads: str | None = None):
        T = FallbackReason.TRANSFORM
        fn = dataset._format_kwargs.get("transform")
        # A function with some arguments bound (`functools.partial(preprocess, transforms=...)`,
        # transformers' `run_semantic_segmentation.py`) runs with those stood in for too.
        inner = fn.func if type(fn) is functools.partial else fn
        name = getattr(inner, "__name__", type(inner).__name__)
        if not isinstance(inner, types.FunctionType):
            raise Unfit(f"{name} (the dataset's transform) is no plain function, which hpuload runs with its images stood in for", T)
        if _stores_globals(inner.__code__):
            raise Unfit(f"{name} (the dataset's transform) assigns global names", T)
        if getattr(dataset, "_format_columns", None) is not None:
            raise Unfit(f"{name} (the dataset's transform) is given only some columns (with_transform(columns=...))", T)
        found = list(found) if isinstance(found, (list, tuple)) else [found]
        columns = [image_columns] if isinstance(image_columns, str) else list(image_columns)
        self.dataset, self.fn, self.founds = dataset, fn, found
        self.image_columns = columns
        #: The first image column (the loader's own; the others are `more`'s).
        self.image_column = columns[0]
        #: The image column holds what the function reads itself: "paths" or "bytes" (None:
        #: an Image column's images).
        self.reads = reads
        self.name = name
        self.order = list(dataset.features)
        others = [k for k in self.order if k not in columns or self.reads]
        self.raw = dataset.with_format(None).select_columns(others) if others else None
        #: Per image column, how the function holds the images it hands a transform
        #: (`_Row.form`), from the check: every batch's rows must be held so.
        self.form: dict | None = None
        #: Per image column, the index in `founds` of the transform its images go through.
        self.transform_of: dict = {}
        #: Per image column, the column whose images an albumentations `Compose` is given as
        #: their masks (from the check).
        self.mask_of: dict = {}
        #: Per image column, `(first, then)` where its images go through two transforms in
        #: turn, the second an image processor (from the check).
        self.chain_of: dict = {}
        self._converts: dict = {}
        from ._hf_steps import stepwise

        #: The function may step each image through several torchvision objects itself
        #: (`_hf_steps`): the check learns how (`steps`).
        self.stepwise = reads is None and len(columns) == 1 and stepwise(found)
        #: The steps it takes (`_hf_steps.StepChain`), from the check; None where it hands
        #: each image to one transform.
        self.steps = None
        self._composed = None
        #: The function reads the images' sizes (from the check): each batch's rows are read
        #: for them (`facts`).
        self.reads_size = False
        #: `datasets` turns each image by its EXIF orientation as it decodes it (`_hf`).
        self.turned = False
        self._cells = None

    @property
    def found(self):
        """The transform the first image column's images go through."""
        return self.transform_for(self.image_column) if self.image_column in self.transform_of else self.founds[0]

    def transform_for(self, column: str):
        """The transform `column`'s images go through (from the check): a `Chained` one where
        they go through two in turn."""
        if column in self.chain_of:
            first, then = self.chain_of[column]
            return Chained(self.founds[first], self.founds[then])
        if self.steps is not None:
            if self._composed is None:
                self._composed = self.steps.compose()
            return self._composed
        return self.founds[self.transform_of[column]]

    @property
    def needs_facts(self) -> bool:
        """Each batch's rows must be read for their images' sizes and plans (`facts`)."""
        return self.reads_size or self.steps is not None

    def facts(self, indices: list[int], plans, own=None) -> dict:
        """Slot -> `_hf_steps.Facts` of each row of a batch: its image's size (read from its
        header, turned as `datasets` turns it) and, where the function steps the image
        itself, what `plans(index, width, height)` (the sample's plan) says of its steps.
        A row whose image cannot be read raises, naming it, but in a slot the dataset's own
        sample replaces (`own`)."""
        from datasets import Image

        from ._hf_steps import Facts, facts_of
        from ._probe import header_facts
        from ._segmentation import _cell_bytes, _size_of

        column = self.image_column
        if self._cells is None:
            self._cells = self.dataset.with_format(None).select_columns([column]).cast_column(column, Image(decode=False))
        cells = self._cells[list(indices)][column]
        out = {}
        for k, (i, cell) in enumerate(zip(indices, cells)):
            size = _size_of(_cell_bytes(cell), header_facts, self.turned)
            if not isinstance(size, tuple):
                if own and k in own:
                    crop = self.steps.crop_size if self.steps is not None else None
                    out[k] = Facts((0, 0), crop, (0, 0), False)
                    continue
                raise ValueError(f"row {i}, column {column!r}: its image's size cannot be read ({size})")
            out[k] = facts_of(plans(i, *size), size, self.steps) if self.steps is not None else Facts(size, None, None, None)
        return out

    @property
    def unconverted(self) -> list[str]:
        """The image columns whose images the check saw the function hand a transform in their
        own mode, not in RGB, where the transform does not convert them to RGB itself
        (`_converts`): then every image of theirs must be RGB (`_hf.hf_source` reads their
        modes)."""
        return [c for c, form in (self.form or {}).items() if not form[1] and not self._converts.get(c)]

    def _learn_conversion(self, rows: list[int]) -> None:
        """Whether each transform, handed a PIL image in its own mode, converts it to RGB
        itself (transformers' `run_mae.py` starts its Compose with a `Lambda` that does): on
        the first of `rows` whose image opens, shrunk to 64x48 and made grey, a palette, RGBA
        (opaque) and CMYK in turn, the transform gives under each seed what it gives for the
        image in RGB."""
        from PIL import Image

        from ._hf import alike_in_each_mode

        self._converts = {}
        for column, form in (self.form or {}).items():
            if form != (False, False, False):
                continue
            rgb = None
            raw = self.dataset.with_format(None).select_columns([column])
            for row in rows:
                try:
                    value = raw[row][column]
                    image = Image.open(value if self.reads == "paths" else io.BytesIO(value)) if self.reads else value
                    rgb = image.convert("RGB").resize((64, 48))
                    break
                except Exception:  # noqa: BLE001 - a damaged row: the loader names it when read
                    continue
            found = self.transform_for(column)
            self._converts[column] = rgb is not None and alike_in_each_mode(
                rgb, found, lambda image, found=found: found(image.convert("RGB")), _same
            )

    def _bound(self, stands: list, readers: _Readers | None, steps=None):
        """The function with `stands` in place of the transforms (and `readers` in place of
        the calls that read a path) in its globals (a copy, made per batch: the module's other
        names as they are now) and its closure."""
        fn = self.fn.func if type(self.fn) is functools.partial else self.fn
        swaps = {id(found): stand for found, stand in zip(self.founds, stands)}
        if readers is not None:
            from PIL import Image
            from torchvision import io as tio

            swaps[id(Image)] = _PILImage(readers)
            swaps[id(tio)] = _TorchvisionIO(readers)
            stand_io = _IOModule()
            swaps[id(io)] = stand_io
            swaps[id(io.BytesIO)] = stand_io.BytesIO
            for call, stand in ((tio.read_image, readers.read_image), (tio.decode_image, readers.decode_image), (Image.open, readers.open)):
                # The call, and the original where hpuload's probe of a Dataset class patched it.
                swaps[id(call)] = stand
                original = getattr(call, "__wrapped__", None)
                if original is not None:
                    swaps[id(original)] = stand
        if steps is not None:
            import random

            from torchvision.transforms import functional as F

            from ._hf_steps import FunctionalModule, RandomModule, bind_crop, bind_hflip

            swaps[id(random)] = RandomModule(steps)
            swaps[id(F.crop)] = bind_crop(steps)
            swaps[id(F.hflip)] = bind_hflip(steps)
            swaps[id(F)] = FunctionalModule(steps)
        names = dict(fn.__globals__)
        for key, value in fn.__globals__.items():
            if id(value) in swaps:
                names[key] = swaps[id(value)]
        closure = fn.__closure__
        if closure is not None:
            closure = tuple(types.CellType(swaps[id(c.cell_contents)]) if _swapped(c, swaps) else c for c in closure)
        bound = types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, closure)
        bound.__kwdefaults__ = fn.__kwdefaults__
        if type(self.fn) is functools.partial:
            args = [swaps.get(id(a), a) for a in self.fn.args]
            return functools.partial(bound, *args, **{k: swaps.get(id(v), v) for k, v in self.fn.keywords.items()})
        return bound

    def samples(self, views, indices: list[int], check=None, own=None, masks=None, facts=None, probe=None) -> list[dict]:
        """Each sample of a batch as `datasets`' `__getitems__` gives it: `views` the batch's
        native image tensors (one list per image column where there are several), `indices`
        the dataset's rows. The keys that held the images (the image columns, when the
        function returns its input) are left out: their values are no images here (a table of
        paths keeps its paths). `check`: see `_Transform`. `own`: slot -> `(index, sample)`
        of the samples the dataset made itself (`own_samples`), which replace the function's.
        `masks`: per mask column (`mask_of`), the batch's native masks. `facts`: slot ->
        `_hf_steps.Facts` (`facts`), where the function needs them. `probe`: while checking,
        what `random.random()` answers the function's steps (`_hf_steps.StepChain.threshold`)."""
        n = len(indices)
        columns = self.image_columns
        loaded = self.used_columns
        if views is not None and len(loaded) == 1:
            views = [views]
        by_column = dict(zip(loaded, views)) if views is not None else {}
        other = self.raw[list(indices)] if self.raw is not None else {}
        readers = None
        if self.reads:
            wrap = _path if self.reads == "paths" else _encoded
            batch = {k: ([wrap(v, i) for i, v in enumerate(other[k])] if k == self.image_column else other[k]) for k in self.order}
            readers = _Readers(check is not None, self.image_column)
        else:
            real = {}
            for column in columns:
                if check is not None:
                    real[column] = self.dataset.with_format(None).select_columns([column])[list(indices)][column]
                else:
                    real[column] = [None] * n
            log: set = set()

            def shape(k, i):
                # The first image column's sizes alone are read for a batch (`facts`).
                if k != self.image_column:
                    return None
                if check is not None:
                    return getattr(real[k][i], "size", None)
                return None if facts is None else facts[i].size

            batch = {
                k: ([_Row(i, real[k][i], column=k, shape=shape(k, i), log=log) for i in range(n)] if k in real else other[k])
                for k in self.order
            }
        seen = _Seen(
            self.form if check is None else None,
            self.transform_of if check is None else None,
            self.chain_of if check is None else None,
        )
        steps = None
        if self.stepwise:
            from ._hf_steps import Steps, StepTransform

            steps = self._last_steps = Steps(check is not None, facts, probe, self.steps)
            stands = [StepTransform(found, j, steps, by_column) for j, found in enumerate(self.founds)]
        else:
            stands = [_Transform(by_column, found, j, seen, check, list(indices), masks) for j, found in enumerate(self.founds)]
        out = self._bound(stands, readers, steps)(batch)
        if steps is not None:
            self._stepped(steps, n, check is not None, facts, seen, probe)
        if check is not None:
            if not readers:
                self.reads_size = self.reads_size or "size" in log
            if any(len(forms) > 1 for forms in seen.forms.values()):
                raise NeedsImage("the function hands its transform images in different forms")
            self.form = {column: next(iter(forms)) for column, forms in seen.forms.items()}
            self.transform_of = dict(seen.transform_of)
            self.mask_of = {c: m for c, m in seen.mask_of.items() if m is not None}
            self.chain_of = {c: chain for c, chain in seen.chain.items() if chain is not None}
        elif seen.mask_of != {c: self.mask_of.get(c) for c in seen.mask_of}:
            raise NeedsImage("the function hands the Compose other masks than on the rows checked")
        elif any((c, k) not in seen.processed for c in self.chain_of for k in range(n)):
            # The first transform's stand-in gave the chain's output: every row must have
            # gone on to the processor, as on the rows checked.
            raise NeedsImage("the function hands its image processor some rows' images and not others, unlike the rows checked")
        if not isinstance(out, Mapping):
            raise TypeError(f"{self.name} (the dataset's transform) returned a {type(out).__name__}, not a dict")
        from ._collate import rows_of

        samples: list[dict[str, Any]] = [{} for _ in range(n)]
        for key, values in out.items():
            if len(values) != n:
                raise ValueError(f"{self.name} (the dataset's transform) returned {len(values)} values of {key!r} for {n} rows")
            if n and isinstance(values[0], _Row):
                continue
            if type(values) is torch.Tensor and check is None:
                # A batch the function stacked: a collate_fn's stack of its rows is it again.
                values = rows_of(values)
            for i in range(n):
                value = values[i]
                samples[i][key] = str(value) if type(value) is _Path else bytes(value) if type(value) is _Encoded else value
        for slot, (_, sample) in (own or {}).items():
            samples[slot] = {k: sample[k] for k in samples[slot] if k in sample} if samples[slot] else sample
        return samples

    def _stepped(self, steps, n: int, checking: bool, facts, seen: _Seen, probe) -> None:
        """After a run of a stepping function: while checking, learns its steps (into
        `learning`) and notes that the column's images were handed over converted; else
        checks that each row took the steps learnt, mirrored where its plan mirrors it."""
        column = self.image_column
        for k in range(n):
            ops = steps.ops.get(k, [])
            if not any(op[0] == "final" for op in ops):
                raise NeedsImage(f"the function does not hand row {k}'s image to a transform that makes a tensor")
            if checking:
                if probe is None:
                    self.learning.learn(ops)
                chain = self.learning or self.steps
                seen.forms.setdefault(column, set()).add((False, True, False))
                seen.transform_of[column] = chain.final
                continue
            self.steps.learn(ops)
            flipped = any(op[0] == "flip" for op in ops)
            if flipped != (self.steps.gate is not None and facts[k].flip):
                raise NeedsImage(f"the function mirrors row {k}'s image where its plan does not, unlike the rows checked")

    def own_samples(self, own: dict[int, list[int]]) -> dict[int, tuple[int, dict]]:
        """For each slot of `own` (slot -> candidate indices, from `_cores.Batch`), the first
        candidate whose sample the dataset itself makes (`dataset[index]`: its images read by
        `datasets`, the function run on them as written), with that sample. A slot none of
        whose candidates can be made raises, naming them."""
        from ._cores import made_by_dataset

        return made_by_dataset(own, lambda _, index: self.dataset[index], f"the image columns {self.image_columns}")

    def check(self, rows: list[int], draws_from) -> None:
        """`Unfit` unless, on each of `rows`, the dataset's own sample equals this function's
        with the stand-ins, the transforms' outputs the real ones on the row's images (the
        image keys left out, but for a table of paths), both under `draws_from(row + 1)`.
        Learns how the function holds the images it hands the transforms (`form`) and which
        transform each image column's images go through (`transform_of`)."""
        from ._albumentations import is_compose
        from ._behaviour import albumentations_kept, generators_kept

        from ._hf_steps import StepChain

        T = FallbackReason.TRANSFORM
        ran, failure, made = 0, None, []
        self.form, self.transform_of, self.mask_of, self.chain_of = None, {}, {}, {}
        self.steps, self._composed, self.reads_size = None, None, False
        self.learning = StepChain(self.founds) if self.stepwise else None
        learnt = None
        composes = [f for f in self.founds if is_compose(f)]
        given = draws_from

        def draws_from(seed: int) -> None:
            # albumentations draws from each Compose's own generators: seeded alike too.
            given(seed)
            for compose in composes:
                compose.set_random_seed(seed)

        with generators_kept(), albumentations_kept(composes):
            for row in rows:
                try:
                    draws_from(row + 1)
                    want = self.dataset[row]
                except Exception as e:  # a damaged row: the loader names and skips it when read
                    failure = failure or f"row {row}: {type(e).__name__}: {e}"
                    continue
                draws_from(row + 1)
                (got,) = stood_in(self.name, f"row {row}", lambda: self.samples(None, [row], check=draws_from))
                if learnt is not None and (self.form, self.transform_of, self.mask_of, self.chain_of) != learnt:
                    raise Unfit(
                        f"{self.name} (the dataset's transform) holds the images of rows {rows} in different forms, "
                        "or hands them to different transforms",
                        T,
                    )
                learnt = self.form, self.transform_of, self.mask_of, self.chain_of
                ran += 1
                made.append(row)
                mine = {k: v for k, v in want.items() if k not in self.image_columns or self.reads}
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
        if ran and not self.form:
            raise Unfit(f"{self.name} (the dataset's transform) hands its transform no row's image", T)
        if self.learning is not None and made:
            self._learn_flip(made, draws_from)
        self._learn_conversion(rows)

    def _learn_flip(self, rows: list[int], draws_from) -> None:
        """The steps learnt, with the flip's probability: on the first of `rows` (those the
        dataset makes), whether its image is mirrored when `random.random()` answers each of a
        bisection's values, under the row's draws; on the others, that the threshold is the
        same (a function whose odds depend on the image falls back)."""
        chain, self.learning = self.learning, None
        if chain.final is None:
            raise Unfit(f"{self.name} (the dataset's transform) hands no row's image to a transform that makes a tensor", FallbackReason.TRANSFORM)
        self.steps = chain
        if chain.gate is not None:
            from ._behaviour import generators_kept

            def flips(value: float, row: int = rows[0]) -> bool:
                with generators_kept():
                    draws_from(row + 1)
                    try:
                        self.samples(None, [row], check=draws_from, probe=value)
                    except NeedsImage as e:
                        raise Unfit(f"{self.name} (the dataset's transform) on row {row}: {e}", FallbackReason.TRANSFORM) from None
                flipped = [op[1] for op in self._last_steps.ops.get(0, []) if op[0] == "flip"]
                for which in flipped:
                    chain._same("flip", which)  # a flip the rows checked did not draw
                return bool(flipped)

            chain.threshold(flips)
            for row in rows[1:]:
                if any(flips(value, row) != want for value, want in chain.edges()):
                    raise Unfit(
                        f"{self.name} (the dataset's transform) mirrors row {row}'s image at other odds than row {rows[0]}'s",
                        FallbackReason.TRANSFORM,
                    )

    @property
    def used_columns(self) -> list[str]:
        """The image columns whose images the function hands a transform, the first column's
        first (the others' loaders are `more`'s)."""
        return [c for c in self.image_columns if c in self.transform_of]


def stood_in(name: str, where: str, run):
    """`run()`, a check's run of the dataset's function `name` on `where` (its rows) with its
    images stood in for; what the stand-ins refuse or do not answer made an `Unfit` naming it."""
    T = FallbackReason.TRANSFORM
    try:
        return run()
    except NeedsImage as e:
        raise Unfit(f"{name} (the dataset's transform) on {where}: {e} (hpuload hands it stand-ins)", T) from None
    except Exception as e:  # noqa: BLE001 - what the stand-ins do not answer
        raise Unfit(f"{name} (the dataset's transform) on {where} raised {type(e).__name__}: {e} with the images stood in for", T) from None


def _swapped(cell, swaps: dict) -> bool:
    try:
        return id(cell.cell_contents) in swaps
    except ValueError:  # an empty cell
        return False


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
