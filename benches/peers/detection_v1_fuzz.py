"""Random configurations of torchvision's detection reference without `--use-v2` (python/tests/
reference_v1.py: its own `CocoDetection`, `ConvertCocoPolysToMask` and v1 transforms), some of
their steps replaced by forks, run through hpuload.torch.DataLoader and through torch's
DataLoader, compared sample by sample (session 95).

usage: python detection_v1_fuzz.py IMAGES [CASES=100] [SEED=0]
  IMAGES  a folder of PNG photos (transform_sweep_images.py's set); the case takes up to 8
Every draw is pinned so that torch's loader is the reference: the flip's probability 0 or 1,
`multiscale` with one shorter side, `lsj` with one scale small enough that the crop only pads.
In half of the cases one step is replaced by a fork of it (the class keeps the reference's
name): forks that do what the reference's step does must run natively and equal torch's;
forks that do otherwise must fall back. Prints one line per case that is not "same" or
"fallback", and a tally:
  same            natively, every image equal, every target's keys, dtypes and values equal
  fallback        hpuload warned and ran torch's loader (for a fork that differs)
  FALSE-FALLBACK  it fell back for the reference's own steps or a fork that does the same
  SILENT          natively but different: a bug
  ERROR           hpuload raised
  torch raises    torch's loader fails on the reference's own steps (not compared)
"""

import os
import random
import sys
import tempfile
import warnings
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "tests"))
import reference_v1 as ref  # noqa: E402
from test_detection import reference_collate, write_coco  # noqa: E402
from test_detection_v1 import FlipRewritten  # noqa: E402
from torchvision.transforms import functional as F  # noqa: E402

import hpuload.torch as ht  # noqa: E402


def _flip_boxes_only(self, image, target=None):
    if torch.rand(1) < self.p:
        image = F.hflip(image)
        width = F.get_dimensions(image)[2]
        target["boxes"][:, [0, 2]] = width - target["boxes"][:, [2, 0]]
    return image, target


def _flip_off_by_one(self, image, target=None):
    if torch.rand(1) < self.p:
        image = F.hflip(image)
        width = F.get_dimensions(image)[2]
        target["boxes"][:, [0, 2]] = width - 1 - target["boxes"][:, [2, 0]]
        target["masks"] = target["masks"].flip(-1)
    return image, target


def _shortest(nearest_masks: bool, antialias_off: bool):
    def forward(self, image, target=None):
        _, height, width = F.get_dimensions(image)
        short = self.min_size[torch.randint(len(self.min_size), (1,)).item()]
        ratio = min(short / min(height, width), self.max_size / max(height, width))
        new_height, new_width = int(height * ratio), int(width * ratio)
        kwargs = {"antialias": False} if antialias_off else {}
        image = F.resize(image, [new_height, new_width], interpolation=self.interpolation, **kwargs)
        target["boxes"][:, 0::2] *= new_width / width
        target["boxes"][:, 1::2] *= new_height / height
        mode = F.InterpolationMode.NEAREST if nearest_masks else F.InterpolationMode.BILINEAR
        target["masks"] = F.resize(target["masks"], [new_height, new_width], interpolation=mode)
        return image, target

    return forward


def _pad_masks_with(value: int):
    def _pad(self, image, target, padding):
        left, top, right, bottom = padding
        image = F.pad(image, [left, top, right, bottom], self.fill, self.padding_mode)
        target["boxes"][:, 0::2] += left
        target["boxes"][:, 1::2] += top
        target["masks"] = F.pad(target["masks"], [left, top, right, bottom], value, "constant")
        return image, target

    return _pad


#: (step's name, fork's name, {method: function}, whether it does what the reference's does)
FORKS = [
    ("RandomHorizontalFlip", "rewritten", {"forward": FlipRewritten.forward}, True),
    ("RandomHorizontalFlip", "boxes-only", {"forward": _flip_boxes_only}, False),
    ("RandomHorizontalFlip", "off-by-one", {"forward": _flip_off_by_one}, False),
    ("RandomShortestSize", "rewritten", {"forward": _shortest(True, False)}, True),
    ("RandomShortestSize", "bilinear-masks", {"forward": _shortest(False, False)}, False),
    ("FixedSizeCrop", "pads-masks-with-1", {"_pad": _pad_masks_with(1)}, False),
    ("FixedSizeCrop", "pads-masks-with-0", {"_pad": _pad_masks_with(0)}, True),
]


def preset(rng):
    """A pinned training preset of the reference and its description."""
    augmentation = rng.choice(["hflip", "multiscale", "lsj"])
    p = float(rng.choice([0.0, 1.0]))
    backend = rng.choice(["pil", "tensor"])
    kwargs = dict(data_augmentation=augmentation, hflip_prob=p, backend=backend)
    if augmentation == "multiscale":
        kwargs.update(min_size=(rng.choice([48, 64, 100]),), max_size=rng.choice([120, 200, 1000]))
    if augmentation == "lsj":
        scale = rng.choice([0.3, 0.5])
        kwargs.update(lsj_size=(128, 128), scale_range=(scale, scale))
    return ref.DetectionPresetTrain(**kwargs), f"{augmentation} p={p} {backend}"


def fork(rng, steps) -> tuple[str, bool]:
    """One of `steps` replaced by a fork of it; its description and whether it does the same."""
    options = [f for f in FORKS if any(type(s).__name__ == f[0] for s in steps)]
    if not options:
        return "", True
    name, label, methods, same = rng.choice(options)
    at = next(k for k, s in enumerate(steps) if type(s).__name__ == name)
    base = type(steps[at])
    steps[at].__class__ = type(name, (base,), dict(methods))
    return f" fork {name}:{label} ({'same' if same else 'differs'})", same


def equal(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(equal(a[k], b[k]) for k in a)
    return a == b


def run_case(rng, folder: Path, ann: Path) -> tuple[str, str]:
    tf, what = preset(rng)
    forked, same = fork(rng, tf.transforms.transforms) if rng.random() < 0.5 else ("", True)
    what += forked
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ours = ht.DataLoader(ref.get_coco(folder, ann, tf), batch_size=3, collate_fn=reference_collate, backend="cpu")
        except Exception as e:
            return "ERROR", f"{what}: {type(e).__name__}: {e}"
    theirs = torch.utils.data.DataLoader(ref.get_coco(folder, ann, tf), batch_size=3, collate_fn=reference_collate)
    try:
        want = list(theirs)
    except Exception as e:  # the reference's own steps fail (lsj's sequence fill on a tensor)
        return "torch raises", f"{what}: {type(e).__name__}: {str(e)[:100]}"
    fell = [str(w.message) for w in caught if type(w.message).__name__ == "FallbackWarning"]
    if fell:
        return ("fallback" if not same else "FALSE-FALLBACK"), f"{what}: {fell[0][:200]}"
    n = 0
    for (xa, ta), (xb, tb) in zip(ours, want, strict=True):
        for a, b, c, d in zip(xa, xb, ta, tb):
            if not equal(a, b) or not equal(c, d):
                return "SILENT", f"{what}: sample {n} differs"
            n += 1
    return "same", f"{what}: {n} samples"


def main() -> None:
    folder = Path(sys.argv[1])
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    files = sorted(folder.rglob("*.png"))[:8]
    tally = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        ann = write_coco(folder, files, Path(tmp) / "instances.json", seed=seed)
        for n in range(cases):
            rng = random.Random(seed * 100_003 + n)
            if os.environ.get("ONLY") not in (None, str(n)):
                continue
            verdict, what = run_case(rng, folder, ann)
            tally[verdict] += 1
            if verdict not in ("same", "fallback", "torch raises") or os.environ.get("ONLY"):
                print(f"case {n}: {verdict}: {what}", flush=True)
    print(dict(tally))


if __name__ == "__main__":
    main()
