//! A differential check of `turnstile serve` against MySQL: every statement of the corpus in
//! `tests/corpus/*.txt` carries the answer MySQL 8.0 and MariaDB 10.11 give it (strict
//! `sql_mode`, their default), and turnstile must give the same one, or refuse the statement
//! with error 1235 (not supported) where the corpus marks that as acceptable — never a
//! silently different answer. The format is documented at the top of
//! `tests/corpus/statements.txt`.
//!
//! * The default test runs the corpus against turnstile serve, in-process, on a loopback port
//!   and a fresh data directory.
//! * An ignored test runs the same corpus against a real MariaDB (`mariadbd`, started here on a
//!   temporary data directory), where the turnstile markers do not apply: it checks that the
//!   expected answers are MySQL's, not ones written to fit turnstile. It finds `mariadbd` at
//!   `$TURNSTILE_MARIADBD`, else on `PATH`, else at `/usr/sbin/mariadbd`, and
//!   `mariadb-install-db` at `$TURNSTILE_MARIADB_INSTALL_DB`, else beside it or on `PATH`:
//!   `cargo test --release -p turnstile-server --test corpus -- --ignored mariadb`. Without
//!   installing MariaDB, Debian's packages unpacked anywhere do: `apt-get download
//!   mariadb-server-core mariadb-client-core`, `dpkg -x` each into DIR, then
//!   `TURNSTILE_MARIADBD=DIR/usr/sbin/mariadbd`.
//!
//! Both report every difference at once (file, line, statement, expected, got).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mysql::prelude::{Protocol, Queryable};
use mysql::{Conn, OptsBuilder, QueryResult, Value};
use turnstile::{GateConfig, Policy};
use turnstile_server::{Server, ServerConfig};

/// MySQL's "not supported" (`ER_NOT_SUPPORTED_YET`): turnstile's refusal.
const NOT_SUPPORTED: u16 = 1235;

/// The corpus holds at least this many statements (a guard against a file cut short).
const MIN_STATEMENTS: usize = 300;

// ---------------------------------------------------------------------------------------------
// The corpus

/// One expected value of a result row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Cell {
    /// SQL `NULL`.
    Null,
    /// A value, as the text protocol sends it.
    Text(Vec<u8>),
    /// Any value but `NULL` (server-specific: `@@version_comment`, a message).
    Any,
}

/// What a statement answers.
#[derive(Debug, Clone, PartialEq)]
enum Expected {
    /// An OK packet.
    Ok { affected: u64, insert_id: u64 },
    /// A result set.
    Rows {
        rows: Vec<Vec<Cell>>,
        /// Compared as a multiset: the server may send them in any order.
        any_order: bool,
    },
    /// An error, by its code (messages differ between servers and versions).
    Error(u16),
}

/// One statement of the corpus and its answer.
#[derive(Debug, Clone)]
struct Case {
    file: String,
    /// The line of its `>`.
    line: usize,
    sql: String,
    /// The statement as the corpus writes it (`{{…}}` not expanded), for reports.
    written: String,
    /// `Some`: run as a prepared statement (binary protocol) with these parameters.
    params: Option<Vec<Value>>,
    expected: Expected,
    /// turnstile may answer 1235 in place of `expected`.
    may_refuse: bool,
    /// The `{ … }` block it belongs to, numbered through the corpus.
    block: Option<usize>,
}

/// A case being read: its answer is known only once the next case (or block) starts.
struct Partial {
    line: usize,
    sql: String,
    written: String,
    continuable: bool,
    params: Option<Vec<Value>>,
    expected: Option<Expected>,
    any_order: bool,
    may_refuse: bool,
}

/// Reads every `*.txt` file of `dir`, in name order.
fn load_corpus(dir: &Path) -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read the corpus directory {}: {e}", dir.display()))
        .map(|e| e.expect("a corpus directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus file in {}", dir.display());
    let mut cases = Vec::new();
    let mut blocks = 0;
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&f)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
        cases.extend(parse_corpus(&name, &text, &mut blocks));
    }
    cases
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// Parses one corpus file; `blocks` numbers blocks across files.
fn parse_corpus(file: &str, text: &str, blocks: &mut usize) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut cur: Option<Partial> = None;
    let mut block: Option<usize> = None;
    let fail = |line: usize, why: &str| -> ! { panic!("{file}:{line}: {why}") };
    let finish = |cur: &mut Option<Partial>, cases: &mut Vec<Case>, block: Option<usize>| {
        let Some(p) = cur.take() else { return };
        let mut expected = p
            .expected
            .unwrap_or_else(|| fail(p.line, "a statement without its expected answer"));
        if p.any_order {
            match &mut expected {
                Expected::Rows { rows, any_order } => {
                    if rows.iter().flatten().any(|c| *c == Cell::Any) {
                        fail(p.line, "`any order` cannot be used with `*` values");
                    }
                    *any_order = true;
                }
                _ => fail(p.line, "`any order` applies to rows only"),
            }
        }
        cases.push(Case {
            file: file.to_string(),
            line: p.line,
            sql: p.sql,
            written: p.written,
            params: p.params,
            expected,
            may_refuse: p.may_refuse,
            block,
        });
    };
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim_end_matches('\r');
        if let Some(sql) = line.strip_prefix("> ").or((line == ">").then_some("")) {
            finish(&mut cur, &mut cases, block);
            cur = Some(Partial {
                line: n,
                sql: expand(sql),
                written: sql.to_string(),
                continuable: true,
                params: None,
                expected: None,
                any_order: false,
                may_refuse: false,
            });
            continue;
        }
        if let Some(more) = line.strip_prefix(">> ").or((line == ">>").then_some("")) {
            match &mut cur {
                Some(p) if p.continuable => {
                    p.sql.push('\n');
                    p.sql.push_str(&expand(more));
                    p.written.push('\n');
                    p.written.push_str(more);
                }
                _ => fail(n, "`>>` continues a statement: it must follow `>` or `>>`"),
            }
            continue;
        }
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        match line {
            "{" | "}" => {
                finish(&mut cur, &mut cases, block);
                if line == "{" {
                    if block.is_some() {
                        fail(n, "blocks do not nest");
                    }
                    *blocks += 1;
                    block = Some(*blocks);
                } else if block.take().is_none() {
                    fail(n, "`}` without `{`");
                }
                continue;
            }
            _ => {}
        }
        let Some(p) = &mut cur else {
            fail(n, &format!("not inside a case: {line:?}"))
        };
        p.continuable = false;
        let set = |p: &mut Partial, e: Expected| {
            if p.expected.is_some() {
                fail(n, "a second expected answer");
            }
            p.expected = Some(e);
        };
        if let Some(rest) = line.strip_prefix("params:") {
            if p.params.is_some() {
                fail(n, "a second `params:` line");
            }
            p.params = Some(parse_params(rest).unwrap_or_else(|e| fail(n, &e)));
        } else if let Some(row) = line.strip_prefix("| ") {
            let cells: Vec<Cell> = row
                .split('\t')
                .map(|v| parse_cell(v).unwrap_or_else(|e| fail(n, &e)))
                .collect();
            match &mut p.expected {
                Some(Expected::Rows { rows, .. }) if !rows.is_empty() => {
                    if rows[0].len() != cells.len() {
                        fail(n, "rows of different widths");
                    }
                    rows.push(cells);
                }
                Some(_) => fail(n, "a row after another kind of answer"),
                None => {
                    p.expected = Some(Expected::Rows {
                        rows: vec![cells],
                        any_order: false,
                    })
                }
            }
        } else if line == "empty" {
            set(
                p,
                Expected::Rows {
                    rows: Vec::new(),
                    any_order: false,
                },
            );
        } else if line == "ok" || line.starts_with("ok ") {
            let (mut affected, mut insert_id) = (0, 0);
            for field in line[2..].split_whitespace() {
                let (key, value) = field
                    .split_once('=')
                    .unwrap_or_else(|| fail(n, "`ok` takes affected=N insert_id=M"));
                let value: u64 = value
                    .parse()
                    .unwrap_or_else(|_| fail(n, &format!("not a number: {value}")));
                match key {
                    "affected" => affected = value,
                    "insert_id" => insert_id = value,
                    _ => fail(n, &format!("unknown `ok` field {key}")),
                }
            }
            set(
                p,
                Expected::Ok {
                    affected,
                    insert_id,
                },
            );
        } else if let Some(code) = line.strip_prefix("error ") {
            let code = code
                .trim()
                .parse()
                .unwrap_or_else(|_| fail(n, "`error` takes a MySQL error code"));
            set(p, Expected::Error(code));
        } else if line == "any order" {
            p.any_order = true;
        } else if line == "turnstile may refuse" {
            p.may_refuse = true;
        } else {
            fail(n, &format!("unrecognised line {line:?}"));
        }
    }
    finish(&mut cur, &mut cases, block);
    if block.is_some() {
        fail(text.lines().count(), "a block is not closed");
    }
    cases
}

/// Expands `{{TEXT*N}}` into TEXT repeated N times (long values stay countable).
fn expand(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        let inner = &rest[start + 2..start + len];
        let Some((text, times)) = inner
            .rsplit_once('*')
            .and_then(|(t, n)| Some((t, n.trim().parse::<usize>().ok()?)))
        else {
            panic!("`{{{{{inner}}}}}` is not `{{{{TEXT*N}}}}`");
        };
        out.push_str(&rest[..start]);
        out.push_str(&text.repeat(times));
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out
}

/// A value: `NULL`, `*` (anything but NULL), `'quoted'` (with escapes) or text as it is.
fn parse_cell(v: &str) -> Result<Cell, String> {
    Ok(match v {
        "NULL" => Cell::Null,
        "*" => Cell::Any,
        _ if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') => {
            Cell::Text(unquote(&v[1..v.len() - 1])?)
        }
        "" => return Err("an empty value is written ''".into()),
        _ => Cell::Text(expand(v).into_bytes()),
    })
}

/// The inside of a quoted value: `\\ \' \t \n \r \0 \xHH` escapes.
fn unquote(s: &str) -> Result<Vec<u8>, String> {
    let s = expand(s);
    let mut out = Vec::new();
    let mut it = s.bytes();
    while let Some(b) = it.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        out.push(match it.next() {
            Some(b'\\') => b'\\',
            Some(b'\'') => b'\'',
            Some(b't') => b'\t',
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b'0') => 0,
            Some(b'x') => {
                let hex: Vec<u8> = it.by_ref().take(2).collect();
                std::str::from_utf8(&hex)
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("bad \\x escape in '{s}'"))?
            }
            other => {
                return Err(format!(
                    "unknown escape \\{:?} in '{s}'",
                    other.map(char::from)
                ))
            }
        });
    }
    Ok(out)
}

/// `params:` — `TYPE VALUE` pairs: `int -5`, `uint 5`, `double 5.0`, `string 'text'`,
/// `bytes 'te\x00t'`, `datetime '2020-01-02 03:04:05'`, `null`.
fn parse_params(s: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    let mut rest = s.trim_start();
    while !rest.is_empty() {
        let (ty, after) = rest.split_once(' ').unwrap_or((rest, ""));
        rest = after.trim_start();
        if ty == "null" {
            out.push(Value::NULL);
            continue;
        }
        // The value: a quoted one runs to its closing quote, a bare one to the next space.
        let (value, after) = if let Some(q) = rest.strip_prefix('\'') {
            let mut end = None;
            let b = q.as_bytes();
            let mut i = 0;
            while i < b.len() {
                match b[i] {
                    b'\\' => i += 2,
                    b'\'' => {
                        end = Some(i);
                        break;
                    }
                    _ => i += 1,
                }
            }
            let end = end.ok_or_else(|| format!("unterminated quoted value in {s:?}"))?;
            (Some(unquote(&q[..end])?), &q[end + 1..])
        } else {
            (None, rest.split_once(' ').map_or("", |(_, a)| a))
        };
        let bare = rest.split(' ').next().unwrap_or("");
        let number = |what: &str| format!("{ty} takes {what}, not {bare:?}");
        out.push(match (ty, value) {
            ("int", None) => Value::Int(bare.parse().map_err(|_| number("an integer"))?),
            ("uint", None) => Value::UInt(bare.parse().map_err(|_| number("an integer"))?),
            ("double", None) => Value::Double(bare.parse().map_err(|_| number("a number"))?),
            ("string" | "bytes", Some(v)) => Value::Bytes(v),
            ("datetime", Some(v)) => datetime(&v)?,
            _ => return Err(format!("bad parameter `{ty}` in {s:?}")),
        });
        rest = after.trim_start();
    }
    Ok(out)
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff]` as the binary protocol's DATETIME.
fn datetime(v: &[u8]) -> Result<Value, String> {
    let s = std::str::from_utf8(v).map_err(|e| e.to_string())?;
    let bad = || format!("not a datetime: {s:?}");
    let (date, time) = s.split_once(' ').ok_or_else(bad)?;
    let (time, micros) = time.split_once('.').unwrap_or((time, "0"));
    let d: Vec<u32> = date
        .split('-')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let t: Vec<u32> = time
        .split(':')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let (&[y, mo, day], &[h, mi, sec]) = (&d[..], &t[..]) else {
        return Err(bad());
    };
    Ok(Value::Date(
        u16::try_from(y).map_err(|_| bad())?,
        mo as u8,
        day as u8,
        h as u8,
        mi as u8,
        sec as u8,
        micros.parse().map_err(|_| bad())?,
    ))
}

// ---------------------------------------------------------------------------------------------
// Running it

/// What a server answered.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Ok {
        affected: u64,
        insert_id: u64,
    },
    Rows(Vec<Vec<Option<Vec<u8>>>>),
    Error(u16),
    /// Not an answer: the connection broke, or the driver refused what came back.
    Failed(String),
}

fn failure(e: mysql::Error) -> Answer {
    match e {
        mysql::Error::MySqlError(e) => Answer::Error(e.code),
        other => Answer::Failed(other.to_string()),
    }
}

/// A value as text, as the text protocol sends it. The binary protocol's typed values are
/// written back as MySQL prints them (DATE and a DATETIME at midnight look alike there: the
/// corpus reads no DATE column).
fn text_of(v: Value) -> Option<Vec<u8>> {
    Some(match v {
        Value::NULL => return None,
        Value::Bytes(b) => b,
        Value::Int(i) => i.to_string().into_bytes(),
        Value::UInt(u) => u.to_string().into_bytes(),
        Value::Float(f) => f.to_string().into_bytes(),
        Value::Double(d) => d.to_string().into_bytes(),
        Value::Date(y, mo, d, h, mi, s, us) => {
            let mut t = format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}");
            if us > 0 {
                let _ = write!(t, ".{us:06}");
            }
            t.into_bytes()
        }
        Value::Time(neg, d, h, mi, s, us) => {
            let mut t = format!(
                "{}{:02}:{mi:02}:{s:02}",
                if neg { "-" } else { "" },
                d * 24 + u32::from(h)
            );
            if us > 0 {
                let _ = write!(t, ".{us:06}");
            }
            t.into_bytes()
        }
    })
}

/// Reads a whole response: one OK, one result set, or an error (also one sent in place of
/// the end of the rows). The corpus sends one statement at a time: a second result set is a
/// failure.
fn collect<T: Protocol>(r: mysql::Result<QueryResult<'_, '_, '_, T>>) -> Answer {
    let mut qr = match r {
        Ok(qr) => qr,
        Err(e) => return failure(e),
    };
    let mut answer = None;
    while let Some(mut set) = qr.iter() {
        if answer.is_some() {
            return Answer::Failed("more than one result set".into());
        }
        if set.columns().as_ref().is_empty() {
            answer = Some(Answer::Ok {
                affected: set.affected_rows(),
                insert_id: set.last_insert_id().unwrap_or(0),
            });
            continue;
        }
        let mut rows = Vec::new();
        for row in set.by_ref() {
            match row {
                Ok(row) => rows.push(row.unwrap().into_iter().map(text_of).collect()),
                Err(e) => return failure(e),
            }
        }
        answer = Some(Answer::Rows(rows));
    }
    answer.unwrap_or_else(|| Answer::Failed("no answer".into()))
}

fn run_case(conn: &mut Conn, case: &Case) -> Answer {
    match &case.params {
        None => collect(conn.query_iter(&case.sql)),
        Some(p) => collect(conn.exec_iter(&case.sql, p.clone())),
    }
}

fn cell_matches(want: &Cell, got: &Option<Vec<u8>>) -> bool {
    match (want, got) {
        (Cell::Null, None) | (Cell::Any, Some(_)) => true,
        (Cell::Text(w), Some(g)) => w == g,
        _ => false,
    }
}

fn matches(want: &Expected, got: &Answer) -> bool {
    match (want, got) {
        (
            Expected::Ok {
                affected,
                insert_id,
            },
            Answer::Ok {
                affected: a,
                insert_id: i,
            },
        ) => affected == a && insert_id == i,
        (Expected::Error(w), Answer::Error(g)) => w == g,
        (Expected::Rows { rows, any_order }, Answer::Rows(got)) => {
            if rows.len() != got.len() || rows.iter().zip(got).any(|(w, g)| w.len() != g.len()) {
                return false;
            }
            if *any_order {
                let mut w_rows: Vec<Vec<Option<Vec<u8>>>> = rows
                    .iter()
                    .map(|r| {
                        r.iter()
                            .map(|c| match c {
                                Cell::Text(t) => Some(t.clone()),
                                _ => None,
                            })
                            .collect()
                    })
                    .collect();
                let mut g_rows = got.clone();
                w_rows.sort();
                g_rows.sort();
                return w_rows == g_rows;
            }
            rows.iter()
                .zip(got)
                .all(|(w, g)| w.iter().zip(g).all(|(w, g)| cell_matches(w, g)))
        }
        _ => false,
    }
}

/// A value as the corpus would write it, cut short when long.
fn show_value(v: Option<&[u8]>) -> String {
    let Some(v) = v else {
        return "NULL".into();
    };
    let plain = std::str::from_utf8(v).ok().filter(|s| {
        !s.is_empty()
            && s != &"NULL"
            && s != &"*"
            && !s.starts_with('\'')
            && s.chars().all(|c| !c.is_control())
    });
    let mut out = match plain {
        Some(s) => s.to_string(),
        None => {
            let mut q = String::from("'");
            for ch in String::from_utf8_lossy(v).chars() {
                match ch {
                    '\\' => q.push_str("\\\\"),
                    '\'' => q.push_str("\\'"),
                    '\t' => q.push_str("\\t"),
                    '\n' => q.push_str("\\n"),
                    '\r' => q.push_str("\\r"),
                    c if c.is_control() => {
                        let _ = write!(q, "\\x{:02x}", c as u32);
                    }
                    c => q.push(c),
                }
            }
            q.push('\'');
            q
        }
    };
    if out.chars().count() > 72 {
        out = format!(
            "{}…({} bytes)",
            out.chars().take(60).collect::<String>(),
            v.len()
        );
    }
    out
}

/// Rows as the corpus writes them, on one line: `| a ⇥ b  | c ⇥ d`, or `empty`.
fn show_rows(rows: Vec<Vec<String>>) -> String {
    if rows.is_empty() {
        return "empty".into();
    }
    let rows: Vec<String> = rows
        .into_iter()
        .map(|cells| format!("| {}", cells.join(" ⇥ ")))
        .collect();
    rows.join("  ")
}

fn show_expected(e: &Expected) -> String {
    match e {
        Expected::Ok {
            affected,
            insert_id,
        } => format!("ok affected={affected} insert_id={insert_id}"),
        Expected::Error(c) => format!("error {c}"),
        Expected::Rows { rows, any_order } => {
            let shown = rows
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|c| match c {
                            Cell::Null => show_value(None),
                            Cell::Text(t) => show_value(Some(t)),
                            Cell::Any => "*".into(),
                        })
                        .collect()
                })
                .collect();
            let order = if *any_order { " (any order)" } else { "" };
            format!("{}{order}", show_rows(shown))
        }
    }
}

fn show_answer(a: &Answer) -> String {
    match a {
        Answer::Ok {
            affected,
            insert_id,
        } => format!("ok affected={affected} insert_id={insert_id}"),
        Answer::Error(c) => format!("error {c}"),
        Answer::Rows(rows) => show_rows(
            rows.iter()
                .map(|r| r.iter().map(|c| show_value(c.as_deref())).collect())
                .collect(),
        ),
        Answer::Failed(why) => format!("no answer: {why}"),
    }
}

/// Which server answers: turnstile may refuse (1235) where a case says so; MySQL may not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Turnstile,
    MySql,
}

#[derive(Default)]
struct Report {
    run: usize,
    refused_as_allowed: usize,
    skipped_in_blocks: usize,
    differences: Vec<String>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} statements run, {} refused with 1235 where allowed, {} skipped after such a \
             refusal in their block; {} differences:",
            self.run,
            self.refused_as_allowed,
            self.skipped_in_blocks,
            self.differences.len()
        )?;
        for d in &self.differences {
            writeln!(f, "{d}")?;
        }
        Ok(())
    }
}

/// Runs every case in order, each file on a fresh connection (state carries over within a
/// file), and records every difference.
fn run_corpus(cases: &[Case], target: Target, connect: &dyn Fn() -> mysql::Result<Conn>) -> Report {
    let mut report = Report::default();
    let mut conn: Option<Conn> = None;
    let mut file = "";
    // A file whose connection could not be made: the rest of it is not run.
    let mut unreachable = false;
    let mut skipping: Option<usize> = None;
    for case in cases {
        if case.file != file {
            file = &case.file;
            conn = None;
            unreachable = false;
        }
        if unreachable {
            continue;
        }
        if case.block.is_some() && case.block == skipping {
            report.skipped_in_blocks += 1;
            continue;
        }
        let c = match &mut conn {
            Some(c) => c,
            None => match connect() {
                Ok(c) => conn.insert(c),
                Err(e) => {
                    report.differences.push(format!(
                        "{}:{}: cannot connect, the rest of the file is not run: {e}",
                        case.file, case.line
                    ));
                    unreachable = true;
                    continue;
                }
            },
        };
        report.run += 1;
        let got = run_case(c, case);
        if let Answer::Failed(_) = got {
            // The connection may be gone: the next case reconnects (its session state is
            // lost, so later differences in this file may follow from this one).
            conn = None;
        }
        if target == Target::Turnstile && case.may_refuse && got == Answer::Error(NOT_SUPPORTED) {
            report.refused_as_allowed += 1;
            if case.block.is_some() {
                skipping = case.block;
            }
            continue;
        }
        if !matches(&case.expected, &got) {
            report.differences.push(format!(
                "{}:{}: {}\n    expected: {}\n    got:      {}",
                case.file,
                case.line,
                case.written.replace('\n', "\n              "),
                show_expected(&case.expected),
                show_answer(&got)
            ));
        }
    }
    report
}

// ---------------------------------------------------------------------------------------------
// Against turnstile serve

#[test]
fn the_corpus_parses_and_holds_enough_statements_of_each_kind() {
    let cases = load_corpus(&corpus_dir());
    assert!(
        cases.len() >= MIN_STATEMENTS,
        "{} statements, fewer than {MIN_STATEMENTS}",
        cases.len()
    );
    let prepared = cases.iter().filter(|c| c.params.is_some()).count();
    let errors = cases
        .iter()
        .filter(|c| matches!(c.expected, Expected::Error(_)))
        .count();
    assert!(prepared >= 20, "{prepared} prepared statements");
    assert!(errors >= 50, "{errors} errors");
    // 1235 is turnstile's answer, never MySQL's: the marker says where it may be given.
    assert!(
        !cases
            .iter()
            .any(|c| c.expected == Expected::Error(NOT_SUPPORTED)),
        "an expected answer of 1235"
    );
}

#[test]
fn every_corpus_statement_answers_as_mysql_does_or_is_refused_where_the_corpus_allows() {
    let cases = load_corpus(&corpus_dir());
    let dir = std::env::temp_dir().join(format!("turnstile-corpus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut config = ServerConfig::new(&dir);
    config.tcp = "127.0.0.1:0".parse().unwrap();
    config.gate = GateConfig::new(Policy::Classic).limit(4);
    config.log = false;
    let server = Server::start(config).unwrap();
    let opts = OptsBuilder::new()
        .ip_or_hostname(Some("127.0.0.1"))
        .tcp_port(server.tcp_addr().port())
        .user(Some("root"))
        .pass(Some(""))
        .db_name(Some("sbtest"))
        .prefer_socket(false);
    let report = run_corpus(&cases, Target::Turnstile, &|| Conn::new(opts.clone()));
    server.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(report.differences.is_empty(), "turnstile serve: {report}");
    eprintln!("turnstile serve: {report}");
}

// ---------------------------------------------------------------------------------------------
// Against MariaDB

/// `mariadbd`: `$TURNSTILE_MARIADBD`, else on `PATH`, else `/usr/sbin/mariadbd`.
fn find_mariadbd() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TURNSTILE_MARIADBD") {
        return Some(PathBuf::from(p));
    }
    find_program("mariadbd", &["/usr/sbin/mariadbd"])
}

fn find_program(name: &str, fallbacks: &[&str]) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .chain(fallbacks.iter().map(PathBuf::from))
        .find(|p| p.is_file())
}

/// Whether this process runs as root: mariadbd then needs `--user=root`.
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|ids| ids.split_whitespace().next() == Some("0"))
        })
        .unwrap_or(false)
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A MariaDB server of its own, on a temporary data directory; killed, and its directory
/// removed, when dropped (also when the test panics).
struct MariaDb {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
    /// Dropped after `drop` has killed the server.
    _dir: TempDir,
}

impl MariaDb {
    fn start(mariadbd: &Path) -> MariaDb {
        let dir = std::env::temp_dir().join(format!("turnstile-mariadb-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let guard = TempDir(dir.clone());
        let data = dir.join("data");
        let socket = dir.join("mariadbd.sock");
        let log = dir.join("error.log");
        let root = running_as_root();
        // The installation's base: `/usr` for `/usr/sbin/mariadbd`. Both programs are told it,
        // so that a package unpacked anywhere (`dpkg -x`) finds its own files.
        let base = mariadbd
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/usr"));
        // `mariadb-install-db` of the same installation, else on PATH; `mysql_install_db` is
        // its older name.
        let install = std::env::var_os("TURNSTILE_MARIADB_INSTALL_DB")
            .map(PathBuf::from)
            .or_else(|| {
                let sibling = base.join("bin/mariadb-install-db");
                sibling.is_file().then_some(sibling)
            })
            .or_else(|| {
                find_program(
                    "mariadb-install-db",
                    &["/usr/bin/mariadb-install-db", "/usr/bin/mysql_install_db"],
                )
            })
            .expect("mariadb-install-db not found (set TURNSTILE_MARIADB_INSTALL_DB)");
        let mut cmd = Command::new(&install);
        cmd.arg("--no-defaults")
            .arg(format!("--basedir={}", base.display()))
            .arg(format!("--datadir={}", data.display()))
            .arg("--auth-root-authentication-method=normal");
        if root {
            cmd.arg("--user=root");
        }
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", install.display()));
        assert!(
            out.status.success(),
            "{} failed: {}\n{}\n{}",
            install.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // A free port for TCP (the tests connect through the socket).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cmd = Command::new(mariadbd);
        cmd.arg("--no-defaults")
            .arg(format!("--basedir={}", base.display()))
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--port={port}"))
            .arg("--skip-networking=0")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--pid-file={}", dir.join("mariadbd.pid").display()))
            .arg(format!("--log-error={}", log.display()))
            .arg(format!("--tmpdir={}", dir.display()))
            // MySQL 8.0's default character set, so that the corpus's non-ASCII CHAR values
            // and case-insensitive ordering are those of a MySQL server (MariaDB 10.11's
            // compiled-in default is latin1).
            .arg("--character-set-server=utf8mb4")
            .arg("--collation-server=utf8mb4_general_ci")
            .arg("--innodb-buffer-pool-size=64M")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if root {
            cmd.arg("--user=root");
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", mariadbd.display()));
        let mut server = MariaDb {
            child,
            socket,
            log,
            _dir: guard,
        };
        server.wait_ready();
        server
    }

    fn opts(&self, db: Option<&str>) -> OptsBuilder {
        OptsBuilder::new()
            .socket(Some(self.socket.to_string_lossy().into_owned()))
            .user(Some("root"))
            .db_name(db)
            .prefer_socket(false)
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (bounded) until the server takes connections; a server that exits, or does not
    /// answer within a minute, fails the test with its error log.
    fn wait_ready(&mut self) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("mariadbd exited ({status}):\n{}", self.error_log());
            }
            if self.socket.exists() && Conn::new(self.opts(None)).is_ok() {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "mariadbd did not accept connections within a minute:\n{}",
                self.error_log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[ignore = "needs MariaDB's mariadbd (sudo apt-get install mariadb-server); run with --ignored"]
fn mariadb_gives_every_answer_the_corpus_expects() {
    let Some(mariadbd) = find_mariadbd() else {
        eprintln!(
            "mariadbd not found (not on PATH, nor /usr/sbin/mariadbd): install MariaDB \
             (sudo apt-get install mariadb-server) or set TURNSTILE_MARIADBD; not run"
        );
        return;
    };
    let cases = load_corpus(&corpus_dir());
    let server = MariaDb::start(&mariadbd);
    let mut admin = Conn::new(server.opts(None)).unwrap();
    admin.query_drop("CREATE DATABASE sbtest").unwrap();
    drop(admin);
    let opts = server.opts(Some("sbtest"));
    let report = run_corpus(&cases, Target::MySql, &|| Conn::new(opts.clone()));
    assert!(
        report.differences.is_empty(),
        "MariaDB ({}): {report}",
        mariadbd.display()
    );
    eprintln!("MariaDB ({}): {report}", mariadbd.display());
}
