//! Keeping passwords out of TOML error messages.
//!
//! toml's error text quotes the offending line (`password = "Pa\q…"` with a
//! bad escape, an unquoted value) and serde's type errors quote the value
//! (`invalid type: integer `12345``). An error that falls in the value of a
//! password-like key ([`is_secret_key`]: `password`, a misspelt `pasword`,
//! `passwd`) is reported with its line,
//! column and key only; a `password` that is not a string is reported as a
//! problem of its key with the value not shown.

use std::ops::Range;

/// Whether a key (its last dotted segment, unquoted) may hold a password:
/// it contains `pass`, `pasw`, `pwd` or `secret` (`password`, a misspelt
/// `pasword`, `passwd`, ...), in any case.
pub(super) fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["pass", "pasw", "pwd", "secret"]
        .iter()
        .any(|part| key.contains(part))
}

/// One password-like key's line(s) in the text: the byte range from the
/// start of its key line to the end of its value's last line, and the key
/// as written.
#[derive(Debug, PartialEq, Eq)]
struct SecretRegion {
    bytes: Range<usize>,
    key: String,
}

/// The key of an assignment line (`key = value`, `a.b = value`,
/// `"key" = value`), its last segment unquoted; `None` for other lines
/// (table headers, comments, blank lines, continuation lines).
fn assignment_key(line: &str) -> Option<(String, &str)> {
    let trimmed = line.trim_start();
    if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('[') {
        return None;
    }
    let (key, value) = trimmed.split_once('=')?;
    let last = key.trim().rsplit('.').next()?.trim();
    let last = last.trim_matches(|c| c == '"' || c == '\'');
    if last.is_empty() || last.contains(char::is_whitespace) {
        return None;
    }
    Some((key.trim().to_string(), value))
}

/// Every password-like key's region of `text`. A value that opens a
/// multi-line string (`"""`, `'''`) and does not close it on its line runs
/// to the line that closes it (or the end of the text).
fn secret_regions(text: &str) -> Vec<SecretRegion> {
    let mut regions = Vec::new();
    let mut lines = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        lines.push(at..at + line.len());
        at += line.len();
    }
    let mut i = 0;
    while i < lines.len() {
        let line = &text[lines[i].clone()];
        let Some((key, value)) = assignment_key(line) else {
            i += 1;
            continue;
        };
        let value = value.trim_start();
        let mut last = i;
        for delimiter in ["\"\"\"", "'''"] {
            if let Some(rest) = value.strip_prefix(delimiter) {
                if !rest.contains(delimiter) {
                    last = (i + 1..lines.len())
                        .find(|&j| text[lines[j].clone()].contains(delimiter))
                        .unwrap_or(lines.len() - 1);
                }
                break;
            }
        }
        let last_segment = key.rsplit('.').next().unwrap_or(&key).trim();
        if is_secret_key(last_segment.trim_matches(|c| c == '"' || c == '\'')) {
            regions.push(SecretRegion {
                bytes: lines[i].start..lines[last].end,
                key,
            });
        }
        i = last + 1;
    }
    regions
}

/// Line and column (1-based, columns in characters) of byte `offset`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

/// toml's message for a syntax error in `text`, or, when the error lies
/// in (or its excerpt would show) the value of a password-like key, a
/// message naming the line, column and key and never any of the line.
pub(super) fn syntax_error_message(text: &str, error: &toml::de::Error) -> String {
    let shown = error.to_string().trim_end().to_string();
    let span = error.span().unwrap_or(0..text.len());
    let regions = secret_regions(text);
    // The excerpt shows the lines of the span's start (and end).
    let touches = |r: &SecretRegion| {
        let (lo, hi) = (span.start, span.end.max(span.start + 1));
        lo < r.bytes.end && r.bytes.start < hi
            || r.bytes.contains(&span.start)
            || r.bytes.contains(&span.end.saturating_sub(1))
    };
    let Some(region) = regions.iter().find(|r| touches(r)) else {
        if regions.is_empty() || error.span().is_some() {
            return match error.span().and_then(|s| key_at(text, s.start)) {
                Some((key, line)) => format!(
                    "{shown}\n`{key}` (line {line}): its value is not valid TOML; numbers and \
                     true/false are written bare (channels = 8), words and paths as quoted \
                     strings (method = \"binlog\")"
                ),
                None => shown,
            };
        }
        // No position: show nothing of the text.
        return format!("TOML parse error: {}", first_line(error.message()));
    };
    let (line, column) = line_column(text, span.start);
    format!(
        "TOML parse error at line {line}, column {column}: the value of `{key}` is not valid \
         TOML ({what}); the line is not shown because it holds a password. Write it as a TOML \
         string: \"...\" (a backslash written \\\\) or '...' (taken literally)",
        key = region.key,
        what = first_line(error.message()),
    )
}

/// The dotted key (`apply.channels`) of the `key = value` line holding
/// byte `offset` of `text`, with its line number, when that line is one:
/// the key, and the last `[section]` header above it.
fn key_at(text: &str, offset: usize) -> Option<(String, usize)> {
    let (line, _) = line_column(text, offset);
    let lines: Vec<&str> = text.lines().collect();
    let here = lines.get(line - 1)?;
    let (key, _) = here.split_once('=')?;
    let key = key.trim();
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    {
        return None;
    }
    let section = lines[..line - 1]
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| l.starts_with('[') && !l.starts_with("[["))
        .and_then(|l| l.strip_prefix('[')?.split(']').next())
        .map(str::trim);
    Some((
        match section {
            Some(s) if !s.is_empty() => format!("{s}.{key}"),
            _ => key.to_string(),
        },
        line,
    ))
}

/// The first line of toml's message (e.g. `invalid escape sequence`), which
/// names what is wrong but quotes none of the text.
fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or("").trim()
}

/// Replaces every `password` key in `table` (at any depth) whose value is
/// not a string by an empty string, returning the dotted paths of the keys
/// replaced, so serde never quotes such a value in a type error.
pub(super) fn non_string_passwords(table: &mut toml::Table, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (key, value) in table.iter_mut() {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            toml::Value::Table(inner) => found.extend(non_string_passwords(inner, &path)),
            toml::Value::String(_) => {}
            other if key == "password" => {
                *other = toml::Value::String(String::new());
                found.push(path);
            }
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        let e = text.parse::<toml::Table>().unwrap_err();
        syntax_error_message(text, &e)
    }

    #[test]
    fn regions_cover_password_lines_and_multiline_values() {
        let text = "[replica]\nuser = \"u\"\npassword = \"\"\"a\nb=c\n\"\"\"\nport = 1\n";
        let regions = secret_regions(text);
        assert_eq!(regions.len(), 1);
        assert_eq!(regions[0].key, "password");
        assert_eq!(
            &text[regions[0].bytes.clone()],
            "password = \"\"\"a\nb=c\n\"\"\"\n"
        );
        let text = "replica.password = 'x'\n\"passwd\" = 1\nport = 2\n";
        let keys: Vec<String> = secret_regions(text).into_iter().map(|r| r.key).collect();
        assert_eq!(keys, ["replica.password", "\"passwd\""]);
    }

    #[test]
    fn errors_on_password_lines_show_no_part_of_them() {
        for (text, secret, line) in [
            ("[replica]\npassword = \"Pa\\qss-Wd7\"\n", "Pa\\qss-Wd7", 2),
            (
                "[replica]\nport = 1\npassword = Pa55-wOrd\n",
                "Pa55-wOrd",
                3,
            ),
            ("[source]\npassword = \"S3cr-et\n", "S3cr-et", 2),
            ("[source]\npasword = \"Xy\\z9\"\n", "Xy\\z9", 2),
            ("[source]\npassword = '''ab\ncd-Qq\n", "cd-Qq", 4),
        ] {
            let shown = err(text);
            assert!(
                shown.starts_with(&format!("TOML parse error at line {line}, column ")),
                "{shown}"
            );
            assert!(shown.contains("holds a password"), "{shown}");
            assert!(!shown.contains(secret), "{shown}");
            for part in secret.split(|c: char| !c.is_ascii_alphanumeric()) {
                if part.len() >= 3 {
                    assert!(!shown.contains(part), "{part} in {shown}");
                }
            }
        }
    }

    #[test]
    fn other_errors_keep_toml_s_excerpt() {
        let shown = err("[replica]\npassword = \"ok\"\nport = 12ab\n");
        assert!(shown.contains("port = 12ab"), "{shown}");
        assert!(!shown.contains("\"ok\""), "{shown}");
    }

    #[test]
    fn non_string_passwords_are_blanked() {
        let mut table: toml::Table = "[source]\npassword = 12345\n[replica]\npassword = \"s\"\n\
             [source.x]\npassword = [1]\n"
            .parse()
            .unwrap();
        let found = non_string_passwords(&mut table, "");
        assert_eq!(found, ["source.password", "source.x.password"]);
        assert_eq!(table["source"]["password"].as_str(), Some(""));
        assert_eq!(table["replica"]["password"].as_str(), Some("s"));
    }
}
