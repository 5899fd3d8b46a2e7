"""A user's Dataset whose `__getitem__` returns a dict of the image and other values than an
integer label: diffusers' DreamBooth script (the image, the prompt's token ids and attention
mask), and the hand-written image-text Datasets like it (a caption, a score). The values beside
the image are read while probing and handed out as the Dataset gives them; the image is
decoded and transformed natively."""

import random
import warnings

import pytest
import torch
import torch.utils.data as tud
from PIL import Image
from PIL.ImageOps import exif_transpose
from torchvision import transforms as T

from hpuload.torch import DataLoader, FallbackWarning


def tokenize_prompt(prompt, length=16):
    """A stand-in for the script's tokenizer (no vocabulary offline): ids and a mask, `[1, length]`."""
    ids = [ord(c) % 97 for c in prompt[:length]] + [0] * (length - len(prompt[:length]))
    return torch.tensor([ids]), torch.tensor([[int(i != 0) for i in ids]])


class DreamBoothDataset(tud.Dataset):
    """`train_dreambooth.py`'s Dataset without prior preservation, as it is written there."""

    def __init__(self, instance_images, instance_prompt, size=32, center_crop=True):
        self.instance_images_path = list(instance_images)
        self.num_instance_images = len(self.instance_images_path)
        self.instance_prompt = instance_prompt
        self._length = self.num_instance_images
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
        return example


def dreambooth_collate(examples):
    """`train_dreambooth.py`'s `collate_fn` without prior preservation."""
    input_ids = [example["instance_prompt_ids"] for example in examples]
    pixel_values = [example["instance_images"] for example in examples]
    attention_mask = [example["instance_attention_mask"] for example in examples]
    pixel_values = torch.stack(pixel_values)
    pixel_values = pixel_values.to(memory_format=torch.contiguous_format).float()
    return {"input_ids": torch.cat(input_ids, dim=0), "pixel_values": pixel_values, "attention_mask": torch.cat(attention_mask, dim=0)}


@pytest.fixture
def photos(jpeg_folder, tmp_path):
    files = sorted(jpeg_folder.rglob("*.jpg"))[:9]
    grey = tmp_path / "grey.jpg"
    Image.open(files[0]).convert("L").save(grey)
    return [*files[1:], grey]


def test_dreambooths_dataset_runs_natively_with_torchs_batches(photos):
    ds = DreamBoothDataset(photos, "a photo of sks dog")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = DataLoader(ds, batch_size=3, collate_fn=dreambooth_collate, num_workers=2, backend="cpu")
    theirs = tud.DataLoader(ds, batch_size=3, collate_fn=dreambooth_collate)
    n = 0
    for a, b in zip(ours, theirs, strict=True):
        assert list(a) == list(b)
        assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["attention_mask"], b["attention_mask"])
        assert a["pixel_values"].shape == (3, 3, 32, 32)
        # The grey photo made RGB by the Dataset's own code; the CPU path's resize: one level.
        assert (a["pixel_values"] - b["pixel_values"]).abs().max() <= 2 / 255 + 1e-6
        n += 1
    assert n == 3


class Captioned(tud.Dataset):
    """A hand-written image-text Dataset: the image, its caption, a score and token ids."""

    def __init__(self, files, transform, draw=False):
        self.files, self.transform, self.draw = files, transform, draw

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        image = self.transform(Image.open(self.files[i]).convert("RGB"))
        # Drawn from 1,000 captions: two calls agree on all nine indices about never.
        caption = f"photo {i}" if not self.draw else f"picture {i} of {random.randrange(1000)}"
        ids, _ = tokenize_prompt(caption, 8)
        return {"caption": caption, "pixel_values": image, "score": i / 10, "ids": ids[0], "label": i % 2}


def test_a_dict_of_values_beside_the_image_collates_as_torchs_default_collate(photos):
    ds = Captioned(photos, T.Compose([T.Resize((24, 24)), T.PILToTensor()]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = DataLoader(ds, batch_size=4, backend="cpu")
    theirs = tud.DataLoader(ds, batch_size=4)
    for a, b in zip(ours, theirs, strict=True):
        assert list(a) == ["caption", "pixel_values", "score", "ids", "label"]
        assert a["caption"] == b["caption"]
        for key in ("score", "ids", "label"):
            assert a[key].dtype == b[key].dtype and torch.equal(a[key], b[key]), key
        assert a["pixel_values"].dtype == torch.uint8 and (a["pixel_values"].int() - b["pixel_values"].int()).abs().max() <= 1


class NotesSizes(tud.Dataset):
    """Notes each image's size as SDXL scripts note it (`(image.height, image.width)`), and
    `image.size` after a resize to one size (`resize`), beside the transformed image."""

    def __init__(self, files, resize=None):
        self.files, self.resize = files, resize
        self.transform = T.Compose([T.CenterCrop(24), T.PILToTensor()])

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        image = Image.open(self.files[i])
        if not image.mode == "RGB":
            image = image.convert("RGB")
        original = (image.height, image.width)
        if self.resize:
            image = image.resize(self.resize)
        return {"pixel_values": self.transform(image), "original_size": original, "size": image.size}


@pytest.mark.parametrize("resize", [None, (40, 30)], ids=["as_stored", "resized"])
def test_the_sizes_a_dataset_reads_off_its_images_are_the_files_own_natively(photos, resize):
    ds = NotesSizes(photos, resize)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = DataLoader(ds, batch_size=4, backend="cpu")
    theirs = tud.DataLoader(ds, batch_size=4)
    sizes = set()
    for a, b in zip(ours, theirs, strict=True):
        for key in ("original_size", "size"):
            assert all(torch.equal(x, y) for x, y in zip(a[key], b[key], strict=True)), key
        sizes |= {tuple(v) for v in zip(*(t.tolist() for t in a["original_size"]))}
        assert (a["pixel_values"].int() - b["pixel_values"].int()).abs().max() <= 1
    assert len(sizes) > 1  # the files' own sizes, not one size for all


def test_a_dict_whose_values_beside_the_image_change_between_calls_draws_them_for_each_sample(photos):
    ds = Captioned(photos, T.Compose([T.Resize((24, 24)), T.ToTensor()]), draw=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=4, backend="cpu")
    epochs = [[b["caption"] for b in loader] for _ in range(2)]
    for captions in epochs:
        flat = [c for batch in captions for c in batch]
        # The class's own code ran for each sample: its index's caption, a number drawn.
        assert [c.split(" of ")[0] for c in flat] == [f"picture {i}" for i in range(len(ds))]
    assert epochs[0] != epochs[1]
    theirs = next(iter(tud.DataLoader(ds, batch_size=4)))
    ours = next(iter(loader))
    for key in ("score", "label", "pixel_values"):
        assert ours[key].shape == theirs[key].shape and ours[key].dtype == theirs[key].dtype
    assert torch.equal(ours["ids"][0], tokenize_prompt(ours["caption"][0], 8)[0][0])


def test_a_dict_whose_values_would_fill_memory_for_every_sample_goes_to_torch(photos, monkeypatch):
    from hpuload import _probe

    monkeypatch.setattr(_probe, "_MOST_HELD_ELEMENTS", 20)  # the token ids of a few samples
    ds = DreamBoothDataset(photos, "a photo of sks dog")
    with pytest.warns(FallbackWarning, match=r"values beside the image that hpuload would hold for every sample"):
        loader = DataLoader(ds, batch_size=3, collate_fn=dreambooth_collate)
    assert not isinstance(loader, DataLoader)


class Tokenized(tud.Dataset):
    """A hand-written CLIP-style Dataset returning `(image, token ids, attention mask)`."""

    def __init__(self, files, transform):
        self.files, self.transform = files, transform

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        image = self.transform(Image.open(self.files[i]).convert("RGB"))
        ids, mask = tokenize_prompt(f"a photo, number {i}", 12)
        return image, ids[0], mask[0]


@pytest.mark.parametrize("collate", [None, "own"])
def test_a_tuple_of_the_image_and_token_tensors_runs_natively_as_torch_gives_it(photos, collate):
    def own(batch):
        images, ids, masks = zip(*batch)
        return torch.stack(images), torch.stack(ids), torch.stack(masks)

    ds = Tokenized(photos, T.Compose([T.Resize((24, 24)), T.PILToTensor()]))
    kw = {} if collate is None else {"collate_fn": own}
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = DataLoader(ds, batch_size=4, backend="cpu", **kw)
    for a, b in zip(ours, tud.DataLoader(ds, batch_size=4, **kw), strict=True):
        assert type(a) is type(b) and len(a) == 3
        assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2]) and a[1].shape == (len(a[1]), 12)
        assert (a[0].int() - b[0].int()).abs().max() <= 1


def test_output_pair_over_dicts_of_more_than_an_image_and_a_label_is_refused_naming_the_keys(photos):
    ds = Captioned(photos, T.Compose([T.Resize((24, 24)), T.PILToTensor()]))
    with pytest.raises(ValueError, match=r"output='pair': the dataset's samples are dicts of \['caption', 'pixel_values'"):
        DataLoader(ds, batch_size=4, output="pair")
