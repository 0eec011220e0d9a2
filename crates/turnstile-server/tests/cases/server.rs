use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder};
use raw_client::{closed, data_dir, err_code, read_packet, server_with, wait_for, write_packet};
use turnstile::{GateConfig, Policy};
use turnstile_engine::schema::Row;
use turnstile_server::Server;

const ROWS: u32 = 1000;

/// A server with table sbtest1 of `ROWS` rows.
fn server(tag: &str) -> (Server, PathBuf) {
    server_with(tag, ROWS, |_| {})
}

fn opts(s: &Server) -> OptsBuilder {
    OptsBuilder::new()
        .ip_or_hostname(Some("127.0.0.1"))
        .tcp_port(s.tcp_addr().port())
        .user(Some("root"))
        .pass(Some("any password"))
        .db_name(Some("sbtest"))
        .prefer_socket(false)
}

fn connect(s: &Server) -> Conn {
    Conn::new(opts(s)).unwrap()
}

/// The MySQL error code of a failed call.
fn code<T: std::fmt::Debug>(r: mysql::Result<T>) -> u16 {
    match r {
        Err(mysql::Error::MySqlError(e)) => e.code,
        other => panic!("expected a MySQL error, got {other:?}"),
    }
}

/// Waits (bounded) until the server has no connection open.
fn wait_disconnected(s: &Server, what: &str) {
    wait_for(what, || {
        s.stats()
            .connected
            .load(std::sync::atomic::Ordering::SeqCst)
            == 0
    });
}

fn c_of(id: u32) -> String {
    let r = Row::generate(id, ROWS);
    String::from_utf8(r.c.to_vec())
        .unwrap()
        .trim_end()
        .to_string()
}

/// Row `id` of `table` read from the engine directly (no gate, no server).
fn direct(s: &Server, table: &str, id: u32) -> Option<Row> {
    s.engine().get_direct(table, id).unwrap()
}

/// `c` as MySQL returns a CHAR: without its trailing spaces.
fn c_text(r: &Row) -> String {
    String::from_utf8(r.c.to_vec())
        .unwrap()
        .trim_end()
        .to_string()
}

#[test]
fn every_sysbench_read_answers_what_the_engine_holds_in_text_and_prepared_modes() {
    let (s, dir) = server("reads");
    let mut c = connect(&s);
    // Some rows changed first, so the answers are not just the generator's.
    c.query_drop("UPDATE sbtest1 SET c='changed   ' WHERE id=150")
        .unwrap();
    c.query_drop("DELETE FROM sbtest1 WHERE id=160").unwrap();
    let range = |lo: u32, hi: u32| -> Vec<Row> {
        (lo..=hi).filter_map(|i| direct(&s, "sbtest1", i)).collect()
    };
    for prepared in [false, true] {
        macro_rules! q {
            ($t:ty, $sql:expr, $text:expr, $params:expr) => {
                if prepared {
                    c.exec::<$t, _, _>($sql, $params).unwrap()
                } else {
                    c.query::<$t, _>($text).unwrap()
                }
            };
        }
        let got = q!(
            String,
            "SELECT c FROM sbtest1 WHERE id=?",
            "SELECT c FROM sbtest1 WHERE id=77",
            (77,)
        );
        assert_eq!(
            got,
            vec![c_text(&direct(&s, "sbtest1", 77).unwrap())],
            "point select (prepared: {prepared})"
        );
        let got = q!(
            String,
            "SELECT c FROM sbtest1 WHERE id=?",
            "SELECT c FROM sbtest1 WHERE id=5000",
            (5000,)
        );
        assert!(got.is_empty(), "a missing id returns no row");
        let got = q!(
            String,
            "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?",
            "SELECT c FROM sbtest1 WHERE id BETWEEN 101 AND 200",
            (101, 200)
        );
        let want: Vec<String> = range(101, 200).iter().map(c_text).collect();
        assert_eq!(want.len(), 99, "one row deleted");
        assert!(want.contains(&"changed".to_string()));
        assert_eq!(got, want, "range");
        let got = q!(
            String,
            "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?",
            "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 1 AND 100",
            (1, 100)
        );
        let sum: u64 = range(1, 100).iter().map(|r| r.k as u64).sum();
        assert_eq!(got, vec![sum.to_string()], "sum");
        let got = q!(
            Option<String>,
            "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?",
            "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 2000 AND 3000",
            (2000, 3000)
        );
        assert_eq!(got, vec![None], "SUM over no rows is NULL");
        let mut sorted: Vec<String> = range(300, 399).iter().map(c_text).collect();
        sorted.sort();
        let got = q!(
            String,
            "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
            "SELECT c FROM sbtest1 WHERE id BETWEEN 300 AND 399 ORDER BY c",
            (300, 399)
        );
        assert_eq!(got, sorted, "order by c");
        sorted.dedup();
        let got = q!(
            String,
            "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
            "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 300 AND 399 ORDER BY c",
            (300, 399)
        );
        assert_eq!(got, sorted, "distinct");
        let got: Vec<i64> = c.query("SELECT COUNT(*) FROM sbtest1").unwrap();
        let count = s.engine().count_direct("sbtest1").unwrap();
        assert_eq!(count, ROWS as u64 - 1);
        assert_eq!(got, vec![count as i64], "count");
    }
    assert_eq!(s.gate().stats().inside, 0, "every statement left the gate");
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn every_sysbench_write_changes_exactly_what_it_says_in_text_and_prepared_modes() {
    let (s, dir) = server("writes");
    let e = s.engine().clone();
    let mut c = connect(&s);
    // UPDATE … SET k=k+1
    let k = e.get_direct("sbtest1", 10).unwrap().unwrap().k;
    c.query_drop("UPDATE sbtest1 SET k=k+1 WHERE id=10")
        .unwrap();
    assert_eq!(c.affected_rows(), 1);
    c.exec_drop("UPDATE sbtest1 SET k=k+1 WHERE id=?", (10,))
        .unwrap();
    assert_eq!(e.get_direct("sbtest1", 10).unwrap().unwrap().k, k + 2);
    // UPDATE … SET c=?
    c.exec_drop("UPDATE sbtest1 SET c=? WHERE id=?", ("new-c", 11))
        .unwrap();
    let got: Option<String> = c.query_first("SELECT c FROM sbtest1 WHERE id=11").unwrap();
    assert_eq!(
        got.as_deref(),
        Some("new-c"),
        "CHAR trailing spaces trimmed"
    );
    assert_eq!(
        &e.get_direct("sbtest1", 11).unwrap().unwrap().c[..6],
        b"new-c "
    );
    c.query_drop("UPDATE sbtest1 SET c='text-c' WHERE id=11")
        .unwrap();
    assert_eq!(
        &e.get_direct("sbtest1", 11).unwrap().unwrap().c[..7],
        b"text-c "
    );
    // DELETE
    c.exec_drop("DELETE FROM sbtest1 WHERE id=?", (12,))
        .unwrap();
    assert_eq!(c.affected_rows(), 1);
    c.query_drop("DELETE FROM sbtest1 WHERE id=13").unwrap();
    assert!(!e.contains("sbtest1", 12).unwrap() && !e.contains("sbtest1", 13).unwrap());
    c.query_drop("DELETE FROM sbtest1 WHERE id=13").unwrap();
    assert_eq!(c.affected_rows(), 0, "nothing left to delete");
    // INSERT with an explicit id, then with id 0 (AUTO_INCREMENT), both modes.
    c.exec_drop(
        "INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)",
        (12, 7, "c12", "pad12"),
    )
    .unwrap();
    let r = e.get_direct("sbtest1", 12).unwrap().unwrap();
    assert_eq!(
        (r.k, &r.c[..3], &r.pad[..5]),
        (7, &b"c12"[..], &b"pad12"[..])
    );
    c.exec_drop(
        "INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)",
        (0, 8, "auto", "p"),
    )
    .unwrap();
    let auto = c.last_insert_id() as u32;
    assert!(auto > ROWS, "a fresh id above every row: {auto}");
    assert_eq!(e.get_direct("sbtest1", auto).unwrap().unwrap().k, 8);
    c.query_drop("INSERT INTO sbtest1 (id, k, c, pad) VALUES (0, 9, 'auto2', 'p')")
        .unwrap();
    assert_eq!(c.last_insert_id() as u32, auto + 1);
    // Duplicate key: 1062, nothing changed.
    assert_eq!(
        code(c.query_drop("INSERT INTO sbtest1 (id, k, c, pad) VALUES (12, 1, 'dup', 'p')")),
        1062
    );
    assert_eq!(e.get_direct("sbtest1", 12).unwrap().unwrap().k, 7);
    // Too long for CHAR(60): 1406.
    assert_eq!(
        code(c.exec_drop(
            "INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)",
            (5000, 1, "c", "x".repeat(61)),
        )),
        1406
    );
    assert!(!e.contains("sbtest1", 5000).unwrap());
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_transaction_is_seen_by_others_only_once_committed_and_rollback_undoes_it() {
    let (s, dir) = server("txn");
    let e = s.engine().clone();
    let mut a = connect(&s);
    let mut b = connect(&s);
    a.query_drop("BEGIN").unwrap();
    a.query_drop("UPDATE sbtest1 SET c='in-txn' WHERE id=20")
        .unwrap();
    let mine: Option<String> = a.query_first("SELECT c FROM sbtest1 WHERE id=20").unwrap();
    assert_eq!(
        mine.as_deref(),
        Some("in-txn"),
        "a transaction reads its own writes"
    );
    let theirs: Option<String> = b.query_first("SELECT c FROM sbtest1 WHERE id=20").unwrap();
    assert_eq!(theirs, Some(c_of(20)), "others read the committed row");
    a.query_drop("COMMIT").unwrap();
    let theirs: Option<String> = b.query_first("SELECT c FROM sbtest1 WHERE id=20").unwrap();
    assert_eq!(theirs.as_deref(), Some("in-txn"));
    // Prepared BEGIN/ROLLBACK, as sysbench sends them.
    a.exec_drop("START TRANSACTION", ()).unwrap();
    a.exec_drop("DELETE FROM sbtest1 WHERE id=?", (21,))
        .unwrap();
    a.exec_drop("ROLLBACK", ()).unwrap();
    assert!(e.contains("sbtest1", 21).unwrap());
    assert_eq!(e.row_locks_held(), 0);
    drop((a, b));
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sysbench_prepare_and_cleanup_create_fill_index_analyze_and_drop_a_table() {
    let (s, dir) = server("ddl");
    let e = s.engine().clone();
    let mut c = connect(&s);
    let create = "CREATE TABLE sbtest2(\n  id INTEGER NOT NULL AUTO_INCREMENT,\n  k INTEGER DEFAULT '0' NOT NULL,\n  c CHAR(120) DEFAULT '' NOT NULL,\n  pad CHAR(60) DEFAULT '' NOT NULL,\n  PRIMARY KEY (id)\n) /*! ENGINE = innodb */ ";
    c.query_drop(create).unwrap();
    assert_eq!(code(c.query_drop(create)), 1050, "table exists");
    c.query_drop("INSERT INTO sbtest2(k, c, pad) VALUES(5,'a','b'),(6,'c','d'),(7,'e','f')")
        .unwrap();
    assert_eq!(c.affected_rows(), 3);
    assert_eq!(c.last_insert_id(), 1, "the first id generated");
    assert_eq!(e.ids_direct("sbtest2").unwrap(), vec![1, 2, 3]);
    c.query_drop("CREATE INDEX k_2 ON sbtest2(k)").unwrap();
    let analyze: Vec<(String, String, String, String)> = c.query("ANALYZE TABLE sbtest2").unwrap();
    assert_eq!(analyze[0].3, "OK");
    let tables: Vec<String> = c.query("SHOW TABLES").unwrap();
    assert_eq!(tables, vec!["sbtest1", "sbtest2"]);
    // A multi-row INSERT is atomic: a duplicate in the last row leaves nothing.
    assert_eq!(
        code(c.query_drop("INSERT INTO sbtest2(id, k, c, pad) VALUES(4,1,'a','b'),(1,1,'c','d')")),
        1062
    );
    assert!(!e.contains("sbtest2", 4).unwrap());
    c.query_drop("DROP TABLE IF EXISTS sbtest2").unwrap();
    c.query_drop("DROP TABLE IF EXISTS sbtest2").unwrap();
    assert_eq!(code(c.query_drop("DROP TABLE sbtest2")), 1051);
    assert_eq!(code(c.query_drop("SELECT c FROM sbtest2 WHERE id=1")), 1146);
    assert_eq!(
        code(c.query_drop("SELECT c FROM sbtest2 WHERE id BETWEEN 1 AND 2")),
        1146
    );
    assert_eq!(
        code(
            c.query_drop("CREATE TABLE t3 (id INT PRIMARY KEY, k INT, c CHAR(100), pad CHAR(60))")
        ),
        1235,
        "only the sysbench schema"
    );
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_unsupported_statement_answers_1235_and_the_connection_stays_usable() {
    let (s, dir) = server("unsupported");
    let mut c = connect(&s);
    for sql in [
        "SELECT c FROM sbtest1 WHERE k = 5",
        "SELECT AVG(id) FROM (SELECT * FROM sbtest1 FORCE KEY (PRIMARY) LIMIT 10) t",
        "UPDATE sbtest1 SET k = 1",
        "SET autocommit = 0",
        "SELECT 1; SELECT 2",
    ] {
        assert_eq!(code(c.query_drop(sql)), 1235, "{sql}");
        let got: Option<String> = c.query_first("SELECT c FROM sbtest1 WHERE id=1").unwrap();
        assert_eq!(got, Some(c_of(1)), "usable after {sql}");
    }
    assert_eq!(code(c.prep("SELECT pad FROM sbtest1 WHERE id=?")), 1235);
    assert_eq!(code(c.query_drop("SELEKT 1")), 1064);
    assert_eq!(
        s.stats()
            .not_supported
            .load(std::sync::atomic::Ordering::Relaxed),
        6
    );
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn hostile_statements_are_answered_and_neither_the_connection_nor_the_server_goes_down() {
    // Unguarded, each of these would abort the whole server (a stack overflow in a connection
    // thread), drop the connection (a panic in the SQL parser) or pin a CPU for hours.
    let (s, dir) = server("hostile");
    let mut c = connect(&s);
    let like = format!("SHOW VARIABLES LIKE '{}'", "%".repeat(100_000));
    let rows: Vec<(String, String)> = c.query(&like).unwrap();
    assert!(!rows.is_empty(), "every variable matches");
    let slow_like = format!("SHOW GLOBAL STATUS LIKE '{}!'", "%_".repeat(25));
    let rows: Vec<(String, String)> = c.query(&slow_like).unwrap();
    assert!(rows.is_empty());
    assert_eq!(
        code(c.query_drop("SELECT c FROM sbtest1 WHERE id = 1 DIV")),
        1064
    );
    for chain in [" IS NULL", " IN (1)"] {
        let sql = format!(
            "SELECT c FROM sbtest1 WHERE id = 1{}",
            chain.repeat(200_000)
        );
        assert_eq!(code(c.query_drop(&sql)), 1235, "{chain}");
    }
    let got: Option<String> = c.query_first("SELECT c FROM sbtest1 WHERE id=1").unwrap();
    assert_eq!(got, Some(c_of(1)), "the connection is still usable");
    assert_eq!(
        s.stats().panics.load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_chain_of_calls_is_refused_and_the_server_keeps_serving() {
    // `POW(1,2)+POW(1,2)+…`: a depth guard that each call's comma reset would let 20,000
    // terms through, and they would overflow a connection thread's stack.
    let (s, dir) = server("pow-chain");
    let mut c = connect(&s);
    let sql = format!(
        "SELECT c FROM sbtest1 WHERE id = POW(1,2){}",
        "+POW(1,2)".repeat(20_000)
    );
    assert_eq!(code(c.query_drop(&sql)), 1235);
    let mut other = connect(&s);
    let got: Option<String> = other
        .query_first("SELECT c FROM sbtest1 WHERE id=1")
        .unwrap();
    assert_eq!(got, Some(c_of(1)), "another client is served");
    drop((c, other));
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_executable_comment_is_run_as_mysql_runs_it() {
    let (s, dir) = server("exec-comment");
    let mut c = connect(&s);
    // The condition inside `/*! … */` is part of the statement: this server cannot run it,
    // so it refuses rather than deleting row 3 without it.
    for sql in [
        "DELETE FROM sbtest1 WHERE id = 3 /*! AND k = 999 */",
        "UPDATE sbtest1 SET k=k+1 WHERE id = 3 /*! AND k = 999 */",
        "SELECT c FROM sbtest1 WHERE id = 3 /*! OR 1=1 */",
    ] {
        assert_eq!(code(c.query_drop(sql)), 1235, "{sql}");
    }
    assert_eq!(direct(&s, "sbtest1", 3), Some(Row::generate(3, ROWS)));
    // One the server can run is run whole; one for a later version is a comment.
    c.query_drop("UPDATE sbtest1 SET k=k+1 /*!80000 WHERE id = 4 */")
        .unwrap();
    assert_eq!(c.affected_rows(), 1);
    assert_eq!(
        direct(&s, "sbtest1", 4).unwrap().k,
        Row::generate(4, ROWS).k + 1
    );
    let got: Option<String> = c
        .query_first("SELECT c FROM sbtest1 WHERE id = 5 /*!99999 OR 1=1 */")
        .unwrap();
    assert_eq!(got, Some(c_of(5)));
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_failed_statement_inside_a_transaction_leaves_the_transaction_open() {
    let (s, dir) = server("stmt-rollback");
    let mut c = connect(&s);
    c.query_drop("BEGIN").unwrap();
    c.query_drop("INSERT INTO sbtest1 (id, k, c, pad) VALUES (2001, 1, 'a', 'b')")
        .unwrap();
    assert_eq!(
        code(c.query_drop("INSERT INTO sbtest1 (id, k, c, pad) VALUES (5, 1, 'a', 'b')")),
        1062
    );
    // Several rows, the last a duplicate: the statement's first row is undone too.
    assert_eq!(
        code(c.query_drop(
            "INSERT INTO sbtest1 (id, k, c, pad) VALUES (2002, 1, 'a', 'b'), (2001, 1, 'a', 'b')"
        )),
        1062
    );
    c.query_drop("INSERT INTO sbtest1 (id, k, c, pad) VALUES (2003, 1, 'a', 'b')")
        .unwrap();
    let inside: Vec<u32> = c
        .query("SELECT c FROM sbtest1 WHERE id BETWEEN 2001 AND 2003")
        .map(|v: Vec<String>| v.iter().map(|_| 1).collect())
        .unwrap();
    assert_eq!(inside.len(), 2, "2001 and 2003, not the undone 2002");
    c.query_drop("ROLLBACK").unwrap();
    for id in 2001..=2003 {
        assert_eq!(direct(&s, "sbtest1", id), None, "row {id} rolled back");
    }
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn literals_are_read_as_mysql_reads_them() {
    let (s, dir) = server("literals");
    let mut c = connect(&s);
    for (sql, want) in [
        ("SELECT X'414243'", "ABC"),
        ("SELECT 0x414243", "ABC"),
        ("SELECT N'nat'", "nat"),
        ("SELECT b'1000001'", "A"),
        ("SELECT 1e3", "1000"),
        ("SELECT X'41'", "A"),
    ] {
        let got: Option<String> = c.query_first(sql).unwrap();
        assert_eq!(got.as_deref(), Some(want), "{sql}");
    }
    // An expression is not a value this server computes: refused, not half-read.
    assert_eq!(
        code(c.query_drop("INSERT INTO sbtest1 (id, k, c, pad) VALUES (1e3 + 1, 1, 'x', 'y')")),
        1235
    );
    c.query_drop("INSERT INTO sbtest1 (id, k, c, pad) VALUES (2001, 1e3, X'414243', N'nat')")
        .unwrap();
    let r = direct(&s, "sbtest1", 2001).unwrap();
    assert_eq!((r.k, c_text(&r)), (1000, "ABC".to_string()));
    c.query_drop("INSERT INTO sbtest1 (id, k, c, pad) VALUES (2002, 0x10, b'1000001', 'p')")
        .unwrap();
    let r = direct(&s, "sbtest1", 2002).unwrap();
    assert_eq!((r.k, c_text(&r)), (16, "A".to_string()));
    let got: Option<String> = c
        .query_first("SELECT c FROM sbtest1 WHERE id = 5.0")
        .unwrap();
    assert_eq!(got, Some(c_of(5)));
    let got: Option<String> = c
        .query_first("SELECT c FROM sbtest1 WHERE id = 5.5")
        .unwrap();
    assert_eq!(got, None);
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_table_whose_defaults_the_engine_cannot_honour_is_refused() {
    let (s, dir) = server("defaults");
    let mut c = connect(&s);
    let table = |k: &str, c: &str| {
        format!(
            "CREATE TABLE t{} (id INTEGER NOT NULL AUTO_INCREMENT, k {k}, c {c}, \
             pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id))",
            k.len() + c.len()
        )
    };
    for sql in [
        table("INT DEFAULT 7 NOT NULL", "CHAR(120) DEFAULT '' NOT NULL"),
        table(
            "INTEGER DEFAULT '0' NOT NULL",
            "CHAR(120) DEFAULT 'dflt' NOT NULL",
        ),
        table("INT NULL", "CHAR(120) DEFAULT '' NOT NULL"),
        table("INT NOT NULL", "CHAR(120) DEFAULT '' NOT NULL"),
    ] {
        assert_eq!(code(c.query_drop(&sql)), 1235, "{sql}");
    }
    c.query_drop(table(
        "INTEGER DEFAULT '0' NOT NULL",
        "CHAR(120) DEFAULT '' NOT NULL",
    ))
    .unwrap();
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn show_tables_and_databases_apply_their_like_pattern() {
    let (s, dir) = server("show-like");
    let mut c = connect(&s);
    let tables: Vec<String> = c.query("SHOW TABLES LIKE 'x'").unwrap();
    assert!(tables.is_empty());
    let tables: Vec<String> = c.query("SHOW TABLES LIKE 'sbtest%'").unwrap();
    assert_eq!(tables, ["sbtest1"]);
    let dbs: Vec<String> = c.query("SHOW DATABASES LIKE 'nomatch%'").unwrap();
    assert!(dbs.is_empty());
    let dbs: Vec<String> = c.query("SHOW DATABASES LIKE 'sb%'").unwrap();
    assert_eq!(dbs, ["sbtest"]);
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn k_is_a_signed_32_bit_integer() {
    let (s, dir) = server("signed-k");
    let mut c = connect(&s);
    assert_eq!(
        code(c.query_drop("UPDATE sbtest1 SET k = k + 3000000000 WHERE id = 1")),
        1264
    );
    c.query_drop("INSERT INTO sbtest1 (id, k, c, pad) VALUES (2001, -5, 'a', 'b')")
        .unwrap();
    c.query_drop("INSERT INTO sbtest1 (id, k, c, pad) VALUES (2002, 2147483647, 'a', 'b')")
        .unwrap();
    assert_eq!(
        code(
            c.query_drop("INSERT INTO sbtest1 (id, k, c, pad) VALUES (2003, 3000000000, 'a', 'b')")
        ),
        1264
    );
    assert_eq!(
        code(c.query_drop("UPDATE sbtest1 SET k = k + 1 WHERE id = 2002")),
        1264
    );
    let sum: Option<String> = c
        .query_first("SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 2001 AND 2002")
        .unwrap();
    assert_eq!(sum.as_deref(), Some("2147483642"));
    c.query_drop("UPDATE sbtest1 SET k = k + -10 WHERE id = 2001")
        .unwrap();
    let sum: Option<String> = c
        .query_first("SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 2001 AND 2001")
        .unwrap();
    assert_eq!(sum.as_deref(), Some("-15"));
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn prepared_dates_and_doubles_are_converted_as_mysql_converts_them() {
    let (s, dir) = server("prepared-types");
    let mut c = connect(&s);
    let got: Option<String> = c
        .exec_first("SELECT c FROM sbtest1 WHERE id = ?", (5.0f64,))
        .unwrap();
    assert_eq!(got, Some(c_of(5)));
    let when = mysql::Value::Date(2020, 1, 2, 3, 4, 5, 0);
    c.exec_drop("UPDATE sbtest1 SET c = ? WHERE id = ?", (when, 6))
        .unwrap();
    assert_eq!(
        c_text(&direct(&s, "sbtest1", 6).unwrap()),
        "2020-01-02 03:04:05"
    );
    let day = mysql::Value::Date(2020, 1, 2, 0, 0, 0, 0);
    c.exec_drop("UPDATE sbtest1 SET c = ? WHERE id = ?", (day, 7))
        .unwrap();
    assert_eq!(
        c_text(&direct(&s, "sbtest1", 7).unwrap()),
        "2020-01-02 00:00:00"
    );
    let t = mysql::Value::Time(true, 1, 2, 3, 4, 5);
    c.exec_drop("UPDATE sbtest1 SET c = ? WHERE id = ?", (t, 8))
        .unwrap();
    assert_eq!(
        c_text(&direct(&s, "sbtest1", 8).unwrap()),
        "-26:03:04.000005"
    );
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn column_counts_insert_ids_and_defaults_answer_as_mysql() {
    let (s, dir) = server("small-answers");
    let mut c = connect(&s);
    assert_eq!(
        code(c.query_drop("INSERT INTO sbtest1 (id, k, c, pad) VALUES (2001, 1, 'a')")),
        1136
    );
    c.query_drop("INSERT INTO sbtest1 (id, k, c, pad) VALUES (2001, 1, 'a', 'b')")
        .unwrap();
    assert_eq!(
        c.last_insert_id(),
        2001,
        "the explicit AUTO_INCREMENT value"
    );
    c.query_drop("INSERT INTO sbtest1 (k, c, pad) VALUES (1, 'a', 'b')")
        .unwrap();
    assert_eq!(c.last_insert_id(), 2002, "the generated one");
    c.query_drop("SET GLOBAL turnstile_tickets = 77").unwrap();
    c.query_drop("SET GLOBAL turnstile_tickets = DEFAULT")
        .unwrap();
    let v: Option<(String, String)> = c
        .query_first("SHOW VARIABLES LIKE 'turnstile_tickets'")
        .unwrap();
    assert_eq!(v.unwrap().1, "500");
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_table_without_a_database_selected_is_error_1046_as_in_mysql() {
    let (s, dir) = server("no-db");
    let mut c = Conn::new(opts(&s).db_name(None::<String>)).unwrap();
    assert_eq!(code(c.query_drop("SELECT c FROM sbtest1 WHERE id=1")), 1046);
    assert_eq!(code(c.query_drop("SHOW TABLES")), 1046);
    c.query_drop("USE sbtest").unwrap();
    let got: Option<String> = c.query_first("SELECT c FROM sbtest1 WHERE id=1").unwrap();
    assert_eq!(got, Some(c_of(1)));
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_setting_the_policy_in_force_does_not_read_is_refused_naming_it() {
    let (s, dir) = server_with("not-for-policy", ROWS, |c| c.gate = GateConfig::default());
    let mut c = connect(&s);
    match c.query_drop("SET GLOBAL turnstile_tickets = 100") {
        Err(mysql::Error::MySqlError(e)) => {
            assert_eq!(e.code, 1231);
            assert!(
                e.message
                    .contains("tickets does not apply to the auto policy"),
                "{e:?}"
            );
        }
        other => panic!("expected 1231, got {other:?}"),
    }
    let status: Vec<(String, String, String)> = c.query("SHOW ENGINE TURNSTILE STATUS").unwrap();
    assert!(
        status[0].2.starts_with("GATE auto limit"),
        "{}",
        status[0].2
    );
    assert!(!status[0].2.contains("tickets"), "{}", status[0].2);
    // A policy that reads tickets takes them.
    c.query_drop("SET GLOBAL turnstile_policy = 'classic'")
        .unwrap();
    c.query_drop("SET GLOBAL turnstile_tickets = 100").unwrap();
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_mysql_clients_chatter_is_answered() {
    let (s, dir) = server("chatter");
    let mut c = connect(&s);
    let comment: Option<String> = c.query_first("select @@version_comment limit 1").unwrap();
    assert!(comment.unwrap().contains("turnstile"));
    let version: Option<String> = c.query_first("select @@version").unwrap();
    assert!(version.unwrap().contains("turnstile"));
    let db: Option<String> = c.query_first("SELECT DATABASE()").unwrap();
    assert_eq!(db.as_deref(), Some("sbtest"));
    // One database: another name is unknown, as a database MySQL does not have.
    assert_eq!(code(c.query_drop("USE turnstile")), 1049);
    c.query_drop("USE sbtest").unwrap();
    let db: Option<String> = c.query_first("SELECT DATABASE()").unwrap();
    assert_eq!(db.as_deref(), Some("sbtest"));
    let dbs: Vec<String> = c.query("SHOW DATABASES").unwrap();
    assert_eq!(dbs, vec!["sbtest"]);
    let max: Option<u64> = c.query_first("SELECT @@max_allowed_packet").unwrap();
    assert_eq!(max, Some(turnstile_server::DEFAULT_MAX_PACKET as u64));
    for set in [
        "SET NAMES utf8mb4",
        "SET autocommit=1",
        "SET tmp_table_size=2*1024*1024*1024",
        "SET max_heap_table_size=2*1024*1024*1024",
    ] {
        c.query_drop(set).unwrap();
    }
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn set_global_changes_the_gate_live_and_bad_values_are_refused() {
    let (s, dir) = server("admin");
    let mut a = connect(&s);
    let mut b = connect(&s);
    b.query_drop("SELECT c FROM sbtest1 WHERE id=1").unwrap();
    a.query_drop("SET GLOBAL turnstile_policy = 'flifo'")
        .unwrap();
    assert_eq!(s.gate().policy(), Policy::Flifo);
    assert_eq!(s.gate().limit(), 4, "the limit carries over");
    let status: Vec<(String, String, String)> = a.query("SHOW ENGINE TURNSTILE STATUS").unwrap();
    assert!(
        status[0].2.starts_with("GATE flifo limit 4"),
        "{}",
        status[0].2
    );
    // The other connection's next statement runs on the new gate.
    let before = s.gate().stats().counters.admissions;
    b.query_drop("SELECT c FROM sbtest1 WHERE id=2").unwrap();
    assert_eq!(s.gate().stats().counters.admissions, before + 1);
    a.query_drop("SET GLOBAL turnstile_concurrency = 16")
        .unwrap();
    assert_eq!(s.gate().limit(), 16);
    a.query_drop("SET @@global.turnstile_tickets = 77").unwrap();
    assert_eq!(s.gate().config().tickets, 77);
    assert_eq!(s.gate().policy(), Policy::Flifo);
    assert_eq!(s.gate().limit(), 16);
    a.query_drop("SET GLOBAL turnstile_row_send = 'force-exit'")
        .unwrap();
    let vars: Vec<(String, String)> = a.query("SHOW VARIABLES LIKE 'turnstile%'").unwrap();
    let get = |n: &str| vars.iter().find(|v| v.0 == n).map(|v| v.1.clone());
    assert_eq!(get("turnstile_policy").as_deref(), Some("flifo"));
    assert_eq!(get("turnstile_concurrency").as_deref(), Some("16"));
    assert_eq!(get("turnstile_tickets").as_deref(), Some("77"));
    assert_eq!(get("turnstile_row_send").as_deref(), Some("force-exit"));
    // Force-exit: each row sent by a range is a step-out.
    let steps = s.gate().stats().counters.step_outs;
    b.query_drop("SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 10")
        .unwrap();
    assert_eq!(s.gate().stats().counters.step_outs - steps, 10);
    assert_eq!(
        code(a.query_drop("SET GLOBAL turnstile_policy = 'lifo'")),
        1231
    );
    assert_eq!(
        code(a.query_drop("SET GLOBAL turnstile_concurrency = 5000")),
        1231
    );
    assert_eq!(
        code(a.query_drop("SET GLOBAL turnstile_concurrency = 'x'")),
        1232
    );
    assert_eq!(code(a.query_drop("SET GLOBAL turnstile_tickets = 0")), 1231);
    assert_eq!(code(a.query_drop("SET GLOBAL no_such_var = 1")), 1193);
    assert_eq!(s.gate().policy(), Policy::Flifo, "nothing changed");
    drop((a, b));
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn show_global_status_lists_the_gate_and_engine_counters_matching_like_each_once() {
    let (s, dir) = server("status");
    let mut c = connect(&s);
    c.query_drop("SELECT COUNT(*) FROM sbtest1").unwrap();
    let rows: Vec<(String, String)> = c.query("SHOW GLOBAL STATUS LIKE 'turnstile%'").unwrap();
    // Status variable names are unique (an exporter keying on them would emit duplicates).
    let names: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(names.len(), rows.len(), "{rows:?}");
    for n in [
        "turnstile_gate_queued",
        "turnstile_gate_waiting",
        "turnstile_gate_sleeping",
        "turnstile_gate_stepped_out",
        "turnstile_gate_sessions",
        "turnstile_gate_policy",
    ] {
        assert!(names.contains(n), "{n} missing from {rows:?}");
    }
    let get = |n: &str| {
        rows.iter()
            .find(|r| r.0 == n)
            .unwrap_or_else(|| panic!("{n} missing from {rows:?}"))
            .1
            .parse::<u64>()
            .unwrap()
    };
    let stats = s.gate().stats();
    assert_eq!(
        get("turnstile_gate_admissions_total"),
        stats.counters.admissions
    );
    assert_eq!(
        get("turnstile_gate_ticket_reentries_total"),
        stats.counters.ticket_reentries
    );
    assert_eq!(get("turnstile_gate_limit"), 4);
    assert!(get("turnstile_engine_rows_read") >= ROWS as u64);
    assert_eq!(get("turnstile_server_connected"), 1);
    let only: Vec<(String, String)> = c
        .query("SHOW GLOBAL STATUS LIKE 'turnstile_engine_c%'")
        .unwrap();
    assert!(!only.is_empty());
    assert!(
        only.iter().all(|r| r.0.starts_with("turnstile_engine_c")),
        "{only:?}"
    );
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

/// A raw client past the handshake (any password).
fn raw_client(s: &Server) -> TcpStream {
    let mut t = TcpStream::connect(s.tcp_addr()).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _greeting = read_packet(&mut t).unwrap();
    // HandshakeResponse41: PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH.
    let caps: u32 = 0x200 | 0x8000 | 0x80000;
    let mut body = caps.to_le_bytes().to_vec();
    body.extend(16_777_216u32.to_le_bytes());
    body.push(0x21);
    body.extend([0u8; 23]);
    body.extend(b"root\0");
    body.push(20);
    body.extend([7u8; 20]);
    body.extend(b"mysql_native_password\0");
    write_packet(&mut t, 1, &body);
    let ok = read_packet(&mut t).unwrap();
    assert_eq!(ok[0], 0x00, "handshake OK");
    // COM_INIT_DB: tables are found in the connection's database.
    write_packet(&mut t, 0, b"\x02sbtest");
    assert_eq!(read_packet(&mut t).unwrap()[0], 0x00, "database selected");
    t
}

#[test]
fn malformed_packets_close_that_connection_and_the_others_are_served() {
    let (s, dir) = server_with("malformed", ROWS, |c| c.max_packet = 1 << 20);
    let mut good = connect(&s);
    // An unknown command: 1047, and the connection goes on (as MySQL).
    let mut t = raw_client(&s);
    write_packet(&mut t, 0, b"\xee garbage");
    assert_eq!(err_code(&read_packet(&mut t).unwrap()), 1047);
    write_packet(&mut t, 0, b"\x0e"); // COM_PING
    assert_eq!(read_packet(&mut t).unwrap()[0], 0x00);
    // A COM_STMT_EXECUTE too short for its fields: 1835, closed.
    write_packet(&mut t, 0, b"\x17\x01\x00");
    assert_eq!(err_code(&read_packet(&mut t).unwrap()), 1835);
    assert!(closed(&mut t));
    // Garbage bytes whose header declares a packet (16 MiB) over max_allowed_packet (1 MiB):
    // 1153, closed, without waiting for the body.
    let mut t = raw_client(&s);
    t.write_all(&[0xff, 0xff, 0xff, 0x00, 0xde, 0xad, 0xbe, 0xef])
        .unwrap();
    assert_eq!(err_code(&read_packet(&mut t).unwrap()), 1153);
    assert!(closed(&mut t));
    // A statement with undecodable parameter types: the protocol crate panics in the
    // connection's thread; the panic is caught and only that connection closes.
    let mut t = raw_client(&s);
    write_packet(&mut t, 0, b"\x16SELECT c FROM sbtest1 WHERE id=?");
    let prep = read_packet(&mut t).unwrap();
    assert_eq!(prep[0], 0x00, "prepare OK");
    let stmt = [prep[1], prep[2], prep[3], prep[4]];
    let mut exec = vec![0x17];
    exec.extend(stmt);
    exec.extend([0, 1, 0, 0, 0, 0, 1, 0xee, 0x00, 1, 2, 3, 4]);
    // Read the prepare's parameter and column definitions (each list ends with an EOF: this
    // client did not ask for CLIENT_DEPRECATE_EOF), then execute.
    let cols = u16::from_le_bytes([prep[5], prep[6]]) as usize;
    let params = u16::from_le_bytes([prep[7], prep[8]]) as usize;
    assert_eq!((cols, params), (1, 1));
    for _ in 0..cols + 1 + params + 1 {
        read_packet(&mut t).unwrap();
    }
    write_packet(&mut t, 0, &exec);
    assert!(closed(&mut t));
    wait_for("the panic to be counted", || {
        s.stats().panics.load(std::sync::atomic::Ordering::Relaxed) == 1
    });
    let got: Option<String> = good
        .query_first("SELECT c FROM sbtest1 WHERE id=3")
        .unwrap();
    assert_eq!(got, Some(c_of(3)), "the other connection is served");
    assert_eq!(s.gate().stats().inside, 0);
    drop(good);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_client_silent_past_the_connect_timeout_is_disconnected_and_one_that_logged_in_is_not() {
    let (s, dir) = server_with("connect-timeout", ROWS, |c| {
        c.connect_timeout = Duration::from_millis(200)
    });
    let mut silent = TcpStream::connect(s.tcp_addr()).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let _greeting = read_packet(&mut silent).unwrap();
    assert!(closed(&mut silent), "disconnected before logging in");
    let mut c = connect(&s);
    // Idle after logging in, for longer than the connect timeout: still connected.
    let idle = Instant::now();
    while idle.elapsed() < Duration::from_millis(400) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let got: Option<String> = c.query_first("SELECT c FROM sbtest1 WHERE id=8").unwrap();
    assert_eq!(got, Some(c_of(8)));
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_first_packet_numbered_zero_does_not_count_as_logged_in_and_an_idle_session_times_out() {
    let (s, dir) = server_with("connect-bypass", ROWS, |c| {
        c.connect_timeout = Duration::from_millis(200);
        c.wait_timeout = Duration::from_millis(600);
    });
    // The greeting, then a header numbered 0 in place of the handshake response, and
    // nothing more: still logging in, so the connect timeout closes it.
    let mut t = TcpStream::connect(s.tcp_addr()).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _greeting = read_packet(&mut t).unwrap();
    t.write_all(&[5, 0, 0, 0]).unwrap();
    assert!(closed(&mut t), "disconnected at the connect timeout");
    // Logged in, then silent past the wait timeout: closed too, and counted out.
    let mut idle = raw_client(&s);
    write_packet(&mut idle, 0, b"\x03SELECT c FROM sbtest1 WHERE id=2");
    assert!(read_packet(&mut idle).is_some(), "answered");
    while read_packet(&mut idle).is_some() {}
    wait_disconnected(&s, "the idle session to be closed");
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_client_that_stops_reading_a_result_is_disconnected_and_its_slot_freed() {
    let (s, dir) = server_with("stalled-reader", ROWS, |c| {
        c.gate = GateConfig::new(Policy::Classic).limit(1).tickets(1_000_000);
        c.net_write_timeout = Duration::from_millis(300);
    });
    s.engine()
        .ensure_table("big", 200_000, &mut |_, _| {})
        .unwrap();
    let mut t = raw_client(&s);
    // Asks for every row (about 26 MB of packets) and never reads them.
    write_packet(
        &mut t,
        0,
        b"\x03SELECT c FROM big WHERE id BETWEEN 1 AND 200000",
    );
    wait_disconnected(&s, "the connection to be dropped at the write timeout");
    assert_eq!(s.gate().stats().inside, 0, "the slot was freed");
    let mut c = connect(&s);
    let got: Option<String> = c.query_first("SELECT c FROM sbtest1 WHERE id=5").unwrap();
    assert_eq!(got, Some(c_of(5)));
    drop((c, t));
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn long_data_past_max_allowed_packet_is_refused_and_closes_that_connection() {
    let (s, dir) = server_with("long-data", ROWS, |c| c.max_packet = 1 << 20);
    let mut t = raw_client(&s);
    let mut prep = vec![0x16u8];
    prep.extend_from_slice(b"SELECT c FROM sbtest1 WHERE id=?");
    write_packet(&mut t, 0, &prep);
    let ok = read_packet(&mut t).unwrap();
    assert_eq!(ok[0], 0x00, "prepared");
    let stmt = u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]]);
    // Its parameter and column definitions, each block ended by an EOF packet.
    for _ in 0..2 {
        while read_packet(&mut t).is_some_and(|p| p[0] != 0xfe) {}
    }
    // COM_STMT_SEND_LONG_DATA gets no answer: 600 KiB, then 600 KiB more (over 1 MiB).
    let mut chunk = vec![0x18u8];
    chunk.extend(stmt.to_le_bytes());
    chunk.extend(0u16.to_le_bytes());
    chunk.extend(std::iter::repeat_n(b'x', 600 << 10));
    write_packet(&mut t, 0, &chunk);
    write_packet(&mut t, 0, &chunk);
    assert_eq!(err_code(&read_packet(&mut t).unwrap()), 1153);
    assert!(closed(&mut t), "that connection is closed");
    let mut c = connect(&s);
    let got: Option<String> = c.query_first("SELECT c FROM sbtest1 WHERE id=6").unwrap();
    assert_eq!(got, Some(c_of(6)));
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_oversized_packet_is_refused_and_only_that_connection_closes() {
    let (s, dir) = server_with("oversized", ROWS, |c| c.max_packet = 1 << 20);
    let mut good = connect(&s);
    let max: Option<u64> = good.query_first("SELECT @@max_allowed_packet").unwrap();
    assert_eq!(max, Some(1 << 20), "the limit in force is reported");
    // This client does not ask the limit, so the server's check is what refuses.
    let mut big = Conn::new(opts(&s).max_allowed_packet(Some(64 << 20))).unwrap();
    let sql = format!("SELECT '{}'", "x".repeat(2 << 20));
    assert!(big.query_drop(&sql).is_err());
    assert!(
        big.query_drop("SELECT 1").is_err(),
        "that connection is closed"
    );
    let got: Option<String> = good
        .query_first("SELECT c FROM sbtest1 WHERE id=4")
        .unwrap();
    assert_eq!(got, Some(c_of(4)));
    drop((good, big));
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_client_gone_mid_transaction_has_it_rolled_back_and_its_row_locks_released() {
    let (s, dir) = server("disconnect-txn");
    let e = s.engine().clone();
    e.set_lock_wait_timeout(Duration::from_secs(20));
    // Abruptly: BEGIN and an UPDATE on a raw socket, then the socket closes.
    let mut t = raw_client(&s);
    write_packet(&mut t, 0, b"\x03BEGIN");
    assert_eq!(read_packet(&mut t).unwrap()[0], 0x00);
    write_packet(&mut t, 0, b"\x03UPDATE sbtest1 SET c='gone' WHERE id=30");
    assert_eq!(read_packet(&mut t).unwrap()[0], 0x00);
    assert_eq!(e.row_locks_held(), 1);
    drop(t);
    wait_for("the row lock to be released", || e.row_locks_held() == 0);
    // Another connection updates the row without waiting for a lock.
    let mut c = connect(&s);
    c.query_drop("UPDATE sbtest1 SET c='mine' WHERE id=30")
        .unwrap();
    assert_eq!(
        &e.get_direct("sbtest1", 30).unwrap().unwrap().c[..4],
        b"mine"
    );
    // Politely (COM_QUIT from the client library): the same.
    let mut q = connect(&s);
    q.query_drop("BEGIN").unwrap();
    q.query_drop("DELETE FROM sbtest1 WHERE id=31").unwrap();
    drop(q);
    wait_for("the row lock to be released", || e.row_locks_held() == 0);
    assert!(
        e.contains("sbtest1", 31).unwrap(),
        "the delete was rolled back"
    );
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_client_gone_mid_statement_frees_its_gate_slot() {
    let (s, dir) = server_with("disconnect-stmt", ROWS, |c| {
        c.gate = GateConfig::new(Policy::Classic).limit(1).tickets(1)
    });
    s.engine()
        .ensure_table("big", 200_000, &mut |_, _| {})
        .unwrap();
    for sql in [
        &b"\x03SELECT c FROM big WHERE id BETWEEN 1 AND 200000"[..],
        &b"\x03SELECT COUNT(*) FROM big"[..],
    ] {
        let mut t = raw_client(&s);
        write_packet(&mut t, 0, sql);
        // Gone while the statement runs (before or after its first rows).
        drop(t);
        wait_for("the connection to end", || {
            s.stats()
                .connected
                .load(std::sync::atomic::Ordering::SeqCst)
                == 0
        });
        assert_eq!(s.gate().stats().inside, 0, "the slot was freed");
    }
    // The only slot is free: a new client gets in.
    let mut c = connect(&s);
    let got: Option<String> = c.query_first("SELECT c FROM sbtest1 WHERE id=5").unwrap();
    assert_eq!(got, Some(c_of(5)));
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_unix_socket_connection_runs_queries() {
    let sock = data_dir("sock").with_extension("sock");
    // A stale file where the socket goes is removed on start.
    std::fs::write(&sock, b"stale").unwrap();
    let (s, dir) = server_with("unix", ROWS, |c| c.socket = Some(sock.clone()));
    let mut c = Conn::new(
        OptsBuilder::new()
            .socket(Some(sock.to_str().unwrap()))
            .user(Some("root"))
            .db_name(Some("sbtest")),
    )
    .unwrap();
    let got: Option<String> = c.query_first("SELECT c FROM sbtest1 WHERE id=6").unwrap();
    assert_eq!(got, Some(c_of(6)));
    drop(c);
    s.shutdown();
    assert!(!sock.exists(), "the socket file is removed at shutdown");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn connections_over_max_connections_are_refused_with_1040() {
    let (s, dir) = server_with("maxconn", ROWS, |c| c.max_connections = 3);
    let conns: Vec<Conn> = (0..3).map(|_| connect(&s)).collect();
    match Conn::new(opts(&s)) {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1040),
        other => panic!("expected error 1040, got {:?}", other.map(|_| ())),
    }
    drop(conns);
    wait_disconnected(&s, "the connections to end");
    let mut c = connect(&s);
    c.query_drop("SELECT 1").unwrap();
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

/// `n` connections open at once, each running a query; all answered.
fn many_connections(n: usize) {
    let (s, dir) = server(&format!("many-{n}"));
    let addr = s.tcp_addr();
    let groups = 20;
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(groups + 1));
    let threads: Vec<_> = (0..groups)
        .map(|g| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let opts = OptsBuilder::new()
                    .ip_or_hostname(Some("127.0.0.1"))
                    .tcp_port(addr.port())
                    .user(Some("root"))
                    .db_name(Some("sbtest"))
                    .prefer_socket(false);
                let mut conns: Vec<Conn> = (0..n / groups)
                    .map(|_| Conn::new(opts.clone()).unwrap())
                    .collect();
                barrier.wait(); // all open at once
                for (i, c) in conns.iter_mut().enumerate() {
                    let id = (g * (n / groups) + i) as u32 % ROWS + 1;
                    let got: Option<String> = c
                        .query_first(format!("SELECT c FROM sbtest1 WHERE id={id}"))
                        .unwrap();
                    assert_eq!(got, Some(c_of(id)));
                }
                barrier.wait();
            })
        })
        .collect();
    barrier.wait();
    assert_eq!(
        s.stats()
            .connected
            .load(std::sync::atomic::Ordering::SeqCst),
        n / groups * groups
    );
    barrier.wait();
    for t in threads {
        t.join().unwrap();
    }
    wait_disconnected(&s, "every connection to end");
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

/// 2,000 connections at once: about 4,000 threads in this process (the clients' and the
/// server's) and 4,000 sockets; the slowest test of the file.
#[test]
fn two_thousand_connections_at_once_are_all_served() {
    many_connections(2000);
}

/// One HTTP request to `addr`, the whole answer.
fn http(addr: std::net::SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn idle_connections_to_the_metrics_port_take_at_most_sixteen_threads_and_scrapes_go_on_after() {
    let (s, dir) = server_with("metrics-idle", ROWS, |c| {
        c.metrics = Some("127.0.0.1:0".parse().unwrap());
    });
    let m = s.metrics_addr().expect("metrics configured");
    // Twenty clients that connect and send nothing: sixteen are waited for (a thread each,
    // named after this server's metrics port),
    // the rest closed at once. Counted once the server has dealt with all twenty (each
    // either has a thread or is closed), without waiting on the clock.
    let idle: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(m).unwrap()).collect();
    for t in &idle {
        t.set_nonblocking(true).unwrap();
    }
    let closed = |t: &TcpStream| match (&*t).read(&mut [0u8; 1]) {
        Ok(0) => true,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        Ok(_) => false,
    };
    let scrape_threads = || {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
            .filter(|c| c.trim() == format!("scrape:{}", m.port()))
            .count()
    };
    let (mut threads, mut refused) = (0, 0);
    wait_for("every idle connection to be dealt with", || {
        threads = scrape_threads();
        refused = idle.iter().filter(|t| closed(t)).count();
        threads + refused >= 20
    });
    assert!(threads <= 16, "{threads} scrape threads");
    assert!(refused >= 4, "{refused} of 20 closed at once");
    drop(idle);
    // Their threads end with them: a scrape is answered. Until then a scrape may be closed
    // unanswered, or reset (closed with the request unread): tried again.
    let scrape = || -> std::io::Result<String> {
        let mut t = TcpStream::connect(m)?;
        t.set_read_timeout(Some(Duration::from_secs(30)))?;
        t.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")?;
        let mut out = String::new();
        t.read_to_string(&mut out)?;
        Ok(out)
    };
    wait_for("a scrape to be answered", || {
        scrape().is_ok_and(|r| r.starts_with("HTTP/1.1 200 OK"))
    });
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_prometheus_scrape_shows_the_gate_the_commit_mutex_and_the_engines_counters() {
    let (s, dir) = server_with("metrics", ROWS, |c| {
        c.metrics = Some("127.0.0.1:0".parse().unwrap());
    });
    let m = s.metrics_addr().expect("metrics configured");
    let mut c = connect(&s);
    c.query_drop("INSERT INTO sbtest1 (id, k, c, pad) VALUES (5001, 1, 'x', 'y')")
        .unwrap();
    let _: Vec<String> = c.query("SELECT c FROM sbtest1 WHERE id=5001").unwrap();
    let got = http(m, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
    let (head, body) = got.split_once("\r\n\r\n").expect("a head and a body");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "{head}"
    );
    for want in [
        "turnstile_gate_limit{gate=\"server\"} 4\n",
        "turnstile_engine_commits_total 1\n",
        "# TYPE turnstile_server_statements_total counter\n",
        "turnstile_server_connected 1\n",
        "lock=\"commit mutex\"",
    ] {
        assert!(body.contains(want), "{want:?} missing from:\n{body}");
    }
    // Every sample line is `name[{labels}] value` with a number, as a scraper parses it.
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let value = line.rsplit_once(' ').map(|(_, v)| v).unwrap_or("");
        assert!(value.parse::<f64>().is_ok(), "not a sample: {line:?}");
    }
    assert!(
        s.prometheus()
            .contains("turnstile_engine_commits_total 1\n"),
        "Server::prometheus is the scrape's text"
    );
    let other = http(m, "GET / HTTP/1.1\r\n\r\n");
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
    let post = http(m, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    drop(c);
    s.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}
