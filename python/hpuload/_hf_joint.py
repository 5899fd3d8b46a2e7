"""A `datasets` table whose `with_transform` function makes its images' tensors itself and hands
them, stacked, to one torchvision transform: diffusers' `train_instruct_pix2pix.py` (and its
SDXL and LoRA copies, and the many forks of them). There each original and edited image is
resized by Pillow to a square (`image.convert("RGB").resize((r, r))`), made a NumPy array,
transposed, concatenated with the batch's others, stacked with the other column's, made a
tensor and `2 * (images / 255) - 1`, and the whole stack goes through `CenterCrop(r)` or
`RandomCrop(r)` and `RandomHorizontalFlip()` at once: one crop and one flip for every image of
the call. torch's loader calls the function once per batch (`datasets`' `__getitems__`), so
each batch is flipped whole, both columns alike.

hpuload makes each image column natively (a loader per column, `_cores`), as the torchvision
`Compose` of the same steps would make it: `Resize((r, r))` with the function's Pillow filter,
the transform's crops and flips, `PILToTensor` or `ToTensor` and, for `2 * x - 1`,
`Normalize(0.5, 0.5)` (the same floats: `(y - 0.5) / 0.5` and `2 * y - 1` round alike). Every
sample of a batch, and each of its images, draws from the batch's key (`draws_per_batch`), so a
batch shares its crop and flip as the function's.

The function still runs on each batch for everything else it makes (the captions' token ids,
the prompts' embeddings), with each image stood in for (`_Held`: `convert("RGB")` and
`resize`, which gives a 1x1 image, so its NumPy arithmetic costs nothing) and the transform by
`_Geometry`, which draws as the transform draws (it runs it on a grid of coordinates the size
of the resized images) and gives zeros of the transform's output shape. The keys that hold the
images' tensors then hold hpuload's.

`JointFunction.check` learns all of this by behaviour: on five rows, each under three seeds,
the dataset's own sample must equal the function's with the stand-ins, but for the keys that
hold image tensors, each of which must equal exactly what the native steps make of one image
column's image, cut and flipped as the transform's grid says it was. Anything else (a
transform other than crops, flips and identity `Lambda`s, called per image rather than once,
images read otherwise than `convert` and `resize`, a tensor made another way) is refused,
named, and the dataset goes to torch's loader."""

from __future__ import annotations

import functools
import types
from typing import Any

import torch

from ._fallback import FallbackReason, Unfit
from ._hf_rows import NeedsImage, _same, _stores_globals, stood_in

#: Pillow's resampling filters hpuload runs, by the number `Image.resize` takes.
_FILTERS = {0: "NEAREST", 1: "LANCZOS", 2: "BILINEAR", 3: "BICUBIC", 4: "BOX", 5: "HAMMING"}

#: Modules whose functions are not the user's helpers (not looked through).
_LIBRARIES = ("torch", "torchvision", "numpy", "PIL", "datasets", "transformers", "hpuload", "timm", "albumentations")

#: Each checked row is checked under this many seeds (a flip of one half is missed by all of
#: them once in 2 ** 15 checks); once where the function's transform draws nothing.
_SEEDS = 3


def _helper(obj) -> bool:
    """A plain function of the user's that a dataset function calls (looked through)."""
    module = getattr(obj, "__module__", None) or ""
    return isinstance(obj, types.FunctionType) and module.split(".")[0] not in _LIBRARIES


def reached(dataset) -> list | None:
    """The transforms the dataset's function reaches only through its helper functions (their
    closures and globals, two levels down), where it reaches none itself: a function that
    makes its images' tensors itself (see the module docstring). None where the function
    reaches a transform itself, or is no plain function."""
    from ._hf import _transform_like, reachable_from

    fn = dataset._format_kwargs.get("transform")
    if type(fn) is functools.partial or not isinstance(fn, types.FunctionType):
        return None
    if any(_transform_like(obj) for obj in reachable_from(fn)):
        return None
    found: list = []
    seen: set = {id(fn)}

    def walk(f, depth: int) -> None:
        for obj in reachable_from(f):
            if _transform_like(obj):
                if all(obj is not g for g in found):
                    found.append(obj)
            elif depth and _helper(obj) and id(obj) not in seen:
                seen.add(id(obj))
                walk(obj, depth - 1)

    walk(fn, 2)
    return found


def _rebound(fn, swaps: dict, memo: dict, depth: int = 2):
    """`fn` with the objects of `swaps` (by id) in place in its globals (a copy) and closure,
    and its helper functions so rebound in turn."""
    if id(fn) in memo:
        return memo[id(fn)]
    memo[id(fn)] = fn  # a helper that calls itself calls the original

    def swapped(value):
        if id(value) in swaps:
            return swaps[id(value)]
        if depth and _helper(value):
            return _rebound(value, swaps, memo, depth - 1)
        return value

    from ._hf import _global_names

    names = dict(fn.__globals__)
    for key in _global_names(fn.__code__):
        if key in names:
            names[key] = swapped(names[key])
    closure = fn.__closure__
    if closure is not None:
        from ._hf import _empty

        closure = tuple(c if _empty(c) else types.CellType(swapped(c.cell_contents)) for c in closure)
    bound = types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, closure)
    bound.__kwdefaults__ = fn.__kwdefaults__
    memo[id(fn)] = bound
    return bound


class _Run:
    """What one run of the function did with its stand-ins: each image's resize (column,
    converted, size, filter) and the transform's calls (the geometry each drew)."""

    def __init__(self):
        self.resizes: list = []
        self.geometry: list = []


class _Held:
    """A row's image of an image column, stood in for: `convert("RGB")` notes the conversion
    and `resize(size)` (Pillow's filters hpuload runs, no box) notes the resize and gives a
    1x1 RGB image, whose arithmetic is the function's own at no cost. Anything else raises
    `NeedsImage`."""

    __slots__ = ("column", "converted", "run")

    def __init__(self, column: str, run: _Run, converted: bool = False):
        self.column, self.run, self.converted = column, run, converted

    def convert(self, mode=None, *args, **kwargs):
        if mode == "RGB" and not args and not kwargs:
            return _Held(self.column, self.run, True)
        raise NeedsImage(f"the function converts the image with convert({mode!r}, ...), not convert('RGB')")

    def resize(self, size, resample=None, box=None, reducing_gap=None):
        from PIL import Image

        resample = 3 if resample is None else int(resample)
        if box is not None or reducing_gap is not None or resample not in _FILTERS:
            raise NeedsImage(f"the function resizes the image with resample={resample}, box={box}, reducing_gap={reducing_gap}")
        try:
            width, height = (int(v) for v in size)
        except (TypeError, ValueError):
            raise NeedsImage(f"the function resizes the image to {size!r}") from None
        if width < 1 or height < 1 or (width, height) != tuple(size):
            raise NeedsImage(f"the function resizes the image to {size!r}")
        self.run.resizes.append((self.column, self.converted, (height, width), resample))
        return Image.new("RGB", (1, 1))

    def __getattr__(self, name: str):
        raise NeedsImage(f"the function reads the image's {name!r} (hpuload answers only convert('RGB') and resize)")


def _steps(found) -> list:
    """The transform's steps, each a crop, a flip or a `Lambda` (else `Unfit`)."""
    steps = list(found.transforms) if type(found).__name__ == "Compose" else [found]
    kinds = ("CenterCrop", "RandomCrop", "RandomHorizontalFlip", "RandomVerticalFlip", "Lambda")
    for step in steps:
        name = type(step).__name__
        module = type(step).__module__
        if not module.startswith("torchvision.transforms") or name not in kinds:
            raise Unfit(
                f"the dataset's function hands its images' tensors to {name}, where hpuload takes crops, flips "
                "and Lambdas that give the tensor back",
                FallbackReason.TRANSFORM,
            )
        if name == "RandomCrop" and (step.padding is not None or step.pad_if_needed):
            raise Unfit("the dataset's function hands its images' tensors to a RandomCrop that pads", FallbackReason.TRANSFORM)
        if name == "Lambda":
            probe = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
            out = step(probe)
            if not isinstance(out, torch.Tensor) or not torch.equal(out, probe):
                raise Unfit("the dataset's function hands its images' tensors to a Lambda that changes them", FallbackReason.TRANSFORM)
    return steps


class _Geometry:
    """The transform the function hands its stacked tensor to, stood in for: it draws as the
    transform draws (running it on a tensor the size of the resized images) and gives zeros of
    the output's shape (the images' tensors are hpuload's). While checking (`grids`), that
    tensor is a grid of coordinates, and what it says the transform did is noted
    (`(top, left, height, width, hflip, vflip)`); in a batch, a tensor of no channels, and the output's size must be the one the check learnt (`size`)."""

    def __init__(self, found, run: _Run, grids: dict | None, size: tuple | None = None):
        self.found, self.run, self.grids, self.size = found, run, grids, size

    def __call__(self, images, *args, **kwargs):
        if args or kwargs or not isinstance(images, torch.Tensor) or images.dim() < 3:
            raise NeedsImage("the function hands its transform other than one tensor of its images")
        sizes = {size for _, _, size, _ in self.run.resizes}
        if len(sizes) != 1:
            raise NeedsImage(f"the function resizes its images to several sizes {sorted(sizes)} before its transform")
        (height, width) = sizes.pop()
        if tuple(images.shape[-2:]) != (1, 1) or images.numel() != 3 * len(self.run.resizes):
            raise NeedsImage("the function hands its transform a tensor that is not its resized images, each [3, h, w]")
        if self.grids is None:
            out = self.found(_zeros(height, width))
            self.run.geometry.append(None)
        else:
            grid = self.grids.get((height, width))
            if grid is None:
                ys, xs = torch.meshgrid(
                    torch.arange(height, dtype=torch.float32), torch.arange(width, dtype=torch.float32), indexing="ij"
                )
                grid = self.grids[(height, width)] = torch.stack([ys, xs])
            out = self.found(grid)
            self.run.geometry.append(_read_grid(out, height, width))
        if not isinstance(out, torch.Tensor) or tuple(out.shape[-2:]) != tuple(self.size or out.shape[-2:]):
            raise NeedsImage("the function's transform gives its tensor another size than on the rows checked")
        return images.new_zeros(()).expand(*images.shape[:-2], *out.shape[-2:])


def _zeros(height: int, width: int) -> torch.Tensor:
    """A tensor of no channels the size of the resized images: the transform draws on it as
    on the images (its crops' draws read only the size), and cutting or flipping it is free."""
    return torch.zeros(0, height, width)


def _read_grid(out, height: int, width: int) -> tuple:
    """`(top, left, h, w, hflip, vflip)` of a crop and flips of the coordinate grid, or
    `NeedsImage` where `out` is not one."""
    if not isinstance(out, torch.Tensor) or out.shape[0] != 2 or out.dim() != 3:
        raise NeedsImage("the function's transform gives other than its tensor cut and flipped")
    h, w = out.shape[1:]
    ys, xs = out[0], out[1]
    hflip = w > 1 and bool(xs[0, 0] > xs[0, -1])
    vflip = h > 1 and bool(ys[0, 0] > ys[-1, 0])
    top = int(ys[-1, 0] if vflip else ys[0, 0])
    left = int(xs[0, -1] if hflip else xs[0, 0])
    want_y = torch.arange(top, top + h, dtype=torch.float32)
    want_x = torch.arange(left, left + w, dtype=torch.float32)
    if vflip:
        want_y = want_y.flip(0)
    if hflip:
        want_x = want_x.flip(0)
    if not (
        0 <= top <= height - h
        and 0 <= left <= width - w
        and torch.equal(ys, want_y[:, None].expand(h, w))
        and torch.equal(xs, want_x[None, :].expand(h, w))
    ):
        raise NeedsImage("the function's transform does more to its tensor than crop and flip it")
    return top, left, h, w, hflip, vflip


#: How a key's tensor is made of the resized image: `PILToTensor`, `ToTensor`, and `ToTensor`
#: then `Normalize(0.5, 0.5)` (`2 * (x / 255) - 1`).
_TAILS = ("uint8", "unit", "signed")


def _cut(image, resize: tuple, geometry: tuple | None):
    """A row's image as the native steps make it before the tensor: `resize` (converted,
    (h, w), filter), then the geometry's crop and flips."""
    from PIL import Image
    from torchvision.transforms import functional as F

    converted, (height, width), resample = resize
    if converted:
        image = image.convert("RGB")
    image = image.resize((width, height), Image.Resampling(resample))
    if geometry is not None:
        top, left, h, w, hflip, vflip = geometry
        image = F.crop(image, top, left, h, w)
        if hflip:
            image = F.hflip(image)
        if vflip:
            image = F.vflip(image)
    return image


def _tensor(image, tail: str) -> torch.Tensor:
    """`tail` of a cut image (torchvision's own functions)."""
    from torchvision.transforms import functional as F

    if tail == "uint8":
        return F.pil_to_tensor(image)
    out = F.to_tensor(image)
    return F.normalize(out, [0.5] * 3, [0.5] * 3) if tail == "signed" else out


class JointFunction:
    """The dataset's function, learnt and run as the module docstring says. Answers what
    `_hf.hf_source` and the loader ask of a `_hf_rows.RowFunction`."""

    def __init__(self, dataset, image_columns, found: list, reads: str | None = None):
        T = FallbackReason.TRANSFORM
        fn = dataset._format_kwargs.get("transform")
        name = getattr(fn, "__name__", type(fn).__name__)
        if reads is not None:
            raise Unfit(f"{name} (the dataset's transform) reads its images' bytes itself and reaches no transform", T)
        if _stores_globals(fn.__code__):
            raise Unfit(f"{name} (the dataset's transform) assigns global names", T)
        if getattr(dataset, "_format_columns", None) is not None:
            raise Unfit(f"{name} (the dataset's transform) is given only some columns (with_transform(columns=...))", T)
        if len(found) > 1:
            raise Unfit(f"{name} (the dataset's transform) reaches {len(found)} torchvision transforms through its helpers", T)
        self.dataset, self.fn, self.founds, self.name = dataset, fn, list(found), name
        self.steps = _steps(found[0]) if found else []
        #: The transform draws (a random crop or flip): checked under several seeds, and, as
        #: the function hands its stacked batch to it once per call, a batch's samples share
        #: the draws (`draws_per_batch`).
        self.per_batch = any(type(step).__name__.startswith("Random") for step in self.steps)
        self.image_columns = [image_columns] if isinstance(image_columns, str) else list(image_columns)
        self.order = list(dataset.features)
        others = [k for k in self.order if k not in self.image_columns]
        self.raw = dataset.with_format(None).select_columns(others) if others else None
        self.turned = False
        #: Learnt by `check`: output key -> (image column, tail); each column's resize
        #: (converted, (h, w), filter); the output's size after the transform.
        self.keys: dict = {}
        self.resize_of: dict = {}
        self.size: tuple | None = None
        self._grids: dict = {}
        #: What `_hf.hf_source` and the loader ask of a row function besides: no masks, no
        #: facts of each row's image.
        self.mask_of: dict = {}
        self.needs_facts = False

    @property
    def used_columns(self) -> list[str]:
        """The image columns whose images make a key's tensor, in the table's order."""
        used = {column for column, _ in self.keys.values()}
        return [c for c in self.image_columns if c in used]

    @property
    def image_column(self) -> str:
        return self.used_columns[0]

    @property
    def unconverted(self) -> list[str]:
        """The columns whose images the function resizes in their own mode: each must be RGB."""
        return [c for c, (converted, _, _) in self.resize_of.items() if not converted]

    def transform_for(self, column: str):
        """The torchvision `Compose` that makes `column`'s images natively."""
        from torchvision import transforms as v1

        converted, (height, width), resample = self.resize_of[column]
        mode = v1.InterpolationMode[_FILTERS[resample]]
        steps: list = [v1.Resize((height, width), interpolation=mode)]
        for step in self.steps:
            name = type(step).__name__
            if name in ("CenterCrop", "RandomCrop"):
                if tuple(self.size) != (height, width):
                    steps.append(v1.CenterCrop(self.size) if name == "CenterCrop" else v1.RandomCrop(self.size))
            elif name == "RandomHorizontalFlip":
                steps.append(v1.RandomHorizontalFlip(step.p))
            elif name == "RandomVerticalFlip":
                steps.append(v1.RandomVerticalFlip(step.p))
        tails = {t for c, t in self.keys.values() if c == column}
        if len(tails) != 1:
            raise Unfit(f"{self.name} (the dataset's transform) makes the images of {column!r} two ways", FallbackReason.TRANSFORM)
        tail = tails.pop()
        steps.append(v1.PILToTensor() if tail == "uint8" else v1.ToTensor())
        if tail == "signed":
            steps.append(v1.Normalize([0.5] * 3, [0.5] * 3))
        return v1.Compose(steps)

    def _run(self, batch: dict, checking: bool = False) -> tuple[dict, _Run]:
        """The function run once on `batch` (the images stood in for), with what it did."""
        run = _Run()
        held = {k: [_Held(k, run) for _ in values] if k in self.image_columns else values for k, values in batch.items()}
        swaps = {id(f): _Geometry(f, run, self._grids, None) if checking else _Geometry(f, run, None, self.size) for f in self.founds}
        out = _rebound(self.fn, swaps, {})(held)
        if self.founds and len(run.geometry) != 1:
            raise NeedsImage(
                f"the function hands its images to its transform {len(run.geometry)} times in a call, where hpuload "
                "takes one call on all of them"
            )
        return out, run

    def _rows(self, indices: list[int]) -> dict:
        n = len(indices)
        other = self.raw[list(indices)] if self.raw is not None else {}
        return {k: ([None] * n if k in self.image_columns else other[k]) for k in self.order}

    def check(self, rows: list[int], draws_from) -> None:
        """`Unfit` unless, on each of `rows` under each of `_SEEDS` seeds, the dataset's own
        sample equals this function's with the stand-ins, each key that holds a [C, H, W]
        tensor exactly what the native steps make of one image column's image (cut and
        flipped as the transform's grid says); learns which (`keys`, `resize_of`, `size`)."""
        from ._behaviour import generators_kept

        T = FallbackReason.TRANSFORM
        self.keys, self.resize_of, self.size, self._matches = {}, {}, None, {}
        ran, failure = 0, None
        with generators_kept():
            for row in rows:
                for s in range(_SEEDS if self.per_batch or not self.founds else 1):
                    seed = row + 1 + 7919 * s
                    try:
                        draws_from(seed)
                        want = self.dataset[row]
                    except Exception as e:  # a damaged row: the loader names and skips it when read
                        failure = failure or f"row {row}: {type(e).__name__}: {e}"
                        break
                    draws_from(seed)
                    out, run = stood_in(self.name, f"row {row}", lambda: self._run(self._rows([row]), checking=True))
                    self._learn(row, want, out, run)
                    ran += 1
            if len(rows) > 1 and ran:
                # Rows in one call, as a batch gives them: the transform is called once for all.
                stood_in(self.name, f"rows {rows[:2]}", lambda: self._run(self._rows(rows[:2]), checking=True))
        if rows and not ran:
            raise Unfit(f"{self.name} (the dataset's transform) could not be checked on any row ({failure})", T)
        if ran and not self._matches:
            raise Unfit(f"{self.name} (the dataset's transform) makes no image tensor hpuload makes natively", T)
        for key, matches in self._matches.items():
            columns = sorted({column for column, _ in matches})
            if len(columns) > 1:
                raise Unfit(
                    f"{self.name} (the dataset's transform) makes {key!r} of an image that columns {columns} hold alike "
                    "on every row checked (hpuload cannot tell which it reads)",
                    T,
                )
            self.keys[key] = min(matches, key=lambda m: _TAILS.index(m[1]))

    def _learn(self, row: int, want: dict, out, run: _Run) -> None:
        T = FallbackReason.TRANSFORM
        if not isinstance(out, dict):
            raise Unfit(f"{self.name} (the dataset's transform) returned a {type(out).__name__}, not a dict", T)
        real = self.dataset.with_format(None)[row]
        resize_of: dict = {}
        for column, converted, size, resample in run.resizes:
            if resize_of.setdefault(column, (converted, size, resample)) != (converted, size, resample):
                raise Unfit(f"{self.name} (the dataset's transform) resizes the images of {column!r} two ways", T)
        if self.resize_of and resize_of != self.resize_of:
            raise Unfit(f"{self.name} (the dataset's transform) resizes row {row}'s images otherwise than row {self._first}'s", T)
        if not self.resize_of:
            self.resize_of, self._first = resize_of, row
        geometry = run.geometry[0] if run.geometry else None
        mine = [k for k in want if k not in self.image_columns]
        got = {k: v[0] for k, v in out.items() if not (len(v) and isinstance(v[0], _Held))}
        if list(got) != mine:
            raise Unfit(f"{self.name} (the dataset's transform) gives row {row} the keys {mine}, and {list(got)} with its images stood in for", T)
        keys: dict = {}
        for key in mine:
            value = want[key]
            held = got[key]
            if isinstance(value, torch.Tensor) and value.dim() == 3 and isinstance(held, torch.Tensor) and self._holds_image(value, held):
                keys[key] = self._image_key(row, key, value, real, geometry)
                if self.size is None:
                    self.size = tuple(value.shape[1:])
                elif self.size != tuple(value.shape[1:]):
                    raise Unfit(f"{self.name} (the dataset's transform) makes image tensors of several sizes", T)
            elif not _same(value, held):
                raise Unfit(
                    f"{self.name} (the dataset's transform) gives row {row} another {key!r} when hpuload runs it with "
                    "the images stood in for (it reads the images otherwise, or draws beside its transform)",
                    T,
                )
        if self._matches:
            keys = {k: m & self._matches.get(k, set()) for k, m in keys.items()}
            if set(keys) != set(self._matches) or not all(keys.values()):
                raise Unfit(f"{self.name} (the dataset's transform) makes row {row}'s image tensors otherwise than row {self._first}'s", T)
        self._matches = keys

    def _holds_image(self, value: torch.Tensor, held: torch.Tensor) -> bool:
        """Whether a key's tensor with the images stood in for is what the stand-ins make of an
        image: the transform's zeros (of the real tensor's shape), or, without a transform, a
        resized 1x1 image's tensor (its channels, 1x1)."""
        if self.founds:
            return held.shape == value.shape and 0 in held.stride()
        return held.dim() == 3 and held.shape[0] == value.shape[0] and tuple(held.shape[1:]) == (1, 1)

    def _image_key(self, row: int, key: str, value: torch.Tensor, real: dict, geometry) -> set:
        """The image columns and tails whose native steps make `value` exactly (several where
        the row's images are alike)."""
        matches = set()
        for column, resize in self.resize_of.items():
            cut = _cut(real[column], resize, geometry)
            for tail in _TAILS:
                if (value.dtype == torch.uint8) == (tail == "uint8") and _same(value, _tensor(cut, tail)):
                    matches.add((column, tail))
        if matches:
            return matches
        raise Unfit(
            f"{self.name} (the dataset's transform) gives row {row} a {key!r} that is none of its images as hpuload "
            "makes them (resized as the function resizes it, cut and flipped as its transform did, then made a tensor "
            "by ToTensor, PILToTensor, or ToTensor and Normalize(0.5, 0.5))",
            FallbackReason.TRANSFORM,
        )

    def own_samples(self, own: dict[int, list[int]]) -> dict[int, tuple[int, dict]]:
        """The dataset's own samples for the slots the columns' loaders replaced unlike each
        other (as `_hf_rows.RowFunction.own_samples`)."""
        from ._cores import made_by_dataset

        return made_by_dataset(own, lambda _, index: self.dataset[index], f"the image columns {self.used_columns}")

    def samples(self, views, indices: list[int], check=None, own=None, masks=None, facts=None) -> list[dict]:
        """Each sample of a batch as `datasets`' `__getitems__` gives it, the keys of the images'
        tensors holding the native ones (`views`: one batch per used column), the image
        columns' own keys left out."""
        from ._collate import rows_of

        n = len(indices)
        columns = self.used_columns
        if len(columns) == 1:
            views = [views]
        by_column = dict(zip(columns, views))
        out, run = self._run(self._rows(indices))
        if not isinstance(out, dict):
            raise TypeError(f"{self.name} (the dataset's transform) returned a {type(out).__name__}, not a dict")
        resize_of = {}
        for column, converted, size, resample in run.resizes:
            resize_of.setdefault(column, (converted, size, resample))
        if resize_of != self.resize_of:
            raise NeedsImage(f"{self.name} (the dataset's transform) resizes this batch's images otherwise than the rows checked")
        samples: list[dict[str, Any]] = [{} for _ in range(n)]
        for key, values in out.items():
            if len(values) != n:
                raise ValueError(f"{self.name} (the dataset's transform) returned {len(values)} values of {key!r} for {n} rows")
            if key in self.keys:
                native = by_column[self.keys[key][0]]
                for i in range(n):
                    samples[i][key] = native[i]
                continue
            if n and isinstance(values[0], _Held):
                continue
            if type(values) is torch.Tensor:
                values = rows_of(values)
            for i in range(n):
                samples[i][key] = values[i]
        for slot, (_, sample) in (own or {}).items():
            samples[slot] = {k: sample[k] for k in samples[slot] if k in sample}
        return samples
