"""Writes benchmark videos from the reference corpus's photographs: a camera panning and
zooming across each photo (real texture, steady motion), encoded by x264 as it encodes by
default (High profile, CABAC, B-frames, keyint 250) through PyAV, or with a keyframe every
`--gop` seconds (issue 30's benchmark set: `--seconds 10 --gop 2`).

    python benches/peers/video_make.py CORPUS OUT_DIR [--videos N] [--size WxH] [--seconds S] [--gop S]

Videos go to OUT_DIR/<class>/<name>.mp4, one class per corpus class, so the folder is also a
dataset for `hpuload bench --video`.
"""

import argparse
from pathlib import Path

import av
import numpy as np
from PIL import Image


def frames(photo: Image.Image, w: int, h: int, n: int):
    """A window of w x h moving across the photo and zooming in by a quarter over n frames."""
    photo = photo.convert("RGB")
    scale = max(w * 1.6 / photo.width, h * 1.6 / photo.height)
    big = photo.resize((round(photo.width * scale), round(photo.height * scale)), Image.BICUBIC)
    for i in range(n):
        t = i / max(n - 1, 1)
        zoom = 1.0 + 0.25 * t
        cw, ch = big.width / 1.6 / zoom * 1.0, big.height / 1.6 / zoom
        cw, ch = min(cw, big.width), min(ch, big.height)
        x = (big.width - cw) * t
        y = (big.height - ch) * (0.5 + 0.4 * np.sin(3.1 * t))
        box = (x, y, x + cw, y + ch)
        yield np.asarray(big.resize((w, h), Image.BILINEAR, box=box))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("corpus")
    p.add_argument("out")
    p.add_argument("--videos", type=int, default=20)
    p.add_argument("--size", default="640x360")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--fps", type=int, default=25)
    p.add_argument("--gop", type=float, default=None, help="seconds between keyframes (x264's default: 250 frames)")
    a = p.parse_args()
    w, h = map(int, a.size.split("x"))
    photos = sorted(Path(a.corpus).glob("*/*.jpg"))
    step = max(len(photos) // a.videos, 1)
    n = round(a.seconds * a.fps)
    for k, photo in enumerate(photos[::step][: a.videos]):
        dest = Path(a.out) / photo.parent.name / f"{photo.stem}.mp4"
        dest.parent.mkdir(parents=True, exist_ok=True)
        with av.open(str(dest), "w") as out:
            s = out.add_stream("libx264", rate=a.fps)
            s.width, s.height, s.pix_fmt = w, h, "yuv420p"
            s.options = {"crf": "23"}
            if a.gop:
                s.options = {**s.options, "g": str(round(a.gop * a.fps))}
            for f in frames(Image.open(photo), w, h, n):
                for packet in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                    out.mux(packet)
            for packet in s.encode(None):
                out.mux(packet)
        print(dest)


if __name__ == "__main__":
    main()
