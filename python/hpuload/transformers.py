"""hpuload under Hugging Face's `Trainer` (and optimum-habana's `GaudiTrainer`, which builds its
data loaders the same way).

Add two lines to a training script such as transformers' `run_image_classification.py`:

    import hpuload.transformers
    hpuload.transformers.install()

From then on, every data loader the Trainer builds comes from `hpuload.torch.DataLoader`
with the Trainer's own arguments (its sampler, batch size, `data_collator`, `drop_last`): a
`datasets.Dataset` whose `set_transform`/`with_transform` function applies a torchvision
transform hpuload implements is loaded natively; anything else falls back to torch's
DataLoader with a `FallbackWarning` naming the reason, exactly as the Trainer would have built
it. Run with `--remove_unused_columns False`, as the example already requires (the transform
needs the image column).
"""

from __future__ import annotations

import importlib
from typing import Any

import torch.utils.data as tud

_TRAINER_MODULES = ("transformers.trainer", "optimum.habana.transformers.trainer")
_installed: dict[str, Any] = {}


def _world() -> tuple[int, int]:
    """(rank, world size) of the Trainer's processes (accelerate's state when it has one)."""
    try:
        from accelerate import PartialState

        state = PartialState()
        return int(state.process_index), int(state.num_processes)
    except Exception:  # noqa: BLE001 - no accelerate, or no distributed state: one process
        return 0, 1


def data_loader(dataset, **params):
    """What `install` puts in place of `DataLoader` in the Trainer's module: hpuload's drop-in
    with the Trainer's arguments. With several processes, accelerate shards a torch
    DataLoader when it prepares it but leaves hpuload's alone, so a plain random or sequential
    sampler becomes a `DistributedSampler` over the same processes (seeded by torch's initial
    seed, which `set_seed` makes the same on every rank)."""
    import torch

    from .torch import DataLoader

    loader = DataLoader(dataset, **params)
    rank, world = _world()
    sampler = params.get("sampler")
    if isinstance(loader, DataLoader) and world > 1 and type(sampler) in (tud.RandomSampler, tud.SequentialSampler):
        shard = tud.DistributedSampler(
            dataset,
            num_replicas=world,
            rank=rank,
            shuffle=type(sampler) is tud.RandomSampler,
            seed=torch.initial_seed() % 2**63,
            drop_last=bool(params.get("drop_last", False)),
        )
        loader = DataLoader(dataset, **{**params, "sampler": shard})
    return loader


def install() -> list[str]:
    """Makes `transformers.Trainer` (and `GaudiTrainer` when optimum-habana is installed) build
    its data loaders with hpuload. Returns the modules patched; `uninstall()` undoes it."""
    patched = []
    for name in _TRAINER_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if name not in _installed:
            _installed[name] = module.DataLoader
        module.DataLoader = data_loader
        patched.append(name)
    if not patched:
        raise ImportError("hpuload.transformers.install(): transformers is not installed")
    return patched


def uninstall() -> None:
    """Gives the Trainer modules their own DataLoader back."""
    for name, original in _installed.items():
        importlib.import_module(name).DataLoader = original
    _installed.clear()
