//! TABLE_MAP parsing: [`parse_table_map`] and the column metadata helpers
//! ([`string_meta`], [`real_type`], [`column_type_name`]).

use super::*;

/// Parses a TABLE_MAP event body (bytes after the 19-byte header, checksum
/// trailer already removed). `post_header_len` is the FORMAT_DESCRIPTION
/// post-header length for TABLE_MAP (8 normally: 6-byte table id + 2 flags;
/// 6 means a 4-byte id). Uses MariaDB's rules; see
/// [`parse_table_map_with`].
pub fn parse_table_map(body: &[u8], post_header_len: u8) -> Result<TableInfo, String> {
    parse_table_map_with(body, post_header_len, Flavor::MariaDb)
}

/// [`parse_table_map`] for a binlog written by `flavor`.
pub fn parse_table_map_with(
    body: &[u8],
    post_header_len: u8,
    flavor: Flavor,
) -> Result<TableInfo, String> {
    let mut r = Reader::new(body);
    let table_id = read_table_id(&mut r, post_header_len, "TABLE_MAP")?;
    let schema = read_name(&mut r, "TABLE_MAP schema name")?;
    let table = read_name(&mut r, "TABLE_MAP table name")?;
    let count = r.packed("TABLE_MAP column count")?;
    if count > u64::from(u16::MAX) {
        return Err(format!(
            "TABLE_MAP `{schema}`.`{table}`: column count {count} exceeds 65535"
        ));
    }
    let count = count as usize;
    let types = r.need(count, "TABLE_MAP column types")?;
    let meta_len = r.packed("TABLE_MAP metadata length")?;
    let meta_block = r.need(len_usize(meta_len), "TABLE_MAP metadata block")?;
    let nulls = r.need(count.div_ceil(8), "TABLE_MAP null bitmap")?;

    let mut columns = Vec::with_capacity(count);
    let mut m = Reader::new(meta_block);
    for (i, &t) in types.iter().enumerate() {
        let len = meta_len_of(t).ok_or_else(|| {
            if t == ct::TYPED_ARRAY {
                format!(
                    "TABLE_MAP `{schema}`.`{table}` column {i}: column type TYPED_ARRAY (20) \
                     is not supported"
                )
            } else {
                format!(
                    "TABLE_MAP `{schema}`.`{table}` column {i}: unknown column type {t} \
                     (its metadata length is unknown)"
                )
            }
        })?;
        let left = m.remaining();
        let b = m.take(len).ok_or_else(|| {
            format!(
                "TABLE_MAP `{schema}`.`{table}` column {i} type {t}: metadata needs {len} bytes, \
                 {left} left in the metadata block"
            )
        })?;
        let meta = match (t, b) {
            (ct::VARCHAR | ct::VAR_STRING | ct::BIT | MARIADB_VARCHAR_COMPRESSED, [b0, b1]) => {
                u16::from_le_bytes([*b0, *b1])
            }
            (_, [b0, b1]) => u16::from_be_bytes([*b0, *b1]),
            (_, [b0]) => u16::from(*b0),
            _ => 0,
        };
        let nullable = nulls.get(i / 8).is_some_and(|b| b >> (i % 8) & 1 == 1);
        columns.push(ColumnInfo {
            column_type: t,
            meta,
            nullable,
            name: None,
            unsigned: None,
            charset: None,
        });
    }
    if m.remaining() != 0 {
        return Err(format!(
            "TABLE_MAP `{schema}`.`{table}`: metadata block has {meta_len} bytes, the column \
             types use {}",
            m.offset()
        ));
    }
    let mut info = TableInfo {
        table_id,
        schema,
        table,
        columns,
        primary_key: None,
    };
    apply_optional_metadata(&mut info, r.rest(), flavor)?;
    Ok(info)
}

pub(super) fn read_table_id(
    r: &mut Reader<'_>,
    post_header_len: u8,
    what: &str,
) -> Result<u64, String> {
    let id_len = if post_header_len == 6 { 4 } else { 6 };
    let id = r.uint_le(id_len).ok_or_else(|| {
        format!(
            "{what}: need a {id_len}-byte table id, {} left",
            r.remaining()
        )
    })?;
    r.need(2, &format!("{what} flags"))?;
    // A longer post-header than we know (future servers): skip the rest.
    let phl = usize::from(post_header_len);
    if phl > id_len + 2 {
        r.need(phl - id_len - 2, &format!("{what} post-header"))?;
    }
    Ok(id)
}

pub(super) fn read_name(r: &mut Reader<'_>, what: &str) -> Result<String, String> {
    let len = r
        .byte()
        .ok_or_else(|| format!("{what}: need a length byte, 0 bytes left"))?;
    let b = r.need(usize::from(len) + 1, what)?;
    let (name, nul) = b.split_at(usize::from(len));
    if nul != [0] {
        return Err(format!(
            "{what}: expected a NUL after {len} bytes, found {:#04x}",
            nul.first().copied().unwrap_or(0)
        ));
    }
    Ok(String::from_utf8_lossy(name).into_owned())
}

/// Number of metadata bytes of a column type in TABLE_MAP; `None` for an
/// unknown type.
pub(super) fn meta_len_of(t: u8) -> Option<usize> {
    Some(match t {
        ct::DECIMAL
        | ct::TINY
        | ct::SHORT
        | ct::LONG
        | ct::NULL
        | ct::TIMESTAMP
        | ct::LONGLONG
        | ct::INT24
        | ct::DATE
        | ct::TIME
        | ct::DATETIME
        | ct::YEAR
        | ct::NEWDATE => 0,
        ct::FLOAT
        | ct::DOUBLE
        | ct::TIMESTAMP2
        | ct::DATETIME2
        | ct::TIME2
        | ct::JSON
        | ct::TINY_BLOB
        | ct::MEDIUM_BLOB
        | ct::LONG_BLOB
        | ct::BLOB
        | ct::GEOMETRY
        | MYSQL_VECTOR
        | MARIADB_BLOB_COMPRESSED => 1,
        ct::VARCHAR
        | ct::VAR_STRING
        | ct::BIT
        | ct::NEWDECIMAL
        | ct::ENUM
        | ct::SET
        | ct::STRING
        | MARIADB_VARCHAR_COMPRESSED => 2,
        _ => return None,
    })
}

/// The real type and maximum byte length of a STRING (254) column from its
/// [`ColumnInfo::meta`]: `(STRING, n)` for CHAR/BINARY, `(ENUM, bytes)` or
/// `(SET, bytes)` for ENUM/SET hidden as STRING. Lengths over 255 are
/// encoded in bits 4-5 of the first byte, inverted (MySQL bug #37426).
pub fn string_meta(meta: u16) -> (u8, u16) {
    let byte0 = (meta >> 8) as u8;
    let byte1 = meta & 0xff;
    if meta < 256 {
        return (ct::STRING, meta);
    }
    if byte0 & 0x30 != 0x30 {
        (
            byte0 | 0x30,
            byte1 | ((u16::from(byte0 & 0x30) ^ 0x30) << 4),
        )
    } else {
        (byte0, byte1)
    }
}

/// The column's real type: ENUM/SET/STRING for a STRING column (see
/// [`string_meta`]), DATE for NEWDATE, else its type code.
pub fn real_type(col: &ColumnInfo) -> u8 {
    match col.column_type {
        ct::STRING => string_meta(col.meta).0,
        t => t,
    }
}

pub(super) fn is_numeric(t: u8) -> bool {
    matches!(
        t,
        ct::TINY
            | ct::SHORT
            | ct::INT24
            | ct::LONG
            | ct::LONGLONG
            | ct::FLOAT
            | ct::DOUBLE
            | ct::DECIMAL
            | ct::NEWDECIMAL
            | ct::YEAR
    )
}

pub(super) fn is_character(real: u8, with_geometry: bool) -> bool {
    match real {
        ct::STRING
        | ct::VAR_STRING
        | ct::VARCHAR
        | ct::TINY_BLOB
        | ct::MEDIUM_BLOB
        | ct::LONG_BLOB
        | ct::BLOB
        | MARIADB_BLOB_COMPRESSED
        | MARIADB_VARCHAR_COMPRESSED
        | MYSQL_VECTOR => true,
        ct::GEOMETRY => with_geometry,
        _ => false,
    }
}

pub(super) fn is_enum_or_set(real: u8) -> bool {
    matches!(real, ct::ENUM | ct::SET)
}

pub(super) fn apply_optional_metadata(
    info: &mut TableInfo,
    data: &[u8],
    flavor: Flavor,
) -> Result<(), String> {
    use optional_meta as om;
    let mut r = Reader::new(data);
    let ctx = format!("TABLE_MAP `{}`.`{}`", info.schema, info.table);
    let mut pk: Option<Vec<u16>> = None;
    while r.remaining() > 0 {
        let Some(t) = r.byte() else { break };
        let what = format!("{ctx} optional metadata field {t}");
        let len = r.packed(&what)?;
        let v = r.need(len_usize(len), &what)?;
        match t {
            om::SIGNEDNESS => {
                let mut k = 0usize;
                for col in info.columns.iter_mut() {
                    if !is_numeric(col.column_type) {
                        continue;
                    }
                    let byte = v.get(k / 8).ok_or_else(|| {
                        format!(
                            "{ctx}: SIGNEDNESS has {} bits, the table has more numeric columns",
                            v.len() * 8
                        )
                    })?;
                    col.unsigned = Some(byte >> (7 - k % 8) & 1 == 1);
                    k += 1;
                }
            }
            om::DEFAULT_CHARSET | om::ENUM_AND_SET_DEFAULT_CHARSET => {
                let enum_set = t == om::ENUM_AND_SET_DEFAULT_CHARSET;
                let with_geometry = flavor == Flavor::MariaDb;
                let targets = charset_targets(&info.columns, enum_set, with_geometry);
                let mut f = Reader::new(v);
                let default = charset_id(f.packed(&format!("{ctx} default collation"))?, &ctx)?;
                for &c in &targets {
                    info.columns[c].charset = Some(default);
                }
                while f.remaining() > 0 {
                    let idx = f.packed(&format!("{ctx} charset column index"))?;
                    let coll = charset_id(f.packed(&format!("{ctx} charset collation"))?, &ctx)?;
                    let c = usize::try_from(idx)
                        .ok()
                        .and_then(|i| targets.get(i))
                        .ok_or_else(|| {
                            format!(
                                "{ctx}: charset entry for {} column {idx}, the table has {} such \
                                 columns",
                                if enum_set { "ENUM/SET" } else { "character" },
                                targets.len()
                            )
                        })?;
                    info.columns[*c].charset = Some(coll);
                }
            }
            om::COLUMN_CHARSET | om::ENUM_AND_SET_COLUMN_CHARSET => {
                let enum_set = t == om::ENUM_AND_SET_COLUMN_CHARSET;
                let mut ids = Vec::new();
                let mut f = Reader::new(v);
                while f.remaining() > 0 {
                    ids.push(charset_id(
                        f.packed(&format!("{ctx} column collation"))?,
                        &ctx,
                    )?);
                }
                let preferred = flavor == Flavor::MariaDb;
                let mut targets = charset_targets(&info.columns, enum_set, preferred);
                if targets.len() != ids.len() && !enum_set {
                    let other = charset_targets(&info.columns, false, !preferred);
                    if other.len() == ids.len() {
                        targets = other;
                    }
                }
                if targets.len() != ids.len() {
                    return Err(format!(
                        "{ctx}: {} has {} collations, the table has {} {} columns",
                        if enum_set {
                            "ENUM_AND_SET_COLUMN_CHARSET"
                        } else {
                            "COLUMN_CHARSET"
                        },
                        ids.len(),
                        targets.len(),
                        if enum_set { "ENUM/SET" } else { "character" }
                    ));
                }
                for (c, id) in targets.into_iter().zip(ids) {
                    info.columns[c].charset = Some(id);
                }
            }
            om::COLUMN_NAME => {
                let mut f = Reader::new(v);
                for (i, col) in info.columns.iter_mut().enumerate() {
                    let n = f.packed(&format!("{ctx} COLUMN_NAME of column {i}"))?;
                    let b = f.need(len_usize(n), &format!("{ctx} COLUMN_NAME of column {i}"))?;
                    col.name = Some(String::from_utf8_lossy(b).into_owned());
                }
            }
            om::SIMPLE_PRIMARY_KEY | om::PRIMARY_KEY_WITH_PREFIX => {
                let mut f = Reader::new(v);
                let mut key = Vec::new();
                while f.remaining() > 0 {
                    let idx = f.packed(&format!("{ctx} primary key column"))?;
                    if t == om::PRIMARY_KEY_WITH_PREFIX {
                        f.packed(&format!("{ctx} primary key prefix length"))?;
                    }
                    if idx >= info.columns.len() as u64 {
                        return Err(format!(
                            "{ctx}: primary key names column {idx}, the table has {} columns",
                            info.columns.len()
                        ));
                    }
                    key.push(idx as u16);
                }
                pk = Some(key);
            }
            _ => {} // SET/ENUM strings, geometry type, visibility, unknown: skipped
        }
    }
    if pk.is_some() {
        info.primary_key = pk;
    }
    Ok(())
}

pub(super) fn charset_id(v: u64, ctx: &str) -> Result<u16, String> {
    u16::try_from(v).map_err(|_| format!("{ctx}: collation id {v} exceeds 65535"))
}

/// Indexes of the columns a charset field covers, in table order.
pub(super) fn charset_targets(
    columns: &[ColumnInfo],
    enum_set: bool,
    with_geometry: bool,
) -> Vec<usize> {
    columns
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            let real = real_type(c);
            if enum_set {
                is_enum_or_set(real)
            } else {
                is_character(real, with_geometry)
            }
        })
        .map(|(i, _)| i)
        .collect()
}

/// A readable type of a column for messages, e.g. `NEWDECIMAL(20,6)`,
/// `VARCHAR(40 bytes)`, `TIME(2)`.
pub fn column_type_name(col: &ColumnInfo) -> String {
    let m = col.meta;
    match col.column_type {
        ct::DECIMAL => "DECIMAL(old)".into(),
        ct::TINY => "TINYINT".into(),
        ct::SHORT => "SMALLINT".into(),
        ct::INT24 => "MEDIUMINT".into(),
        ct::LONG => "INT".into(),
        ct::LONGLONG => "BIGINT".into(),
        ct::FLOAT => "FLOAT".into(),
        ct::DOUBLE => "DOUBLE".into(),
        ct::NULL => "NULL".into(),
        ct::TIMESTAMP => "TIMESTAMP(old)".into(),
        ct::DATE | ct::NEWDATE => "DATE".into(),
        ct::TIME => "TIME(old)".into(),
        ct::DATETIME => "DATETIME(old)".into(),
        ct::YEAR => "YEAR".into(),
        ct::VARCHAR | ct::VAR_STRING => format!("VARCHAR({m} bytes)"),
        MARIADB_VARCHAR_COMPRESSED => format!("VARCHAR({m} bytes) COMPRESSED"),
        ct::BIT => format!("BIT({})", (m >> 8) * 8 + (m & 0xff)),
        ct::TIMESTAMP2 => format!("TIMESTAMP({m})"),
        ct::DATETIME2 => format!("DATETIME({m})"),
        ct::TIME2 => format!("TIME({m})"),
        ct::JSON => "JSON".into(),
        ct::NEWDECIMAL => format!("NEWDECIMAL({},{})", m >> 8, m & 0xff),
        ct::ENUM => format!("ENUM({} bytes)", m & 0xff),
        ct::SET => format!("SET({} bytes)", m & 0xff),
        ct::TINY_BLOB | ct::MEDIUM_BLOB | ct::LONG_BLOB | ct::BLOB => match m {
            1 => "TINYBLOB".into(),
            2 => "BLOB".into(),
            3 => "MEDIUMBLOB".into(),
            4 => "LONGBLOB".into(),
            _ => format!("BLOB(meta {m})"),
        },
        MARIADB_BLOB_COMPRESSED => format!("BLOB({m}-byte length) COMPRESSED"),
        MYSQL_VECTOR => "VECTOR".into(),
        ct::GEOMETRY => "GEOMETRY".into(),
        ct::STRING => match string_meta(m) {
            (ct::ENUM, n) => format!("ENUM({n} bytes)"),
            (ct::SET, n) => format!("SET({n} bytes)"),
            (ct::STRING, n) if col.charset == Some(BINARY_COLLATION) => format!("BINARY({n})"),
            (ct::STRING, n) => format!("CHAR({n} bytes)"),
            (t, _) => format!("STRING(real type {t})"),
        },
        t => format!("type {t}"),
    }
}
