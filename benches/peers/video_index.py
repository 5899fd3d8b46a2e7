"""The peer of `examples/index_videos.rs`: torchvision's `VideoClips` metadata pass over a
folder of videos (class folders of .mp4 or .avi), which is what `Kinetics`, `UCF101` and `HMDB51` run
when built without `_precomputed_metadata`. torchvision 0.29 opens each video with
torchcodec's `VideoDecoder` (exact seek mode: every packet is scanned) in a DataLoader of
`--workers` processes. Prints the seconds per round and their median.

    python benches/peers/video_index.py FOLDER [--workers 2] [--rounds 3] [--limit N]

Needs torchvision, torchcodec and FFmpeg's shared libraries (Debian: libavcodec-dev and
friends); hpuload needs none of them.
"""

import argparse
import glob
import os
import statistics
import time

from torchvision.datasets.video_utils import VideoClips


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None)
    a = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(a.folder, "*", "*.mp4")) + glob.glob(os.path.join(a.folder, "*", "*.avi")))[: a.limit]
    times = []
    for r in range(a.rounds):
        start = time.perf_counter()
        clips = VideoClips(paths, clip_length_in_frames=16, frames_between_clips=1, num_workers=a.workers)
        times.append(time.perf_counter() - start)
        print(f"round {r}: {len(paths)} videos, {clips.num_clips()} clips, in {times[-1]:.3f} s", flush=True)
    print(f"median: {statistics.median(times):.3f} s for {len(paths)} videos")


if __name__ == "__main__":
    main()
