"""diffusers' `textual_inversion.py` (and optimum-habana's copy, and the forks): a Dataset class of
its own that opens each image of a folder, turns it into a NumPy array and back, resizes it with
Pillow, flips it with torchvision, makes it `x / 127.5 - 1` in float64 then float32, and picks a
prompt template at random on each call, whose token ids it returns beside the image. hpuload
runs the images natively (the arithmetic as a table of each byte's float) and the class's own
code again for each sample's token ids (`_probe.DrawnExtras`)."""

import os
import random
import shutil
import types
import warnings

import numpy as np
import PIL
import pytest
import torch
from conftest import resumed_after
from PIL import Image
from torch.utils.data import Dataset
from torchvision import transforms

from hpuload.torch import DataLoader, FallbackWarning, SkippedSampleWarning

TEMPLATES = ["a photo of a {}", "a rendering of a {}", "a cropped photo of the {}", "the photo of a {}"]


class Tokenizer:
    """CLIP's tokenizer as the script calls it (no vocabulary offline): 16 ids a text."""

    model_max_length = 16

    def __call__(self, text, padding, truncation, max_length, return_tensors):
        ids = [ord(c) % 97 for c in text[:max_length]]
        return types.SimpleNamespace(input_ids=torch.tensor([ids + [0] * (max_length - len(ids))]))


def ids_of(template):
    return Tokenizer()(template.format("*"), "max_length", True, 16, "pt").input_ids[0]


class TextualInversionDataset(Dataset):
    """The script's Dataset, as it is written there (its default, `center_crop=False`, and
    its option). `scale`: another way of making the floats; `crop`: another cut of the array."""

    def __init__(self, root, tokenizer, size=48, repeats=3, interpolation="bicubic", flip_p=0.5, center_crop=False, templates=TEMPLATES, scale=None, crop=None):
        self.tokenizer, self.size, self.center_crop, self.scale, self.crop = tokenizer, size, center_crop, scale, crop
        self.placeholder_token = "*"
        self.image_paths = [os.path.join(root, name) for name in sorted(os.listdir(root))]
        self.num_images = len(self.image_paths)
        self._length = self.num_images * repeats
        self.interpolation = {
            "bilinear": PIL.Image.Resampling.BILINEAR,
            "bicubic": PIL.Image.Resampling.BICUBIC,
            "lanczos": PIL.Image.Resampling.LANCZOS,
        }[interpolation]
        self.templates = templates
        self.flip_transform = transforms.RandomHorizontalFlip(p=flip_p)

    def __len__(self):
        return self._length

    def __getitem__(self, i):
        example = {}
        image = Image.open(self.image_paths[i % self.num_images])
        if not image.mode == "RGB":
            image = image.convert("RGB")
        text = random.choice(self.templates).format(self.placeholder_token)
        example["input_ids"] = self.tokenizer(
            text, padding="max_length", truncation=True, max_length=self.tokenizer.model_max_length, return_tensors="pt"
        ).input_ids[0]
        img = np.array(image).astype(np.uint8)
        if self.center_crop:
            crop = min(img.shape[0], img.shape[1])
            h, w = img.shape[0], img.shape[1]
            img = img[(h - crop) // 2 : (h + crop) // 2, (w - crop) // 2 : (w + crop) // 2]
        if self.crop is not None:
            img = self.crop(img)
        image = Image.fromarray(img)
        image = image.resize((self.size, self.size), resample=self.interpolation)
        image = self.flip_transform(image)
        image = np.array(image).astype(np.uint8)
        image = (image / 127.5 - 1.0).astype(np.float32) if self.scale is None else self.scale(image)
        example["pixel_values"] = torch.from_numpy(image).permute(2, 0, 1)
        return example


@pytest.fixture(scope="module")
def concept(jpeg_folder, tmp_path_factory):
    """A folder of a few photos, as the script's `--train_data_dir` holds them."""
    root = tmp_path_factory.mktemp("concept")
    for k, path in enumerate(sorted(jpeg_folder.rglob("*.jpg"))[:5]):
        shutil.copy(path, root / f"{k}.jpg")
    return root


def native(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        return DataLoader(*args, **kwargs)


@pytest.mark.parametrize("center_crop", [False, True])
def test_the_scripts_loader_runs_natively_with_torchs_pixels_on_the_cpu_path(concept, center_crop):
    """`center_crop=True` (`--center_crop`) cuts the centre square of each photo's shorter
    side of its array before the resize: the photos here are wide and tall."""
    sizes = {Image.open(p).size for p in concept.iterdir()}
    assert any(w > h for w, h in sizes) and any(w < h for w, h in sizes)
    for flip_p, interpolation in ((0.0, "bicubic"), (1.0, "bilinear")):
        ds = TextualInversionDataset(
            concept, Tokenizer(), flip_p=flip_p, interpolation=interpolation, templates=TEMPLATES[:1], center_crop=center_crop
        )
        ours = native(ds, batch_size=4, backend="cpu")
        theirs = torch.utils.data.DataLoader(ds, batch_size=4)
        n = 0
        for a, b in zip(ours, theirs, strict=True):
            assert list(a) == list(b) == ["input_ids", "pixel_values"]
            assert a["pixel_values"].shape == b["pixel_values"].shape == (len(b["input_ids"]), 3, 48, 48)
            assert a["pixel_values"].dtype == torch.float32
            # `x / 127.5 - 1` in float64, cast: bit for bit (ToTensor then Normalize(0.5, 0.5)
            # would differ in the last bit of some values).
            assert torch.equal(a["pixel_values"], b["pixel_values"])
            assert torch.equal(a["input_ids"], b["input_ids"])
            n += 1
        assert n == 4


def test_a_random_flip_gives_each_sample_torchs_image_or_its_mirror_both_seen(concept):
    ds = TextualInversionDataset(concept, Tokenizer(), templates=TEMPLATES[:1])
    plain = TextualInversionDataset(concept, Tokenizer(), flip_p=0.0, templates=TEMPLATES[:1])
    seen = set()
    for a, b in zip(native(ds, batch_size=5, backend="cpu"), torch.utils.data.DataLoader(plain, batch_size=5)):
        for x, y in zip(a["pixel_values"], b["pixel_values"]):
            flipped = torch.equal(x, y.flip(-1))
            assert flipped or torch.equal(x, y)
            seen.add(flipped)
    assert seen == {True, False}


def test_a_prompt_picked_on_each_call_is_drawn_for_each_sample_repeatably(concept):
    ds = TextualInversionDataset(concept, Tokenizer(), repeats=8)
    allowed = torch.stack([ids_of(t) for t in TEMPLATES])

    def ids(loader):
        return [batch["input_ids"] for batch in loader]

    loader = native(ds, batch_size=4, shuffle=True, seed=7, backend="cpu")
    first, second = torch.cat(ids(loader)), torch.cat(ids(loader))
    for run in (first, second):
        assert len(run) == 40
        # Each sample's ids are one template's, and every template is picked.
        picked = [(allowed == row).all(1).nonzero().flatten().tolist() for row in run]
        assert all(len(p) == 1 for p in picked)
        assert {p[0] for p in picked} == set(range(len(TEMPLATES)))
    assert not torch.equal(first, second)  # drawn anew each epoch
    # From (seed, epoch, index): another loader with the seed draws the same.
    assert torch.equal(torch.cat(ids(native(ds, batch_size=4, shuffle=True, seed=7, backend="cpu"))), first)
    # And the global generators are as they were: the training loop's draws go on alike.
    random.seed(3)
    want = random.random()
    random.seed(3)
    ids(native(ds, batch_size=4, backend="cpu"))
    assert random.random() == want


def test_resuming_mid_epoch_gives_the_same_images_and_prompts(concept):
    ds = TextualInversionDataset(concept, Tokenizer(), repeats=4)
    rest, resumed = resumed_after(lambda: native(ds, batch_size=4, shuffle=True, seed=3, backend="cpu"), 2)
    assert len(rest) == len(resumed) == 3
    for a, b in zip(rest, resumed):
        assert torch.equal(a["pixel_values"], b["pixel_values"]) and torch.equal(a["input_ids"], b["input_ids"])


@pytest.mark.parametrize("center_crop", [False, True])
def test_the_media_engine_gives_the_scripts_images_within_its_floor(concept, center_crop):
    ds = TextualInversionDataset(concept, Tokenizer(), flip_p=0.0, size=64, templates=TEMPLATES[:1], center_crop=center_crop)
    for a, b in zip(native(ds, batch_size=5, backend="auto"), torch.utils.data.DataLoader(ds, batch_size=5)):
        # PSNR over the [-1, 1] range.
        mse = ((a["pixel_values"] - b["pixel_values"]) ** 2).mean().item()
        assert 10 * np.log10(4 / max(mse, 1e-12)) > 30


def test_other_arithmetic_of_the_dataset_runs_natively_bit_for_bit(concept):
    for scale in (
        lambda x: (x.astype(np.float32) * 2 / 255 - 1),
        lambda x: ((x - 127.5) / 127.5).astype(np.float32),
        lambda x: 1 - x / np.float32(255),
    ):
        ds = TextualInversionDataset(concept, Tokenizer(), flip_p=0.0, templates=TEMPLATES[:1], scale=scale)
        for a, b in zip(native(ds, batch_size=5, backend="cpu"), torch.utils.data.DataLoader(ds, batch_size=5)):
            assert torch.equal(a["pixel_values"], b["pixel_values"])


@pytest.mark.parametrize("damaged", ["2.jpg", "0.jpg"])
def test_a_damaged_image_is_named_and_its_samples_replaced_even_the_first(concept, tmp_path, damaged):
    """The first file too: the probe's real run of one index (`_check_handed_out`) passes over
    it rather than falling back to torch's loader, which would fail on it."""
    root = tmp_path / "concept"
    shutil.copytree(concept, root)
    (root / damaged).write_bytes(b"\xff\xd8 not a jpeg")
    ds = TextualInversionDataset(root, Tokenizer(), templates=TEMPLATES[:1])
    with pytest.warns(SkippedSampleWarning, match=damaged):
        batches = list(native(ds, batch_size=5, backend="cpu", error_budget=0.5, seed=1))
    # Each of the file's three samples replaced by another whole sample (a replacement may be
    # the damaged file again, and be replaced in turn): none lost.
    assert sum(len(b["pixel_values"]) for b in batches) == 15


@pytest.mark.parametrize(
    "change, why",
    [
        # A cut of the array other than the centre square of its shorter side.
        (dict(crop=lambda img: img[: img.shape[0] // 2]), r"a crop \[0:\d+, 0:\d+\] of the image's \d+x\d+ array"),
        (dict(crop=lambda img: img[::2, ::2]), "sliced with a step"),
        (dict(scale=lambda x: x / 127.5 - 1.0), "float64"),
        (dict(scale=lambda x: (x.astype(np.float32) - np.array([1.0, 2.0, 3.0], dtype=np.float32))), "ndarray"),
        # Code that takes another path for an array than for the probe's stand-in (which
        # `isinstance` takes for the array it stands for, `type` not): found by running one
        # index for real.
        (dict(scale=lambda x: (x / 127.5 - 1).astype(np.float32).transpose(2, 0, 1) if type(x) is np.ndarray else (x / 127.5 - 1).astype(np.float32)), "when run"),
    ],
)
def test_what_hpuload_does_not_follow_falls_back_named(concept, change, why):
    ds = TextualInversionDataset(concept, Tokenizer(), **change)
    with pytest.warns(FallbackWarning, match=why):
        loader = DataLoader(ds, batch_size=5, backend="cpu")
    assert len(next(iter(loader))["pixel_values"]) == 5
