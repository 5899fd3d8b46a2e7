"""torchvision's segmentation reference data pipeline (`--dataset voc`, without `--use-v2`), run
with torch's DataLoader or with hpuload's drop-in (only the import differs), timed over full
passes: torchvision's `VOCSegmentation` with the reference's `SegmentationPresetTrain`
(RandomResize of the shorter side from half to twice `base_size`, RandomHorizontalFlip(0.5),
RandomCrop after padding to `crop_size`, PILToTensor, ToDtype(float, scale=True), Normalize),
as restated in python/tests/reference_segmentation.py, and its `collate_fn` (`cat_list`).

`--make ROOT` first writes a VOC 2012 tree at ROOT from the photos in `--data` (each photo's
mask a palette PNG of its size: rectangles of classes 1-20 on 0, a line of 255), then exits.

usage: python segmentation.py --make VOCROOT --data PHOTOS [--images 2000]
       python segmentation.py --loader torch|hpuload --root VOCROOT [--workers 2] [--batch 8]
           [--epochs 3] [--base 520] [--crop 480] [--preset train|eval]
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
        mask = np.zeros((h, w), np.uint8)
        for _ in range(5):
            y, x = rng.integers(0, h), rng.integers(0, w)
            mask[y : y + rng.integers(1, h), x : x + rng.integers(1, w)] = rng.integers(1, 21)
        mask[rng.integers(0, h), :] = 255
        m = Image.fromarray(mask, mode="L").convert("P")
        m.putpalette(palette)
        m.save(voc / "SegmentationClass" / f"{name}.png")
        names.append(name)
    (voc / "ImageSets" / "Segmentation" / "train.txt").write_text("\n".join(names) + "\n")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--make", type=pathlib.Path)
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

    if a.preset == "train":
        preset = ref.SegmentationPresetTrain(base_size=a.base, crop_size=a.crop)
    else:  # the reference evaluates with batches of one, not shuffled
        preset = ref.SegmentationPresetEval(base_size=a.base)
    dataset = torchvision.datasets.VOCSegmentation(a.root, year="2012", image_set="train", transforms=preset)
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
