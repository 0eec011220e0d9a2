//! The connection's byte streams as the protocol crate sees them, and the packet checks the
//! protocol crate does not make.
//!
//! `opensrv-mysql` is written against tokio's `AsyncRead`/`AsyncWrite`. Here both are plain
//! blocking reads and writes on the connection's own OS thread (MySQL's
//! one-thread-per-connection): a poll never returns `Pending`, so [`block_on`] runs a
//! connection's whole protocol loop on its thread without a runtime, and a nested
//! [`block_on`] (sending a row from inside an engine cursor) is sound.
//!
//! [`CheckedReader`] frames the client's packets as they arrive and, before the protocol crate
//! sees them:
//! * refuses a logical packet larger than `max_allowed_packet` (error 1153, connection closed,
//!   as MySQL does) without buffering it;
//! * answers a command the protocol crate does not know with error 1047 and skips it, as MySQL
//!   does (the crate would answer OK: a silent wrong answer), and `COM_STMT_RESET` with OK
//!   (an error if the statement has long data, which the crate keeps and cannot drop);
//! * closes the connection on a malformed command (empty, or too short for its fixed fields)
//!   with error 1835 — the crate would panic or answer OK;
//! * closes the connection with error 1156 on packets out of order: a command not numbered 0
//!   once commands began (it would skip every check here), or a continuation packet not
//!   numbered after the one before (the crate asserts, and panics);
//! * bounds the long data (`COM_STMT_SEND_LONG_DATA`) kept for a connection's statements by
//!   `max_allowed_packet` in all (error 1153), since the crate keeps it until the statement
//!   is executed or closed;
//! * answers an execution of a statement that was never prepared with error 1243 (the crate
//!   would close the connection without an answer);
//! * adds a space to `SELECT @@max_allowed_packet`, which the protocol crate would answer
//!   itself with a fixed 64 MiB, so that the server answers the limit in force;
//! * completes `COM_STMT_EXECUTE` packets that rely on the types bound by an earlier execution
//!   (`new_params_bound_flag` = 0, what libmysqlclient/libmariadb — so sysbench — send from the
//!   second execution on): opensrv-mysql 0.7 does not skip that flag byte and reads every
//!   parameter one byte off. The packet is rewritten with the flag set and the types the
//!   statement was last executed with, which is what the flag means.

use std::collections::HashMap;
use std::future::Future;
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A packet's largest payload: longer payloads continue in the next packet.
const MAX_PAYLOAD: usize = 0xFF_FFFF;

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
    /// Called when the first command arrives (the login is over).
    first_command: Option<Box<dyn FnOnce() + Send>>,
    /// Client packets whose header was read (the first is the handshake response).
    client_packets: u64,
    /// A command (a packet numbered 0 after the handshake response) has arrived: the login's
    /// packets, numbered on from the server's, are over.
    commands_began: bool,
    /// The sequence number of the last packet header read.
    last_seq: u8,
    /// Bytes of `COM_STMT_SEND_LONG_DATA` received for each statement since its last
    /// execute or close: the protocol crate keeps them all until then, so their sum over
    /// the connection's statements is bounded by `max_packet` as one packet would be (MySQL
    /// answers such an overflow the same way).
    long_data: HashMap<u32, usize>,
    long_data_total: usize,
    /// The current packet is long data for this statement (its continuation chunks count
    /// too).
    in_long_data: Option<u32>,
}

/// Parameter counts of a connection's prepared statements, by statement id: written by the
/// shim when it prepares or closes one, read by the [`CheckedReader`].
pub type StmtParams = Arc<Mutex<HashMap<u32, u16>>>;

impl<R: Read, E: Write> CheckedReader<R, E> {
    /// Reads from `inner`; answers to refused packets go to `answer`.
    pub fn new(inner: R, answer: E, max_packet: usize, params: StmtParams) -> Self {
        CheckedReader {
            params,
            bound: HashMap::new(),
            staged: Vec::new(),
            staged_pos: 0,
            first_command: None,
            client_packets: 0,
            commands_began: false,
            last_seq: 0,
            long_data: HashMap::new(),
            long_data_total: 0,
            in_long_data: None,
            inner,
            answer,
            max_packet,
            raw: Vec::with_capacity(16 * 1024),
            pos: 0,
            at: At::Header,
            logical: 0,
            continuing: false,
            refused: None,
        }
    }

    fn available(&self) -> &[u8] {
        &self.raw[self.pos..]
    }

    /// Reads more bytes from the socket; `Ok(false)` at end of stream.
    fn fill(&mut self) -> io::Result<bool> {
        if self.pos > 0 {
            self.raw.drain(..self.pos);
            self.pos = 0;
        }
        let old = self.raw.len();
        self.raw.resize(old + 16 * 1024, 0);
        let n = loop {
            match self.inner.read(&mut self.raw[old..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r,
            }
        };
        self.raw.truncate(old + *n.as_ref().unwrap_or(&0));
        Ok(n? > 0)
    }

    /// Answers the client and ends the connection with `code`.
    fn refuse(&mut self, seq: u8, code: u16, msg: String) -> io::Error {
        let _ = self
            .answer
            .write_all(&err_packet(seq.wrapping_add(1), code, b"08S01", &msg))
            .and_then(|_| self.answer.flush());
        self.refused = Some(format!("{code}: {msg}"));
        io::Error::new(io::ErrorKind::InvalidData, msg)
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

    /// Calls `f` when the first command arrives (the connection has logged in).
    pub fn on_first_command(&mut self, f: Box<dyn FnOnce() + Send>) {
        self.first_command = Some(f);
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
                    if self.available().is_empty() && !self.fill()? {
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
                    while self.available().len() < 4 {
                        if !self.fill()? {
                            return Ok(0);
                        }
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
                    // Every client packet with sequence number 0 starts a command (the
                    // handshake response and authentication packets continue the server's
                    // sequence, so they are never 0). The first client packet is the
                    // handshake response whatever its number: a client that sends a header
                    // numbered 0 there and then nothing is still logging in, under the
                    // connect timeout.
                    let logged_in = self.client_packets > 0;
                    if first {
                        self.client_packets += 1;
                        self.in_long_data = None;
                    } else if let Some(stmt) = self.in_long_data {
                        self.add_long_data(stmt, seq, len)?;
                    }
                    if first && seq != 0 && self.commands_began {
                        // Every command starts a sequence at 0; the checks below see only
                        // those, so a command numbered otherwise would bypass them.
                        let msg = format!("Got packets out of order (a command numbered {seq})");
                        return Err(self.refuse(seq, ER_NET_PACKETS_OUT_OF_ORDER, msg));
                    }
                    if first && seq == 0 && logged_in {
                        self.commands_began = true;
                        if let Some(f) = self.first_command.take() {
                            f();
                        }
                    }
                    if first && seq == 0 {
                        if len == 0 {
                            let msg = "Malformed communication packet (empty command)".into();
                            return Err(self.refuse(seq, ER_MALFORMED_PACKET, msg));
                        }
                        while self.available().len() < 5 {
                            if !self.fill()? {
                                return Ok(0);
                            }
                        }
                        let cmd = self.available()[4];
                        let min_len = match cmd {
                            COM_STMT_EXECUTE => 10,
                            COM_STMT_CLOSE | COM_STMT_RESET => 5,
                            COM_STMT_SEND_LONG_DATA => 7,
                            _ => 1,
                        };
                        if len < min_len {
                            let msg = format!(
                                "Malformed communication packet (command 0x{cmd:02x} of {len} bytes)"
                            );
                            return Err(self.refuse(seq, ER_MALFORMED_PACKET, msg));
                        }
                        // The statement a statement command is about (its first 4 bytes).
                        let stmt = if min_len >= 5 {
                            while self.available().len() < 9 {
                                if !self.fill()? {
                                    return Ok(0);
                                }
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
                            (COM_STMT_SEND_LONG_DATA, Some(stmt)) => {
                                self.in_long_data = Some(stmt);
                                self.add_long_data(stmt, seq, len)?;
                            }
                            (COM_STMT_EXECUTE | COM_STMT_CLOSE, Some(stmt)) => {
                                self.drop_long_data(stmt)
                            }
                            _ => {}
                        }
                        if let (COM_STMT_EXECUTE, Some(stmt)) = (cmd, stmt) {
                            if !self
                                .params
                                .lock()
                                .expect("statement params")
                                .contains_key(&stmt)
                            {
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
                                continue;
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
                            continue;
                        }
                        // opensrv-mysql answers `SELECT @@max_allowed_packet` itself with a fixed
                        // 64 MiB; a trailing space makes it reach the server, which answers the
                        // limit in force.
                        const MAX_PACKET_QUERY: &[u8] = b"select @@max_allowed_packet";
                        if cmd == COM_QUERY && len == 1 + MAX_PACKET_QUERY.len() {
                            while self.available().len() < 4 + len {
                                if !self.fill()? {
                                    return Ok(0);
                                }
                            }
                            let body = &self.available()[4..4 + len];
                            if body[1..].eq_ignore_ascii_case(MAX_PACKET_QUERY) {
                                let mut b = body.to_vec();
                                b.push(b' ');
                                self.staged = frame(seq, &b);
                                self.staged_pos = 0;
                                self.pos += 4 + len;
                                continue;
                            }
                        }
                        if (cmd == COM_STMT_EXECUTE || cmd == COM_STMT_CLOSE) && !self.continuing {
                            while self.available().len() < 4 + len {
                                if !self.fill()? {
                                    return Ok(0);
                                }
                            }
                            self.staged = self.complete_execute(seq, len)?;
                            self.staged_pos = 0;
                            continue;
                        }
                    }
                    // Forward the header itself, then the body.
                    let n = 4.min(out.len());
                    if n < 4 {
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
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
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
        let mut input = packet(1, b"handshake response");
        input.extend(packet(0, b"\x03select 1"));
        input.extend(packet(0, b"\x01"));
        let mut answers = Vec::new();
        let mut r = CheckedReader::new(&input[..], &mut answers, 1024, StmtParams::default());
        assert_eq!(read_all(&mut r).unwrap(), input);
        drop(r);
        assert!(answers.is_empty());
    }

    #[test]
    fn an_unknown_command_is_answered_1047_and_skipped() {
        let mut input = packet(0, b"\x09statistics");
        input.extend(packet(0, b"\x03select 1"));
        let mut answers = Vec::new();
        let mut r = CheckedReader::new(&input[..], &mut answers, 1024, StmtParams::default());
        assert_eq!(read_all(&mut r).unwrap(), packet(0, b"\x03select 1"));
        drop(r);
        assert_eq!(answers[4], 0xff);
        assert_eq!(u16::from_le_bytes([answers[5], answers[6]]), 1047);
    }

    #[test]
    fn a_packet_over_max_allowed_packet_is_refused_before_it_is_read() {
        // Only the header arrives: the refusal does not wait for the body.
        let input = [0x00, 0x10, 0x00, 0x00];
        let mut answers = Vec::new();
        let mut r = CheckedReader::new(&input[..], &mut answers, 1024, StmtParams::default());
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
        let mut input = first.clone();
        input.extend(&second);
        let mut answers = Vec::new();
        let mut r = CheckedReader::new(&input[..], &mut answers, 1024, params);
        let mut expected = first;
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
        let mut input = packet(1, b"handshake response");
        input.extend(packet(0, &long_data(1, 800)));
        input.extend(packet(0, b"\x19\x63\0\0\0")); // close statement 99
        input.extend(packet(0, &long_data(1, 800)));
        let mut answers = Vec::new();
        let mut r = CheckedReader::new(&input[..], &mut answers, 1024, params.clone());
        assert!(read_all(&mut r).is_err());
        assert!(r.refused.clone().unwrap().contains("long data of 1614"));
        drop(r);
        assert_eq!(code_at(&answers, 0), ER_NET_PACKET_TOO_LARGE);
        // Closing the statement itself drops its data: the same bytes again are fine.
        let mut input = packet(1, b"handshake response");
        input.extend(packet(0, &long_data(1, 800)));
        input.extend(packet(0, b"\x19\x01\0\0\0")); // close statement 1
        input.extend(packet(0, &long_data(1, 800)));
        let mut answers = Vec::new();
        let mut r = CheckedReader::new(&input[..], &mut answers, 1024, params);
        assert_eq!(read_all(&mut r).unwrap(), input);
    }

    #[test]
    fn a_command_not_numbered_zero_after_commands_began_is_refused_out_of_order() {
        let params = StmtParams::default();
        params.lock().unwrap().insert(1, 1);
        let mut input = packet(1, b"handshake response");
        input.extend(packet(3, b"auth switch response")); // login goes on: numbered on
        input.extend(packet(0, b"\x0e")); // ping: commands began
        input.extend(packet(1, &long_data(1, 100))); // would skip the long-data count
        let mut answers = Vec::new();
        let mut r = CheckedReader::new(&input[..], &mut answers, 1024, params);
        assert!(read_all(&mut r).is_err());
        assert!(r.refused.clone().unwrap().contains("out of order"));
        drop(r);
        assert_eq!(code_at(&answers, 0), ER_NET_PACKETS_OUT_OF_ORDER);
    }

    #[test]
    fn a_continuation_not_numbered_after_the_packet_before_is_refused_out_of_order() {
        let mut body = vec![COM_QUERY];
        body.resize(MAX_PAYLOAD, b' ');
        let mut input = packet(1, b"handshake response");
        input.extend(packet(0, &body));
        input.extend(packet(7, b"select 1")); // should be 1
        let mut answers = Vec::new();
        let mut r = CheckedReader::new(&input[..], &mut answers, 64 << 20, StmtParams::default());
        assert!(read_all(&mut r).is_err());
        drop(r);
        assert_eq!(code_at(&answers, 0), ER_NET_PACKETS_OUT_OF_ORDER);
        // Numbered right, it goes through.
        let mut input = packet(1, b"handshake response");
        input.extend(packet(0, &body));
        input.extend(packet(1, b"select 1"));
        let mut answers = Vec::new();
        let mut r = CheckedReader::new(&input[..], &mut answers, 64 << 20, StmtParams::default());
        assert_eq!(read_all(&mut r).unwrap(), input);
    }

    #[test]
    fn executing_a_statement_never_prepared_is_answered_1243_and_the_connection_goes_on() {
        let mut input = packet(1, b"handshake response");
        input.extend(packet(0, b"\x17\x05\0\0\0\0\x01\0\0\0"));
        input.extend(packet(0, b"\x0e"));
        let mut answers = Vec::new();
        let mut r = CheckedReader::new(&input[..], &mut answers, 1024, StmtParams::default());
        let mut expected = packet(1, b"handshake response");
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
        let mut input = packet(1, b"handshake response");
        input.extend(&reset);
        input.extend(packet(0, &long_data(1, 10)));
        input.extend(&reset);
        let mut answers = Vec::new();
        let mut r = CheckedReader::new(&input[..], &mut answers, 1024, params);
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
        let input = packet(0, b"\x17\x01\x00");
        let mut answers = Vec::new();
        let mut r = CheckedReader::new(&input[..], &mut answers, 1024, StmtParams::default());
        assert!(read_all(&mut r).is_err());
        drop(r);
        assert_eq!(u16::from_le_bytes([answers[5], answers[6]]), 1835);
    }
}
