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
