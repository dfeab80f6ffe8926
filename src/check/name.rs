//! Table names as a DBA writes them on the command line (`schema.table`)
//! and as the check shows them.
//!
//! A part that holds a dot, a backtick or anything but letters, digits,
//! `_` and `$` is written in backticks, a backtick inside doubled, as in
//! SQL (MariaDB manual, "Identifier Names"): `` `my.db`.`t` ``,
//! `` `a``b`.t ``.

/// Splits `text` into (schema, table).
///
/// # Errors
/// A message naming `text` when it is not two names joined by one dot
/// (an unquoted part holding a dot is ambiguous), or a backtick is not
/// closed.
pub fn parse_table(text: &str) -> Result<(String, String), String> {
    let bad = |why: &str| {
        format!(
            "table {text:?} is not schema.table: {why} (write a name that holds a dot or a \
             backtick in backticks, a backtick inside doubled: `my.db`.`t`)"
        )
    };
    let (schema, rest) = part(text).map_err(&bad)?;
    let Some(rest) = rest.strip_prefix('.') else {
        return Err(bad("no dot between the schema and the table"));
    };
    let (table, rest) = part(rest).map_err(&bad)?;
    if !rest.is_empty() {
        return Err(bad("more than one dot"));
    }
    Ok((schema, table))
}

/// A schema name as written: in backticks (as [`display`] shows it), or
/// as is (a dot is then part of the name).
///
/// # Errors
/// An empty name, or a backtick not closed or followed by more text.
pub fn parse_schema(text: &str) -> Result<String, String> {
    let bad = |why: &str| format!("schema {text:?}: {why}");
    if !text.starts_with('`') {
        return if text.is_empty() {
            Err(bad("an empty name"))
        } else {
            Ok(text.to_owned())
        };
    }
    match part(text).map_err(bad)? {
        (name, "") => Ok(name),
        _ => Err(bad("text after the closing backtick")),
    }
}

/// One name at the start of `text` and what follows it.
fn part(text: &str) -> Result<(String, &str), &'static str> {
    if let Some(quoted) = text.strip_prefix('`') {
        let mut name = String::new();
        let mut chars = quoted.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c != '`' {
                name.push(c);
            } else if chars.peek().is_some_and(|&(_, n)| n == '`') {
                chars.next();
                name.push('`');
            } else if name.is_empty() {
                return Err("an empty name");
            } else {
                return Ok((name, &quoted[i + 1..]));
            }
        }
        Err("a backtick is not closed")
    } else {
        let end = text.find(['.', '`']).unwrap_or(text.len());
        if end == 0 {
            return Err("an empty name");
        }
        Ok((text[..end].to_owned(), &text[end..]))
    }
}

/// `schema.table` as [`parse_table`] reads it back: a part in backticks
/// when it holds anything but ASCII letters, digits, `_` and `$`.
pub fn display(schema: &str, table: &str) -> String {
    format!("{}.{}", display_part(schema), display_part(table))
}

fn display_part(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if plain {
        name.to_owned()
    } else {
        crate::mysql::quote_ident(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(s: &str, t: &str) -> Result<(String, String), String> {
        Ok((s.to_owned(), t.to_owned()))
    }

    #[test]
    fn names_plain_and_in_backticks() {
        assert_eq!(parse_table("sbtest.sbtest1"), pair("sbtest", "sbtest1"));
        assert_eq!(parse_table("`my.db`.`t.1`"), pair("my.db", "t.1"));
        assert_eq!(parse_table("`a``b`.t"), pair("a`b", "t"));
        assert_eq!(parse_table("s.`t`"), pair("s", "t"));
        for bad in ["s", "s.t.u", "`s.t", "s.", ".t", "``.t", "s.`t`x", "s`.t"] {
            let e = parse_table(bad).unwrap_err();
            assert!(
                e.starts_with(&format!("table {bad:?} is not schema.table")),
                "{e}"
            );
        }
        assert!(parse_table("s.t.u")
            .unwrap_err()
            .contains("more than one dot"));
    }

    #[test]
    fn schemas_plain_or_in_backticks() {
        assert_eq!(parse_schema("my.db"), Ok("my.db".into()));
        assert_eq!(parse_schema("`my.db`"), Ok("my.db".into()));
        assert_eq!(parse_schema("`a``b`"), Ok("a`b".into()));
        assert_eq!(parse_schema(""), Err("schema \"\": an empty name".into()));
        assert!(parse_schema("`a`b")
            .unwrap_err()
            .contains("after the closing"));
        assert!(parse_schema("`a").unwrap_err().contains("not closed"));
    }

    #[test]
    fn display_reads_back() {
        assert_eq!(display("sbtest", "sbtest1"), "sbtest.sbtest1");
        assert_eq!(display("my.db", "a`b"), "`my.db`.`a``b`");
        for (s, t) in [("my.db", "a`b"), ("x y", "é"), ("s", "t$1")] {
            assert_eq!(parse_table(&display(s, t)), pair(s, t));
        }
    }
}
