"""The user's collate_fn on hpuload's batches, without the copies torch would make.

A `collate_fn` receives one view of the pinned batch per sample (`SampleView`). Two things then
cost nothing that used to cost a copy of the whole batch:

- **default_collate's stack.** `torch.stack` of all of one batch's views, in order, along
  dimension 0 (what `default_collate` does with them) is the batch tensor itself: same values,
  same shape, no copy. Any other stack (a subset, another order, a second stack of the same
  views, `out=`) is torch's own.
- **torchvision v2's MixUp and CutMix** on a float32 batch hpuload made (the result of that
  stack, or a batch the loader yielded) blend into a new tensor in one pass, in Rust without
  the GIL and without torch's intra-op threads (whose spinning took the loader's cores),
  instead of torchvision's several passes: MixUp's `roll`, two multiplies and an add, and
  CutMix's `roll` and `clone`. The parameters are the transform's own draws (its
  `make_params`, torch's RNG), each element is computed with the same operations in float32,
  so results are bit-identical to torchvision's (tested), and the input is never modified.
  Every other input (a tensor hpuload did not make, another dtype, a video) goes to
  torchvision's own code.

The second replaces the two classes' per-input method, once per process, when hpuload hands
out its first batch (only where the class defines that method as torchvision 0.16 to 0.29
do); the replacement changes nothing for tensors hpuload did not make.
"""

from __future__ import annotations

import sys
import threading
import weakref

import torch

from . import _hpuload

_local = threading.local()

#: Image batches hpuload made (pinned batches and their aliases), for the MixUp/CutMix fast path:
#: id -> weak reference (a tensor's `==` is elementwise, so a WeakSet cannot hold them).
_ours: dict[int, weakref.ref] = {}


def _remember(images: torch.Tensor) -> None:
    key = id(images)
    _ours[key] = weakref.ref(images, lambda _, key=key: _ours.pop(key, None))


def _made_here(inpt) -> bool:
    ref = _ours.get(id(inpt))
    return ref is not None and ref() is inpt


class SampleView(torch.Tensor):
    """One sample of a batch, as a `collate_fn` receives it: a view of the pinned batch. It is
    a `torch.Tensor` in every respect (every operation on it gives plain tensors), except that
    stacking all of its batch's samples in order gives the batch without a copy."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.stack:
            whole = _whole_batch(args, kwargs)
            if whole is not None:
                return whole
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)


class _Batch:
    """A batch whose views the running collate_fn holds."""

    __slots__ = ("images", "views", "stacked")

    def __init__(self, images: torch.Tensor):
        self.images = images
        self.views = [v.as_subclass(SampleView) for v in images.unbind(0)]
        self.stacked = False


def _whole_batch(args, kwargs) -> torch.Tensor | None:
    """A batch tensor, when this stack is of all of one of the running collate's batches'
    views in order (the first such stack only: a second one gets a copy of its own, as from
    torch)."""
    batches = getattr(_local, "batch", None)
    if not batches:
        return None
    tensors = args[0] if args else kwargs.get("tensors")
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if kwargs.get("out") is not None or dim != 0 or not isinstance(tensors, (list, tuple)):
        return None
    for batch in batches:
        views = batch.views
        if batch.stacked or len(tensors) != len(views) or any(t is not v for t, v in zip(tensors, views)):
            continue
        batch.stacked = True
        return batch.images
    return None


def rows_of(values: torch.Tensor) -> list:
    """`values`' rows (a batch-first tensor a dataset's batched function made, split per
    sample as `datasets` splits it), as views that a `collate_fn`'s stack of all of them, in
    order, gives back as `values` itself, without a copy (inside `call` only; elsewhere the
    plain rows)."""
    batches = getattr(_local, "batch", None)
    if batches is None or values.dim() == 0:
        return list(values)
    batch = _Batch(values)
    batches.append(batch)
    return batch.views


def call(collate_fn, images: "torch.Tensor | list[torch.Tensor]", samples) -> object:
    """`collate_fn(samples(views))`, where `views` are `images`' samples (`SampleView`s) and
    `samples` builds the list the user's function receives from them. `images` may be a list
    of batches (a sample's several images, one batch each): `views` is then a list of each
    one's samples."""
    install()
    if "timm.data.mixup" in sys.modules:
        from . import _timm_mix

        _timm_mix.install()
    several = isinstance(images, list)
    batches = [_Batch(t) for t in (images if several else [images])]
    for t in images if several else [images]:
        _remember(t)
    previous = getattr(_local, "batch", None)
    _local.batch = batches
    try:
        return collate_fn(samples([b.views for b in batches] if several else batches[0].views))
    finally:
        _local.batch = previous


def running() -> "_Batch | None":
    """The batch whose views the collate_fn running on this thread received, if any (the
    first, where it received several)."""
    batches = getattr(_local, "batch", None)
    return batches[0] if batches else None


def mark(images: torch.Tensor) -> torch.Tensor:
    """Records `images` as a batch hpuload made (for MixUp/CutMix applied after the loader)."""
    install()
    _remember(images)
    return images


def _fast(inpt) -> bool:
    """A float32 NCHW batch that hpuload made, contiguous on the CPU."""
    return (
        type(inpt) is torch.Tensor
        and _made_here(inpt)
        and inpt.ndim == 4
        and inpt.dtype == torch.float32
        and inpt.device.type == "cpu"
        and inpt.is_contiguous()
    )


def mixup(x: torch.Tensor, lam: float) -> torch.Tensor:
    """torchvision's `x.roll(1, 0).mul_(1.0 - lam).add_(x.mul(lam))` of a contiguous float32
    CPU batch, in one pass (`hpuload::augment::mix::mixup`, without the GIL): sample i is
    `x[i - 1] * (1 - lam) + x[i] * lam`, each product rounded to float32, then the sum."""
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    _hpuload.mixup_f32(out.data_ptr(), x.data_ptr(), x.numel(), x[0].numel(), float(lam))
    return out


def cutmix(x: torch.Tensor, box: tuple[int, int, int, int]) -> torch.Tensor:
    """torchvision's CutMix of a contiguous float32 NCHW CPU batch, in one pass: a copy of `x`
    whose `box` in sample i comes from sample i - 1 (the last for the first)."""
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    _hpuload.cutmix_f32(out.data_ptr(), x.data_ptr(), list(x.shape), tuple(int(v) for v in box))
    return out


_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Routes torchvision v2 MixUp and CutMix of hpuload's batches to `mixup`/`cutmix` (once
    per process; nothing when torchvision is absent or its classes are not the shape this was
    written against, torchvision 0.16 to 0.29: then torchvision's own code runs)."""
    global _installed
    if _installed:
        return
    with _install_lock:
        if _installed:
            return
        _installed = True
        try:
            from torchvision.transforms import v2
        except ImportError:
            return
        for cls, blend in ((getattr(v2, "MixUp", None), _mixup_images), (getattr(v2, "CutMix", None), _cutmix_images)):
            if cls is None:
                continue
            # torchvision renamed `_transform` to `transform` in 0.21.
            name = "transform" if "transform" in cls.__dict__ else "_transform"
            original = cls.__dict__.get(name)
            if original is None or getattr(original, "_hpuload", False):
                continue
            setattr(cls, name, _routed(original, blend))


def _routed(original, blend):
    def method(self, inpt, params):
        if inpt is not params.get("labels") and _fast(inpt):
            self._check_image_or_video(inpt, batch_size=params["batch_size"])
            return blend(inpt, params)
        return original(self, inpt, params)

    method._hpuload = True
    method.__name__ = original.__name__
    method.__qualname__ = original.__qualname__
    method.__doc__ = original.__doc__
    return method


def _mixup_images(inpt, params):
    return mixup(inpt, params["lam"])


def _cutmix_images(inpt, params):
    return cutmix(inpt, params["box"])
