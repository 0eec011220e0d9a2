//! Futexes and pinning: the raw wait/wake primitives every measurement hands its token with, and
//! pinning threads to CPUs so that a measured switch or wake-up happens where it is meant to.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Barrier;
use std::thread;

/// Sleeps while `word` holds `expected` (returns at once if it does not; may return early).
pub(super) fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: FUTEX_WAIT reads the aligned u32 at `word.as_ptr()`, valid for the whole call
    // since `word` is borrowed; the timeout pointer is null (wait without limit), which the
    // kernel accepts. The kernel compares and sleeps atomically, so no wake is lost.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

/// Wakes one thread sleeping on `word`; returns how many were woken (0 or 1).
pub(super) fn futex_wake(word: &AtomicU32) -> i64 {
    // SAFETY: FUTEX_WAKE uses the address only as a key to find sleepers; it is a valid,
    // aligned u32 for the whole call since `word` is borrowed.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        ) as i64
    }
}

/// Takes the token from `word` (1 → 0), sleeping until it is there.
pub(crate) fn take(word: &AtomicU32) {
    while word.swap(0, Ordering::AcqRel) == 0 {
        futex_wait(word, 0);
    }
}

/// Puts the token in `word` and wakes its owner.
pub(crate) fn give(word: &AtomicU32) {
    word.store(1, Ordering::Release);
    futex_wake(word);
}

/// The CPUs this process may run on.
pub(crate) fn allowed_cpus() -> Result<Vec<usize>, String> {
    // SAFETY: `cpu_set_t` is a plain bit array, for which all-zero bytes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: sched_getaffinity writes at most `size_of::<cpu_set_t>()` bytes (the size we
    // pass) into `set`, which we own and which outlives the call; pid 0 = the calling thread.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(format!(
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` < CPU_SETSIZE, the number of CPUs a `cpu_set_t` holds, so CPU_ISSET
        // reads inside `set`.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Pins the calling thread to `cpu`.
pub(crate) fn pin_to(cpu: usize) -> Result<(), String> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(format!("CPU {cpu} is beyond CPU_SETSIZE"));
    }
    // SAFETY: all-zero bytes is the empty `cpu_set_t`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE (checked above), so CPU_SET writes inside `set`; then
    // sched_setaffinity reads `size_of::<cpu_set_t>()` bytes from `set`, which we own; pid 0 =
    // the calling thread only.
    let r = unsafe {
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        return Err(format!(
            "sched_setaffinity to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Runs `a` and `b` on two threads pinned to `cpu`, each starting once both are pinned and
/// have run their setup (`sa`, `sb`); returns what `a` returns. Errors if either can't pin.
pub(super) fn pinned_pair<SA, SB, A, B, T>(
    cpu: usize,
    sa: SA,
    sb: SB,
    a: A,
    b: B,
) -> Result<T, String>
where
    SA: FnOnce() -> Vec<u8> + Send,
    SB: FnOnce() -> Vec<u8> + Send,
    A: FnOnce(Vec<u8>) -> T + Send,
    B: FnOnce(Vec<u8>) + Send,
    T: Send,
{
    let barrier = Barrier::new(2);
    let failed = AtomicBool::new(false);
    thread::scope(|s| {
        let hb = s.spawn(|| {
            let pinned = pin_to(cpu);
            failed.fetch_or(pinned.is_err(), Ordering::Relaxed);
            let buf = sb();
            barrier.wait();
            if !failed.load(Ordering::Relaxed) {
                b(buf);
            }
            pinned
        });
        let ha = s.spawn(|| {
            let pinned = pin_to(cpu);
            failed.fetch_or(pinned.is_err(), Ordering::Relaxed);
            let buf = sa();
            barrier.wait();
            let r = (!failed.load(Ordering::Relaxed)).then(|| a(buf));
            pinned.map(|_| r)
        });
        let ra = ha.join().map_err(|_| "a measuring thread panicked")?;
        hb.join().map_err(|_| "a measuring thread panicked")??;
        ra?.ok_or_else(|| "could not pin both threads".to_string())
    })
}

/// Sets the flag when dropped, so spinners stop even if the measurement fails or panics.
pub(super) struct StopOnDrop<'a>(pub(super) &'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
