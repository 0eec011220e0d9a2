//! Logging in to `turnstile serve`: `mysql_native_password` with a configured user and
//! password, error 1045 for anything else, and no password only on a loopback address.

mod raw_client;

/// The thread handling every server of these tests runs (`raw_client::server_with`).
const THREAD_HANDLING: turnstile_server::ThreadHandling =
    turnstile_server::ThreadHandling::OneThreadPerConnection;

use std::os::unix::net::UnixStream;
use std::time::Duration;

use mysql::Conn;
use raw_client::*;
use turnstile_server::{Server, ServerConfig};

const USER: &str = "app";
const PASSWORD: &str = "s3cret";

/// A server where only `USER` with `PASSWORD` logs in.
fn guarded(tag: &str) -> (Server, std::path::PathBuf) {
    server_with(tag, ROWS, |c| {
        c.user = USER.into();
        c.password = Some(PASSWORD.into());
    })
}

#[test]
fn the_right_user_with_the_right_password_logs_in() {
    let (s, dir) = guarded("auth-right");
    assert_serves(&s, USER, Some(PASSWORD));
    finish(s, dir);
}

#[test]
fn a_wrong_password_is_refused_1045_and_that_connection_closed() {
    let (s, dir) = guarded("auth-wrong-password");
    let (code, msg) = mysql_error(Conn::new(opts(&s, USER, Some("s3cre7"))));
    assert_eq!(code, 1045);
    assert_eq!(
        msg,
        "Access denied for user 'app'@'127.0.0.1' (using password: YES)"
    );
    // Raw: the refusal, then the end of the connection.
    let (mut t, salt) = greeted(&s);
    let answer = native_answer(&salt, "s3cre7");
    write_packet(
        &mut t,
        1,
        &handshake_response(USER, &answer, "mysql_native_password"),
    );
    let (seq, err) = read_numbered(&mut t).unwrap();
    assert_eq!((err_code(&err), seq), (1045, 2));
    assert!(closed(&mut t));
    assert_serves(&s, USER, Some(PASSWORD));
    finish(s, dir);
}

#[test]
fn a_wrong_user_is_refused_1045() {
    let (s, dir) = guarded("auth-wrong-user");
    let (code, msg) = mysql_error(Conn::new(opts(&s, "root", Some(PASSWORD))));
    assert_eq!(code, 1045);
    assert_eq!(
        msg,
        "Access denied for user 'root'@'127.0.0.1' (using password: YES)"
    );
    assert_serves(&s, USER, Some(PASSWORD));
    finish(s, dir);
}

#[test]
fn a_client_without_a_password_when_one_is_required_is_refused_1045_using_password_no() {
    let (s, dir) = guarded("auth-no-password");
    for none in [None, Some("")] {
        let (code, msg) = mysql_error(Conn::new(opts(&s, USER, none)));
        assert_eq!(code, 1045);
        assert!(msg.ends_with("(using password: NO)"), "{msg}");
    }
    finish(s, dir);
}

#[test]
fn without_a_password_configured_any_user_and_password_log_in_on_loopback() {
    let (s, dir) = server_with("auth-open", ROWS, |_| {});
    assert_serves(&s, "root", None);
    assert_serves(&s, "anyone", Some("anything"));
    raw_client(&s, "someone", "whatever");
    finish(s, dir);
}

#[test]
fn a_client_switched_to_native_password_is_checked_on_its_answer() {
    // A client that sends no answer for another plugin (as libmysqlclient 8 does for
    // caching_sha2_password) is asked to switch; its answer to the switch is what is checked.
    let (s, dir) = guarded("auth-switch");
    for (password, logs_in) in [(PASSWORD, true), ("s3cre7", false)] {
        let (mut t, salt) = greeted(&s);
        write_packet(
            &mut t,
            1,
            &handshake_response(USER, b"", "caching_sha2_password"),
        );
        let (seq, switch) = read_numbered(&mut t).unwrap();
        assert_eq!((switch[0], seq), (0xfe, 2), "an auth switch request");
        let name_end = switch.iter().position(|b| *b == 0).unwrap();
        assert_eq!(&switch[1..name_end], b"mysql_native_password");
        assert_eq!(
            &switch[name_end + 1..name_end + 21],
            &salt[..],
            "the same scramble"
        );
        write_packet(&mut t, 3, &native_answer(&salt, password));
        let (seq, answer) = read_numbered(&mut t).unwrap();
        assert_eq!(seq, 4);
        if logs_in {
            assert_eq!(answer[0], 0x00, "OK");
        } else {
            assert_eq!(err_code(&answer), 1045);
            assert!(closed(&mut t));
        }
    }
    finish(s, dir);
}

#[test]
fn each_connection_gets_its_own_scramble_so_a_seen_answer_cannot_be_replayed() {
    let (s, dir) = guarded("auth-replay");
    let (mut first, salt) = greeted(&s);
    let seen = native_answer(&salt, PASSWORD);
    write_packet(
        &mut first,
        1,
        &handshake_response(USER, &seen, "mysql_native_password"),
    );
    assert_eq!(read_packet(&mut first).unwrap()[0], 0x00, "logged in");
    let (mut replay, other_salt) = greeted(&s);
    assert_ne!(salt, other_salt);
    write_packet(
        &mut replay,
        1,
        &handshake_response(USER, &seen, "mysql_native_password"),
    );
    assert_eq!(err_code(&read_packet(&mut replay).unwrap()), 1045);
    finish(s, dir);
}

#[test]
fn a_non_loopback_address_without_a_password_is_refused_and_with_one_is_served() {
    let dir = data_dir("auth-bind");
    for (bind, password) in [
        ("0.0.0.0:0", None),
        ("[::]:0", None),
        ("0.0.0.0:0", Some("")),
    ] {
        let mut c = ServerConfig::new(&dir);
        c.tcp = bind.parse().unwrap();
        c.password = password.map(Into::into);
        c.log = false;
        let Err(e) = Server::start(c) else {
            panic!("{bind} without a password was accepted");
        };
        let ip = bind.rsplit_once(':').unwrap().0.trim_matches(['[', ']']);
        assert_eq!(
            e,
            format!(
                "refusing to listen on {ip} without a password: set --password or bind 127.0.0.1"
            )
        );
    }
    let (s, dir) = server_with("auth-bind", ROWS, |c| {
        c.tcp = "0.0.0.0:0".parse().unwrap();
        c.user = USER.into();
        c.password = Some(PASSWORD.into());
    });
    assert!(s.tcp_addr().ip().is_unspecified());
    assert_serves(&s, USER, Some(PASSWORD));
    let (code, _) = mysql_error(Conn::new(opts(&s, USER, Some("s3cre7"))));
    assert_eq!(code, 1045);
    finish(s, dir);
}

#[test]
fn the_unix_socket_asks_for_the_password_too_and_names_the_client_localhost() {
    let socket = data_dir("auth-socket").with_extension("sock");
    let (s, dir) = server_with("auth-socket-data", ROWS, |c| {
        c.socket = Some(socket.clone());
        c.user = USER.into();
        c.password = Some(PASSWORD.into());
    });
    let mut u = UnixStream::connect(&socket).unwrap();
    u.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let salt = greeting_salt(&read_packet(&mut u).unwrap());
    let answer = native_answer(&salt, "s3cre7");
    write_packet(
        &mut u,
        1,
        &handshake_response(USER, &answer, "mysql_native_password"),
    );
    let err = read_packet(&mut u).unwrap();
    assert_eq!(err_code(&err), 1045);
    assert_eq!(
        err_message(&err),
        "Access denied for user 'app'@'localhost' (using password: YES)"
    );
    let mut u = UnixStream::connect(&socket).unwrap();
    u.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let salt = greeting_salt(&read_packet(&mut u).unwrap());
    let answer = native_answer(&salt, PASSWORD);
    write_packet(
        &mut u,
        1,
        &handshake_response(USER, &answer, "mysql_native_password"),
    );
    assert_eq!(read_packet(&mut u).unwrap()[0], 0x00, "logged in");
    finish(s, dir);
}
