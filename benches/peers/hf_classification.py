"""The data path of transformers' `run_image_classification.py`, torch against hpuload: a
`datasets` table, the example's `set_transform` function (RandomResizedCrop, flip, ToTensor,
Normalize with a ViT processor's mean and std, applied per image after `.convert("RGB")`), its
collate_fn, batch 64, shuffled, as the Trainer builds the loader. Only the DataLoader differs.

usage: python hf_classification.py --loader torch|hpuload --data SAVE_TO_DISK_DIR
         [--epochs 3] [--workers 2] [--batch 64] [--size 224]
Prints one JSON line: images/s (median of the epochs after a warm-up one)."""

import argparse
import json
import statistics
import time

import datasets
import torch
from torchvision.transforms import Compose, Normalize, RandomHorizontalFlip, RandomResizedCrop, ToTensor


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--loader", choices=["torch", "hpuload"], required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    a = p.parse_args()
    torch.manual_seed(0)
    ds = datasets.load_from_disk(a.data)
    _train_transforms = Compose(
        [RandomResizedCrop(a.size), RandomHorizontalFlip(), ToTensor(), Normalize([0.5] * 3, [0.5] * 3)]
    )

    def train_transforms(example_batch):
        example_batch["pixel_values"] = [_train_transforms(im.convert("RGB")) for im in example_batch["image"]]
        return example_batch

    def collate_fn(examples):
        pixel_values = torch.stack([e["pixel_values"] for e in examples])
        labels = torch.tensor([e["label"] for e in examples])
        return {"pixel_values": pixel_values, "labels": labels}

    ds.set_transform(train_transforms)
    if a.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    loader = DataLoader(
        ds, batch_size=a.batch, sampler=torch.utils.data.RandomSampler(ds), collate_fn=collate_fn,
        num_workers=a.workers, pin_memory=True, drop_last=False,
    )
    rates = []
    for epoch in range(a.epochs + 1):
        t, n = time.perf_counter(), 0
        for batch in loader:
            n += batch["pixel_values"].shape[0]
        if epoch:
            rates.append(n / (time.perf_counter() - t))
    print(json.dumps({"loader": a.loader, "type": type(loader).__module__, "images_per_sec": statistics.median(rates), "epochs": rates}))


if __name__ == "__main__":
    main()
