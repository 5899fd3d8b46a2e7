"""An albumentations `Compose` (the transform of most Kaggle-style Datasets, which read their
images with `cv2.imread` and call `self.transforms(image=image)["image"]`) translated to
hpuload's pipeline ops, each computed as albumentations computes it on a uint8 RGB image:

- `Resize(height, width)`, and `RandomResizedCrop(size, scale, ratio)` (the window drawn as
  albumentations draws it, which is torchvision's draw: ten tries of a log-uniform aspect
  ratio and a uniform area, then the centre fallback), with `interpolation=cv2.INTER_LINEAR`
  (their default), `INTER_NEAREST` or `INTER_AREA`: OpenCV's `cv2.resize`, byte for byte
  (`cv2_linear`, `cv2_nearest`, `cv2_area`); `INTER_CUBIC` within one level (`cv2_cubic`:
  opencv-python's wheels resize 8-bit images with IPP's cubic, whose own arithmetic the
  continuous filter gives in 99.9% of values, one level off in the rest);
- `SmallestMaxSize(max_size)` (the shorter side to `max_size`, the other scaled and rounded
  as albumentations rounds it) followed by `CenterCrop` or `RandomCrop`, and those crops of
  the image itself or after a `Resize`: a window of `cv2.resize`'s output at albumentations'
  offset (`(size - crop) // 2` for the centre; uniform for the random crop), byte for byte
  (a `HorizontalFlip` or `VerticalFlip` between the resize and its crop: the crop cut at the
  mirrored offset where the flip falls, then flipped, which is the crop of the flipped resize);
  an `Affine` or `ShiftScaleRotate` between `SmallestMaxSize` and its crop (albumentations'
  classification example) warps the whole resize, drawn on its size, and only the crop's
  part of the warp is computed; any other pixel step there runs on each whole resize, drawn
  on its size, before the crop is cut; `PadIfNeeded(min_height, min_width)` then `RandomCrop`
  (or `RandomCrop(pad_if_needed=True)`): the image padded centred, with a constant fill (to at
  least the crop, less than twice it) or its edge replicated or mirrored (to the crop), and the
  crop's offset uniform over the padded image; `LongestMaxSize(max_size)` then `PadIfNeeded` (centred, a
  constant fill, to at least `max_size` on both sides): the resize centred on the fill;
- after it, `HorizontalFlip(p)`, `VerticalFlip(p)`, `Transpose(p)` and `RandomRotate90(p)`
  (of a square image), `Affine`, `ShiftScaleRotate` and `Rotate` (bilinear: OpenCV 5's `warpAffine`,
  each border mode but wrap), `RandomBrightnessContrast` (brightness by the maximum, albucore's
  float32 table), `RGBShift` (whole levels per channel, saturating), `RandomGamma` (its
  truncated table), `ChannelShuffle`, `ChannelDropout` (a whole-level fill), `Downscale` (nearest both ways),
  `ImageCompression` to JPEG (OpenCV's libjpeg-turbo encoding and decoding, reproduced),
  `CLAHE` (OpenCV's 8-bit Lab and CLAHE of L, reproduced), `InvertImg`, `Solarize`, `Posterize` (one range of
  bits), `Equalize` (by channels: OpenCV's or its `pil` table), `ToGray` (OpenCV's
  fixed-point grey in each channel), `HueSaturationValue`
  (OpenCV's byte HSV, as its x86-64 wheels compute it), `ColorJitter` (its four steps in its
  drawn order: albucore's tables for brightness and contrast around OpenCV's mean grey,
  OpenCV's fused `addWeighted` with the grey for saturation, the byte-HSV hue shift),
  `Sharpen` (its kernel method) and `Emboss` (their 3x3 float32 kernels, as numpy makes them,
  through `cv2.filter2D`), `Blur` and `MedianBlur` (`cv2.blur`,
  `cv2.medianBlur`), `MotionBlur` (albumentations' line kernel through `cv2.filter2D`, up to
  9x9), `GaussianBlur` (its own kernel through `cv2.sepFilter2D`), `GridDistortion` (its grid drawn
  and normalized as albumentations does) and `OpticalDistortion` (camera mode: OpenCV's
  undistortion map of its camera), through OpenCV 5's `remap`, and albumentations' compositions
  of them (`OneOf`, `SomeOf`, `RandomOrder`, `OneOrOther`, `Sequential`, nested), each drawn
  with albumentations' distributions and computed byte for byte; `GaussNoise` (a value per pixel), drawn from the same distributions as
  albumentations' (not OpenCV's generator's values), truncated and added as albucore adds;
- `Normalize(mean, std, max_pixel_value=255)`: `(x - mean * 255) * (1 / (std * 255))` in
  float32, as its lookup table computes it (bit for bit);
- `ToFloat()` (dividing by 255): albucore's f32 table of `x / 255`;
- `CoarseDropout` with a constant fill, last (before or after `Normalize`): its holes drawn as
  albumentations draws them and erased in the output, the fill normalized as the user's own
  `Normalize` would normalize those bytes;
- `ToTensorV2()` last: the `[C, H, W]` tensor, float32 after `Normalize`, else uint8. Without
  it, the `[H, W, C]` NumPy array, as the Dataset's code then hands it out (`_probe.Output`:
  transposed, cast to float32, divided by 255, made a tensor; `_as_handed_out`).

The pixel steps above may also come before the resize or crop (all but `Transpose`,
`RandomRotate90`, `Downscale` and `GridDistortion`, which hpuload runs at the output's size):
hpuload then runs them on the whole decoded image, drawn on its size, as albumentations does.

A grey read (`cv2.imread(path, cv2.IMREAD_GRAYSCALE)`, `_probe.READ_GREY`) is decoded grey
(the pipeline's `grey_read`: a JPEG's luma as libjpeg decodes it to grey) and runs as three
equal channels, of which the loader hands out the first: its `Compose` must end in `ToTensorV2`
(the `[1, H, W]` tensor) and hold only steps that albumentations computes on a grey image as on
each channel of three equal ones (`GREY_ALIKE`: the geometry, brightness and contrast, gamma,
blurs, sharpening, ...; a `Normalize` takes its first mean and deviation, as albumentations
does on one channel); a grey read made three channels (`cv2.COLOR_GRAY2RGB`, `READ_GREY_RGB`)
runs every step, as any RGB array.

`translate_split` runs the longest prefix of such uint8 steps natively and the steps after it
(any other albumentations op) in Python, as a `Tail`. A `Compose` with no such prefix (one
size for every image: a resize or a crop), or
that does not end in `ToTensorV2` and whose array the Dataset's code changes otherwise, or with
bounding boxes, is `Unsupported`, naming why: the loader then falls back to torch's
DataLoader. A `Compose` given a mask too is read by `translate_with_mask`: the mask moved by a
padded random crop, a `Resize`, the letterbox, or a crop of the image or of its resize, and
the flips and warps after them."""

from __future__ import annotations

import json
from typing import Any

from ._transforms import Tail as _Tail
from ._transforms import Unsupported

#: OpenCV's interpolation flags (`cv2.INTER_LINEAR`), without importing cv2.
_INTER_NEAREST = 0
_INTER_LINEAR = 1
_INTER_CUBIC = 2
#: OpenCV's interpolations hpuload's resizes compute, by their flags: byte for byte but
#: `INTER_CUBIC`, within one level.
_CV2_INTERPOLATIONS = {0: "cv2_nearest", 1: "cv2_linear", 2: "cv2_cubic", 3: "cv2_area"}


def is_compose(obj: Any) -> bool:
    """Whether `obj` is albumentations' `Compose`."""
    cls = type(obj)
    return cls.__name__ == "Compose" and cls.__module__.split(".")[0] == "albumentations"


def _name(t: Any) -> str:
    return type(t).__name__


def _p(t: Any) -> float:
    return float(getattr(t, "p", 1.0))


def _always(t: Any) -> None:
    if _p(t) != 1.0:
        raise Unsupported(f"albumentations' {_name(t)} with p={_p(t)} (a size drawn per image)")


def _interpolation(t: Any) -> str:
    """The resize's OpenCV interpolation as hpuload names it (Pillow's, for the `Resize`
    standing for a Pillow resize in the Dataset's code)."""
    if getattr(t, "filter", None) is not None and isinstance(t, Resize):
        return t.filter
    flag = getattr(t, "interpolation", _INTER_LINEAR)
    if flag not in _CV2_INTERPOLATIONS:
        raise Unsupported(
            f"albumentations' {_name(t)} with interpolation {flag} (hpuload runs cv2.INTER_LINEAR, "
            "INTER_NEAREST, INTER_AREA and INTER_CUBIC)"
        )
    if getattr(t, "area_for_downscale", None):
        raise Unsupported(f"albumentations' {_name(t)} with area_for_downscale={t.area_for_downscale!r}")
    return _CV2_INTERPOLATIONS[flag]


def _size(t: Any) -> list[int]:
    size = getattr(t, "size", None)
    if size is None:  # albumentations 1.x: height and width
        size = (t.height, t.width)
    h, w = size
    return [int(h), int(w)]


def _channels(value: Any, what: str, grey: bool = False) -> list[float]:
    values = [float(v) for v in value] if isinstance(value, (list, tuple)) else [float(value)] * 3
    if grey:
        # On one channel albumentations normalizes with the first value.
        return values[:1] * 3
    if len(values) != 3:
        raise Unsupported(f"albumentations' Normalize with {len(values)} {what} values (hpuload's images are RGB)")
    return values


#: The steps albumentations computes on a grey `[H, W]` image as it computes them on each
#: channel of three equal ones (a test checks each against albumentations, drawn alike), with
#: the compositions of them: what the Compose of a grey read may hold (`Normalize` apart: it
#: takes its first mean and deviation on one channel).
GREY_ALIKE = frozenset(
    {
        "Resize", "RandomResizedCrop", "SmallestMaxSize", "LongestMaxSize", "CenterCrop", "RandomCrop",
        "PadIfNeeded", "HorizontalFlip", "VerticalFlip", "Transpose", "RandomRotate90", "Affine",
        "ShiftScaleRotate", "Rotate", "GridDistortion", "OpticalDistortion", "RandomBrightnessContrast", "RandomGamma",
        "InvertImg", "Solarize", "Posterize", "Blur", "MedianBlur", "GaussianBlur", "MotionBlur", "Sharpen",
        "Emboss", "Downscale", "CoarseDropout", "ToFloat", "Normalize", "ToTensorV2",
    }
)


def _alike_on_grey(steps: list) -> None:
    """Refuses (`Unsupported`) a step of a grey read's Compose outside `GREY_ALIKE`, looking
    inside compositions, or one with a fill of several values (a colour, on one channel)."""
    for t in _flattened(steps):
        name = _name(t)
        if name not in GREY_ALIKE:
            raise Unsupported(
                f"albumentations' {name} on a grey read (cv2.IMREAD_GRAYSCALE), which hpuload runs as three equal "
                "channels: it runs such steps natively only where albumentations computes a grey image as each of those"
            )
        fill = getattr(t, "fill", None)
        if isinstance(fill, (list, tuple)) and len({float(v) for v in fill}) > 1:
            raise Unsupported(f"albumentations' {name} with a colour fill on a grey read")


def _grey(before: tuple) -> str | None:
    from ._probe import grey_read

    return grey_read(before)


def _read_grey(pipeline: str, before: tuple) -> str:
    """`pipeline` with the grey read the Dataset's code makes (`before`): each image decoded
    grey, and one channel handed out unless the code made three of it."""
    from ._probe import READ_GREY, png_grey_weights

    grey = _grey(before)
    if grey is None:
        return pipeline
    spec = json.loads(pipeline)
    spec["grey_read"] = True
    weights = png_grey_weights("cv2")
    if weights is not None:
        spec["grey_png_weights"] = list(weights)
    if grey == READ_GREY:
        spec["single_channel"] = True
    return json.dumps(spec)


def _checked_steps(compose: Any, before: tuple = ()) -> list:
    """The `Compose`'s steps (none for no `Compose`: a Dataset without a transform), after a
    `Resize` standing for the resize the Dataset's code runs before it (`before`, as
    `_probe.LazyImage.before`: OpenCV's `cv2.resize`, or Pillow's `Image.resize` of the image
    the array was made of)."""
    steps = []
    if compose is not None:
        if _p(compose) != 1.0:
            raise Unsupported(f"albumentations' Compose with p={_p(compose)}")
        processors = getattr(compose, "processors", None)
        if processors:
            raise Unsupported(f"albumentations' Compose with {', '.join(processors)} targets (hpuload gives images)")
        steps = list(compose.transforms)
    # The grey read itself is the pipeline's (`_read_grey`).
    before = tuple(step for step in before if _grey((step,)) is None)
    if before:
        (resized,) = before  # one resize: an array of a grey image, or one resized twice, is refused
        if resized.by == "pil":
            steps = [Resize.by_pillow(resized), *steps]
        elif resized.filter not in _CV2_INTERPOLATIONS:
            raise Unsupported(
                f"cv2.resize with interpolation {resized.filter} before the Compose (hpuload runs cv2.INTER_LINEAR, "
                "INTER_NEAREST, INTER_AREA and INTER_CUBIC)"
            )
        else:
            steps = [Resize(resized.height, resized.width, resized.filter), *steps]
    _no_remap_after_cubic(steps)
    return steps


#: Steps that map levels by the image's own histogram or by thresholds, so that one level of
#: difference in what they are given can come out as many (`PixelOp::amplifies_level_differences`).
_REMAP_LEVELS = frozenset({"CLAHE", "Equalize", "Posterize", "Solarize"})


def _flattened(steps: list):
    """The steps in the order they run, those inside compositions in their place."""
    for t in steps:
        if _name(t) in _COMPOSITIONS:
            yield from _flattened(list(getattr(t, "transforms", [])))
        else:
            yield t


def _no_remap_after_cubic(steps: list) -> None:
    """Refuses (`Unsupported`) a step of `_REMAP_LEVELS` after an `INTER_CUBIC` resize: hpuload's
    cubic is within one level of OpenCV's (`cv2_cubic`), which such a step can make many (a
    64x64 image resized to 64x16, then CLAHE: 7% of values more than a level apart), whether
    hpuload or albumentations runs the step."""
    cubic = None
    for t in _flattened(steps):
        name = _name(t)
        if cubic is not None and name in _REMAP_LEVELS:
            raise Unsupported(
                f"albumentations' {name} after {cubic} with cv2.INTER_CUBIC (hpuload's cubic is within one level "
                f"of OpenCV's, and {name} can make that level many)"
            )
        if name in ("Resize", "RandomResizedCrop", "SmallestMaxSize", "LongestMaxSize") and getattr(
            t, "filter", None
        ) is None and getattr(t, "interpolation", _INTER_LINEAR) == _INTER_CUBIC:
            cubic = "cv2.resize" if isinstance(t, Resize) else name


class Resize:
    """`cv2.resize(image, (width, height), interpolation=...)` in the Dataset's code before its
    `Compose`: read as albumentations' own `Resize`, whose `cv2.resize` call it is. `by_pillow`:
    Pillow's `Image.resize` of the PIL image the Dataset made its array of (`filter`: the
    interpolation as torchvision's `Resize` of a PIL image names it, which is that call)."""

    def __init__(self, height: int, width: int, interpolation: int, filter: str | None = None):
        self.size, self.interpolation, self.p = (height, width), interpolation, 1.0
        self.filter = filter

    @classmethod
    def by_pillow(cls, resized) -> "Resize":
        from ._transforms import _resize_interp, pillow_resize

        step = pillow_resize(resized.height, resized.width, resized.filter)
        return cls(resized.height, resized.width, _INTER_LINEAR, _resize_interp(step, "Resize", on_tensor=False))


class Whole:
    """What a Dataset without a transform hands out of images all of one `(height, width)`
    (found from their headers), kept whole: read as a `Compose` of a `CenterCrop` to that
    size, which cuts nothing and fixes the batch's shape."""

    p = 1.0
    processors = None

    def __init__(self, size: tuple[int, int]):
        self.transforms = [CenterCrop(*size)]


class CenterCrop:
    """`Whole`'s crop, read as albumentations' own `CenterCrop(height, width)` (as `Resize`
    below stands for a resize in the Dataset's code)."""

    p = 1.0
    pad_if_needed = False

    def __init__(self, height: int, width: int):
        self.size = (int(height), int(width))


class RandomCrop(CenterCrop):
    """`Padded`'s crop, read as albumentations' own `RandomCrop(height, width)` of the whole
    padded image: one place to cut, which cuts nothing."""


def lone_pad(compose: Any) -> tuple[int, int] | None:
    """`(min_height, min_width)` of a `Compose` whose first step is a `PadIfNeeded` that no
    crop follows (segmentation_models_pytorch's CamVid validation, `A.Compose([A.PadIfNeeded(384,
    480)])`): it pads each image centred to at least that size and cuts nothing, so what it
    gives has the image's size where the image is larger, one size for every image only over
    images of one size (`Padded`); None for any other."""
    steps = list(getattr(compose, "transforms", ())) if is_compose(compose) else []
    if not steps or _name(steps[0]) != "PadIfNeeded" or any(_name(t) in _RESIZES_OR_CROPS for t in steps[1:]):
        return None
    return int(steps[0].min_height), int(steps[0].min_width)


#: albumentations' steps that set the output's size.
_RESIZES_OR_CROPS = frozenset(
    {"Resize", "RandomResizedCrop", "SmallestMaxSize", "LongestMaxSize", "CenterCrop", "RandomCrop", "PadIfNeeded", "Crop"}
)


class Padded:
    """A `Compose` whose first step is a lone `PadIfNeeded` (`lone_pad`), over images of one
    `(height, width)` (found from their headers): read as that pad to the larger of its size
    and the images' then a `RandomCrop` of that whole size (which cuts nothing), the rest
    after them, so that its output has one size, the one albumentations gives."""

    p = 1.0
    processors = None

    def __init__(self, compose: Any, size: tuple[int, int]):
        import copy

        pad, *rest = compose.transforms
        out = (max(int(pad.min_height), int(size[0])), max(int(pad.min_width), int(size[1])))
        pad = copy.copy(pad)
        pad.min_height, pad.min_width = out
        self.transforms = [pad, RandomCrop(*out), *rest]


def translate(compose: Any, output=None, before: tuple = ()) -> tuple[str, str]:
    """`(pipeline JSON, output dtype)` for an albumentations `Compose` applied to the RGB
    image of a Dataset's `__getitem__`, or `Unsupported`. `output` (`_probe.Output`): what
    the Dataset hands out of a Compose that does not end in `ToTensorV2` (its array,
    transposed, cast or divided by 255 as the Dataset's code does); `before`
    (`_probe.LazyImage.before`): the `cv2.resize` its code runs before the Compose."""
    from ._probe import READ_GREY

    # A `Lambda` of other targets only (a mask's, when the Compose is given none) does
    # nothing to an image.
    steps = [t for t in _checked_steps(compose, before) if not _leaves_image(t)]
    one = _grey(before) == READ_GREY
    if one:
        if not steps or _name(steps[-1]) != "ToTensorV2" or output is not None:
            raise Unsupported(
                "a grey read (cv2.IMREAD_GRAYSCALE) whose Compose gives NumPy arrays (hpuload gives a grey read "
                "natively as ToTensorV2's [1, H, W] tensors)"
            )
        _alike_on_grey(steps)
    if not steps or _name(steps[-1]) != "ToTensorV2":
        if output is None:
            raise Unsupported("an albumentations Compose that does not end in ToTensorV2 (it gives NumPy arrays)")
        pipeline, dtype = _translate(steps, open_end=False, output=output)
        return _read_grey(pipeline, before), dtype
    if output is not None:
        raise Unsupported("the albumentations Compose ends in ToTensorV2 now, and the Dataset's code was learnt on its arrays")
    if _p(steps[-1]) != 1.0:
        raise Unsupported("albumentations' ToTensorV2 with p below 1")
    pipeline, dtype = _translate(steps[:-1], open_end=False, grey=one)
    return _read_grey(pipeline, before), dtype


def translate_with_mask(compose: Any, output=None) -> tuple[str, str, "MaskSteps"]:
    """`(pipeline JSON, dtype, MaskSteps)` for an albumentations `Compose` given an RGB image
    and a mask of one byte a pixel (transformers' `run_semantic_segmentation.py`: a `Lambda`
    on the mask, `PadIfNeeded`, `RandomCrop`, a flip, `Normalize`, `ToTensorV2` to train; a
    `Lambda`, `Resize`, `Normalize`, `ToTensorV2` to evaluate), or `Unsupported`. The mask
    moves only by the padded random crop, the resize, `LongestMaxSize` then `PadIfNeeded`
    (the letterbox), or a `CenterCrop` or `RandomCrop` (of the image, or of its `Resize` or
    `SmallestMaxSize`, flips between them), or a `RandomResizedCrop`, and the flips,
    transposes, quarter turns and nearest warps (`Rotate`, `Affine`, `ShiftScaleRotate`)
    after them: a step that would move it otherwise (or fill it, as `CoarseDropout` may) is
    refused. `output` (`_probe.Output`):
    a Dataset of the user's own hands out the arrays of a Compose that does not end in
    `ToTensorV2` as its code changed them (`translate`'s), its masks as NumPy arrays."""
    from ._segmentation import MaskSteps

    steps = _checked_steps(compose)
    table = None
    while steps and _name(steps[0]) == "Lambda":
        table = _mask_table(steps.pop(0), table)
    if output is not None:
        if steps and _name(steps[-1]) == "ToTensorV2":
            raise Unsupported("the albumentations Compose ends in ToTensorV2 now, and the Dataset's code was learnt on its arrays")
        steps = [*steps, None]  # where `ToTensorV2` would be: the steps below stop before it
    elif not steps or _name(steps[-1]) != "ToTensorV2" or _p(steps[-1]) != 1.0 or getattr(steps[-1], "transpose_mask", False):
        raise Unsupported("an albumentations Compose given a mask that does not end in ToTensorV2 (hpuload gives the mask's [H, W] tensor)")
    crops = [k for k, t in enumerate(steps) if _name(t) in ("CenterCrop", "RandomCrop")]
    if crops and not getattr(steps[crops[0]], "pad_if_needed", False) and _name(steps[0]) != "PadIfNeeded":
        # A crop of the image, or of its `Resize` or `SmallestMaxSize` (flips between them):
        # the mask resized so, flipped and cut at the same place.
        k = crops[0]
        before, between = (steps[0], steps[1:k]) if _name(steps[0]) in ("Resize", "SmallestMaxSize") else (None, steps[:k])
        if any(_name(t) not in ("HorizontalFlip", "VerticalFlip") for t in between):
            raise Unsupported(
                f"albumentations' {', '.join(_name(t) for t in between)} before a crop of a mask (hpuload moves masks by a "
                "resize, flips and the crop)"
            )
        if before is not None:
            _nearest_on_mask(before)
        fill, warped = _after_crop(steps[k + 1 : -1])
        pipeline, dtype = _translate(steps[:-1], open_end=False, output=output)
        return pipeline, dtype, MaskSteps(tuple(_size(steps[k])), fill, table, nearest="opencv", warped=warped)
    if _name(steps[0]) == "RandomResizedCrop":
        # The mask cut to the image's window, then resized to the output as the image was.
        rrc = steps[0]
        _nearest_on_mask(rrc)
        fill, warped = _after_crop(steps[1:-1])
        pipeline, dtype = _translate(steps[:-1], open_end=False, output=output)
        return pipeline, dtype, MaskSteps(tuple(_size(rrc)), fill, table, resized=True, nearest="opencv", warped=warped, window=True)
    if _name(steps[0]) == "Resize":
        resize = steps[0]
        _always(resize)
        _nearest_on_mask(resize)
        fill, warped = _after_crop(steps[1:-1])
        pipeline, dtype = _translate(steps[:-1], open_end=False, output=output)
        return pipeline, dtype, MaskSteps(tuple(_size(resize)), fill, table, resized=True, nearest="opencv", warped=warped)
    if _name(steps[0]) == "LongestMaxSize" and len(steps) > 1 and _name(steps[1]) == "PadIfNeeded":
        # The letterbox: the mask resized as the image, then padded centred with `fill_mask`.
        longest, pad = steps[0], steps[1]
        _nearest_on_mask(longest)
        if int(getattr(pad, "border_mode", 0)) != 0:
            raise Unsupported(f"albumentations' PadIfNeeded of a mask with border mode {pad.border_mode} (hpuload fills a mask's padding)")
        fill, warped = _after_crop(steps[2:-1], pad)
        pipeline, dtype = _translate(steps[:-1], open_end=False, output=output)
        size = (int(pad.min_height), int(pad.min_width))
        return pipeline, dtype, MaskSteps(size, fill, table, nearest="opencv", placed=True, warped=warped)
    if _name(steps[0]) == "PadIfNeeded" and len(steps) > 1 and _name(steps[1]) == "RandomCrop":
        pad, crop, after = steps[0], steps[1], steps[2:-1]
    elif _name(steps[0]) == "RandomCrop" and getattr(steps[0], "pad_if_needed", False):
        pad, crop, after = steps[0], steps[0], steps[1:-1]
    else:
        raise Unsupported(
            f"an albumentations Compose given a mask that begins with {_name(steps[0]) if steps[0] is not None else 'no step'} (hpuload "
            "moves masks by a resize, a crop, the letterbox or a padded crop first, then by flips and warps)"
        )
    if int(getattr(pad, "border_mode", 0)) != 0:
        raise Unsupported(f"albumentations' {_name(pad)} of a mask with border mode {pad.border_mode} (hpuload fills a mask's padding)")
    fill, warped = _after_crop(after, pad)
    pipeline, dtype = _translate(steps[:-1], open_end=False, output=output)
    return pipeline, dtype, MaskSteps(tuple(_size(crop)), fill, table, warped=warped)


def _nearest_on_mask(t: Any, does: str = "resizes") -> None:
    """Refuses a step that moves a mask otherwise than by OpenCV's nearest neighbours (its
    `mask_interpolation`), which is how hpuload `does` masks."""
    if getattr(t, "mask_interpolation", _INTER_NEAREST) != _INTER_NEAREST:
        raise Unsupported(
            f"albumentations' {_name(t)} of a mask with mask_interpolation={t.mask_interpolation} (hpuload {does} "
            "masks with cv2.INTER_NEAREST)"
        )


def _leaves_image(t: Any) -> bool:
    """A `Lambda` with no function of the image."""
    if _name(t) != "Lambda":
        return False
    from albumentations.augmentations.pixel import functional as fpixel

    return getattr(t, "custom_apply_fns", {}).get("image") is fpixel.noop


def _mask_fill(t: Any) -> int:
    """`fill_mask` as OpenCV pads a uint8 mask with it."""
    fill = getattr(t, "fill_mask", 0)
    if isinstance(fill, (list, tuple)) and len(set(fill)) == 1:
        fill = fill[0]
    if not isinstance(fill, (int, float)) or isinstance(fill, bool):
        raise Unsupported(f"albumentations' {_name(t)} with fill_mask={fill!r}")
    return min(255, max(0, round(float(fill))))


def _mask_table(t: Any, table):
    """A leading `Lambda`: nothing on the image, and on the mask a function of each value alone
    (checked on every byte, in three arrangements), as a table of 256 bytes composed after
    `table`."""
    import numpy as np
    import torch

    _always(t)
    fns = getattr(t, "custom_apply_fns", {})
    from albumentations.augmentations.pixel import functional as fpixel

    if any(fns.get(k) is not fpixel.noop for k in ("image", "bboxes", "keypoints")):
        raise Unsupported("albumentations' Lambda on the image (hpuload runs a Lambda on the mask alone)")
    fn = fns.get("mask")
    if fn is fpixel.noop or fn is None:
        return table
    values = np.arange(256, dtype=np.uint8)
    arrangements = [values.reshape(16, 16), values[::-1].reshape(8, 32), np.random.default_rng(0).permutation(values).reshape(32, 8)]
    got = None
    for arranged in arrangements:
        try:
            out = fn(arranged.copy(), shape=arranged.shape)
        except Exception as e:  # noqa: BLE001 - what it cannot do on its own
            raise Unsupported(f"albumentations' Lambda on the mask raised {type(e).__name__}: {e} on a mask of every value") from None
        if not isinstance(out, np.ndarray) or out.dtype != np.uint8 or out.shape != arranged.shape:
            raise Unsupported("albumentations' Lambda on the mask gives other than a uint8 mask of its shape")
        mapped = np.empty(256, dtype=np.uint8)
        mapped[arranged.reshape(-1)] = out.reshape(-1)
        if got is not None and not np.array_equal(got, mapped):
            raise Unsupported("albumentations' Lambda on the mask is no function of each value alone")
        got = mapped
    mapped = torch.from_numpy(got)
    return mapped if table is None else mapped[table.long()]


#: albumentations' warps that move a mask by the image's own matrix (OpenCV's `warpAffine`).
_MASK_WARPS = ("Affine", "ShiftScaleRotate", "Rotate")


def _leaves_mask(t: Any) -> list:
    """A step after the crop of a Compose given a mask: an image-only step (a pixel op,
    `Normalize`), a flip, a transpose or quarter turn (of a square output), or a warp of the
    mask by the image's matrix (`_MASK_WARPS`, with `mask_interpolation` nearest), whose fall
    and matrix hpuload reads from the image's plan; compositions of them. The steps among
    them that move the mask otherwise than a flip."""
    import albumentations as A

    name = _name(t)
    if name in ("HorizontalFlip", "VerticalFlip") or isinstance(t, A.ImageOnlyTransform):
        return []
    if name in ("Transpose", "RandomRotate90"):
        return [t]
    if name in _MASK_WARPS:
        _nearest_on_mask(t, "warps")
        return [t]
    if name in _COMPOSITIONS:
        return [w for inner in t.transforms for w in _leaves_mask(inner)]
    raise Unsupported(f"albumentations' {name} on a mask (hpuload moves a mask by the crop, flips and warps alone)")


def _after_crop(steps: list, pad: Any = None) -> tuple[int, bool]:
    """`(fill, warped)` of a mask's steps after its crop or resize (`_leaves_mask` each), `pad`
    the step that padded it before (or None): the one `fill_mask` its padding and the constant
    borders of its warps show (albumentations may give each its own: refused), and whether a
    warp moves it."""
    moving = [w for t in steps for w in _leaves_mask(t)]
    warps = [w for w in moving if _name(w) in _MASK_WARPS and int(getattr(w, "border_mode", 0)) == 0]
    fillers = warps + ([pad] if pad is not None else [])
    fills = {_raw_fill(t) for t in fillers}
    if len(fills) > 1:
        raise Unsupported(f"albumentations' steps that fill a mask with different fill_mask values {sorted(fills)}")
    return (_mask_fill(fillers[0]) if fillers else 0), bool(moving)


def _raw_fill(t: Any) -> float:
    """`fill_mask` of one value (refused otherwise, `_mask_fill`), as a float."""
    _mask_fill(t)
    fill = getattr(t, "fill_mask", 0)
    return float(fill[0] if isinstance(fill, (list, tuple)) else fill)


def mask_filler(compose: Any) -> Any:
    """The first step of `compose` that may fill a mask (`PadIfNeeded`, a `RandomCrop` that
    pads if needed, a warp with a constant border, in a composition too), whose `fill_mask`
    (the same for each, `_after_crop`) the mask's padding holds; None for none."""
    for t in getattr(compose, "transforms", ()):
        name = _name(t)
        if name in _COMPOSITIONS:
            inner = mask_filler(t)
            if inner is not None:
                return inner
        elif name == "PadIfNeeded" or getattr(t, "pad_if_needed", False):
            return t
        elif name in _MASK_WARPS and int(getattr(t, "border_mode", 0)) == 0:
            return t
    return None


def in_bgr(pipeline: str) -> str:
    """`pipeline` for the BGR arrays `cv2.imread` gives a Dataset that does not convert them:
    the decoded image's channels reversed first, so that every step computes on the channels
    as albumentations computes on those arrays (a `Normalize`'s first mean on blue, a grey's
    weights, a fill's first value), and the batches are in BGR order as the Dataset's."""
    spec = json.loads(pipeline)
    spec["ops"].insert(0, {"op": "permute_channels", "order": [2, 1, 0]})
    return json.dumps(spec)


def translate_split(compose: Any, output=None, before: tuple = ()) -> tuple[str, str, "Tail | None"]:
    """`(pipeline JSON, dtype, tail)`: the whole `Compose` when hpuload translates it (tail
    None); else its longest prefix that starts with a resize and holds only uint8 steps hpuload
    runs, run natively to uint8 `[H, W, C]` images, and a `Tail` running the rest of its steps in
    Python on each of them, as albumentations runs them. `Unsupported` when not even a prefix
    translates."""
    try:
        pipeline, dtype = translate(compose, output, before)
        return pipeline, dtype, None
    except Unsupported as e:
        whole = e
    from ._probe import READ_GREY

    # A `Lambda` of other targets only (a mask's, when the Compose is given none) does
    # nothing to an image.
    steps = [t for t in _checked_steps(compose, before) if not _leaves_image(t)]
    if not steps or _name(steps[-1]) != "ToTensorV2" or output is not None or _grey(before) == READ_GREY:
        # The tail would give NumPy arrays, which the Dataset's loader collates otherwise; or
        # the Dataset's code after the Compose was learnt on arrays, not on its tensors; or
        # it would get three channels where albumentations gets a grey read's one.
        raise whole
    for k in range(len(steps) - 1, 0, -1):
        try:
            pipeline, _ = _translate(steps[:k], open_end=True)
        except Unsupported:
            continue
        return _read_grey(pipeline, before), "u8", Tail(steps[k:], str(whole), steps[:k])
    raise whole


def _translate(steps: list, *, open_end: bool, output=None, grey: bool = False) -> tuple[str, str]:
    """The ops of `steps` (a `Compose`'s, without its closing `ToTensorV2`). `open_end`:
    they are the prefix of a longer `Compose`, whose steps after them run in Python on the
    uint8 image they make, so no `Normalize` or `CoarseDropout` among them. `output`: what
    the Dataset makes of the array of a `Compose` without `ToTensorV2` (`translate`). `grey`:
    on a grey read's one channel, where `Normalize` takes its first mean and deviation."""
    ops: list[dict] = []
    size: list[int] | None = None  # the output's [h, w], once a resize or crop is read
    geometry: str | None = None  # the last geometric step's name while nothing else follows it
    dtype = "u8"
    norm = None
    padded = None  # a PadIfNeeded waiting for its RandomCrop
    holes: list[tuple[dict, bool]] = []  # each CoarseDropout's op, and whether Normalize follows it
    for t in steps:
        name = _name(t)
        if holes and name not in ("CoarseDropout", "Normalize"):
            raise Unsupported(f"albumentations' {name} after CoarseDropout (hpuload erases the holes last)")
        if dtype == "f32" and name != "CoarseDropout":
            raise Unsupported(f"albumentations' {name} after Normalize or ToFloat (hpuload normalizes last)")
        if name in ("Resize", "RandomResizedCrop", "SmallestMaxSize", "LongestMaxSize"):
            _always(t)
            # A crop of the image then its resize (`CenterCrop`, `Resize`): the crop is cut
            # out first, and the resize sees only its pixels.
            crop_first = name == "Resize" and geometry in ("CenterCrop", "RandomCrop") and len(ops) == 1
            if (geometry is not None or size is not None) and not crop_first:
                raise Unsupported(f"albumentations' {name} after another resize")
            if name in ("SmallestMaxSize", "LongestMaxSize"):
                side = _max_size(t)
                op = "albu_smallest_max_size" if name == "SmallestMaxSize" else "albu_longest_max_size"
                ops.append({"op": op, "max_size": side, "interpolation": _interpolation(t)})
            else:
                size = _size(t)
                op = {"op": "resize" if name == "Resize" else "random_resized_crop", "size": size, "interpolation": _interpolation(t)}
                if name == "RandomResizedCrop":
                    op.update({"scale": [float(v) for v in t.scale], "ratio": [float(v) for v in t.ratio]})
                ops.append(op)
            geometry = name
            continue
        if name in ("HorizontalFlip", "VerticalFlip") and geometry in ("SmallestMaxSize", "Resize", "SmallestMaxSize+flip", "Resize+flip"):
            # A flip of the resize before its crop (if one follows): hpuload cuts the crop
            # at the mirrored offset where it falls, then flips the crop.
            ops.append(_PIXEL_OPS[name](t))
            geometry = geometry.split("+")[0] + "+flip"
            continue
        if name == "PadIfNeeded" and geometry is None and size is None:
            # Padded centred to a least size, then (next) a random crop of it.
            padded = t
            geometry = name
            continue
        if name == "RandomCrop" and geometry == "PadIfNeeded":
            ops.append(_padded_crop(t, padded))
            size, geometry = _size(t), name
            continue
        if name in ("CenterCrop", "RandomCrop"):
            ops.append(_crop(t, geometry, size))
            if geometry in ("SmallestMaxSize", "SmallestMaxSize+warp", "SmallestMaxSize+flip", "SmallestMaxSize+ops") and max(ops[-1]["size"]) > side:
                raise Unsupported(f"albumentations' {name} {ops[-1]['size']} larger than SmallestMaxSize's {side}")
            size, geometry = _size(t), name
            continue
        if name == "PadIfNeeded" and geometry == "LongestMaxSize":
            ops.append(_pad_if_needed(t, side))
            size, geometry = [ops[-1]["min_height"], ops[-1]["min_width"]], name
            continue
        if name in ("Affine", "ShiftScaleRotate", "Rotate") and geometry == "SmallestMaxSize":
            # Warped whole, at the size SmallestMaxSize gives each image, then cropped.
            ops.append(_PIXEL_OPS[name](t))
            geometry = "SmallestMaxSize+warp"
            continue
        if geometry in ("SmallestMaxSize", "SmallestMaxSize+flip", "SmallestMaxSize+ops") and (name in _PIXEL_OPS or name in _COMPOSITIONS):
            # Between the resize and its crop: hpuload runs it (and the flips before it) on
            # each whole resize, drawn on its size, then cuts the crop, as albumentations does.
            ops.append(_pixel_op(t, None))
            geometry = "SmallestMaxSize+ops"
            continue
        if size is None and geometry is None and (name in _PIXEL_OPS or name in _COMPOSITIONS):
            # Before any resize or crop: on the whole image, as albumentations runs it.
            ops.append(_before_geometry(t))
            continue
        if size is None:
            raise Unsupported(
                f"albumentations' {name} between {geometry.split('+')[0]} and its {'pad' if geometry == 'LongestMaxSize' else 'crop'} (one size for every image)"
                if geometry
                else f"albumentations' {name} before a resize or crop (hpuload's batches need one size)"
            )
        geometry = None
        if name in _PIXEL_OPS or name in _COMPOSITIONS:
            ops.append(_pixel_op(t, size))
        elif name == "Normalize" and not open_end:
            _always(t)
            if getattr(t, "normalization", "standard") != "standard" or getattr(t, "max_pixel_value", None) != 255:
                raise Unsupported("albumentations' Normalize other than the standard one of 8-bit values")
            ops.append(
                {
                    "op": "normalize",
                    "mean": _channels(t.mean, "mean", grey),
                    "std": _channels(t.std, "std", grey),
                    "to_float": "scaled_stats",
                }
            )
            dtype, norm = "f32", t
        elif name == "ToFloat" and not open_end:
            # albucore's table of a uint8 image: `arange(256, float32) / max_value`, the f32
            # division hpuload's `divide` computes.
            _always(t)
            if getattr(t, "max_value", None) not in (None, 255, 255.0):
                raise Unsupported(f"albumentations' ToFloat with max_value={t.max_value} (hpuload divides by 255)")
            ops.append({"op": "normalize", "mean": [0.0] * 3, "std": [1.0] * 3, "to_float": "divide"})
            dtype, norm = "f32", _Scaled(True)
        elif name == "CoarseDropout" and not open_end:
            op = _coarse_dropout(t, size, after_normalize=dtype == "f32")
            holes.append((op, dtype == "u8"))
        else:
            raise Unsupported(f"albumentations' {name}")
    if output is not None:
        dtype, norm = _as_handed_out(output, dtype, ops, norm)
    for op, before_normalize in holes:
        # A hole's bytes made before Normalize are normalized with the image: its fill is
        # given in the output's units, as the user's own Normalize computes them.
        if before_normalize and norm is not None:
            import numpy as np

            if grey:
                # One channel: normalized as the grey image's values are.
                fill = np.full((1, 1), op["fill"][0], dtype=np.uint8)
                op["fill"] = [float(norm.apply(fill).reshape(1)[0])] * 3
            else:
                fill = np.full((1, 1, 3), op["fill"], dtype=np.uint8)
                op["fill"] = [float(v) for v in norm.apply(fill).reshape(3)]
        ops.append(op)
    if size is None:
        raise Unsupported(
            "an albumentations Compose without a resize or crop"
            + (f" after its {geometry.split('+')[0]}" if geometry else "")
            + " (a different shape per image)"
        )
    return json.dumps({"name": "albumentations", "ops": ops}), dtype


class _Scaled:
    """The Dataset's own conversion of the Compose's bytes to floats (`x.astype(np.float32)`,
    `/ 255`), as `Normalize.apply` gives it for a hole's fill."""

    def __init__(self, scaled: bool):
        self.scaled = scaled

    def apply(self, image):
        import numpy as np

        floats = image.astype(np.float32)
        return floats / np.float32(255) if self.scaled else floats


class _Table:
    """The Dataset's own arithmetic on the Compose's bytes (`_probe.byte_values`), as
    `Normalize.apply` gives it for a hole's fill."""

    def __init__(self, values: list[float]):
        import numpy as np

        self.values = np.asarray(values, dtype=np.float32)

    def apply(self, image):
        return self.values[image]


def handed_out(translated: tuple, output) -> tuple:
    """A torchvision translation (`(pipeline JSON, dtype, tail)`, of a transform that gives
    PIL images) with what the Dataset's code makes of the NumPy array of each
    (`_as_handed_out`)."""
    pipeline, dtype, tail = translated
    spec = json.loads(pipeline)
    if tail is not None or "ops" not in spec:
        raise Unsupported("a NumPy array made of what a transform translated only in part, or of several views, gives")
    dtype, _ = _as_handed_out(output, dtype, spec["ops"], None)
    return json.dumps(spec), dtype, None


def _as_handed_out(output, dtype: str, ops: list, norm) -> tuple[str, Any]:
    """`(dtype, normalization)` of a Compose without `ToTensorV2` whose array the Dataset
    hands out as `output` says (`_probe.Output`): its bytes or its `Normalize`'s floats, or
    its bytes made floats by the Dataset's code (an identity normalization appended to `ops`:
    `x / 255` exactly as the f32 or f64 division, checked for every byte, or the bytes
    themselves: `(x - 0) * (1 / (s * 255))` with `s * 255` exactly 1 in f32)."""
    if output.start != dtype:
        raise Unsupported(
            f"the albumentations Compose gives {dtype} arrays, and the Dataset's code was learnt on {output.start} ones"
        )
    if output.dtype == dtype:
        return dtype, norm
    if output.dtype != "f32" or dtype != "u8":
        raise Unsupported(f"the Dataset hands out the Compose's {dtype} array as {output.dtype}")
    if output.arith:
        # Its own arithmetic (`x / 127.5 - 1`, ...): each byte's float as its code computes
        # it, a table the output writer looks each byte up in.
        from . import _probe

        try:
            values = _probe.byte_values(output)
        except _probe.NeedsPixels as e:
            raise Unsupported(str(e)) from None
        ops.append({"op": "normalize", "mean": [0.0] * 3, "std": [1.0] * 3, "to_float": {"table": [values]}})
        return "f32", _Table(values)
    if output.scaled:
        ops.append({"op": "normalize", "mean": [0.0] * 3, "std": [1.0] * 3, "to_float": "divide"})
    else:
        ops.append({"op": "normalize", "mean": [0.0] * 3, "std": [1 / 255] * 3, "to_float": "scaled_stats"})
    return "f32", _Scaled(output.scaled)


def _max_size(t: Any) -> int:
    """`SmallestMaxSize`'s or `LongestMaxSize`'s one size (a list draws one per image;
    `max_size_hw` scales to fit)."""
    if getattr(t, "max_size_hw", None) is not None or not isinstance(t.max_size, int):
        raise Unsupported(f"albumentations' {_name(t)} with max_size={t.max_size!r} (hpuload takes one size)")
    return int(t.max_size)


def _crop(t: Any, geometry: str | None, size: list[int] | None) -> dict:
    """`CenterCrop` or `RandomCrop` (of the image, or right after a `Resize` or
    `SmallestMaxSize`): albumentations' centre is `(size - crop) // 2`, its random offset
    uniform over every one that keeps the crop inside."""
    name = _name(t)
    _always(t)
    if getattr(t, "pad_if_needed", False):
        if name == "RandomCrop" and geometry is None and size is None:
            return _padded_crop(t, t)
        raise Unsupported(f"albumentations' {name} with pad_if_needed (hpuload pads a random crop of the image itself)")
    if (size is not None and geometry not in ("Resize", "Resize+flip")) or geometry == "LongestMaxSize":
        raise Unsupported(f"albumentations' {name} after {geometry or 'a pixel op'} (hpuload crops the image or its resize)")
    crop = _size(t)
    if size is not None and (crop[0] > size[0] or crop[1] > size[1]):
        raise Unsupported(f"albumentations' {name} {crop} larger than the {size} resize (albumentations refuses it)")
    if name == "CenterCrop":
        return {"op": "center_crop", "size": crop, "floor": True}
    return {"op": "random_crop", "size": crop}


def _pair(value: Any) -> list[float]:
    """A range albumentations keeps as a number or a `(lo, hi)` pair."""
    if isinstance(value, (int, float)):
        return [float(value), float(value)]
    lo, hi = value
    return [float(lo), float(hi)]


def _limits(t: Any, *names: str) -> dict:
    """Each of `names`' range as `[lo, hi]`."""
    return {n: _pair(getattr(t, n)) for n in names}


#: The OpenCV whose `warpAffine` and byte HSV hpuload computes as it does (its x86-64 wheels,
#: whose kernels run in AVX2 with fused multiply-adds), checked against its output.
_OPENCV_VERIFIED = "5.0."


def _opencv_arithmetic(name: str) -> None:
    """`Unsupported` unless the OpenCV here computes `name`'s kernel as hpuload does: another
    version, or a CPU it runs other kernels on, could differ by a level in some pixels, so
    the op runs in Python, as the user's own loader runs it."""
    import platform

    import cv2

    version = getattr(cv2, "__version__", "?")
    if not version.startswith(_OPENCV_VERIFIED):
        raise Unsupported(f"albumentations' {name} with OpenCV {version} (hpuload computes OpenCV {_OPENCV_VERIFIED}x's kernels)")
    machine = platform.machine().lower()
    has = getattr(cv2, "checkHardwareSupport", lambda _: False)
    # OpenCV's feature numbers: 11 is AVX2, 12 FMA3 (`cv2.getHardwareFeatureName`).
    if machine not in ("x86_64", "amd64") or not (has(11) and has(12)):
        raise Unsupported(f"albumentations' {name} on a {machine} CPU without OpenCV's AVX2 kernels")


def _brightness_contrast(t: Any) -> dict:
    if not getattr(t, "brightness_by_max", True) or getattr(t, "ensure_safe_range", False):
        raise Unsupported("albumentations' RandomBrightnessContrast with brightness_by_max=False or ensure_safe_range=True")
    return {"op": "albu_brightness_contrast", "p": _p(t), **_limits(t, "brightness_limit", "contrast_limit")}


def _color_jitter(t: Any) -> dict:
    # Its saturation is OpenCV's `addWeighted`, its hue a trip through OpenCV's byte HSV.
    _opencv_arithmetic("ColorJitter")
    limits = _limits(t, "brightness", "contrast", "saturation", "hue")
    return {"op": "albu_color_jitter", "p": _p(t), **limits}


def _sharpen(t: Any) -> dict:
    if getattr(t, "method", "kernel") != "kernel":
        raise Unsupported(f"albumentations' Sharpen with method={t.method!r}")
    _opencv_arithmetic("Sharpen")  # its kernel through cv2.filter2D
    return {"op": "albu_sharpen", "p": _p(t), **_limits(t, "alpha", "lightness")}


def _emboss(t: Any) -> dict:
    _opencv_arithmetic("Emboss")  # its kernel through cv2.filter2D
    return {"op": "albu_emboss", "p": _p(t), **_limits(t, "alpha", "strength")}


def _hue_saturation_value(t: Any) -> dict:
    _opencv_arithmetic("HueSaturationValue")
    limits = _limits(t, "hue_shift_limit", "sat_shift_limit", "val_shift_limit")
    return {"op": "albu_hue_saturation_value", "p": _p(t), **limits}


#: OpenCV's border modes hpuload's warp reads as OpenCV does (not BORDER_WRAP).
_BORDERS = {0: "constant", 1: "replicate", 2: "reflect", 4: "reflect101"}


def _fill_bytes(t: Any) -> list[int]:
    """A step's `fill` as OpenCV gives it to a uint8 image: each value `saturate_cast<uchar>`
    (rounded half to even, clamped)."""
    fill = getattr(t, "fill", 0)
    fills = list(fill) if isinstance(fill, (list, tuple)) else [fill] * 3
    if len(fills) != 3 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in fills):
        raise Unsupported(f"albumentations' {_name(t)} with fill={fill!r}")
    return [min(255, max(0, round(float(v)))) for v in fills]


def _pad_if_needed(t: Any, longest: int) -> dict:
    """`PadIfNeeded` after `LongestMaxSize(longest)`: centred, to a size no image exceeds (so
    every output is that size), with a constant fill or the edge replicated or mirrored as
    OpenCV's `copyMakeBorder` does."""
    _always(t)
    h, w = t.min_height, t.min_width
    border = _BORDERS.get(int(getattr(t, "border_mode", 0)))
    if (
        getattr(t, "position", "center") != "center"
        or border is None
        or h is None
        or w is None
        or min(h, w) < longest
    ):
        raise Unsupported(
            f"albumentations' PadIfNeeded other than centred, of a border OpenCV's warps have, to at least "
            f"LongestMaxSize's {longest} (one size for every image)"
        )
    op = {"op": "albu_pad_if_needed", "min_height": int(h), "min_width": int(w), "border": border}
    return op | ({"fill": _fill_bytes(t)} if border == "constant" else {})


#: OpenCV's border modes as the crop's padding modes (NumPy's names, as torchvision's).
_PADDING_MODES = {"constant": "constant", "replicate": "edge", "reflect101": "reflect", "reflect": "symmetric"}


def _padded_crop(crop: Any, pad: Any) -> dict:
    """`RandomCrop` of the image padded by `pad` first: a `PadIfNeeded` (or the crop itself,
    with `pad_if_needed`) centred, to at least `min_height`x`min_width` (the crop's size),
    with a constant fill or the edge replicated or mirrored as OpenCV's `copyMakeBorder`
    does; the offset uniform over the padded image. albumentations 2's names (`fill`,
    `fill_mask`, `position` or `pad_position`)."""
    _always(crop)
    _always(pad)
    if _albumentations_version() < (2, 0, 0):
        raise Unsupported(f"albumentations {'.'.join(map(str, _albumentations_version()))}'s padding (hpuload reads albumentations 2's)")
    out = _size(crop)
    if pad is crop:
        to, position = out, getattr(crop, "pad_position", "center")
    else:
        if getattr(pad, "pad_height_divisor", None) is not None or getattr(pad, "pad_width_divisor", None) is not None:
            raise Unsupported("albumentations' PadIfNeeded to a divisor (a size per image)")
        to, position = [pad.min_height, pad.min_width], getattr(pad, "position", "center")
    border = _BORDERS.get(int(getattr(pad, "border_mode", 0)))
    if position != "center" or border is None:
        raise Unsupported(f"albumentations' {_name(pad)} at {position!r} with border mode {getattr(pad, 'border_mode', None)} (hpuload pads centred, with a fill or the edge repeated or mirrored)")
    if None in to or to[0] < out[0] or to[1] < out[1] or to[0] >= 2 * out[0] or to[1] >= 2 * out[1]:
        raise Unsupported(f"albumentations' PadIfNeeded to {to} before a {out} RandomCrop (hpuload pads to the crop, up to twice it)")
    if border != "constant" and list(to) != out:
        raise Unsupported(f"albumentations' PadIfNeeded to {to} with border {border} before a {out} RandomCrop (a mirrored border pads to the crop only)")
    op = {"op": "random_crop", "size": out, "pad_centred_to": [int(v) for v in to], "padding_mode": _PADDING_MODES[border]}
    return op | ({"fill": _fill_bytes(pad)} if border == "constant" else {})


def _warp_settings(t: Any) -> dict:
    """A warp's or remap's `INTER_LINEAR` (the only one hpuload runs) and OpenCV border, as
    the op's `border` and `fill`; OpenCV's arithmetic checked (see `_opencv_arithmetic`)."""
    name = _name(t)
    _opencv_arithmetic(name)
    if getattr(t, "interpolation", _INTER_LINEAR) != _INTER_LINEAR:
        raise Unsupported(f"albumentations' {name} with interpolation {t.interpolation} (hpuload runs cv2.INTER_LINEAR)")
    border = _BORDERS.get(int(getattr(t, "border_mode", 0)))
    if border is None:
        raise Unsupported(f"albumentations' {name} with border_mode={t.border_mode}")
    return {"border": border, "fill": _fill_bytes(t)}


def _affine(t: Any) -> dict:
    """`Affine` or `ShiftScaleRotate` (one of them): its ranges, and OpenCV's border."""
    settings = _warp_settings(t)
    if getattr(t, "fit_output", False) or getattr(t, "balanced_scale", False):
        raise Unsupported(f"albumentations' {_name(t)} with fit_output or balanced_scale")
    op = {
        "op": "albu_affine",
        "p": _p(t),
        "scale": [_pair(t.scale["x"]), _pair(t.scale["y"])],
        "keep_ratio": bool(t.keep_ratio),
        "rotate": _pair(t.rotate),
        "shear": [_pair(t.shear["x"]), _pair(t.shear["y"])],
        **settings,
    }
    if t.translate_percent is not None:
        op["translate_percent"] = [_pair(t.translate_percent["x"]), _pair(t.translate_percent["y"])]
    elif t.translate_px is not None:
        op["translate_px"] = [[int(v) for v in _pair(t.translate_px[k])] for k in ("x", "y")]
    return op


def _rotate(t: Any) -> dict:
    """`Rotate` (albumentations 2's, without `crop_border`): an `Affine` of its angle alone,
    drawn uniformly from `limit` and composed about the centre as `Affine` composes it."""
    if _albumentations_version() < (2, 0, 0):
        raise Unsupported("albumentations' Rotate of albumentations 1 (its own matrix and border)")
    if getattr(t, "crop_border", False):
        raise Unsupported("albumentations' Rotate with crop_border (a size per angle)")
    return {
        "op": "albu_affine",
        "p": _p(t),
        "scale": [[1.0, 1.0], [1.0, 1.0]],
        "keep_ratio": False,
        "rotate": _pair(t.limit),
        "shear": [[0.0, 0.0], [0.0, 0.0]],
        **_warp_settings(t),
    }


def _grid_distortion(t: Any) -> dict:
    """`GridDistortion` with `INTER_LINEAR`: its grid's cells drawn and normalized as
    albumentations draws them, the image through OpenCV's `remap` with its border."""
    if _albumentations_version() < (2, 0, 0):
        raise Unsupported("albumentations' GridDistortion of albumentations 1 (its own grid and fill)")
    if not 1 <= int(t.num_steps) <= 1024:
        raise Unsupported(f"albumentations' GridDistortion with num_steps={t.num_steps} (hpuload takes 1 to 1024)")
    return {
        "op": "albu_grid_distortion",
        "p": _p(t),
        "num_steps": int(t.num_steps),
        "distort_limit": _pair(t.distort_limit),
        "normalized": bool(getattr(t, "normalized", False)),
        **_warp_settings(t),
    }


def _optical_distortion(t: Any) -> dict:
    """`OpticalDistortion` in its camera mode with `INTER_LINEAR`: `k` drawn from its range,
    OpenCV's undistortion map of albumentations' camera, then `remap` with its border."""
    if _albumentations_version() < (2, 0, 0):
        raise Unsupported("albumentations' OpticalDistortion of albumentations 1 (its own camera and shift)")
    if getattr(t, "mode", "camera") != "camera":
        raise Unsupported(f"albumentations' OpticalDistortion with mode={t.mode!r}")
    return {"op": "albu_optical_distortion", "p": _p(t), "distort_limit": _pair(t.distort_limit), **_warp_settings(t)}


def _solarize(t: Any) -> dict:
    """`Solarize`: its threshold drawn from `threshold_range` (fractions of 255)."""
    return {"op": "albu_solarize", "p": _p(t), "threshold_range": _pair(t.threshold_range)}


def _posterize(t: Any) -> dict:
    """`Posterize` with one range of bits for every channel."""
    bits = t.num_bits
    if isinstance(bits, list):
        raise Unsupported(f"albumentations' Posterize with a range per channel ({bits!r})")
    lo, hi = (int(v) for v in (bits if isinstance(bits, tuple) else (bits, bits)))
    return {"op": "albu_posterize", "p": _p(t), "num_bits": [lo, hi]}


def _downscale(t: Any) -> dict:
    """`Downscale` with `INTER_NEAREST` both ways (its default)."""
    if _albumentations_version() < (2, 0, 0):
        raise Unsupported("albumentations' Downscale of albumentations 1 (its own scale and interpolation)")
    pair = dict(getattr(t, "interpolation_pair", {}))
    if pair != {"downscale": 0, "upscale": 0}:
        raise Unsupported(f"albumentations' Downscale with interpolation_pair={pair!r} (hpuload runs cv2.INTER_NEAREST both ways)")
    return {"op": "albu_downscale", "p": _p(t), "scale_range": _pair(t.scale_range)}


def _image_compression(t: Any) -> dict:
    """`ImageCompression` to JPEG: OpenCV's `imencode(".jpg")` and `imdecode`, reproduced."""
    if _albumentations_version() < (2, 0, 0):
        raise Unsupported("albumentations' ImageCompression of albumentations 1 (its own quality bounds)")
    if t.compression_type != "jpeg":
        raise Unsupported(f"albumentations' ImageCompression to {t.compression_type!r} (hpuload reproduces JPEG's)")
    lo, hi = (int(v) for v in t.quality_range)
    return {"op": "albu_image_compression", "p": _p(t), "quality_range": [lo, hi]}


def _clahe(t: Any) -> dict:
    """`CLAHE` of an RGB image: OpenCV's 8-bit Lab, its CLAHE of L, and back, reproduced."""
    lo, hi = (float(v) for v in t.clip_limit)
    across, down = (int(v) for v in t.tile_grid_size)
    return {"op": "albu_clahe", "p": _p(t), "clip_limit": [lo, hi], "tile_grid_size": [across, down]}


def _channel_dropout(t: Any) -> dict:
    """`ChannelDropout` of an RGB image with a whole-level fill."""
    lo, hi = (int(v) for v in t.channel_drop_range)
    fill = t.fill
    if isinstance(fill, bool) or not isinstance(fill, (int, float)) or fill != int(fill) or not 0 <= fill <= 255:
        raise Unsupported(f"albumentations' ChannelDropout with fill={fill!r}")
    if not 0 <= lo <= hi <= 2:
        raise Unsupported(f"albumentations' ChannelDropout with channel_drop_range={t.channel_drop_range!r}")
    return {"op": "albu_channel_dropout", "p": _p(t), "channel_drop_range": [lo, hi], "fill": int(fill)}


def _equalize(t: Any) -> dict:
    """`Equalize` of each channel, by OpenCV's `equalizeHist` or albumentations' `pil` table."""
    if not getattr(t, "by_channels", True):
        raise Unsupported("albumentations' Equalize with by_channels=False (its Y in YCrCb)")
    if getattr(t, "mask", None) is not None:
        raise Unsupported("albumentations' Equalize with a mask")
    mode = getattr(t, "mode", "cv")
    if mode not in ("cv", "pil") or (mode == "pil" and _albumentations_version() < (2, 0, 0)):
        raise Unsupported(f"albumentations' Equalize with mode={mode!r}")
    return {"op": "albu_equalize", "p": _p(t), "mode": mode}


def _rgb_shift(t: Any) -> dict:
    """`RGBShift`: its three ranges (kept as fractions of 255) in levels."""
    ranges = (getattr(t, "noise_params", None) or {}).get("ranges")
    if getattr(t, "noise_type", None) != "uniform" or getattr(t, "spatial_mode", None) != "constant" or len(ranges or ()) != 3:
        raise Unsupported("albumentations' RGBShift other than its uniform shift per channel")
    return {"op": "albu_rgb_shift", "p": _p(t), "ranges": [[float(lo) * 255, float(hi) * 255] for lo, hi in ranges]}


def _to_gray(t: Any) -> dict:
    """`ToGray` to three channels by OpenCV's weighted average (its default)."""
    _opencv_arithmetic("ToGray")
    if getattr(t, "num_output_channels", 3) != 3 or getattr(t, "method", "weighted_average") != "weighted_average":
        raise Unsupported(f"albumentations' ToGray with {t.num_output_channels} channels by {t.method!r}")
    return {"op": "albu_to_gray", "p": _p(t)}


def _blur_limit(t: Any, largest: int) -> list[int]:
    """A blur's `blur_limit` as `[lo, hi]` (albumentations keeps it as a pair of odd sizes of
    at least 3), `Unsupported` past `largest` (once made odd, as albumentations makes it)."""
    lo, hi = (int(v) for v in t.blur_limit)
    if hi + (hi % 2 == 0) > largest:
        raise Unsupported(f"albumentations' {_name(t)} with blur_limit={t.blur_limit!r} (hpuload runs kernels up to {largest})")
    return [lo, hi]


def _blur(t: Any) -> dict:
    """`Blur`: `cv2.blur`, the window's mean rounded (checked against OpenCV 5's)."""
    _opencv_arithmetic("Blur")
    return {"op": "albu_blur", "p": _p(t), "blur_limit": _blur_limit(t, 255)}


def _median_blur(t: Any) -> dict:
    """`MedianBlur`: the window's median, the same from any OpenCV."""
    return {"op": "albu_median_blur", "p": _p(t), "blur_limit": _blur_limit(t, 255)}


def _motion_blur(t: Any) -> dict:
    """`MotionBlur`: albumentations' line kernel through OpenCV 5's `filter2D` (its direct
    kernel, which it runs up to 9x9)."""
    _opencv_arithmetic("MotionBlur")
    return {
        "op": "albu_motion_blur",
        "p": _p(t),
        "blur_limit": _blur_limit(t, 9),
        "allow_shifted": bool(t.allow_shifted),
        **_limits(t, "angle_range", "direction_range"),
    }


def _gaussian_blur(t: Any) -> dict:
    """`GaussianBlur`: albumentations' own kernel through OpenCV 5's `sepFilter2D`."""
    _opencv_arithmetic("GaussianBlur")
    lo, hi = (int(v) for v in t.blur_limit)
    sigma = _pair(t.sigma_limit)
    largest = max(hi + (hi % 2 == 0), int(sigma[1] * 3.5) * 2 + 1)
    if sigma[0] <= 0 or largest > 255:
        raise Unsupported(f"albumentations' GaussianBlur with sigma_limit={t.sigma_limit!r}, blur_limit={t.blur_limit!r}")
    return {"op": "albu_gaussian_blur", "p": _p(t), "blur_limit": [lo, hi], "sigma_limit": sigma}


def _gauss_noise(t: Any) -> dict:
    """`GaussNoise` with a value drawn for every pixel (`noise_scale_factor=1`): the same
    distribution as albumentations' (whose values come from OpenCV's generator)."""
    if getattr(t, "noise_scale_factor", 1) != 1 or not hasattr(t, "std_range"):
        raise Unsupported(f"albumentations' GaussNoise with noise_scale_factor={getattr(t, 'noise_scale_factor', None)!r}")
    return {"op": "albu_gauss_noise", "p": _p(t), "per_channel": bool(t.per_channel), **_limits(t, "std_range", "mean_range")}


#: albumentations' pixel ops hpuload runs after the resize, each as its op.
_PIXEL_OPS = {
    "HorizontalFlip": lambda t: {"op": "random_horizontal_flip", "p": _p(t)},
    "VerticalFlip": lambda t: {"op": "random_vertical_flip", "p": _p(t)},
    "Transpose": lambda t: {"op": "albu_transpose", "p": _p(t)},
    "RandomRotate90": lambda t: {"op": "albu_random_rotate90", "p": _p(t)},
    "RandomBrightnessContrast": _brightness_contrast,
    "RGBShift": _rgb_shift,
    "ToGray": _to_gray,
    "RandomGamma": lambda t: {"op": "albu_random_gamma", "p": _p(t), "gamma_limit": _pair(t.gamma_limit)},
    "ChannelShuffle": lambda t: {"op": "albu_channel_shuffle", "p": _p(t)},
    "InvertImg": lambda t: {"op": "random_invert", "p": _p(t)},
    "Blur": _blur,
    "MedianBlur": _median_blur,
    "MotionBlur": _motion_blur,
    "GaussianBlur": _gaussian_blur,
    "GaussNoise": _gauss_noise,
    "HueSaturationValue": _hue_saturation_value,
    "ColorJitter": _color_jitter,
    "Sharpen": _sharpen,
    "Emboss": _emboss,
    "Affine": _affine,
    "ShiftScaleRotate": _affine,
    "Rotate": _rotate,
    "GridDistortion": _grid_distortion,
    "OpticalDistortion": _optical_distortion,
    "Solarize": _solarize,
    "Posterize": _posterize,
    "Equalize": _equalize,
    "ChannelDropout": _channel_dropout,
    "Downscale": _downscale,
    "ImageCompression": _image_compression,
    "CLAHE": _clahe,
}


#: albumentations' compositions hpuload draws natively inside a `Compose`, after its geometry.
_COMPOSITIONS = ("OneOf", "SomeOf", "RandomOrder", "OneOrOther", "Sequential")

#: The most ways a `SomeOf` or `RandomOrder` can pick its steps that hpuload lists as the
#: choices of one `random_choice` (8 steps, 3 at a time, in any order, are 336).
_MOST_PICKS = 512

#: The first albumentations whose `SomeOf` picks its `n` steps uniformly and applies each by
#: its own `p` (earlier ones weighted the pick by the `p`s and forced the steps picked).
_SOME_OF_SINCE = (2, 0, 8)


def _albumentations_version() -> tuple[int, ...]:
    import albumentations

    parts = []
    for part in str(getattr(albumentations, "__version__", "0")).split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def _picks(t: Any) -> list[tuple[tuple[int, ...], float]]:
    """The ways `SomeOf(transforms, n, replace)` or `RandomOrder(...)` picks its steps, each
    with its weight: `SomeOf` draws `n` indices uniformly (numpy's `choice`, with or without
    replacement) and applies them sorted, `RandomOrder` in the order drawn. Sorted draws with
    replacement are multisets, weighted by the orders that give each."""
    import itertools
    import math

    name, k, n, replace = _name(t), len(t.transforms), int(t.n), bool(t.replace)
    if name == "SomeOf" and _albumentations_version() < _SOME_OF_SINCE:
        raise Unsupported(f"albumentations' SomeOf of albumentations before {'.'.join(map(str, _SOME_OF_SINCE))} (it picks by the steps' p)")
    if k == 0 or n <= 0:
        raise Unsupported(f"albumentations' {name} of no steps")
    if name == "SomeOf":
        ways = math.comb(k + n - 1, n) if replace else math.comb(k, n)
    else:
        ways = k**n if replace else math.perm(k, n)
    if ways > _MOST_PICKS:
        raise Unsupported(f"albumentations' {name} of {k} steps {n} at a time ({ways} ways to pick them)")
    if name == "RandomOrder":
        picks = itertools.product(range(k), repeat=n) if replace else itertools.permutations(range(k), n)
        return [(pick, 1.0) for pick in picks]
    if not replace:
        return [(pick, 1.0) for pick in itertools.combinations(range(k), n)]

    def orders(pick: tuple[int, ...]) -> float:
        return math.factorial(n) / math.prod(math.factorial(pick.count(i)) for i in set(pick))

    return [(pick, orders(pick)) for pick in itertools.combinations_with_replacement(range(k), n)]


def _before_geometry(t: Any) -> dict:
    """The op of a pixel step read before the `Compose`'s resize or crop, which hpuload runs on
    the whole decoded image. A flip there is drawn inside a `random_apply` (hpuload's pipeline
    reads a bare flip before the geometry as a detection pipeline's, which moves boxes)."""
    op = _pixel_op(t, None)
    if op["op"] == "random_horizontal_flip":
        return {"op": "random_apply", "p": op["p"], "ops": [{"op": "random_horizontal_flip", "p": 1.0}]}
    return op


def _pixel_op(t: Any, size: list[int] | None, forced: bool = False) -> dict:
    """The op of a pixel step after the geometry (of a `size` image; `None`: before it, on the
    whole image): one of `_PIXEL_OPS`, or
    one of albumentations' compositions of them, nested as the user nests them, each drawn as
    albumentations draws it. `forced`: the step runs whatever its `p` (albumentations'
    `force_apply`, which `OneOf` and `OneOrOther` pass to the step they choose; `OneOf` and
    `Sequential` honour it for their own `p`, `SomeOf`, `RandomOrder` and `OneOrOther` do not,
    and none passes it on to its own steps but those two)."""
    name = _name(t)
    if name in _COMPOSITIONS:
        steps = list(t.transforms)
        if not steps:
            raise Unsupported(f"albumentations' {name} of no steps")
        p = _p(t)
        if name == "OneOf":
            # Applied with probability `p` (certainly when forced), one step chosen with
            # weights their own `p`s and applied for certain.
            inner = [_pixel_op(s, size, forced=True) for s in steps]
            weights = [float(v) for v in t.transforms_ps]
            return {"op": "random_apply", "p": 1.0 if forced else p, "ops": [{"op": "random_choice", "p": weights, "ops": inner}]}
        if name == "Sequential":
            return {"op": "random_apply", "p": 1.0 if forced else p, "ops": [_pixel_op(s, size) for s in steps]}
        if name == "OneOrOther":
            # The first (forced) with probability `p`, else the last.
            inner = [_pixel_op(steps[0], size, forced=True), _pixel_op(steps[-1], size, forced=True)]
            return {"op": "random_choice", "p": [p, 1.0 - p], "ops": inner}
        # SomeOf and RandomOrder: with probability `p`, `n` steps picked uniformly, each then
        # applied by its own `p`: one choice among every way of picking them.
        picks = _picks(t)
        choices = [{"op": "random_apply", "p": 1.0, "ops": [_pixel_op(steps[i], size) for i in pick]} for pick, _ in picks]
        weights = [w for _, w in picks]
        return {"op": "random_apply", "p": p, "ops": [{"op": "random_choice", "p": weights, "ops": choices}]}
    if name not in _PIXEL_OPS:
        raise Unsupported(f"albumentations' {name}")
    if size is None and name in ("Transpose", "RandomRotate90", "Downscale", "GridDistortion"):
        raise Unsupported(
            f"albumentations' {name} before a resize or crop (hpuload runs it on the output: "
            + ("each image would get its own shape)" if name in ("Transpose", "RandomRotate90") else "its image size must be known)")
        )
    if name in ("Transpose", "RandomRotate90") and size[0] != size[1]:
        raise Unsupported(f"albumentations' {name} of a {size[0]}x{size[1]} image (a shape per sample)")
    if name == "Downscale" and round(min(size) * min(_pair(t.scale_range))) == 0:
        raise Unsupported(f"albumentations' Downscale of a {size[0]}x{size[1]} image to nothing")
    if name == "GridDistortion" and min(size) < int(t.num_steps):
        raise Unsupported(f"albumentations' GridDistortion of {t.num_steps} steps on a {size[0]}x{size[1]} image (it divides by zero)")
    op = _PIXEL_OPS[name](t)
    if forced:
        op["p"] = 1.0
    return op


def _coarse_dropout(t: Any, size: list[int], *, after_normalize: bool) -> dict:
    """`CoarseDropout` with a constant fill, its holes erased in the output: `fill` in the
    image's units where it stands (float32 after Normalize, a byte before). Hole ranges that
    albumentations itself cannot draw from on an image of `size` are `Unsupported` (it raises
    when it draws: the user's own error, from the steps run in Python)."""
    heights, widths = [float(v) for v in t.hole_height_range], [float(v) for v in t.hole_width_range]
    if heights[1] >= 1:  # pixels, both ranges: randint(lo, min(hi, side))
        drawable = all(int(r[0]) <= int(min(r[1], side)) for r, side in ((heights, size[0]), (widths, size[1])))
    else:  # fractions, both ranges
        drawable = widths[1] <= 1
    if not drawable:
        raise Unsupported(f"albumentations' CoarseDropout with hole ranges {heights} and {widths} on a {size[0]}x{size[1]} image")
    fill = getattr(t, "fill", 0)
    values = list(fill) if isinstance(fill, (list, tuple)) else [fill]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values) or len(values) not in (1, 3):
        raise Unsupported(f"albumentations' CoarseDropout with fill={fill!r}")
    values = [float(v) for v in values] * (3 // len(values))
    if not after_normalize:
        if not all(0 <= v <= 255 for v in values):
            raise Unsupported(f"albumentations' CoarseDropout of a uint8 image with fill={fill!r}")
        values = [float(int(v)) for v in values]  # np.array(fill, dtype=np.uint8) truncates
    else:
        import numpy as np

        values = [float(v) for v in np.asarray(values, dtype=np.float32)]
    lo, hi = t.num_holes_range
    return {
        "op": "coarse_dropout",
        "num_holes_range": [int(lo), int(hi)],
        "hole_height_range": heights,
        "hole_width_range": widths,
        "fill": values,
        "p": _p(t),
    }


class Tail(_Tail):
    """The steps of an albumentations `Compose` after its native prefix, run in Python on each
    uint8 `[H, W, C]` RGB image the prefix made, as a `Compose` of them (the user's own
    objects) runs them. albumentations draws from the generators its `Compose` hands its
    steps (not the global ones): they are made for each sample from Python's global
    generator, which the tail seeds from (seed, epoch, index), so runs repeat and resume."""

    def __init__(self, steps: list, reason: str, prefix: list):
        super().__init__(steps, "array", reason, prefix)
        import albumentations

        self.compose = albumentations.Compose(steps)

    def __call__(self, x):
        import random

        import numpy as np

        s = random.getrandbits(64)
        self.compose.set_random_state(np.random.default_rng(s), random.Random(s))
        return self.compose(image=x)["image"]
