"""timm's `FastCollateMixup` (the collate_fn timm's train.py uses with `--mixup`/`--cutmix` and
its prefetcher) on hpuload's uint8 batches, in one native pass per output sample.

Its three per-mode methods (`_mix_batch_collate`, `_mix_elem_collate`, `_mix_pair_collate`)
draw their parameters (`_params_per_batch` / `_params_per_elem`, `cutmix_bbox_and_lam`: NumPy's
generator) and then blend, cut and add each sample into the zeroed uint8 output in several
torch passes. `install` replaces them, once per process, with versions that make the same
draws in the same order and hand the pixel work to `_hpuload.mix_u8` (`augment::mix::mix_u8`,
without the GIL): a blend as `x.float() * lam + y.float() * (1 - lam)` in float32, rounded half
to even, a cut as a copy with the other sample's box, each added into the output as timm adds
it. It does so only after the replacement gave timm's own results on probe batches in every
mode (outputs, returned `lam`, NumPy's generator state after), and only for a batch hpuload
made (the views a collate_fn receives, in order, uint8): anything else goes to timm's code.
Unlike timm's pair and half modes, the batch's samples are not modified in place (nothing
reads them after the collate).
"""

from __future__ import annotations

import sys
import threading

import torch

from . import _collate, _hpuload

_lock = threading.Lock()
#: Whether `install` has looked (timm's mixup module was loaded), and whether it replaced.
_state = {"looked": False, "installed": False}


def _whole(output, batch) -> torch.Tensor | None:
    """The uint8 batch tensor whose views `batch`'s images are, in order, when `output` can
    take its samples; else None."""
    running = _collate.running()
    if running is None or len(batch) != len(running.views):
        return None
    images = running.images
    if not (
        images.dtype == torch.uint8
        and images.ndim == 4
        and images.is_contiguous()
        and type(output) is torch.Tensor
        and output.dtype == torch.uint8
        and output.is_contiguous()
        and output.device.type == "cpu"
        and tuple(output.shape[1:]) == tuple(images.shape[1:])
    ):
        return None
    try:
        if any(b[0] is not v for b, v in zip(batch, running.views)):
            return None
    except (TypeError, IndexError, KeyError):
        return None
    return images


_NONE = (0, 0, 0, 0)


def _run(output, images, jobs) -> None:
    _hpuload.mix_u8(output.data_ptr(), len(output), images.data_ptr(), list(images.shape), jobs)


def _job(row, other, lam, box=None):
    """The job for output sample `row` from itself and sample `other`: itself at `lam` 1 (a
    cut's corrected `lam` is 1 only for an empty box), else `box` from `other`, else the blend."""
    if lam == 1.0:
        return (row, 0, row, row, 0.0, 0.0, _NONE)
    if box is not None:
        return (row, 2, row, other, 0.0, 0.0, box)
    return (row, 1, row, other, float(lam), float(1 - lam), _NONE)


def _cut(module, self, output, lam):
    (yl, yh, xl, xh), lam = module.cutmix_bbox_and_lam(
        output.shape, lam, ratio_minmax=self.cutmix_minmax, correct_lam=self.correct_lam
    )
    return (int(xl), int(yl), int(xh), int(yh)), lam


def _batch_method(module, original):
    def _mix_batch_collate(self, output, batch):
        images = _whole(output, batch)
        if images is None:
            return original(self, output, batch)
        n = len(batch)
        lam, use_cutmix = self._params_per_batch()
        box = None
        if use_cutmix:
            box, lam = _cut(module, self, output, lam)
        _run(output, images, [_job(i, n - i - 1, lam, box) for i in range(n)])
        return lam

    return _mix_batch_collate


def _elem_method(module, original):
    import numpy as np

    def _mix_elem_collate(self, output, batch, half=False):
        images = _whole(output, batch)
        if images is None:
            return original(self, output, batch, half=half)
        n = len(batch)
        count = n // 2 if half else n
        assert len(output) == count
        lam_batch, use_cutmix = self._params_per_elem(count)
        jobs = []
        for i in range(count):
            lam, box = lam_batch[i], None
            if lam != 1.0 and use_cutmix[i]:
                box, lam = _cut(module, self, output, lam)
                lam_batch[i] = lam
            jobs.append(_job(i, n - i - 1, lam, box))
        _run(output, images, jobs)
        if half:
            lam_batch = np.concatenate((lam_batch, np.ones(count, dtype=lam_batch.dtype)))
        return torch.tensor(lam_batch).unsqueeze(1)

    return _mix_elem_collate


def _pair_method(module, original):
    import numpy as np

    def _mix_pair_collate(self, output, batch):
        images = _whole(output, batch)
        if images is None:
            return original(self, output, batch)
        n = len(batch)
        lam_batch, use_cutmix = self._params_per_elem(n // 2)
        jobs = []
        for i in range(n // 2):
            j = n - i - 1
            lam, box = lam_batch[i], None
            assert 0 <= lam <= 1.0
            if lam < 1.0 and use_cutmix[i]:
                box, lam = _cut(module, self, output, lam)
                lam_batch[i] = lam
            jobs += [_job(i, j, lam, box), _job(j, i, lam, box)]
        _run(output, images, jobs)
        lam_batch = np.concatenate((lam_batch, lam_batch[::-1]))
        return torch.tensor(lam_batch).unsqueeze(1)

    return _mix_pair_collate


_MAKERS = {
    "_mix_batch_collate": _batch_method,
    "_mix_elem_collate": _elem_method,
    "_mix_pair_collate": _pair_method,
}


def _behaves(cls, replaced: dict) -> bool:
    """Whether the replacements give timm's results on probe batches in every mode."""
    import numpy as np

    g = torch.Generator().manual_seed(0)
    for mode in ("batch", "pair", "elem", "half"):
        for seed in range(4):
            images = torch.randint(0, 256, (6, 3, 11, 13), dtype=torch.uint8, generator=g)
            mix = cls(mixup_alpha=0.8, cutmix_alpha=1.0, mode=mode, num_classes=5, label_smoothing=0.1)
            results = []
            for methods in (None, replaced):
                saved = {}
                np.random.seed(seed)
                try:
                    if methods is not None:
                        for name, fn in methods.items():
                            saved[name] = cls.__dict__[name]
                            setattr(cls, name, fn)
                    # As the loader calls a collate_fn: on the views of a batch of its own.
                    out = _collate.call(mix, images.clone(), lambda views: [(v, k % 5) for k, v in enumerate(views)])
                except Exception as e:  # timm's own failure is an answer too
                    out = ("raised", type(e))
                finally:
                    for name, fn in saved.items():
                        setattr(cls, name, fn)
                results.append((out, np.random.get_state()[1].copy()))
            (a, sa), (b, sb) = results
            if not (_same(a, b) and (sa == sb).all()):
                return False
    return True


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
        )
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def install() -> bool:
    """Puts the native methods in timm's `FastCollateMixup` (once per process, when timm's
    mixup module is loaded and they give its results on the probes); whether they are in."""
    if _state["looked"]:
        return _state["installed"]
    module = sys.modules.get("timm.data.mixup")
    if module is None:
        return False
    with _lock:
        if _state["looked"]:
            return _state["installed"]
        _state["looked"] = True
        cls = getattr(module, "FastCollateMixup", None)
        originals = {name: (cls.__dict__.get(name) if isinstance(cls, type) else None) for name in _MAKERS}
        if any(fn is None for fn in originals.values()) or not callable(getattr(module, "cutmix_bbox_and_lam", None)):
            return False
        replaced = {name: make(module, originals[name]) for name, make in _MAKERS.items()}
        for name, fn in replaced.items():
            fn._hpuload, fn.__wrapped__ = True, originals[name]
        import numpy as np

        state = np.random.get_state()  # the probes seed NumPy's generator
        try:
            ok = _behaves(cls, replaced)
        except Exception:  # timm of another shape: its own code runs
            ok = False
        finally:
            np.random.set_state(state)
        if ok:
            for name, fn in replaced.items():
                setattr(cls, name, fn)
        _state["installed"] = ok
        return ok
