#!/bin/sh
# Installs the provider manifests of tests/data-sources.txt (the manifests/ and manifests-next/
# entries: each with its public source — repository, commit, path — and SHA-256; licence files
# included) into the state directory, so Windows files decode out of the box with the default
# `etwd --manifests STATE/manifests-next:STATE/manifests` (the newer CLR manifest first, the older
# copies for what it dropped): STATE/manifests/<owner>+<repo>/<path> and
# STATE/manifests-next/<owner>+<repo>/<path>.
#   scripts/fetch-manifests.sh [STATE_DIR]    (default $ETWD_STATE_DIR, else /var/lib/etwd)
# The download, the checksums and ETWD_FETCH_MIRROR=DIR (copy from DIR/manifests and
# DIR/manifests-next, e.g. ../shared) are scripts/fetch-corpus.sh's. A running etwd uses them from its next decode or replay.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE=${1:-${ETWD_STATE_DIR:-/var/lib/etwd}}
[ -d "$STATE" ] || mkdir -p -m 700 "$STATE" # etwd's state directory is private (mode 0700)
ETWD_FETCH_ONLY="manifests/ manifests-next/" ETWD_FETCH_NAME=fetch-manifests exec "$ROOT/scripts/fetch-corpus.sh" "$STATE"
