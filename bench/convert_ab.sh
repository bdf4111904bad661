#!/bin/sh
# convert_ab.sh — wall time of `etwd convert TRACE -o /dev/null`, two binaries side by side:
#
#   bench/convert_ab.sh OLD_ETWD NEW_ETWD [RUNS] [TRACE]
#
# Runs OLD and NEW alternately (old, new, old, new, …) RUNS times each (default 15, at least 10)
# on TRACE (default: net.4.5.2.x64.etl, unzipped from ../shared/corpus; run from the repository
# root), and prints each binary's events/s as best and median, the ratio NEW/OLD of both, and the
# load average before and after (the machine may be shared: alternating keeps a load change from
# favouring one side). Needs unzip.
set -eu
OLD=$(realpath "$1")
NEW=$(realpath "$2")
RUNS=${3:-15}
[ "$RUNS" -ge 10 ] || RUNS=10
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
if [ $# -ge 4 ]; then
  TRACE=$(realpath "$4")
else
  unzip -q -o -d "$T" ../shared/corpus/microsoft+perfview/src/TraceEvent/TraceEvent.Tests/inputs/net.4.5.2.x64.etl.zip
  TRACE=$T/net.4.5.2.x64.etl
fi
# events in the trace (both binaries must agree)
ev() { "$1" convert "$TRACE" -o /dev/null 2>&1 | sed -n 's/.*convert: \([0-9]*\) events.*/\1/p'; }
EO=$(ev "$OLD")
EN=$(ev "$NEW")
[ -n "$EO" ] && [ "$EO" = "$EN" ] || { echo "event counts differ or missing: $EO / $EN" >&2; exit 1; }
echo "trace: $TRACE ($EO events), $RUNS runs each, alternating"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
one() { # BINARY -> seconds
  s=$(date +%s.%N)
  "$1" convert "$TRACE" -o /dev/null --quiet
  e=$(date +%s.%N)
  echo "$s $e" | awk '{printf "%.6f\n", $2 - $1}'
}
i=0
while [ "$i" -lt "$RUNS" ]; do
  one "$OLD" >> "$T/old"
  one "$NEW" >> "$T/new"
  i=$((i + 1))
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
stats() { # FILE -> "best median" in events/s
  sort -n "$1" | awk -v ev="$EO" '{t[NR] = $1} END {
    m = NR % 2 ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
    printf "%.0f %.0f\n", ev / t[1], ev / m }'
}
set -- $(stats "$T/old") $(stats "$T/new")
printf 'old %s: best %.2f M events/s, median %.2f M\n' "$OLD" "$(echo "$1" | awk '{print $1 / 1e6}')" \
  "$(echo "$2" | awk '{print $1 / 1e6}')"
printf 'new %s: best %.2f M events/s, median %.2f M\n' "$NEW" "$(echo "$3" | awk '{print $1 / 1e6}')" \
  "$(echo "$4" | awk '{print $1 / 1e6}')"
echo "$1 $2 $3 $4" | awk '{printf "new/old: best %.3f, median %.3f\n", $3 / $1, $4 / $2}'
