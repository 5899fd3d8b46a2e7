"""Shards on S3: a real S3-compatible server (moto in server mode, a subprocess on 127.0.0.1)
holds a folder converted with `make-shards`; hpuload reads it at 1, 2 and 4 ranks, resumes at
random points, names damaged shards, and `python -m hpuload bench` reports storage."""

import os
import random
import socket
import subprocess
import sys
import time
import urllib.request

import boto3
import pytest
import torch

import hpuload
from hpuload._hpuload import cli
from hpuload.torch import DataLoader, HabanaDataLoader


BUCKET = "train"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3(tmp_path_factory, jpeg_folder):
    """A moto S3 server with the test folder as shards (and a damaged copy): yields
    (pattern, shard count, local shards folder). Credentials and endpoint are set in the
    environment, as a user would."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    env = {
        "AWS_ACCESS_KEY_ID": "hpuload-test",
        "AWS_SECRET_ACCESS_KEY": "hpuload-test-secret",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint, timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("moto did not start") from None
                time.sleep(0.1)
        out = tmp_path_factory.mktemp("s3-shards")
        assert cli(["hpuload", "make-shards", "--data", str(jpeg_folder), "--out", str(out), "--shard-size", "300KB"]) == 0
        n = len(list(out.glob("*.tar")))
        assert n >= 4
        client = boto3.client("s3", endpoint_url=endpoint)
        client.create_bucket(Bucket=BUCKET)
        for f in sorted(out.iterdir()):
            client.upload_file(str(f), BUCKET, f"clean/{f.name}")
            data = f.read_bytes()
            if f.name == "shard-000001.tar":
                data = data[: len(data) // 2]  # cut in half; its index stays whole
            client.put_object(Bucket=BUCKET, Key=f"cut/{f.name}", Body=data)
        yield f"s3://{BUCKET}/clean/shard-{{000000..{n - 1:06}}}.tar", n, out
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def webdataset(pattern, cache):
    return hpuload.WebDataset(pattern, pipeline="resnet50_eval", cache_dir=cache, timeout=10)


def epoch(loader):
    out = []
    for x, y in loader:
        out.append((x.clone(), y.clone(), list(loader.last_indices[: loader.last_valid])))
    return out


def test_s3_shards_give_the_batches_of_the_same_shards_on_disk(s3, tmp_path):
    pattern, n, local = s3
    local_pattern = str(local / f"shard-{{000000..{n - 1:06}}}.tar")
    want = epoch(DataLoader(hpuload.WebDataset(local_pattern, pipeline="resnet50_eval"), batch_size=8, shuffle=True, seed=2))
    for cache in (False, tmp_path / "cache"):
        loader = DataLoader(webdataset(pattern, cache), batch_size=8, shuffle=True, seed=2)
        got = epoch(loader)
        assert len(got) == len(want)
        for (x1, y1, i1), (x2, y2, i2) in zip(got, want):
            assert torch.equal(x1, x2) and torch.equal(y1, y2) and i1 == i2
        storage = loader.report()["storage"]
        assert storage["requests"] > 0 and storage["bytes_fetched"] > 0


@pytest.mark.parametrize("world", [1, 2, 4])
def test_ranks_on_s3_get_equal_batch_counts_and_cover_every_sample_once(s3, tmp_path, monkeypatch, world):
    pattern, _, _ = s3
    monkeypatch.setenv("WORLD_SIZE", str(world))
    counts, seen = [], []
    for rank in range(world):
        monkeypatch.setenv("RANK", str(rank))
        loader = HabanaDataLoader(
            webdataset(pattern, tmp_path / "cache"), batch_size=4, shuffle=True, pad_last_batch=True
        )
        batches = epoch(loader)
        counts.append(len(batches))
        assert all(len(y) == 4 for _, y, _ in batches), "static shapes, as asked"
        seen.extend(i for _, _, idx in batches for i in idx)
    assert len(set(counts)) == 1, counts
    assert sorted(seen) == list(range(41)), "every sample exactly once across ranks"


def test_resume_at_random_points_on_s3_is_byte_identical(s3, tmp_path):
    pattern, _, _ = s3
    rng = random.Random(11)

    def make():
        return DataLoader(webdataset(pattern, tmp_path / "cache"), batch_size=4, shuffle=True, seed=5)

    full = make()
    epoch(full)
    want = epoch(full)  # epoch 1, uninterrupted
    for stop in sorted(rng.sample(range(1, len(want)), 3)):
        first = make()
        epoch(first)
        it = iter(first)
        for _ in range(stop):
            next(it)
        state = first.state_dict()
        it.close()
        resumed = make()
        resumed.load_state_dict(state)
        rest = epoch(resumed)
        assert len(rest) == len(want) - stop
        for (x1, y1, i1), (x2, y2, i2) in zip(rest, want[stop:]):
            assert torch.equal(x1, x2) and torch.equal(y1, y2) and i1 == i2


def test_a_truncated_shard_on_s3_is_named_and_its_samples_skipped_within_the_budget(s3, tmp_path):
    pattern, _, _ = s3
    cut = pattern.replace("/clean/", "/cut/")
    strict = DataLoader(webdataset(cut, False), batch_size=8, on_error="fail")
    with pytest.raises(hpuload.SampleError) as e:
        list(strict)
    assert f"s3://{BUCKET}/cut/shard-000001.tar/" in str(e.value)
    assert "truncated" in str(e.value)
    assert e.value.args[1].startswith(f"s3://{BUCKET}/cut/shard-000001.tar/"), "the path, not folded"

    lenient = DataLoader(webdataset(cut, tmp_path / "cache"), batch_size=8, error_budget=0.5)
    with pytest.warns(hpuload.torch.SkippedSampleWarning, match=f"[(]s3://{BUCKET}/cut/shard-000001.tar/"):
        batches = list(lenient)
    assert sum(len(y) for _, y in batches) == 41, "nothing lost: replacements fill the batches"
    assert lenient.report()["skipped"] >= 1


def test_a_missing_shard_on_s3_is_an_error_naming_its_url(s3):
    pattern, n, _ = s3
    missing = pattern.replace(f"{n - 1:06}}}", f"{n + 2:06}}}")
    with pytest.raises(OSError, match=f"s3://{BUCKET}/clean/shard-{n:06}.tar"):
        DataLoader(webdataset(missing, False), batch_size=8)


def test_python_m_hpuload_bench_on_s3_reports_requests_bytes_and_storage_wait(s3, tmp_path):
    pattern, _, _ = s3
    r = subprocess.run(
        [sys.executable, "-m", "hpuload", "bench", "--data", pattern, "--batch", "8", "--epochs", "1",
         "--pipeline", "resnet50_eval", "--no-shard-cache", "--json", str(tmp_path / "r.json")],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "object storage (measured epochs):" in r.stdout
    assert "workers waiting for object storage" in r.stdout
    import json

    report = json.loads((tmp_path / "r.json").read_text())
    assert report["storage"]["requests"] >= 41
    assert report["storage"]["wait_sec"] > 0
    assert report["stages"]["storage"]["seconds"] > 0
    assert "hpuload-test-secret" not in r.stdout + r.stderr


def test_parquet_on_s3_gives_the_batches_of_the_same_files_on_disk(s3, jpeg_folder, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted(jpeg_folder.rglob("*.jpg"))
    classes = sorted({f.parent.name for f in files})
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table(
        {
            "image": pa.array([{"bytes": f.read_bytes(), "path": None} for f in files], type=image),
            "label": [classes.index(f.parent.name) for f in files],
        }
    )
    local = tmp_path / "pq"
    local.mkdir()
    client = boto3.client("s3")
    for i in range(3):
        part = table.slice(i * 14, 14)
        path = local / f"train-{i:05}-of-00003.parquet"
        pq.write_table(part, path, row_group_size=5)
        client.upload_file(str(path), BUCKET, f"pq/{path.name}")
    def parquet(spec, cache):
        return hpuload.Parquet(spec, pipeline="resnet50_eval", cache_dir=cache, timeout=10)

    want = epoch(DataLoader(parquet(str(local / "train-{00000..00002}-of-00003.parquet"), False), batch_size=8, shuffle=True, seed=2))
    remote = f"s3://{BUCKET}/pq/train-{{00000..00002}}-of-00003.parquet"
    for cache in (False, tmp_path / "cache"):
        loader = DataLoader(parquet(remote, cache), batch_size=8, shuffle=True, seed=2)
        got = epoch(loader)
        assert [i for _, _, i in got] == [i for _, _, i in want]
        assert all(torch.equal(a, b) and torch.equal(la, lb) for (a, la, _), (b, lb, _) in zip(got, want))
        assert loader.report()["storage"]["requests"] > 0


def coco_batches(annotations, root):
    """An epoch of torchvision's CocoDetection at `root` through the drop-in (no fallback):
    (images, boxes) per batch, and the report."""
    import warnings

    from test_detection import reference_collate
    from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
    from torchvision.transforms import v2 as T

    import hpuload.torch as ht

    tf = T.Compose([T.RandomIoUCrop(), T.RandomHorizontalFlip(), T.Resize((64, 64)), T.ToImage(),
                    T.ToDtype(torch.float32, scale=True), T.SanitizeBoundingBoxes(), T.ToPureTensor()])
    ds = wrap_dataset_for_transforms_v2(CocoDetection(root, str(annotations), transforms=tf))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ht.FallbackWarning)
        loader = ht.DataLoader(ds, batch_size=4, num_workers=2, seed=3, collate_fn=reference_collate)
    out = [(torch.stack(images), [t["boxes"].clone() for t in targets]) for images, targets in loader]
    return out, loader.report()


def assert_same_batches(got, want):
    assert len(got) == len(want) == 3
    for (a, boxes_a), (b, boxes_b) in zip(want, got):
        assert torch.equal(a, b)
        assert all(torch.equal(x, y) for x, y in zip(boxes_a, boxes_b))


def test_coco_detection_with_its_images_on_s3_gives_the_batches_of_the_local_folder(s3, jpeg_folder, tmp_path):
    """torchvision's CocoDetection keeps its root as given, so a bucket URL reaches hpuload,
    which reads each image as one request (torchvision itself could not open them)."""
    from test_detection import write_coco

    files = sorted(jpeg_folder.rglob("*.jpg"))[:12]
    ann = write_coco(jpeg_folder, files, tmp_path / "instances.json")
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    for f in files:
        client.upload_file(str(f), BUCKET, f"coco/{f.relative_to(jpeg_folder)}")
    local, _ = coco_batches(ann, str(jpeg_folder))
    remote, report = coco_batches(ann, f"s3://{BUCKET}/coco")
    assert_same_batches(remote, local)
    assert report["storage"]["requests"] >= 12


def test_coco_detection_with_its_images_in_shards_on_s3_gives_the_batches_of_the_local_folder(
    s3, jpeg_folder, tmp_path
):
    """`make-shards --coco` keeps each image's file_name as its member name, so the same
    annotation file reads the shards, on disk or in a bucket."""
    from test_detection import write_coco

    files = sorted(jpeg_folder.rglob("*.jpg"))[:12]
    ann = write_coco(jpeg_folder, files, tmp_path / "instances.json")
    out = tmp_path / "coco-shards"
    args = ["--coco", str(ann), "--data", str(jpeg_folder), "--out", str(out), "--shard-size", "150KB"]
    assert cli(["hpuload", "make-shards", *args]) == 0
    n = len(list(out.glob("*.tar")))
    assert n >= 2
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    for f in sorted(out.iterdir()):
        client.upload_file(str(f), BUCKET, f"coco-shards/{f.name}")
    pattern = f"shard-{{000000..{n - 1:06}}}.tar"
    local, _ = coco_batches(ann, str(jpeg_folder))
    on_disk, _ = coco_batches(ann, str(out / pattern))
    assert_same_batches(on_disk, local)
    remote, report = coco_batches(ann, f"s3://{BUCKET}/coco-shards/{pattern}")
    assert_same_batches(remote, local)
    assert report["storage"]["requests"] >= 1


def test_video_shards_on_s3_give_the_clips_of_the_same_shards_on_disk(s3, tmp_path):
    import shutil
    from pathlib import Path

    import boto3

    clips = Path(__file__).resolve().parents[2] / "tests" / "data" / "video"
    folder = tmp_path / "videos"
    for cls, clip in [("a", "high_bframes.mp4"), ("a", "vfr.mp4"), ("b", "main_cabac.mp4"), ("b", "baseline.mp4")]:
        (folder / cls).mkdir(parents=True, exist_ok=True)
        shutil.copy(clips / clip, folder / cls / clip)
    out = tmp_path / "shards"
    assert cli(["hpuload", "make-shards", "--video", "--data", str(folder), "--out", str(out), "--shard-size", "100KB"]) == 0
    n = len(list(out.glob("*.tar")))
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    for f in sorted(out.glob("shard-*")):
        client.upload_file(str(f), BUCKET, f"videos/{f.name}")
    names = f"shard-{{000000..{n - 1:06}}}.tar"
    crop = {"name": "crop", "ops": [{"op": "random_resized_crop", "size": 32}, {"op": "random_horizontal_flip"}]}

    def batches(spec, **storage):
        data = hpuload.VideoShards(spec, pipeline=crop, num_frames_per_clip=4, num_indices_between_frames=2, **storage)
        loader = DataLoader(
            data, batch_size=2, shuffle=True, generator=torch.Generator().manual_seed(1), output_dtype=torch.uint8
        )
        return [(x.clone(), y.clone()) for x, y in loader]

    local = batches(str(out / names))
    for storage in [{"cache_dir": False}, {"cache_dir": tmp_path / "cache"}]:
        remote = batches(f"s3://{BUCKET}/videos/{names}", **storage)
        assert len(remote) == len(local) == 2
        for (x, y), (rx, ry) in zip(local, remote):
            assert torch.equal(x, rx) and torch.equal(y, ry)
