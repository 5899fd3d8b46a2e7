"""A user's Dataset whose samples hold two images from two files: diffusers' and
optimum-habana's `train_dreambooth.py` with prior preservation (each sample an instance image
and a class image, both through the Dataset's one transform, with their prompts' token ids).
Each image is decoded and transformed natively by a loader of its own, in step."""

import warnings

import pytest
import torch
import torch.utils.data as tud
from PIL import Image
from PIL.ImageOps import exif_transpose
from torchvision import transforms as T

from hpuload.torch import DataLoader, FallbackWarning, SkippedSampleWarning


def tokenize_prompt(prompt, length=16):
    """A stand-in for the script's tokenizer (no vocabulary offline): ids and a mask, `[1, length]`."""
    ids = [ord(c) % 97 for c in prompt[:length]] + [0] * (length - len(prompt[:length]))
    return torch.tensor([ids]), torch.tensor([[int(i != 0) for i in ids]])


class DreamBoothDataset(tud.Dataset):
    """`train_dreambooth.py`'s Dataset with prior preservation (a class data root), as it is
    written there."""

    def __init__(self, instance_images, instance_prompt, class_images, class_prompt, size=32, center_crop=True):
        self.instance_images_path = list(instance_images)
        self.num_instance_images = len(self.instance_images_path)
        self.instance_prompt = instance_prompt
        self._length = self.num_instance_images
        self.class_images_path = list(class_images)
        self.num_class_images = len(self.class_images_path)
        self._length = max(self.num_class_images, self.num_instance_images)
        self.class_prompt = class_prompt
        self.image_transforms = T.Compose(
            [
                T.Resize(size, interpolation=T.InterpolationMode.BILINEAR),
                T.CenterCrop(size) if center_crop else T.RandomCrop(size),
                T.ToTensor(),
                T.Normalize([0.5], [0.5]),
            ]
        )

    def __len__(self):
        return self._length

    def __getitem__(self, index):
        example = {}
        instance_image = Image.open(self.instance_images_path[index % self.num_instance_images])
        instance_image = exif_transpose(instance_image)
        if not instance_image.mode == "RGB":
            instance_image = instance_image.convert("RGB")
        example["instance_images"] = self.image_transforms(instance_image)
        ids, mask = tokenize_prompt(self.instance_prompt)
        example["instance_prompt_ids"] = ids
        example["instance_attention_mask"] = mask
        class_image = Image.open(self.class_images_path[index % self.num_class_images])
        class_image = exif_transpose(class_image)
        if not class_image.mode == "RGB":
            class_image = class_image.convert("RGB")
        example["class_images"] = self.image_transforms(class_image)
        ids, mask = tokenize_prompt(self.class_prompt)
        example["class_prompt_ids"] = ids
        example["class_attention_mask"] = mask
        return example


def collate_fn(examples, with_prior_preservation=True):
    """`train_dreambooth.py`'s `collate_fn`."""
    input_ids = [example["instance_prompt_ids"] for example in examples]
    pixel_values = [example["instance_images"] for example in examples]
    attention_mask = [example["instance_attention_mask"] for example in examples]
    if with_prior_preservation:
        input_ids += [example["class_prompt_ids"] for example in examples]
        pixel_values += [example["class_images"] for example in examples]
        attention_mask += [example["class_attention_mask"] for example in examples]
    pixel_values = torch.stack(pixel_values)
    pixel_values = pixel_values.to(memory_format=torch.contiguous_format).float()
    return {"input_ids": torch.cat(input_ids, dim=0), "pixel_values": pixel_values, "attention_mask": torch.cat(attention_mask, dim=0)}


@pytest.fixture
def images(jpeg_folder):
    files = sorted(jpeg_folder.rglob("*.jpg"))
    return files[:5], files[5:17]  # 5 instance images, 12 class images: 12 samples


def native(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        return DataLoader(*args, **kwargs)


def test_dreambooth_with_prior_preservation_runs_natively_with_torchs_batches(images):
    ds = DreamBoothDataset(images[0], "a photo of sks dog", images[1], "a photo of a dog")
    ours = native(ds, batch_size=4, collate_fn=lambda e: collate_fn(e, True), num_workers=2, backend="cpu")
    theirs = tud.DataLoader(ds, batch_size=4, collate_fn=lambda e: collate_fn(e, True))
    n = 0
    for a, b in zip(ours, theirs, strict=True):
        assert list(a) == list(b)
        assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["attention_mask"], b["attention_mask"])
        assert a["pixel_values"].shape == (8, 3, 32, 32)
        # The CPU path's bilinear resize against Pillow's: one level at most.
        assert (a["pixel_values"] - b["pixel_values"]).abs().max() <= 2 / 255 + 1e-6
        n += 1
    assert n == 3


def test_dreambooth_without_a_collate_fn_gives_default_collates_dict_of_both_images(images):
    ds = DreamBoothDataset(images[0], "a photo of sks dog", images[1], "a photo of a dog")
    ours = native(ds, batch_size=4, backend="cpu")
    for a, b in zip(ours, tud.DataLoader(ds, batch_size=4), strict=True):
        assert list(a) == list(b)
        for key in a:
            assert a[key].shape == b[key].shape and a[key].dtype == b[key].dtype, key
            assert (a[key] - b[key]).abs().max() <= 2 / 255 + 1e-6, key


def test_each_image_of_a_sample_draws_its_own_random_crop(images):
    """The instance and the class image are the same photo: with RandomCrop each is cropped
    by a draw of its own, as torch's transform draws them in turn."""
    ds = DreamBoothDataset(images[1], "sks", images[1], "dog")
    ds.image_transforms = T.Compose([T.Resize(48), T.RandomCrop(16), T.ToTensor()])
    same = 0
    for batch in native(ds, batch_size=4, backend="cpu", shuffle=True):
        same += sum(torch.equal(a, b) for a, b in zip(batch["instance_images"], batch["class_images"]))
    assert same <= 3  # of 12: a shared draw would make every pair equal


def test_a_damaged_class_image_is_named_and_its_sample_replaced_whole(images, tmp_path):
    """Sample 4's class image is damaged and its instance image is not: the class images'
    loader names it, and its slot holds one sample's two images (the same photo twice here),
    never one index's instance image beside another's class image."""
    photos = images[1][:8]
    damaged = tmp_path / "damaged.jpg"
    damaged.write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    ds = DreamBoothDataset(photos, "sks", [*photos[:4], damaged, *photos[5:]], "dog")
    with pytest.warns(SkippedSampleWarning, match=r"sample 4 \(.*damaged\.jpg\)"):
        batches = list(native(ds, batch_size=4, backend="cpu"))
    assert len(batches) == 2
    for batch in batches:
        assert torch.equal(batch["instance_images"], batch["class_images"])


def test_a_dataset_whose_two_images_are_held_differently_goes_to_torch_naming_it(images):
    class Unequal(DreamBoothDataset):
        def __getitem__(self, index):
            example = super().__getitem__(index)
            class_image = Image.open(self.class_images_path[index % self.num_class_images])
            example["class_images"] = self.image_transforms(class_image)  # no convert: its own mode
            return example

    ds = Unequal(images[0], "sks", images[1], "dog")
    with pytest.warns(FallbackWarning, match=r"images 'instance_images' and 'class_images' otherwise"):
        DataLoader(ds, batch_size=4)


def test_a_transform_reassigned_between_epochs_applies_to_both_images(images):
    ds = DreamBoothDataset(images[0], "sks", images[1], "dog")
    loader = native(ds, batch_size=4, backend="cpu")
    assert [tuple(b["class_images"].shape) for b in loader] == [(4, 3, 32, 32)] * 3
    ds.image_transforms = T.Compose([T.Resize(20), T.CenterCrop(20), T.ToTensor()])
    for a, b in zip(loader, tud.DataLoader(ds, batch_size=4), strict=True):
        for key in ("instance_images", "class_images"):
            assert a[key].shape == b[key].shape == (4, 3, 20, 20), key
            assert (a[key] - b[key]).abs().max() <= 1 / 255 + 1e-6, key


def test_a_random_split_of_dreambooth_with_prior_preservation_runs_natively(images):
    ds = DreamBoothDataset(images[0], "sks", images[1], "dog")
    part, _ = tud.random_split(ds, [8, 4], generator=torch.Generator().manual_seed(1))
    ours = native(part, batch_size=4, backend="cpu")
    for a, b in zip(ours, tud.DataLoader(part, batch_size=4), strict=True):
        for key in ("instance_images", "class_images"):
            assert (a[key] - b[key]).abs().max() <= 2 / 255 + 1e-6, key


@pytest.mark.parametrize("where", ["thread", "processes"])
def test_a_transform_ending_in_python_steps_runs_them_on_each_image(images, where):
    """A Lambda after the native steps (a Python tail) runs on both images of each sample,
    in the iterating thread or in the worker processes (each step's batches in flight at
    once), each image's draws its own."""
    from hpuload import _tail
    from hpuload.torch import PythonTailWarning

    ds = DreamBoothDataset(images[0], "sks", images[1], "dog")
    ds.image_transforms = T.Compose([T.Resize(24), T.CenterCrop(24), T.ToTensor(), T.Lambda(lambda x: x * 2 - 1)])
    with pytest.warns(PythonTailWarning):
        ours = native(ds, batch_size=4, collate_fn=lambda e: collate_fn(e, True), num_workers=2, backend="cpu")
    place = _tail.Placement(ours.num_workers)
    place.where, place.measured = where, (0.0, 0.0)
    ours._tail_place = place
    for _ in range(2):  # the second epoch reuses the processes' buffers
        for a, b in zip(ours, tud.DataLoader(ds, batch_size=4, collate_fn=lambda e: collate_fn(e, True)), strict=True):
            assert a["pixel_values"].shape == (8, 3, 24, 24)
            assert (a["pixel_values"] - b["pixel_values"]).abs().max() <= 2 / 255 + 1e-6
    same = DreamBoothDataset(images[1], "sks", images[1], "dog")
    same.image_transforms = T.Compose([T.Resize(24), T.CenterCrop(24), T.ToTensor(), T.Lambda(lambda x: x + torch.rand(1))])
    with pytest.warns(PythonTailWarning):
        batches = list(native(same, batch_size=4, backend="cpu"))
    for batch in batches:
        shift = batch["class_images"] - batch["instance_images"]  # each sample's two draws apart
        assert all(s.abs().max() > 1e-4 for s in shift)
