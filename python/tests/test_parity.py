"""Parity with torchvision: the same crop windows and flips as the loader chose, applied by
torchvision to the same files, give the same pixels.

On the CPU backend everything hpuload computes (crop, antialiased bilinear resize, flip,
to-float, normalize) is within one u8 level of torchvision; lossless PNG inputs show it with
nothing else in the way. Baseline JPEGs decode to exactly Pillow's pixels (libjpeg-turbo's
integers), so they add nothing to that. The emulated
media engine ("auto") resamples in YCbCr as hardware does; it is held to a PSNR floor."""

import math
from pathlib import Path
import warnings

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as F
from PIL import Image, ImageFilter
from torchvision import datasets
from torchvision import transforms as T
from torchvision.transforms import v2

from hpuload.torch import DataLoader, FallbackWarning, PythonTailWarning

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def first_batch(loader):
    it = iter(loader)
    x, y = next(it)
    indices = list(loader.last_indices)
    it.close()
    return x, y, indices


def reference_u8(loader, dataset, index, epoch=0, size=224):
    """torchvision's pixels for sample `index` with the loader's own crop window and flip."""
    img = Image.open(dataset.samples[index][0]).convert("RGB")
    (top, left, h, w), flip = loader._core.sample_params(epoch, index, img.width, img.height)
    assert (top, left, h, w) == tuple(float(int(v)) for v in (top, left, h, w)), "integer window"
    out = F.resized_crop(img, int(top), int(left), int(h), int(w), [size, size], antialias=True)
    if flip:
        out = F.hflip(out)
    return F.pil_to_tensor(out)


@pytest.mark.parametrize("flavour", ["v1", "v2"])
def test_random_resized_crop_matches_torchvision_within_one_level_on_png(png_folder, flavour):
    if flavour == "v1":
        tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])
    else:
        tf = v2.Compose([v2.RandomResizedCrop(224), v2.RandomHorizontalFlip(), v2.PILToTensor()])
    ds = datasets.ImageFolder(png_folder, tf)
    loader = DataLoader(ds, batch_size=12, shuffle=True, backend="cpu", seed=11)
    x, _, indices = first_batch(loader)
    assert x.dtype == torch.uint8 and x.shape == (12, 3, 224, 224)
    flips = 0
    for slot, index in enumerate(indices):
        ref = reference_u8(loader, ds, index)
        diff = (x[slot].int() - ref.int()).abs().max().item()
        assert diff <= 1, f"sample {index}: {diff} levels from torchvision"
        flips += int(loader._core.sample_params(0, index, *Image.open(ds.samples[index][0]).size)[1])
    assert 0 < flips < 12, "the test saw both flipped and unflipped samples"


def test_normalized_output_is_within_one_u8_level_of_torchvision_on_png(png_folder):
    tf = T.Compose([T.RandomResizedCrop(160), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
    ds = datasets.ImageFolder(png_folder, tf)
    loader = DataLoader(ds, batch_size=12, backend="cpu", seed=4)
    x, _, indices = first_batch(loader)
    assert x.dtype == torch.float32 and x.shape == (12, 3, 160, 160)
    mean = torch.tensor(MEAN).view(3, 1, 1)
    std = torch.tensor(STD).view(3, 1, 1)
    for slot, index in enumerate(indices):
        ref = F.normalize(reference_u8(loader, ds, index, size=160).float() / 255, MEAN, STD)
        levels = ((x[slot] - ref).abs() * std * 255).max().item()
        assert levels <= 1.0 + 1e-3, f"sample {index}: {levels:.3f} u8 levels apart"
        # And the values are torchvision's arithmetic, not an approximation of it.
        assert torch.allclose(x[slot] * std + mean, ref * std + mean, atol=1 / 255 + 1e-6)


def test_eval_pipeline_matches_torchvision_transform_output_on_png(png_folder):
    tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
    ds = datasets.ImageFolder(png_folder, tf)
    loader = DataLoader(ds, batch_size=12, backend="cpu")
    x, _, indices = first_batch(loader)
    assert indices == list(range(12)), "no shuffle: dataset order"
    for i in range(12):
        diff = (x[i].int() - ds[i][0].int()).abs().max().item()
        assert diff <= 1, f"sample {i}: {diff} levels from torchvision"


def test_the_references_tensor_backend_runs_natively_with_torchvisions_tensor_kernels_bit_for_bit(png_folder):
    """The classification reference's `--backend tensor` train preset converts first
    (`PILToTensor`), then crops, resizes and flips the uint8 tensor: hpuload runs it whole,
    no step in Python, each sample bit for bit torchvision's with the loader's window and flip
    (v1's resize casts the tensor to float, interpolates with torch's float kernel and rounds:
    torch's uint8 kernel, v2's, is one level off in about a sixth of the values)."""
    tf = T.Compose(
        [
            T.PILToTensor(),
            T.RandomResizedCrop(96, antialias=True),
            T.RandomHorizontalFlip(0.5),
            T.ConvertImageDtype(torch.float),
            T.Normalize(MEAN, STD),
        ]
    )
    ds = datasets.ImageFolder(png_folder, tf)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader = DataLoader(ds, batch_size=12, shuffle=True, backend="cpu", seed=5)
    x, _, indices = first_batch(loader)
    assert x.shape == (12, 3, 96, 96) and x.dtype == torch.float32
    flips = 0
    for slot, index in enumerate(indices):
        tensor = F.pil_to_tensor(Image.open(ds.samples[index][0]).convert("RGB"))
        (top, left, h, w), flip = loader._core.sample_params(0, index, tensor.shape[2], tensor.shape[1])
        want = F.resized_crop(tensor, int(top), int(left), int(h), int(w), [96, 96], antialias=True)
        want = F.normalize(F.convert_image_dtype(F.hflip(want) if flip else want, torch.float), MEAN, STD)
        assert torch.equal(x[slot], want), f"sample {index}: {(x[slot] - want).abs().max().item()} apart"
        flips += int(flip)
    assert 0 < flips < 12


def _gives_the_datasets_bytes(ds, what) -> None:
    """The first batch of `ds` through the drop-in on the CPU path, natively: every sample is
    the dataset's own, byte for byte."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=6, backend="cpu")
    x, _, indices = first_batch(loader)
    for slot, i in enumerate(indices):
        want = ds[i][0]
        assert torch.equal(x[slot], want), (what, i, (x[slot].int() - want.int()).abs().max().item())


@pytest.mark.parametrize("interpolation", [T.InterpolationMode.BILINEAR, T.InterpolationMode.BICUBIC], ids=["bilinear", "bicubic"])
@pytest.mark.parametrize("flavour", ["v1", "v2"])
def test_a_uint8_tensors_resize_and_center_crop_give_torchvisions_bytes(png_folder, flavour, interpolation):
    """On a uint8 tensor v1 resizes in float (torch's float kernel, then rounded) and v2 with
    torch's uint8 kernel; a centre crop of the resize is those pixels of the whole resize
    (torch's weights at the whole resize's precision). Every byte is torchvision's, for
    shorter-side and fixed sizes, shrinking and enlarging."""
    M = T if flavour == "v1" else v2
    first = T.PILToTensor() if flavour == "v1" else v2.ToImage()
    for resize, crop in ((97, 48), (256, 224), ((300, 41), (299, 40)), ((512, 384), None)):
        steps = [first, M.Resize(resize, interpolation=interpolation)] + ([M.CenterCrop(crop)] if crop else [])
        _gives_the_datasets_bytes(datasets.ImageFolder(png_folder, M.Compose(steps)), (resize, crop))


def test_v2_resizes_without_antialiasing_give_torchs_uint8_bytes_and_v1s_fall_back(png_folder, tmp_path):
    """`antialias=False` on a uint8 tensor: v2's `Resize` (shorter side with a centre crop,
    and `(h, w)`, shrinking and enlarging), `RandomResizedCrop` and `RandomResize` run
    torch's uint8 kernel without antialiasing (two taps, 16-bit weights, the pass across
    rounded first): hpuload gives its bytes. v1 interpolates in float there, which hpuload
    does not reproduce bit for bit: it falls back, saying why."""
    from torchvision.transforms.v2.functional._geometry import _do_native_uint8_resize_on_cpu

    if not _do_native_uint8_resize_on_cpu(v2.InterpolationMode.BILINEAR):
        pytest.skip("torch has no uint8 bilinear kernel on this CPU")
    for resize, crop in ((97, 48), ((300, 41), None), ((512, 384), None), (256, 224)):
        steps = [v2.ToImage(), v2.Resize(resize, antialias=False)] + ([v2.CenterCrop(crop)] if crop else [])
        _gives_the_datasets_bytes(datasets.ImageFolder(png_folder, v2.Compose(steps)), (resize, crop))
    # The loader's own crop windows, cut then resized without antialiasing.
    ds = datasets.ImageFolder(png_folder, v2.Compose([v2.ToImage(), v2.RandomResizedCrop(72, antialias=False)]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=12, shuffle=True, backend="cpu", seed=2)
    x, _, indices = first_batch(loader)
    for slot, index in enumerate(indices):
        tensor = F.pil_to_tensor(Image.open(ds.samples[index][0]).convert("RGB"))
        (top, left, h, w), _ = loader._core.sample_params(0, index, tensor.shape[2], tensor.shape[1])
        want = v2.functional.resized_crop(tensor, int(top), int(left), int(h), int(w), [72, 72], antialias=False)
        assert torch.equal(x[slot], want), f"sample {index}"
    ds = datasets.ImageFolder(png_folder, v2.Compose([v2.ToImage(), v2.RandomResize(60, 90, antialias=False), v2.RandomCrop(56)]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        DataLoader(ds, batch_size=4, backend="cpu")
    ds = datasets.ImageFolder(png_folder, T.Compose([T.PILToTensor(), T.Resize(64, antialias=False), T.CenterCrop(64)]))
    with pytest.warns(FallbackWarning, match="antialias=False"):
        loader = DataLoader(ds, batch_size=4, backend="cpu")
    assert type(loader) is not DataLoader


def test_a_weights_preset_evaluates_natively_with_torchvisions_pixels_on_png(png_folder):
    """What the classification reference evaluates pretrained weights with
    (`weights.transforms()`, torchvision's `ImageClassification` preset) runs natively."""
    from torchvision.transforms._presets import ImageClassification

    tf = ImageClassification(crop_size=160, resize_size=176)
    ds = datasets.ImageFolder(png_folder, tf)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=12, backend="cpu")
    x, _, indices = first_batch(loader)
    assert indices == list(range(12)) and x.dtype == torch.float32 and x.shape == (12, 3, 160, 160)
    std = torch.tensor(tf.std).view(3, 1, 1)
    for i in range(12):
        levels = ((x[i] - ds[i][0]).abs() * std * 255).max().item()
        assert levels <= 1.0 + 1e-3, f"sample {i}: {levels:.3f} u8 levels apart"


@pytest.mark.parametrize("flavour", ["v1", "v2"])
def test_tiny_and_thin_images_and_sizes_resize_as_torchvision_on_tensors(tmp_path, flavour):
    """Images from 1x1 to 640x11 resized to sizes from 2 to 400 (a shorter side then a
    centre crop, or `(h, w)` as thin as one row), bilinear and bicubic, on a uint8 tensor:
    torchvision's bytes. (Not one column wide: there torch's float kernel, v1's, repeats the
    first row, which hpuload does not copy.)"""
    sizes = [(1, 1), (1, 7), (7, 1), (2, 3), (5, 300), (300, 5), (17, 19), (640, 11)]
    for i, (w, h) in enumerate(sizes):
        (tmp_path / "a").mkdir(exist_ok=True)
        pixels = torch.randint(0, 256, (h, w, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(i))
        Image.fromarray(pixels.numpy()).save(tmp_path / "a" / f"{i:02d}.png")
    M = T if flavour == "v1" else v2
    first = T.PILToTensor() if flavour == "v1" else v2.ToImage()
    for interpolation in (T.InterpolationMode.BILINEAR, T.InterpolationMode.BICUBIC):
        for size in (2, 5, (1, 9), (400, 3)):
            steps = [first, M.Resize(size, interpolation=interpolation)]
            steps += [M.CenterCrop(size)] if isinstance(size, int) else []
            ds = datasets.ImageFolder(tmp_path, M.Compose(steps))
            with warnings.catch_warnings():
                warnings.simplefilter("error", FallbackWarning)
                got = [x[0] for x, _ in DataLoader(ds, batch_size=1, backend="cpu")]
            for i, image in enumerate(got):
                assert torch.equal(image, ds[i][0]), (interpolation.value, size, sizes[i])


@pytest.mark.parametrize(
    "resize, crop",
    [((256, 240), 224), ((224, 224), (224, 224)), ((250, 300), (200, 180))],
    ids=["crop-inside", "crop-of-the-same-size", "rectangular"],
)
def test_resize_to_a_fixed_size_then_center_crop_matches_torchvision_on_png(png_folder, resize, crop):
    """The Hugging Face example's eval transform (`Resize((224, 224))`, `CenterCrop((224, 224))`),
    and any crop inside a fixed-size resize, run natively with torchvision's pixels."""
    tf = T.Compose([T.Resize(resize), T.CenterCrop(crop), T.PILToTensor()])
    ds = datasets.ImageFolder(png_folder, tf)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=12, backend="cpu")
    x, _, indices = first_batch(loader)
    assert indices == list(range(12))
    assert x.shape[2:] == ds[0][0].shape[1:]
    for i in range(12):
        diff = (x[i].int() - ds[i][0].int()).abs().max().item()
        assert diff <= 1, f"sample {i}: {diff} levels from torchvision"


@pytest.mark.parametrize("size", [(160, 200), (600, 700)], ids=["down", "up"])
def test_the_bilinear_resize_gives_torchvisions_bytes_on_tensors_and_pillows_but_for_rare_levels(png_folder, size):
    """Resampled across, then down, as Pillow and torch's antialiased kernel do (the other
    order was one level off in 16-20% of values)."""
    for on_tensor in (True, False):
        steps = [v2.ToImage(), v2.Resize(size)] if on_tensor else [v2.Resize(size), v2.PILToTensor()]
        ds = datasets.ImageFolder(png_folder, v2.Compose(steps))
        with warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            loader = DataLoader(ds, batch_size=12, backend="cpu")
        x, _, indices = first_batch(loader)
        diff = torch.stack([(x[i].int() - ds[i][0].int()).abs() for i in indices])
        assert diff.max() <= 1
        # Pillow's 22-bit weights round a few sums otherwise than the 16-bit ones.
        assert diff.float().mean() == 0.0, (on_tensor, diff.float().mean())


@pytest.mark.parametrize("resize", [(250, 300), None], ids=["after-a-fixed-resize", "of-the-image"])
def test_random_crop_matches_torchvision_at_the_offset_the_loader_drew(png_folder, resize):
    """`RandomCrop(size)` (the video reference's crop after `Resize((128, 171))`): with the
    loader's own offset, torchvision's pixels; offsets drawn uniformly per sample."""
    crop = (200, 180) if resize else (96, 80)
    tf = T.Compose(([T.Resize(resize)] if resize else []) + [T.RandomCrop(crop), T.PILToTensor()])
    ds = datasets.ImageFolder(png_folder, tf)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=12, backend="cpu")
    x, _, indices = first_batch(loader)
    assert x.shape[2:] == crop
    offsets = set()
    for i in indices:
        img = Image.open(ds.samples[i][0]).convert("RGB")
        (top, left, h, w), _ = loader._core.sample_params(0, i, img.width, img.height)
        rh, rw = resize or (img.height, img.width)
        # The window is in source pixels: back to the resized image's integer offset.
        t, l = round(top * rh / img.height), round(left * rw / img.width)
        offsets.add((t, l))
        base = F.resize(img, [rh, rw], antialias=True) if resize else img
        ref = F.pil_to_tensor(F.crop(base, t, l, crop[0], crop[1]))
        diff = (x[indices.index(i)].int() - ref.int()).abs().max().item()
        assert diff <= 1, f"sample {i}: {diff} levels from torchvision"
    assert len(offsets) > 6, f"offsets {offsets}"


def test_random_resize_then_random_crop_matches_torchvision_v2_at_the_size_and_offset_drawn(png_folder):
    """v2's `RandomResize(min, max)` (the short-side scale jitter of video recipes) then
    `RandomCrop`: with the loader's own shorter side and offset, torchvision's pixels; sides
    drawn from the whole range."""
    v2 = pytest.importorskip("torchvision.transforms.v2")
    crop = (96, 80)
    tf = v2.Compose([v2.RandomResize(100, 140), v2.RandomCrop(crop), v2.PILToTensor()])
    ds = datasets.ImageFolder(png_folder, tf)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=12, backend="cpu")
    x, _, indices = first_batch(loader)
    assert x.shape[2:] == crop
    sides = set()
    for i in indices:
        img = Image.open(ds.samples[i][0]).convert("RGB")
        (top, left, h, w), _ = loader._core.sample_params(0, i, img.width, img.height)
        # The window is crop / scale in source pixels: it names the shorter side drawn.
        side = round(crop[0] * img.height / h) if img.height <= img.width else round(crop[1] * img.width / w)
        assert 100 <= side < 140, side
        sides.add(side)
        base = F.resize(img, [side], antialias=True)
        t, l = round(top * base.height / img.height), round(left * base.width / img.width)
        ref = F.pil_to_tensor(F.crop(base, t, l, crop[0], crop[1]))
        diff = (x[indices.index(i)].int() - ref.int()).abs().max().item()
        assert diff <= 1, f"sample {i}: {diff} levels from torchvision"
    assert len(sides) > 6, f"sides {sides}"


@pytest.mark.parametrize("flavour", ["v1", "v2"])
def test_a_random_crop_with_padding_is_torchvisions_at_the_offset_the_loader_drew(png_folder, tmp_path, flavour):
    """`RandomCrop(size, padding, fill)` (CIFAR's recipe, on images a little larger than the
    crop): the image padded with the fill, then cut at the loader's offset of the padded
    image; natively, on the CPU path."""
    for path, _ in datasets.ImageFolder(png_folder).samples:
        out = tmp_path / Path(path).parent.name / Path(path).name
        out.parent.mkdir(exist_ok=True)
        Image.open(path).convert("RGB").crop((0, 0, 43, 41)).save(out)
    M = T if flavour == "v1" else v2
    tf = M.Compose([M.RandomCrop(40, padding=(4, 2), fill=(10, 20, 30)), M.PILToTensor()])
    ds = datasets.ImageFolder(tmp_path, tf)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        warnings.simplefilter("error", PythonTailWarning)
        loader = DataLoader(ds, batch_size=12, shuffle=True, backend="auto", seed=2)
    x, _, indices = first_batch(loader)
    edges = 0
    for slot, index in enumerate(indices):
        image = Image.open(ds.samples[index][0]).convert("RGB")
        # The loader's window in the image's pixels; its corner in the padded image.
        (top, left, h, w), _ = loader._core.sample_params(0, index, image.width, image.height)
        assert (h, w) == (40, 40) and top >= -2 and left >= -4
        padded = F.pad(image, [4, 2], fill=(10, 20, 30))
        want = F.pil_to_tensor(F.crop(padded, int(top) + 2, int(left) + 4, 40, 40))
        assert torch.equal(x[slot], want), f"sample {index} at ({top}, {left})"
        edges += int(top < 0 or left < 0 or top + 40 > image.height or left + 40 > image.width)
    assert edges > 0, "some window showed the padding"


def test_pad_if_needed_and_a_center_crop_larger_than_the_image_pad_as_torchvision(png_folder):
    sizes = {Image.open(p).size for p, _ in datasets.ImageFolder(png_folder).samples}
    big = max(max(s) for s in sizes) + 7
    for tf in (
        T.Compose([T.CenterCrop(big), T.PILToTensor()]),
        T.Compose([T.RandomCrop(big, pad_if_needed=True), T.PILToTensor()]),
    ):
        ds = datasets.ImageFolder(png_folder, tf)
        with warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            loader = DataLoader(ds, batch_size=4, backend="cpu")
        got = torch.cat([x for x, _ in loader])
        if isinstance(tf.transforms[0], T.CenterCrop):
            want = torch.stack([ds[i][0] for i in range(len(ds))])
            assert torch.equal(got, want)
        else:
            # A random offset of the padded image: the image itself, uncut, somewhere in it.
            for i, out in enumerate(got):
                w, h = Image.open(ds.samples[i][0]).size
                (top, left, _, _), _ = loader._core.sample_params(0, i, w, h)
                inner = out[:, int(-top) : int(-top) + h, int(-left) : int(-left) + w]
                assert torch.equal(inner, F.pil_to_tensor(Image.open(ds.samples[i][0]).convert("RGB")))
                assert int(out.sum()) == int(inner.sum()), "black around it"


@pytest.mark.parametrize("flavour", ["v1", "v2"])
@pytest.mark.parametrize("mode", ["edge", "reflect", "symmetric"])
def test_a_random_crop_padded_in_each_mode_is_torchvisions_at_the_offset_the_loader_drew(
    png_folder, tmp_path, flavour, mode
):
    """`RandomCrop(size, padding, pad_if_needed, padding_mode)` with the image's own pixels in
    the padding (CIFAR recipes' `padding_mode="reflect"`): NumPy's padding of the PIL image as
    torchvision pads it, then its crop at the loader's offset; natively. Cropped larger than
    the padded image, `pad_if_needed` pads again: v1 mirrors the padded image, v2 pads once."""
    for path, _ in datasets.ImageFolder(png_folder).samples:
        out = tmp_path / Path(path).parent.name / Path(path).name
        out.parent.mkdir(exist_ok=True)
        Image.open(path).convert("RGB").crop((0, 0, 23, 21)).save(out)
    M = T if flavour == "v1" else v2
    for crop, padding, needed in ((24, (4, 2), False), (33, (3, 1), True)):
        tf = M.Compose([M.RandomCrop(crop, padding=padding, pad_if_needed=needed, padding_mode=mode), M.PILToTensor()])
        ds = datasets.ImageFolder(tmp_path, tf)
        with warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            warnings.simplefilter("error", PythonTailWarning)
            loader = DataLoader(ds, batch_size=12, shuffle=True, seed=3)
        x, _, indices = first_batch(loader)
        for slot, index in enumerate(indices):
            image = Image.open(ds.samples[index][0]).convert("RGB")
            (top, left, h, w), _ = loader._core.sample_params(0, index, image.width, image.height)
            assert (h, w) == (crop, crop)
            pad_x, pad_y = padding
            extra_x = max(0, crop - image.width - 2 * pad_x) if needed else 0
            extra_y = max(0, crop - image.height - 2 * pad_y) if needed else 0
            if flavour == "v1":
                padded = F.pad(image, [pad_x, pad_y], padding_mode=mode)
                padded = F.pad(padded, [extra_x, extra_y], padding_mode=mode)
            else:
                padded = v2.functional.pad(image, [pad_x + extra_x, pad_y + extra_y], padding_mode=mode)
            corner = (int(top) + pad_y + extra_y, int(left) + pad_x + extra_x)
            want = F.pil_to_tensor(F.crop(padded, *corner, crop, crop))
            assert torch.equal(x[slot], want), f"{crop}: sample {index} at ({top}, {left})"


def test_a_center_crop_larger_than_the_fixed_resize_falls_back_naming_it(png_folder):
    ds = datasets.ImageFolder(png_folder, T.Compose([T.Resize((64, 64)), T.CenterCrop(80), T.ToTensor()]))
    with pytest.warns(FallbackWarning, match="larger than the resize"):
        loader = DataLoader(ds, batch_size=4)
    assert x_shape(loader) == (4, 3, 80, 80)


def x_shape(loader):
    return tuple(next(iter(loader))[0].shape)


@pytest.mark.parametrize("geometry", ["eval", "train"])
def test_baseline_jpegs_decode_to_exactly_pillows_pixels(jpeg_folder, png_folder, geometry):
    """The CPU path's output for each JPEG equals, bit for bit, its output for a PNG of Pillow's
    decode of that JPEG: the decoder gives libjpeg-turbo's pixels, and decoding only the
    crop's region (the train geometry's windows) changes none of them."""
    if geometry == "eval":
        tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
    else:
        tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])
    jpegs, pngs = datasets.ImageFolder(jpeg_folder, tf), datasets.ImageFolder(png_folder, tf)
    stems = [Path(p).stem for p, _ in pngs.samples]
    assert stems == [Path(p).stem for p, _ in jpegs.samples[: len(stems)]], "same files, same order"
    n = len(stems)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        from_jpegs = DataLoader(torch.utils.data.Subset(jpegs, range(n)), batch_size=n, backend="cpu", seed=9)
        from_pngs = DataLoader(pngs, batch_size=n, backend="cpu", seed=9)
    x_jpeg, _, _ = first_batch(from_jpegs)
    x_png, _, _ = first_batch(from_pngs)
    assert torch.equal(x_jpeg, x_png)


def test_images_made_grey_before_the_crop_run_on_the_media_engine_close_to_torchvision(jpeg_folder):
    """`Grayscale()` first (Pillow's `L`, one channel): the engine resizes in colour and makes
    the output grey after, within its floor of torchvision's grey-then-resize."""
    tf = T.Compose([T.Grayscale(), T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])
    ds = datasets.ImageFolder(jpeg_folder, tf)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=16, shuffle=True, backend="hw", seed=4)
    x, _, indices = first_batch(loader)
    assert x.shape == (16, 1, 224, 224) and loader.report()["hw_samples"] >= 16
    for slot, index in enumerate(indices):
        img = Image.open(ds.samples[index][0]).convert("L")
        (top, left, h, w), flip = loader._core.sample_params(0, index, img.width, img.height)
        ref = F.resized_crop(img, int(top), int(left), int(h), int(w), [224, 224], antialias=True)
        ref = F.pil_to_tensor(F.hflip(ref) if flip else ref).float()
        mse = ((x[slot].float() - ref) ** 2).mean().item()
        psnr = 10 * math.log10(255**2 / max(mse, 1e-9))
        assert psnr >= 40, f"sample {index}: {psnr:.1f} dB"


def test_media_engine_output_is_close_to_torchvision_with_the_same_crop_windows(jpeg_folder):
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])
    ds = datasets.ImageFolder(jpeg_folder, tf)
    loader = DataLoader(ds, batch_size=16, shuffle=True, backend="hw", seed=2)
    x, _, indices = first_batch(loader)
    assert loader.report()["hw_samples"] >= 16
    for slot, index in enumerate(indices):
        ref = reference_u8(loader, ds, index).float()
        mse = ((x[slot].float() - ref) ** 2).mean().item()
        psnr = 10 * math.log10(255**2 / max(mse, 1e-9))
        assert psnr >= 40, f"sample {index}: {psnr:.1f} dB"


def test_labels_and_class_order_are_the_image_folders(jpeg_folder):
    ds = datasets.ImageFolder(jpeg_folder, T.Compose([T.CenterCrop(64), T.ToTensor()]))
    loader = DataLoader(ds, batch_size=41)
    x, y = next(iter(loader))
    assert y.dtype == torch.int64
    assert y.tolist() == [t for _, t in ds.samples]
    assert loader.classes == ds.classes


def test_a_v2_recipe_with_nested_compose_and_to_image_is_taken_and_matches(png_folder):
    tf = v2.Compose(
        [
            v2.Compose([v2.ToImage(), v2.ToDtype(torch.uint8, scale=True)]),
            v2.Resize(72, antialias=True),
            v2.CenterCrop(64),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(MEAN, STD),
            v2.ToPureTensor(),
        ]
    )
    ds = datasets.ImageFolder(png_folder, tf)
    loader = DataLoader(ds, batch_size=12, backend="cpu")
    assert isinstance(loader, DataLoader), "taken by the fast path"
    x, _, _ = first_batch(loader)
    std = torch.tensor(STD).view(3, 1, 1)
    for i in range(12):
        # torchvision resizes the uint8 tensor itself here (not PIL): still within one level.
        levels = ((x[i] - ds[i][0]).abs() * std * 255).max().item()
        assert levels <= 1.0 + 1e-3, f"sample {i}: {levels:.3f} levels"


@pytest.mark.parametrize("crop, size", [(120, 64), (31, 77)])
def test_a_centre_crop_then_a_resize_runs_on_the_media_engine_close_to_torchvision(jpeg_folder, crop, size):
    """CelebA's `CenterCrop(148), Resize(64)` shape of pipeline: a window cut first, then
    resized (shrunk, or enlarged), which the media engine decodes, crops and resizes in one
    go, within its PSNR floor of torchvision's bytes."""
    tf = T.Compose([T.CenterCrop(crop), T.Resize(size), T.PILToTensor()])
    ds = datasets.ImageFolder(jpeg_folder, tf)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=16, backend="hw", seed=2)
    x, _, indices = first_batch(loader)
    assert x.shape == (16, 3, size, size)
    assert loader.report()["hw_samples"] >= 16
    for slot, index in enumerate(indices):
        mse = ((x[slot].float() - ds[index][0].float()) ** 2).mean().item()
        psnr = 10 * math.log10(255**2 / max(mse, 1e-9))
        assert psnr >= 40, f"sample {index}: {psnr:.1f} dB"


@pytest.fixture(scope="module")
def detailed_jpegs(tmp_path_factory) -> Path:
    """Eight photo-sized JPEGs with detail at many scales (stripes rising to a quarter of a
    cycle per pixel, 4x4 blocks of grain, hard edges), as real photographs have and the
    built-in dataset's smooth scenes do not."""
    root = tmp_path_factory.mktemp("detailed")
    rng = np.random.default_rng(7)
    for k in range(8):
        h, w = (600, 800) if k % 2 else (800, 600)
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
        base = 128 + 90 * np.sin(2 * np.pi * (0.02 + 0.25 * xx / w) * xx + k) * np.cos(2 * np.pi * 0.01 * (k + 1) * yy)
        grain = rng.normal(0, 30, (h // 4, w // 4)).repeat(4, 0).repeat(4, 1)
        image = np.stack([base, base + grain, 255 - base], -1)
        image[(xx // 37 + yy // 29) % 2 == 0] *= 0.6
        folder = root / f"c{k % 2}"
        folder.mkdir(exist_ok=True)
        Image.fromarray(np.clip(image, 0, 255).astype(np.uint8)).save(folder / f"{k}.jpg", quality=92)
    return root


@pytest.mark.parametrize("geometry", ["resize", "random_resized_crop"])
def test_a_small_output_of_detailed_photos_on_the_media_engine_is_within_its_floor(detailed_jpegs, geometry):
    """Shrinking photo-sized images to 64 pixels, the engine decodes at a reduced DCT scale,
    whose cut keeps every frequency up to the reduced size's limit, sharper than the resize's
    filter: when it chose the smallest scale with the output's size, these samples came out
    sharper than torchvision's, at 32 dB (real photographs down to 28). It now leaves the
    resize at least 3x to shrink and holds the same 40 dB floor as without DCT scaling."""
    if geometry == "resize":
        tf = T.Compose([T.Resize(64), T.CenterCrop(64), T.PILToTensor()])
    else:
        tf = T.Compose([T.RandomResizedCrop(64, scale=(0.5, 1.0)), T.PILToTensor()])
    ds = datasets.ImageFolder(detailed_jpegs, tf)
    engine = DataLoader(ds, batch_size=8, backend="hw", seed=4)
    cpu = DataLoader(ds, batch_size=8, backend="cpu", seed=4)
    x, _, indices = first_batch(engine)
    report = engine.report()
    assert report["hw_samples"] >= 8 and report["hw_dct_scaled"] >= 2, report
    reference, _, same = first_batch(cpu)
    assert same == indices
    for slot, index in enumerate(indices):
        if geometry == "resize":
            assert torch.equal(reference[slot], ds[index][0]), "the CPU path gives torchvision's bytes"
        mse = ((x[slot].float() - reference[slot].float()) ** 2).mean().item()
        psnr = 10 * math.log10(255**2 / max(mse, 1e-9))
        assert psnr >= 40, f"sample {index}: {psnr:.1f} dB"


def test_a_bicubic_resize_of_bright_texture_on_the_media_engine_is_not_darkened(tmp_path):
    """Near-white texture (levels about 247) shrunk with bicubic on the engine. Bicubic's
    positive weights sum to more than one before its negative lobes subtract; the engine's
    16-bit sums, counted from zero, saturated there for bright samples, so bright areas came
    out 2-3 levels dark on average (36-40 dB; a bright photograph 36 dB, up to 12 levels at a
    pixel). Counted from level 128 they no longer saturate."""
    rng = np.random.default_rng(3)
    for k in range(4):
        folder = tmp_path / f"c{k % 2}"
        folder.mkdir(exist_ok=True)
        h, w = 224 + 16 * k, 303 + 40 * k
        v = np.clip(rng.normal(247, 5, (h, w)), 0, 255)
        image = Image.fromarray(np.stack([v, v - 1, v - 3], -1).astype(np.uint8))
        image.filter(ImageFilter.GaussianBlur(0.7)).save(folder / f"{k}.jpg", quality=90)
    tf = T.Compose([T.Resize((224, 224), interpolation=T.InterpolationMode.BICUBIC), T.PILToTensor()])
    ds = datasets.ImageFolder(tmp_path, tf)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=4, backend="hw")
    x, _, indices = first_batch(loader)
    assert loader.report()["hw_samples"] == 4
    for slot, index in enumerate(indices):
        diff = x[slot].double() - ds[index][0].double()
        psnr = 10 * math.log10(255**2 / max((diff**2).mean().item(), 1e-9))
        assert abs(diff.mean().item()) < 0.1 and psnr >= 50, f"sample {index}: {psnr:.1f} dB, mean {diff.mean():.2f}"


def test_a_bicubic_enlargement_on_the_media_engine_keeps_its_edges(jpeg_folder):
    """`CenterCrop(60), Resize(150, BICUBIC)` on the engine: enlarging, the taps dropped past
    the crop's edges leave the samples next to them a weight above 1.0, which the engine's
    16-bit weights held at 1.0 (the edges came out dark: luma 36-45 dB from torchvision's on
    this set); it computes those samples again from the unrounded weights, and every
    sample's luma is within 45 dB. (Its colour is not held to that floor here: bicubic's
    overshoot at saturated colour edges is clipped per RGB channel by Pillow and in YCbCr by
    the engine.)"""
    tf = T.Compose([T.CenterCrop(60), T.Resize(150, interpolation=T.InterpolationMode.BICUBIC), T.PILToTensor()])
    ds = datasets.ImageFolder(jpeg_folder, tf)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=16, backend="hw", seed=2)
    x, _, indices = first_batch(loader)
    assert loader.report()["hw_samples"] >= 16

    def luma(t):
        return torch.from_numpy(np.asarray(F.to_pil_image(t).convert("YCbCr"))[..., 0].astype("float64"))

    for slot, index in enumerate(indices):
        mse = ((luma(x[slot]) - luma(ds[index][0])) ** 2).mean().item()
        psnr = 10 * math.log10(255**2 / max(mse, 1e-9))
        assert psnr >= 45, f"sample {index}: luma {psnr:.1f} dB"
