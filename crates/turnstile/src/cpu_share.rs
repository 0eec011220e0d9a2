//! The CPUs other processes leave this one, for `auto`'s limit controller.
//!
//! The controller reads the process's own CPU use to tell slot holders that do not run (a wait
//! nobody declared: more slots would use the idle CPUs) from CPUs that are busy. A CPU the
//! process does not use may be idle, or busy with another process: the process's CPU clock
//! cannot tell them apart, and taking another process's share for idle raised the limit until
//! every session was inside (`repro mixed` beside CPU-bound processes; docs/BENCHMARKS.md).
//!
//! The kernel counts each CPU's idle time in `/proc/stat` (`idle` + `iowait`, in USER_HZ
//! ticks). Over a span, the CPUs of the process's affinity set less their idle time less the
//! process's own CPU time is what others took (other processes, the kernel's threads, a
//! hypervisor's steal); the set's CPUs less that is what this process could have used. The
//! counts move in whole ticks (10 ms at USER_HZ 100), so an estimate needs a span of at least
//! [`SPAN`], and the error bound is taken off what the others took: unsure, the controller
//! reads as it did without this (all the CPUs its own).
//!
//! One file read per [`SPAN`] at most, by a thread that is about to read the process CPU
//! clock for the controller anyway, outside the queue lock: `/proc/stat` is a few KB (more on
//! machines with many interrupt lines), tens of µs every half second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// The shortest span an estimate is taken over: the counts' error is one tick per CPU, so
/// 10 ms / 500 ms = 2 % of the CPUs at USER_HZ 100 (every Linux architecture but alpha and
/// ia64 reports 100). Longer spans follow the others' load more slowly; the controller's
/// own readings are 20 ms, and a foreign load that comes and goes faster than half a second
/// is read as its average.
pub(crate) const SPAN: Duration = Duration::from_millis(500);

/// Idle ticks summed over the CPUs counted, and how many CPUs that is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IdleTicks {
    pub(crate) ticks: u64,
    pub(crate) cpus: u32,
}

/// The idle ticks (`idle` + `iowait`, the 4th and 5th numbers of a `cpuN` line) of the
/// CPUs in `mask` (every CPU listed where `mask` is `None`), from `/proc/stat`'s text.
/// `None` if no CPU line of the set could be read.
pub(crate) fn parse_idle(stat: &str, mask: Option<&[bool]>) -> Option<IdleTicks> {
    let mut out = IdleTicks { ticks: 0, cpus: 0 };
    for line in stat.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            // The CPU lines come first; nothing after them is read.
            if out.cpus > 0 {
                break;
            }
            continue;
        };
        // "cpu  …" (the sum over all CPUs) has no number right after "cpu": not a CPU.
        if !rest.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let mut fields = rest.split_ascii_whitespace();
        let Some(Ok(n)) = fields.next().map(str::parse::<usize>) else {
            continue;
        };
        if let Some(m) = mask {
            if !m.get(n).copied().unwrap_or(false) {
                continue;
            }
        }
        let mut nums = fields.map(str::parse::<u64>);
        let (Some(Ok(_user)), Some(Ok(_nice)), Some(Ok(_system)), Some(Ok(idle))) =
            (nums.next(), nums.next(), nums.next(), nums.next())
        else {
            return None;
        };
        // iowait is missing on kernels before 2.5.41 only; it is idle time too.
        let iowait = nums.next().and_then(Result::ok).unwrap_or(0);
        out.ticks = out.ticks.saturating_add(idle).saturating_add(iowait);
        out.cpus += 1;
    }
    (out.cpus > 0).then_some(out)
}

/// One reading: when, the idle ticks, the process's CPU time.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at_ns: u64,
    idle: IdleTicks,
    process_ns: u64,
}

/// The CPUs the process could have used between two samples, in CPUs: those counted, less
/// what others took (their CPUs' time less idle less the process's own), less the counts'
/// error (a tick per CPU) so that an unsure estimate leaves the CPUs the process's. `None`
/// if the CPU set changed between the samples (a CPU went offline) or no time passed.
fn available(a: &Sample, b: &Sample, tick_ns: u64) -> Option<f64> {
    let span = b.at_ns.checked_sub(a.at_ns).filter(|&s| s > 0)? as f64;
    if a.idle.cpus != b.idle.cpus {
        return None;
    }
    let cpus = f64::from(b.idle.cpus);
    let idle = b.idle.ticks.saturating_sub(a.idle.ticks) as f64 * tick_ns as f64;
    let own = b.process_ns.saturating_sub(a.process_ns) as f64;
    let others = cpus * span - idle - own;
    let error = cpus * tick_ns as f64;
    let others_cpus = ((others - error) / span).max(0.0);
    Some((cpus - others_cpus).max(0.0))
}

/// The estimate and the sample it will be taken from next (see the module documentation).
#[derive(Debug)]
pub(crate) struct CpuShare {
    /// The process's affinity set at the gate's creation (`None`: every CPU listed).
    mask: Option<Vec<bool>>,
    /// One USER_HZ tick, ns.
    tick_ns: u64,
    last: Mutex<Last>,
    /// The CPUs available (f64 bits), or [`UNKNOWN`].
    available: AtomicU64,
}

const UNKNOWN: u64 = u64::MAX;

/// The last sample, and when the last read was tried (a read that failed is not tried
/// again before a span has passed either).
#[derive(Debug)]
struct Last {
    sample: Option<Sample>,
    tried_ns: u64,
}

impl CpuShare {
    /// Takes the first sample at `now_ns` (the driver's clock), for a controller of `cpus`
    /// CPUs. `None` where the counts cannot be read: off Linux, under loom, without `/proc`.
    /// The affinity set is the creating thread's: where it holds fewer CPUs than the
    /// controller's (a creator pinned to some of them), every CPU is counted instead.
    pub(crate) fn new(now_ns: u64, cpus: u32) -> Option<CpuShare> {
        if cfg!(loom) || !cfg!(target_os = "linux") {
            return None;
        }
        let mask = affinity().filter(|m| m.iter().filter(|&&b| b).count() >= cpus as usize);
        let share = CpuShare {
            mask,
            tick_ns: user_hz_tick_ns()?,
            last: Mutex::new(Last {
                sample: None,
                tried_ns: now_ns,
            }),
            available: AtomicU64::new(UNKNOWN),
        };
        let first = share.read(now_ns, crate::clock::process_cpu_ns()?)?;
        share.last.lock().unwrap_or_else(|e| e.into_inner()).sample = Some(first);
        Some(share)
    }

    fn read(&self, now_ns: u64, process_ns: u64) -> Option<Sample> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        Some(Sample {
            at_ns: now_ns,
            idle: parse_idle(&text, self.mask.as_deref())?,
            process_ns,
        })
    }

    /// The CPUs this process could use, in CPUs, as last estimated; `None` until a span of
    /// [`SPAN`] has been read. Samples again first if the last sample is [`SPAN`] old and no
    /// other thread is sampling now (`process_ns`: the process's CPU time at `now_ns`).
    pub(crate) fn sample(&self, now_ns: u64, process_ns: u64) -> Option<f64> {
        if let Ok(mut last) = self.last.try_lock() {
            if now_ns.saturating_sub(last.tried_ns) >= SPAN.as_nanos() as u64 {
                last.tried_ns = now_ns;
                let now = self.read(now_ns, process_ns);
                let est = match (&last.sample, &now) {
                    (Some(a), Some(b)) => available(a, b, self.tick_ns),
                    _ => None,
                };
                // Relaxed: a measurement handed over, read by the controller's next decision
                // (under the queue lock, which orders nothing with it). A file that can no
                // longer be read leaves no estimate rather than the last one for ever.
                self.available
                    .store(est.map_or(UNKNOWN, f64::to_bits), Ordering::Relaxed);
                last.sample = now;
            }
        }
        match self.available.load(Ordering::Relaxed) {
            UNKNOWN => None,
            bits => Some(f64::from_bits(bits)),
        }
    }
}

/// One USER_HZ tick in ns (`sysconf(_SC_CLK_TCK)`, 100 on nearly every Linux).
fn user_hz_tick_ns() -> Option<u64> {
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        // SAFETY: sysconf reads a constant of the C library; it takes no pointer and has no
        // side effect.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        (hz > 0).then(|| 1_000_000_000 / hz as u64)
    }
    #[cfg(not(all(target_os = "linux", not(loom))))]
    None
}

/// The CPUs this process may run on (`sched_getaffinity`), as a mask indexed by CPU number;
/// `None` if it cannot be read (a machine with more CPUs than `cpu_set_t` holds, 1024).
fn affinity() -> Option<Vec<bool>> {
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        // SAFETY: `cpu_set_t` is a plain bit array, for which all zeroes is a valid (empty) set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid, writable `cpu_set_t` of the size passed, for the duration
        // of the call; pid 0 is the calling thread, and the call only writes `set`.
        let rc =
            unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        if rc != 0 {
            return None;
        }
        let n = libc::CPU_SETSIZE as usize;
        // SAFETY: every index is below CPU_SETSIZE, the number of bits `set` holds, so
        // CPU_ISSET reads within it.
        Some(
            (0..n)
                .map(|i| unsafe { libc::CPU_ISSET(i, &set) })
                .collect(),
        )
    }
    #[cfg(not(all(target_os = "linux", not(loom))))]
    None
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const STAT: &str = "cpu  1746951 125204 374600 1047511 25574 0 2680 2745 0 0\n\
cpu0 860303 49532 169272 573410 7726 0 809 1397 0 0\n\
cpu1 886648 75672 205328 474101 17848 0 1870 1348 0 0\n\
intr 123 4 5\n\
ctxt 987\n";

    #[test]
    fn idle_ticks_are_idle_plus_iowait_summed_over_the_cpus_of_the_mask_only() {
        assert_eq!(
            parse_idle(STAT, None),
            Some(IdleTicks {
                ticks: 573410 + 7726 + 474101 + 17848,
                cpus: 2
            })
        );
        assert_eq!(
            parse_idle(STAT, Some(&[false, true])),
            Some(IdleTicks {
                ticks: 474101 + 17848,
                cpus: 1
            })
        );
        // A CPU outside the mask's length is not the process's.
        assert_eq!(parse_idle(STAT, Some(&[false, false])), None);
        assert_eq!(parse_idle("intr 1 2\n", None), None);
        // A line cut short is refused, not read as zero idle.
        assert_eq!(parse_idle("cpu0 1 2 3\n", None), None);
    }

    fn sample(at_ms: u64, idle_ticks: u64, cpus: u32, own_ms: u64) -> Sample {
        Sample {
            at_ns: at_ms * 1_000_000,
            idle: IdleTicks {
                ticks: idle_ticks,
                cpus,
            },
            process_ns: own_ms * 1_000_000,
        }
    }

    #[test]
    fn what_others_take_is_the_cpus_less_idle_less_own_less_one_tick_per_cpu() {
        let tick = 10_000_000;
        // 2 CPUs over 1 s: 2000 ms of CPU time. Idle 100 ms (10 ticks), own 600 ms: others
        // took 1300 ms, 1280 ms after the error bound, 1.28 CPUs; 0.72 left.
        let a = sample(0, 0, 2, 0);
        let got = available(&a, &sample(1000, 10, 2, 600), tick).unwrap();
        assert!((got - 0.72).abs() < 1e-9, "{got}");
        // Nothing taken by others (idle + own = the CPUs): all the CPUs are the process's.
        assert_eq!(available(&a, &sample(1000, 140, 2, 600), tick), Some(2.0));
        // Within the error bound of nothing: still all the process's.
        assert_eq!(available(&a, &sample(1000, 139, 2, 600), tick), Some(2.0));
        // No time passed, or a CPU went away: no estimate.
        assert_eq!(available(&a, &sample(0, 10, 2, 600), tick), None);
        assert_eq!(available(&a, &sample(1000, 10, 1, 600), tick), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_estimate_waits_for_a_whole_span_and_stays_within_the_cpus() {
        let share = CpuShare::new(1, 1).expect("/proc/stat is readable on Linux");
        let cpu = crate::clock::process_cpu_ns().unwrap();
        // Before a span has passed there is nothing to estimate from.
        assert_eq!(share.sample(2, cpu), None);
        // A later sample (the clock is the caller's: a span on, whatever the wall clock).
        let span = SPAN.as_nanos() as u64;
        let cpu = crate::clock::process_cpu_ns().unwrap();
        let got = share
            .sample(span + 1, cpu)
            .expect("an estimate after a span");
        let cpus = share.last.lock().unwrap().sample.unwrap().idle.cpus;
        assert!((0.0..=f64::from(cpus)).contains(&got), "{got} of {cpus}");
        // And it holds until the next span ends.
        assert_eq!(share.sample(span + 2, cpu), Some(got));
    }
}
