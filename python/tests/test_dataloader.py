"""hpuload.torch.DataLoader and HabanaDataLoader as a training script sees them."""

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import pytest
import torch
import torch.utils.data as tud
from torchvision import datasets
from torchvision import transforms as T

import hpuload
from hpuload.torch import DataLoader, FallbackWarning, HabanaDataLoader, SkippedSampleWarning

from conftest import rss_bytes

SMALL = T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize([0.5] * 3, [0.25] * 3)])


def folder(root, transform=SMALL):
    return datasets.ImageFolder(root, transform)


def epoch_of(loader):
    return [(x.clone(), y.clone()) for x, y in loader]


# --- the fast path -----------------------------------------------------------------------


def test_fast_path_yields_torchvision_shapes_and_dtypes_with_a_partial_last_batch(jpeg_folder):
    loader = DataLoader(folder(jpeg_folder), batch_size=8, shuffle=True, num_workers=2)
    assert isinstance(loader, DataLoader)
    batches = list(loader)
    assert len(batches) == len(loader) == 6, "41 samples in batches of 8: torch's count"
    for x, y in batches[:-1]:
        assert x.shape == (8, 3, 32, 32) and x.dtype == torch.float32 and x.is_contiguous()
        assert y.shape == (8,) and y.dtype == torch.int64
    assert batches[-1][0].shape == (1, 3, 32, 32), "drop_last=False keeps the remainder, as torch"
    assert len(DataLoader(folder(jpeg_folder), batch_size=8, drop_last=True)) == 5


def test_a_loader_collected_in_a_forked_child_neither_waits_for_nor_aborts_on_its_threads(jpeg_folder):
    """A process forked while an hpuload loader is alive (a torch DataLoader's worker, as
    torchvision's `VideoClips` starts to read metadata) has none of the loader's threads: when
    its garbage collection frees its copy of the loader mid-epoch, the child carries on."""
    loader = DataLoader(folder(jpeg_folder), batch_size=8, num_workers=2)
    batches = iter(loader)
    next(batches)
    pid = os.fork()
    if pid == 0:  # the child: free its copies, then exit at once with the verdict
        code = 1
        try:
            del batches, loader
            gc.collect()
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the child hung freeing its copy of the loader")
        time.sleep(0.05)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status:#x}"
    assert len(list(batches)) == 5, "the parent's epoch goes on"


def test_each_pass_is_a_new_epoch_and_set_epoch_replays_one(jpeg_folder):
    loader = DataLoader(folder(jpeg_folder), batch_size=41, shuffle=True, seed=1)
    first, second = epoch_of(loader), epoch_of(loader)
    assert not torch.equal(first[0][1], second[0][1]), "a new shuffle each pass"
    loader.set_epoch(0)
    assert torch.equal(epoch_of(loader)[0][0], first[0][0]), "epoch 0 again, bit for bit"


def test_same_seed_gives_identical_batches_whatever_the_worker_count(jpeg_folder):
    a = epoch_of(DataLoader(folder(jpeg_folder), batch_size=8, shuffle=True, num_workers=1, seed=9))
    b = epoch_of(DataLoader(folder(jpeg_folder), batch_size=8, shuffle=True, num_workers=3, seed=9))
    assert all(torch.equal(x1, x2) and torch.equal(y1, y2) for (x1, y1), (x2, y2) in zip(a, b))


def test_torch_manual_seed_makes_the_run_repeatable(jpeg_folder):
    torch.manual_seed(5)
    a = epoch_of(DataLoader(folder(jpeg_folder), batch_size=41, shuffle=True))
    torch.manual_seed(5)
    b = epoch_of(DataLoader(folder(jpeg_folder), batch_size=41, shuffle=True))
    assert torch.equal(a[0][0], b[0][0])


def test_a_folder_path_with_a_builtin_pipeline_works_without_torchvision_datasets(jpeg_folder):
    loader = DataLoader(str(jpeg_folder), batch_size=4, pipeline="resnet50_eval")
    x, y = next(iter(loader))
    assert x.shape == (4, 3, 224, 224) and x.dtype == torch.float32
    with pytest.raises(TypeError, match="pipeline"):
        DataLoader(str(jpeg_folder), batch_size=4)


def test_bf16_output_on_request(jpeg_folder):
    loader = DataLoader(folder(jpeg_folder), batch_size=4, output_dtype=torch.bfloat16)
    x, _ = next(iter(loader))
    assert x.dtype == torch.bfloat16


# --- fallback ----------------------------------------------------------------------------


class Squares(tud.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return torch.tensor([i * i]), i


class NoSizeBatches:
    """A batch sampler without a batch_size: hpuload cannot know its shape in advance."""

    def __iter__(self):
        return iter([[0, 1, 2], [3, 4]])

    def __len__(self):
        return 2


@pytest.mark.parametrize(
    "make, reason, kind",
    [
        (lambda root: (Squares(), {}), "Squares", "DATASET"),
        (
            lambda root: (folder(root, T.Compose([T.RandomPerspective(), T.CenterCrop(32), T.ToTensor()])), {}),
            "RandomPerspective",
            "TRANSFORM",
        ),
        (
            lambda root: (folder(root, T.Compose([T.PILToTensor(), T.ColorJitter(0.2), T.CenterCrop(32)])), {}),
            "ColorJitter before the crop or resize, on a tensor",
            "TRANSFORM",
        ),
        (lambda root: (folder(root), {"batch_sampler": NoSizeBatches()}), "batch_size", "BATCH_SAMPLER"),
        (
            lambda root: (folder(root, T.Compose([T.Resize(40), T.ToTensor()])), {"batch_size": 1}),
            "different shape",
            "TRANSFORM",
        ),
    ],
)
def test_what_hpuload_cannot_take_goes_to_torch_with_one_typed_warning_naming_why(jpeg_folder, make, reason, kind):
    from hpuload.torch import FallbackReason, fallback_counts

    dataset, kwargs = make(jpeg_folder)
    if "batch_sampler" not in kwargs:
        kwargs.setdefault("batch_size", 4)
    before = fallback_counts[FallbackReason[kind]]
    with pytest.warns(FallbackWarning, match=reason) as record:
        loader = DataLoader(dataset, **kwargs)
    assert len(record) == 1
    assert record[0].message.reason is FallbackReason[kind]
    assert fallback_counts[FallbackReason[kind]] == before + 1
    assert isinstance(loader, tud.DataLoader) and loader.fallback_reason is FallbackReason[kind]
    assert loader.dataset is dataset
    next(iter(loader))  # torch's loader works with the arguments as given


def test_habana_loader_yields_torchs_partial_last_batch_so_evaluation_counts_each_image_once(jpeg_folder):
    loader = HabanaDataLoader(folder(jpeg_folder), batch_size=8, shuffle=False)
    ours = [(tuple(x.shape), y.tolist()) for x, y in loader]
    theirs = [(tuple(x.shape), y.tolist()) for x, y in tud.DataLoader(folder(jpeg_folder), batch_size=8)]
    assert [s for s, _ in ours] == [(8, 3, 32, 32)] * 5 + [(1, 3, 32, 32)]
    assert ours == theirs
    assert loader.last_valid == 1


def test_habana_loader_pads_the_last_batch_only_when_asked_and_marks_the_padding(jpeg_folder):
    loader = HabanaDataLoader(
        folder(jpeg_folder), batch_size=8, sampler=tud.RandomSampler(range(41)), pad_last_batch=True
    )
    assert isinstance(loader, HabanaDataLoader)
    shapes, valid, last = [], [], None
    for x, y in loader:
        shapes.append(tuple(x.shape))
        valid.append(loader.last_valid)
        last = y
    assert shapes == [(8, 3, 32, 32)] * 6
    assert valid == [8, 8, 8, 8, 8, 1]
    assert last[0] >= 0 and last[1:].tolist() == [-100] * 7, "padding rows carry the ignored label"
    logits = torch.zeros(8, 3, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(logits, last)
    assert torch.isclose(loss, torch.log(torch.tensor(3.0))), "the loss counts the one real row"


@pytest.mark.parametrize(
    "transform,names",
    [
        # Translated whole but for handing the PIL image over: no Python step to name.
        (T.Resize(20), None),
        (T.Compose([T.Resize(20), T.Lambda(lambda x: x.rotate(90))]), "runs natively only up to its Lambda"),
    ],
)
def test_a_transform_of_varying_shape_falls_back_saying_why_and_what_kept_it_short(jpeg_folder, transform, names):
    with pytest.warns(FallbackWarning, match="different shape per image") as caught:
        loader = DataLoader(folder(jpeg_folder, transform), batch_size=2, collate_fn=lambda batch: batch)
    assert isinstance(loader, tud.DataLoader) and len(next(iter(loader))) == 2
    message = str(caught[0].message)
    assert (names in message) if names else ("natively only up to" not in message)


def test_habana_loader_falls_back_on_what_its_fast_path_refuses(jpeg_folder):
    with pytest.warns(FallbackWarning, match="generator must be None"):
        loader = HabanaDataLoader(folder(jpeg_folder), batch_size=4, generator=torch.Generator())
    assert isinstance(loader, tud.DataLoader)
    # Checkpointing code keeps working on a fallback loader: the state counts the batches
    # returned, and a restored loader continues after them.
    it = iter(loader)
    next(it), next(it)
    state = loader.state_dict()
    with pytest.warns(FallbackWarning):
        again = HabanaDataLoader(folder(jpeg_folder), batch_size=4, generator=torch.Generator())
    again.load_state_dict(state)
    assert len(list(again)) == len(loader) - 2


# --- resume ------------------------------------------------------------------------------


def test_state_dict_round_trip_mid_epoch_continues_with_the_same_bytes(jpeg_folder):
    def make():
        return DataLoader(folder(jpeg_folder), batch_size=4, shuffle=True, seed=77)

    full = make()
    epoch_of(full)  # epoch 0
    want = epoch_of(full)  # epoch 1, uninterrupted

    first = make()
    epoch_of(first)
    it = iter(first)
    for _ in range(4):
        next(it)
    state = json.loads(json.dumps(first.state_dict()))  # a checkpoint survives JSON
    it.close()
    del first, it

    torch.manual_seed(1234)  # a different process would draw a different seed: the state's wins
    resumed = make()
    resumed.load_state_dict(state)
    rest = epoch_of(resumed)
    assert len(rest) == len(want) - 4
    for (x1, y1), (x2, y2) in zip(rest, want[4:]):
        assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert torch.equal(epoch_of(resumed)[0][0], epoch_of(full)[0][0]), "then epoch 2 as usual"


def test_load_state_dict_from_another_configuration_names_the_setting(jpeg_folder):
    a = DataLoader(folder(jpeg_folder), batch_size=4)
    b = DataLoader(folder(jpeg_folder), batch_size=8)
    with pytest.raises(ValueError, match="batch"):
        b.load_state_dict(a.state_dict())


# --- memory ------------------------------------------------------------------------------


def test_tensors_stay_valid_after_the_loader_is_dropped(jpeg_folder):
    loader = DataLoader(folder(jpeg_folder), batch_size=8, shuffle=True)
    kept = list(loader)  # every batch held at once: more than the pinned pool holds
    copies = [(x.clone(), y.clone()) for x, y in kept]
    assert loader.report()["extra_buffers"] >= 1
    del loader
    gc.collect()
    for (x, y), (cx, cy) in zip(kept, copies):
        assert torch.equal(x, cx) and torch.equal(y, cy)
    assert len({x.data_ptr() for x, _ in kept}) == len(kept), "each batch has its own buffer"


def test_no_memory_growth_over_20_epochs(jpeg_folder):
    loader = DataLoader(folder(jpeg_folder), batch_size=8, shuffle=True, num_workers=2)
    for _ in range(3):
        for x, y in loader:
            pass
    before = rss_bytes()
    for _ in range(17):
        for x, y in loader:
            pass
    grown = rss_bytes() - before
    assert grown < 16 << 20, f"RSS grew by {grown >> 20} MiB over 17 epochs"
    assert loader.report()["extra_buffers"] == 0


# --- distributed -------------------------------------------------------------------------


@pytest.mark.parametrize("drop_last", [False, True])
def test_two_ranks_get_equal_batch_counts_and_together_cover_the_dataset(jpeg_folder, drop_last):
    ds = folder(jpeg_folder)
    counts, seen = [], []
    for rank in range(2):
        sampler = tud.DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True, seed=4)
        sampler.set_epoch(3)
        loader = DataLoader(ds, batch_size=4, sampler=sampler, drop_last=drop_last)
        assert len(loader) == len(tud.DataLoader(ds, batch_size=4, sampler=sampler, drop_last=drop_last))
        n = 0
        for _ in loader:
            n += 1
            seen.extend(loader.last_indices[: loader.last_valid])
        counts.append(n)
    assert counts[0] == counts[1] == len(loader)
    if drop_last:
        assert len(set(seen)) == len(seen), "no sample twice"
    else:
        assert sorted(seen) == list(range(41)), "every sample exactly once across ranks"


def test_habana_loader_reads_rank_and_world_size_from_the_launcher(jpeg_folder, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    loader = HabanaDataLoader(folder(jpeg_folder), batch_size=4)
    assert loader._core.shard == (1, 3)
    assert len(loader) == 4, "ceil(41 / 3) = 14 samples: 4 batches, the last of 2"


def test_a_checkpoint_from_two_ranks_resumes_on_three_which_share_the_rest_of_the_epoch(jpeg_folder, monkeypatch):
    def loader(rank, world):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(world))
        return HabanaDataLoader(folder(jpeg_folder), batch_size=4, shuffle=True)

    seen, states = [], []
    for rank in range(2):
        first = loader(rank, 2)
        it = iter(first)
        for _ in range(2):
            next(it)
            seen.extend(first.last_indices[: first.last_valid])
        states.append(json.loads(json.dumps(first.state_dict())))
        it.close()
    counts = []
    for rank in range(3):
        resumed = loader(rank, 3)
        resumed.load_state_dict(states[0])
        n = 0
        for _ in resumed:
            n += 1
            seen.extend(resumed.last_indices[: resumed.last_valid])
        counts.append(n)
    assert len(set(counts)) == 1, counts
    assert sorted(seen) == list(range(41)), "every sample exactly once, before and after the restart"


# --- errors ------------------------------------------------------------------------------


def damaged_copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    victim = sorted(dst.rglob("*.jpg"))[3]
    victim.write_bytes(victim.read_bytes()[:300])
    return victim


def test_a_bad_file_under_fail_raises_an_exception_naming_it(jpeg_folder, tmp_path):
    victim = damaged_copy(jpeg_folder, tmp_path / "d")
    loader = DataLoader(folder(tmp_path / "d"), batch_size=8, on_error="fail")
    with pytest.raises(hpuload.SampleError) as e:
        list(loader)
    assert str(victim) in str(e.value)
    assert e.value.args[2] == "truncated"


def test_a_bad_file_under_skip_is_replaced_and_named_in_a_warning(jpeg_folder, tmp_path):
    victim = damaged_copy(jpeg_folder, tmp_path / "d")
    loader = DataLoader(folder(tmp_path / "d"), batch_size=8, error_budget=0.1)
    with pytest.warns(SkippedSampleWarning, match=str(victim)):
        batches = list(loader)
    assert sum(len(y) for _, y in batches) == 41, "nothing lost: the batch shape holds"
    assert loader.report()["skipped"] == 1


@pytest.mark.parametrize(
    "kwargs, error, name",
    [
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"backend": "gpu"}, ValueError, "backend"),
        ({"on_error": "ignore"}, ValueError, "on_error"),
        ({"timeout": -1}, ValueError, "timeout"),
        ({"shuffle": True, "sampler": tud.SequentialSampler(range(41))}, ValueError, "sampler"),
    ],
)
def test_bad_arguments_raise_the_python_error_naming_the_argument(jpeg_folder, kwargs, error, name):
    with pytest.raises(error, match=name):
        DataLoader(folder(jpeg_folder), **kwargs)


def test_ctrl_c_while_waiting_for_a_batch_raises_keyboard_interrupt_and_the_loader_still_works(jpeg_folder):
    slow = T.Compose([T.Resize(512), T.CenterCrop(512), T.ToTensor()])
    loader = DataLoader(folder(jpeg_folder, slow), batch_size=41, num_workers=1, backend="cpu")
    # A process started in the background by a non-interactive shell inherits SIGINT as
    # ignored, and Python then installs no handler: install Python's own, as a terminal has it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.05, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            for _ in loader:
                time.sleep(10)  # never reached before the signal
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - start < 5
    x, _ = next(iter(loader))
    assert x.shape == (41, 3, 512, 512), "the loader works after the interrupt"


def test_timeout_raises_like_torch(jpeg_folder):
    slow = T.Compose([T.Resize(512), T.CenterCrop(512), T.ToTensor()])
    loader = DataLoader(folder(jpeg_folder, slow), batch_size=41, num_workers=1, backend="cpu", timeout=0.001)
    with pytest.raises(RuntimeError, match="timed out"):
        next(iter(loader))


# --- command line and example --------------------------------------------------------------


def test_python_m_hpuload_bench_runs_and_reports_throughput(jpeg_folder, tmp_path):
    out = tmp_path / "r.json"
    r = subprocess.run(
        [sys.executable, "-m", "hpuload", "bench", "--data", str(jpeg_folder), "--batch", "8", "--epochs", "1", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["images_per_sec"] > 0


def test_train_resnet_example_trains_a_few_steps(jpeg_folder):
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "train_resnet.py")
    r = subprocess.run(
        [sys.executable, example, "--data", str(jpeg_folder), "--steps", "2", "--batch-size", "8", "--image-size", "64"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "step 2" in r.stdout


def test_an_abandoned_iterator_does_not_stop_a_newer_one(jpeg_folder):
    loader = DataLoader(folder(jpeg_folder), batch_size=8, shuffle=True, seed=3)
    old = iter(loader)
    next(old)
    new = iter(loader)
    first = next(new)
    del old  # finalizing the old iterator must leave the new epoch running
    gc.collect()
    assert len([first, *new]) == 6


def test_dlpack_gives_the_legacy_capsule_unless_version_1_is_asked_for(jpeg_folder):
    import ctypes

    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    loader = DataLoader(folder(jpeg_folder), batch_size=8)
    loader._core.start_epoch(0)
    batch = loader._core.next_batch()
    assert batch.images.__dlpack_device__() == (1, 0)
    legacy = batch.images.__dlpack__()
    assert get_name(legacy) == b"dltensor"
    versioned = batch.images.__dlpack__(max_version=(1, 0))
    assert get_name(versioned) == b"dltensor_versioned"
    x = torch.utils.dlpack.from_dlpack(legacy)  # what torch before 2.9 does
    assert get_name(legacy) == b"used_dltensor"
    assert torch.equal(x, torch.from_dlpack(batch.images))
    with pytest.raises(BufferError):
        batch.images.__dlpack__(copy=True)
    del versioned  # never consumed: its destructor frees it
    loader._core.stop()


def test_hpuload_sources_feed_the_drop_in_too(jpeg_folder, tmp_path):
    manifest = tmp_path / "m.tsv"
    files = sorted(jpeg_folder.rglob("*.jpg"))[:10]
    manifest.write_text("".join(f"{f}\t{i % 3}\n" for i, f in enumerate(files)))
    loader = DataLoader(hpuload.Manifest(manifest, pipeline="resnet50_eval"), batch_size=5)
    labels = [y for _, y in loader]
    assert torch.cat(labels).tolist() == [i % 3 for i in range(10)]
    folder_loader = DataLoader(hpuload.ImageFolder(jpeg_folder, pipeline="resnet50_eval"), batch_size=41)
    assert len(folder_loader) == 1


def test_a_pipeline_toml_file_is_read_by_the_rust_parser(jpeg_folder, tmp_path):
    toml = tmp_path / "p.toml"
    toml.write_text('name = "small"\n[[ops]]\nop = "center_crop"\nsize = 48\n')
    x, _ = next(iter(DataLoader(str(jpeg_folder), batch_size=2, pipeline=str(toml))))
    assert x.shape == (2, 3, 48, 48)
    toml.write_text('name = "bad"\n[[ops]]\nop = "sharpen"\n')
    with pytest.raises(ValueError, match="sharpen"):
        DataLoader(str(jpeg_folder), batch_size=2, pipeline=str(toml))


def test_a_refused_page_lock_is_a_warning_not_a_silent_downgrade(jpeg_folder, tmp_path):
    # A child process held to a 64 KiB RLIMIT_MEMLOCK, as a non-root user is: the limit is
    # lowered and CAP_IPC_LOCK (which lets root exceed it) dropped with capset(2).
    script = tmp_path / "memlock.py"
    script.write_text(
        "import ctypes, resource, warnings\n"
        "resource.setrlimit(resource.RLIMIT_MEMLOCK, (64 * 1024, 64 * 1024))\n"
        "class Header(ctypes.Structure):\n"
        "    _fields_ = [('version', ctypes.c_uint32), ('pid', ctypes.c_int)]\n"
        "class Data(ctypes.Structure):\n"
        "    _fields_ = [('effective', ctypes.c_uint32), ('permitted', ctypes.c_uint32), ('inheritable', ctypes.c_uint32)]\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "header, data = Header(0x20080522, 0), (Data * 2)()\n"
        "assert libc.capget(ctypes.byref(header), data) == 0\n"
        "data[0].effective &= ~(1 << 14)\n"  # CAP_IPC_LOCK
        "data[0].permitted &= ~(1 << 14)\n"
        "assert libc.capset(ctypes.byref(header), data) == 0, ctypes.get_errno()\n"
        "from torchvision import datasets, transforms as T\n"
        "from hpuload.torch import DataLoader\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        f"    loader = DataLoader(datasets.ImageFolder({str(jpeg_folder)!r}, T.Compose([T.CenterCrop(32), T.ToTensor()])), batch_size=4)\n"
        "print(loader.pinned, [type(x.message).__name__ for x in w])\n"
        "x, y = next(iter(loader))\n"
        "print(tuple(x.shape))\n"
    )
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["False ['PinningWarning']", "(4, 3, 32, 32)"]


def test_webdataset_shards_made_by_make_shards_feed_the_drop_in(jpeg_folder, tmp_path):
    from hpuload._hpuload import cli

    out = tmp_path / "shards"
    assert cli(["hpuload", "make-shards", "--data", str(jpeg_folder), "--out", str(out), "--shard-size", "300KB"]) == 0
    n = len(list(out.glob("*.tar")))
    pattern = str(out / f"shard-{{000000..{n - 1:06}}}.tar")
    loader = DataLoader(hpuload.WebDataset(pattern, pipeline="resnet50_eval"), batch_size=8, shuffle=True, seed=1)
    labels = sorted(torch.cat([y for _, y in loader]).tolist())
    assert labels == sorted(t for _, t in folder(jpeg_folder).samples), "every sample once, same labels"


def test_a_batch_of_pairs_is_a_list_as_default_collate_makes_it(jpeg_folder):
    """torch's default_collate turns a batch of `(image, label)` tuples into a list, which
    training loops index into and assign to (`batch[0] = batch[0].half()`)."""
    from torchvision import datasets as tv_datasets

    ds = tv_datasets.ImageFolder(jpeg_folder, T.Compose([T.CenterCrop(32), T.ToTensor()]))
    want = next(iter(torch.utils.data.DataLoader(ds, batch_size=4)))
    for kw in ({}, {"num_workers": 2}):
        batch = next(iter(DataLoader(ds, batch_size=4, **kw)))
        assert type(batch) is type(want) is list
        batch[0] = batch[0].half()


def _seeded(seed):
    return torch.Generator().manual_seed(seed)


#: What training scripts hand torch's DataLoader to order and batch a dataset, each made
#: anew for each loader (a sampler's generator is consumed as it is iterated).
SAMPLING = {
    "batch_size_7": lambda ds: dict(batch_size=7),
    "drop_last": lambda ds: dict(batch_size=7, drop_last=True),
    "batch_size_1": lambda ds: dict(batch_size=1),
    "one_batch_larger_than_the_dataset": lambda ds: dict(batch_size=1000),
    "a_list_of_indices_as_sampler": lambda ds: dict(batch_size=5, sampler=[3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]),
    "subset_random_sampler": lambda ds: dict(
        batch_size=4, sampler=tud.SubsetRandomSampler(list(range(0, len(ds), 2)), generator=_seeded(1))
    ),
    "weighted_random_sampler": lambda ds: dict(
        batch_size=4, sampler=tud.WeightedRandomSampler([1.0 + i % 3 for i in range(len(ds))], 20, generator=_seeded(2))
    ),
    "random_sampler_with_replacement": lambda ds: dict(
        batch_size=4, sampler=tud.RandomSampler(ds, replacement=True, num_samples=10, generator=_seeded(3))
    ),
    "random_sampler_of_more_samples_than_the_dataset": lambda ds: dict(
        batch_size=4, sampler=tud.RandomSampler(ds, num_samples=len(ds) + 6, generator=_seeded(4))
    ),
    "batch_sampler": lambda ds: dict(batch_sampler=tud.BatchSampler(tud.SequentialSampler(ds), 5, drop_last=False)),
    "collate_fn_keeping_the_samples": lambda ds: dict(batch_size=6, collate_fn=lambda b: b),
}


@pytest.mark.parametrize("how", sorted(SAMPLING))
def test_each_way_of_sampling_and_batching_gives_torchs_batches_and_length(jpeg_folder, how):
    """The same batches, in the same structure, as torch's loader (the CPU path: Pillow's
    pixels exactly), and the same `len(loader)`."""
    ds = datasets.ImageFolder(jpeg_folder, T.Compose([T.Resize((24, 24)), T.PILToTensor()]))
    theirs = tud.DataLoader(ds, **SAMPLING[how](ds))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        ours = DataLoader(ds, backend="cpu", **SAMPLING[how](ds))
    assert len(ours) == len(theirs)

    def same(a, b):
        if isinstance(a, torch.Tensor):
            return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
        if isinstance(a, (list, tuple)):
            return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        return type(a) is type(b) and a == b

    got, want = list(ours), list(theirs)
    assert len(got) == len(want) == len(theirs)
    assert all(same(a, b) for a, b in zip(got, want))


class Buckets:
    """A bucketing batch sampler, as sequence models' scripts write one: a `batch_size`
    attribute, but batches of several sizes."""

    batch_size = 4
    drop_last = False

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        yield from ([0, 1, 2, 3], [4, 5], [6, 7, 8, 9], [10])

    def __len__(self):
        return 4


def test_a_batch_sampler_with_batches_of_several_sizes_goes_to_torchs_loader_at_the_epochs_start(jpeg_folder):
    """Not an error in the middle of the run: the epoch's order is read before its first
    batch, and torch's loader runs that epoch and the rest, the warning naming the batch."""
    ds = datasets.ImageFolder(jpeg_folder, T.Compose([T.Resize((24, 24)), T.PILToTensor()]))
    loader = DataLoader(ds, batch_sampler=Buckets(len(ds)), backend="cpu")
    assert len(loader) == 4
    with pytest.warns(FallbackWarning, match="batch 1 of the Buckets has 2 samples, not its batch_size 4"):
        sizes = [len(y) for _, y in loader]
    assert sizes == [4, 2, 4, 1]
    assert [len(y) for _, y in loader] == sizes
