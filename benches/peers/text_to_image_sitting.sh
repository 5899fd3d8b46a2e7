#!/bin/bash
# The text-to-image loaders, torch's DataLoader against hpuload's, three alternated rounds
# (BENCHMARKS.md, session 101). PY: the Python whose hpuload is measured (PYTHONPATH is
# passed on); DATA: text_to_image.py make's table.
PY=${PY:-python}
DATA=${DATA:-/work/bench/t2i}
cd "$(dirname "$0")"
for round in 1 2 3; do
  for cfg in "sdxl bilinear" "sdxl lanczos" "diffusers lanczos"; do
    set -- $cfg
    for loader in torch hpuload; do
      out=$($PY -W ignore text_to_image.py run --loader $loader --data "$DATA" \
        --recipe $1 --interpolation $2 --resolution 512 --random-flip --workers 2 --batch 16 --epochs 3 2>/dev/null | tail -1)
      echo "round=$round recipe=$1 interp=$2 $out"
    done
  done
done
