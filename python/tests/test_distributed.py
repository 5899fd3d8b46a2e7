"""Two real ranks (torch.distributed with the gloo backend, rendezvous through a file): each
iterates its loader and all-reduces once per batch, as DDP does, so a rank with fewer batches
would hang the other (bounded here by a timeout)."""

import datetime
import json
import os
import sys

import torch.multiprocessing as mp


def rank_main(rank, world, init_file, data, out_dir):
    import torch
    import torch.distributed as dist
    import torch.utils.data as tud
    from torchvision import datasets
    from torchvision import transforms as T

    from hpuload.torch import DataLoader, HabanaDataLoader

    dist.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60)
    )
    ds = datasets.ImageFolder(data, T.Compose([T.RandomResizedCrop(32), T.ToTensor()]))
    result = {}
    for name in ("DataLoader", "HabanaDataLoader"):
        if name == "DataLoader":
            sampler = tud.DistributedSampler(ds, shuffle=True, seed=2)  # rank, world from dist
            sampler.set_epoch(1)
            loader = DataLoader(ds, batch_size=4, sampler=sampler)
        else:
            loader = HabanaDataLoader(ds, batch_size=4, shuffle=True)  # rank, world from dist
        batches, seen = 0, []
        for x, y in loader:
            dist.all_reduce(torch.ones(1))  # every rank must reach every step
            batches += 1
            seen += loader.last_indices[: loader.last_valid]
        result[name] = {"batches": batches, "len": len(loader), "seen": seen, "shard": list(loader._core.shard)}
    dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)


def test_two_torch_distributed_ranks_get_equal_batches_and_cover_the_dataset_once(jpeg_folder, tmp_path):
    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(target=rank_main, args=(r, 2, str(tmp_path / "rendezvous"), str(jpeg_folder), str(tmp_path)))
        for r in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
        assert p.exitcode == 0, "a rank failed or hung"
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for name in ("DataLoader", "HabanaDataLoader"):
        a, b = ranks[0][name], ranks[1][name]
        assert (a["shard"], b["shard"]) == ([0, 2], [1, 2]), "rank and world size from torch.distributed"
        assert a["batches"] == b["batches"] == a["len"] == b["len"] == 6, name
        assert sorted(a["seen"] + b["seen"]) == list(range(41)), f"{name}: every sample once"


if __name__ == "__main__":  # pragma: no cover - spawn re-imports this module by name
    sys.exit(0)
