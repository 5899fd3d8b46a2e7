"""torchvision's datasets held in memory as one uint8 array (CIFAR10, CIFAR100, SVHN) run
natively: every image is the array's row as `Image.fromarray` gives it, through the
translated transform, with the dataset's labels.

The datasets are made as torchvision's classes hold them (their files are fetched from the
network, which the tests do not reach): the class's own `__getitem__` over `data` and
`targets`/`labels` arrays of random pixels."""

import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tud
import torchvision.transforms.functional as F
from PIL import Image
from torchvision import datasets
from torchvision import transforms as T
from torchvision.transforms import v2

from hpuload.torch import DataLoader, FallbackWarning, PythonTailWarning
from test_parity import first_batch

CIFAR_MEAN, CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


def in_memory(cls, n, transform=None, target_transform=None, seed=0, size=32):
    """A torchvision `cls` (CIFAR10, CIFAR100, SVHN or STL10) holding `n` random images."""
    rng = np.random.default_rng(seed)
    ds = cls.__new__(cls)
    ds.root, ds.transform, ds.target_transform, ds.transforms = "/nowhere", transform, target_transform, None
    if issubclass(cls, datasets.STL10):
        # "train+unlabeled": labelled images, then unlabeled ones labelled -1.
        ds.data = rng.integers(0, 256, (n, 3, size, size), dtype=np.uint8)
        ds.labels = np.concatenate([rng.integers(0, 10, n // 2), np.full(n - n // 2, -1)])
        ds.split, ds.folds = "train+unlabeled", None
    elif issubclass(cls, datasets.SVHN):
        ds.data = rng.integers(0, 256, (n, 3, size, size), dtype=np.uint8)
        ds.labels = rng.integers(0, 10, n)
        ds.split = "train"
    else:
        ds.data = rng.integers(0, 256, (n, size, size, 3), dtype=np.uint8)
        classes = 100 if issubclass(cls, datasets.CIFAR100) else 10
        ds.targets = [int(v) for v in rng.integers(0, classes, n)]
        ds.classes = [f"class{i}" for i in range(classes)]
        ds.train = True
    return ds


def native(dataset, **kwargs):
    """hpuload's loader over `dataset`, refusing any fallback or Python tail."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        warnings.simplefilter("error", PythonTailWarning)
        return DataLoader(dataset, **kwargs)


EVAL = T.Compose([T.ToTensor(), T.Normalize(CIFAR_MEAN, CIFAR_STD)])


@pytest.mark.parametrize("cls", [datasets.CIFAR10, datasets.CIFAR100, datasets.SVHN, datasets.STL10])
def test_an_evaluation_transform_gives_the_datasets_own_samples_in_order(cls):
    size = 96 if cls is datasets.STL10 else 32
    ds = in_memory(cls, 70, EVAL, size=size)
    loader = native(ds, batch_size=16, num_workers=2)
    xs, ys = zip(*loader)
    x, y = torch.cat(xs), torch.cat(ys)
    want = [ds[i] for i in range(len(ds))]
    assert x.shape == (70, 3, size, size) and x.dtype == torch.float32
    # ToTensor's division and Normalize, in torch's order of roundings.
    assert torch.equal(x, torch.stack([w[0] for w in want]))
    assert y.tolist() == [w[1] for w in want]


def test_cifar_made_grey_with_one_channel_gives_the_datasets_own_samples():
    """`Grayscale()` (one channel) of CIFAR's colour images, then `ToTensor` and a
    one-value `Normalize`: `[B, 1, 32, 32]`, the dataset's own values."""
    ds = in_memory(datasets.CIFAR10, 40, T.Compose([T.Grayscale(), T.ToTensor(), T.Normalize((0.5,), (0.25,))]))
    x = torch.cat([x for x, _ in native(ds, batch_size=16)])
    assert x.shape == (40, 1, 32, 32)
    assert torch.equal(x, torch.stack([ds[i][0] for i in range(len(ds))]))


def test_a_cifar_resized_up_without_a_crop_runs_natively_at_the_size_torchvision_computes():
    """`Resize(64)` alone (no crop) over CIFAR's 32x32 images is the resize to 64x64."""
    tf = T.Compose([T.Resize(64), T.ToTensor()])
    ds = in_memory(datasets.CIFAR10, 12, tf, seed=4)
    x, _ = next(iter(native(ds, batch_size=12, backend="cpu")))
    want = torch.stack([ds[i][0] for i in range(12)])
    assert x.shape == (12, 3, 64, 64)
    assert (x - want).abs().max().item() <= 1 / 255 + 1e-6


@pytest.mark.parametrize("pad_first", [False, True])
@pytest.mark.parametrize("mode", ["constant", "reflect"])
def test_cifars_training_recipe_is_torchvisions_at_the_offsets_and_flips_the_loader_drew(mode, pad_first):
    """`RandomCrop(32, padding=4)` (or `Pad(4)` then `RandomCrop(32)`, the same), the flip,
    `ToTensor`, `Normalize`: each sample is the dataset's image padded and cut at the loader's
    window, flipped where it drew a flip."""
    crop = [T.Pad(4, padding_mode=mode), T.RandomCrop(32)] if pad_first else [T.RandomCrop(32, padding=4, padding_mode=mode)]
    tf = T.Compose([*crop, T.RandomHorizontalFlip(), T.PILToTensor()])
    ds = in_memory(datasets.CIFAR10, 64, tf, seed=1)
    loader = native(ds, batch_size=64, shuffle=True, seed=5)
    x, y, indices = first_batch(loader)
    flips, shifted = 0, 0
    for slot, index in enumerate(indices):
        (top, left, h, w), flip = loader._core.sample_params(0, index, 32, 32)
        assert (h, w) == (32, 32) and -4 <= top <= 4 and -4 <= left <= 4
        padded = F.pad(Image.fromarray(ds.data[index]), 4, padding_mode=mode)
        want = F.pil_to_tensor(F.crop(padded, int(top) + 4, int(left) + 4, 32, 32))
        assert torch.equal(x[slot], F.hflip(want) if flip else want), f"sample {index}"
        assert int(y[slot]) == ds.targets[index]
        flips += flip
        shifted += (top, left) != (0, 0)
    assert 0 < flips < 64 and shifted > 32


def test_a_subset_of_cifar_with_a_target_transform_gives_its_own_samples_and_labels():
    ds = in_memory(datasets.CIFAR10, 50, v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]), seed=2)
    ds.target_transform = lambda y: 9 - y
    train, _ = tud.random_split(ds, [30, 20], generator=torch.Generator().manual_seed(0))
    loader = native(train, batch_size=10)
    x, y = (torch.cat(t) for t in zip(*loader))
    want = [train[i] for i in range(len(train))]
    assert torch.equal(x, torch.stack([w[0] for w in want]))
    assert y.tolist() == [w[1] for w in want]


def test_a_cifar_subclass_with_its_own_getitem_is_not_read_as_the_array():
    class Relabelled(datasets.CIFAR10):
        def __getitem__(self, index):
            image, label = super().__getitem__(index)
            return image, label + 100

    ds = in_memory(Relabelled, 8, EVAL)
    with pytest.warns(FallbackWarning):
        loader = DataLoader(ds, batch_size=4)
    assert next(iter(loader))[1].min() >= 100


def test_a_cifar_resized_for_an_imagenet_model_runs_natively():
    """Fine-tuning recipes resize CIFAR's 32x32 images up (`Resize(224)` then a crop)."""
    tf = T.Compose([T.Resize(64), T.CenterCrop(56), T.ToTensor()])
    ds = in_memory(datasets.CIFAR100, 12, tf, seed=3)
    x, _ = next(iter(native(ds, batch_size=12)))
    want = torch.stack([ds[i][0] for i in range(12)])
    assert x.shape == (12, 3, 56, 56)
    assert (x - want).abs().max().item() <= 1 / 255 + 1e-6


@pytest.mark.parametrize("after", [[T.Resize((224, 224)), T.Normalize(CIFAR_MEAN, CIFAR_STD)], [T.Resize(64), T.CenterCrop(56)]])
def test_a_cifar_made_floats_before_its_resize_gives_torchs_floats(after):
    """Fine-tuning scripts often convert first (`ToTensor(), Resize((224, 224))`): torch then
    resizes the floats unrounded, and so does hpuload, natively, bit for bit."""
    ds = in_memory(datasets.CIFAR10, 12, T.Compose([T.ToTensor(), *after]), seed=3)
    x, _ = next(iter(native(ds, batch_size=12)))
    assert torch.equal(x, torch.stack([ds[i][0] for i in range(12)]))


def mnist_like(cls, n, transform=None, seed=0):
    """A torchvision `cls` of the MNIST family holding `n` random 28x28 grey images."""
    g = torch.Generator().manual_seed(seed)
    ds = cls.__new__(cls)
    ds.root, ds.train, ds.transform, ds.target_transform, ds.transforms = "/nowhere", True, transform, None, None
    ds.data = torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=g)
    ds.targets = torch.randint(0, 10, (n,), generator=g)
    return ds


def test_mnist_made_floats_before_its_resize_gives_torchs_floats_in_one_channel():
    """`ToTensor(), Resize([32, 32]), Normalize([0.5], [0.5])` (LeNet scripts' order): the grey
    floats resized unrounded, natively, bit for bit, `[N, 1, 32, 32]`."""
    tf = T.Compose([T.ToTensor(), T.Resize([32, 32]), T.Normalize([0.5], [0.5])])
    ds = mnist_like(datasets.MNIST, 12, tf)
    x, _ = next(iter(native(ds, batch_size=12)))
    assert x.shape == (12, 1, 32, 32)
    assert torch.equal(x, torch.stack([ds[i][0] for i in range(12)]))


@pytest.mark.parametrize("cls", [datasets.MNIST, datasets.FashionMNIST, datasets.KMNIST])
def test_mnists_grey_images_come_out_with_one_channel_as_the_dataset_gives_them(cls):
    # pytorch/examples' MNIST transform.
    tf = T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))])
    ds = mnist_like(cls, 40, tf)
    loader = native(ds, batch_size=16, num_workers=2)
    xs, ys = zip(*loader)
    # One channel written as one: contiguous, as torch's stacked batch (`view(-1)` works).
    assert all(b.is_contiguous() and b.view(-1).numel() == b.numel() for b in xs)
    x, y = torch.cat(xs), torch.cat(ys)
    want = [ds[i] for i in range(len(ds))]
    assert x.shape == (40, 1, 28, 28)
    assert torch.equal(x, torch.stack([w[0] for w in want]))
    assert y.tolist() == [w[1] for w in want]


class ViewGenerator:
    """SimCLR's two views of each image (the shape of the `ContrastiveLearningViewGenerator`
    its STL10 scripts use)."""

    def __init__(self, base_transform, n_views=2):
        self.base_transform, self.n_views = base_transform, n_views

    def __call__(self, x):
        return [self.base_transform(x) for _ in range(self.n_views)]


def test_stl10s_unlabeled_images_in_simclrs_two_views_run_natively_with_their_labels():
    base = T.Compose(
        [
            T.RandomResizedCrop(96),
            T.RandomHorizontalFlip(),
            T.RandomApply([T.ColorJitter(0.8, 0.8, 0.8, 0.2)], p=0.8),
            T.RandomGrayscale(p=0.2),
            T.GaussianBlur(kernel_size=9),
            T.ToTensor(),
        ]
    )
    ds = in_memory(datasets.STL10, 24, ViewGenerator(base), size=96, seed=2)
    loader = native(ds, batch_size=8, shuffle=True, drop_last=True, num_workers=2)
    labels = []
    for views, y in loader:
        assert isinstance(views, list) and len(views) == 2
        assert all(v.shape == (8, 3, 96, 96) and v.dtype == torch.float32 for v in views)
        assert not torch.equal(views[0], views[1])
        labels += y.tolist()
    assert sorted(labels) == sorted(int(v) for v in ds.labels) and -1 in labels


def test_qmnist_gives_its_class_labels_and_grey_images_as_its_own_getitem():
    tf = T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))])
    ds = mnist_like(datasets.QMNIST, 40, tf, seed=3)
    # QMNIST's eight numbers per image, the class first.
    ds.targets = torch.stack([ds.targets, *(torch.arange(40),) * 7], dim=1)
    ds.compat = True
    x, y = (torch.cat(part) for part in zip(*native(ds, batch_size=16)))
    want = [ds[i] for i in range(len(ds))]
    assert x.shape == (40, 1, 28, 28) and torch.equal(x, torch.stack([w[0] for w in want]))
    assert y.tolist() == [w[1] for w in want]
    ds.compat = False  # the whole row as the target: the dataset's own loader
    with pytest.warns(FallbackWarning):
        DataLoader(ds, batch_size=4)


def test_a_padded_random_crop_of_mnist_is_torchvisions_at_the_loaders_offsets():
    tf = T.Compose([T.RandomCrop(28, padding=2), T.PILToTensor()])
    ds = mnist_like(datasets.MNIST, 32, tf, seed=1)
    loader = native(ds, batch_size=32, shuffle=True, seed=4)
    x, _, indices = first_batch(loader)
    assert x.shape == (32, 1, 28, 28)
    for slot, index in enumerate(indices):
        (top, left, _, _), _ = loader._core.sample_params(0, index, 28, 28)
        padded = F.pad(Image.fromarray(ds.data[index].numpy(), mode="L"), 2)
        assert torch.equal(x[slot], F.pil_to_tensor(F.crop(padded, int(top) + 2, int(left) + 2, 28, 28)))


@pytest.mark.parametrize(
    "tf",
    [
        T.Compose([T.Grayscale(3), T.ToTensor()]),
        T.Compose([T.ToTensor(), T.Normalize((0.5, 0.4, 0.3), (0.2, 0.2, 0.2))]),
    ],
    ids=["three_channels", "rgb_normalize"],
)
def test_what_would_differ_on_grey_images_falls_back_naming_it(tf):
    ds = mnist_like(datasets.MNIST, 8, tf)
    with pytest.warns(FallbackWarning, match="grey"):
        DataLoader(ds, batch_size=4)


@pytest.mark.parametrize("flavour", [T, v2])
def test_pixel_ops_before_any_crop_run_natively_on_the_images_whole(flavour):
    """The images are all one size: a transform that starts with a pixel op runs as if a crop
    to that size came first (torchvision computes the same: the crop keeps the image)."""
    to_float = [flavour.ToTensor()] if flavour is T else [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
    tf = flavour.Compose([flavour.Grayscale(3), flavour.RandomInvert(p=1.0), *to_float])
    ds = in_memory(datasets.CIFAR10, 20, tf, seed=6)
    x, _ = next(iter(native(ds, batch_size=20)))
    assert torch.equal(x, torch.stack([ds[i][0] for i in range(20)]))


def test_labels_and_images_changed_between_epochs_are_read_from_the_next_epoch():
    """Noisy-label methods relabel CIFAR between epochs (`dataset.targets = corrected`), and
    some change its images: torch's loader, starting its workers anew each epoch, reads them;
    so does hpuload (it copied them once at the build, and kept them, before)."""
    ds = in_memory(datasets.CIFAR10, 12, T.PILToTensor(), seed=4)
    loader = native(ds, batch_size=4, num_workers=2)
    first = [(x.clone(), y.clone()) for x, y in loader]
    ds.targets = [(t + 1) % 10 for t in ds.targets]
    ds.data[3] = 255 - ds.data[3]
    second = [(x.clone(), y.clone()) for x, y in loader]
    want = list(torch.utils.data.DataLoader(ds, batch_size=4))
    assert not torch.equal(first[0][1], want[0][1])
    for (x, y), (wx, wy) in zip(second, want):
        assert torch.equal(x, wx) and torch.equal(y, wy)
    # The images alone, in place (their CRC, checked while the epoch starts).
    ds.data[7, :5] = 0
    third = [(x.clone(), y.clone()) for x, y in loader]
    want = list(torch.utils.data.DataLoader(ds, batch_size=4))
    assert not torch.equal(second[1][0], want[1][0])
    for (x, y), (wx, wy) in zip(third, want):
        assert torch.equal(x, wx) and torch.equal(y, wy)


def _convert_to_rgb(image):
    return image.convert("RGB")


def test_a_conversion_to_rgb_of_mnists_grey_images_is_not_taken_for_nothing():
    """On RGB images a step that converts to RGB changes nothing and runs as nothing; on
    MNIST's grey images it makes three channels, so there it goes to torch's loader, which
    gives them, while a step that changes nothing at all still runs natively."""
    ds = mnist_like(datasets.MNIST, 8, T.Compose([_convert_to_rgb, T.ToTensor()]))
    with pytest.warns(FallbackWarning, match="grey"):
        loader = DataLoader(ds, batch_size=4)
    assert next(iter(loader))[0].shape == (4, 3, 28, 28)
    ds = mnist_like(datasets.MNIST, 8, T.Compose([T.CenterCrop(20), T.Lambda(lambda x: x), T.ToTensor()]))
    x, _ = next(iter(native(ds, batch_size=8)))
    assert torch.equal(x, torch.stack([ds[i][0] for i in range(8)]))
