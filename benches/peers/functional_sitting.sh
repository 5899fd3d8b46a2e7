#!/bin/bash
# A user's Dataset that calls torchvision's functional API itself (functional_dataset.py),
# torch's DataLoader against hpuload's, three alternated rounds (BENCHMARKS.md, session 108).
# PY: the Python whose hpuload is measured (PYTHONPATH is passed on); DATA: a class folder of
# photos; EXTRA: more arguments (`--v2`); KINDS: the patterns (`eval train`; `class`, `flip`,
# `unlabelled`, `views`: session 109; `views` counts each view an image).
PY=${PY:-python}
EXTRA=${EXTRA:-}
DATA=${DATA:-/work/bench/corpus}
cd "$(dirname "$0")"
for round in 1 2 3; do
  for kind in ${KINDS:-eval train}; do
    for workers in 0 2; do
      for loader in torch hpuload; do
        out=$($PY -W ignore functional_dataset.py --loader $loader --data "$DATA" --kind $kind \
          --workers $workers --images ${IMAGES:-1000} $EXTRA 2>/dev/null | tail -1)
        echo "round=$round $out"
      done
    done
  done
done
