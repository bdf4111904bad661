#!/bin/sh
# REST requests/s: etwd (TLS + bearer auth, GET /api/v1/version and /api/v1/health) against a
# bare civetweb constant response (same TLS settings) — in the same run, same wrk settings.
# Goal: etwd >= 70% of the bare rate. Usage: bench/rest.sh [seconds] (default 10).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECS=${1:-10}
B="$ROOT/build/bench"
"$ROOT/scripts/deps.sh"
cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" --target etwd bench_bare_civetweb -j"$(nproc)" >/dev/null
ST=$(mktemp -d)
"$B/server/etwd" --listen 127.0.0.1:18501 --state-dir "$ST" --log-level error --max-requests 256 >/dev/null 2>&1 &
EP=$!
sleep 1.5
"$B/bench/bench_bare_civetweb" 18502 "$ST/cert.pem" "$ST/key.pem" &
BP=$!
sleep 1
TOK=$(awk '/ reader /{print $3}' "$ST/tokens")
run() { wrk -t2 -c8 -d"${SECS}s" "$@" | awk '/Requests\/sec/{print $2}'; }
bare=$(run https://127.0.0.1:18502/api/v1/health)
health=$(run https://127.0.0.1:18501/api/v1/health)
version=$(run -H "Authorization: Bearer $TOK" https://127.0.0.1:18501/api/v1/version)
kill $EP $BP; wait $EP $BP 2>/dev/null || true
rm -rf "$ST"
echo "bare civetweb (TLS, constant):      $bare req/s"
echo "etwd /api/v1/health (TLS, no auth):  $health req/s  ($(echo "$health $bare" | awk '{printf "%.0f", 100*$1/$2}')% of bare)"
echo "etwd /api/v1/version (TLS + bearer): $version req/s  ($(echo "$version $bare" | awk '{printf "%.0f", 100*$1/$2}')% of bare)"
