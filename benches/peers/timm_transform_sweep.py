"""A sweep of timm's `create_transform` settings with their random parameters pinned (scale
and ratio of one value, flips at 0 or 1, no colour jitter draw): each sample through
hpuload.torch.DataLoader (CPU path) and through the ImageFolder itself, compared value by
value with `transform_sweep.run`. Session 65's search for silent differences (BENCHMARKS.md).

usage: python timm_transform_sweep.py FOLDER [SUBSTRING]
  FOLDER  a small ImageFolder of photos (a dozen from the reference corpus)
"""
import sys

from timm.data import create_transform

import transform_sweep


def cases():
    for size in (224, (160, 192)):
        s = size if isinstance(size, int) else f"{size[0]}x{size[1]}"
        for interp in ("bilinear", "bicubic", "nearest", "lanczos"):
            for crop_pct in (0.875, 1.0, 0.95):
                for mode in ("center", "squash", "border"):
                    yield f"eval {s} {interp} pct{crop_pct} {mode}", create_transform(
                        size, is_training=False, interpolation=interp, crop_pct=crop_pct, crop_mode=mode)
        yield f"eval {s} no-normalize", create_transform(size, is_training=False, normalize=False)
        yield f"eval {s} prefetcher", create_transform(size, is_training=False, use_prefetcher=True)
        yield f"eval {s} mean/std", create_transform(size, is_training=False, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
        for interp in ("bilinear", "bicubic"):
            for hflip, vflip in ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0)):
                yield f"train {s} {interp} h{hflip} v{vflip}", create_transform(
                    size, is_training=True, scale=(1.0, 1.0), ratio=(1.0, 1.0), hflip=hflip, vflip=vflip,
                    color_jitter=0.0, interpolation=interp)
        yield f"train {s} jitter-b", create_transform(
            size, is_training=True, scale=(1.0, 1.0), ratio=(1.0, 1.0), hflip=0.0, color_jitter=(0.3, 0.0, 0.0),
            color_jitter_prob=0.0)
        yield f"train {s} grey1", create_transform(
            size, is_training=True, scale=(1.0, 1.0), ratio=(1.0, 1.0), hflip=0.0, color_jitter=0.0, grayscale_prob=1.0)
        yield f"train {s} no-aug", create_transform(size, is_training=True, no_aug=True, interpolation="bicubic")
        yield f"train {s} prefetcher", create_transform(
            size, is_training=True, scale=(1.0, 1.0), ratio=(1.0, 1.0), hflip=0.0, color_jitter=0.0, use_prefetcher=True)


def main():
    transform_sweep.ROOT = sys.argv[1]
    only = sys.argv[2] if len(sys.argv) > 2 else None
    for name, tf in cases():
        if only and only not in name:
            continue
        try:
            r = transform_sweep.run(name, tf)
        except Exception as e:
            r = f"REF-ERROR {type(e).__name__}: {str(e)[:150]}"
        print(f"{name:45s} {r}", flush=True)


if __name__ == "__main__":
    main()
