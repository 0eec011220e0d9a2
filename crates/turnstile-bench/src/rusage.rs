//! Process CPU time and context switches, from `getrusage(RUSAGE_SELF)`.

use std::time::Duration;

/// CPU time and context switches of the whole process at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// User CPU time.
    pub user: Duration,
    /// System CPU time.
    pub sys: Duration,
    /// Voluntary context switches (blocked: futex wait, sleep).
    pub voluntary_cs: u64,
    /// Involuntary context switches (preempted).
    pub involuntary_cs: u64,
}

impl Usage {
    /// Reads the process's usage now.
    pub fn now() -> Usage {
        // SAFETY: `getrusage` writes a `rusage` struct into the pointer we pass, which points
        // to a properly aligned, zero-initialised local of exactly that type; RUSAGE_SELF is a
        // valid `who` on every Unix, so the call cannot fail (we still check).
        let ru = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
                return Usage::default();
            }
            ru
        };
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        Usage {
            user: tv(ru.ru_utime),
            sys: tv(ru.ru_stime),
            voluntary_cs: ru.ru_nvcsw as u64,
            involuntary_cs: ru.ru_nivcsw as u64,
        }
    }

    /// The usage accumulated between `earlier` and `self`.
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            user: self.user.saturating_sub(earlier.user),
            sys: self.sys.saturating_sub(earlier.sys),
            voluntary_cs: self.voluntary_cs.saturating_sub(earlier.voluntary_cs),
            involuntary_cs: self.involuntary_cs.saturating_sub(earlier.involuntary_cs),
        }
    }

    /// All context switches.
    pub fn context_switches(&self) -> u64 {
        self.voluntary_cs + self.involuntary_cs
    }
}

/// The calling thread's time so far: on a CPU, and runnable but waiting for one.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadTimes {
    /// CPU time, s (`CLOCK_THREAD_CPUTIME_ID`; 0.0 if the clock cannot be read).
    pub cpu_s: f64,
    /// Time runnable but waiting on a run queue, s: the second field of Linux's
    /// `/proc/thread-self/schedstat`; `None` where there is none.
    pub runqueue_s: Option<f64>,
}

impl ThreadTimes {
    /// Reads the calling thread's times now.
    pub fn now() -> ThreadTimes {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `clock_gettime` writes one `timespec` through the pointer, which points to
        // a live, aligned local of that type; `CLOCK_THREAD_CPUTIME_ID` is a POSIX clock id,
        // and on failure (non-zero return) the local keeps its zeros, which we then ignore.
        let cpu_s = if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
        } else {
            0.0
        };
        let runqueue_s = std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|t| t.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map(|ns| ns as f64 / 1e9);
        ThreadTimes { cpu_s, runqueue_s }
    }

    /// The times spent from `earlier` (a reading of the same thread) to `self`.
    pub fn since(&self, earlier: &ThreadTimes) -> ThreadTimes {
        ThreadTimes {
            cpu_s: (self.cpu_s - earlier.cpu_s).max(0.0),
            runqueue_s: match (self.runqueue_s, earlier.runqueue_s) {
                (Some(a), Some(b)) => Some((a - b).max(0.0)),
                _ => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_grows_with_work_and_sleeping_switches_context() {
        let a = Usage::now();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        std::thread::sleep(Duration::from_millis(2));
        let d = Usage::now().since(&a);
        assert!(d.user + d.sys > Duration::ZERO);
        assert!(d.voluntary_cs >= 1, "a sleep blocks: {d:?}");
    }
}
