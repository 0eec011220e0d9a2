//! Small statistics helpers for reporting repeated measurements, latencies and fairness.

/// Serialises a duration as whole milliseconds (the reports' `duration_ms` fields).
pub fn ser_ms<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

/// A list from the command line names each value once (`name` spells a value): a repeated
/// one ran twice and, in ratios, compared a run with itself.
pub fn each_once<T: PartialEq>(
    what: &str,
    v: &[T],
    name: impl Fn(&T) -> String,
) -> Result<(), String> {
    for (i, x) in v.iter().enumerate() {
        if v[..i].contains(x) {
            return Err(format!("{what}: {} is given twice", name(x)));
        }
    }
    Ok(())
}

/// The median of `xs` (mean of the middle two for an even count); NaN when empty.
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// The value at quantile `q` (0.0..=1.0) of ascending `sorted`, nearest rank: the smallest
/// value with at least `q` of the values at or below it; `q = 1.0` is the maximum; 0 if empty.
pub fn quantile_sorted(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Clients that completed nothing: the zeros of `per_client` (completions per client).
pub fn starved(per_client: &[u64]) -> usize {
    per_client.iter().filter(|&&n| n == 0).count()
}

/// Jain's fairness index over per-client completions: (Σx)² ÷ (n · Σx²). 1 when every client
/// completed the same, 1/n when one client completed everything; 0 when nobody completed
/// anything (or there are no clients), where the index is undefined.
pub fn jain(per_client: &[u64]) -> f64 {
    let (sum, sq) = per_client.iter().fold((0.0, 0.0), |(s, q), &x| {
        let x = x as f64;
        (s + x, q + x * x)
    });
    if sq > 0.0 {
        sum * sum / (per_client.len() as f64 * sq)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_and_starved_on_hand_made_counts() {
        assert_eq!(jain(&[5, 5, 5, 5]), 1.0);
        assert_eq!(starved(&[5, 5, 5, 5]), 0);
        // One client doing everything among n: 1/n, and the other n − 1 starved.
        assert!((jain(&[0, 12, 0, 0]) - 0.25).abs() < 1e-12);
        assert_eq!(starved(&[0, 12, 0, 0]), 3);
        assert_eq!(jain(&[0, 0, 0]), 0.0);
        assert_eq!(starved(&[0, 0, 0]), 3);
        assert_eq!(jain(&[]), 0.0);
        // Two clients at 1 and 3: 16 / (2 · 10).
        assert!((jain(&[1, 3]) - 0.8).abs() < 1e-12);
    }

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(quantile_sorted(&v, 0.5), 500);
        assert_eq!(quantile_sorted(&v, 0.99), 990);
        assert_eq!(quantile_sorted(&v, 0.999), 999);
        assert_eq!(quantile_sorted(&v, 1.0), 1000);
        assert_eq!(quantile_sorted(&v, 0.0), 1);
        assert_eq!(quantile_sorted(&[], 0.99), 0);
        assert_eq!(quantile_sorted(&[7], 0.999), 7);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
