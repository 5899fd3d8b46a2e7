#!/bin/bash
# diffusers' textual inversion loader, torch's DataLoader against hpuload's, three alternated
# rounds (BENCHMARKS.md, session 103). PY: the Python whose hpuload is measured (PYTHONPATH is
# passed on); DATA: textual_inversion_loader.py make's folder; EXTRA: more arguments for `run`
# (`--center_crop`, session 104; `--sdxl`, session 107); RES: the resolution (512).
PY=${PY:-python}
EXTRA=${EXTRA:-}
DATA=${DATA:-/work/bench/ti}
cd "$(dirname "$0")"
for round in 1 2 3; do
  for workers in 0 2; do
    for loader in torch hpuload; do
      out=$($PY -W ignore textual_inversion_loader.py run --loader $loader --data "$DATA" \
        --resolution ${RES:-512} --workers $workers --batch 16 --epochs 2 --repeats 40 $EXTRA 2>/dev/null | tail -1)
      echo "round=$round workers=$workers $out"
    done
  done
done
