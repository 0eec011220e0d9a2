//! The protocol side of one client connection: the `opensrv-mysql` shim, run with blocking I/O
//! on the connection's own thread, that prepares, executes and closes statements for the
//! executor ([`crate::conn`]).

use std::io::{self, Read, Write};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use opensrv_mysql::{
    AsyncMysqlIntermediary, AsyncMysqlShim, Column, ErrorKind, InitWriter, ParamParser,
    QueryResultWriter, StatementMetaWriter,
};
use tokio::io::AsyncWrite;
use turnstile_engine::Connection;

use crate::admin;
use crate::binary_params::param_lit;
use crate::conn::{check_database, Ctx, State};
use crate::mysql_error::{err, plan_err, SqlError};
use crate::outcome::{result_cols, text_col};
use crate::pool::{ClientIo, Idle};
use crate::sql::{self, Lit};
use crate::wire::{block_on, BlockingWriter, CheckedReader, StmtParams};
use crate::Shared;

/// A socket shared by the reader, the writer and the answers of the packet checks (`&TcpStream`
/// and `&UnixStream` read and write).
/// A connection's socket, shared by its reader and writer; with a pool, a call that would
/// block is counted as the worker waiting on the client ([`ClientIo`]).
struct SharedIo<S> {
    stream: Arc<S>,
    pooled: Option<ClientIo>,
}

impl<S> Read for SharedIo<S>
where
    for<'a> &'a S: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut stream = &*self.stream;
        match &self.pooled {
            Some(p) => p.read(buf, |buf| stream.read(buf)),
            None => stream.read(buf),
        }
    }
}

impl<S> Write for SharedIo<S>
where
    for<'a> &'a S: Write,
{
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut stream = &*self.stream;
        match &self.pooled {
            Some(p) => p.write(buf, |buf| stream.write(buf)),
            None => stream.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self.stream).flush()
    }
}

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
    block_on(connection(shared, id, stream, login, None));
}

/// Connection `id` on `stream`, from its greeting to its end. With `idle` (a thread pool), it
/// returns `Pending` between commands while the client is silent; otherwise it never does.
pub(crate) fn connection<S>(
    shared: &Arc<Shared>,
    id: u32,
    stream: Arc<S>,
    login: crate::auth::Login,
    idle: Option<Idle>,
) -> impl std::future::Future<Output = ()> + Send + 'static
where
    S: Send + Sync + 'static,
    for<'a> &'a S: Read + Write,
{
    let params = StmtParams::default();
    let salt = login.salt();
    let pooled = idle.as_ref().map(Idle::client_io);
    let io = |stream: Arc<S>| SharedIo {
        stream,
        pooled: pooled.clone(),
    };
    let mut reader = CheckedReader::new(
        io(stream.clone()),
        io(stream.clone()),
        shared.config.max_packet,
        params.clone(),
        login,
    );
    if let Some(idle) = idle {
        reader = reader.with_idle(idle);
    }
    // Buffered: the protocol crate writes each packet as a header and a body, and a result
    // set as one packet per row; unbuffered, that is two syscalls and two TCP segments per row
    // (TCP_NODELAY is on). The crate flushes at the end of every response.
    let writer = BlockingWriter(std::io::BufWriter::with_capacity(WRITE_BUFFER, io(stream)));
    let (gate, generation) = shared.gate.current();
    let mut conn = Connection::new(shared.engine.clone(), &gate, format!("conn {id}"));
    conn.set_row_send(shared.row_send());
    conn.set_commit_mode(shared.commit_mode());
    let shared = shared.clone();
    let shim = Shim {
        ctx: Ctx {
            shared: shared.clone(),
            id,
            params,
            salt,
        },
        st: Mutex::new(State::new(conn, generation)),
    };
    async move {
        if let Err(e) = AsyncMysqlIntermediary::run_on(shim, reader, writer).await {
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
        // The shim (and its engine connection) was dropped by `run_on`: an open transaction
        // was rolled back and its row locks released.
    }
}

struct Shim {
    ctx: Ctx,
    // A `Session` is `Send` but not `Sync`; the protocol crate wants a `Sync` shim. The lock
    // is never contended: only `get_mut` is used.
    st: Mutex<State>,
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
        match st.cache.plan(query) {
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
