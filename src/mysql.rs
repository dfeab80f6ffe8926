//! MySQL/MariaDB helpers that know nothing of the pipeline: identifier
//! quoting ([`quote_ident`]), SQL literals ([`literal`], [`interpolate`],
//! [`sql_string_literal`]), connection options ([`connection_opts`]), a
//! statement run without binary logging (`QueryNoLog`) and the server and
//! client error codes shardrep acts on ([`error_codes`]).
//!
//! This module imports nothing of the crate: it sits at the bottom of the
//! layers of shared/DESIGN.md §7 with `position`, and whatever knows about
//! seqnos, channels, shards or the catalog schema lives above it (the
//! catalog's names and statements are in the `catalog` module, the layer
//! just above).

pub mod error_codes;

use mysql_async::{Opts, OptsBuilder, Value as Param};

/// `name` as a MySQL identifier: in backticks, each backtick doubled
/// (MariaDB KB, "Identifier Names").
pub fn quote_ident(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('`');
    for c in name.chars() {
        if c == '`' {
            out.push('`');
        }
        out.push(c);
    }
    out.push('`');
    out
}

/// A bound parameter as an SQL literal for a session with `SET NAMES
/// binary` and backslash escapes on: strings quoted and escaped by
/// mysql_common (`Value::as_sql`), bytes that are not UTF-8 as a hex
/// literal, FLOAT/DOUBLE in exponent form (`1.5e0`: parsed as a double,
/// exact for every finite value), dates and times quoted.
pub fn literal(param: &Param) -> String {
    let mut out = String::new();
    write_literal(param, &mut out);
    out
}

/// Appends [`literal`]`(param)` to `out` without building it apart: the
/// same text as mysql_common's `Value::as_sql(false)` (its escapes of
/// `\0`, `\n`, `\r`, `\\`, `'`, `"` and `\x1a`, its hex form `0x..` in
/// upper case for bytes that are not UTF-8, its zero-padded dates and
/// times) with FLOAT and DOUBLE in exponent form. The applier writes every
/// value of a batched block through it.
pub fn write_literal(param: &Param, out: &mut String) {
    use std::fmt::Write as _;
    match param {
        Param::NULL => out.push_str("NULL"),
        Param::Int(x) => out.push_str(itoa::Buffer::new().format(*x)),
        Param::UInt(x) => out.push_str(itoa::Buffer::new().format(*x)),
        // Writing to a String cannot fail.
        Param::Float(f) => drop(write!(out, "{f:e}")),
        Param::Double(d) => drop(write!(out, "{d:e}")),
        Param::Bytes(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => write_escaped(text, out),
            Err(_) => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                out.reserve(2 + 2 * bytes.len());
                out.push_str("0x");
                for &b in bytes.iter() {
                    out.push(char::from(HEX[usize::from(b >> 4)]));
                    out.push(char::from(HEX[usize::from(b & 0xf)]));
                }
            }
        },
        Param::Date(y, m, d, 0, 0, 0, 0) => {
            out.push('\'');
            write_date(*y, *m, *d, out);
            out.push('\'');
        }
        Param::Date(y, m, d, h, i, s, micros) => {
            out.push('\'');
            write_date(*y, *m, *d, out);
            out.push(' ');
            write_clock(u32::from(*h), 2, *i, *s, *micros, out);
            out.push('\'');
        }
        Param::Time(negative, days, h, i, s, micros) => {
            out.push('\'');
            if *negative {
                out.push('-');
            }
            write_clock(days * 24 + u32::from(*h), 3, *i, *s, *micros, out);
            out.push('\'');
        }
    }
}

/// `H:MM:SS`, then `.ffffff` unless `micros` is 0; the hours zero-padded
/// to `hour_digits`, the other fields to 2 digits.
fn write_clock(
    hours: u32,
    hour_digits: usize,
    minutes: u8,
    seconds: u8,
    micros: u32,
    out: &mut String,
) {
    write_padded(hours, hour_digits, out);
    out.push(':');
    write_padded(u32::from(minutes), 2, out);
    out.push(':');
    write_padded(u32::from(seconds), 2, out);
    if micros != 0 {
        out.push('.');
        write_padded(micros, 6, out);
    }
}

/// `YYYY-MM-DD`, each field zero-padded to its width (wider values whole).
fn write_date(year: u16, month: u8, day: u8, out: &mut String) {
    write_padded(u32::from(year), 4, out);
    out.push('-');
    write_padded(u32::from(month), 2, out);
    out.push('-');
    write_padded(u32::from(day), 2, out);
}

/// `value` in decimal, zero-padded on the left to `width` digits (as
/// `format!("{value:0width$}")`).
fn write_padded(value: u32, width: usize, out: &mut String) {
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(value);
    for _ in digits.len()..width {
        out.push('0');
    }
    out.push_str(digits);
}

/// `text` as a single-quoted literal with backslash escapes (mysql_common's
/// `escaped(text, false)`): runs without a special character are copied
/// whole.
fn write_escaped(text: &str, out: &mut String) {
    out.reserve(text.len() + 2);
    out.push('\'');
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        let escape = match b {
            0 => "\\0",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\\' => "\\\\",
            b'\'' => "\\'",
            b'"' => "\\\"",
            0x1a => "\\Z",
            _ => continue,
        };
        // Special characters are ASCII, so these are char boundaries.
        out.push_str(&text[start..i]);
        out.push_str(escape);
        start = i + 1;
    }
    out.push_str(&text[start..]);
    out.push('\'');
}

/// `template` with each `?` placeholder outside quoted identifiers and
/// string literals replaced by the literal of the next parameter (see
/// [`literal`]), appended to `out`. Used to send a whole block of prepared
/// statements as one multi-statement query.
///
/// # Errors
/// A message when the placeholders and parameters do not pair up.
pub fn interpolate(template: &str, params: &[Param], out: &mut String) -> Result<(), String> {
    let mut params = params.iter();
    let mut quote: Option<u8> = None;
    // The characters looked for are ASCII, so every index where one is
    // found is a char boundary; the text between is copied whole.
    let mut start = 0;
    for (i, b) in template.bytes().enumerate() {
        match quote {
            Some(q) => {
                if b == q {
                    quote = None;
                }
            }
            None => match b {
                b'`' | b'\'' | b'"' => quote = Some(b),
                b'?' => {
                    let p = params
                        .next()
                        .ok_or_else(|| format!("too few parameters for {template:?}"))?;
                    out.push_str(&template[start..i]);
                    write_literal(p, out);
                    start = i + 1;
                }
                _ => {}
            },
        }
    }
    out.push_str(&template[start..]);
    if params.next().is_some() {
        return Err(format!("too many parameters for {template:?}"));
    }
    Ok(())
}

/// A text that cannot be written as an SQL string literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("contains a NUL character")]
pub struct NulInLiteral;

/// `text` as a single-quoted SQL string literal, for statements that take
/// no placeholders (`CHANGE MASTER TO`): `'` doubled; `\` doubled unless
/// the session's `sql_mode` has `NO_BACKSLASH_ESCAPES` (then a backslash is
/// an ordinary character). NUL is refused (MariaDB KB, "String Literals").
///
/// # Errors
/// [`NulInLiteral`] for a NUL character.
pub fn sql_string_literal(text: &str, no_backslash_escapes: bool) -> Result<String, NulInLiteral> {
    if text.contains('\0') {
        return Err(NulInLiteral);
    }
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' if !no_backslash_escapes => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    Ok(out)
}

/// mysql_async options for a connection: TCP to `host:port`, or the Unix
/// socket `socket` when given; never silently the socket (`prefer_socket`
/// off), so the configured transport is the one used. `CLIENT_FOUND_ROWS`
/// (an UPDATE counts the rows it matched), a statement cache of 512.
pub fn connection_opts(
    host: &str,
    port: u16,
    socket: Option<&std::path::Path>,
    user: &str,
    password: &str,
) -> Opts {
    OptsBuilder::default()
        .ip_or_hostname(host.to_string())
        .tcp_port(port)
        .socket(socket.map(|p| p.to_string_lossy().into_owned()))
        .user(Some(user.to_string()))
        .pass(Some(password.to_string()))
        .prefer_socket(false)
        .client_found_rows(true)
        .stmt_cache_size(512)
        .into()
}

/// A statement run with `sql_log_bin = 0` for the session, then the
/// session's default again: a change that belongs to this server alone and
/// must not reach its binlog.
pub(crate) trait QueryNoLog {
    /// Runs `sql` (no result set) with binary logging off.
    async fn query_drop_no_log(&mut self, sql: &str) -> Result<(), mysql_async::Error>;
}

impl QueryNoLog for mysql_async::Conn {
    async fn query_drop_no_log(&mut self, sql: &str) -> Result<(), mysql_async::Error> {
        use mysql_async::prelude::Queryable;
        self.query_drop("SET SESSION sql_log_bin = 0").await?;
        self.query_drop(sql).await?;
        self.query_drop("SET SESSION sql_log_bin = DEFAULT").await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted() {
        assert_eq!(quote_ident("a`b"), "`a``b`");
        assert_eq!(quote_ident(""), "``");
    }

    #[test]
    fn placeholders_inside_quotes_are_left_alone() {
        let mut out = String::new();
        interpolate(
            "UPDATE `a?b`.`t` SET `c` = ? WHERE `k?` = ? AND x = '?'",
            &[Param::Bytes(b"it's".to_vec()), Param::Int(-5)],
            &mut out,
        )
        .unwrap();
        assert_eq!(
            out,
            "UPDATE `a?b`.`t` SET `c` = 'it\\'s' WHERE `k?` = -5 AND x = '?'"
        );
        assert!(interpolate("? ?", &[Param::Int(1)], &mut String::new()).is_err());
        assert!(interpolate("?", &[Param::Int(1), Param::Int(2)], &mut String::new()).is_err());
    }

    #[test]
    fn literals_keep_values_exact() {
        assert_eq!(literal(&Param::NULL), "NULL");
        assert_eq!(literal(&Param::Double(0.1)), "1e-1");
        assert_eq!(literal(&Param::Double(1e-300)), "1e-300");
        assert_eq!(literal(&Param::Float(3.4028235e38)), "3.4028235e38");
        assert_eq!(literal(&Param::Bytes(vec![0xff, 0x00, b'\''])), "0xFF0027");
        assert_eq!(literal(&Param::Bytes(b"a\\b\0".to_vec())), "'a\\\\b\\0'");
        assert_eq!(
            literal(&Param::Date(2024, 2, 29, 12, 0, 1, 5)),
            "'2024-02-29 12:00:01.000005'"
        );
        assert_eq!(literal(&Param::UInt(u64::MAX)), "18446744073709551615");
    }

    #[test]
    fn string_literal_doubles_quotes_and_backslashes() {
        assert_eq!(
            sql_string_literal("mariadb-bin.000001", false).unwrap(),
            "'mariadb-bin.000001'"
        );
        assert_eq!(
            sql_string_literal("x'; DROP DATABASE d; --.000001", false).unwrap(),
            "'x''; DROP DATABASE d; --.000001'"
        );
        assert_eq!(
            sql_string_literal(r"a\'b.000001", false).unwrap(),
            r"'a\\''b.000001'"
        );
        // Under NO_BACKSLASH_ESCAPES a backslash is an ordinary character.
        assert_eq!(
            sql_string_literal(r"a\'b.000001", true).unwrap(),
            r"'a\''b.000001'"
        );
        let err = sql_string_literal("a\0b.1", false).unwrap_err();
        assert_eq!(err, NulInLiteral);
        assert_eq!(err.to_string(), "contains a NUL character");
    }

    /// Any parameter but FLOAT and DOUBLE (written in exponent form
    /// instead).
    fn any_param() -> impl proptest::strategy::Strategy<Value = Param> {
        use proptest::prelude::*;
        prop_oneof![
            Just(Param::NULL),
            any::<i64>().prop_map(Param::Int),
            any::<u64>().prop_map(Param::UInt),
            // Bytes near the escapes, UTF-8 or not.
            proptest::collection::vec(
                prop_oneof![
                    Just(0u8),
                    Just(b'\n'),
                    Just(b'\r'),
                    Just(b'\\'),
                    Just(b'\''),
                    Just(b'"'),
                    Just(0x1a),
                    Just(b'a'),
                    any::<u8>()
                ],
                0..24
            )
            .prop_map(Param::Bytes),
            any::<String>().prop_map(|s| Param::Bytes(s.into_bytes())),
            (
                0u16..=10000,
                0u8..=13,
                0u8..=32,
                0u8..=24,
                0u8..=60,
                0u8..=60,
                0u32..=1_000_000
            )
                .prop_map(|(y, m, d, h, i, s, u)| Param::Date(y, m, d, h, i, s, u)),
            (0u16..=10000, 0u8..=13, 0u8..=32)
                .prop_map(|(y, m, d)| Param::Date(y, m, d, 0, 0, 0, 0)),
            (
                any::<bool>(),
                0u32..=40,
                0u8..=24,
                0u8..=60,
                0u8..=60,
                0u32..=1_000_000
            )
                .prop_map(|(n, d, h, i, s, u)| Param::Time(n, d, h, i, s, u)),
        ]
    }

    proptest::proptest! {
        #[test]
        fn written_literals_are_mysql_commons(p in any_param(), prefix in "[a-z?'`]{0,3}") {
            let mut out = prefix.clone();
            write_literal(&p, &mut out);
            proptest::prop_assert_eq!(out, format!("{prefix}{}", p.as_sql(false)));
        }
    }
}

/// A client error's text as shardrep shows it: mysql_async's `Display`,
/// except an I/O error, whose `Input/output error: ` prefix mysql_async
/// writes twice (for its `Error::Io` and again for the `IoError::Io`
/// inside): `Input/output error: Connection refused (os error 111)`.
pub struct ErrorText<'a>(pub &'a mysql_async::Error);

impl std::fmt::Display for ErrorText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            mysql_async::Error::Io(mysql_async::IoError::Io(e)) => {
                write!(f, "Input/output error: {e}")
            }
            other => write!(f, "{other}"),
        }
    }
}

/// [`ErrorText`] as a `String`.
pub fn error_text(e: &mysql_async::Error) -> String {
    ErrorText(e).to_string()
}

#[cfg(test)]
mod error_text_tests {
    use super::*;

    #[test]
    fn an_io_error_names_its_kind_once() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = mysql_async::Error::Io(mysql_async::IoError::Io(refused));
        assert_eq!(
            e.to_string(),
            "Input/output error: Input/output error: connection refused",
            "mysql_async's own text (if this changes, ErrorText may go)"
        );
        assert_eq!(error_text(&e), "Input/output error: connection refused");
        let server = mysql_async::Error::Server(mysql_async::ServerError {
            code: 1045,
            message: "Access denied".into(),
            state: "28000".into(),
        });
        assert_eq!(
            error_text(&server),
            "Server error: `ERROR 1045 (28000): Access denied'"
        );
    }
}
