#!/usr/bin/env bash
# Sandbox of real MariaDB servers on 127.0.0.1 for shardrep's tests, scripts
# and benchmarks: one master and N native replicas, each with its own datadir,
# socket, port and pid file under $SHARDREP_SANDBOX_DIR. Runs as root without
# systemd, from MariaDB's Debian packages (installed with apt-get if missing).
#
# Usage: scripts/sandbox.sh up [N]      master + N replicas (default 1); idempotent
#        scripts/sandbox.sh down        stop the servers this sandbox started (by pid)
#        scripts/sandbox.sh destroy     down, then remove the sandbox directory
#        scripts/sandbox.sh status      servers, ports, binlog settings, replication state
#        scripts/sandbox.sh sql NAME [mariadb client args...]   NAME: master|replica1|...
#
# Settings come from conf/sandbox.env; a variable set in the environment wins.
# Concurrent `up`s of one sandbox run one after the other: a later one waits
# for the first at most SANDBOX_LOCK_WAIT seconds (default 120), then fails.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

load_env() {
    local file=$root/conf/sandbox.env key value
    while IFS= read -r line || [ -n "$line" ]; do
        case "$line" in ''|'#'*) continue ;; esac
        key=${line%%=*}
        value=${line#*=}
        if [ -z "${!key+x}" ]; then export "$key=$value"; fi
    done < "$file"
}
load_env
base=$SHARDREP_SANDBOX_DIR
case "${SANDBOX_REPLICA_LOG_BIN:-ON}" in ON|OFF) ;; *) echo "sandbox: SANDBOX_REPLICA_LOG_BIN takes ON or OFF, got '$SANDBOX_REPLICA_LOG_BIN'" >&2; exit 2 ;; esac

die() { echo "sandbox: $*" >&2; exit 1; }
log() { echo "sandbox: $*" >&2; }

ensure_packages() {
    if ! command -v mariadbd >/dev/null 2>&1 || ! command -v mariadb >/dev/null 2>&1; then
        [ "$(id -u)" = 0 ] || die "MariaDB is not installed and installing it needs root (apt-get install mariadb-server)"
        log "installing mariadb-server from Debian's packages"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null
    fi
}

# name -> index: master=0, replicaK=K
server_index() {
    case "$1" in
        master) echo 0 ;;
        replica[1-9]*) echo "${1#replica}" ;;
        *) die "unknown server name '$1' (expected master or replicaK)" ;;
    esac
}
server_port() { echo $((SANDBOX_MASTER_PORT + $(server_index "$1"))); }
server_id() { echo $((SANDBOX_MASTER_SERVER_ID + $(server_index "$1"))); }
server_dir() { echo "$base/$1"; }
server_pid() {
    local pidfile; pidfile="$(server_dir "$1")/mariadbd.pid"
    [ -s "$pidfile" ] && cat "$pidfile"
}
server_running() {
    local pid; pid=$(server_pid "$1" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}
# Run the client as root over the server's own socket (unix_socket auth).
client() {
    local name=$1; shift
    mariadb --no-defaults -S "$(server_dir "$name")/mariadbd.sock" -uroot "$@"
}
# Single-quote a value for SQL.
sql_quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/\\\\/\\\\\\\\/g; s/'/''/g")"; }

# Whether server NAME writes a binlog: the master always (it is the source),
# a replica unless SANDBOX_REPLICA_LOG_BIN=OFF (then without log_slave_updates).
server_logs_binlog() {
    [ "$1" != master ] || return 0
    [ "${SANDBOX_REPLICA_LOG_BIN:-ON}" = ON ]
}

write_config() {
    local name=$1 dir; dir=$(server_dir "$name")
    local binlog="log_bin                        = $dir/binlog/mariadb-bin
log_bin_index                  = $dir/binlog/mariadb-bin.index" slave_updates=ON
    if ! server_logs_binlog "$name"; then
        binlog='# no log_bin: SANDBOX_REPLICA_LOG_BIN=OFF' slave_updates=OFF
    fi
    cat > "$dir/my.cnf" <<CNF
# Written by scripts/sandbox.sh; rewritten at every start.
[mariadbd]
user                           = root
datadir                        = $dir/data
socket                         = $dir/mariadbd.sock
pid-file                       = $dir/mariadbd.pid
log-error                      = $dir/error.log
port                           = $(server_port "$name")
bind-address                   = $SANDBOX_HOST
skip-name-resolve
server_id                      = $(server_id "$name")
$binlog
relay_log                      = $dir/relay/relay-bin
binlog_format                  = ROW
binlog_row_image               = FULL${SANDBOX_BINLOG_ROW_METADATA:+
binlog_row_metadata            = $SANDBOX_BINLOG_ROW_METADATA}
log_slave_updates              = $slave_updates
gtid_domain_id                 = $SANDBOX_GTID_DOMAIN_ID
skip_slave_start               = ON
report_host                    = $SANDBOX_HOST
report_port                    = $(server_port "$name")
max_connections                = 300
max_allowed_packet             = 1G
innodb_buffer_pool_size        = $SANDBOX_INNODB_BUFFER_POOL_SIZE
innodb_log_file_size           = 256M${SANDBOX_INNODB_FLUSH_METHOD:+
innodb_flush_method            = $SANDBOX_INNODB_FLUSH_METHOD}
innodb_flush_log_at_trx_commit = $SANDBOX_INNODB_FLUSH_LOG_AT_TRX_COMMIT
sync_binlog                    = $SANDBOX_SYNC_BINLOG
character_set_server           = utf8mb4
collation_server               = utf8mb4_general_ci
CNF
}

start_server() {
    local name=$1 dir; dir=$(server_dir "$name")
    write_config "$name"
    # 9>&-: the server must not inherit the descriptor of `up`'s lock
    # ($base/.lock, see cmd_up): it would hold the lock for as long as it
    # runs, and every later `up` would wait for it.
    setsid mariadbd --defaults-file="$dir/my.cnf" 9>&- >>"$dir/mariadbd.out" 2>&1 < /dev/null &
    for _ in $(seq 1 600); do
        if client "$name" -e 'SELECT 1' >/dev/null 2>&1; then return 0; fi
        if ! kill -0 $! 2>/dev/null; then
            tail -20 "$dir/error.log" >&2 || true
            die "$name exited during start; see $dir/error.log"
        fi
        sleep 0.1
    done
    die "$name did not answer within 60 s; see $dir/error.log"
}

bootstrap_users() {
    local name=$1
    local pw repl_pw
    pw=$(sql_quote "$SANDBOX_PASSWORD")
    repl_pw=$(sql_quote "$SANDBOX_REPL_PASSWORD")
    client "$name" <<SQL
SET sql_log_bin = 0;
CREATE USER IF NOT EXISTS '$SANDBOX_USER'@'127.0.0.1' IDENTIFIED BY $pw;
CREATE USER IF NOT EXISTS '$SANDBOX_USER'@'localhost' IDENTIFIED BY $pw;
GRANT ALL PRIVILEGES ON *.* TO '$SANDBOX_USER'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO '$SANDBOX_USER'@'localhost' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS '$SANDBOX_REPL_USER'@'127.0.0.1' IDENTIFIED BY $repl_pw;
GRANT REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR ON *.* TO '$SANDBOX_REPL_USER'@'127.0.0.1';
SQL
}

create_server() {
    local name=$1 dir; dir=$(server_dir "$name")
    log "creating $name in $dir (port $(server_port "$name"), server_id $(server_id "$name"))"
    rm -rf "$dir"
    mkdir -p "$dir/data" "$dir/binlog" "$dir/relay"
    write_config "$name"
    mariadb-install-db --defaults-file="$dir/my.cnf" --auth-root-authentication-method=socket \
        --skip-test-db 9>&- >"$dir/install.log" 2>&1 \
        || { tail -20 "$dir/install.log" >&2; die "mariadb-install-db failed for $name"; }
    start_server "$name"
    bootstrap_users "$name"
    # A clean binlog: nothing of the bootstrap is replicated.
    if server_logs_binlog "$name"; then client "$name" -e 'RESET MASTER'; fi
    if [ "$name" != master ]; then
        client "$name" -e "SET GLOBAL gtid_slave_pos = ''"
        configure_replication "$name"
        touch "$dir/native-replication"
    fi
}

configure_replication() {
    local name=$1
    client "$name" <<SQL
STOP SLAVE;
CHANGE MASTER TO MASTER_HOST = '$SANDBOX_HOST', MASTER_PORT = $SANDBOX_MASTER_PORT,
    MASTER_USER = '$SANDBOX_REPL_USER', MASTER_PASSWORD = $(sql_quote "$SANDBOX_REPL_PASSWORD"),
    MASTER_USE_GTID = $SANDBOX_REPLICA_USE_GTID, MASTER_CONNECT_RETRY = 1;
START SLAVE;
SQL
}

up_one() {
    local name=$1 dir; dir=$(server_dir "$name")
    if server_running "$name"; then
        return 0
    fi
    if [ -d "$dir/data/mysql" ]; then
        log "starting $name (port $(server_port "$name"))"
        start_server "$name"
        # Replicas come up with their slave threads stopped (skip_slave_start);
        # native replication restarts only where the sandbox itself set it up,
        # and not while a shardrep service applies to the replica (a catalog
        # with restart rows: a takeover that was not handed back), since two
        # appliers would diverge.
        if [ "$name" != master ] && [ -e "$dir/native-replication" ]; then
            local owners='' catalog rows
            for catalog in $(client "$name" -N -e "SELECT TABLE_SCHEMA FROM information_schema.TABLES
                    WHERE TABLE_NAME = 'restart_position'" 2>/dev/null || true); do
                rows=$(client "$name" -N -e "SELECT COUNT(*) FROM \`${catalog//\`/\`\`}\`.restart_position" \
                    2>/dev/null || echo 0)
                [ "${rows:-0}" = 0 ] || owners="$owners${owners:+,}$catalog"
            done
            if [ -n "$owners" ]; then
                log "$name is applied by shardrep (catalog $owners): native replication left stopped"
            elif [ -z "$(client "$name" -N -e 'SHOW SLAVE STATUS' 2>/dev/null)" ]; then
                # RESET SLAVE ALL (a promoted replica): nothing to start.
                log "$name has no native replication configured (promoted to a master?): left as it is"
            else
                client "$name" -e 'START SLAVE'
            fi
        fi
    else
        create_server "$name"
    fi
}

cmd_up() {
    local replicas=${1:-1} k
    [[ "$replicas" =~ ^[0-9]+$ ]] || die "up takes a replica count, got '$replicas'"
    ensure_packages
    mkdir -p "$base"
    # One `up` at a time per sandbox directory. The wait is bounded and
    # says what it waits for; the servers started below do not inherit fd 9
    # (start_server), so the lock is released when this script exits, even
    # when it fails half-way.
    local lock=$base/.lock wait=${SANDBOX_LOCK_WAIT:-120}
    [[ "$wait" =~ ^[0-9]+$ ]] || die "SANDBOX_LOCK_WAIT takes seconds, got '$wait'"
    exec 9>"$lock"
    if ! flock -n 9; then
        log "waiting up to $wait s for $lock: another 'sandbox.sh up' of this sandbox holds it (processes with it open: $(lock_users "$lock"))"
        if ! flock -w "$wait" 9; then
            local users; users=$(lock_users "$lock")
            case "$users" in
                *mariadbd*) die "$lock is still held after $wait s, by a server that inherited it from an older sandbox.sh (processes with it open: $users); 'scripts/sandbox.sh down' stops the servers and frees it" ;;
                *) die "another 'sandbox.sh up' still holds $lock after $wait s (processes with it open: $users)" ;;
            esac
        fi
    fi
    up_one master
    for k in $(seq 1 "$replicas"); do up_one "replica$k"; done
    flock -u 9
    exec 9>&-
    cmd_status
}

# The other processes that have FILE open (this script excepted), as
# "pid N (command line), ...", or "none found": who holds (or also waits
# for) a lock that is not free.
lock_users() {
    local file=$1 fd pid cmd out='' seen=' '
    while IFS= read -r fd; do
        pid=${fd#/proc/}; pid=${pid%%/*}
        if [ "$pid" = "$$" ] || [ "$pid" = "$BASHPID" ]; then continue; fi
        case "$seen" in *" $pid "*) continue ;; esac
        seen="$seen$pid "
        # Gone by now (such as the find below, which sees itself): skipped.
        cmd=$(tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline") || continue
        cmd=${cmd% }; [ -n "$cmd" ] || continue
        [ "${#cmd}" -le 100 ] || cmd="${cmd:0:100}..."
        out="$out${out:+, }pid $pid ($cmd)"
    done < <(find /proc/[0-9]*/fd -maxdepth 1 -lname "$file" 2>/dev/null)
    echo "${out:-none found}"
}

servers() {
    [ -d "$base" ] || return 0
    local d
    for d in "$base"/master "$base"/replica*; do
        [ -d "$d" ] && basename "$d"
    done | sort -V
}

cmd_down() {
    local name pid
    for name in $(servers); do
        server_running "$name" || continue
        pid=$(server_pid "$name")
        log "stopping $name (pid $pid)"
        kill -TERM "$pid"
        for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            log "$name did not stop within 60 s; killing it"
            kill -KILL "$pid" || true
        fi
    done
}

cmd_destroy() {
    cmd_down
    [ -d "$base" ] && rm -rf "$base"
    log "removed $base"
}

cmd_status() {
    local name
    printf '%-9s %-8s %-6s %-9s %-6s %-7s %-9s %-6s %-22s %s\n' \
        SERVER STATE PORT SERVER_ID LOG_BIN FORMAT ROW_IMAGE META GTID_BINLOG_POS REPLICATION
    for name in $(servers); do
        if ! server_running "$name"; then
            printf '%-9s %-8s %-6s\n' "$name" stopped "$(server_port "$name")"
            continue
        fi
        local vars repl=-
        vars=$(client "$name" -N -B -e "SELECT @@server_id, IF(@@log_bin,'ON','OFF'), @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, IF(@@gtid_binlog_pos='','(empty)',@@gtid_binlog_pos)")
        if [ "$name" != master ]; then
            repl=$(client "$name" -e 'SHOW SLAVE STATUS\G' | awk -F': ' '
                /^ *Slave_IO_Running:/ {io=$2} /^ *Slave_SQL_Running:/ {sql=$2}
                /^ *Relay_Master_Log_File:/ {f=$2} /^ *Exec_Master_Log_Pos:/ {p=$2}
                /^ *Seconds_Behind_Master:/ {lag=$2} /^ *Last_Errno:/ {e=$2}
                /^ *Gtid_IO_Pos:/ {g=$2}
                END { if (io == "") print "not configured";
                      else printf "io=%s sql=%s exec=%s:%s lag=%s last_errno=%s gtid_io_pos=%s", io, sql, f, p, lag, e, (g == "" ? "(empty)" : g) }')
        fi
        # shellcheck disable=SC2086
        printf '%-9s %-8s %-6s %-9s %-6s %-7s %-9s %-6s %-22s %s\n' "$name" running "$(server_port "$name")" $vars "$repl"
    done
}

cmd_sql() {
    [ $# -ge 1 ] || die "sql needs a server name (master, replica1, ...)"
    local name=$1; shift
    server_index "$name" >/dev/null
    server_running "$name" || die "$name is not running (scripts/sandbox.sh up)"
    client "$name" "$@"
}

case "${1:-}" in
    up) shift; cmd_up "$@" ;;
    down) cmd_down ;;
    destroy) cmd_destroy ;;
    status) cmd_status ;;
    sql) shift; cmd_sql "$@" ;;
    *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
