"""A user's own Dataset class that moves an image and its segmentation mask with torchvision's
functionals itself, as the PyTorch forum's most copied answer writes it (a method
`transform(self, image, mask)`: `resize = transforms.Resize(size)` given both,
`i, j, h, w = transforms.RandomCrop.get_params(image, output_size)` then `TF.crop` of both,
`if random.random() > 0.5:` `TF.hflip` of both, the same for `TF.vflip`, `TF.to_tensor` of
both): the images made natively, each mask read from its PNG and moved by the same steps
(resized by Pillow's nearest positions: a palette mask, which Pillow resizes by nearest
whatever the filter, or `InterpolationMode.NEAREST`; or, a grey mask given the shared
`Resize`, blended as Pillow's resize by its filter blends it), each sample's flips drawn by the
class's own code, run again for it with its draws seeded from (seed, epoch, index)."""

import json
import os
import random

import numpy as np
import pytest
import torch
import torch.utils.data as tud
import torchvision.transforms as transforms
import torchvision.transforms.functional as TF
from PIL import Image

from conftest import copy_photos, fallback_reason, native, resumed_after, same
from hpuload import _tail
from hpuload.torch import DataLoader, SkippedSampleWarning

NEAREST = transforms.InterpolationMode.NEAREST


def write_masks(images, out, kind):
    """A mask per image, of its size, in blocks of 3x3: palette indices 0-5 under a palette
    (`palette`; as GIFs, `gif`), or levels 0 and 255 as an 8-bit grey PNG (`grey`)."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(8)
    for path in images:
        w, h = Image.open(path).size
        blocks = rng.integers(0, 6 if kind == "palette" else 2, (h // 3 + 1, w // 3 + 1), dtype=np.uint8)
        values = np.kron(blocks, np.ones((3, 3), np.uint8))[:h, :w]
        if kind in ("palette", "gif"):
            mask = Image.fromarray(values, mode="L").convert("P")
            mask.putpalette([v for i in range(256) for v in ((i * 40) % 256, (i * 90) % 256, (i * 10) % 256)])
        else:
            mask = Image.fromarray(values * 255, mode="L")
        mask.save(out / (path.stem + (".gif" if kind == "gif" else ".png")))


@pytest.fixture(scope="module")
def root(jpeg_folder, tmp_path_factory):
    """Twelve photos with palette masks and grey masks."""
    root = tmp_path_factory.mktemp("joint")
    images = copy_photos(jpeg_folder, root / "images")
    write_masks(images, root / "palette", "palette")
    write_masks(images, root / "grey", "grey")
    write_masks(images, root / "gif", "gif")
    return root


class Joint(tud.Dataset):
    """The forum's Dataset, as written there but for its sizes (`masks`: the mask folder;
    `steps`: which of its moves it makes; `interpolation`: the mask's resize's, or the shared
    `Resize`; `convert`: how the mask is made a tensor)."""

    def __init__(self, root, masks="palette", steps=("resize", "crop", "flips"), interpolation=None, convert="to_tensor"):
        self.root, self.masks, self.steps, self.interpolation, self.convert = root, masks, steps, interpolation, convert
        self.names = sorted(os.listdir(os.path.join(root, "images")))

    def transform(self, image, mask):
        if "resize" in self.steps:
            resize = transforms.Resize(size=(52, 60))
            image = resize(image)
            mask = resize(mask) if self.interpolation is None else TF.resize(mask, [52, 60], interpolation=self.interpolation)
        if "crop" in self.steps:
            i, j, h, w = transforms.RandomCrop.get_params(image, output_size=(40, 48))
            image = TF.crop(image, i, j, h, w)
            mask = TF.crop(mask, i, j, h, w)
        if "centre" in self.steps:
            image, mask = TF.center_crop(image, [40, 48]), TF.center_crop(mask, [40, 48])
        if "flips" in self.steps:
            if random.random() > 0.5:
                image = TF.hflip(image)
                mask = TF.hflip(mask)
            if random.random() > 0.5:
                image = TF.vflip(image)
                mask = TF.vflip(mask)
        image = TF.to_tensor(image)
        if self.convert == "to_tensor":
            mask = TF.to_tensor(mask)
        elif self.convert == "pil_to_tensor":
            mask = TF.pil_to_tensor(mask)
        elif self.convert == "long":
            mask = torch.from_numpy(np.array(mask)).long()
        elif self.convert == "squeezed":
            mask = TF.to_tensor(mask).squeeze(0)
        elif self.convert == "scaled back":
            mask = (TF.to_tensor(mask) * 255).long()
        elif self.convert == "thresholded":
            mask = TF.to_tensor(mask)
            mask[mask > 0.5] = 1.0
            mask[mask <= 0.5] = 0.0
        elif self.convert == "indices":
            mask = TF.pil_to_tensor(mask).squeeze(0).long()
        return image, mask

    def __getitem__(self, index):
        name = self.names[index]
        image = Image.open(os.path.join(self.root, "images", name)).convert("RGB")
        if self.masks == "grey-made":
            mask = Image.open(os.path.join(self.root, "palette", name.replace(".jpg", ".png"))).convert("L")
        else:
            mask = Image.open(os.path.join(self.root, self.masks, name.replace(".jpg", ".gif" if self.masks == "gif" else ".png")))
        x, y = self.transform(image, mask)
        return x, y

    def __len__(self):
        return len(self.names)


def theirs(loader, ds, epoch, index, position=None):
    """`ds[index]` as the class's code makes it with hpuload's crop (its plan's window where
    `get_params` draws) and its own flips, drawn as hpuload seeds them for the sample (at the
    loader's `position`, where a Subset's differs from the index)."""
    position = index if position is None else position
    path = os.path.join(ds.root, "images", ds.names[index])
    w, h = Image.open(path).size
    plan = json.loads(loader._core.sample_plan(epoch, position, w, h))
    own = transforms.RandomCrop.get_params

    def crop_at(img, output_size):
        cut = plan.get("resized_crop")
        if cut is None:
            crop = plan["crop"]
            return int(crop["top"]), int(crop["left"]), *output_size
        return (*cut["at"], *output_size)

    transforms.RandomCrop.get_params = staticmethod(crop_at)
    try:
        with _tail.seeded_sample(loader._options.seed, epoch, position):
            return ds[index]
    finally:
        transforms.RandomCrop.get_params = staticmethod(own)


def each_sample(loader, ds, epochs=2):
    for epoch in range(epochs):
        for x, y in loader:
            for k, index in enumerate(loader.last_indices):
                yield epoch, index, x[k], y[k]


@pytest.mark.parametrize(
    "masks, interpolation, convert",
    [
        ("palette", None, "to_tensor"),
        ("palette", None, "long"),
        ("grey", NEAREST, "to_tensor"),
        ("grey", NEAREST, "pil_to_tensor"),
        ("grey-made", NEAREST, "long"),
        ("grey", None, "to_tensor"),
        ("grey-made", None, "long"),
        ("gif", None, "long"),
        ("grey", None, "squeezed"),
        ("palette", None, "scaled back"),
        ("grey", None, "thresholded"),
        ("palette", None, "indices"),
    ],
)
@pytest.mark.parametrize("shuffle", [False, True])
def test_the_forums_joint_transforms_give_each_sample_as_the_classs_code_makes_it_bit_for_bit(root, masks, interpolation, convert, shuffle):
    ds = Joint(root, masks, interpolation=interpolation, convert=convert)
    loader = native(ds, batch_size=4, shuffle=shuffle, backend="cpu", seed=7)
    flips = set()
    for epoch, index, x, y in each_sample(loader, ds):
        want_x, want_y = theirs(loader, ds, epoch, index)
        assert same(x, want_x) and same(y, want_y), (epoch, index)
        flips.add(drawn_flips(loader, epoch, index))
    assert flips == {(False, False), (True, False), (False, True), (True, True)}, "each flip, both and none, drawn"


def drawn_flips(loader, epoch, index):
    """The flips the class's code draws for the sample as hpuload seeds it (Python's
    generator, which nothing before the flips draws from)."""
    with _tail.seeded_sample(loader._options.seed, epoch, index):
        return random.random() > 0.5, random.random() > 0.5


@pytest.mark.parametrize("steps", [("resize", "flips"), ("crop", "flips"), ("resize", "centre", "flips"), ("resize", "crop")])
def test_each_move_the_forums_pattern_makes_moves_the_mask_as_its_image_bit_for_bit(root, steps):
    ds = Joint(root, "palette", steps=steps, convert="long")
    loader = native(ds, batch_size=4, backend="cpu")
    for epoch, index, x, y in each_sample(loader, ds, epochs=1):
        want_x, want_y = theirs(loader, ds, epoch, index)
        assert same(x, want_x) and same(y, want_y), (steps, index)


@pytest.mark.parametrize("how", ["collate_fn", "workers"])
def test_a_collate_fn_and_workers_get_the_samples_the_classs_code_makes(root, how):
    ds = Joint(root, "grey", interpolation=NEAREST)
    kwargs = {"collate_fn": lambda b: tuple(zip(*b))} if how == "collate_fn" else {"num_workers": 2}
    loader = native(ds, batch_size=4, backend="cpu", **kwargs)
    for x, y in loader:
        for k, index in enumerate(loader.last_indices):
            want_x, want_y = theirs(loader, ds, 0, index)
            assert same(x[k], want_x) and same(y[k], want_y), (how, index)


def test_the_media_engine_gives_the_images_within_their_floor_and_the_masks_exactly(root):
    ds = Joint(root, "palette", convert="long")
    cpu, engine = (native(ds, batch_size=4, backend=b, seed=5) for b in ("cpu", "auto"))
    for (x, y), (ex, ey) in zip(cpu, engine):
        assert torch.equal(y, ey)
        mse = ((x - ex) ** 2).mean().item()
        assert 10 * np.log10(1 / max(mse, 1e-12)) > 30  # PSNR over the [0, 1] range


def test_a_resumed_run_gives_the_same_images_and_masks(root):
    ds = Joint(root, "palette", convert="long")
    rest, resumed = resumed_after(lambda: native(ds, batch_size=4, shuffle=True, backend="cpu", seed=11), 1)
    assert len(rest) == len(resumed) == 2 and all(same(a, b) for a, b in zip(rest, resumed))


def test_a_damaged_mask_is_named_and_its_sample_replaced(root, tmp_path):
    copy = tmp_path / "set"
    for sub in ("images", "palette"):
        (copy / sub).mkdir(parents=True)
        for f in (root / sub).iterdir():
            (copy / sub / f.name).write_bytes(f.read_bytes())
    damaged = sorted((copy / "palette").iterdir())[3]
    damaged.write_bytes(damaged.read_bytes()[:60])
    ds = Joint(copy, "palette", convert="long")
    loader = native(ds, batch_size=4, backend="cpu")
    with pytest.warns(SkippedSampleWarning, match=damaged.name):
        batches = [(x, y, list(loader.last_indices)) for x, y in loader]
    assert sum(len(b[2]) for b in batches) == len(ds)
    for x, y, indices in batches:
        for k, index in enumerate(indices):
            assert index != 3
            want_x, want_y = theirs(loader, ds, 0, index)
            assert same(x[k], want_x) and same(y[k], want_y)


@pytest.mark.parametrize("mode", ["BICUBIC", "LANCZOS", "BOX", "HAMMING"])
def test_a_grey_mask_resized_by_another_of_pillows_filters_is_blended_as_pillow_blends_it(root, mode):
    """torchvision's `Resize` of a PIL mask is Pillow's resize by that filter: the blends at
    the mask's edges, bit for bit."""
    ds = Joint(root, "grey", interpolation=getattr(transforms.InterpolationMode, mode))
    loader = native(ds, batch_size=4, backend="cpu", seed=7)
    for epoch, index, x, y in each_sample(loader, ds, epochs=1):
        want_x, want_y = theirs(loader, ds, epoch, index)
        assert same(x, want_x) and same(y, want_y), (mode, index)


class FlipsOnlyTheImage(Joint):
    def transform(self, image, mask):
        image, mask = TF.resize(image, [40, 48]), TF.resize(mask, [40, 48], interpolation=NEAREST)
        if random.random() > 0.5:
            image = TF.hflip(image)
        return TF.to_tensor(image), TF.to_tensor(mask)


class CropsTheMaskElsewhere(Joint):
    def transform(self, image, mask):
        i, j, h, w = transforms.RandomCrop.get_params(image, output_size=(40, 48))
        return TF.to_tensor(TF.crop(image, i, j, h, w)), TF.to_tensor(TF.crop(mask, i + 1, j, h, w))


@pytest.mark.parametrize(
    "cls, reason",
    [
        (FlipsOnlyTheImage, "flips its image and its mask otherwise"),
        (CropsTheMaskElsewhere, "a crop of the image at"),
    ],
)
def test_a_mask_moved_otherwise_than_its_image_goes_to_torchs_loader_named(root, cls, reason):
    random.seed(3)  # the probe's calls draw from Python's generator as it stands
    said = fallback_reason(cls(root, "grey"), batch_size=4)
    assert reason in said, said


class WithATransformOfItsImage(Joint):
    """The joint moves in a method of another name, then the image alone given the class's
    transform (its colour and normalizing steps), as many scripts split them."""

    def __init__(self, root, transform):
        super().__init__(root, "palette", steps=("resize", "crop", "flips"), convert="long")
        self.image_transform = transform

    def __getitem__(self, index):
        name = self.names[index]
        image = Image.open(os.path.join(self.root, "images", name)).convert("RGB")
        mask = Image.open(os.path.join(self.root, "palette", name.replace(".jpg", ".png")))
        image, mask = self.joint(image, mask)
        return self.image_transform(image), mask

    def joint(self, image, mask):
        i, j, h, w = transforms.RandomCrop.get_params(image, output_size=(40, 48))
        image, mask = TF.crop(image, i, j, h, w), TF.crop(mask, i, j, h, w)
        if random.random() > 0.5:
            image, mask = TF.hflip(image), TF.hflip(mask)
        return image, torch.from_numpy(np.array(mask)).long()


def test_a_transform_of_the_image_alone_after_the_joint_moves_runs_natively_bit_for_bit(root):
    normalize = transforms.Compose([transforms.ToTensor(), transforms.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])])
    ds = WithATransformOfItsImage(root, normalize)
    loader = native(ds, batch_size=4, backend="cpu")
    for epoch, index, x, y in each_sample(loader, ds, epochs=1):
        want_x, want_y = theirs(loader, ds, epoch, index)
        assert same(x, want_x) and same(y, want_y), index


def test_a_transform_of_the_image_alone_that_moves_it_goes_to_torchs_loader_named(root):
    ds = WithATransformOfItsImage(root, transforms.Compose([transforms.RandomRotation(10), transforms.ToTensor()]))
    said = fallback_reason(ds, batch_size=4)
    assert "flips its image by a draw before its transform" in said, said
    ds.joint = lambda image, mask: (TF.center_crop(image, [40, 48]), TF.pil_to_tensor(TF.center_crop(mask, [40, 48])))
    said = fallback_reason(ds, batch_size=4)
    assert "RandomRotation in the image's transform" in said, said


class StepsInAMethod(tud.Dataset):
    """An image-only class whose method `transform(self, image)` runs the torchvision
    transform it holds: its own code, not a transform to stand in for."""

    def __init__(self, root):
        self.root = root
        self.names = sorted(os.listdir(os.path.join(root, "images")))
        self.tf = transforms.Compose([transforms.Resize(40), transforms.CenterCrop(36), transforms.ToTensor()])

    def transform(self, image):
        return self.tf(image)

    def __getitem__(self, index):
        image = Image.open(os.path.join(self.root, "images", self.names[index])).convert("RGB")
        return self.transform(image), index % 3

    def __len__(self):
        return len(self.names)


def test_a_transform_method_of_the_class_runs_as_its_code_natively_bit_for_bit(root):
    ds = StepsInAMethod(root)
    loader = native(ds, batch_size=4, backend="cpu")
    for x, y in loader:
        for k, index in enumerate(loader.last_indices):
            want_x, want_y = ds[index]
            assert same(x[k], want_x) and y[k].item() == want_y


class FlipsOnlyTheMask(Joint):
    def transform(self, image, mask):
        image, mask = TF.resize(image, [40, 48]), TF.resize(mask, [40, 48], interpolation=NEAREST)
        return TF.to_tensor(image), TF.to_tensor(TF.hflip(mask))


def test_a_mask_flipped_where_its_image_is_not_goes_to_torchs_loader_named(root):
    said = fallback_reason(FlipsOnlyTheMask(root, "grey"), batch_size=4)
    assert "flips its image and its mask otherwise" in said, said


class HoldsItsTransforms(Joint):
    """The joint moves by transforms the class holds (`self.resize(image)`,
    `self.resize(mask)`), as many scripts hold them, then the image's own conversions."""

    def __init__(self, root):
        super().__init__(root, "grey")
        self.resize = transforms.Resize((52, 60))
        self.to_tensor = transforms.ToTensor()
        self.normalize = transforms.Normalize([0.5, 0.4, 0.3], [0.2, 0.25, 0.3])

    def transform(self, image, mask):
        image, mask = self.resize(image), self.resize(mask)
        i, j, h, w = transforms.RandomCrop.get_params(image, (40, 48))
        image, mask = TF.crop(image, i, j, h, w), TF.crop(mask, i, j, h, w)
        if random.random() < 0.5:
            image, mask = TF.vflip(image), TF.vflip(mask)
        return self.normalize(self.to_tensor(image)), self.to_tensor(mask)


def test_transforms_the_class_holds_given_the_image_and_its_mask_move_both_bit_for_bit(root):
    ds = HoldsItsTransforms(root)
    loader = native(ds, batch_size=4, backend="cpu", seed=2)
    for epoch, index, x, y in each_sample(loader, ds):
        want_x, want_y = theirs(loader, ds, epoch, index)
        assert same(x, want_x) and same(y, want_y), (epoch, index)


def test_a_random_split_of_the_class_gives_each_sample_as_its_code_makes_it(root):
    """`random_split`'s Subsets (a training script's split): each sample at its position in
    the Subset, its crop and draws the loader's for that position."""
    ds = Joint(root, "palette", convert="long")
    train, _ = tud.random_split(ds, [8, 4], generator=torch.Generator().manual_seed(1))
    loader = native(train, batch_size=4, shuffle=True, backend="cpu", seed=4)
    seen = []
    for epoch in range(2):
        for x, y in loader:
            for k, position in enumerate(loader.last_indices):
                index = train.indices[position]
                want_x, want_y = theirs(loader, ds, epoch, index, position)
                assert same(x[k], want_x) and same(y[k], want_y), (epoch, position)
                seen.append(index)
    assert sorted(set(seen)) == sorted(train.indices)


def test_masks_the_class_reads_from_elsewhere_after_an_epoch_are_read_from_there(root):
    """The class's mask folder changed after the first epoch: the second epoch's samples, each
    run of the class's code opening another mask than probed, are made by its own code; the
    third epoch's, after the loader probes every index again, natively, bit for bit."""
    ds = Joint(root, "palette", convert="long")
    loader = native(ds, batch_size=4, backend="cpu", seed=6)
    first = [y for _, y in loader]
    assert max(int(y.max()) for y in first) <= 5  # palette indices
    ds.masks = "grey"  # levels 0 and 255, blended by the shared bilinear resize
    second = [y for _, y in loader]
    assert all(int(y.max()) > 5 for y in second)
    for x, y in loader:
        for k, index in enumerate(loader.last_indices):
            want_x, want_y = theirs(loader, ds, 2, index)
            assert same(x[k], want_x) and same(y[k], want_y), index
