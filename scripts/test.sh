#!/usr/bin/env bash
# The project's test command (the README's second command, and what CI runs):
# format check, clippy with warnings as errors, then every test with the
# MariaDB sandbox (master + two native replicas on 127.0.0.1) up; replica 2
# is the one the apply tests take over. The sandbox is stopped at the end
# when this run started it, unless --keep-sandbox is given.
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
# Stop the sandbox at the end only when this run started it: a sandbox
# that was already running (someone else's work) is left as it was. A
# stopped one is removed first, so this run starts from empty servers: a
# killed or failed earlier run can leave a shardrep catalog on replica 2,
# and a takeover there is then rightly refused ("already applied by
# another shardrep service").
. scripts/lib.sh
if sandbox_sql master -e 'SELECT 1' >/dev/null 2>&1; then
    keep=1
elif [ -d "$SHARDREP_SANDBOX_DIR" ]; then
    echo "== removing the stopped sandbox in $SHARDREP_SANDBOX_DIR (left by an earlier run)"
    scripts/sandbox.sh destroy
fi
stop_sandbox() { [ "$keep" = 1 ] || scripts/sandbox.sh down >/dev/null 2>&1 || true; }
trap stop_sandbox EXIT
scripts/sandbox.sh up 2

echo "== cargo test"
cargo test "$@"
