"""A transform hpuload translates only in part stays on hpuload's path: the prefix it translates
runs natively, the steps after it (a `Lambda`, a class of the user's, an op in an order
hpuload does not run) run in Python on each sample the prefix made, with generators seeded per
sample, and the loop's own generators untouched."""

import random
import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from PIL import Image, ImageOps
from torchvision import datasets
from torchvision import transforms as T
from torchvision.transforms import v2

from hpuload.torch import DataLoader, FallbackWarning, HabanaDataLoader, PythonTailWarning


class Invert:
    """A user's class on PIL images."""

    def __call__(self, img):
        assert isinstance(img, Image.Image) and img.mode == "RGB"
        return ImageOps.invert(img)


class Draws:
    """A user's class that draws from the three global generators and returns the draws."""

    def __call__(self, x):
        return torch.tensor([random.random(), torch.rand(()).item(), float(np.random.rand())], dtype=torch.float64)


def in_processes(loader):
    """`loader` with its tail placed in its worker processes from the first batch on, whatever
    the timing of its first batches would choose (`_tail.Placement`)."""
    from hpuload import _tail

    place = _tail.Placement(loader.num_workers)
    place.where, place.measured = "processes", (0.0, 0.0)
    loader._tail_place = place
    return loader


def build(make, root, transform, **kwargs):
    """The loader, with a FallbackWarning an error and the PythonTailWarning recorded."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("error", FallbackWarning)
        warnings.simplefilter("always", PythonTailWarning)
        loader = make(datasets.ImageFolder(root, transform), **kwargs)
    tails = [w for w in record if issubclass(w.category, PythonTailWarning)]
    return loader, tails


@pytest.mark.parametrize("make", [DataLoader, HabanaDataLoader])
def test_a_lambda_after_the_translated_steps_runs_on_hpuloads_output_without_falling_back(jpeg_folder, make):
    head = [T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ToTensor()]
    plain, none = build(make, jpeg_folder, T.Compose(head), batch_size=8, shuffle=True, seed=5, num_workers=2)
    tailed, tails = build(
        make, jpeg_folder, T.Compose(head + [T.Lambda(lambda x: x * 2 - 1)]), batch_size=8, shuffle=True, seed=5, num_workers=2
    )
    assert type(tailed) is make and not none
    assert len(tails) == 1
    assert "Lambda in Python, after the native RandomResizedCrop, RandomHorizontalFlip, ToTensor" in str(tails[0].message)
    assert tails[0].filename == __file__, "the warning points at the line that built the loader"
    n = 0
    for (x, y), (u, v) in zip(plain, tailed):
        assert torch.equal(x * 2 - 1, u) and torch.equal(y, v)
        n += len(y)
    report = tailed.report()["python_tail"]
    assert report["steps"] == ["Lambda"] and report["samples"] == n == 41
    assert "Lambda is not one hpuload implements" in report["reason"]


def test_a_users_class_on_pil_images_gets_the_prefix_output_and_matches_torchvision(jpeg_folder):
    transform = T.Compose([T.Resize(40), T.CenterCrop(32), Invert(), T.ToTensor(), T.Normalize([0.5] * 3, [0.25] * 3)])
    ours, tails = build(DataLoader, jpeg_folder, transform, batch_size=8, backend="cpu")
    assert "Invert, ToTensor, Normalize in Python, after the native Resize, CenterCrop" in str(tails[0].message)
    theirs = tud.DataLoader(datasets.ImageFolder(jpeg_folder, transform), batch_size=8)
    for (x, y), (u, v) in zip(ours, theirs):
        assert x.shape == u.shape and x.dtype == u.dtype and torch.equal(y, v)
        # The CPU path is torchvision's within a level; Normalize scales a level by 4.
        assert ((x - u).abs() * 0.25 * 255).max().item() <= 1.01


def test_a_v2_tail_gets_tagged_images_after_to_image(jpeg_folder):
    seen = []

    def record(x):
        seen.append(type(x))
        return x

    transform = v2.Compose(
        [v2.RandomResizedCrop(24), v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Lambda(record)]
    )
    loader, tails = build(DataLoader, jpeg_folder, transform, batch_size=8)
    x, _ = next(iter(loader))
    assert len(tails) == 1 and x.shape == (8, 3, 24, 24) and x.dtype == torch.float32
    from torchvision import tv_tensors

    assert set(seen) == {tv_tensors.Image}


def test_a_tail_draws_from_generators_seeded_per_sample_and_leaves_the_loops_own_untouched(jpeg_folder):
    transform = T.Compose([T.RandomResizedCrop(16), T.ToTensor(), Draws()])

    def epochs(loader, n):
        return [torch.cat([x for x, _ in loader]) for _ in range(n)]

    a, _ = build(DataLoader, jpeg_folder, transform, batch_size=8, shuffle=True, seed=11)
    b, _ = build(DataLoader, jpeg_folder, transform, batch_size=8, shuffle=True, seed=11)
    states = random.getstate(), torch.get_rng_state(), np.random.get_state()[1].copy()
    first, second = epochs(a, 2)
    assert random.getstate() == states[0] and torch.equal(torch.get_rng_state(), states[1])
    assert np.array_equal(np.random.get_state()[1], states[2])
    assert torch.equal(epochs(b, 1)[0], first), "the same seed draws the same"
    assert len({tuple(r.tolist()) for r in first}) == 41, "no two samples share a draw"
    assert not torch.equal(first, second), "each epoch draws anew"
    # A resumed loader continues with the draws the interrupted one would have made.
    c, _ = build(DataLoader, jpeg_folder, transform, batch_size=8, shuffle=True, seed=11)
    it = iter(c)
    done = [next(it)[0], next(it)[0]]
    state = c.state_dict()
    resumed, _ = build(DataLoader, jpeg_folder, transform, batch_size=8, shuffle=True, seed=0)
    resumed.load_state_dict(state)
    assert torch.equal(torch.cat(done + [x for x, _ in resumed]), first)


def test_a_transform_ending_in_pil_images_reaches_the_users_collate_fn_as_pil(png_folder):
    def collate(batch):
        assert all(isinstance(img, Image.Image) and img.size == (20, 20) for img, _ in batch)
        return torch.stack([T.functional.pil_to_tensor(img) for img, _ in batch]), torch.tensor([t for _, t in batch])

    loader, tails = build(DataLoader, png_folder, T.Compose([T.CenterCrop(20)]), batch_size=8, collate_fn=collate)
    assert "the transform yields PIL images" in str(tails[0].message)
    theirs = tud.DataLoader(datasets.ImageFolder(png_folder, T.Compose([T.CenterCrop(20)])), batch_size=8, collate_fn=collate)
    for (x, y), (u, v) in zip(loader, theirs):
        assert torch.equal(y, v) and torch.equal(x, u)


def test_a_transform_reassigned_to_one_with_a_tail_keeps_the_loader_and_runs_it(jpeg_folder):
    loader, _ = build(DataLoader, jpeg_folder, T.Compose([T.RandomResizedCrop(32), T.ToTensor()]), batch_size=8)
    next(iter(loader))
    loader.dataset.transform = T.Compose([T.RandomResizedCrop(32), T.ToTensor(), T.Lambda(lambda x: x * 0 + 0.25)])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("error", FallbackWarning)
        warnings.simplefilter("always", PythonTailWarning)
        batches = list(loader)
    assert [w.category for w in record] == [PythonTailWarning]
    assert record[0].filename == __file__
    assert type(loader) is DataLoader and all(bool((x == 0.25).all()) for x, _ in batches)
    # And back: the whole transform native again, no tail.
    loader.dataset.transform = T.Compose([T.RandomResizedCrop(32), T.ToTensor()])
    assert all(not bool((x == 0.25).all()) for x, _ in loader)
    assert "python_tail" not in loader.report()


def test_a_transform_without_a_translatable_crop_or_resize_first_still_falls_back_naming_it(jpeg_folder):
    transform = T.Compose([T.Lambda(lambda im: im.rotate(90)), T.RandomResizedCrop(32), T.ToTensor()])
    with pytest.warns(FallbackWarning, match="Lambda"):
        loader = DataLoader(datasets.ImageFolder(jpeg_folder, transform), batch_size=8)
    assert isinstance(loader, tud.DataLoader) and not isinstance(loader, DataLoader)


def test_the_tail_in_worker_processes_gives_what_it_gives_in_the_iterating_thread(jpeg_folder):
    transform = T.Compose([T.RandomResizedCrop(16), T.ToTensor(), Draws()])
    inline, _ = build(DataLoader, jpeg_folder, transform, batch_size=8, shuffle=True, seed=4, num_workers=0)
    forked, _ = build(DataLoader, jpeg_folder, transform, batch_size=8, shuffle=True, seed=4, num_workers=2)
    forked = in_processes(forked)
    states = random.getstate(), torch.get_rng_state()
    for _ in range(2):
        a = [(x, y) for x, y in inline]
        b = [(x, y) for x, y in forked]
        assert len(a) == len(b) == 6
        assert all(torch.equal(x, u) and torch.equal(y, v) for (x, y), (u, v) in zip(a, b))
    assert random.getstate() == states[0] and torch.equal(torch.get_rng_state(), states[1])
    assert forked.report()["python_tail"]["samples"] == 82
    pool = forked._tail_pool
    assert pool is not None and len(pool._pids) == 2
    del forked
    import gc

    gc.collect()
    assert pool._pool is None, "the worker processes end with their loader"


class InPlace:
    """A user's step that works in place and returns (views of) its input."""

    def __call__(self, x):
        return [x.mul_(2), x[0]]


def test_a_tail_that_works_in_place_and_returns_views_gives_what_it_gives_in_the_iterating_thread(jpeg_folder):
    # The processes' input buffers are reused two batches later: outputs that are views of them
    # must not change while the loop still holds them.
    transform = T.Compose([T.CenterCrop(16), T.ToTensor(), InPlace()])
    inline, _ = build(DataLoader, jpeg_folder, transform, batch_size=4, num_workers=0, collate_fn=list)
    forked, _ = build(DataLoader, jpeg_folder, transform, batch_size=4, num_workers=2, collate_fn=list)
    forked = in_processes(forked)
    a, b = list(inline), list(forked)
    assert len(a) == len(b) == 11
    for batch, other in zip(a, b):
        for ((x, c), t), ((u, w), s) in zip(batch, other):
            assert torch.equal(x, u) and torch.equal(c, w) and torch.equal(c, x[0]) and t == s


class Dies:
    def __call__(self, x):
        import os

        os._exit(3)


class Fails:
    def __call__(self, x):
        raise ValueError("the user's step failed")


@pytest.mark.parametrize("workers,processes", [(0, False), (2, False), (2, True)])
def test_a_failing_tail_step_raises_its_error_where_the_loop_iterates(jpeg_folder, workers, processes):
    loader, _ = build(DataLoader, jpeg_folder, T.Compose([T.CenterCrop(16), T.ToTensor(), Fails()]), batch_size=8, num_workers=workers)
    loader = in_processes(loader) if processes else loader
    with pytest.raises(ValueError, match="the user's step failed"):
        next(iter(loader))


def test_a_worker_process_that_dies_is_an_error_naming_the_steps_not_a_hang(jpeg_folder):
    loader, _ = build(DataLoader, jpeg_folder, T.Compose([T.CenterCrop(16), T.ToTensor(), Dies()]), batch_size=8, num_workers=2)
    loader = in_processes(loader)
    with pytest.raises(RuntimeError, match=r"worker process running the transform's Python steps \(Dies\) died"):
        next(iter(loader))


def test_the_processes_write_into_an_output_batch_again_only_once_nothing_holds_it(jpeg_folder, monkeypatch):
    from hpuload import _tail

    made = []
    shared = _tail._shared
    monkeypatch.setattr(_tail, "_shared", lambda shape, dtype: made.append(shape) or shared(shape, dtype))
    transform = T.Compose([T.CenterCrop(16), T.ToTensor(), T.Lambda(lambda x: x[:, :8].flip(0))])
    loader, _ = build(DataLoader, jpeg_folder, transform, batch_size=4, num_workers=2)
    loader = in_processes(loader)
    kept, expected = [], []
    for k, (x, _) in enumerate(loader):
        if k in (3, 5):
            kept += [x, x[0].numpy()]  # held (the batch, an array over it) for the rest of the epoch
            expected += [x.clone(), x[0].numpy().copy()]
    outputs = [s for s in made if s[1:] == (3, 8, 16)]
    # 11 batches: the first's outputs come back as a list; of the other ten, the one being
    # written, the one handed out, the one the loop's variable still holds and the two kept
    # needed their own memory; the rest wrote into memory nothing held any more.
    assert len(outputs) == 5
    assert all(torch.equal(a, b) if isinstance(a, torch.Tensor) else np.array_equal(a, b) for a, b in zip(kept, expected))


def test_a_tail_gives_the_same_batches_whether_it_runs_in_the_thread_or_the_processes(jpeg_folder):
    # Where the tail runs (`_tail.Placement`) only moves work: the same seeded draws, the same
    # input, so the same batches, and the loop's own generators untouched either way.
    from hpuload import _tail

    transform = T.Compose([T.RandomResizedCrop(16), T.ToTensor(), Draws()])
    loaders = [build(DataLoader, jpeg_folder, transform, batch_size=8, shuffle=True, seed=4, num_workers=2)[0] for _ in range(3)]
    thread = _tail.Placement(2)
    thread.where, thread.measured = "thread", (0.0, 0.0)
    loaders[1]._tail_place = thread
    in_processes(loaders[2])
    states = random.getstate(), torch.get_rng_state()
    for _ in range(2):
        probed, here, there = ([(x, y) for x, y in loader] for loader in loaders)
        assert len(probed) == len(here) == len(there) == 6
        for (x, y), (u, v), (w, z) in zip(probed, here, there):
            assert torch.equal(x, u) and torch.equal(x, w) and torch.equal(y, v) and torch.equal(y, z)
    assert random.getstate() == states[0] and torch.equal(torch.get_rng_state(), states[1])
    assert loaders[1]._tail_pool is None, "no processes are started for a tail that runs in the thread"
    runs_in = loaders[0].report()["python_tail"]["runs_in"]
    assert runs_in["where"] in ("thread", "2 processes") and runs_in["native_in_parallel"] >= 1


@pytest.mark.parametrize("processes", [False, True])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_tail_on_half_floats_gets_them_in_the_memory_layout_torchvisions_conversion_gives(png_folder, dtype, processes):
    """`ToImage` and `PILToTensor` hand on a channels-last view of the image's bytes, which
    `ToDtype` keeps, and torch's half-float grey (`Grayscale`, saturation) rounds otherwise on
    it than on a contiguous tensor: a tail after them gets its input in that layout, and its
    output is the Dataset's bit for bit (before, 2 of 255 off in 20-40% of values)."""
    for transform in (
        v2.Compose([v2.Resize((40, 52)), v2.ToImage(), v2.ToDtype(dtype, scale=True), v2.Grayscale(3)]),
        T.Compose([T.Resize((40, 52)), T.PILToTensor(), T.ConvertImageDtype(dtype), T.ColorJitter(saturation=(1.5, 1.5))]),
    ):
        ds = datasets.ImageFolder(png_folder, transform)
        with pytest.warns(PythonTailWarning):
            loader = DataLoader(ds, batch_size=4, shuffle=False, backend="cpu")
        if processes:
            in_processes(loader)
        got = torch.cat([x for x, _ in loader])
        want = torch.stack([ds[i][0] for i in range(len(ds))])
        assert got.dtype == want.dtype == dtype
        assert torch.equal(got, want), f"{(got != want).float().mean():.1%} of values differ"


def test_half_floats_whose_layout_each_images_size_decides_are_never_handed_out_otherwise_than_torchs(tmp_path):
    """A `CenterCrop` larger than some images pads them into new, contiguous memory, and
    leaves the others' channels-last view: the half-float grey after it rounds otherwise on
    each. hpuload cannot hand its tail each image's layout, so it does not run such a tail (a
    shorter prefix, or torch's loader): every value is torch's (before, a step of 1/128 off
    in some pixels of the padded images)."""
    rng = np.random.default_rng(0)
    for k, (w, h) in enumerate([(40, 30), (90, 70), (33, 80), (120, 100)]):
        (tmp_path / "a").mkdir(exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(tmp_path / "a" / f"{k}.png")
    transform = v2.Compose(
        [v2.ToImage(), v2.ToDtype(torch.bfloat16, scale=True), v2.CenterCrop(64), v2.Grayscale(1), v2.Normalize([0.5], [0.25])]
    )
    ds = datasets.ImageFolder(tmp_path, transform)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.cat([x for x, _ in DataLoader(ds, batch_size=2, backend="cpu")])
    want = torch.stack([ds[i][0] for i in range(len(ds))])
    assert torch.equal(got, want), f"{(got != want).float().mean():.1%} of values differ"


def _hash_for(seconds: float) -> None:
    """Spends about `seconds` of this thread's CPU (hashing releases the GIL)."""
    import hashlib
    import time

    data, start = b"x" * (1 << 20), time.thread_time()
    while time.thread_time() - start < seconds:
        hashlib.sha256(data).digest()


def test_a_tail_that_costs_less_than_the_native_work_per_sample_stays_in_the_iterating_thread():
    import threading

    from hpuload import _tail

    place = _tail.Placement(2)
    for k in range(place.PROBE):
        assert place.where is None, "still timing"
        if k:
            native = threading.Thread(target=_hash_for, args=(0.2,))  # the native workers: 2 ms a sample
            native.start()
            native.join()
        place.probe(lambda: list(range(100)))
    tail, native_per_sample = place.measured
    assert place.where == "thread" and native_per_sample >= 1.5e-3 and tail < native_per_sample / 2


def test_a_tail_that_would_hold_the_native_workers_back_moves_to_the_processes():
    from hpuload import _tail

    place = _tail.Placement(2)
    work = lambda: _hash_for(0.05) or list(range(100))  # 0.5 ms a sample, no native work beside it
    place.probe(work)
    place.probe(work)  # far more than the thread can take: no need to time a third batch
    assert place.where == "processes" and place.measured[0] >= 4e-4


class DoublesInPlaceThenGivesArrays:
    """A user's step that doubles its input in place and returns it: a tensor the first time,
    a NumPy array over the same memory after."""

    def __init__(self):
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        y = x.mul_(2)
        return y if self.calls == 1 else y.numpy()


@pytest.mark.parametrize("workers", [0, 2])
def test_outputs_over_the_native_batch_are_copied_before_the_loader_writes_it_again(jpeg_folder, workers):
    # In the thread the tail works on the native batch's rows themselves once its outputs go
    # into a batch of their own; an output that goes back as itself over those rows must be a
    # copy: one that held the loader's buffer would make it allocate another for each batch.
    head = [T.CenterCrop(16), T.ToTensor()]
    plain, _ = build(DataLoader, jpeg_folder, T.Compose(head), batch_size=4, num_workers=workers)
    tailed, _ = build(
        DataLoader, jpeg_folder, T.Compose(head + [DoublesInPlaceThenGivesArrays()]), batch_size=4, num_workers=workers, collate_fn=list
    )
    expected = [x * 2 for x, _ in plain]
    got = list(tailed)  # all held until the end
    assert len(got) == len(expected) == 11
    for batch, want in zip(got, expected):
        for (x, _), w in zip(batch, want):
            assert torch.equal(torch.as_tensor(x), w)
    assert tailed.report()["extra_buffers"] == 0


def _convert_to_rgb(image):
    """open_clip's step, between its crop and `ToTensor`."""
    return image.convert("RGB")


class ToRGB:
    def __call__(self, image):
        return image.convert("RGB")


class MaybeConvertMode:
    """open_clip 3's mode conversion (its `image_transform` since 2024)."""

    def __call__(self, pic):
        if isinstance(pic, (np.ndarray, torch.Tensor)):
            return pic
        return pic.convert("RGB")


class MaybeToTensor(T.ToTensor):
    """open_clip 3's conversion: a subclass of `ToTensor` with a `__call__` of its own."""

    def __call__(self, pic):
        if isinstance(pic, torch.Tensor):
            return pic
        return T.functional.to_tensor(pic)


class ToTensorHalved(MaybeToTensor):
    def __call__(self, pic):
        return super().__call__(pic) / 2


def _turned_when_large(image):
    return image.transpose(Image.Transpose.FLIP_LEFT_RIGHT) if image.width > 300 else image


def _exact_natively(folder, transform):
    ds = datasets.ImageFolder(folder, transform)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        warnings.simplefilter("error", PythonTailWarning)
        loader = DataLoader(ds, batch_size=4, backend="cpu")
    got = torch.cat([x for x, _ in loader])
    assert torch.equal(got, torch.stack([ds[i][0] for i in range(len(ds))]))


@pytest.mark.parametrize(
    "transform",
    [
        # open_clip's training and evaluation transforms
        T.Compose([T.RandomResizedCrop(48, scale=(1, 1), ratio=(1, 1), interpolation=T.InterpolationMode.BICUBIC),
                   _convert_to_rgb, T.ToTensor(), T.Normalize((0.48, 0.46, 0.41), (0.27, 0.26, 0.28))]),
        T.Compose([T.Resize(48, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(48), _convert_to_rgb,
                   T.ToTensor(), T.Normalize((0.48, 0.46, 0.41), (0.27, 0.26, 0.28))]),
        T.Compose([T.Lambda(lambda im: im.convert("RGB")), T.Resize(40), T.CenterCrop(40), T.ToTensor()]),
        v2.Compose([v2.Lambda(lambda im: im.convert("RGB")), v2.CenterCrop(40), v2.PILToTensor()]),
        T.Compose([ToRGB(), T.CenterCrop(40), T.Lambda(lambda x: x), T.PILToTensor()]),
        T.Compose([T.Resize(48, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(48), MaybeConvertMode(),
                   MaybeToTensor(), T.Normalize((0.48, 0.46, 0.41), (0.27, 0.26, 0.28))]),
    ],
    ids=["open_clip_train", "open_clip_eval", "lambda_first", "v2_lambda", "class_and_identity", "open_clip_3_eval"],
)
def test_a_step_that_converts_rgb_images_to_rgb_runs_as_nothing_natively(png_folder, transform):
    """A conversion to RGB of the user's own (a function, a Lambda, a class) on images that
    are RGB there changes nothing, and a class that gives what `ToTensor` gives is one: they
    used to run the rest in Python (open_clip's transforms) or send a Lambda placed first to
    torch's loader."""
    _exact_natively(png_folder, transform)


@pytest.mark.parametrize(
    "transform",
    [
        T.Compose([T.Grayscale(1), T.Lambda(lambda im: im.convert("RGB")), T.CenterCrop(32), T.PILToTensor()]),
        T.Compose([T.RandomInvert(1.0), T.Grayscale(1), T.Resize((30, 34)), T.ColorJitter(brightness=(1.2, 1.2)),
                   T.Lambda(lambda im: im.convert("RGB")), T.PILToTensor()]),
    ],
)
def test_a_conversion_to_rgb_after_grayscale_to_one_channel_makes_three_as_torchvision(png_folder, transform):
    """`convert("RGB")` does nothing to an RGB image, but after `Grayscale(1)` the image is
    "L" and it makes three channels again: not skipped as nothing (hpuload handed out one
    channel where torchvision's batches have three); it runs in Python or falls back, and the
    batches are the Dataset's."""
    ds = datasets.ImageFolder(png_folder, transform)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        warnings.simplefilter("ignore", PythonTailWarning)
        got = torch.cat([x for x, _ in DataLoader(ds, batch_size=4, backend="cpu")])
    want = torch.stack([ds[i][0] for i in range(len(ds))])
    assert got.shape == want.shape and torch.equal(got, want)


def test_a_users_step_that_changes_some_rgb_images_still_runs_in_python(png_folder):
    """Watched on images up to a photo's size: a step that turns only large images is no
    conversion, and runs as the user's own code."""
    ds = datasets.ImageFolder(png_folder, T.Compose([T.Resize((320, 340)), _turned_when_large, T.CenterCrop(40), T.PILToTensor()]))
    with pytest.warns(PythonTailWarning, match="function"):
        loader = DataLoader(ds, batch_size=4, backend="cpu")
    assert torch.equal(torch.cat([x for x, _ in loader]), torch.stack([ds[i][0] for i in range(len(ds))]))


def test_a_users_conversion_to_a_tensor_that_scales_otherwise_still_runs_in_python(png_folder):
    ds = datasets.ImageFolder(png_folder, T.Compose([T.CenterCrop(40), ToTensorHalved()]))
    with pytest.warns(PythonTailWarning, match="ToTensorHalved"):
        loader = DataLoader(ds, batch_size=4, backend="cpu")
    assert torch.equal(torch.cat([x for x, _ in loader]), torch.stack([ds[i][0] for i in range(len(ds))]))
