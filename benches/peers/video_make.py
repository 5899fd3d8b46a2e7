"""Writes benchmark videos from the reference corpus's photographs: a camera panning and
zooming across each photo (real texture, steady motion), encoded by x264 as it encodes by
default (High profile, CABAC, B-frames, keyint 250) through PyAV, or with a keyframe every
`--gop` seconds (issue 30's benchmark set: `--seconds 10 --gop 2`).

    python benches/peers/video_make.py CORPUS OUT_DIR [--videos N] [--size WxH] [--seconds S] [--gop S]

Videos go to OUT_DIR/<class>/<name>.mp4, one class per corpus class, so the folder is also a
dataset for `hpuload bench --video`.

`--xvid` writes UCF101's kind of file instead: MPEG-4 Part 2 (simple profile, no B-frames,
tagged XVID, about 350 kb/s at 320x240 as UCF101's are) in AVI, to OUT_DIR/videos/<class>/
v_<class>_<name>.avi, with fold 1's split files in OUT_DIR/splits (every video in the training
split), so that torchvision's `UCF101(OUT_DIR/videos, OUT_DIR/splits, ...)` reads them.
`--xvid --packed`: DivX with B-frames stored in a packed bitstream (a reference and a B-frame
in one chunk, an N-VOP where the reference is shown), as many of UCF101's files are; packed by
`tests/data/video/make_fixtures.py`'s `pack_avi`.
"""

import argparse
import sys
from pathlib import Path

import av
import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "data" / "video"))
from make_fixtures import pack_avi  # noqa: E402


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
    p.add_argument("--xvid", action="store_true", help="MPEG-4 Part 2 in AVI, UCF101's layout")
    p.add_argument(
        "--packed", action="store_true", help="with --xvid: DivX with B-frames in a packed bitstream, as many UCF101 files"
    )
    a = p.parse_args()
    w, h = map(int, a.size.split("x"))
    photos = sorted(Path(a.corpus).glob("*/*.jpg"))
    step = max(len(photos) // a.videos, 1)
    n = round(a.seconds * a.fps)
    listed = []
    for k, photo in enumerate(photos[::step][: a.videos]):
        if a.xvid:
            cls = photo.parent.name
            dest = Path(a.out) / "videos" / cls / f"v_{cls}_{photo.stem}.avi"
            listed.append(f"{cls}/{dest.name} {k + 1}")
        else:
            dest = Path(a.out) / photo.parent.name / f"{photo.stem}.mp4"
        dest.parent.mkdir(parents=True, exist_ok=True)
        with av.open(str(dest), "w") as out:
            if a.xvid:
                s = out.add_stream("mpeg4", rate=a.fps)
                s.codec_tag = "DX50" if a.packed else "XVID"
                s.bit_rate = 350_000 * w * h // (320 * 240)
                s.codec_context.max_b_frames = 1 if a.packed else 0
                s.codec_context.gop_size = round((a.gop or 12) * a.fps)
            else:
                s = out.add_stream("libx264", rate=a.fps)
                s.options = {"crf": "23"}
                if a.gop:
                    s.options = {**s.options, "g": str(round(a.gop * a.fps))}
            s.width, s.height, s.pix_fmt = w, h, "yuv420p"
            for f in frames(Image.open(photo), w, h, n):
                for packet in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                    out.mux(packet)
            for packet in s.encode(None):
                out.mux(packet)
        if a.packed:
            unpacked = dest.with_suffix(".unpacked.avi")
            dest.rename(unpacked)
            pack_avi(unpacked, dest, increment_bits=(a.fps - 1).bit_length())
            unpacked.unlink()
        print(dest)
    if a.xvid:
        (Path(a.out) / "splits").mkdir(parents=True, exist_ok=True)
        (Path(a.out) / "splits" / "trainlist01.txt").write_text("\n".join(listed) + "\n")


if __name__ == "__main__":
    main()
