//! Tests of the service's handback position and ways out.

use super::*;

fn row(channel: u16, seqno: Option<u64>, event_id: &str) -> RestartRow {
    RestartRow {
        seqno: seqno.map(Seqno),
        event_id: (!event_id.is_empty()).then(|| event_id.parse().unwrap()),
        gtid: if event_id.is_empty() {
            GtidPos::new()
        } else {
            "0-1-7".parse().unwrap()
        },
        ..RestartRow::empty(ChannelId::recorded(channel))
    }
}

#[test]
fn handback_position_from_the_rows() {
    let at = "mariadb-bin.000002:610";
    let (seqno, position, gtid) = handback_position(
        &[row(0, Some(9), at), row(1, Some(9), at)],
        "sjc",
        None,
        true,
    )
    .unwrap();
    assert_eq!(seqno, Some(Seqno(9)));
    assert_eq!(position.to_string(), at);
    assert_eq!(gtid.map(|g| g.to_string()).as_deref(), Some("0-1-7"));
    // Nothing applied since the takeover: its position, no seqno.
    let (seqno, position, _) =
        handback_position(&[row(0, None, at), row(1, None, at)], "sjc", None, true).unwrap();
    assert_eq!((seqno, position.to_string().as_str()), (None, at));
    let differ = handback_position(
        &[row(0, Some(8), at), row(1, Some(9), at)],
        "sjc",
        None,
        true,
    )
    .unwrap_err()
    .to_string();
    assert!(
        differ.starts_with("the channels' restart rows are at different seqnos (8,9)"),
        "{}",
        differ
    );
    assert!(differ.contains("`shardrepctl reset --confirm sjc`"));
    // After a failure at seqno 10: the seqnos below it make the rows even.
    let before = handback_position(
        &[row(0, Some(8), at), row(1, Some(9), at)],
        "sjc",
        Some(10),
        true,
    )
    .unwrap_err()
    .to_string();
    assert!(
        before.contains(
            "To hand the replica back before the failed seqno 10: `shardrepctl online \
             --until-seqno 9` applies the seqnos before it"
        ),
        "{before}"
    );
    // A seqno above the failed one committed: no exact handback before it.
    let above = handback_position(
        &[row(0, Some(8), at), row(1, Some(9), at)],
        "sjc",
        Some(7),
        true,
    )
    .unwrap_err()
    .to_string();
    assert!(
        above.contains("Seqno 9 above the failed seqno 7 is already committed"),
        "{above}"
    );
    assert!(!above.contains("--until-seqno"), "{above}");
    // Rows that record what is committed (a low-water mark): apart, with
    // nothing committed above the mark (a row beyond it is a stop mark),
    // handed back at the mark's row; not under the master's GTIDs, whose
    // rows may lag the replica's binlog.
    let marked = |channel, seqno, low| RestartRow {
        low_water: restart::LowWater::At(Seqno(low)),
        ..row(
            channel,
            Some(seqno),
            if seqno == low {
                at
            } else {
                "mariadb-bin.000002:900"
            },
        )
    };
    let rows = [marked(0, 8, 7), marked(1, 7, 7)];
    let (seqno, position, _) = handback_position(&rows, "sjc", Some(8), true).unwrap();
    assert_eq!((seqno, position.to_string().as_str()), (Some(Seqno(7)), at));
    let lagging = handback_position(&rows, "sjc", Some(8), false)
        .unwrap_err()
        .to_string();
    assert!(
        lagging.contains("`shardrepctl online --until-seqno 7`"),
        "{lagging}"
    );
    // A commit above the mark: refused.
    let mut above_mark = rows.clone();
    above_mark[0].committed_above = [Seqno(8)].into_iter().collect();
    let refused = handback_position(&above_mark, "sjc", Some(9), true)
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("`shardrepctl online --until-seqno 8`"),
        "{refused}"
    );
    let none = handback_position(&[row(0, None, ""), row(1, None, "")], "sjc", None, true)
        .unwrap_err()
        .to_string();
    assert!(none.contains("no takeover position"), "{}", none);
    let empty = handback_position(&[], "sjc", None, true)
        .unwrap_err()
        .to_string();
    assert!(empty.contains("no restart position"));
}

/// A service `sjc` configured from `conf/sjc.toml`, queue `/tmp/q`.
fn config() -> Config {
    Config::from_toml_str(
        r#"
[service]
name = "sjc"
[source]
kind = "live"
host = "127.0.0.1"
user = "shardrep"
password = "source-pass-1"
server_id = 4242
[replica]
host = "127.0.0.1"
user = "shardrep"
password = "replica-pass-2"
[queue]
dir = "/tmp/q"
[control]
socket = "/tmp/c.sock"
"#,
        "conf/sjc.toml",
    )
    .unwrap()
}

fn text(error: &RunError, rows: &[RestartRow]) -> String {
    way_out::way_out(error, rows, &config(), None).unwrap_or_default()
}

#[test]
fn every_error_of_the_source_names_a_way_out() {
    let at = "mariadb-bin.000002:610";
    let rows = [row(0, Some(9), at), row(1, Some(9), at)];
    let purged = RunError::Extract {
        message: "binlog purged".into(),
        code: Some(1236),
    };
    let t = text(&purged, &rows);
    assert!(
        t.contains("Re-seed the replica from the master, then `shardrepctl reset --confirm sjc`"),
        "{t}"
    );
    assert!(!t.contains("handback"), "{t}");
    let other = RunError::Extract {
        message: "XA PREPARE".into(),
        code: None,
    };
    let t = text(&other, &rows);
    assert!(
        t.contains(
            "`shardrepctl handback` hands the replica back to native replication at the \
             applied position (seqno 9, binlog position mariadb-bin.000002:610)"
        ),
        "{t}"
    );
    let uneven = [row(0, Some(8), at), row(1, Some(9), at)];
    let t = text(&other, &uneven);
    assert!(!t.contains("handback"), "{t}");
    assert!(t.contains("`shardrepctl reset --confirm sjc`"), "{t}");
    let refused = RunError::Extract {
        message: "server error 1045".into(),
        code: Some(1045),
    };
    assert_eq!(
        text(&refused, &rows),
        "the master refused shardrep's user or a privilege (REPLICATION SLAVE, BINLOG \
         MONITOR): fix `user` and the password of [source] in conf/sjc.toml, or the user's \
         grants on the master, then start shardrep again (it reads conf/sjc.toml only at \
         start)"
    );
}

// A full queue file system: free space and go online, never hand back or
// reset (nothing is lost); the error reaches the run as QueueFull.
#[test]
fn a_full_queue_says_free_space_then_online() {
    let at = "mariadb-bin.000002:610";
    let rows = [row(0, Some(9), at), row(1, Some(9), at)];
    let full = crate::queue::QueueError::SegmentIo {
        segment: "q/seg-0".into(),
        op: "write q/seg-0/log".into(),
        cause: std::io::Error::from_raw_os_error(28),
    };
    assert!(full.is_storage_full());
    let error = RunError::from(crate::replicator::ExtractFailure::from(
        crate::replicator::extract::ExtractToQueueError::Queue(full),
    ));
    assert!(matches!(error, RunError::QueueFull { .. }), "{error:?}");
    let t = text(&error, &rows);
    assert!(
        t.starts_with("the queue's file system is full: free space"),
        "{t}"
    );
    assert!(t.contains("then `shardrepctl online`"), "{t}");
    assert!(!t.contains("handback") && !t.contains("reset"), "{t}");
    let other = crate::queue::QueueError::SegmentIo {
        segment: "q/seg-0".into(),
        op: "write".into(),
        cause: std::io::Error::from_raw_os_error(5),
    };
    assert!(!other.is_storage_full());
}

#[test]
fn a_refused_login_names_the_section_and_the_file() {
    use crate::replicator::SetupServer;
    let refused = |server| RunError::Setup {
        message: "cannot connect".into(),
        code: Some(1045),
        server: Some(server),
    };
    assert_eq!(
        text(&refused(SetupServer::Replica), &[]),
        "the replica refused shardrep's user or a privilege: fix `user` and the password \
         (`password`, `password_file` or `password_env`) of [replica] in conf/sjc.toml, or \
         the user's grants there, then start shardrep again (it reads conf/sjc.toml only at \
         start)"
    );
    assert!(text(&refused(SetupServer::Master), &[]).starts_with(
        "the master refused shardrep's user or a privilege: fix `user` and the password \
         (`password`, `password_file` or `password_env`) of [source] in conf/sjc.toml"
    ));
    let down = RunError::Setup {
        message: "cannot connect".into(),
        code: None,
        server: Some(SetupServer::Replica),
    };
    assert_eq!(
        text(&down, &[]),
        "start the replica, then `shardrepctl online` retries; or fix its address ([replica] \
         in conf/sjc.toml), then start shardrep again (it reads conf/sjc.toml only at start)"
    );
    assert_eq!(
        text(&RunError::setup("takeover: the replica has no master"), &[]),
        "fix what the message names, then `shardrepctl online` retries (a change to \
         conf/sjc.toml takes a restart of shardrep: it reads conf/sjc.toml only at start)"
    );
}

#[test]
fn a_rejected_shard_names_the_shard_insert_line() {
    let rejected = |rule, shard: &str| {
        RunError::Apply(crate::scheduler::SchedulerError::Rejected {
            seqno: Seqno(11),
            shard: shard.into(),
            event_id: "mariadb-bin.000002:610".parse().unwrap(),
            message: format!("rejected transaction from unknown shard: seqno=11 shard={shard}"),
            rule,
        })
    };
    use crate::shard::filter::Rule;
    assert_eq!(
        text(&rejected(Rule::UnknownShard, "mystery"), &[]),
        "admit the shard with `printf '%s\\n' 'shard_id master critical' 'mystery sjc false' \
         | shardrepctl shard insert`, then `shardrepctl online`; or `shardrepctl online \
         --skip-seqno 11` if this transaction must never be applied"
    );
    // A quote in a name stays one shell word.
    assert!(text(&rejected(Rule::UnknownShard, "it's"), &[])
        .contains(r"'it'\''s sjc false' | shardrepctl shard insert"));
    assert_eq!(
        text(&rejected(Rule::NotHome, "acme"), &[]),
        "if the shard map is wrong about shard acme (its master, `shardrepctl shard list`), \
         correct its row with `printf '%s\\n' 'shard_id master critical' 'acme sjc false' | \
         shardrepctl shard update`, then `shardrepctl online`; or `shardrepctl online \
         --skip-seqno 11` if this transaction must never be applied here"
    );
}

#[test]
fn every_other_error_says_what_to_do() {
    use crate::scheduler::SchedulerError;
    let some = |e: RunError| way_out::way_out(&e, &[], &config(), None);
    assert!(some(RunError::QueueRead {
        seqno: 3,
        message: "corrupt".into()
    })
    .unwrap()
    .starts_with(
        "the queue cannot give this transaction back: restore the queue directory /tmp/q"
    ));
    assert_eq!(
        some(RunError::Apply(SchedulerError::ChannelGone(
            ChannelId::recorded(2)
        ))),
        Some(
            "a channel's thread ended unexpectedly (a fault of shardrep: report it with the \
             log); `shardrepctl online` resumes at the restart rows"
                .into()
        )
    );
    assert_eq!(
        some(RunError::Apply(SchedulerError::Routing {
            seqno: Seqno(5),
            message: "lost".into()
        })),
        Some(
            "fix the replica (its foreign keys could not be read after seqno 5), then \
             `shardrepctl online`: routing resumes with the keys read again"
                .into()
        )
    );
    // The message says what to do: nothing is added.
    assert_eq!(some(RunError::NativeReplication("stop it".into())), None);
    let queue = |e| some(RunError::Queue(e));
    assert!(queue(crate::queue::QueueError::Locked {
        dir: "/tmp/q".into(),
        holder: None
    })
    .is_none());
    assert!(queue(crate::queue::QueueError::Full {
        dir: "/tmp/q".into(),
        size_bytes: 10,
        max_size_bytes: 5
    })
    .unwrap()
    .contains("`max_size_bytes` of [queue] in conf/sjc.toml"));
}

fn apply_error(code: u16, message: &str) -> RunError {
    RunError::Apply(crate::scheduler::SchedulerError::Apply(Box::new(
        crate::applier::error::ApplyError {
            channel: ChannelId::recorded(1),
            seqno: Some(Seqno(7)),
            event_id: Some("mariadb-bin.000002:610".parse().unwrap()),
            shard: "s".into(),
            sql: "INSERT".into(),
            code,
            message: message.into(),
        },
    )))
}

#[test]
fn a_transient_error_never_advises_a_skip() {
    let at = "mariadb-bin.000002:610";
    let rows = [row(0, Some(6), at)];
    for (code, message) in [
        (2013, "Lost connection to server during query"),
        (2006, "MySQL server has gone away"),
        (2003, "Can't connect"),
        (2002, "Can't connect through socket"),
        (1205, "Lock wait timeout exceeded"),
        (1213, "Deadlock found"),
        (0, "Input/output error: Connection refused (os error 111)"),
        (0, "Connection to the server is closed"),
    ] {
        let t = text(&apply_error(code, message), &rows);
        assert_eq!(
            t,
            "the replica did not answer within the retries; when it answers again, \
             `shardrepctl online` (nothing is lost: the service resumes at the restart rows)",
            "{code} {message}"
        );
        assert!(!t.contains("skip"), "{t}");
    }
    let t = text(&apply_error(1062, "Duplicate entry"), &rows);
    assert!(t.contains("`shardrepctl online --skip-seqno 7`"), "{t}");
    // Nothing committed at or above seqno 7: a handback before it.
    assert!(
        t.contains("`shardrepctl online --until-seqno 6` (the seqnos before it"),
        "{t}"
    );
    let t = text(
        &apply_error(1062, "Duplicate entry"),
        &[row(0, Some(7), at)],
    );
    assert!(!t.contains("--until-seqno"), "{t}");
    // A duplicate key or a missing row is never a lost COMMIT reply: the
    // restart row was read again before the block ran a second time.
    for code in [1062, 1032] {
        let t = text(&apply_error(code, "x"), &rows);
        assert!(
            t.starts_with(
                "this is not a transaction applied twice: the channel's restart row, read again \
                 after any lost connection, records seqno 7 as never committed here"
            ),
            "{t}"
        );
    }
    // An error that names no transaction (a channel's connection) never
    // advises skipping seqno 0.
    let mut e = apply_error(1146, "Table 'shardrep_sjc.restart_position' doesn't exist");
    if let RunError::Apply(crate::scheduler::SchedulerError::Apply(a)) = &mut e {
        a.seqno = None;
        a.event_id = None;
    }
    assert_eq!(
        text(&e, &rows),
        "fix the replica (the error above names no transaction), then `shardrepctl online` \
         retries"
    );
    let message =
        crate::applier::ddl_replay::unsafe_replay_message(7, at, "RENAME TABLE a TO b", false);
    assert_eq!(
        way_out::way_out(&apply_error(0, &message), &rows, &config(), None),
        None
    );
}
