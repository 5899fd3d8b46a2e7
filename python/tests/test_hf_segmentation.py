"""A `datasets` table of images and their segmentation masks (an Image column each), whose
`set_transform` function hands an albumentations `Compose` each image with its mask:
transformers' `run_semantic_segmentation.py` (`functools.partial(preprocess_batch,
transforms=...)`; `Lambda` reducing the labels, `PadIfNeeded`, `RandomCrop`, a flip,
`Normalize`, `ToTensorV2` to train; the same with `Resize` alone to evaluate). The images are made natively, each mask moved as its image was."""

import io
import warnings
from functools import partial

import numpy as np
import pytest
import torch

datasets = pytest.importorskip("datasets")
cv2 = pytest.importorskip("cv2")
A = pytest.importorskip("albumentations")
from albumentations.pytorch import ToTensorV2  # noqa: E402
from PIL import Image  # noqa: E402

from hpuload.torch import DataLoader, FallbackWarning, SkippedSampleWarning  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def mask_png(data: bytes, palette: bool = False) -> bytes:
    """A mask for a photo: its grey levels in 6 classes (0 the background), as an 8-bit grey
    PNG (or a palette one)."""
    with Image.open(io.BytesIO(data)) as im:
        classes = (np.asarray(im.convert("L")) // 43).astype(np.uint8)
    mask = Image.fromarray(classes, mode="L")
    if palette:
        mask = mask.convert("P")
        mask.putpalette([v for k in range(256) for v in (k * 40 % 256, k * 90 % 256, k * 10 % 256)])
    out = io.BytesIO()
    mask.save(out, format="PNG")
    return out.getvalue()


def table(files, where, damaged_masks=(), wrong_size=(), palette=False, masks="label", scenes=False):
    """A table as the script reads `segments/sidewalk-semantic` after its renames: `image`
    and `label` (or `masks`), both Image columns; with `scenes`, a class label per row too
    (`scene_parse_150`'s `scene_category`)."""
    rows = {"image": [], "label": []}
    for k, path in enumerate(files):
        data = path.read_bytes()
        rows["image"].append({"bytes": data, "path": path.name})
        if k in damaged_masks:
            mask = b"\x89PNG\r\n\x1a\n damaged"
        elif k in wrong_size:
            mask = io.BytesIO()
            Image.new("L", (7, 5)).save(mask, format="PNG")
            mask = mask.getvalue()
        else:
            mask = mask_png(data, palette)
        rows["label"].append({"bytes": mask, "path": f"mask-{k}.png"})
    rows[masks] = rows.pop("label")
    features = datasets.Features({"image": datasets.Image(), masks: datasets.Image()})
    if scenes:
        rows["scene_category"] = [k % 3 for k in range(len(files))]
        features["scene_category"] = datasets.ClassLabel(names=["street", "room", "field"])
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(str(where / "table"))
    return datasets.load_from_disk(str(where / "table"))


def reduce_labels_transform(labels, **kwargs):
    labels[labels == 0] = 255
    labels = labels - 1
    labels[labels == 254] = 255
    return labels


def script_transforms(height, width, do_reduce_labels=True):
    """`run_semantic_segmentation.py`'s training `Compose` and its `preprocess_batch`, as
    written there."""
    train_transforms = A.Compose(
        [
            A.Lambda(name="reduce_labels", mask=reduce_labels_transform if do_reduce_labels else None, p=1.0),
            # pad image with 255, because it is ignored by loss
            A.PadIfNeeded(min_height=height, min_width=width, border_mode=0, value=255, p=1.0),
            A.RandomCrop(height=height, width=width, p=1.0),
            A.HorizontalFlip(p=0.5),
            A.Normalize(mean=MEAN, std=STD, max_pixel_value=255.0, p=1.0),
            ToTensorV2(),
        ]
    )

    def preprocess_batch(example_batch, transforms):
        pixel_values = []
        labels = []
        for image, target in zip(example_batch["image"], example_batch["label"]):
            transformed = transforms(image=np.array(image.convert("RGB")), mask=np.array(target))
            pixel_values.append(transformed["image"])
            labels.append(transformed["mask"])
        encoding = {}
        encoding["pixel_values"] = torch.stack(pixel_values).to(torch.float)
        encoding["labels"] = torch.stack(labels).to(torch.long)
        return encoding

    return train_transforms, preprocess_batch


def val_transforms(height, width, do_reduce_labels=True):
    """`run_semantic_segmentation.py`'s evaluation `Compose`, as written there."""
    return A.Compose(
        [
            A.Lambda(name="reduce_labels", mask=reduce_labels_transform if do_reduce_labels else None, p=1.0),
            A.Resize(height=height, width=width, p=1.0),
            A.Normalize(mean=MEAN, std=STD, max_pixel_value=255.0, p=1.0),
            ToTensorV2(),
        ]
    )


def default_data_collator(features):
    """transformers' `default_data_collator` for dicts of tensors (what the Trainer hands)."""
    return {k: torch.stack([f[k] for f in features]) for k in features[0]}


@pytest.fixture
def files(jpeg_folder):
    return sorted(jpeg_folder.rglob("*.jpg"))[:12]


def native(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        return DataLoader(*args, **kwargs)


def albumentations_by_plan(image, mask, plan, steps):
    """albumentations' own sample for the offset and flip hpuload drew: its `PadIfNeeded`
    (and the mask's `Lambda`), the crop at the plan's offset, the flip where it fell, then
    `Normalize` and `ToTensorV2`."""
    lam, pad, _, flip, norm, to_tensor = steps
    mask = lam.apply_to_mask(mask.copy())
    padded = A.Compose([pad])(image=image, mask=mask)
    top, left = plan["resized_crop"]["at"]
    h, w = steps[2].height, steps[2].width
    image, mask = padded["image"][top : top + h, left : left + w], padded["mask"][top : top + h, left : left + w]
    if plan.get("flip") or {"op": "hflip"} in plan.get("ops", []):
        image, mask = flip.apply(image), flip.apply_to_mask(mask)
    out = to_tensor(image=norm.apply(image), mask=mask)
    return out["image"].to(torch.float), out["mask"].to(torch.long)


def checked_samples(loader, ds, transforms, batch_size, epochs=(0,)):
    """Checks each sample `loader` gives over `epochs` (unshuffled) against
    `albumentations_by_plan` of its row, image and mask; yields each row's image and plan."""
    import json

    raw = ds.with_format(None)
    for epoch in epochs:
        for b, batch in enumerate(loader):
            assert set(batch) == {"pixel_values", "labels"}
            assert batch["pixel_values"].dtype == torch.float32 and batch["labels"].dtype == torch.int64
            for k in range(batch["labels"].shape[0]):
                index = b * batch_size + k
                row = raw[index]
                image, mask = np.array(row["image"].convert("RGB")), np.array(row["label"])
                plan = json.loads(loader._core.sample_plan(epoch, index, image.shape[1], image.shape[0]))
                want_x, want_y = albumentations_by_plan(image, mask, plan, transforms.transforms)
                assert torch.equal(batch["pixel_values"][k], want_x), (epoch, index)
                assert torch.equal(batch["labels"][k], want_y), (epoch, index)
                yield image, plan


@pytest.mark.parametrize("crop", [(48, 64), (320, 400)])
def test_the_segmentation_scripts_loader_runs_natively_with_albumentations_pixels_and_masks(files, tmp_path, crop):
    """Each sample is albumentations' own padding, crop (at the offset hpuload drew), flip and
    normalization of the image, and the same of its mask with the labels reduced (the
    padding's `fill_mask`), bit for bit; images smaller and larger than the crop."""
    ds = table(files, tmp_path)
    train_transforms, preprocess_batch = script_transforms(*crop)
    ds.set_transform(partial(preprocess_batch, transforms=train_transforms))
    loader = native(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu", seed=5)
    padded = flipped = 0
    for image, plan in checked_samples(loader, ds, train_transforms, 4, epochs=(0, 1)):
        padded += image.shape[0] < crop[0] or image.shape[1] < crop[1]
        flipped += bool(plan.get("flip") or {"op": "hflip"} in plan.get("ops", []))
    assert flipped and (padded or crop == (48, 64))


def test_the_loader_gives_torchs_batches_where_albumentations_draws_nothing(files, tmp_path):
    """Every image smaller than the crop (padded, offset 0) and no flip: hpuload's batches
    are torch's loader's over the same table, exactly, with a palette mask and without the
    labels reduced."""
    ds = table(files, tmp_path, palette=True)
    train_transforms, preprocess_batch = script_transforms(600, 600, do_reduce_labels=False)
    train_transforms.transforms[3].p = 0.0
    ds.set_transform(partial(preprocess_batch, transforms=train_transforms))
    ours = list(native(ds, batch_size=4, collate_fn=default_data_collator, num_workers=2, backend="cpu"))
    theirs = list(torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=default_data_collator))
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs):
        assert torch.equal(a["pixel_values"], b["pixel_values"]) and torch.equal(a["labels"], b["labels"])


def batches_and_skips(ds, batch_size):
    """The script's loader's batches over `ds` (one unshuffled epoch, natively) and the
    messages of the `SkippedSampleWarning`s it gave."""
    train_transforms, preprocess_batch = script_transforms(48, 64)
    ds.set_transform(partial(preprocess_batch, transforms=train_transforms))
    loader = native(ds, batch_size=batch_size, collate_fn=default_data_collator, backend="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batches = list(loader)
    return batches, [str(w.message) for w in caught if issubclass(w.category, SkippedSampleWarning)]


def test_a_damaged_mask_and_a_mask_of_another_size_are_named_and_their_samples_replaced(files, tmp_path):
    batches, skipped = batches_and_skips(table(files, tmp_path, damaged_masks=(2,), wrong_size=(5,)), 4)
    assert any("row 2, column 'label'" in m for m in skipped), skipped
    assert any("row 5, column 'label'" in m and "7x5" in m for m in skipped), skipped
    assert len(batches) == 3 and all(b["labels"].shape == (4, 48, 64) for b in batches)
    # Each replaced slot holds the next sample of its batch, image and mask alike.
    for b, k in ((0, 2), (1, 1)):
        assert torch.equal(batches[b]["labels"][k], batches[b]["labels"][k + 1])
        assert torch.equal(batches[b]["pixel_values"][k], batches[b]["pixel_values"][k + 1])


def test_the_users_compose_draws_on_as_before_after_the_check(files, tmp_path):
    """hpuload seeds the Compose to check the function, then leaves its generators as they were."""
    ds = table(files, tmp_path)
    train_transforms, preprocess_batch = script_transforms(48, 64)
    ds.set_transform(partial(preprocess_batch, transforms=train_transforms))
    train_transforms.set_random_seed(11)
    before = train_transforms.py_random.getstate(), train_transforms.transforms[2].py_random.getstate()
    native(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu")
    assert (train_transforms.py_random.getstate(), train_transforms.transforms[2].py_random.getstate()) == before


@pytest.mark.parametrize("size", [(48, 64), (333, 517)])
def test_the_scripts_evaluation_loader_gives_torchs_batches_exactly(files, tmp_path, size):
    """The evaluation `Compose` (the labels reduced, `Resize` of image and mask, `Normalize`)
    draws nothing: hpuload's batches are torch's loader's over the same table, images
    (OpenCV's bilinear) and masks (OpenCV's nearest positions) exactly, shrunk and enlarged."""
    ds = table(files, tmp_path)
    _, preprocess_batch = script_transforms(*size)
    ds.set_transform(partial(preprocess_batch, transforms=val_transforms(*size)))
    ours = list(native(ds, batch_size=5, collate_fn=default_data_collator, backend="cpu"))
    theirs = list(torch.utils.data.DataLoader(ds, batch_size=5, collate_fn=default_data_collator))
    assert len(ours) == len(theirs) == 3 and ours[0]["labels"].shape == (5, *size)
    for a, b in zip(ours, theirs):
        assert torch.equal(a["pixel_values"], b["pixel_values"]) and torch.equal(a["labels"], b["labels"])


def samples_with_plans(loader, ds, batch_size=4):
    """Each sample `loader` gives over one unshuffled epoch of `ds`: `(image, mask, plan,
    fell, pixel_values, labels)`, its row's image and mask as albumentations is given them,
    its plan, and whether its plan's flips fell `(left to right, top to bottom)`; every row
    once."""
    import json

    raw, seen = ds.with_format(None), 0
    for b, batch in enumerate(loader):
        assert batch["labels"].shape[0] == min(batch_size, len(ds) - b * batch_size)
        for k in range(batch["labels"].shape[0]):
            seen += 1
            row = raw[b * batch_size + k]
            image, mask = np.array(row["image"].convert("RGB")), np.array(row["label"])
            plan = json.loads(loader._core.sample_plan(0, b * batch_size + k, image.shape[1], image.shape[0]))
            ops = [op.get("op") for op in plan.get("ops", [])]
            fell = ((ops.count("hflip") + bool(plan.get("flip"))) % 2 == 1, ops.count("vflip") % 2 == 1)
            yield image, mask, plan, fell, batch["pixel_values"][k], batch["labels"][k]
    assert seen == len(ds)


def test_a_resize_then_flips_move_each_mask_as_its_image(files, tmp_path):
    """`Resize`, then flips that fall per sample: each sample is albumentations' own for the
    flips hpuload drew, image and mask, bit for bit; every pair of falls is seen."""
    ds = table(files, tmp_path)
    _, preprocess_batch = script_transforms(48, 64)
    resize, norm = A.Resize(40, 56), A.Normalize(mean=MEAN, std=STD)
    transforms = A.Compose([resize, A.HorizontalFlip(p=0.5), A.VerticalFlip(p=0.5), norm, ToTensorV2()])
    ds.set_transform(partial(preprocess_batch, transforms=transforms))
    loader = native(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu", seed=4)
    falls = set()
    for image, mask, _, fell, x, y in samples_with_plans(loader, ds):
        flips = [f for f, on in zip((A.HorizontalFlip(p=1.0), A.VerticalFlip(p=1.0)), fell) if on]
        want = A.Compose([resize, *flips, norm, ToTensorV2()])(image=image, mask=mask)
        assert torch.equal(x, want["image"]) and torch.equal(y, want["mask"].long())
        falls.add(fell)
    assert len(falls) == 4


def test_a_crop_the_size_of_its_resize_with_flips_around_it_gives_torchs_batches(files, tmp_path):
    """`Resize(48, 64)`, a flip, `RandomCrop(48, 64)` (which the plan keeps as the resize
    alone), a flip, all falling: torch's batches exactly, images and masks."""
    ds = table(files, tmp_path)
    _, preprocess_batch = script_transforms(48, 64)
    transforms = A.Compose(
        [A.Resize(48, 64), A.HorizontalFlip(p=1.0), A.RandomCrop(48, 64), A.VerticalFlip(p=1.0), A.Normalize(mean=MEAN, std=STD), ToTensorV2()]
    )
    ds.set_transform(partial(preprocess_batch, transforms=transforms))
    ours = list(native(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu"))
    theirs = list(torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=default_data_collator))
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs):
        assert torch.equal(a["pixel_values"], b["pixel_values"]) and torch.equal(a["labels"], b["labels"])


@pytest.mark.parametrize("recipe", ["smallest_random", "resize_flips_centre", "crop_alone"])
def test_a_crop_of_the_resize_with_flips_between_moves_each_mask_as_its_image(files, tmp_path, recipe):
    """`SmallestMaxSize` or `Resize`, flips between it and a `RandomCrop` or `CenterCrop`, or a
    crop of the image alone, then a flip: each sample is albumentations' own for the offset
    and flips hpuload drew, image and mask, bit for bit (the mask resized by OpenCV's nearest
    positions)."""
    ds = table(files, tmp_path)
    _, preprocess_batch = script_transforms(48, 64)
    norm = A.Normalize(mean=MEAN, std=STD)
    resize = {"smallest_random": A.SmallestMaxSize(max_size=70), "resize_flips_centre": A.Resize(90, 120), "crop_alone": None}[recipe]
    crop = A.CenterCrop(48, 64) if recipe == "resize_flips_centre" else A.RandomCrop(48, 64)
    between = [A.HorizontalFlip(p=0.5), A.VerticalFlip(p=0.5)] if recipe == "resize_flips_centre" else []
    steps = [resize] if resize is not None else []
    transforms = A.Compose([*steps, *between, crop, A.HorizontalFlip(p=0.5), norm, ToTensorV2()])
    ds.set_transform(partial(preprocess_batch, transforms=transforms))
    loader = native(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu", seed=6)
    falls = set()
    for image, mask, plan, fell, x, y in samples_with_plans(loader, ds):
        rc = plan["resized_crop"]
        flips_before = [f for f, on in ((A.HorizontalFlip(p=1.0), rc["hflip"]), (A.VerticalFlip(p=1.0), rc["vflip"])) if on]
        # The plan's flips are those before the crop and those after it.
        after = fell[0] != rc["hflip"]
        top, left = rc["at"]
        at = A.Crop(x_min=left, y_min=top, x_max=left + 64, y_max=top + 48)
        flips_after = [A.HorizontalFlip(p=1.0)] if after else []
        want = A.Compose([*steps, *flips_before, at, *flips_after, norm, ToTensorV2()])(image=image, mask=mask)
        assert torch.equal(x, want["image"]) and torch.equal(y, want["mask"].long())
        falls.add((rc["hflip"], rc["vflip"], after))
    assert len(falls) >= 2


def test_a_rotate_after_the_scripts_crop_and_flip_moves_each_mask_as_its_image(files, tmp_path):
    """The script's training `Compose` with a `Rotate` after its flip: each sample is its
    padded crop at hpuload's offset, then flipped and warped in the plan's order by OpenCV
    itself with the plan's matrix (the mask nearest, its border the padding's `fill_mask`
    after the `Lambda`), image and mask bit for bit; warps and flips both fall."""
    ds = table(files, tmp_path)
    steps, preprocess_batch = script_transforms(48, 64)
    lam, pad, crop, flip, norm, to_tensor = steps.transforms
    transforms = A.Compose([lam, pad, crop, flip, A.Rotate(limit=20, p=0.7), norm, to_tensor])
    ds.set_transform(partial(preprocess_batch, transforms=transforms))
    loader = native(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu", seed=3)
    seen = set()
    for image, mask, plan, _, x, y in samples_with_plans(loader, ds):
        padded = A.Compose([pad])(image=image, mask=lam.apply_to_mask(mask.copy()))
        top, left = plan["resized_crop"]["at"]
        image, mask = padded["image"][top : top + 48, left : left + 64], padded["mask"][top : top + 48, left : left + 64]
        ops = plan.get("ops", []) + ([{"op": "hflip"}] if plan.get("flip") else [])
        for op in ops:
            if op["op"] == "hflip":
                image, mask = image[:, ::-1], mask[:, ::-1]
            elif op["op"] == "cv2_affine":
                m = np.array(op["arg"]["inverse"], dtype=np.float32).astype(np.float64).reshape(2, 3)
                image = cv2.warpAffine(np.ascontiguousarray(image), m, (64, 48), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP)
                mask = cv2.warpAffine(np.ascontiguousarray(mask), m, (64, 48), flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP)
        out = to_tensor(image=norm.apply(np.ascontiguousarray(image)), mask=np.ascontiguousarray(mask))
        assert torch.equal(x, out["image"].to(torch.float)) and torch.equal(y, out["mask"].to(torch.long))
        seen.add(tuple(op["op"] for op in ops))
    assert any("cv2_affine" in s for s in seen) and any("hflip" in s for s in seen)


def test_a_letterbox_then_a_flip_moves_each_mask_as_its_image(files, tmp_path):
    """`LongestMaxSize` then `PadIfNeeded` (centred, the mask padded with `fill_mask`), then a
    flip that falls per sample: each sample is albumentations' own for the flip hpuload drew,
    image and mask, bit for bit, with the labels reduced first."""
    ds = table(files, tmp_path)
    _, preprocess_batch = script_transforms(48, 64)
    lam = A.Lambda(name="reduce_labels", mask=reduce_labels_transform, p=1.0)
    longest, pad = A.LongestMaxSize(max_size=64), A.PadIfNeeded(64, 72, border_mode=0, fill=(9, 8, 7), fill_mask=200)
    norm = A.Normalize(mean=MEAN, std=STD)
    transforms = A.Compose([lam, longest, pad, A.HorizontalFlip(p=0.5), norm, ToTensorV2()])
    ds.set_transform(partial(preprocess_batch, transforms=transforms))
    loader = native(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu", seed=4)
    falls = set()
    for image, mask, _, fell, x, y in samples_with_plans(loader, ds):
        assert y.shape == (64, 72)
        flips = [A.HorizontalFlip(p=1.0)] if fell[0] else []
        want = A.Compose([lam, longest, pad, *flips, norm, ToTensorV2()])(image=image, mask=mask)
        assert torch.equal(x, want["image"]) and torch.equal(y, want["mask"].long())
        falls.add(fell[0])
    assert falls == {False, True}


@pytest.mark.parametrize(
    "change",
    ["affine", "mask_interp_lambda", "mask_converted", "mask_resized_bilinear"],
)
def test_what_would_move_or_read_the_mask_otherwise_goes_to_torchs_loader_named(files, tmp_path, change):
    want = {
        "affine": "Affine of a mask with mask_interpolation=1",
        "mask_interp_lambda": "no function of each value alone",
        "mask_converted": "convert",
        "mask_resized_bilinear": "mask_interpolation=1",
    }
    ds = table(files, tmp_path)
    train_transforms, preprocess_batch = script_transforms(48, 64)
    fn = partial(preprocess_batch, transforms=train_transforms)
    if change == "mask_resized_bilinear":
        resize = A.Resize(48, 64, mask_interpolation=cv2.INTER_LINEAR)
        fn = partial(preprocess_batch, transforms=A.Compose([resize, A.Normalize(mean=MEAN, std=STD), ToTensorV2()]))
    elif change == "affine":
        warp = A.Affine(rotate=(-10, 10), mask_interpolation=cv2.INTER_LINEAR, p=1.0)
        train_transforms = A.Compose([*train_transforms.transforms[:4], warp, *train_transforms.transforms[4:]])
        fn = partial(preprocess_batch, transforms=train_transforms)
    elif change == "mask_interp_lambda":
        train_transforms = A.Compose([A.Lambda(mask=lambda m, **kw: np.roll(m, 1, axis=0)), *train_transforms.transforms[1:]])
        fn = partial(preprocess_batch, transforms=train_transforms)
    elif change == "mask_converted":

        def fn(batch):
            out = {"pixel_values": [], "labels": []}
            for image, target in zip(batch["image"], batch["label"]):
                t = train_transforms(image=np.array(image.convert("RGB")), mask=np.array(target.convert("L")))
                out["pixel_values"].append(t["image"])
                out["labels"].append(t["mask"])
            return out

    ds.set_transform(fn)
    with pytest.warns(FallbackWarning, match=want[change]):
        DataLoader(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu")


def test_a_function_that_hands_the_mask_on_some_rows_of_a_batch_only_stops_naming_it(files, tmp_path):
    """Checked on one row at a time, it hands every row's mask; on a batch, not the second:
    hpuload stops with an error saying so (never a batch without its masks)."""
    ds = table(files, tmp_path)
    train_transforms, _ = script_transforms(48, 64)

    def fn(batch):
        out = {"pixel_values": [], "labels": []}
        for image, target in zip(batch["image"], batch["label"]):
            given = {"mask": np.array(target)} if len(out["labels"]) % 2 == 0 else {}
            t = train_transforms(image=np.array(image.convert("RGB")), **given)
            out["pixel_values"].append(t["image"])
            out["labels"].append(t.get("mask", torch.zeros(48, 64, dtype=torch.uint8)))
        return out

    ds.set_transform(fn)
    loader = native(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu")
    with pytest.raises(Exception, match="mask with the images"):
        next(iter(loader))


def test_a_batch_of_one_whose_mask_is_damaged_takes_the_datasets_own_sample_of_a_later_row(files, tmp_path):
    batches, skipped = batches_and_skips(table(files, tmp_path, damaged_masks=(2,)), 1)
    assert len(skipped) == 1 and "row 2, column 'label'" in skipped[0] and "dataset's own sample" in skipped[0], skipped
    assert len(batches) == 12
    assert batches[2]["labels"].shape == (1, 48, 64) and batches[2]["labels"].dtype == torch.int64
    assert batches[2]["pixel_values"].shape == (1, 3, 48, 64)


def test_the_scripts_train_split_of_a_table_of_paths_reads_each_rows_own_mask(files, tmp_path):
    """The script splits the table (`train_test_split(0.15)`: an indices mapping), and a table
    made from files keeps their paths rather than their bytes: each sample's mask is still
    its own row's, moved as its image was."""
    masks = []
    for k, path in enumerate(files):
        out = tmp_path / f"mask-{k}.png"
        out.write_bytes(mask_png(path.read_bytes()))
        masks.append(str(out))
    ds = datasets.Dataset.from_dict({"image": [str(p) for p in files], "label": masks})
    ds = ds.cast_column("image", datasets.Image()).cast_column("label", datasets.Image())
    ds.save_to_disk(str(tmp_path / "paths"))
    ds = datasets.load_from_disk(str(tmp_path / "paths")).train_test_split(0.25, seed=3)["train"]
    train_transforms, preprocess_batch = script_transforms(48, 64)
    ds.set_transform(partial(preprocess_batch, transforms=train_transforms))
    loader = native(ds, batch_size=3, collate_fn=default_data_collator, backend="cpu", seed=2)
    assert len(list(checked_samples(loader, ds, train_transforms, 3))) == len(ds) == 9


def test_a_table_of_colour_label_maps_goes_to_torchs_loader_named(files, tmp_path):
    """Masks that are RGB PNGs (colour-coded label maps): albumentations moves them as
    `[H, W, 3]` arrays, hpuload cuts masks of one byte a pixel only."""
    rows = {"image": [], "label": []}
    for k, path in enumerate(files):
        out = io.BytesIO()
        Image.open(io.BytesIO(mask_png(path.read_bytes()))).convert("RGB").save(out, format="PNG")
        rows["image"].append({"bytes": path.read_bytes(), "path": path.name})
        rows["label"].append({"bytes": out.getvalue(), "path": f"mask-{k}.png"})
    features = datasets.Features({"image": datasets.Image(), "label": datasets.Image()})
    datasets.Dataset.from_dict(rows, features=features).save_to_disk(str(tmp_path / "rgb"))
    ds = datasets.load_from_disk(str(tmp_path / "rgb"))
    train_transforms, preprocess_batch = script_transforms(48, 64, do_reduce_labels=False)
    ds.set_transform(partial(preprocess_batch, transforms=train_transforms))
    with pytest.warns(FallbackWarning, match="not all PNGs of one byte a pixel"):
        DataLoader(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu")


def test_a_compose_given_the_image_alone_runs_natively_with_torchs_batches(files, tmp_path):
    """A table's function handing its albumentations Compose only the image (the mask's
    `Lambda` left in it does nothing then): natively, torch's batches exactly."""
    ds = table(files, tmp_path)
    train_transforms, _ = script_transforms(600, 600)
    train_transforms.transforms[3].p = 1.0  # the flip always falls: nothing is drawn

    def preprocess(batch):
        return {"pixel_values": [train_transforms(image=np.array(im.convert("RGB")))["image"] for im in batch["image"]]}

    ds.set_transform(preprocess)
    ours = list(native(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu"))
    theirs = list(torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=default_data_collator))
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs):
        assert list(a) == ["pixel_values"] and torch.equal(a["pixel_values"], b["pixel_values"])


def guide_transforms(processor, jitter=None):
    """transformers' semantic segmentation guide's functions (over `scene_parse_150`, whose
    masks are its `annotation` column), as written there: the training one puts each image
    through `jitter` first."""

    def train_transforms(example_batch):
        images = [jitter(x) for x in example_batch["image"]]
        labels = [x for x in example_batch["annotation"]]
        inputs = processor(images, labels)
        return inputs

    def val_transforms(example_batch):
        images = [x for x in example_batch["image"]]
        labels = [x for x in example_batch["annotation"]]
        inputs = processor(images, labels)
        return inputs

    return train_transforms if jitter is not None else val_transforms


def alike_to_the_processors(ours, theirs):
    """Batches of the guide's loader: the masks exactly, the pixels within float rounding
    (the processor fuses its rescale and normalize in one division)."""
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert list(a) == list(b) == ["pixel_values", "labels"]
        assert a["labels"].dtype == b["labels"].dtype == torch.int64 and torch.equal(a["labels"], b["labels"])
        assert a["pixel_values"].shape == b["pixel_values"].shape
        assert (a["pixel_values"] - b["pixel_values"]).abs().max() < 1e-5


def test_the_guides_table_with_a_scene_label_beside_the_maps_gives_torchs_batches(files, tmp_path):
    """`scene_parse_150` has a class label per image beside its maps (`scene_category`), which
    the guide's function leaves out: hpuload's batches are still torch's, its keys and no
    other."""
    transformers = pytest.importorskip("transformers")
    ds = table(files, tmp_path, masks="annotation", scenes=True)
    ds.set_transform(guide_transforms(transformers.SegformerImageProcessor(size={"height": 48, "width": 64})))
    ours = list(native(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu"))
    theirs = list(torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=default_data_collator))
    alike_to_the_processors(ours, theirs)


@pytest.mark.parametrize("size", [None, (48, 64)])
def test_the_segmentation_guides_evaluation_loader_runs_natively_with_the_processors_maps(files, tmp_path, size):
    """Segformer's image processor given each batch's images and their maps (the guide's
    `val_transforms`): the images resized and normalized natively, each map reduced and
    resized by torch's nearest-exact positions as the processor does; its default 512x512
    and a smaller size, with the labels reduced."""
    transformers = pytest.importorskip("transformers")
    ds = table(files, tmp_path, masks="annotation", wrong_size=(3,))
    kw = {} if size is None else {"size": {"height": size[0], "width": size[1]}, "do_reduce_labels": True}
    ds.set_transform(guide_transforms(transformers.SegformerImageProcessor(**kw)))
    ours = list(native(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu"))
    theirs = list(torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=default_data_collator))
    # A map of another size than its image (row 3's) is resized all the same.
    assert ours[0]["labels"].shape == (4, *(size or (512, 512)))
    alike_to_the_processors(ours, theirs)


@pytest.mark.parametrize("first", ["brightness", "flip"])
def test_the_guides_training_loader_jitters_the_images_alone_before_the_processor(files, tmp_path, first):
    """The guide's `train_transforms`: each image through a torchvision transform first, then
    the processor given them all with the maps. Where that transform draws nothing (a fixed
    brightness, a flip that always falls) the batches are torch's loader's: the maps are not
    given to it, so a flip there leaves them as they are."""
    transformers = pytest.importorskip("transformers")
    from torchvision import transforms as T

    ds = table(files, tmp_path, masks="annotation")
    jitter = T.ColorJitter(brightness=(1.25, 1.25)) if first == "brightness" else T.RandomHorizontalFlip(p=1.0)
    processor = transformers.SegformerImageProcessor(size={"height": 40, "width": 56}, do_reduce_labels=True)
    ds.set_transform(guide_transforms(processor, jitter))
    ours = list(native(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu", num_workers=2))
    theirs = list(torch.utils.data.DataLoader(ds, batch_size=4, collate_fn=default_data_collator))
    alike_to_the_processors(ours, theirs)


def test_the_guides_own_jitter_runs_natively_at_the_processors_shapes(files, tmp_path):
    """The guide's `ColorJitter(brightness=0.25, contrast=0.25, saturation=0.25, hue=0.1)`:
    checked under the same draws, then run natively, torch's shapes and dtypes."""
    transformers = pytest.importorskip("transformers")
    from torchvision.transforms import ColorJitter

    ds = table(files, tmp_path, masks="annotation")
    jitter = ColorJitter(brightness=0.25, contrast=0.25, saturation=0.25, hue=0.1)
    ds.set_transform(guide_transforms(transformers.SegformerImageProcessor(size={"height": 48, "width": 64}), jitter))
    batches = list(native(ds, batch_size=4, collate_fn=default_data_collator))
    assert len(batches) == 3
    for b in batches:
        assert b["pixel_values"].shape == (4, 3, 48, 64) and b["pixel_values"].dtype == torch.float32
        assert b["labels"].shape == (4, 48, 64) and b["labels"].dtype == torch.int64


def test_a_function_that_hands_the_processor_some_jittered_images_only_stops_naming_it(files, tmp_path):
    """Checked one row at a time, every jittered image goes on to the processor; on a batch,
    every other one is handed out as the jitter gave it: hpuload stops with an error saying
    so (its stand-in for the jitter gives the processor's output)."""
    transformers = pytest.importorskip("transformers")
    from torchvision import transforms as T

    ds = table(files, tmp_path, masks="annotation")
    jitter = T.ColorJitter(brightness=(1.25, 1.25))
    processor = transformers.SegformerImageProcessor(size={"height": 40, "width": 56})

    def fn(batch):
        images, out = [jitter(x) for x in batch["image"]], {"pixel_values": [], "labels": []}
        for k, (image, label) in enumerate(zip(images, batch["annotation"])):
            done = processor([image], [label]) if k % 2 == 0 else {"pixel_values": [image], "labels": [label]}
            out["pixel_values"] += done["pixel_values"]
            out["labels"] += done["labels"]
        return out

    ds.set_transform(fn)
    loader = native(ds, batch_size=4, backend="cpu")
    with pytest.raises(Exception, match="some rows' images and not others"):
        next(iter(loader))


def test_a_processor_given_maps_otherwise_goes_to_torchs_loader_named(files, tmp_path):
    """Maps that are not the rows' other images, and a processor other than Segformer's
    given maps, go to torch's loader, named."""
    transformers = pytest.importorskip("transformers")
    ds = table(files, tmp_path, masks="annotation")
    processor = transformers.SegformerImageProcessor(size={"height": 48, "width": 64})

    def arrays(batch):
        return processor(batch["image"], [np.array(m) for m in batch["annotation"]])

    for fn, says in (
        (arrays, "segmentation maps that are not the rows' other images"),
        (guide_transforms(transformers.BeitImageProcessor(size={"height": 48, "width": 64})), "given segmentation maps"),
    ):
        ds.set_transform(fn)
        with pytest.warns(FallbackWarning, match=says):
            DataLoader(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu")


def test_a_damaged_map_given_the_processor_is_named_and_its_sample_replaced(files, tmp_path):
    transformers = pytest.importorskip("transformers")
    ds = table(files, tmp_path, masks="annotation", damaged_masks=(2,))
    ds.set_transform(guide_transforms(transformers.SegformerImageProcessor(size={"height": 48, "width": 64})))
    loader = native(ds, batch_size=4, collate_fn=default_data_collator, backend="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batches = list(loader)
    skipped = [str(w.message) for w in caught if issubclass(w.category, SkippedSampleWarning)]
    assert len(skipped) == 1 and "row 2, column 'annotation'" in skipped[0], skipped
    assert torch.equal(batches[0]["labels"][2], batches[0]["labels"][3])
    assert torch.equal(batches[0]["pixel_values"][2], batches[0]["pixel_values"][3])


@pytest.mark.parametrize("recipe", ["guide", "script"])
def test_the_trainer_trains_and_evaluates_segformer_on_hpuload_after_install(files, tmp_path, recipe):
    """The guide's and `run_semantic_segmentation.py`'s whole data paths under transformers'
    `Trainer` (`remove_unused_columns=False`, as both set): a small Segformer trained three
    steps on the training loader and evaluated on the evaluation loader, both hpuload's,
    neither falling back."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    import hpuload.transformers
    from torchvision.transforms import ColorJitter

    masks = "annotation" if recipe == "guide" else "label"
    train_ds = table(files, tmp_path, masks=masks)
    test_ds = train_ds.select(range(8))
    if recipe == "guide":
        processor = transformers.SegformerImageProcessor(size={"height": 48, "width": 64}, do_reduce_labels=True)
        jitter = ColorJitter(brightness=0.25, contrast=0.25, saturation=0.25, hue=0.1)
        train_ds.set_transform(guide_transforms(processor, jitter))
        test_ds.set_transform(guide_transforms(processor))
    else:
        train_transforms, preprocess_batch = script_transforms(48, 64)
        train_ds.set_transform(partial(preprocess_batch, transforms=train_transforms))
        test_ds.set_transform(partial(preprocess_batch, transforms=val_transforms(48, 64)))
    config = transformers.SegformerConfig(
        num_labels=6, hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1], num_attention_heads=[1, 1, 1, 1], decoder_hidden_size=16
    )
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, per_device_eval_batch_size=4, max_steps=3,
        remove_unused_columns=False, report_to=[], use_cpu=True, save_strategy="no", logging_strategy="no", seed=1,
    )
    hpuload.transformers.install()
    try:
        model = transformers.SegformerForSemanticSegmentation(config)
        trainer = transformers.Trainer(model=model, args=args, train_dataset=train_ds, eval_dataset=test_ds)
        with warnings.catch_warnings():
            warnings.simplefilter("error", FallbackWarning)
            assert isinstance(trainer.get_train_dataloader(), DataLoader)
            result = trainer.train()
            assert isinstance(trainer.get_eval_dataloader(), DataLoader)
            metrics = trainer.evaluate()
    finally:
        hpuload.transformers.uninstall()
    assert result.global_step == 3 and np.isfinite(result.training_loss) and np.isfinite(metrics["eval_loss"])
