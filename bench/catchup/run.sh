#!/usr/bin/env bash
# Catch-up benchmark: how fast does a lagging replica catch up with native
# single-threaded replication, MariaDB's parallel replication (conservative
# and optimistic) and shardrep (block commit on and off)? Every mode starts
# from the same recorded master position on an identical replica, and ends
# with a CHECKSUM TABLE comparison against the master. See
# bench/catchup/README.md.
#
# Usage: bench/catchup/run.sh [--quick] [--setting equal|hot|skew] [options]
#   --quick              8 schemas, small tables, 30 s of load, flush=1 only,
#                        the cache-resident data only (a few minutes)
#   --setting NAME       a preset of the load; options given explicitly win:
#                          equal  8 schemas x 1 table, 1 sysbench thread each
#                                 (the defaults: today's setting)
#                          hot    one hot schema: --schemas 1 --tables 8
#                                 --threads-per-schema 8 (threads and channels 8)
#                          skew   8 schemas x 1 table, sb01 with --hot-threads 12
#                                 and the others 1 thread: sb01 takes about 60%
#                                 of the transactions on a 2-core machine
#   --schemas N          schemas sb01..sbNN, one sysbench per schema (default 8)
#   --threads-per-schema N  sysbench threads per schema (default 1)
#   --hot-threads N      sysbench threads of sb01 (default: --threads-per-schema)
#   --threads T          MariaDB parallel threads (default: = schemas; 8 with
#                        one schema, whose parallelism is inside it)
#   --channels C         shardrep channels (default: = schemas; 8 with one schema)
#   --time SECS          seconds of sysbench load on the master (default 120)
#   --table-size N       rows per table, cache-resident data (default 100000)
#   --io-table-size N    rows per table, I/O-bound data (default 1000000)
#   --tables N           sysbench tables per schema (default 1)
#   --data LIST          data settings to run: "cache io" (default both)
#   --durability LIST    replica durability: "2 1" (default both); 2 =
#                        innodb_flush_log_at_trx_commit=2, sync_binlog=0;
#                        1 = innodb_flush_log_at_trx_commit=1, sync_binlog=1
#   --replica-binlog LIST  the replica's binlog: "on" (default: log_bin and
#                        log_slave_updates, sync_binlog as --durability says),
#                        "off" (no binlog on the replica), or "on off" (both)
#   --modes LIST         default "native conservative optimistic shardrep shardrep-noblock";
#                        also shardrep-compound ([apply] compound_blocks = true),
#                        shardrep-check (shardrep, with `shardrepctl check` of
#                        every table started with the catch-up: its catch-up
#                        time beside shardrep's, and the check's rows/s and
#                        result in check.txt; the service is stopped once
#                        both are done),
#                        shardrep-row and shardrep-shard (shardrep with
#                        [apply] parallelism = "row" or "shard"; shardrep itself
#                        runs the default, "row"), shardrep-binlog and
#                        shardrep-sql (shardrep with [apply] method = "binlog"
#                        or "sql"), shardrep-gtid-master, shardrep-gtid-own and
#                        shardrep-gtid-off (shardrep with [replica]
#                        binlog_gtids = "master", "own" or "off"; shardrep
#                        itself runs the default, "auto": "master" with
#                        --replica-binlog on, else "off"); shardrep-base runs the
#                        binary named by CATCHUP_BASE_SHARDREP with the
#                        settings of shardrep: the same data and table for a
#                        before/after comparison of two builds
#   --shardrep-opt K=V   write K = V into [apply] of every shardrep mode, e.g.
#                        block_commit_txns=50 (repeatable; a value that is not
#                        a number, true/false or quoted is written as a string;
#                        a mode's own key wins: block_commit_txns of
#                        shardrep-noblock, parallelism of shardrep-row and shardrep-shard)
#   --assign hash|even   shardrep channel assignment: the default hash of the
#                        shard name (default), or sbNN -> channel (NN-1) mod C
#   --bucket SECS        plot buckets (default 10; 2 with --quick), always
#                        drawn as binlog MB applied per 10 s
#   --rotate-secs S      FLUSH BINARY LOGS on the master every S s of the load,
#                        so the backlog spans several binlog files (default 0: never)
#   --timeout SECS       give up on one catch-up after this long (default 3600)
#   --stall SECS         ... or when nothing is applied for this long (default 300)
#   --keep               leave the benchmark's servers running (and their
#                        datadirs, the golden copy) at the end
#
# Environment: CATCHUP_DIR (default /tmp/shardrep-catchup) holds the servers,
# the golden datadir and the shardrep queues; CATCHUP_PORT (default 25306) is
# the master's port, the replica uses CATCHUP_PORT+1; CATCHUP_BASE_SHARDREP a
# `shardrep` binary of another build for mode shardrep-base (e.g. a copy of
# target/release/shardrep built at the commit before a change); CATCHUP_SHARDREP
# the binary of modes shardrep, shardrep-noblock, ... (default: build
# target/release/shardrep; a wrapper script that execs a binary works too,
# e.g. under `perf stat`); CATCHUP_RESULTS (default
# bench/results/catchup-<timestamp>) the output; CATCHUP_CACHE_BUFFER_POOL (1G),
# CATCHUP_IO_BUFFER_POOL (64M), CATCHUP_MASTER_BUFFER_POOL (2G) the replica's
# and master's innodb_buffer_pool_size; CATCHUP_SERVER_ID (25401) shardrep's
# server id on the master.
#
# Installs what it needs with apt-get when missing (mariadb-server, sysbench,
# gnuplot-nox for the plot) and builds shardrep in release mode.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//'; }

quick=0 schemas=8 threads='' channels='' load_secs=120 table_size=100000 io_table_size=1000000
tables=1 data_list="cache io" durability_list="2 1" assign=hash timeout=3600 stall_secs=300 bucket=10 rotate_secs=0 keep=0
threads_per_schema=1 hot_threads='' binlog_list=on preset='' shardrep_opts=()
modes="native conservative optimistic shardrep shardrep-noblock"
all_modes="native conservative optimistic shardrep shardrep-noblock shardrep-compound shardrep-row shardrep-shard shardrep-binlog shardrep-sql shardrep-gtid-master shardrep-gtid-own shardrep-gtid-off shardrep-base shardrep-check"
# sb01's sysbench threads in --setting skew: with the other 7 schemas at one
# thread each, sb01 took about 60% of the transactions on a 2-core machine
# (measured: see bench/catchup/README.md).
skew_hot_threads=12
command_line=$(printf "%q " "$0" "$@"); command_line=${command_line% }
explicit=" "
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1; shift; continue ;;
        --keep) keep=1; shift; continue ;;
        -h|--help) usage; exit 0 ;;
        --schemas|--threads|--channels|--time|--table-size|--io-table-size|--tables|--data|--durability|--modes|--assign|--timeout|--stall|--bucket|--rotate-secs) ;;
        --setting|--threads-per-schema|--hot-threads|--replica-binlog|--shardrep-opt) ;;
        *) echo "catchup: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    [ $# -ge 2 ] || { echo "catchup: $1 needs a value (see --help)" >&2; exit 2; }
    case "$1" in
        --schemas) schemas=$2 ;;
        --threads) threads=$2 ;;
        --channels) channels=$2 ;;
        --time) load_secs=$2 ;;
        --table-size) table_size=$2 ;;
        --io-table-size) io_table_size=$2 ;;
        --tables) tables=$2 ;;
        --data) data_list=$2 ;;
        --durability) durability_list=$2 ;;
        --modes) modes=$2 ;;
        --assign) assign=$2 ;;
        --timeout) timeout=$2 ;;
        --stall) stall_secs=$2 ;;
        --bucket) bucket=$2 ;;
        --rotate-secs) rotate_secs=$2 ;;
        --setting) preset=$2 ;;
        --threads-per-schema) threads_per_schema=$2 ;;
        --hot-threads) hot_threads=$2 ;;
        --replica-binlog) binlog_list=$2 ;;
        --shardrep-opt) shardrep_opts+=("$2") ;;
        *) echo "catchup: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    explicit+="$1 "
    shift 2
done
# A preset sets what was not given explicitly; --quick leaves what a preset set.
preset_value() {  # OPTION VARIABLE VALUE
    [[ "$explicit" == *" $1 "* ]] && return 0
    printf -v "$2" '%s' "$3"
    explicit+="$1 "
}
case "$preset" in
    '') ;;
    equal)
        preset_value --schemas schemas 8
        preset_value --tables tables 1
        preset_value --threads-per-schema threads_per_schema 1 ;;
    hot)
        preset_value --schemas schemas 1
        preset_value --tables tables 8
        preset_value --threads-per-schema threads_per_schema 8 ;;
    skew)
        preset_value --schemas schemas 8
        preset_value --tables tables 1
        preset_value --threads-per-schema threads_per_schema 1
        preset_value --hot-threads hot_threads "$skew_hot_threads" ;;
    *) echo "catchup: --setting takes equal, hot or skew, got '$preset'" >&2; exit 2 ;;
esac
if [ "$quick" = 1 ]; then
    # Quick defaults; options given explicitly (or by --setting) still win.
    [[ "$explicit" == *" --schemas "* ]] || schemas=8
    [[ "$explicit" == *" --time "* ]] || load_secs=30
    [[ "$explicit" == *" --table-size "* ]] || table_size=10000
    [[ "$explicit" == *" --data "* ]] || data_list=cache
    [[ "$explicit" == *" --durability "* ]] || durability_list=1
    [[ "$explicit" == *" --bucket "* ]] || bucket=2
fi
# Parallel width: one per schema, or 8 for a single schema (its parallelism
# is inside it: the hot setting's 8 sysbench threads).
default_width=$schemas
[ "$schemas" != 1 ] || default_width=8
threads=${threads:-$default_width}
channels=${channels:-$default_width}
hot_threads=${hot_threads:-$threads_per_schema}
for v in schemas threads channels load_secs table_size io_table_size tables timeout stall_secs bucket threads_per_schema hot_threads; do
    [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "catchup: ${v//_/-} wants a positive integer, got '${!v}'" >&2; exit 2; }
done
if [ "$schemas" = 1 ]; then
    load_threads="$hot_threads sysbench thread(s)"
else
    load_threads="sysbench threads: sb01 $hot_threads, the others $threads_per_schema"
fi
[[ "$rotate_secs" =~ ^[0-9]+$ ]] || { echo "catchup: --rotate-secs wants an integer, got '$rotate_secs'" >&2; exit 2; }
[ "$schemas" -le 99 ] || { echo "catchup: at most 99 schemas" >&2; exit 2; }
for d in $data_list; do case "$d" in cache|io) ;; *) echo "catchup: --data takes cache and/or io, got '$d'" >&2; exit 2 ;; esac; done
for d in $durability_list; do case "$d" in 1|2) ;; *) echo "catchup: --durability takes 1 and/or 2, got '$d'" >&2; exit 2 ;; esac; done
for b in $binlog_list; do case "$b" in on|off) ;; *) echo "catchup: --replica-binlog takes on and/or off, got '$b'" >&2; exit 2 ;; esac; done
[ -n "${binlog_list// /}" ] || { echo "catchup: --replica-binlog wants on and/or off" >&2; exit 2; }
for m in $modes; do
    case " $all_modes " in *" $m "*) ;;
        *) echo "catchup: unknown mode '$m' (modes: $all_modes, separated by spaces)" >&2; exit 2 ;; esac
done
# --shardrep-opt KEY=VALUE as TOML lines of [apply] ("key = value").
apply_extra=()
for o in ${shardrep_opts[@]+"${shardrep_opts[@]}"}; do
    k=${o%%=*} v=${o#*=}
    [[ "$o" == *=* && "$k" =~ ^[a-z][a-z0-9_]*$ && -n "$v" ]] \
        || { echo "catchup: --shardrep-opt wants KEY=VALUE with a lowercase key of [apply], got '$o'" >&2; exit 2; }
    case "$k" in
        channels) echo "catchup: --shardrep-opt channels: use --channels (the width is recorded with the results)" >&2; exit 2 ;;
        shard_list) echo "catchup: --shardrep-opt shard_list: use --assign" >&2; exit 2 ;;
    esac
    for e in ${apply_extra[@]+"${apply_extra[@]}"}; do
        [ "${e%% = *}" != "$k" ] || { echo "catchup: --shardrep-opt $k given twice" >&2; exit 2; }
    done
    if [[ ! "$v" =~ ^(-?[0-9]+(\.[0-9]+)?|true|false|\".*\"|\'.*\'|\[.*\])$ ]]; then
        v=${v//\\/\\\\}; v=\"${v//\"/\\\"}\"
    fi
    apply_extra+=("$k = $v")
done
case "$assign" in hash|even) ;; *) echo "catchup: --assign takes hash or even" >&2; exit 2 ;; esac

# The benchmark's own servers: never the shared test sandbox.
export SHARDREP_SANDBOX_DIR=${CATCHUP_DIR:-/tmp/shardrep-catchup}
export SANDBOX_MASTER_PORT=${CATCHUP_PORT:-25306}
[ "$SHARDREP_SANDBOX_DIR" != /tmp/shardrep-sandbox ] || { echo "catchup: refusing the shared sandbox directory" >&2; exit 2; }
case "$SHARDREP_SANDBOX_DIR" in /*/*) ;; *) echo "catchup: CATCHUP_DIR must be an absolute path below a directory (it is removed at the end), got '$SHARDREP_SANDBOX_DIR'" >&2; exit 2 ;; esac
[ "$SANDBOX_MASTER_PORT" != 13306 ] || { echo "catchup: refusing the shared sandbox port" >&2; exit 2; }
export SANDBOX_REPLICA_USE_GTID=no
master_pool=${CATCHUP_MASTER_BUFFER_POOL:-2G}
cache_pool=${CATCHUP_CACHE_BUFFER_POOL:-1G}
io_pool=${CATCHUP_IO_BUFFER_POOL:-64M}
shardrep_server_id=${CATCHUP_SERVER_ID:-25401}
. "$root/scripts/lib.sh"
base=$SHARDREP_SANDBOX_DIR

stamp=$(date +%Y%m%d-%H%M%S)
results=${CATCHUP_RESULTS:-$root/bench/results/catchup-$stamp}
mkdir -p "$results" "$base"
results=$(cd "$results" && pwd)
logs=$results/logs
mkdir -p "$logs"
# sysbench's per-schema logs (scripts/workload.sh writes them to $TMPDIR).
export TMPDIR=$base/tmp
mkdir -p "$TMPDIR"

# ---------------------------------------------------------------- setup
need=()
command -v mariadbd >/dev/null && command -v mariadb >/dev/null || need+=(mariadb-server)
command -v sysbench >/dev/null || need+=(sysbench)
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
if [ "${#need[@]}" -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing ${need[*]}; installing needs root (apt-get install -y ${need[*]})"
    say "installing ${need[*]} from Debian's packages (apt-get) for the benchmark and its plot"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
command -v cargo >/dev/null || die "cargo is needed to build shardrep (https://rustup.rs)"
shardrep=${CATCHUP_SHARDREP:-}
if [ -z "$shardrep" ]; then
    say "building shardrep (release)"
    cargo build --release --quiet --bin shardrep
    shardrep=$root/target/release/shardrep
fi
[ -x "$shardrep" ] || die "CATCHUP_SHARDREP=$shardrep is not an executable file"
shardrep=$(cd "$(dirname "$shardrep")" && pwd)/$(basename "$shardrep")
shardrepctl=$root/target/release/shardrepctl
if [[ " $modes " == *" shardrep-check "* ]]; then
    say "building shardrepctl (release)"
    cargo build --release --quiet --bin shardrepctl
fi
base_shardrep=${CATCHUP_BASE_SHARDREP:-}
if [[ " $modes " == *" shardrep-base "* ]]; then
    [ -n "$base_shardrep" ] || die "mode shardrep-base runs the binary named by CATCHUP_BASE_SHARDREP, which is not set"
    [ -x "$base_shardrep" ] || die "CATCHUP_BASE_SHARDREP=$base_shardrep is not an executable file"
    base_shardrep=$(cd "$(dirname "$base_shardrep")" && pwd)/$(basename "$base_shardrep")
fi

sandbox() { "$root/scripts/sandbox.sh" "$@"; }
msql() { sandbox_sql master -N -B "$@"; }
rsql() { sandbox_sql replica1 -N -B "$@"; }
schema_list=$(for i in $(seq 1 "$schemas"); do printf 'sb%02d ' "$i"; done)

shardrep_pid=''
cleanup() {
    local rc=$?
    if [ -n "$shardrep_pid" ] && kill -0 "$shardrep_pid" 2>/dev/null; then
        kill -TERM "$shardrep_pid" 2>/dev/null || true
        wait "$shardrep_pid" 2>/dev/null || true
    fi
    for n in master replica1; do
        [ -f "$base/$n/error.log" ] && cp "$base/$n/error.log" "$logs/$n-error.log" 2>/dev/null || true
    done
    if [ "$keep" = 0 ]; then
        say "stopping the benchmark's servers and removing $base (their error logs are in $logs); --keep leaves them"
        sandbox destroy >/dev/null 2>&1 || true
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Stop one server of the benchmark by its pid file (sandbox.sh down stops all).
stop_server() {
    local name=$1 pidfile pid i
    pidfile=$base/$name/mariadbd.pid
    [ -s "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid"
    for i in $(seq 1 1200); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    die "$name (pid $pid) did not stop within 120 s"
}

# Bytes of the run's binlog up to FILE:POS: the master's binlog files of the
# run and their sizes are in $binlog_sizes ("file size" lines, in order).
offset_of() {  # FILE POS -> bytes since the start position
    awk -v f="$1" -v p="$2" -v sf="$start_file" -v sp="$start_pos" '
        $1 == f { found = 1; total += p; exit }
        { total += $2 }
        END { if (!found) { print -1; exit } print total - sp }' <<< "$binlog_sizes"
}

# ---------------------------------------------------------------- the master
# prepare_data SETTING TABLE_SIZE: a fresh master loaded with sysbench data, a
# cold copy of its datadir (the golden replica), then the load whose binlog
# every mode catches up with.
prepare_data() {
    local setting=$1 size=$2
    say "[$setting] fresh master in $base on port $SANDBOX_MASTER_PORT: $schemas schemas x $tables table(s) x $size rows"
    sandbox destroy >/dev/null 2>&1 || true
    mkdir -p "$base" "$TMPDIR"
    SANDBOX_INNODB_BUFFER_POOL_SIZE=$master_pool sandbox up 0 >/dev/null
    "$root/scripts/workload.sh" prepare --schemas "$schemas" --tables "$tables" --table-size "$size"
    local n
    n=$(msql -e "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA LIKE 'sb%' AND TABLE_NAME LIKE 'sbtest%'")
    [ "$n" = $((schemas * tables)) ] || die "sysbench prepare made $n tables, expected $((schemas * tables))"
    say "[$setting] cold copy of the master's datadir (the replicas start from it)"
    stop_server master
    rm -rf "$base/golden"
    cp -a "$base/master/data" "$base/golden"
    SANDBOX_INNODB_BUFFER_POOL_SIZE=$master_pool sandbox up 0 >/dev/null
    read -r start_file start_pos < <(msql -e 'SHOW MASTER STATUS' | cut -f1,2)
    start_gtid=$(msql -e 'SELECT @@gtid_binlog_pos')
    say "[$setting] start position $start_file:$start_pos (gtid $start_gtid); $load_secs s of oltp_read_write on $schemas schemas ($load_threads)"
    local rotator=''
    if [ "$rotate_secs" -gt 0 ]; then
        # Binlog rotations inside the backlog: every mode must follow them.
        ( while sleep "$rotate_secs"; do msql -e 'FLUSH BINARY LOGS' || exit 0; done ) &
        rotator=$!
    fi
    "$root/scripts/workload.sh" run --schemas "$schemas" --tables "$tables" --table-size "$size" \
        --time "$load_secs" --threads "$threads_per_schema" --hot-threads "$hot_threads" \
        --index-updates 4 --non-index-updates 2
    # Each schema's share of the load, from sysbench's counts (its logs go
    # with the results: the servers' directory is removed at the end).
    local shares
    shares=$(workload_shares)
    rm -rf "$logs/sysbench-$setting"
    cp -a "$(workload_log_dir)" "$logs/sysbench-$setting"
    if [ -n "$rotator" ]; then kill "$rotator" 2>/dev/null || true; wait "$rotator" 2>/dev/null || true; fi
    read -r end_file end_pos < <(msql -e 'SHOW MASTER STATUS' | cut -f1,2)
    end_gtid=$(msql -e 'SELECT @@gtid_binlog_pos')
    binlog_sizes=$(msql -e 'SHOW BINARY LOGS' | awk -v a="$start_file" -v b="$end_file" '$1 >= a && $1 <= b {print $1, $2}')
    end_bytes=$(offset_of "$end_file" "$end_pos")
    # Transactions: GTID sequence numbers of domain 0 (one server writes).
    local s e
    s=$(tr ',' '\n' <<< "$start_gtid" | awk -F- '$1 == 0 {print $3}')
    e=$(tr ',' '\n' <<< "$end_gtid" | awk -F- '$1 == 0 {print $3}')
    txns=$(( ${e:-0} - ${s:-0} ))
    binlog_mb=$(awk -v b="$end_bytes" 'BEGIN {printf "%.1f", b / 1e6}')
    say "[$setting] end position $end_file:$end_pos (gtid $end_gtid): $binlog_mb MB of binlog, $txns transactions"
    hot_share=$(awk '$1 == "sb01" {print $3; exit}' <<< "$shares")
    say "[$setting] per schema (sysbench transactions, share): $(awk '{printf "%s%s %d (%.1f%%)", (NR > 1 ? ", " : ""), $1, $2, $3}' <<< "$shares")"
    {
        cat <<TXT
setting=$setting preset=${preset:--} schemas=$schemas tables=$tables table_size=$size load_secs=$load_secs
threads_per_schema=$threads_per_schema hot_threads=$hot_threads ($load_threads)
start=$start_file:$start_pos start_gtid=$start_gtid
end=$end_file:$end_pos end_gtid=$end_gtid
binlog_bytes=$end_bytes transactions=$txns
TXT
        echo "# per schema: sysbench's transaction count and its share of the sum (%)"
        awk '{printf "schema=%s transactions=%d share=%.1f%%\n", $1, $2, $3}' <<< "$shares"
    } > "$results/load-$setting.txt"
}

# ---------------------------------------------------------------- the replica
# restore_replica DURABILITY POOL FLUSH_METHOD BINLOG: replica1 from the
# golden copy, started with these settings (BINLOG on: log_bin and
# log_slave_updates, sync_binlog=1 at durability 1; off: no binlog),
# native replication configured at the start position and stopped.
restore_replica() {
    local dur=$1 pool=$2 method=$3 binlog=$4 sync=0 log_bin=ON
    [ "$dur" = 1 ] && sync=1
    [ "$binlog" = on ] || log_bin=OFF
    stop_server replica1
    rm -rf "$base/replica1"
    mkdir -p "$base/replica1/binlog" "$base/replica1/relay"
    cp -a "$base/golden" "$base/replica1/data"
    SANDBOX_INNODB_FLUSH_LOG_AT_TRX_COMMIT=$dur SANDBOX_SYNC_BINLOG=$sync \
        SANDBOX_INNODB_BUFFER_POOL_SIZE=$pool SANDBOX_INNODB_FLUSH_METHOD=$method \
        SANDBOX_REPLICA_LOG_BIN=$log_bin sandbox up 1 >/dev/null
    local actual
    actual=$(rsql -e 'SELECT IF(@@log_bin, "on", "off")')
    [ "$actual" = "$binlog" ] || die "replica1 started with log_bin $actual, wanted $binlog"
    sandbox_sql replica1 <<SQL
CHANGE MASTER TO MASTER_HOST = '$SANDBOX_HOST', MASTER_PORT = $SANDBOX_MASTER_PORT,
    MASTER_USER = '$SANDBOX_REPL_USER', MASTER_PASSWORD = '$SANDBOX_REPL_PASSWORD',
    MASTER_USE_GTID = no, MASTER_LOG_FILE = '$start_file', MASTER_LOG_POS = $start_pos,
    MASTER_CONNECT_RETRY = 1;
SQL
}

now() { date +%s.%N; }
clk_tck=$(getconf CLK_TCK)
# CPU seconds (user + system) a process has used so far; empty when gone.
cpu_secs() { awk -v hz="$clk_tck" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat" 2>/dev/null || true; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}'; }

# Progress: one sample a second into $samples ("seconds bytes"); a line on
# stderr every 5 s.
sample() {  # T0 BYTES LABEL
    local t last
    t=$(elapsed "$1")
    printf '%s %s\n' "$t" "$2" >> "$samples"
    if [ "$2" != "${last_bytes:-}" ]; then last_bytes=$2 last_change=$t; fi
    last=${next_report:-0}
    if awk -v t="$t" -v l="$last" 'BEGIN {exit !(t >= l)}'; then
        next_report=$(awk -v t="$t" 'BEGIN {print int(t / 5) * 5 + 5}')
        say "$3: $(printf '%6.0f' "$t") s  $(awk -v b="$2" -v e="$end_bytes" 'BEGIN {printf "%7.1f / %.1f MB (%3.0f%%)", b / 1e6, e / 1e6, (e > 0 ? 100 * b / e : 100)}')"
    fi
}

# No growth of the applied position for $stall_secs seconds.
stalled() { awk -v t="$1" -v c="${last_change:-0}" -v m="$stall_secs" 'BEGIN {exit !(t - c > m)}'; }

# native_catchup THREADS PARALLEL_MODE LABEL: START SLAVE and poll until the
# SQL thread has executed up to the end position. Sets run_secs / run_error.
native_catchup() {
    local threads=$1 pmode=$2 label=$3 t0 status file pos bytes running errno errmsg last_sample=-1 t
    rsql -e "SET GLOBAL slave_parallel_threads = $threads; SET GLOBAL slave_parallel_mode = '$pmode'"
    next_report=0 last_bytes='' last_change=0
    t0=$(now)
    rsql -e 'START SLAVE'
    while :; do
        status=$(sandbox_sql replica1 -e 'SHOW SLAVE STATUS\G')
        file=$(awk -F': ' '/^ *Relay_Master_Log_File:/ {print $2}' <<< "$status")
        pos=$(awk -F': ' '/^ *Exec_Master_Log_Pos:/ {print $2}' <<< "$status")
        running=$(awk -F': ' '/^ *Slave_SQL_Running:/ {print $2}' <<< "$status")
        errno=$(awk -F': ' '/^ *Last_SQL_Errno:/ {print $2}' <<< "$status")
        bytes=$(offset_of "$file" "${pos:-0}")
        [ "$bytes" -ge 0 ] || bytes=0
        t=$(elapsed "$t0")
        if [ "$file" = "$end_file" ] && [ "${pos:-0}" -ge "$end_pos" ]; then
            run_secs=$t
            sample "$t0" "$end_bytes" "$label"
            break
        fi
        if [ "$running" != Yes ] && [ "${errno:-0}" != 0 ]; then
            errmsg=$(awk -F': ' '/^ *Last_SQL_Error:/ {sub(/^ *Last_SQL_Error: /, ""); print}' <<< "$status")
            run_error="SQL thread stopped at $file:$pos: error $errno: $errmsg"
            break
        fi
        if awk -v t="$t" -v m="$timeout" 'BEGIN {exit !(t > m)}'; then
            run_error="timeout after $timeout s at $file:$pos"
            break
        fi
        if stalled "$t"; then
            run_error="no progress for $stall_secs s at $file:$pos (Slave_SQL_Running=$running)"
            break
        fi
        if [ "${t%.*}" -gt "$last_sample" ]; then
            last_sample=${t%.*}
            sample "$t0" "$bytes" "$label"
        fi
        sleep 0.2
    done
    rsql -e 'STOP SLAVE' || true
}

# The minimum binlog position of shardrep's restart rows, as bytes applied.
shardrep_applied() {  # SERVICE
    local rows
    rows=$(rsql -e "SELECT event_id FROM \`shardrep_$1\`.restart_position" 2>/dev/null) || { echo 0; return; }
    [ -n "$rows" ] || { echo 0; return; }
    local min=-1 row f p b
    while IFS= read -r row; do
        if [ -z "$row" ]; then min=0; break; fi
        f=${row%:*} p=${row##*:}
        b=$(offset_of "$f" "$p")
        [ "$b" -ge 0 ] || b=0
        if [ "$min" -lt 0 ] || [ "$b" -lt "$min" ]; then min=$b; fi
    done <<< "$rows"
    [ "$min" -ge 0 ] || min=0
    echo "$min"
}

# The last N non-blank lines of shardrep's output FILE before a backtrace
# (RUST_BACKTRACE set in the environment appends one to the error), on one
# line, at most 600 characters.
error_text() {  # FILE N
    awk '/^Stack backtrace:/ {exit} /[^[:space:]]/' "$1" | tail -n "$2" | sed 's/^ *//' | paste -sd' ' | cut -c1-600
}

# The [replica] line of a shardrep mode that sets binlog_gtids.
replica_lines() {  # MODE
    case "$1" in
        shardrep-gtid-master) echo 'binlog_gtids = "master"' ;;
        shardrep-gtid-own) echo 'binlog_gtids = "own"' ;;
        shardrep-gtid-off) echo 'binlog_gtids = "off"' ;;
    esac
}

# The [apply] lines of a shardrep mode besides channels and shard_list: the
# mode's own (shardrep-noblock: block commit off; shardrep-row,
# shardrep-shard: that parallelism), then the --shardrep-opt lines whose key the mode does not set.
apply_lines() {  # MODE
    local own='' e
    case "$1" in
        shardrep-noblock) own='block_commit_txns = 1' ;;
        shardrep-compound) own='compound_blocks = true' ;;
        shardrep-row) own='parallelism = "row"' ;;
        shardrep-shard) own='parallelism = "shard"' ;;
        shardrep-binlog) own='method = "binlog"' ;;
        shardrep-sql) own='method = "sql"' ;;
    esac
    [ -z "$own" ] || echo "$own"
    for e in ${apply_extra[@]+"${apply_extra[@]}"}; do
        [ -n "$own" ] && [ "${e%% = *}" = "${own%% = *}" ] && continue
        echo "$e"
    done
}

# shardrep_catchup MODE LABEL DIR: run shardrep until idle. Sets run_secs / run_error.
shardrep_catchup() {
    local mode=$1 label=$2 dir=$3 service=catchup t0 rc last_sample=-1 t bytes i c
    local work=$base/shardrep bin=$shardrep
    [ "$mode" != shardrep-base ] || bin=$base_shardrep
    mkdir -p "$dir"
    rm -rf "$work"
    mkdir -p "$work"
    {
        echo "shard_id master critical"
        for s in $schema_list; do echo "$s $service false"; done
    } > "$dir/shard.map"
    local list_line=''
    if [ "$assign" = even ]; then
        : > "$dir/shard.list"
        i=0
        for s in $schema_list; do echo "$s=$((i % channels))" >> "$dir/shard.list"; i=$((i + 1)); done
        list_line="shard_list = \"$dir/shard.list\""
    fi
    cat > "$dir/shardrep.toml" <<TOML
# Written by bench/catchup/run.sh: mode $label.
[service]
name = "$service"
[source]
kind = "live"
host = "$SANDBOX_HOST"
port = $SANDBOX_MASTER_PORT
user = "$SANDBOX_USER"
password_env = "SHARDREP_PASSWORD"
server_id = $shardrep_server_id
start = "$start_file:$start_pos"
[replica]
host = "$SANDBOX_HOST"
port = $((SANDBOX_MASTER_PORT + 1))
socket = "$base/replica1/mariadbd.sock"
user = "$SANDBOX_USER"
password_env = "SHARDREP_PASSWORD"
$(replica_lines "$mode")
[queue]
dir = "$work/queue"
[apply]
channels = $channels
$(apply_lines "$mode")
$list_line
[shard_filter]
map_file = "$dir/shard.map"
unknown_shard_policy = "accept"
[control]
socket = "$work/control.sock"
TOML
    SHARDREP_PASSWORD=$SANDBOX_PASSWORD "$bin" check-config --config "$dir/shardrep.toml" > "$dir/check-config.txt" 2>&1 \
        || { run_error="check-config failed: $(error_text "$dir/check-config.txt" 5)"; return; }
    next_report=0 last_bytes='' last_change=0
    # shardrep-check: the service stays up (a check runs table after table
    # and each needs it ONLINE); it is stopped once caught up and checked.
    local idle_flag=--until-idle check_pid='' caught_up=''
    [ "$mode" != shardrep-check ] || idle_flag=''
    t0=$(now)
    SHARDREP_PASSWORD=$SANDBOX_PASSWORD "$bin" run --config "$dir/shardrep.toml" $idle_flag \
        > "$dir/shardrep.out" 2> "$dir/shardrep.log" &
    shardrep_pid=$!
    while kill -0 "$shardrep_pid" 2>/dev/null; do
        if [ "$mode" = shardrep-check ]; then
            if [ -z "$check_pid" ] && "$shardrepctl" --socket "$work/control.sock" wait --state ONLINE \
                --timeout-secs 0 > /dev/null 2>&1; then
                "$shardrepctl" --socket "$work/control.sock" check > "$dir/check.out" 2> "$dir/check.err" &
                check_pid=$!
            fi
            if [ -z "$caught_up" ] && [ "$(shardrep_applied "$service")" -ge "$end_bytes" ]; then
                caught_up=$(elapsed "$t0")
            fi
            if [ -n "$caught_up" ] && [ -n "$check_pid" ] && ! kill -0 "$check_pid" 2>/dev/null; then
                local check_rc=0
                wait "$check_pid" || check_rc=$?
                "$shardrepctl" --socket "$work/control.sock" --json status --name check > "$dir/check.json" 2>&1 || true
                printf '%s: catch-up %s s; check exit %s: %s\n' "$label" "$caught_up" "$check_rc" \
                    "$(cat "$dir/check.json")" >> "$results/check.txt"
                say "[$label] caught up in $caught_up s; check exit $check_rc ($(tail -1 "$dir/check.out" 2>/dev/null))"
                kill -TERM "$shardrep_pid" 2>/dev/null || true
            fi
        fi
        t=$(elapsed "$t0")
        c=$(cpu_secs "$shardrep_pid")
        [ -z "$c" ] || applier_cpu=$c
        if awk -v t="$t" -v m="$timeout" 'BEGIN {exit !(t > m)}'; then
            kill -TERM "$shardrep_pid" 2>/dev/null || true
            wait "$shardrep_pid" 2>/dev/null || true
            shardrep_pid=''
            run_error="timeout after $timeout s"
            return
        fi
        if stalled "$t"; then
            kill -TERM "$shardrep_pid" 2>/dev/null || true
            wait "$shardrep_pid" 2>/dev/null || true
            shardrep_pid=''
            run_error="no progress for $stall_secs s (restart rows at byte ${last_bytes:-0}); see $dir/shardrep.log"
            return
        fi
        if [ "${t%.*}" -gt "$last_sample" ]; then
            last_sample=${t%.*}
            bytes=$(shardrep_applied "$service")
            sample "$t0" "$bytes" "$label"
        fi
        sleep 0.2
    done
    rc=0
    wait "$shardrep_pid" || rc=$?
    rm -rf "$work"
    t=$(elapsed "$t0")
    shardrep_pid=''
    if [ "$rc" != 0 ]; then
        run_error="shardrep exited $rc: $(error_text "$dir/shardrep.log" 3)"
        return
    fi
    run_secs=${caught_up:-$t}
    bytes=$(shardrep_applied "$service")
    sample "$t0" "$bytes" "$label"
    if [ "$bytes" -lt "$end_bytes" ]; then
        run_error="shardrep exited 0 but its restart rows end at byte $bytes of $end_bytes: $(rsql -e "SELECT GROUP_CONCAT(channel, '=', seqno, '@', event_id) FROM \`shardrep_$service\`.restart_position")"
    fi
}

# ---------------------------------------------------------------- the runs
csv=$results/results.csv
echo "data,durability,replica_binlog,mode,schemas,threads_or_channels,binlog_mb,transactions,seconds,txns_per_sec,ratio_to_native,checksum,replica_cpu_secs,shardrep_cpu_secs,replica_cpu_us_per_txn,shardrep_cpu_us_per_txn,shardrep_apply,error" > "$csv"
declare -A native_secs=()
failed=0

run_mode() {  # SETTING DATA DURABILITY BINLOG MODE
    local setting=$1 data=$2 dur=$3 binlog=$4 mode=$5 width label dir pool method='' apply=''
    label="$setting $mode"
    dir=$results/runs/$setting/$mode
    mkdir -p "$dir"
    samples=$dir/samples.txt
    : > "$samples"
    if [ "$data" = io ]; then pool=$io_pool method=O_DIRECT; else pool=$cache_pool; fi
    say "[$label] restoring the replica from the golden copy (flush_log_at_trx_commit=$dur, binlog $binlog, buffer pool $pool${method:+, $method})"
    restore_replica "$dur" "$pool" "$method" "$binlog"
    run_secs='' run_error='' applier_cpu=''
    local rpid cpu0 replica_cpu=''
    rpid=$(cat "$base/replica1/mariadbd.pid")
    cpu0=$(cpu_secs "$rpid")
    case "$mode" in
        native) width=1; native_catchup 0 conservative "$label" ;;
        conservative) width=$threads; native_catchup "$threads" conservative "$label" ;;
        optimistic) width=$threads; native_catchup "$threads" optimistic "$label" ;;
        shardrep|shardrep-noblock|shardrep-compound|shardrep-row|shardrep-shard|shardrep-binlog|shardrep-sql|shardrep-gtid-master|shardrep-gtid-own|shardrep-gtid-off|shardrep-base|shardrep-check)
            width=$channels
            # The [apply] settings of this mode besides channels, as K=V K=V.
            apply=$(apply_lines "$mode" | sed 's/ = /=/' | paste -sd' ')
            shardrep_catchup "$mode" "$label" "$dir" ;;
    esac
    replica_cpu=$(awk -v a="$cpu0" -v b="$(cpu_secs "$rpid")" 'BEGIN {printf "%.1f", b - a}')
    local checksum=-
    if [ -z "$run_error" ]; then
        say "[$label] caught up in $run_secs s; CHECKSUM TABLE against the master"
        if "$root/scripts/verify.sh" master replica1 $schema_list > "$dir/verify.txt" 2>&1; then
            checksum=match
        else
            checksum=MISMATCH
            run_error="CHECKSUM TABLE differs from the master: $(grep -c DIFFERS "$dir/verify.txt") table(s), see $dir/verify.txt"
        fi
    fi
    local secs tps ratio
    if [ -n "$run_error" ]; then
        failed=1
        say "[$label] FAILED: $run_error"
        printf '  %s %s: %s\n' "$setting" "$mode" "$run_error" >> "$results/failures.txt"
        secs=FAILED tps='' ratio=''
        [ "$mode" != native ] || native_secs[$setting]=''
    else
        secs=$run_secs
        tps=$(awk -v n="$txns" -v s="$secs" 'BEGIN {printf "%.0f", (s > 0 ? n / s : 0)}')
        [ "$mode" != native ] || native_secs[$setting]=$secs
        ratio=''
        if [ -n "${native_secs[$setting]:-}" ]; then
            ratio=$(awk -v a="${native_secs[$setting]}" -v b="$secs" 'BEGIN {printf "%.2f", a / b}')
        fi
        say "[$label] $secs s, $tps transactions/s${ratio:+, ${ratio}x native single-threaded}"
    fi
    # CPU microseconds per transaction of the backlog (replica, shardrep).
    local replica_us='' applier_us=''
    [ -z "$replica_cpu" ] || replica_us=$(awk -v c="$replica_cpu" -v n="$txns" 'BEGIN {if (n > 0) printf "%.0f", c * 1e6 / n}')
    [ -z "$applier_cpu" ] || applier_us=$(awk -v c="$applier_cpu" -v n="$txns" 'BEGIN {if (n > 0) printf "%.0f", c * 1e6 / n}')
    printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,"%s","%s"\n' "$data" "flush=$dur" "$binlog" "$mode" "$schemas" "$width" \
        "$binlog_mb" "$txns" "$secs" "$tps" "$ratio" "$checksum" "$replica_cpu" "$applier_cpu" "$replica_us" "$applier_us" \
        "${apply//\"/\'}" "${run_error//\"/\'}" >> "$csv"
    # Bytes applied per 10 s, for the plot: the growth of the applied
    # position over each bucket of $bucket s (last sample at or before its
    # end), scaled to MB per 10 s; a last bucket shorter than half a bucket
    # joins the one before. Two points a bucket draw it as steps.
    awk -v w="$bucket" '
        { t[NR] = $1; b[NR] = $2; n = NR }
        END {
            if (n == 0) exit
            k = 1; m = 0
            for (edge = w; edge - w < t[n]; edge += w) {
                while (k < n && t[k + 1] <= edge) k++
                m++; lo[m] = edge - w; hi[m] = (edge < t[n] ? edge : t[n])
                v[m] = (t[k] <= edge ? b[k] : 0)
            }
            if (m > 1 && hi[m] - lo[m] < w / 2) { hi[m - 1] = hi[m]; v[m - 1] = v[m]; m-- }
            prev = 0
            for (i = 1; i <= m; i++) {
                r = (hi[i] > lo[i] ? (v[i] - prev) / 1e6 * 10 / (hi[i] - lo[i]) : 0)
                printf "%g %.3f\n%g %.3f\n", lo[i], r, hi[i], r
                prev = v[i]
            }
        }' "$samples" > "$dir/per10s.txt"
}

# What this run measures, for the log, settings.txt and the report.
extra_text=$(printf '%s; ' ${apply_extra[@]+"${apply_extra[@]}"}); extra_text=${extra_text%; }
settings_text=$(cat <<TXT
command: $command_line
setting: ${preset:-(none: the options below)}
load: $schemas schema(s) x $tables table(s); $load_threads; $load_secs s of oltp_read_write
replica: durability $durability_list (2: innodb_flush_log_at_trx_commit=2, sync_binlog=0; 1: =1, sync_binlog=1); binlog $binlog_list (on: log_bin + log_slave_updates; off: no binlog)
modes: $modes
parallel threads $threads, shardrep channels $channels ($assign assignment)
shardrep [apply] options (--shardrep-opt, every shardrep mode): ${extra_text:-none}
shardrep: $shardrep (commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ', with uncommitted changes'))${base_shardrep:+; shardrep-base: $base_shardrep}
TXT
)
printf '%s\n' "$settings_text" > "$results/settings.txt"
say "results in $results"
while IFS= read -r line; do say "$line"; done <<< "$settings_text"
declare -A hot_share_of=() txns_of=()
settings_run=()
for data in $data_list; do
    if [ "$data" = io ]; then size=$io_table_size; else size=$table_size; fi
    prepare_data "$data" "$size"
    hot_share_of[$data]=$hot_share txns_of[$data]=$txns
    for dur in $durability_list; do
        for binlog in $binlog_list; do
            # Today's names when the replica logs; -nobinlog when it does not.
            setting="$data-flush$dur"
            [ "$binlog" = on ] || setting+=-nobinlog
            settings_run+=("$setting:$data")
            for mode in $modes; do
                run_mode "$setting" "$data" "$dur" "$binlog" "$mode"
            done
        done
    done
done

# ---------------------------------------------------------------- the report
echo
echo "== catch-up results ($(hostname), $(nproc) cores; $schemas schemas, $load_secs s of load)"
{
    printf '%s\n' "$settings_text"
    for data in $data_list; do
        echo "load $data: ${txns_of[$data]:-?} transactions; sb01's share ${hot_share_of[$data]:-?}% (per schema: load-$data.txt)"
    done
    echo
    {
        echo "data durability replica_binlog mode schemas thr/ch binlog_MB transactions seconds txn/s vs_native checksum cpu_s:replica+shardrep cpu_us/txn:replica+shardrep"
        tail -n +2 "$csv" | awk -F, '{
            printf "%s %s %s %s %s %s %s %s %s %s %s %s %s %s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9,
                ($10 == "" ? "-" : $10), ($11 == "" ? "-" : $11 "x"), $12, $13 ($14 == "" ? "" : "+" $14),
                ($15 == "" ? "-" : $15) ($16 == "" ? "" : "+" $16) }'
    } | column -t
} | tee "$results/results.txt"
# What each shardrep run applied, from the line it logs as it goes
# offline (versions before it logged the counters are left out): blocks
# per transaction say how much block commit saved the replica.
for log in "$results"/runs/*/shardrep*/shardrep.log; do
    [ -e "$log" ] || continue
    line=$(awk '/offline: this run applied/ {l = $0} END {print l}' "$log")
    [ -n "$line" ] || continue
    run=${log#"$results/runs/"}; run=${run%/shardrep.log}
    awk -v run="$run" '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "%s: %s transactions, %s row changes, %s blocks (%.1f transactions a block), %s retries\n",
            run, v["transactions"], v["row_changes"], v["blocks"],
            (v["blocks"] > 0 ? v["transactions"] / v["blocks"] : 0), v["retries"]
    }' <<< "$line"
done > "$results/blocks.txt"
if [ -s "$results/blocks.txt" ]; then
    echo
    echo "shardrep runs, from their logs:"
    tee -a "$results/results.txt" < "$results/blocks.txt"
fi
if [ -s "$results/failures.txt" ]; then
    echo
    echo "failures:"
    tee -a "$results/results.txt" < "$results/failures.txt"
fi

# Plot: binlog MB applied per 10 s, one panel per setting, one line per mode.
plot=$results/catchup.png
nset=${#settings_run[@]}
{
    echo "set terminal pngcairo size 1000,$((380 * nset)) font ',10'"
    echo "set output '$plot'"
    echo "set multiplot layout $nset,1"
    echo "set xlabel 'seconds since the catch-up started'"
    echo "set ylabel 'binlog MB applied per 10 s ($bucket s buckets)'"
    echo "set xrange [0:*]"
    echo "set key outside right top"
    echo "set grid"
    echo "set yrange [0:*]"
    for sd in "${settings_run[@]}"; do
        s=${sd%%:*}
        echo "set title 'catch-up, $s, $schemas schema(s) x $tables table(s), $load_threads, ${txns_of[${sd#*:}]} transactions'"
        printf 'plot '
        sep=''
        for mode in $modes; do
            f=$results/runs/$s/$mode/per10s.txt
            [ -s "$f" ] || continue
            printf "%s'%s' using 1:2 with lines lw 2 title '%s'" "$sep" "$f" "$mode"
            sep=', '
        done
        [ -n "$sep" ] || printf "0 notitle"
        echo
    done
    echo "unset multiplot"
} > "$results/catchup.gnuplot"
if gnuplot "$results/catchup.gnuplot" 2> "$logs/gnuplot.txt"; then
    say "plot: $plot"
else
    say "gnuplot failed (see $logs/gnuplot.txt); the data is in $results/runs/*/*/per10s.txt"
fi
say "table: $results/results.txt, CSV: $csv"
[ "$failed" = 0 ] || { say "at least one mode FAILED"; exit 1; }
