"""Datasets the Python tests share: real JPEGs written by hpuload's own generator, and the same
images as lossless PNGs (so a comparison with torchvision isolates what hpuload computes)."""

import os
from pathlib import Path

import pytest

from hpuload._hpuload import cli


@pytest.fixture(scope="session")
def jpeg_folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("jpegs")
    assert cli(["hpuload", "make-dataset", "--out", str(root), "--images", "41", "--seed", "3"]) == 0
    return root


@pytest.fixture(scope="session")
def png_folder(jpeg_folder, tmp_path_factory) -> Path:
    from PIL import Image

    root = tmp_path_factory.mktemp("pngs")
    for jpg in sorted(jpeg_folder.rglob("*.jpg"))[:12]:
        out = root / jpg.parent.name / (jpg.stem + ".png")
        out.parent.mkdir(parents=True, exist_ok=True)
        Image.open(jpg).convert("RGB").save(out)
    return root


def state_after(loader, batches: int) -> dict:
    """The loader's state after `batches` batches of a fresh pass, through JSON as a checkpoint
    keeps it."""
    import json

    it = iter(loader)
    for _ in range(batches):
        next(it)
    state = json.loads(json.dumps(loader.state_dict()))
    del it
    return state


def resumed_after(make, batches: int) -> tuple[list, list]:
    """`(rest, resumed)`: a fresh pass's batches after its first `batches`, and the batches of a
    new loader given the state after them (`make()` builds each loader)."""
    rest = list(make())[batches:]
    resumed = make()
    resumed.load_state_dict(state_after(make(), batches))
    return rest, list(resumed)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def png_with_chunk(image, out, name: bytes, data: bytes) -> None:
    """Saves the PIL `image` as a PNG at `out` with a chunk `name` of `data` after its IHDR
    (a gamma, chromaticities, a transparent colour: what Pillow does not write itself)."""
    import io
    import struct
    import zlib

    buf = io.BytesIO()
    image.save(buf, "PNG")
    png = buf.getvalue()
    chunk = struct.pack(">I", len(data)) + name + data + struct.pack(">I", zlib.crc32(name + data))
    with open(out, "wb") as f:
        f.write(png[:33] + chunk + png[33:])
