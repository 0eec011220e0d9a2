//! The statement executor of one client connection, run on the connection's own thread: each
//! statement maps to handler calls of the engine's [`Connection`], so every row it reads or
//! writes is one enter of the gate:
//!
//! | statement | handler call(s) |
//! |---|---|
//! | `SELECT c … WHERE id=?` | [`Connection::point_select`] |
//! | `SELECT c … BETWEEN ? AND ?` | [`Connection::scan_sent`]: each row is written to the client from inside the cursor (the `RowSend` setting applies) |
//! | `SELECT SUM(k) … BETWEEN` | [`Connection::scan`], summed in the server layer |
//! | `… ORDER BY c`, `SELECT DISTINCT c …` | [`Connection::range_sorted_by_c`], sent after the statement |
//! | `SELECT COUNT(*) FROM t` | [`Connection::count`] |
//! | `UPDATE … SET k=k+1 / c=? WHERE id=?` | [`Connection::update_row`] |
//! | `DELETE … WHERE id=?` | [`Connection::delete_row`] |
//! | `INSERT …` | [`Connection::next_id`] for id 0 or omitted, [`Connection::insert_row`] per row |
//! | `BEGIN` / `COMMIT` / `ROLLBACK` | [`Connection::begin_transaction`] / [`Connection::commit`] / [`Connection::rollback`] |

use std::collections::HashMap;
use std::io;
use std::ops::ControlFlow;
use std::sync::Arc;

use opensrv_mysql::{ErrorKind, OkResponse, QueryResultWriter};
use tokio::io::AsyncWrite;
use turnstile_engine::schema::{Row, C_LEN, PAD_LEN};
use turnstile_engine::{Connection, EngineError};

use crate::admin::{self, SetError, SetValue};
use crate::column_values::{
    id_point, id_range, k_bits, k_of, order_by_collation, stored_id, stored_k, stored_text,
    trim_char,
};
use crate::mysql_error::{engine_err, err, value_err, SqlError};
use crate::outcome::{c_col, ok, result_cols, status_flags, text_col, Cell, Outcome};
use crate::plan_cache::PlanCache;
use crate::sql::{self, Arg, Col, Kind, Lit, Plan, SelectItem, SetKind};
use crate::value;
use crate::wire::{block_on, StmtParams};
use crate::Shared;

/// A connection's state between statements.
pub(crate) struct State {
    conn: Connection,
    /// The open transaction began `READ ONLY`.
    read_only: bool,
    generation: u64,
    pub(crate) db: String,
    pub(crate) prepared: HashMap<u32, Arc<Plan>>,
    pub(crate) next_stmt: u32,
    pub(crate) cache: PlanCache,
}

/// What a connection's statements need besides its state.
pub(crate) struct Ctx {
    pub(crate) shared: Arc<Shared>,
    pub(crate) id: u32,
    /// Parameter counts of the prepared statements, for the packet checks.
    pub(crate) params: StmtParams,
    /// The scramble the greeting sends; the reader checks the login against it.
    pub(crate) salt: [u8; crate::auth::SCRAMBLE_LEN],
}

/// The server has one database ([`sql::DATABASE`]); any other name is unknown, as in MySQL.
pub(crate) fn check_database(db: &str) -> Result<(), SqlError> {
    if db == sql::DATABASE {
        Ok(())
    } else {
        Err(err(
            ErrorKind::ER_BAD_DB_ERROR,
            format!("Unknown database '{db}'"),
        ))
    }
}

impl State {
    /// A new connection's state: no transaction, no database, no prepared statements.
    pub(crate) fn new(conn: Connection, generation: u64) -> State {
        State {
            conn,
            read_only: false,
            generation,
            db: String::new(),
            prepared: HashMap::new(),
            next_stmt: 1,
            cache: PlanCache::default(),
        }
    }

    /// Rebinds to the gate in force if it was replaced, and takes the server-layer settings.
    fn refresh(&mut self, shared: &Shared) {
        if shared.gate.generation() != self.generation {
            let (gate, generation) = shared.gate.current();
            self.conn.rebind(&gate);
            self.generation = generation;
        }
        let rs = shared.row_send();
        if self.conn.row_send() != rs {
            self.conn.set_row_send(rs);
        }
        let cm = shared.commit_mode();
        if self.conn.commit_mode() != cm {
            self.conn.set_commit_mode(cm);
        }
    }

    fn engine_err(&self, e: EngineError) -> SqlError {
        engine_err(&self.db, e)
    }
}

/// Whether a statement changes rows (refused in a READ ONLY transaction).
fn writes(kind: &Kind) -> bool {
    matches!(
        kind,
        Kind::UpdateK | Kind::UpdateC | Kind::Delete | Kind::Insert { .. }
    )
}

/// Resolves a statement's arguments against the bound parameters.
fn args(plan: &Plan, params: &[Lit]) -> Result<Vec<Lit>, SqlError> {
    if params.len() != plan.params {
        return Err(err(
            ErrorKind::ER_WRONG_ARGUMENTS,
            format!(
                "Incorrect arguments to mysqld_stmt_execute: {} parameters bound, {} expected",
                params.len(),
                plan.params
            ),
        ));
    }
    Ok(plan
        .args
        .iter()
        .map(|a| match a {
            Arg::Lit(l) => l.clone(),
            Arg::Param(i) => params[*i].clone(),
        })
        .collect())
}

impl Ctx {
    /// Runs a statement that does not stream its rows.
    fn execute(&self, st: &mut State, plan: &Plan, a: &[Lit]) -> Result<Outcome, SqlError> {
        let table = plan.table.as_deref().unwrap_or("");
        let shared = &*self.shared;
        match &plan.kind {
            Kind::PointSelect => {
                let rows = match id_point(&a[0])? {
                    None => Vec::new(),
                    Some(id) => st
                        .conn
                        .point_select(table, id)
                        .map_err(|e| st.engine_err(e))?
                        .map(|r| vec![Cell::Bytes(trim_char(&r.c).to_vec())])
                        .into_iter()
                        .collect(),
                };
                Ok(Outcome::Rows {
                    cols: vec![c_col()],
                    rows,
                })
            }
            Kind::RangeSelect => unreachable!("streamed"),
            Kind::SumRange => {
                let mut sum = 0i64;
                let mut n = 0u64;
                if let Some((lo, hi)) = id_range(&a[0], &a[1])? {
                    n = st
                        .conn
                        .scan(table, lo, hi, |r| sum += k_of(r))
                        .map_err(|e| st.engine_err(e))?;
                } else if !shared
                    .engine
                    .table_exists(table)
                    .map_err(|e| st.engine_err(e))?
                {
                    return Err(st.engine_err(EngineError::NoSuchTable(table.into())));
                }
                Ok(Outcome::Rows {
                    cols: result_cols(&plan.kind),
                    // SUM over no rows is NULL.
                    rows: vec![vec![if n == 0 {
                        Cell::Null
                    } else {
                        Cell::Decimal(sum.to_string())
                    }]],
                })
            }
            Kind::OrderRange { distinct } => {
                let cs = match id_range(&a[0], &a[1])? {
                    Some((lo, hi)) => st
                        .conn
                        .range_sorted_by_c(table, lo, hi, *distinct)
                        .map_err(|e| st.engine_err(e))?,
                    None => {
                        if !shared
                            .engine
                            .table_exists(table)
                            .map_err(|e| st.engine_err(e))?
                        {
                            return Err(st.engine_err(EngineError::NoSuchTable(table.into())));
                        }
                        Vec::new()
                    }
                };
                Ok(Outcome::Rows {
                    cols: vec![c_col()],
                    rows: order_by_collation(cs.iter().map(|c| trim_char(c)), *distinct)?
                        .into_iter()
                        .map(|c| vec![Cell::Bytes(c)])
                        .collect(),
                })
            }
            Kind::Count => {
                let n = st.conn.count(table).map_err(|e| st.engine_err(e))?;
                Ok(Outcome::Rows {
                    cols: result_cols(&plan.kind),
                    rows: vec![vec![Cell::Int(n as i64)]],
                })
            }
            Kind::UpdateK => {
                // MySQL checks the new value only for a row the WHERE matched: a failure is
                // kept and raised once a row is found, which is then left unchanged.
                let by = value::int_store(&a[0], "k", i64::MIN, i64::MAX)
                    .map_err(|e| value_err("k", e))
                    .and_then(|by| {
                        if by.is_some()
                            && value::int_eq(&a[0]).map_err(|e| value_err("k", e))? != by
                        {
                            return Err(err(
                                ErrorKind::ER_NOT_SUPPORTED_YET,
                                "turnstile serve does not support adding a non-integer to 'k'",
                            ));
                        }
                        Ok(by)
                    });
                let Some(id) = id_point(&a[1])? else {
                    self.check_table(st, table)?;
                    return Ok(ok());
                };
                let mut failed = None;
                let affected = st
                    .conn
                    .update_row(table, id, |r| match &by {
                        Err(e) => failed = Some(err(e.kind, e.msg.clone())),
                        // k + NULL is NULL, which the NOT NULL column refuses.
                        Ok(None) => {
                            failed = Some(err(
                                ErrorKind::ER_BAD_NULL_ERROR,
                                "Column 'k' cannot be null",
                            ))
                        }
                        Ok(Some(by)) => match k_of(r).checked_add(*by) {
                            None => {
                                failed = Some(err(
                                    ErrorKind::ER_DATA_OUT_OF_RANGE,
                                    format!("BIGINT value is out of range in '(`k` + {by})'"),
                                ))
                            }
                            Some(k) => match i32::try_from(k) {
                                Ok(k) => r.k = k_bits(k.into()),
                                Err(_) => {
                                    failed = Some(err(
                                        ErrorKind::ER_WARN_DATA_OUT_OF_RANGE,
                                        "Out of range value for column 'k' at row 1",
                                    ))
                                }
                            },
                        },
                    })
                    .map_err(|e| st.engine_err(e))?;
                match failed {
                    Some(e) => Err(e),
                    None => Ok(Outcome::Ok {
                        affected,
                        insert_id: 0,
                    }),
                }
            }
            Kind::UpdateC => {
                let c = stored_text::<C_LEN>("c", &a[0]);
                let Some(id) = id_point(&a[1])? else {
                    self.check_table(st, table)?;
                    return Ok(ok());
                };
                let mut failed = None;
                let affected = st
                    .conn
                    .update_row(table, id, |r| match &c {
                        Ok(c) => r.c = *c,
                        Err(e) => failed = Some(err(e.kind, e.msg.clone())),
                    })
                    .map_err(|e| st.engine_err(e))?;
                match failed {
                    Some(e) => Err(e),
                    None => Ok(Outcome::Ok {
                        affected,
                        insert_id: 0,
                    }),
                }
            }
            Kind::Delete => {
                let Some(id) = id_point(&a[0])? else {
                    self.check_table(st, table)?;
                    return Ok(ok());
                };
                let affected = st
                    .conn
                    .delete_row(table, id)
                    .map_err(|e| st.engine_err(e))?;
                Ok(Outcome::Ok {
                    affected,
                    insert_id: 0,
                })
            }
            Kind::Insert { cols, rows } => self.insert(st, table, cols, *rows, a),
            Kind::CreateTable {
                if_not_exists,
                indexes,
            } => {
                self.implicit_commit(st)?;
                match shared.engine.create_table(table) {
                    Ok(()) => {
                        // A table of this name dropped before this server knew of its
                        // indexes (by another process) leaves none behind.
                        let io =
                            |e: std::io::Error| err(ErrorKind::ER_UNKNOWN_ERROR, e.to_string());
                        shared.indexes.drop_table(table).map_err(io)?;
                        for name in indexes {
                            shared.indexes.add(table, name).map_err(io)?;
                        }
                        Ok(ok())
                    }
                    Err(EngineError::TableExists(_)) if *if_not_exists => Ok(ok()),
                    Err(e) => Err(st.engine_err(e)),
                }
            }
            Kind::CreateIndexK { name } => {
                // The k index always exists (the engine maintains it with every write); only
                // its names are kept.
                self.implicit_commit(st)?;
                self.check_table(st, table)?;
                match shared.indexes.add(table, name) {
                    Ok(true) => Ok(ok()),
                    Ok(false) => Err(err(
                        ErrorKind::ER_DUP_KEYNAME,
                        format!("Duplicate key name '{}'", name.to_ascii_lowercase()),
                    )),
                    Err(e) => Err(err(ErrorKind::ER_UNKNOWN_ERROR, e.to_string())),
                }
            }
            Kind::DropTable { names, if_exists } => {
                self.implicit_commit(st)?;
                if !if_exists {
                    let mut missing = Vec::new();
                    for n in names {
                        if !shared
                            .engine
                            .table_exists(n)
                            .map_err(|e| st.engine_err(e))?
                        {
                            missing.push(format!("{}.{n}", st.db));
                        }
                    }
                    if !missing.is_empty() {
                        return Err(err(
                            ErrorKind::ER_BAD_TABLE_ERROR,
                            format!("Unknown table '{}'", missing.join(",")),
                        ));
                    }
                }
                for n in names {
                    shared.engine.drop_table(n).map_err(|e| st.engine_err(e))?;
                    shared
                        .indexes
                        .drop_table(n)
                        .map_err(|e| err(ErrorKind::ER_UNKNOWN_ERROR, e.to_string()))?;
                }
                Ok(ok())
            }
            Kind::Analyze { names } => {
                // Nothing to analyze (the engine keeps no statistics): each existing table
                // reports OK, as MySQL's result set does.
                let mut rows = Vec::new();
                for n in names {
                    let exists = shared
                        .engine
                        .table_exists(n)
                        .map_err(|e| st.engine_err(e))?;
                    // A missing table: MySQL's error row, then its status row.
                    let msgs = if exists {
                        vec![("status", "OK".to_string())]
                    } else {
                        vec![
                            ("Error", format!("Table '{}.{n}' doesn't exist", st.db)),
                            ("status", "Operation failed".to_string()),
                        ]
                    };
                    for (t, m) in msgs {
                        rows.push(vec![
                            Cell::Bytes(format!("{}.{n}", st.db).into_bytes()),
                            Cell::Bytes(b"analyze".to_vec()),
                            Cell::Bytes(t.as_bytes().to_vec()),
                            Cell::Bytes(m.into_bytes()),
                        ]);
                    }
                }
                Ok(Outcome::Rows {
                    cols: result_cols(&plan.kind),
                    rows,
                })
            }
            Kind::Begin { read_only } => {
                st.conn.begin_transaction().map_err(|e| st.engine_err(e))?;
                st.read_only = *read_only;
                Ok(ok())
            }
            Kind::Commit => {
                st.conn.commit().map_err(|e| st.engine_err(e))?;
                Ok(ok())
            }
            Kind::Rollback => {
                st.conn.rollback();
                Ok(ok())
            }
            Kind::Set(SetKind::Ignored(_)) => Ok(ok()),
            Kind::Set(SetKind::Autocommit) => {
                let on = match &a[0] {
                    Lit::Int(1) => true,
                    Lit::Int(0) => false,
                    Lit::Str(s) if s.eq_ignore_ascii_case(b"on") => true,
                    Lit::Str(s) if s.eq_ignore_ascii_case(b"off") => false,
                    _ => {
                        return Err(err(
                            ErrorKind::ER_WRONG_VALUE_FOR_VAR,
                            "Variable 'autocommit' can't be set to this value",
                        ))
                    }
                };
                if on {
                    Ok(ok())
                } else {
                    Err(err(
                        ErrorKind::ER_NOT_SUPPORTED_YET,
                        "turnstile serve does not support autocommit=0: use BEGIN … COMMIT",
                    ))
                }
            }
            Kind::Set(SetKind::Global(name)) => {
                let v = match &a[0] {
                    Lit::Str(s) if s.eq_ignore_ascii_case(b"default") && plan.params == 0 => {
                        admin::default_value(shared, name).ok_or_else(|| {
                            err(
                                ErrorKind::ER_UNKNOWN_SYSTEM_VARIABLE,
                                format!("Unknown system variable '{name}'"),
                            )
                        })?
                    }
                    Lit::Int(i) => SetValue::Int(*i),
                    Lit::Str(s) => SetValue::Str(String::from_utf8_lossy(s).into_owned()),
                    _ => {
                        return Err(err(
                            ErrorKind::ER_WRONG_TYPE_FOR_VAR,
                            format!("Incorrect argument type to variable '{name}'"),
                        ))
                    }
                };
                admin::set_global(shared, name, &v).map_err(|e| match e {
                    SetError::Unknown(m) => err(ErrorKind::ER_UNKNOWN_SYSTEM_VARIABLE, m),
                    SetError::WrongType(m) => err(ErrorKind::ER_WRONG_TYPE_FOR_VAR, m),
                    SetError::WrongValue(m) => err(ErrorKind::ER_WRONG_VALUE_FOR_VAR, m),
                })?;
                if shared.config.log {
                    eprintln!(
                        "turnstile serve: connection {}: SET GLOBAL {name} = {}",
                        self.id,
                        match &v {
                            SetValue::Int(i) => i.to_string(),
                            SetValue::Str(s) => format!("'{s}'"),
                        }
                    );
                }
                Ok(ok())
            }
            Kind::Use(db) => {
                check_database(db)?;
                st.db = db.clone();
                Ok(ok())
            }
            Kind::SelectExprs(items) => {
                let mut row = Vec::new();
                for (_, it) in items {
                    row.push(match it {
                        SelectItem::Var(v) if v == "socket" => match &shared.config.socket {
                            Some(p) => Cell::Bytes(p.display().to_string().into_bytes()),
                            None => Cell::Null,
                        },
                        SelectItem::Var(v) => match admin::variable(shared, v) {
                            Some(s) => Cell::Bytes(s.into_bytes()),
                            None => {
                                return Err(err(
                                    ErrorKind::ER_UNKNOWN_SYSTEM_VARIABLE,
                                    format!("Unknown system variable '{v}'"),
                                ))
                            }
                        },
                        SelectItem::Database if st.db.is_empty() => Cell::Null,
                        SelectItem::Database => Cell::Bytes(st.db.clone().into_bytes()),
                        SelectItem::Arg(i) => match &a[*i] {
                            Lit::Null => Cell::Null,
                            l => Cell::Bytes(value::text(l).unwrap_or_default()),
                        },
                    });
                }
                Ok(Outcome::Rows {
                    cols: result_cols(&plan.kind),
                    rows: vec![row],
                })
            }
            Kind::ShowDatabases(pattern) => {
                let mut dbs = vec![sql::DATABASE.to_string()];
                dbs.retain(|d| pattern.as_deref().is_none_or(|p| admin::like_name(p, d)));
                dbs.sort();
                Ok(Outcome::Rows {
                    cols: result_cols(&plan.kind),
                    rows: dbs
                        .into_iter()
                        .map(|d| vec![Cell::Bytes(d.into_bytes())])
                        .collect(),
                })
            }
            Kind::ShowTables(_) if st.db.is_empty() => {
                Err(err(ErrorKind::ER_NO_DB_ERROR, "No database selected"))
            }
            Kind::ShowTables(pattern) => {
                let mut tables = shared.engine.tables().map_err(|e| st.engine_err(e))?;
                tables.retain(|t| pattern.as_deref().is_none_or(|p| admin::like_name(p, t)));
                let db = &st.db;
                // MySQL names the column after the database, and the pattern when there is one.
                let name = match pattern {
                    None => format!("Tables_in_{db}"),
                    Some(p) => format!("Tables_in_{db} ({p})"),
                };
                Ok(Outcome::Rows {
                    cols: vec![text_col(&name)],
                    rows: tables
                        .into_iter()
                        .map(|t| vec![Cell::Bytes(t.into_bytes())])
                        .collect(),
                })
            }
            Kind::ShowEngineStatus(engine) => {
                let snapshot = shared.gate.current().0.snapshot();
                Ok(Outcome::Rows {
                    cols: result_cols(&plan.kind),
                    rows: vec![vec![
                        Cell::Bytes(engine.clone().into_bytes()),
                        Cell::Bytes(Vec::new()),
                        Cell::Bytes(format!("{snapshot}").into_bytes()),
                    ]],
                })
            }
            Kind::ShowStatus(p) | Kind::ShowVariables(p) => {
                let rows = if matches!(plan.kind, Kind::ShowStatus(_)) {
                    admin::status(shared, p.as_deref())
                } else {
                    admin::variables(shared, p.as_deref())
                };
                Ok(Outcome::Rows {
                    cols: result_cols(&plan.kind),
                    rows: rows
                        .into_iter()
                        .map(|(n, v)| {
                            vec![Cell::Bytes(n.into_bytes()), Cell::Bytes(v.into_bytes())]
                        })
                        .collect(),
                })
            }
        }
    }

    fn check_table(&self, st: &State, table: &str) -> Result<(), SqlError> {
        match self.shared.engine.table_exists(table) {
            Ok(true) => Ok(()),
            Ok(false) => Err(st.engine_err(EngineError::NoSuchTable(table.into()))),
            Err(e) => Err(st.engine_err(e)),
        }
    }

    /// DDL commits an open transaction first, as in MySQL.
    fn implicit_commit(&self, st: &mut State) -> Result<(), SqlError> {
        if st.conn.in_transaction() {
            st.conn.commit().map_err(|e| st.engine_err(e))?;
        }
        Ok(())
    }

    /// `INSERT`: rows in order; id 0, NULL or omitted takes the next AUTO_INCREMENT id (as
    /// MySQL without `NO_AUTO_VALUE_ON_ZERO`). A failing statement changes nothing: outside a
    /// transaction several rows are one transaction; inside one, the rows it wrote are undone
    /// and the transaction stays open (MySQL's statement rollback), except after a deadlock,
    /// which ends the transaction as InnoDB's does.
    fn insert(
        &self,
        st: &mut State,
        table: &str,
        cols: &[Col],
        nrows: usize,
        a: &[Lit],
    ) -> Result<Outcome, SqlError> {
        self.check_table(st, table)?;
        // Build and check every row before writing any.
        let mut rows = Vec::with_capacity(nrows);
        for r in 0..nrows {
            let vals = &a[r * cols.len()..(r + 1) * cols.len()];
            let mut id = None;
            let mut k = 0u32;
            let mut c = [b' '; C_LEN];
            let mut pad = [b' '; PAD_LEN];
            for (col, v) in cols.iter().zip(vals) {
                match col {
                    Col::Id => id = stored_id(v)?,
                    Col::K => k = stored_k(v)?,
                    Col::C => c = stored_text::<C_LEN>("c", v)?,
                    Col::Pad => pad = stored_text::<PAD_LEN>("pad", v)?,
                }
            }
            rows.push((id, k, c, pad));
        }
        let wrap = nrows > 1 && !st.conn.in_transaction();
        if wrap {
            st.conn.begin_transaction().map_err(|e| st.engine_err(e))?;
        }
        // One row writes all or nothing by itself; several need a point to go back to.
        let savepoint = (nrows > 1 && !wrap).then(|| st.conn.savepoint());
        let mut first_auto = 0u64;
        let mut last_id = 0u64;
        let mut r = Ok(());
        for (id, k, c, pad) in rows {
            let id = match id {
                Some(id) => id,
                None => match st.conn.next_id(table) {
                    Ok(id) => {
                        if first_auto == 0 {
                            first_auto = id as u64;
                        }
                        id
                    }
                    Err(e) => {
                        r = Err(e);
                        break;
                    }
                },
            };
            if let Err(e) = st.conn.insert_row(table, &Row { id, k, c, pad }) {
                r = Err(e);
                break;
            }
            last_id = id as u64;
        }
        match r {
            Ok(()) => {
                if wrap {
                    st.conn.commit().map_err(|e| st.engine_err(e))?;
                }
                Ok(Outcome::Ok {
                    affected: nrows as u64,
                    // MySQL reports the first id generated by the statement, or, when every
                    // id was given, the AUTO_INCREMENT column's value in the last row.
                    insert_id: if first_auto != 0 { first_auto } else { last_id },
                })
            }
            Err(e) => {
                if wrap {
                    st.conn.rollback();
                } else if let Some(sp) = savepoint {
                    st.conn.rollback_to(sp);
                }
                Err(st.engine_err(e))
            }
        }
    }

    /// Runs `plan` with `params` and answers on `results`.
    pub(crate) async fn run_statement<'a, W: AsyncWrite + Unpin + Send>(
        &'a self,
        st: &mut State,
        plan: &Plan,
        params: &[Lit],
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        let shared = &*self.shared;
        shared.stats.statements.fetch_add(1, Relaxed);
        st.refresh(shared);
        let names_a_table = plan.table.is_some()
            || matches!(plan.kind, Kind::DropTable { .. } | Kind::Analyze { .. });
        let outcome = match args(plan, params) {
            Err(e) => Err(e),
            // A table is found in the connection's database; MySQL names none by default.
            Ok(_) if names_a_table && st.db.is_empty() => {
                Err(err(ErrorKind::ER_NO_DB_ERROR, "No database selected"))
            }
            Ok(_) if writes(&plan.kind) && st.read_only && st.conn.in_transaction() => Err(err(
                ErrorKind::ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION,
                "Cannot execute statement in a READ ONLY transaction.",
            )),
            Ok(a) if plan.kind == Kind::RangeSelect => {
                return self.range_select(st, plan, &a, results).await;
            }
            Ok(a) => self.execute(st, plan, &a),
        };
        match outcome {
            Ok(Outcome::Ok {
                affected,
                insert_id,
            }) => {
                results
                    .completed(OkResponse {
                        affected_rows: affected,
                        last_insert_id: insert_id,
                        status_flags: status_flags(st.conn.in_transaction()),
                        ..Default::default()
                    })
                    .await
            }
            Ok(Outcome::Rows { cols, rows }) => {
                let mut w = results.start(&cols).await?;
                for row in rows {
                    for cell in row {
                        match cell {
                            Cell::Null => w.write_col(None::<i64>)?,
                            Cell::Bytes(b) => w.write_col(&b[..])?,
                            Cell::Int(i) => w.write_col(i)?,
                            Cell::Decimal(d) => w.write_col(d.as_bytes())?,
                        }
                    }
                    w.end_row().await?;
                }
                w.finish().await
            }
            Err(e) => self.answer_error(results, e).await,
        }
    }

    pub(crate) async fn answer_error<W: AsyncWrite + Unpin + Send>(
        &self,
        results: QueryResultWriter<'_, W>,
        e: SqlError,
    ) -> io::Result<()> {
        self.count_error(&e);
        results.error(e.kind, e.msg.as_bytes()).await
    }

    pub(crate) fn count_error(&self, e: &SqlError) {
        use std::sync::atomic::Ordering::Relaxed;
        let s = &self.shared.stats;
        if e.kind == ErrorKind::ER_NOT_SUPPORTED_YET {
            s.not_supported.fetch_add(1, Relaxed);
            if self.shared.config.log {
                eprintln!("turnstile serve: connection {}: 1235: {}", self.id, e.msg);
            }
        } else {
            s.errors.fetch_add(1, Relaxed);
        }
    }

    /// `SELECT c … WHERE id BETWEEN ? AND ?`: each row fetched is written to the client from
    /// inside the cursor, so the server layer's `RowSend` setting applies to the send.
    async fn range_select<'a, W: AsyncWrite + Unpin + Send>(
        &'a self,
        st: &mut State,
        plan: &Plan,
        a: &[Lit],
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        let table = plan.table.as_deref().unwrap_or("");
        let range = match id_range(&a[0], &a[1]) {
            Ok(r) => r,
            Err(e) => return self.answer_error(results, e).await,
        };
        // A missing table is answered before the result set starts.
        if let Err(e) = self.check_table(st, table) {
            return self.answer_error(results, e).await;
        }
        let cols = [c_col()];
        let mut w = results.start(&cols).await?;
        let Some((lo, hi)) = range else {
            return w.finish().await;
        };
        let mut io_err = None;
        // The first failed write (a client gone, or one that stopped reading past the write
        // timeout) ends the scan: the statement leaves the gate and its read transaction.
        let r = st.conn.scan_sent_until(table, lo, hi, |row| {
            let sent = w
                .write_col(trim_char(&row.c))
                .and_then(|_| block_on(w.end_row()));
            match sent {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    io_err = Some(e);
                    ControlFlow::Break(())
                }
            }
        });
        if let Some(e) = io_err {
            return Err(e);
        }
        match r {
            Ok(_) => w.finish().await,
            Err(e) => {
                let e = st.engine_err(e);
                self.count_error(&e);
                // An ERR packet in place of the end of the rows, as MySQL sends.
                w.finish_error(e.kind, &e.msg.into_bytes()).await
            }
        }
    }
}
