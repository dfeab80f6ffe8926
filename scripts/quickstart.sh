#!/usr/bin/env bash
# The main job, on a fresh machine: install what is missing, build shardrep,
# start the sandbox (master + native replica), load a sharded sysbench
# dataset, let the native replica fall behind under a write load, catch up,
# and verify master and replica with CHECKSUM TABLE.
#
# Today shardrep cannot take over a native replica yet (takeover, handback
# and the control CLI are still to come): this run measures the native
# single-threaded catch-up that shardrep's will be compared with, and says so.
#
# Usage: scripts/quickstart.sh [--schemas N] [--load-secs S] [--table-size N]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

schemas=8 load_secs=20 table_size=10000
while [ $# -gt 0 ]; do
    case "$1" in
        --schemas) schemas=$2 ;;
        --load-secs) load_secs=$2 ;;
        --table-size) table_size=$2 ;;
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
./target/release/shardrep --version

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
wait_replica

say "stopping the replica's SQL thread so it falls behind"
sandbox_sql replica1 -e 'STOP SLAVE SQL_THREAD'
start_bytes=$(sandbox_sql master -N -B -e 'SHOW MASTER STATUS' | awk '{print $1":"$2}')
scripts/workload.sh run --schemas "$schemas" --time "$load_secs"
end=$(sandbox_sql master -N -B -e 'SHOW MASTER STATUS' | awk '{print $1":"$2}')
txns=$(awk '/transactions:/ {s += $2} END {print s + 0}' "${TMPDIR:-/tmp}"/shardrep-workload-sb*.log)

echo
echo "shardrep cannot take over a native replica and hand it back yet, so this run"
echo "measures native single-threaded catch-up only (the baseline shardrep must beat)."
echo

say "native replication catching up from $start_bytes to $end ($txns transactions)"
t0=$(date +%s.%N)
sandbox_sql replica1 -e 'START SLAVE SQL_THREAD'
wait_replica 3600
t1=$(date +%s.%N)

say "verifying master and replica1"
scripts/verify.sh master replica1 $list

secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
rate=$(awk -v n="$txns" -v s="$secs" 'BEGIN {printf "%.0f", (s > 0 ? n / s : 0)}')
echo
echo "== quickstart report"
printf '%-36s %s\n' "schemas" "$schemas"
printf '%-36s %s\n' "backlog (transactions)" "$txns"
printf '%-36s %s s (%s transactions/s)\n' "native single-threaded catch-up" "$secs" "$rate"
printf '%-36s %s\n' "shardrep catch-up" "not implemented yet"
printf '%-36s %s\n' "checksums master = replica1" "identical"
