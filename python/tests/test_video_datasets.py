"""torchvision's video datasets through `hpuload.torch.DataLoader`, as torchvision's video
classification reference builds them: `Kinetics` (`VideoClips` underneath), its clip samplers,
its presets (float first, `Resize(antialias=False)`, flip, `Normalize`, crop, the
`[T, C, H, W]` to `[C, T, H, W]` permute module) and its audio-dropping `collate_fn`,
unchanged but for the import.

torch's side runs torchvision's own code. `VideoClips` decodes with torchcodec, which needs
FFmpeg's shared libraries: where torchcodec is installed the tests use it; elsewhere (CI) a
stand-in module answers torchvision's two calls (`VideoDecoder(...).metadata`,
`get_frames_at`) with hpuload's own decoder, which is bit-exact with FFmpeg's on these files
(`tests/data/video/expected.json`, checked by the crate's tests). Either way the clips' frame
choice, resampling, transforms and collation on torch's side are torchvision's."""

import shutil
import sys
import types
import warnings
from pathlib import Path

import pytest
import torch
from conftest import state_after

torchvision = pytest.importorskip("torchvision")
import torchvision.transforms as T  # noqa: E402
from torchvision.transforms import v2  # noqa: E402
from torch.utils.data.dataloader import default_collate  # noqa: E402
from torchvision.datasets.samplers import RandomClipSampler, UniformClipSampler  # noqa: E402

from hpuload import _hpuload  # noqa: E402
from hpuload.torch import (  # noqa: E402
    DataLoader,
    FallbackWarning,
    PythonClipsWarning,
    PythonTailWarning,
    ReaderDifferenceWarning,
    SkippedSampleWarning,
)

CLIPS = Path(__file__).resolve().parents[2] / "tests" / "data" / "video"
MEAN, STD = (0.43216, 0.394666, 0.37645), (0.22803, 0.22145, 0.216989)
#: One level of a uint8 image, after Normalize (the largest 1 / std).
LEVEL = 1 / 255 / min(STD)


def within_rounding(x, want, decoder) -> bool:
    """hpuload's frames are FFmpeg's (swscale's default RGB conversion, bit-exact) rounded to
    uint8 once after the resize, torch's reference keeps floats: half a level apart at most.
    torchcodec converts to RGB slightly otherwise (one level off in about 1 pixel in 10,000 of
    these clips), so against torchcodec a rare pixel is up to 1.5 levels off."""
    diff = (x - want).abs() / LEVEL
    most = 1.5 if decoder == "torchcodec" else 0.5
    return bool(diff.max() <= most + 1e-3 and (diff > 0.5 + 1e-3).float().mean() < 1e-3)


class ConvertBCHWtoCBHW(torch.nn.Module):
    """The video reference's own permute module (`references/video_classification/presets.py`)."""

    def forward(self, vid: torch.Tensor) -> torch.Tensor:
        return vid.permute(1, 0, 2, 3)


def collate_fn(batch):
    """The video reference's collate_fn: drops the audio."""
    batch = [(d[0], d[2]) for d in batch]
    return default_collate(batch)


def preset_eval(resize=(36, 48), crop=(32, 40)):
    return T.Compose(
        [
            T.ConvertImageDtype(torch.float32),
            T.Resize(resize, antialias=False),
            T.Normalize(mean=MEAN, std=STD),
            T.CenterCrop(crop),
            ConvertBCHWtoCBHW(),
        ]
    )


def preset_train(resize=(36, 48), crop=(32, 40)):
    return T.Compose(
        [
            T.ConvertImageDtype(torch.float32),
            T.Resize(resize, antialias=False),
            T.RandomHorizontalFlip(0.5),
            T.Normalize(mean=MEAN, std=STD),
            T.RandomCrop(crop),
            ConvertBCHWtoCBHW(),
        ]
    )


#: Files the stand-in reads as another file: a video hpuload refuses (its sample entry says
#: another codec) that torchvision's reader reads, as torchcodec reads a VP9 or HEVC video.
STAND_IN_READS = {}
#: Files whose frames the stand-in counts in another file (a cut file whose header a reader
#: still reads), but reads from the file itself.
STAND_IN_COUNTS = {}


class _StandInDecoder:
    """torchcodec's `VideoDecoder` as far as torchvision's `VideoClips` uses it."""

    def __init__(self, path, dimension_order="NCHW", **_):
        self.path, self.order = STAND_IN_READS.get(str(path), str(path)), dimension_order
        n, fps, _, _ = _hpuload.video_outline(STAND_IN_COUNTS.get(self.path, self.path))
        self.metadata = types.SimpleNamespace(num_frames=n, average_fps=fps)

    def get_frames_at(self, indices):
        indices = list(indices)
        data, h, w = _hpuload.read_video_frames(self.path, indices)
        frames = torch.frombuffer(bytearray(data), dtype=torch.uint8).reshape(len(indices), h, w, 3)
        if self.order == "NCHW":
            frames = frames.permute(0, 3, 1, 2).contiguous()
        return types.SimpleNamespace(data=frames)


class _NoAudioDecoder:
    def __init__(self, *_, **__):
        raise RuntimeError("no audio stream")


@pytest.fixture
def decoder(monkeypatch):
    try:
        import torchcodec.decoders  # noqa: F401

        return "torchcodec"
    except Exception:
        shim = types.ModuleType("torchcodec")
        shim.decoders = types.SimpleNamespace(VideoDecoder=_StandInDecoder, AudioDecoder=_NoAudioDecoder)
        monkeypatch.setitem(sys.modules, "torchcodec", shim)
        return "stand-in"


@pytest.fixture
def same_frames(monkeypatch):
    """torchvision's side decodes with the stand-in, so both sides start from the same frames:
    what is compared is the transform alone (an op such as equalize turns a one-level
    difference in its input into many)."""
    shim = types.ModuleType("torchcodec")
    shim.decoders = types.SimpleNamespace(VideoDecoder=_StandInDecoder, AudioDecoder=_NoAudioDecoder)
    monkeypatch.setitem(sys.modules, "torchcodec", shim)
    monkeypatch.setitem(sys.modules, "torchcodec.decoders", shim.decoders)


def kinetics_tree(root, videos):
    """A Kinetics layout, `root/train/<class>/<video>.mp4`, of the test clips `videos`
    ((class, clip) pairs); returns `root`."""
    for cls, clip in videos:
        (root / "train" / cls).mkdir(parents=True, exist_ok=True)
        shutil.copy(CLIPS / clip, root / "train" / cls / clip)
    return root


@pytest.fixture
def kinetics_root(tmp_path):
    """A Kinetics layout of five test clips in two classes."""
    return kinetics_tree(
        tmp_path,
        [
            ("abseiling", "high_bframes.mp4"),
            ("abseiling", "vfr.mp4"),
            ("bowling", "main_cabac.mp4"),
            ("bowling", "baseline.mp4"),
            ("bowling", "fragmented.mp4"),
        ],
    )


def kinetics(root, transform, frames=4, step=3, frame_rate=None, dataset=torchvision.datasets.Kinetics):
    return dataset(
        str(root),
        frames_per_clip=frames,
        num_classes="400",
        split="train",
        step_between_clips=step,
        frame_rate=frame_rate,
        transform=transform,
        extensions=("avi", "mp4"),
        output_format="TCHW",
    )


def batches(loader):
    return [tuple(t.clone() for t in batch) for batch in loader]


def torch_and_hpuload(data, sampler, collate=collate_fn, more_than=2):
    """The batches of torch's DataLoader and of hpuload's over the same clips, hpuload's on its
    own path (a fallback fails the test)."""
    want = batches(torch.utils.data.DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate, num_workers=2)
    got = batches(loader)
    assert len(got) == len(want) > more_than
    return got, want


def torch_batches_and_hpuloads_loader(data, sampler):
    """torch's batches, and hpuload's loader over the same clips (a fallback fails the test)
    with the `PythonClipsWarning`s it gave: for datasets holding videos hpuload leaves to the
    dataset's own reader."""
    want = batches(torch.utils.data.DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate_fn))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate_fn, num_workers=2)
    notes = [str(w.message) for w in caught if issubclass(w.category, PythonClipsWarning)]
    return want, loader, notes


def same_float_clips(got, want, decoder) -> set:
    """Checks hpuload's batches of `[C, 4, H, W]` float clips against torch's (labels equal,
    pixels within the reference's rounding) and returns the labels seen."""
    labels = set()
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape and x.shape[1:3] == (3, 4) and x.dtype == wx.dtype == torch.float32
        assert torch.equal(y, wy)
        labels.update(y.tolist())
        assert within_rounding(x, wx, decoder), ((x - wx).abs().max() / LEVEL, decoder)
    return labels


@pytest.mark.parametrize("frame_rate", [None, 15])
def test_kinetics_with_the_references_eval_preset_gives_torchs_clips_labels_and_pixels(decoder, kinetics_root, frame_rate):
    data = kinetics(kinetics_root, preset_eval(), frame_rate=frame_rate)
    got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 3))
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape and x.shape[1:3] == (3, 4)  # [B, C, T, H, W]
        assert x.dtype == wx.dtype == torch.float32
        assert torch.equal(y, wy)
        # Float first and the reference's unantialiased resize.
        assert within_rounding(x, wx, decoder), ((x - wx).abs().max() / LEVEL, decoder)


@pytest.mark.parametrize("flavour", ["v1", "v2"])
def test_an_antialiased_resize_of_a_float_clip_is_torchs_float_resize_rounded_once(decoder, kinetics_root, flavour):
    """Converted to float first, then `Resize` with its default antialiasing: torch resizes the
    float clip with its float kernel; hpuload resizes the uint8 clip with that kernel and
    rounds once, half a level from torch's values at most (torch's uint8 kernel, which rounds
    between its passes too, was up to a level off)."""
    M = T if flavour == "v1" else v2
    to_float = T.ConvertImageDtype(torch.float32) if flavour == "v1" else v2.ToDtype(torch.float32, scale=True)
    preset = M.Compose([to_float, M.Resize((36, 48)), M.Normalize(mean=MEAN, std=STD), M.CenterCrop((32, 40)), ConvertBCHWtoCBHW()])
    data = kinetics(kinetics_root, preset)
    got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 3))
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape and x.dtype == wx.dtype == torch.float32
        assert within_rounding(x, wx, decoder), ((x - wx).abs().max() / LEVEL, decoder)


@pytest.mark.parametrize("flavour", ["v1", "v2"])
def test_a_bicubic_resize_of_a_float_clip_keeps_torchs_values_beyond_0_and_1(same_frames, tmp_path, flavour):
    """torch's bicubic kernel on a float clip overshoots [0, 1] at edges and nothing clamps it;
    hpuload's native resize makes bytes, which would clamp those values (up to 20 levels
    off, session 64's sweep). So that step runs on the float clip in Python: on videos of
    one size after the native decoding and conversion, as a tail; on videos of several
    sizes (a clip batch needs one size before the tail) in torch's loader, with the reason."""
    M = T if flavour == "v1" else v2
    to_float = T.ConvertImageDtype(torch.float32) if flavour == "v1" else v2.ToDtype(torch.float32, scale=True)
    preset = M.Compose([to_float, M.Resize((36, 48), interpolation=T.InterpolationMode.BICUBIC), M.CenterCrop((32, 40))])
    one_size = kinetics(kinetics_tree(tmp_path / "one", [("a", "high_bframes.mp4"), ("b", "fragmented.mp4")]), preset)
    want = batches(torch.utils.data.DataLoader(one_size, batch_size=4, sampler=UniformClipSampler(one_size.video_clips, 3), collate_fn=collate_fn))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        with pytest.warns(PythonTailWarning, match="Resize"):
            loader = DataLoader(one_size, batch_size=4, sampler=UniformClipSampler(one_size.video_clips, 3), collate_fn=collate_fn, num_workers=2)
        got = batches(loader)
    assert len(got) == len(want) > 1
    overshoot = 0
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape and torch.equal(y, wy)
        assert (x - wx).abs().max() < 1e-5  # the same frames, the same float steps
        overshoot += int(((wx < 0) | (wx > 1)).sum())
    assert overshoot > 0, "the clips have edges where bicubic overshoots"
    sizes = kinetics(kinetics_tree(tmp_path / "sizes", [("a", "high_bframes.mp4"), ("b", "baseline.mp4")]), preset)
    with pytest.warns(FallbackWarning, match="bicubic interpolation of a float clip"):
        DataLoader(sizes, batch_size=4, sampler=UniformClipSampler(sizes.video_clips, 3), collate_fn=collate_fn)


@pytest.mark.parametrize("flavour", ["v1", "v2"])
def test_an_unantialiased_nearest_resize_runs_natively_as_nearest_ignores_antialiasing(same_frames, kinetics_root, flavour):
    M = T if flavour == "v1" else v2
    to_float = T.ConvertImageDtype(torch.float32) if flavour == "v1" else v2.ToDtype(torch.float32, scale=True)
    for preset in (
        M.Compose([M.Resize((36, 50), interpolation=T.InterpolationMode.NEAREST, antialias=False), M.CenterCrop((32, 40)), to_float]),
        M.Compose([to_float, M.Resize(43, interpolation=T.InterpolationMode.NEAREST, antialias=False), M.CenterCrop((32, 40))]),
    ):
        data = kinetics(kinetics_root, preset)
        got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 3))
        for (x, y), (wx, wy) in zip(got, want):
            assert x.shape == wx.shape and torch.equal(y, wy) and torch.equal(x, wx)


def test_v2s_unantialiased_resize_of_a_uint8_clip_gives_torchs_uint8_bytes(decoder, kinetics_root):
    """v2's `Resize(antialias=False)` on the uint8 clip (before the conversion to float) runs
    torch's uint8 kernel without antialiasing: hpuload runs that kernel, so from the same
    frames (FFmpeg's) every value is torch's; against torchcodec's RGB, within its rounding."""
    from torchvision.transforms.v2.functional._geometry import _do_native_uint8_resize_on_cpu

    if not _do_native_uint8_resize_on_cpu(v2.InterpolationMode.BILINEAR):
        pytest.skip("torch has no uint8 bilinear kernel on this CPU")
    preset = v2.Compose(
        [
            v2.Resize((36, 48), antialias=False),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(mean=MEAN, std=STD),
            v2.CenterCrop((32, 40)),
            ConvertBCHWtoCBHW(),
        ]
    )
    data = kinetics(kinetics_root, preset)
    got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 3))
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape and x.dtype == wx.dtype == torch.float32 and torch.equal(y, wy)
        if decoder == "torchcodec":
            assert within_rounding(x, wx, decoder), (x - wx).abs().max() / LEVEL
        else:
            assert (x - wx).abs().max() / LEVEL < 1e-3, (x - wx).abs().max() / LEVEL


class _PyAVStandIn:
    """torchcodec's `VideoDecoder` as `VideoClips` uses it, made of PyAV's frames (FFmpeg's
    decode, converted by swscale by the frame's colour tags, as torchcodec converts it)
    turned by torchcodec's rule written out here: the angle FFmpeg reads from the display
    matrix, rounded to a quarter turn, `torch.rot90` of each frame."""

    def __init__(self, path, dimension_order="NCHW", **_):
        import av

        with av.open(str(path)) as container:
            decoded = list(container.decode(video=0))
            rate = container.streams.video[0].average_rate
        turns = round(decoded[0].rotation / 90) % 4
        self.frames = torch.stack([torch.from_numpy(f.to_ndarray(format="rgb24")).rot90(turns, (0, 1)) for f in decoded])
        self.order = dimension_order
        try:
            _, fps, _, _ = _hpuload.video_outline(str(path))
        except ValueError:  # a video hpuload refuses: FFmpeg's own rate
            fps = float(rate)
        self.metadata = types.SimpleNamespace(num_frames=len(decoded), average_fps=fps)

    def get_frames_at(self, indices):
        frames = self.frames[list(indices)]
        return types.SimpleNamespace(data=frames.permute(0, 3, 1, 2).contiguous() if self.order == "NCHW" else frames)


def _torchcodec_or_pyav(monkeypatch) -> str:
    """torch's side of a comparison: torchcodec where it runs, else `_PyAVStandIn`; the
    tolerance either way is torchcodec's (swscale's RGB against hpuload's)."""
    try:
        import torchcodec.decoders  # noqa: F401
    except Exception:
        pytest.importorskip("av")
        shim = types.ModuleType("torchcodec")
        shim.decoders = types.SimpleNamespace(VideoDecoder=_PyAVStandIn, AudioDecoder=_NoAudioDecoder)
        monkeypatch.setitem(sys.modules, "torchcodec", shim)
    return "torchcodec"


def test_videos_declaring_bt709_or_full_range_give_torchs_clips(monkeypatch, tmp_path):
    """Videos whose SPS declares BT.709 or full range (HD sources, phones): FFmpeg tags their
    frames and torchcodec converts them by the tags; hpuload's clips are torch's."""
    decoder = _torchcodec_or_pyav(monkeypatch)
    kinetics_tree(tmp_path, [("a", "bt709.mp4"), ("a", "full_range.mp4"), ("b", "full_range_bt709.mp4"), ("b", "high_bframes.mp4")])
    data = kinetics(tmp_path, preset_eval())
    got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 2), more_than=1)
    assert same_float_clips(got, want, decoder) == {0, 1}


def test_videos_whose_edit_lists_cut_delay_or_repeat_frames_give_torchs_clips(monkeypatch, tmp_path):
    """A stream copy cut between keyframes: its edit list starts inside a GOP and ends before
    the last frames. FFmpeg decodes the cut frames as references but shows only those inside
    the edit, and torchvision's clips count those; so do hpuload's. Likewise a video delayed by
    an empty edit, and one whose edit list shows two pieces of its media."""
    decoder = _torchcodec_or_pyav(monkeypatch)
    kinetics_tree(tmp_path, [("a", "cut.mp4"), ("a", "delayed.mp4"), ("a", "high_bframes.mp4"), ("b", "two_edits.mp4"), ("b", "baseline.mp4")])
    data = kinetics(tmp_path, preset_eval())
    assert data.video_clips.video_pts[0].numel() == 20, "FFmpeg shows 20 of cut.mp4's 30 frames"
    with warnings.catch_warnings():
        warnings.simplefilter("error", PythonClipsWarning)  # every clip native
        got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 3), more_than=1)
    assert same_float_clips(got, want, decoder) == {0, 1}


def test_videos_that_are_not_8_bit_4_2_0_have_their_clips_made_by_the_dataset_as_torchs(monkeypatch, tmp_path):
    """H.264 in 4:4:4 (what x264 makes of RGB images unless told otherwise) or at 10 bits:
    hpuload names each when it indexes the dataset and leaves its clips to the dataset's own
    reader (torchcodec, or PyAV's frames where it does not run), so those clips are torch's
    bit for bit and the rest native."""
    decoder = _torchcodec_or_pyav(monkeypatch)
    kinetics_tree(tmp_path, [
        ("a", "yuv444.mp4"),
        ("a", "high_bframes.mp4"),
        ("a", "main_cabac.mp4"),
        ("b", "high10.mp4"),
        ("b", "baseline.mp4"),
        ("b", "vfr.mp4"),
    ])
    data = kinetics(tmp_path, preset_eval())
    sampler = UniformClipSampler(data.video_clips, 3)
    want, loader, notes = torch_batches_and_hpuloads_loader(data, sampler)
    assert len(notes) == 1, notes
    assert "yuv444.mp4: hpuload cannot read this video: the video is H.264 with 4:4:4 chroma" in notes[0], notes
    assert "high10.mp4: hpuload cannot read this video: the video is H.264 with 10-bit 4:2:0 chroma" in notes[0], notes
    got = batches(loader)
    assert len(got) == len(want)
    left = {data.video_clips.video_paths.index(str(tmp_path / "train" / c / n)) for c, n in [("a", "yuv444.mp4"), ("b", "high10.mp4")]}
    indices = list(sampler)
    seen = 0
    for k, ((x, y), (wx, wy)) in enumerate(zip(got, want)):
        assert torch.equal(y, wy) and within_rounding(x, wx, decoder)
        for row, index in enumerate(indices[4 * k : 4 * k + 4]):
            if data.video_clips.get_clip_location(index)[0] in left:
                seen += 1
                assert torch.equal(x[row], wx[row]), "the dataset's own clip, as torch's loader gives it"
    assert seen > 0


def test_videos_shown_turned_give_torchs_upright_clips(monkeypatch, tmp_path):
    """Videos with a display matrix (phones' videos held on their side; a quarter turn either
    way, a half turn, one set by the movie's matrix), whose frames torchcodec turns under
    torchvision's `VideoClips`: hpuload's clips are torch's, resized from the frames as shown.
    torch's side is torchcodec where it runs, else PyAV's frames turned by torchcodec's rule."""
    decoder = _torchcodec_or_pyav(monkeypatch)
    kinetics_tree(tmp_path, [("a", "turned_cw.mp4"), ("a", "turned_half.mp4"), ("b", "turned_ccw.mp4"), ("b", "turned_movie.mp4"), ("b", "high_bframes.mp4")])
    # A resize that keeps the shown frame's shape (72 wide, 96 high, or the other way): what is
    # up in a turned frame shows in every pixel.
    data = kinetics(tmp_path, preset_eval(resize=(48, 36), crop=(40, 32)))
    got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 2))
    assert same_float_clips(got, want, decoder) == {0, 1}


def ucf101_and_hmdb51(root, transform, clip="xvid.avi", output_format="TCHW"):
    """torchvision's `UCF101` and `HMDB51` over a tree of their AVI files (MPEG-4 Part 2, as
    the real datasets' are, Xvid without B-frames; each lists `.avi` files only),
    copies of `clip`, with each one's split files: one video of a class is held out of fold
    1's training split."""
    videos = [
        ("ApplyEyeMakeup", "v_ApplyEyeMakeup_g01_c01.avi", clip),
        ("ApplyEyeMakeup", "v_ApplyEyeMakeup_g01_c02.avi", clip),
        ("ApplyEyeMakeup", "v_ApplyEyeMakeup_g02_c01.avi", clip),
        ("Archery", "v_Archery_g01_c01.avi", clip),
        ("Archery", "v_Archery_g01_c02.avi", "xvid.avi"),
    ]
    held_out = {"v_ApplyEyeMakeup_g02_c01.avi"}
    notes = root / "splits"
    notes.mkdir(parents=True, exist_ok=True)
    for cls, name, clip in videos:
        (root / "videos" / cls).mkdir(parents=True, exist_ok=True)
        shutil.copy(CLIPS / clip, root / "videos" / cls / name)
    train = [f"{cls}/{name} {k + 1}" for k, (cls, name, _) in enumerate(videos) if name not in held_out]
    (notes / "trainlist01.txt").write_text("\n".join(train) + "\n")
    for cls in {cls for cls, _, _ in videos}:
        lines = [f"{name} {2 if name in held_out else 1}" for c, name, _ in videos if c == cls]
        (notes / f"{cls}_test_split1.txt").write_text("\n".join(lines) + "\n")
    common = dict(frames_per_clip=4, step_between_clips=5, fold=1, train=True, transform=transform, output_format=output_format)
    return [
        torchvision.datasets.UCF101(str(root / "videos"), str(notes), **common),
        torchvision.datasets.HMDB51(str(root / "videos"), str(notes), **common),
    ]


def test_ucf101_and_hmdb51_on_their_avi_files_give_torchs_clips_labels_and_pixels(decoder, tmp_path):
    """The datasets read MPEG-4 Part 2 in AVI, which hpuload decodes with FFmpeg's libavcodec
    (Debian's, or PyAV's copy): natively where the process has one, else torch's loader
    takes them, saying what is missing."""
    for data in ucf101_and_hmdb51(tmp_path, preset_eval()):
        assert len(data.video_clips.video_paths) == 4
        sampler = UniformClipSampler(data.video_clips, 3)
        if not _hpuload.video_decoder().startswith("libavcodec"):
            with pytest.warns(FallbackWarning, match="libavcodec"):
                DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate_fn)
            continue
        got, want = torch_and_hpuload(data, sampler)
        assert same_float_clips(got, want, decoder) == {0, 1}


class ConvertBHWCtoBCHW(torch.nn.Module):
    """The video reference's permute module from when its datasets gave `[T, H, W, C]` clips
    (torchvision's `UCF101` and `HMDB51` still do by default)."""

    def forward(self, vid: torch.Tensor) -> torch.Tensor:
        return vid.permute(0, 3, 1, 2)


@pytest.mark.parametrize("permute", [ConvertBHWCtoBCHW(), T.Lambda(lambda x: x.permute(0, 3, 1, 2))])
def test_ucf101s_default_thwc_clips_permuted_first_give_torchs_clips_labels_and_pixels(decoder, tmp_path, permute):
    """`UCF101` and `HMDB51` give their transform `[T, H, W, C]` clips unless told otherwise;
    a transform that permutes them to `[T, C, H, W]` first (the older reference's module, or a
    Lambda) runs natively."""
    if not _hpuload.video_decoder().startswith("libavcodec"):
        pytest.skip("no libavcodec in this process: MPEG-4 Part 2 goes to torch's loader")
    transform = T.Compose([permute, *preset_train().transforms])
    for data in ucf101_and_hmdb51(tmp_path, transform, output_format="THWC"):
        got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 3))
        for (x, y), (wx, wy) in zip(got, want):
            assert x.shape == wx.shape and x.shape[1:3] == (3, 4) and x.dtype == wx.dtype == torch.float32
            assert torch.equal(y, wy)


def test_thwc_clips_whose_transform_takes_them_as_they_are_get_it_in_python_as_torchs_loader_does(decoder, tmp_path):
    """A transform that takes the `[T, H, W, C]` clip as it is (the conversion to float, then
    a step of the user's own) runs in Python on the natively decoded clips: the same batches as
    torch's."""
    if not _hpuload.video_decoder().startswith("libavcodec"):
        pytest.skip("no libavcodec in this process: MPEG-4 Part 2 goes to torch's loader")
    transform = T.Compose([T.ConvertImageDtype(torch.float32), T.Lambda(scaled)])
    data = ucf101_and_hmdb51(tmp_path, transform, output_format="THWC")[0]
    with pytest.warns(PythonTailWarning, match=r"after the native decoding .*\[T, H, W, C\]"):
        got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 3))
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape == (4, 4, 72, 96, 3) and torch.equal(y, wy)
        assert (x - wx).abs().max() <= (0.5 / 255 + 1e-6 if decoder == "torchcodec" else 0)


@pytest.mark.parametrize("output_format", ["THWC", "TCHW"])
def test_ucf101_without_a_transform_gives_torchs_uint8_clips_in_either_format(decoder, tmp_path, output_format):
    """No transform: the clips as decoded, uint8 at the videos' own size (UCF101's are all
    320x240), `[T, H, W, C]` by default as torchvision gives them."""
    if not _hpuload.video_decoder().startswith("libavcodec"):
        pytest.skip("no libavcodec in this process: MPEG-4 Part 2 goes to torch's loader")
    data = ucf101_and_hmdb51(tmp_path, None, output_format=output_format)[0]
    got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 3))
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape and x.dtype == wx.dtype == torch.uint8 and torch.equal(y, wy)
        assert x.shape[-3:] == ((72, 96, 3) if output_format == "THWC" else (3, 72, 96))
        diff = (x.int() - wx.int()).abs()
        assert diff.max() <= (1 if decoder == "torchcodec" else 0) and (diff > 0).float().mean() < 1e-3


def test_videos_of_different_sizes_without_a_crop_or_resize_go_to_torch_naming_two(decoder, kinetics_root):
    data = kinetics(kinetics_root, None)
    with pytest.warns(FallbackWarning, match=r"video 0 is \d+x\d+, video \d+ \d+x\d+"):
        DataLoader(data, batch_size=4, sampler=UniformClipSampler(data.video_clips, 3), collate_fn=collate_fn)


def scaled(x):
    """A user's own step: what no translation knows."""
    return x * 0.5 + 0.25


def ucf101_lambdas(mode="nearest", divide_first=True):
    """The transform many UCF101 scripts copy: Lambdas over the default `[T, H, W, C]` clip
    (to float in [0, 1], permute to `[T, C, H, W]`, torch's `interpolate` to a fixed size)."""
    steps = [
        T.Lambda(lambda x: x / 255.0),
        T.Lambda(lambda x: x.permute(0, 3, 1, 2)),
        T.Lambda(lambda x: torch.nn.functional.interpolate(x, (36, 48), mode=mode)),
    ]
    if not divide_first:
        steps[0], steps[1] = steps[1], steps[0]
    return T.Compose(steps)


@pytest.mark.parametrize("mode,divide_first", [("nearest", True), ("bilinear", False)])
def test_the_ucf101_scripts_lambdas_are_recognised_by_what_they_do_and_run_natively(decoder, tmp_path, mode, divide_first):
    """`x / 255.` is the conversion to float and `interpolate` to a fixed size a resize
    (nearest, or bilinear without antialiasing), found by running each Lambda on test clips:
    the whole transform runs natively, no step in Python, and the batches are torch's."""
    if not _hpuload.video_decoder().startswith("libavcodec"):
        pytest.skip("no libavcodec in this process: MPEG-4 Part 2 goes to torch's loader")
    data = ucf101_and_hmdb51(tmp_path, ucf101_lambdas(mode, divide_first), output_format="THWC")[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", PythonTailWarning)
        got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 3))
    # Nearest picks pixels: exact but for torchcodec's RGB; bilinear resizes the uint8
    # frames and converts after (the reference's order the other way round): within a level.
    most = (0 if mode == "nearest" else 1 / 255) + (1.5 / 255 if decoder == "torchcodec" else 0)
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape and x.shape[2:] == (3, 36, 48) and x.dtype == wx.dtype == torch.float32
        assert torch.equal(y, wy)
        assert (x - wx).abs().max() <= most + 1e-6, (x - wx).abs().max() * 255


def test_a_lambda_is_taken_as_a_torchvision_step_only_when_it_does_exactly_what_that_step_does():
    from hpuload._transforms import _recognised_video_step as seen

    interpolate = torch.nn.functional.interpolate
    for f in (lambda x: x / 255.0, lambda x: x.float() / 255, lambda x: x.div(255.0)):
        assert type(seen(T.Lambda(f))).__name__ == "ConvertImageDtype"
    resize = seen(T.Lambda(lambda x: interpolate(x, (20, 24), mode="bilinear")))
    assert type(resize).__name__ == "Resize" and resize.size == [20, 24] and resize.antialias is False
    assert seen(T.Lambda(lambda x: interpolate(x, (20, 24)))).interpolation == T.InterpolationMode.NEAREST
    state = torch.get_rng_state()
    for f in (
        lambda x: x / 256.0,
        lambda x: x * torch.rand(1) / 255,  # a draw: not a fixed step
        lambda x: interpolate(x, scale_factor=0.5),  # no fixed size
        lambda x: interpolate(x, (20, 24), mode="bicubic"),
        lambda x: interpolate(x, (20, 24), mode="bilinear", antialias=True),
        lambda x: x.flip(-1),
        lambda x: x,
        # What they do depends on the clip's size, which small test clips alone do not show.
        lambda x: x / 255.0 if x.shape[-1] < 100 else x.float(),
        lambda x: interpolate(x, (20, 24), mode="bilinear") if x.shape[-1] < 100 else interpolate(x, (20, 24)),
    ):
        assert seen(T.Lambda(f)) is None
    assert torch.equal(state, torch.get_rng_state()), "the global generator left as it was"


def test_a_video_transform_hpuload_does_not_know_runs_in_python_after_native_decoding(decoder, tmp_path):
    """A step no translation knows, and one that looks at its clip's values before acting:
    the clips are decoded natively and those steps run in Python on them, as the user's code
    does (a `PythonTailWarning` names them); the batches are torch's."""
    if not _hpuload.video_decoder().startswith("libavcodec"):
        pytest.skip("no libavcodec in this process: MPEG-4 Part 2 goes to torch's loader")
    looking = T.Compose(
        [
            T.Lambda(lambda x: x / 255.0 if x.float().mean() > 0 else x.float() + 1),
            T.Lambda(lambda x: x.permute(0, 3, 1, 2)),
            T.Lambda(lambda x: torch.nn.functional.interpolate(x, (36, 48))),
        ]
    )
    # And a translated prefix with the user's own step after it: the reference's eval preset
    # runs natively up to its crop, the rest in Python.
    prefix_then_own = T.Compose([*preset_eval().transforms[:4], T.Lambda(scaled), ConvertBCHWtoCBHW()])
    for transform, output_format, shape in [(looking, "THWC", (3, 36, 48)), (prefix_then_own, "TCHW", (4, 32, 40))]:
        data = ucf101_and_hmdb51(tmp_path / output_format, transform, output_format=output_format)[0]
        with pytest.warns(PythonTailWarning, match="Lambda"):
            got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 3))
        for (x, y), (wx, wy) in zip(got, want):
            assert x.shape == wx.shape and x.shape[2:] == shape and x.dtype == wx.dtype == torch.float32
            assert torch.equal(y, wy)
            assert within_rounding(x, wx, decoder) if output_format == "TCHW" else (x - wx).abs().max() <= 1.5 / 255


@pytest.mark.parametrize("clip", ["divx_bframes.avi", "divx_packed.avi"])
def test_avi_files_with_b_frames_run_natively_as_shown_warning_that_torchcodec_misreads_them(same_frames, tmp_path, clip):
    """torchcodec 0.17 misreads AVI files with B-frames: a clip that starts between keyframes
    comes a frame early, and from a DivX packed bitstream (as many of UCF101's files are) some
    frames come damaged and clips near the end fail. hpuload gives the frames as shown (what
    PyAV decodes, and torch's side here with the stand-in reader), warning which videos
    torchvision's own reader would give otherwise."""
    data = ucf101_and_hmdb51(tmp_path, preset_eval(), clip=clip)[0]
    sampler = UniformClipSampler(data.video_clips, 3)
    if not _hpuload.video_decoder().startswith("libavcodec"):
        with pytest.warns(FallbackWarning, match="libavcodec"):
            DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate_fn)
        return
    want = batches(torch.utils.data.DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate_fn))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate_fn)
    notes = [str(w.message) for w in caught if issubclass(w.category, ReaderDifferenceWarning)]
    assert len(notes) == 1 and "3 of the dataset's videos" in notes[0] and "v_ApplyEyeMakeup_g01_c01.avi" in notes[0]
    got = batches(loader)
    assert len(got) == len(want) > 2
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape and torch.equal(y, wy)
        assert within_rounding(x, wx, "stand-in"), (x - wx).abs().max() / LEVEL


def test_kinetics_over_mpeg4_part_2_in_mp4_runs_natively_with_torchs_clips_and_no_reader_warning(decoder, tmp_path):
    """MPEG-4 Part 2 in MP4 (`mp4v`, B-frames, the VOL header in the `esds` descriptor only,
    as FFmpeg's muxer writes it) beside H.264: decoded natively with libavcodec; its times are
    the file's own tables, which torchcodec reads as they are, so no ReaderDifferenceWarning."""
    for cls, clip in [("abseiling", "mp4v_bframes.mp4"), ("abseiling", "high_bframes.mp4"), ("bowling", "mp4v_bframes.mp4")]:
        (tmp_path / "train" / cls).mkdir(parents=True, exist_ok=True)
        shutil.copy(CLIPS / clip, tmp_path / "train" / cls / f"{cls}_{clip}")
    data = kinetics(tmp_path, preset_eval())
    sampler = UniformClipSampler(data.video_clips, 3)
    if not _hpuload.video_decoder().startswith("libavcodec"):
        with pytest.warns(FallbackWarning, match="libavcodec"):
            DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate_fn)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReaderDifferenceWarning)
        got, want = torch_and_hpuload(data, sampler)
    assert same_float_clips(got, want, decoder) == {0, 1}


def another_codec(root, cls, clip, name, monkeypatch):
    """`clip` put in the dataset as `name`, its sample entry saying HEVC (`hvc1`), which
    hpuload refuses; the stand-in reader reads the clip itself, as torchcodec would read a
    real HEVC or VP9 video."""
    data = bytearray((CLIPS / clip).read_bytes())
    entry = data.index(b"avc1", data.index(b"stsd"))
    data[entry : entry + 4] = b"hvc1"
    path = root / "train" / cls / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(data))
    monkeypatch.setitem(STAND_IN_READS, str(path), str(CLIPS / clip))
    return path


def scaled_eval():
    """The eval preset with a step of the user's own before the permute: its tail in Python."""
    return T.Compose([*preset_eval().transforms[:4], T.Lambda(scaled), ConvertBCHWtoCBHW()])


@pytest.mark.parametrize("transform", [preset_eval, scaled_eval])
def test_a_video_hpuload_cannot_read_has_its_clips_made_by_the_dataset_and_the_rest_natively(
    same_frames, kinetics_root, monkeypatch, transform
):
    """One video of a codec hpuload does not decode (Kinetics downloads hold some VP9, AV1,
    HEVC) no longer sends the whole dataset to torch's loader: the dataset's own
    `__getitem__` makes that video's clips in Python, the rest are native, and the batches
    are torch's (a native transform, or one with a tail in Python)."""
    hevc = another_codec(kinetics_root, "bowling", "baseline.mp4", "zz_hevc.mp4", monkeypatch)
    data = kinetics(kinetics_root, transform())
    assert str(hevc) in data.video_clips.video_paths
    sampler = UniformClipSampler(data.video_clips, 5)
    want, loader, notes = torch_batches_and_hpuloads_loader(data, sampler)
    assert len(notes) == 1 and "zz_hevc.mp4: hpuload cannot read this video: the video is HEVC" in notes[0] and "(5 of 37)" in notes[0], notes
    got = batches(loader)
    assert len(got) == len(want) > 4
    k = data.video_clips.video_paths.index(str(hevc))
    ends = data.video_clips.cumulative_sizes
    hevc_clips = range(ends[k - 1], ends[k])
    seen = 0
    for (x, y), (wx, wy), indices in zip(got, want, [list(sampler)[k : k + 4] for k in range(0, len(sampler), 4)]):
        assert x.shape == wx.shape and torch.equal(y, wy)
        assert within_rounding(x, wx, "stand-in"), (x - wx).abs().max() / LEVEL
        for row, index in enumerate(indices):
            if index in hevc_clips:
                seen += 1
                assert torch.equal(x[row], wx[row]), "the dataset's own clip, as torch's loader gives it"
    assert seen > 0


@pytest.mark.parametrize("transform", [preset_train, scaled_eval])
def test_a_loader_with_videos_left_to_the_dataset_resumes_mid_epoch_with_the_same_batches(
    same_frames, kinetics_root, monkeypatch, transform
):
    """The clips the dataset makes for a video hpuload cannot read are drawn from (seed, epoch,
    index) as the native ones are: a run stopped after two batches and resumed from its
    `state_dict` gives the uninterrupted run's remaining batches, those clips included."""
    hevc = another_codec(kinetics_root, "bowling", "baseline.mp4", "zz_hevc.mp4", monkeypatch)
    data = kinetics(kinetics_root, transform())
    sampler = UniformClipSampler(data.video_clips, 5)
    k = data.video_clips.video_paths.index(str(hevc))
    ends = data.video_clips.cumulative_sizes
    assert set(list(sampler)[8:]) & set(range(ends[k - 1], ends[k])), "the resumed part holds the left video's clips"

    def make():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PythonClipsWarning)
            warnings.simplefilter("ignore", PythonTailWarning)
            warnings.simplefilter("error", FallbackWarning)
            return DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate_fn, num_workers=2, seed=5)

    full = make()
    want = batches(full)
    state = state_after(make(), 2)
    again = make()
    again.load_state_dict(state)
    rest = batches(again)
    assert len(rest) == len(want) - 2
    for (x, y), (wx, wy) in zip(rest, want[2:]):
        assert torch.equal(y, wy) and torch.equal(x, wx)


def test_a_damaged_video_whose_clips_the_datasets_reader_cannot_make_is_named_skipped_and_replaced(
    same_frames, kinetics_root, monkeypatch
):
    """A cut file whose header torchvision's reader read (it counted the frames) but whose
    frames no reader can give: hpuload cannot index it, the dataset's own reader fails on each
    of its clips, and each is named (`SkippedSampleWarning`) and replaced by another clip,
    index and label with it, where torch's loader would stop the run. With
    `on_error="fail"` the error names the file."""
    cut = kinetics_root / "train" / "bowling" / "zz_cut.mp4"
    data = (CLIPS / "high_bframes.mp4").read_bytes()
    cut.write_bytes(data[: len(data) - 3000])
    monkeypatch.setitem(STAND_IN_COUNTS, str(cut), str(CLIPS / "high_bframes.mp4"))
    data = kinetics(kinetics_root, preset_eval())
    k = data.video_clips.video_paths.index(str(cut))
    ends = data.video_clips.cumulative_sizes
    bad = range(ends[k - 1], ends[k])
    sampler = UniformClipSampler(data.video_clips, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate_fn)
        got = []
        for x, y in loader:
            got.append((x.clone(), y.clone(), list(loader.last_indices[: loader.last_valid])))
    left = [str(w.message) for w in caught if issubclass(w.category, PythonClipsWarning)]
    assert len(left) == 1 and "zz_cut.mp4: hpuload cannot read this video" in left[0], left
    skipped = [str(w.message) for w in caught if issubclass(w.category, SkippedSampleWarning)]
    assert len(skipped) >= 3 and all("zz_cut.mp4" in m and "the dataset's reader failed" in m for m in skipped)
    assert sum(len(y) for _, y, _ in got) == len(sampler)
    # Every replacement is a clip of another video, carrying that video's label.
    for x, y, indices in got:
        assert x.shape[1:] == (3, 4, 32, 40) and torch.isfinite(x).all() and (x.abs().amax(dim=(1, 2, 3, 4)) > 0).all()
        for index, label in zip(indices, y.tolist()):
            video, _ = data.video_clips.get_clip_location(index)
            assert index not in bad and label == data.samples[video][1]
    with pytest.raises(RuntimeError, match=r"zz_cut.mp4\): the dataset's reader failed"):
        batches(DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate_fn, on_error="fail"))


def test_a_dataset_mostly_of_videos_hpuload_cannot_read_goes_to_torchs_loader(same_frames, tmp_path, monkeypatch):
    for cls, clip in [("a", "high_bframes.mp4"), ("b", "main_cabac.mp4")]:
        another_codec(tmp_path, cls, clip, clip, monkeypatch)
    shutil.copy(CLIPS / "baseline.mp4", tmp_path / "train" / "b" / "baseline.mp4")
    data = kinetics(tmp_path, preset_eval())
    with pytest.warns(FallbackWarning, match=r"2 of the dataset's videos, holding 15 of its 20 clips, .*HEVC"):
        DataLoader(data, batch_size=4, sampler=UniformClipSampler(data.video_clips, 3), collate_fn=collate_fn)


class KineticsWithVideoId(torchvision.datasets.Kinetics):
    """The video reference's own dataset today (`references/video_classification/datasets.py`):
    each sample carries its video's index after the label, which its evaluation uses to
    average the clips' predictions per video."""

    def __getitem__(self, idx):
        video, audio, _, video_idx = self.video_clips.get_clip(idx)
        label = self.samples[video_idx][1]
        if self.transform is not None:
            video = self.transform(video)
        return video, audio, label, video_idx


def collate_with_video_id(batch):
    """The video reference's collate_fn for that dataset: drops the audio, keeps the index."""
    return default_collate([(d[0], d[2], d[3]) for d in batch])


def test_the_references_dataset_with_video_ids_gives_torchs_clips_labels_and_video_ids(decoder, kinetics_root):
    data = kinetics(kinetics_root, preset_eval(), dataset=KineticsWithVideoId)
    got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 3), collate_with_video_id)
    assert {int(v) for _, _, vs in got for v in vs} == set(range(len(data.video_clips.video_paths)))
    for (x, y, v), (wx, wy, wv) in zip(got, want):
        assert x.shape == wx.shape and x.dtype == wx.dtype == torch.float32
        assert torch.equal(y, wy) and torch.equal(v, wv) and v.dtype == wv.dtype
        assert within_rounding(x, wx, decoder), ((x - wx).abs().max() / LEVEL, decoder)


def test_the_video_weights_preset_evaluates_natively_with_torchs_pixels(same_frames, kinetics_root):
    """`weights.transforms()` of torchvision's video models (`VideoClassification`: the uint8
    clip resized without antialiasing and rounded, its centre cropped, normalized, permuted),
    what the video reference evaluates pretrained weights with, runs natively."""
    from torchvision.transforms._presets import VideoClassification

    data = kinetics(kinetics_root, VideoClassification(crop_size=(32, 40), resize_size=(36, 48)))
    got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 3))
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape and x.shape[1:3] == (3, 4) and x.dtype == wx.dtype == torch.float32
        assert torch.equal(y, wy)
        # Both round the resized uint8 clip, ties to even; torch places the taps in float32,
        # so a value hpuload finds exactly halfway may be a hair off it there (0.5 to 2% of
        # these values): one level at most.
        diff = (x - wx).abs() / LEVEL
        assert diff.max() <= 1 + 1e-3 and (diff > 1e-3).float().mean() < 0.05, diff.max()


class KineticsWithClipIndex(torchvision.datasets.Kinetics):
    """Returns the clip's own index after the label: a value that changes within a video."""

    def __getitem__(self, idx):
        video, audio, label = super().__getitem__(idx)
        return video, audio, label, idx


class KineticsWithClipTensor(torchvision.datasets.Kinetics):
    def __getitem__(self, idx):
        video, audio, label = super().__getitem__(idx)
        return video, audio, label, torch.tensor([idx])


@pytest.mark.parametrize(
    "dataset, reason",
    [(KineticsWithClipIndex, "for every clip of a video"), (KineticsWithClipTensor, "returns a Tensor after the label")],
)
def test_values_after_the_label_that_change_within_a_video_go_to_torch_with_the_reason(
    decoder, kinetics_root, dataset, reason
):
    data = kinetics(kinetics_root, preset_eval(), dataset=dataset)
    sampler = UniformClipSampler(data.video_clips, 3)
    with pytest.warns(FallbackWarning, match=reason):
        loader = DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate_with_video_id)
    want = list(torch.utils.data.DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate_with_video_id))
    got = list(loader)
    assert [torch.equal(g[2], w[2]) for g, w in zip(got, want)] == [True] * len(want)


def test_kinetics_with_the_references_train_preset_gives_a_flip_and_crop_torch_could_draw(decoder, kinetics_root):
    """Each clip hpuload gives is torchvision's resized clip cropped at one of the offsets
    `RandomCrop` can draw, flipped or not, the same for every frame of the clip."""
    data = kinetics(kinetics_root, preset_train())
    resized = kinetics(kinetics_root, preset_eval(crop=(36, 48)))
    sampler = RandomClipSampler(data.video_clips, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        loader = DataLoader(data, batch_size=3, sampler=sampler, collate_fn=collate_fn, num_workers=2)
    flips, offsets = 0, set()
    for x, y in loader:
        for clip, label, index in zip(x, y, loader.last_indices):
            whole, _, want_label = resized[index]
            assert label == want_label
            found = None
            for flip in (False, True):
                source = whole.flip(-1) if flip else whole
                for top in range(36 - 32 + 1):
                    for left in range(48 - 40 + 1):
                        window = source[:, :, top : top + 32, left : left + 40]
                        if within_rounding(clip, window, decoder):
                            found = (flip, top, left)
                            break
                    if found:
                        break
                if found:
                    break
            assert found is not None, f"clip {index} is no flip and crop of torchvision's resized clip"
            flips += found[0]
            offsets.add(found[1:])
    assert flips > 0 and len(offsets) > 2


@pytest.mark.parametrize("resize, flip", [((36, 49), T.RandomHorizontalFlip), ((37, 48), T.RandomVerticalFlip)])
def test_a_flip_before_a_centre_crop_with_an_odd_margin_gives_torchs_clips(decoder, kinetics_root, resize, flip):
    """The resize flipped, then its centre cut: with an odd margin the centre rounds to the
    same side whichever way the clip faces, so this is not the flipped centre crop (hpuload
    gave that, a column off, before it cut the mirrored window)."""
    transform = T.Compose(
        [
            T.ConvertImageDtype(torch.float32),
            T.Resize(resize, antialias=False),
            flip(1.0),
            T.Normalize(mean=MEAN, std=STD),
            T.CenterCrop((32, 40)),
            ConvertBCHWtoCBHW(),
        ]
    )
    data = kinetics(kinetics_root, transform)
    got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 1), more_than=0)
    for (x, y), (wx, wy) in zip(got, want):
        assert torch.equal(y, wy) and x.shape == wx.shape
        assert within_rounding(x, wx, decoder)


def test_pixel_ops_that_change_each_pixel_alone_before_the_crop_give_torchs_clips(same_frames, kinetics_root):
    """A uint8 clip resized, then brightness and saturation (each pixel on its own) and a flip
    before the crop: natively, torchvision's pixels within one level (the resize's)."""
    transform = v2.Compose(
        [
            v2.Resize((36, 49)),
            v2.ColorJitter(brightness=(0.7, 0.7)),
            v2.RandomHorizontalFlip(1.0),
            v2.ColorJitter(saturation=(1.3, 1.3)),
            v2.CenterCrop((32, 40)),
            v2.ToDtype(torch.float32, scale=True),
            ConvertBCHWtoCBHW(),
        ]
    )
    data = kinetics(kinetics_root, transform)
    got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 1), more_than=0)
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape and torch.equal(y, wy)
        assert ((x - wx).abs() * 255).round().max() <= 1


def test_a_clip_sampler_s_order_is_followed_each_epoch(decoder, kinetics_root):
    data = kinetics(kinetics_root, preset_eval())
    sampler = RandomClipSampler(data.video_clips, 3)
    loader = DataLoader(data, batch_size=2, sampler=sampler, collate_fn=collate_fn)
    for epoch in range(2):
        torch.manual_seed(epoch)
        want = [int(i) for i in sampler]
        torch.manual_seed(epoch)
        got = []
        for _ in loader:
            got += loader.last_indices
        assert got == want


def test_default_collate_and_a_collate_reading_audio_go_to_torch_naming_the_audio(decoder, kinetics_root):
    data = kinetics(kinetics_root, preset_eval())
    with pytest.warns(FallbackWarning, match="audio"):
        loader = DataLoader(data, batch_size=2)
    assert not hasattr(loader, "report")

    def stacks_audio(batch):
        return torch.stack([d[0] for d in batch]), [d[1].shape for d in batch]

    with pytest.warns(FallbackWarning, match="audio"):
        DataLoader(data, batch_size=2, collate_fn=stacks_audio)


def test_a_video_whose_metadata_disagrees_with_its_tables_has_its_clips_made_by_the_dataset(decoder, kinetics_root):
    """The dataset's metadata counts one frame fewer than the file's tables hold: hpuload
    lays out the dataset's windows, but that video's clips are the dataset's own (made in
    Python), named by a `PythonClipsWarning`; the batches are torch's."""
    data = kinetics(kinetics_root, preset_eval())
    k = next(i for i, p in enumerate(data.video_clips.video_paths) if p.endswith("baseline.mp4"))
    meta = data.video_clips.metadata
    meta["video_pts"] = list(meta["video_pts"])
    meta["video_pts"][k] = torch.arange(len(meta["video_pts"][k]) - 1)
    data.video_clips = type(data.video_clips)(
        meta["video_paths"], 4, 3, None, _precomputed_metadata=meta, output_format="TCHW"
    )
    with pytest.warns(PythonClipsWarning, match="baseline.mp4: the dataset's metadata counts 15 frames, the file's tables 16"):
        got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 3))
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape and torch.equal(y, wy)
        assert within_rounding(x, wx, decoder), ((x - wx).abs().max() / LEVEL, decoder)


def _pixel_ops():
    """Pixel ops with their parameters fixed (a range of one value, probability 1), so that
    torch's draw and hpuload's are the same: v1 classes, as the reference writes them, and a
    few v2 ones."""
    v2 = pytest.importorskip("torchvision.transforms.v2")
    return {
        "brightness": T.ColorJitter(brightness=(1.3, 1.3)),
        "contrast": T.ColorJitter(contrast=(0.6, 0.6)),
        "saturation": T.ColorJitter(saturation=(1.5, 1.5)),
        "hue": T.ColorJitter(hue=(0.1, 0.1)),
        "grayscale": T.Grayscale(3),
        "invert": T.RandomInvert(1.0),
        "solarize": T.RandomSolarize(128, 1.0),
        "posterize": T.RandomPosterize(3, 1.0),
        "autocontrast": T.RandomAutocontrast(1.0),
        "equalize": T.RandomEqualize(1.0),
        "sharpness": T.RandomAdjustSharpness(2.0, 1.0),
        "blur": T.GaussianBlur(5, sigma=(1.2, 1.2)),
        "rotation": T.RandomRotation((20, 20)),
        "v2 brightness": v2.ColorJitter(brightness=(0.7, 0.7)),
        "v2 grayscale": v2.Grayscale(3),
        "v2 blur": v2.GaussianBlur(3, sigma=(0.8, 0.8)),
    }


@pytest.mark.parametrize("name", list(_pixel_ops()))
def test_a_pixel_op_on_the_uint8_clip_gives_torchvisions_tensor_kernels_pixels(same_frames, kinetics_root, name):
    """A pixel op after the crop, on the uint8 clip (as VideoMAE-style presets place colour
    jitter): hpuload runs its own kernels, which are torchvision's tensor kernels on uint8.
    Same parameters in, the same pixels out within one level."""
    op = _pixel_ops()[name]
    transform = T.Compose([T.CenterCrop((32, 40)), op, T.ConvertImageDtype(torch.float32), ConvertBCHWtoCBHW()])
    data = kinetics(kinetics_root, transform)
    got, want = torch_and_hpuload(data, UniformClipSampler(data.video_clips, 2), more_than=1)
    for (x, y), (wx, wy) in zip(got, want):
        assert x.shape == wx.shape and torch.equal(y, wy)
        levels = ((x - wx).abs() * 255).round()
        assert levels.max() <= 1, (name, levels.max())
