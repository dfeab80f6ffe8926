//! The scheduler and [`ShardRouter`] around a DDL that adds a foreign key
//! between shards (issue 14, §2), with channels stood in for by threads
//! that record what they receive (no database): every restart row is
//! brought to the seqno before the DDL, the DDL runs alone on its own
//! channel, the foreign keys are read again only once it has committed,
//! and the shards it joins go to their group's channel from the next
//! transaction on.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shardrep::applier::progress::Progress;
use shardrep::applier::work::Work;
use shardrep::event::{Change, Statement, Transaction, UNKNOWN_SHARD};
use shardrep::position::{BinlogPosition, Epoch, GtidPos, Seqno};
use shardrep::scheduler::{self, SchedulerCounters, SchedulerSettings, ShardRouter};
use shardrep::shard::foreign_keys::{ForeignKey, ForeignKeyRouting};
use shardrep::shard::{ChannelAssignment, ShardFilter, ShardMap};

const CHANNELS: u16 = 4;
const DDL: &str = "ALTER TABLE b.t ADD CONSTRAINT fk_b_a FOREIGN KEY (a_id) REFERENCES a.t (id)";

fn txn(seqno: u64, shard: &str, ddl: Option<&str>) -> Transaction {
    Transaction {
        seqno: Seqno(seqno),
        server_id: 1,
        gtid: None,
        commit_id: None,
        start_position: BinlogPosition::new("mariadb-bin.000001", 4).unwrap(),
        end_position: BinlogPosition::new("mariadb-bin.000001", 100 + seqno).unwrap(),
        commit_timestamp: 0,
        shard: shard.to_string(),
        tables: Vec::new(),
        changes: ddl
            .map(|sql| {
                Change::Statement(Statement {
                    sql: sql.as_bytes().to_vec(),
                    default_schema: None,
                    context: Default::default(),
                    error_code: 0,
                    thread_id: None,
                })
            })
            .into_iter()
            .collect(),
        row_events: None,
        fragment: None,
    }
}

#[test]
fn a_foreign_key_added_by_ddl_joins_the_shards_from_the_next_transaction_on() {
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    // The replica's cross-schema foreign keys: none until the DDL is
    // applied (by the stand-in channel).
    let replica_keys = Arc::new(Mutex::new(Vec::<ForeignKey>::new()));
    let reader = {
        let (log, keys) = (log.clone(), replica_keys.clone());
        Box::new(move || {
            log.lock().unwrap().push("read foreign keys".to_string());
            Ok(keys.lock().unwrap().clone())
        })
    };
    let assignment = ChannelAssignment::parse("a=0\nb=1\nc=2\n", CHANNELS, "t").unwrap();
    let map = ShardMap::parse(
        "shard_id master critical\na svc false\nb svc false\nc svc false\n",
        "t",
    )
    .unwrap();
    let foreign_keys = ForeignKeyRouting::start(reader, &assignment).unwrap();
    let shared = foreign_keys.shared();
    let mut router = ShardRouter {
        filter: ShardFilter::new("svc", map),
        assignment: assignment.clone(),
        live_map: None,
        foreign_keys: Some(foreign_keys),
        row_keys: None,
    };

    let progress = Arc::new(Progress::new(&[None; CHANNELS as usize]));
    let mut senders = Vec::new();
    let mut threads = Vec::new();
    for c in 0..usize::from(CHANNELS) {
        let (tx, rx) = crossbeam_channel::bounded::<Work>(16);
        senders.push(tx);
        let (log, progress, keys) = (log.clone(), progress.clone(), replica_keys.clone());
        threads.push(std::thread::spawn(move || {
            let mut committed: Option<Seqno> = None;
            for work in rx {
                match work {
                    Work::Apply {
                        txn, alone, bytes, ..
                    } => {
                        // Slow, so a scheduler that did not wait would be
                        // seen routing ahead.
                        std::thread::sleep(Duration::from_millis(20));
                        if !txn.changes.is_empty() {
                            *keys.lock().unwrap() = vec![ForeignKey {
                                child_schema: "b".into(),
                                child_table: "t".into(),
                                name: "fk_b_a".into(),
                                parent_schema: "a".into(),
                                parent_table: "t".into(),
                            }];
                        }
                        log.lock().unwrap().push(format!(
                            "apply {} on {c}{}",
                            txn.seqno,
                            if alone { " alone" } else { "" }
                        ));
                        committed = Some(txn.seqno);
                        progress.release_memory(bytes);
                        progress.set_committed(c, txn.seqno);
                    }
                    Work::Sync(m) => {
                        if committed.is_none_or(|s| s < m.seqno) {
                            log.lock().unwrap().push(format!("sync {} on {c}", m.seqno));
                            committed = Some(m.seqno);
                        }
                        progress.set_committed(c, committed.unwrap());
                    }
                    Work::Stop(_) => break,
                }
            }
        }));
    }

    let mut stream = vec![
        txn(0, "a", None),
        txn(1, "b", None),
        txn(2, UNKNOWN_SHARD, Some(DDL)),
        txn(3, "b", None),
        txn(4, "a", None),
        txn(5, "c", None),
    ]
    .into_iter();
    let counters = SchedulerCounters::default();
    let settings = SchedulerSettings::until(Seqno(5));
    scheduler::run(
        |_| {
            Ok(stream.next().map(|txn| scheduler::Queued {
                txn,
                epoch: Epoch(1),
                gtid_position: GtidPos::new(),
            }))
        },
        &mut router,
        &senders,
        &progress,
        &counters,
        &AtomicBool::new(false),
        &settings,
    )
    .unwrap();
    drop(senders);
    for t in threads {
        t.join().unwrap();
    }

    let ddl_channel = assignment.channel_of(UNKNOWN_SHARD).get();
    let log = log.lock().unwrap().clone();
    let at = |entry: &str| {
        log.iter()
            .position(|e| e == entry)
            .unwrap_or_else(|| panic!("no {entry:?} in {log:#?}"))
    };
    let ddl = at(&format!("apply 2 on {ddl_channel} alone"));
    // Every restart row at seqno 1 before the DDL (channels 0 and 1
    // committed 0 and 1; the others, and channel 0, record SYNC 1).
    assert!(
        at("apply 0 on 0") < ddl && at("apply 1 on 1") < ddl,
        "{log:#?}"
    );
    for c in 0..CHANNELS {
        if c != 1 {
            assert!(at(&format!("sync 1 on {c}")) < ddl, "{log:#?}");
        }
    }
    // Read at start, and again after the DDL committed, before anything
    // after it was routed: b then goes to its group's channel (a's, 0).
    let reads: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, e)| *e == "read foreign keys")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(reads.len(), 2, "{log:#?}");
    assert!(ddl < reads[1], "{log:#?}");
    assert!(reads[1] < at("apply 3 on 0"), "{log:#?}");
    assert!(at("apply 3 on 0") < at("apply 4 on 0"), "{log:#?}");
    at("apply 5 on 2");
    // Status sees the new group.
    let groups = shared.lock().unwrap().clone();
    let group = groups.group_of("b").expect("b is in a group");
    assert_eq!(group.shards, ["a", "b"]);
    assert_eq!(group.channel.get(), 0);
    assert_eq!(
        counters
            .serializations
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}
