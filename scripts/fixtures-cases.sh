#!/usr/bin/env bash
# Regenerates the binlog fixtures of the DECODE cases (shared/cases/BNN.md)
# under tests/fixtures/binlog/cases/, from a *private* MariaDB sandbox (its own
# directory and port, never the default sandbox the tests use):
#
#   BNN.bin   exactly the statements of case BNN, between two
#             FLUSH BINARY LOGS (the closed binlog file is copied whole:
#             magic, FORMAT_DESCRIPTION, GTID_LIST, BINLOG_CHECKPOINT, then
#             the case's transactions). The server runs with
#             binlog_row_metadata=FULL (conf of scripts/sandbox.sh).
#   B09-nolog.bin     case B09 with binlog_row_metadata=NO_LOG (no signedness)
#   B07-minimal.bin   case B07 with binlog_row_metadata=MINIMAL
#   X01-types.bin     edge values of the other column types (see x01_sql)
#   X02-oldtemporal.bin  the pre-10.1 TIME/DATETIME/TIMESTAMP encodings
#                     (mysql56_temporal_format=OFF; see x02_sql)
#   X03-compressed.bin   log_bin_compress=ON: compressed rows events, and
#                     compressed columns (see x03_sql)
#
# Case B11 (row events of 16-78 MB) is NOT written to the fixture directory
# (about 170 MB): with --with-b11 it is written to $B11_OUT (default
# target/fixtures/B11.bin), which the unit test in src/extractor/rows.rs reads
# when present.
#
# The SQL of each case is kept identical to its case file; when
# ../shared/cases/ exists the script checks that and stops on a difference.
#
# Usage: scripts/fixtures-cases.sh [--keep] [--with-b11] [CASE...]
#   --keep      leave the private sandbox running afterwards
#   --with-b11  also generate B11 (see above)
#   CASE        only these fixtures (e.g. B01 X01-types); default all
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
out=$root/tests/fixtures/binlog/cases
cases_dir=$root/../shared/cases
B11_OUT=${B11_OUT:-$root/target/fixtures/B11.bin}

# The private sandbox: its own directory, port and server id.
export SHARDREP_SANDBOX_DIR=${FIXTURE_SANDBOX_DIR:-/tmp/fixture-cases}
export SANDBOX_MASTER_PORT=${FIXTURE_MASTER_PORT:-23306}
export SANDBOX_MASTER_SERVER_ID=1

keep=0
with_b11=0
only=()
for arg in "$@"; do
    case "$arg" in
        --keep) keep=1 ;;
        --with-b11) with_b11=1 ;;
        -*) echo "unknown option $arg" >&2; exit 2 ;;
        *) only+=("$arg") ;;
    esac
done

say() { printf 'fixtures: %s\n' "$*" >&2; }
die() { printf 'fixtures: error: %s\n' "$*" >&2; exit 1; }

# The client on the private master (root over its socket).
mariadb() { "$here/sandbox.sh" sql master "$@"; }

# The reproducer of a case: the SQL of tests/cases/BNN.sql (copied from
# shared/cases/BNN.md by scripts/sync-cases.py), or for B14 the shell snippet
# of its case file that pipes generated SQL into `mariadb`.
case_text() {
    case "$1" in
        B14) cat <<'SH'
{ echo "CREATE DATABASE rt_wide; USE rt_wide;"
  printf "CREATE TABLE w (id INT PRIMARY KEY"; for i in $(seq 1 259); do printf ", c%d INT NULL" $i; done; echo ");"
  printf "INSERT INTO w VALUES (1"; for i in $(seq 1 259); do printf ", %d" $i; done; echo ");"
  echo "UPDATE w SET c259 = -259, c1 = NULL WHERE id = 1;"; } | mariadb
SH
            ;;
        *)
            [ -f "$root/tests/cases/$1.sql" ] || die "no SQL for case $1"
            cat "$root/tests/cases/$1.sql"
            ;;
    esac
}

# Shell snippets (run with eval) rather than SQL.
case_is_shell() { [ "$1" = B14 ]; }

# Databases a case creates (dropped before it runs, outside the fixture).
case_dbs() {
    case "$1" in
        B01) echo rt_dec ;; B02) echo rt_time ;; B04) echo rt_zero ;;
        B05) echo rt_year ;; B07) echo rt_enum ;; B08) echo rt_json ;;
        B09) echo rt_uns ;; B11) echo rt_big ;; B12) echo rt_min rt_noblob ;;
        B14) echo rt_wide ;; X01) echo fx_types ;; X02) echo fx_old ;; X03) echo fx_comp ;;
        *) die "no databases for case $1" ;;
    esac
}

# Edge values of the column types the cases do not cover (fixture X01-types):
# integer limits, BIT, FLOAT/DOUBLE, DECIMAL shapes, every fsp of DATETIME,
# TIMESTAMP and TIME, CHAR/BINARY padding (and CHAR over 255 bytes), VARCHAR
# with 2-byte lengths, BLOB sizes, GEOMETRY, UUID, INET6, ENUM with 2-byte
# index, SET of 64 members, and character-set metadata of every kind.
x01_sql() {
    local i enum300 set64
    enum300=$(for i in $(seq 1 300); do printf "'e%d'," "$i"; done)
    set64=$(for i in $(seq 1 64); do printf "'s%d'," "$i"; done)
    cat <<SQL
CREATE DATABASE fx_types; USE fx_types; SET SESSION sql_mode = ''; SET time_zone = '+00:00';
CREATE TABLE n (id INT PRIMARY KEY, ti TINYINT, si SMALLINT, mi MEDIUMINT, bi BIGINT, mu MEDIUMINT UNSIGNED,
  yr YEAR, iu INT UNSIGNED, b1 BIT(1), b10 BIT(10), b64 BIT(64), fl FLOAT, db DOUBLE,
  d1 DECIMAL(1,0), d2 DECIMAL(5,5), d3 DECIMAL(18,9), d4 DECIMAL(19,1), d5 DECIMAL(9,0) UNSIGNED, d6 DECIMAL(65,0));
INSERT INTO n VALUES
 (1, -128, -32768, -8388608, -9223372036854775808, 16777215, 0, 4294967295, b'1', b'1000000001',
     b'1111111111111111111111111111111111111111111111111111111111111111', -3.40282e38, -2.2250738585072014e-308,
     -9, -0.00001, -123456789.987654321, 123456789012345678.9, 999999999,
     -99999999999999999999999999999999999999999999999999999999999999999),
 (2, 127, 32767, 8388607, 9223372036854775807, 0, 2155, 0, b'0', b'0', b'0', 1.5, 0.1,
     0, 0.12345, 0.000000001, -0.1, 0, 10000000000000000000000000000000000000000000000000000000000000000),
 (3, -1, -1, -1, -1, 1, 1901, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
CREATE TABLE t (id INT PRIMARY KEY, dt0 DATETIME, dt1 DATETIME(1), dt2 DATETIME(2), dt3 DATETIME(3),
  dt4 DATETIME(4), dt5 DATETIME(5), dt6 DATETIME(6), ts0 TIMESTAMP NULL, ts1 TIMESTAMP(1) NULL,
  ts2 TIMESTAMP(2) NULL, ts3 TIMESTAMP(3) NULL, ts4 TIMESTAMP(4) NULL, ts5 TIMESTAMP(5) NULL,
  ts6 TIMESTAMP(6) NULL, t1 TIME(1), t3 TIME(3), t4 TIME(4), t5 TIME(5), d DATE);
INSERT INTO t VALUES
 (1, '9999-12-31 23:59:59', '9999-12-31 23:59:59.9', '9999-12-31 23:59:59.99', '9999-12-31 23:59:59.999',
     '9999-12-31 23:59:59.9999', '9999-12-31 23:59:59.99999', '9999-12-31 23:59:59.999999',
     '2038-01-19 03:14:07', '2038-01-19 03:14:07.9', '2038-01-19 03:14:07.99', '2038-01-19 03:14:07.999',
     '2038-01-19 03:14:07.9999', '2038-01-19 03:14:07.99999', '2038-01-19 03:14:07.999999',
     '-838:59:59.9', '-838:59:59.999', '-00:00:00.0001', '-00:00:00.00001', '9999-12-31'),
 (2, '1000-01-01 00:00:00', '2024-02-29 12:34:56.1', '2024-02-29 12:34:56.12', '2024-02-29 12:34:56.123',
     '2024-02-29 12:34:56.1234', '2024-02-29 12:34:56.12345', '2024-02-29 12:34:56.123456',
     '1970-01-01 00:00:01', '1970-01-01 00:00:01.1', '1970-01-01 00:00:01.01', '1970-01-01 00:00:01.001',
     '1970-01-01 00:00:01.0001', '1970-01-01 00:00:01.00001', '1970-01-01 00:00:01.000001',
     '838:59:59.9', '-12:34:56.123', '00:00:00.0001', '-01:00:00.00001', '1000-01-01'),
 (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
CREATE TABLE s (id INT PRIMARY KEY, c10 CHAR(10) CHARACTER SET latin1, c100 CHAR(100) CHARACTER SET utf8mb4,
  bn4 BINARY(4), bn16 BINARY(16), vc VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  vc300 VARCHAR(300) CHARACTER SET latin1, vb VARBINARY(20), tx TEXT CHARACTER SET utf8mb3, tb TINYBLOB,
  mb MEDIUMBLOB, lb LONGBLOB, en ENUM('a','b') CHARACTER SET latin1, st SET('x','y') CHARACTER SET utf8mb4,
  g GEOMETRY, u UUID, i6 INET6, js JSON, e300 ENUM(${enum300%,}), s64 SET(${set64%,}));
INSERT INTO s VALUES
 (1, 'ab  ', CONCAT(REPEAT('é', 99), 'z'), X'01000000', X'00000000000000000000000000000000', 'ü ', REPEAT('q', 300),
     X'00FF00', 'text', X'', X'00', X'DEADBEEF00', 'b', 'x,y', ST_GeomFromText('POINT(1 2)'),
     '123e4567-e89b-12d3-a456-426614174000', '::1', '{"k": [1, 2]}', 'e300', 's1,s64'),
 (2, '', '', X'00000001', X'FF', '', '', X'', '', NULL, NULL, NULL, '', '', NULL, NULL, '::ffff:1.2.3.4', NULL, 'e1', ''),
 (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
CREATE TABLE s2 (id INT PRIMARY KEY, a VARCHAR(5) CHARACTER SET utf8mb4, b VARCHAR(5) CHARACTER SET utf8mb4,
  c TEXT CHARACTER SET utf8mb4, d CHAR(3) CHARACTER SET latin1, e BLOB, f ENUM('p','q') CHARACTER SET utf8mb4,
  g SET('p','q') CHARACTER SET utf8mb4, h ENUM('r') CHARACTER SET latin1);
INSERT INTO s2 VALUES (1, 'a', 'b', 'c', 'd', X'0E', 'q', 'p,q', 'r');
CREATE TABLE c (id INT PRIMARY KEY, v VARCHAR(1000) COMPRESSED, b BLOB COMPRESSED,
  v2 VARCHAR(100) COMPRESSED CHARACTER SET latin1);
INSERT INTO c VALUES (1, REPEAT('abc', 300), REPEAT('xyz', 400), 'hi'), (2, '', '', NULL), (3, 'short', 'a', REPEAT('q', 100));
SQL
}

# The pre-10.1 temporal encodings (run with mysql56_temporal_format=OFF):
# TIME (3 bytes), DATETIME (8 bytes), TIMESTAMP (4 bytes). Table h has a
# DATETIME(6) in MariaDB's old "hires" format, which the table map does not
# describe (no metadata): the decoder must refuse it, never guess.
x02_sql() {
    cat <<'SQL'
CREATE DATABASE fx_old; USE fx_old; SET SESSION sql_mode = ''; SET time_zone = '+00:00';
CREATE TABLE o (id INT PRIMARY KEY, t TIME, dt DATETIME, ts TIMESTAMP NULL, d DATE);
INSERT INTO o VALUES (1, '-838:59:59', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '0000-00-00'),
 (2, '-00:00:01', '2023-00-15 10:00:00', '1970-01-01 00:00:01', '2023-05-00'),
 (3, '838:59:59', '9999-12-31 23:59:59', '2038-01-19 03:14:07', '9999-12-31'),
 (4, '-16:08:04', '1000-01-01 00:00:00', NULL, NULL);
CREATE TABLE h (id INT PRIMARY KEY, dt6 DATETIME(6));
INSERT INTO h VALUES (1, '2023-05-01 10:00:00.000001');
SQL
}

# Binlog compression (run with log_bin_compress=ON, min length 256): the
# rows events over 256 bytes are WRITE/UPDATE/DELETE_ROWS_COMPRESSED_V1
# (166-168); the last INSERT is small and stays uncompressed.
x03_sql() {
    cat <<'SQL'
CREATE DATABASE fx_comp; USE fx_comp;
CREATE TABLE c (id INT PRIMARY KEY, v VARCHAR(1000) COMPRESSED, t TEXT);
INSERT INTO c VALUES (1, REPEAT('abc', 300), REPEAT('t', 500)), (2, 'two', 'small'), (3, NULL, NULL);
UPDATE c SET t = REPEAT('u', 600) WHERE id = 2;
DELETE FROM c WHERE id = 1;
INSERT INTO c VALUES (4, 'tiny', 'x');
SQL
}

binlog_dir=$SHARDREP_SANDBOX_DIR/master/binlog

# capture NAME SQL-PRODUCER [SETUP [TEARDOWN]]: runs the statements between
# two FLUSH BINARY LOGS and copies the closed binlog file to $dest/NAME.bin.
# SETUP / TEARDOWN run outside the fixture (global settings).
capture() {
    local name=$1 producer=$2 setup=${3:-} teardown=${4:-} dest=${5:-$out} db file
    say "capturing $name"
    for db in $(case_dbs "${name%%-*}"); do mariadb -e "DROP DATABASE IF EXISTS $db"; done
    [ -z "$setup" ] || mariadb -e "$setup"
    mariadb -e 'FLUSH BINARY LOGS'
    file=$(mariadb -N -B -e 'SHOW MASTER STATUS' | cut -f1)
    [ -n "$file" ] || die "no binlog file (log_bin off?)"
    $producer
    mariadb -e 'FLUSH BINARY LOGS'
    [ -z "$teardown" ] || mariadb -e "$teardown"
    mkdir -p "$dest"
    cp "$binlog_dir/$file" "$dest/$name.bin"
    chmod 644 "$dest/$name.bin"
    say "$name: $(stat -c %s "$dest/$name.bin") bytes from $file"
}

# The producer of a case: its reproducer run on the private master.
run_case() {
    local id=$1
    if case_is_shell "$id"; then
        eval "$(case_text "$id")"
    else
        case_text "$id" | mariadb
    fi
}

# Stop when a case's reproducer here differs from its case file.
check_case() {
    local id=$1 file=$cases_dir/$1.md
    [ -f "$file" ] || { say "no $file: cannot check the SQL of $id"; return 0; }
    if ! diff <(awk '/^```(sql|sh)$/{f=1;next} /^```$/{if(f){f=0; exit}} f' "$file") <(case_text "$id") >&2; then
        die "the reproducer of $id differs from $file: update this script"
    fi
}

wanted() {
    [ ${#only[@]} -eq 0 ] && return 0
    local w
    for w in "${only[@]}"; do [ "$w" = "$1" ] && return 0; done
    return 1
}

"$here/sandbox.sh" up 0 >/dev/null
if [ "$keep" = 0 ]; then trap '"$here/sandbox.sh" down' EXIT; fi
# Undo the global settings of an interrupted earlier run.
mariadb -e "SET GLOBAL binlog_row_metadata = FULL, GLOBAL mysql56_temporal_format = ON,
            GLOBAL log_bin_compress = OFF"
[ "$(mariadb -N -B -e 'SELECT @@binlog_format, @@binlog_row_metadata')" = "$(printf 'ROW\tFULL')" ] \
    || die "the private sandbox must run binlog_format=ROW, binlog_row_metadata=FULL"

for id in B01 B02 B04 B05 B07 B08 B09 B11 B12 B14; do check_case "$id"; done

for id in B01 B02 B04 B05 B07 B08 B09 B12 B14; do
    wanted "$id" || continue
    capture "$id" "run_case $id"
done
if wanted B09-nolog; then
    capture B09-nolog "run_case B09" "SET GLOBAL binlog_row_metadata = NO_LOG" \
        "SET GLOBAL binlog_row_metadata = FULL"
fi
if wanted B07-minimal; then
    capture B07-minimal "run_case B07" "SET GLOBAL binlog_row_metadata = MINIMAL" \
        "SET GLOBAL binlog_row_metadata = FULL"
fi
if wanted X01-types; then
    x01() { x01_sql | mariadb; }
    capture X01-types x01
fi
if wanted X02-oldtemporal; then
    x02() { x02_sql | mariadb; }
    capture X02-oldtemporal x02 "SET GLOBAL mysql56_temporal_format = OFF" \
        "SET GLOBAL mysql56_temporal_format = ON"
fi
if wanted X03-compressed; then
    x03() { x03_sql | mariadb; }
    capture X03-compressed x03 "SET GLOBAL log_bin_compress = ON, GLOBAL log_bin_compress_min_len = 256" \
        "SET GLOBAL log_bin_compress = OFF"
fi
if [ "$with_b11" = 1 ]; then
    capture B11 "run_case B11" "" "" "$(dirname "$B11_OUT")"
    [ "$(dirname "$B11_OUT")/B11.bin" = "$B11_OUT" ] || mv "$(dirname "$B11_OUT")/B11.bin" "$B11_OUT"
fi
say "done: $(ls "$out" | tr '\n' ' ')"
