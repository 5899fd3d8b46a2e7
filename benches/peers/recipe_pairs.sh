#!/usr/bin/env bash
# Recipes of recipes.py, torch's DataLoader against hpuload's drop-in, alternated ROUNDS times
# in one sitting (only the import differs), 2 workers, batch 256 (64 for multi-crop).
#
# usage: benches/peers/recipe_pairs.sh DATA_DIR ROUNDS LIMIT RECIPE...
#   LIMIT: the first N images of DATA_DIR only (0: all), for recipes torch runs slowly
#   env: PY  a python with torch, torchvision, timm and hpuload installed; OUT (pair-runs)
# Prints each recipe's per-round images/s, the medians and the ratio.
set -euo pipefail
data=${1:?usage: recipe_pairs.sh DATA_DIR ROUNDS LIMIT RECIPE...}
rounds=${2:?}
limit=${3:?}
shift 3
py=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-pair-runs}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
    for recipe in "$@"; do
        batch=256
        [ "$recipe" = dino ] && batch=64
        for loader in hpuload torch; do
            "$py" "$here/recipes.py" --loader "$loader" --recipe "$recipe" --data "$data" \
                --limit "$limit" --batch "$batch" \
                2> "$out/$recipe-$loader-$r.log" | tail -1 > "$out/$recipe-$loader-$r.json"
        done
    done
done
"$py" - "$out" "$rounds" "$@" <<'PY'
import json, statistics, sys
out, rounds, recipes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
for recipe in recipes:
    med = {}
    for loader in ("hpuload", "torch"):
        runs = [json.load(open(f"{out}/{recipe}-{loader}-{r}.json"))["images_per_sec"] for r in range(1, rounds + 1)]
        med[loader] = statistics.median(runs)
        print(f"{recipe:14s} {loader:8s} " + " ".join(f"{v:7.1f}" for v in runs) + f"  median {med[loader]:7.1f}")
    print(f"{recipe:14s} ratio {med['hpuload'] / med['torch']:.2f}x")
PY
