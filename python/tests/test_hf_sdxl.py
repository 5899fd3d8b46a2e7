"""diffusers' `train_text_to_image_sdxl.py` (and optimum-habana's copy): a table's function
that cuts each image itself, step by step (a `Resize`, `RandomCrop.get_params` and `crop` or
a `CenterCrop`, a `RandomHorizontalFlip(p=1.0)` when `random.random() < 0.5`, then
`ToTensor` and `Normalize`), noting each image's size and where it cut. hpuload runs the
steps natively and the function with stand-ins answering from each sample's plan, so what it
notes is where the native pixels were cut."""

import random
import warnings

import pytest
import torch
from torchvision import transforms
from torchvision.transforms import functional as F
from torchvision.transforms.functional import crop

from hpuload.torch import DataLoader, FallbackWarning, SkippedSampleWarning

datasets = pytest.importorskip("datasets")

from test_hf_datasets import caption_table  # noqa: E402

#: The CPU path's bilinear resize against Pillow's: a level either way, after Normalize.
WITHIN = 2 / 255 + 1e-6


def sdxl_preprocess(resolution, center_crop, random_flip, flip_first=False, interpolation="bilinear", crops=True):
    """The script's `preprocess_train`, as it is written there: the current script crops,
    then flips (noting the corner's column from the right); its first release flipped the
    resize before cutting it (`flip_first`). `interpolation`: `--image_interpolation_mode`
    (the current script's default is lanczos). `crops=False`: optimum-habana's copy, which
    crops only where `--crop_resolution` is below the resolution (its default table's images
    are square), at its default."""
    image_column = "image"
    interpolation = getattr(transforms.InterpolationMode, interpolation.upper())
    train_resize = transforms.Resize(resolution, interpolation=interpolation)
    train_crop = transforms.CenterCrop(resolution) if center_crop else transforms.RandomCrop(resolution)
    train_flip = transforms.RandomHorizontalFlip(p=1.0)
    train_transforms = transforms.Compose([transforms.ToTensor(), transforms.Normalize([0.5], [0.5])])

    def preprocess_train(examples):
        images = [image.convert("RGB") for image in examples[image_column]]
        original_sizes = []
        all_images = []
        crop_top_lefts = []
        for image in images:
            original_sizes.append((image.height, image.width))
            image = train_resize(image)
            if flip_first and random_flip and random.random() < 0.5:
                image = train_flip(image)
            if not crops:
                x1 = 0
                y1 = 0
            elif center_crop:
                y1 = max(0, int(round((image.height - resolution) / 2.0)))
                x1 = max(0, int(round((image.width - resolution) / 2.0)))
                image = train_crop(image)
            else:
                y1, x1, h, w = train_crop.get_params(image, (resolution, resolution))
                image = crop(image, y1, x1, h, w)
            if not flip_first and random_flip and random.random() < 0.5:
                # flip
                x1 = image.width - x1
                image = train_flip(image)
            crop_top_left = (y1, x1)
            crop_top_lefts.append(crop_top_left)
            image = train_transforms(image)
            all_images.append(image)

        examples["original_sizes"] = original_sizes
        examples["crop_top_lefts"] = crop_top_lefts
        examples["pixel_values"] = all_images
        return examples

    return preprocess_train


def sdxl_collate(examples):
    """The script's `collate_fn`, but for the precomputed embeddings this table has not."""
    return {
        "pixel_values": torch.stack([example["pixel_values"] for example in examples]),
        "original_sizes": [example["original_sizes"] for example in examples],
        "crop_top_lefts": [example["crop_top_lefts"] for example in examples],
    }


def native(ds, collate_fn=sdxl_collate, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        return DataLoader(ds, collate_fn=collate_fn, batch_size=4, backend="cpu", **kwargs)


def steps_of(image, resolution, top, left, flip, flip_first, resize=None):
    """The script's pixels for a row cut at `(top, left)` (as it notes it) and mirrored or
    not, made by torchvision from the row's image (resized to `resize`, else the
    resolution)."""
    resized = F.resize(image.convert("RGB"), resize or resolution, interpolation=transforms.InterpolationMode.BILINEAR)
    if flip_first:
        cut = F.crop(F.hflip(resized) if flip else resized, top, left, resolution, resolution)
    else:
        cut = F.crop(resized, top, resolution - left if flip else left, resolution, resolution)
        cut = F.hflip(cut) if flip else cut
    return F.normalize(F.to_tensor(cut), [0.5], [0.5])


def check_batches(loader, table, resolution, flip_first, epochs=3, resize=None):
    """Every sample's pixels are the script's steps at the corner it noted, mirrored or not,
    its size the image's; returns the flips and corners seen."""
    flips, corners = [], set()
    for _ in range(epochs):
        for batch in loader:
            for k, row in enumerate(loader.last_indices):
                image = table[row]["image"]
                assert batch["original_sizes"][k] == (image.height, image.width)
                top, left = batch["crop_top_lefts"][k]
                got = batch["pixel_values"][k]
                far = [(got - steps_of(image, resolution, top, left, f, flip_first, resize)).abs().max().item() for f in (False, True)]
                assert min(far) <= WITHIN, (row, top, left, far)
                flips.append(far[1] < far[0])
                corners.add((row, top, left))
    return flips, corners


def falls_back(jpeg_folder, tmp_path, preprocess, reason):
    """The caption table with `preprocess` goes to torch's loader, `reason` named."""
    ds = caption_table(jpeg_folder, tmp_path).with_transform(preprocess)
    with pytest.warns(FallbackWarning, match=reason):
        DataLoader(ds, collate_fn=sdxl_collate, batch_size=4)


@pytest.mark.parametrize("interpolation", ["bilinear", "lanczos"])
def test_sdxl_loader_with_its_center_crop_gives_torchs_batches_natively(jpeg_folder, tmp_path, interpolation):
    ds = caption_table(jpeg_folder, tmp_path).with_transform(sdxl_preprocess(32, True, False, interpolation=interpolation))
    ours = native(ds, shuffle=False)
    theirs = torch.utils.data.DataLoader(ds, shuffle=False, collate_fn=sdxl_collate, batch_size=4)
    n = 0
    for a, b in zip(ours, theirs, strict=True):
        assert a["original_sizes"] == b["original_sizes"]
        assert a["crop_top_lefts"] == b["crop_top_lefts"]
        assert a["pixel_values"].shape == b["pixel_values"].shape == (4, 3, 32, 32)
        assert (a["pixel_values"] - b["pixel_values"]).abs().max() <= WITHIN
        n += 1
    assert n == 3


@pytest.mark.parametrize("flip_first", [False, True], ids=["crop_then_flip", "flip_then_crop"])
def test_sdxl_loader_notes_the_corner_and_size_its_native_pixels_were_cut_by(jpeg_folder, tmp_path, flip_first):
    table = caption_table(jpeg_folder, tmp_path)
    ds = table.with_transform(sdxl_preprocess(32, False, True, flip_first=flip_first))
    loader = native(ds, shuffle=True, seed=5)
    steps = loader._rows.function.steps
    assert (steps.gate, steps.p) == ("before" if flip_first else "after", 0.5)
    flips, corners = check_batches(loader, table, 32, flip_first)
    assert 0 < sum(flips) < len(flips)  # drawn, both ways
    assert len({(top, left) for _, top, left in corners}) > 10  # the crop drawn per sample


def test_sdxl_loader_center_crop_with_flips_notes_the_mirrored_corner(jpeg_folder, tmp_path):
    table = caption_table(jpeg_folder, tmp_path)
    loader = native(table.with_transform(sdxl_preprocess(24, True, True)), shuffle=True, seed=2)
    flips, _ = check_batches(loader, table, 24, False)
    assert 0 < sum(flips) < len(flips)


def test_diffusers_text_to_image_loader_with_its_default_lanczos_resize_gives_torchs_batches_natively(jpeg_folder, tmp_path):
    from test_hf_datasets import diffusers_collate, diffusers_preprocess

    steps = transforms.Compose(
        [
            transforms.Resize(32, interpolation=transforms.InterpolationMode.LANCZOS),
            transforms.CenterCrop(32),
            transforms.Lambda(lambda x: x),
            transforms.ToTensor(),
            transforms.Normalize([0.5], [0.5]),
        ]
    )
    ds = caption_table(jpeg_folder, tmp_path).with_transform(diffusers_preprocess(steps))
    ours = native(ds, diffusers_collate, shuffle=False)
    theirs = torch.utils.data.DataLoader(ds, shuffle=False, collate_fn=diffusers_collate, batch_size=4)
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a["input_ids"], b["input_ids"])
        assert torch.equal(a["pixel_values"], b["pixel_values"])  # Pillow's Lanczos, byte for byte


def test_a_flip_gate_of_another_probability_is_learnt_and_drawn_so(jpeg_folder, tmp_path):
    resize, cut = transforms.Resize(24), transforms.RandomCrop(24)
    flip, last = transforms.RandomHorizontalFlip(p=1.0), transforms.ToTensor()

    def preprocess(examples):
        out = []
        for image in examples["image"]:
            image = cut(resize(image.convert("RGB")))
            if random.random() > 0.8:  # mirrored a fifth of the time, on the high side
                image = flip(image)
            out.append(last(image))
        examples["pixel_values"] = out
        return examples

    def collate(examples):
        return torch.stack([e["pixel_values"] for e in examples])

    loader = native(caption_table(jpeg_folder, tmp_path).with_transform(preprocess), collate, shuffle=True, seed=1)
    steps = loader._rows.function.steps
    assert steps.low is False and abs(steps.p - 0.2) < 1e-6
    batches = [batch for _ in range(4) for batch in loader]
    assert len(batches) == 12 and all(b.shape == (4, 3, 24, 24) for b in batches)


def test_sdxl_loader_resumed_mid_epoch_gives_the_batches_the_run_would_have(jpeg_folder, tmp_path):
    from conftest import state_after

    ds = caption_table(jpeg_folder, tmp_path).with_transform(sdxl_preprocess(24, False, True))

    def make():
        return native(ds, shuffle=True, seed=9)

    whole = list(make())
    resumed = make()
    resumed.load_state_dict(state_after(make(), 1))
    rest = list(resumed)
    assert len(rest) == 2
    for a, b in zip(rest, whole[1:]):
        assert a["crop_top_lefts"] == b["crop_top_lefts"] and a["original_sizes"] == b["original_sizes"]
        assert torch.equal(a["pixel_values"], b["pixel_values"])


def test_a_function_noting_each_images_size_beside_its_transform_runs_natively(jpeg_folder, tmp_path):
    transform = transforms.Compose([transforms.Resize(24), transforms.CenterCrop(24), transforms.ToTensor()])

    def preprocess(examples):
        examples["original_sizes"] = [image.size for image in examples["image"]]
        examples["pixel_values"] = [transform(image.convert("RGB")) for image in examples["image"]]
        return examples

    ds = caption_table(jpeg_folder, tmp_path).with_transform(preprocess)

    def collate(examples):
        return [e["original_sizes"] for e in examples], torch.stack([e["pixel_values"] for e in examples])

    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = DataLoader(ds, collate_fn=collate, batch_size=4, backend="cpu")
    theirs = torch.utils.data.DataLoader(ds, collate_fn=collate, batch_size=4)
    for (sizes, images), (their_sizes, their_images) in zip(ours, theirs, strict=True):
        assert sizes == their_sizes
        assert (images - their_images).abs().max() <= 1 / 255 + 1e-6


def test_a_function_cutting_its_images_otherwise_goes_to_torch_naming_it(jpeg_folder, tmp_path):
    resize, last = transforms.Resize(24), transforms.ToTensor()
    flip = transforms.RandomHorizontalFlip(p=1.0)

    def preprocess(examples):
        # Pillow's own crop of the resize: a step hpuload does not follow.
        examples["pixel_values"] = [last(flip(resize(image.convert("RGB"))).crop((0, 0, 24, 24))) for image in examples["image"]]
        return examples

    falls_back(jpeg_folder, tmp_path, preprocess, r"preprocess .*reads the 'crop' of an image it cut")


def test_a_function_reading_the_images_mode_goes_to_torch_naming_it(jpeg_folder, tmp_path):
    transform = transforms.Compose([transforms.Resize(24), transforms.CenterCrop(24), transforms.ToTensor()])

    def preprocess(examples):
        examples["modes"] = [image.mode for image in examples["image"]]
        examples["pixel_values"] = [transform(image.convert("RGB")) for image in examples["image"]]
        return examples

    falls_back(jpeg_folder, tmp_path, preprocess, r"preprocess .*reads the image's 'mode'")


def test_a_function_cropping_past_its_resize_goes_to_torch_naming_it(jpeg_folder, tmp_path):
    resize, cut, last = transforms.Resize(16), transforms.CenterCrop(24), transforms.ToTensor()
    flip = transforms.RandomHorizontalFlip(p=1.0)

    def preprocess(examples):
        out = []
        for image in examples["image"]:
            image = cut(resize(image.convert("RGB")))  # torchvision pads the crop
            if random.random() < 0.5:
                image = flip(image)
            out.append(last(image))
        examples["pixel_values"] = out
        return examples

    falls_back(jpeg_folder, tmp_path, preprocess, r"preprocess .*crops 24x24 from a resize of \d+x\d+, past its edges")


def test_optimum_habanas_sdxl_loader_without_its_crop_runs_natively_and_notes_each_flip(jpeg_folder, tmp_path):
    from PIL import Image

    square = tmp_path / "square"
    (square / "a").mkdir(parents=True)
    for k, path in enumerate(sorted(jpeg_folder.rglob("*.jpg"))[:12]):
        Image.open(path).convert("RGB").resize((48, 48)).save(square / "a" / f"{k:02d}.png")
    files = sorted(str(p) for p in square.rglob("*.png"))
    table = datasets.Dataset.from_dict({"image": files, "text": [f"t{k}" for k in range(len(files))]}).cast_column("image", datasets.Image())
    table.save_to_disk(str(tmp_path / "squares"))
    table = datasets.load_from_disk(str(tmp_path / "squares"))
    loader = native(table.with_transform(sdxl_preprocess(32, False, True, crops=False)), shuffle=True, seed=4)
    assert loader._rows.function.steps.crop == ("none", None)
    flips = []
    for _ in range(3):
        for batch in loader:
            for k, row in enumerate(loader.last_indices):
                assert batch["original_sizes"][k] == (48, 48)
                top, left = batch["crop_top_lefts"][k]
                assert top == 0 and left in (0, 32)
                resized = F.resize(table[row]["image"].convert("RGB"), 32, interpolation=transforms.InterpolationMode.BILINEAR)
                want = F.normalize(F.to_tensor(F.hflip(resized) if left == 32 else resized), [0.5], [0.5])
                assert (batch["pixel_values"][k] - want).abs().max() <= WITHIN
                flips.append(left == 32)
    assert 0 < sum(flips) < len(flips)


def test_a_function_whose_flip_odds_depend_on_the_image_goes_to_torch_naming_it(jpeg_folder, tmp_path):
    resize, cut, last = transforms.Resize(24), transforms.CenterCrop(24), transforms.ToTensor()
    flip = transforms.RandomHorizontalFlip(p=1.0)

    def preprocess(examples):
        out = []
        for image in examples["image"]:
            image = cut(resize(image.convert("RGB")))
            if random.random() < (0.5 if examples["text"][len(out)].endswith(("0 of a thing", "2 of a thing")) else 0.2):
                image = flip(image)
            out.append(last(image))
        examples["pixel_values"] = out
        return examples

    falls_back(jpeg_folder, tmp_path, preprocess, r"preprocess .*mirrors row \d+'s image at other odds than row 0's")


def test_a_function_cropping_elsewhere_than_get_params_said_goes_to_torch_naming_it(jpeg_folder, tmp_path):
    resize, cut, last = transforms.Resize(32), transforms.RandomCrop(24), transforms.ToTensor()

    def preprocess(examples):
        out = []
        for image in examples["image"]:
            image = resize(image.convert("RGB"))
            y1, x1, h, w = cut.get_params(image, (24, 24))
            out.append(last(crop(image, y1 // 2, x1, h, w)))
        examples["pixel_values"] = out
        return examples

    falls_back(jpeg_folder, tmp_path, preprocess, r"preprocess .*crops elsewhere than get_params said")


def test_a_damaged_image_in_the_sdxl_table_is_named_and_its_row_replaced_sizes_and_all(jpeg_folder, tmp_path):
    """The row that replaces the damaged one gives its size and corner too, as its pixels."""
    files = []
    for k, jpg in enumerate(sorted(jpeg_folder.rglob("*.jpg"))[:8]):
        files.append(str(tmp_path / f"{k}.jpg"))
        (tmp_path / f"{k}.jpg").write_bytes(jpg.read_bytes())
    (tmp_path / "3.jpg").write_bytes(b"\xff\xd8\xff\xe0")
    table = datasets.Dataset.from_dict({"image": files, "text": [f"caption {k}" for k in range(8)]}).cast_column("image", datasets.Image())
    table.save_to_disk(str(tmp_path / "saved"))  # the bytes embedded, the damaged ones too
    table = datasets.load_from_disk(str(tmp_path / "saved"))
    loader = native(table.with_transform(sdxl_preprocess(24, True, False)), shuffle=False)
    with pytest.warns(SkippedSampleWarning, match=r"skipped sample 3 \(.*row 3\)"):
        batches = [(b, list(loader.last_indices)) for b in loader]
    indices = [i for _, rows in batches for i in rows]
    assert len(indices) == 8 and 3 not in indices
    for batch, rows in batches:
        for k, row in enumerate(rows):
            image = table[row]["image"]
            assert batch["original_sizes"][k] == (image.height, image.width)
            top, left = batch["crop_top_lefts"][k]
            assert (batch["pixel_values"][k] - steps_of(image, 24, top, left, False, False)).abs().max() <= WITHIN


def test_a_function_whose_last_transform_flips_too_goes_to_torch_naming_it(jpeg_folder, tmp_path):
    """Its own flip would be drawn beside the gate's, unnoted: what the function notes could
    not follow the pixels as the user's loader has them."""
    resize, cut = transforms.Resize(24), transforms.CenterCrop(24)
    flip = transforms.RandomHorizontalFlip(p=1.0)
    last = transforms.Compose([transforms.RandomHorizontalFlip(), transforms.ToTensor()])

    def preprocess(examples):
        out, flips = [], []
        for image in examples["image"]:
            image = cut(resize(image.convert("RGB")))
            flips.append(random.random() < 0.5)
            if flips[-1]:
                image = flip(image)
            out.append(last(image))
        examples["pixel_values"] = out
        examples["flipped"] = flips
        return examples

    falls_back(jpeg_folder, tmp_path, preprocess, r"preprocess .*last transform moves the pixels too \(RandomHorizontalFlip\)")


def test_a_function_cropping_and_mirroring_with_torchvisions_functionals_runs_natively(jpeg_folder, tmp_path):
    """`TF.crop` and `TF.hflip` through the functional module, as custom trainers write it."""
    import torchvision.transforms.functional as TF

    resize, cut = transforms.Resize(32), transforms.RandomCrop(24)
    last = transforms.Compose([transforms.ToTensor(), transforms.Normalize([0.5], [0.5])])

    def preprocess(examples):
        sizes, corners, out = [], [], []
        for image in examples["image"]:
            image = image.convert("RGB")
            sizes.append((image.height, image.width))
            image = resize(image)
            y1, x1, h, w = cut.get_params(image, (24, 24))
            image = TF.crop(image, y1, x1, h, w)
            if random.random() < 0.5:
                x1 = image.width - x1
                image = TF.hflip(image)
            corners.append((y1, x1))
            out.append(last(image))
        examples["original_sizes"], examples["crop_top_lefts"], examples["pixel_values"] = sizes, corners, out
        return examples

    table = caption_table(jpeg_folder, tmp_path)
    loader = native(table.with_transform(preprocess), shuffle=True, seed=3)
    flips, corners = check_batches(loader, table, 24, False, resize=32)
    # Resized to 32 on the shorter side: the crop of 24 draws on both axes.
    assert 0 < sum(flips) < len(flips) and len(corners) > 10
