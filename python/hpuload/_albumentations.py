"""An albumentations `Compose` (the transform of most Kaggle-style Datasets, which read their
images with `cv2.imread` and call `self.transforms(image=image)["image"]`) translated to
hpuload's pipeline ops, each computed as albumentations computes it on a uint8 RGB image:

- `Resize(height, width)`, and `RandomResizedCrop(size, scale, ratio)` (the window drawn as
  albumentations draws it, which is torchvision's draw: ten tries of a log-uniform aspect
  ratio and a uniform area, then the centre fallback), with `interpolation=cv2.INTER_LINEAR`
  (their default): OpenCV's `cv2.resize`, byte for byte (`cv2_linear`);
- `HorizontalFlip(p)`, `VerticalFlip(p)`;
- `Normalize(mean, std, max_pixel_value=255)`: `(x - mean * 255) * (1 / (std * 255))` in
  float32, as its lookup table computes it (bit for bit);
- `ToTensorV2()` last: the `[C, H, W]` tensor, float32 after `Normalize`, else uint8.

`translate_split` runs the longest prefix of such resizes and flips natively and the steps
after it (any other albumentations op) in Python, as a `Tail`. A `Compose` with no such prefix,
or that does not end in `ToTensorV2`, or with bounding boxes or masks, is `Unsupported`,
naming why: the loader then falls back to torch's DataLoader."""

from __future__ import annotations

import json
from typing import Any

from ._transforms import Tail as _Tail
from ._transforms import Unsupported

#: OpenCV's interpolation flags (`cv2.INTER_LINEAR`), without importing cv2.
_INTER_LINEAR = 1


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


def _linear(t: Any) -> str:
    if getattr(t, "interpolation", _INTER_LINEAR) != _INTER_LINEAR:
        raise Unsupported(f"albumentations' {_name(t)} with interpolation {t.interpolation} (hpuload runs cv2.INTER_LINEAR)")
    if getattr(t, "area_for_downscale", None):
        raise Unsupported(f"albumentations' {_name(t)} with area_for_downscale={t.area_for_downscale!r}")
    return "cv2_linear"


def _size(t: Any) -> list[int]:
    size = getattr(t, "size", None)
    if size is None:  # albumentations 1.x: height and width
        size = (t.height, t.width)
    h, w = size
    return [int(h), int(w)]


def _channels(value: Any, what: str) -> list[float]:
    values = [float(v) for v in value] if isinstance(value, (list, tuple)) else [float(value)] * 3
    if len(values) != 3:
        raise Unsupported(f"albumentations' Normalize with {len(values)} {what} values (hpuload's images are RGB)")
    return values


def _checked_steps(compose: Any) -> list:
    if _p(compose) != 1.0:
        raise Unsupported(f"albumentations' Compose with p={_p(compose)}")
    processors = getattr(compose, "processors", None)
    if processors:
        raise Unsupported(f"albumentations' Compose with {', '.join(processors)} targets (hpuload gives images)")
    return list(compose.transforms)


def translate(compose: Any) -> tuple[str, str]:
    """`(pipeline JSON, output dtype)` for an albumentations `Compose` applied to the RGB
    image of a Dataset's `__getitem__`, or `Unsupported`."""
    steps = _checked_steps(compose)
    if not steps or _name(steps[-1]) != "ToTensorV2":
        raise Unsupported("an albumentations Compose that does not end in ToTensorV2 (it gives NumPy arrays)")
    if _p(steps[-1]) != 1.0:
        raise Unsupported("albumentations' ToTensorV2 with p below 1")
    return _translate(steps[:-1], open_end=False)


def translate_split(compose: Any) -> tuple[str, str, "Tail | None"]:
    """`(pipeline JSON, dtype, tail)`: the whole `Compose` when hpuload translates it (tail
    None); else its longest prefix that starts with a resize and holds only resizes and flips,
    run natively to uint8 `[H, W, C]` images, and a `Tail` running the rest of its steps in
    Python on each of them, as albumentations runs them. `Unsupported` when not even a prefix
    translates."""
    try:
        pipeline, dtype = translate(compose)
        return pipeline, dtype, None
    except Unsupported as e:
        whole = e
    steps = _checked_steps(compose)
    if not steps or _name(steps[-1]) != "ToTensorV2":
        raise whole  # the tail would give NumPy arrays, which the Dataset's loader collates otherwise
    for k in range(len(steps) - 1, 0, -1):
        try:
            pipeline, _ = _translate(steps[:k], open_end=True)
        except Unsupported:
            continue
        return pipeline, "u8", Tail(steps[k:], str(whole), steps[:k])
    raise whole


def _translate(steps: list, *, open_end: bool) -> tuple[str, str]:
    """The ops of `steps` (a `Compose`'s, without its closing `ToTensorV2`). `open_end`:
    they are the prefix of a longer `Compose`, whose steps after them run in Python on the
    uint8 image they make, so no `Normalize` among them."""
    ops: list[dict] = []
    geometry = False
    dtype = "u8"
    for t in steps:
        name = _name(t)
        if dtype == "f32":
            raise Unsupported(f"albumentations' {name} after Normalize (hpuload normalizes last)")
        if name == "Resize":
            _always(t)
            ops.append({"op": "resize", "size": _size(t), "interpolation": _linear(t)})
        elif name == "RandomResizedCrop":
            _always(t)
            ops.append(
                {
                    "op": "random_resized_crop",
                    "size": _size(t),
                    "scale": [float(v) for v in t.scale],
                    "ratio": [float(v) for v in t.ratio],
                    "interpolation": _linear(t),
                }
            )
        elif name in ("HorizontalFlip", "VerticalFlip"):
            if not geometry:
                raise Unsupported(f"albumentations' {name} before a resize (hpuload's batches need one size)")
            kind = "random_horizontal_flip" if name == "HorizontalFlip" else "random_vertical_flip"
            ops.append({"op": kind, "p": _p(t)})
            continue
        elif name == "Normalize" and not open_end:
            _always(t)
            if getattr(t, "normalization", "standard") != "standard" or float(t.max_pixel_value) != 255.0:
                raise Unsupported("albumentations' Normalize other than the standard one of 8-bit values")
            ops.append(
                {
                    "op": "normalize",
                    "mean": _channels(t.mean, "mean"),
                    "std": _channels(t.std, "std"),
                    "to_float": "scaled_stats",
                }
            )
            dtype = "f32"
            continue
        else:
            raise Unsupported(f"albumentations' {name}")
        if geometry:
            raise Unsupported(f"albumentations' {name} after another resize")
        geometry = True
    if not geometry:
        raise Unsupported("an albumentations Compose without a resize (a different shape per image)")
    return json.dumps({"name": "albumentations", "ops": ops}), dtype


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
