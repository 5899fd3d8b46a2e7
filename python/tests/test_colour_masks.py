"""A user's own segmentation Dataset whose masks are colour images (CamVid's, and any set
labelled by colour): its code reads each mask in RGB and maps each colour of its colour map
to a class index (`label[np.all(rgb == colour, axis=-1)] = k`, or milesial's U-Net's
`mask[(img == v).all(-1)] = i`). hpuload reads each mask file natively, each pixel its
colour's index among the colours the code compared with, moves it as its image was and maps
it as the code does: bit for bit with the class's own samples."""

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from PIL import Image

from conftest import copy_photos, fallback_reason, native
from hpuload.torch import FallbackWarning, SkippedSampleWarning
from test_unet_datasets import BasicDataset, batches, same_batches

#: CamVid's first colours (sky, building, pole, road, pavement), and one colour the masks
#: hold that the map does not name.
COLOURMAP = [(128, 128, 128), (128, 0, 0), (192, 192, 128), (128, 64, 128), (0, 0, 192)]
UNNAMED = (10, 200, 10)


class ColourLabelled(tud.Dataset):
    """CamVid-style: the image and its colour mask in RGB, the mask's colours mapped to class
    indices in an `np.zeros` of its shape (colours the map does not name stay 0), then an
    albumentations `Compose` of both, or the image alone given to `to_tensor`."""

    def __init__(self, images, masks, transform=None, colourmap=COLOURMAP, how="np.all", dtype=np.uint8):
        self.images, self.masks, self.transform = images, masks, transform
        self.colourmap, self.how, self.dtype = colourmap, how, dtype

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        image = np.array(Image.open(self.images[i]).convert("RGB"))
        rgb = np.array(Image.open(self.masks[i]).convert("RGB"))
        label = np.zeros(rgb.shape[:2], dtype=self.dtype)
        for k, colour in enumerate(self.colourmap):
            if self.how == "np.all":
                label[np.all(rgb == colour, axis=-1)] = k
            elif self.how == "(1, 1, 3)":
                label[np.all(rgb == np.array(colour).reshape(1, 1, 3), axis=2)] = k + 2
            else:
                label[(rgb == np.array(colour)).all(axis=2)] = k + 1
        if self.transform is None:
            return torch.from_numpy(image).permute(2, 0, 1).float() / 255, torch.from_numpy(label)
        out = self.transform(image=image, mask=label)
        return out["image"], out["mask"]


def colour_masks(images, out, kind, seed=3):
    """A mask per image, of its size, in blocks of 4x4 of the map's colours and `UNNAMED`:
    an RGB PNG (`rgb`), RGBA (`rgba`, its alpha varying), a palette PNG (`palette`), or a
    JPEG (`jpeg`: Pillow's lossy colours, which the code compares as decoded)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    colours = np.array([*COLOURMAP, UNNAMED], np.uint8)
    files = []
    for path in images:
        w, h = Image.open(path).size
        blocks = rng.integers(0, len(colours), (h // 4 + 1, w // 4 + 1))
        index = np.kron(blocks, np.ones((4, 4), np.int64))[:h, :w]
        rgb = colours[index]
        name = out / f"{path.stem}.{'jpg' if kind == 'jpeg' else 'png'}"
        if kind == "rgba":
            Image.fromarray(np.dstack([rgb, rng.integers(0, 256, (h, w), dtype=np.uint8)]), "RGBA").save(name)
        elif kind == "palette":
            Image.fromarray(index.astype(np.uint8), "L").convert("P").save(name)
            with Image.open(name) as im:
                im = im.copy()
            im.putpalette(colours.reshape(-1).tolist())
            im.save(name)
        else:
            Image.fromarray(rgb).save(name, **({"quality": 95} if kind == "jpeg" else {}))
        files.append(name)
    return files


def photos_of_one_size(jpeg_folder, out, size):
    """Twelve photos copied into `out`, each made `size` (the classes' batches stack them)."""
    images = copy_photos(jpeg_folder, out)
    for path in images:
        Image.open(path).convert("RGB").resize(size).save(path, quality=92)
    return images


@pytest.fixture(scope="module")
def camvid(jpeg_folder, tmp_path_factory):
    root = tmp_path_factory.mktemp("camvid")
    images = photos_of_one_size(jpeg_folder, root / "images", (64, 48))
    return images, {kind: colour_masks(images, root / kind, kind) for kind in ("rgb", "rgba", "palette", "jpeg")}


def eval_transform():
    A = pytest.importorskip("albumentations")
    from albumentations.pytorch import ToTensorV2

    return A.Compose([A.Resize(height=40, width=56), A.Normalize(mean=0, std=1, max_pixel_value=255.0), ToTensorV2()])


def pairs(loader):
    return [(x.clone(), y.clone()) for x, y in loader]


def same_pairs(ours, theirs):
    assert len(ours) == len(theirs)
    for (x, y), (a, b) in zip(ours, theirs):
        assert x.dtype == a.dtype and x.shape == a.shape and torch.equal(x, a)
        assert y.dtype == b.dtype and y.shape == b.shape and torch.equal(y, b)


@pytest.mark.parametrize("kind", ["rgb", "rgba", "palette", "jpeg"])
@pytest.mark.parametrize("how", ["np.all", ".all(axis=2)", "(1, 1, 3)"])
def test_colour_masks_mapped_to_classes_give_torchs_batches_bit_for_bit(camvid, kind, how):
    images, masks = camvid
    ds = ColourLabelled(images, masks[kind], eval_transform(), how=how)
    loader = native(ds, batch_size=5, backend="cpu")
    theirs = pairs(tud.DataLoader(ds, batch_size=5))
    for _ in range(2):
        same_pairs(pairs(loader), theirs)
    if kind != "jpeg":  # a JPEG's colours are lossy: few pixels hold a colour of the map
        labels = torch.cat([y for _, y in theirs])
        assert len(labels.unique()) >= len(COLOURMAP)  # every class shows


class OpenCvLabelled(ColourLabelled):
    """The same, read by OpenCV: the image made RGB, the mask compared in OpenCV's BGR order
    with its colours reversed (`bgr`), or made RGB first (`rgb`)."""

    def __getitem__(self, i):
        import cv2

        image = cv2.cvtColor(cv2.imread(str(self.images[i])), cv2.COLOR_BGR2RGB)
        mask = cv2.imread(str(self.masks[i]))
        colours = [c[::-1] for c in self.colourmap] if self.how == "bgr" else self.colourmap
        if self.how == "rgb":
            mask = cv2.cvtColor(mask, cv2.COLOR_BGR2RGB)
        label = np.zeros(mask.shape[:2], dtype=self.dtype)
        for k, colour in enumerate(colours):
            label[(mask == colour).all(-1)] = k
        out = self.transform(image=image, mask=label)
        return out["image"], out["mask"]


@pytest.mark.parametrize("kind", ["rgb", "palette", "jpeg"])
@pytest.mark.parametrize("how", ["bgr", "rgb"])
def test_colour_masks_read_by_opencv_give_torchs_batches_bit_for_bit(camvid, kind, how):
    pytest.importorskip("cv2")
    images, masks = camvid
    ds = OpenCvLabelled(images, masks[kind], eval_transform(), how=how)
    loader = native(ds, batch_size=5, backend="cpu")
    theirs = pairs(tud.DataLoader(ds, batch_size=5))
    same_pairs(pairs(loader), theirs)
    if kind != "jpeg":
        assert set(torch.cat([y for _, y in theirs]).unique().tolist()) == set(range(len(COLOURMAP)))


@pytest.mark.parametrize("dtype", [np.uint8, np.int64])
def test_colour_masks_with_no_transform_keep_their_images_whole_bit_for_bit(camvid, dtype):
    images, masks = camvid
    ds = ColourLabelled(images, masks["rgb"], None, dtype=dtype)
    loader = native(ds, batch_size=4, backend="cpu", num_workers=2)
    same_pairs(pairs(loader), pairs(tud.DataLoader(ds, batch_size=4)))


class ToTensorLabelled(ColourLabelled):
    """The image's NumPy array (read so for the mask's sake) given to torchvision's
    `to_tensor`, or to a torchvision transform that starts with `ToTensor` (which takes arrays
    as it takes PIL images), the label as computed."""

    def __getitem__(self, i):
        from torchvision.transforms import functional as TF

        image = np.array(Image.open(self.images[i]).convert("RGB"))
        rgb = np.array(Image.open(self.masks[i]).convert("RGB"))
        label = np.zeros(rgb.shape[:2], dtype=np.int64)
        for k, colour in enumerate(self.colourmap):
            label[np.all(rgb == colour, axis=-1)] = k
        return (TF.to_tensor(image) if self.transform is None else self.transform(image)), torch.from_numpy(label)


@pytest.mark.parametrize("how", ["to_tensor", "ToTensor", "ToTensor and Normalize"])
def test_an_images_array_given_to_tensor_with_a_colour_mask_gives_torchs_batches_bit_for_bit(camvid, how):
    from torchvision import transforms as T

    images, masks = camvid
    transform = {
        "to_tensor": None,
        "ToTensor": T.ToTensor(),
        "ToTensor and Normalize": T.Compose([T.ToTensor(), T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]),
    }[how]
    ds = ToTensorLabelled(images, masks["palette"], transform)
    loader = native(ds, batch_size=4, backend="cpu")
    for _ in range(2):
        same_pairs(pairs(loader), pairs(tud.DataLoader(ds, batch_size=4)))


@pytest.fixture(scope="module")
def unet(jpeg_folder, tmp_path_factory):
    from test_unet_datasets import write_masks

    root = tmp_path_factory.mktemp("unet-colour")
    images = photos_of_one_size(jpeg_folder, root / "imgs", (90, 64))
    write_masks(images, root / "rgb", "rgb")
    return root


@pytest.mark.parametrize("scale", [0.5, 0.3, 1.0])
def test_unet_colour_masks_give_torchs_batches_bit_for_bit(unet, scale):
    ds = BasicDataset(unet / "imgs", unet / "rgb", scale, "_mask")
    assert len(ds.mask_values) == 2 and len(ds.mask_values[0]) == 3
    loader = native(ds, batch_size=4, backend="cpu")
    theirs = batches(tud.DataLoader(ds, batch_size=4))
    for _ in range(2):
        same_batches(batches(loader), theirs)
    assert theirs[0]["mask"].max() == 1


def test_unet_colour_masks_resized_by_a_blending_filter_fall_back_naming_it(unet):
    ds = BasicDataset(unet / "imgs", unet / "rgb", 0.5, "_mask", mask_filter=Image.BILINEAR)
    reason = fallback_reason(ds, batch_size=4, backend="cpu")
    assert "colour" in reason and "filter 2" in reason


def test_an_rgba_colour_mask_the_code_compares_as_stored_falls_back_naming_it(unet, tmp_path):
    """milesial's class compares the masks as stored: an RGBA file gives it four channels
    (its comparison with three then fails in torch's loader too); hpuload names the file's
    mode and hands the dataset over."""
    import shutil

    shutil.copytree(unet / "imgs", tmp_path / "imgs")
    shutil.copytree(unet / "rgb", tmp_path / "rgb")
    odd = sorted((tmp_path / "rgb").glob("*.png"))[5]
    Image.open(odd).convert("RGBA").save(odd)
    ds = BasicDataset.__new__(BasicDataset)
    ds.__dict__.update(BasicDataset(unet / "imgs", unet / "rgb", 0.5, "_mask").__dict__)
    ds.images_dir, ds.mask_dir = tmp_path / "imgs", tmp_path / "rgb"
    reason = fallback_reason(ds, batch_size=4, backend="cpu")
    assert odd.name in reason and "in mode RGBA" in reason


def test_colours_compared_in_another_order_after_an_epoch_give_the_class_new_samples(camvid):
    """The colour map reordered between epochs: each colour's class changes, though the
    values a first-compared colour takes do not; the next epoch's masks are the code's as it
    now maps them (through torch's loader, named), never the old classes."""
    images, masks = camvid
    ds = ColourLabelled(images, masks["rgb"], eval_transform())
    loader = native(ds, batch_size=4, backend="cpu")
    same_pairs(pairs(loader), pairs(tud.DataLoader(ds, batch_size=4)))
    ds.colourmap = COLOURMAP[::-1]
    with pytest.warns(FallbackWarning, match="masks otherwise than when the loader was built"):
        ours = pairs(loader)
    same_pairs(ours, pairs(tud.DataLoader(ds, batch_size=4)))


def test_a_damaged_colour_mask_is_named_and_its_sample_replaced(camvid, tmp_path):
    images, masks = camvid
    files = [tmp_path / m.name for m in masks["rgb"]]
    for m, f in zip(masks["rgb"], files):
        f.write_bytes(m.read_bytes())
    ds = ColourLabelled(images, files, eval_transform())
    loader = native(ds, batch_size=4, backend="cpu")
    files[6].write_bytes(files[6].read_bytes()[:60])
    indices = []
    with pytest.warns(SkippedSampleWarning, match=files[6].name):
        for x, y in loader:
            indices += loader.last_indices
            for k, index in enumerate(loader.last_indices):
                want = ds[index]
                assert torch.equal(x[k], want[0]) and torch.equal(y[k], want[1])
    assert 6 not in indices and len(indices) == len(ds)


def test_a_colour_mask_that_turns_rgba_after_the_build_is_named_and_met_as_torchs_loader_meets_it(unet, tmp_path):
    """milesial's class reads masks as stored: a file made RGBA after the loader was built
    gives it four channels, which its comparison with three colours cannot take. The next
    epoch's probe names the file and hands the dataset to torch's loader, which raises the
    class's own error, as it would without hpuload; the file is never read as if it held
    three."""
    import shutil

    shutil.copytree(unet / "imgs", tmp_path / "imgs")
    shutil.copytree(unet / "rgb", tmp_path / "rgb")
    ds = BasicDataset(tmp_path / "imgs", tmp_path / "rgb", 0.5, "_mask")
    loader = native(ds, batch_size=4, backend="cpu")
    same_batches(batches(loader), batches(tud.DataLoader(ds, batch_size=4)))
    odd = sorted((tmp_path / "rgb").glob("*.png"))[2]
    Image.open(odd).convert("RGBA").save(odd)
    with pytest.warns(FallbackWarning, match=odd.name), pytest.raises(ValueError, match="broadcast"):
        list(loader)
    with pytest.raises(ValueError, match="broadcast"):
        list(tud.DataLoader(ds, batch_size=4))


class JointColours(tud.Dataset):
    """The PyTorch forum's joint transforms over colour masks: the image and its mask read in
    RGB, resized (the mask by nearest positions), cut where `RandomCrop.get_params` drew, both
    flipped when `random.random() > 0.5`, then the mask's colours mapped to classes."""

    def __init__(self, images, masks):
        self.images, self.masks = images, masks

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        import random

        import torchvision.transforms as transforms
        import torchvision.transforms.functional as TF

        image = Image.open(self.images[index]).convert("RGB")
        mask = Image.open(self.masks[index]).convert("RGB")
        image = transforms.Resize((40, 52))(image)
        mask = TF.resize(mask, [40, 52], interpolation=transforms.InterpolationMode.NEAREST)
        i, j, h, w = transforms.RandomCrop.get_params(image, output_size=(32, 40))
        image, mask = TF.crop(image, i, j, h, w), TF.crop(mask, i, j, h, w)
        if random.random() > 0.5:
            image, mask = TF.hflip(image), TF.hflip(mask)
        rgb = np.array(mask)
        label = np.zeros(rgb.shape[:2], dtype=np.int64)
        for k, colour in enumerate(COLOURMAP):
            label[np.all(rgb == colour, axis=-1)] = k
        return TF.to_tensor(image), torch.from_numpy(label)


def test_a_colour_mask_cut_by_the_forums_joint_functionals_falls_back_naming_the_crop(camvid):
    """A colour mask cut where `get_params` drew its image's crop is not yet known to be a
    mask when it is cut (its colours are compared after): hpuload hands the class to torch's
    loader, naming the crop, rather than cut a second image where it cannot say it was cut."""
    images, masks = camvid
    reason = fallback_reason(JointColours(images, masks["palette"]), batch_size=4, backend="cpu")
    assert "a second image cut where RandomCrop.get_params drew" in reason
