"""A user's Dataset that transforms its images with torchvision's functional API itself
(`TF.resize`, `TF.center_crop`, `TF.to_tensor`, `TF.normalize`, ...), before its transform, after
it or instead of one: each call runs natively as the transform that is that call, in the order
the code makes them. Never different output: a call hpuload cannot follow falls back, named."""

import random
import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tud
import torchvision.transforms.functional as TF
from PIL import Image
import torchvision.transforms.v2.functional as F
from torchvision import transforms as T
from torchvision.io import read_image
from torchvision.transforms.v2.functional import center_crop, resize

from hpuload.torch import DataLoader, FallbackWarning

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


class Photos(tud.Dataset):
    def __init__(self, root, transform=None):
        self.paths = sorted(str(p) for p in root.rglob("*.jpg"))
        self.labels = [len(p) % 3 for p in self.paths]
        self.transform = transform

    def __len__(self):
        return len(self.paths)


class ResizesItself(Photos):
    """No transform: the class resizes, crops, converts and normalizes each image itself."""

    def __getitem__(self, i):
        image = Image.open(self.paths[i]).convert("RGB")
        image = TF.resize(image, 40)
        image = TF.center_crop(image, 32)
        x = TF.to_tensor(image)
        return TF.normalize(x, MEAN, STD), self.labels[i]


class ConvertsWhatItsTransformGave(Photos):
    """A transform that gives a PIL image, then the tensor and its normalization by the class."""

    def __getitem__(self, i):
        image = self.transform(Image.open(self.paths[i]).convert("RGB"))
        return TF.normalize(TF.to_tensor(image), MEAN, STD), self.labels[i]


class Composed(Photos):
    """The same steps as `ConvertsWhatItsTransformGave`, in its transform."""

    def __getitem__(self, i):
        return self.transform(Image.open(self.paths[i]).convert("RGB")), self.labels[i]


class ResizesBeforeItsTransform(Photos):
    def __getitem__(self, i):
        image = Image.open(self.paths[i]).convert("RGB")
        return self.transform(TF.to_tensor(TF.resize(image, [36, 36]))), self.labels[i]


class ReadsTensors(Photos):
    def __getitem__(self, i):
        x = read_image(self.paths[i])
        x = TF.center_crop(TF.resize(x, 40, antialias=True), 32)
        return TF.convert_image_dtype(x, torch.float32), self.labels[i]


def no_fallback(make):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        return make()


def assert_torchs_batches(ds):
    """hpuload's batches of `ds` on the CPU path, natively, are torch's loader's, bit for bit."""
    loader = no_fallback(lambda: DataLoader(ds, batch_size=8, backend="cpu"))
    assert_same_batches(list(loader), list(tud.DataLoader(ds, batch_size=8)))


def assert_same_batches(ours, theirs):
    assert len(ours) == len(theirs)
    for (x1, y1), (x2, y2) in zip(ours, theirs):
        assert y1.tolist() == y2.tolist()
        assert x1.shape == x2.shape and x1.dtype == x2.dtype
        assert torch.equal(x1, x2)


def test_a_dataset_resizing_cropping_and_normalizing_with_functionals_gives_torchs_batches_bit_for_bit(jpeg_folder):
    assert_torchs_batches(ResizesItself(jpeg_folder))


def test_functionals_given_what_the_transform_gave_run_after_it_bit_for_bit(jpeg_folder):
    assert_torchs_batches(ConvertsWhatItsTransformGave(jpeg_folder, T.Compose([T.Resize(40), T.CenterCrop(32)])))


def test_after_a_random_transform_the_functionals_give_what_that_transform_composed_with_their_steps_gives(jpeg_folder):
    """The calls after a random transform run as the transform the class would compose of
    them: the same drawn crops and flips for a seed, the same pixels."""
    random_steps = [T.RandomResizedCrop(32), T.RandomHorizontalFlip()]
    ds = ConvertsWhatItsTransformGave(jpeg_folder, T.Compose(random_steps))
    composed = Composed(jpeg_folder, T.Compose([*random_steps, T.ToTensor(), T.Normalize(MEAN, STD)]))
    ours = list(no_fallback(lambda: DataLoader(ds, batch_size=8, shuffle=True, seed=5, backend="cpu")))
    want = list(no_fallback(lambda: DataLoader(composed, batch_size=8, shuffle=True, seed=5, backend="cpu")))
    assert_same_batches(ours, want)


def test_functionals_before_the_transform_run_first_bit_for_bit(jpeg_folder):
    assert_torchs_batches(ResizesBeforeItsTransform(jpeg_folder, T.Compose([T.CenterCrop(32), T.Normalize(MEAN, STD)])))


def test_functionals_on_images_read_as_tensors_run_natively_bit_for_bit(jpeg_folder):
    assert_torchs_batches(ReadsTensors(jpeg_folder))


class UsesV2Functionals(Photos):
    """v2's functionals, some imported by name (they dispatch on the input's type)."""

    def __getitem__(self, i):
        x = F.to_image(Image.open(self.paths[i]).convert("RGB"))
        x = center_crop(resize(x, 40), 32)
        x = F.horizontal_flip(x)
        x = F.to_dtype(x, torch.float32, scale=True)
        return F.normalize(x, MEAN, STD), self.labels[i]


def test_v2_functionals_however_imported_give_torchs_batches_bit_for_bit(jpeg_folder):
    assert_torchs_batches(UsesV2Functionals(jpeg_folder))


class Unnormalized(Photos):
    def __getitem__(self, i):
        image = TF.center_crop(TF.resize(Image.open(self.paths[i]).convert("RGB"), 40), 32)
        return TF.to_tensor(image), self.labels[i]


def test_the_media_engine_gives_the_functionals_pixels_within_its_floor(jpeg_folder):
    ds = Unnormalized(jpeg_folder)
    ours = list(no_fallback(lambda: DataLoader(ds, batch_size=8, backend="auto")))
    for (x1, _), (x2, _) in zip(ours, tud.DataLoader(ds, batch_size=8)):
        mse = ((x1 - x2) ** 2).mean().item()
        assert 10 * np.log10(1 / max(mse, 1e-12)) > 30  # PSNR over the [0, 1] range


class AsksWhatTheCallGave(Photos):
    def __getitem__(self, i):
        x = TF.to_tensor(TF.resize(Image.open(self.paths[i]).convert("RGB"), [32, 32]))
        if isinstance(x, torch.Tensor):
            x = TF.normalize(x, MEAN, STD)
        return x, self.labels[i]


def test_code_that_asks_what_a_functional_gave_is_answered_as_with_the_pixels(jpeg_folder):
    assert_torchs_batches(AsksWhatTheCallGave(jpeg_folder))


class NormalizesThePILImage(Photos):
    def __getitem__(self, i):
        image = TF.resize(Image.open(self.paths[i]).convert("RGB"), [32, 32])
        return TF.normalize(image, MEAN, STD), self.labels[i]


def test_a_functional_given_what_it_does_not_take_falls_back_named_and_torchs_error_is_raised(jpeg_folder):
    with pytest.warns(FallbackWarning, match=r"functional\.normalize of a PIL image"):
        loader = DataLoader(NormalizesThePILImage(jpeg_folder), batch_size=8)
    with pytest.raises(TypeError):
        next(iter(loader))


class ResizesByItsOwnSize(Photos):
    def __getitem__(self, i):
        image = Image.open(self.paths[i]).convert("RGB")
        image = TF.resize(image, [image.height // 2, image.width // 2])
        return TF.to_tensor(TF.center_crop(image, 16)), self.labels[i]


def test_calls_that_differ_from_sample_to_sample_fall_back_named(jpeg_folder):
    ds, why = ResizesByItsOwnSize(jpeg_folder), r"resizes or converts its image otherwise than __getitem__\(0\)"
    assert len({Image.open(p).size for p in ds.paths}) > 1, "the folder's images have several sizes"
    with pytest.warns(FallbackWarning, match=why):
        loader = DataLoader(ds, batch_size=8)
    x, _ = next(iter(loader))
    assert x.shape[0] == 8


class CropsWhereGetParamsDrew(Photos):
    """`RandomResizedCrop.get_params`, then `resized_crop` (v1's or v2's), the window handed
    out beside the image (dense self-supervised methods keep it)."""

    def __init__(self, root, v2=False, shift=0):
        super().__init__(root)
        self.v2, self.shift = v2, shift

    def __getitem__(self, i):
        image = Image.open(self.paths[i]).convert("RGB")
        top, left, h, w = T.RandomResizedCrop.get_params(image, scale=(0.2, 1.0), ratio=(3 / 4, 4 / 3))
        image = (F if self.v2 else TF).resized_crop(image, top + self.shift, left, h, w, [32, 32])
        return {"pixel_values": TF.to_tensor(image), "window": torch.tensor([top, left, h, w]), "index": i}


@pytest.mark.parametrize("v2", [False, True])
def test_a_resized_crop_where_get_params_drew_it_runs_natively_and_each_window_handed_out_is_where_it_was_cut(jpeg_folder, v2):
    ds = CropsWhereGetParamsDrew(jpeg_folder, v2=v2)
    windows = []
    for epoch in range(2):
        for batch in no_fallback(lambda: DataLoader(ds, batch_size=8, shuffle=True, seed=epoch, backend="cpu")):
            for pixels, window, i in zip(batch["pixel_values"], batch["window"], batch["index"].tolist()):
                top, left, h, w = window.tolist()
                image = Image.open(ds.paths[i]).convert("RGB")
                assert top + h <= image.height and left + w <= image.width
                assert torch.equal(TF.to_tensor(TF.resized_crop(image, top, left, h, w, [32, 32])), pixels)
                windows.append((top, left, h, w))
    assert len(set(windows)) > len(ds), "windows drawn anew for each sample and epoch"


def test_a_resized_crop_elsewhere_than_get_params_drew_falls_back_named(jpeg_folder):
    with pytest.warns(FallbackWarning, match=r"a resized crop of the image at \(\d+, \d+\)"):
        loader = DataLoader(CropsWhereGetParamsDrew(jpeg_folder, shift=1), batch_size=8)
    assert len(next(iter(loader))["pixel_values"]) == 8


def halves(ds_class, root, **kwargs):
    """Two datasets of `ds_class`, each over half of the folder's images."""
    a, b = ds_class(root, **kwargs), ds_class(root, **kwargs)
    a.paths, a.labels = a.paths[:20], a.labels[:20]
    b.paths, b.labels = b.paths[20:], b.labels[20:]
    return tud.ConcatDataset([a, b])


def test_under_a_concat_dataset_functional_calls_run_natively_bit_for_bit(jpeg_folder):
    assert_torchs_batches(halves(ResizesItself, jpeg_folder))


def test_under_a_concat_dataset_a_crop_drawn_by_get_params_falls_back_named(jpeg_folder):
    with pytest.warns(FallbackWarning, match=r"under a ConcatDataset \(hpuload follows functional calls of given arguments"):
        loader = DataLoader(halves(CropsWhereGetParamsDrew, jpeg_folder), batch_size=8)
    assert len(next(iter(loader))["pixel_values"]) == 8


class ResizeAndCrop:
    """A transform class of the user's own that calls torchvision's functionals."""

    def __init__(self, size):
        self.size = size

    def __call__(self, image):
        image = TF.resize(image, self.size + 8)
        return TF.center_crop(image, self.size)


SIZE = 32


def to_small_tensor(image):
    """A transform function of the user's own, reading a global."""
    return TF.to_tensor(TF.resize(image, [SIZE, SIZE]))


@pytest.mark.parametrize(
    "transform",
    [
        T.Compose([ResizeAndCrop(32), T.ToTensor(), T.Normalize(MEAN, STD)]),
        T.Compose([T.RandomHorizontalFlip(0.0), ResizeAndCrop(24), T.PILToTensor()]),
        to_small_tensor,
    ],
    ids=["class", "class_after_a_step", "function"],
)
def test_a_transform_of_the_users_that_calls_functionals_runs_natively_bit_for_bit(jpeg_folder, transform):
    assert_torchs_batches(Composed(jpeg_folder, transform))


def test_a_global_the_users_transform_reads_changed_between_epochs_is_followed(jpeg_folder):
    global SIZE
    ds = Composed(jpeg_folder, to_small_tensor)
    loader = no_fallback(lambda: DataLoader(ds, batch_size=8, backend="cpu"))
    try:
        assert next(iter(loader))[0].shape[-1] == 32
        SIZE = 40
        assert_same_batches(list(loader), list(tud.DataLoader(ds, batch_size=8)))
    finally:
        SIZE = 32


class GrowsAsItIsCalled(ResizeAndCrop):
    """Progressive resizing kept in the transform itself: a state hpuload cannot follow."""

    def __call__(self, image):
        self.size += 1
        return TF.to_tensor(TF.center_crop(image, 20))


class FlipsByItsOwnDraw(ResizeAndCrop):
    def __call__(self, image):
        image = TF.center_crop(image, self.size)
        return TF.to_tensor(TF.hflip(image) if random.random() < 0.5 else image)


@pytest.mark.parametrize("cls", [GrowsAsItIsCalled, FlipsByItsOwnDraw])
def test_a_transform_of_the_users_that_changes_or_draws_is_not_taken_for_its_calls(jpeg_folder, cls):
    ds = Composed(jpeg_folder, cls(20))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = DataLoader(ds, batch_size=8, backend="cpu")
        x, _ = next(iter(loader))
    assert x.shape == (8, 3, 20, 20)
    # Run as it is (torch's loader, or its own code in Python): never as the calls of one trace.
    from hpuload._probe import traced

    assert traced(ds.transform) is None
    assert caught, "it runs otherwise than natively, saying so"


class AsksWhatItsTransformIs(Photos):
    """Code that branches on its transform's class: the stand-in hpuload probes with answers
    `isinstance` as the transform it stands for."""

    def __getitem__(self, i):
        image = Image.open(self.paths[i]).convert("RGB")
        if isinstance(self.transform, (ResizeAndCrop, T.Compose)):
            return self.transform(image), self.labels[i]
        return TF.to_tensor(TF.resize(image, [16, 16])), self.labels[i]


@pytest.mark.parametrize("transform", [T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor()]), T.ToTensor()])
def test_code_that_asks_what_its_transform_is_takes_the_path_it_takes_with_it(jpeg_folder, transform):
    ds = AsksWhatItsTransformIs(jpeg_folder, transform)
    if isinstance(transform, T.Compose):
        assert_torchs_batches(ds)
    else:
        # Not given the image: hpuload would run the transform too. It says so.
        with pytest.warns(FallbackWarning, match="without giving it to its transform"):
            loader = DataLoader(ds, batch_size=8)
        assert next(iter(loader))[0].shape == (8, 3, 16, 16)


class CountsItsCalls:
    """A step with effects (it counts its calls; another might end its process)."""

    calls = 0

    def __call__(self, x):
        CountsItsCalls.calls += 1
        return x * 1


def test_a_transform_of_the_users_that_names_no_functional_is_not_called_to_read_it(jpeg_folder):
    from hpuload._probe import traced

    step = CountsItsCalls()
    ds = Composed(jpeg_folder, T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor(), step]))
    loader = DataLoader(ds, batch_size=8, backend="cpu")
    assert traced(step) is None and CountsItsCalls.calls == 0, "only the loader's batches call it"
    x, _ = next(iter(loader))
    assert x.shape == (8, 3, 32, 32) and CountsItsCalls.calls >= 8


# Flips the class draws itself (`if random.random() < 0.5: image = TF.hflip(image)`), with
# only conversions, Normalize, flips and colour steps after them: each sample is made without
# the flip and flipped where the class's code, run again for it with its draws seeded from
# (seed, epoch, index), flipped it.


class FlipsByItsOwnDraws(Photos):
    """The resize, then flips drawn with Python's and torch's generators (v1's, v2's and
    Pillow's), then the conversion in its transform (or by itself)."""

    def __init__(self, root, transform=None, how="tf"):
        super().__init__(root, transform)
        self.how = how

    def __getitem__(self, i):
        image = TF.resize(Image.open(self.paths[i]).convert("RGB"), [24, 32])
        if random.random() < 0.5:
            image = image.transpose(Image.FLIP_LEFT_RIGHT) if self.how == "pil" else TF.hflip(image)
        if torch.rand(1).item() < 0.3:
            image = F.vertical_flip(image) if self.how == "v2" else TF.vflip(image)
        x = self.transform(image) if self.transform is not None else TF.to_tensor(image)
        return x, self.labels[i]


def unflipped(ds, i):
    """`ds[i]` as its code makes it without a flip."""
    image = TF.resize(Image.open(ds.paths[i]).convert("RGB"), [24, 32])
    return ds.transform(image) if ds.transform is not None else TF.to_tensor(image)


@pytest.mark.parametrize(
    "how, transform",
    [
        ("tf", None),
        ("pil", T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])),
        ("v2", T.Compose([T.PILToTensor()])),
    ],
)
def test_a_flip_the_class_draws_itself_is_drawn_for_each_sample_and_made_bit_for_bit(jpeg_folder, how, transform):
    from hpuload import _tail

    ds = FlipsByItsOwnDraws(jpeg_folder, transform, how)
    loader = no_fallback(lambda: DataLoader(ds, batch_size=8, shuffle=True, backend="cpu"))
    seen = set()
    for epoch in range(2):
        for x, y in loader:
            for row, label, i in zip(x, y.tolist(), loader.last_indices):
                with _tail.seeded_sample(loader._options.seed, epoch, i):
                    want, want_label = ds[i]
                assert torch.equal(row, want) and label == want_label
                plain = unflipped(ds, i)
                seen.add(next(k for k, dims in enumerate([[], [-1], [-2], [-1, -2]]) if torch.equal(row, plain.flip(dims))))
    assert seen == {0, 1, 2, 3}, "each flip, both and none, drawn over two epochs"


def test_the_media_engine_flips_what_the_class_draws_within_its_floor(jpeg_folder):
    from hpuload import _tail

    ds = FlipsByItsOwnDraws(jpeg_folder)
    loader = no_fallback(lambda: DataLoader(ds, batch_size=8, backend="auto"))
    for x, _ in loader:
        for row, i in zip(x, loader.last_indices):
            with _tail.seeded_sample(loader._options.seed, 0, i):
                want, _ = ds[i]
            mse = ((row - want) ** 2).mean().item()
            assert 10 * np.log10(1 / max(mse, 1e-12)) > 30  # PSNR over the [0, 1] range


def test_a_flip_the_class_draws_is_drawn_the_same_again_by_a_loader_of_the_same_seed(jpeg_folder):
    ds = FlipsByItsOwnDraws(jpeg_folder)
    first, again = (list(no_fallback(lambda: DataLoader(ds, batch_size=8, shuffle=True, seed=5))) for _ in range(2))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(first, again))


class FlipsBeforeItsResize(Photos):
    def __getitem__(self, i):
        image = Image.open(self.paths[i]).convert("RGB")
        if random.random() < 0.5:
            image = TF.hflip(image)
        image = TF.resize(image, [24, 32]) if self.transform is None else self.transform(image)
        return TF.to_tensor(image), self.labels[i]


@pytest.mark.parametrize(
    "transform, why",
    [
        (None, r"flips its image by a draw before `functional\.resize\(size=\[24, 32\]"),
        (T.RandomResizedCrop(24), r"flips its image by a draw before its transform"),
    ],
)
def test_a_flip_the_class_draws_before_a_step_that_moves_pixels_falls_back_named(jpeg_folder, transform, why):
    ds = FlipsBeforeItsResize(jpeg_folder, transform)
    with pytest.warns(FallbackWarning, match=why):
        loader = DataLoader(ds, batch_size=8)
    x, _ = next(iter(loader))
    assert x.shape[0] == 8
