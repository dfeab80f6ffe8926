#!/usr/bin/env bash
# The project's test command (the README's second command, and what CI runs):
# format check, clippy with warnings as errors, then every test with the
# MariaDB sandbox (master + native replica on 127.0.0.1) up. The sandbox is
# stopped at the end unless --keep-sandbox is given.
#
# Usage: scripts/test.sh [--keep-sandbox] [extra cargo test args...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

keep=0
if [ "${1:-}" = --keep-sandbox ]; then keep=1; shift; fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --quiet -- -D warnings

echo "== sandbox up"
stop_sandbox() { [ "$keep" = 1 ] || scripts/sandbox.sh down >/dev/null 2>&1 || true; }
trap stop_sandbox EXIT
scripts/sandbox.sh up 1

echo "== cargo test"
cargo test "$@"
