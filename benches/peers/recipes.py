"""The data pipelines of two real training recipes, run with torch's DataLoader or with hpuload's
drop-in (only the import differs), timed over full passes.

  resnet50_v2  torchvision's current ResNet-50 recipe: RandomResizedCrop(176), flip,
               TrivialAugmentWide, PILToTensor, ConvertImageDtype, Normalize, RandomErasing(0.1),
               MixUp(0.2)/CutMix(1.0) in the collate_fn, a repeated-augmentation sampler with 4
               repetitions (timm's RepeatAugSampler, the same scheme as the reference's RASampler).
  timm         timm's create_transform(224, is_training=True, interpolation="random"): random
               bilinear/bicubic RandomResizedCrop, flip, ColorJitter(0.4), Normalize.
  timm_ra      the same with timm train.py's --aa rand-m9-mstd0.5-inc1 --reprob 0.25
               --remode pixel (DeiT-style recipes): timm's own RandAugment, RandomErasing.
  timm_augmix, timm_augmix_b1, timm_3a
               timm's create_transform with --aa augmix-m5-w4-d2, augmix-m5-w4-d2-b1 (blended)
               or 3a (timm's ThreeAugment).

usage: python recipes.py --loader torch|hpuload --recipe RECIPE --data DIR
       [--workers 2] [--batch 256] [--epochs 2]
Prints one JSON line: images/s over the epochs after the first (the first warms caches and
worker pools, as in peer_bench.py).
"""

import argparse
import json
import sys
import time

import torch
from torchvision import datasets
from torchvision.transforms import v2


def resnet50_v2(root, num_classes_hint=None):
    train = v2.Compose(
        [
            v2.RandomResizedCrop(176, interpolation=v2.InterpolationMode.BILINEAR, antialias=True),
            v2.RandomHorizontalFlip(0.5),
            v2.TrivialAugmentWide(interpolation=v2.InterpolationMode.BILINEAR),
            v2.PILToTensor(),
            v2.ToDtype(torch.float, scale=True),
            v2.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
            v2.RandomErasing(0.1),
            v2.ToPureTensor(),
        ]
    )
    dataset = datasets.ImageFolder(root, train)
    n = len(dataset.classes)
    mix = v2.RandomChoice([v2.MixUp(alpha=0.2, num_classes=n), v2.CutMix(alpha=1.0, num_classes=n)])

    def collate(batch):
        return mix(*torch.utils.data.default_collate(batch))

    from timm.data.distributed_sampler import RepeatAugSampler

    sampler = RepeatAugSampler(dataset, num_replicas=1, rank=0, num_repeats=4)
    return dataset, dict(sampler=sampler, collate_fn=collate)


def timm_default(root):
    from timm.data import create_transform

    dataset = datasets.ImageFolder(root, create_transform(224, is_training=True, interpolation="random"))
    return dataset, dict(shuffle=True)


def timm_rand_augment(root):
    from PIL import Image
    from timm.data import auto_augment, create_transform

    # timm's PosterizeIncreasing keeps 0 bits at the clamped top magnitude, which Pillow 10+
    # refuses (ValueError: bits must be between or equal to 1 and 8): torch's loader dies a few
    # hundred images in. Keeping no bits is black (older Pillow, torchvision, hpuload); the
    # patch applies to both runs (hpuload never calls it).
    original = auto_augment.posterize

    def posterize(img, bits_to_keep, **kw):
        return Image.new(img.mode, img.size) if bits_to_keep < 1 else original(img, bits_to_keep, **kw)

    auto_augment.NAME_TO_OP.update({k: posterize for k, v in auto_augment.NAME_TO_OP.items() if v is original})

    t = create_transform(
        224,
        is_training=True,
        interpolation="random",
        auto_augment="rand-m9-mstd0.5-inc1",
        re_prob=0.25,
        re_mode="pixel",
    )
    return datasets.ImageFolder(root, t), dict(shuffle=True)


def timm_policy(policy):
    """timm's create_transform with `auto_augment=policy` (train.py's --aa): AugMix
    (`augmix-m5-w4-d2`), blended AugMix (`augmix-m5-w4-d2-b1`) or timm's ThreeAugment (`3a`)."""

    def build(root):
        from timm.data import create_transform

        t = create_transform(224, is_training=True, interpolation="random", auto_augment=policy)
        return datasets.ImageFolder(root, t), dict(shuffle=True)

    return build


RECIPES = {
    "resnet50_v2": resnet50_v2,
    "timm": timm_default,
    "timm_ra": timm_rand_augment,
    "timm_augmix": timm_policy("augmix-m5-w4-d2"),
    "timm_augmix_b1": timm_policy("augmix-m5-w4-d2-b1"),
    "timm_3a": timm_policy("3a"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loader", choices=["torch", "hpuload"], required=True)
    ap.add_argument("--recipe", choices=sorted(RECIPES), required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=2)
    args = ap.parse_args()
    if args.loader == "torch":
        from torch.utils.data import DataLoader
    else:
        from hpuload.torch import DataLoader
    dataset, kw = RECIPES[args.recipe](args.data)
    loader = DataLoader(dataset, batch_size=args.batch, num_workers=args.workers, drop_last=True, **kw)
    print(f"{args.loader}: {type(loader).__module__}.{type(loader).__name__}", file=sys.stderr)
    images, seconds = 0, 0.0
    for epoch in range(args.epochs):
        if "sampler" in kw:
            kw["sampler"].set_epoch(epoch)
        t = time.perf_counter()
        n = 0
        for x, y in loader:
            n += x.shape[0]
        dt = time.perf_counter() - t
        print(f"epoch {epoch}: {n} images in {dt:.1f} s ({n / dt:.0f}/s)", file=sys.stderr)
        if epoch > 0 or args.epochs == 1:
            images, seconds = images + n, seconds + dt
    print(json.dumps({"loader": args.loader, "recipe": args.recipe, "images_per_sec": images / seconds}))


if __name__ == "__main__":
    main()
