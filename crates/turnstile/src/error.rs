//! Error types: a typed, named reason for everything that can go wrong.

use std::fmt;
use std::time::Duration;

/// A configuration value the gate cannot accept.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A numeric setting outside its accepted range (inclusive bounds).
    #[non_exhaustive]
    OutOfRange {
        /// The setting's name: the name of its [`crate::GateConfig`] setter (`"limit"`,
        /// `"sleep_delay"`, ...).
        field: &'static str,
        /// The value that was given, in `unit`.
        value: u64,
        /// Smallest accepted value.
        min: u64,
        /// Largest accepted value.
        max: u64,
        /// The unit of `value`, `min` and `max`.
        unit: Unit,
    },
    /// A policy name that is not one of [`crate::Policy::ALL`].
    UnknownPolicy(String),
    /// A setting the configured policy does not implement, given a value other than its
    /// default (it would be ignored without a word).
    #[non_exhaustive]
    NotForPolicy {
        /// The setting's name (its [`crate::GateConfig`] setter).
        field: &'static str,
        /// The policy configured.
        policy: crate::Policy,
    },
}

/// The unit of a numeric setting in a [`ConfigError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unit {
    /// A plain number (threads, tickets).
    Count,
    /// Microseconds (durations, as InnoDB's settings count them).
    Micros,
}

impl Unit {
    fn suffix(self) -> &'static str {
        match self {
            Unit::Count => "",
            Unit::Micros => " us",
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::OutOfRange {
                field,
                value,
                min,
                max,
                unit,
            } => {
                let u = unit.suffix();
                write!(
                    f,
                    "{field} = {value}{u} is out of range: accepted values are {min}..={max}{u}"
                )
            }
            ConfigError::UnknownPolicy(name) => {
                let names: Vec<&str> = crate::Policy::ALL.iter().map(|p| p.name()).collect();
                write!(
                    f,
                    "unknown gate policy {name:?}: expected one of {}",
                    names.join(", ")
                )
            }
            ConfigError::NotForPolicy { field, policy } => write!(
                f,
                "{field} does not apply to the {} policy (it would be ignored)",
                policy.name()
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Why a thread did not get into the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GateError {
    /// [`crate::Canceler::cancel`] was called while the session waited (or before it began to).
    Cancelled {
        /// How long the session had waited.
        waited: Duration,
    },
    /// The session's wait timeout ([`crate::Session::set_wait_timeout`]) expired first.
    TimedOut {
        /// How long the session had waited.
        waited: Duration,
    },
    /// An explicit call out of order ([`crate::Session::enter`] and its siblings); nothing
    /// was changed.
    Misuse(Misuse),
    /// An async session (feature `async`) was asked to sleep without a timer: the gate's
    /// policy sleeps between checks (`polling`, `timer`, or `classic`/`flifo` with a non-zero
    /// sleep delay) and the session was made without a sleeper. Make it with
    /// `Gate::async_session_with_sleeper`, or give a queue policy a zero sleep delay.
    NeedsTimer {
        /// The gate's policy.
        policy: crate::Policy,
    },
    /// `auto`'s overload protection (off unless configured) refused the admission: nothing
    /// was left counted or queued.
    Overloaded {
        /// Which limit was hit.
        reason: OverloadReason,
        /// How long the session had waited.
        waited: Duration,
    },
}

/// Why [`GateError::Overloaded`] refused an admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OverloadReason {
    /// The queue already held [`crate::GateConfig::max_waiting`] sessions.
    QueueFull {
        /// The configured cap.
        max_waiting: u32,
    },
    /// The session waited [`crate::GateConfig::queue_timeout`] without being admitted.
    QueueTimeout {
        /// The configured deadline.
        timeout: Duration,
    },
}

/// A call sequence the explicit-call API of [`crate::Session`] refuses (the guard API makes
/// these impossible by construction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Misuse {
    /// `enter` while a call is already in progress.
    NestedEnter,
    /// `exit` without a matching `enter`.
    ExitWithoutEnter,
    /// `enter` or `exit` while a declared wait is in progress (end it first).
    CallDuringWait,
    /// `wait_begin` while a wait is already in progress.
    NestedWait,
    /// `wait_end` without a `wait_begin`.
    WaitEndWithoutBegin,
}

impl fmt::Display for Misuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Misuse::NestedEnter => "enter while a call is already in progress",
            Misuse::ExitWithoutEnter => "exit without a matching enter",
            Misuse::CallDuringWait => "enter or exit while a declared wait is in progress",
            Misuse::NestedWait => "wait_begin while a wait is already in progress",
            Misuse::WaitEndWithoutBegin => "wait_end without a wait_begin",
        })
    }
}

impl fmt::Display for GateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateError::Cancelled { waited } => {
                write!(f, "admission cancelled after waiting {waited:?}")
            }
            GateError::TimedOut { waited } => {
                write!(f, "admission timed out after waiting {waited:?}")
            }
            GateError::Misuse(m) => write!(f, "misuse of the session: {m}"),
            GateError::NeedsTimer { policy } => write!(
                f,
                "the {policy} policy sleeps between checks, and this async session has no \
                 timer: make it with Gate::async_session_with_sleeper (or give a queue policy \
                 a zero sleep delay)"
            ),
            GateError::Overloaded { reason, waited } => match reason {
                OverloadReason::QueueFull { max_waiting } => write!(
                    f,
                    "overloaded: {max_waiting} sessions already wait to enter (max_waiting); \
                     refused after {waited:?}"
                ),
                OverloadReason::QueueTimeout { timeout } => write!(
                    f,
                    "overloaded: not admitted within the queue timeout of {timeout:?}"
                ),
            },
        }
    }
}

impl std::error::Error for GateError {}
