"""A Kaggle-style Dataset: `cv2.imread`, `cv2.cvtColor(..., COLOR_BGR2RGB)`, then an
albumentations `Compose` held under a name of its own (`self.transforms`) and called as
`self.transforms(image=image)["image"]`. hpuload learns it as it learns a Dataset that opens
images with Pillow and runs it natively, with OpenCV's and albumentations' own bytes, or sends
it to torch's DataLoader naming why. Never different output."""

import collections
import json
import os
import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from PIL import Image

cv2 = pytest.importorskip("cv2")
A = pytest.importorskip("albumentations")
from albumentations.pytorch import ToTensorV2  # noqa: E402

from hpuload.torch import DataLoader, FallbackWarning, PythonTailWarning  # noqa: E402
from conftest import png_with_chunk  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class LeafDataset(tud.Dataset):
    """The shape of the Kaggle notebooks' Datasets."""

    def __init__(self, files, labels, transforms=None, to_rgb=True, flags=None):
        self.files, self.labels, self.transforms, self.to_rgb = files, labels, transforms, to_rgb
        self.flags = flags

    def __len__(self):
        return len(self.files)

    def __getitem__(self, idx):
        image = cv2.imread(self.files[idx]) if self.flags is None else cv2.imread(self.files[idx], self.flags)
        if self.to_rgb:
            image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        if self.transforms:
            image = self.transforms(image=image)["image"]
        return image, torch.tensor(self.labels[idx])


def files_of(folder):
    files = sorted(str(p) for p in folder.rglob("*.jpg"))
    classes = sorted({os.path.basename(os.path.dirname(f)) for f in files})
    return files, [classes.index(os.path.basename(os.path.dirname(f))) for f in files]


def native(make):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = make()
    assert type(loader) is DataLoader
    return loader


def theirs(ds, batch_size):
    return list(tud.DataLoader(ds, batch_size=batch_size))


def samples_with_plans(loader, files, epochs=(0, 1), batch_size=8):
    """Each sample `loader` gives over `epochs` (its batches in order), with its image as the
    Dataset reads it and hpuload's plan for it."""
    for epoch in epochs:
        for b, (x, _) in enumerate(loader):
            for k in range(x.shape[0]):
                index = b * batch_size + k
                image = cv2.cvtColor(cv2.imread(files[index]), cv2.COLOR_BGR2RGB)
                plan = json.loads(loader._core.sample_plan(epoch, index, image.shape[1], image.shape[0]))
                yield epoch, index, x[k], image, plan


def drawn_ops(loader, files, rrc, steps, epochs=(0, 1)):
    """Every pixel op `loader` drew over `epochs`, after checking each sample is `by_plan` of
    its plan: albumentations' own functions with hpuload's parameters, bit for bit."""
    ops = []
    for epoch, index, got, image, plan in samples_with_plans(loader, files, epochs):
        assert torch.equal(got, by_plan(image, plan, rrc, steps)), (epoch, index, plan.get("ops"))
        ops += plan.get("ops", [])
    return ops


def same_batches_on_both_backends(ds, batch_size=8):
    """Checks that hpuload's batches over `ds`, natively on the CPU backend and on the
    engine's, are torch's DataLoader's, byte for byte."""
    want = theirs(ds, batch_size)
    for backend in ("cpu", "auto"):
        ours = list(native(lambda: DataLoader(ds, batch_size=batch_size, backend=backend)))
        assert len(ours) == len(want)
        for (x, y), (want_x, want_y) in zip(ours, want):
            assert torch.equal(x, want_x) and torch.equal(y, want_y), backend


def ops_on_a_constant_image(tmp_path, steps, n, seed=1):
    """hpuload's plans for `n` samples of one 8x8 photo through `Resize(8, 8)` then `steps`:
    the pixel ops drawn for each, in order (the draws alone, no pixels)."""
    path = tmp_path / "constant.jpg"
    Image.new("RGB", (8, 8), (90, 120, 30)).save(path)
    ds = LeafDataset([str(path)] * n, [0] * n, A.Compose([A.Resize(8, 8), *steps, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=n, backend="cpu", seed=seed))
    return [json.loads(loader._core.sample_plan(0, index, 8, 8)).get("ops", []) for index in range(n)]


@pytest.mark.parametrize("normalize", [True, False])
def test_a_resize_gives_opencvs_and_albumentations_bytes_batch_for_batch(jpeg_folder, normalize):
    """The evaluation transform: `Resize`, `Normalize`, `ToTensorV2`: every value is the
    Dataset's own, bit for bit (float32 after Normalize, uint8 without), shrinking and
    enlarging; the RGB read in one call (`cv2.IMREAD_COLOR_RGB`) too."""
    files, labels = files_of(jpeg_folder)
    for size, flags in (((48, 40), None), ((300, 260), None), ((48, 40), getattr(cv2, "IMREAD_COLOR_RGB", None))):
        steps = [A.Resize(*size)] + ([A.Normalize(mean=MEAN, std=STD)] if normalize else []) + [ToTensorV2()]
        ds = LeafDataset(files, labels, A.Compose(steps), to_rgb=flags is None, flags=flags)
        ours = list(native(lambda: DataLoader(ds, batch_size=8, num_workers=2, backend="cpu")))
        want = theirs(ds, 8)
        assert len(ours) == len(want)
        for (x, y), (xw, yw) in zip(ours, want):
            assert x.dtype == xw.dtype == (torch.float32 if normalize else torch.uint8)
            assert torch.equal(x, xw) and torch.equal(y, yw)


@pytest.mark.parametrize(
    "steps",
    [
        lambda: [A.SmallestMaxSize(max_size=160), A.CenterCrop(height=128, width=128)],
        lambda: [A.SmallestMaxSize(max_size=41), A.CenterCrop(height=40, width=33)],  # shrinks past half
        lambda: [A.SmallestMaxSize(max_size=333), A.CenterCrop(height=301, width=330)],  # enlarges
        lambda: [A.Resize(87, 95), A.CenterCrop(height=40, width=32)],
        lambda: [A.CenterCrop(height=33, width=47)],
        lambda: [A.LongestMaxSize(max_size=64), A.PadIfNeeded(min_height=64, min_width=64, border_mode=cv2.BORDER_CONSTANT)],
        lambda: [A.LongestMaxSize(max_size=61), A.PadIfNeeded(min_height=70, min_width=67, fill=(10, 20.5, 300))],
        lambda: [A.LongestMaxSize(max_size=600), A.PadIfNeeded(min_height=600, min_width=601, fill=7)],  # enlarges
        # The resize flipped before its crop: odd margins, where the crop of the flipped
        # resize is not the flipped crop.
        lambda: [A.SmallestMaxSize(max_size=41), A.HorizontalFlip(p=1.0), A.CenterCrop(height=40, width=33)],
        lambda: [A.Resize(87, 95), A.VerticalFlip(p=1.0), A.HorizontalFlip(p=1.0), A.CenterCrop(height=40, width=32)],
        # Pixel steps between the resize and its crop: on the whole resize (a contrast around
        # its mean grey, a blur to its edges), then the crop.
        lambda: [A.SmallestMaxSize(max_size=41), A.HorizontalFlip(p=1.0),
                 A.RandomBrightnessContrast(brightness_limit=(0.1, 0.1), contrast_limit=(-0.3, -0.3), p=1.0),
                 A.Blur(blur_limit=(5, 5), p=1.0), A.VerticalFlip(p=1.0), A.CenterCrop(height=40, width=33)],
        lambda: [A.SmallestMaxSize(max_size=64), A.CLAHE(p=1.0), A.CenterCrop(height=48, width=48)],
        # A crop of the image, then its resize (shrunk, and enlarged to another aspect).
        lambda: [A.CenterCrop(height=31, width=31), A.Resize(24, 24)],
        lambda: [A.CenterCrop(height=40, width=33), A.Resize(90, 71)],
    ],
    ids=["smallest-160-crop-128", "smallest-41", "smallest-333", "resize-then-crop", "crop-alone",
         "longest-64-pad", "longest-61-pad-odd", "longest-600", "smallest-flip-crop", "resize-flips-crop",
         "smallest-ops-crop", "smallest-clahe-crop", "crop-then-resize", "crop-then-enlarge"],
)
def test_the_evaluation_crops_give_albumentations_bytes_batch_for_batch(jpeg_folder, steps):
    """albumentations' evaluation transforms (its classification example's `SmallestMaxSize`
    then `CenterCrop`, a `Resize` then a `CenterCrop`, flips and pixel steps between a
    resize and its crop, a
    crop alone, `LongestMaxSize` then `PadIfNeeded`), then `Normalize`: every value is the Dataset's own, bit for bit, with
    albumentations' centre (`(size - crop) // 2`, not torchvision's rounding), its rounded
    sides and its padding (centred, the fill as OpenCV rounds it), shrinking and enlarging."""
    files, labels = files_of(jpeg_folder)
    ds = LeafDataset(files, labels, A.Compose(steps() + [A.Normalize(mean=MEAN, std=STD), ToTensorV2()]))
    ours = list(native(lambda: DataLoader(ds, batch_size=8, num_workers=2, backend="cpu")))
    want = theirs(ds, 8)
    assert len(ours) == len(want)
    for (x, y), (xw, yw) in zip(ours, want):
        assert torch.equal(x, xw) and torch.equal(y, yw)


def test_albumentations_centre_is_its_own_not_torchvisions(jpeg_folder):
    """Where `(size - crop) / 2` ends in a half, albumentations' centre is the floor and
    torchvision's the even neighbour: the set has images where the two differ, and hpuload
    gives albumentations' there."""
    files, labels = files_of(jpeg_folder)
    crop = A.CenterCrop(height=31, width=31)
    differs = 0
    for f in files:
        h, w = cv2.imread(f).shape[:2]
        differs += any((n - 31) % 4 == 3 for n in (h, w))  # k.5 with k odd: floor k, even k + 1
    assert differs > 0
    ds = LeafDataset(files, labels, A.Compose([crop, ToTensorV2()]))
    ours = torch.cat([x for x, _ in native(lambda: DataLoader(ds, batch_size=8, backend="cpu"))])
    assert torch.equal(ours, torch.cat([x for x, _ in theirs(ds, 8)]))


def test_a_random_crop_of_the_smallest_max_size_gives_albumentations_pixels_for_the_offset_drawn(jpeg_folder):
    """The training transform of albumentations' classification example, without its warp:
    `SmallestMaxSize`, `RandomCrop`, a flip and `Normalize`: each sample is albumentations'
    own resize, crop (at the offset hpuload drew), flip and normalization, bit for bit; the
    offsets drawn cover the whole range albumentations draws from."""
    files, labels = files_of(jpeg_folder)
    smallest, rcrop = A.SmallestMaxSize(max_size=60), A.RandomCrop(height=48, width=40)
    flip, norm = A.HorizontalFlip(p=0.5), A.Normalize(mean=MEAN, std=STD)
    ds = LeafDataset(files, labels, A.Compose([smallest, rcrop, flip, norm, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=3))
    tops = []
    for epoch, index, got, image, plan in samples_with_plans(loader, files):
        h, w = image.shape[:2]
        resized = smallest.apply(image, scale=60 / min(h, w))
        rh, rw = resized.shape[:2]
        c = plan["crop"]
        top, left = round(c["top"] * rh / h), round(c["left"] * rw / w)
        want = resized[top : top + 48, left : left + 40]
        if plan["flip"]:
            want = flip.apply(want)
        want = ToTensorV2()(image=norm.apply(want))["image"]
        assert torch.equal(got, want), f"epoch {epoch}, index {index}, offset {(top, left)}"
        tops.append((top / (rh - 48) if rh > 48 else 0.5, left / (rw - 40)))
    for axis in (0, 1):
        values = [t[axis] for t in tops]
        assert min(values) < 0.2 and max(values) > 0.8


@pytest.mark.parametrize("crop", ["random", "centre"])
def test_a_warp_between_the_smallest_max_size_and_its_crop_gives_albumentations_pixels(jpeg_folder, crop):
    """albumentations' classification example's training transform (`SmallestMaxSize`,
    `ShiftScaleRotate`, `RandomCrop`, `RGBShift`, `RandomBrightnessContrast`, `Normalize`),
    wholly native (and with a `CenterCrop` instead): the warp is of the whole
    resize, drawn on its size, then cut: each sample is albumentations' resize, OpenCV's own
    `warpAffine` of it by the map hpuload drew, the crop at hpuload's offset and the rest
    (bit for bit), over two epochs with warps and without; each rotation turns about the
    centre of the resize, not of the crop."""
    files, labels = files_of(jpeg_folder)
    smallest = A.SmallestMaxSize(max_size=72)
    ssr = A.ShiftScaleRotate(shift_limit=0.05, scale_limit=0.05, rotate_limit=15, p=0.5)
    cut = A.RandomCrop(height=64, width=56) if crop == "random" else A.CenterCrop(height=64, width=56)
    shift = A.RGBShift(r_shift_limit=15, g_shift_limit=15, b_shift_limit=15, p=0.5)
    bc, norm = A.RandomBrightnessContrast(p=0.5), A.Normalize(mean=MEAN, std=STD)
    ds = LeafDataset(files, labels, A.Compose([smallest, ssr, cut, shift, bc, norm, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=5))
    borders = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE,
               "reflect": cv2.BORDER_REFLECT, "reflect101": cv2.BORDER_REFLECT_101}
    warped = 0
    for epoch, index, got, image, plan in samples_with_plans(loader, files):
        h, w = image.shape[:2]
        resized = smallest.apply(image, scale=72 / min(h, w))
        rh, rw = resized.shape[:2]
        if "warped" in plan:
            wp = plan["warped"]
            assert wp["content"] == [rh, rw]
            inverse = np.array(wp["inverse"], dtype=np.float64).reshape(2, 3)
            resized = cv2.warpAffine(resized, inverse, (rw, rh), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                                     borderMode=borders[wp["border"]], borderValue=tuple(wp["fill"]))
            top, left = wp["at"]
            warped += 1
        else:
            c = plan["crop"]
            top, left = round(c["top"] * rh / h), round(c["left"] * rw / w)
        if crop == "centre":
            assert (top, left) == ((rh - 64) // 2, (rw - 56) // 2)
        want = resized[top : top + 64, left : left + 56]
        for op in plan.get("ops", []):
            if op["op"] == "channel_shift":
                want = shift.apply(want, noise_map=np.array(op["arg"], dtype=np.float64))
            else:
                want = bc.apply(want, alpha=op["arg"]["alpha"], beta=op["arg"]["beta"])
        want = ToTensorV2()(image=norm.apply(want))["image"]
        assert torch.equal(got, want), f"epoch {epoch}, index {index}"
    assert 0.3 * 82 < warped < 0.7 * 82
    # Rotation alone: the centre of the resize is where it turns.
    turn = A.ShiftScaleRotate(shift_limit=0, scale_limit=0, rotate_limit=(10, 20), p=1)
    ds = LeafDataset(files, labels, A.Compose([smallest, turn, cut, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu"))
    for index in range(len(files)):
        h, w = cv2.imread(files[index]).shape[:2]
        wp = json.loads(loader._core.sample_plan(0, index, w, h))["warped"]
        rh, rw = wp["content"]
        inverse = np.array(wp["inverse"]).reshape(2, 3)
        centre = np.array([rw / 2 - 0.5, rh / 2 - 0.5])
        assert np.allclose(inverse[:, :2] @ centre + inverse[:, 2], centre, atol=1e-3), (index, wp)


@pytest.mark.parametrize("pad", ["fill", "reflect101", "crop_pads"])
def test_a_random_crop_of_the_image_padded_centred_gives_albumentations_pixels(tmp_path, pad):
    """albumentations' `PadIfNeeded` then `RandomCrop` (its segmentation examples' crop, the
    CIFAR recipes' padded crop), or `RandomCrop(pad_if_needed=True)`: each sample is
    albumentations' own centred padding of the image (a fill, beyond the crop too, or the
    image mirrored about its edge), cut at the offset hpuload drew, flipped as drawn and
    normalized, bit for bit, for images narrower, shorter or larger than the crop."""
    rng = np.random.default_rng(0)
    files = []
    for k, (w, h) in enumerate([(40, 30), (70, 50), (30, 90), (100, 100), (57, 33), (64, 48)]):
        path = tmp_path / f"{k}.png"
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path)
        files.append(str(path))
    if pad == "fill":
        padding = A.PadIfNeeded(min_height=60, min_width=80, border_mode=cv2.BORDER_CONSTANT, fill=(10, 20, 30))
        steps = [padding, A.RandomCrop(height=48, width=64)]
    elif pad == "reflect101":
        padding = A.PadIfNeeded(min_height=48, min_width=64, border_mode=cv2.BORDER_REFLECT_101)
        steps = [padding, A.RandomCrop(height=48, width=64)]
    else:
        padding = A.PadIfNeeded(min_height=48, min_width=64, border_mode=cv2.BORDER_CONSTANT, fill=(10, 20, 30))
        steps = [A.RandomCrop(height=48, width=64, pad_if_needed=True, fill=(10, 20, 30))]
    flip, norm = A.HorizontalFlip(p=0.5), A.Normalize(mean=MEAN, std=STD)
    n = 4 * len(files)
    ds = LeafDataset(files * 4, [0] * n, A.Compose([*steps, flip, norm, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=3))
    padded_ones = 0
    for epoch in (0, 1):
        for b, (x, _) in enumerate(loader):
            for k in range(x.shape[0]):
                index = b * 8 + k
                image = cv2.cvtColor(cv2.imread(files[index % len(files)]), cv2.COLOR_BGR2RGB)
                h, w = image.shape[:2]
                plan = json.loads(loader._core.sample_plan(epoch, index, w, h))
                top, left = plan["resized_crop"]["at"]
                whole = A.Compose([padding])(image=image)["image"]
                want = whole[top : top + 48, left : left + 64]
                if plan.get("flip") or {"op": "hflip"} in plan.get("ops", []):
                    want = flip.apply(want)
                want = ToTensorV2()(image=norm.apply(want))["image"]
                assert torch.equal(x[k], want), (epoch, index, (w, h), (top, left))
                padded_ones += whole.shape[:2] != image.shape[:2]
    assert padded_ones >= 20


@pytest.mark.parametrize("pad", [(60, 80), (37, 50), (41, 51), (20, 90)], ids=["larger", "the size", "odd", "shorter, wider"])
def test_a_lone_pad_over_images_of_one_size_gives_albumentations_batches_and_of_several_falls_back(tmp_path, pad):
    """A `PadIfNeeded` no crop follows pads each image centred (its fill) and cuts nothing:
    over images of one size, one output size, albumentations' bytes on both backends; over
    images of several sizes (each padded to a size of its own), torch's loader, named."""
    rng = np.random.default_rng(1)
    files = []
    for k in range(6):
        path = tmp_path / f"{k}.png"
        Image.fromarray(rng.integers(0, 256, (37, 50, 3), dtype=np.uint8)).save(path)
        files.append(str(path))
    padding = A.PadIfNeeded(min_height=pad[0], min_width=pad[1], border_mode=cv2.BORDER_CONSTANT, fill=(10, 20, 30))
    compose = A.Compose([padding, A.Normalize(mean=MEAN, std=STD), ToTensorV2()])
    ds = LeafDataset(files, [0] * len(files), compose)
    same_batches_on_both_backends(ds, batch_size=3)
    assert theirs(ds, 3)[0][0].shape[2:] == (max(37, pad[0]), max(50, pad[1]))
    Image.fromarray(rng.integers(0, 256, (30, 44, 3), dtype=np.uint8)).save(files[4])
    with pytest.warns(FallbackWarning, match="4.png"):
        DataLoader(LeafDataset(files, [0] * len(files), compose), batch_size=3, backend="cpu")


def test_a_random_crop_draws_albumentations_offsets(tmp_path):
    """The same distribution of offsets as albumentations' own `RandomCrop` draw (uniform over
    every offset that keeps the crop inside, both ends included): means, spreads and ends over
    3000 draws on one image."""
    path = tmp_path / "a.jpg"
    Image.new("RGB", (90, 70), (90, 120, 30)).save(path)
    rcrop = A.RandomCrop(height=40, width=50)
    ds = LeafDataset([str(path)] * 3000, [0] * 3000, A.Compose([rcrop, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=3000, backend="cpu", seed=7))
    ours = []
    for index in range(3000):
        c = json.loads(loader._core.sample_plan(0, index, 90, 70))["crop"]
        assert c["width"] == 50 and c["height"] == 40
        ours.append((c["top"], c["left"]))
    rcrop.set_random_seed(5)
    want = []
    for _ in range(3000):
        x0, y0, _, _ = rcrop.get_params_dependent_on_data({"shape": (70, 90)}, {})["crop_coords"]
        want.append((y0, x0))
    for k, top in ((0, 30), (1, 40)):
        a, b = np.array([o[k] for o in ours]), np.array([w[k] for w in want])
        assert set(a) == set(b) == set(range(top + 1))
        assert abs(a.mean() - b.mean()) < 0.05 * top and abs(a.std() - b.std()) < 0.05 * b.std()


def test_a_random_resized_crop_and_flip_give_albumentations_pixels_for_the_window_drawn(jpeg_folder):
    """The training transform: the window and the flip hpuload draws (its plan), put through
    albumentations' own crop, resize, flip and normalization, give the sample hpuload made,
    bit for bit, over windows that shrink and enlarge."""
    files, labels = files_of(jpeg_folder)
    rrc = A.RandomResizedCrop(size=(160, 144))
    flip, norm = A.HorizontalFlip(p=0.5), A.Normalize(mean=MEAN, std=STD)
    ds = LeafDataset(files, labels, A.Compose([rrc, flip, norm, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu"))
    flips, scales = set(), []
    for epoch in (0, 1):
        loader_iter = iter(loader)
        for b, (x, _) in enumerate(loader_iter):
            for k in range(x.shape[0]):
                index = b * 8 + k
                image = cv2.cvtColor(cv2.imread(files[index]), cv2.COLOR_BGR2RGB)
                h, w = image.shape[:2]
                plan = json.loads(loader._core.sample_plan(epoch, index, w, h))
                c = plan["crop"]
                box = (int(c["left"]), int(c["top"]), int(c["left"] + c["width"]), int(c["top"] + c["height"]))
                assert c["view"] and all(float(v).is_integer() for v in (c["left"], c["top"], c["width"], c["height"]))
                want = rrc.apply(image, crop_coords=box)
                if plan["flip"]:
                    want = flip.apply(want)
                want = ToTensorV2()(image=norm.apply(want))["image"]
                assert torch.equal(x[k], want), f"epoch {epoch}, index {index}, window {box}"
                flips.add(plan["flip"])
                scales.append(c["width"] / 144)
    assert flips == {True, False}
    assert min(scales) < 1 < max(scales)  # windows enlarged and shrunk


def test_the_window_is_drawn_as_albumentations_draws_it(tmp_path):
    """The same distribution of windows as albumentations' own draw (area fraction and
    aspect ratio), over 2000 draws on one image: medians and means within 5%."""
    path = tmp_path / "a.jpg"
    Image.new("RGB", (200, 150), (90, 120, 30)).save(path)
    rrc = A.RandomResizedCrop(size=(32, 32))
    ds = LeafDataset([str(path)] * 2000, [0] * 2000, A.Compose([rrc, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=2000, backend="cpu", seed=7))
    ours = []
    for index in range(2000):
        c = json.loads(loader._core.sample_plan(0, index, 200, 150))["crop"]
        ours.append((c["width"] * c["height"] / 30000, c["width"] / c["height"]))
    rrc.set_random_seed(5)
    want = []
    for _ in range(2000):
        x0, y0, x1, y1 = rrc.get_params_dependent_on_data({"shape": (150, 200)}, {})["crop_coords"]
        want.append(((x1 - x0) * (y1 - y0) / 30000, (x1 - x0) / (y1 - y0)))
    for k in (0, 1):
        a, b = np.array([o[k] for o in ours]), np.array([w[k] for w in want])
        assert abs(np.median(a) - np.median(b)) < 0.05 * np.median(b), (k, np.median(a), np.median(b))
        assert abs(np.mean(a) - np.mean(b)) < 0.05 * np.mean(b), (k, np.mean(a), np.mean(b))


@pytest.mark.parametrize(
    "steps",
    [
        lambda: [A.Resize(40, 32), A.Normalize(mean=MEAN, std=STD)],
        lambda: [
            A.RandomBrightnessContrast(brightness_limit=(0.2, 0.2), contrast_limit=(0.1, 0.1), p=1.0),
            A.SmallestMaxSize(max_size=41),
            A.CenterCrop(40, 33),
        ],
        lambda: [
            A.LongestMaxSize(max_size=61),
            A.PadIfNeeded(min_height=64, min_width=64, border_mode=cv2.BORDER_CONSTANT, fill=(10, 120, 250)),
        ],
        lambda: [A.Resize(48, 48), A.HueSaturationValue((10, 10), (20, 20), (-5, -5), p=1.0), A.ToGray(p=1.0)],
        lambda: [
            A.Resize(48, 48),
            # One factor other than 1: the order of its steps, drawn, does not matter.
            A.ColorJitter(brightness=(1, 1), contrast=(1, 1), saturation=(0.6, 0.6), hue=(0, 0), p=1.0),
            A.Normalize(mean=MEAN, std=STD),
        ],
        lambda: [A.Resize(48, 48), A.ToSepia(p=1.0)],  # a Python tail after the native resize
    ],
)
def test_bgr_arrays_given_on_as_they_are_run_natively_as_albumentations_computes_on_them(jpeg_folder, steps):
    """A Dataset that gives `cv2.imread`'s BGR arrays to albumentations without converting
    them: hpuload reverses the decoded channels first, so that each step computes on them as
    albumentations does (a Normalize's first mean on blue, the hue and grey of BGR, a fill's
    first value in blue, a Python tail's sepia) and the batches are the Dataset's, in BGR
    order, byte for byte, on both backends."""
    files, labels = files_of(jpeg_folder)
    ds = LeafDataset(files[:16], labels[:16], A.Compose([*steps(), ToTensorV2()]), to_rgb=False)
    if type(ds.transforms.transforms[-2]).__name__ == "ToSepia":
        with pytest.warns(PythonTailWarning, match="ToSepia"):
            loader = DataLoader(ds, batch_size=8, backend="cpu")
        assert type(loader) is DataLoader
        ours, want = list(loader), theirs(ds, 8)
        assert len(ours) == len(want)
        for (x, y), (xw, yw) in zip(ours, want):
            assert torch.equal(x, xw) and torch.equal(y, yw)
        return
    same_batches_on_both_backends(ds)


def test_what_opencv_reads_otherwise_goes_to_torchs_loader_named(jpeg_folder, tmp_path):
    """A photo with an EXIF orientation (which cv2.imread turns by OpenCV's reading), a file
    with transparency, an op hpuload does not run before any resize, and a `ToFloat` that
    does not divide by 255: torch's DataLoader, the reason named."""
    files, labels = files_of(jpeg_folder)
    tf = A.Compose([A.Resize(32, 32), ToTensorV2()])
    cases = []
    exif = Image.Exif()
    exif[0x0112] = 6
    turned = tmp_path / "turned.jpg"
    Image.open(files[0]).save(turned, exif=exif.tobytes())
    cases.append((LeafDataset(files[:3] + [str(turned)], labels[:4], tf), "EXIF orientation"))
    rgba = tmp_path / "rgba.png"
    Image.open(files[0]).convert("RGBA").save(rgba)
    cases.append((LeafDataset([str(rgba)] + files[:3], labels[:4], tf), "mode RGBA"))
    elastic = A.Compose([A.ElasticTransform(), A.Resize(32, 32), ToTensorV2()])
    cases.append((LeafDataset(files, labels, elastic), "ElasticTransform"))
    to_float = A.Compose([A.Resize(32, 32), A.ToFloat(max_value=100)])
    cases.append((LeafDataset(files, labels, to_float), "ToFloat with max_value=100"))
    for ds, reason in cases:
        with pytest.warns(FallbackWarning, match=reason):
            loader = DataLoader(ds, batch_size=4)
        assert type(loader) is not DataLoader
        x, _ = next(iter(loader))  # torch's loader gives the Dataset's own samples
        if reason != "ElasticTransform":  # which draws its own coin
            assert torch.equal(x[0], torch.as_tensor(ds[0][0])), reason


def test_a_missing_file_is_named_when_read_not_when_the_loader_is_built(jpeg_folder, tmp_path):
    """A file listed but gone (`cv2.imread` would give None, and `cvtColor` fail): the loader
    is built natively and names the file when it reads it, as for any other Dataset."""
    files, labels = files_of(jpeg_folder)
    missing = str(tmp_path / "gone.jpg")
    ds = LeafDataset(files[:7] + [missing], labels[:8], A.Compose([A.Resize(32, 32), ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu"))
    with pytest.warns(UserWarning, match="gone.jpg"):
        (x, _), = list(loader)
    assert x.shape == (8, 3, 32, 32)


def test_the_compose_is_found_beside_an_unused_transform_attribute(jpeg_folder):
    """A Dataset that keeps torchvision's `transform = None` beside its albumentations
    `Compose` (code ported from a torchvision script) is learnt by the `Compose`."""
    files, labels = files_of(jpeg_folder)
    ds = LeafDataset(files, labels, A.Compose([A.Resize(40, 32), ToTensorV2()]))
    ds.transform = None
    ours = torch.cat([x for x, _ in native(lambda: DataLoader(ds, batch_size=8, backend="cpu"))])
    assert torch.equal(ours, torch.cat([x for x, _ in theirs(ds, 8)]))


def test_a_transform_replaced_by_one_hpuload_cannot_run_goes_to_torchs_loader_next_epoch(jpeg_folder):
    """The transform is watched under its own name, as `transform` is: a Compose reassigned
    after the loader is built is honoured from the next epoch."""
    files, labels = files_of(jpeg_folder)
    ds = LeafDataset(files, labels, A.Compose([A.Resize(32, 32), ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu"))
    first = torch.cat([x for x, _ in loader])
    ds.transforms = A.Compose([A.Resize(24, 24), ToTensorV2()])
    second = torch.cat([x for x, _ in loader])
    assert first.shape[-1] == 32 and second.shape[-1] == 24
    assert torch.equal(second, torch.cat([x for x, _ in theirs(ds, 8)]))


def test_steps_after_the_native_resize_run_in_python_as_albumentations_runs_them(jpeg_folder):
    """A Kaggle training transform: `RandomResizedCrop` natively, then albumentations' own
    steps (an elastic warp, Normalize, ToTensorV2) in Python on each uint8 image, from
    generators made per sample from (seed, epoch, index): each sample is the user's steps run
    on hpuload's crop with those generators, and a run repeats."""
    import random

    from hpuload import _tail
    from hpuload.torch import PythonTailWarning

    files, labels = files_of(jpeg_folder)
    rrc, hsv, norm = A.RandomResizedCrop(size=(48, 40)), A.ElasticTransform(p=1.0), A.Normalize(mean=MEAN, std=STD)
    ds = LeafDataset(files, labels, A.Compose([rrc, hsv, norm, ToTensorV2()]))
    for workers in (0, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            with pytest.warns(PythonTailWarning, match="ElasticTransform, Normalize, ToTensorV2 in Python"):
                loader = DataLoader(ds, batch_size=8, num_workers=workers, seed=11, backend="cpu")
        assert type(loader) is DataLoader
        got = torch.cat([x for x, _ in loader])
        assert torch.equal(got, torch.cat([x for x, _ in loader.__class__(ds, batch_size=8, num_workers=workers, seed=11, backend="cpu")]))
        rest = A.Compose([hsv, norm, ToTensorV2()])
        for index in range(len(files)):
            image = cv2.cvtColor(cv2.imread(files[index]), cv2.COLOR_BGR2RGB)
            c = json.loads(loader._core.sample_plan(0, index, image.shape[1], image.shape[0]))["crop"]
            box = (int(c["left"]), int(c["top"]), int(c["left"] + c["width"]), int(c["top"] + c["height"]))
            random.seed(_tail.sample_seed(11, 0, index))
            s = random.getrandbits(64)
            rest.set_random_state(np.random.default_rng(s), random.Random(s))
            want = rest(image=rrc.apply(image, crop_coords=box))["image"]
            assert torch.equal(got[index], want), (workers, index)


def by_plan(image, plan, rrc, steps, norm=None):
    """albumentations' own functions run on `image` with the parameters of hpuload's `plan`:
    the steps drawn before the crop (on the whole image), the crop, each pixel op drawn (in
    order), the flip moved into the writer, Normalize, the holes; `steps` maps each
    albumentations class to the user's instance."""

    def drawn(x, ops):
        for op in ops:
            kind, arg = op["op"], op.get("arg")
            if kind == "hflip":
                x = A.HorizontalFlip().apply(x)
            elif kind == "vflip":
                x = A.VerticalFlip().apply(x)
            elif kind == "transpose":
                x = steps["Transpose"].apply(x)
            elif kind == "rot90":
                x = steps["RandomRotate90"].apply(x, factor=arg)
            elif kind == "multiply_add":
                x = steps["RandomBrightnessContrast"].apply(x, alpha=arg["alpha"], beta=arg["beta"])
            elif kind == "cv2_affine":
                # OpenCV's own warp by the map hpuload drew (its output-to-source matrix).
                border = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE,
                          "reflect": cv2.BORDER_REFLECT, "reflect101": cv2.BORDER_REFLECT_101}[arg["border"]]
                inverse = np.array(arg["inverse"], dtype=np.float64).reshape(2, 3)
                x = cv2.warpAffine(np.ascontiguousarray(x), inverse, (x.shape[1], x.shape[0]),
                                   flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderMode=border, borderValue=tuple(arg["fill"]))
            elif kind == "cv2_gray":
                x = steps["ToGray"].apply(x)
            elif kind == "channel_shift":
                x = steps["RGBShift"].apply(x, noise_map=np.array(arg, dtype=np.float64))
            elif kind == "hsv_shift":
                x = steps["HueSaturationValue"].apply(x, hue_shift=arg["hue"], sat_shift=arg["sat"], val_shift=arg["val"])
            elif kind == "grid_distortion":
                # albumentations' own grid from the cells hpuload drew, through the user's step.
                import albumentations.augmentations.geometric.functional as fgeometric

                map_x, map_y = fgeometric.generate_grid(x.shape[:2], arg["steps_x"], arg["steps_y"], arg["num_steps"])
                x = steps["GridDistortion"].apply(x, map_x=map_x, map_y=map_y)
            elif kind == "optical_distortion":
                import albumentations.augmentations.geometric.functional as fgeometric

                map_x, map_y = fgeometric.get_camera_matrix_distortion_maps(x.shape[:2], arg["k"])
                x = steps["OpticalDistortion"].apply(x, map_x=map_x, map_y=map_y)
            elif kind == "solarize":
                # hpuload carries the first level inverted; a threshold half a level below it.
                x = A.Solarize().apply(x, threshold=(arg - 0.5) / 255)
            elif kind == "posterize":
                x = A.Posterize().apply(x, num_bits=arg)
            elif kind == "downscale":
                x = A.Downscale().apply(x, scale=arg)
            elif kind == "jpeg_round_trip":
                x = A.ImageCompression().apply(x, quality=arg, image_type=".jpg")
            elif kind == "clahe":
                x = A.CLAHE(tile_grid_size=tuple(arg["tiles"])).apply(x, clip_limit=arg["clip_limit"])
            elif kind == "drop_channels":
                x = A.ChannelDropout(fill=arg["fill"]).apply(x, channels_to_drop=[c for c in range(3) if arg["drop"][c]])
            elif kind == "albu_equalize":
                x = A.Equalize(mode=arg).apply(x, mask=None)
            elif kind == "gamma":
                x = A.RandomGamma().apply(x, gamma=arg)
            elif kind == "permute_channels":
                x = A.ChannelShuffle().apply(x, channels_shuffled=arg)
            elif kind == "invert":
                x = A.InvertImg().apply(x)
            elif kind == "box_blur":
                x = A.Blur().apply(x, kernel=arg)
            elif kind == "median_blur":
                x = A.MedianBlur().apply(x, kernel=arg)
            elif kind == "motion_blur":
                x = A.MotionBlur().apply(x, kernel=motion_kernel(arg))
            elif kind == "sep_gaussian":
                import albumentations.augmentations.blur.functional as fblur

                x = A.GaussianBlur().apply(x, kernel=fblur.create_gaussian_kernel_1d(arg["sigma"], arg["size"]))
            else:
                raise AssertionError(kind)
        return x

    # Steps before the resize or crop ran on the whole image.
    image = drawn(image, plan.get("pre", []))
    c = plan["crop"]
    box = (int(c["left"]), int(c["top"]), int(c["left"] + c["width"]), int(c["top"] + c["height"]))
    x = rrc.apply(image, crop_coords=box)
    x = drawn(x, plan.get("ops", []))
    if plan["flip"]:
        x = A.HorizontalFlip().apply(x)
    x = np.ascontiguousarray(x)
    drop = steps.get("CoarseDropout")
    holes = np.array([[b["left"], b["top"], b["left"] + b["width"], b["top"] + b["height"]] for b in plan.get("erase", [])])
    if drop is not None and len(holes) and "before" in steps:
        x = drop.apply(x, holes=holes, seed=0)
    if norm is not None:
        x = norm.apply(x)
    if drop is not None and len(holes) and "before" not in steps:
        x = drop.apply(x, holes=holes, seed=0)
    return ToTensorV2()(image=x)["image"]


def motion_kernel(arg):
    """albumentations' own `create_motion_kernel` for the size, angle, direction and shift
    draws of a plan's motion blur, normalized as `MotionBlur.get_params` normalizes it."""
    import albumentations.augmentations.blur.functional as fblur

    class Draws:  # albumentations' random_state, answering with hpuload's draws
        def __init__(self, values):
            self.values = list(values)

        def uniform(self, lo, hi):
            assert (lo, hi) == (-1, 1)
            return self.values.pop(0)

    kernel = fblur.create_motion_kernel(arg["size"], arg["angle"], arg["direction"], True, Draws(arg["shift"]))
    assert [list(p) for p in np.argwhere(kernel)] == arg["points"]
    return kernel.astype(np.float32) / np.sum(kernel)


@pytest.mark.parametrize("size", [(64, 64), (61, 97)])
def test_albumentations_blurs_give_opencvs_pixels_for_the_kernels_hpuload_draws(jpeg_folder, size):
    """Blur, MedianBlur, MotionBlur and GaussianBlur (alone and in a OneOf, the albumentations
    docs' `strong_aug` shape) run natively, and each sample is albumentations' own functions
    (`cv2.blur`, `cv2.medianBlur`, `cv2.filter2D` of albumentations' own motion kernel for
    the size, angle, direction and shift hpuload drew, `cv2.sepFilter2D` of its Gaussian
    kernel for the size and sigma drawn) bit for bit, over two epochs; 97 pixels a row leave
    `filter2D` and `sepFilter2D` a scalar rest."""
    files, labels = files_of(jpeg_folder)
    rrc = A.RandomResizedCrop(size=size)
    strong = A.OneOf([A.MotionBlur(p=0.2), A.MedianBlur(blur_limit=3, p=0.1), A.Blur(blur_limit=3, p=0.1),
                      A.GaussianBlur(blur_limit=5, p=0.2)], p=0.5)
    order = [rrc, A.Blur(blur_limit=(3, 9), p=0.3), A.MedianBlur(blur_limit=(3, 11), p=0.3),
             A.MotionBlur(blur_limit=(3, 9), p=0.3), A.GaussianBlur(sigma_limit=(0.3, 2.5), p=0.3), strong, A.HorizontalFlip()]
    ds = LeafDataset(files, labels, A.Compose(order + [ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=6))
    ops = drawn_ops(loader, files, rrc, {})
    seen = {op["op"] for op in ops}
    sizes = {(op["op"], op["arg"]["size"] if isinstance(op["arg"], dict) else op["arg"]) for op in ops}
    assert seen == {"box_blur", "median_blur", "motion_blur", "sep_gaussian"}, seen
    assert {("median_blur", 9), ("motion_blur", 9), ("box_blur", 3), ("sep_gaussian", 1), ("sep_gaussian", 11)} <= sizes, sizes


def test_gamma_channel_shuffle_and_invert_give_albumentations_pixels_and_draws(jpeg_folder, tmp_path):
    """RandomGamma (its truncated table), ChannelShuffle and InvertImg run natively: each
    sample is albumentations' own functions for the gamma, order and choice hpuload drew, bit
    for bit, over two epochs; over 3000 draws the gamma is uniform over its range and the six
    orders equally likely."""
    files, labels = files_of(jpeg_folder)
    rrc = A.RandomResizedCrop(size=(48, 48))
    steps = [A.RandomGamma(gamma_limit=(60, 150), p=0.6), A.ChannelShuffle(p=0.5), A.InvertImg(p=0.3)]
    ds = LeafDataset(files, labels, A.Compose([rrc, *steps, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=7))
    seen = {op["op"] for op in drawn_ops(loader, files, rrc, {})}
    assert seen == {"gamma", "permute_channels", "invert"}, seen
    path = tmp_path / "a.jpg"
    Image.new("RGB", (16, 16), (90, 120, 30)).save(path)
    n = 3000
    ds = LeafDataset([str(path)] * n, [0] * n, A.Compose([A.Resize(16, 16), *steps[:2], ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=n, backend="cpu", seed=2))
    gammas, orders = [], []
    for index in range(n):
        for op in json.loads(loader._core.sample_plan(0, index, 16, 16)).get("ops", []):
            (gammas if op["op"] == "gamma" else orders).append(op["arg"] if op["op"] == "gamma" else tuple(op["arg"]))
    gammas = np.array(gammas)
    assert abs(len(gammas) / n - 0.6) < 0.03 and abs(len(orders) / n - 0.5) < 0.03
    assert 0.6 <= gammas.min() and gammas.max() <= 1.5 and abs(gammas.mean() - 1.05) < 0.02
    assert abs(gammas.std() - 0.9 / 12**0.5) < 0.02
    counts = np.array([orders.count(o) for o in set(orders)]) / len(orders)
    assert len(counts) == 6 and np.all(np.abs(counts - 1 / 6) < 0.03), counts


def test_blur_sizes_and_motion_lines_are_drawn_as_albumentations_draws_them(tmp_path):
    """Over 3000 samples: each odd size equally often (albumentations' `sample_odd_from_range`,
    an even bound made odd), the motion blur's angle, direction and shifts uniform over their
    ranges, each blur as often as its p."""
    path = tmp_path / "a.jpg"
    Image.new("RGB", (32, 32), (90, 120, 30)).save(path)
    n = 3000
    steps = [A.Blur(blur_limit=(4, 8), p=0.5), A.MedianBlur(blur_limit=5, p=0.3),
             A.MotionBlur(blur_limit=(3, 7), angle_range=(10, 100), direction_range=(-0.5, 1.0), p=0.6)]
    ds = LeafDataset([str(path)] * n, [0] * n, A.Compose([A.Resize(32, 32), *steps, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=n, backend="cpu", seed=2))
    draws = {"box_blur": [], "median_blur": [], "motion_blur": []}
    for index in range(n):
        for op in json.loads(loader._core.sample_plan(0, index, 32, 32)).get("ops", []):
            draws[op["op"]].append(op["arg"])
    for kind, share, sizes in (("box_blur", 0.5, (5, 7, 9)), ("median_blur", 0.3, (3, 5)), ("motion_blur", 0.6, (3, 5, 7))):
        got = [a["size"] if kind == "motion_blur" else a for a in draws[kind]]
        assert abs(len(got) / n - share) < 0.03, kind
        counts = np.array([got.count(k) for k in sizes]) / len(got)
        assert set(got) == set(sizes) and np.all(np.abs(counts - 1 / len(sizes)) < 0.04), (kind, counts)
    # albumentations' own draws for the same transform, from its generator.
    theirs_ = A.Compose([steps[0]])
    theirs_.set_random_seed(1)
    want = [steps[0].get_params()["kernel"] for _ in range(n)]
    assert set(want) == {5, 7, 9}
    motion = np.array([[a["angle"], a["direction"], *a["shift"]] for a in draws["motion_blur"]])
    for values, (lo, hi) in zip(motion.T, ((10, 100), (-0.5, 1.0), (-1, 1), (-1, 1))):
        assert lo <= values.min() and values.max() <= hi and abs(values.mean() - (lo + hi) / 2) < 0.05 * (hi - lo)
        assert abs(values.std() - (hi - lo) / 12**0.5) < 0.05 * (hi - lo)


@pytest.mark.parametrize("per_channel", [True, False])
def test_gauss_noise_has_albumentations_distribution_truncated_and_saturating(tmp_path, per_channel):
    """GaussNoise through the drop-in against albumentations' own through torch's loader, on a
    flat grey image: the noise added (output minus the grey) has the same mean, spread and
    percentiles, whole levels, one value per pixel for all channels unless per channel; each
    sample's noise spread is the sigma its plan drew, and the draws cover the range
    uniformly; the same seed gives the same noise."""
    path = tmp_path / "grey.png"
    Image.new("RGB", (48, 48), (128, 128, 128)).save(path)
    n = 400
    noise = A.GaussNoise(std_range=(0.05, 0.15), mean_range=(-0.04, 0.06), per_channel=per_channel, p=0.8)
    ds = LeafDataset([str(path)] * n, [0] * n, A.Compose([A.Resize(48, 48), noise, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=50, backend="cpu", seed=8))
    ours = torch.cat([x for x, _ in loader]).numpy().astype(np.int64) - 128
    again = native(lambda: DataLoader(ds, batch_size=50, backend="cpu", seed=8))
    again = torch.cat([x for x, _ in again]).numpy().astype(np.int64) - 128
    theirs_ = torch.cat([x for x, _ in theirs(ds, 50)]).numpy().astype(np.int64) - 128
    noisy = [bool(json.loads(loader._core.sample_plan(0, i, 48, 48)).get("ops")) for i in range(n)]
    assert abs(np.mean(noisy) - 0.8) < 0.06
    for i in range(n):
        d = ours[i]
        if not noisy[i]:
            assert not d.any()
            continue
        arg = json.loads(loader._core.sample_plan(0, i, 48, 48))["ops"][0]["arg"]
        assert 0.05 <= arg["std"] <= 0.15 and -0.04 <= arg["mean"] <= 0.06
        assert abs(d.std() - arg["std"] * 255) < 0.1 * arg["std"] * 255, (i, d.std(), arg)
        assert abs(d.mean() - arg["mean"] * 255) < 0.6 + 0.15 * arg["std"] * 255, (i, d.mean(), arg)
        assert per_channel or (d[0] == d[1]).all() and (d[1] == d[2]).all()
    mine, want = ours[np.array(noisy)], theirs_[np.abs(theirs_).sum(axis=(1, 2, 3)) > 0]
    # Each set's mean and spread vary with its ~320 samples' drawn means and sigmas (the mean's
    # standard error is about 0.4 levels, the spread's 2%): four standard errors apart at most.
    assert abs(mine.mean() - want.mean()) < 2.4 and abs(mine.std() / want.std() - 1) < 0.1, (mine.mean(), want.mean(), mine.std(), want.std())
    for q in (1, 10, 25, 50, 75, 90, 99):
        assert abs(np.percentile(mine, q) - np.percentile(want, q)) <= 4, q
    assert np.array_equal(ours, again)


@pytest.mark.parametrize("dropout_before_normalize", [False, True])
def test_albumentations_pixel_ops_give_its_pixels_for_the_parameters_hpuload_draws(jpeg_folder, dropout_before_normalize):
    """A Kaggle training Compose of albumentations' own pixel ops (Transpose, flips,
    RandomRotate90, ShiftScaleRotate, Affine, HueSaturationValue, RGBShift, ToGray, RandomBrightnessContrast,
    Normalize, CoarseDropout)
    runs natively, and each sample is albumentations' own functions run with the crop,
    choices and parameters hpuload drew for it (its plan), bit for bit, over two epochs;
    the holes' fill normalized as the user's Normalize would, when they come before it."""
    files, labels = files_of(jpeg_folder)
    rrc = A.RandomResizedCrop(size=(64, 64))
    steps = {
        "Transpose": A.Transpose(p=0.5),
        "RandomRotate90": A.RandomRotate90(p=0.5),
        "HueSaturationValue": A.HueSaturationValue(p=0.7),
        "RGBShift": A.RGBShift(r_shift_limit=(-60, 40), g_shift_limit=15, b_shift_limit=0.9, p=0.7),
        "ToGray": A.ToGray(p=0.3),
        "RandomBrightnessContrast": A.RandomBrightnessContrast(p=0.7),
        "CoarseDropout": A.CoarseDropout(num_holes_range=(1, 3), fill=(10, 200, 90) if dropout_before_normalize else 0, p=0.7),
    }
    norm = A.Normalize(mean=MEAN, std=STD)
    order = [rrc, steps["Transpose"], A.HorizontalFlip(), A.VerticalFlip(), steps["RandomRotate90"],
             A.ShiftScaleRotate(p=0.5), A.Affine(shear=(-10, 10), border_mode=cv2.BORDER_REFLECT_101, p=0.5),
             steps["HueSaturationValue"], steps["RGBShift"], steps["ToGray"], steps["RandomBrightnessContrast"]]
    order += [steps["CoarseDropout"], norm] if dropout_before_normalize else [norm, steps["CoarseDropout"]]
    if dropout_before_normalize:
        steps["before"] = True
    ds = LeafDataset(files, labels, A.Compose(order + [ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=3))
    seen = set()
    for epoch in (0, 1):
        got = torch.cat([x for x, _ in loader])
        for index in range(len(files)):
            image = cv2.cvtColor(cv2.imread(files[index]), cv2.COLOR_BGR2RGB)
            plan = json.loads(loader._core.sample_plan(epoch, index, image.shape[1], image.shape[0]))
            seen.update(op["op"] for op in plan.get("ops", []))
            seen.update(["holes"] if plan.get("erase") else [])
            want = by_plan(image, plan, rrc, steps, norm)
            assert torch.equal(got[index], want), (epoch, index, plan.get("ops"), plan.get("erase"))
    assert seen >= {"transpose", "rot90", "vflip", "cv2_affine", "hsv_shift", "channel_shift", "cv2_gray", "multiply_add", "holes"}, seen


def color_jitter_params(ops):
    """albumentations' `ColorJitter.apply` parameters for the steps hpuload drew: each
    factor from its op, the order from the ops' order (a hue of 0 is drawn as no step)."""
    kinds = {"multiply_add": 0, "cv2_contrast": 1, "cv2_saturation": 2, "hsv_shift": 3}
    steps = [(kinds[op["op"]], op["arg"]) for op in ops]
    params = {"brightness": None, "contrast": None, "saturation": None, "hue": 0.0}
    for k, arg in steps:
        if k == 0:
            assert arg["beta"] == 0.0
            params["brightness"] = arg["alpha"]
        elif k == 1:
            params["contrast"] = arg
        elif k == 2:
            params["saturation"] = arg
        else:
            assert arg["sat"] == 0.0 and arg["val"] == 0.0
            params["hue"] = arg["hue"] / 180
    order = [k for k, _ in steps]
    order += [3] if 3 not in order else []
    return {**params, "order": order}


def test_color_jitter_gives_albumentations_pixels_for_the_parameters_hpuload_draws(jpeg_folder, tmp_path):
    """albumentations' `ColorJitter` runs natively (no Python tail): each sample is
    albumentations' own `ColorJitter.apply` run on the resized image with the factors and the
    order hpuload drew, bit for bit, over photos and a PNG of random pixels (every kind of
    byte and grey pair, where OpenCV's fused multiply-adds round)."""
    files, labels = files_of(jpeg_folder)
    noise = tmp_path / "noise.png"
    Image.fromarray(np.random.default_rng(5).integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(noise)
    files, labels = files[:15] + [str(noise)], labels[:15] + [0]
    resize = A.Resize(64, 64)
    jitter = A.ColorJitter(brightness=(0.5, 1.5), contrast=(0.0, 1.7), saturation=(0.0, 2.0), hue=(-0.3, 0.3), p=0.9)
    ds = LeafDataset(files, labels, A.Compose([resize, jitter, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=5))
    jittered = 0
    for epoch in (0, 1, 2):
        got = torch.cat([x for x, _ in loader])
        for index in range(len(files)):
            image = cv2.cvtColor(cv2.imread(files[index]), cv2.COLOR_BGR2RGB)
            plan = json.loads(loader._core.sample_plan(epoch, index, image.shape[1], image.shape[0]))
            want = resize(image=image)["image"]
            if plan.get("ops"):
                jittered += 1
                want = jitter.apply(want, **color_jitter_params(plan["ops"]))
            assert torch.equal(got[index], ToTensorV2()(image=want)["image"]), (epoch, index, plan.get("ops"))
    assert jittered > 30


@pytest.mark.parametrize(
    "factors",
    [
        {"brightness": 0.3},
        {"brightness": 1.21},
        {"contrast": 0.0},
        {"contrast": 0.77},
        {"contrast": 1.21},
        {"saturation": 0.3},
        {"saturation": 1.21},
        {"hue": 0.1},
        {"hue": -0.25},
    ],
)
def test_color_jitter_with_fixed_factors_gives_its_own_output(jpeg_folder, tmp_path, factors):
    """Each of `ColorJitter`'s steps alone at a factor where float32 rounding decides some
    bytes (0.3 against 0.7 lands on halves): the drop-in's batches equal the Dataset's own
    samples through torch's DataLoader, over a photo and a PNG of random pixels (OpenCV's
    saturation fuses its multiply-adds; done otherwise, about one byte in a thousand
    differs)."""
    files, labels = files_of(jpeg_folder)
    noise = tmp_path / "noise.png"
    Image.fromarray(np.random.default_rng(6).integers(0, 256, (128, 128, 3), dtype=np.uint8)).save(noise)
    ranges = {"brightness": (1.0, 1.0), "contrast": (1.0, 1.0), "saturation": (1.0, 1.0), "hue": (0.0, 0.0)}
    ranges.update({k: (v, v) for k, v in factors.items()})
    tf = A.Compose([A.Resize(128, 128), A.ColorJitter(**ranges, p=1.0), ToTensorV2()])
    ds = LeafDataset([str(noise), files[0]], [0, labels[0]], tf)
    loader = native(lambda: DataLoader(ds, batch_size=2, backend="cpu"))
    (got, _), (want, _) = next(iter(loader)), theirs(ds, 2)[0]
    assert torch.equal(got, want), (got != want).sum().item()


@pytest.mark.parametrize(
    "step",
    [
        lambda: A.Sharpen(alpha=(0.3, 0.3), lightness=(0.7, 0.7), p=1.0),
        lambda: A.Sharpen(alpha=(1.0, 1.0), lightness=(0.5, 0.5), p=1.0),
        lambda: A.Emboss(alpha=(0.35, 0.35), strength=(0.6, 0.6), p=1.0),
        lambda: A.Emboss(alpha=(0.77, 0.77), strength=(0.2, 0.2), p=1.0),
    ],
)
def test_sharpen_and_emboss_with_fixed_parameters_give_their_own_output(jpeg_folder, tmp_path, step):
    """`Sharpen` and `Emboss` at fixed parameters: the drop-in's batches equal the Dataset's
    own samples through torch's DataLoader (their kernels built in float32 as numpy builds
    them, `cv2.filter2D`'s sums fused as its kernels fuse them), over photos and a PNG of
    random pixels, at widths whose rows end in a scalar rest."""
    files, labels = files_of(jpeg_folder)
    noise = tmp_path / "noise.png"
    Image.fromarray(np.random.default_rng(7).integers(0, 256, (61, 67, 3), dtype=np.uint8)).save(noise)
    tf = A.Compose([A.Resize(61, 67), step(), ToTensorV2()])
    ds = LeafDataset([str(noise)] + files[:3], [0] + labels[:3], tf)
    loader = native(lambda: DataLoader(ds, batch_size=4, backend="cpu"))
    (got, _), (want, _) = next(iter(loader)), theirs(ds, 4)[0]
    assert torch.equal(got, want), (got != want).sum().item()


def test_sharpen_and_emboss_draw_albumentations_parameters(jpeg_folder):
    """Drawn: each sample is albumentations' own `apply` with the kernel hpuload drew (two
    epochs), and the kernels' parameters spread over their ranges as albumentations draws
    them."""
    files, labels = files_of(jpeg_folder)
    sharpen, emboss = A.Sharpen(alpha=(0.1, 0.6), lightness=(0.2, 1.5), p=0.6), A.Emboss(p=0.6)
    resize = A.Resize(48, 48)
    ds = LeafDataset(files, labels, A.Compose([resize, sharpen, emboss, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=4))
    kernels = []
    for epoch in (0, 1):
        got = torch.cat([x for x, _ in loader])
        for index in range(len(files)):
            image = cv2.cvtColor(cv2.imread(files[index]), cv2.COLOR_BGR2RGB)
            plan = json.loads(loader._core.sample_plan(epoch, index, image.shape[1], image.shape[0]))
            want = resize(image=image)["image"]
            for op in plan.get("ops", []):
                assert op["op"] == "filter3x3", op
                kernel = np.array(op["arg"], dtype=np.float32).reshape(3, 3)
                kernels.append(kernel)
                want = sharpen.apply(want, alpha=0.0, sharpening_matrix=kernel) if kernel[0, 2] != 0 else emboss.apply(want, emboss_matrix=kernel)
            assert torch.equal(got[index], ToTensorV2()(image=want)["image"]), (epoch, index)
    sharp = [k for k in kernels if k[0, 2] != 0]
    alphas = np.array([-k[0, 0] for k in sharp])
    assert len(sharp) > 20 and 0.1 <= alphas.min() and alphas.max() <= 0.6
    assert len(kernels) - len(sharp) > 20


def test_color_jitter_draws_albumentations_distributions(tmp_path):
    """Over 3000 samples: `ColorJitter` runs with probability `p`, each factor is uniform in
    its range, and its four steps come in each of the 24 orders equally often."""
    path = tmp_path / "a.jpg"
    Image.new("RGB", (16, 16), (90, 120, 30)).save(path)
    jitter = A.ColorJitter(brightness=0.4, contrast=(0.5, 1.0), saturation=(1.0, 3.0), hue=0.2, p=0.7)
    n = 3000
    ds = LeafDataset([str(path)] * n, [0] * n, A.Compose([A.Resize(16, 16), jitter, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=n, backend="cpu", seed=9))
    drawn = [color_jitter_params(ops) for ops in (json.loads(loader._core.sample_plan(0, i, 16, 16)).get("ops") for i in range(n)) if ops]
    assert abs(len(drawn) / n - 0.7) < 0.04
    for name, (lo, hi) in (("brightness", (0.6, 1.4)), ("contrast", (0.5, 1.0)), ("saturation", (1.0, 3.0)), ("hue", (-0.2, 0.2))):
        values = np.array([d[name] for d in drawn])
        assert lo <= values.min() and values.max() <= hi, name
        assert abs(values.mean() - (lo + hi) / 2) < 0.03 * (hi - lo), name
        assert abs(values.std() - (hi - lo) / 12**0.5) < 0.03 * (hi - lo), name
    orders = {}
    for d in drawn:
        orders[tuple(d["order"])] = orders.get(tuple(d["order"]), 0) + 1
    assert len(orders) == 24 and all(abs(c / len(drawn) - 1 / 24) < 0.015 for c in orders.values()), orders


@pytest.mark.parametrize("hole_ranges", [((0.1, 0.3), (0.05, 0.15)), ((3, 9), (2, 12))])
def test_albumentations_pixel_ops_draw_albumentations_distributions(tmp_path, hole_ranges):
    """Over 3000 samples, each op's parameters as albumentations draws them: how often it runs,
    the mean and range of each shift and factor, RandomRotate90's four factors equally often,
    CoarseDropout's hole counts and sizes (given as fractions of the image, or pixels)."""
    path = tmp_path / "a.jpg"
    Image.new("RGB", (64, 64), (90, 120, 30)).save(path)
    hsv = A.HueSaturationValue(hue_shift_limit=(-10, 30), sat_shift_limit=25, val_shift_limit=(0, 40), p=0.6)
    rbc = A.RandomBrightnessContrast(brightness_limit=(-0.1, 0.3), contrast_limit=0.25, p=0.4)
    rgb = A.RGBShift(r_shift_limit=(-30, 10), g_shift_limit=20, b_shift_limit=(0.1, 0.5), p=0.5)
    rot, drop = A.RandomRotate90(p=1.0), A.CoarseDropout(num_holes_range=(1, 4), hole_height_range=hole_ranges[0], hole_width_range=hole_ranges[1], p=1.0)
    n = 3000
    ds = LeafDataset([str(path)] * n, [0] * n, A.Compose([A.Resize(64, 64), hsv, rbc, rgb, rot, drop, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=n, backend="cpu", seed=9))
    draws = {"hsv_shift": [], "multiply_add": [], "channel_shift": [], "rot90": [], "holes": [], "sizes": []}
    for index in range(n):
        plan = json.loads(loader._core.sample_plan(0, index, 64, 64))
        ops = {op["op"]: op.get("arg") for op in plan.get("ops", [])}
        for k in ("hsv_shift", "multiply_add"):
            if k in ops:
                draws[k].append(list(ops[k].values()))
        if "channel_shift" in ops:
            draws["channel_shift"].append(ops["channel_shift"])
        draws["rot90"].append(ops.get("rot90", 0))
        draws["holes"].append(len(plan["erase"]))
        draws["sizes"] += [(b["height"], b["width"]) for b in plan["erase"]]
    assert abs(len(draws["hsv_shift"]) / n - 0.6) < 0.04 and abs(len(draws["multiply_add"]) / n - 0.4) < 0.04
    h, s_, v = np.array(draws["hsv_shift"]).T
    for values, (lo, hi) in ((h, (-10, 30)), (s_, (-25, 25)), (v, (0, 40))):
        assert lo <= values.min() and values.max() < hi and abs(values.mean() - (lo + hi) / 2) < 0.05 * (hi - lo)
    alpha, beta = np.array(draws["multiply_add"]).T
    assert 0.75 <= alpha.min() and alpha.max() < 1.25 and abs(alpha.mean() - 1) < 0.02
    assert -25.5 <= beta.min() and beta.max() < 76.5 and abs(beta.mean() - 25.5) < 3
    # RGBShift: the shift albumentations adds is its draw truncated toward zero.
    assert abs(len(draws["channel_shift"]) / n - 0.5) < 0.04
    rgb.set_random_seed(2)
    image = np.zeros((4, 4, 3), np.uint8)
    want = np.trunc([rgb.get_params_dependent_on_data({"shape": (4, 4, 3)}, {"image": image})["noise_map"] for _ in range(n)])
    ours = np.array(draws["channel_shift"])
    for c in range(3):
        assert ours[:, c].min() == want[:, c].min() and ours[:, c].max() == want[:, c].max(), c
        assert abs(ours[:, c].mean() - want[:, c].mean()) < 1.0 and abs(ours[:, c].std() - want[:, c].std()) < 1.0
    counts = np.bincount(draws["rot90"], minlength=4) / n
    assert np.all(np.abs(counts - 0.25) < 0.03), counts
    holes = np.bincount(draws["holes"], minlength=5)[1:] / n
    assert np.all(np.abs(holes - 0.25) < 0.03), holes
    heights, widths = np.array(draws["sizes"]).T
    ref = A.Compose([drop])
    ref.set_random_seed(4)
    want = np.concatenate([ref.transforms[0].get_params_dependent_on_data({"shape": (64, 64)}, {})["holes"] for _ in range(n)])
    for ours, theirs_ in ((heights, want[:, 3] - want[:, 1]), (widths, want[:, 2] - want[:, 0])):
        assert ours.min() == theirs_.min() and ours.max() == theirs_.max(), (ours.min(), theirs_.min(), ours.max(), theirs_.max())
        assert abs(ours.mean() - theirs_.mean()) < 0.05 * theirs_.mean()


def test_one_of_applies_one_step_chosen_by_their_ps_as_albumentations_does(jpeg_folder, tmp_path):
    """`OneOf([...], p)`: with probability `p`, one of its steps, chosen with weights their
    own `p`s and then applied for certain: over 3000 samples each step's share is
    albumentations' (`p * p_i / sum(p)`); through the drop-in each sample is albumentations'
    own functions run with the step and parameters hpuload drew (bit for bit)."""
    path = tmp_path / "a.jpg"
    Image.new("RGB", (64, 64), (90, 120, 30)).save(path)
    one = A.OneOf([A.RGBShift(p=0.1), A.RandomBrightnessContrast(p=0.3), A.VerticalFlip(p=0.0), A.HueSaturationValue(p=0.4)], p=0.8)
    n = 3000
    ds = LeafDataset([str(path)] * n, [0] * n, A.Compose([A.Resize(64, 64), one, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=n, backend="cpu", seed=9))
    counts = {"channel_shift": 0, "multiply_add": 0, "vflip": 0, "hsv_shift": 0, "none": 0}
    for index in range(n):
        ops = json.loads(loader._core.sample_plan(0, index, 64, 64)).get("ops", [])
        assert len(ops) <= 1
        counts[ops[0]["op"] if ops else "none"] += 1
    # A drawn shift of zero (RGBShift's, HSV's) adds no op: counted with "none", rarely.
    for k, share in (("channel_shift", 0.8 / 8), ("multiply_add", 0.8 * 3 / 8), ("hsv_shift", 0.8 * 4 / 8)):
        assert abs(counts[k] / n - share) < 0.03, (k, counts)
    assert counts["vflip"] == 0 and abs(counts["none"] / n - 0.2) < 0.03, counts
    files, labels = files_of(jpeg_folder)
    steps = {"RGBShift": one.transforms[0], "RandomBrightnessContrast": one.transforms[1], "HueSaturationValue": one.transforms[3]}
    rrc = A.RandomResizedCrop(size=(48, 48))
    ds = LeafDataset(files, labels, A.Compose([rrc, one, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=4))
    seen = {op["op"] for op in drawn_ops(loader, files, rrc, steps)}
    assert seen == {"channel_shift", "multiply_add", "hsv_shift"}, seen


def _named(name, t):
    """`t`, marked to be logged as `name` when it runs (see `_log_applied`)."""
    t._hpuload_test_name = name
    return t


def _log_applied(compose, log):
    """Makes each marked step inside `compose` (at any depth) append its name to `log` when
    albumentations applies it to an image."""
    for t in compose.transforms:
        if hasattr(t, "transforms"):
            _log_applied(t, log)
        elif hasattr(t, "_hpuload_test_name"):
            apply = t._key2func["image"]
            t._key2func["image"] = lambda img, *a, _f=apply, _n=t._hpuload_test_name, **k: (log.append(_n), _f(img, *a, **k))[1]


def _steps4():
    return [_named("invert", A.InvertImg(p=1.0)), _named("vflip", A.VerticalFlip(p=0.5)),
            _named("cv2_gray", A.ToGray(p=1.0)), _named("transpose", A.Transpose(p=0.8))]


COMPOSITIONS = {
    "some_of": lambda: A.SomeOf(_steps4(), n=2, p=0.9),
    "some_of_with_replacement": lambda: A.SomeOf(_steps4(), n=2, replace=True, p=1.0),
    "random_order": lambda: A.RandomOrder(_steps4(), n=3, p=0.8),
    "one_or_other": lambda: A.OneOrOther(_named("invert", A.InvertImg(p=0.1)), _named("vflip", A.VerticalFlip(p=0.1)), p=0.3),
    "sequential": lambda: A.Sequential([_named("invert", A.InvertImg(p=0.5)), _named("transpose", A.Transpose(p=0.7))], p=0.6),
    "nested": lambda: A.OneOf([
        A.OneOf([_named("invert", A.InvertImg(p=0.2)), _named("vflip", A.VerticalFlip(p=0.6))], p=0.5),
        A.SomeOf([_named("cv2_gray", A.ToGray(p=1.0)), _named("transpose", A.Transpose(p=0.5))], n=1, p=0.5),
        A.Sequential([_named("invert", A.InvertImg(p=1.0)), _named("cv2_gray", A.ToGray(p=0.5))], p=0.1),
    ], p=0.9),
}


@pytest.mark.parametrize("kind", sorted(COMPOSITIONS))
def test_compositions_apply_their_steps_in_albumentations_order_and_proportions(tmp_path, kind):
    """`SomeOf` (its n steps picked uniformly, with or without replacement, applied in the
    list's order, each by its own p), `RandomOrder` (in the order picked), `OneOrOther`,
    `Sequential` and compositions nested in `OneOf` (which forces the one it chooses): over
    4000 samples of a Resize and the composition, the share of each sequence of steps hpuload
    applies is the share albumentations' own Compose applies (within 4.5 standard errors), with
    no step run in Python."""
    from hpuload.torch import PythonTailWarning

    path = tmp_path / "a.jpg"
    Image.new("RGB", (32, 32), (90, 120, 30)).save(path)
    n = 4000
    ds = LeafDataset([str(path)] * n, [0] * n, A.Compose([A.Resize(32, 32), COMPOSITIONS[kind](), ToTensorV2()]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PythonTailWarning)
        loader = native(lambda: DataLoader(ds, batch_size=n, backend="cpu", seed=3))
    ours = collections.Counter(
        tuple(op["op"] for op in json.loads(loader._core.sample_plan(0, index, 32, 32)).get("ops", [])) for index in range(n)
    )
    log = []
    # Unseeded: a Compose given a seed seeds every step's generator with it, so that their
    # coins fall together (a Sequential's second step then runs whenever a likelier first does).
    compose = A.Compose([COMPOSITIONS[kind]()])
    _log_applied(compose, log)
    image = np.zeros((32, 32, 3), np.uint8)
    theirs_ = collections.Counter()
    for _ in range(n):
        log.clear()
        compose(image=image)
        theirs_[tuple(log)] += 1
    assert set(ours) <= set(theirs_), set(ours) - set(theirs_)
    for seq in theirs_:
        share = theirs_[seq] / n
        tolerance = 4.5 * np.sqrt(2 * share * (1 - share) / n) + 1 / n
        assert abs(ours[seq] / n - share) <= tolerance, (seq, ours[seq], theirs_[seq])


def test_nested_compositions_give_albumentations_pixels_for_the_parameters_hpuload_draws(jpeg_folder):
    """A `SomeOf` and a `OneOf` holding a `Sequential` and another `OneOf` of colour steps
    after a RandomResizedCrop: each sample is albumentations' own functions run with the steps
    and parameters hpuload drew (bit for bit), natively."""
    files, labels = files_of(jpeg_folder)
    steps = {"RGBShift": A.RGBShift(p=0.7), "RandomBrightnessContrast": A.RandomBrightnessContrast(p=0.8),
             "HueSaturationValue": A.HueSaturationValue(p=0.9), "ToGray": A.ToGray(p=0.5)}
    rrc = A.RandomResizedCrop(size=(48, 48))
    some = A.SomeOf([steps["RGBShift"], A.VerticalFlip(p=0.5), steps["RandomBrightnessContrast"]], n=2, p=0.9)
    one = A.OneOf([A.Sequential([steps["HueSaturationValue"], A.InvertImg(p=0.5)]),
                   A.OneOf([steps["ToGray"], A.RandomGamma(p=1.0)])], p=0.8)
    ds = LeafDataset(files, labels, A.Compose([rrc, some, one, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=6))
    seen = {op["op"] for op in drawn_ops(loader, files, rrc, steps, epochs=(0, 1, 2))}
    assert {"channel_shift", "multiply_add", "hsv_shift"} <= seen, seen


GRID_DISTORTIONS = {
    "default": dict(),
    "reflect101_seven_steps": dict(num_steps=7, distort_limit=0.5, border_mode=cv2.BORDER_REFLECT_101),
    "constant_fill_not_normalized": dict(num_steps=4, distort_limit=(-0.4, 0.2), normalized=False, fill=(200, 30, 90)),
    "replicate": dict(num_steps=3, border_mode=cv2.BORDER_REPLICATE),
}


@pytest.mark.parametrize("kind", sorted(GRID_DISTORTIONS))
def test_grid_distortion_gives_albumentations_pixels_for_the_grid_hpuload_draws(jpeg_folder, kind):
    """`GridDistortion` after a RandomResizedCrop (its default and other steps, borders and
    fills, normalized or not): each sample is albumentations' own `generate_grid` and `apply`
    (OpenCV's `remap`) run with the cells hpuload drew, bit for bit, natively."""
    files, labels = files_of(jpeg_folder)
    grid = A.GridDistortion(p=0.7, **GRID_DISTORTIONS[kind])
    rrc = A.RandomResizedCrop(size=(44, 52))
    ds = LeafDataset(files, labels, A.Compose([rrc, grid, A.HorizontalFlip(), ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=2))
    assert any(op["op"] == "grid_distortion" for op in drawn_ops(loader, files, rrc, {"GridDistortion": grid}))


OPTICAL_DISTORTIONS = {
    "default": dict(),
    "strong_reflect101": dict(distort_limit=(-0.6, 0.9), border_mode=cv2.BORDER_REFLECT_101),
    "constant_fill": dict(distort_limit=0.4, fill=(15, 250, 99)),
    "replicate": dict(distort_limit=0.3, border_mode=cv2.BORDER_REPLICATE),
}


@pytest.mark.parametrize("kind", sorted(OPTICAL_DISTORTIONS))
@pytest.mark.parametrize("size", [(44, 52), (57, 31)])
def test_optical_distortion_gives_albumentations_pixels_for_the_k_hpuload_draws(jpeg_folder, kind, size):
    """`OpticalDistortion` (camera mode) after a RandomResizedCrop: each sample is
    albumentations' own map (OpenCV's `initUndistortRectifyMap` of its camera) and `apply`
    (`remap`) with the coefficient hpuload drew, bit for bit, natively; its k uniform in the
    range."""
    files, labels = files_of(jpeg_folder)
    optical = A.OpticalDistortion(p=0.8, **OPTICAL_DISTORTIONS[kind])
    rrc = A.RandomResizedCrop(size=size)
    ds = LeafDataset(files, labels, A.Compose([rrc, optical, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=4))
    ops = drawn_ops(loader, files, rrc, {"OpticalDistortion": optical})
    ks = [op["arg"]["k"] for op in ops if op["op"] == "optical_distortion"]
    lo, hi = optical.distort_limit
    assert ks and all(lo <= k <= hi for k in ks)
    n = 4000
    path = files[0]
    ds = LeafDataset([path] * n, [0] * n, A.Compose([A.Resize(*size), optical, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=n, backend="cpu", seed=6))
    ks = [op["arg"]["k"] for index in range(n) for op in json.loads(loader._core.sample_plan(0, index, 40, 30)).get("ops", [])]
    assert abs(len(ks) / n - 0.8) < 0.03
    for q in (0.1, 0.5, 0.9):
        assert abs(np.quantile(ks, q) - (lo + q * (hi - lo))) < 0.03 * (hi - lo), q


@pytest.mark.parametrize("mode", ["cv", "pil"])
def test_solarize_posterize_and_equalize_give_albumentations_pixels_and_draws(jpeg_folder, tmp_path, mode):
    """`Solarize`, `Posterize` and `Equalize` (OpenCV's `equalizeHist` by channel, or
    albumentations' `pil` table) after a RandomResizedCrop: each sample is albumentations' own
    `apply` with hpuload's parameters, bit for bit, natively; over 4000 samples the first
    level inverted is distributed as `ceil(255 * U(range))` of albumentations' thresholds, the
    bits as its `randint`, and each op drawn with its p."""
    files, labels = files_of(jpeg_folder)
    solarize = A.Solarize(threshold_range=(0.3, 0.8), p=0.6)
    posterize = A.Posterize(num_bits=(2, 6), p=0.6)
    equalize = A.Equalize(mode=mode, p=0.5)
    rrc = A.RandomResizedCrop(size=(40, 36))
    ds = LeafDataset(files, labels, A.Compose([rrc, solarize, posterize, equalize, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=7))
    seen = {op["op"] for op in drawn_ops(loader, files, rrc, {})}
    assert seen == {"solarize", "posterize", "albu_equalize"}, seen
    n = 4000
    drawn = collections.defaultdict(list)
    for ops in ops_on_a_constant_image(tmp_path, [solarize, posterize, equalize], n):
        for op in ops:
            drawn[op["op"]].append(op.get("arg"))
    for kind, p in (("solarize", 0.6), ("posterize", 0.6), ("albu_equalize", 0.5)):
        assert abs(len(drawn[kind]) / n - p) < 0.03, (kind, len(drawn[kind]))
    ref = A.Compose([solarize, posterize])
    ref.set_random_seed(2)
    levels = np.ceil(255 * np.array([solarize.get_params()["threshold"] for _ in range(n)]))
    ours = np.array(drawn["solarize"])
    assert ours.min() >= levels.min() and ours.max() <= levels.max()
    for q in (0.1, 0.5, 0.9):
        assert abs(np.quantile(ours, q) - np.quantile(levels, q)) <= 3, q
    bits = np.bincount([posterize.get_params()["num_bits"] for _ in range(n)], minlength=9) / n
    ours = np.bincount(drawn["posterize"], minlength=9) / len(drawn["posterize"])
    assert np.all(np.abs(ours - bits) < 0.035), (ours, bits)


def test_channel_dropout_gives_albumentations_pixels_and_draws(jpeg_folder, tmp_path):
    """`ChannelDropout(channel_drop_range=(1, 2), fill=40)` after a RandomResizedCrop: each
    sample is albumentations' own `apply` with the channels hpuload drew, natively; over 3000
    samples the number dropped is `randint(1, 2)` and each channel is dropped as often as
    albumentations drops it."""
    files, labels = files_of(jpeg_folder)
    drop = A.ChannelDropout(channel_drop_range=(1, 2), fill=40, p=0.7)
    rrc = A.RandomResizedCrop(size=(30, 34))
    ds = LeafDataset(files, labels, A.Compose([rrc, drop, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=3))
    assert any(op["op"] == "drop_channels" for op in drawn_ops(loader, files, rrc, {}))
    n = 3000
    ours = [op["arg"]["drop"] for ops in ops_on_a_constant_image(tmp_path, [drop], n) for op in ops]
    assert abs(len(ours) / n - 0.7) < 0.03
    ref = A.Compose([drop])
    ref.set_random_seed(2)
    image = np.zeros((8, 8, 3), np.uint8)
    theirs_ = [drop.get_params_dependent_on_data({}, {"image": image})["channels_to_drop"] for _ in range(len(ours))]
    for count in (1, 2):
        share = sum(sum(d) == count for d in ours) / len(ours)
        assert abs(share - sum(len(c) == count for c in theirs_) / len(theirs_)) < 0.04, count
    for c in range(3):
        share = sum(d[c] for d in ours) / len(ours)
        assert abs(share - sum(c in t for t in theirs_) / len(theirs_)) < 0.04, c


@pytest.mark.parametrize("size", [(48, 40), (37, 53)])
def test_downscale_gives_albumentations_pixels_for_the_scale_hpuload_draws(jpeg_folder, size):
    """`Downscale(scale_range=(0.2, 0.7))` (nearest both ways) after a RandomResizedCrop: each
    sample is albumentations' own `apply` (two `cv2.resize`) with the scale hpuload drew,
    natively, and the scales lie in the range."""
    files, labels = files_of(jpeg_folder)
    down = A.Downscale(scale_range=(0.2, 0.7), p=0.8)
    rrc = A.RandomResizedCrop(size=size)
    ds = LeafDataset(files, labels, A.Compose([rrc, down, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=5))
    scales = [op["arg"] for op in drawn_ops(loader, files, rrc, {}) if op["op"] == "downscale"]
    assert scales and all(0.2 <= s <= 0.7 for s in scales)


@pytest.mark.parametrize("size", [(48, 40), (37, 53)])
def test_image_compression_gives_albumentations_pixels_and_draws(jpeg_folder, tmp_path, size):
    """`ImageCompression` (JPEG, qualities 5 to 95) after a RandomResizedCrop, sizes a whole
    number of MCUs or not: each sample is albumentations' own `apply` (`cv2.imencode` and
    `cv2.imdecode`) at the quality hpuload drew, bit for bit, natively; over 4000 samples the
    op is drawn with its p and the quality as its `randint` (the extremes and the deciles)."""
    files, labels = files_of(jpeg_folder)
    compress = A.ImageCompression(quality_range=(5, 95), p=0.7)
    rrc = A.RandomResizedCrop(size=size)
    ds = LeafDataset(files, labels, A.Compose([rrc, compress, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=4))
    assert any(op["op"] == "jpeg_round_trip" for op in drawn_ops(loader, files, rrc, {}))
    n = 4000
    ours = [op["arg"] for ops in ops_on_a_constant_image(tmp_path, [compress], n) for op in ops]
    assert abs(len(ours) / n - 0.7) < 0.03
    ref = A.Compose([compress])
    ref.set_random_seed(2)
    theirs_ = [compress.get_params()["quality"] for _ in range(n)]
    assert min(ours) == min(theirs_) == 5 and max(ours) == max(theirs_) == 95
    for q in (0.1, 0.3, 0.5, 0.7, 0.9):
        assert abs(np.quantile(ours, q) - np.quantile(theirs_, q)) <= 3, q


@pytest.mark.parametrize(("size", "grid"), [((48, 40), (8, 8)), ((37, 53), (8, 8)), ((64, 64), (3, 5))])
def test_clahe_gives_albumentations_pixels_and_draws(jpeg_folder, tmp_path, size, grid):
    """`CLAHE` after a RandomResizedCrop, sides whole multiples of the grid or not (OpenCV then
    mirrors the plane out to them), over photos and a PNG of random pixels (colours all over
    OpenCV's Lab tables): each sample is albumentations' own `apply` (`cv2.cvtColor` to Lab,
    `cv2.createCLAHE(...).apply` of L, back to RGB) with the clip limit hpuload drew, bit for
    bit, natively; over 4000 samples the op is drawn with its p and the clip limit as its
    `uniform` (extremes and deciles)."""
    files, labels = files_of(jpeg_folder)
    noise = tmp_path / "noise.png"
    Image.fromarray(np.random.default_rng(8).integers(0, 256, (90, 70, 3), dtype=np.uint8)).save(noise)
    files, labels = files[:15] + [str(noise)], labels[:15] + [0]
    clahe = A.CLAHE(clip_limit=(1.0, 6.0), tile_grid_size=grid, p=0.8)
    rrc = A.RandomResizedCrop(size=size)
    ds = LeafDataset(files, labels, A.Compose([rrc, clahe, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=5))
    drawn = [op for op in drawn_ops(loader, files, rrc, {}) if op["op"] == "clahe"]
    assert drawn and all(op["arg"]["tiles"] == list(grid) for op in drawn)
    n = 4000
    ours = [op["arg"]["clip_limit"] for ops in ops_on_a_constant_image(tmp_path, [clahe], n) for op in ops]
    assert abs(len(ours) / n - 0.8) < 0.03
    ref = A.Compose([clahe])
    ref.set_random_seed(3)
    theirs_ = [clahe.get_params()["clip_limit"] for _ in range(n)]
    assert 1.0 <= min(ours) < 1.01 and 5.99 < max(ours) < 6.0
    for q in (0.1, 0.3, 0.5, 0.7, 0.9):
        assert abs(np.quantile(ours, q) - np.quantile(theirs_, q)) < 0.15, q


def test_a_fixed_clahe_before_a_resize_gives_the_datasets_own_batches(jpeg_folder):
    """`CLAHE(p=1)` with one clip limit before the `Resize` (a medical-imaging habit): run on
    the whole decoded image natively, the batches are torch's DataLoader's over the Dataset,
    byte for byte, on the CPU backend and on the engine's (which hands such samples to the CPU
    path)."""
    files, labels = files_of(jpeg_folder)
    tf = A.Compose([A.CLAHE(clip_limit=(2.5, 2.5), p=1.0), A.Resize(40, 52), ToTensorV2()])
    same_batches_on_both_backends(LeafDataset(files, labels, tf))


def test_image_compression_to_webp_is_left_to_albumentations():
    """`ImageCompression(compression_type="webp")` is not reproduced: the translation says
    so, naming it (the step then runs in Python)."""
    from hpuload import _albumentations
    from hpuload._transforms import Unsupported

    with pytest.raises(Unsupported, match="webp"):
        _albumentations._image_compression(A.ImageCompression(compression_type="webp"))


def test_steps_before_the_crop_run_natively_on_the_whole_image_with_albumentations_pixels(jpeg_folder):
    """Steps before the RandomResizedCrop (a flip, brightness and contrast, a shift-scale-rotate
    and a JPEG compression, each by its p): hpuload runs them on the whole decoded image, drawn
    on its size, natively; each sample is albumentations' own functions on the whole image with
    hpuload's parameters, then the crop, bit for bit."""
    files, labels = files_of(jpeg_folder)
    steps = {
        "RandomBrightnessContrast": A.RandomBrightnessContrast(p=0.6),
        "ShiftScaleRotate": A.ShiftScaleRotate(p=0.5),
        "ImageCompression": A.ImageCompression(quality_range=(40, 90), p=0.5),
    }
    rrc = A.RandomResizedCrop(size=(36, 44))
    compose = A.Compose([A.HorizontalFlip(p=0.5), *steps.values(), rrc, ToTensorV2()])
    ds = LeafDataset(files, labels, compose)
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=6))
    pre = []
    for epoch, index, got, image, plan in samples_with_plans(loader, files):
        assert torch.equal(got, by_plan(image, plan, rrc, steps)), (epoch, index, plan.get("pre"))
        assert not plan.get("ops")
        pre += [op["op"] for op in plan.get("pre", [])]
    assert set(pre) == {"hflip", "multiply_add", "cv2_affine", "jpeg_round_trip"}, set(pre)


def test_steps_before_a_resize_give_the_datasets_own_batches(jpeg_folder):
    """Fixed steps (`p=1`) before a `Resize`: a flip, `ToGray`, `Posterize`, `ImageCompression`
    at one quality, on the whole image: torch's DataLoader's batches over the Dataset itself,
    byte for byte; on the engine backend too (such samples take the CPU path)."""
    files, labels = files_of(jpeg_folder)
    steps = [A.HorizontalFlip(p=1.0), A.ToGray(p=1.0), A.Posterize(num_bits=5, p=1.0),
             A.ImageCompression(quality_range=(55, 55), p=1.0), A.Resize(40, 52), A.Normalize(mean=MEAN, std=STD), ToTensorV2()]
    same_batches_on_both_backends(LeafDataset(files, labels, A.Compose(steps)))


@pytest.mark.parametrize("where", ["before", "after"])
def test_rotate_of_one_angle_gives_the_datasets_own_batches(jpeg_folder, where):
    """`Rotate` (its angle fixed, each border) before the resize, on the whole image, or after
    it: torch's DataLoader's batches over the Dataset itself, byte for byte, on both
    backends."""
    files, labels = files_of(jpeg_folder)
    turns = [A.Rotate(limit=(23.5, 23.5), p=1.0), A.Rotate(limit=(-12, -12), border_mode=cv2.BORDER_REFLECT_101, p=1.0)]
    for turn in turns:
        steps = [turn, A.Resize(40, 52)] if where == "before" else [A.Resize(40, 52), turn]
        same_batches_on_both_backends(LeafDataset(files, labels, A.Compose([*steps, A.Normalize(mean=MEAN, std=STD), ToTensorV2()])))


def test_a_turn_before_the_resize_is_left_to_torchs_loader(jpeg_folder):
    """`Transpose` before the `Resize` (each image's shape would change) is not taken: the
    loader falls back to torch's, saying so, and gives the Dataset's own batches."""
    files, labels = files_of(jpeg_folder)
    ds = LeafDataset(files, labels, A.Compose([A.Transpose(p=1.0), A.Resize(40, 52), ToTensorV2()]))
    with pytest.warns(FallbackWarning, match="Transpose before a resize or crop"):
        loader = DataLoader(ds, batch_size=8)
        ours = list(loader)
    for (x, y), (want_x, want_y) in zip(ours, theirs(ds, 8)):
        assert torch.equal(x, want_x) and torch.equal(y, want_y)


@pytest.mark.parametrize("mode", ["cv", "pil"])
def test_fixed_tone_and_distortion_steps_give_the_datasets_own_batches(jpeg_folder, mode):
    """Steps whose parameters are fixed (`p=1`, one-value ranges): `Equalize`, `Posterize`,
    `Solarize`, `Downscale`, `OpticalDistortion`, an undistorted `GridDistortion` and
    `ImageCompression` at one quality after a Resize give torch's DataLoader's batches over the
    Dataset itself, byte for byte."""
    files, labels = files_of(jpeg_folder)
    steps = [
        A.Resize(44, 52), A.Equalize(mode=mode, p=1.0), A.Posterize(num_bits=5, p=1.0),
        A.Solarize(threshold_range=(0.6, 0.6), p=1.0), A.Downscale(scale_range=(0.5, 0.5), p=1.0),
        A.OpticalDistortion(distort_limit=(0.2, 0.2), p=1.0), A.GridDistortion(distort_limit=(0.0, 0.0), p=1.0),
        A.ImageCompression(quality_range=(60, 60), p=1.0), ToTensorV2(),
    ]
    ds = LeafDataset(files, labels, A.Compose(steps))
    ours, want = list(native(lambda: DataLoader(ds, batch_size=8, backend="cpu"))), theirs(ds, 8)
    assert len(ours) == len(want)
    for (x, y), (want_x, want_y) in zip(ours, want):
        assert torch.equal(x, want_x) and torch.equal(y, want_y)


def test_grid_distortion_draws_albumentations_grids(tmp_path):
    """Over 2000 samples of `GridDistortion(num_steps=5, distort_limit=0.4)` on a 60x70
    image, the source coordinate of each sixth column and row is distributed as in
    albumentations' own grids (normalized: their mean, spread and deciles), and the op is
    drawn with probability p."""
    import albumentations.augmentations.geometric.functional as fgeometric

    path = tmp_path / "a.jpg"
    Image.new("RGB", (70, 60), (90, 120, 30)).save(path)
    grid = A.GridDistortion(num_steps=5, distort_limit=0.4, p=0.6)
    n = 2000
    ds = LeafDataset([str(path)] * n, [0] * n, A.Compose([A.Resize(60, 70), grid, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=n, backend="cpu", seed=8))
    ours_x, ours_y = [], []
    for index in range(n):
        ops = json.loads(loader._core.sample_plan(0, index, 70, 60)).get("ops", [])
        for op in ops:
            arg = op["arg"]
            map_x, map_y = fgeometric.generate_grid((60, 70), arg["steps_x"], arg["steps_y"], arg["num_steps"])
            ours_x.append(map_x[0, ::6])
            ours_y.append(map_y[::6, 0])
    assert abs(len(ours_x) / n - 0.6) < 0.035, len(ours_x)
    ref = A.Compose([grid])
    ref.set_random_seed(3)
    theirs_x, theirs_y = [], []
    for _ in range(len(ours_x)):
        params = ref.transforms[0].get_params_dependent_on_data({"shape": (60, 70)}, {})
        theirs_x.append(params["map_x"][0, ::6])
        theirs_y.append(params["map_y"][::6, 0])
    for ours, theirs_ in ((np.array(ours_x), np.array(theirs_x)), (np.array(ours_y), np.array(theirs_y))):
        spread = theirs_.std(axis=0) + 1e-3
        assert np.all(np.abs(ours.mean(axis=0) - theirs_.mean(axis=0)) < 0.15 * spread + 1e-4)
        assert np.all(np.abs(ours.std(axis=0) - theirs_.std(axis=0)) < 0.15 * spread + 1e-4)
        for q in (0.1, 0.5, 0.9):
            assert np.all(np.abs(np.quantile(ours, q, axis=0) - np.quantile(theirs_, q, axis=0)) < 0.2 * spread + 1e-4), q


def test_to_gray_gives_opencvs_grey_for_every_colour_of_a_random_image(tmp_path):
    """`ToGray(p=1)` through the drop-in on a lossless image of 65,536 random colours (its
    `Resize` to its own size copies it): every value is the Dataset's own, `cv2.cvtColor(...,
    COLOR_RGB2GRAY)` in each channel."""
    path = tmp_path / "colours.png"
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)).save(path)
    ds = LeafDataset([str(path)], [0], A.Compose([A.Resize(256, 256), A.ToGray(p=1.0), ToTensorV2()]))
    ours = next(iter(native(lambda: DataLoader(ds, batch_size=1, backend="cpu"))))[0]
    assert torch.equal(ours, theirs(ds, 1)[0][0])


def test_a_transpose_of_a_non_square_image_runs_in_python(jpeg_folder):
    """`Transpose` of a 48x40 image gives a shape per sample: hpuload runs it (and what
    follows) in Python, as albumentations does, rather than natively."""
    from hpuload.torch import PythonTailWarning

    files, labels = files_of(jpeg_folder)
    ds = LeafDataset(files, labels, A.Compose([A.Resize(48, 40), A.Transpose(p=1.0), ToTensorV2()]))
    with pytest.warns(PythonTailWarning, match="Transpose"):
        loader = DataLoader(ds, batch_size=8, backend="cpu")
    assert torch.equal(torch.cat([x for x, _ in loader]), torch.cat([x for x, _ in theirs(ds, 8)]))


def test_shift_scale_rotate_draws_albumentations_distributions(tmp_path):
    """ShiftScaleRotate's warps over 3000 samples, read back from each plan's matrix: the
    angle, each axis's scale and the whole-pixel shift distributed as albumentations draws
    them (means, spreads, percentiles), and the shifts whole pixels."""
    path = tmp_path / "a.jpg"
    Image.new("RGB", (80, 60), (90, 120, 30)).save(path)
    ssr = A.ShiftScaleRotate(shift_limit=0.2, scale_limit=0.3, rotate_limit=60, p=1.0)
    n = 3000
    ds = LeafDataset([str(path)] * n, [0] * n, A.Compose([A.Resize(60, 80), ssr, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=n, backend="cpu", seed=5))
    centre = np.array([80 / 2 - 0.5, 60 / 2 - 0.5])

    def parts(forward):
        lin = forward[:2, :2]
        sx, sy = np.hypot(*lin[:, 0]), np.hypot(*lin[:, 1])
        angle = np.degrees(np.arctan2(lin[0, 1], lin[0, 0]))
        shift = forward[:2, 2] - centre + lin @ centre
        return angle, sx, sy, shift[0], shift[1]

    ours = []
    for index in range(n):
        plan = json.loads(loader._core.sample_plan(0, index, 80, 60))
        (op,) = [o for o in plan["ops"] if o["op"] == "cv2_affine"]
        inverse = np.vstack([np.array(op["arg"]["inverse"], dtype=np.float64).reshape(2, 3), [0, 0, 1]])
        ours.append(parts(np.linalg.inv(inverse)))
    ssr.set_random_seed(2)
    want = [parts(ssr.get_params_dependent_on_data({"shape": (60, 80)}, {})["matrix"]) for _ in range(n)]
    ours, want = np.array(ours), np.array(want)
    for k, spread in enumerate((120, 0.6, 0.6, 32, 24)):
        a, b = ours[:, k], want[:, k]
        assert abs(a.mean() - b.mean()) < 0.03 * spread and abs(a.std() - b.std()) < 0.05 * b.std(), (k, a.mean(), b.mean(), a.std(), b.std())
        for q in (1, 25, 50, 75, 99):
            assert abs(np.percentile(a, q) - np.percentile(b, q)) < 0.03 * spread, (k, q)
    assert np.allclose(ours[:, 3:], np.round(ours[:, 3:]), atol=1e-3)  # whole pixels


def test_opencvs_kernels_run_in_python_with_an_opencv_hpuload_has_not_matched(jpeg_folder, monkeypatch):
    """HueSaturationValue and ShiftScaleRotate compute with OpenCV's kernels, which hpuload
    matches for OpenCV 5.0's x86-64 builds: under another version they run in Python (the
    user's own), named, and give the Dataset's own samples."""
    from hpuload.torch import PythonTailWarning

    monkeypatch.setattr(cv2, "__version__", "4.10.0")
    files, labels = files_of(jpeg_folder)
    ds = LeafDataset(files, labels, A.Compose([A.Resize(40, 40), A.HorizontalFlip(p=1.0), A.HueSaturationValue(p=1.0), ToTensorV2()]))
    with pytest.warns(PythonTailWarning, match="HueSaturationValue, ToTensorV2 in Python"):
        loader = DataLoader(ds, batch_size=8, backend="cpu", seed=1)
    assert type(loader) is DataLoader
    assert next(iter(loader))[0].shape == (8, 3, 40, 40)


class PillowArrayDataset(tud.Dataset):
    """The other Kaggle shape: Pillow reads, NumPy makes the array albumentations takes."""

    def __init__(self, files, labels, transforms, read="convert"):
        self.files, self.labels, self.transforms, self.read = files, labels, transforms, read

    def __len__(self):
        return len(self.files)

    def __getitem__(self, idx):
        if self.read == "convert":
            image = np.array(Image.open(self.files[idx]).convert("RGB"))
        elif self.read == "asarray":  # no conversion: the file's own mode
            image = np.asarray(Image.open(self.files[idx]))
        elif self.read == "upright":
            from PIL import ImageOps

            with open(self.files[idx], "rb") as f:
                image = np.array(ImageOps.exif_transpose(Image.open(f)).convert("RGB"), dtype=np.uint8)
        elif self.read == "floats":
            image = np.array(Image.open(self.files[idx]).convert("RGB"), dtype=np.float32)
        else:  # "flipped": the array changed before the transform
            image = np.array(Image.open(self.files[idx]).convert("RGB"))[:, ::-1]
        return self.transforms(image=image)["image"], self.labels[idx]


@pytest.mark.parametrize("read", ["convert", "asarray", "upright"])
def test_a_numpy_array_of_a_pillow_image_runs_albumentations_natively_with_the_datasets_values(jpeg_folder, tmp_path, read):
    """`np.array(Image.open(path).convert("RGB"))` (or `np.asarray` of the opened image, or
    of it turned upright by its EXIF orientation) given to an albumentations `Compose`: no
    fallback, and every value is the Dataset's own, on both backends."""
    files, labels = files_of(jpeg_folder)
    files, labels = files[:11], labels[:11]
    if read == "upright":
        exif = Image.Exif()
        exif[0x0112] = 6
        turned = tmp_path / "turned.jpg"
        Image.open(files[0]).save(turned, exif=exif.tobytes())
        files = [str(turned)] + files[1:]
    tf = A.Compose([A.SmallestMaxSize(max_size=41), A.HorizontalFlip(p=1.0), A.CenterCrop(40, 33), A.Normalize(), ToTensorV2()])
    same_batches_on_both_backends(PillowArrayDataset(files, labels, tf, read), batch_size=4)


def test_a_numpy_array_hpuload_would_not_give_goes_to_torchs_loader_named(jpeg_folder, tmp_path):
    """The array of a grey file opened without `.convert("RGB")` (one channel where hpuload
    decodes three), an array of float32 values, and an array flipped by the Dataset's own
    code before the transform: torch's DataLoader, the reason named, and NumPy's own
    `array` and `asarray` back in place after the probe."""
    files, labels = files_of(jpeg_folder)
    grey = tmp_path / "grey.png"
    Image.open(files[0]).convert("L").save(grey)
    tf = A.Compose([A.Resize(32, 32), ToTensorV2()])
    array, asarray = np.array, np.asarray
    cases = [
        (PillowArrayDataset(files[:3] + [str(grey)], labels[:4], tf, "asarray"), "mode L"),
        (PillowArrayDataset(files[:4], labels[:4], tf, "floats"), "uint8 dtype"),
        (PillowArrayDataset(files[:4], labels[:4], tf, "flipped"), "sliced with a step"),
    ]
    for ds, reason in cases:
        with pytest.warns(FallbackWarning, match=reason):
            loader = DataLoader(ds, batch_size=1)
        assert type(loader) is not DataLoader
        assert np.array is array and np.asarray is asarray
        *_, (x, _) = loader  # the grey file last: one channel, as the Dataset gives it
        assert torch.equal(x[0], torch.as_tensor(ds[3][0])), reason


@pytest.fixture(scope="module")
def sized_folder(jpeg_folder, tmp_path_factory):
    """PNG photos of sizes that OpenCV's area resize takes each way: whole-number scales (2x2,
    3x3, 2x3) for the resizes below, and others."""
    root = tmp_path_factory.mktemp("sized")
    files, _ = files_of(jpeg_folder)
    for i, (w, h) in enumerate([(96, 64), (90, 60), (131, 97), (64, 48), (33, 257), (200, 150), (144, 96)]):
        out = root / f"c{i % 2}" / f"{i:02}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        Image.open(files[i]).convert("RGB").resize((w, h)).save(out)
    return root


@pytest.mark.parametrize("flag", ["INTER_AREA", "INTER_NEAREST"])
@pytest.mark.parametrize(
    "steps",
    [
        lambda i: [A.Resize(32, 48, interpolation=i)],  # halves 96x64, thirds 144x96
        lambda i: [A.Resize(20, 30, interpolation=i)],  # thirds 90x60
        lambda i: [A.Resize(37, 29, interpolation=i)],  # shrinks by no whole number
        lambda i: [A.Resize(160, 100, interpolation=i)],  # enlarges one axis or both
        lambda i: [A.Resize(300, 211, interpolation=i)],  # enlarges both
        lambda i: [A.SmallestMaxSize(max_size=41, interpolation=i), A.CenterCrop(height=40, width=33)],
        lambda i: [A.SmallestMaxSize(max_size=150, interpolation=i), A.CenterCrop(height=120, width=140)],
        lambda i: [A.LongestMaxSize(max_size=61, interpolation=i), A.PadIfNeeded(min_height=64, min_width=64, border_mode=cv2.BORDER_CONSTANT)],
        lambda i: [A.RandomResizedCrop((24, 24), scale=(1, 1), ratio=(1, 1), interpolation=i)],  # the centre square
        lambda i: [A.RandomResizedCrop((120, 120), scale=(1, 1), ratio=(1, 1), interpolation=i)],
    ],
)
def test_opencvs_area_and_nearest_resizes_give_opencvs_bytes(sized_folder, flag, steps):
    """albumentations' resizes with `interpolation=cv2.INTER_AREA` (the mean of each cell
    where both axes shrink, summed as integers where the scales are whole numbers; OpenCV's
    two-tap area rule where either axis enlarges) and `cv2.INTER_NEAREST`, of the whole image,
    of a window of it, and as part of a resize then a crop: natively, every byte the
    Dataset's own."""
    files = sorted(str(p) for p in sized_folder.rglob("*.png"))
    labels = [int(os.path.basename(os.path.dirname(f))[1:]) for f in files]
    tf = A.Compose([*steps(getattr(cv2, flag)), ToTensorV2()])
    same_batches_on_both_backends(LeafDataset(files, labels, tf), batch_size=7)


def within_a_level_of(got, want, what):
    """`got` equals `want` but for values one level off, in at most 1% of them: the parity of
    OpenCV's cubic resize (`cv2_cubic`: opencv-python resizes 8-bit images with IPP's own
    cubic arithmetic; measured one level off in 0.001% of a photo's values and in 0.13% of
    random noise's, and, where a window is exactly twice the output along one axis, in up to
    0.49% of the test images' values: a 288x224 window to 144x160, session 94, which IPP
    computes by another path hpuload does not reproduce)."""
    assert got.shape == want.shape and got.dtype == want.dtype, what
    diff = (got.double() - want.double()).abs()
    assert diff.max() <= 1, (what, float(diff.max()))
    assert (diff > 0).double().mean() <= 0.01, (what, float((diff > 0).double().mean()))


@pytest.mark.parametrize(
    "steps",
    [
        [A.Resize(37, 29, interpolation=cv2.INTER_CUBIC)],  # shrinks
        [A.Resize(300, 211, interpolation=cv2.INTER_CUBIC)],  # enlarges
        [A.SmallestMaxSize(max_size=41, interpolation=cv2.INTER_CUBIC), A.CenterCrop(height=40, width=33)],
        [A.LongestMaxSize(max_size=61, interpolation=cv2.INTER_CUBIC), A.PadIfNeeded(min_height=64, min_width=64, border_mode=cv2.BORDER_CONSTANT)],
        [A.RandomResizedCrop((120, 120), scale=(1, 1), ratio=(1, 1), interpolation=cv2.INTER_CUBIC), A.Normalize()],
    ],
)
def test_opencvs_cubic_resizes_give_the_datasets_own_batches_within_a_level(sized_folder, steps):
    """albumentations' resizes with `interpolation=cv2.INTER_CUBIC` (Keys' cubic, four taps,
    no antialiasing), of the whole image, of a window of it, as part of a resize then a crop
    and before a normalization: natively, each value the Dataset's own or one level off."""
    files = sorted(str(p) for p in sized_folder.rglob("*.png"))
    labels = [int(os.path.basename(os.path.dirname(f))[1:]) for f in files]
    ds = LeafDataset(files, labels, A.Compose([*steps, ToTensorV2()]))
    want = theirs(ds, 7)
    ours = list(native(lambda: DataLoader(ds, batch_size=7, backend="cpu")))
    assert len(ours) == len(want)
    for (x, y), (want_x, want_y) in zip(ours, want):
        assert torch.equal(y, want_y)
        if x.dtype == torch.float32:  # normalized: levels of 1 / (255 * std)
            x, want_x = x * torch.tensor([0.229, 0.224, 0.225])[:, None, None] * 255, want_x * torch.tensor([0.229, 0.224, 0.225])[:, None, None] * 255
            assert ((x - want_x).abs() <= 1 + 1e-3).all()
            continue
        within_a_level_of(x, want_x, steps)


def test_a_random_resized_crop_with_cubic_gives_albumentations_pixels_for_the_window_drawn(jpeg_folder):
    """`RandomResizedCrop(interpolation=cv2.INTER_CUBIC)`: each window hpuload draws, put
    through albumentations' own crop and resize, gives hpuload's sample within a level, over
    windows that shrink and enlarge; a `cv2.resize(..., interpolation=cv2.INTER_CUBIC)` in the
    Dataset's code before its Compose too."""
    files, labels = files_of(jpeg_folder)
    rrc = A.RandomResizedCrop(size=(160, 144), interpolation=cv2.INTER_CUBIC)
    ds = LeafDataset(files, labels, A.Compose([rrc, ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu"))
    scales = []
    for epoch, index, got, image, plan in samples_with_plans(loader, files):
        c = plan["crop"]
        box = (int(c["left"]), int(c["top"]), int(c["left"] + c["width"]), int(c["top"] + c["height"]))
        want = ToTensorV2()(image=rrc.apply(image, crop_coords=box))["image"]
        within_a_level_of(got, want, (epoch, index, box))
        scales.append(c["width"] / 144)
    assert min(scales) < 1 < max(scales)  # windows enlarged and shrunk
    resized = ResizingLeafDataset(
        files[:12], labels[:12], A.Compose([A.HorizontalFlip(p=1.0), ToTensorV2()]),
        lambda x: cv2.resize(x, (52, 44), interpolation=cv2.INTER_CUBIC),
    )
    (x, _), = list(native(lambda: DataLoader(resized, batch_size=12, backend="cpu")))
    within_a_level_of(x, theirs(resized, 12)[0][0], "cv2.resize before the Compose")


def test_a_level_remapping_step_after_a_cubic_resize_goes_to_torchs_loader_named(jpeg_folder):
    """hpuload's cubic is within a level of OpenCV's; `CLAHE`, `Equalize`, `Posterize` or
    `Solarize` after it (inside a `OneOf` too, or after the Dataset's own cubic `cv2.resize`)
    could make that level many, and would in Python as natively: the whole Compose goes to
    torch's loader, named. Before the resize, or after a linear one, they run natively."""
    files, labels = files_of(jpeg_folder)
    cubic = cv2.INTER_CUBIC
    cases = [
        (A.Compose([A.Resize(16, 64, interpolation=cubic), A.CLAHE(p=1.0), ToTensorV2()]), None, "CLAHE after Resize"),
        (A.Compose([A.RandomResizedCrop((48, 48), interpolation=cubic), A.OneOf([A.Blur(), A.Equalize()]), ToTensorV2()]),
         None, "Equalize after RandomResizedCrop"),
        (A.Compose([A.Posterize(p=1.0), ToTensorV2()]), lambda x: cv2.resize(x, (52, 44), interpolation=cubic),
         "Posterize after cv2.resize"),
    ]
    for tf, resize, reason in cases:
        ds = ResizingLeafDataset(files[:4], labels[:4], tf, resize) if resize else LeafDataset(files[:4], labels[:4], tf)
        with pytest.warns(FallbackWarning, match=reason):
            assert type(DataLoader(ds, batch_size=2)) is not DataLoader
    for steps in ([A.Solarize(p=1.0), A.Resize(40, 40, interpolation=cubic)], [A.Resize(40, 40), A.CLAHE(p=1.0)]):
        ds = LeafDataset(files[:4], labels[:4], A.Compose([*steps, ToTensorV2()]))
        native(lambda: DataLoader(ds, batch_size=2, backend="cpu"))


@pytest.mark.parametrize("border", ["BORDER_REFLECT_101", "BORDER_REFLECT", "BORDER_REPLICATE"])
@pytest.mark.parametrize(
    "steps",
    [
        lambda b: [A.LongestMaxSize(max_size=61), A.PadIfNeeded(min_height=70, min_width=67, border_mode=b)],
        lambda b: [A.LongestMaxSize(max_size=64), A.PadIfNeeded(min_height=64, min_width=64, border_mode=b), A.HorizontalFlip(p=1.0)],
        lambda b: [A.LongestMaxSize(max_size=24), A.PadIfNeeded(min_height=96, min_width=90, border_mode=b), A.Normalize()],
    ],
)
def test_a_pad_of_mirrored_or_replicated_edges_gives_opencvs_bytes(sized_folder, border, steps):
    """`LongestMaxSize` then `PadIfNeeded` with a `border_mode` other than constant: the
    resize's edges replicated or mirrored as OpenCV's `copyMakeBorder` mirrors them, again and
    again where the padding is wider than the image (a 33x257 photo made 3x24, padded to 90
    wide), then the steps after it: every value the Dataset's own, on both backends."""
    files = sorted(str(p) for p in sized_folder.rglob("*.png"))
    labels = [int(os.path.basename(os.path.dirname(f))[1:]) for f in files]
    tf = A.Compose([*steps(getattr(cv2, border)), ToTensorV2()])
    same_batches_on_both_backends(LeafDataset(files, labels, tf), batch_size=7)


class HandingOutDataset(LeafDataset):
    """A Kaggle-style Dataset whose Compose has no `ToTensorV2`: its own code makes what it
    returns of the Compose's array (`hand_out`)."""

    def __init__(self, files, labels, transforms, hand_out):
        super().__init__(files, labels, transforms)
        self.hand_out = hand_out

    def __getitem__(self, idx):
        image, label = super().__getitem__(idx)
        return self.hand_out(image), label


#: What Kaggle notebooks do with the array of a Compose without ToTensorV2, by name.
HAND_OUTS = {
    "as it is": lambda x: x,
    "transposed": lambda x: x.transpose(2, 0, 1),
    "np.transpose, astype": lambda x: np.transpose(x, (2, 0, 1)).astype(np.float32),
    "contiguous float32": lambda x: np.ascontiguousarray(x.transpose((2, 0, 1)), dtype=np.float32),
    "torch.tensor float": lambda x: torch.tensor(x.transpose(2, 0, 1), dtype=torch.float),
    "from_numpy permute float": lambda x: torch.from_numpy(x).permute(2, 0, 1).float(),
    "as_tensor": lambda x: torch.as_tensor(x).permute(2, 0, 1).contiguous(),
}

#: Those that divide the bytes by 255 themselves (in float64 first, or in float32).
SCALING_HAND_OUTS = {
    "/ 255.0 then float32": lambda x: (x / 255.0).astype(np.float32).transpose(2, 0, 1),
    "float32 then / 255": lambda x: x.astype(np.float32) / 255.0,
    "tensor / 255": lambda x: torch.from_numpy(x).permute(2, 0, 1).float().div(255),
    "uint8 tensor / 255": lambda x: torch.tensor(x) / 255,
    "float32 / np.float32(255)": lambda x: x.astype(np.float32) / np.float32(255),
    # Their own arithmetic, whose floats hpuload tables byte by byte.
    "float32 * (1 / 255)": lambda x: x.astype(np.float32) * (1 / 255),
    "(float32 - 127.5) / 127.5": lambda x: (x.astype(np.float32) - 127.5) / 127.5,
    "/ 127.5 - 1 then float32": lambda x: (x / 127.5 - 1.0).astype(np.float32),
    "2 * tensor / 255 - 1": lambda x: 2 * torch.from_numpy(x).permute(2, 0, 1).float() / 255 - 1,
}


def same_values_handed_out(ds, batch_size=4):
    """hpuload's batches over `ds`, natively on both backends, are torch's DataLoader's: shape,
    dtype and every value."""
    want = [x for x, _ in theirs(ds, batch_size)]
    for backend in ("cpu", "auto"):
        ours = [x for x, _ in native(lambda: DataLoader(ds, batch_size=batch_size, backend=backend))]
        assert len(ours) == len(want)
        for x, w in zip(ours, want):
            assert (x.shape, x.dtype) == (w.shape, w.dtype), backend
            assert torch.equal(x, w), backend


@pytest.mark.parametrize(
    ("last", "hand_out"),
    [(last, h) for last in ("bytes", "Normalize", "ToFloat") for h in sorted(HAND_OUTS)]
    + [("bytes", h) for h in sorted(SCALING_HAND_OUTS)],
)
def test_a_compose_without_to_tensor_gives_the_datasets_own_values_however_its_code_hands_them_out(
    jpeg_folder, last, hand_out
):
    """A Compose without `ToTensorV2` gives NumPy arrays `[H, W, C]` (bytes, or floats after
    `Normalize` or `ToFloat`), which the Dataset's own code returns as they are, transposed,
    cast to float32, divided by 255 or made tensors: natively, every batch the Dataset's
    own (shape, layout, dtype, each value bit for bit), on both backends."""
    files, labels = files_of(jpeg_folder)
    ends = {"bytes": [], "Normalize": [A.Normalize(mean=MEAN, std=STD)], "ToFloat": [A.ToFloat()]}[last]
    make = {**HAND_OUTS, **SCALING_HAND_OUTS}[hand_out]
    tf = A.Compose([A.SmallestMaxSize(max_size=41), A.HorizontalFlip(p=1.0), A.CenterCrop(40, 33), *ends])
    same_values_handed_out(HandingOutDataset(files[:11], labels[:11], tf, make))


@pytest.mark.parametrize(
    ("hand_out", "normalize"),
    [("as it is", False), ("np.transpose, astype", False), ("/ 255.0 then float32", False), ("tensor / 255", False)]
    + [("as it is", True), ("np.transpose, astype", True)],
)
def test_a_holes_fill_is_handed_out_in_the_units_the_datasets_code_gives_it(jpeg_folder, hand_out, normalize):
    """`CoarseDropout`'s fill (here one hole over the whole image, so nothing is drawn) in
    the units the Dataset hands out: bytes, floats of them, divided by 255, or normalized."""
    files, labels = files_of(jpeg_folder)
    whole = A.CoarseDropout(num_holes_range=(1, 1), hole_height_range=(32, 32), hole_width_range=(24, 24), fill=(200, 30, 7), p=1.0)
    tf = A.Compose([A.Resize(32, 24), whole, *([A.Normalize()] if normalize else [])])
    make = {**HAND_OUTS, **SCALING_HAND_OUTS}[hand_out]
    same_values_handed_out(HandingOutDataset(files[:6], labels[:6], tf, make))


def test_a_collate_fn_receives_the_arrays_or_tensors_the_dataset_hands_out(jpeg_folder):
    """A collate_fn gets each sample as the Dataset returns it: a NumPy array (of the same
    dtype and values) where its code hands out the Compose's array, a tensor where it made
    one."""
    files, labels = files_of(jpeg_folder)
    tf = A.Compose([A.Resize(24, 20), A.Normalize()])
    for hand_out, kind in (("np.transpose, astype", np.ndarray), ("torch.tensor float", torch.Tensor)):
        ds = HandingOutDataset(files[:6], labels[:6], tf, HAND_OUTS[hand_out])
        loader = native(lambda: DataLoader(ds, batch_size=3, backend="cpu", collate_fn=lambda samples: samples))
        for b, samples in enumerate(loader):
            for k, (image, label) in enumerate(samples):
                own, own_label = ds[b * 3 + k]
                assert isinstance(image, kind) and image.dtype == own.dtype and image.shape == own.shape
                assert np.array_equal(np.asarray(image), np.asarray(own)) and label == own_label


@pytest.mark.parametrize(
    ("hand_out", "reason"),
    [
        (lambda x: x / 255.0, "float64"),
        (lambda x: x.astype(np.float32) / np.float64(255), "float64"),  # NumPy 2 widens to the scalar's type
        (lambda x: x.astype(np.float32) - np.array([120.0, 110.0, 100.0], dtype=np.float32), "ndarray"),
        (lambda x: x.astype(np.float32) * x, "ArrayOut"),
        (lambda x: x.transpose(1, 0, 2), "transpose"),
        (lambda x: x[:, :, ::-1].copy(), "subscriptable"),
    ],
)
def test_what_hpuload_does_not_follow_in_the_datasets_code_goes_to_torchs_loader_named(jpeg_folder, hand_out, reason):
    """float64 handed out, a mean of each channel subtracted by hand, the image times itself,
    another axis order, an indexing: torch's DataLoader with the Dataset's own values, the reason named, and
    NumPy's and torch's functions back in place after the probe."""
    files, labels = files_of(jpeg_folder)
    ds = HandingOutDataset(files[:4], labels[:4], A.Compose([A.Resize(24, 20)]), hand_out)
    originals = (np.array, np.asarray, np.ascontiguousarray, torch.tensor, torch.as_tensor, torch.from_numpy)
    with pytest.warns(FallbackWarning, match=reason):
        loader = DataLoader(ds, batch_size=2)
    assert type(loader) is not DataLoader
    assert originals == (np.array, np.asarray, np.ascontiguousarray, torch.tensor, torch.as_tensor, torch.from_numpy)
    x, _ = next(iter(loader))
    assert torch.equal(x[0], torch.as_tensor(np.ascontiguousarray(ds[0][0])))


def test_floats_divided_again_go_to_torchs_loader_named(jpeg_folder):
    """A division by 255 of what `Normalize` gave: not what hpuload's divisions compute."""
    files, labels = files_of(jpeg_folder)
    tf = A.Compose([A.Resize(24, 20), A.Normalize()])
    ds = HandingOutDataset(files[:4], labels[:4], tf, lambda x: x / 255.0)
    with pytest.warns(FallbackWarning, match="divided by 255 after Normalize"):
        assert type(DataLoader(ds, batch_size=2)) is not DataLoader


def test_a_compose_given_to_tensor_later_goes_to_torchs_loader_next_epoch(jpeg_folder):
    """The Dataset's code was learnt on the Compose's arrays: a Compose ending in
    `ToTensorV2` assigned later (on which that code would do otherwise) sends the next epoch
    to torch's loader."""
    files, labels = files_of(jpeg_folder)
    ds = HandingOutDataset(files[:8], labels[:8], A.Compose([A.Resize(24, 20)]), lambda x: x)
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu"))
    (first, _), = list(loader)
    assert first.shape == (8, 24, 20, 3)
    ds.transforms = A.Compose([A.Resize(24, 20), ToTensorV2()])
    with pytest.warns(FallbackWarning, match="ends in ToTensorV2 now"):
        (second, _), = list(loader)
    assert second.shape == (8, 3, 24, 20)


class ResizingLeafDataset(LeafDataset):
    """A Kaggle-style Dataset that resizes each image with OpenCV before its Compose."""

    def __init__(self, files, labels, transforms, resize):
        super().__init__(files, labels, transforms)
        self.resize = resize

    def __getitem__(self, idx):
        image = cv2.cvtColor(cv2.imread(self.files[idx]), cv2.COLOR_BGR2RGB)
        image = self.resize(image)
        return self.transforms(image=image)["image"], torch.tensor(self.labels[idx])


@pytest.mark.parametrize("flag", ["INTER_LINEAR", "INTER_AREA", "INTER_NEAREST", None])
@pytest.mark.parametrize(
    "steps",
    [
        [A.HorizontalFlip(p=1.0), A.Normalize(mean=MEAN, std=STD), ToTensorV2()],
        [A.CenterCrop(40, 44), A.RandomBrightnessContrast(brightness_limit=(0.1, 0.1), contrast_limit=(0.2, 0.2), p=1.0), ToTensorV2()],
        [A.Normalize()],
    ],
    ids=["flip-normalize", "crop-contrast", "arrays"],
)
def test_a_cv2_resize_before_the_compose_gives_the_datasets_own_batches(jpeg_folder, flag, steps):
    """`cv2.resize(image, (w, h))` (OpenCV's default filter, or one named) in `__getitem__`
    before a Compose with no size of its own or a crop: natively, as albumentations' own
    `Resize` first (which is that call), every value the Dataset's own on both backends."""
    files, labels = files_of(jpeg_folder)
    kwargs = {} if flag is None else {"interpolation": getattr(cv2, flag)}
    ds = ResizingLeafDataset(files[:12], labels[:12], A.Compose(steps), lambda x: cv2.resize(x, (52, 44), **kwargs))
    same_values_handed_out(ds)


def test_a_cv2_resize_hpuload_does_not_follow_goes_to_torchs_loader_named(jpeg_folder):
    """`cv2.resize` with an interpolation hpuload does not run, by scale factors, and before a
    Compose holding a second resize (which then runs in Python): named; none is taken for
    an array the Dataset did not read."""
    files, labels = files_of(jpeg_folder)
    plain = A.Compose([ToTensorV2()])
    cases = [
        (lambda x: cv2.resize(x, (52, 44), interpolation=cv2.INTER_LANCZOS4), plain, "cv2.resize with interpolation 4"),
        (lambda x: cv2.resize(x, None, fx=0.5, fy=0.5), plain, "scale factors"),
    ]
    for resize, tf, reason in cases:
        ds = ResizingLeafDataset(files[:4], labels[:4], tf, resize)
        with pytest.warns(FallbackWarning, match=reason):
            assert type(DataLoader(ds, batch_size=2)) is not DataLoader
    ds = ResizingLeafDataset(files[:4], labels[:4], A.Compose([A.Resize(24, 24), ToTensorV2()]), lambda x: cv2.resize(x, (52, 44)))
    with pytest.warns(PythonTailWarning, match="after another resize"):
        loader = DataLoader(ds, batch_size=4, backend="cpu")
    (x, _), = list(loader)
    assert torch.equal(x, theirs(ds, 4)[0][0])
    mask = np.zeros((10, 10), np.uint8)
    assert cv2.resize(mask, (5, 5)).shape == (5, 5)  # OpenCV's own call outside a probe


class InlineDataset(tud.Dataset):
    """A Dataset with no transform at all: its own code reads, resizes and makes the tensor
    (`make`, of the file's path), as beginners' notebooks write it; `transform = None` kept or
    no such attribute."""

    def __init__(self, files, labels, make, attribute=True):
        self.files, self.labels, self.make = files, labels, make
        if attribute:
            self.transform = None

    def __len__(self):
        return len(self.files)

    def __getitem__(self, idx):
        return self.make(self.files[idx]), self.labels[idx]


def _rgb(path):
    return cv2.cvtColor(cv2.imread(path), cv2.COLOR_BGR2RGB)


#: What such code does, by name.
INLINE = {
    "cv2 resize, / 255, transpose, tensor": lambda p: torch.tensor(
        np.transpose(cv2.resize(_rgb(p), (52, 44)) / 255.0, (2, 0, 1)), dtype=torch.float32
    ),
    "cv2 resize area, float32 / 255": lambda p: cv2.resize(_rgb(p), (52, 44), interpolation=cv2.INTER_AREA).astype(np.float32) / 255.0,
    "BGR resized, as it is": lambda p: cv2.resize(cv2.imread(p), (52, 44)),
    "Pillow resize, float32 array / 255": lambda p: np.array(Image.open(p).convert("RGB").resize((52, 44)), dtype=np.float32) / 255.0,
    "Pillow resize, array, permuted tensor": lambda p: torch.from_numpy(
        np.array(Image.open(p).convert("RGB").resize((52, 44), Image.BILINEAR))
    ).permute(2, 0, 1),
}


@pytest.mark.parametrize("attribute", [True, False], ids=["transform None", "no transform"])
@pytest.mark.parametrize("make", sorted(INLINE))
def test_a_dataset_without_a_transform_whose_code_resizes_and_scales_runs_natively(jpeg_folder, make, attribute):
    """No transform: the code's own `cv2.resize` or Pillow `resize` to one size, division by
    255, transpose and tensor are followed; natively, every batch the Dataset's own (shape,
    dtype, each value). Pillow's resize on the CPU path (the engine's is within its PSNR
    floors, as for torchvision's transforms)."""
    files, labels = files_of(jpeg_folder)
    ds = InlineDataset(files[:10], labels[:10], INLINE[make], attribute)
    want = [x for x, _ in theirs(ds, 4)]
    backends = ("cpu",) if "Pillow" in make else ("cpu", "auto")
    for backend in backends:
        ours = [x for x, _ in native(lambda: DataLoader(ds, batch_size=4, backend=backend))]
        assert len(ours) == len(want)
        for x, w in zip(ours, want):
            assert (x.shape, x.dtype) == (w.shape, w.dtype) and torch.equal(x, w), backend
    assert hasattr(ds, "transform") == attribute


def test_a_pillow_resized_array_given_to_a_compose_gives_the_datasets_own_batches(jpeg_folder):
    """`np.array(Image.open(p).convert("RGB").resize((w, h)))` then albumentations' steps:
    Pillow's resize first, then the Compose, as the Dataset runs them (CPU path)."""
    files, labels = files_of(jpeg_folder)
    tf = A.Compose([A.HorizontalFlip(p=1.0), A.CenterCrop(40, 36), A.Normalize(), ToTensorV2()])

    class PillowResized(LeafDataset):
        def __getitem__(self, idx):
            image = np.array(Image.open(self.files[idx]).convert("RGB").resize((52, 44)))
            return self.transforms(image=image)["image"], self.labels[idx]

    ds = PillowResized(files[:10], labels[:10], tf)
    ours = [x for x, _ in native(lambda: DataLoader(ds, batch_size=4, backend="cpu"))]
    assert all(torch.equal(x, w) for x, w in zip(ours, [x for x, _ in theirs(ds, 4)]))


def test_a_random_crop_then_a_resize_gives_albumentations_pixels_for_the_offset_drawn(jpeg_folder):
    """`RandomCrop(40, 36)` then `Resize(20, 24)`: each sample is OpenCV's resize of the crop
    of the image at the offset hpuload drew, bit for bit, and the offsets drawn vary."""
    files, labels = files_of(jpeg_folder)
    ds = LeafDataset(files[:16], labels[:16], A.Compose([A.RandomCrop(height=40, width=36), A.Resize(20, 24), ToTensorV2()]))
    loader = native(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=4))
    corners = set()
    for epoch, index, got, image, plan in samples_with_plans(loader, files):
        top, left = int(plan["crop"]["top"]), int(plan["crop"]["left"])
        assert plan["crop"]["height"] == 40 and plan["crop"]["width"] == 36
        corners.add((top, left))
        want = cv2.resize(image[top : top + 40, left : left + 36], (24, 20), interpolation=cv2.INTER_LINEAR)
        assert torch.equal(got, torch.from_numpy(want).permute(2, 0, 1)), (epoch, index, plan["crop"])
    assert len(corners) > 16


class GreyDataset(LeafDataset):
    """The grey Kaggle Dataset: `cv2.imread(path, cv2.IMREAD_GRAYSCALE)` (X-rays, scans,
    handwriting), made three channels (`COLOR_GRAY2RGB`) for an ImageNet model or not, and
    resized by OpenCV before the Compose or not."""

    def __init__(self, files, labels, transforms, three=False, resize=None):
        super().__init__(files, labels, transforms)
        self.three, self.resize = three, resize

    def __getitem__(self, idx):
        image = cv2.imread(self.files[idx], cv2.IMREAD_GRAYSCALE)
        if self.resize is not None:
            image = cv2.resize(image, self.resize)
        if self.three:
            image = cv2.cvtColor(image, cv2.COLOR_GRAY2RGB)
        return self.transforms(image=image)["image"], torch.tensor(self.labels[idx])


@pytest.mark.parametrize(
    "steps, resize",
    [
        (lambda: [A.Resize(40, 32), A.Normalize(mean=MEAN, std=STD)], None),
        (
            lambda: [
                A.CenterCrop(48, 40),
                A.HorizontalFlip(p=1.0),
                A.RandomBrightnessContrast(brightness_limit=(0.1, 0.1), contrast_limit=(0.2, 0.2), p=1.0),
                A.Normalize(mean=0.5, std=0.25),
            ],
            None,
        ),
        (
            lambda: [
                A.Affine(rotate=(12, 12), scale=(1.1, 1.1), fill=30, p=1.0),
                A.Blur(blur_limit=(5, 5), p=1.0),
                A.RandomGamma(gamma_limit=(90, 90), p=1.0),
                A.Normalize(mean=MEAN, std=STD),
            ],
            (64, 56),
        ),
        (lambda: [A.LongestMaxSize(max_size=61), A.PadIfNeeded(64, 64, border_mode=cv2.BORDER_CONSTANT, fill=9)], None),
    ],
)
@pytest.mark.parametrize("three", [False, True])
def test_a_grey_read_gives_opencvs_luma_and_albumentations_bytes_batch_for_batch(jpeg_folder, steps, resize, three):
    """`cv2.imread(path, cv2.IMREAD_GRAYSCALE)` (a JPEG's luma as libjpeg decodes it to grey),
    an OpenCV resize or not, then an albumentations Compose on the `[H, W]` array (its
    `Normalize` taking its first mean, a fill of one value) or on its three equal channels
    (`COLOR_GRAY2RGB`: every mean, and a colour fill): torch's DataLoader's batches,
    `[B, 1, H, W]` or `[B, 3, H, W]`, byte for byte, on both backends. (Steps drawn at random
    draw as for colour images, which the tests above check: these are fixed.)"""
    files, labels = files_of(jpeg_folder)
    composed = steps()
    if three and resize:
        colour = A.Affine(translate_percent=(0.1, 0.1), rotate=(5, 5), fill=(10, 120, 250), p=1.0)
        composed = composed[:-1] + [colour] + composed[-1:]
    ds = GreyDataset(files[:24], labels[:24], A.Compose([*composed, ToTensorV2()]), three=three, resize=resize)
    same_batches_on_both_backends(ds)
    x, _ = next(iter(native(lambda: DataLoader(ds, batch_size=8, backend="cpu"))))
    assert x.shape[1] == (3 if three else 1) and x.is_contiguous()


#: Each step hpuload runs on a grey read, as the test below makes it.
GREY_STEPS = {
    "Resize": lambda: A.Resize(40, 50),
    "RandomResizedCrop": lambda: A.RandomResizedCrop((40, 50)),
    "SmallestMaxSize": lambda: A.SmallestMaxSize(60),
    "LongestMaxSize": lambda: A.LongestMaxSize(60),
    "CenterCrop": lambda: A.CenterCrop(40, 40),
    "RandomCrop": lambda: A.RandomCrop(40, 40),
    "PadIfNeeded": lambda: A.PadIfNeeded(120, 120, border_mode=cv2.BORDER_CONSTANT, fill=17),
    "HorizontalFlip": lambda: A.HorizontalFlip(p=1),
    "VerticalFlip": lambda: A.VerticalFlip(p=1),
    "Transpose": lambda: A.Transpose(p=1),
    "RandomRotate90": lambda: A.RandomRotate90(p=1),
    "Affine": lambda: A.Affine(rotate=(-20, 20), scale=(0.8, 1.2), fill=9, p=1),
    "ShiftScaleRotate": lambda: A.ShiftScaleRotate(border_mode=cv2.BORDER_CONSTANT, fill=5, p=1),
    "Rotate": lambda: A.Rotate(limit=40, border_mode=cv2.BORDER_REFLECT_101, p=1),
    "GridDistortion": lambda: A.GridDistortion(p=1),
    "OpticalDistortion": lambda: A.OpticalDistortion(p=1),
    "RandomBrightnessContrast": lambda: A.RandomBrightnessContrast(brightness_by_max=False, p=1),
    "RandomGamma": lambda: A.RandomGamma(p=1),
    "InvertImg": lambda: A.InvertImg(p=1),
    "Solarize": lambda: A.Solarize(p=1),
    "Posterize": lambda: A.Posterize(p=1),
    "Blur": lambda: A.Blur(p=1),
    "MedianBlur": lambda: A.MedianBlur(p=1),
    "GaussianBlur": lambda: A.GaussianBlur(p=1),
    "MotionBlur": lambda: A.MotionBlur(p=1),
    "Sharpen": lambda: A.Sharpen(p=1),
    "Emboss": lambda: A.Emboss(p=1),
    "Downscale": lambda: A.Downscale(p=1),
    "CoarseDropout": lambda: A.CoarseDropout(fill=3, p=1),
    "ToFloat": lambda: A.ToFloat(),
}


def test_every_step_hpuload_runs_on_a_grey_read_is_one_albumentations_computes_as_each_of_three_channels(jpeg_folder):
    """What lets hpuload run a grey read as three equal channels: albumentations computes each
    step of `GREY_ALIKE` on the `[H, W]` array as on each channel of its `COLOR_GRAY2RGB`,
    drawn alike (six seeds each); `Normalize` on one channel takes the first mean and
    deviation; and a step outside it (CLAHE) computes otherwise."""
    from hpuload._albumentations import GREY_ALIKE

    assert set(GREY_STEPS) | {"Normalize", "ToTensorV2"} == GREY_ALIKE
    files, _ = files_of(jpeg_folder)
    grey = cv2.resize(cv2.imread(files[0], cv2.IMREAD_GRAYSCALE), (97, 71))
    three = cv2.cvtColor(grey, cv2.COLOR_GRAY2RGB)

    def alike(step):
        for seed in range(6):
            one = A.Compose([step], seed=seed)(image=grey)["image"]
            each = A.Compose([step], seed=seed)(image=three)["image"]
            if one.shape != each.shape[:2] or not all(np.array_equal(one, each[..., c]) for c in range(3)):
                return False
        return True

    for name, make in GREY_STEPS.items():
        assert alike(make()), name
    assert not alike(A.CLAHE(p=1))
    normalize = A.Normalize(mean=(0.3, 0.4, 0.5), std=(0.2, 0.3, 0.4))
    first = A.Normalize(mean=0.3, std=0.2)
    assert np.array_equal(normalize(image=grey)["image"], first(image=grey)["image"])


@pytest.mark.parametrize("mode", ["RGB", "RGBA"])
def test_a_grey_read_of_a_colour_png_gives_opencvs_grey_of_its_colours(jpeg_folder, tmp_path, mode):
    """`cv2.imread(path, IMREAD_GRAYSCALE)` of a colour PNG (RGB, or RGBA whose alpha libpng
    drops) among JPEGs: libpng's grey of its colours by OpenCV's weights (found once per
    process by reading a PNG with the installed OpenCV), torch's DataLoader's batches byte for
    byte on both backends (the engine takes the JPEGs, the CPU path the PNG)."""
    files, labels = files_of(jpeg_folder)
    pngs = []
    for k in range(3):
        out = tmp_path / f"colour{k}.png"
        Image.open(files[k]).convert(mode).save(out)
        pngs.append(str(out))
    tf = A.Compose([A.Resize(52, 60), A.CenterCrop(40, 48), A.HorizontalFlip(p=1.0), ToTensorV2()])
    ds = GreyDataset(pngs + files[3:12], labels[:12], tf)
    same_batches_on_both_backends(ds)
    x, _ = next(iter(native(lambda: DataLoader(ds, batch_size=4, backend="cpu"))))
    assert x.shape == (4, 1, 40, 48)


def test_a_grey_read_hpuload_does_not_run_goes_to_torchs_loader_named(jpeg_folder, tmp_path):
    """A colour PNG read grey that carries a gamma (libpng makes its grey in linear light), a
    step albumentations computes otherwise on one channel, a Compose giving NumPy arrays of one
    channel, and another OpenCV grey flag: torch's DataLoader, the reason named; a JPEG coded in
    RGB (PIL's mode RGB too, libjpeg's grey of colours) is named when read."""
    files, labels = files_of(jpeg_folder)
    tf = A.Compose([A.Resize(32, 32), ToTensorV2()])
    colour_png = tmp_path / "colour.png"
    png_with_chunk(Image.open(files[0]), colour_png, b"sRGB", b"\x00")
    cases = [
        (GreyDataset([str(colour_png)] + files[:3], labels[:4], tf), "colour PNG with a sRGB chunk"),
        (GreyDataset(files, labels, A.Compose([A.Resize(32, 32), A.CLAHE(p=1), ToTensorV2()])), "CLAHE on a grey read"),
        (GreyDataset(files, labels, A.Compose([A.Resize(32, 32)])), "whose Compose gives NumPy arrays"),
        (LeafDataset(files, labels, tf, to_rgb=False, flags=cv2.IMREAD_REDUCED_GRAYSCALE_2), "cv2.imread"),
    ]
    for ds, reason in cases:
        with pytest.warns(FallbackWarning, match=reason):
            loader = DataLoader(ds, batch_size=4)
        assert type(loader) is not DataLoader
    rgb_coded = tmp_path / "rgb.jpg"
    Image.open(files[0]).save(rgb_coded, keep_rgb=True)
    ds = GreyDataset([str(rgb_coded)] + files[:3], labels[:4], tf)
    loader = native(lambda: DataLoader(ds, batch_size=4, backend="cpu", on_error="fail"))
    with pytest.raises(Exception, match="rgb.jpg.*a grey read of an RGB, CMYK or YCCK JPEG"):
        next(iter(loader))
