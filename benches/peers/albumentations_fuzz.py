"""Random albumentations compositions in a Kaggle-style Dataset (cv2.imread, an optional BGR to
RGB conversion, `self.transforms(image=image)["image"]`), each random parameter pinned, run
through hpuload.torch.DataLoader and through the Dataset itself, compared value by value: the
search of transform_fuzz.py (session 81) for albumentations' path (session 82).

usage: python albumentations_fuzz.py FOLDER [CASES=300] [SEED=0]
  FOLDER  class folders of JPEGs (transform_sweep_images.py's set, saved as JPEG)
Each composition is drawn from a small grammar: optional pixel steps on the decoded image, a
geometry that gives one size (Resize, SmallestMaxSize then CenterCrop, LongestMaxSize then
PadIfNeeded, CenterCrop after a Resize, a RandomResizedCrop whose window is pinned), each with
a random OpenCV interpolation, then pixel steps (about thirty albumentations ops with pinned
draws, some of them inside OneOf / SomeOf / Sequential / RandomOrder of one, a few ops hpuload
runs in Python), an optional Normalize of several kinds, an optional ToFloat, and ToTensorV2
(mostly; else the Dataset hands out the array as it is, transposed, cast or divided by 255,
or as a tensor of it). The Dataset reads with cv2 (RGB or left BGR, colour or grey flags, grey made RGB) or with Pillow and NumPy
(`np.array(Image.open(path).convert("RGB"))`, `np.asarray` of the opened file), and may
resize with `cv2.resize` before the Compose (whose geometry is then sometimes left out, or
the Compose itself: a Dataset with no transform).
The outcomes are those of transform_fuzz.py: same, tail, fallback, SILENT (different without a
FallbackWarning), fallback-BAD, ERROR (hpuload raised where the Dataset did not), torch raises,
torch varies.
env ONLY=N: run case N alone and print each sample's largest difference.
env BACKEND=auto: the media engine's backend (byte for byte too: albumentations' resizes are
  OpenCV's, which hpuload runs on the CPU path).
"""
import os
import sys

import albumentations as A
import cv2
import numpy as np
import torch
import torch.utils.data as tud
from albumentations.pytorch import ToTensorV2
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import transform_fuzz  # noqa: E402

ROOT = sys.argv[1] if __name__ == "__main__" else None
BACKEND = os.environ.get("BACKEND", "cpu")
INTERPS = [cv2.INTER_LINEAR] * 6 + [cv2.INTER_NEAREST, cv2.INTER_CUBIC, cv2.INTER_AREA, cv2.INTER_LANCZOS4, cv2.INTER_LINEAR_EXACT, cv2.INTER_NEAREST_EXACT]


class LeafDataset(tud.Dataset):
    """The Kaggle notebooks' Dataset, reading as `read` says."""

    def __init__(self, files, labels, transforms, read, hand_out=None, first=None):
        self.files, self.labels, self.transforms, self.read = files, labels, transforms, read
        self.hand_out = HAND_OUTS[hand_out] if hand_out else None
        self.first = first  # (width, height, interpolation) of a cv2.resize before the Compose

    def __len__(self):
        return len(self.files)

    def __getitem__(self, idx):
        if self.read == "pil":
            image = np.array(Image.open(self.files[idx]).convert("RGB"))
        elif self.read == "pil_asarray":
            with open(self.files[idx], "rb") as f:
                image = np.asarray(Image.open(f))
        elif self.read == "bgr":
            image = cv2.imread(self.files[idx])
        elif self.read == "grey":
            image = cv2.imread(self.files[idx], cv2.IMREAD_GRAYSCALE)
        elif self.read == "grey_rgb":
            image = cv2.cvtColor(cv2.imread(self.files[idx], cv2.IMREAD_GRAYSCALE), cv2.COLOR_GRAY2RGB)
        else:
            image = cv2.imread(self.files[idx])
            image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        if self.first is not None:
            image = cv2.resize(image, self.first[:2], interpolation=self.first[2])
        if self.transforms is not None:
            image = self.transforms(image=image)["image"]
        if self.hand_out is not None:
            image = self.hand_out(image)
        return image, torch.tensor(self.labels[idx])


#: What a Dataset does with the array of a Compose without ToTensorV2 before returning it.
HAND_OUTS = {
    "as is": lambda x: x,
    "transpose": lambda x: x.transpose(2, 0, 1),
    "transpose float32": lambda x: np.transpose(x, (2, 0, 1)).astype(np.float32),
    "/255 float32": lambda x: (x / 255.0).astype(np.float32).transpose(2, 0, 1),
    "float32 /255": lambda x: x.astype(np.float32) / 255.0,
    "torch.tensor float": lambda x: torch.tensor(x.transpose(2, 0, 1), dtype=torch.float),
    "from_numpy permute float /255": lambda x: torch.from_numpy(x).permute(2, 0, 1).float() / 255,
    "/255": lambda x: x / 255.0,
    # Arithmetic of the Dataset's own, which hpuload tables byte by byte (session 103).
    "/127.5 - 1 float32": lambda x: (x / 127.5 - 1.0).astype(np.float32),
    "(float32 - 127.5) / 127.5": lambda x: (x.astype(np.float32) - 127.5) / 127.5,
    "2 * tensor / 255 - 1": lambda x: 2 * torch.from_numpy(x).permute(2, 0, 1).float() / 255 - 1,
}


def files_of(folder):
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs if f.endswith(".jpg"))
    classes = sorted({os.path.basename(os.path.dirname(f)) for f in files})
    return files, [classes.index(os.path.basename(os.path.dirname(f))) for f in files]


def interp(rng):
    return rng.choice(INTERPS)


def geometry(rng):
    """(name, steps, square): a geometry that gives every image one size, and whether it is
    square."""
    h, w = rng.choice([16, 32, 48, 64, 97]), rng.choice([16, 32, 48, 64, 97])
    it = interp(rng)
    r = rng.random()
    if r < 0.3:
        return f"Resize({h}, {w}, {it})", [A.Resize(h, w, interpolation=it)], h == w
    if r < 0.5:
        s = max(h, w) + rng.choice([0, 0, 7])
        return f"SmallestMaxSize({s}, {it}), CenterCrop({h}, {w})", [A.SmallestMaxSize(max_size=s, interpolation=it), A.CenterCrop(h, w)], h == w
    if r < 0.65:
        s = rng.choice([32, 61, 64])
        mode = rng.choice(["constant", "reflect101", "replicate"])
        border = {"constant": cv2.BORDER_CONSTANT, "reflect101": cv2.BORDER_REFLECT_101, "replicate": cv2.BORDER_REPLICATE}[mode]
        fill = rng.choice([0, 7, (10, 20, 30)])
        return f"LongestMaxSize({s}, {it}), PadIfNeeded({s}, {mode}, fill={fill})", [
            A.LongestMaxSize(max_size=s, interpolation=it),
            A.PadIfNeeded(min_height=s, min_width=s, border_mode=border, fill=fill),
        ], True
    if r < 0.8:
        big = max(h, w) + rng.choice([0, 9, 40])
        return f"Resize({big}, {big}, {it}), CenterCrop({h}, {w})", [A.Resize(big, big, interpolation=it), A.CenterCrop(h, w)], h == w
    # Scale 1 and ratio 1: no window fits but on a square image, so albumentations takes its
    # fallback (the centred square of the shorter side): pinned.
    s = rng.choice([32, 57, 96])
    return f"RRC({s}, scale=1, ratio=1, {it})", [A.RandomResizedCrop((s, s), scale=(1, 1), ratio=(1, 1), interpolation=it)], True


def pixel(rng, square):
    """(name, step): a pixel step with its draw pinned."""
    ops = [
        ("hflip", lambda: A.HorizontalFlip(p=1.0)),
        ("vflip", lambda: A.VerticalFlip(p=1.0)),
        ("noflip", lambda: A.HorizontalFlip(p=0.0)),
        ("bc", lambda: A.RandomBrightnessContrast(brightness_limit=(0.2, 0.2), contrast_limit=(-0.3, -0.3), p=1.0)),
        ("bc_mean", lambda: A.RandomBrightnessContrast(brightness_limit=(0.1, 0.1), contrast_limit=(0.2, 0.2), brightness_by_max=False, p=1.0)),
        ("rgbshift", lambda: A.RGBShift(r_shift_limit=(10, 10), g_shift_limit=(-20, -20), b_shift_limit=(0, 0), p=1.0)),
        ("gamma", lambda: A.RandomGamma(gamma_limit=(130, 130), p=1.0)),
        ("downscale", lambda: A.Downscale(scale_range=(0.5, 0.5), p=1.0)),
        ("jpeg", lambda: A.ImageCompression(quality_range=(70, 70), p=1.0)),
        ("clahe", lambda: A.CLAHE(clip_limit=(2.0, 2.0), p=1.0)),
        ("invert", lambda: A.InvertImg(p=1.0)),
        ("solarize", lambda: A.Solarize(threshold_range=(0.4, 0.4), p=1.0)),
        ("posterize", lambda: A.Posterize(num_bits=(4, 4), p=1.0)),
        ("equalize_cv", lambda: A.Equalize(mode="cv", p=1.0)),
        ("equalize_pil", lambda: A.Equalize(mode="pil", p=1.0)),
        ("equalize_joint", lambda: A.Equalize(mode="cv", by_channels=False, p=1.0)),
        ("gray", lambda: A.ToGray(p=1.0)),
        ("gray1", lambda: A.ToGray(num_output_channels=1, p=1.0)),
        ("gray_avg", lambda: A.ToGray(method="average", p=1.0)),
        ("hsv", lambda: A.HueSaturationValue(hue_shift_limit=(10, 10), sat_shift_limit=(20, 20), val_shift_limit=(-5, -5), p=1.0)),
        ("jitter_b", lambda: A.ColorJitter(brightness=(1.2, 1.2), contrast=(1, 1), saturation=(1, 1), hue=(0, 0), p=1.0)),
        ("jitter_s", lambda: A.ColorJitter(brightness=(1, 1), contrast=(1, 1), saturation=(0.6, 0.6), hue=(0, 0), p=1.0)),
        ("jitter_h", lambda: A.ColorJitter(brightness=(1, 1), contrast=(1, 1), saturation=(1, 1), hue=(0.05, 0.05), p=1.0)),
        ("sharpen", lambda: A.Sharpen(alpha=(0.4, 0.4), lightness=(0.8, 0.8), p=1.0)),
        ("sharpen_g", lambda: A.Sharpen(alpha=(0.4, 0.4), method="gaussian", p=1.0)),
        ("emboss", lambda: A.Emboss(alpha=(0.3, 0.3), strength=(0.5, 0.5), p=1.0)),
        ("blur", lambda: A.Blur(blur_limit=(5, 5), p=1.0)),
        ("median", lambda: A.MedianBlur(blur_limit=(3, 3), p=1.0)),
        ("gblur", lambda: A.GaussianBlur(blur_limit=(5, 5), sigma_limit=(1.0, 1.0), p=1.0)),
        ("gblur_auto", lambda: A.GaussianBlur(blur_limit=0, sigma_limit=(0.8, 0.8), p=1.0)),
        ("affine", lambda: A.Affine(rotate=(10, 10), scale=(1.1, 1.1), p=1.0)),
        ("affine_t", lambda: A.Affine(translate_percent=(0.1, 0.1), shear=(5, 5), p=1.0)),
        ("ssr", lambda: A.ShiftScaleRotate(shift_limit=(0.05, 0.05), scale_limit=(0.1, 0.1), rotate_limit=(15, 15), p=1.0)),
        ("drop_p0", lambda: A.ChannelDropout(p=0.0)),
        ("shuffle_p0", lambda: A.ChannelShuffle(p=0.0)),
        ("one", lambda: A.OneOf([A.InvertImg(p=1.0)], p=1.0)),
        ("one_p0", lambda: A.OneOf([A.InvertImg(p=1.0)], p=0.0)),
        ("some", lambda: A.SomeOf([A.VerticalFlip(p=1.0)], n=1, p=1.0)),
        ("seq", lambda: A.Sequential([A.Posterize(num_bits=(5, 5), p=1.0), A.HorizontalFlip(p=1.0)])),
        ("order", lambda: A.RandomOrder([A.RGBShift(r_shift_limit=(5, 5), g_shift_limit=(5, 5), b_shift_limit=(5, 5), p=1.0)], n=1)),
        # Ops hpuload runs in Python (a tail) or not at all.
        ("sepia", lambda: A.ToSepia(p=1.0)),
        ("rotate", lambda: A.Rotate(limit=(15, 15), p=1.0)),
        ("unsharp", lambda: A.UnsharpMask(blur_limit=(5, 5), alpha=(0.3, 0.3), p=1.0)),
        ("defocus", lambda: A.Defocus(radius=(3, 3), alias_blur=(0.2, 0.2), p=1.0)),
    ]
    if square:
        ops += [("transpose", lambda: A.Transpose(p=1.0))]
    name, make = rng.choice(ops)
    return name, make()


def composition(rng):
    names, steps = [], []

    def add(name, step):
        names.append(name)
        steps.extend(step if isinstance(step, list) else [step])

    first = None
    if rng.random() < 0.2:
        # The Dataset's own cv2.resize first; the Compose's geometry then kept or left out.
        first = (rng.choice([40, 56]), rng.choice([40, 48]), interp(rng))
        names.append(f"cv2.resize{first}")
    for _ in range(rng.choice([0, 0, 0, 1])):
        add(*pixel(rng, square=False))
    name, geo, square = geometry(rng)
    if first is not None and rng.random() < 0.5:
        square = first[0] == first[1]
    else:
        add(name, geo)
    for _ in range(rng.choice([0, 1, 1, 2])):
        add(*pixel(rng, square))
    r = rng.random()
    if r < 0.35:
        add("Normalize", A.Normalize())
    elif r < 0.45:
        add("Normalize(0.5)", A.Normalize(mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)))
    elif r < 0.5:
        add("Normalize(0, 1, 1)", A.Normalize(mean=0, std=1, max_pixel_value=1.0))
    elif r < 0.55:
        add("Normalize(image)", A.Normalize(normalization="image"))
    elif r < 0.6:
        add("ToFloat", A.ToFloat(max_value=255))
    hand_out = None
    if rng.random() < 0.8:
        add("ToTensorV2", ToTensorV2())
    else:
        hand_out = rng.choice(sorted(HAND_OUTS))
        names.append(f"then {hand_out}")
    read = rng.choice(["rgb"] * 4 + ["bgr", "bgr", "pil", "pil", "pil_asarray", "grey", "grey", "grey_rgb"])
    if first is not None and rng.random() < 0.3:
        # No transform at all: the Dataset's own resize, and what it hands out.
        hand_out = rng.choice(sorted(HAND_OUTS))
        return f"[{read}] cv2.resize{first}, no transform, then {hand_out}", None, read, hand_out, first
    return f"[{read}] " + ", ".join(names), A.Compose(steps), read, hand_out, first


def _as_tensor(x):
    return torch.from_numpy(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else x


def run(tf, read, normalized, show=False, hand_out=None, first=None):
    files, labels = files_of(ROOT)
    ds = LeafDataset(files, labels, tf, read, hand_out, first)
    # OpenCV's cubic is one level off in a few values in 100,000 (`cv2_cubic`); the ops
    # after it may widen that level: such cases are "near" where few values differ.
    cubic = any(getattr(t, "interpolation", None) == cv2.INTER_CUBIC for t in _steps(tf)) or (first and first[-1] == cv2.INTER_CUBIC)
    return transform_fuzz.run_on(ds, normalized, show, item=_as_tensor, backend=BACKEND, exact=True, rare=0.005 if cubic else 0.0)


def _steps(tf):
    """Every step of a Compose, those inside its compositions too."""
    for t in getattr(tf, "transforms", []) if tf is not None else []:
        yield t
        yield from _steps(t) if hasattr(t, "transforms") else ()


def main():
    cases, rng = transform_fuzz.arguments(300)
    tally = {}
    only = os.environ.get("ONLY")
    for i in range(cases):
        name, tf, read, hand_out, first = composition(rng)
        if only is not None and i != int(only):
            continue
        try:
            outcome, detail = run(tf, read, "Normalize" in name, show=only is not None, hand_out=hand_out, first=first)
        except Exception as e:
            outcome, detail = "HARNESS", f"{type(e).__name__}: {e}"
        transform_fuzz.count(tally, i, outcome, detail, name, show=only is not None)
    print(tally)


if __name__ == "__main__":
    main()
