#!/usr/bin/env bash
# Hugging Face tables against the image folder they were made from, `hpuload bench` on each,
# alternating ROUNDS times in one sitting: the folder, its `save_to_disk` Arrow copy, its
# Parquet copy (8 files), the Parquet copy in 300 files. 2 workers, batch 256, engine path.
#
# usage: benches/peers/hf_sitting.sh FOLDER HF_ROOT [ROUNDS=3]
#   HF_ROOT holds saved/ (save_to_disk), pq8/ and pq300/ (to_parquet of load_from_disk(saved)),
#   as benches/peers/hf_convert.py writes them. env: PY (for the summary), OUT (hf-runs)
set -euo pipefail
folder=${1:?usage: hf_sitting.sh FOLDER HF_ROOT [ROUNDS]}
hf=${2:?usage: hf_sitting.sh FOLDER HF_ROOT [ROUNDS]}
rounds=${3:-3}
py=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-hf-runs}
mkdir -p "$out"
(cd "$root" && cargo build --release --quiet)
bin="$root/target/release/hpuload"
for r in $(seq 1 "$rounds"); do
    for kind in folder arrow parquet parquet300; do
        case $kind in
            folder) data=$folder ;;
            arrow) data=$hf/saved ;;
            parquet) data=$hf/pq8 ;;
            parquet300) data=$hf/pq300 ;;
        esac
        "$bin" bench --data "$data" --pipeline resnet50_train --backend auto --workers 2 \
            --batch 256 --epochs 3 --json "$out/$kind-$r.json" > "$out/$kind-$r.log" 2>&1
    done
done
"$py" - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def med(kind, key="images_per_sec"):
    return statistics.median(json.load(open(f"{out}/{kind}-{r}.json"))[key] for r in range(1, rounds + 1))
base = med("folder")
for kind in ("folder", "arrow", "parquet", "parquet300"):
    v = med(kind)
    print(f"{kind:10s} {v:7.0f}/s  {v / base:.3f}x the folder  first batch {med(kind, 'time_to_first_batch_sec'):.3f}s")
PY
