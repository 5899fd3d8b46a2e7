"""`VideoReader`: decord's video reader, for a Dataset class of the user's own, decoded by hpuload;
the answers to decord's and torchcodec's readers in the drop-in's fallback.

Most video training code outside torchvision's datasets has a Dataset class of its own that
opens each video with `decord.VideoReader`, picks frame indices (a random clip, a few
segments) and calls `get_batch`. hpuload cannot learn such a class (the frames it picks depend
on code run per sample), but the decoding, most of its time, is what hpuload does best:
`from hpuload import VideoReader` in place of `from decord import VideoReader` keeps the class
as it is and decodes natively. The frames are the same: FFmpeg's H.264 (or MPEG-4 Part 2)
decoding, exact, and swscale's default RGB conversion (BT.601, limited range), bit for bit, as
decord gives them; each call decodes only from the keyframe before the first frame asked for
to the last, passing over the frames nothing refers to, with the GIL released.

What decord does that this reader does not is refused, naming it, rather than done otherwise:
resizing while decoding (`width`, `height`), a GPU context, a file object, timestamps,
key-frame lists, and `seek` to a frame other than 0 (decord's lands on a key frame near it).

`hpuload.torch.DataLoader` does that swap itself for a class it hands to torch's loader:
`AnsweredDecord` and `AnsweredTorchcodec` are what decord's and torchcodec's readers make in
its workers (`_probe.answering`), hpuload's decoding where its answer is theirs, their own
reader, made on first need, for the rest."""

from __future__ import annotations

import bisect
import numbers
import os
import sys
from typing import Any

from . import _hpuload

try:
    import numpy as _np
except ImportError:  # pragma: no cover - decord's users have NumPy
    _np = None

if _np is not None:

    class NDArray(_np.ndarray):
        """Frames as a NumPy array, with decord's `asnumpy()`."""

        def asnumpy(self):
            return _np.asarray(self)


class VideoReader:
    """A video file's frames by index, with `decord.VideoReader`'s interface: `len(vr)`,
    `vr[i]` and `vr[a:b]`, `get_batch(indices)` (frames `[N, H, W, 3]` uint8, negative
    indices counting from the end), `get_avg_fps()`, and sequential reading (`seek_accurate`,
    `seek(0)`, `next`, `skip_frames`). Frames are numbered in presentation order, as decord
    numbers them, and handed over as decord's bridge says (NumPy, or torch tensors). A video
    with a display matrix (a phone's, held on its side) is shown upright, turned as torchcodec
    turns it: decord turns a half turn the same way, and fails on a quarter turn. A video
    whose edit list cuts frames (a stream copy cut between keyframes) or shows some twice has
    the frames FFmpeg shows, as torchcodec and PyAV count them; decord shows the cut ones too,
    and more besides for the second."""

    def __init__(self, uri, ctx=None, width: int = -1, height: int = -1, num_threads: int = 0, fault_tol: int = -1):
        if not isinstance(uri, (str, os.PathLike)):
            raise TypeError(f"hpuload.VideoReader reads a file by its path, not a {type(uri).__name__}")
        if width != -1 or height != -1:
            raise ValueError(
                "hpuload.VideoReader does not resize while decoding (decord's width and height): "
                "resize the frames afterwards, or keep decord's reader for this video"
            )
        device = getattr(ctx, "device_type", 1)
        if device != 1:
            raise ValueError(f"hpuload.VideoReader decodes on the host: the context {ctx} asks for another device")
        self._path = os.fspath(uri)
        count, fps, self._turns, self._cut = _hpuload.video_outline(self._path)
        self._count = count
        self._fps = float(fps) if fps is not None else 0.0
        self._position = 0

    def __repr__(self) -> str:
        return f"hpuload.VideoReader({self._path!r}, {self._count} frames)"

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, key):
        if isinstance(key, slice):
            return self.get_batch(list(range(*key.indices(self._count))))
        return self.get_batch([key])[0]

    def get_avg_fps(self) -> float:
        """The frame count over the stream's span (0.0 for a stream without one)."""
        return self._fps

    def get_batch(self, indices) -> Any:
        """The frames at `indices` (a list, an array or a tensor of integers), `[N, H, W, 3]`
        uint8, handed over as decord's bridge says: NumPy (`asnumpy()`) by default, a torch
        tensor after `decord.bridge.set_bridge("torch")`; another framework's is refused."""
        if _np is None:  # pragma: no cover
            raise ImportError("hpuload.VideoReader returns NumPy arrays: install numpy")
        bridge = _decord_bridge()
        if bridge not in ("native", "torch"):
            raise NotImplementedError(
                f"decord's {bridge} bridge: hpuload.VideoReader hands frames over as NumPy arrays or torch tensors"
            )
        frames = _decoded(self._path, [self._checked(int(i)) for i in _flat(indices)])
        if bridge == "torch":
            import torch

            return torch.from_numpy(frames)
        return frames.view(NDArray)

    def seek(self, pos: int) -> None:
        """decord's fast seek, which lands on a key frame near `pos`: hpuload's reader has no
        key-frame list, so it takes frame 0 alone (`vr.seek(0)` before `get_batch`, as VideoMAE's
        loader calls it) and refuses the others; `seek_accurate` takes any frame."""
        if int(pos) != 0:
            raise NotImplementedError(
                "decord's seek lands on a key frame near the frame asked for, which hpuload.VideoReader "
                "does not know: use seek_accurate (that frame exactly), or decord's reader"
            )
        self._position = 0

    def seek_accurate(self, pos: int) -> None:
        """Where `next()` reads from: frame `pos` exactly."""
        self._position = self._checked(int(pos))

    def skip_frames(self, num: int = 1) -> None:
        self._position += int(num)

    def next(self):
        """The frame at the reading position, which then moves on one."""
        if self._position >= self._count:
            raise StopIteration
        frame = self[self._position]
        self._position += 1
        return frame

    def get_frame_timestamp(self, idx):
        raise NotImplementedError("hpuload.VideoReader has no frame timestamps: keep decord's reader for them")

    def get_key_indices(self):
        raise NotImplementedError("hpuload.VideoReader has no key-frame list: keep decord's reader for it")

    def _checked(self, i: int) -> int:
        k = i + self._count if i < 0 else i
        if not 0 <= k < self._count:
            raise IndexError(f"frame {i} of {self._path}, which has {self._count}")
        return k


def _decoded(path: str, positions: list):
    """The frames at presentation `positions` of the video at `path`, `[N, H, W, 3]` uint8 in
    a writable NumPy array."""
    data, height, width = _hpuload.read_video_frames(path, positions)
    return _np.frombuffer(bytearray(data), dtype=_np.uint8).reshape(len(positions), height, width, 3)


def _flat(indices) -> list:
    if hasattr(indices, "tolist"):  # a NumPy array, a torch tensor
        indices = indices.tolist()
    if isinstance(indices, int):
        return [indices]
    return list(indices)


class AnsweredDecord(VideoReader):
    """What `decord.VideoReader(...)` makes in a user's Dataset that `hpuload.torch.DataLoader`
    hands to torch's loader (`_probe.answering`): hpuload's reader, with decord's own made on
    first need for whatever hpuload's refuses or cannot read (a file object, resizing while
    decoding, a GPU context, a codec or file hpuload does not decode, an index out of range,
    timestamps, key-frame lists, any other attribute), so that every answer is decord's. The
    average frame rate is decord's own too (its stream's `avg_frame_rate`, which code turns
    into frame steps). After a fast `seek` (which lands where decord's index says), for a video
    with a display matrix (which decord applies its own way) or an edit list that cuts or
    repeats frames (which decord counts its own way), or when hpuload's reader could not open the video, decord's answers
    everything."""

    def __init__(self, decords_own, *args, **kwargs):
        self._make_decord = decords_own
        self._decord = None
        self._all_decords = False
        try:
            super().__init__(*args, **kwargs)
        except Exception:
            self._decord, self._all_decords = decords_own(), True
            return
        if self._turns is not None or self._cut:
            # A video with a display matrix (decord turns its frames its own way, and fails on
            # a quarter turn), or whose edit list cuts or repeats frames (decord counts its
            # own): decord's reader answers everything.
            self._decord, self._all_decords = decords_own(), True

    def _decords(self):
        if self._decord is None:
            self._decord = self._make_decord()
        return self._decord

    def __repr__(self) -> str:
        return repr(self._decord) if self._all_decords else super().__repr__()

    def __len__(self) -> int:
        return len(self._decord) if self._all_decords else super().__len__()

    def __getitem__(self, key):
        if self._all_decords:
            return self._decord[key]
        frame = super().__getitem__(key)
        if not isinstance(key, slice):  # decord's reads on from there
            self._position = self._checked(int(key)) + 1
        return frame

    def get_batch(self, indices):
        if not self._all_decords:
            try:
                return super().get_batch(indices)
            except Exception:  # an index out of range, a damaged frame, another bridge: decord's own answer
                pass
        return self._decords().get_batch(indices)

    def get_avg_fps(self) -> float:
        if self._all_decords or self._decord is not None:
            return self._decords().get_avg_fps()
        # decord's own, remembered per file: opening decord's reader for it costs about a
        # tenth of a clip's decoding, every epoch.
        try:
            stat = os.stat(self._path)
        except OSError:
            return self._decords().get_avg_fps()
        return _decords_fps(self._path, stat.st_mtime_ns, stat.st_size, self._decords)

    def seek(self, pos: int) -> None:
        if not self._all_decords and int(pos) == 0:
            return super().seek(0)
        self._all_decords = True
        return self._decords().seek(pos)

    def seek_accurate(self, pos: int) -> None:
        if not self._all_decords:
            try:
                return super().seek_accurate(pos)
            except IndexError:  # decord's own error (or, should it take the frame, its reading on)
                self._all_decords = True
        return self._decords().seek_accurate(pos)

    def skip_frames(self, num: int = 1) -> None:
        return self._decord.skip_frames(num) if self._all_decords else super().skip_frames(num)

    def next(self):
        if self._all_decords:
            return self._decord.next()
        if self._position >= self._count:
            raise StopIteration
        frame = self.get_batch([self._position])[0]
        self._position += 1
        return frame

    def get_frame_timestamp(self, idx):
        return self._decords().get_frame_timestamp(idx)

    def get_key_indices(self):
        return self._decords().get_key_indices()

    def __getattr__(self, name: str):
        # Called only for what this class lacks: decord's other attributes.
        if name in ("_make_decord", "_decord", "_all_decords"):
            raise AttributeError(name)
        return getattr(self._decords(), name)


_FPS: dict = {}
_FPS_KEPT = 1 << 16


def _decords_fps(path: str, mtime_ns: int, size: int, decords) -> float:
    """decord's `get_avg_fps()` of the file as it is now (`decords()` makes decord's reader
    the first time), remembered for the last `_FPS_KEPT` files asked about."""
    key = (path, mtime_ns, size)
    fps = _FPS.pop(key, None)
    if fps is None:
        fps = decords().get_avg_fps()
        if len(_FPS) >= _FPS_KEPT:
            del _FPS[next(iter(_FPS))]
    _FPS[key] = fps  # the most recent last
    return fps


def _decord_bridge() -> str:
    """decord's output bridge on this thread ("native", "torch", ...), as decord reads it."""
    bridge = sys.modules.get("decord.bridge")
    current = getattr(bridge, "_CURRENT_BRIDGE", None)
    return getattr(current, "type", getattr(bridge, "_GLOBAL_BRIDGE_TYPE", "native"))


#: torchcodec's `VideoDecoder` arguments under which hpuload's frames are its frames, and the
#: values each may take (a missing one takes the first).
_TORCHCODEC_NATIVE = {
    "stream_index": (None,),
    "dimension_order": ("NCHW", "NHWC"),
    "num_ffmpeg_threads": None,  # any: the frames do not depend on it
    "device": (None, "cpu"),
    "seek_mode": ("exact",),
    "transforms": (None,),
    "custom_frame_mappings": (None,),
}


class AnsweredTorchcodec:
    """What `torchcodec.decoders.VideoDecoder(...)` makes in a user's Dataset that
    `hpuload.torch.DataLoader` hands to torch's loader (`_probe.answering`): frames by index
    decoded by hpuload (`len`, `[i]`, `[a:b]`, `get_frame_at`, `get_frames_at`,
    `get_frames_in_range`, `get_frames_played_at` and `get_frames_played_in_range` (at the
    source's rate) up to the last frame's time, and so
    torchcodec's clip samplers, by index or by time), as torchcodec's
    `Frame` and `FrameBatch` with each frame's `pts_seconds` and `duration_seconds` from the
    tables (as FFmpeg 6 and later give them). torchcodec's own decoder, made on first need,
    answers the rest: a source other than a file's path, arguments under which its frames
    differ (another stream, a device, approximate seeking, transforms, another dtype),
    `metadata`, other questions in seconds, an index or time out of range, a video hpuload does
    not read, any other attribute."""

    def __init__(self, torchcodecs_own, source=None, *args, **kwargs):
        self._make_own = torchcodecs_own
        self._own = None
        self._path = None
        if not args and isinstance(source, (str, os.PathLike)) and _decodes_as_torchcodec(kwargs):
            try:
                self._pts, self._durations = _hpuload.video_frame_times(os.fspath(source))
                self._path = os.fspath(source)
                self._nchw = kwargs.get("dimension_order", "NCHW") == "NCHW"
            except Exception:  # a video hpuload does not read: torchcodec's own answer
                pass
        if self._path is None:
            self._own = torchcodecs_own()

    def _owns(self):
        if self._own is None:
            self._own = self._make_own()
        return self._own

    @property
    def metadata(self):
        return self._owns().metadata

    def __repr__(self) -> str:
        return f"hpuload's answer to torchcodec's VideoDecoder({self._path!r})" if self._path else repr(self._own)

    def __len__(self) -> int:
        return len(self._pts) if self._path is not None else len(self._own)

    def __getitem__(self, key):
        if isinstance(key, slice) and self._path is not None:
            return self.get_frames_in_range(key.start, key.stop, key.step if key.step is not None else 1).data
        if isinstance(key, numbers.Integral) and not isinstance(key, bool):
            batch = self._native([int(key)])
            if batch is not None:
                return batch[0][0]
        return self._owns()[key]

    def get_frame_at(self, index):
        batch = self._native([index]) if isinstance(index, numbers.Integral) else None
        if batch is None:
            return self._owns().get_frame_at(index)
        import torchcodec

        data, pts, durations = batch
        return torchcodec.Frame(data=data[0], pts_seconds=pts[0], duration_seconds=durations[0])

    def get_frames_at(self, indices):
        batch = self._native(_flat(indices))
        if batch is None:
            return self._owns().get_frames_at(indices)
        return _frame_batch(*batch)

    def get_frames_in_range(self, start: int, stop: int, step: int = 1):
        if self._path is not None and isinstance(step, numbers.Integral) and step > 0:
            positions = list(range(*slice(start, stop, step).indices(len(self._pts))))
            batch = self._native(positions)
            if batch is not None:
                return _frame_batch(*batch)
        return self._owns().get_frames_in_range(start, stop, step)

    def get_frames_played_at(self, seconds):
        # torchcodec's player shows each frame from its pts to the next frame's: the frame at
        # `t` is the last one whose pts is at most `t`. From the first frame's pts to the last
        # one's that needs nothing but the pts; times past that (the last frame's span,
        # which torchcodec bounds by the stream's end) and before it are torchcodec's own.
        if self._path is not None:
            times = _flat(seconds)
            pts = self._pts
            if times and all(isinstance(t, numbers.Real) and pts[0] <= t < pts[-1] for t in times):
                batch = self._native([self._played_at(t) for t in times])
                if batch is not None:
                    return _frame_batch(*batch)
        return self._owns().get_frames_played_at(seconds)

    def get_frames_played_in_range(self, start_seconds, stop_seconds, *rest, **options):
        # The frames played in [start, stop): from the one played at `start` to the last whose
        # pts is before `stop`, at the source's rate (`fps` resampling is torchcodec's own),
        # inside the frames' span as above.
        if self._path is not None and not rest and all(v is None for v in options.values()):
            pts = self._pts
            if all(isinstance(t, numbers.Real) for t in (start_seconds, stop_seconds)) and (
                pts[0] <= start_seconds < stop_seconds <= pts[-1]
            ):
                batch = self._native(list(range(self._played_at(start_seconds), bisect.bisect_left(pts, stop_seconds))))
                if batch is not None:
                    return _frame_batch(*batch)
        return self._owns().get_frames_played_in_range(start_seconds, stop_seconds, *rest, **options)

    def _played_at(self, seconds) -> int:
        """The position of the frame played at `seconds` (the last whose pts is at most it)."""
        return bisect.bisect_right(self._pts, seconds) - 1

    def _native(self, indices: list):
        """`(data, pts, durations)` of the frames at `indices` decoded by hpuload, or None where
        torchcodec's own answers (nothing asked, an index out of range, a decoding failure)."""
        if self._path is None or not indices:
            return None
        n = len(self._pts)
        positions = []
        for i in indices:
            if isinstance(i, bool) or not isinstance(i, numbers.Integral):
                return None
            k = int(i) + n if i < 0 else int(i)
            if not 0 <= k < n:
                return None
            positions.append(k)
        try:
            decoded = _decoded(self._path, positions)
        except Exception:
            return None
        import torch

        frames = torch.from_numpy(decoded)
        # torchcodec's NCHW is a view of the frames it writes as NHWC.
        frames = frames.permute(0, 3, 1, 2) if self._nchw else frames
        return frames, [self._pts[k] for k in positions], [self._durations[k] for k in positions]

    def __getattr__(self, name: str):
        # Called only for what this class lacks: torchcodec's other methods and attributes.
        if name in ("_make_own", "_own", "_path", "_pts", "_durations", "_nchw"):
            raise AttributeError(name)
        return getattr(self._owns(), name)


def _decodes_as_torchcodec(kwargs: dict) -> bool:
    """Whether torchcodec's decoder made with `kwargs` gives the frames hpuload gives."""
    import torch

    for name, value in kwargs.items():
        if name == "output_dtype":
            if value is not torch.uint8:
                return False
        elif name not in _TORCHCODEC_NATIVE:
            return False
        elif _TORCHCODEC_NATIVE[name] is not None and not any(value == v for v in _TORCHCODEC_NATIVE[name]):
            return False
    return True


def _frame_batch(data, pts: list, durations: list):
    import torch
    import torchcodec

    return torchcodec.FrameBatch(
        data=data,
        pts_seconds=torch.tensor(pts, dtype=torch.float64),
        duration_seconds=torch.tensor(durations, dtype=torch.float64),
    )
