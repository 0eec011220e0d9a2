//! The `turnstile` binary end to end: JSON shape, tables, and exit code 2 on bad input.

use std::process::Command;

fn turnstile(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(args)
        .output()
        .expect("run turnstile")
}

/// Runs `turnstile args` and asserts that it succeeded (showing its stderr if not).
fn turnstile_ok(args: &[&str]) -> std::process::Output {
    let out = turnstile(args);
    assert!(
        out.status.success(),
        "turnstile {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
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
fn repeated_list_entries_and_runs_without_end_are_refused_before_anything_runs() {
    // A repeated entry ran twice (and pileup compared a table count with itself); a
    // u64::MAX duration or 4e9 rows ran for ever; a folder as calibrate's --out lost the
    // whole calibration at the end.
    let dir = temp("refusals");
    let data = dir.join("data");
    let data = data.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "repro",
                "tickets",
                "--quick",
                "--policies",
                "classic,classic",
                "--data-dir",
                data,
            ],
            "--policies: classic is given twice",
        ),
        (
            vec![
                "repro",
                "pileup",
                "--quick",
                "--tables",
                "1,1",
                "--data-dir",
                data,
            ],
            "--tables: 1 is given twice",
        ),
        (
            vec![
                "repro",
                "oltp",
                "--quick",
                "--threads",
                "2,2",
                "--data-dir",
                data,
            ],
            "--threads: 2 is given twice",
        ),
        (
            vec!["bench", "gate", "--quick", "--threads", "1,1"],
            "the thread counts: 1 is given twice",
        ),
        (
            vec!["bench", "mutex", "--quick", "--variants", "std,std"],
            "the variants: std is given twice",
        ),
        (
            vec![
                "bench",
                "gate",
                "--quick",
                "--duration-ms",
                "18446744073709551615",
            ],
            "duration at most 3600 s",
        ),
        (
            vec![
                "repro",
                "tickets",
                "--rows",
                "4000000000",
                "--data-dir",
                data,
            ],
            "--rows 4000000000 is more than 100000000",
        ),
        (
            vec!["serve", "--tables", "5000"],
            "--tables 5000 / --table-size 10000 out of range",
        ),
    ];
    for (args, expect) in cases {
        let out = turnstile(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{args:?}: {err}");
    }
    if cfg!(target_os = "linux") {
        std::fs::create_dir_all(&dir).unwrap();
        let out = turnstile(&["calibrate", "--quick", "--out", dir.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is a folder"), "{err}");
        assert!(
            !err.contains("context switch"),
            "refused before measuring: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn ctrl_c_ends_a_bench_at_once_with_130() {
    // Only `repro` and `serve` stop at a statement's end; `bench gate` ends at the first
    // Ctrl-C, not at a second one.
    let mut child = Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args([
            "bench",
            "gate",
            "--quick",
            "--policies",
            "classic",
            "--threads",
            "1",
        ])
        .args(["--async-tasks", "0", "--duration-ms", "600000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run turnstile bench gate");
    let _stderr = interrupt_after_progress(&mut child, "load:");
    // One signal ends it (a second one is never sent): waiting returns, with 130.
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
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

/// `repro oltp` on a tiny table (2,000 rows, ranges of 100, 50 ms points) with `extra`
/// arguments, its chart in `charts`; it must succeed.
fn tiny_oltp(d: &str, charts: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "repro",
        "oltp",
        "--data-dir",
        d,
        "--rows",
        "2000",
        "--range",
        "100",
        "--seconds",
        "0.05",
        "--out",
        charts.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = turnstile(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn temp(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("turnstile-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn repro_tickets_oltp_and_pileup_run_end_to_end_at_tiny_size() {
    let data = temp("repro-data");
    let d = data.to_str().unwrap();
    let out = turnstile(&[
        "repro",
        "tickets",
        "--data-dir",
        d,
        "--rows",
        "3000",
        "--policies",
        "classic,polling",
        "--quick",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    for key in [
        "policy",
        "tickets",
        "rows",
        "alone_s",
        "concurrent_s",
        "handoffs",
        "wake_latency_us",
    ] {
        assert!(!runs[0][key].is_null(), "missing {key}");
    }

    let charts = temp("repro-oltp-charts");
    let out = tiny_oltp(d, &charts, &["--threads", "1,2", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    // Every setting (classic, flifo, polling, timer, unlimited, auto) at two thread counts.
    assert_eq!(runs.len(), 6 * 2);
    for key in [
        "policy",
        "threads",
        "tps",
        "p99_ms",
        "cs_per_s",
        "cs_per_txn",
        "admissions_per_txn",
        "sleeps_per_txn",
        "queue_waits_per_txn",
        "cpu_sys",
        "cpu_idle",
        "p999_ms",
        "max_ms",
        "fair_share_ms",
        "starved_clients",
        "jain",
        "window_s",
        "wake_p50_us",
        "wake_p99_us",
        "wake_mean_us",
    ] {
        assert!(!runs[0][key].is_null(), "missing {key}");
    }
    for r in runs {
        let f = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} in {r}"));
        assert!(
            f("p99_ms") <= f("p999_ms") && f("p999_ms") <= f("max_ms"),
            "{r}"
        );
        assert!((0.0..=1.0 + 1e-9).contains(&f("jain")), "{r}");
        assert!(f("starved_clients") <= f("threads"), "{r}");
        assert!(f("window_s") >= 0.05, "{r}");
        if f("tps") > 0.0 {
            let fair = f("threads") / f("tps") * 1e3;
            assert!(
                f("fair_share_ms") > 0.0 && (f("fair_share_ms") - fair).abs() < 1e-6 * fair,
                "{r}"
            );
        }
    }
    assert!(runs.iter().all(|r| r["row_send"] == "force-exit"));
    assert!(charts.join("oltp-tps.svg").is_file());

    let out = tiny_oltp(
        d,
        &charts,
        &[
            "--threads",
            "1",
            "--policies",
            "flifo,classic",
            "--row-send",
            "keep",
        ],
    );
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(md.contains("Row send: **keep**"), "{md}");
    assert!(md.contains("| flifo | keep | 1 |") && md.contains("| classic | keep | 1 |"));
    assert!(!md.contains("| polling |"), "{md}");
    assert!(
        md.contains("| fair share ms |") && md.contains("| p99 ÷ fair share | starved | Jain |"),
        "{md}"
    );

    // Repetitions: every point keeps each repetition's TPS and reports the median one.
    let out = tiny_oltp(
        d,
        &charts,
        &[
            "--threads",
            "2",
            "--policies",
            "auto",
            "--reps",
            "3",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["reps"], 3);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "one point, however many repetitions");
    let mut reps: Vec<f64> = runs[0]["tps_reps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(reps.len(), 3);
    reps.sort_by(f64::total_cmp);
    assert_eq!(
        runs[0]["tps"].as_f64().unwrap(),
        reps[1],
        "the median repetition"
    );

    // Side by side: auto at 256 threads beside each setting's peak, one pair each.
    let out = tiny_oltp(
        d,
        &charts,
        &[
            "--threads",
            "2,256",
            "--policies",
            "polling,auto",
            "--versus-best",
            "1",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Only `auto` moves its limit: the others have no highest limit or reasons.
    for r in v["runs"].as_array().unwrap() {
        let auto = r["policy"] == "auto";
        assert_eq!(r["limit_max"].is_u64(), auto, "{r}");
        assert_eq!(r["limit_reasons"].is_object(), auto, "{r}");
        assert!(r["limit_end"].is_u64(), "{r}");
    }
    let vb = v["versus_best"].as_array().unwrap();
    assert_eq!(vb.len(), 1, "{vb:?}");
    assert_eq!(
        (vb[0]["policy"].as_str(), vb[0]["threads"].as_u64()),
        (Some("auto"), Some(256))
    );
    let against = vb[0]["against"].as_array().unwrap();
    assert_eq!(
        against
            .iter()
            .map(|a| a["policy"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["polling", "auto"]
    );
    let lowest = against
        .iter()
        .map(|a| a["ratio_median"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(vb[0]["ratio"].as_f64(), Some(lowest));

    // Beside a competing CPU-bound process: the run says so, in the JSON and the report.
    if cfg!(unix) {
        let args = [
            "--threads",
            "4",
            "--policies",
            "auto",
            "--competing-processes",
            "1",
        ];
        let out = tiny_oltp(d, &charts, &[&args[..], &["--json"]].concat());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["config"]["competing_processes"].as_u64(), Some(1));
        // The competing processes' start is a step of the progress count, not one past it.
        let err = String::from_utf8_lossy(&out.stderr);
        assert_steps_within_total(&err);
        assert_eq!(v["runs"].as_array().unwrap().len(), 1);
        // `auto`'s limit: where it ended, the highest it reached, and why it moved.
        let run = &v["runs"][0];
        let (end, max) = (
            run["limit_end"].as_u64().unwrap(),
            run["limit_max"].as_u64().unwrap(),
        );
        assert!(end >= 1 && max >= end, "{run}");
        assert!(run["limit_reasons"]["fill"].is_u64(), "{run}");
        let md = String::from_utf8_lossy(&tiny_oltp(d, &charts, &args).stdout).into_owned();
        assert!(
            md.contains("**Shared machine:** 1 CPU-bound process(es) ran beside the whole run"),
            "{md}"
        );
    }

    // Costlier rows: the run carries the setting, in the JSON and the report. (That every
    // row still costs one admission with the forced exit is counted on one transaction in
    // the bench crate's oltp tests: a 50 ms window's count depends on the machine's load.)
    let args = [
        "--threads",
        "1",
        "--policies",
        "classic",
        "--row-work-ns",
        "2000",
    ];
    let out = tiny_oltp(d, &charts, &[&args[..], &["--json"]].concat());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["row_work_ns"].as_u64(), Some(2000));
    assert!(
        v["runs"][0]["admissions_per_txn"].as_f64().unwrap() >= 0.0,
        "{v}"
    );
    let md = String::from_utf8_lossy(&tiny_oltp(d, &charts, &args).stdout).into_owned();
    assert!(md.contains("**Row work:** 2000 ns of CPU added"), "{md}");

    let charts = temp("repro-pileup-charts");
    let out = turnstile(&[
        "repro",
        "pileup",
        "--data-dir",
        d,
        "--tables",
        "2",
        "--seconds",
        "0.3",
        "--fsync-ms",
        "1",
        "--quick",
        "--json",
        "--out",
        charts.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    // classic hold-slot, release-slot and group-commit, and auto with the naive hold-slot
    // commit.
    assert_eq!(runs.len(), 4);
    for r in runs {
        assert_eq!(r["found"], r["acknowledged"], "{r}");
        for key in [
            "tables",
            "mode",
            "inserts_per_s",
            "queries_per_s",
            "fsyncs_per_s",
            "commits_per_fsync",
            "series",
            "profile",
        ] {
            assert!(!r[key].is_null(), "missing {key}");
        }
    }
    assert!(charts.join("pileup-queries.svg").is_file());
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn repro_mixed_quick_json_has_the_required_fields_and_writes_report_and_chart() {
    let data = temp("mixed-data");
    let out_dir = temp("mixed-report");
    let out = turnstile(&[
        "repro",
        "mixed",
        "--quick",
        "--json",
        "--rows",
        "3000",
        "--policies",
        "classic-500,classic-10M,polling",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert!(v["config"].is_object(), "{v}");
    assert_eq!(v["config"]["rows"], 3000);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for r in runs {
        for key in [
            "policy",
            "tickets",
            "scan_slowdown",
            "point_p50_ms",
            "point_p99_ms",
            "point_max_ms",
            "point_selects",
            "point_per_s",
            "scan_s",
        ] {
            assert!(!r[key].is_null(), "missing {key} in {r}");
        }
        assert!(r["scan_slowdown"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["point_selects"].as_u64().unwrap() > 0, "{r}");
    }
    assert_eq!(
        runs.iter()
            .map(|r| (
                r["policy"].as_str().unwrap(),
                r["tickets"].as_u64().unwrap()
            ))
            .collect::<Vec<_>>(),
        [("classic", 500), ("classic", 10_000_000), ("polling", 500)]
    );
    let md = std::fs::read_to_string(out_dir.join("mixed.md")).unwrap();
    assert!(md.contains("| classic-10M | classic | 10000000 |"), "{md}");
    let svg = std::fs::read_to_string(out_dir.join("mixed.svg")).unwrap();
    assert!(svg.contains("classic-10M") && svg.contains("polling"));
    let _ = std::fs::remove_dir_all(&data);
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn repro_all_quick_writes_a_report_folder() {
    let data = temp("all-data");
    let out_dir = temp("all-report");
    let out = turnstile(&[
        "repro",
        "all",
        "--quick",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    for section in [
        "Seed 000",
        "Seed 001",
        "Seed 004",
        "## Mixed",
        "| classic-500 | classic | 500 |",
        "| classic |",
        "hold-slot",
    ] {
        assert!(md.contains(section), "report.md lacks {section}");
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    assert!(v["tickets"]["runs"].is_array() && v["oltp"]["runs"].is_array());
    assert_eq!(
        v["mixed"]["runs"].as_array().unwrap().len(),
        5,
        "four seed settings and auto"
    );
    for svg in [
        "oltp-tps.svg",
        "pileup-queries.svg",
        "pileup-timeline.svg",
        "mixed.svg",
    ] {
        assert!(out_dir.join(svg).is_file(), "{svg} missing");
    }
    let _ = std::fs::remove_dir_all(&data);
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn repro_bad_input_exits_2_and_writes_nothing() {
    let data = temp("bad-data");
    let d = data.to_str().unwrap();
    for (args, expect) in [
        (
            vec!["repro", "tickets", "--data-dir", d, "--policies", "fifo"],
            "unknown gate policy",
        ),
        (
            vec!["repro", "tickets", "--data-dir", d, "--rows", "0"],
            "--rows must be positive",
        ),
        (
            vec!["repro", "oltp", "--data-dir", d, "--rows", "-5"],
            "error",
        ),
        (
            vec![
                "repro",
                "oltp",
                "--data-dir",
                d,
                "--rows",
                "50",
                "--range",
                "100",
            ],
            "larger than the table",
        ),
        (
            vec![
                "repro",
                "oltp",
                "--data-dir",
                d,
                "--policies",
                "classic,fifo",
            ],
            "unknown oltp setting 'fifo': expected one of classic, flifo",
        ),
        (
            vec!["repro", "oltp", "--data-dir", d, "--row-send", "drop"],
            "unknown row-send setting 'drop'",
        ),
        (
            vec!["repro", "oltp", "--data-dir", d, "--reps", "0"],
            "--reps 0 is out of range: 1..=100",
        ),
        (
            vec!["repro", "oltp", "--data-dir", d, "--policies", "auto@0"],
            "the fixed limit after 'auto@' must be a whole number from 1 to 1000",
        ),
        (
            vec![
                "repro",
                "oltp",
                "--data-dir",
                d,
                "--policies",
                "classic,auto@4",
                "--versus-best",
                "3",
            ],
            "--versus-best measures the adaptive auto setting at 256 threads or more",
        ),
        (
            vec![
                "repro",
                "oltp",
                "--data-dir",
                d,
                "--threads",
                "1,64",
                "--versus-best",
                "3",
            ],
            "--versus-best measures the adaptive auto setting",
        ),
        (
            vec!["repro", "oltp", "--data-dir", d, "--versus-best", "101"],
            "--versus-best 101 is out of range: 0..=100",
        ),
        (
            vec![
                "repro",
                "oltp",
                "--data-dir",
                d,
                "--competing-processes",
                "65",
            ],
            "--competing-processes 65 is out of range: 0..=64",
        ),
        (
            vec![
                "repro",
                "oltp",
                "--data-dir",
                d,
                "--competing-processes",
                "1",
                "--client",
                "sysbench",
            ],
            "--competing-processes runs beside the built-in client only",
        ),
        (
            vec!["repro", "oltp", "--data-dir", d, "--row-work-ns", "1000001"],
            "--row-work-ns 1000001 is out of range: 0..=1000000",
        ),
        (
            vec![
                "repro",
                "oltp",
                "--data-dir",
                d,
                "--row-work-ns",
                "100",
                "--client",
                "sysbench",
            ],
            "--row-work-ns applies to the built-in client's engine only",
        ),
        (
            vec!["repro", "mixed", "--data-dir", d, "--policies", "classic"],
            "unknown mixed setting 'classic': expected one of classic-500, classic-10M, flifo, polling",
        ),
        (
            vec!["repro", "pileup", "--data-dir", d, "--reps", "0"],
            "--reps 0 is out of range: 1..=100",
        ),
        (
            vec!["repro", "mixed", "--data-dir", d, "--rows", "0"],
            "--rows must be positive",
        ),
        (
            vec!["repro", "mixed", "--data-dir", d, "--limit", "0"],
            "--limit 0 is out of range",
        ),
        (
            vec!["repro", "pileup", "--data-dir", d, "--tables", "0"],
            "--tables must be",
        ),
        (
            vec!["repro", "pileup", "--data-dir", "/proc/turnstile-nope"],
            "cannot create data directory",
        ),
    ] {
        let out = turnstile(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{args:?}: {err}");
        assert!(out.stdout.is_empty());
    }
    // Validation happens before anything is created.
    assert!(!data.exists());
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn sim_scenarios_run_with_json_and_a_toml_config() {
    let dir = temp("sim");
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("small.toml");
    std::fs::write(
        &cfg,
        "threads = [1, 32]\nseconds = 1.0\nwarmup_seconds = 0.2\n[machine]\ncores = 2\n",
    )
    .unwrap();
    let out = turnstile(&[
        "sim",
        "oltp",
        "--config",
        cfg.to_str().unwrap(),
        "--json",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["params"]["machine"]["cores"], 2);
    assert_eq!(v["runs"].as_array().unwrap().len(), 4);
    assert!(v["events"].as_u64().unwrap() > 0 && v["events_per_s"].as_f64().unwrap() > 0.0);
    assert!(dir.join("sim-oltp-tps.svg").is_file());

    let mva = dir.join("mva.toml");
    std::fs::write(&mva, "n = [1, 4]\ncompletions = 5000\n").unwrap();
    let out = turnstile(&[
        "sim",
        "mva-check",
        "--config",
        mva.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for p in v["points"].as_array().unwrap() {
        for key in ["n", "sim_throughput", "mva_throughput", "rel_err"] {
            assert!(!p[key].is_null(), "missing {key}");
        }
    }
    for s in ["pileup", "tickets"] {
        let out = turnstile(&["sim", s, "--quick", "--json"]);
        assert!(
            out.status.success(),
            "{s}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sim_oltp_and_timer_json_carry_the_fidelity_fields_and_load_a_calibration() {
    let dir = temp("sim-fidelity");
    std::fs::create_dir_all(&dir).unwrap();
    let cal = dir.join("machine.toml");
    std::fs::write(
        &cal,
        "[machine]\ncores = 16\ncontext_switch_ns = 2000\ncache_refill_ns = 5000\nmutex_handoff_ns = 250\nwake_preempt_ns = 1500000\n[measured]\nnote = \"ignored\"\n",
    )
    .unwrap();
    let real = dir.join("real.json");
    std::fs::write(
        &real,
        r#"{"runs":[{"policy":"classic","threads":4,"tps":50.0,"cs_per_txn":10.0,
            "census":{"samples":9,"runnable":3.5,"inside":2.25,"woken":0.5,"queued":0.0,"sleeping":0.75}}]}"#,
    )
    .unwrap();
    let args = [
        "sim",
        "oltp",
        "--quick",
        "--json",
        "--machine",
        cal.to_str().unwrap(),
        "--cores",
        "2",
        "--threads",
        "1,4",
        "--policies",
        "classic,polling",
        "--compare",
        real.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ];
    let out = turnstile(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The calibration's parameters, the command line's cores.
    assert_eq!(v["params"]["machine"]["cores"], 2);
    assert_eq!(v["params"]["machine"]["mutex_handoff_ns"], 250);
    assert_eq!(v["params"]["machine"]["wake_preempt_ns"], 1_500_000);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    for r in runs {
        for key in [
            "policy",
            "threads",
            "tps",
            "cs_per_txn",
            "admissions_per_txn",
            "trace_hash",
            "starved_clients",
            "jain",
            "p99_ms",
            "p999_ms",
            "max_ms",
            "fair_share_ms",
            "idle_pct",
            "little_err",
            "wake_preemptions_per_s",
            "preemptions_per_s",
        ] {
            assert!(!r[key].is_null(), "missing {key} in {r}");
        }
        let c = &r["census"];
        assert!(c["samples"].as_u64().unwrap() > 0, "{r}");
        let threads = r["threads"].as_f64().unwrap();
        for key in ["runnable", "inside", "woken", "queued", "sleeping"] {
            let v = c[key].as_f64().unwrap();
            assert!((0.0..=threads).contains(&v), "census {key} = {v} in {r}");
        }
    }
    assert_eq!(runs[0]["row_send"], "force-exit");
    assert_eq!(runs[0]["gate_mutex"], true);
    assert_eq!(runs[2]["gate_mutex"], false, "polling has no mutex");

    // The people's report puts the census beside the real one where the report has it.
    let md = turnstile(
        &args
            .iter()
            .filter(|a| **a != "--json")
            .copied()
            .collect::<Vec<_>>(),
    );
    assert!(md.status.success());
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("Where the threads were"), "{md}");
    assert!(md.contains("; sim / real:"), "{md}");
    assert!(md.contains(" / 3.5 |"), "the real runnable figure: {md}");
    assert!(md.contains(" / 2.2 |") || md.contains(" / 2.3 |"), "{md}");

    let out = turnstile(&["sim", "timer", "--quick", "--json", "--threads", "32"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["points"][0];
    for side in ["mutex_gate", "timer_gate"] {
        for key in [
            "policy",
            "threads",
            "tps",
            "cs_per_txn",
            "admissions_per_txn",
        ] {
            assert!(!p[side][key].is_null(), "missing {side}.{key}");
        }
    }
    assert!(p["gain_pct"].is_number());

    // --seeds is honoured everywhere: one report per seed.
    let cfg = dir.join("pileup.toml");
    std::fs::write(&cfg, "tables = [4]\nseconds = 0.5\n").unwrap();
    let out = turnstile(&[
        "sim",
        "pileup",
        "--json",
        "--seeds",
        "2",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v.as_array().map(|a| a.len()), Some(2));

    // Flags a scenario does not use are refused, not ignored.
    let out = turnstile(&["sim", "pileup", "--policies", "classic"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--policies applies to `sim oltp` only"));
    let out = turnstile(&["sim", "oltp", "--machine", real.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a calibration"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sim_oltp_runs_auto_beside_its_fixed_limits_and_says_how_near_the_best_it_came() {
    let dir = temp("sim-auto-fixed");
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("short.toml");
    std::fs::write(&cfg, "seconds = 0.5\nwarmup_seconds = 0.1\n").unwrap();
    let args = [
        "sim",
        "oltp",
        "--config",
        cfg.to_str().unwrap(),
        "--cores",
        "2",
        "--threads",
        "32",
        "--policies",
        "auto,auto@1,auto@4",
        "--out",
        dir.to_str().unwrap(),
    ];
    let out = turnstile_ok(&args);
    let md = String::from_utf8_lossy(&out.stdout);
    let line = md
        .lines()
        .find(|l| l.starts_with("auto at 32 threads: "))
        .unwrap_or_else(|| panic!("no versus line: {md}"));
    assert!(line.contains("% of the best fixed limit (auto@"), "{line}");
    assert!(line.contains("its limit ended at "), "{line}");

    let json: Vec<&str> = args.iter().copied().chain(["--json"]).collect();
    let out = turnstile_ok(&json);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    let names: Vec<_> = runs.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(names, ["auto", "auto@1", "auto@4"]);
    assert_eq!(runs[1]["limit_end"], 1);
    assert_eq!(runs[2]["limit_end"], 4);
    assert!(runs[0]["limit_end"].as_u64().unwrap() >= 2, "{}", runs[0]);

    let out = turnstile(&["sim", "oltp", "--policies", "auto@0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("whole number from 1 to"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sim_bad_config_exits_2_naming_the_problem() {
    let dir = temp("sim-bad");
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("bad.toml");
    std::fs::write(&cfg, "thread = [1]\n").unwrap();
    let out = turnstile(&["sim", "oltp", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field `thread`"));
    let out = turnstile(&["sim", "oltp", "--config", "/nonexistent.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unwritable_report_folder_is_refused_before_the_run() {
    let dir = temp("unwritable-out");
    std::fs::create_dir_all(&dir).unwrap();
    // A folder under a regular file cannot be created.
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let out_dir = file.join("sub");
    let o = out_dir.to_str().unwrap();
    let data = dir.join("data");
    let d = data.to_str().unwrap();
    for args in [
        vec!["sim", "oltp", "--quick", "--threads", "1", "--out", o],
        vec![
            "repro",
            "oltp",
            "--quick",
            "--threads",
            "1",
            "--policies",
            "classic",
            "--data-dir",
            d,
            "--out",
            o,
        ],
        vec![
            "repro",
            "pileup",
            "--quick",
            "--tables",
            "1",
            "--data-dir",
            d,
            "--out",
            o,
        ],
        vec!["repro", "mixed", "--quick", "--data-dir", d, "--out", o],
    ] {
        let out = turnstile(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("cannot create") && err.contains("sub"),
            "{args:?}: {err}"
        );
        // Refused before the run: no table was built in the data directory.
        assert!(!data.join("turnstile.redb").exists(), "{args:?} ran");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sim_uses_the_configs_seed_and_says_when_compare_matched_nothing() {
    let dir = temp("sim-seed");
    std::fs::create_dir_all(&dir).unwrap();
    // The MVA check draws exponential demands: its seed shows in its figures.
    let run = |seed: u64| {
        let cfg = dir.join(format!("seed-{seed}.toml"));
        std::fs::write(
            &cfg,
            format!("seed = {seed}\nn = [4]\ncompletions = 2000\n"),
        )
        .unwrap();
        let out = turnstile_ok(&[
            "sim",
            "mva-check",
            "--config",
            cfg.to_str().unwrap(),
            "--json",
        ]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            v["params"]["seed"], seed,
            "the report names the seed it ran"
        );
        v["points"][0]["sim_throughput"].as_f64().unwrap()
    };
    assert_ne!(run(1), run(7), "the config's seed is the run's");
    let empty = dir.join("empty.json");
    std::fs::write(&empty, r#"{"runs": []}"#).unwrap();
    let out = turnstile_ok(&[
        "sim",
        "oltp",
        "--quick",
        "--threads",
        "1",
        "--compare",
        empty.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("No point compared"), "{text}");
    assert!(!text.contains("Largest TPS error"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn metrics_file_holds_the_prometheus_text_of_the_last_gate_after_repro_and_bench_gate() {
    let dir = temp("metrics-file");
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("data");
    let file = dir.join("gate.prom");
    let out = turnstile(&[
        "repro",
        "tickets",
        "--data-dir",
        data.to_str().unwrap(),
        "--rows",
        "3000",
        "--policies",
        "classic",
        "--quick",
        "--json",
        "--metrics-file",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&file).expect("the metrics file exists");
    assert!(text.contains("# TYPE turnstile_gate_admissions_total counter"));
    assert!(
        text.contains("turnstile_gate_admissions_total{gate=\"tickets/classic/"),
        "{text}"
    );
    assert!(text.contains("turnstile_gate_wait_seconds_bucket{"));
    assert!(
        !dir.join("gate.prom.tmp").exists(),
        "the temporary file is renamed"
    );

    let mut args = TINY.to_vec();
    args.extend([
        "--policies",
        "flifo",
        "--metrics-file",
        file.to_str().unwrap(),
    ]);
    let out = turnstile(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains(
            "turnstile_gate_info{gate=\"bench-gate/flifo/3 threads\",policy=\"flifo\"} 1"
        ),
        "{text}"
    );
    assert!(text.contains("turnstile_gate_admissions_total{gate=\"bench-gate/flifo/"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unwritable_metrics_file_exits_2_before_running() {
    let out = turnstile(&[
        "bench",
        "gate",
        "--quick",
        "--metrics-file",
        "/proc/turnstile-nope/gate.prom",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write metrics file"));
}

#[test]
fn calibrate_bad_input_exits_2_before_measuring() {
    for (bad, expect) in [
        (
            vec!["--cores", "0"],
            "--cores must be between 1 and 4096 (got 0)",
        ),
        (
            vec!["--cores", "5000"],
            "--cores must be between 1 and 4096",
        ),
        (vec!["--cores", "two"], "invalid value"),
        (
            vec!["--out", "/proc/turnstile-nope/machine.toml"],
            "cannot create folder /proc/turnstile-nope",
        ),
    ] {
        let mut args = vec!["calibrate", "--quick"];
        args.extend(bad.iter().copied());
        let out = turnstile(&args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{bad:?}: {err}");
        assert!(!err.contains("[1/"), "{bad:?} started measuring: {err}");
        assert!(out.stdout.is_empty(), "nothing half-written on stdout");
    }
}

#[test]
fn serve_answers_a_client_and_stops_on_ctrl_c() {
    use std::io::{BufRead, Read};
    let dir = temp("serve");
    let sock = dir.with_extension("sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(["serve", "--port", "0", "--policy", "classic"])
        .args(["--data-dir", dir.to_str().unwrap()])
        .args(["--socket", sock.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run turnstile serve");
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    // "turnstile serve: listening on 127.0.0.1:PORT and SOCKET (…)"
    let addr = line
        .split_whitespace()
        .nth(4)
        .unwrap_or_else(|| panic!("{line}"));
    assert!(line.contains("policy classic"), "{line}");
    let mut t = std::net::TcpStream::connect(addr).unwrap();
    let mut head = [0u8; 5];
    t.read_exact(&mut head).unwrap();
    assert_eq!(head[4], 10, "protocol version 10 greeting");
    assert!(sock.exists());
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "serve did not stop on SIGINT"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert!(!sock.exists(), "the socket file is removed");
    let _ = std::fs::remove_dir_all(dir);
}

/// Reads `child`'s stderr (taken from it) up to a progress line containing `marker`, then
/// sends it SIGINT. Returns the stderr reader: keep it until the child has exited (closed,
/// the child's next message to stderr fails, and it panics).
#[must_use]
fn interrupt_after_progress(
    child: &mut std::process::Child,
    marker: &str,
) -> std::io::BufReader<std::process::ChildStderr> {
    use std::io::BufRead;
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains(marker) {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "no progress line");
    }
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    err
}

#[test]
fn ctrl_c_during_an_oltp_point_exits_130_without_a_report() {
    let dir = temp("oltp-ctrl-c");
    let mut child = spawn_repro_oltp(
        &dir,
        &["--rows", "2000", "--range", "100", "--threads", "2"],
        &["--seconds", "3", "--json"],
    );
    // After the progress line of the only point: its warm-up and window follow. Whether the
    // signal lands in the warm-up or the window, the point's figures would be cut short:
    // either way the run must end interrupted.
    let _stderr = interrupt_after_progress(&mut child, "2 threads");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert!(out.stdout.is_empty(), "no report of a cut window");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn ctrl_c_during_a_table_load_exits_130_without_loading_the_rest() {
    // The load of a 2,000,000-row table (40 batches) stops at the batch after the signal,
    // rather than loading on and stopping at the first statement's end.
    let dir = temp("load-ctrl-c");
    let mut child = spawn_repro_oltp(
        &dir,
        &["--rows", "2000000", "--threads", "1"],
        &["--seconds", "1"],
    );
    // The first progress line of the load (10 %, the 4th batch).
    let mut stderr = interrupt_after_progress(&mut child, "loading rows");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(!rest.contains("(100%)"), "the load went on: {rest}");
    assert!(!rest.contains("1 threads"), "a point ran: {rest}");
    assert!(rest.contains("interrupted"), "{rest}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn serve_bad_input_exits_2_with_a_clear_message() {
    for (bad, expect) in [
        (
            vec!["--fsync-ms", "20000"],
            "--fsync-ms 20000 is out of range",
        ),
        (vec!["--policy", "lifo"], "invalid value 'lifo'"),
        (vec!["--row-send", "never"], "invalid value 'never'"),
        (
            vec!["--concurrency", "5000"],
            "limit = 5000 is out of range",
        ),
        (
            vec!["--max-connections", "0"],
            "--max-connections must be at least 1",
        ),
    ] {
        let mut args = vec!["serve", "--port", "0"];
        args.extend(bad.iter().copied());
        let out = turnstile(&args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{bad:?}: {err}");
    }
}

/// Every progress line's `[i/n]` has 1 ≤ i ≤ n, and the last step is the total.
fn assert_steps_within_total(stderr: &str) {
    let steps: Vec<(usize, usize)> = stderr
        .lines()
        .filter_map(|l| {
            let (i, n) = l.strip_prefix('[')?.split_once(']')?.0.split_once('/')?;
            Some((i.parse().ok()?, n.parse().ok()?))
        })
        .collect();
    assert!(!steps.is_empty(), "no progress lines: {stderr}");
    assert!(
        steps.iter().all(|&(i, n)| 1 <= i && i <= n),
        "a step past the total: {stderr}"
    );
    let &(last, total) = steps.last().unwrap();
    assert_eq!(last, total, "{stderr}");
}

/// `turnstile repro oltp` of the `unlimited` policy with `args` and `more`, its data and report
/// under `dir`, stdout and stderr piped.
fn spawn_repro_oltp(dir: &std::path::Path, args: &[&str], more: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(["repro", "oltp", "--policies", "unlimited"])
        .args(args)
        .args(more)
        .args(["--data-dir", dir.join("data").to_str().unwrap()])
        .args(["--out", dir.join("out").to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run turnstile repro oltp")
}
