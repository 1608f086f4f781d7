//! A fixed-bucket latency histogram (Prometheus `_bucket`/`_sum`/`_count`): one atomic per
//! bucket, so observing is a few relaxed additions and no lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in seconds (the last bucket, +Inf, is implicit): 100 µs to 10 s,
/// about 2.5x apart, covering a point read on an idle server to a request held by server-side
/// retry.
pub const BUCKET_BOUNDS_SECONDS: [f64; 15] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0,
];

const BUCKETS: usize = BUCKET_BOUNDS_SECONDS.len() + 1;

#[derive(Debug)]
pub struct Histogram {
    /// Observations per bucket (not cumulative; the exporter sums them).
    buckets: [AtomicU64; BUCKETS],
    sum_micros: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl Histogram {
    pub const fn new() -> Histogram {
        #[allow(clippy::declare_interior_mutable_const)]
        const Z: AtomicU64 = AtomicU64::new(0);
        Histogram {
            buckets: [Z; BUCKETS],
            sum_micros: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = BUCKET_BOUNDS_SECONDS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS - 1);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(
            d.as_micros().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
    }

    /// Cumulative counts, one per bound and the last for +Inf (Prometheus `le` buckets).
    pub fn cumulative(&self) -> [u64; BUCKETS] {
        let mut out = [0; BUCKETS];
        let mut total = 0;
        for (o, b) in out.iter_mut().zip(&self.buckets) {
            total += b.load(Ordering::Relaxed);
            *o = total;
        }
        out
    }

    pub fn count(&self) -> u64 {
        self.cumulative()[BUCKETS - 1]
    }

    pub fn sum_seconds(&self) -> f64 {
        self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_with_inf_last() {
        let h = Histogram::new();
        h.observe(Duration::from_micros(80));
        h.observe(Duration::from_millis(2));
        h.observe(Duration::from_secs(30));
        let c = h.cumulative();
        assert_eq!(c[0], 1);
        assert_eq!(c[4], 2); // le 0.0025
        assert_eq!(c[BUCKET_BOUNDS_SECONDS.len() - 1], 2); // le 10
        assert_eq!(c[BUCKETS - 1], 3);
        assert!((h.sum_seconds() - 30.00208).abs() < 1e-9);
    }
}
