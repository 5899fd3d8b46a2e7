"""torchvision's segmentation reference data pipeline (`--dataset voc` or `coco`), run
with torch's DataLoader or with hpuload's drop-in (only the import differs), timed over full
passes: torchvision's `VOCSegmentation` with the reference's `SegmentationPresetTrain`
(RandomResize of the shorter side from half to twice `base_size`, RandomHorizontalFlip(0.5),
RandomCrop after padding to `crop_size`, PILToTensor, ToDtype(float, scale=True), Normalize),
as restated in python/tests/reference_segmentation.py, and its `collate_fn` (`cat_list`).

`--dataset coco` runs the reference's default dataset instead: torchvision's `CocoDetection`
of `ROOT/train2017` with the reference's `FilterAndRemapCocoCategories(CAT_LIST)` and
`ConvertCocoPolysToMask` before the preset, the training set in the `Subset` of images with
more than 1000 pixels of kept annotations (`get_coco` in reference_segmentation.py); with
`--use-v2`, the reference's `--use-v2` path (the set wrapped for transforms v2,
`CocoDetectionToVOCSegmentation`, the v2 presets: `get_coco_v2`).

`--make ROOT` first writes a VOC 2012 tree at ROOT from the photos in `--data` (each photo's
mask a palette PNG of its size: rectangles of classes 1-20 on 0, a line of 255), then exits;
`--make-sbd ROOT` writes an SBD tree (`img/`, `cls/*.mat`, `train.txt`: the reference's
`--dataset voc_aug`, read by `--dataset sbd`), then exits; `--make-coco ROOT` writes a COCO tree (`train2017/`, `annotations/instances_train2017.json`:
2-12 objects a photo, each one or two polygons of 8-30 vertices, half of them people, the
rest of COCO's 80 categories), then exits.

usage: python segmentation.py --make VOCROOT --data PHOTOS [--images 2000]
       python segmentation.py --make-coco COCOROOT --data PHOTOS [--images 2000]
       python segmentation.py --make-sbd SBDROOT --data PHOTOS [--images 2000]
       python segmentation.py --loader torch|hpuload --root ROOT [--dataset voc|coco|sbd]
           [--use-v2] [--workers 2] [--batch 8] [--epochs 3] [--base 520] [--crop 480]
           [--preset train|eval]
`--preset eval` runs the reference's evaluation preset instead (each image its own size;
give `--batch 1`, as the reference's evaluation loader has).
Prints one JSON line: images/s over the epochs after the first (the first warms caches and
worker pools, as in peer_bench.py).
"""

import argparse
import json
import pathlib
import sys
import time


def _rectangles(rng, w: int, h: int):
    """A `[h, w]` uint8 mask of five rectangles of classes 1-20 on 0."""
    import numpy as np

    mask = np.zeros((h, w), np.uint8)
    for _ in range(5):
        y, x = rng.integers(0, h), rng.integers(0, w)
        mask[y : y + rng.integers(1, h), x : x + rng.integers(1, w)] = rng.integers(1, 21)
    return mask


def make(root: pathlib.Path, photos: pathlib.Path, count: int) -> None:
    import numpy as np
    from PIL import Image

    voc = root / "VOCdevkit" / "VOC2012"
    for d in ("JPEGImages", "SegmentationClass", "ImageSets/Segmentation"):
        (voc / d).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    palette = list(rng.integers(0, 256, 768).astype(int))
    names = []
    for k, photo in enumerate(sorted(photos.rglob("*.jpg"))[:count]):
        name = f"2008_{k:06d}"
        (voc / "JPEGImages" / f"{name}.jpg").write_bytes(photo.read_bytes())
        w, h = Image.open(photo).size
        mask = _rectangles(rng, w, h)
        mask[rng.integers(0, h), :] = 255
        m = Image.fromarray(mask, mode="L").convert("P")
        m.putpalette(palette)
        m.save(voc / "SegmentationClass" / f"{name}.png")
        names.append(name)
    (voc / "ImageSets" / "Segmentation" / "train.txt").write_text("\n".join(names) + "\n")


def make_sbd(root: pathlib.Path, photos: pathlib.Path, count: int) -> None:
    """An SBD tree (`img/*.jpg`, `cls/*.mat` with each mask in `GTcls.Segmentation`,
    `train.txt`) of the photos, masks as `make` draws them (without the 255 line)."""
    import numpy as np
    import scipy.io
    from PIL import Image

    for d in ("img", "cls"):
        (root / d).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    names = []
    for k, photo in enumerate(sorted(photos.rglob("*.jpg"))[:count]):
        name = f"2008_{k:06d}"
        (root / "img" / f"{name}.jpg").write_bytes(photo.read_bytes())
        w, h = Image.open(photo).size
        mask = _rectangles(rng, w, h)
        gt = np.empty((1, 1), dtype=[("Boundaries", "O"), ("Segmentation", "O"), ("CategoriesPresent", "O")])
        boundaries = np.empty((20, 1), dtype=object)
        for c in range(20):
            boundaries[c, 0] = np.zeros((1, 1), np.uint8)
        gt[0, 0] = (boundaries, mask, np.unique(mask[mask > 0]).astype(np.uint8).reshape(-1, 1))
        scipy.io.savemat(root / "cls" / f"{name}.mat", {"GTcls": gt}, do_compression=True)
        names.append(name)
    (root / "train.txt").write_text("\n".join(names) + "\n")


def make_coco(root: pathlib.Path, photos: pathlib.Path, count: int) -> None:
    import math

    import numpy as np
    from PIL import Image

    (root / "train2017").mkdir(parents=True, exist_ok=True)
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    # COCO's 80 category ids (1-90 with gaps).
    ids = [i for i in range(1, 91) if i not in (12, 26, 29, 30, 45, 66, 68, 69, 71, 83)]
    images, anns = [], []
    for k, photo in enumerate(sorted(photos.rglob("*.jpg"))[:count]):
        name = f"{k:012d}.jpg"
        (root / "train2017" / name).write_bytes(photo.read_bytes())
        w, h = Image.open(photo).size
        images.append({"id": k + 1, "file_name": name, "width": w, "height": h})
        for _ in range(int(rng.integers(2, 13))):
            cat = 1 if rng.random() < 0.5 else int(rng.choice(ids))
            parts, area = [], 0.0
            for _ in range(1 if rng.random() < 0.8 else 2):
                cx, cy = rng.uniform(0, w), rng.uniform(0, h)
                r = rng.uniform(0.03, 0.3) * min(w, h)
                n = int(rng.integers(8, 31))
                pts = []
                for j in range(n):
                    t = 2 * math.pi * j / n
                    rr = r * rng.uniform(0.5, 1.0)
                    pts += [float(np.clip(cx + rr * math.cos(t), 0, w)), float(np.clip(cy + rr * math.sin(t), 0, h))]
                xs, ys = pts[0::2], pts[1::2]
                area += abs(sum(xs[i] * ys[i - 1] - xs[i - 1] * ys[i] for i in range(n))) / 2
                parts.append(pts)
            x0, y0 = min(min(p[0::2]) for p in parts), min(min(p[1::2]) for p in parts)
            x1, y1 = max(max(p[0::2]) for p in parts), max(max(p[1::2]) for p in parts)
            anns.append({"id": len(anns) + 1, "image_id": k + 1, "category_id": cat, "iscrowd": 0,
                         "segmentation": parts, "area": area, "bbox": [x0, y0, x1 - x0, y1 - y0]})
    cats = [{"id": i, "name": str(i)} for i in ids]
    text = json.dumps({"images": images, "annotations": anns, "categories": cats})
    (root / "annotations" / "instances_train2017.json").write_text(text)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--make", type=pathlib.Path)
    p.add_argument("--make-coco", type=pathlib.Path)
    p.add_argument("--make-sbd", type=pathlib.Path)
    p.add_argument("--dataset", choices=("voc", "coco", "sbd"), default="voc")
    p.add_argument("--use-v2", action="store_true")
    p.add_argument("--data", type=pathlib.Path)
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--loader", choices=("torch", "hpuload"))
    p.add_argument("--root", type=pathlib.Path)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--preset", choices=("train", "eval"), default="train")
    p.add_argument("--base", type=int, default=520)
    p.add_argument("--crop", type=int, default=480)
    a = p.parse_args()
    if a.make is not None:
        make(a.make, a.data, a.images)
        return
    if a.make_coco is not None:
        make_coco(a.make_coco, a.data, a.images)
        return
    if a.make_sbd is not None:
        make_sbd(a.make_sbd, a.data, a.images)
        return

    import torch
    import torchvision

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python" / "tests"))
    import reference_segmentation as ref

    if a.loader == "hpuload":
        import warnings

        from hpuload.torch import DataLoader, FallbackWarning

        warnings.simplefilter("error", FallbackWarning)  # measured natively or not at all
    else:
        from torch.utils.data import DataLoader

    if a.use_v2:
        train = a.preset == "train"
        preset = ref.preset_train_v2(a.base, a.crop) if train else ref.preset_eval_v2(a.base)
    elif a.preset == "train":
        preset = ref.SegmentationPresetTrain(base_size=a.base, crop_size=a.crop)
    else:  # the reference evaluates with batches of one, not shuffled
        preset = ref.SegmentationPresetEval(base_size=a.base)
    if a.dataset == "voc":
        dataset = torchvision.datasets.VOCSegmentation(a.root, year="2012", image_set="train", transforms=preset)
    elif a.dataset == "sbd":
        dataset = torchvision.datasets.SBDataset(a.root, image_set="train", mode="segmentation", transforms=preset)
    else:
        annotations = a.root / "annotations" / "instances_train2017.json"
        get = ref.get_coco_v2 if a.use_v2 else ref.get_coco
        dataset = get(a.root / "train2017", annotations, preset, train=a.preset == "train")
    loader = DataLoader(
        dataset,
        batch_size=a.batch,
        shuffle=a.preset == "train",
        num_workers=a.workers,
        collate_fn=ref.collate_fn,
        drop_last=a.preset == "train",
    )
    rates = []
    for epoch in range(a.epochs):
        start, n = time.perf_counter(), 0
        for images, masks in loader:
            n += images.shape[0]
        if epoch > 0:
            rates.append(n / (time.perf_counter() - start))
    torch.set_num_threads(1)
    median = sorted(rates)[len(rates) // 2]
    print(json.dumps({"loader": a.loader, "class": type(loader).__name__, "images_per_s": median, "rates": rates}))


if __name__ == "__main__":
    main()
