"""timm's train.py loader as it builds it by default: `create_dataset` (timm's ImageDataset over
a folder), `create_loader` with its prefetcher (the transform ends in `MaybePILToTensor`, the
batch is collated by `fast_collate` as uint8, and `PrefetchLoader` converts, normalizes and
erases on the device), timm's default augmentation (RandomResizedCrop with random
interpolation... as `create_transform` makes it: RRC 224, flip, ColorJitter 0.4) and
`--reprob 0.25`. `create_loader` calls torch's DataLoader by its full name, so the hpuload run
swaps that name (`torch.utils.data.DataLoader = hpuload.torch.DataLoader`), the one line a
user changes.

    python benches/peers/timm_loader.py FOLDER --loader torch|hpuload [--mixup none|batch|pair|elem]
        [--batch 256] [--workers 2] [--epochs 3]

`--mixup MODE`: timm's `FastCollateMixup(mixup_alpha=0.8, cutmix_alpha=1.0, mode=MODE,
label_smoothing=0.1)` as the collate_fn, what train.py uses with `--mixup 0.8 --cutmix 1.0`
and the prefetcher. The device is the CPU here. Prints images/s per epoch (the first is a
warm-up) and the median of the rest (`epoch_rates.py`).
"""

import argparse

import torch
import torch.utils.data

from epoch_rates import clip_rates


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--loader", choices=["torch", "hpuload"], required=True)
    p.add_argument("--mixup", choices=["none", "batch", "pair", "elem"], default="none")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    a = p.parse_args()
    if a.loader == "hpuload":
        import hpuload.torch

        torch.utils.data.DataLoader = hpuload.torch.DataLoader  # the one line changed
    from timm.data import FastCollateMixup, create_dataset, create_loader

    dataset = create_dataset("", root=a.root, split="", is_training=True)
    collate = None
    if a.mixup != "none":
        n = len({label for _, label in dataset.reader.samples})
        collate = FastCollateMixup(mixup_alpha=0.8, cutmix_alpha=1.0, mode=a.mixup, label_smoothing=0.1, num_classes=n)
    loader = create_loader(
        dataset,
        input_size=(3, 224, 224),
        batch_size=a.batch,
        is_training=True,
        use_prefetcher=True,
        color_jitter=0.4,
        interpolation="random",
        re_prob=0.25,
        num_workers=a.workers,
        collate_fn=collate,
        device=torch.device("cpu"),
    )

    def epoch():
        return sum(len(x) for x, _ in loader)

    clip_rates(a.epochs, epoch, unit="images")


if __name__ == "__main__":
    main()
