"""`ToTensor()` before the resize (the order of many first scripts): torchvision then resizes a
float tensor with torch's float kernel and nothing rounds the values. The drop-in runs it
natively (`resize_floats`) and gives torch's floats bit for bit, normalized or not, flipped or
not, on both backends (such samples take the CPU path)."""

import json
import warnings

import pytest
import torch
from torchvision import datasets
from torchvision import transforms as T
from torchvision.transforms import v2
from torchvision.transforms import functional as F

from hpuload.torch import DataLoader, FallbackWarning, PythonTailWarning

B, C, N = T.InterpolationMode.BILINEAR, T.InterpolationMode.BICUBIC, T.InterpolationMode.NEAREST
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def to_float(M):
    """The conversion to float of flavour `M`: v1's `ToTensor()` (`x / 255`), v2's `ToImage()`
    then `ToDtype(float32, scale=True)` (`x * (1 / 255)`)."""
    return [T.ToTensor()] if M is T else [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]


def cases(M):
    return {
        "resize_short_side_then_centre_crop_normalized": [M.Resize(61), M.CenterCrop((40, 52)), M.Normalize(MEAN, STD)],
        "resize_to_a_size": [M.Resize((37, 53))],
        "resize_up_bicubic": [M.Resize((130, 97), interpolation=C)],
        "resize_bicubic_then_crop_normalized": [M.Resize(50, interpolation=C), M.CenterCrop(44), M.Normalize(MEAN, STD)],
        "resize_nearest": [M.Resize((37, 53), interpolation=N)],
        "flips_after_the_resize": [M.Resize((45, 45)), M.RandomHorizontalFlip(1.0), M.RandomVerticalFlip(1.0), M.Normalize(MEAN, STD)],
        "flip_between_the_resize_and_its_crop": [M.Resize(61), M.RandomHorizontalFlip(1.0), M.CenterCrop(41)],
        "centre_crop_alone": [M.CenterCrop((40, 52)), M.Normalize(MEAN, STD)],
        "normalize_before_the_resize": [M.Normalize(MEAN, STD), M.Resize(61), M.CenterCrop(44)],
        "normalize_before_a_bicubic_resize": [M.Normalize(MEAN, STD), M.Resize((45, 40), interpolation=C)],
        "flips_before_the_resize": [M.RandomHorizontalFlip(1.0), M.RandomVerticalFlip(1.0), M.Resize((37, 53)), M.Normalize(MEAN, STD)],
    }


def native_batches(ds, backend, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        warnings.simplefilter("error", PythonTailWarning)
        loader = DataLoader(ds, batch_size=4, backend=backend, **kw)
    return loader, torch.cat([x for x, _ in loader])


@pytest.mark.parametrize("flavour", ["v1", "v2"])
@pytest.mark.parametrize("case", sorted(cases(T)))
def test_a_resize_after_the_conversion_to_float_gives_torchs_floats_bit_for_bit(png_folder, case, flavour):
    M = T if flavour == "v1" else v2
    ds = datasets.ImageFolder(png_folder, M.Compose([*to_float(M), *cases(M)[case]]))
    _, got = native_batches(ds, "cpu")
    want = torch.stack([ds[i][0] for i in range(len(ds))])
    assert got.dtype == want.dtype == torch.float32 and got.shape == want.shape
    assert torch.equal(got, want), f"{(got != want).float().mean():.2%} of values differ, by up to {(got - want).abs().max():.3g}"


def test_on_the_engine_backend_float_resizes_take_the_cpu_path_with_the_same_floats(jpeg_folder):
    """JPEGs the engine could take: a float resize is the CPU path's, with torch's values."""
    t = T.Compose([T.ToTensor(), T.Resize(61), T.CenterCrop(48), T.Normalize(MEAN, STD)])
    ds = datasets.ImageFolder(jpeg_folder, t)
    _, got = native_batches(ds, "auto")
    want = torch.stack([ds[i][0] for i in range(len(ds))])
    assert torch.equal(got, want)


@pytest.mark.parametrize("flavour", ["v1", "v2"])
def test_a_random_resized_crop_of_floats_is_torchs_resized_crop_at_the_drawn_box(png_folder, flavour):
    """`ToTensor(), RandomResizedCrop(48), RandomHorizontalFlip(), Normalize`: each sample is
    torch's `resized_crop` of the float image at the box hpuload drew (its plan), flipped
    where the plan says, bit for bit; boxes and flips vary."""
    M = T if flavour == "v1" else v2
    t = M.Compose([*to_float(M), M.RandomResizedCrop(48, scale=(0.2, 1.0)), M.RandomHorizontalFlip(), M.Normalize(MEAN, STD)])
    ds = datasets.ImageFolder(png_folder, t)
    loader, got = native_batches(ds, "cpu", seed=11)
    convert = M.Compose([*to_float(M)])
    boxes, flips = set(), set()
    for index, (path, _) in enumerate(ds.samples):
        image = convert(ds.loader(path))
        h, w = image.shape[-2:]
        plan = json.loads(loader._core.sample_plan(0, index, w, h))
        c = plan["crop"]
        box = tuple(int(c[k]) for k in ("top", "left", "height", "width"))
        assert all(float(c[k]) == v for k, v in zip(("top", "left", "height", "width"), box))
        want = F.resized_crop(image, *box, [48, 48], antialias=True)
        flipped = plan.get("flip", False) or "Hflip" in json.dumps(plan.get("ops", []))
        if flipped:
            want = want.flip(-1)
        want = F.normalize(want, MEAN, STD)
        assert torch.equal(got[index], want), f"sample {index}: {(got[index] != want).float().mean():.2%} differ"
        boxes.add(box)
        flips.add(flipped)
    assert len(boxes) > 6 and flips == {False, True}


@pytest.mark.parametrize(
    "steps, reason",
    [
        ([T.ToTensor(), T.Resize(40, antialias=False), T.CenterCrop(32)], "antialias"),
        ([T.ToTensor(), T.RandomRotation(10), T.Resize((32, 32))], "RandomRotation before the crop or resize, on a tensor"),
    ],
)
def test_what_a_float_image_does_beyond_a_resize_and_flips_goes_to_torch_with_its_reason(png_folder, steps, reason):
    ds = datasets.ImageFolder(png_folder, T.Compose(steps))
    with pytest.warns(FallbackWarning, match=reason):
        loader = DataLoader(ds, batch_size=4)
    assert type(loader) is not DataLoader


@pytest.mark.parametrize("flavour", ["v1", "v2"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_resize_of_half_floats_goes_to_torch_which_resamples_in_half_precision(png_folder, flavour, dtype):
    """torch resamples a float16 or bfloat16 image in that type, rounding between its passes;
    hpuload's float passes run in f32 and were a unit in the last place off in most values:
    such a resize falls back, named, and the batches are the Dataset's."""
    M = T if flavour == "v1" else v2
    convert = [T.PILToTensor(), T.ConvertImageDtype(dtype)] if M is T else [v2.ToImage(), v2.ToDtype(dtype, scale=True)]
    for geometry in (M.Resize((37, 53)), M.RandomResizedCrop(41, scale=(1, 1), ratio=(1, 1))):
        ds = datasets.ImageFolder(png_folder, M.Compose([*convert, geometry]))
        with pytest.warns(FallbackWarning, match="half precision"):
            loader = DataLoader(ds, batch_size=4, shuffle=False)
        got = torch.cat([x for x, _ in loader])
        assert torch.equal(got, torch.stack([ds[i][0] for i in range(len(ds))]))


def test_a_pixel_op_after_the_float_resize_runs_in_python_on_the_native_floats(png_folder):
    """torch's float kernels do not round, hpuload's pixel ops are byte ones: a `ColorJitter`
    after the float resize is a Python tail (named) on the natively resized floats, and the
    batches are the Dataset's."""
    t = T.Compose([T.ToTensor(), T.Resize((32, 32)), T.ColorJitter(brightness=(0.6, 0.6)), T.Normalize(MEAN, STD)])
    ds = datasets.ImageFolder(png_folder, t)
    with pytest.warns(PythonTailWarning, match="ColorJitter, Normalize in Python, after the native ToTensor, Resize"):
        loader = DataLoader(ds, batch_size=4, backend="cpu")
    got = torch.cat([x for x, _ in loader])
    assert torch.equal(got, torch.stack([ds[i][0] for i in range(len(ds))]))


@pytest.mark.parametrize("flavour", ["v1", "v2"])
def test_antialias_none_on_a_tensor_is_no_antialiasing_as_torchvision_reads_it(png_folder, flavour):
    """torchvision's functionals read `antialias=None` as False on tensors (and ignore it on
    PIL images): on a uint8 tensor the resize is torch's non-antialiased one (natively where
    hpuload has its kernel, else torch's loader), on a float one torch's loader; on a PIL
    image the antialiased one, natively. Never the antialiased resize on a tensor."""
    M = T if flavour == "v1" else v2
    for steps in (
        [M.PILToTensor(), M.Resize((37, 29), antialias=None)],
        [*to_float(M), M.Resize((37, 29), antialias=None)],
        [M.Resize((37, 29), antialias=None), M.PILToTensor()],
    ):
        ds = datasets.ImageFolder(png_folder, M.Compose(steps))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FallbackWarning)
            got = torch.cat([x for x, _ in DataLoader(ds, batch_size=4, backend="cpu")])
        want = torch.stack([ds[i][0] for i in range(len(ds))])
        assert torch.equal(got, want), f"{[type(s).__name__ for s in steps]}: {(got != want).float().mean():.2%} differ"
