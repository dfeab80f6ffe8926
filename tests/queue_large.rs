//! Very large transactions (case B11 has a 78 MB row event): no record
//! size limit, chunked storage, exact read back before and after a
//! reopen, and no sled blob file (sled 0.34 never fsyncs those).
//!
//! `b11_binlog_round_trips` uses `target/fixtures/B11.bin` (written by
//! `scripts/fixtures-cases.sh --with-b11`, about 170 MB) when present.

mod queue_support;

use std::path::Path;

use shardrep::config::{FilesSourceConfig, SourceEndpoint};
use shardrep::event::{Change, Transaction, Value};
use shardrep::extractor::reader::{ExtractStart, Extractor};
use shardrep::position::{BinlogPosition, Seqno};
use shardrep::queue::{QueueOptions, TransactionQueue};

use queue_support::{cut_closing_rotate, note, progress, txn, TempDir};

fn blob_files(queue: &Path) -> usize {
    let mut n = 0;
    for seg in std::fs::read_dir(queue).unwrap() {
        let blobs = seg.unwrap().path().join("blobs");
        if blobs.is_dir() {
            n += std::fs::read_dir(blobs).unwrap().count();
        }
    }
    n
}

fn round_trip(dir: &Path, txns: &[Transaction]) {
    let q = TransactionQueue::open(QueueOptions::new(dir)).unwrap();
    for t in txns {
        q.append(t, &progress(t)).unwrap();
    }
    let mut r = q.reader_from(Seqno(0)).unwrap();
    for t in txns {
        assert!(
            r.next().unwrap().unwrap() == *t,
            "seqno {} differs",
            t.seqno
        );
    }
    // A live reader keeps the segments open.
    drop(r);
    q.close().unwrap();
    let q = TransactionQueue::open(QueueOptions::new(dir)).unwrap();
    assert_eq!(q.next_seqno(), Seqno(txns.len() as u64));
    let mut r = q.reader_from(Seqno(0)).unwrap();
    for t in txns {
        assert!(
            r.next().unwrap().unwrap() == *t,
            "seqno {} differs after reopen",
            t.seqno
        );
    }
    assert!(r.next().is_none());
    assert_eq!(blob_files(dir), 0, "sled wrote blob files");
}

#[test]
fn eighty_megabyte_transaction_round_trips() {
    let dir = TempDir::new("large");
    let mut big = txn(1, 0);
    let Change::Rows(rows) = &mut big.changes[1] else {
        unreachable!()
    };
    rows.rows[0].after.as_mut().unwrap().values[1] =
        Value::Bytes((0..80u32 << 20).map(|i| (i % 253) as u8).collect());
    let txns = vec![txn(0, 100), big, txn(2, 100)];
    round_trip(dir.path(), &txns);
}

#[test]
fn b11_binlog_round_trips() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fixtures/B11.bin");
    if !file.is_file() {
        note("B11 skipped: no target/fixtures/B11.bin (scripts/fixtures-cases.sh --with-b11)");
        return;
    }
    let work = TempDir::new("b11");
    let binlog = work.path().join("binlog");
    std::fs::create_dir_all(&binlog).unwrap();
    let bytes = cut_closing_rotate(&std::fs::read(&file).unwrap());
    std::fs::write(binlog.join("mariadb-bin.000001"), bytes).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let txns = rt.block_on(async {
        let endpoint = SourceEndpoint::Files(FilesSourceConfig {
            binlog_dir: binlog.clone(),
            binlog_index: None,
        });
        let start = ExtractStart::File(BinlogPosition::new("mariadb-bin.000001", 4).unwrap());
        let mut ex = Extractor::open(&endpoint, start, Seqno(0), false).unwrap();
        let mut out = Vec::new();
        while let Some(t) = ex.next_transaction().await.unwrap() {
            out.push(t);
        }
        out
    });
    let biggest = txns
        .iter()
        .map(|t| postcard::to_allocvec(t).unwrap().len())
        .max()
        .unwrap_or(0);
    note(&format!(
        "B11: {} transactions, the largest {biggest} bytes encoded",
        txns.len()
    ));
    round_trip(&work.path().join("queue"), &txns);
}
