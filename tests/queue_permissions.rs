//! The queue holds replicated row data: its directory and every directory
//! in it are mode 0700, every file 0600, whatever the umask, after a
//! first open, appends (small, and large ones stored in their own file),
//! segment rotation, purges and a reopen.

mod queue_support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use shardrep::position::Seqno;
use shardrep::queue::{QueueOptions, TransactionQueue, EXTERNAL_MIN_BYTES};

use queue_support::{progress, txn, TempDir};

/// Every path under `dir` (and `dir`) with its permission bits.
fn modes(dir: &Path) -> Vec<(PathBuf, u32, bool)> {
    let meta = std::fs::metadata(dir).unwrap();
    let mut out = vec![(
        dir.to_path_buf(),
        meta.permissions().mode() & 0o7777,
        meta.is_dir(),
    )];
    if meta.is_dir() {
        for entry in std::fs::read_dir(dir).unwrap() {
            out.extend(modes(&entry.unwrap().path()));
        }
    }
    out
}

/// Asserts 0700 for every directory and 0600 for every file; returns how
/// many files there are.
fn assert_private(dir: &Path, when: &str) -> usize {
    let all = modes(dir);
    for (path, mode, is_dir) in &all {
        let want = if *is_dir { 0o700 } else { 0o600 };
        assert_eq!(*mode, want, "{when}: {} has mode {mode:o}", path.display());
    }
    all.iter().filter(|(_, _, d)| !d).count()
}

#[test]
fn queue_directories_are_0700_and_files_0600() {
    let tmp = TempDir::new("private");
    let dir = tmp.path().join("queue");
    let mut options = QueueOptions::new(&dir);
    options.config.segment_size_bytes = 1 << 20;
    let q = TransactionQueue::open(options.clone()).unwrap();
    assert_private(tmp.path().join("queue").as_path(), "after the first open");
    let mut seqno = 0;
    for round in 0..3 {
        for _ in 0..200 {
            let t = txn(seqno, 3000);
            q.append(&t, &progress(&t)).unwrap();
            seqno += 1;
        }
        // A transaction stored in its own file.
        let t = txn(seqno, EXTERNAL_MIN_BYTES + 1000);
        q.append(&t, &progress(&t)).unwrap();
        seqno += 1;
        q.flush().unwrap();
        assert_private(&dir, &format!("after round {round}"));
    }
    let segments = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("seg-")
        })
        .count();
    assert!(segments >= 2, "the segments rotated: {segments}");
    let externals = modes(&dir)
        .iter()
        .filter(|(p, _, _)| p.file_name().unwrap().to_string_lossy().starts_with("rec-"))
        .count();
    assert_eq!(externals, 3);
    q.purge_applied(Seqno(300)).unwrap();
    q.flush().unwrap();
    q.close().unwrap();
    let files = assert_private(&dir, "after a purge and close");
    assert!(files >= 6, "{files} files");

    // A queue directory made by someone else with the umask's modes is
    // made private when opened.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let q = TransactionQueue::open(options).unwrap();
    assert_private(&dir, "after a reopen");
    assert_eq!(
        q.get(Seqno(seqno - 1)).unwrap().unwrap(),
        txn(seqno - 1, EXTERNAL_MIN_BYTES + 1000)
    );
    q.close().unwrap();
}
