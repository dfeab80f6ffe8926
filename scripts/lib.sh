# Shared helpers for the scripts: sandbox settings, the client, logging.
# Source it: . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# conf/sandbox.env into the environment; variables already set win.
while IFS= read -r _line || [ -n "$_line" ]; do
    case "$_line" in ''|'#'*) continue ;; esac
    _key=${_line%%=*}
    if [ -z "${!_key+x}" ]; then export "$_key=${_line#*=}"; fi
done < "$repo_root/conf/sandbox.env"
unset _line _key

say() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# sandbox_sql NAME [client args...]: the mariadb client on a sandbox server.
sandbox_sql() { "$repo_root/scripts/sandbox.sh" sql "$@"; }

# Where scripts/workload.sh keeps the sysbench output of its last `run`
# (one log per schema), inside the sandbox's own directory.
workload_log_dir() { echo "$SHARDREP_SANDBOX_DIR/workload"; }

# Transactions of the last `workload.sh run` (the sum over its logs).
workload_txns() {
    awk '/transactions:/ {s += $2} END {print s + 0}' "$(workload_log_dir)"/*.log 2>/dev/null || echo 0
}

# Each schema's transactions in the last `workload.sh run`: one line per
# schema, "SCHEMA TRANSACTIONS PERCENT" (its share of the sum, one decimal),
# from sysbench's "transactions:" line of each log.
workload_shares() {
    awk '/transactions:/ {
            n = FILENAME; sub(/.*\//, "", n); sub(/\.log$/, "", n)
            name[++k] = n; t[k] = $2; s += $2
        }
        END { for (i = 1; i <= k; i++) printf "%s %d %.1f\n", name[i], t[i], (s > 0 ? 100 * t[i] / s : 0) }' \
        "$(workload_log_dir)"/*.log 2>/dev/null || true
}

# Port of a sandbox server name (master, replicaK).
sandbox_port() {
    case "$1" in
        master) echo "$SANDBOX_MASTER_PORT" ;;
        replica*) echo $((SANDBOX_MASTER_PORT + ${1#replica})) ;;
        *) die "unknown server $1" ;;
    esac
}
