"""Converts the reference corpus (an image folder) the ways Hugging Face users hold it:
load_dataset("imagefolder") (paths only, in the datasets cache), save_to_disk (embedded bytes,
Arrow), and Parquet with embedded bytes as the hub has it (to_parquet of the save_to_disk copy)
in 8 and in 300 files.

usage: python hf_convert.py [CORPUS=/work/bench/corpus] [OUT=/work/bench/hf]"""

import os
import sys
import time

import datasets

corpus = sys.argv[1] if len(sys.argv) > 1 else "/work/bench/corpus"
root = sys.argv[2] if len(sys.argv) > 2 else "/work/bench/hf"
t = time.time()
ds = datasets.load_dataset("imagefolder", data_dir=corpus, split="train", cache_dir=f"{root}/cache")
ds.save_to_disk(f"{root}/saved", max_shard_size="500MB")
embedded = datasets.load_from_disk(f"{root}/saved")
for n in (8, 300):
    os.makedirs(f"{root}/pq{n}", exist_ok=True)
    for i in range(n):
        embedded.shard(n, i, contiguous=True).to_parquet(f"{root}/pq{n}/train-{i:05}-of-{n:05}.parquet")
print("done in", round(time.time() - t, 1), "s")
