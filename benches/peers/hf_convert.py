import sys, os, time, datasets
root = "/work/bench/hf"
t = time.time()
ds = datasets.load_dataset("imagefolder", data_dir="/work/bench/corpus", split="train", cache_dir=f"{root}/cache")
print("loaded", len(ds), time.time() - t, ds.cache_files)
ds.save_to_disk(f"{root}/saved", max_shard_size="500MB")
os.makedirs(f"{root}/pq8", exist_ok=True)
n = 8
for i in range(n):
    ds.shard(n, i, contiguous=True).to_parquet(f"{root}/pq8/train-{i:05}-of-{n:05}.parquet")
os.makedirs(f"{root}/pq300", exist_ok=True)
n = 300
for i in range(n):
    ds.shard(n, i, contiguous=True).to_parquet(f"{root}/pq300/train-{i:05}-of-{n:05}.parquet")
print("done", time.time() - t)
