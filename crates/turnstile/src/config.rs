//! Gate configuration: the policy and the four InnoDB settings, validated once.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::{ConfigError, Unit};

/// Which admission policy a [`crate::Gate`] runs. Each one is faithful to the InnoDB or MySQL
/// version named; `docs/ARCHITECTURE.md` and the `policy` module say exactly how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Policy {
    /// InnoDB 5.0–5.5: one mutex, a FIFO of wait slots, one sleep before queueing, direct
    /// hand-off of a freed slot to the first waiter.
    Classic,
    /// InnoDB 5.6–8.0: atomic counters, no queue; sleep and poll with an adaptive sleep delay.
    Polling,
    /// MySQL 5.4: atomic counter; yield once, sleep 10 ms at most twice, then enter regardless.
    Timer,
    /// `classic` plus the LIFO rule of `innodb_thread_lifo` (admit while lifo-running <
    /// fifo-pending).
    Flifo,
    /// No limit: every enter is admitted; only the bookkeeping runs.
    Unlimited,
    /// The gate to deploy: a time quantum instead of row tickets, hot-first hand-off that
    /// never starves a waiter, a limit that adapts from the CPUs it can measure, waits that
    /// free the slot and work that keeps it, optional overload protection. The default
    /// ([`GateConfig::default`]); see `policy::auto` and docs/ARCHITECTURE.md.
    Auto,
}

impl Policy {
    /// Every policy, in the order reports list them.
    pub const ALL: [Policy; 6] = [
        Policy::Classic,
        Policy::Polling,
        Policy::Timer,
        Policy::Flifo,
        Policy::Unlimited,
        Policy::Auto,
    ];

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Classic => "classic",
            Policy::Polling => "polling",
            Policy::Timer => "timer",
            Policy::Flifo => "flifo",
            Policy::Unlimited => "unlimited",
            Policy::Auto => "auto",
        }
    }

    /// The most threads this policy may have running inside at once for a given limit, or
    /// `None` when it has no bound (`timer`'s forced entries, `unlimited`, or limit 0). Like
    /// InnoDB, every counted policy lets a thread back in after a row-lock wait without
    /// checking; the bound holds for threads that do not step out for row-lock waits.
    /// `auto`'s bound is `2 × limit` for the limit in force (which adapts): its extra
    /// admissions (sessions back from a declared wait, newcomers running in a waking
    /// waiter's place) never outnumber the limit. A slot lent while its holder blocked on a
    /// turnstile lock comes back within another `limit` above that.
    pub fn max_running(self, limit: u32) -> Option<u32> {
        if limit == 0 {
            return None;
        }
        match self {
            Policy::Classic | Policy::Polling => Some(limit),
            Policy::Flifo | Policy::Auto => Some(2 * limit),
            Policy::Timer | Policy::Unlimited => None,
        }
    }
}

impl Policy {
    /// Whether this policy's decisions read the [`GateConfig`] setting named `field` (its
    /// setter's name). `limit` and `queue_timeout` apply to every policy; a setting a policy
    /// does not read is refused by [`GateConfig::validate`] unless it keeps its default, so
    /// that nothing is accepted and then ignored.
    pub fn uses(self, field: &str) -> bool {
        match field {
            // `auto` grants a time quantum instead.
            "tickets" => self != Policy::Auto,
            // `timer` sleeps its fixed 10 ms; `auto` and `unlimited` never sleep to retry.
            "sleep_delay" => matches!(self, Policy::Classic | Policy::Flifo | Policy::Polling),
            "adaptive_max_sleep_delay" => self == Policy::Polling,
            "quantum" | "age_cap" | "adaptive_limit" | "max_waiting" => self == Policy::Auto,
            _ => true,
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| ConfigError::UnknownPolicy(s.to_string()))
    }
}

/// Largest accepted `limit`: InnoDB 5.5–8.0 accept `innodb_thread_concurrency` in 0..=1000.
pub const MAX_LIMIT: u32 = 1000;
/// Largest accepted sleep delay: InnoDB 5.6 caps `innodb_thread_sleep_delay` at 1,000,000 µs.
pub const MAX_SLEEP_DELAY: Duration = Duration::from_secs(1);
/// Largest accepted adaptive maximum: `innodb_adaptive_max_sleep_delay` accepts 0..=1,000,000 µs.
pub const MAX_ADAPTIVE_SLEEP_DELAY: Duration = Duration::from_secs(1);

/// The settings of a gate. Build with [`GateConfig::new`] and the setters, then hand it to
/// [`crate::Gate::new`], which validates it. A setting the policy does not read
/// ([`Policy::uses`]) must keep its default: set otherwise, it is refused
/// ([`ConfigError::NotForPolicy`]) rather than ignored.
///
/// Defaults are InnoDB's: tickets 500 (`innodb_concurrency_tickets` up to 5.5, and the seeds'
/// setting), sleep delay 10 ms (`innodb_thread_sleep_delay` = 10000 µs), adaptive maximum 150 ms
/// (`innodb_adaptive_max_sleep_delay` = 150000 µs, 5.6). The default limit is 8, the value
/// `innodb_thread_concurrency` had by default in 5.0 and 5.1 and the one seed 004 ran with; 0
/// means unlimited.
///
/// ```
/// use std::time::Duration;
/// use turnstile::{GateConfig, Policy};
///
/// let config = GateConfig::new(Policy::Polling)
///     .limit(16)
///     .tickets(500)
///     .sleep_delay(Duration::from_micros(100));
/// assert!(config.validate().is_ok());
/// let err = config.limit(5000).validate().unwrap_err();
/// assert_eq!(err.to_string(), "limit = 5000 is out of range: accepted values are 0..=1000");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct GateConfig {
    /// The admission policy.
    pub policy: Policy,
    /// Threads allowed inside at once (`innodb_thread_concurrency`); 0 = no limit.
    pub limit: u32,
    /// Tickets granted at admission (`innodb_concurrency_tickets`); each later enter spends one.
    pub tickets: u32,
    /// Sleep before joining the queue (`classic`, `flifo`) or between polls (`polling`, the
    /// starting value of the adaptive delay). `Duration::ZERO` disables the sleep. `polling`
    /// counts it in whole microseconds, InnoDB's unit: under 1 µs it polls without sleeping.
    pub sleep_delay: Duration,
    /// Upper bound of `polling`'s adaptive sleep delay (`innodb_adaptive_max_sleep_delay`);
    /// `Duration::ZERO` turns adaptation off.
    pub adaptive_max_sleep_delay: Duration,
    /// `auto`: how long an admission keeps its slot between calls (instead of tickets).
    pub quantum: Duration,
    /// `auto`: waiters older than this are served oldest first.
    pub age_cap: Duration,
    /// `auto`: the limit adapts (`true`, the default) or stays where it is set.
    pub adaptive_limit: bool,
    /// `auto`: refuse to queue more than this many sessions ([`crate::GateError::Overloaded`]);
    /// 0 (the default) queues without a cap.
    pub max_waiting: u32,
    /// Every policy: a session not admitted within this time is refused
    /// ([`crate::GateError::Overloaded`], its reason `QueueTimeout`), whether it waited queued
    /// or sleeping before a retry; `None` (the default) waits as long as it takes. Zero
    /// refuses at once whatever would wait (a try-enter).
    pub queue_timeout: Option<Duration>,
}

/// How long an admission keeps its slot between calls. At its end the holder gives the slot
/// up only to a waiter that queued before the quantum began (`auto`'s `yields_quantum`),
/// one the other slots' turnover has not served. A holder that gives way queues behind the
/// waiters already there and loses at least an age cap before the oldest is served; ten age
/// caps keep that loss near a tenth of a quantum. The price: a short statement may wait about
/// two quanta when long ones hold every slot. Of the order of SQL Server's scheduler quantum
/// (4 ms) and CFS's scheduling period (6 ms × (1 + log2 CPUs)).
pub const DEFAULT_QUANTUM: Duration = Duration::from_millis(10);

/// A waiter older than this is served oldest-first by direct hand-off, and no newcomer runs
/// ahead of it: Go's mutex starvation threshold.
pub const DEFAULT_AGE_CAP: Duration = Duration::from_millis(1);

/// The CPUs this process may run on (its affinity mask and cgroup quota, as
/// `std::thread::available_parallelism` reads them), at least 1.
pub fn available_cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// The largest `auto` quantum accepted: beyond a second, a session could keep a slot for as
/// long as InnoDB's largest sleep delay while others wait.
pub const MAX_QUANTUM: Duration = Duration::from_secs(1);

impl Default for GateConfig {
    /// `auto`, untuned: the limit starts at [`available_cpus`] and adapts.
    fn default() -> Self {
        GateConfig::new(Policy::Auto)
    }
}

impl GateConfig {
    /// InnoDB's defaults for `policy` (see the type's documentation); for `auto`, the limit
    /// starts at the CPUs the process may use ([`available_cpus`]) and the `auto` knobs take
    /// their defaults (`policy::auto` gives each one's reason).
    pub fn new(policy: Policy) -> Self {
        GateConfig {
            policy,
            limit: if policy == Policy::Auto {
                available_cpus().min(MAX_LIMIT)
            } else {
                8
            },
            tickets: 500,
            sleep_delay: Duration::from_millis(10),
            adaptive_max_sleep_delay: Duration::from_micros(150_000),
            quantum: DEFAULT_QUANTUM,
            age_cap: DEFAULT_AGE_CAP,
            adaptive_limit: true,
            max_waiting: 0,
            queue_timeout: None,
        }
    }

    /// `auto`: sets the time quantum.
    pub fn quantum(mut self, d: Duration) -> Self {
        self.quantum = d;
        self
    }

    /// `auto`: sets the age cap.
    pub fn age_cap(mut self, d: Duration) -> Self {
        self.age_cap = d;
        self
    }

    /// `auto`: lets the limit adapt (`true`) or keeps it where it is set.
    pub fn adaptive_limit(mut self, on: bool) -> Self {
        self.adaptive_limit = on;
        self
    }

    /// `auto`: caps the sessions waiting (0: no cap).
    pub fn max_waiting(mut self, n: u32) -> Self {
        self.max_waiting = n;
        self
    }

    /// `auto`: refuses sessions not admitted within `d` (`None`: no deadline).
    pub fn queue_timeout(mut self, d: Option<Duration>) -> Self {
        self.queue_timeout = d;
        self
    }

    /// Sets the limit (0 = unlimited). Under `auto` with its adaptive limit on (the default),
    /// this is where the limit starts and, where it is below the CPUs, its floor: the
    /// controller moves it from there.
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = limit;
        self
    }

    /// InnoDB's three settings, each where this policy reads it ([`Policy::uses`]): the limit,
    /// and the tickets and sleep delay for the policies that have them. A sweep that gives
    /// several policies one command line's settings builds each with this.
    pub fn innodb_settings(mut self, limit: u32, tickets: u32, sleep_delay: Duration) -> Self {
        self.limit = limit;
        if self.policy.uses("tickets") {
            self.tickets = tickets;
        }
        if self.policy.uses("sleep_delay") {
            self.sleep_delay = sleep_delay;
        }
        self
    }

    /// Sets the tickets granted per admission (every policy but `auto`, which grants a time
    /// quantum).
    pub fn tickets(mut self, tickets: u32) -> Self {
        self.tickets = tickets;
        self
    }

    /// Sets the sleep delay (`classic`, `flifo`, `polling`).
    pub fn sleep_delay(mut self, d: Duration) -> Self {
        self.sleep_delay = d;
        self
    }

    /// Sets the adaptive maximum sleep delay (0 = not adaptive; `polling`).
    pub fn adaptive_max_sleep_delay(mut self, d: Duration) -> Self {
        self.adaptive_max_sleep_delay = d;
        self
    }

    /// Checks every field against its accepted range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check("limit", self.limit as u64, 0, MAX_LIMIT as u64)?;
        check("tickets", self.tickets as u64, 1, u32::MAX as u64)?;
        check_duration("sleep_delay", self.sleep_delay, MAX_SLEEP_DELAY)?;
        check_duration(
            "adaptive_max_sleep_delay",
            self.adaptive_max_sleep_delay,
            MAX_ADAPTIVE_SLEEP_DELAY,
        )?;
        check_duration("quantum", self.quantum, MAX_QUANTUM)?;
        // Checked in whole microseconds, as the range: 500 ns is 0 µs, below the minimum.
        if self.quantum.as_micros() == 0 {
            return Err(ConfigError::OutOfRange {
                field: "quantum",
                value: 0,
                min: 1,
                max: MAX_QUANTUM.as_micros() as u64,
                unit: Unit::Micros,
            });
        }
        check_duration("age_cap", self.age_cap, MAX_SLEEP_DELAY)?;
        if let Some(t) = self.queue_timeout {
            check_duration("queue_timeout", t, Duration::from_secs(3600))?;
        }
        let d = GateConfig::new(self.policy);
        for (field, set) in [
            ("tickets", self.tickets != d.tickets),
            ("sleep_delay", self.sleep_delay != d.sleep_delay),
            (
                "adaptive_max_sleep_delay",
                self.adaptive_max_sleep_delay != d.adaptive_max_sleep_delay,
            ),
            ("quantum", self.quantum != d.quantum),
            ("age_cap", self.age_cap != d.age_cap),
            ("adaptive_limit", self.adaptive_limit != d.adaptive_limit),
            ("max_waiting", self.max_waiting != d.max_waiting),
        ] {
            if set && !self.policy.uses(field) {
                return Err(ConfigError::NotForPolicy {
                    field,
                    policy: self.policy,
                });
            }
        }
        Ok(())
    }
}

/// Validates a runtime limit change ([`crate::Gate::set_limit`]).
pub(crate) fn check_limit(limit: u32) -> Result<(), ConfigError> {
    check("limit", limit as u64, 0, MAX_LIMIT as u64)
}

fn check(field: &'static str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    check_in(field, value, min, max, Unit::Count)
}

/// A duration setting, checked in whole microseconds (InnoDB's unit for these settings).
fn check_duration(field: &'static str, d: Duration, max: Duration) -> Result<(), ConfigError> {
    let us = |d: Duration| d.as_micros().min(u64::MAX as u128) as u64;
    check_in(field, us(d), 0, us(max), Unit::Micros)
}

fn check_in(
    field: &'static str,
    value: u64,
    min: u64,
    max: u64,
    unit: Unit,
) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            field,
            value,
            min,
            max,
            unit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_names_round_trip_and_unknown_names_list_the_choices() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>().unwrap(), p);
        }
        let err = "fifo".parse::<Policy>().unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("\"fifo\"") && msg.contains("classic, polling"),
            "{msg}"
        );
    }

    #[test]
    fn a_setting_the_policy_does_not_read_is_refused_naming_it_unless_left_at_its_default() {
        const MS3: Duration = Duration::from_millis(3);
        type Set = fn(GateConfig) -> GateConfig;
        let cases: [(&str, Set); 7] = [
            ("tickets", |c| c.tickets(100)),
            ("sleep_delay", |c| c.sleep_delay(MS3)),
            ("adaptive_max_sleep_delay", |c| {
                c.adaptive_max_sleep_delay(MS3)
            }),
            ("quantum", |c| c.quantum(MS3)),
            ("age_cap", |c| c.age_cap(MS3)),
            ("adaptive_limit", |c| c.adaptive_limit(false)),
            ("max_waiting", |c| c.max_waiting(3)),
        ];
        for p in Policy::ALL {
            assert_eq!(GateConfig::new(p).validate(), Ok(()), "{p}: defaults");
            for (field, set) in cases {
                let r = set(GateConfig::new(p)).validate();
                if p.uses(field) {
                    assert_eq!(r, Ok(()), "{p}: {field}");
                } else {
                    assert_eq!(
                        r,
                        Err(ConfigError::NotForPolicy { field, policy: p }),
                        "{p}: {field}"
                    );
                    let msg = r.unwrap_err().to_string();
                    assert!(msg.contains(field) && msg.contains(p.name()), "{msg}");
                }
            }
        }
        // Settings a policy has no use for are refused, not accepted and ignored.
        assert!(GateConfig::new(Policy::Auto)
            .tickets(100)
            .validate()
            .is_err());
        assert!(GateConfig::new(Policy::Classic)
            .quantum(MS3)
            .validate()
            .is_err());
    }

    #[test]
    fn out_of_range_values_name_the_field_and_the_range() {
        let err = GateConfig::new(Policy::Classic)
            .limit(5000)
            .validate()
            .unwrap_err();
        assert_eq!(
            err,
            ConfigError::OutOfRange {
                field: "limit",
                value: 5000,
                min: 0,
                max: 1000,
                unit: Unit::Count,
            }
        );
        assert!(err.to_string().contains("0..=1000"));
        let err = GateConfig::new(Policy::Polling)
            .tickets(0)
            .validate()
            .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::OutOfRange {
                field: "tickets",
                ..
            }
        ));
        let err = GateConfig::new(Policy::Polling)
            .sleep_delay(Duration::from_secs(5))
            .validate()
            .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::OutOfRange {
                field: "sleep_delay",
                value: 5_000_000,
                unit: Unit::Micros,
                ..
            }
        ));
        assert_eq!(
            err.to_string(),
            "sleep_delay = 5000000 us is out of range: accepted values are 0..=1000000 us"
        );
    }

    #[test]
    fn defaults_are_innodbs_and_valid() {
        let c = GateConfig::new(Policy::Classic);
        assert_eq!(c.tickets, 500);
        assert_eq!(c.sleep_delay, Duration::from_micros(10_000));
        assert_eq!(c.adaptive_max_sleep_delay, Duration::from_micros(150_000));
        c.validate().unwrap();
    }
}
