"""Semantic segmentation's geometry: the segmentation reference's training transform
(`RandomResize`, a flip, `pad_if_smaller` then `RandomCrop`) drawn and run natively, each
sample checked against Pillow given hpuload's drawn parameters."""

import json
from collections import Counter

import numpy as np
import torch
from PIL import Image

import hpuload
from hpuload.torch import DataLoader

CROP = 64
FILL = [1, 2, 3]
SEGMENTATION_TRAIN = {
    "name": "segmentation_train",
    "ops": [
        {"op": "random_resize", "min_size": 24, "max_size": 97, "interpolation": "pil_bilinear"},
        {"op": "random_horizontal_flip"},
        {"op": "random_crop", "size": CROP, "pad_end": True, "fill": FILL},
    ],
}


def reference(image: Image.Image, drawn: dict) -> np.ndarray:
    """What the segmentation reference's transforms make of `image` with hpuload's draws:
    Pillow's bilinear resize, the flip, the padding below and to the right, the crop."""
    (rh, rw), (top, left) = drawn["resized"], drawn["at"]
    resized = image.resize((rw, rh), Image.BILINEAR)
    if drawn.get("hflip"):
        resized = resized.transpose(Image.FLIP_LEFT_RIGHT)
    padded = np.empty((max(rh, CROP), max(rw, CROP), 3), np.uint8)
    padded[...] = FILL
    padded[:rh, :rw] = np.asarray(resized)
    return padded[top : top + CROP, left : left + CROP]


def test_a_crop_padded_at_its_ends_gives_pillows_resize_flipped_padded_and_cut_as_drawn(png_folder):
    dataset = hpuload.ImageFolder(png_folder, pipeline=SEGMENTATION_TRAIN)
    loader = DataLoader(dataset, batch_size=4, seed=5, backend="cpu", output_dtype=torch.uint8)
    files = sorted(str(p) for p in png_folder.rglob("*.png"))
    seen = Counter()
    for epoch in range(3):
        index = 0
        for images, _ in loader:
            assert images.shape[1:] == (3, CROP, CROP) and images.dtype == torch.uint8
            for image in images:
                pil = Image.open(files[index]).convert("RGB")
                plan = json.loads(loader._core.sample_plan(epoch, index, *pil.size))
                drawn = plan["resized_crop"]
                want = reference(pil, drawn)
                got = image.permute(1, 2, 0).numpy()
                assert np.array_equal(got, want), (epoch, index, drawn)
                (rh, rw) = drawn["resized"]
                seen["padded"] += rh < CROP or rw < CROP
                seen["cut"] += rh > CROP and rw > CROP
                seen["flipped"] += bool(drawn.get("hflip"))
                index += 1
    assert min(seen.values()) >= 3, seen


def test_the_media_engine_pads_and_flips_a_crop_padded_at_its_ends_as_the_cpu_path_does(jpeg_folder):
    def batches(backend):
        dataset = hpuload.ImageFolder(jpeg_folder, pipeline=SEGMENTATION_TRAIN)
        loader = DataLoader(dataset, batch_size=8, seed=2, backend=backend, output_dtype=torch.uint8)
        return loader, torch.cat([images for images, _ in loader])

    cpu_loader, cpu = batches("cpu")
    _, engine = batches("hw")
    files = sorted(str(p) for p in jpeg_folder.rglob("*.jpg"))
    padded = 0
    for index, (a, b) in enumerate(zip(cpu, engine)):
        drawn = json.loads(cpu_loader._core.sample_plan(0, index, *Image.open(files[index]).size))["resized_crop"]
        (rh, rw), (top, left) = drawn["resized"], drawn["at"]
        h, w = min(CROP, rh - top), min(CROP, rw - left)
        # The padding is the fill on both paths; the image within the engine's floor.
        fill = torch.tensor(FILL, dtype=torch.uint8)[:, None, None]
        for x in (a, b):
            assert (x[:, h:, :] == fill).all() and (x[:, :, w:] == fill).all(), (index, drawn)
        padded += h < CROP or w < CROP
        err = (a[:, :h, :w].double() - b[:, :h, :w].double()).pow(2).mean().item()
        assert 10 * np.log10(255**2 / max(err, 1e-9)) > 30, (index, drawn, err)
    assert padded >= 3
