#!/usr/bin/env bash
# Smoke run of the built binary as an admin would use it: --version, the worker name, a
# daemon on a fresh state dir, one BATCH job through the CLI, graceful SIGTERM.
set -euo pipefail
DIST=${1:?usage: smoke.sh DIST_DIR}
BIN="$DIST/openai4s"
"$BIN" --version
"$DIST/openai4s-worker" --help >/dev/null
STATE=$(mktemp -d /tmp/o4s-smoke.XXXXXX)
"$BIN" serve --state-dir "$STATE" 2>"$STATE/daemon.log" &
DAEMON=$!
trap 'kill "$DAEMON" 2>/dev/null || true; rm -rf "$STATE" "$STATE-spool"' EXIT
for _ in $(seq 1 100); do [ -S "$STATE/api.sock" ] && break; sleep 0.1; done
SERVER="unix:$STATE/api.sock"
ID=$("$BIN" submit --server "$SERVER" -- /bin/sh -c 'echo smoke-ok')
"$BIN" wait --server "$SERVER" "$ID" --until TERMINAL --timeout 60s
"$BIN" show --server "$SERVER" --json "$ID" | grep -Eq '"phase": *"COMPLETED"' ||
  { echo "smoke: $ID did not end COMPLETED" >&2; exit 1; }
[ "$("$BIN" logs --server "$SERVER" "$ID")" = "smoke-ok" ] ||
  { echo "smoke: logs of $ID are not the job's output" >&2; exit 1; }
"$BIN" backup --server "$SERVER" "$STATE/backup.db" >/dev/null
kill -TERM "$DAEMON"
wait "$DAEMON"
[ ! -e "$STATE/api.sock" ] || { echo "socket left behind after SIGTERM" >&2; exit 1; }
# From the checkout as the README says (npm link), into a private prefix: the commands on PATH.
PREFIX="$STATE/npm-global"
npm install -g "$(dirname "$DIST")" --prefix "$PREFIX" --no-audit --no-fund >/dev/null
"$PREFIX/bin/openai4s" --help | grep -q "Usage: openai4s" ||
  { echo "smoke: openai4s from npm install -g . does not answer --help" >&2; exit 1; }
"$PREFIX/bin/openai4s-worker" --help >/dev/null
echo "smoke: ok ($ID completed)"
