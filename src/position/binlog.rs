//! [`BinlogPosition`]: a binlog event's `FILE:OFFSET`.

use super::*;
use std::sync::Arc;

/// A position in the master's binlog, `FILE:OFFSET` (e.g.
/// `mariadb-bin.000012:4567`): the byte offset in the file *after* a
/// transaction, where reading resumes.
///
/// The file name is split at its last `.` into a **base name** (the server's
/// `log_bin` base name, e.g. `mariadb-bin`, never empty) and a numeric
/// **index** (`000012` → 12). The index may have any number of digits, zero
/// padded or not, up to `u64::MAX`; the original spelling (padding) is kept
/// and printed back unchanged. `offset` is in bytes.
///
/// # Ordering
/// `Ord` compares the base name first (byte order), then the numeric index,
/// then the offset, so within one binlog family rotation orders correctly
/// even when the index outgrows its padding (`bin.999999` < `bin.1000000`).
/// Positions of different families (different base names) get a total but
/// arbitrary order — they are not meaningfully comparable; check
/// [`BinlogPosition::same_log_family`] first. Two spellings of the same index
/// (`bin.1` and `bin.000001`) are ordered by the file text as a last resort so
/// that `Ord` agrees with `Eq`.
///
/// Serializes as the `FILE:OFFSET` text.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct BinlogPosition {
    /// Shared between the positions of one file (see
    /// [`BinlogPosition::with_offset`]).
    file: Arc<str>,
    offset: u64,
    /// Byte length of the base name (`file[..base_len]`); the index digits
    /// start at `base_len + 1`.
    base_len: usize,
    /// Numeric value of the file's extension.
    index: u64,
}

/// Splits and validates a binlog file name; returns `(base_len, index)` or
/// the reason it is invalid.
fn split_binlog_file(file: &str) -> Result<(usize, u64), String> {
    if file.is_empty() {
        return Err("expected a file name BASENAME.NNNNNN, found an empty file name".to_owned());
    }
    if file.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "expected a file name without whitespace or control characters, found {file:?}"
        ));
    }
    let Some((base, suffix)) = file.rsplit_once('.') else {
        return Err(format!(
            "expected a file name BASENAME.NNNNNN with a numeric extension, found {file:?}"
        ));
    };
    if suffix.is_empty() || !suffix.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "expected a file name BASENAME.NNNNNN with a numeric extension, found {file:?}"
        ));
    }
    if base.is_empty() {
        return Err(format!(
            "expected a file name BASENAME.NNNNNN with a non-empty base name, found {file:?}"
        ));
    }
    let index = parse_decimal(suffix, u64::MAX)
        .ok_or_else(|| number_reason("the file index", suffix, u64::MAX))?;
    Ok((base.len(), index))
}

impl BinlogPosition {
    /// A position at byte `offset` of binlog file `file`.
    ///
    /// # Errors
    /// [`PositionError::InvalidBinlogFileName`] when `file` is empty,
    /// contains whitespace or control characters, has an empty base name, or
    /// has no numeric extension after its last `.` (or one beyond
    /// `u64::MAX`).
    pub fn new(file: impl Into<String>, offset: u64) -> Result<Self, PositionError> {
        let file = file.into();
        match split_binlog_file(&file) {
            Ok((base_len, index)) => Ok(BinlogPosition {
                file: file.into(),
                offset,
                base_len,
                index,
            }),
            Err(reason) => Err(PositionError::InvalidBinlogFileName { file, reason }),
        }
    }

    /// The file name, as given (e.g. `mariadb-bin.000012`).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The byte offset in the file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The base name, the file name before its last `.` (e.g. `mariadb-bin`).
    pub fn base_name(&self) -> &str {
        &self.file[..self.base_len]
    }

    /// The numeric extension of the file name (`mariadb-bin.000012` → 12).
    pub fn file_index(&self) -> u64 {
        self.index
    }

    /// The same file at another byte offset (the file name is shared, not
    /// copied or checked again).
    pub fn with_offset(&self, offset: u64) -> BinlogPosition {
        BinlogPosition {
            offset,
            ..self.clone()
        }
    }

    /// Whether both positions are in files of the same binlog family (same
    /// base name), so that their order is meaningful.
    pub fn same_log_family(&self, other: &BinlogPosition) -> bool {
        self.base_name() == other.base_name()
    }

    /// The name of the file the server rotates to after this one: index + 1
    /// with the same zero-padding width, growing the width when the number
    /// needs more digits (`bin.000009` → `bin.000010`, `bin.999999` →
    /// `bin.1000000`, `bin.9` → `bin.10`).
    ///
    /// # Errors
    /// [`PositionError::BinlogIndexOverflow`] when the index is `u64::MAX`.
    pub fn next_file_name(&self) -> Result<String, PositionError> {
        let next = self
            .index
            .checked_add(1)
            .ok_or_else(|| PositionError::BinlogIndexOverflow {
                file: self.file.to_string(),
                index: self.index,
            })?;
        let width = self.file.len() - self.base_len - 1;
        Ok(format!("{}.{next:0width$}", self.base_name()))
    }
}

impl fmt::Display for BinlogPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.offset)
    }
}

impl fmt::Debug for BinlogPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BinlogPosition({:?})", self.to_string())
    }
}

impl FromStr for BinlogPosition {
    type Err = PositionError;

    /// Parses `FILE:OFFSET`, splitting at the last `:`. `OFFSET` is a decimal
    /// byte offset; `FILE` must be valid as for [`BinlogPosition::new`]. No
    /// surrounding whitespace is accepted.
    ///
    /// # Errors
    /// [`PositionError::InvalidBinlogPosition`], naming the whole text, when
    /// the colon is missing, the file is empty or has no numeric extension,
    /// or the offset is not a decimal `u64`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fail = |reason: String| PositionError::InvalidBinlogPosition {
            text: text.to_owned(),
            reason,
        };
        let (file, offset) = text
            .rsplit_once(':')
            .ok_or_else(|| fail("expected FILE:OFFSET".to_owned()))?;
        if file.is_empty() {
            return Err(fail(
                "expected FILE:OFFSET, found an empty file name".to_owned(),
            ));
        }
        let offset = parse_decimal(offset, u64::MAX)
            .ok_or_else(|| fail(number_reason("OFFSET", offset, u64::MAX)))?;
        let (file, base_len, index) = LAST_PARSED_FILE
            .with(|last| {
                let mut last = last.borrow_mut();
                if let Some((f, base_len, index)) = &*last {
                    if **f == *file {
                        return Ok((f.clone(), *base_len, *index));
                    }
                }
                let (base_len, index) = split_binlog_file(file)?;
                let f: Arc<str> = file.into();
                *last = Some((f.clone(), base_len, index));
                Ok((f, base_len, index))
            })
            .map_err(fail)?;
        Ok(BinlogPosition {
            file,
            offset,
            base_len,
            index,
        })
    }
}

thread_local! {
    /// The file name of the last position parsed on this thread, with its
    /// base length and index: positions read from the queue come two per
    /// transaction and nearly all name the same file, which then shares one
    /// allocation instead of one each.
    static LAST_PARSED_FILE: std::cell::RefCell<Option<(Arc<str>, usize, u64)>> =
        const { std::cell::RefCell::new(None) };
}

impl PartialOrd for BinlogPosition {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for BinlogPosition {
    fn cmp(&self, other: &Self) -> Ordering {
        self.base_name()
            .cmp(other.base_name())
            .then(self.index.cmp(&other.index))
            .then(self.offset.cmp(&other.offset))
            .then_with(|| self.file.cmp(&other.file))
    }
}

serde_as_text!(BinlogPosition);
