#!/usr/bin/env bash
# transformers' run_image_classification.py data path (hf_classification.py), torch's DataLoader
# against hpuload's drop-in, alternating ROUNDS times in one sitting; torch also with glibc's
# malloc thresholds raised as hpuload raises them (MALLOC_MMAP_THRESHOLD_/TRIM_THRESHOLD_), and
# hpuload with the tuning off (HPULOAD_MALLOC_TUNING=0). Batch 64, 2 workers.
#
# usage: benches/peers/hf_classification_sitting.sh SAVE_TO_DISK_DIR [ROUNDS=3]
#   env: PY  a python with torch, torchvision, datasets and hpuload; OUT (hf-classification-runs);
#        ARGS  more arguments for hf_classification.py (e.g. "--split eval --trainer");
#        PLAIN=1  only hpuload and torch as they come (no malloc variants)
set -euo pipefail
data=${1:?usage: hf_classification_sitting.sh SAVE_TO_DISK_DIR [ROUNDS]}
rounds=${2:-3}
py=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-hf-classification-runs}
mkdir -p "$out"
run() { # name loader env...
    local name=$1 loader=$2
    shift 2
    # shellcheck disable=SC2086 # ARGS is a list of arguments
    env "$@" "$py" "$here/hf_classification.py" --loader "$loader" --data "$data" ${ARGS:-} \
        2> "$out/$name-$r.log" | tail -1 > "$out/$name-$r.json"
}
for r in $(seq 1 "$rounds"); do
    run hpuload hpuload
    [ -n "${PLAIN:-}" ] || run hpuload-untuned hpuload HPULOAD_MALLOC_TUNING=0
    run torch torch
    [ -n "${PLAIN:-}" ] || run torch-tuned torch MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=536870912
done
"$py" - "$out" "$rounds" "${PLAIN:-}" <<'PY'
import json, statistics, sys
out, rounds, plain = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = lambda n: [json.load(open(f"{out}/{n}-{r}.json"))["images_per_sec"] for r in range(1, rounds + 1)]
names = ("hpuload", "torch") if plain else ("hpuload", "hpuload-untuned", "torch", "torch-tuned")
v = {}
for n in names:
    xs = runs(n)
    v[n] = statistics.median(xs)
    print(f"{n:16s} {v[n]:7.0f}/s  ({', '.join(f'{x:.0f}' for x in xs)})")
best = max(v["torch"], v.get("torch-tuned", 0))
print(f"hpuload / best torch: {v['hpuload'] / best:.2f}x")
if not plain:
    print(f"untuned hpuload / torch: {v['hpuload-untuned'] / v['torch']:.2f}x")
PY
