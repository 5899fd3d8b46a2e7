"""Translation of a torchvision (or timm) transform into an hpuload pipeline.

`translate(transform)` returns `(pipeline, dtype)`, where `pipeline` is the JSON the Rust
loader takes and `dtype` the output element type ("f32", "u8", ...), or raises `Unsupported`
with a reason a user can act on. Only what hpuload computes as torchvision does is accepted.
`translate_split(transform)` also takes a transform translated only in part: its longest
translatable prefix, and the rest as a `Tail` of the user's objects that runs in Python
(`_tail.py`); only a transform with no such prefix makes the caller fall back to torch's own
DataLoader.

The shape hpuload runs: geometry (RandomResizedCrop, or Resize or v2's RandomResize + CenterCrop
or RandomCrop, or Resize to [h, w]) first; then pixel ops on the uint8 image (flips,
ColorJitter, the auto-augment family, blur, ...) with the arithmetic torchvision runs on what
the image is at that step: Pillow's on a PIL image (its nearest resize, its warps, its byte HSV
for the hue; the other colour ops agree with the tensor kernels within a level), the v2 tensor
kernels on a uint8 tensor (after PILToTensor or ToImage); then the conversion to float and
Normalize; then RandomErasing. Flips may come between a resize and its crop (the crop is cut
at the mirrored offset), and so may ops that change each pixel alone (run on the crop); any
other pixel op there runs on the whole resize before the crop is cut (`_before_crop`). The
conversion to float may come before the geometry of an image (`ToTensor()` then `Resize`):
the pipeline is then `resize_floats`, which resizes the bytes' floats with torch's float
kernel, unrounded (normalized first where `Normalize` came before it: `before_resize`), and
only flips, crops and `Normalize` may follow. Flips before the geometry run on the decoded
bytes whatever the image is then (PIL image, uint8 or float tensor).
`Grayscale()` with one output channel (Pillow's "L" image) makes the pipeline
`single_channel`: three equal channels, of which the loader hands out the first.
"""

from __future__ import annotations

import contextvars
import json
import math
import types
from typing import Any


class Unsupported(Exception):
    """The transform has a step hpuload does not implement (the message says which)."""


def _modules():
    """torchvision's transform modules (v1, and v2 where present)."""
    import torchvision.transforms as v1

    try:
        import torchvision.transforms.v2 as v2
    except ImportError:  # torchvision < 0.15
        v2 = None
    return v1, v2


def _image_dtype(t: Any, tagged: bool, on_tensor: bool):
    """The dtype v2's `ToDtype` with a per-type mapping gives the image: the mapping's for its
    type (a `tv_tensors.Image` after `ToImage`, else a plain tensor), else its `"others"`'s
    (None: the image passes through). `Unsupported` before the image is a uint8 tensor, or
    where the mapping names none for it (torchvision raises)."""
    import torch
    from torchvision import tv_tensors

    if not on_tensor:
        raise Unsupported("ToDtype with a per-type mapping must follow PILToTensor or ToImage")
    key = tv_tensors.Image if tagged else torch.Tensor
    if key in t.dtype:
        return t.dtype[key]
    if "others" in t.dtype:
        return t.dtype["others"]
    raise Unsupported(f"ToDtype({t.dtype}) names no dtype for the image (torchvision raises)")


def _v2_only(obj: Any, names: tuple) -> bool:
    """Whether `obj` is torchvision v2's transform of one of `names` (exactly)."""
    _, v2 = _modules()
    return v2 is not None and any(type(obj) is getattr(v2, name, None) for name in names)


def _is(obj: Any, name: str) -> bool:
    """Whether `obj` is torchvision's transform `name`, in v1 or v2 (exactly, not a subclass:
    a subclass may change what the transform does)."""
    v1, v2 = _modules()
    for mod in (v1, v2):
        cls = getattr(mod, name, None) if mod is not None else None
        if cls is not None and type(obj) is cls:
            return True
    return False


def _is_timm(obj: Any, name: str) -> bool:
    """Whether `obj` is timm's class `name` (from timm.data.transforms or random_erasing)."""
    cls = type(obj)
    return cls.__name__ == name and cls.__module__.startswith("timm.data")


def _hw(size: Any, what: str) -> list[int]:
    """A torchvision size (int, or a sequence of 1 or 2) as [h, w]."""
    if isinstance(size, int):
        return [size, size]
    size = list(size)
    if len(size) == 1:
        return [int(size[0]), int(size[0])]
    if len(size) == 2:
        return [int(size[0]), int(size[1])]
    raise Unsupported(f"{what} size {size!r} is not an int or a pair")


_MODES = {
    "nearest": "nearest",
    "bilinear": "bilinear",
    "bicubic": "bicubic",
    "lanczos": "lanczos",
    "box": "box",
    "hamming": "hamming",
    0: "nearest",
    1: "lanczos",
    2: "bilinear",
    3: "bicubic",
    4: "box",
    5: "hamming",
}


#: Pillow's resampling filters (`Image.Resampling`) by value, as torchvision's
#: `InterpolationMode` names them.
_PIL_FILTERS = {0: "NEAREST", 1: "LANCZOS", 2: "BILINEAR", 3: "BICUBIC", 4: "BOX", 5: "HAMMING"}
#: Those that blend a grey image's values as they resize it, each `Resampling`'s number by
#: torchvision's `InterpolationMode` value (its `Resize` of a PIL image is Pillow's resize by
#: that filter): how a grey mask's resize blends it (`MaskSteps.blend`).
PIL_BLENDS = {name.lower(): number for number, name in _PIL_FILTERS.items() if number}


class CenterSquare:
    """The centre square of a PIL image's shorter side, at `(side - short) // 2` on the longer
    axis: what a Dataset's own `img[(h - m) // 2:(h + m) // 2, (w - m) // 2:(w + m) // 2]` of
    the image's array cuts (`m = min(h, w)`; latent diffusion's and diffusers' textual
    inversion Datasets), as a step before its transform. hpuload runs it natively
    (`center_square`, which a resize to one size must follow); on a PIL image (a Python tail,
    a check) it is Pillow's crop of that box."""

    def __call__(self, image):
        width, height = image.size
        side = min(width, height)
        left, top = (width - side) // 2, (height - side) // 2
        return image.crop((left, top, left + side, top + side))

    def __repr__(self) -> str:
        return "CenterSquare()"


def pillow_resize(height: int, width: int, filter: int) -> Any:
    """torchvision's `Resize((height, width))` with Pillow's `filter`, which is Pillow's
    `Image.resize((width, height), filter)` on a PIL image: how hpuload reads that call in a
    Dataset's own code."""
    from torchvision import transforms as tv_transforms

    name = _PIL_FILTERS.get(filter)
    if name is None:
        raise Unsupported(f"Pillow's resize with filter {filter}")
    return tv_transforms.Resize((height, width), interpolation=getattr(tv_transforms.InterpolationMode, name))


def _interp(mode: Any, what: str, allowed=("nearest", "bilinear", "bicubic")) -> str:
    """An InterpolationMode (v1), its value (v2 may keep the string), or PIL's code."""
    if isinstance(mode, (tuple, list)):
        names = sorted({_interp(m, what) for m in mode})
        if names == ["bicubic", "bilinear"]:
            return "random"
        raise Unsupported(f"{what} with a random choice of {names} (hpuload draws bilinear or bicubic)")
    key = getattr(mode, "value", mode)
    name = _MODES.get(key)
    if name is None or name not in allowed:
        raise Unsupported(f"{what} with interpolation={mode} (hpuload implements {', '.join(allowed)})")
    return name


def _fill(fill: Any, what: str) -> list[float] | None:
    """A fill (None, a number, or one value per channel) as [r, g, b] or None."""
    if isinstance(fill, dict):
        values = set(map(repr, fill.values()))
        if len(values) != 1:
            raise Unsupported(f"{what} with a per-type fill")
        fill = next(iter(fill.values()))
    if fill is None:
        return None
    if isinstance(fill, (int, float)):
        return [float(fill)] * 3
    fill = [float(f) for f in fill]
    if len(fill) == 1:
        return fill * 3
    if len(fill) == 3:
        return fill
    raise Unsupported(f"{what} with fill {fill!r}")


def _p(t: Any) -> float:
    return float(t.p)


def _range(value: Any) -> list[float] | None:
    if value is None:
        return None
    lo, hi = value
    return [float(lo), float(hi)]


def _torch_dtype_name(dtype: Any) -> str | None:
    import torch

    return {
        torch.float32: "f32",
        torch.float16: "f16",
        torch.bfloat16: "bf16",
        torch.uint8: "u8",
    }.get(dtype)


def _wrapped_compose(transform: Any) -> Any | None:
    """The Compose inside an object that only wraps one (torchvision's reference presets,
    `ClassificationPresetTrain`/`Eval`, keep it in `.transforms` and call it), else None. The
    object is checked to do nothing but call it and return what it gives (a wrapper that
    returns two views of the image, or scales what the Compose gives, is not looked
    through)."""
    from ._reference_steps import passes_along

    inner = getattr(transform, "transforms", None)
    if inner is None or not (_is(inner, "Compose") or _is_sequential(inner)) or not callable(transform):
        return None
    # On an image, or on (image, target) as the detection reference's v2 presets are called.
    if passes_along(transform, 1) or passes_along(transform, 2):
        return inner
    return None


def steps(transform: Any) -> list[Any]:
    """The steps of a Compose (v1 or v2; nested ones flattened, wrappers looked through), or
    the transform itself."""
    if transform is None:
        return []
    if _is(transform, "Compose"):
        return [step for t in transform.transforms for step in steps(t)]
    if _is_sequential(transform):
        return [step for t in transform for step in steps(t)]
    rebuilt = _unscripted(transform)
    if rebuilt is not None:
        return steps(rebuilt)
    preset = _preset_steps(transform)
    if preset is not None:
        return preset
    inner = _wrapped_compose(transform)
    if inner is not None and not _known(transform):
        return steps(inner)
    if not _known(transform):
        from ._probe import traced

        # A callable of the user's that only calls torchvision's functionals with arguments
        # of its own: the transforms those calls are.
        calls = traced(transform)
        if calls is not None:
            return [step for t in calls for step in steps(t)]
    return [transform]


def _is_sequential(obj: Any) -> bool:
    """Whether `obj` is a `torch.nn.Sequential` itself (not a subclass, whose `forward` may do
    otherwise): its modules called in order, each on what the last gave, as a Compose."""
    import torch

    return type(obj) is torch.nn.Sequential


#: torchvision's transforms `torch.jit.script` compiles, as their classes in
#: `torchvision.transforms` are named (a scripted module keeps the name as `original_name`).
_SCRIPTABLE = (
    "Resize", "CenterCrop", "RandomCrop", "RandomResizedCrop", "RandomHorizontalFlip", "RandomVerticalFlip",
    "ConvertImageDtype", "Normalize", "ColorJitter", "Grayscale", "RandomGrayscale", "GaussianBlur", "Pad",
    "RandomInvert", "RandomPosterize", "RandomSolarize", "RandomAdjustSharpness", "RandomAutocontrast",
    "RandomEqualize", "RandomErasing",
)

#: `torch.dtype`s by the number a scripted module holds for one (its `ScalarType`).
_SCALAR_TYPES = {0: "uint8", 5: "float16", 6: "float32", 7: "float64", 15: "bfloat16"}


def _unscripted(t: Any) -> Any | None:
    """The torchvision transforms a `torch.jit.script`-compiled module runs (transformers'
    `run_clip.py` scripts a module holding a `torch.nn.Sequential` of them), rebuilt as Python
    objects from the attributes the compiled ones keep, or None when `t` is not compiled or
    holds something else. A module of the user's is looked through to its one child. What the
    rebuilt steps do is checked against the compiled module on three textured images of other
    sizes, each under one seed (`_runs_alike`): a module whose own code does more than hand
    its input along (scales the output, draws otherwise) is not rebuilt."""
    import torch

    if not isinstance(t, torch.jit.RecursiveScriptModule):
        return None
    rebuilt = _rebuild_scripted(t)
    if rebuilt is None or not _runs_alike(t, rebuilt):
        return None
    return rebuilt


def _rebuild_scripted(t: Any) -> Any | None:
    import inspect

    import torch
    from torchvision import transforms as v1

    name = getattr(t, "original_name", None)
    children = list(t.children())
    if name == "Sequential":
        parts = [_rebuild_scripted(c) for c in children]
        return None if any(p is None for p in parts) else v1.Compose(parts)
    if name in _SCRIPTABLE:
        cls = getattr(v1, name, None)
        if cls is None or children:
            return None
        kwargs = {}
        for param in list(inspect.signature(cls.__init__).parameters)[1:]:
            if not hasattr(t, param):
                return None
            value = getattr(t, param)
            if param == "dtype" and isinstance(value, int):
                if value not in _SCALAR_TYPES:
                    return None
                value = getattr(torch, _SCALAR_TYPES[value])
            kwargs[param] = value
        try:
            return cls(**kwargs)
        except Exception:  # noqa: BLE001 - attributes the constructor does not take back
            return None
    if len(children) == 1:
        # A module of the user's holding one: what it does beyond calling it shows in `_runs_alike`.
        return _rebuild_scripted(children[0])
    return None


def _runs_alike(scripted: Any, rebuilt: Any) -> bool:
    """Whether `scripted` and `rebuilt` give equal tensors (or raise alike) for three textured
    uint8 images of other sizes, each under one seed of torch's generator."""
    import torch

    from ._behaviour import generators_kept

    ran = 0
    with generators_kept():
        for seed, (h, w) in enumerate(((301, 417), (480, 353), (256, 256))):
            g = torch.Generator().manual_seed(seed)
            image = torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g)
            outcomes = []
            for run in (scripted, rebuilt):
                torch.manual_seed(1000 + seed)
                try:
                    outcomes.append(run(image))
                except Exception as e:  # noqa: BLE001 - compared by kind
                    outcomes.append(type(e))
            a, b = outcomes
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
                if a.dtype != b.dtype or a.shape != b.shape or not torch.equal(a, b):
                    return False
                ran += 1
            elif isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
                return False
    return ran > 0


class ToCTHW:
    """`[T, C, H, W]` to `[C, T, H, W]`: the last step of torchvision's `VideoClassification`."""

    def __call__(self, clip):
        return clip.permute(1, 0, 2, 3)


def _preset_steps(t: Any) -> list[Any] | None:
    """The steps of one of torchvision's weight presets (what `weights.transforms()` gives,
    and the classification references use to evaluate with pretrained weights), as the
    transforms that compute the same, or None when `t` is not one. `ImageClassification`
    resizes the PIL image, crops its centre, converts and normalizes; `VideoClassification`
    resizes the uint8 clip without antialiasing (rounded to uint8, as hpuload's resize is),
    crops its centre, converts, normalizes and permutes to `[C, T, H, W]`."""
    try:
        import torch
        from torchvision import transforms as v1
        from torchvision.transforms import _presets
    except ImportError:  # pragma: no cover
        return None
    if type(t) is _presets.ImageClassification:
        return [
            v1.Resize(t.resize_size, interpolation=t.interpolation, antialias=t.antialias),
            v1.CenterCrop(t.crop_size),
            v1.PILToTensor(),
            v1.ConvertImageDtype(torch.float),
            v1.Normalize(t.mean, t.std),
        ]
    if type(t) is _presets.VideoClassification:
        return [
            v1.Resize(t.resize_size, interpolation=t.interpolation, antialias=False),
            v1.CenterCrop(t.crop_size),
            v1.ConvertImageDtype(torch.float),
            v1.Normalize(t.mean, t.std),
            ToCTHW(),
        ]
    return None


def _crop_padding(t: Any, what: str, after_resize: bool) -> dict:
    """A RandomCrop's `padding`, `pad_if_needed`, `fill` and `padding_mode` as the op's fields
    (padding given `[left, top, right, bottom]`); hpuload pads before a crop of the image
    itself."""
    if after_resize:
        raise Unsupported(f"{what} with padding after a resize, or of a video (hpuload pads an image before its crop)")
    mode = getattr(t, "padding_mode", "constant")
    if mode not in ("constant", "edge", "reflect", "symmetric"):
        raise Unsupported(f"{what}(padding_mode={mode!r})")
    padding = t.padding
    if padding is None:
        sides = [0, 0, 0, 0]
    elif type(t).__module__.startswith("torchvision.transforms.v2"):
        left, right, top, bottom = (int(v) for v in padding)  # v2 keeps it parsed so
        sides = [left, top, right, bottom]
    elif isinstance(padding, int):
        sides = [padding] * 4
    else:
        padding = [int(v) for v in padding]
        if len(padding) == 1:
            sides = padding * 4
        elif len(padding) == 2:
            sides = [padding[0], padding[1], padding[0], padding[1]]
        elif len(padding) == 4:
            sides = padding
        else:
            raise Unsupported(f"{what} padding {t.padding!r}")
    if any(v < 0 for v in sides):
        raise Unsupported(f"{what} with negative padding {sides}")
    fill = [0, 0, 0]
    if mode == "constant":  # the other modes show the image, not the fill
        fill = _fill(t.fill, what) or [0.0, 0.0, 0.0]
        # torchvision hands a PIL image whole numbers (`int(x)`); the image's bytes hold 0..255.
        fill = [int(v) for v in fill]
        if any(not 0 <= v <= 255 for v in fill):
            raise Unsupported(f"{what} fill {t.fill!r} outside 0..255")
    return {
        "padding": sides,
        "pad_if_needed": bool(t.pad_if_needed),
        "fill": fill,
        "padding_mode": mode,
        # v2 pads the padding and what pad_if_needed adds in one step, v1 in two.
        "pad_at_once": type(t).__module__.startswith("torchvision.transforms.v2"),
    }


def _resize_interp(t: Any, what: str, on_tensor: bool) -> str:
    """A resize's interpolation (`t`'s), as torchvision computes it on what the image is at
    that step: on a PIL image Pillow's (`pil_nearest`: the pixel under the output pixel's
    centre; `pil_bilinear`, `pil_bicubic`: Pillow's 22-bit weights, its passes in the installed
    Pillow's order), on a uint8 tensor torch's (nearest: `floor(i * in / out)`; the
    antialiased filters with torch's uint8 kernel's 16-bit weights, or `float_bilinear`,
    `float_bicubic`: its float kernel, then rounded, where torchvision casts the tensor to
    float first: `_float_resize`). Lanczos (diffusers' scripts' default), box and Hamming are
    Pillow's alone (`pil_lanczos`, `pil_box`, `pil_hamming`): torchvision refuses them on a
    tensor."""
    interp = _interp(t.interpolation, what, ("nearest", "bilinear", "bicubic", "lanczos", "box", "hamming"))
    if interp in ("lanczos", "box", "hamming"):
        if on_tensor or not _pillow_pass_order():
            raise Unsupported(f"{what} with interpolation={interp} " + ("of a tensor" if on_tensor else "(an unknown Pillow)"))
        return "pil_" + interp
    if interp not in ("nearest", "bilinear", "bicubic"):
        return interp
    if on_tensor:
        return "float_" + interp if interp != "nearest" and _float_resize(t, interp) else interp
    if interp != "nearest" and not _pillow_pass_order():
        return interp  # a Pillow whose passes run in an order hpuload does not know
    return "pil_" + interp


def _resize_filter(t: Any, what: str, on_tensor: bool) -> str:
    """A resize's interpolation as `_resize_interp` gives it, with its `antialias`: off on a
    uint8 tensor (nearest and PIL images aside, where torchvision ignores it) is torch's uint8
    kernel without antialiasing (`torch_bilinear_no_antialias`, byte for byte) where v2 runs
    that kernel (bilinear, the CPU's uint8 path); `Unsupported` elsewhere (v1 and bicubic
    interpolate in float, and hpuload's two-tap float kernel is within a bit of torch's)."""
    interp = _resize_interp(t, what, on_tensor)
    if not _antialias_off(t) or not on_tensor or interp in ("nearest", "pil_nearest"):
        return interp
    if interp == "bilinear" and not _v1(t):
        return "torch_bilinear_no_antialias"
    raise Unsupported(f"{what}(antialias={t.antialias}) with {interp} interpolation")


def _resizes_floats(normalize: dict | None) -> bool:
    """Marks a resize of float values: a `Normalize` read before it (`ToTensor(),
    Normalize(...), Resize(...)`) then normalizes the floats before they are resized."""
    if normalize is not None:
        normalize["before_resize"] = True
    return True


def _antialias_off(t: Any) -> bool:
    """Whether a resize `t` of a tensor does not antialias: `antialias=False`, and `None`
    (torchvision's functionals read it as False on tensors; on PIL images it is ignored),
    and older torchvision's default `"warn"`, which was False on tensors too."""
    return getattr(t, "antialias", True) in (False, None, "warn")


def _float_filter(t: Any, what: str, dtype: str) -> str:
    """A resize's interpolation on a float image tensor of `dtype` (`ToTensor()` came first):
    torch's float kernel, whose values hpuload keeps unrounded (`float_bilinear`,
    `float_bicubic`; nearest copies pixels). `Unsupported` without antialiasing (torch's
    two-tap float kernel, which hpuload has only rounded), for the other filters, and on half
    floats (torch resamples a float16 or bfloat16 tensor in that type, rounding between its
    two passes: a unit in the last place off, where hpuload's passes run in f32)."""
    interp = _interp(t.interpolation, what)
    if interp == "nearest":
        return interp
    if interp not in ("bilinear", "bicubic"):
        raise Unsupported(f"{what} with {interp} interpolation of a float image")
    if _antialias_off(t):
        raise Unsupported(f"{what}(antialias={t.antialias}) of a float image")
    if dtype != "f32":
        kind = {"f16": "float16", "bf16": "bfloat16"}.get(dtype, dtype)
        raise Unsupported(f"{what} of a {kind} image (torch resamples half floats in half precision)")
    return "float_" + interp


def _v1(t: Any) -> bool:
    """Whether `t` is not one of torchvision v2's transforms (v1's, or a class built on v1's
    functions: on a tensor their arithmetic is v1's)."""
    return not type(t).__module__.startswith("torchvision.transforms.v2")


def _float_resize(t: Any, interp: str) -> bool:
    """Whether torchvision resizes a uint8 tensor with `t` (bilinear or bicubic) by casting it
    to float, interpolating, and rounding back: v1's resizes always (and the detection
    reference's own classes, which call v1's `resize`); v2's only where torch has no uint8
    kernel for the filter (its own test: bilinear on a CPU without AVX2)."""
    if _v1(t):
        return True
    try:
        from torchvision.transforms.v2.functional._geometry import _do_native_uint8_resize_on_cpu
        from torchvision.transforms import InterpolationMode
    except ImportError:
        return False
    return not _do_native_uint8_resize_on_cpu(InterpolationMode(interp))


#: The installed Pillow's pass order, once probed: True once set, False if unknown.
_PILLOW_ORDER: bool | None = None

# A 5x12 image (bytes `i * 97 % 256`) resized to 3x2 with Pillow's bilinear: the bytes when the
# pass down the columns runs first (Pillow 13 and later, whose rule picks it for these
# sizes), and when the pass across always runs first (up to Pillow 12).
_PROBE_DOWN_FIRST = bytes([111, 123, 142, 120, 117, 125, 134, 144, 131, 137, 137, 134, 126, 125, 129, 120, 124, 121])
_PROBE_ACROSS_FIRST = bytes([111, 123, 142, 120, 118, 125, 133, 144, 131, 137, 137, 133, 126, 125, 129, 120, 124, 121])


def _pillow_pass_order() -> bool:
    """Tells the resampler which pass the installed Pillow runs first (Pillow 13 runs the pass
    down first when the height shrinks by more than twice as many pixels as the width), found
    by resizing a small image with it; False when the result is neither order's."""
    global _PILLOW_ORDER
    if _PILLOW_ORDER is None:
        from PIL import Image

        from . import _hpuload

        probe = Image.frombytes("RGB", (5, 12), bytes(i * 97 % 256 for i in range(180)))
        got = probe.resize((3, 2), Image.Resampling.BILINEAR).tobytes()
        _PILLOW_ORDER = got in (_PROBE_DOWN_FIRST, _PROBE_ACROSS_FIRST)
        if _PILLOW_ORDER:
            _hpuload.pillow_pass_order(got == _PROBE_DOWN_FIRST)
    return _PILLOW_ORDER


#: Whether v1's Gaussian kernels take `torch.exp` from the loaded torch: None until asked.
_TORCH_EXP: bool | None = None


def _use_torchs_exp() -> bool:
    """Hands the native kernels the exponential `torch.exp` computes with: torch's x86-64
    builds call MKL's `vmsExp` (high accuracy), which rounds about one value in a hundred to
    the other side of a half ulp from the true value, and the loaded `libtorch_cpu` exports
    it. Used only where calling it gives `torch.exp`'s bits on 4,096 values over [-30, 0];
    otherwise (no MKL, another build) the kernels keep the correctly rounded exponential."""
    global _TORCH_EXP
    if _TORCH_EXP is None:
        import ctypes
        import os

        import torch

        from . import _hpuload

        _TORCH_EXP = False
        folder = os.path.join(os.path.dirname(torch.__file__), "lib")
        for name in ("libtorch_cpu.so", "libtorch_cpu.dylib", "torch_cpu.dll"):
            try:
                vms_exp = ctypes.CDLL(os.path.join(folder, name), mode=getattr(os, "RTLD_NOLOAD", 0)).vmsExp
            except (OSError, AttributeError):
                continue
            vms_exp.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
            vms_exp.restype = None
            x = torch.linspace(-30.0, 0.0, 4096)
            out = torch.empty_like(x)
            vms_exp(x.numel(), x.data_ptr(), out.data_ptr(), 0x2 | 0x140000 | 0x100)
            if torch.equal(out.view(torch.int32), torch.exp(x).view(torch.int32)):
                _hpuload.use_torch_exp(ctypes.cast(vms_exp, ctypes.c_void_p).value)
                _TORCH_EXP = True
            break
    return _TORCH_EXP


def _known(t: Any) -> bool:
    name = type(t).__name__
    return _is(t, name) or _is_timm(t, name)


def _pixel_op(t: Any, pil: bool = False) -> dict | None:
    """The pipeline op for a pixel transform on uint8 images, or None if `t` is not one. With
    `pil` (the transform runs on PIL images), a class of the user's own is also taken when it
    behaves as one of hpuload's Pillow ops (`_behaviour.py`)."""
    name = type(t).__name__
    if _is_timm_class(t, "timm.data.auto_augment", "RandAugment"):
        return _timm_rand_augment(t)
    if _is_timm_class(t, "timm.data.auto_augment", "AutoAugment"):
        return _timm_auto_augment(t)
    if _is_timm_class(t, "timm.data.auto_augment", "AugMixAugment"):
        return _timm_aug_mix(t)
    if _is(t, "RandomHorizontalFlip"):
        return {"op": "random_horizontal_flip", "p": _p(t)}
    if _is(t, "RandomVerticalFlip"):
        return {"op": "random_vertical_flip", "p": _p(t)}
    if _is(t, "ColorJitter"):
        op = {"op": "color_jitter"}
        for k in ("brightness", "contrast", "saturation", "hue"):
            r = _range(getattr(t, k))
            if r is not None:
                op[k] = r
        if pil:
            op["pil"] = True  # Pillow's ImageEnhance and byte HSV
        elif _v1(t):
            op["v1"] = True  # v1's hue arithmetic on a tensor
        return op
    # A PIL image's grey is Pillow's `convert("L")` (integer weights); a tensor's is torch's
    # float sum, truncated: they differ by a level in some pixels.
    grey = "pil_grayscale" if pil else "random_grayscale"
    if _is(t, "RandomGrayscale"):
        return {"op": grey, "p": _p(t)}
    if _is(t, "Grayscale"):
        if t.num_output_channels != 3:
            if not pil:
                raise Unsupported("Grayscale(num_output_channels=1) of a tensor (hpuload's batches have 3 channels)")
            # Pillow's "L" image: hpuload makes it as three equal channels and hands out one
            # (`_translate` marks the pipeline `single_channel`).
            return {"op": grey, "p": 1.0, "single_channel": True}
        return {"op": grey, "p": 1.0}
    if _is(t, "GaussianBlur"):
        # v1 and v2 build the kernel by different f32 arithmetic (an ulp apart, which moves
        # a byte now and then); hpuload builds the one the user's class does.
        blur = {"op": "gaussian_blur", "kernel_size": [int(k) for k in t.kernel_size], "sigma": _range(t.sigma)}
        if _v1(t):
            _use_torchs_exp()  # v1's kernel takes `torch.exp`, MKL's on x86-64
            return {**blur, "v1": True}
        return blur
    if _is(t, "RandomSolarize"):
        return {"op": "random_solarize", "threshold": float(t.threshold), "p": _p(t)}
    if _is(t, "RandomPosterize"):
        return {"op": "random_posterize", "bits": int(t.bits), "p": _p(t)}
    if _is(t, "RandomAutocontrast"):
        # On a tensor v1 multiplies by 255 / (max - min), v2 divides by (max - min) / 255.
        return {"op": "random_autocontrast", "p": _p(t), "pil": pil, "v1": not pil and _v1(t)}
    if _is(t, "RandomEqualize"):
        return {"op": "random_equalize", "p": _p(t)}
    if _is(t, "RandomAdjustSharpness"):
        return {"op": "random_adjust_sharpness", "sharpness_factor": float(t.sharpness_factor), "p": _p(t), "pil": pil}
    if _is(t, "RandomInvert"):
        return {"op": "random_invert", "p": _p(t)}
    if _is(t, "RandomRotation"):
        if t.expand:
            raise Unsupported("RandomRotation(expand=True) (a different shape per image)")
        op = {
            "op": "random_rotation",
            "degrees": _range(t.degrees),
            "interpolation": _interp(t.interpolation, name, ("nearest", "bilinear")),
            "fill": _fill(getattr(t, "_fill", t.fill), name),
        }
        if t.center is not None:
            op["center"] = [float(c) for c in t.center]
        if pil:
            op["pil"] = True
        return op
    if _is(t, "RandomAffine"):
        shear = None
        if t.shear is not None:
            shear = [float(s) for s in t.shear]
            if len(shear) == 2:
                shear = shear + [0.0, 0.0]
        op = {
            "op": "random_affine",
            "degrees": _range(t.degrees),
            "translate": _range(t.translate),
            "scale": _range(t.scale),
            "shear": shear,
            "interpolation": _interp(t.interpolation, name, ("nearest", "bilinear")),
            "fill": _fill(getattr(t, "_fill", t.fill), name),
        }
        if t.center is not None:
            op["center"] = [float(c) for c in t.center]
        if pil:
            op["pil"] = True
        return op
    # On a PIL image torchvision's policies warp with Pillow ("pil"); AugMix converts the
    # image to a tensor first.
    if _is(t, "AutoAugment"):
        return {
            "op": "auto_augment",
            "policy": getattr(t.policy, "value", str(t.policy)).lower(),
            "interpolation": _interp(t.interpolation, name, ("nearest", "bilinear")),
            "fill": _fill(t.fill, name),
            "pil": pil,
            "v1": not pil and _v1(t),
        }
    if _is(t, "RandAugment"):
        return {
            "op": "rand_augment",
            "num_ops": int(t.num_ops),
            "magnitude": int(t.magnitude),
            "num_magnitude_bins": int(t.num_magnitude_bins),
            "interpolation": _interp(t.interpolation, name, ("nearest", "bilinear")),
            "fill": _fill(t.fill, name),
            "pil": pil,
            "v1": not pil and _v1(t),
        }
    if _is(t, "TrivialAugmentWide"):
        return {
            "op": "trivial_augment_wide",
            "num_magnitude_bins": int(t.num_magnitude_bins),
            "interpolation": _interp(t.interpolation, name, ("nearest", "bilinear")),
            "fill": _fill(t.fill, name),
            "pil": pil,
            "v1": not pil and _v1(t),
        }
    if _is(t, "AugMix"):
        return {
            "op": "aug_mix",
            "severity": int(t.severity),
            "mixture_width": int(t.mixture_width),
            "chain_depth": int(t.chain_depth),
            "alpha": float(t.alpha),
            "all_ops": bool(t.all_ops),
            "interpolation": _interp(t.interpolation, name, ("nearest", "bilinear")),
            "fill": _fill(t.fill, name),
            "v1": _v1(t),
        }
    if _is(t, "RandomApply"):
        return {"op": "random_apply", "ops": _nested(t.transforms, name, pil), "p": _p(t)}
    if _is(t, "RandomChoice"):
        ops = _nested(t.transforms, name, pil)
        p = None if t.p is None else [float(x) for x in t.p]
        if p is not None and len(p) != len(ops):
            p = None if len(set(p)) == 1 else p
        return {"op": "random_choice", "ops": ops, "p": p}
    if _is(t, "RandomOrder"):
        return {"op": "random_order", "ops": _nested(t.transforms, name, pil)}
    if pil:
        from ._behaviour import user_pixel_op

        return user_pixel_op(t)
    return None


def _is_timm_class(obj: Any, module: str, name: str) -> bool:
    cls = type(obj)
    return cls.__name__ == name and cls.__module__ == module


#: The ops of timm's auto-augment vocabulary that hpuload runs (timm's names).
_TIMM_OPS = frozenset(
    """AutoContrast Equalize Invert Rotate Posterize PosterizeIncreasing PosterizeOriginal Solarize
    SolarizeIncreasing SolarizeAdd Color ColorIncreasing Contrast ContrastIncreasing Brightness
    BrightnessIncreasing Sharpness SharpnessIncreasing ShearX ShearY TranslateX TranslateY
    TranslateXRel TranslateYRel Desaturate GaussianBlur GaussianBlurRand""".split()
)


def _timm_hparams(ops: list, what: str) -> dict:
    """The settings timm's AugmentOps share (all of `ops` must agree on them)."""
    if not ops:
        raise Unsupported(f"timm's {what} without ops")
    unknown = sorted({o.name for o in ops} - _TIMM_OPS)
    if unknown:
        raise Unsupported(f"timm's {what} with op(s) {', '.join(unknown)}")

    def settings(o: Any) -> tuple:
        h = o.hparams
        return (
            o.magnitude_std,
            o.magnitude_max,
            tuple(o.kwargs.get("fillcolor", (128, 128, 128))),
            o.kwargs.get("resample"),
            h.get("translate_pct", 0.45),
            h.get("translate_const", 250),
        )

    first = settings(ops[0])
    if any(settings(o) != first for o in ops[1:]):
        raise Unsupported(f"timm's {what} whose ops differ in magnitude noise or fill")
    mstd, mmax, fill, resample, pct, const = first
    if len(fill) != 3:
        raise Unsupported(f"timm's {what} fill {fill!r}")
    names = {0: "nearest", 2: "bilinear", 3: "bicubic"}
    resample = resample if isinstance(resample, (list, tuple)) else [resample]
    interpolation = [names.get(int(r), str(r)) for r in resample]
    if not interpolation or any(i not in ("bilinear", "bicubic") for i in interpolation):
        raise Unsupported(f"timm's {what} with {interpolation} warps (hpuload: bilinear, bicubic)")
    mstd = float(mstd or 0.0)
    return {
        "magnitude_std": 0.0 if math.isinf(mstd) else max(mstd, 0.0),
        "magnitude_uniform": math.isinf(mstd),
        "magnitude_max": None if mmax is None else float(mmax),
        "fill": [int(round(float(c))) for c in fill],
        "interpolation": interpolation,
        "translate_pct": float(pct),
        "translate_const": float(const),
    }


def _timm_rand_augment(t: Any) -> dict:
    """timm's RandAugment as built by `rand_augment_transform` (every op shares its settings)."""
    ops = list(t.ops)
    hparams = _timm_hparams(ops, "RandAugment")
    if len({(o.prob, o.magnitude) for o in ops}) != 1:
        raise Unsupported("timm's RandAugment whose ops differ in probability or magnitude")
    weights = t.choice_weights
    return {
        "op": "timm_rand_augment",
        "ops": [o.name for o in ops],
        "num_layers": int(t.num_layers),
        "weights": None if weights is None else [float(w) for w in weights],
        "prob": float(ops[0].prob),
        "magnitude": float(ops[0].magnitude),
        "hparams": hparams,
    }


def _timm_auto_augment(t: Any) -> dict:
    """timm's AutoAugment (`auto_augment_transform`): sub-policies of (op, prob, magnitude)."""
    policy = [list(sub) for sub in t.policy]
    hparams = _timm_hparams([o for sub in policy for o in sub], "AutoAugment")
    return {
        "op": "timm_auto_augment",
        "policy": [[{"op": o.name, "prob": float(o.prob), "magnitude": float(o.magnitude)} for o in sub] for sub in policy],
        "hparams": hparams,
    }


def _timm_aug_mix(t: Any) -> dict:
    """timm's AugMixAugment (`augment_and_mix_transform`), basic or blended (`-b1`)."""
    ops = list(t.ops)
    hparams = _timm_hparams(ops, "AugMix")
    if len({(o.prob, o.magnitude) for o in ops}) != 1 or ops[0].prob != 1.0:
        raise Unsupported("timm's AugMix whose ops differ in magnitude or are not always applied")
    return {
        "op": "timm_aug_mix",
        "ops": [o.name for o in ops],
        "magnitude": float(ops[0].magnitude),
        "width": int(t.width),
        "depth": int(t.depth),
        "alpha": float(t.alpha),
        "blended": bool(t.blended),
        "hparams": hparams,
    }


def _nested(transforms: Any, what: str, pil: bool = False) -> list[dict]:
    ops = []
    for t in transforms:
        op = _pixel_op(t, pil)
        if op is None:
            raise Unsupported(f"{what} of {type(t).__name__} (hpuload nests pixel ops only)")
        ops.append(op)
    return ops


def _unsupported_name(t: Any) -> str:
    """How a refused step is named to the user (timm's own auto-augment with its policy)."""
    cls = type(t)
    if cls.__module__.startswith("timm.data.auto_augment"):
        return f"timm's {cls.__name__} ({t!r})".replace("\n", " ")
    return f"{cls.__module__}.{cls.__name__}"


def translate(transform: Any, video: bool = False, clip_format: str = "TCHW"):
    """`(pipeline JSON, output dtype)` for a torchvision transform applied to PIL images.

    With `video=True`, `(pipeline JSON, output dtype, clip layout)` for one applied to a
    video's clip, a uint8 `[T, C, H, W]` tensor (what torchvision's video datasets give their
    transform; with `clip_format="THWC"`, `UCF101`'s and `HMDB51`'s default, a `[T, H, W, C]`
    one, which the transform's first step must permute to `[T, C, H, W]`, as the video
    reference's `ConvertBHWCtoBCHW` did when that was its datasets' output), with what
    torchvision's video reference presets do there:
    - the conversion to float may come first, before the resize (hpuload resizes the uint8
      frames and converts after: the same values but for the rounding, under one level);
    - `Resize(antialias=False)` resizes from the two nearest pixels per axis, as torch's
      tensor resize does without antialiasing;
    - flips, `Normalize` and pixel ops that change each pixel alone (`ColorJitter` without
      contrast, grey, invert, posterize, solarize) may come before `RandomCrop`/`CenterCrop`
      (a flip before a crop at offset `x` is the crop at the mirrored offset, flipped, which
      hpuload cuts: exact for a centre crop with an odd margin too; the others run on the
      crop);
    - pixel ops (`ColorJitter`, `Grayscale`, `GaussianBlur`, the auto-augment policies, ...)
      on the uint8 clip after its crop or resize run hpuload's kernels, which are torchvision's
      tensor kernels on uint8, one draw per clip for all its frames (on a float clip they are
      refused: torchvision does not round there);
    - a last step that turns `[T, C, H, W]` into `[C, T, H, W]` (the reference's
      `ConvertBCHWtoCBHW`, or any callable that permutes so, found by running it on a small
      tensor) makes the clip layout `CTHW`;
    - torchvision's weight presets (`weights.transforms()`) are the steps they run
      (`_preset_steps`)."""
    all_steps = steps(transform)
    if video and clip_format == "THWC":
        all_steps, permuted = _thwc_steps(all_steps)
        if not permuted:
            first = _unsupported_name(all_steps[0]) if all_steps else "none"
            raise Unsupported(
                f"the clips are [T, H, W, C] (output_format='THWC') and the transform's first step ({first}) "
                "does not permute them to [T, C, H, W], which torchvision's transforms take"
            )
        all_steps = all_steps[1:]
    pipeline, dtype, layout, _ = _translate(all_steps, video=video, open_end=False)
    return (pipeline, dtype, layout) if video else (pipeline, dtype)


#: Set while a transform of grey images (MNIST's, `_arrays.translate`) is translated: a step
#: of the user's own is then watched on grey images (`_behaviour`).
GREY_IMAGES: contextvars.ContextVar[bool] = contextvars.ContextVar("GREY_IMAGES", default=False)


def _translate(all_steps: list, *, video: bool, open_end: bool) -> tuple[str, str, str, str]:
    """`(pipeline JSON, dtype, clip layout, what the last step gives)` for `all_steps`, or
    `Unsupported`. What the last step gives: "pil" (a PIL image: only with `open_end`, where
    the steps are the prefix of a longer transform), "image" (a tensor that torchvision v2
    tags as an image: `ToImage` came before) or "tensor"."""
    geometry: list[dict] = []
    before: list[dict] = []  # pixel ops before any crop or resize: run on the whole image
    pixel: list[dict] = []
    dtype: str | None = None  # None: still a PIL image (or a uint8 image tensor after ToImage)
    image_tensor = video  # after PILToTensor / ToImage (or a video's clip): a uint8 tensor
    normalize: dict | None = None
    erasing: list[dict] = []
    layout = "TCHW"
    tagged = False  # after v2's ToImage: the tensor is a tv_tensors.Image
    to_float = "divide"  # how the bytes became floats: `x / 255`, or v2's `x * (1 / 255)`
    upright = False  # a first step turns each image upright by its EXIF orientation
    single = False  # after `Grayscale(num_output_channels=1)`: one channel, made as three
    pad = None  # a `Pad` waiting for the `RandomCrop` after it
    resize_floats = False  # an image's resize ran on the floats `ToTensor()` made
    for t in all_steps:
        name = type(t).__name__
        # What a resize at this step gets: a tensor (torch's nearest; antialias=False
        # matters), or a PIL image.
        on_tensor = video or image_tensor or dtype is not None
        if video and (_is(t, "Lambda") or not _known(t)):
            seen = _recognised_video_step(t)
            if seen is not None:
                if _is(seen, "Resize") and dtype is None:
                    raise Unsupported(f"{name} resizes a uint8 clip (recognised on float clips only)")
                t = seen
        if isinstance(t, CenterSquare):
            if video or geometry or pixel or before or dtype is not None or image_tensor or pad is not None:
                raise Unsupported("the centre square of the shorter side after another step")
            geometry.append({"op": "center_square"})
            continue
        if not video and dtype is None and not image_tensor and (_is(t, "Lambda") or not _known(t)):
            from ._behaviour import acts_as_to_tensor, keeps_rgb_images, turns_upright

            grey = GREY_IMAGES.get()
            if not single and keeps_rgb_images(t, grey):
                continue  # a conversion to RGB (or nothing) on an RGB image: nothing to run
            if not geometry and not pixel and not before and turns_upright(t, grey):
                # As the decode turns each image (`exif_orientation`). Later, after a crop or
                # resize, Pillow turns what they made: a tail, which `translate_split` refuses.
                upright = True
                continue
            form = acts_as_to_tensor(t, grey)
            if form == "divide":
                from torchvision import transforms as tv_transforms

                t, name = tv_transforms.ToTensor(), "ToTensor"
            elif form == "multiply":  # as v2's ToImage then ToDtype(torch.float32, scale=True)
                dtype, to_float, tagged = "f32", "multiply", True
                continue
        if layout != "TCHW":
            raise Unsupported(f"{name} after the permute to [C, T, H, W]")
        if pad is not None and not _is(t, "RandomCrop"):
            raise Unsupported("Pad followed by another step than RandomCrop (hpuload pads an image for its crop)")
        if _is(t, "Pad"):
            if geometry or pixel or before or video or dtype is not None or image_tensor:
                raise Unsupported("Pad after another step (hpuload pads the PIL image for the RandomCrop after it)")
            pad = t
            continue
        # Flips since the resize may come before its crop (hpuload cuts the crop at the
        # mirrored offset where one falls, then flips it), and ops that change each pixel on
        # its own (they run on the crop instead, the same bytes); on a video, the float
        # conversion and Normalize may too (they commute with a crop).
        # On a float image only flips come after the geometry (other pixel ops refuse).
        croppable = (
            all(_is_flip(op) or _pointwise(op) for op in pixel)
            and not erasing
            and (video or dtype is None or all(_is_flip(op) for op in pixel))
        )
        # An image made floats (`ToTensor()`) before its resize: hpuload resizes the floats
        # with torch's float kernel, unrounded (`resize_floats`).
        floats = not video and dtype is not None and not pixel and (normalize is None or not geometry) and not erasing
        if _is(t, "RandomResizedCrop") or _is_timm(t, "RandomResizedCropAndInterpolation"):
            if (dtype is not None and not floats) or geometry or pixel:
                raise Unsupported(f"{name} must come first, before any pixel op or tensor conversion")
            if floats:
                resize_floats = _resizes_floats(normalize)
            geometry.append(
                {
                    "op": "random_resized_crop",
                    "size": _hw(t.size, name),
                    "scale": [float(t.scale[0]), float(t.scale[1])],
                    "ratio": [float(t.ratio[0]), float(t.ratio[1])],
                    "interpolation": _float_filter(t, name, dtype) if floats else _resize_filter(t, name, on_tensor),
                }
            )
        elif _is(t, "Resize") and floats:
            if getattr(t, "max_size", None) is not None:
                raise Unsupported("Resize with max_size")
            resize_floats = _resizes_floats(normalize)
            size = t.size
            if isinstance(size, (list, tuple)) and len(size) == 1:
                size = size[0]
            geometry.append({"op": "resize", "size": size if isinstance(size, int) else _hw(size, name), "interpolation": _float_filter(t, name, dtype)})
        elif _is(t, "Resize"):
            if video and geometry and geometry[-1]["op"] in ("center_crop", "random_crop"):
                # hpuload resizes an image's crop (`CenterCrop` then `Resize`); a clip's frames
                # are resampled to the output from the window directly, not checked for it.
                raise Unsupported("Resize after a crop of a clip")
            float_first = video and not pixel and normalize is None and not erasing
            if pixel or (dtype is not None and not float_first):
                raise Unsupported("Resize after a pixel op or the conversion to float")
            if video and _antialias_off(t) and getattr(t, "max_size", None) is None:
                interp = _resize_interp(t, name, on_tensor)
                if interp not in ("nearest", "bilinear", "float_bilinear"):
                    raise Unsupported(f"Resize(antialias={t.antialias}) with {interp} interpolation")
                if interp != "nearest":  # nearest takes one pixel: antialias changes nothing
                    # v2 resizes a uint8 clip with torch's uint8 kernel (byte for byte); a
                    # float clip, and v1's uint8 one, in float (two taps, rounded once).
                    native = dtype is None and interp == "bilinear" and not _v1(t)
                    interp = "torch_bilinear_no_antialias" if native else "bilinear_no_antialias"
            else:
                if getattr(t, "max_size", None) is not None:
                    raise Unsupported("Resize with max_size")
                interp = _resize_filter(t, name, on_tensor)
                if dtype is not None and interp in ("bicubic", "float_bicubic"):
                    # torch's bicubic kernel on floats overshoots [0, 1] at edges (its values
                    # are not clamped); hpuload's frames are bytes, which would clamp them.
                    raise Unsupported("Resize with bicubic interpolation of a float clip")
                if dtype is not None and interp in ("bilinear", "bicubic"):
                    # A float clip is resized with torch's float kernel, unrounded: its values
                    # rounded once are the nearest bytes (the uint8 kernel rounds twice).
                    interp = "float_" + interp
            size = t.size
            if isinstance(size, (list, tuple)) and len(size) == 1:
                size = size[0]
            geometry.append({"op": "resize", "size": size if isinstance(size, int) else _hw(size, name), "interpolation": interp})
        elif _is(t, "RandomResize"):
            # torchvision v2: the shorter side drawn from randint(min_size, max_size).
            if dtype is not None or pixel:
                raise Unsupported("RandomResize after a pixel op or the conversion to float")
            geometry.append(
                {
                    "op": "random_resize",
                    "min_size": int(t.min_size),
                    "max_size": int(t.max_size),
                    "interpolation": _resize_filter(t, name, on_tensor),
                }
            )
        elif _is(t, "CenterCrop"):
            pixel = _before_crop(pixel, geometry, croppable, "CenterCrop", video=video, on_float=dtype is not None or bool(erasing))
            # An image smaller than the crop is padded with black, as torchvision pads it
            # (a clip's frames share one size, checked when the loader is built).
            geometry.append({"op": "center_crop", "size": _hw(t.size, name), "pad": not video})
        elif _is(t, "RandomCrop"):
            pixel = _before_crop(pixel, geometry, croppable, "RandomCrop", video=video, on_float=dtype is not None or bool(erasing))
            op = {"op": "random_crop", "size": _hw(t.size, name)}
            if pad is not None:
                if getattr(t, "padding", None) or getattr(t, "pad_if_needed", False):
                    raise Unsupported("RandomCrop with padding of its own after Pad")
                # `Pad` then `RandomCrop` is `RandomCrop` with that padding: its crop is drawn
                # on the padded image either way.
                shim = types.SimpleNamespace(padding=pad.padding, fill=pad.fill, padding_mode=pad.padding_mode, pad_if_needed=False)
                op.update(_crop_padding(shim, "Pad", after_resize=False))
                pad = None
            elif getattr(t, "padding", None) or getattr(t, "pad_if_needed", False):
                op.update(_crop_padding(t, name, after_resize=bool(geometry) or video))
            geometry.append(op)
        elif _is(t, "ToTensor") or _is_timm(t, "MaybeToTensor") or _is_timm(t, "ToTensor"):
            if dtype is not None or image_tensor:
                raise Unsupported(f"{name} after another tensor conversion")
            dtype = "f32"
            to_float = "divide"
        elif (dtype is not None or image_tensor) and _v2_only(t, ("ToImage", "PILToTensor")):
            # v2's conversions of a tensor: `ToImage` only tags it a `tv_tensors.Image`,
            # `PILToTensor` passes it through (a Dataset that reads tensors, then gives them to
            # a transform written for PIL images).
            tagged = tagged or name == "ToImage"
        elif _is(t, "PILToTensor") or _is(t, "ToImage") or _is_timm(t, "MaybePILToTensor"):
            if dtype is not None or image_tensor:
                raise Unsupported(f"{name} after another tensor conversion")
            image_tensor = True
            tagged = _is(t, "ToImage")
        elif _is(t, "ToDtype") and isinstance(t.dtype, dict) and _image_dtype(t, tagged, image_tensor and dtype is None) is None:
            pass  # v2 passes the image through (a dtype for other types alone: a mask's)
        elif _is(t, "ConvertImageDtype") or _is(t, "ToDtype"):
            target = t.dtype
            if isinstance(target, dict):
                target = _image_dtype(t, tagged, image_tensor and dtype is None)
            scale = True if _is(t, "ConvertImageDtype") else bool(getattr(t, "scale", False))
            out = _torch_dtype_name(target)
            if out is None:
                raise Unsupported(f"{name}({target})")
            if not (image_tensor and dtype is None):
                raise Unsupported(f"{name} must follow PILToTensor or ToImage")
            if out != "u8" and not scale:
                raise Unsupported(f"{name}({target}, scale=False): hpuload scales to [0, 1]")
            dtype = None if out == "u8" else out
            if out != "u8":
                image_tensor = False
                # v2 scales by the reciprocal, v1's ConvertImageDtype divides.
                to_float = "multiply" if _is(t, "ToDtype") else "divide"
        elif _is(t, "Normalize"):
            if dtype is None:
                raise Unsupported("Normalize before the conversion to float")
            if normalize is not None:
                raise Unsupported("two Normalize steps")
            if erasing:
                raise Unsupported("Normalize after RandomErasing")
            mean, std = list(t.mean), list(t.std)
            if single and (len(mean) != 1 or len(std) != 1):
                raise Unsupported("Normalize with three channels after Grayscale(num_output_channels=1) (torch refuses it on one)")
            if len(mean) == 1:
                mean = mean * 3
            if len(std) == 1:
                std = std * 3
            if len(mean) != 3 or len(std) != 3:
                raise Unsupported("Normalize with other than 3 channels")
            normalize = {
                "op": "normalize",
                "mean": [float(m) for m in mean],
                "std": [float(s) for s in std],
                "to_float": to_float,
                # After a conversion to f16 or bf16 torch normalizes in that dtype, rounding
                # each step to it; hpuload's table reproduces those roundings.
                "in_output_dtype": dtype in ("f16", "bf16"),
            }
        elif _is(t, "RandomErasing"):
            if dtype is None and not image_tensor:
                raise Unsupported("RandomErasing on a PIL image (it takes tensors)")
            if single and isinstance(t.value, (list, tuple)) and len(t.value) != 1:
                raise Unsupported("RandomErasing with three values after Grayscale(num_output_channels=1) (torchvision refuses them on one channel)")
            erasing.append(_erasing_tv(t, dtype))
        elif _is_timm(t, "RandomErasing"):
            if dtype is None:
                raise Unsupported("timm's RandomErasing before the conversion to float")
            erasing.append(_erasing_timm(t))
        elif _is(t, "ToPureTensor"):
            pass
        elif video and _permutes(t, (1, 0, 2, 3)):
            layout = "CTHW"
        else:
            # Before the conversion to a tensor the image is a PIL image, and torchvision runs
            # Pillow's arithmetic on it; after it, its tensor kernels (and a class of the
            # user's, watched on PIL images, is not one of hpuload's ops there).
            op = _pixel_op(t, pil=not image_tensor and dtype is None)
            if op is None:
                raise Unsupported(f"transform {_unsupported_name(t)} is not one hpuload implements")
            flip = _is_flip(op)
            _one_channel_step(t, op, name, single, pil=not image_tensor and dtype is None, flip=flip)
            # Only a PIL image's grey makes one channel (`_pixel_op`): never a video's clip.
            single = op.pop("single_channel", False) or single
            if not geometry:
                # A flip moves values whatever their type: on an image tensor (uint8 or float,
                # normalized or not) it is the flip of the bytes before their conversion.
                if video or ((image_tensor or dtype is not None) and not flip) or erasing:
                    raise Unsupported(f"{name} before the crop or resize, on a tensor")
                # On the PIL image before its crop or resize: run on the whole decoded image,
                # drawn on its size, as torchvision runs it (on the CPU path). A flip is drawn
                # inside a `random_apply`: hpuload reads a bare flip before the geometry as a
                # detection pipeline's, which moves boxes.
                if flip:
                    op = {"op": "random_apply", "p": op["p"], "ops": [{**op, "p": 1.0}]}
                before.append(op)
                continue
            if flip and not erasing:
                # After the conversion to a tensor too (a uint8 or float clip, the classification
                # reference's tensor backend): a flip moves values, whatever their type, so it
                # commutes with the conversion and Normalize.
                pixel.append(op)
                continue
            if image_tensor and dtype is None and not erasing and normalize is None:
                # A uint8 image tensor (after PILToTensor or ToImage, the classification
                # reference's tensor backend) or clip: hpuload's pixel kernels are
                # torchvision's tensor kernels on uint8 (on a clip each is drawn once and run on
                # every frame, as v2 runs a transform on a video tensor). timm's policies take
                # PIL images only.
                if type(t).__module__.startswith("timm"):
                    raise Unsupported(f"{name} on a tensor (timm's policies take PIL images)")
                pixel.append(op)
                continue
            if dtype is not None or image_tensor:
                raise Unsupported(f"{name} after the conversion to a tensor (hpuload runs it on the uint8 image before)")
            if erasing or normalize:
                raise Unsupported(f"{name} after Normalize or RandomErasing")
            pixel.append(op)
    if pad is not None:
        raise Unsupported("Pad without a RandomCrop after it (each image would be its own size padded)")
    gives = "image" if tagged else "tensor"
    if dtype is None and not image_tensor:
        if not open_end:
            raise Unsupported("the transform yields PIL images, not tensors (add ToTensor or PILToTensor)")
        gives = "pil"
    if open_end and not geometry:
        raise Unsupported("no crop or resize to a fixed size comes first")
    if dtype is None:
        dtype = "u8"
    if normalize is None and to_float == "multiply" and dtype != "u8":
        # v2's reciprocal differs from `x / 255` in the last bit of some f32 values: the
        # identity normalization carries the conversion (exact: `x - 0`, then `/ 1`).
        normalize = {"op": "normalize", "mean": [0.0] * 3, "std": [1.0] * 3, "to_float": to_float}
    ops = before + geometry + pixel + ([normalize] if normalize else []) + erasing
    spec: dict = {"name": "torchvision", "ops": ops}
    if upright:
        spec["exif_orientation"] = True
    if resize_floats:
        spec["resize_floats"] = True
    if single:
        from ._arrays import every_op

        if any(isinstance(o.get("fill"), list) and len(set(o["fill"])) > 1 for o in every_op(ops)):
            raise Unsupported("a colour fill with Grayscale(num_output_channels=1) (torchvision refuses it on one channel)")
        spec["single_channel"] = True
    return json.dumps(spec), dtype, layout, gives


def _one_channel_step(t: Any, op: dict, name: str, single: bool, *, pil: bool, flip: bool) -> None:
    """Refuses (`Unsupported`) a pixel op that would not give what torchvision gives around
    `Grayscale(num_output_channels=1)`, whose one channel hpuload makes as three equal ones:
    one inside a random choice (some samples would have one channel, others three), or after
    it (`single`) one of torchvision's tensor kernels, which leave one channel as it is where
    they mix three (saturation, hue, grey, contrast's mean). Pillow's arithmetic gives an "L"
    image what it gives each of three equal channels, but `Grayscale(3)` gives it three."""
    from ._arrays import every_op

    if any(o.get("single_channel") for o in list(every_op(op))[1:]):
        raise Unsupported(f"{name}: Grayscale(num_output_channels=1) applied at random (a channel count per sample)")
    if single and any(_is(s, "Grayscale") and s.num_output_channels == 3 for s in _within(t)):
        raise Unsupported("Grayscale(num_output_channels=3) after Grayscale(num_output_channels=1) (three channels again)")
    if single and not pil and not flip:
        raise Unsupported(f"{name} on a tensor after Grayscale(num_output_channels=1)")


def _before_crop(pixel: list[dict], geometry: list[dict], croppable: bool, name: str, *, video: bool, on_float: bool) -> list[dict]:
    """Places the pixel ops read between a resize and its crop (`name`): the flips go into
    `geometry` before the crop (hpuload cuts the crop at the mirrored offset where one falls),
    and the ops that change each pixel on its own stay pixel ops, run on the crop (returned);
    when any other is among them (a rotation, a blur, a contrast), all of them go into
    `geometry` in order, and hpuload runs them on each whole resize, then cuts the crop, as
    torchvision does (on images, on the CPU path). `Unsupported` where that cannot be: on a
    video (whose frames are resampled to the output directly), on a float image, or without
    a resize before the crop."""
    if croppable:
        geometry += [op for op in pixel if _is_flip(op)]
        return [op for op in pixel if not _is_flip(op)]
    if video or on_float or not geometry or geometry[-1]["op"] not in ("resize", "random_resize"):
        raise Unsupported(f"{name} after a pixel op or the conversion to float")
    geometry += pixel
    return []


def _is_flip(op: dict) -> bool:
    return op["op"] in ("random_horizontal_flip", "random_vertical_flip")


#: Ops that compute each output pixel from the same input pixel alone, whatever they draw.
_POINTWISE = {"random_grayscale", "pil_grayscale", "random_invert", "random_posterize", "random_solarize"}


def _pointwise(op: dict) -> bool:
    """Whether `op` changes each pixel on its own (so it gives the same bytes before a crop
    or after it): `ColorJitter` without contrast (whose mean grey is the whole image's), grey,
    invert, posterize, solarize, and random choices of them."""
    kind = op["op"]
    if kind in ("random_apply", "random_choice", "random_order"):
        return all(_pointwise(inner) for inner in op["ops"])
    if kind == "color_jitter":
        return "contrast" not in op
    return kind in _POINTWISE


def _within(t: Any):
    """`t` and the transforms inside it (`RandomApply`'s, `RandomChoice`'s, ...), depth first."""
    yield t
    for inner in getattr(t, "transforms", None) or ():
        yield from _within(inner)


class Tail:
    """The steps of a transform after the longest prefix hpuload translates: the user's own
    objects, run in Python on each sample the native prefix made. `gives` is what the prefix's
    last step gives (see `_translate`), so each sample reaches the tail as the user's code
    would have it: a PIL image, a tensor, or a `tv_tensors.Image`."""

    def __init__(self, steps: list, gives: str, reason: str, prefix: list):
        self.steps = steps
        self.gives = gives
        #: Why the first of them is not translated (`Unsupported`'s message).
        self.reason = reason
        #: The type names of the steps hpuload runs natively, and of the tail's.
        self.prefix_names = [type(t).__name__ for t in prefix]
        self.names = [type(t).__name__ for t in steps]
        #: The user's steps would hand the tail a tensor in channels-last memory
        #: (`_gives_channels_last`): its input takes that layout.
        self.channels_last = False

    def __call__(self, x):
        for t in self.steps:
            x = t(x)
        return x

    def same_as(self, other: "Tail | None") -> bool:
        """The same objects after the same kind of prefix output."""
        return (
            other is not None
            and other.gives == self.gives
            and len(other.steps) == len(self.steps)
            and all(a is b for a, b in zip(other.steps, self.steps))
        )

    @property
    def native_layout(self) -> str:
        """The native batch's layout for this tail: NHWC rows for PIL images (each is the
        image's bytes in PIL's order) and for `[T, H, W, C]` clips, NCHW for the rest (CHW
        images, `[T, C, H, W]` clips)."""
        return "nhwc" if self.gives in ("pil", "thwc", "array") else "nchw"

    def describe(self) -> str:
        ran = ", ".join(self.names) or "nothing more"
        native = ", ".join(self.prefix_names) or "decoding"
        return f"{ran} in Python, after the native {native} ({self.reason})"


class _Image:
    """What a transform is called with to learn whether it makes several views: it stands for
    the image, and has nothing else to offer."""

    __slots__ = ()


class _Applied:
    """What a Compose gives when called on `_Image` while a transform is watched: which
    Compose it was."""

    __slots__ = ("compose",)

    def __init__(self, compose: Any):
        self.compose = compose


class Repeated:
    """A transform run `count` times on each image, each run's output a view: what a Dataset's
    code makes when it gives its transform one image several times and returns each output
    (SimCLR's `self.transform(image), self.transform(image)`; `_probe.Views`). Each view draws
    its own parameters, as the transform's runs do."""

    def __init__(self, transform: Any, count: int):
        self.transform, self.count = transform, count

    def __call__(self, image):
        return [self.transform(image) for _ in range(self.count)]

    @property
    def name(self) -> str:
        """The transform, named for a refusal of its views."""
        return f"{type(self.transform).__name__} (called {self.count} times on one image)"


def views_of(transform: Any) -> list | None:
    """The Composes a multi-crop transform applies to each image, in the order of the list it
    returns (DINO's `DataAugmentationDINO`: a class of the user's whose `__call__` returns
    `[global_transfo1(image), global_transfo2(image), local_transfo(image), ...]`); None for
    any other transform. Learnt by calling the transform once on a stand-in image, with
    torchvision's Compose (v1 and v2) answering that stand-in by naming itself; a transform
    that does anything else with the image (reads its size, converts it, passes it on
    changed) is not one. Python's, NumPy's and torch's generators are left as they were.
    A `Repeated` transform's views are its transform, each."""
    if isinstance(transform, Repeated):
        return [transform.transform] * transform.count
    if transform is None or not callable(transform) or _known(transform) or _wrapped_compose(transform) is not None:
        return None
    import random

    import numpy as np
    import torch
    from torchvision import transforms as v1
    from torchvision.transforms import v2

    originals = [(v1.Compose, "__call__"), (v2.Compose, "forward")]
    saved = [getattr(cls, name) for cls, name in originals]

    def answering(original):
        def call(self, *args, **kwargs):
            if len(args) == 1 and not kwargs and isinstance(args[0], _Image):
                return _Applied(self)
            return original(self, *args, **kwargs)

        return call

    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        for (cls, name), original in zip(originals, saved):
            setattr(cls, name, answering(original))
        out = transform(_Image())
    except Exception:
        return None
    finally:
        for (cls, name), original in zip(originals, saved):
            setattr(cls, name, original)
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])
    if not isinstance(out, (list, tuple)) or len(out) < 2 or not all(isinstance(o, _Applied) for o in out):
        return None
    return [o.compose for o in out]


def translate_views(transform: Any, views: list) -> tuple[str, str]:
    """`(pipeline JSON of every view, dtype)` of a multi-crop transform whose views are the
    Composes `views` (see `views_of`): each must translate whole, to a fixed size, and all to
    one dtype. `Unsupported` names the view that does not."""
    pipelines, dtypes = [], set()
    name = transform.name if isinstance(transform, Repeated) else type(transform).__name__
    for k, view in enumerate(views):
        try:
            pipeline, dtype = translate(view)
        except Unsupported as e:
            raise Unsupported(f"view {k} of {name}: {e}") from e
        pipelines.append(json.loads(pipeline))
        dtypes.add(dtype)
        if pipelines[-1].get("single_channel"):
            raise Unsupported(f"view {k} of {name} makes one grey channel (Grayscale(num_output_channels=1))")
    if len(dtypes) > 1:
        raise Unsupported(f"the views of {name} give different dtypes ({sorted(dtypes)})")
    if len({p.get("exif_orientation", False) for p in pipelines}) > 1:
        raise Unsupported(f"some views of {name} turn images by their EXIF orientation and others do not")
    return json.dumps({"views": pipelines}), dtypes.pop()


def translate_split(transform: Any) -> tuple[str, str, Tail | None]:
    """`(pipeline JSON, dtype, tail)` for a transform applied to PIL images: the whole of it
    when hpuload translates it (tail None); else its longest prefix that starts with a crop
    or resize to a fixed size, and a `Tail` of the user's own steps after it (a `Lambda`, a
    class of the user's, an op in an order hpuload does not run), which run in Python on
    what the prefix made. `Unsupported` when not even a prefix translates. A multi-crop
    transform (`views_of`) gives every view's pipeline (`{"views": [...]}`) and no tail."""
    views = views_of(transform)
    if views is not None:
        pipeline, dtype = translate_views(transform, views)
        return pipeline, dtype, None
    try:
        pipeline, dtype = translate(transform)
        return pipeline, dtype, None
    except Unsupported as e:
        whole = e
    all_steps = steps(transform)
    for k in range(len(all_steps), 0, -1):
        try:
            pipeline, dtype, _, gives = _translate(all_steps[:k], video=False, open_end=True)
        except Unsupported:
            continue
        if json.loads(pipeline).get("single_channel"):
            continue  # the tail's steps would get RGB images, not torchvision's "L" ones
        if gives == "pil" and any(_minds_orientation(t) for t in all_steps[k:]):
            # Pillow keeps a photo's EXIF orientation through the native part's crop or
            # resize, and such a step turns what they made; the tail's images, made from
            # hpuload's bytes, carry none.
            raise Unsupported(f"{whole}; and a later step turns images by their EXIF orientation after the crop")
        layout = _gives_channels_last(all_steps[:k]) if dtype in ("f16", "bf16") else False
        if layout is None:
            # Half floats whose memory layout the image's size decides (a crop that pads the
            # small ones): the tail's half-float arithmetic would round as on one of them.
            continue
        tail = Tail(all_steps[k:], gives, str(whole), all_steps[:k])
        tail.channels_last = layout
        return pipeline, dtype, tail
    raise whole


def translate_to_pil(transform: Any) -> tuple[str, str, None]:
    """`translate_split` of a transform whose output the Dataset's code makes a NumPy array
    of (`np.array(transform(image))`): the whole of it, to the uint8 pixels of the RGB PIL
    image it gives, which hpuload writes `[H, W, C]` where the code keeps that layout.
    Unsupported for a transform that gives anything else or translates only in part."""
    pipeline, dtype, _, gives = _translate(steps(transform), video=False, open_end=True)
    if gives != "pil" or json.loads(pipeline).get("single_channel"):
        raise Unsupported(
            "the Dataset's code makes a NumPy array of what its transform gives, which is no RGB PIL image "
            "(hpuload follows arrays of RGB PIL images)"
        )
    return pipeline, dtype, None


def _gives_channels_last(prefix: list) -> bool | None:
    """Whether torchvision's `prefix` steps hand the next step a CHW tensor in channels-last
    memory (`PILToTensor` and `ToImage` make a permuted view of the image's bytes, which
    `ToDtype` and `ConvertImageDtype` keep). torch's half-float arithmetic of grey (`Grayscale`,
    a saturation) rounds differently on such a tensor than on a contiguous one: the tail then
    gets its input in that layout. Found by running the steps on a blank image, and on a tiny
    one, the random states kept as they were; None where the two differ (a `CenterCrop` pads
    a small image into new, contiguous memory): the layout depends on each image's size."""
    import random

    import torch
    from PIL import Image

    def channels_last(size) -> bool:
        x = Image.new("RGB", size, (90, 120, 150))
        for t in prefix:
            x = t(x)
        return isinstance(x, torch.Tensor) and x.dim() == 3 and x.shape[0] > 1 and x.stride()[0] == 1

    state = random.getstate()
    try:
        with torch.random.fork_rng(devices=[]):
            large = channels_last((640, 480))
            try:
                small = channels_last((4, 3))
            except Exception:  # a step that takes no image so small: the large one's layout
                small = large
    except Exception:
        return False
    finally:
        random.setstate(state)
    return large if large == small else None


def _minds_orientation(t: Any) -> bool:
    """Whether `t`, a step of the user's own in a tail, acts on an image's EXIF orientation."""
    from ._behaviour import minds_orientation

    return (_is(t, "Lambda") or not _known(t)) and minds_orientation(t, GREY_IMAGES.get())


#: An empty pipeline: the clip's frames as decoded, uint8.
_AS_DECODED = json.dumps({"name": "torchvision", "ops": []})


def translate_split_video(transform: Any, clip_format: str = "TCHW") -> tuple[str, str, str, Tail | None]:
    """`(pipeline JSON, dtype, clip layout, tail)` for a video dataset's transform (see
    `translate(..., video=True)`): the whole of it when hpuload translates it (tail None);
    else its longest prefix that translates, possibly none at all, and a `Tail` of the steps
    after it, which run in Python on each clip the prefix made (decoding, the costly part,
    stays native). The clip layout is "TCHW", "CTHW" (the prefix ends with the permute to
    `[C, T, H, W]`) or "THWC": the clips as torchvision's `output_format="THWC"` gives them,
    when the transform does not begin by permuting them (or there is none). Without a crop
    or resize in the prefix the clips keep the videos' size, which the loader then requires
    to be the same for every video."""
    all_steps = steps(transform)
    thwc = clip_format == "THWC"
    permuted = False
    if thwc:
        all_steps, permuted = _thwc_steps(all_steps)
    if thwc and not all_steps:
        return _AS_DECODED, "u8", "THWC", None
    try:
        pipeline, dtype, layout = translate(transform, video=True, clip_format=clip_format)
        return pipeline, dtype, layout, None
    except Unsupported as e:
        whole = e
    if thwc and not permuted:
        return _AS_DECODED, "u8", "THWC", Tail(all_steps, "thwc", str(whole), [])
    rest = all_steps[1:] if permuted else all_steps
    for k in range(len(rest) - 1, -1, -1):
        try:
            pipeline, dtype, layout, gives = _translate(rest[:k], video=True, open_end=False)
        except Unsupported:
            continue
        prefix = all_steps[: k + permuted]
        return pipeline, dtype, layout, Tail(rest[k:], gives, str(whole), prefix)
    raise whole  # pragma: no cover - the empty prefix always translates


def _permutes(t: Any, axes: tuple[int, ...]) -> bool:
    """Whether callable `t` turns a 4-axis clip tensor into its permute by `axes` and does
    nothing else (the video reference's `ConvertBCHWtoCBHW` for `[T, C, H, W]` to
    `[C, T, H, W]`, its older `ConvertBHWCtoBCHW` for `[T, H, W, C]` to `[T, C, H, W]`, a
    Lambda doing either), tried on two shapes of uint8 and float values."""
    import torch

    if not callable(t):
        return False
    for shape, dtype in (((2, 3, 4, 5), torch.uint8), ((5, 3, 7, 2), torch.float32)):
        x = (torch.arange(torch.Size(shape).numel()) % 251).to(dtype).reshape(shape)
        try:
            y = t(x.clone())
        except Exception:
            return False
        if not isinstance(y, torch.Tensor) or y.dtype != dtype or not torch.equal(y, x.permute(*axes)):
            return False
    return True


def _thwc_steps(all_steps: list) -> tuple[list, bool]:
    """The steps of a transform on `[T, H, W, C]` clips, and whether the first permutes them to
    `[T, C, H, W]`. A conversion to float that comes before that permute (`Lambda(lambda x:
    x / 255.)` then `Lambda(lambda x: x.permute(0, 3, 1, 2))`, as many UCF101 scripts write
    it) is moved after it: it works on each value alone, so the order does not change a
    value."""
    if all_steps and _permutes(all_steps[0], (0, 3, 1, 2)):
        return all_steps, True
    if len(all_steps) >= 2 and _permutes(all_steps[1], (0, 3, 1, 2)):
        first = _recognised_video_step(all_steps[0]) if _is(all_steps[0], "Lambda") or not _known(all_steps[0]) else None
        if first is not None and _is(first, "ConvertImageDtype"):
            return [all_steps[1], all_steps[0], *all_steps[2:]], True
    return all_steps, False


def _recognised_video_step(t: Any) -> Any:
    """The torchvision step that a video step of the user's own (a `Lambda`, a function, a
    class of theirs) is, by what it does to test clips, or None: the conversion of a uint8
    clip to float in [0, 1] (`x / 255.`) is `ConvertImageDtype(torch.float32)`; torch's
    `interpolate` of a float `[T, C, H, W]` clip to one fixed size, nearest or bilinear
    without antialiasing, is `Resize(size, ..., antialias=False)`. Each is watched on clips
    of three sizes (one as large as a real clip) and must give exactly that, twice, leaving
    Python's, torch's and NumPy's generators as they were (it draws nothing: a random step
    is not one of these)."""
    import torch
    import torch.nn.functional as F
    from torchvision import transforms as v1

    if not callable(t) or _is(t, "Compose"):
        return None

    def watched(x):
        from ._tail import _Isolated

        with _Isolated():
            before = torch.default_generator.get_state()
            try:
                y, again = t(x.clone()), t(x.clone())
            except Exception:
                return None
            if not torch.equal(before, torch.default_generator.get_state()):
                return None
        same = isinstance(y, torch.Tensor) and isinstance(again, torch.Tensor) and y.shape == again.shape
        return y if same and y.dtype == again.dtype and torch.equal(y, again) else None

    # Textured clips of two sizes, and a black and a white one (a step that looks at its
    # input's values before acting shows it on these), and one of a real clip's size (one
    # that acts by the clip's size shows there).
    shapes = ((2, 9, 11, 3), (3, 3, 7, 5))
    textured = (*shapes, (2, 3, 128, 171))
    clips = [(torch.arange(torch.Size(s).numel()) * 37 % 256).to(torch.uint8).reshape(s) for s in textured]
    clips += [torch.zeros(shapes[0], dtype=torch.uint8), torch.full(shapes[1], 255, dtype=torch.uint8)]
    outs = [watched(x) for x in clips]
    if all(y is not None and y.dtype == torch.float32 and torch.equal(y, x.float() / 255) for x, y in zip(clips, outs)):
        return v1.ConvertImageDtype(torch.float32)
    sizes = ((2, 3, 20, 30), (3, 3, 45, 26), (2, 3, 240, 320))
    floats = [(torch.arange(torch.Size(s).numel()) % 97).float().reshape(s) / 96 for s in sizes]
    floats += [torch.zeros(2, 3, 20, 30), torch.ones(3, 3, 45, 26)]
    outs = [watched(x) for x in floats]
    if any(y is None or y.dtype != torch.float32 or y.dim() != 4 or y.shape[:2] != x.shape[:2] for x, y in zip(floats, outs)):
        return None
    size = tuple(outs[0].shape[2:])
    if any(tuple(y.shape[2:]) != size for y in outs):
        return None
    for mode, interpolation in (("nearest", v1.InterpolationMode.NEAREST), ("bilinear", v1.InterpolationMode.BILINEAR)):
        extra = {"align_corners": False} if mode == "bilinear" else {}
        if all(torch.equal(y, F.interpolate(x, size=size, mode=mode, **extra)) for x, y in zip(floats, outs)):
            # (Antialiasing changes bilinear only: a nearest Resize keeps the default.)
            return v1.Resize(list(size), interpolation=interpolation, antialias=mode == "nearest")
    return None


def _erasing_tv(t: Any, dtype: str | None) -> dict:
    value = t.value
    if isinstance(value, str) or value is None:
        # v1 keeps "random"; v2 keeps None for it.
        fill: Any = "random"
    else:
        v = [float(x) for x in (value if isinstance(value, (list, tuple)) else [value])]
        if len(v) == 1:
            v = v * 3
        if len(v) != 3:
            raise Unsupported(f"RandomErasing value {value!r}")
        fill = v
    if fill == "random" and dtype is None:
        raise Unsupported("RandomErasing(value='random') on uint8 images")
    return {
        "op": "random_erasing",
        "p": float(t.p),
        "scale": [float(t.scale[0]), float(t.scale[1])],
        "ratio": [float(t.ratio[0]), float(t.ratio[1])],
        "value": fill,
    }


def _erasing_timm(t: Any) -> dict:
    if t.per_pixel:
        fill: Any = "random"
    elif t.rand_color:
        fill = "random_per_channel"
    else:
        fill = [0.0, 0.0, 0.0]
    lo, hi = t.log_aspect_ratio
    return {
        "op": "random_erasing",
        "p": float(t.probability),
        "scale": [float(t.min_area), float(t.max_area)],
        "ratio": [math.exp(lo), math.exp(hi)],
        "value": fill,
        "count": [int(t.min_count), int(t.max_count)],
        "timm": True,
    }
