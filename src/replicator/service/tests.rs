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
    let (seqno, position, gtid) =
        handback_position(&[row(0, Some(9), at), row(1, Some(9), at)], "sjc").unwrap();
    assert_eq!(seqno, Some(Seqno(9)));
    assert_eq!(position.to_string(), at);
    assert_eq!(gtid.map(|g| g.to_string()).as_deref(), Some("0-1-7"));
    // Nothing applied since the takeover: its position, no seqno.
    let (seqno, position, _) =
        handback_position(&[row(0, None, at), row(1, None, at)], "sjc").unwrap();
    assert_eq!((seqno, position.to_string().as_str()), (None, at));
    let differ = handback_position(&[row(0, Some(8), at), row(1, Some(9), at)], "sjc")
        .unwrap_err()
        .to_string();
    assert!(
        differ.starts_with("the channels' restart rows are at different seqnos (8,9)"),
        "{}",
        differ
    );
    assert!(differ.contains("`shardrepctl reset --confirm sjc`"));
    let none = handback_position(&[row(0, None, ""), row(1, None, "")], "sjc")
        .unwrap_err()
        .to_string();
    assert!(none.contains("no takeover position"), "{}", none);
    let empty = handback_position(&[], "sjc").unwrap_err().to_string();
    assert!(empty.contains("no restart position"));
}

#[test]
fn every_error_of_the_source_names_a_way_out() {
    let at = "mariadb-bin.000002:610";
    let rows = [row(0, Some(9), at), row(1, Some(9), at)];
    let purged = RunError::Extract {
        message: "binlog purged".into(),
        code: Some(1236),
    };
    let text = way_out(&purged, &rows, "sjc");
    assert!(
        text.contains(
            "Re-seed the replica from the master, then `shardrepctl reset --confirm sjc`"
        ),
        "{text}"
    );
    assert!(!text.contains("handback"), "{text}");
    let other = RunError::Extract {
        message: "XA PREPARE".into(),
        code: None,
    };
    let text = way_out(&other, &rows, "sjc");
    assert!(
        text.contains(
            "`shardrepctl handback` hands the replica back to native replication at the \
             applied position (seqno 9, binlog position mariadb-bin.000002:610)"
        ),
        "{text}"
    );
    let uneven = [row(0, Some(8), at), row(1, Some(9), at)];
    let text = way_out(&other, &uneven, "sjc");
    assert!(!text.contains("handback"), "{text}");
    assert!(text.contains("`shardrepctl reset --confirm sjc`"), "{text}");
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
        let text = way_out(&apply_error(code, message), &rows, "sjc");
        assert_eq!(
            text,
            ". Way out: the replica did not answer within the retries; when it answers \
             again, `shardrepctl online` (nothing is lost: the service resumes at the \
             restart rows)",
            "{code} {message}"
        );
        assert!(!text.contains("skip"), "{text}");
    }
    let text = way_out(&apply_error(1062, "Duplicate entry"), &rows, "sjc");
    assert!(
        text.contains("`shardrepctl online --skip-seqno 7`"),
        "{text}"
    );
    let message =
        crate::applier::ddl_replay::unsafe_replay_message(7, at, "RENAME TABLE a TO b", false);
    assert_eq!(way_out(&apply_error(0, &message), &rows, "sjc"), "");
}
