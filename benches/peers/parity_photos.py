"""CPU-path parity on real photos: hpuload (backend=cpu) against torchvision, the eval transform
(Resize(256), CenterCrop(224), PILToTensor) and the train geometry with hpuload's own crop
windows, over N photos of a folder (sampled with a fixed seed).

usage: python parity_photos.py DATA_DIR N"""
import collections
import random
import sys

import torch
import torchvision.transforms.functional as F
from PIL import Image
from torchvision import datasets, transforms as T
from hpuload.torch import DataLoader

root, n = sys.argv[1], int(sys.argv[2])


def stats(name, pairs):
    hist = collections.Counter()
    total = 0
    for a, b in pairs:
        d = (a.int() - b.int()).abs().flatten()
        total += d.numel()
        for v, c in zip(*torch.unique(d, return_counts=True)):
            hist[int(v)] += int(c)
    over1 = sum(c for v, c in hist.items() if v > 1)
    print(f"{name}: {total} values; >1 level: {over1 / total * 1000:.1f} per thousand; max {max(hist)}; histogram {dict(sorted(hist.items()))}")


ds = datasets.ImageFolder(root, T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()]))
idx = sorted(random.Random(7).sample(range(len(ds)), n))
sub = torch.utils.data.Subset(ds, idx)
loader = DataLoader(sub, batch_size=50, backend="cpu")
ours = torch.cat([x for x, _ in loader])
stats("eval Resize(256)+CenterCrop(224)", ((ours[k], sub[k][0]) for k in range(n)))

tds = datasets.ImageFolder(root, T.Compose([T.RandomResizedCrop(224), T.PILToTensor()]))
tsub = torch.utils.data.Subset(tds, idx)
loader = DataLoader(tsub, batch_size=50, backend="cpu", seed=5)
pairs = []
for x, _ in loader:
    for row in range(x.shape[0]):
        i = loader.last_indices[row]
        path = tds.samples[idx[i]][0]
        img = Image.open(path).convert("RGB")
        (top, left, h, w), flip = loader._core.sample_params(0, i, img.width, img.height)
        ref = F.pil_to_tensor(F.resized_crop(img, int(top), int(left), int(h), int(w), [224, 224], antialias=True))
        pairs.append((x[row], ref))
stats("train RandomResizedCrop(224), hpuload's windows", pairs)
