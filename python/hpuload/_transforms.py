"""Translation of a torchvision transform into an hpuload pipeline.

`translate(transform)` returns `(pipeline, dtype)`, where `pipeline` is the JSON the Rust
loader takes and `dtype` the output element type ("f32", "u8", ...), or raises `Unsupported`
with a reason a user can act on. Only what hpuload computes exactly as torchvision does is
accepted; anything else makes the caller fall back to torch's own DataLoader.
"""

from __future__ import annotations

import json
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


def _is(obj: Any, name: str) -> bool:
    """Whether `obj` is torchvision's transform `name`, in v1 or v2 (exactly, not a subclass:
    a subclass may change what the transform does)."""
    v1, v2 = _modules()
    for mod in (v1, v2):
        cls = getattr(mod, name, None) if mod is not None else None
        if cls is not None and type(obj) is cls:
            return True
    return False


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


def _bilinear(t: Any, what: str) -> None:
    from torchvision.transforms import InterpolationMode

    mode = getattr(t, "interpolation", InterpolationMode.BILINEAR)
    # An InterpolationMode (v1), its value (v2 may keep the string), or PIL's code 2 (old scripts).
    if getattr(mode, "value", mode) not in ("bilinear", 2):
        raise Unsupported(f"{what} with interpolation={mode} (hpuload implements BILINEAR)")


def _torch_dtype_name(dtype: Any) -> str | None:
    import torch

    return {
        torch.float32: "f32",
        torch.float16: "f16",
        torch.bfloat16: "bf16",
        torch.uint8: "u8",
    }.get(dtype)


def steps(transform: Any) -> list[Any]:
    """The steps of a Compose (v1 or v2; nested ones flattened), or the transform itself."""
    if transform is None:
        return []
    if _is(transform, "Compose"):
        return [step for t in transform.transforms for step in steps(t)]
    return [transform]


def translate(transform: Any) -> tuple[str, str]:
    """`(pipeline JSON, output dtype)` for a torchvision transform applied to PIL images."""
    ops: list[dict] = []
    flip: dict | None = None
    dtype: str | None = None  # None: still a PIL image (or a uint8 image tensor after ToImage)
    image_tensor = False  # after PILToTensor / ToImage: a uint8 tensor
    normalize: dict | None = None
    for t in steps(transform):
        name = type(t).__name__
        if _is(t, "RandomResizedCrop"):
            if dtype is not None or ops:
                raise Unsupported("RandomResizedCrop must come first, before any tensor conversion")
            _bilinear(t, name)
            ops.append(
                {
                    "op": "random_resized_crop",
                    "size": _hw(t.size, name),
                    "scale": [float(t.scale[0]), float(t.scale[1])],
                    "ratio": [float(t.ratio[0]), float(t.ratio[1])],
                }
            )
        elif _is(t, "Resize"):
            if dtype is not None:
                raise Unsupported("Resize after the conversion to float")
            _bilinear(t, name)
            if getattr(t, "max_size", None) is not None:
                raise Unsupported("Resize with max_size")
            size = t.size
            if isinstance(size, (list, tuple)) and len(size) == 1:
                size = size[0]
            if isinstance(size, int):
                ops.append({"op": "resize", "size": size})
            else:
                ops.append({"op": "resize", "size": _hw(size, name)})
        elif _is(t, "CenterCrop"):
            if dtype is not None:
                raise Unsupported("CenterCrop after the conversion to float")
            ops.append({"op": "center_crop", "size": _hw(t.size, name)})
        elif _is(t, "RandomHorizontalFlip"):
            if flip is not None:
                raise Unsupported("two RandomHorizontalFlip steps")
            if dtype is not None:
                raise Unsupported("RandomHorizontalFlip after the conversion to float")
            flip = {"op": "random_horizontal_flip", "p": float(t.p)}
        elif _is(t, "ToTensor"):
            if dtype is not None or image_tensor:
                raise Unsupported("ToTensor after another tensor conversion")
            dtype = "f32"
        elif _is(t, "PILToTensor") or _is(t, "ToImage"):
            if dtype is not None or image_tensor:
                raise Unsupported(f"{name} after another tensor conversion")
            image_tensor = True
        elif _is(t, "ConvertImageDtype") or _is(t, "ToDtype"):
            target = t.dtype
            if isinstance(target, dict):
                raise Unsupported(f"{name} with a per-type dtype mapping")
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
        elif _is(t, "Normalize"):
            if dtype is None:
                raise Unsupported("Normalize before the conversion to float")
            if normalize is not None:
                raise Unsupported("two Normalize steps")
            mean, std = list(t.mean), list(t.std)
            if len(mean) == 1:
                mean = mean * 3
            if len(std) == 1:
                std = std * 3
            if len(mean) != 3 or len(std) != 3:
                raise Unsupported("Normalize with other than 3 channels")
            normalize = {"op": "normalize", "mean": [float(m) for m in mean], "std": [float(s) for s in std]}
        elif _is(t, "ToPureTensor"):
            pass
        else:
            raise Unsupported(f"transform {type(t).__module__}.{name} is not one hpuload implements")
    if dtype is None and not image_tensor:
        raise Unsupported("the transform yields PIL images, not tensors (add ToTensor or PILToTensor)")
    if dtype is None:
        dtype = "u8"
    if flip is not None:
        ops.append(flip)
    if normalize is not None:
        ops.append(normalize)
    return json.dumps({"name": "torchvision", "ops": ops}), dtype
