#!/usr/bin/env bash
# Issue 30's video sitting, alternated rounds on one machine: torchvision's video reference
# (Kinetics, VideoClips, RandomClipSampler) on torch's DataLoader and on hpuload's drop-in; a
# VideoMAE-style loader (16 frames 4 apart, one random clip per video, RandomResizedCrop 224)
# as `hpuload bench --video`, as the same loop on PyAV and on decord; and every frame decoded
# on one thread by hpuload's decoder (FFmpeg's libavcodec where one is found, and the built-in
# OpenH264 with HPULOAD_LIBAVCODEC=off) and by FFmpeg through PyAV. With DALI_PY (a venv with
# a DALI whose CPU video reader takes H.264: 2.0.0, not 2.2 or later), the VideoMAE-style loop
# on DALI's CPU reader too (`dali_video.py`).
#
#   PY=<venv with torch, torchvision, torchcodec, av, decord, hpuload> \
#   HPULOAD=target/release/hpuload DECODE=target/release/examples/decode_video \
#   benches/peers/video_sitting.sh VIDEOS ROOT FEW [ROUNDS]
#
# VIDEOS: class folders of MP4s (`video_make.py --seconds 10 --gop 2`); ROOT: a folder whose
# `train` is VIDEOS (Kinetics' layout); FEW: class folders of some of them, for the decoders
# alone. Logs to $OUT (default /tmp/video_sitting).
set -uo pipefail
VIDEOS=$1 ROOT=$2 FEW=$3 ROUNDS=${4:-3}
OUT=${OUT:-/tmp/video_sitting}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
for r in $(seq "$ROUNDS"); do
    for step in kin_torch kin_hpuload mae_hpuload mae_av mae_decord mae_dali dec_hpuload dec_openh264 dec_ffmpeg; do
        [ "$step" = mae_dali ] && [ -z "${DALI_PY:-}" ] && continue
        log="$OUT/$step.$r.log"
        case $step in
            kin_torch) "$PY" "$HERE/kinetics_loader.py" "$ROOT" --loader torch --epochs 2 ;;
            kin_hpuload) "$PY" "$HERE/kinetics_loader.py" "$ROOT" --loader hpuload --epochs 2 ;;
            mae_hpuload) "$HPULOAD" bench --video --data "$VIDEOS" --pipeline resnet50_train \
                --batch 4 --frames-per-clip 16 --frame-step 4 --workers 2 --epochs 3 \
                --dtype bf16 --seed "$r" ;;
            mae_av) "$PY" "$HERE/video_loader.py" "$VIDEOS" --reader av --epochs 3 ;;
            mae_decord) "$PY" "$HERE/video_loader.py" "$VIDEOS" --reader decord --epochs 3 ;;
            mae_dali) "$DALI_PY" "$HERE/dali_video.py" "$VIDEOS" --epochs 3 ;;
            dec_hpuload) "$DECODE" "$FEW" 2 ;;
            dec_openh264) HPULOAD_LIBAVCODEC=off "$DECODE" "$FEW" 2 ;;
            dec_ffmpeg) "$PY" "$HERE/video_decode.py" "$FEW" 2 ;;
        esac > "$log" 2>&1
        echo "round $r $step: $(grep -E 'median|^images/s|clips/s:|decoder' "$log" | tr '\n' ' ')"
    done
done
