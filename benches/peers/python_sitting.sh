#!/usr/bin/env bash
# The Python drop-in's throughput next to `hpuload bench` and torch's DataLoader, alternating,
# ROUNDS times, on one ImageFolder (ResNet-50 train pipeline, float32 NCHW, batch 256, 2 workers).
#
# usage: benches/peers/python_sitting.sh DATA_DIR [ROUNDS=3]
#   env: PY  a python with torch, torchvision and hpuload installed (pip install ./python)
#        OUT (default py-runs)
# Prints median images/s of each and the ratios the Python issue asks for.
set -euo pipefail
data=${1:?usage: python_sitting.sh DATA_DIR [ROUNDS]}
rounds=${2:-3}
py=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-py-runs}
mkdir -p "$out"
(cd "$root" && cargo build --release --quiet)
bin="$root/target/release/hpuload"
common=(--workers 2 --batch 256 --epochs 3)
for r in $(seq 1 "$rounds"); do
    "$bin" bench --data "$data" --pipeline resnet50_train --backend auto --dtype f32 "${common[@]}" \
        --json "$out/bench-$r.json" > "$out/bench-$r.log" 2>&1
    "$py" "$here/peer_bench.py" --loader hpuload --data "$data" --pipeline train --pass-only "${common[@]}" \
        2> "$out/python-$r.log" | tail -1 > "$out/python-$r.json"
    "$py" "$here/peer_bench.py" --loader torch --data "$data" --pipeline train --pass-only "${common[@]}" \
        2> "$out/torch-$r.log" | tail -1 > "$out/torch-$r.json"
done
"$py" - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def med(name, key):
    return statistics.median(json.load(open(f"{out}/{name}-{r}.json"))[key] for r in range(1, rounds + 1))
bench, python, torch = med("bench", "images_per_sec"), med("python", "images_per_sec"), med("torch", "images_per_sec")
for name, v in (("hpuload bench (Rust)", bench), ("hpuload.torch.DataLoader", python), ("torch DataLoader", torch)):
    print(f"{name:28s} {v:8.0f} images/s")
print(f"Python loop / hpuload bench: {python / bench:.3f}")
print(f"Python loop / torch DataLoader: {python / torch:.2f}x")
PY
