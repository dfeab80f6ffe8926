#!/usr/bin/env bash
# Generates the binlog the decode benchmark (bench/decode.rs) reads: the
# binlog files written by a sysbench oltp_read_write run on 8 schemas
# (scripts/workload.sh, --index-updates=4 --non-index-updates=2), about 48 MB,
# copied with an index file into target/bench-data/sysbench-binlog/.
#
# It uses a PRIVATE sandbox master (its own directory and port, see below) so
# that it never touches the shared test sandbox, and stops it at the end.
#
# Usage: bench/gen-binlog.sh [--force] [--target-mb N] [--chunk-secs N]
#   --force          regenerate even when the data is already there
#   --target-mb N    binlog size to reach, MB (default 48); the run goes on in
#                    chunks of sysbench load until the binlog is at least this big
#   --chunk-secs N   seconds of load per chunk (default 5)
#
# Environment: BENCH_SANDBOX_DIR (default /tmp/bench-binlog) and
# BENCH_SANDBOX_PORT (default 26306) choose the private sandbox;
# BENCH_DATA_DIR (default target/bench-data/sysbench-binlog) the output.
#
# Idempotent: when the output holds a complete copy (its COMPLETE marker), it
# says so and exits 0 without starting anything. The output is replaced
# atomically (written beside it, then renamed).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
force=0 target_mb=48 chunk_secs=5
while [ $# -gt 0 ]; do
    case "$1" in
        --force) force=1; shift ;;
        --target-mb) target_mb=$2; shift 2 ;;
        --chunk-secs) chunk_secs=$2; shift 2 ;;
        -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "gen-binlog: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ "$target_mb" =~ ^[0-9]+$ && "$target_mb" -gt 0 ]] || { echo "gen-binlog: --target-mb wants a positive integer" >&2; exit 2; }
[[ "$chunk_secs" =~ ^[0-9]+$ && "$chunk_secs" -gt 0 ]] || { echo "gen-binlog: --chunk-secs wants a positive integer" >&2; exit 2; }

out=${BENCH_DATA_DIR:-$root/target/bench-data/sysbench-binlog}
say() { printf '%s gen-binlog: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'gen-binlog: error: %s\n' "$*" >&2; exit 1; }

if [ "$force" = 0 ] && [ -f "$out/COMPLETE" ]; then
    say "already generated: $out ($(cat "$out/COMPLETE")); --force to regenerate"
    exit 0
fi

# The private sandbox: every script below reads these (conf/sandbox.env
# gives the rest; a variable set here wins).
export SHARDREP_SANDBOX_DIR=${BENCH_SANDBOX_DIR:-/tmp/bench-binlog}
export SANDBOX_MASTER_PORT=${BENCH_SANDBOX_PORT:-26306}
[ "$SHARDREP_SANDBOX_DIR" != /tmp/shardrep-sandbox ] || die "refusing to use the shared test sandbox directory"
[ "$SANDBOX_MASTER_PORT" != 13306 ] || die "refusing to use the shared test sandbox port"

command -v sysbench >/dev/null || {
    say "installing sysbench"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sysbench >/dev/null
}

sandbox() { "$root/scripts/sandbox.sh" "$@"; }
sql() { sandbox sql master -N -B "$@"; }
# sysbench writes its per-schema logs into $TMPDIR: keep them away from the
# shared sandbox's workload logs.
work=$(mktemp -d "${TMPDIR:-/tmp}/gen-binlog.XXXXXX")
export TMPDIR=$work

cleanup() {
    local rc=$?
    say "stopping the private sandbox ($SHARDREP_SANDBOX_DIR, port $SANDBOX_MASTER_PORT)"
    sandbox down || true
    rm -rf "$work" "$out.tmp"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "private sandbox master in $SHARDREP_SANDBOX_DIR on port $SANDBOX_MASTER_PORT"
sandbox up 0 >/dev/null

# Fresh sysbench tables (the schemas of an earlier run are dropped first).
"$root/scripts/workload.sh" cleanup
"$root/scripts/workload.sh" prepare

binlog_dir=$SHARDREP_SANDBOX_DIR/master/binlog
sql -e 'FLUSH BINARY LOGS'
first=$(sql -e 'SHOW MASTER STATUS' | cut -f1)
gtid_start=$(sql -e 'SELECT @@gtid_binlog_pos')
say "load starts in $first (gtid_binlog_pos $gtid_start)"

# Load in chunks until the binlog of the run reaches the target size: a
# first chunk of --chunk-secs measures the rate, the next one aims at the
# target. A FLUSH BINARY LOGS between chunks gives the run more than one
# file, so the bench follows a rotation as a real reader does.
target=$((target_mb * 1000 * 1000))
size=0 chunks=0 secs=$chunk_secs loaded=0
run_size() { sql -e 'SHOW BINARY LOGS' | awk -v first="$first" '$1 >= first {s += $2} END {print s + 0}'; }
while [ "$size" -lt "$target" ]; do
    chunks=$((chunks + 1))
    [ "$chunks" -le 20 ] || die "binlog still ${size} bytes after 20 chunks"
    [ "$chunks" = 1 ] || sql -e 'FLUSH BINARY LOGS'
    "$root/scripts/workload.sh" run --schemas 8 --time "$secs" --threads 1 \
        --index-updates 4 --non-index-updates 2
    loaded=$((loaded + secs))
    size=$(run_size)
    say "binlog of the run: $size bytes after chunk $chunks ($loaded s of load)"
    # Seconds for the rest at the rate so far, rounded up.
    secs=$(( ((target - size) * loaded + size - 1) / (size > 0 ? size : 1) ))
    [ "$secs" -ge 1 ] || secs=1
done

sql -e 'FLUSH BINARY LOGS'
next=$(sql -e 'SHOW MASTER STATUS' | cut -f1)
gtid_end=$(sql -e 'SELECT @@gtid_binlog_pos')
mapfile -t files < <(sql -e 'SHOW BINARY LOGS' | awk -v first="$first" -v next_="$next" \
    '$1 >= first && $1 < next_ {print $1}')
[ "${#files[@]}" -gt 0 ] || die "no binlog file between $first and $next"

rm -rf "$out.tmp"
mkdir -p "$out.tmp"
base=${first%.*}
: > "$out.tmp/$base.index"
for f in "${files[@]}"; do
    cp "$binlog_dir/$f" "$out.tmp/$f"
    echo "./$f" >> "$out.tmp/$base.index"
done
bytes=$(cat "${files[@]/#/$out.tmp/}" | wc -c)
cat > "$out.tmp/README" <<TXT
Binlog of a sysbench oltp_read_write run (8 schemas, 1 thread each,
--index-updates=4 --non-index-updates=2, $loaded s of load in $chunks chunk(s))
on a MariaDB $(sql -e 'SELECT VERSION()') sandbox master, written by
bench/gen-binlog.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ).
Files: ${files[*]} ($bytes bytes); GTID $gtid_start -> $gtid_end.
Read by: cargo bench --bench decode
TXT
echo "${files[*]} $bytes bytes" > "$out.tmp/COMPLETE"
rm -rf "$out"
mv "$out.tmp" "$out"
say "wrote $out: ${files[*]} ($bytes bytes)"
