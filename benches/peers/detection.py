"""torchvision's detection reference data pipeline, run with torch's DataLoader or with
hpuload's drop-in (only the import differs), timed over full passes: `CocoDetection` wrapped
for transforms v2, the images without boxes left out with a Subset (as the reference does for
training), the SSD preset (RandomPhotometricDistort, RandomZoomOut with the mean as fill,
RandomIoUCrop, RandomHorizontalFlip) with Resize((300, 300)) for static shapes, ToImage,
ToDtype(float, scale=True), ConvertBoundingBoxFormat, SanitizeBoundingBoxes, ToPureTensor, and
the reference's `collate_fn=lambda b: tuple(zip(*b))`.

With `--preset v2-multiscale`: the reference's `multiscale` augmentation (RandomShortestSize
of 480 to 800 capped at 1333, then the flip; each image its own size) in place of the SSD one.

`--copypaste` (with `v1-lsj`): the reference's `--use-copypaste` collate_fn, its
`SimpleCopyPaste` over each batch (restated in reference_v1.py).

`--masks` (with a v2 preset): the target keys of the reference's Mask R-CNN with `--use-v2`
(boxes, labels, image_id and masks), the annotations needing segmentation polygons.

With `--preset v1-ssd`, `v1-hflip`, `v1-multiscale` or `v1-lsj`: the reference as it runs without `--use-v2` (its own
`CocoDetection` subclass, `ConvertCocoPolysToMask` and v1 transforms, as written for the tests
in python/tests/reference_v1.py; no Resize: each image keeps its window's size, but for
`lsj`: ScaleJitter to 1024 with scales 0.1 to 2, FixedSizeCrop to 1024x1024 padded with the
mean, the flip), the annotations needing segmentation polygons (`coco_make.py --polygons`).

usage: python detection.py --loader torch|hpuload --data IMAGES --annotations JSON
       [--preset v2-ssd|v2-multiscale|v1-ssd|v1-hflip|v1-multiscale|v1-lsj] [--copypaste] [--masks] [--workers 2] [--batch 32] [--epochs 2]
Prints one JSON line: images/s and boxes/s over the epochs after the first (the first warms
caches and worker pools, as in peer_bench.py), and the annotation load time.
"""

import argparse
import json
import time
from collections import defaultdict

import torch
from torchvision import tv_tensors
from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
from torchvision.transforms import v2 as T


def ssd_preset():
    mean = (123.0, 117.0, 104.0)
    return T.Compose(
        [
            T.RandomPhotometricDistort(),
            T.RandomZoomOut(fill=defaultdict(lambda: mean, {tv_tensors.Mask: 0})),
            T.RandomIoUCrop(),
            T.RandomHorizontalFlip(p=0.5),
            T.Resize((300, 300)),
            T.ToImage(),
            T.ToDtype(torch.float, scale=True),
            T.ConvertBoundingBoxFormat(tv_tensors.BoundingBoxFormat.XYXY),
            T.SanitizeBoundingBoxes(),
            T.ToPureTensor(),
        ]
    )


def multiscale_preset():
    """The reference's `multiscale` augmentation with `--use-v2` (PIL backend)."""
    return T.Compose(
        [
            T.RandomShortestSize(min_size=(480, 512, 544, 576, 608, 640, 672, 704, 736, 768, 800), max_size=1333),
            T.RandomHorizontalFlip(p=0.5),
            T.ToImage(),
            T.ToDtype(torch.float, scale=True),
            T.ConvertBoundingBoxFormat(tv_tensors.BoundingBoxFormat.XYXY),
            T.SanitizeBoundingBoxes(),
            T.ToPureTensor(),
        ]
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loader", choices=["torch", "hpuload"], required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--annotations", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--copypaste", action="store_true", help="the reference's --use-copypaste collate (v1-lsj)")
    ap.add_argument("--masks", action="store_true", help="v2 presets: target keys with masks (Mask R-CNN with --use-v2)")
    ap.add_argument("--preset", choices=["v2-ssd", "v2-multiscale", "v1-ssd", "v1-hflip", "v1-multiscale", "v1-lsj"], default="v2-ssd")
    a = ap.parse_args()
    if a.loader == "torch":
        from torch.utils.data import DataLoader
    else:
        from hpuload.torch import DataLoader

    t0 = time.perf_counter()
    if a.preset.startswith("v2-"):
        preset = ssd_preset() if a.preset == "v2-ssd" else multiscale_preset()
        dataset = CocoDetection(a.data, a.annotations, transforms=preset)
        keys = ["boxes", "labels", "image_id"] + (["masks"] if a.masks else [])
        dataset = wrap_dataset_for_transforms_v2(dataset, target_keys=keys)
        keep = [i for i, image_id in enumerate(dataset.ids) if dataset.coco.getAnnIds(imgIds=image_id)]
        dataset = torch.utils.data.Subset(dataset, keep)
    else:
        import pathlib
        import sys

        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python" / "tests"))
        import reference_v1

        preset = reference_v1.DetectionPresetTrain(data_augmentation=a.preset.split("-")[1])
        dataset = reference_v1.get_coco(a.data, a.annotations, preset)
    collate = lambda batch: tuple(zip(*batch))  # noqa: E731
    if a.copypaste:
        if a.preset != "v1-lsj":
            raise SystemExit("--copypaste: the reference takes it with lsj only")
        collate = reference_v1.copypaste_collate_fn
    loader = DataLoader(
        dataset,
        batch_size=a.batch,
        shuffle=True,
        num_workers=a.workers,
        collate_fn=collate,
        persistent_workers=a.workers > 0,
    )
    setup = time.perf_counter() - t0
    images = boxes = 0
    start = None
    for epoch in range(a.epochs):
        if epoch == 1:
            start, images, boxes = time.perf_counter(), 0, 0
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        for batch_images, targets in loader:
            images += len(batch_images)
            boxes += sum(len(t["boxes"]) for t in targets)
    wall = time.perf_counter() - start
    print(
        json.dumps(
            {
                "loader": type(loader).__module__ + "." + type(loader).__name__,
                "images_per_sec": images / wall,
                "boxes_per_sec": boxes / wall,
                "images": images,
                "setup_sec": setup,
            }
        )
    )


if __name__ == "__main__":
    main()
