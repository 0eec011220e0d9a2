//! The arithmetic over samples: quantiles, least-squares and robust lines, and the cache-refill
//! estimate. Pure functions of the numbers measured, so they are tested on fixed inputs.

use super::{round1, Latencies};
use crate::stats::median;

/// The busy-machine wake-up line through the loaded points: Theil-Sen (the median of the
/// pairwise slopes; the intercept the median of `y − slope × x`), robust to one point that
/// jumped, which would drag a least-squares line's intercept up. A slope at or below 0 is a
/// flat line at the points' median: the model takes no negative slope, and the intercept of a
/// sloped line whose slope is then dropped would not be the level the points show.
pub fn busy_wake_line(xs: &[f64], ys: &[f64]) -> (f64, f64) {
    let n = xs.len().min(ys.len());
    if n == 0 {
        return (0.0, 0.0);
    }
    let mut slopes = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            if xs[j] != xs[i] {
                slopes.push((ys[j] - ys[i]) / (xs[j] - xs[i]));
            }
        }
    }
    let slope = if slopes.is_empty() {
        0.0
    } else {
        median(&slopes)
    };
    if slope <= 0.0 {
        return (0.0, median(&ys[..n]));
    }
    let at0: Vec<f64> = (0..n).map(|i| ys[i] - slope * xs[i]).collect();
    (slope, median(&at0))
}

/// The cache refill from paired repetitions (each repetition's run with the working set and
/// its warm touch ran back to back): (the median of `with − small − warm`, that if more than
/// half the pairs are positive, else 0). Pairing matters: the difference of two unpaired
/// medians can read a refill where most pairs show none.
pub fn refill_from_pairs(with_ws: &[f64], warm: &[f64], small: f64) -> (f64, f64) {
    let d: Vec<f64> = with_ws
        .iter()
        .zip(warm)
        .map(|(w, t)| w - small - t)
        .collect();
    if d.is_empty() {
        return (0.0, 0.0);
    }
    let raw = median(&d);
    let positive = d.iter().filter(|&&x| x > 0.0).count();
    (
        raw,
        if positive * 2 > d.len() {
            raw.max(0.0)
        } else {
            0.0
        },
    )
}

/// Least-squares line through all points: (slope, intercept); (0, mean) when the xs do not
/// vary.
pub fn least_squares(xs: &[f64], ys: &[f64]) -> (f64, f64) {
    let n = xs.len().min(ys.len()) as f64;
    if n == 0.0 {
        return (0.0, 0.0);
    }
    let mx = xs.iter().sum::<f64>() / n;
    let my = ys.iter().sum::<f64>() / n;
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    if sxx == 0.0 {
        return (0.0, my);
    }
    let slope = sxy / sxx;
    (slope, my - slope * mx)
}

/// The `q` quantile of sorted `v` (nearest rank).
pub(super) fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Summarises (latencies, discarded) from [`wake_samples`](super::wake::wake_samples).
pub(super) fn latencies((mut lat, discarded): (Vec<f64>, usize)) -> Latencies {
    lat.sort_by(|a, b| a.total_cmp(b));
    Latencies {
        samples: lat.len(),
        discarded,
        median_ns: round1(median(&lat)),
        p10_ns: round1(quantile(&lat, 0.1)),
        p90_ns: round1(quantile(&lat, 0.9)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_wake_up_line_ignores_one_jumped_point_and_is_flat_at_the_median_without_a_rise() {
        // Loaded points at 4.3-4.5 us but one at 13.7 us: least squares over every point
        // puts the intercept near 6 us.
        let xs = [1.5, 2.5, 4.5, 8.5, 16.5, 32.5];
        let ys = [4291.0, 4387.0, 13721.0, 4447.0, 4491.5, 4527.0];
        let (slope, at0) = busy_wake_line(&xs, &ys);
        assert!((0.0..20.0).contains(&slope), "{slope}");
        assert!((4_200.0..=4_600.0).contains(&at0), "{at0}");
        // Falling with load: a flat line at the median, not the intercept of a line whose
        // slope is dropped (4,909 ns).
        let ys3 = [6685.0, 3746.0, 3785.0, 4412.0, 3766.0, 3971.0];
        assert_eq!(busy_wake_line(&xs, &ys3), (0.0, median(&ys3)));
        // A clean rise is recovered.
        let ys_line: Vec<f64> = xs.iter().map(|x| 1000.0 + 50.0 * x).collect();
        assert_eq!(busy_wake_line(&xs, &ys_line), (50.0, 1000.0));
        assert_eq!(busy_wake_line(&[], &[]), (0.0, 0.0));
    }

    #[test]
    fn a_cache_refill_that_does_not_show_above_the_pairs_noise_is_zero() {
        // Unpaired medians would read a 24 us refill; paired, four of nine are negative and
        // their median is -12.9 us.
        let with = [
            401904.4, 387430.6, 634113.8, 486186.7, 408305.0, 419422.9, 510244.1, 516875.9,
            702274.2,
        ];
        let warm = [
            442121.4, 398651.8, 540434.6, 460315.1, 405575.7, 452613.0, 524122.9, 494262.5,
            896334.4,
        ];
        let (raw, refill) = refill_from_pairs(&with, &warm, 1641.3);
        assert!(raw < 0.0, "{raw}");
        assert_eq!(refill, 0.0);
        // Consistently positive pairs: kept.
        let (raw, refill) = refill_from_pairs(&[30e3, 31e3, 29e3], &[10e3, 10e3, 10e3], 2e3);
        assert_eq!((raw, refill), (18e3, 18e3));
    }

    #[test]
    fn least_squares_recovers_a_line_and_is_flat_without_spread() {
        let (m, b) = least_squares(&[1.0, 2.0, 3.0, 5.0], &[5.0, 7.0, 9.0, 13.0]);
        assert!((m - 2.0).abs() < 1e-9 && (b - 3.0).abs() < 1e-9);
        assert_eq!(least_squares(&[2.0, 2.0], &[1.0, 3.0]), (0.0, 2.0));
    }
}
