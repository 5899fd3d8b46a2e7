"""Hugging Face `datasets.Dataset` on the fast path: the Arrow files behind its table, its
indices mapping, its image and label columns, and the torchvision transform its
`set_transform` function applies (read from the function, never run on a whole epoch)."""

from __future__ import annotations

import functools
from typing import Any

import torch

from ._fallback import FallbackReason, Unfit
from ._options import ArrowSource, MoreImages
from ._transforms import translate
from ._watch import TransformWatch
from .sources import _pipeline


def is_hf_dataset(dataset) -> bool:
    """A Hugging Face `datasets.Dataset` (checked without importing `datasets`)."""
    return any(
        c.__module__.startswith("datasets.") and c.__name__ == "Dataset" for c in type(dataset).__mro__
    )


# Operations on a memory-mapped table that keep its rows and the names of its columns.
_ROW_KEEPING = {
    "replace_schema_metadata", "cast", "combine_chunks", "drop", "drop_columns", "select",
    "remove_column", "add_column", "append_column",
}


def _hf_table_files(table) -> list[tuple[str, int, int]]:
    """The Arrow files behind a `datasets` table, each as `(path, first row, rows)`: a
    memory-mapped table, possibly sliced, or a vertical concatenation of such tables."""
    D = FallbackReason.DATASET
    path = getattr(table, "path", None)
    if path is not None:
        start, length = 0, None
        for op, args, kwargs in getattr(table, "replays", []) or []:
            if op in _ROW_KEEPING:
                continue
            if op != "slice":
                raise Unfit(f"the dataset's table was changed in memory ({op}) after loading", D)
            offset = args[0] if args else kwargs.get("offset", 0)
            n = args[1] if len(args) > 1 else kwargs.get("length")
            start += offset
            length = n if length is None else min(n, length - offset)
        return [(path, start, len(table) if length is None else length)]
    blocks = getattr(table, "blocks", None)
    if blocks is None:
        raise Unfit("the datasets.Dataset is in memory, not in Arrow files (save_to_disk it first)", D)
    files = []
    for row in blocks:
        if len(row) != 1:
            raise Unfit("the dataset's columns were concatenated from several tables", D)
        files.extend(_hf_table_files(row[0]))
    return files


def _hf_transform(dataset, transform, several: bool = False):
    """The torchvision transform the dataset's `set_transform`/`with_transform` function
    applies: `transform=` when given, else the one torchvision (or timm) transform object the
    function reaches through its closure or its module's globals. `several`: a table of
    several image columns, whose function may apply a transform of its own to each (a
    ControlNet table's): the list of those it reaches, one or more."""
    if transform is not None:
        return transform
    T = FallbackReason.TRANSFORM
    kind = getattr(dataset, "_format_type", None)
    if kind != "custom":
        raise Unfit(
            "the datasets.Dataset has no transform set with set_transform/with_transform "
            f"(format {kind!r}); set one, or pass transform= or pipeline=",
            T,
        )
    fn = dataset._format_kwargs.get("transform")
    reachable = []
    if type(fn) is functools.partial:
        # The arguments bound to it first (`partial(preprocess, transforms=train_transforms)`).
        reachable += [*fn.args, *fn.keywords.values()]
        fn = fn.func
    reachable += reachable_from(fn)
    found = []
    for obj in reachable:
        if _transform_like(obj) and all(obj is not f for f in found):
            found.append(obj)
    name = getattr(fn, "__name__", type(fn).__name__)
    if several and found:
        return found
    if len(found) != 1:
        what = "no torchvision transform" if not found else f"{len(found)} torchvision transforms"
        raise Unfit(f"{name} (the dataset's transform) reaches {what}; pass the one it applies as transform=", T)
    return found[0]


def _transform_like(obj) -> bool:
    """A torchvision (or timm) transform, an albumentations `Compose`, a transformers image
    processor, or a module of the user's holding torchvision transforms: what a dataset's
    function may hand its images to."""
    from ._albumentations import is_compose

    module = type(obj).__module__
    return (
        module.startswith("torchvision.transforms")
        or module.startswith("timm.data")
        or _is_image_processor(obj)
        or _holds_transforms(obj)
        or is_compose(obj)
    )


def _holds_transforms(obj) -> bool:
    """A `torch.nn.Module` of the user's holding torchvision transforms (as transformers'
    `run_clip.py` holds a `torch.nn.Sequential` of them), compiled by `torch.jit.script` or
    not: `_transforms.steps` looks through it."""
    from ._transforms import _SCRIPTABLE

    if not isinstance(obj, torch.nn.Module):
        return False
    return any(
        type(m).__module__.startswith("torchvision.transforms") or getattr(m, "original_name", None) in _SCRIPTABLE
        for m in obj.modules()
    )


def _is_image_processor(obj) -> bool:
    """A transformers image processor (`AutoImageProcessor.from_pretrained(...)`)."""
    return any(
        c.__name__ == "BaseImageProcessor" and c.__module__.startswith("transformers.") for c in type(obj).__mro__
    )


#: The methods of transformers' torchvision backend whose work `_processor_steps` maps; a
#: processor class that overrides any of them does something else.
_BACKEND_METHODS = (
    "__call__", "preprocess", "_preprocess_image_like_inputs", "_prepare_image_like_inputs",
    "_prepare_images_structure", "process_image", "_standardize_kwargs", "_preprocess", "resize",
    "center_crop", "rescale_and_normalize", "normalize", "rescale",
)


#: Segformer's own methods: images resized and normalized as the backend does them (no crop,
#: no padding), segmentation maps resized by nearest-exact positions, reduced first where it
#: says so (`_segformer_with_masks`).
_SEGFORMER_METHODS = ("preprocess", "_preprocess_image_like_inputs", "_preprocess")


def _is_segformer(processor) -> bool:
    """transformers' `SegformerImageProcessor` (or a class of the user's keeping its methods),
    whose other methods are the torchvision backend's."""
    try:
        from transformers import SegformerImageProcessor as Segformer
        from transformers import image_processing_backends as backends
    except ImportError:
        return False
    return (
        isinstance(processor, Segformer)
        and all(getattr(type(processor), m) is getattr(Segformer, m) for m in _BACKEND_METHODS)
        and all(getattr(Segformer, m) is getattr(backends.TorchvisionBackend, m) for m in _BACKEND_METHODS if m not in _SEGFORMER_METHODS)
    )


def _processor_steps(processor):
    """torchvision v2 steps that compute, within float rounding, what a transformers image
    processor gives for an RGB PIL image: one on transformers 5's torchvision backend, whose
    methods its class keeps, resizing to one height and width (a uint8 tensor, antialiased),
    centre-cropping a window whose offsets torchvision rounds as the backend truncates them,
    rescaling by 1/255 and normalizing (the backend's fused form: the same values but for
    the last bit). Anything else raises `Unfit` naming it."""
    import torch
    from torchvision.transforms import v2

    T = FallbackReason.TRANSFORM
    name = type(processor).__name__
    try:
        from transformers import image_processing_backends as backends
    except ImportError:
        raise Unfit(f"{name} (an image processor of transformers before 5, which hpuload does not map)", T) from None
    if not isinstance(processor, backends.TorchvisionBackend):
        raise Unfit(f"{name} does not run on transformers' torchvision backend (hpuload maps that one only)", T)
    segformer = _is_segformer(processor)
    own = [m for m in _BACKEND_METHODS if getattr(type(processor), m) is not getattr(backends.TorchvisionBackend, m)]
    if own and not segformer:
        raise Unfit(f"{name} has its own {', '.join(own)} (hpuload maps the torchvision backend's)", T)
    kw = processor._standardize_kwargs(**{n: getattr(processor, n, None) for n in processor._valid_kwargs_names})
    if segformer:
        # Segformer's own `_preprocess` neither crops nor pads, whatever it is told.
        kw["do_center_crop"] = kw["do_pad"] = False
    steps = [v2.PILToTensor()]
    size = kw.get("size")
    other = ("shortest_edge", "longest_edge", "max_height", "max_width", "min_pixels", "max_pixels")
    if kw.get("do_resize"):
        if not (size and size.height and size.width) or any(getattr(size, k, None) for k in other):
            raise Unfit(f"{name} resizes to {size} (hpuload maps a resize to one height and width)", T)
        resample = kw.get("resample")
        interpolation = (
            v2.InterpolationMode.BILINEAR if resample is None else backends.pil_torch_interpolation_mapping[resample]
        )
        if interpolation not in (v2.InterpolationMode.NEAREST, v2.InterpolationMode.BILINEAR, v2.InterpolationMode.BICUBIC):
            raise Unfit(f"{name} resamples with {interpolation.value} (hpuload: nearest, bilinear, bicubic)", T)
        steps.append(v2.Resize((size.height, size.width), interpolation=interpolation, antialias=True))
    if kw.get("do_center_crop"):
        crop = kw.get("crop_size")
        if not kw.get("do_resize"):
            raise Unfit(
                f"{name} centre-crops images of their own sizes (it truncates the offset, torchvision rounds it)", T
            )
        for full, part in ((size.height, crop.height), (size.width, crop.width)):
            if part > full or int((full - part) / 2.0) != int(round((full - part) / 2.0)):
                raise Unfit(f"{name} centre-crops {crop} out of {size} otherwise than torchvision's CenterCrop", T)
        steps.append(v2.CenterCrop((crop.height, crop.width)))
    if kw.get("do_pad"):
        raise Unfit(f"{name} pads its images (hpuload does not map that)", T)
    if kw.get("do_rescale"):
        if abs(float(kw.get("rescale_factor")) - 1 / 255) > 1e-12:
            raise Unfit(f"{name} rescales by {kw.get('rescale_factor')} (hpuload maps 1/255)", T)
        steps.append(v2.ToDtype(torch.float32, scale=True))
    elif kw.get("do_normalize"):
        steps.append(v2.ToDtype(torch.float32))
    if kw.get("do_normalize"):
        mean, std = kw.get("image_mean"), kw.get("image_std")
        mean = [float(mean)] * 3 if isinstance(mean, (int, float)) else [float(m) for m in mean]
        std = [float(std)] * 3 if isinstance(std, (int, float)) else [float(x) for x in std]
        steps.append(v2.Normalize(mean, std))
    return v2.Compose(steps)


def _segformer_with_masks(processor):
    """`(pipeline JSON, dtype, MaskSteps)` for a Segformer image processor given segmentation
    maps with the images (`processor(images, labels)`, transformers' semantic segmentation
    guide; a `Chained` one: the images put through a torchvision transform first, the guide's
    `ColorJitter`): the images as `_processor_steps` maps them, each map (one byte a pixel) reduced
    as `do_reduce_labels` says (a 256-byte table made by the processor's own `reduce_label`)
    and resized to the images' size by torch's nearest-exact positions, as int64."""
    from ._hf_rows import Chained
    from ._segmentation import MaskSteps

    T = FallbackReason.TRANSFORM
    found, processor = processor, processor.then if isinstance(processor, Chained) else processor
    name = type(processor).__name__
    if not _is_segformer(processor):
        raise Unfit(f"{name} given segmentation maps (hpuload moves the maps of Segformer's image processor)", T)
    # With the guide's `jitter` of each image first: whatever it does, the maps are not given
    # to it (a flip there flips the image alone).
    steps = _runs_as(found)
    kw = processor._standardize_kwargs(**{n: getattr(processor, n, None) for n in processor._valid_kwargs_names})
    size = kw.get("size")
    if not kw.get("do_resize"):
        raise Unfit(f"{name} given segmentation maps does not resize (each image and map its own size)", T)
    table = None
    if kw.get("do_reduce_labels"):
        table = processor.reduce_label([torch.arange(256, dtype=torch.uint8)])[0]
        if table.dtype != torch.uint8 or table.shape != (256,):
            raise Unfit(f"{name}'s reduce_label gives other than a byte per value", T)
    pipeline, dtype = translate(steps)
    mask = MaskSteps(
        (size.height, size.width), 0, table, resized=True, nearest="torch_exact", dtype=torch.int64, sized=False, flipped=False
    )
    return pipeline, dtype, mask


def _runs_as(found):
    """What hpuload runs for the object the dataset's function reaches: a torchvision or timm
    transform as it is, an image processor as `_processor_steps`; a torchvision transform
    then an image processor (`_hf_rows.Chained`, the guide's `jitter` then the processor) as
    the first then the processor's steps."""
    from ._hf_rows import Chained

    if isinstance(found, Chained):
        return _chained(found, _runs_as(found.then))
    return _processor_steps(found) if _is_image_processor(found) else found


def _chained(found, steps):
    """`found.first` then `steps` (a v2 `Compose`, an image processor's), or `Unfit` where the
    first is no torchvision transform of PIL images (the processor is handed what it gives)."""
    from torchvision.transforms import v2

    if not _is_image_processor(found.then) or not type(found.first).__module__.startswith("torchvision.transforms"):
        raise Unfit(
            f"the dataset's transform hands {type(found.then).__name__} what {type(found.first).__name__} gives "
            "(hpuload runs a torchvision transform then an image processor)",
            FallbackReason.TRANSFORM,
        )
    return v2.Compose([found.first, *steps.transforms])


def reachable_from(fn) -> list:
    """The objects a function reaches: its closure's, and the globals its code reads."""
    reachable = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if not _empty(c)]
    code = getattr(fn, "__code__", None)
    if code is not None:
        reachable += [fn.__globals__.get(n) for n in _global_names(code)]
    return [obj for obj in reachable if obj is not None]


def _empty(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - reading it is the test
    except ValueError:
        return True
    return False


def _global_names(code) -> list[str]:
    """The global names a function's code reads, its comprehensions' and inner functions'
    included (they are code objects of their own)."""
    names = list(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names += _global_names(const)
    return names


def hf_source(dataset, pipeline, transform):
    """A `datasets.Dataset` backed by Arrow files: those files, its indices mapping, its image
    and label columns, the torchvision transform its `set_transform` function applies, and the
    keys of the dicts that function returns."""
    D = FallbackReason.DATASET
    try:
        from datasets import ClassLabel, Image
    except ImportError as e:  # pragma: no cover - a datasets.Dataset implies the package
        raise Unfit(f"datasets is not importable ({e})", D) from e
    features = dataset.features
    images = [k for k, f in features.items() if isinstance(f, Image)]
    labels = [k for k, f in features.items() if isinstance(f, ClassLabel)]
    # A column named so that holds images is no label: a segmentation table's masks.
    labels = labels or [k for k in ("label", "labels") if k in features and not isinstance(features[k], Image)]
    # Without a label (an image and its captions), or where it makes more than the image
    # tensor and the label, the dataset's function runs itself on each batch's other columns
    # (`_hf_rows`).
    function = pipeline is None and transform is None and getattr(dataset, "_format_type", None) == "custom"
    encoded = False
    if not images and function:
        # A table of the images' paths (transformers' `run_clip.py`), which the function reads.
        column = _path_column(dataset)
        if column is not None:
            return _path_table_source(dataset, column)
        # Or of their encoded bytes (img2dataset's Parquet: a `jpg` column), which it opens.
        column = _bytes_column(dataset)
        if column is not None:
            images, encoded = [column], True
    unlabelled = not labels and function
    # Several Image columns (diffusers' ControlNet table: an image, its conditioning image and
    # a caption; a segmentation table's images and maps, `scene_parse_150` with a class label
    # beside them): each column the function hands a transform is made natively by a loader
    # of its own (`_cores`), the label passed to the function as another column.
    several = function and len(images) > 1
    if (len(images) != 1 and not several) or not (labels or unlabelled):
        raise Unfit(f"the dataset's features {list(features)} are not one Image and a label column", D)
    image_column, label_column = images[0], (labels[0] if labels else None)
    # The function's output on its first row (it decodes an image), learnt once.
    sampled = _first_sample(dataset) if function and labels and not encoded and not several else None
    by_rows = unlabelled or encoded or several or (sampled is not None and _makes_more(sampled[0], image_column, label_column))
    for column in images:
        if getattr(features[column], "decode", True) is False:
            raise Unfit(f"the Image column {column!r} has decode=False (the transform gets bytes, not images)", D)
        mode = getattr(features[column], "mode", None)
        if mode not in (None, "RGB"):
            # `Image(mode="L")`: datasets converts each image as it decodes it, and a
            # function's own `.convert("RGB")` then gives the grey image's RGB.
            raise Unfit(
                f"the Image feature {column!r} converts each image to mode {mode} as datasets decodes it, while "
                "hpuload decodes to RGB",
                D,
            )
    pieces = _hf_table_files(dataset.data)
    files = [p for p, _, _ in pieces]
    if len(set(files)) != len(files):
        raise Unfit("an Arrow file appears twice in the dataset's table", D)
    # Table rows -> rows of the files (a sliced file keeps only its slice).
    table_rows, offset = [], 0
    for path, start, n in pieces:
        table_rows.extend(range(offset + start, offset + start + n))
        offset += _arrow_rows(path)
    if dataset._indices is not None:
        mapping = dataset._indices.column(0).to_pylist()
        rows = [table_rows[i] for i in mapping]
    else:
        rows = table_rows
    if len(rows) != len(dataset):
        raise Unfit(f"{len(rows)} rows found for a dataset of {len(dataset)}", D)
    keys = (image_column, label_column, False)
    watch = None
    rows_now = None
    if by_rows:
        from . import _albumentations, _hf_joint
        from ._albumentations import is_compose
        from ._hf_rows import RowFunction
        from ._segmentation import TableMasks

        rows_now = Rows()
        commons: dict = {c: {} for c in images}  # each column's images' one size, once found
        turned = _datasets_turns() and not encoded
        loaded: list = []  # the image columns the loaders read, as the first translation found

        def translate_rows():
            from ._hf_steps import stepwise

            T = FallbackReason.TRANSFORM
            # A function that makes its images' tensors itself, reaching a transform (if any)
            # only through its helpers (InstructPix2Pix's script: `_hf_joint`).
            joint = None if encoded else _hf_joint.reached(dataset)
            if joint is not None:
                found = joint
            else:
                try:
                    found = _hf_transform(dataset, None, several=several)
                except Unfit:
                    # Several torchvision objects, which a function may apply in turn to each image
                    # (SDXL's script: a resize, a crop, a flip, then ToTensor and Normalize).
                    found = _hf_transform(dataset, None, several=True)
                    if not stepwise(found) or encoded:
                        raise
            founds = found if isinstance(found, list) else [found]
            fn, function = dataset._format_kwargs.get("transform"), rows_now.function
            kind = RowFunction if joint is None else _hf_joint.JointFunction
            if not (
                function is not None
                and function.fn is fn
                and len(function.founds) == len(founds)
                and all(a is b for a, b in zip(function.founds, founds))
            ):
                # Not checked already (at an earlier epoch's start) with the same function and objects.
                function = kind(dataset, images, founds, reads="bytes" if encoded else None)
                function.turned = turned
                try:
                    function.check(_rows_to_check(len(dataset)), _draws_from)
                except Unfit as refused:
                    # A function that hands its one transform a tensor it made itself (the
                    # InstructPix2Pix script written inline, no helper) may be a joint one.
                    if kind is not RowFunction or encoded or len(founds) != 1:
                        raise
                    try:
                        function = _hf_joint.JointFunction(dataset, images, founds)
                        function.check(_rows_to_check(len(dataset)), _draws_from)
                    except Unfit:
                        raise refused from None
                for column in function.unconverted:
                    odd = _first_row(dataset, column, lambda mode: mode if mode not in (None, "RGB") else None)
                    if odd is not None:
                        of = f" of {column!r}" if several else ""
                        raise Unfit(
                            f"{function.name} (the dataset's transform) hands it each image in its own mode, and row "
                            f"{odd[0]}{of} is in mode {odd[1]}, while hpuload decodes every image to RGB "
                            "(convert the images to RGB in it to run natively)",
                            T,
                        )
            used = function.used_columns
            if loaded and used != loaded:
                raise Unfit(f"{function.name} (the dataset's transform) now hands the transforms the images of {used}, not {loaded}", T)
            translated, masks = {}, None
            for c in used:
                found_c = function.transform_for(c)
                if c not in function.mask_of:
                    translate_c = _albumentations.translate if is_compose(found_c) else (
                        lambda f, c=c: _sized(_runs_as(f), commons[c], lambda: _common_size(dataset, c, turned))
                    )
                    translated[c] = translate_c(found_c)
                    continue
                if c != used[0] or len(used) > 1:
                    raise Unfit(f"{function.name} (the dataset's transform) hands masks with several image columns", T)
                if is_compose(found_c):
                    # transformers' `run_semantic_segmentation.py`: the Compose is given each
                    # image with its mask of another column, which moves with it.
                    pipe_c, dtype_c, steps = _albumentations.translate_with_mask(found_c)
                else:
                    # Segformer's `processor(images, labels)` (transformers' segmentation
                    # guide): the maps resized as it resizes them.
                    pipe_c, dtype_c, steps = _segformer_with_masks(found_c)
                translated[c] = (pipe_c, dtype_c)
                masks = TableMasks(dataset, function.mask_of[c], c, steps, turned)
                odd = masks.unfit(_rows_to_check(len(dataset)))
                if odd is not None:
                    raise Unfit(f"the masks of column {function.mask_of[c]!r} are not all PNGs of one byte a pixel ({odd})", T)
            more = []
            for c in used[1:]:
                if len(translated[c]) != 2:
                    raise Unfit(f"the transform of the image column {c!r} runs natively only in part", T)
                more.append(MoreImages(c, *translated[c]))
            rows_now.function, rows_now.more, rows_now.masks = function, tuple(more), masks
            rows_now.per_batch = getattr(function, "per_batch", False)
            loaded[:] = used
            return translated[used[0]]

        watch = TransformWatch(lambda: dataset._format_kwargs.get("transform"), translate_rows)
        pipe, dtype = watch.translated
        image_column = loaded[0]
        keys = None
    elif pipeline is not None:
        pipe, dtype = _pipeline(pipeline), "f32"
    else:
        # `set_transform` again (or the one transform it reaches, replaced or edited) is
        # watched like an ImageFolder's.
        if transform is None:
            keys = _hf_sample_keys(dataset, label_column, sampled)
        checked = _AppliesCheck(dataset, image_column, label_column, keys) if transform is None else None

        common: dict = {}

        def translate_now():
            found = _hf_transform(dataset, transform)
            runs = _runs_as(found)
            if checked is not None:
                checked(found, runs)
            return _sized(runs, common, lambda: _common_size(dataset, image_column, _datasets_turns()))

        watch = TransformWatch(
            lambda: dataset._format_kwargs.get("transform") if transform is None else transform,
            translate_now,
        )
        pipe, dtype = watch.translated
    all_rows = None if rows == list(range(offset)) else rows
    table = ArrowSource(
        files=files, rows=all_rows, image_column=image_column, label_column=label_column, unlabelled=unlabelled or encoded
    )
    classes = list(features[label_column].names) if label_column and isinstance(features[label_column], ClassLabel) else None
    # `datasets` turns each image by its EXIF orientation as it decodes it; so does the loader
    # (not an image the function opens from its bytes: Pillow's open does not turn it).
    turned = _datasets_turns() and not encoded
    source = {"source": table, "sample_keys": keys, "watch": watch, "exif_orientation": turned}
    if rows_now is not None:
        source["row_function"] = rows_now
        source["draws_per_batch"] = rows_now.per_batch
        if rows_now.more:
            source["more"] = rows_now.more
    return source, pipe, dtype, classes


class Rows:
    """The `_hf_rows.RowFunction` a loader runs on each batch: the one the last translation of
    the dataset's function made (the `TransformWatch` translates it again at each epoch's
    start)."""

    function = None
    #: The table's other image columns the function hands a transform, each with its
    #: pipeline (`_options.MoreImages`), made by loaders of their own (`_cores`).
    more: tuple = ()
    #: The column of masks an albumentations `Compose` is given with the images
    #: (`_segmentation.TableMasks`), or None.
    masks = None
    #: The samples of a batch share their draws, and each sample's images too: the function
    #: hands the stacked batch to one random transform (`_hf_joint`).
    per_batch = False


def _path_column(dataset) -> str | None:
    """The string column of `dataset` whose values name image files, or None."""
    import os

    from ._probe import size_of

    def names_image(value) -> bool:
        return isinstance(value, str) and os.path.isfile(value) and size_of(value) is not None

    return _image_column_of(dataset, ("string", "large_string"), names_image, "name image files")


def _bytes_column(dataset) -> str | None:
    """The binary column of `dataset` whose values are encoded images, or None."""
    from ._probe import mode_of

    def encodes_image(value) -> bool:
        return isinstance(value, bytes) and mode_of(data=value) is not None

    return _image_column_of(dataset, ("binary", "large_binary"), encodes_image, "hold encoded images")


def _image_column_of(dataset, dtypes: tuple, is_image, what: str) -> str | None:
    """The one column of `dataset` of a `Value` type among `dtypes` whose first value that is
    not null (of `_rows_to_check`'s rows) `is_image`; None where none is; `Unfit` where
    several are (`what` they all do, for the message)."""
    from datasets import Value

    raw = dataset.with_format(None)
    named = []
    for key, feature in dataset.features.items():
        if not (isinstance(feature, Value) and feature.dtype in dtypes):
            continue
        values = raw.select_columns([key])
        first = next((v for v in (values[row][key] for row in _rows_to_check(len(raw))) if v is not None), None)
        if first is not None and is_image(first):
            named.append(key)
    if len(named) > 1:
        raise Unfit(f"the dataset's columns {named} all {what} (hpuload reads one image a row)", FallbackReason.DATASET)
    return named[0] if named else None


def _path_table_source(dataset, column: str):
    """`hf_source` for a table whose column `column` holds the images' paths and whose
    function reads them (torchvision's `read_image`/`decode_image` or Pillow's `Image.open`)
    and applies a transform to each, making the rest of each sample from the other columns
    (transformers' `run_clip.py`: token ids made beforehand by `map`). The files are read as
    a list of paths in the dataset's order; the function runs on each batch with the reads
    and the transform stood in for (`_hf_rows`), checked first on five rows. What the reader
    hands the transform decides what the transform runs on: torchvision's uint8 tensor (as
    after `PILToTensor`) or a PIL image, in RGB or, when every file is RGB, in its own mode.
    Neither reader turns an image by its EXIF orientation: nor does the loader."""
    import os

    from torchvision import transforms as v1

    from ._hf_rows import RowFunction
    from ._options import SamplesSource
    from ._transforms import steps

    T = FallbackReason.TRANSFORM
    raw = dataset.with_format(None).select_columns([column])
    paths = [p if p is not None else "" for p in raw[column]]
    rows_now = Rows()
    common: dict = {}

    def translate_rows():
        found = _hf_transform(dataset, None)
        fn, function = dataset._format_kwargs.get("transform"), rows_now.function
        if function is None or function.fn is not fn or function.found is not found:
            function = RowFunction(dataset, column, found, reads="paths")
            function.check(_rows_to_check(len(dataset)), _draws_from)
            if function.unconverted:
                odd = next(((k, m) for k, p in enumerate(paths) if (m := _file_mode(p)) not in (None, "RGB")), None)
                if odd is not None:
                    raise Unfit(
                        f"{function.name} (the dataset's transform) hands it each image in its own mode, and row "
                        f"{odd[0]} ({paths[odd[0]]}) is in mode {odd[1]}, while hpuload decodes every image to RGB "
                        "(read the images in RGB in it to run natively)",
                        T,
                    )
            rows_now.function = function
        tensor = function.form[column][0]
        runs = v1.Compose([v1.PILToTensor(), *steps(found)]) if tensor else found
        return _sized(runs, common, lambda: _files_size(paths))

    watch = TransformWatch(lambda: dataset._format_kwargs.get("transform"), translate_rows)
    pipe, dtype = watch.translated
    samples = [(os.path.abspath(p) if p else p, 0) for p in paths]
    source = {"source": SamplesSource(samples, []), "sample_keys": None, "watch": watch, "exif_orientation": False}
    source["row_function"] = rows_now
    return source, pipe, dtype, None


def _file_mode(path: str) -> str | None:
    """The mode of the image at `path`, read from its header (None where it cannot be: a
    damaged file, which the loader names and replaces)."""
    from ._probe import mode_of

    try:
        return mode_of(path=path)
    except Exception:  # noqa: BLE001 - unreadable: the loader's to name
        return None


def _files_size(paths: list[str]) -> tuple[int, int] | None:
    """`(height, width)` every file of `paths` has, from the headers (an unreadable one has no
    say), or None where two differ or none can be read."""
    from ._probe import size_of

    first = None
    for path in paths:
        size = size_of(path) if path else None
        if size is None:
            continue
        if first is not None and size != first:
            return None
        first = first or size
    if first is None:
        return None
    width, height = first
    return height, width


def _sized(transform, common: dict, find_size):
    """`translate(transform)` for a table whose images may all have one size
    (`_arrays.one_size`: `ToTensor` and `Normalize` alone over CIFAR in `datasets`' format,
    or a resize of the shorter side alone), that size found by `find_size()` once
    (`common["size"]`)."""
    from ._arrays import one_size

    translated, wanted, why = one_size(translate, transform, common.get("size"))
    if wanted is None:
        return translated
    if "size" not in common:
        common["size"] = find_size()
    if common["size"] is None:
        if why is not None:
            raise why
        raise Unfit(
            "the transform gives each image a size of its own (no crop, or a resize of the shorter side alone) and "
            "the table's images differ in size, or one's size cannot be read: a different shape per image, as torch's "
            "loader gives them",
            FallbackReason.TRANSFORM,
        )
    return one_size(translate, transform, common["size"])[0]


def _common_size(dataset, image_column: str, turned: bool) -> tuple[int, int] | None:
    """`(height, width)` every row's image has, as `datasets` gives it (turned by its EXIF
    orientation when `turned`), read from the images' headers (one that cannot be read is a
    damaged image, which the loader names and replaces: it has no say); None where two differ
    or none can be read."""
    from . import _hpuload
    from ._probe import header_facts, size_of

    def read(path=None, data=None):
        if data is not None:
            view = memoryview(data)
            facts = header_facts(lambda offset: bytes(view[offset : offset + 4096]))
            size = facts[1:] if facts is not None and facts[1] and facts[2] else None
            if size is None:
                import io

                from PIL import Image

                try:
                    with Image.open(io.BytesIO(bytes(view))) as im:
                        size = im.size
                except Exception:
                    return "unreadable"
            whole = bytes(view) if turned else None
        else:
            size = size_of(path)
            if size is None:
                return "unreadable"
            whole = None
            if turned:
                with open(path, "rb") as f:
                    whole = f.read()
        if whole is not None and _hpuload.exif_orientation(whole) >= 5:
            size = (size[1], size[0])
        return size

    sizes: list = []

    def differs(size):
        if size == "unreadable":  # a damaged image: the loader names it and replaces its row
            return None
        if sizes and size != sizes[0]:
            return True
        if not sizes:
            sizes.append(size)
        return None

    if _first_row(dataset, image_column, differs, read) is not None or not sizes:
        return None
    width, height = sizes[0]
    return height, width


def _datasets_turns() -> bool:
    """Whether the installed `datasets` turns each image upright by the EXIF orientation it
    carries as it decodes it (`ImageOps.exif_transpose` in `Image.decode_example`: from 2.19)."""
    import datasets

    try:
        version = tuple(int(part) for part in datasets.__version__.split(".")[:2])
    except ValueError:  # a development version: a current one
        return True
    return version >= (2, 19)


def _arrow_rows(path: str) -> int:
    import pyarrow as pa

    with pa.memory_map(path) as source:
        return sum(b.num_rows for b in pa.ipc.open_stream(source))


class _AppliesCheck:
    """Whether the dataset's transform function does what hpuload runs in its place: for five
    rows spread over the table, the image tensor it gives is the transform read from it
    (`_hf_transform`) applied to the row's image converted to RGB, under the same draws of
    the global generators (seeded anew for each row), and the label is the row's own. A function that does more (turns,
    crops or converts the image first, scales the tensor after, maps the labels) or less
    raises `Unfit` naming the row and what differs, rather than being silently run as that
    transform alone. Run again whenever the function or the transform object is another
    (the `TransformWatch` re-translates at each epoch's start); the generators are left as
    they were."""

    def __init__(self, dataset, image_column: str, label_column: str, keys: tuple[str, str]):
        self.dataset, self.image_column, self.label_column, self.keys = dataset, image_column, label_column, keys
        self.seen: tuple | None = None

    def __call__(self, found, transform) -> None:
        """Checks `transform`, which runs for `found` (the object the function reaches: itself,
        or an image processor's steps, compared within float rounding)."""
        fn = self.dataset._format_kwargs.get("transform")
        processor = found is not transform
        # A processor's steps are made anew each time: they are the same when they read alike.
        seen = (fn, found, repr(transform) if processor else None)
        if self.seen is not None and self.seen[0] is fn and self.seen[1] is found and self.seen[2] == seen[2]:
            return
        within = 1e-5 if processor else 0.0
        self._check(fn, transform, within)
        if processor and getattr(found, "do_convert_rgb", None):
            self._check_transparency(fn, found, transform)
        self._check_modes(fn, transform, within)
        self.seen = seen

    def _check_modes(self, fn, transform, within: float) -> None:
        """hpuload decodes every image to RGB, as `convert("RGB")` does; a function that hands
        the transform each image in its own mode gives a grey image one channel and an RGBA
        one four. Shown by handing the function a batch of one row whose image is grey,
        a palette, RGBA (opaque) and CMYK in turn: where every result is the transform of the
        image in RGB, the function converts; else every image the dataset reads must be RGB
        (`_first_not_rgb`), or the loader goes to torch's."""
        raw = self.dataset.with_format(None)
        if not len(raw):
            return
        first = rgb = None
        for row in _rows_to_check(len(raw)):
            try:
                first = raw[row]
                rgb = first[self.image_column].convert("RGB").resize((64, 48))
                break
            except Exception:  # a damaged row: the loader names and skips it when read
                continue

        def through_function(image):
            batch = {k: [v] for k, v in first.items()}
            batch[self.image_column] = [image]
            return fn(batch)[self.keys[0]][0]

        if rgb is not None and alike_in_each_mode(
            rgb, through_function, lambda image: transform(image.convert("RGB")), lambda a, b: _alike(a, b, within)
        ):
            return
        odd = self._first_not_rgb()
        if odd is not None:
            name = getattr(fn, "__name__", type(fn).__name__)
            raise Unfit(
                f"{name} (the dataset's transform) hands it each image in its own mode, and row {odd[0]} is "
                f"in mode {odd[1]}, while hpuload decodes every image to RGB (convert the images to RGB in "
                "it to run natively)",
                FallbackReason.TRANSFORM,
            )

    def _first_not_rgb(self) -> tuple[int, str] | None:
        """The first row the dataset reads whose image is not RGB, with its mode (`_first_row`)."""
        return _first_row(self.dataset, self.image_column, lambda mode: mode if mode not in (None, "RGB") else None)

    def _check_transparency(self, fn, processor, transform) -> None:
        """A processor that converts to RGB itself (`do_convert_rgb`) lays transparent pixels
        on white, where hpuload's decode drops the alpha as `convert("RGB")` does: the two
        agree only when the function converts each image first. Shown by handing the function
        a batch of the first row whose image is half transparent."""
        from PIL import Image

        name = getattr(fn, "__name__", type(fn).__name__)
        raw = self.dataset.with_format(None)
        if not len(raw):
            return
        batch = {k: [v] for k, v in raw[0].items()}
        # Textured, its left half transparent.
        pixels = bytes(
            (x * 5 + y * 3) % 200 if c < 3 else (0 if x < 32 else 255)
            for y in range(48) for x in range(64) for c in range(4)
        )
        batch[self.image_column] = [Image.frombytes("RGBA", (64, 48), pixels)]
        try:
            got = fn(batch)[self.keys[0]][0]
        except Exception as e:
            raise Unfit(
                f"{name} could not be run on an image with transparency ({type(e).__name__}: {e})",
                FallbackReason.TRANSFORM,
            ) from None
        want = transform(batch[self.image_column][0].convert("RGB"))
        if not (isinstance(got, torch.Tensor) and got.shape == want.shape and bool(((got - want).abs() <= 1e-5).all())):
            raise Unfit(
                f"{name} hands {type(processor).__name__} images it lays on white where they are transparent "
                "(do_convert_rgb); hpuload drops the alpha as convert('RGB') does: convert each image first",
                FallbackReason.TRANSFORM,
            )

    def _check(self, fn, transform, within: float) -> None:
        from ._behaviour import generators_kept
        from ._watch import describe

        T = FallbackReason.TRANSFORM
        name = getattr(fn, "__name__", type(fn).__name__)
        key, label = self.keys[:2]
        raw = self.dataset.with_format(None)
        n = len(self.dataset)
        with generators_kept():
            # Each row under other draws: a step the function takes only on some draws shows
            # on some rows.
            ran, failure = 0, None
            for row in _rows_to_check(n):
                try:
                    _draws_from(row + 1)
                    got = self.dataset[row]
                    original = raw[row]
                    _draws_from(row + 1)
                    want = transform(original[self.image_column].convert("RGB"))
                except Exception as e:  # a damaged row: the loader names and skips it when read
                    failure = failure or f"row {row}: {type(e).__name__}: {e}"
                    continue
                ran += 1
                if not _same_label(got.get(label), original.get(self.label_column)):
                    raise Unfit(
                        f"{name} (the dataset's transform) gives row {row} the label {got.get(label)!r}, "
                        f"the table {original.get(self.label_column)!r}: hpuload reads the label column as it is",
                        T,
                    )
                if not _alike(got.get(key), want, within):
                    raise Unfit(
                        f"{name} (the dataset's transform) gives row {row} another {key!r} than "
                        f"{describe(transform)} of its image in RGB: it does more than apply that transform, "
                        "which is all hpuload would run; pass transform= to say it is",
                        T,
                    )
            if n and not ran:
                raise Unfit(f"{name} (the dataset's transform) could not be checked on any row ({failure})", T)


def alike_in_each_mode(rgb, got_for, want_for, same) -> bool:
    """Whether `got_for(image)` and `want_for(image)` are `same`, each under one seed, for
    `rgb` (a small RGB PIL image) made grey, a palette, RGBA (opaque) and CMYK in turn: code
    that converts each image to RGB itself. The global generators are left as they were."""
    from ._behaviour import generators_kept

    with generators_kept():
        for seed, mode in enumerate(("L", "P", "RGBA", "CMYK")):
            image = rgb.convert(mode)
            try:
                _draws_from(seed)
                got = got_for(image)
                _draws_from(seed)
                want = want_for(image)
            except Exception:  # noqa: BLE001 - refuses some mode: it does not convert
                return False
            if not same(got, want):
                return False
    return True


def _draws_from(seed: int) -> None:
    """Python's, torch's and NumPy's global generators seeded alike (a row's draws)."""
    import random

    import numpy as np

    torch.default_generator.manual_seed(seed)  # the CPU generator alone: a device one is the user's
    random.seed(seed)
    np.random.seed(seed)


def _alike(got, want, within: float) -> bool:
    """Two tensors of one shape and dtype, equal (or within `within`, for a processor's floats)."""
    return (
        isinstance(got, torch.Tensor)
        and isinstance(want, torch.Tensor)
        and got.shape == want.shape
        and got.dtype == want.dtype
        and (torch.equal(got, want) if not within else bool(((got - want).abs() <= within).all()))
    )


def _first_row(dataset, image_column: str, test, read=None) -> tuple[int, Any] | None:
    """The first row `dataset` reads for which `test(mode)` (`_probe.mode_of`
    of its image, read from the image's header in the table: its bytes where they are
    embedded, else its file; about 8 µs a row embedded) gives something, with that; None
    where it gives None for every row. `read(path=..., data=...)` reads something else of
    the image than its mode."""
    import bisect

    import numpy as np
    import pyarrow as pa

    from ._probe import mode_of

    read = read or mode_of
    column = dataset.data.column(image_column)
    chunks = [c for c in column.chunks if len(c)]
    starts, at = [], 0
    for c in chunks:
        starts.append(at)
        at += len(c)
    indices = dataset._indices
    rows = indices.column(0).to_pylist() if indices is not None else range(at)
    opened: dict[int, tuple] = {}

    def chunk(k: int) -> tuple:
        """A chunk's bytes (offsets, data, validity) and paths, without a Python object per row."""
        if k not in opened:
            c = chunks[k]
            if pa.types.is_binary(c.type) or pa.types.is_large_binary(c.type):
                fields = {"bytes": c, "path": None}  # a column of encoded images
            else:
                fields = {c.type.field(i).name: a for i, a in enumerate(c.flatten())}
            b = fields["bytes"]
            data = b.buffers()[2]
            opened.clear()  # rows come mostly in order: one chunk's arrays at a time
            opened[k] = (
                np.frombuffer(b.buffers()[1], dtype=np.int64 if pa.types.is_large_binary(b.type) else np.int32)[b.offset : b.offset + len(b) + 1],
                memoryview(data) if data is not None else None,
                b.is_valid().to_numpy(zero_copy_only=False),
                fields["path"],
            )
        return opened[k]

    for row, global_row in enumerate(rows):
        k = bisect.bisect_right(starts, global_row) - 1
        j = global_row - starts[k]
        offsets, data, valid, paths = chunk(k)
        if valid[j] and data is not None:
            mode = read(data=data[offsets[j] : offsets[j + 1]])
        elif paths is not None and paths[j].is_valid:
            mode = read(path=paths[j].as_py())
        else:
            continue
        found = test(mode)
        if found is not None:
            return row, found
    return None


def _rows_to_check(n: int) -> list[int]:
    """Five rows spread over a table of `n`, first, middle and last among them."""
    return sorted({0, n // 4, n // 2, 3 * n // 4, n - 1}) if n else []


def _same_label(a, b) -> bool:
    """Labels equal as numbers (a function may give a tensor or a numpy integer for one)."""
    try:
        return int(a) == int(b) and float(a) == float(b)
    except (TypeError, ValueError):
        return a == b


def _first_sample(dataset) -> tuple[Any, str | None]:
    """`(sample, failure)`: what the dataset gives for the first of `_rows_to_check` it can
    run on (a damaged row is the loader's to name and skip), None if none, and the first
    failure met. The global generators are left as they were, so that a script's later draws
    (model initialisation) are those it gets with torch's loader."""
    import random

    states = (torch.get_rng_state(), random.getstate())
    failure = None
    try:
        for row in _rows_to_check(len(dataset)):
            try:
                return dataset[row], failure
            except Exception as e:
                failure = failure or f"row {row}: {type(e).__name__}: {e}"
    finally:
        torch.set_rng_state(states[0])
        random.setstate(states[1])
    return None, failure


def _makes_more(first, image_column: str, label_column: str) -> bool:
    """Whether the dataset's function gives its samples (`first`, one of them) other keys than
    one image tensor, the label (as the column's name, `labels` or `label`) and the image
    column: the token ids of a caption, a table's other columns, or the image tensor alone
    (diffusers' `train_unconditional.py` returns `{"input": images}` of a labelled folder).
    Those come from the function itself (`_hf_rows`)."""
    if not isinstance(first, dict):
        return False
    tensors = [k for k, v in first.items() if isinstance(v, torch.Tensor) and v.dim() == 3]
    labels = (label_column, "labels", "label")
    known = {*tensors[:1], image_column, *labels}
    return len(tensors) == 1 and (any(k not in known for k in first) or not any(k in first for k in labels))


def _hf_sample_keys(dataset, label_column: str, sampled=None) -> tuple[str, str, bool]:
    """The keys of the image tensor and the label in what the dataset's transform returns,
    and whether the label's comes first (the order the loader's dicts keep), learnt from its
    first sample (or the first of `_rows_to_check` it can run on: a damaged
    row is the loader's to name and skip); `sampled`: `_first_sample`'s answer, when known."""
    T = FallbackReason.TRANSFORM
    first, failure = sampled if sampled is not None else _first_sample(dataset)
    if failure is not None and first is None:
        raise Unfit(f"the dataset's transform could not be run on any row checked ({failure})", T)
    if not isinstance(first, dict):
        raise Unfit(f"the dataset's transform returns a {type(first).__name__}, not a dict", T)
    tensors = [k for k, v in first.items() if isinstance(v, torch.Tensor) and v.dim() == 3]
    # The label under the column's name, or renamed as models take it (`inputs["labels"] =
    # batch["label"]`, the image processors' recipes): `_AppliesCheck` compares it with the row's.
    label = next((k for k in (label_column, "labels", "label") if k in first), None)
    if len(tensors) != 1 or label is None:
        raise Unfit(
            f"the dataset's transform returns keys {list(first)}: hpuload gives one image tensor and "
            f"{label_column!r}",
            T,
        )
    order = list(first)
    return tensors[0], label, order.index(label) < order.index(tensors[0])
