"""A pixel transform of the user's own, recognised by what it does, not by its name.

DeiT III's ThreeAugment and DINO's recipes hold small classes of their own (a grey, a
solarize, a Pillow Gaussian blur, each applied with a probability drawn from Python's
`random`). hpuload cannot know such a class from its name or its source, but it can watch it:
given a few test images and seeds of Python's `random`, the class must give, byte for byte,
what one of hpuload's Pillow ops gives with the parameters its attributes name, drawing the
same numbers from `random` and none from torch's or NumPy's generators. A class that does is
run natively as that op (its draws become hpuload's, per sample, with the same distribution);
any other is not recognised (it then runs in Python, `_tail.py`). The global generators are
restored afterwards.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any, Callable

#: Seeds of Python's `random` each candidate is watched under (with p < 1, both branches).
_SEEDS = range(12)


def _images() -> list:
    """RGB test images: a small gradient with texture, small noise (odd sizes, so that a
    transpose or an off-by-one shows), and a larger one of both, as wide as a thumbnail (a
    class that acts only on images above some size shows there)."""
    from PIL import Image

    def textured(w: int, h: int) -> bytes:
        return bytes(((x * 11 + y * 7) % 256 if c == 0 else (x * y * 3) % 256 if c == 1 else (255 - x * 9) % 256)
                     for y in range(h) for x in range(w) for c in range(3))

    rng = random.Random(7)
    noise = bytes(rng.randrange(256) for _ in range(16 * 19 * 3))
    large = Image.frombytes("RGB", (131, 97), textured(131, 97))
    large.paste(Image.frombytes("RGB", (16, 19), noise), (40, 30))
    return [Image.frombytes("RGB", (23, 17), textured(23, 17)), Image.frombytes("RGB", (16, 19), noise), large]


def _probability(t: Any) -> float | None:
    for name in ("p", "prob"):
        v = getattr(t, name, None)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= v <= 1.0:
            return float(v)
    return None


def _number(t: Any, name: str) -> float | None:
    v = getattr(t, name, None)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _candidates(t: Any) -> list[tuple[dict, Callable]]:
    """`(op, model)` pairs to watch `t` against: the model does, with Python's `random`, what
    the op does with hpuload's generator."""
    from PIL import ImageFilter, ImageOps

    p = _probability(t)
    if p is None:
        return []

    def coin() -> bool:
        return random.random() < p

    def grey(img):
        return img.convert("L").convert("RGB") if coin() else img

    def solarize(img):
        return ImageOps.solarize(img, 128) if coin() else img

    out = [({"op": "pil_grayscale", "p": p}, grey), ({"op": "random_solarize", "threshold": 128.0, "p": p}, solarize)]
    lo, hi = _number(t, "radius_min"), _number(t, "radius_max")
    if lo is not None and hi is not None and 0.0 <= lo <= hi:

        def blur(img):
            if not coin():
                return img
            return img.filter(ImageFilter.GaussianBlur(radius=random.uniform(lo, hi)))

        out.append(({"op": "pil_gaussian_blur", "radius": [lo, hi], "p": p}, blur))
    return out


def _behaves_as(t: Any, model: Callable, images: list) -> bool:
    import torch

    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    for seed in _SEEDS:
        for img in images:
            torch_before = torch.get_rng_state()
            np_before = np.random.get_state()[1].copy() if np is not None else None
            random.seed(seed)
            try:
                got = t(img.copy())
            except Exception:
                return False
            drawn = random.getstate()
            if not torch.equal(torch.get_rng_state(), torch_before):
                return False
            if np is not None and not np.array_equal(np.random.get_state()[1], np_before):
                return False
            random.seed(seed)
            want = model(img.copy())
            if random.getstate() != drawn:
                return False
            if getattr(got, "mode", None) != "RGB" or got.size != img.size or got.tobytes() != want.tobytes():
                return False
    return True


def user_pixel_op(t: Any) -> dict | None:
    """The pipeline op a user's pixel transform on PIL images behaves as, or None."""
    if not callable(t) or isinstance(t, type):
        return None
    module = type(t).__module__ or ""
    if module.startswith(("torchvision", "timm", "hpuload")):
        return None
    candidates = _candidates(t)
    if not candidates:
        return None
    with generators_kept():
        images = _images()
        for op, model in candidates:
            if _behaves_as(t, model, images):
                return op
        return None


@contextlib.contextmanager
def generators_kept():
    """Python's, torch's and NumPy's global generators, as they were before, after the block."""
    import torch

    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    saved = (random.getstate(), torch.get_rng_state(), np.random.get_state() if np is not None else None)
    try:
        yield
    finally:
        random.setstate(saved[0])
        torch.set_rng_state(saved[1])
        if np is not None:
            np.random.set_state(saved[2])


def _watched(t: Any, check: Callable, grey: bool = False) -> bool:
    """Whether `t`, a step of the user's own, passes `check(image, result)` on RGB test images
    up to the size of a photo (grey ones with `grey`: the images of MNIST and its kin),
    drawing nothing from Python's, torch's or NumPy's generators (which are left as they
    were)."""
    import torch

    if not callable(t) or isinstance(t, type):
        return False
    module = type(t).__module__ or ""
    if module.startswith(("torchvision", "timm", "hpuload")) and type(t).__name__ != "Lambda":
        return False
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    images = _images()
    images.append(images[-1].resize((500, 375)))
    if grey:
        images = [img.convert("L") for img in images]
    with generators_kept():
        for img in images:
            before = (random.getstate(), torch.get_rng_state(), np.random.get_state()[1].copy() if np is not None else None)
            try:
                got = t(img.copy())
            except Exception:
                return False
            if random.getstate() != before[0] or not torch.equal(torch.get_rng_state(), before[1]):
                return False
            if np is not None and not np.array_equal(np.random.get_state()[1], before[2]):
                return False
            if not check(img, got):
                return False
        return True


def keeps_rgb_images(t: Any, grey: bool = False) -> bool:
    """Whether `t`, a step of the user's own (a function, a `Lambda`, a class), gives each RGB
    PIL image back unchanged: open_clip's `MaybeConvertMode` and `_convert_to_rgb`, the
    `Lambda(lambda im: im.convert("RGB"))` of many scripts, a placeholder `lambda x: x`.
    Inside the part of a transform hpuload runs, images are RGB at every step (decoded so, as
    the Dataset's own `convert("RGB")` or the check of its files' modes ensures, and no step
    there makes another mode), so such a step changes nothing. Each result must equal the
    image, byte for byte (`_watched`). With `grey` (the images are grey there, as MNIST's) it
    must give each grey image back unchanged, which a conversion to RGB does not."""
    from PIL import Image

    def same(img, got) -> bool:
        return isinstance(got, Image.Image) and got.mode == img.mode and got.size == img.size and got.tobytes() == img.tobytes()

    return _watched(t, same, grey)


def acts_as_to_tensor(t: Any, grey: bool = False) -> bool:
    """Whether `t`, a step of the user's own, gives what torchvision's `ToTensor` gives each
    RGB PIL image (a float32 `[3, H, W]` tensor of the bytes over 255): open_clip's
    `MaybeToTensor`, a subclass of `ToTensor` with a `__call__` of its own (`_watched`)."""
    import torch
    from torchvision.transforms import functional as F

    def same(img, got) -> bool:
        want = F.to_tensor(img)
        return type(got) is torch.Tensor and got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)

    return _watched(t, same, grey)
