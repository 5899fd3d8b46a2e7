#!/usr/bin/env bash
# Runs `hpuload bench` and the peer loaders on one folder, alternating, ROUNDS times, and prints
# one table of median images/s and hpuload's ratio to each. See README.md in this folder.
#
# usage: benches/peers/compare.sh DATA_DIR [ROUNDS=3]
#   env: TORCH_PY, DALI_PY, FFCV_PY  python interpreters with each peer installed (a peer
#        whose variable is unset, or whose run fails, is left out of the table)
#        PIPELINES (default "train eval"), WORKERS (2), BATCH (256), EPOCHS (3),
#        HPULOAD_BACKENDS (default "auto cpu"), OUT (default peer-runs)
set -u
data=${1:?usage: compare.sh DATA_DIR [ROUNDS]}
rounds=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin="$root/target/release/hpuload"
workers=${WORKERS:-2}; batch=${BATCH:-256}; epochs=${EPOCHS:-3}
out=${OUT:-peer-runs}
mkdir -p "$out"
(cd "$root" && cargo build --release --quiet) || exit 1

run_hpuload() { # pipeline backend round
  "$bin" bench --data "$data" --pipeline "resnet50_$1" --backend "$2" --workers "$workers" \
    --batch "$batch" --epochs "$epochs" --json "$out/hpuload_$2-$1-$3.json" \
    > "$out/hpuload_$2-$1-$3.log" 2>&1
}
run_peer() { # loader python pipeline round
  [ -n "$2" ] || return 0
  "$2" "$here/peer_bench.py" --loader "$1" --data "$data" --pipeline "$3" \
    --workers "$workers" --batch "$batch" --epochs "$epochs" \
    2> "$out/$1-$3-$4.log" | tail -1 > "$out/$1-$3-$4.json"
}

for round in $(seq 1 "$rounds"); do
  for p in ${PIPELINES:-train eval}; do
    for b in ${HPULOAD_BACKENDS:-auto cpu}; do run_hpuload "$p" "$b" "$round"; done
    run_peer torch "${TORCH_PY:-}" "$p" "$round"
    run_peer dali "${DALI_PY:-}" "$p" "$round"
    run_peer ffcv "${FFCV_PY:-}" "$p" "$round"
  done
done

python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
runs = {}
for path in glob.glob(os.path.join(out, "*.json")):
    name = os.path.basename(path)[:-5].rsplit("-", 1)[0]  # e.g. hpuload_auto-train, dali-eval
    try:
        rate = json.load(open(path))["images_per_sec"]
    except (ValueError, KeyError, OSError):
        continue
    runs.setdefault(name, []).append(rate)
for pipeline in ("train", "eval"):
    rows = {k[: -len(pipeline) - 1]: statistics.median(v)
            for k, v in runs.items() if k.endswith("-" + pipeline)}
    if not rows:
        continue
    ours = {k: v for k, v in rows.items() if k.startswith("hpuload")}
    print(f"\n{pipeline}: median images/s ({len(next(iter(runs.values())))} rounds)")
    print(f"  {'loader':<16}{'images/s':>10}" + "".join(f"{k + ' is':>20}" for k in ours))
    for k, v in sorted(rows.items(), key=lambda kv: -kv[1]):
        print(f"  {k:<16}{v:>10.0f}" + "".join(f"{o / v:>19.2f}x" for o in ours.values()))
PY
