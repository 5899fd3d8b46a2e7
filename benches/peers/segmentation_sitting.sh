#!/bin/bash
# A user's Dataset of images and their segmentation masks (segmentation_dataset.py, the U-Net
# tutorial's class), torch's DataLoader against hpuload's, three alternated rounds
# (BENCHMARKS.md, session 110). PY: the Python whose hpuload is measured (PYTHONPATH is passed
# on); DATA: a folder of photos; KINDS: the patterns (`eval train opencv`; `gif`; `v2`).
PY=${PY:-python}
DATA=${DATA:-/work/bench/corpus}
cd "$(dirname "$0")"
for round in 1 2 3; do
  for kind in ${KINDS:-eval train opencv}; do
    for workers in 0 2; do
      for loader in torch hpuload; do
        out=$($PY -W ignore segmentation_dataset.py --loader $loader --data "$DATA" --kind $kind \
          --workers $workers --images ${IMAGES:-1000} 2>/dev/null | tail -1)
        echo "round=$round $out"
      done
    done
  done
done
