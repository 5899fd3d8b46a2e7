#!/usr/bin/env python3
"""Throughput of a peer data loader on an ImageFolder, with hpuload bench's pipelines.

    python peer_bench.py --loader torch|hpuload|dali|ffcv --data DIR [--pipeline train|eval]
                         [--workers 2] [--batch 256] [--epochs 3] [--beton FILE] [--pass-only]

`hpuload` is hpuload's Python drop-in (`hpuload.torch.DataLoader`) given exactly the torch
loader's arguments and torchvision transforms: what a user gets by changing the import line.
`--pass-only` makes the torch and hpuload loops `for x, y in loader: pass` on the float32
batches (no bfloat16 cast).

train: RandomResizedCrop(224) + random flip + normalize, 16-bit float CHW (hpuload's
resnet50_train); eval: Resize(256) + CenterCrop(224) + normalize (resnet50_eval); whole:
ToTensor + Normalize alone, and short224: Resize(224) before them, over a folder of images of
one size (torch and hpuload only).
One warm-up epoch, then --epochs measured ones. The last stdout line is one JSON object:
{"loader", "pipeline", "images_per_sec" (median of measured epochs), "per_epoch", ...}.
"""
import argparse
import json
import math
import statistics
import sys
import time

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def torch_epochs(args, DataLoader=None):
    """PyTorch DataLoader over torchvision's ImageFolder (PIL decode, v1 transforms)."""
    import torch
    from torchvision import datasets, transforms as T

    DataLoader = DataLoader or torch.utils.data.DataLoader

    if args.pipeline == "train":
        ops = [T.RandomResizedCrop(224), T.RandomHorizontalFlip()]
    elif args.pipeline == "whole":
        ops = []  # the images as they are (a folder made one size beforehand)
    elif args.pipeline == "short224":
        ops = [T.Resize(224)]  # the shorter side to 224, no crop (a folder made one size)
    else:
        ops = [T.Resize(256), T.CenterCrop(224)]
    tf = T.Compose(ops + [T.ToTensor(), T.Normalize(MEAN, STD)])
    data = datasets.ImageFolder(args.data, transform=tf)
    loader = DataLoader(
        data, batch_size=args.batch, shuffle=True, num_workers=args.workers,
        pin_memory=True, persistent_workers=args.workers > 0, drop_last=False)

    def epoch():
        for images, _ in loader:
            if args.pass_only:
                yield len(images)
            else:
                # The cast stands in for the device copy; hpuload outputs 16-bit floats too.
                yield len(images.to(torch.bfloat16))
    return epoch


def hpuload_epochs(args):
    """hpuload's drop-in for torch's DataLoader, with torch's arguments unchanged."""
    from hpuload.torch import DataLoader

    return torch_epochs(args, DataLoader)


def dali_epochs(args):
    """NVIDIA DALI's CPU pipeline; the train pipeline decodes only the crop (ROI decode)."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=args.batch, num_threads=args.workers, device_id=None, seed=7,
                  prefetch_queue_depth=2)
    def pipeline():
        files, labels = fn.readers.file(file_root=args.data, random_shuffle=True, name="files")
        if args.pipeline == "train":
            images = fn.decoders.image_random_crop(files, device="cpu", output_type=types.RGB)
            images = fn.resize(images, size=(224, 224))
            crop, mirror = None, fn.random.coin_flip()
        else:
            images = fn.decoders.image(files, device="cpu", output_type=types.RGB)
            images = fn.resize(images, resize_shorter=256)
            crop, mirror = (224, 224), 0
        images = fn.crop_mirror_normalize(
            images, dtype=types.FLOAT16, output_layout="CHW", crop=crop, mirror=mirror,
            mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD])
        return images, labels

    pipe = pipeline()
    pipe.build()
    size = pipe.epoch_size("files")

    def epoch():
        # DALI fills the last batch up to the batch size; count only the real images.
        left = size
        for _ in range(math.ceil(size / args.batch)):
            images, _ = pipe.run()
            yield min(len(images), left)
            left -= len(images)
    return epoch


def ffcv_epochs(args):
    """FFCV: converts the folder to a .beton once (not timed), then reads it."""
    import os
    import numpy as np
    import torchvision
    from ffcv.fields import IntField, RGBImageField
    from ffcv.fields.decoders import (CenterCropRGBImageDecoder, IntDecoder,
                                      RandomResizedCropRGBImageDecoder)
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import NormalizeImage, RandomHorizontalFlip, ToTensor, ToTorchImage
    from ffcv.writer import DatasetWriter

    beton = args.beton or args.data.rstrip("/") + ".beton"
    if not os.path.exists(beton):
        data = torchvision.datasets.ImageFolder(args.data)
        DatasetWriter(beton, {"image": RGBImageField(write_mode="jpg"), "label": IntField()},
                      num_workers=args.workers).from_indexed_dataset(data)
    mean, std = np.array(MEAN) * 255, np.array(STD) * 255
    if args.pipeline == "train":
        image = [RandomResizedCropRGBImageDecoder((224, 224)), RandomHorizontalFlip()]
    else:
        image = [CenterCropRGBImageDecoder((224, 224), ratio=224 / 256)]
    image += [ToTensor(), ToTorchImage(), NormalizeImage(mean, std, np.float16)]
    loader = Loader(beton, batch_size=args.batch, num_workers=args.workers,
                    order=OrderOption.RANDOM, drop_last=False,
                    pipelines={"image": image, "label": [IntDecoder()]})

    def epoch():
        for images, _ in loader:
            yield len(images)
    return epoch


LOADERS = {"torch": torch_epochs, "hpuload": hpuload_epochs, "dali": dali_epochs, "ffcv": ffcv_epochs}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loader", choices=sorted(LOADERS), required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--pipeline", choices=["train", "eval", "whole", "short224"], default="train",
                    help="whole: ToTensor + Normalize alone; short224: Resize(224) before them "
                         "(torch and hpuload only, over a folder of one size)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--beton", help="FFCV file (default: DATA.beton, written on first use)")
    ap.add_argument("--pass-only", action="store_true",
                    help="torch and hpuload: iterate without the bfloat16 cast")
    args = ap.parse_args()
    epoch = LOADERS[args.loader](args)
    rates, first = [], None
    for e in range(args.epochs + 1):
        start = time.perf_counter()
        images = 0
        for n in epoch():
            if first is None:
                first = time.perf_counter() - start
            images += n
        secs = time.perf_counter() - start
        print(f"{args.loader} {args.pipeline} epoch {e}{' (warm-up)' if e == 0 else ''}: "
              f"{images} images in {secs:.2f}s = {images / secs:.0f} images/s", file=sys.stderr)
        if e > 0:
            rates.append(images / secs)
    print(json.dumps({"loader": args.loader, "pipeline": args.pipeline, "workers": args.workers,
                      "batch_size": args.batch, "images_per_sec": statistics.median(rates),
                      "per_epoch": rates, "time_to_first_batch_sec": first}))


if __name__ == "__main__":
    main()
