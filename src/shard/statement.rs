//! The shard of a statement (a Query event): the one schema it touches, or
//! none (`#UNKNOWN`) (shared/DESIGN.md §2; cases/B18).
//!
//! # The rule
//!
//! [`statement_shard`] parses the statement with sqlparser's
//! `MySqlDialect` and collects the schemas it names:
//!
//! - every **table name** in a table position (INSERT/REPLACE target,
//!   UPDATE and DELETE tables, FROM and JOIN tables, subqueries, CREATE/
//!   ALTER/DROP/RENAME/TRUNCATE TABLE, CREATE INDEX ... ON, CREATE VIEW and
//!   its query, `LIKE` and `REFERENCES` tables, sequences): `db.t` names
//!   schema `db`; an unqualified `t` names the statement's **default
//!   schema** (the `USE` database the master logged with it);
//! - in expressions: `db.t.col` names `db`, a schema-qualified function
//!   call `db.f(...)` names `db`; `t.col` is a column and names nothing.
//!
//! Then:
//!
//! 1. `CREATE DATABASE|SCHEMA x`, `DROP DATABASE|SCHEMA x` and
//!    `ALTER DATABASE|SCHEMA x ...` give `x`, whatever the default schema
//!    (`ALTER DATABASE` without a name gives the default schema).
//! 2. **Statement-format DML** (INSERT, REPLACE, UPDATE, DELETE) always
//!    counts its default schema as touched, even when every name is
//!    qualified: the master logged it under that default schema
//!    (statement-format filtering keys on it), and what the statement does
//!    can depend on it (unqualified stored functions, triggers, views,
//!    `DATABASE()`). So `USE q1; INSERT INTO a ...` gives `q1`, while
//!    `USE q1; UPDATE q2.b ...` names `q1` and `q2` and gives `#UNKNOWN`:
//!    a default schema that is not the changed schema is serialized
//!    (cases/B18, "shard unknown → serialize"). Without a default schema,
//!    `INSERT INTO q2.b ...` gives `q2`.
//! 3. Other statements (DDL) count the default schema only when they name
//!    an unqualified table: `USE q1; ALTER TABLE q2.t ...` gives `q2`.
//! 4. Exactly one schema gives it; none, two or more give `None`
//!    (`#UNKNOWN`). So does an unqualified name with no default schema.
//! 5. `None` as well, conservatively, for: SQL that does not parse (with
//!    sqlparser 0.64 e.g. `LOAD DATA`, triggers, procedures, `ALTER TABLE
//!    ... ENGINE=`, partition clauses in `/*!50100 ... */`), more than one
//!    statement, statements of other kinds (GRANT, SET, CALL, ...), a
//!    MariaDB executable comment `/*M!...*/` (sqlparser would skip its
//!    text), dialect features that may hide a table (table functions,
//!    `SELECT ... INTO`, system-versioned `FOR SYSTEM_TIME`, ...), and an
//!    expression holding a subquery *outside* a FROM/JOIN position
//!    (`WHERE x IN (SELECT ...)`, `SET v = (SELECT ...)`). A name that is
//!    not valid UTF-8 (the SQL is read lossily) also gives `None`.
//!
//! [`leading_verb`] reads only a statement's first word, cheaply, for the
//! one decision of "is this DDL" that the channel (does it commit
//! implicitly) and the foreign-key routing (may it define something)
//! share; [`names_its_database`] tells the channel that a statement names
//! its own database.
//!
//! Names are compared exactly, as MariaDB does on Linux
//! (`lower_case_table_names=0`); backquoted names are unquoted (a doubled
//! backquote is one backquote).
//!
//! Being conservative is always safe: `#UNKNOWN` is critical, so such a
//! statement runs alone with every channel drained.
//!
//! # How expressions are read
//!
//! The statement's structure (statement kinds, queries, FROM/JOIN lists) is
//! walked on sqlparser's AST. Expressions and clauses that hold no table
//! position (assignments, WHERE, column definitions, constraints, ALTER
//! operations, ORDER BY, ...) are printed back as SQL by sqlparser and
//! their tokens scanned: a `SELECT` keyword gives `None` (a subquery); a
//! dotted name of three parts names its first part as a schema; a dotted
//! name of two parts names a schema when a `(` follows (a function call or
//! a `REFERENCES db.t(...)` key) or when it follows `REFERENCES`, `TABLE`,
//! `LIKE`, `INTO`, `UPDATE`, `TO`, `TABLES`,
//! `NEXTVAL(`/`LASTVAL(`/`SETVAL(` or `VALUE FOR`; a one-part name after
//! `REFERENCES`, `TABLE`, `LIKE` or in those sequence forms names the
//! default schema.

use std::collections::BTreeSet;

use sqlparser::ast::{AlterTable, AlterTableOperation, Distinct};
use sqlparser::ast::{
    Assignment, AssignmentTarget, CreateIndex, CreateTable, CreateTableLikeKind, CreateView,
    Delete, Expr, FromTable, Insert, JoinConstraint, JoinOperator, ObjectName, ObjectType,
    OnInsert, Query, RenameTableNameKind, SchemaName, Select, SelectFlavor, SelectItem, SetExpr,
    Statement, TableFactor, TableObject, TableWithJoins, Update, UpdateTableFromKind,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer, Whitespace, Word};

/// The shard of one statement: the single schema it touches, or `None`
/// (the transaction is then `#UNKNOWN`). `sql` is the statement as the
/// master logged it (read as UTF-8, lossily); `default_schema` the `USE`
/// database it ran with. Rules in the module doc.
pub fn statement_shard(sql: &[u8], default_schema: Option<&str>) -> Option<String> {
    let text = String::from_utf8_lossy(sql);
    let default_schema = default_schema.filter(|d| !d.is_empty());
    let dialect = MySqlDialect {};
    let tokens = Tokenizer::new(&dialect, &text).tokenize().ok()?;
    if tokens.iter().any(is_mariadb_executable_comment) {
        return None;
    }
    let statements = match Parser::new(&dialect)
        .with_tokens(tokens.clone())
        .parse_statements()
    {
        Ok(statements) => statements,
        Err(_) => return alter_database_target(&tokens, default_schema),
    };
    let [statement] = statements.as_slice() else {
        return None;
    };
    let mut refs = Refs::default();
    let kind = refs.statement(statement)?;
    let mut schemas = match kind {
        Kind::Database(name) => return valid_name(name),
        Kind::Dml | Kind::Ddl => refs.schemas,
    };
    if refs.unqualified || kind == Kind::Dml {
        match default_schema {
            Some(d) => {
                schemas.insert(d.to_string());
            }
            None if refs.unqualified => return None,
            None => {}
        }
    }
    if schemas.len() == 1 {
        schemas.into_iter().next().and_then(valid_name)
    } else {
        None
    }
}

/// Whether `sql` is a transaction-control statement that touches no
/// schema and so does not count for the transaction's shard: `ROLLBACK`
/// (any form, including `ROLLBACK TO SAVEPOINT x`), `COMMIT`, `SAVEPOINT x`,
/// `RELEASE SAVEPOINT x` (ASCII case-insensitive, comments allowed).
pub fn is_transaction_control(sql: &[u8]) -> bool {
    if sql.eq_ignore_ascii_case(b"ROLLBACK") || sql.eq_ignore_ascii_case(b"COMMIT") {
        return true;
    }
    let text = String::from_utf8_lossy(sql);
    let Ok(tokens) = Tokenizer::new(&MySqlDialect {}, &text).tokenize() else {
        return false;
    };
    let mut words = tokens.iter().filter(|t| !matches!(t, Token::Whitespace(_)));
    let keyword = |t: Option<&Token>| match t {
        Some(Token::Word(w)) if w.quote_style.is_none() => w.keyword,
        _ => Keyword::NoKeyword,
    };
    match keyword(words.next()) {
        Keyword::ROLLBACK | Keyword::COMMIT | Keyword::SAVEPOINT => true,
        Keyword::RELEASE => keyword(words.next()) == Keyword::SAVEPOINT,
        _ => false,
    }
}

/// The first word of a logged statement, for the decisions that need only
/// that, per transaction and so cheaply (no parse): whether it commits
/// implicitly ([`Verb::commits_implicitly`], the channel) and whether it
/// may change a table definition ([`Verb::defines_nothing`], the foreign-key
/// routing). See [`leading_verb`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// `INSERT`.
    Insert,
    /// `UPDATE`.
    Update,
    /// `DELETE`.
    Delete,
    /// `REPLACE`.
    Replace,
    /// `BEGIN`.
    Begin,
    /// `COMMIT`.
    Commit,
    /// `ROLLBACK`.
    Rollback,
    /// `SAVEPOINT`.
    Savepoint,
    /// `RELEASE` (`RELEASE SAVEPOINT`).
    Release,
    /// `XA`.
    Xa,
    /// Anything else: another first word (`CREATE`, `SET`, `CALL`, …), a
    /// comment or a quote first, or no word within the first
    /// [`VERB_WINDOW`] bytes.
    Other,
}

/// How many bytes of a statement [`leading_verb`] reads.
pub const VERB_WINDOW: usize = 64;

/// The first word of `sql`: after ASCII whitespace (space, tab, CR, LF,
/// form feed), the run of ASCII letters, in any case. The whitespace and
/// the word must end within the first [`VERB_WINDOW`] bytes (the byte
/// after them is read to see the word ends), else [`Verb::Other`]. A
/// comment or any other character first gives [`Verb::Other`]: binlogged
/// statements start with their keyword, and `Other` is the conservative
/// answer for both uses (the transaction runs alone; the foreign keys are
/// read again).
pub fn leading_verb(sql: &[u8]) -> Verb {
    let start = sql
        .iter()
        .take(VERB_WINDOW)
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(VERB_WINDOW);
    let end = sql[start.min(sql.len())..]
        .iter()
        .position(|b| !b.is_ascii_alphabetic())
        .map_or(sql.len(), |n| start + n);
    if end > VERB_WINDOW {
        return Verb::Other;
    }
    let word = &sql[start.min(end)..end];
    const VERBS: [(&[u8], Verb); 10] = [
        (b"INSERT", Verb::Insert),
        (b"UPDATE", Verb::Update),
        (b"DELETE", Verb::Delete),
        (b"REPLACE", Verb::Replace),
        (b"BEGIN", Verb::Begin),
        (b"COMMIT", Verb::Commit),
        (b"ROLLBACK", Verb::Rollback),
        (b"SAVEPOINT", Verb::Savepoint),
        (b"RELEASE", Verb::Release),
        (b"XA", Verb::Xa),
    ];
    VERBS
        .iter()
        .find(|(name, _)| word.eq_ignore_ascii_case(name))
        .map_or(Verb::Other, |(_, verb)| *verb)
}

impl Verb {
    /// Whether a statement with this verb commits the open transaction
    /// implicitly, as far as a channel is concerned: anything but `INSERT`,
    /// `UPDATE`, `DELETE`, `REPLACE`, `ROLLBACK`, `SAVEPOINT` and `XA`.
    /// The channel runs a transaction holding one alone, after marking it
    /// started (`BEGIN`, `COMMIT` and `RELEASE` count: they are not
    /// expected inside a logged transaction's statements, and alone is
    /// always safe).
    pub fn commits_implicitly(self) -> bool {
        !matches!(
            self,
            Verb::Insert
                | Verb::Update
                | Verb::Delete
                | Verb::Replace
                | Verb::Rollback
                | Verb::Savepoint
                | Verb::Xa
        )
    }

    /// Whether a statement with this verb changes no table definition:
    /// DML (`INSERT`, `UPDATE`, `DELETE`, `REPLACE`) and transaction
    /// control (`BEGIN`, `COMMIT`, `ROLLBACK`, `SAVEPOINT`, `RELEASE`,
    /// `XA`).
    pub fn defines_nothing(self) -> bool {
        self != Verb::Other
    }
}

/// Whether `sql` is `CREATE [OR REPLACE] DATABASE|SCHEMA …` or `DROP
/// DATABASE|SCHEMA …` (the statement names its database), read from its
/// first [`VERB_WINDOW`] bytes, words separated by ASCII whitespace, in
/// any case; comments before the first word are not expected in binlogged
/// DDL and make this false.
pub fn names_its_database(sql: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&sql[..sql.len().min(VERB_WINDOW)]).to_ascii_uppercase();
    let words: Vec<&str> = text.split_ascii_whitespace().take(4).collect();
    match words.as_slice() {
        ["CREATE", "OR", "REPLACE", kind, ..] | ["CREATE", kind, ..] | ["DROP", kind, ..] => {
            matches!(*kind, "DATABASE" | "SCHEMA")
        }
        _ => false,
    }
}

/// A schema name usable as a shard: not empty, no U+FFFD (from a lossy
/// read of non-UTF-8 SQL).
fn valid_name(name: String) -> Option<String> {
    (!name.is_empty() && !name.contains('\u{fffd}')).then_some(name)
}

fn is_mariadb_executable_comment(token: &Token) -> bool {
    matches!(token, Token::Whitespace(Whitespace::MultiLineComment(c)) if c.starts_with("M!"))
}

/// `ALTER DATABASE|SCHEMA [name] options...`, which sqlparser 0.64 does
/// not parse: the name, or the default schema when the options follow
/// `DATABASE` directly.
fn alter_database_target(tokens: &[Token], default_schema: Option<&str>) -> Option<String> {
    let mut words = tokens.iter().filter(|t| !matches!(t, Token::Whitespace(_)));
    let Some(Token::Word(first)) = words.next() else {
        return None;
    };
    let Some(Token::Word(object)) = words.next() else {
        return None;
    };
    let unquoted = |w: &Word, k: Keyword| w.quote_style.is_none() && w.keyword == k;
    if !unquoted(first, Keyword::ALTER)
        || !(unquoted(object, Keyword::DATABASE) || unquoted(object, Keyword::SCHEMA))
    {
        return None;
    }
    let Some(Token::Word(name)) = words.next() else {
        return None;
    };
    const OPTIONS: [Keyword; 7] = [
        Keyword::CHARACTER,
        Keyword::CHARSET,
        Keyword::DEFAULT,
        Keyword::COLLATE,
        Keyword::COMMENT,
        Keyword::READ,
        Keyword::ENCRYPTION,
    ];
    if name.quote_style.is_none()
        && (OPTIONS.contains(&name.keyword) || name.value.eq_ignore_ascii_case("UPGRADE"))
    {
        return default_schema.map(str::to_string).and_then(valid_name);
    }
    if matches!(words.next(), Some(Token::Period)) {
        return None;
    }
    valid_name(name.value.clone())
}

/// What kind of statement, for the default-schema rule of
/// [`statement_shard`] only (from the parsed statement; whether a
/// statement is DDL for applying it is [`leading_verb`]'s answer).
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// CREATE/DROP DATABASE|SCHEMA x.
    Database(String),
    /// INSERT, REPLACE, UPDATE, DELETE: the default schema always counts.
    Dml,
    /// Other handled statements: the default schema counts for
    /// unqualified names only.
    Ddl,
}

/// The schemas a statement names. Methods return `None` to give up (the
/// statement is then attributed to no shard).
#[derive(Debug, Default)]
struct Refs {
    schemas: BTreeSet<String>,
    /// An unqualified table name was seen (the default schema counts).
    unqualified: bool,
}

impl Refs {
    fn statement(&mut self, statement: &Statement) -> Option<Kind> {
        match statement {
            Statement::Insert(insert) => {
                self.insert(insert)?;
                Some(Kind::Dml)
            }
            Statement::Update(update) => {
                self.update(update)?;
                Some(Kind::Dml)
            }
            Statement::Delete(delete) => {
                self.delete(delete)?;
                Some(Kind::Dml)
            }
            Statement::CreateTable(create) => {
                self.create_table(create)?;
                Some(Kind::Ddl)
            }
            Statement::AlterTable(alter) => {
                self.alter_table(alter)?;
                Some(Kind::Ddl)
            }
            Statement::CreateIndex(index) => {
                self.create_index(index)?;
                Some(Kind::Ddl)
            }
            Statement::CreateView(view) => {
                self.create_view(view)?;
                Some(Kind::Ddl)
            }
            Statement::Drop {
                object_type,
                names,
                table,
                ..
            } => match object_type {
                ObjectType::Database | ObjectType::Schema => {
                    let [name] = names.as_slice() else {
                        return None;
                    };
                    Some(Kind::Database(single_part(name)?))
                }
                ObjectType::Table | ObjectType::View | ObjectType::Sequence => {
                    for name in names {
                        self.table(name)?;
                    }
                    Some(Kind::Ddl)
                }
                ObjectType::Index => {
                    match table {
                        Some(table) => self.table(table)?,
                        None => {
                            for name in names {
                                self.table(name)?;
                            }
                        }
                    }
                    Some(Kind::Ddl)
                }
                _ => None,
            },
            Statement::CreateDatabase {
                db_name,
                clone: None,
                ..
            } => Some(Kind::Database(single_part(db_name)?)),
            Statement::CreateSchema {
                schema_name: SchemaName::Simple(name),
                ..
            } => Some(Kind::Database(single_part(name)?)),
            Statement::RenameTable(renames) => {
                for rename in renames {
                    self.table(&rename.old_name)?;
                    self.table(&rename.new_name)?;
                }
                Some(Kind::Ddl)
            }
            Statement::Truncate(truncate) => {
                if truncate.on_cluster.is_some() {
                    return None;
                }
                for target in &truncate.table_names {
                    self.table(&target.name)?;
                }
                Some(Kind::Ddl)
            }
            Statement::CreateSequence { name, .. } => {
                self.table(name)?;
                Some(Kind::Ddl)
            }
            Statement::Analyze(analyze) => {
                self.table(analyze.table_name.as_ref()?)?;
                Some(Kind::Ddl)
            }
            _ => None,
        }
    }

    // ----- table positions -------------------------------------------------

    /// A table name in a table position: `t` (default schema) or `db.t`.
    fn table(&mut self, name: &ObjectName) -> Option<()> {
        let parts: Vec<&str> = name
            .0
            .iter()
            .map(|p| p.as_ident().map(|i| i.value.as_str()))
            .collect::<Option<_>>()?;
        match parts.as_slice() {
            [_] => {
                self.unqualified = true;
                Some(())
            }
            [schema, _] => self.schema(schema),
            _ => None,
        }
    }

    fn schema(&mut self, name: &str) -> Option<()> {
        if name.is_empty() {
            return None;
        }
        self.schemas.insert(name.to_string());
        Some(())
    }

    fn table_with_joins(&mut self, t: &TableWithJoins) -> Option<()> {
        self.table_factor(&t.relation)?;
        for join in &t.joins {
            self.table_factor(&join.relation)?;
            let constraint = match &join.join_operator {
                JoinOperator::Join(c)
                | JoinOperator::Inner(c)
                | JoinOperator::Left(c)
                | JoinOperator::LeftOuter(c)
                | JoinOperator::Right(c)
                | JoinOperator::RightOuter(c)
                | JoinOperator::FullOuter(c)
                | JoinOperator::CrossJoin(c)
                | JoinOperator::StraightJoin(c)
                | JoinOperator::Semi(c)
                | JoinOperator::LeftSemi(c)
                | JoinOperator::RightSemi(c)
                | JoinOperator::Anti(c)
                | JoinOperator::LeftAnti(c)
                | JoinOperator::RightAnti(c) => c,
                _ => return None,
            };
            match constraint {
                JoinConstraint::On(e) => self.expr(e)?,
                JoinConstraint::Using(_)
                | JoinConstraint::UsingAlias(..)
                | JoinConstraint::Natural
                | JoinConstraint::None => {}
            }
        }
        Some(())
    }

    fn table_factor(&mut self, factor: &TableFactor) -> Option<()> {
        match factor {
            TableFactor::Table {
                name,
                args,
                with_hints,
                version,
                json_path,
                sample,
                ..
            } => {
                if args.is_some()
                    || !with_hints.is_empty()
                    || version.is_some()
                    || json_path.is_some()
                    || sample.is_some()
                {
                    return None;
                }
                self.table(name)
            }
            TableFactor::Derived {
                subquery, sample, ..
            } => {
                if sample.is_some() {
                    return None;
                }
                self.query(subquery)
            }
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => self.table_with_joins(table_with_joins),
            _ => None,
        }
    }

    // ----- DML -------------------------------------------------------------

    fn insert(&mut self, insert: &Insert) -> Option<()> {
        // Every field named, so that a new sqlparser field is a compile
        // error here rather than a table position silently missed.
        let Insert {
            insert_token: _,
            optimizer_hints: _,
            or,
            ignore: _,
            into: _,
            table,
            table_alias: _,
            columns: _,
            by_name: _,
            overwrite: _,
            source,
            assignments,
            partitioned,
            after_columns: _,
            overriding: _,
            has_table_keyword: _,
            on,
            returning,
            output,
            replace_into: _,
            priority: _,
            insert_alias: _,
            settings,
            format_clause,
            multi_table_insert_type,
            multi_table_into_clauses,
            multi_table_when_clauses,
            multi_table_else_clause,
        } = insert;
        if or.is_some()
            || output.is_some()
            || settings.is_some()
            || format_clause.is_some()
            || multi_table_insert_type.is_some()
            || !multi_table_into_clauses.is_empty()
            || !multi_table_when_clauses.is_empty()
            || multi_table_else_clause.is_some()
        {
            return None;
        }
        match table {
            TableObject::TableName(name) => self.table(name)?,
            _ => return None,
        }
        if let Some(source) = source {
            self.query(source)?;
        }
        for a in assignments {
            self.assignment(a)?;
        }
        for e in partitioned.iter().flatten() {
            self.expr(e)?;
        }
        match on {
            None => {}
            Some(OnInsert::DuplicateKeyUpdate(assignments)) => {
                for a in assignments {
                    self.assignment(a)?;
                }
            }
            Some(_) => return None,
        }
        self.select_items(returning.iter().flatten())
    }

    fn update(&mut self, update: &Update) -> Option<()> {
        let Update {
            update_token: _,
            optimizer_hints: _,
            table,
            on_cluster,
            assignments,
            from,
            selection,
            returning,
            output,
            or,
            order_by,
            limit,
            settings,
        } = update;
        if on_cluster.is_some() || output.is_some() || or.is_some() || settings.is_some() {
            return None;
        }
        self.table_with_joins(table)?;
        for a in assignments {
            self.assignment(a)?;
        }
        match from {
            None => {}
            Some(UpdateTableFromKind::BeforeSet(tables))
            | Some(UpdateTableFromKind::AfterSet(tables)) => {
                for t in tables {
                    self.table_with_joins(t)?;
                }
            }
        }
        if let Some(e) = selection {
            self.expr(e)?;
        }
        self.select_items(returning.iter().flatten())?;
        for o in order_by {
            self.scan(&o.to_string())?;
        }
        if let Some(e) = limit {
            self.expr(e)?;
        }
        Some(())
    }

    fn delete(&mut self, delete: &Delete) -> Option<()> {
        let Delete {
            delete_token: _,
            optimizer_hints: _,
            tables,
            from,
            on_cluster,
            using,
            selection,
            returning,
            output,
            order_by,
            limit,
            settings,
        } = delete;
        if on_cluster.is_some() || output.is_some() || settings.is_some() {
            return None;
        }
        // Multi-table DELETE targets: table names or aliases (an alias
        // counts as an unqualified name: the default schema, which a DML
        // statement counts anyway).
        for name in tables {
            self.table(name)?;
        }
        match from {
            FromTable::WithFromKeyword(tables) | FromTable::WithoutKeyword(tables) => {
                for t in tables {
                    self.table_with_joins(t)?;
                }
            }
        }
        for t in using.iter().flatten() {
            self.table_with_joins(t)?;
        }
        if let Some(e) = selection {
            self.expr(e)?;
        }
        self.select_items(returning.iter().flatten())?;
        for o in order_by {
            self.scan(&o.to_string())?;
        }
        if let Some(e) = limit {
            self.expr(e)?;
        }
        Some(())
    }

    fn assignment(&mut self, a: &Assignment) -> Option<()> {
        let targets: Vec<&ObjectName> = match &a.target {
            AssignmentTarget::ColumnName(name) => vec![name],
            AssignmentTarget::Tuple(names) => names.iter().collect(),
        };
        for name in targets {
            // `col`, `t.col`, or `db.t.col`.
            match name.0.len() {
                1 | 2 => {}
                3 => {
                    let schema = name.0[0].as_ident()?;
                    self.schema(&schema.value)?;
                }
                _ => return None,
            }
        }
        self.expr(&a.value)
    }

    // ----- queries ---------------------------------------------------------

    fn query(&mut self, query: &Query) -> Option<()> {
        let Query {
            with,
            body,
            order_by,
            limit_clause,
            fetch,
            locks,
            for_clause,
            settings,
            format_clause,
            pipe_operators,
        } = query;
        if fetch.is_some()
            || for_clause.is_some()
            || settings.is_some()
            || format_clause.is_some()
            || !pipe_operators.is_empty()
        {
            return None;
        }
        // A CTE's name used in FROM counts as an unqualified table name
        // (the default schema): conservative.
        if let Some(with) = with {
            for cte in &with.cte_tables {
                self.query(&cte.query)?;
            }
        }
        self.set_expr(body)?;
        if let Some(o) = order_by {
            self.scan(&o.to_string())?;
        }
        if let Some(l) = limit_clause {
            self.scan(&l.to_string())?;
        }
        for l in locks {
            self.scan(&l.to_string())?;
        }
        Some(())
    }

    fn set_expr(&mut self, body: &SetExpr) -> Option<()> {
        match body {
            SetExpr::Select(select) => self.select(select),
            SetExpr::Query(query) => self.query(query),
            SetExpr::SetOperation { left, right, .. } => {
                self.set_expr(left)?;
                self.set_expr(right)
            }
            SetExpr::Values(values) => {
                for row in &values.rows {
                    for e in &row.content {
                        self.expr(e)?;
                    }
                }
                Some(())
            }
            SetExpr::Table(table) => match (&table.schema_name, &table.table_name) {
                (Some(schema), Some(_)) => self.schema(&schema.value),
                (None, Some(_)) => {
                    self.unqualified = true;
                    Some(())
                }
                _ => None,
            },
            _ => None,
        }
    }

    fn select(&mut self, select: &Select) -> Option<()> {
        let Select {
            select_token: _,
            optimizer_hints: _,
            distinct,
            select_modifiers: _,
            top,
            top_before_distinct: _,
            projection,
            exclude: _,
            into,
            from,
            lateral_views,
            prewhere,
            selection,
            connect_by,
            group_by,
            cluster_by,
            distribute_by,
            sort_by,
            having,
            named_window,
            qualify,
            window_before_qualify: _,
            value_table_mode,
            flavor,
        } = select;
        if matches!(distinct, Some(Distinct::On(_)))
            || top.is_some()
            || into.is_some()
            || !lateral_views.is_empty()
            || prewhere.is_some()
            || !connect_by.is_empty()
            || !cluster_by.is_empty()
            || !distribute_by.is_empty()
            || !sort_by.is_empty()
            || qualify.is_some()
            || value_table_mode.is_some()
            || *flavor != SelectFlavor::Standard
        {
            return None;
        }
        self.select_items(projection)?;
        for t in from {
            self.table_with_joins(t)?;
        }
        if let Some(e) = selection {
            self.expr(e)?;
        }
        self.scan(&group_by.to_string())?;
        if let Some(e) = having {
            self.expr(e)?;
        }
        for w in named_window {
            self.scan(&w.to_string())?;
        }
        Some(())
    }

    fn select_items<'a>(&mut self, items: impl IntoIterator<Item = &'a SelectItem>) -> Option<()> {
        for item in items {
            match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    self.expr(e)?
                }
                other => self.scan(&other.to_string())?,
            }
        }
        Some(())
    }

    // ----- DDL -------------------------------------------------------------

    fn create_table(&mut self, create: &CreateTable) -> Option<()> {
        if create.inherits.is_some() || create.partition_of.is_some() {
            return None;
        }
        self.table(&create.name)?;
        if let Some(like) = &create.like {
            let (CreateTableLikeKind::Parenthesized(like) | CreateTableLikeKind::Plain(like)) =
                like;
            self.table(&like.name)?;
        }
        if let Some(clone) = &create.clone {
            self.table(clone)?;
        }
        if let Some(query) = &create.query {
            self.query(query)?;
        }
        // Columns, constraints (REFERENCES), options, partitioning: scan
        // the statement printed without its query.
        let mut rest = create.clone();
        rest.query = None;
        self.scan(&Statement::CreateTable(rest).to_string())
    }

    fn alter_table(&mut self, alter: &AlterTable) -> Option<()> {
        if alter.location.is_some() || alter.on_cluster.is_some() || alter.table_type.is_some() {
            return None;
        }
        self.table(&alter.name)?;
        for op in &alter.operations {
            match op {
                AlterTableOperation::RenameTable {
                    table_name: RenameTableNameKind::As(name) | RenameTableNameKind::To(name),
                } => self.table(name)?,
                other => self.scan(&other.to_string())?,
            }
        }
        Some(())
    }

    fn create_index(&mut self, index: &CreateIndex) -> Option<()> {
        if index.predicate.is_some() || !index.with.is_empty() {
            return None;
        }
        self.table(&index.table_name)?;
        for column in &index.columns {
            self.scan(&column.to_string())?;
        }
        Some(())
    }

    fn create_view(&mut self, view: &CreateView) -> Option<()> {
        if view.to.is_some() {
            return None;
        }
        self.table(&view.name)?;
        self.query(&view.query)
    }

    // ----- expressions -----------------------------------------------------

    fn expr(&mut self, e: &Expr) -> Option<()> {
        match e {
            Expr::Value(_) | Expr::Identifier(_) => Some(()),
            Expr::CompoundIdentifier(parts) => match parts.len() {
                2 => Some(()),
                3 => self.schema(&parts[0].value),
                _ => None,
            },
            // Common shapes walked directly (bulk VALUES lists hold many
            // negative numbers and sums); everything else is scanned.
            Expr::UnaryOp { expr, .. } | Expr::Nested(expr) => self.expr(expr),
            Expr::BinaryOp { left, right, .. } => {
                self.expr(left)?;
                self.expr(right)
            }
            other => self.scan(&other.to_string()),
        }
    }

    /// Scans SQL printed from a part of the AST that holds no table
    /// position except the forms listed in the module doc.
    fn scan(&mut self, text: &str) -> Option<()> {
        let tokens = Tokenizer::new(&MySqlDialect {}, text).tokenize().ok()?;
        let tokens: Vec<&Token> = tokens
            .iter()
            .filter(|t| !matches!(t, Token::Whitespace(_)))
            .collect();
        let mut i = 0;
        while i < tokens.len() {
            let Token::Word(first) = tokens[i] else {
                i += 1;
                continue;
            };
            if keyword(tokens[i]) == Keyword::SELECT {
                return None;
            }
            let mut chain = vec![first];
            let mut j = i + 1;
            while j + 1 < tokens.len() && matches!(tokens[j], Token::Period) {
                let Token::Word(w) = tokens[j + 1] else {
                    break;
                };
                if keyword(tokens[j + 1]) == Keyword::SELECT {
                    return None;
                }
                chain.push(w);
                j += 2;
            }
            let prev = i.checked_sub(1).map(|k| tokens[k]);
            let prev2 = i.checked_sub(2).map(|k| tokens[k]);
            self.chain(&chain, prev, prev2, tokens.get(j).copied())?;
            i = j;
        }
        Some(())
    }

    /// One dotted name found by [`Refs::scan`], with the tokens around it.
    fn chain(
        &mut self,
        chain: &[&Word],
        prev: Option<&Token>,
        prev2: Option<&Token>,
        next: Option<&Token>,
    ) -> Option<()> {
        const TABLE_BEFORE_ONE: [Keyword; 3] = [Keyword::REFERENCES, Keyword::TABLE, Keyword::LIKE];
        // FROM and JOIN are not here: in a scanned text they follow a
        // SELECT (which gives up first) or are parts of expressions
        // (`EXTRACT(YEAR FROM t.d)`, `TRIM(x FROM t.c)`).
        const TABLE_BEFORE_TWO: [Keyword; 7] = [
            Keyword::REFERENCES,
            Keyword::TABLE,
            Keyword::LIKE,
            Keyword::INTO,
            Keyword::UPDATE,
            Keyword::TO,
            Keyword::TABLES,
        ];
        let prev_keyword = prev.map(keyword).unwrap_or(Keyword::NoKeyword);
        let sequence = match (prev2, prev) {
            (Some(Token::Word(f)), Some(Token::LParen)) => {
                f.quote_style.is_none()
                    && ["NEXTVAL", "LASTVAL", "SETVAL"]
                        .iter()
                        .any(|n| f.value.eq_ignore_ascii_case(n))
            }
            (Some(before), Some(_)) => {
                keyword(before) == Keyword::VALUE && prev_keyword == Keyword::FOR
            }
            _ => false,
        };
        match chain.len() {
            1 => {
                // `TABLE IF [NOT] EXISTS`: not a table name.
                let if_exists =
                    prev_keyword == Keyword::TABLE && keyword_of(chain[0]) == Keyword::IF;
                if sequence || (TABLE_BEFORE_ONE.contains(&prev_keyword) && !if_exists) {
                    self.unqualified = true;
                }
                Some(())
            }
            2 => {
                if sequence
                    || TABLE_BEFORE_TWO.contains(&prev_keyword)
                    || matches!(next, Some(Token::LParen))
                {
                    self.schema(&chain[0].value)?;
                }
                Some(())
            }
            3 => self.schema(&chain[0].value),
            _ => None,
        }
    }
}

/// The keyword of an unquoted word token, else `NoKeyword`.
fn keyword(token: &Token) -> Keyword {
    match token {
        Token::Word(w) => keyword_of(w),
        _ => Keyword::NoKeyword,
    }
}

/// The keyword of an unquoted word, else `NoKeyword`.
fn keyword_of(word: &Word) -> Keyword {
    if word.quote_style.is_none() {
        word.keyword
    } else {
        Keyword::NoKeyword
    }
}

/// The one part of `name`, unquoted.
fn single_part(name: &ObjectName) -> Option<String> {
    match name.0.as_slice() {
        [part] => Some(part.as_ident()?.value.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    fn shard(sql: &str, db: Option<&str>) -> Option<String> {
        statement_shard(sql.as_bytes(), db)
    }

    /// Asserts each (sql, default schema, expected shard).
    fn check(cases: &[(&str, Option<&str>, Option<&str>)]) {
        let mut wrong = Vec::new();
        for (sql, db, expected) in cases {
            let got = shard(sql, *db);
            if got.as_deref() != *expected {
                wrong.push(format!(
                    "{sql:?} (db {db:?}): got {got:?}, expected {expected:?}"
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    const Q1: Option<&str> = Some("shard_q1");

    #[test]
    fn case_b18() {
        check(&[
            ("INSERT INTO a (v, ts) VALUES (10, NOW())", Q1, Q1),
            (
                "INSERT INTO a (v, ts) VALUES (LAST_INSERT_ID() + 100, NOW())",
                Q1,
                Q1,
            ),
            ("UPDATE shard_q2.b SET v = v + 5 WHERE id = 1", Q1, None),
            ("INSERT INTO shard_q2.b VALUES (2, @x)", Q1, None),
            // Without a default schema the qualified schema is the shard.
            (
                "UPDATE shard_q2.b SET v = v + 5 WHERE id = 1",
                None,
                Some("shard_q2"),
            ),
            (
                "INSERT INTO shard_q2.b VALUES (2, @x)",
                None,
                Some("shard_q2"),
            ),
            // Qualified with the default schema itself.
            ("UPDATE shard_q1.a SET v = 1", Q1, Q1),
        ]);
    }

    #[test]
    fn database_statements() {
        check(&[
            ("CREATE DATABASE foo", None, Some("foo")),
            ("create database if not exists foo", Q1, Some("foo")),
            (
                "CREATE SCHEMA IF NOT EXISTS `we``ird`",
                None,
                Some("we`ird"),
            ),
            ("DROP SCHEMA IF EXISTS `a``b`", Q1, Some("a`b")),
            ("DROP DATABASE foo", None, Some("foo")),
            ("ALTER DATABASE foo CHARACTER SET utf8mb4", Q1, Some("foo")),
            (
                "ALTER SCHEMA `foo` DEFAULT COLLATE utf8mb4_bin",
                None,
                Some("foo"),
            ),
            ("ALTER DATABASE CHARACTER SET utf8mb4", Q1, Q1),
            ("ALTER DATABASE DEFAULT CHARACTER SET utf8mb4", None, None),
            ("CREATE DATABASE a.b", None, None),
        ]);
    }

    #[test]
    fn ddl() {
        check(&[
            ("CREATE TABLE t (id INT PRIMARY KEY)", Some("acme"), Some("acme")),
            ("CREATE TABLE t (id INT PRIMARY KEY)", None, None),
            ("CREATE TABLE acme.t (id INT)", None, Some("acme")),
            ("CREATE TABLE acme.t (id INT)", Q1, Some("acme")),
            ("CREATE TABLE IF NOT EXISTS `ac``me`.`t``1` (a INT)", None, Some("ac`me")),
            ("CREATE TABLE t LIKE other.t", Q1, None),
            ("CREATE TABLE t LIKE u", Q1, Q1),
            ("CREATE TABLE x.t LIKE x.u", Q1, Some("x")),
            ("CREATE TABLE t AS SELECT * FROM other.u", Q1, None),
            ("CREATE TABLE t SELECT * FROM u", Q1, Q1),
            ("CREATE TABLE c (id INT, p INT, FOREIGN KEY (p) REFERENCES o.p(id))", Q1, None),
            ("CREATE TABLE c (id INT, p INT, FOREIGN KEY (p) REFERENCES p(id))", Q1, Q1),
            ("CREATE TABLE c (id INT, p INT REFERENCES o.p (id))", Q1, None),
            ("CREATE TABLE x.c (id INT, p INT, FOREIGN KEY (p) REFERENCES p(id))", None, None),
            ("CREATE TABLE x.c (id INT, p INT, FOREIGN KEY (p) REFERENCES x.p(id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4", None, Some("x")),
            ("CREATE TEMPORARY TABLE t (a INT)", Q1, Q1),
            ("ALTER TABLE x.t ADD COLUMN c INT", Q1, Some("x")),
            ("ALTER TABLE t ADD COLUMN c INT", Q1, Q1),
            ("ALTER TABLE t RENAME COLUMN a TO b", Q1, Q1),
            ("ALTER TABLE x.t RENAME TO y.t", None, None),
            ("ALTER TABLE x.t RENAME TO x.u", None, Some("x")),
            ("ALTER TABLE t RENAME TO u", Q1, Q1),
            ("ALTER TABLE t ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES other.p (id)", Q1, None),
            ("ALTER TABLE t ENGINE=InnoDB", Q1, None),
            ("RENAME TABLE a.t TO b.t", None, None),
            ("RENAME TABLE a.t TO a.u, a.v TO a.w", None, Some("a")),
            ("RENAME TABLE t TO u", Q1, Q1),
            ("DROP TABLE IF EXISTS a.t, b.u", None, None),
            ("DROP TABLE IF EXISTS a.t, a.u", Q1, Some("a")),
            ("DROP TEMPORARY TABLE t", Q1, Q1),
            ("DROP VIEW a.v", None, Some("a")),
            ("DROP INDEX i ON db.t", Q1, Some("db")),
            ("CREATE INDEX i ON db.t (a)", Q1, Some("db")),
            ("CREATE UNIQUE INDEX i ON t (a, b)", Q1, Q1),
            ("TRUNCATE x.t", Q1, Some("x")),
            ("TRUNCATE TABLE t", Q1, Q1),
            ("CREATE OR REPLACE VIEW v AS SELECT * FROM o.t", Q1, None),
            ("CREATE VIEW o.v AS SELECT a FROM o.t JOIN o.u ON t.id = u.id", Q1, Some("o")),
            ("CREATE SEQUENCE s.q", None, Some("s")),
            ("DROP SEQUENCE s.q", Q1, Some("s")),
            ("ANALYZE TABLE x.t", Q1, Some("x")),
            ("CREATE TABLE t (a INT, b INT AS (a + 1) VIRTUAL, c DATETIME DEFAULT CURRENT_TIMESTAMP)", Q1, Q1),
            ("CREATE TABLE t (a INT, CHECK (a > 0), KEY k (a), UNIQUE KEY u (a))", Q1, Q1),
            ("CREATE TABLE x.t (a INT DEFAULT (NEXTVAL(y.s)))", None, None),
            ("ALTER TABLE x.t ADD INDEX i (a), DROP COLUMN b, MODIFY COLUMN c BIGINT NOT NULL", None, Some("x")),
            ("CREATE TABLE IF NOT EXISTS t (a INT)", Q1, Q1),
            ("CREATE TABLE IF NOT EXISTS x.t (a INT)", Q1, Some("x")),
            // Unparseable with sqlparser 0.64: unknown.
            ("CREATE TABLE t (a INT) /*!50100 PARTITION BY HASH (a) PARTITIONS 4 */", Q1, None),
            ("CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1", Q1, None),
            ("CREATE TABLE m (a INT) ENGINE=MERGE UNION=(o.t1, o.t2)", Q1, None),
        ]);
    }

    #[test]
    fn dml() {
        check(&[
            ("INSERT INTO t VALUES (1), (2)", Q1, Q1),
            ("INSERT t SET a = 1", Q1, Q1),
            ("REPLACE INTO t VALUES (1)", Q1, Q1),
            ("INSERT INTO t VALUES (1)", None, None),
            ("INSERT INTO x.t VALUES (1)", None, Some("x")),
            ("INSERT INTO x.t VALUES (1)", Some("x"), Some("x")),
            ("INSERT INTO x.t VALUES (1)", Some("y"), None),
            ("INSERT INTO t SELECT * FROM u", Q1, Q1),
            ("INSERT INTO t SELECT * FROM other.u", Q1, None),
            ("INSERT INTO x.t SELECT * FROM x.u JOIN x.v ON u.id = v.id WHERE u.a > 1", None, Some("x")),
            ("INSERT INTO x.t SELECT * FROM x.u JOIN y.v ON u.id = v.id", None, None),
            ("INSERT INTO x.t SELECT * FROM (SELECT a FROM y.u) AS d", None, None),
            ("INSERT INTO x.t SELECT * FROM x.u UNION SELECT * FROM y.u", None, None),
            ("INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a) + 1", Q1, Q1),
            ("INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = other.f(a)", Q1, None),
            ("INSERT INTO t VALUES (NEXTVAL(s.q))", Q1, None),
            ("INSERT INTO t VALUES (NEXTVAL(q))", Q1, Q1),
            ("INSERT INTO t VALUES (NEXT VALUE FOR s.q)", Q1, None),
            ("UPDATE t SET a = a + 1 WHERE id = 3", Q1, Q1),
            ("UPDATE t SET t.a = 1 WHERE t.id = 3", Q1, Q1),
            ("UPDATE t SET shard_q1.t.a = 1", Q1, Q1),
            ("UPDATE t SET other.t.a = 1", Q1, None),
            ("UPDATE t SET a = 1 WHERE other.u.id = 3", Q1, None),
            ("UPDATE t JOIN u ON t.id = u.id SET t.a = u.a", Q1, Q1),
            ("UPDATE t JOIN o.u ON t.id = u.id SET t.a = u.a", Q1, None),
            ("UPDATE t SET a = (SELECT MAX(b) FROM u)", Q1, None),
            ("UPDATE t SET a = 1 ORDER BY id LIMIT 10", Q1, Q1),
            ("UPDATE t SET a = CASE WHEN b > 1 THEN f(b) ELSE CAST(c AS CHAR) END", Q1, Q1),
            ("DELETE FROM t WHERE id IN (SELECT id FROM u)", Q1, None),
            ("DELETE FROM t WHERE id = 1 LIMIT 1", Q1, Q1),
            ("DELETE FROM x.t WHERE id = 1", None, Some("x")),
            ("DELETE t1 FROM a.t1 JOIN b.t2 ON t1.id = t2.id", None, None),
            ("DELETE t1 FROM a.t1 JOIN a.t2 ON t1.id = t2.id", Some("a"), Some("a")),
            ("DELETE a.t1 FROM a.t1 JOIN a.t2 ON t1.id = t2.id", None, Some("a")),
            ("DELETE FROM t USING t JOIN u", Q1, Q1),
            ("INSERT INTO `a``b`.`t` VALUES (1)", None, Some("a`b")),
            ("INSERT INTO `t` VALUES ('x.y', \"o.t\", 'SELECT * FROM o.t')", Q1, Q1),
            ("/* comment o.t */ INSERT INTO t VALUES (1) -- o.t", Q1, Q1),
            ("INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)", Q1, None),
            ("INSERT INTO t VALUES (1);", Q1, Q1),
            ("INSERT INTO t /*M!100000 , o.t */ VALUES (1)", Q1, None),
            ("INSERT INTO t VALUES (1) /*!50000 , (2) */", Q1, Q1),
            ("LOAD DATA LOCAL INFILE '/tmp/SQL_LOAD-1' INTO TABLE t", Q1, None),
            ("INSERT INTO t SELECT a FROM u WHERE b IN (SELECT b FROM v)", Q1, None),
            ("DELETE FROM t WHERE EXISTS (SELECT 1 FROM o.u)", Q1, None),
            ("INSERT INTO t VALUES (1) RETURNING id", Q1, Q1),
            ("UPDATE t SET j = JSON_SET(j, '$.a', 1), d = DATE_ADD(d, INTERVAL 1 DAY)", Q1, Q1),
            ("UPDATE t SET a = o.f(b)", Q1, None),
            ("UPDATE q2.b AS x SET x.v = 1 WHERE x.id = 2", None, Some("q2")),
            ("UPDATE t JOIN o.u ON t.id = u.id SET t.a = u.b", Q1, None),
            // Not parsed by sqlparser 0.64: unknown, conservatively.
            ("UPDATE t, u SET t.a = u.b WHERE t.id = u.id", Q1, None),
            ("INSERT INTO x.t SELECT * FROM x.u LOCK IN SHARE MODE", None, None),
            ("INSERT INTO x.t SELECT * FROM x.u LEFT JOIN (x.v, x.w) ON (v.a = u.a AND w.b = u.b)", None, None),
            ("INSERT INTO x.t SELECT * FROM x.u, y.v", None, None),
            ("INSERT INTO x.t SELECT * FROM x.u, x.v", None, Some("x")),
            ("INSERT INTO x.t SELECT EXTRACT(YEAR FROM u.d), TRIM(LEADING 'a' FROM u.c) FROM x.u", None, Some("x")),
            ("INSERT INTO x.t SELECT ROW_NUMBER() OVER (PARTITION BY u.a ORDER BY u.b) FROM x.u", None, Some("x")),
            ("INSERT INTO x.t SELECT a, COUNT(*) FROM x.u GROUP BY a HAVING COUNT(*) > 1 ORDER BY a LIMIT 3", None, Some("x")),
            ("INSERT INTO x.t SELECT * FROM x.u FOR UPDATE", None, Some("x")),
            ("INSERT INTO t WITH c AS (SELECT 1 AS a) SELECT a FROM c", Q1, Q1),
            ("INSERT INTO t WITH c AS (SELECT a FROM o.u) SELECT a FROM c", Q1, None),
            ("INSERT INTO x.t SELECT * FROM x.u LEFT JOIN (x.v JOIN x.w ON w.b = v.b) ON v.a = u.a", None, Some("x")),
            ("INSERT INTO x.t SELECT * FROM x.u LEFT JOIN (x.v JOIN y.w ON w.b = v.b) ON v.a = u.a", None, None),
            ("INSERT INTO x.t SELECT * FROM x.u STRAIGHT_JOIN x.v ON v.a = u.a", None, Some("x")),
            ("INSERT INTO x.t SELECT x.u.a FROM x.u", None, Some("x")),
            ("INSERT INTO x.t SELECT y.u.a FROM x.u", None, None),
            ("INSERT INTO t (a, b) VALUES (1, 'x'), (2, NULL), (-3, 0x0f), (4, b'1'), (5, 1.5e3)", Q1, Q1),
        ]);
    }

    #[test]
    fn other_statements_and_garbage_are_unknown() {
        check(&[
            ("", Q1, None),
            ("   ", Q1, None),
            ("this is not sql", Q1, None),
            ("GRANT ALL ON db.* TO u", Q1, None),
            ("SET @x = 1", Q1, None),
            ("CALL p()", Q1, None),
            ("SAVEPOINT a", Q1, None),
            ("SELECT 1", Q1, None),
            ("FLUSH PRIVILEGES", Q1, None),
            ("CREATE USER u", Q1, None),
            ("INSERT INTO t VALUES (1", Q1, None),
        ]);
    }

    #[test]
    fn names_that_are_not_utf8_are_unknown() {
        assert_eq!(
            statement_shard(b"INSERT INTO caf\xe9.t VALUES (1)", None),
            None
        );
        assert_eq!(statement_shard(b"CREATE DATABASE caf\xe9", None), None);
        // Non-UTF-8 bytes in a string literal do not matter.
        assert_eq!(
            statement_shard(b"INSERT INTO t VALUES ('caf\xe9')", Some("x")),
            Some("x".into())
        );
        assert_eq!(
            statement_shard("INSERT INTO ünï.t VALUES (1)".as_bytes(), None),
            Some("ünï".into())
        );
    }

    #[test]
    fn empty_default_schema_is_none() {
        assert_eq!(shard("INSERT INTO t VALUES (1)", Some("")), None);
        assert_eq!(
            shard("INSERT INTO x.t VALUES (1)", Some("")),
            Some("x".into())
        );
    }

    fn ident() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::prop_oneof![
            "[a-z_][a-z0-9_]{0,15}",
            proptest::prelude::any::<String>().prop_filter("no NUL", |s| !s.is_empty()
                && !s.contains('\0')
                && !s.contains('\u{fffd}')),
        ]
    }

    fn quoted(name: &str) -> String {
        format!("`{}`", name.replace('`', "``"))
    }

    proptest::proptest! {
        #[test]
        fn never_panics(sql in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
                        db in proptest::option::of("[a-z]{1,4}")) {
            let _ = statement_shard(&sql, db.as_deref());
            let _ = is_transaction_control(&sql);
        }

        #[test]
        fn qualified_insert_gives_its_schema_unless_the_default_differs(
            schema in ident(),
            table in ident(),
            default in proptest::option::of(ident()),
        ) {
            let sql = format!("INSERT INTO {}.{} VALUES (1)", quoted(&schema), quoted(&table));
            let expected = match &default {
                Some(d) if *d != schema => None,
                _ => Some(schema.clone()),
            };
            proptest::prop_assert_eq!(statement_shard(sql.as_bytes(), default.as_deref()), expected);
            let create = format!("CREATE DATABASE {}", quoted(&schema));
            proptest::prop_assert_eq!(statement_shard(create.as_bytes(), default.as_deref()), Some(schema.clone()));
        }
    }

    #[test]
    fn transaction_control() {
        for sql in [
            "ROLLBACK",
            "rollback",
            "ROLLBACK TO SAVEPOINT a",
            "ROLLBACK WORK TO a",
            "SAVEPOINT `a b`",
            "release savepoint a",
            "COMMIT",
            "/* x */ SAVEPOINT a",
        ] {
            assert!(is_transaction_control(sql.as_bytes()), "{sql}");
        }
        for sql in [
            "RELEASE a",
            "INSERT INTO t VALUES (1)",
            "BEGIN NOT ATOMIC SELECT 1; END",
            "",
            "`ROLLBACK`",
        ] {
            assert!(!is_transaction_control(sql.as_bytes()), "{sql}");
        }
    }

    /// The channel's first-word check before the one [`leading_verb`]
    /// (`applier/channel.rs` `is_dml`): kept here to pin its answers.
    fn old_channel_is_dml(sql: &[u8]) -> bool {
        let text = String::from_utf8_lossy(&sql[..sql.len().min(64)]);
        let word = text
            .trim_start()
            .split(|c: char| !c.is_ascii_alphabetic())
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        matches!(
            word.as_str(),
            "INSERT" | "UPDATE" | "DELETE" | "REPLACE" | "ROLLBACK" | "SAVEPOINT" | "XA"
        )
    }

    /// The foreign-key routing's first-word check before the one
    /// [`leading_verb`] (`shard/foreign_keys.rs` `is_dml`).
    fn old_foreign_keys_is_dml(sql: &[u8]) -> bool {
        let start = sql
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(sql.len());
        let word: Vec<u8> = sql[start..]
            .iter()
            .take_while(|b| b.is_ascii_alphabetic())
            .map(u8::to_ascii_uppercase)
            .collect();
        matches!(
            word.as_slice(),
            b"INSERT"
                | b"UPDATE"
                | b"DELETE"
                | b"REPLACE"
                | b"BEGIN"
                | b"COMMIT"
                | b"ROLLBACK"
                | b"SAVEPOINT"
                | b"RELEASE"
                | b"XA"
        )
    }

    // One decision of "is this DDL" for the channel (commits implicitly)
    // and the foreign-key routing (defines nothing): the answers of both
    // old checks, pinned for a table of statements.
    #[test]
    fn leading_verb_keeps_both_callers_answers() {
        use Verb::*;
        let long_ws = format!("{}INSERT INTO t VALUES (1)", " ".repeat(70));
        let edge_ws = format!("{}INSERT INTO t VALUES (1)", " ".repeat(58));
        let cases: Vec<(&str, Verb)> = vec![
            ("INSERT INTO t VALUES (1)", Insert),
            ("insert into t values (1)", Insert),
            ("  \n\tUPDATE t SET a = 1", Update),
            ("DELETE FROM t", Delete),
            ("Replace INTO t VALUES (1)", Replace),
            ("REPLACE", Replace),
            ("BEGIN", Begin),
            ("COMMIT", Commit),
            ("ROLLBACK", Rollback),
            ("ROLLBACK TO SAVEPOINT a", Rollback),
            ("SAVEPOINT a", Savepoint),
            ("RELEASE SAVEPOINT a", Release),
            ("XA START 'x'", Xa),
            ("xa prepare 'x'", Xa),
            ("XA COMMIT 'x'", Xa),
            ("CREATE TABLE t (a INT)", Other),
            ("CREATE TEMPORARY TABLE tmp (a INT)", Other),
            ("create database d", Other),
            ("DROP TABLE t", Other),
            ("ALTER TABLE t ADD b INT", Other),
            ("SET @a = 1", Other),
            ("CALL p()", Other),
            ("GRANT SELECT ON d.* TO u", Other),
            ("/* c */ INSERT INTO t VALUES (1)", Other),
            ("/*!40000 ALTER TABLE t DISABLE KEYS */", Other),
            ("-- c\nINSERT INTO t VALUES (1)", Other),
            ("`INSERT`", Other),
            ("INSERTED", Other),
            ("INSERT_x", Insert),
            ("", Other),
            ("   ", Other),
            (edge_ws.as_str(), Insert),
        ];
        for (sql, verb) in &cases {
            let bytes = sql.as_bytes();
            assert_eq!(leading_verb(bytes), *verb, "{sql:?}");
            assert_eq!(
                !verb.commits_implicitly(),
                old_channel_is_dml(bytes),
                "channel: {sql:?}"
            );
            assert_eq!(
                verb.defines_nothing(),
                old_foreign_keys_is_dml(bytes),
                "foreign keys: {sql:?}"
            );
        }
        // Where the two old checks disagreed, each caller keeps its answer:
        // BEGIN, COMMIT and RELEASE commit implicitly for the channel (run
        // alone) and define nothing for the foreign-key routing.
        for verb in [Begin, Commit, Release] {
            assert!(
                verb.commits_implicitly() && verb.defines_nothing(),
                "{verb:?}"
            );
        }
        // The only inputs whose answer moved, both to the conservative side:
        // a first word past the 64-byte window (the foreign-key check read
        // any length of whitespace) and a first word after whitespace other
        // than ASCII space, tab, CR, LF, form feed (the channel trimmed any
        // Unicode whitespace).
        assert!(old_foreign_keys_is_dml(long_ws.as_bytes()));
        assert_eq!(leading_verb(long_ws.as_bytes()), Other);
        let vertical_tab = "\x0bINSERT INTO t VALUES (1)";
        assert!(old_channel_is_dml(vertical_tab.as_bytes()));
        assert_eq!(leading_verb(vertical_tab.as_bytes()), Other);
        let no_break_space = "\u{a0}INSERT INTO t VALUES (1)";
        assert!(old_channel_is_dml(no_break_space.as_bytes()));
        assert_eq!(leading_verb(no_break_space.as_bytes()), Other);
        // Not UTF-8 after the word: read as bytes.
        assert_eq!(leading_verb(b"DELETE \xff\xfe"), Delete);
    }

    #[test]
    fn database_ddl_is_recognised() {
        for sql in [
            "CREATE DATABASE a",
            "create schema if not exists a",
            "CREATE OR REPLACE DATABASE a",
            "DROP DATABASE a",
            "DROP SCHEMA IF EXISTS `a`",
        ] {
            assert!(names_its_database(sql.as_bytes()), "{sql}");
        }
        for sql in [
            "CREATE TABLE a (x INT)",
            "ALTER DATABASE a CHARACTER SET utf8mb4",
            "DROP TABLE a",
        ] {
            assert!(!names_its_database(sql.as_bytes()), "{sql}");
        }
    }
}
