//! The free space of the queue's file system, checked at start against one
//! segment's size: a queue appends whole segments (`[queue]
//! segment_size_bytes`, 64 MiB by default), so a file system with less
//! free than that fills while the service is caught up, and the service
//! then stops with a full queue (`QueueError::is_storage_full`).

use std::path::Path;

/// Bytes an unprivileged writer may still use on the file system of
/// `dir` (`statvfs`: `f_bavail × f_frsize`).
///
/// # Errors
/// The `statvfs` call's (the directory does not exist, …).
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let stat = rustix::fs::statvfs(dir)?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// The warning for a queue in `dir` whose file system has `free` bytes
/// when a segment takes `segment` bytes; `None` when one fits.
pub fn warning(dir: &Path, free: u64, segment: u64) -> Option<String> {
    (free < segment).then(|| {
        format!(
            "the queue's file system ({}) has {} MiB free, less than one queue segment ({} \
             MiB, [queue] segment_size_bytes): the queue will fill it and the service stop \
             with a full queue even when caught up. Free space there, move [queue] dir, or \
             set segment_size_bytes lower",
            dir.display(),
            free >> 20,
            segment >> 20
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_system_smaller_than_a_segment_is_named() {
        let dir = Path::new("/q");
        let text = warning(dir, 10 << 20, 64 << 20).unwrap();
        assert!(text.contains("(/q) has 10 MiB free, less than one queue segment (64 MiB"));
        assert_eq!(warning(dir, 64 << 20, 64 << 20), None);
        assert!(free_bytes(Path::new("/")).unwrap() > 0);
        assert!(free_bytes(Path::new("/no/such/dir")).is_err());
    }
}
