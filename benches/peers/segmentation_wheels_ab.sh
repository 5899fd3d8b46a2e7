#!/bin/bash
# Two builds of hpuload against torch's DataLoader on one pattern of segmentation_dataset.py,
# three alternated rounds (BENCHMARKS.md, session 115). PY: the Python; OLD and NEW: the
# PYTHONPATHs of the two wheels (release builds); KIND: the pattern (`unet`); DATA: photos.
PY=${PY:-python}
DATA=${DATA:-/work/bench/corpus}
cd "$(dirname "$0")"
for round in 1 2 3; do
  for workers in 0 2; do
    for which in torch old new; do
      case $which in torch) L=torch; P=$NEW;; old) L=hpuload; P=$OLD;; new) L=hpuload; P=$NEW;; esac
      out=$(PYTHONPATH=$P $PY -W ignore segmentation_dataset.py --loader $L --data "$DATA" --kind ${KIND:-unet} \
        --workers $workers --images ${IMAGES:-500} 2>/dev/null | tail -1)
      echo "round=$round which=$which $out"
    done
  done
done
