"""A user's own segmentation Dataset shaped like milesial's Pytorch-UNet `BasicDataset` (the
most copied U-Net training script: Carvana's photos and GIF masks): Pillow opens both files,
`.resize`s them by `scale` (the image by bicubic, the mask by nearest positions), makes NumPy
arrays of them, maps each mask value found in the folder to its class index in an
`np.zeros` array (`mask[img == v] = i`), transposes the image and divides it by 255 only `if
(img > 1).any()`, and returns `{"image": float32, "mask": int64}`. hpuload makes the images
natively, moves the masks with them and maps their values, bit for bit with the class's own
samples; an image with no byte above 1 (which the class does not divide) is made by the
class's own code."""

from functools import partial
from os import listdir
from os.path import isfile, join, splitext
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from PIL import Image

from conftest import copy_photos, fallback_reason, native
from hpuload.torch import FallbackWarning


def load_image(filename):
    ext = splitext(filename)[1]
    if ext == ".npy":
        return Image.fromarray(np.load(filename))
    if ext in (".pt", ".pth"):
        return Image.fromarray(torch.load(filename).numpy())
    return Image.open(filename)


def unique_mask_values(idx, mask_dir, mask_suffix):
    mask = np.asarray(load_image(list(mask_dir.glob(idx + mask_suffix + ".*"))[0]))
    if mask.ndim == 2:
        return np.unique(mask)
    return np.unique(mask.reshape(-1, mask.shape[-1]), axis=0)


class BasicDataset(tud.Dataset):
    """milesial's class as written there, but for `mask_filter` (the mask's resize filter,
    NEAREST there) and its multiprocessing `Pool` over the masks' values (a loop here)."""

    def __init__(self, images_dir, mask_dir, scale=1.0, mask_suffix="", mask_filter=Image.NEAREST):
        self.images_dir, self.mask_dir = Path(images_dir), Path(mask_dir)
        assert 0 < scale <= 1, "Scale must be between 0 and 1"
        self.scale, self.mask_suffix, self.mask_filter = scale, mask_suffix, mask_filter
        self.ids = sorted(splitext(f)[0] for f in listdir(images_dir) if isfile(join(images_dir, f)) and not f.startswith("."))
        unique = list(map(partial(unique_mask_values, mask_dir=self.mask_dir, mask_suffix=self.mask_suffix), self.ids))
        self.mask_values = list(sorted(np.unique(np.concatenate(unique), axis=0).tolist()))

    def __len__(self):
        return len(self.ids)

    @staticmethod
    def preprocess(mask_values, pil_img, scale, is_mask, mask_filter=Image.NEAREST):
        w, h = pil_img.size
        newW, newH = int(scale * w), int(scale * h)
        assert newW > 0 and newH > 0, "Scale is too small, resized images would have no pixel"
        pil_img = pil_img.resize((newW, newH), resample=mask_filter if is_mask else Image.BICUBIC)
        img = np.asarray(pil_img)
        if is_mask:
            mask = np.zeros((newH, newW), dtype=np.int64)
            for i, v in enumerate(mask_values):
                if img.ndim == 2:
                    mask[img == v] = i
                else:
                    mask[(img == v).all(-1)] = i
            return mask
        if img.ndim == 2:
            img = img[np.newaxis, ...]
        else:
            img = img.transpose((2, 0, 1))
        if (img > 1).any():
            img = img / 255.0
        return img

    def __getitem__(self, idx):
        name = self.ids[idx]
        mask_file = list(self.mask_dir.glob(name + self.mask_suffix + ".*"))
        img_file = list(self.images_dir.glob(name + ".*"))
        assert len(img_file) == 1, f"Either no image or multiple images found for the ID {name}: {img_file}"
        assert len(mask_file) == 1, f"Either no mask or multiple masks found for the ID {name}: {mask_file}"
        mask = load_image(mask_file[0])
        img = load_image(img_file[0])
        assert img.size == mask.size, f"Image and mask {name} should be the same size"
        img = self.preprocess(self.mask_values, img, self.scale, is_mask=False)
        mask = self.preprocess(self.mask_values, mask, self.scale, is_mask=True, mask_filter=self.mask_filter)
        return {
            "image": torch.as_tensor(img.copy()).float().contiguous(),
            "mask": torch.as_tensor(mask.copy()).long().contiguous(),
        }


def write_masks(images, out, kind, suffix="_mask"):
    """A mask per image, of its size, in blocks of 4x4, as Carvana's are: a GIF of palette
    indices 0 and 1 (`gif`), a grey PNG of 0 and 255 (`grey`), a palette PNG of indices 0-3
    (`palette`) or an RGB PNG of two colours (`rgb`)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(11)
    for path in images:
        w, h = Image.open(path).size
        levels = 4 if kind == "palette" else 2
        values = np.kron(rng.integers(0, levels, (h // 4 + 1, w // 4 + 1), dtype=np.uint8), np.ones((4, 4), np.uint8))[:h, :w]
        if kind in ("gif", "palette"):
            mask = Image.fromarray(values, mode="L").convert("P")
            mask.putpalette([0, 0, 0, 255, 255, 255, 200, 30, 30, 30, 200, 30] + [0] * 756)
            mask.save(out / f"{path.stem}{suffix}.{'gif' if kind == 'gif' else 'png'}")
        elif kind == "grey":
            Image.fromarray(values * 255, mode="L").save(out / f"{path.stem}{suffix}.png")
        else:
            Image.fromarray(np.stack([values * 200, values * 50, 255 - values * 255], -1)).save(out / f"{path.stem}{suffix}.png")


@pytest.fixture(scope="module")
def root(jpeg_folder, tmp_path_factory):
    """Twelve photos made one size (Carvana's are; torch's collate stacks them), with a mask
    of each kind."""
    root = tmp_path_factory.mktemp("unet")
    images = copy_photos(jpeg_folder, root / "imgs")
    for path in images:
        Image.open(path).convert("RGB").resize((90, 64)).save(path, quality=92)
    for kind in ("gif", "grey", "palette"):
        write_masks(images, root / kind, kind)
    return root


def batches(loader):
    return [{k: v.clone() for k, v in b.items()} for b in loader]


def same_batches(ours, theirs):
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert set(a) == set(b) == {"image", "mask"}
        for key in ("image", "mask"):
            assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
            assert torch.equal(a[key], b[key]), key


@pytest.mark.parametrize("kind", ["gif", "grey", "palette"])
@pytest.mark.parametrize("scale", [0.5, 0.3])
def test_unet_basic_dataset_gives_torchs_batches_bit_for_bit(root, kind, scale):
    ds = BasicDataset(root / "imgs", root / kind, scale, "_mask")
    loader = native(ds, batch_size=4, backend="cpu")
    theirs = batches(tud.DataLoader(ds, batch_size=4))
    for _ in range(2):
        same_batches(batches(loader), theirs)
    assert theirs[0]["mask"].max() == len(ds.mask_values) - 1


def test_unet_shuffled_with_workers_and_a_collate_fn_gives_the_class_own_samples(root):
    ds = BasicDataset(root / "imgs", root / "gif", 0.5, "_mask")
    got = []
    loader = native(ds, batch_size=3, shuffle=True, num_workers=2, backend="cpu", collate_fn=lambda b: b)
    for batch in loader:
        got.append(list(zip(loader.last_indices, batch)))
    seen = [i for b in got for i, _ in b]
    assert sorted(seen) == list(range(len(ds)))
    for b in got:
        for index, sample in b:
            want = ds[index]
            assert torch.equal(sample["image"], want["image"]) and torch.equal(sample["mask"], want["mask"])


def test_an_image_the_class_does_not_divide_is_made_by_its_own_code(root, tmp_path):
    """`(img > 1).any()` is False for an image of 0s and 1s: the class hands it out undivided
    (values 0.0 and 1.0, not 1/255), and so does hpuload, from the class's own code."""
    import shutil

    shutil.copytree(root / "imgs", tmp_path / "imgs")
    shutil.copytree(root / "gif", tmp_path / "gif")
    dark, blue = sorted((tmp_path / "imgs").glob("*.jpg"))[5:7]
    Image.fromarray(np.ones((64, 90, 3), np.uint8)).save(dark.with_suffix(".png"))
    dark.unlink()
    # Dark but for a blue corner, which only the last of its values show: divided.
    corner = np.ones((64, 90, 3), np.uint8)
    corner[48:, 70:, 2] = 250
    Image.fromarray(corner).save(blue.with_suffix(".png"))
    blue.unlink()
    ds = BasicDataset(tmp_path / "imgs", tmp_path / "gif", 0.5, "_mask")
    loader = native(ds, batch_size=4, backend="cpu")
    theirs = batches(tud.DataLoader(ds, batch_size=4))
    same_batches(batches(loader), theirs)
    k = ds.ids.index(dark.stem)
    assert theirs[k // 4]["image"][k % 4].max() == 1.0
    k = ds.ids.index(blue.stem)
    assert theirs[k // 4]["image"][k % 4, 0].max() < 0.01 and theirs[k // 4]["image"][k % 4, 2].max() > 0.9


@pytest.mark.parametrize("kind", ["gif", "grey", "palette"])
def test_unet_at_scale_1_keeps_each_image_and_mask_whole_bit_for_bit(root, kind):
    """`scale=1`: Pillow's resize of each file to its own size is a copy, so the class hands
    out its images and masks as read, all of one size (Carvana's are)."""
    ds = BasicDataset(root / "imgs", root / kind, 1.0, "_mask")
    loader = native(ds, batch_size=4, backend="cpu")
    theirs = batches(tud.DataLoader(ds, batch_size=4))
    assert theirs[0]["image"].shape == (4, 3, 64, 90) and theirs[0]["mask"].shape == (4, 64, 90)
    for _ in range(2):
        same_batches(batches(loader), theirs)


def test_unet_at_scale_1_over_images_of_several_sizes_falls_back_naming_two(root, tmp_path):
    """Images kept whole at sizes of their own give torch's loader a shape per image (its
    collate stacks them, or a collate_fn gets them): hpuload names two sizes and hands over."""
    import shutil

    shutil.copytree(root / "imgs", tmp_path / "imgs")
    shutil.copytree(root / "gif", tmp_path / "gif")
    odd = sorted((tmp_path / "imgs").glob("*.jpg"))[4]
    Image.open(odd).resize((80, 64)).save(odd)
    mask = tmp_path / "gif" / f"{odd.stem}_mask.gif"
    Image.open(mask).resize((80, 64), Image.NEAREST).save(mask)
    ds = BasicDataset(tmp_path / "imgs", tmp_path / "gif", 1.0, "_mask")
    reason = fallback_reason(ds, batch_size=4, backend="cpu", collate_fn=lambda b: b)
    assert odd.name in reason and "differ in size" in reason


@pytest.mark.parametrize(
    "mask_filter", [Image.BILINEAR, Image.BICUBIC, Image.LANCZOS, Image.BOX, Image.HAMMING], ids=lambda f: Image.Resampling(f).name
)
@pytest.mark.parametrize("scale", [0.5, 0.3])
def test_grey_masks_resized_by_each_of_pillows_filters_are_blended_as_pillow_blends_them(root, mask_filter, scale):
    """A grey mask resized by a filter that blends has blended values at its edges, which the
    value map makes 0 (only the values found in the unresized masks are classes), as the
    class does."""
    ds = BasicDataset(root / "imgs", root / "grey", scale, "_mask", mask_filter=mask_filter)
    loader = native(ds, batch_size=4, backend="cpu")
    same_batches(batches(loader), batches(tud.DataLoader(ds, batch_size=4)))


def test_the_media_engine_gives_the_images_within_their_floor_and_the_masks_exactly(root):
    ds = BasicDataset(root / "imgs", root / "gif", 0.5, "_mask")
    cpu, engine = (native(ds, batch_size=4, backend=b) for b in ("cpu", "auto"))
    for a, b in zip(cpu, engine):
        assert torch.equal(a["mask"], b["mask"])
        mse = float(((a["image"].double() - b["image"].double()) ** 2).mean())
        assert 10 * np.log10(1 / max(mse, 1e-12)) > 30  # PSNR over the [0, 1] range


def test_a_resumed_unet_loader_gives_the_rest_of_the_epoch_exactly(root):
    from conftest import resumed_after

    ds = BasicDataset(root / "imgs", root / "gif", 0.5, "_mask")
    rest, resumed = resumed_after(lambda: native(ds, batch_size=4, shuffle=True, seed=3, backend="cpu"), 1)
    same_batches([{k: v.clone() for k, v in b.items()} for b in resumed], [{k: v.clone() for k, v in b.items()} for b in rest])


def test_a_damaged_mask_is_named_and_its_sample_replaced(root, tmp_path):
    import shutil

    from hpuload.torch import SkippedSampleWarning

    shutil.copytree(root / "imgs", tmp_path / "imgs")
    shutil.copytree(root / "gif", tmp_path / "gif")
    ds = BasicDataset(tmp_path / "imgs", tmp_path / "gif", 0.5, "_mask")
    damaged = sorted((tmp_path / "gif").glob("*.gif"))[3]
    loader = native(ds, batch_size=4, backend="cpu")
    damaged.write_bytes(damaged.read_bytes()[:40])
    indices = []
    with pytest.warns(SkippedSampleWarning, match=damaged.name):
        for batch in loader:
            indices += loader.last_indices
            for k, index in enumerate(loader.last_indices):
                want = ds[index]
                assert torch.equal(batch["image"][k], want["image"]) and torch.equal(batch["mask"][k], want["mask"])
    assert 3 not in indices and len(indices) == len(ds)


def test_values_mapped_otherwise_after_an_epoch_give_the_class_new_samples(root):
    """The class's `mask_values` changed between epochs (another order of classes): the next
    epoch's masks are its code's as it now maps them (through torch's loader, named)."""
    ds = BasicDataset(root / "imgs", root / "palette", 0.5, "_mask")
    loader = native(ds, batch_size=4, backend="cpu")
    same_batches(batches(loader), batches(tud.DataLoader(ds, batch_size=4)))
    ds.mask_values = ds.mask_values[::-1]
    with pytest.warns(FallbackWarning, match="masks otherwise than when the loader was built"):
        ours = batches(loader)
    same_batches(ours, batches(tud.DataLoader(ds, batch_size=4)))


class CopiedMask(BasicDataset):
    """The mask's values copied into the zeros (`mask[:] = img`), then changed where a
    comparison holds."""

    @staticmethod
    def preprocess(mask_values, pil_img, scale, is_mask, mask_filter=Image.NEAREST):
        if not is_mask:
            return BasicDataset.preprocess(mask_values, pil_img, scale, is_mask)
        w, h = pil_img.size
        img = np.asarray(pil_img.resize((int(scale * w), int(scale * h)), resample=mask_filter))
        mask = np.zeros(img.shape, dtype=np.uint8)
        mask[:] = img
        mask[mask == 255] = 1
        return mask


@pytest.mark.parametrize("mask_filter", [Image.NEAREST, Image.BICUBIC, Image.LANCZOS], ids=lambda f: Image.Resampling(f).name)
def test_a_mask_copied_into_the_zeros_then_changed_gives_torchs_batches(root, mask_filter):
    """Its values copied as they are: a filter's blends at the edges (bicubic's and Lanczos'
    overshoot clipped to a byte) show in the batch."""
    ds = CopiedMask(root / "imgs", root / "grey", 0.5, "_mask", mask_filter=mask_filter)
    loader = native(ds, batch_size=4, backend="cpu")
    theirs = batches(tud.DataLoader(ds, batch_size=4))
    same_batches(batches(loader), theirs)
    blended = ((theirs[0]["mask"] > 1) & (theirs[0]["mask"] < 254)).any()
    assert bool(blended) == (mask_filter != Image.NEAREST)


def test_globs_run_by_the_class_while_probed_find_what_pathlib_and_glob_find_in_their_order(tmp_path):
    """The probe runs the class's code for every index at each epoch's start; its globs
    (`Path.glob(name + ".*")`, `glob(folder + name + ".*")`) match against a listing of the
    folder kept for the pass, and must find the same paths, in the same order, as the
    originals: hidden names, prefixes of other names, character classes, `?`, case."""
    import glob
    import pathlib
    import time

    from hpuload import _probe

    names = ["a.png", "a.gif", "ab.png", "a_mask.gif", ".a.png", "A.png", "a[1].png", "b.jpg", "a", "ä.png", "a.png.bak"]
    for n in names:
        (tmp_path / n).write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.png").write_bytes(b"x")
    patterns = ["a.*", "a*", "*", ".*", "a?png", "a[.b]*", "[ab]*", "a_mask.*", "A.*", "ä.*", "a[[]1].*", "z*", "*.png", "sub/*", "**", "a.png"]
    _probe.install()
    path_glob, file_glob = pathlib.Path.glob, glob.glob
    want = [(list(path_glob.__wrapped__(tmp_path, p)), file_glob.__wrapped__(str(tmp_path / p))) for p in patterns]
    _probe._probing.on = True
    try:
        with _probe._sizes_memo():
            for _ in range(2):  # listed once, then from the kept listing
                got = [(list(tmp_path.glob(p)), glob.glob(str(tmp_path / p))) for p in patterns]
                assert got == want
            assert _probe._listing(str(tmp_path)) is not None
            time.sleep(0.05)  # past the clock tick a folder's times move by
            (tmp_path / "a.webp").write_bytes(b"x")  # listed again: the folder changed
            assert tmp_path / "a.webp" in list(tmp_path.glob("a.*"))
            assert str(tmp_path / "a.webp") in glob.glob(str(tmp_path / "a.*"))
    finally:
        _probe._probing.on = False


class ChecksEveryPixel(BasicDataset):
    """The pixel test changed to one every image passes (`>= 0`) or none (`> 255`): no largest
    value an image may hold tells which branch it takes."""

    threshold = (">=", 0)

    def preprocess(self, mask_values, pil_img, scale, is_mask, mask_filter=Image.NEAREST):
        if is_mask:
            return BasicDataset.preprocess(mask_values, pil_img, scale, is_mask, mask_filter)
        w, h = pil_img.size
        img = np.asarray(pil_img.resize((int(scale * w), int(scale * h)), resample=Image.BICUBIC)).transpose((2, 0, 1))
        op, value = self.threshold
        if ((img >= value) if op == ">=" else (img > value)).any():
            img = img / 255.0
        return img


@pytest.mark.parametrize("threshold", [(">=", 0), (">", 255)])
def test_a_pixel_test_every_image_passes_or_none_falls_back_naming_it(root, threshold):
    ds = ChecksEveryPixel(root / "imgs", root / "gif", 0.5, "_mask")
    ds.threshold = threshold
    assert "test of the image's pixels" in fallback_reason(ds, batch_size=4, backend="cpu")


class AsRead(tud.Dataset):
    """The plainest segmentation class: the image given a transform that moves nothing
    (`ToTensor`, `Normalize`), its mask handed out as read (`torch.from_numpy(np.array(mask))`,
    perhaps made grey and scaled first)."""

    def __init__(self, images, masks, transform, how):
        self.images, self.masks, self.transform, self.how = images, masks, transform, how

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        img = Image.open(self.images[i]).convert("RGB")
        mask = Image.open(self.masks[i])
        if self.how == "grey":
            target = torch.from_numpy(np.array(mask.convert("L"))).float() / 255
        else:
            target = torch.from_numpy(np.array(mask)).long()
        return self.transform(img), target


def as_read(root, kind, transform, how):
    images = sorted((root / "imgs").glob("*.jpg"))
    return AsRead(images, [next((root / kind).glob(f"{p.stem}_mask.*")) for p in images], transform, how)


@pytest.mark.parametrize("kind", ["gif", "grey", "palette"])
@pytest.mark.parametrize("how", ["long", "grey"])
def test_an_image_given_a_transform_that_moves_nothing_and_its_mask_as_read_give_torchs_batches(root, kind, how):
    from torchvision import transforms as T

    transform = T.Compose([T.ToTensor(), T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    ds = as_read(root, kind, transform, how)
    loader = native(ds, batch_size=4, backend="cpu")
    theirs = list(tud.DataLoader(ds, batch_size=4))
    ours = list(loader)
    assert len(ours) == len(theirs)
    for (x, m), (a, b) in zip(ours, theirs):
        assert torch.equal(x, a) and torch.equal(m, b) and m.dtype == b.dtype


def test_an_image_resized_by_its_transform_with_its_mask_as_read_falls_back_naming_it(root):
    from torchvision import transforms as T

    ds = as_read(root, "gif", T.Compose([T.Resize((32, 45)), T.ToTensor()]), "long")
    assert "Resize in the image's transform, which the mask, handed out as read, does not take" in fallback_reason(
        ds, batch_size=4, backend="cpu"
    )
