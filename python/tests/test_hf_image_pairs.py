"""Hugging Face tables of several image columns, whose `with_transform` function puts each
column's images through a transform of its own: diffusers' and optimum-habana's
`train_controlnet.py` (an image, a caption and a conditioning image per row). Each column is
made natively by a loader of its own, in step with the others."""

import io
import random
import warnings

import numpy as np
import pytest
import torch

datasets = pytest.importorskip("datasets")

from hpuload.torch import DataLoader, FallbackWarning, SkippedSampleWarning  # noqa: E402
from PIL import Image, ImageFilter  # noqa: E402
from torchvision import transforms  # noqa: E402


def edges_png(data: bytes) -> bytes:
    with Image.open(io.BytesIO(data)) as im:
        edges = im.convert("L").filter(ImageFilter.FIND_EDGES).point(lambda v: 255 if v > 40 else 0).convert("RGB")
    out = io.BytesIO()
    edges.save(out, format="PNG")
    return out.getvalue()


def table(files, where, conditioning=None, damaged=(), damaged_images=()):
    """A table as `train_controlnet.py`'s defaults read it: image, caption, conditioning image
    (each photo's edges, or `conditioning(bytes)`), saved under `where` and loaded back;
    rows in `damaged` hold a damaged conditioning image, rows in `damaged_images` a damaged
    image."""
    rows = {"image": [], "text": [], "conditioning_image": []}
    for k, path in enumerate(files):
        data = path.read_bytes()
        rows["image"].append({"bytes": b"\xff\xd8 damaged" if k in damaged_images else data, "path": path.name})
        rows["text"].append(f"a photo number {k} of a thing")
        cond = b"\xff\xd8 not a jpeg at all" if k in damaged else (conditioning or edges_png)(data)
        rows["conditioning_image"].append({"bytes": cond, "path": f"cond-{k}.png"})
    features = datasets.Features(
        {"image": datasets.Image(), "text": datasets.Value("string"), "conditioning_image": datasets.Image()}
    )
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(str(where / "table"))
    return datasets.load_from_disk(str(where / "table"))


def tokenize(captions):
    """A stand-in for CLIP's tokenizer (no vocabulary offline): 16 ids per caption."""
    return torch.tensor([[ord(c) % 97 for c in caption[:16]] + [0] * (16 - len(caption[:16])) for caption in captions])


def controlnet_functions(resolution, image_transforms=None, conditioning_image_transforms=None, empty=0.0):
    """`train_controlnet.py`'s `preprocess_train` and `collate_fn`, as they are written there
    (the column names its defaults give)."""
    image_transforms = image_transforms or transforms.Compose(
        [
            transforms.Resize(resolution, interpolation=transforms.InterpolationMode.BILINEAR),
            transforms.CenterCrop(resolution),
            transforms.ToTensor(),
            transforms.Normalize([0.5], [0.5]),
        ]
    )
    conditioning_image_transforms = conditioning_image_transforms or transforms.Compose(
        [
            transforms.Resize(resolution, interpolation=transforms.InterpolationMode.BILINEAR),
            transforms.CenterCrop(resolution),
            transforms.ToTensor(),
        ]
    )

    def tokenize_captions(examples, is_train=True):
        captions = []
        for caption in examples["text"]:
            if random.random() < empty:
                captions.append("")
            elif isinstance(caption, str):
                captions.append(caption)
            elif isinstance(caption, (list, np.ndarray)):
                captions.append(random.choice(caption) if is_train else caption[0])
        return tokenize(captions)

    def preprocess_train(examples):
        images = [image.convert("RGB") for image in examples["image"]]
        images = [image_transforms(image) for image in images]
        conditioning_images = [image.convert("RGB") for image in examples["conditioning_image"]]
        conditioning_images = [conditioning_image_transforms(image) for image in conditioning_images]
        examples["pixel_values"] = images
        examples["conditioning_pixel_values"] = conditioning_images
        examples["input_ids"] = tokenize_captions(examples)
        return examples

    def collate_fn(examples):
        pixel_values = torch.stack([example["pixel_values"] for example in examples])
        pixel_values = pixel_values.to(memory_format=torch.contiguous_format).float()
        conditioning_pixel_values = torch.stack([example["conditioning_pixel_values"] for example in examples])
        conditioning_pixel_values = conditioning_pixel_values.to(memory_format=torch.contiguous_format).float()
        input_ids = torch.stack([example["input_ids"] for example in examples])
        return {"pixel_values": pixel_values, "conditioning_pixel_values": conditioning_pixel_values, "input_ids": input_ids}

    return preprocess_train, collate_fn


@pytest.fixture
def files(jpeg_folder):
    return sorted(jpeg_folder.rglob("*.jpg"))[:12]


def native(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        return DataLoader(*args, **kwargs)


def test_controlnet_loader_runs_natively_with_torchs_batches_on_the_cpu_path(files, tmp_path):
    preprocess_train, collate_fn = controlnet_functions(32)
    ds = table(files, tmp_path).with_transform(preprocess_train)
    ours = native(ds, batch_size=4, collate_fn=collate_fn, num_workers=2, backend="cpu")
    theirs = torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=collate_fn)
    n = 0
    for a, b in zip(ours, theirs, strict=True):
        assert list(a) == list(b) == ["pixel_values", "conditioning_pixel_values", "input_ids"]
        for key in a:
            assert a[key].shape == b[key].shape and a[key].dtype == b[key].dtype
            assert torch.equal(a[key], b[key]), key
        n += 1
    assert n == 3


def test_controlnet_loader_on_the_media_engine_stays_close_to_torchs(files, tmp_path):
    preprocess_train, collate_fn = controlnet_functions(32)
    ds = table(files, tmp_path).with_transform(preprocess_train)
    ours = native(ds, batch_size=4, collate_fn=collate_fn)
    for a, b in zip(ours, torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=collate_fn), strict=True):
        assert torch.equal(a["input_ids"], b["input_ids"])
        for key, span in (("pixel_values", 2.0), ("conditioning_pixel_values", 1.0)):
            mse = float(((a[key] - b[key]) ** 2).mean())
            assert mse == 0 or 10 * np.log10(span * span / mse) > 30, key


def test_each_image_column_draws_its_own_random_plans(files, tmp_path):
    """One random transform applied to both columns of rows holding the same photo twice: the
    two images of a sample flip independently, as torch's loader draws them in turn."""
    flip = transforms.Compose([transforms.Resize(24), transforms.CenterCrop(24), transforms.RandomHorizontalFlip(), transforms.ToTensor()])
    preprocess_train, collate_fn = controlnet_functions(24, flip, flip)
    ds = table(files * 3, tmp_path, conditioning=lambda data: data).with_transform(preprocess_train)
    same = total = 0
    for batch in native(ds, batch_size=6, collate_fn=collate_fn, shuffle=True, seed=3, backend="cpu"):
        for a, b in zip(batch["pixel_values"], batch["conditioning_pixel_values"]):
            assert torch.equal(a, b) or torch.equal(a.flip(-1), b)
            same += torch.equal(a, b)
            total += 1
    assert total == 36 and 6 <= same <= 30  # about half agree; all would mean shared draws


def test_a_random_transform_per_column_passes_the_check_against_the_dataset(files, tmp_path):
    """Random crops on both columns: the check runs them in turn from one stream, as the
    dataset's own function does, and the loader stays native."""
    crop = transforms.Compose([transforms.RandomResizedCrop(20), transforms.ToTensor()])
    cond = transforms.Compose([transforms.RandomCrop(16), transforms.ToTensor()])
    preprocess_train, collate_fn = controlnet_functions(20, crop, cond, empty=0.5)
    ds = table(files, tmp_path).with_transform(preprocess_train)
    batches = list(native(ds, batch_size=4, collate_fn=collate_fn, shuffle=True, backend="cpu"))
    assert [b["pixel_values"].shape for b in batches] == [(4, 3, 20, 20)] * 3
    assert [b["conditioning_pixel_values"].shape for b in batches] == [(4, 3, 16, 16)] * 3


def test_a_controlnet_loader_resumes_exactly_mid_epoch(files, tmp_path):
    from conftest import resumed_after

    crop = transforms.Compose([transforms.RandomResizedCrop(20), transforms.ToTensor()])
    preprocess_train, collate_fn = controlnet_functions(20, crop, crop)
    ds = table(files, tmp_path).with_transform(preprocess_train)

    def loader():
        return native(ds, batch_size=4, collate_fn=collate_fn, shuffle=True, seed=9, backend="cpu")

    rest, resumed = resumed_after(loader, 1)
    for a, b in zip(rest, resumed, strict=True):
        for key in a:
            assert torch.equal(a[key], b[key]), key


def test_a_damaged_conditioning_image_is_named_and_its_sample_replaced_whole(files, tmp_path):
    """Row 5's conditioning image is damaged and its photo is not: the conditioning loader
    names and replaces it, and the sample in its slot is one row's image and conditioning
    image both (the same photo here), never a mix of two rows."""
    same = transforms.Compose([transforms.Resize(24), transforms.CenterCrop(24), transforms.ToTensor()])
    preprocess_train, collate_fn = controlnet_functions(24, same, same)
    ds = table(files, tmp_path, conditioning=lambda data: data, damaged={5}).with_transform(preprocess_train)
    with pytest.warns(SkippedSampleWarning, match=r"sample 5 \(.*row 5, column 'conditioning_image'\)"):
        batches = list(native(ds, batch_size=4, collate_fn=collate_fn, backend="cpu"))
    assert len(batches) == 3
    for batch in batches:
        assert torch.equal(batch["pixel_values"], batch["conditioning_pixel_values"])
    ids = torch.cat([b["input_ids"] for b in batches])
    assert not any(torch.equal(row, tokenize(["a photo number 5 of a thing"])[0]) for row in ids)


def test_a_controlnet_function_replaced_between_epochs_rebuilds_each_columns_loader(files, tmp_path):
    preprocess_train, collate_fn = controlnet_functions(32)
    ds = table(files, tmp_path).with_transform(preprocess_train)
    loader = native(ds, batch_size=4, collate_fn=collate_fn, backend="cpu")
    assert next(iter(loader))["conditioning_pixel_values"].shape == (4, 3, 32, 32)
    list(loader)
    smaller, _ = controlnet_functions(
        32, conditioning_image_transforms=transforms.Compose([transforms.Resize(16), transforms.CenterCrop(16), transforms.ToTensor()])
    )
    ds.set_transform(smaller)
    batch = next(iter(loader))
    assert batch["pixel_values"].shape == (4, 3, 32, 32) and batch["conditioning_pixel_values"].shape == (4, 3, 16, 16)
    want = next(iter(torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=collate_fn)))
    assert torch.equal(batch["conditioning_pixel_values"], want["conditioning_pixel_values"])


def test_a_function_handing_one_column_to_two_transforms_goes_to_torch_naming_it(files, tmp_path):
    small = transforms.Compose([transforms.Resize(16), transforms.CenterCrop(16), transforms.ToTensor()])
    large = transforms.Compose([transforms.Resize(24), transforms.CenterCrop(24), transforms.ToTensor()])

    def preprocess(examples):
        examples["small"] = [small(i.convert("RGB")) for i in examples["image"]]
        examples["large"] = [large(i.convert("RGB")) for i in examples["image"]]
        examples["cond"] = [small(i.convert("RGB")) for i in examples["conditioning_image"]]
        return examples

    ds = table(files, tmp_path).with_transform(preprocess)
    with pytest.warns(FallbackWarning, match=r"column 'image'.* to another transform"):
        DataLoader(ds, batch_size=4)


def test_a_grey_conditioning_transform_gives_one_channel_as_torch_does(files, tmp_path):
    grey = transforms.Compose([transforms.Resize(24), transforms.CenterCrop(24), transforms.Grayscale(), transforms.ToTensor()])
    preprocess_train, collate_fn = controlnet_functions(32, conditioning_image_transforms=grey)
    ds = table(files, tmp_path).with_transform(preprocess_train)
    ours = native(ds, batch_size=4, collate_fn=collate_fn, backend="cpu")
    for a, b in zip(ours, torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=collate_fn), strict=True):
        assert a["pixel_values"].shape == (4, 3, 32, 32)
        assert a["conditioning_pixel_values"].shape == b["conditioning_pixel_values"].shape == (4, 1, 24, 24)
        assert (a["conditioning_pixel_values"] - b["conditioning_pixel_values"]).abs().max() <= 1 / 255 + 1e-6


def test_a_damaged_image_beside_a_sound_conditioning_image_is_replaced_whole(files, tmp_path):
    same = transforms.Compose([transforms.Resize(24), transforms.CenterCrop(24), transforms.ToTensor()])
    preprocess_train, collate_fn = controlnet_functions(24, same, same)
    ds = table(files, tmp_path, conditioning=lambda data: data, damaged_images={2}).with_transform(preprocess_train)
    with pytest.warns(SkippedSampleWarning, match=r"sample 2 \(.*row 2, column 'image'\)"):
        batches = list(native(ds, batch_size=4, collate_fn=collate_fn, shuffle=True, backend="cpu"))
    assert len(batches) == 3
    for batch in batches:
        assert torch.equal(batch["pixel_values"], batch["conditioning_pixel_values"])


def test_grey_conditioning_pngs_converted_by_the_function_give_torchs_batches(files, tmp_path):
    """Edge maps saved grey (mode L), as Canny conditioning images often are: the script's
    `.convert("RGB")` of them is hpuload's RGB decode of a grey PNG."""

    def grey_edges(data):
        with Image.open(io.BytesIO(edges_png(data))) as im:
            out = io.BytesIO()
            im.convert("L").save(out, format="PNG")
            return out.getvalue()

    preprocess_train, collate_fn = controlnet_functions(32)
    ds = table(files, tmp_path, conditioning=grey_edges).with_transform(preprocess_train)
    ours = native(ds, batch_size=4, collate_fn=collate_fn, backend="cpu")
    for a, b in zip(ours, torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=collate_fn), strict=True):
        assert torch.equal(a["conditioning_pixel_values"], b["conditioning_pixel_values"])


@pytest.mark.parametrize("random_crop", [True, False], ids=["random", "deterministic"])
def test_one_image_through_one_transform_twice_runs_natively_only_where_draws_change_nothing(files, tmp_path, random_crop):
    """Two calls of a random transform on one image give torch two crops; hpuload has one
    native tensor per image, so it goes to torch's loader, named. A deterministic one gives
    the same twice, natively."""
    tf = transforms.Compose([transforms.RandomResizedCrop(16) if random_crop else transforms.CenterCrop(16), transforms.ToTensor()])

    def twice(examples):
        images = [image.convert("RGB") for image in examples["image"]]
        examples["pixel_values"] = [tf(image) for image in images]
        examples["again"] = [tf(image) for image in images]
        return examples

    ds = table(files, tmp_path).with_transform(twice)
    if random_crop:
        with pytest.warns(FallbackWarning, match=r"row 0's image of column 'image' to a random transform twice"):
            DataLoader(ds, batch_size=4)
        return
    batch = next(iter(native(ds, batch_size=4, collate_fn=lambda e: [torch.stack([x[k] for x in e]) for k in ("pixel_values", "again")], backend="cpu")))
    assert torch.equal(batch[0], batch[1])


def test_habanas_drop_in_takes_a_controlnet_table_with_static_shapes(files, tmp_path):
    """`HabanaDataLoader` (what Gaudi scripts build) over the ControlNet table: 11 rows in
    batches of 4, the last padded to 4 with `pad_last_batch=True` (static shapes for the
    graph), both image columns."""
    from hpuload.torch import HabanaDataLoader

    preprocess_train, collate_fn = controlnet_functions(32)
    ds = table(files[:11], tmp_path).with_transform(preprocess_train)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = HabanaDataLoader(ds, batch_size=4, collate_fn=collate_fn, num_workers=2, pad_last_batch=True)
    batches = list(loader)
    assert [b["conditioning_pixel_values"].shape for b in batches] == [(4, 3, 32, 32)] * 3
    assert [b["pixel_values"].shape for b in batches] == [(4, 3, 32, 32)] * 3
    assert loader.last_valid == 3
