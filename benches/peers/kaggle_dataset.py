"""The Dataset of the Kaggle image-classification notebooks: `cv2.imread`, `cv2.cvtColor` to
RGB, an albumentations `Compose` held in `self.transforms` and called as
`self.transforms(image=image)["image"]`, through torch's DataLoader or hpuload's drop-in (only
the import differs). `--split train`: RandomResizedCrop 224, HorizontalFlip, VerticalFlip,
Normalize, ToTensorV2, shuffled; `--split eval`: Resize 224x224, Normalize, ToTensorV2, in
order; `--split cassava`: a Cassava Leaf Disease notebook's training transform
(RandomResizedCrop, Transpose, the flips, ShiftScaleRotate, HueSaturationValue,
RandomBrightnessContrast, Normalize, CoarseDropout, ToTensorV2), which hpuload runs natively
since session 70 (its steps after the crop ran in Python before); `--split example` and
`--split example_eval`: albumentations' own classification example (SmallestMaxSize 160,
ShiftScaleRotate, RandomCrop 128, RGBShift, RandomBrightnessContrast, Normalize; and
SmallestMaxSize 160, CenterCrop 128, Normalize), which hpuload runs natively since session 71
(they went to torch's DataLoader before); `--split blur_noise`: a melanoma-competition-style
training transform (RandomResizedCrop, Transpose, the flips, RandomBrightnessContrast, a
OneOf of MotionBlur, MedianBlur, GaussianBlur and GaussNoise, HueSaturationValue,
ShiftScaleRotate, Normalize, CoarseDropout), natively since session 72 (from the OneOf on it
ran in Python before); `--split color_jitter`: RandomResizedCrop 224, HorizontalFlip,
ColorJitter(0.2, 0.2, 0.2, 0.1, p=0.8), Normalize, ToTensorV2, natively since session 74 (its
ColorJitter on ran in Python before); `--split distort`: RandomResizedCrop 224, the flips, a
SomeOf two of a OneOf(GridDistortion, OpticalDistortion), RandomBrightnessContrast and
HueSaturationValue (p=0.8), Normalize, ToTensorV2, natively since session 75 (from the SomeOf
on it ran in Python before); `--split compress`: RandomResizedCrop 224, HorizontalFlip,
ImageCompression(quality_range=(60, 100), p=0.5), RandomBrightnessContrast, Normalize,
ToTensorV2 (a deepfake-detection-style transform), natively since session 76 (from the
ImageCompression on it ran in Python before); `--split before`: HorizontalFlip,
ShiftScaleRotate, RandomBrightnessContrast (steps before the resize, on the whole image),
Resize 224x224, Normalize, ToTensorV2, natively since session 76 (it went to torch's
DataLoader before); `--split clahe`: RandomResizedCrop 224, HorizontalFlip, CLAHE(p=0.5),
RandomBrightnessContrast, Normalize, ToTensorV2 (a medical-imaging-style transform), natively
since session 77 (from the CLAHE on it ran in Python before); `--split resized`: the Dataset
resizes each image to 256x256 with `cv2.resize` before its Compose (HorizontalFlip, RandomCrop
224, Normalize, no ToTensorV2) and returns `torch.tensor(image.transpose(2, 0, 1))`;
`--split inline`: no transform at all, the Dataset's own `cv2.resize` to 224x224, `/ 255.0`,
`np.transpose` and `torch.tensor(..., dtype=torch.float)`; both natively since session 83
(they went to torch's DataLoader before); `--split cubic`: RandomResizedCrop 224 with
`interpolation=cv2.INTER_CUBIC`, HorizontalFlip, Normalize, ToTensorV2, natively since session
85 (within one level of OpenCV's; it went to torch's DataLoader before); `--split grey`: a
chest-X-ray-style Dataset reading each image with `cv2.imread(path, cv2.IMREAD_GRAYSCALE)`,
RandomResizedCrop 224, HorizontalFlip, RandomBrightnessContrast, Normalize(0.5, 0.5),
ToTensorV2 (one-channel batches); `--split grey_rgb`: the same grey read made three channels by
`cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)` for an ImageNet-pretrained model, then the `train`
transform; both natively since session 89 (they went to torch's DataLoader before). Prints one JSON line per run: construction time (hpuload's includes its probe of
`__getitem__` and its read of each file's header), the loader's type, and images/s over the
measured epochs.

usage: python kaggle_dataset.py --data DIR --loader hpuload|torch
       [--split train|eval|cassava|example|example_eval|blur_noise|color_jitter|distort|compress|before|clahe|resized|inline|cubic
                |grey|grey_rgb]
       [--epochs 2] [--workers 2] [--batch 64]
"""

import argparse
import json
import os
import time

import albumentations as A
import cv2
import numpy as np
import torch
from albumentations.pytorch import ToTensorV2
from torch.utils.data import Dataset


class LeafDataset(Dataset):
    def __init__(self, files, labels, transforms=None):
        self.files, self.labels, self.transforms = files, labels, transforms

    def __len__(self):
        return len(self.files)

    def __getitem__(self, idx):
        image = cv2.imread(self.files[idx])
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        if self.transforms:
            image = self.transforms(image=image)["image"]
        return image, torch.tensor(self.labels[idx])


class GreyDataset(LeafDataset):
    """A chest-X-ray notebook's Dataset: each image read grey, made three channels for an
    ImageNet-pretrained model when `rgb`."""

    def __init__(self, files, labels, transforms, rgb):
        super().__init__(files, labels, transforms)
        self.rgb = rgb

    def __getitem__(self, idx):
        image = cv2.imread(self.files[idx], cv2.IMREAD_GRAYSCALE)
        if self.rgb:
            image = cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)
        image = self.transforms(image=image)["image"]
        return image, torch.tensor(self.labels[idx])


class ResizingDataset(LeafDataset):
    """A notebook's Dataset that resizes with OpenCV itself before its Compose (if any), and
    makes the tensor itself after it."""

    def __init__(self, files, labels, transforms, size, scale):
        super().__init__(files, labels, transforms)
        self.size, self.scale = size, scale

    def __getitem__(self, idx):
        image = cv2.imread(self.files[idx])
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        image = cv2.resize(image, self.size)
        if self.transforms:
            image = self.transforms(image=image)["image"]
        if self.scale:
            image = image / 255.0
        image = np.transpose(image, (2, 0, 1))
        return torch.tensor(image, dtype=torch.float), torch.tensor(self.labels[idx])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--loader", choices=["hpuload", "torch"], required=True)
    ap.add_argument("--split", choices=["train", "eval", "cassava", "example", "example_eval", "blur_noise", "color_jitter", "distort", "compress", "before", "clahe", "resized", "inline", "cubic", "grey", "grey_rgb"], default="train")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    if a.loader == "hpuload":
        from hpuload.torch import DataLoader
    else:
        from torch.utils.data import DataLoader
    norm = A.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    if a.split in ("train", "grey_rgb"):
        tf = A.Compose([A.RandomResizedCrop(size=(224, 224)), A.HorizontalFlip(p=0.5), A.VerticalFlip(p=0.5), norm,
                        ToTensorV2()])
    elif a.split == "cassava":
        tf = A.Compose([
            A.RandomResizedCrop(size=(224, 224)), A.Transpose(p=0.5), A.HorizontalFlip(p=0.5), A.VerticalFlip(p=0.5),
            A.ShiftScaleRotate(p=0.5), A.HueSaturationValue(p=0.5), A.RandomBrightnessContrast(p=0.5), norm,
            A.CoarseDropout(p=0.5), ToTensorV2(),
        ])
    elif a.split == "example":
        tf = A.Compose([
            A.SmallestMaxSize(max_size=160), A.ShiftScaleRotate(shift_limit=0.05, scale_limit=0.05, rotate_limit=15, p=0.5),
            A.RandomCrop(height=128, width=128), A.RGBShift(r_shift_limit=15, g_shift_limit=15, b_shift_limit=15, p=0.5),
            A.RandomBrightnessContrast(p=0.5), norm, ToTensorV2(),
        ])
    elif a.split == "blur_noise":
        tf = A.Compose([
            A.RandomResizedCrop(size=(224, 224)), A.Transpose(p=0.5), A.VerticalFlip(p=0.5), A.HorizontalFlip(p=0.5),
            A.RandomBrightnessContrast(brightness_limit=0.2, contrast_limit=0.2, p=0.75),
            A.OneOf([A.MotionBlur(blur_limit=5), A.MedianBlur(blur_limit=5), A.GaussianBlur(blur_limit=5),
                     A.GaussNoise(std_range=(0.02, 0.09))], p=0.7),
            A.HueSaturationValue(hue_shift_limit=10, sat_shift_limit=20, val_shift_limit=10, p=0.5),
            A.ShiftScaleRotate(shift_limit=0.1, scale_limit=0.1, rotate_limit=15, border_mode=cv2.BORDER_CONSTANT, p=0.85),
            norm, A.CoarseDropout(num_holes_range=(1, 1), hole_height_range=(0.375, 0.375), hole_width_range=(0.375, 0.375), p=0.7),
            ToTensorV2(),
        ])
    elif a.split == "color_jitter":
        tf = A.Compose([
            A.RandomResizedCrop(size=(224, 224)), A.HorizontalFlip(p=0.5),
            A.ColorJitter(brightness=0.2, contrast=0.2, saturation=0.2, hue=0.1, p=0.8), norm, ToTensorV2(),
        ])
    elif a.split == "distort":
        tf = A.Compose([
            A.RandomResizedCrop(size=(224, 224)), A.HorizontalFlip(p=0.5), A.VerticalFlip(p=0.5),
            A.SomeOf([A.OneOf([A.GridDistortion(p=1.0), A.OpticalDistortion(distort_limit=0.3, p=1.0)]),
                      A.RandomBrightnessContrast(p=1.0), A.HueSaturationValue(p=1.0)], n=2, p=0.8),
            norm, ToTensorV2(),
        ])
    elif a.split == "compress":
        tf = A.Compose([
            A.RandomResizedCrop(size=(224, 224)), A.HorizontalFlip(p=0.5),
            A.ImageCompression(quality_range=(60, 100), p=0.5), A.RandomBrightnessContrast(p=0.5),
            norm, ToTensorV2(),
        ])
    elif a.split == "before":
        tf = A.Compose([
            A.HorizontalFlip(p=0.5), A.ShiftScaleRotate(p=0.5), A.RandomBrightnessContrast(p=0.5),
            A.Resize(224, 224), norm, ToTensorV2(),
        ])
    elif a.split == "clahe":
        tf = A.Compose([
            A.RandomResizedCrop(size=(224, 224)), A.HorizontalFlip(p=0.5), A.CLAHE(p=0.5),
            A.RandomBrightnessContrast(p=0.5), norm, ToTensorV2(),
        ])
    elif a.split == "cubic":
        tf = A.Compose([A.RandomResizedCrop(size=(224, 224), interpolation=cv2.INTER_CUBIC), A.HorizontalFlip(p=0.5), norm,
                        ToTensorV2()])
    elif a.split == "grey":
        tf = A.Compose([A.RandomResizedCrop(size=(224, 224)), A.HorizontalFlip(p=0.5), A.RandomBrightnessContrast(p=0.5),
                        A.Normalize(mean=0.5, std=0.5), ToTensorV2()])
    elif a.split == "resized":
        tf = A.Compose([A.HorizontalFlip(p=0.5), A.RandomCrop(224, 224), norm])
    elif a.split == "inline":
        tf = None
    elif a.split == "example_eval":
        tf = A.Compose([A.SmallestMaxSize(max_size=160), A.CenterCrop(height=128, width=128), norm, ToTensorV2()])
    else:
        tf = A.Compose([A.Resize(224, 224), norm, ToTensorV2()])
    classes = sorted(os.listdir(a.data))
    files = sorted(os.path.join(a.data, c, f) for c in classes for f in os.listdir(os.path.join(a.data, c)))
    labels = [classes.index(os.path.basename(os.path.dirname(f))) for f in files]
    t0 = time.perf_counter()
    if a.split in ("resized", "inline"):
        size = (256, 256) if a.split == "resized" else (224, 224)
        ds = ResizingDataset(files, labels, tf, size, scale=a.split == "inline")
    elif a.split in ("grey", "grey_rgb"):
        ds = GreyDataset(files, labels, tf, rgb=a.split == "grey_rgb")
    else:
        ds = LeafDataset(files, labels, tf)
    train = a.split not in ("eval", "example_eval", "inline")
    loader = DataLoader(ds, batch_size=a.batch, shuffle=train, num_workers=a.workers, drop_last=train,
                        persistent_workers=a.workers > 0)
    built = time.perf_counter() - t0
    n, t1 = 0, None
    for epoch in range(a.epochs + 1):  # the first epoch warms up
        if epoch == 1:
            n, t1 = 0, time.perf_counter()
        for x, y in loader:
            n += x.shape[0]
    rate = n / (time.perf_counter() - t1)
    print(json.dumps({"loader": a.loader, "split": a.split, "type": type(loader).__qualname__,
                      "built_s": round(built, 2), "images_per_s": round(rate, 1)}), flush=True)


if __name__ == "__main__":
    main()
