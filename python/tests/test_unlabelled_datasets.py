"""A user's Dataset whose `__getitem__` returns its image alone (unlabelled data: a GAN's, a
diffusion model's, an autoencoder's, a self-supervised method's), bare or in a one-element
tuple or list: run natively, handed out as torch's `default_collate` makes it (a batch, or a
list of one batch), with no labels."""

import random
import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tud
import torchvision.transforms.functional as TF
from PIL import Image
from torchvision import transforms as T

from hpuload import _tail
from hpuload.torch import DataLoader, FallbackWarning

EVAL = T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor(), T.Normalize([0.5] * 3, [0.25] * 3)])


class Unlabelled(tud.Dataset):
    def __init__(self, root, transform=EVAL, form="bare"):
        self.paths = sorted(str(p) for p in root.rglob("*.jpg"))
        self.transform, self.form = transform, form

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        image = self.transform(Image.open(self.paths[i]).convert("RGB"))
        return image if self.form == "bare" else (image,) if self.form == "tuple" else [image]


class ResizesItself(Unlabelled):
    """No transform: a diffusion training script's own resize, flip drawn by its own `random`,
    conversion and scaling to [-1, 1]."""

    def __getitem__(self, i):
        image = TF.resize(Image.open(self.paths[i]).convert("RGB"), [32, 32])
        if random.random() < 0.5:
            image = TF.hflip(image)
        return TF.normalize(TF.to_tensor(image), [0.5] * 3, [0.5] * 3)


def no_fallback(make):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        return make()


def same(a, b) -> bool:
    """Equal values of the same structure, tensors bit for bit."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("form", ["bare", "tuple", "list"])
@pytest.mark.parametrize("how", ["collate", "collate_fn", "workers"])
def test_a_dataset_returning_its_image_alone_gives_torchs_batches_bit_for_bit(jpeg_folder, form, how):
    ds = Unlabelled(jpeg_folder, form=form)
    kwargs = {"collate_fn": lambda b: tud.default_collate(b)} if how == "collate_fn" else {}
    workers = 2 if how == "workers" else 0
    ours = list(no_fallback(lambda: DataLoader(ds, batch_size=8, backend="cpu", num_workers=workers, **kwargs)))
    theirs = list(tud.DataLoader(ds, batch_size=8, **kwargs))
    assert len(ours) == len(theirs) and all(same(a, b) for a, b in zip(ours, theirs))
    assert isinstance(ours[0], torch.Tensor) if form == "bare" else isinstance(ours[0], list) and len(ours[0]) == 1


def test_the_media_engine_gives_an_unlabelled_datasets_images_within_its_floor(jpeg_folder):
    ds = Unlabelled(jpeg_folder, transform=T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor()]))
    ours = list(no_fallback(lambda: DataLoader(ds, batch_size=8, backend="auto")))
    for x1, x2 in zip(ours, tud.DataLoader(ds, batch_size=8)):
        mse = ((x1 - x2) ** 2).mean().item()
        assert 10 * np.log10(1 / max(mse, 1e-12)) > 30  # PSNR over the [0, 1] range


def test_an_unlabelled_dataset_flipping_by_its_own_draws_gives_its_samples_for_those_draws(jpeg_folder):
    ds = ResizesItself(jpeg_folder, transform=None)
    loader = no_fallback(lambda: DataLoader(ds, batch_size=8, shuffle=True, backend="cpu"))
    flipped = 0
    for x in loader:
        assert isinstance(x, torch.Tensor) and x.shape[1:] == (3, 32, 32)
        for row, i in zip(x, loader.last_indices):
            with _tail.seeded_sample(loader._options.seed, 0, i):
                assert torch.equal(row, ds[i])
            plain = TF.normalize(TF.to_tensor(TF.resize(Image.open(ds.paths[i]).convert("RGB"), [32, 32])), [0.5] * 3, [0.5] * 3)
            flipped += not torch.equal(row, plain)
    assert 0 < flipped < len(ds)


class TwoCrops:
    """MoCo's: two views of each image."""

    def __init__(self, transform):
        self.transform = transform

    def __call__(self, image):
        return [self.transform(image), self.transform(image)]


def test_an_unlabelled_dataset_of_two_views_gives_a_list_of_each_views_batch(jpeg_folder):
    crop = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToTensor()])
    views = no_fallback(lambda: next(iter(DataLoader(Unlabelled(jpeg_folder, TwoCrops(crop)), batch_size=8))))
    theirs = next(iter(tud.DataLoader(Unlabelled(jpeg_folder, TwoCrops(crop)), batch_size=8)))
    assert isinstance(views, list) and len(views) == len(theirs) == 2
    assert all(v.shape == t.shape == (8, 3, 24, 24) for v, t in zip(views, theirs))


def test_output_pair_for_an_unlabelled_dataset_is_refused_naming_why(jpeg_folder):
    with pytest.raises(ValueError, match="its images alone, with no label"):
        DataLoader(Unlabelled(jpeg_folder), batch_size=8, output="pair")


# A class that gives its transform the image several times and returns each output (SimCLR's
# way, hand-written): each view made natively by the transform's pipeline, drawn apart.

CROP = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToTensor()])


class TwoViewsItself(Unlabelled):
    """`(view, view)`, `(view, view, label)`, `((view, view), label)`, `[view, view, label,
    index]` or `(view, view, multi-hot label, caption)`."""

    def __init__(self, root, transform=CROP, form="bare"):
        super().__init__(root, transform, form)

    def __getitem__(self, i):
        image = Image.open(self.paths[i]).convert("RGB")
        x1, x2 = self.transform(image), self.transform(image)
        if self.form == "bare":
            return x1, x2
        if self.form == "tuple":
            return x1, x2, i % 3
        if self.form == "nested":
            return (x1, x2), i % 3
        if self.form == "multi_hot":
            return x1, x2, torch.tensor([i % 2, 1 - i % 2], dtype=torch.float32), f"photo {i}"
        return [x1, x2, i % 3, i]


def test_each_view_is_torchvisions_for_the_parameters_its_plan_drew(jpeg_folder):
    import json

    ds = TwoViewsItself(jpeg_folder, transform=T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.PILToTensor()]))
    loader = no_fallback(lambda: DataLoader(ds, batch_size=8, shuffle=True, backend="cpu"))
    for epoch in range(2):
        for views in loader:
            for slot, index in enumerate(loader.last_indices):
                image = Image.open(ds.paths[index]).convert("RGB")
                for k, got in enumerate(views):
                    plan = json.loads(loader._core.sample_plan(epoch, index, image.width, image.height, view=k))
                    c, mode = plan["crop"], T.InterpolationMode(plan["interpolation"].removeprefix("pil_"))
                    want = TF.resized_crop(image, c["top"], c["left"], c["height"], c["width"], plan["size"], mode)
                    want = TF.pil_to_tensor(TF.hflip(want) if plan["flip"] else want)
                    assert torch.equal(got[slot], want), f"view {k} of sample {index}"


@pytest.mark.parametrize("form", ["bare", "tuple", "nested", "list", "multi_hot"])
def test_a_class_returning_its_transforms_views_of_one_image_runs_natively_in_torchs_structure(jpeg_folder, form):
    ds = TwoViewsItself(jpeg_folder, form=form)
    ours = next(iter(no_fallback(lambda: DataLoader(ds, batch_size=8, backend="cpu"))))
    theirs = next(iter(tud.DataLoader(ds, batch_size=8)))
    assert type(ours) is type(theirs) is list and len(ours) == len(theirs)
    views, their_views = (ours[0], theirs[0]) if form == "nested" else (ours[:2], theirs[:2])
    assert type(views) is type(their_views) is list and len(views) == 2
    for a, b in zip(views, their_views):
        assert a.shape == b.shape and a.dtype == b.dtype
    rest = 1 if form == "nested" else 2
    assert all(same(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(ours[rest:], theirs[rest:])), (
        "the label and the values after it as torch's"
    )
    assert not torch.equal(views[0], views[1]), "each view drawn apart"


@pytest.mark.parametrize("form", ["tuple", "nested"])
def test_views_of_a_fixed_transform_are_torchs_bit_for_bit_and_a_collate_fn_gets_the_classs_tuples(jpeg_folder, form):
    ds = TwoViewsItself(jpeg_folder, transform=EVAL, form=form)
    got = []
    loader = no_fallback(lambda: DataLoader(ds, batch_size=8, backend="cpu", collate_fn=lambda b: got.extend(b) or len(b)))
    assert sum(loader) == len(ds)
    for sample, i in zip(got, range(len(ds))):
        want = ds[i]
        assert same(sample[:-1], want[:-1]) and sample[-1] == want[-1]
    ours = list(no_fallback(lambda: DataLoader(ds, batch_size=8, backend="cpu")))
    assert all(same(a, b) for a, b in zip(ours, tud.DataLoader(ds, batch_size=8)))


class ViewsOfTwoImages(Unlabelled):
    def __getitem__(self, i):
        a = Image.open(self.paths[i]).convert("RGB")
        b = Image.open(self.paths[(i + 1) % len(self.paths)]).convert("RGB")
        return self.transform(a), self.transform(b)


def test_outputs_of_the_transform_from_two_images_fall_back_naming_what_runs_natively(jpeg_folder):
    with pytest.warns(FallbackWarning, match="several images made otherwise than by its transform from one image"):
        loader = DataLoader(ViewsOfTwoImages(jpeg_folder), batch_size=8)
    a, b = next(iter(loader))
    assert a.shape == b.shape == (8, 3, 32, 32)


def test_views_of_a_transform_with_a_pixel_op_before_its_crop_fall_back_naming_why(jpeg_folder):
    # The views share one decoded image, so a view's pixel ops come after its crop or resize.
    jitter_first = T.Compose([T.ColorJitter(0.3), T.RandomResizedCrop(24), T.ToTensor()])
    with pytest.warns(FallbackWarning, match="pixel ops before its crop or resize"):
        loader = DataLoader(TwoViewsItself(jpeg_folder, transform=jitter_first, form="tuple"), batch_size=8)
    a, b, labels = next(iter(loader))
    assert a.shape == b.shape == (8, 3, 24, 24) and labels.shape == (8,)
