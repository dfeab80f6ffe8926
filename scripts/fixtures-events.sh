#!/usr/bin/env bash
# Regenerates the small binlog fixtures of the event decoder
# (src/extractor/decode.rs, src/extractor/mariadb.rs) under
# tests/fixtures/binlog/events/, from a *private* MariaDB sandbox (its own
# directory and port, never the default sandbox the tests use).
#
# Each scenario starts from RESET MASTER (so GTIDs start at 0-1-1 and the
# first file is mariadb-bin.000001) and keeps the server's file names, one
# directory per scenario:
#
#   crc32/   binlog_checksum=CRC32: standalone DDL (CREATE DATABASE/TABLE),
#            row INSERT/UPDATE/DELETE (MariaDB event set, B17: GTID,
#            ANNOTATE_ROWS, TABLE_MAP, *_ROWS_V1, XID, BINLOG_CHECKPOINT,
#            GTID_LIST), a MyISAM insert (BEGIN ... COMMIT query) and a
#            mixed InnoDB/MyISAM transaction rolled back in STATEMENT format
#            (ROLLBACK query); closed by FLUSH (ROTATE).
#   none/    the same statements with binlog_checksum=NONE.
#   b16/     case B16: checksum CRC32 -> NONE -> (FLUSH) NONE -> CRC32, then a
#            clean shutdown (STOP event ends mariadb-bin.000004) and the file
#            the restarted server opens (closed by FLUSH).
#   b15/     case B15 with log_bin_compress=ON (min length 10) in schema
#            rt_comp, then the same statements uncompressed in rt_plain.
#   b18/     case B18 (statement events with session context, default db not
#            the changed db) plus USER_VAR of every type, RAND, sql_mode,
#            SET NAMES, lc_time_names, auto_increment_* and a DDL.
#   gcommit/ two transactions group-committed together
#            (binlog_commit_wait_count=2): GTIDs with a commit id.
#   xa/      an XA transaction: GTID with FL_PREPARED_XA + XA_PREPARE
#            (type 38), then XA COMMIT with FL_COMPLETED_XA.
#
# The tests assert exact positions and contents of these files: after
# regenerating, update the expected values in the tests (mariadb-binlog
# --hexdump shows them).
#
# Usage: scripts/fixtures-events.sh [--keep] [SCENARIO...]
#   --keep      leave the private sandbox running afterwards
#   SCENARIO    only these (e.g. b15 b18); default all
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
out=$root/tests/fixtures/binlog/events

export SHARDREP_SANDBOX_DIR=${FIXTURE_SANDBOX_DIR:-/tmp/fixture-events}
export SANDBOX_MASTER_PORT=${FIXTURE_MASTER_PORT:-24306}
export SANDBOX_MASTER_SERVER_ID=1
bindir=$SHARDREP_SANDBOX_DIR/master/binlog

keep=0
only=()
for arg in "$@"; do
    case "$arg" in
        --keep) keep=1 ;;
        -*) echo "unknown option $arg" >&2; exit 2 ;;
        *) only+=("$arg") ;;
    esac
done

say() { printf 'fixtures-events: %s\n' "$*" >&2; }
die() { printf 'fixtures-events: error: %s\n' "$*" >&2; exit 1; }

sandbox() { "$here/sandbox.sh" "$@"; }
mariadb() { sandbox sql master "$@"; }

wanted() {
    [ ${#only[@]} -eq 0 ] && return 0
    local s
    for s in "${only[@]}"; do [ "$s" = "$1" ] && return 0; done
    return 1
}

# A fresh binlog (mariadb-bin.000001, GTIDs from 0-1-1) with the given
# checksum, every test schema dropped without logging.
fresh() {
    local checksum=$1
    mariadb <<SQL
SET sql_log_bin = 0;
DROP DATABASE IF EXISTS fx; DROP DATABASE IF EXISTS rt_crc; DROP DATABASE IF EXISTS rt_comp;
DROP DATABASE IF EXISTS rt_plain; DROP DATABASE IF EXISTS shard_q1; DROP DATABASE IF EXISTS shard_q2;
DROP DATABASE IF EXISTS gc; DROP DATABASE IF EXISTS xa;
SET GLOBAL binlog_checksum = '$checksum';
SET GLOBAL log_bin_compress = OFF;
SET GLOBAL log_bin_compress_min_len = 256;
SET GLOBAL binlog_commit_wait_count = 0;
SET GLOBAL binlog_format = 'ROW';
RESET MASTER;
SQL
}

# Copies the listed binlog files of the server into $out/$1/.
capture() {
    local name=$1; shift
    rm -rf "${out:?}/$name"
    mkdir -p "$out/$name"
    local f
    for f in "$@"; do
        cp "$bindir/$f" "$out/$name/$f"
        chmod 0644 "$out/$name/$f"
    done
    say "$name: $(cd "$out/$name" && ls | tr '\n' ' ')"
}

# The row workload of crc32/ and none/.
row_workload() {
    mariadb <<'SQL'
CREATE DATABASE fx;
CREATE TABLE fx.t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB;
CREATE TABLE fx.m (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=MyISAM;
INSERT INTO fx.t VALUES (1, 'one'), (2, 'two');
UPDATE fx.t SET v = 'uno' WHERE id = 1;
DELETE FROM fx.t WHERE id = 2;
INSERT INTO fx.m VALUES (1, 'myisam');
SET SESSION binlog_format = 'STATEMENT';
BEGIN; INSERT INTO fx.t VALUES (3, 'gone'); INSERT INTO fx.m VALUES (2, 'kept'); ROLLBACK;
SET SESSION binlog_format = 'ROW';
FLUSH BINARY LOGS;
SQL
}

scenario_crc32() {
    fresh CRC32
    row_workload
    capture crc32 mariadb-bin.000001
}

scenario_none() {
    fresh NONE
    row_workload
    capture none mariadb-bin.000001
}

# Case B16 (shared/cases/B16.md), then a clean restart. After each
# rotation the script waits for the binlog background thread to log the
# BINLOG_CHECKPOINT of the previous file, so that it comes before the next
# transaction (its place is otherwise a matter of timing, and the tests assert
# exact positions).
scenario_b16() {
    fresh CRC32
    mariadb <<'SQL'
CREATE DATABASE rt_crc; USE rt_crc;
CREATE TABLE k (id INT PRIMARY KEY, v VARCHAR(20));
INSERT INTO k VALUES (1, 'crc32-file');
SET GLOBAL binlog_checksum = 'NONE';
SQL
    sleep 1
    mariadb rt_crc -e "INSERT INTO k VALUES (2, 'no-checksum-file'); FLUSH BINARY LOGS;"
    sleep 1
    mariadb rt_crc -e "INSERT INTO k VALUES (3, 'after-flush'); SET GLOBAL binlog_checksum = 'CRC32';"
    sleep 1
    mariadb rt_crc -e "INSERT INTO k VALUES (4, 'crc32-again'); UPDATE k SET v = CONCAT(v, '!') WHERE id IN (2,3);"
    say "b16: restarting the private master (STOP event)"
    sandbox down
    sandbox up 0 >/dev/null
    mariadb -e 'FLUSH BINARY LOGS'
    capture b16 mariadb-bin.000001 mariadb-bin.000002 mariadb-bin.000003 mariadb-bin.000004 mariadb-bin.000005
}

# Case B15 (shared/cases/B15.md) compressed, then uncompressed.
scenario_b15() {
    fresh CRC32
    local schema
    for schema in rt_comp rt_plain; do
        if [ "$schema" = rt_comp ]; then
            mariadb -e 'SET GLOBAL log_bin_compress = ON; SET GLOBAL log_bin_compress_min_len = 10;'
        else
            mariadb -e 'SET GLOBAL log_bin_compress = OFF;'
        fi
        # A new connection sees the new global values.
        mariadb <<SQL
CREATE DATABASE $schema; USE $schema;
CREATE TABLE cz (id INT PRIMARY KEY, b INT, pad VARCHAR(500));
INSERT INTO cz VALUES (1, 100, REPEAT('p', 400)), (2, 200, 'short');
UPDATE cz SET b = 888888 WHERE id = 1;
DELETE FROM cz WHERE id = 2;
INSERT INTO cz VALUES (3, 3, REPEAT('q', 300));
SQL
    done
    mariadb -e 'SET GLOBAL log_bin_compress = OFF; SET GLOBAL log_bin_compress_min_len = 256; FLUSH BINARY LOGS;'
    capture b15 mariadb-bin.000001
}

# Case B18 (shared/cases/B18.md) and more statement events.
scenario_b18() {
    fresh CRC32
    mariadb <<'SQL'
CREATE DATABASE shard_q1; CREATE DATABASE shard_q2;
CREATE TABLE shard_q1.a (id INT AUTO_INCREMENT PRIMARY KEY, v INT, ts DATETIME);
CREATE TABLE shard_q2.b (id INT PRIMARY KEY, v INT);
INSERT INTO shard_q2.b VALUES (1, 0);
SET SESSION binlog_format = 'STATEMENT'; SET SESSION time_zone = '+02:00'; SET TIMESTAMP = 1700000000;
USE shard_q1;
INSERT INTO a (v, ts) VALUES (10, NOW());
INSERT INTO a (v, ts) VALUES (LAST_INSERT_ID() + 100, NOW());
UPDATE shard_q2.b SET v = v + 5 WHERE id = 1;
SET @x := 7;
INSERT INTO shard_q2.b VALUES (2, @x);
SET SESSION binlog_format = 'ROW'; SET TIMESTAMP = DEFAULT;
CREATE TABLE shard_q2.uv (s VARBINARY(20), r DOUBLE, i BIGINT, u BIGINT UNSIGNED, d DECIMAL(10,3), n INT, f DOUBLE);
SET SESSION binlog_format = 'STATEMENT'; SET TIMESTAMP = 1700000001;
SET @s = 'abc', @r = 1.5e0, @i = -5, @u = CAST(18446744073709551615 AS UNSIGNED), @d = -12.345, @n = NULL;
INSERT INTO shard_q2.uv (s, r, i, u, d, n) VALUES (@s, @r, @i, @u, @d, @n);
SET SESSION sql_mode = 'ANSI_QUOTES,NO_AUTO_VALUE_ON_ZERO', SESSION lc_time_names = 'de_DE';
SET SESSION auto_increment_increment = 5, SESSION auto_increment_offset = 2;
INSERT INTO shard_q1.a (v) VALUES (7);
SET SESSION sql_mode = DEFAULT, SESSION lc_time_names = DEFAULT;
SET SESSION auto_increment_increment = 1, SESSION auto_increment_offset = 1;
SET NAMES latin1;
INSERT INTO shard_q2.uv (s) VALUES ('café');
SET NAMES utf8mb4;
INSERT INTO shard_q2.uv (f) VALUES (RAND(1) + RAND());
SET foreign_key_checks = 0, unique_checks = 0;
INSERT INTO shard_q2.b VALUES (3, 3);
SET foreign_key_checks = 1, unique_checks = 1;
SET SESSION binlog_format = 'ROW'; SET TIMESTAMP = DEFAULT;
ALTER TABLE shard_q2.b ADD COLUMN w INT;
FLUSH BINARY LOGS;
SQL
    capture b18 mariadb-bin.000001
}

# Two transactions committed in one group commit.
scenario_gcommit() {
    fresh CRC32
    mariadb -e 'CREATE DATABASE gc; CREATE TABLE gc.t (id INT PRIMARY KEY) ENGINE=InnoDB;'
    mariadb -e 'SET GLOBAL binlog_commit_wait_count = 2; SET GLOBAL binlog_commit_wait_usec = 5000000;'
    # The first commit waits (up to 5 s) for a second one to join its group;
    # the pause puts it first in the group.
    mariadb -e 'INSERT INTO gc.t VALUES (1)' &
    local first=$!
    sleep 1
    mariadb -e 'INSERT INTO gc.t VALUES (2)'
    wait "$first"
    mariadb -e 'SET GLOBAL binlog_commit_wait_count = 0; FLUSH BINARY LOGS;'
    capture gcommit mariadb-bin.000001
}

# An XA transaction (prepared, then committed).
scenario_xa() {
    fresh CRC32
    mariadb <<'SQL'
CREATE DATABASE xa; CREATE TABLE xa.t (id INT PRIMARY KEY) ENGINE=InnoDB;
XA START 'fx-gtrid', 'fx-bqual', 7; INSERT INTO xa.t VALUES (1); XA END 'fx-gtrid', 'fx-bqual', 7;
XA PREPARE 'fx-gtrid', 'fx-bqual', 7;
XA COMMIT 'fx-gtrid', 'fx-bqual', 7;
FLUSH BINARY LOGS;
SQL
    capture xa mariadb-bin.000001
}

say "private sandbox $SHARDREP_SANDBOX_DIR on port $SANDBOX_MASTER_PORT"
sandbox up 0 >/dev/null
mkdir -p "$out"
for s in crc32 none b16 b15 b18 gcommit xa; do
    if wanted "$s"; then
        say "scenario $s"
        "scenario_$s"
    fi
done
fresh CRC32
if [ "$keep" = 0 ]; then sandbox down; fi
say "done: $(du -sh "$out" | cut -f1) in $out"
