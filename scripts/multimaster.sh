#!/usr/bin/env bash
# Two-master sandbox for the system-of-record topology (README "Two masters"):
# masters `sjc` and `nyc`, each a scripts/sandbox.sh master with no replicas,
# log_bin and log_slave_updates on, distinct server ids and GTID domains; and
# one shardrep service per direction (conf/sjc.toml, conf/nyc.toml):
# service `sjc` reads master sjc and applies to nyc, service `nyc` the other
# way round.
#
# Usage: scripts/multimaster.sh up          start both masters (idempotent)
#        scripts/multimaster.sh start       start both shardrep services (background)
#        scripts/multimaster.sh stop        stop the services this script started (by pid)
#        scripts/multimaster.sh down        stop, then stop both masters
#        scripts/multimaster.sh destroy     down, then remove $MM_DIR
#        scripts/multimaster.sh status      masters (ports, ids, domains, GTID positions) and services
#        scripts/multimaster.sh sql sjc|nyc [mariadb client args...]
#        scripts/multimaster.sh ctl sjc|nyc [shardrepctl args...]
#
# Environment (defaults in brackets):
#   MM_DIR [/tmp/shardrep-mm]   masters in $MM_DIR/sjc, $MM_DIR/nyc; services
#                               in $MM_DIR/service-sjc, $MM_DIR/service-nyc
#   MM_SJC_PORT [29306]  MM_SJC_SERVER_ID [10]  MM_SJC_DOMAIN [1]
#   MM_NYC_PORT [29406]  MM_NYC_SERVER_ID [20]  MM_NYC_DOMAIN [2]
#   SHARDREP_BIN [target/release/shardrep, else target/debug/shardrep]
# conf/sjc.toml and conf/nyc.toml are written for the defaults; `start`
# rewrites ports and directories into $MM_DIR/service-*/shardrep.toml when
# they differ. Other settings (users, passwords, InnoDB) come from
# conf/sandbox.env as for scripts/sandbox.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

MM_DIR=${MM_DIR:-/tmp/shardrep-mm}
MM_SJC_PORT=${MM_SJC_PORT:-29306}
MM_NYC_PORT=${MM_NYC_PORT:-29406}
MM_SJC_SERVER_ID=${MM_SJC_SERVER_ID:-10}
MM_NYC_SERVER_ID=${MM_NYC_SERVER_ID:-20}
MM_SJC_DOMAIN=${MM_SJC_DOMAIN:-1}
MM_NYC_DOMAIN=${MM_NYC_DOMAIN:-2}

die() { echo "multimaster: $*" >&2; exit 1; }
log() { echo "multimaster: $*" >&2; }

check_name() {
    case "$1" in sjc|nyc) ;; *) die "unknown master/service '$1' (expected sjc or nyc)" ;; esac
}

# Runs scripts/sandbox.sh for master NAME with its own settings.
sandbox() {
    local name=$1; shift
    local port id domain
    if [ "$name" = sjc ]; then
        port=$MM_SJC_PORT id=$MM_SJC_SERVER_ID domain=$MM_SJC_DOMAIN
    else
        port=$MM_NYC_PORT id=$MM_NYC_SERVER_ID domain=$MM_NYC_DOMAIN
    fi
    SHARDREP_SANDBOX_DIR=$MM_DIR/$name SANDBOX_MASTER_PORT=$port \
        SANDBOX_MASTER_SERVER_ID=$id SANDBOX_GTID_DOMAIN_ID=$domain \
        bash "$root/scripts/sandbox.sh" "$@"
}

shardrep_bin() {
    if [ -n "${SHARDREP_BIN:-}" ]; then echo "$SHARDREP_BIN"; return; fi
    local b
    for b in "$root/target/release/shardrep" "$root/target/debug/shardrep"; do
        [ -x "$b" ] && { echo "$b"; return; }
    done
    die "no shardrep binary: cargo build (or set SHARDREP_BIN)"
}

service_dir() { echo "$MM_DIR/service-$1"; }
# The pid the service recorded itself (the shardrep process, not a setsid
# that forked), if any.
service_pid() {
    local f; f="$(service_dir "$1")/shardrep.pid"
    [ -s "$f" ] && cat "$f"
}
# Pids of every shardrep process running this service's configuration
# (`shardrep run --config $MM_DIR/service-NAME/shardrep.toml`): the
# recorded one, and any a lost or stale pid file no longer names.
service_pids() {
    local config p cmdline
    config="$(service_dir "$1")/shardrep.toml"
    for p in /proc/[0-9]*; do
        cmdline=$(tr '\0' ' ' 2>/dev/null < "$p/cmdline") || continue
        case "$cmdline" in
            *shardrep\ run\ --config\ "$config"\ *|*shardrep\ run\ --config\ "$config") echo "${p#/proc/}" ;;
        esac
    done
}
service_running() {
    [ -n "$(service_pids "$1")" ]
}

# conf/NAME.toml with this run's ports, directories and the repository's
# shard.map (absolute, so the service may start anywhere).
write_service_config() {
    local name=$1 dir; dir=$(service_dir "$name")
    mkdir -p "$dir"
    sed -e "s#/tmp/shardrep-mm#$MM_DIR#g" \
        -e "s#^port = 29306\$#port = $MM_SJC_PORT#" \
        -e "s#^port = 29406\$#port = $MM_NYC_PORT#" \
        -e "s#^10 = \"sjc\"\$#$MM_SJC_SERVER_ID = \"sjc\"#" \
        -e "s#^20 = \"nyc\"\$#$MM_NYC_SERVER_ID = \"nyc\"#" \
        -e "s#^map_file = \"shard.map\"\$#map_file = \"$root/shard.map\"#" \
        "$root/conf/$name.toml" > "$dir/shardrep.toml"
}

cmd_up() {
    mkdir -p "$MM_DIR"
    sandbox sjc up 0 >/dev/null
    sandbox nyc up 0 >/dev/null
    cmd_status
}

cmd_start() {
    local bin name dir i
    bin=$(shardrep_bin)
    export SHARDREP_PASSWORD=${SHARDREP_PASSWORD:-$(sed -n 's/^SANDBOX_PASSWORD=//p' "$root/conf/sandbox.env")}
    for name in sjc nyc; do
        service_running "$name" && continue
        dir=$(service_dir "$name")
        write_service_config "$name"
        log "starting service $name (log $dir/shardrep.log)"
        rm -f "$dir/shardrep.pid"
        # setsid forks when it is a process group leader, so $! may not be
        # the service: the service's shell records its own pid, then execs
        # shardrep (same pid).
        ( cd "$dir" && SHARDREP_LOG=${SHARDREP_LOG:-info} exec setsid sh -c \
            'echo $$ > "$1"; exec "$2" run --config "$3"' sh "$dir/shardrep.pid" "$bin" "$dir/shardrep.toml" \
            ) >>"$dir/shardrep.log" 2>&1 < /dev/null &
        for i in $(seq 1 50); do [ -s "$dir/shardrep.pid" ] && break; sleep 0.1; done
        [ -s "$dir/shardrep.pid" ] || die "service $name did not start (see $dir/shardrep.log)"
    done
}

cmd_stop() {
    local name pids i
    for name in sjc nyc; do
        pids=$(service_pids "$name")
        if [ -n "$pids" ]; then
            log "stopping service $name (pid $(echo $pids))"
            # shellcheck disable=SC2086
            kill -TERM $pids 2>/dev/null || true
            for i in $(seq 1 300); do [ -z "$(service_pids "$name")" ] && break; sleep 0.1; done
            pids=$(service_pids "$name")
            if [ -n "$pids" ]; then
                log "service $name did not stop in 30 s; killing it"
                # shellcheck disable=SC2086
                kill -KILL $pids 2>/dev/null || true
                for i in $(seq 1 50); do [ -z "$(service_pids "$name")" ] && break; sleep 0.1; done
            fi
            pids=$(service_pids "$name")
            [ -z "$pids" ] || die "service $name is still running (pid $(echo $pids))"
        fi
        rm -f "$(service_dir "$name")/shardrep.pid"
    done
}

cmd_down() {
    cmd_stop
    [ -d "$MM_DIR/sjc" ] && sandbox sjc down
    [ -d "$MM_DIR/nyc" ] && sandbox nyc down
    return 0
}

cmd_destroy() {
    cmd_down
    rm -rf "$MM_DIR"
    log "removed $MM_DIR"
}

cmd_status() {
    local name
    printf '%-6s %-8s %-6s %-9s %-6s %s\n' MASTER STATE PORT SERVER_ID DOMAIN GTID_BINLOG_POS
    for name in sjc nyc; do
        if [ ! -S "$MM_DIR/$name/master/mariadbd.sock" ]; then
            printf '%-6s %-8s\n' "$name" stopped
            continue
        fi
        local vars
        # shellcheck disable=SC2086
        vars=$(sandbox "$name" sql master -N -B -e "SELECT @@port, @@server_id, @@gtid_domain_id, IF(@@gtid_binlog_pos='','(empty)',@@gtid_binlog_pos)" 2>/dev/null) \
            || { printf '%-6s %-8s\n' "$name" stopped; continue; }
        # shellcheck disable=SC2086
        printf '%-6s %-8s %-6s %-9s %-6s %s\n' "$name" running $vars
    done
    for name in sjc nyc; do
        if service_running "$name"; then
            echo "service $name: running (pid $(echo $(service_pids "$name")), log $(service_dir "$name")/shardrep.log)"
        else
            echo "service $name: not running"
        fi
    done
}

ctl_bin() {
    local b; b=$(shardrep_bin); echo "${b%/shardrep}/shardrepctl"
}

case "${1:-}" in
    up) cmd_up ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    down) cmd_down ;;
    destroy) cmd_destroy ;;
    status) cmd_status ;;
    sql) shift; [ $# -ge 1 ] || die "sql needs sjc or nyc"; n=$1; shift; check_name "$n"; sandbox "$n" sql master "$@" ;;
    ctl) shift; [ $# -ge 1 ] || die "ctl needs sjc or nyc"; n=$1; shift; check_name "$n"
         "$(ctl_bin)" --config "$(service_dir "$n")/shardrep.toml" "$@" ;;
    *) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
