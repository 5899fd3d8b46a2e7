"""A user's Dataset whose `__getitem__` draws from the global generators (Python's `random`,
NumPy's, torch's) outside its transform: a caption dropped now and then, one caption picked of
several, a label flipped, another file taken. hpuload watches the generators while it probes,
so a draw is seen however rarely it changes anything: values drawn beside the image are drawn
again for each sample, a sample whose draw changes its file is the Dataset's own, and a drawn
label of an (image, label) pair goes to torch's loader, naming the line."""

import random
import sys
import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from PIL import Image
from torchvision import transforms as T

from hpuload.torch import DataLoader, FallbackWarning

SIZE = (24, 24)


@pytest.fixture
def photos(jpeg_folder):
    return sorted(jpeg_folder.rglob("*.jpg"))[:12]


def pixels(path):
    """What the Datasets' transform gives for a file (uint8 CHW: the CPU path gives it exactly)."""
    return T.Compose([T.Resize(SIZE), T.PILToTensor()])(Image.open(path).convert("RGB"))


class Dropped(tud.Dataset):
    """An image-text Dataset that drops its caption with probability `p` (the
    `proportion_empty_prompts` of diffusers' scripts, written in the Dataset), and takes the
    next image instead of its own with probability `swap`."""

    def __init__(self, files, p=0.0, swap=0.0, transform=None):
        self.files, self.p, self.swap = files, p, swap
        self.transform = transform or T.Compose([T.Resize(SIZE), T.PILToTensor()])

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        caption = f"a photo number {i}"
        if random.random() < self.p:
            caption = ""
        j = (i + 1) % len(self.files) if random.random() < self.swap else i
        image = self.transform(Image.open(self.files[j]).convert("RGB"))
        return {"pixel_values": image, "caption": caption, "file": j}


def native(dataset, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        return DataLoader(dataset, backend="cpu", **kw)


def test_a_caption_dropped_once_in_many_calls_is_drawn_for_each_sample_though_the_probe_saw_none(photos):
    ds = Dropped(photos)  # it draws on every call; the probe sees the same captions
    loader = native(ds, batch_size=4, seed=7)
    ds.p = 0.5
    epochs = [[c for batch in loader for c in batch["caption"]] for _ in range(3)]
    for captions in epochs:
        assert all(c in ("", f"a photo number {i}") for i, c in enumerate(captions))
        assert "" in captions and any(captions)
    assert epochs[0] != epochs[1]
    again = native(ds, batch_size=4, seed=7)
    assert [c for batch in again for c in batch["caption"]] == epochs[0]


@pytest.mark.parametrize("collate", [None, "own"])
@pytest.mark.parametrize("workers", [0, 2])
def test_a_file_drawn_once_in_many_calls_gives_that_files_image_as_the_dataset_does(photos, collate, workers):
    ds = Dropped(photos)
    kw = {} if collate is None else {"collate_fn": lambda samples: samples}
    loader = native(ds, batch_size=5, num_workers=workers, shuffle=True, seed=3, **kw)
    # Now and then another file than the probe saw (one epoch: the next one's probe would
    # see it and go to torch's loader, named).
    ds.swap = 0.3
    took_another = False
    for batch in loader:
        samples = batch if collate else [dict(zip(batch, v)) for v in zip(*batch.values())]
        for s in samples:
            j = int(s["file"])
            assert torch.equal(s["pixel_values"], pixels(photos[j]))
            took_another |= j != int(s["caption"].rsplit(" ", 1)[-1])
    assert took_another, "no sample took another file: the test would test nothing"


def test_a_file_drawn_now_and_then_under_a_python_tail_gives_that_files_image(photos):
    mirror = T.Lambda(lambda x: x.flip(-1))  # a step hpuload runs in Python after its own
    ds = Dropped(photos, transform=T.Compose([T.Resize(SIZE), T.PILToTensor(), mirror]))
    loader = native(ds, batch_size=4, seed=3)
    ds.swap = 0.4
    took_another = False
    for batch in loader:
        for image, caption, j in zip(batch["pixel_values"], batch["caption"], batch["file"].tolist()):
            assert torch.equal(image, pixels(photos[j]).flip(-1))
            took_another |= j != int(caption.rsplit(" ", 1)[-1])
    assert took_another


class Captions(tud.Dataset):
    """`(image, caption)` pairs, one of each image's captions picked at random (COCO-style
    captioning and CLIP training code)."""

    def __init__(self, files):
        self.files = files
        self.captions = [[f"image {i} caption {k}" for k in range(4)] for i in range(len(files))]
        self.transform = T.Compose([T.Resize(SIZE), T.PILToTensor()])

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return self.transform(Image.open(self.files[i]).convert("RGB")), random.choice(self.captions[i])


def test_a_caption_picked_from_an_images_captions_is_picked_for_each_sample_beside_torchs_images(photos):
    ds = Captions(photos)
    loader = native(ds, batch_size=4)
    seen = set()
    for _ in range(4):
        for (images, captions), (theirs, _) in zip(loader, tud.DataLoader(ds, batch_size=4), strict=True):
            assert torch.equal(images, theirs)
            for k, c in enumerate(captions):
                assert c in ds.captions[int(c.split()[1])]
            seen.update(captions)
    assert len(seen) > len(photos) * 2  # more than one caption of most images


class Noisy(tud.Dataset):
    """`(image, label)` pairs whose label is replaced by a random class now and then."""

    def __init__(self, files, draw):
        self.files, self.draw = files, draw
        self.transform = T.Compose([T.Resize(SIZE), T.PILToTensor()])

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        label = i % 3
        if self.draw() < 0.001:
            label = 2 - label
        return self.transform(Image.open(self.files[i]).convert("RGB")), label


@pytest.mark.parametrize(
    "draw, generator",
    [
        (random.random, "Python's `random`"),
        (lambda: np.random.rand(), "NumPy's `np.random`"),
        (lambda: torch.rand(()).item(), "torch's"),
    ],
)
def test_a_pairs_label_drawn_now_and_then_goes_to_torch_naming_the_generator_and_the_line(photos, draw, generator):
    with pytest.warns(FallbackWarning, match=rf"draws from {generator} global generator.*test_drawn_datasets.py:\d+ "):
        loader = DataLoader(Noisy(photos, draw), batch_size=4)
    assert not isinstance(loader, DataLoader)


def test_probing_a_dataset_that_draws_leaves_every_global_generator_as_it_was(photos):
    class NumpyDrop(Dropped):
        def __getitem__(self, i):
            sample = super().__getitem__(i)
            sample["noise"] = float(np.random.rand())
            return sample

    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    states = random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state()
    native(NumpyDrop(photos), batch_size=4, seed=0)  # no seed drawn from torch's generator
    assert random.getstate() == states[0]
    assert np.array_equal(np.random.get_state()[1], states[1])
    assert torch.equal(torch.get_rng_state(), states[2])


class OwnGenerator(Dropped):
    """Draws from a generator of its own (`self.rng = np.random.default_rng()`, the NumPy
    style), not the global ones; `pair`: returns `(image, label)` with the label flipped now
    and then."""

    def __init__(self, files, p=0.0, pair=False):
        super().__init__(files, p)
        self.rng, self.pair = np.random.default_rng(5), pair

    def __getitem__(self, i):
        image = self.transform(Image.open(self.files[i]).convert("RGB"))
        drop = self.rng.random() < self.p
        if self.pair:
            return image, (i % 3) if not drop else 3
        return {"pixel_values": image, "caption": "" if drop else f"a photo number {i}"}


def test_a_caption_dropped_by_the_datasets_own_generator_is_drawn_for_each_sample(photos):
    ds = OwnGenerator(photos)
    state = ds.rng.bit_generator.state
    loader = native(ds, batch_size=4)
    assert ds.rng.bit_generator.state == state  # probing drew nothing of it
    ds.p = 0.5
    captions = [c for _ in range(2) for batch in loader for c in batch["caption"]]
    assert "" in captions and any(captions)


def test_a_pairs_label_drawn_by_the_datasets_own_generator_goes_to_torch_named(photos):
    with pytest.warns(FallbackWarning, match=r"draws from its own generator `self.rng` at test_drawn_datasets.py:\d+ \(`drop = self.rng.random"):
        loader = DataLoader(OwnGenerator(photos, pair=True), batch_size=4)
    assert not isinstance(loader, DataLoader)


class CaptionNoise:
    """A helper with a generator of its own: drops a caption with probability `p`."""

    def __init__(self, p):
        self.p, self.rng = p, np.random.default_rng(11)

    def __call__(self, caption):
        return "" if self.rng.random() < self.p else caption


class HelperDraws(Dropped):
    """Draws through a helper it holds (`self.noise`), whose generator is the helper's own;
    `pair`: returns `(image, label)` with the label changed where the caption is dropped."""

    def __init__(self, files, p=0.0, pair=False):
        super().__init__(files)
        self.noise, self.pair = CaptionNoise(p), pair

    def __getitem__(self, i):
        image = self.transform(Image.open(self.files[i]).convert("RGB"))
        caption = self.noise(f"a photo number {i}")
        if self.pair:
            return image, (i % 3) if caption else 3
        return {"pixel_values": image, "caption": caption}


def test_a_caption_dropped_by_a_helpers_own_generator_is_drawn_for_each_sample(photos):
    ds = HelperDraws(photos)
    state = ds.noise.rng.bit_generator.state
    loader = native(ds, batch_size=4)
    assert ds.noise.rng.bit_generator.state == state  # probing drew nothing of it
    ds.noise.p = 0.5
    captions = [c for _ in range(2) for batch in loader for c in batch["caption"]]
    assert "" in captions and any(captions)


def test_a_pairs_label_drawn_by_a_helpers_own_generator_goes_to_torch_named(photos):
    with pytest.warns(FallbackWarning, match=r"draws from its own generator `self.noise.rng` at test_drawn_datasets.py:\d+"):
        loader = DataLoader(HelperDraws(photos, pair=True), batch_size=4)
    assert not isinstance(loader, DataLoader)


class Chain:
    """A helper that holds the helper which draws (`self.step.rng`, a helper's helper)."""

    def __init__(self, p):
        self.step = CaptionNoise(p)

    def __call__(self, caption):
        return self.step(caption)


UTILS = """
import random


class Dropout:
    # A helper of another module of the user's code, drawing from its own `random.Random`.
    def __init__(self, p):
        self.p, self.rng = p, random.Random(3)

    def __call__(self, caption):
        return "" if self.rng.random() < self.p else caption
"""


@pytest.fixture
def utils_module(tmp_path, monkeypatch):
    """The user's `caption_utils.py` beside the training script, imported from its folder."""
    (tmp_path / "caption_utils.py").write_text(UTILS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    yield importlib.import_module("caption_utils")
    sys.modules.pop("caption_utils", None)


def helper_held(how, utils):
    """`(noise, drawing, name)`: a helper that drops a caption with probability `drawing.p`
    (0 to begin with), held `how`, the object that draws, and the name hpuload gives its
    generator."""
    if how == "a helper's helper":
        noise = Chain(0.0)
        return noise, noise.step, "self.noise.step.rng"
    if how == "a list of helpers":
        noise = [CaptionNoise(0.0)]
        return noise, noise[0], r"self.noise\[0\].rng"
    if how == "a global of its module":
        return None, NOISE, "NOISE.rng"
    noise = utils.Dropout(0.0)
    return noise, noise, "self.noise.rng"


#: A helper held by the module, not the Dataset (`HeldDraws` with no helper of its own).
NOISE = CaptionNoise(0.0)


class HeldDraws(HelperDraws):
    """`HelperDraws` with its helper held as `helper_held` makes it."""

    def __init__(self, files, noise, pair=False):
        super().__init__(files, pair=pair)
        self.noise = noise

    def __getitem__(self, i):
        noise = self.noise[0] if isinstance(self.noise, list) else self.noise or NOISE
        image = self.transform(Image.open(self.files[i]).convert("RGB"))
        caption = noise(f"a photo number {i}")
        if self.pair:
            return image, (i % 3) if caption else 3
        return {"pixel_values": image, "caption": caption}


HOW = ["a helper's helper", "a list of helpers", "a class of the user's other module", "a global of its module"]


@pytest.mark.parametrize("how", HOW)
def test_a_caption_dropped_by_a_generator_held_deeper_is_drawn_for_each_sample(photos, utils_module, how, monkeypatch):
    noise, drawing, _ = helper_held(how, utils_module)
    loader = native(HeldDraws(photos, noise), batch_size=4)
    monkeypatch.setattr(drawing, "p", 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        captions = [c for _ in range(2) for batch in loader for c in batch["caption"]]
    assert "" in captions and any(captions)


@pytest.mark.parametrize("how", HOW)
def test_a_pairs_label_drawn_by_a_generator_held_deeper_goes_to_torch_named(photos, utils_module, how):
    noise, _, name = helper_held(how, utils_module)
    with pytest.warns(FallbackWarning, match=rf"draws from its own generator (its module's )?`{name}` at test_drawn_datasets.py:\d+"):
        loader = DataLoader(HeldDraws(photos, noise, pair=True), batch_size=4)
    assert not isinstance(loader, DataLoader)


def test_draws_under_a_random_splits_indices_are_made_for_each_of_its_samples(photos):
    ds = Dropped(photos)
    train, _ = tud.random_split(ds, [8, 4], generator=torch.Generator().manual_seed(0))
    loader = native(train, batch_size=4, seed=2)
    ds.p, ds.swap = 0.5, 0.3
    captions, took_another = [], False
    for batch in loader:
        for image, caption, j in zip(batch["pixel_values"], batch["caption"], batch["file"].tolist()):
            assert torch.equal(image, pixels(photos[j]))  # the file the Dataset's code took
            captions.append(caption)
            took_another |= caption != "" and j != int(caption.rsplit(" ", 1)[-1])
    # Each sample is one of the split's: its own caption (its index in the dataset) or none.
    named = sorted(int(c.rsplit(" ", 1)[-1]) for c in captions if c)
    assert set(named) <= set(train.indices) and "" in captions
    assert took_another
