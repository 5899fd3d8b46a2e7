"""Random Dataset classes of images and their segmentation masks, as users write them (how the
image and the mask are read, what the code computes on the mask's values, the albumentations
`Compose` they are given to, what is done with the mask after it, what is returned), run
through hpuload.torch.DataLoader (CPU path) and through torch's DataLoader, compared batch by
batch, bit for bit (session 110). Every `Compose` draws nothing (its flips have p=1 or p=0),
so torch's batches are the reference; the random steps' masks are tested against
albumentations' own for the plans hpuload drew (python/tests/test_segmentation_datasets.py).

usage: python segmentation_dataset_fuzz.py FOLDER [CASES=200] [SEED=0]
  FOLDER  class folders of JPEG or PNG photos (e.g. `hpuload make-dataset`'s)
Outcomes: same (native, equal), fallback (torch's loader, reason given), SILENT (native and
different, or native where torch's loader raises: a bug), ERROR (hpuload raised where torch's
loader did not), torch raises (and hpuload's loader falls back or raises too), skipped (named)
(torch's loader raises on a sample hpuload names and replaces, as it does any sample it cannot
make: a crop larger than an image).
env ONLY=N: run case N alone and print its class's source. env FAMILY=v2: classes that give the
image and a `tv_tensors.Mask` to a torchvision v2 `Compose` (session 112). env SHOW_FALLBACKS=1:
each fallback's case and reason. env FAMILY=joint:
classes that move the image and its mask with torchvision's functionals themselves (the forum's
joint transforms: a shared resize, `RandomCrop.get_params` then `TF.crop` of both, flips drawn
by `random.random()` or `torch.rand`; session 113); they draw, so the reference is each
sample made by the class's own code with hpuload's crop window and its draws seeded as hpuload
seeds them, collated by torch's `default_collate`. env FAMILY=unet: milesial's Pytorch-UNet
`BasicDataset` and its variants (Pillow's resize of both by `scale` and a filter each, the
mask's values mapped into an `np.zeros` array, `(img > 1).any()` before dividing; session 114),
over images made one size, one of them sometimes of bytes 0 and 1 alone. env FAMILY=colour:
classes whose masks are colour images (CamVid's; session 116): read in RGB (converted, or as
stored), resized or not (by nearest or a filter that blends), their colours mapped to class
indices in an `np.zeros` (`np.all(m == c, axis=-1)`, `(m == c).all(-1)`, milesial's
`mask_values`), colours the map does not name left 0, then given to an albumentations
`Compose` that draws nothing with the image, or returned; masks as RGB, RGBA, palette or
16-bit PNGs, GIFs and JPEGs.
"""
import os
import sys
import tempfile
import textwrap
import warnings

import numpy as np
import torch
import torch.utils.data as tud

import albumentations as A  # noqa: F401 (the classes' source names it)
from albumentations.pytorch import ToTensorV2  # noqa: F401
from PIL import Image

import hpuload.torch as ht

READS = {
    "pil_grey": 'np.array(Image.open(mask_path).convert("L"){dtype})',
    "pil_stored": "np.array(Image.open(mask_path){dtype})",
    "cv2_grey": "cv2.imread(mask_path, cv2.IMREAD_GRAYSCALE){astype}",
}

#: Element-wise steps on the mask's values (`m`).
VALUES = [
    "m[m == 255] = 1",
    "m[m == 255.0] = 1.0",
    "m = m / 255.0",
    "m = m / 255",
    "m = (m > 127).astype(np.float32)",
    "m = (m > 0).astype(np.uint8)",
    "m = np.where(m > 0, 1.0, 0.0).astype(np.float32)",
    "m = np.where(m >= 128, 1, 0).astype(np.uint8)",
    "m = m.astype(np.float32)",
    "m = m.astype(np.float64) * 2",
    "m = m // 2",
    "m = m - 1",
    "m = np.clip(m, 0, 3)",
    "m[m > 2] = 0",
    "m = 255 - m",
    "m = m.astype(np.int32)",
    "m = m.astype(np.int64)",
    "m = m.astype(bool)",
    # Remapped into `np.zeros_like` (segmentation_models_pytorch's CamVid example; session 116).
    "out = np.zeros_like(m)\nout[m == 255] = 1\nm = out",
    "out = np.zeros_like(m, dtype=np.int64)\nfor v, k in {0: 3, 255: 1}.items():\n    out[m == v] = k\nm = out",
]

COMPOSES = [
    "A.Resize({h}, {w})",
    "A.Resize({h}, {w}), A.HorizontalFlip(p={p})",
    "A.Resize({h}, {w}), A.VerticalFlip(p={p}), A.HorizontalFlip(p={q})",
    "A.SmallestMaxSize({s}), A.CenterCrop({h}, {w})",
    "A.CenterCrop({h}, {w})",
    "A.LongestMaxSize({s}), A.PadIfNeeded({s}, {s}, border_mode=0, fill={fill}, fill_mask={fill_mask})",
    "A.PadIfNeeded({big}, {big}, border_mode=0, fill={fill}, fill_mask={fill_mask}), A.CenterCrop({big}, {big})",
    "A.Resize({h}, {w}), A.Rotate(limit=({a}, {a}), border_mode={border}, fill_mask={fill_mask}, p=1.0)",
    "A.Resize({h}, {w}), A.HorizontalFlip(p={p}), A.Affine(rotate=({a}, {a}), scale={sc}, translate_px=({t}, {t}), "
    "fill_mask={fill_mask}, p=1.0), A.VerticalFlip(p={q})",
    "A.LongestMaxSize({s}), A.PadIfNeeded({s}, {s}, border_mode=0, fill_mask={fill_mask}), "
    "A.Rotate(limit=({a}, {a}), fill_mask={fill_mask}, p=1.0)",
    "A.Resize({h}, {w}), A.Rotate(limit=({a}, {a}), mask_interpolation=1, p=1.0)",
    "A.Resize({s}, {s}), A.Transpose(p={p}), A.Rotate(limit=({a}, {a}), border_mode={border}, p=1.0), "
    "A.HorizontalFlip(p={q})",
    "A.Resize({h}, {w}), A.GaussianBlur(blur_limit=(3, 3), sigma_limit=(1.0, 1.0), p=1.0)",
    "A.Resize({h}, {w}, mask_interpolation=1)",
    "A.HorizontalFlip(p={p}), A.VerticalFlip(p={q}), A.CenterCrop({h}, {w})",
    "A.VerticalFlip(p={p}), A.CenterCrop({s}, {s}), A.Rotate(limit=({a}, {a}), border_mode={border}, p=1.0)",
]

NORMS = [
    "A.Normalize(mean=[0.0, 0.0, 0.0], std=[1.0, 1.0, 1.0], max_pixel_value=255.0)",
    "A.Normalize()",
    "A.ToFloat(max_value=255)",
    "",
]

AFTER = ["", "m = m.long()", "m = m.float()", "m = m.unsqueeze(0)", "m = m.unsqueeze(0).float()", "m = m[None]"]
#: After a `Compose` without `ToTensorV2`: what a Kaggle notebook does with its arrays.
ARRAYS_AFTER = [
    "",
    "image = image.transpose(2, 0, 1)",
    "image = torch.tensor(image.transpose(2, 0, 1) / 255.0, dtype=torch.float); m = torch.tensor(m, dtype=torch.long)",
    "image = torch.from_numpy(image.transpose(2, 0, 1)).float(); m = torch.from_numpy(m).long()",
    "m = m.astype(np.float32)",
    "m = torch.from_numpy(m)[None]",
]
#: What needs pixels (one case in twenty).
NEEDS_PIXELS = ["m = m.sum()", "m = m.max() - m", "m = m[::2]", "m = m.numpy()"]

RETURNS = ["return image, m", "return [image, m]", 'return {"image": image, "mask": m}', 'return {"mask": m, "image": image}']


def case_source(rng: np.random.Generator) -> str:
    read = rng.choice(list(READS))
    dtype = rng.choice(["", ", dtype=np.float32", ", dtype=np.uint8", ", dtype=np.float16", ", dtype=np.int16"])
    astype = rng.choice(["", ".astype(np.float32)", ".astype(np.float16)"])
    reading = READS[read].format(dtype=dtype, astype=astype)
    steps = [VALUES[k] for k in rng.choice(len(VALUES), size=rng.integers(0, 3), replace=False)]
    if rng.random() < 0.05:
        steps.append(NEEDS_PIXELS[rng.integers(len(NEEDS_PIXELS))])
    size = dict(
        h=int(rng.integers(16, 60)),
        w=int(rng.integers(16, 60)),
        s=int(rng.integers(20, 64)),
        big=int(rng.integers(300, 700)),
        p=float(rng.choice([0.0, 1.0])),
        q=float(rng.choice([0.0, 1.0])),
        fill=int(rng.choice([0, 255])),
        fill_mask=int(rng.choice([0, 1, 255])),
        a=round(float(rng.uniform(-45, 45)), 1),
        border=int(rng.choice([0, 1, 2, 4])),
        sc=round(float(rng.uniform(0.7, 1.3)), 2),
        t=int(rng.integers(-5, 6)),
    )
    compose = COMPOSES[rng.integers(len(COMPOSES))].format(**size)
    norm = NORMS[rng.integers(len(NORMS))]
    tail = "ToTensorV2()" if rng.random() < 0.75 else ""
    parts = ", ".join(p for p in (compose, norm, tail) if p)
    after = AFTER[rng.integers(len(AFTER))] if tail else ARRAYS_AFTER[rng.integers(len(ARRAYS_AFTER))]
    if tail and rng.random() < 0.05:
        after = NEEDS_PIXELS[rng.integers(len(NEEDS_PIXELS))]
    image_read = rng.choice(
        ['np.array(Image.open(img_path).convert("RGB"))', "cv2.cvtColor(cv2.imread(img_path), cv2.COLOR_BGR2RGB)"]
    )
    body = "\n".join(
        [
            "img_path = self.images[index]",
            "mask_path = self.masks[index]",
            f"image = {image_read}",
            f"m = {reading}",
            *steps,
            "out = self.transform(image=image, mask=m)",
            'image, m = out["image"], out["mask"]',
            *([after] if after else []),
            RETURNS[rng.integers(len(RETURNS))],
        ]
    )
    return f"""
class Case(tud.Dataset):
    def __init__(self, images, masks):
        self.images, self.masks = images, masks
        self.transform = A.Compose([{parts}])

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
{textwrap.indent(body, " " * 8)}
"""


#: torchvision v2 (`FAMILY=v2`, session 112): how the mask becomes a `tv_tensors.Mask`.
V2_MASKS = [
    "tv_tensors.Mask(np.array(Image.open(mask_path){dtype}))",
    'tv_tensors.Mask(np.array(Image.open(mask_path).convert("L"){dtype}))',
    "tv_tensors.Mask(Image.open(mask_path))",
    "tv_tensors.Mask(torch.from_numpy(np.array(Image.open(mask_path))))",
    "tv_tensors.Mask(np.array(Image.open(mask_path)), dtype=torch.int64)",
]
#: v2 steps that draw nothing (flips of p 0 or 1), the geometric ones first.
V2_GEOMETRY = [
    "v2.Resize(({h}, {w}))",
    "v2.Resize(({h}, {w})), v2.RandomHorizontalFlip(p={p})",
    "v2.Resize({s}), v2.CenterCrop({c})",
    "v2.Resize({s}), v2.RandomVerticalFlip(p={p}), v2.CenterCrop(({c}, {c2})), v2.RandomHorizontalFlip(p={q})",
    "v2.CenterCrop({big})",
    "v2.RandomHorizontalFlip(p={p}), v2.Resize(({h}, {w}))",
    "v2.Resize(({h}, {w})), v2.RandomRotation(degrees=({a}, {a}))",
    "v2.Resize(({h}, {w}), interpolation=v2.InterpolationMode.NEAREST)",
    "v2.Resize({s})",
    "v2.Pad(3), v2.Resize(({h}, {w}))",
]
V2_COLOUR = ["", "v2.Grayscale(3)", "v2.GaussianBlur(3, sigma=1.0)", "v2.ColorJitter(brightness=(1.2, 1.2))"]
V2_TAIL = [
    "v2.ToImage(), v2.ToDtype(torch.float32, scale=True)",
    "v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])",
    "v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.ToPureTensor()",
    "v2.PILToTensor()",
    "v2.ToImage(), v2.ToDtype({tv_tensors.Image: torch.float32, tv_tensors.Mask: torch.int64}, scale=True)",
]
V2_AFTER = ["", "m = m.long()", "m = m.float()", "m = m.squeeze(0)", "m = m.unsqueeze(0)", "m = m.to(torch.int64)"]


def case_source_v2(rng: np.random.Generator) -> str:
    dtype = rng.choice(["", ", dtype=np.uint8", ", dtype=np.int64", ", dtype=np.float32"])
    made = V2_MASKS[rng.integers(len(V2_MASKS))].format(dtype=dtype)
    numpy_first = "np.array(" in made and rng.random() < 0.4
    steps = []
    if numpy_first:
        # The code computes on the array, then wraps it.
        reading = made[len("tv_tensors.Mask(") : -1].split(", dtype=torch")[0]
        steps = [VALUES[k] for k in rng.choice(len(VALUES), size=rng.integers(1, 3), replace=False)]
        steps.append("m = tv_tensors.Mask(m)")
    else:
        reading = made
    size = dict(
        h=int(rng.integers(16, 60)),
        w=int(rng.integers(16, 60)),
        s=int(rng.integers(40, 64)),
        c=int(rng.integers(16, 40)),
        c2=int(rng.integers(16, 40)),
        big=int(rng.integers(20, 80)),
        p=float(rng.choice([0.0, 1.0])),
        q=float(rng.choice([0.0, 1.0])),
        a=round(float(rng.uniform(-45, 45)), 1),
    )
    parts = [V2_GEOMETRY[rng.integers(len(V2_GEOMETRY))].format(**size)]
    colour = V2_COLOUR[rng.integers(len(V2_COLOUR))]
    parts += [colour] if colour else []
    parts.append(V2_TAIL[rng.integers(len(V2_TAIL))])
    image_read = rng.choice(['Image.open(img_path).convert("RGB")', "read_image(img_path)"])
    call = rng.choice(["pair", "dict"])
    body = [
        "img_path = self.images[index]",
        "mask_path = self.masks[index]",
        f"image = {image_read}",
        f"m = {reading}",
        *steps,
    ]
    if call == "pair":
        body.append("image, m = self.transforms(image, m)")
    else:
        body += ['out = self.transforms({"image": image, "mask": m})', 'image, m = out["image"], out["mask"]']
    after = V2_AFTER[rng.integers(len(V2_AFTER))]
    body += [after] if after else []
    body.append(RETURNS[rng.integers(len(RETURNS))])
    return f"""
class Case(tud.Dataset):
    def __init__(self, images, masks):
        self.images, self.masks = images, masks
        self.transforms = v2.Compose([{", ".join(parts)}])

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
{textwrap.indent(chr(10).join(body), " " * 8)}
"""


#: The forum's joint transforms (`FAMILY=joint`, session 113): the moves of the image `x` and
#: its mask `m`, the first of each group taken or none.
JOINT_RESIZE = [
    "resize = transforms.Resize(({h}, {w}))\nx, m = resize(x), resize(m)",
    "x = TF.resize(x, [{h}, {w}])\nm = TF.resize(m, [{h}, {w}], interpolation=transforms.InterpolationMode.NEAREST)",
    "x = TF.resize(x, {s})\nm = TF.resize(m, {s}, interpolation=transforms.InterpolationMode.NEAREST)",
    "resize = transforms.Resize({s})\nx, m = resize(x), resize(m)",
]
JOINT_CROP = [
    "i, j, h, w = transforms.RandomCrop.get_params(x, output_size=({c}, {c2}))\nx, m = TF.crop(x, i, j, h, w), TF.crop(m, i, j, h, w)",
    "x, m = TF.center_crop(x, [{c}, {c2}]), TF.center_crop(m, [{c}, {c2}])",
    "i, j, h, w = transforms.RandomCrop.get_params(x, ({c}, {c}))\nx = TF.crop(x, i, j, h, w)\nm = TF.crop(m, i, j, h, w)",
]
JOINT_FLIPS = [
    "if random.random() > 0.5:\n    x, m = TF.hflip(x), TF.hflip(m)",
    "if random.random() > 0.5:\n    x = TF.vflip(x)\n    m = TF.vflip(m)",
    "if torch.rand(1).item() < {p}:\n    x, m = TF.hflip(x), TF.hflip(m)",
    "if random.random() < 0.5:\n    x, m = x.transpose(Image.FLIP_LEFT_RIGHT), m.transpose(Image.FLIP_LEFT_RIGHT)",
]
JOINT_IMAGE = [
    "x = TF.to_tensor(x)",
    "x = TF.normalize(TF.to_tensor(x), [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])",
    "x = TF.pil_to_tensor(x)",
]
JOINT_MASK = [
    "m = TF.to_tensor(m)",
    "m = TF.pil_to_tensor(m)",
    "m = torch.from_numpy(np.array(m)).long()",
    "m = torch.as_tensor(np.array(m), dtype=torch.int64)",
    "m = np.array(m)\nm[m == 255] = 1\nm = torch.from_numpy(m)",
    "m = torch.from_numpy(np.array(m, dtype=np.float32) / 255.0)",
    "m = TF.to_tensor(m).squeeze(0)",
    "m = (TF.to_tensor(m) * 255).long()",
    "m = TF.pil_to_tensor(m).squeeze(0).long()",
    "m = TF.to_tensor(m)\nm[m > 0.5] = 1.0\nm[m <= 0.5] = 0.0",
]


def case_source_joint(rng: np.random.Generator) -> str:
    size = dict(
        h=int(rng.integers(40, 64)),
        w=int(rng.integers(40, 64)),
        s=int(rng.integers(40, 64)),
        c=int(rng.integers(16, 40)),
        c2=int(rng.integers(16, 40)),
        p=round(float(rng.uniform(0.2, 0.8)), 2),
    )
    image_read = rng.choice(['Image.open(img_path).convert("RGB")', "Image.open(img_path).convert('RGB')"])
    mask_read = rng.choice(["Image.open(mask_path)", 'Image.open(mask_path).convert("L")'])
    steps = []
    for group, p in ((JOINT_RESIZE, 0.7), (JOINT_CROP, 0.7)):
        if rng.random() < p:
            steps.append(group[rng.integers(len(group))].format(**size))
    for k in rng.choice(len(JOINT_FLIPS), size=rng.integers(0, 3), replace=False):
        steps.append(JOINT_FLIPS[k].format(**size))
    steps.append(JOINT_IMAGE[rng.integers(len(JOINT_IMAGE))])
    steps.append(JOINT_MASK[rng.integers(len(JOINT_MASK))])
    returns = rng.choice(["return x, m", 'return {"image": x, "mask": m}', "return [x, m]"])
    body = ["img_path = self.images[index]", "mask_path = self.masks[index]", f"x = {image_read}", f"m = {mask_read}"]
    body += [line for step in steps for line in step.split("\n")]
    return f"""
class Case(tud.Dataset):
    def __init__(self, images, masks):
        self.images, self.masks = images, masks

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
{textwrap.indent(chr(10).join(body), " " * 8)}
        {returns}
"""


#: milesial's Pytorch-UNet `BasicDataset` (`FAMILY=unet`, session 114): its variants' steps.
UNET_FILTERS = ["Image.NEAREST", "Image.BILINEAR", "Image.BICUBIC", "Image.LANCZOS", "Image.BOX", "Image.HAMMING"]
UNET_MAPS = [
    "for i, v in enumerate(self.mask_values):\n    out[m == v] = i",
    "for i, v in enumerate(self.mask_values):\n    if m.ndim == 2:\n        out[m == v] = i\n    else:\n        out[(m == v).all(-1)] = i",
    "out[m > 127] = 1",
    "out[m == self.mask_values[-1]] = 1",
    "out[:] = m",
]
UNET_TESTS = [
    "if (x > 1).any():\n    x = x / 255.0",
    "if x.max() > 1:\n    x = x / 255.0",
    "if (x >= 2).any():\n    x = x / 255",
    "x = x / 255.0",
    "if (x > 1).any():\n    x = x / 127.5 - 1",
]


def case_source_unet(rng: np.random.Generator) -> str:
    scale = float(rng.choice([0.5, 0.5, 0.25, 0.3, 0.7, 1.0]))
    image_filter = "Image.BICUBIC" if rng.random() < 0.5 else str(rng.choice(UNET_FILTERS))
    mask_filter = "Image.NEAREST" if rng.random() < 0.6 else str(rng.choice(UNET_FILTERS))
    image_read = rng.choice(["Image.open(img_path)", 'Image.open(img_path).convert("RGB")'])
    mask_read = rng.choice(["Image.open(mask_path)", "Image.open(mask_path)", 'Image.open(mask_path).convert("L")'])
    dtype = rng.choice(["np.int64", "np.int64", "np.uint8", "np.float32"])
    body = [
        "img_path, mask_path = self.images[index], self.masks[index]",
        f"x, m = {image_read}, {mask_read}",
        "w, h = x.size",
        f"newW, newH = int({scale} * w), int({scale} * h)",
        f"x = x.resize((newW, newH), resample={image_filter})",
        f"m = m.resize((newW, newH), resample={mask_filter})" if rng.random() < 0.9 else "m = m.resize((newW, newH))",
        "x, m = np.asarray(x), np.asarray(m)",
        f"out = np.zeros((newH, newW), dtype={dtype})",
        *UNET_MAPS[rng.integers(len(UNET_MAPS))].split("\n"),
        "x = x.transpose((2, 0, 1))",
        *UNET_TESTS[rng.integers(len(UNET_TESTS))].split("\n"),
    ]
    returns = rng.choice(
        [
            'return {"image": torch.as_tensor(x.copy()).float().contiguous(), "mask": torch.as_tensor(out.copy()).long().contiguous()}',
            "return torch.as_tensor(x.copy()).float(), torch.from_numpy(out.copy()).long()",
            'return {"image": torch.from_numpy(x.copy()).float(), "mask": torch.as_tensor(out)}',
        ]
    )
    return f"""
class Case(tud.Dataset):
    def __init__(self, images, masks):
        self.images, self.masks = images, masks
        found = [np.unique(np.asarray(Image.open(p){'.convert("L")' if 'convert' in mask_read else ''})) for p in masks]
        self.mask_values = list(sorted(np.unique(np.concatenate(found)).tolist()))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
{textwrap.indent(chr(10).join(body), " " * 8)}
        {returns}
"""


#: Colour-labelled classes (`FAMILY=colour`, session 116): the colour map, then how the code
#: maps it.
COLOURS = [(128, 128, 128), (128, 0, 0), (192, 192, 128), (128, 64, 128), (0, 0, 192), (64, 64, 0)]
COLOUR_MAPS = [
    "for k, c in enumerate(self.colours):\n    out[np.all(m == c, axis=-1)] = k",
    "for k, c in enumerate(self.colours):\n    out[(m == c).all(-1)] = k + 1",
    "for k, c in enumerate(self.colours):\n    out[(m == np.array(c)).all(axis=2)] = 2 * k",
    "for c, k in self.named.items():\n    out[np.all(m == c, axis=-1)] = k",
    "for k, c in enumerate(self.colours):\n    out[np.all(m == c, axis=-1)] = k\nout[out == 0] = 255",
]


def case_source_colour(rng: np.random.Generator) -> str:
    mask_read = rng.choice(
        [
            'Image.open(mask_path).convert("RGB")',
            "Image.open(mask_path)",
            "cv2.imread(mask_path)",
            "cv2.cvtColor(cv2.imread(mask_path), cv2.COLOR_BGR2RGB)",
        ]
    )
    image_read = 'Image.open(img_path).convert("RGB")'
    resize = rng.random() < 0.5 and "cv2" not in mask_read
    mask_filter = "Image.NEAREST" if rng.random() < 0.7 else str(rng.choice(UNET_FILTERS))
    dtype = rng.choice(["np.int64", "np.uint8", "np.int32", "np.float32"])
    body = [
        "img_path, mask_path = self.images[index], self.masks[index]",
        f"x, m = {image_read}, {mask_read}",
        *(
            [
                "w, h = x.size",
                "x = x.resize((w // 2, h // 2), resample=Image.BICUBIC)",
                f"m = m.resize((w // 2, h // 2), resample={mask_filter})",
            ]
            if resize
            else []
        ),
        "x, m = np.array(x), np.array(m)",
        f"out = np.zeros(m.shape[:2], dtype={dtype})",
        *COLOUR_MAPS[rng.integers(len(COLOUR_MAPS))].split("\n"),
    ]
    compose = "None"
    if rng.random() < 0.6:
        flip = "A.HorizontalFlip(p=1.0), " if rng.random() < 0.5 else ""
        pad = f"A.PadIfNeeded(min_height={int(rng.integers(20, 130))}, min_width={int(rng.integers(20, 130))}, fill_mask={int(rng.choice([0, 255]))}), "
        size = "" if resize else ("A.Resize(height=32, width=40), " if rng.random() < 0.6 else pad)
        compose = f"A.Compose([{size}{flip}A.Normalize(mean=0, std=1, max_pixel_value=255.0), ToTensorV2()])"
        body += ["got = self.transform(image=x, mask=out)", 'return got["image"], got["mask"]']
    else:
        body += ["return torch.from_numpy(x.copy()).permute(2, 0, 1).float() / 255, torch.from_numpy(out)"]
    order = [int(k) for k in rng.permutation(len(COLOURS))] if rng.random() < 0.3 else list(range(len(COLOURS)))
    return f"""
class Case(tud.Dataset):
    def __init__(self, images, masks):
        self.images, self.masks = images, masks
        self.colours = [list(COLOURS[k]) for k in {order}]
        self.named = {{tuple(c): k + 1 for k, c in enumerate(self.colours)}}
        self.transform = {compose}

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
{textwrap.indent(chr(10).join(body), " " * 8)}
"""


def write_colour_masks(images, out, rng, kinds=("rgb", "rgb", "rgba", "palette", "rgb16", "gif", "jpeg")) -> list[str]:
    """A colour mask per image of its size: blocks of the map's colours and two it does not
    name, as an RGB, RGBA, palette or 16-bit RGB PNG, a GIF or a JPEG."""
    palette = np.array([*COLOURS, (10, 200, 10), (255, 255, 255)], np.uint8)
    paths = []
    for k, path in enumerate(images):
        w, h = Image.open(path).size
        kind = rng.choice(list(kinds))
        blocks = rng.integers(0, len(palette), (h // 8 + 1, w // 8 + 1))
        index = np.kron(blocks, np.ones((8, 8), np.int64))[:h, :w]
        name = os.path.join(out, f"{k:03d}_{kind}." + {"gif": "gif", "jpeg": "jpg"}.get(kind, "png"))
        if kind in ("palette", "gif"):
            mask = Image.fromarray(index.astype(np.uint8), "L").convert("P")
            mask.putpalette(palette.reshape(-1).tolist())
            mask.save(name)
        elif kind == "rgba":
            Image.fromarray(np.dstack([palette[index], np.full((h, w), 200, np.uint8)]), "RGBA").save(name)
        elif kind == "rgb16":
            import zlib
            import struct

            wide = (palette[index].astype(">u2") * 257).tobytes()
            rows = b"".join(b"\x00" + wide[r * w * 6 : (r + 1) * w * 6] for r in range(h))

            def chunk(t, d):
                return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))

            header = struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)
            with open(name, "wb") as f:
                f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
        else:
            Image.fromarray(palette[index]).save(name, **({"quality": 90} if kind == "jpeg" else {}))
        paths.append(name)
    return paths


def one_size(images, out, rng) -> list[str]:
    """The images made one size (milesial's class batches them as they are), one of them
    (sometimes) of bytes 0 and 1 alone (an image the U-Net class does not divide)."""
    w, h = int(rng.integers(24, 120)), int(rng.integers(24, 120))
    paths = []
    for k, path in enumerate(images):
        image = Image.open(path).convert("RGB").resize((w, h))
        if k == 2 and rng.random() < 0.3:
            image = Image.fromarray((np.asarray(image) > 128).astype(np.uint8))
        paths.append(os.path.join(out, f"{k:03d}_image.png" if k == 2 else f"{k:03d}_image.jpg"))
        image.save(paths[-1])
    return paths


def replayed(ds, loader, order: list) -> list:
    """The batches the class's own code makes of the samples in `order` (hpuload's), each with
    hpuload's crop window (its plan's) where `get_params` draws and its draws seeded as
    hpuload seeds them, collated by torch's `default_collate`, four a batch."""
    import json

    import torchvision.transforms as transforms

    from hpuload import _tail

    own = transforms.RandomCrop.get_params
    samples = []
    try:
        for index in order:
            w, h = Image.open(ds.images[index]).size
            plan = json.loads(loader._core.sample_plan(0, index, w, h))

            def crop_at(img, output_size, plan=plan):
                cut = plan.get("resized_crop")
                if cut is None:
                    return int(plan["crop"]["top"]), int(plan["crop"]["left"]), *output_size
                return (*cut["at"], *output_size)

            transforms.RandomCrop.get_params = staticmethod(crop_at)
            with _tail.seeded_sample(loader._options.seed, 0, index):
                samples.append(ds[index])
    finally:
        transforms.RandomCrop.get_params = staticmethod(own)
    return [tud.default_collate(samples[k : k + 4]) for k in range(0, len(samples), 4)]


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def write_masks(images, out, rng, kinds=("binary", "levels", "palette", "palette", "gif", "jpeg")) -> list[str]:
    """A mask per image of its size: an 8-bit grey PNG of 0 and 255 blocks, of levels 0-5, a
    palette PNG (or GIF) of indices 0-5 (of a palette of its own), or an RGB JPEG of grey
    levels 0-200."""
    paths = []
    for k, path in enumerate(images):
        w, h = Image.open(path).size
        kind = rng.choice(list(kinds))
        blocks = rng.integers(0, 2 if kind == "binary" else 6, (h // 8 + 1, w // 8 + 1), dtype=np.uint8)
        values = np.kron(blocks, np.ones((8, 8), np.uint8))[:h, :w]
        mask = Image.fromarray(values * 255 if kind == "binary" else values, mode="L")
        if kind in ("palette", "gif"):
            mask = mask.convert("P")
            mask.putpalette([v for i in range(256) for v in ((i * 40 + k * 7) % 256, (i * 90) % 256, (i * 10 + k) % 256)])
        if kind == "jpeg":
            mask = Image.fromarray(values * 40, mode="L").convert("RGB")
        paths.append(os.path.join(out, f"{k:03d}_{kind}." + {"gif": "gif", "jpeg": "jpg"}.get(kind, "png")))
        mask.save(paths[-1])
    return paths


def run(source: str, images, masks):
    import cv2  # noqa: F401 (the classes' source names it)

    from torchvision import tv_tensors
    from torchvision.io import read_image
    from torchvision.transforms import v2

    import random

    import torchvision.transforms as transforms
    import torchvision.transforms.functional as TF

    space = {"A": A, "ToTensorV2": ToTensorV2, "np": np, "Image": Image, "cv2": cv2, "tud": tud, "torch": torch, "COLOURS": COLOURS}
    space.update(tv_tensors=tv_tensors, read_image=read_image, v2=v2, transforms=transforms, TF=TF, random=random)
    exec(compile(source, "<case>", "exec"), space)
    ds = space["Case"](images, masks)
    joint = os.environ.get("FAMILY") == "joint"
    try:
        theirs = list(tud.DataLoader(ds, batch_size=4))  # noqa: the reference (or, for `joint`, whether it raises)
    except Exception as e:  # noqa: BLE001 - the class itself raises: hpuload must not answer otherwise
        theirs = e
    order = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            loader = ht.DataLoader(ds, batch_size=4, backend="cpu")
            ours = []
            for batch in loader:
                ours.append(batch)
                order += list(getattr(loader, "last_indices", []) or [])
        except Exception as e:  # noqa: BLE001
            ours = e
    fell_back = any(issubclass(w.category, ht.FallbackWarning) for w in caught)
    if joint and not isinstance(theirs, Exception) and not isinstance(ours, Exception) and not fell_back:
        theirs = replayed(ds, loader, order)
    fell = [str(w.message) for w in caught if issubclass(w.category, ht.FallbackWarning)]
    skipped = [str(w.message) for w in caught if issubclass(w.category, ht.SkippedSampleWarning)]
    if isinstance(theirs, Exception):
        if not isinstance(ours, Exception) and not fell and skipped:
            # hpuload's policy for a sample it cannot make: named and replaced, the run goes on.
            return "skipped (named)", skipped[0][:200]
        if not isinstance(ours, Exception) and not fell:
            return "SILENT", f"torch's loader raises {type(theirs).__name__}: {theirs}"[:200] + "; hpuload gives batches"
        return "torch raises", f"{type(theirs).__name__}: {theirs}"[:160]
    if isinstance(ours, Exception):
        return "ERROR", f"{type(ours).__name__}: {ours}"[:300]
    if fell:
        return "fallback", fell[0][len("hpuload: using torch.utils.data.DataLoader instead: ") :][:200]
    if len(ours) == len(theirs) and all(same(a, b) for a, b in zip(ours, theirs)):
        return "same", ""
    return "SILENT", "batches differ: " + differences(ours, theirs)


def differences(ours, theirs) -> str:
    """Which of the batches' parts differ, and by how much."""
    said = []
    for b, (x, y) in enumerate(zip(ours, theirs)):
        pairs = zip(x.values(), y.values()) if isinstance(x, dict) else zip(x, y)
        for part, (p, q) in enumerate(pairs):
            if not same(p, q):
                if p.shape != q.shape or p.dtype != q.dtype:
                    said.append(f"batch {b} part {part}: {p.dtype}{tuple(p.shape)} vs {q.dtype}{tuple(q.shape)}")
                else:
                    d = (p.double() - q.double()).abs()
                    said.append(f"batch {b} part {part}: {int((d > 0).sum())} values off, largest {d.max().item():.4g}")
    return "; ".join(said[:4])


def main():
    folder = sys.argv[1]
    cases = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    only = os.environ.get("ONLY")
    files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(folder) for f in fs if f.endswith((".jpg", ".png")))
    counts: dict = {}
    reasons: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in range(cases):
            if only is not None and case != int(only):
                continue
            rng = np.random.default_rng([seed, case])
            pick = rng.choice(len(files), size=8, replace=False)
            images = [files[k] for k in sorted(pick)]
            out = os.path.join(tmp, str(case))
            os.makedirs(out)
            # v2's classes: masks of one byte a pixel (an RGB JPEG's array is no mask v2 takes).
            family = os.environ.get("FAMILY")
            one_byte = family in ("v2", "joint", "unet")
            if family in ("unet", "colour"):
                images = one_size(images, out, rng)
            if family == "colour":
                source = case_source_colour(rng)
                # Masks read as stored are RGB files (another mode's array breaks the class's
                # comparisons in torch's loader too), but now and then.
                stored = ", Image.open(mask_path)\n" in source and rng.random() < 0.9
                masks = write_colour_masks(images, out, rng, *([("rgb", "rgb16", "jpeg")] if stored else []))
            else:
                masks = write_masks(images, out, rng, *([("binary", "levels", "palette", "gif")] if one_byte else []))
            if family != "colour":
                cases = {"v2": case_source_v2, "joint": case_source_joint, "unet": case_source_unet}
                source = cases.get(family, case_source)(rng)
            if only is not None:
                print(source)
            verdict, why = run(source, images, masks)
            counts[verdict] = counts.get(verdict, 0) + 1
            if verdict in ("SILENT", "ERROR") or only is not None:
                print(f"case {case}: {verdict} {why}")
                if verdict == "SILENT":
                    print(source)
            elif verdict in ("skipped (named)", "torch raises") and os.environ.get("SHOW_SKIPS"):
                print(f"case {case}: {verdict} {why}")
            elif verdict == "fallback":
                if os.environ.get("SHOW_FALLBACKS"):
                    print(f"case {case}: {verdict} {why}")
                key = why.split("): ")[-1][:90]
                reasons[key] = reasons.get(key, 0) + 1
    print("outcomes:", counts)
    for why, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:25]:
        print(f"  {n:4d}  {why}")


if __name__ == "__main__":
    main()
