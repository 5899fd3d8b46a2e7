"""Drop-in replacements for `torch.utils.data.DataLoader` and Habana's `HabanaDataLoader`.

Change the import line and keep the loop::

    from hpuload.torch import DataLoader          # was: from torch.utils.data import DataLoader

    loader = DataLoader(ImageFolder(root, transform), batch_size=256, shuffle=True, num_workers=8)
    for images, labels in loader:                  # float32 NCHW and int64, as torchvision gives
        ...

hpuload takes a torchvision `ImageFolder` whose transform it implements (RandomResizedCrop,
Resize, CenterCrop, RandomHorizontalFlip, ToTensor / PILToTensor / ToImage + ToDtype,
Normalize; v1 or v2), a folder path with `pipeline=`, or an `hpuload.ImageFolder` /
`hpuload.Manifest`. Anything else goes to torch's own DataLoader, with the same arguments and
one warning that says why.
"""

from __future__ import annotations

import inspect
import json
import os
import warnings
from typing import Any, Iterator

import torch
import torch.utils.data as tud

from . import _hpuload
from ._transforms import Unsupported, translate
from .sources import ImageFolder as _HpuFolder
from .sources import _pipeline
from .sources import Manifest as _HpuManifest
from .sources import WebDataset as _HpuWebDataset

__all__ = ["DataLoader", "HabanaDataLoader", "FallbackWarning", "PinningWarning", "SkippedSampleWarning"]

# Extensions the decoders read (content decides the format; these are what we accept by name).
_DECODABLE = (".jpg", ".jpeg", ".png", ".webp")

# hpuload's own keyword arguments, on top of torch's.
_OWN = ("backend", "on_error", "error_budget", "seed", "pipeline", "output_dtype", "layout")


class FallbackWarning(UserWarning):
    """hpuload handed the arguments to torch's DataLoader (the message says why)."""


class PinningWarning(UserWarning):
    """The batch buffers are pageable: page-locking them was refused (the message says how to
    allow it)."""


class SkippedSampleWarning(UserWarning):
    """A sample could not be loaded and was replaced (the message names the file and why)."""


class _Unfit(Exception):
    """The arguments are outside what hpuload's fast path takes; the message says why."""


def _torch_signature():
    return inspect.signature(tud.DataLoader.__init__)


def _fallback(reason: str, dataset, args, kwargs, stacklevel: int = 3):
    warnings.warn(
        f"hpuload: using torch.utils.data.DataLoader instead: {reason}",
        FallbackWarning,
        stacklevel=stacklevel,
    )
    kwargs = {k: v for k, v in kwargs.items() if k not in _OWN}
    return tud.DataLoader(dataset, *args, **kwargs)


def _dataset_source(dataset, pipeline):
    """`(source kwargs for the Rust loader, pipeline JSON, dtype, classes)` or `_Unfit`."""
    if isinstance(dataset, (str, os.PathLike)):
        if pipeline is None:
            raise TypeError("a folder path as dataset needs pipeline= (e.g. 'resnet50_train')")
        dataset = _HpuFolder(dataset, pipeline=pipeline)
    if isinstance(dataset, (_HpuFolder, _HpuManifest, _HpuWebDataset)):
        return dataset._source_kwargs(), dataset._pipeline_json(), "f32", None
    try:
        from torchvision.datasets import DatasetFolder, ImageFolder
        from torchvision.datasets.folder import default_loader
    except ImportError as e:  # pragma: no cover - torchvision is a requirement of the fast path
        raise _Unfit(f"torchvision is not importable ({e})") from e
    if not isinstance(dataset, ImageFolder):
        raise _Unfit(f"dataset is a {type(dataset).__name__}, not a torchvision ImageFolder")
    if type(dataset).__getitem__ is not DatasetFolder.__getitem__:
        raise _Unfit(f"{type(dataset).__name__} overrides __getitem__")
    if dataset.loader is not default_loader:
        raise _Unfit("the ImageFolder has a custom loader")
    if dataset.target_transform is not None:
        raise _Unfit("the ImageFolder has a target_transform")
    odd = [p for p, _ in dataset.samples if not p.lower().endswith(_DECODABLE)]
    if odd:
        raise _Unfit(f"{len(odd)} files are not JPEG, PNG or WebP (first: {odd[0]})")
    if pipeline is not None:
        pipe, dtype = _pipeline(pipeline), "f32"
    else:
        try:
            pipe, dtype = translate(dataset.transform)
        except Unsupported as e:
            raise _Unfit(str(e)) from e
    samples = [(p, int(t)) for p, t in dataset.samples]
    return {"samples": samples, "classes": list(dataset.classes)}, pipe, dtype, dataset.classes


def _dist_rank_world():
    """(rank, world) from torch.distributed when initialized, else the launcher's env vars."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return 0, 1


def _seed_from(generator) -> int:
    """A seed like torch's loader draws one: from `generator`, else torch's global RNG (so
    `torch.manual_seed` makes runs repeatable)."""
    if generator is not None:
        return int(generator.initial_seed()) & (2**63 - 1)
    return int(torch.empty((), dtype=torch.int64).random_().item()) & (2**63 - 1)


class _Loader:
    """What both drop-ins share once the arguments are on the fast path."""

    def _setup(
        self,
        *,
        dataset,
        source: dict,
        pipeline: str,
        dtype: str,
        batch_size: int,
        shuffle: bool,
        seed: int,
        sampler,
        rank: int,
        world: int,
        last_batch: str,
        workers: int,
        prefetch: int,
        timeout: float,
        backend: str,
        on_error: str,
        error_budget: float,
        layout: str,
    ):
        self.dataset = dataset
        self.batch_size = batch_size
        self.sampler = sampler
        self.drop_last = last_batch == "drop"
        self.num_workers = workers
        self.timeout = timeout
        self._config = dict(
            pipeline=pipeline,
            batch_size=batch_size,
            shuffle=shuffle,
            seed=seed,
            workers=workers,
            prefetch=prefetch,
            dtype=dtype,
            layout=layout,
            last_batch=last_batch,
            rank=rank,
            world_size=world,
            on_error=on_error,
            error_budget=error_budget,
            backend=backend,
            **source,
        )
        self._core = _hpuload.Loader(**self._config)
        if not self._core.pinned:
            warnings.warn(
                "hpuload: the batch buffers could not be page-locked (RLIMIT_MEMLOCK is too low "
                "for them; raise it with `ulimit -l`): using pageable memory, so copies to an "
                "accelerator go through a staging buffer",
                PinningWarning,
                stacklevel=3,
            )
        self._epoch = 0
        self._resumed_epoch: int | None = None
        self._active: object | None = None
        #: Dataset indices of the samples in the batch returned last.
        self.last_indices: list[int] = []
        #: How many leading samples of the batch returned last are real; the rest repeat
        #: samples to keep the shape static (`HabanaDataLoader` with `drop_last=False`).
        self.last_valid: int = 0

    # --- torch's interface -------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._core)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return self._iterate(self._current_epoch())

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration runs (its shuffle and augmentation), as
        `DistributedSampler.set_epoch`. Without it, each full pass moves to the next epoch."""
        self._epoch = int(epoch)
        self._resumed_epoch = None

    def state_dict(self) -> dict:
        """Where iteration stands, as `StatefulDataLoader.state_dict()`: after the last batch
        returned. Save it with the model; `load_state_dict` continues exactly there."""
        return {"hpuload_state": self._core.state(), "epoch": self._epoch}

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state_dict()`: the next iteration yields exactly the batches the
        interrupted run would have yielded next. The seed is taken from the state; everything
        else that decides batch contents (dataset, pipeline, batch size, last-batch policy)
        must match, or this raises ValueError naming the setting. The world size may differ
        (an elastic restart): every rank loads the same checkpoint (any rank's), and the ranks
        now present share the rest of the epoch, each sample once."""
        if "hpuload_state" not in state:
            raise ValueError("state_dict was not made by hpuload (no 'hpuload_state')")
        saved = json.loads(state["hpuload_state"])
        config = dict(self._config, seed=saved["config"]["seed"], resume=state["hpuload_state"])
        self._core.stop()
        self._core = _hpuload.Loader(**config)
        self._config = dict(config, resume=None)
        self._epoch = int(saved["epoch"])
        self._resumed_epoch = self._epoch

    # --- hpuload's extras --------------------------------------------------------------

    def report(self) -> dict:
        """Statistics so far: images, bytes read and DMA'd, time per stage, skips by reason,
        fallbacks to the CPU path, whether the buffers are page-locked."""
        return json.loads(self._core.report())

    @property
    def pinned(self) -> bool:
        """Whether the batch buffers are page-locked (torch reports `is_pinned()` only for
        memory registered with an accelerator runtime, so it says False without one)."""
        return self._core.pinned

    @property
    def classes(self) -> list[str]:
        return self._core.classes

    # --- internals ---------------------------------------------------------------------

    def _current_epoch(self) -> int:
        if self._resumed_epoch is not None:
            return self._resumed_epoch
        sampler_epoch = getattr(self.sampler, "epoch", None)
        if isinstance(self.sampler, tud.DistributedSampler) and sampler_epoch is not None:
            return int(sampler_epoch)
        return self._epoch

    def _iterate(self, epoch: int):
        # One epoch runs at a time: a newer iter(loader) takes over, and an older iterator that
        # is resumed or finalized later must neither read nor stop the newer one's epoch.
        token = object()
        self._active = token
        core = self._core
        core.start_epoch(epoch)
        self._resumed_epoch = None
        timeout = self.timeout if self.timeout and self.timeout > 0 else None
        try:
            while True:
                if self._active is not token:
                    raise RuntimeError("this iterator was superseded by a newer iter(loader)")
                batch = core.next_batch(timeout)
                if batch is None:
                    break
                self.last_indices = list(batch.indices)
                self.last_valid = batch.valid
                for index, path, reason, message in batch.skipped:
                    warnings.warn(
                        f"hpuload: skipped sample {index} ({path}): {reason}; replaced. {message}",
                        SkippedSampleWarning,
                        stacklevel=2,
                    )
                yield torch.from_dlpack(batch.images), torch.from_dlpack(batch.labels)
        finally:
            if self._active is token and self._core is core:
                core.stop()
                self._active = None
        # A complete pass: the next one is the next epoch (unless set_epoch says otherwise).
        if not isinstance(self.sampler, tud.DistributedSampler):
            self._epoch = epoch + 1


def _setup_or_unfit(loader: _Loader, plan: dict) -> None:
    """Builds the Rust loader; a translated torchvision transform that hpuload cannot run as a
    whole (e.g. Resize alone: a different shape per image, which only batch_size=1 or a custom
    collate can take) is a reason to fall back, not an error."""
    try:
        loader._setup(**plan)
    except ValueError as e:
        if str(e).startswith("pipeline torchvision:"):
            raise _Unfit(str(e)) from e
        raise


def _workers(num_workers: int) -> int:
    """Threads: torch's `num_workers=0` loads in the main process; ours are threads either way,
    so 0 means one per core."""
    return num_workers if num_workers and num_workers > 0 else (os.cpu_count() or 1)


class DataLoader(_Loader):
    """`torch.utils.data.DataLoader`'s signature and meaning, on hpuload's threads.

    Torch's arguments: `shuffle`, a `RandomSampler`, `SequentialSampler` or `DistributedSampler`
    as `sampler`, `drop_last`, `generator` (seeds shuffle and augmentation), `num_workers`
    (threads; 0 means one per core), `prefetch_factor` (batches ahead), `timeout`. `pin_memory`,
    `persistent_workers`, `worker_init_fn` and `multiprocessing_context` have nothing to act on
    (buffers are always page-locked when the OS allows; there are no worker processes).
    A `collate_fn`, a `batch_sampler`, another sampler, a dataset or transform hpuload does not
    implement: torch's DataLoader is returned instead, with a `FallbackWarning`.

    hpuload's own keywords: `backend` ("auto": the emulated media engine for baseline JPEGs,
    the CPU for the rest; "cpu": torchvision-exact within 1 level; "hw"), `on_error` ("skip":
    replace a bad file, warn naming it, fail past `error_budget` of the epoch; "fail"),
    `error_budget` (0.01), `seed` (overrides `generator`), `output_dtype` (a torch dtype
    replacing the transform's), `layout` ("nchw" or "nhwc"), `pipeline` (for a path dataset).
    """

    def __new__(cls, dataset, *args, **kwargs):
        bound = _torch_signature().bind(None, dataset, *args, **{k: v for k, v in kwargs.items() if k not in _OWN})
        bound.apply_defaults()
        a = dict(bound.arguments)
        a.update(a.pop("kwargs", {}) or {})
        own = {k: kwargs[k] for k in _OWN if k in kwargs}
        try:
            plan = _plan_torch(dataset, a, own)
            self = super().__new__(cls)
            _setup_or_unfit(self, plan)
        except _Unfit as e:
            return _fallback(str(e), dataset, args, kwargs)
        return self

    def __init__(self, *args, **kwargs):
        """Everything happens in `__new__` (which may return torch's DataLoader instead)."""


def _common(dataset, a: dict, own: dict):
    """Settings both drop-ins read the same way."""
    source, pipeline, dtype, _ = _dataset_source(dataset, own.get("pipeline"))
    if "output_dtype" in own:
        from ._transforms import _torch_dtype_name

        dtype = _torch_dtype_name(own["output_dtype"])
        if dtype is None:
            raise ValueError(f"output_dtype={own['output_dtype']}: use float32, float16, bfloat16 or uint8")
    batch_size = a.get("batch_size", 1)
    if batch_size is None:
        raise _Unfit("batch_size=None (no automatic batching)")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size should be a positive integer, got {batch_size!r}")
    timeout = a.get("timeout", 0) or 0
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    prefetch = a.get("prefetch_factor") or 2
    return dict(
        dataset=dataset,
        source=source,
        pipeline=pipeline,
        dtype=dtype,
        batch_size=batch_size,
        workers=_workers(a.get("num_workers", 0)),
        prefetch=max(1, int(prefetch)),
        timeout=float(timeout),
        backend=own.get("backend", "auto"),
        on_error=own.get("on_error", "skip"),
        error_budget=float(own.get("error_budget", 0.01)),
        layout=own.get("layout", "nchw"),
    )


def _plan_torch(dataset, a: dict, own: dict) -> dict:
    if a.get("batch_sampler") is not None:
        raise _Unfit("a batch_sampler is given")
    collate = a.get("collate_fn")
    if collate is not None and collate is not tud.default_collate:
        raise _Unfit("a collate_fn is given")
    plan = _common(dataset, a, own)
    sampler = a.get("sampler")
    shuffle = bool(a.get("shuffle"))
    if sampler is not None and shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle")
    rank, world = 0, 1
    last_batch = "drop" if a.get("drop_last") else "partial"
    if sampler is None or type(sampler) is tud.SequentialSampler:
        pass
    elif type(sampler) is tud.RandomSampler:
        if sampler.replacement or sampler._num_samples is not None:
            raise _Unfit("a RandomSampler with replacement or num_samples")
        shuffle = True
        if a.get("generator") is None and sampler.generator is not None:
            a["generator"] = sampler.generator
    elif type(sampler) is tud.DistributedSampler:
        shuffle = bool(sampler.shuffle)
        rank, world = int(sampler.rank), int(sampler.num_replicas)
        if sampler.drop_last and not a.get("drop_last"):
            # DistributedSampler(drop_last=True) drops the tail that does not divide evenly;
            # hpuload drops whole batches only.
            raise _Unfit("DistributedSampler(drop_last=True) with DataLoader(drop_last=False)")
        plan["seed"] = int(sampler.seed)
    else:
        raise _Unfit(f"sampler is a {type(sampler).__name__}")
    plan.setdefault("seed", _seed_from(a.get("generator")))
    if "seed" in own:
        plan["seed"] = int(own["seed"])
    if sampler is None and hasattr(dataset, "__len__"):
        # What torch's DataLoader exposes as `.sampler` (scripts read `len(loader.sampler)`);
        # the order itself is hpuload's.
        sampler = tud.RandomSampler(dataset) if shuffle else tud.SequentialSampler(dataset)
    plan.update(shuffle=shuffle, sampler=sampler, rank=rank, world=world, last_batch=last_batch)
    return plan


class HabanaDataLoader(_Loader):
    """Habana's `habana_dataloader.HabanaDataLoader`: the same signature and rules. The fast
    path takes a torchvision ImageFolder with transforms hpuload implements; shuffle comes from
    `shuffle`, a `RandomSampler` or a `DistributedSampler(shuffle=True)`; `num_workers` and
    `pin_memory` are ignored; `batch_sampler`, `collate_fn`, `worker_init_fn`, `generator` and
    `multiprocessing_context` must be None; `drop_last=False` pads the last batch to a full one
    (static shapes for graph mode); rank and world size come from `torch.distributed` (or
    `RANK`/`WORLD_SIZE`), and a sharded run without a DistributedSampler shuffles with seed 0
    (DistributedSampler's default) so that the ranks agree on the order. Anything else falls
    back to torch's DataLoader with a warning."""

    def __new__(
        cls,
        dataset,
        batch_size=1,
        shuffle=False,
        sampler=None,
        batch_sampler=None,
        num_workers=0,
        collate_fn=None,
        pin_memory=False,
        drop_last=False,
        timeout=0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        prefetch_factor=2,
        persistent_workers=False,
        **own,
    ):
        a = dict(
            batch_size=batch_size,
            shuffle=shuffle,
            sampler=sampler,
            batch_sampler=batch_sampler,
            num_workers=num_workers,
            collate_fn=collate_fn,
            pin_memory=pin_memory,
            drop_last=drop_last,
            timeout=timeout,
            worker_init_fn=worker_init_fn,
            multiprocessing_context=multiprocessing_context,
            generator=generator,
            prefetch_factor=prefetch_factor if num_workers else None,
            persistent_workers=persistent_workers if num_workers else False,
        )
        unknown = set(own) - set(_OWN)
        if unknown:
            raise TypeError(f"HabanaDataLoader got unexpected keyword arguments {sorted(unknown)}")
        try:
            plan = _plan_habana(dataset, a, own)
            self = super().__new__(cls)
            _setup_or_unfit(self, plan)
        except _Unfit as e:
            return _fallback(str(e), dataset, (), dict(a, **own))
        return self

    def __init__(self, *args, **kwargs):
        """Everything happens in `__new__` (which may return torch's DataLoader instead)."""


def _plan_habana(dataset, a: dict, own: dict) -> dict:
    for name in ("batch_sampler", "collate_fn", "worker_init_fn", "generator", "multiprocessing_context"):
        if a.get(name) is not None:
            raise _Unfit(f"{name} must be None for HabanaDataLoader's fast path")
    plan = _common(dataset, a, own)
    sampler = a.get("sampler")
    shuffle = bool(a.get("shuffle"))
    if isinstance(sampler, tud.RandomSampler) or (
        isinstance(sampler, tud.DistributedSampler) and sampler.shuffle
    ):
        shuffle = True
    elif sampler is not None and not isinstance(sampler, (tud.SequentialSampler, tud.DistributedSampler)):
        raise _Unfit(f"sampler is a {type(sampler).__name__}")
    rank, world = _dist_rank_world()
    if isinstance(sampler, tud.DistributedSampler):
        seed = int(sampler.seed)
    elif world > 1:
        # Every rank must shuffle alike or they overlap; torch's RNG differs per process, so
        # use DistributedSampler's default seed (0) rather than a collective to agree on one.
        seed = 0
    else:
        seed = _seed_from(None)
    if "seed" in own:
        seed = int(own["seed"])
    plan.update(
        shuffle=shuffle,
        sampler=sampler,
        rank=rank,
        world=world,
        seed=seed,
        last_batch="drop" if a.get("drop_last") else "pad",
    )
    return plan
