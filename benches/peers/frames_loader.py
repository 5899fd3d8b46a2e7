"""A folder of JPEG frames as a video dataset (`root/<class>/<video>/<frame>.jpg`), VideoMAE's
sampling (one random clip of 16 frames, 4 apart, per video) and a train transform (random
resized crop to 224, flip, normalize; one draw per clip), on torch's DataLoader or on hpuload.

    python benches/peers/frames_loader.py ROOT --loader torch|hpuload [--epochs 3]

torch's side is the usual hand-written Dataset: it lists each video's frames, draws the clip
start, opens each frame with PIL and stacks them into a uint8 `[T, C, H, W]` tensor, then
torchvision v2's transforms (which draw once per call, so once per clip) crop, flip and
normalize it. hpuload's side is `hpuload.FrameFolder` with the same clip and the same transform
(written for PIL images, drawn once per clip) through `hpuload.torch.DataLoader`. Both: batches
of 8, 2 workers, shuffled. Prints clips/s per epoch after a warm-up epoch, and the median.
"""

import argparse
import os
import random
import statistics
import time

import numpy as np
import torch
from PIL import Image

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
FRAMES, STRIDE = 16, 4


class FrameClips(torch.utils.data.Dataset):
    def __init__(self, root):
        from torchvision.transforms import v2

        self.videos = []
        classes = sorted(os.listdir(root))
        for label, cls in enumerate(classes):
            for video in sorted(os.listdir(os.path.join(root, cls))):
                d = os.path.join(root, cls, video)
                frames = sorted(f for f in os.listdir(d) if f.endswith(".jpg"))
                self.videos.append(([os.path.join(d, f) for f in frames], label))
        self.transform = v2.Compose(
            [
                v2.RandomResizedCrop(224, antialias=True),
                v2.RandomHorizontalFlip(),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize(MEAN, STD),
            ]
        )

    def __len__(self):
        return len(self.videos)

    def __getitem__(self, i):
        from torchvision import tv_tensors

        frames, label = self.videos[i]
        span = (FRAMES - 1) * STRIDE + 1
        start = random.randint(0, max(0, len(frames) - span))
        picks = [min(start + k * STRIDE, len(frames) - 1) for k in range(FRAMES)]
        clip = np.stack([np.asarray(Image.open(frames[k]).convert("RGB")) for k in picks])
        clip = tv_tensors.Video(torch.from_numpy(clip).permute(0, 3, 1, 2))
        return self.transform(clip), label


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--loader", choices=["torch", "hpuload"], required=True)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    if args.loader == "hpuload":
        import hpuload
        import torchvision.transforms as T
        from hpuload.torch import DataLoader

        transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
        data = hpuload.FrameFolder(
            args.root,
            fps=25,
            transform=transform,
            sampler="random_indices",
            num_frames_per_clip=FRAMES,
            num_indices_between_frames=STRIDE,
        )
    else:
        from torch.utils.data import DataLoader

        data = FrameClips(args.root)
    loader = DataLoader(data, batch_size=args.batch, shuffle=True, num_workers=args.workers)
    rates = []
    for epoch in range(args.epochs + 1):
        t0, clips = time.perf_counter(), 0
        for x, y in loader:
            assert x.shape[1:] == (FRAMES, 3, 224, 224), x.shape
            clips += x.shape[0]
        rate = clips / (time.perf_counter() - t0)
        if epoch > 0:
            rates.append(rate)
        print(f"epoch {epoch}: {rate:.1f} clips/s" + (" (warm-up)" if epoch == 0 else ""))
    print(f"median: {statistics.median(rates):.1f} clips/s")


if __name__ == "__main__":
    main()
