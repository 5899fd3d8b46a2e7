"""hpuload's bad-input policy on torch's loader: a dataset hpuload hands to torch's DataLoader
keeps the policy it has on hpuload's own path. A damaged or missing file is named and its
sample replaced (`on_error="skip"`, the default), or raised as `hpuload.SampleError` naming it
(`on_error="fail"`); past the error budget `hpuload.ErrorBudgetExceeded`; a bug in the
Dataset's own code is raised as torch's loader raises it."""

import re
import warnings

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from PIL import Image

import hpuload
from hpuload.torch import DataLoader, FallbackWarning, SkippedSampleWarning


class MeanCentred(tud.Dataset):
    """A Dataset of the user's own that computes on its pixels (each image less its own
    mean): hpuload cannot run it, so it falls back. `bug_at` raises a KeyError of its own."""

    def __init__(self, files, bug_at=None, reader="pil"):
        self.files, self.bug_at, self.reader = files, bug_at, reader

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        if i == self.bug_at:
            return {}["missing key"]
        if self.reader == "pil":
            image = np.asarray(Image.open(self.files[i]).convert("RGB").resize((16, 16)), dtype=np.float32)
            x = torch.from_numpy(image).permute(2, 0, 1)
        else:
            from torchvision.io import ImageReadMode, read_image
            from torchvision.transforms.v2.functional import resize

            x = resize(read_image(str(self.files[i]), ImageReadMode.RGB), [16, 16]).float()
        return x - x.mean(), i


@pytest.fixture
def files(jpeg_folder, tmp_path):
    out = []
    for k, jpg in enumerate(sorted(jpeg_folder.rglob("*.jpg"))[:10]):
        path = tmp_path / f"{k}.jpg"
        path.write_bytes(jpg.read_bytes())
        out.append(path)
    return out


def fallback(dataset, **kwargs):
    with pytest.warns(FallbackWarning):
        loader = DataLoader(dataset, batch_size=4, **kwargs)
    assert loader.dataset is dataset  # the user's own, as torch's loader holds it
    return loader


@pytest.mark.parametrize("damage", ["cut", "header", "missing"])
@pytest.mark.parametrize("reader", ["pil", "torchvision"])
def test_a_damaged_file_in_a_fallback_is_named_and_its_sample_replaced_by_the_next(files, damage, reader):
    bad = files[5]
    if damage == "missing":
        bad.unlink()
    else:
        bad.write_bytes(bad.read_bytes()[: 10 if damage == "header" else bad.stat().st_size // 3])
    dataset = MeanCentred(files, reader=reader)
    loader = fallback(dataset)
    with pytest.warns(SkippedSampleWarning, match=rf"skipped sample 5 \({re.escape(str(bad))}\): cannot be loaded; replaced by sample 6"):
        batches = list(loader)
    labels = torch.cat([y for _, y in batches]).tolist()
    assert labels == [0, 1, 2, 3, 4, 6, 6, 7, 8, 9]  # the batch's size kept, nothing else lost
    assert torch.equal(batches[1][0][1], dataset[6][0])


def test_a_damaged_file_in_a_fallback_with_workers_is_replaced_and_the_run_goes_on(files):
    files[2].write_bytes(b"\xff\xd8\xff")
    loader = fallback(MeanCentred(files), num_workers=2)
    for _ in range(2):  # each epoch, workers started afresh
        assert torch.cat([y for _, y in loader]).tolist() == [0, 1, 3, 3, 4, 5, 6, 7, 8, 9]


def test_a_damaged_file_in_a_fallback_under_fail_raises_sample_error_naming_it(files):
    files[3].write_bytes(b"not an image")
    for workers in (0, 2):
        loader = fallback(MeanCentred(files), on_error="fail", num_workers=workers)
        with pytest.raises(hpuload.SampleError, match=rf"sample 3 \({re.escape(str(files[3]))}\): cannot be loaded") as raised:
            list(loader)
        if workers == 0:  # as hpuload's own: (message, file, reason)
            assert raised.value.args[1] == str(files[3]) and "UnidentifiedImageError" in raised.value.args[2]


def test_a_bug_in_the_datasets_own_code_is_raised_as_torchs_loader_raises_it(files):
    loader = fallback(MeanCentred(files, bug_at=2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SkippedSampleWarning)
        with pytest.raises(KeyError, match="missing key"):
            list(loader)


def test_a_fallback_past_its_error_budget_raises_error_budget_exceeded(files):
    for path in files[:4]:
        path.write_bytes(b"")
    loader = fallback(MeanCentred(files), error_budget=0.2)  # 2 of 10
    with pytest.warns(SkippedSampleWarning), pytest.raises(hpuload.ErrorBudgetExceeded, match="over the error budget of 2"):
        list(loader)


@pytest.mark.parametrize("error", ["SampleError", "ErrorBudgetExceeded", "LoaderError", "PipelineError"])
def test_hpuloads_exceptions_pickle_so_a_worker_raising_one_reaches_the_main_process(error):
    # torch's workers send an error's class to the main process pickled; one that cannot be
    # pickled is lost there, and the loader waits for its batch forever.
    import pickle

    kind = getattr(hpuload, error)
    assert pickle.loads(pickle.dumps(kind)) is kind
    assert isinstance(pickle.loads(pickle.dumps(kind("message"))), kind)


class Batched(MeanCentred):
    """A dataset that fetches a batch at once (`__getitems__`, as Hugging Face's do)."""

    def __getitems__(self, indices):
        return [self[i] for i in indices]


def test_a_damaged_file_in_a_dataset_fetching_batches_at_once_is_replaced_alone(files):
    files[1].write_bytes(b"\x89PNG\r\n\x1a\n")
    loader = fallback(Batched(files))
    with pytest.warns(SkippedSampleWarning, match=rf"skipped sample 1 \({re.escape(str(files[1]))}\)"):
        assert torch.cat([y for _, y in loader]).tolist() == [0, 2, 2, 3, 4, 5, 6, 7, 8, 9]


def test_a_fallback_with_spawned_workers_keeps_the_policy(files):
    files[7].write_bytes(b"")
    loader = fallback(MeanCentred(files), num_workers=2, multiprocessing_context="spawn", timeout=120)
    assert torch.cat([y for _, y in loader]).tolist() == [0, 1, 2, 3, 4, 5, 6, 8, 8, 9]


def test_a_damaged_file_under_subsets_and_concatenations_is_named_by_the_file_its_dataset_lists(files):
    # An error that names no file (here torch's own decoder's), the path found through the
    # Subset and ConcatDataset that hold it.
    class Listed(MeanCentred):
        def __init__(self, files):
            super().__init__(files)
            self.samples = [(str(f), 0) for f in files]

        def __getitem__(self, i):
            if i == 4:
                raise OSError("a read failed somewhere")
            return super().__getitem__(i)

    dataset = tud.ConcatDataset([tud.Subset(Listed(files[:5]), [0, 1]), tud.Subset(Listed(files), [2, 3, 4, 5])])
    loader = fallback(dataset)
    with pytest.warns(SkippedSampleWarning, match=rf"skipped sample 4 \({re.escape(str(files[4]))}\): cannot be loaded; replaced by sample 5"):
        assert torch.cat([y for _, y in loader]).tolist() == [0, 1, 2, 3, 5, 5]
