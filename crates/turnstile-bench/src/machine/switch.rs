//! Context switch and cache refill: threads pinned to one CPU hand a token back and forth, so
//! every hand-off is a real switch; with each thread touching a buffer of the per-core cache
//! share, the extra time over the small-set switch is the cost of refilling the cache.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::futex::{give, pin_to, pinned_pair, take};
use super::ns_per;
use crate::start::StartLine;

/// Bytes per cache line touched by [`touch`]: 64 on x86-64 and on the arm64 cores Linux
/// servers use. A larger line would only make the touch loop touch some lines twice.
pub(super) const CACHE_LINE: usize = 64;

/// Working set used for the cache-refill ping-pong when sysfs gives no cache topology: 1 MiB,
/// a typical per-core L2 / L3 share.
pub(super) const FALLBACK_CACHE_SHARE: usize = 1 << 20;

/// Cap on the cache-refill working set: 8 MiB per thread keeps one touch under a few
/// milliseconds at a few GB/s of memory bandwidth (so the measurement stays short) while
/// still far larger than any per-core L2.
pub(super) const MAX_CACHE_SHARE: usize = 8 << 20;

/// A token passed around a ring of `n` threads pinned to `cpu` (each wakes the next through
/// its futex word and sleeps), `switches` hand-offs in all: ns per switch. With hundreds of
/// threads each switch goes to a thread whose stack and kernel state have gone cold.
pub(super) fn ring_switch_ns(cpu: usize, n: usize, switches: u64) -> Result<f64, String> {
    let words: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
    let stop = AtomicBool::new(false);
    let left = std::sync::atomic::AtomicU64::new(switches);
    let ready = StartLine::new(n);
    let failed = AtomicBool::new(false);
    let elapsed = thread::scope(|s| {
        for i in 0..n {
            let (words, stop, left, ready, failed) = (&words, &stop, &left, &ready, &failed);
            thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn_scoped(s, move || {
                    failed.fetch_or(pin_to(cpu).is_err(), Ordering::Relaxed);
                    if !ready.ready() {
                        return;
                    }
                    loop {
                        take(&words[i]);
                        if stop.load(Ordering::Acquire) {
                            give(&words[(i + 1) % n]);
                            return;
                        }
                        if left.fetch_sub(1, Ordering::Relaxed) <= 1 {
                            stop.store(true, Ordering::Release);
                        }
                        give(&words[(i + 1) % n]);
                    }
                })
                .map_err(|e| {
                    // The ring's threads started so far see the call-off and end, so the
                    // scope can.
                    ready.call_off();
                    crate::start::refused(n, &e)
                })?;
        }
        ready.start();
        let t = Instant::now();
        give(&words[0]);
        while !stop.load(Ordering::Acquire) {
            thread::sleep(Duration::from_millis(1));
        }
        Ok::<_, String>(t.elapsed())
    })?;
    if failed.load(Ordering::Relaxed) {
        return Err(format!("could not pin the ring's threads to CPU {cpu}"));
    }
    Ok(ns_per(elapsed, switches))
}

/// Reads and writes one byte of every cache line of `buf`.
pub(super) fn touch(buf: &mut [u8]) {
    for line in buf.chunks_mut(CACHE_LINE) {
        line[0] = line[0].wrapping_add(1);
    }
    std::hint::black_box(buf);
}

/// A buffer of `bytes`, touched once so its pages are mapped.
pub(super) fn working_set(bytes: usize) -> Vec<u8> {
    let mut buf = vec![0u8; bytes];
    touch(&mut buf);
    buf
}

/// Two threads pinned to `cpu` hand a token back and forth `round_trips` times through two
/// futex words, each touching its own `ws_bytes` buffer on every turn (none if 0). Returns
/// (ns per switch, elapsed).
pub(super) fn ping_pong(
    cpu: usize,
    round_trips: u64,
    ws_bytes: usize,
) -> Result<(f64, Duration), String> {
    let to_a = AtomicU32::new(0);
    let to_b = AtomicU32::new(0);
    let elapsed = pinned_pair(
        cpu,
        || working_set(ws_bytes),
        || working_set(ws_bytes),
        |mut buf| {
            let t = Instant::now();
            for _ in 0..round_trips {
                touch(&mut buf);
                give(&to_b);
                take(&to_a);
            }
            t.elapsed()
        },
        |mut buf| {
            for _ in 0..round_trips {
                take(&to_b);
                touch(&mut buf);
                give(&to_a);
            }
        },
    )?;
    Ok((ns_per(elapsed, 2 * round_trips), elapsed))
}

/// One thread pinned to `cpu` touches its warm `bytes` buffer `touches` times: ns per touch.
pub(super) fn warm_touch_ns(cpu: usize, bytes: usize, touches: u64) -> Result<f64, String> {
    thread::scope(|s| {
        s.spawn(|| {
            pin_to(cpu)?;
            let mut buf = working_set(bytes);
            touch(&mut buf); // warm: the first touch mapped the pages, this one caches them
            let t = Instant::now();
            for _ in 0..touches {
                touch(&mut buf);
            }
            Ok(ns_per(t.elapsed(), touches))
        })
        .join()
        .map_err(|_| "the warm-touch thread panicked".to_string())?
    })
}

/// The per-core share of the last-level cache from sysfs (CPU 0's caches), capped at 8 MiB,
/// or 1 MiB without sysfs; with how it was found.
pub fn llc_share() -> (usize, String) {
    let dir = "/sys/devices/system/cpu/cpu0/cache";
    let mut best: Option<(u32, usize, usize, String)> = None; // level, bytes, sharing cpus, list
    let mut best_level = 0; // cache levels count from 1
    for i in 0.. {
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/index{i}/{f}"));
        let Ok(level) = read("level") else { break };
        if read("type").is_ok_and(|t| t.trim() == "Instruction") {
            continue;
        }
        let (Some(level), Some(bytes)) = (
            level.trim().parse::<u32>().ok(),
            read("size").ok().and_then(|s| parse_cache_size(&s)),
        ) else {
            continue;
        };
        let list = read("shared_cpu_list").unwrap_or_default();
        let sharing = count_cpu_list(&list).unwrap_or(1).max(1);
        if level > best_level {
            best_level = level;
            best = Some((level, bytes, sharing, list.trim().to_string()));
        }
    }
    match best {
        None => (
            FALLBACK_CACHE_SHARE,
            format!("no cache topology in {dir}: fallback 1 MiB"),
        ),
        Some((level, bytes, sharing, list)) => {
            let share = bytes / sharing;
            let capped = share.min(MAX_CACHE_SHARE);
            let mut s = format!(
                "L{level} {} KiB shared by {sharing} CPUs ({list}): {} KiB per core",
                bytes >> 10,
                share >> 10
            );
            if capped < share {
                s.push_str(", capped at 8 MiB");
            }
            (capped.max(CACHE_LINE), s)
        }
    }
}

/// Parses sysfs cache sizes: "32768K", "1M", "512".
pub(super) fn parse_cache_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mult) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 1 << 10),
        b'M' | b'm' => (&s[..s.len() - 1], 1 << 20),
        b'G' | b'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mult)
}

/// Counts the CPUs in a sysfs CPU list: "0-1,4,6-7" → 5.
pub(super) fn count_cpu_list(s: &str) -> Option<usize> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let mut n = 0;
    for part in s.split(',') {
        n += match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (lo.parse::<usize>().ok()?, hi.parse::<usize>().ok()?);
                hi.checked_sub(lo)? + 1
            }
            None => {
                part.parse::<usize>().ok()?;
                1
            }
        };
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_cache_sizes_and_cpu_lists_parse() {
        assert_eq!(parse_cache_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_cache_size("1M"), Some(1 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("K"), None);
        assert_eq!(count_cpu_list("0-1\n"), Some(2));
        assert_eq!(count_cpu_list("0-1,4,6-7"), Some(5));
        assert_eq!(count_cpu_list(""), None);
        assert_eq!(count_cpu_list("3-1"), None);
    }

    #[test]
    fn the_cache_share_is_at_most_8_mib() {
        let (bytes, how) = llc_share();
        assert!(
            (CACHE_LINE..=MAX_CACHE_SHARE).contains(&bytes),
            "{bytes}: {how}"
        );
    }
}
