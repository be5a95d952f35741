#!/usr/bin/env bash
# Replays the README's test command as a newcomer would: a fresh `git clone` of this
# checkout, a fresh HOME (no npm cache, no state dir, no dotfiles), nothing in the
# environment but PATH and LANG, then exactly `npm ci && npm test`. Any red test fails it.
# Without the Slurm cluster's env the cluster tests skip, as they do for a newcomer.
# A test that only passes in CI's own checkout (a digest of files a background thread
# rewrites, a path that exists only here) fails here first.
set -euo pipefail
SOURCE=${1:?usage: newcomer.sh CHECKOUT [PATH_FOR_THE_NEWCOMER]}
NEWCOMER_PATH=${2:-$PATH}
DIR=$(mktemp -d /tmp/o4s-newcomer.XXXXXX)
# Jobs of the suite run as nobody: every directory on the way to their spools must be
# world-executable (HOME and TMPDIR live under DIR).
chmod 755 "$DIR"
trap 'rm -rf "$DIR"' EXIT
mkdir -m 755 "$DIR/home" "$DIR/tmp"
git clone -q "$SOURCE" "$DIR/repo"
cd "$DIR/repo"
env -i PATH="$NEWCOMER_PATH" HOME="$DIR/home" LANG=C.UTF-8 TMPDIR="$DIR/tmp" \
  bash -c 'npm ci --no-audit --no-fund && npm test'
