//! MySQL's binary DECIMAL (`decimal2bin`), as row images, binary JSON and
//! DECIMAL user variables store it: the one decoder of the extractor.
//!
//! Format: MySQL `strings/decimal.c` (`decimal_bin_size`, `bin2decimal`):
//! integer then fraction digits in groups of 9 per 4 bytes (leftover digits
//! in 1-4 bytes, `DIG2BYTES`), big-endian, the first bit flipped, every byte
//! inverted for a negative value.

/// Bytes of a group of 0..=9 leftover digits (MySQL `dig2bytes`).
pub(crate) const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];
const POW10: [u32; 10] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
];

/// Bytes of a binary DECIMAL(precision, scale) (MySQL `decimal_bin_size`).
pub(crate) fn decimal_size(precision: u8, scale: u8) -> usize {
    let intg = usize::from(precision.saturating_sub(scale));
    let frac = usize::from(scale);
    (intg / 9) * 4 + DIG2BYTES[intg % 9] + (frac / 9) * 4 + DIG2BYTES[frac % 9]
}

/// Pushes `v` as decimal digits, zero-padded to `width`.
fn push_digits(out: &mut String, v: u32, width: usize) {
    let mut buf = [b'0'; 10];
    let mut n = v;
    let mut i = buf.len();
    while n > 0 {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    let digits = buf.len() - i;
    let start = if digits >= width {
        i
    } else {
        buf.len() - width.min(buf.len())
    };
    for &c in &buf[start..] {
        out.push(char::from(c));
    }
}

/// The exact text of a binary DECIMAL(precision, scale) (MySQL
/// `decimal2bin` format, read as `bin2decimal` does): optional `-`, the
/// integer digits (at least one), then `.` and `scale` fraction digits; a
/// negative zero is written `0`.
///
/// # Errors
/// A precision of 0 or above 65, a scale above the precision, `b` not of
/// exactly [`decimal_size`] bytes, or a digit group out of range.
pub(crate) fn decode_decimal(precision: u8, scale: u8, b: &[u8]) -> Result<String, String> {
    if precision == 0 || scale > precision || precision > 65 {
        return Err(format!(
            "DECIMAL({precision},{scale}) is not a valid precision/scale"
        ));
    }
    let intg = usize::from(precision.saturating_sub(scale));
    let frac = usize::from(scale);
    if b.len() != decimal_size(precision, scale) || b.is_empty() {
        return Err(format!(
            "DECIMAL({precision},{scale}) needs {} bytes, got {}",
            decimal_size(precision, scale),
            b.len()
        ));
    }
    let negative = b[0] & 0x80 == 0;
    let mask: u8 = if negative { 0xff } else { 0 };
    let mut pos = 0usize;
    let mut group = |n: usize, digits: usize| -> Result<u32, String> {
        let mut v: u32 = 0;
        for k in 0..n {
            let mut x = b[pos + k] ^ mask;
            if pos + k == 0 {
                x ^= 0x80;
            }
            v = (v << 8) | u32::from(x);
        }
        pos += n;
        if v >= POW10[digits] {
            return Err(format!(
                "invalid DECIMAL({precision},{scale}) bytes: group {v} has more than {digits} digits"
            ));
        }
        Ok(v)
    };
    let mut out = String::with_capacity(usize::from(precision) + 3);
    if negative {
        out.push('-');
    }
    let mut nonzero = false;
    let mut started = false;
    let (intg0, intg0x) = (intg / 9, intg % 9);
    if intg0x > 0 {
        let v = group(DIG2BYTES[intg0x], intg0x)?;
        if v > 0 {
            push_digits(&mut out, v, 1);
            started = true;
            nonzero = true;
        }
    }
    for _ in 0..intg0 {
        let v = group(4, 9)?;
        if started {
            push_digits(&mut out, v, 9);
        } else if v > 0 {
            push_digits(&mut out, v, 1);
            started = true;
            nonzero = true;
        }
    }
    if !started {
        out.push('0');
    }
    if frac > 0 {
        out.push('.');
        let (frac0, frac0x) = (frac / 9, frac % 9);
        for _ in 0..frac0 {
            let v = group(4, 9)?;
            nonzero |= v > 0;
            push_digits(&mut out, v, 9);
        }
        if frac0x > 0 {
            let v = group(DIG2BYTES[frac0x], frac0x)?;
            nonzero |= v > 0;
            push_digits(&mut out, v, frac0x);
        }
    }
    if negative && !nonzero {
        out.remove(0);
    }
    Ok(out)
}
