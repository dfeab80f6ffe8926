#!/usr/bin/env bash
# Sharded sysbench workload on the sandbox master: one schema per shard
# (sb01, sb02, ...), each with its own oltp_read_write tables, and one
# concurrent sysbench process per schema when running.
#
# Usage: scripts/workload.sh prepare|run|cleanup [options]
#   --schemas N          number of schemas (default 8)
#   --tables N           tables per schema (default 1)
#   --table-size N       rows per table (default 10000)
#   --time SECS          run: seconds of load (default 10)
#   --threads N          run: sysbench threads per schema (default 1)
#   --hot-threads N      run: sysbench threads of schema sb01, the hot one
#                        (default: --threads); the others run --threads
#   --index-updates N    run: oltp_read_write --index-updates (default 4)
#   --non-index-updates N  run: --non-index-updates (default 2)
#   --server NAME        sandbox server to load (default master)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

action=${1:-}; shift || true
schemas=8 tables=1 table_size=10000 time=10 threads=1 hot_threads='' index_updates=4 non_index_updates=2 server=master
while [ $# -gt 0 ]; do
    case "$1" in
        --schemas) schemas=$2 ;;
        --tables) tables=$2 ;;
        --table-size) table_size=$2 ;;
        --time) time=$2 ;;
        --threads) threads=$2 ;;
        --hot-threads) hot_threads=$2 ;;
        --index-updates) index_updates=$2 ;;
        --non-index-updates) non_index_updates=$2 ;;
        --server) server=$2 ;;
        *) die "workload.sh: unknown option $1" ;;
    esac
    shift 2
done
hot_threads=${hot_threads:-$threads}
for v in schemas tables table_size time threads hot_threads; do
    [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "workload.sh: --${v//_/-} wants a positive integer, got '${!v}'"
done
command -v sysbench >/dev/null || die "sysbench is not installed (apt-get install -y sysbench)"
port=$(sandbox_port "$server")

schema_name() { printf 'sb%02d' "$1"; }

sb() {
    local db=$1; shift
    sysbench oltp_read_write --db-driver=mysql --mysql-host="$SANDBOX_HOST" --mysql-port="$port" \
        --mysql-user="$SANDBOX_USER" --mysql-password="$SANDBOX_PASSWORD" --mysql-db="$db" \
        --tables="$tables" --table-size="$table_size" "$@"
}

case "$action" in
    prepare)
        for i in $(seq 1 "$schemas"); do
            db=$(schema_name "$i")
            sandbox_sql "$server" -e "CREATE DATABASE IF NOT EXISTS \`$db\`"
            sb "$db" prepare >/dev/null &
        done
        wait
        say "prepared $schemas schemas x $tables table(s) x $table_size rows on $server"
        ;;
    run)
        # Only this run's logs: a count never includes an earlier run's.
        logs=$(workload_log_dir)
        rm -rf "$logs"; mkdir -p "$logs"
        pids=()
        for i in $(seq 1 "$schemas"); do
            db=$(schema_name "$i")
            n=$threads
            [ "$i" != 1 ] || n=$hot_threads
            sb "$db" --threads="$n" --time="$time" --report-interval=0 \
                --index-updates="$index_updates" --non-index-updates="$non_index_updates" \
                run > "$logs/$db.log" 2>&1 &
            pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p" || die "a sysbench run failed; see $logs/*.log"; done
        txns=$(workload_txns)
        say "ran $time s of oltp_read_write on $schemas schemas: $txns transactions"
        # Each schema's share of the load (sb01's differs with --hot-threads).
        say "threads: sb01 $hot_threads$([ "$schemas" = 1 ] || echo ", the others $threads"); per schema: $(workload_shares |
            awk '{printf "%s%s %d (%.1f%%)", (NR > 1 ? ", " : ""), $1, $2, $3}')"
        ;;
    cleanup)
        for i in $(seq 1 "$schemas"); do
            sandbox_sql "$server" -e "DROP DATABASE IF EXISTS \`$(schema_name "$i")\`"
        done
        ;;
    *) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
