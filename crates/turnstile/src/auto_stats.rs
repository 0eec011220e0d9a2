//! What `auto` reports of itself ([`crate::GateStats::auto`]): the core's counts and its
//! controller's moves by rule. A leaf module: the policy fills these, the monitor prints them.

/// The core's counts and decisions ([`crate::GateStats::auto`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct AutoStats {
    /// The limit now.
    pub limit: u32,
    /// Counted inside.
    pub inside: u32,
    /// Extra admissions running: newcomers in a pending waiter's place, sessions back from a wait.
    pub extra: u32,
    /// Released waiters not yet running.
    pub pending: u32,
    /// Queued, not yet released.
    pub queued: u32,
    /// Waiters past the age cap are being served oldest first.
    pub starving: bool,
    /// The largest limit in force so far.
    pub limit_max: u32,
    /// Times the controller raised the limit.
    pub limit_raises: u64,
    /// Times it lowered the limit.
    pub limit_cuts: u64,
    /// Why it raised and lowered it, window by window.
    pub limit_reasons: LimitReasons,
    /// Controller runs by a waiter that saw no slot released for a stall period.
    pub stall_ticks: u64,
    /// Enters refused by the queue cap.
    pub rejections: u64,
    /// Hand-offs to a waiter past the age cap.
    pub age_handoffs: u64,
    /// Lent slots taken back above the limit (allowed up to twice the limit).
    pub reclaims_over: u64,
    /// Slots held now by long statements (a whole quantum spent while others queued).
    pub long_holders: u32,
    /// The controller's window now, ns: 20 ms, longer where CPU readings are costly.
    pub control_window_ns: u64,
    /// The CPUs other processes leave this one, in thousandths (`None`: unknown, as off Linux).
    pub cpus_available_milli: Option<u32>,
}

/// Why the controller moved the limit: each move is counted once, under its rule (their sum
/// is raises plus cuts); `windows` counts the windows with threads queued, moved or not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LimitReasons {
    /// Windows with threads queued (a decision was made, whatever it was).
    pub windows: u64,
    /// Raised towards `limit × target ÷ useful CPU use`: threads queued while the CPUs
    /// were not all busy with statements (holders blocked where nobody declared a wait, or
    /// the CPU went to hand-offs); without a CPU reading, by one after prompt grants.
    pub fill: u64,
    /// Raised to the floor: two slots per CPU, or beside long statements a slot for each
    /// and the CPUs they leave.
    pub floor: u64,
    /// Lowered: every CPU busy with the limit above the floor (by one; by a quarter beside
    /// long statements that keep their slots; halved where nobody queued).
    pub busy: u64,
    /// Cut by a quarter: grantees started late while the CPUs were busy (runnable holders
    /// waited for a CPU).
    pub late: u64,
    /// Cut back where a fill began: the CPU use did not rise with the slots, so the idle
    /// CPUs were not the process's to fill (another process's or cgroup's share); fill then
    /// waits (`FILL_BACKOFF`).
    pub undone: u64,
    /// Brought back within the bounds after an operator set a limit outside them.
    pub bounds: u64,
    /// Windows whose reading could not yet tell which side of a threshold the CPU use was
    /// on: the reading went on into the next window. Not a move.
    pub deferred: u64,
}

impl LimitReasons {
    /// The moves counted (raises plus cuts).
    pub fn moves(&self) -> u64 {
        self.fill + self.floor + self.busy + self.late + self.undone + self.bounds
    }

    /// The counts since `earlier` (a reading of the same gate taken before).
    pub fn since(&self, earlier: &LimitReasons) -> LimitReasons {
        LimitReasons {
            windows: self.windows.saturating_sub(earlier.windows),
            fill: self.fill.saturating_sub(earlier.fill),
            floor: self.floor.saturating_sub(earlier.floor),
            busy: self.busy.saturating_sub(earlier.busy),
            late: self.late.saturating_sub(earlier.late),
            undone: self.undone.saturating_sub(earlier.undone),
            bounds: self.bounds.saturating_sub(earlier.bounds),
            deferred: self.deferred.saturating_sub(earlier.deferred),
        }
    }
}
