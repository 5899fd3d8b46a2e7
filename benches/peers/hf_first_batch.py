"""Time from nothing to the first batch (open the files, build the loader, decode one batch of
256) for Parquet and Arrow copies of the corpus, three times each (the first may be cold).

usage: python hf_first_batch.py HF_ROOT   (HF_ROOT holds pq300/, pq8/ and saved/, as
       hf_convert.py writes them; drop the page cache first for a cold first run)"""

import sys
import time

import hpuload
from hpuload.torch import DataLoader

root = sys.argv[1]
for name, src in [
    ("pq300", hpuload.Parquet(f"{root}/pq300", pipeline="resnet50_train")),
    ("pq8", hpuload.Parquet(f"{root}/pq8", pipeline="resnet50_train")),
    ("arrow", hpuload.HFDataset(f"{root}/saved", pipeline="resnet50_train")),
]:
    times = []
    for _ in range(3):
        t = time.perf_counter()
        loader = DataLoader(src, batch_size=256, shuffle=True, num_workers=2)
        it = iter(loader)
        next(it)
        times.append(time.perf_counter() - t)
        del it, loader
    print(name, " ".join(f"{x:.3f}s" for x in times))
