"""A sweep of transforms on torchvision's `CocoDetection`, their random parameters pinned
(degenerate ranges, p=0 or 1): torchvision v2 with the PIL and the tensor backend, the dataset
wrapped for v2 with several `target_keys`, or raw, each epoch through hpuload.torch.DataLoader
and through torch's DataLoader, compared sample by sample: the image's values, and every
target's keys, types, dtypes and values. Session 65's search for silent differences in
detection (BENCHMARKS.md).

usage: python detection_transform_sweep.py IMAGES [SUBSTRING]
  IMAGES  a folder of JPEG photos (the reference corpus); the first 12 are taken, with
          seeded boxes, polygons and a crowd annotation
  prints one line per case: ok/BAD, the largest difference in uint8 levels, the largest box
  difference, and whether hpuload ran it natively, in a Python tail or on torch's loader
"""
import json
import random
import sys
import tempfile
import warnings
from pathlib import Path

import torch
from PIL import Image
from torchvision import tv_tensors
from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
from torchvision.transforms import v2 as T
from torchvision.transforms import InterpolationMode as IM

from hpuload.torch import DataLoader, FallbackWarning, PythonTailWarning

IMAGES = Path(sys.argv[1])
only = sys.argv[2] if len(sys.argv) > 2 else None
BACKEND = "cpu"  # torchvision-exact; the media engine (auto) is within its PSNR floor instead
XYXY, CXCYWH, XYWH = (tv_tensors.BoundingBoxFormat[f] for f in ("XYXY", "CXCYWH", "XYWH"))


def write_coco(files, out):
    """1 to 6 boxes per image at seeded places (a polygon each), every fourth image with a
    crowd annotation too, categories 1, 3 and 7."""
    rng = random.Random(0)
    images, annotations = [], []
    for f in files:
        w, h = Image.open(f).size
        image_id = 3 * len(images) + 2
        images.append({"id": image_id, "file_name": str(f.relative_to(IMAGES)), "width": w, "height": h})
        for k in range(rng.randint(1, 6) + (len(images) % 4 == 0)):
            bw, bh = rng.uniform(0.03, 0.6) * w, rng.uniform(0.03, 0.6) * h
            x, y = rng.uniform(0, w - bw), rng.uniform(0, h - bh)
            annotations.append({
                "id": len(annotations) + 1, "image_id": image_id, "category_id": rng.choice([1, 3, 7]),
                "bbox": [round(x, 2), round(y, 2), round(bw, 2), round(bh, 2)], "area": bw * bh,
                "iscrowd": int(k == 6), "segmentation": [[x, y, x + bw, y, x + bw, y + bh, x, y + bh * 0.5]],
            })
    cats = [{"id": i, "name": str(i)} for i in (1, 3, 7)]
    out.write_text(json.dumps({"images": images, "annotations": annotations, "categories": cats}))
    return out


def tail(tensor_first, *, dtype=True, pure=True):
    return ([] if tensor_first else [T.ToImage()]) + ([T.ToDtype(torch.float32, scale=True)] if dtype else []) + (
        [T.ToPureTensor()] if pure else [])


def cases():
    """(name, transforms, wrap keys or None for raw, transform= instead of transforms=)."""
    for tf in (False, True):
        b = "t" if tf else "p"
        head = [T.ToImage()] if tf else []

        def c(name, steps, keys="default", **kw):
            return (f"{b}-{name}", T.Compose(head + steps + tail(tf, **kw)), keys)

        yield c("resize", [T.Resize((96, 128))])
        yield c("resize-uint8", [T.Resize((96, 128))], dtype=False)
        yield c("resize-tv", [T.Resize((96, 128))], pure=False)
        yield c("resize-nearest", [T.Resize((96, 128), IM.NEAREST)])
        yield c("resize-bicubic", [T.Resize((96, 128), IM.BICUBIC)])
        yield c("resize-noaa", [T.Resize((96, 128), antialias=False)])
        yield c("resize-int", [T.Resize(100)])
        yield c("resize-int-max", [T.Resize(100, max_size=120)])
        yield c("hflip-resize", [T.RandomHorizontalFlip(1.0), T.Resize((96, 128))])
        yield c("resize-hflip", [T.Resize((96, 128)), T.RandomHorizontalFlip(1.0)])
        yield c("resize-hflip0", [T.Resize((96, 128)), T.RandomHorizontalFlip(0.0)])
        yield c("vflip-resize", [T.RandomVerticalFlip(1.0), T.Resize((96, 128))])
        yield c("resize-vflip", [T.Resize((96, 128)), T.RandomVerticalFlip(1.0)])
        yield c("shortest", [T.RandomShortestSize(100, 150)])
        yield c("shortest-resize", [T.RandomShortestSize(100, 150), T.Resize((96, 128))])
        yield c("rresize", [T.RandomResize(90, 91), T.Resize((96, 128))])
        yield c("zoomout1", [T.RandomZoomOut(side_range=(1.0, 1.0), p=1.0), T.Resize((96, 128))])
        yield c("zoomout-p0", [T.RandomZoomOut(p=0.0), T.Resize((96, 128))])
        yield c("distort-p0", [T.RandomPhotometricDistort(p=0.0), T.Resize((96, 128))])
        # (RandomPhotometricDistort with p > 0 permutes the channels and orders its steps by
        # draws no range pins; the tests replay hpuload's draws instead.)
        yield c("jitter-b", [T.Resize((96, 128)), T.ColorJitter(brightness=(1.2, 1.2))])
        yield c("jitter-h", [T.Resize((96, 128)), T.ColorJitter(hue=(0.1, 0.1))])
        yield c("jitter-s", [T.ColorJitter(saturation=(1.4, 1.4)), T.Resize((96, 128))])
        yield c("gray", [T.Resize((96, 128)), T.RandomGrayscale(1.0)])
        yield c("blur", [T.Resize((96, 128)), T.GaussianBlur(5, sigma=(1.0, 1.0))])
        yield c("invert", [T.Resize((96, 128)), T.RandomInvert(1.0)])
        yield c("solarize", [T.Resize((96, 128)), T.RandomSolarize(100, 1.0)])
        yield c("posterize", [T.Resize((96, 128)), T.RandomPosterize(3, 1.0)])
        yield c("autocontrast", [T.Resize((96, 128)), T.RandomAutocontrast(1.0)])
        yield c("equalize", [T.Resize((96, 128)), T.RandomEqualize(1.0)])
        yield c("sharp", [T.Resize((96, 128)), T.RandomAdjustSharpness(2.0, 1.0)])
        yield c("rotate", [T.Resize((96, 128)), T.RandomRotation((15, 15))])
        yield c("affine", [T.Resize((96, 128)), T.RandomAffine(0, translate=None, scale=(1.2, 1.2))])
        yield c("perspective-p0", [T.Resize((96, 128)), T.RandomPerspective(p=0.0)])
        yield c("pad", [T.Resize((96, 128)), T.Pad(8)])
        yield c("pad-before", [T.Pad((4, 8, 12, 2)), T.Resize((96, 128))])
        yield c("centercrop", [T.Resize((96, 128)), T.CenterCrop(80)])
        yield c("crop-before", [T.CenterCrop(200), T.Resize((96, 128))])
        yield c("rcrop", [T.Resize((96, 128)), T.RandomCrop((96, 128))])
        yield c("rrc", [T.RandomResizedCrop((96, 128), scale=(1.0, 1.0), ratio=(4 / 3, 4 / 3))])
        yield c("fmt-cxcywh", [T.Resize((96, 128)), T.ConvertBoundingBoxFormat(CXCYWH)])
        yield c("fmt-xywh", [T.Resize((96, 128)), T.ConvertBoundingBoxFormat(XYWH)])
        yield c("fmt-xyxy", [T.Resize((96, 128)), T.ConvertBoundingBoxFormat(XYXY)])
        yield c("clamp", [T.Resize((96, 128)), T.ClampBoundingBoxes()])
        yield c("sanitize", [T.Resize((96, 128)), T.SanitizeBoundingBoxes()])
        yield c("sanitize20", [T.Resize((96, 128)), T.SanitizeBoundingBoxes(min_size=20)])
        yield c("sanitize-area", [T.Resize((96, 128)), T.SanitizeBoundingBoxes(min_area=400)])
        yield c("sanitize-before", [T.SanitizeBoundingBoxes(min_size=30), T.Resize((96, 128))])
        yield c("normalize", [T.Resize((96, 128)), T.ToDtype(torch.float32, scale=True),
                              T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])], dtype=False)
        yield c("keys-all", [T.Resize((96, 128))], keys="all")
        yield c("keys-boxes", [T.Resize((96, 128))], keys=["boxes"])
        yield c("keys-labels", [T.Resize((96, 128))], keys=["labels", "boxes"])
        yield c("keys-masks", [T.Resize((96, 128))], keys=["boxes", "labels", "masks"])
        yield c("keys-id", [T.Resize((96, 128))], keys=["image_id", "boxes", "labels", "area", "iscrowd"])
        yield c("lambda", [T.Resize((96, 128)), T.Lambda(lambda x: x, tv_tensors.Image)])
    # transform= on a wrapped dataset: the image alone moves, the boxes stay as annotated
    yield ("p-imageonly-resize", T.Compose([T.Resize((96, 128))] + tail(False)), "image-only")
    yield ("p-imageonly-flip", T.Compose([T.RandomHorizontalFlip(1.0), T.Resize((96, 128))] + tail(False)), "image-only")
    yield ("p-raw-resize", T.Compose([T.Resize((96, 128))] + tail(False)), None)


def dataset(ann, transforms, keys):
    if keys is None:  # raw: an image-only transform, the annotation lists as targets
        return CocoDetection(str(IMAGES), str(ann), transform=transforms)
    if keys == "image-only":
        return wrap_dataset_for_transforms_v2(CocoDetection(str(IMAGES), str(ann), transform=transforms))
    base = CocoDetection(str(IMAGES), str(ann), transforms=transforms)
    return wrap_dataset_for_transforms_v2(base) if keys == "default" else wrap_dataset_for_transforms_v2(base, target_keys=keys)


def collate(batch):
    return tuple(zip(*batch))


def levels(x, y):
    """The largest difference of two image tensors in uint8 levels, or a reason they differ."""
    if type(x) is not type(y) or x.shape != y.shape or x.dtype != y.dtype:
        return f"image {type(x).__name__} {tuple(x.shape)} {x.dtype} vs {type(y).__name__} {tuple(y.shape)} {y.dtype}"
    a, b = x.double(), y.double()
    if x.is_floating_point():
        scale = 255.0 * (0.225 if min(a.min(), b.min()) < -0.01 else 1.0)
        a, b = a * scale, b * scale
    return float((a - b).abs().max()) if a.numel() else 0.0


def same_target(got, want, path="target"):
    """None where two targets are the same (boxes within 1e-4 relative), else where they differ."""
    if type(got) is not type(want):
        return f"{path}: {type(got).__name__} vs {type(want).__name__}"
    if isinstance(want, dict):
        if list(got) != list(want):
            return f"{path}: keys {list(got)} vs {list(want)}"
        for k in want:
            if (d := same_target(got[k], want[k], f"{path}[{k!r}]")) is not None:
                return d
        return None
    if isinstance(want, (list, tuple)):
        if len(got) != len(want):
            return f"{path}: {len(got)} items vs {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            if (d := same_target(g, w, f"{path}[{i}]")) is not None:
                return d
        return None
    if isinstance(want, torch.Tensor):
        if got.shape != want.shape or got.dtype != want.dtype:
            return f"{path}: {tuple(got.shape)} {got.dtype} vs {tuple(want.shape)} {want.dtype}"
        if isinstance(want, tv_tensors.BoundingBoxes) and (got.format != want.format or tuple(got.canvas_size) != tuple(want.canvas_size)):
            return f"{path}: {got.format} {got.canvas_size} vs {want.format} {want.canvas_size}"
        if want.is_floating_point():
            ok = torch.allclose(got.double(), want.double(), rtol=1e-4, atol=1e-3)
        else:
            ok = torch.equal(got.as_subclass(torch.Tensor), want.as_subclass(torch.Tensor))
        return None if ok else f"{path}: values differ, e.g. {got.flatten()[:4].tolist()} vs {want.flatten()[:4].tolist()}"
    return None if got == want else f"{path}: {got!r} vs {want!r}"


def how_it_ran(caught, fell="fallback: "):
    """"native", "tail" (a Python tail ran), or `fell` and the FallbackWarning's first line,
    from the warnings the loader gave."""
    how = "native"
    for w in caught:
        if issubclass(w.category, FallbackWarning):
            how = fell + str(w.message).split("\n")[0][:110]
        elif issubclass(w.category, PythonTailWarning) and how == "native":
            how = "tail"
    return how


def main():
    files = sorted(IMAGES.rglob("*.jpg"))[:12]
    tmp = Path(tempfile.mkdtemp())
    ann = write_coco(files, tmp / "instances.json")
    bad = 0
    for name, transforms, keys in cases():
        if only and only not in name:
            continue
        data = dataset(ann, transforms, keys)
        try:
            torch.manual_seed(0)
            want = [s for b in torch.utils.data.DataLoader(data, batch_size=4, collate_fn=collate) for s in zip(*b)]
        except Exception as e:  # torch itself cannot load it: nothing to compare
            print(f"skip  {name}: torch: {type(e).__name__}: {str(e)[:100]}")
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                torch.manual_seed(0)
                got = [s for b in DataLoader(data, batch_size=4, collate_fn=collate, num_workers=2, backend=BACKEND) for s in zip(*b)]
            except Exception as e:
                print(f"BAD   {name}: hpuload raised {type(e).__name__}: {str(e)[:200]}")
                bad += 1
                continue
        how = how_it_ran(caught, fell="torch: ")
        worst, diff = 0.0, None
        if len(got) != len(want):
            diff = f"{len(got)} samples vs {len(want)}"
        for (gi, gt), (wi, wt) in zip(got, want):
            lv = levels(gi, wi)
            if isinstance(lv, str):
                diff = diff or lv
            else:
                worst = max(worst, lv)
            diff = diff or same_target(gt, wt)
        ok = diff is None and worst <= 1.0 + 1e-3
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'}   {name}: max {worst:.2f} {diff or ''} [{how}]", flush=True)
    print(f"{bad} BAD")


if __name__ == "__main__":
    main()
