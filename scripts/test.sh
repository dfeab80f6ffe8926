#!/usr/bin/env bash
# The project's test command (the README's second command, and what CI runs):
# format check, clippy with warnings as errors, then every test with the
# MariaDB sandbox (master + two native replicas on 127.0.0.1) up; replica 2
# is the one the apply tests take over. The sandbox is stopped at the end
# when this run started it, unless --keep-sandbox is given.
#
# Every test binary runs even when an earlier one fails (--no-fail-fast); the
# run ends with the failed tests (and test binaries that ended without a
# result: crashed or killed), how long it took, and one last line
# "summary: P passed, F failed, I skipped", the sums of libtest's
# "test result:" lines (skipped: ignored tests). The exit status is cargo
# test's: non-zero when anything failed.
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
# shellcheck disable=SC2317 # run by the EXIT trap
stop_sandbox() { [ "$keep" = 1 ] || scripts/sandbox.sh down >/dev/null 2>&1 || true; }
trap stop_sandbox EXIT
scripts/sandbox.sh up 2

# The failed tests, the binaries without a test result, the time taken
# and the summary line, from cargo test's output (stdout and stderr) in
# file OUT; STATUS: cargo test's exit status, SECS: its run time.
summarize_tests() {
    local out=$1 status=$2 secs=$3
    awk -v status="$status" -v secs="$secs" -v total="$SECONDS" '
        function finish_bin() {
            if (bin != "" && !has_result) { nores[++nnores] = bin }
            bin = ""; has_result = 0; listing = 0; npending = 0
        }
        { gsub(/\033(\[[0-9;]*[A-Za-z]|\(B)/, ""); sub(/\r$/, "") }
        /^ +Running / {
            finish_bin()
            bin = $0; sub(/^ +Running /, "", bin); sub(/ \(.*\)$/, "", bin)
            next
        }
        /^ +Doc-tests / { finish_bin(); bin = $0; sub(/^ +/, "", bin); next }
        # The failed tests are the list of the last "failures:" block,
        # right before "test result:" (an earlier block holds the output
        # of the failed tests, which may look like a list too).
        /^failures:$/ { listing = 1; npending = 0; next }
        listing && /^    [^ ]/ { pending[++npending] = substr($0, 5); next }
        /^$/ { listing = 0; next }
        /^test result: / {
            if (match($0, /[0-9]+ passed; [0-9]+ failed; [0-9]+ ignored;/)) {
                split(substr($0, RSTART, RLENGTH), n, /[^0-9]+/)
                passed += n[1]; failed += n[2]; ignored += n[3]
            }
            for (i = 1; i <= npending; i++) fails[++nfails] = bin ": " pending[i]
            has_result = 1; listing = 0; npending = 0
            next
        }
        { listing = 0; npending = 0 }
        END {
            finish_bin()
            if (nfails > 0) {
                print "== failed tests (" nfails "):"
                for (i = 1; i <= nfails; i++) print "    " fails[i]
            }
            if (nnores > 0) {
                print "== test binaries that ended without a test result (crashed or killed; see above):"
                for (i = 1; i <= nnores; i++) print "    " nores[i]
            }
            if (status != 0 && nfails == 0 && nnores == 0)
                print "== cargo test failed (exit status " status ") with no failed test: a build error? see above"
            printf "== cargo test took %d s (the whole run %d s)\n", secs, total
            printf "summary: %d passed, %d failed, %d skipped\n", passed, failed, ignored
        }' "$out"
}

echo "== cargo test --no-fail-fast"
# Streamed to the terminal and kept in a file for the summary; stderr too
# (cargo's "Running <test binary>" lines). pipefail: the pipeline's status is
# cargo's.
out=$(mktemp "${TMPDIR:-/tmp}/shardrep-test.XXXXXX")
trap 'stop_sandbox; rm -f "$out"' EXIT
start=$SECONDS
status=0
cargo test --no-fail-fast "$@" 2>&1 | tee "$out" || status=$?
summarize_tests "$out" "$status" "$((SECONDS - start))" || echo "== no summary: reading $out failed"
exit "$status"
