"""Random Dataset classes of the user's own (how `__getitem__` opens the image, where the path
and label come from, what type the label is, how the transform is held and called, what it
returns), each with a random torchvision composition of transform_fuzz.py's grammar (every
draw pinned), run through hpuload.torch.DataLoader (CPU path) and through the Dataset itself
with torch's `default_collate`, compared value by value: the search of transform_fuzz.py
(session 81) for the probe of users' classes (session 82).

usage: python dataset_fuzz.py FOLDER [CASES=300] [SEED=0]
  FOLDER  transform_sweep_images.py's set (class folders of PNGs), as for transform_fuzz.py
The ways of opening include a Pillow resize to one size and conversions to grey before the
transform.
Outcomes as transform_fuzz.py's (same, tail, fallback, SILENT, fallback-BAD, ERROR, torch
raises, torch varies); every value of each batch is compared: the image (1 level), the label
and whatever follows it (equal, type for type).
env ONLY=N: run case N alone and print its class's source.
env OPEN=NAME: every class opens its image as OPENS[NAME] says (e.g. `read_grey` over JPEGs).
env RETURNS=NAME: every class returns what RETURNS[NAME] says (e.g. `dict_extras`: a dict of
the image and values beside it, session 97; `dict_two`: a dict of two images from two files,
session 98; `bare`, `single`: the image alone; `views`, `views_nested`: two outputs of the
transform from one image, then the label, session 109).
env BACKEND=auto: hpuload's batches from the media engine's backend (images then compared
within transform_fuzz.py's engine tolerance).
env ARITH=1: every class makes a NumPy array of what a transform of PIL steps alone gives
(perhaps after `Image.fromarray(np.array(image))` first, as diffusers' textual inversion
does), then computes on it with random arithmetic (`x / 127.5 - 1`, a mean and deviation of
its own, float64 or float32, NumPy or torch; some with what hpuload does not follow) and
returns it in a dict, compared exactly (session 103).
env CHAIN=1: every class holds its composition cut into two or three torchvision transforms
of its own (no `transform`; perhaps one more it never applies) and applies them itself in
turn, with code between them: an array and back, a resize to its own size, its size noted
(session 107).
env FUNCTIONAL=1: every class calls torchvision's functional API (v1's and v2's) on its image
itself, before its transform, after it or instead of one: resizes, crops, flips, padding,
grey, conversions to a tensor and back, `normalize`, `to_dtype`; some with what hpuload does
not follow (a size from the image's own, `adjust_brightness`) (session 108); flips drawn with
`random` or torch (functional or Pillow's), compared with the class's own samples made with
its draws seeded as hpuload seeds them for each sample (session 109; a class whose samples
differ from call to call is otherwise "torch varies").
env DRAWS=1: every class draws from a generator (Python's, NumPy's or torch's global one, a
NumPy generator it holds itself, or one a helper object of its module holds: an attribute's,
a helper's helper's, one in a list, a module global's) outside
its transform, with a random probability from one in a thousand to one in two: a caption
dropped or picked of several, another file, a label flipped, a mirror or a resize before the
transform, or a draw that changes nothing; it records what it drew beside the image where it
returns more than a pair. hpuload must fall back, named, or give samples each of which is
what the class gives for what it records (the image of the file it names, mirrored or resized
as it says, within a level; its label), and must follow draws made often (session 104).
"""
import copy
import os
import sys
import textwrap
import warnings

import numpy as np
import torch
import torch.utils.data as tud
from torch.utils.data import default_collate

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import transform_fuzz  # noqa: E402

from hpuload.torch import DataLoader  # noqa: E402

ROOT = sys.argv[1] if __name__ == "__main__" else None
#: Every value compared bit for bit on the CPU path (`ARITH=1`: the code's own floats).
EXACT = os.environ.get("ARITH") == "1"

OPENS = {
    "convert": 'image = Image.open(path).convert("RGB")',
    "file": 'with open(path, "rb") as f:\n    image = Image.open(f).convert("RGB")',
    "with": 'with Image.open(path) as im:\n    image = im.convert("RGB")',
    "two_lines": 'image = Image.open(path)\nimage = image.convert("RGB")',
    "upright": 'image = ImageOps.exif_transpose(Image.open(path)).convert("RGB")',
    "default_loader": "image = default_loader(path)",
    "unconverted": "image = Image.open(path)",
    "grey": 'image = Image.open(path).convert("L")',
    "read_image": "image = read_image(path)",
    "read_rgb": "image = read_image(path, ImageReadMode.RGB)",
    "read_grey": "image = read_image(path, ImageReadMode.GRAY)",
    "decode": "image = decode_image(read_file(path))",
    "size_check": 'image = Image.open(path).convert("RGB")\nif image.size[0] < 0:\n    label = 0',
    # A label from the image's own size (answered from its header since session 106).
    "size_label": 'image = Image.open(path)\nif image.width > image.height + 100:\n    label = 0\nimage = image.convert("RGB")',
    "size_resized": 'image = Image.open(path).convert("RGB").resize((50, 38), Image.BOX)\nif image.size != (50, 38):\n    label = 0',
    "resize": 'image = Image.open(path).convert("RGB").resize((56, 44))',
    "resize_bilinear": 'image = Image.open(path).convert("RGB").resize((48, 48), Image.BILINEAR)',
    "resize_unconverted": 'image = Image.open(path).resize((60, 40)).convert("RGB")',
    "grey_resize": 'image = Image.open(path).convert("RGB").resize((40, 40)).convert("L")',
    "grey_rgb": 'image = Image.open(path).convert("L").convert("RGB")',
    "mode_check": 'image = Image.open(path)\nif not image.mode == "RGB":\n    image = image.convert("RGB")',
    "mode_branch": 'image = Image.open(path)\nif image.mode == "L":\n    label = 0\nimage = image.convert("RGB")',
    # The image's NumPy array (torchvision's `ToTensor` takes it as the PIL image; its other
    # steps refuse it; session 116).
    "array": 'image = np.array(Image.open(path).convert("RGB"))',
}
PATHS = {
    "rows": "path, label = self.rows[i]",
    "columns": "path = self.paths[i]\nlabel = self.labels[i]",
    "joined": "path = os.path.join(self.root, self.names[i])\nlabel = self.labels[i]",
    "from_path": "path = self.paths[i]\nlabel = self.classes.index(os.path.basename(os.path.dirname(path)))",
}
LABELS = {
    "int": "label = int(label)",
    "np": "label = np.int64(label)",
    "tensor": "label = torch.tensor(label)",
    "float": "label = float(label)",
    "onehot": "hot = torch.zeros(len(self.classes))\nhot[label] = 1.0\nlabel = hot",
    "name": "label = self.classes[label]",
}
CALLS = {
    "if_not_none": "if self.transform is not None:\n    image = self.transform(image)",
    "always": "image = self.transform(image)",
    "if_truthy": "if self.transform:\n    image = self.transform(image)",
    "other_name": "image = self.tf(image)",
    "target": "image = self.transform(image)\nif self.target_transform is not None:\n    label = self.target_transform(label)",
}
#: How the class holds its transform: as `transform` (and `tf`, the same object), under a
#: name of its own alone, or under two names, another transform beside it.
HOLDS = {
    "transform": "self.transform = transform\nself.tf = transform",
    "own_name": "self.tfms = transform",
    "two": "self.tfms = transform\nself.val_tfms = copy.deepcopy(transform)",
}
RETURNS = {
    "pair": "return image, label",
    "list": "return [image, label]",
    "dict": 'return {"image": image, "label": label}',
    "dict_label_first": 'return {"label": label, "image": image}',
    "index": "return image, label, i",
    "path": "return image, label, path",
    "reversed": "return label, image",
    "dict_extras": 'return {"pixel_values": image, "caption": f"photo {i}", "ids": torch.arange(4) + i, "label": label}',
    "dict_path": 'return {"image": image, "path": path, "label": label}',
    # Two images from two files, opened and transformed alike (DreamBooth with prior
    # preservation; session 98): `dataset_class` writes the other's lines.
    "dict_two": 'return {"image": image, "ids": torch.arange(3) + i, "other": other}',
    # The image alone, bare or in a tuple (unlabelled data; session 109).
    "bare": "return image",
    "single": "return (image,)",
    # Two outputs of the transform from one image (SimCLR's two calls; session 109):
    # `dataset_class` makes the second.
    "views": "return first, image, label",
    "views_nested": "return (first, image), label",
}


#: Helpers every generated module defines: a generator held by a helper (`Noise`), by a
#: helper's helper (`Chain`), and by a helper the module holds (`NOISE`); `DRAWN` draws
#: from them.
HELPERS = """
class Noise:
    def __init__(self):
        self.rng = np.random.default_rng(4)


class Chain:
    def __init__(self):
        self.step = Noise()


NOISE = Noise()
"""


def dataset_class(rng):
    """(name, source) of a random Dataset class."""
    parts = {
        "open": rng.choice(list(OPENS) + ["convert"] * 4),
        "paths": rng.choice(list(PATHS)),
        "label": rng.choice(list(LABELS) + ["int"] * 3),
        "call": rng.choice(list(CALLS) + ["if_not_none"] * 2),
        "returns": rng.choice(list(RETURNS) + ["pair"] * 3),
        "holds": rng.choice(list(HOLDS) + ["transform"] * 4),
    }
    # env OPEN=NAME: every class opens its image that way (the other draws unchanged).
    parts["open"] = os.environ.get("OPEN", parts["open"])
    parts["returns"] = os.environ.get("RETURNS", parts["returns"])
    call = CALLS[parts["call"]] if parts["holds"] == "transform" else "image = self.tfms(image)"
    lines = [PATHS[parts["paths"]], OPENS[parts["open"]], call, LABELS[parts["label"]]]
    if parts["returns"] == "dict_two":
        # The other image: the file of the index before, opened and transformed as the first.
        import re

        other = re.sub(r"\bpath\b", "other_path", re.sub(r"\bimage\b", "other", "\n".join([OPENS[parts["open"]], call])))
        lines += ["other_path = self.paths[i - 1]", other]
    if parts["returns"].startswith("views"):
        # The transform given the opened image twice.
        lines[2:3] = ["opened = image", call, "first = image", "image = opened", call]
    body = "\n".join([*lines, RETURNS[parts["returns"]]])
    source = f"""
{HELPERS}

class Fuzzed(tud.Dataset):
    def __init__(self, samples, classes, root, transform, target_transform=None):
        self.rows = [(p, t) for p, t in samples]
        self.paths = [p for p, _ in samples]
        self.labels = [t for _, t in samples]
        self.root = root
        self.names = [os.path.relpath(p, root) for p, _ in samples]
        self.classes = classes
{textwrap.indent(HOLDS[parts["holds"]], "        ")}
        self.target_transform = target_transform

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
{textwrap.indent(body, "        ")}
"""
    return " ".join(f"{k}={v}" for k, v in parts.items()), source


def fuzzed_source(init: list[str], body: list[str]) -> str:
    """The source of a `Fuzzed` Dataset class over `samples` (`self.rows`), the module's
    helpers before it: `init`, more lines of its `__init__`; `body`, its `__getitem__(i)`."""
    return f"""
{HELPERS}

class Fuzzed(tud.Dataset):
    def __init__(self, samples, classes, root, transform, target_transform=None):
        self.rows = [(p, t) for p, t in samples]
{textwrap.indent(chr(10).join(init), "        ")}

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
{textwrap.indent(chr(10).join(body), "        ")}
"""


#: `ARITH=1`: what the class's code makes of the transform's PIL image, `{a}` and `{b}`
#: random constants.
ARITHS = [
    "arr = (arr / {a} - {b}).astype(np.float32)",
    "arr = (arr.astype(np.float32) - {a}) / {a}",
    "arr = 2 * (arr / 255) - 1\narr = arr.astype(np.float32)",
    "arr = arr.astype(np.float32) * {b} / 255 - {b}",
    "arr = (1 - arr / np.float32({a}))",
    "arr = torch.from_numpy(arr).permute(2, 0, 1).float() / {a} - {b}",
    "arr = torch.tensor(arr, dtype=torch.float32) * (2 / 255) - 1",
    "arr = (arr - {a}) / {a}",  # float64: falls back
    "arr = arr.astype(np.float32) - np.array([{a}, 1.0, 2.0], dtype=np.float32)",  # falls back
    "arr = (arr // 2).astype(np.float32)",  # falls back
]


def arith_class(rng):
    """(name, source) of a random class of the `ARITH=1` mode."""
    a = rng.choice([127.5, 255, 255.0, 128, 64.0, 58.395])
    b = rng.choice([1.0, 0.5, 2, 0.0])
    arith = rng.choice(ARITHS).format(a=a, b=b)
    fromarray = rng.random() < 0.5
    array = rng.choice(["np.array(image)", "np.array(image).astype(np.uint8)", "np.asarray(image)"])
    lines = [
        "path, label = self.rows[i]",
        'image = Image.open(path)\nif not image.mode == "RGB":\n    image = image.convert("RGB")',
        *(["image = Image.fromarray(np.array(image).astype(np.uint8))"] if fromarray else []),
        "image = self.flip_transform(image)",
        f"arr = {array}",
        arith,
        rng.choice([
            "",
            "if isinstance(arr, np.ndarray):\n    arr = arr.transpose(2, 0, 1)",  # answered as an ndarray (session 107)
            "if type(arr) is np.ndarray:\n    arr = arr.transpose(2, 0, 1)",  # the probe's stand-in is no ndarray
            "arr = arr.transpose(2, 0, 1) if arr.shape[-1] == 3 else arr",  # reads the shape: falls back
        ]),
        'return {"pixel_values": arr, "label": label}',
    ]
    source = fuzzed_source(["self.flip_transform = transform"], lines)
    return f"arith={arith!r} fromarray={fromarray} array={array}", source


#: `CHAIN=1`: what the class's code does between two of its transforms.
BETWEEN = {
    "nothing": "",
    "roundtrip": "if isinstance(image, Image.Image):\n    image = Image.fromarray(np.array(image).astype(np.uint8))",
    "same_size": "if isinstance(image, Image.Image):\n    image = image.resize(image.size, resample=Image.BICUBIC)",
    "size_noted": "if isinstance(image, Image.Image):\n    noted = (image.height, image.width)",
}


def chain_class(rng):
    """(name, source) of a random class of the `CHAIN=1` mode: it holds its transform's steps
    cut into two or three torchvision transforms of its own (no `transform`), applies them
    itself in turn, with code between them, and perhaps holds one more it never applies."""
    parts = rng.choice([2, 2, 3])
    names = rng.sample(["crop", "flip_transform", "finish", "resize", "augment"], parts)
    between = [rng.choice(list(BETWEEN)) for _ in range(parts - 1)]
    unused = rng.random() < 0.3
    holds = [
        "steps = list(transform.transforms) if hasattr(transform, 'transforms') else [transform]",
        f"cuts = sorted(random.Random({rng.randrange(1000)}).sample(range(len(steps) + 1), {parts - 1}))",
        "bounds = [0, *cuts, len(steps)]",
        "kind = type(transform) if hasattr(transform, 'transforms') else T.Compose",
        # An empty part holds a flip that never flips (a v2 Compose of nothing is refused).
        *(f"self.{n} = kind(steps[bounds[{k}]:bounds[{k + 1}]] or [T.RandomHorizontalFlip(0.0)])" for k, n in enumerate(names)),
        *(["self.val_transform = T.CenterCrop(8)"] if unused else []),
    ]
    lines = ["path, label = self.rows[i]", 'image = Image.open(path).convert("RGB")', "noted = (0, 0)"]
    for k, n in enumerate(names):
        lines.append(f"image = self.{n}(image)")
        if k < len(between):
            lines.append(BETWEEN[between[k]])
    returns = rng.choice(["pair", "dict"])
    lines.append("return image, label" if returns == "pair" else 'return {"pixel_values": image, "noted": noted, "label": label}')
    source = fuzzed_source(holds, lines)
    return f"chain={names} between={between} unused={unused} returns={returns}", source


#: `FUNCTIONAL=1`: torchvision's functional calls the class makes on its image, each with
#: the kinds of image it takes (`pil`, `u8` and `float` tensors: `t` both), what it makes of
#: them, and its source. Calls made before the transform (or with none) are drawn from
#: `FUNCTIONAL_BEFORE`, those after it from `FUNCTIONAL_AFTER`.
FUNCTIONAL = {
    "resize": ("any", None, "image = TF.resize(image, [52, 44])"),
    "resize_short": ("any", None, "image = TF.resize(image, 40)"),
    "resize_bicubic": ("any", None, "image = TF.resize(image, [40, 40], interpolation=T.InterpolationMode.BICUBIC)"),
    "resize_nearest_v2": ("any", None, "image = F2.resize(image, [36, 48], interpolation=T.InterpolationMode.NEAREST)"),
    "resize_max_v2": ("any", None, "image = F2.resize(image, 30, max_size=40)"),
    "resize_small": ("any", None, "image = TF.resize(image, [20, 24])"),
    "center_crop": ("any", None, "image = TF.center_crop(image, [30, 30])"),
    "center_crop_big": ("any", None, "image = TF.center_crop(image, 90)"),
    "center_crop_small": ("any", None, "image = TF.center_crop(image, 16)"),
    "hflip": ("any", None, "image = TF.hflip(image)"),
    "vflip_v2": ("any", None, "image = F2.vertical_flip(image)"),
    "grey3": ("pil", None, "image = TF.to_grayscale(image, 3)"),
    "grey3_v2": ("any", None, "image = F2.rgb_to_grayscale(image, 3)"),
    "pad": ("any", None, "image = TF.pad(image, [3, 5])"),
    "pad_reflect_v2": ("any", None, "image = F2.pad(image, 4, padding_mode='reflect')"),
    "to_tensor": ("pil", "float", "image = TF.to_tensor(image)"),
    "pil_to_tensor": ("pil", "u8", "image = TF.pil_to_tensor(image)"),
    "to_image": ("any", "tensor", "image = F2.to_image(image)"),
    "to_dtype": ("t", "float", "image = F2.to_dtype(image, torch.float32, scale=True)"),
    "convert_dtype": ("t", "float", "image = TF.convert_image_dtype(image, torch.float32)"),
    "normalize": ("float", None, "image = TF.normalize(image, [0.5, 0.4, 0.3], [0.2, 0.3, 0.25])"),
    "normalize_v2": ("float", None, "image = F2.normalize(image, [0.5, 0.4, 0.3], [0.2, 0.3, 0.25])"),
    "to_pil": ("t", "pil", "image = TF.to_pil_image(image)"),
    "asks_tensor": ("any", None, "if isinstance(image, torch.Tensor):\n    image = TF.hflip(image)"),
    "asks_pil": ("any", "pil?", "if isinstance(image, Image.Image):\n    image = TF.pil_to_tensor(image)"),
    "size_noted": ("pil", None, "noted = image.size"),
    # What hpuload does not follow: falls back.
    "own_size": ("pil", None, "image = TF.resize(image, [image.height // 2 + 1, image.width // 2 + 1])"),
    "brightness": ("any", None, "image = TF.adjust_brightness(image, 1.3)"),
    "drawn_flip": ("any", None, "if random.random() < 0.5:\n    image = TF.hflip(image)"),
    # Drawn flips hpuload follows where only conversions, Normalize, flips and colour steps come
    # after them (session 109): compared with the class's draws seeded as hpuload seeds them.
    "drawn_vflip_torch": ("any", None, "if torch.rand(1).item() < 0.3:\n    image = TF.vflip(image)"),
    "drawn_mirror_pil": ("pil", None, "if random.random() < 0.5:\n    image = image.transpose(Image.FLIP_LEFT_RIGHT)"),
}
FUNCTIONAL_BEFORE = [n for n in FUNCTIONAL if n not in ("normalize", "normalize_v2", "to_pil", "resize_small", "center_crop_small")]
FUNCTIONAL_AFTER = [n for n in FUNCTIONAL if n not in ("own_size", "center_crop", "center_crop_big", "resize")]


def _functional_calls(rng, names, kind, count):
    """`count` calls drawn from `names` that take an image of `kind` in turn, and the kind
    they leave."""
    chosen = []
    for _ in range(count):
        fits = [n for n in names if FUNCTIONAL[n][0] in ("any", kind) or (FUNCTIONAL[n][0] == "t" and kind != "pil")]
        name = rng.choice(fits)
        chosen.append(name)
        makes = FUNCTIONAL[name][1]
        if makes == "tensor":
            kind = "u8" if kind == "pil" else kind
        elif makes == "pil?":
            kind = "u8" if kind == "pil" else kind
        elif makes is not None:
            kind = makes
    return chosen, kind


def functional_class(rng, tf):
    """(name, source, normalized) of a random class of the `FUNCTIONAL=1` mode: functional
    calls on its PIL image, then perhaps its transform `tf` (given a PIL image), then calls on
    what it gave (a class without a transform mostly ends with a tensor)."""
    from PIL import Image
    from torchvision import datasets

    applies = rng.random() < 0.75
    before, kind = _functional_calls(rng, FUNCTIONAL_BEFORE if not applies else [n for n in FUNCTIONAL_BEFORE if FUNCTIONAL[n][1] is None], "pil", rng.choice([0, 1, 1, 2, 3] if applies else [1, 2, 3]))
    if not applies and rng.random() < 0.8:
        # One size for every image, so that torch's collate takes them (a step somewhere).
        before.insert(rng.randrange(len(before) + 1), rng.choice(["resize", "resize_bicubic", "resize_nearest_v2", "center_crop"]))
    if not applies and kind == "pil" and rng.random() < 0.8:
        before.append(rng.choice(["to_tensor", "pil_to_tensor", "to_image"]))
    after = []
    if applies:
        try:
            given = tf(Image.open(datasets.ImageFolder(ROOT).samples[0][0]).convert("RGB"))
            kind = "pil" if isinstance(given, Image.Image) else "float" if given.is_floating_point() else "u8"
        except Exception:
            kind = "pil"
        after, _ = _functional_calls(rng, FUNCTIONAL_AFTER, kind, rng.choice([0, 1, 1, 2]))
    # Some classes make their calls before the transform in a transform class of their own,
    # the first step of the transform they hold (hpuload reads such a class's calls: `traced`).
    wrapped = applies and before and "size_noted" not in before and rng.random() < 0.4
    lines = ["path, label = self.rows[i]", 'image = Image.open(path).convert("RGB")', "noted = (0, 0)"]
    lines += [FUNCTIONAL[n][2] for n in before] if not wrapped else []
    if applies:
        lines.append("image = self.transform(image)")
    lines += [FUNCTIONAL[n][2] for n in after]
    returns = rng.choice(["pair", "dict"])
    lines.append("return image, label" if returns == "pair" else 'return {"pixel_values": image, "noted": noted, "label": label}')
    holds = [f"self.transform = transform if {applies} else None"]
    if wrapped:
        holds.append("self.transform = T.Compose([UserSteps(), transform])")
    source = fuzzed_source(holds, lines)
    if wrapped:
        steps = textwrap.indent(chr(10).join([FUNCTIONAL[n][2] for n in before] + ["return image"]), "        ")
        source = f"\n\nclass UserSteps:\n    def __call__(self, image):\n{steps}\n{source}"
    normalized = any(n.startswith("normalize") for n in after)
    return f"before={before} wrapped={wrapped} transform={applies} after={after} returns={returns}", source, normalized


def pil_composition(rng):
    """A composition of transform_fuzz.py's geometry and pinned pixel steps on PIL images,
    that gives PIL images."""
    from torchvision import transforms as T

    names, steps = [], []
    for _ in range(rng.choice([1, 1, 2])):
        name, step = transform_fuzz.geometry(T, rng)
        names.append(name)
        steps += step if isinstance(step, list) else [step]
    for _ in range(rng.choice([0, 1, 1])):
        name, step = transform_fuzz.pixel(T, rng, "pil")
        names.append(name)
        steps += step if isinstance(step, list) else [step]
    return " ".join(names), T.Compose(steps)


#: `DRAWS=1`: what a draw changes, `{u}` the uniform draw, P its probability.
EFFECTS = {
    "caption": 'if {u} < P:\n    caption = ""',
    "choice": "caption = random.choice(self.captions[i])",
    "file": "if {u} < P:\n    j = (i + 1) % len(self.paths)",
    "label": "if {u} < P:\n    noisy = 1",
    "mirror": "if {u} < P:\n    mirror = 1",
    "resize": "if {u} < P:\n    resize = 1",
    "nothing": "_ = {u}",
}
DRAWN = {
    "random": "random.random()",
    "numpy": "float(np.random.rand())",
    "torch": "torch.rand(()).item()",
    "own": "float(self.rng.random())",  # a generator the class holds itself
    "helper": "float(self.noise.rng.random())",  # one a helper object of its module holds
    "deeper": "float(self.chain.step.rng.random())",  # a helper's helper's
    "listed": "float(self.steps[1].rng.random())",  # a helper's in a list
    "global": "float(NOISE.rng.random())",  # a helper the module holds as a global
}
#: What a `DRAWS=1` class returns: all it drew beside the image, or a pair.
DRAW_RETURNS = {
    "dict": 'return {"pixel_values": image, "caption": caption, "file": j, "mirror": mirror, "resize": resize, "noisy": noisy, "label": label}',
    "tuple": "return image, label, caption, j, mirror, resize, noisy",
    "caption_pair": 'return image, f"{caption}|{j}|{mirror}|{resize}"',  # what it drew, in the caption
    "pair": "return image, label",
}


def draws_class(rng):
    """(name, source, p) of a random class of the `DRAWS=1` mode."""
    effects = rng.sample(list(EFFECTS), rng.choice([1, 1, 2]))
    effects.sort(key=lambda e: e != "choice")  # a caption picked, then perhaps dropped
    generator = rng.choice(list(DRAWN))
    p = rng.choice([0.001, 0.01, 0.05, 0.2, 0.5])
    returns = rng.choice(list(DRAW_RETURNS))
    lines = ["j, mirror, resize, noisy = i, 0, 0, 0", 'caption = f"photo {i}"']
    lines += [EFFECTS[e].format(u=DRAWN[generator]).replace("P", str(p)) for e in effects]
    lines += [
        'image = Image.open(self.paths[j]).convert("RGB")',
        "if mirror:\n    image = image.transpose(Image.FLIP_LEFT_RIGHT)",
        "if resize:\n    image = image.resize((40, 30))",
        "label = self.labels[j] if not noisy else self.labels[j] + 7",
        "image = self.transform(image)",
        DRAW_RETURNS[returns],
    ]
    source = f"""
{HELPERS}

class Fuzzed(tud.Dataset):
    def __init__(self, samples, classes, root, transform, target_transform=None):
        self.paths = [p for p, _ in samples]
        self.labels = [t for _, t in samples]
        self.captions = [[f"photo {{i}} caption {{k}}" for k in range(3)] for i in range(len(samples))]
        self.transform = transform
        self.rng = np.random.default_rng(3)
        self.noise = Noise()
        self.chain = Chain()
        self.steps = [None, Noise()]

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
{textwrap.indent(chr(10).join(lines), "        ")}
"""
    return f"effects={effects} generator={generator} p={p} returns={returns}", source, p, effects, returns


def run_draws(cls, tf, normalized, p, effects, returns):
    """The outcome of a `DRAWS=1` class: hpuload's samples (two epochs) each checked against
    what the class gives for what it recorded."""
    import random

    from PIL import Image
    from torchvision import datasets

    folder = datasets.ImageFolder(ROOT)
    ds = cls(folder.samples, folder.classes, ROOT, tf)
    try:
        ds[0]
        default_collate([ds[i] for i in range(len(ds))])
    except Exception as e:
        return "torch raises", f"{type(e).__name__}: {str(e)[:100]}"
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            loader = DataLoader(ds, batch_size=1, shuffle=False, backend=transform_fuzz.BACKEND, seed=5)
            got = [list(loader) for _ in range(2)]
        except Exception as e:
            return "ERROR", f"{type(e).__name__}: {str(e)[:200]}"
    notes = sorted(str(x.message)[:110] for x in w if type(x.message).__name__ in ("FallbackWarning", "PythonTailWarning"))
    if any(type(x.message).__name__ == "FallbackWarning" for x in w):
        return "fallback", str(notes)
    if returns == "pair":
        return "SILENT", f"an (image, label) pair that draws ran natively {notes}"
    seen, picked = set(), set()
    for epoch in got:
        for i, batch in enumerate(epoch):
            if returns == "dict":
                image, caption, j, mirror, resize, noisy, label = (batch[k] for k in ("pixel_values", "caption", "file", "mirror", "resize", "noisy", "label"))
            elif returns == "tuple":
                image, label, caption, j, mirror, resize, noisy = batch
            else:
                image, label, noisy = batch[0], None, 0
                caption, j, mirror, resize = batch[1][0].split("|")
            j, mirror, resize, noisy = int(j), int(mirror), int(resize), int(noisy)
            caption = caption[0] if isinstance(caption, (list, tuple)) else caption
            if caption not in (f"photo {i}", "", *ds.captions[i]):
                return "SILENT", f"sample {i}: caption {caption!r}"
            if label is not None and int(label) != ds.labels[j] + 7 * noisy:
                return "SILENT", f"sample {i}: label {int(label)} for file {j} noisy {noisy}"
            pil = Image.open(ds.paths[j]).convert("RGB")
            if mirror:
                pil = pil.transpose(Image.FLIP_LEFT_RIGHT)
            if resize:
                pil = pil.resize((40, 30))
            want = default_collate([tf(pil)])
            ok, why = _same(image, want, normalized)
            if not ok:
                return "SILENT", f"sample {i}: image of file {j} mirror {mirror} resize {resize}: {why}"
            seen |= {("file", j != i), ("mirror", bool(mirror)), ("resize", bool(resize)), ("label", bool(noisy)),
                     ("caption", caption == "")}
            picked.add((i, caption))
    if len(picked) > len(ds):  # some image's caption picked otherwise in the other epoch
        seen.add(("choice", True))
    # Draws made one call in five or more show in two epochs: hpuload must have made them.
    unseen = {"nothing"} | ({"label"} if returns == "caption_pair" else set())  # a caption pair has no label
    missed = [e for e in effects if e not in unseen and p >= 0.2 and (e, True) not in seen]
    if missed:
        return "SILENT", f"drawn {missed} with p={p} never seen in hpuload's samples"
    return ("tail" if notes else "same"), str(notes)


def make_class(source):
    from PIL import Image, ImageOps
    from torchvision.datasets.folder import default_loader
    from torchvision.io import ImageReadMode, decode_image, read_file, read_image

    import random

    from torchvision import transforms as T
    import torchvision.transforms.functional as TF
    import torchvision.transforms.v2.functional as F2

    scope = {
        "T": T, "TF": TF, "F2": F2, "tud": tud, "os": os, "copy": copy, "np": np, "torch": torch, "Image": Image, "ImageOps": ImageOps, "random": random,
        "default_loader": default_loader, "read_image": read_image, "read_file": read_file,
        "decode_image": decode_image, "ImageReadMode": ImageReadMode, "__name__": "fuzzed_dataset",
    }
    exec(compile(source, "<fuzzed dataset>", "exec"), scope)
    return scope["Fuzzed"]


def _same(a, b, normalized):
    """Whether two collated values are the same (images within a level): (bool, worst)."""
    if type(a) is not type(b):
        return False, f"types {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False, f"shape/dtype {tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} {b.dtype}"
        if a.dim() <= 2:  # labels, one-hot rows, indices: exactly
            return torch.equal(a, b), "label values"
        if (not a.is_floating_point() and a.dtype != torch.uint8) or (a.dim() == 3 and a.dtype == torch.uint8):
            # Segmentation masks, `[N, H, W]` (int64, or ToTensorV2's uint8): exactly.
            return torch.equal(a, b), "mask values"
        d = transform_fuzz._levels(a, b, normalized)
        if transform_fuzz.BACKEND != "cpu":
            # The engine is within PSNR floors, not bytes: transform_fuzz.py's mean rule.
            mean = d.mean().item() if d.numel() else 0.0
            return mean <= 4.0, f"mean {mean:.2f}"
        tol = {torch.bfloat16: 2.5, torch.float16: 1.01}.get(a.dtype, 1.01)
        worst = d.max().item() if d.numel() else 0.0
        return worst <= tol, f"max {worst:.2f}"
    if isinstance(a, dict):
        if list(a) != list(b):  # in order: code may unpack `batch.values()`
            return False, f"keys {list(a)} vs {list(b)}"
        return _all(list(a.values()), list(b.values()), normalized)
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return False, f"lengths {len(a)} vs {len(b)}"
        return _all(list(a), list(b), normalized)
    return a == b, f"values {a!r} vs {b!r}"


def _all(xs, ys, normalized):
    for x, y in zip(xs, ys):
        ok, why = _same(x, y, normalized)
        if not ok:
            return ok, why
    return True, ""


def run(cls, tf, normalized):
    from torchvision import datasets

    folder = datasets.ImageFolder(ROOT)
    return run_dataset(cls(folder.samples, folder.classes, ROOT, tf, target_transform=lambda y: y + 1), normalized)


def run_dataset(ds, normalized):
    """The outcome of `ds` through hpuload's loader against its items through
    `default_collate`, one by one."""
    try:
        ref = [default_collate([ds[i]]) for i in range(len(ds))]
        again = [default_collate([ds[i]]) for i in range(len(ds))]
    except Exception as e:
        return "torch raises", f"{type(e).__name__}: {str(e)[:100]}"
    if not all(_same(a, b, False)[0] and _exact(a, b) for a, b in zip(ref, again)):
        return run_drawn(ds, normalized)
    try:
        default_collate([ds[i] for i in range(len(ds))])
    except Exception:
        return "torch raises", "torch's collate refuses the samples together"
    backend = transform_fuzz.BACKEND
    return judged(lambda: list(DataLoader(ds, batch_size=1, shuffle=False, backend=backend)), ref, normalized)


def run_drawn(ds, normalized):
    """The outcome of `ds`, whose items differ from call to call (it draws: a flip drawn with
    `random`), through hpuload's loader against its items made with its draws seeded as
    hpuload seeds them for each sample it hands out (from the loader's seed, the epoch and the
    index); "torch varies" where it falls back (the class's own draws, not comparable)."""
    from hpuload import _tail

    made = {}

    def ours():
        made["loader"] = loader = DataLoader(ds, batch_size=1, shuffle=False, backend=transform_fuzz.BACKEND)
        return list(loader)

    def ref():
        options = getattr(made.get("loader"), "_options", None)  # none: torch's loader
        if options is None:
            return [default_collate([ds[i]]) for i in range(len(ds))]
        # The transform's own draws (pinned: they change nothing) kept from the class's
        # generators: hpuload's transform draws from its plan, so the class's draws after it
        # are made from the generators as seeded.
        transform = ds.transform
        if transform is not None:
            ds.transform = lambda *a: _isolated_call(transform, *a)
        out = []
        try:
            for i in range(len(ds)):
                with _tail.seeded_sample(options.seed, 0, i):
                    out.append(default_collate([ds[i]]))
        finally:
            ds.transform = transform
        return out

    outcome, detail = judged(ours, ref, normalized)
    if outcome in ("fallback", "fallback-BAD"):
        return "torch varies", f"the dataset gives other values the second time; {detail}"
    return outcome, detail


def _isolated_call(fn, *args):
    from hpuload import _tail

    with _tail._Isolated():
        return fn(*args)


def judged(ours, ref, normalized):
    """The outcome of hpuload's batches (`ours()`, each of batch size 1) against the user's
    own (`ref`, or `ref()` once hpuload's are made): `(outcome, detail)`."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            got = ours()
        except Exception as e:
            return "ERROR", f"{type(e).__name__}: {str(e)[:200]}"
    if callable(ref):
        ref = ref()
    kinds = {type(x.message).__name__ for x in w}
    fell = "FallbackWarning" in kinds
    notes = sorted(str(x.message)[:110] for x in w if type(x.message).__name__ in ("FallbackWarning", "PythonTailWarning"))
    if len(got) != len(ref):
        return ("fallback-BAD" if fell else "SILENT"), f"{len(got)} batches vs {len(ref)}"
    for a, b in zip(got, ref):
        ok, why = _same(a, b, normalized)
        if ok and EXACT and transform_fuzz.BACKEND == "cpu" and not _exact(a, b):
            ok, why = False, "not bit for bit"
        if not ok:
            return ("fallback-BAD" if fell else "SILENT"), f"{why} {notes}"
    return ("fallback" if fell else ("tail" if "PythonTailWarning" in kinds else "same")), str(notes)


def _exact(a, b):
    if isinstance(a, torch.Tensor):
        return torch.equal(a.nan_to_num(), b.nan_to_num())
    if isinstance(a, dict):
        return all(_exact(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return all(_exact(x, y) for x, y in zip(a, b))
    return a == b


def main():
    cases, rng = transform_fuzz.arguments(300)
    transform_fuzz.ROOT = ROOT
    tally = {}
    only = os.environ.get("ONLY")
    arith = os.environ.get("ARITH") == "1"
    draws = os.environ.get("DRAWS") == "1"
    chain = os.environ.get("CHAIN") == "1"
    functional = os.environ.get("FUNCTIONAL") == "1"
    for i in range(cases):
        drawn, normalized = None, False
        if draws:
            name, source, *drawn = draws_class(rng)
        elif chain:
            name, source = chain_class(rng)
        elif not functional:
            name, source = arith_class(rng) if arith else dataset_class(rng)
        tname, tf = pil_composition(rng) if arith else transform_fuzz.composition(rng)
        if functional:
            name, source, normalized = functional_class(rng, tf)
        if only is not None and i != int(only):
            continue
        if only is not None:
            print(source)
        try:
            if drawn is not None:
                outcome, detail = run_draws(make_class(source), tf, "Normalize" in tname, *drawn)
            else:
                outcome, detail = run(make_class(source), tf, normalized or "Normalize" in tname)
        except Exception as e:
            outcome, detail = "HARNESS", f"{type(e).__name__}: {e}"
        transform_fuzz.count(tally, i, outcome, detail, f"[{name}] {tname}", show=only is not None or os.environ.get("SHOW") == "1")
    print(tally)


if __name__ == "__main__":
    main()
