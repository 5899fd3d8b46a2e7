"""A sweep of transforms on torchvision's video datasets, their random parameters pinned
(degenerate ranges, p=1): v1, v2 and `_transforms_video`, on the uint8 clip and after the
float conversion, each batch through hpuload.torch.DataLoader and through torch's DataLoader
over the same `Kinetics` dataset, compared value by value. Both sides decode with hpuload's
decoder (the stand-in of the tests' `same_frames`), so only the transforms are compared.
Session 64's search for silent differences in video (BENCHMARKS.md).

usage: python video_transform_sweep.py CLIPS_DIR [SUBSTRING]
  CLIPS_DIR  the crate's tests/data/video
  prints one line per case: ok/BAD, the largest difference in uint8 levels (for normalized
  floats, in levels of the input), how many values differ by more than one level, and the
  warnings hpuload gave (fallback, Python tail)
"""
import shutil
import sys
import tempfile
import types
import warnings
from pathlib import Path

import torch
import torchvision
import torchvision.transforms as T
import torchvision.transforms._transforms_video as TV
from torchvision.transforms import v2
from torchvision.transforms import InterpolationMode as IM
from torch.utils.data.dataloader import default_collate
from torchvision.datasets.samplers import UniformClipSampler

from hpuload.torch import DataLoader, FallbackWarning, PythonTailWarning

CLIPS = Path(sys.argv[1])
only = sys.argv[2] if len(sys.argv) > 2 else None
N, B, L = IM.NEAREST, IM.BILINEAR, IM.BICUBIC
MEAN, STD = (0.43216, 0.394666, 0.37645), (0.22803, 0.22145, 0.216989)


# torchcodec's VideoDecoder as VideoClips uses it, answered by hpuload's decoder: the tests'.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "tests"))
from test_video_datasets import _NoAudioDecoder as NoAudio, _StandInDecoder as StandIn  # noqa: E402

shim = types.ModuleType("torchcodec")
shim.decoders = types.SimpleNamespace(VideoDecoder=StandIn, AudioDecoder=NoAudio)
sys.modules["torchcodec"], sys.modules["torchcodec.decoders"] = shim, shim.decoders


class TCHWtoCTHW(torch.nn.Module):
    def forward(self, vid):
        return vid.permute(1, 0, 2, 3)


class TCHWtoTHWC(torch.nn.Module):
    def forward(self, vid):
        return vid.permute(0, 2, 3, 1)


class THWCtoTCHW(torch.nn.Module):
    def forward(self, vid):
        return vid.permute(0, 3, 1, 2)


def collate(batch):
    return default_collate([(d[0], d[2]) for d in batch])


def pixel_ops(M):
    return [
        ("bright", M.ColorJitter(brightness=(1.3, 1.3))),
        ("contrast", M.ColorJitter(contrast=(0.6, 0.6))),
        ("sat", M.ColorJitter(saturation=(1.5, 1.5))),
        ("hue", M.ColorJitter(hue=(0.1, 0.1))),
        ("hue-", M.ColorJitter(hue=(-0.27, -0.27))),
        ("gray3", M.Grayscale(3)),
        ("rgray", M.RandomGrayscale(1.0)),
        ("invert", M.RandomInvert(1.0)),
        ("blur5", M.GaussianBlur(5, sigma=(1.2, 1.2))),
        ("blur3x7", M.GaussianBlur((3, 7), sigma=(0.7, 0.7))),
        ("sharp", M.RandomAdjustSharpness(2.0, 1.0)),
        ("autocontrast", M.RandomAutocontrast(1.0)),
        ("rot20", M.RandomRotation((20, 20))),
        ("rot20b", M.RandomRotation((20, 20), interpolation=B)),
        ("rot-33exp", M.RandomRotation((-33, -33), expand=True)),
        ("affine", M.RandomAffine((10, 10), scale=(1.2, 1.2), shear=(5, 5, 0, 0))),
        ("hflip", M.RandomHorizontalFlip(1.0)),
        ("vflip", M.RandomVerticalFlip(1.0)),
        ("pad2", M.Pad(2)),
        ("pad3refl", M.Pad((3, 1), padding_mode="reflect")),
        ("pad2edge", M.Pad(2, padding_mode="edge")),
        ("pad1fill", M.Pad(1, fill=7)),
        ("ccrop-big", M.CenterCrop((44, 52))),
    ]


def uint8_only(M):
    return [
        ("sol128", M.RandomSolarize(128, 1.0)),
        ("post3", M.RandomPosterize(3, 1.0)),
        ("equalize", M.RandomEqualize(1.0)),
    ]


def cases():
    crop = (40, 48)
    for M, tag in ((T, "v1"), (v2, "v2")):
        fl = M.ConvertImageDtype(torch.float32) if M is T else v2.ToDtype(torch.float32, scale=True)
        # Resizes of the uint8 clip and of the float clip, every interpolation, both antialias.
        for size in (20, (24, 40), 50):
            for it in (N, B, L):
                for aa in (True, False):
                    r = M.Resize(size, interpolation=it, antialias=aa)
                    yield f"{tag} u8 Resize({size},{it.value},aa={aa})+CC", M.Compose([r, M.CenterCrop(18), fl])
                    yield f"{tag} f32 Resize({size},{it.value},aa={aa})+CC", M.Compose([fl, r, M.CenterCrop(18)])
        for it in (N, B, L):
            s = M.RandomResizedCrop(crop, scale=(1, 1), ratio=(4 / 3, 4 / 3), interpolation=it)
            yield f"{tag} CC(48,64)+RRC(full,{it.value})", M.Compose([M.CenterCrop((48, 64)), s, fl])
        for name, op in pixel_ops(M):
            yield f"{tag} u8 CC+{name}", M.Compose([M.CenterCrop(crop), op, fl])
            yield f"{tag} f32 CC+{name}", M.Compose([fl, M.CenterCrop(crop), op])
        for name, op in uint8_only(M):
            yield f"{tag} u8 CC+{name}", M.Compose([M.CenterCrop(crop), op, fl])
        yield f"{tag} f32 Normalize+CC+flip", M.Compose([fl, M.Normalize(MEAN, STD), M.CenterCrop(crop), M.RandomHorizontalFlip(1.0)])
        yield f"{tag} f32 CC+Normalize+bright", M.Compose([fl, M.CenterCrop(crop), M.Normalize(MEAN, STD), M.ColorJitter(brightness=(1.2, 1.2))])
        yield f"{tag} RandomCrop(pad exact)", M.Compose([M.CenterCrop(crop), M.RandomCrop((44, 52), padding=2), fl])
        # pad_if_needed pads each side by what is missing, so the offset is drawn: only the
        # case where nothing is missing is pinned.
        yield f"{tag} RandomCrop(pad_if_needed)", M.Compose([M.CenterCrop(crop), M.RandomCrop(crop, pad_if_needed=True, fill=3), fl])
        yield f"{tag} RandomCrop(refl)", M.Compose([M.CenterCrop(crop), M.RandomCrop((44, 52), padding=2, padding_mode="reflect"), fl])
        yield f"{tag} CC+permute", M.Compose([M.CenterCrop(crop), fl, TCHWtoCTHW()])
        # Containers with their draws pinned, and nesting.
        bright = M.ColorJitter(brightness=(1.3, 1.3))
        yield f"{tag} u8 CC+RandomApply(p1)", M.Compose([M.CenterCrop(crop), M.RandomApply([bright, M.RandomInvert(1.0)], p=1.0), fl])
        yield f"{tag} u8 CC+RandomApply(p0)", M.Compose([M.CenterCrop(crop), M.RandomApply([bright], p=0.0), fl])
        yield f"{tag} u8 CC+RandomChoice(one)", M.Compose([M.CenterCrop(crop), M.RandomChoice([bright]), fl])
        yield f"{tag} u8 nested Compose", M.Compose([M.Compose([M.CenterCrop(crop), M.RandomHorizontalFlip(1.0)]), M.Compose([bright, fl])])
        yield f"{tag} u8 CC+flip+Normalize+permute", M.Compose([M.CenterCrop(crop), M.RandomHorizontalFlip(1.0), fl, M.Normalize(MEAN, STD), TCHWtoCTHW()])
        yield f"{tag} u8 RRC(scale1)+jitter+gray", M.Compose([M.CenterCrop((48, 64)), M.RandomResizedCrop((24, 32), scale=(1, 1), ratio=(4 / 3, 4 / 3), antialias=True), M.ColorJitter(contrast=(0.8, 0.8)), M.RandomGrayscale(1.0), fl])
        yield f"{tag} u8 Resize+CC+Normalize(inplace)", M.Compose([M.Resize(40), M.CenterCrop(36), fl, M.Normalize(MEAN, STD, inplace=True)])
    # v2 only: dtype steps, temporal subsampling, its own resize families.
    yield "v2 ToDtype(f16)", v2.Compose([v2.CenterCrop(crop), v2.ToDtype(torch.float16, scale=True)])
    yield "v2 ToDtype(bf16)", v2.Compose([v2.CenterCrop(crop), v2.ToDtype(torch.bfloat16, scale=True)])
    yield "v2 ToDtype(f32,noscale)", v2.Compose([v2.CenterCrop(crop), v2.ToDtype(torch.float32)])
    yield "v2 ToDtype(f64)", v2.Compose([v2.CenterCrop(crop), v2.ToDtype(torch.float64, scale=True)])
    yield "v1 ConvertImageDtype(f16)", T.Compose([T.CenterCrop(crop), T.ConvertImageDtype(torch.float16)])
    yield "v2 UniformTemporalSubsample(2)", v2.Compose([v2.CenterCrop(crop), v2.UniformTemporalSubsample(2), v2.ToDtype(torch.float32, scale=True)])
    yield "v2 RandomShortestSize(36)", v2.Compose([v2.RandomShortestSize(36), v2.CenterCrop(32), v2.ToDtype(torch.float32, scale=True)])
    yield "v2 RandomShortestSize(36,max60)", v2.Compose([v2.RandomShortestSize(36, max_size=60), v2.CenterCrop(32), v2.ToDtype(torch.float32, scale=True)])
    yield "v2 Resize(30,max45)", v2.Compose([v2.Resize(30, max_size=45), v2.CenterCrop(28), v2.ToDtype(torch.float32, scale=True)])
    yield "v2 RandomResize(30,31)", v2.Compose([v2.RandomResize(30, 31), v2.CenterCrop(28), v2.ToDtype(torch.float32, scale=True)])
    yield "v2 ScaleJitter", v2.Compose([v2.CenterCrop(crop), v2.ScaleJitter((40, 48), scale_range=(0.5, 0.5)), v2.ToDtype(torch.float32, scale=True)])
    yield "v2 RandomErasing(p0)", v2.Compose([v2.CenterCrop(crop), v2.ToDtype(torch.float32, scale=True), v2.RandomErasing(p=0.0)])
    yield "v2 ToPureTensor", v2.Compose([v2.CenterCrop(crop), v2.ToDtype(torch.float32, scale=True), v2.ToPureTensor()])
    yield "v2 SanitizeBoundingBoxes-free Identity", v2.Compose([v2.CenterCrop(crop), v2.Identity(), v2.ToDtype(torch.float32, scale=True)])
    # _transforms_video: [C, T, H, W] after ToTensorVideo, which takes [T, H, W, C] uint8.
    back = TCHWtoTHWC()
    # Clips as `output_format="THWC"` gives them (UCF101's and HMDB51's default): the steps
    # of the older scripts, which permute first or take [T, H, W, C] as it is.
    to_tchw = T.Lambda(lambda x: x.permute(0, 3, 1, 2))
    yield "thwc permute+CC+float", T.Compose([to_tchw, T.CenterCrop(crop), T.ConvertImageDtype(torch.float32)])
    yield "thwc /255+permute+Resize+CC", T.Compose([T.Lambda(lambda x: x / 255.0), to_tchw, T.Resize((36, 48), antialias=False), T.CenterCrop(32)])
    yield "thwc permute+Resize(nearest)+CC+flip", T.Compose([THWCtoTCHW(), T.Resize(36, interpolation=N), T.CenterCrop(32), T.RandomHorizontalFlip(1.0), T.ConvertImageDtype(torch.float32)])
    yield "thwc ToTensorVideo+CenterCropVideo", T.Compose([TV.ToTensorVideo(), TV.CenterCropVideo((40, 48))])
    yield "thwc ToTensorVideo+CCV+NormalizeVideo", T.Compose([TV.ToTensorVideo(), TV.CenterCropVideo(40), TV.NormalizeVideo(MEAN, STD)])
    yield "thwc ToTensorVideo+CCV+HFlipV", T.Compose([TV.ToTensorVideo(), TV.CenterCropVideo(40), TV.RandomHorizontalFlipVideo(1.0)])
    yield "thwc ToTensorVideo+RRCV(full)", T.Compose([TV.ToTensorVideo(), TV.CenterCropVideo((48, 64)), TV.RandomResizedCropVideo((30, 40), scale=(1, 1), ratio=(4 / 3, 4 / 3))])
    yield "tv ToTensorVideo+CenterCropVideo", T.Compose([back, TV.ToTensorVideo(), TV.CenterCropVideo((40, 48))])
    yield "tv ToTensorVideo+CCV+NormalizeVideo", T.Compose([back, TV.ToTensorVideo(), TV.CenterCropVideo(40), TV.NormalizeVideo(MEAN, STD)])
    yield "tv ToTensorVideo+RRCV(full)", T.Compose([T.CenterCrop((48, 64)), back, TV.ToTensorVideo(), TV.RandomResizedCropVideo((30, 40), scale=(1, 1), ratio=(4 / 3, 4 / 3))])
    yield "tv ToTensorVideo+CCV+HFlipV", T.Compose([back, TV.ToTensorVideo(), TV.CenterCropVideo(40), TV.RandomHorizontalFlipVideo(1.0)])


def sampling_cases():
    """The clips themselves: `VideoClips`' frames per clip, step between clips and frame rate
    (resampled up and down, on constant and variable frame rate videos), one transform."""
    transform = T.Compose([T.CenterCrop((40, 48)), T.ConvertImageDtype(torch.float32)])
    for frames, step in ((1, 1), (4, 3), (5, 2), (8, 5), (12, 1)):
        for rate in (None, 5, 10, 12.5, 15, 24, 30, 50):
            yield f"clips frames={frames} step={step} frame_rate={rate}", transform, dict(frames_per_clip=frames, step_between_clips=step, frame_rate=rate)


def kinetics(root, transform, output_format, clips=None):
    clips = clips or dict(frames_per_clip=4, step_between_clips=3)
    return torchvision.datasets.Kinetics(
        str(root), num_classes="400", split="train", **clips,
        transform=transform, extensions=("mp4",), output_format=output_format,
    )


def compare(got, want):
    worst, over = 0.0, 0
    for (x, y), (wx, wy) in zip(got, want):
        if x.shape != wx.shape or x.dtype != wx.dtype or not torch.equal(y, wy):
            return f"shape/dtype/label {tuple(x.shape)} {x.dtype} vs {tuple(wx.shape)} {wx.dtype}", None
        a, b = x.double(), wx.double()
        if x.is_floating_point():
            scale = 255.0
            if a.abs().max() > 1.5 or b.abs().max() > 1.5:  # normalized: a level of the input
                scale = 255.0 * min(STD)
            a, b = a * scale, b * scale
        d = (a - b).abs()
        worst = max(worst, float(d.max()))
        over += int((d > 1.0 + 1e-3).sum())  # float32 k / 255 times 255 is k within 1e-4
    return worst, over


def main():
    tmp = Path(tempfile.mkdtemp())
    for cls, clip in [("abseiling", "high_bframes.mp4"), ("abseiling", "vfr.mp4"), ("bowling", "main_cabac.mp4"),
                      ("bowling", "baseline.mp4"), ("bowling", "fragmented.mp4")]:
        (tmp / "train" / cls).mkdir(parents=True, exist_ok=True)
        shutil.copy(CLIPS / clip, tmp / "train" / cls / clip)
    bad = 0
    for name, transform, clips in [(n, t, None) for n, t in cases()] + list(sampling_cases()):
        if only and only not in name:
            continue
        data = kinetics(tmp, transform, "THWC" if name.startswith("thwc") else "TCHW", clips)
        sampler = UniformClipSampler(data.video_clips, 2)
        try:
            torch.manual_seed(0)
            want = [tuple(t.clone() for t in b) for b in torch.utils.data.DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate)]
        except Exception as e:  # torch itself cannot batch it: nothing to compare
            print(f"skip  {name}: torch: {type(e).__name__}: {str(e)[:80]}")
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                torch.manual_seed(0)
                loader = DataLoader(data, batch_size=4, sampler=sampler, collate_fn=collate, num_workers=2)
                got = [tuple(t.clone() for t in b) for b in loader]
            except Exception as e:
                print(f"BAD   {name}: hpuload raised {type(e).__name__}: {str(e)[:200]}")
                bad += 1
                continue
        notes = []
        for w in caught:
            if issubclass(w.category, FallbackWarning):
                notes.append("fallback")
            elif issubclass(w.category, PythonTailWarning):
                notes.append("tail: " + str(w.message)[:70])
        worst, over = compare(got, want)
        if over is None:
            ok = False
        else:
            ok = worst <= 1.0 + 1e-3
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'}   {name}: max {worst if isinstance(worst, str) else f'{worst:.2f}'} over1 {over} {' | '.join(sorted(set(notes)))}")
    print(f"{bad} BAD")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
