"""A user's own Dataset class of images and their segmentation masks written for torchvision's
v2 transforms, as torchvision's own guide writes it: the mask wrapped as a `tv_tensors.Mask`
(`tv_tensors.Mask(np.array(Image.open(mask)))`, or of the opened file), both given to one
v2 `Compose` (`image, mask = self.transforms(image, mask)`), which moves the mask with the
image (nearest, by torch's positions) and leaves its values to the image's colour steps.
The images made natively, each mask read from its PNG and moved as its image was."""

import json
import os
import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from PIL import Image
from torchvision import tv_tensors
from torchvision.io import read_image
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F2

from conftest import copy_photos, fallback_reason, native, resumed_after, same
from hpuload.torch import DataLoader, FallbackWarning, SkippedSampleWarning

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
TAIL = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]
EVAL = v2.Compose([v2.Resize((40, 56)), *TAIL])
#: The guide's training recipe, made small.
TRAIN = v2.Compose([v2.RandomResizedCrop((40, 56), antialias=True), v2.RandomHorizontalFlip(p=0.5), *TAIL])
CROP_OF_RESIZE = v2.Compose(
    [v2.Resize(48), v2.RandomHorizontalFlip(p=0.5), v2.RandomCrop((40, 44)), v2.RandomVerticalFlip(p=0.5), *TAIL]
)
CENTRE = v2.Compose([v2.Resize(48), v2.CenterCrop(40), *TAIL, v2.ToPureTensor()])


def write_masks(images, out, kind="grey"):
    """A mask per image, of its size: blocks of 0 and 1 as an 8-bit grey PNG (`grey`), or
    palette indices 0-5 under a palette (`palette`)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(6)
    for path in images:
        w, h = Image.open(path).size
        blocks = rng.integers(0, 2 if kind == "grey" else 6, (h // 3 + 1, w // 3 + 1), dtype=np.uint8)
        values = np.kron(blocks, np.ones((3, 3), np.uint8))[:h, :w]
        mask = Image.fromarray(values, mode="L")
        if kind == "palette":
            mask = mask.convert("P")
            mask.putpalette([v for i in range(256) for v in ((i * 40) % 256, (i * 90) % 256, (i * 10) % 256)])
        mask.save(out / (path.stem + ".png"))


class Segmentation(tud.Dataset):
    """Images and masks as the v2 guide's Dataset holds them (`read` how the image is read,
    `mask` how the mask is made a `tv_tensors.Mask`)."""

    def __init__(self, root, masks="masks", transforms=None, read="pil", mask="array", call="pair"):
        self.root, self.masks, self.transforms, self.read, self.mask = root, masks, transforms, read, mask
        self.call = call
        self.names = sorted(os.listdir(os.path.join(root, "images")))

    def __len__(self):
        return len(self.names)

    def __getitem__(self, idx):
        name = self.names[idx]
        path = os.path.join(self.root, "images", name)
        if self.read in ("pil", "tv pil"):
            image = Image.open(path).convert("RGB")
        else:
            image = read_image(path)
        if self.read.startswith("tv "):
            image = tv_tensors.Image(image)  # as the v2 guide's detection tutorial wraps it
        mask = self.mask_of(os.path.join(self.root, self.masks, name.replace(".jpg", ".png")))
        if self.transforms is not None and self.call == "dict":
            sample = self.transforms({"image": image, "mask": mask})
            image, mask = sample["image"], sample["mask"]
        elif self.transforms is not None:
            image, mask = self.transforms(image, mask)
        if self.mask in ("opened", "read"):
            mask = mask.squeeze(0)
        return image, mask

    def mask_of(self, path):
        if self.mask == "array":
            return tv_tensors.Mask(np.array(Image.open(path)))
        if self.mask == "opened":
            return tv_tensors.Mask(Image.open(path))
        if self.mask == "long":
            return tv_tensors.Mask(torch.from_numpy(np.array(Image.open(path))), dtype=torch.int64)
        if self.mask == "computed":
            return tv_tensors.Mask((np.array(Image.open(path)) > 2).astype(np.int64))
        if self.mask == "plain":
            return torch.from_numpy(np.array(Image.open(path)))
        if self.mask == "read":
            return tv_tensors.Mask(read_image(path))
        raise ValueError(self.mask)


@pytest.fixture(scope="module")
def root(jpeg_folder, tmp_path_factory):
    """Twelve photos with grey masks of 0 and 1 and palette masks of indices 0-5."""
    root = tmp_path_factory.mktemp("v2seg")
    images = copy_photos(jpeg_folder, root / "images")
    write_masks(images, root / "masks")
    write_masks(images, root / "palette", kind="palette")
    return root


def plan_of(loader, epoch, index, path):
    w, h = Image.open(path).size
    return json.loads(loader._core.sample_plan(epoch, index, w, h))


def each_sample(loader, ds, epochs: int = 1, batch: int = 4):
    """`(epoch, index, image, mask, image file, plan)` of every sample the loader gives, over
    `epochs` epochs (in order: no shuffle), with the plan hpuload drew for it."""
    for epoch in range(epochs):
        for b, (x, y) in enumerate(loader):
            for k in range(x.shape[0]):
                i = b * batch + k
                path = ds.root / "images" / ds.names[i]
                yield epoch, i, x[k], y[k], path, plan_of(loader, epoch, i, path)


@pytest.mark.parametrize("read", ["pil", "tensor"])
@pytest.mark.parametrize("mask,masks", [("array", "masks"), ("opened", "palette"), ("long", "masks")])
@pytest.mark.parametrize("how", ["collate", "collate_fn", "workers"])
def test_a_v2_dataset_of_images_and_masks_gives_torchs_batches_bit_for_bit(root, read, mask, masks, how):
    ds = Segmentation(root, masks, EVAL, read=read, mask=mask)
    kwargs = {"collate_fn": lambda b: tud.default_collate(b)} if how == "collate_fn" else {}
    ours = list(native(ds, batch_size=5, backend="cpu", num_workers=2 if how == "workers" else 0, **kwargs))
    theirs = list(tud.DataLoader(ds, batch_size=5, **kwargs))
    assert len(ours) == len(theirs) == 3 and all(same(a, b) for a, b in zip(ours, theirs))
    assert ours[0][1].dtype == (torch.int64 if mask == "long" else torch.uint8)


@pytest.mark.parametrize("read", ["tv pil", "tv tensor"])
@pytest.mark.parametrize("mask", ["array", "read"])
@pytest.mark.parametrize("transform", [EVAL, CENTRE])
def test_images_wrapped_as_tv_tensors_images_and_masks_read_by_read_image_give_torchs_batches(root, read, mask, transform):
    ds = Segmentation(root, "masks", transform, read=read, mask=mask)
    ours, theirs = list(native(ds, batch_size=5, backend="cpu")), list(tud.DataLoader(ds, batch_size=5))
    assert len(ours) == 3 and all(same(a, b) for a, b in zip(ours, theirs))


def test_images_wrapped_as_tv_tensors_images_move_their_masks_as_the_plan_drew(root):
    """The guide's training recipe over `tv_tensors.Image(read_image(...))` and masks read by
    `read_image`: each sample v2's own `resized_crop` of the window hpuload drew, flipped as
    drawn, image and mask bit for bit."""
    ds = Segmentation(root, "masks", TRAIN, read="tv tensor", mask="read")
    loader = native(ds, batch_size=4, backend="cpu", seed=3)
    for epoch, i, x, y, path, plan in each_sample(loader, ds):
        top, left, h, w = (int(plan["crop"][key]) for key in ("top", "left", "height", "width"))
        image = tv_tensors.Image(read_image(str(path)))
        mask = tv_tensors.Mask(read_image(str(root / "masks" / (path.stem + ".png"))))
        image, mask = (F2.resized_crop(t, top, left, h, w, [40, 56], antialias=True) for t in (image, mask))
        if flips_of(plan)[0]:
            image, mask = F2.horizontal_flip(image), F2.horizontal_flip(mask)
        image, mask = v2.Compose(TAIL)(image, mask)
        assert same(x, image) and same(y, mask.squeeze(0)), (epoch, i)


@pytest.mark.parametrize("mask,call", [("computed", "pair"), ("array", "dict")])
def test_mask_values_the_code_computes_and_a_dict_given_to_the_transform_give_torchs_batches(root, mask, call):
    ds = Segmentation(root, "palette", CENTRE, mask=mask, call=call)
    ours, theirs = list(native(ds, batch_size=5, backend="cpu")), list(tud.DataLoader(ds, batch_size=5))
    assert len(ours) == 3 and all(same(a, b) for a, b in zip(ours, theirs))
    assert ours[0][1].dtype == (torch.int64 if mask == "computed" else torch.uint8)


@pytest.mark.parametrize(
    "to_dtype,want",
    [
        ({tv_tensors.Image: torch.float32, tv_tensors.Mask: torch.int64, "others": None}, torch.int64),
        ({tv_tensors.Image: torch.float32, "others": None}, torch.uint8),
        ({tv_tensors.Image: torch.float32, "others": torch.float32}, torch.float32),
    ],
    ids=["references", "image-alone", "others"],
)
def test_a_to_dtype_of_one_dtype_per_type_casts_images_and_masks_as_torchs_loader(root, to_dtype, want):
    """The segmentation reference's `ToDtype(dtype={tv_tensors.Image: torch.float32,
    tv_tensors.Mask: torch.int64, "others": None}, scale=True)`: the image scaled to float,
    each mask cast unscaled, bit for bit."""
    compose = v2.Compose([v2.Resize((40, 56)), v2.ToImage(), v2.ToDtype(to_dtype, scale=True), v2.Normalize(MEAN, STD)])
    ds = Segmentation(root, "palette", compose)
    ours, theirs = list(native(ds, batch_size=5, backend="cpu")), list(tud.DataLoader(ds, batch_size=5))
    assert len(ours) == 3 and all(same(a, b) for a, b in zip(ours, theirs))
    assert ours[0][1].dtype == want


def flips_of(plan) -> tuple[bool, bool]:
    """Whether the plan's flips fell `(left to right, top to bottom)`."""
    ops = [op.get("op") for op in plan.get("ops", [])]
    return (ops.count("hflip") + bool(plan.get("flip"))) % 2 == 1, ops.count("vflip") % 2 == 1


def test_the_guides_random_resized_crop_and_flip_move_each_mask_as_its_image(root):
    """Each sample is v2's own `resized_crop` of the window hpuload drew, flipped as drawn,
    image and mask bit for bit, over two epochs; the flip falls both ways."""
    ds = Segmentation(root, "palette", TRAIN)
    loader = native(ds, batch_size=4, backend="cpu", seed=3)
    falls = set()
    for epoch, i, x, y, path, plan in each_sample(loader, ds, epochs=2):
        top, left, h, w = (int(plan["crop"][key]) for key in ("top", "left", "height", "width"))
        image, mask = Image.open(path).convert("RGB"), ds.mask_of(root / "palette" / (path.stem + ".png"))
        image, mask = (F2.resized_crop(t, top, left, h, w, [40, 56], antialias=True) for t in (image, mask))
        fell = flips_of(plan)[0]
        if fell:
            image, mask = F2.horizontal_flip(image), F2.horizontal_flip(mask)
        image, mask = v2.Compose(TAIL)(image, mask)
        assert same(x, image) and same(y, mask), (epoch, i)
        falls.add(fell)
    assert falls == {True, False}


@pytest.mark.parametrize("read", ["pil", "tensor"])
def test_a_crop_of_the_resize_with_flips_around_it_moves_each_mask_as_its_image(root, read):
    """`Resize(48)`, a flip, `RandomCrop`, a flip: each mask is v2's nearest resize cut at
    the corner hpuload drew, flipped as drawn before and after, bit for bit."""
    ds = Segmentation(root, "masks", CROP_OF_RESIZE, read=read)
    loader = native(ds, batch_size=4, backend="cpu", seed=8)
    corners = set()
    for _, i, x, y, path, plan in each_sample(loader, ds):
        rc = plan["resized_crop"]
        mask = F2.resize(ds.mask_of(root / "masks" / (path.stem + ".png")), list(rc["resized"]))
        if rc["hflip"]:
            mask = F2.horizontal_flip(mask)
        top, left = rc["at"]
        mask = mask[..., top : top + 40, left : left + 44]
        hflip, vflip = flips_of(plan)
        if hflip != bool(rc["hflip"]):
            mask = F2.horizontal_flip(mask)
        if vflip:
            mask = F2.vertical_flip(mask)
        assert same(y, mask), i
        corners.add((top, left))
    assert len(corners) > 1
    theirs = torch.stack([ds[i][1] for i in range(4)])
    assert theirs.shape == (4, 40, 44)


def test_colour_steps_leave_the_masks_as_torchs_loader_gives_them(root):
    """`ColorJitter`, `RandomGrayscale` and `GaussianBlur` draw for the image alone: each
    mask is torch's loader's bit for bit (the images' draws are the loader's own)."""
    colour = [v2.ColorJitter(0.3, 0.3, 0.3, 0.05), v2.RandomGrayscale(0.3), v2.GaussianBlur(3)]
    ds = Segmentation(root, "palette", v2.Compose([v2.Resize(48), v2.CenterCrop(40), *colour, *TAIL, v2.ToPureTensor()]))
    ours, theirs = list(native(ds, batch_size=6, backend="cpu")), list(tud.DataLoader(ds, batch_size=6))
    assert len(ours) == 2 and all(same(a[1], b[1]) for a, b in zip(ours, theirs))


@pytest.mark.parametrize(
    "geometry",
    [
        [v2.CenterCrop(200)],
        [v2.RandomHorizontalFlip(p=1.0), v2.CenterCrop((120, 90)), v2.RandomVerticalFlip(p=1.0)],
        [v2.CenterCrop((260, 300))],
        [v2.RandomVerticalFlip(p=1.0), v2.CenterCrop((251, 220))],
    ],
    ids=["inside", "flips-around", "padded", "flip-then-padded"],
)
def test_a_centre_crop_of_the_image_itself_gives_torchs_batches_padded_or_not(root, geometry):
    """A `CenterCrop` with no resize: each mask cut where the image was (some of the photos
    smaller than the crop, padded centred with 0 as v2 pads masks), bit for bit."""
    ds = Segmentation(root, "palette", v2.Compose([*geometry, *TAIL]))
    ours, theirs = list(native(ds, batch_size=4, backend="cpu")), list(tud.DataLoader(ds, batch_size=4))
    assert len(ours) == 3 and all(same(a, b) for a, b in zip(ours, theirs))


@pytest.mark.parametrize(
    "geometry",
    [
        [v2.RandomHorizontalFlip(p=1.0), v2.Resize((40, 56))],
        [v2.RandomVerticalFlip(p=1.0), v2.RandomHorizontalFlip(p=1.0), v2.Resize(48), v2.CenterCrop(40)],
    ],
    ids=["flip-resize", "flips-resize-crop"],
)
def test_flips_before_the_resize_flip_each_whole_mask_first_as_v2_does(root, geometry):
    """v2's nearest resize of a flipped mask is not the flip of its resize: the whole mask is
    flipped first, and the batches are torch's loader's bit for bit."""
    ds = Segmentation(root, "palette", v2.Compose([*geometry, *TAIL]))
    ours, theirs = list(native(ds, batch_size=4, backend="cpu")), list(tud.DataLoader(ds, batch_size=4))
    assert len(ours) == 3 and all(same(a, b) for a, b in zip(ours, theirs))


def test_a_flip_before_the_random_resized_crop_moves_each_mask_as_its_image(root):
    ds = Segmentation(root, "palette", v2.Compose([v2.RandomHorizontalFlip(), v2.RandomResizedCrop((40, 56)), *TAIL]))
    loader = native(ds, batch_size=4, backend="cpu", seed=6)
    falls = set()
    for _, i, x, y, path, plan in each_sample(loader, ds):
        top, left, h, w = (int(plan["crop"][key]) for key in ("top", "left", "height", "width"))
        image, mask = Image.open(path).convert("RGB"), ds.mask_of(root / "palette" / (path.stem + ".png"))
        fell = [op["op"] for op in plan.get("pre", [])] == ["hflip"]
        if fell:
            image, mask = F2.horizontal_flip(image), F2.horizontal_flip(mask)
        image, mask = (F2.resized_crop(t, top, left, h, w, [40, 56], antialias=True) for t in (image, mask))
        image, mask = v2.Compose(TAIL)(image, mask)
        assert same(y, mask) and flips_of(plan) == (False, False), i
        assert (x - image).abs().max() < 1e-5, i
        falls.add(fell)
    assert falls == {True, False}


def test_a_random_crop_of_the_image_itself_moves_each_mask_as_its_image(root):
    ds = Segmentation(root, "palette", v2.Compose([v2.RandomHorizontalFlip(), v2.RandomCrop((150, 170)), *TAIL]))
    loader = native(ds, batch_size=4, backend="cpu", seed=2)
    corners, falls = set(), set()
    for _, i, x, y, path, plan in each_sample(loader, ds):
        top, left = int(plan["crop"]["top"]), int(plan["crop"]["left"])
        mask = ds.mask_of(root / "palette" / (path.stem + ".png"))
        # A flip before the crop flips the whole image (the plan's `pre`), then the window
        # is cut from it.
        flipped = [op["op"] for op in plan.get("pre", [])].count("hflip") % 2 == 1
        if flipped:
            mask = F2.horizontal_flip(mask)
        assert same(y, mask[top : top + 150, left : left + 170]) and flips_of(plan) == (False, False), i
        corners.add((top, left))
        falls.add(flipped)
    assert len(corners) > 4 and falls == {True, False}


@pytest.mark.parametrize("fill", [0, 5])
def test_a_random_crop_that_pads_if_needed_pads_each_mask_with_its_fill(root, fill):
    """`RandomCrop(pad_if_needed=True)` larger than some photos: v2 pads a short side by its
    shortfall at both ends, with the fill, and the window may reach past the image; each mask
    is the window of the mask padded with the fill, bit for bit."""
    crop = (300, 420)
    ds = Segmentation(root, "palette", v2.Compose([v2.RandomCrop(crop, pad_if_needed=True, fill=fill), *TAIL]))
    loader = native(ds, batch_size=4, backend="cpu", seed=4)
    padded = 0
    for _, i, x, y, path, plan in each_sample(loader, ds):
        top, left = int(plan["crop"]["top"]), int(plan["crop"]["left"])
        mask = ds.mask_of(root / "palette" / (path.stem + ".png")).as_subclass(torch.Tensor)
        want = torch.full(crop, fill, dtype=torch.uint8)
        h, w = mask.shape
        rows, cols = slice(max(top, 0), min(top + crop[0], h)), slice(max(left, 0), min(left + crop[1], w))
        want[rows.start - top : rows.stop - top, cols.start - left : cols.stop - left] = mask[rows, cols]
        assert same(y, want), i
        padded += top < 0 or left < 0 or top + crop[0] > h or left + crop[1] > w
    assert padded > 2


def replayed_warps(plan, mask):
    """`mask` (the crop's or resize's) moved by the plan's ops in order with v2's own
    functionals (flips, `rotate`, `affine`: a mask sampled nearest), the slot's flip last."""
    for op in plan.get("ops", []):
        if op["op"] == "hflip":
            mask = F2.horizontal_flip(mask)
        elif op["op"] == "vflip":
            mask = F2.vertical_flip(mask)
        elif op["op"] == "warp":
            a = op["arg"]
            fill = a["fill"][0] if a.get("fill") else 0
            if a["rotate"]:
                mask = F2.rotate(mask, a["angle"], fill=fill)
            else:
                mask = F2.affine(mask, a["angle"], a["translate"], a["scale"], a["shear"], fill=fill)
    return F2.horizontal_flip(mask) if plan.get("flip") else mask


@pytest.mark.parametrize(
    "warp",
    [
        v2.RandomRotation(30),
        v2.RandomRotation((90, 90)),
        v2.RandomRotation(40, fill=3),
        v2.RandomAffine(20, translate=(0.1, 0.1), scale=(0.8, 1.2), shear=10),
    ],
    ids=["rotation", "quarter-turn", "fill", "affine"],
)
def test_a_rotation_or_affine_after_the_crop_warps_each_mask_as_v2_does(root, warp):
    """`RandomResizedCrop`, a flip, then a warp: each mask is v2's own `resized_crop` of the
    drawn window, flipped and warped (nearest, the fill where it shows) with the drawn
    parameters, bit for bit, over two epochs."""
    ds = Segmentation(root, "palette", v2.Compose([v2.RandomResizedCrop((40, 40)), v2.RandomHorizontalFlip(), warp, *TAIL]))
    loader = native(ds, batch_size=4, backend="cpu", seed=12)
    warped = 0
    for epoch, i, x, y, path, plan in each_sample(loader, ds, epochs=2):
        top, left, h, w = (int(plan["crop"][key]) for key in ("top", "left", "height", "width"))
        mask = F2.resized_crop(ds.mask_of(root / "palette" / (path.stem + ".png")), top, left, h, w, [40, 40])
        assert same(y, replayed_warps(plan, mask)), (epoch, i)
        warped += any(op["op"] == "warp" for op in plan.get("ops", []))
    assert warped > 10


def test_a_warp_before_the_crop_goes_to_torchs_loader_named(root):
    ds = Segmentation(root, "palette", v2.Compose([v2.RandomRotation(20), v2.RandomResizedCrop((40, 40)), *TAIL]))
    assert "before the RandomResizedCrop" in fallback_reason(ds, batch_size=4)


def test_the_media_engine_gives_the_masks_of_the_cpu_path(root):
    for (x1, y1), (x2, y2) in zip(
        native(Segmentation(root, "palette", TRAIN), batch_size=6, backend="auto", seed=5),
        native(Segmentation(root, "palette", TRAIN), batch_size=6, backend="cpu", seed=5),
    ):
        assert torch.equal(y1, y2)
        mse = ((x1 - x2) ** 2).mean().item()
        assert mse < 0.01


def test_a_resumed_run_gives_the_same_images_and_masks(root):
    ds = Segmentation(root, "palette", TRAIN)
    rest, resumed = resumed_after(lambda: native(ds, batch_size=3, shuffle=True, backend="cpu", seed=11), 2)
    assert len(rest) == len(resumed) == 2 and all(same(a, b) for a, b in zip(rest, resumed))


def test_a_damaged_mask_is_named_and_its_sample_replaced(root, tmp_path):
    masks = tmp_path / "masks"
    masks.mkdir()
    for path in sorted((root / "masks").iterdir()):
        (masks / path.name).write_bytes(path.read_bytes())
    names = sorted(os.listdir(masks))
    (masks / names[2]).write_bytes(b"\x89PNG\r\n\x1a\n damaged")
    (tmp_path / "images").symlink_to(root / "images")
    ds = Segmentation(tmp_path, "masks", EVAL)
    with pytest.warns(SkippedSampleWarning, match=names[2]):
        batches = list(native(ds, batch_size=6, backend="cpu"))
    ours = [(x, y) for b in batches for x, y in zip(*b)]
    for k in range(12):
        tx, ty = ds[k + (k == 2)]
        assert same(ours[k][0], tx) and same(ours[k][1], ty), k


@pytest.mark.parametrize(
    "transforms,mask,reason",
    [
        (v2.Compose([v2.ElasticTransform(), v2.Resize((40, 56)), *TAIL]), "array", "ElasticTransform given a mask"),
        (v2.Compose([v2.RandomCrop(40, padding=4), *TAIL]), "array", "RandomCrop that pads"),
        (v2.Compose([v2.Resize(48), *TAIL]), "array", "given a mask"),
        (EVAL, "plain", "tv_tensors.Mask"),
    ],
    ids=["elastic", "padding", "no-crop", "plain-tensor"],
)
def test_what_moves_masks_otherwise_goes_to_torchs_loader_named(root, transforms, mask, reason):
    assert reason in fallback_reason(Segmentation(root, "masks", transforms, mask=mask), batch_size=4)


def test_a_transform_reassigned_between_epochs_is_followed_or_sent_to_torchs_loader(root):
    """A flip added after the resize moves the masks as the loader set them up: it goes on
    natively, the next epoch flipped; a resize to another size would move them otherwise:
    torch's loader takes over, with a warning, and gives its batches."""
    ds = Segmentation(root, "palette", EVAL)
    loader = native(ds, batch_size=6, backend="cpu")
    list(loader)
    ds.transforms = v2.Compose([v2.Resize((40, 56)), v2.RandomHorizontalFlip(p=1.0), *TAIL])
    flipped = list(loader)
    assert len(flipped) == 2 and all(same(a, b) for a, b in zip(flipped, tud.DataLoader(ds, batch_size=6)))
    ds.transforms = v2.Compose([v2.Resize((24, 32)), *TAIL])
    with pytest.warns(FallbackWarning):
        resized = list(loader)
    assert all(same(a, b) for a, b in zip(resized, tud.DataLoader(ds, batch_size=6)))
    assert resized[0][1].shape == (6, 24, 32)


class TensorImages(tud.Dataset):
    """Images alone, read as tensors and given to a v2 `Compose` written for PIL images."""

    def __init__(self, root, transform):
        self.paths, self.transform = sorted((root / "images").iterdir()), transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, idx):
        return self.transform(read_image(str(self.paths[idx]))), 0


def test_v2s_to_image_of_a_tensor_read_runs_natively_without_a_python_tail(root):
    ds = TensorImages(root, v2.Compose([v2.Resize((40, 56)), v2.PILToTensor(), *TAIL]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither a FallbackWarning nor a PythonTailWarning
        loader = DataLoader(ds, batch_size=6, backend="cpu")
        ours = list(loader)
    assert all(same(a, b) for a, b in zip(ours, tud.DataLoader(ds, batch_size=6)))
