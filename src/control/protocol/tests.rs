//! Tests of the protocol's wire format: requests, responses, status keys.

use super::*;
use serde_json::json;

fn round_trip(req: Request, line: &str) {
    assert_eq!(serde_json::to_string(&req).unwrap(), line);
    assert_eq!(serde_json::from_str::<Request>(line).unwrap(), req);
}

#[test]
fn requests_on_the_wire() {
    round_trip(Request::Status { name: None }, r#"{"request":"status"}"#);
    round_trip(
        Request::Status {
            name: Some(StatusName::Channels),
        },
        r#"{"request":"status","name":"channels"}"#,
    );
    round_trip(Request::Services, r#"{"request":"services"}"#);
    round_trip(
        Request::Online {
            skip_seqnos: Some("5-7,3".parse().unwrap()),
            until_seqno: Some(9),
        },
        r#"{"request":"online","skipSeqnos":"3,5-7","untilSeqno":9}"#,
    );
    round_trip(
        Request::Offline {
            immediate: true,
            at_seqno: None,
        },
        r#"{"request":"offline","immediate":true}"#,
    );
    round_trip(
        Request::Wait {
            until: WaitFor::State(State::Online),
            timeout_secs: 5,
        },
        r#"{"request":"wait","until":{"state":"ONLINE"},"timeoutSecs":5}"#,
    );
    round_trip(
        Request::Wait {
            until: WaitFor::Applied(12),
            timeout_secs: 0,
        },
        r#"{"request":"wait","until":{"applied":12},"timeoutSecs":0}"#,
    );
    round_trip(
        Request::Wait {
            until: WaitFor::Offline(3),
            timeout_secs: 60,
        },
        r#"{"request":"wait","until":{"offline":3},"timeoutSecs":60}"#,
    );
    round_trip(
        Request::ShardInsert {
            rows: vec![ShardRow {
                shard_id: "acme".into(),
                master: "#LOCAL".into(),
                critical: true,
            }],
        },
        r##"{"request":"shardInsert","rows":[{"shardId":"acme","master":"#LOCAL","critical":true}]}"##,
    );
    round_trip(
        Request::ShardDelete {
            ids: vec!["a".into()],
        },
        r#"{"request":"shardDelete","ids":["a"]}"#,
    );
    round_trip(Request::ShardDeleteAll, r#"{"request":"shardDeleteAll"}"#);
    round_trip(Request::ShardList, r#"{"request":"shardList"}"#);
    round_trip(
        Request::LogList {
            low: Some(1),
            high: Some(2),
        },
        r#"{"request":"logList","low":1,"high":2}"#,
    );
    round_trip(Request::LogInfo, r#"{"request":"logInfo"}"#);
    round_trip(
        Request::Handback { start_slave: false },
        r#"{"request":"handback","startSlave":false}"#,
    );
    round_trip(
        Request::Reset {
            confirm: "sjc".into(),
            drop_catalog: false,
        },
        r#"{"request":"reset","confirm":"sjc"}"#,
    );
    round_trip(
        Request::Reset {
            confirm: "sjc".into(),
            drop_catalog: true,
        },
        r#"{"request":"reset","confirm":"sjc","dropCatalog":true}"#,
    );
    round_trip(
        Request::SourceSet {
            host: "db2".into(),
            port: 3307,
            user: None,
            server_id: Some(9),
            timeout_secs: 60,
        },
        r#"{"request":"sourceSet","host":"db2","port":3307,"serverId":9,"timeoutSecs":60}"#,
    );
    assert_eq!(
        serde_json::from_str::<Request>(r#"{"request":"sourceSet","host":"h","port":1}"#).unwrap(),
        Request::SourceSet {
            host: "h".into(),
            port: 1,
            user: None,
            server_id: None,
            timeout_secs: DEFAULT_WAIT_SECS
        }
    );
    for (bad, message) in [
        (
            r#"{"request":"sourceSet","host":" ","port":1}"#,
            "source set: --host is empty",
        ),
        (
            r#"{"request":"sourceSet","host":"h","port":0}"#,
            "sourceSet: port must be 1..=65535",
        ),
        (
            r#"{"request":"sourceSet","host":"h","port":1,"serverId":0}"#,
            "sourceSet: serverId must be nonzero",
        ),
    ] {
        let request: Request = serde_json::from_str(bad).unwrap();
        assert_eq!(request.validate().unwrap_err().message, message);
    }
    // Defaults.
    assert_eq!(
        serde_json::from_str::<Request>(r#"{"request":"wait","until":{"applied":1}}"#).unwrap(),
        Request::Wait {
            until: WaitFor::Applied(1),
            timeout_secs: DEFAULT_WAIT_SECS
        }
    );
    assert_eq!(
        serde_json::from_str::<Request>(r#"{"request":"offline"}"#).unwrap(),
        Request::Offline {
            immediate: false,
            at_seqno: None
        }
    );
}

#[test]
fn bad_requests_are_refused() {
    for (line, needle) in [
        (r#"{"request":"reboot"}"#, "unknown variant `reboot`"),
        (
            r#"{"request":"status","nmae":"queue"}"#,
            "unknown field `nmae`",
        ),
        (
            r#"{"request":"status","name":"disks"}"#,
            "unknown variant `disks`",
        ),
        (
            r#"{"request":"online","skipSeqnos":"7-3"}"#,
            "runs backwards",
        ),
        (
            r#"{"request":"wait","until":{"state":"UP"}}"#,
            "unknown state",
        ),
        (r#"{"request":"wait"}"#, "missing field `until`"),
        (r#"{"status":1}"#, "missing field `request`"),
    ] {
        let err = serde_json::from_str::<Request>(line)
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{line}: {err}");
    }
    let bad = |r: Request| r.validate().unwrap_err();
    assert_eq!(
        bad(Request::Offline {
            immediate: true,
            at_seqno: Some(3)
        })
        .message,
        "offline: immediate and atSeqno exclude each other"
    );
    assert_eq!(
        bad(Request::Wait {
            until: WaitFor::Applied(1),
            timeout_secs: MAX_WAIT_SECS + 1
        })
        .kind,
        ErrorKind::BadRequest
    );
    assert_eq!(
        bad(Request::LogList {
            low: Some(3),
            high: Some(2)
        })
        .message,
        "logList: low 3 is above high 2"
    );
}

#[test]
fn responses_on_the_wire() {
    let ok = Response::Ok(json!({"state": "ONLINE"}));
    let line = serde_json::to_string(&ok).unwrap();
    assert_eq!(line, r#"{"ok":{"state":"ONLINE"}}"#);
    let err = Response::Error(ControlError::new(ErrorKind::Timeout, "timed out"));
    let line = serde_json::to_string(&err).unwrap();
    assert_eq!(
        line,
        r#"{"error":{"kind":"timeout","message":"timed out"}}"#
    );
    assert_eq!(serde_json::from_str::<Response>(&line).unwrap(), err);
    let future: Response =
        serde_json::from_str(r#"{"error":{"kind":"quantum","message":"m"}}"#).unwrap();
    assert_eq!(
        future,
        Response::Error(ControlError::new(ErrorKind::Other, "m"))
    );
}

#[test]
fn status_has_every_key() {
    let mut s = Status::new("sjc", "applier", State::OfflineNormal);
    let v = serde_json::to_value(&s).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "appliedLastEventId",
            "appliedLastSeqno",
            "appliedLatency",
            "applyMethod",
            "applyRateBytesPerSecond",
            "applyRateTransactionsPerSecond",
            "binlogGtids",
            "binlogGtidsConfigured",
            "blocksCommittedCount",
            "bytesBehind",
            "catchUpEtaSeconds",
            "channels",
            "dependencyWaitCount",
            "droppedCount",
            "errorCounts",
            "fallbackCounts",
            "inFlightCount",
            "inFlightKeys",
            "lastOfflineClean",
            "masterBinlogEnd",
            "masterGtidPos",
            "maximumStoredSeqNo",
            "minimumStoredSeqNo",
            "offlineAtSeqno",
            "openTempTables",
            "parallelism",
            "pendingError",
            "pendingErrorChannel",
            "pendingErrorCode",
            "pendingErrorEventId",
            "pendingErrorSeqno",
            "pendingErrorShard",
            "pendingExceptionMessage",
            "relativeLatency",
            "retryCount",
            "retryCounts",
            "role",
            "rowChangesAppliedCount",
            "serializationCount",
            "serviceName",
            "skippedCount",
            "skippedSeqnos",
            "sourceFirstSeqno",
            "sourceHost",
            "sourcePort",
            "sourceSwitchUnderWay",
            "sourceSwitchUnfinished",
            "sourceSwitchedAt",
            "state",
            "timeInStateSeconds",
            "transactionsAppliedCount",
            "transactionsBehind",
            "unknownOutcomeCommittedCount",
            "unknownOutcomeReappliedCount",
            "untilSeqno",
            "uptimeSeconds",
            "windowWaitCount",
        ]
    );
    assert_eq!(v["pendingError"], Value::Null);
    assert_eq!(serde_json::from_value::<Status>(v).unwrap(), s);
    let mut e = PendingError::new("channel 1: duplicate key");
    e.code = Some(1062);
    e.seqno = Some(9);
    s.state = State::OfflineError;
    s.pending_error = Some(e);
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["pendingError"], "channel 1: duplicate key");
    assert_eq!(v["pendingErrorCode"], 1062);
    assert_eq!(v["pendingErrorSeqno"], 9);
    assert_eq!(v["state"], "OFFLINE:ERROR");
    assert_eq!(serde_json::from_value::<Status>(v).unwrap(), s);
}

#[test]
fn shard_rows_convert() {
    let row = ShardRow {
        shard_id: "acme".into(),
        master: "sjc".into(),
        critical: false,
    };
    let entry = ShardEntry::try_from(&row).unwrap();
    assert_eq!(ShardRow::from(&entry), row);
    let bad = ShardRow {
        master: "no such".into(),
        ..row
    };
    let e = ShardEntry::try_from(&bad).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert!(e.message.contains("master \"no such\""), "{}", e.message);
}
