#!/usr/bin/env bash
# Memory with one huge transaction: shardrep's resident size while it
# extracts and applies a single transaction of >= 1 GB of binlog (an
# INSERT ... SELECT of millions of rows), then an UPDATE of every one of
# those rows (twice the binlog: before and after images), with the
# default configuration ([queue] fragment_bytes = 8 MiB). The target:
# peak RSS <= 256 MiB, live and from the queue, tables equal, and a
# kill -9 in the middle of the UPDATE's apply followed by a restart
# applies it exactly once.
#
# 1. generate: on a PRIVATE sandbox (its own directory and ports), native
#    replication on replica1 is stopped, the table huge.t is created on
#    both servers (not binlogged), the master's position is recorded, and
#    the two transactions are written (innodb_flush_log_at_trx_commit=0,
#    sync_binlog=0 while they are). Their binlog sizes are recorded in
#    $SHARDREP_SANDBOX_DIR/huge-backlog.env, reused unless --regenerate.
# 2. live: the replica's table is emptied (not binlogged) and the
#    service's catalog dropped; `shardrep run --until-idle` extracts both
#    transactions from the live master and applies them with 8 channels;
#    once the UPDATE has been applying for --kill-after seconds, it is
#    killed (SIGKILL). VmRSS/VmHWM are sampled every 0.5 s.
# 3. queue: `shardrep run --until-idle` again: the UPDATE, whole in the
#    queue, is applied again from its first fragment; sampled the same
#    way. Then CHECKSUM TABLE on both servers.
#
# Usage: bench/huge-transaction.sh [--rows N] [--kill-after S] [--regenerate] [--keep]
#   --rows N        rows of the transactions (default 5000000, ~1.1 GB of
#                   binlog for the INSERT, ~2.2 GB for the UPDATE)
#   --kill-after S  seconds of the UPDATE's apply before the kill -9
#                   (default 20; 0: no kill)
#   --regenerate    write the transactions again even if recorded
#   --keep          keep the run directory (queue, logs)
#
# Environment: SHARDREP_SANDBOX_DIR (default /tmp/sb-huge) and
# SANDBOX_MASTER_PORT (default 28306) choose the private sandbox (left
# running; `scripts/sandbox.sh destroy` with the same variables removes
# it). BENCH_RESULTS (default bench/results/huge) receives the samples and
# logs. SHARDREP_BIN (default target/release/shardrep). Disk: the master's
# binlog (~3.3 GB), the queue (~2× that: row images and row events) and the
# two servers' data.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export SHARDREP_SANDBOX_DIR=${SHARDREP_SANDBOX_DIR:-/tmp/sb-huge}
export SANDBOX_MASTER_PORT=${SANDBOX_MASTER_PORT:-28306}
# shellcheck source=../scripts/lib.sh
. "$root/scripts/lib.sh"

rows=5000000 kill_after=20 regenerate=0 keep=0
while [ $# -gt 0 ]; do
    case "$1" in
        --rows) rows=$2; shift 2 ;;
        --kill-after) kill_after=$2; shift 2 ;;
        --regenerate) regenerate=1; shift ;;
        --keep) keep=1; shift ;;
        -h|--help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "huge-transaction.sh: unknown option $1 (see --help)" ;;
    esac
done
for v in rows kill_after; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || die "huge-transaction.sh: --${v//_/-} wants a non-negative integer"
done
[ "$SHARDREP_SANDBOX_DIR" != /tmp/shardrep-sandbox ] || die "refusing to use the shared test sandbox directory"
[ "$SANDBOX_MASTER_PORT" != 13306 ] || die "refusing to use the shared test sandbox port"
bin=${SHARDREP_BIN:-$root/target/release/shardrep}
[ -x "$bin" ] || die "$bin is missing: cargo build --release"

results=${BENCH_RESULTS:-$root/bench/results/huge}
dir=$results/run
state=$SHARDREP_SANDBOX_DIR/huge-backlog.env
master_port=$SANDBOX_MASTER_PORT
replica_port=$((SANDBOX_MASTER_PORT + 1))
svc=huge

msql() { sandbox_sql master -N -B "$@"; }
rsql() { sandbox_sql replica1 -N -B "$@"; }
master_pos() { msql -e 'SHOW MASTER STATUS' | awk '{print $1 ":" $2}'; }
binlog_bytes_since() {
    local file=${1%:*} pos=${1#*:}
    msql -e 'SHOW BINARY LOGS' | awk -v f="$file" -v p="$pos" '$1 >= f {s += $2} END {print s - p}'
}
table_ddl="CREATE TABLE huge.t (id BIGINT NOT NULL PRIMARY KEY, k INT NOT NULL,
    a VARCHAR(100) NOT NULL, b VARCHAR(100) NOT NULL) ENGINE=InnoDB"

generate() {
    say "generate: sandbox $SHARDREP_SANDBOX_DIR (master $master_port, replica1 $replica_port)"
    "$root/scripts/sandbox.sh" up 1 >/dev/null
    rsql -e 'STOP SLAVE'
    rm -f "$SHARDREP_SANDBOX_DIR/replica1/native-replication"
    for server in master replica1; do
        sandbox_sql "$server" -e "SET sql_log_bin = 0; DROP DATABASE IF EXISTS huge;
            CREATE DATABASE huge; $table_ddl"
    done
    msql -e 'FLUSH BINARY LOGS'
    local start insert_bytes update_bytes saved_flush saved_sync p
    start=$(master_pos)
    saved_flush=$(msql -e 'SELECT @@innodb_flush_log_at_trx_commit')
    saved_sync=$(msql -e 'SELECT @@sync_binlog')
    msql -e 'SET GLOBAL innodb_flush_log_at_trx_commit = 0; SET GLOBAL sync_binlog = 0'
    say "generate: INSERT of $rows rows in one transaction"
    msql -e "INSERT INTO huge.t SELECT seq, seq % 1000, REPEAT(MD5(seq), 3), REPEAT(SHA1(seq), 2)
        FROM huge.seq_1_to_$rows"
    insert_bytes=$(binlog_bytes_since "$start")
    p=$(master_pos)
    say "generate: UPDATE of every row in one transaction"
    msql -e "UPDATE huge.t SET k = k + 1, a = REPEAT(SHA1(id), 2)"
    update_bytes=$(binlog_bytes_since "$p")
    msql -e "SET GLOBAL innodb_flush_log_at_trx_commit = $saved_flush; SET GLOBAL sync_binlog = $saved_sync"
    cat > "$state" <<ENV
start=$start
end=$(master_pos)
rows=$rows
insert_bytes=$insert_bytes
update_bytes=$update_bytes
ENV
    say "generate: done: $(tr '\n' ' ' < "$state")"
}

# Runs `shardrep run --until-idle`, sampling its memory; kills it (SIGKILL)
# when `kill_when` (a command) succeeds. Prints "peak_kb elapsed_s exit".
sampled_run() {
    local label=$1 kill_when=$2
    local pid peak=0 hwm=0 rss h t0 rc=0 n=0 killed=no
    t0=$(date +%s.%N)
    RUST_LOG=${RUST_LOG:-info} "$bin" run --config "$dir/shardrep.toml" --until-idle \
        >> "$dir/shardrep-$label.out" 2>> "$dir/shardrep-$label.err" &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        if read -r rss h < <(awk '/^VmRSS:/ {r=$2} /^VmHWM:/ {h=$2} END {print r+0, h+0}' \
            "/proc/$pid/status" 2>/dev/null); then
            [ "${rss:-0}" -le "$peak" ] || peak=$rss
            [ "${h:-0}" -le "$hwm" ] || hwm=$h
            printf '%s\t%.1f\t%s\t%s\n' "$label" "$(echo "$(date +%s.%N) - $t0" | bc)" "$rss" "$h" \
                >> "$dir/rss.tsv"
        fi
        if [ "$killed" = no ] && [ -n "$kill_when" ] && eval "$kill_when"; then
            say "$label: kill -9 during the UPDATE's apply"
            kill -KILL "$pid" 2>/dev/null || true
            killed=yes
        fi
        n=$((n + 1))
        sleep 0.5
    done
    wait "$pid" || rc=$?
    [ "$hwm" -le "$peak" ] || peak=$hwm
    echo "$peak $(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)") $rc"
}

if [ "$regenerate" = 1 ] || [ ! -s "$state" ] || ! grep -q "^rows=$rows\$" "$state"; then
    generate
else
    "$root/scripts/sandbox.sh" up 1 >/dev/null
    rsql -e 'STOP SLAVE'
    say "reusing the recorded transactions: $(tr '\n' ' ' < "$state")"
fi
# shellcheck disable=SC1090
. "$state"

rm -rf "$dir"; mkdir -p "$dir"
printf 'run\tt_secs\tvmrss_kb\tvmhwm_kb\n' > "$dir/rss.tsv"
say "resetting the replica's huge.t and the catalog shardrep_$svc"
rsql -e "SET sql_log_bin = 0; DROP DATABASE IF EXISTS shardrep_$svc; TRUNCATE TABLE huge.t"
echo "shard_id master critical
huge $svc false" > "$dir/shard.map"
cat > "$dir/shardrep.toml" <<TOML
[service]
name = "$svc"
[source]
kind = "live"
host = "$SANDBOX_HOST"
port = $master_port
user = "$SANDBOX_USER"
password = "$SANDBOX_PASSWORD"
server_id = 4243
start = "$start"
[replica]
host = "$SANDBOX_HOST"
port = $replica_port
user = "$SANDBOX_USER"
password = "$SANDBOX_PASSWORD"
[queue]
dir = "$dir/queue"
[shard_filter]
map_file = "$dir/shard.map"
[control]
socket = "$dir/control.sock"
TOML
"$bin" check-config --config "$dir/shardrep.toml" >/dev/null

# The UPDATE is the second large transaction the log says is applying.
update_applying_for() {
    local since
    since=$(grep -c 'applying it as a stream' "$dir/shardrep-live.err" 2>/dev/null || true)
    [ "${since:-0}" -ge 2 ] || return 1
    [ -n "${update_seen:-}" ] || update_seen=$(date +%s)
    [ $(( $(date +%s) - update_seen )) -ge "$kill_after" ]
}
kill_when=
[ "$kill_after" = 0 ] || kill_when=update_applying_for
say "live: extract and apply from the master (kill -9 after ${kill_after}s of the UPDATE's apply)"
read -r live_peak live_secs live_rc < <(sampled_run live "$kill_when")
queue_peak=0 queue_secs=0 queue_rc=0
if [ "$kill_after" != 0 ]; then
    say "queue: restart; the UPDATE is applied again from the queue"
    read -r queue_peak queue_secs queue_rc < <(sampled_run queue "")
fi
m=$(msql -e 'CHECKSUM TABLE huge.t' | awk '{print $2}')
r=$(rsql -e 'CHECKSUM TABLE huge.t' | awk '{print $2}')
equal=$([ "$m" = "$r" ] && echo yes || echo NO)
fragments=$(grep -ho 'fragments=[0-9]*' "$dir"/shardrep-*.err | tr '\n' ' ' || true)
queue_mb=$(du -sm "$dir/queue" | cut -f1)
result="rows=$rows insert_binlog_mib=$((insert_bytes / 1048576)) update_binlog_mib=$((update_bytes / 1048576))"
result="$result live_peak_rss_mib=$((live_peak / 1024)) live_s=$live_secs live_exit=$live_rc"
result="$result queue_peak_rss_mib=$((queue_peak / 1024)) queue_s=$queue_secs queue_exit=$queue_rc"
result="$result queue_mib=$queue_mb committed_fragments=[${fragments% }] tables_equal=$equal"
result="$result under_256mib=$([ "$live_peak" -le 262144 ] && [ "$queue_peak" -le 262144 ] && echo yes || echo NO)"
echo "$result" | tee "$results/result.txt"
[ "$keep" = 1 ] || rm -rf "$dir/queue"
[ "$equal" = yes ]
