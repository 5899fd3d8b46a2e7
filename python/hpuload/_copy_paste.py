"""The detection reference's copy-paste collate (`--use-copypaste`) in one native pass per image.

The reference's `train.py` collates each batch with `copypaste_collate_fn`, which builds its
own `transforms.SimpleCopyPaste` and calls it on the batch; that class's `forward` calls the
module's `_copy_paste(image, target, paste_image, paste_target, blending,
resize_interpolation)` for each image and the one before it. At 1024x1024 (its `lsj`
augmentation) that function makes a dozen full-size tensors an image, in the thread that
iterates: 25 ms an image here, against under 2 ms for everything hpuload did before it.

`adopt(collate_fn)` looks, once per process, for such a module among the names the
`collate_fn` uses (a class or an instance whose module defines `_copy_paste`), calls that
function and `_fast` on probe images under a dozen seeds of torch's generator and, only when
every result is equal (pixels, masks, boxes, labels, areas, `iscrowd`, dtypes, and the
generator's state after), puts `_fast` in its place in that module. `_fast` draws the objects
to paste exactly as the reference does (one `torch.randint` and `unique`), does the per-pixel
work in Rust without the GIL (`hpuload::augment::paste`: the paste mask and its 5x5 growth, the
pixels, the masks cleared, their sums and boxes), and the rest (selections, concatenations,
the removal of degenerate boxes) with the reference's own torch operations; inputs it does not
take (another dtype, a device, images of two sizes, which the reference resizes) go to the
original function, which `_fast` keeps as `__wrapped__`.
"""

from __future__ import annotations

import inspect
import sys
import threading
import types
import weakref

import torch

from . import _hpuload

_lock = threading.Lock()
#: `_copy_paste` functions that gave something else than `_fast` on the probes: left alone.
_refused: weakref.WeakSet = weakref.WeakSet()


def _takes(image, target, paste_image, paste_target) -> bool:
    """Inputs `_fast` computes exactly as the reference: float32 CHW images of one size (3 or
    more pixels on each side, which the reference's blur needs) and uint8 masks of that size,
    all on the CPU."""
    try:
        masks, paste_masks = target["masks"], paste_target["masks"]
        boxes, paste_boxes = target["boxes"], paste_target["boxes"]
        return (
            all(
                type(t) is torch.Tensor and t.device.type == "cpu"
                for t in (image, paste_image, masks, paste_masks, boxes, paste_boxes)
            )
            and image.dtype == paste_image.dtype == torch.float32
            and image.ndim == 3
            and image.shape == paste_image.shape
            and image.shape[-2] >= 3
            and image.shape[-1] >= 3
            and masks.dtype == paste_masks.dtype == torch.uint8
            and masks.ndim == paste_masks.ndim == 3
            and masks.shape[-2:] == image.shape[-2:] == paste_masks.shape[-2:]
        )
    except (KeyError, TypeError, AttributeError):
        return False


#: The parameters the reference's `_copy_paste` starts with (`resize_interpolation` follows).
_PARAMETERS = ("image", "target", "paste_image", "paste_target", "blending")


def _fast(original):
    """`original` (a module's `_copy_paste`) with the per-pixel work native for the inputs
    `_takes` accepts."""

    signature = inspect.signature(original)

    def _copy_paste(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        image, target, paste_image, paste_target = (a[k] for k in _PARAMETERS[:4])
        blending = a["blending"]
        if not _takes(image, target, paste_image, paste_target):
            return original(*args, **kwargs)
        num_masks = len(paste_target["masks"])
        if num_masks < 1:
            return image, target
        chosen = torch.randint(0, num_masks, (num_masks,), device=paste_image.device)
        chosen = torch.unique(chosen).to(torch.long)
        paste_boxes = paste_target["boxes"][chosen]
        paste_labels = paste_target["labels"][chosen]
        image_c, donor = image.contiguous(), paste_image.contiguous()
        masks, donor_masks = target["masks"].contiguous(), paste_target["masks"].contiguous()
        out = torch.empty_like(image_c, memory_format=torch.contiguous_format)
        count, picked = len(masks), chosen.tolist()
        out_masks = torch.empty((count + len(picked), *masks.shape[1:]), dtype=torch.uint8)
        kept, pasted = _hpuload.copy_paste(
            out.data_ptr(),
            image_c.data_ptr(),
            donor.data_ptr(),
            tuple(image_c.shape),
            donor_masks.data_ptr(),
            len(donor_masks),
            picked,
            masks.data_ptr(),
            count,
            out_masks.data_ptr(),
            bool(blending),
        )
        nonempty = torch.zeros(count, dtype=torch.bool)
        nonempty[torch.tensor([i for i, _ in kept], dtype=torch.long)] = True
        out_target = {k: v for k, v in target.items()}
        # The kept masks, then the pasted ones: the reference's `cat`, written in place (a view
        # of the first planes when some masks were emptied).
        out_target["masks"] = out_masks[: len(kept) + len(picked)]
        boxes = torch.tensor([b for _, (_, b) in kept], dtype=torch.float).reshape(-1, 4)
        out_target["boxes"] = torch.cat([boxes, paste_boxes])
        out_target["labels"] = torch.cat([target["labels"][nonempty], paste_labels])
        if "area" in target:
            sums = [s for _, (s, _) in kept] + [s for s, _ in pasted]
            out_target["area"] = torch.tensor(sums, dtype=torch.int64).to(torch.float32)
        if "iscrowd" in target and "iscrowd" in paste_target:
            if len(target["iscrowd"]) == len(nonempty):
                iscrowd = target["iscrowd"][nonempty]
                out_target["iscrowd"] = torch.cat([iscrowd, paste_target["iscrowd"][chosen]])
        boxes = out_target["boxes"]
        degenerate = boxes[:, 2:] <= boxes[:, :2]
        if degenerate.any():
            valid = ~degenerate.any(dim=1)
            out_target["boxes"] = boxes[valid]
            out_target["masks"] = out_target["masks"][valid]
            out_target["labels"] = out_target["labels"][valid]
            if "area" in out_target:
                out_target["area"] = out_target["area"][valid]
            if "iscrowd" in out_target and len(out_target["iscrowd"]) == len(valid):
                out_target["iscrowd"] = out_target["iscrowd"][valid]
        return out, out_target

    _copy_paste._hpuload = True
    _copy_paste.__wrapped__ = original
    _copy_paste.__doc__ = original.__doc__
    return _copy_paste


def _candidates(collate_fn):
    """Modules defining a `_copy_paste` function that `collate_fn` reaches through the names
    its code uses (a class from such a module, or an instance of one)."""
    fn = getattr(collate_fn, "func", collate_fn)  # functools.partial
    if not hasattr(fn, "__code__") and callable(fn):
        fn = getattr(type(fn), "__call__", None)
    code, names = getattr(fn, "__code__", None), getattr(fn, "__globals__", None)
    if code is None or names is None:
        return []
    found = []
    for name in code.co_names:
        obj = names.get(name)
        if isinstance(obj, types.ModuleType):  # `transforms.SimpleCopyPaste(...)`
            module = obj
        else:
            cls = obj if isinstance(obj, type) else type(obj)
            if not isinstance(getattr(cls, "forward", None), types.FunctionType):
                continue
            module = sys.modules.get(getattr(cls, "__module__", ""), None)
        if isinstance(getattr(module, "_copy_paste", None), types.FunctionType) and module not in found:
            found.append(module)
    return found


def _probe(seed: int, size: tuple[int, int], counts: tuple[int, int]):
    """Two images of `size` with `counts` masks each (scattered pixels, blocks, an empty mask
    and one of value 3), with the targets the reference's lsj preset gives."""
    g = torch.Generator().manual_seed(seed)
    h, w = size
    pair = []
    for n in counts:
        image = torch.rand((3, h, w), generator=g)
        masks = (torch.rand((n, h, w), generator=g) < 0.02).to(torch.uint8)
        for k in range(n):
            y, x = int(torch.randint(0, h - 2, (1,), generator=g)), int(torch.randint(0, w - 2, (1,), generator=g))
            masks[k, y : y + 1 + k % 5, x : x + 3] = 1 + 2 * (k % 2)
        if n > 2:
            masks[1] = 0
        boxes = torch.rand((n, 4), generator=g) * min(h, w)
        boxes[:, 2:] += boxes[:, :2]
        target = {
            "boxes": boxes,
            "labels": torch.randint(1, 91, (n,), generator=g),
            "masks": masks,
            "image_id": seed,
            "area": torch.rand(n, generator=g) * 100,
            "iscrowd": torch.zeros(n, dtype=torch.int64),
        }
        pair.append((image, target))
    return pair


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(a, b)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _behaves(original, fast) -> bool:
    """Whether `fast` gives what `original` gives on the probes, drawing the same numbers."""
    cases = [
        (seed, size, counts, blending)
        for seed, (size, counts) in enumerate(
            [((37, 53), (4, 5)), ((64, 48), (0, 3)), ((5, 3), (2, 1)), ((40, 40), (3, 0)), ((96, 80), (6, 6))]
        )
        for blending in (True, False)
    ] + [(100 + s, (33, 29), (3, 4), True) for s in range(3)]
    for seed, size, counts, blending in cases:
        (image, target), (paste_image, paste_target) = _probe(seed, size, counts)
        results, states = [], []
        for fn in (original, fast):
            with torch.random.fork_rng(devices=[]):
                torch.default_generator.manual_seed(seed)  # the CPU generator alone: a device one is the user's
                try:
                    results.append(fn(image, dict(target), paste_image, dict(paste_target), blending))
                except Exception as e:  # the reference's own failure is an answer too
                    results.append(("raised", type(e)))
                states.append(torch.get_rng_state())
        if not (_same(results[0], results[1]) and torch.equal(states[0], states[1])):
            return False
    return True


def adopt(collate_fn) -> bool:
    """Replaces the `_copy_paste` of each copy-paste module `collate_fn` uses by `_fast`, when
    the two give the same results on the probes (once per module and function); whether one
    is in place."""
    try:
        modules = _candidates(collate_fn)
    except Exception:  # a collate_fn of a shape this does not read: it runs as it is
        return False
    adopted = False
    for module in modules:
        current = module._copy_paste
        if getattr(current, "_hpuload", False):
            adopted = True
            continue
        if current in _refused:
            continue
        with _lock:
            if module._copy_paste is not current:  # another thread got here first
                adopted = adopted or getattr(module._copy_paste, "_hpuload", False)
                continue
            try:
                names = tuple(inspect.signature(current).parameters)[: len(_PARAMETERS)]
            except (TypeError, ValueError):
                names = ()
            fast = _fast(current) if names == _PARAMETERS else None
            if fast is not None and _behaves(current, fast):
                module._copy_paste = fast
                adopted = True
            else:
                _refused.add(current)
    return adopted
