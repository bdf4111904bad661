#!/bin/sh
# bench_linux_rate.sh — highest raw_syscalls:sys_enter rate the Linux backend takes without
# loss (decode + JSON + hub + one streaming subscriber), against `trace-cmd record -d --no-filter`
# recording the same event in the same run. Root. Prints one line per offered rate.
# usage: bench/bench_linux_rate.sh [build-dir] [seconds] [buffer_kb] [reader_nice] [pin 0|1]
set -eu
B=${1:-build-rel}
SECS=${2:-3}
BUF=${3:-4096}
NICE=${4:--10}
PIN=${5:-1}
BIN="$B/bench/bench_linux_rate"
[ -x "$BIN" ] || { echo "build $BIN first"; exit 1; }
command -v trace-cmd >/dev/null || { echo "trace-cmd is not installed"; exit 1; }
echo "reader nice $NICE, pinned $PIN, buffer ${BUF} KiB/CPU, ${SECS} s per rate"
printf '%-10s %-10s %-9s %-12s %-11s %-12s %-11s\n' offered issued/s nice etwd_events etwd_loss% tc_loss% json_MB/s
for rate in 500000 1000000 1500000 2000000 2500000 3000000 0; do
  line=$("$BIN" "$rate" "$SECS" "$BUF" "$NICE" "$PIN")
  get() { echo "$line" | sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
  issued=$(get issued); secs=$(get secs)
  printf '%-10s %-10.0f %-9s %-12s %-11s %-12s %-11s\n' "$([ "$rate" = 0 ] && echo max || echo "$rate")" \
    "$(echo "$issued / $secs" | bc -l)" "$NICE" "$(get etwd_read)" "$(get etwd_loss_pct)" \
    "$(get tc_loss_pct)" "$(get json_MBps)"
done
