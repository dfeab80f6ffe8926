#!/usr/bin/env bash
# Memory benchmark (issue 6, last acceptance bullet): the resident size of
# `shardrep run` while it catches up a >= 1 GiB binlog backlog must stay
# under 256 MiB.
#
# 1. generate: on a PRIVATE sandbox (its own directory and ports; never the
#    shared test sandbox), native replication on replica1 is stopped, the
#    master's position is recorded, and a backlog is written on the master
#    with innodb_flush_log_at_trx_commit=0 and sync_binlog=0:
#      - 8 schemas (mem01..mem08), each with 2 sysbench tables and one wide
#        table, all created after the recorded position (shardrep creates
#        them on the replica itself);
#      - mostly small transactions: sysbench oltp_write_only, one thread per
#        schema;
#      - concurrently, multi-MB transactions: INSERT ... SELECT FROM
#        seq_1_to_N of ~1 KB rows, and UPDATEs of ranges of them;
#      - a few ~50 MB transactions (each written alone, so its size is the
#        exact position difference).
#    The backlog (start FILE:POS, end, bytes, transactions, largest
#    transaction) is saved in $SHARDREP_SANDBOX_DIR/memory-backlog.env and
#    reused by later invocations unless --regenerate is given.
# 2. run: for each source kind asked for, the replica's copies of the
#    schemas and the service's catalog are dropped, then
#    `target/release/shardrep run --config <generated> --until-idle` applies
#    the backlog with 8 channels (other settings default), while VmRSS of
#    its process is sampled every 0.5 s (and VmHWM), and its CPU time (user +
#    system, as of the last sample). Prints peak RSS, elapsed time,
#    transactions/s, MB/s, CPU seconds and CPU microseconds per transaction
#    (issue 17's measure), and whether every table of the
#    replica equals the master's (CHECKSUM TABLE).
#
# Usage: bench/memory.sh [options]
#   --target-mb N      backlog size to reach, MiB (default 1024)
#   --big-txns N       number of ~50 MB transactions (default 4)
#   --big-rows N       rows per ~50 MB transaction (default 50000, ~1 KB each)
#   --mid-rows N       rows per multi-MB transaction (default 4000)
#   --source S         live | files | both (default both)
#   --channels N       apply channels (default 8)
#   --regenerate       write a new backlog even if one is recorded
#   --generate-only    stop after generating
#   --keep             keep the run directories (queue, logs) at the end
#   --extra-toml TEXT  appended to the [apply] section of the config
#                      (e.g. 'max_in_flight_bytes = 33554432')
#
# Environment: SHARDREP_SANDBOX_DIR (default /tmp/sb-memory) and
# SANDBOX_MASTER_PORT (default 27306; replica1 is that + 1) choose the
# private sandbox; it is started if needed and left running (stop it with
# `SHARDREP_SANDBOX_DIR=... SANDBOX_MASTER_PORT=... scripts/sandbox.sh
# destroy`). BENCH_RESULTS (default bench/results/memory) receives the RSS
# samples and logs of each run. SHARDREP_BIN (default
# target/release/shardrep) the binary, which must be built first (cargo
# build --release); another build's, to compare two on one backlog.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export SHARDREP_SANDBOX_DIR=${SHARDREP_SANDBOX_DIR:-/tmp/sb-memory}
export SANDBOX_MASTER_PORT=${SANDBOX_MASTER_PORT:-27306}
# shellcheck source=../scripts/lib.sh
. "$root/scripts/lib.sh"

target_mb=1024 big_txns=4 big_rows=50000 mid_rows=4000 source=both channels=8
regenerate=0 generate_only=0 keep=0 extra_toml=
while [ $# -gt 0 ]; do
    case "$1" in
        --target-mb) target_mb=$2; shift 2 ;;
        --big-txns) big_txns=$2; shift 2 ;;
        --big-rows) big_rows=$2; shift 2 ;;
        --mid-rows) mid_rows=$2; shift 2 ;;
        --source) source=$2; shift 2 ;;
        --channels) channels=$2; shift 2 ;;
        --regenerate) regenerate=1; shift ;;
        --generate-only) generate_only=1; shift ;;
        --keep) keep=1; shift ;;
        --extra-toml) extra_toml=$2; shift 2 ;;
        -h|--help) sed -n '2,50p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "memory.sh: unknown option $1 (see --help)" ;;
    esac
done
for v in target_mb big_txns big_rows mid_rows channels; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || die "memory.sh: --${v//_/-} wants a non-negative integer"
done
case "$source" in live|files|both) ;; *) die "memory.sh: --source is live, files or both" ;; esac

[ "$SHARDREP_SANDBOX_DIR" != /tmp/shardrep-sandbox ] || die "refusing to use the shared test sandbox directory"
[ "$SHARDREP_SANDBOX_DIR" != /tmp/shardrep-catchup ] || die "refusing to use the catch-up benchmark's sandbox"
[ "$SANDBOX_MASTER_PORT" != 13306 ] || die "refusing to use the shared test sandbox port"
command -v sysbench >/dev/null || die "sysbench is not installed (apt-get install -y sysbench)"
bin=${SHARDREP_BIN:-$root/target/release/shardrep}
[ "$generate_only" = 1 ] || [ -x "$bin" ] || die "$bin is missing: cargo build --release"

schemas=(mem01 mem02 mem03 mem04 mem05 mem06 mem07 mem08)
results=${BENCH_RESULTS:-$root/bench/results/memory}
mkdir -p "$results"
state=$SHARDREP_SANDBOX_DIR/memory-backlog.env
master_port=$SANDBOX_MASTER_PORT
replica_port=$((SANDBOX_MASTER_PORT + 1))

msql() { sandbox_sql master -N -B "$@"; }
rsql() { sandbox_sql replica1 -N -B "$@"; }
# Bytes of binlog from FILE:POS to the master's current end.
binlog_bytes_since() {
    local file=$1 pos=$2
    msql -e 'SHOW BINARY LOGS' | awk -v f="$file" -v p="$pos" \
        '$1 >= f {s += $2} END {print s - p}'
}
master_pos() { msql -e 'SHOW MASTER STATUS' | awk '{print $1 ":" $2}'; }
# GTID sequence number of domain 0 in the master's binlog (server 1 only).
gtid_seq() { msql -e 'SELECT @@gtid_binlog_pos' | tr ',' '\n' | awk -F- '$1 == 0 {print $3}' | tail -1; }

generate() {
    say "generate: sandbox $SHARDREP_SANDBOX_DIR (master $master_port, replica1 $replica_port)"
    "$root/scripts/sandbox.sh" up 1 >/dev/null
    rsql -e 'STOP SLAVE'
    # Not replicated natively any more: sandbox.sh must not restart it.
    rm -f "$SHARDREP_SANDBOX_DIR/replica1/native-replication"
    for s in "${schemas[@]}"; do
        msql -e "SET sql_log_bin = 0; DROP DATABASE IF EXISTS \`$s\`"
        rsql -e "SET sql_log_bin = 0; DROP DATABASE IF EXISTS \`$s\`"
    done
    msql -e 'FLUSH BINARY LOGS'
    local start start_file start_pos seq0
    start=$(master_pos)
    start_file=${start%:*} start_pos=${start#*:}
    seq0=$(gtid_seq); seq0=${seq0:-0}
    say "generate: backlog starts at $start (gtid seq $seq0)"
    local saved_flush saved_sync
    saved_flush=$(msql -e 'SELECT @@innodb_flush_log_at_trx_commit')
    saved_sync=$(msql -e 'SELECT @@sync_binlog')
    msql -e 'SET GLOBAL innodb_flush_log_at_trx_commit = 0; SET GLOBAL sync_binlog = 0'

    local work; work=$(mktemp -d "${TMPDIR:-/tmp}/memory-gen.XXXXXX")
    for s in "${schemas[@]}"; do
        msql -e "CREATE DATABASE \`$s\`"
        msql "$s" -e "CREATE TABLE wide (
            id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
            k INT NOT NULL, batch INT NOT NULL,
            a VARCHAR(600) NOT NULL, b VARCHAR(600) NOT NULL,
            t DATETIME(6) NOT NULL, d DECIMAL(12,2) NOT NULL,
            KEY (k)) ENGINE=InnoDB"
    done
    sb() {
        local db=$1; shift
        TMPDIR=$work sysbench oltp_write_only --db-driver=mysql --mysql-host="$SANDBOX_HOST" \
            --mysql-port="$master_port" --mysql-user="$SANDBOX_USER" \
            --mysql-password="$SANDBOX_PASSWORD" --mysql-db="$db" \
            --tables=2 --table-size=10000 "$@"
    }
    for s in "${schemas[@]}"; do sb "$s" prepare >/dev/null & done
    wait

    # One multi-MB transaction: N wide rows inserted, or N/2 updated.
    local mid_count=0 batch=0
    wide_insert() {
        local db=$1 rows=$2 b=$3
        msql "$db" -e "INSERT INTO wide (k, batch, a, b, t, d)
            SELECT seq % 1000, $b, REPEAT(MD5(seq + $b), 16), REPEAT(SHA1(seq), 12),
                   '2024-01-01' + INTERVAL seq SECOND, seq / 7
            FROM seq_1_to_$rows"
    }
    wide_update() {
        local db=$1 rows=$2
        msql "$db" -e "UPDATE wide SET k = k + 1, d = d + 1 ORDER BY id DESC LIMIT $((rows / 2))"
    }
    # Background loop of multi-MB transactions while sysbench runs.
    mid_loop() {
        local until=$1 i=0 db
        while [ "$(date +%s)" -lt "$until" ]; do
            db=${schemas[$((RANDOM % 8))]}
            if [ $((i % 4)) = 3 ]; then
                wide_update "$db" "$mid_rows"
            else
                wide_insert "$db" "$mid_rows" $((100000 + RANDOM))
            fi
            i=$((i + 1))
            echo x >> "$work/mid.count"
            sleep 1
        done
    }

    local target=$((target_mb * 1024 * 1024)) size=0 chunk=0 big_done=0 largest=0 b0 b1 before
    while [ "$size" -lt "$target" ]; do
        chunk=$((chunk + 1))
        [ "$chunk" -le 40 ] || die "backlog still $size bytes after 40 chunks"
        local secs=20
        mid_loop $(( $(date +%s) + secs )) &
        for s in "${schemas[@]}"; do
            sb "$s" --threads=1 --time="$secs" --report-interval=0 run > "$work/sb-$s-$chunk.log" 2>&1 &
        done
        wait
        # A ~50 MB transaction, alone: its size is the position difference.
        if [ "$big_done" -lt "$big_txns" ]; then
            before=$(master_pos)
            b0=$(binlog_bytes_since "${before%:*}" "${before#*:}")
            wide_insert "${schemas[$((big_done % 8))]}" "$big_rows" "$((900 + big_done))"
            b1=$(binlog_bytes_since "${before%:*}" "${before#*:}")
            [ $((b1 - b0)) -le "$largest" ] || largest=$((b1 - b0))
            big_done=$((big_done + 1))
            say "generate: large transaction $big_done: $((b1 - b0)) bytes"
        fi
        size=$(binlog_bytes_since "$start_file" "$start_pos")
        say "generate: chunk $chunk: backlog $size bytes ($((size / 1048576)) MiB)"
        msql -e 'FLUSH BINARY LOGS'
    done
    unset -f mid_loop
    msql -e "SET GLOBAL innodb_flush_log_at_trx_commit = $saved_flush; SET GLOBAL sync_binlog = $saved_sync"
    msql -e 'FLUSH BINARY LOGS'
    local end seq1 small
    end=$(master_pos)
    size=$(binlog_bytes_since "$start_file" "$start_pos")
    seq1=$(gtid_seq)
    small=$(cat "$work"/sb-*.log | awk '/transactions:/ {s += $2} END {print s + 0}')
    mid_count=$(wc -l < "$work/mid.count" 2>/dev/null || echo 0)
    cat > "$state" <<ENV
start=$start
end=$end
bytes=$size
txns=$((seq1 - seq0))
sysbench_txns=$small
mid_txns=$mid_count
mid_rows=$mid_rows
big_txns=$big_done
big_rows=$big_rows
largest_bytes=$largest
generated=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ENV
    rm -rf "$work"
    say "generate: done: $(tr '\n' ' ' < "$state")"
}

# Stop a process we started, and wait for it.
stop_pid() { kill -TERM "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

checksums() {
    local server=$1 s
    for s in "${schemas[@]}"; do
        sandbox_sql "$server" -N -B -e "CHECKSUM TABLE \`$s\`.sbtest1, \`$s\`.sbtest2, \`$s\`.wide"
    done
}

run_one() {
    local kind=$1
    # shellcheck disable=SC1090
    . "$state"
    local svc="mem_$kind" dir="$results/$kind"
    rm -rf "$dir"; mkdir -p "$dir"
    say "run[$kind]: resetting the replica (schemas and catalog shardrep_$svc)"
    for s in "${schemas[@]}"; do
        rsql -e "SET sql_log_bin = 0; DROP DATABASE IF EXISTS \`$s\`"
    done
    rsql -e "SET sql_log_bin = 0; DROP DATABASE IF EXISTS \`shardrep_$svc\`"
    {
        echo "shard_id master critical"
        for s in "${schemas[@]}"; do echo "$s $svc false"; done
    } > "$dir/shard.map"
    local source_toml
    if [ "$kind" = live ]; then
        source_toml="kind = \"live\"
host = \"$SANDBOX_HOST\"
port = $master_port
user = \"$SANDBOX_USER\"
password = \"$SANDBOX_PASSWORD\"
server_id = 4242"
    else
        source_toml="kind = \"files\"
binlog_dir = \"$SHARDREP_SANDBOX_DIR/master/binlog\"
binlog_index = \"mariadb-bin.index\""
    fi
    cat > "$dir/shardrep.toml" <<TOML
[service]
name = "$svc"
[source]
$source_toml
start = "$start"
[replica]
host = "$SANDBOX_HOST"
port = $replica_port
user = "$SANDBOX_USER"
password = "$SANDBOX_PASSWORD"
[queue]
dir = "$dir/queue"
[apply]
channels = $channels
$extra_toml
[shard_filter]
map_file = "$dir/shard.map"
unknown_shard_policy = "error"
[control]
socket = "$dir/control.sock"
TOML
    "$bin" check-config --config "$dir/shardrep.toml" >/dev/null

    say "run[$kind]: $bin run --config $dir/shardrep.toml --until-idle"
    local t0 t1 pid rss hwm peak=0 last_hwm=0 samples="$dir/rss.tsv"
    printf 't_secs\tvmrss_kb\tvmhwm_kb\tqueue_kb\n' > "$samples"
    t0=$(date +%s.%N)
    RUST_LOG=${RUST_LOG:-info} "$bin" run --config "$dir/shardrep.toml" --until-idle \
        > "$dir/shardrep.out" 2> "$dir/shardrep.err" &
    pid=$!
    trap 'stop_pid '"$pid" INT TERM
    local n=0 q=0 ticks=0 t clk_tck
    clk_tck=$(getconf CLK_TCK)
    while kill -0 "$pid" 2>/dev/null; do
        # shardrep's CPU (user + system clock ticks), as of the last sample.
        t=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || true)
        [ -z "$t" ] || ticks=$t
        if [ -r "/proc/$pid/status" ]; then
            read -r rss hwm < <(awk '/^VmRSS:/ {r=$2} /^VmHWM:/ {h=$2} END {print r+0, h+0}' \
                "/proc/$pid/status" 2>/dev/null || echo "0 0")
            [ "${rss:-0}" -le "$peak" ] || peak=$rss
            [ "${hwm:-0}" = 0 ] || last_hwm=$hwm
            # The queue's size every 5 s (du is not free).
            if [ $((n % 10)) = 0 ]; then q=$(du -sk "$dir/queue" 2>/dev/null | cut -f1 || true); fi
            printf '%.1f\t%s\t%s\t%s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$rss" "$hwm" "${q:-0}" >> "$samples"
        fi
        n=$((n + 1))
        sleep 0.5
    done
    local rc=0
    wait "$pid" || rc=$?
    trap - INT TERM
    t1=$(date +%s.%N)
    local elapsed; elapsed=$(echo "$t1 - $t0" | bc)
    [ "$rc" = 0 ] || { tail -20 "$dir/shardrep.err" >&2; say "run[$kind]: shardrep exited with $rc"; }

    checksums master > "$dir/checksum.master"
    checksums replica1 > "$dir/checksum.replica"
    local equal=yes
    if ! diff -q "$dir/checksum.master" "$dir/checksum.replica" >/dev/null; then
        equal=NO
        diff "$dir/checksum.master" "$dir/checksum.replica" | head -20 >&2 || true
    fi
    local peak_kb=$(( peak > last_hwm ? peak : last_hwm ))
    local result
    result=$(printf '%s' "source=$kind channels=$channels exit=$rc" \
        " backlog_bytes=$bytes txns=$txns largest_txn_bytes=$largest_bytes" \
        " peak_rss_mib=$(echo "scale=1; $peak_kb / 1024" | bc)" \
        " (max_sampled_vmrss_kb=$peak last_vmhwm_kb=$last_hwm)" \
        " elapsed_s=$(printf '%.1f' "$elapsed")" \
        " txn_per_s=$(echo "scale=0; $txns / $elapsed" | bc)" \
        " mb_per_s=$(echo "scale=2; $bytes / 1048576 / $elapsed" | bc)" \
        " cpu_s=$(echo "scale=2; $ticks / $clk_tck" | bc)" \
        " cpu_us_per_txn=$(echo "scale=0; $ticks * 1000000 / $clk_tck / $txns" | bc)" \
        " tables_equal=$equal" \
        " under_256mib=$([ "$peak_kb" -lt 262144 ] && echo yes || echo NO)")
    echo "$result" | tee "$dir/result.txt"
    [ "$keep" = 1 ] || rm -rf "$dir/queue"
}

if [ "$regenerate" = 1 ] || [ ! -s "$state" ]; then
    generate
else
    "$root/scripts/sandbox.sh" up 1 >/dev/null
    rsql -e 'STOP SLAVE'
    say "reusing the recorded backlog: $(tr '\n' ' ' < "$state")"
fi
[ "$generate_only" = 0 ] || exit 0
case "$source" in
    live) run_one live ;;
    files) run_one files ;;
    both) run_one live; run_one files ;;
esac
