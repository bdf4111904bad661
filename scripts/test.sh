#!/bin/sh
# Installs what is missing, builds etwd with ASan+UBSan and runs every test: unit tests, API and
# live-kernel tests against the spawned binary (real TLS, real clients, real tracefs — run as
# root), ETL tests against ../shared/corpus, the browser tests in Debian's Chromium, and each
# fuzz target for a bounded time. Exits non-zero if anything fails.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ETWD_TEST_DEPS=1 "$ROOT/scripts/deps.sh"
cmake -S "$ROOT" -B "$ROOT/build/test" -DETWD_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$ROOT/build/test" -j"$(nproc)"
"$ROOT/scripts/build-windows.sh" >/dev/null   # etwd.exe for the wine test (tests/e2e/test_windows_wine.py)
cd "$ROOT/build/test"
ctest --output-on-failure --timeout 900 "$@"
ETWD_BIN="$ROOT/build/test/server/etwd" ETWD_CORPUS="$ROOT/../shared/corpus" "$ROOT/tests/browser/run.sh"
FUZZ_SECONDS=${FUZZ_SECONDS:-60} "$ROOT/scripts/fuzz.sh"
echo "test: all passed" >&2
