#!/bin/sh
# Browser tests of the bundled web page in Debian's Chromium (see run.mjs). As root on a fresh
# Debian 12: installs chromium, nodejs and npm if missing, then `npm ci` (playwright-core only; it
# downloads no browser) and runs the tests. A missing Chromium is a failure, never a skip.
#   ETWD_BIN=build/test/server/etwd ETWD_CORPUS=../shared/corpus tests/browser/run.sh
# (analysis.mjs also reads ETWD_MANIFESTS, default CORPUS/../manifests)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
missing=""
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || missing="$missing chromium"
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "browser tests: FAIL: missing$missing and not root to install them" >&2
    exit 1
  fi
  echo "browser tests: installing$missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || true
  apt-get install -y -qq $missing >/dev/null
fi
if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
  echo "browser tests: FAIL: ${CHROMIUM:-/usr/bin/chromium} is still missing" >&2
  exit 1
fi
cd "$HERE"
# playwright-core never downloads a browser; the variable makes sure of it
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
# the page's pure modules in node, then the page in Chromium (run.mjs: the live table, sessions,
# files; views.mjs: the timeline and group-by panels; analysis.mjs: field filter, columns,
# export, links, picker, keys, dark mode; flame.mjs: the flame graph, stacks, folded export;
# worker.mjs: the data path in its Worker; audit_strings.mjs: provider strings in the form;
# audit_reltime.mjs: the Δt column; audit_chrome_syscalls.mjs: a live session's Chrome export;
# audit_schema_complete.mjs: completion from the event schemas; audit_timeline_heat.mjs: heat
# strips and ticks; host_column.mjs: the Host column of a two-agent NATS fleet, needs
# nats-server). Every suite runs; any failure fails the script.
rc=0
node modules.test.mjs || rc=1
node run.mjs || rc=1
node views.mjs || rc=1
node analysis.mjs || rc=1
node flame.mjs || rc=1
node worker.mjs || rc=1
node audit_strings.mjs || rc=1
node audit_reltime.mjs || rc=1
node audit_chrome_syscalls.mjs || rc=1
node audit_schema_complete.mjs || rc=1
node audit_timeline_heat.mjs || rc=1
node host_column.mjs || rc=1
exit $rc
