"""diffusers' `train_instruct_pix2pix.py` (and its SDXL and LoRA copies): a table of an original
image, an edit prompt and an edited image per row, whose `with_transform` function resizes each
image with Pillow itself, stacks both columns' arrays, makes them `2 * (x / 255) - 1` and hands
the stack to one `Compose` of a crop and a flip, once per batch. hpuload makes each column
natively (`_hf_joint`), every image of a batch cut and flipped alike, as the function does."""

import numpy as np
import pytest
import torch

datasets = pytest.importorskip("datasets")

from hpuload.torch import DataLoader, FallbackWarning, SkippedSampleWarning  # noqa: E402
from test_hf_image_pairs import files, native, table, tokenize  # noqa: E402,F401 - files: the fixture
from torchvision import transforms  # noqa: E402

KEYS = ["original_pixel_values", "edited_pixel_values", "input_ids"]


def pix2pix_functions(resolution, center_crop=True, random_flip=False, concatenated=False, steps=None, make=None):
    """The script's `preprocess_train` and `collate_fn` as written there, over the ControlNet
    table's columns (`image` the original, `conditioning_image` the edited one, `text` the
    prompt). `concatenated`: the forks' `np.concatenate` and `chunk(2)` for `np.stack` and
    unpacking; `steps`: another transform's steps; `make`: another `convert_to_np`."""

    def convert_to_np(image, resolution):
        image = image.convert("RGB").resize((resolution, resolution))
        return np.array(image).transpose(2, 0, 1)

    convert = make or convert_to_np
    train_transforms = transforms.Compose(
        steps
        or [
            transforms.CenterCrop(resolution) if center_crop else transforms.RandomCrop(resolution),
            transforms.RandomHorizontalFlip() if random_flip else transforms.Lambda(lambda x: x),
        ]
    )

    def preprocess_images(examples):
        original_images = np.concatenate([convert(image, resolution) for image in examples["image"]])
        edited_images = np.concatenate([convert(image, resolution) for image in examples["conditioning_image"]])
        # Both images of a row must undergo the same augmentation.
        join = np.concatenate if concatenated else np.stack
        images = join([original_images, edited_images])
        images = torch.tensor(images)
        images = 2 * (images / 255) - 1
        return train_transforms(images)

    def preprocess_train(examples):
        preprocessed_images = preprocess_images(examples)
        if concatenated:
            original_images, edited_images = preprocessed_images.chunk(2)
        else:
            original_images, edited_images = preprocessed_images
        original_images = original_images.reshape(-1, 3, resolution, resolution)
        edited_images = edited_images.reshape(-1, 3, resolution, resolution)
        examples["original_pixel_values"] = original_images
        examples["edited_pixel_values"] = edited_images
        examples["input_ids"] = tokenize(list(examples["text"]))
        return examples

    def collate_fn(examples):
        original_pixel_values = torch.stack([example["original_pixel_values"] for example in examples])
        original_pixel_values = original_pixel_values.to(memory_format=torch.contiguous_format).float()
        edited_pixel_values = torch.stack([example["edited_pixel_values"] for example in examples])
        edited_pixel_values = edited_pixel_values.to(memory_format=torch.contiguous_format).float()
        input_ids = torch.stack([example["input_ids"] for example in examples])
        return {
            "original_pixel_values": original_pixel_values,
            "edited_pixel_values": edited_pixel_values,
            "input_ids": input_ids,
        }

    return preprocess_train, collate_fn


def falls_back(ds, collate_fn, match):
    with pytest.warns(FallbackWarning, match=match):
        loader = DataLoader(ds, batch_size=4, collate_fn=collate_fn, backend="cpu")
    assert isinstance(loader, torch.utils.data.DataLoader)


def torchs(ds, collate_fn, **kwargs):
    return list(torch.utils.data.DataLoader(ds, collate_fn=collate_fn, **kwargs))


@pytest.mark.parametrize("concatenated", [False, True])
def test_instruct_pix2pix_loader_runs_natively_with_torchs_batches_on_the_cpu_path(files, tmp_path, concatenated):
    preprocess_train, collate_fn = pix2pix_functions(32, concatenated=concatenated)
    ds = table(files, tmp_path).with_transform(preprocess_train)
    ours = list(native(ds, batch_size=4, collate_fn=collate_fn, num_workers=2, backend="cpu"))
    theirs = torchs(ds, collate_fn, batch_size=4)
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs, strict=True):
        assert list(a) == list(b) == KEYS
        for key in a:
            assert a[key].shape == b[key].shape and a[key].dtype == b[key].dtype
            assert torch.equal(a[key], b[key]), key


def test_a_random_flip_mirrors_each_batch_whole_both_columns_alike(files, tmp_path):
    """The function flips its whole stack at once: every image of a torch batch is mirrored or
    none is. hpuload's batches are torch's, each mirrored whole or not, and both happen."""
    preprocess_train, collate_fn = pix2pix_functions(24, center_crop=False, random_flip=True)
    ds = table(files, tmp_path).with_transform(preprocess_train)
    seen = set()
    for epoch in range(3):
        ours = native(ds, batch_size=2, collate_fn=collate_fn, backend="cpu", seed=epoch)
        # Unflipped torch batches: the same function without its flip.
        plain, _ = pix2pix_functions(24, center_crop=False)
        for a, b in zip(ours, torchs(table(files, tmp_path / f"e{epoch}").with_transform(plain), collate_fn, batch_size=2), strict=True):
            assert torch.equal(a["input_ids"], b["input_ids"])
            pixels = ("original_pixel_values", "edited_pixel_values")
            if all(torch.equal(a[k], b[k]) for k in pixels):
                seen.add("plain")
            else:
                assert all(torch.equal(a[k], b[k].flip(-1)) for k in pixels), "a batch mirrored whole"
                seen.add("mirrored")
    assert seen == {"plain", "mirrored"}


def test_an_instruct_pix2pix_loader_on_the_media_engine_stays_close_to_torchs(files, tmp_path):
    preprocess_train, collate_fn = pix2pix_functions(32)
    ds = table(files, tmp_path).with_transform(preprocess_train)
    for a, b in zip(native(ds, batch_size=4, collate_fn=collate_fn), torchs(ds, collate_fn, batch_size=4), strict=True):
        assert torch.equal(a["input_ids"], b["input_ids"])
        for key in KEYS[:2]:
            mse = float(((a[key] - b[key]) ** 2).mean())
            assert mse == 0 or 10 * np.log10(4.0 / mse) > 30, key


def test_an_instruct_pix2pix_loader_resumes_exactly_mid_epoch(files, tmp_path):
    from conftest import resumed_after

    preprocess_train, collate_fn = pix2pix_functions(20, center_crop=False, random_flip=True)
    ds = table(files, tmp_path).with_transform(preprocess_train)

    def loader():
        return native(ds, batch_size=2, collate_fn=collate_fn, shuffle=True, seed=9, backend="cpu")

    rest, resumed = resumed_after(loader, 2)
    for a, b in zip(rest, resumed, strict=True):
        for key in a:
            assert torch.equal(a[key], b[key]), key


def test_the_script_written_inline_without_its_helper_runs_natively(files, tmp_path):
    """The function itself resizes, stacks and hands the stack to the `Compose` (the forks
    that inline `preprocess_images`): the same batches as torch's."""
    flip = transforms.Compose([transforms.RandomCrop(24), transforms.RandomHorizontalFlip(1.0)])

    def preprocess_train(examples):
        original = np.concatenate([np.array(im.convert("RGB").resize((24, 24))).transpose(2, 0, 1) for im in examples["image"]])
        edited = np.concatenate([np.array(im.convert("RGB").resize((24, 24))).transpose(2, 0, 1) for im in examples["conditioning_image"]])
        images = flip(2 * (torch.tensor(np.stack([original, edited])) / 255) - 1)
        examples["original_pixel_values"] = images[0].reshape(-1, 3, 24, 24)
        examples["edited_pixel_values"] = images[1].reshape(-1, 3, 24, 24)
        examples["input_ids"] = tokenize(list(examples["text"]))
        return examples

    _, collate_fn = pix2pix_functions(24)
    ds = table(files, tmp_path).with_transform(preprocess_train)
    ours = list(native(ds, batch_size=4, collate_fn=collate_fn, backend="cpu"))
    for a, b in zip(ours, torchs(ds, collate_fn, batch_size=4), strict=True):
        for key in KEYS:
            assert torch.equal(a[key], b[key]), key


def test_a_function_without_a_transform_that_makes_its_tensors_itself_runs_natively(files, tmp_path):
    """One image column, resized by Pillow with Lanczos and made a uint8 tensor by the function's own arithmetic, no torchvision object reached at all."""
    from PIL import Image

    def preprocess(examples):
        arrays = [np.array(im.convert("RGB").resize((28, 20), Image.LANCZOS)) for im in examples["image"]]
        examples["pixels"] = [torch.from_numpy(a).permute(2, 0, 1).contiguous() for a in arrays]
        examples["n"] = [len(t) for t in examples["text"]]
        return examples

    def collate(examples):
        return {"pixels": torch.stack([e["pixels"] for e in examples]), "n": [e["n"] for e in examples]}

    ds = table(files, tmp_path).remove_columns(["conditioning_image"]).with_transform(preprocess)
    ours = list(native(ds, batch_size=4, collate_fn=collate, backend="cpu"))
    for a, b in zip(ours, torchs(ds, collate, batch_size=4), strict=True):
        assert a["pixels"].dtype == torch.uint8 and a["pixels"].shape == (4, 3, 20, 28)
        assert torch.equal(a["pixels"], b["pixels"]) and a["n"] == b["n"]


def test_a_damaged_edited_image_is_named_and_its_sample_replaced_whole(files, tmp_path):
    """Row 5's edited image is damaged and its original is not: the edited images' loader
    names and replaces it, and the sample in its slot is one row's original and edited image
    both (the dataset's own sample of the row its prompt names), never a mix of two rows."""
    preprocess_train, collate_fn = pix2pix_functions(24)
    ds = table(files, tmp_path, damaged={5}).with_transform(preprocess_train)
    with pytest.warns(SkippedSampleWarning, match=r"sample 5 \(.*row 5, column 'conditioning_image'\)"):
        batches = list(native(ds, batch_size=4, collate_fn=collate_fn, backend="cpu"))
    assert len(batches) == 3
    # The stand-in tokenizer keeps 16 characters: "a photo number 1" is rows 1, 10 and 11.
    rows = {k: tokenize([f"a photo number {k} of a thing"])[0] for k in range(12)}
    for batch in batches:
        for i, ids in enumerate(batch["input_ids"]):
            named = [k for k, row_ids in rows.items() if torch.equal(ids, row_ids)]
            assert 5 not in named
            assert any(
                torch.equal(batch["original_pixel_values"][i], ds[k]["original_pixel_values"])
                and torch.equal(batch["edited_pixel_values"][i], ds[k]["edited_pixel_values"])
                for k in named
            )


def test_functions_that_do_otherwise_go_to_torch_naming_why(files, tmp_path):
    ds = table(files, tmp_path)

    def fn(**kwargs):
        preprocess_train, collate_fn = pix2pix_functions(24, **kwargs)
        return ds.with_transform(preprocess_train), collate_fn

    falls_back(*fn(steps=[transforms.CenterCrop(24), transforms.ColorJitter(0.4)]), "hands its images' tensors to ColorJitter")
    falls_back(*fn(steps=[transforms.Lambda(lambda x: x.clamp(-0.5, 0.5))]), "a Lambda that changes them")

    def sized(image, resolution):
        return np.array(image.convert("RGB").resize((resolution, image.size[1] // 8 + resolution))).transpose(2, 0, 1)

    falls_back(*fn(make=sized), "reads the image's 'size'")

    def halved(image, resolution):
        return np.array(image.convert("RGB").resize((resolution, resolution))).transpose(2, 0, 1) // 2

    falls_back(*fn(make=halved), "none of its images as hpuload makes them")


def test_a_transform_called_on_each_image_goes_to_torch_naming_it(files, tmp_path):
    flip = transforms.RandomHorizontalFlip()

    def preprocess(examples):
        made = [torch.tensor(np.array(im.convert("RGB").resize((24, 24))).transpose(2, 0, 1)) / 255 for im in examples["image"]]
        examples["pixel_values"] = [helper(t) for t in made]
        return examples

    def helper(t):
        return flip(t)

    ds = table(files, tmp_path).remove_columns(["conditioning_image"]).with_transform(preprocess)
    with pytest.warns(FallbackWarning, match="other than one tensor of its images|its transform 2 times|a tensor that is not"):
        DataLoader(ds, batch_size=4, collate_fn=lambda b: b, backend="cpu")
