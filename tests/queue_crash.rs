//! Crash test of the queue (issue 4's gate for sled): a child process
//! `shardrep extract --binlog-dir DIR --from FILE:4 --to-queue QDIR` is
//! killed with SIGKILL at random moments and restarted (always with the
//! same `--from`, which a queue with stored progress ignores); after every
//! kill the queue must hold an exact prefix of the master's transactions
//! with the progress of its last one, and after a final uninterrupted run
//! it must hold exactly the master's transactions, each once, in order.
//!
//! Input: a copy of the sysbench binlog of `bench/gen-binlog.sh`
//! (`target/bench-data/sysbench-binlog/`, or `$BENCH_DATA_DIR`) when it is
//! there (`COMPLETE` marker), its last file's closing ROTATE cut off;
//! otherwise the committed binlog fixtures of
//! tests/fixtures/binlog/cases/, each with its closing ROTATE cut off so
//! that the file source moves on to the next file, repeated to a few
//! thousand transactions over a few hundred files.
//!
//! The queue uses 1 MiB segments so that kills also land around segment
//! rollovers. `QUEUE_CRASH_SEED` replays a run (the seed is printed);
//! `QUEUE_CRASH_ROUNDS` sets the number of kills (default 15).

mod queue_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use shardrep::config::{FilesSourceConfig, SourceEndpoint};
use shardrep::event::Transaction;
use shardrep::extractor::reader::{ExtractStart, Extractor};
use shardrep::position::{BinlogPosition, GtidPos, Seqno};
use shardrep::queue::{ExtractorProgress, QueueOptions, TransactionQueue};

use queue_support::{cut_closing_rotate, note, TempDir};

const SEGMENT_BYTES: &str = "1048576";

/// What the queue must hold for one seqno: a fingerprint of the whole
/// transaction (CRC-32 of its postcard encoding) and the progress after
/// it.
#[derive(Clone, Debug, PartialEq)]
struct Expected {
    fingerprint: u32,
    position: BinlogPosition,
    gtid_position: GtidPos,
}

fn fingerprint(txn: &Transaction) -> u32 {
    crc32fast::hash(&postcard::to_allocvec(txn).expect("encode"))
}

struct Input {
    dir: PathBuf,
    first_file: String,
    label: String,
}

/// The generated sysbench binlog, copied into `into` with the closing
/// ROTATE of its last file cut off (it names a file that is not part of
/// the set, which a non-following extraction may treat as an error).
fn sysbench_input(into: &Path) -> Option<Input> {
    let dir = match std::env::var_os("BENCH_DATA_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/sysbench-binlog"),
    };
    if !dir.join("COMPLETE").is_file() {
        return None;
    }
    let index = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "index"))?;
    let text = std::fs::read_to_string(index).ok()?;
    let names: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .filter_map(|l| Path::new(l).file_name()?.to_str().map(str::to_owned))
        .collect();
    let copy = into.join("binlog");
    std::fs::create_dir_all(&copy).unwrap();
    for (i, name) in names.iter().enumerate() {
        let bytes = std::fs::read(dir.join(name)).ok()?;
        let bytes = if i + 1 == names.len() {
            cut_closing_rotate(&bytes)
        } else {
            bytes
        };
        std::fs::write(copy.join(name), bytes).unwrap();
    }
    Some(Input {
        label: format!("sysbench binlog {} ({} files)", dir.display(), names.len()),
        dir: copy,
        first_file: names.first()?.clone(),
    })
}

/// Extracts every transaction of `dir` from `first:4`.
fn extract_all(dir: &Path, first: &str) -> Result<Vec<Transaction>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let endpoint = SourceEndpoint::Files(FilesSourceConfig {
            binlog_dir: dir.to_path_buf(),
            binlog_index: None,
        });
        let start = ExtractStart::File(BinlogPosition::new(first, 4).unwrap());
        let mut ex =
            Extractor::open(&endpoint, start, Seqno(0), false).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        while let Some(t) = ex.next_transaction().await.map_err(|e| e.to_string())? {
            out.push(t);
        }
        Ok(out)
    })
}

/// The binlog fixtures, closing ROTATE removed, repeated `copies` times
/// as `mariadb-bin.000001`, `.000002`, ... in `into`.
fn fixture_input(into: &Path, copies: usize) -> Input {
    let cases = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/binlog/cases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&cases)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    files.sort();
    let probe = into.join("probe");
    let mut usable = Vec::new();
    for f in files {
        let bytes = cut_closing_rotate(&std::fs::read(&f).unwrap());
        std::fs::create_dir_all(&probe).unwrap();
        std::fs::write(probe.join("mariadb-bin.000001"), &bytes).unwrap();
        // Fixtures that the extractor rejects on purpose are left out.
        match extract_all(&probe, "mariadb-bin.000001") {
            Ok(t) if !t.is_empty() => usable.push(bytes),
            _ => {}
        }
        std::fs::remove_dir_all(&probe).unwrap();
    }
    assert!(!usable.is_empty());
    let dir = into.join("binlog");
    std::fs::create_dir_all(&dir).unwrap();
    let mut n = 1;
    for _ in 0..copies {
        for bytes in &usable {
            std::fs::write(dir.join(format!("mariadb-bin.{n:06}")), bytes).unwrap();
            n += 1;
        }
    }
    Input {
        label: format!(
            "{} fixture binlogs x {copies} = {} files",
            usable.len(),
            n - 1
        ),
        dir,
        first_file: "mariadb-bin.000001".into(),
    }
}

fn expectations(txns: &[Transaction]) -> Vec<Expected> {
    let mut gtid = GtidPos::new();
    txns.iter()
        .enumerate()
        .map(|(i, t)| {
            assert_eq!(t.seqno, Seqno(i as u64));
            if let Some(g) = t.gtid {
                gtid.update(g);
            }
            Expected {
                fingerprint: fingerprint(t),
                position: t.end_position.clone(),
                gtid_position: gtid.clone(),
            }
        })
        .collect()
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

fn child(input: &Input, queue: &Path, log: &Path) -> std::process::Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    Command::new(env!("CARGO_BIN_EXE_shardrep"))
        .arg("extract")
        .arg("--binlog-dir")
        .arg(&input.dir)
        .arg("--from")
        .arg(format!("{}:4", input.first_file))
        .arg("--to-queue")
        .arg(queue)
        .arg("--queue-segment-size-bytes")
        .arg(SEGMENT_BYTES)
        .env("SHARDREP_LOG", "info")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("start shardrep extract")
}

/// Checks that the queue holds an exact prefix of `expected` (the last
/// `tail` transactions and the progress are compared; all of them when
/// `tail` is `None`); returns its length (0 when the kill came before the
/// extractor created the directory).
fn check_queue(queue: &Path, expected: &[Expected], tail: Option<u64>) -> u64 {
    if !queue.exists() {
        // Killed before it created the queue's directory: nothing stored.
        return 0;
    }
    let mut options = QueueOptions::new(queue);
    options.read_only = true;
    let q = TransactionQueue::open(options).expect("open the queue after the kill");
    let next = q.next_seqno().0;
    assert!(
        next <= expected.len() as u64,
        "the queue holds {next} transactions, the master has {}",
        expected.len()
    );
    let progress = q.last_progress();
    match next {
        0 => assert_eq!(progress, None),
        n => {
            let want = &expected[n as usize - 1];
            let got: ExtractorProgress = progress.expect("progress of the last transaction");
            assert_eq!(got.seqno, Seqno(n - 1));
            assert_eq!(
                got.position,
                want.position,
                "progress position after seqno {}",
                n - 1
            );
            assert_eq!(
                got.gtid_position,
                want.gtid_position,
                "GTID position after seqno {}",
                n - 1
            );
        }
    }
    let from = tail.map_or(0, |t| next.saturating_sub(t));
    let mut reader = q.reader_from(Seqno(from)).expect("reader");
    let mut seqno = from;
    while let Some(t) = reader.try_next().expect("read back") {
        assert_eq!(t.seqno, Seqno(seqno));
        assert_eq!(
            fingerprint(&t),
            expected[seqno as usize].fingerprint,
            "seqno {seqno} differs from the master's transaction"
        );
        seqno += 1;
    }
    assert_eq!(seqno, next, "the queue stopped before its last seqno");
    next
}

#[test]
fn kill_9_at_random_moments_loses_and_repeats_nothing() {
    let work = TempDir::new("crash");
    std::fs::create_dir_all(work.path()).unwrap();
    let input = sysbench_input(work.path()).unwrap_or_else(|| fixture_input(work.path(), 40));
    let started = Instant::now();
    let reference = extract_all(&input.dir, &input.first_file).expect("reference extraction");
    let expected = expectations(&reference);
    drop(reference);
    note(&format!(
        "input: {}: {} transactions (reference extraction {:?})",
        input.label,
        expected.len(),
        started.elapsed()
    ));

    // One uninterrupted run into a scratch queue gives the time scale.
    let log = work.path().join("children.log");
    let scratch = work.path().join("scratch-queue");
    let t0 = Instant::now();
    let status = child(&input, &scratch, &log).wait().unwrap();
    let full = t0.elapsed();
    assert!(
        status.success(),
        "calibration run failed; see {}",
        log.display()
    );
    assert_eq!(
        check_queue(&scratch, &expected, None),
        expected.len() as u64
    );
    std::fs::remove_dir_all(&scratch).unwrap();

    let seed = std::env::var("QUEUE_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    let rounds: u32 = std::env::var("QUEUE_CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    note(&format!(
        "full run {full:?}; {rounds} kills; QUEUE_CRASH_SEED={seed}"
    ));
    let mut rng = Rng(seed);

    let queue = work.path().join("queue");
    // A round runs on average for about 1/rounds of the whole extraction
    // after a startup allowance (process start, recovery, and the 100 ms
    // flush interval: what is not flushed when the kill comes is lost and
    // extracted again), so the kills spread over the binlog; one round in
    // four is killed within 100 ms, in startup and recovery.
    let window = full.as_micros() as u64 * 2 / u64::from(rounds.max(1));
    let mut kills = 0;
    let mut stored = Vec::new();
    for round in 0..rounds {
        let mut c = child(&input, &queue, &log);
        let wait = if rng.below(4) == 0 {
            rng.below(100_000)
        } else {
            150_000 + rng.below(window + 150_000)
        };
        std::thread::sleep(Duration::from_micros(wait));
        match c.try_wait().unwrap() {
            Some(status) => assert!(
                status.success(),
                "round {round}: child failed; see {}",
                log.display()
            ),
            None => {
                c.kill().unwrap();
                c.wait().unwrap();
                kills += 1;
            }
        }
        let n = check_queue(&queue, &expected, Some(500));
        stored.push(n);
    }
    let status = child(&input, &queue, &log).wait().unwrap();
    assert!(status.success(), "final run failed; see {}", log.display());
    let n = check_queue(&queue, &expected, None);
    assert_eq!(n, expected.len() as u64, "the queue misses transactions");
    note(&format!(
        "{kills} kills; stored after each round: {stored:?}; final {n} transactions, all equal to the master's"
    ));
    let segments = std::fs::read_dir(&queue)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("seg-")
        })
        .count();
    note(&format!("{segments} segments in the queue"));
}
