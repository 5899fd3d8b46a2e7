"""The shape of torchvision's detection reference without `--use-v2`, written here for the tests
to run on both loaders: its `CocoDetection` subclass (the image and `{"image_id",
"annotations"}` handed to `_transforms`), `ConvertCocoPolysToMask` (crowds dropped, boxes to
XYXY clamped to the image, empty boxes dropped with their labels and masks, `area` and
`iscrowd` of every non-crowd annotation), and its v1 transforms on `(image, target)` pairs as
its `presets.py` combines them ("hflip", "ssd", "multiscale", "lsj"; the PIL backend). Same draws from torch's
generator in the same order, same arithmetic; not imported from anywhere, since the reference
is not part of the torchvision package."""

import torch
import torchvision
from pycocotools import mask as coco_mask
from torchvision import transforms as tv1
from torchvision.ops.boxes import box_iou
from torchvision.transforms import functional as F


class CocoDetection(torchvision.datasets.CocoDetection):
    def __init__(self, img_folder, ann_file, transforms):
        super().__init__(img_folder, ann_file)
        self._transforms = transforms

    def __getitem__(self, idx):
        img, anns = super().__getitem__(idx)
        target = dict(image_id=self.ids[idx], annotations=anns)
        if self._transforms is not None:
            img, target = self._transforms(img, target)
        return img, target


def polygons_to_masks(segmentations, height, width):
    masks = []
    for polygons in segmentations:
        m = coco_mask.decode(coco_mask.frPyObjects(polygons, height, width))
        if m.ndim < 3:
            m = m[..., None]
        masks.append(torch.as_tensor(m, dtype=torch.uint8).any(dim=2))
    return torch.stack(masks, dim=0) if masks else torch.zeros((0, height, width), dtype=torch.uint8)


class ConvertCocoPolysToMask:
    def __call__(self, image, target):
        w, h = image.size
        anno = [obj for obj in target["annotations"] if obj["iscrowd"] == 0]
        boxes = torch.as_tensor([obj["bbox"] for obj in anno], dtype=torch.float32).reshape(-1, 4)
        boxes[:, 2:] += boxes[:, :2]
        boxes[:, 0::2].clamp_(min=0, max=w)
        boxes[:, 1::2].clamp_(min=0, max=h)
        classes = torch.tensor([obj["category_id"] for obj in anno], dtype=torch.int64)
        masks = polygons_to_masks([obj["segmentation"] for obj in anno], h, w)
        keep = (boxes[:, 3] > boxes[:, 1]) & (boxes[:, 2] > boxes[:, 0])
        out = {"boxes": boxes[keep], "labels": classes[keep], "masks": masks[keep], "image_id": target["image_id"]}
        out["area"] = torch.tensor([obj["area"] for obj in anno])
        out["iscrowd"] = torch.tensor([obj["iscrowd"] for obj in anno])
        return image, out


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, image, target):
        for t in self.transforms:
            image, target = t(image, target)
        return image, target


class RandomHorizontalFlip(tv1.RandomHorizontalFlip):
    def forward(self, image, target=None):
        if torch.rand(1) < self.p:
            image = F.hflip(image)
            if target is not None:
                _, _, width = F.get_dimensions(image)
                target["boxes"][:, [0, 2]] = width - target["boxes"][:, [2, 0]]
                if "masks" in target:
                    target["masks"] = target["masks"].flip(-1)
        return image, target


class RandomShortestSize(torch.nn.Module):
    def __init__(self, min_size, max_size, interpolation=F.InterpolationMode.BILINEAR):
        super().__init__()
        self.min_size = [min_size] if isinstance(min_size, int) else list(min_size)
        self.max_size, self.interpolation = max_size, interpolation

    def forward(self, image, target=None):
        _, height, width = F.get_dimensions(image)
        short = self.min_size[torch.randint(len(self.min_size), (1,)).item()]
        ratio = min(short / min(height, width), self.max_size / max(height, width))
        new_height, new_width = int(height * ratio), int(width * ratio)
        image = F.resize(image, [new_height, new_width], interpolation=self.interpolation)
        if target is not None:
            target["boxes"][:, 0::2] *= new_width / width
            target["boxes"][:, 1::2] *= new_height / height
            if "masks" in target:
                target["masks"] = F.resize(target["masks"], [new_height, new_width], interpolation=F.InterpolationMode.NEAREST)
        return image, target


class ScaleJitter(torch.nn.Module):
    def __init__(self, target_size, scale_range=(0.1, 2.0), interpolation=F.InterpolationMode.BILINEAR, antialias=True):
        super().__init__()
        self.target_size, self.scale_range = target_size, scale_range
        self.interpolation, self.antialias = interpolation, antialias

    def forward(self, image, target=None):
        _, height, width = F.get_dimensions(image)
        lo, hi = self.scale_range
        scale = lo + torch.rand(1) * (hi - lo)
        r = min(self.target_size[1] / height, self.target_size[0] / width) * scale
        new_width, new_height = int(width * r), int(height * r)
        image = F.resize(image, [new_height, new_width], interpolation=self.interpolation, antialias=self.antialias)
        if target is not None:
            target["boxes"][:, 0::2] *= new_width / width
            target["boxes"][:, 1::2] *= new_height / height
            if "masks" in target:
                target["masks"] = F.resize(
                    target["masks"], [new_height, new_width], interpolation=F.InterpolationMode.NEAREST, antialias=self.antialias
                )
        return image, target


class FixedSizeCrop(torch.nn.Module):
    def __init__(self, size, fill=0, padding_mode="constant"):
        super().__init__()
        self.crop_height, self.crop_width = size
        self.fill, self.padding_mode = fill, padding_mode

    def _pad(self, image, target, padding):
        left, top, right, bottom = padding
        image = F.pad(image, [left, top, right, bottom], self.fill, self.padding_mode)
        if target is not None:
            target["boxes"][:, 0::2] += left
            target["boxes"][:, 1::2] += top
            if "masks" in target:
                target["masks"] = F.pad(target["masks"], [left, top, right, bottom], 0, "constant")
        return image, target

    def _crop(self, image, target, top, left, height, width):
        image = F.crop(image, top, left, height, width)
        if target is not None:
            boxes = target["boxes"]
            boxes[:, 0::2] -= left
            boxes[:, 1::2] -= top
            boxes[:, 0::2].clamp_(min=0, max=width)
            boxes[:, 1::2].clamp_(min=0, max=height)
            valid = (boxes[:, 0] < boxes[:, 2]) & (boxes[:, 1] < boxes[:, 3])
            target["boxes"], target["labels"] = boxes[valid], target["labels"][valid]
            if "masks" in target:
                target["masks"] = F.crop(target["masks"][valid], top, left, height, width)
        return image, target

    def forward(self, image, target=None):
        _, height, width = F.get_dimensions(image)
        new_height, new_width = min(height, self.crop_height), min(width, self.crop_width)
        if new_height != height or new_width != width:
            r = torch.rand(1)
            top = int(max(height - self.crop_height, 0) * r)
            left = int(max(width - self.crop_width, 0) * r)
            image, target = self._crop(image, target, top, left, new_height, new_width)
        bottom, right = max(self.crop_height - new_height, 0), max(self.crop_width - new_width, 0)
        if bottom or right:
            image, target = self._pad(image, target, [0, 0, right, bottom])
        return image, target


class PILToTensor(torch.nn.Module):
    def forward(self, image, target=None):
        return F.pil_to_tensor(image), target


class ToDtype(torch.nn.Module):
    def __init__(self, dtype, scale=False):
        super().__init__()
        self.dtype, self.scale = dtype, scale

    def forward(self, image, target=None):
        if not self.scale:
            return image.to(dtype=self.dtype), target
        return F.convert_image_dtype(image, self.dtype), target


class RandomIoUCrop(torch.nn.Module):
    def __init__(self, min_scale=0.3, max_scale=1.0, min_aspect_ratio=0.5, max_aspect_ratio=2.0, trials=40):
        super().__init__()
        self.min_scale, self.max_scale = min_scale, max_scale
        self.min_aspect_ratio, self.max_aspect_ratio = min_aspect_ratio, max_aspect_ratio
        self.options = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
        self.trials = trials

    def forward(self, image, target=None):
        _, orig_h, orig_w = F.get_dimensions(image)
        while True:
            option = self.options[int(torch.randint(low=0, high=len(self.options), size=(1,)))]
            if option >= 1.0:
                return image, target
            for _ in range(self.trials):
                r = self.min_scale + (self.max_scale - self.min_scale) * torch.rand(2)
                new_w, new_h = int(orig_w * r[0]), int(orig_h * r[1])
                if not (self.min_aspect_ratio <= new_w / new_h <= self.max_aspect_ratio):
                    continue
                r = torch.rand(2)
                left, top = int((orig_w - new_w) * r[0]), int((orig_h - new_h) * r[1])
                right, bottom = left + new_w, top + new_h
                if left == right or top == bottom:
                    continue
                b = target["boxes"]
                cx, cy = 0.5 * (b[:, 0] + b[:, 2]), 0.5 * (b[:, 1] + b[:, 3])
                inside = (left < cx) & (cx < right) & (top < cy) & (cy < bottom)
                if not inside.any():
                    continue
                boxes = b[inside]
                window = torch.tensor([[left, top, right, bottom]], dtype=boxes.dtype)
                if box_iou(boxes, window).max() < option:
                    continue
                target["boxes"] = boxes
                target["labels"] = target["labels"][inside]
                target["boxes"][:, 0::2] -= left
                target["boxes"][:, 1::2] -= top
                target["boxes"][:, 0::2].clamp_(min=0, max=new_w)
                target["boxes"][:, 1::2].clamp_(min=0, max=new_h)
                return F.crop(image, top, left, new_h, new_w), target


class RandomZoomOut(torch.nn.Module):
    def __init__(self, fill=None, side_range=(1.0, 4.0), p=0.5):
        super().__init__()
        self.fill = [0.0, 0.0, 0.0] if fill is None else fill
        self.side_range, self.p = side_range, p

    def forward(self, image, target=None):
        if torch.rand(1) >= self.p:
            return image, target
        _, orig_h, orig_w = F.get_dimensions(image)
        r = self.side_range[0] + torch.rand(1) * (self.side_range[1] - self.side_range[0])
        canvas_w, canvas_h = int(orig_w * r), int(orig_h * r)
        r = torch.rand(2)
        left, top = int((canvas_w - orig_w) * r[0]), int((canvas_h - orig_h) * r[1])
        right, bottom = canvas_w - (left + orig_w), canvas_h - (top + orig_h)
        image = F.pad(image, [left, top, right, bottom], fill=tuple(int(x) for x in self.fill))
        if target is not None:
            target["boxes"][:, 0::2] += left
            target["boxes"][:, 1::2] += top
        return image, target


class RandomPhotometricDistort(torch.nn.Module):
    def __init__(self, contrast=(0.5, 1.5), saturation=(0.5, 1.5), hue=(-0.05, 0.05), brightness=(0.875, 1.125), p=0.5):
        super().__init__()
        self._brightness = tv1.ColorJitter(brightness=brightness)
        self._contrast = tv1.ColorJitter(contrast=contrast)
        self._hue = tv1.ColorJitter(hue=hue)
        self._saturation = tv1.ColorJitter(saturation=saturation)
        self.p = p

    def forward(self, image, target=None):
        r = torch.rand(7)
        if r[0] < self.p:
            image = self._brightness(image)
        contrast_before = r[1] < 0.5
        if contrast_before and r[2] < self.p:
            image = self._contrast(image)
        if r[3] < self.p:
            image = self._saturation(image)
        if r[4] < self.p:
            image = self._hue(image)
        if not contrast_before and r[5] < self.p:
            image = self._contrast(image)
        if r[6] < self.p:
            channels, _, _ = F.get_dimensions(image)
            permutation = torch.randperm(channels)
            image = F.to_pil_image(F.convert_image_dtype(F.pil_to_tensor(image))[..., permutation, :, :])
        return image, target


#: The multiscale augmentation's shorter sides.
MULTISCALE = (480, 512, 544, 576, 608, 640, 672, 704, 736, 768, 800)


class DetectionPresetTrain:
    def __init__(
        self,
        *,
        data_augmentation,
        hflip_prob=0.5,
        mean=(123.0, 117.0, 104.0),
        min_size=MULTISCALE,
        max_size=1333,
        backend="pil",
        lsj_size=(1024, 1024),
        scale_range=(0.1, 2.0),
    ):
        steps = [PILToTensor()] if backend == "tensor" else []
        if data_augmentation == "hflip":
            steps.append(RandomHorizontalFlip(p=hflip_prob))
        elif data_augmentation == "multiscale":
            steps += [RandomShortestSize(min_size=min_size, max_size=max_size), RandomHorizontalFlip(p=hflip_prob)]
        elif data_augmentation == "lsj":
            steps += [
                ScaleJitter(target_size=lsj_size, scale_range=scale_range, antialias=True),
                FixedSizeCrop(size=lsj_size, fill=mean),
                RandomHorizontalFlip(p=hflip_prob),
            ]
        elif data_augmentation == "ssd":
            steps += [RandomPhotometricDistort(), RandomZoomOut(fill=list(mean)), RandomIoUCrop(), RandomHorizontalFlip(p=hflip_prob)]
        else:
            raise ValueError(data_augmentation)
        if backend == "pil":
            steps.append(PILToTensor())
        self.transforms = Compose(steps + [ToDtype(torch.float, scale=True)])

    def __call__(self, img, target):
        return self.transforms(img, target)


def get_coco(root, ann_file, preset):
    """The reference's `get_coco` for the v1 path (`train` drops images without annotations)."""
    dataset = CocoDetection(str(root), str(ann_file), transforms=Compose([ConvertCocoPolysToMask(), preset]))
    keep = [i for i, image_id in enumerate(dataset.ids) if dataset.coco.getAnnIds(imgIds=image_id, iscrowd=None)]
    return torch.utils.data.Subset(dataset, keep)


def _copy_paste(image, target, paste_image, paste_target, blending=True, resize_interpolation=F.InterpolationMode.BILINEAR):
    """The reference's copy-paste of one pair (its module-level `_copy_paste`, which its
    `SimpleCopyPaste.forward` calls through the module's globals): a random subset of the
    donor's objects (one `randint` draw per donor mask, the distinct values kept) laid over
    `image`, the donor resized to the image's size first when the two differ."""
    donor, donor_target, interpolation = paste_image, paste_target, resize_interpolation
    count = len(donor_target["masks"])
    if count == 0:
        return image, target
    chosen = torch.unique(torch.randint(0, count, (count,), device=donor.device)).to(torch.long)
    masks_in, boxes_in, labels_in = (donor_target[k][chosen] for k in ("masks", "boxes", "labels"))
    size = image.shape[-2:]
    if donor.shape[-2:] != size:
        ratios = torch.tensor((size[1] / donor.shape[-1], size[0] / donor.shape[-2]), device=boxes_in.device)
        donor = F.resize(donor, size, interpolation=interpolation)
        masks_in = F.resize(masks_in, size, interpolation=F.InterpolationMode.NEAREST)
        boxes_in = boxes_in.view(-1, 2, 2).mul(ratios).view(boxes_in.shape)
    alpha = masks_in.sum(dim=0) > 0
    if blending:
        # A blur of a bool mask comes back as bool: every pixel the kernel reaches is pasted.
        alpha = F.gaussian_blur(alpha.unsqueeze(0), kernel_size=(5, 5), sigma=[2.0])
    pasted = image * (~alpha) + donor * alpha
    kept = target["masks"] * (~alpha)
    nonempty = kept.sum((-1, -2)) > 0
    kept = kept[nonempty]
    out = dict(target)
    out["masks"] = torch.cat([kept, masks_in])
    out["boxes"] = torch.cat([torchvision.ops.masks_to_boxes(kept), boxes_in])
    out["labels"] = torch.cat([target["labels"][nonempty], labels_in])
    if "area" in target:
        out["area"] = out["masks"].sum((-1, -2)).to(torch.float32)
    if "iscrowd" in target and "iscrowd" in donor_target and len(target["iscrowd"]) == len(nonempty):
        out["iscrowd"] = torch.cat([target["iscrowd"][nonempty], donor_target["iscrowd"][chosen]])
    bad = (out["boxes"][:, 2:] <= out["boxes"][:, :2]).any(dim=1)
    if bad.any():
        good = ~bad
        for k in ("boxes", "masks", "labels", "area"):
            if k in out:
                out[k] = out[k][good]
        if "iscrowd" in out and len(out["iscrowd"]) == len(good):
            out["iscrowd"] = out["iscrowd"][good]
    return pasted, out


class SimpleCopyPaste(torch.nn.Module):
    """The reference's batch-level copy-paste (`--use-copypaste`, with `lsj` only): each image
    takes objects of the one before it in the batch (the first, of the last)."""

    def __init__(self, blending=True, resize_interpolation=F.InterpolationMode.BILINEAR):
        super().__init__()
        self.blending, self.resize_interpolation = blending, resize_interpolation

    def forward(self, images, targets):
        donors, donor_targets = images[-1:] + images[:-1], targets[-1:] + targets[:-1]
        pairs = [
            _copy_paste(i, t, d, dt, blending=self.blending, resize_interpolation=self.resize_interpolation)
            for i, t, d, dt in zip(images, targets, donors, donor_targets)
        ]
        return [p[0] for p in pairs], [p[1] for p in pairs]


def collate_fn(batch):
    """The reference's `utils.collate_fn`."""
    return tuple(zip(*batch))


def copypaste_collate_fn(batch):
    """The reference's collate under `--use-copypaste`: a fresh `SimpleCopyPaste(blending=True,
    resize_interpolation=BILINEAR)` over each collated batch."""
    copypaste = SimpleCopyPaste(blending=True, resize_interpolation=F.InterpolationMode.BILINEAR)
    return copypaste(*collate_fn(batch))


class GroupedBatchSampler(torch.utils.data.BatchSampler):
    """The reference's default batch sampler (`--aspect-ratio-group-factor 3`,
    `group_by_aspect_ratio.py`): batches of one group each, in the order the wrapped sampler
    reaches `batch_size` of a group; at the end, the fullest groups' leftovers topped up with
    their own samples (repeated as needed) until there are `len(sampler) // batch_size`."""

    def __init__(self, sampler, group_ids, batch_size):
        self.sampler, self.group_ids, self.batch_size = sampler, group_ids, batch_size

    def __iter__(self):
        waiting, seen = {}, {}
        made = 0
        for idx in self.sampler:
            g = self.group_ids[idx]
            waiting.setdefault(g, []).append(idx)
            seen.setdefault(g, []).append(idx)
            if len(waiting[g]) == self.batch_size:
                yield waiting.pop(g)
                made += 1
        left = len(self) - made
        for g, batch in sorted(waiting.items(), key=lambda item: len(item[1]), reverse=True):
            if left == 0:
                break
            short = self.batch_size - len(batch)
            pool = seen[g] * -(-short // len(seen[g]))
            yield batch + pool[:short]
            left -= 1

    def __len__(self):
        return len(self.sampler) // self.batch_size
