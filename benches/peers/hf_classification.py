"""The data path of transformers' `run_image_classification.py`, torch against hpuload: a
`datasets` table, the example's `set_transform` function applied per image after
`.convert("RGB")`, its collate_fn, batch 64, as the Trainer builds the loader. Only the
DataLoader differs.

- `--split train` (default): RandomResizedCrop, flip, ToTensor, Normalize with a ViT
  processor's mean and std; shuffled.
- `--split eval`: the example's `val_transforms`, Resize((224, 224)), CenterCrop((224, 224)),
  ToTensor, Normalize (the sizes a ViT image processor gives); in order, the last batch
  partial, as the Trainer's eval loader.
- `--split processor`: the Hugging Face fine-tuning recipes' function instead, a
  `ViTImageProcessor` (resize to 224x224, rescale, normalize) over the batch's images, the
  labels renamed `labels`; in order.
- `--trainer` (with `--split eval`): the loader is the one `Trainer.get_eval_dataloader()`
  builds, after `hpuload.transformers.install()` for `--loader hpuload` (a one-layer model;
  nothing is trained).

usage: python hf_classification.py --loader torch|hpuload --data SAVE_TO_DISK_DIR
         [--split train|eval|processor] [--trainer] [--epochs 3] [--workers 2] [--batch 64] [--size 224]
Prints one JSON line: images/s (median of the epochs after a warm-up one)."""

import argparse
import json
import statistics
import time

import datasets
import torch
from torchvision.transforms import (
    CenterCrop, Compose, Normalize, RandomHorizontalFlip, RandomResizedCrop, Resize, ToTensor,
)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--loader", choices=["torch", "hpuload"], required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--split", choices=["train", "eval", "processor"], default="train")
    p.add_argument("--trainer", action="store_true")
    a = p.parse_args()
    torch.manual_seed(0)
    ds = datasets.load_from_disk(a.data)
    normalize = Normalize([0.5] * 3, [0.5] * 3)
    if a.split == "train":
        _transforms = Compose([RandomResizedCrop(a.size), RandomHorizontalFlip(), ToTensor(), normalize])
    else:
        size = (a.size, a.size)
        _transforms = Compose([Resize(size), CenterCrop(size), ToTensor(), normalize])

    def transforms(example_batch):
        example_batch["pixel_values"] = [_transforms(im.convert("RGB")) for im in example_batch["image"]]
        return example_batch

    label = "label"
    if a.split == "processor":
        from transformers import ViTImageProcessor

        processor = ViTImageProcessor(size={"height": a.size, "width": a.size})
        label = "labels"

        def transforms(example_batch):  # noqa: F811 - the recipes' function replaces the example's
            inputs = processor([im.convert("RGB") for im in example_batch["image"]], return_tensors="pt")
            inputs["labels"] = example_batch["label"]
            return inputs

    def collate_fn(examples):
        pixel_values = torch.stack([e["pixel_values"] for e in examples])
        labels = torch.tensor([e[label] for e in examples])
        return {"pixel_values": pixel_values, "labels": labels}

    ds.set_transform(transforms)
    if a.trainer:
        loader = trainer_eval_loader(a, ds, collate_fn)
    else:
        if a.loader == "hpuload":
            from hpuload.torch import DataLoader
        else:
            from torch.utils.data import DataLoader
        sampler = (torch.utils.data.RandomSampler if a.split == "train" else torch.utils.data.SequentialSampler)(ds)
        loader = DataLoader(
            ds, batch_size=a.batch, sampler=sampler, collate_fn=collate_fn,
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


def trainer_eval_loader(a, ds, collate_fn):
    """The eval loader `transformers.Trainer` builds for the example's arguments."""
    import tempfile

    from transformers import Trainer, TrainingArguments

    if a.loader == "hpuload":
        import hpuload.transformers

        hpuload.transformers.install()

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = torch.nn.Linear(3, 2)

        def forward(self, pixel_values, labels=None):
            return {"logits": self.head(pixel_values.mean((2, 3)))}

    args = TrainingArguments(
        output_dir=tempfile.mkdtemp(), per_device_eval_batch_size=a.batch, dataloader_num_workers=a.workers,
        remove_unused_columns=False, report_to=[], use_cpu=True,
    )
    return Trainer(model=Tiny(), args=args, eval_dataset=ds, data_collator=collate_fn).get_eval_dataloader()


if __name__ == "__main__":
    main()
