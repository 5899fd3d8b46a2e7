"""Time from `iter(loader)` to the first batch with torch's DataLoader: the ResNet-50 training
transform over an ImageFolder, 2 worker processes, batches of 256 (what `hpuload bench`
reports as the warm-up epoch's "first batch after"). Prints seconds.

usage: python first_batch_torch.py DATA
"""

import sys
import time

import torch.utils.data as tud
from torchvision import datasets
from torchvision import transforms as T


def main():
    t = T.Compose([
        T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    loader = tud.DataLoader(datasets.ImageFolder(sys.argv[1], t), batch_size=256, shuffle=True, num_workers=2)
    start = time.perf_counter()
    next(iter(loader))
    print(round(time.perf_counter() - start, 3))


if __name__ == "__main__":
    main()
