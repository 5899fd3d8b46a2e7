"""Semantic segmentation natively: torchvision's `VOCSegmentation` with the segmentation
reference's own training transforms (its `transforms.py` classes as its `presets.py` combines
them without `--use-v2`, the PIL backend): `RandomResize(min_size, max_size)`,
`RandomHorizontalFlip(flip_prob)`, `RandomCrop(size)` (after its `pad_if_smaller`: the image
padded below and to the right with 0, the mask with 255), `PILToTensor`, `ToDtype(float,
scale=True)`, `Normalize(mean, std)`.

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
(the plan's `detect.size`) by the same nearest positions, one tensor per sample."""

from __future__ import annotations

import json
import os
from typing import Any

import torch

from . import _hpuload, _probe
from ._detection import _flatten, _own
from ._options import CocoSource, SamplesSource
from ._transforms import Unsupported

#: What the reference's `RandomCrop` pads a mask with (its `pad_if_smaller(target, size,
#: fill=255)`): the loss's ignore index.
MASK_FILL = 255


class Unfit(Exception):
    """The dataset is a segmentation dataset hpuload cannot take (the message says why)."""


def is_segmentation(dataset) -> bool:
    """torchvision's own `VOCSegmentation` (a subclass may load differently)."""
    import torchvision

    return type(dataset) is torchvision.datasets.VOCSegmentation


def translate(transforms) -> tuple[str, str, tuple[int, int] | None]:
    """`(pipeline JSON, dtype, crop (height, width))` of the reference's v1 training
    transforms, or with `crop` None of its evaluation transforms (each image its own size);
    `Unsupported` for anything else."""
    if transforms is None:
        raise Unsupported("no transforms: each sample is a PIL image and mask of its own size")
    ops: list[dict] = []
    crop = None
    tensor, dtype = False, None
    for t in _flatten(transforms):
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
            ops.append({"op": "random_resize", "min_size": lo, "max_size": hi + 1, "interpolation": "pil_bilinear"})
        elif _own(t, "RandomHorizontalFlip"):
            p = getattr(t, "flip_prob", None)
            if len(ops) != 1 or crop is not None or not isinstance(p, (int, float)):
                raise Unsupported("RandomHorizontalFlip away from between RandomResize and RandomCrop")
            ops.append({"op": "random_horizontal_flip", "p": float(p)})
        elif _own(t, "RandomCrop"):
            size = getattr(t, "size", None)
            if not ops or crop is not None or tensor or not isinstance(size, int) or size <= 0:
                raise Unsupported(f"RandomCrop({size!r}) (hpuload takes one, after RandomResize, on the PIL image)")
            crop = (size, size)
            ops.append({"op": "random_crop", "size": size, "pad_end": True, "fill": [0, 0, 0]})
        elif _own(t, "PILToTensor"):
            if not ops or tensor or (crop is None and len(ops) != 1):
                raise Unsupported("PILToTensor before the resize and crop (the tensor backend resizes otherwise than Pillow)")
            tensor = True
        elif _own(t, "ToDtype"):
            if not tensor or dtype is not None or t.dtype not in (torch.float32, torch.float) or not getattr(t, "scale", False):
                raise Unsupported(f"ToDtype({t.dtype}, scale={getattr(t, 'scale', None)}) (hpuload scales to float32 in [0, 1])")
            dtype = "f32"
        elif _own(t, "Normalize"):
            mean, std = list(getattr(t, "mean", ())), list(getattr(t, "std", ()))
            if dtype is None or len(mean) != 3 or len(std) != 3 or any(s == 0 for s in std):
                raise Unsupported(f"Normalize({mean}, {std}) (hpuload takes three channels after ToDtype)")
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


def source(dataset) -> tuple[dict, str, str, "Masks"]:
    """`(source kwargs, pipeline JSON, dtype, Masks)` for a `VOCSegmentation`; `Unfit` or
    `Unsupported` naming why it cannot run natively."""
    pipeline, dtype, crop = translate(dataset.transforms)
    images, masks = list(dataset.images), list(dataset.masks)
    sizes = []
    for image, mask in zip(images, masks):
        size = _probe.size_of(image)
        if size is None or _probe.size_of(mask) != size:
            raise Unfit(f"{mask} is not as large as its image {image} (each is resized to its own size)")
        why = _unfit_mask(mask)
        if why is not None:
            raise Unfit(f"{mask} is {why} (hpuload reads palette PNGs and 8-bit grey ones as masks)")
        sizes.append(size)
    # The images are opened with `.convert("RGB")`, as hpuload decodes any of them.
    if crop is not None:
        source = SamplesSource([(path, 0) for path in images], [])
    else:
        # Each image its own size: the loader sizes its batches from the sizes a COCO set
        # gives (one without objects), image `i` the dataset's `i`.
        folder = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in images]) if images else "."
        listed = [
            {"id": i + 1, "file_name": os.path.relpath(os.path.abspath(p), folder), "width": w, "height": h}
            for i, (p, (w, h)) in enumerate(zip(images, sizes))
        ]
        text = json.dumps({"images": listed, "annotations": [], "categories": []})
        source = CocoSource(folder, annotations=f"{type(dataset).__name__}({dataset.root!r})", text=text)
    return {"source": source}, pipeline, dtype, Masks(masks, sizes, crop)


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

    def __init__(self, masks: list[str], sizes: list[tuple[int, int]], crop: tuple[int, int] | None):
        self.masks = masks
        #: Each image's `(width, height)`, which its plan is drawn for.
        self.sizes = sizes
        #: The training preset's crop `(height, width)`; None: the evaluation preset, each
        #: image and mask its own size.
        self.crop = crop
        #: The part of a sample's plan that moves its mask: the drawn resize and crop, or the
        #: evaluation resize's size.
        self.plan_key = "resized_crop" if crop is not None else "detect"

    def _own_sizes(self, indices: list[int], plans) -> list[torch.Tensor]:
        """The evaluation preset's masks, `[h, w]` int64 each at its image's resized size."""
        out = []
        for i in indices:
            h, w = plans(i, *self.sizes[i])["size"]
            mask = torch.empty((h, w), dtype=torch.int64)
            _hpuload.segmentation_masks([self.masks[i]], [((h, w), (0, 0), False, False)], h, w, MASK_FILL, mask.data_ptr())
            out.append(mask)
        return out

    @staticmethod
    def _images(images: torch.Tensor, masks: list[torch.Tensor]) -> list[torch.Tensor]:
        """Each image of a batch at its own size (rows `[N, E]`) as a `[3, h, w]` view."""
        return [images[k, : 3 * m.numel()].view(3, *m.shape) for k, m in enumerate(masks)]

    def _batch(self, indices: list[int], plans) -> torch.Tensor:
        """`[N, H, W]` int64: each sample's mask as the reference's transforms make it."""
        drawn = []
        for i in indices:
            d = plans(i, *self.sizes[i])
            drawn.append((tuple(d["resized"]), tuple(d["at"]), bool(d.get("hflip")), bool(d.get("vflip"))))
        h, w = self.crop
        out = torch.empty((len(indices), h, w), dtype=torch.int64)
        _hpuload.segmentation_masks([self.masks[i] for i in indices], drawn, h, w, MASK_FILL, out.data_ptr())
        return out

    def static(self, images: torch.Tensor, records: Any, indices: list[int], plans=None):
        """Without a collate_fn: `[images, masks]`, what `default_collate` makes of the pairs
        (of images of their own sizes: stacked when they have one size, else torch's error)."""
        if self.crop is None:
            import torch.utils.data as tud

            return tud.default_collate(self.samples(images, records, indices, plans))
        return [images, self._batch(indices, plans)]

    def samples(self, images: torch.Tensor, records: Any, indices: list[int], plans=None) -> list[tuple]:
        """Per sample `(image, mask)` as the dataset returns it, for the user's collate_fn."""
        if self.crop is None:
            masks = self._own_sizes(indices, plans)
            return list(zip(self._images(images, masks), masks))
        masks = self._batch(indices, plans)
        return [(images[k], masks[k]) for k in range(len(indices))]
