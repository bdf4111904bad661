#!/bin/sh
# Installs everything etwd needs to build and test on Debian 12 (as root), and fetches the
# civetweb and cJSON sources from Debian's own source packages into build/third_party/
# (never committed). Idempotent: does nothing that is already done.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TP="$ROOT/build/third_party"
PKGS="build-essential cmake pkg-config libssl-dev libcjson-dev libtracefs-dev libtraceevent-dev libtracecmd-dev libelf-dev \
 libcurl4-openssl-dev zlib1g-dev libminizip-dev curl openssl dpkg-dev xz-utils clang libclang-rt-14-dev trace-cmd wrk valgrind help2man \
 nats-server libnats-dev"
[ "${ETWD_TEST_DEPS:-0}" = 1 ] && PKGS="$PKGS python3 python3-websocket python3-cryptography unzip gzip wine64 gcc-mingw-w64-x86-64 mingw-w64-tools \
 systemd man-db prometheus gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "deps: installing$missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq $missing >/dev/null
fi
fetch_src() { # $1 = source package, $2 = file that proves it is unpacked
  name=$1
  [ -e "$TP/$name/$2" ] && return 0
  mkdir -p "$TP/apt/parts" "$TP/apt/lists/partial" "$TP/apt/cache/archives/partial" "$TP/dl"
  sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > "$TP/apt/parts/debian.sources"
  set -- -o Dir::Etc::sourcelist=- -o Dir::Etc::sourceparts="$TP/apt/parts" \
         -o Dir::State::Lists="$TP/apt/lists" -o Dir::Cache="$TP/apt/cache"
  [ -e "$TP/apt/updated" ] || { apt-get "$@" update -qq 2>/dev/null; touch "$TP/apt/updated"; }
  (cd "$TP/dl" && apt-get "$@" source --download-only "$name" >/dev/null 2>&1)
  rm -rf "$TP/$name"
  dsc=$(ls "$TP"/dl/${name}_*.dsc | head -n1)
  dpkg-source --no-check -x "$dsc" "$TP/$name" >/dev/null 2>&1
}
fetch_src civetweb src/civetweb.c
fetch_src cjson cJSON.c
echo "deps: ok ($TP)" >&2
