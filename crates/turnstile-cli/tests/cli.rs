//! The `turnstile` binary end to end: JSON shape, tables, and exit code 2 on bad input.

use std::process::Command;

fn turnstile(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(args)
        .output()
        .expect("run turnstile")
}

const TINY: [&str; 10] = [
    "bench",
    "gate",
    "--threads",
    "1,3",
    "--duration-ms",
    "20",
    "--reps",
    "1",
    "--limit",
    "2",
];

#[test]
fn bench_gate_json_has_the_documented_shape() {
    let mut args = TINY.to_vec();
    args.extend(["--policies", "classic,flifo,mutex-condvar", "--json"]);
    let out = turnstile(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let fast = v["fast_path"].as_array().unwrap();
    assert_eq!(fast.len(), 3);
    assert_eq!(fast[0]["policy"], "classic");
    assert!(fast[0]["ticket_reentry_ns"].as_f64().unwrap() > 0.0);
    assert!(fast[0]["admission_ns"].as_f64().unwrap() > 0.0);
    assert!(
        fast[2]["ticket_reentry_ns"].is_null(),
        "the baseline has no tickets"
    );
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 3 * 2);
    for r in results {
        for key in [
            "policy",
            "threads",
            "limit",
            "throughput_per_s",
            "wait_p50_ns",
            "wait_p99_ns",
            "max_inside",
            "ctx_switches_per_admission",
        ] {
            assert!(!r[key].is_null(), "missing {key} in {r}");
        }
        let bound = if r["policy"] == "flifo" { 4 } else { 2 };
        assert!(r["max_inside"].as_u64().unwrap() <= bound, "{r}");
    }
    // Progress goes to stderr, never into the JSON.
    assert!(String::from_utf8_lossy(&out.stderr).contains("load: classic"));
}

#[test]
fn bench_gate_prints_tables_for_people() {
    let mut args = TINY.to_vec();
    args.extend(["--policies", "polling"]);
    let out = turnstile(&args);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Fast paths"), "{text}");
    assert!(text.contains("ticket re-entry"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("polling") && l.contains(" 3 ")),
        "{text}"
    );
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    for (bad, expect) in [
        (vec!["--policies", "fifo"], "unknown gate policy \"fifo\""),
        (vec!["--threads", "0"], "thread counts must be at least 1"),
        (vec!["--limit", "5000"], "limit = 5000 is out of range"),
        (vec!["--tickets", "0"], "tickets = 0 is out of range"),
        (vec!["--threads", "two"], "invalid value"),
    ] {
        let mut args = vec!["bench", "gate", "--quick"];
        args.extend(bad.iter().copied());
        let out = turnstile(&args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{bad:?}: {err}");
        assert!(out.stdout.is_empty(), "nothing half-written on stdout");
    }
}

#[test]
fn bench_mutex_writes_json_and_one_chart_per_hold_and_mutex_count() {
    let dir = std::env::temp_dir().join(format!("turnstile-cli-mutex-{}", std::process::id()));
    let out = turnstile(&[
        "bench",
        "mutex",
        "--variants",
        "turnstile,innodb,std",
        "--threads",
        "1,4",
        "--mutexes",
        "1,2",
        "--hold-ns",
        "0",
        "--duration-ms",
        "20",
        "--json",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 3 * 2 * 2);
    for r in results {
        for key in [
            "variant",
            "threads",
            "mutexes",
            "hold_ns",
            "ns_per_loop",
            "cpu_ns_per_loop",
            "cs_per_loop",
            "fairness",
            "wait_p99_ns",
        ] {
            assert!(!r[key].is_null(), "missing {key} in {r}");
        }
    }
    assert!(results
        .iter()
        .any(|r| r["variant"] == "innodb" && r["wakeups_per_acquire"].is_number()));
    assert!(results
        .iter()
        .any(|r| r["variant"] == "std" && r["wakeups_per_acquire"].is_null()));
    for name in ["mutex-hold0-m1.svg", "mutex-hold0-m2.svg", "results.json"] {
        assert!(dir.join(name).is_file(), "{name} missing");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_mutex_rejects_bad_input_with_exit_code_2() {
    for (bad, expect) in [
        (vec!["--variants", "futex"], "unknown mutex variant"),
        (vec!["--mutexes", "0"], "mutex counts must be at least 1"),
    ] {
        let mut args = vec!["bench", "mutex", "--quick"];
        args.extend(bad.iter().copied());
        let out = turnstile(&args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(expect));
    }
}
