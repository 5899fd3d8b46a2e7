"""The data pipelines of two real training recipes, run with torch's DataLoader or with hpuload's
drop-in (only the import differs), timed over full passes.

  resnet50_v2  torchvision's current ResNet-50 recipe: RandomResizedCrop(176), flip,
               TrivialAugmentWide, PILToTensor, ConvertImageDtype, Normalize, RandomErasing(0.1),
               MixUp(0.2)/CutMix(1.0) in the collate_fn, a repeated-augmentation sampler with 4
               repetitions (timm's RepeatAugSampler, the same scheme as the reference's RASampler).
  v2_no_antialias
               a v2 tensor pipeline with RandomResizedCrop(224, antialias=False), flip, ToDtype,
               Normalize.
  timm         timm's create_transform(224, is_training=True, interpolation="random"): random
               bilinear/bicubic RandomResizedCrop, flip, ColorJitter(0.4), Normalize.
  timm_ra      the same with timm train.py's --aa rand-m9-mstd0.5-inc1 --reprob 0.25
               --remode pixel (DeiT-style recipes): timm's own RandAugment, RandomErasing.
  timm_augmix, timm_augmix_b1, timm_3a
               timm's create_transform with --aa augmix-m5-w4-d2, augmix-m5-w4-d2-b1 (blended)
               or 3a (timm's ThreeAugment).
  deit3        DeiT III's 3-Augment as its new_data_aug_generator builds it (its own grey,
               solarize and blur classes in a RandomChoice; written here after DeiT's
               augment.py), after timm's bicubic RandomResizedCropAndInterpolation and a flip,
               then ColorJitter(0.3, 0.3, 0.3), ToTensor, Normalize.
  dino         DINO's multi-crop at its defaults: two global crops (224, scale 0.4-1) and 8
               local ones (96, scale 0.05-0.4), each bicubic RandomResizedCrop, flip,
               ColorJitter(0.4, 0.4, 0.2, 0.1) with p 0.8, grayscale 0.2, a Pillow Gaussian
               blur (p 1.0, 0.1, 0.5) and solarize (0.2, second global crop), Normalize; the
               batch is a list of 10 tensors. Written here after DINO's main_dino.py and
               utils.py (its own GaussianBlur and Solarization classes).
  moco_v3      MoCo v3's two views (its main_moco.py and moco/loader.py, written here after
               them): bilinear RandomResizedCrop(224, scale 0.08-1), ColorJitter(0.4, 0.4,
               0.2, 0.1) with p 0.8, grayscale 0.2, its own GaussianBlur class (sigma=[.1, 2.],
               no probability of its own) in a RandomApply (p 1.0 and 0.1) and its own
               Solarize class in a RandomApply (p 0.2, second view), flip, Normalize.
  vicreg       VICReg's two views (its augmentations.py): bicubic RandomResizedCrop(224),
               flip, ColorJitter p 0.8, grayscale 0.2, its own GaussianBlur and Solarization
               classes, which draw from NumPy's generator (blur p 1.0 and 0.1, solarize 0.0
               and 0.2), Normalize. Barlow Twins' views are the same with Python's `random`.
  lightly_simclr
               Lightly 1.6's `SimCLRTransform()` at its defaults (two views: RandomResizedCrop
               224, flip, ColorJitter p 0.8, grayscale 0.2, its own GaussianBlur class drawing
               from NumPy's generator, its own ToTensor, which computes as v2's ToDtype), as
               Lightly's examples train with it.
  simclr_bolts Lightning Bolts' SimCLRTrainDataTransform at 224 (written here after it): two
               views of RandomResizedCrop(224), flip, ColorJitter(0.8, 0.8, 0.8, 0.2) with p
               0.8, grayscale 0.2, torchvision's GaussianBlur(23) with p 0.5, ToTensor,
               Normalize, and the online classifier's view (crop, flip, ToTensor, Normalize).
  open_clip    open_clip's training transform (`image_transform(224, is_train=True)`:
               bicubic RandomResizedCrop with scale 0.9-1, its MaybeConvertMode and
               MaybeToTensor classes, CLIP's Normalize), as CLIP fine-tuning scripts use it.

usage: python recipes.py --loader torch|hpuload --recipe RECIPE --data DIR
       [--workers 2] [--batch 256] [--epochs 2]
Prints one JSON line: images/s over the epochs after the first (the first warms caches and
worker pools, as in peer_bench.py).
"""

import argparse
import json
import sys
import time

import torch
from torchvision import datasets
from torchvision.transforms import v2


def resnet50_v2(root, num_classes_hint=None):
    train = v2.Compose(
        [
            v2.RandomResizedCrop(176, interpolation=v2.InterpolationMode.BILINEAR, antialias=True),
            v2.RandomHorizontalFlip(0.5),
            v2.TrivialAugmentWide(interpolation=v2.InterpolationMode.BILINEAR),
            v2.PILToTensor(),
            v2.ToDtype(torch.float, scale=True),
            v2.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
            v2.RandomErasing(0.1),
            v2.ToPureTensor(),
        ]
    )
    dataset = datasets.ImageFolder(root, train)
    n = len(dataset.classes)
    mix = v2.RandomChoice([v2.MixUp(alpha=0.2, num_classes=n), v2.CutMix(alpha=1.0, num_classes=n)])

    def collate(batch):
        return mix(*torch.utils.data.default_collate(batch))

    from timm.data.distributed_sampler import RepeatAugSampler

    sampler = RepeatAugSampler(dataset, num_replicas=1, rank=0, num_repeats=4)
    return dataset, dict(sampler=sampler, collate_fn=collate)


def reference_tensor(root):
    """torchvision's classification reference's train preset with `--backend tensor` and
    without `--use-v2` (v1 on a uint8 tensor: its resize in float), `--auto-augment ta_wide
    --random-erase 0.1 --train-crop-size 176`."""
    from torchvision import transforms as T

    train = T.Compose(
        [
            T.PILToTensor(),
            T.RandomResizedCrop(176, interpolation=T.InterpolationMode.BILINEAR, antialias=True),
            T.RandomHorizontalFlip(0.5),
            T.TrivialAugmentWide(interpolation=T.InterpolationMode.BILINEAR),
            T.ConvertImageDtype(torch.float),
            T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
            T.RandomErasing(0.1),
        ]
    )
    return datasets.ImageFolder(root, train), dict(shuffle=True)


def v2_no_antialias(root):
    """A v2 tensor pipeline that turns antialiasing off for speed: ToImage,
    RandomResizedCrop(224, antialias=False), flip, ToDtype(float32, scale=True), Normalize."""
    from torchvision.transforms import v2

    train = v2.Compose(
        [
            v2.ToImage(),
            v2.RandomResizedCrop(224, antialias=False),
            v2.RandomHorizontalFlip(0.5),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ]
    )
    return datasets.ImageFolder(root, train), dict(shuffle=True)


def timm_default(root):
    from timm.data import create_transform

    dataset = datasets.ImageFolder(root, create_transform(224, is_training=True, interpolation="random"))
    return dataset, dict(shuffle=True)


def timm_rand_augment(root):
    from PIL import Image
    from timm.data import auto_augment, create_transform

    # timm's PosterizeIncreasing keeps 0 bits at the clamped top magnitude, which Pillow 10+
    # refuses (ValueError: bits must be between or equal to 1 and 8): torch's loader dies a few
    # hundred images in. Keeping no bits is black (older Pillow, torchvision, hpuload); the
    # patch applies to both runs (hpuload never calls it).
    original = auto_augment.posterize

    def posterize(img, bits_to_keep, **kw):
        return Image.new(img.mode, img.size) if bits_to_keep < 1 else original(img, bits_to_keep, **kw)

    auto_augment.NAME_TO_OP.update({k: posterize for k, v in auto_augment.NAME_TO_OP.items() if v is original})

    t = create_transform(
        224,
        is_training=True,
        interpolation="random",
        auto_augment="rand-m9-mstd0.5-inc1",
        re_prob=0.25,
        re_mode="pixel",
    )
    return datasets.ImageFolder(root, t), dict(shuffle=True)


def timm_policy(policy):
    """timm's create_transform with `auto_augment=policy` (train.py's --aa): AugMix
    (`augmix-m5-w4-d2`), blended AugMix (`augmix-m5-w4-d2-b1`) or timm's ThreeAugment (`3a`)."""

    def build(root):
        from timm.data import create_transform

        t = create_transform(224, is_training=True, interpolation="random", auto_augment=policy)
        return datasets.ImageFolder(root, t), dict(shuffle=True)

    return build


class DinoBlur:
    """DINO's GaussianBlur: with probability p, Pillow's blur of a radius drawn from a range."""

    def __init__(self, p=0.5, radius_min=0.1, radius_max=2.0):
        self.prob, self.radius_min, self.radius_max = p, radius_min, radius_max

    def __call__(self, img):
        import random

        from PIL import ImageFilter

        if random.random() > self.prob:
            return img
        return img.filter(ImageFilter.GaussianBlur(radius=random.uniform(self.radius_min, self.radius_max)))


class DinoSolarize:
    """DINO's Solarization: Pillow's solarize with probability p."""

    def __init__(self, p):
        self.p = p

    def __call__(self, img):
        import random

        from PIL import ImageOps

        return ImageOps.solarize(img) if random.random() < self.p else img


class DeitGrey:
    """DeiT III's gray_scale: torchvision's Grayscale(3) with probability p."""

    def __init__(self, p=0.2):
        from torchvision import transforms as T

        self.p, self.grey = p, T.Grayscale(num_output_channels=3)

    def __call__(self, img):
        import random

        return self.grey(img) if random.random() < self.p else img


def deit3(root):
    """DeiT III's `new_data_aug_generator` without --src: timm's bicubic random resized crop,
    flip, one of DeiT's own grey, solarize and blur classes (p 1.0, in a RandomChoice),
    ColorJitter(0.3, 0.3, 0.3), ToTensor, Normalize (the 3-Augment it trains with)."""
    from timm.data.transforms import RandomResizedCropAndInterpolation
    from torchvision import transforms as T

    t = T.Compose(
        [
            RandomResizedCropAndInterpolation(224, scale=(0.08, 1.0), interpolation="bicubic"),
            T.RandomHorizontalFlip(),
            T.RandomChoice([DeitGrey(p=1.0), DinoSolarize(p=1.0), DinoBlur(p=1.0)]),
            T.ColorJitter(0.3, 0.3, 0.3),
            T.ToTensor(),
            T.Normalize(mean=torch.tensor([0.485, 0.456, 0.406]), std=torch.tensor([0.229, 0.224, 0.225])),
        ]
    )
    return datasets.ImageFolder(root, t), dict(shuffle=True)


class DinoMultiCrop:
    """DINO's DataAugmentationDINO: two global views and `local` small ones of each image."""

    def __init__(self, global_scale=(0.4, 1.0), local_scale=(0.05, 0.4), local=8):
        from torchvision import transforms as T

        bicubic = T.InterpolationMode.BICUBIC
        jitter = T.Compose(
            [
                T.RandomHorizontalFlip(p=0.5),
                T.RandomApply([T.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1)], p=0.8),
                T.RandomGrayscale(p=0.2),
            ]
        )
        norm = T.Compose([T.ToTensor(), T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
        crop = lambda size, scale: T.RandomResizedCrop(size, scale=scale, interpolation=bicubic)  # noqa: E731
        self.global1 = T.Compose([crop(224, global_scale), jitter, DinoBlur(1.0), norm])
        self.global2 = T.Compose([crop(224, global_scale), jitter, DinoBlur(0.1), DinoSolarize(0.2), norm])
        self.local_views = local
        self.local = T.Compose([crop(96, local_scale), jitter, DinoBlur(p=0.5), norm])

    def __call__(self, image):
        crops = [self.global1(image), self.global2(image)]
        crops += [self.local(image) for _ in range(self.local_views)]
        return crops


def dino(root):
    return datasets.ImageFolder(root, DinoMultiCrop()), dict(shuffle=True)


class MocoBlur:
    """MoCo's GaussianBlur (SimCLR's): a Pillow blur of a radius drawn from `sigma`, always;
    the recipe wraps it in a RandomApply."""

    def __init__(self, sigma=(0.1, 2.0)):
        self.sigma = list(sigma)

    def __call__(self, x):
        import random

        from PIL import ImageFilter

        return x.filter(ImageFilter.GaussianBlur(radius=random.uniform(self.sigma[0], self.sigma[1])))


class MocoSolarize:
    """MoCo v3's Solarize: Pillow's solarize, always (in a RandomApply)."""

    def __call__(self, x):
        from PIL import ImageOps

        return ImageOps.solarize(x)


class TwoViews:
    """MoCo v3's TwoCropsTransform (Barlow Twins' and VICReg's Transform): one view of each."""

    def __init__(self, first, second):
        self.first, self.second = first, second

    def __call__(self, x):
        return [self.first(x), self.second(x)]


def moco_v3(root):
    from torchvision import transforms as T

    def view(blur, solarize):
        return T.Compose(
            [
                T.RandomResizedCrop(224, scale=(0.08, 1.0)),
                T.RandomApply([T.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8),
                T.RandomGrayscale(p=0.2),
                T.RandomApply([MocoBlur([0.1, 2.0])], p=blur),
                T.RandomApply([MocoSolarize()], p=solarize),
                T.RandomHorizontalFlip(),
                T.ToTensor(),
                T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
            ]
        )

    return datasets.ImageFolder(root, TwoViews(view(1.0, 0.0), view(0.1, 0.2))), dict(shuffle=True)


class VicregBlur:
    """VICReg's GaussianBlur: with probability p (NumPy's generator), a Pillow blur of a
    radius in [0.1, 2.0]."""

    def __init__(self, p):
        self.p = p

    def __call__(self, img):
        import numpy as np
        from PIL import ImageFilter

        if np.random.rand() < self.p:
            return img.filter(ImageFilter.GaussianBlur(np.random.rand() * 1.9 + 0.1))
        return img


class VicregSolarization:
    """VICReg's Solarization: Pillow's solarize with probability p (NumPy's generator)."""

    def __init__(self, p):
        self.p = p

    def __call__(self, img):
        import numpy as np
        from PIL import ImageOps

        return ImageOps.solarize(img) if np.random.rand() < self.p else img


def vicreg(root):
    from torchvision import transforms as T

    def view(blur, solarize):
        return T.Compose(
            [
                T.RandomResizedCrop(224, interpolation=T.InterpolationMode.BICUBIC),
                T.RandomHorizontalFlip(p=0.5),
                T.RandomApply([T.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1)], p=0.8),
                T.RandomGrayscale(p=0.2),
                VicregBlur(p=blur),
                VicregSolarization(p=solarize),
                T.ToTensor(),
                T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
            ]
        )

    return datasets.ImageFolder(root, TwoViews(view(1.0, 0.0), view(0.1, 0.2))), dict(shuffle=True)


def lightly_simclr(root):
    from lightly.transforms import SimCLRTransform

    return datasets.ImageFolder(root, SimCLRTransform()), dict(shuffle=True)


class SimclrViews:
    """Lightning Bolts' SimCLRTrainDataTransform: two augmented views and the online
    classifier's, its blur torchvision's GaussianBlur with a kernel a tenth of the size, made
    odd."""

    def __init__(self, size=224):
        from torchvision import transforms as T

        kernel = int(0.1 * size)
        kernel += kernel % 2 == 0
        normalize = T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
        self.view = T.Compose(
            [
                T.RandomResizedCrop(size),
                T.RandomHorizontalFlip(),
                T.RandomApply([T.ColorJitter(0.8, 0.8, 0.8, 0.2)], p=0.8),
                T.RandomGrayscale(p=0.2),
                T.RandomApply([T.GaussianBlur(kernel_size=kernel)], p=0.5),
                T.ToTensor(),
                normalize,
            ]
        )
        self.online = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(), normalize])

    def __call__(self, img):
        return self.view(img), self.view(img), self.online(img)


def simclr_bolts(root):
    return datasets.ImageFolder(root, SimclrViews()), dict(shuffle=True)


def open_clip_train(root):
    from open_clip.transform import image_transform

    return datasets.ImageFolder(root, image_transform(224, is_train=True)), dict(shuffle=True)


RECIPES = {
    "resnet50_v2": resnet50_v2,
    "reference_tensor": reference_tensor,
    "v2_no_antialias": v2_no_antialias,
    "timm": timm_default,
    "timm_ra": timm_rand_augment,
    "timm_augmix": timm_policy("augmix-m5-w4-d2"),
    "timm_augmix_b1": timm_policy("augmix-m5-w4-d2-b1"),
    "timm_3a": timm_policy("3a"),
    "dino": dino,
    "deit3": deit3,
    "open_clip": open_clip_train,
    "simclr_bolts": simclr_bolts,
    "moco_v3": moco_v3,
    "vicreg": vicreg,
    "lightly_simclr": lightly_simclr,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loader", choices=["torch", "hpuload"], required=True)
    ap.add_argument("--recipe", choices=sorted(RECIPES), required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="the first N images only (0: all)")
    args = ap.parse_args()
    if args.loader == "torch":
        from torch.utils.data import DataLoader
    else:
        from hpuload.torch import DataLoader
    dataset, kw = RECIPES[args.recipe](args.data)
    if args.limit:
        # Every k-th image, so that every class stays.
        step = max(1, len(dataset.samples) // args.limit)
        dataset.samples = dataset.samples[::step][: args.limit]
        dataset.imgs, dataset.targets = dataset.samples, [t for _, t in dataset.samples]
    loader = DataLoader(dataset, batch_size=args.batch, num_workers=args.workers, drop_last=True, **kw)
    print(f"{args.loader}: {type(loader).__module__}.{type(loader).__name__}", file=sys.stderr)
    images, seconds = 0, 0.0
    for epoch in range(args.epochs):
        if "sampler" in kw:
            kw["sampler"].set_epoch(epoch)
        t = time.perf_counter()
        n = 0
        for x, y in loader:
            n += (x[0] if isinstance(x, list) else x).shape[0]
        dt = time.perf_counter() - t
        print(f"epoch {epoch}: {n} images in {dt:.1f} s ({n / dt:.0f}/s)", file=sys.stderr)
        if epoch > 0 or args.epochs == 1:
            images, seconds = images + n, seconds + dt
    print(json.dumps({"loader": args.loader, "recipe": args.recipe, "images_per_sec": images / seconds}))


if __name__ == "__main__":
    main()
