"""torchvision's datasets that hold every image in memory, as one uint8 array of same-size
images: `CIFAR10` and `CIFAR100` (`N x 32 x 32 x 3`) and `SVHN` (`N x 3 x 32 x 32`). Their
`__getitem__` hands `Image.fromarray(row)` to the transform, an RGB image of the row's bytes;
hpuload serves the same bytes to its decoder (`ArraySource`) and runs the transform natively."""

from __future__ import annotations

import json


def images_of(dataset):
    """`(array [N, H, W, 3] uint8, labels)` of a torchvision in-memory dataset whose
    `__getitem__` is its own (a subclass that overrides it is a user's class, probed as
    such); None for any other."""
    try:
        import numpy as np
        from torchvision.datasets import CIFAR10, SVHN
    except ImportError:
        return None
    cls = type(dataset)
    if isinstance(dataset, CIFAR10) and cls.__getitem__ is CIFAR10.__getitem__:
        data, labels, channels_first = dataset.data, dataset.targets, False
    elif isinstance(dataset, SVHN) and cls.__getitem__ is SVHN.__getitem__:
        # `Image.fromarray(np.transpose(img, (1, 2, 0)))`.
        data, labels, channels_first = dataset.data, dataset.labels, True
    else:
        return None
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 4):
        return None
    if channels_first:
        data = data.transpose(0, 2, 3, 1)
    if data.shape[-1] != 3 or len(labels) != len(data):
        return None
    # The labels as `__getitem__` gives them: CIFAR's are ints, SVHN's `int(self.labels[i])`.
    return np.ascontiguousarray(data), [int(y) for y in labels]


def sized(pipeline: str, height: int, width: int) -> str:
    """`pipeline` with a `center_crop` to the images' own size first when it has no crop or
    resize (an evaluation transform, `ToTensor` and `Normalize`): every image is that size, so
    the crop keeps it whole and fixes the batch's shape."""
    spec = json.loads(pipeline)
    ops = spec.get("ops")
    geometry = {"random_resized_crop", "resize", "random_resize", "center_crop", "random_crop"}
    if ops is None or any(op.get("op") in geometry for op in ops):
        return pipeline
    spec["ops"] = [{"op": "center_crop", "size": [height, width]}, *ops]
    return json.dumps(spec)
