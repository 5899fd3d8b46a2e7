"""Videos as the muxers and encoders users meet write them, made here by FFmpeg through PyAV
(its MP4, MOV and AVI muxers under their flags, x264 and FFmpeg's MPEG-4 encoder under
theirs): each is read by hpuload as FFmpeg reads it, the same frames at the same times, each
frame's picture FFmpeg's decode. Session 50 found three differences this way (fragments after
a `moov` that holds frames, negative composition offsets in fragments, `avc3` parameter sets in
the stream), now held here.

Pictures are compared through one conversion: hpuload's RGB against hpuload's conversion of
PyAV's decoded planes, so that swscale's own choices (PyAV's FFmpeg 8 converts an interlaced
frame field by field; torchcodec and decord do not, and hpuload gives theirs) do not enter."""

from fractions import Fraction

import numpy as np
import pytest

av = pytest.importorskip("av")

from hpuload import _hpuload  # noqa: E402

X264 = "keyint=12:min-keyint=12:scenecut=0:bframes=3:b-pyramid=normal"


def picture(i: int, w: int, h: int) -> np.ndarray:
    """A drifting gradient and a moving square: motion for the encoders to code."""
    y, x = np.mgrid[0:h, 0:w]
    frame = np.stack([(x * 3 + i * 5) % 256, (y * 4 + i * 3) % 256, ((x + y) * 2 + i * 7) % 256], -1)
    s = (i * 3) % max(1, w - 12)
    frame[8:20, s : s + 12] = (255 - i * 6) % 256
    return frame.astype(np.uint8)


def write(path, codec="libx264", fmt="mp4", muxer=None, options=None, n=30, w=96, h=72, pts=None, bframes=0, gop=12):
    with av.open(str(path), "w", format=fmt, options=muxer or {}) as out:
        stream = out.add_stream(codec, rate=25)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.time_base = stream.codec_context.time_base = Fraction(1, 25)
        if codec == "mpeg4":
            stream.codec_context.gop_size = gop
            stream.codec_context.max_b_frames = bframes
        stream.options = options or {}
        for i in range(n):
            frame = av.VideoFrame.from_ndarray(picture(i, w, h), format="rgb24")
            frame.pts = i if pts is None else pts[i]
            frame.time_base = Fraction(1, 25)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)


VARIANTS = {
    # MP4 and MOV as FFmpeg's muxer writes them under its flags.
    "faststart": dict(muxer={"movflags": "faststart"}),
    "no_edit_list": dict(muxer={"use_editlist": "0"}),
    "negative_cts": dict(muxer={"movflags": "negative_cts_offsets"}),
    "frag_keyframe": dict(muxer={"movflags": "frag_keyframe"}),
    "empty_moov": dict(muxer={"movflags": "frag_keyframe+empty_moov+default_base_moof"}),
    "frag_every_frame": dict(muxer={"movflags": "frag_every_frame+empty_moov"}),
    "separate_moof": dict(muxer={"movflags": "frag_keyframe+empty_moov+separate_moof"}),
    "dash": dict(muxer={"movflags": "dash+frag_keyframe"}),
    "cmaf": dict(muxer={"movflags": "cmaf+frag_keyframe"}),
    "mov": dict(fmt="mov"),
    "mov_fragmented": dict(fmt="mov", muxer={"movflags": "frag_keyframe"}),
    "ismv": dict(fmt="ismv"),
    "start_later": dict(pts=list(range(10, 40))),
    "gaps": dict(pts=[i + (i // 7) * 3 for i in range(30)]),
    "fragmented_start_later": dict(pts=list(range(10, 40)), muxer={"movflags": "frag_keyframe+empty_moov"}),
    # x264 as users run it.
    "open_gop": dict(options={"x264-params": X264 + ":open-gop=1"}),
    "no_bframes": dict(options={"x264-params": "keyint=12:bframes=0"}),
    "sixteen_bframes": dict(options={"x264-params": "keyint=24:bframes=16:b-adapt=2"}),
    "intra_refresh": dict(options={"x264-params": "keyint=12:intra-refresh=1:bframes=0"}),
    "all_intra": dict(options={"x264-params": "keyint=1"}),
    "slices": dict(options={"x264-params": X264 + ":slices=4"}),
    "cavlc": dict(options={"x264-params": X264 + ":cabac=0"}),
    "headers_repeated": dict(options={"x264-params": X264 + ":repeat-headers=1:aud=1"}),
    "pulldown": dict(options={"x264-params": X264 + ":pulldown=32"}),
    "interlaced": dict(options={"x264-params": X264 + ":tff=1"}),
    "odd_size": dict(w=98, h=74),
    # MPEG-4 Part 2 as UCF101's and HMDB51's AVI files hold it.
    "avi": dict(codec="mpeg4", fmt="avi"),
    "avi_bframes": dict(codec="mpeg4", fmt="avi", bframes=2),
    "avi_qpel_bframes": dict(codec="mpeg4", fmt="avi", bframes=2, options={"flags": "+qpel"}),
    "avi_interlaced": dict(codec="mpeg4", fmt="avi", options={"flags": "+ildct+ilme"}),
    "mp4v_bframes": dict(codec="mpeg4", bframes=3),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_each_muxer_and_encoder_variant_reads_as_ffmpeg_reads_it(name, tmp_path):
    kw = VARIANTS[name]
    path = tmp_path / f"{name}.{ {'avi': 'avi', 'mov': 'mov', 'ismv': 'ismv'}.get(kw.get('fmt'), 'mp4') }"
    write(path, **kw)
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = list(container.decode(stream))
        base = stream.time_base
    pts, durations = _hpuload.video_frame_times(str(path))
    assert pts == [float(f.pts * base) for f in frames], "FFmpeg's frames and times"
    data, h, w = _hpuload.read_video_frames(str(path), list(range(len(frames))))
    ours = np.frombuffer(bytes(data), np.uint8).reshape(len(frames), h, w, 3)
    for k, frame in enumerate(frames):
        assert frame.format.name == "yuv420p"
        y, u, v = (
            np.frombuffer(bytes(p), np.uint8).reshape(p.height, p.line_size)[:, : p.width].tobytes()
            for p in frame.planes
        )
        theirs = _hpuload.yuv420_to_rgb((y, u, v), w, h, 2, False)
        assert np.array_equal(ours[k], np.frombuffer(theirs, np.uint8).reshape(h, w, 3)), f"frame {k}"
