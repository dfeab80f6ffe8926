#!/usr/bin/env bash
# CPU of the extract path, counted in instructions (issue 17): shardrep with
# `[service] role = "extractor"` reads the binlog of bench/gen-binlog.sh (a
# sysbench oltp_read_write run on 8 schemas, about 48 MB; 11,585
# transactions here) from files into a new queue, under valgrind's callgrind.
# callgrind counts instructions, not seconds, so the machine's other load
# does not enter the count. For builds whose queue segments were sled
# databases (before the log files), one part of it is not work: valgrind
# runs one thread at a time, and a thread that spins on sled's lazy statics
# (`sled::lazy::Lazy::deref`) burns instructions until valgrind switches
# threads: 0% to 72% of the total. The script reports the count without
# that spin ("net"; the spin is 0 for later builds), which is steady:
# 189,341 to 191,727 instructions per transaction over 5 runs of the build
# before issue 17's first changes, 158,166 to 159,624 over 5 runs of a
# later build, where CPU seconds of a catch-up on these 2-core machines
# move by 30% or more between runs. It covers the extractor thread (binlog
# decode, record encode, queue append) and the queue's flusher (sled's I/O
# threads before): about 17% of shardrep's CPU in a catch-up with the log
# files (bench/memory.sh, live source, perf); the queue read, scheduling and
# SQL are not in it, nor the kernel's side of the writes.
#
# Prints the net instructions per transaction (the figure to compare), the
# instructions, the spin and the transactions of each binary, and writes
# callgrind's output and its inclusive top functions (callgrind_annotate)
# to the results directory.
#
# Usage: bench/cpu.sh [--base PATH]
#   --base PATH   also count another build's shardrep binary (before/after
#                 of a change on the same binlog, as bench/catchup/run.sh's
#                 shardrep-base mode)
#
# Environment: BENCH_DATA_DIR (default target/bench-data/sysbench-binlog) the
# binlog (made by bench/gen-binlog.sh when missing, which starts a private
# sandbox); CPU_RESULTS (default bench/results/cpu-<timestamp>) the output.
# Installs valgrind with apt-get when missing and builds shardrep in release
# mode. Takes about a minute per binary.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
base=''
while [ $# -gt 0 ]; do
    case "$1" in
        --base) [ $# -ge 2 ] || { echo "cpu: --base needs a path" >&2; exit 2; }; base=$2; shift 2 ;;
        -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "cpu: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
say() { printf '%s cpu: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'cpu: error: %s\n' "$*" >&2; exit 1; }
if [ -n "$base" ]; then
    [ -x "$base" ] || die "--base $base is not an executable file"
    base=$(cd "$(dirname "$base")" && pwd)/$(basename "$base")
fi

data=${BENCH_DATA_DIR:-$root/target/bench-data/sysbench-binlog}
[ -f "$data/COMPLETE" ] || BENCH_DATA_DIR=$data "$root/bench/gen-binlog.sh"
first=$(head -n 1 "$data/mariadb-bin.index")
first=${first##*/}
[ -f "$data/$first" ] || die "$data/mariadb-bin.index names $first, which is not in $data"

command -v valgrind >/dev/null || {
    [ "$(id -u)" = 0 ] || die "valgrind is missing; installing it needs root (apt-get install -y valgrind)"
    say "installing valgrind"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
}
say "building shardrep (release)"
cargo build --release --quiet --bin shardrep

results=${CPU_RESULTS:-$root/bench/results/cpu-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$results"
results=$(cd "$results" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# An extractor-only service: the replica is never connected to (its section
# is required by the configuration all the same).
cat > "$work/cpu.toml" <<TOML
[service]
name = "cpu"
role = "extractor"
[source]
kind = "files"
binlog_dir = "$data"
binlog_index = "mariadb-bin.index"
start = "$first:4"
[replica]
host = "127.0.0.1"
user = "unused"
password = "unused"
[queue]
dir = "$work/queue"
[control]
socket = "$work/control.sock"
TOML

# count LABEL BINARY: one callgrind run into a new queue.
count() {
    local label=$1 bin=$2 out=$results/callgrind.$1.out log=$results/$1.log
    rm -rf "$work/queue"
    say "$label: $bin"
    RUST_BACKTRACE=0 valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$bin" run --config "$work/cpu.toml" --until-idle > "$log" 2>&1 \
        || die "$label: shardrep failed under valgrind, see $log"
    local refs txns
    refs=$(sed -n 's/.*I *refs: *\([0-9,]*\).*/\1/p' "$log" | tr -d ,)
    txns=$(sed -n 's/.*extractor stopped stored=\([0-9]*\).*/\1/p' "$log" | tail -n 1)
    [ -n "$refs" ] && [ -n "$txns" ] && [ "$txns" -gt 0 ] \
        || die "$label: no instruction count or transaction count in $log"
    callgrind_annotate --auto=no --inclusive=yes "$out" 2>/dev/null | head -n 60 > "$results/top.$label.txt" || true
    # Self cost of sled's spin-wait (see the top of this file).
    local spin
    spin=$(callgrind_annotate --auto=no --threshold=100 "$out" 2>/dev/null \
        | awk '/sled::lazy::Lazy<T,F> as core::ops::deref::Deref>::deref/ {gsub(",", "", $1); s += $1} END {print s + 0}')
    printf '%-6s net_instructions_per_txn=%s instructions=%s spin=%s transactions=%s binary=%s\n' \
        "$label" "$(((refs - spin) / txns))" "$refs" "$spin" "$txns" "$bin" | tee -a "$results/results.txt"
}

[ -z "$base" ] || count base "$base"
count after "$root/target/release/shardrep"
say "results: $results (results.txt, top.*.txt: callgrind_annotate --inclusive=yes)"
