#!/bin/sh
# convert_cpu.sh — CPU and wall time of `etwd convert TRACE -o /dev/null --quiet [ARGS]`, several
# binaries side by side:
#
#   bench/convert_cpu.sh RUNS TRACE [ARGS...] -- ETWD...
#
# Runs the binaries alternately (a, b, a, b, …) RUNS times each, so a change of the machine's
# load favours none; per binary prints the best and median CPU time (perf stat's task-clock: all
# threads, user + system) and wall time (a second run, timed with date). Unlike
# bench/convert_ab.sh it needs no equal event counts, so it compares options that change the
# output (with stacks vs --no-stacks, --limit 1 for the start-up plus the stacks' learning pass).
# Needs perf.
set -eu
RUNS=$1
TRACE=$2
shift 2
ARGS=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  ARGS="$ARGS $1"
  shift
done
[ $# -gt 1 ] || { echo "usage: $0 RUNS TRACE [ARGS...] -- ETWD..." >&2; exit 2; }
shift
D=$(mktemp -d)
trap 'rm -rf "$D"' EXIT
echo "trace: $TRACE, args:$ARGS, $RUNS runs each, alternating; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
i=0
while [ "$i" -lt "$RUNS" ]; do
  j=0
  for b in "$@"; do
    # (ARGS unquoted on purpose: split into words)
    perf stat -x, -e task-clock -o "$D/stat" "$b" convert "$TRACE" -o /dev/null --quiet $ARGS 2>/dev/null || true
    s=$(date +%s%N)
    "$b" convert "$TRACE" -o /dev/null --quiet $ARGS 2>/dev/null || true
    e=$(date +%s%N)
    echo "$(grep task-clock "$D/stat" | cut -d, -f1) $(((e - s) / 1000))" >> "$D/$j"
    j=$((j + 1))
  done
  i=$((i + 1))
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
j=0
for b in "$@"; do
  printf '%s:' "$b"
  sort -n "$D/$j" | awk '{c[NR] = $1} END {printf " CPU ms best %.1f median %.1f;", c[1], c[int((NR + 1) / 2)]}'
  awk '{print $2 / 1000}' "$D/$j" | sort -n | awk '{w[NR] = $1} END {printf " wall ms best %.1f median %.1f\n", w[1], w[int((NR + 1) / 2)]}'
  j=$((j + 1))
done
