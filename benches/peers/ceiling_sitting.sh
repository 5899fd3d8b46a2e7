#!/usr/bin/env bash
# Issue 32's sitting, alternated rounds on one machine: the entropy-decoding ceiling of the
# ResNet-50 train pipeline, the media engine's whole decode of the same samples without the
# loader (`entropy_ceiling ... engine`), `hpuload bench` on the engine path and on the CPU path (bf16), and
# torch's DataLoader and DALI's CPU ROI pipeline (`rrc_fused`) on the same pipeline. Prints each
# round's images/s, then the medians, hpuload's ratios to each peer and the engine path's
# fraction of the ceiling (and the engine's decode alone as one), and the engine path's first
# batch against a steady one.
#
#   TORCH_PY=<venv python with torch, torchvision> DALI_PY=<venv python with DALI> \
#   benches/peers/ceiling_sitting.sh DATA [ROUNDS=5]
#
# Uses target/release/hpuload and target/release/examples/entropy_ceiling (`cargo build
# --release --bin hpuload --example entropy_ceiling`). Logs in $OUT (default ceiling-runs).
set -uo pipefail
data=${1:?usage: ceiling_sitting.sh DATA [ROUNDS]}
rounds=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-ceiling-runs}
mkdir -p "$out"
peer() { # loader python log
    "$2" "$here/peer_bench.py" --loader "$1" --data "$data" --pipeline train --workers 2 \
        --batch 256 --epochs 3 2> "$3.err" | tail -n 1 > "$3"
}
for r in $(seq "$rounds"); do
    "$root/target/release/examples/entropy_ceiling" "$data" resnet50_train 2 1 > "$out/ceiling.$r" 2>&1
    "$root/target/release/examples/entropy_ceiling" "$data" resnet50_train 2 1 engine > "$out/engine.$r" 2>&1
    for backend in auto cpu; do
        "$root/target/release/hpuload" bench --data "$data" --backend "$backend" --workers 2 \
            --batch 256 --epochs 3 --dtype bf16 --json "$out/$backend.$r.json" > "$out/$backend.$r" 2>&1
    done
    peer torch "${TORCH_PY:?TORCH_PY names a python with torch}" "$out/torch.$r"
    peer dali "${DALI_PY:?DALI_PY names a python with DALI}" "$out/dali.$r"
    echo "round $r done"
done
python3 - "$out" "$rounds" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def rate(kind, r):
    path = f"{out}/{kind}.{r}"
    if kind in ("ceiling", "engine"):
        return float(open(path).read().split()[-2])
    return json.load(open(path + ".json" if kind in ("auto", "cpu") else path))["images_per_sec"]
rows = {k: [rate(k, r) for r in range(1, rounds + 1)] for k in ("ceiling", "engine", "auto", "cpu", "torch", "dali")}
med = {k: statistics.median(v) for k, v in rows.items()}
for k, v in rows.items():
    print(f"{k:8} {' '.join(f'{x:7.0f}' for x in v)}   median {med[k]:.0f}")
for path in ("auto", "cpu"):
    print(f"{path}: {med[path] / med['torch']:.2f}x torch, {med[path] / med['dali']:.2f}x DALI")
fractions = [a / c for a, c in zip(rows["auto"], rows["ceiling"])]
print(f"engine path / ceiling: {med['auto'] / med['ceiling']:.2f} (per round {' '.join(f'{f:.2f}' for f in fractions)})")
alone = [e / c for e, c in zip(rows["engine"], rows["ceiling"])]
print(f"the engine's decode alone / ceiling: {med['engine'] / med['ceiling']:.2f} (per round {' '.join(f'{f:.2f}' for f in alone)})")
first = [json.load(open(f"{out}/auto.{r}.json")) for r in range(1, rounds + 1)]
ttfb = statistics.median(j["time_to_first_batch_sec"] for j in first)
steady = 256 / med["auto"]
print(f"engine first batch {ttfb:.3f} s against a steady batch of {steady:.3f} s: {ttfb / steady:.2f}x")
EOF
