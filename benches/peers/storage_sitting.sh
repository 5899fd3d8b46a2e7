#!/usr/bin/env bash
# One sitting for the object-storage issue: the same corpus as an image folder, as local shards
# and as shards on a loopback S3 server (moto in server mode on 127.0.0.1), `hpuload bench`
# alternated ROUNDS times (ResNet-50 train pipeline, batch 256, 2 workers, 1 warm-up + 3
# measured epochs). Each S3 round starts with an empty shard cache, so its warm-up epoch is the
# cold one (ranged GETs while shards download) and its measured epochs read what it cached.
#
# usage: benches/peers/storage_sitting.sh FOLDER SHARD_PATTERN [ROUNDS=3]
#   e.g. storage_sitting.sh /work/bench/corpus '/work/bench/shards64/shard-{000000..000005}.tar'
#   env: PY  a python with moto[server] and boto3 (python/requirements-test.txt)
#        OUT (default storage-runs)
set -euo pipefail
folder=${1:?usage: storage_sitting.sh FOLDER SHARD_PATTERN [ROUNDS]}
pattern=${2:?usage: storage_sitting.sh FOLDER SHARD_PATTERN [ROUNDS]}
rounds=${3:-3}
py=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-storage-runs}
mkdir -p "$out"
(cd "$root" && cargo build --release --quiet)
bin="$root/target/release/hpuload"

port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
export AWS_ENDPOINT_URL=http://127.0.0.1:$port
"$py" -m moto.server -H 127.0.0.1 -p "$port" > "$out/moto.log" 2>&1 &
moto=$!
trap 'kill $moto 2>/dev/null; wait $moto 2>/dev/null || true; rm -rf "$out/cache"' EXIT
shard_dir=$(dirname "$pattern")
"$py" - "$shard_dir" <<'PY'
import glob, os, sys, time, urllib.request
import boto3
endpoint = os.environ["AWS_ENDPOINT_URL"]
for _ in range(300):
    try:
        urllib.request.urlopen(endpoint, timeout=1)
        break
    except OSError:
        time.sleep(0.1)
s3 = boto3.client("s3", endpoint_url=endpoint)
s3.create_bucket(Bucket="bench")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*"))):
    s3.upload_file(f, "bench", "shards/" + os.path.basename(f))
PY
remote="s3://bench/shards/$(basename "$pattern")"
common=(--pipeline resnet50_train --workers 2 --batch 256 --epochs 3)
for r in $(seq 1 "$rounds"); do
    "$bin" bench --data "$folder" "${common[@]}" --json "$out/folder-$r.json" > "$out/folder-$r.log" 2>&1
    "$bin" bench --data "$pattern" "${common[@]}" --json "$out/local-$r.json" > "$out/local-$r.log" 2>&1
    rm -rf "$out/cache"
    "$bin" bench --data "$remote" --shard-cache "$out/cache" "${common[@]}" \
        --json "$out/s3-$r.json" > "$out/s3-$r.log" 2>&1
done
"$py" - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def runs(name):
    return [json.load(open(f"{out}/{name}-{r}.json")) for r in range(1, rounds + 1)]
med = lambda xs: statistics.median(xs)
folder, local, s3 = (med([j["images_per_sec"] for j in runs(n)]) for n in ("folder", "local", "s3"))
cold = med([j["per_epoch"][0]["images_per_sec"] for j in runs("s3")])
ttfb = med([j["time_to_first_batch_sec"] for j in runs("s3")])
rss = [(j["per_epoch"][0]["rss_bytes"] >> 20, j["peak_rss_bytes"] >> 20) for j in runs("s3")]
for name, v in (("image folder", folder), ("local shards", local), ("S3 (measured epochs)", s3),
                ("S3 cold warm-up epoch", cold)):
    print(f"{name:24s} {v:8.0f} images/s")
print(f"local shards / folder: {local / folder:.3f}")
print(f"S3 / local shards: {s3 / local:.3f} (cold first epoch: {cold / local:.3f})")
print(f"S3 time to first batch (cold): {ttfb:.2f}s; RSS after warm-up / peak MiB: {rss}")
PY
