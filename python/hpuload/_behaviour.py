"""A pixel transform of the user's own, recognised by what it does, not by its name.

DeiT III's ThreeAugment, DINO's, MoCo's, SimSiam's, Barlow Twins' and VICReg's recipes hold
small classes of their own (a grey, a solarize, a Pillow Gaussian blur, each applied with a
probability drawn from Python's `random` or NumPy's generator, or always, inside torchvision's
`RandomApply`). hpuload cannot know such a class from its name or its source, but it can
watch it: given a few test images and seeds of the generator, the class must give, byte for
byte, what one of hpuload's Pillow ops gives with the parameters its attributes name, drawing
the same numbers from that generator and none from the others. A class that does is run
natively as that op (its draws become hpuload's, per sample, with the same distribution); any
other is not recognised (it then runs in Python, `_tail.py`). The global generators are
restored afterwards.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import random
from typing import Any, Callable

#: Seeds each candidate is watched under when it draws no coin; a class that draws one is
#: watched under seeds that take each branch (`_seeds`).
_SEEDS = range(12)

#: How many seeds of each branch of a class's coin it is watched under, and how many seeds are
#: searched for them (a probability under about 1/3,000 finds too few: not recognised).
_PER_BRANCH, _SEARCHED = 6, 20_000


def _images() -> list:
    """RGB test images: a small gradient with texture, small noise (odd sizes, so that a
    transpose or an off-by-one shows), and a larger one of both, as wide as a thumbnail (a
    class that acts only on images above some size shows there). Each carries an EXIF
    orientation (`_oriented`)."""
    from PIL import Image

    def textured(w: int, h: int) -> bytes:
        return bytes(((x * 11 + y * 7) % 256 if c == 0 else (x * y * 3) % 256 if c == 1 else (255 - x * 9) % 256)
                     for y in range(h) for x in range(w) for c in range(3))

    rng = random.Random(7)
    noise = bytes(rng.randrange(256) for _ in range(16 * 19 * 3))
    large = Image.frombytes("RGB", (131, 97), textured(131, 97))
    large.paste(Image.frombytes("RGB", (16, 19), noise), (40, 30))
    images = [Image.frombytes("RGB", (23, 17), textured(23, 17)), Image.frombytes("RGB", (16, 19), noise), large]
    return [_oriented(img, k) for k, img in enumerate(images)]


#: EXIF orientations the test images carry in turn: rotated 90 degrees (a phone held upright),
#: mirrored, rotated 180 degrees.
_ORIENTATIONS = (6, 2, 3)


def _oriented(img, k: int):
    """`img` with the EXIF orientation `_ORIENTATIONS[k]` in its metadata, as a photo from
    a phone carries one (a decoded image keeps it through `convert("RGB")`): a step that
    transposes by it (`ImageOps.exif_transpose`) changes such an image, so it is not taken
    for one that keeps images as they are, which hpuload's decode (like Pillow's and
    torchvision's) does not apply."""
    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = _ORIENTATIONS[k % len(_ORIENTATIONS)]
    img.info["exif"] = exif.tobytes()
    return img


def _probability(t: Any) -> float | None:
    for name in ("p", "prob"):
        v = getattr(t, name, None)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= v <= 1.0:
            return float(v)
    return None


def _number(t: Any, name: str) -> float | None:
    v = getattr(t, name, None)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


#: The generators a class of the user's may draw its numbers from: Python's `random`, or
#: NumPy's global one (VICReg's classes).
_SOURCES = ("random", "numpy")


def _source(name: str) -> tuple[Callable, Callable, Callable]:
    """`(seed(n), state(), uniform [0, 1) draw)` of the generator `name` (`_SOURCES`)."""
    if name == "random":
        return random.seed, random.getstate, random.random
    import numpy as np

    return np.random.seed, lambda: _numpy_state(np), np.random.random_sample


def _numpy_state(np) -> tuple:
    key, position, *rest = np.random.get_state()[1:]
    return key.tobytes(), position, *rest


def _states(names) -> tuple:
    """The states of the generators `names` (`_SOURCES`) and of torch's."""
    import torch

    return [_source(name)[1]() for name in names], torch.get_rng_state()


def _same_states(a: tuple, b: tuple) -> bool:
    """Two `_states` alike: nothing drew from those generators in between."""
    import torch

    return a[0] == b[0] and torch.equal(a[1], b[1])


def _blur_range(t: Any) -> tuple[float, float]:
    """The range a blur class draws its radius from, by the attributes that name one:
    DINO's and DeiT III's `radius_min` and `radius_max`, MoCo's and SimSiam's `sigma=[lo,
    hi]`, Lightly's `sigmas`; else the range of the recipes whose class names none (Barlow
    Twins' and VICReg's `random() * 1.9 + 0.1`), which the watching confirms or not."""
    lo, hi = _number(t, "radius_min"), _number(t, "radius_max")
    if lo is None or hi is None:
        lo, hi = _number(t, "sigma_min"), _number(t, "sigma_max")
    for name in ("sigma", "sigmas"):
        sigma = getattr(t, name, None)
        if (lo is None or hi is None) and isinstance(sigma, (list, tuple)) and len(sigma) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in sigma
        ):
            lo, hi = float(sigma[0]), float(sigma[1])
    if lo is None or hi is None:
        lo, hi = 0.1, 2.0
    return lo, hi


def _candidates(t: Any) -> list[tuple[dict, Callable, str]]:
    """`(op, model, source)` triples to watch `t` against: the model does, drawing from the
    generator `source` (`_SOURCES`), what the op does with hpuload's generator. A class with
    a probability attribute (`p`, `prob`) draws a coin first (DeiT III's, DINO's, Barlow
    Twins' classes); one without is applied whenever it is called (MoCo's `GaussianBlur` and
    `Solarize`, which the recipe wraps in a `RandomApply`)."""
    from PIL import ImageFilter, ImageOps

    p = _probability(t)
    lo, hi = _blur_range(t)
    # Lightly's `RandomSolarization(threshold=...)`; else Pillow's default, 128.
    threshold = _number(t, "threshold")
    threshold = 128.0 if threshold is None or not 0 <= threshold <= 255 else threshold
    out = []
    for name in _SOURCES:
        draw = _source(name)[2]

        def coin(draw=draw) -> bool:
            return p is None or draw() < p

        def grey(img, coin=coin):
            return img.convert("L").convert("RGB") if coin() else img

        def solarize(img, coin=coin):
            return ImageOps.solarize(img, threshold) if coin() else img

        def blur(img, coin=coin, draw=draw):
            if not coin():
                return img
            return img.filter(ImageFilter.GaussianBlur(radius=lo + (hi - lo) * draw()))

        chance = 1.0 if p is None else p
        out += [
            ({"op": "pil_grayscale", "p": chance}, grey, name),
            ({"op": "random_solarize", "threshold": threshold, "p": chance}, solarize, name),
            ({"op": "pil_gaussian_blur", "radius": [lo, hi], "p": chance}, blur, name),
        ]
    return out


def _seeds(source: str, p: float | None) -> list[int] | None:
    """The seeds of `source` to watch a class under: `_SEEDS` when it draws no coin (p None);
    else `_PER_BRANCH` seeds whose first draw falls under p (it applies) and as many whose
    first draw does not (it leaves the image), so that neither branch goes unwatched: a
    class applied with p 0.1 is not taken for another whose effect never showed. None when
    the applying seeds are too rare to find (`_SEARCHED`)."""
    if p is None:
        return list(_SEEDS)
    seed, _, draw = _source(source)
    applies, leaves = [], []
    for n in range(_SEARCHED):
        seed(n)
        (applies if draw() < p else leaves).append(n)
        if (len(applies) >= _PER_BRANCH or p <= 0.0) and (len(leaves) >= _PER_BRANCH or p >= 1.0):
            return applies[:_PER_BRANCH] + leaves[:_PER_BRANCH]
    return None


def _behaves_as(t: Any, model: Callable, images: list, source: str, seeds: list[int]) -> bool:
    """Whether `t` gives, byte for byte, what `model` gives on each image under each of
    `seeds` of `source`, drawing the same numbers from it and none from the other global
    generators."""
    seed, state, _ = _source(source)
    others = [name for name in _SOURCES if name != source]
    for n in seeds:
        for img in images:
            before = _states(others)
            seed(n)
            try:
                got = t(img.copy())
            except Exception:
                return False
            drawn = state()
            if not _same_states(_states(others), before):
                return False
            seed(n)
            want = model(img.copy())
            if state() != drawn:
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
    p = _probability(t)
    with generators_kept():
        images = _images()
        seeds = {name: _seeds(name, p) for name in _SOURCES}
        for op, model, source in candidates:
            if seeds[source] is not None and _behaves_as(t, model, images, source, seeds[source]):
                return op
        return None


@contextlib.contextmanager
def generators_kept():
    """Python's, torch's and NumPy's global generators, as they were before, after the block."""
    saved = generator_states()
    try:
        yield
    finally:
        set_generator_states(saved)


@contextlib.contextmanager
def albumentations_kept(composes: list):
    """Each albumentations step's own generators (`random_generator`, `py_random`, `seed`,
    objects shared between steps included) as they were before, after the block: seeding a
    `Compose` for a check leaves the user's draws as they were."""
    steps, seen = [], set()

    def walk(t):
        if id(t) in seen:
            return
        seen.add(id(t))
        steps.append(t)
        for inner in getattr(t, "transforms", None) or ():
            walk(inner)

    for compose in composes:
        walk(compose)
    saved = []
    for t in steps:
        gen, py = getattr(t, "random_generator", None), getattr(t, "py_random", None)
        saved.append(
            (
                t,
                gen,
                py,
                getattr(t, "seed", None),
                copy.deepcopy(gen.bit_generator.state) if gen is not None else None,
                py.getstate() if py is not None else None,
            )
        )
    try:
        yield
    finally:
        for t, gen, py, seed, gen_state, py_state in saved:
            if gen is not None:
                t.random_generator = gen
                gen.bit_generator.state = gen_state
            if py is not None:
                t.py_random = py
                py.setstate(py_state)
            if hasattr(t, "seed"):
                t.seed = seed


def generator_states() -> tuple:
    """The states of Python's, torch's and NumPy's global generators."""
    import torch

    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    return random.getstate(), torch.get_rng_state(), np.random.get_state() if np is not None else None


def set_generator_states(states: tuple) -> None:
    """Python's, torch's and NumPy's global generators set to `states` (`generator_states`)."""
    import torch

    random.setstate(states[0])
    torch.set_rng_state(states[1])
    if states[2] is not None:
        import numpy as np

        np.random.set_state(states[2])


#: The size of the largest image a step that should keep images as they are is watched on:
#: a 12-megapixel photo (a step that shrinks only large images shows there).
_LARGEST = (4032, 3024)


@functools.lru_cache(maxsize=1)
def _large():
    """The 12-megapixel test image (`_LARGEST`): the largest of `_images`, scaled up by pixel
    repetition (made once; each watch hands the step a copy)."""
    from PIL import Image

    return _oriented(_images()[-1].resize(_LARGEST, Image.NEAREST), 1)


def _watched(t: Any, check: Callable, grey: bool = False, large: bool = False) -> bool:
    """Whether `t`, a step of the user's own, passes `check(image, result)` on RGB test images
    up to the size of a photo (grey ones with `grey`: the images of MNIST and its kin), and
    with `large` one of a 12-megapixel photo's size last, drawing nothing from Python's,
    torch's or NumPy's generators (which are left as they were)."""
    if not callable(t) or isinstance(t, type):
        return False
    module = type(t).__module__ or ""
    if module.startswith(("torchvision", "timm", "hpuload")) and type(t).__name__ != "Lambda":
        return False
    images = _images()
    images.append(_oriented(images[-1].resize((500, 375)), 0))
    if large:
        images.append(_large())
    if grey:
        images = [_oriented(img.convert("L"), k) for k, img in enumerate(images)]
    with generators_kept():
        for img in images:
            before = _states(_SOURCES)
            try:
                got = t(img.copy())
            except Exception:
                return False
            if not _same_states(_states(_SOURCES), before) or not check(img, got):
                return False
        return True


def keeps_rgb_images(t: Any, grey: bool = False) -> bool:
    """Whether `t`, a step of the user's own (a function, a `Lambda`, a class), gives each RGB
    PIL image back unchanged: open_clip's `MaybeConvertMode` and `_convert_to_rgb`, the
    `Lambda(lambda im: im.convert("RGB"))` of many scripts, a placeholder `lambda x: x`.
    Inside the part of a transform hpuload runs, images are RGB at every step (decoded so, as
    the Dataset's own `convert("RGB")` or the check of its files' modes ensures, and no step
    there makes another mode), so such a step changes nothing. Each result must equal the
    image, byte for byte (`_watched`), on images that carry an EXIF orientation (which a
    step turning photos upright applies) and up to a 12-megapixel photo's size (which one
    shrinking only large photos changes). With `grey` (the images are grey there, as
    MNIST's) it must give each grey image back unchanged, which a conversion to RGB does
    not."""
    from PIL import Image, ImageChops

    def same(img, got) -> bool:
        if not (isinstance(got, Image.Image) and got.mode == img.mode and got.size == img.size):
            return False
        return ImageChops.difference(got, img).getbbox() is None

    return _watched(t, same, grey, large=True)


def turns_upright(t: Any, grey: bool = False) -> bool:
    """Whether `t`, a step of the user's own (`Lambda(ImageOps.exif_transpose)`, a function
    calling it), gives each PIL image turned upright by the EXIF orientation it carries, as
    `ImageOps.exif_transpose` does: its result equals Pillow's, byte for byte, on test images
    that carry orientations (`_watched`). hpuload then turns each image as it decodes it."""
    from PIL import Image, ImageChops, ImageOps

    def same(img, got) -> bool:
        want = getattr(ImageOps.exif_transpose, "__wrapped__", ImageOps.exif_transpose)(img)  # Pillow's own
        if not (isinstance(got, Image.Image) and got.mode == want.mode and got.size == want.size):
            return False
        return ImageChops.difference(got, want).getbbox() is None

    return _watched(t, same, grey)


def minds_orientation(t: Any, grey: bool = False) -> bool:
    """Whether `t`, a step of the user's own, gives an image that carries an EXIF orientation
    something other than what it gives the same pixels without one (under the same draws of
    every generator): `ImageOps.exif_transpose`, or a class that calls it among other things.
    Pillow keeps an image's metadata through crops and resizes, so such a step after them
    turns what torch's loader made, while the images hpuload hands a Python tail carry no
    metadata. A step that fails on the test images is taken not to mind (as before)."""
    import numpy as np
    import torch
    from PIL import Image

    def alike(a, b) -> bool:
        if isinstance(a, Image.Image) and isinstance(b, Image.Image):
            return a.mode == b.mode and a.size == b.size and a.tobytes() == b.tobytes()
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
        return type(a) is type(b) and not isinstance(a, (Image.Image, torch.Tensor, np.ndarray))

    if not callable(t) or isinstance(t, type):
        return False
    with generators_kept():
        for img in _images():
            if grey:
                img = _oriented(img.convert("L"), 0)
            plain = img.copy()
            plain.info.pop("exif", None)
            results = []
            for image in (img.copy(), plain):
                random.seed(11)
                np.random.seed(11)
                torch.default_generator.manual_seed(11)  # the CPU generator alone: a device one is the user's
                try:
                    results.append(t(image))
                except Exception:
                    return False
            if not alike(*results):
                return True
    return False


def acts_as_to_tensor(t: Any, grey: bool = False) -> str | None:
    """How `t`, a step of the user's own, turns each RGB PIL image into a float32 `[3, H, W]`
    tensor of its bytes scaled to [0, 1], or None where it does not (`_watched`): "divide"
    where it gives what torchvision's `ToTensor` gives (the bytes over 255: open_clip's
    `MaybeToTensor`, a subclass of `ToTensor` with a `__call__` of its own), "multiply" where
    it gives what v2's `ToImage` then `ToDtype(torch.float32, scale=True)` give (a
    `tv_tensors.Image` of the bytes times 1/255: Lightly's `ToTensor`)."""
    import torch
    from torchvision import tv_tensors
    from torchvision.transforms import functional as F
    from torchvision.transforms import v2

    def same_as(reference, kind):
        def same(img, got) -> bool:
            want = reference(img)
            return (
                type(got) is kind and got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
            )

        return same

    v2_float = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    for form, reference, kind in (("divide", F.to_tensor, torch.Tensor), ("multiply", v2_float, tv_tensors.Image)):
        if _watched(t, same_as(reference, kind), grey):
            return form
    return None
