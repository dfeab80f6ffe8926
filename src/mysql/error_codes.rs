//! Server and client error codes shardrep acts on, by their names in the
//! server's sources.
//!
//! Sources: MariaDB Knowledge Base, "MariaDB Error Codes" (server codes,
//! `perror <code>` on a MariaDB 10.11 server names them the same way);
//! MySQL "Server Error Message Reference" for the codes MySQL alone uses;
//! client codes (2xxx) from the client library's `errmsg.h` ("Client Error
//! Message Reference"). The classifiers that decide what a code means are
//! with their users (`applier::retry`, `extractor::live`); this module
//! only names the numbers.

// ---- connection and server state

/// `ER_CON_COUNT_ERROR`: too many connections.
pub const ER_CON_COUNT_ERROR: u16 = 1040;
/// `ER_SERVER_SHUTDOWN`: server shutdown in progress.
pub const ER_SERVER_SHUTDOWN: u16 = 1053;
/// `ER_ABORTING_CONNECTION`: aborted connection (first of the network
/// errors 1152..=1161).
pub const ER_ABORTING_CONNECTION: u16 = 1152;
/// `ER_NET_WRITE_INTERRUPTED`: timeout writing communication packets (last
/// of the network errors 1152..=1161: `ER_NET_PACKET_TOO_LARGE` 1153,
/// `ER_NET_READ_ERROR_FROM_PIPE` 1154, `ER_NET_FCNTL_ERROR` 1155,
/// `ER_NET_PACKETS_OUT_OF_ORDER` 1156, `ER_NET_UNCOMPRESS_ERROR` 1157,
/// `ER_NET_READ_ERROR` 1158, `ER_NET_READ_INTERRUPTED` 1159,
/// `ER_NET_ERROR_ON_WRITE` 1160).
pub const ER_NET_WRITE_INTERRUPTED: u16 = 1161;
/// `ER_UNKNOWN_SYSTEM_VARIABLE`: unknown system variable.
pub const ER_UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;
/// `ER_TOO_MANY_USER_CONNECTIONS`: the user has more than
/// `max_user_connections` active connections.
pub const ER_TOO_MANY_USER_CONNECTIONS: u16 = 1203;
/// `ER_QUERY_INTERRUPTED`: query execution was interrupted.
pub const ER_QUERY_INTERRUPTED: u16 = 1317;
/// `ER_CONNECTION_KILLED`: connection was killed.
pub const ER_CONNECTION_KILLED: u16 = 1927;
/// `ER_CLIENT_INTERACTION_TIMEOUT` (MySQL 8.0.24+): the client was
/// disconnected by the server because of inactivity. MariaDB numbers
/// `ER_REFERENCED_TRG_DOES_NOT_EXIST` 4031, an error of `CREATE TRIGGER`
/// that a replication connection never receives.
pub const ER_CLIENT_INTERACTION_TIMEOUT: u16 = 4031;

// ---- locks

/// `ER_LOCK_WAIT_TIMEOUT`: lock wait timeout exceeded.
pub const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
/// `ER_LOCK_DEADLOCK`: deadlock found when trying to get lock.
pub const ER_LOCK_DEADLOCK: u16 = 1213;

// ---- rows (a replica that diverged from its master)

/// `ER_DUP_ENTRY`: duplicate key (the replica has diverged).
pub const ER_DUP_ENTRY: u16 = 1062;
/// `ER_BAD_DB_ERROR`: unknown database (a `USE` of a schema that does not
/// exist).
pub const ER_BAD_DB_ERROR: u16 = 1049;
/// `ER_KEY_NOT_FOUND`: can't find record (the replica has diverged).
pub const ER_KEY_NOT_FOUND: u16 = 1032;
/// `ER_SLAVE_CONVERSION_FAILED`: the row applier will not convert a
/// column of the master's type to the replica's (`slave_type_conversions`).
pub const ER_SLAVE_CONVERSION_FAILED: u16 = 1677;
/// `ER_GTID_STRICT_OUT_OF_ORDER` (MariaDB): binlogging the GTID would
/// create an out-of-order sequence number in its domain, and
/// `gtid_strict_mode` is on.
pub const ER_GTID_STRICT_OUT_OF_ORDER: u16 = 1950;

// ---- DDL that already ran ("exists" / "does not exist")

/// `ER_CANT_CREATE_TABLE`: can't create table (errno in the message).
pub const ER_CANT_CREATE_TABLE: u16 = 1005;
/// `ER_DB_CREATE_EXISTS`: can't create database; database exists.
pub const ER_DB_CREATE_EXISTS: u16 = 1007;
/// `ER_DB_DROP_EXISTS`: can't drop database; database doesn't exist.
pub const ER_DB_DROP_EXISTS: u16 = 1008;
/// `ER_TABLE_EXISTS_ERROR`: table already exists.
pub const ER_TABLE_EXISTS_ERROR: u16 = 1050;
/// `ER_BAD_TABLE_ERROR`: unknown table.
pub const ER_BAD_TABLE_ERROR: u16 = 1051;
/// `ER_BAD_FIELD_ERROR`: unknown column.
pub const ER_BAD_FIELD_ERROR: u16 = 1054;
/// `ER_DUP_FIELDNAME`: duplicate column name.
pub const ER_DUP_FIELDNAME: u16 = 1060;
/// `ER_DUP_KEYNAME`: duplicate key name.
pub const ER_DUP_KEYNAME: u16 = 1061;
/// `ER_CANT_DROP_FIELD_OR_KEY`: can't DROP a column or key; check that it
/// exists.
pub const ER_CANT_DROP_FIELD_OR_KEY: u16 = 1091;
/// `ER_NO_SUCH_TABLE`: table doesn't exist.
pub const ER_NO_SUCH_TABLE: u16 = 1146;
/// `ER_SP_ALREADY_EXISTS`: stored routine already exists.
pub const ER_SP_ALREADY_EXISTS: u16 = 1304;
/// `ER_SP_DOES_NOT_EXIST`: stored routine does not exist.
pub const ER_SP_DOES_NOT_EXIST: u16 = 1305;
/// `ER_TRG_ALREADY_EXISTS`: trigger already exists.
pub const ER_TRG_ALREADY_EXISTS: u16 = 1359;
/// `ER_TRG_DOES_NOT_EXIST`: trigger does not exist.
pub const ER_TRG_DOES_NOT_EXIST: u16 = 1360;
/// `ER_CANNOT_USER`: operation (`CREATE USER`, `DROP USER`, …) failed.
pub const ER_CANNOT_USER: u16 = 1396;
/// `ER_EVENT_ALREADY_EXISTS`: event already exists.
pub const ER_EVENT_ALREADY_EXISTS: u16 = 1537;
/// `ER_EVENT_DOES_NOT_EXIST`: unknown event.
pub const ER_EVENT_DOES_NOT_EXIST: u16 = 1539;
/// `ER_DUP_CONSTRAINT_NAME`: duplicate constraint name.
pub const ER_DUP_CONSTRAINT_NAME: u16 = 1826;

// ---- XA

/// `ER_XAER_NOTA`: unknown xid.
pub const ER_XAER_NOTA: u16 = 1397;
/// `ER_XAER_DUPID`: the xid already exists.
pub const ER_XAER_DUPID: u16 = 1440;

// ---- access

/// `ER_DBACCESS_DENIED_ERROR`: the user may not use that database.
pub const ER_DBACCESS_DENIED_ERROR: u16 = 1044;
/// `ER_ACCESS_DENIED_ERROR`: the login (user, host, password) is refused.
pub const ER_ACCESS_DENIED_ERROR: u16 = 1045;
/// `ER_TABLEACCESS_DENIED_ERROR`: a command is denied on a table.
pub const ER_TABLEACCESS_DENIED_ERROR: u16 = 1142;
/// `ER_SPECIFIC_ACCESS_DENIED_ERROR`: a privilege (e.g. `REPLICATION
/// SLAVE`, `BINLOG MONITOR`) is missing.
pub const ER_SPECIFIC_ACCESS_DENIED_ERROR: u16 = 1227;
/// `ER_ACCESS_DENIED_NO_PASSWORD_ERROR`: the login is refused (no
/// password given, or a unix_socket login of another OS user).
pub const ER_ACCESS_DENIED_NO_PASSWORD_ERROR: u16 = 1698;

// ---- client library (2xxx)

/// `CR_CONNECTION_ERROR`: cannot connect through the socket.
pub const CR_CONNECTION_ERROR: u16 = 2002;
/// `CR_CONN_HOST_ERROR`: cannot connect to the host.
pub const CR_CONN_HOST_ERROR: u16 = 2003;
/// `CR_SERVER_GONE_ERROR`: server has gone away.
pub const CR_SERVER_GONE_ERROR: u16 = 2006;
/// `CR_SERVER_LOST`: lost connection during query.
pub const CR_SERVER_LOST: u16 = 2013;
