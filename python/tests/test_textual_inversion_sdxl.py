"""diffusers' `textual_inversion_sdxl.py`: a Dataset class of its own that holds two torchvision
transforms (`self.crop`, a `RandomCrop` or with `--center_crop` a `CenterCrop`, and
`self.flip_transform`) and applies them itself: it notes each image's size, asks
`RandomCrop.get_params` for a corner and cuts there with `functional.crop` (or calls the
`CenterCrop`), returns the corner beside the image (SDXL's `crop_top_left` conditioning), turns
the crop into an array and back, resizes it to its own size, flips it, and makes it
`x / 127.5 - 1`. hpuload runs the crop and flip natively in that order (`_probe.ChainLink`,
`_probe.Applied`) and the class's own code again for each sample's values beside the image,
where `get_params` answers the corner the loader's own crop cut (`_probe._crop_params`). Other
classes that apply their transforms themselves (one picked by a flag, a crop drawn on the
class, code that asks what it holds) are pinned here too."""

import os
import random
import shutil

import numpy as np
import PIL
import pytest
import torch
from conftest import resumed_after
from PIL import Image
from test_textual_inversion import Tokenizer, concept, native  # noqa: F401 (`concept`: a fixture)
from torch.utils.data import Dataset
from torchvision import transforms
from torchvision.transforms import functional as TF

from hpuload.torch import DataLoader, FallbackWarning

TEMPLATES = ["a photo of a {}", "a rendering of a {}", "a cropped photo of the {}"]


class SDXLTextualInversionDataset(Dataset):
    """The script's Dataset as it is written there (its `set="train"` repeats, its two
    tokenizers, its `crop_top_left`). `shift`: a crop elsewhere than where `get_params` drew."""

    def __init__(self, root, size=48, repeats=3, flip_p=0.5, center_crop=False, templates=TEMPLATES, shift=0):
        self.tokenizer_1, self.tokenizer_2 = Tokenizer(), Tokenizer()
        self.size, self.center_crop, self.flip_p, self.shift = size, center_crop, flip_p, shift
        self.placeholder_token = "*"
        self.image_paths = [os.path.join(root, name) for name in sorted(os.listdir(root))]
        self.num_images = len(self.image_paths)
        self._length = self.num_images * repeats
        self.interpolation = PIL.Image.Resampling.BICUBIC
        self.templates = templates
        self.flip_transform = transforms.RandomHorizontalFlip(p=self.flip_p)
        self.crop = transforms.CenterCrop(size) if center_crop else transforms.RandomCrop(size)

    def __len__(self):
        return self._length

    def __getitem__(self, i):
        example = {}
        image = Image.open(self.image_paths[i % self.num_images])
        if not image.mode == "RGB":
            image = image.convert("RGB")
        text = random.choice(self.templates).format(self.placeholder_token)
        example["original_size"] = (image.height, image.width)
        if self.center_crop:
            y1 = max(0, int(round((image.height - self.size) / 2.0)))
            x1 = max(0, int(round((image.width - self.size) / 2.0)))
            image = self.crop(image)
        else:
            y1, x1, h, w = self.crop.get_params(image, (self.size, self.size))
            image = transforms.functional.crop(image, y1 + self.shift, x1, h, w)
        example["crop_top_left"] = (y1, x1)
        for k, tokenizer in ((1, self.tokenizer_1), (2, self.tokenizer_2)):
            example[f"input_ids_{k}"] = tokenizer(
                text, padding="max_length", truncation=True, max_length=tokenizer.model_max_length, return_tensors="pt"
            ).input_ids[0]
        img = np.array(image).astype(np.uint8)
        image = Image.fromarray(img)
        image = image.resize((self.size, self.size), resample=self.interpolation)
        image = self.flip_transform(image)
        image = np.array(image).astype(np.uint8)
        image = (image / 127.5 - 1.0).astype(np.float32)
        example["pixel_values"] = torch.from_numpy(image).permute(2, 0, 1)
        return example


def cut_of(path, top, left, size):
    """The script's pixel values of the photo cut at `(top, left)`, unflipped: what torch's
    loader gives for that corner."""
    image = np.array(Image.open(path).convert("RGB"))[top : top + size, left : left + size]
    return torch.from_numpy((image / 127.5 - 1.0).astype(np.float32)).permute(2, 0, 1)


def test_the_scripts_random_crop_runs_natively_and_each_corner_handed_out_is_where_its_image_was_cut(concept):
    ds = SDXLTextualInversionDataset(concept, repeats=4)
    theirs = next(iter(torch.utils.data.DataLoader(ds, batch_size=4)))
    flips, corners = set(), set()
    loader = native(ds, batch_size=4, backend="cpu", seed=5)
    for epoch in range(2):
        position = 0
        for batch in loader:
            assert list(batch) == list(theirs)
            for key in batch:
                a, b = batch[key], theirs[key]
                if isinstance(b, torch.Tensor):
                    assert (a.dtype, a.shape[1:]) == (b.dtype, b.shape[1:])
                else:  # default_collate's list of a tuple's columns
                    assert len(a) == len(b) and all(x.dtype == y.dtype for x, y in zip(a, b))
            for k, pixels in enumerate(batch["pixel_values"]):
                path = ds.image_paths[(position + k) % ds.num_images]
                width, height = Image.open(path).size
                assert (int(batch["original_size"][0][k]), int(batch["original_size"][1][k])) == (height, width)
                top, left = int(batch["crop_top_left"][0][k]), int(batch["crop_top_left"][1][k])
                assert 0 <= top <= height - 48 and 0 <= left <= width - 48
                want = cut_of(path, top, left, 48)
                # Bit for bit: the image cut at the corner handed out beside it, or its mirror.
                assert torch.equal(pixels, want) or torch.equal(pixels, want.flip(-1))
                flips.add(torch.equal(pixels, want.flip(-1)) and not torch.equal(pixels, want))
                corners.add((path, top, left))
            position += len(batch["pixel_values"])
    assert flips == {True, False}
    assert len(corners) > 30  # drawn for each sample, anew each epoch


def test_the_scripts_centre_crop_gives_torchs_batches_bit_for_bit(concept):
    for flip_p in (0.0, 1.0):
        ds = SDXLTextualInversionDataset(concept, flip_p=flip_p, center_crop=True, templates=TEMPLATES[:1])
        pairs = zip(native(ds, batch_size=4, backend="cpu"), torch.utils.data.DataLoader(ds, batch_size=4), strict=True)
        for a, b in pairs:
            assert torch.equal(a["pixel_values"], b["pixel_values"])
            for key in ("original_size", "crop_top_left"):
                assert all(torch.equal(x, y) for x, y in zip(a[key], b[key]))
            assert torch.equal(a["input_ids_1"], b["input_ids_1"]) and torch.equal(a["input_ids_2"], b["input_ids_2"])


def test_the_random_crops_corners_are_drawn_as_torchvision_draws_them(concept):
    """Each corner uniform over the photo's whole range on both axes, as `torch.randint` draws
    it in `get_params`: over 400 samples of one photo, every row and column band is hit and
    the means sit near the middle."""
    root = concept.parent / "one_photo"
    root.mkdir(exist_ok=True)
    shutil.copy(concept / "0.jpg", root / "0.jpg")
    width, height = Image.open(root / "0.jpg").size
    ds = SDXLTextualInversionDataset(root, size=32, repeats=400, templates=TEMPLATES[:1])
    tops, lefts = [], []
    for batch in native(ds, batch_size=50, backend="cpu", seed=2):
        tops += batch["crop_top_left"][0].tolist()
        lefts += batch["crop_top_left"][1].tolist()
    for values, span in ((tops, height - 32), (lefts, width - 32)):
        assert min(values) >= 0 and max(values) <= span
        assert abs(np.mean(values) - span / 2) < 0.1 * span  # uniform's mean, sd/sqrt(400) ~ 0.014 span
        bands = np.histogram(values, bins=4, range=(0, span + 1))[0]
        assert (bands > 50).all()


def test_the_corners_are_the_same_again_for_a_seed_and_on_a_resumed_run(concept):
    ds = SDXLTextualInversionDataset(concept, repeats=4)

    def corners(loader):
        return [torch.stack(b["crop_top_left"]) for b in loader]

    first = corners(native(ds, batch_size=4, shuffle=True, seed=9, backend="cpu"))
    assert all(torch.equal(a, b) for a, b in zip(first, corners(native(ds, batch_size=4, shuffle=True, seed=9, backend="cpu"))))
    rest, resumed = resumed_after(lambda: native(ds, batch_size=4, shuffle=True, seed=9, backend="cpu"), 2)
    assert len(rest) == len(resumed) == 3
    for a, b in zip(rest, resumed):
        assert torch.equal(a["pixel_values"], b["pixel_values"])
        assert torch.equal(torch.stack(a["crop_top_left"]), torch.stack(b["crop_top_left"]))


def test_the_media_engine_cuts_where_the_corner_handed_out_says_within_its_floor(concept):
    ds = SDXLTextualInversionDataset(concept, size=64, flip_p=0.0, templates=TEMPLATES[:1])
    position = 0
    for batch in native(ds, batch_size=5, backend="auto", seed=1):
        for k, pixels in enumerate(batch["pixel_values"]):
            top, left = int(batch["crop_top_left"][0][k]), int(batch["crop_top_left"][1][k])
            want = cut_of(ds.image_paths[(position + k) % ds.num_images], top, left, 64)
            mse = ((pixels - want) ** 2).mean().item()
            assert 10 * np.log10(4 / max(mse, 1e-12)) > 30  # PSNR over the [-1, 1] range
        position += len(batch["pixel_values"])


def test_a_crop_elsewhere_than_get_params_drew_falls_back_named(concept):
    ds = SDXLTextualInversionDataset(concept, shift=1)
    with pytest.warns(FallbackWarning, match=r"a crop of the image at \(\d+, \d+\) of 48x48"):
        loader = DataLoader(ds, batch_size=5, backend="cpu")
    assert len(next(iter(loader))["pixel_values"]) == 5


class TwoTransforms(Dataset):
    """A Dataset that holds a training and an evaluation transform and picks one by a flag, a
    common shape of a user's own class."""

    def __init__(self, root, train=True):
        self.paths = sorted(os.path.join(root, name) for name in os.listdir(root))
        self.train = train
        self.train_tf = transforms.Compose(
            [transforms.RandomResizedCrop(40), transforms.RandomHorizontalFlip(), transforms.ToTensor()]
        )
        self.eval_tf = transforms.Compose([transforms.Resize(44), transforms.CenterCrop(40), transforms.ToTensor()])

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        image = Image.open(self.paths[i]).convert("RGB")
        return (self.train_tf if self.train else self.eval_tf)(image), i % 3


def test_a_dataset_that_picks_one_of_its_transforms_runs_it_natively(concept):
    ds = TwoTransforms(concept, train=False)
    for a, b in zip(native(ds, batch_size=5, backend="cpu"), torch.utils.data.DataLoader(ds, batch_size=5), strict=True):
        assert torch.equal(a[1], b[1])
        assert torch.allclose(a[0], b[0], atol=1e-6)
    ds.train = True
    batch = next(iter(native(ds, batch_size=5, backend="cpu")))
    assert batch[0].shape == (5, 3, 40, 40)


class CropThenTransform(Dataset):
    """`RandomCrop.get_params` called on the class, then `functional.crop` (bound by name), then
    the Dataset's one transform."""

    def __init__(self, root):
        self.paths = sorted(os.path.join(root, name) for name in os.listdir(root))
        self.transform = transforms.Compose([transforms.RandomHorizontalFlip(p=1.0), transforms.PILToTensor()])

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        image = Image.open(self.paths[i]).convert("RGB")
        top, left, h, w = transforms.RandomCrop.get_params(image, output_size=(40, 36))
        return self.transform(TF.crop(image, top, left, h, w)), i % 2, top, left


def test_a_crop_drawn_by_the_class_before_the_transform_is_cut_where_its_corner_says(concept):
    ds = CropThenTransform(concept)
    batch = next(iter(native(ds, batch_size=5, backend="cpu", seed=4)))
    assert batch[0].shape == (5, 3, 40, 36) and batch[0].dtype == torch.uint8
    assert batch[1].tolist() == [0, 1, 0, 1, 0]
    for k, pixels in enumerate(batch[0]):
        top, left = int(batch[2][k]), int(batch[3][k])
        want = np.array(Image.open(ds.paths[k]).convert("RGB"))[top : top + 40, left : left + 36]
        assert torch.equal(pixels, torch.from_numpy(want).permute(2, 0, 1).flip(-1))


def test_a_transform_the_dataset_applies_itself_reassigned_between_epochs_is_followed(concept):
    ds = SDXLTextualInversionDataset(concept, flip_p=0.0, center_crop=True, templates=TEMPLATES[:1])
    loader = native(ds, batch_size=5, backend="cpu")
    first = torch.cat([b["pixel_values"] for b in loader])
    ds.flip_transform = transforms.RandomHorizontalFlip(p=1.0)
    second = torch.cat([b["pixel_values"] for b in loader])
    assert torch.equal(second, first.flip(-1))


class NotesWhatItHolds(Dataset):
    """Branches on what it holds, as code written for either a PIL image or a tensor does:
    the opened image, then what its own `self.crop` and `self.to_tensor` made of it."""

    def __init__(self, root):
        self.paths = sorted(os.path.join(root, name) for name in os.listdir(root))
        self.crop, self.to_tensor = transforms.CenterCrop(40), transforms.ToTensor()

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        image = Image.open(self.paths[i])
        opened = isinstance(image, Image.Image)
        image = self.crop(image.convert("RGB")).convert("RGB")
        cropped = "pil" if isinstance(image, Image.Image) else "tensor" if isinstance(image, torch.Tensor) else "?"
        image = self.to_tensor(image)
        if not isinstance(image, torch.Tensor):
            image = torch.zeros(3, 40, 40)  # never, with the pixels
        return {"pixel_values": image, "opened": int(opened), "cropped": cropped, "made": int(isinstance(image, torch.Tensor))}


def test_code_that_asks_what_it_holds_is_answered_as_with_the_pixels(concept):
    ds = NotesWhatItHolds(concept)
    pairs = zip(native(ds, batch_size=5, backend="cpu"), torch.utils.data.DataLoader(ds, batch_size=5), strict=True)
    for a, b in pairs:
        assert a["opened"].tolist() == b["opened"].tolist() == [1] * 5
        assert a["cropped"] == b["cropped"] == ["pil"] * 5
        assert a["made"].tolist() == b["made"].tolist() == [1] * 5
        assert torch.equal(a["pixel_values"], b["pixel_values"])


class AsksWhatItsTransformGave(Dataset):
    """One `transform`, and code that asks what it gave: a tensor (flagged beside it), or the
    PIL image whose array it then lays out channels first."""

    def __init__(self, root, transform):
        self.paths = sorted(os.path.join(root, name) for name in os.listdir(root))
        self.transform = transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        image = self.transform(Image.open(self.paths[i]).convert("RGB"))
        tensor = int(isinstance(image, torch.Tensor))
        if isinstance(image, Image.Image):
            image = np.array(image)
        if isinstance(image, np.ndarray):
            image = torch.from_numpy(image.transpose(2, 0, 1).astype(np.float32) / 255)
        return {"pixel_values": image, "tensor": tensor}


@pytest.mark.parametrize("to_tensor", [True, False])
def test_code_that_asks_what_its_transform_gave_is_answered_as_with_the_pixels(concept, to_tensor):
    last = [transforms.ToTensor()] if to_tensor else []
    ds = AsksWhatItsTransformGave(concept, transforms.Compose([transforms.CenterCrop(40), *last]))
    pairs = zip(native(ds, batch_size=5, backend="cpu"), torch.utils.data.DataLoader(ds, batch_size=5), strict=True)
    for a, b in pairs:
        assert a["tensor"].tolist() == b["tensor"].tolist() == [int(to_tensor)] * 5
        assert a["pixel_values"].shape == b["pixel_values"].shape == (5, 3, 40, 40)
        assert torch.equal(a["pixel_values"], b["pixel_values"])


class WithIndex(SDXLTextualInversionDataset):
    """The script's Dataset, its index noted beside each sample (to find its photo)."""

    def __getitem__(self, i):
        example = super().__getitem__(i)
        example["i"] = i
        return example


def test_shuffled_and_under_a_subset_each_corner_is_where_its_image_was_cut(concept):
    ds = WithIndex(concept, size=40, repeats=4)
    for data in (ds, torch.utils.data.Subset(ds, [7, 3, 11, 0, 5, 18, 2, 9])):
        for batch in native(data, batch_size=4, shuffle=True, seed=3, backend="cpu"):
            for k, i in enumerate(batch["i"].tolist()):
                top, left = int(batch["crop_top_left"][0][k]), int(batch["crop_top_left"][1][k])
                want = cut_of(ds.image_paths[i % ds.num_images], top, left, 40)
                assert torch.equal(batch["pixel_values"][k], want) or torch.equal(batch["pixel_values"][k], want.flip(-1))
