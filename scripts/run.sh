#!/bin/sh
# Installs what is missing, builds etwd (optimised) and starts it in the foreground.
# Prints the URL, the certificate fingerprint and the admin token. Extra arguments go to etwd,
# e.g. scripts/run.sh --listen 0.0.0.0:8443. Run as root (tracefs needs it).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
"$ROOT/scripts/deps.sh"
cmake -S "$ROOT" -B "$ROOT/build/release" -DCMAKE_BUILD_TYPE=Release -DETWD_TESTS=OFF >/dev/null
cmake --build "$ROOT/build/release" --target etwd -j"$(nproc)" >/dev/null
exec "$ROOT/build/release/server/etwd" --print-token "$@"
