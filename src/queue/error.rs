//! The queue layer's error type.

use std::path::PathBuf;

use crate::position::Seqno;

/// Every error of the queue layer. Messages say what failed and where: the
/// queue directory or the segment directory, and the seqno when one is
/// concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// The options are unusable (a size or interval of 0).
    #[error("queue {}: invalid options: {message}", dir.display())]
    InvalidOptions {
        /// The queue directory.
        dir: PathBuf,
        /// What is wrong.
        message: String,
    },

    /// A file-system operation on the queue directory failed.
    #[error("queue {}: cannot {op}: {cause}", dir.display())]
    Io {
        /// The queue directory.
        dir: PathBuf,
        /// What was being done, e.g. `create the directory`.
        op: String,
        /// The I/O error.
        cause: std::io::Error,
    },

    /// A file-system operation on a segment's files failed (its log file
    /// cannot be opened, written, read or fsynced).
    #[error("queue segment {}: cannot {op}: {cause}", segment.display())]
    SegmentIo {
        /// The segment directory.
        segment: PathBuf,
        /// What was being done, e.g. `fsync …/log`.
        op: String,
        /// The I/O error.
        cause: std::io::Error,
    },

    /// Another process (or another open in this one) has the queue open:
    /// its `lock` file is locked.
    #[error(
        "queue {}: could not acquire lock on {}: another process has the queue open{}; \
         stop it first (one queue has one writer)",
        dir.display(), dir.join(super::LOCK_FILE).display(),
        holder.map(|p| format!(" (process {p}, as its lock file says)")).unwrap_or_default()
    )]
    Locked {
        /// The queue directory.
        dir: PathBuf,
        /// The process id the lock file holds: the process that locked it
        /// last (it writes its id there).
        holder: Option<u32>,
    },

    /// sled failed on a segment of an earlier version (I/O error, lock
    /// held by another process, corruption it detected).
    #[error("queue segment {}: cannot {op}: {}", segment.display(), sled_message(cause))]
    Storage {
        /// The segment directory.
        segment: PathBuf,
        /// What was being done, e.g. `flush (fsync)`.
        op: String,
        /// sled's error.
        cause: sled::Error,
    },

    /// A stored record cannot be read back: checksum mismatch, cut short,
    /// undecodable, missing, or holding another seqno. The queue never
    /// returns a transaction from a record that fails these checks.
    #[error("queue segment {}: record of seqno {seqno} is corrupt: {reason}", segment.display())]
    Corrupt {
        /// The segment directory (the queue directory for a record still in
        /// memory).
        segment: PathBuf,
        /// The seqno whose record failed.
        seqno: Seqno,
        /// What is wrong.
        reason: String,
    },

    /// A segment cannot be opened: its log file's header or a frame header
    /// is damaged or the file is missing; for a sled segment of an earlier
    /// version, sled 0.34 panics on a damaged log (the panic is caught and
    /// reported here); or the segment holds no block although its
    /// `HAS-DATA` marker says it was flushed with transactions. Every seqno
    /// of the segment (from the damage on, for a log) is unreadable.
    #[error(
        "queue segment {} (seqnos from {start}) is corrupt and cannot be opened: {reason}",
        segment.display()
    )]
    SegmentCorrupt {
        /// The segment directory.
        segment: PathBuf,
        /// The segment's first seqno.
        start: Seqno,
        /// What is wrong.
        reason: String,
    },

    /// A record was written in a format this version does not read (a
    /// newer shardrep wrote it).
    #[error(
        "queue segment {}: record of seqno {seqno} has format {format}; this version reads formats {} and {}",
        segment.display(), super::codec::FORMAT_V1, super::codec::FORMAT_V2
    )]
    UnsupportedFormat {
        /// The segment directory.
        segment: PathBuf,
        /// The seqno of the record.
        seqno: Seqno,
        /// Its format byte.
        format: u8,
    },

    /// An append whose seqno is not the next one (a gap or a going back).
    #[error(
        "queue {}: cannot append seqno {got}: seqnos are dense and the next one is {expected}",
        dir.display()
    )]
    OutOfOrder {
        /// The queue directory.
        dir: PathBuf,
        /// The seqno the queue expects.
        expected: Seqno,
        /// The seqno given.
        got: Seqno,
    },

    /// The progress given with a transaction is for another seqno.
    #[error(
        "queue {}: the extractor progress given with seqno {txn} is for seqno {progress}",
        dir.display()
    )]
    ProgressMismatch {
        /// The queue directory.
        dir: PathBuf,
        /// The transaction's seqno.
        txn: Seqno,
        /// The progress's seqno.
        progress: Seqno,
    },

    /// A read below the lowest kept seqno.
    #[error(
        "queue {}: seqno {seqno} was purged; the queue keeps seqnos from {first_kept}",
        dir.display()
    )]
    Purged {
        /// The queue directory.
        dir: PathBuf,
        /// The seqno asked for.
        seqno: Seqno,
        /// The lowest seqno not purged.
        first_kept: Seqno,
    },

    /// [`super::TransactionQueue::try_append`] found the queue full.
    #[error(
        "queue {} is full: about {size_bytes} bytes on disk with max_size_bytes = {max_size_bytes}; \
         it makes room when applied transactions are purged",
        dir.display()
    )]
    Full {
        /// The queue directory.
        dir: PathBuf,
        /// Estimated bytes on disk, with the record to append.
        size_bytes: u64,
        /// The configured maximum.
        max_size_bytes: u64,
    },

    /// A transaction could not be serialized.
    #[error("queue {}: cannot encode seqno {seqno}: {message}", dir.display())]
    Encode {
        /// The queue directory.
        dir: PathBuf,
        /// The transaction's seqno.
        seqno: Seqno,
        /// postcard's message.
        message: String,
    },

    /// The queue directory does not hold a usable queue (stray or
    /// inconsistent segments).
    #[error("queue {}: {message}", dir.display())]
    Layout {
        /// The queue directory.
        dir: PathBuf,
        /// What is wrong.
        message: String,
    },

    /// The queue was closed.
    #[error("queue {} is closed", dir.display())]
    Closed {
        /// The queue directory.
        dir: PathBuf,
    },

    /// An earlier write or flush failed; the queue refuses appends until
    /// it is reopened (which recovers the last consistent state).
    #[error("queue {} refuses appends after a storage failure: {message}", dir.display())]
    Failed {
        /// The queue directory.
        dir: PathBuf,
        /// The first failure.
        message: String,
    },

    /// An append or purge on a queue opened read-only.
    #[error("queue {} is open read-only", dir.display())]
    ReadOnly {
        /// The queue directory.
        dir: PathBuf,
    },
}

impl QueueError {
    /// Whether the error is the file system's "no space left on device"
    /// (ENOSPC) or "disk quota exceeded" (EDQUOT): freeing space is the
    /// way out, nothing stored is damaged.
    pub fn is_storage_full(&self) -> bool {
        let cause = match self {
            QueueError::Io { cause, .. } | QueueError::SegmentIo { cause, .. } => cause,
            _ => return false,
        };
        cause.kind() == std::io::ErrorKind::StorageFull
            || cause.kind() == std::io::ErrorKind::QuotaExceeded
            || matches!(cause.raw_os_error(), Some(28 | 122))
    }
}

/// sled's error in words: its `Display` of a corruption is a debug dump
/// (`Read corrupted data at file offset Some(Inline(…)) backtrace ()`).
pub fn sled_message(error: &sled::Error) -> String {
    match error {
        sled::Error::Io(e) => e.to_string(),
        sled::Error::Corruption { .. } => {
            "sled found corrupted data in the segment's files".to_string()
        }
        sled::Error::Unsupported(what) => what.clone(),
        sled::Error::ReportableBug(what) => format!("sled failed (a bug in sled): {what}"),
        sled::Error::CollectionNotFound(_) => "sled found no such collection".to_string(),
    }
}

impl QueueError {
    /// The seqno the error is about, when there is one.
    pub fn seqno(&self) -> Option<Seqno> {
        match self {
            QueueError::Corrupt { seqno, .. }
            | QueueError::UnsupportedFormat { seqno, .. }
            | QueueError::Purged { seqno, .. }
            | QueueError::Encode { seqno, .. } => Some(*seqno),
            QueueError::OutOfOrder { got, .. } => Some(*got),
            QueueError::ProgressMismatch { txn, .. } => Some(*txn),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sled_errors_are_worded_not_dumped() {
        let e = QueueError::Storage {
            segment: PathBuf::from("/q/seg-00000000000000000000"),
            op: "read a block".into(),
            cause: sled::Error::Corruption { at: None, bt: () },
        };
        assert_eq!(
            e.to_string(),
            "queue segment /q/seg-00000000000000000000: cannot read a block: sled found \
             corrupted data in the segment's files"
        );
    }
}
