"""Train a torchvision ResNet-18 for a few steps on the CPU, fed by hpuload.

The script is an ordinary torchvision ImageNet-style training loop; the only hpuload line is
the import of DataLoader. Without --data it uses hpuload's built-in synthetic dataset
(generated on first use, like `hpuload bench`).

    python examples/train_resnet.py --steps 20
    python examples/train_resnet.py --data /path/to/imagenet/train --batch-size 64
"""

import argparse
import os
import time

import torch
import torchvision
from torchvision import datasets
from torchvision import transforms as T

from hpuload.torch import DataLoader  # was: from torch.utils.data import DataLoader


def default_dataset() -> str:
    """hpuload's built-in synthetic ImageNet-like dataset (written once, then reused)."""
    cache = os.environ.get("HPULOAD_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "hpuload")
    root = os.path.join(cache, "example-train-2000")
    if not os.path.isdir(root):
        from hpuload._hpuload import cli

        if cli(["hpuload", "make-dataset", "--out", root, "--images", "2000"]) != 0:
            raise SystemExit("could not write the built-in dataset")
    return root


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="ImageFolder root (default: the built-in synthetic dataset)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.1)
    args = p.parse_args()

    transform = T.Compose(
        [
            T.RandomResizedCrop(args.image_size),
            T.RandomHorizontalFlip(),
            T.ToTensor(),
            T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ]
    )
    dataset = datasets.ImageFolder(args.data or default_dataset(), transform)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=args.workers, pin_memory=True)

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=len(dataset.classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    criterion = torch.nn.CrossEntropyLoss()
    model.train()

    step, waited, start = 0, 0.0, time.perf_counter()
    while step < args.steps:
        t = time.perf_counter()
        for images, target in loader:
            waited += time.perf_counter() - t
            images = images.to("cpu", non_blocking=True)
            target = target.to("cpu", non_blocking=True)
            loss = criterion(model(images), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
            if step >= args.steps:
                break
            t = time.perf_counter()
    total = time.perf_counter() - start
    print(f"{step} steps in {total:.1f}s, {waited:.2f}s of it waiting for data")


if __name__ == "__main__":
    main()
