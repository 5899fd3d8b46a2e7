"""A sweep of torchvision transforms with their random parameters pinned (degenerate ranges,
p=1), v1 and v2, on PIL images and after PILToTensor/ToImage: each sample through
hpuload.torch.DataLoader (CPU path) and through the dataset itself, compared byte by byte.
Session 52's search for silent differences (BENCHMARKS.md).

usage: python transform_sweep.py FOLDER [SUBSTRING]
  FOLDER  an ImageFolder (make one with transform_sweep_images.py); the pixel-op cases crop
          96x112 first, so its images must be at least that large (BIG=1 there)
  prints one line per case: ok/BAD, the largest difference in levels, how many values differ
  by more than one, the share that differ at all (half a level or more), and the warnings
  hpuload gave (fallback, Python tail, skipped samples)
The RRC(57, scale 1, ratio 1) cases are not pinned on the small set's 150x151 image: its
150x150 window fits one row short, so torchvision draws the top offset (0 or 1) and hpuload
draws its own; their BAD there is the draw, not the pixels.
"""
import sys, warnings, traceback, math
import torch
from torchvision import datasets
from torchvision import transforms as T
from torchvision.transforms import v2
from torchvision.transforms import InterpolationMode as IM
from hpuload.torch import DataLoader
torch.manual_seed(0)
ROOT = sys.argv[1] if __name__ == "__main__" else None
only = sys.argv[2] if __name__ == "__main__" and len(sys.argv) > 2 else None
N, B, L = IM.NEAREST, IM.BILINEAR, IM.BICUBIC

def cases():
    for M, tag in ((T, "v1"), (v2, "v2pil")):
        tt = M.PILToTensor()
        for s in (64, 97, 256):
            for c in (48, 64):
                for it in (N, B, L):
                    yield f"{tag} Resize({s},{it.value})+CenterCrop({c})", M.Compose([M.Resize(s, interpolation=it), M.CenterCrop(c), tt])
        for hw in ((80, 112), (300, 41), (17, 17), (512, 384)):
            for it in (N, B, L):
                yield f"{tag} Resize({hw},{it.value})", M.Compose([M.Resize(hw, interpolation=it), tt])
        for it in (N, B, L):
            yield f"{tag} RRC(57,scale1,ratio1,{it.value})", M.Compose([M.RandomResizedCrop(57, scale=(1, 1), ratio=(1, 1), interpolation=it), tt])
        yield f"{tag} Resize(64,aa=False)+CenterCrop(48)", M.Compose([M.Resize(64, antialias=False), M.CenterCrop(48), tt])
        yield f"{tag} Resize(60,max_size=90)+CenterCrop(40)", M.Compose([M.Resize(60, max_size=90), M.CenterCrop(40), tt])
        yield f"{tag} CenterCrop(33)", M.Compose([M.CenterCrop(33), tt])
        yield f"{tag} CenterCrop(31,20)", M.Compose([M.CenterCrop((31, 20)), tt])
        yield f"{tag} CenterCrop(100)pad", M.Compose([M.CenterCrop(100), tt])
        R = M.CenterCrop((96, 112))
        px = pixel_ops(M) + [
            ("post8", M.RandomPosterize(8, 1.0)),
            ("sol200.5", M.RandomSolarize(200.5, 1.0)),
        ]
        for name, op in px:
            yield f"{tag} R+{name}", M.Compose([R, op, tt])
        yield f"{tag} R+ToTensor+Normalize", M.Compose([R, M.ToTensor() if tag == "v1" else M.Compose([M.PILToTensor(), v2.ToDtype(torch.float32, scale=True)]), M.Normalize([0.5, 0.4, 0.3], [0.2, 0.3, 0.25])])
    # v1 on tensors
    R = T.CenterCrop((96, 112))
    for name, op in pixel_ops(T):
        yield f"v1t R+{name}", T.Compose([T.PILToTensor(), R, op])
    # v2 on tensors
    tag = "v2t"
    M = v2
    pre = [v2.ToImage()]
    for s in (64, 97, 256):
        for it in (N, B, L):
            for aa in (True, False):
                yield f"{tag} Resize({s},{it.value},aa={aa})+CenterCrop(48)", v2.Compose(pre + [v2.Resize(s, interpolation=it, antialias=aa), v2.CenterCrop(48)])
    for hw in ((80, 112), (300, 41), (17, 17), (512, 384)):
        for it in (N, B, L):
            yield f"{tag} Resize({hw},{it.value})", v2.Compose(pre + [v2.Resize(hw, interpolation=it)])
    for s in (64, 97, 256):
        for it in (N, B, L):
            yield f"v1t Resize({s},{it.value})+CenterCrop(48)", T.Compose([T.PILToTensor(), T.Resize(s, interpolation=it), T.CenterCrop(48)])
    for hw in ((80, 112), (300, 41), (17, 17), (512, 384)):
        for it in (N, B, L):
            yield f"v1t Resize({hw},{it.value})", T.Compose([T.PILToTensor(), T.Resize(hw, interpolation=it)])
    for it in (N, B, L):
        yield f"{tag} RRC(57,scale1,ratio1,{it.value})", v2.Compose(pre + [v2.RandomResizedCrop(57, scale=(1, 1), ratio=(1, 1), interpolation=it)])
        yield f"v1t RRC(57,scale1,ratio1,{it.value})", T.Compose([T.PILToTensor(), T.RandomResizedCrop(57, scale=(1, 1), ratio=(1, 1), interpolation=it)])
    R = v2.CenterCrop((96, 112))
    for name, op in pixel_ops(v2):
        yield f"{tag} R+{name}", v2.Compose(pre + [R, op])
    yield f"{tag} R+ToDtype+Normalize", v2.Compose(pre + [R, v2.ToDtype(torch.float32, scale=True), v2.Normalize([0.5, 0.4, 0.3], [0.2, 0.3, 0.25])])

def pixel_ops(M):
    """Pixel ops of module `M` with pinned parameters, by name."""
    return [
        ("hflip", M.RandomHorizontalFlip(1.0)), ("vflip", M.RandomVerticalFlip(1.0)),
        ("bright1.3", M.ColorJitter(brightness=(1.3, 1.3))), ("bright0.6", M.ColorJitter(brightness=(0.6, 0.6))),
        ("contrast0.7", M.ColorJitter(contrast=(0.7, 0.7))), ("contrast1.6", M.ColorJitter(contrast=(1.6, 1.6))),
        ("sat1.5", M.ColorJitter(saturation=(1.5, 1.5))), ("sat0.2", M.ColorJitter(saturation=(0.2, 0.2))),
        ("hue0.1", M.ColorJitter(hue=(0.1, 0.1))), ("hue-0.45", M.ColorJitter(hue=(-0.45, -0.45))),
        ("gray3", M.Grayscale(3)), ("rgray", M.RandomGrayscale(1.0)),
        ("post3", M.RandomPosterize(3, 1.0)), ("post1", M.RandomPosterize(1, 1.0)),
        ("sol128", M.RandomSolarize(128, 1.0)), ("sol0", M.RandomSolarize(0, 1.0)),
        ("autocontrast", M.RandomAutocontrast(1.0)), ("equalize", M.RandomEqualize(1.0)),
        ("sharp2", M.RandomAdjustSharpness(2.0, 1.0)), ("sharp0.3", M.RandomAdjustSharpness(0.3, 1.0)),
        ("invert", M.RandomInvert(1.0)),
        ("blur5s1", M.GaussianBlur(5, sigma=(1.0, 1.0))), ("blur3s0.4", M.GaussianBlur(3, sigma=(0.4, 0.4))), ("blur(7,3)s2", M.GaussianBlur((7, 3), sigma=(2.0, 2.0))),
        ("rot30", M.RandomRotation((30, 30))), ("rot-90bil", M.RandomRotation((-90, -90), interpolation=B)),
        ("rot45fill", M.RandomRotation((45, 45), fill=(10, 200, 30))), ("rot20center", M.RandomRotation((20, 20), center=(5, 9))),
        ("affine", M.RandomAffine(degrees=(10, 10), scale=(1.2, 1.2), shear=(5, 5, -3, -3))),
        ("affine_bil", M.RandomAffine(degrees=(-7, -7), scale=(0.8, 0.8), interpolation=B, fill=128)),
        ("affine_shearx", M.RandomAffine(degrees=0, shear=(12, 12))),
    ]

def run(name, tf):
    ds = datasets.ImageFolder(ROOT, tf)
    ref = [ds[i][0] for i in range(len(ds))]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            dl = DataLoader(ds, batch_size=1, shuffle=False, backend="cpu")
            got = [x[0] for x, _ in dl]
        except Exception as e:
            return f"ERROR {type(e).__name__}: {str(e)[:200]}"
    ws = sorted({type(x.message).__name__ + (":" + str(x.message)[:120] if "Fallback" in type(x.message).__name__ or "Tail" in type(x.message).__name__ or "Skipped" in type(x.message).__name__ else "") for x in w})
    if len(got) != len(ref):
        return f"COUNT {len(got)} vs {len(ref)} {ws}"
    worst = 0.0; where = None; npx = 0; tot = 0; off = 0
    for i, (a, b) in enumerate(zip(got, ref)):
        b = torch.as_tensor(b)
        if a.shape != b.shape:
            return f"SHAPE sample {i}: {tuple(a.shape)} vs {tuple(b.shape)} {ws}"
        if a.dtype != b.dtype:
            return f"DTYPE {a.dtype} vs {b.dtype}"
        d = (a.double() - b.double()).abs()
        if a.dtype.is_floating_point:
            d = d * 255 * 0.3  # roughly levels (normalize std ~0.2-0.3)
        m = d.max().item()
        npx += int((d > 1.0).sum()); tot += d.numel(); off += int((d > 0.5).sum())
        if m > worst:
            worst, where = m, i
    flag = "BAD " if worst > 1.0 else "ok  "
    return f"{flag}max {worst:.2f} (sample {where}), >1: {npx}/{tot}, off: {100 * off / max(tot, 1):.2f}% {ws}"

def main():
    for name, tf in cases():
        if only and only not in name:
            continue
        try:
            r = run(name, tf)
        except Exception as e:
            r = f"REF-ERROR {type(e).__name__}: {str(e)[:150]}"
        print(f"{name:55s} {r}", flush=True)


if __name__ == "__main__":
    main()
