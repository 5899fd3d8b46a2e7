#!/usr/bin/env python3
"""Single-thread, whole-image JPEG decode rate of libjpeg-turbo (through simplejpeg, accurate
integer IDCT and fancy upsampling, the settings our decoder matches) and of Pillow, over the
first N JPEGs of a folder in sorted order, the files `decode_speed` reads. Files are read into
memory first; only decoding is timed.

usage: python decode_only.py DIR [N=1000] [ROUNDS=3]
install: pip install simplejpeg pillow
"""
import io, os, sys, time

import simplejpeg
from PIL import Image

root = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3


def files(d, out):
    for name in sorted(os.listdir(d)):
        if len(out) >= n:
            return
        p = os.path.join(d, name)
        if os.path.isdir(p):
            files(p, out)
        elif name.endswith(".jpg"):
            out.append(open(p, "rb").read())


data = []
files(root, data)
for r in range(rounds):
    t = time.perf_counter()
    for b in data:
        simplejpeg.decode_jpeg(b, colorspace="RGB", fastdct=False, fastupsample=False)
    turbo = len(data) / (time.perf_counter() - t)
    t = time.perf_counter()
    for b in data:
        Image.open(io.BytesIO(b)).convert("RGB").load()
    pil = len(data) / (time.perf_counter() - t)
    print(f"round {r}: libjpeg-turbo (simplejpeg) {turbo:.0f}/s, Pillow {pil:.0f}/s ({len(data)} files)")
