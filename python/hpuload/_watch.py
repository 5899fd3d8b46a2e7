"""The user's transform, watched: a fast-path loader re-translates it at each epoch's start,
so a transform reassigned or edited after the loader was built is never ignored."""

from __future__ import annotations

from ._fallback import FallbackReason, Unfit
from ._transforms import Unsupported


class TransformWatch:
    """The user's transform that a fast-path loader runs as a translated pipeline, watched so
    that a change is never ignored. Training code reassigns it after the loader is built
    (DeiT III's `data_loader.dataset.transform = new_data_aug_generator(args)`, progressive
    resizing, curricula) or edits it in place (`transform.transforms[0].size = 160`); torch's
    loader runs whatever the dataset holds when its workers start, that is from the next
    epoch. So at each epoch's start the transform the dataset holds now is translated again,
    and a different pipeline rebuilds the loader (or sends it to torch's DataLoader when
    hpuload cannot run the new one); a reassignment during an epoch is warned about and
    honoured from the next one, as torch's worker processes do.

    `read()` gives the transform object now, `translate()` the `(pipeline JSON, dtype)` of the
    transform now, raising `Unsupported` or `_Unfit` for one hpuload cannot run."""

    def __init__(self, read, translate_now):
        self.read = read
        self.translate = translate_now
        self.obj = read()
        #: Warned about a reassignment during the epoch (the object that was warned about).
        self.warned: object | None = None
        try:
            self.translated = translate_now()
        except Unsupported as e:
            raise Unfit(str(e), FallbackReason.TRANSFORM) from e

    def changed_during_epoch(self) -> object | None:
        """The new transform object when it was reassigned since the epoch began and not yet
        warned about, else None."""
        now = self.read()
        if _same(now, self.obj) or _same(now, self.warned):
            return None
        self.warned = now
        return now


def _same(a, b) -> bool:
    """Whether two transforms read are the same objects (tuples of them: element by element,
    the transforms a Dataset's code applies itself)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(x is y for x, y in zip(a, b))
    return a is b


def describe(transform) -> str:
    """A transform in one line: `Compose([RandomResizedCrop, Grayscale, ToTensor])`."""
    from ._transforms import _is

    if isinstance(transform, tuple):
        return " then ".join(describe(t) for t in transform if t is not None)
    if _is(transform, "Compose"):
        inner = ", ".join(describe(t) for t in transform.transforms)
        return f"{type(transform).__name__}([{inner}])"
    return type(transform).__name__
