"""Drop-in replacements for `torch.utils.data.DataLoader` and Habana's `HabanaDataLoader`.

Change the import line and keep the loop::

    from hpuload.torch import DataLoader          # was: from torch.utils.data import DataLoader

    loader = DataLoader(ImageFolder(root, transform), batch_size=256, shuffle=True, num_workers=8)
    for images, labels in loader:                  # float32 NCHW and int64, as torchvision gives
        ...

hpuload takes a torchvision `ImageFolder` or a user's map-style Dataset whose transform it
implements (RandomResizedCrop, Resize, CenterCrop, the flips, the pixel ops, ToTensor /
PILToTensor / ToImage + ToDtype, Normalize; v1 or v2), or implements up to a step after which
the rest runs in Python on each sample (`_tail.py`), a Hugging Face `datasets.Dataset`,
torchvision's `CocoDetection` (raw
or wrapped for transforms v2, with the detection reference's transforms and a fixed Resize;
see `_detection.py`), a folder path with `pipeline=`, or an `hpuload.ImageFolder` /
`hpuload.Manifest`. Anything else goes to torch's own DataLoader, with the same arguments and
one warning that says why.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import dataclasses
import functools
import inspect
import itertools
import json
import os
import warnings
from typing import Iterator

import torch
import torch.utils.data as tud

# torch's own class, from its defining module: a script may replace `torch.utils.data.DataLoader`
# by ours (`torch.utils.data.DataLoader = hpuload.torch.DataLoader`), and a fallback must still
# reach torch's.
from torch.utils.data.dataloader import DataLoader as _TorchDataLoader

from . import _albumentations, _arrays, _collate, _copy_paste, _cores, _detection, _guard, _hf, _hpuload, _malloc, _options, _probe, _segmentation, _tail, _video
from ._fallback import FallbackReason, FallbackWarning
from ._fallback import Unfit as _Unfit
from ._transforms import CenterSquare, Repeated, Unsupported, pillow_resize, steps, translate_split, translate_to_pil
from ._watch import TransformWatch as _TransformWatch
from ._watch import describe as _describe
from .sources import ImageFolder as _HpuFolder
from .sources import _pipeline
from .sources import _Clips as _HpuClips
from .sources import Manifest as _HpuManifest
from .sources import HFDataset as _HpuHFDataset
from .sources import Parquet as _HpuParquet
from .sources import VideoFolder as _HpuVideoFolder
from .sources import VideoManifest as _HpuVideoManifest
from .sources import VideoShards as _HpuVideoShards
from .sources import WebDataset as _HpuWebDataset

_HPU_SOURCES = (
    _HpuFolder,
    _HpuManifest,
    _HpuWebDataset,
    _HpuHFDataset,
    _HpuParquet,
    _HpuVideoFolder,
    _HpuVideoManifest,
    _HpuVideoShards,
)

__all__ = [
    "DataLoader",
    "HabanaDataLoader",
    "FallbackReason",
    "FallbackWarning",
    "PinningWarning",
    "PythonTailWarning",
    "ReaderDifferenceWarning",
    "PythonClipsWarning",
    "SkippedSampleWarning",
    "TransformChangeWarning",
    "fallback_counts",
]

# Extensions the decoders read (content decides the format; these are what we accept by name),
# as the Rust image folder keeps them.
_DECODABLE = tuple("." + e for e in _hpuload.image_extensions())

#: The label of a row that only pads the last batch to a static shape (`pad_last_batch=True`):
#: torch's CrossEntropyLoss and Hugging Face's models ignore it by default.
IGNORE_INDEX = -100

# hpuload's own keyword arguments, on top of torch's.
_OWN = (
    "backend", "on_error", "error_budget", "seed", "pipeline", "output_dtype", "layout", "transform", "output",
    "max_boxes", "pad_last_batch", "video_reader",
)


#: hpuload's dtype names as torch dtypes.
_TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "u8": torch.uint8}

#: Fallbacks so far in this process, by reason.
fallback_counts: collections.Counter = collections.Counter()


class PinningWarning(UserWarning):
    """The batch buffers are pageable: page-locking them was refused (the message says how to
    allow it)."""


class PythonTailWarning(UserWarning):
    """Part of the dataset's transform (a `Lambda`, a class of the user's, an op in an order
    hpuload does not run) runs in Python on what hpuload's native prefix of it made; the
    loader stays on hpuload's path. The message names the steps and why; `report()` counts
    the samples they ran on."""


class TransformChangeWarning(UserWarning):
    """The dataset's transform was replaced during an epoch: it applies from the next one."""


class ReaderDifferenceWarning(UserWarning):
    """hpuload gives some videos' frames otherwise than torchvision's reader (torchcodec)
    would, where that reader misreads them: MPEG-4 with B-frames in AVI (torchcodec 0.17 gives
    clips that start between keyframes a frame early, and a packed bitstream's damaged or not
    at all). hpuload gives the frames as they are shown, as PyAV's FFmpeg decodes them in
    order. The message names the videos."""


class PythonClipsWarning(UserWarning):
    """Some of a torchvision video dataset's videos are ones hpuload cannot read as the
    dataset's metadata counts them (a codec it does not decode, such as VP9 or HEVC; a
    damaged file; another frame count): their clips are made by the dataset itself, in Python,
    as torch's loader would make them, and the rest natively. The message names the videos
    and why; more than a quarter of the clips so made sends the dataset to torch's loader."""


class SkippedSampleWarning(UserWarning):
    """A sample could not be loaded and was replaced (the message names the file and why)."""


def _torch_signature():
    return inspect.signature(_TorchDataLoader.__init__)


class _FallbackLoader(_TorchDataLoader):
    """torch's DataLoader, returned when hpuload cannot take the arguments, with
    `fallback_reason` and the `state_dict`/`load_state_dict` pair that checkpointing code calls
    on hpuload's loaders: the state is the epoch's count of batches returned, and a restored
    loader skips that many at the start of its next pass (the same batches when the order and
    augmentation are seeded alike, as with a seeded sampler and worker seeds)."""

    fallback_reason: FallbackReason = FallbackReason.ARGUMENT
    #: The dataset reads videos with decord or torchcodec, whose readers hpuload's answer
    #: (`_probe.answering`).
    answers_video_reader: bool = False

    #: The dataset under hpuload's bad-input policy (`_guard.Guarded`), which the loader's
    #: iterators read in its place; `loader.dataset` stays the user's.
    _hpuload_guard = None

    def _get_iterator(self):
        guarded, dataset = self._hpuload_guard, self.dataset
        if guarded is None:
            return super()._get_iterator()
        # torch's loader refuses to set `dataset` once made: set it around the iterator's making.
        object.__setattr__(self, "dataset", guarded)
        try:
            return super()._get_iterator()
        finally:
            object.__setattr__(self, "dataset", dataset)

    def __iter__(self):
        skip, self._hpuload_skip = getattr(self, "_hpuload_skip", 0), 0
        self._hpuload_yielded = 0
        if self._hpuload_guard is not None:
            self._hpuload_guard.failed.value = 0  # a new epoch's budget
        batches = super().__iter__()
        # Without workers the dataset runs here, in `next`: only there are its readers answered.
        answering = _probe.answering if self.answers_video_reader and self.num_workers == 0 else contextlib.nullcontext
        for k in itertools.count():
            with answering():
                batch = next(batches, _END)
            if batch is _END:
                return
            if k < skip:
                continue
            self._hpuload_yielded = k + 1
            yield batch

    def state_dict(self) -> dict:
        return {"fallback_batches": int(getattr(self, "_hpuload_yielded", 0))}

    def load_state_dict(self, state: dict) -> None:
        self._hpuload_skip = int(state.get("fallback_batches", 0))


_END = object()


class _AnswerReaders:
    """The `worker_init_fn` of torch's loader over a dataset that reads videos with decord or
    torchcodec: in each worker, their readers make hpuload's from now on (the worker's thread
    runs only the dataset and the collate_fn); then the user's own `worker_init_fn`."""

    def __init__(self, then):
        self.then = then

    def __call__(self, worker_id: int) -> None:
        _probe.answer_on_this_thread()
        if self.then is not None:
            self.then(worker_id)


#: What hpuload's answer gives, by the reader it answers.
_ANSWERS = {
    "decord": "decord's frames and frame count",
    "torchcodec": "torchcodec's frames, timestamps and frame count",
}


def _fallback(unfit: _Unfit, dataset, args, kwargs, stacklevel: int = 3):
    """torch's DataLoader over the arguments, with a `FallbackWarning`. A dataset that reads its
    videos with decord or torchcodec keeps them decoded natively: their readers are answered by
    hpuload's in the loader's workers (or in `next` without workers), unless
    `video_reader="own"`."""
    wanted = kwargs.get("video_reader", "hpuload")
    if wanted not in ("hpuload", "own"):
        raise ValueError(f"video_reader={wanted!r}: give 'hpuload' (decode natively) or 'own' (the dataset's own reader)")
    reader = getattr(unfit, "video_reader", "")
    library = reader.split(".")[0]
    answer = library in _ANSWERS and wanted == "hpuload"
    message = f"hpuload: using torch.utils.data.DataLoader instead: {unfit}"
    if answer:
        message += (
            f"; its {reader} is answered by hpuload's decoder in the loader's workers ({_ANSWERS[library]}, "
            f"pixels at most one level apart in rare places; {library}'s own reader for whatever hpuload "
            "does not decode; video_reader='own' keeps it)"
        )
    fallback_counts[unfit.reason] += 1
    warnings.warn(FallbackWarning(message, unfit.reason), stacklevel=stacklevel)
    on_error, error_budget = kwargs.get("on_error", "skip"), float(kwargs.get("error_budget", 0.01))
    kwargs = {k: v for k, v in kwargs.items() if k not in _OWN}
    if answer:
        bound = _torch_signature().bind(None, dataset, *args, **kwargs)
        bound.arguments["worker_init_fn"] = _AnswerReaders(bound.arguments.get("worker_init_fn"))
        args, kwargs = bound.args[2:], bound.kwargs
    loader = _FallbackLoader(dataset, *args, **kwargs)
    loader._hpuload_guard = _guard.guard(dataset, on_error, error_budget, loader.multiprocessing_context)
    loader.fallback_reason = unfit.reason
    loader.answers_video_reader = answer
    return loader


def _reads_video(e: _probe.ReadsVideo) -> _Unfit:
    """The fallback for a dataset that opens a video with `e.reader`."""
    unfit = _Unfit(str(e), FallbackReason.DATASET)
    unfit.video_reader = e.reader
    return unfit


def _dataset_source(dataset, pipeline, transform=None, max_boxes=200):
    """`(source kwargs for the Rust loader, pipeline JSON, dtype, classes)` or `_Unfit`."""
    if isinstance(dataset, (str, os.PathLike)):
        if pipeline is None:
            raise TypeError("a folder path as dataset needs pipeline= (e.g. 'resnet50_train')")
        dataset = _HpuFolder(dataset, pipeline=pipeline)
    if isinstance(dataset, _HpuClips):  # VideoFolder, VideoManifest, VideoShards
        pipeline_json, dtype = dataset._pipeline_and_dtype()
        return {"source": dataset._source(), "video": dataset._video()}, pipeline_json, dtype, None
    if isinstance(dataset, _HPU_SOURCES):
        source = {"source": dataset._source(), "exif_orientation": getattr(dataset, "exif_orientation", False)}
        return source, dataset._pipeline_json(), "f32", None
    if _hf.is_hf_dataset(dataset):
        return _hf.hf_source(dataset, pipeline, transform)
    if _segmentation.is_coco_segmentation(dataset):
        return _segmentation_source(dataset, pipeline)
    if _detection.is_coco(dataset):
        return _coco_source(dataset, pipeline, max_boxes)
    if _segmentation.is_segmentation(dataset):
        return _segmentation_source(dataset, pipeline)
    if _video.video_clips_of(dataset) is not None:
        try:
            return _video.video_source(dataset, pipeline)
        except _probe.NeedsPixels as e:
            raise _Unfit(str(e), FallbackReason.DATASET) from e
        except Unsupported as e:
            raise _Unfit(str(e), FallbackReason.TRANSFORM) from e
    arrays = _array_source(dataset, pipeline)
    if arrays is not None:
        return arrays
    return _listed_source(dataset, pipeline)


#: File names taken for JPEGs without reading them.
_JPEG_NAMES = (".jpg", ".jpeg", ".jpe", ".jfif")

#: The files of hpuload's that torchvision's `decode_image` reads too (by name).
_TORCHVISION_READS = _JPEG_NAMES + (".png", ".webp")


def _check_decodable(samples) -> None:
    odd = [p for p, _ in samples if not p.lower().endswith(_DECODABLE)]
    if odd:
        raise _Unfit(
            f"{len(odd)} files are not JPEG, PNG, WebP, BMP or PGM/PPM (first: {odd[0]})", FallbackReason.DATASET
        )


#: How much of a JPEG `_jpeg_head` reads when its segments cannot be walked (an Exif
#: segment is at most 64 KiB).
_EXIF_HEAD = 1 << 17


def _jpeg_head(f) -> bytes:
    """A JPEG file's bytes up to its first scan (its headers: the frame, the Exif and XMP
    segments where Pillow and torchvision read an orientation), read segment by segment; the
    first `_EXIF_HEAD` bytes when its markers cannot be walked."""
    data = f.read(4096)
    k = 2
    while True:
        while k + 4 > len(data):
            more = f.read(65536)
            if not more:
                return data
            data += more
        if data[k] != 0xFF:
            return data + f.read(max(0, _EXIF_HEAD - len(data)))
        marker = data[k + 1]
        if marker == 0xFF:  # a fill byte before the marker
            k += 1
        elif marker in (0xDA, 0xD9):
            return data[:k]
        elif 0xD0 <= marker <= 0xD8 or marker == 0x01:
            k += 2
        else:
            k += 2 + int.from_bytes(data[k + 2 : k + 4], "big")


def _keyed(keys: tuple, image, label) -> dict:
    """A sample or batch as the Dataset's dicts hold it: `keys` is `(image key, label key,
    label first)`, and the keys come in the Dataset's order (code that unpacks
    `batch.values()` or walks `items()` sees what torch's loader gives it)."""
    if len(keys) > 2 and keys[2]:
        return {keys[1]: label, keys[0]: image}
    return {keys[0]: image, keys[1]: label}


def _check_opencv_reads(samples, checked: set, grey: bool = False, reader: str = "cv2.imread") -> None:
    """`_Unfit` unless `cv2.imread` gives each file what hpuload decodes (in BGR order, or
    RGB after `cv2.cvtColor(..., COLOR_BGR2RGB)`): an 8-bit JPEG or PNG in RGB or grey, that
    carries no EXIF orientation (OpenCV turns images by its own reading of it). `grey`: read
    grey (`cv2.IMREAD_GRAYSCALE`, or by torchvision's reader, `reader`, in `ImageReadMode.GRAY`,
    which turns no image unless told to), whose grey of a colour PNG libpng computes (hpuload
    takes a JPEG's luma and a grey PNG; a JPEG coded in RGB, CMYK or YCCK is named when read).
    Each file is read once."""
    D = FallbackReason.DATASET
    fresh = [p for p in dict.fromkeys(p for p, _ in samples) if p not in checked]
    for path in fresh:
        png = path.lower().endswith(".png")
        if not (png or path.lower().endswith(_JPEG_NAMES)):
            raise _Unfit(f"{path} is neither a JPEG nor a PNG file (hpuload runs {reader}'s reading of those)", D)
        try:
            with open(path, "rb") as f:
                head = f.read() if png else _jpeg_head(f)
        except OSError:
            continue  # the loader names a file it cannot read when it reads it
        mode = _probe.mode_of(data=head)
        if mode not in ("RGB", "L") and not (grey and png and mode == "RGBA"):
            raise _Unfit(f"{path} is in mode {mode}, which {reader} reads otherwise than hpuload decodes it", D)
        if grey and png and mode != "L":
            if _probe.png_grey_weights(_grey_reader(reader)) is None:
                raise _Unfit(
                    f"{path} is a colour PNG, whose grey {reader} makes with weights hpuload did not find in it "
                    "(hpuload reads JPEGs and grey PNGs grey)",
                    D,
                )
            refused = _probe.png_chunk_before_data(head, _probe.PNG_GREY_REFUSED)
            if refused is not None:
                raise _Unfit(
                    f"{path} is a colour PNG with a {refused.decode()} chunk, with which libpng makes the grey "
                    f"{reader} gives otherwise than hpuload",
                    D,
                )
        if _probe.sixteen_bit(head):
            raise _Unfit(f"{path} is a 16-bit PNG, which {reader} scales to 8 bits otherwise than hpuload", D)
        if reader == "cv2.imread" and any(_hpuload.exif_orientation(head, reader) != 1 for reader in ("pillow", "torchvision")):
            raise _Unfit(f"{path} carries an EXIF orientation, which cv2.imread turns the image by as OpenCV reads it", D)
    checked.update(fresh)


def _grey_reader(reader: str) -> str:
    """`_probe.png_grey_weights`'s name of the reader `_check_opencv_reads` names."""
    return "cv2" if reader == "cv2.imread" else "torchvision"


def _sized_translation(transform, common: dict, find_size=None, translate=None):
    """`translate_split(transform)` for images that may all have one size
    (`_arrays.one_size`): a transform that sets no output size runs after a centre crop to
    that size, one that resizes the shorter side alone to the size that gives. `common`
    carries what that needs: `"wanted"` (true while the transform needs the size), `"why"`
    (`one_size`'s), and `"size"` (`(height, width)`), which `_check_common_size` finds once
    the samples are listed (`find_size()` does it now where they are)."""
    from ._arrays import one_size

    translate = translate or translate_split
    translated, wanted, why = one_size(translate, transform, common.get("size"))
    common["wanted"], common["why"] = wanted is not None, why
    if wanted and common.get("size") is None and find_size is not None:
        find_size()
        if common.get("size") is not None:
            translated = one_size(translate, transform, common["size"])[0]
    return translated


def _padded(transform, common: dict, find_size):
    """An albumentations `Compose` whose first step is a lone `PadIfNeeded`
    (`_albumentations.lone_pad`) as `_albumentations.Padded` of the one size every image has
    (`_check_common_size`, once the samples are listed; torch's loader, named, over images of
    several sizes, to which the pad gives sizes of their own); any other transform as it is."""
    lone = _albumentations.lone_pad(transform)
    common["padded"] = lone is not None
    if lone is None:
        return transform
    common["wanted"], common["why"] = True, None
    if common.get("size") is None:
        find_size()
    return _albumentations.Padded(transform, common.get("size") or lone)


def _check_common_size(samples, common: dict, turned, sizes: dict) -> None:
    """Finds the one size every sample's image has (for a transform that sets none:
    `_sized_translation`), reading each file's headers once (`sizes`: path -> `(width,
    height)`), or hands the loader to torch's, which gives each image its own size. An
    image whose size cannot be read is a damaged one, which the loader names and replaces
    as it reads it: it has no say in the size."""
    D = FallbackReason.DATASET
    if turned:
        raise _Unfit("the images are turned by their EXIF orientation and the transform gives each its own size", D)
    want, first = common.get("size"), "the images before"
    for path, _ in samples:
        size = sizes.get(path)
        if size is None:
            size = _probe.size_of(path)
            if size is None:  # a damaged image: the loader names it and replaces its sample
                continue
            sizes[path] = size
        if want is None:
            want, first = (size[1], size[0]), path
        elif (size[1], size[0]) != want:
            if common.get("why") is not None:
                raise _Unfit(str(common["why"]), FallbackReason.TRANSFORM)
            raise _Unfit(
                f"the transform gives each image a size of its own (no crop, or a resize of the shorter side "
                f"alone) and the images differ in size ({path} is {size[0]}x{size[1]}, {first} "
                f"{want[1]}x{want[0]}): a different shape per image, as torch's loader gives them",
                FallbackReason.TRANSFORM,
            )
    if want is None and samples:
        raise _Unfit("no image's size can be read from its headers, and the transform gives each image its own", D)
    common["size"] = want


def _plain_image_folder(dataset) -> bool:
    """A torchvision ImageFolder whose samples are what it lists: its own `__getitem__`, the
    default loader, no target_transform."""
    from torchvision.datasets import DatasetFolder, ImageFolder
    from torchvision.datasets.folder import default_loader

    return (
        isinstance(dataset, ImageFolder)
        and type(dataset).__getitem__ is DatasetFolder.__getitem__
        and dataset.loader is default_loader
        and dataset.target_transform is None
    )


def _listed_source(dataset, pipeline):
    """A dataset of one image file and one integer label per index, as a `SamplesSource`: a
    torchvision ImageFolder (its `samples`), or any other map-style Dataset with a
    `transform` (a user's class, torchvision's datasets on VisionDataset, an ImageFolder with
    its own loader or `__getitem__`), learnt by running its `__getitem__` once per index with
    lazy image opening and a stand-in transform (`_probe.py`). Under `Subset`s (what
    `random_split` returns), the chosen indices of the dataset inside; under
    `ConcatDataset`s, the parts' samples in the concatenation's order, every part holding the
    same transform object (`_parts`)."""
    D = FallbackReason.DATASET
    bases, picks = _parts(dataset)
    plains = [_plain_image_folder(b) for b in bases]
    # Per part, the indices the samples use (None: all of them, in order).
    used: list[set[int] | None] = [None] * len(bases)
    if picks is not None:
        used = [set() for _ in bases]
        for k, j in picks:
            used[k].add(j)
    for base, plain in zip(bases, plains):
        if plain:
            continue
        name = type(base).__name__
        if not (hasattr(type(base), "__getitem__") and hasattr(type(base), "__len__")):
            raise _Unfit(f"dataset is a {name}, not a map-style Dataset (no __getitem__ and __len__)", D)
        if _probe.transform_attribute(base) is None:
            # No transform: probed as one whose transform is None (its code does the rest).
            wanted = used[bases.index(base)]
            video = _probe.video_reader_in(base, min(wanted) if wanted else 0) if len(base) else None
            if video is not None:
                raise _reads_video(video)
    # The attribute holding each part's transform: `transform`, or an albumentations
    # `Compose` under the name a Kaggle-style Dataset gives it (`transforms`, `aug`, ...).
    attributes = [None if plain else _probe.transform_attribute(b) for b, plain in zip(bases, plains)]
    attribute = next((a for a in attributes if a is not None), "transform")
    if any(a not in (None, attribute) for a in attributes) or (attribute != "transform" and any(plains)):
        raise _Unfit("the ConcatDataset's parts hold their transforms under different names", FallbackReason.TRANSFORM)

    def transform_of(b):
        return _probe.held_transform(b, attribute)

    if len({id(transform_of(b)) for b in bases}) > 1:
        raise _Unfit(
            "the ConcatDataset's parts hold different transform objects (hpuload runs one)", FallbackReason.TRANSFORM
        )

    # What the probes and the translation found, for later steps (the size every image has, a
    # Dataset's masks).
    common: dict = {}

    def probed(k: int, wanted):
        try:
            got = _probe.probe(bases[k], wanted)
            if got.mask is not None:
                common.setdefault("mask", got.mask)
            return got
        except _probe.ReadsVideo as e:
            raise _reads_video(e) from e
        except _probe.NeedsPixels as e:
            if transform_of(bases[k]) is None:
                # No transform stood in: the code's own path needed what hpuload does not follow.
                raise _Unfit(f"dataset is a {type(bases[k]).__name__} without a transform, and {e}", D) from e
            raise _Unfit(str(e), D) from e
        except AttributeError as e:
            raise _Unfit(f"{type(bases[k]).__name__}'s transform cannot be stood in for while probing ({e})", D) from e

    # How each part's code holds the image it gives the transform (`LazyImage.form`), from its
    # first index: an ImageFolder a PIL image in RGB; a class of the user's may read a uint8
    # tensor (torchvision's `read_image`), whose transform then runs as after `PILToTensor`.
    # With it, what the code hands out of an albumentations Compose without ToTensorV2
    # (`_probe.Output`: its array, as the code changes it; None: what the transform gives),
    # and what it does to the image before the transform (`LazyImage.before`: a resize to one
    # size, a conversion to grey).
    forms = {
        ((False, True, False), None, (), 1, None)
        if plain
        else _form_and_output(probed(k, [min(used[k]) if used[k] else 0]))
        for k, plain in enumerate(plains)
        if plain or used[k] is None or used[k]
    }
    if len(forms) > 1:
        raise _Unfit("the ConcatDataset's parts hold, resize or hand out their images in different forms", D)
    (tensor, rgb, turned), output, before, views, mask_look = (
        forms.pop() if forms else ((False, True, False), None, (), 1, None)
    )
    if mask_look is not None and len(bases) > 1:
        raise _Unfit("a Dataset that returns images and their masks, under a ConcatDataset", D)
    watch = None
    # A transform without a crop or resize (`ToTensor` alone over a folder of images made
    # one size) keeps each image's size: it runs after a centre crop to the size every image
    # has (the whole image), which `collect` finds from the files' headers.
    if pipeline is not None:
        pipe, dtype = _pipeline(pipeline), "f32"
    else:
        # Translated first: a transform hpuload cannot run falls back before any probing. One
        # it translates only in part runs its untranslated steps in Python (`_tail.py`).
        def translate_now():
            if any(plain and b.target_transform is not None for b, plain in zip(bases, plains)):
                raise Unsupported("the ImageFolder has a target_transform now")
            if any(transform_of(b) is not transform_of(bases[0]) for b in bases):
                raise Unsupported("the ConcatDataset's parts hold different transform objects now")
            transform = transform_of(bases[0])
            arrays = tensor == "cv2" or tensor == "array"

            def find_size():
                if "samples" in common:
                    _check_common_size(common["samples"], common, turned, folder_lists.setdefault("sizes", {}))

            applied = [step for step in before if isinstance(step, _probe.Applied)]
            if applied and (arrays or _albumentations.is_compose(transform)):
                raise Unsupported("torchvision transforms the Dataset's code applies itself, before an albumentations transform")
            if len(bases) > 1 and not all(step.fixed for step in applied):
                # Each part holds its own transforms, draws its own crops: one of them runs.
                raise Unsupported(
                    "torchvision transforms the Dataset's code applies itself under a ConcatDataset (hpuload follows "
                    "functional calls of given arguments there)"
                )
            composed = getattr(common.get("mask"), "composed", None) if mask_look is not None else None
            # Masks made beside the native images (a Python tail would not see them).
            beside = composed in ("v2", "functional")
            if composed == "functional":
                # An image and its mask moved by torchvision's functionals in the Dataset's own
                # code (the forum's joint transforms): the image translated as alone, below;
                # the masks moved by the same steps, flipped as each sample's code drew.
                if turned or (arrays and (transform is not None or any(isinstance(s, _probe.Applied) for s in before))):
                    # (An image's array with no transform, Pillow's resize of both first, is
                    # made as the arrays' path below makes it: milesial's U-Net.)
                    raise Unsupported(
                        "a mask moved by torchvision's functionals with an image read as an array or turned upright"
                    )
                mask_steps = _segmentation.functional_mask_steps(before, common["mask"], transform, bases[0])
                if mask_steps.crop is None and common.get("size") is not None:
                    # Moved by nothing: cut whole, at the one size the images have.
                    mask_steps = mask_steps._replace(crop=tuple(common["size"]))
                if "masks" in common and not _segmentation.same_mask_steps(mask_steps, common["masks"].steps):
                    raise Unsupported("the Dataset's code moves the masks otherwise than the loader set them up")
                common["mask steps"] = mask_steps
            elif composed == "v2":
                # Images and `tv_tensors.Mask`s given to a torchvision v2 transform: the image
                # translated as alone, below; the masks moved as v2 moves them.
                if arrays or _probe.beyond_tv_image(before) or turned or not _probe.is_torchvision_transform(transform):
                    raise Unsupported(
                        "a tv_tensors.Mask given with an image the Dataset's code changed or turned first, or to a "
                        "transform that is not torchvision's"
                    )
                mask_steps = _segmentation.v2_mask_steps(transform)
                if "masks" in common and not _segmentation.same_mask_steps(mask_steps, common["masks"].steps):
                    raise Unsupported("the new transform moves the masks otherwise than the loader set them up")
                common["mask steps"] = mask_steps
            elif mask_look is not None:
                # Images and their masks (`_probe.Segmented`): the Compose moves both.
                if not _albumentations.is_compose(transform) or not arrays or before or turned:
                    raise Unsupported(
                        "a mask given with an image that is not what cv2.imread read or the NumPy array of an opened "
                        "image, as stored, or to a transform that is no albumentations Compose"
                    )
                transform = _padded(transform, common, find_size)
                pipeline, dtype, mask_steps = _albumentations.translate_with_mask(transform, output)
                if tensor == "cv2" and not rgb:
                    pipeline = _albumentations.in_bgr(pipeline)  # BGR arrays computed on as they are
                if "masks" in common and not _segmentation.same_mask_steps(mask_steps, common["masks"].steps):
                    # A transform reassigned that moves the masks otherwise: torch's loader.
                    raise Unsupported("the new transform moves or maps the masks otherwise than the loader set them up")
                common["mask steps"] = mask_steps
                return pipeline, dtype, None
            if (arrays or _albumentations.is_compose(transform)) and _probe.CENTRE_SQUARE in before:
                raise Unsupported("a centre square cut of the image's array before an albumentations transform or none")
            if arrays or _albumentations.is_compose(transform):
                # An array with no transform: the Dataset's code alone makes what it returns.
                if not arrays or not (transform is None or _albumentations.is_compose(transform)):
                    raise Unsupported(
                        "an albumentations transform runs natively on what cv2.imread read or on the NumPy "
                        "array of an opened image"
                    )
                if transform is None and not _probe._resizes(before):
                    # The arrays of the images as read: every image one size (read from the
                    # files' headers once they are listed), each kept whole.
                    common["wanted"], common["why"] = True, None
                    if common.get("size") is None:
                        find_size()
                    transform = _albumentations.Whole(common.get("size") or (1, 1))
                transform = _padded(transform, common, find_size)
                translated = _albumentations.translate_split(transform, output, before)
                if beside and translated[2] is not None:
                    raise Unsupported(f"{translated[2].describe()}, with masks (hpuload moves them beside native steps)")
                if tensor == "cv2" and not rgb:
                    # BGR arrays given on as they are: the steps compute on them as they are.
                    translated = (_albumentations.in_bgr(translated[0]), *translated[1:])
                return translated
            grey = _probe.grey_read(before)
            pre = before
            if tensor:
                from torchvision import transforms as tv_transforms

                # Read grey (`ImageReadMode.GRAY`): one channel from the start, as after
                # Pillow's grey, which stands for the read in the translation (`_read_grey`).
                # The transforms its code applies itself (`_probe.Applied`) run on the tensor.
                # Those given what the transform gave (`after`) run after it.
                first = [tv_transforms.Grayscale(num_output_channels=1)] if grey else []
                applied = [s.step(bases[0]) for s in before if isinstance(s, _probe.Applied) and not s.after]
                last = [s.step(bases[0]) for s in before if isinstance(s, _probe.Applied) and s.after]
                transform = tv_transforms.Compose(
                    [*first, tv_transforms.PILToTensor(), *applied, *steps(transform), *last]
                )
                pre = tuple(s for s in before if not isinstance(s, _probe.Applied))
            if pre and not grey:
                transform = _before_first(pre, transform, bases[0])
            if views > 1:
                # The code gives its transform the image several times and returns each output.
                if output is not None:
                    raise Unsupported("views of the image handed out as arrays")
                transform = Repeated(transform, views)

            if output is not None:
                # The code makes a NumPy array of the PIL image the transform gives, then
                # perhaps floats of it (`Output.of_pil`: diffusers' textual inversion).
                if not output.of_pil:
                    raise Unsupported("a torchvision transform's output handed out as an array not made of its PIL image")
                translated = _sized_translation(transform, common, find_size, translate_to_pil)
                return _albumentations.handed_out(translated, output)
            translated = _sized_translation(transform, common, find_size)
            if beside and translated[2] is not None:
                # The masks are made beside the native images; a Python tail would not see them.
                raise Unsupported(f"{translated[2].describe()}, with masks (hpuload moves them beside native steps)")
            return (_read_grey(translated[0]), *translated[1:]) if grey else translated

        def watched():
            """The transform the loader runs, as the dataset holds it now: with those its code
            applies itself (`_probe.Applied`), each attribute's object."""
            own = tuple(getattr(bases[0], s.attribute, None) for s in before if isinstance(s, _probe.Applied) and s.attribute)
            return (transform_of(bases[0]), *own) if own else transform_of(bases[0])

        watch = _TransformWatch(watched, translate_now)
        pipe, dtype, _ = watch.translated
    # Part -> (its list as read, as samples); "checked" -> samples; "rgb files" -> paths.
    folder_lists: dict = {}

    def collect():
        """`(samples, keys, label type, extras)` of the dataset as it is now: its parts'
        samples, read again (an ImageFolder's list, a class's `__getitem__` probed), under its
        Subsets' indices now, and the plain values after each label (None: pairs). At the
        build, and at each epoch's start (`_SamplesWatch`)."""
        now_bases, now_picks = _parts(dataset)
        if len(now_bases) != len(bases) or any(a is not b for a, b in zip(now_bases, bases)):
            raise _Unfit("the datasets the loader reads from were replaced inside its Subsets or ConcatDataset", D)
        now_used: list[set[int] | None] = [None] * len(bases)
        if now_picks is not None:
            now_used = [set() for _ in bases]
            for k, j in now_picks:
                now_used[k].add(j)
        each, keys, label_types = [], None, set()
        afters: list = []  # per part, its extras (as `each`); None where it returns pairs
        drawn = None  # `(DrawnExtras, the indices probed)` of a part that draws them per call
        more_each: list = []  # per part, the files of each index's other images (as `each`)
        masks_each: list = []  # per part, each index's mask's file (as `each`)
        for k, (base, plain) in enumerate(zip(bases, plains)):
            if plain:
                # An ImageFolder's list as it was last time (a shallow copy: its tuples
                # compare by identity first) keeps its samples' list, and the comparison of
                # the whole with the last one is one of the same objects.
                raw, listed = folder_lists.get(k, (None, None))
                if raw is None or base.samples != raw:
                    raw, listed = list(base.samples), [(p, int(t)) for p, t in base.samples]
                    folder_lists[k] = (raw, listed)
                each.append(listed)
                afters.append(None)
                more_each.append(None)
                label_types.add(None)
                continue
            wanted = None if now_used[k] is None else sorted(now_used[k])
            got = probed(k, wanted)
            samples, base_keys, form, label_type, extras, handed, now_before, more = got[:8]
            if _mask_look(got.mask) != mask_look:
                raise _Unfit(f"{type(base).__name__}.__getitem__ hands out its masks otherwise than when the loader was built", D)
            if got.masks is not None:
                masks_each.append(got.masks if wanted is None else dict(zip(wanted, got.masks)))
            if isinstance(extras, _probe.DrawnExtras):
                if len(bases) > 1:
                    raise _Unfit(
                        f"{type(base).__name__}.__getitem__ draws the values beside its image anew on each call, "
                        "under a ConcatDataset (hpuload runs it again for each sample of one dataset)",
                        D,
                    )
                # Under a Subset's indices: drawn for each of the loader's samples, by position.
                drawn = (extras, wanted)
            more_each.append(more if wanted is None or more is None else dict(zip(wanted, more)))
            label_types.add(label_type)
            afters.append(extras if wanted is None or extras is None else dict(zip(wanted, extras)))
            if form != (tensor, rgb, turned):
                raise _Unfit(f"{type(base).__name__}.__getitem__ holds its images in different forms for different indices", D)
            if handed != output or now_before != before:
                raise _Unfit(
                    f"{type(base).__name__}.__getitem__ resizes or hands out its images otherwise than when the loader was built",
                    D,
                )
            if k and base_keys != keys:
                raise _Unfit(f"the ConcatDataset's parts return samples of other shapes ({keys} and {base_keys})", D)
            keys = base_keys
            each.append(samples if wanted is None else dict(zip(wanted, samples)))
        samples = each[0] if now_picks is None else [each[k][j] for k, j in now_picks]
        widths = {None if a is None else len(next(iter(a.values() if isinstance(a, dict) else a), ())) for a in afters}
        if len(widths) > 1:
            raise _Unfit("the ConcatDataset's parts return other numbers of values after the label", D)
        extras = None
        if afters[0] is not None:
            extras = afters[0] if now_picks is None else [afters[k][j] for k, j in now_picks]
            if drawn is not None and now_picks is not None:
                extras = drawn[0].over(drawn[1], [j for _, j in now_picks])
        more_files = None  # per other image of a sample (`DictSample.more`), its files
        if any(m is not None for m in more_each):
            # Several images a sample (DreamBooth's instance and class images): one loader per
            # image, each over its files in the dataset's order.
            if any(m is None for m in more_each):
                raise _Unfit("the ConcatDataset's parts hold one image a sample and several", D)
            rows = more_each[0] if now_picks is None else [more_each[k][j] for k, j in now_picks]
            more_files = [[(path, 0) for path in files] for files in zip(*rows)]
        if masks_each:
            # Images and their masks (one part): each sample's mask file, read as each batch
            # needs it (`FileMasks.read`).
            files = masks_each[0] if now_picks is None else [masks_each[0][j] for _, j in now_picks]
            common["mask files"] = files
            if "masks" in common:
                # Read again at an epoch's start: the loader's masks follow the files now.
                common["masks"].files, common["masks"].images = files, [p for p, _ in samples]
        if len(bases) == 1 and plains[0] and samples is folder_lists.get("checked"):
            # The same ImageFolder list as checked last time: nothing to check again.
            return samples, keys, label_types.pop(), None, None
        # Every file the loaders read, checked alike: the samples' and their other images'.
        listed = samples + [f for files in more_files or () for f in files]
        _check_decodable(listed)
        if tensor == "cv2":
            grey = _probe.grey_read(before) is not None
            _check_opencv_reads(listed, folder_lists.setdefault("opencv checked" + " grey" * grey, set()), grey)
        elif tensor is True and _probe.grey_read(before):
            reader = "torchvision's reader in ImageReadMode.GRAY"
            _check_opencv_reads(listed, folder_lists.setdefault("grey checked", set()), True, reader)
        if tensor is True:
            # torchvision's readers decode JPEG, PNG, GIF and WebP only: torch's loader stops
            # at a BMP or PGM file, which hpuload would decode.
            odd = next((p for p, _ in listed if not p.lower().endswith(_TORCHVISION_READS)), None)
            if odd is not None:
                raise _Unfit(f"{odd} is not a JPEG, PNG or WebP file, which torchvision's reader would refuse", D)
        if plains == [True]:
            folder_lists["checked"] = samples
        common["samples"] = listed
        if common.get("wanted"):
            _check_common_size(listed, common, turned, folder_lists.setdefault("sizes", {}))
        if tensor is True:
            # torchvision's readers give a 16-bit PNG's samples whole, as uint16, in either
            # mode; hpuload decodes 8-bit pixels. Each file's first bytes are read once: in
            # UNCHANGED mode every file's (its header is read for its mode below anyway), in
            # RGB mode those not named as JPEGs (a first read of a whole folder's files from
            # disk costs about 0.2 ms each).
            depth_checked = folder_lists.setdefault("depth checked", set())
            fresh = list(
                dict.fromkeys(
                    p for p, _ in listed if p not in depth_checked and not (rgb and p.lower().endswith(_JPEG_NAMES))
                )
            )
            deep = _probe.sixteen_bit_png(fresh)
            if deep is not None:
                raise _Unfit(
                    f"{deep} is a 16-bit PNG, which torchvision's reader gives as a uint16 tensor of [0, 65535], "
                    "while hpuload decodes 8-bit images",
                    D,
                )
            depth_checked.update(fresh)
        if not rgb and tensor != "cv2":
            # Opened without `.convert("RGB")` (or read in UNCHANGED mode): torch's loader gives
            # each image in its file's own mode, which hpuload's RGB decode equals only for RGB
            # files.
            # (Each file's header is read once: the files found RGB are not read again.)
            # Made grey from the file's own mode (`convert("L")`): Pillow's grey of an RGB or
            # grey file is hpuload's of the decoded RGB.
            grey = any(step in (_probe.GREY, _probe.GREY_RGB) for step in before)
            rgb_files = folder_lists.setdefault("rgb files", set())
            fresh = list(dict.fromkeys(p for p, _ in listed if p not in rgb_files))
            odd = _probe.not_rgb(fresh, also=("L",) if grey else ())
            if odd is None:
                rgb_files.update(fresh)
            if grey and odd is not None:
                raise _Unfit(
                    f"{odd[0]} is in mode {odd[1]}, which your code makes grey from its own mode, while hpuload "
                    'makes grey of RGB and grey images (add .convert("RGB") before .convert("L") to run natively)',
                    D,
                )
            if odd is not None:
                how = "torchvision's reader in its UNCHANGED mode" if tensor is True else 'Image.open without .convert("RGB")'
                fix = "read it in ImageReadMode.RGB" if tensor is True else 'add .convert("RGB")'
                raise _Unfit(
                    f"{odd[0]} is in mode {odd[1]}, which {how} keeps, while hpuload decodes every image to RGB "
                    f"({fix} in __getitem__ to run natively)",
                    D,
                )
        if len(label_types) > 1:
            raise _Unfit("the ConcatDataset's parts give labels of different types", D)
        return samples, keys, label_types.pop(), extras, more_files

    samples, keys, label_type, extras, more_files = collect()
    if watch is not None and common.get("wanted"):
        # The size found: the transform translated again, after a centre crop to it.
        watch.translated = watch.translate()
        pipe, dtype, _ = watch.translated
    named = [getattr(b, "classes", None) for b in bases]
    classes = named[0] if all(c == named[0] for c in named) else None
    classes = list(classes) if isinstance(classes, (list, tuple)) and all(isinstance(c, str) for c in classes) else []
    source = {"source": _options.SamplesSource(samples, classes), "sample_keys": keys, "watch": watch}
    # A class that turns its images upright by their EXIF orientation (Pillow's
    # `exif_transpose`, or torchvision's reader told to): so does the loader, reading it as
    # that code does.
    source["exif_orientation"] = bool(turned)
    source["exif_reader"] = "torchvision" if turned == "torchvision" else "pillow"
    source["labels_as"] = _LabelsAs.of(label_type)
    source["sample_extras"] = extras
    source["samples_watch"] = _SamplesWatch(
        collect, samples, keys, label_type, classes, extras, more_files, lambda: (len(dataset), _parts(dataset)[1])
    )
    if more_files:
        if output is not None:
            raise _Unfit("the Dataset's samples hold several images, handed out as arrays", D)
        source["more"] = tuple(
            _options.MoreImages(None, pipe, dtype, source=_options.SamplesSource(files, classes)) for files in more_files
        )
    if mask_look is not None:
        # Each image's mask, moved with it (`_segmentation.FileMasks`); the files as collected
        # at each epoch's start.
        moves, size = common["mask steps"], common.get("size")
        if moves.crop is None and size is not None:
            moves = moves._replace(crop=tuple(size))
        # Images and masks as read (`functional_mask_steps` moved by nothing): each image kept
        # whole at the one size every image has, as its mask.
        whole = moves.cropped and common.get("wanted") and size is not None and moves.crop == tuple(size)
        # A lone `PadIfNeeded` (`_padded`): padded to one size from the one the images have.
        whole = whole or (common.get("padded") and size is not None)
        if (common.get("wanted") and not whole) or watch is None or moves.crop is None:
            raise _Unfit("masks given with a transform that keeps each image's size", D)
        try:
            masks = _segmentation.FileMasks(
                dataset, [p for p, _ in samples], common["mask files"], moves, common["mask"], keys
            )
        except Unsupported as e:
            raise _Unfit(str(e), FallbackReason.TRANSFORM) from e
        # Arrays handed out as the class's code changed them: each sample's image an array
        # for a collate_fn, as its mask may be.
        masks.numpy_images = output is not None and output.kind == "numpy"
        _check_masks_handed_out(bases[0], masks)
        common["masks"] = source["targets"] = masks
    if output is not None:
        # The Compose's arrays as the Dataset's code hands them out: `[H, W, C]` unless it
        # transposed them; NumPy arrays (for a collate_fn) unless it made tensors of them.
        source["native_layout"] = "nhwc" if output.layout == "hwc" else "nchw"
        source["numpy_images"] = output.kind == "numpy"
        if output.guard is not None:
            if mask_look is None:
                raise _Unfit("a test of the image's pixels the code branches on, with no mask beside the image", D)
            source["pixel_guard"] = _pixel_guard(output)
    return source, pipe, dtype, classes or None


def _pixel_guard(output: "_probe.Output") -> float:
    """The largest value an image the loader makes may hold throughout and still fail the
    test of its pixels the Dataset's code branched on (`_probe.Output.guard`: `if (img >
    1).any():`, answered True while probing), the pixels being the byte values the code's
    steps map each byte to (`_probe.byte_values`): an image whose values all lie at or below
    it took the other branch, and is made by the Dataset's own code. `_Unfit` where the bytes
    that pass are not those above some value (a test of which no largest value tells)."""
    D = FallbackReason.DATASET
    passing = _probe.guarded_bytes(output)
    values = _probe.byte_values(output) if output.history else [float(b) for b in range(256)]
    failing = [values[b] for b in range(256) if not passing[b]]
    if not failing or not any(passing):
        raise _Unfit("a test of the image's pixels that every image passes, or none (the code branches on it)", D)
    threshold = max(failing)
    if any(values[b] <= threshold for b in range(256) if passing[b]):
        raise _Unfit("a test of the image's pixels that its largest value does not decide (the code branches on it)", D)
    return threshold


def _check_masks_handed_out(dataset, masks: "_segmentation.FileMasks") -> None:
    """Runs the Dataset's `__getitem__` for real for the first of its first four indices that
    gives a sample (its generators seeded, then put back) and checks that the mask it hands
    out is a tensor of the dtype and shape hpuload's are (albumentations casts some dtypes
    of a mask itself, int64 to int32: such a mask falls back)."""
    from ._reference_steps import _under_seed

    want = (1, *masks.crop) if masks.channel else tuple(masks.crop)
    raised = []
    for i in range(min(4, len(dataset))):
        got = _under_seed(dataset.__getitem__, (i,), i)
        if isinstance(got, tuple) and got and isinstance(got[0], str) and got[0] == "raised":
            raised.append(got[1])  # a damaged file: the loader names it and replaces its sample
            continue
        mask = masks.shape.mask_of(got)
        kind = "a tensor" if isinstance(mask, torch.Tensor) else type(mask).__name__
        if masks.numpy:
            import numpy as np

            fits = isinstance(mask, np.ndarray) and torch.from_numpy(np.zeros(0, mask.dtype)).dtype == masks.values.dtype
        else:
            fits = isinstance(mask, torch.Tensor) and mask.dtype == masks.values.dtype
        if not fits or tuple(mask.shape) != want:
            raise _Unfit(
                f"{type(dataset).__name__}.__getitem__({i}) hands out its mask as {kind} of "
                f"{getattr(mask, 'dtype', '?')} and shape {tuple(getattr(mask, 'shape', ()))}, where hpuload's is "
                f"{masks.values.dtype} of {want} (its transform casts or shapes the mask otherwise)",
                FallbackReason.DATASET,
            )
        return
    if raised:
        # No sample at all: the class's code refuses what it was given (a mask dtype its
        # transform does not take), and torch's loader raises its error.
        raise _Unfit(
            f"{type(dataset).__name__}.__getitem__ raises {raised[0]} for each of its first {len(raised)} indices",
            FallbackReason.DATASET,
        )


def _form_and_output(probed: "_probe.Probed") -> tuple:
    """`(form, output, before, views, mask)` of a probed Dataset: how its code holds the image
    it gives the transform, what it hands out of an albumentations Compose without
    `ToTensorV2`, what it does to the image before the transform, how many views of the image
    its transform makes (`_probe.Views`; 1: it gives the transform the image once), and how
    it hands out the mask it gives the transform with the image (`_mask_look`; None: none)."""
    views = probed.keys.count if isinstance(probed.keys, _probe.Views) else 1
    return probed.form, probed.output, probed.before, views, _mask_look(probed.mask)


def _mask_look(mask) -> tuple | None:
    """How a Dataset hands out its masks (`_probe.MaskArray`), comparably: read by Pillow or
    OpenCV, made grey or not, kind, channel, dtype and values; None: no masks."""
    if mask is None:
        return None
    values = mask.values.numpy() if mask.kind == "tensor" else mask.values
    steps = _probe._unflipped(mask)  # the flips a Dataset's code draws for it apart
    return mask.image.tensor, steps, mask.kind, mask.channel, str(mask.dtype), values.tobytes()


def _read_grey(pipeline: str) -> str:
    """The pipeline of torchvision's transform of images read grey (`ImageReadMode.GRAY`),
    translated after a `Grayscale()` standing for the read: that step's op, first, replaced
    by the pipeline's own grey read (a JPEG's luma, as torchvision's reader gives it)."""
    spec = json.loads(pipeline)
    if "ops" not in spec:
        raise Unsupported("a multi-crop transform of images read in ImageReadMode.GRAY")
    first = spec["ops"][0] if spec["ops"] else {}
    if first.get("op") != "pil_grayscale" or first.get("p") != 1.0 or not spec.get("single_channel"):
        raise Unsupported("a transform of images read in ImageReadMode.GRAY that hpuload does not run on one channel")
    spec["ops"], spec["grey_read"] = spec["ops"][1:], True
    weights = _probe.png_grey_weights("torchvision")
    if weights is not None:
        spec["grey_png_weights"] = list(weights)
    return json.dumps(spec)


def _before_first(before: tuple, transform, dataset=None):
    """The Dataset's transform after what its code does to the PIL image first, each as the
    torchvision step that is that call on a PIL image: a Pillow resize to one size as
    `Resize((height, width))` with that filter, `convert("L")` as `Grayscale()`, and that
    made RGB again as `Grayscale(num_output_channels=3)`; the centre square its code cuts of
    the image's array as `_transforms.CenterSquare`; a transform of `dataset`'s own that its
    code applies itself (`_probe.Applied`) as the transform it holds now, or as the transform
    that is its call of torchvision's functional API (after the transform where it was given
    what the transform gave)."""
    from torchvision import transforms as tv_transforms

    first, last = [], []
    for step in before:
        if isinstance(step, _probe.Applied):
            (last if step.after else first).append(step.step(dataset))
            continue
        if step == _probe.CENTRE_SQUARE:
            first.append(CenterSquare())
            continue
        if step == _probe.GREY or step == _probe.GREY_RGB:
            first.append(tv_transforms.Grayscale(num_output_channels=1 if step == _probe.GREY else 3))
            continue
        if step.by != "pil":
            raise Unsupported(f"a resize by {step.by} before a torchvision transform")
        first.append(pillow_resize(step.height, step.width, step.filter))
    return tv_transforms.Compose([*first, *steps(transform), *last])


class _SamplesWatch:
    """A Dataset's files and labels, read again at each epoch's start: torch's loader starts
    its worker processes anew each epoch (unless `persistent_workers`), so a script that
    relabels its samples (pseudo-labels, a cleaned label list), swaps their files or changes a
    Subset's indices between epochs gets the new ones from the next epoch; with hpuload too.
    `changed()` gives the new `SamplesSource` when they differ, None when not; `_Unfit`
    where the dataset can no longer run natively."""

    def __init__(self, collect, samples, keys, label_type, classes, extras, more=None, layout=None):
        self.collect, self.samples, self.shape, self.classes = collect, samples, (keys, label_type), classes
        #: The files of each sample's other images (`DictSample.more`), which must not change.
        self.more = more
        #: The plain values after each sample's label (None: pairs), read again with them;
        #: the loader hands out the list this holds (`_Loader._extras`).
        self.extras = extras
        #: `layout()`: the dataset's length and its Subsets' indices now, and as last read.
        self.layout = layout
        self.laid_out = layout() if layout is not None else None

    def changed(self):
        if isinstance(self.extras, _probe.DrawnExtras) and self.layout is not None:
            # A Dataset whose code runs again for each sample it hands out: each run checks
            # its file, label and steps against the probe's (a stray is made by the class's own
            # code), so with the indices as they were and no stray last epoch, nothing changed
            # that the probe of every index would find.
            now = self.layout()
            strays = self.extras.take_strays()
            if now == self.laid_out and not strays:
                return None
            self.laid_out = now
        samples, keys, label_type, extras, more = self.collect()
        if (keys, label_type) != self.shape or (extras is None) != (self.extras is None):
            raise _Unfit("the dataset's samples now have another shape or label type", FallbackReason.DATASET)
        if more != self.more:
            raise _Unfit("the files of the dataset's samples' other images changed", FallbackReason.DATASET)
        if isinstance(extras, _probe.DrawnExtras) != isinstance(self.extras, _probe.DrawnExtras):
            raise _Unfit(
                "the dataset's code now draws the values beside its images on each call, or no longer does",
                FallbackReason.DATASET,
            )
        if extras is not None and (
            len(extras) != len(self.extras) or not all(map(_probe._same_values, extras, self.extras))
        ):
            if len(extras) == len(self.extras):
                self.extras[:] = extras  # in place: the loader holds this list
        if isinstance(extras, _probe.DrawnExtras):
            # What the draws are checked against (`DrawnExtras.strays`): as probed now.
            self.extras.samples, self.extras.looks, self.extras.more = extras.samples, extras.looks, extras.more
            self.extras.picks, self.extras.masks, self.extras.mask = extras.picks, extras.masks, extras.mask
        if samples == self.samples:
            return None
        if len(samples) != len(self.samples):
            raise _Unfit(
                f"the dataset now holds {len(samples)} samples, not {len(self.samples)}", FallbackReason.DATASET
            )
        self.samples = samples
        return _options.SamplesSource(samples, self.classes)


class _LabelsAs:
    """Labels as a Dataset gives them, where not as Python ints: `batch` is the labels'
    tensor in the dtype torch's `default_collate` gives them (int32 for `np.int32` labels,
    the tensors' own dtype for 0-d tensors), `items` each label as the Dataset's own type for
    a `collate_fn`. Labels that are no integers (`objects`: a multi-hot vector, a float
    target, a string) are the first of each sample's extras, handed out as the Dataset gave
    them (`default_collate` of them for a batch)."""

    def __init__(self, make, dtype: torch.dtype | None, objects: bool = False):
        self.make, self.dtype, self.objects = make, dtype, objects

    @classmethod
    def of(cls, kind) -> "_LabelsAs | None":
        if kind is None:
            return None
        if kind == _probe.OBJECT:
            return cls(None, None, objects=True)
        if isinstance(kind, torch.dtype):
            return cls(lambda v: torch.tensor(v, dtype=kind), kind)
        import numpy as np

        return cls(kind, torch.from_numpy(np.zeros(0, dtype=kind)).dtype)

    def batch(self, labels: torch.Tensor, extras: list | None, indices: list):
        if self.objects:
            # A column of default_collate's transposition: a tuple (kept as such for strings).
            return tud.default_collate(tuple(extras[i][0] for i in indices))
        return labels if labels.dtype == self.dtype else labels.to(self.dtype)

    def items(self, values: list, extras: list | None, indices: list) -> list:
        if self.objects:
            return [extras[i][0] for i in indices]
        return [self.make(v) for v in values]


def _parts(dataset) -> tuple[list, list[tuple[int, int]] | None]:
    """The datasets holding `dataset`'s samples under `Subset`s and `ConcatDataset`s (each
    once, however often it appears), and for each index of `dataset`, in order, `(part, index
    in it)`; None for the second where `dataset` is the one part itself, whole."""
    import torch.utils.data as tud

    bases: list = []

    def number(ds) -> int:
        for k, b in enumerate(bases):
            if b is ds:
                return k
        bases.append(ds)
        return len(bases) - 1

    def walk(ds) -> list[tuple[int, int]] | None:
        if type(ds) is tud.Subset:
            inner = walk(ds.dataset)
            picked = [int(i) for i in ds.indices]
            if inner is None:  # a part itself
                k = number(ds.dataset)
                return [(k, i) for i in picked]
            return [inner[i] for i in picked]
        if type(ds) is tud.ConcatDataset:
            out: list[tuple[int, int]] = []
            for part in ds.datasets:
                inner = walk(part)
                if inner is None:
                    k = number(part)
                    inner = [(k, j) for j in range(len(part))]
                out.extend(inner)
            return out
        number(ds)
        return None

    picks = walk(dataset)
    return bases, picks


def _array_source(dataset, pipeline):
    """torchvision's datasets held in memory as one uint8 array of same-size images
    (`CIFAR10`, `CIFAR100`, `SVHN`, and the grey `MNIST` family), their own `__getitem__`
    (`Image.fromarray` of the row, then the transform), in Subsets or not: an `ArraySource`
    of the array's bytes, copied once. The labels are the dataset's, through its
    `target_transform` now. A transform without a crop or resize keeps the images' size
    (`_arrays.translate`). Grey images are made as RGB with three equal
    channels (every op hpuload runs treats the channels alike, as Pillow's on an "L" image)
    and handed out as their first. `None` for any other dataset."""
    base, indices = _detection._unwrap_subsets(dataset)
    if _arrays.images_of(base) is None:
        return None
    D = FallbackReason.DATASET
    name = type(base).__name__

    def collect():
        """The images and labels the dataset holds now, under its Subsets' indices now."""
        now_base, indices = _detection._unwrap_subsets(dataset)
        found = _arrays.images_of(now_base) if now_base is base else None
        if found is None:
            raise _Unfit(f"the {name} the loader reads from was replaced, or no longer holds its images", D)
        data, labels = found
        if indices is not None:
            data, labels = data[indices], [labels[i] for i in indices]
        if len(labels) == 0:
            raise _Unfit(f"the {name} has no images", D)
        if base.target_transform is not None:
            labels = [base.target_transform(y) for y in labels]
        if not set(map(type, labels)) <= {int}:
            raise _Unfit(f"the {name}'s labels are not integers (its target_transform)", D)
        return data, labels

    data, labels = collect()
    height, width, channels = (int(v) for v in data.shape[1:])
    grey = channels == 1
    watch = None
    if pipeline is not None:
        pipe, dtype = _pipeline(pipeline), "f32"
    else:

        def translate_now():
            pipe, dtype, tail = _arrays.translate(base.transform, height, width, grey)
            if grey:
                _arrays.check_grey(pipe, tail, name)
                # Written as one channel, as the images are.
                pipe = json.dumps({**json.loads(pipe), "single_channel": True})
            return pipe, dtype, tail

        watch = _TransformWatch(lambda: base.transform, translate_now)
        pipe, dtype, _ = watch.translated
    classes = getattr(base, "classes", None)
    classes = list(classes) if isinstance(classes, (list, tuple)) and all(isinstance(c, str) for c in classes) else []
    source = _options.ArraySource(name, data.tobytes(), (height, width, channels), labels, classes)
    found = {"source": source, "sample_keys": None, "watch": watch, "grey": grey}
    found["samples_watch"] = _ArraysWatch(collect, source, data)
    return found, pipe, dtype, classes or None


class _ArraysWatch:
    """An in-memory dataset's images and labels, read again at each epoch's start, as
    `_SamplesWatch` reads a listed one's: the labels compared whole at once (`changed`),
    the images by a CRC-32 of the array (about 55 ms for CIFAR's 150 MB) in a thread while
    the epoch's first batches are made, settled before the first is handed out (`settle`)."""

    def __init__(self, collect, source, data):
        self.collect, self.source, self.crc = collect, source, self._crc(data)
        self.pending: tuple | None = None

    @staticmethod
    def _crc(data) -> int:
        import zlib

        import numpy as np

        return zlib.crc32(memoryview(np.ascontiguousarray(data)).cast("B"))

    def changed(self):
        data, labels = self.collect()
        old = self.source
        if len(labels) != len(old.labels) or tuple(int(v) for v in data.shape[1:]) != old.shape:
            raise _Unfit(
                f"the {old.name} now holds {len(labels)} images of {tuple(data.shape[1:])}, not {len(old.labels)} "
                f"of {old.shape}",
                FallbackReason.DATASET,
            )
        if labels != old.labels:
            return self._new(data, labels, self._crc(data))
        import threading

        result: list = []
        thread = threading.Thread(target=lambda: result.append(self._crc(data)), daemon=True)
        thread.start()  # zlib computes without the GIL
        self.pending = (thread, result, data)
        return None

    def settle(self):
        """The new source when the images changed (the CRC `changed` started says), else None."""
        if self.pending is None:
            return None
        (thread, result, data), self.pending = self.pending, None
        thread.join()
        if result[0] == self.crc:
            return None
        return self._new(data, self.source.labels, result[0])

    def _new(self, data, labels, crc):
        self.crc = crc
        self.source = dataclasses.replace(self.source, pixels=data.tobytes(), labels=labels)
        return self.source



def _segmentation_source(dataset, pipeline):
    """A torchvision VOCSegmentation, or the segmentation reference's COCO set (Subsets of a
    CocoDetection), with the segmentation reference's training or evaluation transforms (a
    switch between the two, which changes the source, or a change of the COCO set's
    categories falls back)."""
    if pipeline is not None:
        raise _Unfit("pipeline= for a segmentation dataset (hpuload runs its own transforms)", FallbackReason.ARGUMENT)
    coco = _segmentation.is_coco_segmentation(dataset)
    try:
        source, pipe, dtype, masks = (_segmentation.coco_source if coco else _segmentation.source)(dataset)
    except _segmentation.Unfit as e:
        raise _Unfit(str(e), FallbackReason.DATASET) from e
    except Unsupported as e:
        raise _Unfit(str(e), FallbackReason.TRANSFORM) from e

    def translate_now():
        if coco:
            return _segmentation.retranslate_coco(dataset, masks)
        pipe_now, dtype_now, crop = _segmentation.translate(dataset.transforms)
        if crop != masks.crop:
            raise Unsupported(f"the new transforms crop {crop}, the masks were set up for {masks.crop}")
        return pipe_now, dtype_now

    source["watch"] = _TransformWatch(lambda: _segmentation.current_transforms(dataset), translate_now)
    source["targets"] = masks
    return source, pipe, dtype, None


def _coco_source(dataset, pipeline, max_boxes):
    """A torchvision CocoDetection (raw or wrapped for transforms v2, possibly in Subsets)."""
    if not isinstance(max_boxes, int) or max_boxes < 1:
        raise ValueError(f"max_boxes={max_boxes!r}: give a positive number of boxes per image")
    try:
        source, pipe, dtype, targets = _detection.coco_source(dataset, max_boxes, translate=pipeline is None)
    except _detection.Unfit as e:
        raise _Unfit(str(e), FallbackReason.DATASET) from e
    except Unsupported as e:
        raise _Unfit(str(e), FallbackReason.TRANSFORM) from e
    if pipeline is not None:
        pipe, dtype = _pipeline(pipeline), "f32"
    else:
        # The targets are built for the transforms translated now: a change that keeps the
        # pipeline's kind of output (tv_tensors or plain, the target transform) is followed,
        # any other goes to torch.
        first = _detection.translate_transforms(dataset)

        def translate_now():
            pipe_now, dtype_now, *form = _detection.translate_transforms(dataset)
            if tuple(form) != first[2:]:
                raise Unsupported(
                    "the new transforms change the targets' form, target transform or how the masks move"
                )
            return pipe_now, dtype_now

        source["watch"] = _TransformWatch(lambda: _detection.current_transforms(dataset), translate_now)
    source["targets"] = targets
    return source, pipe, dtype, None


def _dist_rank_world():
    """(rank, world) from torch.distributed when initialized, else the launcher's env vars."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return 0, 1


def _seed_from(generator) -> int:
    """A seed like torch's loader draws one: from `generator`, else torch's global RNG (so
    `torch.manual_seed` makes runs repeatable)."""
    if generator is not None:
        return int(generator.initial_seed()) & (2**63 - 1)
    return int(torch.empty((), dtype=torch.int64).random_().item()) & (2**63 - 1)


class _Loader:
    """What both drop-ins share once the arguments are on the fast path."""

    def _setup(
        self,
        *,
        dataset,
        source: dict,
        pipeline: str,
        dtype: str,
        batch_size: int,
        shuffle: bool,
        seed: int,
        sampler,
        rank: int,
        world: int,
        last_batch: str,
        workers: int,
        prefetch: int,
        timeout: float,
        backend: str,
        on_error: str,
        error_budget: float,
        layout: str,
        collate_fn=None,
        order=None,
        batch_sampler=None,
        sample_keys=None,
        targets=None,
        watch=None,
        clip_samples=None,
        clips_expected=None,
        tail=None,
        tail_workers=0,
        fallback_args=((), {}),
        grey=False,
        numpy_images=False,
        labels_as=None,
        samples_watch=None,
        sample_extras=None,
        row_function=None,
        pixel_guard=None,
    ):
        self.dataset = dataset
        #: The value an image's pixels must pass somewhere for the branch its Dataset's code
        #: was probed on (`_pixel_guard`); an image that does not is made by that code. None:
        #: the code tests no pixels.
        self._pixel_guard = pixel_guard
        #: A table of images and captions: the dataset's function, run on each batch's other
        #: columns with the native images (`_hf.Rows`, its `function` that of the last
        #: translation); None: the samples are (image, label).
        self._rows = row_function
        #: Per dataset index, the plain values its `__getitem__` returns after the label
        #: (`(image, label, index)`); None: it returns pairs.
        self._extras = sample_extras
        if isinstance(sample_extras, _probe.DrawnExtras):
            # Drawn anew for each sample handed out, from (seed, epoch, index).
            sample_extras.arm(lambda: self._options.seed, self._current_epoch, self._sample_plan)
        #: The dataset's files and labels, read again at each epoch's start (`_SamplesWatch`);
        #: None: nothing to read again (hpuload's own sources, or torch's worker processes
        #: kept, which see the dataset as it was).
        self._samples_watch = samples_watch
        #: The Dataset's labels are not Python ints (`_LabelsAs`); None: they are.
        self._labels_as = labels_as
        #: The images are grey (MNIST's): `[N, 1, H, W]` (or `[N, H, W, 1]`), written so by
        #: a translated pipeline, a view of the first of three channels by one of the user's.
        self._grey = grey
        #: The Dataset hands out NumPy arrays (an albumentations Compose's, without
        #: ToTensorV2): a collate_fn receives each sample's as an array (a view of the batch).
        self._numpy_images = numpy_images
        #: The steps of the user's transform that run in Python after the native prefix
        #: (`_transforms.Tail`), and the samples they ran on; None: all of it is native.
        self._tail = None
        self._tail_samples = 0
        #: Processes for the tail (`_tail.Pool`, made at its first batch) and how many: torch's
        #: `num_workers`, 0 running it in the iterating thread.
        self._tail_pool = None
        self._tail_workers = tail_workers
        #: Whether the tail runs in the iterating thread or the processes (`_tail.Placement`).
        self._tail_place = None
        #: `output_dtype=` as a torch dtype, for the tensors a tail gives.
        self._output_dtype = None
        #: A torchvision video dataset's samples for the collate_fn (`_video.ClipSamples`:
        #: `(clip, NO_AUDIO, label, ...)`); None for any other dataset.
        self._clip_samples = clip_samples
        #: The user's transform, watched for changes (`_TransformWatch`); None: a pipeline
        #: of hpuload's own, nothing to watch.
        self._watch = watch
        #: The arguments torch's DataLoader gets should the transform become one hpuload
        #: cannot run.
        self._fallback_args = fallback_args
        #: torch's DataLoader, once a changed transform sent the loader there.
        self._torch: _TorchDataLoader | None = None
        #: A state given to `load_state_dict`, until its epoch starts (a rebuild keeps it).
        self._pending_resume: str | None = None
        #: A `datasets.Dataset`'s sample: (image key, label key) of the dicts its transform
        #: returns; None: `(image, label)` pairs.
        self._sample_keys = sample_keys
        #: A detection dataset's targets (`_detection.Targets`): the label slots hold target
        #: records, turned into torchvision's target dicts or padded tensors.
        self._targets = targets
        #: The user's collate_fn, called on each batch's per-sample views (None: the batch
        #: tensors as they are, which is what default_collate would build).
        self.collate_fn = collate_fn
        if collate_fn is not None:
            _malloc.tune_malloc()
        #: A sampler whose order hpuload takes as given (its own shuffle is off).
        self._order = order
        self.batch_sampler = batch_sampler
        self.batch_size = batch_size
        self.sampler = sampler
        self.drop_last = last_batch == "drop"
        self.last_batch_policy = last_batch
        self.num_workers = workers
        self.timeout = timeout
        #: What the Rust loader is built from (rebuilt from a `dataclasses.replace` of it).
        self._options = _options.LoaderOptions(
            pipeline=pipeline,
            batch_size=batch_size,
            shuffle=shuffle,
            seed=seed,
            workers=workers,
            prefetch=prefetch,
            dtype=dtype,
            layout=layout,
            last_batch=last_batch,
            rank=rank,
            world_size=world,
            on_error=on_error,
            error_budget=error_budget,
            backend=backend,
            **source,
        )
        try:
            self._core = _cores.make(self._options)
        except ValueError as e:
            if clips_expected is None or isinstance(e, _hpuload.PipelineError):
                raise
            # A video the dataset's metadata describes otherwise than its tables, or one
            # hpuload cannot read: torch's loader (and torchcodec) take it.
            raise _Unfit(_short_because(str(e), tail), FallbackReason.DATASET) from e
        if clips_expected is not None and self._core.dataset_len != clips_expected:
            self._core.stop()
            raise _Unfit(
                f"hpuload counts {self._core.dataset_len} clips where the dataset's VideoClips counts "
                f"{clips_expected}",
                FallbackReason.DATASET,
            )
        self._left = None
        left = self._core.left_videos if clips_expected is not None else []
        if left:
            self._leave_to_dataset(left, clips_expected)
        misread = self._core.misread_by_torchcodec if clips_expected is not None else []
        if misread:
            warnings.warn(
                f"hpuload: {len(misread)} of the dataset's videos are MPEG-4 with B-frames in AVI "
                f"({', '.join(misread[:3])}{', ...' if len(misread) > 3 else ''}), which torchcodec, "
                "torchvision's reader, misreads (clips that start between keyframes come a frame early; "
                "from a packed bitstream, damaged or not at all): hpuload gives their frames as they are "
                "shown, as PyAV's FFmpeg decodes them",
                ReaderDifferenceWarning,
                stacklevel=4,  # the user's DataLoader(...): __new__, _setup_or_unfit, here
            )
        # Batches of images at their own sizes are sized for the largest and left pageable on
        # purpose (`OutputSize::PerSample`); any other unpinned pool is the memlock limit.
        if not self._core.pinned and self._core.output[2] != 0:
            warnings.warn(
                "hpuload: the batch buffers could not be page-locked (RLIMIT_MEMLOCK is too low "
                "for them; raise it with `ulimit -l`): using pageable memory, so copies to an "
                "accelerator go through a staging buffer",
                PinningWarning,
                stacklevel=4,
            )
        #: The layout asked for, for when no tail decides it.
        self._layout_asked = layout if tail is None else "nchw"
        self._set_tail(tail, stacklevel=5)
        self._epoch = 0
        self._resumed_epoch: int | None = None
        self._active: object | None = None
        #: Dataset indices of the samples in the batch returned last.
        self.last_indices: list[int] = []
        #: How many leading samples of the batch returned last are real; the rest repeat
        #: samples to keep the shape static (`HabanaDataLoader` with `drop_last=False`).
        self.last_valid: int = 0

    # --- torch's interface -------------------------------------------------------------

    def __len__(self) -> int:
        if self._torch is not None:
            return len(self._torch)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)  # it counts batches, as torch's loader asks it
        if self._order is not None:
            n, b = len(self._order), self.batch_size
            return n // b if self.drop_last else -(-n // b)
        return len(self._core)

    def __iter__(self) -> Iterator[list[torch.Tensor]]:
        self._follow_transform()
        self._follow_samples()
        if self._torch is not None:
            return iter(self._torch)
        epoch = self._current_epoch()
        try:
            order = self._epoch_order()
        except _Unfit as e:
            # Before this epoch's first batch: torch's loader runs it, and the rest.
            self._to_torch(str(e), e.reason)
            return iter(self._torch)
        return self._iterate(epoch, order)

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration runs (its shuffle and augmentation), as
        `DistributedSampler.set_epoch`. Without it, each full pass moves to the next epoch."""
        self._epoch = int(epoch)
        self._resumed_epoch = None

    def state_dict(self) -> dict:
        """Where iteration stands, as `StatefulDataLoader.state_dict()`: after the last batch
        returned. Save it with the model; `load_state_dict` continues exactly there."""
        if self._torch is not None:
            return self._torch.state_dict()
        return {"hpuload_state": self._core.state(), "epoch": self._epoch}

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state_dict()`: the next iteration yields exactly the batches the
        interrupted run would have yielded next. The seed is taken from the state; everything
        else that decides batch contents (dataset, pipeline, batch size, last-batch policy)
        must match, or this raises ValueError naming the setting. The world size may differ
        (an elastic restart): every rank loads the same checkpoint (any rank's), and the ranks
        now present share the rest of the epoch, each sample once."""
        if self._torch is not None:
            return self._torch.load_state_dict(state)
        if "hpuload_state" not in state:
            raise ValueError("state_dict was not made by hpuload (no 'hpuload_state')")
        saved = json.loads(state["hpuload_state"])
        # The transform as it is now (a script reassigns it after building the loader, before
        # resuming), so the state is checked against the pipeline that will run.
        self._follow_transform(rebuild=False)
        if self._torch is not None:
            return self._torch.load_state_dict(state)
        options = dataclasses.replace(self._options, seed=int(saved["config"]["seed"]))
        self._core.stop()
        self._core = _cores.make(dataclasses.replace(options, resume=state["hpuload_state"]))
        self._options = options
        self._pending_resume = state["hpuload_state"]
        self._epoch = int(saved["epoch"])
        self._resumed_epoch = self._epoch

    # --- hpuload's extras --------------------------------------------------------------

    def report(self) -> dict:
        """Statistics so far: images, bytes read and DMA'd, time per stage, skips by reason,
        fallbacks to the CPU path, whether the buffers are page-locked."""
        report = json.loads(self._core.report())
        if self._tail is not None:
            t = self._tail
            report["python_tail"] = {
                "steps": t.names,
                "after": t.prefix_names,
                "reason": t.reason,
                "samples": self._tail_samples,
                "runs_in": self._tail_runs_in(),
            }
        return report

    def _tail_runs_in(self) -> dict:
        """Where the tail runs, and the measurement that chose it."""
        if self._tail_workers <= 1:
            return {"where": "thread", "why": "num_workers is 0 or 1"}
        place = self._tail_place
        if place is None or place.where is None:
            return {"where": "thread", "why": "timing its first batches"}
        tail, native = place.measured
        return {
            "where": place.where if place.where == "thread" else f"{self._tail_workers} processes",
            "tail_ms_per_sample": round(tail * 1e3, 3),
            "native_ms_per_sample": round(native * 1e3, 3),
            "native_in_parallel": place.parallel,
        }

    @property
    def pinned(self) -> bool:
        """Whether the batch buffers are page-locked (torch reports `is_pinned()` only for
        memory registered with an accelerator runtime, so it says False without one)."""
        return self._core.pinned

    @property
    def classes(self) -> list[str]:
        return self._core.classes

    # --- internals ---------------------------------------------------------------------

    def _follow_transform(self, rebuild: bool = True) -> None:
        """At an epoch's start: translate the dataset's transform as it is now; a different
        pipeline rebuilds the Rust loader (keeping a pending resume), and one hpuload cannot
        run sends this loader to torch's DataLoader with a `FallbackWarning` naming it. With
        `rebuild=False` only the configuration is updated (the caller builds)."""
        w = self._watch
        if w is None or self._torch is not None:
            return
        now = w.read()
        try:
            pipe, dtype, *rest = w.translate()
        except (Unsupported, _Unfit) as e:
            self._to_torch(f"the dataset's transform is now {_describe(now)}, which hpuload cannot run: {e}")
            return
        tail = rest[0] if rest else None
        if tail is None:
            dtype = getattr(w, "dtype_override", None) or dtype
        layout = self._layout_asked
        if tail is not None:
            layout = tail.native_layout
        w.obj, w.warned = now, None
        self._set_tail(tail, stacklevel=4)
        # A table's other image columns, each with its pipeline as translated now; a Dataset's
        # other images per sample, through the same transform.
        more = self._rows.more if self._rows is not None else self._options.more
        if more and self._rows is None:
            more = tuple(dataclasses.replace(m, pipeline=pipe, dtype=dtype) for m in more)
        per_batch = self._rows.per_batch if self._rows is not None else self._options.draws_per_batch
        o = self._options
        if (pipe, dtype, layout, more, per_batch) == (o.pipeline, o.dtype, o.layout, o.more, o.draws_per_batch):
            return
        options = dataclasses.replace(
            self._options, pipeline=pipe, dtype=dtype, layout=layout, more=more, draws_per_batch=per_batch
        )
        if not rebuild:
            self._options = options
            return
        try:
            core = _cores.make(dataclasses.replace(options, resume=self._pending_resume))
        except _hpuload.PipelineError as e:
            self._to_torch(f"the dataset's transform is now {_describe(now)}, which hpuload cannot run: {e}")
            return
        self._core.stop()
        self._core = core
        self._options = options

    def _follow_samples(self) -> None:
        """At an epoch's start after the first: the dataset's files and labels as they are now
        (`_SamplesWatch`); changed ones rebuild the Rust loader, and a dataset hpuload can no
        longer run (another length, a sample that needs pixels) goes to torch's DataLoader with
        a `FallbackWarning` naming why."""
        w = self._samples_watch
        if w is None or self._torch is not None:
            return
        if not getattr(w, "started", False):
            w.started = True  # the first epoch reads what the build read
            return
        try:
            source = w.changed()
        except _Unfit as e:
            self._to_torch(f"the dataset changed after the loader was built: {e}")
            return
        if source is None:
            return
        options = dataclasses.replace(self._options, source=source)
        core = _cores.make(dataclasses.replace(options, resume=self._pending_resume))
        self._core.stop()
        self._core = core
        self._options = options

    def _set_tail(self, tail, stacklevel: int) -> None:
        """Runs `tail` from now on, warning once for each new one."""
        if tail is not None and not tail.same_as(self._tail):
            warnings.warn(f"hpuload: {tail.describe()}", PythonTailWarning, stacklevel=stacklevel)
        if tail is None or not tail.same_as(self._tail):
            self._close_tail_pool()
        self._tail = tail
        if tail is not None and self._watch is not None:
            wanted = getattr(self._watch, "dtype_override", None)
            self._output_dtype = _TORCH_DTYPES.get(wanted) if wanted else None

    def _close_tail_pool(self) -> None:
        self._tail_place = None
        pool, self._tail_pool = getattr(self, "_tail_pool", None), None
        if pool is not None:
            pool.close()

    def __del__(self):
        self._close_tail_pool()

    def _tail_start(self, images: torch.Tensor, indices: list[int], epoch: int, image: int = 0):
        """Starts the tail on a native batch: in the pool's processes (a `_tail.Pending`), or
        here and now (its outputs, `_tail.run`) without workers or where `_tail.Placement` finds
        that cheaper. `image`: which image of each sample the batch holds (`_cores`): each
        draws from a seed of its own."""
        seed = _tail.image_seed(self._options.seed, image)
        if self._tail_workers <= 1:
            return _tail.run(self._tail, images, indices, seed, epoch)

        place = self._tail_place
        if place is None:
            place = self._tail_place = _tail.Placement(self.num_workers)

        def here():
            return _tail.run(self._tail, images, indices, seed, epoch, one_thread=True, batches=place.batches)

        if place.where == "thread":
            return here()
        if place.where is None:
            return place.probe(here)
        if self._tail_pool is None:
            self._tail_pool = _tail.Pool(self._tail, self._tail_workers, images=1 + len(self._options.more))
        return self._tail_pool.submit(images, indices, seed, epoch)

    def _leave_to_dataset(self, left: list, clips: int) -> None:
        """Has the dataset make the clips of the videos hpuload cannot read (`left`: index,
        path, why), warning which; or, when they are more than a quarter of the `clips`,
        sends the dataset to torch's loader."""
        ends = self._clip_samples.ends
        videos = sorted(k for k, _, _ in left)
        held = sum(ends[k] - (ends[k - 1] if k else 0) for k in videos)
        named = "; ".join(f"{path}: {why}" for _, path, why in left[:3]) + ("; ..." if len(left) > 3 else "")
        if held * 4 > clips:
            self._core.stop()
            raise _Unfit(
                f"{len(left)} of the dataset's videos, holding {held} of its {clips} clips, are ones "
                f"hpuload cannot read ({named})",
                FallbackReason.DATASET,
            )
        self._left = (videos, ends)
        warnings.warn(
            f"hpuload: {len(left)} of the dataset's {len(ends)} videos ({named}) have their clips "
            f"({held} of {clips}) made by the dataset itself, in Python, as torch's loader makes them; "
            "the rest natively",
            PythonClipsWarning,
            stacklevel=5,  # the user's DataLoader(...): __new__, _setup_or_unfit, _setup, here
        )

    def _left_clips(self, indices: list[int], valid: int, epoch: int) -> dict:
        """The batch's clips from videos left to the dataset (`_leave_to_dataset`), by row, as
        `(clip, index, label)` (another index and its label where a replacement was made):
        the dataset's own `__getitem__`, its random draws seeded from (seed, epoch, index) and
        the global generators left as they were."""
        if self._left is None:
            return {}
        videos, ends = self._left
        rows = {}
        for row, index in enumerate(indices[:valid]):
            video = bisect.bisect_right(ends, index)
            k = bisect.bisect_left(videos, video)
            if k < len(videos) and videos[k] == video:
                rows[row] = index
        if not rows:
            return rows
        # As torch's workers would make these clips: one intra-op thread.
        with _tail.single_threaded(), _tail._Isolated():
            for row, index in rows.items():
                rows[row] = self._dataset_clip(index, epoch)
        return rows

    def _dataset_clip(self, index: int, epoch: int) -> tuple:
        """`(clip, index, label)` of clip `index` as the dataset makes it; when its reader
        fails and `on_error` is "skip", of a replacement drawn from (seed, epoch, index) (any
        clip, made the same way), warned about with the file and why, as a native sample's
        failure is."""
        seed = self._options.seed
        original, tried = index, 0
        while True:
            _tail._seed_all(_tail.sample_seed(seed, epoch, index))
            try:
                item = self.dataset[index]
                return item[0], index, int(item[2])
            except Exception as e:
                video, _ = self.dataset.video_clips.get_clip_location(index)
                path = self.dataset.video_clips.video_paths[video]
                if self._options.on_error != "skip" or tried >= 16:
                    raise RuntimeError(
                        f"hpuload: sample {index} ({path}): the dataset's reader failed: {e}"
                    ) from e
                warnings.warn(
                    f"hpuload: skipped sample {index} ({path}): the dataset's reader failed; replaced. {e}",
                    SkippedSampleWarning,
                    stacklevel=5,
                )
                tried += 1
                pick = _tail.sample_seed(seed ^ 0x5EED, epoch, original * 17 + tried)
                index = pick % len(self.dataset)

    @staticmethod
    def _put_clips(images: torch.Tensor, clips: dict, indices: list, labels) -> None:
        """Writes the dataset's clips (`_left_clips`) into their rows of a batch (a float clip
        converted to the batch's float dtype, as `output_dtype` asks), and a replacement's
        index and label into `indices` and `labels`."""
        for row, (clip, index, label) in clips.items():
            indices[row], labels[row] = index, label
            fits = isinstance(clip, torch.Tensor) and clip.shape == images.shape[1:]
            if not fits or clip.is_floating_point() != images.is_floating_point() or (
                not clip.is_floating_point() and clip.dtype != images.dtype
            ):
                got = f"{tuple(clip.shape)} {clip.dtype}" if isinstance(clip, torch.Tensor) else type(clip).__name__
                raise RuntimeError(
                    f"hpuload: the dataset made a clip of {got} where the batch holds "
                    f"{tuple(images.shape[1:])} {images.dtype} (a video hpuload cannot read, whose "
                    "clips the dataset makes)"
                )
            images[row].copy_(clip)

    def _tail_batch(self, held: tuple, collate, timeout):
        """A batch whose tail `_tail_start` started, collated as the user's loader would."""
        started, targets, indices, valid, epoch, step, more_started, own = held
        outs = self._tail_finish(started, timeout)
        more = [self._tail_finish(s, timeout) for s in more_started]
        if isinstance(self._extras, _probe.DrawnExtras):
            if not isinstance(outs, torch.Tensor):
                outs = list(outs)
            more = [m if isinstance(m, torch.Tensor) else list(m) for m in more]
            self._drawn_strays([outs, *more], targets, indices, epoch)
            self._drawn_flips([outs], indices, True)
        if more:
            outs, more = list(outs), [list(m) for m in more]
            if own:
                with self._seeded(epoch, step):
                    for slot, (index, made) in self._own_made(own).items():
                        indices[slot] = index
                        outs[slot] = made[0]
                        for m, x in zip(more, made[1:]):
                            m[slot] = x
        left = self._left_clips(indices, valid, epoch)
        if left and isinstance(outs, torch.Tensor):
            self._put_clips(outs, left, indices, targets)
        elif left:
            outs = list(outs)
            dtype = self._output_dtype
            for row, (clip, index, label) in left.items():
                if dtype is not None and isinstance(clip, torch.Tensor) and clip.is_floating_point():
                    clip = clip.to(dtype)  # as `_tail_finish` converts the tail's outputs
                outs[row], indices[row], targets[row] = clip, index, label
        self.last_indices, self.last_valid = indices, valid
        keys = self._sample_keys
        if isinstance(outs, torch.Tensor):
            # Every sample's output written into one shared batch: what default_collate would
            # stack, without the copy; a collate_fn gets its rows.
            if collate is None:
                labels = self._label_batch(torch.tensor(targets), indices)
                return [outs, labels, *self._extra_columns(indices)] if keys is None else self._keyed(outs, labels, indices)
            outs = list(outs.unbind(0))
        targets = self._label_items(targets, indices)
        if self._clip_samples is not None:
            samples = self._clip_samples.tuples(outs, targets, indices)
        elif keys is None:
            samples = self._pairs(outs, targets, indices)
        else:
            samples = self._keyed_samples(outs, targets, indices, tuple(more))
        if collate is None:
            return tud.default_collate(samples)
        with self._seeded(epoch, step):
            return collate(samples)

    def _pairs(self, images: list, labels: list, indices: list) -> list[tuple]:
        """A batch's samples as the Dataset returns them: `(image, label)`, and the plain
        values after the label where it returns more."""
        if self._extras is None:
            return list(zip(images, labels))
        skip = self._label_objects()
        return [(x, t, *extra[skip:]) for x, t, extra in zip(images, labels, self._extras_of(indices))]

    def _extras_of(self, indices: list) -> list:
        """The values beside the image of each of a batch's samples (the Dataset's code run
        again for them where it draws them anew on each call: `_probe.DrawnExtras.rows`)."""
        if isinstance(self._extras, _probe.DrawnExtras):
            return self._extras.rows(indices)
        return [self._extras[i] for i in indices]

    def _extra_columns(self, indices: list) -> list:
        """What default_collate makes of the values after a batch's labels, one per position."""
        if self._extras is None:
            return []
        skip = self._label_objects()
        rows = [extra[skip:] for extra in self._extras_of(indices)]
        # A column as default_collate's transposition gives it: a tuple (kept as such for strings).
        return [tud.default_collate(tuple(r[k] for r in rows)) for k in range(len(rows[0]))]

    def _keyed(self, images, labels, indices: list, more: tuple = ()) -> dict:
        """A batch as `default_collate` makes it of the Dataset's dicts (`more`: the batches of
        its samples' other images)."""
        keys = self._sample_keys
        if isinstance(keys, _probe.Bare):
            return keys.batch(images)
        if isinstance(keys, _probe.Views):
            return keys.batch(images, labels, self._extra_columns(indices))
        if isinstance(keys, _probe.DictSample):
            return keys.batch(images, self._extras_of(indices), more)
        return _keyed(keys, images, labels)

    def _keyed_samples(self, views: list, targets: list, indices: list, more: tuple = ()) -> list[dict]:
        """A batch's samples as the Dataset's dicts, for a collate_fn (`more`: the views of its
        samples' other images, per image)."""
        keys = self._sample_keys
        if isinstance(keys, _probe.Bare):
            return [keys.sample(v) for v in views]
        if isinstance(keys, _probe.Views):
            values = self._extras_of(indices) if self._extras is not None else [()] * len(views)
            return [keys.sample(v, t, extra) for v, t, extra in zip(views, targets, values)]
        if isinstance(keys, _probe.DictSample):
            others = list(zip(*more)) if more else [()] * len(views)
            return [keys.sample(v, extra, o) for v, extra, o in zip(views, self._extras_of(indices), others)]
        return [_keyed(keys, v, t) for v, t in zip(views, targets)]

    def _own_made(self, own: dict, fits=None) -> dict:
        """Slots whose images' loaders skipped differently (`_cores.Batch.own`: one image of a
        sample was damaged, the other not): for each, `(index, images)` of the first of its
        candidates the Dataset makes itself (`dataset[index]`, its transform as it is; its
        images in `DictSample` order, each passing `fits(slot, images)` where given), so that
        a sample's images always come from one index."""
        keys = self._sample_keys

        def make(slot, index):
            sample = self.dataset[index]
            images = [sample[key] for key in (keys.image, *keys.more)]
            return images if fits is None or fits(slot, images) else None

        return _cores.made_by_dataset(own, make, "the samples' images")

    def _drawn_strays(self, batches: list, labels, indices: list, epoch: int) -> None:
        """A Dataset that draws anew on each call (`_probe.DrawnExtras`): the batch's samples
        whose run drew what the probe took as fixed (another file, label or step before the
        transform, however rarely) are each made by the Dataset's own code, its draws seeded as
        its values' were, and written over the native sample's slot: its images into
        `batches` (the batch's images, then its other images': tensors or lists of each
        sample's), its label into `labels`, its values beside them into the draws."""
        drawn = self._extras
        if not isinstance(drawn, _probe.DrawnExtras):
            return
        strays = drawn.strays(indices)
        if not strays:
            return
        keys = self._sample_keys
        objects = self._label_objects()
        for slot, index in strays.items():
            sample = self._seeded_sample(index, epoch)
            if isinstance(keys, _probe.Bare):
                made, values, label = [keys.of(sample)], (), None
            elif isinstance(keys, _probe.Views):
                made = list(sample[0] if keys.nested else sample[: keys.count])
                values = tuple(sample[keys.values_at :])
                label = _probe._label(sample[keys.label_at]) if keys.labelled else None
            elif isinstance(keys, _probe.DictSample):
                images = (keys.image, *keys.more)
                made = [sample[k] for k in images]
                values, label = tuple(v for k, v in sample.items() if k not in images), None
            elif isinstance(keys, _probe.Segmented):
                # Its mask rides in the draws, for the masks' batch (`FileMasks._drawn_by_code`).
                made, values, label = [keys.of(sample)], (keys.mask_of(sample),), None
            else:
                made = [sample[0]]
                values = tuple(sample[1:]) if objects else tuple(sample[2:])
                label = None if objects else _probe._label(sample[1])
            for batch, image in zip(batches, made):
                if not isinstance(batch, torch.Tensor):
                    batch[slot] = image
                    continue
                image = torch.as_tensor(image)
                row = batch[slot]
                if image.shape != row.shape or image.is_floating_point() != row.is_floating_point():
                    raise RuntimeError(
                        f"hpuload: {type(self.dataset).__name__}.__getitem__({index}) drew another file or step "
                        f"than when probed and made an image of {tuple(image.shape)} {image.dtype} where the "
                        f"batch holds {tuple(row.shape)} {row.dtype}"
                    )
                row.copy_(image)
            if label is not None:
                labels[slot] = label
            drawn.settle(slot, values)

    def _seeded_sample(self, index: int, epoch: int):
        """Sample `index` as the Dataset's own code makes it, its draws seeded as the native
        samples' values were (`_tail.seeded_sample`, as `_drawn_strays` runs it): what the
        loader would have given for it, for a sample the loader hands to that code."""
        with _tail.seeded_sample(self._options.seed, epoch, index):
            return self.dataset[index]

    def _failed_guard(self, images: torch.Tensor, valid: int) -> dict:
        """`{slot: index}` of a batch's samples whose image fails the test of its pixels that
        the Dataset's code branches on (`_pixel_guard`): they are made by that code."""
        if self._pixel_guard is None or valid == 0:
            return {}
        rows = images[:valid].reshape(valid, -1).cpu().numpy()
        # A photo passes within its first pixels: the rest of a row is read only where they
        # do not tell. (In NumPy: torch's reductions of a batch this size run on its thread
        # pool, which waits on cores the loader's threads hold.)
        passed = (rows[:, :4096] > self._pixel_guard).any(1)
        failed = {}
        for slot in (~passed).nonzero()[0].tolist():
            if not bool((rows[slot] > self._pixel_guard).any()):
                failed[slot] = self.last_indices[slot]
        return failed

    def _drawn_flips(self, batches: list, indices: list, nchw: bool) -> None:
        """A Dataset whose code flips its image by a draw of its own, with only steps after
        the flip that give the flip of a flipped image (`_probe.split_flips`): the native
        samples are made without the flip; those whose run flipped it (`DrawnExtras.flips`)
        are flipped in their slots of `batches` (the batch's views; `[C, H, W]` samples where
        `nchw`, else `[H, W, C]`; a tail's samples in a list, tensors `[C, H, W]` or PIL
        images). The strays, made by the Dataset's own code, are not flipped again."""
        drawn = self._extras
        if not isinstance(drawn, _probe.DrawnExtras) or drawn.flipping is None:
            return
        for slot, (horizontal, vertical) in drawn.flips(indices).items():
            for batch in batches:
                sample = batch[slot]
                if isinstance(sample, torch.Tensor):
                    width = -1 if nchw else -2
                    dims = [d for d, on in ((width, horizontal), (width - 1, vertical)) if on]
                    flipped = sample.flip(dims)
                    if isinstance(batch, torch.Tensor):
                        sample.copy_(flipped)
                    else:
                        batch[slot] = flipped
                else:
                    from PIL import Image

                    if not isinstance(sample, Image.Image):
                        raise RuntimeError(
                            f"hpuload: the tail of the transform gave {type(sample).__name__} for a sample the "
                            "Dataset's code flips by a draw of its own (hpuload flips tensors and PIL images)"
                        )
                    if horizontal:
                        sample = sample.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
                    if vertical:
                        sample = sample.transpose(Image.Transpose.FLIP_TOP_BOTTOM)
                    batch[slot] = sample

    def _own_samples(self, own: dict, images: torch.Tensor, more: list, indices: list) -> None:
        """`_own_made`'s samples, their images copied into the native batches' slots."""

        def fits(slot, made):
            slots = [images[slot], *(m[slot] for m in more)]
            return all(isinstance(x, torch.Tensor) and x.shape == t.shape for x, t in zip(made, slots))

        for slot, (index, made) in self._own_made(own, fits).items():
            for x, t in zip(made, [images[slot], *(m[slot] for m in more)]):
                t.copy_(x)
            indices[slot] = index

    def _label_objects(self) -> int:
        """1 where the labels are no integers (the first of each sample's extras), else 0."""
        return int(self._labels_as is not None and self._labels_as.objects)

    def _label_batch(self, labels: torch.Tensor, indices: list):
        """A batch's labels as default_collate gives the Dataset's labels."""
        return labels if self._labels_as is None else self._labels_as.batch(labels, self._extras, indices)

    def _label_items(self, labels: list, indices: list) -> list:
        """A batch's labels as the Dataset gives them, for a collate_fn."""
        return labels if self._labels_as is None else self._labels_as.items(labels, self._extras, indices)

    def _seeded(self, epoch: int, step: int):
        """Where a collate_fn runs: the global generators seeded from (seed, epoch, step)."""
        return _tail.seeded_batch(self._options.seed, epoch, step)

    def _tail_finish(self, started, timeout) -> "list | torch.Tensor":
        """The tail's output for each sample of a batch `_tail_start` started."""
        out = started.result(timeout) if isinstance(started, _tail.Pending) else started
        self._tail_samples += len(out)
        dtype = self._output_dtype
        if isinstance(out, torch.Tensor):
            return out.to(dtype) if dtype is not None and out.is_floating_point() else out
        if dtype is not None:
            out = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in out]
        return out

    def _to_torch(self, why: str, reason: FallbackReason = FallbackReason.TRANSFORM) -> None:
        self._core.stop()
        self._close_tail_pool()
        args, kwargs = self._fallback_args
        self._torch = _fallback(_Unfit(why, reason), self.dataset, args, kwargs, stacklevel=4)

    def _sample_plan(self, index: int, width: int, height: int) -> dict:
        """The plan of the loader's sample `index` in the epoch being read, for an image of
        `width` x `height` as decoded (`core.sample_plan`)."""
        return json.loads(self._core.sample_plan(self._current_epoch(), index, width, height))

    def _current_epoch(self) -> int:
        if self._resumed_epoch is not None:
            return self._resumed_epoch
        if self._sampler_keeps_epoch():
            return int(self._epoch_source().epoch)
        return self._epoch

    def _epoch_source(self):
        return self._order if self._order is not None else self.sampler

    def _sampler_keeps_epoch(self) -> bool:
        """A DistributedSampler, or a user's sampler with an integer `epoch` (set_epoch)."""
        source = self._epoch_source()
        epoch = getattr(source, "epoch", None)
        if isinstance(source, tud.DistributedSampler):
            return epoch is not None
        return self._order is not None and isinstance(epoch, int)

    def _epoch_order(self) -> list[int] | None:
        """The indices the user's sampler (or batch sampler) gives for this epoch. `_Unfit`
        for a batch sampler whose batches this epoch are not all of its `batch_size` (but
        the last, which may be short): hpuload's batches are."""
        if self._order is None:
            return None
        if self.batch_sampler is not None:
            batches = [list(b) for b in self.batch_sampler]
            b = self.batch_size
            for k, batch in enumerate(batches):
                if len(batch) != b and not (k == len(batches) - 1 and len(batch) < b):
                    raise _Unfit(
                        f"batch {k} of the {type(self.batch_sampler).__name__} has {len(batch)} samples, not its "
                        f"batch_size {b} (hpuload honours batch samplers whose batches all have one size)",
                        FallbackReason.BATCH_SAMPLER,
                    )
            return [int(i) for batch in batches for i in batch]
        return [int(i) for i in self._order]

    def _iterate(self, epoch: int, order: list[int] | None):
        # One epoch runs at a time: a newer iter(loader) takes over, and an older iterator that
        # is resumed or finalized later must neither read nor stop the newer one's epoch.
        token = object()
        self._active = token
        core = self._core
        core.start_epoch(epoch, order)
        settle = getattr(self._samples_watch, "settle", None)
        source = settle() if settle is not None else None
        if source is not None:
            # The images changed in place since the last epoch (`_ArraysWatch`): the epoch
            # begins again from them.
            core.stop()
            self._options = dataclasses.replace(self._options, source=source)
            self._core = core = _cores.make(dataclasses.replace(self._options, resume=self._pending_resume))
            core.start_epoch(epoch, order)
        self._resumed_epoch = None
        self._pending_resume = None
        watch = self._watch
        collate = self.collate_fn
        if collate is not None and self._targets is not None:
            # The detection reference's copy-paste collate, natively where it behaves the same.
            _copy_paste.adopt(collate)
        timeout = self.timeout if self.timeout and self.timeout > 0 else None
        views = core.views
        split = (lambda images: _split_views(images, views, core.output[1])) if len(views) > 1 else None
        held = None  # a batch whose tail runs in the workers, handed out after the next starts

        try:
            while True:
                if self._active is not token:
                    raise RuntimeError("this iterator was superseded by a newer iter(loader)")
                batch = core.next_batch(timeout)
                if batch is None:
                    if held is not None:
                        last, held = held, None
                        yield self._tail_batch(last, collate, timeout)
                    break
                changed = watch.changed_during_epoch() if watch is not None else None
                if changed is not None:
                    warnings.warn(
                        f"hpuload: the dataset's transform was replaced during the epoch by {_describe(changed)}; "
                        "it applies from the next epoch (as with torch's DataLoader and worker processes)",
                        TransformChangeWarning,
                        stacklevel=2,
                    )
                self.last_indices = list(batch.indices)
                self.last_valid = batch.valid
                for index, path, reason, message in batch.skipped:
                    warnings.warn(
                        f"hpuload: skipped sample {index} ({path}): {reason}; replaced. {message}",
                        SkippedSampleWarning,
                        stacklevel=2,
                    )
                images, labels = torch.from_dlpack(batch.images), torch.from_dlpack(batch.labels)
                nchw = core.output[1] == "nchw"
                if (self._grey or _one_channel(self._options.pipeline)) and images.shape[1 if nchw else -1] == 3:
                    # Grey images of a pipeline the user gave, made as three equal channels:
                    # the first, a view (a translated one writes one channel).
                    images = images[:, :1] if nchw else images[..., :1]
                if getattr(batch, "more", None):
                    # The other images alike, each by its own pipeline.
                    batch.more = [
                        (m[:, :1] if nchw else m[..., :1])
                        if (self._grey or _one_channel(o.pipeline)) and m.shape[1 if nchw else -1] == 3
                        else m
                        for m, o in zip(batch.more, self._options.more)
                    ]
                if batch.valid < labels.shape[0] and self._targets is None and self.last_batch_policy == "pad":
                    # Rows that only keep the shape static: the label every torch loss ignores
                    # by default (CrossEntropyLoss's and Hugging Face's ignore_index).
                    labels[batch.valid :] = IGNORE_INDEX
                keys = self._sample_keys
                if self._tail is None and isinstance(self._extras, _probe.DrawnExtras):
                    views = split(images) if split is not None else [images]
                    self._drawn_strays([*views, *(getattr(batch, "more", None) or [])], labels, self.last_indices, epoch)
                    self._drawn_flips(views, self.last_indices, nchw)
                if self._left is not None and self._tail is None:
                    left = self._left_clips(self.last_indices, batch.valid, epoch)
                    self._put_clips(images, left, self.last_indices, labels)
                if split is not None:
                    # Several views of each image: a list of batches, one per view.
                    per_view = split(images)
                    if collate is None:
                        labels = self._label_batch(labels, self.last_indices)
                        if keys is None:
                            yield [per_view, labels, *self._extra_columns(self.last_indices)]
                        else:
                            yield self._keyed(per_view, labels, self.last_indices)
                    else:
                        targets = self._label_items(labels.tolist(), self.last_indices)
                        crops = [list(c) for c in zip(*(v.unbind(0) for v in per_view))]
                        if keys is None:
                            samples = self._pairs(crops, targets, self.last_indices)
                        else:
                            samples = self._keyed_samples(crops, targets, self.last_indices)
                        with self._seeded(epoch, batch.step):
                            out = collate(samples)
                        yield out
                elif self._tail is not None:
                    more = getattr(batch, "more", None) or []
                    started = (
                        self._tail_start(images, self.last_indices, epoch),
                        labels.tolist(),
                        self.last_indices,
                        batch.valid,
                        epoch,
                        batch.step,
                        # A Dataset's samples of several images: the tail on each one's batch,
                        # and the slots the Dataset makes itself (`_cores.Batch.own`).
                        [self._tail_start(m, self.last_indices, epoch, k) for k, m in enumerate(more, start=1)],
                        getattr(batch, "own", None),
                    )
                    if not isinstance(started[0], _tail.Pending):  # run here and now
                        yield self._tail_batch(started, collate, timeout)
                        continue
                    # In the workers: this batch's tail runs while the previous one is handed out.
                    if held is not None:
                        yield self._tail_batch(held, collate, timeout)
                    held = started
                elif self._targets is not None:
                    self._targets.on_error = self._options.on_error
                    if isinstance(self._extras, _probe.DrawnExtras):
                        self._targets.drawn = self._extras  # flips each mask as its code drew
                    detects = None
                    if self._targets.reference is not None or self._targets.moves_masks:
                        # The reference's v1 steps (or the v2 wrapper's transforms) move the
                        # masks too: each sample's own draws.
                        def detects(index, width, height, core=core, epoch=epoch, key=self._targets.plan_key):
                            plan = json.loads(core.sample_plan(epoch, index, width, height))
                            return plan if key is None else plan[key]

                    failed = self._failed_guard(images, batch.valid)
                    if collate is None:
                        out = self._targets.static(images, labels, self.last_indices, detects)
                        for slot, index in failed.items():
                            _put_row(out, tud.default_collate([self._seeded_sample(index, epoch)]), slot)
                        yield out
                    else:
                        samples = self._targets.samples(images, labels, self.last_indices, detects)
                        for slot, index in failed.items():
                            samples[slot] = self._seeded_sample(index, epoch)
                        with self._seeded(epoch, batch.step):
                            out = collate(samples)
                        yield out
                elif self._rows is not None:
                    # The dataset's own function makes each sample from its other columns (and
                    # from each image column's native images, where it has several).
                    function, indices = self._rows.function, self.last_indices
                    more = getattr(batch, "more", None)
                    own = getattr(batch, "own", None)
                    masks, table_masks, facts = None, self._rows.masks, None

                    def plans(index, width, height, core=core, epoch=epoch):
                        return json.loads(core.sample_plan(epoch, index, width, height))

                    if table_masks is not None:
                        # A column of masks moved with the images (`_segmentation.TableMasks`).
                        table_masks.on_error = self._options.on_error
                        table_masks.read(indices)
                        masks = {table_masks.column: table_masks._batch(indices, plans, images)}
                        if table_masks.own:
                            own = {**(own or {}), **table_masks.own}
                    with self._seeded(epoch, batch.step):
                        if own:
                            # Samples whose columns' loaders skipped differently: the dataset's own.
                            own = function.own_samples(own)
                            for slot, (index, _) in own.items():
                                indices[slot] = index
                        if function.needs_facts:
                            # The images' sizes the function reads, and where their plans cut them.
                            facts = function.facts(indices, plans, own)
                        out = _collate.call(
                            collate or tud.default_collate,
                            [images, *more] if more else images,
                            lambda views: function.samples(views, indices, own=own, masks=masks, facts=facts),
                        )
                    yield out
                elif collate is None:
                    # What default_collate makes of the samples.
                    _collate.mark(images)
                    labels = self._label_batch(labels, self.last_indices)
                    if keys is None:
                        yield [images, labels, *self._extra_columns(self.last_indices)]
                    else:
                        more = getattr(batch, "more", None) or []
                        if getattr(batch, "own", None):
                            with self._seeded(epoch, batch.step):
                                self._own_samples(batch.own, images, more, self.last_indices)
                        yield self._keyed(images, labels, self.last_indices, tuple(more))
                else:
                    # Views of the pinned batch, one per sample: nothing is copied before the
                    # user's code runs, and default_collate's stack of them is the batch.
                    targets = self._label_items(labels.tolist(), self.last_indices)
                    if self._clip_samples is not None:
                        clips, indices = self._clip_samples, self.last_indices
                        samples = lambda views: clips.tuples(views, targets, indices)  # noqa: E731
                    elif keys is None:
                        indices = self.last_indices
                        samples = lambda views: self._pairs(views, targets, indices)  # noqa: E731
                    else:
                        indices = self.last_indices
                        samples = lambda views: self._keyed_samples(views, targets, indices)  # noqa: E731
                    more = getattr(batch, "more", None)
                    if more:
                        # A Dataset's samples of several images: each image's batch, its views.
                        indices = self.last_indices
                        samples = lambda views: self._keyed_samples(views[0], targets, indices, tuple(views[1:]))  # noqa: E731
                    if self._numpy_images:
                        of_tensors = samples
                        samples = lambda views: of_tensors([v.numpy() for v in views])  # noqa: E731
                    with self._seeded(epoch, batch.step):
                        if getattr(batch, "own", None):
                            self._own_samples(batch.own, images, more, self.last_indices)
                        out = _collate.call(collate, [images, *more] if more else images, samples)
                    yield out
        finally:
            if self._active is token and self._core is core:
                core.stop()
                self._active = None
        # A complete pass: the next one is the next epoch (unless set_epoch says otherwise).
        _malloc.trim()
        if not self._sampler_keeps_epoch():
            self._epoch = epoch + 1


def _put_row(batch, made, slot: int) -> None:
    """Writes a batch of one sample (`made`, as `default_collate` makes it) over row `slot`
    of `batch` (the same structure: tensors, lists, tuples, dicts of them)."""
    if isinstance(batch, torch.Tensor):
        batch[slot].copy_(made[0])
    elif isinstance(batch, dict):
        for key in batch:
            _put_row(batch[key], made[key], slot)
    elif isinstance(batch, (list, tuple)) and len(batch) == len(made) and all(
        isinstance(b, (torch.Tensor, dict, list, tuple)) for b in batch
    ):
        for b, m in zip(batch, made):
            _put_row(b, m, slot)
    elif isinstance(batch, list):
        batch[slot] = made[0]
    else:
        raise RuntimeError(f"hpuload: a sample the Dataset made cannot be put in a batch of {type(batch).__name__}")


def _split_views(images: torch.Tensor, views: list, layout: str) -> list[torch.Tensor]:
    """A multi-view batch `[N, E]` (each sample's row holds its views one after the other) as
    one `[N, 3, h, w]` (or `[N, h, w, 3]`) view of it per view: no copy, each sample's image
    contiguous, consecutive samples a row apart."""
    n, row = images.shape
    out, at = [], 0
    for h, w in views:
        shape = (n, 3, h, w) if layout == "nchw" else (n, h, w, 3)
        inner = (h * w, w, 1) if layout == "nchw" else (w * 3, 3, 1)
        out.append(images.as_strided(shape, (row, *inner), images.storage_offset() + at))
        at += 3 * h * w
    return out


def _setup_or_unfit(loader: _Loader, plan: dict) -> None:
    """Builds the Rust loader; a translated torchvision transform that hpuload cannot run as a
    whole (e.g. Resize alone: a different shape per image, which only batch_size=1 or a custom
    collate can take) is a reason to fall back, not an error."""
    translated = plan.pop("translated")
    plan.pop("pad_last_batch")  # decided `last_batch`
    try:
        loader._setup(**plan)
    except _hpuload.PipelineError as e:
        if not translated:
            raise  # the user's own pipeline= is an error to fix, not a reason to fall back
        raise _Unfit(_short_because(str(e), plan.get("tail")), FallbackReason.TRANSFORM) from e
    except ValueError as e:
        # Views the loader cannot make of one decoded image (a pixel op before a view's crop).
        if not translated or not str(e).startswith("invalid configuration (views)"):
            raise
        raise _Unfit(str(e), FallbackReason.TRANSFORM) from e


def _short_because(why: str, tail) -> str:
    """`why` the loader cannot be built, and, where the transform runs natively only in part,
    what kept that part short: the step to change may be the tail's first, not the crop or
    resize the message asks for."""
    if tail is None or not tail.names:  # a tail of no steps only hands the image over as PIL's
        return why
    return f"{why} (the transform runs natively only up to its {tail.names[0]}: {tail.reason})"


def _workers(num_workers: int) -> int:
    """Threads: torch's `num_workers=0` loads in the main process; ours are threads either way,
    so 0 means one per core."""
    return num_workers if num_workers and num_workers > 0 else (os.cpu_count() or 1)


class DataLoader(_Loader):
    """`torch.utils.data.DataLoader`'s signature and meaning, on hpuload's threads.

    Torch's arguments: `shuffle`, a `RandomSampler`, `SequentialSampler` or `DistributedSampler`
    as `sampler`, `drop_last`, `generator` (seeds shuffle and augmentation), `num_workers`
    (threads; 0 means one per core), `prefetch_factor` (batches ahead), `timeout`,
    `persistent_workers` (with workers, the dataset's files and labels are read once, as
    torch's kept workers keep them; else again at each epoch's start). `pin_memory`,
    `worker_init_fn` and `multiprocessing_context` have nothing to act on (buffers are always
    page-locked when the OS allows; there are no worker processes).
    A `collate_fn` is called on each batch as a list of `(image, label)` pairs whose images are
    views of the pinned batch (no copy before the user's code), so `lambda b:
    mixupcutmix(*default_collate(b))` works unchanged. Any other sampler (torchvision's
    `RASampler`, timm's `RepeatAugSampler`, a user's class) gives its order each epoch (after
    its `set_epoch`, which the training loop calls) and hpuload decodes exactly that order; so
    does a `batch_sampler` whose batches all have one size (torchvision's `RandomClipSampler` and
    `UniformClipSampler` over a video dataset among them: torchvision's `Kinetics`, `UCF101` and
    `HMDB51` run natively with a `collate_fn` that drops the audio, which hpuload does not
    decode, as the video reference's does). Such a sampler shards by itself,
    so hpuload does not shard again; `state_dict`/`load_state_dict` resume exactly when the
    sampler's order is a function of its epoch. A dataset or transform hpuload does not
    implement: torch's DataLoader is returned instead, with a `FallbackWarning` whose `reason`
    is a `FallbackReason` (counted in `hpuload.torch.fallback_counts`); when the dataset reads
    its videos with decord's `VideoReader` or torchcodec's `VideoDecoder`, hpuload's readers
    answer them in that loader's workers, decoding natively.

    hpuload's own keywords: `backend` ("auto": the emulated media engine for baseline JPEGs,
    the CPU for the rest; "cpu": torchvision-exact within 1 level; "hw"), `on_error` ("skip":
    replace a bad file, warn naming it, fail past `error_budget` of the epoch; "fail"),
    `error_budget` (0.01), `seed` (overrides `generator`), `output_dtype` (a torch dtype
    replacing the transform's), `layout` ("nchw" or "nhwc"), `pipeline` (for a path dataset),
    `max_boxes` (detection: boxes per image in the padded targets, default 200),
    `pad_last_batch` (False: the last batch is partial, as torch's; True: padded to a full one
    with repeated samples labelled -100, `last_valid` counting the real ones), `video_reader`
    ("hpuload": decord's and torchcodec's readers answered by hpuload's in torch's loader;
    "own": the dataset's own readers).
    """

    def __new__(cls, dataset, *args, **kwargs):
        bound = _torch_signature().bind(None, dataset, *args, **{k: v for k, v in kwargs.items() if k not in _OWN})
        bound.apply_defaults()
        a = dict(bound.arguments)
        a.update(a.pop("kwargs", {}) or {})
        own = {k: kwargs[k] for k in _OWN if k in kwargs}
        try:
            plan = _plan_torch(dataset, a, own)
            plan["fallback_args"] = (args, kwargs)
            self = super().__new__(cls)
            _setup_or_unfit(self, plan)
        except _Unfit as e:
            return _fallback(e, dataset, args, kwargs)
        return self

    def __init__(self, *args, **kwargs):
        """Everything happens in `__new__` (which may return torch's DataLoader instead)."""


def _common(dataset, a: dict, own: dict):
    """Settings both drop-ins read the same way."""
    source, pipeline, dtype, _ = _dataset_source(
        dataset, own.get("pipeline"), own.get("transform"), own.get("max_boxes", 200)
    )
    sample_keys = source.pop("sample_keys", None)
    targets = source.pop("targets", None)
    watch = source.pop("watch", None)
    tail = watch.translated[2] if watch is not None and len(watch.translated) > 2 else None
    clip_samples = source.pop("clip_samples", None)
    # `[T, H, W, C]` clips with nothing in Python after them: the native batch's own layout.
    clip_layout = source.pop("native_layout", None)
    clips_expected = source.pop("clips_expected", None)
    grey = source.pop("grey", False)
    numpy_images = source.pop("numpy_images", False)
    labels_as = source.pop("labels_as", None)
    if labels_as is not None and labels_as.objects and own.get("pad_last_batch"):
        raise _Unfit(
            "pad_last_batch=True marks the padding rows with the label -100, and the Dataset's labels are "
            "not integers",
            FallbackReason.ARGUMENT,
        )
    sample_extras = source.pop("sample_extras", None)
    row_function = source.pop("row_function", None)
    pixel_guard = source.pop("pixel_guard", None)
    samples_watch = source.pop("samples_watch", None)
    if a.get("persistent_workers") and a.get("num_workers"):
        # torch's workers, started once, keep the dataset as it was then.
        samples_watch = None
    output = own.get("output", "dict")
    if output not in ("dict", "pair"):
        raise ValueError(f"output={output!r}: give 'dict' or 'pair'")
    if output == "pair":
        if isinstance(sample_keys, _probe.Bare):
            raise ValueError("output='pair': the dataset's samples are its images alone, with no label; leave output as 'dict'")
        if isinstance(sample_keys, _probe.Views):
            raise ValueError("output='pair': the dataset's samples are several views of an image; leave output as 'dict'")
        if isinstance(sample_keys, _probe.DictSample):
            raise ValueError(
                f"output='pair': the dataset's samples are dicts of {list(sample_keys.order)}, not an image and a "
                "label; leave output as 'dict'"
            )
        sample_keys = None
    if "output_dtype" in own:
        from ._transforms import _torch_dtype_name

        wanted = _torch_dtype_name(own["output_dtype"])
        if wanted is None:
            raise ValueError(f"output_dtype={own['output_dtype']}: use float32, float16, bfloat16 or uint8")
        if watch is not None:
            watch.dtype_override = wanted
        if tail is None:
            dtype = wanted  # else the tail's tensors are converted (`_Loader._tail_out`)
    batch_size = a.get("batch_size", 1)
    if batch_size is None:
        raise _Unfit("batch_size=None (no automatic batching)", FallbackReason.ARGUMENT)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size should be a positive integer, got {batch_size!r}")
    timeout = a.get("timeout", 0) or 0
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    prefetch = a.get("prefetch_factor") or 2
    return dict(
        translated=own.get("pipeline") is None
        and not isinstance(dataset, (str, os.PathLike, *_HPU_SOURCES)),
        dataset=dataset,
        source=source,
        pipeline=pipeline,
        dtype=dtype,
        batch_size=batch_size,
        workers=_workers(a.get("num_workers", 0)),
        prefetch=max(1, int(prefetch)),
        timeout=float(timeout),
        backend=own.get("backend", "auto"),
        on_error=own.get("on_error", "skip"),
        error_budget=float(own.get("error_budget", 0.01)),
        layout=_layout(clip_layout or own.get("layout", "nchw"), tail),
        tail=tail,
        tail_workers=max(0, int(a.get("num_workers") or 0)),
        pad_last_batch=bool(own.get("pad_last_batch", False)),
        sample_keys=sample_keys,
        targets=targets,
        watch=watch,
        clip_samples=clip_samples,
        clips_expected=clips_expected,
        grey=grey,
        numpy_images=numpy_images,
        labels_as=labels_as,
        samples_watch=samples_watch,
        sample_extras=sample_extras,
        row_function=row_function,
        pixel_guard=pixel_guard,
    )


@functools.lru_cache(maxsize=16)
def _one_channel(pipeline: str) -> bool:
    """Whether a pipeline's images are grey with one channel (torchvision's
    `Grayscale(num_output_channels=1)`), which hpuload makes as three equal channels."""
    try:
        if os.path.exists(pipeline):  # a TOML file of the user's
            import tomllib

            with open(pipeline, "rb") as f:
                return bool(tomllib.load(f).get("single_channel"))
        return bool(json.loads(pipeline).get("single_channel"))
    except (ValueError, AttributeError, OSError, ImportError):  # tomllib: Python 3.11
        return False


def _layout(layout: str, tail) -> str:
    """The native batch's layout: a tail that takes PIL images reads NHWC rows (each is the
    image's bytes in PIL's order); any other tail gets what torchvision gives, CHW."""
    if tail is None:
        return layout
    if layout != "nchw":
        raise ValueError(
            f"layout={layout!r} with a transform whose last steps run in Python ({tail.describe()}): "
            "the batch is what those steps give"
        )
    return tail.native_layout


def _video_collate(plan: dict) -> None:
    """A torchvision video dataset's samples are `(clip, audio, label, ...)`: its collate_fn
    must not read the audio hpuload does not decode (tried once, now)."""
    if plan["clip_samples"] is not None:
        try:
            _video.check_collate(plan["collate_fn"], plan["clip_samples"])
        except _probe.NeedsPixels as e:
            raise _Unfit(str(e), FallbackReason.ARGUMENT) from e


def _last_batch(drop_last, plan: dict) -> str:
    """The Rust loader's last-batch policy: torch's partial last batch unless the user drops it
    or asks for `pad_last_batch=True` (static shapes; the padding rows are marked)."""
    if drop_last:
        return "drop"
    return "pad" if plan["pad_last_batch"] else "partial"


def _user_order(sampler, batch_sampler, a: dict, plan: dict) -> dict:
    """Settings for a sampler (or batch sampler) whose order hpuload takes as given: it already
    shards (RASampler, RepeatAugSampler, DistributedSampler subclasses take rank and world
    size), so the loader's own sharding and shuffle are off."""
    if batch_sampler is not None:
        size = getattr(batch_sampler, "batch_size", None)
        if not isinstance(size, int) or size < 1:
            raise _Unfit(
                f"a {type(batch_sampler).__name__} without an integer batch_size (hpuload honours "
                "batch samplers whose batches all have one size)",
                FallbackReason.BATCH_SAMPLER,
            )
        plan["batch_size"] = size
        last = _last_batch(getattr(batch_sampler, "drop_last", False), plan)
        plan.update(order=batch_sampler, batch_sampler=batch_sampler, sampler=getattr(batch_sampler, "sampler", None))
    else:
        last = _last_batch(a.get("drop_last"), plan)
        plan.update(order=sampler, sampler=sampler)
    plan.update(shuffle=False, rank=0, world=1, last_batch=last)
    return plan


def _plan_torch(dataset, a: dict, own: dict) -> dict:
    collate = a.get("collate_fn")
    plan = _common(dataset, a, own)
    plan["collate_fn"] = None if collate is None or collate is tud.default_collate else collate
    _video_collate(plan)
    sampler = a.get("sampler")
    batch_sampler = a.get("batch_sampler")
    shuffle = bool(a.get("shuffle"))
    if sampler is not None and shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle")
    rank, world = 0, 1
    last_batch = _last_batch(a.get("drop_last"), plan)
    given = False
    if batch_sampler is not None:
        given = True
    elif sampler is None or type(sampler) is tud.SequentialSampler:
        pass
    elif type(sampler) is tud.RandomSampler and not sampler.replacement and sampler._num_samples is None:
        shuffle = True
        if a.get("generator") is None and sampler.generator is not None:
            a["generator"] = sampler.generator
    elif type(sampler) is tud.DistributedSampler and not (sampler.drop_last and not a.get("drop_last")):
        shuffle = bool(sampler.shuffle)
        rank, world = int(sampler.rank), int(sampler.num_replicas)
        plan["seed"] = int(sampler.seed)
    else:
        # Any other sampler (RASampler, RepeatAugSampler, a user's class, a RandomSampler with
        # replacement): its order, taken as it is each epoch.
        given = True
    if own.get("seed") is not None:
        plan["seed"] = int(own["seed"])
    elif "seed" not in plan:  # drawn only when needed: a draw moves the user's generator
        plan["seed"] = _seed_from(a.get("generator"))
    if given:
        return _user_order(sampler, batch_sampler, a, plan)
    if sampler is None and hasattr(dataset, "__len__"):
        # What torch's DataLoader exposes as `.sampler` (scripts read `len(loader.sampler)`);
        # the order itself is hpuload's.
        sampler = tud.RandomSampler(dataset) if shuffle else tud.SequentialSampler(dataset)
    plan.update(shuffle=shuffle, sampler=sampler, rank=rank, world=world, last_batch=last_batch)
    return plan


class HabanaDataLoader(_Loader):
    """Habana's `habana_dataloader.HabanaDataLoader`: the same signature and rules. The fast
    path takes a torchvision ImageFolder with transforms hpuload implements; shuffle comes from
    `shuffle`, a `RandomSampler` or a `DistributedSampler(shuffle=True)`; `num_workers` and
    `pin_memory` are ignored; `batch_sampler`, `collate_fn`, `worker_init_fn`, `generator` and
    `multiprocessing_context` must be None; `drop_last=False` yields torch's partial last batch
    (evaluation counts each image once), and `pad_last_batch=True` pads it to a full one instead
    (static shapes for graph mode: the padding rows come last, carry the label -100, which
    torch's losses ignore, and `loader.last_valid` counts the real ones); rank and world size come from `torch.distributed` (or
    `RANK`/`WORLD_SIZE`), and a sharded run without a DistributedSampler shuffles with seed 0
    (DistributedSampler's default) so that the ranks agree on the order. Anything else falls
    back to torch's DataLoader with a warning."""

    def __new__(
        cls,
        dataset,
        batch_size=1,
        shuffle=False,
        sampler=None,
        batch_sampler=None,
        num_workers=0,
        collate_fn=None,
        pin_memory=False,
        drop_last=False,
        timeout=0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        prefetch_factor=2,
        persistent_workers=False,
        pin_memory_device="",
        in_order=True,
        **own,
    ):
        a = dict(
            batch_size=batch_size,
            shuffle=shuffle,
            sampler=sampler,
            batch_sampler=batch_sampler,
            num_workers=num_workers,
            collate_fn=collate_fn,
            pin_memory=pin_memory,
            drop_last=drop_last,
            timeout=timeout,
            worker_init_fn=worker_init_fn,
            multiprocessing_context=multiprocessing_context,
            generator=generator,
            prefetch_factor=prefetch_factor if num_workers else None,
            persistent_workers=persistent_workers if num_workers else False,
            pin_memory_device=pin_memory_device,
        )
        if not in_order:
            a["in_order"] = in_order
        unknown = set(own) - set(_OWN)
        if unknown:
            raise TypeError(f"HabanaDataLoader got unexpected keyword arguments {sorted(unknown)}")
        try:
            plan = _plan_habana(dataset, a, own)
            plan["fallback_args"] = ((), dict(a, **own))
            self = super().__new__(cls)
            _setup_or_unfit(self, plan)
        except _Unfit as e:
            return _fallback(e, dataset, (), dict(a, **own))
        return self

    def __init__(self, *args, **kwargs):
        """Everything happens in `__new__` (which may return torch's DataLoader instead)."""


def _plan_habana(dataset, a: dict, own: dict) -> dict:
    # Habana's own loader refuses these; hpuload has nothing to run them on (threads, not
    # processes, and seeds of its own). A collate_fn and a user's sampler are honoured.
    for name in ("worker_init_fn", "generator", "multiprocessing_context"):
        if a.get(name) is not None:
            raise _Unfit(f"{name} must be None for HabanaDataLoader's fast path", FallbackReason.ARGUMENT)
    plan = _common(dataset, a, own)
    collate = a.get("collate_fn")
    plan["collate_fn"] = None if collate is None or collate is tud.default_collate else collate
    _video_collate(plan)
    sampler = a.get("sampler")
    shuffle = bool(a.get("shuffle"))
    if a.get("batch_sampler") is not None or (
        sampler is not None
        and type(sampler) not in (tud.RandomSampler, tud.SequentialSampler, tud.DistributedSampler)
    ):
        plan["seed"] = int(own["seed"]) if own.get("seed") is not None else _seed_from(None)
        return _user_order(sampler, a.get("batch_sampler"), a, plan)
    if isinstance(sampler, tud.RandomSampler) or (
        isinstance(sampler, tud.DistributedSampler) and sampler.shuffle
    ):
        shuffle = True
    rank, world = _dist_rank_world()
    if isinstance(sampler, tud.DistributedSampler):
        seed = int(sampler.seed)
    elif world > 1:
        # Every rank must shuffle alike or they overlap; torch's RNG differs per process, so
        # use DistributedSampler's default seed (0) rather than a collective to agree on one.
        seed = 0
    else:
        seed = _seed_from(None)
    if own.get("seed") is not None:
        seed = int(own["seed"])
    plan.update(
        shuffle=shuffle,
        sampler=sampler,
        rank=rank,
        world=world,
        seed=seed,
        last_batch=_last_batch(a.get("drop_last"), plan),
    )
    return plan


def __getattr__(name: str):
    # `hpuload.torch.malloc_tuned`: whether a collate_fn made hpuload raise glibc's malloc
    # thresholds in this process (see `_malloc.tune_malloc`).
    if name == "malloc_tuned":
        return _malloc.malloc_tuned
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
