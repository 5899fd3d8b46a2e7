"""Train a small video classifier (torchvision's R3D-18) for a few steps on the CPU, fed by
hpuload: H.264 clips decoded, cropped, flipped and normalised natively, batches `[B, C, T, H, W]`.

The transform is torchvision's video classification reference's (resize to 128x171, random crop
112, flip, normalise with its Kinetics statistics), given as the per-frame torchvision transform
hpuload translates; each clip draws one crop and one flip for all its frames, as torchvision v2
transforms a video tensor. Without --data it uses hpuload's built-in clips (made on first use,
like `hpuload bench --video`).

    python examples/train_video.py --steps 10
    python examples/train_video.py --data /path/to/kinetics/train --frames 16 --frame-step 4
"""

import argparse
import os
import time

import torch
import torchvision
from torchvision import transforms as T

import hpuload
from hpuload.torch import DataLoader


def default_clips() -> str:
    """hpuload's built-in clips (written once, then reused)."""
    cache = os.environ.get("HPULOAD_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "hpuload")
    root = os.path.join(cache, "example-clips-40")
    if not os.path.isdir(root):
        from hpuload._hpuload import cli

        if cli(["hpuload", "make-dataset", "--video", "--out", root]) != 0:
            raise SystemExit("could not write the built-in clips")
    return root


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="class folders of .mp4 videos (default: the built-in clips)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--frames", type=int, default=8, help="frames per clip")
    p.add_argument("--frame-step", type=int, default=2, help="frame indices between a clip's frames")
    p.add_argument("--crop", type=int, default=112)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.01)
    args = p.parse_args()

    resize = (round(args.crop * 128 / 112), round(args.crop * 171 / 112))
    transform = T.Compose(
        [
            T.Resize(resize),
            T.RandomCrop(args.crop),
            T.RandomHorizontalFlip(),
            T.ToTensor(),
            T.Normalize(mean=[0.43216, 0.394666, 0.37645], std=[0.22803, 0.22145, 0.216989]),
        ]
    )
    root = args.data or default_clips()
    classes = sorted(d.name for d in os.scandir(root) if d.is_dir())
    clips = hpuload.VideoFolder(
        root,
        transform=transform,
        sampler="random_indices",
        num_frames_per_clip=args.frames,
        num_indices_between_frames=args.frame_step,
        layout="CTHW",
    )
    loader = DataLoader(clips, batch_size=args.batch_size, shuffle=True, num_workers=args.workers, drop_last=True)

    torch.manual_seed(0)
    model = torchvision.models.video.r3d_18(num_classes=len(classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    criterion = torch.nn.CrossEntropyLoss()
    model.train()

    step, waited, start = 0, 0.0, time.perf_counter()
    while step < args.steps:
        t = time.perf_counter()
        for video, target in loader:
            waited += time.perf_counter() - t
            assert video.shape[1:] == (3, args.frames, args.crop, args.crop), video.shape
            loss = criterion(model(video), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            print(f"step {step}: loss {loss.item():.4f}, clips {tuple(video.shape)}", flush=True)
            if step >= args.steps:
                break
            t = time.perf_counter()
    total = time.perf_counter() - start
    print(f"{step} steps in {total:.1f}s, {waited:.2f}s of it waiting for data")


if __name__ == "__main__":
    main()
