//! Column decoders: one value of a row image from its column type and
//! metadata.

use super::*;

/// How to decode one column's value, resolved once per event from its
/// [`ColumnInfo`].
#[derive(Clone, Copy, Debug)]
pub(super) enum Dec {
    Int {
        bytes: u8,
        unsigned: bool,
    },
    Float,
    Double,
    NewDecimal {
        precision: u8,
        scale: u8,
    },
    Year,
    Date,
    TimeOld,
    Time2(u8),
    DateTimeOld,
    DateTime2(u8),
    TimestampOld,
    Timestamp2(u8),
    Bit {
        bytes: u8,
    },
    Enum {
        bytes: u8,
    },
    Set {
        bytes: u8,
    },
    /// CHAR/BINARY: length prefix bytes, and the byte length to pad to with
    /// zeros (binary collation), 0 for none.
    Char {
        prefix: u8,
        pad_to: u16,
    },
    /// VARCHAR/VAR_STRING (prefix 1 or 2), BLOB family and GEOMETRY
    /// (prefix 1..4): raw bytes.
    Bytes {
        prefix: u8,
    },
    /// MySQL binary JSON.
    Json {
        prefix: u8,
    },
    /// MariaDB compressed VARCHAR/BLOB.
    Compressed {
        prefix: u8,
    },
    Unsupported(&'static str),
}

pub(super) fn plan_column(col: &ColumnInfo) -> Dec {
    let m = col.meta;
    let unsigned = col.unsigned == Some(true);
    let fsp = |m: u16| -> Result<u8, &'static str> {
        if m <= 6 {
            Ok(m as u8)
        } else {
            Err("fractional precision above 6 in the table map")
        }
    };
    let blob_prefix = |m: u16| -> Result<u8, &'static str> {
        if (1..=4).contains(&m) {
            Ok(m as u8)
        } else {
            Err("length-prefix size outside 1..4 in the table map")
        }
    };
    let var_prefix = |m: u16| if m < 256 { 1 } else { 2 };
    let r: Result<Dec, &'static str> = match col.column_type {
        ct::TINY => Ok(Dec::Int { bytes: 1, unsigned }),
        ct::SHORT => Ok(Dec::Int { bytes: 2, unsigned }),
        ct::INT24 => Ok(Dec::Int { bytes: 3, unsigned }),
        ct::LONG => Ok(Dec::Int { bytes: 4, unsigned }),
        ct::LONGLONG => Ok(Dec::Int { bytes: 8, unsigned }),
        ct::FLOAT => Ok(Dec::Float),
        ct::DOUBLE => Ok(Dec::Double),
        ct::NEWDECIMAL => {
            let (precision, scale) = ((m >> 8) as u8, (m & 0xff) as u8);
            if precision == 0 || precision > 65 || scale > precision {
                Err("invalid DECIMAL precision/scale in the table map")
            } else {
                Ok(Dec::NewDecimal { precision, scale })
            }
        }
        ct::DECIMAL => Err("old DECIMAL not supported"),
        ct::YEAR => Ok(Dec::Year),
        ct::DATE | ct::NEWDATE => Ok(Dec::Date),
        ct::TIME => Ok(Dec::TimeOld),
        ct::TIME2 => fsp(m).map(Dec::Time2),
        ct::DATETIME => Ok(Dec::DateTimeOld),
        ct::DATETIME2 => fsp(m).map(Dec::DateTime2),
        ct::TIMESTAMP => Ok(Dec::TimestampOld),
        ct::TIMESTAMP2 => fsp(m).map(Dec::Timestamp2),
        ct::BIT => {
            let bytes = (m >> 8) + u16::from(m & 0xff > 0);
            if bytes == 0 || bytes > 8 || (m & 0xff) > 7 {
                Err("BIT length outside 1..64 in the table map")
            } else {
                Ok(Dec::Bit { bytes: bytes as u8 })
            }
        }
        ct::ENUM => enum_dec(m & 0xff),
        ct::SET => set_dec(m & 0xff),
        ct::STRING => match string_meta(m) {
            (ct::ENUM, n) => enum_dec(n),
            (ct::SET, n) => set_dec(n),
            (ct::STRING, n) => Ok(Dec::Char {
                prefix: var_prefix(n),
                pad_to: if col.charset == Some(BINARY_COLLATION) {
                    n
                } else {
                    0
                },
            }),
            _ => Err("unknown real type of a STRING column"),
        },
        ct::VARCHAR | ct::VAR_STRING => Ok(Dec::Bytes {
            prefix: var_prefix(m),
        }),
        ct::TINY_BLOB
        | ct::MEDIUM_BLOB
        | ct::LONG_BLOB
        | ct::BLOB
        | ct::GEOMETRY
        | MYSQL_VECTOR => blob_prefix(m).map(|prefix| Dec::Bytes { prefix }),
        ct::JSON => blob_prefix(m).map(|prefix| Dec::Json { prefix }),
        MARIADB_VARCHAR_COMPRESSED => Ok(Dec::Compressed {
            prefix: var_prefix(m),
        }),
        MARIADB_BLOB_COMPRESSED => blob_prefix(m).map(|prefix| Dec::Compressed { prefix }),
        ct::NULL => Err("the NULL column type has no value encoding"),
        _ => Err("unknown column type"),
    };
    r.unwrap_or_else(Dec::Unsupported)
}

pub(super) fn enum_dec(n: u16) -> Result<Dec, &'static str> {
    match n {
        1 | 2 => Ok(Dec::Enum { bytes: n as u8 }),
        _ => Err("ENUM storage size must be 1 or 2 bytes"),
    }
}

pub(super) fn set_dec(n: u16) -> Result<Dec, &'static str> {
    match n {
        1..=8 => Ok(Dec::Set { bytes: n as u8 }),
        _ => Err("SET storage size must be 1..8 bytes"),
    }
}

/// Why a value could not be decoded (the caller adds row and column).
pub(super) enum ValErr {
    Short { need: usize, left: usize },
    Bad(String),
}

pub(super) type ValResult = Result<Value, ValErr>;

#[inline]
pub(super) fn take<'a>(r: &mut Reader<'a>, n: usize) -> Result<&'a [u8], ValErr> {
    let left = r.remaining();
    r.take(n).ok_or(ValErr::Short { need: n, left })
}

#[inline]
pub(super) fn take_array<const N: usize>(r: &mut Reader<'_>) -> Result<[u8; N], ValErr> {
    let left = r.remaining();
    r.array::<N>().ok_or(ValErr::Short { need: N, left })
}

#[inline]
pub(super) fn be_uint(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |v, &x| (v << 8) | u64::from(x))
}

#[inline]
pub(super) fn le_uint(b: &[u8]) -> u64 {
    b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x))
}

/// A length-prefixed byte string (`prefix` 1..4 little-endian bytes).
#[inline]
pub(super) fn prefixed<'a>(r: &mut Reader<'a>, prefix: u8) -> Result<&'a [u8], ValErr> {
    let p = take(r, usize::from(prefix))?;
    let len = le_uint(p);
    let left = r.remaining();
    let n = len_usize(len);
    r.take(n).ok_or(ValErr::Short {
        need: n.saturating_add(usize::from(prefix)),
        left: left.saturating_add(usize::from(prefix)),
    })
}

pub(super) fn decode_value(dec: &Dec, r: &mut Reader<'_>) -> ValResult {
    Ok(match *dec {
        Dec::Int { bytes, unsigned } => match bytes {
            1 => {
                let [b] = take_array::<1>(r)?;
                if unsigned {
                    Value::UInt(u64::from(b))
                } else {
                    Value::Int(i64::from(b as i8))
                }
            }
            2 => {
                let b = take_array::<2>(r)?;
                if unsigned {
                    Value::UInt(u64::from(u16::from_le_bytes(b)))
                } else {
                    Value::Int(i64::from(i16::from_le_bytes(b)))
                }
            }
            3 => {
                let [a, b, c] = take_array::<3>(r)?;
                let u = u32::from_le_bytes([a, b, c, 0]);
                if unsigned {
                    Value::UInt(u64::from(u))
                } else {
                    // Sign extension from 24 bits.
                    Value::Int(i64::from(((u << 8) as i32) >> 8))
                }
            }
            4 => {
                let b = take_array::<4>(r)?;
                if unsigned {
                    Value::UInt(u64::from(u32::from_le_bytes(b)))
                } else {
                    Value::Int(i64::from(i32::from_le_bytes(b)))
                }
            }
            _ => {
                let b = take_array::<8>(r)?;
                if unsigned {
                    Value::UInt(u64::from_le_bytes(b))
                } else {
                    Value::Int(i64::from_le_bytes(b))
                }
            }
        },
        Dec::Float => Value::Float(f32::from_le_bytes(take_array::<4>(r)?)),
        Dec::Double => Value::Double(f64::from_le_bytes(take_array::<8>(r)?)),
        Dec::NewDecimal { precision, scale } => {
            let size = decimal_size(precision, scale);
            let b = take(r, size)?;
            Value::Decimal(decode_decimal(precision, scale, b).map_err(ValErr::Bad)?)
        }
        Dec::Year => {
            let [b] = take_array::<1>(r)?;
            Value::Year(if b == 0 { 0 } else { 1900 + u16::from(b) })
        }
        Dec::Date => {
            let [a, b, c] = take_array::<3>(r)?;
            let v = u32::from_le_bytes([a, b, c, 0]);
            Value::Date {
                year: (v >> 9) as u16,
                month: ((v >> 5) & 15) as u8,
                day: (v & 31) as u8,
            }
        }
        Dec::TimeOld => {
            let [a, b, c] = take_array::<3>(r)?;
            let v = ((u32::from_le_bytes([a, b, c, 0]) << 8) as i32) >> 8;
            let abs = v.unsigned_abs();
            let (hours, minutes, seconds) = (abs / 10000, abs / 100 % 100, abs % 100);
            if minutes > 59 || seconds > 59 {
                return Err(ValErr::Bad(format!(
                    "old-format TIME value {v} is not a valid [-]HHMMSS (a MariaDB pre-10.1 \
                     TIME(n) with fractional seconds cannot be decoded from the binlog: \
                     its table map carries no precision)"
                )));
            }
            Value::Time {
                negative: v < 0,
                hours,
                minutes: minutes as u8,
                seconds: seconds as u8,
                micros: 0,
            }
        }
        Dec::Time2(fsp) => decode_time2(r, fsp)?,
        Dec::DateTimeOld => {
            let v = u64::from_le_bytes(take_array::<8>(r)?);
            let (d, t) = (v / 1_000_000, v % 1_000_000);
            let (year, month, day) = (d / 10000, d / 100 % 100, d % 100);
            let (hour, minute, second) = (t / 10000, t / 100 % 100, t % 100);
            if year > 9999 || month > 12 || day > 31 || hour > 23 || minute > 59 || second > 59 {
                return Err(ValErr::Bad(format!(
                    "old-format DATETIME value {v} is not a valid YYYYMMDDhhmmss (a MariaDB \
                     pre-10.1 DATETIME(n) with fractional seconds cannot be decoded from the \
                     binlog: its table map carries no precision)"
                )));
            }
            Value::DateTime {
                year: year as u16,
                month: month as u8,
                day: day as u8,
                hour: hour as u8,
                minute: minute as u8,
                second: second as u8,
                micros: 0,
            }
        }
        Dec::DateTime2(fsp) => {
            let b = take(r, 5)?;
            let packed = be_uint(b) as i64 - 0x80_0000_0000;
            if packed < 0 {
                return Err(ValErr::Bad(format!("DATETIME2 value {packed} is negative")));
            }
            let micros = frac_unsigned(r, fsp)?;
            let ymd = packed >> 17;
            let ym = ymd >> 5;
            let hms = packed & 0x1ffff;
            let (year, month, day) = (ym / 13, ym % 13, ymd & 31);
            let (hour, minute, second) = (hms >> 12, (hms >> 6) & 63, hms & 63);
            if year > 9999 || hour > 23 || minute > 59 || second > 59 {
                return Err(ValErr::Bad(format!(
                    "DATETIME2 value out of range: {year}-{month}-{day} {hour}:{minute}:{second}"
                )));
            }
            Value::DateTime {
                year: year as u16,
                month: month as u8,
                day: day as u8,
                hour: hour as u8,
                minute: minute as u8,
                second: second as u8,
                micros,
            }
        }
        Dec::TimestampOld => Value::Timestamp {
            seconds: u32::from_le_bytes(take_array::<4>(r)?),
            micros: 0,
        },
        Dec::Timestamp2(fsp) => {
            let seconds = u32::from_be_bytes(take_array::<4>(r)?);
            let micros = frac_unsigned(r, fsp)?;
            Value::Timestamp { seconds, micros }
        }
        Dec::Bit { bytes } => Value::Bit(be_uint(take(r, usize::from(bytes))?)),
        Dec::Enum { bytes } => {
            let b = take(r, usize::from(bytes))?;
            Value::Enum(le_uint(b) as u16)
        }
        Dec::Set { bytes } => Value::Set(le_uint(take(r, usize::from(bytes))?)),
        Dec::Char { prefix, pad_to } => {
            let b = prefixed(r, prefix)?;
            let pad = usize::from(pad_to);
            if b.len() < pad {
                let mut v = Vec::with_capacity(pad);
                v.extend_from_slice(b);
                v.resize(pad, 0);
                Value::Bytes(v)
            } else {
                Value::Bytes(b.to_vec())
            }
        }
        Dec::Bytes { prefix } => Value::Bytes(prefixed(r, prefix)?.to_vec()),
        Dec::Json { prefix } => {
            let b = prefixed(r, prefix)?;
            Value::Json(jsonb_to_text(b).map_err(|e| ValErr::Bad(format!("binary JSON: {e}")))?)
        }
        Dec::Compressed { prefix } => {
            let b = prefixed(r, prefix)?;
            Value::Bytes(uncompress_column(b).map_err(ValErr::Bad)?)
        }
        Dec::Unsupported(why) => return Err(ValErr::Bad(why.to_string())),
    })
}

/// Fraction of DATETIME2/TIMESTAMP2 (never negative) in microseconds.
#[inline]
pub(super) fn frac_unsigned(r: &mut Reader<'_>, fsp: u8) -> Result<u32, ValErr> {
    let (n, mul, max) = match fsp {
        0 => return Ok(0),
        1 | 2 => (1, 10_000, 100),
        3 | 4 => (2, 100, 10_000),
        _ => (3, 1, 1_000_000),
    };
    let v = be_uint(take(r, n)?) as u32;
    if v >= max {
        return Err(ValErr::Bad(format!(
            "fractional seconds {v} out of range for precision {fsp}"
        )));
    }
    Ok(v * mul)
}

/// TIME2: MySQL's `my_time_packed_from_binary`, then the packed value split
/// into sign, hours, minutes, seconds and microseconds.
pub(super) fn decode_time2(r: &mut Reader<'_>, fsp: u8) -> ValResult {
    const TIMEF_INT_OFS: i64 = 0x80_0000;
    const TIMEF_OFS: i64 = 0x8000_0000_0000;
    let packed: i64 = match fsp {
        0 => (be_uint(take(r, 3)?) as i64 - TIMEF_INT_OFS) << 24,
        1 | 2 => {
            let b = take(r, 4)?;
            let mut intpart = be_uint(&b[..3]) as i64 - TIMEF_INT_OFS;
            let mut frac = i64::from(b[3]);
            if intpart < 0 && frac != 0 {
                // Negative values store the fraction reversed: borrow one second.
                intpart += 1;
                frac -= 0x100;
            }
            (intpart << 24) + frac * 10_000
        }
        3 | 4 => {
            let b = take(r, 5)?;
            let mut intpart = be_uint(&b[..3]) as i64 - TIMEF_INT_OFS;
            let mut frac = be_uint(&b[3..]) as i64;
            if intpart < 0 && frac != 0 {
                intpart += 1;
                frac -= 0x10000;
            }
            (intpart << 24) + frac * 100
        }
        _ => be_uint(take(r, 6)?) as i64 - TIMEF_OFS,
    };
    let negative = packed < 0;
    let abs = packed.unsigned_abs();
    let micros = (abs & 0xff_ffff) as u32;
    let hms = abs >> 24;
    let hours = ((hms >> 12) & 0x3ff) as u32;
    let minutes = ((hms >> 6) & 63) as u8;
    let seconds = (hms & 63) as u8;
    if micros > 999_999 || minutes > 59 || seconds > 59 || hms >> 22 != 0 {
        return Err(ValErr::Bad(format!(
            "TIME2 value out of range: packed {packed}"
        )));
    }
    Ok(Value::Time {
        negative,
        hours,
        minutes,
        seconds,
        micros,
    })
}
