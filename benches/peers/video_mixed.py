"""A Kinetics tree whose videos are another tree's H.264 ones, a few of them re-encoded as VP9
in MP4 (as some Kinetics downloads are): the set on which a loader must cope with videos of a
codec hpuload does not decode.

    python benches/peers/video_mixed.py SRC DST [--vp9 2]

SRC holds `train/<class>/<video>.mp4` (`video_make.py` writes it); DST gets the same tree, the
videos hard-linked but for one video in each of `--vp9` classes (the first video of the first
class, the second of the fourth, the third of the seventh, ...), which are re-encoded with PyAV's libvpx-vp9 (realtime, a keyframe every 60 frames) at
the same size, rate and frame count.
"""

import argparse
import os
import shutil
from fractions import Fraction
from pathlib import Path

import av


def reencode_vp9(src: Path, dst: Path) -> None:
    with av.open(str(src)) as inp, av.open(str(dst), "w", format="mp4") as out:
        video = inp.streams.video[0]
        rate = Fraction(video.average_rate)
        stream = out.add_stream("libvpx-vp9", rate=rate)
        stream.width, stream.height, stream.pix_fmt = video.width, video.height, "yuv420p"
        stream.options = {"deadline": "realtime", "cpu-used": "8", "g": "60"}
        stream.codec_context.time_base = 1 / rate
        for k, frame in enumerate(inp.decode(video)):
            frame.pts, frame.time_base = k, 1 / rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", type=Path)
    p.add_argument("dst", type=Path)
    p.add_argument("--vp9", type=int, default=2, help="videos re-encoded as VP9, one per class")
    args = p.parse_args()
    src, dst = args.src / "train", args.dst / "train"
    shutil.rmtree(dst, ignore_errors=True)
    classes = sorted(c for c in os.listdir(src) if (src / c).is_dir())
    chosen = {cls: i for i, cls in enumerate(classes[::3][: args.vp9])}
    for cls in classes:
        (dst / cls).mkdir(parents=True)
        for k, name in enumerate(sorted(os.listdir(src / cls))):
            if chosen.get(cls) == k:
                reencode_vp9(src / cls / name, dst / cls / name)
                print("VP9:", dst / cls / name)
            else:
                os.link(src / cls / name, dst / cls / name)


if __name__ == "__main__":
    main()
