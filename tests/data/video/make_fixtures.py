"""Writes the test clips in this folder (H.264 in MP4, MPEG-4 Part 2 in AVI) and
`expected.json`, what FFmpeg (through PyAV) decodes from them: every frame's presentation time,
keyframe flag and a hash of each YUV plane.

The clips are tiny (a few KB) and drawn here: a gradient background that drifts, a square that
moves and changes brightness, so that motion compensation, B-frames and the deblocking filter
all have work to do. Rerun with `python tests/data/video/make_fixtures.py` (needs `av`); the
Rust tests read only the files it writes. `--avi` writes the MPEG-4 Part 2 clips (AVI, and one in MP4) and the MPEG-2 one in
`mp4v` alone, keeping the other entries of `expected.json`; `--packed` writes `divx_packed.avi` alone, from
`divx_bframes.avi`; `--turned` writes the clips shown turned (`turned_*.mp4`, display matrices set in
`high_bframes.mp4`'s headers) and adds each clip's display angle to `expected.json`; `--colours` writes the
clips whose SPS declares BT.709 or full range, with FFmpeg's RGB of two frames of each, and adds each clip's
colour tags to `expected.json`; `--cut` writes `cut.mp4`, `high_bframes.mp4` with its edit list cut to frames 5
to 24 (as a stream copy between keyframes writes it); `--edits` writes `delayed.mp4` (an empty edit first: a start
delay), `two_edits.mp4` (two pieces of `high_bframes.mp4` one after the other), `delayed_fragmented.mp4`,
`negative_cts.mp4`, `frag_moov.mp4`, `cmaf.mp4`, `avc3.mp4`, `open_gop.mp4` and `open_gop_edits.mp4`;
`--sampling` writes `yuv444.mp4` and `high10.mp4` (H.264 that is not 8-bit 4:2:0, which hpuload refuses by name),
and `interlaced.mp4` and `lossless.mp4` (H.264 that only FFmpeg's decoder takes).
"""

import json
import struct
import sys
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

HERE = Path(__file__).resolve().parent


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def picture(i: int, w: int, h: int) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    img = np.empty((h, w, 3), np.uint8)
    img[..., 0] = (x * 255 // max(w - 1, 1) + 3 * i) % 256
    img[..., 1] = (y * 255 // max(h - 1, 1) + 5 * i) % 256
    img[..., 2] = ((x + y + 7 * i) * 2) % 256
    s = max(8, w // 5)
    x0 = (4 * i) % (w - s)
    y0 = (3 * i) % (h - s)
    img[y0 : y0 + s, x0 : x0 + s] = (40 + 8 * i) % 256
    return img


def write(name, w, h, frames, options, profile=None, pts=None, time_base=Fraction(1, 25), muxer=None, pix_fmt="yuv420p"):
    path = HERE / name
    with av.open(str(path), "w", format="mp4", options=muxer or {}) as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height = w, h
        stream.pix_fmt = pix_fmt
        stream.time_base = time_base
        stream.codec_context.time_base = time_base
        stream.options = options
        if profile:
            stream.options = options | {"profile": profile}
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(picture(i, w, h), format="rgb24")
            frame.pts = i if pts is None else pts[i]
            frame.time_base = time_base
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


def write_mpeg4(name, w, h, frames, bframes=0, gop=12, audio=False, tag="XVID", container="avi"):
    """MPEG-4 Part 2 from FFmpeg's own MPEG-4 encoder. In AVI (`tag` its FourCC), as UCF101's
    and HMDB51's files are (Xvid, DivX); with `audio`, a PCM track interleaved, as a camera
    writes one. In MP4 (`mp4v`, no tag), as FFmpeg's muxer writes it: the VOL header in the
    `esds` descriptor only (the muxer asks for global headers), B-frames' times in `ctts`."""
    path = HERE / name
    with av.open(str(path), "w", format=container) as out:
        stream = out.add_stream("mpeg4", rate=25)
        stream.width, stream.height = w, h
        stream.pix_fmt = "yuv420p"
        if container == "avi":
            stream.codec_tag = tag
        stream.codec_context.gop_size = gop
        stream.codec_context.max_b_frames = bframes
        sound = out.add_stream("pcm_s16le", rate=8000) if audio else None
        if sound is not None:
            sound.layout = "mono"
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(picture(i, w, h), format="rgb24")
            frame.pts = i
            for packet in stream.encode(frame):
                out.mux(packet)
            if sound is not None:
                tone = (1000 * np.sin(np.arange(320) * (0.1 + i / 100))).astype(np.int16)[None]
                chunk = av.AudioFrame.from_ndarray(tone, format="s16", layout="mono")
                chunk.sample_rate, chunk.pts = 8000, 320 * i
                for packet in sound.encode(chunk):
                    out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


def write_mpeg2_in_mp4v():
    """MPEG-2 video in MP4, as FFmpeg's muxer writes it: the same `mp4v` sample entry as
    MPEG-4 Part 2, object type 0x61 in its `esds` descriptor. Two flat frames: hpuload only
    has to name the codec."""
    path = HERE / "mpeg2_in_mp4v.mp4"
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("mpeg2video", rate=25)
        stream.width, stream.height = 32, 32
        stream.pix_fmt = "yuv420p"
        for i in range(2):
            frame = av.VideoFrame.from_ndarray(np.full((32, 32, 3), 60 * i, np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)


def vop_starts(data: bytes) -> list[int]:
    """Where each VOP start code (00 00 01 B6) begins in a frame's bytes."""
    out, at = [], data.find(b"\x00\x00\x01\xb6")
    while at >= 0:
        out.append(at)
        at = data.find(b"\x00\x00\x01\xb6", at + 4)
    return out


def vop_kind(data: bytes) -> str:
    return "IPBS"[data[vop_starts(data)[0] + 4] >> 6]


def n_vop(increment_bits: int) -> bytes:
    """A P-VOP with `vop_coded` 0, as DivX writes where a packed reference is shown: coding
    type 01, no second passed (0), marker, a zero time increment, marker, not coded, then the
    stuffing to the byte (a 0 and ones)."""
    bits = "01" + "0" + "1" + "0" * increment_bits + "1" + "0"
    bits += "0" + "1" * (7 - len(bits) % 8)
    return b"\x00\x00\x01\xb6" + int(bits, 2).to_bytes(len(bits) // 8, "big")


def write_packed_avi(name, source):
    """`source` in this folder packed into `name` (see `pack_avi`)."""
    return pack_avi(HERE / source, HERE / name)


def pack_avi(source, path, increment_bits=5):
    """The frames of `source` (MPEG-4 with B-frames in AVI, from FFmpeg's encoder) stored at
    `path` as a DivX "packed bitstream", as many of UCF101's files are: each reference shares
    its chunk with the B-frame after it (decoding order), the other B-frames follow alone, then
    an N-VOP where the reference is shown; "DivX503b1393p" in the first frame's user data, as
    DivX marks it. The pictures are the source's, bit for bit. `increment_bits`: the VOL's
    (FFmpeg's encoder at 25 frames a second: a time resolution of 25, 5 bits)."""
    with av.open(str(source)) as inp:
        video = inp.streams.video[0]
        coded = [bytes(p) for p in inp.demux(video) if p.size]
        nvop = n_vop(increment_bits)
        chunks, k = [], 0
        while k < len(coded):
            if vop_kind(coded[k]) != "B" and k + 1 < len(coded) and vop_kind(coded[k + 1]) == "B":
                chunks.append(coded[k] + coded[k + 1])
                k += 2
                while k < len(coded) and vop_kind(coded[k]) == "B":
                    chunks.append(coded[k])
                    k += 1
                chunks.append(nvop)
            else:
                chunks.append(coded[k])
                k += 1
        assert len(chunks) == len(coded)
        chunks[0] = chunks[0].replace(b"Lavc", b"DivX503b1393p\x00Lavc", 1)
        with av.open(str(path), "w", format="avi") as out:
            stream = out.add_stream_from_template(video)
            for i, data in enumerate(chunks):
                packet = av.Packet(data)
                packet.stream, packet.time_base = stream, video.time_base
                packet.pts = packet.dts = i
                packet.is_keyframe = vop_kind(data) == "I"
                out.mux(packet)
    return path


def boxes(data: bytes, start: int, end: int):
    """(type, where its body starts, where it ends) of each box in `data[start:end]`."""
    at = start
    while at + 8 <= end:
        size, kind = struct.unpack(">I4s", data[at : at + 8])
        header = 8
        if size == 1:
            size, header = struct.unpack(">Q", data[at + 8 : at + 16])[0], 16
        elif size == 0:
            size = end - at
        yield kind, at + header, at + size
        at += size


def write_turned(name, source, track, movie=None):
    """`source` with the display matrix of its track (`tkhd`) set to `track` (a b c d, 16.16),
    and its movie's (`mvhd`) to `movie`: the same frames, shown turned (as a phone writes a
    video held on its side)."""
    data = bytearray((HERE / source).read_bytes())

    def put(body, at_v0, at_v1, abcd):
        at = body + (at_v0 if data[body] == 0 else at_v1)
        a, b, c, d = abcd
        data[at : at + 36] = struct.pack(">9i", a, b, 0, c, d, 0, 0, 0, 1 << 30)

    for kind, body, end in boxes(data, 0, len(data)):
        if kind != b"moov":
            continue
        for kind, child, child_end in boxes(data, body, end):
            if kind == b"mvhd" and movie:
                put(child, 36, 48, movie)
            if kind == b"trak":
                for kind, tkhd, _ in boxes(data, child, child_end):
                    if kind == b"tkhd":
                        put(tkhd, 40, 52, track)
    (HERE / name).write_bytes(bytes(data))
    return HERE / name


F = 1 << 16


def write_cut(name, source, skip, keep):
    """`source` (25 frames a second, 12800 ticks a second, its movie 1000) with its edit list
    moved to start `skip` frames later and last `keep` frames: what a stream copy cut between
    keyframes writes (`ffmpeg -ss ... -c copy`). FFmpeg decodes the frames before the cut from
    the keyframe but shows only those inside it."""
    data = bytearray((HERE / source).read_bytes())

    def walk(start, end):
        for kind, body, box_end in boxes(data, start, end):
            if kind in (b"moov", b"trak", b"edts"):
                walk(body, box_end)
            elif kind == b"elst":
                assert data[body] == 0 and struct.unpack(">I", data[body + 4 : body + 8])[0] == 1
                media_time = struct.unpack(">i", data[body + 12 : body + 16])[0]
                data[body + 8 : body + 16] = struct.pack(">Ii", keep * 40, media_time + skip * 512)

    walk(0, len(data))
    (HERE / name).write_bytes(bytes(data))
    return HERE / name


def write_edits(name, source, edits):
    """`source` (its `moov` last) with its edit list replaced by `edits`, each (duration in
    the movie's timescale, media time in the track's, -1 for an empty edit): what an editor
    writes for a start delay (an empty edit first, as FFmpeg's muxer writes for a stream that
    starts late) or for pieces of the media shown one after the other."""
    data = bytes((HERE / source).read_bytes())
    body = struct.pack(">I", len(edits)) + b"".join(struct.pack(">IiI", d, t, F) for d, t in edits)

    elst = struct.pack(">I4sI", len(body) + 12, b"elst", 0) + body

    def rewrite(start, end):
        out = b""
        kinds = [kind for kind, _, _ in boxes(data, start, end)]
        for kind, child, child_end in boxes(data, start, end):
            header = data[child - 8 + 4 : child]
            if kind in (b"moov", b"trak", b"edts"):
                inner = rewrite(child, child_end)
            elif kind == b"elst":
                inner = data[child : child + 4] + body
            else:
                out += data[child - 8 : child_end]
                if kind == b"tkhd" and b"edts" not in kinds:  # a track without an edit list
                    out += struct.pack(">I4s", len(elst) + 8, b"edts") + elst
                continue
            out += struct.pack(">I", len(inner) + 8) + header + inner
        return out

    (HERE / name).write_bytes(rewrite(0, len(data)))
    return HERE / name


def write_avc3(name, source):
    """A clip written as `source` with x264's `repeat-headers` (its SPS and PPS in every
    keyframe), then rewritten as an
    `avc3` entry whose configuration record holds no parameter sets, as DASH packagers write
    it: the decoder finds them in the stream."""
    x264 = "keyint=12:min-keyint=12:scenecut=0:bframes=3:b-pyramid=normal:repeat-headers=1"
    written = write(source, 96, 72, 30, {"x264-params": x264}, profile="high")
    data = written.read_bytes()
    written.unlink()

    def rewrite(start, end):
        out = b""
        for kind, child, child_end in boxes(data, start, end):
            header = data[child - 4 : child]
            if kind in (b"moov", b"trak", b"mdia", b"minf", b"stbl"):
                inner = rewrite(child, child_end)
            elif kind == b"stsd":
                _, entry_at, entry_end = next(boxes(data, child + 8, child_end))
                # The visual sample entry's 78 bytes, then its boxes, `avcC` emptied.
                entry = data[entry_at : entry_at + 78]
                for inner_kind, body, body_end in boxes(data, entry_at + 78, entry_end):
                    if inner_kind == b"avcC":
                        record = data[body : body + 5] + bytes([0xE0, 0])
                        entry += struct.pack(">I4s", len(record) + 8, b"avcC") + record
                    else:
                        entry += data[body - 8 : body_end]
                inner = data[child : child + 8] + struct.pack(">I4s", len(entry) + 8, b"avc3") + entry
            else:
                out += data[child - 8 : child_end]
                continue
            out += struct.pack(">I", len(inner) + 8) + header + inner
        return out

    (HERE / name).write_bytes(rewrite(0, len(data)))
    return HERE / name


def edited_clips():
    """`high_bframes.mp4` (30 frames at 25 a second, 512 ticks each; its edit starts at 1024)
    delayed by 0.2 s, and shown as two pieces: frames 0-9, then 15-24; `fragmented.mp4`
    (no edit list) delayed by 0.2 s and moved back by 1024 ticks; a file with negative
    composition offsets, which FFmpeg's muxer writes with `-movflags negative_cts_offsets`;
    two fragmented otherwise than `fragmented.mp4`; one whose parameter sets are in the
    stream only (`avc3`); and open GOPs, with one edit and with two."""
    x264 = {"x264-params": "keyint=12:min-keyint=12:scenecut=0:bframes=3:b-pyramid=normal"}
    return [
        write_edits("delayed.mp4", "high_bframes.mp4", [(200, -1), (1200, 1024)]),
        write_edits("two_edits.mp4", "high_bframes.mp4", [(400, 1024), (400, 1024 + 15 * 512)]),
        # A fragmented file's edit list moves its times only.
        write_edits("delayed_fragmented.mp4", "fragmented.mp4", [(200, -1), (0, 1024)]),
        # Negative composition offsets (`ctts` version 1), the edit list starting at 0.
        write(
            "negative_cts.mp4",
            96,
            72,
            30,
            x264,
            profile="high",
            muxer={"movflags": "negative_cts_offsets"},
        ),
        # Fragmented as `-movflags frag_keyframe` writes it: the first GOP in the movie's own
        # tables, the rest in fragments; and as CMAF (negative composition offsets).
        write("frag_moov.mp4", 96, 72, 30, x264, profile="high", muxer={"movflags": "frag_keyframe"}),
        write("cmaf.mp4", 96, 72, 30, x264, profile="high", muxer={"movflags": "cmaf+frag_keyframe"}),
        # Parameter sets in the stream only (`avc3`).
        write_avc3("avc3.mp4", "avc3_source.mp4"),
        # Open GOPs (keyframes after the first are recovery points, not IDR pictures, and the
        # frames after them may refer to the GOP before), and two edits of one.
        write("open_gop.mp4", 96, 72, 40, {"x264-params": x264["x264-params"] + ":open-gop=1"}, profile="high"),
        write_edits("open_gop_edits.mp4", "open_gop.mp4", [(500, 1024), (300, 1024 + 20 * 512)]),
    ]


def sampling_clips():
    """H.264 sampled otherwise than 8-bit 4:2:0, which hpuload refuses by name: 4:4:4 (what
    x264 makes of RGB images unless told otherwise) and 10-bit 4:2:0."""
    gop = {"x264-params": "keyint=6:min-keyint=6:scenecut=0:bframes=2"}
    return [
        write("yuv444.mp4", 64, 48, 12, gop, pix_fmt="yuv444p"),
        write("high10.mp4", 64, 48, 12, gop, pix_fmt="yuv420p10le"),
    ]


def libavcodec_clips():
    """H.264 that only FFmpeg's decoder takes (OpenH264 refuses its SPS): interlaced
    (field macroblock pairs, x264's `tff`), and lossless (`qp=0`: transform bypass)."""
    gop = "keyint=6:min-keyint=6:scenecut=0:bframes=2"
    return [
        write("interlaced.mp4", 64, 48, 12, {"x264-params": gop + ":tff=1"}),
        write("lossless.mp4", 64, 48, 12, {"x264-params": gop + ":qp=0"}),
    ]


def turned_clips():
    return [
        write_turned("turned_cw.mp4", "high_bframes.mp4", (0, F, -F, 0)),
        write_turned("turned_half.mp4", "high_bframes.mp4", (-F, 0, 0, -F)),
        write_turned("turned_ccw.mp4", "high_bframes.mp4", (0, -F, F, 0)),
        # The movie's matrix applies after the track's: a quarter turn clockwise, then a half.
        write_turned("turned_movie.mp4", "high_bframes.mp4", (0, F, -F, 0), movie=(-F, 0, 0, -F)),
    ]


def colour_clips():
    """Clips whose SPS declares their colours (as phones and HD sources do): BT.709, full
    range, both; one whose container alone declares them; and FFmpeg's own RGB of frames 0
    and 5 of each (swscale, honouring the tags,
    as torchcodec, PyAV and decord convert them), raw 72 x 96 x 3 bytes each."""
    tagged = "keyint=6:min-keyint=6:scenecut=0:bframes=2"
    bt709 = ":colormatrix=bt709:colorprim=bt709:transfer=bt709"
    clips = [
        write("bt709.mp4", 96, 72, 12, {"x264-params": tagged + bt709}),
        write("full_range.mp4", 96, 72, 12, {"x264-params": tagged + ":fullrange=on"}),
        write("full_range_bt709.mp4", 96, 72, 12, {"x264-params": tagged + ":fullrange=on" + bt709}),
    ]
    # The same tags in the container alone (`colr`: BT.709, full range), the SPS silent: a
    # stream copy of `high_bframes.mp4`, as a remux tagging the colours writes it.
    with av.open(str(HERE / "high_bframes.mp4")) as inp, av.open(
        str(HERE / "colr_only.mp4"), "w", format="mp4", options={"movflags": "+write_colr"}
    ) as out:
        source = inp.streams.video[0]
        stream = out.add_stream_from_template(source)
        ctx = stream.codec_context
        ctx.colorspace, ctx.color_range, ctx.color_primaries, ctx.color_trc = 1, 2, 1, 1
        for packet in inp.demux(source):
            if packet.size:
                packet.stream = stream
                out.mux(packet)
    clips.append(HERE / "colr_only.mp4")
    for path in clips:
        with av.open(str(path)) as container:
            decoded = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
        path.with_suffix(".rgb_0_5.bin").write_bytes(decoded[0].tobytes() + decoded[5].tobytes())
    return clips


def describe(path):
    frames = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        ctx = stream.codec_context
        meta = {
            "codec": ctx.name,
            "profile": ctx.profile,
            "width": ctx.width,
            "height": ctx.height,
            "time_base": [stream.time_base.numerator, stream.time_base.denominator],
        }
        for frame in container.decode(stream):
            # The display matrix's angle as FFmpeg reads it (0 without one): torchcodec turns
            # the frames by it, rounded to a quarter turn.
            meta.setdefault("rotation", frame.rotation)
            # The colours FFmpeg tags the frames with (from the SPS): its matrix and range.
            meta.setdefault("colorspace", int(frame.colorspace))
            meta.setdefault("color_range", int(frame.color_range))
            planes = frame.to_ndarray(format="yuv420p")
            h = frame.height
            y = planes[:h]
            u = planes[h : h + h // 4].reshape(h // 2, frame.width // 2)
            v = planes[h + h // 4 :].reshape(h // 2, frame.width // 2)
            frames.append(
                {
                    "pts": int(frame.pts),
                    "key": bool(frame.key_frame),
                    "duration": int(frame.duration),
                    "y": fnv1a64(y.tobytes()),
                    "u": fnv1a64(u.tobytes()),
                    "v": fnv1a64(v.tobytes()),
                }
            )
    # torchcodec's exact-mode scan: the stream starts at the smallest pts and ends at the
    # largest pts + packet duration, of the packets an edit list does not cut.
    with av.open(str(path)) as container:
        packets = [p for p in container.demux(video=0) if p.pts is not None and not p.is_discard]
        meta["begin_stream_pts"] = min(p.pts for p in packets)
        meta["end_stream_pts"] = max(p.pts + p.duration for p in packets)
    meta["frames"] = frames
    return meta


def avi_clips():
    return [
        write_mpeg4("xvid.avi", 96, 72, 30, audio=True),
        write_mpeg4("divx_bframes.avi", 80, 64, 30, bframes=2, tag="DX50"),
        write_mpeg4("mp4v_bframes.mp4", 80, 64, 30, bframes=2, container="mp4"),
    ]


def add_to_expected(paths, fields):
    """Describes `paths` into `expected.json`, keeping its other entries, and gives each entry
    `fields` that it lacks (a field added since it was written)."""
    expected = json.loads((HERE / "expected.json").read_text())
    for path in paths:
        expected[path.name] = describe(path)
    for name, meta in expected.items():
        if any(f not in meta for f in fields):
            described = describe(HERE / name)
            for f in fields:
                meta.setdefault(f, described[f])
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")


def main():
    if sys.argv[1:] == ["--packed"]:
        write_packed_avi("divx_packed.avi", "divx_bframes.avi")
        return
    if sys.argv[1:] == ["--turned"]:
        add_to_expected(turned_clips(), ["rotation"])
        return
    if sys.argv[1:] == ["--cut"]:
        add_to_expected([write_cut("cut.mp4", "high_bframes.mp4", 5, 20)], [])
        return
    if sys.argv[1:] == ["--sampling"]:
        add_to_expected(sampling_clips() + libavcodec_clips(), [])
        return
    if sys.argv[1:] == ["--edits"]:
        add_to_expected(edited_clips(), [])
        return
    if sys.argv[1:] == ["--colours"]:
        add_to_expected(colour_clips(), ["colorspace", "color_range"])
        return
    if sys.argv[1:] == ["--avi"]:
        add_to_expected(avi_clips(), [])
        write_mpeg2_in_mp4v()
        return
    expected = {}
    x264 = {"x264-params": "keyint=12:min-keyint=12:scenecut=0:bframes=3:b-pyramid=normal"}
    clips = [
        write("high_bframes.mp4", 96, 72, 30, x264, profile="high"),
        write("main_cabac.mp4", 80, 48, 20, {"x264-params": "keyint=10:min-keyint=10:scenecut=0:bframes=2:b-pyramid=none"}, profile="main"),
        write("baseline.mp4", 64, 48, 16, {"x264-params": "keyint=8:min-keyint=8:scenecut=0"}, profile="baseline"),
        write(
            "vfr.mp4",
            64,
            48,
            12,
            x264,
            pts=[0, 40, 80, 100, 120, 200, 240, 250, 260, 300, 400, 420],
            time_base=Fraction(1, 1000),
        ),
        # Fragmented MP4 as DASH packagers and live recorders write it: an empty `moov`, then
        # a `moof` + `mdat` per GOP, sample times and sizes in each fragment's `trun`.
        write(
            "fragmented.mp4",
            96,
            72,
            30,
            x264,
            profile="high",
            muxer={"movflags": "frag_keyframe+empty_moov+default_base_moof"},
        ),
    ]
    clips.append(write_cut("cut.mp4", "high_bframes.mp4", 5, 20))
    clips.extend(edited_clips())
    clips.extend(sampling_clips() + libavcodec_clips())
    for path in clips + avi_clips() + turned_clips() + colour_clips():
        expected[path.name] = describe(path)
    # Its pictures and their order are `divx_bframes.avi`'s (FFmpeg's reader gives the packed
    # file's frames other timestamps: the tests compare it with the unpacked file instead).
    write_packed_avi("divx_packed.avi", "divx_bframes.avi")
    write_mpeg2_in_mp4v()
    (HERE / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    # FFmpeg's own RGB (swscale, as torchcodec converts) of three frames of one clip, raw
    # 48 x 64 x 3 bytes each, for the colour conversion's parity test.
    with av.open(str(HERE / "baseline.mp4")) as container:
        decoded = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    (HERE / "baseline_rgb_0_5_11.bin").write_bytes(b"".join(decoded[i].tobytes() for i in (0, 5, 11)))


if __name__ == "__main__":
    main()
