"""Images for transform_sweep.py: PNG cuts of corpus photos, in three class folders.

usage: python transform_sweep_images.py OUT [CORPUS=/work/bench/corpus]
  env BIG=1: ten sizes, every one at least 120x120 (for the pixel-op cases, which crop 96x112
  first); otherwise twelve sizes from 33x257 to 640x427, some smaller than those crops.
"""

import os
import random
import sys
from pathlib import Path

from PIL import Image

SMALL = [(97, 131), (64, 64), (300, 200), (33, 257), (480, 360), (123, 77), (225, 225), (640, 427), (150, 151), (81, 500), (256, 256), (199, 301)]
BIG = [(120, 120), (300, 200), (480, 360), (225, 225), (640, 427), (150, 151), (256, 256), (199, 301), (131, 517), (333, 121)]


def main():
    out = Path(sys.argv[1])
    corpus = Path(sys.argv[2] if len(sys.argv) > 2 else "/work/bench/corpus")
    photos = sorted(corpus.rglob("*.jpg"))[:400]
    rng = random.Random(5)
    for i, (w, h) in enumerate(BIG if os.environ.get("BIG") else SMALL):
        image = Image.open(rng.choice(photos)).convert("RGB")
        if image.width >= w and image.height >= h:
            x, y = rng.randrange(image.width - w + 1), rng.randrange(image.height - h + 1)
            image = image.crop((x, y, x + w, y + h))
        else:
            image = image.resize((w, h))
        folder = out / f"c{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        image.save(folder / f"{i:02d}.png")


if __name__ == "__main__":
    main()
