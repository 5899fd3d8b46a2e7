#!/usr/bin/env bash
# Before/after A/B of two `hpuload` binaries in one sitting, alternated, ROUNDS rounds: train
# and eval pipelines on both backends (auto: the media engine; cpu), batch 256, 2 workers,
# 1 warm-up + 3 measured epochs. Prints median images/s, CPU ms per image (process CPU time
# over the measured epochs / images, the emulated media engine's threads included) and host
# pipeline CPU ms per image (the bench's host stages: read, route, CPU decode, augment, collate)
# per configuration, and the after/before ratios.
#
# usage: benches/peers/ab.sh BEFORE_BIN AFTER_BIN DATA_DIR [ROUNDS=3]   (env OUT, default ab-runs)
set -euo pipefail
before=${1:?usage: ab.sh BEFORE_BIN AFTER_BIN DATA_DIR [ROUNDS]}
after=${2:?}
data=${3:?}
rounds=${4:-3}
out=${OUT:-ab-runs}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
    for pipeline in resnet50_train resnet50_eval; do
        for backend in auto cpu; do
            for side in before after; do
                bin=$before; [ "$side" = after ] && bin=$after
                "$bin" bench --data "$data" --pipeline "$pipeline" --backend "$backend" --workers 2 \
                    --batch 256 --epochs 3 --json "$out/$side-$pipeline-$backend-$r.json" \
                    > "$out/$side-$pipeline-$backend-$r.log" 2>&1
            done
        done
    done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def med(side, p, b, f):
    return statistics.median(f(json.load(open(f"{out}/{side}-{p}-{b}-{r}.json"))) for r in range(1, rounds + 1))
ips = lambda j: j["images_per_sec"]
cpu = lambda j: 1e3 * j["process_cpu_sec"] / j["images"]
host = lambda j: 1e3 * j["host_cpu_sec"] / j["images"]
print(f"{'configuration':28s} {'before':>8s} {'after':>8s} {'ratio':>6s}   CPU ms/image before/after"
      "   host CPU ms/image before/after")
for p in ("resnet50_train", "resnet50_eval"):
    for b in ("auto", "cpu"):
        x, y = med("before", p, b, ips), med("after", p, b, ips)
        cx, cy = med("before", p, b, cpu), med("after", p, b, cpu)
        hx, hy = med("before", p, b, host), med("after", p, b, host)
        print(f"{p + ' ' + b:28s} {x:8.0f} {y:8.0f} {y / x:6.3f}   {cx:.3f} / {cy:.3f}"
              f"   {hx:.4f} / {hy:.4f} ({hy / hx:.2f})")
PY
