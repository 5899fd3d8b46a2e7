"""Samples of several images, each read from a column of its own (diffusers' ControlNet table:
an image and its conditioning image, each through a transform of its own) or from files of its
own (DreamBooth's instance and class images, a Dataset's dict of two opened files): one Rust
loader per image, built from the same options but for the column, the pipeline and the dtype
(`_options.MoreImages`), started with the same epoch and order and read batch by batch in step.

The loaders share the seed, so their orders and their replacements of skipped samples are the
same; each image of a sample draws its random plans from a seed of its own
(`image_of_sample`), so two images put through one random transform get independent draws, as
torch's loader gives them (one generator drawn in turn), except where every sample of a batch
draws from the batch's key (`draws_per_batch`: a function that hands the stacked images of a
batch to one random transform, `_hf_joint`): then its images share the batch's draws too. A sample one loader replaces and
another does not (one column's image is damaged, the other's is not) is named by the loader
that skipped it, and its slot is listed in `Batch.own`: its images cannot be paired from the
loaders' batches, so the caller makes that sample with the dataset itself."""

from __future__ import annotations

import dataclasses
import json

import torch

from . import _hpuload


def make(options):
    """The loader `options` describe: a Rust loader, or `Cores` where each sample holds more
    images (`options.more`)."""
    if not options.more:
        return _hpuload.Loader(options)
    return Cores(options)


class Batch:
    """A batch of the first column's loader, with the other columns' images (`more`, one
    torch tensor each) and `own`: slot -> the dataset index whose sample the caller makes itself."""

    __slots__ = ("images", "labels", "indices", "valid", "step", "skipped", "more", "own")

    def __init__(self, first, others: list, columns: list[str]):
        self.images, self.labels, self.valid, self.step = first.images, first.labels, first.valid, first.step
        self.indices = list(first.indices)
        # Each skip of a table's image names the column whose image it was.
        self.skipped = [
            (index, path if column is None else f"{path}, column {column!r}", reason, message)
            for batch, column in zip([first, *others], columns)
            for index, path, reason, message in batch.skipped
        ]
        self.more = [torch.from_dlpack(other.images) for other in others]
        failed = {index for index, *_ in self.skipped}
        self.own: dict[int, list[int]] = {}
        for slot, index in enumerate(self.indices):
            held = [index] + [int(other.indices[slot]) for other in others]
            if len(set(held)) > 1:
                # The candidates whose images one loader read (not the originals it skipped).
                self.own[slot] = [i for i in dict.fromkeys(held) if i not in failed] or held


def made_by_dataset(own: dict[int, list[int]], make, what: str) -> dict:
    """For each slot of `own` (`Batch.own`: slot -> candidate indices), `(index, made)` of the
    first candidate for which `make(slot, index)` gives something (the dataset's own sample; it
    raises for a damaged image, or returns None for one it cannot place); a slot none of
    whose candidates can be made raises, naming each candidate's reason. `what` names the
    images, for the message."""
    made = {}
    for slot, candidates in own.items():
        errors = []
        for index in candidates:
            try:
                out = make(slot, index)
            except Exception as e:  # noqa: BLE001 - a damaged image: named below if all fail
                errors.append(f"index {index}: {type(e).__name__}: {e}")
                continue
            if out is None:
                errors.append(f"index {index}: the dataset's own images are not the batch's shape")
                continue
            made[slot] = (index, out)
            break
        else:
            raise RuntimeError(
                f"hpuload: the loaders of {what} skipped different samples in one slot, and the dataset could not "
                f"make any of them itself ({'; '.join(errors)})"
            )
    return made


class Cores:
    """The loaders of a sample's images, read in step; see the module docstring. Everything a
    single loader answers that this does not (`views`, `output`, `pinned`, `classes`, ...) is
    the first column's."""

    def __init__(self, options):
        more = options.more
        resume = [options.resume] + [None] * len(more)
        if options.resume is not None:
            saved = json.loads(options.resume).get("more_images")
            if saved is None or len(saved) != len(more):
                raise ValueError(
                    f"state_dict holds the state of {0 if saved is None else len(saved)} more images per sample, "
                    f"where this loader reads {len(more)}"
                )
            resume[1:] = [json.dumps(s) for s in saved]
        self.columns = [getattr(options.source, "image_column", None), *(m.image_column for m in more)]
        self.first = _hpuload.Loader(dataclasses.replace(options, resume=resume[0]))
        self.others: list = []
        try:
            for k, m in enumerate(more, start=1):
                column = m.source if m.source is not None else dataclasses.replace(options.source, image_column=m.image_column)
                self.others.append(
                    _hpuload.Loader(
                        dataclasses.replace(
                            options,
                            source=column,
                            pipeline=m.pipeline,
                            dtype=m.dtype,
                            image_of_sample=0 if options.draws_per_batch else k,
                            more=(),
                            resume=resume[k],
                        )
                    )
                )
        except BaseException:
            self.stop()
            raise
        sizes = {core.dataset_len for core in self.loaders}
        if len(sizes) != 1:  # pragma: no cover - one table, read whole by each
            self.stop()
            raise ValueError(f"the image columns' loaders count {sorted(sizes)} samples")

    @property
    def loaders(self) -> list:
        return [self.first, *self.others]

    def __getattr__(self, name: str):
        return getattr(self.first, name)

    def __len__(self) -> int:
        return len(self.first)

    def start_epoch(self, epoch: int, order) -> None:
        for core in self.loaders:
            core.start_epoch(epoch, order)

    def next_batch(self, timeout):
        first = self.first.next_batch(timeout)
        others = [core.next_batch(timeout) for core in self.others]
        if first is None or any(o is None for o in others):
            if first is not None or any(o is not None for o in others):  # pragma: no cover - same sampler
                raise RuntimeError("hpuload: the image columns' loaders ended their epochs at different batches")
            return None
        return Batch(first, others, self.columns)

    def stop(self) -> None:
        for core in self.loaders:
            core.stop()

    def state(self) -> str:
        """The first loader's state, with the others' under `more_images`."""
        state = json.loads(self.first.state())
        state["more_images"] = [json.loads(core.state()) for core in self.others]
        return json.dumps(state)

    def report(self) -> str:
        """The first loader's report, with the others' under `more_images`."""
        report = json.loads(self.first.report())
        report["more_images"] = [json.loads(core.report()) for core in self.others]
        return json.dumps(report)
