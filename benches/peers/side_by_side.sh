#!/usr/bin/env bash
# Side-by-side comparison with PyTorch's DataLoader, alternating runs in one sitting.
# usage: benches/peers/side_by_side.sh CORPUS_DIR TORCH_VENV [ROUNDS=3]
#   CORPUS_DIR: e.g. built by ../shared/corpus/build.sh CORPUS_DIR 5000 1
#   TORCH_VENV: python3 -m venv v && v/bin/pip install torch torchvision pillow
# Writes one log per run into ./peer-runs/ and prints the medians.
set -u
corpus=${1:?corpus dir}; venv=${2:?venv with torch+torchvision}; rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
bin="$here/../../target/release/hpuload"
torch_script=${TORCH_SCRIPT:-$here/../../../shared/peers/torch_loader.py}
out=peer-runs; mkdir -p $out
for round in $(seq 1 "$rounds"); do
  "$bin" bench --data "$corpus" --workers 2 --batch 256 --epochs 5 > $out/hpuload_train_$round.txt 2>&1
  "$venv/bin/python" "$torch_script" --root "$corpus" --variant v1 --workers 2 --epochs 3 > $out/torch_v1_$round.txt 2>&1
  "$bin" bench --data "$corpus" --workers 2 --batch 256 --epochs 3 --read-mode mmap > $out/hpuload_mmap_$round.txt 2>&1
  "$bin" bench --data "$corpus" --workers 2 --batch 256 --epochs 3 --pipeline resnet50_eval > $out/hpuload_eval_$round.txt 2>&1
  "$venv/bin/python" "$torch_script" --root "$corpus" --variant eval --workers 2 --epochs 3 > $out/torch_eval_$round.txt 2>&1
done
grep -H "median" $out/hpuload_*.txt
grep -H summary $out/torch_*.txt
