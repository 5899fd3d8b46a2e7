"""The segmentation and detection references' own transform classes, checked by behaviour.

torchvision's training references are not part of the torchvision package: every script
carries its own copy of their `transforms.py`, and forks edit it (a mask padded with 0 rather
than 255, a bicubic resize, a flip that also turns the image upside down). The translators
find those classes by their names and read their attributes; this module makes sure that is
all there is to them before anything runs natively. Each step the user's code holds is run
on small images and targets under fixed seeds (Python's `random`, torch's and numpy's global
generators, restored afterwards), and beside it what the reference's step of the same name
does with the same attributes and the same draws, as written here; any difference, in a
pixel, a box, a mask, a key of the target, or a draw taken from another generator or in
another order, is `Unsupported` naming the step, and the loader falls back to torch's.

The statements below are this module's own reading of the references' steps: their draws
(which generator, in which order) and the torchvision functions they apply."""

from __future__ import annotations

import random
from typing import Any, Callable

import torch

from ._transforms import Unsupported

#: The seeds each step is run under: enough that a step with a probability of one half both
#: does and does not act, and that a drawn size or offset takes several values.
SEEDS = (0, 1, 2, 3, 5, 8)


# --- Running a step under fixed draws and comparing what it gives --------------------------


def _under_seed(fn: Callable, args: tuple, seed: int):
    """`fn(*args)` with the three global generators seeded by `seed`, their states restored
    afterwards; an exception is returned as `("raised", its type's name)`."""
    import numpy as np

    states = random.getstate(), torch.get_rng_state(), np.random.get_state()
    try:
        random.seed(seed)
        torch.default_generator.manual_seed(seed)  # the CPU generator alone: a device one is the user's
        np.random.seed(seed)
        try:
            return fn(*args)
        except Exception as e:  # a step that fails where the reference's does not differs
            return ("raised", type(e).__name__)
    finally:
        random.setstate(states[0])
        torch.set_rng_state(states[1])
        np.random.set_state(states[2])


def _difference(got: Any, want: Any, where: str = "the output") -> str | None:
    """Where `got` differs from `want` (None where it does not): PIL images by mode, size
    and bytes, tensors by type, dtype, shape and values (floats within 1e-4, for boxes
    scaled by an equal factor written otherwise), dicts key by key, sequences item by item."""
    import PIL.Image

    if isinstance(want, PIL.Image.Image):
        if not isinstance(got, PIL.Image.Image):
            return f"{where} is a {type(got).__name__}, not a PIL image"
        if (got.mode, got.size) != (want.mode, want.size):
            return f"{where} is a {got.mode} image of {got.size}, not {want.mode} of {want.size}"
        if got.tobytes() != want.tobytes():
            return f"{where}'s pixels"
        return None
    if isinstance(want, torch.Tensor):
        if type(got) is not type(want):
            return f"{where} is a {type(got).__name__}, not a {type(want).__name__}"
        if got.dtype != want.dtype or got.shape != want.shape:
            return f"{where} is {got.dtype} {tuple(got.shape)}, not {want.dtype} {tuple(want.shape)}"
        if want.is_floating_point():
            close = torch.allclose(got, want, rtol=1e-6, atol=1e-4, equal_nan=True)
        else:
            close = torch.equal(got, want)
        return None if close else f"{where}'s values"
    if isinstance(want, dict):
        if not isinstance(got, dict) or list(got) != list(want):
            keys = list(got) if isinstance(got, dict) else type(got).__name__
            return f"{where} holds {keys}, not {list(want)}"
        return next((d for k in want if (d := _difference(got[k], want[k], f"the target's {k!r}")) is not None), None)
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return f"{where} is {type(got).__name__}, not {len(want)} items"
        names = ("the image", "the target") if len(want) == 2 else tuple(f"item {i}" for i in range(len(want)))
        return next((d for g, w, n in zip(got, want, names) if (d := _difference(g, w, n)) is not None), None)
    return None if got == want else f"{where} is {got!r}, not {want!r}"


def check(step, reference: Callable, inputs: list[Callable[[], tuple]], what: str, name: str) -> None:
    """Runs the user's `step` and `reference` (the reference's statement, given the step)
    on fresh copies of each of `inputs` under each of `SEEDS`; `Unsupported` at the first
    difference. `what` names the reference ("segmentation", "detection"), `name` the step."""
    for make in inputs:
        for seed in SEEDS:
            got = _under_seed(step, make(), seed)
            want = _under_seed(lambda *a: reference(step, *a), make(), seed)
            where = _difference(got, want)
            if where is not None:
                raise Unsupported(
                    f"{type(step).__module__}.{name} does not do what the {what} reference's {name} does "
                    f"with its attributes ({where} differs, seed {seed}; hpuload runs the reference's)"
                )


def _shrunk(step, **sizes):
    """A shallow copy of `step` with its size attributes set to `sizes`: the step's code is
    what is checked, and at the sizes the references use (up to 2048 pixels a side with a
    mask per object) each run would cost tens of milliseconds. The translator reads those
    attributes themselves; what the code does with them is the same at any size."""
    import copy

    try:
        small = copy.copy(step)
        if small is step:  # never set on the user's own object
            raise TypeError("it copies as itself")
        for name, value in sizes.items():
            setattr(small, name, value)
    except Exception as e:
        raise Unsupported(f"{type(step).__name__} cannot be copied to be checked ({type(e).__name__}: {e})") from e
    return small


# --- Inputs ---------------------------------------------------------------------------------


def _noise(width: int, height: int, seed: int):
    """A PIL RGB image of `width` x `height` of seeded noise."""
    import numpy as np
    import PIL.Image

    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return PIL.Image.fromarray(pixels)


def _mask(width: int, height: int, seed: int, mode: str):
    """A PIL mask of classes 0..20 and 255, in mode "L" or "P" (VOC's palette files)."""
    import numpy as np
    import PIL.Image

    values = np.random.default_rng(seed).integers(0, 22, (height, width), dtype=np.uint8)
    values[values == 21] = 255
    mask = PIL.Image.fromarray(values)
    if mode == "P":
        mask = mask.convert("P")
        mask.putpalette([v for i in range(256) for v in (i, 255 - i, (7 * i) % 256)])
    return mask


def _target(width: int, height: int, seed: int) -> dict:
    """A target as the detection reference's `ConvertCocoPolysToMask` gives it: three boxes
    inside the image, their labels, their masks (uint8), the image's id, areas and crowds."""
    import numpy as np

    rng = np.random.default_rng(seed)
    boxes, masks = [], torch.zeros((3, height, width), dtype=torch.uint8)
    for k in range(3):
        x0, y0 = int(rng.integers(0, width - 4)), int(rng.integers(0, height - 4))
        x1, y1 = int(rng.integers(x0 + 2, width + 1)), int(rng.integers(y0 + 2, height + 1))
        boxes.append([x0 + 0.25, y0 + 0.5, x1 - 0.75, float(y1)])
        masks[k, y0:y1, x0:x1] = 1
    boxes = torch.tensor(boxes, dtype=torch.float32)
    return {
        "boxes": boxes,
        "labels": torch.tensor([1, 5, 9], dtype=torch.int64),
        "masks": masks,
        "image_id": 7,
        "area": (boxes[:, 3] - boxes[:, 1]) * (boxes[:, 2] - boxes[:, 0]),
        "iscrowd": torch.zeros(3, dtype=torch.int64),
    }


def _pair(width: int, height: int, seed: int, mode: str = "P") -> Callable[[], tuple]:
    return lambda: (_noise(width, height, seed), _mask(width, height, seed + 1, mode))


def _sample(width: int, height: int, seed: int, tensor: bool) -> Callable[[], tuple]:
    def make():
        from torchvision.transforms import functional as F

        image = _noise(width, height, seed)
        return (F.pil_to_tensor(image) if tensor else image), _target(width, height, seed + 1)

    return make


# --- The segmentation reference (without --use-v2): (PIL image, PIL mask) -------------------


def _pad_below_right(image, size: int, fill: int):
    from torchvision.transforms import functional as F

    width, height = image.size
    if min(width, height) >= size:
        return image
    return F.pad(image, [0, 0, max(size - width, 0), max(size - height, 0)], fill=fill)


def _seg_random_resize(step, image, mask):
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as F

    size = random.randint(step.min_size, step.max_size)
    return F.resize(image, size, antialias=True), F.resize(mask, size, interpolation=InterpolationMode.NEAREST)


def _seg_flip(step, image, mask):
    from torchvision.transforms import functional as F

    if random.random() < step.flip_prob:
        return F.hflip(image), F.hflip(mask)
    return image, mask


def _seg_random_crop(step, image, mask):
    from torchvision.transforms import RandomCrop
    from torchvision.transforms import functional as F

    size = step.size
    image, mask = _pad_below_right(image, size, 0), _pad_below_right(mask, size, 255)
    box = RandomCrop.get_params(image, (size, size))
    return F.crop(image, *box), F.crop(mask, *box)


def check_segmentation(step, name: str) -> None:
    """The segmentation reference's `RandomResize`, `RandomHorizontalFlip` or `RandomCrop`
    (`name`), as the user's code has it, does what the reference's does."""
    if name == "RandomResize":
        small = _shrunk(step, min_size=13, max_size=13 + min(step.max_size - step.min_size, 40))
        check(small, _seg_random_resize, [_pair(23, 17, 1), _pair(9, 30, 2, "L")], "segmentation", name)
    elif name == "RandomHorizontalFlip":
        check(step, _seg_flip, [_pair(13, 11, 3)], "segmentation", name)
    elif name == "RandomCrop":
        size = 24
        pairs = [_pair(size + 13, size + 29, 4), _pair(size // 2 + 1, size + 7, 5, "L"), _pair(size // 3 + 1, size // 2 + 1, 6)]
        check(_shrunk(step, size=size), _seg_random_crop, pairs, "segmentation", name)


def _v2_pad_if_smaller(step, image, mask):
    from torchvision.transforms import v2
    from torchvision.transforms.v2._utils import _get_fill

    width, height = image.size
    padding = [0, 0, max(step.size - width, 0), max(step.size - height, 0)]
    if not any(padding):
        return image, mask
    pad = v2.functional.pad
    return pad(image, padding, fill=_get_fill(step.fill, type(image))), pad(mask, padding, fill=_get_fill(step.fill, type(mask)))


def check_pad_if_smaller(step) -> None:
    """The segmentation reference's v2 `PadIfSmaller`, on a PIL image and a `tv_tensors.Mask`,
    pads as the reference's does: below and to the right, each with its type's fill."""
    from torchvision import tv_tensors
    from torchvision.transforms import functional as F

    def pair(width, height, seed):
        def make():
            mask = _mask(width, height, seed + 1, "L")
            return _noise(width, height, seed), tv_tensors.Mask(F.pil_to_tensor(mask)[0])

        return make

    size = 24
    pairs = [pair(size + 3, size + 5, 7), pair(size // 2 + 1, size + 2, 8)]
    check(_shrunk(step, size=size), _v2_pad_if_smaller, pairs, "segmentation", "PadIfSmaller")


# --- The detection reference (without --use-v2): (image, target dict) -----------------------


def _size(image) -> tuple[int, int]:
    from torchvision.transforms import functional as F

    _, height, width = F.get_dimensions(image)
    return height, width


def _det_flip(step, image, target):
    from torchvision.transforms import functional as F

    if torch.rand(1) < step.p:
        image = F.hflip(image)
        width = _size(image)[1]
        target["boxes"][:, [0, 2]] = width - target["boxes"][:, [2, 0]]
        target["masks"] = target["masks"].flip(-1)
    return image, target


def _det_rescale(image, target, height: int, width: int, interpolation):
    """The image resized to `(height, width)`, the boxes scaled along, the masks resized by
    nearest (the two multiscale steps' shared end)."""
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as F

    was = _size(image)
    image = F.resize(image, [height, width], interpolation=interpolation)
    target["boxes"][:, 0::2] *= width / was[1]
    target["boxes"][:, 1::2] *= height / was[0]
    target["masks"] = F.resize(target["masks"], [height, width], interpolation=InterpolationMode.NEAREST)
    return image, target


def _det_shortest_size(step, image, target):
    height, width = _size(image)
    short = step.min_size[torch.randint(len(step.min_size), (1,)).item()]
    ratio = min(short / min(height, width), step.max_size / max(height, width))
    return _det_rescale(image, target, int(height * ratio), int(width * ratio), step.interpolation)


def _det_scale_jitter(step, image, target):
    height, width = _size(image)
    lo, hi = step.scale_range
    scale = lo + torch.rand(1) * (hi - lo)
    ratio = min(step.target_size[1] / height, step.target_size[0] / width) * scale
    return _det_rescale(image, target, int(height * ratio), int(width * ratio), step.interpolation)


def _det_fixed_size_crop(step, image, target):
    from torchvision.transforms import functional as F

    height, width = _size(image)
    keep_h, keep_w = min(height, step.crop_height), min(width, step.crop_width)
    if (keep_h, keep_w) != (height, width):
        r = torch.rand(1)
        top, left = int(max(height - step.crop_height, 0) * r), int(max(width - step.crop_width, 0) * r)
        image = F.crop(image, top, left, keep_h, keep_w)
        boxes = target["boxes"]
        boxes[:, 0::2] -= left
        boxes[:, 1::2] -= top
        boxes[:, 0::2].clamp_(min=0, max=keep_w)
        boxes[:, 1::2].clamp_(min=0, max=keep_h)
        kept = (boxes[:, 0] < boxes[:, 2]) & (boxes[:, 1] < boxes[:, 3])
        target["boxes"], target["labels"] = boxes[kept], target["labels"][kept]
        target["masks"] = F.crop(target["masks"][kept], top, left, keep_h, keep_w)
    below, right = max(step.crop_height - keep_h, 0), max(step.crop_width - keep_w, 0)
    if below or right:
        padding = [0, 0, right, below]
        image = F.pad(image, padding, step.fill, step.padding_mode)
        target["masks"] = F.pad(target["masks"], padding, 0, "constant")
    return image, target


def _det_iou_crop(step, image, target):
    from torchvision.ops import box_iou
    from torchvision.transforms import functional as F

    height, width = _size(image)
    while True:
        least = step.options[int(torch.randint(low=0, high=len(step.options), size=(1,)))]
        if least >= 1.0:
            return image, target
        for _ in range(step.trials):
            r = step.min_scale + (step.max_scale - step.min_scale) * torch.rand(2)
            new_w, new_h = int(width * r[0]), int(height * r[1])
            if not step.min_aspect_ratio <= new_w / new_h <= step.max_aspect_ratio:
                continue
            r = torch.rand(2)
            left, top = int((width - new_w) * r[0]), int((height - new_h) * r[1])
            if new_w == 0 or new_h == 0:
                continue
            boxes = target["boxes"]
            cx, cy = (boxes[:, 0] + boxes[:, 2]) * 0.5, (boxes[:, 1] + boxes[:, 3]) * 0.5
            inside = (left < cx) & (cx < left + new_w) & (top < cy) & (cy < top + new_h)
            if not inside.any():
                continue
            boxes = boxes[inside]
            window = torch.tensor([[left, top, left + new_w, top + new_h]], dtype=boxes.dtype)
            if box_iou(boxes, window).max() < least:
                continue
            boxes[:, 0::2] -= left
            boxes[:, 1::2] -= top
            boxes[:, 0::2].clamp_(min=0, max=new_w)
            boxes[:, 1::2].clamp_(min=0, max=new_h)
            target["boxes"], target["labels"] = boxes, target["labels"][inside]
            return F.crop(image, top, left, new_h, new_w), target


def _det_zoom_out(step, image, target):
    from torchvision.transforms import functional as F

    if torch.rand(1) >= step.p:
        return image, target
    height, width = _size(image)
    lo, hi = step.side_range
    r = lo + torch.rand(1) * (hi - lo)
    canvas_w, canvas_h = int(width * r), int(height * r)
    r = torch.rand(2)
    left, top = int((canvas_w - width) * r[0]), int((canvas_h - height) * r[1])
    padding = [left, top, canvas_w - left - width, canvas_h - top - height]
    # On a PIL image (the translator takes it there only) the fill as integers.
    image = F.pad(image, padding, fill=tuple(int(v) for v in step.fill))
    target["boxes"][:, 0::2] += left
    target["boxes"][:, 1::2] += top
    return image, target


def _det_photometric(step, image, target):
    import PIL.Image
    from torchvision.transforms import functional as F

    r = torch.rand(7)
    contrast_first = r[1] < 0.5
    for act, kind in (
        (r[0] < step.p, "brightness"),
        (contrast_first and r[2] < step.p, "contrast"),
        (r[3] < step.p, "saturation"),
        (r[4] < step.p, "hue"),
        (not contrast_first and r[5] < step.p, "contrast"),
    ):
        if act:
            image = _jitter(image, kind, getattr(getattr(step, f"_{kind}"), kind))
    if r[6] < step.p:
        order = torch.randperm(F.get_dimensions(image)[0])
        if isinstance(image, PIL.Image.Image):
            image = F.to_pil_image(F.convert_image_dtype(F.pil_to_tensor(image))[..., order, :, :])
        else:
            image = image[..., order, :, :]
    return image, target


#: The four factors of torchvision's `ColorJitter`, in its order.
_FACTORS = ("brightness", "contrast", "saturation", "hue")


def _jitter(image, kind: str, bounds):
    """A `ColorJitter` of the one factor `kind` within `bounds` (what the translator reads of
    each of the step's four jitters), drawn as torchvision's `ColorJitter` draws: the order
    of the four (`randperm`), then the factor."""
    from torchvision.transforms import ColorJitter
    from torchvision.transforms import functional as F

    ranges = [bounds if k == kind else None for k in _FACTORS]
    _, *factors = ColorJitter.get_params(*ranges)
    factor = factors[_FACTORS.index(kind)]
    return getattr(F, f"adjust_{kind}")(image, factor)


def _det_to_tensor(step, image, target):
    from torchvision.transforms import functional as F

    return F.pil_to_tensor(image), target


def _det_to_float(step, image, target):
    from torchvision.transforms import functional as F

    return F.convert_image_dtype(image, torch.float32), target


#: The detection reference's steps by name, each with its statement.
_DETECTION: dict[str, Callable] = {
    "RandomHorizontalFlip": _det_flip,
    "RandomShortestSize": _det_shortest_size,
    "ScaleJitter": _det_scale_jitter,
    "FixedSizeCrop": _det_fixed_size_crop,
    "RandomIoUCrop": _det_iou_crop,
    "RandomZoomOut": _det_zoom_out,
    "RandomPhotometricDistort": _det_photometric,
    "PILToTensor": _det_to_tensor,
    "ToDtype": _det_to_float,
    "ConvertImageDtype": _det_to_float,
}


def check_detection(step, name: str, tensor: bool) -> None:
    """The detection reference's step `name` (one of `_DETECTION`), as the user's code has it,
    does what the reference's does, on a PIL image (or a uint8 tensor where `tensor`; a float
    one after `ToDtype`) with a target as its `ConvertCocoPolysToMask` gives it."""
    shapes = [(37, 29), (24, 41)]
    if name == "FixedSizeCrop":
        height, width = 40, 52
        step = _shrunk(step, crop_height=height, crop_width=width)
        shapes = [(width + 21, height // 2 + 3), (width // 2 + 5, height + 11), (width // 3 + 7, height // 3 + 9)]
    elif name == "ScaleJitter":
        step = _shrunk(step, target_size=(48, 40))
    elif name == "RandomShortestSize":
        max_size = None if step.max_size is None else 50
        count = len(step.min_size) if isinstance(step.min_size, (list, tuple)) else 1
        step = _shrunk(step, min_size=[20 + 3 * k for k in range(count)], max_size=max_size)
    check(step, _DETECTION[name], [_sample(w, h, 11 + k, tensor) for k, (w, h) in enumerate(shapes)], "detection", name)


# --- The references' compositions -----------------------------------------------------------


def check_sequential(container) -> None:
    """`container` (a `Compose`, or a preset holding one in `.transforms`), and every such
    container inside it, runs its steps one after another on `(image, target)` and returns
    what the last gives, as the references' do; `Unsupported` otherwise (a container that
    applies its steps with a probability, in a drawn order, or changes the target between
    them would be misread as a sequence)."""
    inner = getattr(container, "transforms", None)
    if not callable(container) or inner is None:
        return
    if isinstance(inner, (list, tuple)):
        for t in inner:
            check_sequential(t)
    elif callable(inner):
        check_sequential(inner)
    else:
        return
    if not passes_along(container, 2):
        raise Unsupported(
            f"{type(container).__module__}.{type(container).__name__} does not run its steps one after another "
            "on the image and target and return what the last gives (hpuload reads it as such a sequence)"
        )


class _Recording(torch.nn.Module):
    """A module that hands what it is called with to `run` (a `passes_along` recorder)."""

    def __init__(self, run):
        super().__init__()
        self.run = run

    def forward(self, *args):
        return self.run(*args)


def passes_along(container, arity: int) -> bool:
    """Whether `container` hands its `arity` arguments to the first of its `.transforms` (a
    list of steps, or one callable), each step's output to the next, and returns what the last
    gives, and nothing else. Checked on a copy whose steps are recorders passing numbered
    stand-ins along, under three seeds (a wrapper that draws whether to call its steps, or
    calls them twice for two views, is caught)."""
    import copy

    inner = container.transforms
    count = len(inner) if isinstance(inner, (list, tuple)) else 1

    def token(k: int):
        return ("image", k) if arity == 1 else (("image", k), ("target", k))

    for seed in SEEDS[:3]:
        calls: list = []

        def recorder(k: int):
            def run(*args):
                calls.append((k, args))
                return token(k + 1)

            return run

        steps = [recorder(k) for k in range(count)]
        try:
            probe = copy.copy(container)
            if probe is container:  # a function or module copies as itself: never set on the user's
                return False
            if isinstance(container, torch.nn.Module) and "transforms" in container._modules:
                # A module's child lives in its `_modules`, which a shallow copy shares with
                # the user's: the probe gets a dict of its own, its child a module recording.
                probe.__dict__["_modules"] = {**container._modules, "transforms": _Recording(steps[0])}
            else:
                probe.transforms = steps if isinstance(inner, (list, tuple)) else steps[0]
        except Exception:
            return False
        given = token(0)
        got = _under_seed(probe, (given,) if arity == 1 else given, seed)
        want = [(k, (token(k),) if arity == 1 else token(k)) for k in range(count)]
        if calls != want or got != token(count):
            return False
    return True
