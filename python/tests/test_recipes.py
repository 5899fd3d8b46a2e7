"""Modern recipes on the fast path: per-op parity with torchvision's v2 tensor kernels given the
loader's own drawn parameters, parameter distributions, the user's sampler and collate_fn,
timm's and torchvision's recipe transforms without fallback, resume and damaged files."""

import json
import math
import shutil
import warnings
from collections import Counter

import pytest
import torch
import torch.utils.data as tud
from PIL import Image
from torchvision import datasets
from torchvision import transforms as T
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

import hpuload.torch as ht
from hpuload.torch import DataLoader, FallbackWarning, HabanaDataLoader, SkippedSampleWarning

SIDE = 48


def u8_loader(root, middle, **kw):
    """A CPU-backend loader of CenterCrop(SIDE) + `middle` + PILToTensor, in dataset order."""
    t = T.Compose([T.CenterCrop(SIDE), *middle, T.PILToTensor()])
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        return DataLoader(datasets.ImageFolder(root, t), batch_size=12, backend="cpu", seed=5, **kw)


def interp(name):
    return {"nearest": v2.InterpolationMode.NEAREST, "bilinear": v2.InterpolationMode.BILINEAR}[name]


def tv_apply(img, ops):
    """torchvision's v2 functional kernels, run with hpuload's drawn parameters."""
    for op in ops:
        name, arg = op["op"], op.get("arg")
        if name == "hflip":
            img = F.horizontal_flip(img)
        elif name == "vflip":
            img = F.vertical_flip(img)
        elif name == "brightness":
            img = F.adjust_brightness(img, arg)
        elif name == "contrast":
            img = F.adjust_contrast(img, arg)
        elif name == "saturation":
            img = F.adjust_saturation(img, arg)
        elif name == "hue":
            img = F.adjust_hue(img, arg)
        elif name == "grayscale":
            img = F.rgb_to_grayscale(img, num_output_channels=3)
        elif name == "solarize":
            img = F.solarize(img, arg)
        elif name == "posterize":
            img = F.posterize(img, int(arg))
        elif name == "auto_contrast":
            img = F.autocontrast(img)
        elif name == "equalize":
            img = F.equalize(img)
        elif name == "invert":
            img = F.invert(img)
        elif name == "sharpness":
            img = F.adjust_sharpness(img, arg)
        elif name == "gaussian_blur":
            img = F.gaussian_blur(img, kernel_size=arg["kernel"], sigma=arg["sigma"])
        elif name == "warp":
            mode = v2.InterpolationMode.NEAREST if arg["nearest"] else v2.InterpolationMode.BILINEAR
            fill = arg["fill"]
            if arg["rotate"]:
                img = F.rotate(img, arg["angle"], interpolation=mode, center=arg["center"], fill=fill)
            else:
                img = F.affine(
                    img,
                    angle=arg["angle"],
                    translate=arg["translate"],
                    scale=arg["scale"],
                    shear=arg["shear"],
                    interpolation=mode,
                    fill=fill,
                    center=arg["center"],
                )
        elif name == "aug_mix":
            mix = arg["original"] * img
            for weight, chain in zip(arg["weights"], arg["chains"]):
                mix = mix + weight * tv_apply(img, chain)
            img = mix.to(torch.uint8)
        else:
            raise AssertionError(f"unknown op {name}")
    return img


def has_warp(ops):
    return any(o["op"] == "warp" or (o["op"] == "aug_mix" and any(has_warp(c) for c in o["arg"]["chains"])) for o in ops)


MIDDLES = {
    "color_jitter": [T.ColorJitter(0.4, 0.4, 0.4, 0.1)],
    "brightness": [v2.ColorJitter(brightness=0.6)],
    "contrast": [v2.ColorJitter(contrast=0.6)],
    "saturation": [v2.ColorJitter(saturation=0.6)],
    "hue": [v2.ColorJitter(hue=0.3)],
    "trivial_augment_wide": [T.TrivialAugmentWide()],
    "rand_augment": [v2.RandAugment(num_ops=3, magnitude=12)],
    "auto_augment_imagenet": [T.AutoAugment()],
    "auto_augment_svhn": [v2.AutoAugment(v2.AutoAugmentPolicy.SVHN, fill=[128, 0, 255])],
    "aug_mix": [v2.AugMix()],
    "simple_ops": [
        T.RandomVerticalFlip(),
        T.RandomGrayscale(0.3),
        T.RandomSolarize(150, 0.3),
        T.RandomPosterize(3, 0.3),
        T.RandomAutocontrast(0.3),
        T.RandomEqualize(0.3),
        T.RandomAdjustSharpness(2.0, 0.3),
        T.RandomInvert(0.3),
    ],
    "blur_rotate_affine": [
        T.RandomHorizontalFlip(),
        v2.GaussianBlur(5, sigma=(0.5, 2.0)),
        T.RandomRotation(30, interpolation=T.InterpolationMode.BILINEAR, fill=[10, 20, 30]),
        v2.RandomAffine(10, translate=(0.1, 0.2), scale=(0.8, 1.2), shear=(-5, 5, -3, 3)),
    ],
    "nested": [
        v2.RandomApply([v2.ColorJitter(0.8, 0.8, 0.8, 0.2)], p=0.8),
        v2.RandomChoice([v2.RandomEqualize(1.0), v2.RandomInvert(1.0)], p=[0.3, 0.7]),
        v2.RandomOrder([v2.RandomPosterize(4, 1.0), v2.RandomSolarize(100, 1.0)]),
    ],
}


@pytest.mark.parametrize("which", sorted(MIDDLES))
def test_each_op_matches_torchvision_given_the_loaders_own_parameters(png_folder, which):
    plain = u8_loader(png_folder, [])
    augmented = u8_loader(png_folder, MIDDLES[which])
    sizes = [Image.open(p).size for p, _ in augmented.dataset.samples]
    seen = Counter()
    worst = 0.0
    for epoch in range(3):
        plain.set_epoch(epoch)
        augmented.set_epoch(epoch)
        for (before, _), (after, _) in zip(plain, augmented):
            for slot, index in enumerate(augmented.last_indices):
                w, h = sizes[index]
                plan = json.loads(augmented._core.sample_plan(epoch, index, w, h))
                want = tv_apply(before[slot], plan["ops"])
                if plan["flip"]:
                    want = F.horizontal_flip(want)
                got = after[slot]
                diff = (want.int() - got.int()).abs()
                seen.update(o["op"] for o in plan["ops"])
                if has_warp(plan["ops"]) or len(plan["ops"]) > 1:
                    # Warps sample a grid computed in f32 like torch's, but not in its exact
                    # summation order: a rare nearest-neighbour tie may pick the other pixel.
                    # In a chain, one op's rounding difference of 1 can grow through the next.
                    worst = max(worst, (diff > 1).float().mean().item())
                else:
                    assert diff.max() <= 1, f"{which}: {plan['ops']} differs by {diff.max()}"
    assert worst <= 0.01, f"{which}: {worst:.2%} of pixels differ by more than 1"
    assert seen, f"{which}: no op was drawn in 36 samples"


def test_bicubic_and_nearest_resize_match_torchvision(png_folder):
    for mode in (T.InterpolationMode.BICUBIC, T.InterpolationMode.NEAREST):
        t = T.Compose([T.Resize(40, interpolation=mode), T.CenterCrop(32), T.PILToTensor()])
        loader = DataLoader(datasets.ImageFolder(png_folder, t), batch_size=12, backend="cpu")
        got, _ = next(iter(loader))
        for slot, index in enumerate(loader.last_indices):
            path, _ = loader.dataset.samples[index]
            image = F.pil_to_tensor(Image.open(path).convert("RGB"))
            want = F.center_crop(F.resize(image, 40, interpolation=mode, antialias=True), 32)
            diff = (want.int() - got[slot].int()).abs()
            assert diff.max() <= 1, f"{mode}: sample {index} differs by {diff.max()}"


def test_random_erasing_writes_its_boxes_after_normalize(png_folder):
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    head = [T.CenterCrop(SIDE), T.ToTensor(), T.Normalize(mean, std)]
    plain = DataLoader(datasets.ImageFolder(png_folder, T.Compose(head)), batch_size=12, backend="cpu", seed=1)
    erased = DataLoader(
        datasets.ImageFolder(png_folder, T.Compose(head + [T.RandomErasing(p=0.9, value=(1.0, -2.0, 3.0))])),
        batch_size=12,
        backend="cpu",
        seed=1,
    )
    (before, _), (after, _) = next(iter(plain)), next(iter(erased))
    boxes = 0
    for slot, index in enumerate(erased.last_indices):
        w, h = Image.open(erased.dataset.samples[index][0]).size
        plan = json.loads(erased._core.sample_plan(0, index, w, h))
        want = before[slot].clone()
        for b in plan["erase"]:
            want = F.erase(want, b["top"], b["left"], b["height"], b["width"], torch.tensor(b["value"])[:, None, None])
            boxes += 1
        assert torch.equal(want, after[slot])
    assert boxes >= 6


def test_parameter_distributions_match_torchvisions(png_folder):
    """ColorJitter factors uniform over their ranges in every one of the 24 orders; erase boxes
    with torchvision's area and aspect distribution; TrivialAugmentWide's ops equally likely."""
    loader = u8_loader(png_folder, [T.ColorJitter(0.4, 0.4, 0.4, 0.1), T.TrivialAugmentWide()])
    n = 6000
    orders, brightness, ta = Counter(), [], Counter()
    for i in range(n):
        ops = json.loads(loader._core.sample_plan(0, i, 500, 400))["ops"]
        jitter = [o for o in ops[:4]]
        orders[tuple(o["op"] for o in jitter)] += 1
        brightness += [o["arg"] for o in jitter if o["op"] == "brightness"]
        ta[ops[4]["op"] if len(ops) > 4 else "identity"] += 1
    assert len(orders) == 24 and min(orders.values()) > n / 24 * 0.7
    assert 0.6 <= min(brightness) and max(brightness) <= 1.4
    assert abs(sum(brightness) / len(brightness) - 1.0) < 0.01
    # Uniform on [0.6, 1.4]: variance 0.8^2 / 12.
    var = sum((b - 1.0) ** 2 for b in brightness) / len(brightness)
    assert abs(var - 0.8**2 / 12) < 0.003
    # 14 ops; identity, and the zero bins of the other 13 whose magnitude 0 is a no-op.
    assert ta["equalize"] == pytest.approx(n / 14, rel=0.15)
    assert ta["auto_contrast"] == pytest.approx(n / 14, rel=0.15)

    erase = DataLoader(
        datasets.ImageFolder(png_folder, T.Compose([T.CenterCrop(SIDE), T.ToTensor(), T.RandomErasing(p=1.0)])),
        batch_size=4,
        backend="cpu",
    )
    ours = []
    for i in range(3000):
        for b in json.loads(erase._core.sample_plan(0, i, 500, 400))["erase"]:
            ours.append((b["height"] * b["width"], b["height"] / b["width"]))
    tv = v2.RandomErasing(p=1.0)
    theirs = []
    image = torch.zeros(3, SIDE, SIDE)
    for _ in range(3000):
        p = tv.make_params([image])
        if p["v"] is not None:
            theirs.append((p["h"] * p["w"], p["h"] / p["w"]))
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    assert mean([a for a, _ in ours]) == pytest.approx(mean([a for a, _ in theirs]), rel=0.06)
    assert mean([math.log(r) for _, r in ours]) == pytest.approx(mean([math.log(r) for _, r in theirs]), abs=0.06)
    assert len(ours) == pytest.approx(len(theirs), rel=0.03)


class Preset:
    """Shaped like torchvision's reference `ClassificationPresetTrain`: a Compose kept in
    `.transforms` and called."""

    def __init__(self, crop, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)):
        self.transforms = T.Compose(
            [
                T.RandomResizedCrop(crop, interpolation=T.InterpolationMode.BILINEAR),
                T.RandomHorizontalFlip(0.5),
                T.TrivialAugmentWide(interpolation=T.InterpolationMode.BILINEAR),
                T.PILToTensor(),
                T.ConvertImageDtype(torch.float),
                T.Normalize(mean=mean, std=std),
                T.RandomErasing(p=0.1),
            ]
        )

    def __call__(self, img):
        return self.transforms(img)


def mixup_cutmix_collate(num_classes):
    choice = v2.RandomChoice([v2.MixUp(alpha=0.2, num_classes=num_classes), v2.CutMix(alpha=1.0, num_classes=num_classes)])
    return lambda batch: choice(*tud.default_collate(batch))


def test_resnet50_v2_recipe_runs_on_the_fast_path_with_repeated_augmentation_and_mixup(jpeg_folder):
    from timm.data.distributed_sampler import RepeatAugSampler

    dataset = datasets.ImageFolder(jpeg_folder, Preset(40))
    sampler = RepeatAugSampler(dataset, num_replicas=1, rank=0, num_repeats=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(dataset, batch_size=8, sampler=sampler, collate_fn=mixup_cutmix_collate(len(dataset.classes)))
    sampler.set_epoch(3)
    batches = list(loader)
    assert len(batches) == len(loader) == math.ceil(len(sampler) / 8)
    images, targets = batches[0]
    assert images.shape == (8, 3, 40, 40) and images.dtype == torch.float32
    assert targets.shape == (8, len(dataset.classes)) and torch.allclose(targets.sum(1), torch.ones(8))
    # The loader decoded exactly the sampler's order.
    order = list(sampler)
    loader.collate_fn = None
    got = []
    for _ in loader:
        got += loader.last_indices
    assert got[: len(order)] == order


def test_custom_sampler_resume_mid_epoch_gives_the_same_batches(jpeg_folder):
    from timm.data.distributed_sampler import RepeatAugSampler

    def make():
        dataset = datasets.ImageFolder(jpeg_folder, Preset(32))
        sampler = RepeatAugSampler(dataset, num_replicas=1, rank=0, num_repeats=3)
        collate = lambda b: tud.default_collate(b)  # noqa: E731
        return DataLoader(dataset, batch_size=6, sampler=sampler, collate_fn=collate, seed=9), sampler

    full, s = make()
    s.set_epoch(1)
    want = [(x.clone(), y.clone()) for x, y in full]
    first, s = make()
    s.set_epoch(1)
    it = iter(first)
    for _ in range(3):
        next(it)
    state = json.loads(json.dumps(first.state_dict()))
    del it
    again, s = make()
    again.load_state_dict(state)
    s.set_epoch(1)
    rest = [(x.clone(), y.clone()) for x, y in again]
    assert len(rest) == len(want) - 3
    for (a, b), (c, d) in zip(rest, want[3:]):
        assert torch.equal(a, c) and torch.equal(b, d)


def test_timm_training_transforms_take_the_fast_path(jpeg_folder):
    from timm.data import create_transform

    for kw in ({}, {"interpolation": "random", "re_prob": 0.25, "re_mode": "pixel"}, {"re_prob": 0.3, "re_mode": "rand", "re_count": 2}):
        t = create_transform(48, is_training=True, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            loader = DataLoader(datasets.ImageFolder(jpeg_folder, t), batch_size=8)
        x, y = next(iter(loader))
        assert x.shape == (8, 3, 48, 48) and x.dtype == torch.float32 and y.dtype == torch.int64


def test_timm_own_rand_augment_falls_back_naming_it(jpeg_folder):
    from timm.data import create_transform

    t = create_transform(48, is_training=True, auto_augment="rand-m9-mstd0.5-inc1")
    with pytest.warns(FallbackWarning, match="timm's RandAugment") as record:
        DataLoader(datasets.ImageFolder(jpeg_folder, t), batch_size=8)
    assert record[0].message.reason is ht.FallbackReason.TRANSFORM


def test_a_damaged_file_under_a_recipe_is_named_and_skipped(jpeg_folder, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(jpeg_folder, root)
    victim = sorted(root.rglob("*.jpg"))[5]
    victim.write_bytes(victim.read_bytes()[:300])
    dataset = datasets.ImageFolder(root, Preset(32))
    loader = DataLoader(dataset, batch_size=8, collate_fn=mixup_cutmix_collate(len(dataset.classes)))
    with pytest.warns(SkippedSampleWarning, match=victim.name):
        batches = list(loader)
    assert all(x.shape == (8, 3, 32, 32) for x, _ in batches[:-1])


def test_swapping_torchs_class_by_assignment_does_not_recurse_on_fallback():
    original = tud.DataLoader
    try:
        torch.utils.data.DataLoader = ht.DataLoader
        with pytest.warns(FallbackWarning):
            loader = torch.utils.data.DataLoader(list(range(10)), batch_size=4)
        assert [b.tolist() for b in loader][0] == [0, 1, 2, 3]
    finally:
        torch.utils.data.DataLoader = original


def test_habana_loader_takes_every_argument_habanas_own_takes(jpeg_folder):
    dataset = datasets.ImageFolder(jpeg_folder, Preset(32))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = HabanaDataLoader(
            dataset, batch_size=8, shuffle=True, num_workers=8, pin_memory=True, pin_memory_device="hpu", drop_last=True
        )
    x, _ = next(iter(loader))
    assert x.shape == (8, 3, 32, 32)
