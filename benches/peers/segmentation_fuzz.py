"""Random configurations of torchvision's segmentation reference (python/tests/
reference_segmentation.py) over random small image trees, run through hpuload.torch.DataLoader
and compared with what the reference's own steps give, sample by sample. The random
counterpart of test_segmentation.py's fixed cases (session 95).

usage: python segmentation_fuzz.py IMAGES [CASES=100] [SEED=0]
  IMAGES  a folder of JPEG photos (the reference corpus); each case takes 6 of them, each
          scaled to a random size (from 1 pixel a side to 3x the crop, aspect ratios to 1:9),
          saved as JPEG or PNG
A case: VOC (palette or grey masks), Cityscapes (grey labelIds), or the COCO set (random polygons, overlaps, crowds,
categories kept and dropped); the training preset (random base and crop sizes, flip
probability 0, 0.5 or 1; in a third of them one step replaced by a fork of it, from forks that
do what the reference's step does and forks that do not) or the evaluation preset; a random batch size, shuffle and worker
count; one training case in five of VOC or Cityscapes has a mask file cut short, which must
be named in a SkippedSampleWarning and its sample replaced. Training samples are checked against the user's own steps run with their draws forced
to hpuload's drawn plan (`random.randint`, `random.random`, `RandomCrop.get_params` patched
for the call), evaluation batches against torch's DataLoader with the reference's collate_fn.
Prints one line per case that is not "same" or "fallback", and a tally:
  same      every mask equal, every image within 1e-5
  fallback  hpuload warned and ran torch's loader
  FALSE-FALLBACK  it did so for a fork of a step that does what the reference's does
  SILENT    different without a FallbackWarning: a bug
  ERROR     hpuload raised
env ONLY=N: run case N alone and print how it ran; FALLBACKS=1: print the fallbacks too.
"""

import json
import os
import random
import sys
import tempfile
import traceback
import warnings
from collections import Counter
from pathlib import Path
from unittest import mock

import numpy as np
import torch
import torchvision
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "tests"))
import reference_segmentation as ref  # noqa: E402

from hpuload.torch import DataLoader, FallbackWarning  # noqa: E402


def images(rng, photos, folder: Path, crop: int, kind: str):
    """Six photos at random sizes under `folder` (`kind`: jpg or png), their paths and sizes."""
    out = []
    for k in range(6):
        photo = Image.open(photos[int(rng.integers(len(photos)))]).convert("RGB")
        side = int(rng.choice([1, 2, 7, crop // 2 + 1, crop, crop + 1, 2 * crop, 3 * crop]))
        aspect = float(rng.choice([1.0, 0.75, 1.5, 1 / 9, 9.0, 0.5]))
        w, h = max(1, int(side * aspect)), max(1, side)
        path = folder / f"{k:06d}.{kind}"
        photo.resize((w, h), Image.BILINEAR).save(path, **({"quality": 90} if kind == "jpg" else {}))
        out.append((path, (w, h)))
    return out


def blobs(rng, w: int, h: int) -> np.ndarray:
    mask = np.zeros((h, w), np.uint8)
    for _ in range(int(rng.integers(0, 6))):
        y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
        mask[y : y + int(rng.integers(1, h + 1)), x : x + int(rng.integers(1, w + 1))] = int(rng.integers(1, 21))
    if rng.random() < 0.5:
        mask[int(rng.integers(0, h)), :] = 255
    return mask


def voc_tree(rng, photos, root: Path, crop: int):
    voc = root / "VOCdevkit" / "VOC2012"
    for d in ("JPEGImages", "SegmentationClass", "ImageSets/Segmentation"):
        (voc / d).mkdir(parents=True)
    palette = rng.random() < 0.5
    names = []
    for path, (w, h) in images(rng, photos, voc / "JPEGImages", crop, "jpg"):
        mask = Image.fromarray(blobs(rng, w, h), mode="L")
        if palette:
            mask = mask.convert("P")
            mask.putpalette([int(v) for v in rng.integers(0, 256, 768)])
        mask.save(voc / "SegmentationClass" / f"{path.stem}.png")
        names.append(path.stem)
    (voc / "ImageSets" / "Segmentation" / "train.txt").write_text("\n".join(names) + "\n")
    return lambda transforms: torchvision.datasets.VOCSegmentation(root, year="2012", image_set="train", transforms=transforms)


def cityscapes_tree(rng, photos, root: Path, crop: int):
    """A Cityscapes tree (`leftImg8bit`, `gtFine` labelIds) of random images and grey masks."""
    images_dir, masks_dir = root / "leftImg8bit" / "train" / "city", root / "gtFine" / "train" / "city"
    images_dir.mkdir(parents=True)
    masks_dir.mkdir(parents=True)
    for path, (w, h) in images(rng, photos, images_dir, crop, "png"):
        stem = path.stem
        path.rename(images_dir / f"city_{stem}_000019_leftImg8bit.png")
        Image.fromarray(blobs(rng, w, h) % 34, mode="L").save(masks_dir / f"city_{stem}_000019_gtFine_labelIds.png")
    return lambda transforms: torchvision.datasets.Cityscapes(root, split="train", target_type="semantic", transforms=transforms)


def damage(rng, dataset) -> str:
    """One mask file of a VOC or Cityscapes set cut short; its path."""
    files = dataset.masks if hasattr(dataset, "masks") else [t[0] for t in dataset.targets]
    path = Path(files[int(rng.integers(len(files)))])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    return str(path)


def coco_tree(rng, photos, root: Path, crop: int):
    listed, anns = [], []
    kind = str(rng.choice(["jpg", "png"]))
    for k, (path, (w, h)) in enumerate(images(rng, photos, root, crop, kind)):
        image_id = 5 * k + 1
        listed.append({"id": image_id, "file_name": path.name, "width": w, "height": h})
        for _ in range(int(rng.integers(0, 5))):
            x, y = float(rng.uniform(0, w)), float(rng.uniform(0, h))
            poly = [x, y, x + float(rng.uniform(0, w)), y, x + float(rng.uniform(0, w)), y + float(rng.uniform(0, h)), x, y + float(rng.uniform(0, h))]
            cat = int(rng.choice([5, 2, 16, 44, 72, 1, 90, 13]))
            anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": cat, "iscrowd": 0,
                         "segmentation": [poly], "area": float(rng.uniform(0, 2 * w * h)), "bbox": [0, 0, 1, 1]})
        if rng.random() < 0.2:
            runs = [w * h // 3, w * h // 4]
            anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": 1, "iscrowd": 1,
                         "segmentation": {"counts": runs + [w * h - sum(runs)], "size": [h, w]},
                         "area": float(w * h), "bbox": [0, 0, 1, 1]})
    cats = [{"id": c, "name": str(c)} for c in sorted({a["category_id"] for a in anns} | {1})]
    ann_file = root / "instances.json"
    ann_file.write_text(json.dumps({"images": listed, "annotations": anns, "categories": cats}))
    return lambda transforms, train, v2=False: (ref.get_coco_v2 if v2 else ref.get_coco)(root, ann_file, transforms, train=train)


def image_path(dataset, index: int) -> str:
    """The file of the dataset's sample `index` (through a Subset and a v2 wrapper)."""
    inner, at = (dataset.dataset, dataset.indices[index]) if isinstance(dataset, torch.utils.data.Subset) else (dataset, index)
    inner = getattr(inner, "_dataset", inner)
    if hasattr(inner, "images"):
        return inner.images[at]
    return os.path.join(inner.root, inner.coco.imgs[inner.ids[at]]["file_name"])


#: Whether the running case is the `--use-v2` set.
USE_V2 = [False]


def forced(dataset, index: int, drawn: dict):
    """The dataset's sample `index` with the reference's draws forced to hpuload's `drawn`."""
    (rh, rw), (top, left) = drawn["resized"], drawn["at"]
    # The size RandomResize draws is the shorter side of the resize it makes.
    w, h = Image.open(image_path(dataset, index)).size
    size = rh if h <= w else rw
    if USE_V2[0]:
        return forced_v2(dataset, index, drawn, size)
    flip = 0.0 if drawn.get("hflip") else 0.999999
    with mock.patch.object(random, "randint", lambda a, b: size), mock.patch.object(random, "random", lambda: flip), \
            mock.patch.object(torchvision.transforms.RandomCrop, "get_params", lambda img, out: (top, left, out[0], out[1])):
        return dataset[index]


def v2_steps(transforms) -> list:
    inner = getattr(transforms, "transforms", None)
    return [s for t in inner for s in v2_steps(t)] if isinstance(inner, list) else [transforms]


def forced_v2(dataset, index: int, drawn: dict, size: int):
    """`forced` for the `--use-v2` set: v2's own steps made to draw hpuload's plan (the
    resize's size, the flip's probability 0 or 1, the crop's offsets) for the call."""
    from torchvision.transforms import v2

    (top, left) = drawn["at"]
    steps = v2_steps(dataset.dataset.transforms)
    saved = []
    try:
        for t in steps:
            if type(t) is v2.RandomResize:
                saved.append((t, "make_params", None))
                t.make_params = lambda flat: {"size": [size]}
            elif type(t) is v2.RandomHorizontalFlip:
                saved.append((t, "p", t.p))
                t.p = 1.0 if drawn.get("hflip") else 0.0
            elif type(t) is v2.RandomCrop:
                original = t.make_params
                saved.append((t, "make_params", None))
                t.make_params = lambda flat, original=original: {**original(flat), "top": top, "left": left}
        return dataset[index]
    finally:
        for t, name, value in saved:
            if value is None:
                del t.__dict__[name]
            else:
                setattr(t, name, value)


# Forks of the reference's steps, as users' copies of its transforms.py edit them: some do
# what the reference's do (hpuload must take them), the others must fall back.
def _named(name: str, call):
    return type(name, (), {"__call__": call})


def _fork_resize(interpolation, mask_interpolation):
    from torchvision.transforms import InterpolationMode as IM
    from torchvision.transforms import functional as F

    def call(self, image, target):
        size = random.randint(self.min_size, self.max_size)
        return F.resize(image, size, interpolation=getattr(IM, interpolation)), F.resize(target, size, interpolation=getattr(IM, mask_interpolation))

    return call


def _fork_crop(mask_fill):
    from torchvision.transforms import functional as F

    def call(self, image, target):
        w, h = image.size
        pad = [0, 0, max(self.size - w, 0), max(self.size - h, 0)]
        if any(pad):
            image, target = F.pad(image, pad, fill=0), F.pad(target, pad, fill=mask_fill)
        top, left, hh, ww = torchvision.transforms.RandomCrop.get_params(image, (self.size, self.size))
        return F.crop(image, top, left, hh, ww), F.crop(target, top, left, hh, ww)

    return call


def _fork_flip(mask_too):
    from torchvision.transforms import functional as F

    def call(self, image, target):
        if random.random() < self.flip_prob:
            return F.hflip(image), (F.hflip(target) if mask_too else target)
        return image, target

    return call


#: (step name, fork's name, its __call__, whether it does what the reference's does)
FORKS = [
    ("RandomResize", "bilinear", _fork_resize("BILINEAR", "NEAREST"), True),
    ("RandomResize", "bicubic", _fork_resize("BICUBIC", "NEAREST"), False),
    ("RandomResize", "mask-bilinear", _fork_resize("BILINEAR", "BILINEAR"), False),
    ("RandomCrop", "padded-rewritten", _fork_crop(255), True),
    ("RandomCrop", "mask-fill-0", _fork_crop(0), False),
    ("RandomHorizontalFlip", "rewritten", _fork_flip(True), True),
    ("RandomHorizontalFlip", "image-only", _fork_flip(False), False),
]


def fork(rng, transforms) -> str:
    """One step of the (v1) preset replaced by a random fork of it; its description."""
    steps = transforms.transforms.transforms
    name, label, call, same = FORKS[int(rng.integers(len(FORKS)))]
    at = next((k for k, t in enumerate(steps) if type(t).__name__ == name), None)
    if at is None:
        return ""
    forked = _named(name, call)()
    forked.__dict__.update(vars(steps[at]))
    steps[at] = forked
    return f" fork {name}:{label} ({'same' if same else 'differs'})"


def run_case(n: int, rng, photos, tmp: Path) -> tuple[str, str]:
    crop = int(rng.choice([8, 17, 32, 48, 63]))
    base = int(rng.choice([4, 9, 20, 40, 64]))
    train = rng.random() < 0.7
    hflip = float(rng.choice([0.0, 0.5, 1.0]))
    preset = ref.SegmentationPresetTrain(base_size=base, crop_size=crop, hflip_prob=hflip) if train else ref.SegmentationPresetEval(base_size=base)
    forked = fork(rng, preset) if train and rng.random() < 0.3 else ""
    root = tmp / f"case{n}"
    root.mkdir()
    coco = rng.random() < 0.6
    kind = "coco" if coco else "voc"
    USE_V2[0] = coco and rng.random() < 0.5
    if USE_V2[0]:
        preset, forked = (ref.preset_train_v2(base, crop, hflip_prob=hflip) if train else ref.preset_eval_v2(base)), ""
        dataset = coco_tree(rng, photos, root, crop)(preset, train, v2=True)
    elif coco:
        make = coco_tree(rng, photos, root, crop)
        dataset = make(preset, train)
    elif rng.random() < 0.3:
        dataset, kind = cityscapes_tree(rng, photos, root, crop)(preset), "cityscapes"
    else:
        dataset = voc_tree(rng, photos, root, crop)(preset)
    damaged = damage(rng, dataset) if train and not coco and rng.random() < 0.2 else None
    batch = int(rng.integers(1, 5))
    kwargs = dict(batch_size=batch, shuffle=bool(rng.random() < 0.5), num_workers=int(rng.choice([0, 2])), backend="cpu", seed=int(rng.integers(1000)))
    what = f"{kind}{' v2' if USE_V2[0] else ''}{forked}{' damaged' if damaged else ''} {'train' if train else 'eval'} base={base} crop={crop} hflip={hflip} {kwargs}"
    if len(dataset) == 0:
        return "same", what
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FallbackWarning)
        try:
            loader = DataLoader(dataset, collate_fn=None if train else ref.collate_fn, **{k: v for k, v in kwargs.items()})
        except Exception as e:
            return "ERROR", f"{what}: {type(e).__name__}: {e}"
    if any(issubclass(w.category, FallbackWarning) for w in caught):
        verdict = "FALSE-FALLBACK" if "(same)" in forked else "fallback"
        return verdict, f"{what}: {[str(w.message) for w in caught][0]}"
    checked = 0
    skipped = []
    try:
        if train:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                batches = [[(x, m, list(loader.last_indices)) for x, m in loader] for _ in range(2)]
            skipped = [str(w.message) for w in seen if type(w.message).__name__ == "SkippedSampleWarning"]
            if damaged and not all(damaged in m for m in skipped) or bool(damaged) != bool(skipped):
                return "SILENT", f"{what}: damaged {damaged}, warned {skipped[:2]}"
            for epoch in range(2):
                # A replacement by the dataset's own sample has its own draws: not compared.
                own = {int(m.split("the dataset's own sample ")[1].split(".")[0]) for m in skipped if "dataset's own" in m}
                for images_, masks, indices in batches[epoch]:
                    for k, index in enumerate(indices):
                        if index in own:
                            continue
                        w, h = Image.open(image_path(dataset, index)).size
                        drawn = json.loads(loader._core.sample_plan(epoch, index, w, h))["resized_crop"]
                        want_x, want_m = forced(dataset, index, drawn)
                        if not torch.equal(masks[k], want_m):
                            return "SILENT", f"{what}: mask of {index} (epoch {epoch}, {drawn})"
                        if (images_[k] - want_x).abs().max() > 1e-5:
                            return "SILENT", f"{what}: image of {index} (epoch {epoch}, {drawn})"
                        checked += 1
        else:
            theirs = torch.utils.data.DataLoader(dataset, batch_size=batch, collate_fn=ref.collate_fn)
            ours = DataLoader(dataset, collate_fn=ref.collate_fn, batch_size=batch, backend="cpu")
            for (xa, ma), (xb, mb) in zip(ours, theirs, strict=True):
                if xa.shape != xb.shape or not torch.equal(ma, mb) or (xa - xb).abs().max() > 1e-5:
                    return "SILENT", f"{what}: eval batch differs"
                checked += len(xa)
    except Exception as e:
        return "ERROR", f"{what}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
    return "same", f"{what}: {checked} samples"


def main() -> None:
    photos = sorted(Path(sys.argv[1]).rglob("*.jpg"))
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    only = os.environ.get("ONLY")
    tally = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(cases):
            rng = np.random.default_rng([seed, n])
            if only is not None and n != int(only):
                continue
            verdict, what = run_case(n, rng, photos, Path(tmp))
            tally[verdict] += 1
            if verdict not in ("same", "fallback") or only is not None or (verdict == "fallback" and os.environ.get("FALLBACKS")):
                print(f"case {n}: {verdict}: {what}", flush=True)
    print(dict(tally))


if __name__ == "__main__":
    main()
