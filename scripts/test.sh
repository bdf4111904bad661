#!/bin/sh
# Installs what is missing, builds etwd with ASan+UBSan and runs every test: unit tests, API and
# live-kernel tests against the spawned binary (real TLS, real clients, real tracefs — run as
# root), ETL tests against ../shared/corpus (or tests/data/, fetched by scripts/fetch-corpus.sh from
# the pinned public sources when ../shared is absent), the decode unit tests again in standard C11
# (ETWD_STRICT_C11), the browser tests in Debian's Chromium, and each fuzz target for a bounded
# time. Exits non-zero if anything fails.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ETWD_TEST_DEPS=1 "$ROOT/scripts/deps.sh"
# ETL test data: ../shared when it is there (copied through scripts/fetch-corpus.sh as a mirror, so
# the checksums of tests/data-sources.txt and the layout are checked without network), else
# downloaded into tests/data/ (git-ignored), which the build then uses
if [ -d "$ROOT/../shared/corpus" ] && [ -z "${ETWD_CORPUS:-}" ]; then
  ETWD_FETCH_MIRROR="$ROOT/../shared" "$ROOT/scripts/fetch-corpus.sh" "$ROOT/build/test/data-check"
  CORPUS="$ROOT/../shared/corpus"
else
  [ -n "${ETWD_CORPUS:-}" ] || "$ROOT/scripts/fetch-corpus.sh"
  CORPUS=${ETWD_CORPUS:-$ROOT/tests/data/corpus}
fi
cmake -S "$ROOT" -B "$ROOT/build/test" -DETWD_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$ROOT/build/test" -j"$(nproc)"
"$ROOT/scripts/build-windows.sh" >/dev/null   # etwd.exe for the wine test (tests/e2e/test_windows_wine.py)
cd "$ROOT/build/test"
ctest --output-on-failure --timeout 900 "$@"
# The decode path once more in standard C11 only (ETWD_STRICT_C11, etwcore/src/cc.h: no GNU C, SSE2
# or byte-order shortcuts — every #else branch, what MSVC compiles): its unit tests and the Linux
# fast encoder's (test_linux_decode), without sanitizers (about a minute).
cmake -S "$ROOT" -B "$ROOT/build/strict" -DETWD_STRICT_C11=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
strict=$(cd "$ROOT/tests/unit" && ls test_dec*.c test_etl_*.c test_jw.c test_linux_decode.c | sed 's/\.c$//')
# shellcheck disable=SC2086
cmake --build "$ROOT/build/strict" -j"$(nproc)" --target $strict
(cd "$ROOT/build/strict" && ctest --output-on-failure --timeout 900 -R '^unit\.test_(dec|etl_|jw$|linux_decode$)')
# the reader/decoder cross-built for arm64, unit tests and every corpus conversion under qemu,
# byte-identical to this x86-64 etwd (about 3 minutes)
ETWD_X86="$ROOT/build/test/server/etwd" ETWD_CORPUS="$CORPUS" "$ROOT/scripts/test-arm64.sh"
ETWD_BIN="$ROOT/build/test/server/etwd" ETWD_CORPUS="$CORPUS" "$ROOT/tests/browser/run.sh"
FUZZ_SECONDS=${FUZZ_SECONDS:-60} "$ROOT/scripts/fuzz.sh"
echo "test: all passed" >&2
