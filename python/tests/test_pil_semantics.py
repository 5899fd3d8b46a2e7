"""What torchvision's transforms do to a PIL image (what `ImageFolder` hands them) is Pillow's
arithmetic, not its tensor kernels': nearest neighbour samples under the output pixel's centre,
rotations and affine warps are `Image.rotate` / `Image.transform` (bilinear clamped at the
edges, nearest positions stepped in f64 or 16.16 fixed point), the hue moves through
Pillow's byte HSV, contrast and saturation are `ImageEnhance`'s and grey is `convert("L")`. The drop-in gives the same bytes. Each transform here has its random
parameters pinned (a degenerate range, p=1), so torchvision's own output is the reference."""

import warnings

import pytest
import torch
from torchvision import datasets
from torchvision import transforms as T
from torchvision.transforms import v2

from hpuload.torch import DataLoader, FallbackWarning, PythonTailWarning

N, B, C = T.InterpolationMode.NEAREST, T.InterpolationMode.BILINEAR, T.InterpolationMode.BICUBIC
L = T.InterpolationMode.LANCZOS
BOX, HAMMING = T.InterpolationMode.BOX, T.InterpolationMode.HAMMING
CROP = (40, 52)


def cases(M):
    """Transforms of module `M` (v1 or v2) on PIL images, by what they pin."""
    crop = M.CenterCrop(CROP)
    return {
        "resize_nearest": [M.Resize((37, 53), interpolation=N)],
        "resize_short_side_nearest_then_crop": [M.Resize(61, interpolation=N), M.CenterCrop(40)],
        "resize_nearest_up": [M.Resize((130, 97), interpolation=N)],
        # Pillow's Lanczos (diffusers' scripts' default), shrinking and enlarging.
        "resize_lanczos": [M.Resize((37, 53), interpolation=L)],
        "resize_short_side_lanczos_then_crop": [M.Resize(61, interpolation=L), M.CenterCrop(40)],
        "resize_lanczos_up": [M.Resize((130, 97), interpolation=L)],
        # Pillow's box (the mean of the pixels an output pixel covers) and Hamming filters.
        "resize_box": [M.Resize((37, 53), interpolation=BOX)],
        "resize_short_side_box_then_crop": [M.Resize(61, interpolation=BOX), M.CenterCrop(40)],
        "resize_box_up": [M.Resize((130, 97), interpolation=BOX)],
        "resize_hamming": [M.Resize((37, 53), interpolation=HAMMING)],
        "resize_short_side_hamming_then_crop": [M.Resize(61, interpolation=HAMMING), M.CenterCrop(40)],
        "resize_hamming_up": [M.Resize((130, 97), interpolation=HAMMING)],
        "rotate_nearest_about_a_point": [crop, M.RandomRotation((20, 20), center=(5, 9))],
        "rotate_nearest": [crop, M.RandomRotation((-33, -33))],
        "rotate_bilinear_with_fill": [crop, M.RandomRotation((45, 45), interpolation=B, fill=(10, 200, 30))],
        "affine_nearest": [crop, M.RandomAffine(degrees=(10, 10), scale=(1.25, 1.25), shear=(5, 5, -3, -3))],
        "affine_bilinear_with_fill": [crop, M.RandomAffine(degrees=(-7, -7), scale=(0.75, 0.75), interpolation=B, fill=128)],
        # torchvision draws the scale in float32 (1.100000023841858), and Pillow's scale-only
        # route steps positions in f64 from it: with the f64 1.1 whole columns moved.
        "affine_scale_only_as_drawn_in_float32": [crop, M.RandomAffine(degrees=0, scale=(1.1, 1.1))],
        "hue": [crop, M.ColorJitter(hue=(0.1, 0.1))],
        "hue_negative": [crop, M.ColorJitter(hue=(-0.45, -0.45))],
        # Pillow's ImageEnhance (torch's arithmetic is a level off in a sixth of the values).
        "contrast": [crop, M.ColorJitter(contrast=(0.6, 0.6))],
        "saturation": [crop, M.ColorJitter(saturation=(1.4, 1.4))],
        "brightness": [crop, M.ColorJitter(brightness=(0.8, 0.8))],
        # Pillow's convert("L").
        "grayscale": [crop, M.Grayscale(3)],
        "random_grayscale": [crop, M.RandomGrayscale(1.0)],
        # Pillow's ImageOps.autocontrast and ImageEnhance.Sharpness.
        "autocontrast": [crop, M.RandomAutocontrast(1.0)],
        "sharpness": [crop, M.RandomAdjustSharpness(2.5, 1.0)],
        "blur_by_sharpness": [crop, M.RandomAdjustSharpness(0.2, 1.0)],
    }


def outputs(folder, middle, M, backend="cpu"):
    ds = datasets.ImageFolder(folder, M.Compose([*middle, M.PILToTensor()]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        warnings.simplefilter("error", PythonTailWarning)
        got = torch.cat([x for x, _ in DataLoader(ds, batch_size=4, backend=backend)])
    want = torch.stack([ds[i][0] for i in range(len(ds))])
    return got, want


@pytest.mark.parametrize("flavour", ["v1", "v2"])
@pytest.mark.parametrize("case", sorted(cases(T)))
def test_a_pinned_transform_of_pil_images_gives_torchvisions_bytes(png_folder, case, flavour):
    M = T if flavour == "v1" else v2
    got, want = outputs(png_folder, cases(M)[case], M)
    assert got.shape == want.shape and got.dtype == want.dtype == torch.uint8
    diff = (got.int() - want.int()).abs()
    assert diff.max().item() == 0, f"{case}: {int((diff > 0).sum())} values differ, by up to {diff.max().item()}"


@pytest.mark.parametrize("flavour", ["v1", "v2"])
@pytest.mark.parametrize("case", sorted(k for k, steps in cases(T).items() if isinstance(steps[0], T.CenterCrop) and len(steps) == 2))
def test_a_pinned_pixel_op_before_the_crop_runs_on_the_whole_image_with_torchvisions_bytes(png_folder, case, flavour):
    """The same pinned ops written before the crop: torchvision runs them on the whole PIL
    image, and so does hpuload (drawn on the whole image's size: a rotation's centre, the
    contrast's mean grey, autocontrast's extremes), natively; the bytes are torchvision's."""
    M = T if flavour == "v1" else v2
    crop, op = cases(M)[case]
    got, want = outputs(png_folder, [op, crop], M)
    assert got.shape == want.shape
    diff = (got.int() - want.int()).abs()
    assert diff.max().item() == 0, f"{case}: {int((diff > 0).sum())} values differ, by up to {diff.max().item()}"


def test_steps_before_a_resize_take_the_cpu_path_on_the_engine_backend_with_the_same_bytes(png_folder):
    """A flip, grey, a contrast and a rotation before a `Resize` (a beginner script's order) on
    the engine backend: such samples go to the CPU path, and the batches are torchvision's."""
    steps = [T.RandomHorizontalFlip(1.0), T.Grayscale(3), T.ColorJitter(contrast=(0.6, 0.6)),
             T.RandomRotation((12, 12)), T.Resize((48, 56))]
    got, want = outputs(png_folder, steps, T, backend="auto")
    assert torch.equal(got, want)


@pytest.mark.parametrize("flavour", ["v1", "v2"])
@pytest.mark.parametrize(
    "interpolation,named",
    [(N, "Pillow's nearest"), (L, "Pillow's Lanczos"), (BOX, "box or Hamming"), (HAMMING, "box or Hamming")],
    ids=["nearest", "lanczos", "box", "hamming"],
)
def test_pillows_own_resizes_of_jpegs_take_the_cpu_path_on_the_engine_backend(jpeg_folder, flavour, interpolation, named):
    """The engine's nearest is torch's (`floor(i * scale)`); Pillow's, what a PIL image gets,
    samples under each output pixel's centre: on the engine it took other source pixels
    (22 dB from torchvision's output on corpus photos). The engine has no Lanczos, box or
    Hamming filter. Such samples take the CPU path, named in the report, and the bytes are
    torchvision's."""
    M = T if flavour == "v1" else v2
    ds = datasets.ImageFolder(jpeg_folder, M.Compose([M.Resize((37, 53), interpolation=interpolation), M.CenterCrop(32), M.PILToTensor()]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=8, shuffle=False, backend="auto")
    got = torch.cat([x for x, _ in loader])
    assert torch.equal(got, torch.stack([ds[i][0] for i in range(len(ds))]))
    assert sum(n for reason, n in loader.report()["fallbacks"].items() if named in reason) == len(ds)


@pytest.mark.parametrize(
    "op",
    [
        lambda M: M.RandomEqualize(1.0),
        lambda M: M.RandomAutocontrast(1.0),
        lambda M: M.RandomPosterize(4, 1.0),
        lambda M: M.RandomSolarize(200, 1.0),
        lambda M: M.AugMix(severity=3, mixture_width=2, all_ops=False),
    ],
    ids=["equalize", "autocontrast", "posterize", "solarize", "augmix"],
)
def test_ops_that_remap_levels_by_the_images_own_take_the_cpu_path_on_the_engine_backend(jpeg_folder, op):
    """Equalization, autocontrast, posterize and solarize map a level by the image's own
    histogram, range or a threshold, so a level's difference before them can come out as many
    (the engine's resize is within 42 dB of torchvision's; after an equalization it was 25 dB).
    Samples with one take the CPU path, named in the report, with torchvision's bytes; the
    same pipeline without it stays on the engine."""
    M = v2
    geometry = [M.Resize((37, 53)), M.CenterCrop(32)]
    ds = datasets.ImageFolder(jpeg_folder, M.Compose([*geometry, op(M), M.PILToTensor()]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=8, shuffle=False, backend="auto")
    got = torch.cat([x for x, _ in loader])
    report = loader.report()
    routed = sum(n for reason, n in report["fallbacks"].items() if "equalize, autocontrast" in reason)
    if "AugMix" in type(op(M)).__name__:
        # AugMix draws its chains' ops: the samples that drew one of those go to the CPU path.
        assert 0 < routed < len(ds) and routed + report["hw_samples"] == len(ds)
    else:
        assert routed == len(ds)
        assert torch.equal(got, torch.stack([ds[i][0] for i in range(len(ds))]))
    plain = datasets.ImageFolder(jpeg_folder, M.Compose([*geometry, M.RandomInvert(1.0), M.PILToTensor()]))
    loader = DataLoader(plain, batch_size=8, shuffle=False, backend="auto")
    list(loader)
    assert loader.report()["hw_samples"] == len(plain)


@pytest.mark.parametrize("interpolation", [B, L, BOX, HAMMING], ids=["bilinear", "lanczos", "box", "hamming"])
def test_a_random_flip_before_random_resized_crop_is_drawn_on_the_whole_image(png_folder, interpolation):
    """`RandomHorizontalFlip()` then `RandomResizedCrop` (flip first, as many scripts write it):
    each sample is torchvision's own functions with hpuload's draws (the flip of the whole
    image, then the crop drawn on it), byte for byte, natively; about half are flipped. With
    Pillow's Lanczos, box and Hamming filters too."""
    import json

    from PIL import Image
    from torchvision.transforms import functional as F

    rrc = T.RandomResizedCrop(48, interpolation=interpolation)
    ds = datasets.ImageFolder(png_folder, T.Compose([T.RandomHorizontalFlip(), rrc, T.PILToTensor()]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=4, backend="cpu", seed=9)
    flipped = 0
    for epoch in range(3):
        got = torch.cat([x for x, _ in loader])
        for index, (path, _) in enumerate(ds.samples):
            image = Image.open(path).convert("RGB")
            plan = json.loads(loader._core.sample_plan(epoch, index, image.width, image.height))
            pre = [op["op"] for op in plan.get("pre", [])]
            assert pre in ([], ["hflip"]) and not plan["ops"], plan
            if pre:
                image, flipped = F.hflip(image), flipped + 1
            c = plan["crop"]
            box = [int(c["top"]), int(c["left"]), int(c["height"]), int(c["width"])]
            want = F.pil_to_tensor(F.resized_crop(image, *box, [48, 48], interpolation=rrc.interpolation))
            assert torch.equal(got[index], want), (epoch, index, plan)
    assert 0.25 < flipped / (3 * len(ds)) < 0.75


@pytest.mark.parametrize("flavour", ["v1", "v2"])
@pytest.mark.parametrize("resize", [61, (61, 75)])
@pytest.mark.parametrize("flip", ["RandomHorizontalFlip", "RandomVerticalFlip"])
def test_a_flip_between_the_resize_and_its_centre_crop_gives_torchvisions_bytes_at_odd_margins(png_folder, flavour, resize, flip):
    """`Resize`, a flip, `CenterCrop` (the flip of the whole resize, then its centre): with an
    odd margin the centre rounds to the same side whichever way the image faces, so the crop of
    the flipped image is not the flipped crop. hpuload cuts the mirrored window, natively."""
    M = T if flavour == "v1" else v2
    got, want = outputs(png_folder, [M.Resize(resize), getattr(M, flip)(1.0), M.CenterCrop((40, 52))], M)
    assert got.shape == want.shape
    assert torch.equal(got, want)


@pytest.mark.parametrize("flavour", ["v1", "v2"])
@pytest.mark.parametrize(
    "crop, resize, interpolation",
    [
        (40, 24, B),  # a square crop shrunk (CelebA's CenterCrop(148), Resize(64))
        ((40, 52), 30, B),  # the shorter side of a non-square crop to 30
        ((40, 52), (33, 61), C),  # both sides given, bicubic
        (37, 90, B),  # enlarged
        (300, 64, B),  # a crop larger than the images: torchvision pads it black, then resizes
    ],
)
def test_a_centre_crop_then_a_resize_gives_torchvisions_bytes(png_folder, flavour, crop, resize, interpolation):
    """`CenterCrop` then `Resize` (the crop first, as the CelebA recipes write it): the resize
    sees only the crop's pixels (and the black padding of a crop larger than the image), as
    torchvision's resize of the cropped image does; byte for byte, natively."""
    M = T if flavour == "v1" else v2
    got, want = outputs(png_folder, [M.CenterCrop(crop), M.Resize(resize, interpolation=interpolation)], M)
    assert got.shape == want.shape
    assert torch.equal(got, want)


def test_a_random_crop_then_a_resize_is_torchvisions_resize_of_the_crop_drawn(png_folder):
    """`RandomCrop(36, padding=4)` then `Resize(20)`: each sample is torchvision's own pad,
    crop and resize of the window hpuload drew, byte for byte, and the windows drawn cover
    the offsets torchvision draws from."""
    import json

    from PIL import Image
    from torchvision.transforms import functional as F

    ds = datasets.ImageFolder(png_folder, T.Compose([T.RandomCrop(36, padding=4), T.Resize(20), T.PILToTensor()]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=4, backend="cpu", seed=5)
    corners = set()
    for epoch in range(3):
        got = torch.cat([x for x, _ in loader])
        assert got.shape[1:] == (3, 20, 20)
        for index, (path, _) in enumerate(ds.samples):
            image = F.pad(Image.open(path).convert("RGB"), 4)
            c = json.loads(loader._core.sample_plan(epoch, index, image.width - 8, image.height - 8))["crop"]
            top, left = int(c["top"]) + 4, int(c["left"]) + 4
            assert 0 <= top <= image.height - 36 and 0 <= left <= image.width - 36, c
            corners.add((top, left))
            want = F.pil_to_tensor(F.resize(F.crop(image, top, left, 36, 36), 20))
            assert torch.equal(got[index], want), (epoch, index, c)
    assert len(corners) > 20


@pytest.mark.parametrize("flavour", ["v1", "v2"])
def test_pixel_ops_that_change_each_pixel_alone_between_the_resize_and_its_crop_give_torchvisions_bytes(png_folder, flavour):
    """A resize, then brightness, saturation, hue, invert and solarize (each pixel on its own,
    so the same before the crop or after it), then the crop: natively, torchvision's bytes."""
    M = T if flavour == "v1" else v2
    steps = [
        M.Resize(61),
        M.ColorJitter(brightness=(0.7, 0.7)),
        M.RandomHorizontalFlip(1.0),
        M.ColorJitter(saturation=(1.3, 1.3)),
        M.ColorJitter(hue=(-0.1, -0.1)),
        M.RandomInvert(1.0),
        M.RandomSolarize(100, 1.0),
        M.CenterCrop((40, 52)),
    ]
    got, want = outputs(png_folder, steps, M)
    assert torch.equal(got, want)


@pytest.mark.parametrize("flavour", ["v1", "v2"])
@pytest.mark.parametrize("resize", [61, (61, 75)])
@pytest.mark.parametrize("between", ["contrast", "rotation", "blur", "autocontrast_sharpness"])
def test_pixel_ops_between_the_resize_and_its_crop_run_on_the_whole_resize_with_torchvisions_bytes(png_folder, flavour, resize, between):
    """A contrast (its mean grey the whole resize's), a rotation (about the resize's centre), a
    blur (its edges the resize's), autocontrast and sharpness between a resize and its centre
    crop, among flips: hpuload runs them on each whole resize, then cuts the crop, natively;
    the bytes are torchvision's, the engine backend's too (such samples take the CPU path)."""
    M = T if flavour == "v1" else v2
    op = {
        "contrast": [M.ColorJitter(contrast=(0.6, 0.6))],
        "rotation": [M.RandomRotation((12, 12))],
        "blur": [M.GaussianBlur(5, sigma=(1.2, 1.2))],
        "autocontrast_sharpness": [M.RandomAutocontrast(1.0), M.RandomAdjustSharpness(2.5, 1.0)],
    }[between]
    steps = [M.Resize(resize), M.RandomVerticalFlip(1.0), *op, M.RandomHorizontalFlip(1.0), M.CenterCrop((40, 52))]
    for backend in ("cpu", "auto"):
        got, want = outputs(png_folder, steps, M, backend=backend)
        assert got.shape == want.shape
        diff = (got.int() - want.int()).abs()
        assert diff.max().item() == 0, f"{backend}: {int((diff > 0).sum())} values differ, by up to {diff.max().item()}"


@pytest.mark.parametrize("flavour", ["v1", "v2"])
@pytest.mark.parametrize("kernel, sigma", [(3, 0.8), (5, 1.2), (9, 2.0), (23, 1.7), ((7, 3), 0.9), (33, 4.6)])
def test_a_gaussian_blur_gives_torchvisions_bytes_to_the_last_value(png_folder, flavour, kernel, sigma):
    """torchvision's `GaussianBlur` rounds each value of an f32 2D convolution, and a few in
    100,000 land within a thousandth of a half level, where the order of the sums and the
    kernel's last bit decide: hpuload builds v1's or v2's kernel as torch does and takes such
    values by torch's own order, so every byte is torchvision's (it was a level off in a few
    values in 100,000), on PIL images and on tensors."""
    blur_bytes(png_folder, T if flavour == "v1" else v2, kernel, sigma, levels=0, share=0)


@pytest.mark.parametrize("kernel, sigma", [(5, 1.3), (9, 2.1)])
def test_v1s_blur_gives_torchvisions_bytes_where_torchs_exp_rounds_a_kernel_value_the_other_way(png_folder, kernel, sigma):
    """v1 builds its kernel with `torch.exp`, which on x86-64 is MKL's and rounds about one
    value in a hundred to the other side of the correctly rounded one (v2's softmax uses
    SLEEF's, which hpuload follows): for these sigmas one of the kernel's exponentials is such
    (checked first), and hpuload takes them from the loaded torch's own `vmsExp`, so every
    byte is torchvision's (a level off in a few values in 100,000 before)."""
    half = (kernel - 1) * 0.5
    arg = -0.5 * (torch.linspace(-half, half, kernel) / sigma).pow(2)
    if torch.equal(torch.exp(arg), arg.double().exp().float()):
        pytest.skip("this torch's exp rounds these kernels' values correctly")
    blur_bytes(png_folder, T, kernel, sigma, levels=0, share=0)


def blur_bytes(png_folder, M, kernel, sigma, levels, share):
    blur = M.GaussianBlur(kernel, sigma=(sigma, sigma))
    on_pil = datasets.ImageFolder(png_folder, M.Compose([M.Resize((96, 112)), blur, M.PILToTensor()]))
    on_tensor = datasets.ImageFolder(png_folder, M.Compose([M.Resize((96, 112)), M.PILToTensor(), blur]))
    for ds in (on_pil, on_tensor):
        with warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            warnings.simplefilter("error", PythonTailWarning)
            got = torch.cat([x for x, _ in DataLoader(ds, batch_size=4, backend="cpu")])
        want = torch.stack([ds[i][0] for i in range(len(ds))])
        diff = (got.int() - want.int()).abs()
        assert diff.max().item() <= levels and (diff > 0).float().mean().item() <= share, (
            f"{int((diff > 0).sum())} of {diff.numel()} values differ, by up to {diff.max().item()}"
        )


def test_a_rotation_between_the_resize_and_a_random_crop_gives_a_crop_of_torchvisions_rotated_resize(png_folder):
    """`Resize(61), RandomRotation((12, 12)), RandomCrop(40)`, natively: each sample is
    torchvision's rotated resize cut at an offset `RandomCrop` can draw, and the offsets vary."""
    from PIL import Image
    from torchvision.transforms import functional as F

    ds = datasets.ImageFolder(png_folder, T.Compose([T.Resize(61), T.RandomRotation((12, 12)), T.RandomCrop(40), T.PILToTensor()]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=4, backend="cpu", seed=3)
    offsets = set()
    for _ in range(2):
        got = torch.cat([x for x, _ in loader])
        for index, (path, _) in enumerate(ds.samples):
            whole = F.pil_to_tensor(F.rotate(F.resize(Image.open(path).convert("RGB"), 61), 12.0))
            h, w = whole.shape[-2:]
            found = [
                (top, left)
                for top in range(h - 40 + 1)
                for left in range(w - 40 + 1)
                if torch.equal(got[index], whole[:, top : top + 40, left : left + 40])
            ]
            assert found, f"sample {index} is no crop of torchvision's rotated resize"
            offsets.add(found[0])
    assert len(offsets) > 4


def test_a_random_flip_between_the_resize_and_a_random_crop_gives_a_crop_torchvision_could_draw(png_folder):
    """`Resize(61), RandomHorizontalFlip(), RandomCrop(40)`, natively: each sample is
    torchvision's flipped or unflipped resize cut at an offset `RandomCrop` can draw, and
    about half are flipped."""
    from PIL import Image
    from torchvision.transforms import functional as F

    ds = datasets.ImageFolder(png_folder, T.Compose([T.Resize(61), T.RandomHorizontalFlip(), T.RandomCrop(40), T.PILToTensor()]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=4, backend="cpu", seed=3)
    flipped = 0
    for _ in range(2):
        got = torch.cat([x for x, _ in loader])
        for index, (path, _) in enumerate(ds.samples):
            whole = F.pil_to_tensor(F.resize(Image.open(path).convert("RGB"), 61))
            h, w = whole.shape[-2:]
            found = [
                flip
                for flip in (False, True)
                for top in range(h - 40 + 1)
                for left in range(w - 40 + 1)
                if torch.equal(got[index], (whole.flip(-1) if flip else whole)[:, top : top + 40, left : left + 40])
            ]
            assert found, f"sample {index} is no crop of torchvision's resize, flipped or not"
            flipped += found[0]
    assert 0.2 < flipped / (2 * len(ds)) < 0.8


def grey_cases(M):
    """Transforms of module `M` with `Grayscale(num_output_channels=1)` (Pillow's "L" image)
    and Pillow's steps around it."""
    grey = M.Grayscale()  # one channel by default
    return {
        "grey_first": [grey, M.Resize((48, 40))],
        "grey_after_the_resize": [M.Resize(61), M.CenterCrop(40), grey],
        "grey_then_pil_ops": [
            M.Resize((48, 40)),
            M.Grayscale(num_output_channels=1),
            # One factor each (ColorJitter draws the order of several).
            M.ColorJitter(brightness=(0.8, 0.8)),
            M.ColorJitter(contrast=(0.6, 0.6)),
            M.ColorJitter(saturation=(1.4, 1.4)),
            M.ColorJitter(hue=(0.1, 0.1)),
            M.RandomRotation((12, 12), fill=40),
            M.RandomAutocontrast(1.0),
            M.RandomAdjustSharpness(2.5, 1.0),
        ],
        "colour_ops_then_grey": [M.ColorJitter(hue=(0.2, 0.2)), M.Grayscale(1), M.Resize((48, 40)), M.RandomEqualize(1.0)],
        "grey_then_grey_at_random": [M.Resize((48, 40)), M.Grayscale(1), M.RandomGrayscale(0.5)],
    }


@pytest.mark.parametrize("flavour", ["v1", "v2"])
@pytest.mark.parametrize("case", sorted(grey_cases(T)))
def test_one_grey_channel_gives_torchvisions_bytes_in_one_channel(png_folder, case, flavour):
    """`Grayscale()` (one output channel, an "L" image) natively: hpuload makes three equal
    channels and hands out the first, shaped `[N, 1, H, W]` as torchvision's; Pillow's steps
    after it give an "L" image what they give each equal channel, byte for byte."""
    M = T if flavour == "v1" else v2
    got, want = outputs(png_folder, grey_cases(M)[case], M)
    assert got.shape == want.shape and want.shape[1] == 1
    assert torch.equal(got, want)


def test_one_grey_channel_normalized_once_gives_torchvisions_floats(png_folder):
    """The beginner's grey pipeline: `Grayscale(), Resize, ToTensor, Normalize((0.5,), (0.5,))`."""
    ds = datasets.ImageFolder(png_folder, T.Compose([T.Grayscale(), T.Resize((32, 32)), T.ToTensor(), T.Normalize((0.5,), (0.5,))]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        warnings.simplefilter("error", PythonTailWarning)
        batches = [x for x, _ in DataLoader(ds, batch_size=5, num_workers=2)]
    # One channel written as one: contiguous, as torch's stacked batch.
    assert all(x.is_contiguous() for x in batches)
    got = torch.cat(batches)
    want = torch.stack([ds[i][0] for i in range(len(ds))])
    assert got.shape == want.shape == (len(ds), 1, 32, 32) and got.dtype == torch.float32
    assert torch.equal(got, want)


def test_what_one_grey_channel_makes_otherwise_runs_in_python_or_goes_to_torch(png_folder):
    """A tensor kernel after `Grayscale()` (torch leaves one channel as it is where it mixes
    three) runs in Python after the native resize; a three-channel `Normalize` after it (torch
    refuses it on one channel) sends the loader to torch's, which raises torch's error."""
    ds = datasets.ImageFolder(png_folder, T.Compose([T.Resize((40, 40)), T.Grayscale(), T.PILToTensor(), T.ColorJitter(saturation=(0.5, 0.5))]))
    with pytest.warns(PythonTailWarning):
        loader = DataLoader(ds, batch_size=4)
    got = torch.cat([x for x, _ in loader])
    assert torch.equal(got, torch.stack([ds[i][0] for i in range(len(ds))]))
    ds.transform = T.Compose([T.Grayscale(), T.Resize((40, 40)), T.ToTensor(), T.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])
    with pytest.warns(FallbackWarning, match="Normalize with three channels"):
        loader = DataLoader(ds, batch_size=4)
    with pytest.raises(RuntimeError):
        next(iter(loader))


def test_bicubic_resizes_are_within_two_levels_and_rarely_beyond_one(png_folder):
    """Bicubic resamples across, then down, as Pillow does (the other order clips its
    overshoot between the passes and differed by up to 6 levels at hard edges); what remains is
    the fixed-point weights' precision (fast_image_resize's against Pillow's)."""
    got, want = outputs(png_folder, [T.Resize((150, 111), interpolation=C)], T)
    diff = (got.int() - want.int()).abs()
    assert diff.max().item() <= 2
    assert (diff > 1).float().mean().item() < 1e-4


def tensor_cases(M):
    """Pixel ops with pinned parameters after the conversion to a uint8 tensor."""
    return {
        "brightness": M.ColorJitter(brightness=(1.3, 1.3)),
        "contrast": M.ColorJitter(contrast=(0.7, 0.7)),
        "saturation": M.ColorJitter(saturation=(1.5, 1.5)),
        "hue": M.ColorJitter(hue=(0.1, 0.1)),
        "posterize": M.RandomPosterize(3, 1.0),
        "solarize": M.RandomSolarize(128, 1.0),
        "equalize": M.RandomEqualize(1.0),
        "autocontrast": M.RandomAutocontrast(1.0),
        "sharpness": M.RandomAdjustSharpness(2.0, 1.0),
        "blur": M.GaussianBlur(5, sigma=(1.0, 1.0)),
        "rotate": M.RandomRotation((30, 30)),
        "affine": M.RandomAffine(degrees=(10, 10), scale=(1.25, 1.25), shear=(5, 5, -3, -3)),
    }


@pytest.mark.parametrize("flavour", ["v1", "v2"])
@pytest.mark.parametrize("case", sorted(tensor_cases(T)))
def test_a_pixel_op_on_a_uint8_tensor_runs_natively_with_torchvisions_tensor_kernels(png_folder, case, flavour):
    """After `PILToTensor` the op gets a tensor and torchvision runs its tensor kernels: so
    does hpuload, natively (these went to a Python tail before), within a level (the hue's
    float rounding) and the blur exactly."""
    M = T if flavour == "v1" else v2
    ds = datasets.ImageFolder(png_folder, M.Compose([M.PILToTensor(), M.CenterCrop(CROP), tensor_cases(M)[case]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        warnings.simplefilter("error", PythonTailWarning)
        got = torch.cat([x for x, _ in DataLoader(ds, batch_size=4, backend="cpu")])
    want = torch.stack([ds[i][0] for i in range(len(ds))])
    assert (got.int() - want.int()).abs().max().item() <= (0 if case == "blur" else 1)


@pytest.mark.parametrize("flavour", ["v1", "v2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_conversion_then_normalize_gives_torchs_bits(png_folder, flavour, dtype):
    """v2's `ToDtype` scales by the reciprocal (v1's `ConvertImageDtype` divides), and after a
    conversion to f16 or bf16 torch normalizes in that dtype, rounding each step: the output's
    bits are torch's, not merely close (they were 1-2 ulps off in most values)."""
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    convert = T.ConvertImageDtype(dtype) if flavour == "v1" else v2.ToDtype(dtype, scale=True)
    M = T if flavour == "v1" else v2
    for tail in ([convert, M.Normalize(mean, std)], [convert]):
        ds = datasets.ImageFolder(png_folder, M.Compose([M.PILToTensor(), M.CenterCrop(CROP), *tail]))
        got = torch.cat([x for x, _ in DataLoader(ds, batch_size=4, backend="cpu")])
        want = torch.stack([ds[i][0] for i in range(len(ds))])
        assert got.dtype == want.dtype == dtype
        assert torch.equal(got, want), f"{len(tail)} steps: {(got != want).float().mean():.2%} of values differ"
