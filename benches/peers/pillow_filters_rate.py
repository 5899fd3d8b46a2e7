"""Images/s of an ImageFolder with Pillow's box or Hamming resize: torch's DataLoader against
hpuload's drop-in (2 workers, batch 64), over `n` corpus photos."""
import sys, time, warnings, torch
from torchvision import datasets, transforms as T
import torch.utils.data as tud

root, loader, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
interp = {"box": T.InterpolationMode.BOX, "hamming": T.InterpolationMode.HAMMING}[mode]
tf = T.Compose([T.Resize(256, interpolation=interp), T.CenterCrop(224), T.ToTensor(), T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
ds = tud.Subset(datasets.ImageFolder(root, tf), range(n))
if loader == "torch":
    dl = tud.DataLoader(ds, batch_size=64, num_workers=2)
else:
    from hpuload.torch import DataLoader
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dl = DataLoader(ds, batch_size=64, num_workers=2, backend="cpu")
rates = []
for epoch in range(3):
    t = time.perf_counter(); k = 0
    for x, y in dl:
        k += x.shape[0]
    rates.append(k / (time.perf_counter() - t))
print(loader, mode, "epochs", [round(r, 1) for r in rates], "best-of-last-two", round(max(rates[1:]), 1))
