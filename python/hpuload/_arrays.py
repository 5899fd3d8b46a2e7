"""torchvision's datasets that hold every image in memory, as one uint8 array of same-size
images: `CIFAR10` and `CIFAR100` (`N x 32 x 32 x 3`), `SVHN` (`N x 3 x 32 x 32`), `STL10`
(`N x 3 x 96 x 96`, its unlabeled images labelled -1) and the grey `MNIST`, `FashionMNIST`,
`KMNIST`, `EMNIST`, `QMNIST` (`N x 28 x 28`; QMNIST's class labels, as `compat=True` gives them). Their `__getitem__` hands
`Image.fromarray(row)` to the transform, an image of the row's bytes; hpuload serves the same
bytes to its decoder (`ArraySource`) and runs the transform natively."""

from __future__ import annotations

import json


def images_of(dataset):
    """`(array [N, H, W, C] uint8 (C 3, or 1 for grey), labels)` of a torchvision in-memory
    dataset whose `__getitem__` is its own (a subclass that overrides it is a user's class,
    probed as such); None for any other."""
    try:
        import numpy as np
        import torch
        from torchvision.datasets import CIFAR10, MNIST, QMNIST, STL10, SVHN
    except ImportError:
        return None
    cls = type(dataset)
    if isinstance(dataset, CIFAR10) and cls.__getitem__ is CIFAR10.__getitem__:
        data, labels, channels_first = dataset.data, dataset.targets, False
    elif isinstance(dataset, SVHN) and cls.__getitem__ is SVHN.__getitem__:
        # `Image.fromarray(np.transpose(img, (1, 2, 0)))`.
        data, labels, channels_first = dataset.data, dataset.labels, True
    elif isinstance(dataset, STL10) and cls.__getitem__ is STL10.__getitem__:
        # The same transpose; `int(self.labels[index])`, -1 for the unlabeled split (labels
        # of None would give targets of None: not taken).
        if dataset.labels is None:
            return None
        data, labels, channels_first = dataset.data, dataset.labels, True
    elif isinstance(dataset, QMNIST) and cls.__getitem__ is QMNIST.__getitem__:
        # Its own `__getitem__`: the grey row as MNIST's, the target `int(targets[index, 0])`
        # with `compat` (the default), else the whole row of eight numbers (not taken).
        data, targets = dataset.data, dataset.targets
        if not (dataset.compat and isinstance(targets, torch.Tensor) and targets.ndim == 2):
            return None
        if not (isinstance(data, torch.Tensor) and data.dtype == torch.uint8 and data.ndim == 3):
            return None
        data, labels, channels_first = data.numpy()[..., None], targets[:, 0].tolist(), False
    elif isinstance(dataset, MNIST) and cls.__getitem__ is MNIST.__getitem__:
        # MNIST, FashionMNIST, KMNIST, EMNIST: `Image.fromarray(img.numpy(), mode="L")` of a
        # uint8 tensor's row (QMNIST has a `__getitem__` of its own).
        data, labels, channels_first = dataset.data, dataset.targets, False
        if not (isinstance(data, torch.Tensor) and data.dtype == torch.uint8 and data.ndim == 3):
            return None
        data = data.numpy()[..., None]
        labels = labels.tolist() if isinstance(labels, torch.Tensor) else labels
    else:
        return None
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 4):
        return None
    if channels_first:
        data = data.transpose(0, 2, 3, 1)
    if data.shape[-1] not in (1, 3) or len(labels) != len(data):
        return None
    # The labels as `__getitem__` gives them: CIFAR's are ints, SVHN's and STL10's
    # `int(self.labels[i])`.
    return np.ascontiguousarray(data), [int(y) for y in labels]


def check_grey(pipeline: str, tail, name: str) -> None:
    """Refuses (`Unsupported`) what hpuload would not give as torchvision does for grey images,
    which it makes as three equal channels and hands out as one: steps that run in Python (they
    would get RGB images), several views, a grey conversion (`Grayscale(3)` makes three
    channels), a `Normalize` whose channels differ (torch refuses it on one channel)."""
    from ._transforms import Unsupported

    spec = json.loads(pipeline)
    if tail is not None or "views" in spec:
        raise Unsupported(f"the {name}'s grey images through steps that run in Python, or in several views")
    for op in every_op(spec.get("ops", [])):
        kind = op.get("op")
        if kind in ("random_grayscale", "pil_grayscale"):
            raise Unsupported(f"a grey conversion of the {name}'s grey images")
        if kind == "normalize" and (len(set(op["mean"])) > 1 or len(set(op["std"])) > 1):
            raise Unsupported(f"Normalize with three channels of the {name}'s grey images")


def every_op(value):
    """Every op of a pipeline's JSON, those inside `random_apply`, `random_choice` and
    `random_order` too."""
    if isinstance(value, dict):
        if "op" in value:
            yield value
        for inner in value.values():
            yield from every_op(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from every_op(inner)


def translate(transform, height: int, width: int, grey: bool = False):
    """`translate_split` of the dataset's transform, every image being `height x width`: as
    it is when it starts with a crop or resize; else (an evaluation `ToTensor`, `Normalize`;
    pixel ops before any crop) after a `CenterCrop` to that size, which keeps each image whole
    and fixes the batch's shape. `grey`: the images are grey ("L"), which steps of the user's
    own are watched on (`_transforms.GREY_IMAGES`)."""
    from ._transforms import GREY_IMAGES

    token = GREY_IMAGES.set(grey)
    try:
        return _translate_whole(transform, height, width)
    finally:
        GREY_IMAGES.reset(token)


def _translate_whole(transform, height: int, width: int):
    from ._transforms import translate_split

    return one_size(translate_split, transform, (height, width), tail_ok=True)[0]


def one_size(translate, transform, size, tail_ok: bool = False):
    """How `transform` runs over images that all have one `size` (`(height, width)`; None
    while it is not known: the translation does not depend on it, and a stand-in is used):
    `(translated, wanted, why)`, where `translated` is `translate(...)`'s result and
    `wanted` says what the size was needed for:
    - None: the transform sets its output size (a crop or resize to a fixed size);
    - "crop": it sets none (`ToTensor` and `Normalize` alone, or pixel ops before any crop)
      and runs after a `CenterCrop` to `size`, which keeps each image whole and fixes the
      batch's shape;
    - "resize": its one geometry step resizes the shorter side alone, which here is a resize
      to the size torchvision computes for `size` (the same pixels).
    Either leaves the transform as it is (None) where it would leave steps for Python and
    not `tail_ok`.
    `why`: what made the transform untranslatable on its own, for a "crop" (to tell where the
    images turn out not to be one size). Raises `Unsupported` as `translate` does."""
    from torchvision import transforms as v1
    from torchvision.transforms import v2

    from ._transforms import Unsupported

    try:
        translated = translate(transform)
        spec = json.loads(translated[0])
        geometry = [op for op in spec.get("ops", ()) if op.get("op") in _GEOMETRY]
        if "views" in spec or (geometry and not _short_side(geometry)):
            return translated, None, None
        if geometry:
            if not tail_ok and len(translated) > 2 and translated[2] is not None:
                return translated, None, None
            if size is not None:
                geometry[0]["size"] = list(resized_size(size, geometry[0]["size"]))
            return (json.dumps(spec), *translated[1:]), "resize", None
        first = None
    except Unsupported as e:
        first = e
    flavour = v2 if type(transform).__module__.startswith("torchvision.transforms.v2") else v1
    try:
        cropped = translate(flavour.Compose([flavour.CenterCrop(size or (1, 1)), transform]))
    except Unsupported:
        if first is not None:
            raise first from None
        raise
    if not tail_ok and len(cropped) > 2 and cropped[2] is not None:
        if first is not None:
            raise first
        return translated, None, None
    return cropped, "crop", first


def _short_side(geometry: list) -> bool:
    """Whether a pipeline's only geometry step resizes the shorter side alone."""
    return len(geometry) == 1 and geometry[0]["op"] == "resize" and isinstance(geometry[0].get("size"), int)


def resized_size(size: tuple[int, int], short: int) -> tuple[int, int]:
    """`(height, width)` torchvision's `Resize(short)` gives an image of `size`: the shorter
    side `short`, the longer in proportion, truncated."""
    height, width = size
    if width <= height:
        return int(short * height / width), short
    return short, int(short * width / height)


#: The ops that set a pipeline's output size.
_GEOMETRY = {"random_resized_crop", "resize", "random_resize", "center_crop", "random_crop"}
