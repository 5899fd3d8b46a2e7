"""The peer of `hpuload bench --video`: torch's DataLoader over a Dataset that does what a
torchcodec- or PyAV-based video dataset does per sample: pick a random clip start
(`clips_at_random_indices`), seek to the keyframe before it, decode to the clip's last frame
keeping every `step`-th frame as RGB (FFmpeg's decoder and swscale, one thread per worker),
then torchvision v2 on the clip tensor: RandomResizedCrop(224) drawn once per clip, flip,
ToDtype(float32, scale), Normalize, cast to bfloat16 as hpuload's output.

    python benches/peers/video_loader.py FOLDER [--reader av|decord|hpuload] [--batch 4] [--frames 16]
        [--step 4] [--workers 2] [--epochs 3]

torchcodec itself needs FFmpeg's shared libraries installed on the system; PyAV bundles the
same FFmpeg decoder, so this is the same decode work without them.

`--reader decord`: the same loop as VideoMAE writes it, with decord (`VideoReader(path,
num_threads=1)`, `get_batch` of the clip's indices, which seeks to the keyframe before the
first and decodes forward); the same draw, transform and output. `--reader hpuload`: that
loop with `from hpuload import VideoReader` in place of decord's, everything else the same (a
Dataset class of the user's own, run by torch's DataLoader, decoding natively).
`--reader decord --loader hpuload`: the decord loop unchanged, with `hpuload.torch.DataLoader`
in place of torch's (the only import changed), which hands the class to torch's loader and
answers its `decord.VideoReader` with hpuload's reader in the workers. `--reader torchcodec`:
the same loop on torchcodec (`VideoDecoder(path, num_ffmpeg_threads=1)`, `get_frames_at` of
the clip's indices), which needs FFmpeg's shared libraries; with `--loader hpuload` its
decoder is answered by hpuload's.
"""

import argparse
import random
from pathlib import Path

import av
import numpy as np
import torch
from torch.utils.data import Dataset
from torchvision import tv_tensors
from torchvision.transforms import v2

from epoch_rates import clip_rates


class Clips(Dataset):
    def __init__(self, root, frames, step, reader="av"):
        self.paths = sorted(Path(root).glob("*/*.mp4"))
        classes = sorted({p.parent.name for p in self.paths})
        self.labels = [classes.index(p.parent.name) for p in self.paths]
        self.frames, self.step, self.reader = frames, step, reader
        self.transform = v2.Compose(
            [
                v2.RandomResizedCrop(224, antialias=True),
                v2.RandomHorizontalFlip(),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
            ]
        )

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        if self.reader == "torchcodec":
            clip = tv_tensors.Video(self.torchcodec_clip(i))
        else:
            kept = self.av_clip(i) if self.reader == "av" else self.decord_clip(i)
            clip = tv_tensors.Video(torch.from_numpy(kept).permute(0, 3, 1, 2))
        return self.transform(clip).to(torch.bfloat16), self.labels[i]

    def torchcodec_clip(self, i):
        from torchcodec.decoders import VideoDecoder

        decoder = VideoDecoder(str(self.paths[i]), num_ffmpeg_threads=1)
        n = len(decoder)
        span = self.step * (self.frames - 1) + 1
        start = random.randrange(max(n - span + 1, 1))
        indices = [min(start + k * self.step, n - 1) for k in range(self.frames)]
        return decoder.get_frames_at(indices).data

    def decord_clip(self, i):
        import decord

        if self.reader == "hpuload":
            from hpuload import VideoReader  # the one line changed
        else:
            from decord import VideoReader
        vr = VideoReader(str(self.paths[i]), num_threads=1, ctx=decord.cpu(0))
        n = len(vr)
        span = self.step * (self.frames - 1) + 1
        start = random.randrange(max(n - span + 1, 1))
        indices = [min(start + k * self.step, n - 1) for k in range(self.frames)]
        return vr.get_batch(indices).asnumpy()

    def av_clip(self, i):
        with av.open(str(self.paths[i])) as c:
            s = c.streams.video[0]
            s.thread_type = "NONE"
            n = s.frames
            span = self.step * (self.frames - 1) + 1
            start = random.randrange(max(n - span + 1, 1))
            wanted = set(range(start, min(start + span, n), self.step))
            # The keyframe before `start`: seek by its timestamp, backwards.
            rate = s.average_rate
            c.seek(int(start / rate / s.time_base), stream=s, backward=True, any_frame=False)
            kept = []
            for f in c.decode(s):
                k = round(f.pts * s.time_base * rate)
                if k in wanted:
                    kept.append(f.to_ndarray(format="rgb24"))
                if k >= start + span - 1 or len(kept) == len(wanted):
                    break
        while len(kept) < self.frames:
            kept.append(kept[-1])
        return np.stack(kept)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--reader", choices=["av", "decord", "hpuload", "torchcodec"], default="av")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--frames", type=int, default=16)
    p.add_argument("--step", type=int, default=4)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--loader", choices=["torch", "hpuload"], default="torch")
    a = p.parse_args()
    torch.set_num_threads(1)
    data = Clips(a.root, a.frames, a.step, a.reader)
    if a.loader == "hpuload":
        from hpuload.torch import DataLoader  # the one import changed
    else:
        from torch.utils.data import DataLoader
    loader = DataLoader(data, batch_size=a.batch, shuffle=True, num_workers=a.workers, persistent_workers=True)

    def epoch():
        clips = 0
        for x, y in loader:
            assert x.shape[1:] == (a.frames, 3, 224, 224)
            clips += x.shape[0]
        return clips

    clip_rates(a.epochs, epoch)


if __name__ == "__main__":
    main()
