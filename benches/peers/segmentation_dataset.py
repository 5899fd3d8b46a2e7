"""A user's own Dataset class of images and their segmentation masks, as the U-Net tutorials
write it (the Carvana one's, as written there: `np.array(Image.open(image).convert("RGB"))`,
`np.array(Image.open(mask).convert("L"), dtype=np.float32)`, `mask[mask == 255.0] = 1.0`, an
albumentations `Compose` called with `image=` and `mask=`, `return image, mask`), through
torch's DataLoader or hpuload's drop-in (only the import differs). Kinds: `eval` (the
tutorial's validation `Compose`: `Resize(160, 240)`, `Normalize` to [0, 1], `ToTensorV2`),
`train` (its training `Compose`, as written there: `Resize(160, 240)`, `Rotate(limit=35,
p=1.0)`, `HorizontalFlip(0.5)`, `VerticalFlip(0.1)`, `Normalize`, `ToTensorV2`), `flips`
(`train` without its `Rotate`: session 110's `train`),
`opencv` (`train`'s `Compose` over `cv2.imread` of the image, made RGB, and of the mask in
grey, `mask / 255.0` in float32), `gif` (`train` over GIF masks, as the Carvana set's are,
which the class makes grey: hpuload decodes them natively since session 111), `v2` (torchvision's v2
guide's class: the mask `tv_tensors.Mask(np.array(Image.open(mask)) // 255)`, given with the
image to a v2 `Compose` of `RandomResizedCrop((160, 240))`, `RandomHorizontalFlip`, `ToImage`,
`ToDtype(float32, scale=True)`, `Normalize`; session 112), `v2rot` (`v2` with a `RandomRotation(15)`
after the flip), `joint` (the PyTorch forum's class that moves the image and its mask with
torchvision's functionals itself: `transforms.Resize((176, 256))` of the image and
`TF.resize(mask, ..., NEAREST)`, `RandomCrop.get_params` then `TF.crop` of both at
(160, 240), `TF.hflip`/`TF.vflip` of both when `random.random() > 0.5`, `TF.to_tensor` of
both, then `TF.normalize` of the image; session 113), `unet` (milesial's Pytorch-UNet
`BasicDataset`, as written there: Pillow's `.resize` of the image (bicubic) and of its mask
(nearest) by `scale` 0.5, `np.asarray` of both, the mask's values mapped to class indices in
an `np.zeros` array, the image transposed and divided by 255 `if (img > 1).any()`, a dict of
float32 image and int64 mask; over the photos made one size, 640x426, as Carvana's are, and
GIF masks of palette indices 0 and 1, as Carvana's are; session 114), `unet1` (the same at
`scale=1`, images and masks as read; session 115), `unetrgb` (`unet` over RGB masks of two
colours, which its code maps by `(img == v).all(-1)`), `camvid` (a CamVid-style class: the
image and its colour mask read in RGB, each of 32 colours of its colour map made its class
index in an `np.zeros` of the mask's shape, `label[np.all(rgb == colour, axis=-1)] = k`, then
an albumentations `Compose` of `Resize(240, 320)`, `HorizontalFlip`, `Normalize` and
`ToTensorV2` of both, the mask made `.long()`; over RGB PNG masks of the map's colours;
session 116), `smp` (segmentation_models_pytorch's CamVid example class, as written there,
without an augmentation: the image read by OpenCV and made RGB, the mask read grey by OpenCV
and its classes car, road and sky remapped into `np.zeros_like(mask)`, the image transposed
to CHW; over 480x360 photos and grey PNG masks of CamVid's twelve class indices; session
116), `smpval` (the same with its example's validation augmentation, `A.Compose([A.PadIfNeeded(384,
480)])`). The masks are made once per photo (blocks of 0 and 255,
an 8-bit grey PNG, as Carvana's are binary) under `--masks`. Prints one JSON line per run:
construction time (hpuload's includes its probe of `__getitem__`), the loader's type, and
images/s over the measured epochs (the median; the first epoch warms up).

usage: python segmentation_dataset.py --data DIR --loader hpuload|torch [--kind eval|train|flips|opencv|gif|v2|v2rot|joint|unet|unet1|unetrgb|camvid|smp|smpval]
       [--epochs 2] [--workers 2] [--batch 16] [--images 1000] [--masks /tmp/segmentation-masks]
"""

import argparse
import json
import os
import time

import albumentations as A
import numpy as np
from albumentations.pytorch import ToTensorV2
from PIL import Image
from torch.utils.data import Dataset

ZERO_ONE = A.Normalize(mean=[0.0, 0.0, 0.0], std=[1.0, 1.0, 1.0], max_pixel_value=255.0)


class CarvanaDataset(Dataset):
    """The tutorial's class, as written there, over lists of files."""

    def __init__(self, images, masks, transform=None):
        self.images, self.masks, self.transform = images, masks, transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        image = np.array(Image.open(self.images[index]).convert("RGB"))
        mask = np.array(Image.open(self.masks[index]).convert("L"), dtype=np.float32)
        mask[mask == 255.0] = 1.0
        if self.transform is not None:
            augmentations = self.transform(image=image, mask=mask)
            image = augmentations["image"]
            mask = augmentations["mask"]
        return image, mask


class OpenCVDataset(CarvanaDataset):
    def __getitem__(self, index):
        import cv2

        image = cv2.cvtColor(cv2.imread(self.images[index]), cv2.COLOR_BGR2RGB)
        mask = cv2.imread(self.masks[index], cv2.IMREAD_GRAYSCALE).astype(np.float32) / 255.0
        out = self.transform(image=image, mask=mask)
        return out["image"], out["mask"]


class JointDataset(CarvanaDataset):
    """The forum's class: a method moving the image and its mask alike with the functionals."""

    def transform_pair(self, image, mask):
        import random

        import torchvision.transforms as transforms
        import torchvision.transforms.functional as TF

        image = transforms.Resize(size=(176, 256))(image)
        mask = TF.resize(mask, [176, 256], interpolation=transforms.InterpolationMode.NEAREST)
        i, j, h, w = transforms.RandomCrop.get_params(image, output_size=(160, 240))
        image, mask = TF.crop(image, i, j, h, w), TF.crop(mask, i, j, h, w)
        if random.random() > 0.5:
            image, mask = TF.hflip(image), TF.hflip(mask)
        if random.random() > 0.5:
            image, mask = TF.vflip(image), TF.vflip(mask)
        image = TF.normalize(TF.to_tensor(image), [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
        return image, TF.to_tensor(mask)

    def __getitem__(self, index):
        image = Image.open(self.images[index]).convert("RGB")
        mask = Image.open(self.masks[index])
        return self.transform_pair(image, mask)


class V2Dataset(CarvanaDataset):
    """The class as torchvision's v2 guide writes it: the mask a `tv_tensors.Mask`, given with
    the image to one v2 `Compose`."""

    def __getitem__(self, index):
        from torchvision import tv_tensors

        image = Image.open(self.images[index]).convert("RGB")
        mask = tv_tensors.Mask(np.array(Image.open(self.masks[index])) // 255)
        image, mask = self.transform(image, mask)
        return image, mask


class UNetDataset(CarvanaDataset):
    """milesial's `BasicDataset`, as written there (each id's image and mask found by a glob
    of their folders) but for its values found over the masks (0 and 1, known here)."""

    mask_values = [0, 1]
    scale = 0.5
    mask_suffix = "_mask"

    def __init__(self, images, masks, transform=None):
        from pathlib import Path

        super().__init__(images, masks, transform)
        self.images_dir, self.mask_dir = Path(images[0]).parent, Path(masks[0]).parent
        self.ids = [os.path.splitext(os.path.basename(p))[0] for p in images]

    @staticmethod
    def preprocess(mask_values, pil_img, scale, is_mask):
        w, h = pil_img.size
        newW, newH = int(scale * w), int(scale * h)
        pil_img = pil_img.resize((newW, newH), resample=Image.NEAREST if is_mask else Image.BICUBIC)
        img = np.asarray(pil_img)
        if is_mask:
            mask = np.zeros((newH, newW), dtype=np.int64)
            for i, v in enumerate(mask_values):
                if img.ndim == 2:
                    mask[img == v] = i
                else:
                    mask[(img == v).all(-1)] = i
            return mask
        if img.ndim == 2:
            img = img[np.newaxis, ...]
        else:
            img = img.transpose((2, 0, 1))
        if (img > 1).any():
            img = img / 255.0
        return img

    def __getitem__(self, index):
        import torch

        name = self.ids[index]
        mask_file = list(self.mask_dir.glob(name + self.mask_suffix + ".*"))
        img_file = list(self.images_dir.glob(name + ".*"))
        assert len(img_file) == 1 and len(mask_file) == 1
        mask = Image.open(mask_file[0])
        img = Image.open(img_file[0])
        assert img.size == mask.size
        img = self.preprocess(self.mask_values, img, self.scale, is_mask=False)
        mask = self.preprocess(self.mask_values, mask, self.scale, is_mask=True)
        return {
            "image": torch.as_tensor(img.copy()).float().contiguous(),
            "mask": torch.as_tensor(mask.copy()).long().contiguous(),
        }


#: A colour map of 32 colours (CamVid's has 32 classes), the same on every run.
CAMVID_COLOURS = [tuple(int(v) for v in c) for c in np.random.default_rng(32).integers(0, 256, (32, 3))]


class CamVidDataset(CarvanaDataset):
    """A CamVid-style class: colour masks mapped to class indices by its colour map."""

    def __getitem__(self, index):
        image = np.array(Image.open(self.images[index]).convert("RGB"))
        rgb = np.array(Image.open(self.masks[index]).convert("RGB"))
        label = np.zeros(rgb.shape[:2], dtype=np.uint8)
        for k, colour in enumerate(CAMVID_COLOURS):
            label[np.all(rgb == colour, axis=-1)] = k
        out = self.transform(image=image, mask=label)
        return out["image"], out["mask"].long()


class SmpCamVid(CarvanaDataset):
    """segmentation_models_pytorch's CamVid example class (its `__getitem__` as written there;
    its classes picked by name, as its example picks car, road and sky)."""

    CLASSES = ["sky", "building", "pole", "road", "pavement", "tree", "signsymbol", "fence", "car", "pedestrian", "bicyclist", "unlabelled"]

    def __init__(self, images, masks, transform=None, classes=("car", "road", "sky")):
        super().__init__(images, masks, transform)
        self.images_fps, self.masks_fps, self.augmentation = images, masks, transform
        self.background_class = self.CLASSES.index("unlabelled")
        self.class_values = [self.CLASSES.index(cls.lower()) for cls in classes]
        self.class_map = {self.background_class: 0}
        self.class_map.update({v: i + 1 for i, v in enumerate(self.class_values) if v != self.background_class})

    def __getitem__(self, i):
        import cv2

        image = cv2.imread(self.images_fps[i])
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        mask = cv2.imread(self.masks_fps[i], 0)
        mask_remap = np.zeros_like(mask)
        for class_value, new_value in self.class_map.items():
            mask_remap[mask == class_value] = new_value
        if self.augmentation:
            sample = self.augmentation(image=image, mask=mask_remap)
            image, mask_remap = sample["image"], sample["mask"]
        image = image.transpose(2, 0, 1)
        return image, mask_remap


class UNetColours(UNetDataset):
    """The same class over RGB masks of two colours (its values found over them)."""

    mask_values = [[0, 0, 0], [255, 255, 255]]


class UNetWhole(UNetDataset):
    """The same class at `scale=1` (milesial's `--scale 1`): Pillow's resize of each file to
    its own size is a copy, so images and masks are handed out as read (session 115)."""

    scale = 1.0


def one_size(images, root, size=(640, 426)):
    """The photos made one size (Carvana's are), as JPEGs under `root` (made once)."""
    os.makedirs(root, exist_ok=True)
    out = []
    for k, path in enumerate(images):
        name = os.path.join(root, f"{k:05d}.jpg")
        if not os.path.exists(name):
            Image.open(path).convert("RGB").resize(size, Image.BICUBIC).save(name, quality=90)
        out.append(name)
    return out


def masks_for(images, root, ext="png", palette=False, names=False, colours=None, levels=2):
    """A binary mask per photo, of its size (made once): a grey PNG, or a GIF; of palette
    indices 0 and 1 where `palette` (Carvana's), named as the photo with `_mask` where
    `names` (milesial's layout); an RGB PNG of blocks of `colours` where given."""
    os.makedirs(root, exist_ok=True)
    out = []
    for k, path in enumerate(images):
        stem = os.path.splitext(os.path.basename(path))[0]
        name = os.path.join(root, (stem if names else f"{k:05d}_" + stem) + "_mask." + ext)
        if not os.path.exists(name):
            w, h = Image.open(path).size
            rng = np.random.default_rng(k)
            blocks = rng.integers(0, levels if colours is None else len(colours), (h // 16 + 1, w // 16 + 1), dtype=np.uint8)
            values = np.kron(blocks, np.ones((16, 16), np.uint8))[:h, :w]
            if colours is not None:
                Image.fromarray(np.array(colours, np.uint8)[values]).save(name)
            elif palette:
                # Carvana's: palette indices 0 and 1.
                mask = Image.fromarray(values, mode="L").convert("P")
                mask.putpalette([0, 0, 0, 255, 255, 255] + [0] * 762)
                mask.save(name)
            else:
                Image.fromarray(values * 255 if levels == 2 else values, mode="L").save(name)
        out.append(name)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--loader", choices=["hpuload", "torch"], default="hpuload")
    kinds = ["eval", "train", "flips", "opencv", "gif", "v2", "v2rot", "joint", "unet", "unet1", "unetrgb", "camvid", "smp", "smpval"]
    ap.add_argument("--kind", choices=kinds, default="train")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--masks", default="/tmp/segmentation-masks")
    a = ap.parse_args()
    images = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(a.data) for f in fs if f.lower().endswith((".jpg", ".jpeg", ".png")))
    images = images[:: max(1, len(images) // a.images)][: a.images]
    if a.kind in ("unet", "unet1"):
        images = one_size(images, a.masks + "-unet-images")
        masks = masks_for(images, a.masks + "-unet", "gif", palette=True, names=True)
    elif a.kind == "unetrgb":
        images = one_size(images, a.masks + "-unet-images")
        masks = masks_for(images, a.masks + "-unetrgb", names=True, colours=[(0, 0, 0), (255, 255, 255)])
    elif a.kind == "camvid":
        images = one_size(images, a.masks + "-camvid-images", (480, 360))
        masks = masks_for(images, a.masks + "-camvid", colours=CAMVID_COLOURS)
    elif a.kind in ("smp", "smpval"):
        images = one_size(images, a.masks + "-camvid-images", (480, 360))
        masks = masks_for(images, a.masks + "-smp", levels=12)
    else:
        masks = masks_for(images, a.masks, "gif" if a.kind == "gif" else "png")
    if a.kind in ("v2", "v2rot"):
        import torch
        from torchvision.transforms import v2

        transform = v2.Compose(
            [
                v2.RandomResizedCrop((160, 240), antialias=True),
                v2.RandomHorizontalFlip(),
                *([v2.RandomRotation(15)] if a.kind == "v2rot" else []),
                v2.ToImage(),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
            ]
        )
    elif a.kind in ("joint", "unet", "unet1", "unetrgb", "smp"):
        transform = None
    elif a.kind == "smpval":
        transform = A.Compose([A.PadIfNeeded(384, 480)])
    elif a.kind == "camvid":
        transform = A.Compose([A.Resize(height=240, width=320), A.HorizontalFlip(p=0.5), A.Normalize(), ToTensorV2()])
    elif a.kind == "eval":
        transform = A.Compose([A.Resize(height=160, width=240), ZERO_ONE, ToTensorV2()])
    else:
        turn = [] if a.kind == "flips" else [A.Rotate(limit=35, p=1.0)]
        transform = A.Compose(
            [A.Resize(height=160, width=240), *turn, A.HorizontalFlip(p=0.5), A.VerticalFlip(p=0.1), ZERO_ONE, ToTensorV2()]
        )
    kinds = {
        "opencv": OpenCVDataset,
        "v2": V2Dataset,
        "v2rot": V2Dataset,
        "joint": JointDataset,
        "unet": UNetDataset,
        "unet1": UNetWhole,
        "unetrgb": UNetColours,
        "camvid": CamVidDataset,
        "smp": SmpCamVid,
        "smpval": SmpCamVid,
    }
    ds = kinds.get(a.kind, CarvanaDataset)(images, masks, transform)
    if a.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    t0 = time.perf_counter()
    loader = DataLoader(ds, batch_size=a.batch, shuffle=a.kind != "eval", num_workers=a.workers)
    built = time.perf_counter() - t0
    rates = []
    for _ in range(a.epochs + 1):  # the first epoch warms up
        t0, n = time.perf_counter(), 0
        for batch in loader:
            n += len(batch["image"] if isinstance(batch, dict) else batch[0])
        rates.append(n / (time.perf_counter() - t0))
    measured = sorted(rates[1:])
    print(
        json.dumps(
            {
                "loader": a.loader,
                "type": type(loader).__module__ + "." + type(loader).__name__,
                "kind": a.kind,
                "workers": a.workers,
                "built_s": round(built, 3),
                "images_per_s": round(measured[len(measured) // 2], 1),
            }
        )
    )


if __name__ == "__main__":
    main()
