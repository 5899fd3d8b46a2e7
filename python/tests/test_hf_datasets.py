"""Hugging Face `datasets` tables, written by the real `datasets` and `pyarrow` packages:
`load_dataset("imagefolder")` (paths only), `save_to_disk` (embedded bytes), `to_parquet`
(several files and row groups), after `select`/`shuffle`/`train_test_split`, with the
`set_transform` function and collate_fn of transformers' `run_image_classification.py`."""

import json
import warnings

import numpy as np
import pytest
import torch

datasets = pytest.importorskip("datasets")
pq = pytest.importorskip("pyarrow.parquet")

import hpuload  # noqa: E402
from hpuload.torch import DataLoader, FallbackWarning  # noqa: E402
from torchvision import transforms as T  # noqa: E402

EVAL = T.Compose([T.Resize(64), T.CenterCrop(56), T.ToTensor()])


def example_transforms(transform):
    """run_image_classification.py's shape: a function over a batch of examples, closing over
    a torchvision Compose, and the example's collate_fn."""

    def train_transforms(example_batch):
        example_batch["pixel_values"] = [transform(im.convert("RGB")) for im in example_batch["image"]]
        return example_batch

    def collate_fn(examples):
        pixel_values = torch.stack([e["pixel_values"] for e in examples])
        labels = torch.tensor([e["label"] for e in examples])
        return {"pixel_values": pixel_values, "labels": labels}

    return train_transforms, collate_fn


@pytest.fixture(scope="module")
def hf(jpeg_folder, tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    ds = datasets.load_dataset("imagefolder", data_dir=str(jpeg_folder), split="train", cache_dir=str(root / "cache"))
    ds.save_to_disk(str(root / "saved"), max_shard_size="300KB")
    # Parquet as the hub has it: the bytes embedded (load_from_disk's table has them).
    embedded = datasets.load_from_disk(str(root / "saved"))
    (root / "pq").mkdir()
    for i, part in enumerate(range(0, len(ds), 15)):
        part = embedded.select(range(part, min(part + 15, len(ds))))
        part.to_parquet(str(root / "pq" / f"train-{i:05}-of-00003.parquet"), batch_size=4)
    return ds, root


def torch_batches(ds, transform, **kw):
    fn, collate = example_transforms(transform)
    ds.set_transform(fn)
    loader = torch.utils.data.DataLoader(ds, collate_fn=collate, **kw)
    return [(b["pixel_values"], b["labels"]) for b in loader]


def hpu_batches(ds, transform, **kw):
    fn, collate = example_transforms(transform)
    ds.set_transform(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, collate_fn=collate, backend="cpu", num_workers=2, **kw)
    assert type(loader) is DataLoader
    return [(b["pixel_values"], b["labels"]) for b in loader]


def assert_same(ours, theirs):
    assert len(ours) == len(theirs)
    for (a, la), (b, lb) in zip(ours, theirs):
        assert torch.equal(la, lb)
        # The CPU backend is within one level of torchvision's PIL path.
        assert (a - b).abs().max().item() <= 1.5 / 255


def test_an_imagefolder_dataset_with_paths_only_gives_torchs_pixels_and_labels_in_order(hf):
    ds, _ = hf
    assert ds.data.table.column("image").chunk(0).field("bytes").null_count == len(ds)
    assert_same(hpu_batches(ds, EVAL, batch_size=8), torch_batches(ds, EVAL, batch_size=8))


def test_select_shuffle_and_train_test_split_mappings_are_honoured(hf):
    ds, _ = hf
    for picked in (
        ds.shuffle(seed=4),
        ds.select([5, 1, 1, 30]),
        ds.select(range(7, 30)),
        ds.train_test_split(test_size=0.25, seed=0)["test"],
        ds.shuffle(seed=2).select(range(12)),
    ):
        assert_same(hpu_batches(picked, EVAL, batch_size=4), torch_batches(picked, EVAL, batch_size=4))


def test_a_save_to_disk_folder_embeds_the_bytes_and_loads_like_the_original(hf):
    ds, root = hf
    saved = datasets.load_from_disk(str(root / "saved"))
    assert len(saved.cache_files) >= 2, "several Arrow shards"
    assert_same(hpu_batches(saved, EVAL, batch_size=8), torch_batches(ds, EVAL, batch_size=8))
    # Without the datasets package's objects: the folder itself.
    loader = DataLoader(hpuload.HFDataset(root / "saved", pipeline="resnet50_eval"), batch_size=8)
    assert [l.tolist() for _, l in loader] == [b.tolist() for _, b in torch_batches(ds, EVAL, batch_size=8)]
    assert loader.classes == ds.features["label"].names


def test_without_a_collate_fn_batches_are_default_collates_dict(hf):
    ds, _ = hf
    fn, _ = example_transforms(EVAL)
    ds.set_transform(fn)
    batch = next(iter(DataLoader(ds, batch_size=5, backend="cpu")))
    assert set(batch) == {"pixel_values", "label"}
    assert batch["pixel_values"].shape == (5, 3, 56, 56)
    assert batch["label"].tolist() == ds["label"][:5]


def test_a_batchs_keys_come_in_the_order_the_function_leaves_them(hf):
    """A function that deletes the image column leaves the label's key before the pixels':
    the batch's keys come in that order, as torch's `default_collate` keeps them."""
    ds, _ = hf

    def fn(batch):
        batch["pixel_values"] = [EVAL(im.convert("RGB")) for im in batch["image"]]
        del batch["image"]
        return batch

    ds.set_transform(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = next(iter(DataLoader(ds, batch_size=5, backend="cpu")))
    want = next(iter(torch.utils.data.DataLoader(ds, batch_size=5)))
    assert list(ours) == list(want) == ["label", "pixel_values"]
    assert torch.equal(ours["label"], want["label"])


def test_a_shuffled_training_epoch_covers_every_row_once_and_is_deterministic(hf):
    ds, _ = hf
    train = T.Compose([T.RandomResizedCrop(48), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize([0.5] * 3, [0.5] * 3)])
    fn, collate = example_transforms(train)
    ds.set_transform(fn)
    runs = []
    for _ in range(2):
        loader = DataLoader(ds, batch_size=8, shuffle=True, collate_fn=collate, generator=torch.Generator().manual_seed(3))
        runs.append([b for b in loader])
    a, b = runs
    assert all(torch.equal(x["pixel_values"], y["pixel_values"]) for x, y in zip(a, b))
    labels = torch.cat([x["labels"] for x in a]).tolist()
    assert sorted(labels) == sorted(ds["label"])


def test_parquet_shards_from_to_parquet_visit_every_row_once_per_epoch(hf):
    ds, root = hf
    files = sorted((root / "pq").glob("*.parquet"))
    assert len(files) == 3 and pq.ParquetFile(files[0]).metadata.num_row_groups >= 3
    first = pq.read_table(files[0]).column("image").chunk(0)
    assert first.field("bytes").null_count == 0, "the images are embedded"
    source = hpuload.Parquet(str(root / "pq" / "train-{00000..00002}-of-00003.parquet"), pipeline="resnet50_eval", window_rows=8)
    loader = DataLoader(source, batch_size=4, shuffle=True, backend="cpu")
    for epoch in range(2):
        labels = [l for _, b in loader for l in b.tolist()]
        assert sorted(labels) == sorted(ds["label"]), f"epoch {epoch}"
    # In order, the rows are the dataset's rows: the same pixels as the Arrow table gives.
    ours = [x for x, _ in DataLoader(hpuload.Parquet(str(root / "pq"), pipeline="resnet50_eval"), batch_size=8, backend="cpu")]
    arrow = [x for x, _ in DataLoader(hpuload.HFDataset(root / "saved", pipeline="resnet50_eval"), batch_size=8, backend="cpu")]
    assert all(torch.equal(a, b) for a, b in zip(ours, arrow))


def test_a_damaged_parquet_row_is_named_by_file_and_row_and_skipped(hf, tmp_path):
    ds, root = hf
    table = pq.read_table(root / "pq" / "train-00000-of-00003.parquet")
    images = table.column("image").to_pylist()
    images[2] = {"bytes": b"\xff\xd8 not really a jpeg", "path": None}
    images[5] = {"bytes": None, "path": None}
    import pyarrow as pa

    table = table.set_column(0, "image", pa.array(images, type=table.schema.field("image").type))
    pq.write_table(table, tmp_path / "train-00003-of-00294.parquet", row_group_size=4)
    loader = DataLoader(hpuload.Parquet(str(tmp_path / "train-00003-of-00294.parquet"), pipeline="resnet50_eval"), batch_size=4, backend="cpu", error_budget=0.5)
    with pytest.warns(hpuload.torch.SkippedSampleWarning) as caught:
        batches = list(loader)
    assert len(batches) == 4
    named = " ".join(str(w.message) for w in caught)
    assert "train-00003-of-00294.parquet/row 2" in named
    assert "train-00003-of-00294.parquet/row 5" in named and "null" in named


def test_damaged_rows_among_those_the_function_is_checked_on_are_named_and_skipped_when_read(hf, tmp_path):
    """The rows the function is run on when the loader is built (its output's keys, and
    `_AppliesCheck`) may be damaged: those are passed over there, and named and skipped when
    the epoch reads them, as any other damaged row."""
    ds, root = hf
    table = pq.read_table(root / "pq" / "train-00000-of-00003.parquet")
    images = table.column("image").to_pylist()
    images[0] = {"bytes": b"\xff\xd8 not really a jpeg", "path": None}
    images[len(images) // 2] = {"bytes": b"\xff\xd8 nor this", "path": None}
    import pyarrow as pa

    table = table.set_column(0, "image", pa.array(images, type=table.schema.field("image").type))
    pq.write_table(table, tmp_path / "damaged.parquet")
    damaged = datasets.Dataset.from_parquet(str(tmp_path / "damaged.parquet"), cache_dir=str(tmp_path / "cache"))
    fn, collate = example_transforms(EVAL)
    damaged.set_transform(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(damaged, batch_size=4, collate_fn=collate, backend="cpu", error_budget=0.5)
    with pytest.warns(hpuload.torch.SkippedSampleWarning) as caught:
        batches = list(loader)
    assert sum(len(b["labels"]) for b in batches) == len(damaged)  # replaced, not dropped
    named = " ".join(str(w.message) for w in caught)
    assert "row 0" in named and f"row {len(images) // 2}" in named


def test_a_transform_the_dataset_function_does_not_reveal_falls_back_naming_it(hf):
    ds, _ = hf
    a, b = T.Compose([T.Resize((32, 32)), T.ToTensor()]), T.Compose([T.Resize((40, 40)), T.ToTensor()])

    def two(batch):
        batch["pixel_values"] = [a(i) if len(batch["label"]) % 2 else b(i) for i in batch["image"]]
        return batch

    ds.set_transform(two)
    with pytest.warns(FallbackWarning, match="transform="):
        loader = DataLoader(ds, batch_size=4)
    assert isinstance(loader, torch.utils.data.DataLoader)
    # Saying which one it applies puts it on the fast path.
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        fast = DataLoader(ds, batch_size=4, transform=a, collate_fn=lambda s: s)
    first = next(iter(fast))
    assert set(first[0]) == {"image", "label"} and first[0]["image"].shape == (3, 32, 32)


def _turned(batch):
    batch["pixel_values"] = [EVAL(im.convert("RGB").rotate(90)) for im in batch["image"]]
    return batch


def _grey_first(batch):
    from PIL import ImageOps

    batch["pixel_values"] = [EVAL(ImageOps.grayscale(im).convert("RGB")) for im in batch["image"]]
    return batch


def _scaled_after(batch):
    batch["pixel_values"] = [EVAL(im.convert("RGB")) * 2 - 1 for im in batch["image"]]
    return batch


def _labels_mapped(batch):
    batch["pixel_values"] = [EVAL(im.convert("RGB")) for im in batch["image"]]
    batch["label"] = [2 - y for y in batch["label"]]
    return batch


def _sometimes_flipped(batch):
    import random

    from PIL import Image

    batch["pixel_values"] = [
        EVAL(im.convert("RGB").transpose(Image.Transpose.FLIP_TOP_BOTTOM) if random.random() < 0.5 else im.convert("RGB"))
        for im in batch["image"]
    ]
    return batch


@pytest.mark.parametrize(
    "fn,says",
    [
        (_turned, "another 'pixel_values'"),
        (_grey_first, "another 'pixel_values'"),
        (_scaled_after, "another 'pixel_values'"),
        (_labels_mapped, "the label"),
        (_sometimes_flipped, "another 'pixel_values'"),
    ],
)
def test_a_dataset_function_doing_more_than_its_transform_goes_to_torch_naming_the_row(hf, fn, says):
    """hpuload runs the one transform the function reaches in its place: a function that also
    turns, greys or rescales the image, maps the labels, or flips on some draws would be
    silently different, so it is checked on rows spread over the table (each under other
    draws) and goes to torch's loader, naming the first row that differs."""
    ds, _ = hf
    _, collate = example_transforms(EVAL)
    ds.set_transform(fn)
    with pytest.warns(FallbackWarning, match=f"{fn.__name__} \\(the dataset's transform\\) gives row \\d+ {says}"):
        loader = DataLoader(ds, batch_size=4, collate_fn=collate)
    assert isinstance(loader, torch.utils.data.DataLoader) and not isinstance(loader, DataLoader)
    assert next(iter(loader))["pixel_values"].shape == (4, 3, 56, 56)


def test_a_dataset_function_changed_to_do_more_sends_the_next_epoch_to_torch(hf):
    ds, _ = hf
    fn, collate = example_transforms(EVAL)
    ds.set_transform(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=4, collate_fn=collate, backend="cpu")
        first = [(b["pixel_values"], b["labels"]) for b in loader]
    ds.set_transform(_scaled_after)
    with pytest.warns(FallbackWarning, match="_scaled_after .* gives row 0 another 'pixel_values'"):
        second = [(b["pixel_values"], b["labels"]) for b in loader]
    assert len(second) == len(first)
    assert all(torch.allclose(b, a * 2 - 1) for (a, _), (b, _) in zip(first, second))


def _as_opened(batch):
    """A function that hands the transform each image as the table holds it, unconverted."""
    batch["pixel_values"] = [EVAL(im) for im in batch["image"]]
    return batch


def table_with_one_file_changed(jpeg_folder, tmp_path, k, change, embedded):
    """A `datasets` imagefolder table over a copy of `jpeg_folder` whose `k`-th file
    `change(path)` rewrote, with the paths only or (`embedded`) the bytes in the table."""
    import shutil

    root = tmp_path / "images"
    shutil.copytree(jpeg_folder, root)
    change(sorted(root.rglob("*.jpg"))[k])
    ds = datasets.load_dataset("imagefolder", data_dir=str(root), split="train", cache_dir=str(tmp_path / "cache"))
    if embedded:
        ds.save_to_disk(str(tmp_path / "saved"))
        ds = datasets.load_from_disk(str(tmp_path / "saved"))
    return ds


@pytest.mark.parametrize("mode", ["L", "RGBA"])
@pytest.mark.parametrize("embedded", [False, True])
def test_a_function_that_does_not_convert_to_rgb_goes_to_torch_where_a_row_is_not_rgb(jpeg_folder, tmp_path, mode, embedded):
    """hpuload decodes every image to RGB; torch's loader hands such a function a grey image
    as one channel and an RGBA one as four. A row outside the five the function is checked
    on shows it, read from the image's header (a file's, or the bytes the table embeds)."""
    from PIL import Image

    def to_mode(odd):
        Image.open(odd).convert(mode).save(odd.with_suffix(".png"))
        odd.unlink()

    ds = table_with_one_file_changed(jpeg_folder, tmp_path, 3, to_mode, embedded)
    _, collate = example_transforms(EVAL)
    ds.set_transform(_as_opened)
    with pytest.warns(FallbackWarning, match=f"_as_opened .* hands it each image in its own mode, and row \\d+ is in mode {mode}"):
        loader = DataLoader(ds, batch_size=4, collate_fn=collate)
    assert not isinstance(loader, DataLoader)
    # The same function converting first runs natively.
    fn, collate = example_transforms(EVAL)
    ds.set_transform(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        assert isinstance(DataLoader(ds, batch_size=4, collate_fn=collate), DataLoader)


def _upright(batch):
    """A function that turns each image by its EXIF orientation first, as code for phone
    photos does."""
    from PIL import ImageOps

    batch["pixel_values"] = [EVAL(ImageOps.exif_transpose(im.convert("RGB"))) for im in batch["image"]]
    return batch


@pytest.mark.parametrize("fn", [_as_opened, _upright], ids=["unconverted", "upright"])
def test_a_function_that_would_differ_on_other_images_runs_natively_where_no_row_is_one(hf, fn):
    """A function that does not convert to RGB, over a table whose every row is RGB; one
    that turns images by their EXIF orientation, over a table where no image carries one:
    neither changes anything there, and both run natively with torch's batches."""
    ds, _ = hf
    _, collate = example_transforms(EVAL)
    ds.set_transform(fn)
    want = [(b["pixel_values"], b["labels"]) for b in torch.utils.data.DataLoader(ds, batch_size=8, collate_fn=collate)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=8, collate_fn=collate, backend="cpu")
    assert_same([(b["pixel_values"], b["labels"]) for b in loader], want)


def oriented_table(jpeg_folder, tmp_path, embedded):
    """A `datasets` imagefolder table over a copy of `jpeg_folder` whose first nine images
    carry EXIF orientations (phone photos): 1 to 8 in their Exif data, and one with only an
    XMP packet saying 6 (which Pillow reads too)."""
    from PIL import Image

    def oriented(k):
        def change(path):
            im = Image.open(path)
            if k < 8:
                exif = Image.Exif()
                exif[0x0112] = k + 1
                im.save(path, exif=exif.tobytes(), quality=95)
            else:
                xmp = b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:Description tiff:Orientation="6"/></x:xmpmeta>'
                im.save(path, xmp=xmp, quality=95)

        return change

    import shutil

    root = tmp_path / "images"
    shutil.copytree(jpeg_folder, root)
    for k, path in enumerate(sorted(root.rglob("*.jpg"))[:9]):
        oriented(k)(path)
    return imagefolder_table(root, tmp_path, embedded)


def imagefolder_table(root, tmp_path, embedded):
    """`datasets`' imagefolder table of `root` (the images' paths), or, `embedded`, saved
    and loaded again (their bytes in the table)."""
    ds = datasets.load_dataset("imagefolder", data_dir=str(root), split="train", cache_dir=str(tmp_path / "cache"))
    if embedded:
        ds.save_to_disk(str(tmp_path / "saved"))
        ds = datasets.load_from_disk(str(tmp_path / "saved"))
    return ds


@pytest.mark.parametrize("embedded", [False, True])
def test_images_with_exif_orientations_are_turned_as_datasets_turns_them(jpeg_folder, tmp_path, embedded):
    """`datasets` turns each image by the EXIF orientation it carries as it decodes it (a phone
    photo held upright); hpuload turns it the same way, natively, with torch's batches."""
    ds = oriented_table(jpeg_folder, tmp_path, embedded)
    import io

    from PIL import Image

    stored = ds.cast_column("image", datasets.Image(decode=False))
    sizes = [Image.open(io.BytesIO(r["bytes"]) if r["bytes"] else r["path"]).size for r in stored["image"][:9]]
    assert [ds[k]["image"].size for k in range(9)] != sizes  # turned: width and height swap
    want = torch_batches(ds, EVAL, batch_size=4)
    assert_same(hpu_batches(ds, EVAL, batch_size=4), want)
    # hpuload's own reader of the saved table turns them too.
    if embedded:
        pipeline = {"name": "eval", "ops": [{"op": "resize", "size": 64}, {"op": "center_crop", "size": 56}]}
        own = DataLoader(hpuload.HFDataset(str(tmp_path / "saved"), pipeline=pipeline), batch_size=4, backend="cpu")
        for (ours, _), theirs in zip(own, want):
            assert (ours - theirs[0]).abs().max().item() <= 1.5 / 255


def processor_transforms(processor, convert=True):
    """The Hugging Face fine-tuning recipes' function: the image processor over the batch's
    images (converted to RGB first, or as they are), the labels renamed as the model takes
    them."""

    def transform(example_batch):
        images = [im.convert("RGB") for im in example_batch["image"]] if convert else example_batch["image"]
        inputs = processor(images, return_tensors="pt")
        inputs["labels"] = example_batch["label"]
        return inputs

    def collate_fn(batch):
        return {
            "pixel_values": torch.stack([x["pixel_values"] for x in batch]),
            "labels": torch.tensor([x["labels"] for x in batch]),
        }

    return transform, collate_fn


def test_an_image_processor_in_the_function_runs_natively_as_transformers_computes_it(hf):
    """ViT's processor (a resize to one size, rescale, normalize) and DeiT's (a centre crop
    after it too), as `AutoImageProcessor` makes them, on transformers' torchvision backend:
    hpuload runs the same steps natively, each value within float rounding of the
    processor's (its rescale and normalize fused in one division)."""
    backends = pytest.importorskip("transformers.image_processing_backends")
    import transformers

    ds, _ = hf
    for processor in (
        transformers.ViTImageProcessor(size={"height": 64, "width": 48}),
        transformers.DeiTImageProcessor(size={"height": 64, "width": 64}, crop_size={"height": 56, "width": 56}),
        transformers.ViTImageProcessor(size={"height": 40, "width": 40}, resample=3, image_mean=[0.485, 0.456, 0.406]),
        transformers.SiglipImageProcessor(size={"height": 48, "width": 48}),  # converts to RGB itself too
    ):
        assert isinstance(processor, backends.TorchvisionBackend)
        fn, collate = processor_transforms(processor)
        ds.set_transform(fn)
        want = list(torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=collate))
        with warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            got = list(DataLoader(ds, batch_size=4, collate_fn=collate, backend="cpu", num_workers=2))
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a["pixel_values"].shape == b["pixel_values"].shape and torch.equal(a["labels"], b["labels"])
            assert (a["pixel_values"] - b["pixel_values"]).abs().max() < 1e-5


def test_image_processors_hpuload_does_not_map_go_to_torch_naming_why(hf):
    pytest.importorskip("transformers.image_processing_backends")
    import transformers

    ds, _ = hf
    for processor, says, convert in (
        (transformers.ConvNextImageProcessor(), "has its own", True),  # its crop_pct resize
        (transformers.CLIPImageProcessor(), "resizes to", True),  # the shorter side, then a crop
        # A crop whose offset the backend truncates (3 / 2 to 1) where torchvision rounds (to 2).
        (transformers.DeiTImageProcessor(size={"height": 64, "width": 64}, crop_size={"height": 61, "width": 64}), "centre-crops", True),
        # Images handed over as they are, to a processor that lays transparency on white.
        (transformers.SiglipImageProcessor(size={"height": 48, "width": 48}), "images it lays on white", False),
    ):
        fn, collate = processor_transforms(processor, convert)
        ds.set_transform(fn)
        with pytest.warns(FallbackWarning, match=f"{type(processor).__name__} {says}" if convert else says):
            loader = DataLoader(ds, batch_size=4, collate_fn=collate)
        assert not isinstance(loader, DataLoader)


def test_an_in_memory_dataset_falls_back_with_the_reason(hf):
    ds, _ = hf
    memory = datasets.Dataset.from_dict({"image": [None], "label": [0]})
    with pytest.warns(FallbackWarning, match="in memory|features"):
        DataLoader(memory, batch_size=1)
    del ds


def test_an_image_feature_that_converts_to_grey_goes_to_torch_with_torchs_grey_batches(hf):
    """`Image(mode="L")`: datasets converts each image to grey as it decodes it, and the
    example's `.convert("RGB")` then gives the grey image's RGB; hpuload decodes colour, so
    such a table goes to torch's loader, naming the mode."""
    ds, _ = hf
    grey = ds.cast_column("image", datasets.Image(mode="L"))
    fn, collate = example_transforms(EVAL)
    grey.set_transform(fn)
    with pytest.warns(FallbackWarning, match="converts each image to mode L"):
        loader = DataLoader(grey, batch_size=8, collate_fn=collate)
    batch = next(iter(loader))["pixel_values"]
    assert torch.equal(batch[:, 0], batch[:, 1]) and torch.equal(batch[:, 1], batch[:, 2])


def test_the_cli_benches_a_save_to_disk_folder_and_parquet_files(hf, tmp_path):
    _, root = hf
    from hpuload._hpuload import cli

    for data in (root / "saved", root / "pq"):
        out = tmp_path / f"{data.name}.json"
        args = ["hpuload", "bench", "--data", str(data), "--batch", "8", "--epochs", "1", "--workers", "2", "--json", str(out)]
        assert cli(args) == 0
        report = json.loads(out.read_text())
        assert report["images"] > 0
    shards = tmp_path / "shards"
    assert cli(["hpuload", "make-shards", "--data", str(root / "pq"), "--out", str(shards), "--shard-size", "200KB"]) == 0
    out = tmp_path / "tars.json"
    assert cli(["hpuload", "bench", "--data", str(shards), "--batch", "8", "--epochs", "1", "--json", str(out)]) == 0
    assert np.isfinite(json.loads(out.read_text())["images_per_sec"])


def test_transformers_trainer_trains_on_hpuload_after_install(hf, tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    import hpuload.transformers

    ds, _ = hf
    train = T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize([0.5] * 3, [0.5] * 3)])
    fn, collate = example_transforms(train)
    ds.set_transform(fn)

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3 * 32 * 32, 10)

        def forward(self, pixel_values, labels=None):
            logits = self.fc(pixel_values.flatten(1))
            return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=8, max_steps=3, remove_unused_columns=False,
        report_to=[], use_cpu=True, save_strategy="no", logging_strategy="no", seed=1,
    )
    hpuload.transformers.install()
    try:
        # The example's eval transform with a ViT processor's sizes: Resize((h, w)) then
        # CenterCrop((h, w)).
        evaluate = T.Compose([T.Resize((32, 32)), T.CenterCrop((32, 32)), T.ToTensor(), T.Normalize([0.5] * 3, [0.5] * 3)])
        eval_ds = ds.with_transform(example_transforms(evaluate)[0])
        trainer = transformers.Trainer(
            model=Tiny(), args=args, train_dataset=ds, eval_dataset=eval_ds, data_collator=collate
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            loader = trainer.get_train_dataloader()
            assert isinstance(loader, DataLoader)
            batch = next(iter(loader))
            assert batch["pixel_values"].shape == (8, 3, 32, 32) and batch["labels"].shape == (8,)
            result = trainer.train()
            assert isinstance(trainer.get_eval_dataloader(), DataLoader)
            metrics = trainer.evaluate()
        assert result.global_step == 3 and np.isfinite(result.training_loss)
        assert np.isfinite(metrics["eval_loss"])
    finally:
        hpuload.transformers.uninstall()
    assert not isinstance(transformers.Trainer(model=Tiny(), args=args, train_dataset=ds, data_collator=collate).get_train_dataloader(), DataLoader)


GLOBAL_EVAL = T.Compose([T.Resize((40, 40)), T.ToTensor()])


def test_a_transform_read_as_a_global_inside_a_comprehension_is_found(hf):
    ds, _ = hf

    def module_level(batch):
        batch["pixel_values"] = [GLOBAL_EVAL(im.convert("RGB")) for im in batch["image"]]
        return batch

    ds.set_transform(module_level)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        batch = next(iter(DataLoader(ds, batch_size=3)))
    assert batch["pixel_values"].shape == (3, 3, 40, 40)


def test_a_collate_fn_on_the_fast_path_raises_glibcs_malloc_thresholds_unless_told_not_to(hf):
    import subprocess
    import sys

    script = (
        "import datasets, hpuload.torch as h\n"
        "from torchvision import transforms as T\n"
        f"ds = datasets.load_from_disk({str(hf[1] / 'saved')!r})\n"
        "h.DataLoader(ds, batch_size=2, transform=T.Compose([T.Resize((8, 8)), T.ToTensor()]), collate_fn=lambda b: b)\n"
        "print(h.malloc_tuned)\n"
    )
    for env, want in (({}, "True"), ({"HPULOAD_MALLOC_TUNING": "0"}, "False"), ({"MALLOC_MMAP_THRESHOLD_": "65536"}, "False")):
        import os

        out = subprocess.run([sys.executable, "-c", script], env={**os.environ, **env}, capture_output=True, text=True)
        assert out.stdout.strip().splitlines()[-1] == want, (env, out.stdout, out.stderr[-2000:])


def test_output_pair_gives_image_label_tuples_for_a_datasets_table(hf):
    ds, _ = hf
    fn, _ = example_transforms(EVAL)
    ds.set_transform(fn)
    images, labels = next(iter(DataLoader(ds, batch_size=4, output="pair")))
    assert images.shape == (4, 3, 56, 56) and labels.tolist() == ds["label"][:4]
    pairs = next(iter(DataLoader(ds, batch_size=2, output="pair", collate_fn=lambda b: b)))
    assert pairs[0][0].shape == (3, 56, 56) and pairs[0][1] == ds["label"][0]


def test_resume_at_random_points_of_a_datasets_epoch_is_byte_identical(hf):
    import random

    ds, _ = hf
    train = T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ToTensor()])
    fn, collate = example_transforms(train)
    ds = ds.shuffle(seed=9)
    ds.set_transform(fn)

    def make():
        return DataLoader(ds, batch_size=4, shuffle=True, collate_fn=collate, seed=11)

    full = [(b["pixel_values"].clone(), b["labels"].clone()) for b in make()]
    rng = random.Random(5)
    for stop in rng.sample(range(1, len(full)), 3):
        first = make()
        it = iter(first)
        for _ in range(stop):
            next(it)
        state = first.state_dict()
        del it
        resumed = make()
        resumed.load_state_dict(state)
        rest = [(b["pixel_values"], b["labels"]) for b in resumed]
        assert len(rest) == len(full) - stop
        assert all(torch.equal(a, c) and torch.equal(b, d) for (a, b), (c, d) in zip(rest, full[stop:]))


def test_learning_the_transforms_output_keys_leaves_the_global_generators_as_they_were(hf):
    import random

    ds, _ = hf
    crop = T.Compose([T.RandomResizedCrop(32), T.ToTensor()])
    fn, collate = example_transforms(crop)
    ds.set_transform(fn)

    def draws_after(**kw):
        torch.manual_seed(7)
        random.seed(7)
        DataLoader(ds, batch_size=4, shuffle=True, collate_fn=collate, **kw)
        return torch.rand(3), random.random()

    # Found (runs the transform on the first sample) against named (runs nothing).
    found, named = draws_after(), draws_after(transform=crop)
    assert torch.equal(found[0], named[0]) and found[1] == named[1]


def one_size_table(jpeg_folder, tmp_path, embedded, odd=None, turn=None):
    """A `datasets` imagefolder table of 12 images all 48x40 (CIFAR's kind: made one size),
    but for the file `odd` (resized to 50x40) and `turn` (saved 40x48 with orientation 6, so
    that `datasets` gives it 48x40 like the rest)."""
    from PIL import Image

    root = tmp_path / "images"
    for k, jpg in enumerate(sorted(jpeg_folder.rglob("*.jpg"))[:12]):
        out = root / jpg.parent.name / f"{k}.jpg"
        out.parent.mkdir(parents=True, exist_ok=True)
        im = Image.open(jpg).convert("RGB").resize((50 if k == odd else 48, 40))
        if k == turn:
            exif = Image.Exif()
            exif[0x0112] = 6
            im.transpose(Image.Transpose.ROTATE_90).save(out, exif=exif.tobytes(), quality=95)
        else:
            im.save(out, quality=95)
    return imagefolder_table(root, tmp_path, embedded)


@pytest.mark.parametrize("embedded", [False, True])
def test_a_transform_without_a_crop_or_resize_over_a_table_of_one_size_runs_natively(jpeg_folder, tmp_path, embedded):
    """`ToTensor` and `Normalize` alone (CIFAR in `datasets`' format): hpuload reads every
    row's size from its image's headers (turned as `datasets` turns it) and runs the
    transform after a centre crop to that size: torch's batches. It went to torch's loader
    before, with a message about detection pipelines."""
    ds = one_size_table(jpeg_folder, tmp_path, embedded, turn=3)
    tf = T.Compose([T.ToTensor(), T.Normalize([0.5] * 3, [0.25] * 3)])
    want = torch_batches(ds, tf, batch_size=4)
    assert want[0][0].shape == (4, 3, 40, 48)
    ours = hpu_batches(ds, tf, batch_size=4)
    assert len(ours) == len(want)
    for (a, la), (b, lb) in zip(ours, want):
        assert torch.equal(la, lb) and torch.equal(a, b)


def test_a_transform_without_a_crop_or_resize_over_a_table_of_several_sizes_goes_to_torch(jpeg_folder, tmp_path):
    ds = one_size_table(jpeg_folder, tmp_path, True, odd=5)
    fn, collate = example_transforms(T.ToTensor())
    ds.set_transform(fn)
    with pytest.warns(FallbackWarning, match="the table.s images differ in size"):
        loader = DataLoader(ds, collate_fn=collate, batch_size=1)
    assert next(iter(loader))["pixel_values"].shape[1:] in ((3, 40, 48), (3, 40, 50))


def test_an_image_whose_header_is_gone_in_a_table_of_one_size_is_named_and_replaced_not_a_reason_to_fall_back(jpeg_folder, tmp_path):
    ds = one_size_table(jpeg_folder, tmp_path, False)
    stored = ds.cast_column("image", datasets.Image(decode=False))
    damaged = stored[3]["image"]["path"]
    with open(damaged, "rb") as f:
        head = f.read(10)
    with open(damaged, "wb") as f:
        f.write(head)
    fn, collate = example_transforms(T.ToTensor())
    ds.set_transform(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, collate_fn=collate, batch_size=4, backend="cpu")
    with pytest.warns(hpuload.torch.SkippedSampleWarning, match=rf"skipped sample 3 \({damaged}\)"):
        batches = [b["pixel_values"] for b in loader]
    assert sum(len(b) for b in batches) == len(ds) and all(b.shape[1:] == (3, 40, 48) for b in batches)


def test_a_damaged_image_in_a_table_of_images_and_captions_is_named_and_its_row_replaced(jpeg_folder, tmp_path):
    """An image and a caption per row (diffusers' shape), the function's other keys made from
    the row that replaces the damaged one, as the image is."""
    files = []
    for k, jpg in enumerate(sorted(jpeg_folder.rglob("*.jpg"))[:8]):
        files.append(str(tmp_path / f"{k}.jpg"))
        (tmp_path / f"{k}.jpg").write_bytes(jpg.read_bytes())
    (tmp_path / "3.jpg").write_bytes(b"\xff\xd8\xff\xe0")
    ds = datasets.Dataset.from_dict({"image": files, "text": [f"caption {k}" for k in range(8)]}).cast_column("image", datasets.Image())
    ds.save_to_disk(str(tmp_path / "saved"))  # the bytes embedded, the damaged ones too
    ds = datasets.load_from_disk(str(tmp_path / "saved"))
    tf = T.Compose([T.Resize(16), T.CenterCrop(16), T.ToTensor()])

    def preprocess(examples):
        examples["pixel_values"] = [tf(image.convert("RGB")) for image in examples["image"]]
        return examples

    def collate(examples):
        return {"pixel_values": torch.stack([e["pixel_values"] for e in examples]), "text": [e["text"] for e in examples]}

    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds.with_transform(preprocess), batch_size=4, collate_fn=collate, backend="cpu")
    with pytest.warns(hpuload.torch.SkippedSampleWarning, match=r"skipped sample 3 \(.*row 3\)"):
        batches = [(b["text"], list(loader.last_indices)) for b in loader]
    indices = [i for _, b in batches for i in b]
    assert len(indices) == 8 and 3 not in indices
    assert [t for b, _ in batches for t in b] == [f"caption {i}" for i in indices]


# --- Images and captions: diffusers' text-to-image fine-tuning ----------------------------------


def caption_table(jpeg_folder, tmp_path, n=12, captions_per_row=1):
    """A `save_to_disk` table of an image and its caption (or several), as the text-to-image
    datasets on the hub are."""
    files = [str(p) for p in sorted(jpeg_folder.rglob("*.jpg"))[:n]]
    text = [f"a photo number {k} of a thing" for k in range(n)]
    if captions_per_row > 1:
        text = [[f"take {j}: {t}" for j in range(captions_per_row)] for t in text]
    ds = datasets.Dataset.from_dict({"image": files, "text": text}).cast_column("image", datasets.Image())
    ds.save_to_disk(str(tmp_path / "captions"))
    return datasets.load_from_disk(str(tmp_path / "captions"))


def tokenizer(captions):
    """A stand-in for CLIP's tokenizer (no vocabulary offline): 24 ids per caption, padded."""
    ids = [[ord(c) % 97 for c in caption[:24]] + [0] * (24 - len(caption[:24])) for caption in captions]
    return torch.tensor(ids)


def diffusers_preprocess(train_transforms, image_column="image", caption_column="text"):
    """`train_text_to_image.py`'s `preprocess_train`, as it is written there."""
    import random

    def tokenize_captions(examples, is_train=True):
        captions = []
        for caption in examples[caption_column]:
            if isinstance(caption, str):
                captions.append(caption)
            elif isinstance(caption, (list, np.ndarray)):
                captions.append(random.choice(caption) if is_train else caption[0])
        return tokenizer(captions)

    def preprocess_train(examples):
        images = [image.convert("RGB") for image in examples[image_column]]
        examples["pixel_values"] = [train_transforms(image) for image in images]
        examples["input_ids"] = tokenize_captions(examples)
        return examples

    return preprocess_train


def diffusers_collate(examples):
    pixel_values = torch.stack([example["pixel_values"] for example in examples])
    pixel_values = pixel_values.to(memory_format=torch.contiguous_format).float()
    input_ids = torch.stack([example["input_ids"] for example in examples])
    return {"pixel_values": pixel_values, "input_ids": input_ids}


def diffusers_transforms(resolution, center_crop, random_flip):
    return T.Compose(
        [
            T.Resize(resolution, interpolation=T.InterpolationMode.BILINEAR),
            T.CenterCrop(resolution) if center_crop else T.RandomCrop(resolution),
            T.RandomHorizontalFlip() if random_flip else T.Lambda(lambda x: x),
            T.ToTensor(),
            T.Normalize([0.5], [0.5]),
        ]
    )


def test_diffusers_text_to_image_loader_runs_natively_with_torchs_batches(jpeg_folder, tmp_path):
    ds = caption_table(jpeg_folder, tmp_path).with_transform(diffusers_preprocess(diffusers_transforms(32, True, False)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = DataLoader(ds, shuffle=False, collate_fn=diffusers_collate, batch_size=4, num_workers=2, backend="cpu")
    theirs = torch.utils.data.DataLoader(ds, shuffle=False, collate_fn=diffusers_collate, batch_size=4)
    n = 0
    for a, b in zip(ours, theirs, strict=True):
        assert list(a) == ["pixel_values", "input_ids"] and a["pixel_values"].shape == (4, 3, 32, 32)
        assert torch.equal(a["input_ids"], b["input_ids"])
        assert (a["pixel_values"] - b["pixel_values"]).abs().max() <= 2 / 255 + 1e-6  # the CPU path's resize: 1 level
        n += 1
    assert n == 3


def test_an_image_processor_beside_the_captions_runs_natively_within_float_rounding(jpeg_folder, tmp_path):
    """A function that hands the batch's images to ViT's image processor (stacked tensors)
    and tokenizes the captions beside them: torch's batches, the pixels within float
    rounding of the processor's."""
    transformers = pytest.importorskip("transformers")
    processor = transformers.ViTImageProcessor(size={"height": 32, "width": 40})

    def preprocess(examples):
        inputs = processor([image.convert("RGB") for image in examples["image"]], return_tensors="pt")
        inputs["input_ids"] = tokenizer(examples["text"])
        return inputs

    ds = caption_table(jpeg_folder, tmp_path).with_transform(preprocess)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = list(DataLoader(ds, collate_fn=diffusers_collate, batch_size=4, num_workers=2, backend="cpu"))
    theirs = list(torch.utils.data.DataLoader(ds, collate_fn=diffusers_collate, batch_size=4))
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs):
        assert a["pixel_values"].shape == (4, 3, 32, 40) and torch.equal(a["input_ids"], b["input_ids"])
        assert (a["pixel_values"] - b["pixel_values"]).abs().max() < 1e-5


def test_an_image_processor_that_gives_more_than_pixel_values_beside_captions_goes_to_torchs_loader(jpeg_folder, tmp_path):
    """DETR's processor gives a `pixel_mask` too, which hpuload does not make: named."""
    transformers = pytest.importorskip("transformers")
    processor = transformers.DetrImageProcessor(size={"height": 32, "width": 40})

    def preprocess(examples):
        inputs = processor([image.convert("RGB") for image in examples["image"]])
        inputs["input_ids"] = tokenizer(examples["text"])
        return inputs

    ds = caption_table(jpeg_folder, tmp_path).with_transform(preprocess)
    with pytest.warns(FallbackWarning, match="gives \\['pixel_mask', 'pixel_values'\\]"):
        DataLoader(ds, collate_fn=diffusers_collate, batch_size=4)


def test_diffusers_random_crops_flips_and_caption_choices_run_natively_from_each_rows_own(jpeg_folder, tmp_path):
    ds = caption_table(jpeg_folder, tmp_path, captions_per_row=3)
    ds = ds.with_transform(diffusers_preprocess(diffusers_transforms(24, False, True)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, shuffle=True, collate_fn=diffusers_collate, batch_size=4, seed=3, backend="cpu")
    chosen = set()
    for epoch in range(3):
        for batch in loader:
            assert batch["pixel_values"].shape == (4, 3, 24, 24) and batch["pixel_values"].dtype == torch.float32
            for k, row in enumerate(loader.last_indices):
                options = [tokenizer([f"take {j}: a photo number {row} of a thing"])[0] for j in range(3)]
                which = [j for j, o in enumerate(options) if torch.equal(o, batch["input_ids"][k])]
                assert which, (row, batch["input_ids"][k])
                chosen.add((row, which[0]))
    assert len(chosen) > 20  # each row's captions drawn, not one fixed


def test_a_caption_function_drawing_from_torch_beside_the_transform_goes_to_torch(jpeg_folder, tmp_path):
    transform = diffusers_transforms(24, False, True)

    def preprocess(examples):
        examples["pixel_values"] = [transform(image.convert("RGB")) for image in examples["image"]]
        examples["noise"] = [torch.rand(()) for _ in examples["text"]]  # drawn from torch, after the transform's
        return examples

    ds = caption_table(jpeg_folder, tmp_path).with_transform(preprocess)
    with pytest.warns(FallbackWarning, match=r"preprocess .*gives row \d+ another 'noise'"):
        DataLoader(ds, batch_size=4)


def test_a_caption_loader_resumed_mid_epoch_gives_the_batches_the_run_would_have(jpeg_folder, tmp_path):
    from conftest import state_after

    ds = caption_table(jpeg_folder, tmp_path, captions_per_row=3)
    ds = ds.with_transform(diffusers_preprocess(diffusers_transforms(24, False, True)))

    def make():
        return DataLoader(ds, shuffle=True, collate_fn=diffusers_collate, batch_size=4, seed=9, backend="cpu")

    whole = [{k: v.clone() for k, v in b.items()} for b in make()]
    resumed = make()
    resumed.load_state_dict(state_after(make(), 1))
    rest = list(resumed)
    assert len(rest) == 2
    for a, b in zip(rest, whole[1:]):
        assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["pixel_values"], b["pixel_values"])


def test_a_caption_function_handing_grey_images_unconverted_goes_to_torch_naming_the_row(jpeg_folder, tmp_path):
    from PIL import Image

    grey = tmp_path / "grey.jpg"
    Image.open(sorted(jpeg_folder.rglob("*.jpg"))[0]).convert("L").save(grey)
    files = [str(p) for p in sorted(jpeg_folder.rglob("*.jpg"))[1:12]]
    files.insert(2, str(grey))  # not among the rows the function is checked on (0, 3, 6, 9, 11)
    ds = datasets.Dataset.from_dict({"image": files, "text": ["a caption"] * 12}).cast_column("image", datasets.Image())
    ds.save_to_disk(str(tmp_path / "saved"))
    ds = datasets.load_from_disk(str(tmp_path / "saved"))
    transform = T.Compose([T.Resize(16), T.CenterCrop(16), T.ToTensor()])

    def preprocess(examples):  # no convert("RGB"): torch's loader gives the grey one channel
        examples["pixel_values"] = [transform(image) for image in examples["image"]]
        return examples

    with pytest.warns(FallbackWarning, match=r"preprocess .*own mode, and row 2 is in mode L"):
        DataLoader(ds.with_transform(preprocess), batch_size=2)


def test_run_maes_transform_converting_grey_images_itself_runs_natively_with_torchs_batches(jpeg_folder, tmp_path):
    """transformers' `run_mae.py`: the function hands each image over in its own mode, and
    the Compose's first step (a Lambda) converts it to RGB, so a grey row is no reason to go
    to torch's loader."""
    from PIL import Image

    grey = tmp_path / "grey.jpg"
    Image.open(sorted(jpeg_folder.rglob("*.jpg"))[0]).convert("L").save(grey)
    files = [str(p) for p in sorted(jpeg_folder.rglob("*.jpg"))[1:12]]
    files.insert(2, str(grey))
    ds = datasets.Dataset.from_dict({"image": files}).cast_column("image", datasets.Image())
    ds.save_to_disk(str(tmp_path / "saved"))
    ds = datasets.load_from_disk(str(tmp_path / "saved"))
    transforms = T.Compose(
        [
            T.Lambda(lambda img: img.convert("RGB") if img.mode != "RGB" else img),
            T.Resize(24, interpolation=T.InterpolationMode.BICUBIC),
            T.CenterCrop(24),
            T.ToTensor(),
        ]
    )

    def preprocess_images(examples):
        examples["pixel_values"] = [transforms(image) for image in examples["image"]]
        return examples

    def collate_fn(examples):
        return {"pixel_values": torch.stack([example["pixel_values"] for example in examples])}

    ds.set_transform(preprocess_images)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = DataLoader(ds, batch_size=4, collate_fn=collate_fn, backend="cpu")
    theirs = torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=collate_fn)
    for a, b in zip(ours, theirs, strict=True):
        assert a["pixel_values"].shape == b["pixel_values"].shape == (4, 3, 24, 24)
        assert (a["pixel_values"] - b["pixel_values"]).abs().max() <= 1 / 255 + 1e-6  # the CPU path's resize: 1 level


def test_diffusers_unconditional_function_leaving_the_label_out_runs_natively_with_torchs_batches(hf):
    """diffusers' `train_unconditional.py` over a labelled folder: its function returns
    `{"input": images}` alone, and no collate_fn is given."""
    ds, _ = hf
    augmentations = T.Compose(
        [T.Resize(32, interpolation=T.InterpolationMode.BILINEAR), T.CenterCrop(32), T.ToTensor(), T.Normalize([0.5], [0.5])]
    )

    def transform_images(examples):
        images = [augmentations(image.convert("RGB")) for image in examples["image"]]
        return {"input": images}

    ds = ds.with_transform(transform_images)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = DataLoader(ds, batch_size=8, num_workers=2, backend="cpu")
    n = 0
    for a, b in zip(ours, torch.utils.data.DataLoader(ds, batch_size=8), strict=True):
        assert list(a) == ["input"] and a["input"].shape == b["input"].shape
        assert (a["input"] - b["input"]).abs().max() <= 2 / 255 + 1e-6  # the CPU path's resize: 1 level
        n += 1
    assert n == len(ds) // 8 + (len(ds) % 8 > 0)


def test_a_labelled_tables_function_that_adds_keys_runs_natively_with_every_key_torch_gives(jpeg_folder, tmp_path):
    """A function that makes more than the image tensor and the label (here a caption's token
    ids, beside the table's own file name column) gives every key, as torch's loader does; it
    lost the others before."""
    files = [str(p) for p in sorted(jpeg_folder.rglob("*.jpg"))[:8]]
    ds = datasets.Dataset.from_dict(
        {"image": files, "label": [k % 3 for k in range(8)], "name": [f"file {k}" for k in range(8)]}
    ).cast_column("image", datasets.Image())
    ds.save_to_disk(str(tmp_path / "saved"))
    ds = datasets.load_from_disk(str(tmp_path / "saved"))
    transform = T.Compose([T.Resize(16), T.CenterCrop(16), T.PILToTensor()])

    def preprocess(examples):
        examples["pixel_values"] = [transform(image.convert("RGB")) for image in examples["image"]]
        examples["input_ids"] = tokenizer(examples["name"])
        del examples["image"]
        return examples

    ds = ds.with_transform(preprocess)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = list(DataLoader(ds, batch_size=4, backend="cpu"))
    theirs = list(torch.utils.data.DataLoader(ds, batch_size=4))
    for a, b in zip(ours, theirs, strict=True):
        assert list(a) == list(b) == ["label", "name", "pixel_values", "input_ids"]
        assert torch.equal(a["label"], b["label"]) and a["name"] == b["name"] and torch.equal(a["input_ids"], b["input_ids"])
        assert (a["pixel_values"].int() - b["pixel_values"].int()).abs().max() <= 1


def test_a_caption_function_replaced_between_epochs_is_checked_again(jpeg_folder, tmp_path):
    ds = caption_table(jpeg_folder, tmp_path).with_transform(diffusers_preprocess(diffusers_transforms(24, True, False)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, collate_fn=diffusers_collate, batch_size=4, backend="cpu")
        assert len(list(loader)) == 3
        assert len(list(loader)) == 3  # the same function: not checked again, the same path
    transform = diffusers_transforms(24, True, False)

    def reads_mode(examples):
        examples["modes"] = [image.mode for image in examples["image"]]
        examples["pixel_values"] = [transform(image.convert("RGB")) for image in examples["image"]]
        examples["input_ids"] = tokenizer(examples["text"])
        return examples

    ds.set_transform(reads_mode)
    with pytest.warns(FallbackWarning, match=r"reads_mode .*reads the image's 'mode'"):
        batches = list(loader)
    assert len(batches) == 3 and batches[0]["pixel_values"].shape == (4, 3, 24, 24)
