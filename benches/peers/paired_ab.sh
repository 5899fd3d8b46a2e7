#!/usr/bin/env bash
# Paired A/B of two builds on a noisy 2-core machine: each round runs BEFORE's and AFTER's
# measurement at the same moment, one pinned to each core (`taskset`), and swaps the cores the
# next round, so both see the same machine (other tenants, clock) and only the builds differ.
# Prints per round before, after and after/before, then the median ratio. Run the same build
# as both to see the method's own noise.
#
#   benches/peers/paired_ab.sh ceiling BEFORE_ENTROPY_CEILING AFTER_ENTROPY_CEILING DATA [ROUNDS=6]
#   benches/peers/paired_ab.sh auto|cpu BEFORE_HPULOAD AFTER_HPULOAD DATA [ROUNDS=6]
#   benches/peers/paired_ab.sh video BEFORE_HPULOAD AFTER_HPULOAD VIDEOS [ROUNDS=6]
#   PY=<peers' venv python> benches/peers/paired_ab.sh kinetics BEFORE_WHEEL AFTER_WHEEL ROOT [ROUNDS=6]
#
# ceiling: `entropy_ceiling DATA resnet50_train 1 2` (one worker, median of two passes);
# auto|cpu: `hpuload bench --backend auto|cpu --workers 2 --batch 256 --epochs 2 --dtype bf16`
# on one core each (the median of the measured epochs); video: the VideoMAE-style loop of
# issue 30's sitting (`hpuload bench --video --pipeline resnet50_train --batch 4
# --frames-per-clip 16 --frame-step 4 --workers 2 --epochs 3 --dtype bf16`, clips/s); kinetics: the video reference on the
# drop-in (`kinetics_loader.py ROOT --loader hpuload --epochs 3`) with each build's wheel folder
# (`pip install --target DIR --no-deps ./python`) first on PYTHONPATH. Logs in $OUT (default
# paired-runs).
set -euo pipefail
mode=${1:?usage: paired_ab.sh ceiling|auto|cpu|video|kinetics BEFORE AFTER DATA [ROUNDS]}
before=${2:?} after=${3:?} data=${4:?} rounds=${5:-6}
out=${OUT:-paired-runs}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
run() { # run CORE BIN LOG
    case $mode in
        ceiling) taskset -c "$1" "$2" "$data" resnet50_train 1 2 > "$3" 2>&1 ;;
        auto|cpu) taskset -c "$1" "$2" bench --data "$data" --backend "$mode" --workers 2 \
            --batch 256 --epochs 2 --dtype bf16 --json "$3.json" > "$3" 2>&1 ;;
        video) taskset -c "$1" "$2" bench --video --data "$data" --pipeline resnet50_train \
            --batch 4 --frames-per-clip 16 --frame-step 4 --workers 2 --epochs 3 --dtype bf16 \
            --json "$3.json" > "$3" 2>&1 ;;
        kinetics) PYTHONPATH="$2" taskset -c "$1" "${PY:?PY names the python of a venv with torch and torchvision}" \
            "$here/kinetics_loader.py" "$data" --loader hpuload --epochs 3 > "$3" 2>&1 ;;
        *) echo "unknown mode $mode" >&2; exit 2 ;;
    esac
}
rate() { # rate LOG
    if [ "$mode" = ceiling ]; then tail -n 1 "$1" | awk '{print $2}'
    elif [ "$mode" = kinetics ]; then awk '/median/ {print $3}' "$1"
    else # clips/s are tens: keep two decimals there; images/s whole
        python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['images_per_sec'], int(sys.argv[2]) or None))" \
            "$1.json" "$([ "$mode" = video ] && echo 2 || echo 0)"; fi
}
ratios=()
for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 1 ]; then cb=0 ca=1; else cb=1 ca=0; fi
    run "$cb" "$before" "$out/before.$r.log" & pb=$!
    run "$ca" "$after" "$out/after.$r.log" & pa=$!
    wait "$pb" "$pa"
    b=$(rate "$out/before.$r.log") a=$(rate "$out/after.$r.log")
    ratio=$(python3 -c "print(round($a / $b, 3))")
    ratios+=("$ratio")
    echo "round $r: before $b, after $a, after/before $ratio"
done
python3 -c "import statistics, sys; print('median after/before:', statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}"
