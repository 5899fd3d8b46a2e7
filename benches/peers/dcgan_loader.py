"""The data loading of PyTorch's examples/dcgan/main.py (dataset "folder": Resize(64),
CenterCrop(64), ToTensor, Normalize(0.5, 0.5)), with hpuload's DataLoader beside torch's on
the same ImageFolder; prints the worst PSNR of a sample against torch's loader (levels).

usage: python dcgan_loader.py FOLDER
"""
import math, sys, warnings
import torch
import torchvision.datasets as dset
import torchvision.transforms as transforms
import torch.utils.data
from hpuload.torch import DataLoader as HpuDataLoader, FallbackWarning

dataroot, imageSize, batchSize, workers = sys.argv[1], 64, 64, 2
dataset = dset.ImageFolder(root=dataroot,
                           transform=transforms.Compose([
                               transforms.Resize(imageSize),
                               transforms.CenterCrop(imageSize),
                               transforms.ToTensor(),
                               transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
                           ]))
warnings.simplefilter("error", FallbackWarning)
ours = HpuDataLoader(dataset, batch_size=batchSize, shuffle=False, num_workers=int(workers))
theirs = torch.utils.data.DataLoader(dataset, batch_size=batchSize, shuffle=False, num_workers=int(workers))
worst, n = float("inf"), 0
for (x, y), (rx, ry) in zip(ours, theirs):
    assert x.shape == rx.shape and x.dtype == rx.dtype and torch.equal(y, ry)
    for a, b in zip(x, rx):
        mse = (((a - b) * 0.5 * 255) ** 2).mean().item()
        worst = min(worst, 10 * math.log10(255**2 / max(mse, 1e-12))); n += 1
print(f"{n} samples, {tuple(x.shape[1:])} {x.dtype}, worst PSNR against torch's loader {worst:.1f} dB")
