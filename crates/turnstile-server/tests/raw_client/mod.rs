//! What the tests that speak the protocol byte by byte share: a server on a free port, packet
//! framing, the greeting's scramble, a handshake response, and a check that the server still
//! serves a real client.

// Each test file uses a part of these.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder};
use turnstile::{GateConfig, Policy};
use turnstile_server::{Server, ServerConfig};

/// Rows of the table `sbtest1` in the servers of the tests that speak the protocol byte by
/// byte (they read little of it).
pub const ROWS: u32 = 10;

/// A fresh data directory for the test `tag`.
pub fn data_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("turnstile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A quiet server on a free loopback port with table `sbtest1` of `rows` rows, configured by
/// `f`, in a fresh data directory for the test `tag`.
pub fn server_with(tag: &str, rows: u32, f: impl FnOnce(&mut ServerConfig)) -> (Server, PathBuf) {
    let dir = data_dir(tag);
    let mut c = ServerConfig::new(&dir);
    c.tcp = "127.0.0.1:0".parse().unwrap();
    c.gate = GateConfig::new(Policy::Classic).limit(4);
    c.log = false;
    c.thread_handling = crate::THREAD_HANDLING;
    f(&mut c);
    let s = Server::start(c).unwrap();
    s.engine()
        .ensure_table("sbtest1", rows, &mut |_, _| {})
        .unwrap();
    (s, dir)
}

/// The `mysql` crate's options for `user` with `password` over TCP.
pub fn opts(s: &Server, user: &str, password: Option<&str>) -> OptsBuilder {
    OptsBuilder::new()
        .ip_or_hostname(Some("127.0.0.1"))
        .tcp_port(s.tcp_addr().port())
        .user(Some(user))
        .pass(password)
        .db_name(Some("sbtest"))
        .prefer_socket(false)
}

/// Asserts that a new client (`user` with `password`) logs in and is answered a query.
pub fn assert_serves(s: &Server, user: &str, password: Option<&str>) {
    let mut c = Conn::new(opts(s, user, password)).expect("a new client logs in");
    let got: Option<String> = c
        .query_first("SELECT c FROM sbtest1 WHERE id=1")
        .expect("and is answered");
    assert!(got.is_some());
}

/// The MySQL error code and message of a failed call.
pub fn mysql_error<T: std::fmt::Debug>(r: mysql::Result<T>) -> (u16, String) {
    match r {
        Err(mysql::Error::MySqlError(e)) => (e.code, e.message),
        other => panic!("expected a MySQL error, got {other:?}"),
    }
}

pub fn write_packet(t: &mut impl Write, seq: u8, body: &[u8]) {
    let mut p = (body.len() as u32).to_le_bytes()[..3].to_vec();
    p.push(seq);
    p.extend_from_slice(body);
    t.write_all(&p).unwrap();
}

/// One packet: its sequence number and body; `None` at end of stream.
pub fn read_numbered(t: &mut impl Read) -> Option<(u8, Vec<u8>)> {
    let mut h = [0u8; 4];
    t.read_exact(&mut h).ok()?;
    let len = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
    let mut b = vec![0u8; len];
    t.read_exact(&mut b).ok()?;
    Some((h[3], b))
}

/// One packet's body; `None` at end of stream.
pub fn read_packet(t: &mut impl Read) -> Option<Vec<u8>> {
    read_numbered(t).map(|(_, b)| b)
}

/// The error code of an ERR packet.
pub fn err_code(p: &[u8]) -> u16 {
    assert_eq!(
        p[0],
        0xff,
        "an ERR packet: {:?}",
        String::from_utf8_lossy(p)
    );
    u16::from_le_bytes([p[1], p[2]])
}

/// The message of an ERR packet (after the SQL state).
pub fn err_message(p: &[u8]) -> String {
    err_code(p);
    String::from_utf8_lossy(&p[9..]).into_owned()
}

/// The peer closed: end of stream or a reset.
pub fn closed(t: &mut impl Read) -> bool {
    let mut b = [0u8; 1];
    matches!(t.read(&mut b), Ok(0) | Err(_))
}

/// The scramble a greeting sends (its two parts).
pub fn greeting_salt(g: &[u8]) -> [u8; 20] {
    assert_eq!(g[0], 10, "protocol 10");
    let version_end = 1 + g[1..].iter().position(|b| *b == 0).unwrap();
    // version\0, connection id (4), scramble part 1 (8), filler, capabilities (2), character
    // set, status (2), capabilities (2), scramble length, reserved (10), scramble part 2 (12).
    let part1 = version_end + 1 + 4;
    let part2 = part1 + 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10;
    let mut s = [0u8; 20];
    s[..8].copy_from_slice(&g[part1..part1 + 8]);
    s[8..].copy_from_slice(&g[part2..part2 + 12]);
    s
}

/// What a client answers for `password` to `salt`: SHA1(password) XOR SHA1(salt ‖
/// SHA1(SHA1(password))), empty for no password. Written here from the protocol's definition,
/// apart from the server's; the tests that log in with the `mysql` crate check both against
/// a real client.
pub fn native_answer(salt: &[u8], password: &str) -> Vec<u8> {
    use sha1::{Digest, Sha1};
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = Sha1::digest(password.as_bytes());
    let stage2 = Sha1::digest(stage1);
    let mask = Sha1::new()
        .chain_update(salt)
        .chain_update(stage2)
        .finalize();
    stage1.iter().zip(mask.iter()).map(|(a, b)| a ^ b).collect()
}

/// A HandshakeResponse41 from `user` answering `auth` for `plugin`: PROTOCOL_41 |
/// SECURE_CONNECTION | PLUGIN_AUTH, as the `mysql` crate sends.
pub fn handshake_response(user: &str, auth: &[u8], plugin: &str) -> Vec<u8> {
    let caps: u32 = 0x200 | 0x8000 | 0x80000;
    let mut body = caps.to_le_bytes().to_vec();
    body.extend(16_777_216u32.to_le_bytes());
    body.push(0x21);
    body.extend([0u8; 23]);
    body.extend(user.as_bytes());
    body.push(0);
    body.push(auth.len() as u8);
    body.extend(auth);
    body.extend(plugin.as_bytes());
    body.push(0);
    body
}

/// A TCP connection to `s` that has read the greeting: it and the greeting's scramble.
pub fn greeted(s: &Server) -> (TcpStream, [u8; 20]) {
    let mut t = TcpStream::connect(s.tcp_addr()).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let greeting = read_packet(&mut t).unwrap();
    let salt = greeting_salt(&greeting);
    (t, salt)
}

/// A raw client logged in as `user` with `password` (the server's answer must be OK).
pub fn raw_client(s: &Server, user: &str, password: &str) -> TcpStream {
    let (mut t, salt) = greeted(s);
    let answer = native_answer(&salt, password);
    write_packet(
        &mut t,
        1,
        &handshake_response(user, &answer, "mysql_native_password"),
    );
    let ok = read_packet(&mut t).unwrap();
    assert_eq!(ok[0], 0x00, "logged in: {:?}", String::from_utf8_lossy(&ok));
    t
}

/// Removes the server's data directory once it is shut down.
pub fn finish(s: Server, dir: PathBuf) {
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

/// Waits (bounded, 30 s) until `f` holds; panics naming `what` if it never does.
pub fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    // A hang guard, not a measurement: a condition that never comes fails the test.
    let hang = Instant::now() + Duration::from_secs(30);
    while !f() {
        if Instant::now() > hang {
            panic!("{what} never happened");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
