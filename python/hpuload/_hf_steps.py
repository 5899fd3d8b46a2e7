"""A table's function that cuts each image itself, step by step, with torchvision's objects
(diffusers' and optimum-habana's `train_text_to_image_sdxl.py`): it notes the image's size,
resizes it with a `Resize`, cuts it with a `CenterCrop` or with `RandomCrop.get_params` and
torchvision's `crop`, mirrors it with a `RandomHorizontalFlip(p=1.0)` when Python's
`random.random()` says so, notes where it cut, and hands the cut to a last transform
(`ToTensor`, `Normalize`).

hpuload runs that as one transform, natively: `StepChain.compose` (the resize, the crop, the
flip with its probability, the last transform), each sample's draws its own as for any
transform. The function itself still runs on each batch, as `_hf_rows` runs a function, with
stand-ins that answer its questions from the sample's plan: the image's size (read from its
header, turned as `datasets` turns it), the resize's, the crop's corner from `get_params`,
`random.random()` a value on the plan's side of the flip's threshold; its last transform
gives the row's native tensor. What it notes (`original_sizes`, `crop_top_lefts`) is so
what the native pixels were cut by.

The check (`_hf_rows.RowFunction.check`) runs the function with these stand-ins doing the
real steps on the real image, under the dataset's own draws (`Steps.real`): its samples must
equal the dataset's. It learns the chain from them (`StepChain.learn`), and the flip's
threshold by running one row with `random.random()` answered by chosen values (`probe`).
A batch whose function does other steps than the rows checked raises, naming them."""

from __future__ import annotations

from ._hf_rows import NeedsImage

#: `random.random()`'s answers at the ends of its range, for the flip's threshold.
_LOW, _HIGH = 0.0, 1.0 - 2.0**-40
#: `StepChain.flip` of a function that mirrors with torchvision's functional `hflip`.
FUNCTIONAL = -1


class _Step:
    """A row's image part way through the function's steps: its size, and (while checking)
    the real image the steps made."""

    __slots__ = ("k", "column", "real", "shape")

    def __init__(self, k: int, column, real, shape: tuple[int, int]):
        self.k, self.column, self.real, self.shape = k, column, real, shape

    @property
    def size(self) -> tuple[int, int]:
        return self.shape

    @property
    def width(self) -> int:
        return self.shape[0]

    @property
    def height(self) -> int:
        return self.shape[1]

    @property
    def mode(self) -> str:
        return "RGB"

    def __getattr__(self, name: str):
        raise NeedsImage(f"the function reads the {name!r} of an image it cut")


class Steps:
    """One run of the function's steps over a batch, shared by the stand-ins: each row's
    steps as they were taken (`ops`), the row last stepped (`current`, whose the next
    `random.random()` is). `real`: the check's run (each step on the real image, drawing as
    it does); otherwise `facts` (row -> `Facts`) answer. `probe`: the value
    `random.random()` answers in a probe of the flip's threshold."""

    def __init__(self, real: bool, facts: dict | None = None, probe: float | None = None, chain: StepChain | None = None):
        self.real, self.facts, self.probe, self.chain = real, facts or {}, probe, chain
        self.ops: dict[int, list] = {}
        self.current: int | None = None

    def note(self, k: int, op: tuple) -> None:
        self.ops.setdefault(k, []).append(op)
        self.current = k


class Facts:
    """What the plan says of a row's steps: the image's `(width, height)`, its resize's, the
    crop's `(top, left)` in the image the crop cuts, and whether it is mirrored."""

    __slots__ = ("size", "resized", "at", "flip")

    def __init__(self, size, resized, at, flip):
        self.size, self.resized, self.at, self.flip = size, resized, at, flip


class StepTransform:
    """One of the function's torchvision objects, stood in for: a geometric one called on a
    row's image gives a `_Step` (its size the plan's); the last, which makes a tensor, the
    row's native tensor (`views[k]`); `get_params` of a `RandomCrop` the plan's crop."""

    def __init__(self, found, which: int, steps: Steps, views=None):
        self.found, self.which, self.steps, self.views = found, which, steps, views

    def __call__(self, *args, **kwargs):
        from ._hf_rows import _Row

        image = args[0] if args else None
        if len(args) != 1 or kwargs or not isinstance(image, (_Row, _Step)):
            raise NeedsImage(f"the function calls {type(self.found).__name__} on a {type(image).__name__}, not a row's image")
        if isinstance(image, _Row) and (not image.converted or image.tensor or image.arrayed):
            raise NeedsImage("the function hands its steps the image otherwise than converted to RGB")
        steps, k, found = self.steps, image.k, self.found
        kind = _kind(found)
        if steps.real:
            out = found(image.real)
            if isinstance(out, _pil_image()):
                if kind is None:
                    raise NeedsImage(f"the function cuts the image with {type(found).__name__}, which hpuload does not follow step by step")
                steps.note(k, (kind, self.which, tuple(image.real.size), tuple(out.size)))
                return _Step(k, image.column, out, tuple(out.size))
            steps.note(k, ("final", self.which))
            return out
        fact = steps.facts[k]
        if steps.chain is None or self.which not in steps.chain.whiches:
            raise NeedsImage(f"the function calls {type(found).__name__} on a row's image, unlike the rows checked")
        if self.which == steps.chain.final:
            steps.note(k, ("final", self.which))
            return self.views[image.column][k]
        if kind == "resize":
            shape = fact.resized
        elif kind in ("center", "cut"):
            shape = steps.chain.crop_size
        elif kind == "flip":
            shape = image.shape
        else:
            raise NeedsImage(f"the function calls {type(found).__name__} on a row's image, unlike the rows checked")
        steps.note(k, (kind, self.which, tuple(image.shape), tuple(shape)))
        return _Step(k, image.column, None, tuple(shape))

    def get_params(self, image, output_size):
        """`RandomCrop.get_params(image, (height, width))`: the crop's `(top, left, height,
        width)`."""
        if not isinstance(image, _Step):
            raise NeedsImage("the function draws a crop of other than the resized image")
        size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
        if self.steps.real:
            top, left, h, w = type(self.found).get_params(image.real, size)
        else:
            chain = self.steps.chain
            if chain is None or chain.crop != ("random", self.which) or size != chain.crop_size[::-1]:
                raise NeedsImage("the function draws a crop unlike on the rows checked")
            (top, left), (h, w) = self.steps.facts[image.k].at, size
        self.steps.note(image.k, ("params", self.which, size, (top, left)))
        return top, left, h, w

    def __getattr__(self, name: str):
        raise NeedsImage(f"the function reads {type(self.found).__name__}'s {name!r}")


def bind_crop(steps: Steps):
    """torchvision's functional `crop` for this run, which must cut where `get_params` just
    said: the real crop of the real image while checking, else the plan's."""

    def crop(img, top, left, height, width):
        if not isinstance(img, _Step):
            raise NeedsImage("the function crops other than a row's resized image")
        box = (int(top), int(left), int(height), int(width))
        last = (steps.ops.get(img.k) or [None])[-1]
        if last is None or last[0] != "params" or (*last[3], *last[2]) != box:
            raise NeedsImage("the function crops elsewhere than get_params said")
        if steps.real:
            from torchvision.transforms import functional as F

            out = F.crop(img.real, *box)
            steps.note(img.k, ("crop", box))
            return _Step(img.k, img.column, out, tuple(out.size))
        steps.note(img.k, ("crop", box))
        return _Step(img.k, img.column, None, (box[3], box[2]))

    return crop


def bind_hflip(steps: Steps):
    """torchvision's functional `hflip` for this run: a flip of a row's image as the flip
    object's (`FUNCTIONAL` in place of its index), the real one while checking."""

    def hflip(img):
        if not isinstance(img, _Step):
            raise NeedsImage("the function mirrors other than a row's resized image")
        if steps.real:
            from torchvision.transforms import functional as F

            out = F.hflip(img.real)
            steps.note(img.k, ("flip", FUNCTIONAL, img.shape, img.shape))
            return _Step(img.k, img.column, out, img.shape)
        if steps.chain is None or steps.chain.flip != FUNCTIONAL:
            raise NeedsImage("the function mirrors the image unlike the rows checked")
        steps.note(img.k, ("flip", FUNCTIONAL, img.shape, img.shape))
        return _Step(img.k, img.column, None, img.shape)

    return hflip


class FunctionalModule:
    """`torchvision.transforms.functional` as the function sees it (`TF.crop(...)`,
    `TF.hflip(...)`): those two stood in for as `bind_crop` and `bind_hflip`, the rest the
    module's own."""

    def __init__(self, steps: Steps):
        self.crop, self.hflip = bind_crop(steps), bind_hflip(steps)

    def __getattr__(self, name: str):
        from torchvision.transforms import functional as F

        return getattr(F, name)


class RandomModule:
    """Python's `random` as the function sees it: `random()` answers for the row last
    stepped (the flip's gate), the rest the module's own."""

    def __init__(self, steps: Steps):
        self.steps = steps

    def random(self):
        import random

        steps, k = self.steps, self.steps.current
        if k is None:
            raise NeedsImage("the function calls random.random() before it steps an image")
        if steps.probe is not None:
            value = steps.probe
        elif steps.real:
            value = random.random()
        else:
            chain = steps.chain
            if chain is None or chain.gate is None:
                raise NeedsImage("the function calls random.random() unlike on the rows checked")
            value = chain.answer(steps.facts[k].flip)
        steps.note(k, ("random",))
        return value

    def __getattr__(self, name: str):
        import random

        return getattr(random, name)


class StepChain:
    """The steps the function takes with each row's image, learnt from the check: `resize`
    (the index of its `Resize`), `crop` (`("center", index)` of a `CenterCrop`, `("cut",
    index)` of an unpadded `RandomCrop` it calls, `("random", index)` of the `RandomCrop` whose
    `get_params` it calls, `("none", None)` where it does not crop) of `crop_size` `(width,
    height)`, the flip's
    gate (`gate`: `"before"` or `"after"` the crop, or None), its `flip` (the index of the
    `RandomHorizontalFlip(p=1.0)`, or `FUNCTIONAL` for torchvision's `hflip`) and probability (`p`; `low` whether `random()`'s low
    values flip), and `final`, the transform that makes the tensor."""

    def __init__(self, founds: list):
        self.founds = founds
        self.resize = self.crop = self.gate = self.flip = self.final = None
        self.crop_size = None
        self.p, self.low = 0.0, True

    @property
    def whiches(self) -> set:
        return {w for w in (self.resize, self.flip, self.final, self.crop[1] if self.crop else None) if w is not None and w >= 0}

    def answer(self, flip: bool) -> float:
        """What `random.random()` answers for a row the plan mirrors (or not)."""
        return (_LOW if self.low else _HIGH) if flip else (_HIGH if self.low else _LOW)

    def learn(self, ops: list) -> None:
        """Reads one checked row's steps: the resize, the crop, a gate (`random()`, then the
        flip where it fell so) before or after the crop, the last transform. Raises
        `NeedsImage` for any other order, or one unlike an earlier row's."""
        seen = list(ops)

        def take(*kinds):
            if seen and seen[0][0] in kinds:
                return seen.pop(0)
            return None

        def gate(where):
            if take("random") is None:
                return None
            flipped = take("flip")
            if flipped is not None:
                self._same("flip", flipped[1])
            self._same("gate", where)
            return flipped

        resize = take("resize")
        if resize is None:
            raise NeedsImage("the function's first step of an image is no Resize")
        self._same("resize", resize[1])
        gate("before")
        center = take("center", "cut")
        if center is not None:
            self._same("crop", (center[0], center[1]))
            self._same("crop_size", center[3])
        elif seen and seen[0][0] in ("params", "crop"):
            params, cut = take("params"), take("crop")
            if params is None or cut is None:
                raise NeedsImage("the function crops its resized image otherwise than by RandomCrop.get_params and crop")
            self._same("crop", ("random", params[1]))
            self._same("crop_size", params[2][::-1])
        else:
            # No crop (optimum-habana's copy where `--crop_resolution` is the resolution).
            self._same("crop", ("none", None))
        if self.crop[0] != "none":
            w, h = self.crop_size
            if resize[3][0] < w or resize[3][1] < h:
                raise NeedsImage(f"the function crops {w}x{h} from a resize of {resize[3][0]}x{resize[3][1]}, past its edges")
            gate("after")
        final = take("final")
        if final is None or seen:
            raise NeedsImage(f"the function steps an image as {[op[0] for op in ops]}, which hpuload does not follow")
        self._same("final", final[1])
        moving = _moves(self.founds[final[1]])
        if moving:
            # Its draws would be the plan's beside the steps', which the stand-ins answer from
            # the plan: what the function notes would follow them too.
            raise NeedsImage(f"the function's last transform moves the pixels too ({', '.join(moving)})")

    def _same(self, name: str, value) -> None:
        had = getattr(self, name)
        if had is None:
            setattr(self, name, value)
        elif had != value:
            raise NeedsImage(f"the function steps its rows' images differently ({name}: {had} and {value})")

    def threshold(self, flips) -> None:
        """Learns the flip's probability from `flips(value)`: whether the row is mirrored when
        `random.random()` answers `value` (bisecting for the threshold)."""
        low, high = flips(_LOW), flips(_HIGH)
        if low == high:
            self.p, self.low = (1.0 if low else 0.0), True
            return
        a, b = _LOW, _HIGH  # flips(a) == low, flips(b) == high
        for _ in range(40):
            mid = (a + b) / 2
            if flips(mid) == low:
                a = mid
            else:
                b = mid
        t = round(b, 9)
        self.low = low
        self.p = t if low else 1.0 - t

    def edges(self) -> list[tuple[float, bool]]:
        """`(value, mirrored)` pairs just either side of the learnt threshold (its ends for odds
        of 0 or 1): what `random.random()` answering `value` must do to any row."""
        if self.p in (0.0, 1.0):
            return [(_LOW, self.p == 1.0), (_HIGH, self.p == 1.0)]
        t = self.p if self.low else 1.0 - self.p
        below, above = max(_LOW, t - 1e-6), min(_HIGH, t + 1e-6)
        return [(below, self.low), (above, not self.low)]

    def compose(self):
        """The steps as one torchvision transform."""
        from torchvision import transforms as T

        resize, final = self.founds[self.resize], self.founds[self.final]
        kind, which = self.crop
        w, h = self.crop_size or (0, 0)
        flip = [T.RandomHorizontalFlip(self.p)] if self.gate is not None and self.p > 0 else []
        if kind == "none":
            middle = flip
        else:
            cut = T.RandomCrop((h, w)) if kind == "random" else self.founds[which]
            middle = [*flip, cut] if self.gate == "before" else [cut, *flip]
        last = list(final.transforms) if isinstance(final, T.Compose) else [final]
        return T.Compose([resize, *middle, *last])


def facts_of(plan: dict, size: tuple[int, int], chain: StepChain) -> Facts:
    """A row's `Facts` from its sample plan (`core.sample_plan`'s) and its image's size."""
    if plan.get("padding") is not None:
        raise NeedsImage(f"the function crops an image of {size[0]}x{size[1]} past its resize's edges, unlike the rows checked")
    ops = [op.get("op") for op in plan.get("ops", [])]
    after = (ops.count("hflip") + bool(plan.get("flip"))) % 2 == 1
    if chain.crop[0] == "none":
        # The resize alone: its size as torchvision computes it, every flip after it.
        return Facts(tuple(size), _resized(chain.founds[chain.resize], size), (0, 0), after)
    rc = plan.get("resized_crop")
    if rc is None:
        # A crop the size of its resize: the plan keeps the resize alone, every flip after it.
        w, h = chain.crop_size
        return Facts(tuple(size), (w, h), (0, 0), after)
    rh, rw = rc["resized"]
    flip = bool(rc["hflip"]) if chain.gate == "before" else after != bool(rc["hflip"])
    return Facts(tuple(size), (rw, rh), tuple(rc["at"]), flip)


def _resized(resize, size: tuple[int, int]) -> tuple[int, int]:
    """`(width, height)` of a `Resize`'s output for an image of `size` `(width, height)` (a
    `max_size` is refused by its translation)."""
    from ._arrays import resized_size

    target = resize.size
    if isinstance(target, (list, tuple)) and len(target) == 2:
        h, w = target
    else:
        h, w = resized_size((size[1], size[0]), target[0] if isinstance(target, (list, tuple)) else target)
    return int(w), int(h)


#: Words in the names of torchvision's transforms that move pixels (geometry).
_MOVING = ("Flip", "Crop", "Resize", "Rotat", "Affine", "Perspective", "Pad", "Elastic", "Zoom")


def _moves(final) -> list[str]:
    """The steps of the last transform that move pixels (a flip, a crop, a resize...)."""
    from ._transforms import steps

    return [type(t).__name__ for t in steps(final) if any(w in type(t).__name__ for w in _MOVING)]


def _kind(found) -> str | None:
    from torchvision import transforms as T

    if type(found) is T.Resize:
        return "resize"
    if type(found) is T.CenterCrop:
        return "center"
    if type(found) is T.RandomCrop and found.padding is None and not found.pad_if_needed:
        return "cut"
    if type(found) is T.RandomHorizontalFlip and found.p == 1.0:
        return "flip"
    return None


def _pil_image():
    from PIL import Image

    return Image.Image


def stepwise(founds: list) -> bool:
    """The function reaches several torchvision objects (and nothing else hpuload stands
    in for), which it may apply in turn."""
    return len(founds) > 1 and all(type(f).__module__.startswith("torchvision.transforms") for f in founds)

