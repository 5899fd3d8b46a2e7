"""A user's own map-style Dataset on the fast path, learnt from the Dataset itself.

Most training code outside the reference scripts has a Dataset class of its own: a CSV or JSON
list of paths and labels, `Image.open(path).convert("RGB")`, then the torchvision transform
held in `self.transform`. hpuload runs that `__getitem__` once per index with two things
swapped in: the image-opening calls (`PIL.Image.open`, `torchvision.io.read_file` /
`decode_image` / `read_image`) return a `LazyImage` that records which file was opened and
holds no pixels, and `self.transform` is a stand-in that records what it was given. The user's
own code so supplies each sample's path and label without decoding anything; hpuload then
reads, decodes and augments those files natively with the translated transform. A reader the
user's module imported by name (`from torchvision.io import decode_image`) is rebound there
to the patched call (`_bind_in_user_code`).

`np.array(image)` and `np.asarray(image)` are answered too (`_NumpyArrays`: the NumPy array of
the image, for an albumentations `Compose`), and so is what the code does with an array after
the transform, or with no transform at all (`ArrayOut`: transposes, casts to float, a division
by 255, tensors of it); a resize to one size and Pillow's grey before the transform are
recorded (`LazyImage.before`). A transform that is None is not stood in for. Whatever the
handle cannot answer without pixels (the code crops, indexes the array,
computes on it otherwise, opens bytes from memory) raises `NeedsPixels` naming the line of
the user's code, and the loader falls back to torch's DataLoader with that reason: never
wrong pixels."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import os
import random
import sys
import threading
import traceback
import types
import warnings
from typing import Any, NamedTuple

import torch

#: Set on the thread that is probing: the patched open calls answer lazily only there.
_probing = threading.local()
_patch_lock = threading.RLock()


class NeedsPixels(Exception):
    """The Dataset's code needs the image's pixels (or something only they tell); the message
    names what and where."""


class LazyImage:
    """What `PIL.Image.open(path)` (or torchvision's `read_image`) gives while a Dataset is
    probed: the file, no pixels. `.convert("RGB")` (what hpuload decodes to), `.convert("L")`,
    `.resize` to one size, `.copy()`, Pillow's `ImageOps.exif_transpose` and a `with` block
    are answered (and an array's transposes, casts and division by 255: `ArrayOut`);
    anything else needs pixels.
    `tensor`: what the code holds is the uint8 `[C, H, W]` tensor torchvision's readers give,
    not a PIL image (`"cv2"`: the uint8 `[H, W, C]` array `cv2.imread` gives, in BGR order
    unless `cv2.cvtColor(..., cv2.COLOR_BGR2RGB)` made it RGB; `"array"`: the NumPy array of
    the PIL image, `np.array(image)` or `np.asarray(image)`, in RGB order); `rgb`: it is in
    RGB whatever the file holds (converted, or read in RGB
    mode), rather than in the file's own mode, which the loader then checks; `turned`: turned
    upright by the EXIF orientation the file carries, as the loader then turns each image
    (True: as Pillow's `exif_transpose` reads it; "torchvision": as torchvision's readers
    do)."""

    __slots__ = ("path", "tensor", "rgb", "turned", "before", "cut", "held", "as_mask")

    def __init__(
        self,
        path: str,
        *,
        tensor: bool | str = False,
        rgb: bool = False,
        turned: bool | str = False,
        before: tuple = (),
    ):
        self.path = path
        self.tensor = tensor
        self.rgb = rgb
        self.turned = turned
        #: What the Dataset's code did to the image before the transform, in order: a resize
        #: to one size (`Resized`), Pillow's conversion to grey (`GREY`) and back to RGB
        #: (`GREY_RGB`), a torchvision transform of its own applied (`Applied`).
        self.before = before
        #: `(top, left, height, width)` that `RandomCrop.get_params` answered for this image
        #: (`_crop_params`), which a `crop` of it must then cut; `("resized", scale, ratio,
        #: window)` where `RandomResizedCrop.get_params` answered the window
        #: (`_resized_crop_params`), for `resized_crop`; None: none asked.
        self.cut = None
        #: What a transform of the Dataset's own made of it (`ChainLink`): "pil", "tensor",
        #: or "unknown" (a step hpuload does not know the output of); None: what `tensor`
        #: says.
        self.held = None
        #: The mask a grey read is (`cv2.imread(path, cv2.IMREAD_GRAYSCALE)`) once the code
        #: computes on its values (`_cv2_mask`): each step on it goes to this one.
        self.as_mask = None

    @property
    def form(self) -> tuple[bool, bool, bool | str]:
        """`(tensor, rgb, turned)`: how the Dataset's code holds its images."""
        return self.tensor, self.rgb, self.turned

    @property
    def __class__(self):
        """What the image is as the code holds it, for `isinstance` (which reads `__class__`
        where the type itself does not match): a PIL image, a tensor or a NumPy array, so that
        code that branches on it (`if isinstance(image, Image.Image): ...`) takes the path it
        takes with the pixels. `type()` is still `LazyImage`."""
        if self.held == "unknown":
            raise NeedsPixels("what the image is, after a transform of the Dataset's own that hpuload does not know")
        if self.tensor is True or self.held == "tensor":
            return torch.Tensor
        if self.tensor:
            import numpy as np

            return np.ndarray
        from PIL import Image

        return Image.Image

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """torch's functions given the opened image (`torch.unique(mask)` of a second file
        read as a tensor): a TypeError naming the handle, raised before torch's own argument
        parsing meets an object that is no tensor (which crashed the process now and then)."""
        raise TypeError(f"{getattr(func, '__name__', func)}() was given a LazyImage, not a Tensor")

    def convert(self, mode=None, *args, **kwargs):
        self._pil_only(".convert")
        if self.tensor:
            raise NeedsPixels("the image read as a tensor has no .convert")
        if mode not in ("RGB", "L") or args or kwargs:
            raise NeedsPixels(f"convert({mode!r}) on the image (hpuload decodes to RGB, or to Pillow's grey)")
        before = self.before
        if mode == "L":
            # Pillow's grey of the image (of an RGB or grey file, which the loader checks
            # unless it was made RGB first): torchvision's `Grayscale()`, which is this call.
            if GREY in before or GREY_RGB in before:
                raise NeedsPixels("convert('L') of an image made grey already")
            return LazyImage(self.path, rgb=self.rgb, turned=self.turned, before=(*before, GREY))
        if GREY in before:
            # Grey made RGB again: three equal channels, `Grayscale(num_output_channels=3)`
            # where the grey was made (a resize in between resizes each channel alike).
            again = tuple(GREY_RGB if step == GREY else step for step in before)
            return LazyImage(self.path, rgb=self.rgb, turned=self.turned, before=again)
        # Pillow's conversion keeps the image's metadata, its EXIF orientation included. Of
        # an image resized in its own mode it is the conversion of the resize, which is the
        # resize of the conversion for RGB files alone: the loader checks them then.
        return LazyImage(self.path, rgb=self.rgb or not before, turned=self.turned, before=before)

    def resize(self, size, resample=None, box=None, reducing_gap=None):
        """Pillow's `Image.resize` of the opened image to one `(width, height)` for every
        image: recorded, to run first, as torchvision's `Resize((height, width))` with that
        filter (which is this call on a PIL image) would."""
        self._pil_only(".resize")
        width, height = _fixed_size(size)
        if not self.tensor and box is None and self._known_dims() == (width, height):
            # Pillow returns a copy of an image resized to its own size (diffusers' SDXL textual
            # inversion resizes its crop to the size it cut): the same pixels, filter or not.
            return self
        if self.tensor or box is not None or reducing_gap is not None or _resizes(self.before):
            raise NeedsPixels("the image's .resize with a box, a reducing gap, of an array or resized twice")
        if _applies(self.before):
            raise NeedsPixels("the image's .resize to another size after a transform of the Dataset's own")
        # Pillow's default filter for the modes hpuload reads (not "1" or "P").
        filter = 3 if resample is None else int(resample)  # Image.Resampling.BICUBIC
        resized = Resized("pil", width, height, filter)
        return LazyImage(self.path, rgb=self.rgb, turned=self.turned, before=(*self.before, resized))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def close(self) -> None:
        pass

    def _pil_only(self, what: str) -> None:
        """Needs pixels where a transform of the Dataset's own made the image a tensor or
        something hpuload does not know (`held`)."""
        if self.held in ("tensor", "unknown"):
            raise NeedsPixels(f"{what} of what a transform of the Dataset's own made of the image ({self.held})")

    @property
    def mode(self) -> str:
        """Pillow's mode of the image: "RGB" once converted to it, "L" once made grey, else
        the file's, from its header (`mode_of`; a file that cannot be read answers "RGB":
        the loader names it when it reads it). A file in RGB is then held as converted, so
        that `if image.mode != "RGB": image = image.convert("RGB")` (diffusers' DreamBooth
        script) holds every image alike, in RGB."""
        self._pil_only(".mode")
        if self.tensor:
            raise NeedsPixels("the image's .mode (it was read as an array or a tensor)")
        if self.before and self.before[-1] == GREY:
            return "L"
        if self.rgb or (self.before and self.before[-1] == GREY_RGB):
            return "RGB"
        if _resizes(self.before):
            raise NeedsPixels("the resized image's .mode")
        mode = mode_of(self.path) or "RGB"
        if mode == "RGB":
            self.rgb = True
        return mode

    def __getattr__(self, name: str):
        if name not in LazyImage.__slots__ and self._cv2_mask() is not None:
            # A mask the functionals moved and made a tensor (`mask.squeeze(0).long()`).
            return getattr(self._cv2_mask(), name)
        raise NeedsPixels(f"the image's .{name}")

    # The array an opened image is (what cv2.imread read, a NumPy array of a PIL image), as
    # code without a transform changes it itself (`ArrayOut`).
    def transpose(self, *axes):
        if not self.tensor:
            return self._pil_transpose(*axes)
        return ArrayOut.of(self).transpose(*axes)

    def _pil_transpose(self, method=None, *rest):
        """Pillow's `Image.transpose` of the opened image: its flips (`FLIP_LEFT_RIGHT`,
        `FLIP_TOP_BOTTOM`; `ImageOps.mirror` and `ImageOps.flip` make them) recorded as
        torchvision's flip, which is this call on a PIL image."""
        self._pil_only(".transpose")
        if rest or method not in (0, 1):
            raise NeedsPixels(f"the image's .transpose({method!r}) (hpuload follows Pillow's flips)")
        from torchvision import transforms as T

        horizontal = method == 0
        flip = T.RandomHorizontalFlip(p=1.0) if horizontal else T.RandomVerticalFlip(p=1.0)
        call = f"Image.transpose({'FLIP_LEFT_RIGHT' if horizontal else 'FLIP_TOP_BOTTOM'})"
        out = LazyImage(self.path, rgb=self.rgb, turned=self.turned, before=(*self.before, Applied(transform=flip, call=call)))
        out.held = "pil"
        return out

    def _cv2_mask(self) -> "MaskArray | None":
        """The mask this is, where it is OpenCV's grey read of a file (a mask's `[H, W]`
        array: its bytes as stored, for a grey PNG), or a mask file torchvision's functionals
        moved with its image and made a tensor (`_functional_mask`: `TF.to_tensor(mask)`, which
        the code then computes on), made once; None for any other image."""
        if self.held == "tensor" and self.tensor is False:
            if self.as_mask is None:
                self.as_mask = _functional_mask(self)
            return self.as_mask
        if self.tensor != "cv2" or self.before != (READ_GREY,) or self.turned:
            return None
        if self.as_mask is None:
            import numpy as np

            self.as_mask = MaskArray(self, np.arange(256, dtype=np.uint8))
        return self.as_mask

    def _array_or_mask(self):
        mask = self._cv2_mask()
        return mask if mask is not None else ArrayOut.of(self)

    def astype(self, *args, **kwargs):
        return self._array_or_mask().astype(*args, **kwargs)

    def copy(self, *args, **kwargs):
        self._pil_only(".copy()")
        if self.tensor is False and not args and not kwargs:
            return self  # Pillow's `Image.copy()`: the same pixels, mode and metadata
        return self._array_or_mask().copy(*args, **kwargs)

    def __truediv__(self, other):
        return self._array_or_mask() / other

    # A grey read's values computed on (a mask's: `mask[mask == 255] = 1`, `mask / 255.0`,
    # `mask > 0`): `MaskArray`'s steps.
    def _mask_op(self, name: str, *args):
        mask = self._cv2_mask()
        if mask is None:
            colour = _colour_of(args[0]) if name == "__eq__" and self.tensor in ("array", "cv2") else None
            if colour is not None:
                # An RGB array compared with one colour (`(mask == [r, g, b]).all(-1)`).
                return ColourTest(self, colour)
            if name in ("__eq__", "__ne__"):
                return NotImplemented
            raise NeedsPixels(f"the image's values computed on ({name.strip('_')})")
        return getattr(mask, name)(*args)

    __hash__ = object.__hash__

    def __eq__(self, other):
        return self._mask_op("__eq__", other)

    def __ne__(self, other):
        return self._mask_op("__ne__", other)

    def __lt__(self, other):
        return self._mask_op("__lt__", other)

    def __le__(self, other):
        return self._mask_op("__le__", other)

    def __gt__(self, other):
        return self._mask_op("__gt__", other)

    def __ge__(self, other):
        return self._mask_op("__ge__", other)

    def __mul__(self, other):
        return self._mask_op("__mul__", other)

    def __rmul__(self, other):
        return self._mask_op("__rmul__", other)

    def __add__(self, other):
        return self._mask_op("__add__", other)

    def __sub__(self, other):
        return self._mask_op("__sub__", other)

    def __floordiv__(self, other):
        return self._mask_op("__floordiv__", other)

    def __rsub__(self, other):
        return self._mask_op("__rsub__", other)

    def __radd__(self, other):
        return self._mask_op("__radd__", other)

    def __mod__(self, other):
        return self._mask_op("__mod__", other)

    def __pow__(self, other):
        return self._mask_op("__pow__", other)

    def __and__(self, other):
        return self._mask_op("__and__", other)

    def __or__(self, other):
        return self._mask_op("__or__", other)

    def __invert__(self):
        return self._mask_op("__invert__")

    def __neg__(self):
        return self._mask_op("__neg__")

    def __iadd__(self, other):
        return self._mask_op("__iadd__", other)

    def __isub__(self, other):
        return self._mask_op("__isub__", other)

    def __ifloordiv__(self, other):
        return self._mask_op("__ifloordiv__", other)

    def __setitem__(self, key, value):
        self._mask_op("__setitem__", key, value)

    def __itruediv__(self, other):
        return self._mask_op("__itruediv__", other)

    def __imul__(self, other):
        return self._mask_op("__imul__", other)

    @property
    def shape(self) -> tuple[int, int, int]:
        """The `[H, W, C]` shape of the image's RGB array (the NumPy array of a PIL image in
        RGB, what cv2.imread read), from the file's header and what the code did to it since
        (a resize, the centre square): the same for the pixels."""
        if self.tensor not in ("array", "cv2") or self.turned:
            raise NeedsPixels("the shape of the image (hpuload answers it for the array of an RGB image as stored)")
        if self.tensor == "array" and not self.rgb and mode_of(self.path) not in (None, "RGB"):
            raise NeedsPixels(f"the shape of the array of an image that is not RGB ({self.path} in mode {mode_of(self.path)})")
        if any(isinstance(step, str) and step != CENTRE_SQUARE for step in self.before):
            raise NeedsPixels("the shape of the image's array made grey")
        width, height = self._dims("the shape")
        return height, width, 3

    @property
    def ndim(self) -> int:
        """3: the image's RGB array has its `[H, W, C]` axes (`shape`'s conditions)."""
        return len(self.shape)

    def _known_dims(self) -> tuple[int, int] | None:
        """`_dims`, or None where hpuload cannot tell them without pixels."""
        try:
            return self._dims("the size")
        except NeedsPixels:
            return None

    def _dims(self, what: str, steps: tuple | None = None) -> tuple[int, int]:
        """`(width, height)` of the image as the code holds it: the file's header's, turned
        upright where the code turned it (Pillow's `exif_transpose` comes before any resize),
        then each step since (a resize to one size, the centre square, a transform of the
        Dataset's own whose size hpuload knows; grey keeps them). With `steps`, after those
        steps alone (`()`: the file's image as decoded and turned)."""
        size = size_of(self.path)
        if size is None:
            raise NeedsPixels(f"{what} of an image whose header hpuload cannot read ({self.path})")
        width, height = size
        if self.turned:
            turns = _pillows_orientation(self.path)
            if turns is None:
                raise NeedsPixels(f"{what} of the image turned upright (hpuload reads a JPEG's orientation for it)")
            if turns >= 5:
                width, height = height, width
        for step in self.before if steps is None else steps:
            if isinstance(step, Resized):
                width, height = step.width, step.height
            elif step == CENTRE_SQUARE:
                width = height = min(width, height)
            elif isinstance(step, Applied):
                after = step.size_after(width, height)
                if after is None:
                    raise NeedsPixels(f"{what} of the image after the Dataset's {step.name()}")
                width, height = after
        return width, height

    @property
    def size(self) -> tuple[int, int]:
        """Pillow's `(width, height)` of the opened image (`example["original_size"] =
        (image.height, image.width)`, as SDXL scripts note it): the file's as stored, from its
        header, turned as `exif_transpose` turned it, then what the code did to it since; the
        same as the pixels'. Each index is probed, so a value the code computes from it is its
        own for each sample."""
        self._pil_only(".size")
        if self.tensor:
            raise NeedsPixels("the image's .size (it was read as an array or a tensor)")
        return self._dims("the .size")

    @property
    def width(self) -> int:
        return self.size[0]

    @property
    def height(self) -> int:
        return self.size[1]

    def __getitem__(self, key):
        """`img[top:bottom, left:right]` (and `[..., :]`) of the image's array: the centre
        square of its shorter side at floor offsets (`CENTRE_SQUARE`) or the whole array;
        any other index needs pixels (a grey read's: `MaskArray`'s)."""
        if self._cv2_mask() is not None:
            return self._cv2_mask()[key]
        height, width, _ = self.shape
        key = key if isinstance(key, tuple) else (key,)
        slices = list(key) + [slice(None)] * (3 - len(key))
        if len(slices) != 3 or not all(isinstance(k, slice) for k in slices) or slices[2] != slice(None):
            raise NeedsPixels(f"the image's array indexed by {key!r} (hpuload follows a crop of rows and columns)")
        (top, bottom, down), (left, right, across) = slices[0].indices(height), slices[1].indices(width)
        if down != 1 or across != 1:
            raise NeedsPixels("the image's array sliced with a step")
        side = min(height, width)
        square = (top, bottom, left, right) == (
            (height - side) // 2,
            (height - side) // 2 + side,
            (width - side) // 2,
            (width - side) // 2 + side,
        )
        if square and CENTRE_SQUARE not in self.before and not _resizes(self.before) and not _applies(self.before):
            return LazyImage(
                self.path, tensor=self.tensor, rgb=self.rgb, turned=self.turned, before=(*self.before, CENTRE_SQUARE)
            )
        if (top, bottom, left, right) == (0, height, 0, width):
            return self
        raise NeedsPixels(
            f"a crop [{top}:{bottom}, {left}:{right}] of the image's {height}x{width} array (hpuload follows the "
            "centre square of its shorter side, cut before any resize)"
        )


class Resized(NamedTuple):
    """A resize of the image to one size in the Dataset's code, before its transform:
    Pillow's `Image.resize` (`by="pil"`, `filter` one of Pillow's `Resampling` values) or
    OpenCV's `cv2.resize` (`by="cv2"`, `filter` an OpenCV interpolation flag)."""

    by: str
    width: int
    height: int
    filter: int


#: Pillow's conversion of the image to grey (`convert("L")`), and of that back to RGB, in
#: `LazyImage.before`.
GREY = "grey"
GREY_RGB = "grey_rgb"
#: A grey read, first in `LazyImage.before`: OpenCV's `cv2.imread(path, cv2.IMREAD_GRAYSCALE)`
#: (a `[H, W]` array) or torchvision's reader in `ImageReadMode.GRAY` (a `[1, H, W]` tensor),
#: each a JPEG's luma as libjpeg decodes it to grey (a grey PNG as stored); and OpenCV's made
#: three equal channels (`cv2.cvtColor(..., cv2.COLOR_GRAY2RGB)`).
READ_GREY = "read_grey"
READ_GREY_RGB = "read_grey_rgb"
#: The centre square of the shorter side that the Dataset's code cuts of the image's array
#: (`img[(h - m) // 2:(h + m) // 2, (w - m) // 2:(w + m) // 2]`, `LazyImage.__getitem__`),
#: in `LazyImage.before`.
CENTRE_SQUARE = "centre_square"


class ColourTable:
    """The colours a Dataset's code compares its colour masks with
    (`mask[(rgb == colour).all(-1)] = i`), in the order it first compares them: one table for
    a pass of its code over the dataset (`_colour_table`), shared by every mask of the pass, so
    that each colour has one index (its place here) in every mask's `MaskArray.values`, and
    every colour the code never compares with the index `OTHER_COLOUR`. A colour is added as
    the code compares with it; an index not yet given a colour holds what `OTHER_COLOUR` holds
    in every table of values made before (element-wise steps keep them equal), which is right
    for the colour it is given later: no comparison made before held for it."""

    __slots__ = ("colours",)

    def __init__(self):
        #: `0xRRGGBB` of each colour, in its index's place.
        self.colours: list[int] = []

    def index(self, colour: int) -> int:
        if colour not in self.colours:
            if len(self.colours) >= OTHER_COLOUR:
                raise NeedsPixels(f"a colour mask compared with more than {OTHER_COLOUR} colours")
            self.colours.append(colour)
        return self.colours.index(colour)

    def __eq__(self, other):
        return type(other) is ColourTable and other.colours == self.colours

    def __hash__(self):
        return hash(ColourTable)  # its colours grow while the code runs

    def __repr__(self):
        return f"ColourTable({', '.join(f'#{c:06x}' for c in self.colours)})"


#: The index of every colour a `ColourTable` does not hold, in a colour mask's values.
OTHER_COLOUR = 255


class ColourRead(NamedTuple):
    """First in a colour mask's `LazyImage.before`: the file read as RGB colours (`converted`:
    Pillow's `.convert("RGB")` of any mode, or OpenCV's colour read, `reader` "cv2"; else an
    RGB file as stored), each pixel then its colour's index in `table` (`OTHER_COLOUR` for any
    other), which is what the mask's `MaskArray.values` map."""

    table: ColourTable
    converted: bool
    reader: str = "pil"


def grey_read(before: tuple) -> str | None:
    """`READ_GREY` or `READ_GREY_RGB` when the image was read grey, else None."""
    return next((step for step in before if step in (READ_GREY, READ_GREY_RGB)), None)


def _resizes(before: tuple) -> bool:
    return any(isinstance(step, Resized) for step in before)


def _applies(before: tuple) -> bool:
    return any(isinstance(step, Applied) for step in before)


#: torchvision's steps (v1 and v2, by class name) that give the flip of what they are given
#: flipped, pixel for pixel: conversions, `Normalize`, flips, the grey and colour steps that
#: change each pixel by the image's values alone (`ColorJitter`'s contrast blends with the
#: image's mean, which a flip keeps). A flip the Dataset's code draws anew on each call, with
#: only these after it, is the flip of the sample made without it (`split_flips`).
_FLIP_COMMUTING = frozenset(
    {
        "ToTensor",
        "PILToTensor",
        "ToImage",
        "ToImageTensor",
        "ToPILImage",
        "ToDtype",
        "ConvertImageDtype",
        "Normalize",
        "RandomHorizontalFlip",
        "RandomVerticalFlip",
        "Grayscale",
        "RandomGrayscale",
        "ColorJitter",
    }
)


def _flip_of(step) -> str | None:
    """"h" or "v" where `step` is a flip the Dataset's code made itself (a functional call or
    Pillow's `transpose`), else None."""
    if not isinstance(step, Applied) or step.call is None or step.drawn:
        return None
    name = type(step.transform).__name__
    if name not in ("RandomHorizontalFlip", "RandomVerticalFlip") or getattr(step.transform, "p", None) != 1.0:
        return None
    return "h" if name == "RandomHorizontalFlip" else "v"


def _commutes_with_flips(step, dataset=None) -> bool:
    """Whether a step in `LazyImage.before` (or a transform) gives the flip of a flipped image."""
    if step in (GREY, GREY_RGB):
        return True
    if isinstance(step, Applied):
        if step.crop is not None or step.drawn:
            return False
        if step.call is not None:
            return _call_commutes_with_flips(step)
        return transform_commutes_with_flips(step.transform if dataset is None else step.step(dataset))
    return False


@functools.lru_cache(maxsize=256)
def _call_commutes_with_flips(step: "Applied") -> bool:
    """`_commutes_with_flips` of a functional call (the same call, the same transform)."""
    return transform_commutes_with_flips(step.transform)


def transform_commutes_with_flips(transform) -> bool:
    """Whether every step of a torchvision transform (None: no transform) gives the flip of
    a flipped image (`_FLIP_COMMUTING`)."""
    if transform is None:
        return True
    if not is_torchvision_transform(transform):
        return False
    from ._transforms import steps

    return all(is_torchvision_transform(t) and type(t).__name__ in _FLIP_COMMUTING for t in steps(transform))


def split_flips(before: tuple, transform_commutes: bool, dataset=None) -> tuple[tuple, tuple[bool, bool]] | None:
    """`before` without the flips the Dataset's code made, and whether what they make is the
    image flipped horizontally and vertically, where each flip is followed only by steps that
    give the flip of a flipped image (`_commutes_with_flips`; a flip before the transform,
    only where the transform's steps do too: `transform_commutes`): the sample is then the
    flip of the one made without them, bit for bit. None where a flip is followed by another
    step (a resize, a crop: `_flip_blocked_by`)."""
    if _flip_blocked_by(before, transform_commutes, dataset) is not None:
        return None
    flips = [_flip_of(step) for step in before]
    kept = tuple(step for step, flip in zip(before, flips) if flip is None)
    return kept, (flips.count("h") % 2 == 1, flips.count("v") % 2 == 1)


def _flip_blocked_by(before: tuple, transform_commutes: bool, dataset=None) -> str | None:
    """What comes after a flip the Dataset's code made in `before` that is not the flip of a
    flipped image (`split_flips`), named for a refusal; None where nothing does."""
    for k, step in enumerate(before):
        if _flip_of(step) is None:
            continue
        for later in before[k + 1 :]:
            if not _commutes_with_flips(later, dataset):
                return later.name() if isinstance(later, Applied) else f"a {type(later).__name__}"
        if not step.after and not transform_commutes:
            return "its transform"
    return None


#: Why a drawn flip is refused, after what comes after it.
_FLIPS_FOLLOWED = (
    "(hpuload follows a flip drawn anew on each call with only conversions, Normalize, flips and colour steps after it)"
)


@dataclasses.dataclass(frozen=True)
class Applied:
    """A torchvision transform the Dataset's code applied to the image itself, in
    `LazyImage.before`: one of the Dataset's attributes that hold one (`attribute`; `ChainLink`
    stood in for it: diffusers' SDXL textual inversion holds `self.crop` and
    `self.flip_transform`), or a random crop of `crop` `(height, width)` cut where
    `RandomCrop.get_params` drew it (`_crop_params`, then `functional.crop`), or a call of
    torchvision's functional API on the image (`call`: `TF.resize(image, 256)`), or on what the
    Dataset's transform gave (`after`: `TF.normalize(self.transform(image), ...)`). The loader
    runs them in order, each as torchvision runs it, after the steps before them (those
    `after`, after the transform). Equal by what it names: `transform` is the object the
    attribute held when probed (for its output size), or the transform that is the call."""

    attribute: str | None = None
    crop: tuple[int, int] | None = None
    transform: Any = dataclasses.field(default=None, compare=False, repr=False)
    #: A call of torchvision's functional API (`_functional_step`): `transform` is the
    #: transform that is that call, and this the call with its arguments.
    call: str | None = None
    #: Applied to what the Dataset's `transform` gave (the functional call was given its
    #: output), not to the image before it.
    after: bool = False
    #: Where `RandomResizedCrop.get_params` drew it (`_functional_resized_crop`).
    drawn: bool = False

    @property
    def fixed(self) -> bool:
        """Whether it is the same step for any dataset: a functional call of given arguments
        (not a Dataset's attribute, nor a crop where `get_params` drew it)."""
        return self.call is not None and not self.drawn

    def name(self) -> str:
        if self.attribute is not None:
            return f"`{self.attribute}` ({type(self.transform).__name__})"
        if self.call is not None:
            return f"`{self.call}`"
        return f"crop of {self.crop[0]}x{self.crop[1]} where RandomCrop.get_params drew it"

    def size_after(self, width: int, height: int) -> tuple[int, int] | None:
        """`(width, height)` of what it gives for an image of that size (None: unknown)."""
        if self.crop is not None:
            return self.crop[1], self.crop[0]
        return _size_after(self.transform, width, height)

    def step(self, dataset):
        """The torchvision transform it runs now: the attribute's (as the Dataset holds it
        now), or the random crop."""
        if self.attribute is not None:
            return getattr(dataset, self.attribute)
        if self.call is not None:
            return self.transform
        from torchvision import transforms as T

        return T.RandomCrop(self.crop)


#: torchvision transforms (v1 and v2, by class name) whose output has their input's size.
_SAME_SIZE = frozenset(
    {
        "RandomHorizontalFlip",
        "RandomVerticalFlip",
        "ColorJitter",
        "Grayscale",
        "RandomGrayscale",
        "GaussianBlur",
        "RandomAutocontrast",
        "RandomEqualize",
        "RandomPosterize",
        "RandomSolarize",
        "RandomAdjustSharpness",
        "RandomInvert",
        "ToTensor",
        "PILToTensor",
        "ToImage",
        "ToPILImage",
        "ToDtype",
        "ConvertImageDtype",
        "Normalize",
    }
)


#: torchvision's steps (v1 and v2, by class name) that make a PIL image a tensor, and back.
_TO_TENSOR = frozenset({"ToTensor", "PILToTensor", "ToImage", "ToImageTensor"})


def _array_as_pil(image: LazyImage) -> LazyImage:
    """The PIL image a NumPy array of the image was made of (`np.array(image)`, its uint8
    `[H, W, C]`), which torchvision's `ToTensor` makes the same tensor of (its array's
    transposed bytes over 255); anything else as it is."""
    if image.tensor != "array":
        return image
    return LazyImage(image.path, rgb=image.rgb, turned=image.turned, before=image.before)


def _starts_with_to_tensor(transform) -> bool:
    """Whether a torchvision transform's first step is `ToTensor` (v1's, or v2's), which takes
    a NumPy array of an image as it takes the image."""
    from ._transforms import steps

    first = next(iter(steps(transform)), None)
    return first is not None and type(first).__name__ == "ToTensor" and type(first).__module__.startswith("torchvision.transforms")


def _kind_after(transform, kind: str) -> str:
    """What a torchvision transform makes of a "pil" image or a "tensor": "pil", "tensor", or
    "unknown" (a step not torchvision's own, which may give anything)."""
    from ._transforms import steps

    for t in steps(transform):
        name = type(t).__name__
        if not type(t).__module__.startswith("torchvision.transforms"):
            return "unknown"
        if name in _TO_TENSOR:
            kind = "tensor"
        elif name == "ToPILImage":
            kind = "pil"
    return kind


def _size_after(transform, width: int, height: int) -> tuple[int, int] | None:
    """`(width, height)` of what a torchvision transform gives a PIL image of that size, where
    its own parameters tell it alone (a crop's size, a flip's, a Compose of such); None
    otherwise."""
    from ._transforms import _is

    if _is(transform, "Compose"):
        for t in transform.transforms:
            size = _size_after(t, width, height)
            if size is None:
                return None
            width, height = size
        return width, height
    name = type(transform).__name__
    if not type(transform).__module__.startswith("torchvision.transforms"):
        return None
    if name in _SAME_SIZE:
        return width, height
    if name in ("RandomCrop", "CenterCrop", "RandomResizedCrop"):
        size = transform.size
        size = (size, size) if isinstance(size, int) else tuple(size)
        if len(size) == 1:
            size = (size[0], size[0])
        return int(size[1]), int(size[0])
    if name == "Resize":
        size = [transform.size] if isinstance(transform.size, int) else transform.size
        if isinstance(size, (list, tuple)) and len(size) == 2:
            return int(size[1]), int(size[0])
        if isinstance(size, (list, tuple)) and len(size) == 1:
            # The shorter side to that size: torchvision's own rule (and `max_size`).
            from torchvision.transforms.functional import _compute_resized_output_size

            height, width = _compute_resized_output_size((height, width), list(size), transform.max_size)
            return width, height
    if name == "Pad":
        padding = transform.padding
        padding = [padding] if isinstance(padding, int) else list(padding)
        left, top, right, bottom = (padding * 4)[:4] if len(padding) == 1 else (padding * 2)[:4] if len(padding) == 2 else padding
        return width + left + right, height + top + bottom
    return None


def _fixed_size(size) -> tuple[int, int]:
    """`(width, height)` of a resize's size argument: two positive whole numbers."""
    try:
        width, height = size
    except (TypeError, ValueError):
        raise NeedsPixels(f"a resize to {size!r} (hpuload reads a (width, height) pair)") from None
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (width, height)):
        raise NeedsPixels(f"a resize to {size!r} (hpuload reads two positive whole numbers)")
    return width, height


class _FileBytes:
    """What `torchvision.io.read_file(path)` gives while probing: the file, not its bytes."""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path

    def __getattr__(self, name: str):
        raise NeedsPixels(f"the file's bytes (.{name} of read_file's result)")


class Recorded:
    """What the transform stand-in returns: the image it was given. `torchvision`: the stand-in
    was a torchvision transform's (whose output may be a PIL image the code makes an array
    of), not an albumentations `Compose`'s ending in `ToTensorV2`."""

    __slots__ = ("image", "torchvision", "kind")

    def __init__(self, image: LazyImage, torchvision: bool = False, kind: str | None = None):
        self.image = image
        self.torchvision = torchvision
        #: What the transform gives: "pil", "tensor" (`_kind_after`), "unknown" or None.
        self.kind = kind

    @property
    def __class__(self):
        """What the transform gives, for `isinstance` (a PIL image, a tensor; an `ArrayOut` a
        NumPy array or a tensor), so that code that branches on it takes the path it takes with
        the pixels; where hpuload cannot tell, the handle's own type."""
        kind = self.output.kind if issubclass(type(self), ArrayOut) else self.kind
        if kind == "tensor":
            return torch.Tensor
        if kind == "numpy":
            import numpy as np

            return np.ndarray
        if kind == "pil":
            from PIL import Image

            return Image.Image
        return type(self)

    def __getattr__(self, name: str):
        raise NeedsPixels(f".{name} of the transformed image")


class TransformStandIn:
    """Takes the place of `dataset.transform` while probing (`transform`: the one it stands
    for, for what it gives)."""

    def __init__(self, transform=None):
        self.transform = transform
        #: `_kind_after` of the transform, by the kind it was given: read once a probe (the
        #: transform cannot change while it is stood in for).
        self._kinds: dict[str, str] = {}

    @property
    def __class__(self):
        """The class of the transform it stands for, for `isinstance` (code that asks
        `isinstance(self.transform, T.Compose)` takes the path it takes with the transform)."""
        return type(self) if self.transform is None else type(self.transform)

    def __call__(self, image, *rest):
        if rest:
            return self._with_mask(image, *rest)
        if isinstance(image, dict) and len(image) == 2 and any(type(v) is MaskArray for v in image.values()):
            # `transform({"image": image, "mask": mask})`: v2 gives a dict of the same keys.
            (k1, v1), (k2, v2) = image.items()
            if type(v1) is MaskArray:
                v2, v1 = self._with_mask(v2, v1)
            else:
                v1, v2 = self._with_mask(v1, v2)
            return {k1: v1, k2: v2}
        if not isinstance(image, LazyImage):
            raise NeedsPixels(f"the transform was given a {type(image).__name__}, not the opened image")
        if image.tensor == "array" and self.transform is not None and _starts_with_to_tensor(self.transform):
            # `ToTensor` of the NumPy array of a PIL image gives what it gives of the image.
            image = _array_as_pil(image)
        if image.tensor == "cv2" or image.tensor == "array":
            raise NeedsPixels("a torchvision transform was given a NumPy array of the image")
        given = image.held or ("tensor" if image.tensor else "pil")
        if self.transform is not None and given not in self._kinds:
            self._kinds[given] = _kind_after(self.transform, given)
        return Recorded(image, torchvision=True, kind=self._kinds.get(given))

    def _with_mask(self, image, mask, *rest):
        """`transform(image, mask)` of a torchvision v2 transform, the mask a
        `tv_tensors.Mask` of a mask file's values (`MaskArray.tv`): the image recorded, the
        mask moved as v2 moves masks (`_segmentation.v2_mask_steps`), its values as they were;
        a `tv_tensors.Mask` still unless the transform ends with `ToPureTensor`."""
        v2 = type(self.transform).__module__.startswith("torchvision.transforms.v2")
        if rest or not v2 or type(mask) is not MaskArray or not mask.tv or mask.composed:
            given = ", ".join(type(a).__name__ for a in (image, mask, *rest))
            raise NeedsPixels(
                f"the transform was given {given} (hpuload follows a torchvision v2 transform given the image and a "
                "tv_tensors.Mask of a mask file)"
            )
        from . import _segmentation
        from ._transforms import Unsupported

        steps = getattr(self.transform, "transforms", [self.transform])
        pure = bool(steps) and type(steps[-1]).__name__ == "ToPureTensor"
        try:
            fill = _segmentation.v2_mask_fill(self.transform)
            dtype = _segmentation.v2_mask_dtype(self.transform, mask.values.dtype)
        except Unsupported as e:
            raise NeedsPixels(str(e)) from e
        # Then what the padding holds, as v2 pads a mask of its dtype; in the dtype a per-type
        # `ToDtype` casts masks to.
        values = torch.cat([mask.values, torch.full((1,), fill, dtype=mask.values.dtype)]).to(dtype)
        return self(image), MaskArray(mask.image, values, composed="v2", channel=mask.channel, tv=not pure)


class Output(NamedTuple):
    """What a Dataset hands out after an albumentations `Compose` without `ToTensorV2`
    (`ArrayOut`): the Compose's NumPy array `[H, W, C]`, as the Dataset's own code then
    changed it."""

    #: "numpy" (an array, which torch's `default_collate` makes a tensor) or "tensor".
    kind: str
    #: "hwc" or "chw" (transposed).
    layout: str
    #: "u8", "f32" or "f64".
    dtype: str
    #: Divided by 255 (in f32 or f64: the same f32 values, checked for every byte).
    scaled: bool
    #: What the Compose gives: "u8", or "f32" after its `Normalize`.
    start: str
    #: The array came out of the Compose (False: the opened image's own, no transform).
    composed: bool = True
    #: Every step that changed its values or their type since it was bytes, in order
    #: (`("astype", numpy dtype)`, `("tensor", torch dtype or None)`, `("to", torch dtype)`,
    #: `("op", name, operand, reflected)`), for `byte_values` to run again on each byte.
    history: tuple = ()
    #: Arithmetic beyond one division by 255 (`x / 127.5 - 1`, `2 * x - 1`, ...): the values
    #: are then `byte_values`'s table.
    arith: bool = False
    #: The array is the NumPy array of a PIL image a torchvision transform gave (`np.array`
    #: of its output), not an albumentations Compose's.
    of_pil: bool = False
    #: A test of the pixels the code branched on (`if (img > 1).any():`, milesial's U-Net
    #: scaling only images with a byte above 1), answered True while probing: `(operator's
    #: name, operand, history then)`; each image's bytes are checked for it as the loader
    #: makes them (`guarded_bytes`), and one that fails it is made by the Dataset's code.
    guard: tuple | None = None


def byte_values(output: Output) -> list[float]:
    """What the Dataset's code makes of each byte value (0 to 255): the steps `output`
    recorded, run again with NumPy's and torch's own operations on an array of the 256 bytes
    (every operand is a plain number, so each byte's value is that of every pixel holding
    it), as float32. Needs pixels for another result type."""
    import numpy as np

    x = _run_history(output.history)
    values = x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    if values.dtype != np.float32 or values.shape != (256,):
        raise NeedsPixels(f"the image's values computed by the Dataset's code in {values.dtype} (hpuload gives float32)")
    if not np.isfinite(values).all():
        raise NeedsPixels("the image's values computed by the Dataset's code are not all finite")
    return [float(v) for v in values]


def guarded_bytes(output: Output) -> list[bool] | None:
    """For an image whose code branched on a test of its pixels (`Output.guard`: `(img > 1)
    .any()`, answered True while probing), which byte values (0 to 255) pass the test: the
    image took the branch probed where one of its bytes does. None where it made no test."""
    import operator

    import numpy as np

    if output.guard is None:
        return None
    name, operand, history = output.guard
    x = getattr(operator, name)(_run_history(history), operand)
    return [bool(v) for v in (x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x))]


def _run_history(history: tuple):
    """The 256 byte values (0 to 255) through the steps of an `Output.history`."""
    import operator

    import numpy as np

    x = np.arange(256, dtype=np.uint8)
    for step in history:
        if step[0] == "astype":
            x = x.astype(step[1])
        elif step[0] == "tensor":
            x = torch.from_numpy(np.ascontiguousarray(x))
            x = x if step[1] is None else x.to(step[1])
        elif step[0] == "to":
            x = x.to(step[1])
        else:
            _, name, operand, reflected = step
            apply = getattr(operator, name)
            x = apply(operand, x) if reflected else apply(x, operand)
    return x


#: NumPy's and torch's dtypes by hpuload's names, for the casts `ArrayOut` follows.
_NUMPY_DTYPES = {"uint8": "u8", "float32": "f32", "float64": "f64"}


_TORCH_DTYPES = {torch.uint8: "u8", torch.float32: "f32", torch.float64: "f64"}


def _torch_dtype(dtype) -> str:
    name = _TORCH_DTYPES.get(dtype)
    if name is None:
        raise NeedsPixels(f"the transformed image cast to {dtype} (hpuload gives uint8 or float32)")
    return name


class ArrayOut(Recorded):
    """What an albumentations `Compose` that does not end in `ToTensorV2` gives while
    probing: its uint8 (or, after `Normalize`, float32) `[H, W, C]` array, recording what the
    Dataset's code does to it next, as Kaggle notebooks do before returning it: transposed to
    `[C, H, W]` (`.transpose(2, 0, 1)`, `np.transpose`, a tensor's `.permute`), cast
    (`.astype(np.float32)`, `.float()`, `torch.tensor(x, dtype=torch.float)`), divided by 255,
    made a tensor (`torch.from_numpy`, `torch.tensor`, `torch.as_tensor`). Anything else (a
    sum, a mean subtracted by hand, another axis order) needs pixels."""

    __slots__ = ("output",)

    def __init__(self, image: LazyImage, output: Output):
        super().__init__(image)
        self.output = output

    @staticmethod
    def of(image) -> "ArrayOut":
        """`image` itself, or the array an opened image is (what `cv2.imread` read, or the
        NumPy array of a PIL image) as no transform changed it; needs pixels for any other."""
        if isinstance(image, ArrayOut):
            return image
        if isinstance(image, LazyImage) and image.tensor in ("cv2", "array") and not (
            GREY in image.before or grey_read(image.before)
        ):
            return ArrayOut(image, Output("numpy", "hwc", "u8", False, "u8", composed=False))
        raise NeedsPixels(f"a tensor or array computed from the opened image ({_form_name(image.form)})")

    def _with(self, **changes) -> "ArrayOut":
        return ArrayOut(self.image, self.output._replace(**changes))

    def _opened(self, what: str) -> LazyImage:
        """The opened image whose array this is, its values unchanged (`np.array(image)`,
        perhaps `.astype(np.uint8)`); needs pixels for `what` of any other."""
        o = self.output
        same = (o.kind, o.layout, o.dtype, o.scaled, o.arith, o.composed) == ("numpy", "hwc", "u8", False, False, False)
        if not same or any(step[0] != "astype" for step in o.history):
            raise NeedsPixels(f"{what} of an array computed from the image")
        return self.image

    @property
    def shape(self):
        return self._opened("the shape").shape

    def __getitem__(self, key):
        return ArrayOut(self._opened("a crop")[key], self.output)

    def _axes(self, axes: tuple, what: str) -> "ArrayOut":
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        swap = {"hwc": (2, 0, 1), "chw": (1, 2, 0)}[self.output.layout]
        if tuple(int(a) for a in axes) != swap:
            raise NeedsPixels(f"{what}{axes} of the transformed {self.output.layout.upper()} image")
        return self._with(layout="chw" if self.output.layout == "hwc" else "hwc")

    def _cast(self, to: str, step: tuple | None = None) -> "ArrayOut":
        have = self.output.dtype
        if to == "u8" and have != "u8":
            raise NeedsPixels("the transformed float image cast to uint8")
        return self._with(dtype=to, history=self.output.history + ((step,) if step else ()))

    def _arith(self, name: str, other, reflected: bool = False) -> "ArrayOut":
        """`self <name> other` (or `other <name> self`) by a plain number: recorded, its
        result type as NumPy's or torch's promotion gives it."""
        import operator

        import numpy as np

        if isinstance(other, bool) or not isinstance(other, (int, float, np.integer, np.floating)):
            raise NeedsPixels(f"the transformed image's {name} with a {type(other).__name__} (hpuload follows plain numbers)")
        if self.output.start != "u8":
            raise NeedsPixels(f"arithmetic on the transform's {self.output.start} output (hpuload follows it on bytes)")
        apply = getattr(operator, name)
        given = (apply(other, self._zero()) if reflected else apply(self._zero(), other)).dtype
        dtype = _NUMPY_DTYPES.get(given.name) if self.output.kind == "numpy" else _TORCH_DTYPES.get(given)
        if dtype is None or dtype == "u8":
            raise NeedsPixels(f"the transformed image's {name} by {other!r} in {given} (hpuload follows it in floats)")
        step = ("op", name, other, reflected)
        return self._with(dtype=dtype, history=self.output.history + (step,), arith=True)

    def _tested(self, name: str, other) -> "PixelTest":
        import numpy as np

        if isinstance(other, bool) or not isinstance(other, (int, float, np.integer, np.floating)):
            raise NeedsPixels(f"the image compared with a {type(other).__name__} (hpuload follows plain numbers)")
        if self.output.start != "u8":
            raise NeedsPixels(f"the transform's {self.output.start} output compared (hpuload follows tests of bytes)")
        return PixelTest(self, name, other)

    def __gt__(self, other):
        return self._tested("gt", other)

    def __ge__(self, other):
        return self._tested("ge", other)

    def max(self, *args, **kwargs):
        if args or kwargs:
            raise NeedsPixels("the image's largest values along an axis")
        return PixelTest(self, None, None)

    def __mul__(self, other):
        return self._arith("mul", other)

    def __rmul__(self, other):
        return self._arith("mul", other, True)

    def __add__(self, other):
        return self._arith("add", other)

    def __radd__(self, other):
        return self._arith("add", other, True)

    def __sub__(self, other):
        return self._arith("sub", other)

    def __rsub__(self, other):
        return self._arith("sub", other, True)

    def mul(self, other):
        return self._arith("mul", other)

    def add(self, other):
        return self._arith("add", other)

    def sub(self, other):
        return self._arith("sub", other)

    def _zero(self):
        """A one-element array (or tensor) of the handle's kind and dtype, for NumPy's or
        torch's own promotion rules to say what an operation on the image gives."""
        import numpy as np

        if self.output.kind == "numpy":
            return np.zeros(1, dtype={"u8": np.uint8, "f32": np.float32, "f64": np.float64}[self.output.dtype])
        return torch.zeros(1, dtype={"u8": torch.uint8, "f32": torch.float32, "f64": torch.float64}[self.output.dtype])

    # NumPy's methods.
    def transpose(self, *axes):
        if self.output.kind != "numpy":
            raise NeedsPixels("the transformed tensor's .transpose")
        return self._axes(axes, "transpose")

    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        import numpy as np

        name = _NUMPY_DTYPES.get(np.dtype(dtype).name) if self.output.kind == "numpy" else None
        if name is None:
            raise NeedsPixels(f"the transformed image's .astype({dtype!r})")
        return self._cast(name, ("astype", np.dtype(dtype)))

    def copy(self, *args, **kwargs):
        return self

    # torch's methods.
    def permute(self, *dims):
        if self.output.kind != "tensor":
            raise NeedsPixels("the transformed array's .permute")
        return self._axes(dims, "permute")

    def float(self):
        if self.output.kind != "tensor":
            raise NeedsPixels("the transformed array's .float()")
        return self._cast("f32", ("to", torch.float32))

    def to(self, *args, **kwargs):
        dtype = kwargs.pop("dtype", args[0] if len(args) == 1 else None)
        if self.output.kind != "tensor" or not isinstance(dtype, torch.dtype) or kwargs or len(args) > 1:
            raise NeedsPixels("the transformed image's .to(...) other than to a dtype")
        return self._cast(_torch_dtype(dtype), ("to", dtype))

    def contiguous(self, *args, **kwargs):
        return self

    def div(self, other):
        return self.__truediv__(other)

    def __truediv__(self, other):
        import numpy as np

        if isinstance(other, bool) or not isinstance(other, (int, float, np.integer, np.floating)):
            raise NeedsPixels(f"the transformed image divided by a {type(other).__name__} (hpuload follows plain numbers)")
        if float(other) != 255.0 or self.output.scaled or self.output.arith:
            # Any other division (`x / 127.5`, a second one): its values are tabled.
            return self._arith("truediv", other)
        if self.output.start != "u8":
            raise NeedsPixels("the transformed image divided by 255 after Normalize")
        # The quotient's dtype as NumPy or torch gives it (an integer array over a number is
        # float64 in NumPy, the default dtype in torch; a NumPy scalar may widen a float32
        # array): in float32 or float64 its values, cast to float32, are `x / 255`'s.
        given = (self._zero() / other).dtype
        name = _NUMPY_DTYPES.get(given.name) if self.output.kind == "numpy" else _TORCH_DTYPES.get(given)
        if name is None:
            raise NeedsPixels(f"the transformed image divided by 255 in {given}")
        step = ("op", "truediv", other, False)
        return self._with(dtype=name, scaled=True, history=self.output.history + (step,))


def _colour_of(value) -> int | None:
    """`0xRRGGBB` of one colour given as three integers (a list, a tuple, a NumPy array of
    three, or of three along its last axis that broadcasts alike, `(1, 1, 3)`: `mask_values` of
    milesial's U-Net, a colour map's entry), each 0-255; None for anything else."""
    import numpy as np

    if isinstance(value, np.ndarray):
        if value.shape not in ((3,), (1, 3), (1, 1, 3)) or value.dtype.kind not in "iu":
            return None
        value = value.reshape(3).tolist()
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        return None
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 <= v <= 255 for v in value):
        return None
    r, g, b = (int(v) for v in value)
    return r << 16 | g << 8 | b


class ColourTest:
    """`rgb == colour` of an RGB array while probing (a colour mask's pixels compared with one
    colour, channel by channel), which the Dataset's code reduces over the channels
    (`.all(-1)`, `np.all(..., axis=-1)`): then a `MaskArray` of the file read as colours
    (`ColourRead`), its values True at that colour's index alone. Anything else needs pixels."""

    __slots__ = ("array", "colour")

    def __init__(self, array: LazyImage, colour: int):
        self.array, self.colour = array, colour

    def all(self, axis=None, *args, **kwargs):
        if args or kwargs or axis not in (-1, 2):
            raise NeedsPixels("a comparison of the image's array with a colour reduced otherwise than over its channels")
        return _colour_mask(self.array, self.colour)

    def __array_function__(self, func, types, args, kwargs):
        import numpy as np

        axis = args[1] if len(args) > 1 else kwargs.get("axis")
        if func is np.all and len(args) + len(kwargs) == 2 and axis in (-1, 2):
            return self.all(-1)
        raise NeedsPixels(f"np.{func.__name__} of a comparison of the image's array with a colour")

    def __bool__(self):
        raise NeedsPixels("the truth of a comparison of the image's array with a colour")

    def __getattr__(self, name: str):
        raise NeedsPixels(f"the .{name} of a comparison of the image's array with a colour")


def _colour_table() -> ColourTable:
    """The pass's `ColourTable` (kept in `_sizes_memo`'s memo, which a probe and a batch's runs
    of the code enter), or this thread's own outside one."""
    memo = getattr(_sizes, "memo", None)
    if memo is None:
        if getattr(_probing, "colours", None) is None:
            _probing.colours = ColourTable()
        return _probing.colours
    return memo.setdefault(("colours",), ColourTable())


def _colour_read(array: LazyImage) -> str | None:
    """Why the RGB array of an opened image is no colour mask hpuload reads: None for a file
    Pillow made RGB (`.convert("RGB")`, any mode) or one in RGB as stored, not turned, moved by
    nearest positions alone (`_mask_move_refused`: a resize, crops, flips)."""
    if array.turned or array.held in ("tensor", "unknown"):
        return "turned upright or changed by a transform of the code's own"
    if array.tensor != "cv2" and not array.rgb and mode_of(array.path) != "RGB":
        return f"({array.path}) in mode {mode_of(array.path)} as stored"
    for step in array.before:
        if isinstance(step, str):
            return "made grey"
        why = _mask_move_refused(step, "colour")
        if why is not None:
            return why
    return None


def _colour_mask(array: LazyImage, colour: int) -> "MaskArray":
    """The mask `(array == colour).all(-1)` is: True where a pixel holds that colour."""
    import numpy as np

    why = _colour_read(array)
    if why is not None:
        raise NeedsPixels(
            f"a comparison with a colour of an image's array {why} (hpuload reads colour masks moved by nearest positions)"
        )
    by_opencv = array.tensor == "cv2"
    if by_opencv and not array.rgb:
        # OpenCV's read in its BGR order: the file's colour is the given one reversed.
        colour = (colour & 0xFF) << 16 | (colour & 0xFF00) | colour >> 16
    table = _colour_table()
    values = np.zeros(256, dtype=bool)
    values[table.index(colour)] = True
    read = ColourRead(table, by_opencv or bool(array.rgb), "cv2" if by_opencv else "pil")
    image = LazyImage(array.path, before=(read, *array.before))
    return MaskArray(image, values, composed="functional" if array.before else False)


class _ArrayShape:
    """An RGB array that may be a colour mask, among `_probing.masks`: its `(H, W)`, which an
    `np.zeros` of it takes (`_probed_zeros`) before the code compares it with colours."""

    __slots__ = ("array",)

    def __init__(self, array: LazyImage):
        self.array = array

    @property
    def shape(self) -> tuple[int, int]:
        return self.array.shape[:2]


class PixelTest:
    """`image > c` of an image's array while probing (or its `.max()`, then compared), which
    the Dataset's code asks whether any pixel passes: `if (img > 1).any():` (or `if
    img.max() > 1:`). Answered True, the branch that photos take, and recorded on the array
    (`Output.guard`): the loader checks each image it makes for it and has the Dataset's own
    code make any that fails it (an image of no byte above 1)."""

    __slots__ = ("array", "name", "operand")

    def __init__(self, array: ArrayOut, name: str | None, operand):
        self.array, self.name, self.operand = array, name, operand

    def _holds(self, name: str, operand) -> bool:
        out = self.array.output
        if out.guard is not None and out.guard != (name, operand, out.history):
            raise NeedsPixels("a second test of the image's pixels")
        self.array.output = out._replace(guard=(name, operand, out.history))
        return True

    def any(self, *args, **kwargs):
        if args or kwargs or self.name is None:
            raise NeedsPixels("whether any of the image's pixels passes a test along an axis")
        return self._holds(self.name, self.operand)

    def _largest(self, name: str, operand):
        if self.name is not None:
            raise NeedsPixels("the image's pixels compared twice")
        self.array._tested(name, operand)
        return self._holds(name, operand)

    def __gt__(self, other):
        return self._largest("gt", other)

    def __ge__(self, other):
        return self._largest("ge", other)

    def __bool__(self):
        raise NeedsPixels("the truth of a test of the image's pixels (hpuload follows `.any()` of one)")

    def __getattr__(self, name: str):
        raise NeedsPixels(f"the .{name} of a test of the image's pixels")


class MaskArray:
    """A segmentation mask's array while probing: `np.array` of a mask file opened with
    Pillow (a grey or palette PNG, as stored or after `.convert("L")`), as the Dataset's
    code changes its values (`mask[mask == 255.0] = 1.0`, `mask / 255.0`, `(mask > 127)`,
    a cast: any element-wise step of NumPy's or torch's), gives it to the albumentations
    `Compose` with its image (`transform(image=image, mask=mask)`), then perhaps casts it or
    adds a channel (`.unsqueeze(0)`). Each pixel's value is then a function of the byte the
    file holds there alone, so the handle keeps `values`: that function, as a NumPy array
    (or, after `ToTensorV2` or `torch.from_numpy`, a torch tensor) of 256 elements, the
    element-wise steps run on it with NumPy's and torch's own arithmetic (their dtypes,
    promotions and rounding). Anything that reads the pixels themselves (a sum, `np.unique`,
    a crop, the truth of a comparison) needs pixels."""

    __slots__ = ("image", "values", "composed", "channel", "tv")

    def __init__(self, image: LazyImage, values, composed: str | bool = False, channel: bool = False, tv: bool = False):
        #: The opened mask (`before`: `()` as stored, `(GREY,)` after `.convert("L")`).
        self.image = image
        #: What each byte value (0-255) the file holds becomes.
        self.values = values
        #: It came out of the albumentations `Compose`, with its image: the NumPy dtype the
        #: Compose was given it in (which says how OpenCV warps it); False: it did not.
        self.composed = composed
        #: A channel added in front (`.unsqueeze(0)`, `[None]`): `[1, H, W]`.
        self.channel = channel
        #: A torchvision `tv_tensors.Mask` of it (`tv_tensors.Mask(mask)`, which torchvision
        #: v2's transforms move as a mask; "v2" composed: one of them gave it).
        self.tv = tv

    @property
    def kind(self) -> str:
        return "tensor" if isinstance(self.values, torch.Tensor) else "numpy"

    @property
    def __class__(self):
        """A NumPy array, a tensor or a `tv_tensors.Mask`, for `isinstance`, as the mask is."""
        if self.tv:
            from torchvision import tv_tensors

            return tv_tensors.Mask
        if isinstance(self.values, torch.Tensor):
            return torch.Tensor
        import numpy as np

        return np.ndarray

    def _with(self, values, channel: bool | None = None, tv: bool = False) -> "MaskArray":
        """The mask with `values`; a plain array or tensor (torchvision's `tv_tensors` unwrap
        to plain tensors in torch's operations) unless `tv`."""
        return MaskArray(self.image, values, self.composed, self.channel if channel is None else channel, tv)

    def _operand(self, other):
        """`other`'s values where it is this mask's (or a mask made of it), a plain number as
        it is; needs pixels for anything else (another array, another image)."""
        import numpy as np

        if type(other) is MaskArray:
            if other.image.path != self.image.path or other.kind != self.kind or other.channel != self.channel:
                raise NeedsPixels("the mask computed with another array")
            return other.values
        if isinstance(other, (bool, int, float, np.number, np.bool_)):
            return other
        raise NeedsPixels(f"the mask computed with a {type(other).__name__} (hpuload follows plain numbers)")

    def _op(self, name: str, other, reflected: bool = False) -> "MaskArray":
        import operator

        value = self._operand(other)
        apply = getattr(operator, name)
        return self._with(apply(value, self.values) if reflected else apply(self.values, value))

    def _in_place(self, name: str, other) -> "MaskArray":
        import operator

        self.values = getattr(operator, name)(self.values, self._operand(other))
        return self

    def __setitem__(self, key, value) -> None:
        """`mask[mask == 255] = 1` (where a comparison of this mask holds), or every element
        (`mask[:] = ...`, `mask[...] = ...`)."""
        if type(key) is MaskArray:
            where = self._operand(key)
            if where.dtype not in (torch.bool,) and getattr(where.dtype, "kind", None) != "b":
                raise NeedsPixels("the mask indexed by an array that is not a comparison of it")
            given = self._operand(value)
            self.values[where] = given[where] if type(value) is MaskArray else given
            return
        if key is Ellipsis or key == slice(None):
            given = self._operand(value)
            self.values[...] = given
            return
        raise NeedsPixels(f"the mask's pixels set at {key!r} (hpuload follows values set where a comparison holds)")

    def __getitem__(self, key):
        """The whole mask (`mask[:]`, `mask[...]`), or it with a channel added in front
        (`mask[None]`)."""
        if key is Ellipsis or key == slice(None) or key == (slice(None), slice(None)):
            return self
        if key is None or key == (None,) or key == (None, Ellipsis):
            if self.channel:
                raise NeedsPixels("a second channel added to the mask")
            return self._with(self.values, channel=True)
        raise NeedsPixels(f"the mask indexed by {key!r} (hpuload follows element-wise steps on the whole mask)")

    # NumPy's and torch's operators, each element by element.
    def __add__(self, other):
        return self._op("add", other)

    def __radd__(self, other):
        return self._op("add", other, True)

    def __sub__(self, other):
        return self._op("sub", other)

    def __rsub__(self, other):
        return self._op("sub", other, True)

    def __mul__(self, other):
        return self._op("mul", other)

    def __rmul__(self, other):
        return self._op("mul", other, True)

    def __truediv__(self, other):
        return self._op("truediv", other)

    def __rtruediv__(self, other):
        return self._op("truediv", other, True)

    def __floordiv__(self, other):
        return self._op("floordiv", other)

    def __mod__(self, other):
        return self._op("mod", other)

    def __pow__(self, other):
        return self._op("pow", other)

    def __and__(self, other):
        return self._op("and_", other)

    def __rand__(self, other):
        return self._op("and_", other, True)

    def __or__(self, other):
        return self._op("or_", other)

    def __ror__(self, other):
        return self._op("or_", other, True)

    def __xor__(self, other):
        return self._op("xor", other)

    def __eq__(self, other):
        return self._op("eq", other)

    def __ne__(self, other):
        return self._op("ne", other)

    def __lt__(self, other):
        return self._op("lt", other)

    def __le__(self, other):
        return self._op("le", other)

    def __gt__(self, other):
        return self._op("gt", other)

    def __ge__(self, other):
        return self._op("ge", other)

    def __iadd__(self, other):
        return self._in_place("iadd", other)

    def __isub__(self, other):
        return self._in_place("isub", other)

    def __imul__(self, other):
        return self._in_place("imul", other)

    def __itruediv__(self, other):
        return self._in_place("itruediv", other)

    def __ifloordiv__(self, other):
        return self._in_place("ifloordiv", other)

    def __iand__(self, other):
        return self._in_place("iand", other)

    def __ior__(self, other):
        return self._in_place("ior", other)

    def __invert__(self):
        return self._with(~self.values)

    def __neg__(self):
        return self._with(-self.values)

    def __abs__(self):
        return self._with(abs(self.values))

    __hash__ = None

    def __bool__(self):
        raise NeedsPixels("the truth of the mask's values")

    def __len__(self):
        raise NeedsPixels("the length of the mask")

    def __iter__(self):
        raise NeedsPixels("the mask's rows")

    def __array__(self, *args, **kwargs):
        raise NeedsPixels("the mask's pixels (NumPy's array of it)")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy's element-wise functions (`np.greater(mask, 0)`, `np.logical_and`, ...) on
        the mask's values; their reductions (`np.add.reduce`) need pixels."""
        if method != "__call__" or set(kwargs) - {"out", "dtype", "casting"}:
            raise NeedsPixels(f"np.{ufunc.__name__}.{method} of the mask")
        out = kwargs.pop("out", None)
        values = ufunc(*(self._operand(x) for x in inputs), **kwargs)
        if out is not None:
            if len(out) != 1 or type(out[0]) is not MaskArray or out[0]._operand(out[0]) is not out[0].values:
                raise NeedsPixels(f"np.{ufunc.__name__} of the mask into another array")
            out[0].values[...] = values
            return out[0]
        return self._with(values)

    def __array_function__(self, func, types, args, kwargs):
        """`np.where(mask > 0, 1.0, 0.0)`, `np.clip`, `np.round`, `np.copy`: element-wise."""
        import numpy as np

        if func not in (np.where, np.clip, np.round, np.around, np.copy) or (func is np.where and len(args) != 3):
            raise NeedsPixels(f"np.{func.__name__} of the mask")
        values = func(*(self._operand(x) for x in args), **kwargs)
        return self._with(values)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """torch's element-wise `where`, `clamp` and `round` of the mask's values."""
        kwargs = kwargs or {}
        mask = next(x for x in args if type(x) is MaskArray)
        if func not in (torch.where, torch.clamp, torch.clip, torch.round) or (func is torch.where and len(args) != 3):
            raise NeedsPixels(f"torch.{getattr(func, '__name__', func)} of the mask")
        return mask._with(func(*(mask._operand(x) for x in args), **kwargs))

    # NumPy's methods.
    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        if self.kind != "numpy":
            raise NeedsPixels("the mask tensor's .astype")
        return self._with(self.values.astype(dtype))

    def copy(self, *args, **kwargs):
        return self._with(self.values.copy())

    # torch's methods.
    def _tensor(self, what: str):
        if self.kind != "tensor":
            raise NeedsPixels(f"the mask array's {what}")

    def to(self, *args, **kwargs):
        dtype = kwargs.pop("dtype", args[0] if len(args) == 1 else None)
        self._tensor(".to")
        if not isinstance(dtype, torch.dtype) or kwargs or len(args) > 1:
            raise NeedsPixels("the mask's .to(...) other than to a dtype")
        return self._with(self.values.to(dtype), tv=self.tv)  # a tv_tensor's `.to` keeps its class

    def type(self, dtype=None, *args, **kwargs):
        self._tensor(".type")
        if not isinstance(dtype, torch.dtype) or args or kwargs:
            raise NeedsPixels("the mask's .type(...) other than to a dtype")
        return self._with(self.values.to(dtype))

    def float(self):
        return self.to(torch.float32)

    def double(self):
        return self.to(torch.float64)

    def long(self):
        return self.to(torch.int64)

    def int(self):
        return self.to(torch.int32)

    def byte(self):
        return self.to(torch.uint8)

    def bool(self):
        return self.to(torch.bool)

    def clone(self, *args, **kwargs):
        self._tensor(".clone()")
        return self._with(self.values.clone(), tv=self.tv)

    def as_subclass(self, cls):
        self._tensor(".as_subclass")
        if cls is not torch.Tensor:
            raise NeedsPixels(f"the mask as a {getattr(cls, '__name__', cls)}")
        return self._with(self.values)

    def contiguous(self, *args, **kwargs):
        return self

    def unsqueeze(self, dim):
        self._tensor(".unsqueeze")
        if int(dim) != 0 or self.channel:
            raise NeedsPixels(f"the mask's .unsqueeze({dim}) (hpuload adds one channel in front)")
        return self._with(self.values, channel=True)

    def squeeze(self, dim=None):
        """The mask without the channel it has in front; one without a channel as it is
        (`squeeze(0)` keeps a first axis longer than one, and the shape the class hands out is
        checked once the loader is built)."""
        self._tensor(".squeeze")
        if dim not in (None, 0):
            raise NeedsPixels(f"the mask's .squeeze({dim}) (hpuload removes the channel it has in front)")
        return self._with(self.values, channel=False)

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def shape(self) -> tuple:
        """The mask's `(H, W)`, from its file's header, before the transform moved it, or
        after Pillow's `.resize` of it to one size (`Resized`, its only move)."""
        size = None if self.composed and not _resized_alone(self.image) else size_of(self.image.path)
        if size is None:
            raise NeedsPixels("the shape of the mask (hpuload answers it from the file's header, before the transform)")
        if self.composed:
            size = self.image._dims("the shape of the mask")
        return (1, size[1], size[0]) if self.channel else (size[1], size[0])

    @property
    def ndim(self) -> int:
        return 3 if self.channel else 2

    def __getattr__(self, name: str):
        raise NeedsPixels(f"the mask's .{name}")


def _mask_array(image: LazyImage) -> "MaskArray | None":
    """`np.array` of an opened image that is a mask: a file Pillow opens in a mode of one
    byte a pixel, as stored (grey or palette: the byte values themselves, or the palette's
    indices), or any file made grey by `.convert("L")` (a damaged one too: the loader names
    it as it reads it), perhaps moved by torchvision's functionals as its image was
    (`mask_parts`: "functional"); None where it is none (an RGB image, one resized otherwise)."""
    import numpy as np

    parts = mask_parts(image)
    if parts is None:
        return None
    mask = MaskArray(image, np.arange(256, dtype=np.uint8), composed="functional" if parts[1] else False)
    # The masks made lately, whose shape an `np.zeros` of them may take (`_probed_zeros`).
    _probing.masks = (mask, *getattr(_probing, "masks", ())[:3])
    return mask


def _both_as_read(mask: "MaskArray", image: LazyImage) -> bool:
    """Whether a mask no transform was given and its image are both where they were read:
    the mask unmoved (`mask_parts`), the image neither resized nor moved by a step of the
    code's own (a conversion, to grey or RGB, may stand, and torchvision's functionals that
    keep every pixel where it is: `to_tensor`, `normalize`)."""
    parts = mask_parts(mask.image)

    def moves(step) -> bool:
        if isinstance(step, Applied):
            stays = step.crop is None and not step.drawn and not step.after
            name = type(step.transform).__name__
            return not (stays and name in _SAME_SIZE - {"RandomHorizontalFlip", "RandomVerticalFlip"})
        return isinstance(step, Resized) or _flip_of(step) is not None

    return parts is not None and not parts[1] and not any(moves(step) for step in image.before)


def mask_parts(image: LazyImage) -> tuple[tuple, tuple] | None:
    """`(read, moves)` of an opened file that is a mask (`LazyImage.before` split): Pillow's
    grey of it (`(GREY,)`) or nothing (a file of one byte a pixel as stored, grey or palette),
    then the steps torchvision's functionals took on it as on its image (the forum's joint
    transforms: `resize(mask)`, `TF.crop(mask, i, j, h, w)` where `get_params` drew the
    image's crop, `TF.hflip(mask)`), each one that moves a mask's values without blending
    them or blends them as Pillow's bilinear resize does (`_mask_move_refused`). None for
    anything else."""
    if image.tensor == "cv2" and image.before == (READ_GREY,) and not image.turned and image.held is None:
        return image.before, ()  # OpenCV's grey read of a mask file, unmoved
    if image.tensor or image.turned or image.rgb or image.held == "unknown":
        return None
    before = image.before
    if before and isinstance(before[0], ColourRead):
        # A colour mask (`_colour_mask`): moved by nearest positions alone.
        if any(_mask_move_refused(step, "colour") for step in before[1:]):
            return None
        return before[:1], before[1:]
    read = before[:1] if before[:1] == (GREY,) else ()
    stored = None if read else mode_of(image.path)
    if not read and stored not in ("L", "P"):
        return None
    moves = before[len(read) :]
    palette = stored == "P"
    if any(_mask_move_refused(step, palette) for step in moves):
        return None
    return read, moves


#: torchvision's steps (by class name) that move a mask's pixels as they move its image's
#: (a resize by nearest positions, or Pillow's bilinear one of a grey mask:
#: `_mask_move_refused`).
_MASK_MOVES = frozenset({"Resize", "CenterCrop", "RandomHorizontalFlip", "RandomVerticalFlip"})


def _mask_move_refused(step, palette: bool | str) -> str | None:
    """Why a step of a mask's (`LazyImage.before`) is no move hpuload makes of masks: None for
    a crop where `get_params` drew the image's, a centre crop, a flip, or a resize (a
    functional call, or a transform the Dataset holds, `ChainLink`, given the mask) by nearest
    positions (a palette image, which Pillow resizes by nearest whatever the filter asked; any
    mask with `InterpolationMode.NEAREST`) or, of a grey mask, by any of Pillow's filters,
    which blend the values at its edges (bilinear: torchvision's default). `palette`
    "colour": an RGB mask compared with colours, which only nearest positions keep."""
    from ._transforms import _PIL_FILTERS, PIL_BLENDS

    if isinstance(step, Resized):
        # Pillow's `.resize` of the mask to one size, as torchvision's `Resize` of it with
        # that filter (which is this call): Pillow resizes a palette image by nearest
        # positions whatever the filter asked.
        if step.by != "pil":
            return "OpenCV's resize of a mask"
        if palette == "colour":
            return None if step.filter == 0 else f"Pillow's resize of a colour mask by its filter {step.filter}, which blends colours"
        if palette or step.filter in _PIL_FILTERS:
            return None
        return f"Pillow's resize of a grey mask by its filter {step.filter} (hpuload moves masks by Pillow's filters 0-5)"
    if not isinstance(step, Applied) or step.after or step.drawn:
        return "a step hpuload does not move masks by"
    if step.crop is not None:
        return None
    name = type(step.transform).__name__
    if name not in _MASK_MOVES:
        return f"{step.name()}"
    if name == "Resize" and palette == "colour":
        mode = getattr(step.transform.interpolation, "value", step.transform.interpolation)
        if mode not in ("nearest", "nearest-exact"):
            return f"{step.name()}, which blends a colour mask's colours"
    if name == "Resize" and not palette:
        # A grey mask: by nearest positions, or blended as Pillow's resize by that filter
        # blends it (bilinear: torchvision's default).
        mode = getattr(step.transform.interpolation, "value", step.transform.interpolation)
        if mode not in ("nearest", "nearest-exact") and mode not in PIL_BLENDS:
            return f"{step.name()}, which resamples a grey mask by a filter hpuload does not move masks by"
    return None


def _resized_alone(image: LazyImage) -> bool:
    """Whether an opened mask's only moves are Pillow's resizes of it (`Resized`)."""
    parts = mask_parts(image)
    return parts is not None and bool(parts[1]) and all(isinstance(step, Resized) for step in parts[1])


def mask_flips(moves: tuple) -> tuple[tuple, tuple[bool, bool]] | None:
    """`(moves before the flips, (horizontal, vertical))` of a mask's moves whose flips all
    come last (a drawn flip of the image and its mask, after their crop); None where a flip
    comes before another move."""
    kept = list(moves)
    flips = []
    while kept and _flip_of(kept[-1]) is not None:
        flips.append(_flip_of(kept.pop()))
    if any(_flip_of(step) is not None for step in kept):
        return None
    return tuple(kept), (flips.count("h") % 2 == 1, flips.count("v") % 2 == 1)


class Segmented(NamedTuple):
    """What a Dataset's `__getitem__` returns when it returns an image and its segmentation
    mask (`return image, mask`, after `transform(image=image, mask=mask)`): `form` "tuple",
    "list" or "dict" (`{"image": image, "mask": mask}`: `keys` the image's and the mask's, in
    the dict's order). The loader hands out the images' batch and the masks'
    (`_segmentation.FileMasks`)."""

    form: str
    #: A dict's keys, in its order; `(0, 1)` for a tuple or list.
    keys: tuple = (0, 1)
    #: Where the image is among `keys`.
    image_at: int = 0

    def of(self, out):
        """The image in what `__getitem__` returned."""
        return out[self.keys[self.image_at]]

    def mask_of(self, out):
        """The mask in what `__getitem__` returned."""
        return out[self.keys[1 - self.image_at]]

    def sample(self, image, mask):
        """One sample as `__getitem__` returns it (a list as a tuple: `default_collate`
        makes a list of either)."""
        pair = (image, mask) if self.image_at == 0 else (mask, image)
        return dict(zip(self.keys, pair)) if self.form == "dict" else pair

    def batch(self, images, masks):
        """What `default_collate` makes of a batch of samples."""
        pair = [images, masks] if self.image_at == 0 else [masks, images]
        return dict(zip(self.keys, pair)) if self.form == "dict" else pair


def _array_out_tensor(array, dtype=None, device=None, requires_grad=False, **rest) -> ArrayOut:
    """`torch.tensor`, `torch.as_tensor` or `torch.from_numpy` of the transformed array (or
    of the opened one, `ArrayOut.of`; or of a mask's, `MaskArray`)."""
    if type(array) is MaskArray:
        if array.kind != "numpy" or device is not None or requires_grad or any(rest.values()):
            raise NeedsPixels("a tensor of the mask with a device, requires_grad or pinned memory")
        values = torch.from_numpy(array.values.copy())
        return array._with(values if dtype is None else values.to(dtype))
    array = ArrayOut.of(array)
    if array.output.kind != "numpy" or device is not None or requires_grad or any(rest.values()):
        raise NeedsPixels("a tensor of the transformed image with a device, requires_grad or pinned memory")
    out = array._with(kind="tensor", history=array.output.history + (("tensor", None),))
    return out if dtype is None else out._cast(_torch_dtype(dtype), ("to", dtype))


class AlbumentationsStandIn:
    """Takes the place of an albumentations `Compose` while probing: called as
    `transform(image=image)`, it gives `{"image": ...}` recording the image (an `ArrayOut`
    where the Compose does not end in `ToTensorV2`)."""

    @property
    def __class__(self):
        """The Compose's class, for `isinstance` (as `TransformStandIn.__class__`)."""
        return type(self) if self.compose is None else type(self.compose)

    def __init__(self, compose=None):
        self.compose = compose
        #: `_padding`'s, by dtype.
        self._paddings: dict = {}
        steps = list(getattr(compose, "transforms", ()))
        names = [type(t).__name__ for t in steps]
        #: The Output the Compose starts the Dataset's code with; None: a tensor (ToTensorV2).
        self.array = None
        if not names or names[-1] != "ToTensorV2":
            start = "f32" if "Normalize" in names or "ToFloat" in names else "u8"
            self.array = Output("numpy", "hwc", start, False, start)

    def __call__(self, *args, **kwargs):
        mask = _unwrapped(kwargs.get("mask"))  # the classes an `np.zeros` became, too
        if isinstance(mask, LazyImage) and mask._cv2_mask() is not None:
            mask = mask._cv2_mask()  # OpenCV's grey read of a mask file
        if args or set(kwargs) not in ({"image"}, {"image", "mask"}) or (mask is not None and type(mask) is not MaskArray):
            given = ", ".join([type(a).__name__ for a in args] + [f"{k}=" for k in kwargs])
            raise NeedsPixels(
                f"the albumentations transform was called with {given} (hpuload gives it image= alone, or with "
                "mask= the array of a mask file)"
            )
        image = kwargs["image"]
        if type(image) is MaskArray:
            path = image.image.path
            raise NeedsPixels(
                f"the albumentations transform was given as image= the array of {path}, in mode "
                f"{'L' if image.image.before else mode_of(path)}, which Image.open keeps (hpuload decodes images to "
                'RGB: .convert("RGB") it to run natively)'
            )
        if isinstance(image, ArrayOut):
            o = image.output
            what = f"{o.dtype}{', divided by 255' if o.scaled else ''}{', transposed' if o.layout != 'hwc' else ''}"
            raise NeedsPixels(
                f"the albumentations transform was given the image's array as the code changed it ({what}), "
                "not in the uint8 dtype and layout hpuload reads"
            )
        if not isinstance(image, LazyImage) or image.tensor not in ("cv2", "array"):
            raise NeedsPixels(
                f"the albumentations transform was given a {type(image).__name__}, not what cv2.imread read "
                "or the NumPy array of an opened image"
            )
        out = {"image": Recorded(image, kind="tensor") if self.array is None else ArrayOut(image, self.array)}
        if mask is not None:
            # The mask moved with the image (`_albumentations.translate_with_mask`), its values
            # kept, and what its padding holds after them (`MaskArray.values[256]`); `ToTensorV2`
            # makes it a tensor of its dtype.
            if mask.composed or mask.channel or mask.kind != "numpy":
                raise NeedsPixels("the albumentations transform was given a mask it made, or a tensor of one")
            import numpy as np

            values = np.append(mask.values, self._padding(mask.values.dtype))
            given = str(mask.values.dtype)
            out["mask"] = MaskArray(mask.image, values if self.array is not None else torch.from_numpy(values), composed=given)
        return out

    def _padding(self, dtype):
        """What the Compose's padding of a mask (`PadIfNeeded`'s, a `RandomCrop`'s that pads
        if needed, or a warp's constant border: `_albumentations.mask_filler`) holds in a mask
        of `dtype`: albumentations' own padding of a tiny mask with its `fill_mask` (0 where the
        Compose fills nothing)."""
        import numpy as np

        padding = self._paddings
        if dtype not in padding:
            import albumentations as A

            from ._albumentations import mask_filler

            filler = mask_filler(self.compose)
            value = np.zeros(1, dtype)
            if filler is not None:
                pad = A.PadIfNeeded(min_height=3, min_width=3, border_mode=0, fill_mask=filler.fill_mask)
                try:
                    value = pad(image=np.zeros((1, 1, 3), np.uint8), mask=np.zeros((1, 1), dtype))["mask"][0, :1]
                except Exception as e:  # noqa: BLE001 - a dtype albumentations pads otherwise
                    raise NeedsPixels(f"a {dtype} mask albumentations pads ({type(e).__name__})") from e
                if value.dtype != dtype:
                    raise NeedsPixels(f"a {dtype} mask albumentations pads as {value.dtype}")
            padding[dtype] = value
        return padding[dtype]


def transform_attribute(dataset) -> str | None:
    """The name of the attribute that holds `dataset`'s transform: when `transform` is missing
    or None, the one attribute holding an albumentations `Compose` (`transforms`,
    `augmentations`, `aug`, ..., as Kaggle-style Datasets name it) or a torchvision transform
    (`tfms`, `preprocess`, ...), else `transform`; None for neither."""
    if held_transform(dataset, "transform") is None:
        from ._albumentations import is_compose

        found = [k for k, v in getattr(dataset, "__dict__", {}).items() if is_compose(v) or is_torchvision_transform(v)]
        if len(found) == 1:
            return found[0]
    return "transform" if hasattr(dataset, "transform") else None


def held_transform(dataset, attribute: str):
    """The transform `dataset` holds under `attribute`, or None: none, or a method of its own
    class (`def transform(self, image, mask)`, the forum's joint transforms of an image and its
    mask), which is its own code, run as `__getitem__` is, not a transform to stand in for."""
    value = getattr(dataset, attribute, None)
    if inspect.ismethod(value) and value.__self__ is dataset:
        return None
    return value


def chain_attributes(dataset) -> list[str]:
    """The Dataset's attributes that hold torchvision transforms, when it holds several and
    no `transform` (nor an albumentations `Compose`): its code applies them itself, in the
    order it chooses (diffusers' SDXL textual inversion: `self.crop`, then
    `self.flip_transform`), each stood in for by a `ChainLink`. Empty otherwise."""
    if getattr(dataset, "transform", None) is not None:
        return []
    from ._albumentations import is_compose

    held = getattr(dataset, "__dict__", {})
    if any(is_compose(v) for v in held.values()):
        return []
    found = [k for k, v in held.items() if is_torchvision_transform(v)]
    return found if len(found) > 1 else []


class ChainLink:
    """Takes the place of one of the torchvision transforms a Dataset holds several of
    (`chain_attributes`) while probing: called on the opened image, it gives the image with
    the transform recorded as applied (`Applied`), for the code to go on with as the PIL image
    (or tensor) torchvision would give; the loader then runs the transforms in the order the
    code applied them. `get_params` of a `RandomCrop` is answered (`_crop_params`); its other
    plain attributes (`self.crop.size`) read through."""

    def __init__(self, attribute: str, transform):
        self._attribute, self._transform = attribute, transform
        self._kinds: dict[str, str] = {}  # as `TransformStandIn._kinds`

    @property
    def __class__(self):
        """The transform's class, for `isinstance` (as `TransformStandIn.__class__`)."""
        return type(self._transform)

    def __call__(self, image, *rest):
        if rest or not isinstance(image, LazyImage):
            raise NeedsPixels(f"the Dataset's `{self._attribute}` was given a {type(image).__name__}, not the opened image")
        if image.tensor == "cv2" or image.tensor == "array":
            raise NeedsPixels(f"the Dataset's `{self._attribute}` (a torchvision transform) was given a NumPy array")
        if image.held == "unknown":
            raise NeedsPixels(f"the Dataset's `{self._attribute}` given what a transform hpuload does not know made")
        step = Applied(self._attribute, transform=self._transform)
        out = LazyImage(image.path, tensor=image.tensor, rgb=image.rgb, turned=image.turned, before=(*image.before, step))
        given = image.held or ("tensor" if image.tensor else "pil")
        if given not in self._kinds:
            self._kinds[given] = _kind_after(self._transform, given)
        out.held = self._kinds[given]
        return out

    def get_params(self, *args, **kwargs):
        from torchvision import transforms as T

        if type(self._transform) is T.RandomResizedCrop:
            return _resized_crop_params(*args, **kwargs)
        if type(self._transform) is not T.RandomCrop:
            raise NeedsPixels(f"get_params of the Dataset's `{self._attribute}` ({type(self._transform).__name__})")
        return _crop_params(*args, **kwargs)

    def __getattr__(self, name: str):
        value = getattr(self._transform, name)
        if callable(value):
            raise NeedsPixels(f"`{self._attribute}.{name}` called on the image (hpuload stands in for the transform)")
        return value


#: On a thread running a Dataset's code for a sample the loader hands out
#: (`DrawnExtras.rows`): `plan(width, height)`, that sample's plan (`core.sample_plan`) for
#: its image as decoded; `answered`: `_crop_params` answered a draw while probing.
_plans = threading.local()


def _crop_params(img, output_size):
    """`RandomCrop.get_params(img, output_size)` of the opened image, `(top, left, height,
    width)`: on a run for a sample the loader hands out, where the loader's own random crop
    cuts it (its sample plan's), otherwise (probing) a corner drawn at random; recorded on the
    image, for `functional.crop` to follow. Errors as torchvision raises them."""
    if not isinstance(img, LazyImage) or img.tensor in ("cv2", "array"):
        raise NeedsPixels(f"RandomCrop.get_params of a {type(img).__name__} that is not the opened image")
    th, tw = (int(v) for v in output_size)
    width, height = img._dims("RandomCrop.get_params")
    if height < th or width < tw:
        raise ValueError(f"Required crop size {(th, tw)} is larger than input image size {(height, width)}")
    if (width, height) == (tw, th):
        top = left = 0
    else:
        plan = getattr(_plans, "plan", None)
        if plan is None:
            _plans.answered = True
            top, left = _probe_draws.randint(0, height - th), _probe_draws.randint(0, width - tw)
        else:
            # One crop a sample: the loader's plan is its one image's.
            _plans.plan = _no_plan
            cut = plan(*img._dims("RandomCrop.get_params", ())).get("resized_crop")
            if cut is None or tuple(cut["resized"]) != (height, width):
                raise NeedsPixels("RandomCrop.get_params where the loader's crop is not of the image as the code holds it")
            top, left = cut["at"]
    img.cut = (top, left, th, tw)
    # A mask the code cuts where it cut its image (`functional.crop(mask, i, j, h, w)`) follows.
    _plans.drawn_cut = (img.cut, (width, height))
    return top, left, th, tw


#: The corners `_crop_params` draws while probing (any will do: the loader's own are used).
_probe_draws = random.Random()


def _probed_get_params(original):
    """`RandomCrop.get_params`, answered for the opened image on a probing thread."""

    def get_params(img, output_size):
        if getattr(_probing, "on", False) and isinstance(img, LazyImage):
            return _crop_params(img, output_size)
        return original(img, output_size)

    get_params.__wrapped__ = original
    return get_params


def _functional_crop(img, top, left, height, width):
    """torchvision's `functional.crop` of the opened image: where `RandomCrop.get_params` drew
    for it (`Applied` with that size); any other crop needs pixels."""
    if img.tensor in ("cv2", "array"):
        raise NeedsPixels("torchvision's functional.crop of a NumPy array")
    if img.cut is None and _cut_of_image(img, (top, left, height, width)):
        # The mask cut where `get_params` drew its image's crop, the two of one size.
        if mask_parts(img) is None:
            read = img.before[:1] == (GREY,)
            palette = mode_of(img.path) == "P" and not read
            why = next((w for w in (_mask_move_refused(s, palette) for s in img.before[read:]) if w), None)
            raise NeedsPixels(
                f"a second image cut where RandomCrop.get_params drew the image's crop, after {why or 'what it is'} "
                "(hpuload moves a mask of one byte a pixel, opened as stored or made grey, by nearest resizes, "
                "Pillow's bilinear one of a grey mask, crops and flips)"
            )
        out = LazyImage(img.path, before=(*img.before, Applied(crop=(int(height), int(width)))))
        out.held = img.held
        return out
    if img.cut is None or img.cut != (top, left, height, width):
        raise NeedsPixels(
            f"a crop of the image at ({top}, {left}) of {height}x{width} (hpuload follows a crop where "
            "RandomCrop.get_params drew it)"
        )
    step = Applied(crop=(int(height), int(width)))
    out = LazyImage(img.path, tensor=img.tensor, rgb=img.rgb, turned=img.turned, before=(*img.before, step))
    out.held = img.held
    return out


def _cut_of_image(mask: LazyImage, window: tuple) -> bool:
    """Whether `window` is the crop `RandomCrop.get_params` last drew on this thread for an
    image of the mask's size (the image's and its mask's joint crop)."""
    drawn = getattr(_plans, "drawn_cut", None)
    return drawn is not None and drawn[0] == tuple(window) and mask._known_dims() == drawn[1]


def _resized_crop_params(img, scale, ratio):
    """`RandomResizedCrop.get_params(img, scale, ratio)` of the opened image, `(top, left,
    height, width)`: on a run for a sample the loader hands out, the window of the loader's
    own random resized crop (its sample plan's `crop`), otherwise (probing) a window drawn at
    random; recorded on the image, for `functional.resized_crop` to follow. The loader's
    random resized crop is the first step of its plan: of an image the code changed first it
    needs pixels."""
    if not isinstance(img, LazyImage) or img.tensor in ("cv2", "array"):
        raise NeedsPixels(f"RandomResizedCrop.get_params of a {type(img).__name__} that is not the opened image")
    if img.before:
        raise NeedsPixels("RandomResizedCrop.get_params of an image the code changed first (hpuload's is the first step)")
    width, height = img._dims("RandomResizedCrop.get_params")
    plan = getattr(_plans, "plan", None)
    if plan is None:
        _plans.answered = True
        h, w = _probe_draws.randint(1, height), _probe_draws.randint(1, width)
        top, left = _probe_draws.randint(0, height - h), _probe_draws.randint(0, width - w)
    else:
        _plans.plan = _no_plan  # one crop a sample
        crop = plan(width, height)["crop"]
        window = tuple(crop[k] for k in ("top", "left", "height", "width"))
        if any(v != int(v) for v in window):
            raise NeedsPixels("RandomResizedCrop.get_params where the loader's crop is no whole window of the image")
        top, left, h, w = (int(v) for v in window)
    img.cut = ("resized", tuple(scale), tuple(ratio), (top, left, h, w))
    return top, left, h, w


def _probed_resized_crop_params(original):
    """`RandomResizedCrop.get_params`, answered for the opened image on a probing thread."""

    def get_params(img, scale, ratio):
        if getattr(_probing, "on", False) and isinstance(img, LazyImage):
            return _resized_crop_params(img, scale, ratio)
        return original(img, scale, ratio)

    get_params.__wrapped__ = original
    return get_params


def _functional_resized_crop(img, top, left, height, width, size, interpolation=None, antialias=True, *, v2=False):
    """torchvision's `functional.resized_crop` of the opened image where
    `RandomResizedCrop.get_params` drew its window: that random resized crop (`Applied`, the
    transform `RandomResizedCrop(size, scale, ratio, interpolation, antialias)`); any other
    window needs pixels."""
    if not isinstance(img, LazyImage) or img.tensor in ("cv2", "array"):
        raise NeedsPixels(f"torchvision's functional.resized_crop of a {type(img).__name__} that is not the opened image")
    cut = img.cut
    if cut is None or cut[0] != "resized" or cut[3] != (top, left, height, width):
        raise NeedsPixels(
            f"a resized crop of the image at ({top}, {left}) of {height}x{width} (hpuload follows one where "
            "RandomResizedCrop.get_params drew it)"
        )
    if v2:
        from torchvision.transforms import v2 as T
    else:
        from torchvision import transforms as T
    if interpolation is None:
        interpolation = T.InterpolationMode.BILINEAR
    try:
        transform = T.RandomResizedCrop(size, scale=cut[1], ratio=cut[2], interpolation=interpolation, antialias=antialias)
    except Exception as e:
        raise NeedsPixels(f"torchvision's functional.resized_crop with these arguments ({_first_line(e)})") from None
    call = (
        f"RandomResizedCrop.get_params(scale={cut[1]!r}, ratio={cut[2]!r}) then "
        f"{'v2.' if v2 else ''}functional.resized_crop(size={size!r}, interpolation={interpolation!r}, antialias={antialias!r})"
    )
    step = Applied(transform=transform, call=call, drawn=True)
    out = LazyImage(img.path, tensor=img.tensor, rgb=img.rgb, turned=img.turned, before=(*img.before, step))
    out.held = img.held
    return out


def _functional_step(name: str, original, v2: bool = False):
    """The answer to torchvision's `functional.<name>` (`v2`: `transforms.v2.functional`'s)
    called on the opened image, or on what the Dataset's transform gave, while probing: the
    image with the transform that is that call recorded as applied (`Applied`; its arguments
    bound as the function binds them, defaults included), for the code to go on with. The call
    needs pixels where its input is of a kind the function does not take (what torchvision
    would raise at) or one hpuload cannot tell."""
    signature = inspect.signature(original)
    make, takes = (_FUNCTIONAL_STEPS_V2 if v2 else _FUNCTIONAL_STEPS)[name]
    called = f"torchvision's {'v2 ' if v2 else ''}functional.{name}"
    # The transform each call is, by the call (a Dataset's code makes the same few calls for
    # every sample, and runs again for each one the loader hands out where it draws).
    made: dict[str, Any] = {}
    # The call each set of arguments makes (`(call, its arguments by name)`), by the
    # arguments' reprs: bound once.
    bound_calls: dict[str, tuple[str, dict]] = {}

    def bind(image, args, kwargs) -> tuple[str, dict]:
        try:
            bound = signature.bind(image, *args, **kwargs)
        except TypeError as e:
            raise NeedsPixels(f"{called} called so: {e}") from None
        bound.apply_defaults()
        given = dict(bound.arguments)
        given.pop(next(iter(signature.parameters)))
        return f"{'v2.' if v2 else ''}functional.{name}({', '.join(f'{k}={v!r}' for k, v in given.items())})", given

    def answer(image, *args, **kwargs):
        key = repr((args, kwargs))
        if "..." in key:
            # An argument whose repr is cut short (a large array): bound each time.
            call, given = bind(image, args, kwargs)
        else:
            if key not in bound_calls:
                if len(bound_calls) >= _MADE_KEPT:
                    bound_calls.clear()
                bound_calls[key] = bind(image, args, kwargs)
            call, given = bound_calls[key]
        transform, kinds = made.get(call, (None, None))
        if transform is None:
            if v2:
                from torchvision.transforms import v2 as T
            else:
                from torchvision import transforms as T

            try:
                transform = make(T, **given)
            except Exception as e:  # what torchvision raises at the call: the loader that runs it says
                raise NeedsPixels(f"{called} with these arguments ({_first_line(e)})") from None
            if len(made) >= _MADE_KEPT:
                made.clear()
            kinds = {kind: _kind_after(transform, kind) for kind in _ANY}
            made[call] = transform, kinds
        after = isinstance(image, Recorded)
        lazy = image.image if after else image
        if name == "to_tensor" and not v2 and not after and type(lazy) is LazyImage:
            lazy = _array_as_pil(lazy)  # of the NumPy array of a PIL image: its values alike
        if isinstance(image, ArrayOut) or not isinstance(lazy, LazyImage) or lazy.tensor in ("cv2", "array"):
            raise NeedsPixels(f"{called} of a NumPy array")
        kind = image.kind if after else lazy.held or ("tensor" if lazy.tensor else "pil")
        if kind not in ("pil", "tensor"):
            raise NeedsPixels(f"{called} of what hpuload cannot tell the kind of")
        if kind not in takes:
            raise NeedsPixels(f"{called} of a {'PIL image' if kind == 'pil' else 'tensor'}")
        step = Applied(transform=transform, call=call, after=after)
        out = LazyImage(lazy.path, tensor=lazy.tensor, rgb=lazy.rgb, turned=lazy.turned, before=(*lazy.before, step))
        if after:
            out.held = lazy.held
            return Recorded(out, torchvision=True, kind=kinds[kind])
        out.held = kinds[kind]
        return out

    return answer


_ANY = ("pil", "tensor")

#: How many calls' transforms `_functional_step` keeps, per functional.
_MADE_KEPT = 64

#: torchvision's functionals (v1) answered on the image while probing (`_functional_step`):
#: name -> (the transform that is the call, given torchvision's transforms module and the
#: call's other arguments by name; the kinds of input the function takes).
_FUNCTIONAL_STEPS = {
    "resize": (lambda T, size, interpolation, max_size, antialias: T.Resize(size, interpolation, max_size, antialias), _ANY),
    "center_crop": (lambda T, output_size: T.CenterCrop(output_size), _ANY),
    "hflip": (lambda T: T.RandomHorizontalFlip(p=1.0), _ANY),
    "vflip": (lambda T: T.RandomVerticalFlip(p=1.0), _ANY),
    "pad": (lambda T, padding, fill, padding_mode: T.Pad(padding, fill, padding_mode), _ANY),
    "rgb_to_grayscale": (lambda T, num_output_channels: T.Grayscale(num_output_channels), _ANY),
    "to_grayscale": (lambda T, num_output_channels: T.Grayscale(num_output_channels), ("pil",)),
    "to_tensor": (lambda T: T.ToTensor(), ("pil",)),
    "pil_to_tensor": (lambda T: T.PILToTensor(), ("pil",)),
    "to_pil_image": (lambda T, mode: T.ToPILImage(mode), ("tensor",)),
    "normalize": (lambda T, mean, std, inplace: T.Normalize(mean, std, inplace), ("tensor",)),
    "convert_image_dtype": (lambda T, dtype: T.ConvertImageDtype(dtype), ("tensor",)),
}

#: The same for `torchvision.transforms.v2.functional`, with v2's transforms. Those that
#: dispatch on their input's type (`_V2_DISPATCHED`) are answered by a kernel registered for
#: the stand-ins (`_register_v2_kernels`); the others by patching the module while probing.
_FUNCTIONAL_STEPS_V2 = {
    "resize": _FUNCTIONAL_STEPS["resize"],
    "center_crop": _FUNCTIONAL_STEPS["center_crop"],
    "horizontal_flip": _FUNCTIONAL_STEPS["hflip"],
    "hflip": _FUNCTIONAL_STEPS["hflip"],
    "vertical_flip": _FUNCTIONAL_STEPS["vflip"],
    "vflip": _FUNCTIONAL_STEPS["vflip"],
    # v2's `fill=None` pads with zeros, as `Pad`'s default does.
    "pad": (lambda T, padding, fill, padding_mode: T.Pad(padding, 0 if fill is None else fill, padding_mode), _ANY),
    "rgb_to_grayscale": _FUNCTIONAL_STEPS["rgb_to_grayscale"],
    "to_grayscale": (lambda T, num_output_channels: T.Grayscale(num_output_channels), _ANY),
    "normalize": _FUNCTIONAL_STEPS["normalize"],
    "to_dtype": (lambda T, dtype, scale: T.ToDtype(dtype, scale=scale), ("tensor",)),
    "to_image": (lambda T: T.ToImage(), _ANY),
    "pil_to_tensor": _FUNCTIONAL_STEPS["pil_to_tensor"],
    "to_pil_image": _FUNCTIONAL_STEPS["to_pil_image"],
    "to_tensor": (lambda T: T.ToTensor(), ("pil",)),
    "convert_image_dtype": _FUNCTIONAL_STEPS["convert_image_dtype"],
}
_V2_DISPATCHED = frozenset(
    {"resize", "center_crop", "horizontal_flip", "hflip", "vertical_flip", "vflip", "pad", "rgb_to_grayscale", "to_grayscale", "normalize", "to_dtype"}
)


def _register_v2_kernels() -> None:
    """Registers, in torchvision v2's table of kernels (by functional and input type), the
    answers for the stand-in image and what the Dataset's transform gave, once per process:
    a v2 functional dispatches on its input's type, so that `F.resize(image, 256)` reaches the
    answer however the code imported `F.resize`. Another thread never holds a stand-in, so no
    other call reaches these. A torchvision without that table keeps its own errors (the
    Dataset falls back, named)."""
    try:
        from torchvision.transforms.v2 import functional as F2
        from torchvision.transforms.v2.functional._utils import _KERNEL_REGISTRY
    except ImportError:  # pragma: no cover - a torchvision without v2's dispatch
        return
    for name in (*_V2_DISPATCHED, "crop", "resized_crop"):
        functional = getattr(F2, name, None)
        registry = _KERNEL_REGISTRY.get(functional)
        if registry is None or LazyImage in registry:
            continue
        if name == "crop":
            registry[LazyImage] = _functional_crop
        elif name == "resized_crop":
            registry[LazyImage] = functools.partial(_functional_resized_crop, v2=True)
        else:
            registry[LazyImage] = registry[Recorded] = _functional_step(name, functional, v2=True)


def _patch_tv_mask() -> None:
    """Has `tv_tensors.Mask(mask)` of a mask file's array (`_probe.MaskArray`), or of the mask
    file Pillow opened, give the `MaskArray` as a `tv_tensors.Mask` (`MaskArray.tv`) on the
    probing thread; any other data, and every other thread, makes the `Mask` as before."""
    from torchvision import tv_tensors

    _patch_tv(tv_tensors.Mask, (MaskArray, LazyImage), lambda data, *a, **k: _tv_mask(data, *a, **k))


def _patch_tv_image() -> None:
    """Has `tv_tensors.Image(image)` of the opened image (torchvision's `read_image` of it, or
    the PIL image Pillow opened) answer on the probing thread (`_tv_image`); any other data,
    and every other thread, makes the `Image` as before."""
    from torchvision import tv_tensors

    _patch_tv(tv_tensors.Image, (LazyImage,), lambda data, *a, **k: _tv_image(data, *a, **k))


def _patch_tv(cls: type, handles: tuple, answer) -> None:
    """Has `cls(data, ...)` (a `tv_tensors` type) give `answer(data, ...)` where `data` is
    one of the probe's `handles` (by exact type) on the probing thread; once per process."""
    if "_hpuload_probed" in cls.__dict__:
        return
    own = cls.__dict__["__new__"]
    own = own.__func__ if isinstance(own, staticmethod) else own

    def new(klass, data, *args, **kwargs):
        if getattr(_probing, "on", False) and klass is cls and type(data) in handles:
            return answer(data, *args, **kwargs)
        return own(klass, data, *args, **kwargs)

    cls.__new__ = staticmethod(new)
    cls._hpuload_probed = True


def _tv_image(data: LazyImage, dtype=None, device=None, requires_grad=None) -> LazyImage:
    """`tv_tensors.Image(image)` while probing: the uint8 `[C, H, W]` tensor the image is
    (torchvision's reader's, as it is: v2's transforms take a plain tensor alone in a sample
    as its image, so its steps run on it alike), or that of a PIL image, as torchvision's
    `pil_to_tensor` makes it (recorded as that call)."""
    if dtype is not None or device is not None or requires_grad:
        raise NeedsPixels("a tv_tensors.Image with a dtype, a device or requires_grad")
    if data.held == "unknown" or data.tensor in ("cv2", "array"):
        raise NeedsPixels(f"a tv_tensors.Image of {_form_name(data.form)}")
    if data.tensor is True or data.held == "tensor":
        return data
    from torchvision import transforms as T

    step = Applied(transform=T.PILToTensor(), call=_TV_IMAGE_CALL)
    out = LazyImage(data.path, tensor=data.tensor, rgb=data.rgb, turned=data.turned, before=(*data.before, step))
    out.held = "tensor"
    return out


#: The call `_tv_image` records for `tv_tensors.Image` of a PIL image.
_TV_IMAGE_CALL = "tv_tensors.Image(image)"


def beyond_tv_image(before: tuple) -> bool:
    """Whether the code did anything to its image before its transform but wrap it as a
    `tv_tensors.Image` (`_tv_image`)."""
    return any(not (isinstance(step, Applied) and step.call == _TV_IMAGE_CALL) for step in before)


def _tv_mask(data, dtype=None, device=None, requires_grad=None) -> MaskArray:
    """`tv_tensors.Mask(data)` while probing: a mask file's array made a tensor (of `dtype`),
    or the mask file opened by Pillow made one as torchvision's `pil_to_tensor` makes it,
    `[1, H, W]`."""
    import numpy as np

    if device is not None or requires_grad:
        raise NeedsPixels("a tv_tensors.Mask with a device or requires_grad")
    if type(data) is LazyImage:
        opened = data.tensor in (False, "array") and not data.rgb and not data.turned and data.before == ()
        read = data.tensor is True and not data.rgb and not data.turned and data.before == () and data.held is None
        if opened and mode_of(data.path) is None:
            # A file Pillow cannot read (a damaged mask): the loader names it as it reads it.
            mask = MaskArray(LazyImage(data.path), np.arange(256, dtype=np.uint8), channel=not data.tensor)
        elif read and _png_file(data.path) and mode_of(data.path) in ("L", None):
            # torchvision's `read_image` of a grey PNG mask: its bytes as stored, `[1, H, W]`
            # (a damaged file counts as one: the loader names it as it reads it).
            mask = MaskArray(LazyImage(data.path), torch.arange(256, dtype=torch.uint8), channel=True)
        else:
            mask = _mask_array(data)
            if mask is None:
                raise NeedsPixels(f"a tv_tensors.Mask of {data.path}, which is no mask of one byte a pixel as opened")
            mask = mask._with(mask.values, channel=True)
    else:
        mask = data
    if mask.composed or mask.tv:
        raise NeedsPixels("a tv_tensors.Mask of a mask a transform gave")
    values = mask.values if mask.kind == "tensor" else torch.from_numpy(np.ascontiguousarray(mask.values))
    return mask._with(values if dtype is None else values.to(dtype), tv=True)


def _png_file(path: str) -> bool:
    """Whether the file begins as a PNG does."""
    try:
        with open(path, "rb") as f:
            return f.read(8) == b"\x89PNG\r\n\x1a\n"
    except OSError:
        return False


def is_torchvision_transform(value) -> bool:
    """Whether `value` is one of torchvision's transforms (v1 or v2, a `Compose` or a step)."""
    return type(value).__module__.startswith("torchvision.transforms") and callable(value)


def _v2_call(original):
    """torchvision v2's `Transform.__call__` while probing: v2 passes inputs it does not know
    through untouched, so a v2 transform the Dataset's code calls on the stand-in image (one
    held where hpuload stands in for none: under a second name, in a global) would make the
    image look untransformed. It needs the pixels instead."""

    def call(self, *inputs, **kwargs):
        if getattr(_probing, "on", False) and any(_holds_stand_in(x) for x in (*inputs, *kwargs.values())):
            raise NeedsPixels(
                f"torchvision's {type(self).__name__} is called on the image outside the Dataset's transform "
                "attribute (hpuload stands in for one transform, found as `transform` or the one attribute "
                "holding a transform)"
            )
        return original(self, *inputs, **kwargs)

    call.__wrapped__ = original
    return call


def _holds_stand_in(x, depth: int = 0) -> bool:
    """Whether `x` is, or holds (in a tuple, list or dict, two levels deep), an image the
    probe stands in with."""
    if isinstance(x, (LazyImage, Recorded, _FileBytes)) or type(x) is MaskArray:
        return True
    if depth < 2 and isinstance(x, (tuple, list)):
        return any(_holds_stand_in(v, depth + 1) for v in x)
    if depth < 2 and isinstance(x, dict):
        return any(_holds_stand_in(v, depth + 1) for v in x.values())
    return False


def _path_of(fp) -> str:
    if isinstance(fp, (str, os.PathLike)):
        return os.fspath(fp)
    name = getattr(fp, "name", None)
    if isinstance(name, str) and os.path.isfile(name):
        return name  # an open file: `Image.open(open(path, "rb"))`
    raise NeedsPixels(f"an image opened from a {type(fp).__name__} (hpuload reads files by path)")


def _patched(original, lazy):
    def call(*args, **kwargs):
        if getattr(_probing, "on", False):
            return lazy(*args, **kwargs)
        return original(*args, **kwargs)

    call.__wrapped__ = original
    return call


def _pil_open(fp, mode="r", formats=None):
    if mode != "r":
        raise NeedsPixels(f"Image.open(..., mode={mode!r})")
    return LazyImage(_path_of(fp))


def _exif_transpose(image, *, in_place: bool = False):
    """`ImageOps.exif_transpose` of an opened image: the same image, turned upright by its EXIF
    orientation (Pillow removes the orientation it turned by, so a second call turns
    nothing). Any other image is the original function's."""
    from PIL import ImageOps

    if not isinstance(image, LazyImage):
        return ImageOps.exif_transpose.__wrapped__(image, in_place=in_place)
    if image.tensor:
        raise NeedsPixels("exif_transpose of the image read as a tensor")
    if _resizes(image.before) or _applies(image.before):
        raise NeedsPixels(
            "exif_transpose of the resized or transformed image (hpuload turns the file's image before anything else)"
        )
    if in_place:
        image.turned = True
        return None
    return LazyImage(image.path, rgb=image.rgb, turned=True, before=image.before)


#: OpenCV's flags and conversion codes: `cv2.IMREAD_COLOR` (BGR, the default),
#: `cv2.IMREAD_COLOR_RGB` (OpenCV 4.10 on), `cv2.IMREAD_GRAYSCALE`, `cv2.COLOR_BGR2RGB`
#: (which is `COLOR_RGB2BGR`), `cv2.COLOR_GRAY2RGB` (which is `COLOR_GRAY2BGR`).
_IMREAD_COLOR = 1
_IMREAD_COLOR_RGB = 256
_IMREAD_GRAYSCALE = 0
_COLOR_BGR2RGB = 4
_COLOR_GRAY2RGB = 8


def _cv2_imread(filename, flags=_IMREAD_COLOR):
    """`cv2.imread` of a path in colour (the file, as OpenCV's BGR or RGB array) or grey
    (`READ_GREY`: its `[H, W]` array; no channel order to keep)."""
    if flags not in (_IMREAD_COLOR, _IMREAD_COLOR_RGB, _IMREAD_GRAYSCALE):
        raise NeedsPixels(
            f"cv2.imread(..., {flags}) (hpuload reads as cv2.IMREAD_COLOR, IMREAD_COLOR_RGB and IMREAD_GRAYSCALE)"
        )
    if not isinstance(filename, (str, os.PathLike)):
        raise NeedsPixels(f"cv2.imread of a {type(filename).__name__}")
    if flags == _IMREAD_GRAYSCALE:
        return LazyImage(os.fspath(filename), tensor="cv2", rgb=True, before=(READ_GREY,))
    return LazyImage(os.fspath(filename), tensor="cv2", rgb=flags == _IMREAD_COLOR_RGB)


def _cv2_cvt_color(src, code, *args, **kwargs):
    """`cv2.cvtColor` of what `cv2.imread` read: `COLOR_BGR2RGB` (the same code as
    `COLOR_RGB2BGR`: it swaps the first and third channels) alone is answered, and
    `COLOR_GRAY2RGB` (`COLOR_GRAY2BGR`) of a grey read: its three equal channels."""
    if not isinstance(src, LazyImage):
        import cv2

        return cv2.cvtColor.__wrapped__(src, code, *args, **kwargs)
    if src.tensor == "cv2" and grey_read(src.before) == READ_GREY and code == _COLOR_GRAY2RGB and not (args or kwargs):
        again = tuple(READ_GREY_RGB if step == READ_GREY else step for step in src.before)
        return LazyImage(src.path, tensor="cv2", rgb=True, before=again)
    if src.tensor != "cv2" or code != _COLOR_BGR2RGB or args or kwargs or grey_read(src.before):
        raise NeedsPixels(f"cv2.cvtColor(..., {code}) of the image (hpuload answers COLOR_BGR2RGB of what cv2.imread read)")
    return LazyImage(src.path, tensor="cv2", rgb=not src.rgb, before=src.before)


def _cv2_resize(src, *args, **kwargs):
    """`cv2.resize` of what `cv2.imread` read (or of a NumPy array of an opened image) to one
    `dsize`, `(width, height)`, for every image: recorded, to run first, as albumentations'
    `Resize(height, width, interpolation)` (which is this call) would."""
    import cv2

    if not isinstance(src, LazyImage):
        return cv2.resize.__wrapped__(src, *args, **kwargs)
    given = dict(zip(("dsize", "dst", "fx", "fy", "interpolation"), args))
    if len(args) > 5 or set(given) & set(kwargs):
        raise NeedsPixels("cv2.resize of the image with arguments OpenCV would refuse")
    given.update(kwargs)
    unknown = set(given) - {"dsize", "dst", "fx", "fy", "interpolation"}
    if src.tensor not in ("cv2", "array") or unknown or given.get("dst") is not None or given.get("fx") or given.get("fy"):
        raise NeedsPixels("cv2.resize of the image by scale factors or into dst")
    grey = grey_read(src.before)
    if src.before != ((grey,) if grey else ()):
        raise NeedsPixels("cv2.resize of the image resized already")
    dsize = given.get("dsize")
    width, height = _fixed_size(tuple(dsize) if isinstance(dsize, (tuple, list)) else dsize)
    flag = int(given.get("interpolation", 1))  # cv2.INTER_LINEAR by default
    resized = Resized("cv2", width, height, flag)
    return LazyImage(src.path, tensor=src.tensor, rgb=src.rgb, turned=src.turned, before=(*src.before, resized))


def _from_array(obj, *args, **kwargs):
    """`Image.fromarray` of the NumPy array of an opened image, its values unchanged
    (`np.array(image)`, perhaps `.astype(np.uint8)`): that image again, as a PIL image
    (diffusers' textual inversion script turns its image into an array and back before
    resizing it)."""
    if args or kwargs:
        raise NeedsPixels("Image.fromarray of the image's array with a mode")
    if isinstance(obj, ArrayOut):
        obj = obj._opened("Image.fromarray")
    if obj.tensor != "array":
        raise NeedsPixels(f"Image.fromarray of {_form_name(obj.form)}")
    return LazyImage(obj.path, rgb=obj.rgb, turned=obj.turned, before=obj.before)


def _numpy_array_of(image: LazyImage, args: tuple, kwargs: dict) -> LazyImage:
    """`np.array(image)` or `np.asarray(image)` of an opened image: the uint8 `[H, W, C]`
    array of Pillow's pixels (`"array"`), or of what cv2.imread read (the same handle: a copy
    of it holds the same values). A dtype other than uint8, or any other argument that
    changes the values, needs pixels."""
    import numpy as np

    dtype = args[0] if args else kwargs.pop("dtype", None)
    if len(args) > 1 or set(kwargs) - {"copy", "order"}:
        raise NeedsPixels("a NumPy array of the image with arguments other than a dtype, copy or order")
    if dtype is not None and np.dtype(dtype) != np.uint8 and _mask_array(image) is None:
        raise NeedsPixels("a NumPy array of the image with a dtype other than uint8")
    image._pil_only("a NumPy array")
    if image.tensor == "cv2" or image.tensor == "array":
        return image
    mask = _mask_array(image)
    if mask is not None:
        # A mask's array (a grey or palette PNG): its values, which the code may change.
        return mask if dtype is None else mask.astype(dtype)
    if image.tensor:
        raise NeedsPixels("a NumPy array of the image read as a tensor")
    if GREY in image.before or GREY_RGB in image.before:
        raise NeedsPixels("a NumPy array of the image Pillow made grey (hpuload's arrays are RGB)")
    array = LazyImage(image.path, tensor="array", rgb=image.rgb, turned=image.turned, before=image.before)
    if _colour_read(array) is None:
        # It may be a colour mask, whose shape an `np.zeros` of the classes may take.
        _probing.masks = (_ArrayShape(array), *getattr(_probing, "masks", ())[:3])
    return array


class _NumpyArrays:
    """While entered (by any thread; counted): `numpy.array` and `numpy.asarray` answer an
    opened image (`_numpy_array_of`) on a probing thread, and are NumPy's own otherwise;
    they, `numpy.ascontiguousarray` and torch's `tensor`, `as_tensor` and `from_numpy` answer
    the transformed image (`ArrayOut`) there too, and torchvision's `RandomCrop.get_params`
    and `functional.crop` the opened one (`_crop_params`, `_functional_crop`). Patched only while a Dataset is probed, so
    that no other call of them pays for the check; code that bound them by name (`from numpy
    import asarray`) meets the handle, which needs pixels."""

    _depth = 0
    _originals: list = []

    def __enter__(self):
        import numpy as np
        import torchvision.transforms as T
        import torchvision.transforms.functional as TF
        import torchvision.transforms.v2.functional as F2

        with _patch_lock:
            if _NumpyArrays._depth == 0:
                for owner, name, answer in (
                    (np, "array", _numpy_answer),
                    (np, "asarray", _numpy_answer),
                    (np, "ascontiguousarray", _numpy_answer),
                    (np, "zeros", _probed_zeros),
                    (np, "zeros_like", _probed_zeros_like),
                    (torch, "tensor", _array_out_tensor),
                    (torch, "as_tensor", _array_out_tensor),
                    (torch, "from_numpy", _array_out_tensor),
                    (TF, "crop", _functional_crop),
                    (TF, "resized_crop", _functional_resized_crop),
                    *((TF, name, _functional_step(name, getattr(TF, name))) for name in _FUNCTIONAL_STEPS),
                    *(
                        (F2, name, _functional_step(name, getattr(F2, name), v2=True))
                        for name in _FUNCTIONAL_STEPS_V2
                        if name not in _V2_DISPATCHED and hasattr(F2, name)
                    ),
                ):
                    original = getattr(owner, name)
                    _NumpyArrays._originals.append((owner, name, original))
                    wraps = answer in (_probed_zeros, _probed_zeros_like)  # made of the original
                    setattr(owner, name, answer(original) if wraps else _probed_call(original, answer))
                # `RandomCrop.get_params` (a staticmethod, put back as it was). Patched only
                # while probing, as `functional.crop` is: TorchScript cannot compile either
                # stand-in, and a scripted transform compiles what they stand for.
                own = T.RandomCrop.__dict__["get_params"]
                _NumpyArrays._originals.append((T.RandomCrop, "get_params", own))
                T.RandomCrop.get_params = staticmethod(_probed_get_params(own.__func__))
                own = T.RandomResizedCrop.__dict__["get_params"]
                _NumpyArrays._originals.append((T.RandomResizedCrop, "get_params", own))
                T.RandomResizedCrop.get_params = staticmethod(_probed_resized_crop_params(own.__func__))
            _NumpyArrays._depth += 1
        return self

    def __exit__(self, *exc):
        with _patch_lock:
            _NumpyArrays._depth -= 1
            if _NumpyArrays._depth == 0:
                for owner, name, original in _NumpyArrays._originals:
                    setattr(owner, name, original)
                _NumpyArrays._originals.clear()
        return False


def _numpy_answer(image, *args, **kwargs):
    """`np.array`, `np.asarray` or `np.ascontiguousarray` of an opened image or of the
    transformed one (the same array, cast to a `dtype` given)."""
    if isinstance(image, Recorded) and not isinstance(image, ArrayOut):
        # The array of what a torchvision transform gave: its PIL image's uint8 `[H, W, C]`
        # pixels (the loader checks that the transform gives an RGB PIL image).
        given = image.image
        if given.tensor or GREY in given.before or GREY_RGB in given.before or grey_read(given.before):
            raise NeedsPixels(f"a NumPy array of what the transform made of {_form_name(given.form)} or of a grey image")
        image = ArrayOut(given, Output("numpy", "hwc", "u8", False, "u8", of_pil=True))
    if type(image) is MaskArray:
        # The mask's array again (`np.array(mask, dtype=np.float32)`): cast as NumPy casts it.
        dtype = args[0] if args else kwargs.pop("dtype", None)
        if len(args) > 1 or set(kwargs) - {"copy", "order"} or image.kind != "numpy":
            raise NeedsPixels("a NumPy array of the mask with arguments other than a dtype, copy or order")
        return image.copy() if dtype is None else image.astype(dtype)
    if not isinstance(image, ArrayOut):
        import numpy as np

        dtype = args[0] if args else kwargs.get("dtype")
        if (
            len(args) <= 1
            and dtype is not None
            and image.tensor is not True
            and np.dtype(dtype) != np.uint8
            and _mask_array(image) is None
        ):
            # The image's uint8 array, cast as NumPy casts it.
            rest = {k: v for k, v in kwargs.items() if k != "dtype"}
            return ArrayOut.of(_numpy_array_of(image, (), rest)).astype(dtype)
        return _numpy_array_of(image, args, kwargs)
    dtype = args[0] if args else kwargs.pop("dtype", None)
    if len(args) > 1 or set(kwargs) - {"copy", "order"}:
        raise NeedsPixels("a NumPy array of the transformed image with arguments other than a dtype, copy or order")
    return image if dtype is None else image.astype(dtype)


class ZerosArray:
    """`np.zeros((H, W), dtype)` while probing, where `(H, W)` is the shape of a mask the
    Dataset's code holds (`MaskArray`): an array of zeros (every use of it is NumPy's, on
    that array) until the code sets values where a comparison of the mask holds
    (`out[mask == v] = i`, a mask's values mapped to class indices: milesial's U-Net
    `BasicDataset`). From then on it is that mask with each byte's value so set (`mask`),
    and follows `MaskArray`'s steps alone."""

    __slots__ = ("array", "mask")

    def __init__(self, array):
        self.array = array
        #: The mask it became, or None while it is the array of zeros.
        self.mask = None

    def _now(self):
        return self.array if self.mask is None else self.mask

    @property
    def __class__(self):
        return self._now().__class__

    def __setitem__(self, key, value) -> None:
        import numpy as np

        whole = key is Ellipsis or (type(key) is slice and key == slice(None))
        if type(key) is MaskArray and self.mask is None:
            if key.channel or key.shape != self.array.shape or self.array.any():
                raise NeedsPixels("values set in an array where a comparison of a mask of another shape holds")
            self.mask = MaskArray(key.image, np.zeros(256, self.array.dtype), key.composed)
        elif whole and type(value) is MaskArray and self.mask is None:
            # The mask's values copied in (`out[:] = mask`), cast as NumPy casts them.
            if value.kind != "numpy" or value.channel or value.shape != self.array.shape:
                raise NeedsPixels("an array set to a mask of another shape or kind")
            self.mask = MaskArray(value.image, value.values.astype(self.array.dtype), value.composed)
            return
        if self.mask is not None:
            self.mask[key] = value
            return
        self.array[key] = _unwrapped(value)

    def __getitem__(self, key):
        return self._now()[_unwrapped(key)]

    def __getattr__(self, name: str):
        return getattr(self._now(), name)

    def __array__(self, *args, **kwargs):
        if self.mask is not None:
            return self.mask.__array__()
        return self.array.__array__(*args, **kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if self.mask is not None:
            return self.mask.__array_ufunc__(ufunc, method, *(_unwrapped(x) for x in inputs), **kwargs)
        return getattr(ufunc, method)(*(_unwrapped(x) for x in inputs), **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if self.mask is not None:
            return self.mask.__array_function__(func, types, tuple(_unwrapped(x) for x in args), kwargs)
        return func(*(_unwrapped(x) for x in args), **kwargs)

    def __len__(self):
        return len(self._now())

    def __iter__(self):
        return iter(self._now())

    def __bool__(self):
        return bool(self._now())

    def __repr__(self):
        return repr(self.array) if self.mask is None else f"<the mask of {self.mask.image.path}, its values set>"


def _zeros_op(name: str):
    def op(self, *args):
        return getattr(self._now(), name)(*(_unwrapped(x) for x in args))

    op.__name__ = name
    return op


for _name in (
    "__add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __floordiv__ __mod__ __pow__ "
    "__and__ __rand__ __or__ __ror__ __xor__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __invert__ __neg__ __abs__ "
    "__iadd__ __isub__ __imul__ __itruediv__ __ifloordiv__ __iand__ __ior__"
).split():
    setattr(ZerosArray, _name, _zeros_op(_name))
ZerosArray.__hash__ = None


def _unwrapped(value):
    """What a `ZerosArray` stands for now (its zeros, or its mask); anything else as it is."""
    return value._now() if type(value) is ZerosArray else value


def _probed_zeros(original):
    """`np.zeros`, which on a probing thread gives a `ZerosArray` where the shape asked is a
    mask's the Dataset's code made an array of lately (`_probing.masks`)."""

    def zeros(shape, dtype=float, order="C", **kwargs):
        made = original(shape, dtype, order, **kwargs)
        if not getattr(_probing, "on", False) or kwargs or made.ndim != 2:
            return made
        for mask in getattr(_probing, "masks", ()):
            try:
                if mask.shape == made.shape:
                    return ZerosArray(made)
            except NeedsPixels:
                continue
        return made

    zeros.__wrapped__ = original
    return zeros


def _probed_zeros_like(original):
    """`np.zeros_like`, which on a probing thread gives a `ZerosArray` of a mask's shape and
    dtype (or the one asked) for a mask the Dataset's code holds (a `MaskArray`, OpenCV's grey
    read of a mask file): segmentation_models_pytorch's CamVid example remaps its classes in
    `np.zeros_like(mask)`."""
    import numpy as np

    def zeros_like(a, dtype=None, order="K", subok=True, shape=None, **kwargs):
        if getattr(_probing, "on", False) and not kwargs and shape is None:
            mask = a._cv2_mask() if type(a) is LazyImage else a
            if type(mask) is MaskArray:
                return ZerosArray(np.zeros(mask.shape, mask.dtype if dtype is None else dtype))
        return original(_unwrapped(a), dtype, order, subok, shape, **kwargs)

    zeros_like.__wrapped__ = original
    return zeros_like


def _probed_call(original, answer):
    def call(*args, **kwargs):
        if args and type(args[0]) is ZerosArray:
            args = (args[0]._now(), *args[1:])
        answered = args and (
            isinstance(args[0], (LazyImage, ArrayOut))
            or type(args[0]) is MaskArray
            or isinstance(args[0], Recorded) and args[0].torchvision
        )
        if answered and getattr(_probing, "on", False):
            return answer(*args, **kwargs)
        return original(*args, **kwargs)

    call.__wrapped__ = original
    return call


def _read_file(path):
    return _FileBytes(_path_of(path))


def _decode_image(data, mode=None, apply_exif_orientation=False):
    # torchvision's `decode_image` takes the file's bytes (`read_file`) or its path.
    if isinstance(data, (str, os.PathLike)):
        data = _FileBytes(os.fspath(data))
    if not isinstance(data, _FileBytes):
        raise NeedsPixels(f"decode_image of a {type(data).__name__} (hpuload reads files by path)")
    return _read_as_tensor(data.path, mode, apply_exif_orientation)


def _read_image(path, mode=None, apply_exif_orientation=False):
    return _read_as_tensor(_path_of(path), mode, apply_exif_orientation)


def _read_as_tensor(path: str, mode, apply_exif_orientation) -> LazyImage:
    """What torchvision's reader gives: the file as a uint8 tensor, in `mode`, turned upright
    by the orientation torchvision reads when told to (`turned="torchvision"`: it reads it
    from other places than Pillow)."""
    if not isinstance(apply_exif_orientation, bool):
        raise NeedsPixels(f"apply_exif_orientation={apply_exif_orientation!r}")
    turned = "torchvision" if apply_exif_orientation else False
    if _mode_name(mode) == "GRAY":
        return LazyImage(path, tensor=True, rgb=True, turned=turned, before=(READ_GREY,))
    return LazyImage(path, tensor=True, rgb=_rgb_mode(mode), turned=turned)


def _rgb_mode(mode) -> bool:
    """Whether torchvision's reader in `mode` gives RGB whatever the file holds (`RGB`);
    `UNCHANGED` (the default) gives the file's own channels."""
    name = _mode_name(mode)
    if name not in (None, "RGB", "UNCHANGED"):
        raise NeedsPixels(f"an image read in mode {name} (hpuload reads in RGB, UNCHANGED and GRAY modes)")
    return name == "RGB"


def _mode_name(mode) -> str | None:
    """The name of a torchvision `ImageReadMode` (or of the string naming one)."""
    name = getattr(mode, "name", mode)
    if isinstance(name, str):
        name = name.upper()  # torchvision takes a mode's name in any case
    return name


def _sniffed(path: str) -> str | None:
    """`header_mode` of a JPEG or PNG file, from its headers alone."""
    facts = _file_facts(path)
    return facts and facts[0]


def _file_facts(path: str) -> tuple[str | None, int, int] | None:
    """`header_facts` of the file at `path`; None where it cannot be read."""
    try:
        with open(path, "rb") as f:

            def read(offset: int) -> bytes:
                f.seek(offset)
                return f.read(4096)

            return header_facts(read)
    except OSError:
        return None


def header_mode(read) -> str | None:
    """The mode Pillow opens a JPEG or PNG image in ("L", "RGB", "CMYK", "P", ...: a JPEG's
    frame header gives its number of components, a PNG's IHDR its colour type), from its
    headers, without Pillow; None for any other image and for one this cannot read.
    `read(offset)` gives the image's bytes from `offset` on (a few KiB, or fewer at its
    end): the first read, then only reads of the next segment headers."""
    facts = header_facts(read)
    return facts and facts[0]


def header_facts(read) -> tuple[str | None, int, int] | None:
    """`(mode, width, height)` of a JPEG or PNG image from its headers (the mode as
    `header_mode`); None for any other image and for one this cannot read."""
    head = read(0)
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" and len(head) >= 26:
        width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
        depth, colour = head[24], head[25]
        if colour == 0:
            return {1: "1", 16: "I;16"}.get(depth, "L"), width, height
        return {2: "RGB", 3: "P", 4: "LA", 6: "RGBA"}.get(colour), width, height
    if head[:2] != b"\xff\xd8":
        return None
    base, k = 0, 2  # `head` holds the image's bytes from `base`; `k` is relative to it
    while True:
        if k + 10 > len(head):  # the next segment's header lies past what was read
            base, k = base + k, 0
            head = read(base)
            if len(head) < 10:  # no room left for a frame header
                return None
        if head[k] != 0xFF:
            return None
        marker = head[k + 1]
        if marker == 0xFF:  # fill byte
            k += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:
            k += 2
            continue
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
            if k + 10 > len(head):
                return None
            height, width = int.from_bytes(head[k + 5 : k + 7], "big"), int.from_bytes(head[k + 7 : k + 9], "big")
            return {1: "L", 3: "RGB", 4: "CMYK"}.get(head[k + 9]), width, height
        length = int.from_bytes(head[k + 2 : k + 4], "big")
        if marker in (0xD9, 0xDA) or length < 2:
            return None
        k += 2 + length


def mode_of(path: str | None = None, data=None) -> str | None:
    """The mode Pillow opens an image in, from the file at `path` or the bytes `data` (any
    buffer): its header where `header_mode` reads it (JPEG, PNG), else Pillow's lazy open
    (which reads headers, not pixels: WebP, TIFF, ...). None where neither can read it (the
    loader names such an image when it reads it)."""
    import io

    from PIL import Image

    if data is None:
        memo = getattr(_sizes, "memo", None)
        if memo is None:
            return _mode_of_file(path)
        key = ("mode", path)
        if key not in memo:
            memo[key] = _mode_of_file(path)
        return memo[key]
    view = memoryview(data)
    mode = header_mode(lambda offset: bytes(view[offset : offset + 4096]))
    if mode is None:
        try:
            with _pillows_open(Image)(io.BytesIO(bytes(data))) as im:
                mode = im.mode
        except Exception:
            return None
    return mode


def _mode_of_file(path: str) -> str | None:
    """`mode_of` the file at `path`, read now."""
    from PIL import Image

    mode = _sniffed(path)
    if mode is None:
        try:
            with _pillows_open(Image)(path) as im:
                mode = im.mode
        except Exception:
            return None
    return mode


_sizes = threading.local()


@contextlib.contextmanager
def _sizes_memo():
    """While entered (on this thread): `size_of` and `mode_of` read each file's header once (a
    batch's runs of a Dataset's code, and a probe's, ask a file's size and mode a few times
    each)."""
    outer = getattr(_sizes, "memo", None)
    _sizes.memo = {} if outer is None else outer
    try:
        yield
    finally:
        _sizes.memo = outer


def size_of(path: str) -> tuple[int, int] | None:
    """`(width, height)` of the image at `path` as stored: from its headers where
    `header_facts` reads them (JPEG, PNG), else by Pillow's lazy open; None where neither
    can read it (the loader names such an image when it reads it)."""
    memo = getattr(_sizes, "memo", None)
    if memo is None:
        return _size_of(path)
    if path not in memo:
        memo[path] = _size_of(path)
    return memo[path]


def _size_of(path: str) -> tuple[int, int] | None:
    from PIL import Image

    facts = _file_facts(path)
    if facts is not None and facts[1] and facts[2]:
        return facts[1], facts[2]
    try:
        with _pillows_open(Image)(path) as im:
            return im.size
    except Exception:
        return None


#: The directories whose listings one pass of the Dataset's code keeps (`_listing`); a
#: class that globs in more folders than this in one pass globs in the others as it would.
_MOST_LISTINGS = 256


def _listing(directory: str) -> "tuple[list[str], list[tuple[str, int]]] | None":
    """The names in `directory` in the order `os.scandir` gives them, and `(name, position)`
    sorted by name (for a prefix's names), while a pass of the Dataset's code keeps
    (`_sizes_memo`: a probe of every index, a batch's runs): listed once in the pass, and again
    whenever the directory's stat changes (an entry added, removed or renamed changes its
    times). None outside such a pass, for what is no directory or cannot be listed, and
    past `_MOST_LISTINGS` directories."""
    import stat

    memo = getattr(_sizes, "memo", None)
    if memo is None:
        return None
    try:
        st = os.stat(directory)
    except (OSError, ValueError):
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    stamp = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
    key = ("listing", directory)
    held = memo.get(key)
    if held is not None and held[0] == stamp:
        return held[1]
    if held is None and memo.get(("listings",), 0) >= _MOST_LISTINGS:
        return None
    try:
        with os.scandir(directory) as entries:
            names = [entry.name for entry in entries]
    except OSError:
        return None
    listed = (names, sorted(zip(names, range(len(names)))))
    memo[key] = (stamp, listed)
    if held is None:
        memo[("listings",)] = memo.get(("listings",), 0) + 1
    return listed


def _magic_at(pattern: str) -> int:
    """Where `pattern`'s first wildcard of `fnmatch`'s (`*`, `?`, `[`) is; -1 where none."""
    found = [k for k in (pattern.find("*"), pattern.find("?"), pattern.find("[")) if k >= 0]
    return min(found) if found else -1


def _listed_matches(directory: str, pattern: str, hidden: bool) -> list[str] | None:
    """The names in `directory` that `fnmatch.fnmatchcase(name, pattern)` takes, in the
    directory's order (`os.scandir`'s), from its kept listing (`_listing`); names starting
    with a dot only where `hidden`. None where no listing is kept, and for a pattern of
    several components or without a wildcard (the caller globs as it would)."""
    import bisect
    import fnmatch

    if os.name != "posix" or not isinstance(pattern, str) or "/" in pattern or "**" in pattern:
        return None
    at = _magic_at(pattern)
    if at < 0:
        return None
    listed = _listing(directory)
    if listed is None:
        return None
    names, ordered = listed
    prefix, rest = pattern[:at], pattern[at:]
    found = []
    for k in range(bisect.bisect_left(ordered, (prefix,)), len(ordered)):
        name, position = ordered[k]
        if not name.startswith(prefix):
            break
        # `prefix*` takes every name that starts with it: no pattern to compile.
        if (rest == "*" or fnmatch.fnmatchcase(name, pattern)) and (hidden or not name.startswith(".")):
            found.append(position)
    return [names[k] for k in sorted(found)]


def _probed_path_glob(original):
    """`pathlib.Path.glob`, which while the Dataset's code is probed or run for a batch
    (`_listing`) matches a pattern of one component (`name + ".*"`, milesial's U-Net) against
    its directory's kept listing: the same paths in the same order, without listing the
    folder and compiling the pattern on every call. Anything else is the original's."""

    def glob(self, pattern, *args, **kwargs):
        if getattr(_probing, "on", False) and not args and not kwargs:
            names = _listed_matches(os.fspath(self), pattern, hidden=True)
            if names is not None:
                sys.audit("pathlib.Path.glob", self, pattern)
                return (self / name for name in names)
        return original(self, pattern, *args, **kwargs)

    glob.__wrapped__ = original
    return glob


def _probed_glob(original):
    """`glob.glob` as `_probed_path_glob`, for a path whose folder holds no wildcard and
    whose last component does (`glob(folder + name + ".*")`): `os.path.join(folder, name)`
    of the matching names, in the folder's order, names starting with a dot only for a
    pattern that does (as `glob` hides them)."""

    def glob(pathname, *, root_dir=None, dir_fd=None, recursive=False, include_hidden=False):
        if getattr(_probing, "on", False) and root_dir is None and dir_fd is None and not include_hidden:
            if isinstance(pathname, str):
                folder, base = os.path.split(pathname)
                if folder and _magic_at(folder) < 0:
                    names = _listed_matches(folder, base, hidden=base.startswith("."))
                    if names is not None:
                        sys.audit("glob.glob", pathname, recursive)
                        sys.audit("glob.glob/2", pathname, recursive, root_dir, dir_fd)
                        return [os.path.join(folder, name) for name in names]
        more = {"include_hidden": include_hidden} if include_hidden else {}
        return original(pathname, root_dir=root_dir, dir_fd=dir_fd, recursive=recursive, **more)

    glob.__wrapped__ = original
    return glob


def _pillows_orientation(path: str) -> int | None:
    """The EXIF orientation Pillow's `exif_transpose` turns a JPEG file by (1 for none; from
    its headers up to the first scan), None for any other file."""
    from . import _hpuload
    from .torch import _jpeg_head

    try:
        with open(path, "rb") as f:
            if f.read(2) != b"\xff\xd8":
                return None
            f.seek(0)
            return _hpuload.exif_orientation(_jpeg_head(f), "pillow")
    except OSError:
        return None


def _pillows_open(image_module):
    """Pillow's own `Image.open`, not the probe's (`install` patches it, and on a probing
    thread it gives a `LazyImage`, whose `.mode` and `.size` come back here)."""
    return getattr(image_module.open, "__wrapped__", image_module.open)


def not_rgb(paths, also: tuple = ()) -> tuple[str, str] | None:
    """The first of `paths` that Pillow opens in another mode than RGB (a grey, CMYK, palette
    or transparent image) or those `also` names, with that mode; None when every one is. JPEG
    and PNG headers are read directly (about 15 µs a file), anything else by Pillow's lazy
    open."""
    for path in paths:
        mode = mode_of(path)
        if mode is not None and mode != "RGB" and mode not in also:
            return path, mode
    return None


def sixteen_bit_png(paths) -> str | None:
    """The first of `paths` that is a PNG of 16 bits a sample (which torchvision's readers
    give as a uint16 tensor of [0, 65535], while Pillow opens it at 8 bits or in its own
    `I;16` mode); None when there is none. Reads each file's first 26 bytes (the signature
    and IHDR)."""
    for path in paths:
        try:
            with open(path, "rb") as f:
                head = f.read(26)
        except OSError:
            continue  # the loader names a file it cannot read when it reads it
        if sixteen_bit(head):
            return path
    return None


#: The weights libpng's grey of a colour PNG is made with (`png_set_rgb_to_gray` without
#: gamma, truncated), as readers set them: OpenCV's (`0.299, 0.587` in libpng's fixed
#: point), torchvision's reader's (libpng's own for its build), and libpng's documented default.
PNG_GREY_WEIGHTS = ((9797, 19234, 3737), (9794, 19234, 3740), (6968, 23434, 2366))

#: The chunks before a PNG's data with which libpng computes a grey otherwise (in linear
#: light for a gamma, from the primaries for chromaticities) or keeps a transparent colour.
PNG_GREY_REFUSED = (b"gAMA", b"sRGB", b"iCCP", b"cHRM", b"tRNS")


@functools.lru_cache(maxsize=None)
def png_grey_weights(reader: str) -> tuple | None:
    """The weights (`PNG_GREY_WEIGHTS`) the installed `reader` ("cv2": `cv2.imread(path,
    IMREAD_GRAYSCALE)`; "torchvision": its `decode_image(..., ImageReadMode.GRAY)`) makes a
    colour PNG's grey with, found by reading a random 8-bit RGB PNG once per process; None
    when none of them gives its bytes (its colour PNGs then go to torch's loader, named)."""
    import io

    import numpy as np
    from PIL import Image

    rgb = np.random.default_rng(5).integers(0, 256, (23, 37, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(rgb, "RGB").save(buf, "PNG")
    data = buf.getvalue()
    try:
        if reader == "cv2":
            import cv2

            got = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_GRAYSCALE)
        else:
            import torch
            from torchvision.io import ImageReadMode, decode_image

            tensor = torch.frombuffer(bytearray(data), dtype=torch.uint8)
            got = decode_image(tensor, ImageReadMode.GRAY)[0].numpy()
    except Exception:  # a reader that cannot: no weights
        return None
    wide = rgb.astype(np.int64)
    for weights in PNG_GREY_WEIGHTS:
        grey = (wide @ np.array(weights, np.int64)) >> 15
        if got is not None and got.shape == grey.shape and np.array_equal(got, grey):
            return weights
    return None


def png_chunk_before_data(data: bytes, names) -> bytes | None:
    """The first chunk among `names` a PNG's bytes `data` carry before their first `IDAT`,
    or None."""
    at = 8
    while at + 8 <= len(data):
        length, name = int.from_bytes(data[at : at + 4], "big"), bytes(data[at + 4 : at + 8])
        if name == b"IDAT":
            return None
        if name in names:
            return name
        at += 12 + length
    return None


def sixteen_bit(head: bytes) -> bool:
    """Whether `head`, a file's first bytes (26 at least), is a PNG of 16 bits a sample."""
    return len(head) >= 26 and head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" and head[24] == 16


#: Video readers a Dataset class may open, by module and name: while probing, opening one
#: stops the probe with its name (hpuload learns image files from such a class), before any
#: video is decoded. Classes are patched in place (`_patch_new`), so that a name imported from
#: the module (`from decord import VideoReader`) is covered too; patched once the user's code
#: has imported the module, or as it imports it (`_PatchOnImport`: a reader imported inside
#: `__getitem__`).
_VIDEO_READERS = (
    ("decord", "VideoReader"),
    ("decord.video_reader", "VideoReader"),
    ("torchcodec.decoders", "VideoDecoder"),
    ("torchvision.io", "read_video"),
    ("torchvision.io", "VideoReader"),
    ("av", "open"),
)

#: decord's reader class, named `decord.VideoReader` whichever module patched it first.
_DECORD = ("decord", "decord.video_reader")

#: The readers that hpuload's own answers on a thread that is `answering`, by module: the
#: class of `_reader` that does.
_ANSWERED = {
    "decord": "AnsweredDecord",
    "decord.video_reader": "AnsweredDecord",
    "torchcodec.decoders": "AnsweredTorchcodec",
}

#: Set on the threads that run a Dataset's `__getitem__` for `hpuload.torch.DataLoader` when
#: it handed the dataset to torch's loader for reading videos with decord or torchcodec:
#: `decord.VideoReader` and torchcodec's `VideoDecoder` make hpuload's readers
#: (`_ANSWERED`). `bypass` while the reader's own is being made.
_answering = threading.local()


class ReadsVideo(NeedsPixels):
    """The Dataset's code opened a video reader while probed; `reader` names it
    (`module.name`)."""

    def __init__(self, message: str, reader: str):
        super().__init__(message)
        self.reader = reader


def _video_reader(name: str):
    def lazy(*args, **kwargs):
        raise ReadsVideo(
            f"it reads a video with {name}: hpuload learns a Dataset class of your own when it opens "
            "image files; videos run natively under torchvision's Kinetics, UCF101 and HMDB51 or "
            "hpuload.VideoFolder / VideoManifest",
            name,
        )

    return lazy


def _install_video_readers() -> None:
    for module, name in _VIDEO_READERS:
        owner = sys.modules.get(module)
        target = getattr(owner, name, None) if owner is not None else None
        if target is None:
            continue
        # decord's class by the name its users write, whichever module patched it first.
        lazy = _video_reader(f"{'decord' if module in _DECORD else module}.{name}")
        if isinstance(target, type):
            answer = _ANSWERED.get(module)
            _patch_new(target, lazy, _answer(answer) if answer else None)
        elif callable(target) and getattr(target, "__wrapped__", None) is None:
            setattr(owner, name, _patched(target, lazy))


class _PatchOnImport:
    """A finder on `sys.meta_path` that patches the video readers as soon as their module is
    imported, for code that imports decord (say) inside `__getitem__`: the module is found
    by the other finders and executed by its own loader, then `_install_video_readers`
    runs."""

    modules = frozenset(m for m, _ in _VIDEO_READERS) | {"torchcodec"}

    def find_spec(self, name, path=None, target=None):
        if name not in self.modules or getattr(_finding, "on", False):
            return None
        import importlib.util

        _finding.on = True
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        finally:
            _finding.on = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _ThenPatch(spec.loader)
        return spec


class _ThenPatch:
    """A module's own loader, then `_install_video_readers`."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        with _patch_lock:
            _install_video_readers()

    def __getattr__(self, name):
        return getattr(self.loader, name)


_finding = threading.local()


def _patch_new(cls: type, lazy, answer=None) -> None:
    """Has making a `cls` on the probing thread call `lazy` (which raises) before any
    instance exists: at `__new__`, so a half-made reader's `__del__` never runs. With
    `answer`, making one on an `answering` thread returns `answer(cls, ...)` instead (not a
    `cls`, so its `__init__` does not run)."""
    if "_hpuload_probed" in cls.__dict__:
        return
    own = cls.__dict__.get("__new__")
    own = own.__func__ if isinstance(own, staticmethod) else own

    def new(klass, *args, **kwargs):
        if getattr(_probing, "on", False):
            lazy()
        if answer is not None and getattr(_answering, "on", False) and not getattr(_answering, "bypass", False):
            return answer(klass, *args, **kwargs)
        if own is not None:
            return own(klass, *args, **kwargs)
        parent = super(cls, klass).__new__
        # object.__new__ takes no arguments when the class has its own __init__.
        return parent(klass) if parent is object.__new__ else parent(klass, *args, **kwargs)

    try:
        cls.__new__ = staticmethod(new)
        cls._hpuload_probed = True
    except TypeError:  # pragma: no cover - a C extension type
        pass


def _answer(kind: str):
    """Makes `_reader.<kind>` for the patched class's `klass(*args, **kwargs)`, with the
    class's own reader made on first need (its `__new__` bypassed)."""

    def answer(klass, *args, **kwargs):
        from . import _reader

        def own():
            _answering.bypass = True
            try:
                return klass(*args, **kwargs)
            finally:
                _answering.bypass = False

        return getattr(_reader, kind)(own, *args, **kwargs)

    return answer


class answering:
    """While entered (on this thread): decord's and torchcodec's readers make hpuload's
    (`_ANSWERED`). Re-entrant."""

    def __enter__(self):
        install()
        self._was = getattr(_answering, "on", False)
        _answering.on = True
        return self

    def __exit__(self, *exc):
        _answering.on = self._was


def install() -> None:
    """Patches the image-opening calls once per process; they behave as before except on a
    thread that is probing. The video readers the user's code has imported are patched too
    (`_VIDEO_READERS`), and those it imports later as it imports them (`_PatchOnImport`)."""
    with _patch_lock:
        if not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
            sys.meta_path.insert(0, _PatchOnImport())
        _install_video_readers()
        from PIL import Image

        if getattr(Image.open, "__wrapped__", None) is None:
            Image.open = _patched(Image.open, _pil_open)
        from PIL import ImageOps

        if getattr(ImageOps.exif_transpose, "__wrapped__", None) is None:
            ImageOps.exif_transpose = _patched(ImageOps.exif_transpose, _exif_transpose)
        if getattr(Image.fromarray, "__wrapped__", None) is None:
            Image.fromarray = _probed_call(Image.fromarray, _from_array)
        import glob
        import pathlib

        if getattr(pathlib.Path.glob, "__wrapped__", None) is None:
            pathlib.Path.glob = _probed_path_glob(pathlib.Path.glob)
        if getattr(glob.glob, "__wrapped__", None) is None:
            glob.glob = _probed_glob(glob.glob)
        cv2 = sys.modules.get("cv2")
        # OpenCV, when the user's code has imported it (hpuload does not import it itself).
        if cv2 is not None and hasattr(cv2, "imread") and getattr(cv2.imread, "__wrapped__", None) is None:
            cv2.imread = _patched(cv2.imread, _cv2_imread)
            cv2.cvtColor = _patched(cv2.cvtColor, _cv2_cvt_color)
            cv2.resize = _patched(cv2.resize, _cv2_resize)
        try:
            import torchvision.io as tio
            from torchvision.transforms import v2
        except ImportError:  # pragma: no cover - torchvision comes with the fast path
            return
        if getattr(v2.Transform.__call__, "__wrapped__", None) is None:
            v2.Transform.__call__ = _v2_call(v2.Transform.__call__)
        _register_v2_kernels()
        _patch_tv_mask()
        _patch_tv_image()
        for name, lazy in (("read_file", _read_file), ("decode_image", _decode_image), ("read_image", _read_image)):
            original = getattr(tio, name, None)
            if original is not None and getattr(original, "__wrapped__", None) is None:
                setattr(tio, name, _patched(original, lazy))


#: Packages whose modules keep the original opening calls (their own code calls them the
#: same way either way; only the user's code is rebound).
_LIBRARIES = ("torch", "torchvision", "PIL", "numpy", "builtins", "typing", "functools", "hpuload")


def _bind_in_user_code(dataset) -> None:
    """Rebinds, in the user's code that `dataset.__getitem__` can reach, the names bound to
    the opening calls `install` patched (`from torchvision.io import read_image`, as the
    PyTorch tutorial's Dataset does, or `from PIL.Image import open`): such a name holds the
    function itself, not the module's attribute the patch replaced. The rebound name holds
    the patched call, which is the original on every thread that is not probing. Reached:
    the module globals of the functions of the dataset's classes and of the functions held
    by the dataset, and one step further, of the functions their code names (a global, a
    closure's, or an attribute of either: `helpers.load`)."""
    patched = {}
    for fn in _installed():
        original = getattr(fn, "__wrapped__", None)
        if original is not None:
            patched[id(original)] = (original, fn)
    if not patched:
        return

    def functions_of(value):
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        elif isinstance(value, property):
            return [f for f in (value.fget, value.fset) if f is not None]
        if isinstance(value, types.MethodType):
            value = value.__func__
        return [value] if isinstance(value, types.FunctionType) else []

    found: list = []
    for cls in type(dataset).__mro__:
        if cls.__module__.split(".")[0] in _LIBRARIES:
            continue
        for value in vars(cls).values():
            found += functions_of(value)
    for value in list(getattr(dataset, "__dict__", {}).values()):
        found += functions_of(value)
    seen: dict[int, dict] = {}
    for depth in range(2):
        named = []
        for fn in found:
            g = fn.__globals__
            if g.get("__name__", "").split(".")[0] in _LIBRARIES:
                continue
            seen.setdefault(id(g), g)
            if depth == 0:
                # What the function's code names: a global, a closure's cell, or an
                # attribute of either (`helpers.load`).
                names = fn.__code__.co_names
                held = [g.get(name) for name in names] + [c.cell_contents for c in fn.__closure__ or () if _full(c)]
                for value in held:
                    named += functions_of(value)
                    if isinstance(value, types.ModuleType):
                        with warnings.catch_warnings():  # a module's deprecated names (NumPy's `np.str`) warn when read
                            warnings.simplefilter("ignore")
                            attributes = [getattr(value, name, None) for name in names]
                        named += [f for a in attributes for f in functions_of(a)]
        found = named
    with _patch_lock:
        for g in seen.values():
            for name, value in list(g.items()):
                hit = patched.get(id(value))
                if hit is not None and hit[0] is value:
                    g[name] = hit[1]


def _full(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # a cell not yet filled
        return False
    return True


def _installed() -> list:
    """The patched opening calls `install` put in place."""
    from PIL import Image, ImageOps

    import glob

    calls = [Image.open, ImageOps.exif_transpose, Image.fromarray, glob.glob]
    cv2 = sys.modules.get("cv2")
    if cv2 is not None:
        calls += [getattr(cv2, "imread", None), getattr(cv2, "cvtColor", None), getattr(cv2, "resize", None)]
    try:
        import torchvision.io as tio
    except ImportError:  # pragma: no cover - torchvision comes with the fast path
        return calls
    return calls + [getattr(tio, name, None) for name in ("read_file", "decode_image", "read_image")]


def _user_line(error: BaseException, own: str | None = None) -> str:
    """`file:line (code)` of the innermost frame outside this module where `error` rose;
    where that is in a library, the innermost line of the file `own` (the Dataset class's)
    first, then `in` the library's."""
    here = os.path.abspath(__file__)
    frames = [f for f in traceback.extract_tb(error.__traceback__) if os.path.abspath(f.filename) != here]
    if not frames:
        return "?"

    def line(f) -> str:
        return f"{os.path.basename(f.filename)}:{f.lineno} (`{(f.line or '').strip()}`)"

    mine = [f for f in frames if own is not None and os.path.abspath(f.filename) == own]
    if mine and mine[-1] is not frames[-1]:
        return f"{line(mine[-1])}, in {line(frames[-1])}"
    return line(frames[-1])


def _source_file(dataset) -> str | None:
    """The file that defines the Dataset's class (None where Python cannot tell)."""
    import inspect

    try:
        return os.path.abspath(inspect.getsourcefile(type(dataset)) or "")
    except (TypeError, OSError):
        return None


def probed_item(dataset, index: int):
    """`dataset[index]` while the dataset is probed; what stops it is a `NeedsPixels` naming
    the user's line."""
    _plans.drawn_cut = None  # no crop drawn yet for this call's images
    try:
        return _zeros_unwrapped(dataset[index])
    except ReadsVideo as e:
        raise ReadsVideo(f"{type(dataset).__name__}.__getitem__ at {_user_line(e)}: {e}", e.reader) from None
    except NeedsPixels as e:
        raise NeedsPixels(f"{type(dataset).__name__}.__getitem__ needs pixels at {_user_line(e)}: {e}") from None
    except Exception as e:
        # Code that met the handle where it expected pixels (a transform it calls by another
        # name, a library that checks the image's type, a second file read as an image that
        # the code computes on, such as an instance mask), or an error of its own that
        # torch's loader will show as it is.
        why = ""
        if "LazyImage" in str(e) or _met_the_handle(e):
            why = (
                " (the code computes on what it opened as an image before any transform, or on a second "
                "image it reads, such as a mask: hpuload decodes only the image the transform is given)"
            )
        raise NeedsPixels(
            f"{type(dataset).__name__}.__getitem__({index}) raised {type(e).__name__} while probed, "
            f"at {_user_line(e, _source_file(dataset))}: {_first_line(e)}{why}"
        ) from None


def _zeros_unwrapped(out):
    """What `__getitem__` returned, an `np.zeros` array it handed out as it is (a `ZerosArray`,
    segmentation_models_pytorch's remapped mask) as what it stands for: the mask it became."""
    if type(out) is ZerosArray:
        return _unwrapped(out)
    if type(out) in (tuple, list):
        return type(out)(_unwrapped(v) for v in out)
    if type(out) is dict:
        return {k: _unwrapped(v) for k, v in out.items()}
    return out


def _first_line(error: BaseException) -> str:
    """An error's message up to its first line break (torch's dispatch errors list every
    backend after it), at most 300 characters."""
    text = str(error).strip().split("\n", 1)[0]
    return text if len(text) <= 300 else text[:297] + "..."


def _met_the_handle(error: BaseException) -> bool:
    """Whether a frame `error` passed through held an opened image (a `LazyImage`) in a local
    variable: the code computed on it (a library that takes it for the tensor it stands for
    fails otherwise than by naming it)."""
    tb = error.__traceback__
    while tb is not None:
        if any(type(v) is LazyImage for v in tb.tb_frame.f_locals.values()):
            return True
        tb = tb.tb_next
    return False


def _label(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, torch.Tensor) and value.dim() == 0 and not value.is_floating_point() and not value.is_complex():
        return int(value)
    try:
        import numpy as np

        if isinstance(value, np.integer):
            return int(value)
    except ImportError:  # pragma: no cover
        pass
    return None


#: The label type (`label_type`) of a Dataset whose labels are not integers (a multi-hot
#: vector, a regression target, a string): hpuload hands out each as the Dataset gave it.
OBJECT = "object"


def label_type(value) -> Any:
    """What a Dataset's label is, beyond its value (which `_label` reads): None for a Python
    `int`, the NumPy integer type or the 0-d tensor's dtype, which torch's
    `default_collate` keeps (a batch of `np.int32` labels is an int32 tensor) and a
    `collate_fn` sees; `OBJECT` for a label that is no integer (`_label` None)."""
    if _label(value) is None:
        return OBJECT
    if isinstance(value, int):
        return None
    if isinstance(value, torch.Tensor):
        return value.dtype
    return type(value)


def _plain(value) -> bool:
    """A value after the label that hpuload hands out as the Dataset gave it: a number, a
    string, a NumPy scalar or a 0-d tensor (what `default_collate` makes a tensor or a list
    of)."""
    if isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, torch.Tensor):
        return value.dim() == 0 and not value.requires_grad
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        return False
    return isinstance(value, (np.integer, np.floating, np.bool_))


#: The most elements a label that is no integer may have (a multi-hot vector over a few
#: thousand classes): hpuload keeps every sample's in memory, which a mask or a feature map
#: loaded per sample would fill.
_MOST_LABEL_ELEMENTS = 4096


def _label_object(value) -> bool:
    """A label that is no integer and that hpuload hands out as the Dataset gave it: a plain
    value (a float, a string, ...), or a tensor or NumPy array of at most
    `_MOST_LABEL_ELEMENTS` (a multi-hot vector, box coordinates, a regression target)."""
    if _plain(value):
        return True
    if isinstance(value, torch.Tensor):
        return not value.requires_grad and value.numel() <= _MOST_LABEL_ELEMENTS
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        return False
    return isinstance(value, np.ndarray) and value.dtype.kind in "biuf" and value.size <= _MOST_LABEL_ELEMENTS


#: The most values a tuple or list beside the image may hold (`(height, width)`, a box).
_MOST_TUPLE_VALUES = 64


def _extra(value) -> bool:
    """A value beside the image (a dict's, or one after the label) that hpuload hands out as
    the Dataset gave it: a label object (`_label_object`), or a short tuple or list of plain
    values (SDXL's `original_size = (image.height, image.width)`), which `default_collate`
    makes a list of tensors."""
    if _label_object(value):
        return True
    return isinstance(value, (tuple, list)) and len(value) <= _MOST_TUPLE_VALUES and all(map(_plain, value))


#: The most elements the values beside the image in one sample's dict may hold together
#: (token ids and their mask, a caption, a few numbers): hpuload keeps every sample's.
_MOST_DICT_ELEMENTS = 8192
#: And over all samples (128 MiB of 8-byte values): a dataset past it keeps torch's loader,
#: which holds none of them.
_MOST_HELD_ELEMENTS = 16 * 2**20


class DictSample(NamedTuple):
    """The keys of the dicts a Dataset's `__getitem__` returns when they hold more than an
    image and an integer label (diffusers' DreamBooth script: the image, a prompt's token ids
    and its attention mask): `order` every key in the dict's order, `image` the image's. The
    other values are each sample's extras, read while probing (`probe`), handed out as the
    Dataset gave them."""

    order: tuple
    image: str
    #: The keys of the sample's other images (diffusers' DreamBooth with prior preservation:
    #: `class_images` beside `instance_images`), each read from a file of its own and put
    #: through the same transform; empty: one image.
    more: tuple = ()

    def sample(self, image, values: tuple, more: tuple = ()) -> dict:
        """One sample: the image (a view of the batch) and its other images (`more`, in the
        order of `self.more`) among its values, in the dict's order."""
        rest = iter(values)
        images = {self.image: image, **dict(zip(self.more, more))}
        return {k: images[k] if k in images else next(rest) for k in self.order}

    def batch(self, images, rows: list[tuple], more: tuple = ()) -> dict:
        """What `default_collate` makes of a batch of samples: the images' batches (`more`:
        the other images'), and each other key's values collated."""
        from torch.utils.data import default_collate

        batches = {self.image: images, **dict(zip(self.more, more))}
        columns = iter(zip(*rows)) if rows and rows[0] else iter(())
        return {k: batches[k] if k in batches else default_collate(list(next(columns))) for k in self.order}


class Bare(NamedTuple):
    """What a Dataset's `__getitem__` returns when it returns its image alone (unlabelled data:
    a generative model's, an autoencoder's, a self-supervised method's): `form` "image" (the
    image itself), "tuple" or "list" (the image in a one-element tuple or list, of which
    `default_collate` makes a list of one batch). The loader hands out no labels."""

    form: str

    def of(self, out):
        """The image in what `__getitem__` returned."""
        return out if self.form == "image" else out[0]

    def sample(self, image, values: tuple = (), more: tuple = ()):
        """One sample as `__getitem__` returns it."""
        return image if self.form == "image" else (image,) if self.form == "tuple" else [image]

    def batch(self, images, rows: list | None = None, more: tuple = ()):
        """What `default_collate` makes of a batch of samples."""
        return images if self.form == "image" else [images]


class Views(NamedTuple):
    """What a Dataset's `__getitem__` returns when it gives its transform one image several
    times and returns each output (SimCLR's `return self.transform(image),
    self.transform(image)`): `count` views first, then its integer label where `labelled`, and
    small values after it (the extras), in a tuple or a list (not `labelled`: whatever follows
    the views, a label that is no integer among it, rides in the extras); `nested`: the views
    in a tuple or list of their own, first (`return (x1, x2), label`). The loader makes each
    view by the transform's pipeline, each drawing apart (`_transforms.Repeated`)."""

    count: int
    labelled: bool
    nested: bool = False

    @property
    def label_at(self) -> int:
        """Where the label is in what `__getitem__` returns."""
        return 1 if self.nested else self.count

    @property
    def values_at(self) -> int:
        """Where the extras start in what `__getitem__` returns."""
        return self.label_at + 1 if self.labelled else self.label_at

    def of(self, out):
        """The first view in what `__getitem__` returned."""
        return out[0][0] if self.nested else out[0]

    def sample(self, views, label, values: tuple = ()) -> tuple:
        """One sample as `__getitem__` returns it (a list as a tuple: `default_collate` makes
        a list of either)."""
        views = (tuple(views),) if self.nested else tuple(views)
        return (*views, label, *values) if self.labelled else (*views, *values)

    def batch(self, views, labels, columns: list) -> list:
        """What `default_collate` makes of a batch of samples: each view's batch (in a list
        of their own where `nested`), then the labels' and the other values' columns."""
        views = [list(views)] if self.nested else list(views)
        return [*views, labels, *columns] if self.labelled else [*views, *columns]


def _views_shape(out) -> tuple | None:
    """`_shape` of a tuple or list that holds several outputs of the transform: `("views",
    Views, label, extras)` where they come first (or in a tuple or list of their own, first)
    and are outputs of one opened image, made alike (`Views`); None where it holds one."""
    if out and isinstance(out[0], (tuple, list)) and len(out[0]) > 1 and all(isinstance(v, Recorded) for v in out[0]):
        inner = _views_shape(out[0])
        if len(out) == 1 or inner is None:
            return None
        return _after_views(out[1:], inner[1].count, nested=True)
    made = [isinstance(v, Recorded) for v in out]
    if sum(made) < 2:
        return None
    count = made.index(False) if False in made else len(out)
    first = out[0]
    alike = not any(made[count:]) and all(
        type(v) is Recorded
        and v.torchvision
        and isinstance(v.image, LazyImage)
        and v.image.path == first.image.path
        and (v.image.before, v.image.form, v.kind) == (first.image.before, first.image.form, first.kind)
        for v in out[:count]
    )
    if not alike:
        raise NeedsPixels(
            "__getitem__ returns several images made otherwise than by its transform from one image (hpuload "
            "makes several views of an image where the code returns its transform's outputs first, or where the "
            "transform returns them as a list, as MoCo's TwoCropsTransform does)"
        )
    return _after_views(out[count:], count, nested=False)


def _after_views(rest, count: int, nested: bool) -> tuple:
    """`_views_shape` of `count` views followed by `rest`: an integer label and small values
    after it (`Views.labelled`), or small values (a label that is no integer among them)."""
    label = _label(rest[0]) if rest else None
    beside = rest[1:] if label is not None else rest
    plain = all(_extra(v) or _label_object(v) for v in beside)
    if not plain or sum(_elements(v) for v in beside) > _MOST_DICT_ELEMENTS:
        raise NeedsPixels(
            "__getitem__ returns views of its image, then other than a label and small values (numbers, strings, "
            f"token ids: {_MOST_DICT_ELEMENTS} elements in all)"
        )
    return "views", Views(count, label is not None, nested), 0 if label is None else label, tuple(beside)


def _image_in(out, layout: str, keys):
    """The image (as recorded) in what `__getitem__` returned, of `_shape`'s `layout` and
    `keys`."""
    if isinstance(keys, (Bare, Views, Segmented)):
        return keys.of(out)
    return out[0] if layout == "pair" else out[_image_key(keys)]


def _elements(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, (tuple, list)):
        return len(value)
    size = getattr(value, "size", None)
    return size if isinstance(size, int) else 1


def _shape(out) -> tuple[Any, Any, int, tuple]:
    """`(layout, keys, label, extras)` of what `__getitem__` returned: `("pair", None, label,
    ())` for an `(image, label)` pair, with the plain values after the label as `extras` for
    an `(image, label, index, ...)` tuple (what noisy-label and semi-supervised code returns),
    `("dict", (image key, label key, label first), label, ())` for a dict of the two (`label
    first`: the label's key comes first in the dict, whose order the loader's dicts keep). A
    label that is no
    integer (`_label_object`) comes first among the extras, and `label` is 0."""
    if isinstance(out, Recorded):
        return "bare", Bare("image"), 0, ()
    if isinstance(out, (tuple, list)) and len(out) == 1 and isinstance(out[0], Recorded):
        return "bare", Bare(type(out).__name__ if type(out) in (tuple, list) else "list"), 0, ()
    if isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[0], Recorded) and type(out[1]) is MaskArray:
        return "segmented", Segmented(type(out).__name__ if type(out) in (tuple, list) else "list"), 0, ()
    if isinstance(out, dict) and len(out) == 2:
        kinds = [isinstance(v, Recorded) for v in out.values()], [type(v) is MaskArray for v in out.values()]
        if sorted(kinds[0]) == sorted(kinds[1]) == [False, True] and kinds[0] != kinds[1]:
            return "segmented", Segmented("dict", tuple(out), kinds[0].index(True)), 0, ()
    if isinstance(out, (tuple, list)):
        views = _views_shape(out)
        if views is not None:
            return views
    if isinstance(out, (tuple, list)) and len(out) >= 2 and isinstance(out[0], Recorded):
        label = _label(out[1])
        # After the label, plain values, or small ones (a caption's token ids and its mask).
        small = all(_extra(v) for v in out[2:]) and sum(_elements(v) for v in out[2:]) <= _MOST_DICT_ELEMENTS
        if label is not None and small:
            return "pair", None, label, tuple(out[2:])
        if label is None and _label_object(out[1]) and small:
            return "pair", None, 0, tuple(out[1:])
    if isinstance(out, dict) and len(out) == 2:
        images = [k for k, v in out.items() if isinstance(v, Recorded)]
        others = [k for k in out if k not in images]
        if len(images) == 1 and _label(out[others[0]]) is not None:
            return "dict", (images[0], others[0], next(iter(out)) == others[0]), _label(out[others[0]]), ()
    if isinstance(out, dict) and len(out) >= 2:
        images = [k for k, v in out.items() if isinstance(v, Recorded)]
        values = tuple(v for k, v in out.items() if k not in images)
        if (
            images
            and all(isinstance(k, str) for k in out)
            and all(_extra(v) for v in values)
            and sum(_elements(v) for v in values) <= _MOST_DICT_ELEMENTS
        ):
            return "dict", DictSample(tuple(out), images[0], tuple(images[1:])), 0, values
    values = list(out.values()) if isinstance(out, dict) else list(out) if isinstance(out, (tuple, list)) else [out]
    if any(isinstance(v, LazyImage) for v in values):
        # A transform stood in for, and the image returned without it (torchvision's steps
        # answered on the image by a wrapper of it, `VisionDataset.transforms`): hpuload would
        # run that transform too.
        raise NeedsPixels(
            "__getitem__ returns the image without giving it to its transform, which hpuload stands in for (it "
            "follows the steps code takes on the image itself where it gives the image to that transform or "
            "holds none)"
        )
    kinds = (
        [type(v).__name__ if not isinstance(v, Recorded) else "image" for v in out]
        if isinstance(out, (tuple, list))
        else "image" if isinstance(out, Recorded) else type(out).__name__
    )
    raise NeedsPixels(
        f"__getitem__ returns {kinds}; hpuload gives (image, label) pairs (small values after them too) "
        f"or a dict of one image and small values ({_MOST_DICT_ELEMENTS} elements in all: numbers, strings, "
        "token ids)"
    )


def video_reader_in(dataset, index: int) -> ReadsVideo | None:
    """What stops `dataset[index]` when it opens a video (`_VIDEO_READERS`), for a dataset
    hpuload does not probe (it has no `transform`): the reader and the reason, naming the
    user's line; None when it does not open one (or stops before). Nothing is decoded; the
    global generators are left as they were (NumPy's included)."""
    from ._tail import _Isolated

    install()
    _probing.on = True
    try:
        with _Isolated():
            dataset[index]
    except ReadsVideo as e:
        return ReadsVideo(f"{type(dataset).__name__}.__getitem__ at {_user_line(e)}: {e}", e.reader)
    except Exception:  # the user's code met a lazy image where it wanted pixels
        pass
    finally:
        _probing.on = False
    return None


def _form_name(form: tuple[bool, bool, bool]) -> str:
    tensor, rgb, turned = form
    kinds = {"cv2": "OpenCV's array", "array": "a NumPy array of a PIL image", True: "a tensor"}
    kind = kinds.get(tensor, "a PIL image")
    name = kind + (" in RGB" if rgb else " in the file's own mode")
    return name + (" turned upright by its EXIF orientation" if turned else "")


class Probed(NamedTuple):
    """What `probe` learns of a Dataset."""

    #: `(path, label)` of each index probed.
    samples: list[tuple[str, int]]
    #: `(image key, label key)` of the dicts `__getitem__` returns; None for pairs.
    keys: Any
    #: How its code holds the images it gives the transform (`LazyImage.form`).
    form: tuple[bool, bool, bool]
    #: What its labels are (`label_type`): None for Python ints, `OBJECT` for labels that
    #: are no integers.
    label: Any
    #: The plain values after the label, per index probed (None: it returns pairs); with
    #: `OBJECT` labels, the label itself first.
    extras: list[tuple] | None = None
    #: What it hands out after an albumentations Compose without `ToTensorV2` (`Output`);
    #: None: what its transform gives.
    output: Output | None = None
    #: What its code does to the image before the transform (`LazyImage.before`).
    before: tuple = ()
    #: Per index probed, the files of its other images (`DictSample.more`); None: one image
    #: a sample.
    more: list[tuple[str, ...]] | None = None
    #: Per index probed, its mask's file (`Segmented`); None: no mask.
    masks: list[str] | None = None
    #: What the code hands out of each mask (`MaskArray`: its values, the first index's).
    mask: Any = None


def probe(dataset, indices: list[int] | None = None) -> Probed:
    """What running `dataset`'s `__getitem__` for every index (or for `indices`, in that
    order) with lazy image opening and a stand-in transform tells: each one's file and
    label, and the shape, image form and label type, which must be the same for every
    index. Raises `NeedsPixels` naming the user's line for code that needs pixels. The
    global random generators are left as they were."""
    install()
    _bind_in_user_code(dataset)
    order = range(len(dataset)) if indices is None else indices
    n = len(order)
    if n == 0:
        raise NeedsPixels("the dataset is empty")
    attribute = transform_attribute(dataset) or "transform"
    transform = held_transform(dataset, attribute)
    from ._tail import _Isolated

    isolated = _Isolated().__enter__()
    generators = _Generators(dataset)
    start = generators.states()
    _plans.answered = False
    samples: list[tuple[str, int]] = []
    extras: list[tuple] = []
    more: list[tuple[str, ...]] = []  # the files of each index's other images
    masks: list[str] = []  # each index's mask's file (`Segmented`)
    functional_masks = False  # the masks were moved by the functionals that moved each image
    mask = None  # the first index's mask as handed out (`MaskArray`)
    layout = keys = form = output = before = None
    labels = set()
    held = 0  # the elements of the values beside the image held so far (`DictSample`)
    drawn = False  # the values beside the image differ from call to call (`DrawnExtras`)
    befores = []  # per index, its steps before the transform (`LazyImage.before`)
    session = _Session(dataset, attribute, transform)
    stand_in = session.stand_in
    # Whether the transform gives the flip of a flipped image (`split_flips`): one that the
    # code flips by a draw of its own first is then the flip of the sample made without it.
    commutes = stand_in is None or transform_commutes_with_flips(transform)

    def flips_alone(a: tuple, b: tuple) -> bool:
        """Whether two indices' steps differ only by flips, each one's sample the flip of the
        sample made without them (`split_flips`)."""
        x, y = split_flips(a, commutes, dataset), split_flips(b, commutes, dataset)
        return x is not None and y is not None and x[0] == y[0]
    session.__enter__()
    memo = _sizes_memo()
    memo.__enter__()
    try:
        for i in order:
            out = _as_returned(probed_item(dataset, i), stand_in)
            shape, k, label, after = _shape(out)
            if layout is None:
                layout, keys = (shape, len(after)), k
            elif ((shape, len(after)), k) != (layout, keys):
                raise NeedsPixels(f"__getitem__({i}) returns another shape than __getitem__({order[0]})")
            extras.append(after)
            # A pair's label that is no integer rides first among the extras: not counted.
            beside = after[1:] if shape == "pair" and after and _label(out[1]) is None else after
            held += sum(_elements(v) for v in beside if not _plain(v))
            if held > _MOST_HELD_ELEMENTS:
                raise NeedsPixels(
                    f"__getitem__ returns values beside the image that hpuload would hold for every sample: over "
                    f"{_MOST_HELD_ELEMENTS:,} elements by __getitem__({i})"
                )
            recorded = _image_in(out, shape, k)
            image = recorded.image
            given = recorded.output if isinstance(recorded, ArrayOut) else None
            if stand_in is not None and given is not None and not given.composed:
                raise NeedsPixels(f"__getitem__({i}) returns an array of the image its transform was not given")
            if given is not None and given.dtype == "f64":
                raise NeedsPixels(f"__getitem__({i}) hands out its image in float64 (hpuload gives float32)")
            if given is not None and given.arith:
                byte_values(given)  # computed now: one that gives no float32 needs pixels
            if form is None:
                form, output, before = image.form, given, image.before
            elif given != output:
                raise NeedsPixels(f"__getitem__({i}) hands out its image otherwise than __getitem__({order[0]})")
            elif image.before != before and not flips_alone(image.before, before):
                blocked = _flip_blocked_by(image.before, commutes, dataset) or _flip_blocked_by(before, commutes, dataset)
                if blocked is not None:
                    raise NeedsPixels(f"__getitem__({i}) flips its image by a draw before {blocked} {_FLIPS_FOLLOWED}")
                raise NeedsPixels(f"__getitem__({i}) resizes or converts its image otherwise than __getitem__({order[0]})")
            elif image.form != form:
                raise NeedsPixels(
                    f"__getitem__({i}) holds its image as {_form_name(image.form)} and __getitem__({order[0]}) "
                    f"as {_form_name(form)}"
                )
            befores.append(image.before)
            if isinstance(k, Segmented):
                handed = k.mask_of(out)
                if not handed.composed and _both_as_read(handed, image):
                    # The image and its mask as read (milesial's U-Net at `scale=1`, whose
                    # resize to their own size is a copy): moved alike, by nothing.
                    handed.composed = "functional"
                functional = handed.composed == "functional"
                if not handed.composed or (not functional and stand_in is None):
                    raise NeedsPixels(
                        f"__getitem__({i}) returns a mask that did not go through its albumentations or torchvision "
                        "transform with its image, nor through the functionals that moved its image (hpuload moves "
                        "masks as those move them)"
                    )
                if functional:
                    split = mask_flips(mask_parts(handed.image)[1])
                    if split is None:
                        raise NeedsPixels(f"__getitem__({i}) flips its mask before another step (hpuload flips masks last)")
                    if split[1] != _flips_in(image.before):
                        raise NeedsPixels(f"__getitem__({i}) flips its image and its mask otherwise")
                    functional_masks = True
                if mask is None:
                    mask = handed
                elif not _same_mask(handed, mask):
                    raise NeedsPixels(f"__getitem__({i}) makes its mask's values otherwise than __getitem__({order[0]})")
                masks.append(handed.image.path)
            if isinstance(k, Views) and stand_in is None:
                raise NeedsPixels("__getitem__ returns its image several times, with no transform to make views of it")
            if shape == "pair":
                labelled = out[1]
            elif isinstance(k, Views):
                labelled = out[k.label_at] if k.labelled else 0
            else:
                labelled = 0 if isinstance(k, (DictSample, Bare, Segmented)) else out[k[1]]
            labels.add(label_type(labelled))
            samples.append((image.path, label))
            if isinstance(k, DictSample) and k.more:
                others = [out[key] for key in k.more]
                for key, other in zip(k.more, others):
                    handed = other.output if isinstance(other, ArrayOut) else None
                    if (other.image.form, other.image.before, handed) != (image.form, image.before, given):
                        raise NeedsPixels(
                            f"__getitem__({i}) holds, resizes or hands out its images {k.image!r} and {key!r} otherwise"
                        )
                more.append(tuple(other.image.path for other in others))
        # Indices again: a __getitem__ that picks its file or its label at random (even now
        # and then: a noisy label, a swapped sample) cannot be learnt once.
        objects = OBJECT in labels

        def drawing() -> str:
            """Where the code draws, for a refusal's message: the generators moved so far."""
            moved = generators.moved(start, generators.states())
            if not moved:
                return ""
            line = _drawing_line(dataset, [order[k] for k in _again(n)[:8]], generators)
            return f" (it draws from {' and '.join(moved)}{f' at {line}' if line else ''})"

        for k in _again(n):
            i = order[k]
            again = _as_returned(dataset[i], stand_in)
            opened = _image_in(again, layout[0], keys)
            if getattr(getattr(opened, "image", None), "path", None) != samples[k][0]:
                raise NeedsPixels(
                    f"{type(dataset).__name__}.__getitem__({i}) opened two different files on two calls{drawing()}"
                )
            if isinstance(keys, DictSample):
                opened = tuple(getattr(getattr(again.get(key), "image", None), "path", None) for key in keys.more)
                if keys.more and opened != more[k]:
                    raise NeedsPixels(
                        f"{type(dataset).__name__}.__getitem__({i}) opened two different files on two calls{drawing()}"
                    )
                if tuple(again) != keys.order:
                    raise NeedsPixels(
                        f"{type(dataset).__name__}.__getitem__({i}) returns other keys on two calls"
                    )
                # Values drawn anew on each call (a prompt picked at random): the code runs
                # again for each sample the loader hands out (`DrawnExtras`).
                drawn = drawn or not _same_values(_shape(_untransformed(again) if stand_in is None else again)[3], extras[k])
                continue
            if isinstance(keys, Bare):
                continue  # the image alone: no label, no values beside it
            if isinstance(keys, Segmented):
                if getattr(getattr(keys.mask_of(again), "image", None), "path", None) != masks[k]:
                    raise NeedsPixels(
                        f"{type(dataset).__name__}.__getitem__({i}) opened two different mask files on two "
                        f"calls{drawing()}"
                    )
                continue
            if isinstance(keys, Views):
                if keys.labelled and _label(again[keys.label_at]) != samples[k][1]:
                    raise NeedsPixels(
                        f"{type(dataset).__name__}.__getitem__({i}) gave two different labels on two calls{drawing()}"
                    )
                drawn = drawn or not _same_values(tuple(again[keys.values_at :]), extras[k])
                continue
            label = again[1] if layout[0] == "pair" else again[keys[1]]
            if not objects and _label(label) != samples[k][1]:
                raise NeedsPixels(
                    f"{type(dataset).__name__}.__getitem__({i}) gave two different labels on two calls{drawing()}"
                )
            # A label that is no integer (a caption picked at random) and the values after
            # it are drawn again for each sample handed out, as a dict's.
            beside = () if layout[0] != "pair" else (label, *again[2:]) if objects else tuple(again[2:])
            drawn = drawn or not _same_values(beside, extras[k])
        # The generators tell what a few calls may not: code that draws even once in a
        # thousand calls (a caption dropped, a label flipped now and then) has moved them.
        moved = generators.moved(start, generators.states())
        # Flips drawn anew on each call (`if random.random() < 0.5: image = TF.hflip(image)`):
        # the loader makes each sample without them, runs the code again for each sample it
        # hands out (`DrawnExtras`) and flips those whose run flipped.
        flipping = any(b != before for b in befores)
        if moved and not flipping and not drawn:
            # Few indices, each flipped alike so far: a few calls more tell a drawn flip.
            for k in range(_FLIP_TRIES):
                again = _as_returned(probed_item(dataset, order[k % n]), stand_in)
                try:
                    recorded = _image_in(again, layout[0], keys)
                except (TypeError, LookupError):
                    recorded = None
                steps = getattr(getattr(recorded, "image", None), "before", None)
                if steps is not None and steps != befores[k % n]:
                    flipping = flips_alone(steps, before)
                    blocked = _flip_blocked_by(steps, commutes, dataset) or _flip_blocked_by(before, commutes, dataset)
                    if not flipping and blocked is not None:
                        raise NeedsPixels(
                            f"{type(dataset).__name__}.__getitem__ flips its image by a draw before {blocked} "
                            f"{_FLIPS_FOLLOWED}"
                        )
                    break
        if flipping:
            if masks and not functional_masks:
                raise NeedsPixels("a flip drawn anew on each call, for an image and its mask")
            if more:
                raise NeedsPixels(
                    "a flip drawn anew on each call, for a sample of several images (hpuload follows drawn flips "
                    "of one image a sample)"
                )
            drawn = True
            before = split_flips(before, commutes, dataset)[0]
        if _plans.answered and more:
            raise NeedsPixels(
                "RandomCrop.get_params for a sample of several images (hpuload answers the crop of one image a sample)"
            )
        if _plans.answered and (isinstance(keys, DictSample) or objects or layout[1]):
            # A crop's corner drawn (`_crop_params`): the values beside the image may hold it
            # (SDXL's `crop_top_left`), drawn again for each sample as the loader crops it.
            drawn = True
        if moved and not drawn:
            if isinstance(keys, DictSample) or objects or layout[1]:
                drawn = True
            else:
                line = _drawing_line(dataset, [order[k] for k in _again(n)[:8]], generators)
                raise NeedsPixels(
                    f"{type(dataset).__name__}.__getitem__ draws from {' and '.join(moved)}"
                    f"{f' at {line}' if line else ''}: a label or file it may draw hpuload cannot follow (it "
                    "follows values drawn beside the image: a dict's, or those after a label)"
                )
    finally:
        memo.__exit__(None, None, None)
        session.__exit__()
        isolated.__exit__()
        # The Dataset's own generators as they were: probing draws nothing of the user's.
        generators.restore(start)
    if len(labels) > 1:
        raise NeedsPixels(f"__getitem__ gives labels of several types ({', '.join(sorted(map(str, labels)))})")
    if output is not None:
        _check_handed_out(dataset, order[: _CHECK_TRIES], keys if layout[0] != "pair" else None, output)
    if drawn:
        looks = (layout, keys, form, before, output)
        extras = DrawnExtras(extras, dataset, samples, looks, more or None, commutes if flipping else None)
        if masks:
            extras.masks, extras.mask = list(masks), mask
    handed = extras if layout[1] or flipping else None
    return Probed(samples, keys, form, labels.pop(), handed, output, before, more or None, masks or None, mask)


def _same_mask(a: MaskArray, b: MaskArray) -> bool:
    """Whether two indices' masks are handed out alike: made as (the file's values as stored
    or made grey, moved by the same steps but for the flips drawn last), of one kind, dtype
    and shape, their values the same function of each byte."""
    steps = _unflipped(a), _unflipped(b)
    if None in steps:
        return False
    same = (steps[0], a.kind, a.channel, a.dtype) == (steps[1], b.kind, b.channel, b.dtype)
    if not same:
        return False
    import numpy as np

    x, y = (a.values.numpy(), b.values.numpy()) if a.kind == "tensor" else (a.values, b.values)
    return bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"))


def _flips_in(before: tuple) -> tuple[bool, bool]:
    """`(horizontal, vertical)`: whether the flips among an image's steps mirror it."""
    flips = [_flip_of(step) for step in before]
    return flips.count("h") % 2 == 1, flips.count("v") % 2 == 1


def _unflipped(mask: MaskArray) -> tuple | None:
    """A mask's steps (`LazyImage.before`) without the flips the functionals drew last."""
    if mask.composed != "functional":
        return mask.image.before
    parts = mask_parts(mask.image)
    split = None if parts is None else mask_flips(parts[1])
    return None if split is None else (*parts[0], *split[0])


#: How many calls more `probe` makes of a Dataset whose code draws, for a flip it draws.
_FLIP_TRIES = 32

#: How many indices `_check_handed_out` tries to run for real (a damaged file raises).
_CHECK_TRIES = 4


def _check_handed_out(dataset, indices, keys, output: Output) -> None:
    """Runs the first of `indices` whose `__getitem__` runs for real (its pixels, the global
    generators restored after; one whose file is damaged raises, and the loader names and
    replaces it when it reads it) and checks that the image it hands out is of the kind,
    dtype and layout the probe followed: code that branches on the array's type
    (`isinstance(x, np.ndarray)`), which the probe's stand-in is not, takes another path
    when run. Needs pixels where it differs."""
    import numpy as np

    from ._tail import _Isolated

    generators = _Generators(dataset)
    own = generators.states()
    try:
        with _Isolated():
            for index in indices:
                try:
                    out = dataset[index]
                    break
                except Exception:
                    continue
            else:
                return
    finally:
        generators.restore(own)
    image = out[0] if keys is None else keys.of(out) if isinstance(keys, (Bare, Views, Segmented)) else out[_image_key(keys)]
    kind = "numpy" if isinstance(image, np.ndarray) else "tensor" if isinstance(image, torch.Tensor) else None
    dtype = str(image.dtype).replace("torch.", "") if kind else None
    shape = tuple(image.shape) if kind else ()
    want_dtype = {"u8": "uint8", "f32": "float32", "f64": "float64"}[output.dtype]
    channels_at = 2 if output.layout == "hwc" else 0
    # A grey image's array may have no channel axis (albumentations keeps OpenCV's `[H, W]`).
    laid_out = len(shape) == 2 or (len(shape) == 3 and shape[channels_at] in (1, 3))
    fits = kind == output.kind and dtype == want_dtype and laid_out
    if not fits:
        raise NeedsPixels(
            f"{type(dataset).__name__}.__getitem__({index}) hands out its image as {kind or type(image).__name__} "
            f"{shape} {dtype} when run, not as its code was followed ({output.kind} {output.layout.upper()} {want_dtype}): "
            "code that takes another path for the stand-in hpuload probes with"
        )


class _Session:
    """While entered (on this thread): the Dataset's transform stood in for under every name
    it holds it by (`self.tf = self.transform = transform`, so that whichever its code calls
    is answered), NumPy's and torch's array calls answering the image (`_NumpyArrays`), and
    the opening calls answering lazily. No transform (None, or no attribute): none stood in,
    so that the code takes the path it takes without one (`if self.transform: ... else:
    ...`), and the image it returns is the opened one as the code changed it."""

    def __init__(self, dataset, attribute: str, transform):
        from ._albumentations import is_compose

        self.dataset, self.transform, self.stand_in = dataset, transform, None
        self.names = [attribute]
        #: `(attribute, transform)` of each of the transforms the Dataset applies itself
        #: (`chain_attributes`), each stood in for by a `ChainLink`.
        self.links = []
        #: `(attribute, wrapper)` of torchvision's `StandardTransform`s that hold the transform
        #: (`VisionDataset.transforms`, which a subclass may call as `self.transforms(image,
        #: target)`): each stood in for by one holding the stand-in, the target's as it was.
        self.wrappers = []
        if transform is not None:
            self.stand_in = AlbumentationsStandIn(transform) if is_compose(transform) else TransformStandIn(transform)
            self.names += [k for k, v in getattr(dataset, "__dict__", {}).items() if v is transform and k != attribute]
            self.wrappers = [
                (k, v)
                for k, v in getattr(dataset, "__dict__", {}).items()
                if type(v).__name__ == "StandardTransform"
                and type(v).__module__.startswith("torchvision.datasets")
                and getattr(v, "transform", None) is transform
            ]
        else:
            self.links = [(name, getattr(dataset, name)) for name in chain_attributes(dataset)]

    def __enter__(self):
        self.arrays = _NumpyArrays().__enter__()
        _probing.on = True
        if self.stand_in is not None:
            for name in self.names:
                setattr(self.dataset, name, self.stand_in)
            for name, wrapper in self.wrappers:
                setattr(self.dataset, name, type(wrapper)(self.stand_in, wrapper.target_transform))
        for name, transform in self.links:
            setattr(self.dataset, name, ChainLink(name, transform))
        return self

    def __exit__(self, *exc):
        if self.stand_in is not None:
            for name in self.names:
                setattr(self.dataset, name, self.transform)
            for name, wrapper in self.wrappers:
                setattr(self.dataset, name, wrapper)
        for name, transform in self.links:
            setattr(self.dataset, name, transform)
        _probing.on = False
        self.arrays.__exit__()
        return False


class DrawnExtras(list):
    """The values beside each sample's image (by index) of a Dataset whose code draws them
    anew on each call: diffusers' textual inversion picks a prompt template at random in
    `__getitem__`, then tokenizes it; other code drops a caption now and then, or picks one
    of an image's captions. A list of the values one probe gave; once the loader arms it
    (`arm`), reading index `i` runs the Dataset's own `__getitem__(i)` again, its images and
    transform stood in for as when probed (no pixels), with Python's, NumPy's and torch's
    global generators seeded from (seed, epoch, i) and restored after: the values are drawn
    as the code draws them, the same again on a resumed run. By the dataset's indices, or,
    made by `over`, by a Subset's (`picks`: each of the loader's positions' index in the
    dataset; the draws seeded by position, as the loader's own).

    A run that draws what the probe took as fixed (another file, another integer label,
    other steps before the transform, code that needs pixels), however rarely, is a stray
    (`strays`): the loader makes that sample by running the Dataset's code for real
    (`settle`), so that it is what the Dataset gives, never the probed sample."""

    def __init__(self, values: list, dataset, samples=None, looks=None, more=None, flipping=None):
        super().__init__(values)
        self.dataset = dataset
        #: Where the code draws flips of its image (`split_flips`; `looks`' steps are then
        #: those without them): whether its transform gives the flip of a flipped image. None:
        #: it draws none.
        self.flipping = flipping
        #: Per index, `(path, label)` as probed; `looks`: `(layout, keys, form, before,
        #: output)` (`probe`'s), the same for every index; `more`: per index, its other
        #: images' files (None: one image).
        self.samples, self.looks, self.more = samples, looks, more
        self._seed = self._epoch = self._plan_of = None
        #: The last batch's draws: `((seed, epoch, indices), rows, strays, flips)`; `flips`:
        #: `{slot: (horizontal, vertical)}` of the samples whose run flipped the image.
        self._last = None
        #: Per loader position, the dataset's index (a Subset's); None: the same.
        self.picks = None
        #: Per index, its mask's file, and the first index's mask as probed (`MaskArray`),
        #: for a Dataset that returns an image and its mask (`Segmented`); None: no masks.
        self.masks = self.mask = None
        #: How many strays the runs met since `take_strays` last asked.
        self._strays_seen = 0

    def over(self, probed: list, picks: list) -> "DrawnExtras":
        """These draws (of the dataset's indices `probed`, in that order) over a Subset's
        indices: `picks`, each loader position's index in the dataset."""
        at = {j: n for n, j in enumerate(probed)}
        rows = [list.__getitem__(self, at[j]) for j in picks]
        more = None if self.more is None else [self.more[at[j]] for j in picks]
        out = DrawnExtras(rows, self.dataset, [self.samples[at[j]] for j in picks], self.looks, more, self.flipping)
        out.picks = list(picks)
        if self.masks is not None:
            out.masks, out.mask = [self.masks[at[j]] for j in picks], self.mask
        return out

    def arm(self, seed, epoch, plan_of=None) -> None:
        """Draws from now on: `seed()` gives the loader's seed, `epoch()` the epoch being
        read, `plan_of(index, width, height)` the loader's plan of a sample (what
        `RandomCrop.get_params` answers in the Dataset's code: `_crop_params`)."""
        self._seed, self._epoch, self._plan_of = seed, epoch, plan_of

    def __getitem__(self, i):
        if self._seed is None or not isinstance(i, int):
            return super().__getitem__(i)
        last = self._last
        if last is not None and last[0][:2] == (self._seed(), self._epoch()) and i in last[0][2]:
            return last[1][last[0][2].index(i)]
        return self.rows([i])[0]

    def rows(self, indices: list) -> list:
        """The values of each of `indices` (a batch's), drawn by the Dataset's code in one
        probing session (each index seeded on its own); the last batch's are kept, so that
        asking again draws nothing."""
        if self._seed is None:
            return [super(DrawnExtras, self).__getitem__(i) for i in indices]
        from . import _tail

        seed, epoch = self._seed(), self._epoch()
        key = (seed, epoch, tuple(indices))
        if self._last is not None and self._last[0] == key:
            return list(self._last[1])
        dataset = self.dataset
        attribute = transform_attribute(dataset) or "transform"
        out, strays, flips = [], {}, {}
        with _Session(dataset, attribute, held_transform(dataset, attribute)) as session, _tail.seeded_samples(
            seed, epoch
        ) as seeded, _sizes_memo():
            for slot, i in enumerate(indices):
                _plans.plan = functools.partial(self._plan_of, i) if self._plan_of is not None else _no_plan
                try:
                    seeded(i)
                    item = _as_returned(probed_item(dataset, i if self.picks is None else self.picks[i]), session.stand_in)
                    shape = _shape(item)
                except NeedsPixels:
                    shape = None
                finally:
                    _plans.plan = None
                flipped = None if shape is None else self._as_probed(i, item, shape)
                if flipped is None:
                    strays[slot] = i
                    out.append(None)  # `settle` puts the values of the Dataset's own sample here
                else:
                    out.append(shape[3])
                    if any(flipped):
                        flips[slot] = flipped
        self._last = (key, out, strays, flips)
        self._strays_seen += len(strays)
        return list(out)

    def take_strays(self) -> int:
        """How many strays the runs met since the last call (the loader asks at each epoch's
        start: none means every sample was as probed)."""
        seen, self._strays_seen = self._strays_seen, 0
        return seen

    def strays(self, indices: list) -> dict[int, int]:
        """Of a batch's `indices`, `{slot: index}` of those whose run drew what the probe took
        as fixed (the class's own code must make them)."""
        self.rows(indices)
        return dict(self._last[2]) if self._last is not None else {}

    def flips(self, indices: list) -> dict[int, tuple[bool, bool]]:
        """Of a batch's `indices`, `{slot: (horizontal, vertical)}` of those whose run flipped
        the image (the strays, made by the class's own code, are not among them)."""
        self.rows(indices)
        return dict(self._last[3]) if self._last is not None else {}

    def settle(self, slot: int, values: tuple) -> None:
        """The values beside the image of the last batch's stray at `slot`, as the Dataset's
        own sample gave them."""
        self._last[1][slot] = values

    def _as_probed(self, i: int, item, shape) -> tuple[bool, bool] | None:
        """How a run of index `i` flipped its image, `(horizontal, vertical)`, where it drew
        nothing the probe took as fixed; None for a stray."""
        unflipped = (False, False)
        if self.samples is None:
            return unflipped
        layout, keys, label, after = shape
        if ((layout, len(after)), keys) != self.looks[:2]:
            return None
        try:
            recorded = _image_in(item, layout, keys)
        except (TypeError, LookupError):
            return None
        if not isinstance(recorded, Recorded) or not isinstance(recorded.image, LazyImage):
            return None
        path, probed_label = self.samples[i]
        if recorded.image.path != path or (layout in ("pair", "views") and label != probed_label):
            return None
        given = recorded.output if isinstance(recorded, ArrayOut) else None
        before, flipped = recorded.image.before, unflipped
        if self.flipping is not None:
            split = split_flips(before, self.flipping, self.dataset)
            if split is None:
                return None
            before, flipped = split
        if (recorded.image.form, before, given) != self.looks[2:]:
            return None
        if self.more is not None and isinstance(keys, DictSample):
            files = tuple(getattr(getattr(item.get(k), "image", None), "path", None) for k in keys.more)
            return flipped if files == self.more[i] else None
        if isinstance(keys, Segmented):
            # Its mask: the file probed, made and moved alike, flipped as its image was.
            mask = keys.mask_of(item)
            if type(mask) is not MaskArray or self.masks is None or mask.image.path != self.masks[i]:
                return None
            if not _same_mask(mask, self.mask):
                return None
            split = mask_flips(mask_parts(mask.image)[1]) if mask.composed == "functional" else (None, unflipped)
            if split is None or split[1] != flipped:
                return None
        return flipped


def _no_plan(width, height):
    raise NeedsPixels("RandomCrop.get_params where the loader gives no plan of its own crop")


def _image_key(keys):
    """The image's key in the dicts `__getitem__` returns (`keys`: `_shape`'s)."""
    return keys.image if isinstance(keys, DictSample) else keys[0]


def _untransformed(out):
    """What `__getitem__` returned when the dataset has no transform, with the opened image
    in it (as the code left it: a PIL image, a tensor, an array) as a stand-in transform
    would have recorded it."""

    def one(value):
        if isinstance(value, (LazyImage, ArrayOut)):
            image = value.image if isinstance(value, ArrayOut) else value
            if _applies(image.before):
                return _chain_output(value)
        if isinstance(value, LazyImage):
            return ArrayOut.of(value) if value.tensor in ("cv2", "array") else Recorded(value)
        return value

    paired = _paired_mask(out, one)
    if paired is not None:
        return paired
    if isinstance(out, tuple):
        return tuple(one(v) for v in out)
    if isinstance(out, list):
        return [one(v) for v in out]
    if isinstance(out, dict):
        return {k: one(v) for k, v in out.items()}
    return one(out)  # the image alone


def _as_returned(out, stand_in):
    """What `__getitem__` returned while probed, as recorded: without a transform stood in
    for, the image as the code left it (`_untransformed`); with one, as it is, a mask the
    functionals moved with its image made its `MaskArray` (`_paired_mask`)."""
    if stand_in is None:
        return _untransformed(out)
    paired = _paired_mask(out)
    return out if paired is None else paired


def _paired_mask(out, one=lambda value: value):
    """What `__getitem__` returned where it is an image and its mask, the mask moved by the
    functionals that moved the image and made a tensor: the pair (or dict of the two) with the
    mask as its `MaskArray` (`_functional_mask`) and the image as `one` makes it; None for
    anything else."""
    if not isinstance(out, (tuple, list, dict)) or len(out) != 2:
        return None
    keys = list(out) if isinstance(out, dict) else [0, 1]
    masks = [_functional_mask(out[k]) for k in keys]
    if sum(m is not None for m in masks) != 1:
        return None
    at = 0 if masks[0] is not None else 1
    if not isinstance(out[keys[1 - at]], (LazyImage, Recorded)):
        return None
    made = [masks[at] if n == at else one(out[k]) for n, k in enumerate(keys)]
    return dict(zip(keys, made)) if isinstance(out, dict) else type(out)(made)


def _functional_mask(value) -> "MaskArray | None":
    """The mask an opened mask file is, where the code moved it as its image by torchvision's
    functionals (`mask_parts`: at least one move) and then made a tensor of it: `to_tensor`'s
    float `[1, H, W]` of each byte divided by 255, or `pil_to_tensor`'s uint8 `[1, H, W]`
    (`composed` "functional"); None for anything else (the image itself among them)."""
    if type(value) is not LazyImage or not value.before:
        return None
    last = value.before[-1]
    given = isinstance(last, Applied) and (last.call is not None or last.attribute is not None)
    name = type(last.transform).__name__ if given else None
    if name not in ("ToTensor", "PILToTensor"):
        return None
    if value.as_mask is not None:
        return value.as_mask  # made already, and perhaps changed in place since
    mask = LazyImage(value.path, before=value.before[:-1])
    parts = mask_parts(mask)
    if parts is None or not parts[1]:
        return None
    return MaskArray(mask, _tensor_values(name, torch.get_default_dtype()).clone(), composed="functional", channel=True)


@functools.lru_cache(maxsize=8)
def _tensor_values(conversion: str, dtype: torch.dtype) -> torch.Tensor:
    """What each of the 256 bytes becomes in `to_tensor`'s floats of `dtype` (divided by
    255) or `pil_to_tensor`'s uint8 (as it is): kept once (callers clone it)."""
    values = torch.arange(256, dtype=torch.uint8)
    return values.to(dtype).div(255) if conversion == "ToTensor" else values


def _chain_output(value):
    """What the Dataset's code returns of the image its own transforms (`Applied`) made: that
    image (a PIL image, or a tensor), or its NumPy array as the code changed it, as a
    transform's output would be recorded (`Recorded`; an `ArrayOut` of the PIL image the
    transforms gave: `Output.of_pil`)."""
    if isinstance(value, LazyImage):
        if value.held == "unknown":
            raise NeedsPixels("what a transform of the Dataset's own that hpuload does not know made of the image")
        if value.tensor in ("cv2", "array"):
            value = ArrayOut.of(value)
        else:
            return Recorded(value, torchvision=True)
    image = value.image
    if value.output.of_pil and value.output.composed and not image.tensor:
        return value  # made so already
    if image.tensor != "array" or value.output.composed:
        raise NeedsPixels(f"the image the Dataset's own transforms made, as {_form_name(image.form)}")
    pil = LazyImage(image.path, rgb=image.rgb, turned=image.turned, before=image.before)
    return ArrayOut(pil, value.output._replace(composed=True, of_pil=True))


def _generator_states() -> tuple:
    """Python's, torch's and (where imported) NumPy's global generators' states."""
    np = sys.modules.get("numpy")
    return random.getstate(), torch.default_generator.get_state(), np.random.get_state() if np is not None else None


def _same_state(a, b) -> bool:
    """Whether two generator states (tuples, dicts, tensors, arrays, numbers) are equal."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if type(a).__name__ == "ndarray":
        import numpy as np

        return type(b).__name__ == "ndarray" and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(map(_same_state, a, b))
    return a == b


@functools.cache
def _installed_roots() -> tuple[str, ...]:
    """The folders Python's own library and installed packages live in (`sysconfig`'s stdlib
    and site-packages paths): a class defined under one is no user's code."""
    import sysconfig

    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots)


@functools.lru_cache(maxsize=4096)
def _users_module(module: str, home: str) -> bool:
    """Whether `module` is the user's own code: `home` (the Dataset's module) or in its
    package, or a module whose file lies outside Python's library and the installed packages
    (the user's `utils.py` beside the training script); never one of `_LIBRARIES`."""
    package = module.split(".")[0]
    if package in _LIBRARIES:
        return False
    if module == home or package == home.split(".")[0]:
        return True
    file = getattr(sys.modules.get(module), "__file__", None)
    return bool(file) and not os.path.realpath(file).startswith(_installed_roots())


def _class_globals(cls) -> dict:
    """The globals of the module that defines `cls`: its own functions' (a class made by
    `exec`, or in a module no longer in `sys.modules`, has them too), else its module's."""
    for value in vars(cls).values():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, types.FunctionType):
            return value.__globals__
    module = sys.modules.get(getattr(cls, "__module__", ""))
    return vars(module) if module is not None else {}


#: How deep `_own_generators` looks through helpers (`self.a.b.rng` is three), and how many
#: objects it reads at most.
_HELPER_DEPTH, _HELPER_OBJECTS = 4, 2000


def _own_generators(dataset) -> list[tuple[str, Any]]:
    """`(name, generator)` of the generators a Dataset holds itself: a `random.Random`, a
    NumPy `Generator` or `RandomState` or a `torch.Generator` in one of its attributes
    (`self.rng = np.random.default_rng()`), held by a helper of the user's own code, however
    it is reached (`self.noise = LabelNoise(0.02)` drawing from its `self.rng`; a helper's
    helper; helpers in a list, tuple or dict; a class of the user's other module), up to
    `_HELPER_DEPTH` attributes deep (not the transform, which hpuload runs itself), or among
    the globals of the Dataset's module and its helpers' modules."""
    np = sys.modules.get("numpy")
    kinds: tuple = (random.Random, torch.Generator)
    if np is not None:
        kinds += (np.random.Generator, np.random.RandomState)
    transform, home = transform_attribute(dataset), type(dataset).__module__

    def users(value) -> bool:
        return not isinstance(value, type) and _users_module(str(getattr(type(value), "__module__", "")), home)

    found: list[tuple[str, Any]] = []
    modules = [home]
    read = {id(dataset)} | ({id(getattr(dataset, transform, None))} if transform else set())
    # (how its name begins, the path to it, the value): the Dataset's attributes, and the
    # helpers its module holds as globals.
    level = [("", f"self.{k}", v) for k, v in getattr(dataset, "__dict__", {}).items() if k != transform]
    own_globals = _class_globals(type(dataset))
    level += [("its module's ", k, v) for k, v in own_globals.items() if users(v)]
    for _ in range(_HELPER_DEPTH):
        deeper = []
        for whose, name, value in level:
            if id(value) in read or len(read) >= _HELPER_OBJECTS:
                continue
            read.add(id(value))
            if isinstance(value, kinds):
                found.append((f"{whose}`{name}`", value))
            elif isinstance(value, (list, tuple)) and len(value) <= 64:
                deeper += [(whose, f"{name}[{i}]", v) for i, v in enumerate(value)]
            elif isinstance(value, dict) and len(value) <= 64:
                deeper += [(whose, f"{name}[{k!r}]", v) for k, v in value.items()]
            elif users(value):
                modules.append(type(value).__module__)
                try:
                    held = dict(vars(value))
                except Exception:  # no `__dict__` (slots, a proxy that refuses)
                    held = {}
                deeper += [(whose, f"{name}.{k}", v) for k, v in held.items()]
        level = deeper
    for name in dict.fromkeys(modules):
        module = sys.modules.get(name)
        held = own_globals if name == home else vars(module) if module is not None else {}
        if name in ("random", "numpy.random", "torch"):
            continue
        whose = "its module's" if name == home else f"module `{name}`'s"
        found += [(f"{whose} `{k}`", v) for k, v in held.items() if isinstance(v, kinds)]
    seen: set[int] = set()
    return [(name, g) for name, g in found if id(g) not in seen and not seen.add(id(g))]


def _state_of(generator):
    if isinstance(generator, random.Random):
        return generator.getstate()
    if isinstance(generator, torch.Generator):
        return generator.get_state()
    if hasattr(generator, "bit_generator"):  # NumPy's Generator
        import copy

        return copy.deepcopy(generator.bit_generator.state)
    return generator.get_state()  # NumPy's RandomState


def _set_state(generator, state) -> None:
    if isinstance(generator, random.Random):
        generator.setstate(state)
    elif isinstance(generator, torch.Generator):
        generator.set_state(state)
    elif hasattr(generator, "bit_generator"):
        generator.bit_generator.state = state
    else:
        generator.set_state(state)


class _Generators:
    """The generators a Dataset's code may draw from: Python's, torch's and NumPy's global
    ones, and its own (`_own_generators`). `states()` reads them all; `moved` names those
    that differ between two readings (drawn from in between, however little); `restore`
    puts the Dataset's own back (the global ones are the caller's to restore)."""

    def __init__(self, dataset):
        self.own = _own_generators(dataset)

    def states(self) -> tuple:
        return _generator_states(), tuple(_state_of(g) for _, g in self.own)

    def moved(self, before: tuple, after: tuple) -> list[str]:
        names = []
        (a, own_a), (b, own_b) = before, after
        if a[0] != b[0]:
            names.append("Python's `random` global generator")
        if not torch.equal(a[1], b[1]):
            names.append("torch's global generator")
        if a[2] is not None and b[2] is not None and not _same_state(a[2], b[2]):
            names.append("NumPy's `np.random` global generator")
        names += [f"its own generator {name}" for (name, _), x, y in zip(self.own, own_a, own_b) if not _same_state(x, y)]
        return names

    def restore(self, state: tuple) -> None:
        for (_, generator), own in zip(self.own, state[1]):
            _set_state(generator, own)


def _drawing_line(dataset, indices, generators: _Generators) -> str | None:
    """`file:line (code)` of the Dataset's own code where a line drew from a generator, found
    by running `dataset[i]` for each of `indices` (the probe's stand-ins in place, the
    generators restored after) traced line by line in the class's file, the generators'
    states compared after each line there (a draw by a compiled method, NumPy's, shows no
    call to a profiler); None where none of them drew there (a rare draw, or one made in
    another file)."""
    import linecache

    from ._tail import _Isolated

    own = _source_file(dataset)
    if own is None:
        return None
    found: list[str] = []
    start: list[tuple] = []

    def in_frame(frame, event, arg):
        if os.path.abspath(frame.f_code.co_filename) != own:
            return None
        last: list[int] = []

        def line(frame, event, arg):
            if found:
                return None
            if event in ("line", "return"):
                # The line before this event has run: did it draw?
                if last and generators.moved(start[0], generators.states()):
                    code = linecache.getline(frame.f_code.co_filename, last[0]).strip()
                    found.append(f"{os.path.basename(own)}:{last[0]} (`{code}`)")
                    return None
                last[:] = [frame.f_lineno]
            return line

        return line

    previous = sys.gettrace()
    for i in indices:
        with _Isolated():
            start[:] = [generators.states()]
            sys.settrace(in_frame)
            try:
                dataset[i]
            except Exception:
                pass
            finally:
                sys.settrace(previous)
                generators.restore(start[0])
        if found:
            return found[0]
    return None


#: How many of the probed indices are probed again (`_again`).
_AGAIN = 64


def _again(n: int) -> list[int]:
    """Which of `n` probed indices (by position) to probe a second time: the first three and
    up to `_AGAIN` in all, spread over the rest. A Dataset that changes its file or label at
    random one call in 20 shows on one of 64 with a probability over 0.99."""
    if n <= _AGAIN:
        return list(range(n))
    return sorted({0, 1, 2} | {3 + k * (n - 3) // (_AGAIN - 3) for k in range(_AGAIN - 3)})


def _same_values(a: tuple, b: tuple) -> bool:
    """Plain values equal, type for type (tensors and NumPy arrays by value, shape and
    dtype)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if type(x) is not type(y):
            return False
        if isinstance(x, torch.Tensor):
            if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(x, y):
                return False
        elif type(x).__name__ == "ndarray":
            import numpy as np

            if x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(x, y):
                return False
        elif not x == y:
            return False
    return True


def answer_on_this_thread() -> None:
    """`answering` for the rest of this thread's life (a loader worker's)."""
    install()
    _answering.on = True


#: `_traced`'s answers, by the callable's id: `(callable, its state, the steps or None)`;
#: the state None for one whose code names no answered functional.
_TRACED: dict[int, tuple] = {}


def _callable_state(fn) -> tuple:
    """What a callable of the user's computes from, shallowly: its attributes' (an object's)
    and defaults', closure cells' and the globals its code names' identities and plain values,
    so that a reassigned size or a changed global shows."""

    def ident(v):
        return (id(v), v) if isinstance(v, (int, float, str, bool, type(None), tuple)) else id(v)

    state = [tuple((k, ident(v)) for k, v in getattr(fn, "__dict__", {}).items())]
    for f in _code_of(fn):
        cells = tuple(ident(c.cell_contents) for c in (f.__closure__ or ()) if _filled(c))
        names = tuple((n, ident(f.__globals__.get(n))) for n in f.__code__.co_names if n in f.__globals__)
        state.append((id(f.__code__), ident(f.__defaults__), cells, names))
    return tuple(state)


def _code_of(fn) -> list:
    """The functions a callable runs its own code in: itself (a function, a method), or its
    class's `__call__` (or a module's `forward`)."""
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if isinstance(target, types.FunctionType):
        return [target]
    found = []
    for name in ("__call__", "forward"):
        f = getattr(type(fn), name, None)
        if isinstance(f, types.FunctionType) and (f.__module__ or "").split(".")[0] not in _LIBRARIES:
            found.append(f)
    return found


def _names_in(code) -> set[str]:
    """The names a code object and the code nested in it (closures, comprehensions) use."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_in(const)
    return names


#: What a callable's code must name to be looked through (`traced`): torchvision's
#: functionals hpuload answers.
_FUNCTIONAL_NAMES = frozenset({*_FUNCTIONAL_STEPS, *_FUNCTIONAL_STEPS_V2, "crop", "resized_crop"})


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def traced(fn) -> list | None:
    """The torchvision transforms a callable of the user's (a transform class, a function, a
    step of a `Compose`) is, where its code calls only torchvision's functional API on the
    image, with arguments of its own (`MyTransform.__call__`: `TF.resize(img, self.size)`,
    `TF.center_crop`, `TF.to_tensor`): the steps it takes, read by calling it on a stand-in
    image while probing (`_functional_step`), or None. It must draw nothing, change nothing of
    its own, read nothing of the image (its size, its pixels), and give what those steps give,
    byte for byte, on test images of several sizes. Kept while its state (`_callable_state`) is.
    Only code that names one of those functionals is called at all."""
    if not callable(fn) or isinstance(fn, (type, LazyImage, Recorded)):
        return None
    module = (type(fn) if not isinstance(fn, (types.FunctionType, types.MethodType)) else fn).__module__ or ""
    if module.split(".")[0] in (*_LIBRARIES, "timm", "albumentations", "transformers", "diffusers"):
        return None
    known = _TRACED.get(id(fn))
    if known is not None and known[0] is fn and known[1] is None:
        return None  # its code names no such functional (that does not change)
    if known is None or known[0] is not fn:
        # Only code that names such a functional is called (calling the user's code has
        # effects: one that ends its process, writes files, counts its calls).
        codes = _code_of(fn)
        if not codes or not any(_names_in(f.__code__) & _FUNCTIONAL_NAMES for f in codes):
            _TRACED[id(fn)] = (fn, None, None)
            return None
    state = _callable_state(fn)
    if known is not None and known[0] is fn and known[1] == state:
        return known[2]
    steps = _trace(fn, state)
    _TRACED[id(fn)] = (fn, state, steps)
    return steps


def _trace(fn, state) -> list | None:
    from ._behaviour import generator_states, generators_kept

    install()
    was_on, answered = getattr(_probing, "on", False), getattr(_plans, "answered", False)
    with generators_kept(), _NumpyArrays():
        before = generator_states()
        _probing.on = True
        try:
            out = fn(LazyImage("", rgb=True))
        except Exception:  # noqa: BLE001 - it needs what the stand-in does not answer
            out = None
        finally:
            _probing.on = was_on
            _plans.answered = answered
        moved = not _same_state(before, generator_states())
    if moved or not isinstance(out, LazyImage) or _callable_state(fn) != state or out.held == "unknown":
        return None
    if not out.before or not all(isinstance(s, Applied) and s.fixed for s in out.before):
        return None
    steps = [s.transform for s in out.before]
    return steps if _gives_alike(fn, steps) else None


def _gives_alike(fn, steps: list) -> bool:
    """Whether `fn` and the Compose of `steps` give the same (tensors, PIL images) for RGB
    test images of several sizes, drawing nothing."""
    from PIL import Image
    from torchvision import transforms as T

    from ._behaviour import _images, generators_kept

    composed = T.Compose(steps)
    images = [im.convert("RGB") for im in _images()]
    images += [images[2].resize((300, 250)), images[0].resize((260, 410))]
    with generators_kept():
        for image in images:
            outcomes = []
            for run in (fn, composed):
                try:
                    outcomes.append(run(image.copy()))
                except Exception as e:  # noqa: BLE001 - compared by kind
                    outcomes.append(type(e))
            a, b = outcomes
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
                if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a, b):
                    return False
            elif isinstance(a, Image.Image) and isinstance(b, Image.Image):
                if a.mode != b.mode or a.size != b.size or a.tobytes() != b.tobytes():
                    return False
            elif a != b:
                return False
    return True
