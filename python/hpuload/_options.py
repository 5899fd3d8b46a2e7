"""What the Rust loader is built from: one typed object per loader, made here once and read
field by field by `_hpuload.Loader` (no settings cross as JSON text). A rebuild (a resumed
state, a transform that changed) is `dataclasses.replace` of the same object."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar, Union


@dataclass(frozen=True)
class Storage:
    """How object storage is read (`s3://`, `gs://`, `az://`, `http(s)://`)."""

    #: Where whole shards and files are cached; None: `$HPULOAD_CACHE_DIR` or the default.
    cache_dir: str | None = None
    #: False: no cache (every epoch reads from the store).
    cache: bool = True
    #: At most this many bytes cached; None: half the free space.
    cache_limit: int | None = None
    max_requests: int = 64
    timeout: float = 60.0
    retries: int = 5

    @staticmethod
    def of(source) -> Storage:
        """The storage settings of a source with `WebDataset`'s fields (`cache_dir` may be a
        folder, None or True for the default folder, or False for no cache)."""
        cache = source.cache_dir
        return Storage(
            cache_dir=None if cache is None or isinstance(cache, bool) else os.fspath(cache),
            cache=cache is not False,
            cache_limit=None if source.cache_limit is None else int(source.cache_limit),
            max_requests=int(source.max_requests),
            timeout=float(source.timeout),
            retries=int(source.retries),
        )


@dataclass(frozen=True)
class FolderSource:
    """An ImageFolder: `root/<class>/<image>`."""

    kind: ClassVar[str] = "folder"
    root: str


@dataclass(frozen=True)
class ManifestSource:
    """A `path<TAB>label` file."""

    kind: ClassVar[str] = "manifest"
    path: str


@dataclass(frozen=True)
class SamplesSource:
    """`(path, label)` pairs (torchvision's `ImageFolder.samples`): sample `i` is theirs."""

    kind: ClassVar[str] = "samples"
    samples: list[tuple[str, int]]
    classes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ArraySource:
    """Images of one size held in one array (torchvision's CIFAR10, CIFAR100, SVHN): `pixels`
    the array's bytes, channels last, `shape` each image's (height, width, channels); sample
    `i` is the dataset's; `name` names it in messages (`name[i]`)."""

    kind: ClassVar[str] = "arrays"
    name: str
    pixels: bytes
    shape: tuple[int, int, int]
    labels: list[int]
    classes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ShardSource:
    """WebDataset tar shards: a file, a brace pattern or a URL."""

    kind: ClassVar[str] = "shards"
    spec: str
    label_field: str = "cls"
    storage: Storage = Storage()
    #: What each sample's media member is: "images" (jpg, jpeg, png, webp) or "videos"
    #: (mp4, m4v, mov).
    media: str = "images"


@dataclass(frozen=True)
class ArrowSource:
    """A `datasets` table in Arrow files: `files` in order, or `spec` (a `save_to_disk` folder
    or one file); `rows`, an indices mapping; the columns as the metadata says unless named;
    `unlabelled`: read without labels (every row's is 0), a table of images and captions."""

    kind: ClassVar[str] = "arrow"
    files: list[str] = field(default_factory=list)
    spec: str = ""
    rows: list[int] | None = None
    image_column: str | None = None
    label_column: str | None = None
    unlabelled: bool = False


@dataclass(frozen=True)
class ParquetSource:
    """Parquet files: a file, a pattern, a folder or a URL."""

    kind: ClassVar[str] = "parquet"
    spec: str
    image_column: str | None = None
    label_column: str | None = None
    window_rows: int = 2048
    storage: Storage = Storage()


@dataclass(frozen=True)
class CocoSource:
    """A COCO detection set: images under `images` (a folder, shards or a URL), annotations
    from the file `annotations` or given as `text` (then `annotations` only names it)."""

    kind: ClassVar[str] = "coco"
    images: str
    annotations: str | None = None
    text: str | None = None
    drop_empty: bool = False
    contiguous: bool = False
    #: Only these image ids (a `Subset`).
    only: list[int] | None = None


@dataclass(frozen=True)
class VideoFolderSource:
    """Videos in class folders: `root/<class>/<video>.mp4` or `.avi` (Kinetics, UCF101, HMDB51)."""

    kind: ClassVar[str] = "video_folder"
    root: str


@dataclass(frozen=True)
class FrameFolderSource:
    """Videos kept as folders of JPEG frames in class folders: `root/<class>/<video>/<frame>.jpg`,
    at `fps` frames per second."""

    kind: ClassVar[str] = "frame_folder"
    root: str
    fps: float = 30.0


@dataclass(frozen=True)
class VideoManifestSource:
    """Videos listed in a CSV file (Kinetics' annotations, or `path,label[,start,end]`), found
    under `videos` (default: the CSV's folder)."""

    kind: ClassVar[str] = "video_manifest"
    path: str
    videos: str | None = None


@dataclass(frozen=True)
class VideoOptions:
    """How each video's clips are drawn, with torchcodec's sampler names and parameters:
    `sampler` is `random_indices`, `regular_indices` or `random_timestamps`; or
    `video_clips`, torchvision's `VideoClips` (every window of `num_frames_per_clip` frames,
    `frames_between_clips` apart, after resampling to `frame_rate`), each clip a sample."""

    sampler: str = "random_indices"
    num_clips: int = 1
    num_frames_per_clip: int = 16
    num_indices_between_frames: int = 1
    seconds_between_frames: float | None = None
    #: Index samplers: an int (negative: from the end); time samplers: seconds.
    sampling_range_start: float | None = None
    sampling_range_end: float | None = None
    policy: str = "repeat_last"
    #: A clip's axes: "TCHW" or "CTHW" (torchvision's video models).
    layout: str = "TCHW"
    #: Where the videos' frame indexes are kept between runs: True, a file in the folder;
    #: a path; False, nowhere.
    index_cache: bool | str = True
    #: `video_clips`: windows from one clip's start to the next.
    frames_between_clips: int = 1
    #: `video_clips`: the frame rate videos are resampled to first (None: as they are).
    frame_rate: float | None = None
    #: `video_clips`: each video's (frame count, fps) as the user's dataset has them.
    clip_metadata: list[tuple[int, float]] | None = None
    #: `video_clips` with `clip_metadata`: a video hpuload cannot read as counted is left to
    #: the caller (its clips' slots zero; `Loader.left_videos` names it) instead of refused.
    leave_unreadable_videos: bool = False


Source = Union[
    FolderSource,
    ManifestSource,
    SamplesSource,
    ArraySource,
    ShardSource,
    ArrowSource,
    ParquetSource,
    CocoSource,
    VideoFolderSource,
    VideoManifestSource,
    FrameFolderSource,
]


@dataclass(frozen=True)
class LoaderOptions:
    """Everything `_hpuload.Loader` is built from. `pipeline` is a built-in name, the path of a
    pipeline TOML file, or its JSON; `resume` a state from `Loader.state()`."""

    source: Source
    pipeline: str
    batch_size: int = 256
    max_boxes: int = 200
    shuffle: bool = False
    seed: int = 0
    workers: int = 2
    prefetch: int = 2
    dtype: str = "f32"
    layout: str = "nchw"
    last_batch: str = "pad"
    rank: int | None = None
    world_size: int | None = None
    on_error: str = "skip"
    error_budget: float = 0.01
    backend: str = "auto"
    resume: str | None = None
    #: A video loader's clips (the source is then a video source); None: images.
    video: VideoOptions | None = None
    #: Turn each image upright by the EXIF orientation it carries before the pipeline, as
    #: Pillow's `ImageOps.exif_transpose` does (what `datasets` does as it decodes an image).
    exif_orientation: bool = False
    #: Whose reading of the orientation that is: "pillow", or "torchvision" (its readers'
    #: `apply_exif_orientation=True`, which read it from other places in the file).
    exif_reader: str = "pillow"
    #: Which image of each sample this loader makes, where a sample holds several (a table's
    #: image columns, each read by a loader of its own in the same order): image `k` draws
    #: its plans from a seed of its own (`more` builds them; 0: the loader's own seed).
    image_of_sample: int = 0
    #: Every sample of a batch draws its plan from the batch's key, not its own index: the
    #: samples of a batch (and, with `image_of_sample` 0, each of its images) share their
    #: draws, as a dataset function that hands the stacked batch to one random transform
    #: gives them (`_hf_joint`).
    draws_per_batch: bool = False
    #: The sample's other images (`MoreImages`), each made by a loader of its own that
    #: `_cores.make` builds beside this one; empty: one image per sample.
    more: tuple = ()


@dataclass(frozen=True)
class MoreImages:
    """Another image of each sample (a ControlNet table's conditioning image, DreamBooth's
    class image): the table's column that holds it, or a source of its own (`source`: a
    Dataset's files of that image, sample by sample), and the pipeline and dtype that make
    it."""

    image_column: str | None
    pipeline: str
    dtype: str
    source: Source | None = None
