"""torchvision's detection reference as it runs by default, without `--use-v2`: its own
`CocoDetection` subclass, `ConvertCocoPolysToMask` and v1 transforms (`reference_v1.py`) run on
hpuload's path, with the targets torch's loader gives (boxes, labels, masks, image_id, area,
iscrowd, in that order), and boxes, masks and pixels as the reference computes them given the
parameters hpuload drew."""

import json
import random
import warnings

import pytest
import torch
from PIL import Image

pytest.importorskip("pycocotools")

import reference_v1 as ref  # noqa: E402
from test_detection import photometric, reference_collate, write_coco  # noqa: E402
from torchvision.transforms.v2 import functional as F  # noqa: E402

import hpuload.torch as ht  # noqa: E402

MEAN = [123, 117, 104]


@pytest.fixture(scope="module")
def coco_v1(png_folder, tmp_path_factory):
    """PNGs (lossless, so pixels compare exactly) with boxes, plus what ConvertCocoPolysToMask
    cleans up: a crowd, a box reaching past the image, an empty box, an image with only a
    crowd (kept out by `get_coco`'s filter? no: it has an annotation, so it stays, boxless)."""
    files = sorted(png_folder.rglob("*.png"))
    out = tmp_path_factory.mktemp("coco-v1") / "instances.json"
    write_coco(png_folder, files, out, seed=4)
    data = json.loads(out.read_text())
    first, second = data["images"][0], data["images"][1]
    extra = [
        {"image_id": first["id"], "bbox": [first["width"] - 20.0, 5.0, 60.0, 30.0], "iscrowd": 0, "category_id": 3},
        {"image_id": first["id"], "bbox": [10.0, 10.0, 0.0, 25.0], "iscrowd": 0, "category_id": 1},
        {"image_id": first["id"], "bbox": [5.0, 5.0, 40.0, 40.0], "iscrowd": 1, "category_id": 1},
    ]
    for k, a in enumerate(extra):
        x, y, w, h = a["bbox"]
        a.update(id=10_000 + k, area=w * h, segmentation=[[x, y, x + w, y, x + w, y + h, x, y + h]])
        if a["iscrowd"]:
            a["segmentation"] = {"counts": [0, 16], "size": [4, 4]}
    # The second image's objects become one crowd: it yields no box.
    data["annotations"] = [a for a in data["annotations"] if a["image_id"] != second["id"]]
    extra.append(dict(extra[2], id=10_010, image_id=second["id"]))
    data["annotations"] += extra
    out.write_text(json.dumps(data))
    return png_folder, out


def loaders(folder, ann, preset, seed=None):
    """(torch's DataLoader, hpuload's) over the reference's dataset built the same way."""
    torch_ds = ref.get_coco(folder, ann, preset)
    ours_ds = ref.get_coco(folder, ann, preset)
    theirs = torch.utils.data.DataLoader(torch_ds, batch_size=4, collate_fn=reference_collate)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ht.FallbackWarning)
        ours = ht.DataLoader(ours_ds, batch_size=4, collate_fn=reference_collate, backend="cpu", seed=seed)
    assert isinstance(ours, ht.DataLoader)
    return theirs, ours


def test_the_reference_v1_path_gives_torchs_samples_exactly_when_nothing_is_random(coco_v1):
    folder, ann = coco_v1
    for prob in (0.0, 1.0):
        theirs, ours = loaders(folder, ann, ref.DetectionPresetTrain(data_augmentation="hflip", hflip_prob=prob))
        n = 0
        for (want_images, want_targets), (images, targets) in zip(theirs, ours):
            for want_image, want, image, got in zip(want_images, want_targets, images, targets):
                assert torch.equal(image, want_image)
                assert list(got) == list(want) == ["boxes", "labels", "masks", "image_id", "area", "iscrowd"]
                for key, value in want.items():
                    if isinstance(value, torch.Tensor):
                        assert got[key].dtype == value.dtype and torch.equal(got[key], value), (key, want["image_id"])
                    else:
                        assert type(got[key]) is type(value) and got[key] == value
                n += 1
        assert n == len(ours.dataset)


@pytest.mark.parametrize("backend", ["pil", "tensor"])
def test_multiscale_with_one_size_gives_torchs_samples_exactly_when_nothing_is_random(png_folder, tmp_path, backend):
    """One shorter side and the flip at 0 or 1: every sample, pixels, boxes, masks and all,
    equals what torch's loader gives for the same reference dataset (every image with a mask:
    the reference's own resize of an empty mask stack fails), with the PIL backend (Pillow's
    resize) and the tensor one (`PILToTensor` first: v1's resize of a tensor, in float)."""
    folder = png_folder
    ann = write_coco(folder, sorted(folder.rglob("*.png")), tmp_path / "instances.json", seed=6)
    for prob in (0.0, 1.0):
        preset = ref.DetectionPresetTrain(data_augmentation="multiscale", hflip_prob=prob, min_size=64, max_size=90, backend=backend)
        theirs, ours = loaders(folder, ann, preset)
        n = 0
        for (want_images, want_targets), (images, targets) in zip(theirs, ours):
            for want_image, want, image, got in zip(want_images, want_targets, images, targets):
                assert torch.equal(image, want_image)
                assert list(got) == list(want)
                for key, value in want.items():
                    if isinstance(value, torch.Tensor):
                        assert got[key].dtype == value.dtype and torch.equal(got[key], value), (key, want["image_id"])
                    else:
                        assert got[key] == value
                n += 1
        assert n == len(ours.dataset)


def _replay_v1(src, boxes, labels, masks, plan):
    """The reference's v1 steps with the loader's drawn parameters: photometric steps, the
    zoom-out's padding with the mean, the IoU crop (boxes whose centre leaves the window
    dropped, the rest clamped; nothing sanitized), the flip (masks too; the zoom-out and crop
    leave masks as they are), to float."""
    image = photometric(src, plan)
    d = plan["detect"]
    h, w = image.shape[-2:]
    (cw, ch), (left, top) = d["canvas"], d["image_at"]
    boxes = boxes.clone()
    if (cw, ch) != (w, h):
        image = F.pad(image, [left, top, cw - w - left, ch - h - top], fill=MEAN)
        boxes[:, 0::2] += left
        boxes[:, 1::2] += top
    wl, wt, ww, wh = d["window"]
    if [wl, wt, ww, wh] != [0, 0, cw, ch]:
        cx, cy = 0.5 * (boxes[:, 0] + boxes[:, 2]), 0.5 * (boxes[:, 1] + boxes[:, 3])
        inside = (wl < cx) & (cx < wl + ww) & (wt < cy) & (cy < wt + wh)
        boxes, labels = boxes[inside], labels[inside]
        boxes[:, 0::2] -= wl
        boxes[:, 1::2] -= wt
        boxes[:, 0::2].clamp_(min=0, max=ww)
        boxes[:, 1::2].clamp_(min=0, max=wh)
        image = F.crop(image, wt, wl, wh, ww)
    if d["flip"]:
        image = F.horizontal_flip(image)
        boxes[:, [0, 2]] = ww - boxes[:, [2, 0]]
        masks = masks.flip(-1)
    return F.to_dtype(image, torch.float32, scale=True), boxes, labels, masks


def test_the_ssd_augmentation_moves_boxes_masks_and_pixels_as_the_reference_given_hpuloads_draws(coco_v1):
    folder, ann = coco_v1
    _, ours = loaders(folder, ann, ref.DetectionPresetTrain(data_augmentation="ssd"), seed=3)
    convert = ref.ConvertCocoPolysToMask()
    coco = ours.dataset.dataset.coco
    seen = {"zoom": 0, "crop": 0, "flip": 0}
    levels = torch.zeros(256)
    for epoch in range(3):
        ours.set_epoch(epoch)
        for images, targets in ours:
            for image, target, index in zip(images, targets, ours.last_indices):
                image_id = target["image_id"]
                pil = Image.open(folder / coco.imgs[image_id]["file_name"]).convert("RGB")
                anns = coco.loadAnns(coco.getAnnIds(image_id))
                _, clean = convert(pil, {"image_id": image_id, "annotations": anns})
                plan = json.loads(ours._core.sample_plan(epoch, index, pil.width, pil.height))
                want_image, boxes, labels, masks = _replay_v1(
                    F.pil_to_tensor(pil), clean["boxes"], clean["labels"], clean["masks"], plan
                )
                assert image.shape == want_image.shape
                assert target["labels"].tolist() == labels.tolist(), f"image {image_id}: boxes kept differ"
                torch.testing.assert_close(target["boxes"], boxes, rtol=0, atol=1e-4)
                assert torch.equal(target["masks"], masks)
                assert torch.equal(target["area"], clean["area"]) and torch.equal(target["iscrowd"], clean["iscrowd"])
                levels += torch.bincount(((image - want_image).abs() * 255).round().long().flatten(), minlength=256)[:256]
                d = plan["detect"]
                seen["zoom"] += d["canvas"] != [pil.width, pil.height]
                seen["crop"] += d["window"] != [0, 0, *d["canvas"]]
                seen["flip"] += d["flip"]
    assert all(v >= 3 for v in seen.values()), seen
    # Photometric steps run hpuload's kernels on the image (within 1 level of Pillow's each,
    # chained up to four deep).
    assert levels[4:].sum() == 0, levels[:6]
    assert levels[2:].sum() <= 1e-3 * levels.sum(), levels[:6]


@pytest.mark.parametrize(
    "hflip_prob, min_size, max_size", [(0.0, (40, 56, 72), 90), (1.0, (40, 56, 72), 90), (0.5, (40, 56, 72), 90), (0.5, (520, 610), 1000)]
)
def test_the_multiscale_augmentation_resizes_boxes_masks_and_pixels_as_the_reference_given_hpuloads_draws(coco_v1, hflip_prob, min_size, max_size):
    """RandomShortestSize then the flip: each image at the size drawn for it (smaller and
    larger than the images), masks resized by torchvision's nearest and flipped after, boxes
    scaled then mirrored in the resized width with the reference's arithmetic."""
    folder, ann = coco_v1
    preset = ref.DetectionPresetTrain(data_augmentation="multiscale", hflip_prob=hflip_prob, min_size=min_size, max_size=max_size)
    _, ours = loaders(folder, ann, preset, seed=5)
    convert = ref.ConvertCocoPolysToMask()
    coco = ours.dataset.dataset.coco
    shorter, levels = set(), torch.zeros(256)
    for images, targets in ours:
        assert list(targets[0]) == ["boxes", "labels", "masks", "image_id", "area", "iscrowd"]
        for image, target, index in zip(images, targets, ours.last_indices):
            image_id = target["image_id"]
            pil = Image.open(folder / coco.imgs[image_id]["file_name"]).convert("RGB")
            _, want = convert(pil, {"image_id": image_id, "annotations": coco.loadAnns(coco.getAnnIds(image_id))})
            d = json.loads(ours._core.sample_plan(0, index, pil.width, pil.height))["detect"]
            assert d["flip"] == (hflip_prob == 1.0) or hflip_prob == 0.5
            h, w = d["size"]
            # The reference's own step, with the drawn shorter side as its only choice.
            sizes = {}
            for m in min_size:
                t = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in want.items()}
                if not len(t["masks"]):  # torch's interpolate refuses an empty batch
                    del t["masks"]
                resized, t = ref.RandomShortestSize(m, max_size)(pil, t)
                t.setdefault("masks", torch.zeros((0, resized.height, resized.width), dtype=torch.uint8))
                sizes[(resized.height, resized.width)] = (m, resized, t)
            m, resized, want = sizes[(h, w)]
            shorter.add(m)
            want_image = F.pil_to_tensor(resized)
            if d["flip"]:
                want_image, want = ref.RandomHorizontalFlip(p=1.0)(want_image, want)
            want_image = F.to_dtype(want_image, torch.float32, scale=True)
            assert image.shape == want_image.shape == (3, h, w)
            for key in ("boxes", "labels", "masks", "area", "iscrowd"):
                assert got_equal(target[key], want[key]), (key, image_id)
            levels += torch.bincount(((image - want_image).abs() * 255).round().long().flatten(), minlength=256)[:256]
    assert len(shorter) > 1
    # Pillow's resize of the PIL image, byte for byte.
    assert levels[1:].sum() == 0, levels[:4]


def _same_targets(got: dict, want: dict, image_id) -> None:
    assert list(got) == list(want) == ["boxes", "labels", "masks", "image_id", "area", "iscrowd"]
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            assert got_equal(got[key], value), (key, image_id)
        else:
            assert got[key] == value


@pytest.mark.parametrize("backend", ["pil", "tensor"])
def test_lsj_gives_torchs_samples_exactly_when_nothing_is_random(png_folder, tmp_path, backend):
    """The `lsj` augmentation (the reference's own ScaleJitter, FixedSizeCrop with the mean as
    fill, then the flip) with one scale and the flip at 0 or 1: every image fits the fixed
    size, so nothing is drawn but the scale; every sample (pixels, boxes, masks padded and
    flipped with the image) equals what torch's loader gives. With the tensor backend the
    reference's own FixedSizeCrop fails on its sequence fill, so that preset is built with a
    single grey: torch's loader and hpuload then agree on it too."""
    folder = png_folder
    ann = write_coco(folder, sorted(folder.rglob("*.png")), tmp_path / "instances.json", seed=8)
    for prob in (0.0, 1.0):
        preset = ref.DetectionPresetTrain(
            data_augmentation="lsj", hflip_prob=prob, lsj_size=(150, 140), scale_range=(0.7, 0.7), backend=backend
        )
        if backend == "tensor":
            preset.transforms.transforms[2].fill = 117
        theirs, ours = loaders(folder, ann, preset)
        n = 0
        for (want_images, want_targets), (images, targets) in zip(theirs, ours):
            for want_image, want, image, got in zip(want_images, want_targets, images, targets):
                assert image.shape == want_image.shape == (3, 150, 140)
                assert torch.equal(image, want_image), want["image_id"]
                _same_targets(got, want, want["image_id"])
                n += 1
        assert n == len(ours.dataset)


def test_lsj_jitters_cuts_pads_and_flips_boxes_masks_and_pixels_as_the_reference_given_hpuloads_draws(coco_v1):
    """ScaleJitter, FixedSizeCrop and the flip with hpuload's draws: each image resized to its
    drawn size (Pillow's resize), cut where larger than the output (boxes shifted, clamped,
    the empty ones dropped with their labels and masks), padded with the mean, then mirrored;
    masks resized by torchvision's nearest resize, cut, padded with 0 and mirrored, as the
    reference's own steps do with those parameters. The draws: every scale within the range,
    one fraction for both offsets."""
    folder, ann = coco_v1
    # The reference passes one size to both: ScaleJitter takes it as (width, height) bounds,
    # FixedSizeCrop as (height, width).
    size, scale_range = (120, 100), (0.3, 2.0)
    preset = ref.DetectionPresetTrain(data_augmentation="lsj", lsj_size=size, scale_range=scale_range)
    _, ours = loaders(folder, ann, preset, seed=9)
    convert = ref.ConvertCocoPolysToMask()
    crop = ref.FixedSizeCrop(size=size, fill=MEAN)
    coco = ours.dataset.dataset.coco
    seen = {"cut": 0, "padded": 0, "flip": 0, "dropped": 0, "small": 0, "large": 0}
    levels = torch.zeros(256)
    for epoch in range(2):
        ours.set_epoch(epoch)
        for images, targets in ours:
            for image, target, index in zip(images, targets, ours.last_indices):
                image_id = target["image_id"]
                pil = Image.open(folder / coco.imgs[image_id]["file_name"]).convert("RGB")
                _, want = convert(pil, {"image_id": image_id, "annotations": coco.loadAnns(coco.getAnnIds(image_id))})
                d = json.loads(ours._core.sample_plan(epoch, index, pil.width, pil.height))["detect"]
                f = d["fixed"]
                nh, nw = f["before"]
                # The scale behind the drawn size lies in the range.
                base = min(size[1] / pil.height, size[0] / pil.width)
                implied = nw / (pil.width * base)
                assert scale_range[0] - 0.02 <= implied <= scale_range[1] + 0.02, (nw, pil.width)
                seen["small" if implied < 1 else "large"] += 1
                # The reference's ScaleJitter body at that size.
                resized = F.resize(pil, [nh, nw], interpolation=F.InterpolationMode.BILINEAR, antialias=True)
                want["boxes"][:, 0::2] *= nw / pil.width
                want["boxes"][:, 1::2] *= nh / pil.height
                want["masks"] = F.resize(want["masks"], [nh, nw], interpolation=F.InterpolationMode.NEAREST)
                count = len(want["boxes"])
                if f["cropped"]:
                    (top, left), (h, w) = f["at"], f["content"]
                    spare = (nh - h, nw - w)
                    # One torch.rand(1) for both offsets.
                    k = 0 if spare[0] >= spare[1] else 1
                    candidates = _fractions((top, left)[k], spare[k])
                    assert any(int(spare[0] * r) == top and int(spare[1] * r) == left for r in candidates)
                    resized, want = crop._crop(resized, want, top, left, h, w)
                    seen["cut"] += 1
                    seen["dropped"] += count - len(want["boxes"])
                h, w = f["content"]
                if (h, w) != size:
                    resized, want = crop._pad(resized, want, [0, 0, size[1] - w, size[0] - h])
                    seen["padded"] += 1
                want_image = F.pil_to_tensor(resized)
                if d["flip"]:
                    want_image, want = ref.RandomHorizontalFlip(p=1.0)(want_image, want)
                    seen["flip"] += 1
                want_image = F.to_dtype(want_image, torch.float32, scale=True)
                assert image.shape == want_image.shape == (3, *size)
                for key in ("boxes", "labels", "masks", "area", "iscrowd"):
                    assert got_equal(target[key], want[key]), (key, image_id)
                levels += torch.bincount(((image - want_image).abs() * 255).round().long().flatten(), minlength=256)[:256]
    assert all(v >= 2 for v in seen.values()), seen
    # Pillow's resize of the PIL image, cut and padded, byte for byte.
    assert levels[1:].sum() == 0, levels[:4]


def _fractions(at: int, spare: int):
    """f32 values `r` in `[0, 1)` with `int(spare * r) == at` (`spare` above 0), from below to
    above (a handful, enough to find one that gives the other side's offset too)."""
    lo, hi = at / spare, (at + 1) / spare
    return [torch.tensor(lo + (hi - lo) * k / 8, dtype=torch.float32) for k in range(8)]


def got_equal(got, want) -> bool:
    return got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)


def test_a_subclass_that_is_not_the_references_falls_back_naming_why(coco_v1):
    folder, ann = coco_v1

    class Renamed(ref.CocoDetection):
        def __getitem__(self, idx):
            img, anns = super(ref.CocoDetection, self).__getitem__(idx)
            return self._transforms(img, {"id": self.ids[idx], "annotations": anns})

    preset = ref.DetectionPresetTrain(data_augmentation="hflip")
    ds = Renamed(str(folder), str(ann), transforms=ref.Compose([ref.ConvertCocoPolysToMask(), preset]))
    with pytest.warns(ht.FallbackWarning, match="another target than"):
        loader = ht.DataLoader(ds, batch_size=2, collate_fn=reference_collate)
    assert not isinstance(loader, ht.DataLoader)

    class ConvertCocoPolysToMask(ref.ConvertCocoPolysToMask):
        """The reference's name, other boxes."""

        def __call__(self, image, target):
            image, out = super().__call__(image, target)
            out["boxes"] = out["boxes"] + 0.5
            return image, out

    ds = ref.CocoDetection(str(folder), str(ann), transforms=ref.Compose([ConvertCocoPolysToMask(), preset]))
    with pytest.warns(ht.FallbackWarning, match="does not give the reference's targets"):
        ht.DataLoader(ds, batch_size=2, collate_fn=reference_collate)
    ds = ref.CocoDetection(str(folder), str(ann), transforms=ref.Compose([ref.ConvertCocoPolysToMask(), ref.PILToTensor()]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ht.FallbackWarning)
        eval_loader = ht.DataLoader(ds, batch_size=2, collate_fn=reference_collate)
    images, targets = next(iter(eval_loader))
    assert images[0].dtype == torch.uint8 and targets[0]["masks"].dtype == torch.uint8  # as `any` of uint8 gives


def _cloned(batch):
    return [(image.clone(), {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in t.items()}) for image, t in batch]


def test_the_copy_paste_collate_gives_the_references_own_batches(coco_v1, monkeypatch):
    """The reference's `--use-copypaste` collate over `lsj`: hpuload puts its native copy-paste
    in place of the module's `_copy_paste` (after checking the two agree on probe images), and
    each collated batch equals what the reference's own function makes of the same samples
    from the same state of torch's generator: pixels, masks, boxes, labels, areas, iscrowd."""
    folder, ann = coco_v1
    original = ref._copy_paste
    monkeypatch.setattr(ref, "_copy_paste", original)  # put back after the test
    preset = ref.DetectionPresetTrain(data_augmentation="lsj", lsj_size=(120, 100), scale_range=(0.3, 2.0))
    seen = []

    def collate(batch):
        seen.append((_cloned(batch), torch.get_rng_state()))
        return ref.copypaste_collate_fn(batch)

    loader = ht.DataLoader(ref.get_coco(folder, ann, preset), batch_size=4, collate_fn=collate, backend="cpu", seed=3)
    got = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        got += [(list(images), list(targets)) for images, targets in loader]
    assert getattr(ref._copy_paste, "_hpuload", False) and ref._copy_paste.__wrapped__ is original
    pasted = 0
    for (images, targets), (samples, state) in zip(got, seen, strict=True):
        with monkeypatch.context() as m:
            m.setattr(ref, "_copy_paste", original)
            torch.set_rng_state(state)
            want_images, want_targets = ref.copypaste_collate_fn(samples)
        for image, target, want_image, want, (before_image, before) in zip(
            images, targets, want_images, want_targets, samples
        ):
            assert torch.equal(image, want_image), want["image_id"]
            _same_targets(target, want, want["image_id"])
            pasted += not torch.equal(image, before_image) and len(target["masks"]) != len(before["masks"])
    assert pasted >= 4


def test_the_native_copy_paste_hands_what_it_does_not_take_to_the_original():
    """Images of two sizes (the reference resizes the donor first), a float64 image: the
    reference's own function runs, with the same draws."""
    from hpuload import _copy_paste as cp

    fast = cp._fast(ref._copy_paste)
    (image, target), (donor, donor_target) = cp._probe(5, (40, 30), (3, 4))
    (small, small_target), _ = cp._probe(6, (20, 24), (2, 1))
    for args in ((image, target, small, small_target), (image.double(), target, donor.double(), donor_target)):
        results = []
        for fn in (ref._copy_paste, fast):
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(1)
                results.append((fn(*args, blending=True), torch.get_rng_state()))
        assert cp._same(results[0], results[1])


def test_a_copy_paste_that_differs_from_the_references_is_left_as_written(monkeypatch):
    """A fork whose `_copy_paste` does something else (here: blends when told not to, and the
    other way round) gives other results on the probes: hpuload leaves it in place."""
    import sys
    import types

    from hpuload import _copy_paste as cp

    fork = types.ModuleType("forked_transforms")

    def _copy_paste(image, target, paste_image, paste_target, blending=True, resize_interpolation=None):
        return ref._copy_paste(image, target, paste_image, paste_target, not blending)

    class SimpleCopyPaste(torch.nn.Module):
        def forward(self, images, targets):
            return fork._copy_paste(images[0], targets[0], images[-1], targets[-1])

    SimpleCopyPaste.__module__ = fork.__name__
    fork._copy_paste, fork.SimpleCopyPaste = _copy_paste, SimpleCopyPaste
    monkeypatch.setitem(sys.modules, fork.__name__, fork)

    # A collate_fn written in the fork's module, naming its class as the reference's does.
    exec("def collate(batch):\n    return SimpleCopyPaste()(*zip(*batch))\n", fork.__dict__)
    assert cp._candidates(fork.collate) == [fork]
    assert not cp.adopt(fork.collate)
    assert fork._copy_paste is _copy_paste


def test_the_references_grouped_batch_sampler_is_honoured_batch_for_batch(coco_v1):
    """The reference's default batch sampler groups images by aspect ratio (`GroupedBatchSampler`
    over a `RandomSampler`, topping up the last batches with repeats): natively, each epoch's
    batches are the ones it gives from the same state of torch's generator, and each sample is
    the image its index names."""
    folder, ann = coco_v1
    preset = ref.DetectionPresetTrain(data_augmentation="hflip", hflip_prob=0.0)
    dataset = ref.get_coco(folder, ann, preset)
    coco = dataset.dataset.coco
    ids = [dataset.dataset.ids[i] for i in dataset.indices]
    groups = [int(coco.imgs[i]["width"] >= coco.imgs[i]["height"]) for i in ids]
    batches = ref.GroupedBatchSampler(torch.utils.data.RandomSampler(dataset), groups, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ht.FallbackWarning)
        ours = ht.DataLoader(dataset, batch_sampler=batches, collate_fn=ref.collate_fn, backend="cpu")
    assert isinstance(ours, ht.DataLoader)
    for epoch in range(2):
        torch.manual_seed(epoch)
        want = [list(b) for b in batches]
        torch.manual_seed(epoch)
        got = []
        for images, targets in ours:
            got.append(list(ours.last_indices))
            assert [t["image_id"] for t in targets] == [ids[i] for i in ours.last_indices]
            assert len({groups[i] for i in ours.last_indices}) == 1
        assert got == want and len(got) == len(dataset) // 3


class MasksLeftUnflipped(ref.RandomHorizontalFlip):
    """A fork's flip that moves the boxes but leaves the masks as they were."""

    def forward(self, image, target=None):
        if torch.rand(1) < self.p:
            image = F.horizontal_flip(image)
            width = F.get_size(image)[1]
            target["boxes"][:, [0, 2]] = width - target["boxes"][:, [2, 0]]
        return image, target


class ScaleDrawnByPython(ref.ScaleJitter):
    """A fork's ScaleJitter drawing its scale from Python's generator."""

    def forward(self, image, target=None):
        height, width = F.get_size(image)
        scale = random.uniform(*self.scale_range)
        r = min(self.target_size[1] / height, self.target_size[0] / width) * scale
        new_height, new_width = int(height * r), int(width * r)
        image = F.resize(image, [new_height, new_width], antialias=True)
        target["boxes"][:, 0::2] *= new_width / width
        target["boxes"][:, 1::2] *= new_height / height
        target["masks"] = F.resize(target["masks"], [new_height, new_width], interpolation=F.InterpolationMode.NEAREST)
        return image, target


class CutAtTwoOffsets(ref.FixedSizeCrop):
    """A fork's FixedSizeCrop drawing the top and the left offsets apart (the reference draws
    one fraction for both)."""

    def forward(self, image, target=None):
        height, width = F.get_size(image)
        new_height, new_width = min(height, self.crop_height), min(width, self.crop_width)
        if new_height != height or new_width != width:
            r = torch.rand(2)
            top, left = int(max(height - self.crop_height, 0) * r[0]), int(max(width - self.crop_width, 0) * r[1])
            image, target = self._crop(image, target, top, left, new_height, new_width)
        bottom, right = max(self.crop_height - new_height, 0), max(self.crop_width - new_width, 0)
        if bottom or right:
            image, target = self._pad(image, target, [0, 0, right, bottom])
        return image, target


class ZoomOutOnBlack(ref.RandomZoomOut):
    """A fork's RandomZoomOut padding with black whatever its fill says."""

    def forward(self, image, target=None):
        fill, self.fill = self.fill, [0, 0, 0]
        try:
            return super().forward(image, target)
        finally:
            self.fill = fill


@pytest.mark.parametrize(
    "augmentation, fork",
    [
        ("hflip", MasksLeftUnflipped(0.5)),
        ("lsj", ScaleDrawnByPython(target_size=(96, 96), scale_range=(0.5, 1.5))),
        ("lsj", CutAtTwoOffsets(size=(96, 96), fill=MEAN)),
        ("ssd", ZoomOutOnBlack(fill=MEAN)),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else v,
)
def test_a_fork_of_a_reference_step_that_does_otherwise_falls_back_naming_it(coco_v1, augmentation, fork):
    folder, ann = coco_v1
    preset = ref.DetectionPresetTrain(data_augmentation=augmentation, lsj_size=(96, 96), scale_range=(0.5, 1.5))
    steps = preset.transforms.transforms
    at = next(k for k, step in enumerate(steps) if isinstance(fork, type(step)))
    name = type(steps[at]).__name__
    fork.__class__ = type(name, (type(fork),), {})  # the fork carries the reference's class name
    steps[at] = fork
    before = torch.get_rng_state()
    with pytest.warns(ht.FallbackWarning, match=f"{name} does not do what the detection reference's {name} does"):
        loader = ht.DataLoader(ref.get_coco(folder, ann, preset), batch_size=2, collate_fn=reference_collate)
    assert not isinstance(loader, ht.DataLoader)
    assert torch.equal(torch.get_rng_state(), before)  # the check's draws are put back


def test_a_preset_that_changes_the_target_after_its_steps_falls_back_naming_it(coco_v1):
    class DetectionPresetTrain(ref.DetectionPresetTrain):
        """A fork's preset: the boxes scaled to [0, 1] after the steps (as DETR-style code does)."""

        def __call__(self, image, target):
            image, target = self.transforms(image, target)
            target["boxes"] = target["boxes"] / torch.tensor([image.shape[-1], image.shape[-2]] * 2)
            return image, target

    folder, ann = coco_v1
    preset = DetectionPresetTrain(data_augmentation="hflip")
    with pytest.warns(ht.FallbackWarning, match="DetectionPresetTrain does not run its steps one after another"):
        loader = ht.DataLoader(ref.get_coco(folder, ann, preset), batch_size=2, collate_fn=reference_collate)
    assert not isinstance(loader, ht.DataLoader)


class FlipRewritten(ref.RandomHorizontalFlip):
    """A fork's flip written otherwise (its own arithmetic) that does what the reference's does."""

    def forward(self, image, target=None):
        if torch.rand(1).item() < self.p:
            image = F.horizontal_flip(image)
            width = image.width if isinstance(image, Image.Image) else image.shape[-1]
            x0, x1 = target["boxes"][:, 0].clone(), target["boxes"][:, 2].clone()
            target["boxes"][:, 0], target["boxes"][:, 2] = width - x1, width - x0
            target["masks"] = target["masks"].flip(-1)
        return image, target


def test_a_fork_written_otherwise_that_does_what_the_reference_does_runs_natively(coco_v1):
    folder, ann = coco_v1
    preset = ref.DetectionPresetTrain(data_augmentation="hflip", hflip_prob=1.0)
    steps = preset.transforms.transforms
    fork = FlipRewritten(1.0)
    fork.__class__ = type("RandomHorizontalFlip", (FlipRewritten,), {})
    steps[0] = fork
    theirs, ours = loaders(folder, ann, preset)
    for (want_images, want_targets), (images, targets) in zip(theirs, ours):
        for want_image, want, image, got in zip(want_images, want_targets, images, targets):
            assert torch.equal(image, want_image) and torch.equal(got["boxes"], want["boxes"])
            assert torch.equal(got["masks"], want["masks"])
