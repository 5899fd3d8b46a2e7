#!/bin/bash
# InstructPix2Pix's loader, torch's DataLoader against hpuload's, three alternated rounds
# (BENCHMARKS.md, session 102). PY: the Python whose hpuload is measured (PYTHONPATH is
# passed on); DATA: instruct_pix2pix_loader.py make's table.
PY=${PY:-python}
DATA=${DATA:-/work/bench/ip2p}
cd "$(dirname "$0")"
for round in 1 2 3; do
  for workers in 0 2; do
    for loader in torch hpuload; do
      out=$($PY -W ignore instruct_pix2pix_loader.py run --loader $loader --data "$DATA" \
        --resolution 256 --workers $workers --batch 4 --epochs 2 2>/dev/null | tail -1)
      echo "round=$round workers=$workers $out"
    done
  done
done
