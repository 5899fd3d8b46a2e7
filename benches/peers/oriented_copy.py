"""A copy of an image folder in which some photos carry an EXIF orientation, as a folder of
phone photos does: every `EVERY`-th JPEG gets an APP1 Exif segment with Orientation 6 (a
phone held upright) after its start marker, its pixels untouched; the rest are copied as
they are. With `--table`, also a `datasets` `save_to_disk` table of the copy (embedded
bytes), for the Hugging Face loaders (`datasets` turns such photos as it decodes them).

usage: python oriented_copy.py SRC DST [--images 1000] [--every 10] [--orientation 6] [--table]"""

import argparse
import os
import shutil
import struct


def exif_segment(orientation: int) -> bytes:
    """An APP1 segment of Exif data (little-endian TIFF, one directory) holding `orientation`."""
    body = b"Exif\0\0II*\0" + struct.pack("<IH", 8, 1) + struct.pack("<HHIH2x", 0x0112, 3, 1, orientation)
    body += struct.pack("<I", 0)
    return b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body


def main():
    p = argparse.ArgumentParser()
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--images", type=int, default=1000)
    p.add_argument("--every", type=int, default=10)
    p.add_argument("--orientation", type=int, default=6)
    p.add_argument("--table", action="store_true")
    a = p.parse_args()
    files = sorted(
        os.path.join(root, f) for root, _, names in os.walk(a.src) for f in names if f.lower().endswith((".jpg", ".jpeg"))
    )[: a.images]
    turned = 0
    for k, path in enumerate(files):
        out = os.path.join(a.dst, os.path.relpath(path, a.src))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        if k % a.every == 0:
            data = open(path, "rb").read()
            with open(out, "wb") as f:
                f.write(data[:2] + exif_segment(a.orientation) + data[2:])
            turned += 1
        else:
            shutil.copyfile(path, out)
    print(f"{len(files)} photos, {turned} with orientation {a.orientation}, in {a.dst}")
    if a.table:
        import datasets

        ds = datasets.load_dataset("imagefolder", data_dir=a.dst, split="train", cache_dir=f"{a.dst}.cache")
        ds.save_to_disk(f"{a.dst}.saved")
        print(f"table: {a.dst}.saved")


if __name__ == "__main__":
    main()
