"""Multi-crop transforms (DINO's `DataAugmentationDINO`): a class of the user's whose `__call__`
returns a list of its Composes applied to the image runs natively, every view from one decode,
and the batch is a list of fixed-shape tensors, one per view, as DINO's loop expects."""

import json
import random
import warnings

import numpy as np
import pytest
import torch
from PIL import Image
from test_recipes import DeitBlur as Blur
from test_recipes import DeitSolarize as Solarize
from test_recipes import MocoBlur, MocoSolarize, VicregBlur, VicregSolarization
from test_recipes import tv_apply
from torchvision import datasets
from torchvision import transforms as T
from torchvision.transforms.v2 import functional as F

import hpuload.torch as ht
from hpuload._transforms import views_of
from hpuload.torch import DataLoader, FallbackWarning

GLOBAL, LOCAL = 40, 24


class MultiCrop:
    """Two global crops and `local` small ones, DINO's recipe at small sizes."""

    def __init__(self, local=3):
        jitter = T.Compose(
            [
                T.RandomHorizontalFlip(),
                T.RandomApply([T.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8),
                T.RandomGrayscale(0.2),
            ]
        )
        norm = T.Compose([T.ToTensor(), T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
        bicubic = T.InterpolationMode.BICUBIC
        self.first = T.Compose([T.RandomResizedCrop(GLOBAL, (0.4, 1.0), interpolation=bicubic), jitter, Blur(1.0), norm])
        self.second = T.Compose(
            [T.RandomResizedCrop(GLOBAL, (0.4, 1.0), interpolation=bicubic), jitter, Blur(0.1), Solarize(0.2), norm]
        )
        self.small = T.Compose([T.RandomResizedCrop(LOCAL, (0.05, 0.4), interpolation=bicubic), jitter, Blur(0.5), norm])
        self.local = local

    def __call__(self, image):
        crops = [self.first(image), self.second(image)]
        for _ in range(self.local):
            crops.append(self.small(image))
        return crops


class U8Crops:
    """Views whose pixels torchvision's kernels reproduce given the drawn parameters."""

    def __init__(self):
        self.big = T.Compose([T.RandomResizedCrop(GLOBAL), T.RandomHorizontalFlip(), T.PILToTensor()])
        self.small = T.Compose(
            [
                T.RandomResizedCrop(LOCAL, (0.05, 0.4), interpolation=T.InterpolationMode.BICUBIC),
                T.RandomHorizontalFlip(),
                T.RandomGrayscale(0.5),
                T.PILToTensor(),
            ]
        )

    def __call__(self, image):
        return [self.big(image), self.small(image), self.small(image)]


def native(dataset, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        return DataLoader(dataset, **kw)


class TwoViews:
    """MoCo v3's `TwoCropsTransform` (Barlow Twins' and VICReg's `Transform` return a tuple)."""

    def __init__(self, first, second, pair=list):
        self.first, self.second, self.pair = first, second, pair

    def __call__(self, x):
        return self.pair([self.first(x), self.second(x)])


def moco_v3_view(blur, solarize):
    return T.Compose(
        [
            T.RandomResizedCrop(GLOBAL, scale=(0.08, 1.0)),
            T.RandomApply([T.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8),
            T.RandomGrayscale(p=0.2),
            T.RandomApply([MocoBlur([0.1, 2.0])], p=blur),
            T.RandomApply([MocoSolarize()], p=solarize),
            T.RandomHorizontalFlip(),
            T.ToTensor(),
            T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ]
    )


def vicreg_view(blur, solarize):
    return T.Compose(
        [
            T.RandomResizedCrop(GLOBAL, interpolation=T.InterpolationMode.BICUBIC),
            T.RandomHorizontalFlip(p=0.5),
            T.RandomApply([T.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1)], p=0.8),
            T.RandomGrayscale(p=0.2),
            VicregBlur(p=blur),
            VicregSolarization(p=solarize),
            T.ToTensor(),
            T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ]
    )


@pytest.mark.parametrize("recipe", ["moco_v3", "vicreg"])
def test_self_supervised_two_view_recipes_run_natively_whole(jpeg_folder, recipe):
    """MoCo v3's and VICReg's loaders (their own blur and solarize classes, in a RandomApply
    or drawing from NumPy) run every step natively: no fallback, no Python tail."""
    view, pair = {"moco_v3": (moco_v3_view, list), "vicreg": (vicreg_view, tuple)}[recipe]
    dataset = datasets.ImageFolder(jpeg_folder, TwoViews(view(1.0, 0.0), view(0.1, 0.2), pair))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        warnings.simplefilter("error", ht.PythonTailWarning)
        loader = DataLoader(dataset, batch_size=8, shuffle=True, num_workers=2, drop_last=True)
    for views, labels in loader:
        assert isinstance(views, list) and [tuple(v.shape) for v in views] == [(8, 3, GLOBAL, GLOBAL)] * 2
        assert labels.tolist() == [dataset.targets[i] for i in loader.last_indices]
        assert not torch.equal(views[0], views[1])


def test_a_multi_crop_transform_gives_one_fixed_shape_batch_per_view(jpeg_folder):
    dataset = datasets.ImageFolder(jpeg_folder, MultiCrop(local=3))
    loader = native(dataset, batch_size=8, shuffle=True, num_workers=2, drop_last=True)
    batches = 0
    for images, labels in loader:
        assert isinstance(images, list) and len(images) == 5
        assert [tuple(v.shape) for v in images] == [(8, 3, GLOBAL, GLOBAL)] * 2 + [(8, 3, LOCAL, LOCAL)] * 3
        assert all(v.dtype == torch.float32 for v in images)
        assert labels.tolist() == [dataset.targets[i] for i in loader.last_indices]
        # Every view is its own crop of the image, not a copy of another.
        assert not torch.equal(images[2], images[3]) and not torch.equal(images[0], images[1])
        batches += 1
    assert batches == len(dataset) // 8
    fallbacks = loader.report()["fallbacks"]
    assert set(fallbacks) <= {"several views of one image (one decode on the host)"}


def test_each_view_matches_torchvision_given_its_own_drawn_parameters(png_folder):
    dataset = datasets.ImageFolder(png_folder, U8Crops())
    loader = native(dataset, batch_size=12, backend="cpu", seed=3)
    worst = 0.0
    for epoch in range(2):
        loader.set_epoch(epoch)
        for views, _ in loader:
            for slot, index in enumerate(loader.last_indices):
                image = Image.open(dataset.samples[index][0]).convert("RGB")
                source = F.pil_to_tensor(image)
                for k, got in enumerate(views):
                    plan = json.loads(loader._core.sample_plan(epoch, index, image.width, image.height, view=k))
                    c = plan["crop"]
                    name = plan["interpolation"]
                    # On a PIL image (the dataset's), Pillow resizes: `pil_bilinear`.
                    pil = name.startswith("pil_")
                    mode = T.InterpolationMode(name.removeprefix("pil_"))
                    want = F.resized_crop(
                        image if pil else source, int(c["top"]), int(c["left"]), int(c["height"]), int(c["width"]),
                        plan["size"], interpolation=mode, antialias=True,
                    )
                    want = F.pil_to_tensor(want) if pil else want
                    want = tv_apply(want, plan["ops"])
                    if plan["flip"]:
                        want = F.horizontal_flip(want)
                    diff = (want.int() - got[slot].int()).abs()
                    assert diff.max() <= 2, f"view {k} of sample {index}: off by {diff.max()}"
                    worst = max(worst, (diff > 1).float().mean().item())
    assert worst <= 0.01


def test_views_draw_their_own_parameters_repeatably(jpeg_folder):
    dataset = datasets.ImageFolder(jpeg_folder, U8Crops())
    a = native(dataset, batch_size=8, seed=11, backend="cpu")
    b = native(dataset, batch_size=8, seed=11, num_workers=1)
    for (va, la), (vb, lb) in zip(a, b):
        assert torch.equal(la, lb) and all(torch.equal(x, y) for x, y in zip(va, vb))
    crops = {
        json.dumps(json.loads(a._core.sample_plan(0, i, 320, 240, view=k))["crop"]) for i in range(4) for k in (1, 2)
    }
    assert len(crops) == 8, "the two small views of a sample drew the same crop"
    # The first view draws what a loader of that view alone draws.
    alone = native(datasets.ImageFolder(jpeg_folder, dataset.transform.big), batch_size=8, seed=11, backend="cpu")
    assert json.loads(alone._core.sample_plan(0, 5, 320, 240)) == json.loads(a._core.sample_plan(0, 5, 320, 240, view=0))
    a.set_epoch(0)
    (first, _), (views, _) = next(iter(alone)), next(iter(a))
    assert torch.equal(first, views[0])


def test_a_multi_crop_loader_resumes_exactly(jpeg_folder):
    dataset = datasets.ImageFolder(jpeg_folder, MultiCrop(local=2))
    full = [v for v, _ in native(dataset, batch_size=6, shuffle=True, seed=4)]
    first = native(dataset, batch_size=6, shuffle=True, seed=4)
    it = iter(first)
    next(it), next(it)
    state = first.state_dict()
    del it
    resumed = native(dataset, batch_size=6, shuffle=True, seed=4)
    resumed.load_state_dict(state)
    rest = [v for v, _ in resumed]
    assert len(rest) == len(full) - 2
    for want, got in zip(full[2:], rest):
        assert all(torch.equal(x, y) for x, y in zip(want, got))


def test_a_collate_fn_gets_each_samples_list_of_crops(jpeg_folder):
    seen = []

    def collate(batch):
        seen.append([(len(crops), tuple(crops[0].shape), tuple(crops[-1].shape), label) for crops, label in batch])
        return torch.utils.data.default_collate(batch)

    dataset = datasets.ImageFolder(jpeg_folder, MultiCrop(local=2))
    loader = native(dataset, batch_size=4, collate_fn=collate, seed=1)
    views, labels = next(iter(loader))
    assert [tuple(v.shape) for v in views] == [(4, 3, GLOBAL, GLOBAL)] * 2 + [(4, 3, LOCAL, LOCAL)] * 2
    assert seen[0] == [(4, (3, GLOBAL, GLOBAL), (3, LOCAL, LOCAL), int(t)) for t in labels]
    plain = next(iter(native(dataset, batch_size=4, seed=1)))[0]
    assert all(torch.equal(x, y) for x, y in zip(views, plain))


def test_recognising_a_multi_crop_transform_draws_nothing_and_refuses_one_that_reads_the_image():
    states = random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state()
    t = MultiCrop(local=2)
    assert views_of(t) == [t.first, t.second, t.small, t.small]
    assert random.getstate() == states[0] and np.array_equal(np.random.get_state()[1], states[1])
    assert torch.equal(torch.get_rng_state(), states[2])

    class Converts(MultiCrop):
        def __call__(self, image):
            return super().__call__(image.convert("RGB"))

    class One(MultiCrop):
        def __call__(self, image):
            return [self.first(image)]

    assert views_of(Converts()) is None and views_of(One()) is None
    assert views_of(t.first) is None and views_of(T.RandomResizedCrop(8)) is None


def test_a_view_hpuload_cannot_run_falls_back_naming_the_view(jpeg_folder):
    t = MultiCrop(local=1)
    t.small = T.Compose([T.RandomResizedCrop(LOCAL), T.Lambda(lambda x: x.rotate(90)), T.ToTensor()])
    with pytest.warns(FallbackWarning, match="view 2 of MultiCrop"):
        loader = DataLoader(datasets.ImageFolder(jpeg_folder, t), batch_size=4)
    assert not isinstance(loader, ht.DataLoader)


def test_a_view_with_a_pixel_op_before_its_crop_falls_back_naming_why_not_raising(jpeg_folder):
    # The views share one decoded image: a view's pixel ops come after its crop or resize.
    t = MultiCrop(local=1)
    t.small = T.Compose([T.ColorJitter(0.3), T.RandomResizedCrop(LOCAL), T.ToTensor()])
    with pytest.warns(FallbackWarning, match="view 2 has pixel ops before its crop or resize"):
        loader = DataLoader(datasets.ImageFolder(jpeg_folder, t), batch_size=4)
    views, labels = next(iter(loader))
    assert len(views) == 3 and labels.shape == (4,)
