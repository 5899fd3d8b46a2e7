#!/usr/bin/env bash
# Modern recipes, torch's DataLoader against hpuload's drop-in, alternating ROUNDS times in one
# sitting (recipes.py: only the import differs), and `hpuload bench` with and without
# ColorJitter(0.4, 0.4, 0.4, 0.1) on the engine path. 2 workers, batch 256.
#
# usage: benches/peers/recipes_sitting.sh DATA_DIR [ROUNDS=3]
#   env: PY  a python with torch, torchvision, timm and hpuload installed; OUT (recipe-runs)
set -euo pipefail
data=${1:?usage: recipes_sitting.sh DATA_DIR [ROUNDS]}
rounds=${2:-3}
py=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-recipe-runs}
mkdir -p "$out"
(cd "$root" && cargo build --release --quiet)
bin="$root/target/release/hpuload"
for r in $(seq 1 "$rounds"); do
    for recipe in resnet50_v2 timm timm_ra; do
        for loader in hpuload torch; do
            "$py" "$here/recipes.py" --loader "$loader" --recipe "$recipe" --data "$data" \
                2> "$out/$recipe-$loader-$r.log" | tail -1 > "$out/$recipe-$loader-$r.json"
        done
    done
    for pipeline in resnet50_train resnet50_train_jitter; do
        "$bin" bench --data "$data" --pipeline "$pipeline" --backend auto --workers 2 --batch 256 \
            --epochs 3 --json "$out/bench-$pipeline-$r.json" > "$out/bench-$pipeline-$r.log" 2>&1
    done
done
"$py" - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def med(name):
    return statistics.median(json.load(open(f"{out}/{name}-{r}.json"))["images_per_sec"] for r in range(1, rounds + 1))
for recipe in ("resnet50_v2", "timm", "timm_ra"):
    h, t = med(f"{recipe}-hpuload"), med(f"{recipe}-torch")
    print(f"{recipe:12s} hpuload {h:7.0f}/s  torch {t:7.0f}/s  ratio {h / t:.2f}x")
plain, jitter = med("bench-resnet50_train"), med("bench-resnet50_train_jitter")
print(f"bench engine: resnet50_train {plain:.0f}/s, + ColorJitter {jitter:.0f}/s, cost {1 - jitter / plain:.1%}")
PY
