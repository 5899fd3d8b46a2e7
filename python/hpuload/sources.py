"""hpuload's own dataset descriptions, for when there is no torchvision dataset to wrap."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from typing import Any

from ._options import (
    ArrowSource,
    FolderSource,
    ManifestSource,
    ParquetSource,
    ShardSource,
    Storage,
    VideoFolderSource,
    FrameFolderSource,
    VideoManifestSource,
    VideoOptions,
)


def _pipeline(pipeline: Any) -> str:
    from . import _hpuload

    names = _hpuload.pipeline_names()
    if isinstance(pipeline, str) and pipeline in names:
        return pipeline
    if isinstance(pipeline, dict):
        return json.dumps(pipeline)
    if isinstance(pipeline, (str, os.PathLike)) and os.path.exists(pipeline):
        return os.fspath(pipeline)  # the Rust side parses (and validates) the TOML file
    raise ValueError(
        f"pipeline={pipeline!r}: give a built-in name ({', '.join(names)}), a pipeline TOML file "
        "(see pipelines/ in the repository) or a dict of the same shape"
    )


class _WithPipeline:
    pipeline: Any

    def _pipeline_json(self) -> str:
        return _pipeline(self.pipeline)


@dataclass(frozen=True)
class ImageFolder(_WithPipeline):
    """A folder `root/<class>/<image>` (torchvision's layout and class order), with an hpuload
    pipeline: a built-in name, a TOML file or a dict `{"name": ..., "ops": [...]}`."""

    root: str | os.PathLike
    pipeline: Any = "resnet50_train"

    def _source(self) -> FolderSource:
        return FolderSource(os.fspath(self.root))


@dataclass(frozen=True)
class Manifest(_WithPipeline):
    """A manifest file, `path<TAB>label` per line (relative paths are from its folder)."""

    path: str | os.PathLike
    pipeline: Any = "resnet50_train"

    def _source(self) -> ManifestSource:
        return ManifestSource(os.fspath(self.path))


@dataclass(frozen=True)
class WebDataset(_WithPipeline):
    """WebDataset tar shards: one file or a brace pattern such as
    `/data/train-{000000..000146}.tar`; the image is the jpg/jpeg/png/webp member, the label
    the `label_field` one (`cls`). Each shard's sidecar index (`hpuload make-shards` writes it)
    is built on the fly when missing.

    The spec may be a URL: `s3://bucket/train-{000000..000146}.tar` (also `gs://`, `az://`,
    `http(s)://`), with credentials from the store's usual environment variables
    (`AWS_ACCESS_KEY_ID`, `AWS_ENDPOINT_URL`, ...). Each sample is then one ranged request
    (at most `max_requests` in flight, `timeout` seconds each, `retries` retries with backoff),
    and whole shards are downloaded in the background into `cache_dir` (default:
    `$HPULOAD_CACHE_DIR/shards`; `False` for no cache; at most `cache_limit` bytes, default
    half the free space) so that later epochs read from local disk."""

    spec: str | os.PathLike
    pipeline: Any = "resnet50_train"
    label_field: str = "cls"
    cache_dir: str | os.PathLike | bool | None = None
    cache_limit: int | None = None
    max_requests: int = 64
    timeout: float = 60.0
    retries: int = 5

    def _source(self) -> ShardSource:
        return ShardSource(os.fspath(self.spec), label_field=self.label_field, storage=Storage.of(self))


@dataclass(frozen=True)
class HFDataset(_WithPipeline):
    """A Hugging Face `datasets` table in Arrow files, read without the `datasets` package: a
    `save_to_disk` folder, one `.arrow` file, or a list of them in order. The image column
    (an `Image` feature: embedded bytes, or a path for rows whose bytes are null) and the label
    column (a `ClassLabel`) come from the table's metadata unless named. `rows` is an indices
    mapping (the table's rows to use, in order). Each image is turned upright by the EXIF
    orientation it carries, as `datasets` turns it as it decodes it (`exif_orientation=False`:
    as stored)."""

    path: Any
    pipeline: Any = "resnet50_train"
    image_column: str | None = None
    label_column: str | None = None
    rows: Any = None
    exif_orientation: bool = True

    def _source(self) -> ArrowSource:
        if isinstance(self.path, (list, tuple)):
            where = {"files": [os.fspath(p) for p in self.path]}
        else:
            where = {"spec": os.fspath(self.path)}
        return ArrowSource(
            rows=None if self.rows is None else [int(r) for r in self.rows],
            image_column=self.image_column,
            label_column=self.label_column,
            **where,
        )


@dataclass(frozen=True)
class Parquet(_WithPipeline):
    """Parquet files of a Hugging Face dataset: one file, a brace pattern
    (`data/train-{00000..00293}-of-00294.parquet`), a `*` glob in the file name, or a folder
    (every `.parquet` under it). Rows are read a row group at a time; a shuffled epoch visits
    row groups in a seeded random order and shuffles rows within windows of at least
    `window_rows` rows (see the README).

    The spec may be a URL (`s3://`, `gs://`, `az://`, `http(s)://`), read as `WebDataset`'s
    are: the same storage settings, each row group one ranged request until the whole file
    has landed in `cache_dir` (downloaded in the background), then from local disk.

    Each image is turned upright by the EXIF orientation it carries, as `datasets` turns it as
    it decodes it (`exif_orientation=False`: as stored)."""

    spec: str | os.PathLike
    pipeline: Any = "resnet50_train"
    image_column: str | None = None
    label_column: str | None = None
    window_rows: int = 2048
    cache_dir: str | os.PathLike | bool | None = None
    cache_limit: int | None = None
    max_requests: int = 64
    timeout: float = 60.0
    retries: int = 5
    exif_orientation: bool = True

    def _source(self) -> ParquetSource:
        return ParquetSource(
            os.fspath(self.spec),
            image_column=self.image_column,
            label_column=self.label_column,
            window_rows=int(self.window_rows),
            storage=Storage.of(self),
        )


@dataclass(frozen=True, kw_only=True)
class _Clips(_WithPipeline):
    """How a video dataset's clips are drawn and transformed (`VideoFolder`, `VideoManifest`)."""

    sampler: str = "random_indices"
    num_clips: int = 1
    num_frames_per_clip: int = 16
    num_indices_between_frames: int = 1
    seconds_between_frames: float | None = None
    sampling_range_start: float | None = None
    sampling_range_end: float | None = None
    policy: str = "repeat_last"
    layout: str = "TCHW"
    index_cache: bool | str | os.PathLike = True
    frames_between_clips: int = 1
    frame_rate: float | None = None

    def _video(self) -> VideoOptions:
        # The clip settings are VideoOptions' fields, under the same names.
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(VideoOptions) if hasattr(self, f.name)}
        if not isinstance(self.index_cache, bool):
            fields["index_cache"] = os.fspath(self.index_cache)
        return VideoOptions(**fields)

    def _pipeline_and_dtype(self) -> tuple[str, str]:
        if (self.pipeline is None) == (self.transform is None):
            raise TypeError(f"{type(self).__name__} needs exactly one of pipeline= and transform=")
        if self.transform is not None:
            from ._transforms import translate

            return translate(self.transform)
        return _pipeline(self.pipeline), "f32"


@dataclass(frozen=True)
class VideoFolder(_Clips):
    """Videos (H.264 in MP4/MOV, or MPEG-4 Part 2 in AVI or MP4, decoded by FFmpeg's libavcodec) in
    class folders, `root/<class>/<video>.mp4` or `.avi` (the Kinetics, UCF101 and HMDB51
    layout; torchvision's class order), each sample the clips of one video.

    The clips are drawn as torchcodec's samplers draw them, with its parameter names:
    `sampler` is `"random_indices"` (`clips_at_random_indices`), `"regular_indices"` or
    `"random_timestamps"`; `num_clips` per video, `num_frames_per_clip`,
    `num_indices_between_frames` (or `seconds_between_frames` for timestamps), the
    `sampling_range_start`/`end` of clip starts and the `policy` for frames past the end
    (`"repeat_last"`, `"wrap"`, `"error"`). Draws are keyed by (seed, epoch, index), so an
    epoch is reproducible and resumes exactly. `sampler="video_clips"` is torchvision's
    `VideoClips` instead: every window of `num_frames_per_clip` frames, `frames_between_clips`
    apart, after resampling to `frame_rate`, is a sample of its own.

    `pipeline` (an hpuload pipeline: built-in name, TOML file or dict) or `transform` (a
    torchvision transform hpuload translates, as for images) is drawn once per clip and
    applied to each of its frames, as torchvision v2 transforms a video tensor. Batches are
    `[B, T, C, H, W]` (`[B, num_clips, T, C, H, W]` with several clips), or with
    `layout="CTHW"` `[B, C, T, H, W]`, what torchvision's video models take. The clip
    settings are keywords.

    Every video is indexed (its frames' timestamps, keyframes and byte ranges, read from its
    tables) when the loader is built, and the indexes are kept in `index_cache`: by default
    (`True`) the file `.hpuload-video.idx` in `root`, so the next run, and every other rank,
    reads one file instead; a path puts it elsewhere (a shared disk when `root` is
    read-only), `False` keeps none."""

    root: str | os.PathLike
    pipeline: Any = None
    transform: Any = None

    def _source(self) -> VideoFolderSource:
        return VideoFolderSource(os.fspath(self.root))


@dataclass(frozen=True)
class VideoManifest(_Clips):
    """Videos listed in a CSV file with a header row, each sample the clips of one row's video
    (the same clip settings as `VideoFolder`). Kinetics' annotation files work as published
    (`label,youtube_id,time_start,time_end,split`): each `youtube_id` is found under `videos`
    as the trimmed clip a Kinetics download holds, `[<label>/]<id>_<start>_<end>.mp4`, or else
    as the whole video `[<label>/]<id>.mp4` cut to the row's times; rows whose video is missing
    are left out (a warning counts them). Any other list works with a `path` column (relative
    to `videos`), a `label` (an integer, or a class name: classes sorted by name) and optional
    `start`/`end` (or `time_start`/`time_end`) in seconds, the segment clips are drawn from.
    `videos` defaults to the CSV's folder."""

    path: str | os.PathLike
    videos: str | os.PathLike | None = None
    pipeline: Any = None
    transform: Any = None

    def _source(self) -> VideoManifestSource:
        videos = None if self.videos is None else os.fspath(self.videos)
        return VideoManifestSource(os.fspath(self.path), videos)


@dataclass(frozen=True)
class VideoShards(_Clips):
    """WebDataset tar shards of videos, each sample the clips of its video member (`.mp4`,
    `.m4v` or `.mov`: H.264 or MPEG-4 Part 2; `.avi`: MPEG-4 Part 2) and labelled by its `label_field` member (`cls`), as
    `hpuload make-shards --video` writes them. The same clip settings as `VideoFolder`, and
    the same spec and storage settings as `WebDataset`: one file, a brace pattern, or a URL.

    Videos in local shards are indexed when the loader is built and read where their clips
    are (the index file `.<first shard>.hpuload-video.idx` beside the shards, unless
    `index_cache` says otherwise); videos on object storage are read whole, one request each
    (or from the shard cache once a shard has landed there), and indexed when first read."""

    spec: str | os.PathLike
    pipeline: Any = None
    transform: Any = None
    label_field: str = "cls"
    cache_dir: str | os.PathLike | bool | None = None
    cache_limit: int | None = None
    max_requests: int = 64
    timeout: float = 60.0
    retries: int = 5

    def _source(self) -> ShardSource:
        return ShardSource(
            os.fspath(self.spec), label_field=self.label_field, storage=Storage.of(self), media="videos"
        )


@dataclass(frozen=True)
class FrameFolder(_Clips):
    """Videos kept as folders of JPEG frames, in class folders: `root/<class>/<video>/<frame>.jpg`
    (what frame-extraction scripts write for UCF101, HMDB51, Something-Something and mmaction's
    "rawframes"), each sample the clips of one video folder. A video's frames are its `.jpg`
    files in natural order (`img_9.jpg` before `img_10.jpg`), presented at `fps` frames per
    second (for the timestamp samplers; the index samplers count frames). The same clip
    settings as `VideoFolder`; each kept frame is decoded as an image is, on the host or by the
    media engine's JPEG decoder, the clip's plan applied to every frame."""

    root: str | os.PathLike
    fps: float = 30.0
    pipeline: Any = None
    transform: Any = None

    def _source(self) -> FrameFolderSource:
        return FrameFolderSource(os.fspath(self.root), float(self.fps))
