"""FFmpeg's H.264 decoder (MPEG-4 Part 2 for AVI files) through PyAV, one thread, over every
video in a folder: every frame decoded, then the same with the conversion to RGB (swscale,
as torchcodec converts). The peer
of `cargo run --release --example decode_video`.

    python benches/peers/video_decode.py FOLDER [ROUNDS]
"""

import statistics
import sys
import time
from pathlib import Path

import av


def run(paths, rgb):
    frames = 0
    start = time.perf_counter()
    for path in paths:
        with av.open(str(path)) as c:
            s = c.streams.video[0]
            s.thread_type = "NONE"
            s.codec_context.thread_count = 1
            for f in c.decode(s):
                if rgb:
                    f.to_ndarray(format="rgb24")
                frames += 1
    return frames / (time.perf_counter() - start)


def main():
    folder = Path(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    paths = sorted([*folder.glob("*/*.mp4"), *folder.glob("*/*.avi")])
    for rgb in (False, True):
        rates = [run(paths, rgb) for _ in range(rounds)]
        name = "decode + rgb" if rgb else "decode"
        print(f"{name}: median {statistics.median(rates):.0f} frames/s (rounds {[round(r) for r in rates]})")


if __name__ == "__main__":
    main()
