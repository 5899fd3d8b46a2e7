"""Detection: torchvision's `CocoDetection` and its v2 detection transforms on hpuload.

`coco_source(dataset)` recognises a `CocoDetection` (wrapped with
`wrap_dataset_for_transforms_v2`, or raw), possibly inside `torch.utils.data.Subset`s (the
detection reference drops images without annotations that way), and returns what the Rust
loader needs: the annotations (taken from the `COCO` object the dataset already holds, so the
file is not parsed twice), the image folder, the pipeline and how to build each sample's
target. `Targets` turns a batch's fixed-size target records (see `src/loader/targets.rs`) into
torch tensors: padded `[N, max_boxes, ...]` tensors for graph mode, or torchvision's per-image
target dicts.
"""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

import torch

from ._options import CocoSource
from ._reference_steps import check_detection, check_sequential
from ._transforms import (
    Unsupported,
    _hw,
    _interp,
    _is,
    _resize_filter,
    _torch_dtype_name,
    steps,
)

def _moves_pixels(op: dict) -> bool:
    """Whether a translated pixel op moves pixels (torchvision's v2 versions would move the
    boxes too), as the Rust op registry says, looking inside wrappers and policies."""
    from . import _hpuload

    return _hpuload.op_kinds(json.dumps([op])) == ["moving_pixel"]


# The target keys hpuload builds in Rust (torchvision's wrapper default); the wrapper's other
# keys (`masks`, `area`, `iscrowd`, the annotations' own fields) are made from the annotations
# and the sample's drawn plan (`Targets`).
_KEYS = ("image_id", "boxes", "labels")


class TargetSteps(NamedTuple):
    """What torchvision v2's detection transforms do to a wrapped dataset's targets beyond
    what a sample's drawn plan says (part of what a change of transforms is checked against):
    masks are resized with the nearest pixel, which a mirror does not commute with, so the
    flip's side of the resize counts; a zoom-out pads them with its fill for masks; some steps
    need boxes and labels to find."""

    #: The flip comes after the resize in the user's transforms.
    flip_after_resize: bool
    #: RandomZoomOut's fill for masks, or None where torchvision refuses to pad masks with it
    #: (a sequence); 0 without a zoom-out.
    zoom_fill: int | None
    #: The first step torchvision raises at for a target without boxes (an image without
    #: annotations): `SanitizeBoundingBoxes` or `RandomIoUCrop`; None.
    needs_boxes: str | None
    #: A `SanitizeBoundingBoxes` is there (it needs labels in the target).
    sanitizes: bool


def _unwrap_subsets(dataset) -> tuple[Any, list[int] | None]:
    """`(innermost dataset, indices into it or None)` through nested `Subset`s."""
    import torch.utils.data as tud

    indices = None
    while type(dataset) is tud.Subset:
        picked = [int(i) for i in dataset.indices]
        indices = picked if indices is None else [picked[i] for i in indices]
        dataset = dataset.dataset
    return dataset, indices


def _coco_class(dataset) -> Any | None:
    """torchvision's `CocoDetection` when importable, else None."""
    try:
        from torchvision.datasets import CocoDetection
    except ImportError:  # pragma: no cover - torchvision is a requirement of the fast path
        return None
    return CocoDetection


def is_coco(dataset) -> bool:
    """Whether `dataset` is (a Subset of) a CocoDetection, wrapped for v2 or not."""
    coco_cls = _coco_class(dataset)
    inner, _ = _unwrap_subsets(dataset)
    inner = getattr(inner, "_dataset", inner)
    return coco_cls is not None and isinstance(inner, coco_cls)


class Unfit(Exception):
    """The dataset is a CocoDetection that hpuload cannot take (the message says why)."""


def coco_source(dataset, max_boxes: int, translate: bool = True) -> tuple[dict, str | None, str, "Targets"]:
    """`(source kwargs, pipeline JSON, dtype, Targets)` for a (Subset of a) CocoDetection, or
    `Unfit` / `Unsupported`. With `translate=False` (the user names a pipeline) the dataset's
    transforms are not read: the pipeline is None, and outputs are plain tensors."""
    from torchvision.datasets import CocoDetection

    inner, indices = _unwrap_subsets(dataset)
    wrapped = None
    try:
        from torchvision.tv_tensors._dataset_wrapper import VisionDatasetTVTensorWrapper
    except ImportError:  # pragma: no cover - torchvision < 0.16
        VisionDatasetTVTensorWrapper = ()
    if isinstance(inner, VisionDatasetTVTensorWrapper):
        wrapped, inner = inner, inner._dataset
    reference = None
    if type(inner) is not CocoDetection:
        if wrapped is not None:
            raise Unfit(f"{type(inner).__name__} is not torchvision's CocoDetection (a subclass may load differently)")
        # The detection reference's own subclass (`coco_utils.CocoDetection`, its v1 path).
        reference = Reference.of(inner)
    coco = inner.coco
    ids = list(inner.ids)
    if indices is None:
        chosen = ids
    else:
        if any(b <= a for a, b in zip(indices, indices[1:])):
            raise Unfit("a Subset whose indices are not ascending (hpuload orders images by id, as CocoDetection)")
        chosen = [ids[i] for i in indices]
    pipeline, dtype, pure, target_transform, steps = None, "f32", True, None, None
    if translate:
        pipeline, dtype, pure, target_transform, steps = translate_transforms(dataset)
    keys = None
    if wrapped is not None:
        keys = Wrapper(wrapped, inner, steps) if translate else _target_keys(wrapped._target_keys)
    # The file's own records in its order (what pycocotools loaded), slimmed to the fields
    # hpuload reads, so an error names the record as the file numbers it.
    data = coco.dataset
    images = [_slim(im, ("id", "file_name", "width", "height")) for im in data.get("images", [])]
    fields = ("id", "image_id", "bbox", "category_id", "iscrowd", "area")
    if reference is None:
        annotations = [_slim(a, fields) for a in data.get("annotations", [])]
    else:
        # The boxes ConvertCocoPolysToMask leaves: no crowds, clamped to the image, no empty one.
        annotations = reference.annotations(fields)
    categories = [_slim(c, ("id", "name")) for c in data.get("categories", [])]
    text = json.dumps({"images": images, "annotations": annotations, "categories": categories})
    source = {
        "source": CocoSource(
            images=str(inner.root),
            annotations=f"{inner.root} (CocoDetection's annotations)",
            text=text,
            only=chosen if indices is not None else None,
        ),
        "max_boxes": max_boxes,
    }
    targets = Targets(
        max_boxes=max_boxes,
        keys=keys,
        pure=pure,
        raw=None if wrapped is not None or reference is not None else (coco, target_transform, chosen),
        reference=reference,
    )
    return source, pipeline, dtype, targets


def _wrapper_and_inner(dataset) -> tuple[Any, Any]:
    """`(the v2 wrapper or None, the CocoDetection)` inside Subsets."""
    inner, _ = _unwrap_subsets(dataset)
    inner_dataset = getattr(inner, "_dataset", None)
    if inner_dataset is not None:
        return inner, inner_dataset
    return None, inner


def current_transforms(dataset) -> Any:
    """The `transforms` object the (Subset of a) CocoDetection applies now (the reference's
    subclass: its `_transforms`)."""
    wrapped, inner = _wrapper_and_inner(dataset)
    if wrapped is not None:
        return wrapped.transforms
    return inner._transforms if _is_reference(inner) else inner.transforms


def _is_reference(inner) -> bool:
    from torchvision.datasets import CocoDetection

    return type(inner) is not CocoDetection


def translate_transforms(dataset) -> tuple[str, str, bool, Any, TargetSteps | None]:
    """`(pipeline JSON, dtype, pure, target transform, target steps)` of the transforms a
    (Subset of a) CocoDetection applies now, or `Unsupported`; target steps for a dataset
    wrapped for transforms v2 alone."""
    wrapped, inner = _wrapper_and_inner(dataset)
    if wrapped is None and _is_reference(inner):
        pipeline, dtype = translate_reference(current_transforms(dataset))
        return pipeline, dtype, True, None, None
    image_transform, target_transform = _split(current_transforms(dataset), wrapped is not None)
    if wrapped is not None:
        pipeline, dtype, pure, on_targets = translate_detection(image_transform)
        return pipeline, dtype, pure, target_transform, on_targets
    from ._transforms import translate as translate_image

    pipeline, dtype = translate_image(image_transform)
    return pipeline, dtype, True, target_transform, None


def _slim(record, fields) -> dict:
    return {k: record[k] for k in fields if k in record} if isinstance(record, dict) else record


def _target_keys(given) -> tuple[str, ...]:
    """The keys of a wrapped dataset's targets under a pipeline the user names (which says
    nothing of how masks move): image_id, boxes and labels alone."""
    if given is None:
        return _KEYS
    if given == "all":
        raise Unfit("target_keys='all' with a pipeline of your own (hpuload builds image_id, boxes and labels)")
    extra = sorted(set(given) - set(_KEYS))
    if extra:
        raise Unfit(f"target_keys {extra} with a pipeline of your own (hpuload builds image_id, boxes and labels)")
    return tuple(k for k in _KEYS if k in set(given))


class Wrapper:
    """The targets torchvision's `wrap_dataset_for_transforms_v2` gives a CocoDetection, for
    any `target_keys`: `image_id`, `boxes` and `labels` from the Rust records, `masks` (each
    annotation's segmentation rasterized as pycocotools does, then moved by the sample's drawn
    zoom-out, IoU crop, flip and resize as torchvision's mask kernels move them, and kept with
    its box), and the annotations' own fields (`area`, `iscrowd`, `segmentation`, ...) as the
    wrapper lists them, which no transform changes. The keys come in the wrapper's own order,
    read once from the wrapper run on one image's annotations. An image without annotations
    gets `{"image_id": id}` alone, as the wrapper gives it, or the error torchvision raises
    where a step needs boxes."""

    def __init__(self, wrapped, inner, steps: TargetSteps):
        coco = inner.coco
        self.coco = coco
        self.root = str(inner.root)
        self.bare = frozenset(image_id for image_id in inner.ids if not coco.getAnnIds(image_id))
        self.keys = self._order(wrapped, inner)
        self.steps = steps
        #: The target holds masks, which each sample's drawn plan moves.
        self.masks = "masks" in self.keys
        if self.masks and steps.zoom_fill is None:
            raise Unsupported("RandomZoomOut with a sequence as the fill of masks (torchvision refuses to pad masks with it)")
        if steps.sanitizes and "labels" not in self.keys:
            raise Unsupported("SanitizeBoundingBoxes on targets without labels (torchvision cannot find them and raises)")

    @staticmethod
    def _order(wrapped, inner) -> tuple[str, ...]:
        """The keys of the wrapper's target for an image with annotations, in its order (the
        keys beyond image_id, boxes, masks and labels come from a set): the wrapper run on a
        blank 1x1 image with one annotation holding every field it may list."""
        import PIL.Image

        if not any(inner.coco.getAnnIds(image_id) for image_id in inner.ids):
            return ()
        probe = {"id": 1, "image_id": 0, "category_id": 1, "bbox": [0.0, 0.0, 1.0, 1.0], "area": 1.0, "iscrowd": 0,
                 "segmentation": [[0.0, 0.0, 1.0, 0.0, 1.0, 1.0]]}  # fmt: skip
        try:
            _, target = wrapped._wrapper(0, (PIL.Image.new("1", (1, 1)), [probe]))
        except Exception as e:
            raise Unfit(f"the v2 wrapper does not run on an annotation of every COCO field ({type(e).__name__}: {e})") from e
        if not isinstance(target, dict):
            raise Unfit(f"the v2 wrapper gives a {type(target).__name__} as the target")
        unknown = set(target) - {"image_id", "boxes", "masks", "labels"} - _ANNOTATION_FIELDS
        if unknown:
            raise Unfit(f"the v2 wrapper gives the keys {sorted(unknown)}, which hpuload does not make")
        return tuple(target)

    def target(self, image_id: int, boxes, labels, count: int, pure: bool, size, detects, index) -> dict:
        """One sample's target: `boxes` and `labels` as the Rust loader kept them (`count`),
        `size` the output's `(height, width)`, `detects(index, width, height)` the sample's
        drawn plan (for the masks)."""
        if image_id in self.bare:
            if self.steps.needs_boxes is not None:
                raise ValueError(
                    f"image {image_id} has no annotations, and {self.steps.needs_boxes} needs boxes: torchvision "
                    "raises at it for this sample too (drop such images, as the detection reference does)"
                )
            return {"image_id": image_id}
        from torchvision import tv_tensors
        from torchvision.tv_tensors._dataset_wrapper import list_of_dicts_to_dict_of_lists

        anns = self.coco.loadAnns(self.coco.getAnnIds(image_id))
        if all(type(v) is int for a in anns for v in a["bbox"]):
            # The wrapper's `torch.tensor` of whole numbers is int64 (the Rust plan truncated
            # what the resize scaled, as torchvision's kernel does for int64 boxes).
            boxes = boxes.to(torch.int64)
        listed = None
        target: dict[str, Any] = {}
        for key in self.keys:
            if key == "image_id":
                target[key] = image_id
            elif key == "boxes":
                target[key] = boxes if pure else tv_tensors.BoundingBoxes(boxes, format="XYXY", canvas_size=tuple(size))
            elif key == "labels":
                target[key] = labels
            elif key == "masks":
                masks = self._masks(image_id, anns, detects, index, count)
                target[key] = masks if pure else tv_tensors.Mask(masks)
            else:
                listed = listed if listed is not None else list_of_dicts_to_dict_of_lists(anns)
                target[key] = listed[key]
        return target

    @staticmethod
    def _rles(segmentation, height: int, width: int) -> list[bytes]:
        """One annotation's compressed RLE strings as the wrapper's `segmentation_to_mask`
        reads its segmentation: polygons (their union) or an RLE, compressed or not."""
        from pycocotools import mask as coco_mask

        if isinstance(segmentation, dict):
            if isinstance(segmentation["counts"], str):
                if list(segmentation.get("size", ())) != [height, width]:
                    raise ValueError(
                        f"an RLE of size {segmentation.get('size')}, not the image's {[height, width]} "
                        "(torchvision cannot stack its masks)"
                    )
                rles = [segmentation]
            else:
                rles = [coco_mask.frPyObjects(segmentation, height, width)]
        elif isinstance(segmentation, list):
            rles = coco_mask.frPyObjects(segmentation, height, width)
        else:
            raise ValueError(f"COCO segmentation expected to be a dict or a list, got {type(segmentation)}")
        return [r["counts"] if isinstance(r["counts"], bytes) else str(r["counts"]).encode() for r in rles]

    def _masks(self, image_id: int, anns: list, detects, index, count: int) -> torch.Tensor:
        """`[count, H, W]` uint8: the kept boxes' masks at the output's size."""
        import PIL.Image
        from torchvision.transforms.v2 import functional as F

        record = self.coco.imgs[image_id]
        path = f"{self.root}/{record['file_name']}"
        if os.path.isfile(path):
            with PIL.Image.open(path) as image:
                width, height = image.size  # the wrapper's canvas: the image as loaded
        else:
            # On object storage or in tar shards (which torch's loader cannot read): the size
            # the annotation file gives, which the Rust reader holds the image to.
            width, height = int(record["width"]), int(record["height"])
        objects = []
        for k, a in enumerate(anns):
            try:
                objects.append(self._rles(a["segmentation"], height, width))
            except Exception as e:
                raise ValueError(
                    f"image {image_id} ({path}): annotation {k} (id {a.get('id')}) has a segmentation "
                    f"its mask cannot be made from ({type(e).__name__}: {e})"
                ) from e
        d = detects(index, width, height)
        steps = self.steps
        # Only the masks that stay are drawn: each is moved on its own.
        objects = [objects[k] for k in d["kept"][:count]]
        (cw, ch), (left, top) = d["canvas"], d["image_at"]
        wl, wt, ww, wh = d["window"]
        size = tuple(d["size"])
        whole = (cw, ch) == (width, height) and [wl, wt, ww, wh] == [0, 0, cw, ch]
        if whole and (steps.flip_after_resize or not d["flip"]):
            # The reference's hflip and multiscale augmentations: resized as torch's nearest
            # resize does, then mirrored, in the Rust decode of the RLEs.
            resize = size if size != (height, width) else None
            return _planes(self._decode(path, image_id, objects, height, width, d["flip"], resize), len(objects), size)
        masks = _planes(self._decode(path, image_id, objects, height, width), len(objects), (height, width))
        if (cw, ch) != (width, height):
            masks = F.pad_mask(masks, [left, top, cw - width - left, ch - height - top], fill=steps.zoom_fill)
        if not whole:
            masks = F.crop_mask(masks, wt, wl, wh, ww)
        if d["flip"] and not steps.flip_after_resize:
            masks = F.horizontal_flip_mask(masks)
        if size != (wh, ww):
            masks = F.resize_mask(masks, list(size))
        if d["flip"] and steps.flip_after_resize:
            masks = F.horizontal_flip_mask(masks)
        return masks

    @staticmethod
    def _decode(path: str, image_id: int, objects: list, *args) -> bytearray:
        """`_hpuload.coco_masks(objects, *args)`, its error naming the image."""
        from . import _hpuload

        try:
            return _hpuload.coco_masks(objects, *args)
        except ValueError as e:
            raise ValueError(f"image {image_id} ({path}): the masks of its kept objects: {e}") from e


def _planes(planes: bytearray, n: int, size: tuple[int, int]) -> torch.Tensor:
    """`[n, height, width]` uint8 over `planes` (no copy)."""
    if not planes:
        return torch.zeros((n, *size), dtype=torch.uint8)
    return torch.frombuffer(planes, dtype=torch.uint8).view(n, *size)


#: The annotation fields the v2 wrapper may list as they are.
_ANNOTATION_FIELDS = frozenset({"segmentation", "area", "iscrowd", "bbox", "category_id"})


def _split(transforms, wrapped: bool) -> tuple[Any, Any]:
    """`(joint or image transform, target transform)` of a dataset's `transforms`."""
    from torchvision.datasets.vision import StandardTransform

    if transforms is None:
        raise Unsupported("the CocoDetection has no transforms (it yields PIL images)")
    if type(transforms) is StandardTransform:
        if wrapped:
            if transforms.target_transform is not None:
                raise Unsupported("a target_transform on a CocoDetection wrapped for transforms v2")
            raise Unsupported(
                "an image-only transform= on a CocoDetection wrapped for transforms v2 (pass the "
                "detection transforms as transforms=, which also move the boxes)"
            )
        return transforms.transform, transforms.target_transform
    if not wrapped:
        raise Unsupported("joint transforms= on a raw CocoDetection (wrap it with wrap_dataset_for_transforms_v2)")
    return transforms, None


def _image_fill(t, image_type) -> list[int]:
    """The fill `RandomZoomOut` gives an image of `image_type`, as torchvision looks it up: a
    dict of fills without an entry for that type or "others" gives no fill, which pads with 0
    (so the detection reference's `defaultdict(lambda: mean, ...)` pads its images with black)."""
    fills = t._fill
    fill = fills[image_type] if image_type in fills else fills.get("others")
    if fill is None:
        return [0, 0, 0]
    values = [float(v) for v in (fill if isinstance(fill, (list, tuple)) else [fill])]
    if len(values) == 1:
        values *= 3
    if len(values) != 3 or any(v != int(v) or not 0 <= v <= 255 for v in values):
        raise Unsupported(f"RandomZoomOut fill {fill!r} on a uint8 image")
    return [int(v) for v in values]


def _mask_fill(t) -> int | None:
    """The value `RandomZoomOut` pads masks with, looked up as `_image_fill` looks up the
    image's (no entry: 0); None for a sequence, which torchvision's `pad_mask` refuses, or a
    value a uint8 mask cannot hold."""
    from torchvision import tv_tensors

    fills = t._fill
    fill = fills[tv_tensors.Mask] if tv_tensors.Mask in fills else fills.get("others")
    if fill is None:
        return 0
    if isinstance(fill, (list, tuple)) or float(fill) != int(fill) or not 0 <= fill <= 255:
        return None
    return int(fill)


def _bbox_format(t) -> str:
    return str(getattr(t.format, "name", t.format)).upper()


def _iou_crop(t) -> dict:
    """The op of a `RandomIoUCrop` (torchvision's v2, or the reference's v1: the same
    attributes)."""
    return {
        "op": "random_iou_crop",
        "min_scale": float(t.min_scale),
        "max_scale": float(t.max_scale),
        "min_aspect_ratio": float(t.min_aspect_ratio),
        "max_aspect_ratio": float(t.max_aspect_ratio),
        "sampler_options": [float(o) for o in t.options],
        "trials": int(t.trials),
    }


def shortest_size(t, name: str, on_tensor: bool) -> dict:
    """The `random_shortest_size` op of a RandomShortestSize (torchvision v2's or the
    detection reference's v1 class): `min_size` an int or a sequence, `max_size` or None;
    Pillow's resize when the image is a PIL image at that step."""
    min_size = [t.min_size] if isinstance(t.min_size, int) else [int(m) for m in t.min_size]
    if not min_size or min(min_size) <= 0 or (t.max_size is not None and int(t.max_size) <= 0):
        raise Unsupported(f"{name}(min_size={t.min_size!r}, max_size={t.max_size!r})")
    _interp(t.interpolation, name, allowed=("bilinear", "bicubic"))  # refuses the others
    return {
        "op": "random_shortest_size",
        "min_size": min_size,
        "max_size": None if t.max_size is None else int(t.max_size),
        "interpolation": _resize_filter(t, name, on_tensor),
    }


#: The steps torchvision raises at for a target without boxes, by their ops' names.
_NEEDS_BOXES = {"random_iou_crop": "RandomIoUCrop", "sanitize_bounding_boxes": "SanitizeBoundingBoxes"}


def translate_detection(transform) -> tuple[str, str, bool, TargetSteps]:
    """`(pipeline JSON, dtype, pure, target steps)` for torchvision v2 detection transforms on
    `(image, target)`: photometric distortion on the whole image, then zoom-out, IoU crop, flip
    and a fixed `Resize((h, w))` or a `RandomShortestSize` (each image its own size; the flip
    before or after it), pixel ops at the output size, the conversion to float, and
    SanitizeBoundingBoxes where it stands. `pure`: the image and boxes leave as plain tensors
    (ToPureTensor), not `tv_tensors`."""
    import PIL.Image
    from torchvision import tv_tensors

    from ._transforms import _pixel_op

    pre: list[dict] = []
    geometry: list[dict] = []
    flip: dict | None = None
    flip_after_shortest = False
    flip_after_resize = False
    zoom_fill: int | None = 0
    resize: dict | None = None
    pixel: list[dict] = []
    sanitize: dict | None = None
    sanitize_after_resize = False
    clamp: dict | None = None
    clamp_after_resize = False
    normalize: dict | None = None
    image_type: Any = PIL.Image.Image
    dtype: str | None = None
    converted_by = ""  # the step that converted to float (ToDtype or ConvertImageDtype)
    pure = False
    for t in steps(transform):
        name = type(t).__name__
        if pure and not _is(t, "ToPureTensor"):
            raise Unsupported(f"{name} after ToPureTensor (torchvision would not move the boxes)")
        if _is(t, "RandomPhotometricDistort"):
            if geometry or flip or resize:
                raise Unsupported("RandomPhotometricDistort after the geometry (hpuload runs it on the whole image)")
            pre.append(
                {
                    "op": "random_photometric_distort",
                    "brightness": [float(v) for v in t.brightness],
                    "contrast": [float(v) for v in t.contrast],
                    "saturation": [float(v) for v in t.saturation],
                    "hue": [float(v) for v in t.hue],
                    "p": float(t.p),
                    # On a PIL image torchvision shifts the hue through Pillow's byte HSV.
                    "pil": image_type is PIL.Image.Image,
                }
            )
        elif _is(t, "RandomZoomOut"):
            if geometry or flip or resize:
                raise Unsupported("RandomZoomOut after another geometric transform")
            if clamp is not None:
                raise Unsupported("RandomZoomOut after ClampBoundingBoxes (hpuload clamps after the zoom-out)")
            if dtype is not None:
                raise Unsupported("RandomZoomOut after the conversion to float")
            zoom_fill = _mask_fill(t)
            geometry.append(
                {
                    "op": "random_zoom_out",
                    "fill": _image_fill(t, image_type),
                    "side_range": [float(v) for v in t.side_range],
                    "p": float(t.p),
                }
            )
        elif _is(t, "RandomIoUCrop"):
            if flip or resize or any(g["op"] == "random_iou_crop" for g in geometry):
                raise Unsupported("RandomIoUCrop after the flip, the resize or another RandomIoUCrop")
            if clamp is not None:
                raise Unsupported("RandomIoUCrop after ClampBoundingBoxes (hpuload clamps after the crop)")
            geometry.append(_iou_crop(t))
        elif _is(t, "RandomHorizontalFlip"):
            if flip is not None:
                raise Unsupported("two RandomHorizontalFlip steps")
            # Before or after a fixed resize alike: a mirror commutes with it, for boxes and
            # pixels. After RandomShortestSize (the multiscale augmentation) it stays there, so
            # that the boxes are mirrored in the resized width, as torchvision's arithmetic is.
            flip = {"op": "random_horizontal_flip", "p": float(t.p)}
            flip_after_shortest = resize is not None and resize["op"] == "random_shortest_size"
            flip_after_resize = resize is not None
        elif _is(t, "Resize"):
            if resize is not None:
                raise Unsupported("two Resize steps")
            if pixel:
                raise Unsupported("Resize after a pixel op")
            size, max_size = t.size, getattr(t, "max_size", None)
            on_tensor = image_type is not PIL.Image.Image
            if isinstance(size, int) or (isinstance(size, (list, tuple)) and len(size) == 1):
                # The shorter side (capped by `max_size`): each image its own size, as
                # RandomShortestSize gives it, by torchvision's Resize arithmetic.
                if any(g["op"] == "random_iou_crop" for g in geometry):
                    raise Unsupported("Resize of the shorter side after RandomIoUCrop")
                _interp(t.interpolation, name, allowed=("bilinear", "bicubic"))  # refuses the others
                short = size if isinstance(size, int) else size[0]
                resize = {
                    "op": "random_shortest_size",
                    "min_size": [int(short)],
                    "max_size": None if max_size is None else int(max_size),
                    "as_resize": True,
                    "interpolation": _resize_filter(t, name, on_tensor),
                }
            elif size is None or max_size is not None:
                raise Unsupported(f"Resize(size={size!r}, max_size={max_size!r})")
            else:
                resize = {"op": "resize", "size": _hw(size, name), "interpolation": _resize_filter(t, name, on_tensor)}
        elif _is(t, "RandomShortestSize"):
            if resize is not None:
                raise Unsupported("two Resize steps")
            if pixel:
                raise Unsupported("RandomShortestSize after a pixel op")
            if any(g["op"] == "random_iou_crop" for g in geometry):
                raise Unsupported("RandomShortestSize after RandomIoUCrop")
            resize = shortest_size(t, name, on_tensor=image_type is not PIL.Image.Image)
        elif _is(t, "ToImage") or _is(t, "PILToTensor"):
            if image_type is not PIL.Image.Image:
                raise Unsupported(f"{name} after another tensor conversion")
            image_type = tv_tensors.Image if _is(t, "ToImage") else torch.Tensor
        elif _is(t, "ToDtype") or _is(t, "ConvertImageDtype"):
            target = t.dtype
            if isinstance(target, dict):
                image_target = target.get(tv_tensors.Image, target.get("others"))
                if any(k not in (tv_tensors.Image, "others") and v is not None for k, v in target.items()):
                    raise Unsupported(f"{name} with a dtype for other than images")
                target = image_target
            scale = True if _is(t, "ConvertImageDtype") else bool(getattr(t, "scale", False))
            out = _torch_dtype_name(target)
            if image_type is PIL.Image.Image or dtype is not None:
                raise Unsupported(f"{name} must follow one ToImage or PILToTensor")
            if out is None or (out != "u8" and not scale):
                raise Unsupported(f"{name}({target}, scale={scale}): hpuload scales to [0, 1]")
            dtype = out
            converted_by = name
        elif _is(t, "ConvertBoundingBoxFormat"):
            if _bbox_format(t) != "XYXY":
                raise Unsupported(f"ConvertBoundingBoxFormat({_bbox_format(t)}) (hpuload gives XYXY boxes)")
        elif _is(t, "ClampBoundingBoxes"):
            if getattr(t, "clamping_mode", "auto") is None:
                continue  # clamps nothing
            if sanitize is not None or clamp is not None:
                raise Unsupported("ClampBoundingBoxes after SanitizeBoundingBoxes or twice (hpuload clamps once, before sanitizing)")
            clamp = {"op": "clamp_bounding_boxes"}
            clamp_after_resize = resize is not None
        elif _is(t, "SanitizeBoundingBoxes"):
            if t.labels_getter != "default":
                raise Unsupported("SanitizeBoundingBoxes with a labels_getter of its own")
            if sanitize is not None:
                raise Unsupported("two SanitizeBoundingBoxes steps")
            sanitize = {"op": "sanitize_bounding_boxes", "min_size": float(t.min_size), "min_area": float(t.min_area)}
            sanitize_after_resize = resize is not None
        elif _is(t, "Normalize"):
            if dtype in (None, "u8") or normalize is not None:
                raise Unsupported("Normalize before the conversion to float, or twice")
            normalize = {
                "op": "normalize",
                "mean": [float(m) for m in t.mean],
                "std": [float(s) for s in t.std],
                # v2 scales by the reciprocal, v1's ConvertImageDtype divides; after a
                # conversion to f16 or bf16 each step is rounded to it, as torch does.
                "to_float": "multiply" if converted_by == "ToDtype" else "divide",
                "in_output_dtype": dtype in ("f16", "bf16"),
            }
        elif _is(t, "ToPureTensor"):
            pure = True
        else:
            # On a PIL image torchvision runs Pillow's own arithmetic (ImageEnhance, byte HSV).
            op = _pixel_op(t, pil=image_type is PIL.Image.Image)
            if op is None:
                raise Unsupported(f"transform {type(t).__module__}.{name} is not one hpuload implements for detection")
            if dtype is not None:
                raise Unsupported(f"{name} after the conversion to float")
            if _moves_pixels(op):
                raise Unsupported(f"{name} in a detection pipeline (it would have to move the boxes)")
            if resize is None and not (geometry or flip or sanitize):
                # Before the geometry: on the whole image, among the photometric distortions.
                pre.append(op)
            else:
                pixel.append(op)
    if dtype is None and image_type is PIL.Image.Image:
        raise Unsupported("the transforms yield PIL images, not tensors (add ToImage and ToDtype)")
    if normalize is not None:
        mean, std = normalize["mean"], normalize["std"]
        normalize["mean"], normalize["std"] = (mean * 3 if len(mean) == 1 else mean), (std * 3 if len(std) == 1 else std)
    elif converted_by == "ToDtype" and dtype not in (None, "u8"):
        # v2 scales by the reciprocal of 255, which differs from `x / 255` in the last bit of
        # a third of the f32 values: the identity normalization carries that conversion.
        normalize = {"op": "normalize", "mean": [0.0] * 3, "std": [1.0] * 3, "to_float": "multiply"}
    ops = pre + geometry + ([flip] if flip and not flip_after_shortest else [])
    # A clamp commutes with a flip (mirrored boxes inside the canvas stay inside).
    if clamp is not None and not clamp_after_resize:
        ops.append(clamp)
    if sanitize is not None and not sanitize_after_resize:
        ops.append(sanitize)
    if resize is not None:
        ops.append(resize)
    if flip and flip_after_shortest:
        ops.append(flip)
    if clamp is not None and clamp_after_resize:
        ops.append(clamp)
    if sanitize is not None and sanitize_after_resize:
        ops.append(sanitize)
    ops += pixel + ([normalize] if normalize else [])
    needs_boxes = next((_NEEDS_BOXES[o["op"]] for o in ops if o["op"] in _NEEDS_BOXES), None)
    on_targets = TargetSteps(flip_after_resize, zoom_fill, needs_boxes, sanitize is not None)
    return json.dumps({"name": "torchvision-detection", "ops": ops}), dtype or "u8", pure, on_targets


class Targets:
    """How a batch's target records become what the user's script gets."""

    #: The part of a sample's plan that moves its masks.
    plan_key = "detect"

    def __init__(self, *, max_boxes: int, keys, pure: bool, raw, reference: "Reference | None" = None):
        self.max_boxes = max_boxes
        #: The detection reference's own CocoDetection (its v1 path): targets as its
        #: ConvertCocoPolysToMask and v1 transforms make them.
        self.reference = reference
        #: The wrapped dataset's targets: a `Wrapper`, or the keys of the Rust fields alone
        #: (under a pipeline the user names); None: a raw CocoDetection.
        self.keys = keys
        #: Plain tensors (after ToPureTensor), else `tv_tensors.Image` / `BoundingBoxes`.
        self.pure = pure
        #: A raw CocoDetection: `(COCO, target_transform, image ids by dataset index)`.
        self.raw = raw

    @property
    def moves_masks(self) -> bool:
        """Whether a wrapped dataset's targets hold masks, which the sample's drawn plan moves."""
        return isinstance(self.keys, Wrapper) and self.keys.masks

    def fields(self, records: torch.Tensor) -> dict[str, torch.Tensor]:
        """The padded fields of `[N, record bytes]` uint8 records, as views (no copy):
        `image_id [N]`, `size [N, 2]` int32 (each image's height and width), `count [N]`,
        `boxes [N, M, 4]` float32 XYXY, `labels [N, M]` int64 (-1 past count), `valid [N, M]`
        bool."""
        n, m = records.shape[0], self.max_boxes
        boxes_at, labels_at, valid_at = 24, 24 + 16 * m, 24 + 24 * m
        return {
            "image_id": records[:, 0:8].view(torch.int64)[:, 0],
            "size": records[:, 16:24].view(torch.int32),
            "boxes": records[:, boxes_at:labels_at].view(torch.float32).view(n, m, 4),
            "labels": records[:, labels_at:valid_at].view(torch.int64),
            "count": records[:, 8:16].view(torch.int64)[:, 0],
            "valid": records[:, valid_at : valid_at + m].view(torch.bool),
        }

    def static(self, images: torch.Tensor, records: torch.Tensor, indices: list[int], detects=None):
        """Without a collate_fn: `(images [N, 3, H, W], padded target fields)` (static shapes
        for graph mode); for a raw CocoDetection, `(images, [annotation lists])`; for the
        reference's own CocoDetection, what torch's `default_collate` makes of its samples."""
        if self.reference is not None:
            import torch.utils.data as tud

            return tud.default_collate(self.samples(images, records, indices, detects))
        if self.raw is not None:
            return images, [self._raw_target(i) for i in indices]
        fields = self.fields(records)
        if images.ndim == 2:
            # Without a Resize each image keeps its own size: one view per image.
            return self.images(images, fields["size"].tolist()), fields
        return images, fields

    @staticmethod
    def images(rows: torch.Tensor, sizes: list[list[int]]) -> list[torch.Tensor]:
        """Views `[3, h, w]` of each image at the start of its row of `rows` `[N, E]`."""
        return [rows[i, : 3 * h * w].view(3, h, w) for i, (h, w) in enumerate(sizes)]

    def samples(self, images: torch.Tensor, records: torch.Tensor, indices: list[int], detects=None) -> list[tuple]:
        """Per sample `(image, target)` as torchvision's dataset returns it, for the user's
        collate_fn: views of the batch, a target dict per image (its boxes and labels cut to
        the boxes kept). `detects(index, width, height)`: that sample's drawn detection plan
        (the reference's v1 path moves its masks by it)."""
        n = images.shape[0]
        if self.raw is not None:
            return [(images[i], self._raw_target(indices[i])) for i in range(n)]
        f = self.fields(records)
        counts = f["count"].tolist()
        ids = f["image_id"].tolist()
        sizes = f["size"].tolist()
        per_image = self.images(images, sizes) if images.ndim == 2 else images
        if self.reference is not None:
            ref = self.reference
            return [
                (
                    per_image[i],
                    ref.target(
                        ids[i], f["boxes"][i, : counts[i]], f["labels"][i, : counts[i]], detects, indices[i], out=sizes[i]
                    ),
                )
                for i in range(n)
            ]
        out = []
        if not self.pure:
            from torchvision import tv_tensors
        for i in range(n):
            image = per_image[i]
            h, w = sizes[i]
            target: dict[str, Any] = {}
            c = counts[i]
            if isinstance(self.keys, Wrapper):
                boxes, labels = f["boxes"][i, :c], f["labels"][i, :c]
                target = self.keys.target(ids[i], boxes, labels, c, self.pure, (h, w), detects, indices[i])
                out.append((image if self.pure else tv_tensors.Image(image), target))
                continue
            if "image_id" in self.keys:
                target["image_id"] = ids[i]
            if "boxes" in self.keys:
                boxes = f["boxes"][i, :c]
                if not self.pure:
                    boxes = tv_tensors.BoundingBoxes(boxes, format="XYXY", canvas_size=(h, w))
                target["boxes"] = boxes
            if "labels" in self.keys:
                target["labels"] = f["labels"][i, :c]
            if not self.pure:
                image = tv_tensors.Image(image)
            out.append((image, target))
        return out

    def _raw_target(self, index: int):
        coco, target_transform, ids = self.raw
        anns = coco.loadAnns(coco.getAnnIds(ids[index]))
        return target_transform(anns) if target_transform is not None else anns


# --- The detection reference's v1 path -----------------------------------------------------


def _flatten(transform) -> list:
    """The steps of the reference's own `Compose` (and of the presets that hold one in
    `.transforms`), nested ones flattened."""
    inner = getattr(transform, "transforms", None)
    if callable(transform) and isinstance(inner, (list, tuple)):
        return [step for t in inner for step in _flatten(t)]
    if callable(transform) and inner is not None and callable(inner) and not isinstance(inner, (list, tuple)):
        return _flatten(inner)
    return [transform]


def _steps(transform) -> list:
    """`_flatten` of a transform whose compositions are checked to run their steps in
    sequence (`check_sequential`); `Unsupported` where one does not."""
    check_sequential(transform)
    return _flatten(transform)


def _own(t, name: str) -> bool:
    """`t` is a class named `name` of the user's code (the reference's `transforms.py`), not
    torchvision's."""
    cls = type(t)
    return cls.__name__ == name and not cls.__module__.startswith("torchvision")


def _keep(boxes: torch.Tensor) -> torch.Tensor:
    return (boxes[:, 3] > boxes[:, 1]) & (boxes[:, 2] > boxes[:, 0])


def _boxes(anns: list, width: int, height: int) -> torch.Tensor:
    """ConvertCocoPolysToMask's boxes: XYWH to XYXY in float32, clamped to the image."""
    boxes = torch.as_tensor([a["bbox"] for a in anns], dtype=torch.float32).reshape(-1, 4)
    boxes[:, 2:] += boxes[:, :2]
    boxes[:, 0::2].clamp_(min=0, max=width)
    boxes[:, 1::2].clamp_(min=0, max=height)
    return boxes


def _xywh_giving(boxes: torch.Tensor) -> list[list[float]]:
    """`[x, y, w, h]` per XYXY float32 box such that float32 `x + w`, `y + h` (how hpuload's
    COCO reader turns them back, as torchvision does) give the box exactly."""
    import numpy as np

    b = boxes.numpy().astype(np.float32)
    out = []
    for x1, y1, x2, y2 in b:
        sides = []
        for lo, hi in ((x1, x2), (y1, y2)):
            d = np.float32(hi - lo)
            for _ in range(4):
                s = np.float32(lo + d)
                if s == hi:
                    break
                d = np.nextafter(d, np.float32(np.inf) if s < hi else np.float32(-np.inf), dtype=np.float32)
            sides.append(float(d))
        out.append([float(x1), float(y1), sides[0], sides[1]])
    return out


class Reference:
    """torchvision's detection reference run without `--use-v2`: its own `CocoDetection`
    subclass (`coco_utils.py`: torchvision's, with `__getitem__` handing `(image,
    {"image_id", "annotations"})` to its `_transforms`), whose transforms start with its
    `ConvertCocoPolysToMask` (crowds dropped, boxes to XYXY clamped to the image, empty ones
    dropped with their labels and masks; `area` and `iscrowd` of every non-crowd annotation,
    unfiltered) followed by its own v1 transforms (`transforms.py`). Recognised by what its
    `__getitem__` and `ConvertCocoPolysToMask` do on one image, never by name alone."""

    def __init__(self, dataset, steps: list):
        self.dataset = dataset
        self.coco = dataset.coco
        #: The v1 steps after ConvertCocoPolysToMask.
        self.steps = steps
        #: A RandomShortestSize or ScaleJitter among them (before any flip): masks are
        #: resized to each sample's size (then cut and padded by a FixedSizeCrop), then flipped.
        self.resizes = any(_own(t, "RandomShortestSize") or _own(t, "ScaleJitter") for t in steps)

    @classmethod
    def of(cls, inner) -> "Reference":
        """The reference's dataset, checked, or `Unfit` saying why it is not."""
        import PIL.Image
        from torchvision.datasets import CocoDetection

        name = type(inner).__name__
        kind = type(inner)
        if kind._load_image is not CocoDetection._load_image or kind._load_target is not CocoDetection._load_target:
            raise Unfit(f"{name} loads its images or targets itself (not torchvision's CocoDetection's way)")
        if not hasattr(inner, "_transforms"):
            raise Unfit(f"{name} is not torchvision's CocoDetection (a subclass may load differently)")
        coco = inner.coco
        at = next((i for i, image_id in enumerate(inner.ids) if coco.getAnnIds(image_id)), None)
        if at is None:
            raise Unfit(f"{name} has no image with annotations to check it by")
        # Its __getitem__ with a recorder for transforms: it must hand over the image and
        # {"image_id", "annotations"} as the reference's does.
        seen = []
        saved = inner._transforms
        inner._transforms = lambda image, target: seen.append((image, target)) or (image, target)
        try:
            inner[at]
        except Exception as e:
            raise Unfit(f"{name}.__getitem__ does not run with its transforms recorded ({type(e).__name__}: {e})") from e
        finally:
            inner._transforms = saved
        image_id = inner.ids[at]
        anns = coco.loadAnns(coco.getAnnIds(image_id))
        if len(seen) != 1 or not isinstance(seen[0][0], PIL.Image.Image):
            raise Unfit(f"{name}.__getitem__ does not hand a PIL image to its transforms once")
        if seen[0][1] != {"image_id": image_id, "annotations": anns}:
            raise Unfit(f"{name}.__getitem__ hands its transforms another target than {{image_id, annotations}}")
        steps = _steps(saved)
        if not steps or not _own(steps[0], "ConvertCocoPolysToMask"):
            first = type(steps[0]).__name__ if steps else "nothing"
            raise Unsupported(f"{name}'s transforms start with {first}, not the reference's ConvertCocoPolysToMask")
        ref = cls(inner, steps[1:])
        ref._check_convert(steps[0], image_id, anns, seen[0][0].size)
        return ref

    def _check_convert(self, convert, image_id: int, anns: list, size: tuple[int, int]) -> None:
        """`convert` (the user's ConvertCocoPolysToMask) gives on a blank image of `size` what
        `target` gives for that image, flip aside."""
        import PIL.Image

        _, got = convert(PIL.Image.new("RGB", size), {"image_id": image_id, "annotations": anns})
        if not isinstance(got, dict) or "keypoints" in got:
            raise Unsupported("ConvertCocoPolysToMask gives keypoints (hpuload makes boxes, labels and masks)")
        boxes = _boxes([a for a in anns if a["iscrowd"] == 0], *size)
        keep = _keep(boxes)
        want = self.target(image_id, boxes[keep], self._labels(image_id)[keep], None, None, size=size)
        same = list(got) == list(want) and all(
            torch.equal(got[k], want[k]) if isinstance(want[k], torch.Tensor) else got[k] == want[k] for k in want
        )
        if not same:
            raise Unsupported(f"{type(convert).__name__} does not give the reference's targets")

    def _labels(self, image_id: int) -> torch.Tensor:
        anns = [a for a in self.coco.loadAnns(self.coco.getAnnIds(image_id)) if a["iscrowd"] == 0]
        return torch.tensor([a["category_id"] for a in anns], dtype=torch.int64)

    def annotations(self, fields) -> list[dict]:
        """The file's annotations as ConvertCocoPolysToMask leaves them for each image (in
        its order): crowds and empty boxes out, the rest clamped to the image."""
        out = []
        coco = self.coco
        for image_id, record in coco.imgs.items():
            anns = [a for a in coco.loadAnns(coco.getAnnIds(image_id)) if a["iscrowd"] == 0]
            if not anns:
                continue
            boxes = _boxes(anns, record["width"], record["height"])
            keep = _keep(boxes).tolist()
            kept = [a for a, k in zip(anns, keep) if k]
            for a, bbox in zip(kept, _xywh_giving(boxes[torch.tensor(keep)])):
                slim = _slim(a, fields)
                slim["bbox"] = bbox
                out.append(slim)
        return out

    def _masks_area_crowd(self, image_id: int, size: tuple[int, int], flip: bool, out=None, fixed=None, kept=None) -> tuple:
        """`(masks of the kept boxes, resized to `out` `(height, width)` by torchvision's
        nearest resize when given, then mirrored when `flip`, area, iscrowd)` of an image as
        ConvertCocoPolysToMask (and the v1 RandomShortestSize and flip) make them, for the
        image's `(width, height)`. With `fixed` (a sample's drawn FixedSizeCrop), the masks
        of the boxes `kept` when it cut anything (the reference filters them only then),
        resized to the size it cut from, cut, padded with 0 to its size, then mirrored."""
        from pycocotools import mask as coco_mask

        from . import _hpuload

        width, height = size
        anns = [a for a in self.coco.loadAnns(self.coco.getAnnIds(image_id)) if a["iscrowd"] == 0]
        # Each annotation's mask: the union of its polygons' (0 or 1 each, so the union is
        # torch's `any` over them, which gives uint8 for uint8), one `[h, w]` plane each, for
        # the objects whose boxes ConvertCocoPolysToMask keeps. pycocotools rasterizes (its
        # `frPyObjects`, the reference's own step); the RLE is decoded row-major (and
        # mirrored) in Rust rather than column-major, transposed and flipped.
        keep = _keep(_boxes(anns, width, height)).tolist()
        objects = []
        for a in (a for a, k in zip(anns, keep) if k):
            rles = coco_mask.frPyObjects(a["segmentation"], height, width)
            rles = rles if isinstance(rles, list) else [rles]
            objects.append([r["counts"] if isinstance(r["counts"], bytes) else str(r["counts"]).encode() for r in rles])
        placement = None
        if fixed is not None:
            if fixed["cropped"]:
                objects = [objects[k] for k in kept]
            placement = tuple(tuple(fixed[k]) for k in ("before", "at", "content", "size"))
            out = tuple(fixed["size"])
        planes = _hpuload.coco_masks(objects, height, width, flip, None if out is None else tuple(out), placement)
        masks = torch.frombuffer(planes, dtype=torch.uint8) if planes else torch.zeros(0, dtype=torch.uint8)
        area = torch.tensor([a["area"] for a in anns])
        iscrowd = torch.tensor([a["iscrowd"] for a in anns])
        return masks.view(len(objects), *(out or (height, width))), area, iscrowd

    def target(self, image_id: int, boxes, labels, detects, index, size=None, out=None) -> dict:
        """The reference's target dict for one sample: its boxes and labels after the v1
        transforms, its masks (resized to the output's `(height, width)` `out` by
        RandomShortestSize, or to the drawn size by ScaleJitter, as the reference does with
        torchvision's nearest resize; then cut and padded by a FixedSizeCrop; then flipped
        when the sample was: the v1 zoom-out and IoU crop leave masks as they are),
        `image_id`, `area` and `iscrowd`. `detects(index, width, height)`: the sample's drawn
        detection plan (its flip, its fixed-size crop and the boxes it kept)."""
        if size is None:
            record = self.coco.imgs[image_id]
            size = (record["width"], record["height"])
        drawn = detects(index, *size) if detects is not None else None
        flip = bool(drawn and drawn["flip"])
        fixed = drawn.get("fixed") if drawn else None
        # Resized when the resize changed the size (an image with no mask gets an empty stack
        # at its new size, where torch's interpolate refuses an empty batch).
        resize = self.resizes and out is not None and tuple(out) != (size[1], size[0])
        masks, area, iscrowd = self._masks_area_crowd(
            image_id, size, flip, tuple(out) if resize else None, fixed, drawn and drawn["kept"]
        )
        return {"boxes": boxes, "labels": labels, "masks": masks, "image_id": image_id, "area": area, "iscrowd": iscrowd}


#: The v1 steps after which no resize may come (hpuload resizes the zoom-out's canvas, once).
_BOX_MOVERS = ("random_iou_crop", "random_shortest_size", "scale_jitter", "fixed_size_crop")


def scale_jitter(t, name: str, on_tensor: bool) -> dict:
    """The `scale_jitter` op of a ScaleJitter (torchvision v2's or the detection reference's
    own class: the same attributes)."""
    target = [int(v) for v in t.target_size]
    lo, hi = (float(v) for v in t.scale_range)
    if len(target) != 2 or min(target) <= 0 or not 0 < lo <= hi:
        raise Unsupported(f"{name}(target_size={t.target_size!r}, scale_range={t.scale_range!r})")
    _interp(t.interpolation, name, allowed=("bilinear", "bicubic"))  # refuses the others
    return {
        "op": "scale_jitter",
        "target_size": target,
        "scale_range": [lo, hi],
        "interpolation": _resize_filter(t, name, on_tensor),
    }


def fixed_size_crop(t, on_tensor: bool) -> dict:
    """The `fixed_size_crop` op of the detection reference's own FixedSizeCrop, with its fill
    as torchvision's `pad` takes it: on a PIL image each value truncated to an integer (one
    value for all three channels); on a tensor one number only (the reference's own call
    fails on a tensor with a sequence, which torch's loader then shows)."""
    if t.padding_mode != "constant":
        raise Unsupported(f"FixedSizeCrop(padding_mode={t.padding_mode!r})")
    fill = t.fill
    if on_tensor:
        if not isinstance(fill, (int, float)) or fill != int(fill):
            raise Unsupported(f"FixedSizeCrop(fill={fill!r}) on a tensor")
        values = [int(fill)] * 3
    else:
        values = [int(v) for v in (fill if isinstance(fill, (list, tuple)) else [fill])]
        values = values * 3 if len(values) == 1 else values
    if len(values) != 3 or any(not 0 <= v <= 255 for v in values):
        raise Unsupported(f"FixedSizeCrop(fill={fill!r})")
    size = [int(t.crop_height), int(t.crop_width)]
    if min(size) <= 0:
        raise Unsupported(f"FixedSizeCrop(size={size!r})")
    return {"op": "fixed_size_crop", "size": size, "fill": values}


def translate_reference(transform) -> tuple[str, str]:
    """`(pipeline JSON, dtype)` of the detection reference's v1 transforms after its
    ConvertCocoPolysToMask (`transforms.py`'s own classes, as `presets.py` builds them
    without `--use-v2`): `RandomPhotometricDistort`, `RandomZoomOut` (on a PIL image it pads
    with its `fill`, the mean), `RandomIoUCrop` (boxes whose centre it leaves out are dropped
    at once, nothing sanitized after), `RandomShortestSize` (the `multiscale` augmentation;
    masks resized with it), `ScaleJitter` then `FixedSizeCrop` (the `lsj` augmentation; masks
    resized, cut and padded with them), `RandomHorizontalFlip`, `PILToTensor`, `ToDtype` /
    `ConvertImageDtype` to float. `Unsupported` for anything else (the reference's copy-paste
    is in its collate_fn, which runs as any collate_fn does)."""
    steps = _steps(transform)
    if steps and _own(steps[0], "ConvertCocoPolysToMask"):
        steps = steps[1:]
    ops: list[dict] = []
    geometry_done = False
    tensor, dtype = False, None
    for t in steps:
        name = type(t).__name__
        if type(t).__module__.startswith("torchvision"):
            raise Unsupported(f"torchvision's {name} in the reference's v1 transforms (hpuload reads the reference's own classes)")
        if dtype is not None:
            raise Unsupported(f"{name} after the conversion to float")
        if _own(t, "RandomPhotometricDistort"):
            if geometry_done or tensor:
                raise Unsupported("RandomPhotometricDistort after the geometry or on a tensor")
            jitter = {k: getattr(t, f"_{k}", None) for k in ("brightness", "contrast", "saturation", "hue")}
            ranges = {k: getattr(j, k, None) for k, j in jitter.items()}
            if any(r is None or len(r) != 2 for r in ranges.values()):
                raise Unsupported("a RandomPhotometricDistort without its four ColorJitters")
            ops.append(
                {
                    "op": "random_photometric_distort",
                    **{k: [float(v) for v in r] for k, r in ranges.items()},
                    "p": float(t.p),
                    "pil": True,  # before PILToTensor: Pillow's byte HSV for the hue
                }
            )
        elif _own(t, "RandomZoomOut"):
            if geometry_done or tensor:
                raise Unsupported("RandomZoomOut after the geometry or on a tensor (it pads a tensor with 0)")
            fill = [int(v) for v in t.fill]
            if len(fill) != 3 or any(not 0 <= v <= 255 for v in fill):
                raise Unsupported(f"RandomZoomOut fill {t.fill!r}")
            ops.append({"op": "random_zoom_out", "fill": fill, "side_range": [float(v) for v in t.side_range], "p": float(t.p)})
        elif _own(t, "RandomIoUCrop"):
            if geometry_done:
                raise Unsupported("RandomIoUCrop after the flip or another RandomIoUCrop")
            ops.append(dict(_iou_crop(t), drop_outside=True))
        elif _own(t, "RandomShortestSize"):
            # The `multiscale` augmentation: masks follow in Reference.target.
            if geometry_done or any(o["op"] in _BOX_MOVERS for o in ops):
                raise Unsupported("RandomShortestSize after another geometric step")
            ops.append(shortest_size(t, name, on_tensor=tensor))
        elif _own(t, "ScaleJitter"):
            # The `lsj` augmentation: masks follow in Reference.target.
            if geometry_done or any(o["op"] in _BOX_MOVERS for o in ops):
                raise Unsupported("ScaleJitter after another geometric step")
            ops.append(scale_jitter(t, name, on_tensor=tensor))
        elif _own(t, "FixedSizeCrop"):
            if geometry_done or any(o["op"] in ("random_zoom_out", "random_iou_crop", "fixed_size_crop") for o in ops):
                raise Unsupported("FixedSizeCrop after the flip, RandomZoomOut, RandomIoUCrop or another FixedSizeCrop")
            ops.append(fixed_size_crop(t, on_tensor=tensor))
        elif _own(t, "RandomHorizontalFlip"):
            if geometry_done:
                raise Unsupported("two RandomHorizontalFlip steps")
            ops.append({"op": "random_horizontal_flip", "p": float(t.p)})
            geometry_done = True
        elif _own(t, "PILToTensor"):
            tensor = True
        elif _own(t, "ToDtype") or _own(t, "ConvertImageDtype"):
            scale = bool(getattr(t, "scale", _own(t, "ConvertImageDtype")))
            if not tensor or t.dtype not in (torch.float32, torch.float) or not scale:
                raise Unsupported(f"{name}({t.dtype}, scale={scale}) (hpuload scales a uint8 tensor to float32 in [0, 1])")
            dtype = "f32"
        else:
            raise Unsupported(f"{type(t).__module__}.{name} is not one of the reference's v1 transforms hpuload runs")
        # What the step was read as, checked by behaviour (on the image as it is at the step).
        check_detection(t, name, tensor and name != "PILToTensor")
    if not tensor:
        raise Unsupported("the reference's transforms yield PIL images, not tensors")
    return json.dumps({"name": "detection-reference-v1", "ops": ops}), dtype or "u8"
