use std::io::Write;
use std::net::TcpStream;

use raw_client::*;

/// A prepared statement's id, its definitions read.
fn prepare(t: &mut TcpStream, sql: &str) -> u32 {
    let mut p = vec![0x16u8];
    p.extend_from_slice(sql.as_bytes());
    write_packet(t, 0, &p);
    let ok = read_packet(t).unwrap();
    assert_eq!(ok[0], 0x00, "prepared: {:?}", String::from_utf8_lossy(&ok));
    let (cols, params) = (
        u16::from_le_bytes([ok[5], ok[6]]),
        u16::from_le_bytes([ok[7], ok[8]]),
    );
    // Each non-empty list of definitions ends with an EOF packet (this client did not ask for
    // CLIENT_DEPRECATE_EOF).
    for n in [params, cols] {
        if n > 0 {
            for _ in 0..=n {
                read_packet(t).unwrap();
            }
        }
    }
    u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]])
}

/// A `COM_STMT_SEND_LONG_DATA` body for statement `stmt`, parameter 0, with `n` bytes.
fn long_data(stmt: u32, n: usize) -> Vec<u8> {
    let mut b = vec![0x18u8];
    b.extend(stmt.to_le_bytes());
    b.extend(0u16.to_le_bytes());
    b.resize(7 + n, b'x');
    b
}

#[test]
fn a_command_not_numbered_zero_right_after_login_is_refused_1156_and_closed() {
    let (s, dir) = server_with("abuse-numbering", ROWS, |_| {});
    let query = b"\x03SELECT c FROM sbtest1 WHERE id=1".to_vec();
    let prepare = b"\x16SELECT c FROM sbtest1 WHERE id=?".to_vec();
    for (seq, cmd) in [
        (1, vec![0xee]), // unknown: was answered OK
        (1, vec![]),     // empty: was answered OK
        (2, query),
        (1, prepare),
        (5, long_data(1, 100)),
    ] {
        let mut t = raw_client(&s, "root", "");
        write_packet(&mut t, seq, &cmd);
        let (answer_seq, err) = read_numbered(&mut t).unwrap();
        assert_eq!(err_code(&err), 1156, "{cmd:?}");
        assert_eq!(answer_seq, seq + 1);
        assert!(closed(&mut t));
    }
    assert_serves(&s, "root", None);
    finish(s, dir);
}

#[test]
fn long_data_without_end_is_refused_once_it_passes_max_allowed_packet() {
    // 1 GiB offered in packets of 1 MiB against a 4 MiB limit: the server refuses at the
    // packet that takes the statement's long data past 4 MiB, before reading its body.
    const MAX: usize = 4 << 20;
    const PACKET: usize = 1 << 20;
    let (s, dir) = server_with("abuse-long-data", ROWS, |c| c.max_packet = MAX);
    for numbered_zero in [true, false] {
        let mut t = raw_client(&s, "root", "");
        let stmt = prepare(&mut t, "SELECT c FROM sbtest1 WHERE id=?");
        let mut w = t.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            let packet = long_data(stmt, PACKET - 7);
            let mut p = (packet.len() as u32).to_le_bytes()[..3].to_vec();
            p.push(if numbered_zero { 0 } else { 1 });
            p.extend(&packet);
            let mut sent = 0;
            for _ in 0..1024 {
                if w.write_all(&p).is_err() {
                    break;
                }
                sent += 1;
            }
            sent
        });
        let err = read_packet(&mut t).unwrap();
        assert!(closed(&mut t));
        let sent = writer.join().unwrap();
        assert!(sent < 1024, "the connection was cut off before 1 GiB");
        if numbered_zero {
            assert_eq!(err_code(&err), 1153);
            let over = 5 * PACKET;
            assert!(
                err_message(&err).contains(&format!("long data of {over} > {MAX}")),
                "{}",
                err_message(&err)
            );
        } else {
            assert_eq!(err_code(&err), 1156, "refused at the first packet");
        }
    }
    assert_serves(&s, "root", None);
    finish(s, dir);
}

#[test]
fn long_data_for_a_statement_never_prepared_is_dropped_and_the_connection_goes_on() {
    let (s, dir) = server_with("abuse-long-data-unknown", ROWS, |_| {});
    let mut t = raw_client(&s, "root", "");
    write_packet(&mut t, 0, &long_data(77, 1000));
    write_packet(&mut t, 0, b"\x0e"); // COM_PING
    let ok = read_packet(&mut t).unwrap();
    assert_eq!(ok[0], 0x00, "the ping is the first answer");
    finish(s, dir);
}

#[test]
fn a_statement_or_database_name_that_is_not_utf8_is_answered_1366_and_the_connection_goes_on() {
    let (s, dir) = server_with("abuse-utf8", ROWS, |_| {});
    let mut t = raw_client(&s, "root", "");
    for (what, cmd) in [
        ("query", &b"\x03SELECT 'caf\xe9'"[..]),
        (
            "prepare",
            b"\x16SELECT c FROM sbtest1 WHERE c='caf\xe9' AND id=?",
        ),
        ("init db", b"\x02sb\xe9test"),
    ] {
        write_packet(&mut t, 0, cmd);
        let (seq, err) = read_numbered(&mut t).unwrap();
        assert_eq!((err_code(&err), seq), (1366, 1), "{what}");
        let msg = err_message(&err);
        assert!(
            msg.starts_with("Incorrect string value: '\\xE9"),
            "{what}: {msg}"
        );
    }
    // The same connection is still served: the right name, then a query.
    write_packet(&mut t, 0, b"\x02sbtest");
    assert_eq!(read_packet(&mut t).unwrap()[0], 0x00, "database selected");
    write_packet(&mut t, 0, b"\x03SELECT c FROM sbtest1 WHERE id=2");
    let first = read_packet(&mut t).unwrap();
    assert_ne!(
        first[0],
        0xff,
        "a result set: {:?}",
        String::from_utf8_lossy(&first)
    );
    assert_serves(&s, "root", None);
    finish(s, dir);
}

#[test]
fn a_statement_longer_than_a_packet_with_a_bad_byte_in_its_second_packet_is_answered_1366() {
    // The text is checked whole, across its packets (a packet carries at most 16 MiB - 1).
    const FULL: usize = 0xFF_FFFF;
    let (s, dir) = server_with("abuse-utf8-long", ROWS, |_| {});
    let mut t = raw_client(&s, "root", "");
    let mut first = b"\x03SELECT c FROM sbtest1 WHERE id=1 /* ".to_vec();
    first.resize(FULL, b'x');
    let mut p = vec![0xff, 0xff, 0xff, 0];
    p.extend(&first);
    let second = b"x\xe9 */";
    p.extend((second.len() as u32).to_le_bytes()[..3].iter().copied());
    p.push(1);
    p.extend(second);
    t.write_all(&p).unwrap();
    let (seq, err) = read_numbered(&mut t).unwrap();
    assert_eq!((err_code(&err), seq), (1366, 2));
    assert!(err_message(&err).starts_with("Incorrect string value: '\\xE9 */'"));
    write_packet(&mut t, 0, b"\x0e");
    assert_eq!(read_packet(&mut t).unwrap()[0], 0x00, "still served");
    finish(s, dir);
}

#[test]
fn login_packets_misnumbered_malformed_or_too_long_are_refused_and_closed() {
    let (s, dir) = server_with("abuse-login", ROWS, |_| {});
    let good = handshake_response("root", &[7; 20], "mysql_native_password");
    // (sequence number, packet bytes after the header's length, expected error)
    let cases: [(u8, Vec<u8>, u16); 3] = [
        (0, good.clone(), 1156),                 // numbered as a command
        (1, good[..10].to_vec(), 1043),          // truncated
        (1, b"\x00\x80\x00\x00".to_vec(), 1043), // pre-4.1 capabilities
    ];
    for (seq, body, code) in cases {
        let (mut t, _) = greeted(&s);
        write_packet(&mut t, seq, &body);
        assert_eq!(err_code(&read_packet(&mut t).unwrap()), code, "{body:?}");
        assert!(closed(&mut t));
    }
    // A header that declares 1 MiB of handshake: refused without waiting for the body.
    let (mut t, _) = greeted(&s);
    t.write_all(&[0x00, 0x00, 0x10, 0x01]).unwrap();
    let err = read_packet(&mut t).unwrap();
    assert_eq!(err_code(&err), 1043);
    assert!(err_message(&err).contains("login packet of 1048576 bytes"));
    assert!(closed(&mut t));
    assert_serves(&s, "root", None);
    finish(s, dir);
}
