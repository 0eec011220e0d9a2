//! Administration: the server-wide gate cell (live policy and tickets changes), the
//! `turnstile_*` variables, and the rows of `SHOW … STATUS` / `SHOW … VARIABLES`.
//!
//! The library has no live switch for the policy or the tickets: a gate is built for one
//! configuration. So the server holds the gate in force in a [`GateCell`] with a generation
//! number. `SET GLOBAL turnstile_policy` or `turnstile_tickets` builds a new gate from the
//! changed configuration and bumps the generation; each connection compares the generation
//! at the start of its next statement and, between statements, rebinds its engine connection
//! to the new gate (`Connection::rebind`: its open transaction is kept). Statements already
//! running finish on the old gate, which is dropped with its last session. The new gate's
//! counters start at zero. `SET GLOBAL turnstile_concurrency` changes the limit of the gate
//! in force at once (`Gate::set_limit`), with no new gate.

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use turnstile::{Gate, GateConfig, Policy};
use turnstile_engine::{CommitMode, RowSend};

use crate::Shared;

/// The gate in force, with a generation number that changes when it is replaced.
pub struct GateCell {
    current: Mutex<(Gate, u64)>,
    generation: AtomicU64,
}

impl GateCell {
    /// A cell holding a gate built from `config`.
    pub fn new(config: GateConfig) -> Result<GateCell, turnstile::ConfigError> {
        Ok(GateCell {
            current: Mutex::new((Gate::new(config)?, 0)),
            generation: AtomicU64::new(0),
        })
    }

    /// The generation in force (cheap: one atomic load).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The gate in force and its generation.
    pub fn current(&self) -> (Gate, u64) {
        let c = self.current.lock().expect("gate cell");
        (c.0.clone(), c.1)
    }

    /// Replaces the gate with one built from `f(current configuration)`, keeping the limit in
    /// force (it may have been changed live). Returns the new gate.
    pub fn rebuild(
        &self,
        f: impl FnOnce(GateConfig, u32) -> GateConfig,
    ) -> Result<Gate, turnstile::ConfigError> {
        let mut c = self.current.lock().expect("gate cell");
        let config = f(c.0.config(), c.0.limit());
        let gate = Gate::new(config)?;
        c.0 = gate.clone();
        c.1 += 1;
        self.generation.store(c.1, Ordering::Release);
        Ok(gate)
    }
}

/// Why a `SET GLOBAL` was refused.
pub enum SetError {
    /// 1193: no such variable.
    Unknown(String),
    /// 1232: the value has the wrong type.
    WrongType(String),
    /// 1231: the value is out of range or not one of the names.
    WrongValue(String),
}

/// A value given to `SET GLOBAL`.
pub enum SetValue {
    /// A number.
    Int(i64),
    /// A string or a bare word.
    Str(String),
}

impl SetValue {
    fn text(&self) -> String {
        match self {
            SetValue::Int(i) => i.to_string(),
            SetValue::Str(s) => s.clone(),
        }
    }
}

/// The global variables `SET GLOBAL` may change.
pub const SETTABLE: [&str; 5] = [
    "turnstile_policy",
    "turnstile_concurrency",
    "turnstile_tickets",
    "turnstile_row_send",
    "turnstile_commit_mode",
];

fn wrong_value(name: &str, v: &SetValue, why: impl std::fmt::Display) -> SetError {
    SetError::WrongValue(format!(
        "Variable '{name}' can't be set to the value of '{}': {why}",
        v.text()
    ))
}

fn int_value(name: &str, v: &SetValue) -> Result<u32, SetError> {
    match v {
        SetValue::Int(i) => u32::try_from(*i).map_err(|_| wrong_value(name, v, "out of range")),
        SetValue::Str(_) => Err(SetError::WrongType(format!(
            "Incorrect argument type to variable '{name}': a number is expected"
        ))),
    }
}

fn str_value<'a>(name: &str, v: &'a SetValue) -> Result<&'a str, SetError> {
    match v {
        SetValue::Str(s) => Ok(s),
        SetValue::Int(_) => Err(SetError::WrongType(format!(
            "Incorrect argument type to variable '{name}': a name is expected"
        ))),
    }
}

/// A variable's compiled-in default, what `SET GLOBAL name = DEFAULT` sets (as MySQL's
/// `DEFAULT` is the compiled default, not the value the server started with).
pub(crate) fn default_value(shared: &Shared, name: &str) -> Option<SetValue> {
    let defaults = GateConfig::default();
    Some(match name {
        "turnstile_policy" => SetValue::Str(defaults.policy.name().to_string()),
        "turnstile_tickets" => SetValue::Int(defaults.tickets.into()),
        // The default limit of the policy in force (`auto`'s starts at the CPUs).
        "turnstile_concurrency" => {
            let policy = shared.gate.current().0.config().policy;
            SetValue::Int(GateConfig::new(policy).limit.into())
        }
        "turnstile_row_send" => SetValue::Str(RowSend::default().name().to_string()),
        "turnstile_commit_mode" => SetValue::Str(CommitMode::default().name().to_string()),
        _ => return None,
    })
}

/// Runs `SET GLOBAL name = value`.
pub(crate) fn set_global(shared: &Shared, name: &str, v: &SetValue) -> Result<(), SetError> {
    match name {
        "turnstile_policy" => {
            let policy = Policy::from_str(str_value(name, v)?).map_err(|e| {
                let names: Vec<_> = Policy::ALL.iter().map(|p| p.name()).collect();
                wrong_value(name, v, format!("{e} (policies: {})", names.join(", ")))
            })?;
            shared
                .gate
                .rebuild(|old, limit| {
                    // The settings the new policy reads carry over; the others start at
                    // their defaults (a setting a policy does not read is refused).
                    GateConfig::new(policy).innodb_settings(limit, old.tickets, old.sleep_delay)
                })
                .map_err(|e| wrong_value(name, v, e))?;
        }
        "turnstile_tickets" => {
            let tickets = int_value(name, v)?;
            shared
                .gate
                .rebuild(|old, limit| old.limit(limit).tickets(tickets))
                .map_err(|e| wrong_value(name, v, e))?;
        }
        "turnstile_concurrency" => {
            let limit = int_value(name, v)?;
            shared
                .gate
                .current()
                .0
                .set_limit(limit)
                .map_err(|e| wrong_value(name, v, e))?;
        }
        "turnstile_row_send" => {
            let rs = RowSend::from_str(str_value(name, v)?).map_err(|e| wrong_value(name, v, e))?;
            let i = RowSend::ALL.iter().position(|r| *r == rs).expect("listed");
            shared.row_send.store(i as u32, Ordering::Relaxed);
        }
        "turnstile_commit_mode" => {
            let m =
                CommitMode::from_str(str_value(name, v)?).map_err(|e| wrong_value(name, v, e))?;
            let i = CommitMode::ALL
                .iter()
                .position(|x| *x == m)
                .expect("listed");
            shared.commit_mode.store(i as u32, Ordering::Relaxed);
        }
        _ => {
            return Err(SetError::Unknown(format!(
                "Unknown system variable '{name}' (SET GLOBAL accepts {})",
                SETTABLE.join(", ")
            )))
        }
    }
    Ok(())
}

/// The server's version string (`@@version`, the handshake).
pub const VERSION: &str = concat!("8.0.0-turnstile-", env!("CARGO_PKG_VERSION"));
/// `@@version_comment`.
pub const VERSION_COMMENT: &str = "turnstile serve: the turnstile engine behind the MySQL protocol";

/// A variable's value, for `SELECT @@name` and `SHOW VARIABLES`.
pub(crate) fn variable(shared: &Shared, name: &str) -> Option<String> {
    let gate = shared.gate.current().0;
    Some(match name {
        "turnstile_policy" => gate.policy().name().to_string(),
        "turnstile_concurrency" => gate.limit().to_string(),
        "turnstile_tickets" => gate.config().tickets.to_string(),
        "turnstile_row_send" => shared.row_send().name().to_string(),
        "turnstile_commit_mode" => shared.commit_mode().name().to_string(),
        "turnstile_fsync_delay_ms" => shared.config.engine.fsync_delay.as_millis().to_string(),
        "version" => VERSION.to_string(),
        "version_comment" => VERSION_COMMENT.to_string(),
        "max_allowed_packet" => shared.config.max_packet.to_string(),
        "max_connections" => shared.config.max_connections.to_string(),
        "autocommit" => "1".to_string(),
        "transaction_isolation" | "tx_isolation" => "READ-COMMITTED".to_string(),
        "innodb_lock_wait_timeout" | "lock_wait_timeout" => {
            shared.engine.lock_wait_timeout().as_secs().to_string()
        }
        "thread_handling" => "one-thread-per-connection".to_string(),
        "character_set_client" | "character_set_connection" | "character_set_results" => {
            "utf8mb4".to_string()
        }
        "sql_mode" => "STRICT_TRANS_TABLES".to_string(),
        _ => return None,
    })
}

/// Every variable `SHOW VARIABLES` lists, in order.
const VARIABLES: [&str; 17] = [
    "autocommit",
    "character_set_client",
    "character_set_connection",
    "character_set_results",
    "innodb_lock_wait_timeout",
    "max_allowed_packet",
    "max_connections",
    "sql_mode",
    "thread_handling",
    "transaction_isolation",
    "turnstile_commit_mode",
    "turnstile_concurrency",
    "turnstile_fsync_delay_ms",
    "turnstile_policy",
    "turnstile_row_send",
    "turnstile_tickets",
    "version",
];

/// `SHOW VARIABLES [LIKE p]` rows.
pub(crate) fn variables(shared: &Shared, pattern: Option<&str>) -> Vec<(String, String)> {
    VARIABLES
        .iter()
        .chain(["version_comment"].iter())
        .filter(|n| pattern.is_none_or(|p| like(p, n)))
        .filter_map(|n| variable(shared, n).map(|v| (n.to_string(), v)))
        // A boolean reads `1` as `@@autocommit` and `ON` in this listing, as in MySQL.
        .map(|(n, v)| match (n.as_str(), v.as_str()) {
            ("autocommit", "1") => (n, "ON".to_string()),
            _ => (n, v),
        })
        .collect()
}

/// `SHOW GLOBAL STATUS [LIKE p]` rows: the gate's counters and gauges under their Prometheus
/// names (`turnstile::metrics`), a few more gauges, the engine's counters, and the server's.
pub(crate) fn status(shared: &Shared, pattern: Option<&str>) -> Vec<(String, String)> {
    let gate = shared.gate.current().0;
    let stats = gate.stats();
    let mut rows: Vec<(String, String)> = Vec::new();
    // One sample per line: `name{gate="…"} value`; histogram buckets are left out.
    for line in stats.to_prometheus("server").lines() {
        if line.starts_with('#') || line.contains("_bucket") {
            continue;
        }
        let Some((name_labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let name = name_labels.split('{').next().unwrap_or(name_labels);
        if name == "turnstile_gate_info" {
            continue;
        }
        rows.push((name.to_string(), value.to_string()));
    }
    rows.push(("turnstile_gate_policy".into(), gate.policy().name().into()));
    rows.push((
        "turnstile_gate_generation".into(),
        shared.gate.generation().to_string(),
    ));
    let e = &shared.engine.stats;
    let r = Ordering::Relaxed;
    for (n, v) in [
        ("commits", e.commits.load(r)),
        ("rollbacks", e.rollbacks.load(r)),
        ("fsyncs", e.fsyncs.load(r)),
        ("fsync_ns", e.fsync_ns.load(r)),
        ("group_commits", e.group_commits.load(r)),
        ("group_committed", e.group_committed.load(r)),
        ("commit_waiting", e.commit_waiting.load(r) as u64),
        (
            "commit_waiting_inside",
            e.commit_waiting_inside.load(r) as u64,
        ),
        ("lock_waits", e.lock_waits.load(r)),
        ("deadlocks", e.deadlocks.load(r)),
        ("lock_wait_timeouts", e.lock_wait_timeouts.load(r)),
        ("rows_read", e.rows_read.load(r)),
        ("row_locks_held", shared.engine.row_locks_held() as u64),
    ] {
        rows.push((format!("turnstile_engine_{n}"), v.to_string()));
    }
    let s = &shared.stats;
    let (workers, idle) = shared.pool_workers();
    for (n, v) in [
        ("connected", s.connected.load(Ordering::SeqCst) as u64),
        ("pool_threads", workers as u64),
        ("pool_idle_threads", idle as u64),
        ("connections", s.connections.load(r)),
        ("refused_connections", s.refused_connections.load(r)),
        ("aborted_connections", s.aborted_connections.load(r)),
        ("panics", s.panics.load(r)),
        ("statements", s.statements.load(r)),
        ("not_supported", s.not_supported.load(r)),
        ("errors", s.errors.load(r)),
        ("uptime_s", shared.started.elapsed().as_secs()),
    ] {
        rows.push((format!("turnstile_server_{n}"), v.to_string()));
    }
    rows.retain(|(n, _)| pattern.is_none_or(|p| like(p, n)));
    rows
}

/// SQL `LIKE` as MySQL matches variable names: `%` any run, `_` one character, `\` escapes,
/// case-insensitive. Iterative, with one backtrack point (the last `%`): O(pattern × name)
/// steps and no recursion, whatever the client sends. A recursive matcher overflowed a
/// connection thread's stack (aborting the server) on a pattern of a million `%`, and took
/// exponential time on `%_%_…%_!`.
pub fn like(pattern: &str, s: &str) -> bool {
    like_in(pattern, s, true)
}

/// [`like`] for table and database names, which MySQL matches case-sensitively where the
/// file system is (`lower_case_table_names=0`, Linux's default).
pub fn like_name(pattern: &str, s: &str) -> bool {
    like_in(pattern, s, false)
}

fn like_in(pattern: &str, s: &str, fold_case: bool) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum P {
        Any,
        One,
        Lit(char),
    }
    let mut p = Vec::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        p.push(match c {
            '%' => P::Any,
            '_' => P::One,
            '\\' => P::Lit(chars.next().unwrap_or('\\')),
            c => P::Lit(c),
        });
    }
    let s: Vec<char> = s.chars().collect();
    let (mut pi, mut si) = (0, 0);
    // The last `%` seen and the name position it is tried to end at.
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        match p.get(pi) {
            Some(P::One) => (pi, si) = (pi + 1, si + 1),
            Some(P::Lit(c)) if s[si] == *c || fold_case && s[si].eq_ignore_ascii_case(c) => {
                (pi, si) = (pi + 1, si + 1)
            }
            Some(P::Any) => {
                star = Some((pi, si));
                pi += 1;
            }
            _ => match star {
                // The last `%` takes one more character; everything after it is tried again.
                Some((sp, ss)) => {
                    star = Some((sp, ss + 1));
                    (pi, si) = (sp + 1, ss + 1);
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&x| x == P::Any)
}

#[cfg(test)]
mod tests {
    use super::like;

    #[test]
    fn like_matches_as_mysql_does_for_names() {
        assert!(like("turnstile%", "turnstile_gate_admissions_total"));
        assert!(like("TURNSTILE%", "turnstile_policy"));
        assert!(like("%policy", "turnstile_policy"));
        assert!(like("turnstile\\_policy", "turnstile_policy"));
        assert!(!like("turnstile\\_policy", "turnstileXpolicy"));
        assert!(like("turnstile_policy", "turnstileXpolicy"));
        assert!(!like("turnstile%", "version"));
        assert!(like("%", ""));
    }

    /// The same matching by dynamic programming over (pattern, name) positions.
    fn like_by_table(pattern: &str, s: &str) -> bool {
        let mut p = Vec::new(); // (is_any, is_one, literal)
        let mut it = pattern.chars();
        while let Some(c) = it.next() {
            p.push(match c {
                '%' => (true, false, ' '),
                '_' => (false, true, ' '),
                '\\' => (false, false, it.next().unwrap_or('\\')),
                c => (false, false, c),
            });
        }
        let s: Vec<char> = s.chars().collect();
        // m[i][j]: p[i..] matches s[j..].
        let mut m = vec![vec![false; s.len() + 1]; p.len() + 1];
        m[p.len()][s.len()] = true;
        for i in (0..p.len()).rev() {
            for j in (0..=s.len()).rev() {
                let (any, one, c) = p[i];
                m[i][j] = if any {
                    m[i + 1][j] || (j < s.len() && m[i][j + 1])
                } else {
                    j < s.len() && (one || s[j].eq_ignore_ascii_case(&c)) && m[i + 1][j + 1]
                };
            }
        }
        m[0][0]
    }

    #[test]
    fn like_agrees_with_a_table_of_every_pattern_and_name_position() {
        // Every pattern of up to 5 symbols over %, _, \, a, b against every name of up to
        // 5 letters over a, b, A.
        let syms = ['%', '_', '\\', 'a', 'b'];
        let letters = ['a', 'b', 'A'];
        let words = |alphabet: &[char], n: usize| -> Vec<String> {
            let mut all = vec![String::new()];
            let mut last = vec![String::new()];
            for _ in 0..n {
                last = last
                    .iter()
                    .flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}")))
                    .collect();
                all.extend(last.iter().cloned());
            }
            all
        };
        let names = words(&letters, 5);
        for pattern in words(&syms, 5) {
            for name in &names {
                assert_eq!(
                    like(&pattern, name),
                    like_by_table(&pattern, name),
                    "{pattern:?} against {name:?}"
                );
            }
        }
    }

    #[test]
    fn a_hostile_like_pattern_neither_overflows_the_stack_nor_takes_exponential_time() {
        // A million `%` recursing once each would overflow a 1 MiB connection thread; 25 ×
        // `%_` is ~10^12 steps for a backtracking matcher against a 44-character name.
        let percent = "%".repeat(1_000_000);
        let pairs = format!("{}!", "%_".repeat(25));
        let matched = std::thread::Builder::new()
            .stack_size(crate::THREAD_STACK)
            .spawn(move || {
                (
                    like(&percent, "turnstile_policy"),
                    like(&pairs, "turnstile_server_refused_connections_total_x"),
                )
            })
            .unwrap()
            .join()
            .expect("no stack overflow");
        assert_eq!(matched, (true, false));
    }
}
