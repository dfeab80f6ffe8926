#!/usr/bin/env bash
# The main job, on a fresh machine: install what is missing, build shardrep,
# start the sandbox (master + native replica), load a sharded sysbench
# dataset (8 schemas), then:
#   1. native baseline: stop the replica, run a write load, time native
#      single-threaded catch-up;
#   2. shardrep: stop the replica again, run the same load, take the replica
#      over with shardrep (8 channels), show `shardrepctl status` while it
#      catches up, go offline cleanly and hand back to native replication;
#   3. run more load under native replication and verify master and replica
#      with CHECKSUM TABLE.
# Prints a report and exits non-zero if anything differs.
#
# Usage: scripts/quickstart.sh [--schemas N] [--load-secs S] [--table-size N] [--channels N]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

schemas=8 load_secs=20 table_size=10000 channels=8
while [ $# -gt 0 ]; do
    case "$1" in
        --schemas) schemas=$2 ;;
        --load-secs) load_secs=$2 ;;
        --table-size) table_size=$2 ;;
        --channels) channels=$2 ;;
        *) die "quickstart.sh: unknown option $1" ;;
    esac
    shift 2
done

if ! command -v mariadbd >/dev/null || ! command -v sysbench >/dev/null; then
    say "installing mariadb-server and sysbench from Debian's packages"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server sysbench >/dev/null
fi
command -v cargo >/dev/null || die "cargo is needed to build shardrep (https://rustup.rs)"

say "building shardrep (release)"
cargo build --release --quiet
# Where cargo put the binaries: CARGO_TARGET_DIR when it is set.
bin=${CARGO_TARGET_DIR:-target}/release
"$bin/shardrep" --version

say "starting the sandbox"
scripts/sandbox.sh up 1

list=$(for i in $(seq 1 "$schemas"); do printf 'sb%02d ' "$i"; done)
say "loading $schemas schemas ($list) with sysbench data"
scripts/workload.sh cleanup --schemas "$schemas"
scripts/workload.sh prepare --schemas "$schemas" --table-size "$table_size"

wait_replica() {   # wait until replica1 has executed the master's current GTID position
    local pos; pos=$(sandbox_sql master -N -B -e 'SELECT @@gtid_binlog_pos')
    local rc; rc=$(sandbox_sql replica1 -N -B -e "SELECT MASTER_GTID_WAIT('$pos', ${1:-600})")
    [ "$rc" = 0 ] || die "replica1 did not reach $pos"
}
master_pos() { sandbox_sql master -N -B -e 'SHOW MASTER STATUS' | awk '{print $1":"$2}'; }
load_txns() { workload_txns; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b - a}'; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN {printf "%.0f", (s > 0 ? n / s : 0)}'; }
json_field() { python3 -c 'import json,sys; v = json.loads(sys.argv[1]).get(sys.argv[2]); print("" if v is None else v)' "$1" "$2"; }

wait_replica
sandbox_sql replica1 -e 'START SLAVE'

# 1. Native baseline.
say "native baseline: stopping the replica so it falls behind"
sandbox_sql replica1 -e 'STOP SLAVE'
scripts/workload.sh run --schemas "$schemas" --time "$load_secs"
native_txns=$(load_txns)
say "native single-threaded replication catching up ($native_txns transactions)"
t0=$(date +%s.%N)
sandbox_sql replica1 -e 'START SLAVE'
wait_replica 3600
t1=$(date +%s.%N)
native_secs=$(elapsed "$t0" "$t1")

# 2. shardrep: takeover, parallel catch-up, clean offline, handback.
work=$PWD/target/quickstart
mkdir -p "$work"
service=quickstart
port_master=$(sandbox_port master)
port_replica=$(sandbox_port replica1)
{
    echo "shard_id master critical"
    for s in $list; do echo "$s $service false"; done
} > "$work/shard.map"
cat > "$work/shardrep.toml" <<TOML
# Written by scripts/quickstart.sh: service $service takes over replica1.
[service]
name = "$service"
[source]
kind = "live"
host = "$SANDBOX_HOST"
port = $port_master
user = "$SANDBOX_USER"
password_env = "SHARDREP_PASSWORD"
server_id = 101
start = "takeover"
[replica]
host = "$SANDBOX_HOST"
port = $port_replica
# replica1 runs on this host: apply through its Unix socket.
socket = "$SHARDREP_SANDBOX_DIR/replica1/mariadbd.sock"
user = "$SANDBOX_USER"
password_env = "SHARDREP_PASSWORD"
# replica1 binlogs what it applies (log_slave_updates), but no GTID
# topology reads that binlog here (no replicas of it, gtid_strict_mode
# off): blocks under its own GTIDs. The default, "auto", would pick
# "master" on it (each transaction under the master's GTID, the commits in
# order), which a failover candidate or a chained replica needs and which
# costs most of the speed (README, "The replica's binlog and GTIDs").
binlog_gtids = "own"
[queue]
dir = "$work/queue"
[apply]
channels = $channels
[shard_filter]
map_file = "$work/shard.map"
unknown_shard_policy = "accept"
[control]
socket = "$work/control.sock"
TOML
export SHARDREP_PASSWORD=$SANDBOX_PASSWORD
ctl() { "$bin/shardrepctl" --config "$work/shardrep.toml" "$@"; }
# A fresh service: no queue, no restart position, so it takes over.
rm -rf "$work/queue"
sandbox_sql replica1 -e "SET SESSION sql_log_bin = 0; DROP DATABASE IF EXISTS shardrep_$service"

say "shardrep: stopping the replica so it falls behind again"
sandbox_sql replica1 -e 'STOP SLAVE'
scripts/workload.sh run --schemas "$schemas" --time "$load_secs"
shardrep_txns=$(load_txns)
end=$(master_pos)
say "shardrep taking over replica1 with $channels channels ($shardrep_txns transactions to apply; master at $end)"
t0=$(date +%s.%N)
SHARDREP_LOG=${SHARDREP_LOG:-info} "$bin/shardrep" run --config "$work/shardrep.toml" 2> "$work/shardrep.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
    ctl services >/dev/null 2>&1 && break
    kill -0 $pid 2>/dev/null || { tail -20 "$work/shardrep.log"; die "shardrep exited"; }
    sleep 0.1
done
ctl wait --state ONLINE --timeout-secs 120 >/dev/null || { tail -20 "$work/shardrep.log"; die "shardrep did not go online"; }
# The catch-up's progress as a DBA follows it (a bar on a terminal, a
# line every 2 s otherwise), while this loop times the catch-up exactly
# and records each status for the ETA figure below.
echo "--- shardrepctl status --watch"
# (the binary itself, not the ctl function: a kill must reach it)
"$bin/shardrepctl" --config "$work/shardrep.toml" status --watch --interval-secs 2 &
watch_pid=$!
trap 'kill $pid $watch_pid 2>/dev/null || true' EXIT
: > "$work/catchup-status.jsonl"
while :; do
    json=$(ctl --json status) || { tail -20 "$work/shardrep.log"; die "shardrepctl status failed"; }
    printf '%s %s\n' "$(date +%s.%N)" "$json" >> "$work/catchup-status.jsonl"
    state=$(json_field "$json" state)
    [ "$state" = "OFFLINE:ERROR" ] && { ctl status; die "shardrep stopped on an error"; }
    [ "$(json_field "$json" appliedLastEventId)" = "$end" ] && break
    sleep 0.2
done
t1=$(date +%s.%N)
binlog_gtids=$(json_field "$json" binlogGtids)
kill $watch_pid 2>/dev/null || true
wait $watch_pid 2>/dev/null || true
echo
# The ETA shown when half of the backlog's bytes were applied, against
# the time the catch-up really took from there.
eta_figure=$(python3 - "$work/catchup-status.jsonl" "$t1" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1]):
    t, _, j = line.partition(" ")
    s = json.loads(j)
    rows.append((float(t), s.get("appliedLastSeqno"), s.get("maximumStoredSeqNo"), s.get("catchUpEtaSeconds")))
end = float(sys.argv[2])
total = rows[-1][2] if rows else None
# The first look at or past half of the backlog's transactions that shows
# an estimate.
at = next((r for r in rows if total and r[1] is not None and r[1] >= total / 2 and r[3] is not None and r[1] < total), None)
if at is None:
    print("not measured (no estimate between 50% and the end)")
else:
    real = end - at[0]
    print(f"at {100 * at[1] / total:.0f}%: {at[3]:.1f} s shown, {real:.1f} s taken (x{at[3] / real:.2f})")
PY
)
shardrep_secs=$(elapsed "$t0" "$t1")
echo "--- shardrepctl status"
ctl status
say "caught up: going offline cleanly and handing back to native replication"
ctl offline --timeout-secs 120
ctl handback --start-slave
kill -TERM $pid
wait $pid || die "shardrep did not stop cleanly (see $work/shardrep.log)"
trap - EXIT

# 3. Native replication continues.
say "more load under native replication after the handback"
scripts/workload.sh run --schemas "$schemas" --time 5
wait_replica 600
slave=$(sandbox_sql replica1 -e 'SHOW SLAVE STATUS\G')
echo "$slave" | grep -E 'Slave_(IO|SQL)_Running:|Last_Errno:'
echo "$slave" | grep -q 'Slave_SQL_Running: Yes' || die "native replication is not running after the handback"
echo "$slave" | grep -q 'Last_Errno: 0' || die "native replication has an error after the handback"

say "verifying master and replica1"
scripts/verify.sh master replica1 $list

native_rate=$(rate "$native_txns" "$native_secs")
shardrep_rate=$(rate "$shardrep_txns" "$shardrep_secs")
ratio=$(awk -v a="$shardrep_rate" -v b="$native_rate" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
echo
echo "== quickstart report"
printf '%-40s %s\n' "schemas" "$schemas"
printf '%-40s %s transactions in %s s (%s/s)\n' "native single-threaded catch-up" "$native_txns" "$native_secs" "$native_rate"
printf '%-40s %s transactions in %s s (%s/s)\n' "shardrep catch-up ($channels channels)" "$shardrep_txns" "$shardrep_secs" "$shardrep_rate"
printf '%-40s %sx\n' "shardrep / native (transactions/s)" "$ratio"
case "$binlog_gtids" in
    own) binlog_text="own: blocks under replica1's own GTIDs (no GTID topology reads its binlog here); the default \"auto\" picks \"master\" on a replica with log_slave_updates, slower (README)" ;;
    master) binlog_text="master: each transaction under the master's GTID, the commits in order (README)" ;;
    *) binlog_text=$binlog_gtids ;;
esac
printf '%-40s %s\n' "replica binlog ([replica] binlog_gtids)" "$binlog_text"
printf '%-40s %s\n' "catch-up ETA shown from 50% of the backlog" "$eta_figure"
printf '%-40s %s\n' "handback" "native replication running, Last_Errno 0"
printf '%-40s %s\n' "checksums master = replica1" "identical"
