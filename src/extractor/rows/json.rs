//! MySQL binary JSON (`json_binary.h`) to its text: [`jsonb_to_text`].

use super::*;

pub(super) const JSON_MAX_DEPTH: usize = 100;

/// MySQL binary JSON (`json_binary.h`) to JSON text. An empty value is the
/// JSON null literal.
pub fn jsonb_to_text(data: &[u8]) -> Result<String, String> {
    let mut out = String::with_capacity(data.len() + 16);
    let Some((&t, rest)) = data.split_first() else {
        return Ok("null".into());
    };
    json_value(t, rest, &mut out, 0)?;
    Ok(out)
}

pub(super) fn json_value(t: u8, data: &[u8], out: &mut String, depth: usize) -> Result<(), String> {
    if depth > JSON_MAX_DEPTH {
        return Err(format!("nesting deeper than {JSON_MAX_DEPTH}"));
    }
    let short = |what: &str| format!("{what}: value truncated");
    match t {
        0x00 | 0x01 => json_container(data, t == 0x01, true, out, depth),
        0x02 | 0x03 => json_container(data, t == 0x03, false, out, depth),
        0x04 => match data.first() {
            Some(0) => {
                out.push_str("null");
                Ok(())
            }
            Some(1) => {
                out.push_str("true");
                Ok(())
            }
            Some(2) => {
                out.push_str("false");
                Ok(())
            }
            Some(x) => Err(format!("unknown literal {x}")),
            None => Err(short("literal")),
        },
        0x05 => {
            let b: [u8; 2] = data
                .get(..2)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| short("int16"))?;
            out.push_str(&i16::from_le_bytes(b).to_string());
            Ok(())
        }
        0x06 => {
            let b: [u8; 2] = data
                .get(..2)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| short("uint16"))?;
            out.push_str(&u16::from_le_bytes(b).to_string());
            Ok(())
        }
        0x07 => {
            let b: [u8; 4] = data
                .get(..4)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| short("int32"))?;
            out.push_str(&i32::from_le_bytes(b).to_string());
            Ok(())
        }
        0x08 => {
            let b: [u8; 4] = data
                .get(..4)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| short("uint32"))?;
            out.push_str(&u32::from_le_bytes(b).to_string());
            Ok(())
        }
        0x09 => {
            let b: [u8; 8] = data
                .get(..8)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| short("int64"))?;
            out.push_str(&i64::from_le_bytes(b).to_string());
            Ok(())
        }
        0x0a => {
            let b: [u8; 8] = data
                .get(..8)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| short("uint64"))?;
            out.push_str(&u64::from_le_bytes(b).to_string());
            Ok(())
        }
        0x0b => {
            let b: [u8; 8] = data
                .get(..8)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| short("double"))?;
            let f = f64::from_le_bytes(b);
            if !f.is_finite() {
                return Err(format!("double {f} is not a JSON number"));
            }
            // `{:?}` is the shortest text that reads back to the same double
            // and always has a `.` or an exponent (so it stays a double).
            out.push_str(&format!("{f:?}"));
            Ok(())
        }
        0x0c => {
            let mut r = Reader::new(data);
            let len = json_varlen(&mut r)?;
            let s = r.take(len).ok_or_else(|| short("string"))?;
            json_string(s, out)
        }
        0x0f => {
            let mut r = Reader::new(data);
            let ft = r.byte().ok_or_else(|| short("opaque"))?;
            let len = json_varlen(&mut r)?;
            let v = r.take(len).ok_or_else(|| short("opaque"))?;
            json_opaque(ft, v, out)
        }
        _ => Err(format!("unknown value type {t:#04x}")),
    }
}

/// JSON's variable-length length: 7 bits a byte, low bits first, high bit
/// set on all but the last byte; at most 5 bytes.
pub(super) fn json_varlen(r: &mut Reader<'_>) -> Result<usize, String> {
    let mut v: u64 = 0;
    for i in 0..5 {
        let b = r.byte().ok_or("length truncated")?;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return u32::try_from(v)
                .map(|v| v as usize)
                .map_err(|_| format!("length {v} too large"));
        }
    }
    Err("length longer than 5 bytes".into())
}

pub(super) fn json_container(
    data: &[u8],
    large: bool,
    object: bool,
    out: &mut String,
    depth: usize,
) -> Result<(), String> {
    let what = if object { "object" } else { "array" };
    let w = if large { 4 } else { 2 };
    let read = |off: usize, n: usize| -> Option<usize> {
        let end = off.checked_add(n)?;
        data.get(off..end).map(|b| le_uint(b) as usize)
    };
    let count = read(0, w).ok_or_else(|| format!("{what} header truncated"))?;
    let size = read(w, w).ok_or_else(|| format!("{what} header truncated"))?;
    if size > data.len() {
        return Err(format!("{what} says {size} bytes, {} left", data.len()));
    }
    let data = &data[..size];
    let key_entry = if object { w + 2 } else { 0 };
    let value_entry = 1 + w;
    let header = 2 * w;
    let entries_end = count
        .checked_mul(key_entry + value_entry)
        .and_then(|n| n.checked_add(header))
        .filter(|&n| n <= size)
        .ok_or_else(|| format!("{what} of {count} elements does not fit in {size} bytes"))?;
    let _ = entries_end;
    out.push(if object { '{' } else { '[' });
    for i in 0..count {
        if i > 0 {
            out.push_str(", ");
        }
        if object {
            let e = header + i * key_entry;
            let koff = le_uint(&data[e..e + w]) as usize;
            let klen = le_uint(&data[e + w..e + w + 2]) as usize;
            let key = koff
                .checked_add(klen)
                .and_then(|end| data.get(koff..end))
                .ok_or_else(|| format!("key {i} outside the object"))?;
            json_string(key, out)?;
            out.push_str(": ");
        }
        let e = header + count * key_entry + i * value_entry;
        let vt = data[e];
        let inline = matches!(vt, 0x04..=0x06) || (large && matches!(vt, 0x07 | 0x08));
        if inline {
            json_value(vt, &data[e + 1..e + 1 + w], out, depth + 1)?;
        } else {
            let off = le_uint(&data[e + 1..e + 1 + w]) as usize;
            let v = data.get(off..).filter(|v| !v.is_empty()).ok_or_else(|| {
                format!("{what} element {i} at offset {off} outside {size} bytes")
            })?;
            json_value(vt, v, out, depth + 1)?;
        }
    }
    out.push(if object { '}' } else { ']' });
    Ok(())
}

pub(super) fn json_string(b: &[u8], out: &mut String) -> Result<(), String> {
    let s = std::str::from_utf8(b).map_err(|e| format!("string is not UTF-8: {e}"))?;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(())
}

pub(super) fn json_opaque(ft: u8, v: &[u8], out: &mut String) -> Result<(), String> {
    match ft {
        ct::NEWDECIMAL if v.len() >= 2 => {
            let (p, s) = (v[0], v[1]);
            if p == 0 || p > 65 || s > p {
                return Err(format!("opaque DECIMAL({p},{s}) is invalid"));
            }
            let size = decimal_size(p, s);
            let b = v
                .get(2..2 + size)
                .ok_or_else(|| format!("opaque DECIMAL({p},{s}) truncated"))?;
            out.push_str(&decode_decimal(p, s, b)?);
            Ok(())
        }
        ct::DATE | ct::DATETIME | ct::TIMESTAMP | ct::DATETIME2 | ct::TIMESTAMP2 | ct::NEWDATE
            if v.len() >= 8 =>
        {
            let packed = i64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8]));
            let abs = packed.unsigned_abs();
            let micros = abs & 0xff_ffff;
            let ymdhms = abs >> 24;
            let ymd = ymdhms >> 17;
            let ym = ymd >> 5;
            let hms = ymdhms & 0x1ffff;
            let (y, mo, d) = (ym / 13, ym % 13, ymd & 31);
            let (h, mi, s) = (hms >> 12, (hms >> 6) & 63, hms & 63);
            let sign = if packed < 0 { "-" } else { "" };
            if matches!(ft, ct::DATE | ct::NEWDATE) {
                out.push_str(&format!("\"{sign}{y:04}-{mo:02}-{d:02}\""));
            } else {
                out.push_str(&format!(
                    "\"{sign}{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.{micros:06}\""
                ));
            }
            Ok(())
        }
        ct::TIME | ct::TIME2 if v.len() >= 8 => {
            let packed = i64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8]));
            let abs = packed.unsigned_abs();
            let micros = abs & 0xff_ffff;
            let hms = abs >> 24;
            let (h, mi, s) = ((hms >> 12) & 0x3ff, (hms >> 6) & 63, hms & 63);
            let sign = if packed < 0 { "-" } else { "" };
            out.push_str(&format!("\"{sign}{h:02}:{mi:02}:{s:02}.{micros:06}\""));
            Ok(())
        }
        _ => {
            out.push_str(&format!("\"base64:type{ft}:"));
            base64(v, out);
            out.push('"');
            Ok(())
        }
    }
}

pub(super) fn base64(b: &[u8], out: &mut String) {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for chunk in b.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &x)| n | u32::from(x) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(T[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
}
