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


def native(*args, **kwargs):
    """hpuload's DataLoader, which must run natively: a FallbackWarning is an error."""
    import warnings

    from hpuload.torch import DataLoader, FallbackWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        return DataLoader(*args, **kwargs)


def fallback_reason(*args, **kwargs) -> str:
    """What the FallbackWarnings of building hpuload's DataLoader say (one must be given)."""
    from hpuload.torch import DataLoader, FallbackWarning

    with pytest.warns(FallbackWarning) as caught:
        DataLoader(*args, **kwargs)
    return " ".join(str(w.message) for w in caught if issubclass(w.category, FallbackWarning))


def same(a, b) -> bool:
    """Equal batches: tensors bit for bit, of one dtype and shape (a tv_tensor as its plain
    tensor), in lists and tuples alike."""
    import torch

    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(a.as_subclass(torch.Tensor), b.as_subclass(torch.Tensor))
        )
    return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def copy_photos(jpeg_folder: Path, out: Path, count: int = 12) -> list[Path]:
    """The first `count` photos of `jpeg_folder`, copied into the folder `out` (made)."""
    out.mkdir(parents=True, exist_ok=True)
    copied = []
    for path in sorted(jpeg_folder.rglob("*.jpg"))[:count]:
        copied.append(out / path.name)
        copied[-1].write_bytes(path.read_bytes())
    return copied
