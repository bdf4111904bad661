#!/bin/sh
# Cross-builds etwd.exe for 64-bit Windows with Debian's MinGW-w64 (warnings are errors, as on
# Linux). Installs the cross compiler if missing, fetches civetweb/cJSON sources (deps.sh),
# configures build/win with cmake/mingw-w64-x86_64.cmake and builds etwd.exe and the portable
# unit tests (build/win/tests/win/*.exe, run under wine by tests/e2e/test_windows_wine.py),
# OpenSSL 3's DLLs (scripts/build-windows-openssl.sh) and the zip etwd-VERSION-win64.zip (target
# etwd_zip). Prints the path of etwd.exe.
# Extra arguments go to the configure step (e.g. -DCMAKE_BUILD_TYPE=Release).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
"$ROOT/scripts/deps.sh"
missing=""
for p in gcc-mingw-w64-x86-64 mingw-w64-tools; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "build-windows: installing$missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq $missing >/dev/null
fi
OUT=${ETWD_WIN_BUILD:-$ROOT/build/win}
cmake -S "$ROOT" -B "$OUT" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/mingw-w64-x86_64.cmake" \
      -DETWD_TESTS=ON "$@" >/dev/null
cmake --build "$OUT" -j"$(nproc)"
# OpenSSL 3 DLLs for HTTPS on Windows (and the wine test's HTTPS part); ETWD_WIN_OPENSSL=0 skips.
# Several minutes the first time, then cached in build/win/openssl.
if [ "${ETWD_WIN_OPENSSL:-1}" = 1 ] && [ "$OUT" = "$ROOT/build/win" ]; then
  "$ROOT/scripts/build-windows-openssl.sh" >/dev/null
  # the release zip: etwd.exe, the DLLs, README-windows.txt, licences (cmake/windows_zip.cmake)
  cmake --build "$OUT" --target etwd_zip >/dev/null
  echo "build-windows: $(ls "$OUT"/etwd-*-win64.zip)" >&2
fi
echo "$OUT/server/etwd.exe"
