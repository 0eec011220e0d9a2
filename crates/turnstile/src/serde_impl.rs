//! `serde::Serialize` for the monitoring types (feature `serde`); the derives live on the types,
//! the hand-written forms here. The crate documentation describes the shapes.

use std::time::Duration;

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::config::Policy;
use crate::histogram::HistogramSnapshot;

/// A duration as whole nanoseconds (saturating at `u64::MAX`, 584 years).
pub(crate) fn ns<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// An optional duration as whole nanoseconds, or `null`.
pub(crate) fn opt_ns<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ns(d, s),
        None => s.serialize_none(),
    }
}

/// A policy is its name, as on the command line: `"classic"`.
impl Serialize for Policy {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A summary: `count`, `sum_ns`, `max_ns`, `p50_ns`, `p90_ns`, `p99_ns`, `p999_ns` (from
/// [`HistogramSnapshot::quantile`], within 12.5 %) and `buckets`, the non-empty buckets as
/// `[low_ns, high_ns, count]` in increasing order.
impl Serialize for HistogramSnapshot {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let buckets: Vec<[u64; 3]> = self
            .nonzero_buckets()
            .map(|(lo, hi, n)| [lo, hi, n])
            .collect();
        let mut st = s.serialize_struct("HistogramSnapshot", 8)?;
        st.serialize_field("count", &self.count())?;
        st.serialize_field("sum_ns", &self.sum())?;
        st.serialize_field("max_ns", &self.max())?;
        st.serialize_field("p50_ns", &self.quantile(0.5))?;
        st.serialize_field("p90_ns", &self.quantile(0.9))?;
        st.serialize_field("p99_ns", &self.quantile(0.99))?;
        st.serialize_field("p999_ns", &self.quantile(0.999))?;
        st.serialize_field("buckets", &buckets)?;
        st.end()
    }
}
