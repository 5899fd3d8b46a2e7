"""The VideoMAE-style loop of `video_loader.py` on DALI's CPU video reader
(`fn.experimental.readers.video`, device="cpu"): clips of 16 frames 4 apart, RandomResizedCrop
224 drawn once per clip (DALI draws one crop per sample and applies it to every frame of the
sequence), a random horizontal flip, normalize, `[T, C, H, W]` float16 (DALI has no bfloat16),
batches of 4 on 2 threads.

    python benches/peers/dali_video.py FOLDER [--batch 4] [--frames 16] [--step 4] [--start-step 1]
        [--threads 2] [--epochs 3]

DALI cannot take one random clip per video (its open requests #4039, #741, #1775, #5080): its
reader enumerates every clip that starts `--start-step` frames after the previous one
(default 1, every frame) and shuffles them through a buffer, so each clip starts at a random
frame of a random video, as VideoMAE's draw does, and an "epoch" here is as many clips as the
folder has videos (as in `video_loader.py`). DALI 2.2 and later refuse H.264 on the CPU
(DALI pull request #6352): use a release before it (2.0.0 was measured: BENCHMARKS.md,
session 42).
"""

import argparse
from pathlib import Path

import nvidia.dali as dali
from nvidia.dali import fn, pipeline_def, types

from epoch_rates import clip_rates


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--frames", type=int, default=16)
    p.add_argument("--step", type=int, default=4)
    p.add_argument("--start-step", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    a = p.parse_args()
    paths = sorted(Path(a.root).glob("*/*.mp4"))
    classes = sorted({q.parent.name for q in paths})
    labels = [classes.index(q.parent.name) for q in paths]

    @pipeline_def(batch_size=a.batch, num_threads=a.threads, device_id=None, seed=1)
    def clips():
        video, label = fn.experimental.readers.video(
            device="cpu",
            filenames=[str(q) for q in paths],
            labels=labels,
            sequence_length=a.frames,
            stride=a.step,
            step=a.start_step,
            random_shuffle=True,
            name="reader",
        )
        video = fn.random_resized_crop(video, size=(224, 224), antialias=True)
        video = fn.crop_mirror_normalize(
            video,
            dtype=types.FLOAT16,
            output_layout="FCHW",
            mean=[0.485 * 255, 0.456 * 255, 0.406 * 255],
            std=[0.229 * 255, 0.224 * 255, 0.225 * 255],
            mirror=fn.random.coin_flip(),
        )
        return video, label

    pipe = clips()
    pipe.build()
    per_epoch = -(-len(paths) // a.batch)
    print(f"DALI {dali.__version__}: {len(paths)} videos, {per_epoch} batches an epoch")

    def epoch():
        n = 0
        for _ in range(per_epoch):
            video, _ = pipe.run()
            shape = video.as_tensor().shape()
            assert tuple(shape[1:]) == (a.frames, 3, 224, 224), shape
            n += shape[0]
        return n

    clip_rates(a.epochs, epoch)


if __name__ == "__main__":
    main()
