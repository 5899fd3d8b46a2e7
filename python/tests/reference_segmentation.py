"""The shape of torchvision's segmentation reference without `--use-v2` (PIL backend), written
here for the tests to run on both loaders: its `transforms.py` classes on `(image, mask)`
pairs, its training and evaluation presets, and its `collate_fn` (each batch padded to its
largest image, masks with 255). Same draws from the same generators in the same order, same
arithmetic; not imported from anywhere, since the reference is not part of the torchvision
package."""

import random

import numpy as np
import torch
import torch.utils.data
from PIL import Image
from torchvision import transforms as tv1
from torchvision.transforms import functional as F

# The two references' `Compose` on (image, target) pairs is one class.
from reference_v1 import Compose


def pad_if_smaller(img, size, fill=0):
    """Pads a PIL image below and to the right up to `size` on each side shorter than it."""
    if min(img.size) < size:
        w, h = img.size
        img = F.pad(img, (0, 0, max(size - w, 0), max(size - h, 0)), fill=fill)
    return img


class RandomResize:
    def __init__(self, min_size, max_size=None):
        self.min_size = min_size
        self.max_size = min_size if max_size is None else max_size

    def __call__(self, image, target):
        size = random.randint(self.min_size, self.max_size)
        image = F.resize(image, size, antialias=True)
        target = F.resize(target, size, interpolation=tv1.InterpolationMode.NEAREST)
        return image, target


class RandomHorizontalFlip:
    def __init__(self, flip_prob):
        self.flip_prob = flip_prob

    def __call__(self, image, target):
        if random.random() < self.flip_prob:
            image, target = F.hflip(image), F.hflip(target)
        return image, target


class RandomCrop:
    def __init__(self, size):
        self.size = size

    def __call__(self, image, target):
        image = pad_if_smaller(image, self.size)
        target = pad_if_smaller(target, self.size, fill=255)
        top, left, h, w = tv1.RandomCrop.get_params(image, (self.size, self.size))
        return F.crop(image, top, left, h, w), F.crop(target, top, left, h, w)


class PILToTensor:
    def __call__(self, image, target):
        return F.pil_to_tensor(image), torch.as_tensor(np.array(target), dtype=torch.int64)


class ToDtype:
    def __init__(self, dtype, scale=False):
        self.dtype = dtype
        self.scale = scale

    def __call__(self, image, target):
        if not self.scale:
            return image.to(dtype=self.dtype), target
        return F.convert_image_dtype(image, self.dtype), target


class Normalize:
    def __init__(self, mean, std):
        self.mean = mean
        self.std = std

    def __call__(self, image, target):
        return F.normalize(image, mean=self.mean, std=self.std), target


class ConvertImageDtype:
    """The reference's step before `ToDtype` (2021-2023): the image scaled to `dtype`."""

    def __init__(self, dtype):
        self.dtype = dtype

    def __call__(self, image, target):
        return F.convert_image_dtype(image, self.dtype), target


class ToTensor:
    """The reference's conversion before `PILToTensor` (to 2021): the image to float in [0, 1],
    the mask to int64."""

    def __call__(self, image, target):
        return F.to_tensor(image), torch.as_tensor(np.array(target), dtype=torch.int64)


MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class SegmentationPresetTrain:
    def __init__(self, *, base_size, crop_size, hflip_prob=0.5, mean=MEAN, std=STD):
        steps = [RandomResize(int(0.5 * base_size), int(2.0 * base_size))]
        if hflip_prob > 0:
            steps.append(RandomHorizontalFlip(hflip_prob))
        steps += [RandomCrop(crop_size), PILToTensor(), ToDtype(torch.float, scale=True), Normalize(mean=mean, std=std)]
        self.transforms = Compose(steps)

    def __call__(self, img, target):
        return self.transforms(img, target)


class SegmentationPresetEval:
    def __init__(self, *, base_size, mean=MEAN, std=STD):
        self.transforms = Compose(
            [RandomResize(base_size, base_size), PILToTensor(), ToDtype(torch.float, scale=True), Normalize(mean=mean, std=std)]
        )

    def __call__(self, img, target):
        return self.transforms(img, target)


def cat_list(images, fill_value=0):
    max_size = tuple(max(s) for s in zip(*[img.shape for img in images]))
    batched = images[0].new_full((len(images),) + max_size, fill_value)
    for img, pad_img in zip(images, batched):
        pad_img[..., : img.shape[-2], : img.shape[-1]].copy_(img)
    return batched


def collate_fn(batch):
    images, targets = list(zip(*batch))
    return cat_list(images, fill_value=0), cat_list(targets, fill_value=255)


# --- The reference's COCO set (its `coco_utils.py` without `--use-v2`) ----------------------

#: The COCO categories the reference keeps, in the order of VOC's 21 classes (0: none).
CAT_LIST = [0, 5, 2, 16, 9, 44, 6, 3, 17, 62, 21, 67, 18, 19, 4, 1, 64, 20, 63, 7, 72]


class FilterAndRemapCocoCategories:
    """Keeps the annotations of the listed categories; with `remap`, each one's category
    becomes its place in the list (on copies)."""

    def __init__(self, categories, remap=True):
        self.categories = categories
        self.remap = remap

    def __call__(self, image, anno):
        kept = [a for a in anno if a["category_id"] in self.categories]
        if self.remap:
            kept = [dict(a, category_id=self.categories.index(a["category_id"])) for a in kept]
        return image, kept


class ConvertCocoPolysToMask:
    """One semantic mask (a PIL image of mode L) of the annotations: each object's mask the
    union of its polygons (or its RLE), each pixel the largest category covering it, 255
    where two objects overlap."""

    def __call__(self, image, anno):
        from pycocotools import mask as coco_mask

        w, h = image.size
        if not anno:
            return image, Image.fromarray(np.zeros((h, w), np.uint8))
        planes = []
        for a in anno:
            decoded = coco_mask.decode(coco_mask.frPyObjects(a["segmentation"], h, w))
            if decoded.ndim < 3:
                decoded = decoded[..., None]
            # torch's `any` of uint8 stays uint8.
            planes.append(torch.as_tensor(decoded, dtype=torch.uint8).any(dim=2))
        masks = torch.stack(planes)
        cats = torch.as_tensor([a["category_id"] for a in anno], dtype=masks.dtype)
        target = (masks * cats[:, None, None]).max(dim=0).values
        target[masks.sum(0) > 1] = 255
        return image, Image.fromarray(target.numpy())


def remove_images_without_annotations(dataset, cat_list=None):
    """A Subset of the images whose annotations (of the listed categories) cover more than
    1000 pixels in all."""
    keep = []
    for k, image_id in enumerate(dataset.ids):
        anns = dataset.coco.loadAnns(dataset.coco.getAnnIds(imgIds=image_id, iscrowd=None))
        if cat_list:
            anns = [a for a in anns if a["category_id"] in cat_list]
        if anns and sum(a["area"] for a in anns) > 1000:
            keep.append(k)
    return torch.utils.data.Subset(dataset, keep)


def get_coco(images, annotations, transforms, train, cat_list=CAT_LIST):
    """The reference's COCO set: `CocoDetection` with the two COCO steps before
    `transforms`, the training set without its images of little or no annotation."""
    import torchvision

    steps = Compose([FilterAndRemapCocoCategories(cat_list, remap=True), ConvertCocoPolysToMask(), transforms])
    dataset = torchvision.datasets.CocoDetection(str(images), str(annotations), transforms=steps)
    return remove_images_without_annotations(dataset, cat_list) if train else dataset


# --- The reference with `--use-v2` (its `v2_extras.py` and presets on the v2 wrapper) -------


def _v2():
    from torchvision import tv_tensors
    from torchvision.transforms import v2

    return v2, tv_tensors


class PadIfSmaller(_v2()[0].Transform):
    """Pads each input below and to the right up to `size` on each side shorter than it, with
    its type's fill (`fill` may map types to fills)."""

    def __init__(self, size, fill=0):
        super().__init__()
        self.size = size
        self.fill = _v2()[0]._utils._setup_fill_arg(fill)

    def make_params(self, flat_inputs):
        _, height, width = _v2()[0]._utils.query_chw(flat_inputs)
        return {"padding": [0, 0, max(self.size - width, 0), max(self.size - height, 0)]}

    def transform(self, inpt, params):
        if not any(params["padding"]):
            return inpt
        v2 = _v2()[0]
        fill = v2._utils._convert_fill_arg(v2._utils._get_fill(self.fill, type(inpt)))
        return v2.functional.pad(inpt, padding=params["padding"], fill=fill)


class CocoDetectionToVOCSegmentation(_v2()[0].Transform):
    """The v2 wrapper's COCO target (`masks`, `labels`) as one semantic `Mask`: the objects
    of VOC's categories, each pixel the largest VOC class covering it, 255 where two do."""

    COCO_TO_VOC_LABEL_MAP = {c: k for k, c in enumerate(CAT_LIST)}

    def forward(self, image, target):
        v2, tv_tensors = _v2()
        mask = None
        if "masks" in target:
            kept = [(k, self.COCO_TO_VOC_LABEL_MAP[c]) for k, c in enumerate(target["labels"].tolist()) if c in self.COCO_TO_VOC_LABEL_MAP]
            if kept:
                rows, classes = zip(*kept)
                masks = target["masks"][list(rows)].to(torch.uint8)
                mask = (masks * torch.tensor(classes, dtype=torch.uint8).reshape(-1, 1, 1)).max(dim=0).values
                mask[masks.sum(dim=0) > 1] = 255
        if mask is None:
            mask = torch.zeros(v2.functional.get_size(image), dtype=torch.uint8)
        return image, tv_tensors.Mask(mask)


def preset_train_v2(base_size, crop_size, hflip_prob=0.5, mean=MEAN, std=STD):
    v2, tv_tensors = _v2()
    steps = [v2.RandomResize(min_size=int(0.5 * base_size), max_size=int(2.0 * base_size))]
    if hflip_prob > 0:
        steps.append(v2.RandomHorizontalFlip(hflip_prob))
    steps += [
        PadIfSmaller(crop_size, fill={tv_tensors.Mask: 255, "others": 0}),
        v2.RandomCrop(crop_size),
        v2.PILToTensor(),
        v2.ToDtype(dtype={torch.Tensor: torch.float32, tv_tensors.Mask: torch.int64, "others": None}, scale=True),
        v2.Normalize(mean=mean, std=std),
        v2.ToPureTensor(),
    ]
    return v2.Compose(steps)


def preset_eval_v2(base_size, mean=MEAN, std=STD):
    v2, _ = _v2()
    return v2.Compose(
        [
            v2.Resize(size=(base_size, base_size)),
            v2.ToImage(),
            v2.ToDtype(torch.float, scale=True),
            v2.Normalize(mean=mean, std=std),
            v2.ToPureTensor(),
        ]
    )


def get_coco_v2(images, annotations, transforms, train):
    """The reference's COCO set with `--use-v2`: `CocoDetection` wrapped for transforms v2
    (masks and labels), `CocoDetectionToVOCSegmentation` before `transforms`."""
    import torchvision
    from torchvision.datasets import wrap_dataset_for_transforms_v2

    steps = Compose([CocoDetectionToVOCSegmentation(), transforms])
    dataset = torchvision.datasets.CocoDetection(str(images), str(annotations), transforms=steps)
    dataset = wrap_dataset_for_transforms_v2(dataset, target_keys={"masks", "labels"})
    return remove_images_without_annotations(dataset, CAT_LIST) if train else dataset
