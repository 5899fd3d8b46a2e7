"""Video through the Python package: `hpuload.VideoFolder` with torchcodec's sampler
parameters, batches `[B, T, C, H, W]` through `hpuload.torch.DataLoader`."""

import os
import shutil
from pathlib import Path

import pytest
import torch

import hpuload
from hpuload.torch import DataLoader

CLIPS = Path(__file__).resolve().parents[2] / "tests" / "data" / "video"

CROP = {
    "name": "video_crop",
    "ops": [{"op": "random_resized_crop", "size": 32}, {"op": "random_horizontal_flip"}],
}


@pytest.fixture
def videos(tmp_path):
    for cls, clip in [("a", "high_bframes.mp4"), ("a", "vfr.mp4"), ("b", "main_cabac.mp4"), ("b", "baseline.mp4")]:
        (tmp_path / cls).mkdir(exist_ok=True)
        shutil.copy(CLIPS / clip, tmp_path / cls / clip)
    return tmp_path


def test_a_video_folder_gives_uint8_btchw_clips_with_folder_labels(videos):
    data = hpuload.VideoFolder(videos, pipeline=CROP, num_frames_per_clip=4, num_indices_between_frames=2)
    loader = DataLoader(data, batch_size=2, output_dtype=torch.uint8)
    labels = []
    for clips, y in loader:
        assert clips.shape == (2, 4, 3, 32, 32)
        assert clips.dtype == torch.uint8
        labels += y.tolist()
    assert sorted(labels) == [0, 0, 1, 1]


def test_a_torchvision_transform_is_drawn_once_per_clip_and_normalised(videos):
    T = pytest.importorskip("torchvision.transforms")
    transform = T.Compose([T.RandomResizedCrop(24), T.ToTensor(), T.Normalize([0.5] * 3, [0.25] * 3)])
    data = hpuload.VideoFolder(videos, transform=transform, num_frames_per_clip=3, num_clips=2)
    clips, _ = next(iter(DataLoader(data, batch_size=4)))
    assert clips.shape == (4, 2, 3, 3, 24, 24)
    assert clips.dtype == torch.float32
    assert -2.5 <= clips.min() and clips.max() <= 2.5


def test_video_clips_repeat_for_a_seed_and_change_with_the_epoch(videos):
    data = hpuload.VideoFolder(videos, pipeline=CROP, num_frames_per_clip=2)

    def first(epoch):
        loader = DataLoader(data, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(3))
        loader.set_epoch(epoch)
        return next(iter(loader))[0]

    assert torch.equal(first(0), first(0))
    assert not torch.equal(first(0), first(1))


def test_a_clip_count_that_depends_on_the_video_is_refused_with_the_reason(videos):
    data = hpuload.VideoFolder(videos, pipeline=CROP, sampler="regular_timestamps")
    with pytest.raises(ValueError, match="same number of clips"):
        DataLoader(data, batch_size=2)


def test_cthw_layout_gives_what_torchvisions_video_models_take(videos):
    data = hpuload.VideoFolder(videos, pipeline=CROP, num_frames_per_clip=4, layout="CTHW")
    clips, _ = next(iter(DataLoader(data, batch_size=2, output_dtype=torch.uint8)))
    assert clips.shape == (2, 3, 4, 32, 32)


def test_the_videos_frame_indexes_are_kept_in_the_folder_elsewhere_or_nowhere(videos, tmp_path_factory):
    def first(**kw):
        data = hpuload.VideoFolder(videos, pipeline=CROP, num_frames_per_clip=2, **kw)
        gen = torch.Generator().manual_seed(5)
        return next(iter(DataLoader(data, batch_size=4, generator=gen, output_dtype=torch.uint8)))[0]

    want = first(index_cache=False)
    assert not (videos / ".hpuload-video.idx").exists()
    elsewhere = tmp_path_factory.mktemp("index") / "kinetics.idx"
    assert torch.equal(first(index_cache=elsewhere), want)
    assert elsewhere.is_file()
    assert torch.equal(first(), want)
    assert (videos / ".hpuload-video.idx").is_file()
    # Read back from the file: the same clips.
    assert torch.equal(first(), want)


def test_train_video_example_trains_r3d_a_few_steps_on_made_clips(tmp_path):
    import subprocess
    import sys

    from hpuload._hpuload import cli

    clips = tmp_path / "clips"
    assert cli(["hpuload", "make-dataset", "--video", "--out", str(clips), "--videos", "4", "--frames", "12"]) == 0
    example = Path(__file__).resolve().parents[2] / "examples" / "train_video.py"
    r = subprocess.run(
        [sys.executable, str(example), "--data", str(clips), "--steps", "2", "--batch-size", "2", "--frames", "4", "--crop", "32"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "step 2: loss" in r.stdout and "clips (2, 3, 4, 32, 32)" in r.stdout, r.stdout


def test_a_kinetics_style_csv_lists_videos_with_segments_and_class_names(tmp_path):
    for clip in ("high_bframes.mp4", "main_cabac.mp4", "baseline.mp4"):
        shutil.copy(CLIPS / clip, tmp_path / clip)
    (tmp_path / "train.csv").write_text(
        "label,path,time_start,time_end\n"
        "zumba,high_bframes.mp4,0.2,0.8\n"
        "abseiling,main_cabac.mp4,,\n"
        "zumba,baseline.mp4,0,0.4\n"
        "abseiling,gone.mp4,0,1\n"
    )
    data = hpuload.VideoManifest(tmp_path / "train.csv", pipeline=CROP, num_frames_per_clip=4)
    with pytest.raises(hpuload.SampleError, match="gone.mp4"):
        list(DataLoader(data, batch_size=4, output_dtype=torch.uint8, on_error="fail"))
    (tmp_path / "train.csv").write_text("\n".join((tmp_path / "train.csv").read_text().splitlines()[:-1]) + "\n")
    loader = DataLoader(data, batch_size=3, output_dtype=torch.uint8)
    clips, labels = next(iter(loader))
    assert clips.shape == (3, 4, 3, 32, 32)
    assert labels.tolist() == [1, 0, 1]  # classes sorted by name: abseiling, zumba
    assert loader.classes == ["abseiling", "zumba"]
    assert (tmp_path / ".train.csv.hpuload-video.idx").is_file()


def test_video_shards_made_by_make_shards_give_every_video_once_with_its_label(videos, tmp_path_factory):
    from hpuload._hpuload import cli

    out = tmp_path_factory.mktemp("video-shards")
    assert cli(["hpuload", "make-shards", "--video", "--data", str(videos), "--out", str(out), "--shard-size", "1"]) == 0
    shards = sorted(out.glob("*.tar"))
    assert len(shards) == 4
    data = hpuload.VideoShards(str(out / "shard-{000000..000003}.tar"), pipeline=CROP, num_frames_per_clip=4)
    loader = DataLoader(data, batch_size=2, output_dtype=torch.uint8)
    labels = []
    for clips, y in loader:
        assert clips.shape == (2, 4, 3, 32, 32)
        labels += y.tolist()
    assert sorted(labels) == [0, 0, 1, 1]
    # Indexed once, beside the shards, for the next run and every other rank.
    assert (out / ".shard-000000.tar.hpuload-video.idx").exists()


def test_a_frame_folder_gives_each_clip_its_jpegs_in_natural_order(tmp_path):
    import numpy as np
    from PIL import Image

    for cls, video, n in [("a", "v0", 8), ("b", "v1", 11)]:
        (tmp_path / cls / video).mkdir(parents=True)
        for k in range(n):
            img = Image.new("RGB", (40, 24), (10 * k, 100, 200 if cls == "a" else 50))
            img.save(tmp_path / cls / video / f"{k + 1}.jpg", quality=90)  # 1.jpg ... 11.jpg
    whole = {"name": "whole", "ops": [{"op": "center_crop", "size": [24, 40]}]}
    data = hpuload.FrameFolder(
        tmp_path, fps=25, pipeline=whole, sampler="regular_indices", num_frames_per_clip=4, num_indices_between_frames=2
    )
    (clips, labels), = list(DataLoader(data, batch_size=2, output_dtype=torch.uint8, backend="cpu"))
    assert clips.shape == (2, 4, 3, 24, 40) and labels.tolist() == [0, 1]
    for clip, (cls, video) in zip(clips, [("a", "v0"), ("b", "v1")]):
        # One clip at regular indices starts at the first frame: frames 1, 3, 5, 7 by name.
        for t, name in enumerate(["1.jpg", "3.jpg", "5.jpg", "7.jpg"]):
            want = torch.from_numpy(np.array(Image.open(tmp_path / cls / video / name).convert("RGB"))).permute(2, 0, 1)
            assert (clip[t].int() - want.int()).abs().max() <= 1, (cls, name)


def test_pyavs_libavcodec_is_found_beside_the_av_package_and_set_only_when_unset(tmp_path):
    from hpuload import _libav

    (tmp_path / "av").mkdir()
    libs = tmp_path / "av.libs"
    libs.mkdir()
    assert _libav.pyav_libavcodec(tmp_path / "av") is None
    (libs / "libavutil-1234abcd.so.60.26.102").touch()
    lib = libs / "libavcodec-5e6b81c2.so.62.28.102"
    lib.touch()
    assert _libav.pyav_libavcodec(tmp_path / "av") == lib
    # A setting of the user's own is kept, whatever PyAV has.
    environ = {"HPULOAD_LIBAVCODEC": "off"}
    _libav.use_pyav_libavcodec(environ)
    assert environ == {"HPULOAD_LIBAVCODEC": "off"}


def test_hpuload_libavcodec_off_decodes_with_openh264_and_says_why():
    import subprocess
    import sys

    env = dict(os.environ, HPULOAD_LIBAVCODEC="off")
    out = subprocess.run(
        [sys.executable, "-c", "import hpuload; print(hpuload.video_decoder())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == "OpenH264 (built in): HPULOAD_LIBAVCODEC is off"
