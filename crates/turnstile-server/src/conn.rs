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
use crate::value::{self, ValueError};
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
/// and the cache is emptied when full. A hit costs a few percent of a plan (the scan and one
/// lookup against parsing; docs/BENCHMARKS.md has the figures).
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
pub(crate) fn run<S>(shared: &Arc<Shared>, id: u32, stream: Arc<S>, login: crate::auth::Login)
where
    S: Send + Sync + 'static,
    for<'a> &'a S: Read + Write,
{
    let params = StmtParams::default();
    let salt = login.salt();
    let reader = CheckedReader::new(
        SharedIo(stream.clone()),
        SharedIo(stream.clone()),
        shared.config.max_packet,
        params.clone(),
        login,
    );
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
            salt,
        },
        st: Mutex::new(State {
            conn,
            read_only: false,
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
    /// The open transaction began `READ ONLY`.
    read_only: bool,
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
    /// The scramble the greeting sends; the reader checks the login against it.
    salt: [u8; crate::auth::SCRAMBLE_LEN],
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
        PlanError::Mysql(code, m) => err(ErrorKind::from(code), m),
        PlanError::ValueCount(row) => err(
            ErrorKind::ER_WRONG_VALUE_COUNT_ON_ROW,
            format!("Column count doesn't match value count at row {row}"),
        ),
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
        Kind::ShowDatabases(None) => vec![text_col("Database")],
        Kind::ShowDatabases(Some(p)) => vec![text_col(&format!("Database ({p})"))],
        Kind::ShowTables(_) => vec![text_col("Tables_in_db")],
        Kind::ShowEngineStatus(_) => vec![text_col("Type"), text_col("Name"), text_col("Status")],
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
        // MySQL counts characters; the engine keeps N bytes.
        let chars = std::str::from_utf8(v).map_or(v.len(), |t| t.chars().count());
        if chars <= N {
            return Err(err(
                ErrorKind::ER_NOT_SUPPORTED_YET,
                format!(
                    "turnstile serve does not support more than {N} bytes in '{col}' \
                     (its {chars} characters fit CHAR({N}); the engine stores {N} bytes)"
                ),
            ));
        }
        return Err(err(
            ErrorKind::ER_DATA_TOO_LONG,
            format!("Data too long for column '{col}' at row 1"),
        ));
    }
    let mut out = [b' '; N];
    out[..v.len()].copy_from_slice(v);
    Ok(out)
}

fn value_err(col: &str, e: ValueError) -> SqlError {
    match e {
        ValueError::OutOfRange => err(
            ErrorKind::ER_WARN_DATA_OUT_OF_RANGE,
            format!("Out of range value for column '{col}' at row 1"),
        ),
        ValueError::NotANumber(m) => err(ErrorKind::ER_TRUNCATED_WRONG_VALUE_FOR_FIELD, m),
        ValueError::Truncated(m) => err(ErrorKind::WARN_DATA_TRUNCATED, m),
        ValueError::NotSupported(what) => err(
            ErrorKind::ER_NOT_SUPPORTED_YET,
            format!("turnstile serve does not support {what} as a value for '{col}'"),
        ),
    }
}

/// The largest id stored: `INTEGER` is signed 32-bit in MySQL, and the engine's keys are
/// unsigned 32-bit, so ids run from 1 to `i32::MAX` (0 and NULL take AUTO_INCREMENT).
const MAX_ID: i64 = i32::MAX as i64;

/// An id to store: `None` takes the next AUTO_INCREMENT value (0 or NULL, as MySQL without
/// `NO_AUTO_VALUE_ON_ZERO`).
fn stored_id(v: &Lit) -> Result<Option<u32>, SqlError> {
    match value::int_store(v, "id", i32::MIN.into(), MAX_ID).map_err(|e| value_err("id", e))? {
        None | Some(0) => Ok(None),
        Some(i) if i < 0 => Err(err(
            ErrorKind::ER_NOT_SUPPORTED_YET,
            "turnstile serve does not support negative ids (the engine's keys are unsigned)",
        )),
        Some(i) => Ok(Some(i as u32)),
    }
}

/// `k` is a signed 32-bit `INTEGER`; the engine keeps its two's-complement bits (its k index
/// orders by those bits, which no statement here reads in order).
fn k_bits(k: i64) -> u32 {
    k as i32 as u32
}

fn k_of(r: &Row) -> i64 {
    i64::from(r.k as i32)
}

fn stored_k(v: &Lit) -> Result<u32, SqlError> {
    value::int_store(v, "k", i32::MIN.into(), i32::MAX.into())
        .map_err(|e| value_err("k", e))?
        .map(k_bits)
        .ok_or_else(|| err(ErrorKind::ER_BAD_NULL_ERROR, "Column 'k' cannot be null"))
}

/// A `CHAR` column's value: the value's text; NULL is refused (the columns are NOT NULL).
fn stored_text<const N: usize>(col: &str, v: &Lit) -> Result<[u8; N], SqlError> {
    let t = value::text(v).ok_or_else(|| {
        err(
            ErrorKind::ER_BAD_NULL_ERROR,
            format!("Column '{col}' cannot be null"),
        )
    })?;
    fixed::<N>(col, &t)
}

/// Text values ordered (and with `distinct`, deduplicated) as MySQL's default collations do:
/// case-insensitively. MySQL 8.0's `utf8mb4_0900_ai_ci` and MariaDB's `utf8mb4_general_ci`
/// agree on letters, digits, `-` and space (space < `-` < digits < letters, case folded) and
/// disagree on other punctuation and on accents, so values with other bytes are refused
/// rather than ordered one server's way.
fn order_by_collation<'a>(
    values: impl Iterator<Item = &'a [u8]>,
    distinct: bool,
) -> Result<Vec<Vec<u8>>, SqlError> {
    let mut v: Vec<Vec<u8>> = values.map(<[u8]>::to_vec).collect();
    if let Some(bad) = v.iter().find(|c| {
        !c.iter()
            .all(|b| b.is_ascii_alphanumeric() || b" -".contains(b))
    }) {
        return Err(err(
            ErrorKind::ER_NOT_SUPPORTED_YET,
            format!(
                "turnstile serve does not support ORDER BY c over text other than letters, \
                 digits, '-' and spaces (its order depends on the collation): '{}'",
                String::from_utf8_lossy(bad)
            ),
        ));
    }
    v.sort_by_key(|c| c.to_ascii_uppercase());
    if distinct {
        v.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    }
    Ok(v)
}

/// The server has one database ([`sql::DATABASE`]); any other name is unknown, as in MySQL.
fn check_database(db: &str) -> Result<(), SqlError> {
    if db == sql::DATABASE {
        Ok(())
    } else {
        Err(err(
            ErrorKind::ER_BAD_DB_ERROR,
            format!("Unknown database '{db}'"),
        ))
    }
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

/// The stored ids in `id BETWEEN lo AND hi`, clamped to the ids a row can have; `None` when
/// it holds none.
fn id_range(lo: &Lit, hi: &Lit) -> Result<Option<(u32, u32)>, SqlError> {
    let Some((lo, hi)) = value::int_between(lo, hi).map_err(|e| value_err("id", e))? else {
        return Ok(None);
    };
    let (lo, hi) = (lo.max(1), hi.min(MAX_ID));
    Ok((lo <= hi).then_some((lo as u32, hi as u32)))
}

/// The id `id = v` looks up; `None` when no stored row can have it.
fn id_point(v: &Lit) -> Result<Option<u32>, SqlError> {
    Ok(value::int_eq(v)
        .map_err(|e| value_err("id", e))?
        .filter(|i| (1..=MAX_ID).contains(i))
        .map(|i| i as u32))
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
        // A text with `?` can equal a template's key: that plan's parameters are not its own.
        if let Some(p) = st.cache.get(sql).filter(|p| p.params == 0) {
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

/// A bound parameter as a literal; dates and times as the text MySQL converts them to.
fn param_lit(v: ValueInner<'_>) -> Result<Lit, SqlError> {
    Ok(match v {
        ValueInner::NULL => Lit::Null,
        ValueInner::Bytes(b) => Lit::Str(b.to_vec()),
        ValueInner::Int(i) => Lit::Int(i),
        ValueInner::UInt(u) => i64::try_from(u).map_or(Lit::Num(u.to_string()), Lit::Int),
        ValueInner::Double(d) => Lit::Double(d),
        ValueInner::Date(b) => Lit::Str(datetime_text(b, false)?.into_bytes()),
        ValueInner::Datetime(b) => Lit::Str(datetime_text(b, true)?.into_bytes()),
        ValueInner::Time(b) => Lit::Str(time_text(b)?.into_bytes()),
    })
}

fn malformed_param() -> SqlError {
    err(
        ErrorKind::ER_MALFORMED_PACKET,
        "Malformed communication packet (a date or time parameter of an impossible length)",
    )
}

/// A binary-protocol DATE / DATETIME (length 0, 4, 7 or 11: year u16, month, day, hour,
/// minute, second, microseconds u32) as `YYYY-MM-DD[ HH:MM:SS[.ffffff]]`.
fn datetime_text(b: &[u8], with_time: bool) -> Result<String, SqlError> {
    let mut v = [0u8; 11];
    if ![0, 4, 7, 11].contains(&b.len()) {
        return Err(malformed_param());
    }
    v[..b.len()].copy_from_slice(b);
    let year = u16::from_le_bytes([v[0], v[1]]);
    let mut s = format!("{year:04}-{:02}-{:02}", v[2], v[3]);
    if with_time {
        s.push_str(&format!(" {:02}:{:02}:{:02}", v[4], v[5], v[6]));
        let us = u32::from_le_bytes([v[7], v[8], v[9], v[10]]);
        if us != 0 {
            s.push_str(&format!(".{us:06}"));
        }
    }
    Ok(s)
}

/// A binary-protocol TIME (length 0, 8 or 12: negative, days u32, hour, minute, second,
/// microseconds u32) as `[-]HH:MM:SS[.ffffff]`, days folded into the hours.
fn time_text(b: &[u8]) -> Result<String, SqlError> {
    let mut v = [0u8; 12];
    if ![0, 8, 12].contains(&b.len()) {
        return Err(malformed_param());
    }
    v[..b.len()].copy_from_slice(b);
    let days = u64::from(u32::from_le_bytes([v[1], v[2], v[3], v[4]]));
    let hours = days * 24 + u64::from(v[5]);
    let mut s = format!(
        "{}{hours:02}:{:02}:{:02}",
        if v[0] != 0 { "-" } else { "" },
        v[6],
        v[7]
    );
    let us = u32::from_le_bytes([v[8], v[9], v[10], v[11]]);
    if us != 0 {
        s.push_str(&format!(".{us:06}"));
    }
    Ok(s)
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

    fn salt(&self) -> [u8; crate::auth::SCRAMBLE_LEN] {
        self.ctx.salt
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
            // The protocol counts parameters in 16 bits; MySQL refuses more.
            Ok(p) if p.params > usize::from(u16::MAX) => {
                let e = err(
                    ErrorKind::ER_PS_MANY_PARAM,
                    "Prepared statement contains too many placeholders",
                );
                ctx.count_error(&e);
                info.error(e.kind, e.msg.as_bytes()).await
            }
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
                let bound: Result<Vec<Lit>, SqlError> = params
                    .into_iter()
                    .map(|p| param_lit(p.value.into_inner()))
                    .collect();
                match bound {
                    Ok(bound) => ctx.run_statement(st, &plan, &bound, results).await,
                    Err(e) => ctx.answer_error(results, e).await,
                }
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
        if let Err(e) = check_database(db) {
            self.ctx.count_error(&e);
            return w.error(e.kind, e.msg.as_bytes()).await;
        }
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
        let range = |lo: Lit, hi: Lit| id_range(&lo, &hi).ok().flatten();
        assert_eq!(range(Lit::Int(-5), Lit::Int(3)), Some((1, 3)));
        assert_eq!(range(Lit::Int(5), Lit::Int(3)), None);
        assert_eq!(range(Lit::Null, Lit::Int(3)), None);
        assert_eq!(
            range(Lit::Str(b"7".to_vec()), Lit::Int(1 << 40)),
            Some((7, i32::MAX as u32))
        );
        assert_eq!(
            range(Lit::Num("1.5".into()), Lit::Num("3.5".into())),
            Some((2, 3))
        );
        assert_eq!(id_point(&Lit::Int(-1)).ok().flatten(), None);
        assert_eq!(id_point(&Lit::Double(5.0)).ok().flatten(), Some(5));
        assert_eq!(id_point(&Lit::Num("5.5".into())).ok().flatten(), None);
    }
}
