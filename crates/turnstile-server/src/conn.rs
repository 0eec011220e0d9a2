//! One client connection: the protocol shim and the statement executor, run on the
//! connection's own thread.
//!
//! Each statement maps to handler calls of the engine's [`Connection`], so every row it reads
//! or writes is one enter of the gate:
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
use std::io::{self, Read, Write};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use opensrv_mysql::{
    AsyncMysqlIntermediary, AsyncMysqlShim, Column, ColumnFlags, ColumnType, ErrorKind, InitWriter,
    OkResponse, ParamParser, QueryResultWriter, StatementMetaWriter, StatusFlags, ValueInner,
};
use tokio::io::AsyncWrite;
use turnstile::GateError;
use turnstile_engine::schema::{Row, C_LEN, PAD_LEN};
use turnstile_engine::{Connection, EngineError};

use crate::admin::{self, SetError, SetValue};
use crate::sql::{self, Arg, Col, Kind, Lit, Plan, PlanError, SelectItem, SetKind};
use crate::wire::{block_on, BlockingWriter, CheckedReader, StmtParams};
use crate::Shared;

/// A socket shared by the reader, the writer and the answers of the packet checks (`&TcpStream`
/// and `&UnixStream` read and write).
pub(crate) struct SharedIo<S>(pub(crate) Arc<S>);

impl<S> Read for SharedIo<S>
where
    for<'a> &'a S: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self.0).read(buf)
    }
}

impl<S> Write for SharedIo<S>
where
    for<'a> &'a S: Write,
{
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self.0).write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self.0).flush()
    }
}

/// Plans of text statements kept per connection, by template (literals made parameters): a
/// sysbench run in text mode uses about a dozen; 256 leaves room for other clients' statements,
/// and the cache is emptied when full. Measured on the 2-core VM: planning a point select
/// costs 13.7 µs and an oltp_insert INSERT 21.0 µs; the scan and lookup of a hit 0.27 µs and
/// 0.79 µs.
const TEXT_CACHE: usize = 256;

/// The longest statement text the plan cache keeps (bytes): sysbench's statements are under
/// 300 bytes as templates; 16 KiB bounds a connection's cache at 4 MiB of keys.
const TEXT_CACHE_KEY: usize = 16 * 1024;

/// Prepared statements a connection may hold at once (MySQL's `max_prepared_stmt_count`
/// default, 16,382, is server-wide; one connection keeping that many is already a leak).
const MAX_PREPARED: usize = 16_382;

/// Bytes a connection's answers are gathered in before a write: a few dozen sysbench rows
/// (about 130 bytes each in a packet), as MySQL's `net_buffer_length` (16 KiB) does.
const WRITE_BUFFER: usize = 16 * 1024;

/// Runs connection `id` on `stream` to its end, on the calling thread.
pub(crate) fn run<S>(
    shared: &Arc<Shared>,
    id: u32,
    stream: Arc<S>,
    logged_in: Box<dyn FnOnce() + Send>,
) where
    S: Send + Sync + 'static,
    for<'a> &'a S: Read + Write,
{
    let params = StmtParams::default();
    let mut reader = CheckedReader::new(
        SharedIo(stream.clone()),
        SharedIo(stream.clone()),
        shared.config.max_packet,
        params.clone(),
    );
    reader.on_first_command(logged_in);
    // Buffered: the protocol crate writes each packet as a header and a body, and a result
    // set as one packet per row; unbuffered, that was two syscalls and two TCP segments per
    // row (TCP_NODELAY is on), and sysbench's read-only transaction (about 3,000 rows sent)
    // ran at 29 TPS on one connection. The crate flushes at the end of every response.
    let writer = BlockingWriter(std::io::BufWriter::with_capacity(
        WRITE_BUFFER,
        SharedIo(stream),
    ));
    let (gate, generation) = shared.gate.current();
    let mut conn = Connection::new(shared.engine.clone(), &gate, format!("conn {id}"));
    conn.set_row_send(shared.row_send());
    conn.set_commit_mode(shared.commit_mode());
    let shim = Shim {
        ctx: Ctx {
            shared: shared.clone(),
            id,
            params,
        },
        st: Mutex::new(State {
            conn,
            generation,
            db: String::new(),
            prepared: HashMap::new(),
            next_stmt: 1,
            cache: HashMap::new(),
        }),
    };
    if let Err(e) = block_on(AsyncMysqlIntermediary::run_on(shim, reader, writer)) {
        let quiet = matches!(
            e.kind(),
            io::ErrorKind::UnexpectedEof
                | io::ErrorKind::ConnectionReset
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::ConnectionAborted
        );
        if !quiet {
            shared
                .stats
                .aborted_connections
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if shared.config.log && !quiet {
            eprintln!("turnstile serve: connection {id} closed: {e}");
        }
    }
    // The shim (and its engine connection) was dropped by `run_on`: an open transaction was
    // rolled back and its row locks released.
}

struct State {
    conn: Connection,
    generation: u64,
    db: String,
    prepared: HashMap<u32, Arc<Plan>>,
    next_stmt: u32,
    cache: HashMap<String, Arc<Plan>>,
}

/// What a connection's statements need besides its state.
struct Ctx {
    shared: Arc<Shared>,
    id: u32,
    /// Parameter counts of the prepared statements, for the packet checks.
    params: StmtParams,
}

struct Shim {
    ctx: Ctx,
    // A `Session` is `Send` but not `Sync`; the protocol crate wants a `Sync` shim. The lock
    // is never contended: only `get_mut` is used.
    st: Mutex<State>,
}

/// A statement's failure, as the client sees it.
#[derive(Debug)]
struct SqlError {
    kind: ErrorKind,
    msg: String,
}

fn err(kind: ErrorKind, msg: impl Into<String>) -> SqlError {
    SqlError {
        kind,
        msg: msg.into(),
    }
}

fn plan_err(e: PlanError) -> SqlError {
    match e {
        PlanError::NotSupported(m) => err(ErrorKind::ER_NOT_SUPPORTED_YET, m),
        PlanError::Syntax(m) => err(ErrorKind::ER_PARSE_ERROR, m),
    }
}

fn engine_err(db: &str, e: EngineError) -> SqlError {
    match e {
        EngineError::NoSuchTable(t) => err(
            ErrorKind::ER_NO_SUCH_TABLE,
            format!("Table '{db}.{t}' doesn't exist"),
        ),
        EngineError::TableExists(t) => err(
            ErrorKind::ER_TABLE_EXISTS_ERROR,
            format!("Table '{t}' already exists"),
        ),
        EngineError::DuplicateKey { table, id } => err(
            ErrorKind::ER_DUP_ENTRY,
            format!("Duplicate entry '{id}' for key '{table}.PRIMARY'"),
        ),
        EngineError::Deadlock => err(
            ErrorKind::ER_LOCK_DEADLOCK,
            "Deadlock found when trying to get lock; try restarting transaction \
             (the transaction was rolled back)",
        ),
        EngineError::LockWaitTimeout => err(
            ErrorKind::ER_LOCK_WAIT_TIMEOUT,
            "Lock wait timeout exceeded; try restarting transaction \
             (turnstile rolls back the whole transaction)",
        ),
        EngineError::Gate(g @ GateError::Overloaded { .. }) => err(
            ErrorKind::ER_LOCK_WAIT_TIMEOUT,
            format!("turnstile gate: {g}; the statement was refused (an open transaction is kept)"),
        ),
        EngineError::Gate(g @ GateError::TimedOut { .. }) => err(
            ErrorKind::ER_LOCK_WAIT_TIMEOUT,
            format!("turnstile gate: {g}; the statement was refused"),
        ),
        EngineError::Gate(g @ GateError::Cancelled { .. }) => err(
            ErrorKind::ER_QUERY_INTERRUPTED,
            format!("Query execution was interrupted (turnstile gate: {g})"),
        ),
        other => err(ErrorKind::ER_UNKNOWN_ERROR, other.to_string()),
    }
}

/// What a statement returns.
enum Outcome {
    /// OK with rows affected and the last AUTO_INCREMENT id.
    Ok { affected: u64, insert_id: u64 },
    /// A result set of text columns.
    Rows {
        cols: Vec<Column>,
        rows: Vec<Vec<Cell>>,
    },
}

fn ok() -> Outcome {
    Outcome::Ok {
        affected: 0,
        insert_id: 0,
    }
}

/// One value of a result row.
enum Cell {
    Null,
    Bytes(Vec<u8>),
    Int(i64),
    /// A decimal written as text (`SUM`).
    Decimal(String),
}

fn column(name: &str, coltype: ColumnType, flags: ColumnFlags) -> Column {
    Column {
        table: String::new(),
        column: name.to_string(),
        coltype,
        colflags: flags,
    }
}

fn text_col(name: &str) -> Column {
    column(
        name,
        ColumnType::MYSQL_TYPE_VAR_STRING,
        ColumnFlags::empty(),
    )
}

fn c_col() -> Column {
    column(
        "c",
        ColumnType::MYSQL_TYPE_STRING,
        ColumnFlags::NOT_NULL_FLAG,
    )
}

/// The result columns a statement returns (for a prepared statement's metadata).
fn result_cols(kind: &Kind) -> Vec<Column> {
    match kind {
        Kind::PointSelect | Kind::RangeSelect | Kind::OrderRange { .. } => vec![c_col()],
        Kind::SumRange => vec![column(
            "SUM(k)",
            ColumnType::MYSQL_TYPE_NEWDECIMAL,
            ColumnFlags::empty(),
        )],
        Kind::Count => vec![column(
            "COUNT(*)",
            ColumnType::MYSQL_TYPE_LONGLONG,
            ColumnFlags::NOT_NULL_FLAG,
        )],
        Kind::SelectExprs(items) => items.iter().map(|(n, _)| text_col(n)).collect(),
        Kind::ShowDatabases => vec![text_col("Database")],
        Kind::ShowTables => vec![text_col("Tables_in_db")],
        Kind::ShowEngineStatus => vec![text_col("Type"), text_col("Name"), text_col("Status")],
        Kind::ShowStatus(_) | Kind::ShowVariables(_) => {
            vec![text_col("Variable_name"), text_col("Value")]
        }
        Kind::Analyze { .. } => vec![
            text_col("Table"),
            text_col("Op"),
            text_col("Msg_type"),
            text_col("Msg_text"),
        ],
        _ => Vec::new(),
    }
}

/// `CHAR` values are returned without their trailing spaces, as MySQL does (without
/// `PAD_CHAR_TO_FULL_LENGTH`).
fn trim_char(v: &[u8]) -> &[u8] {
    let end = v.iter().rposition(|b| *b != b' ').map_or(0, |i| i + 1);
    &v[..end]
}

/// A `CHAR(N)` value: too long is an error (strict mode), except for trailing spaces, which
/// MySQL removes silently whatever the SQL mode.
fn fixed<const N: usize>(col: &str, v: &[u8]) -> Result<[u8; N], SqlError> {
    let v = if v.len() > N && v[N..].iter().all(|b| *b == b' ') {
        &v[..N]
    } else {
        v
    };
    if v.len() > N {
        return Err(err(
            ErrorKind::ER_DATA_TOO_LONG,
            format!("Data too long for column '{col}' at row 1"),
        ));
    }
    let mut out = [b' '; N];
    out[..v.len()].copy_from_slice(v);
    Ok(out)
}

fn lit_int(col: &str, l: &Lit) -> Result<Option<i64>, SqlError> {
    match l {
        Lit::Null => Ok(None),
        Lit::Int(i) => Ok(Some(*i)),
        Lit::Str(s) => std::str::from_utf8(s)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .map(Some)
            .ok_or_else(|| {
                err(
                    ErrorKind::ER_NOT_SUPPORTED_YET,
                    format!("turnstile serve does not support a non-integer value for '{col}'"),
                )
            }),
        Lit::Num(n) => Err(err(
            ErrorKind::ER_NOT_SUPPORTED_YET,
            format!("turnstile serve does not support the non-integer value {n} for '{col}'"),
        )),
    }
}

fn lit_bytes(l: &Lit) -> Option<Vec<u8>> {
    match l {
        Lit::Null => None,
        Lit::Int(i) => Some(i.to_string().into_bytes()),
        Lit::Num(n) => Some(n.clone().into_bytes()),
        Lit::Str(s) => Some(s.clone()),
    }
}

/// A stored id or k value: INTEGER columns hold 0..=u32::MAX here (the engine's keys are
/// unsigned 32-bit).
fn stored_u32(col: &str, v: i64) -> Result<u32, SqlError> {
    u32::try_from(v).map_err(|_| {
        err(
            ErrorKind::ER_WARN_DATA_OUT_OF_RANGE,
            format!("Out of range value for column '{col}' at row 1"),
        )
    })
}

fn status_flags(in_txn: bool) -> StatusFlags {
    let mut f = StatusFlags::SERVER_STATUS_AUTOCOMMIT;
    if in_txn {
        f |= StatusFlags::SERVER_STATUS_IN_TRANS;
    }
    f
}

impl State {
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

/// An id range `lo..=hi` clamped to the stored ids; `None` when it holds none.
fn id_range(lo: &Lit, hi: &Lit) -> Result<Option<(u32, u32)>, SqlError> {
    let (Some(lo), Some(hi)) = (lit_int("id", lo)?, lit_int("id", hi)?) else {
        return Ok(None); // BETWEEN NULL: no row
    };
    let lo = lo.max(0);
    let hi = hi.min(u32::MAX as i64);
    Ok((lo <= hi).then_some((lo as u32, hi as u32)))
}

/// An id to look up; `None` when no stored row can have it.
fn id_point(v: &Lit) -> Result<Option<u32>, SqlError> {
    Ok(lit_int("id", v)?.and_then(|i| u32::try_from(i).ok()))
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
                let mut sum = 0u64;
                let mut n = 0u64;
                if let Some((lo, hi)) = id_range(&a[0], &a[1])? {
                    n = st
                        .conn
                        .scan(table, lo, hi, |r| sum += r.k as u64)
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
                    rows: cs
                        .iter()
                        .map(|c| vec![Cell::Bytes(trim_char(c).to_vec())])
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
                let Some(by) = lit_int("k", &a[0])? else {
                    return Err(err(
                        ErrorKind::ER_BAD_NULL_ERROR,
                        "Column 'k' cannot be null",
                    ));
                };
                let Some(id) = id_point(&a[1])? else {
                    self.check_table(st, table)?;
                    return Ok(ok());
                };
                let mut overflow = false;
                let affected = st
                    .conn
                    .update_row(table, id, |r| {
                        match (r.k as i64).checked_add(by).map(u32::try_from) {
                            Some(Ok(k)) => r.k = k,
                            _ => overflow = true,
                        }
                    })
                    .map_err(|e| st.engine_err(e))?;
                if overflow {
                    return Err(err(
                        ErrorKind::ER_WARN_DATA_OUT_OF_RANGE,
                        "Out of range value for column 'k' at row 1 (nothing was changed)",
                    ));
                }
                Ok(Outcome::Ok {
                    affected,
                    insert_id: 0,
                })
            }
            Kind::UpdateC => {
                let c = lit_bytes(&a[0]).ok_or_else(|| {
                    err(ErrorKind::ER_BAD_NULL_ERROR, "Column 'c' cannot be null")
                })?;
                let c = fixed::<C_LEN>("c", &c)?;
                let Some(id) = id_point(&a[1])? else {
                    self.check_table(st, table)?;
                    return Ok(ok());
                };
                let affected = st
                    .conn
                    .update_row(table, id, |r| r.c = c)
                    .map_err(|e| st.engine_err(e))?;
                Ok(Outcome::Ok {
                    affected,
                    insert_id: 0,
                })
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
            Kind::CreateTable { if_not_exists } => {
                self.implicit_commit(st)?;
                match shared.engine.create_table(table) {
                    Ok(()) => Ok(ok()),
                    Err(EngineError::TableExists(_)) if *if_not_exists => Ok(ok()),
                    Err(e) => Err(st.engine_err(e)),
                }
            }
            Kind::CreateIndexK => {
                // The k index always exists (the engine maintains it with every write).
                self.implicit_commit(st)?;
                self.check_table(st, table)?;
                Ok(ok())
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
                    let (t, m) = if exists {
                        ("status", "OK".to_string())
                    } else {
                        ("Error", format!("Table '{}.{n}' doesn't exist", st.db))
                    };
                    rows.push(vec![
                        Cell::Bytes(format!("{}.{n}", st.db).into_bytes()),
                        Cell::Bytes(b"analyze".to_vec()),
                        Cell::Bytes(t.as_bytes().to_vec()),
                        Cell::Bytes(m.into_bytes()),
                    ]);
                }
                Ok(Outcome::Rows {
                    cols: result_cols(&plan.kind),
                    rows,
                })
            }
            Kind::Begin => {
                st.conn.begin_transaction().map_err(|e| st.engine_err(e))?;
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
                            l => Cell::Bytes(lit_bytes(l).unwrap_or_default()),
                        },
                    });
                }
                Ok(Outcome::Rows {
                    cols: result_cols(&plan.kind),
                    rows: vec![row],
                })
            }
            Kind::ShowDatabases => {
                let mut dbs = vec!["sbtest".to_string(), "turnstile".to_string()];
                if !st.db.is_empty() && !dbs.contains(&st.db) {
                    dbs.push(st.db.clone());
                }
                dbs.sort();
                Ok(Outcome::Rows {
                    cols: result_cols(&plan.kind),
                    rows: dbs
                        .into_iter()
                        .map(|d| vec![Cell::Bytes(d.into_bytes())])
                        .collect(),
                })
            }
            Kind::ShowTables => {
                let tables = shared.engine.tables().map_err(|e| st.engine_err(e))?;
                let name = format!(
                    "Tables_in_{}",
                    if st.db.is_empty() {
                        "turnstile"
                    } else {
                        &st.db
                    }
                );
                Ok(Outcome::Rows {
                    cols: vec![text_col(&name)],
                    rows: tables
                        .into_iter()
                        .map(|t| vec![Cell::Bytes(t.into_bytes())])
                        .collect(),
                })
            }
            Kind::ShowEngineStatus => {
                let snapshot = shared.gate.current().0.snapshot();
                Ok(Outcome::Rows {
                    cols: result_cols(&plan.kind),
                    rows: vec![vec![
                        Cell::Bytes(b"turnstile".to_vec()),
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
    /// MySQL without `NO_AUTO_VALUE_ON_ZERO`). A statement of several rows outside a
    /// transaction is one transaction (all rows or none); inside one, a failing row rolls the
    /// whole transaction back (MySQL would roll back the statement only) and says so.
    fn insert(
        &self,
        st: &mut State,
        table: &str,
        cols: &[Col],
        nrows: usize,
        a: &[Lit],
    ) -> Result<Outcome, SqlError> {
        // Build and check every row before writing any.
        let mut rows = Vec::with_capacity(nrows);
        for vals in a.chunks(cols.len()) {
            let mut id = None;
            let mut k = 0u32;
            let mut c = [b' '; C_LEN];
            let mut pad = [b' '; PAD_LEN];
            for (col, v) in cols.iter().zip(vals) {
                match col {
                    Col::Id => {
                        id = match lit_int("id", v)? {
                            None | Some(0) => None,
                            Some(i) => Some(stored_u32("id", i)?),
                        }
                    }
                    Col::K => {
                        k = stored_u32(
                            "k",
                            lit_int("k", v)?.ok_or_else(|| {
                                err(ErrorKind::ER_BAD_NULL_ERROR, "Column 'k' cannot be null")
                            })?,
                        )?
                    }
                    Col::C => {
                        c = fixed::<C_LEN>(
                            "c",
                            &lit_bytes(v).ok_or_else(|| {
                                err(ErrorKind::ER_BAD_NULL_ERROR, "Column 'c' cannot be null")
                            })?,
                        )?
                    }
                    Col::Pad => {
                        pad = fixed::<PAD_LEN>(
                            "pad",
                            &lit_bytes(v).ok_or_else(|| {
                                err(ErrorKind::ER_BAD_NULL_ERROR, "Column 'pad' cannot be null")
                            })?,
                        )?
                    }
                }
            }
            rows.push((id, k, c, pad));
        }
        self.check_table(st, table)?;
        let wrap = nrows > 1 && !st.conn.in_transaction();
        if wrap {
            st.conn.begin_transaction().map_err(|e| st.engine_err(e))?;
        }
        let was_in_txn = st.conn.in_transaction();
        let mut first_auto = 0u64;
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
        }
        match r {
            Ok(()) => {
                if wrap {
                    st.conn.commit().map_err(|e| st.engine_err(e))?;
                }
                Ok(Outcome::Ok {
                    affected: nrows as u64,
                    // MySQL reports the first id generated by a multi-row INSERT.
                    insert_id: first_auto,
                })
            }
            Err(e) => {
                let mut e = st.engine_err(e);
                if was_in_txn && st.conn.in_transaction() {
                    st.conn.rollback();
                    if !wrap {
                        e.msg.push_str(" (the transaction was rolled back)");
                    }
                }
                Err(e)
            }
        }
    }

    /// Runs `plan` with `params` and answers on `results`.
    async fn run_statement<'a, W: AsyncWrite + Unpin + Send>(
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
        let outcome = match args(plan, params) {
            Err(e) => Err(e),
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

    async fn answer_error<W: AsyncWrite + Unpin + Send>(
        &self,
        results: QueryResultWriter<'_, W>,
        e: SqlError,
    ) -> io::Result<()> {
        self.count_error(&e);
        results.error(e.kind, e.msg.as_bytes()).await
    }

    fn count_error(&self, e: &SqlError) {
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

    /// The plan for a text statement and its arguments: the statement's template (its
    /// literals made parameters, [`sql::normalize`]) from the connection's cache, or planned
    /// and cached; text the template cannot stand for is planned as it is (and cached by its
    /// text).
    fn text_plan(st: &mut State, sql: &str) -> Result<(Arc<Plan>, Vec<Lit>), PlanError> {
        if let Some(p) = st.cache.get(sql) {
            return Ok((p.clone(), Vec::new()));
        }
        if let Some((template, lits)) = sql::normalize(sql) {
            if let Some(p) = st.cache.get(&template) {
                return Ok((p.clone(), lits));
            }
            if let Ok(p) = sql::plan(&template) {
                if p.params == lits.len() {
                    let p = Arc::new(p);
                    Self::cache(st, template, p.clone());
                    return Ok((p, lits));
                }
            }
        }
        let p = Arc::new(sql::plan(sql)?);
        if p.params > 0 {
            return Err(PlanError::Syntax(
                "'?' placeholders are only accepted in prepared statements".into(),
            ));
        }
        Self::cache(st, sql.to_string(), p.clone());
        Ok((p, Vec::new()))
    }

    fn cache(st: &mut State, key: String, p: Arc<Plan>) {
        // A long text (a statement carrying a large literal) is planned, not kept: the cache
        // holds at most `TEXT_CACHE` keys of at most `TEXT_CACHE_KEY` bytes, a few MiB per
        // connection, not `TEXT_CACHE` × `max_allowed_packet`.
        if key.len() > TEXT_CACHE_KEY {
            return;
        }
        if st.cache.len() >= TEXT_CACHE {
            st.cache.clear();
        }
        st.cache.insert(key, p);
    }
}

/// A bound parameter as a literal.
fn param_lit(v: ValueInner<'_>) -> Lit {
    match v {
        ValueInner::NULL => Lit::Null,
        ValueInner::Bytes(b) => Lit::Str(b.to_vec()),
        ValueInner::Int(i) => Lit::Int(i),
        ValueInner::UInt(u) => i64::try_from(u).map_or(Lit::Num(u.to_string()), Lit::Int),
        ValueInner::Double(d) => Lit::Num(d.to_string()),
        ValueInner::Date(b) | ValueInner::Time(b) | ValueInner::Datetime(b) => Lit::Str(b.to_vec()),
    }
}

#[async_trait]
impl<W: AsyncWrite + Send + Unpin> AsyncMysqlShim<W> for Shim {
    type Error = io::Error;

    fn version(&self) -> String {
        admin::VERSION.to_string()
    }

    fn connect_id(&self) -> u32 {
        self.ctx.id
    }

    async fn on_prepare<'a>(
        &'a mut self,
        query: &'a str,
        info: StatementMetaWriter<'a, W>,
    ) -> io::Result<()> {
        let Shim { ctx, st } = self;
        let st = st.get_mut().expect("connection state");
        if st.prepared.len() >= MAX_PREPARED {
            let e = err(
                ErrorKind::ER_MAX_PREPARED_STMT_COUNT_REACHED,
                format!(
                    "Can't create more than max_prepared_stmt_count statements (current value: {MAX_PREPARED})"
                ),
            );
            ctx.count_error(&e);
            return info.error(e.kind, e.msg.as_bytes()).await;
        }
        match sql::plan(query) {
            Ok(p) => {
                let id = st.next_stmt;
                st.next_stmt = st.next_stmt.wrapping_add(1).max(1);
                let params: Vec<Column> = (0..p.params).map(|_| text_col("?")).collect();
                let cols = result_cols(&p.kind);
                ctx.params
                    .lock()
                    .expect("statement params")
                    .insert(id, p.params as u16);
                st.prepared.insert(id, Arc::new(p));
                info.reply(id, &params, &cols).await
            }
            Err(e) => {
                let e = plan_err(e);
                ctx.count_error(&e);
                info.error(e.kind, e.msg.as_bytes()).await
            }
        }
    }

    async fn on_execute<'a>(
        &'a mut self,
        id: u32,
        params: ParamParser<'a>,
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        let Shim { ctx, st } = self;
        let st = st.get_mut().expect("connection state");
        match st.prepared.get(&id).cloned() {
            None => {
                ctx.answer_error(
                    results,
                    err(
                        ErrorKind::ER_UNKNOWN_STMT_HANDLER,
                        format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute"),
                    ),
                )
                .await
            }
            Some(plan) => {
                let bound: Vec<Lit> = params
                    .into_iter()
                    .map(|p| param_lit(p.value.into_inner()))
                    .collect();

                ctx.run_statement(st, &plan, &bound, results).await
            }
        }
    }

    async fn on_close<'a>(&'a mut self, stmt: u32)
    where
        W: 'async_trait,
    {
        self.st
            .get_mut()
            .expect("connection state")
            .prepared
            .remove(&stmt);
        self.ctx
            .params
            .lock()
            .expect("statement params")
            .remove(&stmt);
    }

    async fn on_query<'a>(
        &'a mut self,
        query: &'a str,
        results: QueryResultWriter<'a, W>,
    ) -> io::Result<()> {
        let Shim { ctx, st } = self;
        let st = st.get_mut().expect("connection state");
        match Ctx::text_plan(st, query) {
            Ok((plan, lits)) => ctx.run_statement(st, &plan, &lits, results).await,
            Err(e) => ctx.answer_error(results, plan_err(e)).await,
        }
    }

    async fn on_init<'a>(&'a mut self, db: &'a str, w: InitWriter<'a, W>) -> io::Result<()> {
        self.st.get_mut().expect("connection state").db = db.to_string();
        w.ok().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn engine_errors_answer_mysqls_codes() {
        let code = |e: EngineError| engine_err("sbtest", e).kind as u16;
        assert_eq!(code(EngineError::NoSuchTable("t".into())), 1146);
        assert_eq!(code(EngineError::TableExists("t".into())), 1050);
        assert_eq!(
            code(EngineError::DuplicateKey {
                table: "t".into(),
                id: 1
            }),
            1062
        );
        assert_eq!(code(EngineError::Deadlock), 1213);
        assert_eq!(code(EngineError::LockWaitTimeout), 1205);
        assert_eq!(
            code(EngineError::Gate(GateError::Overloaded {
                reason: turnstile::OverloadReason::QueueFull { max_waiting: 8 },
                waited: Duration::ZERO,
            })),
            1205
        );
        assert_eq!(
            code(EngineError::Gate(GateError::TimedOut {
                waited: Duration::ZERO
            })),
            1205
        );
        assert_eq!(
            code(EngineError::Gate(GateError::Cancelled {
                waited: Duration::ZERO
            })),
            1317
        );
        assert_eq!(code(EngineError::BadInput("x".into())), 1105);
        let e = engine_err("sbtest", EngineError::NoSuchTable("t9".into()));
        assert_eq!(e.msg, "Table 'sbtest.t9' doesn't exist");
    }

    #[test]
    fn char_values_lose_trailing_spaces_and_too_long_values_are_refused() {
        assert_eq!(trim_char(b"abc   "), b"abc");
        assert_eq!(trim_char(b"   "), b"");
        assert_eq!(&fixed::<4>("c", b"ab").unwrap(), b"ab  ");
        assert_eq!(
            &fixed::<4>("c", b"abcd   ").unwrap(),
            b"abcd",
            "spaces cut silently"
        );
        let e = fixed::<4>("c", b"abcde").unwrap_err();
        assert_eq!(
            (e.kind as u16, e.msg.as_str()),
            (1406, "Data too long for column 'c' at row 1")
        );
    }

    #[test]
    fn id_ranges_are_clamped_to_stored_ids() {
        assert_eq!(
            id_range(&Lit::Int(-5), &Lit::Int(3)).ok().flatten(),
            Some((0, 3))
        );
        assert_eq!(id_range(&Lit::Int(5), &Lit::Int(3)).ok().flatten(), None);
        assert_eq!(id_range(&Lit::Null, &Lit::Int(3)).ok().flatten(), None);
        assert_eq!(
            id_range(&Lit::Str(b"7".to_vec()), &Lit::Int(1 << 40))
                .ok()
                .flatten(),
            Some((7, u32::MAX))
        );
        assert_eq!(id_point(&Lit::Int(-1)).ok().flatten(), None);
    }
}
