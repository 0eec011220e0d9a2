//! `turnstile bench mutex`: innotsim (seed 002) done right.
//!
//! N threads over M mutexes (thread t uses mutex t mod M); each loop locks its mutex,
//! increments that mutex's counter, works for the hold time while holding it, and unlocks.
//! Every mutex and its counter sit on their own 128-byte line (innotsim's mutexes shared lines).
//! Per point: ns per loop (wall time per completed critical section, system-wide), CPU ns per
//! loop (user and system separately), context switches per loop, wake-ups per acquisition that
//! slept (where the lock can count them), fairness (fewest over most loops per thread) and the
//! lock-wait distribution (one acquisition in 8 timed, so the clock does not dominate a 0 ns
//! hold). The counters are checked against the loops at the end.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use lock_api::RawMutex;
use serde::Serialize;
use turnstile::mutex::{
    InnodbMutex, LockCounters, RawTurnstileMutex, SpinGlobalMutex, SpinPerMutex,
};
use turnstile::{Histogram, HistogramSnapshot};

use crate::rusage::Usage;
use crate::start::StartLine;
use crate::work;

/// The locks the benchmark drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockVariant {
    /// `turnstile::mutex::RawTurnstileMutex` (with slow-path counters for wake-up figures).
    Turnstile,
    /// `turnstile::mutex::InnodbMutex`.
    Innodb,
    /// `turnstile::mutex::SpinGlobalMutex`.
    SpinGlobal,
    /// `turnstile::mutex::SpinPerMutex`.
    SpinPerMutex,
    /// `std::sync::Mutex<()>`.
    Std,
    /// `parking_lot::Mutex<()>`.
    ParkingLot,
    /// `pthread_mutex_t`, default type.
    Pthread,
    /// `pthread_mutex_t`, `PTHREAD_MUTEX_ADAPTIVE_NP`.
    PthreadAdaptive,
}

impl LockVariant {
    /// Every variant, ours first.
    pub const ALL: [LockVariant; 8] = [
        LockVariant::Turnstile,
        LockVariant::Innodb,
        LockVariant::SpinGlobal,
        LockVariant::SpinPerMutex,
        LockVariant::Std,
        LockVariant::ParkingLot,
        LockVariant::Pthread,
        LockVariant::PthreadAdaptive,
    ];

    /// The name on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            LockVariant::Turnstile => "turnstile",
            LockVariant::Innodb => "innodb",
            LockVariant::SpinGlobal => "spin-global",
            LockVariant::SpinPerMutex => "spin-per-mutex",
            LockVariant::Std => "std",
            LockVariant::ParkingLot => "parking_lot",
            LockVariant::Pthread => "pthread",
            LockVariant::PthreadAdaptive => "pthread-adaptive",
        }
    }

    /// The rivals (not built by this project).
    pub fn is_rival(self) -> bool {
        matches!(
            self,
            LockVariant::Std
                | LockVariant::ParkingLot
                | LockVariant::Pthread
                | LockVariant::PthreadAdaptive
        )
    }

    /// Parses a variant name.
    pub fn parse(s: &str) -> Result<LockVariant, String> {
        LockVariant::ALL
            .into_iter()
            .find(|v| v.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let names: Vec<&str> = LockVariant::ALL.iter().map(|v| v.name()).collect();
                format!(
                    "unknown mutex variant {s:?}: expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// What the benchmark needs of a lock: run a closure holding it, and (optionally) say how many
/// times threads slept and were woken.
pub trait BenchLock: Send + Sync + 'static {
    /// An unlocked lock.
    fn create() -> Self
    where
        Self: Sized;
    /// Runs `f` while holding the lock.
    fn with<R>(&self, f: impl FnOnce() -> R) -> R;
    /// (acquisitions that slept, wake-ups) so far, for locks that count them.
    fn sleeps_and_wakeups(&self) -> Option<(u64, u64)> {
        None
    }
}

/// Any `lock_api::RawMutex` (ours).
pub struct Raw<R>(R);

impl<R: RawMutex + Send + Sync + 'static> Raw<R> {
    #[inline]
    fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.lock();
        let r = f();
        // SAFETY: locked just above by this thread.
        unsafe { self.0.unlock() };
        r
    }
}

impl BenchLock for Raw<RawTurnstileMutex<LockCounters>> {
    fn create() -> Self {
        Raw(RawTurnstileMutex::new())
    }
    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        self.run(f)
    }
    fn sleeps_and_wakeups(&self) -> Option<(u64, u64)> {
        let c = self.0.stats().snapshot();
        Some((c.slept_acquires, c.wakeups))
    }
}

impl BenchLock for Raw<InnodbMutex> {
    fn create() -> Self {
        Raw(InnodbMutex::new())
    }
    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        self.run(f)
    }
    fn sleeps_and_wakeups(&self) -> Option<(u64, u64)> {
        let s = self.0.stats();
        Some((s.slept_acquisitions, s.wakeups))
    }
}

impl BenchLock for Raw<SpinGlobalMutex> {
    fn create() -> Self {
        Raw(SpinGlobalMutex::new())
    }
    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        self.run(f)
    }
}

impl BenchLock for Raw<SpinPerMutex> {
    fn create() -> Self {
        Raw(SpinPerMutex::new())
    }
    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        self.run(f)
    }
}

impl BenchLock for std::sync::Mutex<()> {
    fn create() -> Self {
        std::sync::Mutex::new(())
    }
    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        let _g = self.lock().unwrap_or_else(|e| e.into_inner());
        f()
    }
}

impl BenchLock for parking_lot::Mutex<()> {
    fn create() -> Self {
        parking_lot::Mutex::new(())
    }
    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        let _g = self.lock();
        f()
    }
}

/// A `pthread_mutex_t`, boxed so it never moves after initialisation.
pub struct Pthread<const ADAPTIVE: bool> {
    m: Box<UnsafeCell<libc::pthread_mutex_t>>,
}

// SAFETY: pthread mutexes are designed to be shared between threads; we only pass the pointer
// to pthread functions.
unsafe impl<const A: bool> Send for Pthread<A> {}
// SAFETY: as above.
unsafe impl<const A: bool> Sync for Pthread<A> {}

/// glibc's `PTHREAD_MUTEX_ADAPTIVE_NP` (enum value 3 in `<pthread.h>`).
const PTHREAD_MUTEX_ADAPTIVE_NP: libc::c_int = 3;

impl<const ADAPTIVE: bool> BenchLock for Pthread<ADAPTIVE> {
    fn create() -> Self {
        let m = Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
        if ADAPTIVE {
            // SAFETY: `attr` is initialised by pthread_mutexattr_init before use and destroyed
            // after; `m` points to a live, boxed (never moving) pthread_mutex_t that no thread
            // uses yet, which pthread_mutex_init may (re)initialise.
            unsafe {
                let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
                assert_eq!(libc::pthread_mutexattr_init(&mut attr), 0);
                assert_eq!(
                    libc::pthread_mutexattr_settype(&mut attr, PTHREAD_MUTEX_ADAPTIVE_NP),
                    0
                );
                assert_eq!(libc::pthread_mutex_init(m.get(), &attr), 0);
                libc::pthread_mutexattr_destroy(&mut attr);
            }
        }
        Pthread { m }
    }

    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        // SAFETY: the mutex is initialised and lives as long as `self`; lock and unlock are
        // paired on the same thread.
        unsafe { libc::pthread_mutex_lock(self.m.get()) };
        let r = f();
        // SAFETY: this thread locked it just above.
        unsafe { libc::pthread_mutex_unlock(self.m.get()) };
        r
    }
}

impl<const A: bool> Drop for Pthread<A> {
    fn drop(&mut self) {
        // SAFETY: no thread holds or waits on the mutex once its owner is dropped.
        unsafe { libc::pthread_mutex_destroy(self.m.get()) };
    }
}

/// Settings of one `bench mutex` run.
#[derive(Debug, Clone, Serialize)]
pub struct MutexBenchConfig {
    /// Variants (names).
    #[serde(serialize_with = "ser_variants")]
    pub variants: Vec<LockVariant>,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Mutex counts.
    pub mutexes: Vec<usize>,
    /// Hold times, ns of CPU work inside the critical section.
    pub hold_ns: Vec<u64>,
    /// Measured time per point.
    #[serde(serialize_with = "crate::stats::ser_ms", rename = "duration_ms")]
    pub duration: Duration,
    /// Runs per point; a point reports its median run (by ns per loop). The runs of one point
    /// are interleaved across variants, so a slow spell of this shared machine hits every
    /// variant alike rather than one.
    pub repeat: usize,
}

fn ser_variants<S: serde::Serializer>(v: &[LockVariant], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|v| v.name()))
}

impl MutexBenchConfig {
    /// The full sweep: seed 002's thread counts, 1/4/16 mutexes, 0/1000/4000 ns, every variant,
    /// 0.2 s per point (792 points: about 17 minutes on two cores, dominated by spawning and
    /// joining 512 and 1024 threads).
    pub fn full() -> Self {
        MutexBenchConfig {
            variants: LockVariant::ALL.to_vec(),
            threads: crate::gate::DEFAULT_THREADS.to_vec(),
            mutexes: vec![1, 4, 16],
            hold_ns: vec![0, 1000, 4000],
            duration: Duration::from_millis(200),
            repeat: 1,
        }
    }

    /// Under a minute: threads 1/4/16/64/256, 1 and 4 mutexes, hold 0 and 1000 ns, 50 ms.
    pub fn quick() -> Self {
        MutexBenchConfig {
            threads: vec![1, 4, 16, 64, 256],
            mutexes: vec![1, 4],
            hold_ns: vec![0, 1000],
            duration: Duration::from_millis(50),
            ..MutexBenchConfig::full()
        }
    }

    /// Checks what a user can get wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.variants.is_empty() {
            return Err("no variants to run".into());
        }
        if self.threads.is_empty() || self.threads.contains(&0) {
            return Err("thread counts must be at least 1".into());
        }
        if let Some(&t) = self.threads.iter().find(|&&t| t > 16_384) {
            return Err(format!(
                "{t} threads is more than this benchmark supports (16384)"
            ));
        }
        if self.mutexes.is_empty() || self.mutexes.contains(&0) {
            return Err("mutex counts must be at least 1".into());
        }
        if self.hold_ns.is_empty() || self.hold_ns.iter().any(|&h| h > 10_000_000) {
            return Err("hold times must be given and at most 10000000 ns".into());
        }
        if self.duration.is_zero() || self.duration > crate::gate::MAX_DURATION {
            return Err(format!(
                "duration must be positive and at most {} s",
                crate::gate::MAX_DURATION.as_secs()
            ));
        }
        use crate::stats::each_once;
        each_once("the variants", &self.variants, |v| v.name().into())?;
        each_once("the thread counts", &self.threads, |t| t.to_string())?;
        each_once("the mutex counts", &self.mutexes, |m| m.to_string())?;
        each_once("the hold times", &self.hold_ns, |h| h.to_string())?;
        if !(1..=99).contains(&self.repeat) {
            return Err(format!(
                "repeat must be between 1 and 99 runs per point, not {}",
                self.repeat
            ));
        }
        Ok(())
    }

    /// Points the run will report.
    pub fn points(&self) -> usize {
        self.variants.len() * self.threads.len() * self.mutexes.len() * self.hold_ns.len()
    }

    /// Measurements the run will make (points × repetitions).
    pub fn runs(&self) -> usize {
        self.points() * self.repeat
    }
}

/// One measured point.
#[derive(Debug, Clone, Serialize)]
pub struct MutexResult {
    /// Variant name.
    pub variant: &'static str,
    /// Threads.
    pub threads: usize,
    /// Mutexes.
    pub mutexes: usize,
    /// Hold time, ns.
    pub hold_ns: u64,
    /// Wall ns per completed loop, system-wide.
    pub ns_per_loop: f64,
    /// CPU (user + sys) ns per loop.
    pub cpu_ns_per_loop: f64,
    /// User CPU ns per loop.
    pub user_ns_per_loop: f64,
    /// System CPU ns per loop.
    pub sys_ns_per_loop: f64,
    /// Context switches per loop.
    pub cs_per_loop: f64,
    /// Wake-ups per acquisition that slept (`null` for locks that cannot count them).
    pub wakeups_per_acquire: Option<f64>,
    /// Fraction of acquisitions that slept at least once (`null` where not counted).
    pub sleeps_per_loop: Option<f64>,
    /// Fewest over most loops per thread.
    pub fairness: f64,
    /// Lock wait, p50, ns (sampled).
    pub wait_p50_ns: u64,
    /// Lock wait, p99, ns (sampled).
    pub wait_p99_ns: u64,
    /// Longest sampled lock wait, ns.
    pub wait_max_ns: u64,
    /// Loops in the measured interval.
    pub loops: u64,
    /// ns per loop of every run of this point (the fields above are the median run's).
    pub runs_ns_per_loop: Vec<f64>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct MutexBenchReport {
    /// Where it ran.
    pub machine: crate::gate::Machine,
    /// What ran.
    pub config: MutexBenchConfig,
    /// Every point.
    pub results: Vec<MutexResult>,
}

/// Runs the sweep; `progress` hears about each point before it runs. Errors if a counter check
/// fails (a lock let two threads in).
pub fn run(
    cfg: &MutexBenchConfig,
    progress: &mut dyn FnMut(&str),
) -> Result<MutexBenchReport, String> {
    let mut results = Vec::with_capacity(cfg.points());
    for &hold in &cfg.hold_ns {
        for &m in &cfg.mutexes {
            for &t in &cfg.threads {
                let mut runs: Vec<Vec<MutexResult>> = vec![Vec::new(); cfg.variants.len()];
                for rep in 0..cfg.repeat {
                    for (i, &v) in cfg.variants.iter().enumerate() {
                        let of = if cfg.repeat > 1 {
                            format!(" (run {}/{})", rep + 1, cfg.repeat)
                        } else {
                            String::new()
                        };
                        progress(&format!(
                            "{} × {t} threads, {m} mutexes, hold {hold} ns{of}",
                            v.name()
                        ));
                        runs[i].push(measure(v, t, m, hold, cfg.duration)?);
                    }
                }
                results.extend(runs.into_iter().map(median_run));
            }
        }
    }
    Ok(MutexBenchReport {
        machine: crate::gate::Machine::here(),
        config: cfg.clone(),
        results,
    })
}

/// The run with the median ns per loop (the lower middle one for an even count), carrying
/// every run's figure.
fn median_run(mut runs: Vec<MutexResult>) -> MutexResult {
    let all: Vec<f64> = runs.iter().map(|r| r.ns_per_loop).collect();
    runs.sort_by(|a, b| a.ns_per_loop.total_cmp(&b.ns_per_loop));
    let mut r = runs.swap_remove((runs.len() - 1) / 2);
    r.runs_ns_per_loop = all;
    r
}

/// Measures one point once.
pub fn measure(
    v: LockVariant,
    threads: usize,
    mutexes: usize,
    hold_ns: u64,
    duration: Duration,
) -> Result<MutexResult, String> {
    let p = Point {
        variant: v.name(),
        threads,
        mutexes,
        hold_ns,
        duration,
    };
    match v {
        LockVariant::Turnstile => p.run::<Raw<RawTurnstileMutex<LockCounters>>>(),
        LockVariant::Innodb => p.run::<Raw<InnodbMutex>>(),
        LockVariant::SpinGlobal => p.run::<Raw<SpinGlobalMutex>>(),
        LockVariant::SpinPerMutex => p.run::<Raw<SpinPerMutex>>(),
        LockVariant::Std => p.run::<std::sync::Mutex<()>>(),
        LockVariant::ParkingLot => p.run::<parking_lot::Mutex<()>>(),
        LockVariant::Pthread => p.run::<Pthread<false>>(),
        LockVariant::PthreadAdaptive => p.run::<Pthread<true>>(),
    }
}

/// A mutex and its counter, alone on their cache lines.
#[repr(align(128))]
struct Slot<L> {
    lock: L,
    counter: UnsafeCell<u64>,
}

// SAFETY: `counter` is only accessed while holding `lock` (in `worker`), or after every worker
// has been joined.
unsafe impl<L: Sync> Sync for Slot<L> {}

#[repr(align(128))]
#[derive(Default)]
struct PerThread {
    loops: AtomicU64,
}

struct Shared<L> {
    slots: Vec<Slot<L>>,
    per_thread: Vec<PerThread>,
    waits: Vec<Histogram>,
    stop: AtomicBool,
    start: StartLine,
}

/// Acquisitions timed for the wait histogram: one in this many (a power of two).
const TIME_ONE_IN: u64 = 8;

struct Point {
    variant: &'static str,
    threads: usize,
    mutexes: usize,
    hold_ns: u64,
    duration: Duration,
}

impl Point {
    fn run<L: BenchLock>(&self) -> Result<MutexResult, String> {
        let iters = work::iterations_for(self.hold_ns as f64 / 1000.0);
        let sh = Arc::new(Shared {
            slots: (0..self.mutexes)
                .map(|_| Slot {
                    lock: L::create(),
                    counter: UnsafeCell::new(0),
                })
                .collect(),
            per_thread: (0..self.threads).map(|_| PerThread::default()).collect(),
            waits: (0..self.threads).map(|_| Histogram::new()).collect(),
            stop: AtomicBool::new(false),
            start: StartLine::new(self.threads),
        });
        let handles: Result<Vec<_>, std::io::Error> = (0..self.threads)
            .map(|t| {
                let sh = sh.clone();
                thread::Builder::new()
                    .name(format!("mutex-{t}"))
                    .stack_size(128 * 1024)
                    .spawn(move || worker(&sh, t, iters))
            })
            .collect();
        let handles = handles.map_err(|e| {
            // The threads started so far see the call-off and end.
            sh.start.call_off();
            crate::start::refused(self.threads, &e)
        })?;
        sh.start.start();
        let read = |sh: &Shared<L>| -> (Vec<u64>, HistogramSnapshot, u64, u64) {
            let loops = sh
                .per_thread
                .iter()
                .map(|p| p.loops.load(Ordering::Relaxed))
                .collect();
            let mut w = HistogramSnapshot::default();
            for h in &sh.waits {
                w.merge(&h.snapshot());
            }
            let (mut sleeps, mut wakeups) = (0, 0);
            for s in &sh.slots {
                if let Some((a, b)) = s.lock.sleeps_and_wakeups() {
                    sleeps += a;
                    wakeups += b;
                }
            }
            (loops, w, sleeps, wakeups)
        };
        let (t0, u0) = (Instant::now(), Usage::now());
        let (loops0, waits0, sleeps0, wakeups0) = read(&sh);
        thread::sleep(self.duration);
        let (loops1, waits1, sleeps1, wakeups1) = read(&sh);
        let (elapsed, usage) = (t0.elapsed(), Usage::now().since(&u0));
        sh.stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join()
                .map_err(|_| format!("{}: a benchmark thread panicked", self.variant))?;
        }
        // Every loop incremented its mutex's counter exactly once, under the lock.
        let total_loops: u64 = sh
            .per_thread
            .iter()
            .map(|p| p.loops.load(Ordering::Relaxed))
            .sum();
        // SAFETY: every worker has been joined; nothing else touches the counters.
        let counted: u64 = sh.slots.iter().map(|s| unsafe { *s.counter.get() }).sum();
        if counted != total_loops {
            return Err(format!(
                "{}: counter check failed: {counted} increments for {total_loops} loops (lost updates: the lock let two threads in)",
                self.variant
            ));
        }
        let per: Vec<u64> = loops1.iter().zip(&loops0).map(|(b, a)| b - a).collect();
        let loops: u64 = per.iter().sum();
        let n = loops.max(1) as f64;
        let (fewest, most) = (
            per.iter().copied().min().unwrap_or(0),
            per.iter().copied().max().unwrap_or(0),
        );
        let waits = waits1.since(&waits0);
        let counted_sleeps = sh.slots[0].lock.sleeps_and_wakeups().is_some();
        let sleeps = sleeps1 - sleeps0;
        let wakeups = wakeups1 - wakeups0;
        let user = usage.user.as_nanos() as f64;
        let sys = usage.sys.as_nanos() as f64;
        Ok(MutexResult {
            variant: self.variant,
            threads: self.threads,
            mutexes: self.mutexes,
            hold_ns: self.hold_ns,
            ns_per_loop: elapsed.as_nanos() as f64 / n,
            cpu_ns_per_loop: (user + sys) / n,
            user_ns_per_loop: user / n,
            sys_ns_per_loop: sys / n,
            cs_per_loop: usage.context_switches() as f64 / n,
            wakeups_per_acquire: counted_sleeps.then(|| {
                if sleeps == 0 {
                    0.0
                } else {
                    wakeups as f64 / sleeps as f64
                }
            }),
            sleeps_per_loop: counted_sleeps.then(|| sleeps as f64 / n),
            fairness: if most == 0 {
                0.0
            } else {
                fewest as f64 / most as f64
            },
            wait_p50_ns: waits.quantile(0.5),
            wait_p99_ns: waits.quantile(0.99),
            wait_max_ns: waits.max(),
            loops,
            runs_ns_per_loop: vec![elapsed.as_nanos() as f64 / n],
        })
    }
}

fn worker<L: BenchLock>(sh: &Shared<L>, t: usize, iters: u64) {
    let slot = &sh.slots[t % sh.slots.len()];
    let mine = &sh.per_thread[t];
    let hist = &sh.waits[t];
    if !sh.start.ready() {
        return;
    }
    let mut n = 0u64;
    while !sh.stop.load(Ordering::Relaxed) {
        let timed = n.is_multiple_of(TIME_ONE_IN);
        let start = timed.then(Instant::now);
        slot.lock.with(|| {
            if let Some(s) = start {
                hist.record(s.elapsed().as_nanos() as u64);
            }
            // SAFETY: the lock is held; only holders touch the counter.
            unsafe { *slot.counter.get() += 1 };
            if iters > 0 {
                work::spin(iters);
            }
        });
        n += 1;
        mine.loops.store(n, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_runs_and_passes_its_counter_check() {
        for v in LockVariant::ALL {
            let r = measure(v, 4, 2, 100, Duration::from_millis(20)).unwrap();
            assert_eq!(r.variant, v.name());
            assert!(r.ns_per_loop > 0.0, "{r:?}");
            assert_eq!(
                r.wakeups_per_acquire.is_some(),
                matches!(v, LockVariant::Turnstile | LockVariant::Innodb),
                "{r:?}"
            );
        }
    }

    #[test]
    fn repeated_points_report_the_median_run_and_every_run() {
        let cfg = MutexBenchConfig {
            variants: vec![LockVariant::Turnstile, LockVariant::Std],
            threads: vec![2],
            mutexes: vec![1],
            hold_ns: vec![0],
            duration: Duration::from_millis(10),
            repeat: 3,
        };
        assert_eq!((cfg.points(), cfg.runs()), (2, 6));
        let mut heard = 0;
        let r = run(&cfg, &mut |_| heard += 1).unwrap();
        assert_eq!(heard, 6);
        assert_eq!(r.results.len(), 2);
        for p in &r.results {
            let mut runs = p.runs_ns_per_loop.clone();
            assert_eq!(runs.len(), 3);
            runs.sort_by(f64::total_cmp);
            assert_eq!(p.ns_per_loop, runs[1], "{p:?}");
        }
        let mut bad = cfg.clone();
        bad.repeat = 0;
        assert!(bad.validate().unwrap_err().contains("repeat"));
    }

    #[test]
    fn unknown_variants_and_bad_sizes_are_rejected() {
        assert!(LockVariant::parse("futex")
            .unwrap_err()
            .contains("parking_lot"));
        assert_eq!(
            LockVariant::parse("pthread-adaptive").unwrap(),
            LockVariant::PthreadAdaptive
        );
        let mut c = MutexBenchConfig::quick();
        c.mutexes = vec![0];
        assert!(c.validate().unwrap_err().contains("mutex counts"));
    }
}
