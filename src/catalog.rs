//! The replica's catalog schema: shardrep's own tables on the replica, in
//! the schema `shardrep_<service>` ([`default_schema`]) or the configured
//! `replica.catalog_schema`. This module owns their names, their DDL and
//! the text of every statement that reads or writes them; the code that
//! runs the statements and turns rows into Rust values is with its users:
//!
//! | table | name | rows | runs the statements |
//! |---|---|---|---|
//! | restart position | [`RESTART_TABLE`] | one per channel, written with the data it records | `applier::restart`, `applier::channel` (progress, DDL mark), the service's `handback`/`reset` |
//! | skipped seqnos | [`SKIPPED_TABLE`] | one per seqno the DBA chose not to apply | `applier::skipped` |
//! | shard map | [`SHARD_MAP_TABLE`] | one per mapped shard | `shard::store` |
//! | source | [`SOURCE_TABLE`] | at most one: the master set by `shardrepctl source set` (issue 20, master failover) | `replicator::source` |
//! | source switch under way | [`SOURCE_PENDING_TABLE`] | at most one, while `source set` runs | `replicator::source` |
//!
//! Other services' catalogs on the same replica are found through their
//! restart tables ([`other_restart_tables`], run by
//! `replica::other_services`); whether the catalog exists yet, with
//! [`SCHEMA_EXISTS`] (the first start).
//!
//! Identifiers are quoted with [`quote_ident`] (a schema name may contain a
//! backtick); values are always bound parameters (`?`). Imports: only
//! [`crate::mysql`] (shared/DESIGN.md §7: this module sits just above
//! `mysql` and `position`, below everything that uses the catalog).

use crate::mysql::quote_ident;

/// Prefix of shardrep's catalog schemas: `shardrep_<service>`.
pub const PREFIX: &str = "shardrep_";

/// Name of the restart table inside the catalog schema.
pub const RESTART_TABLE: &str = "restart_position";

/// Name of the table of skipped seqnos inside the catalog schema.
pub const SKIPPED_TABLE: &str = "skipped_seqno";

/// Name of the shard map table inside the catalog schema.
pub const SHARD_MAP_TABLE: &str = "shard_map";

/// Name of the table of the service's source master after a switch
/// (`shardrepctl source set`) inside the catalog schema.
pub const SOURCE_TABLE: &str = "source";

/// Name of the table that marks a source switch under way inside the
/// catalog schema.
pub const SOURCE_PENDING_TABLE: &str = "source_pending";

/// The catalog schema of service `service` when `replica.catalog_schema`
/// is not set: `shardrep_<service>`.
pub fn default_schema(service: &str) -> String {
    format!("{PREFIX}{service}")
}

/// `catalog`.`table`, both quoted.
fn table(catalog: &str, table: &str) -> String {
    format!("{}.{}", quote_ident(catalog), quote_ident(table))
}

/// Whether a table exists: one row, `COUNT(*)` 0 or 1. Parameters:
/// the schema, the table name.
pub const TABLE_EXISTS: &str = "SELECT COUNT(*) FROM information_schema.TABLES \
                                WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?";

/// The schema's name when it exists, no row otherwise. Parameter: the
/// schema.
pub const SCHEMA_EXISTS: &str =
    "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?";

/// Drops the catalog schema `schema` (a first start that failed before
/// applying anything; run without binary logging, as the schema was
/// created).
pub fn schema_drop(schema: &str) -> String {
    format!("DROP DATABASE IF EXISTS {}", quote_ident(schema))
}

// ---- restart_position

/// The `CREATE` statements of the catalog schema and the restart table.
///
/// Columns: `channel` (primary key), `seqno` (the channel's highest
/// committed transaction or marker; -1 before the first), `epoch`,
/// `event_id` (binlog `file:pos` after that transaction), `gtid` (the
/// source's GTID position after it), `shard_id`, `extract_time` (master
/// commit time, UTC), `commit_time` (replica commit time, UTC),
/// `applied_latency_ms`, `ddl_seqno` (see [`restart_mark_ddl`]; -1 when
/// none), and the record of exactly which seqnos are committed
/// (shared/research/writeset.md §5, "Choice 2"): `low_water` (a seqno L
/// such that, when the row was written, every seqno up to L was committed
/// by some channel or needs no apply; -1: none yet; NULL: a row written by
/// a shardrep older than the column) and `committed_above` (the seqnos
/// this channel committed above `low_water`, as ranges `12,14-16`, see
/// `position::SeqnoRanges`).
pub fn restart_create(catalog: &str) -> [String; 2] {
    let schema = quote_ident(catalog);
    [
        format!("CREATE DATABASE IF NOT EXISTS {schema}"),
        format!(
            "CREATE TABLE IF NOT EXISTS {schema}.{} (\
             channel SMALLINT UNSIGNED NOT NULL PRIMARY KEY, \
             seqno BIGINT NOT NULL, \
             epoch BIGINT UNSIGNED NOT NULL, \
             event_id VARCHAR(512) CHARACTER SET utf8mb4 NOT NULL, \
             gtid TEXT CHARACTER SET ascii NOT NULL, \
             shard_id VARCHAR(192) CHARACTER SET utf8mb4 NOT NULL, \
             extract_time DATETIME(6) NULL, \
             commit_time DATETIME(6) NULL, \
             applied_latency_ms BIGINT NOT NULL DEFAULT 0, \
             ddl_seqno BIGINT NOT NULL DEFAULT -1, \
             low_water BIGINT NULL, \
             committed_above TEXT CHARACTER SET ascii NOT NULL DEFAULT ''\
             ) ENGINE=InnoDB",
            quote_ident(RESTART_TABLE)
        ),
    ]
}

/// Adds `ddl_seqno` to a restart table created before the DDL mark
/// existed (nothing when it has the column).
pub fn restart_add_ddl_seqno(catalog: &str) -> String {
    format!(
        "ALTER TABLE {} ADD COLUMN IF NOT EXISTS ddl_seqno BIGINT NOT NULL DEFAULT -1",
        table(catalog, RESTART_TABLE)
    )
}

/// Adds `low_water` and `committed_above` to a restart table created
/// before them (nothing when it has them). Rows written before read
/// `low_water` NULL: they record only each channel's last seqno.
pub fn restart_add_committed_set(catalog: &str) -> String {
    format!(
        "ALTER TABLE {} ADD COLUMN IF NOT EXISTS low_water BIGINT NULL, \
         ADD COLUMN IF NOT EXISTS committed_above TEXT CHARACTER SET ascii NOT NULL DEFAULT ''",
        table(catalog, RESTART_TABLE)
    )
}

/// Adds `session_id` and `session_server_started` to a restart table
/// created before them: the replica session a channel last opened (its
/// connection id) and the server's start then (Unix seconds), so that the
/// next run ends that session before it reads the rows (a session of a
/// killed shardrep can still be running a block that ends with its
/// COMMIT).
pub fn restart_add_session(catalog: &str) -> String {
    format!(
        "ALTER TABLE {} ADD COLUMN IF NOT EXISTS session_id BIGINT NULL, \
         ADD COLUMN IF NOT EXISTS session_server_started BIGINT NULL",
        table(catalog, RESTART_TABLE)
    )
}

/// Records a channel's session. Parameters: `session_id`,
/// `session_server_started`, `channel`.
pub fn restart_record_session(catalog: &str) -> String {
    format!(
        "UPDATE {} SET session_id = ?, session_server_started = ? WHERE channel = ?",
        table(catalog, RESTART_TABLE)
    )
}

/// The sessions the channels recorded: `channel, session_id,
/// session_server_started`.
pub fn restart_select_sessions(catalog: &str) -> String {
    format!(
        "SELECT channel, session_id, session_server_started FROM {} \
         WHERE session_id IS NOT NULL ORDER BY channel",
        table(catalog, RESTART_TABLE)
    )
}

/// Every restart row, by channel: `channel, seqno, epoch, event_id, gtid,
/// shard_id, low_water, committed_above`.
pub fn restart_select(catalog: &str) -> String {
    format!(
        "SELECT channel, seqno, epoch, event_id, gtid, shard_id, low_water, committed_above \
         FROM {} ORDER BY channel",
        table(catalog, RESTART_TABLE)
    )
}

/// Every restart row of a table without `low_water` and `committed_above`
/// (not upgraded yet by [`restart_add_committed_set`]), by channel:
/// `channel, seqno, epoch, event_id, gtid, shard_id`.
pub fn restart_select_legacy(catalog: &str) -> String {
    format!(
        "SELECT channel, seqno, epoch, event_id, gtid, shard_id FROM {} ORDER BY channel",
        table(catalog, RESTART_TABLE)
    )
}

/// One channel's `seqno, ddl_seqno`. Parameter: `channel`.
pub fn restart_select_ddl(catalog: &str) -> String {
    format!(
        "SELECT seqno, ddl_seqno FROM {} WHERE channel = ?",
        table(catalog, RESTART_TABLE)
    )
}

/// Inserts one restart row (`committed_above` empty). Parameters:
/// `channel`, `seqno`, `epoch`, `event_id`, `gtid`, `shard_id`,
/// `low_water`.
pub fn restart_insert(catalog: &str) -> String {
    format!(
        "INSERT INTO {} (channel, seqno, epoch, event_id, gtid, shard_id, low_water) \
         VALUES (?, ?, ?, ?, ?, ?, ?)",
        table(catalog, RESTART_TABLE)
    )
}

/// The UPDATE that records a channel's progress, run just before COMMIT
/// in the transaction that carries the data. Parameters, in order:
/// `seqno`, `epoch`, `event_id`, `gtid`, `shard_id`, `low_water`,
/// `committed_above`, `extract_time` (Unix seconds, twice: the column and
/// the latency), `channel`, then `seqno` again. The `seqno <= ?` guard
/// keeps the row from moving backwards: such an update matches no row,
/// which the channel treats as an error.
pub fn restart_update(catalog: &str) -> String {
    format!(
        "UPDATE {} SET seqno = ?, epoch = ?, event_id = ?, gtid = ?, shard_id = ?, \
         low_water = ?, committed_above = ?, \
         extract_time = FROM_UNIXTIME(?), commit_time = UTC_TIMESTAMP(6), \
         applied_latency_ms = GREATEST(0, TIMESTAMPDIFF(MICROSECOND, FROM_UNIXTIME(?), UTC_TIMESTAMP(6)) DIV 1000) \
         WHERE channel = ? AND seqno <= ?",
        table(catalog, RESTART_TABLE)
    )
}

/// Adds `rolled_back_seqno` to a restart table created before it existed
/// (nothing when it has the column): a seqno the channel rolled back
/// after its GTID was binlogged (`binlog_gtids = "master"`, a
/// non-transactional change), which the replica's binlog must not be
/// taken to record as committed.
pub fn restart_add_rolled_back(catalog: &str) -> String {
    format!(
        "ALTER TABLE {} ADD COLUMN IF NOT EXISTS rolled_back_seqno BIGINT NULL",
        table(catalog, RESTART_TABLE)
    )
}

/// Marks a channel's rolled-back seqno ([`restart_add_rolled_back`]).
/// Parameters: `rolled_back_seqno`, `channel`.
pub fn restart_mark_rolled_back(catalog: &str) -> String {
    format!(
        "UPDATE {} SET rolled_back_seqno = ? WHERE channel = ?",
        table(catalog, RESTART_TABLE)
    )
}

/// Every marked rolled-back seqno ([`restart_add_rolled_back`]).
pub fn restart_select_rolled_back(catalog: &str) -> String {
    format!(
        "SELECT rolled_back_seqno FROM {} WHERE rolled_back_seqno IS NOT NULL",
        table(catalog, RESTART_TABLE)
    )
}

/// The UPDATE that marks a DDL transaction as started on a channel, run
/// (autocommit) just before the DDL. DDL commits implicitly, so the data
/// and the restart row cannot commit together; after a crash between the
/// DDL and its restart row, `ddl_seqno` greater than `seqno` says the DDL
/// of that seqno may already have run (`applier::restart::pending_ddl`),
/// and the channel replays it tolerating "already exists / does not
/// exist" errors (`applier::retry::is_ddl_already_applied`). Parameters:
/// `ddl_seqno`, `channel`.
pub fn restart_mark_ddl(catalog: &str) -> String {
    format!(
        "UPDATE {} SET ddl_seqno = ? WHERE channel = ?",
        table(catalog, RESTART_TABLE)
    )
}

/// Records where a takeover started on the rows that have committed
/// nothing yet (`seqno` -1). Parameters: `event_id`, `gtid`.
pub fn restart_record_start(catalog: &str) -> String {
    format!(
        "UPDATE {} SET event_id = ?, gtid = ? WHERE seqno = -1",
        table(catalog, RESTART_TABLE)
    )
}

/// The number of restart rows.
pub fn restart_count(catalog: &str) -> String {
    format!("SELECT COUNT(*) FROM {}", table(catalog, RESTART_TABLE))
}

/// Removes every restart row (a new channel count, a handback, a reset).
pub fn restart_delete(catalog: &str) -> String {
    format!("DELETE FROM {}", table(catalog, RESTART_TABLE))
}

/// The schemas other than the parameter's that hold a restart table: other
/// shardrep services' catalogs on this server. Parameter: the own catalog.
pub fn other_restart_tables() -> String {
    format!(
        "SELECT TABLE_SCHEMA FROM information_schema.TABLES \
         WHERE TABLE_NAME = '{RESTART_TABLE}' AND TABLE_SCHEMA <> ?"
    )
}

/// `COUNT(*), MIN(seqno)` of another catalog's restart table (found with
/// [`other_restart_tables`]).
pub fn restart_rows_and_lowest(catalog: &str) -> String {
    format!(
        "SELECT COUNT(*), MIN(seqno) FROM {}.{RESTART_TABLE}",
        quote_ident(catalog)
    )
}

// ---- skipped_seqno

/// The `CREATE TABLE` statement of the skipped-seqno table (the schema
/// must exist). Columns: `seqno` (primary key), `event_id` (binlog
/// `file:pos` after the transaction, empty when unknown), `shard_id`
/// (likewise), `skipped_at` (UTC).
pub fn skipped_create(catalog: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (\
         seqno BIGINT UNSIGNED NOT NULL PRIMARY KEY, \
         event_id VARCHAR(512) CHARACTER SET utf8mb4 NOT NULL, \
         shard_id VARCHAR(192) CHARACTER SET utf8mb4 NOT NULL, \
         skipped_at DATETIME(6) NOT NULL DEFAULT UTC_TIMESTAMP(6)\
         ) ENGINE=InnoDB",
        table(catalog, SKIPPED_TABLE)
    )
}

/// Records one skip; a seqno already recorded keeps its first row.
/// Parameters: `seqno`, `event_id`, `shard_id`.
pub fn skipped_insert(catalog: &str) -> String {
    format!(
        "INSERT IGNORE INTO {} (seqno, event_id, shard_id) VALUES (?, ?, ?)",
        table(catalog, SKIPPED_TABLE)
    )
}

/// Every recorded skip, by seqno: `seqno, event_id, shard_id`.
pub fn skipped_select(catalog: &str) -> String {
    format!(
        "SELECT seqno, event_id, shard_id FROM {} ORDER BY seqno",
        table(catalog, SKIPPED_TABLE)
    )
}

/// Removes every recorded skip.
pub fn skipped_delete(catalog: &str) -> String {
    format!("DELETE FROM {}", table(catalog, SKIPPED_TABLE))
}

// ---- shard_map

/// Creates the catalog schema and the shard map table if needed, without
/// binary logging (one multi-statement query). Columns: `shard_id`
/// (primary key, compared byte for byte), `master` (a service name or
/// `#LOCAL`), `critical` (0/1).
pub fn shard_map_create(catalog: &str) -> String {
    format!(
        "SET SESSION sql_log_bin = 0; CREATE DATABASE IF NOT EXISTS {}; \
         CREATE TABLE IF NOT EXISTS {} (\
         shard_id VARCHAR(192) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, \
         master VARCHAR(64) CHARACTER SET utf8mb4 NOT NULL, \
         critical TINYINT NOT NULL DEFAULT 0) ENGINE=InnoDB; \
         SET SESSION sql_log_bin = DEFAULT",
        quote_ident(catalog),
        table(catalog, SHARD_MAP_TABLE)
    )
}

/// The stored map, by shard: `shard_id, master, critical`.
pub fn shard_map_select(catalog: &str) -> String {
    format!(
        "SELECT shard_id, master, critical FROM {} ORDER BY shard_id",
        table(catalog, SHARD_MAP_TABLE)
    )
}

/// Inserts one entry. Parameters: `shard_id`, `master`, `critical`.
pub fn shard_map_insert(catalog: &str) -> String {
    format!(
        "INSERT INTO {} (shard_id, master, critical) VALUES (?, ?, ?)",
        table(catalog, SHARD_MAP_TABLE)
    )
}

/// Removes every entry.
pub fn shard_map_delete(catalog: &str) -> String {
    format!("DELETE FROM {}", table(catalog, SHARD_MAP_TABLE))
}

// ---- source

/// The `CREATE TABLE` statement of the source table (the schema must
/// exist). At most one row (`id` = 1): the source master set by
/// `shardrepctl source set`, which replaces `[source]`'s `host`, `port`,
/// `user` and `server_id` of the configuration. Columns: `host`, `port`,
/// `source_user`, `server_id` (the id shardrep announces to that master),
/// `previous` (`host:port` of the source before the switch),
/// `first_seqno` (the queue's next seqno at the switch: transactions from
/// it on are read from this source; NULL when the queue held nothing),
/// `resume_gtid` (the GTID position extraction starts at on this source
/// while the queue's next seqno is still `first_seqno`), `discarded`
/// (seqnos of the queue not applied and recorded as skipped at the
/// switch, as ranges `12-15`, empty when none), `switched_at` (UTC).
pub fn source_create(catalog: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (\
         id TINYINT UNSIGNED NOT NULL PRIMARY KEY, \
         host VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL, \
         port SMALLINT UNSIGNED NOT NULL, \
         source_user VARCHAR(128) CHARACTER SET utf8mb4 NOT NULL, \
         server_id INT UNSIGNED NOT NULL, \
         previous VARCHAR(300) CHARACTER SET utf8mb4 NOT NULL, \
         first_seqno BIGINT UNSIGNED NULL, \
         resume_gtid TEXT CHARACTER SET ascii NOT NULL, \
         discarded TEXT CHARACTER SET ascii NOT NULL, \
         switched_at DATETIME(6) NOT NULL DEFAULT UTC_TIMESTAMP(6)\
         ) ENGINE=InnoDB",
        table(catalog, SOURCE_TABLE)
    )
}

/// Writes the one source row (replacing the previous one). Parameters:
/// `host`, `port`, `source_user`, `server_id`, `previous`, `first_seqno`,
/// `resume_gtid`, `discarded`.
pub fn source_replace(catalog: &str) -> String {
    format!(
        "REPLACE INTO {} (id, host, port, source_user, server_id, previous, first_seqno, \
         resume_gtid, discarded, switched_at) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, UTC_TIMESTAMP(6))",
        table(catalog, SOURCE_TABLE)
    )
}

/// The source row: `host, port, source_user, server_id, previous,
/// first_seqno, resume_gtid, discarded, switched_at` (text).
pub fn source_select(catalog: &str) -> String {
    format!(
        "SELECT host, port, source_user, server_id, previous, first_seqno, resume_gtid, \
         discarded, CAST(switched_at AS CHAR) FROM {} WHERE id = 1",
        table(catalog, SOURCE_TABLE)
    )
}

/// The `CREATE TABLE` statement of the table marking a switch under way
/// (the schema must exist): at most one row (`id` = 1), the new master's
/// `host`, `port`, `source_user` and `server_id` (as `source set` got
/// them) and `started_at` (UTC), written before `source set` takes the
/// service offline and removed with the switch's own transaction (or when
/// it is refused). While it has a row, a run applies nothing beyond what
/// the channels committed, and a restart of `shardrep run` finishes the
/// switch before it goes online.
pub fn source_pending_create(catalog: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (\
         id TINYINT UNSIGNED NOT NULL PRIMARY KEY, \
         host VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL, \
         port SMALLINT UNSIGNED NOT NULL, \
         source_user VARCHAR(128) CHARACTER SET utf8mb4 NOT NULL, \
         server_id INT UNSIGNED NOT NULL, \
         started_at DATETIME(6) NOT NULL DEFAULT UTC_TIMESTAMP(6)\
         ) ENGINE=InnoDB",
        table(catalog, SOURCE_PENDING_TABLE)
    )
}

/// Marks a switch under way. Parameters: `host`, `port`, `source_user`,
/// `server_id`.
pub fn source_pending_replace(catalog: &str) -> String {
    format!(
        "REPLACE INTO {} (id, host, port, source_user, server_id, started_at) \
         VALUES (1, ?, ?, ?, ?, UTC_TIMESTAMP(6))",
        table(catalog, SOURCE_PENDING_TABLE)
    )
}

/// The switch under way: `host, port, source_user, server_id,
/// started_at` (text).
pub fn source_pending_select(catalog: &str) -> String {
    format!(
        "SELECT host, port, source_user, server_id, CAST(started_at AS CHAR) FROM {} \
         WHERE id = 1",
        table(catalog, SOURCE_PENDING_TABLE)
    )
}

/// Removes the mark of a switch under way.
pub fn source_pending_delete(catalog: &str) -> String {
    format!("DELETE FROM {}", table(catalog, SOURCE_PENDING_TABLE))
}

/// Forgets where extraction resumes on the source (the queue it refers
/// to is gone: a handback or reset); the source itself stays.
pub fn source_clear_resume(catalog: &str) -> String {
    format!(
        "UPDATE {} SET first_seqno = NULL, resume_gtid = '', discarded = ''",
        table(catalog, SOURCE_TABLE)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_quote_the_catalog() {
        let [db, table] = restart_create("shardrep_a`b");
        assert_eq!(db, "CREATE DATABASE IF NOT EXISTS `shardrep_a``b`");
        assert!(
            table.starts_with("CREATE TABLE IF NOT EXISTS `shardrep_a``b`.`restart_position` (")
        );
        assert!(restart_update("x").ends_with("WHERE channel = ? AND seqno <= ?"));
    }

    #[test]
    fn create_quotes_the_catalog() {
        assert!(skipped_create("shardrep_a`b")
            .starts_with("CREATE TABLE IF NOT EXISTS `shardrep_a``b`.`skipped_seqno` ("));
    }

    #[test]
    fn the_default_schema_is_the_prefix_and_the_service() {
        assert_eq!(default_schema("sjc"), "shardrep_sjc");
        assert!(default_schema("nyc").starts_with(PREFIX));
    }

    /// The texts sent to the replica, byte for byte (the catalog of a
    /// running service must keep reading and writing the same tables).
    #[test]
    fn statement_texts_are_exact() {
        let c = "shardrep_a`b";
        let t = "`shardrep_a``b`.`restart_position`";
        assert_eq!(
            restart_add_ddl_seqno(c),
            format!(
                "ALTER TABLE {t} ADD COLUMN IF NOT EXISTS ddl_seqno BIGINT NOT NULL DEFAULT -1"
            )
        );
        assert_eq!(
            restart_add_committed_set(c),
            format!(
                "ALTER TABLE {t} ADD COLUMN IF NOT EXISTS low_water BIGINT NULL, ADD COLUMN IF \
                 NOT EXISTS committed_above TEXT CHARACTER SET ascii NOT NULL DEFAULT ''"
            )
        );
        assert_eq!(
            restart_select(c),
            format!(
                "SELECT channel, seqno, epoch, event_id, gtid, shard_id, low_water, \
                 committed_above FROM {t} ORDER BY channel"
            )
        );
        assert_eq!(
            restart_select_legacy(c),
            format!(
                "SELECT channel, seqno, epoch, event_id, gtid, shard_id FROM {t} ORDER BY channel"
            )
        );
        assert_eq!(
            restart_select_ddl(c),
            format!("SELECT seqno, ddl_seqno FROM {t} WHERE channel = ?")
        );
        assert_eq!(
            restart_insert(c),
            format!(
                "INSERT INTO {t} (channel, seqno, epoch, event_id, gtid, shard_id, low_water) \
                 VALUES (?, ?, ?, ?, ?, ?, ?)"
            )
        );
        assert_eq!(
            restart_update(c),
            format!(
                "UPDATE {t} SET seqno = ?, epoch = ?, event_id = ?, gtid = ?, shard_id = ?, \
                 low_water = ?, committed_above = ?, extract_time = FROM_UNIXTIME(?), commit_time = UTC_TIMESTAMP(6), \
                 applied_latency_ms = GREATEST(0, TIMESTAMPDIFF(MICROSECOND, FROM_UNIXTIME(?), \
                 UTC_TIMESTAMP(6)) DIV 1000) WHERE channel = ? AND seqno <= ?"
            )
        );
        assert_eq!(
            restart_mark_ddl(c),
            format!("UPDATE {t} SET ddl_seqno = ? WHERE channel = ?")
        );
        assert_eq!(
            restart_record_start(c),
            format!("UPDATE {t} SET event_id = ?, gtid = ? WHERE seqno = -1")
        );
        assert_eq!(restart_count(c), format!("SELECT COUNT(*) FROM {t}"));
        assert_eq!(restart_delete(c), format!("DELETE FROM {t}"));
        assert_eq!(
            other_restart_tables(),
            "SELECT TABLE_SCHEMA FROM information_schema.TABLES \
             WHERE TABLE_NAME = 'restart_position' AND TABLE_SCHEMA <> ?"
        );
        assert_eq!(
            restart_rows_and_lowest(c),
            "SELECT COUNT(*), MIN(seqno) FROM `shardrep_a``b`.restart_position"
        );
        let s = "`shardrep_a``b`.`skipped_seqno`";
        assert_eq!(
            skipped_insert(c),
            format!("INSERT IGNORE INTO {s} (seqno, event_id, shard_id) VALUES (?, ?, ?)")
        );
        assert_eq!(
            skipped_select(c),
            format!("SELECT seqno, event_id, shard_id FROM {s} ORDER BY seqno")
        );
        assert_eq!(skipped_delete(c), format!("DELETE FROM {s}"));
        let m = "`shardrep_a``b`.`shard_map`";
        assert!(shard_map_create(c).starts_with(
            "SET SESSION sql_log_bin = 0; CREATE DATABASE IF NOT EXISTS `shardrep_a``b`; \
             CREATE TABLE IF NOT EXISTS `shardrep_a``b`.`shard_map` (shard_id VARCHAR(192) "
        ));
        assert_eq!(
            shard_map_select(c),
            format!("SELECT shard_id, master, critical FROM {m} ORDER BY shard_id")
        );
        assert_eq!(
            shard_map_insert(c),
            format!("INSERT INTO {m} (shard_id, master, critical) VALUES (?, ?, ?)")
        );
        assert_eq!(shard_map_delete(c), format!("DELETE FROM {m}"));
        assert_eq!(
            TABLE_EXISTS,
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?"
        );
    }
}
