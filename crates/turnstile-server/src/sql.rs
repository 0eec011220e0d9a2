//! Statements: parsed with `sqlparser` (MySQL dialect) into a [`Plan`] — which of the
//! supported statements it is, its table, and its arguments (literals, or the prepared
//! statement's parameters).
//!
//! The supported shapes are recognised by their *template*: the statement with every literal
//! and `?` replaced by `?` and its table by `t`, printed by the parser and upper-cased (so
//! `select c from sbtest7 where id=42` and `SELECT c FROM sbtest1 WHERE id = ?` are both
//! `SELECT C FROM T WHERE ID = ?`). A statement whose template is not one of them is not
//! supported (error 1235), so nothing outside the list can be half-understood and answered
//! wrongly. Statements whose shape varies (INSERT's row list, CREATE TABLE, SET, SHOW, USE,
//! DROP) are checked on the syntax tree. The text is checked before it is parsed (executable
//! comments, expression depth, hex literals) by the `precheck` module.

use std::ops::ControlFlow;

use sqlparser::ast::{
    self, visit_expressions_mut, visit_relations_mut, ColumnOption, DataType, Expr, Ident,
    ObjectName, ObjectNamePart, SetExpr, ShowStatementFilter, Statement, TableConstraint,
    UnaryOperator, Value,
};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

pub use crate::plan_error::PlanError;
use crate::plan_error::{excerpt, not_supported};
use crate::precheck;
pub use crate::precheck::{open_executable_comments, MAX_EXPRESSION_DEPTH};

/// A literal value, or a bound parameter's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Lit {
    /// `NULL`.
    Null,
    /// An integer.
    Int(i64),
    /// A number that is not an i64, kept as written: an exact decimal (`5.0`) or, with an
    /// exponent, an approximate one (`1e3`).
    Num(String),
    /// A bound DOUBLE or FLOAT parameter.
    Double(f64),
    /// A string.
    Str(Vec<u8>),
    /// A hexadecimal or bit-value literal (`X'41'`, `0x41`, `b'1000001'`): a binary string,
    /// and an unsigned integer in a numeric context.
    Bits(Vec<u8>),
}

/// One argument of a statement: a literal written in it, or the n-th `?` of a prepared one.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// Written in the statement.
    Lit(Lit),
    /// The prepared statement's parameter number n (from 0).
    Param(usize),
}

/// A column of the sysbench table named in an INSERT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    /// `id`.
    Id,
    /// `k`.
    K,
    /// `c`.
    C,
    /// `pad`.
    Pad,
}

/// Which variables a `SET` statement assigns.
#[derive(Debug, Clone, PartialEq)]
pub enum SetKind {
    /// `SET GLOBAL name = value` (or `SET @@global.name = value`).
    Global(String),
    /// `SET autocommit = value`.
    Autocommit,
    /// `SET NAMES …`, or a session variable the server accepts and ignores.
    Ignored(String),
}

/// What a statement is.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// `SELECT c FROM t WHERE id = ?`.
    PointSelect,
    /// `SELECT c FROM t WHERE id BETWEEN ? AND ?`.
    RangeSelect,
    /// `SELECT SUM(k) FROM t WHERE id BETWEEN ? AND ?`.
    SumRange,
    /// `SELECT [DISTINCT] c FROM t WHERE id BETWEEN ? AND ? ORDER BY c`.
    OrderRange {
        /// `DISTINCT`.
        distinct: bool,
    },
    /// `SELECT COUNT(*) FROM t`.
    Count,
    /// `UPDATE t SET k = k + ? WHERE id = ?`.
    UpdateK,
    /// `UPDATE t SET c = ? WHERE id = ?`.
    UpdateC,
    /// `DELETE FROM t WHERE id = ?`.
    Delete,
    /// `INSERT INTO t (cols) VALUES (…), (…)`: arguments row by row.
    Insert {
        /// The columns named, in order.
        cols: Vec<Col>,
        /// Rows of values.
        rows: usize,
    },
    /// `CREATE TABLE t (…)` with the sysbench schema.
    CreateTable {
        /// `IF NOT EXISTS`.
        if_not_exists: bool,
        /// The names of its indexes on `k`, upper-cased.
        indexes: Vec<String>,
    },
    /// `CREATE INDEX name ON t(k)`: the k index always exists; the name (upper-cased) is
    /// remembered, to refuse a second of that name as MySQL does.
    CreateIndexK {
        /// The index's name.
        name: String,
    },
    /// `DROP TABLE [IF EXISTS] t, …`.
    DropTable {
        /// The tables.
        names: Vec<String>,
        /// `IF EXISTS`.
        if_exists: bool,
    },
    /// `ANALYZE TABLE t, …`.
    Analyze {
        /// The tables.
        names: Vec<String>,
    },
    /// `BEGIN` / `START TRANSACTION [READ ONLY | READ WRITE] [WITH CONSISTENT SNAPSHOT]`.
    Begin {
        /// `READ ONLY`: writes are refused (1792).
        read_only: bool,
    },
    /// `COMMIT`.
    Commit,
    /// `ROLLBACK`.
    Rollback,
    /// `SET …`.
    Set(SetKind),
    /// `USE db`.
    Use(String),
    /// `SELECT @@var, DATABASE(), 1, 'x' …` without a table.
    SelectExprs(Vec<(String, SelectItem)>),
    /// `SHOW DATABASES [LIKE 'p']`.
    ShowDatabases(Option<String>),
    /// `SHOW TABLES [FROM db] [LIKE 'p']`.
    ShowTables(Option<String>),
    /// `SHOW ENGINE {TURNSTILE|INNODB} STATUS`.
    ShowEngineStatus(String),
    /// `SHOW [GLOBAL|SESSION] STATUS [LIKE 'p']`.
    ShowStatus(Option<String>),
    /// `SHOW [GLOBAL|SESSION] VARIABLES [LIKE 'p']`.
    ShowVariables(Option<String>),
}

/// One item of a table-less `SELECT`.
#[derive(Debug, Clone, PartialEq)]
pub enum SelectItem {
    /// `@@name` (scope prefix removed, lower-cased).
    Var(String),
    /// `DATABASE()`.
    Database,
    /// A literal (index into the arguments).
    Arg(usize),
}

/// A parsed statement.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// What it is.
    pub kind: Kind,
    /// Its table, for table statements.
    pub table: Option<String>,
    /// Its arguments, in the order the statement's kind documents.
    pub args: Vec<Arg>,
    /// `?` placeholders (the prepared statement's parameter count).
    pub params: usize,
}

/// The server's one database. MySQL would keep each database's tables apart; rather than let
/// two names share one set of tables, every other name is unknown (1049).
pub const DATABASE: &str = "sbtest";

/// A table's name, refusing a qualifier naming another database as MySQL does (1146).
fn table_name(n: &ObjectName) -> Result<String, PlanError> {
    let t = last_ident(n);
    match n.0.len() {
        1 => Ok(t),
        2 if n.0[0].to_string().trim_matches('`') == DATABASE => Ok(t),
        _ => Err(PlanError::Mysql(
            1146,
            format!("Table '{}' doesn't exist", n.to_string().replace('`', "")),
        )),
    }
}
/// Parses one statement.
pub fn plan(sql: &str) -> Result<Plan, PlanError> {
    let text = precheck::text_to_parse(sql)?;
    let sql = &*text;
    // Two MySQL forms sqlparser does not read: one this server runs, one it refuses.
    let words: Vec<String> = sql
        .trim()
        .trim_end_matches(';')
        .split_ascii_whitespace()
        .map(str::to_ascii_uppercase)
        .collect();
    if words == ["START", "TRANSACTION", "WITH", "CONSISTENT", "SNAPSHOT"] {
        return Ok(plan_of(Kind::Begin { read_only: false }));
    }
    if words.ends_with(&["LOCK", "IN", "SHARE", "MODE"].map(String::from)) {
        return Err(not_supported("locking reads (LOCK IN SHARE MODE)", sql));
    }
    // sqlparser 0.59 panics on some input instead of refusing it (its MySQL dialect unwraps
    // the right side of `DIV`: `… WHERE id = 1 DIV`, or a chain of 50 `DIV`s past its
    // recursion limit). A syntax error to the client, not a dropped connection.
    let parsed =
        std::panic::catch_unwind(|| Parser::parse_sql(&MySqlDialect {}, sql)).map_err(|_| {
            PlanError::Syntax(format!(
                "You have an error in your SQL syntax near '{}'",
                excerpt(sql)
            ))
        })?;
    let mut stmts = parsed.map_err(|e| {
        PlanError::Syntax(format!(
            "You have an error in your SQL syntax ({e}) near '{}'",
            excerpt(sql)
        ))
    })?;
    let mut stmt = match stmts.len() {
        1 => stmts.pop().expect("one statement"),
        0 => return Err(PlanError::Syntax("Query was empty".into())),
        _ => return Err(not_supported("more than one statement in a query", sql)),
    };
    // Structural cases first (their AST is checked directly).
    if let Some(p) = structural(&stmt, sql)? {
        return Ok(p);
    }
    let (args, params) = extract_args(&mut stmt).map_err(|what| not_supported(&what, sql))?;
    let mut tables = Vec::new();
    let mut bad_table = None;
    let _ = visit_relations_mut(&mut stmt, |n: &mut ObjectName| {
        match table_name(n) {
            Ok(t) => tables.push(t),
            Err(e) => bad_table = Some(e),
        }
        *n = ObjectName(vec![ObjectNamePart::Identifier(Ident::new("t"))]);
        ControlFlow::<()>::Continue(())
    });
    if let Some(e) = bad_table {
        return Err(e);
    }
    // Backquotes only quote names: `c` is c (literals, which might hold one, are `?` by now).
    let template = stmt.to_string().to_ascii_uppercase().replace('`', "");
    let kind = match template.as_str() {
        "SELECT C FROM T WHERE ID = ?" => Kind::PointSelect,
        "SELECT C FROM T WHERE ID BETWEEN ? AND ?" => Kind::RangeSelect,
        "SELECT SUM(K) FROM T WHERE ID BETWEEN ? AND ?" => Kind::SumRange,
        "SELECT C FROM T WHERE ID BETWEEN ? AND ? ORDER BY C" => {
            Kind::OrderRange { distinct: false }
        }
        "SELECT DISTINCT C FROM T WHERE ID BETWEEN ? AND ? ORDER BY C" => {
            Kind::OrderRange { distinct: true }
        }
        "SELECT COUNT(*) FROM T" => Kind::Count,
        "UPDATE T SET K = K + ? WHERE ID = ?" => Kind::UpdateK,
        "UPDATE T SET C = ? WHERE ID = ?" => Kind::UpdateC,
        "DELETE FROM T WHERE ID = ?" => Kind::Delete,
        t if t.starts_with("CREATE INDEX ") && t.ends_with(" ON T(K)") => Kind::CreateIndexK {
            name: t["CREATE INDEX ".len()..t.len() - " ON T(K)".len()].to_string(),
        },
        "ANALYZE TABLE T" => Kind::Analyze {
            names: tables.clone(),
        },
        _ => return Err(not_supported("this statement", sql)),
    };
    if tables.len() != 1 {
        return Err(not_supported("this statement", sql));
    }
    Ok(Plan {
        kind,
        table: tables.pop(),
        args,
        params,
    })
}

/// Splits a text statement into a template — each plain literal (an unsigned integer, a quoted
/// string without escapes) replaced by `?` — and the literals in order, so that text statements
/// that differ only by their literals (sysbench's text mode) share one parsed plan, bound like a
/// prepared statement. `None` when the text holds anything this scanner does not read exactly
/// as the parser would (escapes, comments, `?`, backquotes, signs before numbers, other
/// number forms, introducers): such text is planned directly.
pub fn normalize(sql: &str) -> Option<(String, Vec<Lit>)> {
    fn ident(c: u8) -> bool {
        c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'@') || c >= 0x80
    }
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let mut lits = Vec::new();
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"') => {
                if i > 0 && ident(b[i - 1]) {
                    return None; // x'1f', N'…', _utf8'…'
                }
                let start = i + 1;
                let len = b[start..].iter().position(|&c| c == q || c == b'\\')?;
                let end = start + len;
                if b[end] != q || b.get(end + 1) == Some(&q) {
                    return None; // an escape or a doubled quote
                }
                out.push_str(&sql[copied..i]);
                out.push('?');
                lits.push(Lit::Str(b[start..end].to_vec()));
                i = end + 1;
                copied = i;
            }
            b'0'..=b'9' if i == 0 || !ident(b[i - 1]) => {
                let end = i + b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
                if b.get(end).is_some_and(|&c| ident(c) || c == b'.') {
                    return None; // 1.5, 1e3, 0x1f
                }
                let before = sql[..i].trim_end().as_bytes();
                if let [.., p, b'-' | b'+'] = before {
                    if !(ident(*p) || *p == b')') {
                        return None; // a unary sign
                    }
                } else if let [b'-' | b'+'] = before {
                    return None;
                }
                out.push_str(&sql[copied..i]);
                out.push('?');
                lits.push(Lit::Int(sql[i..end].parse().ok()?));
                i = end;
                copied = i;
            }
            b'?' | b'`' | b'#' | b'\\' => return None,
            b'/' if b.get(i + 1) == Some(&b'*') => return None,
            b'-' if b.get(i + 1) == Some(&b'-') => return None,
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied..]);
    Some((out, lits))
}

fn last_ident(n: &ObjectName) -> String {
    match n.0.last() {
        Some(ObjectNamePart::Identifier(i)) => i.value.clone(),
        _ => n.to_string(),
    }
}

/// Replaces every literal and `?` with `?`, returning the arguments in the order the parser's
/// visitor meets them (left to right for the supported statements) and the number of `?`;
/// an error names a literal this server cannot read as MySQL does.
fn extract_args(stmt: &mut Statement) -> Result<(Vec<Arg>, usize), String> {
    let mut args = Vec::new();
    let mut params = 0;
    let mut bad = None;
    // The visitor runs after an expression's children: a sign's operand is already replaced.
    let _ = visit_expressions_mut(stmt, |e: &mut Expr| {
        match e {
            Expr::Value(v) => {
                let arg = match &v.value {
                    Value::Placeholder(_) => {
                        params += 1;
                        Arg::Param(params - 1)
                    }
                    other => match literal(other) {
                        Ok(l) => Arg::Lit(l),
                        Err(what) => {
                            bad = Some(what);
                            return ControlFlow::Break(());
                        }
                    },
                };
                args.push(arg);
                v.value = Value::Placeholder("?".into());
            }
            // `-5`: fold the sign into the number just replaced.
            Expr::UnaryOp {
                op: UnaryOperator::Minus,
                expr,
            } if matches!(args.last(), Some(Arg::Lit(Lit::Int(_) | Lit::Num(_))))
                && matches!(**expr, Expr::Value(_)) =>
            {
                if let Some(Arg::Lit(l)) = args.last_mut() {
                    *l = match &*l {
                        Lit::Int(i) => i.checked_neg().map_or(Lit::Num(format!("-{i}")), Lit::Int),
                        Lit::Num(s) => Lit::Num(negate(s)),
                        other => other.clone(),
                    };
                }
                *e = (**expr).clone();
            }
            // `+5`, `+'x'`: MySQL's unary plus changes nothing.
            Expr::UnaryOp {
                op: UnaryOperator::Plus,
                expr,
            } if matches!(args.last(), Some(Arg::Lit(_))) && matches!(**expr, Expr::Value(_)) => {
                *e = (**expr).clone();
            }
            _ => {}
        }
        ControlFlow::Continue(())
    });
    match bad {
        Some(what) => Err(what),
        None => Ok((args, params)),
    }
}

/// A number written as text, negated (`-(-5)` is `5`).
fn negate(s: &str) -> String {
    match s.strip_prefix('-') {
        Some(rest) => rest.to_string(),
        None => format!("-{}", s.trim_start_matches('+')),
    }
}

/// A literal's value, or why this server cannot read it as MySQL does.
fn literal(v: &Value) -> Result<Lit, String> {
    Ok(match v {
        Value::Null => Lit::Null,
        Value::Number(n, _) => match n.parse::<i64>() {
            Ok(i) => Lit::Int(i),
            Err(_) => Lit::Num(n.clone()),
        },
        Value::Boolean(b) => Lit::Int(*b as i64),
        Value::SingleQuotedString(s)
        | Value::DoubleQuotedString(s)
        | Value::NationalStringLiteral(s) => Lit::Str(s.as_bytes().to_vec()),
        Value::HexStringLiteral(h) => Lit::Bits(hex_bytes(h).ok_or("this hexadecimal literal")?),
        Value::SingleQuotedByteStringLiteral(b) => {
            Lit::Bits(bit_bytes(b).ok_or("this bit-value literal")?)
        }
        other => return Err(format!("the literal {other}")),
    })
}

/// `X'4142'` / `0x4142`: the bytes, an odd count of digits padded with a leading 0 (as
/// MySQL pads `0x…`; it refuses an odd `X'…'`, which the tokenizer does not tell apart).
fn hex_bytes(h: &str) -> Option<Vec<u8>> {
    let padded = if h.len() % 2 == 1 {
        format!("0{h}")
    } else {
        h.to_string()
    };
    (0..padded.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(padded.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `b'1000001'`: the bits as bytes, right-aligned (`b'1000001'` is `A`).
fn bit_bytes(b: &str) -> Option<Vec<u8>> {
    if !b.bytes().all(|c| c == b'0' || c == b'1') {
        return None;
    }
    let mut out = vec![0u8; b.len().div_ceil(8)];
    let n = out.len();
    for (i, c) in b.bytes().rev().enumerate() {
        if c == b'1' {
            out[n - 1 - i / 8] |= 1 << (i % 8);
        }
    }
    Some(out)
}

fn plan_of(kind: Kind) -> Plan {
    Plan {
        kind,
        table: None,
        args: Vec::new(),
        params: 0,
    }
}

/// Statements recognised on the syntax tree.
fn structural(stmt: &Statement, sql: &str) -> Result<Option<Plan>, PlanError> {
    Ok(Some(match stmt {
        Statement::StartTransaction {
            modes, statements, ..
        } if statements.is_empty() => {
            let mut read_only = false;
            for m in modes {
                match m {
                    ast::TransactionMode::AccessMode(a) => {
                        read_only = *a == ast::TransactionAccessMode::ReadOnly
                    }
                    ast::TransactionMode::IsolationLevel(_) => {
                        return Err(not_supported("an isolation level (READ COMMITTED)", sql))
                    }
                }
            }
            plan_of(Kind::Begin { read_only })
        }
        Statement::Commit { chain: false, .. } => plan_of(Kind::Commit),
        Statement::Rollback {
            chain: false,
            savepoint: None,
        } => plan_of(Kind::Rollback),
        Statement::Use(u) => {
            let name = match u {
                ast::Use::Object(n) | ast::Use::Database(n) | ast::Use::Schema(n) => last_ident(n),
                _ => return Err(not_supported("this form of USE", sql)),
            };
            plan_of(Kind::Use(name))
        }
        Statement::ShowDatabases {
            terse: false,
            history: false,
            show_options,
        } if show_options.show_in.is_none() => {
            plan_of(Kind::ShowDatabases(show_like(show_options, sql)?))
        }
        // One database: `FROM db` names it, whatever the name (as `USE` accepts any).
        Statement::ShowTables {
            terse: false,
            history: false,
            extended: false,
            full: false,
            external: false,
            show_options,
        } => {
            if let Some(ast::ShowStatementIn {
                parent_name: Some(db),
                ..
            }) = &show_options.show_in
            {
                let db = last_ident(db);
                if db != DATABASE {
                    return Err(PlanError::Mysql(1049, format!("Unknown database '{db}'")));
                }
            }
            plan_of(Kind::ShowTables(show_like(show_options, sql)?))
        }
        Statement::ShowDatabases { .. } | Statement::ShowTables { .. } => {
            return Err(not_supported("this form of SHOW", sql))
        }
        Statement::ShowStatus { filter, .. } => plan_of(Kind::ShowStatus(like(filter, sql)?)),
        Statement::ShowVariables { filter, .. } => plan_of(Kind::ShowVariables(like(filter, sql)?)),
        Statement::ShowVariable { variable } => {
            let words: Vec<String> = variable
                .iter()
                .map(|i| i.value.to_ascii_uppercase())
                .collect();
            match words.iter().map(String::as_str).collect::<Vec<_>>()[..] {
                // Its `Type` column names the engine as asked (MySQL's says `InnoDB`).
                ["ENGINE", "TURNSTILE", "STATUS"] => {
                    plan_of(Kind::ShowEngineStatus("turnstile".into()))
                }
                ["ENGINE", "INNODB", "STATUS"] => plan_of(Kind::ShowEngineStatus("InnoDB".into())),
                _ => return Err(not_supported("this SHOW statement", sql)),
            }
        }
        Statement::Drop {
            object_type: ast::ObjectType::Table,
            if_exists,
            names,
            cascade: false,
            restrict: false,
            purge: false,
            temporary: false,
            ..
        } => plan_of(Kind::DropTable {
            names: names.iter().map(table_name).collect::<Result<_, _>>()?,
            if_exists: *if_exists,
        }),
        Statement::CreateTable(ct) => create_table(ct, sql)?,
        Statement::Insert(ins) => insert(ins, sql)?,
        Statement::Set(set) => set_statement(set, sql)?,
        Statement::Query(q) => match select_exprs(q) {
            Some(p) => p,
            None => return Ok(None),
        },
        _ => return Ok(None),
    }))
}

/// The `LIKE` pattern of `SHOW DATABASES|TABLES`; other options are refused rather than
/// ignored.
fn show_like(o: &ast::ShowStatementOptions, sql: &str) -> Result<Option<String>, PlanError> {
    if o.starts_with.is_some() || o.limit.is_some() || o.limit_from.is_some() {
        return Err(not_supported("this SHOW option", sql));
    }
    match &o.filter_position {
        None => Ok(None),
        Some(
            ast::ShowStatementFilterPosition::Infix(f)
            | ast::ShowStatementFilterPosition::Suffix(f),
        ) => like(&Some(f.clone()), sql),
    }
}

fn like(filter: &Option<ShowStatementFilter>, sql: &str) -> Result<Option<String>, PlanError> {
    match filter {
        None => Ok(None),
        Some(ShowStatementFilter::Like(p)) => Ok(Some(p.clone())),
        Some(_) => Err(not_supported("this SHOW filter (only LIKE)", sql)),
    }
}

/// `SELECT @@version_comment LIMIT 1`, `SELECT DATABASE()`, `SELECT 1`: no table, only
/// system variables, `DATABASE()` and literals; `LIMIT 1` (the mysql client's) allowed.
fn select_exprs(q: &ast::Query) -> Option<Plan> {
    let SetExpr::Select(s) = &*q.body else {
        return None;
    };
    if !s.from.is_empty()
        || s.selection.is_some()
        || s.distinct.is_some()
        || q.order_by.is_some()
        || s.having.is_some()
        || s.projection.is_empty()
    {
        return None;
    }
    match &q.limit_clause {
        None => {}
        Some(ast::LimitClause::LimitOffset {
            limit: Some(Expr::Value(v)),
            offset: None,
            limit_by,
        }) if limit_by.is_empty() && matches!(&v.value, Value::Number(n, _) if n != "0") => {}
        Some(_) => return None,
    }
    let mut items = Vec::new();
    let mut args = Vec::new();
    for item in &s.projection {
        let (expr, alias) = match item {
            ast::SelectItem::UnnamedExpr(e) => (e, None),
            ast::SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value.clone())),
            _ => return None,
        };
        let (name, it) = match expr {
            Expr::Identifier(i) if i.value.starts_with("@@") => (
                i.value.clone(),
                SelectItem::Var(i.value[2..].to_ascii_lowercase()),
            ),
            Expr::CompoundIdentifier(parts)
                if parts.len() == 2
                    && ["@@session", "@@global", "@@local"]
                        .contains(&parts[0].value.to_ascii_lowercase().as_str()) =>
            {
                (
                    format!("{}.{}", parts[0].value, parts[1].value),
                    SelectItem::Var(parts[1].value.to_ascii_lowercase()),
                )
            }
            Expr::Function(f)
                if f.name.to_string().eq_ignore_ascii_case("database")
                    && f.to_string().eq_ignore_ascii_case("DATABASE()") =>
            {
                ("DATABASE()".to_string(), SelectItem::Database)
            }
            Expr::Value(v) if !matches!(v.value, Value::Placeholder(_)) => {
                args.push(Arg::Lit(literal(&v.value).ok()?));
                (v.value.to_string(), SelectItem::Arg(args.len() - 1))
            }
            _ => return None,
        };
        items.push((alias.unwrap_or(name), it));
    }
    Some(Plan {
        kind: Kind::SelectExprs(items),
        table: None,
        args,
        params: 0,
    })
}

fn col_of(name: &str) -> Option<Col> {
    match name.to_ascii_lowercase().as_str() {
        "id" => Some(Col::Id),
        "k" => Some(Col::K),
        "c" => Some(Col::C),
        "pad" => Some(Col::Pad),
        _ => None,
    }
}

fn insert(ins: &ast::Insert, sql: &str) -> Result<Plan, PlanError> {
    let ast::TableObject::TableName(name) = &ins.table else {
        return Err(not_supported("INSERT into a table function", sql));
    };
    if ins.or.is_some()
        || ins.ignore
        || ins.on.is_some()
        || ins.returning.is_some()
        || ins.partitioned.is_some()
        || !ins.after_columns.is_empty()
        || !ins.assignments.is_empty()
        || ins.replace_into
    {
        return Err(not_supported("this form of INSERT", sql));
    }
    let mut cols = Vec::new();
    for c in &ins.columns {
        let col = col_of(&c.value).ok_or_else(|| {
            PlanError::Mysql(
                1054,
                format!("Unknown column '{}' in 'field list'", c.value),
            )
        })?;
        if cols.contains(&col) {
            return Err(PlanError::Mysql(
                1110,
                format!("Column '{}' specified twice", c.value),
            ));
        }
        cols.push(col);
    }
    let Some(source) = &ins.source else {
        return Err(not_supported("INSERT without VALUES", sql));
    };
    let SetExpr::Values(values) = &*source.body else {
        return Err(not_supported("INSERT … SELECT", sql));
    };
    if source.order_by.is_some() || source.limit_clause.is_some() || source.with.is_some() {
        return Err(not_supported("this form of INSERT", sql));
    }
    // No column list: every column, unless every row is `()`, a row of defaults.
    if ins.columns.is_empty() && values.rows.iter().any(|r| !r.is_empty()) {
        cols = vec![Col::Id, Col::K, Col::C, Col::Pad];
    }
    let mut args = Vec::new();
    let mut params = 0;
    for (i, row) in values.rows.iter().enumerate() {
        if row.len() != cols.len() {
            return Err(PlanError::ValueCount(i + 1));
        }
        for e in row {
            let lit = |v: &Value| literal(v).map_err(|what| not_supported(&what, sql));
            args.push(match e {
                Expr::Value(v) => match &v.value {
                    Value::Placeholder(_) => {
                        params += 1;
                        Arg::Param(params - 1)
                    }
                    other => Arg::Lit(lit(other)?),
                },
                Expr::UnaryOp { op, expr } => match (op, &**expr) {
                    (UnaryOperator::Plus, Expr::Value(v)) => Arg::Lit(lit(&v.value)?),
                    (UnaryOperator::Minus, Expr::Value(v)) => match lit(&v.value)? {
                        Lit::Int(i) => {
                            Arg::Lit(i.checked_neg().map_or(Lit::Num(format!("-{i}")), Lit::Int))
                        }
                        Lit::Num(s) => Arg::Lit(Lit::Num(negate(&s))),
                        _ => return Err(not_supported("this INSERT value", sql)),
                    },
                    _ => return Err(not_supported("this INSERT value", sql)),
                },
                _ => return Err(not_supported("an expression as an INSERT value", sql)),
            });
        }
    }
    Ok(Plan {
        kind: Kind::Insert {
            cols,
            rows: values.rows.len(),
        },
        table: Some(table_name(name)?),
        args,
        params,
    })
}

/// Accepts exactly the sysbench schema: `id INTEGER NOT NULL AUTO_INCREMENT` primary key,
/// `k INTEGER DEFAULT '0' NOT NULL`, `c CHAR(120) DEFAULT '' NOT NULL`, `pad CHAR(60) DEFAULT
/// '' NOT NULL`, and an index on `k` (sysbench's `KEY k_1(k)` form); table options (`ENGINE`)
/// are ignored. Other defaults, nullable columns and collations are refused.
fn create_table(ct: &ast::CreateTable, sql: &str) -> Result<Plan, PlanError> {
    let refuse = |why: &str| not_supported(&format!("this table definition ({why})"), sql);
    if ct.temporary || ct.query.is_some() || ct.like.is_some() || ct.clone.is_some() {
        return Err(refuse("only the sysbench schema"));
    }
    let options = match &ct.table_options {
        ast::CreateTableOptions::None => Vec::new(),
        ast::CreateTableOptions::Plain(o)
        | ast::CreateTableOptions::Options(o)
        | ast::CreateTableOptions::With(o)
        | ast::CreateTableOptions::TableProperties(o) => o.iter().map(|o| o.to_string()).collect(),
    };
    for o in &options {
        // A transactional engine and a comment change nothing; any other option would
        // (MyISAM keeps rolled-back writes, AUTO_INCREMENT = n starts elsewhere).
        let u = o.to_ascii_uppercase().replace(' ', "");
        if !(u == "ENGINE=INNODB" || u.starts_with("COMMENT")) {
            return Err(refuse(&format!("table option {o}")));
        }
    }
    let names: Vec<String> = ct
        .columns
        .iter()
        .map(|c| c.name.value.to_ascii_lowercase())
        .collect();
    if names != ["id", "k", "c", "pad"] {
        return Err(refuse("columns must be id, k, c, pad"));
    }
    let mut pk = false;
    for col in &ct.columns {
        let ok = matches!(
            (col.name.value.to_ascii_lowercase().as_str(), &col.data_type),
            ("id" | "k", DataType::Int(_) | DataType::Integer(_))
                | (
                    "c",
                    DataType::Char(Some(ast::CharacterLength::IntegerLength {
                        length: 120,
                        ..
                    }))
                )
                | (
                    "pad",
                    DataType::Char(Some(ast::CharacterLength::IntegerLength { length: 60, .. }))
                )
        );
        if !ok {
            return Err(refuse(&format!(
                "column {} must be {}",
                col.name.value,
                match col.name.value.to_ascii_lowercase().as_str() {
                    "c" => "CHAR(120)",
                    "pad" => "CHAR(60)",
                    _ => "INTEGER",
                }
            )));
        }
        let name = col.name.value.to_ascii_lowercase();
        let (mut not_null, mut auto_inc, mut default) = (false, false, None);
        for o in &col.options {
            match &o.option {
                ColumnOption::NotNull => not_null = true,
                ColumnOption::Null => return Err(refuse("columns must be NOT NULL")),
                ColumnOption::Default(e) => default = Some(e.to_string()),
                ColumnOption::DialectSpecific(_)
                    if o.option.to_string().eq_ignore_ascii_case("AUTO_INCREMENT") =>
                {
                    auto_inc = true
                }
                ColumnOption::Unique {
                    is_primary: true, ..
                } if names[0] == "id" => {
                    if col.name.value.eq_ignore_ascii_case("id") {
                        pk = true;
                    } else {
                        return Err(refuse("the primary key must be id"));
                    }
                }
                ColumnOption::Unique { .. } => return Err(refuse("no other unique key")),
                ColumnOption::Generated { .. } | ColumnOption::ForeignKey { .. } => {
                    return Err(refuse("no generated or foreign-key columns"))
                }
                ColumnOption::Collation(_) | ColumnOption::CharacterSet(_) => {
                    return Err(refuse("the default character set and collation"))
                }
                ColumnOption::Comment(_) => {}
                _ => return Err(refuse(&format!("column option {}", o.option))),
            }
        }
        // The engine gives an omitted value the sysbench schema's default and refuses NULL,
        // so only that schema's defaults can be honoured: any other is refused, not ignored.
        let honoured = match name.as_str() {
            "id" => auto_inc && default.is_none(),
            "k" => not_null && matches!(default.as_deref(), Some("0" | "'0'")),
            _ => not_null && default.as_deref() == Some("''"),
        };
        if !honoured {
            return Err(refuse(match name.as_str() {
                "id" => "id must be AUTO_INCREMENT, without a default",
                "k" => "k must be DEFAULT '0' NOT NULL",
                _ => "c and pad must be DEFAULT '' NOT NULL",
            }));
        }
    }
    let mut indexes = Vec::new();
    for c in &ct.constraints {
        match c {
            TableConstraint::PrimaryKey { columns, .. }
                if columns.len() == 1 && columns[0].to_string().eq_ignore_ascii_case("id") =>
            {
                pk = true
            }
            // An unnamed index is named after its column, as MySQL names it.
            TableConstraint::Index { name, columns, .. }
                if columns.len() == 1 && columns[0].to_string().eq_ignore_ascii_case("k") =>
            {
                let name = name.as_ref().map_or("k".to_string(), |n| n.value.clone());
                if indexes.contains(&name.to_ascii_uppercase()) {
                    return Err(PlanError::Mysql(
                        1061,
                        format!("Duplicate key name '{name}'"),
                    ));
                }
                indexes.push(name.to_ascii_uppercase());
            }
            _ => return Err(refuse("only PRIMARY KEY (id) and an index on k")),
        }
    }
    if !pk {
        return Err(refuse("id must be the primary key"));
    }
    Ok(Plan {
        kind: Kind::CreateTable {
            if_not_exists: ct.if_not_exists,
            indexes,
        },
        table: Some(
            table_name(&ct.name).map_err(|_| {
                PlanError::Mysql(1049, format!("Unknown database '{}'", ct.name.0[0]))
            })?,
        ),
        args: Vec::new(),
        params: 0,
    })
}

/// Session variables whose value changes no answer of this server (buffer sizes, the
/// client's character set names, notes and checks it has nothing for): set and ignored.
const IGNORED_SESSION_VARIABLES: [&str; 22] = [
    "tmp_table_size",
    "max_heap_table_size",
    "sort_buffer_size",
    "join_buffer_size",
    "read_buffer_size",
    "read_rnd_buffer_size",
    "character_set_client",
    "character_set_results",
    "character_set_connection",
    "collation_connection",
    "time_zone",
    "sql_notes",
    "sql_warnings",
    "foreign_key_checks",
    "unique_checks",
    "session_track_schema",
    "session_track_state_change",
    "session_track_system_variables",
    "session_track_transaction_info",
    "optimizer_switch",
    "profiling",
    "long_query_time",
];

/// `SET [SESSION] name = value` for a variable other than autocommit: accepted where the
/// value changes nothing here, refused as MySQL refuses it (1621 read-only, 1193 unknown),
/// and refused as not supported (1235) where ignoring it would change answers.
fn session_variable(name: &str, value: &Expr, sql: &str) -> Result<SetKind, PlanError> {
    if IGNORED_SESSION_VARIABLES.contains(&name) {
        return Ok(SetKind::Ignored(name.to_string()));
    }
    match name {
        // This server always answers as strict mode does; a mode keeping strictness is
        // what it runs already.
        "sql_mode" => {
            let v = value.to_string().to_ascii_uppercase();
            if v.contains("STRICT_TRANS_TABLES") || v.contains("STRICT_ALL_TABLES") {
                Ok(SetKind::Ignored(name.to_string()))
            } else {
                Err(not_supported(
                    "an sql_mode without STRICT_TRANS_TABLES",
                    sql,
                ))
            }
        }
        "max_allowed_packet" | "net_buffer_length" => Err(PlanError::Mysql(
            1621,
            format!("SESSION variable '{name}' is read-only. Use SET GLOBAL to assign the value"),
        )),
        "wait_timeout"
        | "interactive_timeout"
        | "net_read_timeout"
        | "net_write_timeout"
        | "lock_wait_timeout"
        | "innodb_lock_wait_timeout"
        | "transaction_isolation"
        | "tx_isolation"
        | "transaction_read_only"
        | "max_execution_time"
        | "sql_select_limit"
        | "auto_increment_increment"
        | "auto_increment_offset"
        | "sql_auto_is_null"
        | "big_tables"
        | "sql_safe_updates"
        | "character_set_database"
        | "collation_database" => Err(not_supported(
            &format!("setting {name} (its default is in force)"),
            sql,
        )),
        _ => Err(PlanError::Mysql(
            1193,
            format!("Unknown system variable '{name}'"),
        )),
    }
}

fn set_statement(set: &ast::Set, sql: &str) -> Result<Plan, PlanError> {
    match set {
        ast::Set::SetNames { .. } | ast::Set::SetNamesDefault {} => {
            Ok(plan_of(Kind::Set(SetKind::Ignored("NAMES".into()))))
        }
        ast::Set::SingleAssignment {
            scope,
            hivevar: false,
            variable,
            values,
        } => {
            let parts: Vec<String> = variable
                .0
                .iter()
                .map(|p| match p {
                    ObjectNamePart::Identifier(i) => i.value.to_ascii_lowercase(),
                    other => other.to_string().to_ascii_lowercase(),
                })
                .collect();
            let (global, name) = match (scope, &parts[..]) {
                (Some(ast::ContextModifier::Global), [n]) => (true, n.clone()),
                (None | Some(ast::ContextModifier::Session), [n]) if !n.starts_with('@') => {
                    (false, n.clone())
                }
                (None, [n]) if n.starts_with("@@") => (false, n[2..].to_string()),
                (None, [s, n]) if s == "@@global" => (true, n.clone()),
                (None, [s, n]) if s == "@@session" || s == "@@local" => (false, n.clone()),
                _ => {
                    return Err(not_supported(
                        "this SET (user variables, other scopes)",
                        sql,
                    ))
                }
            };
            if values.len() != 1 {
                return Err(not_supported("SET with a list of values", sql));
            }
            let written = values[0].clone();
            let mut value = written.clone();
            let mut stmt_like = Statement::Set(ast::Set::SingleAssignment {
                scope: None,
                hivevar: false,
                variable: ObjectName(vec![]),
                values: vec![value.clone()],
            });
            let (args, params) =
                extract_args(&mut stmt_like).map_err(|what| not_supported(&what, sql))?;
            if let Statement::Set(ast::Set::SingleAssignment { values, .. }) = &stmt_like {
                value = values[0].clone();
            }
            let kind = if global {
                // The value: one literal or one parameter, or a bare word (`= flifo`, `= ON`).
                let args = match (&value, &args[..]) {
                    (Expr::Value(_), [a]) => vec![a.clone()],
                    (Expr::Identifier(i), []) => {
                        vec![Arg::Lit(Lit::Str(i.value.clone().into_bytes()))]
                    }
                    _ => {
                        return Err(not_supported(
                            "an expression as a global variable's value",
                            sql,
                        ))
                    }
                };
                return Ok(Plan {
                    kind: Kind::Set(SetKind::Global(name)),
                    table: None,
                    args,
                    params,
                });
            } else if name == "autocommit" {
                let args = match (&value, &args[..]) {
                    (Expr::Value(_), [a]) => vec![a.clone()],
                    (Expr::Identifier(i), []) => {
                        vec![Arg::Lit(Lit::Str(i.value.clone().into_bytes()))]
                    }
                    _ => return Err(not_supported("this autocommit value", sql)),
                };
                return Ok(Plan {
                    kind: Kind::Set(SetKind::Autocommit),
                    table: None,
                    args,
                    params,
                });
            } else if name.starts_with("turnstile") {
                return Err(PlanError::Mysql(
                    1229,
                    format!(
                        "Variable '{name}' is a GLOBAL variable and should be set with SET GLOBAL"
                    ),
                ));
            } else {
                session_variable(&name, &written, sql)?
            };
            Ok(plan_of(Kind::Set(kind)))
        }
        _ => Err(not_supported("this form of SET", sql)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused_as_too_deep<T>(r: &Result<T, PlanError>) -> bool {
        matches!(r, Err(PlanError::NotSupported(m)) if m.contains("deeper than"))
    }

    #[test]
    fn a_statement_too_deep_is_refused_before_it_is_parsed() {
        // The guard's cases are in `precheck`; this one runs through the planner, whose
        // parser would overflow the stack on it.
        let chain = format!(
            "SELECT c FROM sbtest1 WHERE id = 1{}",
            " IS NULL".repeat(200_000)
        );
        assert!(refused_as_too_deep(&plan(&chain)));
    }

    #[test]
    fn a_div_without_a_right_side_is_a_syntax_error_not_a_panic() {
        for sql in [
            "SELECT c FROM sbtest1 WHERE id = 1 DIV",
            &format!("SELECT c FROM sbtest1 WHERE id = 1{}", " DIV 1".repeat(60)),
        ] {
            assert!(matches!(plan(sql), Err(PlanError::Syntax(_))), "{sql}");
        }
        // A whole one parses (what the server then makes of it is another matter).
        assert!(!matches!(
            plan("SELECT c FROM sbtest1 WHERE id = 7 DIV 2"),
            Err(PlanError::Syntax(_))
        ));
    }

    #[test]
    fn the_deepest_text_admitted_plans_within_a_connection_threads_stack() {
        // The server's connection threads run with `THREAD_STACK`; the parser's visitors and
        // the tree's drop recurse once per level. The longest chains the guard lets through,
        // for operators of one, two and four tokens and for calls chained by an operator.
        let head = "SELECT c FROM t WHERE id = 1";
        let room = MAX_EXPRESSION_DEPTH - 8;
        for (op, tokens) in [
            ("+1", 2),
            (" IS NULL", 2),
            (" IN (1)", 4),
            (" DIV 1", 2),
            // Four tokens at the chain's level, and two more inside the call.
            ("+POW(1,2)", 6),
        ] {
            let sql = format!("{head}{}", op.repeat(room / tokens));
            let planned = std::thread::Builder::new()
                .stack_size(crate::THREAD_STACK)
                .spawn(move || plan(&sql).map(|_| ()))
                .unwrap()
                .join()
                .expect("no stack overflow");
            assert!(!refused_as_too_deep(&planned), "{op}: {planned:?}");
        }
        // Separators end a run: a long list is not deep.
        let list = format!("SELECT c FROM t WHERE id IN (1{})", ",-1".repeat(5_000));
        assert!(!refused_as_too_deep(&plan(&list)));
        let rows = format!(
            "INSERT INTO sbtest1 (k, c, pad) VALUES (1,'a','b'){}",
            ",(1,'a','b')".repeat(5_000)
        );
        assert!(plan(&rows).is_ok());
    }

    #[test]
    fn an_executable_comment_is_part_of_the_statement() {
        // The statement is what MySQL runs: the condition inside the comment applies.
        for (sql, template) in [
            (
                "DELETE FROM sbtest1 WHERE id = 3 /*! AND k = 999 */",
                "DELETE FROM sbtest1 WHERE id = 3 AND k = 999",
            ),
            (
                "SELECT c FROM sbtest1 WHERE id = 3 /*! OR 1=1 */",
                "SELECT c FROM sbtest1 WHERE id = 3 OR 1=1",
            ),
        ] {
            assert!(
                matches!(plan(sql), Err(PlanError::NotSupported(_))),
                "{sql}"
            );
            assert_eq!(
                plan(sql),
                plan(template).map_err(|_| plan(sql).unwrap_err())
            );
        }
        assert_eq!(
            kind("UPDATE sbtest1 SET k=k+1 /*!80000 WHERE id = 5 */"),
            Kind::UpdateK
        );
    }

    fn kind(sql: &str) -> Kind {
        plan(sql).unwrap_or_else(|e| panic!("{sql}: {e:?}")).kind
    }

    #[test]
    fn every_sysbench_statement_is_recognised_with_its_table_and_arguments() {
        let p = plan("SELECT c FROM sbtest3 WHERE id=?").unwrap();
        assert_eq!(
            (p.kind, p.table.as_deref(), p.args, p.params),
            (Kind::PointSelect, Some("sbtest3"), vec![Arg::Param(0)], 1)
        );
        let p = plan("select c from sbtest1 where id between 10 and ?").unwrap();
        assert_eq!(p.kind, Kind::RangeSelect);
        assert_eq!(p.args, vec![Arg::Lit(Lit::Int(10)), Arg::Param(0)]);
        assert_eq!(
            kind("SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?"),
            Kind::SumRange
        );
        assert_eq!(
            kind("SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c"),
            Kind::OrderRange { distinct: false }
        );
        assert_eq!(
            kind("SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c"),
            Kind::OrderRange { distinct: true }
        );
        let p = plan("UPDATE sbtest1 SET k=k+1 WHERE id=?").unwrap();
        assert_eq!(
            (p.kind, p.args),
            (Kind::UpdateK, vec![Arg::Lit(Lit::Int(1)), Arg::Param(0)])
        );
        let p = plan("UPDATE sbtest1 SET c=? WHERE id=?").unwrap();
        assert_eq!(
            (p.kind, p.args),
            (Kind::UpdateC, vec![Arg::Param(0), Arg::Param(1)])
        );
        assert_eq!(kind("DELETE FROM sbtest1 WHERE id=?"), Kind::Delete);
        let p = plan("INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)").unwrap();
        assert_eq!(p.params, 4);
        let p = plan("INSERT INTO sbtest1(k, c, pad) VALUES(1,'a','b'),(2,'c','d')").unwrap();
        assert_eq!(
            p.kind,
            Kind::Insert {
                cols: vec![Col::K, Col::C, Col::Pad],
                rows: 2
            }
        );
        assert_eq!(p.args[4], Arg::Lit(Lit::Str(b"c".to_vec())));
        assert_eq!(
            kind("CREATE INDEX k_1 ON sbtest1(k)"),
            Kind::CreateIndexK { name: "K_1".into() }
        );
        assert_eq!(kind("SELECT COUNT(*) FROM sbtest1"), Kind::Count);
        assert_eq!(kind("BEGIN"), Kind::Begin { read_only: false });
        assert_eq!(kind("START TRANSACTION"), Kind::Begin { read_only: false });
        assert_eq!(
            kind("START TRANSACTION READ ONLY"),
            Kind::Begin { read_only: true }
        );
        assert_eq!(
            kind("START TRANSACTION WITH CONSISTENT SNAPSHOT"),
            Kind::Begin { read_only: false }
        );
        assert_eq!(kind("COMMIT"), Kind::Commit);
        assert_eq!(kind("ROLLBACK"), Kind::Rollback);
        assert_eq!(
            kind("DROP TABLE IF EXISTS sbtest1"),
            Kind::DropTable {
                names: vec!["sbtest1".into()],
                if_exists: true
            }
        );
        assert_eq!(
            kind("ANALYZE TABLE sbtest1"),
            Kind::Analyze {
                names: vec!["sbtest1".into()]
            }
        );
    }

    #[test]
    fn sysbench_create_table_is_accepted_and_other_schemas_are_not() {
        let sb = "CREATE TABLE sbtest1(\n  id INTEGER NOT NULL AUTO_INCREMENT,\n  k INTEGER DEFAULT '0' NOT NULL,\n  c CHAR(120) DEFAULT '' NOT NULL,\n  pad CHAR(60) DEFAULT '' NOT NULL,\n  PRIMARY KEY (id)\n) /*! ENGINE = innodb */ ";
        assert_eq!(
            kind(sb),
            Kind::CreateTable {
                if_not_exists: false,
                indexes: Vec::new(),
            }
        );
        for bad in [
            "CREATE TABLE t (id INT PRIMARY KEY, k INT, c CHAR(100), pad CHAR(60))",
            "CREATE TABLE t (id INT, k INT, c CHAR(120), pad CHAR(60))",
            "CREATE TABLE t (a INT PRIMARY KEY)",
        ] {
            assert!(
                matches!(plan(bad), Err(PlanError::NotSupported(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn client_chatter_and_administration_are_recognised() {
        assert_eq!(
            kind("select @@version_comment limit 1"),
            Kind::SelectExprs(vec![(
                "@@version_comment".into(),
                SelectItem::Var("version_comment".into())
            )])
        );
        assert_eq!(
            kind("SELECT DATABASE()"),
            Kind::SelectExprs(vec![("DATABASE()".into(), SelectItem::Database)])
        );
        assert_eq!(
            kind("SHOW ENGINE TURNSTILE STATUS"),
            Kind::ShowEngineStatus("turnstile".into())
        );
        assert_eq!(
            kind("SHOW GLOBAL STATUS LIKE 'turnstile%'"),
            Kind::ShowStatus(Some("turnstile%".into()))
        );
        let p = plan("SET GLOBAL turnstile_policy = 'flifo'").unwrap();
        assert_eq!(
            (p.kind, p.args),
            (
                Kind::Set(SetKind::Global("turnstile_policy".into())),
                vec![Arg::Lit(Lit::Str(b"flifo".to_vec()))]
            )
        );
        let p = plan("SET @@global.turnstile_concurrency=16").unwrap();
        assert_eq!(
            (p.kind, p.args),
            (
                Kind::Set(SetKind::Global("turnstile_concurrency".into())),
                vec![Arg::Lit(Lit::Int(16))]
            )
        );
        assert_eq!(
            kind("SET tmp_table_size=2*1024*1024*1024"),
            Kind::Set(SetKind::Ignored("tmp_table_size".into()))
        );
        assert_eq!(kind("SET autocommit=1"), Kind::Set(SetKind::Autocommit));
        assert_eq!(kind("USE sbtest"), Kind::Use("sbtest".into()));
    }

    #[test]
    fn anything_else_is_not_supported_rather_than_half_understood() {
        for sql in [
            "SELECT c FROM sbtest1 WHERE k=5",
            "SELECT c, pad FROM sbtest1 WHERE id=1",
            "SELECT c FROM sbtest1 WHERE id=1 OR id=2",
            "SELECT AVG(id) FROM (SELECT * FROM sbtest1 FORCE KEY (PRIMARY) LIMIT 10) t",
            "UPDATE sbtest1 SET k=k+1 WHERE id>5",
            "DELETE FROM sbtest1",
            "SELECT c FROM a JOIN b ON a.id = b.id WHERE id = 1",
            "SET @x = 1",
            "SHOW ENGINE FOO STATUS",
        ] {
            assert!(
                matches!(plan(sql), Err(PlanError::NotSupported(_))),
                "{sql}: {:?}",
                plan(sql)
            );
        }
        assert!(matches!(plan("SELEC 1"), Err(PlanError::Syntax(_))));
    }

    #[test]
    fn normalizing_text_gives_the_same_plan_and_arguments_as_parsing_it() {
        for sql in [
            "SELECT c FROM sbtest1 WHERE id=4993",
            "SELECT c FROM sbtest12 WHERE id BETWEEN 5 AND 104",
            "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 5 AND 104",
            "UPDATE sbtest1 SET k=k+1 WHERE id=7",
            "UPDATE sbtest1 SET c='12-34' WHERE id=7",
            "INSERT INTO sbtest1 (id, k, c, pad) VALUES (0, 4993, '1-2', \"3-4\")",
            "INSERT INTO sbtest1(k, c, pad) VALUES(1,'a','b'),(2,'c','d')",
            "SET GLOBAL turnstile_tickets = 500",
            "SET GLOBAL turnstile_policy = 'flifo'",
        ] {
            let (template, lits) = normalize(sql).unwrap_or_else(|| panic!("{sql}"));
            let direct = plan(sql).unwrap();
            let templ = plan(&template).unwrap();
            assert_eq!(
                (templ.kind, templ.table),
                (direct.kind, direct.table),
                "{sql}"
            );
            assert_eq!(templ.params, lits.len(), "{sql}");
            let bound: Vec<Lit> = templ
                .args
                .iter()
                .map(|a| match a {
                    Arg::Param(i) => lits[*i].clone(),
                    Arg::Lit(l) => l.clone(),
                })
                .collect();
            let want: Vec<Lit> = direct
                .args
                .iter()
                .map(|a| match a {
                    Arg::Lit(l) => l.clone(),
                    Arg::Param(_) => unreachable!("text"),
                })
                .collect();
            assert_eq!(bound, want, "{sql}");
        }
        for sql in [
            "SELECT c FROM sbtest1 WHERE id = -5",
            "SELECT c FROM sbtest1 WHERE id = 1.5",
            "SELECT c FROM sbtest1 WHERE id = 0x1f",
            "UPDATE sbtest1 SET c='it''s' WHERE id=1",
            "UPDATE sbtest1 SET c='a\\'b' WHERE id=1",
            "SELECT c FROM sbtest1 WHERE id=? ",
            "SELECT c FROM `sbtest1` WHERE id=1",
            "SELECT c FROM sbtest1 /* x */ WHERE id=1",
            "SELECT c FROM sbtest1 WHERE id=1 -- x",
            "SELECT _utf8'x'",
        ] {
            assert_eq!(normalize(sql), None, "{sql}");
        }
        // Digits inside a name stay in the template.
        assert_eq!(
            normalize("SELECT COUNT(*) FROM sbtest12").unwrap(),
            ("SELECT COUNT(*) FROM sbtest12".to_string(), vec![])
        );
    }

    #[test]
    fn a_negative_literal_keeps_its_sign() {
        let p = plan("SELECT c FROM sbtest1 WHERE id = -5").unwrap();
        assert_eq!(p.args, vec![Arg::Lit(Lit::Int(-5))]);
    }
}
