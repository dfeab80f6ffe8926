#!/usr/bin/env bash
# Compares every table of the given schemas on two sandbox servers with
# CHECKSUM TABLE ... EXTENDED (a full scan of each table); prints one line per
# table with its checksum and exits non-zero
# when any table differs or is missing on one side.
#
# Usage: scripts/verify.sh LEFT RIGHT SCHEMA...   (e.g. master replica1 sb01 sb02)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -ge 3 ] || { sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
left=$1 right=$2; shift 2

checksums() {
    local server=$1 schema=$2 tables
    tables=$(sandbox_sql "$server" -N -B -e "SELECT CONCAT('\`', REPLACE(TABLE_SCHEMA,'\`','\`\`'), '\`.\`', REPLACE(TABLE_NAME,'\`','\`\`'), '\`') FROM information_schema.TABLES WHERE TABLE_SCHEMA = '$schema' AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME" | paste -sd, -)
    [ -n "$tables" ] || return 0
    sandbox_sql "$server" -N -B -e "CHECKSUM TABLE $tables EXTENDED"
}

differ=0 count=0
for schema in "$@"; do
    [[ "$schema" =~ ^[A-Za-z0-9_]+$ ]] || die "verify.sh: schema names are [A-Za-z0-9_]+, got '$schema'"
    l=$(checksums "$left" "$schema"); r=$(checksums "$right" "$schema")
    if [ -z "$l" ] && [ -z "$r" ]; then echo "EMPTY    $schema has no tables on either server"; continue; fi
    # Tables only on the right side.
    while IFS=$'\t' read -r table _; do
        [ -n "$table" ] || continue
        if ! printf '%s\n' "$l" | awk -F'\t' -v t="$table" '$1 == t {found=1} END {exit !found}'; then
            printf 'DIFFERS  %-30s only on %s\n' "$table" "$right"
            differ=1
        fi
    done <<< "$r"
    while IFS=$'\t' read -r table sum; do
        [ -n "$table" ] || continue
        count=$((count + 1))
        other=$(printf '%s\n' "$r" | awk -F'\t' -v t="$table" '$1 == t {print $2}')
        if [ "$sum" = "$other" ]; then
            printf 'OK       %-30s %s\n' "$table" "$sum"
        else
            printf 'DIFFERS  %-30s %s=%s %s=%s\n' "$table" "$left" "$sum" "$right" "${other:-missing}"
            differ=1
        fi
    done <<< "$l"
done
if [ "$differ" = 0 ]; then say "verify: $count tables identical on $left and $right"; else say "verify: tables differ between $left and $right"; exit 1; fi
