"""Random compositions of torchvision v2's detection transforms on `CocoDetection`, each random
draw pinned, run through hpuload.torch.DataLoader and through torch's DataLoader, compared
sample by sample: the image's values and every target's keys, types, dtypes and values. The
random counterpart of `detection_transform_sweep.py`'s hand-written cases (session 88).

usage: python detection_fuzz.py IMAGES [CASES=200] [SEED=0]
  IMAGES  a folder of JPEG photos (the reference corpus); the first 12 are taken, with the
          sweep's seeded boxes, polygons and crowd annotations
A composition: the PIL image or a tensor (ToImage) at a random place, one to four steps drawn
from geometry (resizes, crops, pads, flips, zoom-out, rotations and affines pinned), box steps
(format conversion, clamping, sanitizing) and pixel steps, then the sweep's tail (a float
dtype or not, pure tensors or not), the dataset wrapped with random target keys; every other
case with two images that have no annotations, every third with boxes written as integers,
every fifth with boxes reaching past the images' edges. Prints one
line per case that is not "same", "fallback" or "torch raises", and a tally:
  same      hpuload's samples equal torch's (1 level for the image; boxes 1e-4 relative)
  fallback  hpuload warned and ran torch's loader (equal too, or it is fallback-BAD)
  SILENT    different without a FallbackWarning: a bug
  ERROR     hpuload raised where torch did not
env ONLY=N: run case N alone and print how it ran; FALLBACKS=1: print the fallbacks' cases too;
BACKEND=auto: the media engine's path, a case then SILENT where the image's mean difference
passes 4 levels (the engine is within PSNR floors, not bytes; targets are compared as ever).
"""
import json
import os
import tempfile
import warnings
from pathlib import Path

import torch
from torchvision.transforms import InterpolationMode as IM
from torchvision.transforms import v2 as T

import detection_transform_sweep as sweep
from hpuload.torch import DataLoader
from transform_fuzz import arguments, count

XYXY, CXCYWH, XYWH = sweep.XYXY, sweep.CXCYWH, sweep.XYWH
BACKEND = os.environ.get("BACKEND", "cpu")
KEYS = ["default", "all", ["boxes"], ["boxes", "labels"], ["boxes", "labels", "masks"],
        ["image_id", "boxes", "labels", "area", "iscrowd"], ["labels", "boxes", "masks"]]


def size(rng):
    s = rng.choice([64, 97, 128, 160, 224])
    return rng.choice([s, (s, rng.choice([80, 120, 200])), [s]])


def geometry(rng):
    interp = rng.choice([IM.BILINEAR, IM.BILINEAR, IM.NEAREST, IM.BICUBIC])
    options = [
        lambda: (f"Resize({(s := size(rng))!r}, {interp})", T.Resize(s, interp)),
        lambda: (f"Resize({(s := rng.choice([100, 150]))}, max_size={s + 40})", T.Resize(s, max_size=s + 40)),
        lambda: ("RandomShortestSize(120, 160)", T.RandomShortestSize(120, 160)),
        lambda: ("RandomShortestSize([100], 150)", T.RandomShortestSize([100], max_size=150)),
        lambda: (f"CenterCrop({(s := size(rng))!r})", T.CenterCrop(s)),
        lambda: ("hflip", T.RandomHorizontalFlip(1.0)),
        lambda: ("vflip", T.RandomVerticalFlip(1.0)),
        lambda: ("noflip", T.RandomHorizontalFlip(0.0)),
        lambda: (f"Pad({(p := rng.choice([4, (3, 7), (2, 5, 9, 1)]))!r})", T.Pad(p)),
        lambda: (f"Pad(reflect {(p := rng.choice([4, 11]))})", T.Pad(p, padding_mode="reflect")),
        lambda: ("ZoomOut(1, fill 0)", T.RandomZoomOut(side_range=(1.0, 1.0), p=1.0)),
        lambda: ("ZoomOut(p=0)", T.RandomZoomOut(p=0.0)),
        lambda: (f"Rotation({(d := rng.choice([10, 90, -30]))}, expand={(e := rng.random() < 0.5)})",
                 T.RandomRotation((d, d), expand=e)),
        lambda: ("Affine(scale 1.2, shear 5)", T.RandomAffine(0, scale=(1.2, 1.2), shear=(5, 5, 0, 0))),
        lambda: ("Affine(translate 0)", T.RandomAffine(0, translate=(0, 0))),
        lambda: ("RRC(160, scale 1, ratio 4/3)", T.RandomResizedCrop(160, scale=(1.0, 1.0), ratio=(4 / 3, 4 / 3))),
        lambda: ("Perspective(p=0)", T.RandomPerspective(p=0.0)),
        lambda: ("ScaleJitter((128, 128), (1, 1))", T.ScaleJitter((128, 128), scale_range=(1.0, 1.0))),
        lambda: ("RandomResize(100, 101)", T.RandomResize(100, 101)),
    ]
    return rng.choice(options)()


def boxes(rng):
    options = [
        lambda: ("ClampBoundingBoxes", T.ClampBoundingBoxes()),
        lambda: ("Sanitize", T.SanitizeBoundingBoxes()),
        lambda: (f"Sanitize(min_size={(m := rng.choice([5, 25]))})", T.SanitizeBoundingBoxes(min_size=m)),
        lambda: ("Sanitize(min_area=300)", T.SanitizeBoundingBoxes(min_area=300)),
        lambda: (f"Format({(f := rng.choice([CXCYWH, XYWH, XYXY])).name})", T.ConvertBoundingBoxFormat(f)),
    ]
    return rng.choice(options)()


def pixel(rng, tensor):
    options = [
        lambda: ("bright", T.ColorJitter(brightness=(1.3, 1.3))),
        lambda: ("hue", T.ColorJitter(hue=(0.05, 0.05))),
        lambda: ("gray", T.RandomGrayscale(1.0)),
        lambda: ("invert", T.RandomInvert(1.0)),
        lambda: ("autocontrast", T.RandomAutocontrast(1.0)),
        lambda: ("posterize", T.RandomPosterize(4, 1.0)),
        lambda: ("distort-p0", T.RandomPhotometricDistort(p=0.0)),
        lambda: ("apply0", T.RandomApply([T.ColorJitter(0.4, 0.4, 0.4)], p=0.0)),
        lambda: ("choice-flip", T.RandomChoice([T.RandomHorizontalFlip(1.0)])),
    ]
    if tensor:
        options.append(lambda: ("ToDtype(f32)", T.ToDtype(torch.float32, scale=True)))
    return rng.choice(options)()


def composition(rng):
    names, steps = [], []
    tensor = rng.random() < 0.5
    if tensor:
        names.append("ToImage")
        steps.append(T.ToImage())
    floats = False
    for _ in range(rng.choice([1, 2, 2, 3, 4])):
        r = rng.random()
        if r < 0.55:
            name, step = geometry(rng)
        elif r < 0.75:
            name, step = boxes(rng)
        else:
            name, step = pixel(rng, tensor and not floats)
            floats = floats or name == "ToDtype(f32)"
        names.append(name)
        steps.append(step)
    # The sweep's tail converts PIL to a tensor; a float tensor takes no second ToDtype.
    dtype = not floats and rng.random() < 0.6
    pure = rng.random() < 0.7
    steps += sweep.tail(tensor, dtype=dtype, pure=pure)
    names.append(f"tail(dtype={dtype}, pure={pure})")
    keys = rng.choice(KEYS)
    return ", ".join(names) + f"  keys={keys}", T.Compose(steps), keys


def run(data, show=False):
    try:
        torch.manual_seed(0)
        want = [s for b in torch.utils.data.DataLoader(data, batch_size=4, collate_fn=sweep.collate) for s in zip(*b)]
    except Exception as e:
        return "torch raises", f"{type(e).__name__}: {str(e)[:100]}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            torch.manual_seed(0)
            loader = DataLoader(data, batch_size=4, collate_fn=sweep.collate, num_workers=2, backend=BACKEND)
            got = [s for b in loader for s in zip(*b)]
        except Exception as e:
            return "ERROR", f"{type(e).__name__}: {str(e)[:200]}"
    how = sweep.how_it_ran(caught)
    if show:
        print(how)
    worst, diff = 0.0, None
    if len(got) != len(want):
        diff = f"{len(got)} samples vs {len(want)}"
    for (gi, gt), (wi, wt) in zip(got, want):
        lv = sweep.levels(gi, wi) if BACKEND == "cpu" else mean_levels(gi, wi)
        if isinstance(lv, str):
            diff = diff or lv
        else:
            worst = max(worst, lv)
        diff = diff or sweep.same_target(gt, wt)
    fell = how.startswith("fallback")
    if diff is None and worst <= (1.0 if BACKEND == "cpu" else 4.0) + 1e-3:
        return ("fallback" if fell else "same"), f"max {worst:.2f} [{how}]"
    return ("fallback-BAD" if fell else "SILENT"), f"max {worst:.2f} {diff or ''} [{how}]"


def mean_levels(x, y):
    """The mean difference of two image tensors in uint8 levels, or why they differ."""
    if type(x) is not type(y) or x.shape != y.shape or x.dtype != y.dtype:
        return sweep.levels(x, y)
    scale = 255.0 if x.is_floating_point() else 1.0
    return float((x.double() - y.double()).abs().mean() * scale) if x.numel() else 0.0


def main():
    cases, rng = arguments(200)
    files = sorted(sweep.IMAGES.rglob("*.jpg"))[:12]
    ann = sweep.write_coco(files, Path(tempfile.mkdtemp()) / "instances.json")
    # Every other case: two images without annotations, as a validation set has them (the
    # wrapper gives those `{"image_id"}` alone; steps that need boxes raise).
    bare = json.loads(ann.read_text())
    gone = {bare["images"][3]["id"], bare["images"][8]["id"]}
    bare["annotations"] = [a for a in bare["annotations"] if a["image_id"] not in gone]
    bare_ann = ann.with_name("bare.json")
    bare_ann.write_text(json.dumps(bare))
    # Every third case: boxes written as integers, which the wrapper holds as int64.
    whole = json.loads(ann.read_text())
    for a in whole["annotations"]:
        a["bbox"] = [int(round(v)) for v in a["bbox"]]
    int_ann = ann.with_name("integers.json")
    int_ann.write_text(json.dumps(whole))
    # Every fifth case: boxes reaching past the images' edges (annotations do).
    past = json.loads(ann.read_text())
    sizes = {im["id"]: (im["width"], im["height"]) for im in past["images"]}
    for k, a in enumerate(past["annotations"]):
        w, h = sizes[a["image_id"]]
        x, y, bw, bh = a["bbox"]
        a["bbox"] = [x - 40, y, bw + 20, bh] if k % 2 else [x, y, w - x + 25.5, h - y + 13]
    past_ann = ann.with_name("past.json")
    past_ann.write_text(json.dumps(past))
    tally = {}
    only = os.environ.get("ONLY")
    for i in range(cases):
        name, transforms, keys = composition(rng)
        if only is not None and i != int(only):
            continue
        try:
            chosen = past_ann if i % 5 == 4 else int_ann if i % 3 == 2 else bare_ann if i % 2 else ann
            outcome, detail = run(sweep.dataset(chosen, transforms, keys), show=only is not None)
        except Exception as e:
            outcome, detail = "HARNESS", f"{type(e).__name__}: {e}"
        quiet = ("same", "torch raises") + (() if os.environ.get("FALLBACKS") else ("fallback",))
        count(tally, i, outcome, detail, name, show=only is not None, quiet=quiet)
    print(tally)


if __name__ == "__main__":
    main()
