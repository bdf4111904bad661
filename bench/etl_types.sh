#!/bin/sh
# etl_types.sh — decode + encode callgrind instructions per event for the N most frequent event
# types of a trace (bench_etl_convert --only; docs/etl.md):
#   bench/etl_types.sh BUILD_DIR FILE.etl [N] [MANIFEST_DIR]
# Prints: count, instructions/event, JSON bytes/event (from the type's own events), type.
set -eu
B=$1
F=$2
N=${3:-10}
M=${4:-../shared/manifests}
BENCH="$B/bench/bench_etl_convert"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$BENCH" "$F" --manifests "$M" --iter 1 --types | grep -v '^events=' | head -n "$N" > "$T/types"
while read -r n type; do
  valgrind --tool=callgrind --callgrind-out-file="$T/cg" --toggle-collect=bench_decode_hit \
    "$BENCH" "$F" --manifests "$M" --iter 2 --only "$type" > "$T/out" 2> "$T/err"
  ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$T/err")
  hits=$(sed -n 's/^hits=\([0-9]*\).*/\1/p' "$T/out")
  echo "$n $ir $hits $type" | awk '{t=$4; for(i=5;i<=NF;i++) t=t" "$i; printf "%8d %7.0f  %s\n", $1, $2/$3, t}'
done < "$T/types"
