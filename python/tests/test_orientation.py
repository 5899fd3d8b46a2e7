"""The EXIF orientation hpuload turns an image by (`exif_orientation`) is the one Pillow reads
(`Image.getexif()`'s tag 0x0112, what `ImageOps.exif_transpose` and `datasets` turn by),
over the places Pillow finds it and over damaged Exif data."""

import io
import random
import struct

import pytest
from PIL import Image, PngImagePlugin

from hpuload import _hpuload

ORIENTATION = 0x0112


def pillows(data: bytes) -> int | None:
    """The orientation Pillow turns `data` by (1 for none), or None where Pillow fails."""
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            value = im.getexif().get(ORIENTATION, 1)
    except Exception:
        return None
    # exif_transpose looks the value up among the keys 2-8, as a dict compares keys.
    return {k: k for k in range(2, 9)}.get(value, 1) if not isinstance(value, (list, dict)) else 1


def tiff(entries: list[tuple[int, int, int, bytes]], big: bool = False, extra: bytes = b"") -> bytes:
    """Exif data: a TIFF header and one directory of `(tag, type, count, value field)`
    entries (the value field padded to 4 bytes), then `extra` (values held by offset)."""
    order = ">" if big else "<"
    out = (b"MM\x00\x2a" if big else b"II\x2a\x00") + struct.pack(order + "I", 8)
    out += struct.pack(order + "H", len(entries))
    for tag, kind, count, value in entries:
        out += struct.pack(order + "HHI", tag, kind, count) + value.ljust(4, b"\0")
    return out + struct.pack(order + "I", 0) + extra


def short(v: int, big: bool = False) -> bytes:
    return struct.pack(">H" if big else "<H", v)


def image_bytes(fmt: str, **save) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (24, 16), (200, 40, 90)).save(out, format=fmt, **save)
    return out.getvalue()


XMP = '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:Description {}/></x:xmpmeta>'


def cases() -> list[tuple[str, bytes]]:
    made = []
    for v in range(0, 10):
        for big in (False, True):
            made.append((f"jpeg short {v} big={big}", image_bytes("JPEG", exif=b"Exif\0\0" + tiff([(ORIENTATION, 3, 1, short(v, big))], big))))
    for name, entry, extra in [
        ("long", (ORIENTATION, 4, 1, struct.pack("<I", 6)), b""),
        ("byte", (ORIENTATION, 1, 1, b"\x06"), b""),
        ("ascii", (ORIENTATION, 2, 2, b"6\0"), b""),
        ("undefined", (ORIENTATION, 7, 1, b"\x06"), b""),
        ("sshort", (ORIENTATION, 8, 1, short(8)), b""),
        ("sshort negative", (ORIENTATION, 8, 1, struct.pack("<h", -6)), b""),
        ("float", (ORIENTATION, 11, 1, struct.pack("<f", 3.0)), b""),
        ("two shorts", (ORIENTATION, 3, 2, short(5) + short(2)), b""),
        ("three shorts by offset", (ORIENTATION, 3, 3, struct.pack("<I", 26)), short(7) + short(1) + short(1)),
        ("rational", (ORIENTATION, 5, 1, struct.pack("<I", 26)), struct.pack("<II", 12, 2)),
        ("offset past the end", (ORIENTATION, 3, 3, struct.pack("<I", 4000)), b""),
        ("no values", (ORIENTATION, 3, 0, b""), b""),
        ("unknown type", (ORIENTATION, 99, 1, short(6)), b""),
    ]:
        made.append((f"jpeg {name}", image_bytes("JPEG", exif=b"Exif\0\0" + tiff([entry], extra=extra))))
    two = tiff([(ORIENTATION, 3, 1, short(3)), (ORIENTATION, 3, 1, short(6))])
    made.append(("jpeg two entries", image_bytes("JPEG", exif=b"Exif\0\0" + two)))
    skipped_first = tiff([(ORIENTATION, 99, 1, short(3)), (ORIENTATION, 3, 1, short(8))])
    made.append(("jpeg an entry skipped, then one", image_bytes("JPEG", exif=b"Exif\0\0" + skipped_first)))
    other = b"Exif\0\0" + tiff([(0x010F, 2, 4, b"abc\0")])
    for xmp in ('tiff:Orientation="6"', "tiff:Orientation='6'", "><tiff:Orientation>8</tiff:Orientation"):
        body = XMP.format(xmp).encode()
        made.append((f"jpeg xmp {xmp}", image_bytes("JPEG", xmp=body)))
        made.append((f"jpeg exif without the tag, xmp {xmp}", image_bytes("JPEG", exif=other, xmp=body)))
        made.append((f"jpeg exif 1, xmp {xmp}", image_bytes("JPEG", exif=b"Exif\0\0" + tiff([(ORIENTATION, 3, 1, short(1))]), xmp=body)))
    for v in (1, 3, 6, 8):
        exif = tiff([(ORIENTATION, 3, 1, short(v))])
        made.append((f"png exif {v}", image_bytes("PNG", exif=b"Exif\0\0" + exif)))
        made.append((f"webp exif {v}", image_bytes("WEBP", exif=b"Exif\0\0" + exif)))
        made.append((f"webp exif without its prefix {v}", image_bytes("WEBP", exif=exif)))
        made.append((f"webp xmp {v}", image_bytes("WEBP", xmp=XMP.format(f'tiff:Orientation="{v}"').encode())))
        dump = f"\nexif\n{len(exif):8}\n" + "\n".join(exif.hex()[i : i + 72] for i in range(0, len(exif.hex()), 72)) + "\n"
        for zip_ in (False, True):
            info = PngImagePlugin.PngInfo()
            info.add_text("Raw profile type exif", dump, zip=zip_)
            made.append((f"png raw profile {v} zip={zip_}", image_bytes("PNG", pnginfo=info)))
            info = PngImagePlugin.PngInfo()
            info.add_itxt("XML:com.adobe.xmp", XMP.format(f'tiff:Orientation="{v}"'), zip=zip_)
            made.append((f"png xmp {v} zip={zip_}", image_bytes("PNG", pnginfo=info)))
    return made


@pytest.mark.parametrize("name,data", cases(), ids=[n for n, _ in cases()])
def test_the_orientation_read_is_pillows(name, data):
    want = pillows(data)
    assert want is not None, "Pillow reads every case"
    assert _hpuload.exif_orientation(data) == want


def test_damaged_exif_data_reads_as_pillow_reads_it_where_pillow_reads_it():
    """Bytes of the Exif segment changed at random (the JPEG around it intact): wherever
    Pillow still reads an orientation, it is the one hpuload reads; hpuload never fails."""
    rng = random.Random(7)
    exif = b"Exif\0\0" + tiff([(0x010F, 2, 4, b"abc\0"), (ORIENTATION, 3, 1, short(6)), (0x0110, 3, 1, short(2))])
    compared = 0
    for _ in range(400):
        damaged = bytearray(exif)
        for _ in range(rng.randint(1, 3)):
            damaged[rng.randrange(6, len(damaged))] = rng.choice([0, 1, 3, 6, 0xFF, rng.randrange(256)])
        data = image_bytes("JPEG", exif=bytes(damaged))
        got = _hpuload.exif_orientation(data)
        want = pillows(data)
        if want is not None:
            assert got == want, bytes(damaged).hex()
            compared += 1
    assert compared > 300


# torchvision's readers (`decode_image(..., apply_exif_orientation=True)`) read the
# orientation elsewhere: the first APP1 segment whatever it holds, a PNG's eXIf chunk before
# the image data, nothing else (`exif_reader="torchvision"`).

#: The eight turns as torchvision's reader makes them of a `[C, H, W]` tensor, by orientation.
TURNS = {
    1: lambda t: t,
    2: lambda t: t.flip(-1),
    3: lambda t: t.flip(-2, -1),
    4: lambda t: t.flip(-2),
    5: lambda t: t.transpose(-1, -2),
    6: lambda t: t.transpose(-1, -2).flip(-1),
    7: lambda t: t.transpose(-1, -2).flip(-2, -1),
    8: lambda t: t.transpose(-1, -2).flip(-2),
}


def torchvisions(data: bytes) -> int | None:
    """The orientation torchvision's reader turned `data` by: the one of the eight turns of
    the image read as stored that gives the image it reads when told to turn it (the test
    images are noise, so exactly one does); None where torchvision fails."""
    import warnings

    import torch
    import torchvision.io as tio

    decode = getattr(tio.decode_image, "__wrapped__", tio.decode_image)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
            stored, turned = decode(raw), decode(raw, apply_exif_orientation=True)
        except Exception:
            return None
    hits = [k for k, turn in TURNS.items() if turn(stored).shape == turned.shape and torch.equal(turn(stored), turned)]
    assert len(hits) == 1, hits
    return hits[0]


def noise_bytes(fmt: str, **save) -> bytes:
    """A 24x16 image of seeded noise (no two of its turns alike), encoded as `fmt`."""
    rng = random.Random(5)
    im = Image.frombytes("RGB", (24, 16), bytes(rng.randrange(256) for _ in range(24 * 16 * 3)))
    out = io.BytesIO()
    im.save(out, format=fmt, **save)
    return out.getvalue()


def segment(code: int, body: bytes) -> bytes:
    return bytes([0xFF, code]) + struct.pack(">H", len(body) + 2) + body


def chunk(kind: bytes, body: bytes, crc: int | None = None) -> bytes:
    import zlib

    crc = zlib.crc32(kind + body) if crc is None else crc
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


def with_segments(jpeg: bytes, *segments: bytes, at: int = 2) -> bytes:
    return jpeg[:at] + b"".join(segments) + jpeg[at:]


def png_with(chunks: bytes, after_idat: bytes = b"") -> bytes:
    """The noise PNG with `chunks` right after its IHDR, and `after_idat` before its IEND."""
    png = noise_bytes("PNG")
    ihdr_end = 8 + 25
    iend = png.rindex(b"IEND") - 4
    return png[:ihdr_end] + chunks + png[ihdr_end:iend] + after_idat + png[iend:]


def torchvision_cases() -> list[tuple[str, bytes]]:
    made = []
    for v in range(0, 10):
        for big in (False, True):
            exif = b"Exif\0\0" + tiff([(ORIENTATION, 3, 1, short(v, big))], big)
            made.append((f"jpeg short {v} big={big}", noise_bytes("JPEG", exif=exif)))
            made.append((f"png eXIf {v} big={big}", png_with(chunk(b"eXIf", exif[6:]))))
    six = b"Exif\0\0" + tiff([(ORIENTATION, 3, 1, short(6))])
    three = b"Exif\0\0" + tiff([(ORIENTATION, 3, 1, short(3))])
    xmp = b"http://ns.adobe.com/xap/1.0/\0" + XMP.format('tiff:Orientation="6"').encode()
    plain = noise_bytes("JPEG")
    for name, entry in [
        ("long", (ORIENTATION, 4, 1, struct.pack("<I", 6))),
        ("long big-endian", None),
        ("byte", (ORIENTATION, 1, 1, b"\x06")),
        ("ascii", (ORIENTATION, 2, 2, b"6\0")),
        ("unknown type", (ORIENTATION, 99, 1, short(6))),
        ("no values", (ORIENTATION, 3, 0, short(6))),
    ]:
        exif = tiff([entry]) if entry else tiff([(ORIENTATION, 4, 1, struct.pack(">I", 6))], big=True)
        made.append((f"jpeg {name}", noise_bytes("JPEG", exif=b"Exif\0\0" + exif)))
    made += [
        ("jpeg two entries", noise_bytes("JPEG", exif=b"Exif\0\0" + tiff([(ORIENTATION, 3, 1, short(3)), (ORIENTATION, 3, 1, short(6))]))),
        ("jpeg another tag first", noise_bytes("JPEG", exif=b"Exif\0\0" + tiff([(0x010F, 2, 4, b"abc\0"), (ORIENTATION, 3, 1, short(8))]))),
        ("jpeg xmp only", with_segments(plain, segment(0xE1, xmp))),
        ("jpeg xmp before exif", with_segments(plain, segment(0xE1, xmp), segment(0xE1, six))),
        ("jpeg exif before xmp", with_segments(plain, segment(0xE1, six), segment(0xE1, xmp))),
        ("jpeg two exif segments", with_segments(plain, segment(0xE1, three), segment(0xE1, six))),
        ("jpeg exif under another name", with_segments(plain, segment(0xE1, b"Other\0" + six[6:]))),
        ("jpeg exif after a comment and a table", with_segments(plain, segment(0xFE, b"hello"), segment(0xE1, six), at=plain.index(b"\xff\xdb"))),
        ("jpeg a short app1", with_segments(plain, segment(0xE1, b"Exif"), segment(0xE1, six))),
        ("jpeg junk before the exif marker", with_segments(plain, b"\x00\x17junk\xff\x00", segment(0xE1, six), at=plain.index(b"\xff\xdb"))),
        ("jpeg exif after the scan", plain[:-2] + segment(0xE1, six) + plain[-2:]),
        ("png no exif", png_with(b"")),
        ("png two eXIf", png_with(chunk(b"eXIf", three[6:]) + chunk(b"eXIf", six[6:]))),
        ("png an eXIf of another byte order first", png_with(chunk(b"eXIf", b"XX" + three[8:]) + chunk(b"eXIf", six[6:]))),
        ("png an eXIf with a bad crc first", png_with(chunk(b"eXIf", three[6:], crc=1) + chunk(b"eXIf", six[6:]))),
        ("png eXIf after the image data", png_with(b"", after_idat=chunk(b"eXIf", six[6:]))),
        ("png a one-byte eXIf", png_with(chunk(b"eXIf", b"M") + chunk(b"eXIf", six[6:]))),
        ("png the text chunk Pillow reads", noise_bytes("PNG", pnginfo=_text("exif", six))),
        ("webp exif", noise_bytes("WEBP", exif=six, lossless=True)),
    ]
    return made


def _text(key: str, value: bytes):
    info = PngImagePlugin.PngInfo()
    info.add_text(key, value.decode("latin-1"))
    return info


@pytest.mark.parametrize("name,data", torchvision_cases(), ids=[n for n, _ in torchvision_cases()])
def test_the_orientation_read_for_torchvisions_reader_is_the_one_it_turns_by(name, data):
    want = torchvisions(data)
    assert want is not None, "torchvision reads every case"
    assert _hpuload.exif_orientation(data, "torchvision") == want


def test_damaged_exif_data_reads_as_torchvisions_reader_reads_it():
    """Bytes of a JPEG's Exif segment and of a PNG's eXIf chunk changed at random (offsets
    and counts thrown far, byte orders broken): the orientation is the one torchvision
    turns by wherever it decodes the image."""
    rng = random.Random(8)
    exif = tiff([(0x010F, 2, 4, b"abc\0"), (ORIENTATION, 3, 1, short(6)), (0x0110, 3, 1, short(2))])
    compared = 0
    for k in range(300):
        damaged = bytearray(exif)
        for _ in range(rng.randint(1, 3)):
            damaged[rng.randrange(len(damaged))] = rng.choice([0, 1, 3, 6, 0x12, 0xFF, rng.randrange(256)])
        if k % 2:
            data = with_segments(noise_bytes("JPEG"), segment(0xE1, b"Exif\0\0" + bytes(damaged)))
        else:
            data = png_with(chunk(b"eXIf", bytes(damaged)))
        want = torchvisions(data)
        if want is not None:
            assert _hpuload.exif_orientation(data, "torchvision") == want, (k, bytes(damaged).hex())
            compared += 1
    assert compared > 250
