#!/bin/sh
# test-arm64.sh — the portable core proven on arm64 (issue 19): cross-builds etwcore's portable
# part, the reader/decoder unit tests and etwd-convert with Debian's gcc-aarch64-linux-gnu
# (cmake/aarch64-linux-gnu.cmake, -DETWD_PORTABLE_CORE=ON), runs the unit tests under
# `qemu-aarch64 -L /usr/aarch64-linux-gnu` (ctest's cross-compiling emulator; no binfmt needed),
# converts every corpus trace with bench/etl_golden.sh (all 43 outputs: the full golden set,
# ~20 s under qemu here) and fails on any byte that differs from the x86-64 conversions of the
# same tree. x86-64 reference: $ETWD_X86 (e.g. build/test/server/etwd, as scripts/test.sh passes
# it) or else etwd-convert built natively from this tree. Corpus: $ETWD_CORPUS / $ETWD_MANIFESTS,
# else ../shared. Needs gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user (scripts/deps.sh
# with ETWD_TEST_DEPS=1), unzip, gzip.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/build/arm64
export ETWD_CORPUS="${ETWD_CORPUS:-$ROOT/../shared/corpus}"
export ETWD_MANIFESTS="${ETWD_MANIFESTS:-$(dirname "$ETWD_CORPUS")/manifests}"
QEMU="qemu-aarch64 -L /usr/aarch64-linux-gnu"
start=$(date +%s)

cmake -S "$ROOT" -B "$B" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/aarch64-linux-gnu.cmake" \
  -DETWD_PORTABLE_CORE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$B" -j"$(nproc)" >/dev/null
# ELF e_machine 0xb7 = AArch64
[ "$(od -An -tx1 -j18 -N2 "$B/etwd-convert" | tr -d ' ')" = b700 ] ||
  { echo "test-arm64: $B/etwd-convert is not an arm64 binary" >&2; exit 1; }
(cd "$B" && ctest --output-on-failure -j"$(nproc)")

X86=${ETWD_X86:-}
if [ -z "$X86" ]; then
  cmake -S "$ROOT" -B "$ROOT/build/arm64-host" -DETWD_PORTABLE_CORE=ON -DETWD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$ROOT/build/arm64-host" -j"$(nproc)" --target etwd-convert >/dev/null
  X86=$ROOT/build/arm64-host/etwd-convert
fi
T=$(mktemp -d "$ROOT/build/arm64-golden.XXXXXX") # the outputs are ~600 MB per side
trap 'rm -rf "$T"' EXIT
# bench/etl_golden.sh runs "$ETWD convert ...": run the arm64 binary through qemu
printf '#!/bin/sh\nexec %s %s "$@"\n' "$QEMU" "$B/etwd-convert" > "$T/etwd-arm64"
chmod +x "$T/etwd-arm64"
cd "$ROOT"
sh bench/etl_golden.sh "$X86" "$T/x86-64" >/dev/null
sh bench/etl_golden.sh "$T/etwd-arm64" "$T/arm64" >/dev/null
n=$(ls "$T/x86-64" | grep -vc '\.err$')
if ! diff -rq "$T/x86-64" "$T/arm64" >&2; then
  echo "test-arm64: arm64 conversions differ from x86-64 ($X86)" >&2
  exit 1
fi
echo "test-arm64: unit tests passed under qemu; $n conversions byte-identical to x86-64 ($(( $(date +%s) - start )) s)" >&2
