#!/bin/sh
# bench_linux_callgrind.sh — instructions per event of the Linux backend's decode + encode.
#
# Runs bench_linux_decode under callgrind once per event type, collecting only the function
# `measured` (lx_dec_event for every record, descriptors already built), and prints
# instructions/event = collected Ir / measured events. Root (captures real ring-buffer pages).
# usage: bench/bench_linux_callgrind.sh [build-dir]   (a Release or RelWithDebInfo build, not
#   sanitized). Set LX_BENCH_PAGES=<file> to keep the captured pages: later runs (another build,
#   an A/B comparison) then decode exactly the same records.
set -eu
B=${1:-build-rel}
BIN="$B/bench/bench_linux_decode"
[ -x "$BIN" ] || { echo "build $BIN first (cmake -B $B -DCMAKE_BUILD_TYPE=Release)"; exit 1; }
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
# the same captured pages for every run (LX_BENCH_PAGES: captured once, then reused)
export LX_BENCH_PAGES="${LX_BENCH_PAGES:-$OUT/pages}"
"$BIN" 1 2048 >/dev/null
printf '%-20s %10s %10s %12s %10s\n' event events bytes/ev instr/event ns/event
for ev in sys_enter sched_switch sched_process_exec; do
  valgrind --tool=callgrind --callgrind-out-file="$OUT/cg" --toggle-collect=measured \
    "$BIN" 50 2048 "$ev" >"$OUT/o" 2>"$OUT/e"
  ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$OUT/e" | sort -n | tail -1)
  n=$(sed -n 's/.*measured_calls=\([0-9]*\).*/\1/p' "$OUT/o")
  bpe=$(sed -n 's/.*bytes\/event=\([0-9.]*\).*/\1/p' "$OUT/o")
  ns=$("$BIN" 20 2048 "$ev" | sed -n 's/.*ns\/event=\([0-9.]*\).*/\1/p')
  printf '%-20s %10s %10s %12s %10s\n' "$ev" "$n" "$bpe" "$((ir / n))" "$ns"
done
