//! The connection's byte streams as the protocol crate sees them, and the packet checks the
//! protocol crate does not make.
//!
//! `opensrv-mysql` is written against tokio's `AsyncRead`/`AsyncWrite`. Here both are plain
//! blocking reads and writes on the thread running the connection (MySQL's
//! one-thread-per-connection): a poll never returns `Pending`, so [`block_on`] runs a
//! connection's whole protocol loop on its thread without a runtime, and a nested
//! [`block_on`] (sending a row from inside an engine cursor) is sound. The one exception is a
//! thread pool's connection between two commands ([`crate::pool`]): its read returns
//! `Pending` there, outside any statement, and the pool polls it again when a byte arrives.
//!
//! [`CheckedReader`] frames the client's packets as they arrive and, before the protocol crate
//! sees them:
//! * refuses a logical packet larger than `max_allowed_packet` (error 1153, connection closed,
//!   as MySQL does) without buffering it;
//! * logs the client in ([`crate::auth`]): it reads the handshake response (and the answer to
//!   an auth switch, when the protocol crate asks for one) whole, at most [`MAX_LOGIN_PACKET`]
//!   bytes, checks the password and answers a refusal itself (error 1045, or 1043 for a
//!   handshake that cannot be read; connection closed). The login's packets are told apart
//!   from commands by this exchange, not by their numbers, so that every packet after it is
//!   checked as a command;
//! * closes the connection with error 1156 on packets out of order: a login packet not
//!   numbered as the exchange goes, a command not numbered 0 (it would skip every check
//!   here), or a continuation packet not numbered after the one before (the crate asserts,
//!   and panics);
//! * answers a command the protocol crate does not know with error 1047 and skips it, as MySQL
//!   does (the crate would answer OK: a silent wrong answer), and `COM_STMT_RESET` with OK
//!   (an error if the statement has long data, which the crate keeps and cannot drop);
//! * closes the connection on a malformed command (empty, or too short for its fixed fields)
//!   with error 1835 — the crate would panic or answer OK;
//! * answers a statement text or database name that is not UTF-8 (`COM_QUERY`,
//!   `COM_STMT_PREPARE`, `COM_INIT_DB`) with error 1366 and skips it, and the connection goes
//!   on: the crate hands the server a `&str` and would close the connection without a word;
//! * bounds the long data (`COM_STMT_SEND_LONG_DATA`) kept for a connection's statements by
//!   `max_allowed_packet` in all (error 1153), since the crate keeps it until the statement
//!   is executed or closed; long data for a statement that is not prepared is dropped
//!   unanswered, as MySQL does (the crate would close the connection without a word);
//! * answers an execution of a statement that was never prepared with error 1243 (the crate
//!   would close the connection without an answer);
//! * adds a space to `SELECT @@max_allowed_packet`, which the protocol crate would answer
//!   itself with a fixed 64 MiB, so that the server answers the limit in force;
//! * completes `COM_STMT_EXECUTE` packets that rely on the types bound by an earlier execution
//!   (`new_params_bound_flag` = 0, what libmysqlclient/libmariadb — so sysbench — send from the
//!   second execution on): opensrv-mysql 0.7 does not skip that flag byte and reads every
//!   parameter one byte off. The packet is rewritten with the flag set and the types the
//!   statement was last executed with, which is what the flag means.
//!
//! What a client can make a connection hold is bounded: a packet (and the copy of it kept here
//! while it is checked or rewritten) by `max_allowed_packet`, a login packet by
//! [`MAX_LOGIN_PACKET`], long data by `max_allowed_packet` over all statements, the parameter
//! types remembered per statement by the statements prepared (the server bounds their number),
//! and this reader's buffer shrinks back after a large packet.

use std::collections::HashMap;
use std::future::Future;
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::auth::{self, Login};

/// A packet's largest payload: longer payloads continue in the next packet.
const MAX_PAYLOAD: usize = 0xFF_FFFF;

/// The largest login packet (handshake response, auth switch answer) read: MySQL accepts at
/// most 64 KiB of connection attributes, and the other fields take under 2 KiB (32 fixed bytes,
/// a user of 32 characters and a database name of 64, 4 bytes each in utf8mb4, an auth answer
/// of at most 512 bytes for a 4096-bit RSA key, a plugin name).
pub const MAX_LOGIN_PACKET: usize = 64 * 1024 + 2 * 1024;

/// The least a read from the socket asks for: MySQL's `net_buffer_length` default, 16 KiB,
/// about a dozen sysbench statements.
const READ_WINDOW: usize = 16 * 1024;

/// The most a read from the socket asks for at once when a whole packet is awaited: the read
/// buffer is zeroed before each read, so a window as large as the packet would zero it again
/// after every short read.
const MAX_READ_WINDOW: usize = 1024 * 1024;

/// The buffer a connection keeps between packets: after a large packet it shrinks back to
/// this, a few read windows, so an idle connection does not hold a packet's worth of memory.
const RAW_KEEP: usize = 4 * READ_WINDOW;

const COM_QUIT: u8 = 0x01;
const COM_INIT_DB: u8 = 0x02;
const COM_QUERY: u8 = 0x03;
const COM_FIELD_LIST: u8 = 0x04;
const COM_PING: u8 = 0x0e;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
const COM_STMT_CLOSE: u8 = 0x19;
const COM_STMT_RESET: u8 = 0x1a;

/// MySQL's `ER_NET_PACKET_TOO_LARGE`.
pub const ER_NET_PACKET_TOO_LARGE: u16 = 1153;
/// MySQL's `ER_UNKNOWN_COM_ERROR`.
pub const ER_UNKNOWN_COM_ERROR: u16 = 1047;
/// MySQL 8's `ER_MALFORMED_PACKET`.
pub const ER_MALFORMED_PACKET: u16 = 1835;
/// MySQL's `ER_CON_COUNT_ERROR` (too many connections).
pub const ER_CON_COUNT_ERROR: u16 = 1040;
/// MySQL's `ER_NET_PACKETS_OUT_OF_ORDER`.
pub const ER_NET_PACKETS_OUT_OF_ORDER: u16 = 1156;
/// MySQL's `ER_UNKNOWN_STMT_HANDLER`.
pub const ER_UNKNOWN_STMT_HANDLER: u16 = 1243;
/// MySQL's `ER_TRUNCATED_WRONG_VALUE_FOR_FIELD` ("Incorrect string value").
pub const ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: u16 = 1366;
pub use auth::{ER_ACCESS_DENIED_ERROR, ER_HANDSHAKE_ERROR};

/// Runs `f` to completion on this thread. The streams never return `Pending`; if a future did,
/// the thread parks until it is woken.
pub fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let mut f = std::pin::pin!(f);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// An ERR packet with sequence number `seq`.
pub fn err_packet(seq: u8, code: u16, sqlstate: &[u8; 5], msg: &str) -> Vec<u8> {
    let mut body = vec![0xff];
    body.extend_from_slice(&code.to_le_bytes());
    body.push(b'#');
    body.extend_from_slice(sqlstate);
    body.extend_from_slice(msg.as_bytes());
    let mut p = (body.len() as u32).to_le_bytes()[..3].to_vec();
    p.push(seq);
    p.extend_from_slice(&body);
    p
}

/// An OK packet (no rows affected, autocommit status) with sequence number `seq`.
fn ok_packet(seq: u8) -> Vec<u8> {
    // header, affected rows 0, last insert id 0, status SERVER_STATUS_AUTOCOMMIT, 0 warnings.
    let body = [0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00];
    let mut p = (body.len() as u32).to_le_bytes()[..3].to_vec();
    p.push(seq);
    p.extend_from_slice(&body);
    p
}

/// A packet with sequence number `seq` around `body` (shorter than `MAX_PAYLOAD`).
fn frame(seq: u8, body: &[u8]) -> Vec<u8> {
    let mut p = (body.len() as u32).to_le_bytes()[..3].to_vec();
    p.push(seq);
    p.extend_from_slice(body);
    p
}

/// Blocking writes presented as an `AsyncWrite`.
pub struct BlockingWriter<W>(pub W);

impl<W: Write + Unpin> AsyncWrite for BlockingWriter<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(self.0.write(buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(self.0.write_vectored(bufs))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.0.flush())
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Where the framing is in the client's byte stream.
#[derive(Debug, Clone, Copy)]
enum At {
    /// At a packet header.
    Header,
    /// Inside a packet body that goes to the protocol crate.
    Forward(usize),
    /// Inside a packet body that is dropped (an unknown command already answered).
    Skip(usize),
}

impl At {
    /// Where a packet stands after `n` of the `left` bytes still to forward went out.
    fn after_forward(left: usize, n: usize) -> At {
        if left == n {
            At::Header
        } else {
            At::Forward(left - n)
        }
    }
}

/// Where the login stands.
enum Phase {
    /// Waiting for the handshake response, the client's first packet.
    Handshake,
    /// The protocol crate answered the handshake response with an auth switch: waiting for the
    /// answer, numbered `seq`, to check for `user`.
    Switch { seq: u8, user: Vec<u8> },
    /// Logged in: every packet that does not continue another starts a command.
    Commands,
}

/// What the checks made of a command.
enum Next {
    /// Forward it to the protocol crate.
    Forward,
    /// Answered or rewritten here: read on.
    Handled,
    /// The stream ended.
    Eof,
}

/// A logical packet gathered whole in the buffer.
enum Gathered {
    /// It ends `end` bytes into the available bytes; its last packet is numbered `last_seq`.
    Whole { end: usize, last_seq: u8 },
    /// A continuation is out of order or over `max_allowed_packet`: the header checks refuse
    /// it when they reach it.
    Unchecked,
    /// The stream ended.
    Eof,
}

/// Blocking reads presented as an `AsyncRead`, with the packet checks described in the module
/// documentation. `E` writes the answers the checks give (a second handle on the socket).
pub struct CheckedReader<R, E> {
    inner: R,
    answer: E,
    max_packet: usize,
    raw: Vec<u8>,
    /// Bytes of `raw` already consumed.
    pos: usize,
    at: At,
    /// Bytes of the current logical packet so far (a payload of `MAX_PAYLOAD` continues).
    logical: usize,
    continuing: bool,
    /// Why the connection was closed by a check, for the log.
    pub refused: Option<String>,
    /// Parameter counts of the connection's prepared statements (kept by the shim).
    params: StmtParams,
    /// The parameter types each statement was last executed with.
    bound: HashMap<u32, Vec<u8>>,
    /// A rewritten packet being handed out, and how much of it was.
    staged: Vec<u8>,
    staged_pos: usize,
    /// Who may log in, with which scramble.
    login: Login,
    phase: Phase,
    /// The sequence number of the last packet header read.
    last_seq: u8,
    /// Bytes of `COM_STMT_SEND_LONG_DATA` received for each statement since its last
    /// execute or close: the protocol crate keeps them all until then, so their sum over
    /// the connection's statements is bounded by `max_packet` as one packet would be (MySQL
    /// answers such an overflow the same way). Only prepared statements have an entry.
    long_data: HashMap<u32, usize>,
    long_data_total: usize,
    /// The current packet is long data for this statement (its continuation chunks count
    /// too).
    in_long_data: Option<u32>,
    /// With a thread pool: the wait for the next command, which frees the worker.
    idle: Option<crate::pool::Idle>,
}

/// Parameter counts of a connection's prepared statements, by statement id: written by the
/// shim when it prepares or closes one, read by the [`CheckedReader`].
pub type StmtParams = Arc<Mutex<HashMap<u32, u16>>>;

/// How MySQL shows a string that is not valid in its character set, from its first bad byte:
/// at most 6 bytes, printable ASCII as is and other bytes as `\xHH`, then `...` if it goes on.
fn shown_bytes(bad: &[u8]) -> String {
    let mut s = String::new();
    for b in bad.iter().take(6) {
        if (0x20..0x7f).contains(b) {
            s.push(*b as char);
        } else {
            s.push_str(&format!("\\x{b:02X}"));
        }
    }
    if bad.len() > 6 {
        s.push_str("...");
    }
    s
}

impl<R: Read, E: Write> CheckedReader<R, E> {
    /// Reads from `inner`; answers to refused packets go to `answer`. The first packet is the
    /// handshake response to a greeting that sent `login`'s scramble.
    pub fn new(inner: R, answer: E, max_packet: usize, params: StmtParams, login: Login) -> Self {
        CheckedReader {
            params,
            bound: HashMap::new(),
            staged: Vec::new(),
            staged_pos: 0,
            login,
            phase: Phase::Handshake,
            last_seq: 0,
            long_data: HashMap::new(),
            long_data_total: 0,
            in_long_data: None,
            idle: None,
            inner,
            answer,
            max_packet,
            raw: Vec::with_capacity(READ_WINDOW),
            pos: 0,
            at: At::Header,
            logical: 0,
            continuing: false,
            refused: None,
        }
    }

    /// Waits for each next command with `idle` (a thread pool's connection) instead of a
    /// blocking read.
    pub(crate) fn with_idle(mut self, idle: crate::pool::Idle) -> Self {
        self.idle = Some(idle);
        self
    }

    fn available(&self) -> &[u8] {
        &self.raw[self.pos..]
    }

    /// Logged in, between two commands, with nothing of the next one read: the only point
    /// where a pooled connection lets its worker go (nothing is half-parsed here).
    fn between_commands(&self) -> bool {
        matches!(self.phase, Phase::Commands)
            && matches!(self.at, At::Header)
            && !self.continuing
            && self.staged_pos >= self.staged.len()
            && self.available().is_empty()
    }

    /// Reads more bytes from the socket: `want` more are awaited (a read asks for at least
    /// `READ_WINDOW` and at most `MAX_READ_WINDOW`). `Ok(false)` at end of stream.
    fn fill(&mut self, want: usize) -> io::Result<bool> {
        if self.pos > 0 {
            self.raw.drain(..self.pos);
            self.pos = 0;
            if self.raw.capacity() > RAW_KEEP && self.raw.len() < RAW_KEEP {
                self.raw.shrink_to(RAW_KEEP);
            }
        }
        let old = self.raw.len();
        self.raw
            .resize(old + want.clamp(READ_WINDOW, MAX_READ_WINDOW), 0);
        let n = loop {
            match self.inner.read(&mut self.raw[old..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        };
        self.raw.truncate(old + *n.as_ref().unwrap_or(&0));
        Ok(n? > 0)
    }

    /// Reads until `n` bytes are available; `Ok(false)` if the stream ended first. Callers
    /// bound `n` by a packet's checked length.
    fn fill_to(&mut self, n: usize) -> io::Result<bool> {
        while self.available().len() < n {
            let want = n - self.available().len();
            if !self.fill(want)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Answers the client and ends the connection with `code`.
    fn refuse(&mut self, seq: u8, code: u16, msg: String) -> io::Error {
        self.refuse_as(seq, code, b"08S01", io::ErrorKind::InvalidData, msg)
    }

    /// Answers the client with `code` and `sqlstate` and ends the connection with an error of
    /// `kind`.
    fn refuse_as(
        &mut self,
        seq: u8,
        code: u16,
        sqlstate: &[u8; 5],
        kind: io::ErrorKind,
        msg: String,
    ) -> io::Error {
        let _ = self
            .answer
            .write_all(&err_packet(seq.wrapping_add(1), code, sqlstate, &msg))
            .and_then(|_| self.answer.flush());
        self.refused = Some(format!("{code}: {msg}"));
        io::Error::new(kind, msg)
    }

    /// Whether statement `stmt` is prepared (the protocol crate knows it).
    fn prepared(&self, stmt: u32) -> bool {
        self.params
            .lock()
            .expect("statement params")
            .contains_key(&stmt)
    }

    /// Counts `len` more bytes of long data for statement `stmt`; past `max_packet` over all
    /// statements the connection is refused.
    fn add_long_data(&mut self, stmt: u32, seq: u8, len: usize) -> io::Result<()> {
        *self.long_data.entry(stmt).or_default() += len;
        self.long_data_total += len;
        if self.long_data_total <= self.max_packet {
            return Ok(());
        }
        let msg = format!(
            "Got a packet bigger than 'max_allowed_packet' bytes (long data of {} > {})",
            self.long_data_total, self.max_packet
        );
        Err(self.refuse(seq, ER_NET_PACKET_TOO_LARGE, msg))
    }

    /// Statement `stmt` was executed or closed: the protocol crate dropped its long data.
    fn drop_long_data(&mut self, stmt: u32) {
        if let Some(n) = self.long_data.remove(&stmt) {
            self.long_data_total -= n;
        }
    }

    /// Answers the command whose header is at `pos` with `answer` and skips its `len` bytes.
    fn answer_and_skip(&mut self, answer: &[u8], len: usize) -> io::Result<()> {
        self.answer.write_all(answer)?;
        self.answer.flush()?;
        self.pos += 4;
        self.at = At::Skip(len);
        Ok(())
    }

    /// Checks a login packet (numbered `seq`, `len` bytes of body) whose header is at `pos`:
    /// reads it whole, and refuses the connection, or moves the login on. `Ok(false)` at end
    /// of stream.
    fn check_login(&mut self, seq: u8, len: usize) -> io::Result<bool> {
        if len > MAX_LOGIN_PACKET {
            let msg =
                format!("Bad handshake (a login packet of {len} bytes, over {MAX_LOGIN_PACKET})");
            return Err(self.refuse(seq, ER_HANDSHAKE_ERROR, msg));
        }
        if !self.fill_to(4 + len)? {
            return Ok(false);
        }
        enum Verdict {
            LoggedIn,
            Switch(Vec<u8>),
            Refuse(u16, &'static [u8; 5], io::ErrorKind, String),
        }
        let out_of_order = |what: &str| {
            Verdict::Refuse(
                ER_NET_PACKETS_OUT_OF_ORDER,
                b"08S01",
                io::ErrorKind::InvalidData,
                format!("Got packets out of order ({what} numbered {seq})"),
            )
        };
        let denied = |msg| {
            Verdict::Refuse(
                ER_ACCESS_DENIED_ERROR,
                b"28000",
                io::ErrorKind::PermissionDenied,
                msg,
            )
        };
        let body = &self.raw[self.pos + 4..self.pos + 4 + len];
        let verdict = match &self.phase {
            // The greeting is numbered 0, so the handshake response 1.
            Phase::Handshake if seq != 1 => out_of_order("a handshake response"),
            Phase::Handshake => match auth::parse_handshake(body) {
                Err(why) => Verdict::Refuse(
                    ER_HANDSHAKE_ERROR,
                    b"08S01",
                    io::ErrorKind::InvalidData,
                    format!("Bad handshake ({why})"),
                ),
                Ok(h) if h.switches() => Verdict::Switch(h.user.to_vec()),
                Ok(h) => match self.login.check(h.user, h.auth) {
                    Ok(()) => Verdict::LoggedIn,
                    Err(msg) => denied(msg),
                },
            },
            Phase::Switch { seq: want, .. } if seq != *want => {
                out_of_order("an auth switch answer")
            }
            Phase::Switch { user, .. } => match self.login.check(user, body) {
                Ok(()) => Verdict::LoggedIn,
                Err(msg) => denied(msg),
            },
            Phase::Commands => unreachable!("a login packet after the login"),
        };
        match verdict {
            Verdict::LoggedIn => {
                self.phase = Phase::Commands;
                self.login.logged_in();
            }
            // The protocol crate sends the switch request numbered on from the handshake
            // response, and the client answers numbered on from that.
            Verdict::Switch(user) => {
                self.phase = Phase::Switch {
                    seq: seq.wrapping_add(2),
                    user,
                }
            }
            Verdict::Refuse(code, state, kind, msg) => {
                return Err(self.refuse_as(seq, code, state, kind, msg))
            }
        }
        Ok(true)
    }

    /// Gathers the logical packet whose first header (`len` bytes of body) is at `pos` whole in
    /// the buffer. It is at most `max_allowed_packet`: a continuation that would pass it is
    /// left to the header checks.
    fn gather(&mut self, len: usize) -> io::Result<Gathered> {
        let (mut at, mut chunk, mut seq, mut total) = (0, len, self.last_seq, len);
        loop {
            let end = at + 4 + chunk;
            if !self.fill_to(end)? {
                return Ok(Gathered::Eof);
            }
            if chunk < MAX_PAYLOAD {
                return Ok(Gathered::Whole { end, last_seq: seq });
            }
            if !self.fill_to(end + 4)? {
                return Ok(Gathered::Eof);
            }
            let h = &self.available()[end..end + 4];
            let next = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
            total += next;
            if h[3] != seq.wrapping_add(1) || total > self.max_packet {
                return Ok(Gathered::Unchecked);
            }
            (at, chunk, seq) = (end, next, h[3]);
        }
    }

    /// The error for a text command (`COM_QUERY`, `COM_STMT_PREPARE`, `COM_INIT_DB`) gathered in
    /// the first `end` available bytes whose text is not UTF-8; `None` if it is.
    fn not_utf8(&self, end: usize) -> Option<String> {
        let p = &self.available()[..end];
        let joined;
        let body = if p.len() - 4 < MAX_PAYLOAD {
            &p[4..]
        } else {
            // Longer than a packet: the text runs on past each continuation's header.
            let mut b = Vec::with_capacity(p.len());
            let mut at = 0;
            while at < p.len() {
                let n = p[at] as usize | (p[at + 1] as usize) << 8 | (p[at + 2] as usize) << 16;
                b.extend_from_slice(&p[at + 4..at + 4 + n]);
                at += 4 + n;
            }
            joined = b;
            &joined[..]
        };
        let (cmd, text) = (body[0], &body[1..]);
        let bad = std::str::from_utf8(text).err()?.valid_up_to();
        let what = match cmd {
            COM_INIT_DB => "database name",
            _ => "statement",
        };
        Some(format!(
            "Incorrect string value: '{}' in the {what} at byte {bad} (the connection's character set is utf8mb4)",
            shown_bytes(&text[bad..])
        ))
    }

    /// A `COM_STMT_EXECUTE` packet (`len` bytes of body, all available) forwarded with its
    /// parameter types made explicit: returns the packet to forward.
    fn complete_execute(&mut self, seq: u8, len: usize) -> io::Result<Vec<u8>> {
        let body = self.raw[self.pos + 4..self.pos + 4 + len].to_vec();
        self.pos += 4 + len;
        let stmt = u32::from_le_bytes([body[1], body[2], body[3], body[4]]);
        if body[0] == COM_STMT_CLOSE {
            self.bound.remove(&stmt);
            return Ok(frame(seq, &body));
        }
        let n = self
            .params
            .lock()
            .expect("statement params")
            .get(&stmt)
            .copied();
        let Some(n) = n.filter(|n| *n > 0) else {
            return Ok(frame(seq, &body));
        };
        let n = n as usize;
        let flag_at = 10 + n.div_ceil(8);
        let malformed = |r: &mut Self| {
            let msg = format!("Malformed communication packet (execute of statement {stmt})");
            r.refuse(seq, ER_MALFORMED_PACKET, msg)
        };
        match body.get(flag_at) {
            Some(1) => {
                let Some(types) = body.get(flag_at + 1..flag_at + 1 + 2 * n) else {
                    return Err(malformed(self));
                };
                self.bound.insert(stmt, types.to_vec());
                Ok(frame(seq, &body))
            }
            Some(0) => {
                let Some(types) = self.bound.get(&stmt) else {
                    return Err(malformed(self));
                };
                let mut b = Vec::with_capacity(body.len() + types.len());
                b.extend_from_slice(&body[..flag_at]);
                b.push(1);
                b.extend_from_slice(types);
                b.extend_from_slice(&body[flag_at + 1..]);
                Ok(frame(seq, &b))
            }
            _ => Err(malformed(self)),
        }
    }

    /// Checks the command whose first header (numbered 0, `len` bytes of body) is at `pos`.
    fn check_command(&mut self, seq: u8, len: usize) -> io::Result<Next> {
        if len == 0 {
            let msg = "Malformed communication packet (empty command)".into();
            return Err(self.refuse(seq, ER_MALFORMED_PACKET, msg));
        }
        if !self.fill_to(5)? {
            return Ok(Next::Eof);
        }
        let cmd = self.available()[4];
        let min_len = match cmd {
            COM_STMT_EXECUTE => 10,
            COM_STMT_CLOSE | COM_STMT_RESET => 5,
            COM_STMT_SEND_LONG_DATA => 7,
            _ => 1,
        };
        if len < min_len {
            let msg =
                format!("Malformed communication packet (command 0x{cmd:02x} of {len} bytes)");
            return Err(self.refuse(seq, ER_MALFORMED_PACKET, msg));
        }
        // The statement a statement command is about (its first 4 bytes).
        let stmt = if min_len >= 5 {
            if !self.fill_to(9)? {
                return Ok(Next::Eof);
            }
            let b = &self.available()[5..9];
            Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        } else {
            None
        };
        let known = matches!(
            cmd,
            COM_QUIT
                | COM_INIT_DB
                | COM_QUERY
                | COM_FIELD_LIST
                | COM_PING
                | COM_STMT_PREPARE
                | COM_STMT_EXECUTE
                | COM_STMT_SEND_LONG_DATA
                | COM_STMT_CLOSE
        );
        match (cmd, stmt) {
            (COM_STMT_SEND_LONG_DATA, Some(stmt)) if !self.prepared(stmt) => {
                // MySQL drops long data for a statement it does not know, unanswered (the
                // command has no answer); the protocol crate would close the connection.
                if self.continuing {
                    let msg = format!("Malformed communication packet (long data for unknown statement {stmt} longer than a packet)");
                    return Err(self.refuse(seq, ER_MALFORMED_PACKET, msg));
                }
                self.pos += 4;
                self.at = At::Skip(len);
                return Ok(Next::Handled);
            }
            (COM_STMT_SEND_LONG_DATA, Some(stmt)) => {
                self.in_long_data = Some(stmt);
                self.add_long_data(stmt, seq, len)?;
            }
            (COM_STMT_EXECUTE | COM_STMT_CLOSE, Some(stmt)) => self.drop_long_data(stmt),
            _ => {}
        }
        if let (COM_STMT_EXECUTE, Some(stmt)) = (cmd, stmt) {
            if !self.prepared(stmt) {
                let answer = err_packet(
                    1,
                    ER_UNKNOWN_STMT_HANDLER,
                    b"HY000",
                    &format!(
                        "Unknown prepared statement handler ({stmt}) given to mysqld_stmt_execute"
                    ),
                );
                if self.continuing {
                    let msg = format!("Malformed communication packet (execute of unknown statement {stmt} longer than a packet)");
                    return Err(self.refuse(seq, ER_MALFORMED_PACKET, msg));
                }
                self.answer_and_skip(&answer, len)?;
                return Ok(Next::Handled);
            }
        }
        if !known {
            if self.continuing {
                let msg = format!(
                    "Malformed communication packet (command 0x{cmd:02x} longer than a packet)"
                );
                return Err(self.refuse(seq, ER_MALFORMED_PACKET, msg));
            }
            let pending = stmt.is_some_and(|s| self.long_data.contains_key(&s));
            let answer = match cmd {
                // Nothing else is kept between executions: nothing to reset.
                COM_STMT_RESET if !pending => ok_packet(1),
                // The protocol crate keeps long data until the statement is
                // executed or closed, and cannot be told to drop it: say so
                // rather than answer OK and use the data anyway.
                COM_STMT_RESET => err_packet(
                    1,
                    ER_UNKNOWN_COM_ERROR,
                    b"08S01",
                    "COM_STMT_RESET of a statement with long data is not supported: close the statement instead",
                ),
                _ => err_packet(
                    1,
                    ER_UNKNOWN_COM_ERROR,
                    b"08S01",
                    &format!("Unknown command 0x{cmd:02x}"),
                ),
            };
            self.answer_and_skip(&answer, len)?;
            return Ok(Next::Handled);
        }
        if matches!(cmd, COM_QUERY | COM_STMT_PREPARE | COM_INIT_DB) {
            match self.gather(len)? {
                Gathered::Eof => return Ok(Next::Eof),
                Gathered::Unchecked => {}
                Gathered::Whole { end, last_seq } => {
                    if let Some(msg) = self.not_utf8(end) {
                        let answer = err_packet(
                            last_seq.wrapping_add(1),
                            ER_TRUNCATED_WRONG_VALUE_FOR_FIELD,
                            b"HY000",
                            &msg,
                        );
                        self.answer.write_all(&answer)?;
                        self.answer.flush()?;
                        // Every packet of it was read here: the next header is a command's.
                        self.pos += end;
                        self.continuing = false;
                        return Ok(Next::Handled);
                    }
                }
            }
        }
        // opensrv-mysql answers `SELECT @@max_allowed_packet` itself with a fixed
        // 64 MiB; a trailing space makes it reach the server, which answers the
        // limit in force.
        const MAX_PACKET_QUERY: &[u8] = b"select @@max_allowed_packet";
        if cmd == COM_QUERY && len == 1 + MAX_PACKET_QUERY.len() {
            if !self.fill_to(4 + len)? {
                return Ok(Next::Eof);
            }
            let body = &self.available()[4..4 + len];
            if body[1..].eq_ignore_ascii_case(MAX_PACKET_QUERY) {
                let mut b = body.to_vec();
                b.push(b' ');
                self.staged = frame(seq, &b);
                self.staged_pos = 0;
                self.pos += 4 + len;
                return Ok(Next::Handled);
            }
        }
        if (cmd == COM_STMT_EXECUTE || cmd == COM_STMT_CLOSE) && !self.continuing {
            if !self.fill_to(4 + len)? {
                return Ok(Next::Eof);
            }
            self.staged = self.complete_execute(seq, len)?;
            self.staged_pos = 0;
            return Ok(Next::Handled);
        }
        Ok(Next::Forward)
    }

    /// Copies forwardable bytes into `out`; returns how many (0 = end of stream).
    fn read_checked(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.staged_pos < self.staged.len() {
                let n = (self.staged.len() - self.staged_pos).min(out.len());
                out[..n].copy_from_slice(&self.staged[self.staged_pos..self.staged_pos + n]);
                self.staged_pos += n;
                return Ok(n);
            }
            match self.at {
                At::Forward(left) if self.available().is_empty() => {
                    // Nothing buffered: read straight into the caller's buffer, as much of this
                    // packet as it offers room for. The protocol crate parses its whole buffer
                    // again after every read, so a large packet handed over 16 KiB at a time
                    // cost it time quadratic in its size (a 63 MiB packet: 51 s).
                    let want = left.min(out.len());
                    let n = loop {
                        match self.inner.read(&mut out[..want]) {
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                            r => break r,
                        }
                    }?;
                    if n > 0 {
                        self.at = At::after_forward(left, n);
                    }
                    return Ok(n);
                }
                At::Forward(left) => {
                    let n = left.min(self.available().len()).min(out.len());
                    out[..n].copy_from_slice(&self.raw[self.pos..self.pos + n]);
                    self.pos += n;
                    self.at = At::after_forward(left, n);
                    return Ok(n);
                }
                At::Skip(left) => {
                    if self.available().is_empty() && !self.fill(left)? {
                        return Ok(0);
                    }
                    let n = left.min(self.available().len());
                    self.pos += n;
                    self.at = if left == n {
                        At::Header
                    } else {
                        At::Skip(left - n)
                    };
                }
                At::Header => {
                    if !self.fill_to(4)? {
                        return Ok(0);
                    }
                    let h = self.available();
                    let len = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
                    let seq = h[3];
                    let first = !self.continuing;
                    if !first && seq != self.last_seq.wrapping_add(1) {
                        let msg = format!(
                            "Got packets out of order (a continuation numbered {seq} after {})",
                            self.last_seq
                        );
                        return Err(self.refuse(seq, ER_NET_PACKETS_OUT_OF_ORDER, msg));
                    }
                    self.last_seq = seq;
                    if first {
                        self.logical = 0;
                    }
                    self.logical += len;
                    self.continuing = len == MAX_PAYLOAD;
                    if self.logical > self.max_packet {
                        let msg = format!(
                            "Got a packet bigger than 'max_allowed_packet' bytes ({} > {})",
                            self.logical, self.max_packet
                        );
                        return Err(self.refuse(seq, ER_NET_PACKET_TOO_LARGE, msg));
                    }
                    if !matches!(self.phase, Phase::Commands) {
                        // A login packet is never continued: it is under MAX_LOGIN_PACKET.
                        if !self.check_login(seq, len)? {
                            return Ok(0);
                        }
                    } else if first {
                        self.in_long_data = None;
                        if seq != 0 {
                            // Every command starts a sequence at 0; the checks below see
                            // only those, so a command numbered otherwise would bypass them.
                            let msg =
                                format!("Got packets out of order (a command numbered {seq})");
                            return Err(self.refuse(seq, ER_NET_PACKETS_OUT_OF_ORDER, msg));
                        }
                        match self.check_command(seq, len)? {
                            Next::Forward => {}
                            Next::Handled => continue,
                            Next::Eof => return Ok(0),
                        }
                    } else if let Some(stmt) = self.in_long_data {
                        self.add_long_data(stmt, seq, len)?;
                    }
                    // Forward the header itself, then the body.
                    if out.len() < 4 {
                        return Err(io::Error::other("read buffer shorter than a header"));
                    }
                    out[..4].copy_from_slice(&self.raw[self.pos..self.pos + 4]);
                    self.pos += 4;
                    self.at = if len == 0 {
                        At::Header
                    } else {
                        At::Forward(len)
                    };
                    return Ok(4);
                }
            }
        }
    }
}

impl<R: Read + Unpin, E: Write + Unpin> AsyncRead for CheckedReader<R, E> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.between_commands() {
            if let Some(idle) = self.idle.as_mut() {
                match idle.poll_ready(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Ready(Ok(())) => {}
                }
            }
        }
        let out = buf.initialize_unfilled();
        let r = self.read_checked(out);
        Poll::Ready(r.map(|n| buf.advance(n)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(seq: u8, body: &[u8]) -> Vec<u8> {
        let mut p = (body.len() as u32).to_le_bytes()[..3].to_vec();
        p.push(seq);
        p.extend_from_slice(body);
        p
    }

    /// A handshake response from `user` answering `auth` for `plugin` (what the `mysql` crate
    /// sends: HandshakeResponse41, PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH).
    fn handshake(user: &[u8], auth: &[u8], plugin: &[u8]) -> Vec<u8> {
        let caps: u32 = 0x200 | 0x8000 | 0x80000;
        let mut b = caps.to_le_bytes().to_vec();
        b.extend(16_777_216u32.to_le_bytes());
        b.push(0x21);
        b.extend([0u8; 23]);
        b.extend(user);
        b.push(0);
        b.push(auth.len() as u8);
        b.extend(auth);
        b.extend(plugin);
        b.push(0);
        b
    }

    /// The handshake response of a client that logs in at once (no password configured).
    fn hello() -> Vec<u8> {
        packet(1, &handshake(b"root", &[7; 20], b"mysql_native_password"))
    }

    /// A reader for a server without a password; answers go to `answers`.
    fn reader<'a>(
        input: &'a [u8],
        answers: &'a mut Vec<u8>,
        max_packet: usize,
        params: StmtParams,
    ) -> CheckedReader<&'a [u8], &'a mut Vec<u8>> {
        let login = Login::new(
            Arc::new(crate::auth::Credentials::anyone()),
            "localhost",
            Box::new(|| {}),
        )
        .unwrap();
        CheckedReader::new(input, answers, max_packet, params, login)
    }

    fn read_all(r: &mut CheckedReader<&[u8], &mut Vec<u8>>) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            let n = r.read_checked(&mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    #[test]
    fn known_commands_and_handshake_packets_pass_through_unchanged() {
        let mut input = hello();
        input.extend(packet(0, b"\x03select 1"));
        input.extend(packet(0, b"\x01"));
        let mut answers = Vec::new();
        let mut r = reader(&input, &mut answers, 1024, StmtParams::default());
        assert_eq!(read_all(&mut r).unwrap(), input);
        drop(r);
        assert!(answers.is_empty());
    }

    #[test]
    fn an_unknown_command_is_answered_1047_and_skipped() {
        let mut input = hello();
        input.extend(packet(0, b"\x09statistics"));
        input.extend(packet(0, b"\x03select 1"));
        let mut answers = Vec::new();
        let mut r = reader(&input, &mut answers, 1024, StmtParams::default());
        let mut expected = hello();
        expected.extend(packet(0, b"\x03select 1"));
        assert_eq!(read_all(&mut r).unwrap(), expected);
        drop(r);
        assert_eq!(answers[4], 0xff);
        assert_eq!(u16::from_le_bytes([answers[5], answers[6]]), 1047);
    }

    #[test]
    fn a_packet_over_max_allowed_packet_is_refused_before_it_is_read() {
        // Only the header arrives: the refusal does not wait for the body.
        let input = [0x00, 0x10, 0x00, 0x00];
        let mut answers = Vec::new();
        let mut r = reader(&input, &mut answers, 1024, StmtParams::default());
        assert!(read_all(&mut r).is_err());
        assert!(r.refused.unwrap().contains("max_allowed_packet"));
        assert_eq!(u16::from_le_bytes([answers[5], answers[6]]), 1153);
    }

    #[test]
    fn an_execute_without_types_gets_the_types_of_the_last_execution() {
        let params = StmtParams::default();
        params.lock().unwrap().insert(7, 1);
        // stmt 7, flags 0, iterations 1, null bitmap 0, bound 1, type LONG, value 5.
        let first = packet(0, b"\x17\x07\0\0\0\0\x01\0\0\0\0\x01\x03\0\x05\0\0\0");
        // Next execution: bound 0, value 6.
        let second = packet(0, b"\x17\x07\0\0\0\0\x01\0\0\0\0\x00\x06\0\0\0");
        let mut input = hello();
        input.extend(&first);
        input.extend(&second);
        let mut answers = Vec::new();
        let mut r = reader(&input, &mut answers, 1024, params);
        let mut expected = hello();
        expected.extend(first);
        expected.extend(packet(
            0,
            b"\x17\x07\0\0\0\0\x01\0\0\0\0\x01\x03\0\x06\0\0\0",
        ));
        assert_eq!(read_all(&mut r).unwrap(), expected);
    }

    /// The error code of the answer starting at `at` in `answers`.
    fn code_at(answers: &[u8], at: usize) -> u16 {
        assert_eq!(answers[at + 4], 0xff, "an error packet: {answers:?}");
        u16::from_le_bytes([answers[at + 5], answers[at + 6]])
    }

    /// Long data for statement `stmt`: `n` bytes.
    fn long_data(stmt: u8, n: usize) -> Vec<u8> {
        let mut b = vec![COM_STMT_SEND_LONG_DATA, stmt, 0, 0, 0, 0, 0];
        b.extend(std::iter::repeat_n(b'x', n));
        b
    }

    #[test]
    fn long_data_is_bounded_over_all_statements_until_each_is_executed_or_closed() {
        // Closing statement 99 (not the one with long data) reset the count for all: the
        // protocol crate went on keeping statement 1's data, without bound.
        let params = StmtParams::default();
        params.lock().unwrap().insert(1, 1);
        let mut input = hello();
        input.extend(packet(0, &long_data(1, 800)));
        input.extend(packet(0, b"\x19\x63\0\0\0")); // close statement 99
        input.extend(packet(0, &long_data(1, 800)));
        let mut answers = Vec::new();
        let mut r = reader(&input, &mut answers, 1024, params.clone());
        assert!(read_all(&mut r).is_err());
        assert!(r.refused.clone().unwrap().contains("long data of 1614"));
        drop(r);
        assert_eq!(code_at(&answers, 0), ER_NET_PACKET_TOO_LARGE);
        // Closing the statement itself drops its data: the same bytes again are fine.
        let mut input = hello();
        input.extend(packet(0, &long_data(1, 800)));
        input.extend(packet(0, b"\x19\x01\0\0\0")); // close statement 1
        input.extend(packet(0, &long_data(1, 800)));
        let mut answers = Vec::new();
        let mut r = reader(&input, &mut answers, 1024, params);
        assert_eq!(read_all(&mut r).unwrap(), input);
    }

    #[test]
    fn a_command_not_numbered_zero_is_refused_out_of_order_from_the_first_command_on() {
        // Right after the login, before any command numbered 0: unknown, empty, long data.
        let params = StmtParams::default();
        params.lock().unwrap().insert(1, 1);
        for cmd in [&b"\xee"[..], b"", &long_data(1, 100)] {
            let mut input = hello();
            input.extend(packet(1, cmd));
            let mut answers = Vec::new();
            let mut r = reader(&input, &mut answers, 1024, params.clone());
            assert!(read_all(&mut r).is_err());
            assert!(r.refused.clone().unwrap().contains("a command numbered 1"));
            drop(r);
            assert_eq!(code_at(&answers, 0), ER_NET_PACKETS_OUT_OF_ORDER);
        }
    }

    #[test]
    fn after_an_auth_switch_the_answer_numbered_three_is_login_and_what_follows_commands() {
        // No answer for another plugin: the protocol crate switches to mysql_native_password.
        let switch = packet(1, &handshake(b"root", b"", b"caching_sha2_password"));
        let mut input = switch.clone();
        input.extend(packet(3, &[9; 20]));
        input.extend(packet(0, b"\x0e"));
        let mut answers = Vec::new();
        let mut r = reader(&input, &mut answers, 1024, StmtParams::default());
        assert_eq!(read_all(&mut r).unwrap(), input);
        drop(r);
        assert!(answers.is_empty());
        // The answer misnumbered, or a command numbered 3 after a login without a switch.
        for first in [switch, hello()] {
            let mut input = first;
            input.extend(packet(2, &[9; 20]));
            let mut answers = Vec::new();
            let mut r = reader(&input, &mut answers, 1024, StmtParams::default());
            assert!(read_all(&mut r).is_err());
            drop(r);
            assert_eq!(code_at(&answers, 0), ER_NET_PACKETS_OUT_OF_ORDER);
        }
    }

    /// `answers` is one error packet, of `code`.
    fn got_nothing_but_an_error(answers: &[u8], code: u16) -> bool {
        answers.len() == 4 + answers[0] as usize && code_at(answers, 0) == code
    }

    /// The login of `input` against a server with user `app` and password `pw`: the bytes
    /// forwarded, and the answers.
    fn login_with_password(input: &[u8]) -> (io::Result<Vec<u8>>, Vec<u8>, bool) {
        let credentials = crate::auth::Credentials::new("app", Some(&"pw".into()));
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let d = done.clone();
        let login = Login::new(
            Arc::new(credentials),
            "127.0.0.1",
            Box::new(move || d.store(true, std::sync::atomic::Ordering::SeqCst)),
        )
        .unwrap();
        let salt = login.salt();
        // The salt is only known once the login exists: patch the answer in.
        let input = input
            .windows(20)
            .position(|w| w == [0xaa; 20])
            .map_or(input.to_vec(), |at| {
                let mut v = input.to_vec();
                v[at..at + 20].copy_from_slice(&crate::auth::scramble(&salt, b"pw"));
                v
            });
        let mut answers = Vec::new();
        let mut r =
            CheckedReader::new(&input[..], &mut answers, 1024, StmtParams::default(), login);
        let got = read_all(&mut r);
        drop(r);
        (got, answers, done.load(std::sync::atomic::Ordering::SeqCst))
    }

    #[test]
    fn a_wrong_login_is_answered_1045_before_the_protocol_crate_sees_it() {
        let right = packet(1, &handshake(b"app", &[0xaa; 20], b"mysql_native_password"));
        let (got, answers, logged_in) = login_with_password(&right);
        assert!(got.unwrap().starts_with(&right[..4]) && answers.is_empty() && logged_in);
        for wrong in [
            packet(1, &handshake(b"app", &[0xab; 20], b"mysql_native_password")),
            packet(1, &handshake(b"bob", &[0xaa; 20], b"mysql_native_password")),
            packet(1, &handshake(b"app", b"", b"mysql_native_password")),
        ] {
            let (got, answers, logged_in) = login_with_password(&wrong);
            assert_eq!(got.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
            assert!(got_nothing_but_an_error(&answers, ER_ACCESS_DENIED_ERROR) && !logged_in);
            assert_eq!(answers[3], 2, "numbered after the handshake response");
        }
        // Through an auth switch: the answer is what is checked.
        let mut switched = packet(1, &handshake(b"app", b"", b"caching_sha2_password"));
        switched.extend(packet(3, &[0xaa; 20]));
        let (got, answers, logged_in) = login_with_password(&switched);
        assert_eq!(got.unwrap().len(), switched.len(), "both packets forwarded");
        assert!(answers.is_empty() && logged_in);
        let mut switched = packet(1, &handshake(b"app", b"", b"caching_sha2_password"));
        switched.extend(packet(3, &[0xab; 20]));
        let (got, answers, _) = login_with_password(&switched);
        assert!(got.is_err() && got_nothing_but_an_error(&answers, ER_ACCESS_DENIED_ERROR));
        assert_eq!(answers[3], 4, "numbered after the switch answer");
    }
    #[test]
    fn a_continuation_not_numbered_after_the_packet_before_is_refused_out_of_order() {
        let mut body = vec![COM_QUERY];
        body.resize(MAX_PAYLOAD, b' ');
        let mut input = hello();
        input.extend(packet(0, &body));
        input.extend(packet(7, b"select 1")); // should be 1
        let mut answers = Vec::new();
        let mut r = reader(&input, &mut answers, 64 << 20, StmtParams::default());
        assert!(read_all(&mut r).is_err());
        drop(r);
        assert_eq!(code_at(&answers, 0), ER_NET_PACKETS_OUT_OF_ORDER);
        // Numbered right, it goes through.
        let mut input = hello();
        input.extend(packet(0, &body));
        input.extend(packet(1, b"select 1"));
        let mut answers = Vec::new();
        let mut r = reader(&input, &mut answers, 64 << 20, StmtParams::default());
        assert_eq!(read_all(&mut r).unwrap(), input);
    }

    #[test]
    fn executing_a_statement_never_prepared_is_answered_1243_and_the_connection_goes_on() {
        let mut input = hello();
        input.extend(packet(0, b"\x17\x05\0\0\0\0\x01\0\0\0"));
        input.extend(packet(0, b"\x0e"));
        let mut answers = Vec::new();
        let mut r = reader(&input, &mut answers, 1024, StmtParams::default());
        let mut expected = hello();
        expected.extend(packet(0, b"\x0e"));
        assert_eq!(read_all(&mut r).unwrap(), expected);
        drop(r);
        assert_eq!(code_at(&answers, 0), ER_UNKNOWN_STMT_HANDLER);
    }

    #[test]
    fn a_reset_is_answered_ok_unless_the_statement_has_long_data_it_cannot_drop() {
        let params = StmtParams::default();
        params.lock().unwrap().insert(1, 1);
        let reset = packet(0, b"\x1a\x01\0\0\0");
        let mut input = hello();
        input.extend(&reset);
        input.extend(packet(0, &long_data(1, 10)));
        input.extend(&reset);
        let mut answers = Vec::new();
        let mut r = reader(&input, &mut answers, 1024, params);
        read_all(&mut r).unwrap();
        drop(r);
        assert_eq!(answers[4], 0x00, "the first reset: OK");
        assert_eq!(
            code_at(&answers, 4 + answers[0] as usize),
            ER_UNKNOWN_COM_ERROR
        );
    }

    #[test]
    fn a_truncated_execute_is_malformed() {
        let mut input = hello();
        input.extend(packet(0, b"\x17\x01\x00"));
        let mut answers = Vec::new();
        let mut r = reader(&input, &mut answers, 1024, StmtParams::default());
        assert!(read_all(&mut r).is_err());
        drop(r);
        assert_eq!(u16::from_le_bytes([answers[5], answers[6]]), 1835);
    }

    #[test]
    fn a_handshake_response_misnumbered_malformed_or_too_long_is_refused() {
        let cases: [(Vec<u8>, u16); 3] = [
            (
                packet(0, &handshake(b"root", b"", b"mysql_native_password")),
                ER_NET_PACKETS_OUT_OF_ORDER,
            ),
            (packet(1, b"\x00\x02"), ER_HANDSHAKE_ERROR),
            // Only the header: refused without waiting for the body.
            (vec![0x00, 0x00, 0x02, 0x01], ER_HANDSHAKE_ERROR),
        ];
        for (input, code) in cases {
            let mut answers = Vec::new();
            let mut r = reader(&input, &mut answers, 1 << 20, StmtParams::default());
            assert!(read_all(&mut r).is_err());
            drop(r);
            assert!(got_nothing_but_an_error(&answers, code), "{code}");
        }
    }

    #[test]
    fn text_that_is_not_utf8_is_answered_1366_and_the_connection_goes_on() {
        for (cmd, shown) in [
            (&b"\x03SELECT 'caf\xe9'"[..], "'\\xE9''"),
            (
                b"\x16SELECT c FROM t WHERE c='\xff\xfe' AND id=?",
                "'\\xFF\\xFE' AN...'",
            ),
            (b"\x02db\xc3", "'\\xC3'"),
        ] {
            let mut input = hello();
            input.extend(packet(0, cmd));
            input.extend(packet(0, b"\x0e"));
            let mut answers = Vec::new();
            let mut r = reader(&input, &mut answers, 1024, StmtParams::default());
            let mut expected = hello();
            expected.extend(packet(0, b"\x0e"));
            assert_eq!(
                read_all(&mut r).unwrap(),
                expected,
                "skipped, the ping passes"
            );
            drop(r);
            assert!(got_nothing_but_an_error(
                &answers,
                ER_TRUNCATED_WRONG_VALUE_FOR_FIELD
            ));
            let msg = String::from_utf8_lossy(&answers[13..]).to_string();
            assert!(
                msg.starts_with(&format!("Incorrect string value: {shown}")),
                "{msg}"
            );
            assert_eq!(answers[3], 1);
        }
    }

    #[test]
    fn a_text_longer_than_a_packet_is_checked_whole_across_its_packets() {
        let mut first = vec![COM_QUERY];
        first.extend(b"SELECT '");
        first.resize(MAX_PAYLOAD, b'a');
        let mut good = hello();
        good.extend(packet(0, &first));
        good.extend(packet(1, b"a\xc3\xa9'"));
        good.extend(packet(0, b"\x0e"));
        let mut answers = Vec::new();
        let mut r = reader(&good, &mut answers, 64 << 20, StmtParams::default());
        assert_eq!(
            read_all(&mut r).unwrap(),
            good,
            "valid: forwarded unchanged"
        );
        drop(r);
        assert!(answers.is_empty());
        // A UTF-8 sequence cut by the packet boundary is still valid; a bad byte in the second
        // packet is not, and the answer is numbered after it.
        first[MAX_PAYLOAD - 1] = 0xc3;
        let mut split = hello();
        split.extend(packet(0, &first));
        split.extend(packet(1, b"\xa9'"));
        let mut answers = Vec::new();
        let mut r = reader(&split, &mut answers, 64 << 20, StmtParams::default());
        assert_eq!(read_all(&mut r).unwrap(), split);
        drop(r);
        assert!(answers.is_empty());
        let mut bad = hello();
        bad.extend(packet(0, &first));
        bad.extend(packet(1, b"\xa9\xa9'"));
        bad.extend(packet(0, b"\x0e"));
        let mut answers = Vec::new();
        let mut r = reader(&bad, &mut answers, 64 << 20, StmtParams::default());
        let mut expected = hello();
        expected.extend(packet(0, b"\x0e"));
        assert_eq!(read_all(&mut r).unwrap(), expected);
        drop(r);
        assert!(got_nothing_but_an_error(
            &answers,
            ER_TRUNCATED_WRONG_VALUE_FOR_FIELD
        ));
        assert_eq!(answers[3], 2);
    }

    #[test]
    fn long_data_for_a_statement_not_prepared_is_dropped_unanswered_and_not_kept() {
        let mut input = hello();
        input.extend(packet(0, &long_data(9, 800)));
        input.extend(packet(0, &long_data(9, 800)));
        input.extend(packet(0, b"\x0e"));
        let mut answers = Vec::new();
        let mut r = reader(&input, &mut answers, 1024, StmtParams::default());
        let mut expected = hello();
        expected.extend(packet(0, b"\x0e"));
        assert_eq!(read_all(&mut r).unwrap(), expected);
        assert_eq!(r.long_data_total, 0);
        drop(r);
        assert!(answers.is_empty());
    }

    #[test]
    fn the_buffer_shrinks_back_after_a_large_packet() {
        let params = StmtParams::default();
        params.lock().unwrap().insert(1, 0);
        let mut input = hello();
        let mut execute = b"\x17\x01\0\0\0\0\x01\0\0\0".to_vec();
        execute.resize(4 << 20, 0);
        input.extend(packet(0, &execute));
        input.extend(packet(0, b"\x0e"));
        let mut answers = Vec::new();
        let mut r = reader(&input, &mut answers, 64 << 20, params);
        assert_eq!(read_all(&mut r).unwrap(), input);
        assert!(r.raw.capacity() <= RAW_KEEP, "{}", r.raw.capacity());
    }

    #[test]
    fn bad_bytes_are_shown_as_mysql_shows_them() {
        assert_eq!(shown_bytes(b"\xe9'"), "\\xE9'");
        assert_eq!(shown_bytes(b"\xffabcdefg"), "\\xFFabcde...");
        assert_eq!(shown_bytes(b"\x01\x7f"), "\\x01\\x7F");
    }
}
