#!/bin/sh
# Cross-builds OpenSSL 3 for 64-bit Windows (libcrypto-3-x64.dll, libssl-3-x64.dll) from Debian's
# openssl source package, into build/win/openssl/. Optional: etwd.exe never links OpenSSL; civetweb
# loads these DLLs at run time for HTTPS. tests/e2e/test_windows_wine.py uses them (when present)
# to check HTTPS and WSS under wine. Takes several minutes on two cores. Idempotent.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TP="$ROOT/build/third_party"
OUT="$ROOT/build/win/openssl"
[ -e "$OUT/libssl-3-x64.dll" ] && [ -e "$OUT/libcrypto-3-x64.dll" ] && { echo "$OUT"; exit 0; }
"$ROOT/scripts/deps.sh" # the private deb-src configuration lives in build/third_party/apt
command -v x86_64-w64-mingw32-gcc >/dev/null ||
  { echo "build-windows-openssl: no MinGW-w64 compiler: run scripts/build-windows.sh first" >&2; exit 1; }
SRC="$ROOT/build/win/openssl-src"
mkdir -p "$SRC" "$OUT"
if ! ls "$SRC"/openssl_*.orig.tar.gz >/dev/null 2>&1; then
  (cd "$SRC" && apt-get -o Dir::Etc::sourcelist=- -o Dir::Etc::sourceparts="$TP/apt/parts" \
     -o Dir::State::Lists="$TP/apt/lists" -o Dir::Cache="$TP/apt/cache" \
     source --download-only openssl >/dev/null 2>&1 || true) # only the upstream tarball is needed
fi
tarball=$(ls "$SRC"/openssl_*.orig.tar.gz 2>/dev/null | head -n1)
[ -n "$tarball" ] || { echo "build-windows-openssl: could not fetch Debian's openssl source" >&2; exit 1; }
dir="$SRC/$(basename "$tarball" .orig.tar.gz | tr _ -)"
[ -d "$dir" ] || tar xzf "$tarball" -C "$SRC"
cd "$dir"
log="$SRC/build.log"
{ [ -e Makefile ] || ./Configure mingw64 --cross-compile-prefix=x86_64-w64-mingw32- shared no-tests no-asm; } \
  >"$log" 2>&1 && make -j"$(nproc)" build_libs >>"$log" 2>&1 || {
  tail -n 30 "$log" >&2
  echo "build-windows-openssl: build failed (full log: $log)" >&2
  exit 1
}
cp libcrypto-3-x64.dll libssl-3-x64.dll LICENSE.txt "$OUT/" # the licence travels with the DLLs (the zip)
echo "$OUT"
