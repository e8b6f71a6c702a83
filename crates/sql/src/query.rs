//! Running a query: which tables it names, one read-only statement, a time limit, and
//! errors that say where and what to do.

use std::time::{Duration, Instant};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use stepscope_export::table::Cell;
use stepscope_export::tables::TABLES;

use crate::Db;

/// Where a query's result goes: its column names, then its rows.
pub trait Results {
    fn columns(&mut self, names: &[String]) -> std::io::Result<()>;
    /// One row, a cell per column; false stops the query.
    fn row(&mut self, cells: &[Cell]) -> std::io::Result<bool>;
}

/// The longest text or blob a query may make (SQLite's default is 1 GB): the
/// tables' own values are far shorter.
pub const MAX_VALUE_BYTES: i32 = 16 << 20;
/// The longest query text.
const MAX_QUERY_BYTES: i32 = 1 << 20;
/// SQLite's virtual-machine steps between two looks at the clock.
const PROGRESS_STEPS: i32 = 1000;

/// What a query may take.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The longest it may run (`None`: until it ends).
    pub timeout: Option<Duration>,
}

/// A piece of a query outside its strings and comments: an identifier or keyword
/// (quoted ones unquoted), or one character of punctuation.
#[derive(Debug, PartialEq)]
enum Token<'a> {
    Word(&'a str),
    Punct(u8),
}

/// The tokens of `sql` that can name a table or column (strings, comments, numbers and
/// blanks left out).
fn tokens(sql: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let b = sql.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let until = |from: usize, end: &[u8]| {
            (from..b.len()).find(|&j| b[j..].starts_with(end)).map_or(b.len(), |j| j + end.len())
        };
        if c == b'\'' {
            // A string: '' inside is a quote, and the string goes on. After FROM, JOIN
            // or a comma, one that is a table's name is the table (SQLite reads
            // `FROM 'ops'` so).
            let end = until(i + 1, b"'");
            let text = &sql[i + 1..end.saturating_sub(1).max(i + 1)];
            let at_table = match out.last() {
                Some(Token::Word(w)) => w.eq_ignore_ascii_case("from") || w.eq_ignore_ascii_case("join"),
                Some(Token::Punct(p)) => *p == b',',
                None => false,
            };
            if at_table && TABLES.iter().any(|t| t.eq_ignore_ascii_case(text)) {
                out.push(Token::Word(text));
            }
            i = end;
        } else if b[i..].starts_with(b"--") {
            i = until(i, b"\n");
        } else if b[i..].starts_with(b"/*") {
            i = until(i + 2, b"*/");
        } else if let Some(close) = match c {
            b'"' => Some(b'"'),
            b'`' => Some(b'`'),
            b'[' => Some(b']'),
            _ => None,
        } {
            let end = until(i + 1, &[close]);
            out.push(Token::Word(&sql[i + 1..end.saturating_sub(1).max(i + 1)]));
            i = end;
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            // A word, or a number (which names nothing: dropped).
            let end = (i..b.len()).find(|&j| !(b[j].is_ascii_alphanumeric() || b[j] == b'_')).unwrap_or(b.len());
            if !c.is_ascii_digit() {
                out.push(Token::Word(&sql[i..end]));
            }
            i = end;
        } else {
            if !c.is_ascii_whitespace() {
                out.push(Token::Punct(c));
            }
            i += 1;
        }
    }
    out
}

/// Whether a query names SQLite's own list of tables or columns (then every table,
/// with every column, is there for it to list).
fn lists_schema(tokens: &[Token]) -> bool {
    const SCHEMA: [&str; 5] =
        ["sqlite_schema", "sqlite_master", "table_list", "pragma_table_info", "pragma_table_xinfo"];
    tokens.iter().any(|t| matches!(t, Token::Word(w) if SCHEMA.iter().any(|s| w.eq_ignore_ascii_case(s))))
}

/// The tables of [`TABLES`] that `sql` names: every identifier outside strings and
/// comments that is a table's name, in [`TABLES`] order. A column or alias of the same
/// name counts too (the table is loaded and not used: a cost, never a wrong answer).
pub fn referenced(sql: &str) -> Vec<&'static str> {
    let tokens = tokens(sql);
    let schema = lists_schema(&tokens);
    let named = |t: &str| tokens.iter().any(|w| matches!(w, Token::Word(w) if w.eq_ignore_ascii_case(t)));
    TABLES.iter().copied().filter(|t| schema || named(t)).collect()
}

/// The columns `sql` may read, lower-cased: every identifier outside strings and
/// comments (a name that is no column costs nothing). `None` where it may read columns
/// it does not name: a `*` of every column (`SELECT *`, `t.*`; not `count(*)` or a
/// product), a `NATURAL` join (on the columns two tables share), or SQLite's own lists
/// of tables and columns. The tables are loaded with these columns only: a query never
/// sees a difference, and a scan of a few columns of a large table inserts a few.
pub fn columns_named(sql: &str) -> Option<Vec<String>> {
    let tokens = tokens(sql);
    let keyword = |t: Option<&Token>, words: &[&str]| matches!(t, Some(Token::Word(w)) if words.iter().any(|k| w.eq_ignore_ascii_case(k)));
    let every_column = tokens.iter().enumerate().any(|(i, t)| match t {
        Token::Punct(b'*') => {
            let before = i.checked_sub(1).and_then(|j| tokens.get(j));
            matches!(before, Some(Token::Punct(b',' | b'.'))) || keyword(before, &["select", "distinct", "all"])
        }
        Token::Word(w) => w.eq_ignore_ascii_case("natural"),
        Token::Punct(_) => false,
    });
    if every_column || lists_schema(&tokens) {
        return None;
    }
    let mut words: Vec<String> = (tokens.iter())
        .filter_map(|t| match t {
            Token::Word(w) => Some(w.to_ascii_lowercase()),
            Token::Punct(_) => None,
        })
        .collect();
    words.sort_unstable();
    words.dedup();
    Some(words)
}

/// Why a query failed.
enum Failure {
    Sqlite(rusqlite::Error),
    Empty,
    /// Not a query: a statement that returns no rows, or would write.
    NotAQuery,
    /// Writing the result failed.
    Output(std::io::Error),
}

impl From<rusqlite::Error> for Failure {
    fn from(e: rusqlite::Error) -> Failure {
        Failure::Sqlite(e)
    }
}

/// What to say of a statement refused as one that is not a read-only query.
const READ_ONLY: &str = "stepscope sql runs read-only queries: SELECT or WITH … SELECT";

/// Whether a statement may take `action`: reading, and what reading needs. Everything
/// that writes, attaches a file or changes a setting is refused.
fn allowed(ctx: AuthContext<'_>) -> Authorization {
    match ctx.action {
        AuthAction::Select | AuthAction::Read { .. } | AuthAction::Function { .. } | AuthAction::Recursive => {
            Authorization::Allow
        }
        // The pragmas that list tables and columns, which only read.
        AuthAction::Pragma { pragma_name, .. }
            if ["table_info", "table_xinfo", "table_list"].contains(&pragma_name) =>
        {
            Authorization::Allow
        }
        _ => Authorization::Deny,
    }
}

/// Line and column (from 1) of byte `offset` of `sql`.
fn position(sql: &str, offset: usize) -> (usize, usize) {
    let before = &sql[..offset.min(sql.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

impl Db {
    /// Runs `sql`, one read-only statement, into `out`. The error is one line: where in
    /// the query, what is wrong, and what to do.
    pub fn query(&mut self, sql: &str, limits: &Limits, out: &mut dyn Results) -> Result<(), String> {
        let setup = |e: rusqlite::Error| format!("cannot set up the query: {e} — run it again; if it stays, report it");
        self.conn.execute_batch("PRAGMA query_only = ON").map_err(setup)?;
        self.conn.authorizer(Some(allowed)).map_err(setup)?;
        // The time limit is checked between SQLite's steps; no value the query makes may
        // be longer than MAX_VALUE_BYTES, so that no one step (a function over a huge
        // made-up blob) runs long between two checks.
        self.conn.set_limit(Limit::SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES).map_err(setup)?;
        self.conn.set_limit(Limit::SQLITE_LIMIT_SQL_LENGTH, MAX_QUERY_BYTES).map_err(setup)?;
        let deadline = limits.timeout.map(|t| Instant::now() + t);
        self.conn.progress_handler(PROGRESS_STEPS, deadline.map(|d| move || Instant::now() >= d)).map_err(setup)?;
        let result = self.run(sql, out).map_err(|e| self.explain(sql, e, limits));
        self.conn.progress_handler(PROGRESS_STEPS, None::<fn() -> bool>).map_err(setup)?;
        self.conn.authorizer(None::<fn(AuthContext<'_>) -> Authorization>).map_err(setup)?;
        self.conn.execute_batch("PRAGMA query_only = OFF").map_err(setup)?;
        result
    }

    fn run(&self, sql: &str, out: &mut dyn Results) -> Result<(), Failure> {
        let written = Failure::Output;
        if sql.trim().is_empty() {
            return Err(Failure::Empty);
        }
        let mut stmt = self.conn.prepare(sql)?;
        if !stmt.readonly() || stmt.column_count() == 0 {
            return Err(Failure::NotAQuery);
        }
        let names: Vec<String> = stmt.column_names().map(String::from).collect();
        let n = names.len();
        out.columns(&names).map_err(written)?;
        let mut rows = stmt.raw_query();
        let mut texts: Vec<String> = Vec::new();
        while let Some(r) = rows.next()? {
            texts.clear();
            for i in 0..n {
                texts.push(match r.get_ref(i)? {
                    ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                    ValueRef::Blob(b) => format!("<{} bytes>", b.len()),
                    _ => String::new(),
                });
            }
            let mut cells: Vec<Cell> = Vec::with_capacity(n);
            for (i, text) in texts.iter().enumerate() {
                cells.push(match r.get_ref(i)? {
                    ValueRef::Null => Cell::Null,
                    ValueRef::Integer(v) => Cell::I64(v),
                    ValueRef::Real(v) => Cell::F64(v),
                    ValueRef::Text(_) | ValueRef::Blob(_) => Cell::Str(text),
                });
            }
            if !out.row(&cells).map_err(written)? {
                break;
            }
        }
        Ok(())
    }

    /// The one-line message for `e`, a failure of `sql`.
    fn explain(&self, sql: &str, e: Failure, limits: &Limits) -> String {
        use rusqlite::ffi::ErrorCode;
        const CHECK: &str = "check the query's SQL (SQLite's dialect; docs/sql.md has examples)";
        let e = match e {
            Failure::Empty => return "the query is empty — give one SELECT".into(),
            Failure::NotAQuery => return format!("the statement is not a query that returns rows — {READ_ONLY}"),
            Failure::Output(e) => return format!("cannot write the result: {e}"),
            Failure::Sqlite(e) => e,
        };
        match e {
            rusqlite::Error::MultipleStatement => {
                "the query holds more than one statement — give one (a `;` ends it)".into()
            }
            rusqlite::Error::SqlInputError { msg, offset, .. } => {
                let (line, column) = position(sql, usize::try_from(offset).unwrap_or(0));
                let help = self.help(&msg).unwrap_or_else(|| CHECK.into());
                format!("SQL error at line {line}, column {column}: {msg} — {help}")
            }
            rusqlite::Error::SqliteFailure(f, msg) => {
                let msg = msg.unwrap_or_else(|| f.to_string());
                match f.code {
                    ErrorCode::OperationInterrupted => format!(
                        "the query ran past its limit of {} s and was stopped — narrow it (a WHERE on run, host or \
                         step_num, a LIMIT), or give it longer",
                        limits.timeout.map_or(0, |t| t.as_secs())
                    ),
                    _ if f.code == ErrorCode::AuthorizationForStatementDenied || msg == "not authorized" => {
                        format!("{msg}: the query would write, attach a file or change a setting — {READ_ONLY}")
                    }
                    ErrorCode::TooBig => format!(
                        "{msg}: a value the query makes is longer than {} MiB — make it from fewer or shorter values",
                        MAX_VALUE_BYTES >> 20
                    ),
                    ErrorCode::OutOfMemory => format!(
                        "the query needed more than SQLite's {} MiB of memory — narrow it (a WHERE, fewer columns, a \
                         LIMIT)",
                        crate::MAX_HEAP_BYTES >> 20
                    ),
                    _ => match self.help(&msg) {
                        Some(help) => format!("{msg} — {help}"),
                        None => format!("SQL error: {msg} — {CHECK}"),
                    },
                }
            }
            other => format!("SQL error: {other} — {CHECK}"),
        }
    }

    /// What to do about SQLite's message `msg`, where stepscope knows better.
    fn help(&self, msg: &str) -> Option<String> {
        if let Some(name) = msg.strip_prefix("no such table: ") {
            let name = name.trim_start_matches("main.");
            return Some(if TABLES.contains(&name) {
                format!("these profiles have no rows of {name} (docs/tables.md says what each table holds)")
            } else {
                format!("the tables are {} (docs/tables.md lists their columns)", TABLES.join(", "))
            });
        }
        if msg.starts_with("no such column: ") {
            let lists: Vec<String> =
                self.tables().iter().map(|(t, cols)| format!("{t}: {}", cols.join(", "))).collect();
            return Some(format!("the columns are {}", lists.join("; ")));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_named_outside_strings_and_comments() {
        assert_eq!(referenced("SELECT * FROM ops JOIN Steps USING (step_num)"), ["steps", "ops"]);
        assert_eq!(referenced("select 'ops' -- kernels\n/* events */ from \"op_events\""), ["op_events"]);
        assert_eq!(referenced("SELECT 'it''s ops' FROM [memory]"), ["memory"]);
        assert_eq!(referenced("SELECT count(*) FROM 'ops'"), ["ops"]);
        assert!(referenced("SELECT opsx FROM x_ops").is_empty());
        assert_eq!(referenced("SELECT name, sql FROM sqlite_schema"), TABLES);
        assert_eq!(referenced("SELECT 1 FROM ops2"), Vec::<&str>::new());
    }

    #[test]
    fn columns_named_unless_a_star_or_natural_join_reads_unnamed_ones() {
        let named = |sql: &str| columns_named(sql);
        assert_eq!(
            named("SELECT name, count(*) FROM \"events\" WHERE duration_ps > 10 -- host\nGROUP BY 1"),
            Some(vec![
                "by".into(),
                "count".into(),
                "duration_ps".into(),
                "events".into(),
                "from".into(),
                "group".into(),
                "name".into(),
                "select".into(),
                "where".into()
            ])
        );
        // A product and count(*) read no unnamed column.
        assert!(named("SELECT self_ps*2, count( * ) FROM ops").is_some());
        assert!(named("SELECT 'a * b', x FROM ops /* SELECT * */").is_some());
        // Every column: a star after SELECT, DISTINCT, a comma or a table's name.
        for sql in [
            "SELECT * FROM ops",
            "select distinct * from ops",
            "SELECT name, * FROM ops",
            "SELECT o.* FROM ops o",
            "SELECT name FROM ops NATURAL JOIN kernels",
            "SELECT name FROM pragma_table_info('ops')",
        ] {
            assert_eq!(named(sql), None, "{sql}");
        }
    }

    #[test]
    fn positions_count_lines_and_characters() {
        assert_eq!(position("SELECT\n  é FORM", 12), (2, 5));
        assert_eq!(position("SELECT", 0), (1, 1));
    }
}
