#!/bin/bash
# Alternated rounds of the time to the first batch, counted from build() as `hpuload bench
# --json` reports it (time_to_first_batch_sec), against a steady batch (256 / images_per_sec),
# on the corpus and on the built-in set, for each hpuload binary given.
# usage: first_batch_rounds.sh ROUNDS CORPUS HPULOAD_BIN...
# prints: round dataset binary build_to_first [epochs' first batches] steady_batch ratio peak_rss_MiB
set -euo pipefail
rounds=$1 corpus=$2; shift 2
json=$(mktemp)
trap 'rm -f "$json"' EXIT
for r in $(seq 1 "$rounds"); do
  for data in corpus builtin; do
    for bin in "$@"; do
      if [ "$data" = corpus ]; then args=(--data "$corpus"); else args=(); fi
      "$bin" bench "${args[@]}" --backend auto --workers 2 --batch 256 --epochs 2 --dtype bf16 \
        --json "$json" >/dev/null 2>&1
      python3 - "$json" "$r $data $(basename "$bin")" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
steady = 256 / d["images_per_sec"]
first = d["time_to_first_batch_sec"]
print(sys.argv[2], round(first, 3), [round(e["first_batch_sec"], 3) for e in d["per_epoch"]],
      round(steady, 3), round(first / steady, 2), d["peak_rss_bytes"] >> 20)
PY
    done
  done
done
