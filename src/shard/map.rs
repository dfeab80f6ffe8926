//! The shard map (`shard.map`): which service masters each shard, and which
//! shards are critical (shared/DESIGN.md §5).
//!
//! # Format
//!
//! ```text
//! # comment
//! shard_id   master   critical
//! acme       sjc      false
//! pinnacle,  nyc,     FALSE
//! superior   #LOCAL   true
//! "#UNKNOWN" sjc      true
//! ```
//!
//! - Lines whose first character other than spaces and tabs is `#` are
//!   comments; lines with no fields (empty, or only spaces, tabs and
//!   commas) are blank. Both are ignored but counted in line numbers.
//! - Fields are separated by **any run** of spaces, tabs and commas;
//!   separators before the first and after the last field are ignored, so
//!   there are no empty fields except a quoted `""`.
//! - A field may be double-quoted (CSV style, `""` inside for one `"`) to
//!   hold separators or to start with `#` (`"#UNKNOWN"`, which unquoted
//!   would make the line a comment). A quote must open a field and be
//!   followed by a separator or the end of the line when it closes it.
//! - The first line that is neither comment nor blank is the header: it
//!   names the columns `shard_id`, `master` and `critical` (ASCII
//!   case-insensitively) in any order; other columns are allowed and their
//!   values ignored. A row may omit values of such extra columns but not of
//!   the three named ones, and may not have more fields than the header.
//! - `shard_id`: the schema name, compared exactly (case-sensitively, as
//!   MariaDB does on Linux with `lower_case_table_names=0`): 1 to 64
//!   characters, no control characters, not ending with a space, and not
//!   starting with `#` except the special shard `#UNKNOWN`.
//! - `master`: a service name (1 to 48 characters of `A-Z a-z 0-9 _`, as
//!   `service.name` in the configuration) or `#LOCAL` (exact spelling).
//! - `critical`: `true` or `false`, ASCII case-insensitively.
//! - Every shard id appears once.
//!
//! A load is all or nothing: any bad line rejects the whole text with
//! [`ShardMapError::Invalid`], which lists **every** problem of every line
//! as `line N: message`.
//!
//! How the text is split: the csv crate cannot split on *runs* of mixed
//! separators, so each line is first checked and normalized by this module
//! (quote structure checked, each run of separators outside quotes turned
//! into one comma, leading and trailing runs dropped) and the normalized
//! line is then read as one CSV record by the csv crate, which undoes the
//! quoting. A quoted field cannot span lines.
//!
//! # Writing
//!
//! [`ShardMap::to_text`] writes the header `shard_id master critical` and
//! one aligned row per shard in shard id order, quoting only the fields
//! that need it; [`ShardMap::parse`] reads it back to an equal map.
//!
//! # Live edits
//!
//! [`ShardMap::insert`], [`ShardMap::update`], [`ShardMap::delete`] and
//! [`ShardMap::delete_all`] edit one map in memory;
//! [`ShardMap::insert_text`] and [`ShardMap::update_text`] apply a text in
//! the same format (for `shardrepctl shard insert|update` reading CSV from
//! stdin), all rows or none. Persisting the map is the caller's job.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::{LineProblem, ProblemLines};
use crate::config::{is_service_name, SERVICE_NAME_MAX_CHARS};
use crate::event::UNKNOWN_SHARD;

/// The `master` value of a shard never replicated out of the service where
/// it is written.
pub const LOCAL_MASTER: &str = "#LOCAL";

/// Longest shard id, in characters (MariaDB's identifier limit).
pub const SHARD_ID_MAX_CHARS: usize = 64;

/// The column names a header must contain.
const COLUMNS: [&str; 3] = ["shard_id", "master", "critical"];

/// Who masters a shard (the `master` column).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Master {
    /// The service whose master takes this shard's writes.
    Service(String),
    /// `#LOCAL`: written where it is, never replicated out of the service
    /// where it is written.
    Local,
}

impl Master {
    /// Parses `#LOCAL` or a service name.
    ///
    /// # Errors
    /// A message naming the text when it is neither.
    pub fn parse(text: &str) -> Result<Master, String> {
        if text == LOCAL_MASTER {
            return Ok(Master::Local);
        }
        check_service_name(text).map_err(|_| {
            format!(
                "master {text:?} is not {LOCAL_MASTER} or a service name \
                 (1 to {SERVICE_NAME_MAX_CHARS} characters of A-Z, a-z, 0-9 and _)"
            )
        })?;
        Ok(Master::Service(text.to_string()))
    }

    /// The text as written in `shard.map`: the service name or `#LOCAL`.
    pub fn as_str(&self) -> &str {
        match self {
            Master::Service(name) => name,
            Master::Local => LOCAL_MASTER,
        }
    }

    /// Whether this is the service `name`.
    pub fn is_service(&self, name: &str) -> bool {
        matches!(self, Master::Service(s) if s == name)
    }
}

impl fmt::Display for Master {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of the shard map.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardEntry {
    /// The shard (schema name), or `#UNKNOWN`.
    pub shard_id: String,
    /// Who masters it.
    pub master: Master,
    /// Whether its transactions run alone (all channels drained first).
    /// `#UNKNOWN` is critical whatever this says.
    pub critical: bool,
}

impl ShardEntry {
    /// A checked entry.
    ///
    /// # Errors
    /// The message of [`check_shard_id`] when the id is not valid.
    pub fn new(
        shard_id: impl Into<String>,
        master: Master,
        critical: bool,
    ) -> Result<Self, String> {
        let entry = ShardEntry {
            shard_id: shard_id.into(),
            master,
            critical,
        };
        entry.validate()?;
        Ok(entry)
    }

    /// Checks the shard id ([`check_shard_id`]) and the master's name
    /// ([`check_service_name`]); entries built field by field are checked
    /// by the edit operations of [`ShardMap`].
    ///
    /// # Errors
    /// What is wrong, naming the value.
    pub fn validate(&self) -> Result<(), String> {
        check_shard_id(&self.shard_id)?;
        if let Master::Service(name) = &self.master {
            Master::parse(name)?;
        }
        Ok(())
    }
}

/// Checks a shard id: 1 to 64 characters, no control characters, not
/// ending with a space, not starting with `#` unless it is `#UNKNOWN`.
///
/// # Errors
/// What is wrong, naming the id.
pub fn check_shard_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("empty shard id".into());
    }
    if id == UNKNOWN_SHARD {
        return Ok(());
    }
    if id.chars().count() > SHARD_ID_MAX_CHARS {
        return Err(format!(
            "shard id {id:?} is longer than {SHARD_ID_MAX_CHARS} characters"
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(format!("shard id {id:?} contains a control character"));
    }
    if id.ends_with(' ') {
        return Err(format!("shard id {id:?} ends with a space"));
    }
    if id.starts_with('#') {
        return Err(format!(
            "shard id {id:?} starts with '#' (only {UNKNOWN_SHARD} may)"
        ));
    }
    Ok(())
}

/// Checks a service name: 1 to 48 characters of `A-Z a-z 0-9 _` (the rule
/// of `service.name` in the configuration).
///
/// # Errors
/// What is wrong, naming the name.
pub fn check_service_name(name: &str) -> Result<(), String> {
    if is_service_name(name) {
        Ok(())
    } else {
        Err(format!(
            "service name {name:?} is not 1 to {SERVICE_NAME_MAX_CHARS} characters of A-Z, a-z, 0-9 and _"
        ))
    }
}

/// Why a shard map text could not be loaded or applied.
#[derive(Debug, thiserror::Error)]
pub enum ShardMapError {
    /// The file could not be read.
    #[error("{}: cannot read shard map: {cause}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// The text has bad lines; nothing was loaded or changed. Displays as
    /// `ORIGIN: invalid shard map:` followed by one `\n  line N: message`
    /// per problem, in line order.
    #[error("{origin}: invalid shard map:{}", ProblemLines(problems))]
    Invalid {
        /// Where the text came from (a file name, `stdin`, ...).
        origin: String,
        /// Every problem found, in line order.
        problems: Vec<LineProblem>,
    },
}

/// Why a live edit of one entry was refused; the map is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardEditError {
    /// `insert` of a shard already in the map.
    #[error("shard {0:?} already exists")]
    Exists(String),
    /// `update` or `delete` of a shard not in the map.
    #[error("no shard {0:?} in the shard map")]
    NotFound(String),
    /// The entry itself is not valid ([`ShardEntry::validate`]).
    #[error("{0}")]
    Invalid(String),
}

/// A parsed row with the line it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedEntry {
    /// 1-based line number.
    pub line: usize,
    /// The row.
    pub entry: ShardEntry,
}

/// The shard map: shard id → [`ShardEntry`], kept in shard id order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardMap {
    entries: BTreeMap<String, ShardEntry>,
}

impl ShardMap {
    /// An empty map.
    pub fn new() -> Self {
        ShardMap::default()
    }

    /// Reads and parses a `shard.map` file (format in the module doc).
    ///
    /// # Errors
    /// [`ShardMapError::Read`] when the file cannot be read (or is not
    /// UTF-8); [`ShardMapError::Invalid`] naming the file and listing every
    /// bad line.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ShardMapError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ShardMapError::Read {
            file: path.to_path_buf(),
            cause: source,
        })?;
        ShardMap::parse(&text, &path.display().to_string())
    }

    /// Parses a shard map text (format in the module doc); `origin` names
    /// the text in errors.
    ///
    /// # Errors
    /// [`ShardMapError::Invalid`] listing every bad line.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ShardMapError> {
        let rows = parse_entries(text, origin)?;
        Ok(ShardMap {
            entries: rows
                .into_iter()
                .map(|r| (r.entry.shard_id.clone(), r.entry))
                .collect(),
        })
    }

    /// The entry of `shard_id`.
    pub fn get(&self, shard_id: &str) -> Option<&ShardEntry> {
        self.entries.get(shard_id)
    }

    /// Whether `shard_id` is in the map.
    pub fn contains(&self, shard_id: &str) -> bool {
        self.entries.contains_key(shard_id)
    }

    /// Number of shards.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map has no shards.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries in shard id order.
    pub fn iter(&self) -> impl Iterator<Item = &ShardEntry> {
        self.entries.values()
    }

    /// Whether the map marks `shard_id` critical (its `critical` column).
    /// `#UNKNOWN` is always critical, whatever the map says; see
    /// [`ChannelAssignment::is_critical`](super::ChannelAssignment::is_critical)
    /// for the complete rule.
    pub fn is_critical(&self, shard_id: &str) -> bool {
        shard_id == UNKNOWN_SHARD || self.get(shard_id).is_some_and(|e| e.critical)
    }

    /// The map as `shard.map` text: the header `shard_id master critical`,
    /// then one row per shard in shard id order, columns aligned with
    /// spaces; a field is double-quoted only when it is empty, holds a
    /// space, tab, comma or `"`, or is a shard id starting with `#`.
    /// [`ShardMap::parse`] reads it back to an equal map.
    pub fn to_text(&self) -> String {
        let rows: Vec<[String; 3]> = self
            .entries
            .values()
            .map(|e| {
                [
                    quote_field(&e.shard_id, true),
                    quote_field(e.master.as_str(), false),
                    e.critical.to_string(),
                ]
            })
            .collect();
        let mut widths = COLUMNS.map(|c| c.len());
        for row in &rows {
            for (w, field) in widths.iter_mut().zip(row) {
                *w = (*w).max(field.chars().count());
            }
        }
        let mut out = String::new();
        let mut line = |fields: [&str; 3]| {
            let mut text = String::new();
            for (i, field) in fields.iter().enumerate() {
                text.push_str(field);
                if i + 1 < fields.len() {
                    let pad = widths[i] - field.chars().count() + 2;
                    text.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(&text);
            out.push('\n');
        };
        line(COLUMNS);
        for row in &rows {
            line([&row[0], &row[1], &row[2]]);
        }
        out
    }

    /// Adds a shard.
    ///
    /// # Errors
    /// [`ShardEditError::Invalid`] for a bad entry,
    /// [`ShardEditError::Exists`] when the shard is already in the map.
    pub fn insert(&mut self, entry: ShardEntry) -> Result<(), ShardEditError> {
        entry.validate().map_err(ShardEditError::Invalid)?;
        match self.entries.entry(entry.shard_id.clone()) {
            Entry::Occupied(_) => Err(ShardEditError::Exists(entry.shard_id)),
            Entry::Vacant(v) => {
                v.insert(entry);
                Ok(())
            }
        }
    }

    /// Replaces the entry of an existing shard; returns the old one.
    ///
    /// # Errors
    /// [`ShardEditError::Invalid`] for a bad entry,
    /// [`ShardEditError::NotFound`] when the shard is not in the map.
    pub fn update(&mut self, entry: ShardEntry) -> Result<ShardEntry, ShardEditError> {
        entry.validate().map_err(ShardEditError::Invalid)?;
        match self.entries.get_mut(&entry.shard_id) {
            Some(old) => Ok(std::mem::replace(old, entry)),
            None => Err(ShardEditError::NotFound(entry.shard_id)),
        }
    }

    /// Removes a shard; returns its entry.
    ///
    /// # Errors
    /// [`ShardEditError::NotFound`] when the shard is not in the map.
    pub fn delete(&mut self, shard_id: &str) -> Result<ShardEntry, ShardEditError> {
        self.entries
            .remove(shard_id)
            .ok_or_else(|| ShardEditError::NotFound(shard_id.to_string()))
    }

    /// Removes every shard; returns how many there were.
    pub fn delete_all(&mut self) -> usize {
        let n = self.entries.len();
        self.entries.clear();
        n
    }

    /// Inserts every row of a shard map text (same format as `shard.map`,
    /// header included): all rows or none. Returns the number inserted.
    ///
    /// # Errors
    /// [`ShardMapError::Invalid`] listing every bad line, including
    /// `line N: shard "x" already exists` for rows already in the map.
    pub fn insert_text(&mut self, text: &str, origin: &str) -> Result<usize, ShardMapError> {
        let rows = parse_entries(text, origin)?;
        let problems: Vec<LineProblem> = rows
            .iter()
            .filter(|r| self.contains(&r.entry.shard_id))
            .map(|r| {
                LineProblem::new(
                    r.line,
                    ShardEditError::Exists(r.entry.shard_id.clone()).to_string(),
                )
            })
            .collect();
        if !problems.is_empty() {
            return Err(ShardMapError::Invalid {
                origin: origin.to_string(),
                problems,
            });
        }
        let n = rows.len();
        for r in rows {
            self.entries.insert(r.entry.shard_id.clone(), r.entry);
        }
        Ok(n)
    }

    /// Replaces the entries of the shards named in a shard map text (same
    /// format, header included): all rows or none. Returns the number
    /// updated.
    ///
    /// # Errors
    /// [`ShardMapError::Invalid`] listing every bad line, including
    /// `line N: no shard "x" in the shard map` for rows not in the map.
    pub fn update_text(&mut self, text: &str, origin: &str) -> Result<usize, ShardMapError> {
        let rows = parse_entries(text, origin)?;
        let problems: Vec<LineProblem> = rows
            .iter()
            .filter(|r| !self.contains(&r.entry.shard_id))
            .map(|r| {
                LineProblem::new(
                    r.line,
                    ShardEditError::NotFound(r.entry.shard_id.clone()).to_string(),
                )
            })
            .collect();
        if !problems.is_empty() {
            return Err(ShardMapError::Invalid {
                origin: origin.to_string(),
                problems,
            });
        }
        let n = rows.len();
        for r in rows {
            self.entries.insert(r.entry.shard_id.clone(), r.entry);
        }
        Ok(n)
    }
}

impl fmt::Display for ShardMap {
    /// The [`ShardMap::to_text`] form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

/// Parses a shard map text into its rows, in line order, with their line
/// numbers (format in the module doc; duplicates within the text are
/// errors).
///
/// # Errors
/// [`ShardMapError::Invalid`] listing every bad line.
pub fn parse_entries(text: &str, origin: &str) -> Result<Vec<ParsedEntry>, ShardMapError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut problems = Vec::new();
    let mut columns: Option<Columns> = None;
    let mut rows = Vec::new();
    let mut first_line: BTreeMap<String, usize> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim_start_matches([' ', '\t']).starts_with('#') {
            continue;
        }
        let fields = match split_fields(raw) {
            Ok(fields) => fields,
            Err(message) => {
                problems.push(LineProblem::new(line, message));
                continue;
            }
        };
        if fields.is_empty() {
            continue;
        }
        let Some(cols) = &columns else {
            match Columns::from_header(&fields) {
                Ok(c) => columns = Some(c),
                Err(message) => {
                    // Without a header no row can be read.
                    problems.push(LineProblem::new(line, message));
                    return Err(ShardMapError::Invalid {
                        origin: origin.to_string(),
                        problems,
                    });
                }
            }
            continue;
        };
        let before = problems.len();
        let entry = cols.row(&fields, line, &mut problems);
        if let Some(id) = entry.as_ref().map(|e| e.shard_id.clone()).or_else(|| {
            fields
                .get(cols.shard_id)
                .filter(|id| check_shard_id(id).is_ok())
                .cloned()
        }) {
            match first_line.entry(id) {
                Entry::Occupied(o) => problems.push(LineProblem::new(
                    line,
                    format!(
                        "duplicate shard id {:?} (first on line {})",
                        o.key(),
                        o.get()
                    ),
                )),
                Entry::Vacant(v) => {
                    v.insert(line);
                }
            }
        }
        if problems.len() == before {
            if let Some(entry) = entry {
                rows.push(ParsedEntry { line, entry });
            }
        }
    }
    if columns.is_none() && problems.is_empty() {
        problems.push(LineProblem::new(
            text.lines().count().max(1),
            "no header line (expected one naming shard_id, master and critical)",
        ));
    }
    if problems.is_empty() {
        Ok(rows)
    } else {
        Err(ShardMapError::Invalid {
            origin: origin.to_string(),
            problems,
        })
    }
}

/// Positions of the named columns in the header.
#[derive(Debug, Clone, Copy)]
struct Columns {
    shard_id: usize,
    master: usize,
    critical: usize,
    count: usize,
}

impl Columns {
    fn from_header(fields: &[String]) -> Result<Columns, String> {
        let mut found: [Option<usize>; 3] = [None; 3];
        for (i, field) in fields.iter().enumerate() {
            for (slot, name) in found.iter_mut().zip(COLUMNS) {
                if field.eq_ignore_ascii_case(name) {
                    if slot.is_some() {
                        return Err(format!("column {name} named twice in the header"));
                    }
                    *slot = Some(i);
                }
            }
        }
        match found {
            [Some(shard_id), Some(master), Some(critical)] => Ok(Columns {
                shard_id,
                master,
                critical,
                count: fields.len(),
            }),
            [None, None, None] => Err(format!(
                "expected a header naming shard_id, master and critical, found {:?}",
                fields.join(" ")
            )),
            _ => {
                let missing: Vec<&str> = found
                    .iter()
                    .zip(COLUMNS)
                    .filter(|(f, _)| f.is_none())
                    .map(|(_, name)| name)
                    .collect();
                Err(format!("the header does not name {}", missing.join(", ")))
            }
        }
    }

    /// Checks one row, pushing its problems; the entry when it has none.
    fn row(
        &self,
        fields: &[String],
        line: usize,
        problems: &mut Vec<LineProblem>,
    ) -> Option<ShardEntry> {
        let before = problems.len();
        if fields.len() > self.count {
            problems.push(LineProblem::new(
                line,
                format!(
                    "{} fields, but the header names {} columns",
                    fields.len(),
                    self.count
                ),
            ));
        }
        let missing: Vec<&str> = [self.shard_id, self.master, self.critical]
            .iter()
            .zip(COLUMNS)
            .filter(|(i, _)| **i >= fields.len())
            .map(|(_, name)| name)
            .collect();
        if !missing.is_empty() {
            problems.push(LineProblem::new(
                line,
                format!("missing {}", missing.join(", ")),
            ));
        }
        let shard_id = fields.get(self.shard_id);
        if let Some(Err(m)) = shard_id.map(|id| check_shard_id(id)) {
            problems.push(LineProblem::new(line, m));
        }
        let master = fields.get(self.master).map(|m| Master::parse(m));
        if let Some(Err(m)) = &master {
            problems.push(LineProblem::new(line, m.clone()));
        }
        let critical = fields.get(self.critical).map(|c| parse_bool(c));
        if let Some(Err(m)) = &critical {
            problems.push(LineProblem::new(line, m.clone()));
        }
        if problems.len() != before {
            return None;
        }
        Some(ShardEntry {
            shard_id: shard_id?.clone(),
            master: master?.ok()?,
            critical: critical?.ok()?,
        })
    }
}

fn parse_bool(text: &str) -> Result<bool, String> {
    if text.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if text.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(format!("critical {text:?} is not true or false"))
    }
}

fn is_separator(c: char) -> bool {
    matches!(c, ' ' | '\t' | ',')
}

/// Splits one line into its fields: [`normalize_line`], then one CSV
/// record read by the csv crate.
fn split_fields(line: &str) -> Result<Vec<String>, String> {
    let normalized = normalize_line(line)?;
    if normalized.is_empty() {
        return Ok(Vec::new());
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(normalized.as_bytes());
    let mut record = csv::StringRecord::new();
    match reader.read_record(&mut record) {
        Ok(true) => Ok(record.iter().map(str::to_string).collect()),
        Ok(false) => Ok(Vec::new()),
        Err(e) => Err(format!("cannot read the fields: {e}")),
    }
}

/// Checks the quoting of a line and turns each run of separators (spaces,
/// tabs, commas) outside quotes into one comma, dropping leading and
/// trailing runs: the result is one CSV record.
fn normalize_line(line: &str) -> Result<String, String> {
    #[derive(PartialEq)]
    enum State {
        Between,
        Unquoted,
        Quoted,
        AfterQuote,
    }
    let mut out = String::with_capacity(line.len());
    let mut state = State::Between;
    let mut fields = 0usize;
    for c in line.chars() {
        match state {
            State::Between => {
                if is_separator(c) {
                    continue;
                }
                if fields > 0 {
                    out.push(',');
                }
                fields += 1;
                out.push(c);
                state = if c == '"' {
                    State::Quoted
                } else {
                    State::Unquoted
                };
            }
            State::Unquoted => {
                if is_separator(c) {
                    state = State::Between;
                } else if c == '"' {
                    return Err(format!("double quote inside unquoted field {fields}"));
                } else {
                    out.push(c);
                }
            }
            State::Quoted => {
                out.push(c);
                if c == '"' {
                    state = State::AfterQuote;
                }
            }
            State::AfterQuote => {
                if c == '"' {
                    // A doubled quote: one literal quote, still quoted.
                    out.push(c);
                    state = State::Quoted;
                } else if is_separator(c) {
                    state = State::Between;
                } else {
                    return Err(format!("text after the closing quote of field {fields}"));
                }
            }
        }
    }
    if state == State::Quoted {
        return Err(format!("unterminated double quote in field {fields}"));
    }
    Ok(out)
}

/// Quotes a field for [`ShardMap::to_text`] when it would not read back
/// as itself unquoted.
fn quote_field(field: &str, first: bool) -> String {
    let needs = field.is_empty()
        || field.chars().any(|c| is_separator(c) || c == '"')
        || (first && field.starts_with('#'));
    if needs {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, master: &str, critical: bool) -> ShardEntry {
        ShardEntry::new(id, Master::parse(master).unwrap(), critical).unwrap()
    }

    fn err(text: &str) -> String {
        ShardMap::parse(text, "test.map").unwrap_err().to_string()
    }

    #[test]
    fn repo_shard_map_parses() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/shard.map");
        let map = ShardMap::load(path).unwrap();
        let got: Vec<ShardEntry> = map.iter().cloned().collect();
        assert_eq!(
            got,
            vec![
                entry("acme", "sjc", false),
                entry("billing", "sjc", true),
                entry("pinnacle", "nyc", false),
                entry("superior", "#LOCAL", false),
            ]
        );
        assert_eq!(map.get("superior").unwrap().master, Master::Local);
        assert!(map.is_critical("billing"));
        assert!(!map.is_critical("acme"));
        assert!(map.is_critical(UNKNOWN_SHARD));
        assert!(!map.is_critical("absent"));
    }

    #[test]
    fn any_run_of_separators_and_any_column_order() {
        let text = "\u{feff}# comment\n\n  ,\t \ncritical,,master\tnotes shard_id\n\
                    TRUE ,\t sjc,  x  acme\n  false nyc \"two words\" \"p, q\"\n\
                    \t# indented comment\nFalse #LOCAL \"\" \"#UNKNOWN\"\n";
        let map = ShardMap::parse(text, "t").unwrap();
        assert_eq!(map.len(), 3);
        assert_eq!(map.get("acme"), Some(&entry("acme", "sjc", true)));
        assert_eq!(map.get("p, q"), Some(&entry("p, q", "nyc", false)));
        assert_eq!(
            map.get(UNKNOWN_SHARD),
            Some(&entry(UNKNOWN_SHARD, "#LOCAL", false))
        );
    }

    #[test]
    fn extra_columns_may_be_omitted_in_rows() {
        let map = ShardMap::parse("shard_id master critical notes\na b true\n", "t").unwrap();
        assert_eq!(map.get("a"), Some(&entry("a", "b", true)));
    }

    #[test]
    fn every_bad_line_is_listed() {
        let text = "shard_id master critical\n\
                    acme sjc false\n\
                    acme nyc false\n\
                    bad-master! x\n\
                    ok nyc yes\n\
                    #comment\n\
                    a b c d\n\
                    \"#x\" sjc true\n\
                    q \"unterminated\n\
                    r s\"t true\n";
        assert_eq!(
            err(text),
            "test.map: invalid shard map:\n  \
             line 3: duplicate shard id \"acme\" (first on line 2)\n  \
             line 4: missing critical\n  \
             line 5: critical \"yes\" is not true or false\n  \
             line 7: 4 fields, but the header names 3 columns\n  \
             line 7: critical \"c\" is not true or false\n  \
             line 8: shard id \"#x\" starts with '#' (only #UNKNOWN may)\n  \
             line 9: unterminated double quote in field 2\n  \
             line 10: double quote inside unquoted field 2"
        );
    }

    #[test]
    fn header_problems() {
        assert_eq!(
            err("# only\nacme sjc false\n"),
            "test.map: invalid shard map:\n  line 2: expected a header naming shard_id, master and critical, found \"acme sjc false\""
        );
        assert_eq!(
            err("shard_id master\n"),
            "test.map: invalid shard map:\n  line 1: the header does not name critical"
        );
        assert_eq!(
            err("shard_id MASTER master critical\n"),
            "test.map: invalid shard map:\n  line 1: column master named twice in the header"
        );
        assert_eq!(
            err("# nothing\n\n"),
            "test.map: invalid shard map:\n  line 2: no header line (expected one naming shard_id, master and critical)"
        );
        assert_eq!(
            err(""),
            "test.map: invalid shard map:\n  line 1: no header line (expected one naming shard_id, master and critical)"
        );
    }

    #[test]
    fn header_only_is_an_empty_map() {
        assert!(ShardMap::parse("Shard_ID Master CRITICAL\n", "t")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn ids_and_masters_are_checked() {
        let long = "x".repeat(65);
        let text = format!(
            "shard_id master critical\n{long} a true\n\"a \" a true\n\"\" a true\nb #local true\nc {} true\nd svc-1 true\n",
            "m".repeat(49)
        );
        let master_msg = |m: &str| {
            format!("master {m:?} is not #LOCAL or a service name (1 to 48 characters of A-Z, a-z, 0-9 and _)")
        };
        assert_eq!(
            err(&text),
            format!(
                "test.map: invalid shard map:\n  \
                 line 2: shard id \"{long}\" is longer than 64 characters\n  \
                 line 3: shard id \"a \" ends with a space\n  \
                 line 4: empty shard id\n  \
                 line 5: {}\n  \
                 line 6: {}\n  \
                 line 7: {}",
                master_msg("#local"),
                master_msg(&"m".repeat(49)),
                master_msg("svc-1")
            )
        );
    }

    #[test]
    fn written_text_round_trips() {
        let mut map = ShardMap::new();
        for e in [
            entry("acme", "sjc", false),
            entry("two words", "nyc", true),
            entry("q\"uote,comma", "#LOCAL", false),
            entry(UNKNOWN_SHARD, "sjc", true),
            entry("ünïcødé", "a_1", true),
        ] {
            map.insert(e).unwrap();
        }
        let text = map.to_text();
        assert_eq!(
            text,
            "shard_id         master  critical\n\
             \"#UNKNOWN\"       sjc     true\n\
             acme             sjc     false\n\
             \"q\"\"uote,comma\"  #LOCAL  false\n\
             \"two words\"      nyc     true\n\
             ünïcødé          a_1     true\n"
        );
        assert_eq!(ShardMap::parse(&text, "t").unwrap(), map);
        assert_eq!(
            ShardMap::parse(&ShardMap::new().to_text(), "t").unwrap(),
            ShardMap::new()
        );
    }

    proptest::proptest! {
        #[test]
        fn any_valid_map_round_trips(
            rows in proptest::collection::vec(
                (
                    proptest::prelude::any::<String>(),
                    proptest::option::of("[A-Za-z0-9_]{1,48}"),
                    proptest::prelude::any::<bool>(),
                ),
                0..20,
            )
        ) {
            let mut map = ShardMap::new();
            for (id, master, critical) in rows {
                let id: String = id.chars().take(SHARD_ID_MAX_CHARS).collect();
                let master = master.map_or(Master::Local, Master::Service);
                if let Ok(e) = ShardEntry::new(id, master, critical) {
                    let _ = map.insert(e);
                }
            }
            let text = map.to_text();
            proptest::prop_assert_eq!(ShardMap::parse(&text, "t").unwrap(), map);
        }
    }

    #[test]
    fn repo_shard_map_round_trips() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/shard.map");
        let map = ShardMap::load(path).unwrap();
        assert_eq!(ShardMap::parse(&map.to_string(), "t").unwrap(), map);
    }

    #[test]
    fn single_edits() {
        let mut map = ShardMap::new();
        map.insert(entry("a", "sjc", false)).unwrap();
        assert_eq!(
            map.insert(entry("a", "nyc", false)),
            Err(ShardEditError::Exists("a".into()))
        );
        assert_eq!(
            map.update(entry("a", "nyc", true)),
            Ok(entry("a", "sjc", false))
        );
        assert_eq!(map.get("a"), Some(&entry("a", "nyc", true)));
        assert_eq!(
            map.update(entry("b", "nyc", true)),
            Err(ShardEditError::NotFound("b".into()))
        );
        let bad = ShardEntry {
            shard_id: "#bad".into(),
            master: Master::Service("x y".into()),
            critical: false,
        };
        assert_eq!(
            map.insert(bad.clone()),
            Err(ShardEditError::Invalid(
                "shard id \"#bad\" starts with '#' (only #UNKNOWN may)".into()
            ))
        );
        assert!(map.update(bad).is_err());
        assert_eq!(map.delete("b"), Err(ShardEditError::NotFound("b".into())));
        assert_eq!(map.delete("a"), Ok(entry("a", "nyc", true)));
        map.insert(entry("a", "sjc", false)).unwrap();
        map.insert(entry("b", "sjc", false)).unwrap();
        assert_eq!(map.delete_all(), 2);
        assert!(map.is_empty());
        assert_eq!(
            ShardEditError::NotFound("b".into()).to_string(),
            "no shard \"b\" in the shard map"
        );
    }

    #[test]
    fn text_edits_are_all_or_nothing() {
        let mut map = ShardMap::parse("shard_id master critical\na sjc false\n", "t").unwrap();
        let before = map.clone();
        let e = map
            .insert_text(
                "shard_id master critical\nb nyc false\na nyc true\n",
                "stdin",
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "stdin: invalid shard map:\n  line 3: shard \"a\" already exists"
        );
        assert_eq!(map, before);
        assert_eq!(
            map.insert_text(
                "master,critical,shard_id\nnyc,false,b\nnyc,true,c\n",
                "stdin"
            )
            .unwrap(),
            2
        );
        assert_eq!(map.len(), 3);
        let e = map
            .update_text(
                "shard_id master critical\nb sjc true\nz sjc true\ny sjc true\n",
                "stdin",
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "stdin: invalid shard map:\n  line 3: no shard \"z\" in the shard map\n  line 4: no shard \"y\" in the shard map"
        );
        assert_eq!(map.get("b"), Some(&entry("b", "nyc", false)));
        assert_eq!(
            map.update_text("shard_id master critical\nb sjc true\n", "stdin")
                .unwrap(),
            1
        );
        assert_eq!(map.get("b"), Some(&entry("b", "sjc", true)));
        // Bad rows in an edit text are reported like a load's.
        let e = map
            .insert_text("shard_id master critical\nd sjc maybe\n", "stdin")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "stdin: invalid shard map:\n  line 2: critical \"maybe\" is not true or false"
        );
    }
}
