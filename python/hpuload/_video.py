"""torchvision's video datasets (`Kinetics`, `UCF101`, `HMDB51`, and any dataset built on
`VideoClips`) on hpuload's path.

Such a dataset indexes clips, not videos: `dataset[i]` is clip `i` of all the videos' clips laid
end to end (`VideoClips.cumulative_sizes`), decoded by torchcodec, resampled to `frame_rate`,
passed through `dataset.transform` as a uint8 `[T, C, H, W]` tensor (`[T, H, W, C]` with
`output_format="THWC"`, `UCF101`'s and `HMDB51`'s default), and returned as
`(video, audio, label)` (a subclass may add values after the label: the video reference's
`KineticsWithVideoId` adds the video's index). Its samplers (`RandomClipSampler`,
`UniformClipSampler`, the video reference's distributed one) yield those clip indices.

hpuload takes from the dataset what it already computed: the video files, each video's frame
count and frame rate (torchvision's metadata), the clip length, step and frame rate, so its
clips are the dataset's own, frame for frame (`ClipSampler::Windows` in the crate, the same
windows and resampling). Each video's label, and what the dataset returns after it, comes from
the dataset's own `__getitem__`, run on each video's first clip with `video_clips.get_clip`
answering a stand-in instead of decoding and the transform replaced by a recorder (as
`_probe.py` does for images); values after the label are taken when they are plain (numbers,
strings, None) and the same for the video's first, middle and last clip. The transform is translated with video
semantics (`_transforms.translate(..., video=True)`: a uint8 tensor in, torchvision's video
reference presets and the video models' weights preset included; `THWC` clips when its first
step permutes them to `[T, C, H, W]`). Videos that torchvision's reader misreads (MPEG-4
B-frames in AVI) are given as shown, named by a `ReaderDifferenceWarning`.

hpuload decodes no audio. Batches go to the user's `collate_fn` as `(clip, audio, label, ...)`
tuples whose audio is `NO_AUDIO`, which raises, naming why, when anything reads it; the
collate_fn is tried once on such tuples when the loader is built (the global generators left
as they were), so one that reads the audio (default_collate does) sends the loader to torch's
with that reason. torchvision's video reference's collate_fn drops the audio and runs here."""

from __future__ import annotations

import bisect
import random
from typing import Any

import torch

from . import _options
from ._probe import NeedsPixels, _label, _user_line, probed_item
from ._transforms import Unsupported, translate_split_video
from ._watch import TransformWatch
from .sources import _pipeline


class AudioNotDecoded(RuntimeError):
    """Raised when a collate_fn reads the audio of a clip hpuload loaded."""


class _NoAudio:
    """The audio element of a clip's `(video, audio, label)` on hpuload's path: anything that
    reads it raises `AudioNotDecoded`."""

    __slots__ = ()

    def _refuse(self, *args, **kwargs):
        raise AudioNotDecoded(
            "hpuload does not decode audio: the collate_fn reads the clips' audio (torchvision's video "
            "reference drops it: `[(d[0], d[2]) for d in batch]`)"
        )

    def __getattr__(self, name: str):
        self._refuse()

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls._refuse(None)

    __len__ = __iter__ = __getitem__ = __array__ = __bool__ = _refuse
    __add__ = __radd__ = __mul__ = __rmul__ = __eq__ = _refuse
    __hash__ = None

    def __repr__(self) -> str:
        return "NO_AUDIO"


#: The audio of every clip hpuload yields.
NO_AUDIO = _NoAudio()


class _Clip:
    """What `video_clips.get_clip` answers while the dataset is probed: which video."""

    __slots__ = ("video",)

    def __init__(self, video: int):
        self.video = video

    def __getattr__(self, name: str):
        raise NeedsPixels(f".{name} of the decoded clip")


class _Recorded:
    __slots__ = ("clip",)

    def __init__(self, clip: _Clip):
        self.clip = clip

    def __getattr__(self, name: str):
        raise NeedsPixels(f".{name} of the transformed clip")


class _TransformStandIn:
    def __call__(self, video, *rest):
        if rest or not isinstance(video, _Clip):
            raise NeedsPixels(f"the transform was given a {type(video).__name__}, not the clip")
        return _Recorded(video)


def video_clips_of(dataset) -> Any | None:
    """The dataset's torchvision `VideoClips`, when it is a video dataset built on one."""
    clips = getattr(dataset, "video_clips", None)
    if clips is None:
        return None
    try:
        from torchvision.datasets.video_utils import VideoClips
    except ImportError:  # pragma: no cover
        return None
    return clips if isinstance(clips, VideoClips) else None


def _metadata(vc) -> list[tuple[int, float]]:
    """Each video's (frame count, fps), refusing metadata whose `video_pts` are not frame
    indices (what torchvision made before it decoded with torchcodec: timestamps)."""
    out = []
    for k, pts in enumerate(vc.video_pts):
        n = len(pts)
        if n and not torch.equal(torch.as_tensor(pts, dtype=torch.int64), torch.arange(n)):
            raise NeedsPixels(
                f"video {k}'s metadata holds timestamps, not frame indices (a cache from a torchvision "
                "older than its torchcodec backend): rebuild it"
            )
        fps = vc.video_fps[k]
        out.append((n, float(fps) if fps is not None else 1.0))
    return out


#: What may follow the label in a dataset's sample: values hpuload repeats for every clip of a
#: video once it has seen them stay the same (immutable, so one object serves every sample).
_PLAIN = (int, float, bool, str, type(None))


class ClipSamples:
    """The samples a torchvision video dataset's `__getitem__` returns, as the collate_fn gets
    them on hpuload's path: `(clip, NO_AUDIO, label)`, followed by the values the dataset puts
    after the label when it puts any (the video reference's `KineticsWithVideoId` adds the
    video's index), those being the same for every clip of a video: `_probe_videos` checked
    each video's first, middle and last clip."""

    def __init__(self, ends: list[int], extras: list[tuple]):
        #: Clips before the end of each video (`VideoClips.cumulative_sizes`).
        self._ends = list(ends)
        #: Per video, the values after the label (empty when there are none).
        self._extras = extras
        self._any = any(extras)

    @property
    def ends(self) -> list[int]:
        """Clips before the end of each video."""
        return self._ends

    def example(self) -> tuple:
        """The values after the label of one video that has clips (what the collate_fn is
        tried on)."""
        return next((e for e in self._extras if e), ())

    def tuples(self, views: list, labels: list[int], indices: list[int]) -> list[tuple]:
        """The samples of a batch: its clips (`views`), their labels and dataset indices."""
        if not self._any:
            return [(v, NO_AUDIO, t) for v, t in zip(views, labels)]
        return [
            (v, NO_AUDIO, t, *self._extras[bisect.bisect_right(self._ends, i)])
            for v, t, i in zip(views, labels, indices)
        ]


def _same(a: tuple, b: tuple) -> bool:
    """Whether two tuples of plain values are equal, value for value and type for type."""
    return len(a) == len(b) and all(type(x) is type(y) and x == y for x, y in zip(a, b))


def _probe_videos(dataset, vc) -> tuple[list[int], ClipSamples]:
    """Each video's label, and what the dataset returns after it, from the dataset's own
    `__getitem__` on the video's first clip (and, when something follows the label, its
    middle and last clips too, which must give the same)."""
    ends = vc.cumulative_sizes
    labels: list[int] = []
    extras: list[tuple] = []
    name = type(dataset).__name__
    transform = dataset.transform
    states = (torch.get_rng_state(), random.getstate())

    def get_clip(idx):
        video, _ = vc.get_clip_location(idx)
        return _Clip(video), NO_AUDIO, {"video_fps": vc.frame_rate}, video

    def probe(v: int, idx: int) -> tuple[int, tuple]:
        out = probed_item(dataset, idx)
        ok = (
            isinstance(out, tuple)
            and len(out) >= 3
            and isinstance(out[0], _Recorded)
            and out[0].clip.video == v
            and out[1] is NO_AUDIO
        )
        label = _label(out[2]) if ok else None
        if label is None:
            raise NeedsPixels(
                f"{name}.__getitem__ does not return torchvision's (video, audio, integer label, ...)"
            )
        for value in out[3:]:
            if not isinstance(value, _PLAIN):
                raise NeedsPixels(
                    f"{name}.__getitem__ returns a {type(value).__name__} after the label (hpuload repeats "
                    "numbers, strings and None that stay the same for every clip of a video)"
                )
        return label, tuple(out[3:])

    vc.get_clip = get_clip
    dataset.transform = _TransformStandIn()
    widths = set()
    try:
        for v in range(len(vc.video_paths)):
            first = ends[v - 1] if v else 0
            if ends[v] == first:
                labels.append(-1)  # no clip: never a sample
                extras.append(())
                continue
            label, after = probe(v, first)
            if after:
                for idx in sorted({(first + ends[v] - 1) // 2, ends[v] - 1} - {first}):
                    label_there, after_there = probe(v, idx)
                    if label_there != label or not _same(after_there, after):
                        raise NeedsPixels(
                            f"{name}.__getitem__ returns another label or other values after it for clip {idx} "
                            f"than for clip {first} of the same video ({(label, *after)!r} and "
                            f"{(label_there, *after_there)!r}): hpuload repeats them for every clip of a video"
                        )
            widths.add(len(after))
            if len(widths) > 1:
                raise NeedsPixels(f"{name}.__getitem__ returns tuples of different lengths for different videos")
            labels.append(label)
            extras.append(after)
    finally:
        del vc.get_clip
        dataset.transform = transform
        torch.set_rng_state(states[0])
        random.setstate(states[1])
    return labels, ClipSamples(ends, extras)


def video_source(dataset, pipeline) -> tuple[dict, str, str, list[str] | None]:
    """`(source settings, pipeline JSON, dtype, classes)` for a torchvision video dataset;
    raises `NeedsPixels` or `Unsupported` with the reason it cannot run natively."""
    vc = video_clips_of(dataset)
    clip_format = vc.output_format
    if clip_format not in ("TCHW", "THWC"):
        raise NeedsPixels(f"output_format={clip_format!r}")
    if "get_clip" in vars(vc):
        raise NeedsPixels("the dataset's video_clips.get_clip is replaced by the user's own")
    layout, watch = "TCHW", None
    if pipeline is not None:
        pipe, dtype = _pipeline(pipeline), "f32"
    else:
        pipe, dtype, layout, _ = translate_split_video(getattr(dataset, "transform", None), clip_format)

        def translate_now():
            transform = getattr(dataset, "transform", None)
            pipe_now, dtype_now, layout_now, tail = translate_split_video(transform, clip_format)
            if layout_now != layout:
                raise Unsupported(f"the new transform's clips are {layout_now}, the loader's {layout}")
            return pipe_now, dtype_now, tail

        watch = TransformWatch(lambda: getattr(dataset, "transform", None), translate_now)
    metadata = _metadata(vc)
    labels, samples = _probe_videos(dataset, vc)
    paths = [str(p) for p in vc.video_paths]
    if not paths:
        raise NeedsPixels("the dataset has no videos")
    classes = getattr(dataset, "classes", None)
    classes = list(classes) if isinstance(classes, (list, tuple)) and all(isinstance(c, str) for c in classes) else []
    video = _options.VideoOptions(
        sampler="video_clips",
        num_frames_per_clip=int(vc.num_frames),
        frames_between_clips=int(vc.step),
        frame_rate=None if vc.frame_rate is None else float(vc.frame_rate),
        clip_metadata=metadata,
        leave_unreadable_videos=True,
        layout="TCHW" if layout == "THWC" else layout,
    )
    source = {
        "source": _options.SamplesSource(list(zip(paths, labels)), classes),
        "video": video,
        "clip_samples": samples,
        "clips_expected": int(vc.num_clips()),
        "watch": watch,
    }
    if layout == "THWC" and (watch is None or watch.translated[2] is None):
        source["native_layout"] = "nhwc"
    return source, pipe, dtype, classes or None


def check_collate(collate, samples: ClipSamples) -> None:
    """Runs the user's collate_fn once on two small samples as hpuload gives them
    (`(clip, NO_AUDIO, label, ...)`), the global generators left as they were; raises
    `NeedsPixels` when it reads the audio (or fails otherwise on what hpuload gives it)."""
    if collate is None:
        raise NeedsPixels(
            "default_collate batches the clips' audio, which hpuload does not decode: pass a collate_fn "
            "that drops it (as torchvision's video reference does)"
        )
    states = (torch.get_rng_state(), random.getstate())
    try:
        after = samples.example()
        collate([(torch.zeros(2, 3, 2, 2), NO_AUDIO, 0, *after), (torch.zeros(2, 3, 2, 2), NO_AUDIO, 1, *after)])
    except AudioNotDecoded as e:
        raise NeedsPixels(str(e)) from None
    except Exception as e:
        raise NeedsPixels(
            f"the collate_fn raised {type(e).__name__} on hpuload's (clip, audio, label) samples at "
            f"{_user_line(e)}: {e}"
        ) from None
    finally:
        torch.set_rng_state(states[0])
        random.setstate(states[1])
