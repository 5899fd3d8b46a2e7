"""Random `set_transform` / `with_transform` functions over a Hugging Face imagefolder table
(the shapes of transformers' `run_image_classification.py` and of the notebooks that copy it),
each closing over a random torchvision composition of transform_fuzz.py's grammar (every draw
pinned), run through hpuload.torch.DataLoader (CPU path) and through torch's DataLoader with
the same collate_fn, compared value by value: the search of transform_fuzz.py (session 81)
for the Hugging Face path (session 82).

usage: python hf_fuzz.py FOLDER [CASES=200] [SEED=0]
  FOLDER  transform_sweep_images.py's set (class folders of PNGs), as for transform_fuzz.py
  CAPTIONS=1 (environment): the table saved with a caption column instead of its labels (a
  text-to-image table, session 96), the functions diffusers-shaped ones that tokenize the
  captions beside the transform, some reading the images otherwise or drawing from torch.
  PATHS=1 (environment): the table saved with each image's path (a string column) and its
  label, the functions `run_clip.py`-shaped ones that read each path themselves (torchvision's
  `read_image` or `decode_image` in RGB or in the file's own mode, Pillow's `Image.open` with
  or without `.convert("RGB")`, in a `with` block), some reading paths they made or reading
  another way (session 97).
  BYTES=1 (environment): the table saved with each image's encoded bytes (a binary `jpg`
  column, as img2dataset's Parquet has it) and its label, the functions opening them with
  Pillow through `io.BytesIO`, some reading the stream themselves (session 97).
  PAIRS=1 (environment): the table saved with a second Image column (`conditioning_image`, the
  images in reverse order) and a caption, as diffusers' ControlNet table has them, the
  functions ControlNet-shaped ones putting each column through a transform (a second random
  composition, or the same one), some using one column only, handing one column to two
  transforms, or one image to one transform twice (session 98).
  MASKS=1 (environment): the table saved with a second Image column of masks (`label`, a grey
  PNG of classes made from each image), as transformers' `run_semantic_segmentation.py` reads
  it, the functions handing a random albumentations `Compose` each image with its mask
  (`mask_composition`: `Lambda`s on the mask, a centred padding to a crop larger than every
  image so the crop draws nothing, pinned flips and pixel steps, and steps that would move
  the mask otherwise), some converting the mask, leaving it out, or handing the image
  unconverted (session 99). With PROCESSOR=1 too, the functions are the segmentation
  guide's shape instead (`processor_case`: Segformer's image processor given the images and
  maps, session 100). LABELLED=1 adds a class label column beside them (`scene_parse_150`'s
  `scene_category`).
  STEPS=1 (environment): the caption table, the functions SDXL-shaped ones that cut each image
  themselves (`steps_case`: a `Resize` in any of four filters, a `CenterCrop` or
  `RandomCrop.get_params` and `crop` or a `RandomCrop` of a square resize, so that nothing
  is drawn, or no crop, a flip before or after the crop gated by `random.random() < 1.0` or `> 1.0`,
  noting sizes and corners; the flip the object or torchvision's functional `hflip`), some
  with a step hpuload does not follow (Pillow's own crop, a `ColorJitter` on the way, a
  padded crop, a second `random()`) or reading the cut's mode (session 101).
  PAIRS=1 JOINT=1 (environment): the pairs table, the functions InstructPix2Pix-shaped ones
  (`joint_case`: each image resized by Pillow itself in a random filter, arrays of one or both
  columns stacked or concatenated, made a tensor by `2 * (x / 255) - 1`, `x / 255`, as uint8,
  `x / 127.5 - 1` or in float64, then one `Compose` of a crop and pinned flips on the stack,
  called by a helper or by the function itself),
  some with a step hpuload does not follow (a `ColorJitter`, a `Lambda` that scales, the
  transform called per image, the image's size read, its pixels changed) (session 102).
Outcomes as transform_fuzz.py's; every value of each batch is compared (images within a level,
labels exactly).
"""
import os
import random
import sys
import tempfile

import torch
from torch.utils.data import DataLoader as TorchLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dataset_fuzz  # noqa: E402
import transform_fuzz  # noqa: E402

from hpuload.torch import DataLoader  # noqa: E402

ROOT = sys.argv[1] if __name__ == "__main__" else None


def function(rng, tf):
    """(name, fn): a random function over a batch of examples, closing over `tf`."""
    kind = rng.choice(["example", "example", "del", "no_convert", "new_dict", "loop", "relabel", "key"])

    def example(batch):
        batch["pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        return batch

    def delete(batch):
        batch["pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        del batch["image"]
        return batch

    def no_convert(batch):
        batch["pixel_values"] = [tf(im) for im in batch["image"]]
        return batch

    def new_dict(batch):
        return {"pixel_values": [tf(im.convert("RGB")) for im in batch["image"]], "labels": batch["label"]}

    def loop(batch):
        out = []
        for im in batch["image"]:
            im = im.convert("RGB")
            out.append(tf(im))
        batch["pixel_values"] = out
        return batch

    def relabel(batch):
        batch["pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        batch["label"] = [t + 1 for t in batch["label"]]
        return batch

    def key(batch):
        batch["image"] = [tf(im.convert("RGB")) for im in batch["image"]]
        return batch

    fns = {"example": example, "del": delete, "no_convert": no_convert, "new_dict": new_dict, "loop": loop, "relabel": relabel, "key": key}
    return kind, fns[kind]


def tokens(captions):
    """Character ids of each caption, 12 a caption (a stand-in tokenizer)."""
    return torch.tensor([[ord(c) % 97 for c in t[:12]] + [0] * (12 - len(t[:12])) for t in captions])


def caption_function(rng, tf):
    """(name, fn): a random diffusers-shaped function over a batch of images and captions."""
    kind = rng.choice(["example", "example", "new_dict", "twice", "no_convert", "size", "torch_draw", "first_of"])

    def example(batch):
        batch["pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        batch["input_ids"] = tokens(batch["text"])
        return batch

    def new_dict(batch):
        return {"input_ids": tokens(batch["text"]), "pixel_values": [tf(im.convert("RGB")) for im in batch["image"]]}

    def twice(batch):
        images = [im.convert("RGB") for im in batch["image"]]
        batch["pixel_values"] = [tf(im) for im in images]
        batch["again"] = [tf(im) for im in images]
        batch["input_ids"] = tokens(batch["text"])
        return batch

    def no_convert(batch):
        batch["pixel_values"] = [tf(im) for im in batch["image"]]
        batch["input_ids"] = tokens(batch["text"])
        return batch

    def size(batch):
        batch["sizes"] = [im.size for im in batch["image"]]
        batch["pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        return batch

    def torch_draw(batch):
        batch["pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        batch["noise"] = [torch.rand(()) for _ in batch["text"]]
        return batch

    def first_of(batch):
        batch["pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        batch["input_ids"] = tokens([t.split(",")[0] for t in batch["text"]])
        return batch

    fns = {"example": example, "new_dict": new_dict, "twice": twice, "no_convert": no_convert, "size": size,
           "torch_draw": torch_draw, "first_of": first_of}
    return kind, fns[kind]


def path_function(rng, tf):
    """(name, fn): a random function over a batch of image paths and labels that reads the files."""
    import cv2
    from PIL import Image
    from torchvision.io import ImageReadMode, decode_image, read_image

    kind = rng.choice(["read_rgb", "read_rgb", "read_own", "decode_rgb", "pil_rgb", "pil_rgb", "pil_own", "pil_with",
                       "made_path", "cv2", "new_dict"])

    def read_rgb(batch):
        batch["pixel_values"] = [tf(read_image(p, mode=ImageReadMode.RGB)) for p in batch["path"]]
        return batch

    def read_own(batch):
        batch["pixel_values"] = [tf(read_image(p)) for p in batch["path"]]
        return batch

    def decode_rgb(batch):
        batch["pixel_values"] = [tf(decode_image(p, ImageReadMode.RGB)) for p in batch["path"]]
        return batch

    def pil_rgb(batch):
        batch["pixel_values"] = [tf(Image.open(p).convert("RGB")) for p in batch["path"]]
        return batch

    def pil_own(batch):
        batch["pixel_values"] = [tf(Image.open(p)) for p in batch["path"]]
        return batch

    def pil_with(batch):
        out = []
        for p in batch["path"]:
            with Image.open(p) as im:
                out.append(tf(im.convert("RGB")))
        batch["pixel_values"] = out
        return batch

    def made_path(batch):
        batch["pixel_values"] = [tf(Image.open(os.path.normpath(p)).convert("RGB")) for p in batch["path"]]
        return batch

    def cv2_read(batch):
        batch["pixel_values"] = [tf(cv2.cvtColor(cv2.imread(p), cv2.COLOR_BGR2RGB)) for p in batch["path"]]
        return batch

    def new_dict(batch):
        return {"labels": batch["label"], "pixel_values": [tf(read_image(p, mode=ImageReadMode.RGB)) for p in batch["path"]]}

    fns = {"read_rgb": read_rgb, "read_own": read_own, "decode_rgb": decode_rgb, "pil_rgb": pil_rgb, "pil_own": pil_own,
           "pil_with": pil_with, "made_path": made_path, "cv2": cv2_read, "new_dict": new_dict}
    return kind, fns[kind]


def bytes_function(rng, tf):
    """(name, fn): a random function over a batch of encoded images and labels that opens them."""
    import io

    from PIL import Image

    kind = rng.choice(["rgb", "rgb", "own", "with", "read_twice", "new_dict"])

    def rgb(batch):
        batch["pixel_values"] = [tf(Image.open(io.BytesIO(b)).convert("RGB")) for b in batch["jpg"]]
        return batch

    def own(batch):
        batch["pixel_values"] = [tf(Image.open(io.BytesIO(b))) for b in batch["jpg"]]
        return batch

    def with_block(batch):
        out = []
        for b in batch["jpg"]:
            with Image.open(io.BytesIO(b)) as im:
                out.append(tf(im.convert("RGB")))
        batch["pixel_values"] = out
        return batch

    def read_twice(batch):
        batch["pixel_values"] = [tf(Image.open(io.BytesIO(io.BytesIO(b).read())).convert("RGB")) for b in batch["jpg"]]
        return batch

    def new_dict(batch):
        return {"labels": batch["label"], "pixel_values": [tf(Image.open(io.BytesIO(b)).convert("RGB")) for b in batch["jpg"]]}

    fns = {"rgb": rgb, "own": own, "with": with_block, "read_twice": read_twice, "new_dict": new_dict}
    return kind, fns[kind]


def pair_function(rng, tf, tf2):
    """(name, fn): a random ControlNet-shaped function over a table of two image columns."""
    kind = rng.choice(["two", "two", "one_both", "only_cond", "zipped", "new_dict", "twice", "same_twice"])

    def two(batch):
        batch["pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        batch["conditioning_pixel_values"] = [tf2(im.convert("RGB")) for im in batch["conditioning_image"]]
        batch["input_ids"] = tokens(batch["text"])
        return batch

    def one_both(batch):
        batch["pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        batch["conditioning_pixel_values"] = [tf(im.convert("RGB")) for im in batch["conditioning_image"]]
        batch["input_ids"] = tokens(batch["text"])
        return batch

    def only_cond(batch):
        return {"conditioning_pixel_values": [tf2(im.convert("RGB")) for im in batch["conditioning_image"]],
                "input_ids": tokens(batch["text"])}

    def zipped(batch):
        pixels, conds = [], []
        for im, cond in zip(batch["image"], batch["conditioning_image"]):
            pixels.append(tf(im.convert("RGB")))
            conds.append(tf2(cond.convert("RGB")))
        batch["pixel_values"], batch["conditioning_pixel_values"] = pixels, conds
        batch["input_ids"] = tokens(batch["text"])
        return batch

    def new_dict(batch):
        return {"pixel_values": [tf(im.convert("RGB")) for im in batch["image"]],
                "conditioning_pixel_values": [tf2(im.convert("RGB")) for im in batch["conditioning_image"]]}

    def twice(batch):  # one column through two transforms: torch's loader, named
        batch["pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        batch["conditioning_pixel_values"] = [tf2(im.convert("RGB")) for im in batch["image"]]
        return batch

    def same_twice(batch):  # one image through one transform twice: natively only where it draws nothing
        batch["pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        batch["conditioning_pixel_values"] = [tf(im.convert("RGB")) for im in batch["image"]]
        return batch

    fns = {"two": two, "one_both": one_both, "only_cond": only_cond, "zipped": zipped, "new_dict": new_dict, "twice": twice,
           "same_twice": same_twice}
    return kind, fns[kind]


def reduce_labels(labels, **kwargs):
    labels[labels == 0] = 255
    labels = labels - 1
    labels[labels == 254] = 255
    return labels


def mask_composition(rng):
    """(name, Compose): a random albumentations `Compose` for an image and its mask whose
    draws are all pinned (a crop as large as the padded image, a resize or a letterbox, flips
    and steps of p 0 or 1, zero-width ranges)."""
    import albumentations as A
    import numpy as np
    from albumentations.pytorch import ToTensorV2

    names, steps = [], []
    lam = rng.choice(["none", "reduce", "shift", "roll", "image", "twice"])
    if lam == "reduce":
        steps.append(A.Lambda(name="reduce_labels", mask=reduce_labels))
    elif lam == "shift":
        steps.append(A.Lambda(mask=lambda m, **kw: (m * 3 + 1).astype(np.uint8)))
    elif lam == "roll":  # moves values: torch's loader, named
        steps.append(A.Lambda(mask=lambda m, **kw: np.roll(m, 1, axis=1)))
    elif lam == "image":  # on the image: torch's loader, named
        steps.append(A.Lambda(image=lambda im, **kw: 255 - im))
    elif lam == "twice":
        steps += [A.Lambda(mask=reduce_labels), A.Lambda(mask=lambda m, **kw: m // 2)]
    names.append(f"lambda={lam}")
    size = rng.choice([656, 704])  # past every image of the set: the crop draws nothing
    fill, fill_mask = rng.choice([0, 7, 255]), rng.choice([0, 255, 3])
    geometry = rng.random()
    if geometry < 0.3:  # the evaluation transform's resize of both
        h, w = rng.choice([96, 333, 512, 700]), rng.choice([128, 517, 512])
        interpolation, mask_interpolation = rng.choice([0, 1, 1, 3]), rng.choice([0, 0, 0, 1])
        steps.append(A.Resize(h, w, interpolation=interpolation, mask_interpolation=mask_interpolation))
        names.append(f"resize({h}, {w}, {interpolation}, mask {mask_interpolation})")
    elif geometry < 0.4:  # a crop of the resize as large as it: nothing drawn
        side = rng.choice([96, 333])
        mask_interpolation = rng.choice([0, 0, 0, 1])
        resize = rng.choice([A.Resize(side, side, mask_interpolation=mask_interpolation),
                             A.SmallestMaxSize(max_size=side, mask_interpolation=mask_interpolation)])
        between = [A.HorizontalFlip(p=rng.choice([0.0, 1.0]))] if rng.random() < 0.5 else []
        crop = rng.choice([A.CenterCrop(side, side), A.RandomCrop(side, side)])
        steps += [resize, *between, crop]
        names.append(f"{type(resize).__name__}({side}, mask {mask_interpolation}) {len(between)} flips {type(crop).__name__}")
    elif geometry < 0.5:  # the letterbox
        longest = rng.choice([64, 200, 512])
        mask_interpolation, border = rng.choice([0, 0, 0, 1]), rng.choice([0, 0, 0, 4])
        steps += [A.LongestMaxSize(max_size=longest, mask_interpolation=mask_interpolation),
                  A.PadIfNeeded(longest, longest + rng.choice([0, 9]), border_mode=border, fill=fill, fill_mask=fill_mask)]
        names.append(f"letterbox({longest}, mask {mask_interpolation}, border {border}, {fill}, {fill_mask})")
    elif geometry < 0.8:
        steps += [A.PadIfNeeded(min_height=size, min_width=size, border_mode=0, fill=fill, fill_mask=fill_mask),
                  A.RandomCrop(height=size, width=size)]
        names.append(f"pad({size}, {fill}, {fill_mask})+crop")
    else:
        steps.append(A.RandomCrop(height=size, width=size, pad_if_needed=True, fill=fill, fill_mask=fill_mask))
        names.append(f"crop_pads({size}, {fill}, {fill_mask})")
    for _ in range(rng.randint(0, 3)):
        kind = rng.choice(["hflip", "vflip", "bc", "gamma", "invert", "affine", "transpose", "dropout", "oneof"])
        p = rng.choice([0.0, 1.0])
        step = {
            "hflip": lambda: A.HorizontalFlip(p=p),
            "vflip": lambda: A.VerticalFlip(p=p),
            "bc": lambda: A.RandomBrightnessContrast(brightness_limit=(0.1, 0.1), contrast_limit=(0.2, 0.2), p=p),
            "gamma": lambda: A.RandomGamma(gamma_limit=(120, 120), p=p),
            "invert": lambda: A.InvertImg(p=p),
            "affine": lambda: A.Affine(rotate=(10, 10), p=p),
            "transpose": lambda: A.Transpose(p=p),
            "dropout": lambda: A.CoarseDropout(p=p),
            "oneof": lambda: A.OneOf([A.HorizontalFlip(p=1.0)], p=p),
        }[kind]()
        steps.append(step)
        names.append(f"{kind}(p={p})")
    if rng.random() < 0.8:
        steps.append(A.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225)))
        names.append("Normalize")
    if rng.random() < 0.9:
        steps.append(ToTensorV2())
        names.append("to_tensor")
    return " ".join(names), A.Compose(steps)


def mask_function(rng, compose):
    """(name, fn): a random `run_semantic_segmentation.py`-shaped function over a table of an
    image and a mask column, some as the script writes it (a `functools.partial`)."""
    import functools

    import numpy as np

    kind = rng.choice(["script", "script", "closure", "no_convert", "mask_converted", "no_mask", "image_only", "dict_out"])

    def preprocess_batch(example_batch, transforms):
        pixel_values, labels = [], []
        for image, target in zip(example_batch["image"], example_batch["label"]):
            transformed = transforms(image=np.array(image.convert("RGB")), mask=np.array(target))
            pixel_values.append(transformed["image"])
            labels.append(transformed["mask"])
        return {"pixel_values": torch.stack(pixel_values).to(torch.float), "labels": torch.stack(labels).to(torch.long)}

    def closure(batch):
        out = [compose(image=np.array(im.convert("RGB")), mask=np.array(m)) for im, m in zip(batch["image"], batch["label"])]
        return {"pixel_values": [o["image"] for o in out], "labels": [o["mask"] for o in out]}

    def no_convert(batch):
        out = [compose(image=np.array(im), mask=np.array(m)) for im, m in zip(batch["image"], batch["label"])]
        return {"pixel_values": [o["image"] for o in out], "labels": [o["mask"] for o in out]}

    def mask_converted(batch):
        out = [compose(image=np.array(im.convert("RGB")), mask=np.array(m.convert("L"))) for im, m in zip(batch["image"], batch["label"])]
        return {"pixel_values": [o["image"] for o in out], "labels": [o["mask"] for o in out]}

    def no_mask(batch):
        return {"pixel_values": [compose(image=np.array(im.convert("RGB")))["image"] for im in batch["image"]]}

    def image_only(batch):  # the mask column handed over as an image
        return {"pixel_values": [compose(image=np.array(m.convert("RGB")))["image"] for m in batch["label"]]}

    def dict_out(batch):
        batch["pixel_values"], batch["labels"] = [], []
        for image, target in zip(batch["image"], batch["label"]):
            t = compose(image=np.array(image.convert("RGB")), mask=np.array(target))
            batch["pixel_values"].append(t["image"])
            batch["labels"].append(t["mask"])
        return batch

    fns = {"closure": closure, "no_convert": no_convert, "mask_converted": mask_converted, "no_mask": no_mask,
           "image_only": image_only, "dict_out": dict_out}
    if kind == "script":
        return kind, functools.partial(preprocess_batch, transforms=compose)
    return kind, fns[kind]


def processor_case(rng):
    """(name, fn): a random function of transformers' segmentation guide's shape over the
    masks table: Segformer's image processor (a random size, resample, reduction, rescale and
    normalization) given the batch's images and maps, some through a pinned torchvision step
    first, some handing the maps otherwise (as arrays, converted, the image's own column),
    some calling it per image or with `return_tensors`, some with BEiT's processor."""
    import numpy as np
    from torchvision import transforms as T
    from transformers import BeitImageProcessor, SegformerImageProcessor

    size = {"height": rng.choice([32, 61, 96]), "width": rng.choice([40, 77, 96])}
    kw = {"size": size, "do_reduce_labels": rng.random() < 0.5, "resample": rng.choice([0, 2, 2, 3])}
    if rng.random() < 0.2:
        kw["do_normalize"] = False
    if rng.random() < 0.1:
        kw["do_rescale"] = False
    cls = BeitImageProcessor if rng.random() < 0.1 else SegformerImageProcessor
    processor = cls(**kw)
    first = rng.choice(["none", "none", "brightness", "flip", "grey", "crop"])
    step = {
        "none": None,
        "brightness": T.ColorJitter(brightness=(1.3, 1.3)),
        "flip": T.RandomHorizontalFlip(p=1.0),
        "grey": T.Grayscale(3),
        "crop": T.CenterCrop(24),
    }[first]
    kind = rng.choice(["guide", "guide", "guide", "pt", "keywords", "per_image", "arrays", "converted", "own_column", "no_maps"])

    def fn(batch):
        # The step is read here, where hpuload finds what the function reaches.
        images = [x for x in batch["image"]] if step is None else [step(x) for x in batch["image"]]
        labels = list(batch["label"])
        if kind == "pt":
            return processor(images, labels, return_tensors="pt")
        if kind == "keywords":
            return processor(images=images, segmentation_maps=labels)
        if kind == "per_image":
            outs = [processor(im, lab) for im, lab in zip(images, labels)]
            return {"pixel_values": [o["pixel_values"][0] for o in outs], "labels": [o["labels"][0] for o in outs]}
        if kind == "arrays":
            return processor(images, [np.array(m) for m in labels])
        if kind == "converted":
            return processor(images, [m.convert("L") for m in labels])
        if kind == "own_column":
            return processor(images, list(batch["image"]))
        if kind == "no_maps":
            return processor(images)
        return processor(images, labels)

    return f"{cls.__name__}({kw}) first={first} kind={kind}", fn


def masked(table, cache):
    """`table` saved as a segmentation table: `image` and `label` (a grey PNG of classes made
    from each image's grey levels, of its size)."""
    import io

    import datasets
    import numpy as np
    from PIL import Image

    paths = [row["path"] for row in table.cast_column("image", datasets.Image(decode=False))["image"]]
    masks = []
    for path in paths:
        with Image.open(path) as im:
            classes = (np.asarray(im.convert("L")) // 40).astype(np.uint8)
        out = io.BytesIO()
        Image.fromarray(classes, mode="L").save(out, format="PNG")
        masks.append({"bytes": out.getvalue(), "path": os.path.basename(path) + ".mask.png"})
    columns = {"image": paths, "label": masks}
    if os.environ.get("LABELLED") == "1":  # a class label per row beside them (scene_parse_150's)
        columns["scene"] = [k % 3 for k in range(len(paths))]
    out = datasets.Dataset.from_dict(columns)
    out = out.cast_column("image", datasets.Image()).cast_column("label", datasets.Image())
    if "scene" in columns:
        out = out.cast_column("scene", datasets.ClassLabel(names=["a", "b", "c"]))
    out.save_to_disk(os.path.join(cache, "masks"))
    return datasets.load_from_disk(os.path.join(cache, "masks"))


def mask_collate_of(rng):
    if rng.random() < 0.5:
        return "none", None

    def collate_fn(examples):
        return {k: torch.stack([torch.as_tensor(e[k]) for e in examples]) for k in ("pixel_values", "labels") if k in examples[0]}

    return "stack", collate_fn


def sized_composition(rng, tries=20):
    """transform_fuzz.py's `composition` drawn until one gives images of two sizes one
    output shape (the last drawn, if none does)."""
    from PIL import Image

    images = [Image.new("RGB", (40, 30), (90, 20, 200)), Image.new("RGB", (70, 90), (10, 120, 30))]
    for _ in range(tries):
        name, tf = transform_fuzz.composition(rng)
        try:
            shapes = {tuple(getattr(tf(im), "shape", None) or getattr(tf(im), "size", ())) for im in images}
        except Exception:  # noqa: BLE001 - refuses one of them: draw another
            continue
        if len(shapes) == 1:
            return name, tf
    return name, tf


def paired(table, cache):
    """`table` saved as ControlNet's: image, a caption, and a conditioning image (the images
    in reverse order)."""
    import datasets

    paths = [row["path"] for row in table.cast_column("image", datasets.Image(decode=False))["image"]]
    text = [f"a photo number {i}" for i in range(len(paths))]
    out = datasets.Dataset.from_dict({"image": paths, "text": text, "conditioning_image": paths[::-1]})
    out = out.cast_column("image", datasets.Image()).cast_column("conditioning_image", datasets.Image())
    out.save_to_disk(os.path.join(cache, "pairs"))
    return datasets.load_from_disk(os.path.join(cache, "pairs"))


def pair_collate_of(rng):
    if rng.random() < 0.5:
        from torch.utils.data import default_collate

        def every_key(examples):  # what default_collate makes of each key but the images
            return {k: default_collate([e[k] for e in examples]) for k in examples[0] if k not in ("image", "conditioning_image")}

        return "every_key", every_key

    def collate_fn(examples):
        return {k: torch.stack([e[k] for e in examples]) for k in ("pixel_values", "conditioning_pixel_values") if k in examples[0]}

    return "stack", collate_fn


def steps_case(rng):
    """(name, fn): a random SDXL-shaped function that cuts each image itself, every draw
    pinned (see the module's STEPS)."""
    from torchvision import transforms as T
    from torchvision.transforms import functional as F
    from torchvision.transforms.functional import crop

    res = rng.choice([16, 24, 32])
    filter_name = rng.choice(["BILINEAR", "BICUBIC", "LANCZOS", "NEAREST"])
    square = rng.random() < 0.5  # Resize((res, res)): a random crop of it draws nothing
    resize = T.Resize((res, res) if square else res, interpolation=getattr(T.InterpolationMode, filter_name))
    cut = rng.choice(["center", "params", "call", "none"] if square else ["center"])
    gate = rng.choice(["none", "before", "after"])
    always = rng.random() < 0.5
    final = rng.choice(["ToTensor+Normalize", "ToTensor", "PILToTensor"])
    order = rng.choice(["hw", "wh"])
    odd = rng.choice([None] * 6 + ["pil_crop", "jitter", "padded", "two_randoms", "mode", "functional_flip"])  # the last runs natively
    crop_t = T.CenterCrop(res) if cut == "center" else T.RandomCrop(res, padding=2 if odd == "padded" else None)
    flip = T.RandomHorizontalFlip(p=1.0)
    jitter = T.ColorJitter(brightness=(1.2, 1.2))
    last = {
        "ToTensor+Normalize": T.Compose([T.ToTensor(), T.Normalize([0.5], [0.5])]),
        "ToTensor": T.ToTensor(),
        "PILToTensor": T.PILToTensor(),
    }[final]

    # Written inline, as the script writes it: hpuload looks through the function's own
    # names, not those of helpers it calls.
    def fn(batch):
        sizes, corners, out, modes = [], [], [], []
        for image in batch["image"]:
            image = image.convert("RGB")
            sizes.append((image.height, image.width) if order == "hw" else image.size)
            image = resize(image)
            if odd == "jitter":
                image = jitter(image)
            if gate == "before" and (random.random() < 1.0 if always else random.random() > 1.0):
                if odd == "two_randoms":
                    random.random()
                image = F.hflip(image) if odd == "functional_flip" else flip(image)
            if cut == "params":
                y, x, h, w = crop_t.get_params(image, (res, res))
                image = crop(image, y, x, h, w)
            elif cut == "none":  # optimum-habana's copy at its default crop resolution
                y, x = 0, 0
            else:
                y = max(0, int(round((image.height - res) / 2.0)))
                x = max(0, int(round((image.width - res) / 2.0)))
                image = crop_t(image)
            if gate == "after" and (random.random() < 1.0 if always else random.random() > 1.0):
                if odd == "two_randoms":
                    random.random()
                x = image.width - x
                image = F.hflip(image) if odd == "functional_flip" else flip(image)
            if odd == "pil_crop":
                image = image.crop((0, 0, res, res))
            if odd == "mode":
                modes.append(image.mode)
            corners.append((y, x))
            out.append(last(image))
        batch["original_sizes"] = sizes
        batch["crop_top_lefts"] = corners
        batch["pixel_values"] = out
        if modes:
            batch["modes"] = modes
        return batch

    name = (
        f"steps: Resize({'square' if square else 'short'} {res}, {filter_name}) cut={cut} gate={gate} "
        f"{'always' if always else 'never'} sizes={order} odd={odd} {final}"
    )
    return name, fn


def joint_case(rng):
    """(name, fn): a random InstructPix2Pix-shaped function over the pairs table (see the
    module's JOINT), every draw pinned."""
    import numpy as np
    from PIL import Image
    from torchvision import transforms as T

    res = rng.choice([16, 24, 32])
    out_size = rng.choice([res, res, res - 4])
    resample = rng.choice([None, Image.NEAREST, Image.BILINEAR, Image.BICUBIC, Image.LANCZOS, Image.BOX])
    crop = rng.choice(["center", "random", "none"]) if out_size == res else "center"
    flip = rng.choice([None, 1.0, 0.0])
    vflip = rng.random() < 0.2
    tail = rng.choice(["signed", "signed", "unit", "uint8", "halves", "float64"])
    join = rng.choice(["stack", "concatenate"])
    columns = rng.choice([("image", "conditioning_image"), ("image",), ("conditioning_image",)])
    convert = rng.random() < 0.8
    odd = rng.choice([None] * 6 + ["per_image", "jitter", "size", "changing_lambda", "pixels"])
    inline = rng.random() < 0.5  # the function calls the transform itself, not a helper
    steps = []
    if crop != "none":
        steps.append(T.CenterCrop(out_size) if crop == "center" else T.RandomCrop(out_size))
    steps.append(T.RandomHorizontalFlip(flip) if flip is not None else T.Lambda(lambda x: x))
    if vflip:
        steps.append(T.RandomVerticalFlip(1.0))
    if odd == "jitter":
        steps.append(T.ColorJitter(brightness=(1.2, 1.2)))
    if odd == "changing_lambda":
        steps.append(T.Lambda(lambda x: x * 0.5))
    train_transforms = T.Compose(steps)

    def convert_to_np(image):
        image = image.convert("RGB") if convert else image
        width = res + (image.size[0] % 2 if odd == "size" else 0)
        kwargs = {} if resample is None else {"resample": resample}
        array = np.array(image.resize((width, res), **kwargs)).transpose(2, 0, 1)
        return array[:, :, :res] + (1 if odd == "pixels" else 0)

    def make(examples):
        parts = [np.concatenate([convert_to_np(im) for im in examples[c]]) for c in columns]
        images = torch.tensor((np.stack if join == "stack" else np.concatenate)(parts))
        if tail == "signed":
            images = 2 * (images / 255) - 1
        elif tail == "unit":
            images = images / 255
        elif tail == "halves":
            images = images / 127.5 - 1
        elif tail == "float64":
            images = torch.tensor(np.stack(parts) / 255.0)
        if odd == "per_image":
            return torch.stack([train_transforms(x) for x in images.reshape(-1, 3, res, res)])
        return images if inline else train_transforms(images)

    def fn(examples):
        made = make(examples)
        if inline and odd != "per_image":
            made = train_transforms(made)
        made = made.reshape(len(columns), -1, 3, out_size, out_size)
        for c, images in zip(columns, made):
            examples["pixel_values" if c == "image" else "conditioning_pixel_values"] = images
        examples["n"] = [len(t) for t in examples["text"]]
        return examples

    name = (
        f"joint: resize {res} {resample} crop={crop} {out_size} flip={flip} vflip={vflip} tail={tail} join={join} "
        f"columns={columns} convert={convert} inline={inline} odd={odd}"
    )
    return name, fn


def with_bytes(table, cache):
    """`table` as a table of each image's encoded bytes and its label (no Image column)."""
    import datasets

    cells = table.cast_column("image", datasets.Image(decode=False))["image"]
    data = [c["bytes"] if c["bytes"] is not None else open(c["path"], "rb").read() for c in cells]
    out = datasets.Dataset.from_dict({"jpg": data, "label": list(table["label"])})
    out.save_to_disk(os.path.join(cache, "bytes"))
    return datasets.load_from_disk(os.path.join(cache, "bytes"))


def with_paths(table, cache):
    """`table` as a table of each image's path and its label (no Image column)."""
    import datasets

    paths = [row["path"] for row in table.cast_column("image", datasets.Image(decode=False))["image"]]
    out = datasets.Dataset.from_dict({"path": paths, "label": list(table["label"])})
    out.save_to_disk(os.path.join(cache, "paths"))
    return datasets.load_from_disk(os.path.join(cache, "paths"))


def caption_collate_of(kind, rng):
    if kind in ("size", "torch_draw") or rng.random() < 0.3:
        from torch.utils.data import default_collate

        def every_key(examples):  # what default_collate makes of each key but the images
            return {k: default_collate([e[k] for e in examples]) for k in examples[0] if k != "image"}

        return "every_key", every_key

    def collate_fn(examples):
        return {"pixel_values": torch.stack([e["pixel_values"] for e in examples]), "input_ids": torch.stack([e["input_ids"] for e in examples])}

    return "example", collate_fn


def captioned(table, cache):
    """`table` saved with a caption per row in place of its label."""
    import datasets

    words = ["a", "photo", "of", "red", "dog", "tree", "house", "at", "night"]
    text = [", ".join(" ".join(words[(i * 7 + j) % len(words)] for j in range(3 + i % 4)) for _ in range(2)) for i in range(len(table))]
    out = table.remove_columns("label").add_column("text", text)
    out.save_to_disk(os.path.join(cache, "captions"))
    return datasets.load_from_disk(os.path.join(cache, "captions"))


def collate_of(kind, rng):
    image_key = "image" if kind == "key" else "pixel_values"
    label_key = "labels" if kind == "new_dict" else "label"
    choice = rng.choice(["example", "example", "default"])
    if choice == "default":
        return "default", None

    def collate_fn(examples):
        return {"pixel_values": torch.stack([e[image_key] for e in examples]), "labels": torch.tensor([e[label_key] for e in examples])}

    return "example", collate_fn


def run(table, fn, collate, how, normalized):
    ds = table.with_transform(fn) if how == "with" else table
    if how == "set":
        ds.set_transform(fn)
    kw = {} if collate is None else {"collate_fn": collate}
    try:
        ref = list(TorchLoader(ds, batch_size=1, **kw))
        again = list(TorchLoader(ds, batch_size=1, **kw))
    except Exception as e:
        return "torch raises", f"{type(e).__name__}: {str(e)[:100]}"
    if not all(dataset_fuzz._exact(a, b) for a, b in zip(ref, again)):
        return "torch varies", ""
    try:
        list(TorchLoader(ds, batch_size=len(ds), **kw))
    except Exception:
        return "torch raises", "torch's collate refuses the samples together"
    return dataset_fuzz.judged(lambda: list(DataLoader(ds, batch_size=1, shuffle=False, backend="cpu", **kw)), ref, normalized)


def main():
    import datasets

    cases, rng = transform_fuzz.arguments(200)
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="hf_fuzz") as cache:
        table = datasets.load_dataset("imagefolder", data_dir=ROOT, split="train", cache_dir=cache)
        captions = os.environ.get("CAPTIONS") == "1"
        if os.environ.get("MASKS") == "1":
            search(masked(table, cache), rng, cases, paths="masks")
        elif os.environ.get("PAIRS") == "1":
            search(paired(table, cache), rng, cases, paths="pairs")
        elif os.environ.get("PATHS") == "1":
            search(with_paths(table, cache), rng, cases, paths=True)
        elif os.environ.get("BYTES") == "1":
            search(with_bytes(table, cache), rng, cases, paths="bytes")
        else:
            search(captioned(table, cache) if captions else table, rng, cases, captions)


def search(table, rng, cases, captions=False, paths=False):
    tally = {}
    for i in range(cases):
        if captions and os.environ.get("STEPS") == "1":
            tname, fn = steps_case(rng)
            kind, tf = "steps", None
            cname, collate = caption_collate_of("size", rng)
        elif paths == "masks" and os.environ.get("PROCESSOR") == "1":
            tname, fn = processor_case(rng)
            kind, tf = "processor", None
            cname, collate = mask_collate_of(rng)
        elif paths == "masks":
            tname, tf = mask_composition(rng)
            kind, fn = mask_function(rng, tf)
            cname, collate = mask_collate_of(rng)
        elif paths == "pairs" and os.environ.get("JOINT") == "1":
            tname, fn = joint_case(rng)
            kind, tf = "joint", None
            cname, collate = pair_collate_of(rng)
        else:
            tname, tf = transform_fuzz.composition(rng)
        if paths == "masks" or (paths == "pairs" and os.environ.get("JOINT") == "1"):
            pass
        elif paths == "pairs":
            # Compositions of one output size (others make batches torch's collate refuses).
            tname, tf = sized_composition(rng)
            tname2, tf2 = sized_composition(rng)
            kind, fn = pair_function(rng, tf, tf2)
            tname = f"{tname} | {tname2}"
            cname, collate = pair_collate_of(rng)
        elif paths:
            kind, fn = (bytes_function if paths == "bytes" else path_function)(rng, tf)
            cname, collate = collate_of("new_dict" if kind == "new_dict" else kind, rng)
        elif captions and os.environ.get("STEPS") == "1":
            pass
        elif captions:
            kind, fn = caption_function(rng, tf)
            cname, collate = caption_collate_of(kind, rng)
        else:
            kind, fn = function(rng, tf)
            cname, collate = collate_of(kind, rng)
        how = rng.choice(["set", "with"])
        name = f"[fn={kind} collate={cname} {how}_transform] {tname}"
        try:
            outcome, detail = run(table, fn, collate, how, "Normalize" in tname)
        except Exception as e:
            outcome, detail = "HARNESS", f"{type(e).__name__}: {e}"
        transform_fuzz.count(tally, i, outcome, detail, name, show=os.environ.get("SHOW") == "1")
    print(tally)


if __name__ == "__main__":
    main()
