#!/usr/bin/env bash
# Instructions, not seconds: the engine's decode of the ResNet-50 train crops counted by
# valgrind's cachegrind for two builds of `decode_speed` (single-threaded, the same seeded
# RandomResizedCrop windows, so the count is the same every run). On a machine whose paired
# timings spread by a factor of two, this is the measurement that still separates a change of
# a few percent. It is not time: the CPU overlaps instructions (a change that removes some
# from under the Huffman decoder's dependency chain may gain nothing), and valgrind hides
# AVX-512, so the AVX2 builds are what is counted. Confirm a gain with `paired_ab.sh`.
#
#   benches/peers/instructions.sh BEFORE_DECODE_SPEED AFTER_DECODE_SPEED DATA [IMAGES=150] [MODE=rrc]
#
# Build each side with `cargo build --release -p hpuload-decoders --example decode_speed` and
# copy `target/release/examples/decode_speed` aside. MODE is `decode_speed`'s DECODE_ONLY
# (rrc: decode and resize to 224x224; roi: the region decode; full: whole images). Both run
# at once, one per core. Prints each total, the ratio after/before, and the functions whose
# counts moved most. Outputs in $OUT (default instruction-counts).
set -euo pipefail
before=${1:?usage: instructions.sh BEFORE AFTER DATA [IMAGES] [MODE]}
after=${2:?} data=${3:?} images=${4:-150} mode=${5:-rrc}
out=${OUT:-instruction-counts}
command -v valgrind > /dev/null || { echo "needs valgrind (apt install valgrind)" >&2; exit 2; }
mkdir -p "$out"
count() { # count NAME BIN
    DECODE_ONLY=$mode valgrind --tool=cachegrind --cache-sim=no \
        --cachegrind-out-file="$out/$1.cg" "$2" "$data" "$images" > "$out/$1.log" 2>&1
}
count before "$before" &
count after "$after" &
wait
total() { grep -o 'I *refs: *[0-9,]*' "$out/$1.log" | tr -d ', ' | cut -d: -f2; }
b=$(total before) a=$(total after)
echo "instructions: before $b, after $a, after/before $(echo "scale=4; $a / $b" | bc)"
# Per function, both sides (cg_annotate's per-function table, file paths stripped so the two
# builds' names match).
table() {
    cg_annotate "$out/$1.cg" 2>/dev/null | grep -E '^ *[0-9][0-9,]* \(' | grep -v 'PROGRAM TOTALS' |
        sed -E 's/^ *([0-9,]+) \([^)]*\) +[^:]*:(.*)$/\2\t\1/' | tr -d ',' |
        awk -F'\t' '{n[$1] += $2} END {for (f in n) print f "\t" n[f]}'
}
echo "functions that moved most (before -> after):"
join -t $'\t' -a1 -a2 -e 0 -o 0,1.2,2.2 <(table before | sort) <(table after | sort) |
    awk -F'\t' '{d = $3 - $2; print (d < 0 ? -d : d) "\t" $1 "\t" $2 "\t" $3}' | sort -rn | head -12 |
    awk -F'\t' '{printf "  %14d -> %14d  %s\n", $3, $4, $2}'
