//! The privileges a configuration needs, as the `GRANT` statements a DBA
//! runs on the master and on the replica (`shardrep check-config
//! --grants`).
//!
//! Privilege names and what each allows: MariaDB knowledge base, "GRANT"
//! (the privileges split from SUPER in 10.5.2: BINLOG ADMIN, BINLOG
//! MONITOR, BINLOG REPLAY, REPLICATION MASTER ADMIN, REPLICATION SLAVE
//! ADMIN, SLAVE MONITOR; READ_ONLY ADMIN, no longer part of SUPER from
//! 10.11). What needs which was checked statement by statement against
//! MariaDB 10.11 with an account holding only that privilege.

use crate::config::{ApplyMethod, Config};

/// One `GRANT` statement and why shardrep needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The server it is run on.
    pub server: GrantServer,
    /// The statement, ending with `;`.
    pub sql: String,
    /// What shardrep does with it (a comment line before the statement).
    pub why: String,
    /// `Some(condition)`: needed only when the condition holds, which the
    /// configuration alone cannot tell (printed commented out).
    pub only_if: Option<String>,
}

/// Where a [`Grant`] is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantServer {
    /// The master of `[source]` (and every master `source set` may name).
    Master,
    /// The replica of `[replica]`.
    Replica,
}

/// `'user'@'host'`, both quoted as SQL strings.
fn account(user: &str, host: &str) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"));
    format!("{}@{}", quote(user), quote(host))
}

/// The host an account is for when shardrep connects to `server_host`
/// (`socket`: through a Unix socket): the loopback name itself when the
/// server is on shardrep's host, else `%` (narrow it to shardrep's host).
fn account_host(server_host: &str, socket: bool, from_host: Option<&str>) -> String {
    if let Some(h) = from_host {
        return h.to_string();
    }
    if socket || server_host == "localhost" {
        "localhost".to_string()
    } else if server_host == "127.0.0.1" || server_host == "::1" {
        server_host.to_string()
    } else {
        "%".to_string()
    }
}

/// The grants `config` needs; `from_host` is the host part of the
/// accounts (default: see [`account_host`]).
pub fn needed(config: &Config, from_host: Option<&str>) -> Vec<Grant> {
    let mut out = Vec::new();
    if let Some(live) = config.source.live() {
        let to = account(&live.user, &account_host(&live.host, false, from_host));
        let master = |sql: String, why: &str| Grant {
            server: GrantServer::Master,
            sql,
            why: why.to_string(),
            only_if: None,
        };
        out.push(master(
            format!("GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO {to};"),
            "read the binlog as a replica does (REPLICATION SLAVE); the master's binlog files \
             and position for takeover, lag and status (BINLOG MONITOR: SHOW BINARY LOGS, \
             SHOW MASTER STATUS; REPLICATION CLIENT before MariaDB 10.5.2)",
        ));
        out.push(master(
            format!("GRANT SELECT ON *.* TO {to};"),
            "`shardrepctl check` reads the tables it compares, in a consistent snapshot; the \
             column names of tables whose row images lack them (binlog_row_metadata not FULL) \
             are read from information_schema, which shows only tables the user may read",
        ));
    }
    let r = &config.replica;
    let to = account(
        &r.user,
        &account_host(&r.host, r.socket.is_some(), from_host),
    );
    let replica = |sql: String, why: &str, only_if: Option<&str>| Grant {
        server: GrantServer::Replica,
        sql,
        why: why.to_string(),
        only_if: only_if.map(str::to_string),
    };
    out.push(replica(
        format!(
            "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, REFERENCES, \
             CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, CREATE VIEW, SHOW VIEW, CREATE \
             ROUTINE, ALTER ROUTINE, EVENT, TRIGGER ON *.* TO {to};"
        ),
        &format!(
            "apply every change the master replicates (rows and DDL, in every schema: a master \
             may create new ones) as native replication's SQL thread would, and keep the \
             catalog schema {} (restart rows, shard map)",
            config.catalog_schema()
        ),
        None,
    ));
    out.push(replica(
        format!("GRANT BINLOG ADMIN ON *.* TO {to};"),
        "write the catalog without binary logging (SET SESSION sql_log_bin = 0)",
        None,
    ));
    let replay_why = match (config.apply.method, config.replica.preserve_origin) {
        (ApplyMethod::Binlog, _) => {
            "apply row events as the server's own row applier does (BINLOG statements, \
             [apply] method = \"binlog\"), binlog each master transaction under its master \
             GTID ([replica] binlog_gtids = \"master\", what \"auto\" picks with \
             log_slave_updates), and run the master's statements with their session \
             (pseudo_thread_id for temporary tables)"
        }
        (ApplyMethod::Sql, _) => {
            "binlog each master transaction under its master GTID ([replica] binlog_gtids = \
             \"master\", what \"auto\" picks with log_slave_updates; or preserve_origin), and \
             run the master's statements with their session (pseudo_thread_id for temporary \
             tables)"
        }
    };
    out.push(replica(
        format!("GRANT BINLOG REPLAY ON *.* TO {to};"),
        replay_why,
        None,
    ));
    out.push(replica(
        format!("GRANT REPLICATION SLAVE ADMIN, SLAVE MONITOR ON *.* TO {to};"),
        "take the replica over from native replication and hand it back (STOP SLAVE, \
         CHANGE MASTER TO, SET GLOBAL gtid_slave_pos, START SLAVE) and see it (SHOW ALL \
         SLAVES STATUS: the service refuses to apply while a SQL thread runs)",
        None,
    ));
    out.push(replica(
        format!("GRANT REPLICATION MASTER ADMIN ON *.* TO {to};"),
        "SHOW SLAVE HOSTS at start, to warn when replicas of this replica would miss or \
         mis-read what shardrep applies (without it the start logs that it cannot tell)",
        None,
    ));
    out.push(replica(
        format!("GRANT READ_ONLY ADMIN ON *.* TO {to};"),
        "write while the replica runs read_only = ON (replicas usually do; native \
         replication's SQL thread is exempt, shardrep's sessions are not)",
        Some("the replica runs read_only = ON"),
    ));
    out
}

/// `grants` as a script: per server a header, each grant's reason as a
/// comment, conditional grants commented out with their condition.
pub fn render(grants: &[Grant]) -> String {
    let mut out = String::new();
    for (server, title) in [
        (
            GrantServer::Master,
            "-- On the master ([source]; and on every master `shardrepctl source set` may name)",
        ),
        (GrantServer::Replica, "-- On the replica ([replica])"),
    ] {
        let mine: Vec<&Grant> = grants.iter().filter(|g| g.server == server).collect();
        if mine.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(title);
        out.push('\n');
        for g in mine {
            out.push_str(&format!("-- {}\n", g.why));
            match &g.only_if {
                Some(condition) => out.push_str(&format!("-- only if {condition}: {}\n", g.sql)),
                None => out.push_str(&format!("{}\n", g.sql)),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_are_quoted_and_hosts_follow_the_address() {
        assert_eq!(account("o'k", "%"), "'o\\'k'@'%'");
        assert_eq!(account_host("127.0.0.1", false, None), "127.0.0.1");
        assert_eq!(account_host("db1", true, None), "localhost");
        assert_eq!(account_host("db1.example", false, None), "%");
        assert_eq!(account_host("db1", false, Some("10.0.0.5")), "10.0.0.5");
    }

    #[test]
    fn the_script_holds_both_servers_and_comments_conditions() {
        let cfg = Config::from_toml_str(
            "[service]\nname = \"g\"\n[source]\nkind = \"live\"\nhost = \"db1.example\"\n\
             user = \"repl\"\npassword = \"x\"\nserver_id = 99\nstart = \"takeover\"\n\
             [replica]\nhost = \"127.0.0.1\"\nuser = \"applier\"\npassword = \"y\"\n\
             [queue]\ndir = \"/tmp/q\"\n[control]\nsocket = \"/tmp/g.sock\"\n",
            "g.toml",
        )
        .unwrap();
        let text = render(&needed(&cfg, None));
        assert!(text.starts_with("-- On the master"), "{text}");
        assert!(
            text.contains("GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'repl'@'%';"),
            "{text}"
        );
        assert!(text.contains("\n-- On the replica ([replica])\n"), "{text}");
        assert!(
            text.contains("GRANT BINLOG ADMIN ON *.* TO 'applier'@'127.0.0.1';"),
            "{text}"
        );
        assert!(
            text.contains(
                "-- only if the replica runs read_only = ON: GRANT READ_ONLY ADMIN ON *.* TO \
                 'applier'@'127.0.0.1';"
            ),
            "{text}"
        );
        assert!(!text.contains("y") || !text.contains("password"), "{text}");
    }
}
