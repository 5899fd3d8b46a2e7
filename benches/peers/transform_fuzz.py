"""Random compositions of torchvision transforms, each random parameter pinned, run through
hpuload.torch.DataLoader (CPU path) and through the dataset itself, compared value by value:
a search for silent differences that no hand-written case list thought of (session 81).
One case in four is inside a user's wrapper of the Compose (one that only calls it, one that
draws whether to call it with a probability of 1, one that mirrors what it gives: session 95).

usage: python transform_fuzz.py FOLDER [CASES=300] [SEED=0]
  FOLDER  an ImageFolder: transform_sweep_images.py's small set without its 150x151 image
          (c2/08.png), where a square crop of scale 1 fits one row short and torchvision
          draws its top offset
Each composition is drawn from a small grammar: optional PIL steps, a tensor conversion at a
random place (before or after the geometry: PILToTensor, ToImage, ToTensor, ToDtype or
ConvertImageDtype to a float type), one or two geometric steps with random sizes,
interpolations (enum or v1's integer codes), antialias (True, False, None, unset) and
max_size, then pixel steps, Normalize and a no-op RandomErasing. Every random draw is pinned
(p of 0 or 1, ranges of one value, single-factor ColorJitter), so the dataset's own samples
are the reference. Prints one line per case whose outcome is not "same" or "torch raises", and
a tally:
  same      hpuload's batches equal the dataset's samples (1 level for bytes; floats scaled
            to levels by 255, tolerance 1)
  fallback  hpuload warned and ran torch's loader (equal too, or it would be BAD)
  near      a few values past the tolerance where the case takes a geometry hpuload states
            as one level off (albumentations_fuzz.py: OpenCV's cubic), none where not
  SILENT    different without a FallbackWarning: a bug
  ERROR     hpuload raised where torchvision did not
  torch varies  the dataset itself gave other values the second time (not compared)
env ONLY=N: run case N alone and print each sample's largest difference.
env BACKEND=auto: the media engine's path (FOLDER of JPEGs); a case is then SILENT when its
  mean difference passes 4 levels (the engine is within PSNR floors, not bytes).
"""
import os
import random
import sys
import warnings

import torch
from torchvision import datasets
from torchvision import transforms as T
from torchvision.transforms import InterpolationMode as IM
from torchvision.transforms import v2

from hpuload.torch import DataLoader

ROOT = sys.argv[1] if __name__ == "__main__" else None
BACKEND = os.environ.get("BACKEND", "cpu")
FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
INTERPS = [IM.NEAREST, IM.BILINEAR, IM.BICUBIC, IM.NEAREST_EXACT, IM.BOX, IM.LANCZOS]


def size(rng):
    s = rng.choice([17, 31, 48, 64, 97, 160, 256])
    return rng.choice([s, (s, rng.choice([20, 40, 56, 120, 300])), [s]])


def resize(M, rng):
    kw = {}
    it = rng.choice(INTERPS[:3] * 4 + INTERPS[3:])
    if M is T and rng.random() < 0.2:
        kw["interpolation"] = {IM.NEAREST: 0, IM.BILINEAR: 2, IM.BICUBIC: 3}.get(it, it)
    else:
        kw["interpolation"] = it
    aa = rng.choice(["unset", True, False, None])
    if aa != "unset":
        kw["antialias"] = aa
    s = size(rng)
    if isinstance(s, int) and rng.random() < 0.2:
        kw["max_size"] = s + rng.choice([1, 30, 200])
    return f"Resize({s!r}, {kw})", M.Resize(s, **kw)


def geometry(M, rng):
    r = rng.random()
    if r < 0.45:
        return resize(M, rng)
    if r < 0.7:
        s = size(rng)
        return f"CenterCrop({s!r})", M.CenterCrop(s)
    if r < 0.85:
        it = rng.choice(INTERPS[:3])
        kw = {"interpolation": it}
        aa = rng.choice(["unset", True, False, None])
        if aa != "unset":
            kw["antialias"] = aa
        # Scale 1 and ratio 1: no window fits but on a square image (the whole image), so
        # torchvision takes its fallback, the centre square of the shorter side (pinned).
        s = rng.choice([32, 57, 96])
        return f"RRC({s}, scale=1, ratio=1, {kw})", M.RandomResizedCrop(s, scale=(1, 1), ratio=(1, 1), **kw)
    flip = rng.choice(["h", "v"])
    return f"{flip}flip", (M.RandomHorizontalFlip(1.0) if flip == "h" else M.RandomVerticalFlip(1.0))


def pixel(M, rng, on):
    """A pixel step, its draw pinned. `on`: "pil", "u8" or "float"."""
    ops = [
        ("hflip", lambda: M.RandomHorizontalFlip(1.0)),
        ("vflip", lambda: M.RandomVerticalFlip(1.0)),
        ("noflip", lambda: M.RandomHorizontalFlip(0.0)),
        ("bright", lambda: M.ColorJitter(brightness=(1.3, 1.3))),
        ("contrast", lambda: M.ColorJitter(contrast=(0.7, 0.7))),
        ("sat", lambda: M.ColorJitter(saturation=(1.5, 1.5))),
        ("hue", lambda: M.ColorJitter(hue=(0.1, 0.1))),
        ("gray3", lambda: M.Grayscale(3)),
        ("gray1", lambda: M.Grayscale(1)),
        ("rgray1", lambda: M.RandomGrayscale(1.0)),
        ("rgray0", lambda: M.RandomGrayscale(0.0)),
        ("sharp", lambda: M.RandomAdjustSharpness(2.0, 1.0)),
        ("blur", lambda: M.GaussianBlur(5, sigma=(1.0, 1.0))),
        ("rot", lambda: M.RandomRotation((20, 20))),
        ("affine", lambda: M.RandomAffine(degrees=(10, 10), scale=(1.1, 1.1))),
        ("autocontrast", lambda: M.RandomAutocontrast(1.0)),
        ("invert", lambda: M.RandomInvert(1.0)),
        ("noapply", lambda: M.RandomApply([M.ColorJitter(0.4, 0.4, 0.4)], p=0.0)),
    ]
    if on == "pil":
        ops += [
            ("topil_roundtrip", lambda: M.Compose([M.PILToTensor(), M.ToPILImage()])),
            ("rgb", lambda: v2.RGB() if M is v2 else M.Lambda(lambda im: im.convert("RGB"))),
        ]
    if M is v2 and on != "float":
        ops += [("jpeg75", lambda: v2.JPEG((75, 75)))]
    ops += [
        ("apply1", lambda: M.RandomApply([M.ColorJitter(brightness=(0.7, 0.7))], p=1.0)),
        ("choice1", lambda: M.RandomChoice([M.RandomVerticalFlip(1.0)])),
        ("order1", lambda: M.RandomOrder([M.ColorJitter(contrast=(1.2, 1.2))])),
        ("jitter_identity", lambda: M.ColorJitter(brightness=(1, 1), contrast=0, saturation=(1, 1), hue=0)),
        ("identity", lambda: M.Lambda(lambda x: x)),
    ]
    if on != "float":
        ops += [
            ("post", lambda: M.RandomPosterize(3, 1.0)),
            ("sol", lambda: M.RandomSolarize(128, 1.0)),
            ("equalize", lambda: M.RandomEqualize(1.0)),
        ]
    else:
        ops += [("sol0.5", lambda: M.RandomSolarize(0.5, 1.0))]
    name, make = rng.choice(ops)
    return name, make()


def to_float(M, rng):
    """A conversion of a PIL image or uint8 tensor to floats: (name, steps, from_pil)."""
    dt = rng.choice(FLOATS[:1] * 4 + FLOATS[1:])
    choice = rng.random()
    if M is T:
        if choice < 0.6:
            return "ToTensor", [T.ToTensor()], True
        return f"PILToTensor+ConvertImageDtype({dt})", [T.PILToTensor(), T.ConvertImageDtype(dt)], True
    if choice < 0.3:
        return "ToTensor", [T.ToTensor()], True
    return f"ToImage+ToDtype({dt})", [v2.ToImage(), v2.ToDtype(dt, scale=True)], True


def composition(rng):
    M = rng.choice([T, v2])
    names, steps = [], []

    def add(name, step):
        names.append(name)
        steps.extend(step if isinstance(step, list) else [step])

    # Where the image becomes a tensor: 0 before everything, 1 after the PIL steps, 2 after
    # the geometry, 3 after the pixel steps.
    at = rng.choice([0, 1, 2, 2, 3, 3])
    floats = rng.random() < 0.5
    state = "pil"

    def convert():
        nonlocal state
        if floats:
            name, s, _ = to_float(M, rng)
            state = "float"
        else:
            name, s = ("PILToTensor", M.PILToTensor()) if M is T or rng.random() < 0.5 else ("ToImage", v2.ToImage())
            state = "u8"
        add(name, s)

    if at == 0:
        convert()
    for _ in range(rng.choice([0, 0, 1, 2])):
        add(*pixel(M, rng, state))
    if at == 1:
        convert()
    for _ in range(rng.choice([1, 1, 2])):
        add(*geometry(M, rng))
    if at == 2:
        convert()
    for _ in range(rng.choice([0, 1, 1, 2])):
        add(*pixel(M, rng, state))
    if at == 3:
        convert()
    if state == "u8" and rng.random() < 0.4:
        dt = rng.choice(FLOATS)
        add(f"ToDtype/ConvertImageDtype({dt})", v2.ToDtype(dt, scale=True) if M is v2 else T.ConvertImageDtype(dt))
        state = "float"
    if state == "u8" and M is v2 and rng.random() < 0.1:
        add("ToDtype(uint8, scale)", v2.ToDtype(torch.uint8, scale=True))
    if state == "float" and rng.random() < 0.6:
        r = rng.random()
        if r < 0.15:
            add("Normalize([0.5], [0.25])", M.Normalize([0.5], [0.25]))
        elif r < 0.3:
            add("Normalize(inplace)", M.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225], inplace=True))
        else:
            add("Normalize", M.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]))
    if state == "float" and M is v2 and rng.random() < 0.1:
        add("ToDtype(uint8, scale)", v2.ToDtype(torch.uint8, scale=True))
    if state != "pil" and rng.random() < 0.2:
        add("RandomErasing(p=0)", M.RandomErasing(p=0.0))
    return f"{'v1' if M is T else 'v2'}: " + ", ".join(names), M.Compose(steps)


class Preset:
    """A user's wrapper of a Compose, as torchvision's classification reference writes its
    presets: `.transforms` held and called."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        return self.transforms(img)


class Mirrored(Preset):
    """A wrapper that does more than call its Compose (it must not be looked through)."""

    def __call__(self, img):
        return self.transforms(img).flip(-1)


class Always(Preset):
    """A wrapper that draws whether to call its Compose, with a probability of 1."""

    def __call__(self, img):
        return self.transforms(img) if random.random() < 1.0 else img


def wrapped(rng, name, tf):
    """The composition, one case in four inside a user's wrapper of it."""
    if rng.random() >= 0.25:
        return name, tf
    kind = rng.choice([Preset, Mirrored, Always])
    return f"{kind.__name__}({name})", kind(tf)


def _levels(a, b, normalized):
    d = (a.double().nan_to_num() - b.double().nan_to_num()).abs()
    return d * 255 * (0.225 if normalized else 1) if a.dtype.is_floating_point else d


def _equal(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.nan_to_num(), b.nan_to_num())


def run(tf, normalized, show=False):
    return run_on(datasets.ImageFolder(ROOT, tf), normalized, show)


def run_on(ds, normalized, show=False, item=lambda x: x, backend=None, exact=None, rare=0.0):
    """The outcome of `ds`'s images (`item` of each: a tensor) through hpuload's loader
    (`backend`, BACKEND's by default) against the dataset's own, value by value; `exact`:
    within a level on every backend (the CPU backend's alone by default). `rare`: the
    fraction of values that may pass the tolerance in a case whose geometry hpuload states
    as one level off in a few values (OpenCV's cubic: the ops after it may widen that
    level), reported as "near"."""
    backend = backend or BACKEND
    exact = backend == "cpu" if exact is None else exact
    try:
        ref = [item(ds[i][0]) for i in range(len(ds))]
        again = [item(ds[i][0]) for i in range(len(ds))]
    except Exception as e:  # the transform refuses the composition: nothing to compare
        return "torch raises", f"{type(e).__name__}: {str(e)[:100]}"
    if not all(_equal(a, b) for a, b in zip(ref, again)):
        return "torch varies", "the dataset gives other values the second time"
    if not all(isinstance(r, torch.Tensor) for r in ref) or len({tuple(r.shape) for r in ref}) != 1:
        return "torch raises", "not one tensor shape (torch's collate would refuse it)"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            got = [x[0] for x, _ in DataLoader(ds, batch_size=1, shuffle=False, backend=backend)]
        except Exception as e:
            return "ERROR", f"{type(e).__name__}: {str(e)[:200]}"
    kinds = {type(x.message).__name__ for x in w}
    fell = "FallbackWarning" in kinds
    notes = sorted(str(x.message)[:100] for x in w if type(x.message).__name__ in ("FallbackWarning", "PythonTailWarning"))
    worst = 0.0
    beyond = total = 0
    for i, (a, b) in enumerate(zip(got, ref)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return ("fallback-BAD" if fell else "SILENT"), f"shape/dtype {tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} {b.dtype}"
        d = (a.double().nan_to_num() - b.double().nan_to_num()).abs()
        if a.dtype.is_floating_point:
            # In levels of the bytes: Normalize divided them by a std of about 0.225.
            d = d * 255 * (0.225 if normalized else 1)
        if show:
            print(f"sample {i} {tuple(a.shape)}: max {d.max().item():.3f}, >1 level: {int((d > 1).sum())}, where {[int(x) for x in (d == d.max()).nonzero()[0]]}")
        worst = max(worst, d.max().item())
        beyond += int((d > 1.01).sum())
        total += d.numel()
    # Half floats round differently in their last bit: a level is 1/255, their ulp near 1 is
    # 1/1024 (f16) and 1/128 (bf16).
    tol = {torch.bfloat16: 2.5, torch.float16: 1.01}.get(got[0].dtype, 1.01)
    if not exact:
        # The media engine decodes a JPEG scaled in the DCT and resamples in YCbCr: within its
        # PSNR floors, not bytes. A geometry or an op misread is tens of levels off on average.
        mean = sum(_levels(a, b, normalized).mean().item() for a, b in zip(got, ref)) / len(got)
        worst, tol = mean, 4.0
    what = "max" if exact else "mean"
    if worst <= tol:
        return ("fallback" if fell else ("tail" if "PythonTailWarning" in kinds else "same")), f"{what} {worst:.3f} {notes}"
    if exact and not fell and beyond <= rare * total:
        return "near", f"{what} {worst:.2f} in {beyond} of {total} values {notes}"
    return ("fallback-BAD" if fell else "SILENT"), f"{what} {worst:.2f} {notes}"


def arguments(default_cases):
    """`(cases, rng)` from the command line (`FOLDER [CASES] [SEED]`), the library warnings
    the searches meet silenced."""
    warnings.simplefilter("ignore")
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else default_cases
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    return cases, random.Random(seed)


def count(tally, i, outcome, detail, name, show=False, quiet=("same", "torch raises", "torch varies", "fallback")):
    """Adds `outcome` to `tally`, printing the case unless its outcome is a `quiet` one."""
    tally[outcome] = tally.get(outcome, 0) + 1
    if outcome not in quiet or show:
        print(f"{i:4d} {outcome:12s} {name}  ->  {detail}", flush=True)


def main():
    cases, rng = arguments(300)  # silences torchvision's note that antialias is ignored on PIL images
    tally = {}
    only = os.environ.get("ONLY")
    for i in range(cases):
        name, tf = wrapped(rng, *composition(rng))
        if only is not None and i != int(only):
            continue
        try:
            outcome, detail = run(tf, "Normalize" in name, show=only is not None)
        except Exception as e:
            outcome, detail = "HARNESS", f"{type(e).__name__}: {e}"
        count(tally, i, outcome, detail, name, show=only is not None, quiet=("same", "torch raises", "torch varies"))
    print(tally)


if __name__ == "__main__":
    main()
