//! Logging in: `mysql_native_password`, checked by the [`CheckedReader`](crate::wire::CheckedReader)
//! on the client's login packets before the protocol crate sees them.
//!
//! The server sends a fresh random scramble (salt) with each greeting; the client answers
//! `SHA1(password) XOR SHA1(salt ‖ SHA1(SHA1(password)))`. The server keeps only
//! `SHA1(SHA1(password))` (as MySQL's `authentication_string`) and checks the answer by
//! undoing the XOR and hashing the result once more. With no password configured every user
//! logs in (the server then listens on loopback only, see [`crate::Server::start`]).
//!
//! The protocol crate has its own `authenticate` hook, but it answers a refusal with error
//! 1698 and a message of its own, and has no peer address for MySQL's
//! `Access denied for user 'u'@'host'` (error 1045): so the check is made here, where the login
//! packets pass, and the protocol crate never sees a login that failed.

use std::fmt;
use std::io;
use std::sync::Arc;

use sha1::{Digest, Sha1};

/// The scramble's length: what `mysql_native_password` hashes with, and what the protocol crate
/// sends in its greeting.
pub const SCRAMBLE_LEN: usize = 20;

/// The authentication plugin this server speaks.
pub(crate) const NATIVE_PASSWORD: &[u8] = b"mysql_native_password";

/// MySQL's `ER_ACCESS_DENIED_ERROR`.
pub const ER_ACCESS_DENIED_ERROR: u16 = 1045;
/// MySQL's `ER_HANDSHAKE_ERROR` (a handshake response that cannot be read).
pub const ER_HANDSHAKE_ERROR: u16 = 1043;

/// MySQL's message prints at most 48 characters of the user and 64 of the host
/// (`'%-.48s'@'%-.64s'`).
const USER_SHOWN: usize = 48;
const HOST_SHOWN: usize = 64;

/// A password, kept out of `Debug` output (a logged configuration, a panic message).
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    /// The password `p`.
    pub fn new(p: impl Into<String>) -> Password {
        Password(p.into())
    }

    /// The password's text.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<hidden>)")
    }
}

impl From<&str> for Password {
    fn from(p: &str) -> Password {
        Password::new(p)
    }
}

impl From<String> for Password {
    fn from(p: String) -> Password {
        Password(p)
    }
}

fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut h = Sha1::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// What a client answers for `password` to the scramble `salt` under `mysql_native_password`
/// (empty for an empty password, as clients send).
pub fn scramble(salt: &[u8], password: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = sha1(&[password]);
    let stage2 = sha1(&[&stage1]);
    let mask = sha1(&[salt, &stage2]);
    stage1.iter().zip(mask).map(|(a, b)| a ^ b).collect()
}

/// Equality whose time does not depend on where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Who may log in.
#[derive(Clone)]
pub struct Credentials {
    user: Vec<u8>,
    /// `None`: no password configured, every user logs in.
    password: Option<Expected>,
}

#[derive(Clone)]
enum Expected {
    /// An empty password: the client must send no answer (as MySQL for a user without one).
    Empty,
    /// `SHA1(SHA1(password))`.
    Stage2([u8; 20]),
}

impl Credentials {
    /// `user` with `password`; with no password every user logs in.
    pub fn new(user: &str, password: Option<&Password>) -> Credentials {
        let password = password.map(|p| match p.expose().as_bytes() {
            [] => Expected::Empty,
            p => Expected::Stage2(sha1(&[&sha1(&[p])])),
        });
        Credentials {
            user: user.as_bytes().to_vec(),
            password,
        }
    }

    /// No password: every user logs in.
    pub fn anyone() -> Credentials {
        Credentials {
            user: Vec::new(),
            password: None,
        }
    }

    /// Whether `response` to `salt` logs `user` in.
    fn accepts(&self, user: &[u8], salt: &[u8], response: &[u8]) -> bool {
        let Some(expected) = &self.password else {
            return true;
        };
        let right_user = same(user, &self.user);
        let right_password = match expected {
            Expected::Empty => response.is_empty(),
            Expected::Stage2(stage2) => {
                // response = SHA1(pw) XOR SHA1(salt ‖ stage2): undo the XOR, hash once more.
                let mask = sha1(&[salt, stage2]);
                let stage1: Vec<u8> = response.iter().zip(mask).map(|(a, b)| a ^ b).collect();
                response.len() == 20 && same(&sha1(&[&stage1]), stage2)
            }
        };
        right_user & right_password
    }
}

/// One connection's login: who may log in, from where, with which scramble; and what to do once
/// logged in.
pub struct Login {
    credentials: Arc<Credentials>,
    host: String,
    salt: [u8; SCRAMBLE_LEN],
    on_logged_in: Option<Box<dyn FnOnce() + Send>>,
}

impl Login {
    /// A login from `host` (as MySQL names the client in its messages) with a fresh random
    /// scramble; `on_logged_in` runs once the login succeeded.
    pub fn new(
        credentials: Arc<Credentials>,
        host: impl Into<String>,
        on_logged_in: Box<dyn FnOnce() + Send>,
    ) -> io::Result<Login> {
        let mut salt = [0u8; SCRAMBLE_LEN];
        getrandom::fill(&mut salt).map_err(|e| io::Error::other(e.to_string()))?;
        for b in &mut salt {
            // As MySQL's `generate_user_salt`: 7-bit, and never NUL (the greeting ends the
            // scramble with one) nor '$' (a separator in stored hashes).
            *b &= 0x7f;
            if *b == 0 || *b == b'$' {
                *b += 1;
            }
        }
        Ok(Login {
            credentials,
            host: host.into(),
            salt,
            on_logged_in: Some(on_logged_in),
        })
    }

    /// The scramble this connection's greeting sends.
    pub fn salt(&self) -> [u8; SCRAMBLE_LEN] {
        self.salt
    }

    /// Checks `user`'s `response` to the scramble; `Err`: MySQL's access-denied message.
    pub(crate) fn check(&self, user: &[u8], response: &[u8]) -> Result<(), String> {
        if self.credentials.accepts(user, &self.salt, response) {
            return Ok(());
        }
        let user: String = String::from_utf8_lossy(user)
            .chars()
            .take(USER_SHOWN)
            .collect();
        let host: String = self.host.chars().take(HOST_SHOWN).collect();
        let using = if response.is_empty() { "NO" } else { "YES" };
        Err(format!(
            "Access denied for user '{user}'@'{host}' (using password: {using})"
        ))
    }

    /// The login succeeded.
    pub(crate) fn logged_in(&mut self) {
        if let Some(f) = self.on_logged_in.take() {
            f();
        }
    }
}

/// Capability flags the login check reads.
const CLIENT_CONNECT_WITH_DB: u32 = 0x8;
const CLIENT_PROTOCOL_41: u32 = 0x200;
const CLIENT_SSL: u32 = 0x800;
const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
const CLIENT_PLUGIN_AUTH: u32 = 0x80000;
const CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 0x20_0000;

/// The fields of a `HandshakeResponse41` the login needs.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Handshake<'a> {
    pub(crate) user: &'a [u8],
    pub(crate) auth: &'a [u8],
    pub(crate) plugin: &'a [u8],
}

impl Handshake<'_> {
    /// The protocol crate answers this handshake with an auth switch to `mysql_native_password`
    /// (and the client's next packet is the answer to check): it does when the client sent no
    /// answer for another plugin. This mirrors opensrv-mysql 0.7's `init_after_ssl` for a shim
    /// that keeps the crate's plugin for every user (`auth_plugin_for_username`), as the
    /// server's does.
    pub(crate) fn switches(&self) -> bool {
        self.auth.is_empty() && self.plugin != NATIVE_PASSWORD
    }
}

/// Reads a handshake response as the protocol crate does (opensrv-mysql 0.7's
/// `client_handshake`), so that what passes here is what it will read; `Err`: why it cannot be
/// read, or why it is refused.
pub(crate) fn parse_handshake(b: &[u8]) -> Result<Handshake<'_>, &'static str> {
    fn take(b: &[u8], n: usize) -> Result<(&[u8], &[u8]), &'static str> {
        if b.len() < n {
            return Err("truncated");
        }
        Ok(b.split_at(n))
    }
    /// Up to a NUL, and past it.
    fn cstr(b: &[u8]) -> Result<(&[u8], &[u8]), &'static str> {
        let end = b
            .iter()
            .position(|c| *c == 0)
            .ok_or("a string without its NUL")?;
        Ok((&b[..end], &b[end + 1..]))
    }
    let (caps, b) = take(b, 4)?;
    let caps = u32::from_le_bytes([caps[0], caps[1], caps[2], caps[3]]);
    if caps & CLIENT_PROTOCOL_41 == 0 {
        return Err("a pre-4.1 client");
    }
    if caps & CLIENT_SSL != 0 {
        return Err("TLS asked for and not offered");
    }
    // max packet size (4), character set (1), filler (23).
    let (_, b) = take(b, 28)?;
    let (user, b) = cstr(b)?;
    let (auth, b) = if caps & CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA != 0 {
        let (first, b) = take(b, 1)?;
        // As the protocol crate reads it: 0xfb is 0, and 0xff a one-byte length.
        let (n, b) = match first[0] {
            0xfb => (0, b),
            f @ 0xfc..=0xfe => {
                // 0xfc, 0xfd, 0xfe: 2, 3 and 8 bytes follow.
                let size = [2, 3, 8][usize::from(f - 0xfc)];
                let (n, b) = take(b, size)?;
                let mut le = [0u8; 8];
                le[..size].copy_from_slice(n);
                (u64::from_le_bytes(le), b)
            }
            n => (u64::from(n), b),
        };
        take(b, usize::try_from(n).map_err(|_| "truncated")?)?
    } else if caps & CLIENT_SECURE_CONNECTION != 0 {
        let (n, b) = take(b, 1)?;
        take(b, n[0] as usize)?
    } else {
        // Up to a NUL, which the protocol crate leaves in place.
        let end = b
            .iter()
            .position(|c| *c == 0)
            .ok_or("a string without its NUL")?;
        b.split_at(end)
    };
    let b = if caps & CLIENT_CONNECT_WITH_DB != 0 && !b.is_empty() {
        cstr(b)?.1
    } else {
        b
    };
    let plugin = if caps & CLIENT_PLUGIN_AUTH != 0 && !b.is_empty() {
        cstr(b)?.0
    } else {
        b""
    };
    // Connection attributes follow; nothing here reads them.
    Ok(Handshake { user, auth, plugin })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|b| format!("{b:02X}")).collect()
    }

    #[test]
    fn the_stored_hash_is_mysqls_password_function() {
        // MySQL 5.7's PASSWORD('password') = '*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19'.
        let c = Credentials::new("u", Some(&"password".into()));
        let Some(Expected::Stage2(s)) = c.password else {
            panic!("a stage-2 hash")
        };
        assert_eq!(hex(&s), "2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19");
    }

    #[test]
    fn only_the_right_user_with_the_right_answer_to_this_salt_is_accepted() {
        let c = Credentials::new("app", Some(&"s3cret".into()));
        let salt = b"abcdefghijklmnopqrst";
        assert!(c.accepts(b"app", salt, &scramble(salt, b"s3cret")));
        assert!(!c.accepts(b"app", salt, &scramble(salt, b"s3cre7")));
        assert!(!c.accepts(b"root", salt, &scramble(salt, b"s3cret")));
        assert!(!c.accepts(b"app", b"another salt, twenty", &scramble(salt, b"s3cret")));
        assert!(!c.accepts(b"app", salt, b""));
        assert!(!c.accepts(b"app", salt, &scramble(salt, b"s3cret")[..19]));
        let empty = Credentials::new("app", Some(&"".into()));
        assert!(empty.accepts(b"app", salt, b""));
        assert!(!empty.accepts(b"app", salt, &scramble(salt, b"x")));
        assert!(Credentials::anyone().accepts(b"anyone", salt, b"anything"));
    }

    #[test]
    fn a_refusal_names_the_user_and_host_as_mysql_does() {
        let c = Arc::new(Credentials::new("app", Some(&"pw".into())));
        let l = Login::new(c, "10.0.0.7", Box::new(|| {})).unwrap();
        assert_eq!(
            l.check(b"bob", b"").unwrap_err(),
            "Access denied for user 'bob'@'10.0.0.7' (using password: NO)"
        );
        assert!(l
            .check(b"bob", &[1; 20])
            .unwrap_err()
            .ends_with("(using password: YES)"));
        let long = vec![b'u'; 100];
        assert!(l
            .check(&long, b"")
            .unwrap_err()
            .contains(&format!("'{}'@", "u".repeat(48))));
    }

    #[test]
    fn each_login_has_its_own_printable_salt() {
        let c = Arc::new(Credentials::anyone());
        let a = Login::new(c.clone(), "h", Box::new(|| {})).unwrap().salt();
        let b = Login::new(c, "h", Box::new(|| {})).unwrap().salt();
        assert_ne!(a, b);
        assert!(a
            .iter()
            .chain(&b)
            .all(|c| (1..0x80).contains(c) && *c != b'$'));
    }

    #[test]
    fn the_password_stays_out_of_debug_output() {
        assert_eq!(
            format!("{:?}", Password::new("s3cret")),
            "Password(<hidden>)"
        );
    }

    /// A HandshakeResponse41 with capabilities `caps`.
    fn response(caps: u32, tail: &[u8]) -> Vec<u8> {
        let mut b = caps.to_le_bytes().to_vec();
        b.extend(16_777_216u32.to_le_bytes());
        b.push(0x21);
        b.extend([0u8; 23]);
        b.extend(tail);
        b
    }

    #[test]
    fn a_handshake_response_is_read_as_the_protocol_crate_reads_it() {
        let caps = CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH;
        let b = response(caps, b"root\0\x02ab\x6d\x79\0");
        let h = parse_handshake(&b).unwrap();
        assert_eq!(
            (h.user, h.auth, h.plugin),
            (&b"root"[..], &b"ab"[..], &b"my"[..])
        );
        // Length-encoded answer, a database, then attributes nobody reads.
        let caps = caps | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA | CLIENT_CONNECT_WITH_DB;
        let b = response(
            caps,
            b"u\0\xfc\x01\x00zdb\0mysql_native_password\0\x05attrs",
        );
        let h = parse_handshake(&b).unwrap();
        assert_eq!((h.auth, h.plugin), (&b"z"[..], NATIVE_PASSWORD));
        assert!(!h.switches());
        let b = response(caps, b"u\0\0db\0caching_sha2_password\0");
        assert!(parse_handshake(&b).unwrap().switches());
        // Refused: truncated answer, no NUL after the user, pre-4.1, TLS.
        assert!(parse_handshake(&response(caps, b"u\0\x05ab")).is_err());
        assert!(parse_handshake(&response(caps, b"user")).is_err());
        assert!(parse_handshake(&response(CLIENT_SECURE_CONNECTION, b"u\0\0")).is_err());
        assert!(parse_handshake(&response(caps | CLIENT_SSL, b"u\0\0")).is_err());
        assert!(parse_handshake(b"\x00\x02").is_err());
    }
}
