"""Hugging Face tables of image paths, whose `set_transform` function reads the files itself:
transformers' and optimum-habana's `run_clip.py` (a JSON lines file of `image_path` and
`caption`, the captions tokenized by `map`, the images read by torchvision's `read_image` in
RGB and put through a `torch.nn.Module` holding a `torch.nn.Sequential` of transforms,
compiled by `torch.jit.script` in transformers' copy), and the same shape with Pillow's
`Image.open` and a label column."""

import io
import json
import os
import warnings

import pytest
import torch

datasets = pytest.importorskip("datasets")

import hpuload  # noqa: E402
from hpuload.torch import DataLoader, FallbackWarning  # noqa: E402
from PIL import Image  # noqa: E402
from torchvision import io as tvio  # noqa: E402
from torchvision import transforms as T  # noqa: E402
from torchvision.io import ImageReadMode, read_image  # noqa: E402

MEAN, STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]


class Transform(torch.nn.Module):
    """`run_clip.py`'s transform, as it is written there."""

    def __init__(self, image_size, mean, std):
        super().__init__()
        self.transforms = torch.nn.Sequential(
            T.Resize([image_size], interpolation=T.InterpolationMode.BICUBIC),
            T.CenterCrop(image_size),
            T.ConvertImageDtype(torch.float),
            T.Normalize(mean, std),
        )

    def forward(self, x) -> torch.Tensor:
        with torch.no_grad():
            x = self.transforms(x)
        return x


class Doubled(Transform):
    """A module whose own code does more than hand its input to its steps."""

    def forward(self, x) -> torch.Tensor:
        return self.transforms(x) * 2


def run_clip_functions(image_transformations, image_column="image_path"):
    """`run_clip.py`'s `transform_images` and `collate_fn`, as they are written there."""

    def transform_images(examples):
        images = [read_image(image_file, mode=ImageReadMode.RGB) for image_file in examples[image_column]]
        examples["pixel_values"] = [image_transformations(image) for image in images]
        return examples

    def collate_fn(examples):
        pixel_values = torch.stack([example["pixel_values"] for example in examples])
        input_ids = torch.tensor([example["input_ids"] for example in examples], dtype=torch.long)
        attention_mask = torch.tensor([example["attention_mask"] for example in examples], dtype=torch.long)
        return {"pixel_values": pixel_values, "input_ids": input_ids, "attention_mask": attention_mask, "return_loss": True}

    return transform_images, collate_fn


def tokenize(examples):
    """A stand-in for the script's tokenizer (no vocabulary offline): 16 ids and a mask."""
    ids = [[ord(c) % 97 for c in caption[:16]] + [0] * (16 - len(caption[:16])) for caption in examples["caption"]]
    examples["input_ids"] = ids
    examples["attention_mask"] = [[int(i != 0) for i in row] for row in ids]
    return examples


def clip_table(files, tmp_path, name="train.json"):
    """`load_dataset("json")` of the image paths and captions, filtered and tokenized as
    `run_clip.py` does."""

    def filter_corrupt_images(examples):
        valid = []
        for image_file in examples["image_path"]:
            try:
                Image.open(image_file)
                valid.append(True)
            except Exception:
                valid.append(False)
        return valid

    with open(tmp_path / name, "w") as f:
        for k, path in enumerate(files):
            f.write(json.dumps({"image_path": str(path), "caption": f"a photo number {k} of a thing"}) + "\n")
    ds = datasets.load_dataset("json", data_files={"train": str(tmp_path / name)}, cache_dir=str(tmp_path / "cache"))["train"]
    ds = ds.filter(filter_corrupt_images, batched=True)
    return ds.map(tokenize, batched=True, remove_columns=["caption"])


@pytest.fixture
def files(jpeg_folder):
    return sorted(jpeg_folder.rglob("*.jpg"))[:12]


def same_batches(ours, theirs, within=0.0):
    n = 0
    for a, b in zip(ours, theirs, strict=True):
        assert list(a) == list(b) and a["return_loss"] is True
        assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["attention_mask"], b["attention_mask"])
        assert a["pixel_values"].shape == b["pixel_values"].shape and a["pixel_values"].dtype == b["pixel_values"].dtype
        assert (a["pixel_values"] - b["pixel_values"]).abs().max() <= within
        n += 1
    return n


@pytest.mark.parametrize("scripted", [True, False], ids=["transformers-scripted", "optimum-habana"])
def test_run_clip_loader_runs_natively_with_torchs_batches(files, tmp_path, scripted):
    transform = Transform(32, MEAN, STD)
    transform = torch.jit.script(transform) if scripted else transform
    transform_images, collate_fn = run_clip_functions(transform)
    ds = clip_table(files, tmp_path)
    ds.set_transform(transform_images)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = DataLoader(ds, batch_size=4, collate_fn=collate_fn, num_workers=2, backend="cpu")
    theirs = torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=collate_fn)
    # The CPU path computes torchvision's bicubic resize of the uint8 tensor exactly.
    assert same_batches(ours, theirs) == 3


def test_a_path_table_with_labels_read_by_pillow_runs_natively_and_resumes_exactly(files, tmp_path):
    from conftest import state_after

    train = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.ToTensor()])
    ds = datasets.Dataset.from_dict({"path": [str(p) for p in files], "label": [k % 3 for k in range(len(files))]})

    def preprocess(batch):
        batch["pixel_values"] = [train(Image.open(p).convert("RGB")) for p in batch["path"]]
        batch["labels"] = batch["label"]
        return batch

    ds.set_transform(preprocess)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=4, shuffle=True, seed=5, backend="cpu")
    first = list(loader)
    assert [list(b) for b in first] == [["path", "label", "pixel_values", "labels"]] * 3
    rows = [r for b in first for r in b["path"]]
    assert sorted(rows) == sorted(str(p) for p in files)  # every row once, its own path
    for b in first:
        assert b["pixel_values"].shape == (4, 3, 24, 24)
        assert b["labels"].tolist() == [[str(p) for p in files].index(r) % 3 for r in b["path"]]
    state = state_after(DataLoader(ds, batch_size=4, shuffle=True, seed=5, backend="cpu"), 1)
    resumed = DataLoader(ds, batch_size=4, shuffle=True, seed=5, backend="cpu")
    resumed.load_state_dict(state)
    for a, b in zip(first[1:], resumed, strict=True):
        assert a["path"] == b["path"] and torch.equal(a["pixel_values"], b["pixel_values"])


def test_a_path_table_read_through_the_torchvision_io_module_runs_natively(files, tmp_path):
    transform = T.Compose([T.Resize(40), T.CenterCrop(32), T.ConvertImageDtype(torch.float)])
    _, collate_fn = run_clip_functions(None)

    def transform_images(examples):
        examples["pixel_values"] = [transform(tvio.decode_image(p, tvio.ImageReadMode.RGB)) for p in examples["image_path"]]
        return examples

    ds = clip_table(files, tmp_path)
    ds.set_transform(transform_images)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = DataLoader(ds, batch_size=4, collate_fn=collate_fn, backend="cpu")
    assert same_batches(ours, torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=collate_fn)) == 3


def test_a_path_table_read_in_each_files_own_mode_goes_to_torch_where_a_file_is_grey(files, tmp_path):
    grey = tmp_path / "grey.jpg"
    Image.open(files[0]).convert("L").save(grey)
    ds = clip_table([*files[:5], grey], tmp_path)

    transform = Transform(32, [0.5], [0.25])

    def transform_images(examples):
        examples["pixel_values"] = [transform(read_image(f)) for f in examples["image_path"]]
        return examples

    ds.set_transform(transform_images)
    with pytest.warns(FallbackWarning, match=r"row 5 \(.*grey\.jpg\) is in mode L"):
        DataLoader(ds, batch_size=2)


def test_a_path_table_function_reading_paths_it_made_goes_to_torch_naming_it(files, tmp_path):
    transform = Transform(32, MEAN, STD)
    ds = clip_table(files, tmp_path)

    def transform_images(examples):
        examples["pixel_values"] = [transform(read_image(os.path.normpath(f), mode=ImageReadMode.RGB)) for f in examples["image_path"]]
        return examples

    ds.set_transform(transform_images)
    with pytest.warns(FallbackWarning, match=r"transform_images .*read_image reads a str, not the table's path"):
        loader = DataLoader(ds, batch_size=4)
    assert isinstance(next(iter(loader))["pixel_values"], torch.Tensor)


@pytest.mark.parametrize("scripted", [True, False], ids=["scripted", "module"])
def test_a_transform_module_that_does_more_than_its_steps_goes_to_torch(files, tmp_path, scripted):
    transform = Doubled(32, MEAN, STD)
    transform_images, collate_fn = run_clip_functions(torch.jit.script(transform) if scripted else transform)
    ds = clip_table(files, tmp_path)
    ds.set_transform(transform_images)
    with pytest.warns(FallbackWarning):
        loader = DataLoader(ds, batch_size=4, collate_fn=collate_fn)
    assert not isinstance(loader, hpuload.torch.DataLoader)


def test_a_damaged_file_in_a_path_table_is_named_and_its_row_replaced(files, tmp_path):
    damaged = tmp_path / "damaged.jpg"
    damaged.write_bytes(files[1].read_bytes()[:2000])  # a header Pillow opens, then little
    transform_images, collate_fn = run_clip_functions(Transform(32, MEAN, STD))
    ds = clip_table([*files[:3], damaged, *files[3:8]], tmp_path)
    ds.set_transform(transform_images)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=3, collate_fn=collate_fn, backend="cpu")
    with pytest.warns(hpuload.torch.SkippedSampleWarning, match=r"damaged\.jpg"):
        batches = [(b, list(loader.last_indices)) for b in loader]
    indices = [i for _, b in batches for i in b]
    assert 3 not in indices and len(indices) == 9
    for batch, rows in batches:
        ids = torch.tensor([tokenize({"caption": [f"a photo number {r} of a thing"]})["input_ids"][0] for r in rows])
        assert torch.equal(batch["input_ids"], ids)  # each sample's own row, the replacement's too


def test_run_clip_trains_under_the_transformers_trainer_on_hpuload_after_install(files, tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    import hpuload.transformers

    transform_images, collate_fn = run_clip_functions(torch.jit.script(Transform(32, MEAN, STD)))
    ds = clip_table(files, tmp_path)
    ds.set_transform(transform_images)

    class DualEncoder(torch.nn.Module):
        """Two linear towers and CLIP's symmetric contrastive loss."""

        def __init__(self):
            super().__init__()
            self.image = torch.nn.Linear(3 * 32 * 32, 8)
            self.text = torch.nn.Embedding(97, 8)

        def forward(self, input_ids, attention_mask, pixel_values, return_loss=True):
            image = torch.nn.functional.normalize(self.image(pixel_values.flatten(1)), dim=-1)
            mask = attention_mask.unsqueeze(-1).float()
            text = torch.nn.functional.normalize((self.text(input_ids) * mask).sum(1) / mask.sum(1), dim=-1)
            logits = image @ text.T
            target = torch.arange(len(logits))
            loss = (torch.nn.functional.cross_entropy(logits, target) + torch.nn.functional.cross_entropy(logits.T, target)) / 2
            return {"loss": loss, "logits_per_image": logits}

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, max_steps=3, remove_unused_columns=False,
        report_to=[], use_cpu=True, save_strategy="no", logging_strategy="no", seed=1,
    )
    hpuload.transformers.install()
    try:
        trainer = transformers.Trainer(model=DualEncoder(), args=args, train_dataset=ds, data_collator=collate_fn)
        with warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            loader = trainer.get_train_dataloader()
            assert isinstance(loader, DataLoader)
            batch = next(iter(loader))
            assert batch["pixel_values"].shape == (4, 3, 32, 32) and batch["input_ids"].shape == (4, 16)
            result = trainer.train()
        assert result.global_step == 3 and torch.isfinite(torch.tensor(result.training_loss))
    finally:
        hpuload.transformers.uninstall()


def img2dataset_parquet(files, tmp_path):
    """A Parquet shard as img2dataset writes one (the encoded image in a binary `jpg` column,
    its caption in `txt`), loaded by `load_dataset("parquet")`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "key": [f"{k:09}" for k in range(len(files))],
            "jpg": pa.array([f.read_bytes() for f in files], pa.binary()),
            "txt": [f"a photo number {k} of a thing" for k in range(len(files))],
        }
    )
    pq.write_table(table, tmp_path / "00000.parquet", row_group_size=4)
    return datasets.load_dataset("parquet", data_files=str(tmp_path / "00000.parquet"), split="train", cache_dir=str(tmp_path / "cache"))


def test_a_table_of_encoded_images_the_function_opens_runs_natively_with_torchs_batches(files, tmp_path):
    ds = img2dataset_parquet(files, tmp_path)
    transform = T.Compose([T.Resize(36), T.CenterCrop(32), T.ToTensor()])

    def preprocess(examples):
        examples["pixel_values"] = [transform(Image.open(io.BytesIO(b)).convert("RGB")) for b in examples["jpg"]]
        examples["input_ids"] = tokenize({"caption": examples["txt"]})["input_ids"]
        return examples

    def collate_fn(examples):
        return {
            "pixel_values": torch.stack([e["pixel_values"] for e in examples]),
            "input_ids": torch.tensor([e["input_ids"] for e in examples]),
            "key": [e["key"] for e in examples],
        }

    ds.set_transform(preprocess)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = DataLoader(ds, batch_size=4, collate_fn=collate_fn, num_workers=2, backend="cpu")
    n = 0
    for a, b in zip(ours, torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=collate_fn), strict=True):
        assert a["key"] == b["key"] and torch.equal(a["input_ids"], b["input_ids"])
        assert a["pixel_values"].shape == (4, 3, 32, 32)
        assert (a["pixel_values"] - b["pixel_values"]).abs().max() <= 1 / 255 + 1e-6  # the CPU path's resize: 1 level
        n += 1
    assert n == 3


def test_a_table_of_encoded_images_read_otherwise_goes_to_torch_naming_it(files, tmp_path):
    ds = img2dataset_parquet(files, tmp_path)
    transform = T.Compose([T.Resize(36), T.CenterCrop(32), T.ToTensor()])

    def preprocess(examples):
        streams = [io.BytesIO(b) for b in examples["jpg"]]
        examples["pixel_values"] = [transform(Image.open(io.BytesIO(s.read())).convert("RGB")) for s in streams]
        return examples

    ds.set_transform(preprocess)
    with pytest.warns(FallbackWarning, match=r"preprocess .*reads the image's bytes itself"):
        DataLoader(ds, batch_size=4)


def test_a_path_table_opened_in_each_files_own_mode_runs_natively_where_every_file_is_rgb(files, tmp_path):
    transform = T.Compose([T.Resize(36), T.CenterCrop(32), T.PILToTensor()])
    ds = clip_table(files, tmp_path)

    def transform_images(examples):
        examples["pixel_values"] = [transform(Image.open(f)) for f in examples["image_path"]]
        return examples

    _, collate_fn = run_clip_functions(None)
    ds.set_transform(transform_images)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = DataLoader(ds, batch_size=4, collate_fn=collate_fn, backend="cpu")
    n = 0
    for a, b in zip(ours, torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=collate_fn), strict=True):
        assert torch.equal(a["input_ids"], b["input_ids"]) and a["pixel_values"].dtype == torch.uint8
        assert (a["pixel_values"].int() - b["pixel_values"].int()).abs().max() <= 1  # the CPU path's resize
        n += 1
    assert n == 3


def test_a_path_tables_function_replaced_between_epochs_is_checked_again(files, tmp_path):
    transform_images, collate_fn = run_clip_functions(Transform(32, MEAN, STD))
    ds = clip_table(files, tmp_path)
    ds.set_transform(transform_images)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(ds, batch_size=4, collate_fn=collate_fn, backend="cpu")
    assert len(list(loader)) == 3

    def reads_made_paths(examples):
        examples["pixel_values"] = [
            Transform(32, MEAN, STD)(read_image(os.path.normpath(f), mode=ImageReadMode.RGB)) for f in examples["image_path"]
        ]
        return examples

    ds.set_transform(reads_made_paths)
    with pytest.warns(FallbackWarning, match="reads_made_paths"):
        batches = list(loader)
    assert len(batches) == 3 and batches[0]["pixel_values"].shape == (4, 3, 32, 32)
