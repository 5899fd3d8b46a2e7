"""The files a real image folder holds, decoded as the user's own loader decodes them.

torchvision's `ImageFolder` opens every file with Pillow and converts it to RGB; the drop-in
decodes natively, so each kind of file a dataset may hold (progressive JPEGs, JPEGs with a scan
per component, arithmetic-coded, grey, RGB, CMYK and YCCK JPEGs, 4:1:1 and other samplings,
16-bit and palette PNGs, WebP, BMP (16-bit too), PGM and PPM of any maxval) is read here both
ways through a transform that only crops, so any difference is the decoder's: there is none."""

import shutil
import struct
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import datasets
from torchvision import transforms as T

from hpuload.torch import DataLoader

SCANS = Path(__file__).resolve().parents[2] / "decoders" / "tests" / "fixtures" / "host"


def png(pixels: np.ndarray, depth: int, colour: int) -> bytes:
    """A PNG of `pixels` (rows x columns [x channels]) at 8 or 16 bits, written by hand: Pillow
    writes no 16-bit colour PNGs."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    height, width = pixels.shape[:2]
    kind = ">u2" if depth == 16 else "u1"
    raw = b"".join(b"\0" + pixels[y].astype(kind).tobytes() for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def bmp565(rgb: np.ndarray) -> bytes:
    """A 16-bit 5-6-5 BMP (BI_BITFIELDS) of `rgb`, bottom-up: Pillow writes none."""
    height, width = rgb.shape[:2]
    c = rgb.astype(np.uint32)
    pixels = ((c[..., 0] >> 3) << 11 | (c[..., 1] >> 2) << 5 | (c[..., 2] >> 3)).astype("<u2")
    stride = (width * 2 + 3) // 4 * 4
    rows = b"".join(pixels[y].tobytes().ljust(stride, b"\0") for y in range(height - 1, -1, -1))
    offset = 14 + 40 + 12
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 16, 3, len(rows), 2835, 2835, 0, 0)
    masks = struct.pack("<III", 0xF800, 0x07E0, 0x001F)
    return b"BM" + struct.pack("<IHHI", offset + len(rows), 0, 0, offset) + info + masks + rows


@pytest.fixture(scope="module")
def mixed_folder(jpeg_folder, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("formats")
    out = root / "mixed"
    out.mkdir()
    photos = sorted(jpeg_folder.rglob("*.jpg"))
    rng = np.random.default_rng(5)
    for i, path in enumerate(photos[:3]):
        im = Image.open(path).convert("RGB").resize((75, 53))
        im.save(out / f"{i}_progressive_420.jpg", quality=90, progressive=True)
        im.save(out / f"{i}_progressive_444.jpg", quality=85, progressive=True, subsampling=0)
        im.save(out / f"{i}_progressive_422.jpg", quality=75, progressive=True, subsampling=1)
        im.convert("L").save(out / f"{i}_progressive_grey.jpg", quality=90, progressive=True)
        im.save(out / f"{i}_optimized.jpg", quality=80, optimize=True)
        im.convert("L").save(out / f"{i}_grey.jpg", quality=90)
        im.convert("CMYK").save(out / f"{i}_cmyk.jpg", quality=90)
        im.save(out / f"{i}_lossy.webp", quality=80)
        im.convert("P", palette=Image.ADAPTIVE, colors=40).save(out / f"{i}_palette.png", transparency=3)
        grey_alpha = im.convert("L")
        grey_alpha.putalpha(im.convert("L").transpose(Image.FLIP_LEFT_RIGHT))
        grey_alpha.save(out / f"{i}_grey_alpha.png")
        wide = np.asarray(im).astype(np.uint16) * 257 + rng.integers(0, 257, (53, 75, 3), dtype=np.uint16)
        (out / f"{i}_rgb16.png").write_bytes(png(wide, 16, 2))
        (out / f"{i}_grey16.png").write_bytes(png(wide[..., 1] // 200, 16, 0))
        (out / f"{i}_grey16_full.png").write_bytes(png(wide[..., 1], 16, 0))
        im.save(out / f"{i}_rgb.bmp")
        im.convert("P", palette=Image.ADAPTIVE, colors=100).save(out / f"{i}_palette.bmp")
        (out / f"{i}_rgb565.bmp").write_bytes(bmp565(np.asarray(im)))
        head = b"P5\n# maxval 100\n75 53\n100\n"
        (out / f"{i}_max100.pgm").write_bytes(head + (np.asarray(im.convert("L")).astype(np.int64) * 100 // 255).astype("u1").tobytes())
        (out / f"{i}_deep.ppm").write_bytes(b"P6 75 53 4095\n" + (wide >> 4).astype(">u2").tobytes())
    # Made by cjpeg with scan scripts and by imagecodecs (decoders/tests/fixtures/host/make_fixtures.sh).
    for name in ["seq_scans_s420_123x77.jpg", "seq_scans_s444_61x47.jpg", "prog_approx_s420_123x77.jpg",
                 "prog_restart_s420_123x77.jpg", "transcoded_restart3_s420_123x77.jpg", "ycck_61x47.jpg",
                 "rgb_61x47.jpg", "rgb_by_ids_61x47.jpg", "s411_61x47.jpg", "s_mixed_chroma_61x47.jpg",
                 "arith_s420_123x77.jpg", "arith_prog_restart_s422_123x77.jpg"]:
        shutil.copy(SCANS / name, out / name)
    return root


def test_every_kind_of_file_decodes_to_pillows_pixels_on_the_cpu_backend(mixed_folder):
    tf = T.Compose([T.CenterCrop((40, 56)), T.PILToTensor()])
    ds = datasets.ImageFolder(mixed_folder, tf)
    expected = torch.stack([ds[i][0] for i in range(len(ds))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback, no skipped file
        loader = DataLoader(ds, batch_size=len(ds), shuffle=False, backend="cpu", error_budget=0.0)
        (got, labels), = list(loader)
    assert got.shape == expected.shape and got.dtype == torch.uint8
    for i, (path, _) in enumerate(ds.samples):
        diff = (got[i].int() - expected[i].int()).abs().max().item()
        assert diff == 0, f"{Path(path).name}: {diff} levels from Pillow's"
    assert labels.tolist() == [0] * len(ds)
