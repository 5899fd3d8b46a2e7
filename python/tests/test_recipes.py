"""Modern recipes on the fast path: per-op parity with torchvision's v2 tensor kernels given the
loader's own drawn parameters, parameter distributions, the user's sampler and collate_fn,
timm's and torchvision's recipe transforms without fallback, resume and damaged files."""

import json
import math
import shutil
import warnings
from collections import Counter

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from PIL import Image, ImageEnhance, ImageOps
from torchvision import datasets
from torchvision import transforms as T
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from conftest import state_after

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
        elif name == "hue_v1":
            img = T.functional.adjust_hue(img, arg)
        elif name == "pil_hue":
            # The loader's images are PIL images there: Pillow's byte HSV.
            img = F.pil_to_tensor(F.adjust_hue(F.to_pil_image(img), arg))
        elif name == "grayscale":
            img = F.rgb_to_grayscale(img, num_output_channels=3)
        elif name == "pil_enhance":
            # Pillow's enhancers on a PIL image (the grey of one: `Color` at 0).
            enhancer = getattr(ImageEnhance, arg["kind"].capitalize())
            img = F.pil_to_tensor(enhancer(F.to_pil_image(img)).enhance(arg["factor"]))
        elif name == "pil_auto_contrast":
            img = F.pil_to_tensor(ImageOps.autocontrast(F.to_pil_image(img)))
        elif name == "solarize":
            img = F.solarize(img, arg)
        elif name == "posterize":
            img = F.posterize(img, int(arg))
        elif name == "auto_contrast":
            img = F.autocontrast(img)
        elif name == "auto_contrast_v1":
            img = T.functional.autocontrast(img)
        elif name == "equalize":
            img = F.equalize(img)
        elif name == "invert":
            img = F.invert(img)
        elif name == "sharpness":
            img = F.adjust_sharpness(img, arg)
        elif name == "gaussian_blur":
            blur = T.functional.gaussian_blur if arg["v1"] else F.gaussian_blur
            img = blur(img, kernel_size=arg["kernel"], sigma=arg["sigma"])
        elif name == "warp":
            mode = v2.InterpolationMode.NEAREST if arg["nearest"] else v2.InterpolationMode.BILINEAR
            fill = arg["fill"]
            if arg["pil"]:
                # A warp of a PIL image is Pillow's: run on one, as torchvision does.
                one = dict(op, arg={**arg, "pil": False})
                img = F.pil_to_tensor(tv_apply(F.to_pil_image(img), [one]))
            elif arg["rotate"]:
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
    "aug_mix_v1": [T.AugMix()],
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


@pytest.mark.parametrize("flavour", ["v1", "v2"])
def test_autocontrast_on_a_tensor_is_its_torchvision_versions_arithmetic_in_ops_and_policies(png_folder, flavour):
    """v1 stretches a tensor's channel by multiplying by `255 / (max - min)`, v2 by dividing
    by `(max - min) / 255`: a level apart in about 2% of values. The op, and the autocontrast
    a policy draws, take the transform's own version: every byte is torchvision's."""
    M = T if flavour == "v1" else v2
    first = T.PILToTensor() if flavour == "v1" else v2.ToImage()
    ds = datasets.ImageFolder(png_folder, M.Compose([first, M.CenterCrop(SIDE), M.RandomAutocontrast(1.0)]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        x, _ = next(iter(DataLoader(ds, batch_size=12, backend="cpu")))
    for i in range(12):
        assert torch.equal(x[i], ds[i][0]), i
    want = "auto_contrast_v1" if flavour == "v1" else "auto_contrast"
    policy = datasets.ImageFolder(png_folder, M.Compose([first, M.CenterCrop(SIDE), M.AutoAugment()]))
    loader = DataLoader(policy, batch_size=12, backend="cpu", seed=3)
    drawn = Counter()
    for epoch in range(4):
        for index in range(len(policy)):
            plan = json.loads(loader._core.sample_plan(epoch, index, SIDE, SIDE))
            drawn.update(o["op"] for o in plan["ops"] if "contrast" in o["op"])
    assert drawn[want] > 0 and set(drawn) <= {want, "contrast"}, drawn


@pytest.mark.parametrize("flavour", ["v1", "v2"])
def test_a_hue_shift_of_a_tensor_is_its_torchvision_versions_arithmetic(png_folder, flavour):
    """v1 and v2 convert to HSV and back with different f32 steps (v1 divides where v2
    multiplies by a reciprocal); values within a hair of a whole level part them. Each gives
    its own version's bytes, for shifts either way."""
    M = T if flavour == "v1" else v2
    first = T.PILToTensor() if flavour == "v1" else v2.ToImage()
    for hue in (0.1, -0.45):
        tf = M.Compose([first, M.CenterCrop(SIDE), M.ColorJitter(hue=(hue, hue))])
        ds = datasets.ImageFolder(png_folder, tf)
        with warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            x, _ = next(iter(DataLoader(ds, batch_size=12, backend="cpu")))
        for i in range(12):
            assert torch.equal(x[i], ds[i][0]), (hue, i)


def test_bicubic_and_nearest_resizes_of_pil_images_are_torchvisions(png_folder):
    """The resize runs on the PIL image, so torchvision's output is Pillow's: nearest
    neighbour exactly (its pixel under each output pixel's centre, not torch's
    `floor(i * in / out)`), bicubic within a level."""
    for mode, tolerance in ((T.InterpolationMode.BICUBIC, 1), (T.InterpolationMode.NEAREST, 0)):
        t = T.Compose([T.Resize(40, interpolation=mode), T.CenterCrop(32), T.PILToTensor()])
        loader = DataLoader(datasets.ImageFolder(png_folder, t), batch_size=12, backend="cpu")
        got, _ = next(iter(loader))
        for slot, index in enumerate(loader.last_indices):
            want, _ = loader.dataset[index]
            diff = (want.int() - got[slot].int()).abs()
            assert diff.max() <= tolerance, f"{mode}: sample {index} differs by {diff.max()}"


def test_nearest_resize_of_a_tensor_is_torchs_after_a_resize_then_crop(png_folder):
    """After PILToTensor the resize is torch's nearest, indexed in the resized image's scale
    (the crop's window recovered from source pixels once picked neighbours a row off)."""
    mode = T.InterpolationMode.NEAREST
    t = T.Compose([T.PILToTensor(), T.Resize(41, interpolation=mode), T.CenterCrop(32)])
    loader = DataLoader(datasets.ImageFolder(png_folder, t), batch_size=12, backend="cpu")
    got, _ = next(iter(loader))
    for slot, index in enumerate(loader.last_indices):
        want, _ = loader.dataset[index]
        assert torch.equal(want, got[slot]), f"sample {index}"


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
        # On PIL images contrast and saturation are Pillow's enhancers: told apart by kind.
        orders[tuple(o["arg"]["kind"] if o["op"] == "pil_enhance" else o["op"] for o in jitter)] += 1
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
    # Pillow's autocontrast on these PIL images.
    assert ta["pil_auto_contrast"] == pytest.approx(n / 14, rel=0.15)

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


class Scaled(Preset):
    """A preset's shape whose call does more than its Compose: what it gives, doubled."""

    def __call__(self, img):
        return self.transforms(img) * 2


class TwoViews(Preset):
    """A preset's shape whose call gives two views of the image (contrastive learning)."""

    def __call__(self, img):
        return [self.transforms(img), self.transforms(img)]


def test_a_wrapper_that_does_more_than_call_its_compose_is_not_read_as_the_compose(png_folder):
    # It used to be looked through: the batch was the Compose's alone (undoubled, one view).
    with pytest.warns(FallbackWarning, match="Scaled"):
        loader = DataLoader(datasets.ImageFolder(png_folder, Scaled(32)), batch_size=4)
    assert not isinstance(loader, DataLoader)
    wrapper = TwoViews(32)
    wrapper.transforms = T.Compose([T.Resize(36), T.CenterCrop(32), T.ToTensor()])  # nothing drawn
    dataset = datasets.ImageFolder(png_folder, wrapper)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = DataLoader(dataset, batch_size=4, backend="cpu")
    theirs = tud.DataLoader(dataset, batch_size=4)
    for (views, labels), (want, want_labels) in zip(ours, theirs, strict=True):
        assert isinstance(views, list) and len(views) == 2 and torch.equal(labels, want_labels)
        for got, expected in zip(views, want):
            assert got.shape == expected.shape and (got - expected).abs().max() < 1e-6


def test_checking_a_function_that_holds_a_compose_leaves_it_as_it_was(png_folder):
    # A function copies as itself: the recorder check must not set its `.transforms`.
    compose = T.Compose([T.Resize(36), T.CenterCrop(32), T.ToTensor()])

    def transform(img):
        return transform.transforms(img)

    transform.transforms = compose
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader = DataLoader(datasets.ImageFolder(png_folder, transform), batch_size=4)
    assert transform.transforms is compose
    assert next(iter(loader))[0].shape == (4, 3, 32, 32)


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


def test_default_collate_of_a_batchs_samples_is_the_pinned_batch_itself_and_other_stacks_copy(jpeg_folder):
    dataset = datasets.ImageFolder(jpeg_folder, Preset(32))
    seen = []

    def collate(batch):
        images, labels = tud.default_collate(batch)
        again = torch.stack([x for x, _ in batch])
        reordered = torch.stack([x for x, _ in reversed(batch)])
        seen.append((images.data_ptr() == batch[0][0].data_ptr(), again.data_ptr() != images.data_ptr()))
        assert type(images) is torch.Tensor and type(batch[0][0] * 2) is torch.Tensor
        assert torch.equal(images, again) and torch.equal(reordered, images.flip(0))
        assert images.shape == (len(batch), 3, 32, 32) and labels.tolist() == [y for _, y in batch]
        return images.clone(), labels

    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(dataset, batch_size=8, collate_fn=collate, drop_last=True)
    copied = [x for x, _ in loader]
    assert seen and all(alias and copied for alias, copied in seen)
    # The same values as the loader gives without a collate_fn.
    loader.collate_fn = None
    loader.set_epoch(0)
    assert all(torch.equal(a, b) for a, (b, _) in zip(copied, loader))


@pytest.mark.parametrize("which", ["mixup", "cutmix", "choice"])
def test_mixup_and_cutmix_in_a_collate_fn_give_torchvisions_results_bit_for_bit(jpeg_folder, which):
    dataset = datasets.ImageFolder(jpeg_folder, Preset(40))
    n = len(dataset.classes)
    mixup, cutmix = v2.MixUp(alpha=0.2, num_classes=n), v2.CutMix(alpha=1.0, num_classes=n)
    mix = {"mixup": mixup, "cutmix": cutmix, "choice": v2.RandomChoice([mixup, cutmix])}[which]
    checked = []

    def collate(batch):
        state = torch.get_rng_state()
        # torchvision's own code: tensors hpuload did not make.
        plain_x, plain_y = tud.default_collate([(x.clone(), y) for x, y in batch])
        ref = mix(plain_x, plain_y)
        torch.set_rng_state(state)
        x, y = tud.default_collate(batch)
        got = mix(x, y)
        assert type(got[0]) is torch.Tensor and got[0].data_ptr() != x.data_ptr()
        assert torch.equal(x, plain_x), "the batch itself is not modified"
        checked.append(torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1]))
        return got

    torch.manual_seed(11)
    loader = DataLoader(dataset, batch_size=8, shuffle=True, collate_fn=collate, drop_last=True)
    for _ in range(2):
        for images, targets in loader:
            assert images.shape == (8, 3, 40, 40) and targets.shape == (8, n)
    assert len(checked) == 2 * len(loader) and all(checked)


def test_mixup_and_cutmix_after_the_loader_give_torchvisions_results(jpeg_folder):
    dataset = datasets.ImageFolder(jpeg_folder, Preset(40))
    n = len(dataset.classes)
    mix = v2.RandomChoice([v2.MixUp(alpha=0.2, num_classes=n), v2.CutMix(alpha=1.0, num_classes=n)])
    torch.manual_seed(3)
    for images, labels in DataLoader(dataset, batch_size=8, drop_last=True):
        # hpuload's blend is in place of torchvision's for this batch.
        assert getattr(v2.MixUp.transform, "_hpuload", False) and getattr(v2.CutMix.transform, "_hpuload", False)
        state = torch.get_rng_state()
        ref = mix(images.clone(), labels)
        torch.set_rng_state(state)
        got = mix(images, labels)
        assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])


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


def test_a_collate_fns_draws_repeat_on_resume_whatever_the_global_generator_holds(jpeg_folder):
    """MixUp/CutMix in the collate_fn draw from generators seeded by (seed, epoch, batch): a
    run resumed mid-epoch, with torch's global generator elsewhere (the script did not save
    it), gives the batches the uninterrupted run gave, mixed alike."""
    dataset = datasets.ImageFolder(jpeg_folder, Preset(32))
    collate = mixup_cutmix_collate(len(dataset.classes))

    def make():
        return DataLoader(dataset, batch_size=6, shuffle=True, collate_fn=collate, drop_last=True, seed=4)

    torch.manual_seed(1)
    want = [(x.clone(), y.clone()) for x, y in make()]
    state = state_after(make(), 2)
    torch.manual_seed(2)
    again = make()
    again.load_state_dict(state)
    rest = [(x.clone(), y.clone()) for x, y in again]
    assert len(rest) == len(want) - 2 >= 2
    for (a, b), (c, d) in zip(rest, want[2:]):
        assert torch.equal(a, c) and torch.equal(b, d)
    # Mixed: the labels are soft, not one-hot.
    assert any((y.max(dim=1).values < 1).any() for _, y in rest)


def test_a_collate_fns_draws_leave_the_training_loops_own_draws_alone(jpeg_folder):
    """The loop's own draws from torch's, Python's and NumPy's global generators are those it
    would make with a collate_fn that draws nothing, as with torch's worker processes."""
    import random

    dataset = datasets.ImageFolder(jpeg_folder, Preset(32))
    drawing = mixup_cutmix_collate(len(dataset.classes))

    def loop(collate):
        torch.manual_seed(3)
        random.seed(3)
        np.random.seed(3)
        loader = DataLoader(dataset, batch_size=6, collate_fn=collate, drop_last=True, seed=4)
        draws = []
        for x, y in loader:
            draws.append((torch.rand(1).item(), random.random(), np.random.rand()))
        return draws, y

    quiet, quiet_y = loop(lambda b: tud.default_collate(b))
    mixed, mixed_y = loop(drawing)
    assert mixed == quiet and len(quiet) >= 2
    assert mixed_y.shape != quiet_y.shape, "the mix ran (soft labels)"


def test_a_loader_iterated_on_another_thread_leaves_the_global_generators_as_they_are(jpeg_folder):
    """Iterated on the main thread, each batch's collate_fn runs on generators seeded for it;
    on another thread (a prefetching wrapper beside the training loop) it runs on the global
    generators as they are, which the loop may be drawing from at that moment."""
    import threading

    dataset = datasets.ImageFolder(jpeg_folder, Preset(32))
    seeds = []

    def collate(batch):
        seeds.append(torch.initial_seed())
        return tud.default_collate(batch)

    torch.manual_seed(123)
    loader = DataLoader(dataset, batch_size=6, collate_fn=collate, drop_last=True, seed=4)
    worker = threading.Thread(target=lambda: [None for _ in loader])
    worker.start()
    worker.join()
    assert len(seeds) == len(loader) and set(seeds) == {123}
    seeds.clear()
    for _ in loader:
        pass
    assert len(set(seeds)) == len(loader) and 123 not in seeds
    assert torch.initial_seed() == 123


def test_timms_own_loader_with_its_prefetcher_runs_natively_and_gives_the_datasets_own_samples(png_folder, monkeypatch):
    """timm's train.py builds its loader with `create_loader`: its `ImageDataset`, the transform
    it makes for its prefetcher (ending in `MaybePILToTensor`), its `fast_collate`, its
    `PrefetchLoader` normalizing on the device, and torch's DataLoader called by its full name.
    With that name pointing at hpuload's, the loader runs natively, and its uint8 batches are
    the dataset's own samples byte for byte (nothing random: the crop covers each image, no
    flip, no jitter)."""
    from timm.data import create_dataset, create_loader

    monkeypatch.setattr(torch.utils.data, "DataLoader", ht.DataLoader)
    dataset = create_dataset("", root=str(png_folder), split="", is_training=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        warnings.simplefilter("error", ht.PythonTailWarning)
        loader = create_loader(
            dataset,
            input_size=(3, 40, 40),
            batch_size=4,
            is_training=True,
            use_prefetcher=True,
            scale=(1.0, 1.0),
            ratio=(1.0, 1.0),
            hflip=0.0,
            color_jitter=0.0,
            interpolation="bilinear",
            num_workers=2,
            device=torch.device("cpu"),
        )
        inner = loader.loader
        assert isinstance(inner, ht.DataLoader)
        n = 0
        for images, labels in inner:
            assert images.dtype == torch.uint8
            for image, label, index in zip(images, labels, inner.last_indices):
                want, want_label = dataset[index]
                assert torch.equal(image, want) and int(label) == want_label, index
                n += 1
        assert n == len(dataset) // 4 * 4
        x, y = next(iter(loader))
    assert x.dtype == torch.float32 and x.shape == (4, 3, 40, 40) and y.shape == (4,)


@pytest.mark.parametrize("mode", ["batch", "pair", "elem", "half"])
def test_timms_fast_collate_mixup_gives_timms_own_batches_in_every_mode(jpeg_folder, mode):
    """timm's `FastCollateMixup` (train.py's collate with `--mixup`/`--cutmix` and its
    prefetcher) on hpuload's uint8 batches runs natively, and each batch (the mixed images and
    the soft targets) equals what timm's own methods make of a copy of the same samples from
    the same state of NumPy's generator."""
    import timm.data.mixup as tm
    from timm.data import FastCollateMixup

    from hpuload import _timm_mix

    names = ("_mix_batch_collate", "_mix_elem_collate", "_mix_pair_collate")
    dataset = datasets.ImageFolder(jpeg_folder, T.Compose([T.RandomResizedCrop(48), T.RandomHorizontalFlip(), T.PILToTensor()]))
    mix = FastCollateMixup(mixup_alpha=0.8, cutmix_alpha=1.0, mode=mode, num_classes=len(dataset.classes))
    checked = []

    def collate(batch):
        state = np.random.get_state()
        plain = [(x.clone(), y) for x, y in batch]
        native = {n: tm.FastCollateMixup.__dict__[n] for n in names}
        for n in names:  # timm's own methods, on tensors hpuload did not make
            setattr(tm.FastCollateMixup, n, getattr(native[n], "__wrapped__", native[n]))
        try:
            want = mix(plain)
        finally:
            for n in names:
                setattr(tm.FastCollateMixup, n, native[n])
        np.random.set_state(state)
        got = mix(batch)
        checked.append(torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]))
        return got

    loader = DataLoader(dataset, batch_size=8, shuffle=True, collate_fn=collate, drop_last=True, seed=2)
    for images, targets in loader:
        assert images.dtype == torch.uint8 and targets.shape[1] == len(dataset.classes)
    assert _timm_mix.install() and all(getattr(tm.FastCollateMixup.__dict__[n], "_hpuload", False) for n in names)
    assert len(checked) == len(loader) and all(checked)


def test_timm_training_transforms_take_the_fast_path(jpeg_folder):
    from timm.data import create_transform

    for kw in (
        {},
        {"interpolation": "random", "re_prob": 0.25, "re_mode": "pixel"},
        {"re_prob": 0.3, "re_mode": "rand", "re_count": 2},
        {"auto_augment": "rand-m9-mstd0.5-inc1", "interpolation": "random", "re_prob": 0.25},
        {"auto_augment": "rand-m7-mstd0.5", "interpolation": "bicubic"},
        {"auto_augment": "original-mstd0.5"},
        {"auto_augment": "augmix-m5-w4-d2"},
        {"auto_augment": "augmix-m5-w4-d2-b1"},
        {"auto_augment": "3a"},
    ):
        t = create_transform(48, is_training=True, **kw)
        with warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            loader = DataLoader(datasets.ImageFolder(jpeg_folder, t), batch_size=8)
        x, y = next(iter(loader))
        assert x.shape == (8, 3, 48, 48) and x.dtype == torch.float32 and y.dtype == torch.int64


def test_a_timm_policy_with_an_op_hpuload_lacks_runs_in_python_after_the_native_crop_naming_it(jpeg_folder):
    from timm.data import create_transform

    t = create_transform(48, is_training=True, auto_augment="rand-m9-mstd0.5")
    t.transforms[2].ops[0].name = "Unheard"  # an op of a newer timm
    t.transforms[2].ops[0].aug_fn = lambda img, *args, **kwargs: img
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        with pytest.warns(ht.PythonTailWarning, match="after the native RandomResizedCropAndInterpolation.*Unheard"):
            loader = DataLoader(datasets.ImageFolder(jpeg_folder, t), batch_size=8)
    x, y = next(iter(loader))
    assert x.shape == (8, 3, 48, 48) and x.dtype == torch.float32 and y.dtype == torch.int64


def pil_apply(img, ops):
    """timm's own op functions (Pillow underneath), run with hpuload's drawn parameters."""
    from timm.data import auto_augment as aa

    resample = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}
    for op in ops:
        name, arg = op["op"], op.get("arg")
        if name == "pil_enhance":
            img = getattr(aa, arg["kind"])(img, arg["factor"])
        elif name == "pil_auto_contrast":
            img = aa.auto_contrast(img)
        elif name == "pil_gaussian_blur":
            img = aa.gaussian_blur(img, arg)
        elif name == "equalize":
            img = aa.equalize(img)
        elif name == "invert":
            img = aa.invert(img)
        elif name == "solarize":
            img = aa.solarize(img, int(arg))
        elif name == "solarize_add":
            img = aa.solarize_add(img, arg["add"], arg["threshold"])
        elif name == "posterize":
            # Pillow 10+ refuses 0 bits (timm passes it at the top magnitude); keeping no bits
            # is black, as older Pillow and torchvision give.
            img = aa.posterize(img, arg) if arg > 0 else Image.new("RGB", img.size)
        elif name == "aug_mix" and arg["blended"]:
            # timm's AugMixAugment._apply_blended with the drawn chains and their blends.
            original = img
            for weight, chain in zip(arg["weights"], arg["chains"]):
                img = Image.blend(img, pil_apply(original, chain), weight)
        elif name == "aug_mix":
            # timm's AugMixAugment._apply_basic with the drawn weights, chains and blend.
            mixed = np.zeros((img.size[1], img.size[0], 3), dtype=np.float32)
            for weight, chain in zip(arg["weights"], arg["chains"]):
                mixed += np.float32(weight) * np.asarray(pil_apply(img, chain), dtype=np.float32)
            np.clip(mixed, 0, 255.0, out=mixed)
            img = Image.blend(img, Image.fromarray(mixed.astype(np.uint8)), arg["blend"])
        elif name == "pil_affine":
            img = img.transform(
                img.size, Image.AFFINE, tuple(arg["matrix"]), resample=resample[arg["filter"]], fillcolor=tuple(arg["fill"])
            )
        else:
            raise AssertionError(f"unknown op {name}")
    return img


TIMM_POLICIES = {
    "rand-m9-mstd0.5-inc1": {"interpolation": "random"},
    "rand-m7-n3-mstd1.0": {"interpolation": "bicubic"},
    "rand-m10-n2-p0.8-mstd101-inc1": {"interpolation": "bilinear"},
    "original-mstd0.5": {"interpolation": "random"},
    "v0r": {"interpolation": "bicubic"},
    "augmix-m5-w4-d2": {"interpolation": "random"},
    "augmix-m3-mstd0.5": {"interpolation": "bilinear"},
    "augmix-m5-w4-d2-b1": {"interpolation": "random"},
    "3a": {"interpolation": "bicubic"},
}


def timm_rand_augment(policy, interpolation):
    """timm's own RandAugment or AutoAugment, built from its policy string as timm does."""
    from timm.data.auto_augment import augment_and_mix_transform, auto_augment_transform, rand_augment_transform
    from timm.data.transforms import str_to_pil_interp

    hparams = {"translate_const": 21, "img_mean": (124, 116, 104)}
    if interpolation != "random":
        hparams["interpolation"] = str_to_pil_interp(interpolation)
    if policy.startswith("rand"):
        return rand_augment_transform(policy, hparams)
    if policy.startswith("augmix"):
        return augment_and_mix_transform(policy, dict(hparams, translate_pct=0.3))
    return auto_augment_transform(policy, hparams)


def matches_pillow_given_drawn_ops(root, augmented, epochs: int) -> Counter:
    """Asserts that each sample of `augmented` (a `u8_loader`) is, byte for byte, what Pillow
    (timm's op functions) makes of the same sample without the ops, given the ops hpuload drew
    for it; returns how often each op was drawn (inside AugMix's chains too; Pillow's
    enhancers by kind)."""
    plain = u8_loader(root, [])
    sizes = [Image.open(p).size for p, _ in augmented.dataset.samples]
    seen = Counter()
    for epoch in range(epochs):
        plain.set_epoch(epoch)
        augmented.set_epoch(epoch)
        for (before, _), (after, _) in zip(plain, augmented):
            for slot, index in enumerate(augmented.last_indices):
                ops = json.loads(augmented._core.sample_plan(epoch, index, *sizes[index]))["ops"]
                flat = [c for o in ops for c in (sum(o["arg"]["chains"], []) if o["op"] == "aug_mix" else [o])]
                seen.update(o["op"] if o["op"] != "pil_enhance" else o["arg"]["kind"] for o in flat)
                src = Image.fromarray(before[slot].permute(1, 2, 0).numpy())
                want = torch.from_numpy(np.array(pil_apply(src, ops))).permute(2, 0, 1)
                assert torch.equal(want, after[slot]), ops
    return seen


@pytest.mark.parametrize("policy", sorted(TIMM_POLICIES))
def test_timm_rand_augment_matches_timms_ops_given_the_loaders_own_parameters(png_folder, policy):
    augmented = u8_loader(png_folder, [timm_rand_augment(policy, **TIMM_POLICIES[policy])])
    seen = matches_pillow_given_drawn_ops(png_folder, augmented, epochs=4)
    assert len(seen) >= (3 if policy == "3a" else 6), f"{policy}: only {seen} drawn"


def test_timm_rotate_is_pillows_rotate_by_the_drawn_angle(png_folder):
    """Rotations reach the engine as Pillow's affine matrix; the angle it encodes, given to
    timm's own `rotate`, gives the same image."""
    from timm.data import auto_augment as aa
    from timm.data.auto_augment import rand_augment_transform

    t = rand_augment_transform("rand-m9-n1-mstd0.5", {"translate_const": 21, "img_mean": (124, 116, 104)})
    t.ops = [o for o in t.ops if o.name == "Rotate"]
    t.ops[0].prob = 1.0
    plain, rotated = u8_loader(png_folder, []), u8_loader(png_folder, [t])
    (before, _), (after, _) = next(iter(plain)), next(iter(rotated))
    sizes = [Image.open(p).size for p, _ in rotated.dataset.samples]
    resample = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}
    for slot, index in enumerate(rotated.last_indices):
        (op,) = json.loads(rotated._core.sample_plan(0, index, *sizes[index]))["ops"]
        m, arg = op["arg"]["matrix"], op["arg"]
        degrees = -math.degrees(math.atan2(m[1], m[0]))
        assert abs(degrees) <= 30
        src = Image.fromarray(before[slot].permute(1, 2, 0).numpy())
        want = aa.rotate(src, degrees, resample=resample[arg["filter"]], fillcolor=tuple(arg["fill"]))
        diff = (torch.from_numpy(np.array(want)).permute(2, 0, 1).int() - after[slot].int()).abs()
        assert (diff > 1).float().mean() < 0.001, degrees


def test_timm_rand_augment_parameter_distributions_match_timms(png_folder):
    """The loader's draws against timm's own (its op functions replaced by recorders)."""
    import random

    policy = "rand-m9-mstd0.5-inc1"
    loader = u8_loader(png_folder, [timm_rand_augment(policy, "random")])
    t = timm_rand_augment(policy, "random")
    drawn = []

    def recorder(name):
        def record(img, *args, **kwargs):
            drawn.append((name, args, kwargs.get("resample")))
            return img

        return record

    for o in t.ops:
        o.aug_fn = recorder(o.name)
    random.seed(0)
    np.random.seed(0)
    img = Image.new("RGB", (SIDE, SIDE))
    n = 6000
    for _ in range(n):
        t(img)
    theirs = Counter(name for name, _, _ in drawn)
    factors_theirs = [args[0] for name, args, _ in drawn if name == "ColorIncreasing"]
    # timm's warps pick their filter inside the op (`random.choice` of the pair it is handed).
    (pair,) = {tuple(r) for name, _, r in drawn if name.startswith("Shear")}
    bicubic_theirs = pair.count(Image.BICUBIC) / len(pair)

    ours = Counter()
    factors_ours, bicubic_ours = [], []
    for i in range(n):
        ops = json.loads(loader._core.sample_plan(0, i, 500, 400))
        for o in ops["ops"]:
            a = o.get("arg")
            if o["op"] == "pil_enhance":
                ours[a["kind"]] += 1
                if a["kind"] == "color":
                    factors_ours.append(a["factor"])
            elif o["op"] == "pil_affine":
                kind = "rotate" if a["matrix"][0] != 1.0 else "shear" if a["matrix"][1] or a["matrix"][3] else "translate"
                ours[kind] += 1
                if kind == "shear":
                    bicubic_ours.append(a["filter"] == "bicubic")
            else:
                ours[o["op"]] += 1
    pairs = {
        "color": "ColorIncreasing",
        "contrast": "ContrastIncreasing",
        "brightness": "BrightnessIncreasing",
        "sharpness": "SharpnessIncreasing",
        "equalize": "Equalize",
        "invert": "Invert",
        "pil_auto_contrast": "AutoContrast",
        "solarize_add": "SolarizeAdd",
    }
    for mine, timms in pairs.items():
        expected = theirs[timms]
        # Each op's count is binomial with mean 2n * 0.5 / 15 (= 400): within 4 sigma.
        assert abs(ours[mine] - expected) < 4 * math.sqrt(2 * 400), (mine, ours[mine], expected)
    assert abs(ours["shear"] - theirs["ShearX"] - theirs["ShearY"]) < 4 * math.sqrt(2 * 800)
    assert abs(np.mean(factors_ours) - np.mean(factors_theirs)) < 0.05
    assert abs(np.std(factors_ours) - np.std(factors_theirs)) < 0.05
    assert abs(np.mean(bicubic_ours) - bicubic_theirs) < 0.08


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


class DeitGrey:
    """DeiT III's `gray_scale`, in this project's words: grey with probability p."""

    def __init__(self, p=0.2):
        self.p = p
        self.to_grey = T.Grayscale(3)

    def __call__(self, img):
        import random

        return self.to_grey(img) if random.random() < self.p else img


class DeitSolarize:
    """DeiT III's `Solarization`: Pillow's solarize with probability p."""

    def __init__(self, p=0.2):
        self.p = p

    def __call__(self, img):
        import random

        from PIL import ImageOps

        return ImageOps.solarize(img) if random.random() < self.p else img


class DeitBlur:
    """DeiT III's and DINO's `GaussianBlur`: with probability `prob`, a Pillow Gaussian blur
    of a radius drawn uniformly from [radius_min, radius_max]."""

    def __init__(self, p=0.1, radius_min=0.1, radius_max=2.0):
        self.prob, self.radius_min, self.radius_max = p, radius_min, radius_max

    def __call__(self, img):
        import random

        from PIL import ImageFilter

        if random.random() > self.prob:
            return img
        return img.filter(ImageFilter.GaussianBlur(radius=random.uniform(self.radius_min, self.radius_max)))


class LooksAlike:
    """Has a `p` and a radius range, but inverts: not what its attributes suggest."""

    def __init__(self):
        self.p, self.radius_min, self.radius_max = 1.0, 0.1, 2.0

    def __call__(self, img):
        from PIL import ImageOps

        return ImageOps.invert(img)


class BlursOnlyLargeImages(DeitBlur):
    """DINO's blur, but only for images wider than 100 pixels: what it does depends on the
    image's size, so small test images alone would take it for the blur."""

    def __call__(self, img):
        return super().__call__(img) if img.size[0] > 100 else img


class BlursOnlySmallImages(DeitBlur):
    def __call__(self, img):
        return super().__call__(img) if img.size[0] < 100 else img


class MocoBlur:
    """MoCo's and SimSiam's `GaussianBlur`, in this project's words: always a Pillow blur of a
    radius drawn from `sigma` (the recipe wraps it in a RandomApply)."""

    def __init__(self, sigma=(0.1, 2.0)):
        self.sigma = list(sigma)

    def __call__(self, x):
        import random

        from PIL import ImageFilter

        return x.filter(ImageFilter.GaussianBlur(radius=random.uniform(self.sigma[0], self.sigma[1])))


class MocoSolarize:
    """MoCo v3's `Solarize`: Pillow's solarize, always, no attributes at all."""

    def __call__(self, x):
        from PIL import ImageOps

        return ImageOps.solarize(x)


class BarlowBlur:
    """Barlow Twins' `GaussianBlur`: with probability p, a blur whose radius no attribute
    names (`random() * 1.9 + 0.1`)."""

    def __init__(self, p):
        self.p = p

    def __call__(self, img):
        import random

        from PIL import ImageFilter

        if random.random() < self.p:
            return img.filter(ImageFilter.GaussianBlur(random.random() * 1.9 + 0.1))
        return img


class VicregBlur(BarlowBlur):
    """VICReg's `GaussianBlur`: Barlow Twins' drawing from NumPy's generator."""

    def __call__(self, img):
        from PIL import ImageFilter

        if np.random.rand() < self.p:
            return img.filter(ImageFilter.GaussianBlur(np.random.rand() * 1.9 + 0.1))
        return img


class VicregSolarization:
    """VICReg's `Solarization`: Pillow's solarize with probability p, from NumPy's generator."""

    def __init__(self, p):
        self.p = p

    def __call__(self, img):
        from PIL import ImageOps

        return ImageOps.solarize(img) if np.random.rand() < self.p else img


class WiderBlur(BarlowBlur):
    """A blur whose hidden range is not the recipes' [0.1, 2.0]: nothing names it, so it
    cannot be taken for an op."""

    def __call__(self, img):
        from PIL import ImageFilter

        if np.random.rand() < self.p:
            return img.filter(ImageFilter.GaussianBlur(np.random.rand() * 2.9 + 0.1))
        return img


class TorchDrawnBlur(MocoBlur):
    """MoCo's blur drawing its radius from torch's generator: hpuload would not know to
    draw its radius per call the same way, and does not take it."""

    def __call__(self, x):
        from PIL import ImageFilter

        r = float(torch.empty(1).uniform_(self.sigma[0], self.sigma[1]))
        return x.filter(ImageFilter.GaussianBlur(radius=r))


class _UprightAndEqualized:
    """A step of a user's own that turns the image upright among other things."""

    def __call__(self, im):
        return ImageOps.equalize(ImageOps.exif_transpose(im))


def test_a_first_step_that_turns_images_by_their_exif_orientation_runs_natively(tmp_path):
    """`Lambda(ImageOps.exif_transpose)` first (scripts over phone photos): watched on test
    images that carry orientations, it is recognised, and the loader turns each image as it
    decodes it, with torch's pixels. After a crop or resize (Pillow keeps the orientation
    through them and turns what they made) it goes to torch's loader, named."""
    src = Image.new("RGB", (40, 30))
    src.paste((200, 30, 30), (0, 0, 20, 30))
    (tmp_path / "a").mkdir()
    for k in range(1, 9):
        exif = Image.Exif()
        exif[0x0112] = k
        src.save(tmp_path / "a" / f"phone{k}.jpg", exif=exif.tobytes(), quality=95)
    t = T.Compose([T.Lambda(ImageOps.exif_transpose), T.Resize((24, 32)), T.PILToTensor()])
    dataset = datasets.ImageFolder(str(tmp_path), t)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(dataset, batch_size=4, backend="cpu")
    images = torch.cat([x for x, _ in loader])
    assert torch.equal(images, torch.stack([dataset[i][0] for i in range(8)]))
    # The same photos turn differently, so the check above compares turned images.
    assert len({tuple(x[0, :, 0].tolist()) for x in images}) > 2
    # After the resize, alone or inside a class of the user's: torch's loader.
    for late in (T.Lambda(ImageOps.exif_transpose), _UprightAndEqualized()):
        t = T.Compose([T.Resize((24, 32)), late, T.PILToTensor()])
        with pytest.warns(FallbackWarning, match="EXIF orientation"):
            loader = DataLoader(datasets.ImageFolder(str(tmp_path), t), batch_size=4)
    # A conversion to RGB is still nothing to run.
    t = T.Compose([T.Lambda(lambda im: im.convert("RGB")), T.Resize((24, 32)), T.PILToTensor()])
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        DataLoader(datasets.ImageFolder(str(tmp_path), t), batch_size=1)


def test_a_step_that_shrinks_only_large_photos_is_not_run_as_nothing(jpeg_folder):
    """A step that keeps every image of a thumbnail's size but shrinks a 12-megapixel photo
    (as scripts over phone photos cap the size) is watched on one that large."""
    from hpuload._behaviour import keeps_rgb_images

    def cap(im):
        return im.resize((im.width // 2, im.height // 2)) if max(im.size) > 3000 else im

    assert not keeps_rgb_images(cap)
    assert keeps_rgb_images(lambda im: im.convert("RGB")) and keeps_rgb_images(lambda im: im)
    t = T.Compose([T.Lambda(cap), T.RandomResizedCrop(SIDE), T.PILToTensor()])
    with pytest.warns(FallbackWarning, match="Lambda"):
        DataLoader(datasets.ImageFolder(jpeg_folder, t), batch_size=4)


def test_a_class_applied_rarely_is_watched_applying_so_it_is_not_taken_for_another():
    """DINO's second global view blurs with p 0.1 and its solarize has p 0.2: under seeds
    whose first draw never fell under 0.1, a blur that never showed was taken for a grey
    with the same probability. Each branch of the coin is now watched."""
    from hpuload._behaviour import user_pixel_op

    assert user_pixel_op(DeitBlur(p=0.1)) == {"op": "pil_gaussian_blur", "radius": [0.1, 2.0], "p": 0.1}
    assert user_pixel_op(DeitSolarize(p=0.1)) == {"op": "random_solarize", "threshold": 128.0, "p": 0.1}
    assert user_pixel_op(DeitGrey(p=0.05)) == {"op": "pil_grayscale", "p": 0.05}
    assert user_pixel_op(DeitBlur(p=0.01)) == {"op": "pil_gaussian_blur", "radius": [0.1, 2.0], "p": 0.01}
    # Too rare to watch applying: not taken for anything (it runs in Python).
    assert user_pixel_op(DeitBlur(p=1e-6)) is None


def test_self_supervised_recipes_blur_and_solarize_classes_are_recognised_from_either_generator():
    """MoCo's and SimSiam's classes have no probability (a RandomApply holds it); Barlow
    Twins' and VICReg's name no radius range; VICReg's draw from NumPy's generator."""
    from hpuload._behaviour import user_pixel_op

    blur = {"op": "pil_gaussian_blur", "radius": [0.1, 2.0]}
    assert user_pixel_op(MocoBlur([0.1, 2.0])) == {**blur, "p": 1.0}
    assert user_pixel_op(MocoBlur([0.5, 1.5])) == {**blur, "radius": [0.5, 1.5], "p": 1.0}
    assert user_pixel_op(MocoSolarize()) == {"op": "random_solarize", "threshold": 128.0, "p": 1.0}
    assert user_pixel_op(BarlowBlur(p=0.1)) == {**blur, "p": 0.1}
    assert user_pixel_op(VicregBlur(p=1.0)) == {**blur, "p": 1.0}
    assert user_pixel_op(VicregSolarization(p=0.2)) == {"op": "random_solarize", "threshold": 128.0, "p": 0.2}
    assert user_pixel_op(WiderBlur(p=0.5)) is None
    assert user_pixel_op(TorchDrawnBlur()) is None
    state = np.random.get_state()[1].copy()
    user_pixel_op(VicregBlur(p=0.5))
    assert np.array_equal(np.random.get_state()[1], state)


class LightlyBlur:
    """Lightly's `GaussianBlur`, in this project's words: a coin from NumPy's generator
    against `prob`, then a Pillow blur of a radius drawn from `sigmas`."""

    def __init__(self, prob=0.5, sigmas=(0.2, 2)):
        self.prob, self.sigmas = prob, sigmas

    def __call__(self, sample):
        from PIL import ImageFilter

        if np.random.random_sample() < self.prob:
            sample = sample.filter(ImageFilter.GaussianBlur(radius=np.random.uniform(self.sigmas[0], self.sigmas[1])))
        return sample


class LightlySolarization:
    """Lightly's `RandomSolarization`: Pillow's solarize at its own threshold."""

    def __init__(self, prob=0.5, threshold=128):
        self.prob, self.threshold = prob, threshold

    def __call__(self, sample):
        return ImageOps.solarize(sample, threshold=self.threshold) if np.random.random_sample() < self.prob else sample


class LightlyToTensor:
    """Lightly's `ToTensor`: v2's `ToImage` then `ToDtype(torch.float32, scale=True)` (the
    bytes times 1/255, a `tv_tensors.Image`), not v1's division."""

    def __init__(self):
        self.transform = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])

    def __call__(self, *args, **kwargs):
        return self.transform(*args, **kwargs)


def test_lightlys_blur_solarize_and_to_tensor_classes_are_recognised():
    from hpuload._behaviour import acts_as_to_tensor, user_pixel_op

    assert user_pixel_op(LightlyBlur(prob=0.5)) == {"op": "pil_gaussian_blur", "radius": [0.2, 2.0], "p": 0.5}
    assert user_pixel_op(LightlySolarization(prob=0.2, threshold=100)) == {
        "op": "random_solarize",
        "threshold": 100.0,
        "p": 0.2,
    }
    assert acts_as_to_tensor(LightlyToTensor()) == "multiply"
    assert acts_as_to_tensor(lambda im: T.functional.to_tensor(im) * 2) is None
    assert acts_as_to_tensor(lambda im: T.functional.to_tensor(im)) == "divide"


def test_a_to_tensor_class_of_v2s_arithmetic_gives_torchs_floats_bit_for_bit(png_folder):
    """The bytes times 1/255 and v1's bytes over 255 differ in the last bit of some values:
    the class is run as the steps it behaves as, not as ToTensor."""
    t = v2.Compose([v2.CenterCrop(SIDE), LightlyToTensor(), v2.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = datasets.ImageFolder(png_folder, t)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        warnings.simplefilter("error", ht.PythonTailWarning)
        ours = list(DataLoader(ds, batch_size=6, backend="cpu"))
    theirs = list(tud.DataLoader(ds, batch_size=6))
    assert all(torch.equal(a, b) and torch.equal(la, lb) for (a, la), (b, lb) in zip(ours, theirs))


@pytest.mark.parametrize("recipe", ["moco", "vicreg", "lightly"])
def test_self_supervised_recipes_blur_and_solarize_run_natively_as_pillow_computes_them(png_folder, recipe):
    middle = {
        "moco": [T.RandomApply([MocoBlur([0.1, 2.0])], p=0.5), T.RandomApply([MocoSolarize()], p=0.5)],
        "vicreg": [VicregBlur(p=0.5), VicregSolarization(p=0.5)],
        "lightly": [LightlyBlur(prob=0.5), LightlySolarization(prob=0.5, threshold=100)],
    }[recipe]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ht.PythonTailWarning)
        augmented = u8_loader(png_folder, middle)
    seen = matches_pillow_given_drawn_ops(png_folder, augmented, epochs=3)
    assert set(seen) == {"solarize", "pil_gaussian_blur"}, seen


def test_a_recognised_blurs_radius_is_uniform_over_its_range(png_folder):
    loader = u8_loader(png_folder, [T.RandomApply([MocoBlur([0.5, 1.5])], p=1.0)])
    radii = []
    for i in range(3000):
        radii += [o["arg"] for o in json.loads(loader._core.sample_plan(0, i, 500, 400))["ops"]]
    assert len(radii) == 3000 and 0.5 <= min(radii) and max(radii) <= 1.5
    assert sum(radii) / len(radii) == pytest.approx(1.0, abs=0.02)
    # Uniform on [0.5, 1.5]: variance 1 / 12.
    assert sum((r - 1.0) ** 2 for r in radii) / len(radii) == pytest.approx(1 / 12, abs=0.005)


def test_deit3_three_augment_classes_run_natively_as_pillow_computes_them(png_folder):
    """DeiT III's ThreeAugment: its own grey, solarize and blur classes in a RandomChoice are
    recognised by what they do and run natively; each sample's result is Pillow's for the op
    and parameters hpuload drew, byte for byte."""
    choice = T.RandomChoice([DeitGrey(p=1.0), DeitSolarize(p=1.0), DeitBlur(p=1.0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ht.PythonTailWarning)
        augmented = u8_loader(png_folder, [choice])
    seen = matches_pillow_given_drawn_ops(png_folder, augmented, epochs=3)
    assert set(seen) == {"color", "solarize", "pil_gaussian_blur"}, seen


def test_a_users_class_is_taken_only_when_it_does_what_its_attributes_suggest(jpeg_folder):
    from hpuload._behaviour import user_pixel_op

    assert user_pixel_op(DeitBlur(p=0.5)) == {"op": "pil_gaussian_blur", "radius": [0.1, 2.0], "p": 0.5}
    assert user_pixel_op(DeitGrey(p=0.3)) == {"op": "pil_grayscale", "p": 0.3}
    assert user_pixel_op(DeitSolarize(p=1.0)) == {"op": "random_solarize", "threshold": 128.0, "p": 1.0}
    assert user_pixel_op(LooksAlike()) is None
    assert user_pixel_op(BlursOnlyLargeImages(p=0.5)) is None
    assert user_pixel_op(BlursOnlySmallImages(p=0.5)) is None
    t = T.Compose([T.CenterCrop(SIDE), LooksAlike(), T.PILToTensor()])
    with pytest.warns(ht.PythonTailWarning, match="LooksAlike"):
        DataLoader(datasets.ImageFolder(jpeg_folder, t), batch_size=8)
