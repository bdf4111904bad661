#!/bin/sh
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for FUZZ_SECONDS (default
# 60): first over its regression inputs (findings kept in tests/fuzz/regressions_<name>/), then
# fuzzing from its seeds. Any crash fails the script and leaves the input in build/fuzz-out/.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECS=${FUZZ_SECONDS:-60}
# (ETWD_THIRD_PARTY in the environment: the civetweb/cJSON sources elsewhere, e.g. in a worktree)
CC=clang cmake -S "$ROOT" -B "$ROOT/build/fuzz" -DETWD_SANITIZE=ON -DETWD_FUZZ=ON ${ETWD_THIRD_PARTY:+-DETWD_THIRD_PARTY="$ETWD_THIRD_PARTY"} >/dev/null
targets=$(cd "$ROOT/tests/fuzz" && ls fuzz_*.c | sed 's/\.c$//')
# shellcheck disable=SC2086
cmake --build "$ROOT/build/fuzz" -j"$(nproc)" --target $targets >/dev/null
OUT="$ROOT/build/fuzz-out"
mkdir -p "$OUT"
for bin in "$ROOT"/build/fuzz/tests/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin"); short=${name#fuzz_}
  seeds="$ROOT/tests/fuzz/seeds_$short"; regs="$ROOT/tests/fuzz/regressions_$short"
  extra=""
  [ "$short" = etl ] && extra=${ETWD_CORPUS:-$ROOT/../shared/corpus}
  [ "$short" = etl ] && [ ! -d "$extra" ] && extra="$ROOT/tests/data/corpus"
  if [ -d "$regs" ] && [ -n "$(ls -A "$regs")" ]; then
    echo "fuzz: $name regressions" >&2
    "$bin" "$regs"/* >/dev/null 2>&1 || { echo "fuzz: $name fails a regression input" >&2; "$bin" "$regs"/*; exit 1; }
  fi
  corpus="$OUT/corpus_$short"; mkdir -p "$corpus"
  echo "fuzz: $name for ${SECS}s" >&2
  # ETL seeds: the corpus files themselves (directories are walked recursively by libFuzzer? no:
  # only files directly inside), so copy small files in.
  if [ -n "$extra" ]; then
    find "$extra" -type f \( -name '*.etl' \) -size -2M -exec cp -n {} "$corpus"/ \; 2>/dev/null || true
  fi
  set -- "$corpus"
  [ -d "$seeds" ] && set -- "$@" "$seeds"
  (cd "$OUT" && "$bin" -max_total_time="$SECS" -max_len=1048576 -rss_limit_mb=4096 -timeout=20 "$@" 2>"$OUT/$name.log") || {
    echo "fuzz: $name found a crash; see $OUT/$name.log" >&2; tail -40 "$OUT/$name.log" >&2; exit 1; }
done
echo "fuzz: ok" >&2
