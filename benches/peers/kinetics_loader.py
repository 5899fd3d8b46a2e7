"""torchvision's video classification reference's training loader, as its train.py builds it,
on torch's DataLoader or on hpuload's drop-in (only the import differs).

    python benches/peers/kinetics_loader.py ROOT --loader torch|hpuload [--epochs 2] [--dataset ucf101]

ROOT holds `train/<class>/<video>.mp4` (Kinetics' layout). The dataset is the reference's
`KineticsWithVideoId` (torchvision's `Kinetics` whose samples carry the video's index after the
label; `frames_per_clip=16, step_between_clips=1, frame_rate=15`) with its
`VideoClassificationPresetTrain(crop_size=(112, 112), resize_size=(128, 171))` (its own
classes, restated here), `RandomClipSampler(clips_per_video=5)`, batches of 8, 2 workers and
its `collate_fn`, which drops the audio and keeps the index. torch's side decodes with torchcodec
(FFmpeg's shared libraries). Prints clips/s per epoch after one warm-up epoch, and the median.

`--dataset ucf101`: the same loader over torchvision's `UCF101` (ROOT/videos, fold 1's split
files in ROOT/splits: `video_make.py --xvid` writes both), its AVI files of MPEG-4 Part 2,
with the same clips, preset and sampler; its collate_fn drops the audio.

`--transform lambdas`: the transform many UCF101 scripts copy instead of the preset, Lambdas
over torchvision's default `[T, H, W, C]` clips (to float in [0, 1], permute to
`[T, C, H, W]`, `interpolate` to 112x112), which hpuload cannot translate and runs in Python
on its natively decoded clips.
"""

import argparse
import statistics
import time

import torch
import torchvision
import torchvision.transforms as T
from torch.utils.data.dataloader import default_collate
from torchvision.datasets.samplers import RandomClipSampler


class ConvertBCHWtoCBHW(torch.nn.Module):
    def forward(self, vid):
        return vid.permute(1, 0, 2, 3)


class VideoClassificationPresetTrain:
    def __init__(self, *, crop_size, resize_size, mean=(0.43216, 0.394666, 0.37645), std=(0.22803, 0.22145, 0.216989)):
        self.transforms = T.Compose(
            [
                T.ConvertImageDtype(torch.float32),
                T.Resize(resize_size, antialias=False),
                T.RandomHorizontalFlip(0.5),
                T.Normalize(mean=mean, std=std),
                T.RandomCrop(crop_size),
                ConvertBCHWtoCBHW(),
            ]
        )

    def __call__(self, x):
        return self.transforms(x)


class KineticsWithVideoId(torchvision.datasets.Kinetics):
    def __getitem__(self, idx):
        video, audio, _, video_idx = self.video_clips.get_clip(idx)
        label = self.samples[video_idx][1]
        if self.transform is not None:
            video = self.transform(video)
        return video, audio, label, video_idx


def collate_fn(batch):
    return default_collate([(d[0], d[2], d[3]) for d in batch])


def collate_without_audio(batch):
    return default_collate([(d[0], d[2]) for d in batch])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--loader", choices=["torch", "hpuload"], required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--dataset", choices=["kinetics", "ucf101"], default="kinetics")
    p.add_argument("--transform", choices=["reference", "lambdas"], default="reference")
    args = p.parse_args()
    if args.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader

    t = time.perf_counter()
    common = dict(
        frames_per_clip=16,
        step_between_clips=1,
        frame_rate=15,
        transform=VideoClassificationPresetTrain(crop_size=(112, 112), resize_size=(128, 171)),
        output_format="TCHW",
        num_workers=args.workers,
    )
    if args.transform == "lambdas":
        common["transform"] = T.Compose(
            [
                T.Lambda(lambda x: x / 255.0),
                T.Lambda(lambda x: x.permute(0, 3, 1, 2)),
                T.Lambda(lambda x: torch.nn.functional.interpolate(x, (112, 112))),
            ]
        )
        common["output_format"] = "THWC"
    if args.dataset == "ucf101":
        dataset = torchvision.datasets.UCF101(f"{args.root}/videos", f"{args.root}/splits", fold=1, train=True, **common)
        collate = collate_without_audio
    else:
        dataset = KineticsWithVideoId(
            args.root, num_classes="400", split="train", extensions=("avi", "mp4"), **common
        )
        collate = collate_fn
    built = time.perf_counter() - t
    sampler = RandomClipSampler(dataset.video_clips, 5)
    t = time.perf_counter()
    loader = DataLoader(
        dataset, batch_size=args.batch, sampler=sampler, num_workers=args.workers, pin_memory=True, collate_fn=collate
    )
    print(f"{args.loader}: dataset {built:.1f} s, loader {time.perf_counter() - t:.2f} s, {len(sampler)} clips an epoch")
    rates = []
    for epoch in range(args.epochs + 1):
        t, clips = time.perf_counter(), 0
        for video, *_ in loader:
            clips += video.shape[0]
        rate = clips / (time.perf_counter() - t)
        print(f"epoch {epoch}{' (warm-up)' if epoch == 0 else ''}: {rate:.1f} clips/s, batch {tuple(video.shape)}")
        if epoch:
            rates.append(rate)
    print(f"{args.loader} median {statistics.median(rates):.1f} clips/s")


if __name__ == "__main__":
    main()
