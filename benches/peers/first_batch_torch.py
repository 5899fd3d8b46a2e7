"""Time from `iter(loader)` to the first batch with torch's DataLoader: the ResNet-50 training
transform over an ImageFolder, 2 worker processes, batches of 256 (what `hpuload bench`
reports as the warm-up epoch's "first batch after"). Prints seconds.

With --hpuload, the same script with hpuload's drop-in imported instead, timed from the
DataLoader's construction (which builds the native loader) to the first batch.

usage: python first_batch_torch.py DATA [--hpuload]
"""

import sys
import time

from torchvision import datasets
from torchvision import transforms as T

if "--hpuload" in sys.argv:
    import hpuload.torch as tud
else:
    import torch.utils.data as tud


def main():
    t = T.Compose([
        T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    dataset = datasets.ImageFolder(sys.argv[1], t)
    start = time.perf_counter()
    loader = tud.DataLoader(dataset, batch_size=256, shuffle=True, num_workers=2)
    if "--hpuload" not in sys.argv:
        start = time.perf_counter()
    next(iter(loader))
    print(round(time.perf_counter() - start, 3))


if __name__ == "__main__":
    main()
