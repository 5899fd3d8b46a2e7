"""Semantic segmentation natively: torchvision's `VOCSegmentation` with the segmentation
reference's own training transforms (its `transforms.py` classes as its `presets.py` combines
them without `--use-v2`, the PIL backend): `RandomResize(min_size, max_size)`,
`RandomHorizontalFlip(flip_prob)`, `RandomCrop(size)` (after its `pad_if_smaller`: the image
padded below and to the right with 0, the mask with 255), `PILToTensor`, `ToDtype(float,
scale=True)`, `Normalize(mean, std)` (or the reference's earlier `ConvertImageDtype(float)`
for `ToDtype`, or its earlier `ToTensor` for both conversions; each conversion is checked on a
small image and mask to do what the reference's does).

The image runs as the pipeline `random_resize` (Pillow's bilinear), `random_horizontal_flip`,
`random_crop` with `pad_end`, `normalize`; each sample's mask is moved by the same drawn plan
(`SamplePlan.resized_crop`) in `_hpuload.segmentation_masks`: Pillow's nearest resize of the
palette indices, the flip, the padding with 255, the crop, as the int64 tensor the reference's
`PILToTensor` makes. The draws are hpuload's own (seeded per sample), with the reference's
distributions: the size uniform over `min_size..=max_size`, the flip with its probability,
the crop's offset uniform over the padded resize.

The evaluation preset (`RandomResize(base_size, base_size)` then the conversions, no crop)
gives each image its own size: the pipeline is `random_shortest_size` with torchvision's
`Resize(size)` arithmetic (the shorter side to the size, the longer in proportion,
truncated), Pillow's bilinear, and `normalize`; each mask is resized to its image's size
(the plan's `detect.size`) by the same nearest positions, one tensor per sample.

The reference's default dataset, COCO (its `coco_utils.get_coco` without `--use-v2`:
torchvision's `CocoDetection` with `Compose([FilterAndRemapCocoCategories(CAT_LIST),
ConvertCocoPolysToMask(), preset])`, the training set in the `Subset` of images whose kept
annotations cover more than 1000 pixels), runs the same way: each image's semantic mask is made
in Rust from its objects' RLEs (pycocotools' `frPyObjects`, the reference's own step, turns
polygons into them; each pixel the largest remapped class covering it, 255 where objects
overlap), then moved like a VOC mask. The user's two COCO steps are checked against it on
real annotations before anything runs."""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

import torch

from . import _hpuload, _probe
from ._detection import _flatten, _own, _steps, _unwrap_subsets
from ._options import CocoSource, SamplesSource
from ._reference_steps import check_pad_if_smaller, check_segmentation
from ._transforms import PIL_BLENDS, Unsupported

#: What the reference's `RandomCrop` pads a mask with (its `pad_if_smaller(target, size,
#: fill=255)`): the loss's ignore index.
MASK_FILL = 255
#: The size given to an image whose size cannot be read (a damaged file): the loader names
#: it and replaces its sample as it reads it, so no plan or mask is ever made at this size.
DAMAGED_SIZE = (1, 1)


class Unfit(Exception):
    """The dataset is a segmentation dataset hpuload cannot take (the message says why)."""


def is_segmentation(dataset) -> bool:
    """torchvision's own `VOCSegmentation`, its `SBDataset` in `mode="segmentation"` (the
    reference's `--dataset voc_aug`), or its `Cityscapes` with the one target type
    `"semantic"` (each image's labelIds PNG); a subclass may load differently."""
    import torchvision

    if type(dataset) is torchvision.datasets.SBDataset:
        return getattr(dataset, "mode", None) == "segmentation"
    if type(dataset) is torchvision.datasets.Cityscapes:
        return list(getattr(dataset, "target_type", ())) == ["semantic"]
    return type(dataset) is torchvision.datasets.VOCSegmentation


def _mask_files(dataset) -> list[str]:
    """The mask file of each of `dataset.images` (a Cityscapes set lists its targets' files
    per image, one per target type)."""
    if type(dataset).__name__ == "Cityscapes":
        return [files[0] for files in dataset.targets]
    return list(dataset.masks)


def _coco_parts(dataset) -> tuple[Any, Any, Any] | None:
    """`(CocoDetection, its v2 wrapper or None, the transforms that run)` of (Subsets of)
    torchvision's own `CocoDetection`, raw or wrapped with `wrap_dataset_for_transforms_v2`;
    None for anything else (a subclass, like the detection reference's, loads its own way)."""
    from torchvision.datasets import CocoDetection

    try:
        from torchvision.tv_tensors._dataset_wrapper import VisionDatasetTVTensorWrapper
    except ImportError:  # pragma: no cover - torchvision < 0.16
        VisionDatasetTVTensorWrapper = ()
    inner, _ = _unwrap_subsets(dataset)
    wrapper = None
    if isinstance(inner, VisionDatasetTVTensorWrapper):
        wrapper, inner = inner, inner._dataset
    if type(inner) is not CocoDetection:
        return None
    return inner, wrapper, (wrapper if wrapper is not None else inner).transforms


def is_coco_segmentation(dataset) -> bool:
    """(Subsets of) a `CocoDetection` whose transforms start as the segmentation reference's
    COCO set's do: without `--use-v2` its `ConvertCocoPolysToMask`, after its
    `FilterAndRemapCocoCategories` or alone; with it, wrapped for transforms v2, its
    `CocoDetectionToVOCSegmentation` (what they do is checked by `coco_source`)."""
    parts = _coco_parts(dataset)
    if parts is None or parts[2] is None:
        return False
    first = _flatten(parts[2])[:2]
    if parts[1] is not None:
        return bool(first) and _own(first[0], "CocoDetectionToVOCSegmentation")
    return any(_own(t, "ConvertCocoPolysToMask") for t in first)


def current_transforms(dataset):
    """The transforms a segmentation dataset applies now (those of the COCO set, or of its v2
    wrapper, in Subsets)."""
    parts = _coco_parts(dataset)
    return parts[2] if parts is not None else dataset.transforms


def translate(transforms) -> tuple[str, str, tuple[int, int] | None]:
    """`(pipeline JSON, dtype, crop (height, width))` of the reference's v1 training
    transforms, or with `crop` None of its evaluation transforms (each image its own size);
    `Unsupported` for anything else. A COCO set's first steps (its categories' filter and the
    conversion to a mask) are left out: `coco_steps` reads them."""
    if transforms is None:
        raise Unsupported("no transforms: each sample is a PIL image and mask of its own size")
    return translate_steps(coco_steps(transforms)[2])


def translate_steps(steps: list) -> tuple[str, str, tuple[int, int] | None]:
    """`translate` of the reference's steps after any COCO conversion."""
    ops: list[dict] = []
    crop = None
    tensor, dtype = False, None
    for t in steps:
        name = type(t).__name__
        if type(t).__module__.startswith("torchvision"):
            raise Unsupported(
                f"torchvision's {name} in a segmentation dataset's transforms (hpuload reads the segmentation "
                "reference's own classes)"
            )
        if _own(t, "RandomResize"):
            lo, hi = getattr(t, "min_size", None), getattr(t, "max_size", None)
            if ops or not all(isinstance(v, int) and v > 0 for v in (lo, hi)) or lo > hi:
                raise Unsupported(f"RandomResize({lo!r}, {hi!r}) (hpuload takes one, first, of sizes min <= max)")
            check_segmentation(t, name)
            ops.append({"op": "random_resize", "min_size": lo, "max_size": hi + 1, "interpolation": "pil_bilinear"})
        elif _own(t, "RandomHorizontalFlip"):
            p = getattr(t, "flip_prob", None)
            if len(ops) != 1 or crop is not None or not isinstance(p, (int, float)):
                raise Unsupported("RandomHorizontalFlip away from between RandomResize and RandomCrop")
            check_segmentation(t, name)
            ops.append({"op": "random_horizontal_flip", "p": float(p)})
        elif _own(t, "RandomCrop"):
            size = getattr(t, "size", None)
            if not ops or crop is not None or tensor or not isinstance(size, int) or size <= 0:
                raise Unsupported(f"RandomCrop({size!r}) (hpuload takes one, after RandomResize, on the PIL image)")
            check_segmentation(t, name)
            crop = (size, size)
            ops.append({"op": "random_crop", "size": size, "pad_end": True, "fill": [0, 0, 0]})
        elif _own(t, "PILToTensor") or _own(t, "ToTensor"):
            if not ops or tensor or (crop is None and len(ops) != 1):
                raise Unsupported(f"{name} before the resize and crop (the tensor backend resizes otherwise than Pillow)")
            _check_conversion(t, name)
            tensor = True
            if name == "ToTensor":  # the reference's before PILToTensor and ToDtype were its steps
                dtype = "f32"
        elif _own(t, "ToDtype") or _own(t, "ConvertImageDtype"):
            if not tensor or dtype is not None:
                raise Unsupported(f"{name} away from after PILToTensor (hpuload scales uint8 images to float32 in [0, 1])")
            _check_conversion(t, name)
            dtype = "f32"
        elif _own(t, "Normalize"):
            mean, std = list(getattr(t, "mean", ())), list(getattr(t, "std", ()))
            if dtype is None or len(mean) != 3 or len(std) != 3 or any(s == 0 for s in std):
                raise Unsupported(f"Normalize({mean}, {std}) (hpuload takes three channels after ToDtype)")
            _check_conversion(t, name)
            ops.append({"op": "normalize", "mean": [float(v) for v in mean], "std": [float(v) for v in std]})
        else:
            raise Unsupported(f"{type(t).__module__}.{name} is not one of the segmentation reference's transforms hpuload runs")
    if not tensor:
        raise Unsupported("the transforms give no tensors (PIL images and masks)")
    if crop is None:
        # The evaluation preset: the resize of one size alone, each image its own size.
        resize = ops[0]
        if resize["op"] != "random_resize" or resize["max_size"] != resize["min_size"] + 1:
            raise Unsupported("a RandomResize of a drawn size without a RandomCrop (each image its own size)")
        ops[0] = {
            "op": "random_shortest_size",
            "min_size": [resize["min_size"]],
            "max_size": None,
            "as_resize": True,
            "interpolation": "pil_bilinear",
        }
    return json.dumps({"name": "segmentation-reference", "ops": ops}), dtype or "u8", crop


def _check_conversion(t, name: str) -> None:
    """The user's conversion step `t` (the reference's `PILToTensor`, `ToTensor`, `ToDtype`,
    `ConvertImageDtype` or `Normalize`, by name) does what the reference's does to a small
    image and mask of each level's extremes; else `Unsupported`."""
    import numpy as np
    import PIL.Image
    from torchvision.transforms import functional as F

    image = PIL.Image.fromarray(np.array([[[0, 128, 255], [1, 2, 3]], [[250, 9, 77], [30, 60, 90]]], np.uint8))
    mask = PIL.Image.fromarray(np.array([[0, 255], [7, 1]], np.uint8))
    as_int64 = torch.as_tensor(np.array(mask), dtype=torch.int64)
    raw = F.pil_to_tensor(image)
    scaled = F.convert_image_dtype(raw, torch.float32)
    if name in ("PILToTensor", "ToTensor"):
        given, want = (image, mask), (raw if name == "PILToTensor" else scaled, as_int64)
    elif name in ("ToDtype", "ConvertImageDtype"):
        given, want = (raw, as_int64), (scaled, as_int64)
    else:
        given = (scaled, as_int64)
        want = (F.normalize(scaled, mean=list(t.mean), std=list(t.std)), as_int64)
    try:
        got = t(*given)
    except Exception as e:
        raise Unsupported(f"{name} fails on an image and mask ({type(e).__name__}: {e})") from e
    same = (
        isinstance(got, tuple)
        and len(got) == 2
        and all(isinstance(g, torch.Tensor) for g in got)
        and all(g.dtype == w.dtype and g.shape == w.shape for g, w in zip(got, want))
        and torch.equal(got[1], want[1])
        and (got[0] - want[0]).abs().max().item() <= 1e-6
    )
    if not same:
        raise Unsupported(f"{name} does not do what the segmentation reference's does (to the image or the mask)")


def source(dataset) -> tuple[dict, str, str, "Masks"]:
    """`(source kwargs, pipeline JSON, dtype, Masks)` for a `VOCSegmentation`; `Unfit` or
    `Unsupported` naming why it cannot run natively."""
    pipeline, dtype, crop = translate(dataset.transforms)
    images, masks = list(dataset.images), _mask_files(dataset)
    name = f"{type(dataset).__name__}({dataset.root!r})"
    if type(dataset).__name__ == "SBDataset":
        sizes = []
        for image in images:
            size = _probe.size_of(image)
            sizes.append(size if size is not None else DAMAGED_SIZE)  # a damaged image: replaced as it is loaded
        read = ReadMasks(dataset, masks, sizes)
        try:
            first = next((k for k, size in enumerate(sizes) if size != DAMAGED_SIZE), None)
            if first is not None:
                read[first]  # the first mask read as the dataset reads it: an unfit kind falls back now
        except ValueError as e:
            raise Unfit(str(e)) from e
        return {"source": _image_source(images, sizes, crop, name)}, pipeline, dtype, Masks(read, sizes, crop, dataset=dataset)
    sizes = []
    for image, mask in zip(images, masks):
        # A mask whose size cannot be read (missing, or cut short) is a damaged one: it is
        # named and its sample replaced when it is loaded, as a damaged image is.
        size = _probe.size_of(image)
        if size is None:  # a damaged image: named and its sample replaced as it is loaded
            sizes.append(DAMAGED_SIZE)
            continue
        own = _probe.size_of(mask)
        if own is not None and own != size:
            raise Unfit(f"{mask} is not as large as its image {image} (each is resized to its own size)")
        why = _unfit_mask(mask) if own is not None else None
        if why is not None:
            raise Unfit(f"{mask} is {why} (hpuload reads palette PNGs and 8-bit grey ones as masks)")
        sizes.append(size)
    return {"source": _image_source(images, sizes, crop, name)}, pipeline, dtype, Masks(masks, sizes, crop, dataset=dataset)


class ReadMasks:
    """Masks that the dataset's own code reads (`SBDataset._get_target`: the `Segmentation`
    of a MATLAB file's `GTcls`, through scipy), indexable like the dataset, as
    `_hpuload.segmentation_masks` takes them: `(path, (height, width), bytes)`."""

    def __init__(self, dataset, masks: list[str], sizes: list[tuple[int, int]]):
        self.dataset = dataset
        self.masks = masks
        self.sizes = sizes

    def __len__(self) -> int:
        return len(self.masks)

    def __getitem__(self, index: int):
        import numpy as np
        import PIL.Image

        path = self.masks[index]
        try:
            mask = self.dataset._get_target(path)
        except Exception as e:
            raise ValueError(f"{path}: the dataset cannot read this mask ({type(e).__name__}: {e})") from e
        if not isinstance(mask, PIL.Image.Image) or mask.mode not in ("L", "P"):
            raise ValueError(f"{path}: a mask of {getattr(mask, 'mode', type(mask).__name__)} (hpuload takes 8-bit masks)")
        if mask.size != tuple(self.sizes[index]):
            raise ValueError(f"{path}: a mask of {mask.size}, its image is {tuple(self.sizes[index])}")
        width, height = mask.size
        return path, (height, width), np.asarray(mask, dtype=np.uint8).tobytes()


def _image_source(images: list[str], sizes: list[tuple[int, int]], crop, name: str):
    """The images, opened with `.convert("RGB")` as hpuload decodes any of them: a list of
    samples for the training preset, a COCO set without objects for the evaluation preset
    (the loader sizes each image's batch row from the sizes it gives, image `i` the
    dataset's `i`)."""
    if crop is not None:
        return SamplesSource([(path, 0) for path in images], [])
    folder = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in images]) if images else "."
    listed = [
        {"id": i + 1, "file_name": os.path.relpath(os.path.abspath(p), folder), "width": w, "height": h}
        for i, (p, (w, h)) in enumerate(zip(images, sizes))
    ]
    text = json.dumps({"images": listed, "annotations": [], "categories": []})
    return CocoSource(folder, annotations=name, text=text)


# --- The reference's COCO set ---------------------------------------------------------------


def coco_steps(transforms) -> tuple[Any, Any, list]:
    """`(FilterAndRemapCocoCategories or None, ConvertCocoPolysToMask or
    CocoDetectionToVOCSegmentation or None, the steps after them)` of a dataset's transforms."""
    steps = _steps(transforms)
    if steps and _own(steps[0], "CocoDetectionToVOCSegmentation"):
        return None, steps[0], steps[1:]
    filt = steps[0] if steps and _own(steps[0], "FilterAndRemapCocoCategories") else None
    rest = steps[1:] if filt is not None else steps
    convert = rest[0] if rest and _own(rest[0], "ConvertCocoPolysToMask") else None
    if filt is not None and convert is None:
        raise Unsupported("FilterAndRemapCocoCategories without the reference's ConvertCocoPolysToMask after it")
    return filt, convert, rest[1:] if convert is not None else rest


def coco_source(dataset) -> tuple[dict, str, str, "Masks"]:
    """`(source kwargs, pipeline JSON, dtype, Masks)` for the segmentation reference's COCO
    set (`is_coco_segmentation`); `Unfit` or `Unsupported` naming why it cannot run
    natively."""
    inner, wrapper, transforms = _coco_parts(dataset)
    _, indices = _unwrap_subsets(dataset)
    holder = wrapper if wrapper is not None else inner
    if getattr(holder, "transform", None) is not None or getattr(holder, "target_transform", None) is not None:
        raise Unsupported("transform= or target_transform= beside the COCO set's transforms")
    filt, convert, rest = coco_steps(transforms)
    if wrapper is not None:
        keys = set(getattr(wrapper, "_target_keys", ()))
        if not {"masks", "labels"} <= keys:
            raise Unsupported(f"the v2 wrapper's target_keys {sorted(keys)} lack masks or labels")
        pipeline, dtype, crop, form = translate_v2_steps(rest)
    else:
        pipeline, dtype, crop = translate_steps(rest)
        form = MaskForm()
    categories = CocoCategories.of(filt if wrapper is None else convert)
    positions = list(range(len(inner.ids))) if indices is None else list(indices)
    images = [os.path.join(inner.root, inner.coco.imgs[inner.ids[i]]["file_name"]) for i in positions]
    sizes = []
    for path in images:
        size = _probe.size_of(path)
        sizes.append(size if size is not None else DAMAGED_SIZE)  # a damaged image: replaced as it is loaded
    masks = CocoMasks(inner, positions, images, sizes, categories, wrapper)
    masks.check(convert, filt)
    name = f"CocoDetection({inner.root!r})"
    source = _image_source(images, sizes, crop, name)
    return {"source": source}, pipeline, dtype, Masks(masks, sizes, crop, form, dataset=dataset)


def retranslate_coco(dataset, masks: "Masks") -> tuple[str, str]:
    """`(pipeline JSON, dtype)` of a COCO set's transforms now, for the loader set up with
    `masks`; `Unsupported` when they make or move the masks otherwise."""
    _, wrapper, transforms = _coco_parts(dataset)
    filt, convert, rest = coco_steps(transforms)
    categories = CocoCategories.of(filt if wrapper is None else convert)
    if convert is None or not categories.same(masks.masks.categories):
        raise Unsupported("the new transforms change how the COCO set's masks are made")
    masks.masks.check(convert, filt)
    if wrapper is not None:
        pipeline, dtype, crop, form = translate_v2_steps(rest)
    else:
        (pipeline, dtype, crop), form = translate_steps(rest), MaskForm()
    if crop != masks.crop or form != masks.form:
        raise Unsupported(f"the new transforms crop {crop} ({form}), the masks were set up for {masks.crop} ({masks.form})")
    return pipeline, dtype


def _whole_mask(source, height: int, width: int) -> torch.Tensor:
    """`[height, width]` int64: the mask `source` (as `segmentation_masks` takes one) resized
    whole to that size by Pillow's nearest positions, unflipped."""
    out = torch.empty((height, width), dtype=torch.int64)
    drawn = ((height, width), (0, 0), False, False, (0, 0), (False, False))
    _hpuload.segmentation_masks([source], [drawn], height, width, MASK_FILL, out.data_ptr())
    return out


class MaskForm(NamedTuple):
    """How a path's transforms resize and hand out masks."""

    #: torch's nearest positions (v2's resize of a `tv_tensors.Mask`), else Pillow's.
    torch_nearest: bool = False
    #: The masks' dtype (v2's evaluation preset leaves them uint8).
    dtype: torch.dtype = torch.int64
    #: A resize to one `(height, width)` for every image (v2's `Resize((h, w))`), which no
    #: draw moves; None: the sample's drawn `resized_crop`.
    fixed: tuple[int, int] | None = None


def translate_v2_steps(steps: list) -> tuple[str, str, tuple[int, int], MaskForm]:
    """`(pipeline JSON, dtype, crop, MaskForm)` of the reference's `--use-v2` presets after
    `CocoDetectionToVOCSegmentation` (the PIL backend): training `RandomResize`,
    `RandomHorizontalFlip`, its `PadIfSmaller`, `RandomCrop`, `PILToTensor`, `ToDtype`,
    `Normalize`, `ToPureTensor`; evaluation `Resize((h, w))`, `ToImage`, `ToDtype`,
    `Normalize`, `ToPureTensor`. `Unsupported` for anything else."""
    from torchvision.transforms import InterpolationMode

    ops: list[dict] = []
    crop = pad = fixed = image_kind = None
    dtype, mask_dtype, pure = None, torch.uint8, False

    def v2(t, name):
        return type(t).__name__ == name and type(t).__module__.startswith("torchvision.transforms.v2")

    def pil_bilinear(t):
        # v2 may keep the mode as its string.
        mode = getattr(getattr(t, "interpolation", None), "value", getattr(t, "interpolation", None))
        return mode == InterpolationMode.BILINEAR.value and getattr(t, "antialias", None) is not False

    for t in steps:
        name = type(t).__name__
        if pure:
            raise Unsupported(f"{name} after ToPureTensor")
        if v2(t, "RandomResize") and not ops and pil_bilinear(t):
            lo, hi = t.min_size, t.max_size
            if not (isinstance(lo, int) and isinstance(hi, int) and 0 < lo < hi):
                raise Unsupported(f"RandomResize({lo!r}, {hi!r})")
            ops.append({"op": "random_resize", "min_size": lo, "max_size": hi, "interpolation": "pil_bilinear"})
        elif v2(t, "Resize") and not ops and pil_bilinear(t) and getattr(t, "max_size", None) is None:
            size = list(t.size) if isinstance(t.size, (list, tuple)) else None
            if size is None or len(size) != 2 or not all(isinstance(v, int) and v > 0 for v in size):
                raise Unsupported(f"Resize({t.size!r}) (hpuload takes the evaluation preset's (height, width))")
            fixed = crop = (size[0], size[1])
            ops.append({"op": "resize", "size": size, "interpolation": "pil_bilinear"})
        elif v2(t, "RandomHorizontalFlip") and len(ops) == 1 and ops[0]["op"] == "random_resize" and pad is None:
            ops.append({"op": "random_horizontal_flip", "p": float(t.p)})
        elif _own(t, "PadIfSmaller") and ops and ops[0]["op"] == "random_resize" and pad is None and crop is None:
            pad = (t.size, _v2_fill(t))
            check_pad_if_smaller(t)
        elif v2(t, "RandomCrop") and pad is not None and crop is None:
            size = list(t.size)
            if size != [pad[0], pad[0]] or t.padding is not None or t.pad_if_needed:
                raise Unsupported(f"RandomCrop({t.size}) after PadIfSmaller({pad[0]})")
            crop = (pad[0], pad[0])
            image_fill, mask_fill = pad[1]
            if mask_fill != MASK_FILL:
                raise Unsupported(f"PadIfSmaller pads masks with {mask_fill}, not the reference's {MASK_FILL}")
            ops.append({"op": "random_crop", "size": pad[0], "pad_end": True, "fill": [image_fill] * 3})
        elif (v2(t, "PILToTensor") or v2(t, "ToImage")) and crop is not None and image_kind is None:
            image_kind = name
        elif v2(t, "ToDtype") and image_kind is not None and dtype is None:
            mask_dtype = _check_v2_to_dtype(t, image_kind)
            dtype = "f32"
        elif v2(t, "Normalize") and dtype is not None:
            mean, std = list(t.mean), list(t.std)
            if len(mean) != 3 or len(std) != 3 or any(v == 0 for v in std) or t.inplace:
                raise Unsupported(f"Normalize({mean}, {std})")
            ops.append({"op": "normalize", "mean": [float(v) for v in mean], "std": [float(v) for v in std]})
        elif v2(t, "ToPureTensor") and dtype is not None:
            pure = True
        else:
            raise Unsupported(
                f"{type(t).__module__}.{name} where it stands is not a step of the segmentation reference's "
                "--use-v2 presets hpuload runs"
            )
    if not pure:
        raise Unsupported("the v2 transforms do not end with ToPureTensor (tv_tensors would leave them)")
    if crop is None:
        raise Unsupported("v2 transforms without a RandomCrop or a Resize to (height, width)")
    pipeline = json.dumps({"name": "segmentation-reference-v2", "ops": ops})
    return pipeline, dtype, crop, MaskForm(torch_nearest=True, dtype=mask_dtype, fixed=fixed)


def _v2_fill(t) -> tuple[int, int]:
    """`(fill of a PIL image, fill of a Mask)` of the reference's v2 `PadIfSmaller`."""
    import PIL.Image
    from torchvision import tv_tensors

    try:
        from torchvision.transforms.v2._utils import _get_fill
    except ImportError as e:  # pragma: no cover - another torchvision's layout
        raise Unsupported(f"PadIfSmaller's fills cannot be read with this torchvision ({e})") from e
    fills = []
    for kind in (PIL.Image.Image, tv_tensors.Mask):
        f = _get_fill(t.fill, kind)
        f = f[0] if isinstance(f, (list, tuple)) and len(set(f)) == 1 else f
        if not isinstance(f, (int, float)) or f != int(f) or not 0 <= f <= 255:
            raise Unsupported(f"PadIfSmaller's fill {f!r} for {kind.__name__} (hpuload pads with one level)")
        fills.append(int(f))
    return fills[0], fills[1]


def _check_v2_to_dtype(t, image_kind: str) -> torch.dtype:
    """The masks' dtype after the user's v2 `ToDtype` `t`, checked to scale the image (a plain
    tensor after `PILToTensor`, a `tv_tensors.Image` after `ToImage`) to float32 in [0, 1] and
    leave a mask's values; else `Unsupported`."""
    from torchvision import tv_tensors

    raw = torch.tensor([[[0, 128], [255, 3]]] * 3, dtype=torch.uint8)
    image = tv_tensors.Image(raw) if image_kind == "ToImage" else raw
    mask = tv_tensors.Mask(torch.tensor([[0, 255], [7, 1]], dtype=torch.uint8))
    try:
        got_image, got_mask = t(image, mask)
    except Exception as e:
        raise Unsupported(f"ToDtype fails on an image and mask ({type(e).__name__}: {e})") from e
    scaled = raw.to(torch.float32) / 255
    if got_image.dtype != torch.float32 or (got_image.as_subclass(torch.Tensor) - scaled).abs().max() > 1e-6:
        raise Unsupported(f"ToDtype({t.dtype}) does not scale the image to float32 in [0, 1]")
    if got_mask.dtype not in (torch.uint8, torch.int64) or not torch.equal(got_mask.as_subclass(torch.Tensor).long(), mask.long()):
        raise Unsupported(f"ToDtype({t.dtype}) gives masks of {got_mask.dtype}")
    return got_mask.dtype


class CocoCategories:
    """Which of an image's annotations make its mask and the class each gives: those of the
    categories `FilterAndRemapCocoCategories(categories, remap)` keeps (as their place in
    its list when remapped), or `CocoDetectionToVOCSegmentation`'s map; every annotation as
    it is without either."""

    def __init__(self, classes: dict[int, int] | None):
        self._class = classes

    @classmethod
    def of(cls, step) -> "CocoCategories":
        if step is None:
            return cls(None)
        if _own(step, "CocoDetectionToVOCSegmentation"):
            mapping = getattr(step, "COCO_TO_VOC_LABEL_MAP", None)
            if not isinstance(mapping, dict) or not all(isinstance(k, int) and isinstance(v, int) for k, v in mapping.items()):
                raise Unsupported("CocoDetectionToVOCSegmentation without the reference's COCO_TO_VOC_LABEL_MAP")
            return cls(dict(mapping))
        listed, remap = getattr(step, "categories", None), getattr(step, "remap", None)
        if not isinstance(listed, (list, tuple)) or not all(isinstance(c, int) for c in listed) or not isinstance(remap, bool):
            raise Unsupported(f"FilterAndRemapCocoCategories({listed!r}, remap={remap!r}) (hpuload takes a list of ids)")
        return cls({c: (k if remap else c) for k, c in reversed(list(enumerate(listed)))})

    def classes(self, anns: list[dict]) -> list[tuple[dict, Any]]:
        """`(annotation, class)` of those kept, in their order."""
        if self._class is None:
            return [(a, a["category_id"]) for a in anns]
        return [(a, self._class[a["category_id"]]) for a in anns if a["category_id"] in self._class]

    def same(self, other: "CocoCategories") -> bool:
        return self._class == other._class


class CocoMasks:
    """The reference's semantic mask of each image of a COCO set (indexable like the
    dataset), as `_hpuload.segmentation_masks` takes it: `(name, (height, width), [(class,
    [RLE counts, ...]), ...])`, the objects the categories keep. Without `--use-v2` an
    annotation's segmentation is what pycocotools' `frPyObjects` takes; with it (`wrapper`),
    also a compressed RLE string as it is, as the v2 wrapper reads it."""

    def __init__(self, inner, positions: list[int], images: list[str], sizes: list[tuple[int, int]], categories: CocoCategories, wrapper=None):
        self.inner = inner
        self.coco = inner.coco
        #: Each sample's place in the CocoDetection.
        self.positions = positions
        self.ids = [inner.ids[i] for i in positions]
        self.images = images
        self.sizes = sizes
        self.categories = categories
        self.wrapper = wrapper

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int):
        from pycocotools import mask as coco_mask

        image_id, path = self.ids[index], self.images[index]
        width, height = self.sizes[index]
        name = f"{path} (image {image_id})"
        objects = []
        anns = self.coco.loadAnns(self.coco.getAnnIds(image_id))
        for k, (a, value) in enumerate(self.categories.classes(anns)):
            try:
                segmentation = a["segmentation"]
                if isinstance(segmentation, dict) and list(segmentation.get("size", ())) != [height, width]:
                    raise ValueError(f"an RLE of size {segmentation.get('size')}, not the image's {[height, width]}")
                if not isinstance(value, int) or not 0 <= value <= 255:
                    raise ValueError(f"class {value!r} is no uint8 (the reference's masks are)")
                if self.wrapper is not None and isinstance(segmentation, dict) and isinstance(segmentation["counts"], str):
                    rles = [segmentation]
                else:
                    rles = coco_mask.frPyObjects(segmentation, height, width)
            except Exception as e:
                raise ValueError(
                    f"{name}: annotation {k} (id {a.get('id')}) gives no mask ({type(e).__name__}: {e})"
                ) from e
            rles = rles if isinstance(rles, list) else [rles]
            objects.append((value, [r["counts"] if isinstance(r["counts"], bytes) else str(r["counts"]).encode() for r in rles]))
        return name, (height, width), objects

    def mask(self, index: int) -> torch.Tensor:
        """`[h, w]` int64: the image's semantic mask as made here."""
        width, height = self.sizes[index]
        return _whole_mask(self[index], height, width)

    def _theirs(self, index: int, convert, filt):
        """The user's COCO steps' mask of a blank image of the sample's size, as a tensor."""
        import numpy as np
        import PIL.Image
        from torchvision import tv_tensors

        anns = self.coco.loadAnns(self.coco.getAnnIds(self.ids[index]))
        image = PIL.Image.new("RGB", self.sizes[index])
        if self.wrapper is not None:
            _, got = convert(*self.wrapper._wrapper(self.positions[index], (image, anns)))
            if not isinstance(got, tv_tensors.Mask) or got.dtype != torch.uint8:
                raise Unsupported(f"{type(convert).__name__} gives {type(got).__name__}, not the reference's uint8 Mask")
            return got.as_subclass(torch.Tensor).long()
        if filt is not None:
            image, anns = filt(image, anns)
        _, got = convert(image, anns)
        if not isinstance(got, PIL.Image.Image) or got.mode not in ("L", "P"):
            raise Unsupported(f"{type(convert).__name__} gives {type(got).__name__}, not the reference's PIL mask")
        return torch.as_tensor(np.array(got), dtype=torch.int64)

    def check(self, convert, filt, count: int = 3) -> None:
        """The user's steps give, on the images with the most kept objects (up to `count`),
        this set's masks; else `Unsupported` (their code is not the reference's)."""
        if convert is None:
            raise Unsupported("the COCO set's transforms do not start with the reference's ConvertCocoPolysToMask")
        kept = sorted(
            range(len(self.ids)),
            key=lambda i: -len(self.categories.classes(self.coco.loadAnns(self.coco.getAnnIds(self.ids[i])))),
        )[:count]
        for i in kept:
            try:
                theirs = self._theirs(i, convert, filt)
            except Unsupported:
                raise
            except Exception as e:
                raise Unsupported(f"the COCO steps fail on image {self.ids[i]} ({type(e).__name__}: {e})") from e
            if not torch.equal(theirs, self.mask(i)):
                raise Unsupported(f"{type(convert).__name__} does not give the reference's mask of image {self.ids[i]}")


def _unfit_mask(path: str) -> str | None:
    """Why the mask file at `path` is none `_hpuload.segmentation_masks` reads as Pillow does
    (from its PNG header), or None."""
    try:
        with open(path, "rb") as f:
            head = f.read(26)
    except OSError as e:
        return f"unreadable ({e.strerror})"
    if len(head) < 26 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return "no PNG"
    depth, colour = head[24], head[25]
    if colour == 3:
        return None  # palette indices, of any depth
    if colour == 0 and depth == 8:
        return None
    return f"a PNG of colour type {colour} and {depth} bits"


class Masks:
    """A segmentation dataset's targets: each sample's mask, moved by its drawn plan."""
    #: Not the detection reference (whose targets are built from records).
    reference = None
    #: The masks move with the image: the loader hands each sample's plan over.
    moves_masks = True

    def __init__(
        self, masks, sizes: list[tuple[int, int]], crop: tuple[int, int] | None, form: "MaskForm | None" = None, dataset=None
    ):
        #: The dataset itself: a replacement for a sample whose mask cannot be made, when no
        #: other sample of its batch has one, is the dataset's own sample.
        self.dataset = dataset
        #: Each sample's mask as `_hpuload.segmentation_masks` takes it: a PNG's path, or a
        #: COCO image's objects (`CocoMasks`).
        self.masks = masks
        #: Each image's `(width, height)`, which its plan is drawn for.
        self.sizes = sizes
        #: The training preset's crop `(height, width)` (or v2's evaluation resize); None: the
        #: evaluation preset, each image and mask its own size.
        self.crop = crop
        self.form = form if form is not None else MaskForm()
        #: The part of a sample's plan that moves its mask: the drawn resize and crop, or the
        #: evaluation resize's size.
        self.plan_key = "resized_crop" if crop is not None else "detect"

    #: The loader's `on_error` ("skip": a sample whose mask cannot be made is replaced, named;
    #: "fail": `hpuload.SampleError`), set by the loader before each batch.
    on_error = "skip"

    def _own_sizes(self, indices: list[int], plans, images: torch.Tensor) -> tuple[list[torch.Tensor], dict]:
        """The evaluation preset's masks, `[h, w]` int64 each at its image's resized size, and
        the images that replace a sample's own (`{k: [3, h, w]}`, `_replacements`)."""
        masks: list = []
        failed = []
        for k, i in enumerate(indices):
            try:
                masks.append(_whole_mask(self.masks[i], *plans(i, *self.sizes[i])["size"]))
            except Exception as e:  # a damaged mask file, an annotation that gives no mask
                masks.append(None)
                failed.append((k, e))
        own = {}
        for k, j in self._replacements(indices, failed):
            if isinstance(j, tuple):  # the dataset's own sample
                own[k], masks[k] = j
            else:
                images[k] = images[j]
                masks[k] = masks[j].clone()
        return masks, own

    def _replacements(self, indices: list[int], failed: list[tuple[int, Exception]]) -> list[tuple[int, Any]]:
        """`(k, j)`: the batch's sample `k`, whose mask could not be made, is replaced by its
        sample `j` (the next one after it whose mask was made), as a bad image is, under
        `on_error="skip"`; where no sample of the batch has a mask (a batch of one, as the
        reference evaluates with), `j` is `(image, mask)`: the dataset's own sample of the
        next index that gives one (`_own_sample`). Each is named in a `SkippedSampleWarning`,
        and `indices[k]` becomes the replacement's index (the loader's `last_indices`).
        `SampleError` under `on_error="fail"`."""
        import warnings

        from . import SampleError
        from .torch import SkippedSampleWarning

        if not failed:
            return []
        bad = {k for k, _ in failed}
        good = [k for k in range(len(indices)) if k not in bad]
        pairs = []
        for k, e in failed:
            what = f"{indices[k]} ({self._mask_name(indices[k])})"
            if self.on_error != "skip":
                raise SampleError(f"sample {what}: its mask cannot be made: {e}", self._mask_name(indices[k]), "mask")
            if good:
                j = next((g for g in good if g > k), good[0])
                index, by = indices[j], f"sample {indices[j]} of its batch"
            else:
                index, j = self._own_sample(indices[k], what, e)
                by = f"the dataset's own sample {index}"
            warnings.warn(
                f"hpuload: skipped sample {what}: its mask cannot be made; replaced by {by}. {e}",
                SkippedSampleWarning,
                stacklevel=4,
            )
            pairs.append((k, j, index))
        for k, _, index in pairs:
            indices[k] = index
        return [(k, j) for k, j, _ in pairs]

    def _own_sample(self, index: int, what: str, error: Exception) -> tuple[int, tuple]:
        """`(index, (image, mask))`: the dataset's own sample of the first index after
        `index` that gives one (up to 16 tried), its draws seeded by that index (repeatable,
        the caller's generators put back); `SampleError` when none does."""
        from . import SampleError
        from ._reference_steps import _under_seed

        n = len(self.dataset) if self.dataset is not None else 0
        for step in range(1, min(16, n)):
            other = (index + step) % n
            pair = self._own_pair(_under_seed(self.dataset.__getitem__, (other,), other))
            if pair is not None:
                return other, pair
        raise SampleError(
            f"sample {what}: its mask cannot be made, and no other sample could replace it: {error}",
            self._mask_name(index),
            "mask",
        )

    def _own_pair(self, got) -> tuple | None:
        """`(image, mask)` of what the dataset's `__getitem__` gave (`_own_sample`), or None
        where it gave none (an error, as `_under_seed` returns it)."""
        if isinstance(got, tuple) and len(got) == 2 and all(isinstance(t, torch.Tensor) for t in got):
            return got
        return None

    def _mask_name(self, index: int) -> str:
        """The file (or COCO image) sample `index`'s mask comes from."""
        if isinstance(self.masks, list):
            return str(self.masks[index])
        if isinstance(self.masks, ReadMasks):
            return str(self.masks.masks[index])
        return str(self.masks.images[index])  # CocoMasks: the image its mask is made for

    @staticmethod
    def _images(images: torch.Tensor, masks: list[torch.Tensor]) -> list[torch.Tensor]:
        """Each image of a batch at its own size (rows `[N, E]`) as a `[3, h, w]` view."""
        return [images[k, : 3 * m.numel()].view(3, *m.shape) for k, m in enumerate(masks)]

    def _batch(self, indices: list[int], plans, images: torch.Tensor) -> torch.Tensor:
        """`[N, H, W]` masks (int64, or the form's dtype): each sample's mask as the
        reference's transforms make it (a sample whose mask cannot be made replaced in
        `images` and `indices`, `_replacements`)."""
        drawn = [self._drawn(i, plans) for i in indices]
        h, w = self.crop
        out = torch.empty((len(indices), h, w), dtype=self._made_as)

        def make(ks: list[int], into: torch.Tensor) -> None:
            self._make([self.masks[indices[k]] for k in ks], [drawn[k] for k in ks], into)

        failed = []
        try:
            make(list(range(len(indices))), out)
        except Exception:
            # A mask that cannot be made (a damaged file, an annotation that gives none):
            # each sample's alone, to name it and replace it.
            for k in range(len(indices)):
                try:
                    make([k], out[k])
                except Exception as e:
                    failed.append((k, e))
        self._drawn_by_code(indices, out, {k for k, _ in failed})
        for k, j in self._replacements(indices, failed):
            image, mask = (images[j], out[j]) if isinstance(j, int) else j
            images[k] = image
            out[k] = mask
        return out if self.form.dtype == out.dtype else out.to(self.form.dtype)

    #: The Dataset's draws, where its own code draws each sample's flips (`_probe.DrawnExtras`,
    #: set by the loader before each batch); None: it draws none.
    drawn = None

    def _drawn_by_code(self, indices: list[int], out: torch.Tensor, failed: set[int]) -> None:
        """Where the Dataset's code flips each image and its mask by draws of its own
        (`drawn`): the masks its run flipped are flipped in `out` (as their images were), and
        those of the samples its own code made (the strays: a run that drew another file or
        step) are its own masks."""
        drawn = self.drawn
        if drawn is None or drawn.masks is None:
            return
        for slot, (horizontal, vertical) in drawn.flips(indices).items():
            dims = [d for d, on in ((-1, horizontal), (-2, vertical)) if on]
            if slot not in failed:
                out[slot] = out[slot].flip(dims)
        for slot in drawn.strays(indices):
            made = drawn[indices[slot]]
            mask = torch.as_tensor(made[0]) if made else None
            if mask is None or mask.numel() != out[slot].numel() or mask.dtype != out.dtype:
                got = f"{tuple(mask.shape)} {mask.dtype}" if mask is not None else "none"
                raise RuntimeError(
                    f"hpuload: {self._mask_name(indices[slot])}: the Dataset's code drew another file or step than "
                    f"when probed and made a mask of {got} where the batch holds {tuple(out[slot].shape)} {out.dtype}"
                )
            out[slot] = mask.reshape(out[slot].shape)

    #: What a mask's padding shows.
    fill = MASK_FILL
    #: The dtype `_make` writes.
    _made_as = torch.int64

    def _make(self, sources: list, drawn: list, into: torch.Tensor) -> None:
        """`sources`' masks moved as `drawn` says, written into `into` (`[n, H, W]`)."""
        h, w = self.crop
        _hpuload.segmentation_masks(sources, drawn, h, w, self.fill, into.data_ptr(), torch_nearest=self.form.torch_nearest)

    def _drawn(self, index: int, plans) -> tuple:
        """Sample `index`'s move of its mask, as `_hpuload.segmentation_masks` takes it."""
        if self.form.fixed is not None:
            return (self.form.fixed, (0, 0), False, False, (0, 0), (False, False))
        d = plans(index, *self.sizes[index])
        return (tuple(d["resized"]), tuple(d["at"]), bool(d.get("hflip")), bool(d.get("vflip")), (0, 0), (False, False))

    def static(self, images: torch.Tensor, records: Any, indices: list[int], plans=None):
        """Without a collate_fn: `[images, masks]`, what `default_collate` makes of the pairs
        (of images of their own sizes: stacked when they have one size, else torch's error)."""
        if self.crop is None:
            import torch.utils.data as tud

            return tud.default_collate(self.samples(images, records, indices, plans))
        masks = self._batch(indices, plans, images)
        return [images, masks]

    def samples(self, images: torch.Tensor, records: Any, indices: list[int], plans=None) -> list[tuple]:
        """Per sample `(image, mask)` as the dataset returns it, for the user's collate_fn."""
        if self.crop is None:
            masks, own = self._own_sizes(indices, plans, images)
            views = self._images(images, [m if k not in own else m[:0] for k, m in enumerate(masks)])
            return [(own.get(k, view), mask) for k, (view, mask) in enumerate(zip(views, masks))]
        masks = self._batch(indices, plans, images)
        return [(images[k], masks[k]) for k in range(len(indices))]


class MaskSteps(NamedTuple):
    """How a table's mask moves with its image (`TableMasks`): an albumentations `Compose`
    called with a mask (`compose(image=..., mask=...)`, `_albumentations.translate_with_mask`)
    cuts it from the image's padded crop (`fill` where the padding shows) or its crop of a
    resize (OpenCV's nearest positions; flips between them), or resizes it with
    the image (`resized`: OpenCV's nearest positions; `placed`: the letterbox, padded centred
    after), and flips it as the image's flips after the crop or resize fell; a Segformer image processor given segmentation maps
    (`_hf._segformer_mask_steps`) resizes it to its size by torch's nearest-exact positions,
    whatever the image's size. Its values are first mapped by `table` (a leading
    `Lambda(mask=fn)`: `fn` of every byte; the processor's `do_reduce_labels`)."""

    #: The crop's or the resize's `(height, width)`.
    crop: tuple[int, int]
    #: `fill_mask` of the padding.
    fill: int
    #: 256 bytes (a `torch.uint8` tensor), or None: the values as they are.
    table: Any
    #: A resize to `crop` (an evaluation transform, the processor's), not a crop.
    resized: bool = False
    #: The resize's nearest positions, as `_hpuload.byte_masks` names them.
    nearest: str = "pillow"
    #: The masks' dtype as handed out (`ToTensorV2`'s uint8, the processor's int64).
    dtype: torch.dtype = torch.uint8
    #: The mask must have its image's size (albumentations refuses other pairs).
    sized: bool = True
    #: The image's flips after its crop or resize move the mask too (a `Compose`'s do; a
    #: transform of the image alone before an image processor does not).
    flipped: bool = True
    #: The letterbox (`LongestMaxSize` then `PadIfNeeded`): the mask resized as the image and
    #: placed where the plan placed it (`placed`), `fill` around it; `crop` is the output.
    placed: bool = False
    #: A warp after the crop or resize (albumentations' `Rotate`, `Affine`, `ShiftScaleRotate`:
    #: by the image's matrix, nearest, `fill` where its constant border shows), a transpose or
    #: a quarter turn moves the mask, in the order of the image's flips (`TableMasks._moved`).
    warped: bool = False
    #: With `resized`: the mask is cut to the window the image's plan cut (its `crop`: a
    #: `RandomResizedCrop`'s) before its resize.
    window: bool = False
    #: A crop of the image itself (torchvision v2's `CenterCrop` or `RandomCrop` without a
    #: resize): cut at the plan's `crop` window, `fill` where it reaches past the image (a
    #: `CenterCrop` larger than the image pads it centred).
    cropped: bool = False
    #: The Pillow filter (`Resampling`'s number: 2 `BILINEAR`, 3 `BICUBIC`, 1 `LANCZOS`, 4
    #: `BOX`, 5 `HAMMING`) the resize blends a grey mask's values by, as Pillow's resize of a
    #: grey image does (torchvision's `Resize` of a PIL mask in mode "L", given no `NEAREST`:
    #: bilinear); 0: nearest positions. A palette file as stored is still resized by nearest
    #: (Pillow's rule for palette images).
    blend: int = 0


#: torchvision v2's steps that move a `tv_tensors.Mask` as they move the image (nearest, by
#: torch's positions where they resize), as `v2_mask_steps` follows them.
_V2_MOVING = (
    "RandomResizedCrop",
    "Resize",
    "CenterCrop",
    "RandomCrop",
    "RandomHorizontalFlip",
    "RandomVerticalFlip",
    "RandomRotation",
    "RandomAffine",
)
#: Of those, the warps: after the crop or resize, each mask is warped nearest by the image's
#: drawn parameters (`segment::MaskMove::TorchWarp`).
_V2_WARPS = ("RandomRotation", "RandomAffine")


#: torchvision v2's steps that hand a `tv_tensors.Mask` out as they were given it (their colour,
#: dtype and conversion steps), checked again on a mask by `_leaves_masks`.
_V2_LEAVING = (
    "ToImage",
    "PILToTensor",
    "ToPureTensor",
    "ToDtype",
    "Normalize",
    "ColorJitter",
    "RandomPhotometricDistort",
    "Grayscale",
    "RandomGrayscale",
    "RGB",
    "GaussianBlur",
    "RandomInvert",
    "RandomPosterize",
    "RandomSolarize",
    "RandomAdjustSharpness",
    "RandomAutocontrast",
    "RandomEqualize",
    "RandomChannelPermutation",
)


def _v2_steps(transform) -> list:
    """torchvision v2's `transform` as its steps in order, nested `Compose`s flattened."""
    from torchvision.transforms import v2

    if isinstance(transform, v2.Compose):
        return [step for t in transform.transforms for step in _v2_steps(t)]
    return [transform]


def v2_mask_steps(transform) -> MaskSteps:
    """How torchvision v2's `transform`, called as `transform(image, tv_tensors.Mask(mask))`
    by a Dataset of the user's own, moves each mask: a `RandomResizedCrop` (the mask cut to
    the image's window, then resized to its size), a `Resize` to `(height, width)`, a
    `CenterCrop` or a `RandomCrop` (unpadded, or padding if needed) of the image or an
    unpadded one of a `Resize` of it, flips anywhere among them (a flip before the resize
    flips the whole mask first: v2 resizes masks by torch's nearest positions, which a flip
    after it would not mirror), then `RandomRotation` and `RandomAffine` (`warped`); every
    other step must leave masks as they are (`_leaves_masks`: its colour, dtype and
    normalizing steps do). `Unsupported` for anything else."""
    steps = _v2_steps(transform)
    moving, rest = [], []
    for t in steps:
        name = type(t).__name__
        if not type(t).__module__.startswith("torchvision.transforms.v2"):
            raise Unsupported(f"{type(t).__module__}.{name} in the v2 transform given a mask (hpuload follows v2's steps)")
        if name not in _V2_MOVING and name not in _V2_LEAVING:
            raise Unsupported(f"v2's {name} given a mask (hpuload moves masks by crops, resizes and flips)")
        (moving if name in _V2_MOVING else rest).append(t)
    _leaves_masks(rest)
    warps = [t for t in moving if type(t).__name__ in _V2_WARPS]
    sizes = [t for t in moving if "Flip" not in type(t).__name__ and t not in warps]
    names = [type(t).__name__ for t in sizes]
    for t in warps:
        if sizes and moving.index(t) < moving.index(sizes[-1]):
            raise Unsupported(f"v2's {type(t).__name__} before the {names[-1]} of a mask (hpuload warps masks after it)")
        if getattr(t, "expand", False) or t.center is not None:
            raise Unsupported(f"v2's {type(t).__name__} with expand or a center, given a mask")

    def size_of(t) -> tuple[int, int]:
        size = t.size if isinstance(t.size, (list, tuple)) else [t.size]
        size = list(size) * 2 if len(size) == 1 else list(size)
        if len(size) != 2 or not all(isinstance(v, int) and v > 0 for v in size):
            raise Unsupported(f"{type(t).__name__}({t.size!r}) given a mask")
        return size[0], size[1]

    resized = window = cropped = False
    if names == ["RandomResizedCrop"]:
        crop, resized, window = size_of(sizes[0]), True, True
    elif names == ["Resize"] and isinstance(sizes[0].size, (list, tuple)) and len(sizes[0].size) == 2:
        if getattr(sizes[0], "max_size", None) is not None:
            raise Unsupported("Resize((height, width), max_size=...) given a mask")
        crop, resized = size_of(sizes[0]), True
    elif names in (["CenterCrop"], ["RandomCrop"], ["Resize", "CenterCrop"], ["Resize", "RandomCrop"]):
        cut = sizes[-1]
        if names[-1] == "RandomCrop" and (cut.padding is not None or cut.pad_if_needed):
            # `pad_if_needed` alone (constant) pads a short side by its shortfall at both
            # ends: the window reaches past the image by at most that, which the cut pads.
            if len(names) > 1 or cut.padding is not None or cut.padding_mode != "constant":
                raise Unsupported("a RandomCrop that pads, given a mask (hpuload pads masks by pad_if_needed alone, constant)")
        crop = size_of(cut)
        cropped = len(names) == 1  # of the image itself: its plan's window (a crop of a resize: `resized_crop`)
    else:
        raise Unsupported(
            f"v2's {', '.join(names) or 'transform without a crop or resize'} given a mask (hpuload moves masks by a "
            "RandomResizedCrop, a Resize to (height, width), or a CenterCrop or RandomCrop of the image or of its "
            "Resize, and flips)"
        )
    return MaskSteps(
        crop=crop, fill=0, table=None, resized=resized, nearest="torch", window=window, cropped=cropped, warped=bool(warps)
    )


#: torchvision's steps (by class name) an image may take beside the moves its mask follows
#: (among those its code applied itself, or in a transform given the image alone after them):
#: those that keep each pixel where it is (conversions, colour, normalizing; no flip).
_IMAGE_ALONE = _probe._SAME_SIZE - {"RandomHorizontalFlip", "RandomVerticalFlip"}


def _size_arg(size) -> tuple[int, ...]:
    """A transform's size argument as a tuple: `(side,)` for one number, else its two."""
    return (int(size),) if isinstance(size, int) else tuple(int(v) for v in size)


def functional_mask_steps(image_before: tuple, mask, transform=None, dataset=None) -> MaskSteps:
    """How a Dataset of the user's own that moves an image and its mask by torchvision's
    functionals itself (the forum's joint transforms: `resize = T.Resize(size)` given both,
    `i, j, h, w = T.RandomCrop.get_params(image, size)` then `TF.crop` of both, flips drawn
    by `random.random()` for both, `TF.to_tensor` of both) moves each mask: the steps the
    image took (`image_before`, its drawn flips apart) and those the mask took
    (`_probe.MaskArray` "functional", its flips drawn last apart) must be the same moves: a
    resize to `(height, width)`, a crop where `get_params` drew it or a centre crop, or a
    resize then one of those. The resize by Pillow's nearest positions (the mask a palette
    image, or resized with `InterpolationMode.NEAREST`), or Pillow's bilinear one of a grey
    mask (`blend`: the shared `Resize`'s default). The image may then be given a `transform` of
    its own that leaves it where it is (its conversions, colour and normalizing steps). A step
    that is a transform the Dataset holds (`self.resize(mask)`) is read as it holds it now.
    `Unsupported` for anything else."""
    from ._transforms import steps as steps_of

    as_read = not any(isinstance(s, (_probe.Resized, _probe.Applied)) for s in image_before)
    for t in steps_of(transform):
        name = type(t).__name__
        if not type(t).__module__.startswith("torchvision.transforms") or name not in _IMAGE_ALONE:
            if as_read:
                raise Unsupported(f"{name} in the image's transform, which the mask, handed out as read, does not take")
            raise Unsupported(f"{name} in the image's transform after the functionals that moved it and its mask")
    parts = _probe.mask_parts(mask.image)
    split = None if parts is None else _probe.mask_flips(parts[1])
    if split is None:
        raise Unsupported("a mask moved by steps hpuload does not move masks by")

    def held(step):
        """The transform a step is: as the Dataset holds it now, where it holds it."""
        return step.step(dataset) if step.attribute is not None else step.transform

    def moves(steps: tuple, whose: str) -> list:
        out = []
        for step in steps:
            if isinstance(step, _probe.Resized) and step.by == "pil":
                # Pillow's `.resize` of it to one size: `Resize((height, width))` with that
                # filter (for the mask, its nearest positions or blend: `_mask_move_refused`).
                out.append(("Resize", (step.height, step.width), None))
                continue
            if not isinstance(step, _probe.Applied) or step.after:
                raise Unsupported(f"{whose} changed by the code otherwise than by torchvision's functionals, with a mask")
            if step.crop is not None:
                out.append(("crop", tuple(step.crop)))
                continue
            t = held(step)
            name = type(t).__name__
            if not type(t).__module__.startswith("torchvision.transforms"):
                raise Unsupported(f"{name} the Dataset holds, given its image and its mask")
            if name in _IMAGE_ALONE:
                continue
            if name == "Resize":
                out.append(("Resize", _size_arg(t.size), getattr(t, "max_size", None)))
            elif name == "CenterCrop":
                out.append(("CenterCrop", _size_arg(t.size)))
            else:
                raise Unsupported(f"{step.name()} of the {whose}, with a mask moved by the functionals")
        return out

    image, masks = moves(image_before, "image"), moves(split[0], "mask")
    resizes = [
        s if isinstance(s, _probe.Resized) else held(s).interpolation
        for s in split[0]
        if isinstance(s, _probe.Resized) or (s.crop is None and type(held(s)).__name__ == "Resize")
    ]
    # The Pillow filter the (one) resize blends a grey mask by; 0: nearest positions.
    blend = 0
    for s in resizes:
        blend = s.filter if isinstance(s, _probe.Resized) else PIL_BLENDS.get(getattr(s, "value", s), 0)
    if image != masks:
        raise Unsupported(
            f"the mask moved otherwise than its image ({', '.join(m[0] for m in masks) or 'not at all'} against "
            f"{', '.join(m[0] for m in image) or 'not at all'})"
        )
    kinds = [m[0] for m in image]
    if not kinds:
        # Neither moved (the loader keeps each image's size, one for all: `crop` is it, set
        # once the images' headers gave it) and each mask cut as its image, whole.
        return MaskSteps(crop=None, fill=0, table=None, cropped=True, blend=blend)
    last = image[-1][1]
    if kinds == ["Resize"] and len(last) == 2 and image[0][2] is None:
        return MaskSteps(crop=tuple(last), fill=0, table=None, resized=True, blend=blend)
    if kinds in (["crop"], ["CenterCrop"]):
        return MaskSteps(crop=tuple(last) if len(last) == 2 else (last[0], last[0]), fill=0, table=None, cropped=True)
    if kinds in (["Resize", "crop"], ["Resize", "CenterCrop"]):
        return MaskSteps(crop=tuple(last) if len(last) == 2 else (last[0], last[0]), fill=0, table=None, blend=blend)
    raise Unsupported(
        f"an image and its mask moved by {', '.join(kinds) or 'nothing'} (hpuload moves them by a Resize to "
        "(height, width), a crop where get_params drew it or a centre crop, or a Resize then one of those)"
    )


def v2_mask_fill(transform) -> int:
    """What torchvision v2's `transform` pads a `tv_tensors.Mask` with: a `RandomCrop`'s fill
    for masks (`pad_if_needed`), a `RandomRotation`'s or `RandomAffine`'s where the warp
    shows none of the mask, else 0 (a `CenterCrop` larger than the image pads with 0).
    `Unsupported` for a fill that is no byte value, or for two that differ."""
    from torchvision import tv_tensors

    try:
        from torchvision.transforms.v2._utils import _get_fill
    except ImportError as e:  # pragma: no cover - another torchvision's layout
        raise Unsupported(f"v2's fills cannot be read with this torchvision ({e})") from e

    fills = []
    for t in _v2_steps(transform):
        name = type(t).__name__
        if (name == "RandomCrop" and t.pad_if_needed) or name in _V2_WARPS:
            fill = _get_fill(t._fill, tv_tensors.Mask)
            fill = 0 if fill is None else fill
            fill = fill[0] if isinstance(fill, (list, tuple)) and len(set(fill)) == 1 else fill
            if not isinstance(fill, (int, float)) or fill != int(fill) or not 0 <= fill <= 255:
                raise Unsupported(f"v2's {name} fills masks with {fill!r} (hpuload fills them with one byte value)")
            fills.append(int(fill))
    if len(set(fills)) > 1:
        raise Unsupported(f"v2's steps fill masks with {sorted(set(fills))} (hpuload fills them with one value)")
    return fills[0] if fills else 0


def v2_mask_dtype(transform, given: torch.dtype) -> torch.dtype:
    """The dtype torchvision v2's `transform` hands a `tv_tensors.Mask` of `given` out in: a
    `ToDtype` with a per-type mapping casts masks to its `tv_tensors.Mask` entry (else its
    `"others"`; None leaves them), unscaled; any other step keeps their dtype. `Unsupported`
    where the mapping names none for masks (torchvision raises)."""
    from torchvision import tv_tensors

    dtype = given
    for t in _v2_steps(transform):
        if type(t).__name__ == "ToDtype" and isinstance(t.dtype, dict):
            if tv_tensors.Mask not in t.dtype and "others" not in t.dtype:
                raise Unsupported(f"ToDtype({t.dtype}) names no dtype for masks (torchvision raises)")
            to = t.dtype.get(tv_tensors.Mask, t.dtype.get("others"))
            dtype = dtype if to is None else to
    return dtype


def _leaves_masks(steps: list) -> None:
    """Checks that torchvision v2's `steps`, run in order on an image and a `tv_tensors.Mask`
    (eight times, their draws seeded, the caller's generators put back), hand the mask out as
    it was given, values and dtype; `Unsupported` naming the first that does not."""
    import random
    import warnings

    from torchvision import tv_tensors

    g = torch.Generator().manual_seed(7)
    mask = tv_tensors.Mask(torch.randint(0, 256, (40, 56), dtype=torch.uint8, generator=g))
    start = tv_tensors.Image(torch.randint(0, 256, (3, 40, 56), dtype=torch.uint8, generator=g))
    states = torch.get_rng_state(), random.getstate()
    try:
        torch.manual_seed(0)
        random.seed(0)
        for _ in range(8):
            image = start
            for t in steps:
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # RandomErasing's about masks it passes through
                        image, got = t(image, mask)
                except Exception as e:  # noqa: BLE001 - a step v2 runs otherwise on these
                    raise Unsupported(f"v2's {type(t).__name__} on an image and a mask fails ({type(e).__name__}: {e})") from e
                plain = got.as_subclass(torch.Tensor) if isinstance(got, torch.Tensor) else None
                # The mask as given, or cast as a per-type `ToDtype` casts it (`v2_mask_dtype`).
                want = mask.as_subclass(torch.Tensor).to(v2_mask_dtype(t, mask.dtype))
                if plain is None or plain.dtype != want.dtype or not torch.equal(plain, want):
                    raise Unsupported(f"v2's {type(t).__name__} changes masks (hpuload moves them by crops, resizes and flips)")
    finally:
        torch.set_rng_state(states[0])
        random.setstate(states[1])


def _grey_gif_size(data: bytes) -> tuple[int, int] | None:
    """`(width, height)` of a GIF whose first frame covers its screen (what
    `segment::decode_grey_gif` takes), read from its header; None for any other file."""
    if len(data) < 13 or data[:6] not in (b"GIF87a", b"GIF89a"):
        return None
    width, height = int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    at = 13 + ((3 << ((data[10] & 7) + 1)) if data[10] & 0x80 else 0)
    while at < len(data) and data[at] == 0x21:
        # Extensions before the first frame (its graphic control, comments): label, blocks.
        at += 2
        while at < len(data) and data[at]:
            at += data[at] + 1
        at += 1
    frame = data[at + 1 : at + 9]
    if at >= len(data) or data[at] != 0x2C or len(frame) < 8:
        return None
    left, top, w, h = (int.from_bytes(frame[k : k + 2], "little") for k in (0, 2, 4, 6))
    return (width, height) if (left, top, w, h) == (0, 0, width, height) else None


class _Moved(NamedTuple):
    """A mask's move that `byte_masks`' `Drawn` tuple does not say alone (`TableMasks._moved`):
    its cut, the moves after it (or None), the window it is cut to first (or None), and the
    flips of the whole mask before anything else (or None)."""

    cut: tuple
    moves: list | None
    window: tuple | None
    first: tuple | None = None


class TableMasks(Masks):
    """A `datasets` table's column of masks (a PNG a row, of one byte a pixel: palette
    indices or grey levels) that the table's function hands an albumentations `Compose` with
    each image (`compose(image=np.array(image), mask=np.array(mask))`, transformers'
    `run_semantic_segmentation.py`): each batch's masks cut from the image's padded crop
    (`MaskSteps`: `fill_mask` where the padding shows) or resized as it was (OpenCV's nearest
    positions), flipped as the image's flips after the crop or resize fell (read from its
    plan), their values mapped by the Compose's leading `Lambda(mask=...)`, as `ToTensorV2`
    hands them out (uint8 `[H, W]`); or given a Segformer image processor with the images
    (`processor(images, masks)`), resized as it resizes them, as int64 `[H, W]`.

    A mask is read from the table as the batch needs it. One that cannot be read, or whose
    size is not its image's (albumentations refuses the pair), is named and its sample
    replaced by another of the batch; where none has a mask, by the dataset's own sample of
    a later row (`own`)."""

    def __init__(self, dataset, column: str, image_column: str, steps, turned: bool):
        from datasets import Image

        raw = dataset.with_format(None).select_columns([image_column, column])
        self._raw = raw.cast_column(column, Image(decode=False)).cast_column(image_column, Image(decode=False))
        self.column, self.image_column, self.steps, self.turned = column, image_column, steps, turned
        #: The `Lambda`s' table as `byte_masks` takes it (made once).
        self._table = None if steps.table is None else bytes(steps.table.tolist())
        super().__init__(_TableColumn(self), _TableSizes(self), tuple(steps.crop), MaskForm(dtype=steps.dtype), dataset=None)
        self.plan_key = None
        #: Sample -> `(image size or why not, mask name, mask bytes or why not)`, for the batch.
        self._rows: dict = {}
        #: Slots whose sample the dataset makes itself (slot -> candidate rows), for the batch.
        self.own: dict = {}

    _made_as = torch.uint8

    def read(self, indices: list[int]) -> None:
        """Reads the batch's masks (and their images' sizes) from the table."""
        from ._probe import header_facts

        rows = self._raw[list(indices)]
        self._rows = {}
        self.own = {}
        for i, image, mask in zip(indices, rows[self.image_column], rows[self.column]):
            size = _size_of(_cell_bytes(image), header_facts, self.turned)
            name = f"row {i}, column {self.column!r}" + (f" ({mask['path']})" if mask and mask.get("path") else "")
            data = _cell_bytes(mask)
            if data is None:
                data = "no mask"
            elif isinstance(data, str):
                pass  # why it cannot be read
            else:
                facts = header_facts(lambda offset, data=data: bytes(data[offset : offset + 4096]))
                if facts is None or facts[0] not in ("L", "P"):
                    data = "no mask PNG of one byte a pixel"
                elif self.steps.sized and isinstance(size, tuple) and tuple(facts[1:]) != size:
                    data = f"a mask of {facts[1]}x{facts[2]} for an image of {size[0]}x{size[1]}"
            self._rows[i] = (size, name, data)

    def unfit(self, rows: list[int]) -> str | None:
        """Why the masks of `rows` (the check's) are no PNGs of one byte a pixel (a colour
        label map, a JPEG), naming the first such row, or None. One damaged mask among them
        is the loader's to name and replace as it reads it."""
        from ._probe import header_facts

        for i, mask in zip(rows, self._raw.select_columns([self.column])[list(rows)][self.column]):
            data = _cell_bytes(mask)
            if not isinstance(data, bytes):
                continue
            facts = header_facts(lambda offset, data=data: bytes(data[offset : offset + 4096]))
            if facts is None:
                continue  # damaged: named as read
            if not data.startswith(b"\x89PNG") or facts[0] not in ("L", "P"):
                kind = "a PNG" if data.startswith(b"\x89PNG") else "a JPEG"
                return f"row {i}'s is {kind} in mode {facts[0]}"
        return None

    def _drawn(self, index: int, plans) -> tuple:
        size = self._rows[index][0]
        if not isinstance(size, tuple):
            return ((1, 1), (0, 0), False, False, (0, 0), (False, False))
        d = plans(index, *size)
        ops = [op.get("op") for op in d.get("ops", [])]
        after = ((ops.count("hflip") + bool(d.get("flip"))) % 2 == 1, ops.count("vflip") % 2 == 1)
        if not self.steps.flipped:
            after = (False, False)
        if self.steps.resized:
            # The whole mask (or the window the image was cut from) resized to the image's
            # size, then flipped as the image was.
            window = self._window(d) if self.steps.window else None
            return self._moved((tuple(self.crop), (0, 0), False, False, (0, 0), after), d, None, window)
        if self.steps.cropped:
            # The window in the image, its corner before the image's ends where it pads.
            top, left, height, width = self._window(d)
            if (height, width) != tuple(self.crop):
                raise ValueError(f"a {height}x{width} window for a {self.crop[0]}x{self.crop[1]} crop")
            at, before = (max(top, 0), max(left, 0)), (max(-top, 0), max(-left, 0))
            return self._moved(((size[1], size[0]), at, False, False, before, after), d, None)
        if self.steps.placed:
            # Resized to the letterbox's content, padded centred: the content's corner is the
            # padding before it.
            placed = d["placed"]
            return self._moved((tuple(placed["content"]), (0, 0), False, False, tuple(placed["at"]), after), d, None)
        rc = d.get("resized_crop")
        if rc is None:
            # A crop the size of its resize, which the plan keeps as the resize alone (the
            # flips before it plain flips of the output).
            return self._moved((tuple(self.crop), (0, 0), False, False, (0, 0), after), d, None)
        # Flips between a resize and its crop mirror the crop (`hflip`, `vflip`) and are among
        # the plan's ops too: the flips after the crop are the rest.
        after = (after[0] != bool(rc["hflip"]), after[1] != bool(rc["vflip"]))
        cut = (tuple(rc["resized"]), tuple(rc["at"]), bool(rc["hflip"]), bool(rc["vflip"]), tuple(rc["before"]), after)
        return self._moved(cut, d, rc)

    @staticmethod
    def _window(plan: dict) -> tuple[int, int, int, int]:
        """The window `(top, left, height, width)` the sample's plan cut its image from."""
        crop = plan["crop"]
        window = tuple(crop[k] for k in ("top", "left", "height", "width"))
        if any(v != int(v) for v in window):
            raise ValueError(f"a window of fractional pixels {window} (albumentations cuts whole ones)")
        return tuple(int(v) for v in window)

    def _moved(self, cut: tuple, plan: dict, rc: dict | None, window: tuple | None = None):
        """`cut` (a `Drawn` tuple of `byte_masks`); or, where the mask is cut to a window
        first, or the sample's plan moves its image after the crop or resize otherwise than by
        flips (a `cv2_affine` op, albumentations' `Rotate`, `Affine`, `ShiftScaleRotate`; a
        `transpose`; a `rot90`), a `_Moved`: `cut` without its flips after the crop, the moves
        after it in the plan's order (each flip, transpose and quarter turn, each warp's
        matrix and border: a flip before a warp is not one after it), and the window."""
        ops = plan.get("ops", [])
        # Flips before the crop or resize flip the whole image first (the plan's `pre`): its
        # window, crop and resize are the flipped image's (unless the image's flips leave the
        # masks, as a transform of the images alone before an image processor does).
        pre = [op.get("op") for op in plan.get("pre", [])]
        first = (pre.count("hflip") % 2 == 1, pre.count("vflip") % 2 == 1)
        first = first if any(first) and self.steps.flipped else None
        moving = self.steps.warped and any(op.get("op") in ("cv2_affine", "transpose", "rot90", "warp") for op in ops)
        if not moving:
            return cut if window is None and first is None else _Moved(cut, None, window, first)
        # The flips that mirror the crop of the resize come first among the ops.
        skip = {"hflip": bool(rc and rc["hflip"]), "vflip": bool(rc and rc["vflip"])}
        moves: list = []
        for op in ops:
            name = op.get("op")
            if name in skip and skip[name]:
                skip[name] = False
            elif name in skip or name == "transpose":
                moves.append(name)
            elif name == "rot90":
                moves.append(f"rot90_{op['arg']}")
            elif name == "cv2_affine" and self.fixed_point_warps:
                moves.append(("fixed", op["arg"]["inverse_f64"], op["arg"]["border"]))
            elif name == "cv2_affine":
                moves.append((op["arg"]["inverse"], op["arg"]["border"]))
            elif name == "warp":
                # torchvision v2's warp of the image, which it samples masks by nearest.
                arg = op["arg"]
                if arg.get("center") is not None:
                    raise ValueError("a warp about a centre of its own")
                moves.append(("torch", bool(arg["rotate"]), arg["angle"], list(arg["translate"]), arg["scale"], list(arg["shear"])))
        if plan.get("flip"):
            moves.append("hflip")  # the flip moved to the writing of the slot: the last one
        return _Moved((*cut[:5], (False, False)), moves, window, first)

    #: The Compose warps masks of a dtype OpenCV warps by its fixed-point kernel (int8 to
    #: int64, float64: a Dataset's code computing in them); else by its float one (uint8 as
    #: read, uint16, float32).
    fixed_point_warps = False

    def _byte_masks(
        self, sources: list, drawn: list, fill: int, into: torch.Tensor, table, wide: bool = False, blends=None, values=None
    ) -> None:
        """`_hpuload.byte_masks` of `sources` moved as `drawn` says (each a cut, or a `_Moved`)
        into `into` (int16 where `wide`; `blends`: per mask, the Pillow filter its resize
        blends it by, 0 for none;
        `values`: what each byte and the padding become, a tensor of 257 of `into`'s dtype)."""
        h, w = self.crop
        moved = [d for d in drawn if isinstance(d, _Moved)]
        moves = [(d.moves or []) if isinstance(d, _Moved) else [] for d in drawn] if any(d.moves for d in moved) else None
        windows = [d.window if isinstance(d, _Moved) else None for d in drawn] if any(d.window for d in moved) else None
        firsts = [d.first if isinstance(d, _Moved) else None for d in drawn] if any(d.first for d in moved) else None
        cuts = [d.cut if isinstance(d, _Moved) else d for d in drawn]
        _hpuload.byte_masks(
            sources,
            cuts,
            h,
            w,
            fill,
            into.data_ptr(),
            table,
            nearest=self.steps.nearest,
            moves=moves,
            windows=windows,
            wide=wide,
            firsts=firsts,
            blends=blends,
            values=None if values is None else values.contiguous().view(torch.uint8).numpy().tobytes(),
        )

    def _make(self, sources: list, drawn: list, into: torch.Tensor) -> None:
        self._byte_masks(sources, drawn, self.steps.fill, into, self._table)

    def _mask_name(self, index: int) -> str:
        return self._rows[index][1] if index in self._rows else f"row {index}, column {self.column!r}"

    def _own_sample(self, index: int, what: str, error: Exception) -> tuple[int, tuple]:
        raise _NoneInBatch(index)

    def _replacements(self, indices: list[int], failed: list[tuple[int, Exception]]) -> list[tuple[int, Any]]:
        """As `Masks._replacements`, but where no sample of the batch has a mask, the slot's
        sample is the dataset's own of a later row (`own`, made by the table's function)."""
        try:
            return super()._replacements(indices, failed)
        except _NoneInBatch:
            pass
        import warnings

        from . import SampleError
        from .torch import SkippedSampleWarning

        n = len(self._raw)
        for k, e in failed:
            what = f"{indices[k]} ({self._mask_name(indices[k])})"
            if self.on_error != "skip":
                raise SampleError(f"sample {what}: its mask cannot be made: {e}", self._mask_name(indices[k]), "mask")
            warnings.warn(
                f"hpuload: skipped sample {what}: its mask cannot be made; replaced by the dataset's own sample of a "
                f"later row. {e}",
                SkippedSampleWarning,
                stacklevel=4,
            )
            self.own[k] = [(indices[k] + step) % n for step in range(1, min(16, n))]
        return []


class _NoneInBatch(Exception):
    """No sample of the batch has a mask to replace a sample's with."""


def _cell_bytes(cell):
    """An `Image(decode=False)` cell's encoded bytes: held in the table, or read from the file
    its `path` names (a table that keeps paths); None for no image, or why it cannot be read."""
    if not cell:
        return None
    if cell.get("bytes") is not None:
        return cell["bytes"]
    if cell.get("path"):
        try:
            with open(cell["path"], "rb") as f:
                return f.read()
        except OSError as e:
            return f"{cell['path']} cannot be read ({e.strerror})"
    return None


def _size_of(data, header_facts, turned: bool):
    """`(width, height)` of an image's bytes as `datasets` decodes it (turned by its EXIF
    orientation when `turned`), or why not."""
    if data is None:
        return "no image"
    if isinstance(data, str):
        return data
    facts = header_facts(lambda offset: bytes(data[offset : offset + 4096]))
    if facts is None or not facts[1] or not facts[2]:
        import io

        from PIL import Image

        try:
            with Image.open(io.BytesIO(data)) as im:
                size = im.size
        except Exception:  # noqa: BLE001 - a damaged image: the loader names it and replaces its row
            return "unreadable"
    else:
        size = (facts[1], facts[2])
    if turned and _hpuload.exif_orientation(bytes(data)) >= 5:
        size = (size[1], size[0])
    return size


class _TableColumn:
    """`TableMasks.masks`: a batch row's mask as `_hpuload.segmentation_masks` takes it
    (`(name, bytes)`; a plane a class's own reader gave, `(name, (height, width), bytes)`; a GIF
    made grey, `(name, "gif-grey", bytes)`, or as stored, `"gif-indices"`), or `ValueError`
    naming why it cannot be made."""

    def __init__(self, masks: TableMasks):
        self.of = masks

    def __getitem__(self, index: int):
        size, name, data = self.of._rows[index]
        if not isinstance(size, tuple):
            raise ValueError(f"{name}: its image's size cannot be read ({size})")
        if isinstance(data, str):
            raise ValueError(f"{name}: {data}")
        return (name, *data) if isinstance(data, tuple) else (name, data)


class _TableSizes:
    """`TableMasks.sizes`: a batch row's image's `(width, height)`."""

    def __init__(self, masks: TableMasks):
        self.of = masks

    def __getitem__(self, index: int):
        return self.of._rows[index][0]


def _opened_mode(data: bytes, facts) -> str | None:
    """The mode Pillow opens a mask file in: a PNG's from its header (`facts`), any other
    file's from Pillow's own reading of its header (a GIF of a grey ramp opens as "L", any
    other as "P"); None where it cannot be opened (named as it is read)."""
    import io

    from PIL import Image

    if data.startswith(b"\x89PNG") and facts is not None:
        return facts[0]
    try:
        with Image.open(io.BytesIO(data)) as im:
            return im.mode
    except Exception:  # noqa: BLE001 - a damaged file: named and replaced as it is read
        return None


def palette_grey(data: bytes) -> torch.Tensor | None:
    """Pillow's `convert("L")` of a palette PNG's indices, as a table of 256 bytes: each
    palette entry's luma in Pillow's integer weights (`(19595 R + 38470 G + 7471 B + 2^15) >>
    16`), 0 past the palette's end; None for a PNG without a palette (grey: its values are
    their own grey)."""
    at = 8
    while at + 8 <= len(data):
        length, name = int.from_bytes(data[at : at + 4], "big"), bytes(data[at + 4 : at + 8])
        if name == b"IDAT":
            break
        if name == b"PLTE":
            rgb = torch.zeros((256, 3), dtype=torch.int64)
            entries = torch.frombuffer(bytearray(data[at + 8 : at + 8 + min(length, 768) // 3 * 3]), dtype=torch.uint8)
            rgb[: entries.numel() // 3] = entries.view(-1, 3)
            weights = torch.tensor([19595, 38470, 7471])
            return ((rgb * weights).sum(1) + 0x8000 >> 16).to(torch.uint8)
        at += 12 + length
    return None


def same_mask_steps(a: MaskSteps, b: MaskSteps) -> bool:
    """Whether two `MaskSteps` move and map masks alike (their tables compared by value)."""
    tables = (a.table is None and b.table is None) or (
        a.table is not None and b.table is not None and torch.equal(a.table, b.table)
    )
    return tables and a._replace(table=None) == b._replace(table=None)


class FileMasks(TableMasks):
    """The masks of a Dataset class of the user's own that returns an image and its mask
    (`return image, mask` after `transform(image=image, mask=mask)`, an albumentations
    `Compose`, as hand-written U-Net scripts do): each sample's mask file (a PNG of one byte a
    pixel, grey or palette) read as the batch needs it, moved as its image by the `Compose`'s
    `MaskSteps` (`TableMasks._drawn`), then its values made as the Dataset's code makes them
    (`_probe.MaskArray.values`: the same function of each of the 256 bytes the file may hold,
    after Pillow's grey of a palette first, `palette_grey`, where the code made the mask grey,
    then what the padding holds), in the dtype and layout the code hands out. A mask that cannot be read, or is
    not its image's size, is named and its sample replaced by another of the batch (where none
    has one, by the Dataset's own sample of a later index)."""

    def __init__(self, dataset, images: list[str], files: list[str], steps: "MaskSteps", mask, shape):
        self.images, self.files = images, files
        #: What the Dataset returns (`_probe.Segmented`): a pair, or a dict of the two.
        self.shape = shape
        self.steps = steps
        values = mask.values if mask.kind == "tensor" else torch.from_numpy(mask.values.copy())
        if values.shape[0] == 256:
            # Moved by the Dataset's own functionals, by moves that pad nothing: no padding shows.
            values = torch.cat([values, values[:1]])
        if steps.table is not None:
            # A `Lambda` on the mask first: its table of bytes, where the code computes nothing.
            if not torch.equal(values[:256], torch.arange(256, dtype=torch.uint8)):
                raise Unsupported("a Lambda of the albumentations transform on a mask whose values the code computes")
            values = torch.cat([steps.table.to(torch.uint8), values[256:]])
        #: What each byte the file holds becomes (torch's dtype of the mask handed out), then
        #: what the padding holds (`_probe.AlbumentationsStandIn._padding`, after the code's
        #: steps past the transform).
        self.values = values
        #: The code made the mask grey: a palette's indices become their luma first.
        self.grey = mask.image.before[:1] == (_probe.GREY,)
        read = mask.image.before[0] if mask.image.before else None
        #: A colour mask (`_probe.ColourRead`): each pixel's colour becomes its index in the
        #: colours the code compared with (`0xRRGGBB` each; `_probe.OTHER_COLOUR` for any
        #: other), which `values` maps; and whether Pillow made the file RGB first (else it
        #: must be RGB as stored).
        self.colours = list(read.table.colours) if isinstance(read, _probe.ColourRead) else None
        self.converted = isinstance(read, _probe.ColourRead) and read.converted
        self.colour_reader = read.reader if isinstance(read, _probe.ColourRead) else None
        #: Read by OpenCV's grey read, which takes grey PNGs as stored (a palette's colours it
        #: makes grey by weights of its own).
        self.opencv = mask.image.tensor == "cv2"
        self.fixed_point_warps = mask.composed not in ("uint8", "uint16", "float32")
        #: `[1, H, W]` per sample; NumPy arrays (the Compose's, without `ToTensorV2`) per
        #: sample for a collate_fn, of the mask and (`numpy_images`, set by the loader) of the
        #: image.
        self.channel, self.numpy, self.numpy_images = mask.channel, mask.kind == "numpy", False
        self._made_as = values.dtype
        Masks.__init__(self, _TableColumn(self), _TableSizes(self), tuple(steps.crop), MaskForm(dtype=values.dtype), dataset)
        self.plan_key = None
        self._rows: dict = {}
        self.own: dict = {}
        #: The batch's mask files Pillow resizes by nearest whatever the filter (palettes).
        self._nearest: set = set()

    def read(self, indices: list[int]) -> None:
        """Reads the batch's mask files, and their images' sizes from their headers: a PNG of
        one byte a pixel (grey, or palette where Pillow reads it) as its bytes, which
        `byte_masks` decodes; any other file as the class's own reader gives it (Pillow's
        `np.array` of it, perhaps made grey, or OpenCV's grey read), a plane of bytes."""
        self._rows = {}
        self._nearest = set()
        for i in indices:
            name = self.files[i]
            size = _probe.size_of(self.images[i]) or "unreadable"
            try:
                with open(name, "rb") as f:
                    data = f.read()
            except OSError as e:
                data = f"cannot be read ({e.strerror})"
            if isinstance(data, bytes) and self.colours is not None:
                data, facts = self._colour_source(name, data)
                if isinstance(size, tuple) and facts is not None and tuple(facts[1:]) != size:
                    data = f"a mask of {facts[1]}x{facts[2]} for an image of {size[0]}x{size[1]}"
            elif isinstance(data, bytes):
                facts = _probe.header_facts(lambda offset, data=data: bytes(data[offset : offset + 4096]))
                if self.steps.blend and not self.grey and _opened_mode(data, facts) == "P":
                    # A palette image as stored, which Pillow resizes by nearest whatever the
                    # filter asked (a PNG, a GIF).
                    self._nearest.add(name)
                png = data.startswith(b"\x89PNG") and facts is not None and facts[0] in ("L", "P")
                if png and self.grey and self.steps.blend and facts[0] == "P":
                    png = False  # made grey before its resize blends it: Pillow's grey plane
                if png and self.opencv:
                    # OpenCV's grey read takes a grey PNG as stored, unless it turns it by an
                    # EXIF orientation; a palette's colours it makes grey by its own weights.
                    png = facts[0] == "L" and _probe.png_chunk_before_data(data, (b"eXIf",)) is None
                gif = _grey_gif_size(data) if not self.opencv and not png else None
                if gif is not None:
                    # A GIF (the Carvana set's) decoded natively: the code made it grey (each
                    # pixel Pillow's grey of its palette colour), or its indices as stored
                    # (milesial's U-Net).
                    data, facts = ("gif-grey" if self.grey else "gif-indices", data), ("L", *gif)
                elif not png:
                    data, facts = self._read_own(name, data)
                if isinstance(data, str):
                    pass  # why it cannot be read
                elif isinstance(size, tuple) and tuple(facts[1:]) != size:
                    data = f"a mask of {facts[1]}x{facts[2]} for an image of {size[0]}x{size[1]}"
            self._rows[i] = (size, name, data)

    def _colour_source(self, name: str, data: bytes) -> tuple:
        """`(source, (mode, width, height))` of a colour mask file: an 8-bit PNG (or a palette
        one) as `(colours, bytes)`, which `byte_masks` decodes (`segment::decode_colour_mask`)
        as Pillow's RGB of it (`.convert("RGB")`, or the file as stored where it is RGB), each
        colour made its index; any other file as Pillow's RGB of it gives it, its colours made
        their indices here, a plane of bytes. `(why not, None)` for a file that cannot be."""
        facts = _probe.header_facts(lambda offset: bytes(data[offset : offset + 4096]))
        if not self.converted and (facts is None or facts[0] != "RGB") and data.startswith(b"\x89PNG"):
            return f"in mode {facts and facts[0]}, which the code compares with colours as stored", None
        # Colour type 2 (RGB), 3 (palette), 0 (grey), 4 (grey and alpha), 6 (RGBA), in 8 bits
        # (a palette in any), as libpng's and Pillow's RGB of them alike give them.
        png = data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 26 and data[12:16] == b"IHDR"
        if self.colour_reader == "cv2" and png and _probe.png_chunk_before_data(data, (b"eXIf",)) is not None:
            png = False  # OpenCV turns it by its EXIF orientation: its own read
        if png and (data[25] == 3 or (data[24] == 8 and data[25] in (0, 2, 4, 6))) and facts is not None:
            return (self.colours, data), ("RGB", *facts[1:])
        import io

        import numpy as np
        from PIL import Image

        try:
            if self.colour_reader == "cv2":
                import cv2

                bgr = cv2.imread(name, cv2.IMREAD_COLOR)
                if bgr is None:
                    return "OpenCV cannot read it", None
                rgb = np.ascontiguousarray(bgr[..., ::-1])
            else:
                with Image.open(io.BytesIO(data)) as im:
                    if not self.converted and im.mode != "RGB":
                        return f"in mode {im.mode}, which the code compares with colours as stored", None
                    rgb = np.asarray(im.convert("RGB") if self.converted else im)
        except Exception as e:  # noqa: BLE001 - a damaged file: named, its sample replaced
            return f"cannot be decoded ({type(e).__name__}: {e})", None
        packed = (rgb[..., 0].astype(np.uint32) << 16) | (rgb[..., 1].astype(np.uint32) << 8) | rgb[..., 2]
        colours = np.asarray(self.colours, dtype=np.uint32)
        order = np.argsort(colours)
        ranked = colours[order]
        at = np.minimum(np.searchsorted(ranked, packed), max(len(ranked) - 1, 0))
        found = ranked[at] == packed if len(ranked) else np.zeros(packed.shape, bool)
        plane = np.where(found, order[at] if len(ranked) else 0, _probe.OTHER_COLOUR).astype(np.uint8)
        height, width = plane.shape
        return ((height, width), np.ascontiguousarray(plane).tobytes()), ("RGB", width, height)

    def _read_own(self, name: str, data: bytes) -> tuple:
        """`(plane, (mode, width, height))` of a mask file as the class's reader gives it
        (OpenCV's grey read of the file; Pillow's array of it opened as stored, in a mode of
        one byte a pixel, or made grey), or `(why not, None)`."""
        import io

        import numpy as np

        try:
            if self.opencv:
                import cv2

                mask = cv2.imread(name, cv2.IMREAD_GRAYSCALE)
                if mask is None:
                    return "OpenCV cannot read it", None
            else:
                from PIL import Image

                with Image.open(io.BytesIO(data)) as im:
                    if not self.grey and im.mode not in ("L", "P"):
                        return f"in mode {im.mode}, not one byte a pixel", None
                    mask = np.asarray(im.convert("L") if self.grey else im)
        except Exception as e:  # noqa: BLE001 - a damaged file: named, its sample replaced
            return f"cannot be decoded ({type(e).__name__}: {e})", None
        if mask.dtype != np.uint8 or mask.ndim != 2:
            return f"read as {mask.dtype} {tuple(mask.shape)}, not one byte a pixel", None
        height, width = mask.shape
        return ((height, width), np.ascontiguousarray(mask).tobytes()), ("L", width, height)

    def _make(self, sources: list, drawn: list, into: torch.Tensor) -> None:
        h, w = self.crop
        n = len(sources)
        into = into.view(n, h, w)  # one sample's alone is `[H, W]`
        # Pillow's grey of each palette file's own colours, where the code made the masks grey.
        greys = [
            palette_grey(source[1]) if self.grey and len(source) == 2 and source[1][25:26] == b"\x03" else None
            for source in sources
        ]
        # Blended by the resize's filter: grey masks (a palette file as stored Pillow resizes
        # by nearest whatever the filter).
        blends = [0 if source[0] in self._nearest else int(self.steps.blend) for source in sources]
        blends = blends if any(blends) else None
        plain = into.dtype == self.values.dtype and tuple(self.values.shape) == (257,) and into.is_contiguous()
        if plain and all(g is None for g in greys) and self.values.element_size() in (1, 2, 4, 8):
            # Each pixel written as its byte's value (the padding's the last), in the mask's
            # dtype, in one pass on `byte_masks`' threads.
            self._byte_masks(sources, drawn, 0, into, None, blends=blends, values=self.values)
            return
        # Each pixel's byte, or 256 where the padding shows (one decode of each file): the
        # index of its value in `values`, whose last is what the padding holds.
        raw = torch.empty((n, h, w), dtype=torch.int16)
        self._byte_masks(sources, drawn, 256, raw, None, wide=True, blends=blends)
        if any(g is not None for g in greys):
            identity = torch.arange(257, dtype=torch.int16)
            tables = torch.stack([identity if g is None else torch.cat([g.to(torch.int16), identity[256:]]) for g in greys])
            raw = torch.gather(tables, 1, raw.view(n, -1).long()).view(n, h, w)
        into.copy_(self.values.index_select(0, raw.view(-1).int()).view(n, h, w))

    _replacements = Masks._replacements
    _own_sample = Masks._own_sample

    def _own_pair(self, got) -> tuple | None:
        """The image and the mask (`[H, W]`) of the Dataset's own sample, as it returns them."""
        if not isinstance(got, (tuple, list, dict)) or (isinstance(got, tuple) and got and isinstance(got[0], str) and got[0] == "raised"):
            return None
        return self.shape.of(got), torch.as_tensor(self.shape.mask_of(got)).reshape(self.crop)

    def _mask_name(self, index: int) -> str:
        return self.files[index]

    def static(self, images: torch.Tensor, records: Any, indices: list[int], plans=None):
        """Without a collate_fn: `[images, masks]`, as `default_collate` stacks the pairs."""
        self.read(indices)
        masks = self._batch(indices, plans, images)
        return self.shape.batch(images, masks.unsqueeze(1) if self.channel else masks)

    def samples(self, images: torch.Tensor, records: Any, indices: list[int], plans=None) -> list[tuple]:
        """Per sample `(image, mask)` as the Dataset returns it, for the user's collate_fn."""
        self.read(indices)
        masks = self._batch(indices, plans, images)
        out = []
        for k in range(len(indices)):
            image, mask = images[k], masks[k].unsqueeze(0) if self.channel else masks[k]
            out.append(self.shape.sample(image.numpy() if self.numpy_images else image, mask.numpy() if self.numpy else mask))
        return out
