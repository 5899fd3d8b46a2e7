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


# --- torchvision's VOCSegmentation with the segmentation reference's transforms -------------

import random  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402
import warnings  # noqa: E402

import pytest  # noqa: E402
import torch.utils.data as tud  # noqa: E402
import torchvision  # noqa: E402
from torchvision import tv_tensors  # noqa: E402
from torchvision.transforms import functional as F  # noqa: E402

import reference_segmentation as ref  # noqa: E402
from hpuload.torch import FallbackWarning  # noqa: E402

BASE, SEG_CROP = 40, 48


@pytest.fixture(scope="module")
def voc_root(jpeg_folder, tmp_path_factory):
    """A VOC 2012 tree of 24 of the test photos and palette masks of their size (blobs of
    classes 0-20, an ignore border of 255)."""
    root = tmp_path_factory.mktemp("voc")
    voc = root / "VOCdevkit" / "VOC2012"
    for d in ("JPEGImages", "SegmentationClass", "ImageSets/Segmentation"):
        (voc / d).mkdir(parents=True)
    rng = np.random.default_rng(4)
    names = []
    for k, jpg in enumerate(sorted(jpeg_folder.rglob("*.jpg"))[:24]):
        name = f"2007_{k:06d}"
        image = Image.open(jpg)
        if k % 3 == 0:  # some small images, which the crop pads on any draw
            image = image.resize((image.width // 6, image.height // 6))
        image.convert("RGB").save(voc / "JPEGImages" / f"{name}.jpg", quality=90)
        w, h = image.size
        mask = np.zeros((h, w), np.uint8)
        for _ in range(6):
            y, x = rng.integers(0, h), rng.integers(0, w)
            mask[y : y + rng.integers(1, h), x : x + rng.integers(1, w)] = rng.integers(1, 21)
        mask[rng.integers(0, h), :] = 255
        m = Image.fromarray(mask, mode="L").convert("P")
        m.putpalette(list(rng.integers(0, 256, 768).astype(int)))
        m.save(voc / "SegmentationClass" / f"{name}.png")
        names.append(name)
    (voc / "ImageSets" / "Segmentation" / "train.txt").write_text("\n".join(names) + "\n")
    return root


def voc(root, transforms):
    return torchvision.datasets.VOCSegmentation(root, year="2012", image_set="train", transforms=transforms)


def native(dataset, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(dataset, **kwargs)
    assert type(loader) is DataLoader
    return loader


def moved(image, mask, drawn, crop):
    """The reference's steps after RandomResize's draw, given hpuload's draws."""
    (rh, rw), (top, left) = drawn["resized"], drawn["at"]
    image = image.resize((rw, rh), Image.BILINEAR)
    mask = mask.resize((rw, rh), Image.NEAREST)
    if drawn.get("hflip"):
        image, mask = image.transpose(Image.FLIP_LEFT_RIGHT), mask.transpose(Image.FLIP_LEFT_RIGHT)
    image, mask = ref.pad_if_smaller(image, crop), ref.pad_if_smaller(mask, crop, fill=255)
    image, mask = image.crop((left, top, left + crop, top + crop)), mask.crop((left, top, left + crop, top + crop))
    x = torchvision.transforms.functional.pil_to_tensor(image)
    x = torchvision.transforms.functional.convert_image_dtype(x, torch.float)
    x = torchvision.transforms.functional.normalize(x, ref.MEAN, ref.STD)
    return x, torch.as_tensor(np.array(mask), dtype=torch.int64)


def test_the_segmentation_references_training_voc_runs_natively_with_its_masks_moved_as_its_images(voc_root):
    dataset = voc(voc_root, ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP))
    loader = native(dataset, batch_size=5, shuffle=True, seed=3, backend="cpu")
    seen = Counter()
    for epoch in range(2):
        for images, masks in loader:
            assert images.dtype == torch.float32 and images.shape[1:] == (3, SEG_CROP, SEG_CROP)
            assert masks.dtype == torch.int64 and masks.shape == (images.shape[0], SEG_CROP, SEG_CROP)
            for k, index in enumerate(loader.last_indices):
                image = Image.open(dataset.images[index]).convert("RGB")
                mask = Image.open(dataset.masks[index])
                drawn = json.loads(loader._core.sample_plan(epoch, index, *image.size))["resized_crop"]
                want_x, want_m = moved(image, mask, drawn, SEG_CROP)
                assert torch.equal(masks[k], want_m), (epoch, index, drawn)
                assert (images[k] - want_x).abs().max() < 1e-5, (epoch, index, drawn)
                short = drawn["resized"][0] if image.height <= image.width else drawn["resized"][1]
                seen[short] += 1
                seen["flip"] += bool(drawn.get("hflip"))
                seen["padded"] += (want_m == 255).all(dim=1).any().item()
    sizes = [s for s in seen if isinstance(s, int)]
    assert min(sizes) >= BASE // 2 and max(sizes) <= 2 * BASE, sizes
    assert seen["flip"] > 10 and seen["padded"] > 10, seen


def test_voc_with_the_references_collate_gives_torchs_shapes_and_dtypes(voc_root):
    preset = ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP)
    ours = native(voc(voc_root, preset), batch_size=4, collate_fn=ref.collate_fn, drop_last=True)
    theirs = tud.DataLoader(voc(voc_root, preset), batch_size=4, collate_fn=ref.collate_fn, drop_last=True)
    a, b = next(iter(ours)), next(iter(theirs))
    assert [(t.shape, t.dtype) for t in a] == [(t.shape, t.dtype) for t in b]
    assert len(ours) == len(theirs) == 6
    # Masks hold the dataset's classes and the ignore index, as torch's loader gives them.
    random.seed(0)
    torch.manual_seed(0)
    classes = set(torch.cat([m.flatten() for _, m in theirs]).tolist())
    assert set(torch.cat([m.flatten() for _, m in ours]).tolist()) <= classes | {0, 255}


@pytest.mark.parametrize("batch_size", [1, 3])
def test_the_segmentation_eval_preset_runs_natively_each_image_its_own_size_as_torchs_loader_gives_it(voc_root, batch_size):
    # Deterministic: torch's own loader of the same dataset is the reference, batch by batch
    # (its collate pads a batch to its largest image, masks with 255).
    dataset = voc(voc_root, ref.SegmentationPresetEval(base_size=BASE))
    ours = native(dataset, batch_size=batch_size, collate_fn=ref.collate_fn, backend="cpu")
    theirs = tud.DataLoader(dataset, batch_size=batch_size, collate_fn=ref.collate_fn)
    shapes = set()
    for (xa, ma), (xb, mb) in zip(ours, theirs, strict=True):
        assert xa.shape == xb.shape and xa.dtype == xb.dtype and ma.dtype == mb.dtype
        assert torch.equal(ma, mb)
        assert (xa - xb).abs().max() < 1e-5
        shapes.add(tuple(xa.shape[2:]))
    assert len(shapes) > 1  # the sizes differ: the shorter side BASE, the longer in proportion
    assert all(min(s) == BASE for s in shapes) or batch_size > 1
    # Without a collate_fn, a batch of one is what default_collate makes of the sample.
    x, m = next(iter(native(dataset, batch_size=1, backend="cpu")))
    want_x, want_m = dataset[0]
    assert torch.equal(m, want_m[None]) and (x - want_x[None]).abs().max() < 1e-5


def test_a_segmentation_pipeline_on_tensors_falls_back_naming_why(voc_root):
    steps = [ref.PILToTensor(), ref.RandomResize(20, 80), ref.RandomCrop(SEG_CROP)]
    with pytest.warns(FallbackWarning, match="tensor"):
        DataLoader(voc(voc_root, ref.Compose(steps)), batch_size=2)
    steps = [ref.RandomResize(20, 80), ref.PILToTensor()]
    with pytest.warns(FallbackWarning, match="drawn size"):
        DataLoader(voc(voc_root, ref.Compose(steps)), batch_size=2)


def test_a_transform_reassigned_on_a_voc_dataset_is_followed_from_the_next_epoch(voc_root):
    dataset = voc(voc_root, ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP))
    loader = native(dataset, batch_size=4, backend="cpu")
    next(iter(loader))
    dataset.transforms = ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP, hflip_prob=0)
    for _ in loader:
        pass
    flips = 0
    for k, index in enumerate(range(len(dataset))):
        w, h = Image.open(dataset.images[index]).size
        flips += bool(json.loads(loader._core.sample_plan(1, index, w, h))["resized_crop"].get("hflip"))
    assert flips == 0


def test_voc_on_the_media_engine_gives_the_cpu_paths_masks_and_its_images_within_the_engines_floor(voc_root):
    dataset = voc(voc_root, ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP))
    cpu = list(native(dataset, batch_size=8, seed=1, backend="cpu"))
    engine_loader = native(dataset, batch_size=8, seed=1, backend="auto")
    engine = list(engine_loader)
    assert engine_loader.report()["hw_samples"] > 0
    for (xa, ma), (xb, mb) in zip(cpu, engine):
        assert torch.equal(ma, mb)
        # Normalized values: a level is about 1 / (255 * 0.225) apart.
        err = ((xa - xb) * 0.225 * 255).pow(2).mean().item()
        assert 10 * np.log10(255**2 / max(err, 1e-9)) > 30, err


# --- The segmentation reference's COCO set ---------------------------------------------------


@pytest.fixture(scope="module")
def coco_seg(jpeg_folder, tmp_path_factory):
    """12 test photos with COCO annotations of what the reference's COCO steps must handle:
    objects of two polygons, objects overlapping, categories it keeps (remapped) and others
    it drops, a crowd's uncompressed RLE, an image whose kept objects cover under 1000
    pixels and one with none (both out of the training set, zeros in the evaluation one)."""
    pytest.importorskip("pycocotools")
    root = tmp_path_factory.mktemp("coco-seg")
    rng = np.random.default_rng(7)
    images, anns = [], []
    for k, jpg in enumerate(sorted(jpeg_folder.rglob("*.jpg"))[:12]):
        image = Image.open(jpg).convert("RGB")
        if k % 4 == 1:  # small images, which the crop pads on any draw
            image = image.resize((image.width // 5, image.height // 5))
        name = f"{k:012d}.jpg"
        image.save(root / name, quality=90)
        w, h = image.size
        image_id = 3 * k + 2
        images.append({"id": image_id, "file_name": name, "width": w, "height": h})

        def polygon():
            x, y = rng.uniform(0, w * 0.7), rng.uniform(0, h * 0.7)
            bw, bh = rng.uniform(0.1, 0.5) * w, rng.uniform(0.1, 0.5) * h
            return [float(v) for v in (x, y, x + bw, y + rng.uniform(0, bh), x + bw * 0.6, y + bh, x, y + bh * 0.8)]

        count = {5: 0, 9: 1}.get(k, int(rng.integers(2, 6)))
        for j in range(count):
            cat = int(rng.choice([5, 2, 16, 44, 72, 1, 90, 13]))  # 90 and 13 are not in CAT_LIST
            segmentation = [polygon()] + ([polygon()] if j % 2 else [])
            anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": cat, "iscrowd": 0,
                         "segmentation": segmentation, "area": float(w * h) / 8, "bbox": [0, 0, 1, 1]})
        if k == 9:  # one small object: under 1000 pixels kept
            anns[-1].update(category_id=5, area=300.0)
        if k == 3:  # a crowd, as COCO writes one: an uncompressed RLE of the image's size
            runs = [w * h // 3, w * h // 4]
            runs.append(w * h - sum(runs))
            anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": 1, "iscrowd": 1,
                         "segmentation": {"counts": runs, "size": [h, w]}, "area": float(runs[1]), "bbox": [0, 0, 1, 1]})
    cats = [{"id": c, "name": str(c)} for c in sorted({a["category_id"] for a in anns})]
    ann_file = root / "instances.json"
    ann_file.write_text(json.dumps({"images": images, "annotations": anns, "categories": cats}))
    return root, ann_file


def test_the_segmentation_references_coco_training_set_runs_natively_with_its_semantic_masks_moved_as_its_images(coco_seg):
    root, ann = coco_seg
    dataset = ref.get_coco(root, ann, ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP), train=True)
    assert len(dataset) == 10  # the image without kept objects and the one under 1000 pixels are out
    loader = native(dataset, batch_size=4, shuffle=True, seed=5, backend="cpu")
    inner = dataset.dataset
    convert = [ref.FilterAndRemapCocoCategories(ref.CAT_LIST), ref.ConvertCocoPolysToMask()]
    seen = Counter()
    for epoch in range(2):
        for images, masks in loader:
            assert images.shape[1:] == (3, SEG_CROP, SEG_CROP) and masks.dtype == torch.int64
            for k, index in enumerate(loader.last_indices):
                image, anns = inner._load_image(inner.ids[dataset.indices[index]]), inner._load_target(inner.ids[dataset.indices[index]])
                mask = ref.Compose(convert)(image, anns)[1]
                drawn = json.loads(loader._core.sample_plan(epoch, index, *image.size))["resized_crop"]
                want_x, want_m = moved(image, mask, drawn, SEG_CROP)
                assert torch.equal(masks[k], want_m), (epoch, index, drawn)
                assert (images[k] - want_x).abs().max() < 1e-5, (epoch, index, drawn)
                seen.update(torch.unique(want_m).tolist())
    # Remapped classes (CAT_LIST's places), overlaps and padding marked 255, background 0.
    assert {0, 255} <= set(seen) and max(c for c in seen if c != 255) <= 20 and len(seen) > 4, seen


@pytest.mark.parametrize("batch_size", [1, 3])
def test_the_segmentation_references_coco_evaluation_set_gives_torchs_batches(coco_seg, batch_size):
    root, ann = coco_seg
    dataset = ref.get_coco(root, ann, ref.SegmentationPresetEval(base_size=BASE), train=False)
    ours = native(dataset, batch_size=batch_size, collate_fn=ref.collate_fn, backend="cpu")
    theirs = tud.DataLoader(dataset, batch_size=batch_size, collate_fn=ref.collate_fn)
    n, overlaps, empty = 0, 0, 0
    for (xa, ma), (xb, mb) in zip(ours, theirs, strict=True):
        assert xa.shape == xb.shape and ma.dtype == mb.dtype
        assert torch.equal(ma, mb)
        assert (xa - xb).abs().max() < 1e-5
        n += len(xa)
        overlaps += (ma == 255).any().item()
        empty += (ma == 0).all().item()
    assert n == len(dataset) == 12
    # Overlapping objects marked (at batch 1 no padding shows), the image without objects zeros.
    assert batch_size > 1 or (overlaps > 2 and empty == 1)


def test_a_coco_conversion_that_is_not_the_references_falls_back_naming_it(coco_seg):
    root, ann = coco_seg

    class ConvertCocoPolysToMask(ref.ConvertCocoPolysToMask):
        """Keeps overlaps as the larger class rather than the ignore index."""

        def __call__(self, image, anno):
            anno = [dict(a, category_id=min(a["category_id"], 3)) for a in anno]
            return super().__call__(image, anno)

    dataset = ref.get_coco(root, ann, ref.SegmentationPresetEval(base_size=BASE), train=False)
    dataset.transforms.transforms[1] = ConvertCocoPolysToMask()
    with pytest.warns(FallbackWarning, match="ConvertCocoPolysToMask does not give the reference's mask"):
        DataLoader(dataset, batch_size=2)


def test_a_coco_sets_categories_changed_between_epochs_sends_the_next_epoch_to_torch(coco_seg):
    root, ann = coco_seg
    dataset = ref.get_coco(root, ann, ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP), train=True)
    loader = native(dataset, batch_size=4, backend="cpu")
    next(iter(loader))
    dataset.dataset.transforms.transforms[0] = ref.FilterAndRemapCocoCategories([0, 5, 2])
    with pytest.warns(FallbackWarning, match="COCO set's masks"):
        batches = list(loader)
    assert max(int(m[m != 255].max()) for _, m in batches) <= 2


@pytest.mark.parametrize("conversions", ["ConvertImageDtype", "ToTensor"])
def test_the_references_earlier_conversions_run_natively_with_the_same_samples(voc_root, conversions):
    # The reference's presets before `ToDtype` (as forks of it still write them): the same
    # samples, draw for draw, as today's preset with the same seed.
    if conversions == "ToTensor":
        tail = [ref.ToTensor()]
    else:
        tail = [ref.PILToTensor(), ref.ConvertImageDtype(torch.float)]
    steps = [ref.RandomResize(BASE // 2, 2 * BASE), ref.RandomHorizontalFlip(0.5), ref.RandomCrop(SEG_CROP)]
    earlier = voc(voc_root, ref.Compose(steps + tail + [ref.Normalize(ref.MEAN, ref.STD)]))
    today = voc(voc_root, ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP))
    for (xa, ma), (xb, mb) in zip(native(earlier, batch_size=6, seed=2, backend="cpu"), native(today, batch_size=6, seed=2, backend="cpu")):
        assert torch.equal(xa, xb) and torch.equal(ma, mb)


def test_a_conversion_that_leaves_the_mask_as_uint8_falls_back_naming_it(voc_root):
    class ToTensor:
        def __call__(self, image, target):
            return torchvision.transforms.functional.to_tensor(image), torch.as_tensor(np.array(target))

    steps = [ref.RandomResize(BASE // 2, 2 * BASE), ref.RandomCrop(SEG_CROP), ToTensor()]
    with pytest.warns(FallbackWarning, match="ToTensor does not do what the segmentation reference's does"):
        DataLoader(voc(voc_root, ref.Compose(steps)), batch_size=2)


class MaskPaddedWithZero(ref.RandomCrop):
    """A fork's RandomCrop: the mask padded with the background class, not the ignore index."""

    def __call__(self, image, target):
        image, target = ref.pad_if_smaller(image, self.size), ref.pad_if_smaller(target, self.size, fill=0)
        top, left, h, w = torchvision.transforms.RandomCrop.get_params(image, (self.size, self.size))
        return F.crop(image, top, left, h, w), F.crop(target, top, left, h, w)


class BicubicResize(ref.RandomResize):
    """A fork's RandomResize: the image resized bicubic."""

    def __call__(self, image, target):
        size = random.randint(self.min_size, self.max_size)
        image = F.resize(image, size, interpolation=torchvision.transforms.InterpolationMode.BICUBIC)
        return image, F.resize(target, size, interpolation=torchvision.transforms.InterpolationMode.NEAREST)


class ImageOnlyFlip(ref.RandomHorizontalFlip):
    """A fork's RandomHorizontalFlip that leaves the mask as it was."""

    def __call__(self, image, target):
        return (F.hflip(image) if random.random() < self.flip_prob else image), target


class TorchDrawnFlip(ref.RandomHorizontalFlip):
    """A fork's RandomHorizontalFlip drawing from torch's generator: hpuload cannot know it
    draws with the same probability, so it is not taken."""

    def __call__(self, image, target):
        if torch.rand(1).item() < self.flip_prob:
            return F.hflip(image), F.hflip(target)
        return image, target


@pytest.mark.parametrize(
    "fork",
    [MaskPaddedWithZero(SEG_CROP), BicubicResize(BASE // 2, 2 * BASE), ImageOnlyFlip(0.5), TorchDrawnFlip(0.5)],
    ids=lambda fork: type(fork).__name__,
)
def test_a_fork_of_a_reference_step_that_does_otherwise_falls_back_naming_it(voc_root, fork):
    steps = [ref.RandomResize(BASE // 2, 2 * BASE), ref.RandomHorizontalFlip(0.5), ref.RandomCrop(SEG_CROP)]
    at = next(k for k, step in enumerate(steps) if isinstance(fork, type(step)))
    steps[at] = fork
    steps += [ref.PILToTensor(), ref.ToDtype(torch.float, scale=True), ref.Normalize(ref.MEAN, ref.STD)]
    name = type(steps[at]).__mro__[1].__name__
    rename = type(name, (type(fork),), {})  # the fork carries the reference's class name
    steps[at].__class__ = rename
    before = random.getstate(), torch.get_rng_state()
    with pytest.warns(FallbackWarning, match=f"{name} does not do what the segmentation reference's {name} does"):
        loader = DataLoader(voc(voc_root, ref.Compose(steps)), batch_size=2)
    assert not isinstance(loader, DataLoader)
    assert (random.getstate(), torch.get_rng_state().tolist()) == (before[0], before[1].tolist())  # draws left as they were


class RandomApply:
    """A fork's container: its steps, all or none, with a probability."""

    def __init__(self, transforms, p=0.5):
        self.transforms, self.p = transforms, p

    def __call__(self, image, target):
        if random.random() < self.p:
            for t in self.transforms:
                image, target = t(image, target)
        return image, target


def test_a_container_that_does_not_run_its_steps_in_sequence_falls_back_naming_it(voc_root):
    steps = [ref.RandomResize(BASE // 2, 2 * BASE), RandomApply([ref.RandomHorizontalFlip(1.0)]), ref.RandomCrop(SEG_CROP)]
    steps += [ref.PILToTensor(), ref.ToDtype(torch.float, scale=True), ref.Normalize(ref.MEAN, ref.STD)]
    with pytest.warns(FallbackWarning, match="RandomApply does not run its steps one after another"):
        loader = DataLoader(voc(voc_root, ref.Compose(steps)), batch_size=2)
    assert not isinstance(loader, DataLoader)


def test_a_v2_pad_if_smaller_that_pads_masks_otherwise_falls_back_naming_it(coco_seg):
    class PadIfSmaller(ref.PadIfSmaller):
        """A fork's: the fill read as 255 for masks, every input padded with 0."""

        def transform(self, inpt, params):
            if not any(params["padding"]):
                return inpt
            return torchvision.transforms.v2.functional.pad(inpt, padding=params["padding"], fill=0)

    root, ann = coco_seg
    preset = ref.preset_train_v2(BASE, SEG_CROP)
    at = next(k for k, step in enumerate(preset.transforms) if isinstance(step, ref.PadIfSmaller))
    preset.transforms[at] = PadIfSmaller(SEG_CROP, fill={tv_tensors.Mask: 255, "others": 0})
    with pytest.warns(FallbackWarning, match="PadIfSmaller does not do what the segmentation reference's PadIfSmaller does"):
        DataLoader(ref.get_coco_v2(root, ann, preset, train=True), batch_size=2)


# --- The same COCO set with the reference's `--use-v2` ---------------------------------------


def moved_v2(image, mask, drawn, crop):
    """v2's steps after RandomResize's draw, given hpuload's draws: the image by Pillow, the
    `Mask` by torch's nearest resize."""
    from torchvision import tv_tensors
    from torchvision.transforms.v2 import functional as F2

    (rh, rw), (top, left) = drawn["resized"], drawn["at"]
    image, mask = F2.resize(image, [rh, rw]), F2.resize(mask, [rh, rw])
    if drawn.get("hflip"):
        image, mask = F2.horizontal_flip(image), F2.horizontal_flip(mask)
    padding = [0, 0, max(crop - rw, 0), max(crop - rh, 0)]
    image, mask = F2.pad(image, padding, fill=0), F2.pad(mask, padding, fill=255)
    image, mask = F2.crop(image, top, left, crop, crop), F2.crop(mask, top, left, crop, crop)
    x = torchvision.transforms.functional.convert_image_dtype(F2.pil_to_tensor(image), torch.float)
    assert isinstance(mask, tv_tensors.Mask)
    return torchvision.transforms.functional.normalize(x, ref.MEAN, ref.STD), mask.as_subclass(torch.Tensor).long()


def test_the_references_v2_coco_training_set_runs_natively_with_v2s_mask_resize(coco_seg):
    root, ann = coco_seg
    dataset = ref.get_coco_v2(root, ann, ref.preset_train_v2(BASE, SEG_CROP), train=True)
    assert len(dataset) == 10
    loader = native(dataset, batch_size=4, shuffle=True, seed=6, backend="cpu")
    wrapper = dataset.dataset
    to_voc = ref.CocoDetectionToVOCSegmentation()
    sizes, differs = set(), 0
    for epoch in range(2):
        for images, masks in loader:
            assert images.shape[1:] == (3, SEG_CROP, SEG_CROP) and masks.dtype == torch.int64
            for k, index in enumerate(loader.last_indices):
                position = dataset.indices[index]
                image, target = wrapper._wrapper(position, wrapper._dataset[position])
                mask = to_voc(image, target)[1]
                drawn = json.loads(loader._core.sample_plan(epoch, index, *image.size))["resized_crop"]
                want_x, want_m = moved_v2(image, mask, drawn, SEG_CROP)
                assert torch.equal(masks[k], want_m), (epoch, index, drawn)
                assert (images[k] - want_x).abs().max() < 1e-5, (epoch, index, drawn)
                sizes.add(min(drawn["resized"]) if image.width != image.height else drawn["resized"][0])
                # Pillow's nearest positions would give another mask for most draws.
                pil = moved(image, Image.fromarray(mask.numpy()), drawn, SEG_CROP)[1]
                differs += not torch.equal(pil, want_m)
    # v2's RandomResize draws its size below max_size (torch.randint).
    assert min(sizes) >= BASE // 2 and max(sizes) < 2 * BASE and differs > 5, (sizes, differs)


def test_the_references_v2_coco_evaluation_set_gives_torchs_batches(coco_seg):
    root, ann = coco_seg
    dataset = ref.get_coco_v2(root, ann, ref.preset_eval_v2(BASE), train=False)
    ours = native(dataset, batch_size=3, backend="cpu")
    theirs = tud.DataLoader(dataset, batch_size=3)
    n = 0
    for (xa, ma), (xb, mb) in zip(ours, theirs, strict=True):
        assert xa.shape == xb.shape == (len(xa), 3, BASE, BASE)
        assert ma.dtype == mb.dtype == torch.uint8 and type(ma) is type(mb) is torch.Tensor
        assert torch.equal(ma, mb)
        assert (xa - xb).abs().max() < 1e-5
        n += len(xa)
    assert n == 12


def test_a_v2_preset_with_a_step_hpuload_does_not_run_falls_back_naming_it(coco_seg):
    from torchvision.transforms import v2

    root, ann = coco_seg
    preset = ref.preset_train_v2(BASE, SEG_CROP)
    preset.transforms.insert(4, v2.ColorJitter(0.2))
    with pytest.warns(FallbackWarning, match="ColorJitter"):
        DataLoader(ref.get_coco_v2(root, ann, preset, train=True), batch_size=2)


# --- torchvision's SBDataset (the reference's `--dataset voc_aug`) ----------------------------


@pytest.fixture(scope="module")
def sbd_root(voc_root, tmp_path_factory):
    """The VOC tree's photos and masks as an SBD tree: `img/*.jpg`, `cls/*.mat` (each mask in
    `GTcls.Segmentation`, beside boundaries and the classes present, as SBD writes them),
    `train.txt`."""
    scipy_io = pytest.importorskip("scipy.io")
    root = tmp_path_factory.mktemp("sbd")
    (root / "img").mkdir()
    (root / "cls").mkdir()
    voc = voc_root / "VOCdevkit" / "VOC2012"
    names = (voc / "ImageSets" / "Segmentation" / "train.txt").read_text().split()
    for name in names:
        (root / "img" / f"{name}.jpg").write_bytes((voc / "JPEGImages" / f"{name}.jpg").read_bytes())
        mask = np.array(Image.open(voc / "SegmentationClass" / f"{name}.png"))
        mask[mask == 255] = 0  # SBD has no border class
        gt = np.empty((1, 1), dtype=[("Boundaries", "O"), ("Segmentation", "O"), ("CategoriesPresent", "O")])
        present = np.unique(mask[mask > 0]).astype(np.uint8).reshape(-1, 1)
        gt[0, 0] = (np.empty((20, 1), dtype=object), mask, present)
        for k in range(20):
            gt[0, 0]["Boundaries"][k, 0] = np.zeros((1, 1), np.uint8)
        scipy_io.savemat(root / "cls" / f"{name}.mat", {"GTcls": gt}, do_compression=True)
    (root / "train.txt").write_text("\n".join(names) + "\n")
    return root


def sbd(root, transforms):
    return torchvision.datasets.SBDataset(root, image_set="train", mode="segmentation", transforms=transforms)


def test_sbd_segmentation_runs_natively_with_the_masks_its_own_code_reads_moved_as_its_images(sbd_root):
    dataset = sbd(sbd_root, ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP))
    loader = native(dataset, batch_size=5, shuffle=True, seed=8, backend="cpu")
    classes = set()
    for images, masks in loader:
        assert images.shape[1:] == (3, SEG_CROP, SEG_CROP) and masks.dtype == torch.int64
        for k, index in enumerate(loader.last_indices):
            image = Image.open(dataset.images[index]).convert("RGB")
            mask = dataset._get_target(dataset.masks[index])
            drawn = json.loads(loader._core.sample_plan(0, index, *image.size))["resized_crop"]
            want_x, want_m = moved(image, mask, drawn, SEG_CROP)
            assert torch.equal(masks[k], want_m), (index, drawn)
            assert (images[k] - want_x).abs().max() < 1e-5, (index, drawn)
            classes.update(torch.unique(want_m).tolist())
    assert len(classes - {0, 255}) > 5


def test_sbd_evaluation_gives_torchs_batches(sbd_root):
    dataset = sbd(sbd_root, ref.SegmentationPresetEval(base_size=BASE))
    ours = native(dataset, batch_size=2, collate_fn=ref.collate_fn, backend="cpu")
    theirs = tud.DataLoader(dataset, batch_size=2, collate_fn=ref.collate_fn)
    for (xa, ma), (xb, mb) in zip(ours, theirs, strict=True):
        assert torch.equal(ma, mb) and (xa - xb).abs().max() < 1e-5


def test_sbd_in_boundaries_mode_is_not_taken_for_segmentation(sbd_root):
    dataset = torchvision.datasets.SBDataset(sbd_root, image_set="train", mode="boundaries")
    assert not hpuload._segmentation.is_segmentation(dataset)


# --- torchvision's Cityscapes (semantic targets) ----------------------------------------------


@pytest.fixture(scope="module")
def cityscapes_root(voc_root, tmp_path_factory):
    """A Cityscapes tree (`leftImg8bit/train/CITY`, `gtFine/train/CITY`) of the VOC tree's
    images as PNGs and grey labelIds masks of their size (classes 0-33)."""
    root = tmp_path_factory.mktemp("cityscapes")
    tree = voc(voc_root, None)
    rng = np.random.default_rng(9)
    for k, (image, mask) in enumerate(zip(tree.images, tree.masks)):
        city = ("aachen", "bremen")[k % 2]
        name = f"{city}_{k:06d}_000019"
        (root / "leftImg8bit" / "train" / city).mkdir(parents=True, exist_ok=True)
        (root / "gtFine" / "train" / city).mkdir(parents=True, exist_ok=True)
        Image.open(image).save(root / "leftImg8bit" / "train" / city / f"{name}_leftImg8bit.png")
        labels = np.array(Image.open(mask), dtype=np.uint8) % 34
        labels[: max(1, labels.shape[0] // 9)] = rng.integers(0, 34)  # the ego vehicle's band
        Image.fromarray(labels, mode="L").save(root / "gtFine" / "train" / city / f"{name}_gtFine_labelIds.png")
    return root


def cityscapes(root, transforms, target_type="semantic"):
    return torchvision.datasets.Cityscapes(root, split="train", mode="fine", target_type=target_type, transforms=transforms)


def test_cityscapes_semantic_runs_natively_with_its_label_masks_moved_as_its_images(cityscapes_root):
    dataset = cityscapes(cityscapes_root, ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP))
    loader = native(dataset, batch_size=5, shuffle=True, seed=4, backend="cpu")
    n = 0
    for epoch in range(2):
        for images, masks in loader:
            assert images.shape[1:] == (3, SEG_CROP, SEG_CROP) and masks.dtype == torch.int64
            for k, index in enumerate(loader.last_indices):
                image = Image.open(dataset.images[index]).convert("RGB")
                mask = Image.open(dataset.targets[index][0])
                drawn = json.loads(loader._core.sample_plan(epoch, index, *image.size))["resized_crop"]
                want_x, want_m = moved(image, mask, drawn, SEG_CROP)
                assert torch.equal(masks[k], want_m), (epoch, index, drawn)
                assert (images[k] - want_x).abs().max() < 1e-5, (epoch, index, drawn)
                n += 1
    assert n == 2 * len(dataset)


def test_cityscapes_evaluation_gives_torchs_batches_and_other_target_types_are_not_taken(cityscapes_root):
    dataset = cityscapes(cityscapes_root, ref.SegmentationPresetEval(base_size=BASE))
    ours = native(dataset, batch_size=3, collate_fn=ref.collate_fn, backend="cpu")
    theirs = tud.DataLoader(dataset, batch_size=3, collate_fn=ref.collate_fn)
    for (xa, ma), (xb, mb) in zip(ours, theirs, strict=True):
        assert xa.shape == xb.shape and torch.equal(ma, mb) and (xa - xb).abs().max() < 1e-5
    from hpuload import _segmentation

    two = cityscapes(cityscapes_root, None, target_type=["semantic", "instance"])
    assert not _segmentation.is_segmentation(two)


# --- A mask that cannot be read ---------------------------------------------------------------


@pytest.fixture()
def voc_damaged(voc_root, tmp_path):
    """The VOC tree with its sixth mask cut short."""
    import shutil

    root = tmp_path / "voc"
    shutil.copytree(voc_root, root)
    dataset = voc(root, None)
    path = Path(dataset.masks[5])
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return root, str(path)


def damaged_epoch(voc_damaged, preset: str, batch_size: int, replaced_by: str):
    """`(dataset, [(images, masks, indices)])` of an epoch over the damaged tree with the
    training or evaluation preset, warned of the damaged mask, replaced by `replaced_by`."""
    root, damaged = voc_damaged
    train = preset == "train"
    transforms = ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP) if train else ref.SegmentationPresetEval(base_size=BASE)
    dataset = voc(root, transforms)
    loader = native(dataset, batch_size=batch_size, collate_fn=None if train else ref.collate_fn, backend="cpu")
    with pytest.warns(hpuload.torch.SkippedSampleWarning, match=rf"skipped sample 5 \({damaged}\): its mask cannot be made; replaced by {replaced_by}"):
        return dataset, [(x, m, list(loader.last_indices)) for x, m in loader]


@pytest.mark.parametrize("preset", ["train", "eval"])
def test_a_damaged_mask_is_named_and_its_sample_replaced_as_a_damaged_image_is(voc_damaged, preset):
    train = preset == "train"
    dataset, batches = damaged_epoch(voc_damaged, preset, 4, "sample 6 of its batch")
    assert sum(len(x) for x, _, _ in batches) == len(dataset)  # nothing lost, the batch's size kept
    x, m, indices = batches[1]
    assert indices == [4, 6, 6, 7]
    assert torch.equal(x[1], x[2]) and torch.equal(m[1], m[2])
    if not train:  # deterministic: the replacement is the sample torch's loader gives for index 6
        want_x, want_m = dataset[6]
        h, w = want_m.shape
        assert torch.equal(m[2, :h, :w], want_m) and (x[2, :, :h, :w] - want_x).abs().max() < 1e-5


@pytest.mark.parametrize("preset", ["train", "eval"])
def test_a_damaged_mask_alone_in_its_batch_is_replaced_by_the_datasets_own_next_sample(voc_damaged, preset):
    # The reference evaluates with batches of one: no other sample of the batch to take.
    train = preset == "train"
    dataset, batches = damaged_epoch(voc_damaged, preset, 1, "the dataset's own sample 6")
    assert [i for _, _, (i,) in batches] == [0, 1, 2, 3, 4, 6, 6, *range(7, len(dataset))]
    x, m, _ = batches[5]
    assert x.shape[0] == m.shape[0] == 1 and m.dtype == torch.int64
    if train:
        assert x.shape[1:] == (3, SEG_CROP, SEG_CROP) and m.shape[1:] == (SEG_CROP, SEG_CROP)
    else:  # deterministic: the dataset's own sample 6
        want_x, want_m = dataset[6]
        assert torch.equal(m[0], want_m) and (x[0] - want_x).abs().max() < 1e-5


def test_a_damaged_mask_under_on_error_fail_raises_naming_it(voc_damaged):
    root, damaged = voc_damaged
    loader = native(voc(root, ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP)), batch_size=4, on_error="fail", backend="cpu")
    with pytest.raises(hpuload.SampleError, match=rf"sample 5 \({damaged}\): its mask cannot be made"):
        list(loader)


def test_building_a_seeded_loader_checks_the_references_steps_leaving_every_torch_generator_as_it_was(voc_root, monkeypatch):
    # torch.manual_seed also seeds (or queues a seed for) every device's generator: the
    # checks seed the CPU generator alone, and put it back.
    seeded = []
    monkeypatch.setattr(torch, "manual_seed", lambda seed: seeded.append(seed))
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda seed: seeded.append(seed))
    before = torch.get_rng_state()
    # (Without a seed the loader draws its own from torch's generator, as torch's does.)
    native(voc(voc_root, ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP)), batch_size=4, seed=1, backend="cpu")
    assert seeded == [] and torch.equal(torch.get_rng_state(), before)


def test_a_mask_whose_header_is_gone_is_a_damaged_mask_not_a_reason_to_fall_back(voc_root, tmp_path):
    import shutil

    root = tmp_path / "voc"
    shutil.copytree(voc_root, root)
    path = Path(voc(root, None).masks[2])
    path.write_bytes(path.read_bytes()[:10])  # not even its size left
    loader = native(voc(root, ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP)), batch_size=4, backend="cpu")
    with pytest.warns(hpuload.torch.SkippedSampleWarning, match=rf"skipped sample 2 \({path}\): its mask cannot be made; replaced by sample 3"):
        assert sum(len(x) for x, _ in loader) == len(loader.dataset)


@pytest.fixture()
def voc_image_damaged(voc_root, tmp_path):
    """The VOC tree with its sixth image cut to 10 bytes: not even its size left."""
    import shutil

    root = tmp_path / "voc"
    shutil.copytree(voc_root, root)
    path = Path(voc(root, None).images[5])
    path.write_bytes(path.read_bytes()[:10])
    return root, str(path)


@pytest.mark.parametrize("preset", ["train", "eval"])
@pytest.mark.parametrize("batch_size", [4, 1])
def test_an_image_whose_header_is_gone_is_named_and_its_sample_replaced_not_a_reason_to_fall_back(voc_image_damaged, preset, batch_size):
    root, damaged = voc_image_damaged
    train = preset == "train"
    transforms = ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP) if train else ref.SegmentationPresetEval(base_size=BASE)
    dataset = voc(root, transforms)
    loader = native(dataset, batch_size=batch_size, collate_fn=None if train else ref.collate_fn, backend="cpu")
    with pytest.warns(hpuload.torch.SkippedSampleWarning, match=re.escape(damaged)):
        batches = [(x, m, list(loader.last_indices)) for x, m in loader]
    indices = [i for _, _, b in batches for i in b]
    assert len(indices) == len(dataset) and 5 not in indices  # nothing lost, the damaged one replaced
    for x, m, b in batches:
        for k, index in enumerate(b):
            if not train:  # deterministic: each sample (the replacement too) is the dataset's own
                want_x, want_m = voc(root, transforms)[index]
                h, w = want_m.shape
                assert torch.equal(m[k, :h, :w], want_m) and (x[k, :, :h, :w] - want_x).abs().max() < 1e-5, index


@pytest.mark.parametrize("kind", ["coco", "sbd"])
@pytest.mark.parametrize("preset", ["train", "eval"])
def test_an_image_whose_header_is_gone_in_a_coco_or_sbd_set_is_named_and_its_sample_replaced(coco_seg, sbd_root, tmp_path, kind, preset):
    import shutil

    train = preset == "train"
    transforms = ref.SegmentationPresetTrain(base_size=BASE, crop_size=SEG_CROP) if train else ref.SegmentationPresetEval(base_size=BASE)
    if kind == "coco":
        root, ann = coco_seg
        shutil.copytree(root, tmp_path / "coco")
        damaged = tmp_path / "coco" / f"{2:012d}.jpg"

        def make():
            return ref.get_coco(tmp_path / "coco", tmp_path / "coco" / ann.name, transforms, train=train)
    else:
        shutil.copytree(sbd_root, tmp_path / "sbd")
        damaged = Path(sbd(tmp_path / "sbd", None).images[2])

        def make():
            return sbd(tmp_path / "sbd", transforms)

    damaged.write_bytes(damaged.read_bytes()[:10])
    dataset = make()
    loader = native(dataset, batch_size=3, collate_fn=None if train else ref.collate_fn, backend="cpu")
    with pytest.warns(hpuload.torch.SkippedSampleWarning, match=re.escape(str(damaged))):
        batches = [(x, m, list(loader.last_indices)) for x, m in loader]
    indices = [i for _, _, b in batches for i in b]
    assert len(indices) == len(dataset) and 2 not in indices
    if not train:  # deterministic: each sample (the replacement too) is the dataset's own
        for x, m, b in batches:
            for k, index in enumerate(b):
                want_x, want_m = make()[index]
                h, w = want_m.shape
                assert torch.equal(m[k, :h, :w], want_m) and (x[k, :, :h, :w] - want_x).abs().max() < 1e-5, index
