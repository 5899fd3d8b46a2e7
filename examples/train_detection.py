"""Train torchvision's SSDlite for a few steps on the CPU, fed by hpuload.

The data side is torchvision's detection reference as it is written (`CocoDetection` wrapped
for transforms v2, the SSD preset's RandomPhotometricDistort, RandomZoomOut, RandomIoUCrop,
RandomHorizontalFlip, SanitizeBoundingBoxes, and `collate_fn=lambda b: tuple(zip(*b))`), with
a fixed Resize so that every batch has one shape; the only hpuload line is the import of
DataLoader. Without --data/--annotations it makes a small COCO-format set from hpuload's
built-in images: each gets one to three coloured shapes pasted on it, and boxes around them.

    python examples/train_detection.py --steps 5
    python examples/train_detection.py --data coco/train2017 --annotations coco/annotations/instances_train2017.json
"""

import argparse
import json
import os
import random
import time
from collections import defaultdict

import torch
import torchvision
from torchvision import tv_tensors
from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
from torchvision.transforms import v2 as T

from hpuload.torch import DataLoader  # was: from torch.utils.data import DataLoader

# Shapes pasted on the built-in images, by category id.
SHAPES = {1: ("square", (230, 40, 40)), 2: ("disc", (40, 200, 60)), 3: ("bar", (40, 80, 230))}


def default_coco(images: int = 200) -> tuple[str, str]:
    """A COCO-format set made from hpuload's built-in images (written once, then reused)."""
    from PIL import Image, ImageDraw

    cache = os.environ.get("HPULOAD_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "hpuload")
    root = os.path.join(cache, f"example-coco-{images}")
    ann_file = os.path.join(root, "instances_train.json")
    if os.path.exists(ann_file):
        return os.path.join(root, "images"), ann_file
    base = os.path.join(root, "base")
    from hpuload._hpuload import cli

    if cli(["hpuload", "make-dataset", "--out", base, "--images", str(images)]) != 0:
        raise SystemExit("could not write the built-in dataset")
    rng = random.Random(0)
    out_dir = os.path.join(root, "images")
    os.makedirs(out_dir, exist_ok=True)
    coco = {"images": [], "annotations": [], "categories": [{"id": k, "name": v[0]} for k, v in SHAPES.items()]}
    files = sorted(os.path.join(d, n) for d, _, ns in os.walk(base) for n in ns if n.endswith(".jpg"))
    for image_id, path in enumerate(files, start=1):
        im = Image.open(path).convert("RGB")
        w, h = im.size
        draw = ImageDraw.Draw(im)
        for _ in range(rng.randint(1, 3)):
            cat = rng.choice(list(SHAPES))
            bw, bh = rng.uniform(0.15, 0.45) * w, rng.uniform(0.15, 0.45) * h
            if SHAPES[cat][0] == "bar":
                bh *= 0.35
            x, y = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
            box = [x, y, x + bw, y + bh]
            (draw.ellipse if SHAPES[cat][0] == "disc" else draw.rectangle)(box, fill=SHAPES[cat][1])
            coco["annotations"].append(
                {
                    "id": len(coco["annotations"]) + 1,
                    "image_id": image_id,
                    "category_id": cat,
                    "bbox": [round(x, 2), round(y, 2), round(bw, 2), round(bh, 2)],
                    "area": bw * bh,
                    "iscrowd": 0,
                }
            )
        name = f"{image_id:06d}.jpg"
        im.save(os.path.join(out_dir, name), quality=90)
        coco["images"].append({"id": image_id, "file_name": name, "width": w, "height": h})
    with open(ann_file + ".tmp", "w") as f:
        json.dump(coco, f)
    os.replace(ann_file + ".tmp", ann_file)
    return out_dir, ann_file


def ssd_transforms(size: int):
    """The detection reference's SSD training preset (v2, PIL backend) with Resize((size, size))."""
    mean = (123.0, 117.0, 104.0)
    return T.Compose(
        [
            T.RandomPhotometricDistort(),
            T.RandomZoomOut(fill=defaultdict(lambda: mean, {tv_tensors.Mask: 0})),
            T.RandomIoUCrop(),
            T.RandomHorizontalFlip(p=0.5),
            T.Resize((size, size)),
            T.ToImage(),
            T.ToDtype(torch.float, scale=True),
            T.ConvertBoundingBoxFormat(tv_tensors.BoundingBoxFormat.XYXY),
            T.SanitizeBoundingBoxes(),
            T.ToPureTensor(),
        ]
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="image folder (default: a set made from the built-in images)")
    p.add_argument("--annotations", help="instances_*.json for --data")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--size", type=int, default=320)
    p.add_argument("--lr", type=float, default=0.01)
    args = p.parse_args()
    if bool(args.data) != bool(args.annotations):
        p.error("give --data and --annotations together")
    images, annotations = (args.data, args.annotations) if args.data else default_coco()

    dataset = CocoDetection(images, annotations, transforms=ssd_transforms(args.size))
    dataset = wrap_dataset_for_transforms_v2(dataset, target_keys=["boxes", "labels", "image_id"])
    # As the reference does for training: only images with at least one box.
    keep = [i for i, image_id in enumerate(dataset.ids) if dataset.coco.getAnnIds(imgIds=image_id)]
    dataset = torch.utils.data.Subset(dataset, keep)
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        collate_fn=lambda batch: tuple(zip(*batch)),
        drop_last=True,
    )
    print(f"loader: {type(loader).__module__}.{type(loader).__name__}, {len(loader)} batches per epoch")

    num_classes = max(c["id"] for c in dataset.dataset.coco.dataset["categories"]) + 1
    model = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=num_classes
    )
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=4e-5)

    step, start = 0, time.perf_counter()
    while step < args.steps:
        for images_batch, targets in loader:
            targets = [{"boxes": t["boxes"], "labels": t["labels"]} for t in targets]
            losses = model(list(images_batch), targets)
            loss = sum(losses.values())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            boxes = sum(len(t["boxes"]) for t in targets)
            parts = ", ".join(f"{k} {v.item():.3f}" for k, v in losses.items())
            print(f"step {step}: loss {loss.item():.3f} ({parts}), {boxes} boxes")
            if step == args.steps:
                break
    elapsed = time.perf_counter() - start
    print(f"{step} steps of batch {args.batch_size} in {elapsed:.1f}s")


if __name__ == "__main__":
    main()
