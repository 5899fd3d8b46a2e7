"""`hpuload.VideoReader`: decord's reader interface over hpuload's decoder, for a Dataset class
of the user's own (one import swapped). Checked here against FFmpeg's own frames
(`tests/data/video`: `expected.json` from PyAV, `baseline_rgb_0_5_11.bin` from swscale), and
against decord itself where it is installed."""

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from hpuload import VideoReader, _hpuload

CLIPS = Path(__file__).resolve().parents[2] / "tests" / "data" / "video"
H264 = [
    "baseline.mp4",
    "main_cabac.mp4",
    "high_bframes.mp4",
    "vfr.mp4",
    "fragmented.mp4",
    "cut.mp4",
    "delayed.mp4",
    "two_edits.mp4",
    "delayed_fragmented.mp4",
    "negative_cts.mp4",
    "frag_moov.mp4",
    "cmaf.mp4",
    "avc3.mp4",
    "open_gop.mp4",
    "open_gop_edits.mp4",
]
#: Open GOPs: their keyframes are recovery points, and the frames after one may refer through
#: its leading pictures to the GOP before. hpuload gives FFmpeg's frames as it decodes them in
#: turn (as PyAV, and torchcodec on FFmpeg 6 or later, give them); decord, and torchcodec on
#: FFmpeg 5, give others after a seek there, depending on what was read before.
OPEN_GOP = ("open_gop.mp4", "open_gop_edits.mp4")
#: The clips whose frames decord shows as FFmpeg does (decord also shows the frames
#: `cut.mp4`'s edit list cuts, and more frames than FFmpeg of those with two edits).
AS_DECORD = [n for n in H264 if n not in ("cut.mp4", "two_edits.mp4", *OPEN_GOP)]
#: `high_bframes.mp4` with display matrices (`make_fixtures.py --turned`), and the quarter
#: turns counterclockwise that show each upright.
TURNED = {"turned_cw.mp4": 3, "turned_half.mp4": 2, "turned_ccw.mp4": 1, "turned_movie.mp4": 1}


@pytest.mark.parametrize("name", H264)
def test_the_reader_counts_ffmpegs_frames_and_gives_each_by_index_slice_batch_and_in_turn(name):
    want = json.loads((CLIPS / "expected.json").read_text())[name]
    vr = VideoReader(CLIPS / name, num_threads=1)
    n = len(vr)
    assert n == len(want["frames"])
    assert vr.get_avg_fps() == pytest.approx(_hpuload.video_outline(str(CLIPS / name))[1])
    every = vr.get_batch(list(range(n)))
    assert type(every).__name__ == "NDArray" and every.shape == (n, want["height"], want["width"], 3)
    frames = every.asnumpy()
    assert type(frames) is np.ndarray and frames.dtype == np.uint8 and frames.flags.writeable
    picks = sorted(random.Random(n).sample(range(n), 5))
    assert np.array_equal(vr.get_batch(np.array(picks)), frames[picks])
    assert np.array_equal(vr.get_batch(torch.tensor([-1, 0, -1])), frames[[n - 1, 0, n - 1]])
    assert np.array_equal(vr[3], frames[3]) and np.array_equal(vr[-2], frames[n - 2])
    assert np.array_equal(vr[2:9:3], frames[2:9:3])
    vr.seek(0)
    assert np.array_equal(vr.next(), frames[0])
    vr.skip_frames(2)
    assert np.array_equal(vr.next(), frames[3])
    vr.seek_accurate(n - 1)
    assert np.array_equal(vr.next(), frames[n - 1])
    with pytest.raises(StopIteration):
        vr.next()
    # torch takes the frames as decord's users hand them over.
    clip = torch.from_numpy(vr.get_batch([0, 1]).asnumpy()).permute(0, 3, 1, 2)
    assert clip.shape == (2, 3, want["height"], want["width"])


@pytest.mark.parametrize("name", sorted(TURNED))
def test_a_video_shown_turned_is_read_upright_as_torchcodec_turns_it(name):
    """A display matrix (a phone's video held on its side) turns the frames as torchcodec turns
    them: by the angle FFmpeg reads from it (expected.json, from PyAV) rounded to a quarter
    turn, the RGB frame turned as `torch.rot90` turns it; against torchcodec itself where it
    runs (within swscale's one level in rare pixels)."""
    want = json.loads((CLIPS / "expected.json").read_text())[name]
    turns = round(want["rotation"] / 90) % 4
    assert turns == TURNED[name]
    upright = VideoReader(CLIPS / "high_bframes.mp4")
    every = list(range(len(upright)))
    expected = np.rot90(upright.get_batch(every).asnumpy(), turns, axes=(1, 2))
    vr = VideoReader(CLIPS / name)
    assert _hpuload.video_outline(str(CLIPS / name))[2] == turns
    got = vr.get_batch(every).asnumpy()
    assert got.shape == expected.shape and np.array_equal(got, expected)
    try:
        from torchcodec.decoders import VideoDecoder
    except Exception:  # not installed, or no FFmpeg libraries for it to load
        return
    theirs = VideoDecoder(str(CLIPS / name), dimension_order="NHWC")[:].numpy()
    diff = np.abs(theirs.astype(int) - got.astype(int))
    assert theirs.shape == got.shape and diff.max() <= 1 and (diff > 0).mean() < 1e-3


#: Clips whose SPS declares their colours (`make_fixtures.py --colours`), and one whose
#: container alone does.
TAGGED = ["bt709.mp4", "full_range.mp4", "full_range_bt709.mp4", "colr_only.mp4"]


def _libswscale():
    """PyAV's own libswscale (FFmpeg's, as torchcodec and PyAV convert with it), through
    ctypes, with the calls torchcodec makes; None where PyAV's wheel has none."""
    import ctypes
    from ctypes import POINTER, c_int, c_void_p

    av = pytest.importorskip("av")
    found = sorted((Path(av.__file__).parent.parent / "av.libs").glob("libswscale*.so*"))
    if not found:
        return None
    sw = ctypes.CDLL(str(found[0]))
    sw.sws_getContext.restype = c_void_p
    sw.sws_getContext.argtypes = [c_int] * 7 + [c_void_p] * 3
    sw.sws_getCoefficients.restype = POINTER(c_int)
    sw.sws_getCoefficients.argtypes = [c_int]
    sw.sws_getColorspaceDetails.argtypes = [c_void_p] + [c_void_p] * 7
    sw.sws_setColorspaceDetails.argtypes = [c_void_p, POINTER(c_int), c_int, POINTER(c_int), c_int, c_int, c_int, c_int]
    sw.sws_scale.argtypes = [c_void_p, c_void_p, c_void_p, c_int, c_int, c_void_p, c_void_p]
    sw.sws_freeContext.argtypes = [c_void_p]
    return sw


def _swscale_rgb(sw, y, u, v, matrix, full_range):
    """swscale's RGB of 4:2:0 planes, as torchcodec asks for it: no flags, the coefficients of
    the frame's matrix (`sws_getCoefficients`) and its range (yuvj420p for full range, as
    FFmpeg's H.264 decoder gives it)."""
    from ctypes import POINTER, byref, c_int, c_void_p

    h, w = y.shape
    ctx = sw.sws_getContext(w, h, 12 if full_range else 0, w, h, 2, 0, None, None, None)
    inv, table = POINTER(c_int)(), POINTER(c_int)()
    details = [c_int() for _ in range(5)]
    sw.sws_getColorspaceDetails(ctx, byref(inv), byref(details[0]), byref(table), *(byref(d) for d in details[1:]))
    coefficients = sw.sws_getCoefficients(matrix)
    _, dst_range, brightness, contrast, saturation = (d.value for d in details)
    sw.sws_setColorspaceDetails(ctx, coefficients, int(full_range), coefficients, dst_range, brightness, contrast, saturation)
    out = np.zeros((h, w, 3), np.uint8)
    src = (c_void_p * 4)(y.ctypes.data, u.ctypes.data, v.ctypes.data, None)
    strides = (c_int * 4)(w, w // 2, w // 2, 0)
    dst = (c_void_p * 4)(out.ctypes.data, None, None, None)
    assert sw.sws_scale(ctx, src, strides, 0, h, dst, (c_int * 4)(3 * w, 0, 0, 0)) == h
    sw.sws_freeContext(ctx)
    return out


def test_every_matrix_and_range_converts_as_libswscale_over_every_yuv():
    """Every (y, u, v) (a 4096 x 4096 picture: each chroma sample's 2x2 block four lumas, 64
    samples per (u, v) pair), every matrix value a video may declare and both ranges: hpuload's
    conversion is libswscale's, bit for bit (PyAV's FFmpeg, which torchcodec also loads)."""
    sw = _libswscale()
    if sw is None:
        pytest.skip("PyAV's wheel has no libswscale here")
    side = 2048
    k = np.arange(side * side)
    pair, j = k // 64, (k % 64).reshape(side, side)
    u = np.ascontiguousarray((pair // 256).astype(np.uint8).reshape(side, side))
    v = np.ascontiguousarray((pair % 256).astype(np.uint8).reshape(side, side))
    y = np.empty((2 * side, 2 * side), np.uint8)
    for dy in range(2):
        for dx in range(2):
            y[dy::2, dx::2] = 4 * j + 2 * dy + dx
    for matrix in [1, 2, 4, 5, 6, 7, 8, 9, 10, 12]:
        for full_range in (False, True):
            theirs = _swscale_rgb(sw, y, u, v, matrix, full_range)
            ours = _hpuload.yuv420_to_rgb((y.tobytes(), u.tobytes(), v.tobytes()), 2 * side, 2 * side, matrix, full_range)
            ours = np.frombuffer(ours, np.uint8).reshape(theirs.shape)
            assert np.array_equal(ours, theirs), (matrix, full_range, int((ours != theirs).sum()))


@pytest.mark.parametrize("name", TAGGED)
def test_a_video_declaring_its_colours_reads_as_ffmpeg_converts_it(name):
    """A video whose SPS declares BT.709 or full range: hpuload's frames are PyAV's (FFmpeg's
    decode, swscale by the frame's tags), and torchcodec's and decord's where they run."""
    av = pytest.importorskip("av")
    with av.open(str(CLIPS / name)) as container:
        pyav = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    ours = VideoReader(CLIPS / name).get_batch(list(range(len(pyav)))).asnumpy()
    assert np.array_equal(ours, pyav)
    try:
        from torchcodec.decoders import VideoDecoder
    except Exception:
        VideoDecoder = None
    if VideoDecoder is not None:
        assert np.array_equal(VideoDecoder(str(CLIPS / name), dimension_order="NHWC")[:].numpy(), ours)
    try:
        import decord
    except ImportError:
        return
    assert np.array_equal(decord.VideoReader(str(CLIPS / name)).get_batch(list(range(len(ours)))).asnumpy(), ours)


def test_the_frames_are_swscales_rgb_of_ffmpegs_decode():
    vr = VideoReader(str(CLIPS / "baseline.mp4"))
    want = np.frombuffer((CLIPS / "baseline_rgb_0_5_11.bin").read_bytes(), np.uint8).reshape(3, 48, 64, 3)
    assert np.array_equal(vr.get_batch([0, 5, 11]).asnumpy(), want)


def test_what_decords_reader_does_and_this_one_does_not_is_refused_naming_it(tmp_path):
    path = CLIPS / "baseline.mp4"
    with pytest.raises(ValueError, match="does not resize while decoding"):
        VideoReader(path, width=32, height=24)
    with pytest.raises(TypeError, match="by its path, not a BufferedReader"):
        with open(path, "rb") as f:
            VideoReader(f)

    class Gpu:
        device_type = 2

    with pytest.raises(ValueError, match="decodes on the host"):
        VideoReader(path, ctx=Gpu())
    vr = VideoReader(path)
    with pytest.raises(IndexError, match=r"frame 16 of .*baseline.mp4, which has 16"):
        vr.get_batch([0, 16])
    with pytest.raises(NotImplementedError, match="seek_accurate"):
        vr.seek(5)
    with pytest.raises(NotImplementedError, match="timestamps"):
        vr.get_frame_timestamp([0])
    bad = tmp_path / "cut.mp4"
    bad.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ValueError, match="cut.mp4"):
        VideoReader(bad)


def test_frames_match_decords_own_within_one_level_in_rare_pixels():
    """Where decord is installed: its frames and hpuload's are FFmpeg's decode converted by
    swscale; swscale's vector code rounds a few chroma values one level otherwise (about 1
    pixel in 10,000 of these clips), which is the only difference allowed."""
    decord = pytest.importorskip("decord")
    for name in [*AS_DECORD, "xvid.avi", "divx_bframes.avi", "mp4v_bframes.mp4"]:
        theirs = decord.VideoReader(str(CLIPS / name), num_threads=1)
        ours = VideoReader(CLIPS / name, num_threads=1)
        assert len(ours) == len(theirs), name
        every = list(range(len(ours)))
        diff = np.abs(theirs.get_batch(every).asnumpy().astype(int) - ours.get_batch(every).asnumpy().astype(int))
        assert diff.max() <= 1 and (diff > 0).mean() < 1e-3, (name, diff.max(), (diff > 0).mean())


class _DecordDataset(torch.utils.data.Dataset):
    """A user's class over real decord: a few frames per video, torch's bridge or NumPy's."""

    def __init__(self, names, bridge):
        self.paths, self.bridge = [str(CLIPS / n) for n in names], bridge

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        import decord

        decord.bridge.set_bridge(self.bridge)
        vr = decord.VideoReader(self.paths[i], num_threads=1)
        frames = vr.get_batch([0, len(vr) // 2, -1])
        frames = frames if self.bridge == "torch" else torch.from_numpy(frames.asnumpy())
        # Whether hpuload's reader answered alone (decord's own never made).
        natively = type(vr).__module__ == "hpuload._reader" and vr.__dict__.get("_decord") is None
        return frames.permute(0, 3, 1, 2)[..., :16, :16].contiguous(), natively


@pytest.mark.parametrize("bridge", ["native", "torch"])
def test_a_decord_dataset_in_the_drop_in_gives_decords_frames_decoded_by_hpuload(bridge):
    """Where decord is installed: hpuload.torch.DataLoader over a class reading with decord
    gives what torch's loader gives, within swscale's one level, decord's bridge honoured;
    decord's own reader for a video whose edit list cuts frames."""
    decord = pytest.importorskip("decord")
    from hpuload.torch import DataLoader, FallbackWarning

    data = _DecordDataset([*AS_DECORD, "cut.mp4"], bridge)
    try:
        theirs, by_hpuload = zip(*torch.utils.data.DataLoader(data, batch_size=2))
        with pytest.warns(FallbackWarning, match="answered by hpuload's decoder"):
            loader = DataLoader(data, batch_size=2, num_workers=2)
        ours, natively = zip(*loader)
    finally:
        decord.bridge.reset_bridge()
    theirs, ours = torch.cat(theirs), torch.cat(ours)
    # The video whose edit list cuts frames is decord's own (decord shows the cut frames).
    assert not torch.cat(by_hpuload).any() and torch.cat(natively).tolist() == [True] * len(AS_DECORD) + [False]
    assert ours.shape == theirs.shape and (ours.int() - theirs.int()).abs().max() <= 1


def test_decords_answer_leaves_a_video_whose_edit_list_repeats_frames_to_decord():
    """Where decord is installed: `two_edits.mp4` shows two pieces of its media, 20 frames as
    FFmpeg shows them; decord counts 43 (and reads the last differently from one reader to the
    next), so the answer to `decord.VideoReader` hands such a video to decord's own reader
    whole, and a video that is only delayed (an empty edit first) stays hpuload's."""
    decord = pytest.importorskip("decord")
    from hpuload._reader import AnsweredDecord

    path = str(CLIPS / "two_edits.mp4")
    answer = AnsweredDecord(lambda: decord.VideoReader(path, num_threads=1), path, num_threads=1)
    assert len(VideoReader(path)) == 20 and len(answer) == len(decord.VideoReader(path)) == 43
    assert answer.__dict__["_all_decords"]
    delayed = str(CLIPS / "delayed.mp4")
    answer = AnsweredDecord(lambda: decord.VideoReader(delayed, num_threads=1), delayed, num_threads=1)
    assert len(answer) == 30 and not answer.__dict__["_all_decords"]


def test_frames_are_handed_over_as_decords_bridge_says(monkeypatch):
    """`decord.bridge.set_bridge("torch")` makes decord's readers return tensors; hpuload's
    follows it (read per call and per thread, as decord reads it), and refuses a bridge to a
    framework it does not hand frames to."""
    import threading
    import types

    bridge = types.ModuleType("decord.bridge")
    bridge._CURRENT_BRIDGE = threading.local()
    monkeypatch.setitem(sys.modules, "decord.bridge", bridge)
    vr = VideoReader(CLIPS / "baseline.mp4")
    native = vr.get_batch([0, 5])
    assert isinstance(native, np.ndarray)
    bridge._CURRENT_BRIDGE.type = "torch"
    tensors = vr.get_batch([0, 5])
    assert isinstance(tensors, torch.Tensor) and tensors.dtype == torch.uint8 and torch.equal(tensors, torch.from_numpy(native.asnumpy()))
    assert torch.equal(vr[5], tensors[1])
    bridge._CURRENT_BRIDGE.type = "mxnet"
    with pytest.raises(NotImplementedError, match="decord's mxnet bridge"):
        vr.get_batch([0])


def _torchcodec_or_skip():
    try:
        from torchcodec.decoders import VideoDecoder
    except Exception as e:  # not installed, or no FFmpeg libraries for it to load
        pytest.skip(f"torchcodec does not run here: {e}")
    return VideoDecoder


class _TorchcodecDataset(torch.utils.data.Dataset):
    """A user's class over real torchcodec: a random clip by its index sampler, a few frames by
    index, a range and a slice, frames by time and in a span of time, clips by its time
    sampler, with their timestamps."""

    def __init__(self, names, order="NCHW"):
        self.paths, self.order = [str(CLIPS / n) for n in names], order

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        from torchcodec.decoders import VideoDecoder
        from torchcodec.samplers import clips_at_random_indices, clips_at_random_timestamps

        decoder = VideoDecoder(self.paths[i], dimension_order=self.order, num_ffmpeg_threads=1)
        clip = clips_at_random_indices(decoder, num_clips=1, num_frames_per_clip=4, num_indices_between_frames=2)
        picked = decoder.get_frames_at([0, len(decoder) // 2, -1])
        ranged = decoder.get_frames_in_range(1, 9, 3)
        one = decoder.get_frame_at(3)
        first = float(picked.pts_seconds[0])
        played = decoder.get_frames_played_at([first, first + 0.05, first + 0.1, first + 0.2999])
        spanned = decoder.get_frames_played_in_range(first + 0.03, first + 0.2)
        natively = type(decoder).__module__ == "hpuload._reader" and decoder.__dict__.get("_own") is None
        # By time (its metadata is torchcodec's own): a time past the last frame's start too.
        timed = clips_at_random_timestamps(decoder, num_clips=2, num_frames_per_clip=3, seconds_between_frames=0.1)
        last = decoder.get_frames_played_at([decoder.metadata.end_stream_seconds - 1e-3])
        frames = torch.cat([clip.data[0], picked.data, ranged.data, one.data[None], decoder[5][None], decoder[2:4],
                            played.data, spanned.data, timed.data.flatten(0, 1), last.data])
        times = torch.cat([clip.pts_seconds[0], picked.pts_seconds, ranged.pts_seconds, torch.tensor([one.pts_seconds]),
                           played.pts_seconds, spanned.pts_seconds, timed.pts_seconds.flatten(), last.pts_seconds])
        durations = torch.cat([clip.duration_seconds[0], picked.duration_seconds, ranged.duration_seconds])
        frames = frames if self.order == "NCHW" else frames.permute(0, 3, 1, 2)
        return frames[..., :16, :16].contiguous(), times, durations, natively


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
def test_a_torchcodec_dataset_in_the_drop_in_gives_torchcodecs_frames_and_timestamps(order):
    """Where torchcodec runs: hpuload.torch.DataLoader over a class reading with torchcodec
    (its index sampler among the calls) gives what torch's loader gives: the same clips drawn,
    frames within swscale's one level, the same timestamps (durations too, with FFmpeg 6 or
    later, whose frames carry them)."""
    _torchcodec_or_skip()
    from torchcodec._core import get_ffmpeg_library_versions

    from hpuload.torch import DataLoader, FallbackWarning

    names = [n for n in H264 if n not in OPEN_GOP or get_ffmpeg_library_versions()["libavutil"][0] >= 58]
    data = _TorchcodecDataset(names + sorted(TURNED), order)
    torch.manual_seed(0)
    theirs = list(zip(*torch.utils.data.DataLoader(data, batch_size=2, num_workers=2)))
    with pytest.warns(FallbackWarning, match="answered by hpuload's decoder"):
        loader = DataLoader(data, batch_size=2, num_workers=2)
    torch.manual_seed(0)
    ours = list(zip(*loader))
    assert not torch.cat(theirs[3]).any() and torch.cat(ours[3]).all(), "each side's own decoder"
    a, b = torch.cat(ours[0]).int(), torch.cat(theirs[0]).int()
    assert a.shape == b.shape and (a - b).abs().max() <= 1
    assert torch.equal(torch.cat(ours[1]), torch.cat(theirs[1]))
    if get_ffmpeg_library_versions()["libavutil"][0] >= 58:  # FFmpeg 6
        assert torch.equal(torch.cat(ours[2]), torch.cat(theirs[2]))


@pytest.mark.parametrize("name", [*H264, "mp4v_bframes.mp4"])
def test_each_frames_time_and_duration_are_ffmpegs_from_the_tables(name):
    """`video_frame_times`, what the answer to torchcodec's decoder gives as `pts_seconds` and
    `duration_seconds`: each frame's as FFmpeg gives it with the decoded frame (expected.json,
    from PyAV), in presentation order, without decoding."""
    want = json.loads((CLIPS / "expected.json").read_text())[name]
    num, den = want["time_base"]
    pts, durations = _hpuload.video_frame_times(str(CLIPS / name))
    assert pts == [f["pts"] * num / den for f in want["frames"]]
    assert durations == [f["duration"] * num / den for f in want["frames"]]
