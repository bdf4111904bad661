#!/bin/sh
# etl_golden.sh — capture `etwd convert` outputs of every corpus trace, for byte-identity checks
# around decoder/reader performance work (docs/etl.md):
#
#   bench/etl_golden.sh ETWD OUTDIR          # e.g. before and after a change, then
#   diff -r OUTDIR.before OUTDIR.after       # (or cmp each file)
#
# Outputs: each of the 13 corpus traces (.etl; .etl.zip unzipped; .etlgz gunzipped) as ndjson
# without and with --manifests ../shared/manifests-next:../shared/manifests and as csv; a 3-file and a 5-file merge; all
# files merged; net + gcevents + smallEtlFile each given twice (every record time tied). Run from
# the repository root (or set ETWD_CORPUS / ETWD_MANIFESTS / ETWD_MANIFESTS_NEXT); needs unzip and gzip.
set -eu
ETWD=$(realpath "$1")
OUT=$2
CORPUS=${ETWD_CORPUS:-../shared/corpus}
MAN=${ETWD_MANIFESTS:-../shared/manifests}
MAN="${ETWD_MANIFESTS_NEXT:-$(dirname "$MAN")/manifests-next}:$MAN" # the newer CLR manifest first
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
i=0
for f in $(find "$CORPUS" \( -name '*.etl' -o -name '*.etl.zip' -o -name '*.etlgz' \) | sort); do
  i=$((i + 1))
  b=$(printf '%02d' "$i")
  case "$f" in
    *.etl.zip) unzip -p "$f" '*.etl' > "$T/$b.etl" ;;
    *.etlgz) gzip -dc "$f" > "$T/$b.etl" ;;
    *) cp "$f" "$T/$b.etl" ;;
  esac
done
conv() { # NAME ARGS...
  n=$1
  shift
  "$ETWD" convert "$@" --quiet -o "$OUT/$n" 2> "$OUT/$n.err" || echo "exit $?" >> "$OUT/$n.err"
}
for e in "$T"/*.etl; do
  b=$(basename "$e" .etl)
  conv "$b.ndjson" "$e"
  conv "$b.man.ndjson" "$e" --manifests "$MAN"
  conv "$b.csv" "$e" --format csv --manifests "$MAN"
done
all=$(ls "$T"/*.etl)
set -- $all
conv merge3.ndjson "$1" "$2" "$3" --manifests "$MAN"
conv merge5.ndjson "$4" "$5" "$6" "$7" "$8" --manifests "$MAN"
conv mergeall.ndjson $all --manifests "$MAN"
net=$(ls -S "$T"/*.etl | head -1)
small=$(ls -Sr "$T"/*.etl | sed -n 3p)
conv twice.ndjson "$net" "$net" "$small" "$small" --manifests "$MAN"
ls "$OUT" | grep -vc '\.err$' | sed 's/$/ outputs/'
