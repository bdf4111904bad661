#!/bin/sh
# Fetches the ETL test data (real .etl files and provider manifests, listed with their public
# source and SHA-256 in tests/data-sources.txt) into DEST (default tests/data/, git-ignored):
# DEST/corpus, DEST/manifests and DEST/manifests-next, the layout ETWD_CORPUS, ETWD_MANIFESTS and
# ETWD_MANIFESTS_NEXT point at.
#   scripts/fetch-corpus.sh [DEST]
# ETWD_FETCH_MIRROR=DIR copies from DIR/corpus, DIR/manifests and DIR/manifests-next (e.g.
# ../shared) instead of downloading: CI uses it to test the checksums and the layout without network.
# A file already in DEST with the right checksum is kept; a file whose checksum differs from the
# list is refused (exit 1, nothing written for it). Needs curl (or a mirror) and sha256sum.
# ETWD_FETCH_ONLY="PREFIX..." fetches only the entries whose local path starts with one of the
# space-separated PREFIXes (scripts/fetch-manifests.sh: manifests/ manifests-next/).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-$ROOT/tests/data}
LIST="$ROOT/tests/data-sources.txt"
MIRROR=${ETWD_FETCH_MIRROR:-}
ONLY=${ETWD_FETCH_ONLY:-}
ME=${ETWD_FETCH_NAME:-$(basename "$0" .sh)}
mkdir -p "$DEST"
tmp=$(mktemp "$DEST/.fetch.XXXXXX")
trap 'rm -f "$tmp"' EXIT
n=0; got=0; bad=0
while read -r sum size rel url; do
  case "$sum" in ''|'#'*) continue ;; esac
  keep=${ONLY:+0}
  for o in $ONLY; do case "$rel" in "$o"*) keep=1 ;; esac; done
  [ "${keep:-1}" = 1 ] || continue
  n=$((n + 1))
  out="$DEST/$rel"
  if [ -f "$out" ] && [ "$(sha256sum < "$out" | cut -d' ' -f1)" = "$sum" ]; then continue; fi
  if [ -n "$MIRROR" ]; then
    cp "$MIRROR/$rel" "$tmp" || { echo "$ME: $rel: not in the mirror $MIRROR" >&2; bad=$((bad + 1)); continue; }
  else
    curl -fsSL --retry 3 -o "$tmp" "$url" || { echo "$ME: $rel: download of $url failed" >&2; bad=$((bad + 1)); continue; }
  fi
  have=$(sha256sum < "$tmp" | cut -d' ' -f1)
  if [ "$have" != "$sum" ]; then
    echo "$ME: $rel: SHA-256 mismatch (expected $sum, got $have, $(wc -c < "$tmp") of $size bytes) from ${MIRROR:-$url}: refused" >&2
    bad=$((bad + 1)); continue
  fi
  mkdir -p "$(dirname "$out")"
  mv "$tmp" "$out"
  got=$((got + 1))
done < "$LIST"
if [ "$bad" -gt 0 ]; then
  echo "$ME: $bad of $n files missing or refused; $DEST is incomplete" >&2
  exit 1
fi
echo "$ME: $n files in $DEST${ONLY:+ ($ONLY)} ($got fetched${MIRROR:+ from $MIRROR})" >&2
[ -n "$ONLY" ] && exit 0
echo "  run the tests with ETWD_CORPUS=$DEST/corpus ETWD_MANIFESTS=$DEST/manifests (the build finds $ROOT/tests/data by itself)" >&2
