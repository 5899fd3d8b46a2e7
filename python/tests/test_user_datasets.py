"""The user's own Dataset classes: learnt from their `__getitem__` (lazy image opening, a
stand-in transform) and run natively, or sent to torch's DataLoader naming the line that needs
pixels. Never different output."""

import csv
import json
import io
import math
import random
import re
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from PIL import Image
from torchvision import datasets
from torchvision import transforms as T

import hpuload
from hpuload import _probe
from hpuload.torch import DataLoader, FallbackReason, FallbackWarning
from conftest import png_with_chunk


def write_csv(root, path):
    """A CSV of `path,label` rows over an ImageFolder's files, in its order."""
    folder = datasets.ImageFolder(root)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["file", "label"])
        for p, t in folder.samples:
            w.writerow([p, t])
    return folder


class CsvImageDataset(tud.Dataset):
    """What most training code outside the reference scripts looks like."""

    def __init__(self, csv_path, transform=None):
        with open(csv_path) as f:
            self.rows = [(r["file"], int(r["label"])) for r in csv.DictReader(f)]
        self.transform = transform

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        path, label = self.rows[i]
        image = Image.open(path).convert("RGB")
        if self.transform is not None:
            image = self.transform(image)
        return image, label


class DictDataset(CsvImageDataset):
    def __getitem__(self, i):
        path, label = self.rows[i]
        with Image.open(path) as im:
            image = im.convert("RGB")
        return {"pixel_values": self.transform(image), "labels": torch.tensor(label)}


class ReadsTheSize(CsvImageDataset):
    """A label of the image's own size: the wide images' label moved by 10."""

    def __getitem__(self, i):
        path, label = self.rows[i]
        image = Image.open(path).convert("RGB")
        if image.size[0] > image.height:
            label += 10
        return self.transform(image), label


class OpensBytes(CsvImageDataset):
    def __getitem__(self, i):
        path, label = self.rows[i]
        with open(path, "rb") as f:
            data = f.read()
        return self.transform(Image.open(io.BytesIO(data)).convert("RGB")), label


class PicksAtRandom(CsvImageDataset):
    def __getitem__(self, i):
        path, label = self.rows[random.randrange(len(self.rows))]
        return self.transform(Image.open(path).convert("RGB")), label


class NoisyLabels(CsvImageDataset):
    """Label noise drawn per call, as noisy-label studies inject it: one call in ten gives a
    random class."""

    def __getitem__(self, i):
        path, label = self.rows[i]
        if random.random() < 0.1:
            label = random.randrange(10)
        return self.transform(Image.open(path).convert("RGB")), label


class SwapsNowAndThen(CsvImageDataset):
    """One call in ten reads another sample than the one asked for."""

    def __getitem__(self, i):
        path, label = self.rows[random.randrange(len(self.rows)) if random.random() < 0.1 else i]
        return self.transform(Image.open(path).convert("RGB")), label


class FoodLike(datasets.VisionDataset):
    """Shaped like torchvision's Food101 / Flowers102 / StanfordCars: VisionDataset, file lists
    kept privately, `PIL.Image.open(file).convert("RGB")`, `transform` and `target_transform`."""

    def __init__(self, root, transform=None, target_transform=None):
        super().__init__(root, transform=transform, target_transform=target_transform)
        folder = datasets.ImageFolder(root)
        self._image_files = [p for p, _ in folder.samples]
        self._labels = [t for _, t in folder.samples]
        self.classes = folder.classes

    def __len__(self):
        return len(self._image_files)

    def __getitem__(self, idx):
        image_file, label = self._image_files[idx], self._labels[idx]
        image = Image.open(image_file).convert("RGB")
        if self.transform:
            image = self.transform(image)
        if self.target_transform:
            label = self.target_transform(label)
        return image, label


EXACT = T.Compose([T.CenterCrop(32), T.PILToTensor()])


def no_fallback(make):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        return make()


def test_a_csv_dataset_of_the_users_own_runs_natively_with_torchs_labels_and_pixels(png_folder, tmp_path):
    write_csv(png_folder, tmp_path / "train.csv")
    ds = CsvImageDataset(tmp_path / "train.csv", EXACT)
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu"))
    assert type(loader) is DataLoader
    ours = [(x, y) for x, y in loader]
    theirs = list(tud.DataLoader(ds, batch_size=4))
    assert len(ours) == len(theirs)
    for (x1, y1), (x2, y2) in zip(ours, theirs):
        assert y1.tolist() == y2.tolist()
        assert x1.shape == x2.shape and x1.dtype == x2.dtype
        assert (x1.int() - x2.int()).abs().max().item() <= 1
    # The probe left the dataset and the global generators as they were.
    assert ds.transform is EXACT


def test_random_augmentation_of_a_users_dataset_is_drawn_natively_per_sample(jpeg_folder, tmp_path):
    write_csv(jpeg_folder, tmp_path / "train.csv")
    tf = T.Compose([T.RandomResizedCrop(48), T.RandomHorizontalFlip(), T.ToTensor()])
    ds = CsvImageDataset(tmp_path / "train.csv", tf)
    state, py_state = torch.get_rng_state(), random.getstate()
    samples, keys, form, label, extras, output, before, more = _probe.probe(ds)[:8]
    assert torch.equal(state, torch.get_rng_state()) and py_state == random.getstate(), "probing drew nothing"
    assert samples == ds.rows and keys is None and form == (False, True, False) and label is None and extras is None and output is None and before == () and more is None and ds.transform is tf
    loader = no_fallback(lambda: DataLoader(ds, batch_size=8, shuffle=True, seed=3))
    seen = []
    for x, y in loader:
        assert x.shape[1:] == (3, 48, 48) and x.dtype == torch.float32
        seen.extend(zip(loader.last_indices, y.tolist()))
    assert sorted(i for i, _ in seen) == list(range(len(ds)))
    assert all(label == ds.rows[i][1] for i, label in seen)


class LabelFirstDict(CsvImageDataset):
    def __getitem__(self, i):
        path, label = self.rows[i]
        return {"labels": label, "pixel_values": self.transform(Image.open(path).convert("RGB"))}


@pytest.mark.parametrize("cls", [DictDataset, LabelFirstDict])
def test_a_dataset_returning_dicts_keeps_its_keys_in_their_order(png_folder, tmp_path, cls):
    """The batch's keys, and each sample's a collate_fn gets, come in the order the Dataset's
    dicts hold them (code that unpacks `batch.values()` gets what it gets from torch's
    loader)."""
    write_csv(png_folder, tmp_path / "train.csv")
    ds = cls(tmp_path / "train.csv", EXACT)
    batch = next(iter(no_fallback(lambda: DataLoader(ds, batch_size=3, backend="cpu"))))
    want = next(iter(tud.DataLoader(ds, batch_size=3)))
    assert list(batch) == list(want) == list(ds[0])
    orders = next(iter(no_fallback(lambda: DataLoader(ds, batch_size=3, backend="cpu", collate_fn=lambda b: [list(x) for x in b]))))
    assert orders == [list(ds[0])] * 3
    assert batch["labels"].tolist() == want["labels"].tolist()
    assert (batch["pixel_values"].int() - want["pixel_values"].int()).abs().max().item() <= 1


def test_torchvision_datasets_on_visiondataset_run_natively_with_their_target_transform(png_folder):
    ds = FoodLike(png_folder, transform=EXACT, target_transform=lambda t: t + 100)
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu"))
    labels = [y for _, y in loader]
    assert torch.cat(labels).tolist() == [ds[i][1] for i in range(len(ds))]
    assert min(torch.cat(labels).tolist()) >= 100
    assert loader.classes == ds.classes


@pytest.mark.parametrize(
    "cls, said",
    [
        (OpensBytes, r"BytesIO"),
        (PicksAtRandom, r"two different files"),
        # Drawn one call in ten: named by the generator they move and the line that draws.
        (NoisyLabels, r"draws from Python's `random` global generator at test_user_datasets.py:\d+ \(`if random.random\(\) < 0.1:`\)"),
        (SwapsNowAndThen, r"draws from Python's `random` global generator at test_user_datasets.py:\d+ \(`path, label = self.rows"),
    ],
)
def test_a_dataset_that_needs_pixels_itself_runs_on_torchs_loader_naming_the_line(jpeg_folder, tmp_path, cls, said):
    write_csv(jpeg_folder, tmp_path / "train.csv")
    ds = cls(tmp_path / "train.csv", T.Compose([T.CenterCrop(32), T.ToTensor()]))
    random.seed(0)  # the draws of the Datasets that now and then pick at random
    with pytest.warns(FallbackWarning, match=said) as record:
        loader = DataLoader(ds, batch_size=4)
    assert record[0].message.reason is FallbackReason.DATASET
    assert isinstance(loader, tud.DataLoader) and not isinstance(loader, DataLoader)
    x, y = next(iter(loader))
    assert x.shape == (4, 3, 32, 32)
    # Outside the probe, the image calls are PIL's own again.
    assert Image.open(ds.rows[0][0]).size[0] > 0


def test_a_label_the_dataset_computes_from_its_images_size_is_its_own_natively(jpeg_folder, tmp_path):
    """`image.size` and `image.height` are answered from each file's header (the size Pillow
    gives, as stored), so a label computed from them is the Dataset's own for every sample."""
    write_csv(jpeg_folder, tmp_path / "train.csv")
    ds = ReadsTheSize(tmp_path / "train.csv", T.Compose([T.CenterCrop(32), T.PILToTensor()]))
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu"))
    labels = torch.cat([y for _, y in loader]).tolist()
    assert labels == [ds[i][1] for i in range(len(ds))]
    assert any(y >= 10 for y in labels) and any(y < 10 for y in labels)


class NotesTheMode(CsvImageDataset):
    """Returns the mode Pillow opens each file in, and its size, beside the image."""

    def __getitem__(self, i):
        path, label = self.rows[i]
        image = Image.open(path)
        mode, size = image.mode, image.size
        return {"pixel_values": self.transform(image.convert("RGB")), "mode": mode, "size": size, "label": label}


def test_the_mode_and_size_of_files_no_header_reader_knows_are_pillows_own(tmp_path):
    """BMP and WebP files (not JPEG or PNG, whose headers hpuload reads itself): their
    mode and size come from Pillow's own open (a grey BMP is "L"; the probe's stand-in for
    `Image.open` once answered its own question with "RGB")."""
    import numpy as np

    grey = Image.fromarray((np.arange(40 * 56).reshape(40, 56) % 251).astype("uint8"), "L")
    files = []
    for k, (name, image) in enumerate([("g.bmp", grey), ("c.bmp", grey.convert("RGB")), ("g.webp", grey), ("c.webp", grey.convert("RGB").resize((60, 44)))]):
        image.save(tmp_path / name)
        files.append((tmp_path / name, k))
    with open(tmp_path / "train.csv", "w", newline="") as f:
        csv.writer(f).writerows([("file", "label"), *files])
    ds = NotesTheMode(tmp_path / "train.csv", T.Compose([T.CenterCrop(32), T.PILToTensor()]))
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu"))
    (batch,) = list(loader)
    assert batch["mode"] == [ds[i]["mode"] for i in range(len(ds))] and batch["mode"][0] == "L"
    assert [tuple(v) for v in zip(*(t.tolist() for t in batch["size"]))] == [ds[i]["size"] for i in range(len(ds))]


def test_a_users_dataset_whose_transform_hpuload_cannot_run_falls_back_before_probing(jpeg_folder, tmp_path):
    write_csv(jpeg_folder, tmp_path / "train.csv")
    ds = CsvImageDataset(tmp_path / "train.csv", T.Compose([T.RandomPerspective(), T.CenterCrop(32), T.ToTensor()]))
    with pytest.warns(FallbackWarning, match="RandomPerspective"):
        DataLoader(ds, batch_size=4)


class Unconverted(CsvImageDataset):
    """`Image.open(path)` without `.convert("RGB")`: torch's loader gives each image in its
    file's own mode (1 channel for a grey JPEG, 4 for an RGBA PNG)."""

    def __getitem__(self, i):
        path, label = self.rows[i]
        return self.transform(Image.open(path)), label


class ReadsTensors(CsvImageDataset):
    """torchvision's reader, called through its module as most code does: the transform gets
    a uint8 [C, H, W] tensor, in the file's own channels unless the mode says RGB."""

    mode = None

    def __getitem__(self, i):
        import torchvision.io

        path, label = self.rows[i]
        if self.mode is None:
            return self.transform(torchvision.io.read_image(path)), label
        return self.transform(torchvision.io.decode_image(torchvision.io.read_file(path), mode=self.mode)), label


def test_the_header_reader_answers_every_damaged_header_without_raising_or_looping(jpeg_folder):
    """`_probe.header_mode` reads untrusted bytes: a real JPEG's and PNG's first bytes (with
    and without Exif data) cut at every length, and 3000 seeded mutations of them (bytes
    flipped, segment lengths made 0, 1 or huge), each give a mode or None, never an
    exception or an endless loop."""
    from PIL import Image

    jpeg = next(iter(sorted(jpeg_folder.rglob("*.jpg")))).read_bytes()
    buf = io.BytesIO()
    Image.open(io.BytesIO(jpeg)).convert("RGBA").save(buf, "PNG")
    exif = Image.Exif()
    exif[0x0112] = 6
    turned = io.BytesIO()
    Image.open(io.BytesIO(jpeg)).save(turned, "JPEG", exif=exif.tobytes())
    rng = random.Random(7)
    heads = [jpeg[:700], buf.getvalue()[:100], turned.getvalue()[:200]]
    cases = [h[:n] for h in heads for n in range(len(h) + 1)]
    for _ in range(3000):
        data = bytearray(rng.choice(heads))
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(data))
            data[at] = rng.choice([0, 1, 2, 0xFF, 0xD8, 0xC0, 0xDA, rng.randrange(256)])
        cases.append(bytes(data[: rng.randint(0, len(data))]))
    for data in cases:
        reads = 0

        def read(offset, data=data):
            nonlocal reads
            reads += 1
            assert reads < 1000, "no progress"
            return data[offset : offset + 16]  # small reads: every refill path

        assert _probe.header_mode(read) in (None, "1", "L", "I;16", "RGB", "P", "LA", "RGBA", "CMYK")
    assert _probe.mode_of(data=jpeg) == "RGB" and _probe.mode_of(data=buf.getvalue()) == "RGBA"


def oriented_csv(jpeg_folder, tmp_path):
    """A CSV of 8 copies of the folder's first photos, carrying EXIF orientations 1 to 8."""
    folder = datasets.ImageFolder(jpeg_folder)
    rows = []
    for k, (path, label) in enumerate(folder.samples[:8]):
        exif = Image.Exif()
        exif[0x0112] = k + 1
        Image.open(path).save(tmp_path / f"{k}.jpg", exif=exif.tobytes(), quality=95)
        rows.append((tmp_path / f"{k}.jpg", label))
    with open(tmp_path / "train.csv", "w", newline="") as f:
        csv.writer(f).writerows([("file", "label"), *rows])
    return tmp_path / "train.csv"


class TurnsUpright(CsvImageDataset):
    """Code for phone photos: each image turned upright by its EXIF orientation."""

    def __getitem__(self, i):
        from PIL import ImageOps

        path, label = self.rows[i]
        image = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
        return self.transform(image), label


def test_a_dataset_turning_its_images_by_their_exif_orientation_runs_natively_with_torchs_pixels(jpeg_folder, tmp_path):
    """`ImageOps.exif_transpose` in `__getitem__` is learnt by the probe: the loader turns each
    image as it decodes it (the orientation read as Pillow reads it), with torch's pixels."""
    ds = TurnsUpright(oriented_csv(jpeg_folder, tmp_path), T.Compose([T.Resize((40, 56)), T.PILToTensor()]))
    assert _probe.probe(ds).form == (False, True, True)
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu"))
    ours = torch.cat([x for x, _ in loader])
    theirs = torch.cat([x for x, _ in tud.DataLoader(ds, batch_size=4)])
    assert torch.equal(ours, theirs)


class NotesTheUprightSize(CsvImageDataset):
    """Turns each image upright, then notes its size (width and height swapped by the
    orientations that turn a quarter) beside it."""

    def __getitem__(self, i):
        from PIL import ImageOps

        path, label = self.rows[i]
        image = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
        return {"pixel_values": self.transform(image), "size": image.size, "height": image.height, "label": label}


def test_the_size_of_an_image_turned_upright_is_pillows_natively(jpeg_folder, tmp_path):
    ds = NotesTheUprightSize(oriented_csv(jpeg_folder, tmp_path), T.Compose([T.Resize((40, 56)), T.PILToTensor()]))
    loader = no_fallback(lambda: DataLoader(ds, batch_size=8, backend="cpu"))
    (ours,) = list(loader)
    theirs = next(iter(tud.DataLoader(ds, batch_size=8)))
    assert all(torch.equal(a, b) for a, b in zip(ours["size"], theirs["size"], strict=True))
    assert torch.equal(ours["height"], theirs["height"]) and torch.equal(ours["pixel_values"], theirs["pixel_values"])
    stored = [Image.open(tmp_path / f"{k}.jpg").size for k in range(8)]
    assert [tuple(v) for v in zip(*(t.tolist() for t in ours["size"]))] != stored  # a quarter turn swaps them


def test_a_dataset_reading_with_torchvisions_exif_orientation_runs_natively_turned_as_torchvision_turns(jpeg_folder, tmp_path):
    """`read_image(..., apply_exif_orientation=True)` turns images by the orientation
    torchvision reads, which is not always Pillow's: a JPEG whose XMP segment comes before
    its Exif one, and one with a short APP1 segment before its Exif one, are turned by
    Pillow's `exif_transpose` and not by torchvision; a PNG's eXIf chunk before the image data turns
    both. The loader turns each image as torchvision does, natively."""
    from torchvision.io import ImageReadMode
    from torchvision.transforms import v2

    folder = write_csv(jpeg_folder, tmp_path / "train.csv")
    xmp = b"http://ns.adobe.com/xap/1.0/\0" + b'<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:Description tiff:Orientation="8"/></x:xmpmeta>'

    def app1(body):
        return b"\xff\xe1" + (len(body) + 2).to_bytes(2, "big") + body

    rows = []
    for k, (path, t) in enumerate(folder.samples[:10]):
        exif = Image.Exif()
        exif[0x0112] = 3 if k == 8 else k % 8 + 1
        out = tmp_path / f"{k}.{'png' if k == 9 else 'jpg'}"
        Image.open(path).save(out, exif=exif.tobytes())
        if k == 8:  # XMP first: Pillow turns by the Exif segment, torchvision by neither
            data = out.read_bytes()
            out.write_bytes(data[:2] + app1(xmp) + data[2:])
        rows.append((out, t))
    # A short APP1 segment before the Exif one: torchvision reads only the first.
    rows.append((tmp_path / "short_app1.jpg", 0))
    data = (tmp_path / "6.jpg").read_bytes()
    rows[-1][0].write_bytes(data[:2] + app1(b"Exif") + data[2:])
    with open(tmp_path / "train.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["file", "label"])
        w.writerows(rows)

    class TurnsAsTorchvision(CsvImageDataset):
        def __getitem__(self, i):
            import torchvision.io

            path, label = self.rows[i]
            return self.transform(torchvision.io.read_image(path, ImageReadMode.RGB, apply_exif_orientation=True)), label

    ds = TurnsAsTorchvision(tmp_path / "train.csv", v2.Compose([v2.Resize((40, 56)), v2.ToDtype(torch.float32, scale=True)]))
    assert _probe.probe(ds).form == (True, True, "torchvision")
    _same_batches(ds)
    # Not Pillow's turns: the XMP-first JPEG and the short APP1 segment are where they differ.
    from hpuload import _hpuload

    for path, _ in rows[8:9] + rows[10:]:
        data = Path(path).read_bytes()
        assert _hpuload.exif_orientation(data, "torchvision") == 1 != _hpuload.exif_orientation(data)


def _csv_with_one_file_replaced(jpeg_folder, tmp_path, k, odd, make):
    """`tmp_path / "train.csv"` over `jpeg_folder`'s files with the `k`-th replaced by `odd`,
    which `make(odd, original)` writes."""
    folder = write_csv(jpeg_folder, tmp_path / "train.csv")
    rows = [list(r) for r in folder.samples]
    make(odd, rows[k][0])
    rows[k][0] = str(odd)
    with open(tmp_path / "train.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["file", "label"])
        w.writerows(rows)
    return str(odd)


def _with_one_file_not_rgb(jpeg_folder, tmp_path, mode):
    """The CSV of `jpeg_folder` with its second file replaced by a copy in `mode` (a grey
    JPEG, an RGBA or palette PNG)."""
    odd = tmp_path / ("odd.jpg" if mode == "L" else "odd.png")
    return _csv_with_one_file_replaced(jpeg_folder, tmp_path, 1, odd, lambda out, src: Image.open(src).convert(mode).save(out))


def _same_batches(ds, **kwargs):
    want = list(tud.DataLoader(ds, batch_size=4, **kwargs))
    got = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu", **kwargs))
    assert isinstance(got, DataLoader)
    got = list(got)
    assert len(got) == len(want)
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape and x.dtype == wx.dtype and torch.equal(y, wy)
        assert torch.equal(x, wx)


@pytest.mark.parametrize("mode", ["L", "RGBA", "P"])
def test_images_opened_without_converting_to_rgb_go_to_torch_where_a_file_is_not_rgb(jpeg_folder, tmp_path, mode):
    tf = T.Compose([T.CenterCrop(32), T.PILToTensor()])
    # Every file RGB: the file's own mode is RGB, natively and exactly.
    write_csv(jpeg_folder, tmp_path / "train.csv")
    _same_batches(Unconverted(tmp_path / "train.csv", tf))
    # One file grey, RGBA or a palette: torch's loader gives it in that mode (here a batch
    # torch cannot stack); hpuload, which decodes to RGB, names the file and hands over.
    odd = _with_one_file_not_rgb(jpeg_folder, tmp_path, mode)
    with pytest.warns(FallbackWarning, match=rf"{odd} is in mode {mode},.*add \.convert\(\"RGB\"\)") as record:
        loader = DataLoader(Unconverted(tmp_path / "train.csv", tf), batch_size=4)
    assert record[0].message.reason is FallbackReason.DATASET
    assert not isinstance(loader, DataLoader)


def test_a_grey_dataset_opened_without_converting_gives_torchs_one_channel_batches(jpeg_folder, tmp_path):
    write_csv(jpeg_folder, tmp_path / "train.csv")
    ds = Unconverted(tmp_path / "train.csv", T.Compose([T.CenterCrop(32), T.ToTensor()]))
    grey = tmp_path / "grey"
    grey.mkdir()
    for k, (path, label) in enumerate(ds.rows[:8]):
        Image.open(path).convert("L").save(grey / f"{k}.jpg")
        ds.rows[k] = (str(grey / f"{k}.jpg"), label)
    ds.rows = ds.rows[:8]
    with pytest.warns(FallbackWarning, match="is in mode L"):
        loader = DataLoader(ds, batch_size=4)
    assert next(iter(loader))[0].shape == (4, 1, 32, 32)


@pytest.mark.parametrize("mode", [None, "RGB"])
def test_a_dataset_reading_tensors_runs_its_transform_as_on_tensors_natively(jpeg_folder, tmp_path, mode):
    from torchvision.io import ImageReadMode
    from torchvision.transforms import v2

    write_csv(jpeg_folder, tmp_path / "train.csv")
    # A tensor resize differs from Pillow's, so the same batches show it ran as on tensors.
    for tf in (
        v2.Compose([v2.Resize((40, 52)), v2.RandomHorizontalFlip(0.0), v2.ToDtype(torch.float32, scale=True)]),
        T.Compose([T.CenterCrop(40), T.ConvertImageDtype(torch.float)]),
    ):
        ds = ReadsTensors(tmp_path / "train.csv", tf)
        ds.mode = mode and ImageReadMode.RGB
        _same_batches(ds)


def test_a_dataset_reading_tensors_in_their_own_mode_goes_to_torch_where_a_file_is_not_rgb(jpeg_folder, tmp_path):
    from torchvision.transforms import v2

    odd = _with_one_file_not_rgb(jpeg_folder, tmp_path, "L")
    ds = ReadsTensors(tmp_path / "train.csv", v2.Compose([v2.Resize((40, 52)), v2.ToDtype(torch.float32, scale=True)]))
    with pytest.warns(FallbackWarning, match=rf"{odd} is in mode L, which torchvision's reader in its UNCHANGED mode keeps"):
        loader = DataLoader(ds, batch_size=4)
    assert not isinstance(loader, DataLoader)


#: The PyTorch tutorial's Dataset ("Datasets & DataLoaders"), as its readers write it: the
#: reader imported by name at the top of their module, a pandas table of file names and
#: labels, the path given to `decode_image`.
_TUTORIAL = """
import os
import pandas as pd
from torchvision.io import decode_image
from torch.utils.data import Dataset


class CustomImageDataset(Dataset):
    def __init__(self, annotations_file, img_dir, transform=None, target_transform=None):
        self.img_labels = pd.read_csv(annotations_file)
        self.img_dir = img_dir
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return len(self.img_labels)

    def __getitem__(self, idx):
        img_path = os.path.join(self.img_dir, self.img_labels.iloc[idx, 0])
        image = decode_image(img_path)
        label = self.img_labels.iloc[idx, 1]
        if self.transform:
            image = self.transform(image)
        if self.target_transform:
            label = self.target_transform(label)
        return image, label
"""


def _module_from(source: str, name: str, **originals):
    """A module made from `source` whose names in `originals` hold torchvision's own
    functions, as a module imported before hpuload patched anything holds them."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(source, f"{name}.py", "exec"), module.__dict__)
    for key, fn in originals.items():
        module.__dict__[key] = getattr(fn, "__wrapped__", fn)
    return module


def test_the_pytorch_tutorials_dataset_with_its_reader_imported_by_name_runs_natively(jpeg_folder, tmp_path):
    """`from torchvision.io import decode_image` binds the function itself in the user's
    module, which patching `torchvision.io` does not reach: the names the Dataset's code can
    reach are rebound while probing (and give the original everywhere else)."""
    import torchvision.io
    from torchvision.transforms import v2

    pytest.importorskip("pandas")
    folder = datasets.ImageFolder(jpeg_folder)
    with open(tmp_path / "labels.csv", "w", newline="") as f:
        csv.writer(f).writerows((Path(p).relative_to(jpeg_folder), t) for p, t in folder.samples)
    tutorial = _module_from(_TUTORIAL, "hpuload_test_tutorial", decode_image=torchvision.io.decode_image)
    assert tutorial.decode_image is getattr(torchvision.io.decode_image, "__wrapped__", torchvision.io.decode_image)
    tf = v2.Compose([v2.Resize((40, 52)), v2.ToDtype(torch.float32, scale=True)])
    ds = tutorial.CustomImageDataset(tmp_path / "labels.csv", str(jpeg_folder), transform=tf)
    # pandas' header row: the tutorial's file has none, so its first row is the header.
    ds.img_labels = __import__("pandas").read_csv(tmp_path / "labels.csv", header=None)
    _same_batches(ds)


_HELPERS = """
from torchvision.io import read_image, ImageReadMode


def load(path):
    return read_image(path, "rgb")
"""


def test_a_reader_imported_by_name_in_a_helper_module_the_dataset_calls_is_rebound_too(jpeg_folder, tmp_path):
    import torchvision.io
    from torchvision.transforms import v2

    helpers = _module_from(_HELPERS, "hpuload_test_helpers", read_image=torchvision.io.read_image)
    write_csv(jpeg_folder, tmp_path / "train.csv")

    class ThroughAHelper(CsvImageDataset):
        def __getitem__(self, i):
            path, label = self.rows[i]
            return self.transform(helpers.load(path)), label

    ds = ThroughAHelper(tmp_path / "train.csv", v2.Compose([v2.CenterCrop(40), v2.ToDtype(torch.float32, scale=True)]))
    _same_batches(ds)


def _sixteen_bit_png(path, like):
    """`like`'s pixels as a 16-bit RGB PNG whose low bytes vary (Pillow keeps only the high
    ones; torchvision's reader gives both)."""
    import struct
    import zlib

    a = np.asarray(Image.open(like).convert("RGB")).astype(np.uint16) * 256
    a += np.random.RandomState(3).randint(0, 256, a.shape).astype(np.uint16)
    h, w, _ = a.shape
    raw = b"".join(b"\0" + a[y].astype(">u2").tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@pytest.mark.parametrize("mode", [None, "RGB"])
def test_a_dataset_reading_a_16_bit_png_as_a_tensor_goes_to_torch_naming_it(jpeg_folder, tmp_path, mode):
    """torchvision's readers give a 16-bit PNG as uint16 [0, 65535] in either mode (Pillow,
    and hpuload with it, at 8 bits): natively its values would be up to two levels off after
    `ToDtype(scale=True)`, and its dtype another without."""
    from torchvision.io import ImageReadMode
    from torchvision.transforms import v2

    deep = _csv_with_one_file_replaced(jpeg_folder, tmp_path, 2, tmp_path / "deep.png", _sixteen_bit_png)
    ds = ReadsTensors(tmp_path / "train.csv", v2.Compose([v2.CenterCrop(32), v2.ToDtype(torch.float32, scale=True)]))
    ds.mode = mode and ImageReadMode.RGB
    with pytest.warns(FallbackWarning, match=rf"{deep} is a 16-bit PNG, which torchvision's reader gives as a uint16"):
        loader = DataLoader(ds, batch_size=4)
    want = next(iter(tud.DataLoader(ds, batch_size=4)))[0]
    assert torch.equal(next(iter(loader))[0], want)


def test_a_dataset_reading_a_bmp_file_as_a_tensor_goes_to_torch_which_refuses_it_as_torchvision_does(jpeg_folder, tmp_path):
    """torchvision's readers decode JPEG, PNG, GIF and WebP: hpuload, which decodes BMP too,
    would train where the user's own loader stops. On torch's loader the file torchvision
    refuses is then a file that cannot be read, named and replaced under hpuload's policy (or
    raised under `on_error="fail"`), never trained on."""
    from torchvision.transforms import v2

    bmp = _csv_with_one_file_replaced(
        jpeg_folder, tmp_path, 1, tmp_path / "odd.bmp", lambda out, src: Image.open(src).convert("RGB").save(out)
    )
    ds = ReadsTensors(tmp_path / "train.csv", v2.Compose([v2.CenterCrop(32), v2.ToDtype(torch.float32, scale=True)]))
    with pytest.warns(FallbackWarning, match=rf"{bmp} is not a JPEG, PNG or WebP file, which torchvision's reader would refuse"):
        loader = DataLoader(ds, batch_size=4)
    with pytest.warns(hpuload.torch.SkippedSampleWarning, match=rf"skipped sample 1 \({re.escape(str(bmp))}\)"):
        images, _ = next(iter(loader))
    assert torch.equal(images[1], images[2])  # the next sample in its place
    with pytest.warns(FallbackWarning):
        loader = DataLoader(ds, batch_size=4, on_error="fail")
    with pytest.raises(hpuload.SampleError, match=re.escape(str(bmp))):
        next(iter(loader))


def test_a_dataset_holding_pil_images_for_some_indices_and_tensors_for_others_goes_to_torch(jpeg_folder, tmp_path):
    class Mixed(ReadsTensors):
        def __getitem__(self, i):
            if i % 2:
                return super().__getitem__(i)
            path, label = self.rows[i]
            return self.transform(Image.open(path).convert("RGB")), label

    write_csv(jpeg_folder, tmp_path / "train.csv")
    with pytest.warns(FallbackWarning, match="holds its image as a tensor"):
        DataLoader(Mixed(tmp_path / "train.csv", T.Compose([T.CenterCrop(32), T.PILToTensor()])), batch_size=4)


class TypedLabels(CsvImageDataset):
    """Labels as NumPy scalars or 0-d tensors: torch's default_collate keeps their dtype, and a
    collate_fn sees them as they are."""

    make = staticmethod(int)

    def __getitem__(self, i):
        path, label = self.rows[i]
        return self.transform(Image.open(path).convert("RGB")), self.make(label)


def _label_collate(batch):
    return torch.stack([x for x, _ in batch]), [y for _, y in batch]


@pytest.mark.parametrize(
    "make",
    [np.int32, np.int64, np.uint8, lambda y: torch.tensor(y), lambda y: torch.tensor(y, dtype=torch.int32)],
    ids=["np.int32", "np.int64", "np.uint8", "tensor", "tensor-int32"],
)
@pytest.mark.parametrize("tail", [False, True])
def test_labels_keep_the_type_the_dataset_gives_them_in_batches_and_in_a_collate_fn(jpeg_folder, tmp_path, make, tail):
    write_csv(jpeg_folder, tmp_path / "train.csv")
    steps = [T.CenterCrop(32), T.PILToTensor()] + ([T.Lambda(lambda x: x + 1)] if tail else [])
    ds = TypedLabels(tmp_path / "train.csv", T.Compose(steps))
    ds.make = make
    _same_batches(ds)
    want = list(tud.DataLoader(ds, batch_size=4, collate_fn=_label_collate))
    got = list(no_fallback(lambda: DataLoader(ds, batch_size=4, collate_fn=_label_collate)))
    for (x, ys), (wx, wys) in zip(got, want):
        assert [type(y) for y in ys] == [type(y) for y in wys]
        assert [getattr(y, "dtype", None) for y in ys] == [getattr(y, "dtype", None) for y in wys]
        assert [int(y) for y in ys] == [int(y) for y in wys]


def _epoch(loader):
    return [(x.clone(), y.clone()) for x, y in loader]


def _equal_epochs(a, b):
    assert len(a) == len(b)
    for (x, y), (wx, wy) in zip(a, b):
        assert torch.equal(y, wy) and torch.equal(x, wx)


@pytest.mark.parametrize("kind", ["imagefolder", "csv", "subset"])
def test_files_and_labels_changed_between_epochs_are_read_from_the_next_epoch(jpeg_folder, tmp_path, kind):
    """Pseudo-labelling, a cleaned label list, a Subset's indices redrawn: torch's loader
    starts its workers anew each epoch and reads the dataset as it is then; so does hpuload
    (it read the files and labels once at the build, and kept them, before)."""
    tf = T.Compose([T.CenterCrop(32), T.PILToTensor()])
    folder = write_csv(jpeg_folder, tmp_path / "train.csv")
    if kind == "imagefolder":
        ds = datasets.ImageFolder(jpeg_folder, tf)
    else:
        ds = CsvImageDataset(tmp_path / "train.csv", tf)
    if kind == "subset":
        ds = tud.Subset(ds, list(range(0, 30, 2)))
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu", num_workers=2))
    _equal_epochs(_epoch(loader), _epoch(tud.DataLoader(ds, batch_size=4)))
    if kind == "imagefolder":
        ds.samples = [(p, (t + 1) % 3) for p, t in ds.samples]
        ds.samples[0] = (ds.samples[5][0], ds.samples[0][1])  # another file too
    elif kind == "csv":
        ds.rows = [(p, t + 7) for p, t in ds.rows]
        ds.rows[0] = ds.rows[5]
    else:
        ds.indices = list(range(1, 31, 2))
    _equal_epochs(_epoch(loader), _epoch(tud.DataLoader(ds, batch_size=4, num_workers=2)))
    assert isinstance(loader, DataLoader) and loader._torch is None, "still native"
    del folder


def test_a_dataset_grown_between_epochs_goes_to_torch_naming_it(jpeg_folder, tmp_path):
    write_csv(jpeg_folder, tmp_path / "train.csv")
    ds = CsvImageDataset(tmp_path / "train.csv", T.Compose([T.CenterCrop(32), T.PILToTensor()]))
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu"))
    _epoch(loader)
    ds.rows = ds.rows + ds.rows[:6]
    with pytest.warns(FallbackWarning, match=rf"now holds {len(ds.rows)} samples, not {len(ds.rows) - 6}"):
        again = _epoch(loader)
    _equal_epochs(again, _epoch(tud.DataLoader(ds, batch_size=4)))


def test_with_persistent_workers_the_dataset_is_kept_as_torchs_workers_keep_it(jpeg_folder, tmp_path):
    write_csv(jpeg_folder, tmp_path / "train.csv")
    ds = CsvImageDataset(tmp_path / "train.csv", T.Compose([T.CenterCrop(32), T.PILToTensor()]))
    theirs = tud.DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)
    ours = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu", num_workers=2, persistent_workers=True))
    _equal_epochs(_epoch(ours), _epoch(theirs))
    ds.rows = [(p, t + 7) for p, t in ds.rows]
    _equal_epochs(_epoch(ours), _epoch(theirs))
    assert _epoch(theirs)[0][1].max() < 7, "torch's kept workers read the rows as they were"


class WithIndex(CsvImageDataset):
    """`(image, label, index, ...)`: what noisy-label and semi-supervised code returns, so that
    its loop can update per-sample state."""

    def __getitem__(self, i):
        path, label = self.rows[i]
        return self.transform(Image.open(path).convert("RGB")), label, i, f"id{i}", np.int16(i % 5), i / 4


def _same_structure(a, b) -> bool:
    if isinstance(b, torch.Tensor):  # (a collate_fn gets views of the pinned batch: a Tensor subclass)
        return isinstance(a, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same_structure(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("tail", [False, True])
@pytest.mark.parametrize("collate", [None, "identity"])
def test_values_after_the_label_come_as_the_dataset_returns_them(jpeg_folder, tmp_path, tail, collate):
    write_csv(jpeg_folder, tmp_path / "train.csv")
    steps = [T.CenterCrop(32), T.PILToTensor()] + ([T.Lambda(lambda x: x + 1)] if tail else [])
    ds = tud.Subset(WithIndex(tmp_path / "train.csv", T.Compose(steps)), list(range(3, 30)))
    kw = {"collate_fn": (lambda b: b)} if collate else {}
    got = list(no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu", **kw)))
    assert _same_structure(got, list(tud.DataLoader(ds, batch_size=4, **kw)))


class OtherTargets(CsvImageDataset):
    """Targets that are no class index, as multi-label (a multi-hot vector), regression (a
    float), attribute (a NumPy array) and caption-keyed (a string) datasets give them; each
    read from a table the script may replace."""

    def __init__(self, csv_path, transform, kind):
        super().__init__(csv_path, transform)
        n = len(self.rows)
        self.targets = {
            "multi_hot": [torch.tensor([i % 2, i % 3 == 0, 1, 0], dtype=torch.float32) for i in range(n)],
            "float": [i / 7 for i in range(n)],
            "array": [np.array([i, 2 * i], dtype=np.float32) for i in range(n)],
            "string": [f"class {i % 3}" for i in range(n)],
            "vector_then_index": [torch.tensor([1.0, i]) for i in range(n)],
        }[kind]
        self.kind = kind

    def __getitem__(self, i):
        image = self.transform(Image.open(self.rows[i][0]).convert("RGB"))
        if self.kind == "vector_then_index":
            return image, self.targets[i], i
        return image, self.targets[i]


@pytest.mark.parametrize("tail", [False, True])
@pytest.mark.parametrize("collate", [None, "identity"])
@pytest.mark.parametrize("kind", ["multi_hot", "float", "array", "string", "vector_then_index"])
def test_targets_that_are_no_class_index_come_as_torchs_loader_gives_them(jpeg_folder, tmp_path, kind, collate, tail):
    """They went to torch's loader; now the images run natively and each target is handed
    out as the Dataset gave it (default_collate's batch of them, or each one to a
    collate_fn)."""
    write_csv(jpeg_folder, tmp_path / "train.csv")
    steps = [T.CenterCrop(32), T.PILToTensor()] + ([T.Lambda(lambda x: x + 1)] if tail else [])
    ds = OtherTargets(tmp_path / "train.csv", T.Compose(steps), kind)
    kw = {"collate_fn": (lambda b: b)} if collate else {}
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu", num_workers=2, **kw))
    assert _same_structure(list(loader), list(tud.DataLoader(ds, batch_size=4, **kw)))


def test_targets_that_are_no_class_index_changed_between_epochs_are_read_from_the_next_epoch(jpeg_folder, tmp_path):
    """Soft pseudo-labels rewritten after an epoch, as self-training scripts do."""
    write_csv(jpeg_folder, tmp_path / "train.csv")
    ds = OtherTargets(tmp_path / "train.csv", T.Compose([T.CenterCrop(32), T.PILToTensor()]), "multi_hot")
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu"))
    assert _same_structure(list(loader), list(tud.DataLoader(ds, batch_size=4)))
    ds.targets = [t * 0.5 + 0.25 for t in ds.targets]
    assert _same_structure(list(loader), list(tud.DataLoader(ds, batch_size=4)))


def test_a_target_too_large_to_keep_for_every_sample_goes_to_torch(jpeg_folder, tmp_path):
    """A mask or a feature map per sample: hpuload would hold every one in memory."""

    class WithMask(CsvImageDataset):
        def __getitem__(self, i):
            return self.transform(Image.open(self.rows[i][0]).convert("RGB")), torch.zeros(128, 128)

    write_csv(jpeg_folder, tmp_path / "train.csv")
    with pytest.warns(FallbackWarning, match="Tensor"):
        loader = DataLoader(WithMask(tmp_path / "train.csv", T.Compose([T.CenterCrop(32), T.ToTensor()])), batch_size=4)
    assert not isinstance(loader, DataLoader)


def test_values_after_the_label_drawn_on_each_call_are_drawn_anew_for_each_sample(jpeg_folder, tmp_path):
    class Drawn(CsvImageDataset):
        def __getitem__(self, i):
            path, label = self.rows[i]
            return self.transform(Image.open(path).convert("RGB")), label, random.random()

    write_csv(jpeg_folder, tmp_path / "train.csv")
    ds = Drawn(tmp_path / "train.csv", EXACT)
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu", seed=11))
    epochs = [list(loader) for _ in range(2)]
    for ours, theirs in zip(epochs[0], tud.DataLoader(ds, batch_size=4), strict=True):
        assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])
        assert ours[2].dtype == theirs[2].dtype and ((ours[2] >= 0) & (ours[2] < 1)).all()
    drawn = [torch.cat([b[2] for b in epoch]) for epoch in epochs]
    assert not torch.equal(drawn[0], drawn[1]) and len(set(drawn[0].tolist())) == len(ds)
    again = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu", seed=11))
    assert torch.equal(torch.cat([b[2] for b in again]), drawn[0])  # the same seed, the same draws


@pytest.mark.parametrize("kind", ["imagefolder", "csv"])
def test_random_split_subsets_run_natively_over_the_chosen_indices(png_folder, tmp_path, kind):
    if kind == "csv":
        write_csv(png_folder, tmp_path / "train.csv")
        ds = CsvImageDataset(tmp_path / "train.csv", EXACT)
    else:
        ds = datasets.ImageFolder(png_folder, EXACT)
    train, val = tud.random_split(ds, [0.75, 0.25], generator=torch.Generator().manual_seed(0))
    nested = tud.Subset(val, [2, 0, 1])
    for part in (train, val, nested):
        loader = no_fallback(lambda: DataLoader(part, batch_size=4, backend="cpu"))
        ours = [(x, y) for x, y in loader]
        theirs = list(tud.DataLoader(part, batch_size=4))
        assert [y.tolist() for _, y in ours] == [y.tolist() for _, y in theirs]
        for (x1, _), (x2, _) in zip(ours, theirs):
            assert (x1.int() - x2.int()).abs().max().item() <= 1


def test_concatenated_datasets_sharing_a_transform_run_natively_in_the_concatenations_order(png_folder, tmp_path):
    """`ConcatDataset`s (train and extra folders, an ImageFolder beside a user's CSV class, one
    part twice to oversample it), with `Subset`s inside and around: the parts' samples in
    the concatenation's order, as torch's loader gives them, shuffled or not."""
    write_csv(png_folder, tmp_path / "train.csv")
    a, b = datasets.ImageFolder(png_folder, EXACT), datasets.ImageFolder(png_folder, EXACT)
    mine = CsvImageDataset(tmp_path / "train.csv", EXACT)
    for data in (
        tud.ConcatDataset([a, b]),
        tud.ConcatDataset([a, a, tud.Subset(b, [3, 1])]),
        tud.Subset(tud.ConcatDataset([mine, a]), [20, 2, 13, 0, 12, 5]),
        tud.ConcatDataset([tud.ConcatDataset([a, tud.Subset(mine, [4, 4, 0])]), b]),
    ):
        loader = no_fallback(lambda: DataLoader(data, batch_size=4, backend="cpu"))
        ours = [(x, y) for x, y in loader]
        theirs = list(tud.DataLoader(data, batch_size=4))
        assert [y.tolist() for _, y in ours] == [y.tolist() for _, y in theirs]
        assert all(torch.equal(x1, x2) for (x1, _), (x2, _) in zip(ours, theirs))
        shuffled = no_fallback(lambda: DataLoader(data, batch_size=4, shuffle=True, backend="cpu"))
        seen = sorted(tuple(x.flatten()[:16].tolist()) + (int(y),) for xs, ys in shuffled for x, y in zip(xs, ys))
        want = sorted(tuple(x.flatten()[:16].tolist()) + (int(y),) for xs, ys in theirs for x, y in zip(xs, ys))
        assert seen == want, "a shuffled epoch gives every sample once"


def test_concatenated_datasets_with_other_transforms_go_to_torch_saying_so(png_folder):
    a = datasets.ImageFolder(png_folder, EXACT)
    flipped = datasets.ImageFolder(png_folder, T.Compose([T.CenterCrop(32), T.RandomVerticalFlip(1.0), T.PILToTensor()]))
    with pytest.warns(FallbackWarning, match="parts hold different transform objects"):
        loader = DataLoader(tud.ConcatDataset([a, flipped]), batch_size=4)
    assert type(loader) is not DataLoader
    # One part's transform reassigned after the loader was built: the next epoch is torch's.
    b = datasets.ImageFolder(png_folder, EXACT)
    data = tud.ConcatDataset([a, b])
    loader = no_fallback(lambda: DataLoader(data, batch_size=4, backend="cpu"))
    first = [x for x, _ in loader]
    b.transform = flipped.transform
    with pytest.warns(FallbackWarning, match="different transform objects now"):
        second = [x for x, _ in loader]
    assert [x for x, _ in tud.DataLoader(data, batch_size=4)][-1].equal(second[-1])
    assert not first[-1].equal(second[-1])


class CallsTheTransformsWrapper(datasets.VisionDataset):
    """Calls `self.transforms` (VisionDataset's StandardTransform of its transform and target
    transform), not `self.transform`."""

    def __init__(self, root, transform):
        super().__init__(root, transform=transform)
        self.files = [p for p, _ in datasets.ImageFolder(root).samples]

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return self.transforms(Image.open(self.files[i]).convert("RGB"), 0)


def test_a_vision_dataset_calling_its_transforms_wrapper_runs_natively_with_its_target_transform(jpeg_folder):
    ds = CallsTheTransformsWrapper(jpeg_folder, T.Compose([T.Resize(40), T.CenterCrop(32), T.PILToTensor()]))
    ds.transforms.target_transform = lambda y: y + 7
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu"))
    ours, theirs = list(loader), list(tud.DataLoader(ds, batch_size=4))
    assert len(ours) == len(theirs)
    for (x1, y1), (x2, y2) in zip(ours, theirs):
        assert torch.equal(x1, x2) and y1.tolist() == y2.tolist() == [7] * len(y2)


class WrapsItsOwnTransform(CallsTheTransformsWrapper):
    """Calls a wrapper of the transform that is not torchvision's: the real transform meets the
    image while probed, not the stand-in."""

    def __init__(self, root, transform):
        super().__init__(root, transform)
        self.apply = lambda image: transform(image)

    def __getitem__(self, i):
        return self.apply(Image.open(self.files[i]).convert("RGB")), 0


def test_a_dataset_whose_transform_meets_the_image_elsewhere_falls_back_named(jpeg_folder):
    ds = WrapsItsOwnTransform(jpeg_folder, T.Compose([T.Resize(40), T.CenterCrop(32), T.ToTensor()]))
    # torchvision's steps are answered on the handle (as the functional calls they make), but
    # the image never reaches the transform hpuload stands in for, which it would run too.
    with pytest.warns(FallbackWarning, match=r"returns the image without giving it to its transform"):
        loader = DataLoader(ds, batch_size=4)
    x, y = next(iter(loader))
    assert x.shape == (4, 3, 32, 32) and y.tolist() == [0] * 4


class _Frames:
    def __init__(self, frames):
        self.frames = frames

    def asnumpy(self):
        return self.frames.numpy()


class _StandInVideoReader:
    """decord's `VideoReader` as a user's Dataset calls it (the test environment has no
    decord): every frame a flat colour. Like decord's, its `__del__` reads what `__init__`
    set."""

    made = 0

    def __init__(self, path, num_threads=0):
        type(self).made += 1
        self._handle = path

    def __len__(self):
        return 8

    def get_batch(self, indices):
        return _Frames(torch.stack([torch.full((24, 32, 3), 10 * i, dtype=torch.uint8) for i in indices]))

    def __del__(self):
        assert self._handle is not None


class DecordClips(tud.Dataset):
    """A user's video Dataset in the common form: decord's reader imported by name, a few
    frames, the transform over the `[T, C, H, W]` tensor."""

    def __init__(self, paths, transform=None):
        self.paths = paths
        if transform is not None:
            self.transform = transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        from decord import VideoReader

        vr = VideoReader(self.paths[i], num_threads=1)
        frames = torch.from_numpy(vr.get_batch([0, 2, 4]).asnumpy()).permute(0, 3, 1, 2)
        return getattr(self, "transform", T.CenterCrop(16))(frames), i % 2


@pytest.mark.parametrize("transform", [T.CenterCrop(16), None])
def test_a_users_video_dataset_goes_to_torchs_loader_naming_its_reader_before_decoding_anything(monkeypatch, transform):
    """hpuload learns a Dataset class of the user's own from the image files it opens; one that
    opens a video (decord, torchcodec, PyAV) is named as such, with what runs videos natively,
    the probe stopping at the reader before anything is decoded (with a `transform` attribute
    or without); torch's loader then runs it, decord's reader answered by hpuload's, which
    hands these files (none exists) to decord's own."""
    _stand_in_decord(monkeypatch)
    ds = DecordClips([f"/videos/{k}.mp4" for k in range(6)], transform)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = DataLoader(ds, batch_size=2)
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and issubclass(caught[0].category, FallbackWarning), said
    assert "(`vr = VideoReader(self.paths[i], num_threads=1)`): it reads a video with decord.VideoReader" in said[0]
    assert "hpuload.VideoFolder" in said[0] and caught[0].message.reason is FallbackReason.DATASET
    assert "its decord.VideoReader is answered by hpuload's decoder" in said[0]
    assert _StandInVideoReader.made == 0, "the probe made no reader"
    x, y = next(iter(loader))
    assert x.shape == (2, 3, 3, 16, 16) and x[0, 1].eq(20).all() and y.tolist() == [0, 1]
    assert _StandInVideoReader.made == 2


CLIPS = Path(__file__).resolve().parents[2] / "tests" / "data" / "video"


def _stand_in_decord(monkeypatch):
    from hpuload import _reader

    decord = types.ModuleType("decord")
    decord.VideoReader = _StandInVideoReader
    monkeypatch.setitem(sys.modules, "decord", decord)
    monkeypatch.setattr(_StandInVideoReader, "made", 0)
    monkeypatch.setattr(_reader, "_FPS", {})  # decord's frame rates remembered


def _natively(paths, indices=(0, 2, 4)):
    """What DecordClips gives with hpuload's reader: its frames, CenterCrop(16)."""
    from hpuload import VideoReader

    return torch.stack(
        [T.CenterCrop(16)(torch.from_numpy(VideoReader(p).get_batch(list(indices)).asnumpy()).permute(0, 3, 1, 2)) for p in paths]
    )


@pytest.mark.parametrize("workers", [0, 2])
def test_a_users_decord_dataset_is_decoded_by_hpuload_in_torchs_loader_only_the_import_changed(monkeypatch, tmp_path, workers):
    """A Dataset class that reads its videos with decord stays the user's (hpuload cannot learn
    the frames it picks) but its decoding is native: in torch's loader, in the workers or in
    `next`, `decord.VideoReader` makes hpuload's reader, so decord's own is never made for a
    video hpuload reads; `video_reader="own"` keeps decord's."""
    _stand_in_decord(monkeypatch)
    monkeypatch.setattr(sys.modules[__name__], "_WORKER_LOG", str(tmp_path / "workers.log"))
    paths = [str(CLIPS / n) for n in ("baseline.mp4", "main_cabac.mp4", "high_bframes.mp4", "fragmented.mp4")]
    ds = DecordClips(paths, T.CenterCrop(16))
    with pytest.warns(FallbackWarning, match="answered by hpuload's decoder in the loader's workers"):
        loader = DataLoader(ds, batch_size=2, num_workers=workers, worker_init_fn=_remember_worker)
    assert loader.answers_video_reader
    x = torch.cat([b[0] for b in loader])
    assert torch.equal(x, _natively(paths)) and _StandInVideoReader.made == 0
    if workers:  # the user's worker_init_fn still runs, after hpuload's
        assert sorted(set(_seen_workers())) == [0, 1]
    # Outside the loader, decord is decord.
    sys.modules["decord"].VideoReader(paths[0])
    assert _StandInVideoReader.made == 1
    with pytest.warns(FallbackWarning) as caught:
        kept = DataLoader(ds, batch_size=2, num_workers=workers, video_reader="own")
    assert "answered" not in str(caught[0].message) and not kept.answers_video_reader
    x, _ = next(iter(kept))
    assert x[0, 1].eq(20).all(), "decord's own frames (the stand-in's flat colours)"
    with pytest.raises(ValueError, match="video_reader=.av."):
        DataLoader(ds, batch_size=2, video_reader="av")


_WORKER_LOG = None


def _remember_worker(worker_id):
    with open(_WORKER_LOG, "a") as f:
        f.write(f"{worker_id}\n")


def _seen_workers():
    with open(_WORKER_LOG) as f:
        return [int(line) for line in f]


class OddCalls(tud.Dataset):
    """A decord user's class calling what hpuload's reader does not do as decord does."""

    def __init__(self, path, call):
        self.path, self.call = path, call

    def __len__(self):
        return 1

    def __getitem__(self, i):
        import decord

        return self.call(decord, self.path), 0


@pytest.mark.parametrize(
    "call",
    [
        lambda d, p: d.VideoReader(p, width=32, height=24).get_batch([0]).asnumpy(),
        lambda d, p: d.VideoReader(p).get_key_indices(),
        lambda d, p: d.VideoReader(p).get_avg_fps(),
        lambda d, p: d.VideoReader(p + ".missing").get_batch([0]).asnumpy(),
        lambda d, p: d.VideoReader(p).get_batch([20]).asnumpy(),
        # A video with a display matrix, which decord turns its own way.
        lambda d, p: d.VideoReader(p.replace("baseline.mp4", "turned_half.mp4")).get_batch([0]).asnumpy(),
        # One whose edit list cuts frames, which decord shows.
        lambda d, p: d.VideoReader(p.replace("baseline.mp4", "cut.mp4")).get_batch([0]).asnumpy(),
    ],
    ids=["resize", "key-indices", "fps", "missing-file", "past-the-end", "turned", "cut"],
)
def test_what_hpuloads_reader_does_not_do_as_decord_is_answered_by_decords_own(monkeypatch, call):
    _stand_in_decord(monkeypatch)
    monkeypatch.setattr(_StandInVideoReader, "get_key_indices", lambda self: [0, 8], raising=False)
    monkeypatch.setattr(_StandInVideoReader, "get_avg_fps", lambda self: 25.0, raising=False)
    monkeypatch.setattr(_StandInVideoReader, "__init__", _stand_in_init_any)
    with pytest.warns(FallbackWarning, match="answered"):
        loader = DataLoader(OddCalls(str(CLIPS / "baseline.mp4"), call), batch_size=1, collate_fn=lambda b: b)
    (out, _), = next(iter(loader))
    assert _StandInVideoReader.made == 1
    theirs = call(sys.modules["decord"], str(CLIPS / "baseline.mp4"))
    assert type(out) is type(theirs) and (out == theirs if not hasattr(out, "shape") else (out == theirs).all())


def _stand_in_init_any(self, path, **kwargs):
    type(self).made += 1
    self._handle = path


def test_a_reader_imported_inside_getitem_is_named_before_it_decodes(monkeypatch, tmp_path):
    """decord imported for the first time by `__getitem__` (not before the loader is built) is
    patched as it is imported: the probe names it, and the loader answers it natively."""
    package = tmp_path / "site" / "decord"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "made = 0\n"
        "class VideoReader:\n"
        "    def __init__(self, path, num_threads=0):\n"
        "        global made\n"
        "        made += 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "decord", raising=False)
    paths = [str(CLIPS / "baseline.mp4"), str(CLIPS / "main_cabac.mp4")]
    try:
        with pytest.warns(FallbackWarning, match="it reads a video with decord.VideoReader"):
            loader = DataLoader(DecordClips(paths, T.CenterCrop(16)), batch_size=2)
        assert sys.modules["decord"].made == 0
        x, _ = next(iter(loader))
        assert torch.equal(x, _natively(paths)) and sys.modules["decord"].made == 0
    finally:
        sys.modules.pop("decord", None)  # the stand-in package goes with its folder


class _StandInVideoDecoder:
    """torchcodec's `VideoDecoder` as a user's Dataset calls it (the test environment has no
    torchcodec): flat frames, a `metadata`, counted when made."""

    made = 0

    def __init__(self, source, **kwargs):
        type(self).made += 1
        self.metadata = types.SimpleNamespace(num_frames=8, average_fps=25.0)

    def __len__(self):
        return 8

    def get_frames_at(self, indices):
        data = torch.stack([torch.full((3, 24, 32), 10 * i, dtype=torch.uint8) for i in indices])
        return _StandInFrameBatch(data, torch.zeros(len(indices), dtype=torch.float64), torch.zeros(len(indices), dtype=torch.float64))


class _StandInFrameBatch:
    def __init__(self, data, pts_seconds, duration_seconds):
        self.data, self.pts_seconds, self.duration_seconds = data, pts_seconds, duration_seconds


def _stand_in_torchcodec(monkeypatch):
    torchcodec = types.ModuleType("torchcodec")
    decoders = types.ModuleType("torchcodec.decoders")
    decoders.VideoDecoder = _StandInVideoDecoder
    torchcodec.decoders = decoders
    torchcodec.FrameBatch = _StandInFrameBatch
    torchcodec.Frame = _StandInFrameBatch
    monkeypatch.setitem(sys.modules, "torchcodec", torchcodec)
    monkeypatch.setitem(sys.modules, "torchcodec.decoders", decoders)
    monkeypatch.setattr(_StandInVideoDecoder, "made", 0)


class TorchcodecClips(tud.Dataset):
    """A user's video Dataset on torchcodec: three frames by index with their timestamps, the
    decoder's keyword arguments its own."""

    def __init__(self, paths, **decoder_args):
        self.paths, self.decoder_args = paths, decoder_args

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        from torchcodec.decoders import VideoDecoder

        decoder = VideoDecoder(self.paths[i], **self.decoder_args)
        batch = decoder.get_frames_at([0, 2, -1])
        return T.CenterCrop(16)(batch.data), batch.pts_seconds, len(decoder)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_users_torchcodec_dataset_gets_frames_and_timestamps_decoded_by_hpuload(monkeypatch, workers):
    """torchcodec's `VideoDecoder` in a user's class is answered as decord's is: frames by index
    decoded natively, each frame's timestamp from the tables, torchcodec's own decoder never
    made; where its arguments ask for other frames (here a device), torchcodec's own decodes."""
    from hpuload import _hpuload

    _stand_in_torchcodec(monkeypatch)
    paths = [str(CLIPS / n) for n in ("baseline.mp4", "high_bframes.mp4", "fragmented.mp4", "vfr.mp4")]
    with pytest.warns(FallbackWarning, match="its torchcodec.decoders.VideoDecoder is answered by hpuload's decoder"):
        loader = DataLoader(TorchcodecClips(paths), batch_size=2, num_workers=workers)
    assert loader.answers_video_reader
    x, pts, n = (torch.cat(parts) for parts in zip(*loader))
    assert _StandInVideoDecoder.made == 0
    want = _natively(paths, indices=(0, 2, -1))
    assert torch.equal(x, want)
    times = [_hpuload.video_frame_times(p)[0] for p in paths]
    assert pts.tolist() == [[t[0], t[2], t[-1]] for t in times] and n.tolist() == [len(t) for t in times]
    with pytest.warns(FallbackWarning, match="answered"):
        on_device = DataLoader(TorchcodecClips(paths, device="cuda"), batch_size=2)
    x, _, n = next(iter(on_device))
    assert x[0, 1].eq(20).all() and n.tolist() == [8, 8] and _StandInVideoDecoder.made == 2


def test_decords_own_reader_made_for_one_answer_leaves_the_frames_to_hpuload(monkeypatch, tmp_path):
    """decord's own reader made for its frame rate answers only that: the frames asked for
    afterwards are still hpuload's (else one `get_avg_fps()` would send every sample's decoding
    back to decord); and the rate is remembered per file as it is (no reader of decord's made
    for it again until the file changes)."""
    import os
    import shutil

    from hpuload import VideoReader

    _stand_in_decord(monkeypatch)
    monkeypatch.setattr(_StandInVideoReader, "get_avg_fps", lambda self: 25.0, raising=False)
    path = str(tmp_path / "main_cabac.mp4")
    shutil.copy(CLIPS / "main_cabac.mp4", path)

    def call(decord, p):
        vr = decord.VideoReader(p)
        return vr.get_avg_fps(), vr.get_batch([0, 2]).asnumpy(), len(vr)

    with pytest.warns(FallbackWarning, match="answered"):
        loader = DataLoader(OddCalls(path, call), batch_size=1, collate_fn=lambda b: b)
    ((fps, frames, n), _), = next(iter(loader))
    assert fps == 25.0 and _StandInVideoReader.made == 1
    assert np.array_equal(frames, VideoReader(path).get_batch([0, 2]).asnumpy()) and n == len(VideoReader(path))
    ((fps, _, _), _), = next(iter(loader))
    assert fps == 25.0 and _StandInVideoReader.made == 1, "remembered"
    os.utime(path, ns=(0, 0))
    ((fps, _, _), _), = next(iter(loader))
    assert fps == 25.0 and _StandInVideoReader.made == 2, "asked again once the file changed"


@pytest.fixture
def one_size_folder(jpeg_folder, tmp_path):
    """An ImageFolder of 12 JPEGs and PNGs all 48x40 (a folder made one size beforehand, as
    Tiny ImageNet's is)."""
    root = tmp_path / "one_size"
    for k, jpg in enumerate(sorted(jpeg_folder.rglob("*.jpg"))[:12]):
        out = root / jpg.parent.name / f"{k}.{'png' if k % 3 == 0 else 'jpg'}"
        out.parent.mkdir(parents=True, exist_ok=True)
        Image.open(jpg).convert("RGB").resize((48, 40)).save(out)
    return root


class ArraysAsRead(tud.Dataset):
    """A class with no transform that hands out the NumPy array of each image as read, made
    a float tensor in `[0, 1]` by its own code."""

    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        img = np.asarray(Image.open(self.files[i]).convert("RGB"))
        return torch.as_tensor(img.transpose(2, 0, 1).copy()).float() / 255, i % 3


def test_arrays_of_images_as_read_of_one_size_are_made_whole_natively_and_of_several_sizes_fall_back(one_size_folder, jpeg_folder):
    ds = ArraysAsRead(sorted(one_size_folder.rglob("*.*")))
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu"))
    theirs = list(tud.DataLoader(ds, batch_size=4))
    ours = list(loader)
    assert len(ours) == len(theirs) and ours[0][0].shape == (4, 3, 40, 48)
    for (x, y), (a, b) in zip(ours, theirs):
        assert torch.equal(x, a) and torch.equal(y, b)
    mixed = ArraysAsRead(sorted(jpeg_folder.rglob("*.jpg"))[:6])
    with pytest.warns(FallbackWarning, match="differ in size"):
        DataLoader(mixed, batch_size=2, backend="cpu")


class ArraysTransformed(ArraysAsRead):
    """The NumPy array of each image given to a torchvision transform that starts with
    `ToTensor` (which takes an array as it takes the PIL image), or to `to_tensor`."""

    def __init__(self, files, transform):
        self.files, self.transform = files, transform

    def __getitem__(self, i):
        from torchvision.transforms import functional as TF

        img = np.array(Image.open(self.files[i]).convert("RGB"))
        return (TF.to_tensor(img) if self.transform is None else self.transform(img)), i % 3


@pytest.mark.parametrize("how", ["to_tensor", "ToTensor+Normalize", "ToTensor+Resize", "Resize first"])
def test_an_images_array_given_to_tensor_runs_as_its_pil_image_would_and_other_first_steps_fall_back(jpeg_folder, how):
    files = sorted(jpeg_folder.rglob("*.jpg"))[:8]
    transform = {
        "to_tensor": None,
        "ToTensor+Normalize": T.Compose([T.ToTensor(), T.Normalize([0.5, 0.4, 0.3], [0.2, 0.3, 0.25])]),
        "ToTensor+Resize": T.Compose([T.ToTensor(), T.Resize((24, 20), antialias=True)]),
        "Resize first": T.Compose([T.Resize((24, 20)), T.ToTensor()]),  # torchvision's Resize refuses arrays
    }[how]
    ds = ArraysTransformed(files if how == "ToTensor+Resize" else files[:1] * 8, transform)
    if how == "Resize first":
        with pytest.warns(FallbackWarning, match="NumPy array"):
            DataLoader(ds, batch_size=4, backend="cpu")
        return
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu"))
    for (x, y), (a, b) in zip(list(loader), list(tud.DataLoader(ds, batch_size=4))):
        assert x.dtype == a.dtype and x.shape == a.shape and torch.equal(x, a) and torch.equal(y, b)


@pytest.mark.parametrize(
    "name",
    ["ToTensor", "PILToTensor", "ToTensor+Normalize", "v2 ToImage+ToDtype", "ColorJitter+ToTensor"],
)
def test_a_transform_without_a_crop_or_resize_over_images_of_one_size_runs_natively_on_the_whole_images(one_size_folder, name):
    """Such a transform keeps each image's size: torch's loader batches them because they
    are all one size. hpuload reads that size from the files' headers and runs the transform
    after a centre crop to it (the whole image): the same batches. It raised a ValueError
    before (a pipeline without a crop or resize)."""
    from torchvision.transforms import v2

    tf = {
        "ToTensor": T.ToTensor(),
        "PILToTensor": T.PILToTensor(),
        "ToTensor+Normalize": T.Compose([T.ToTensor(), T.Normalize([0.5] * 3, [0.2] * 3)]),
        "v2 ToImage+ToDtype": v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]),
        "ColorJitter+ToTensor": T.Compose([T.ColorJitter(brightness=(1.4, 1.4)), T.ToTensor()]),
    }[name]
    _same_batches(datasets.ImageFolder(one_size_folder, tf))


def test_a_tensor_dataset_without_a_transform_over_images_of_one_size_runs_natively(one_size_folder, tmp_path):
    write_csv(one_size_folder, tmp_path / "train.csv")

    class NoTransform(ReadsTensors):
        def __getitem__(self, i):
            import torchvision.io

            path, label = self.rows[i]
            image = torchvision.io.read_image(path, torchvision.io.ImageReadMode.RGB)
            if self.transform:
                image = self.transform(image)
            return image, label

    _same_batches(NoTransform(tmp_path / "train.csv", None))


@pytest.mark.parametrize("transform", [None, "no attribute"])
def test_a_dataset_whose_code_takes_another_path_without_a_transform_is_read_as_it_runs(one_size_folder, tmp_path, transform):
    """`if self.transform: ... else: image = image.float() / 255`: with no transform (None, or
    no attribute at all) nothing is stood in for it, so the code takes its own path, and
    what that path needs (here the pixels, `.float()`) sends the loader to torch's, named. A
    truthy stand-in took the transform's path before: uint8 batches where the Dataset gives
    float ones."""
    write_csv(one_size_folder, tmp_path / "train.csv")

    class OwnPath(ReadsTensors):
        def __getitem__(self, i):
            import torchvision.io

            path, label = self.rows[i]
            image = torchvision.io.read_image(path, torchvision.io.ImageReadMode.RGB)
            if getattr(self, "transform", None):
                image = self.transform(image)
            else:
                image = image.float() / 255
            return image, label

    ds = OwnPath(tmp_path / "train.csv", None)
    if transform == "no attribute":
        del ds.transform
    with pytest.warns(FallbackWarning, match=r"image\.float\(\) / 255"):
        loader = DataLoader(ds, batch_size=4)
    assert type(loader) is not DataLoader and hasattr(ds, "transform") == (transform is None)
    assert next(iter(loader))[0].dtype == torch.float32


def test_a_transform_without_a_crop_or_resize_over_images_of_different_sizes_goes_to_torch_naming_two(one_size_folder):
    odd = sorted(one_size_folder.rglob("*.jpg"))[1]
    Image.open(odd).resize((50, 40)).save(odd)
    ds = datasets.ImageFolder(one_size_folder, T.ToTensor())
    with pytest.warns(FallbackWarning, match=rf"the images differ in size \({odd} is 50x40, .* 48x40\)"):
        loader = DataLoader(ds, batch_size=1)
    assert next(iter(loader))[0].shape[2:] in ((40, 48), (40, 50))


def test_a_transform_reassigned_to_one_without_a_crop_runs_on_the_whole_images_from_the_next_epoch(one_size_folder):
    """The images' size is found when the new transform needs it (the loader was built with a
    crop, so nothing had read it): the next epoch's batches are torch's, not images cropped to
    a size the loader never checked."""
    ds = datasets.ImageFolder(one_size_folder, T.Compose([T.CenterCrop(24), T.PILToTensor()]))
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu"))
    assert next(iter(loader))[0].shape == (4, 3, 24, 24)
    ds.transform = T.PILToTensor()
    got = no_fallback(lambda: list(loader))
    want = list(tud.DataLoader(ds, batch_size=4))
    assert len(got) == len(want)
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape == (4, 3, 40, 48) and torch.equal(x, wx) and torch.equal(y, wy)


@pytest.mark.parametrize("short", [64, 40, 30])
def test_a_resize_of_the_shorter_side_alone_over_images_of_one_size_runs_natively(one_size_folder, tmp_path, short):
    """`Resize(64)` with no crop (a folder made 64x64, fine-tuned at 224): over images of one
    size it is the resize to the size torchvision computes for them (40 is their shorter
    side: torchvision then keeps the image as it is), on PIL images and on tensors."""
    from torchvision.transforms import v2

    _same_batches(datasets.ImageFolder(one_size_folder, T.Compose([T.Resize(short), T.ToTensor()])))
    write_csv(one_size_folder, tmp_path / "train.csv")
    ds = ReadsTensors(tmp_path / "train.csv", v2.Compose([v2.Resize(short), v2.ToDtype(torch.float32, scale=True)]))
    ds.mode = __import__("torchvision").io.ImageReadMode.RGB
    _same_batches(ds)


class ResizesFirst(CsvImageDataset):
    """A Dataset that resizes every image with Pillow before its transform (`how`: what it
    calls on the opened image)."""

    def __init__(self, csv_path, transform, how):
        super().__init__(csv_path, transform)
        self.how = how

    def __getitem__(self, i):
        path, label = self.rows[i]
        return self.transform(self.how(Image.open(path))), label


#: The resizes such code runs, by name: Pillow's default filter (bicubic) or one named, before
#: or after the conversion to RGB.
PIL_RESIZES = {
    "default": lambda im: im.convert("RGB").resize((52, 40)),
    "bilinear": lambda im: im.convert("RGB").resize((52, 40), Image.BILINEAR),
    "nearest": lambda im: im.convert("RGB").resize((52, 40), resample=Image.Resampling.NEAREST),
    "lanczos": lambda im: im.convert("RGB").resize((52, 40), Image.LANCZOS),
    "box": lambda im: im.convert("RGB").resize((52, 40), Image.BOX),
    "hamming": lambda im: im.convert("RGB").resize((52, 40), Image.Resampling.HAMMING),
    "then converted": lambda im: im.resize((52, 40)).convert("RGB"),
    "copied": lambda im: im.convert("RGB").copy().resize((52, 40)),
}


@pytest.mark.parametrize("how", sorted(PIL_RESIZES))
@pytest.mark.parametrize(
    "steps",
    [
        [T.ToTensor(), T.Normalize([0.5] * 3, [0.25] * 3)],
        [T.RandomHorizontalFlip(1.0), T.CenterCrop(36), T.ToTensor()],
        [T.RandomCrop(32), T.PILToTensor()],
    ],
    ids=["tensor", "flip-centre", "random-crop"],
)
def test_a_pillow_resize_before_the_transform_runs_natively_with_the_datasets_pixels(png_folder, tmp_path, how, steps):
    """`Image.open(p).convert("RGB").resize((w, h))` in `__getitem__`, then a transform
    with no size of its own or a crop: natively (the resize as torchvision's `Resize((h, w))`
    with that filter, which is that Pillow call), every value the Dataset's own; the random
    crop's offsets drawn by hpuload, so compared by its plan."""
    write_csv(png_folder, tmp_path / "train.csv")
    ds = ResizesFirst(tmp_path / "train.csv", T.Compose(steps), PIL_RESIZES[how])
    loader = no_fallback(lambda: DataLoader(ds, batch_size=8, backend="cpu", seed=5))
    assert type(loader) is DataLoader
    if isinstance(steps[0], T.RandomCrop):
        for b, (x, _) in enumerate(loader):
            for k in range(x.shape[0]):
                index = b * 8 + k
                # Planned for a 52x40 image, the crop's window is in the resize's pixels.
                crop = json.loads(loader._core.sample_plan(0, index, 52, 40))["crop"]
                top, left = int(crop["top"]), int(crop["left"])
                own = T.functional.pil_to_tensor(PIL_RESIZES[how](Image.open(ds.rows[index][0])))
                assert torch.equal(x[k], own[:, top : top + 32, left : left + 32]), index
        return
    ours = torch.cat([x for x, _ in loader])
    assert torch.equal(ours, torch.cat([x for x, _ in tud.DataLoader(ds, batch_size=8)]))


def test_a_pillow_resize_hpuload_does_not_follow_goes_to_torchs_loader_named(png_folder, tmp_path):
    """A reducing gap (Pillow's resize in two steps), a grey file resized before its
    conversion (Pillow's resize of its own mode), a box, the EXIF orientation turned after the
    resize, and a second resize in the transform: torch's DataLoader, the reason named."""
    write_csv(png_folder, tmp_path / "train.csv")
    grey_rows = tmp_path / "grey.csv"
    first = datasets.ImageFolder(png_folder).samples[0][0]
    Image.open(first).convert("L").save(tmp_path / "grey.png")
    with open(grey_rows, "w") as f:
        f.write(f"file,label\n{tmp_path / 'grey.png'},0\n{first},1\n")
    from PIL import ImageOps

    cases = [
        ("train.csv", lambda im: im.convert("RGB").resize((52, 40), reducing_gap=2.0), [T.ToTensor()], "reducing gap"),
        ("grey.csv", PIL_RESIZES["then converted"], [T.ToTensor()], "mode L"),
        ("train.csv", lambda im: im.convert("RGB").resize((52, 40), box=(0, 0, 20, 20)), [T.ToTensor()], "box"),
        ("train.csv", lambda im: ImageOps.exif_transpose(im.resize((52, 40))), [T.ToTensor()], "exif_transpose"),
        ("train.csv", PIL_RESIZES["default"], [T.Resize(32), T.CenterCrop(32), T.ToTensor()], "geometry"),
    ]
    for rows, how, steps, reason in cases:
        ds = ResizesFirst(tmp_path / rows, T.Compose(steps), how)
        with pytest.warns(FallbackWarning, match=reason):
            loader = DataLoader(ds, batch_size=2)
        assert type(loader) is not DataLoader, reason


#: Conversions to grey such code runs, by name (with a resize, before or after; made RGB again).
GREY_OPENS = {
    "grey": lambda im: im.convert("L"),
    "grey of RGB": lambda im: im.convert("RGB").convert("L"),
    "grey, resized": lambda im: im.convert("L").resize((52, 40)),
    "resized, grey": lambda im: im.convert("RGB").resize((52, 40), Image.BILINEAR).convert("L"),
    "grey, RGB": lambda im: im.convert("L").convert("RGB"),
}


@pytest.mark.parametrize("how", sorted(GREY_OPENS))
@pytest.mark.parametrize("backend", ["cpu", "auto"])
def test_pillows_grey_before_the_transform_runs_natively_with_the_datasets_pixels(png_folder, tmp_path, how, backend):
    """`Image.open(p).convert("L")` in `__getitem__` (of RGB files and a grey one; resized
    before or after; made RGB again) then the transform: natively, as torchvision's
    `Grayscale()` first (`num_output_channels=3` for the grey made RGB), every value the
    Dataset's own, one channel or three."""
    write_csv(png_folder, tmp_path / "train.csv")
    rows = list(csv.reader(open(tmp_path / "train.csv")))
    Image.open(rows[1][0]).convert("L").save(tmp_path / "grey.png")
    rows[1][0] = str(tmp_path / "grey.png")
    with open(tmp_path / "train.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    tf = T.Compose([T.CenterCrop(36), T.RandomHorizontalFlip(1.0), T.ToTensor(), T.Normalize([0.5], [0.25])])
    ds = ResizesFirst(tmp_path / "train.csv", tf, GREY_OPENS[how])
    loader = no_fallback(lambda: DataLoader(ds, batch_size=8, backend=backend))
    ours = torch.cat([x for x, _ in loader])
    want = torch.cat([x for x, _ in tud.DataLoader(ds, batch_size=8)])
    assert ours.shape == want.shape and ours.shape[1] == (3 if how == "grey, RGB" else 1)
    assert torch.equal(ours, want)


def test_a_grey_of_a_palette_or_transparent_file_goes_to_torchs_loader_named(png_folder, tmp_path):
    """`convert("L")` of a palette or RGBA file straight from its own mode (Pillow's grey of
    those modes is not made from hpuload's RGB decode in every case): torch's loader, the
    file and mode named; made RGB first, it runs natively."""
    first = datasets.ImageFolder(png_folder).samples[0][0]
    for mode in ("P", "RGBA"):
        Image.open(first).convert(mode).save(tmp_path / f"{mode}.png")
        with open(tmp_path / "odd.csv", "w") as f:
            f.write(f"file,label\n{first},0\n{tmp_path / mode}.png,1\n")
        ds = ResizesFirst(tmp_path / "odd.csv", T.Compose([T.Resize((20, 20)), T.ToTensor()]), GREY_OPENS["grey"])
        with pytest.warns(FallbackWarning, match=f"mode {mode}, which your code makes grey"):
            assert type(DataLoader(ds, batch_size=2)) is not DataLoader
        ds.how = GREY_OPENS["grey of RGB"]
        (ours, _), = list(no_fallback(lambda: DataLoader(ds, batch_size=2, backend="cpu")))
        assert torch.equal(ours, next(iter(tud.DataLoader(ds, batch_size=2)))[0]), mode


class HoldsItsTransformAs(CsvImageDataset):
    """A Dataset keeping its torchvision transform under a name of its own (`tfms`), reading
    tensors or PIL images; `extra` another transform it also holds (a second name)."""

    def __init__(self, csv_path, tfms, *, tensors, extra=None):
        super().__init__(csv_path, None)
        del self.transform
        self.tfms, self.tensors = tfms, tensors
        if extra is not None:
            self.val_tfms = extra

    def __getitem__(self, i):
        from torchvision.io import ImageReadMode, read_image

        path, label = self.rows[i]
        image = read_image(path, ImageReadMode.RGB) if self.tensors else Image.open(path).convert("RGB")
        return self.tfms(image), label


@pytest.mark.parametrize("tensors", [True, False])
def test_a_torchvision_transform_under_a_name_of_its_own_is_found_and_runs_natively(jpeg_folder, tmp_path, tensors):
    """`self.tfms = v2.Compose([...])`: found as the one attribute holding a transform, and run
    natively with the Dataset's own values. (torchvision v2 passes an input it does not know
    through untouched, so before, over images of one size, the stand-in image came back as
    if untransformed and the loader gave the raw images: uint8 at their own size.)"""
    from torchvision.transforms import v2

    write_csv(jpeg_folder, tmp_path / "train.csv")
    tf = v2.Compose([v2.Resize((32, 32)), v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.5] * 3, [0.25] * 3)])
    if not tensors:
        tf = v2.Compose([v2.PILToTensor(), *tf.transforms])
    ds = HoldsItsTransformAs(tmp_path / "train.csv", tf, tensors=tensors)
    want = list(tud.DataLoader(ds, batch_size=4))
    got = list(no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu")))
    assert len(got) == len(want)
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape == (len(y), 3, 32, 32) and x.dtype == wx.dtype == torch.float32
        assert torch.equal(y, wy)
        assert (x - wx).abs().max().item() <= 1 / 255 / 0.25 + 1e-6


def test_a_dataset_holding_two_v2_transforms_runs_the_one_it_applies_natively(tmp_path):
    """Two transforms held (`tfms` and `val_tfms`) and no `transform`: each is stood in for
    (`_probe.ChainLink`), and the one `__getitem__` applies to the tensor it read runs
    natively, with torch's values. (Once neither was stood in: v2 passed the stand-in image
    through untouched, and over images all of one size the raw batches came out.)"""
    from torchvision.transforms import v2

    for k in range(6):
        Image.new("RGB", (40, 30), (40 * k, 90, 200 - 30 * k)).save(tmp_path / f"{k}.png")
    with open(tmp_path / "rows.csv", "w") as f:
        f.write("file,label\n" + "".join(f"{tmp_path / f'{k}.png'},{k % 2}\n" for k in range(6)))
    tf = v2.Compose([v2.Resize((32, 32)), v2.ToDtype(torch.float32, scale=True)])
    ds = HoldsItsTransformAs(tmp_path / "rows.csv", tf, tensors=True, extra=v2.Compose([v2.CenterCrop(24)]))
    got = list(no_fallback(lambda: DataLoader(ds, batch_size=3, backend="cpu")))
    want = list(tud.DataLoader(ds, batch_size=3))
    assert len(got) == len(want) == 2
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape == (3, 3, 32, 32) and x.dtype == wx.dtype == torch.float32
        assert torch.equal(y, wy)
        assert (x - wx).abs().max().item() <= 1 / 255 + 1e-6


class CallsATransformFromAList(HoldsItsTransformAs):
    """The transform held in a list (`self.pipeline[0]`), where no attribute holds it."""

    def __init__(self, csv_path, tfms):
        super().__init__(csv_path, None, tensors=True)
        del self.tfms
        self.pipeline = [tfms]

    def __getitem__(self, i):
        from torchvision.io import ImageReadMode, read_image

        path, label = self.rows[i]
        return self.pipeline[0](read_image(path, ImageReadMode.RGB)), label


def test_a_v2_transform_the_probe_did_not_stand_in_for_sends_the_dataset_to_torch_named(tmp_path):
    """The v2 transform `__getitem__` calls on the stand-in image, held where hpuload stands in
    for none, would pass it through untouched: it says it needs pixels, and the loader is
    torch's, with torch's values, over images all of one size."""
    from torchvision.transforms import v2

    for k in range(6):
        Image.new("RGB", (40, 30), (40 * k, 90, 200 - 30 * k)).save(tmp_path / f"{k}.png")
    with open(tmp_path / "rows.csv", "w") as f:
        f.write("file,label\n" + "".join(f"{tmp_path / f'{k}.png'},{k % 2}\n" for k in range(6)))
    ds = CallsATransformFromAList(tmp_path / "rows.csv", v2.Compose([v2.Resize((32, 32)), v2.ToDtype(torch.float32, scale=True)]))
    with pytest.warns(FallbackWarning, match="outside the Dataset's transform attribute"):
        loader = DataLoader(ds, batch_size=3)
    x, _ = next(iter(loader))
    assert x.shape == (3, 3, 32, 32) and x.dtype == torch.float32


class RunsAStepOfItsOwnFirst(CsvImageDataset):
    """A Dataset that runs a v2 step of its own (`self.pre`) before its `transform`."""

    def __getitem__(self, i):
        path, label = self.rows[i]
        image = self.pre(Image.open(path).convert("RGB"))
        return self.transform(image), label


def test_a_v2_step_called_before_the_transform_is_not_skipped(jpeg_folder, tmp_path):
    """`image = self.pre(image)` (a `v2.Resize((40, 40))`), then `self.transform(image)`:
    the stand-in image went through the v2 step untouched and the loader ran the transform
    alone, on the image at its own size. Now the step needs pixels: torch's loader, named."""
    from torchvision.transforms import v2

    write_csv(jpeg_folder, tmp_path / "train.csv")
    ds = RunsAStepOfItsOwnFirst(tmp_path / "train.csv", T.Compose([T.CenterCrop(24), T.PILToTensor()]))
    ds.pre = v2.Resize((40, 40))
    with pytest.warns(FallbackWarning, match="Resize is called on the image outside"):
        loader = DataLoader(ds, batch_size=4)
    x, _ = next(iter(loader))
    assert torch.equal(x, torch.stack([ds[i][0] for i in range(4)]))


class CallsItUnderASecondName(CsvImageDataset):
    """`self.tf = self.transform = transform`, and `__getitem__` calls `self.tf`."""

    def __init__(self, csv_path, transform):
        super().__init__(csv_path, transform)
        self.tf = transform

    def __getitem__(self, i):
        path, label = self.rows[i]
        return self.tf(Image.open(path).convert("RGB")), label


def test_a_transform_called_under_a_second_name_for_the_same_object_runs_natively(jpeg_folder, tmp_path):
    """The probe stands in for the transform under every name the Dataset holds it by, so a
    `__getitem__` calling `self.tf` (the same object as `self.transform`) runs natively with
    torch's values, in v1 and v2 (whose pass-through once hid the call)."""
    from torchvision.transforms import v2

    write_csv(jpeg_folder, tmp_path / "train.csv")
    for tf in (T.Compose([T.Resize((36, 30)), T.PILToTensor()]), v2.Compose([v2.PILToTensor(), v2.Resize((36, 30))])):
        ds = CallsItUnderASecondName(tmp_path / "train.csv", tf)
        _same_batches(ds)
        assert ds.tf is tf and ds.transform is tf


@pytest.mark.parametrize(
    "transform",
    [
        lambda: T.Compose([T.Resize((40, 36), antialias=True), T.ConvertImageDtype(torch.float), T.Normalize([0.5], [0.25])]),
        lambda: __import__("torchvision").transforms.v2.Compose(
            [
                __import__("torchvision").transforms.v2.CenterCrop(40),
                __import__("torchvision").transforms.v2.RandomHorizontalFlip(p=1.0),
                __import__("torchvision").transforms.v2.ToDtype(torch.float32, scale=True),
            ]
        ),
    ],
)
@pytest.mark.parametrize("through", ["read_image", "decode_image"])
def test_images_read_grey_by_torchvision_are_each_jpegs_luma_in_one_channel(jpeg_folder, tmp_path, transform, through):
    """torchvision's reader in `ImageReadMode.GRAY` gives a JPEG's luma as libjpeg decodes it
    to grey (and a grey PNG as stored), a `[1, H, W]` tensor: natively, torch's DataLoader's
    batches byte for byte, on both backends; a colour PNG (libpng's grey of its colours), a
    tensor kernel that mixes channels, and three means on the one channel go to torch's
    loader, named."""
    from torchvision.io import ImageReadMode

    grey_png = _csv_with_one_file_replaced(
        jpeg_folder, tmp_path, 3, tmp_path / "grey.png", lambda out, src: Image.open(src).convert("L").save(out)
    )
    ds = ReadsTensors(tmp_path / "train.csv", transform())
    ds.mode = ImageReadMode.GRAY
    if through == "read_image":
        ds.__class__ = type("ReadsGrey", (ReadsTensors,), {"__getitem__": _read_grey_item})
    _same_batches(ds)
    # The media engine decodes and resamples each JPEG's luma (the grey PNG takes the CPU
    # path): within its floor of torch's values, on their range.
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="auto"))
    want = list(tud.DataLoader(ds, batch_size=4))
    for (x, _), (wx, _) in zip(loader, want):
        assert x.shape == wx.shape and x.shape[1] == 1 and x.dtype == wx.dtype and x.is_contiguous()
        peak = (wx.max() - wx.min()).item()
        psnr = 10 * math.log10(peak**2 / max(((x - wx) ** 2).mean().item(), 1e-12))
        assert psnr >= 40, psnr
    assert loader.report()["hw_samples"] == len(ds) - 1
    assert grey_png in {p for p, _ in ds.rows}

    # A colour PNG (RGB, or RGBA whose alpha libpng drops): libpng's grey of its colours, by
    # the weights the installed reader was found to use; one carrying a gamma is named.
    for mode in ("RGB", "RGBA"):
        _csv_with_one_file_replaced(jpeg_folder, tmp_path, 2, tmp_path / "colour.png", lambda out, src: Image.open(src).convert(mode).save(out))
        ds = ReadsTensors(tmp_path / "train.csv", transform())
        ds.mode = ImageReadMode.GRAY
        _same_batches(ds)
    gamma = _csv_with_one_file_replaced(
        jpeg_folder, tmp_path, 2, tmp_path / "gamma.png", lambda out, src: png_with_chunk(Image.open(src).convert("RGB"), out, b"gAMA", (45455).to_bytes(4, "big"))
    )
    ds = ReadsTensors(tmp_path / "train.csv", transform())
    ds.mode = ImageReadMode.GRAY
    with pytest.warns(FallbackWarning, match=rf"{gamma} is a colour PNG with a gAMA chunk, with which libpng"):
        DataLoader(ds, batch_size=4)
    write_csv(jpeg_folder, tmp_path / "train.csv")
    refused = [
        (T.Compose([T.CenterCrop(40), T.ConvertImageDtype(torch.float), T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]), "three channels"),
        (T.Compose([T.CenterCrop(40), T.ColorJitter(contrast=0.5), T.ConvertImageDtype(torch.float)]), "ColorJitter"),
    ]
    for tf, reason in refused:
        ds = ReadsTensors(tmp_path / "train.csv", tf)
        ds.mode = ImageReadMode.GRAY
        with pytest.warns(FallbackWarning, match=reason):
            DataLoader(ds, batch_size=4)


def _read_grey_item(self, i):
    from torchvision.io import ImageReadMode, read_image

    path, label = self.rows[i]
    return self.transform(read_image(path, ImageReadMode.GRAY)), label


class InstanceMasks(tud.Dataset):
    """Shaped like the PyTorch detection tutorial's `PennFudanDataset`: each image's target is
    computed from a second file read as an image (an instance mask)."""

    def __init__(self, files, transforms):
        self.files, self.transforms = files, transforms

    def __len__(self):
        return len(self.files)

    def __getitem__(self, idx):
        from torchvision.io import read_image

        img = read_image(str(self.files[idx]))
        mask = read_image(str(self.files[(idx + 1) % len(self.files)]))
        obj_ids = torch.unique(mask)[1:]
        target = {"labels": torch.ones(len(obj_ids), dtype=torch.int64)}
        return self.transforms(img, target)


def test_a_dataset_computing_on_a_second_image_it_reads_falls_back_naming_its_own_line(png_folder):
    from torchvision.transforms import v2

    files = sorted(png_folder.rglob("*.png"))[:4]
    transforms = v2.Compose([v2.RandomHorizontalFlip(0.5), v2.ToDtype(torch.float, scale=True)])
    with pytest.warns(FallbackWarning, match=r"at test_user_datasets\.py:\d+ \(`obj_ids = torch\.unique\(mask\)\[1:\]`\), in .*such as a mask"):
        loader = DataLoader(InstanceMasks(files, transforms), batch_size=2, collate_fn=lambda b: tuple(zip(*b)))
    assert len(next(iter(loader))[0]) == 2  # torch's loader runs it


def test_an_image_whose_header_is_gone_among_images_of_one_size_is_named_and_replaced_not_a_reason_to_fall_back(one_size_folder):
    """With no crop or resize the images' common size is read from their headers; a file
    cut before its size is a damaged image, which the loader names and replaces as it reads
    it, not a reason to hand the whole dataset to torch's loader (which stops at it)."""
    damaged = sorted(one_size_folder.rglob("*.jpg"))[2]
    damaged.write_bytes(damaged.read_bytes()[:10])
    ds = datasets.ImageFolder(one_size_folder, T.ToTensor())
    loader = no_fallback(lambda: DataLoader(ds, batch_size=4, backend="cpu"))
    with pytest.warns(hpuload.torch.SkippedSampleWarning, match=re.escape(str(damaged))):
        batches = [(x, y, list(loader.last_indices)) for x, y in loader]
    bad = [i for i, (path, _) in enumerate(ds.samples) if path == str(damaged)]
    indices = [i for _, _, b in batches for i in b]
    assert len(indices) == len(ds) and bad[0] not in indices
    for x, y, b in batches:
        for k, index in enumerate(b):
            want_x, want_y = ds[index]
            assert torch.equal(x[k], want_x) and y[k].item() == want_y


class WrapsItsImage(tud.Dataset):
    """A class that wraps its image as a `tv_tensors.Image` before its v2 transform (the
    detection tutorial's `img = tv_tensors.Image(img)`), read by `read_image` or Pillow."""

    def __init__(self, files, transform, read):
        self.files, self.transform, self.read = files, transform, read

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        from torchvision import tv_tensors
        from torchvision.io import read_image

        path = str(self.files[i])
        image = read_image(path) if self.read == "tensor" else Image.open(path).convert("RGB")
        return self.transform(tv_tensors.Image(image)), i % 3


@pytest.mark.parametrize("read", ["tensor", "pil"])
def test_an_image_wrapped_as_a_tv_tensors_image_runs_natively_as_torchs_loader_gives_it(jpeg_folder, read):
    from torchvision.transforms import v2

    files = sorted(jpeg_folder.rglob("*.jpg"))[:10]
    transform = v2.Compose([v2.Resize(40), v2.CenterCrop(36), v2.ToDtype(torch.float32, scale=True)])
    ds = WrapsItsImage(files, transform, read)
    ours = list(no_fallback(lambda: DataLoader(ds, batch_size=5, backend="cpu")))
    theirs = list(tud.DataLoader(ds, batch_size=5))
    assert len(ours) == len(theirs) == 2
    for (x, y), (tx, ty) in zip(ours, theirs):
        assert torch.equal(x, tx.as_subclass(torch.Tensor)) and torch.equal(y, ty)
