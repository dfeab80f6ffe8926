//! The queue holds replicated row data: only its owner may read it. The
//! queue directory and every directory in it are mode 0700, every file
//! 0600, set explicitly rather than left to the umask (like the control
//! socket). Files the queue writes itself are created with mode 0600;
//! files sled creates (`conf`, `db`, `snap.*`, `blobs/`) are restricted
//! right after sled opens a segment and at every measurement of its size
//! (each flush), so a file sled adds later is private within one flush.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode of the queue's directories.
pub const DIR_MODE: u32 = 0o700;
/// Mode of the queue's files.
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` and its missing parents with mode 0700, and sets `dir`
/// itself to 0700 when it exists already.
///
/// # Errors
/// I/O errors.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)?;
    restrict(dir, &std::fs::metadata(dir)?)
}

/// Creates (or truncates) `path` for writing with mode 0600.
///
/// # Errors
/// I/O errors.
pub fn create_file(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)?;
    // An existing file keeps its mode on open: set it.
    file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
    Ok(file)
}

/// Sets `path` (described by `meta`) to 0700 (a directory) or 0600
/// (anything else) when its permission bits differ.
///
/// # Errors
/// I/O errors (e.g. the file is not the process's own).
pub fn restrict(path: &Path, meta: &Metadata) -> io::Result<()> {
    let want = if meta.is_dir() { DIR_MODE } else { FILE_MODE };
    if meta.permissions().mode() & 0o7777 != want {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(want))?;
    }
    Ok(())
}

/// [`restrict`] on `dir` and everything under it. Entries that vanish
/// meanwhile (sled renames and deletes snapshot files) are skipped.
///
/// # Errors
/// I/O errors other than a vanished entry.
pub fn restrict_tree(dir: &Path) -> io::Result<()> {
    let gone = |e: &io::Error| e.kind() == io::ErrorKind::NotFound;
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => restrict(dir, &meta)?,
        Ok(meta) if meta.is_file() => return restrict(dir, &meta),
        Ok(_) => return Ok(()),
        Err(e) if gone(&e) => return Ok(()),
        Err(e) => return Err(e),
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = match entry {
            Ok(e) => e,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(e),
        };
        match restrict_tree(&entry.path()) {
            Err(e) if !gone(&e) => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// [`restrict_tree`], logging a failure instead of returning it (the
/// queue still works; a directory of mode 0700 above keeps others out).
pub fn restrict_tree_or_warn(dir: &Path) {
    if let Err(e) = restrict_tree(dir) {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot restrict the queue's file modes to 0600/0700");
    }
}
