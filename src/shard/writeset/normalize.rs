//! Key values normalized as the server compares them: two values a unique
//! index holds equal hash alike (shared/research/writeset.md §6, traps 4–7).
//! Two different values may hash alike too (over-merging costs only
//! parallelism); two equal ones never differ.
//!
//! Per column ([`Norm::of`], from the replica's definition):
//! - integers by the column's width and signedness: the binlog without
//!   metadata (`binlog_row_metadata=NO_LOG`) gives an UNSIGNED column's
//!   value as the signed number of the same bits, which is reinterpreted
//!   (as the applier's `to_param` does); ENUM, SET, BIT and YEAR as their
//!   stored integer;
//! - DECIMAL by its number: `-0.00` is `0.00`, leading zeros of the integer
//!   part and trailing zeros of the fraction are dropped;
//! - temporal values by their fields (a negative zero TIME is zero);
//! - FLOAT/DOUBLE: not normalized (`-0.0` equals `0.0`): the table falls back
//!   (`FloatKey`);
//! - strings by [`StringRule`], from the column's type and collation
//!   ([`string_rule`]).

use std::hash::Hasher;

use foldhash::fast::FoldHasher;

use super::Fallback;
use crate::event::Value;

/// The case-insensitive collations whose equality on ASCII strings is at
/// most "equal after lower-casing and dropping every character but letters
/// and digits" ([`StringRule::FoldAscii`]), checked against the server by
/// `tests/writeset.rs` (every printable ASCII string of length 1, and a
/// sample of lengths 2 and 3 with spaces, punctuation and both cases).
pub const CI_COLLATIONS: &[&str] = &[
    "utf8mb4_general_ci",
    "utf8mb4_general_nopad_ci",
    "utf8mb4_unicode_ci",
    "utf8mb4_unicode_nopad_ci",
    "utf8mb4_unicode_520_ci",
    "utf8mb4_unicode_520_nopad_ci",
    "utf8mb4_uca1400_ai_ci",
    "utf8mb4_uca1400_nopad_ai_ci",
    "utf8mb4_uca1400_as_ci",
    "utf8mb4_uca1400_nopad_as_ci",
    "utf8mb3_general_ci",
    "utf8mb3_general_nopad_ci",
    "utf8mb3_unicode_ci",
    "utf8mb3_unicode_nopad_ci",
    "utf8mb3_unicode_520_ci",
    "utf8mb3_unicode_520_nopad_ci",
    "utf8mb3_uca1400_ai_ci",
    "utf8mb3_uca1400_nopad_ai_ci",
    "latin1_swedish_ci",
    "latin1_swedish_nopad_ci",
    "latin1_general_ci",
    "ascii_general_ci",
    "ascii_general_nopad_ci",
];

/// The character sets whose `_bin` and `_nopad_bin` collations compare the
/// stored bytes (code points in byte order), and in which a byte `0x20` is
/// always a space: ASCII-compatible, with no multi-byte sequence holding a
/// byte below `0x80`.
pub const BIN_CHARSETS: &[&str] = &["utf8mb4", "utf8mb3", "utf8", "latin1", "ascii"];

/// How a string value becomes its key bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StringRule {
    /// The bytes as they are (VARBINARY, BLOB; NO PAD `_nopad_bin`
    /// VARCHAR/TEXT).
    Exact,
    /// Trailing spaces (`0x20`) dropped: PAD SPACE `_bin` collations
    /// compare `'a'` and `'a  '` equal, and a CHAR column stores its value
    /// padded with spaces, whatever the collation.
    TrimSpaces,
    /// Trailing zero bytes dropped: fixed-length binary columns (BINARY(n),
    /// UUID, INET6, INET4) store the value padded with zeros to n bytes,
    /// and the binlog drops them.
    TrimZeros,
    /// ASCII letters lower-cased and digits kept, every other character
    /// dropped ([`CI_COLLATIONS`]); a value with a byte above `0x7f`
    /// cannot be folded (`Collation` fallback for that change).
    FoldAscii,
}

/// The [`StringRule`] of a string column of `data_type` (lower case) with
/// `collation` (`COLLATION_NAME`, `None` for binary strings).
///
/// # Errors
/// `Collation` for a collation shardrep cannot fold: a case-insensitive
/// one not in [`CI_COLLATIONS`], a `_bin` one of a character set not in
/// [`BIN_CHARSETS`], or a character column without a collation.
pub fn string_rule(data_type: &str, collation: Option<&str>) -> Result<StringRule, Fallback> {
    match data_type {
        "binary" | "uuid" | "inet6" | "inet4" => return Ok(StringRule::TrimZeros),
        "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" => {
            return Ok(StringRule::Exact)
        }
        // MySQL's JSON has no collation and compares as its binary form.
        "json" if collation.is_none() => return Ok(StringRule::Exact),
        _ => {}
    }
    let Some(collation) = collation else {
        return Err(Fallback::Collation);
    };
    let charset = collation.split('_').next().unwrap_or("");
    let char_column = data_type == "char";
    if collation.ends_with("_bin") && BIN_CHARSETS.contains(&charset) {
        if collation.ends_with("_nopad_bin") && !char_column {
            return Ok(StringRule::Exact);
        }
        return Ok(StringRule::TrimSpaces);
    }
    if CI_COLLATIONS.contains(&collation) {
        return Ok(StringRule::FoldAscii);
    }
    Err(Fallback::Collation)
}

/// How one key column's values are written into a row key's hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Norm {
    /// For an UNSIGNED integer column, the mask of its width (`0xff` for
    /// TINYINT ... `u64::MAX` for BIGINT); `None` for other columns.
    unsigned_mask: Option<u64>,
    /// How a string value is written.
    string: StringRule,
}

impl Norm {
    /// The normalization of a key column of `data_type` (lower case).
    ///
    /// # Errors
    /// `FloatKey` for FLOAT/DOUBLE; `Collation` as [`string_rule`];
    /// `KeyType` for a type shardrep does not normalize (spatial, vector,
    /// or unknown).
    pub fn of(data_type: &str, unsigned: bool, collation: Option<&str>) -> Result<Norm, Fallback> {
        let plain = Norm {
            unsigned_mask: None,
            string: StringRule::Exact,
        };
        let bits = match data_type {
            "tinyint" => 8,
            "smallint" => 16,
            "mediumint" => 24,
            "int" | "integer" => 32,
            "bigint" => 64,
            "float" | "double" | "real" => return Err(Fallback::FloatKey),
            "decimal" | "numeric" | "date" | "datetime" | "timestamp" | "time" | "year" | "bit"
            | "enum" | "set" => return Ok(plain),
            "binary" | "uuid" | "inet6" | "inet4" | "varbinary" | "tinyblob" | "blob"
            | "mediumblob" | "longblob" | "char" | "varchar" | "tinytext" | "text"
            | "mediumtext" | "longtext" | "json" => {
                return Ok(Norm {
                    unsigned_mask: None,
                    string: string_rule(data_type, collation)?,
                })
            }
            _ => return Err(Fallback::KeyType),
        };
        Ok(Norm {
            unsigned_mask: unsigned.then(|| {
                if bits == 64 {
                    u64::MAX
                } else {
                    (1u64 << bits) - 1
                }
            }),
            string: plain.string,
        })
    }

    /// Writes `value` (not NULL) into `h`.
    ///
    /// # Errors
    /// `FloatKey` for a FLOAT/DOUBLE value; `Collation` for a string that
    /// [`StringRule::FoldAscii`] cannot fold.
    #[inline]
    pub fn write(&self, value: &Value, h: &mut FoldHasher<'_>) -> Result<(), Fallback> {
        match value {
            Value::Int(v) => write_int(
                h,
                match self.unsigned_mask {
                    Some(mask) => i128::from(*v as u64 & mask),
                    None => i128::from(*v),
                },
            ),
            Value::UInt(v) | Value::Bit(v) | Value::Set(v) => write_int(h, i128::from(*v)),
            Value::Year(v) | Value::Enum(v) => write_int(h, i128::from(*v)),
            Value::Float(_) | Value::Double(_) => return Err(Fallback::FloatKey),
            Value::Decimal(text) => write_decimal(h, text),
            Value::Bytes(b) => write_string(h, b, self.string)?,
            Value::Json(text) => write_string(h, text.as_bytes(), self.string)?,
            Value::Date { year, month, day } => {
                h.write_u8(b'D');
                h.write_u64(u64::from(*year) << 16 | u64::from(*month) << 8 | u64::from(*day));
            }
            Value::DateTime {
                year,
                month,
                day,
                hour,
                minute,
                second,
                micros,
            } => {
                h.write_u8(b'T');
                h.write_u64(
                    u64::from(*year) << 40
                        | u64::from(*month) << 32
                        | u64::from(*day) << 24
                        | u64::from(*hour) << 16
                        | u64::from(*minute) << 8
                        | u64::from(*second),
                );
                h.write_u32(*micros);
            }
            Value::Timestamp { seconds, micros } => {
                h.write_u8(b'S');
                h.write_u32(*seconds);
                h.write_u32(*micros);
            }
            Value::Time {
                negative,
                hours,
                minutes,
                seconds,
                micros,
            } => {
                let zero = *hours == 0 && *minutes == 0 && *seconds == 0 && *micros == 0;
                h.write_u8(if *negative && !zero { b'-' } else { b'+' });
                h.write_u64(
                    u64::from(*hours) << 16 | u64::from(*minutes) << 8 | u64::from(*seconds),
                );
                h.write_u32(*micros);
            }
            // Never a key value (handled by the caller).
            Value::Null => h.write_u8(b'N'),
        }
        Ok(())
    }
}

fn write_int(h: &mut FoldHasher<'_>, v: i128) {
    h.write_u8(b'I');
    h.write_u128(v as u128);
}

/// A DECIMAL's text (`-12.340`) as its number: sign, integer digits
/// without leading zeros, fraction digits without trailing zeros; zero is
/// never negative. Text that is not a plain decimal is written as it is.
fn write_decimal(h: &mut FoldHasher<'_>, text: &str) {
    let bytes = text.as_bytes();
    let (negative, digits) = match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        Some(b'+') => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    let (int, frac) = match digits.iter().position(|&b| b == b'.') {
        Some(dot) => (&digits[..dot], &digits[dot + 1..]),
        None => (digits, &digits[digits.len()..]),
    };
    if !int.iter().chain(frac).all(u8::is_ascii_digit) {
        h.write_u8(b'?');
        h.write(bytes);
        h.write_usize(bytes.len());
        return;
    }
    let int = &int[int.iter().position(|&b| b != b'0').unwrap_or(int.len())..];
    let frac = &frac[..frac.iter().rposition(|&b| b != b'0').map_or(0, |i| i + 1)];
    let zero = int.is_empty() && frac.is_empty();
    h.write_u8(if negative && !zero { b'-' } else { b'+' });
    h.write(int);
    h.write_usize(int.len());
    h.write(frac);
    h.write_usize(frac.len());
}

/// Folded bytes are hashed in chunks of this size (a stack buffer: no
/// allocation).
const FOLD_CHUNK: usize = 64;

/// [`StringRule::FoldAscii`] of each ASCII byte: the lower-case letter or
/// the digit, `0` for a character that is dropped.
const FOLD: [u8; 128] = {
    let mut table = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() {
            table[b] = c.to_ascii_lowercase();
        }
        b += 1;
    }
    table
};

/// Writes a string's key bytes by `rule`.
#[inline]
fn write_string(h: &mut FoldHasher<'_>, bytes: &[u8], rule: StringRule) -> Result<(), Fallback> {
    let kept = match rule {
        StringRule::Exact => bytes,
        StringRule::TrimSpaces => trim_end(bytes, b' '),
        StringRule::TrimZeros => trim_end(bytes, 0),
        StringRule::FoldAscii => return write_folded(h, bytes),
    };
    h.write(kept);
    h.write_usize(kept.len());
    Ok(())
}

fn trim_end(bytes: &[u8], pad: u8) -> &[u8] {
    &bytes[..bytes.iter().rposition(|&b| b != pad).map_or(0, |i| i + 1)]
}

/// [`StringRule::FoldAscii`]: lower-cased letters and digits, in chunks of
/// [`FOLD_CHUNK`] (the chunk boundaries depend only on the folded text, so
/// equal folds hash alike).
fn write_folded(h: &mut FoldHasher<'_>, bytes: &[u8]) -> Result<(), Fallback> {
    if !bytes.is_ascii() {
        return Err(Fallback::Collation);
    }
    let mut buf = [0u8; FOLD_CHUNK];
    let mut len = 0;
    let mut total = 0usize;
    for &b in bytes {
        // Branch-free: a dropped character is written and not counted.
        let folded = FOLD[usize::from(b & 0x7f)];
        buf[len] = folded;
        len += usize::from(folded != 0);
        if len == FOLD_CHUNK {
            h.write(&buf);
            total += len;
            len = 0;
        }
    }
    h.write(&buf[..len]);
    h.write_usize(total + len);
    Ok(())
}

/// The folded form of an ASCII string under [`StringRule::FoldAscii`]
/// (`None` when it holds a non-ASCII byte): what two values must share to
/// get one key. For tests and diagnostics; the hot path never builds it.
pub fn fold_ascii(bytes: &[u8]) -> Option<Vec<u8>> {
    bytes.is_ascii().then(|| {
        bytes
            .iter()
            .filter(|b| b.is_ascii_alphanumeric())
            .map(u8::to_ascii_lowercase)
            .collect()
    })
}
