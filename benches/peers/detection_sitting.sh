#!/usr/bin/env bash
# torchvision's detection reference data pipeline (SSD preset + Resize 300), torch's DataLoader
# against hpuload's drop-in, alternating ROUNDS times in one sitting (detection.py: only the
# import differs), 2 workers, batch 32; then `hpuload bench --coco` with the ssd300_train preset.
#
# usage: benches/peers/detection_sitting.sh IMAGES ANNOTATIONS [ROUNDS=3]
#   env: PY  a python with torch, torchvision, pycocotools and hpuload installed; OUT (detection-runs)
# ANNOTATIONS: e.g. `python benches/peers/coco_make.py IMAGES coco.json --boxes 6`.
set -euo pipefail
images=${1:?usage: detection_sitting.sh IMAGES ANNOTATIONS [ROUNDS]}
annotations=${2:?usage: detection_sitting.sh IMAGES ANNOTATIONS [ROUNDS]}
rounds=${3:-3}
py=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-detection-runs}
mkdir -p "$out"
(cd "$root" && cargo build --release --quiet)
bin="$root/target/release/hpuload"
for r in $(seq 1 "$rounds"); do
    for loader in hpuload torch; do
        "$py" "$here/detection.py" --loader "$loader" --data "$images" --annotations "$annotations" \
            2> "$out/ssd-$loader-$r.log" | tail -1 > "$out/ssd-$loader-$r.json"
    done
    "$bin" bench --coco "$annotations" --data "$images" --drop-empty --pipeline ssd300_train \
        --workers 2 --batch 32 --epochs 3 --json "$out/bench-ssd300-$r.json" > "$out/bench-ssd300-$r.log" 2>&1
done
"$py" - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def med(name, key="images_per_sec"):
    return statistics.median(json.load(open(f"{out}/{name}-{r}.json"))[key] for r in range(1, rounds + 1))
h, t = med("ssd-hpuload"), med("ssd-torch")
hb, tb = med("ssd-hpuload", "boxes_per_sec"), med("ssd-torch", "boxes_per_sec")
print(f"detection reference (SSD preset + Resize 300): hpuload {h:.0f} images/s ({hb:.0f} boxes/s), "
      f"torch {t:.0f} images/s ({tb:.0f} boxes/s), ratio {h / t:.2f}x")
b, bb = med("bench-ssd300"), med("bench-ssd300", "boxes_per_sec")
print(f"hpuload bench --pipeline ssd300_train: {b:.0f} images/s, {bb:.0f} boxes/s")
PY
