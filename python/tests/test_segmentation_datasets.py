"""A user's own Dataset class of images and their segmentation masks, as hand-written U-Net
scripts write it (the Carvana tutorial's: `np.array(Image.open(image).convert("RGB"))`,
`np.array(Image.open(mask).convert("L"), dtype=np.float32)`, `mask[mask == 255.0] = 1.0`, an
albumentations `Compose` called as `transform(image=image, mask=mask)`, `return image, mask`):
the images made natively, each mask read from its PNG, moved as its image was, its values
made as the class's code makes them."""

import json
import os

import numpy as np
import pytest
import torch
import torch.utils.data as tud

A = pytest.importorskip("albumentations")
from albumentations.pytorch import ToTensorV2  # noqa: E402
from PIL import Image  # noqa: E402

from conftest import copy_photos, fallback_reason, native, png_with_chunk, resumed_after, same  # noqa: E402
from hpuload.torch import FallbackWarning, SkippedSampleWarning  # noqa: E402

ZERO_ONE = A.Normalize(mean=[0.0, 0.0, 0.0], std=[1.0, 1.0, 1.0], max_pixel_value=255.0)
EVAL = A.Compose([A.Resize(height=40, width=56), ZERO_ONE, ToTensorV2()])
TRAIN = A.Compose([A.Resize(height=40, width=56), A.HorizontalFlip(p=0.5), A.VerticalFlip(p=0.5), ZERO_ONE, ToTensorV2()])
#: The Carvana tutorial's own training transform (its size made small).
CARVANA_TRAIN = A.Compose(
    [A.Resize(height=40, width=56), A.Rotate(limit=35, p=1.0), A.HorizontalFlip(p=0.5), A.VerticalFlip(p=0.1), ZERO_ONE, ToTensorV2()]
)


def write_masks(images, out, kind="grey", sizes=None):
    """A mask per image, of its size: blocks of 0 and 255 (`grey`: an 8-bit grey PNG), or
    palette indices 0-5 under a palette of each file's own (`palette`)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    for k, path in enumerate(images):
        w, h = Image.open(path).size if sizes is None else sizes
        blocks = rng.integers(0, 2 if kind == "grey" else 6, (h // 4 + 1, w // 4 + 1), dtype=np.uint8)
        values = np.kron(blocks, np.ones((4, 4), np.uint8))[:h, :w]
        if kind == "grey":
            Image.fromarray(values * 255, mode="L").save(out / (path.stem + "_mask.png"))
        else:
            mask = Image.fromarray(values, mode="L").convert("P")
            mask.putpalette([v for i in range(256) for v in ((i * 40 + k * 7) % 256, (i * 90) % 256, (i * 10 + k) % 256)])
            mask.save(out / (path.stem + "_mask.png"))


class Carvana(tud.Dataset):
    """The U-Net tutorial's Dataset, as written there (with `values` choosing what the code
    makes of each mask)."""

    def __init__(self, image_dir, mask_dir, transform=None, values="tutorial"):
        self.image_dir, self.mask_dir, self.transform, self.values = image_dir, mask_dir, transform, values
        self.images = sorted(os.listdir(image_dir))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        img_path = os.path.join(self.image_dir, self.images[index])
        mask_path = os.path.join(self.mask_dir, self.images[index].replace(".jpg", "_mask.png"))
        image = np.array(Image.open(img_path).convert("RGB"))
        mask = self.mask(mask_path)
        if self.transform is not None:
            augmentations = self.transform(image=image, mask=mask)
            image = augmentations["image"]
            mask = augmentations["mask"]
        if self.values == "long channel":
            mask = mask.long().unsqueeze(0)
        return image, mask

    def mask(self, path):
        if self.values in ("tutorial", "long channel"):
            mask = np.array(Image.open(path).convert("L"), dtype=np.float32)
            mask[mask == 255.0] = 1.0
        elif self.values == "scaled":
            mask = np.array(Image.open(path).convert("L")) / 255.0
        elif self.values == "thresholded":
            mask = (np.array(Image.open(path).convert("L")) > 127).astype(np.float32)
        elif self.values == "where":
            mask = np.where(np.array(Image.open(path)) > 0, 1.0, 0.0).astype(np.float32)
        elif self.values == "indices":
            mask = np.array(Image.open(path))
        elif self.values == "palette grey":
            mask = np.array(Image.open(path).convert("L"))
        elif self.values == "int64":
            mask = (np.array(Image.open(path)) // 255).astype(np.int64)
        return mask


@pytest.fixture(scope="module")
def folders(jpeg_folder, tmp_path_factory):
    """Twelve photos in a folder of their own, with grey masks and palette masks."""
    root = tmp_path_factory.mktemp("carvana")
    images = copy_photos(jpeg_folder, root / "images")
    write_masks(images, root / "masks")
    write_masks(images, root / "palette", kind="palette")
    return root


@pytest.mark.parametrize("masks", ["masks", "palette"])
@pytest.mark.parametrize("how", ["collate", "collate_fn", "workers"])
def test_the_unet_tutorials_dataset_gives_torchs_batches_of_images_and_masks_bit_for_bit(folders, masks, how):
    ds = Carvana(folders / "images", folders / masks, EVAL, values="tutorial" if masks == "masks" else "indices")
    kwargs = {"collate_fn": lambda b: tud.default_collate(b)} if how == "collate_fn" else {}
    workers = 2 if how == "workers" else 0
    ours = list(native(ds, batch_size=5, backend="cpu", num_workers=workers, **kwargs))
    theirs = list(tud.DataLoader(ds, batch_size=5, **kwargs))
    assert len(ours) == len(theirs) == 3 and all(same(a, b) for a, b in zip(ours, theirs))
    assert ours[0][1].dtype == (torch.float32 if masks == "masks" else torch.uint8)


@pytest.mark.parametrize(
    "values,masks",
    [
        ("scaled", "masks"),
        ("thresholded", "masks"),
        ("where", "masks"),
        ("long channel", "masks"),
        ("palette grey", "palette"),
    ],
)
def test_the_mask_values_the_code_computes_are_its_own_bit_for_bit(folders, values, masks):
    """Each mask's values as the class's code makes them (NumPy's and torch's own arithmetic
    on each byte value; Pillow's grey of each file's own palette), in its dtype and shape."""
    ds = Carvana(folders / "images", folders / masks, EVAL, values=values)
    ours = list(native(ds, batch_size=6, backend="cpu"))
    theirs = list(tud.DataLoader(ds, batch_size=6))
    assert all(same(a, b) for a, b in zip(ours, theirs))
    if values == "long channel":
        assert ours[0][1].shape == (6, 1, 40, 56) and ours[0][1].dtype == torch.int64


def flips_fell(loader, epoch, index, image):
    """Whether the flips of sample `index`'s plan fell `(left to right, top to bottom)`."""
    plan = json.loads(loader._core.sample_plan(epoch, index, image.shape[1], image.shape[0]))
    ops = [op.get("op") for op in plan.get("ops", [])]
    return (ops.count("hflip") + bool(plan.get("flip"))) % 2 == 1, ops.count("vflip") % 2 == 1


def test_flips_drawn_by_the_compose_move_each_mask_as_its_image(folders):
    """A `Resize` then flips falling per sample: each sample is albumentations' own for the
    flips hpuload drew, image and mask, bit for bit, over two epochs; every pair of falls
    is seen."""
    ds = Carvana(folders / "images", folders / "masks", TRAIN)
    loader = native(ds, batch_size=4, backend="cpu", seed=3)
    falls = set()
    for epoch in range(2):
        for b, (x, y) in enumerate(loader):
            for k in range(x.shape[0]):
                i = b * 4 + k
                image = np.array(Image.open(folders / "images" / ds.images[i]).convert("RGB"))
                fell = flips_fell(loader, epoch, i, image)
                flips = [f for f, on in zip((A.HorizontalFlip(p=1.0), A.VerticalFlip(p=1.0)), fell) if on]
                want = A.Compose([A.Resize(height=40, width=56), *flips, ZERO_ONE, ToTensorV2()])
                got = want(image=image, mask=ds.mask(str(folders / "masks" / ds.images[i].replace(".jpg", "_mask.png"))))
                assert torch.equal(x[k], got["image"]) and torch.equal(y[k], got["mask"]), (epoch, i)
                falls.add(fell)
    assert len(falls) == 4


def test_a_random_crop_of_the_resize_moves_each_mask_as_its_image(folders):
    ds = Carvana(
        folders / "images",
        folders / "palette",
        A.Compose([A.Resize(48, 64), A.HorizontalFlip(p=0.5), A.RandomCrop(32, 40), ZERO_ONE, ToTensorV2()]),
        values="indices",
    )
    loader = native(ds, batch_size=4, backend="cpu", seed=8)
    corners = set()
    for b, (x, y) in enumerate(loader):
        for k in range(x.shape[0]):
            i = b * 4 + k
            image = np.array(Image.open(folders / "images" / ds.images[i]).convert("RGB"))
            mask = np.array(Image.open(folders / "palette" / ds.images[i].replace(".jpg", "_mask.png")))
            plan = json.loads(loader._core.sample_plan(0, i, image.shape[1], image.shape[0]))["resized_crop"]
            resized = A.Resize(48, 64)(image=image, mask=mask)
            image, mask = resized["image"], resized["mask"]
            if plan["hflip"]:
                image, mask = image[:, ::-1], mask[:, ::-1]
            top, left = plan["at"]
            image, mask = image[top : top + 32, left : left + 40], mask[top : top + 32, left : left + 40]
            want = A.Compose([ZERO_ONE, ToTensorV2()])(image=np.ascontiguousarray(image), mask=np.ascontiguousarray(mask))
            assert torch.equal(x[k], want["image"]) and torch.equal(y[k], want["mask"]), i
            corners.add((top, left))
    assert len(corners) > 1


@pytest.mark.parametrize(
    "compose",
    [
        A.Compose([A.VerticalFlip(p=1.0), A.CenterCrop(40, 56), ZERO_ONE, ToTensorV2()]),
        A.Compose([A.HorizontalFlip(p=1.0), A.VerticalFlip(p=1.0), A.CenterCrop(64, 48), ZERO_ONE, ToTensorV2()]),
    ],
    ids=["vflip", "both"],
)
def test_flips_before_a_crop_of_the_image_flip_each_whole_mask_first(folders, compose):
    """A flip before the crop is the whole image's (the plan's `pre` flips): each mask is
    flipped whole before its cut, as albumentations flips it (session 112: before, the mask
    was cut unflipped)."""
    ds = Carvana(folders / "images", folders / "palette", compose, values="indices")
    ours, theirs = list(native(ds, batch_size=4, backend="cpu")), list(tud.DataLoader(ds, batch_size=4))
    assert len(ours) == 3 and all(same(a, b) for a, b in zip(ours, theirs))


def test_the_media_engine_gives_the_images_within_their_floor_and_the_masks_exactly(folders):
    ds = Carvana(folders / "images", folders / "masks", EVAL)
    for (x1, y1), (x2, y2) in zip(native(ds, batch_size=6, backend="auto"), tud.DataLoader(ds, batch_size=6)):
        mse = ((x1 - x2) ** 2).mean().item()
        assert 10 * np.log10(1 / max(mse, 1e-12)) > 30  # PSNR over the [0, 1] range
        assert torch.equal(y1, y2)


@pytest.mark.parametrize("transform", [TRAIN, CARVANA_TRAIN], ids=["flips", "rotate"])
def test_the_media_engine_and_the_cpu_path_flip_the_same_samples_and_masks(folders, transform):
    """The plan is the loader's, whichever backend decodes: the same flips (and warps) fall
    for the same seed, and each mask is the same."""
    ds = Carvana(folders / "images", folders / "masks", transform)
    for (x1, y1), (x2, y2) in zip(
        native(ds, batch_size=6, backend="auto", seed=5), native(ds, batch_size=6, backend="cpu", seed=5)
    ):
        assert torch.equal(y1, y2)
        mse = ((x1 - x2) ** 2).mean().item()
        assert 10 * np.log10(1 / max(mse, 1e-12)) > 30


@pytest.mark.parametrize("transform", [TRAIN, CARVANA_TRAIN], ids=["flips", "rotate"])
def test_a_resumed_run_gives_the_same_images_and_masks(folders, transform):
    ds = Carvana(folders / "images", folders / "masks", transform)
    rest, resumed = resumed_after(lambda: native(ds, batch_size=3, shuffle=True, backend="cpu", seed=11), 2)
    assert len(rest) == len(resumed) == 2 and all(same(a, b) for a, b in zip(rest, resumed))


def test_a_damaged_mask_and_a_mask_of_another_size_are_named_and_their_samples_replaced(folders, tmp_path):
    masks = tmp_path / "masks"
    masks.mkdir()
    for path in sorted((folders / "masks").iterdir()):
        (masks / path.name).write_bytes(path.read_bytes())
    names = sorted(os.listdir(masks))
    (masks / names[1]).write_bytes(b"\x89PNG\r\n\x1a\n damaged")
    Image.new("L", (7, 5)).save(masks / names[6])
    ds = Carvana(folders / "images", masks, EVAL)
    with pytest.warns(SkippedSampleWarning) as caught:
        batches = list(native(ds, batch_size=6, backend="cpu"))
    said = " ".join(str(w.message) for w in caught)
    assert names[1] in said and names[6] in said and "7x5" in said
    assert all(b[1].shape == (6, 40, 56) for b in batches)
    ours = [(x, y) for b in batches for x, y in zip(*b)]
    for k in range(12):
        # Every other sample is the class's own; the two named are their next ones.
        tx, ty = ds[k + (k in (1, 6))]
        assert torch.equal(ours[k][0], tx) and torch.equal(ours[k][1], ty), k


def test_a_mask_set_or_shaped_so_that_albumentations_casts_it_falls_back_named(folders):
    """albumentations hands an int64 mask out as int32: the check that runs the class once for
    real sees it, and the loader falls back rather than give another dtype."""
    said = fallback_reason(Carvana(folders / "images", folders / "masks", EVAL, values="int64"), batch_size=4)
    assert "int32" in said and "int64" in said


class ReadsOtherwise(Carvana):
    def __init__(self, *args, how, **kwargs):
        super().__init__(*args, **kwargs)
        self.how = how

    def mask(self, path):
        if self.how == "gif":
            return np.array(Image.open(str(path).replace("_mask.png", "_mask.gif")).convert("L"))
        if self.how == "colour":
            return np.array(Image.open(path).convert("RGB"))
        mask = np.array(Image.open(path).convert("L"), dtype=np.float32)
        if self.how == "sum":
            mask = mask / mask.max()
        if self.how == "crop":
            mask = mask[:20]
        return mask


@pytest.mark.parametrize(
    "how,transform,reason",
    [
        ("colour", EVAL, "mask="),
        ("sum", EVAL, ".max"),
        ("crop", EVAL, "the mask indexed by"),
        (
            "plain",
            A.Compose([A.Resize(40, 56), A.Rotate(limit=35, mask_interpolation=1, p=1.0), ZERO_ONE, ToTensorV2()]),
            "mask_interpolation=1",
        ),
        (
            "plain",
            A.Compose([A.PadIfNeeded(48, 64, border_mode=0), A.RandomCrop(40, 56), A.Rotate(limit=35, fill_mask=3, p=1.0), ZERO_ONE, ToTensorV2()]),
            "different fill_mask",
        ),
        ("plain", A.Compose([A.Rotate(limit=35, p=1.0), A.Resize(40, 56), ZERO_ONE, ToTensorV2()]), "Rotate"),
    ],
)
def test_what_would_read_or_move_the_mask_otherwise_goes_to_torchs_loader_named(folders, how, transform, reason):
    said = fallback_reason(ReadsOtherwise(folders / "images", folders / "masks", transform, how=how), batch_size=4)
    assert reason in said, said


@pytest.mark.parametrize("kind", ["gif", "jpeg"])
def test_a_mask_that_is_no_png_is_read_as_the_class_reads_it(folders, tmp_path, kind):
    """The Carvana set's GIF masks, JPEG masks (Kvasir-SEG's), made grey by the class: each
    read by Pillow as the class reads it, then moved natively; torch's batches bit for bit."""
    others = tmp_path / kind
    others.mkdir()
    for path in sorted((folders / "palette").iterdir()):
        mask = Image.open(path)
        mask.save(others / path.name.replace(".png", ".gif")) if kind == "gif" else mask.convert("RGB").save(
            others / path.name.replace(".png", ".gif"), format="JPEG"
        )
    ds = ReadsOtherwise(folders / "images", others, EVAL, how="gif")
    ours = list(native(ds, batch_size=5, backend="cpu"))
    assert all(same(a, b) for a, b in zip(ours, tud.DataLoader(ds, batch_size=5)))


@pytest.mark.parametrize("how", ["plain", "interlaced", "comment", "transparency", "grey palette"])
def test_gif_masks_made_grey_are_decoded_natively_as_pillow_makes_them_grey(folders, tmp_path, how, monkeypatch):
    """The Carvana set's GIF masks as the tutorial reads them (`.convert("L")`), in each form a
    GIF writer gives (interlaced or not, a comment or a transparent index before the frame,
    colour or grey palettes): decoded natively, none by Pillow on the main thread, each value
    Pillow's grey of its palette colour; torch's batches bit for bit, through `Rotate` too."""
    from hpuload import _segmentation

    others = tmp_path / "gif"
    others.mkdir()
    for path in sorted((folders / "palette").iterdir()):
        mask = Image.open(path)
        if how == "grey palette":
            mask = Image.fromarray(np.array(mask) * 40, mode="L")
        extra = {"comment": {"comment": b"made for a test"}, "transparency": {"transparency": 2}}.get(how, {})
        mask.save(others / path.name.replace(".png", ".gif"), interlace=how == "interlaced", **extra)

    def never(*args):
        raise AssertionError("a GIF read by Pillow")

    monkeypatch.setattr(_segmentation.FileMasks, "_read_own", never)
    ds = ReadsOtherwise(folders / "images", others, EVAL, how="gif")
    assert all(same(a, b) for a, b in zip(native(ds, batch_size=5, backend="cpu"), tud.DataLoader(ds, batch_size=5)))
    if how == "plain":
        # Rotated as the same masks in PNG, made grey by Pillow, are for the same seed.
        gifs = ReadsOtherwise(folders / "images", others, CARVANA_TRAIN, how="gif")
        pngs = Carvana(folders / "images", folders / "palette", CARVANA_TRAIN, values="palette grey")
        ours, want = (list(native(d, batch_size=5, backend="cpu", seed=2)) for d in (gifs, pngs))
        assert len(ours) == 3 and all(same(a, b) for a, b in zip(ours, want))


def test_the_header_of_a_gif_says_whether_its_first_frame_covers_its_screen():
    from hpuload._segmentation import _grey_gif_size

    frame = b"\x2c" + bytes([0, 0, 0, 0, 2, 0, 1, 0, 0])
    head = b"GIF89a" + bytes([2, 0, 1, 0, 0x80, 0, 0]) + bytes(6)
    assert _grey_gif_size(head + frame) == (2, 1)
    comment = b"\x21\xfe\x03abc\x00"
    assert _grey_gif_size(head + comment + frame) == (2, 1)
    assert _grey_gif_size(head + b"\x2c" + bytes([1, 0, 0, 0, 1, 0, 1, 0, 0])) is None
    assert _grey_gif_size(b"\x89PNG\r\n\x1a\n" + bytes(20)) is None
    assert _grey_gif_size(head[:12]) is None


class ReadByOpenCV(tud.Dataset):
    """A Kaggle-style class: OpenCV reads the image (made RGB) and the mask grey."""

    def __init__(self, root, transform, how="binary", returns="tuple"):
        self.root, self.transform, self.how, self.returns = root, transform, how, returns
        self.images = sorted(os.listdir(root / "images"))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        image = cv2.imread(str(self.root / "images" / self.images[i]))
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        folder = "palette" if self.how.endswith(" palette") else "masks"
        mask = cv2.imread(str(self.root / folder / self.images[i].replace(".jpg", "_mask.png")), cv2.IMREAD_GRAYSCALE)
        if self.how.startswith("binary"):
            mask[mask > 0] = 1
        elif self.how == "scaled":
            mask = mask.astype(np.float32) / 255.0
        out = self.transform(image=image, mask=mask)
        if self.returns == "dict":
            return {"image": out["image"], "mask": out["mask"]}
        return out["image"], out["mask"].unsqueeze(0).float()


cv2 = pytest.importorskip("cv2")


@pytest.mark.parametrize("how", ["binary", "scaled"])
@pytest.mark.parametrize("returns", ["tuple", "dict"])
def test_a_class_reading_with_opencv_gives_torchs_batches_bit_for_bit(folders, how, returns):
    ds = ReadByOpenCV(folders, EVAL, how, returns)
    ours, theirs = list(native(ds, batch_size=5, backend="cpu")), list(tud.DataLoader(ds, batch_size=5))
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs):
        if returns == "dict":
            assert list(a) == list(b) == ["image", "mask"]
            a, b = list(a.values()), list(b.values())
        assert same(list(a), list(b))


def test_a_palette_mask_read_grey_by_opencv_is_opencvs_own_grey_of_it(folders):
    ds = ReadByOpenCV(folders, EVAL, "binary palette")
    assert all(same(a, b) for a, b in zip(native(ds, batch_size=6, backend="cpu"), tud.DataLoader(ds, batch_size=6)))


def test_a_mask_opencv_turns_by_its_exif_orientation_is_read_by_opencv_turned(folders, tmp_path):
    (tmp_path / "masks").mkdir()
    (tmp_path / "images").symlink_to(folders / "images")
    for path in sorted((folders / "masks").iterdir()):
        (tmp_path / "masks" / path.name).write_bytes(path.read_bytes())
    # A little-endian EXIF block whose one entry is an orientation of 3 (turned a half).
    exif = b"II*\x00\x08\x00\x00\x00\x01\x00\x12\x01\x03\x00\x01\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00"
    turned = sorted((tmp_path / "masks").iterdir())[2]
    png_with_chunk(Image.open(turned), turned, b"eXIf", exif)
    assert not np.array_equal(cv2.imread(str(turned), cv2.IMREAD_GRAYSCALE), np.array(Image.open(turned)))
    ds = ReadByOpenCV(tmp_path, EVAL)
    ours = list(native(ds, batch_size=6, backend="cpu"))
    assert all(same(a, b) for a, b in zip(ours, tud.DataLoader(ds, batch_size=6)))


class FlipsItself(Carvana):
    def __getitem__(self, index):
        image, mask = super().__getitem__(index)
        if torch.rand(1).item() < 0.5:
            image, mask = image.flip(-1), mask.flip(-1)
        return image, mask


def test_a_flip_the_class_draws_for_an_image_and_its_mask_goes_to_torchs_loader_named(folders):
    said = fallback_reason(FlipsItself(folders / "images", folders / "masks", EVAL), batch_size=4)
    assert "flip" in said or "mask" in said, said


def test_masks_the_class_reads_from_elsewhere_after_an_epoch_are_read_from_there(folders, tmp_path):
    """The class's mask folder changed between epochs (masks cleaned, relabelled): the next
    epoch's masks are the new files', as torch's loader reads them."""
    inverted = tmp_path / "inverted"
    inverted.mkdir()
    for path in sorted((folders / "masks").iterdir()):
        Image.fromarray(255 - np.array(Image.open(path))).save(inverted / path.name)
    ds = Carvana(folders / "images", folders / "masks", EVAL)
    loader = native(ds, batch_size=6, backend="cpu")
    first = list(loader)
    ds.mask_dir = inverted
    second = list(loader)
    assert all(same(a, b) for a, b in zip(second, tud.DataLoader(ds, batch_size=6)))
    assert all(torch.equal(a[1], 1 - b[1]) for a, b in zip(first, second))


@pytest.mark.parametrize("values,masks", [("tutorial", "masks"), ("palette grey", "palette"), ("scaled", "masks")])
@pytest.mark.parametrize("fill_mask", [0, 1, 255])
def test_a_letterbox_pads_each_mask_with_its_fill_after_the_codes_values(folders, values, masks, fill_mask):
    """`LongestMaxSize` then `PadIfNeeded`: the padding holds `fill_mask` as albumentations
    pads the mask the code made (in its dtype), not that value put through the code's steps
    or a palette's grey."""
    letterbox = A.Compose(
        [A.LongestMaxSize(48), A.PadIfNeeded(48, 48, border_mode=0, fill=0, fill_mask=fill_mask), ZERO_ONE, ToTensorV2()]
    )
    ds = Carvana(folders / "images", folders / masks, letterbox, values=values)
    ours = list(native(ds, batch_size=6, backend="cpu"))
    assert all(same(a, b) for a, b in zip(ours, tud.DataLoader(ds, batch_size=6)))


def test_a_transform_reassigned_between_epochs_is_followed_or_sent_to_torchs_loader(folders):
    """Flips of another probability move the masks alike: the loader goes on natively, and
    the epoch after gives the new transform's flips; a resize to another size would move
    them otherwise: torch's loader takes over, with a warning, and gives its batches."""
    ds = Carvana(folders / "images", folders / "masks", EVAL)
    loader = native(ds, batch_size=6, backend="cpu")
    list(loader)
    ds.transform = A.Compose([A.Resize(height=40, width=56), A.HorizontalFlip(p=1.0), ZERO_ONE, ToTensorV2()])
    flipped = list(loader)
    for (x, y), (tx, ty) in zip(flipped, tud.DataLoader(ds, batch_size=6)):
        assert torch.equal(x, tx) and torch.equal(y, ty)
    ds.transform = A.Compose([A.Resize(height=24, width=32), ZERO_ONE, ToTensorV2()])
    with pytest.warns(FallbackWarning):
        resized = list(loader)
    assert all(same(a, b) for a, b in zip(resized, tud.DataLoader(ds, batch_size=6)))
    assert resized[0][1].shape == (6, 24, 32)


def test_a_class_that_raises_for_its_first_samples_goes_to_torchs_loader_which_raises(folders, tmp_path):
    """Masks all of another size than their images (albumentations refuses each pair): the
    class raises for every index, so the loader falls back and torch's raises its error."""
    small = tmp_path / "small"
    small.mkdir()
    for path in sorted((folders / "masks").iterdir()):
        Image.new("L", (9, 7)).save(small / path.name)
    ds = Carvana(folders / "images", small, EVAL)
    said = fallback_reason(ds, batch_size=4)
    assert "raises" in said and "first 4 indices" in said


class KaggleArrays(tud.Dataset):
    """A Kaggle notebook's class: a `Compose` without `ToTensorV2`, its arrays made tensors
    (or handed out as arrays) by the class's own code."""

    def __init__(self, root, transform, how):
        self.root, self.transform, self.how = root, transform, how
        self.images = sorted(os.listdir(root / "images"))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        img = cv2.cvtColor(cv2.imread(str(self.root / "images" / self.images[i])), cv2.COLOR_BGR2RGB)
        mask = cv2.imread(str(self.root / "masks" / self.images[i].replace(".jpg", "_mask.png")), 0)
        mask = (mask > 127).astype(np.uint8)
        augmented = self.transform(image=img, mask=mask)
        img, mask = augmented["image"], augmented["mask"]
        if self.how == "tensors":
            img = img.transpose(2, 0, 1) / 255.0
            return torch.tensor(img, dtype=torch.float), torch.tensor(mask, dtype=torch.long)
        if self.how == "from_numpy":
            return torch.from_numpy(img.transpose(2, 0, 1)).float() / 255, torch.from_numpy(mask).long()
        return img.transpose(2, 0, 1).astype(np.float32), mask.astype(np.float32)


def equal(a, b) -> bool:
    """Equal values of one structure, tensors and arrays of one type, dtype and shape."""
    if isinstance(a, (torch.Tensor, np.ndarray)):
        return type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and bool((a == b).all())
    return type(a) is type(b) and len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("how", ["tensors", "from_numpy", "arrays", "as returned"])
@pytest.mark.parametrize("collate", [None, tud.default_collate, list])
def test_a_compose_without_totensorv2_whose_arrays_the_class_converts_gives_torchs_batches(folders, how, collate):
    ds = KaggleArrays(folders, A.Compose([A.Resize(40, 56), A.HorizontalFlip(p=1.0)]), how)
    if how == "as returned":  # the U-Net tutorial's class, its Compose's arrays returned as they are
        ds = Carvana(folders / "images", folders / "masks", A.Compose([A.Resize(40, 56), ZERO_ONE]))
    ours = list(native(ds, batch_size=5, backend="cpu", collate_fn=collate))
    assert equal(ours, list(tud.DataLoader(ds, batch_size=5, collate_fn=collate)))
    if collate is list and how == "arrays":
        assert isinstance(ours[0][0][0], np.ndarray) and isinstance(ours[0][0][1], np.ndarray)


class StepsOnOpenCVRead(ReadByOpenCV):
    """OpenCV's grey read computed on straight away: reflected operators, in-place steps (the
    read's variable itself stands for the mask), NumPy's functions on a comparison of it."""

    def __getitem__(self, i):
        image = cv2.cvtColor(cv2.imread(str(self.root / "images" / self.images[i])), cv2.COLOR_BGR2RGB)
        m = cv2.imread(str(self.root / "masks" / self.images[i].replace(".jpg", "_mask.png")), cv2.IMREAD_GRAYSCALE)
        if self.how == "reflected":
            m = 255 - m
        elif self.how == "where":
            m = np.where(m > 127, 1.0, 0.0).astype(np.float32)
        elif self.how == "in place":
            m //= 2
            m += 1
        out = self.transform(image=image, mask=m)
        return out["image"], out["mask"]


@pytest.mark.parametrize("how", ["reflected", "where", "in place"])
def test_steps_on_an_opencv_grey_read_are_the_codes_own_bit_for_bit(folders, how):
    ds = StepsOnOpenCVRead(folders, EVAL, how)
    assert all(same(a, b) for a, b in zip(native(ds, batch_size=6, backend="cpu"), tud.DataLoader(ds, batch_size=6)))


def replayed(plan, image, mask, border=None, fill=0, fill_mask=0):
    """`image` and `mask` (already cut to the output) moved by the plan's ops in order, each
    by NumPy or OpenCV itself: a flip, a transpose, a quarter turn (`np.rot90`), or a warp by
    the plan's own float32 output-to-source matrix
    (`WARP_INVERSE_MAP`: bilinear for the image, nearest for the mask), as albumentations
    warps them with the matrix it draws."""
    border = cv2.BORDER_CONSTANT if border is None else border
    h, w = mask.shape
    for op in plan.get("ops", []) + ([{"op": "hflip"}] if plan.get("flip") else []):
        if op["op"] == "hflip":
            image, mask = image[:, ::-1], mask[:, ::-1]
        elif op["op"] == "vflip":
            image, mask = image[::-1], mask[::-1]
        elif op["op"] == "transpose":
            image, mask = image.transpose(1, 0, 2), mask.T
        elif op["op"] == "rot90":
            image, mask = np.rot90(image, op["arg"]), np.rot90(mask, op["arg"])
        elif op["op"] == "cv2_affine":
            m = np.array(op["arg"]["inverse"], dtype=np.float32).astype(np.float64).reshape(2, 3)
            image = cv2.warpAffine(np.ascontiguousarray(image), m, (w, h), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderMode=border, borderValue=(fill,) * 3)
            mask = cv2.warpAffine(np.ascontiguousarray(mask), m, (w, h), flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP, borderMode=border, borderValue=fill_mask)
    return np.ascontiguousarray(image), np.ascontiguousarray(mask)


def test_the_carvana_tutorials_training_rotate_moves_each_mask_as_its_image(folders):
    """The tutorial's `Rotate(limit=35)` then flips: each sample is the resize warped and
    flipped by OpenCV itself with the matrix and flips hpuload drew, image and mask bit for
    bit (its constant border 0 in both), over two epochs; the flips fall both ways."""
    ds = Carvana(folders / "images", folders / "masks", CARVANA_TRAIN)
    loader = native(ds, batch_size=4, backend="cpu", seed=4)
    falls = set()
    for epoch in range(2):
        for b, (x, y) in enumerate(loader):
            for k in range(x.shape[0]):
                i = b * 4 + k
                image = np.array(Image.open(folders / "images" / ds.images[i]).convert("RGB"))
                plan = json.loads(loader._core.sample_plan(epoch, i, image.shape[1], image.shape[0]))
                mask = ds.mask(str(folders / "masks" / ds.images[i].replace(".jpg", "_mask.png")))
                resized = A.Resize(40, 56)(image=image, mask=mask)
                image, mask = replayed(plan, resized["image"], resized["mask"])
                want = A.Compose([ZERO_ONE, ToTensorV2()])(image=image, mask=mask)
                assert torch.equal(x[k], want["image"]) and torch.equal(y[k], want["mask"]), (epoch, i)
                assert (y[k] == 0).any() and (y[k] == 1).any()
                falls.add(flips_fell(loader, epoch, i, image)[0])
    assert falls == {True, False}


@pytest.mark.parametrize(
    "warp",
    [
        A.Rotate(limit=(20, 20), p=1.0),
        A.Rotate(limit=(-31.5, -31.5), border_mode=cv2.BORDER_REFLECT_101, p=1.0),
        A.Rotate(limit=(12, 12), border_mode=cv2.BORDER_REPLICATE, p=1.0),
        A.Rotate(limit=(-40, -40), fill=7, fill_mask=1, p=1.0),
        A.Affine(scale=0.8, translate_px=(3, 3), rotate=(15, 15), shear=(5, 5), p=1.0),
        A.ShiftScaleRotate(shift_limit=(0.1, 0.1), scale_limit=(0.2, 0.2), rotate_limit=(-25, -25), border_mode=cv2.BORDER_CONSTANT, fill_mask=3, p=1.0),
    ],
    ids=["rotate", "reflect101", "replicate", "fill", "affine", "shift-scale-rotate"],
)
@pytest.mark.parametrize("values,masks", [("tutorial", "masks"), ("indices", "palette"), ("scaled", "masks")])
def test_a_fixed_warp_gives_torchs_batches_of_images_and_masks_bit_for_bit(folders, warp, values, masks):
    """A warp of one matrix for every sample after the resize (albumentations' own
    composition of it, its border, its `fill_mask` after the code's values): torch's batches
    bit for bit."""
    ds = Carvana(folders / "images", folders / masks, A.Compose([A.Resize(40, 56), warp, ZERO_ONE, ToTensorV2()]), values=values)
    ours = list(native(ds, batch_size=5, backend="cpu"))
    theirs = list(tud.DataLoader(ds, batch_size=5))
    assert len(ours) == len(theirs) == 3 and all(same(a, b) for a, b in zip(ours, theirs))


@pytest.mark.parametrize(
    "compose",
    [
        A.Compose([A.Resize(40, 56), A.HorizontalFlip(p=0.5), A.Rotate(limit=30, p=1.0), A.VerticalFlip(p=0.5), ZERO_ONE, ToTensorV2()]),
        A.Compose([A.Resize(48, 64), A.HorizontalFlip(p=0.5), A.RandomCrop(40, 56), A.Rotate(limit=30, p=0.7), A.VerticalFlip(p=0.5), ZERO_ONE, ToTensorV2()]),
        A.Compose([A.Resize(40, 56), A.OneOf([A.Rotate(limit=30, p=1.0), A.Affine(scale=(0.8, 1.2), p=1.0)], p=0.8), A.HorizontalFlip(p=0.5), ZERO_ONE, ToTensorV2()]),
    ],
    ids=["flip-rotate-flip", "crop-of-resize", "one-of"],
)
def test_flips_before_and_after_a_warp_move_each_mask_in_their_order(folders, compose):
    """A flip before the warp mirrors what the warp reads; one after mirrors its output: each
    sample replayed in the plan's order by OpenCV (after the resize, or its crop at the drawn
    corner, flipped between as drawn), image and mask bit for bit."""
    ds = Carvana(folders / "images", folders / "palette", compose, values="indices")
    loader = native(ds, batch_size=4, backend="cpu", seed=9)
    warped = 0
    for b, (x, y) in enumerate(loader):
        for k in range(x.shape[0]):
            i = b * 4 + k
            image = np.array(Image.open(folders / "images" / ds.images[i]).convert("RGB"))
            mask = np.array(Image.open(folders / "palette" / ds.images[i].replace(".jpg", "_mask.png")))
            plan = json.loads(loader._core.sample_plan(0, i, image.shape[1], image.shape[0]))
            rc = plan.get("resized_crop")
            first = compose.transforms[0]
            resized = A.Resize(first.height, first.width)(image=image, mask=mask)
            image, mask = resized["image"], resized["mask"]
            if rc is not None and rc["resized"] != [40, 56]:
                # The crop of the flipped resize; its flip is the plan's first op (or, where
                # nothing after it is a warp, the flip of the slot's writing).
                if rc["hflip"]:
                    image, mask = image[:, ::-1], mask[:, ::-1]
                    if {"op": "hflip"} in plan["ops"]:
                        plan["ops"].remove({"op": "hflip"})
                    else:
                        plan["flip"] = False
                top, left = rc["at"]
                image, mask = image[top : top + 40, left : left + 56], mask[top : top + 40, left : left + 56]
            warped += any(op["op"] == "cv2_affine" for op in plan["ops"])
            image, mask = replayed(plan, image, mask)
            want = A.Compose([ZERO_ONE, ToTensorV2()])(image=image, mask=mask)
            assert torch.equal(x[k], want["image"]) and torch.equal(y[k], want["mask"]), i
    assert 0 < warped


def test_a_nearest_warp_of_a_mask_is_opencvs_own_for_any_matrix(folders):
    """`byte_masks`' warps of masks of many sizes (rows of every length past OpenCV's vector
    blocks) by random matrices, each border: OpenCV's `warpAffine(INTER_NEAREST)` of the same
    float32 inverse, every value."""
    from hpuload import _hpuload

    rng = np.random.default_rng(7)
    borders = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE, "reflect": cv2.BORDER_REFLECT, "reflect101": cv2.BORDER_REFLECT_101}
    for trial in range(60):
        h, w = (int(v) for v in rng.integers(3, 140, 2))
        values = rng.integers(0, 256, (h, w), dtype=np.uint8)
        angle, scale = np.radians(rng.uniform(-180, 180)), rng.uniform(0.5, 2.0)
        c, s = np.cos(angle) / scale, np.sin(angle) / scale
        inverse = np.array([c, s, rng.uniform(-20, 20), -s, c, rng.uniform(-20, 20)], dtype=np.float32)
        name = list(borders)[trial % 4]
        out = torch.empty((h, w), dtype=torch.uint8)
        source = ("mask", (h, w), values.tobytes())
        drawn = ((h, w), (0, 0), False, False, (0, 0), (False, False))
        _hpuload.byte_masks([source], [drawn], h, w, 9, out.data_ptr(), None, nearest="opencv", moves=[[(inverse.tolist(), name)]])
        want = cv2.warpAffine(values, inverse.astype(np.float64).reshape(2, 3), (w, h), flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP, borderMode=borders[name], borderValue=9)
        assert np.array_equal(out.numpy(), want), (trial, h, w, name)


def test_rotate_draws_its_angle_uniformly_over_its_limit(folders):
    """Rotate's angle read back from 2000 plans' matrices: uniform over `limit` as
    albumentations draws it (mean, spread, percentiles), every one inside it."""
    ds = Carvana(folders / "images", folders / "masks", A.Compose([A.Resize(40, 56), A.Rotate(limit=35, p=1.0), ZERO_ONE, ToTensorV2()]))
    loader = native(ds, batch_size=4, backend="cpu", seed=2)
    angles = []
    for index in range(2000):
        plan = json.loads(loader._core.sample_plan(0, index, 56, 40))
        (op,) = [o for o in plan["ops"] if o["op"] == "cv2_affine"]
        m = np.array(op["arg"]["inverse"], dtype=np.float64)
        angles.append(np.degrees(np.arctan2(-m[1], m[0])))
    rotate = A.Rotate(limit=35, p=1.0)
    rotate.set_random_seed(3)
    want = [rotate.get_params_dependent_on_data({"shape": (40, 56)}, {})["matrix"] for _ in range(2000)]
    want = np.array([np.degrees(np.arctan2(m[0, 1], m[0, 0])) for m in want])
    angles = np.array(angles)
    assert angles.min() >= -35.001 and angles.max() <= 35.001
    assert abs(angles.mean() - want.mean()) < 1.5 and abs(angles.std() - want.std()) < 1.0
    for q in (5, 25, 50, 75, 95):
        assert abs(np.percentile(angles, q) - np.percentile(want, q)) < 2.5, q


@pytest.mark.parametrize(
    "after",
    [
        [A.HorizontalFlip(p=0.5), A.VerticalFlip(p=0.5)],
        [A.RandomRotate90(p=0.8), A.Transpose(p=0.5), A.HorizontalFlip(p=0.5)],
        [A.ShiftScaleRotate(shift_limit=0.1, scale_limit=0.2, rotate_limit=30, p=0.8), A.RandomRotate90(p=0.5)],
    ],
    ids=["flips", "turns", "warp-and-turn"],
)
@pytest.mark.parametrize("values,masks", [("tutorial", "masks"), ("indices", "palette")])
def test_a_random_resized_crop_moves_each_mask_as_its_image(folders, after, values, masks):
    """`RandomResizedCrop` (a square output), then flips, quarter turns, transposes, a warp:
    each sample is the window hpuload drew cut and resized by albumentations' own `Resize`
    (bilinear for the image, nearest for the mask), then moved in the plan's order by NumPy
    and OpenCV, image and mask bit for bit; windows of more than one size are seen."""
    compose = A.Compose([A.RandomResizedCrop(size=(40, 40), scale=(0.3, 1.0)), *after, ZERO_ONE, ToTensorV2()])
    ds = Carvana(folders / "images", folders / masks, compose, values=values)
    loader = native(ds, batch_size=4, backend="cpu", seed=12)
    windows, ops = set(), set()
    for b, (x, y) in enumerate(loader):
        for k in range(x.shape[0]):
            i = b * 4 + k
            image = np.array(Image.open(folders / "images" / ds.images[i]).convert("RGB"))
            mask = ds.mask(str(folders / masks / ds.images[i].replace(".jpg", "_mask.png")))
            plan = json.loads(loader._core.sample_plan(0, i, image.shape[1], image.shape[0]))
            top, left, h, w = (int(plan["crop"][k]) for k in ("top", "left", "height", "width"))
            cut = A.Resize(40, 40)(image=image[top : top + h, left : left + w], mask=mask[top : top + h, left : left + w])
            image, mask = replayed(plan, cut["image"], cut["mask"])
            want = A.Compose([ZERO_ONE, ToTensorV2()])(image=image, mask=mask)
            assert torch.equal(x[k], want["image"]) and torch.equal(y[k], want["mask"]), i
            windows.add((h, w))
            ops |= {op["op"] for op in plan.get("ops", [])}
    assert len(windows) > 1
    if len(after) == 3:
        assert {"rot90", "transpose"} <= ops, ops


def test_a_random_resized_crop_that_resizes_masks_bilinear_goes_to_torchs_loader_named(folders):
    compose = A.Compose([A.RandomResizedCrop(size=(40, 40), mask_interpolation=1), ZERO_ONE, ToTensorV2()])
    said = fallback_reason(Carvana(folders / "images", folders / "masks", compose), batch_size=4)
    assert "RandomResizedCrop of a mask with mask_interpolation=1" in said, said


class SmpCamVid(tud.Dataset):
    """segmentation_models_pytorch's CamVid example class, as written there (its classes
    picked by name, the mask read grey by OpenCV and remapped into `np.zeros_like(mask)`,
    the image transposed to CHW), or reading the mask with Pillow (`read="pil"`)."""

    CLASSES = ["sky", "building", "pole", "road", "pavement", "tree", "signsymbol", "fence", "car", "pedestrian", "bicyclist", "unlabelled"]

    def __init__(self, images_dir, masks_dir, classes=None, augmentation=None, read="cv2"):
        self.ids = sorted(os.listdir(images_dir))
        self.images_fps = [os.path.join(images_dir, i) for i in self.ids]
        self.masks_fps = [os.path.join(masks_dir, i.replace(".jpg", "_mask.png")) for i in self.ids]
        self.background_class = self.CLASSES.index("unlabelled")
        self.class_values = [self.CLASSES.index(c.lower()) for c in classes] if classes else list(range(len(self.CLASSES)))
        self.class_map = {self.background_class: 0}
        self.class_map.update({v: i + 1 for i, v in enumerate(self.class_values) if v != self.background_class})
        self.augmentation, self.read = augmentation, read

    def __getitem__(self, i):
        import cv2

        image = cv2.imread(self.images_fps[i])
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        mask = cv2.imread(self.masks_fps[i], 0) if self.read == "cv2" else np.array(Image.open(self.masks_fps[i]))
        mask_remap = np.zeros_like(mask)
        for class_value, new_value in self.class_map.items():
            mask_remap[mask == class_value] = new_value
        if self.augmentation:
            sample = self.augmentation(image=image, mask=mask_remap)
            image, mask_remap = sample["image"], sample["mask"]
        image = image.transpose(2, 0, 1)
        return image, mask_remap

    def __len__(self):
        return len(self.ids)


@pytest.fixture(scope="module")
def camvid_grey(jpeg_folder, tmp_path_factory):
    """Twelve photos made one size, with grey masks of CamVid's twelve class indices."""
    root = tmp_path_factory.mktemp("smp")
    images = copy_photos(jpeg_folder, root / "images")
    rng = np.random.default_rng(12)
    (root / "masks").mkdir()
    for path in images:
        Image.open(path).convert("RGB").resize((60, 44)).save(path, quality=92)
        values = np.kron(rng.integers(0, 12, (11, 15), dtype=np.uint8), np.ones((4, 4), np.uint8))
        Image.fromarray(values, mode="L").save(root / "masks" / (path.stem + "_mask.png"))
    return root


@pytest.mark.parametrize("read", ["cv2", "pil"])
@pytest.mark.parametrize("classes", [["car", "road", "sky"], None])
def test_segmentation_models_pytorchs_camvid_class_remapping_into_zeros_like_gives_torchs_batches(camvid_grey, read, classes):
    ds = SmpCamVid(camvid_grey / "images", camvid_grey / "masks", classes, read=read)
    loader = native(ds, batch_size=5, backend="cpu")
    theirs = list(tud.DataLoader(ds, batch_size=5))
    for _ in range(2):
        ours = list(loader)
        assert len(ours) == len(theirs) and all(same(a, b) for a, b in zip(ours, theirs))
    assert theirs[0][1].dtype == torch.uint8 and theirs[0][1].max() == (3 if classes else 11)


@pytest.mark.parametrize(
    "pad",
    [dict(min_height=48, min_width=64), dict(min_height=44, min_width=60), dict(min_height=51, min_width=67, fill_mask=255), dict(min_height=40, min_width=30)],
    ids=["larger", "the size", "odd, fill_mask 255", "smaller"],
)
def test_segmentation_models_pytorchs_validation_pad_alone_gives_torchs_batches(camvid_grey, pad):
    """Its validation augmentation, `A.Compose([A.PadIfNeeded(384, 480)])` (sizes made small):
    each image and mask padded centred to at least that size and cut nothing, over images of
    one size: one output size, the larger of the two, bit for bit (the odd padding's extra row
    and column below and to the right, the mask's padding its `fill_mask`)."""
    ds = SmpCamVid(camvid_grey / "images", camvid_grey / "masks", ["car", "road", "sky"], A.Compose([A.PadIfNeeded(**pad)]))
    loader = native(ds, batch_size=5, backend="cpu")
    theirs = list(tud.DataLoader(ds, batch_size=5))
    for _ in range(2):
        ours = list(loader)
        assert len(ours) == len(theirs) and all(same(a, b) for a, b in zip(ours, theirs))
    h, w = max(44, pad["min_height"]), max(60, pad["min_width"])
    assert theirs[0][0].shape == (5, 3, h, w) and theirs[0][1].shape == (5, h, w)


def test_a_lone_pad_over_images_of_several_sizes_falls_back_naming_two(camvid_grey, tmp_path):
    """The pad gives each image larger than it a size of its own: torch's loader, named."""
    import shutil

    shutil.copytree(camvid_grey, tmp_path / "smp")
    odd = sorted((tmp_path / "smp" / "images").glob("*.jpg"))[3]
    Image.open(odd).resize((70, 44)).save(odd)
    mask = tmp_path / "smp" / "masks" / (odd.stem + "_mask.png")
    Image.open(mask).resize((70, 44), Image.NEAREST).save(mask)
    ds = SmpCamVid(tmp_path / "smp" / "images", tmp_path / "smp" / "masks", None, A.Compose([A.PadIfNeeded(48, 64)]))
    reason = fallback_reason(ds, batch_size=4, backend="cpu")
    assert odd.name in reason and "differ in size" in reason
