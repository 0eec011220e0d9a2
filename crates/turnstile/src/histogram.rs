//! A log-linear latency histogram that threads record into and any thread can read.
//!
//! Values (nanoseconds) below 16 get a bucket each; above, every power of two is split into 8
//! linear sub-buckets, so any reported value is within 12.5 % of the true one (the same
//! trade-off HdrHistogram makes with one significant figure; we need lock-free recording
//! through `&self`, which `hdrhistogram::Histogram::record(&mut self)` cannot give). 496
//! buckets cover the whole `u64` range.
//!
//! [`Histogram::record`] is safe from any number of threads (relaxed read-modify-writes). The
//! crate's own hot paths that are provably single-writer (an instrumented lock records its wait
//! while holding the lock) use a crate-private variant that is a relaxed load and store per
//! field: nothing is lost when there is one writer, and it is not offered to users, who could
//! not keep that promise checked. Readers may see a record half-applied (count bumped, sum not
//! yet); snapshots are for monitoring, not accounting.

use std::fmt;

// Monitoring data is not part of any synchronisation protocol: plain std atomics even under
// loom, which keeps the model checker's state space to the gate's real protocol.
use std::sync::atomic::{AtomicU64, Ordering};

/// Sub-bucket bits per power of two: 2^3 = 8 sub-buckets, ≤ 12.5 % relative error.
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
/// Values below this get one exact bucket each.
const LINEAR: u64 = 2 * SUB;
/// Number of buckets: 16 exact, then 8 per power of two from 2^4 to 2^63.
pub const BUCKETS: usize = (LINEAR + (64 - (SUB_BITS + 1) as u64) * SUB) as usize;

#[inline]
fn bucket_of(v: u64) -> usize {
    if v < LINEAR {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
    (LINEAR + (e - (SUB_BITS + 1)) as u64 * SUB + sub) as usize
}

/// Smallest and largest value that fall in bucket `i`.
fn bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < LINEAR {
        return (i, i);
    }
    let e = (i - LINEAR) / SUB + (SUB_BITS + 1) as u64;
    let sub = (i - LINEAR) % SUB;
    let width = 1u64 << (e - SUB_BITS as u64);
    let low = (SUB + sub) << (e - SUB_BITS as u64);
    (low, low + (width - 1))
}

/// A concurrent log-linear histogram of nanosecond values. See the module documentation.
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum: AtomicU64,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl fmt::Debug for Histogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.snapshot().fmt(f)
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }

    /// Records one value (nanoseconds), from any thread.
    ///
    /// ```
    /// let h = turnstile::Histogram::new();
    /// h.record(1_500);
    /// h.record(0);
    /// let s = h.snapshot();
    /// assert_eq!((s.count(), s.max()), (2, 1_500));
    /// ```
    #[inline]
    pub fn record(&self, v: u64) {
        self.buckets[bucket_of(v)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(v, Ordering::Relaxed);
        self.max.fetch_max(v, Ordering::Relaxed);
    }

    /// Records one value without read-modify-writes. The caller guarantees that no other
    /// thread records into this histogram meanwhile (concurrent recorders would lose counts,
    /// never corrupt memory).
    #[inline]
    pub(crate) fn record_single_writer(&self, v: u64) {
        bump(&self.buckets[bucket_of(v)], 1);
        bump(&self.count, 1);
        bump(&self.sum, v);
        if v > self.max.load(Ordering::Relaxed) {
            self.max.store(v, Ordering::Relaxed);
        }
    }

    /// A copy of the current counts.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            count: self.count.load(Ordering::Relaxed),
            sum: self.sum.load(Ordering::Relaxed),
            max: self.max.load(Ordering::Relaxed),
        }
    }
}

#[inline]
fn bump(a: &AtomicU64, by: u64) {
    a.store(
        a.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

/// A plain copy of a histogram: merge several, ask for quantiles.
#[derive(Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    buckets: Vec<u64>,
    count: u64,
    sum: u64,
    max: u64,
}

impl Default for HistogramSnapshot {
    fn default() -> Self {
        HistogramSnapshot {
            buckets: vec![0; BUCKETS],
            count: 0,
            sum: 0,
            max: 0,
        }
    }
}

impl fmt::Debug for HistogramSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HistogramSnapshot")
            .field("count", &self.count)
            .field("p50", &self.quantile(0.5))
            .field("p99", &self.quantile(0.99))
            .field("max", &self.max)
            .finish()
    }
}

impl HistogramSnapshot {
    /// Adds `other`'s counts into this one.
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.sum = self.sum.wrapping_add(other.sum);
        self.max = self.max.max(other.max);
    }

    /// The values recorded after `earlier` was taken from the same histogram. The maximum
    /// cannot be split by time exactly: it is the upper end of the highest bucket the window
    /// recorded into (at most 12.5 % above the window's true maximum: a bucket spans up to
    /// an eighth of its lower end), or the history's maximum if that is lower; a window
    /// with nothing recorded has maximum 0. (The history's maximum itself
    /// would put a value from before the window, a start-up burst say, into the window's
    /// maximum and top quantiles.)
    pub fn since(&self, earlier: &HistogramSnapshot) -> HistogramSnapshot {
        let buckets: Vec<u64> = self
            .buckets
            .iter()
            .zip(&earlier.buckets)
            .map(|(a, b)| a.saturating_sub(*b))
            .collect();
        let max = buckets
            .iter()
            .rposition(|&n| n > 0)
            .map_or(0, |i| bucket_range(i).1.min(self.max));
        HistogramSnapshot {
            buckets,
            count: self.count.saturating_sub(earlier.count),
            sum: self.sum.wrapping_sub(earlier.sum),
            max,
        }
    }

    /// Adds `n` values of zero (for callers that count zeros instead of recording them).
    pub fn add_zeros(&mut self, n: u64) {
        self.buckets[0] += n;
        self.count += n;
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Largest value recorded.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Mean of the values recorded (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// The value at quantile `q` (0.0..=1.0): the midpoint of the bucket holding it, never above
    /// the maximum recorded (which `q = 1.0` returns exactly); 0 when empty. Exact below 16,
    /// within 12.5 % above.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        if rank >= self.count {
            return self.max;
        }
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (lo, hi) = bucket_range(i);
                return (lo + (hi - lo) / 2).min(self.max);
            }
        }
        self.max
    }

    /// The fraction of values that are exactly zero (bucket 0): admissions that did not wait.
    pub fn zero_fraction(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.buckets[0] as f64 / self.count as f64
        }
    }

    /// Sum of the values recorded, nanoseconds (wrapping on overflow; a reader may see a record
    /// half-applied, so it can disagree with the buckets by one value).
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// The non-empty buckets in increasing order, as `(low, high, count)`: `count` values
    /// recorded in `low..=high` (nanoseconds). Exporters build their own bucket layouts from
    /// these (see [`crate::metrics`]).
    pub fn nonzero_buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| {
                let (lo, hi) = bucket_range(i);
                (lo, hi, n)
            })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_window_reports_its_own_maximum_not_the_historys() {
        let h = Histogram::new();
        h.record(1_000_000_000);
        let before = h.snapshot();
        for _ in 0..5 {
            h.record(10);
        }
        let w = h.snapshot().since(&before);
        assert_eq!(w.count(), 5);
        assert_eq!((w.max(), w.quantile(0.99), w.quantile(1.0)), (10, 10, 10));
        // Within bucket precision when the value is not exact, never below it.
        h.record(1_000);
        let w = h.snapshot().since(&before);
        assert!(
            (1_000..1_000 + 1_000 / 16).contains(&w.max()),
            "{}",
            w.max()
        );
        // Nothing recorded in the window.
        let now = h.snapshot();
        assert_eq!(h.snapshot().since(&now).max(), 0);
    }

    #[test]
    fn buckets_tile_the_u64_range_without_gaps() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        let mut next = 0u64;
        for i in 0..BUCKETS {
            let (lo, hi) = bucket_range(i);
            assert_eq!(lo, next, "bucket {i} starts where {} ended", i.max(1) - 1);
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi), i);
            next = hi.wrapping_add(1);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
    }

    #[test]
    fn quantiles_are_within_an_eighth_of_the_true_value() {
        let h = Histogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let s = h.snapshot();
        for (q, truth) in [
            (0.5, 5_000_000f64),
            (0.99, 9_900_000.0),
            (0.999, 9_990_000.0),
        ] {
            let got = s.quantile(q) as f64;
            assert!(
                (got - truth).abs() / truth <= 0.125,
                "q{q}: {got} vs {truth}"
            );
        }
        assert_eq!(s.max(), 10_000_000);
        assert_eq!(s.count(), 10_000);
        assert!((s.mean() - 5_000_500.0).abs() < 1.0);
    }

    #[test]
    fn zeros_are_counted_and_merges_add_up() {
        let a = Histogram::new();
        let b = Histogram::new();
        for _ in 0..3 {
            a.record(0);
        }
        b.record(42);
        let mut s = a.snapshot();
        s.merge(&b.snapshot());
        assert_eq!(s.count(), 4);
        assert_eq!(s.quantile(0.5), 0);
        assert_eq!(s.quantile(1.0), 42);
        assert!((s.zero_fraction() - 0.75).abs() < 1e-9);
        assert_eq!(HistogramSnapshot::default().quantile(0.99), 0);
    }

    #[test]
    fn since_keeps_only_the_later_values() {
        let h = Histogram::new();
        h.record(5);
        let early = h.snapshot();
        h.record(1000);
        h.record(1000);
        let d = h.snapshot().since(&early);
        assert_eq!(d.count(), 2);
        let p50 = d.quantile(0.5) as f64;
        assert!((p50 - 1000.0).abs() / 1000.0 <= 0.125, "{p50}");
        assert!((d.mean() - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn a_windows_maximum_is_never_below_its_true_maximum_nor_more_than_an_eighth_above() {
        // The history's maximum is before the window (a warm-up's), so the window's comes
        // from its top bucket: the bound the documentation gives, at every bucket offset.
        for v in (16u64..5000).chain([1 << 20, (1 << 20) + 1, (1 << 21) - 1, u64::MAX / 4]) {
            let h = Histogram::new();
            h.record(u64::MAX / 2);
            let before = h.snapshot();
            h.record(v);
            let max = h.snapshot().since(&before).max();
            assert!(max >= v && max - v <= v / 8, "{v}: {max}");
        }
    }
}
