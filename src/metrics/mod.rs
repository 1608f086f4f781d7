//! The process's metrics registry: counters, gauges, latency histograms and the recent splits
//! (`splits.rs`), that any layer
//! updates without importing upward (this module is a leaf: it imports nothing of the crate),
//! read by the HTTP exporter (`server/http/exporter.rs`).
//!
//! Everything here is a fixed set of atomics: the number of series is a constant (operations x
//! outcomes x histogram buckets), whatever the load. Per-table and per-physical-partition figures
//! are not kept here: the exporter reads them from the partition maps when scraped, and bounds
//! how many it lists.

mod histogram;
mod splits;

pub use histogram::{Histogram, BUCKET_BOUNDS_SECONDS};
pub use splits::{RecentSplits, SplitEvent, RECENT_SPLITS};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// A monotonic counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub const fn new() -> Counter {
        Counter(AtomicU64::new(0))
    }
    pub fn inc(&self) {
        self.add(1);
    }
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down (open connections).
#[derive(Debug, Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    pub const fn new() -> Gauge {
        Gauge(AtomicI64::new(0))
    }
    pub fn add(&self, n: i64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The request kinds counted: the CQL messages that run statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Query,
    Prepare,
    Execute,
    Batch,
}

impl Operation {
    pub const ALL: [Operation; 4] = [
        Operation::Query,
        Operation::Prepare,
        Operation::Execute,
        Operation::Batch,
    ];
    /// The `operation` label value.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Query => "query",
            Operation::Prepare => "prepare",
            Operation::Execute => "execute",
            Operation::Batch => "batch",
        }
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Rejected over its throughput budget (Overloaded, Cosmos DB's 429).
    Throttled,
    /// Read or write timeout (server-side retry gave up).
    Timeout,
    /// Any other error (invalid request, syntax, unavailable, ...).
    Error,
}

impl Outcome {
    pub const ALL: [Outcome; 4] = [
        Outcome::Success,
        Outcome::Throttled,
        Outcome::Timeout,
        Outcome::Error,
    ];
    /// The `outcome` label value.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Throttled => "throttled",
            Outcome::Timeout => "timeout",
            Outcome::Error => "error",
        }
    }
}

/// Request units are counted in millionths, so that a counter of integers adds them exactly
/// enough (a point read costs 1 RU; charges have a few decimals).
pub const MICRO_RU_PER_RU: f64 = 1e6;

/// The registry: one static instance, [`global`].
pub struct Registry {
    /// Requests by operation and outcome: `requests[op][outcome]`.
    requests: [[Counter; 4]; 4],
    /// Request latency by operation (from decoding to the response being queued).
    latency: [Histogram; 4],
    /// Request units charged to requests, in micro-RU.
    pub ru_charged_micro: Counter,
    pub connections_open: Gauge,
    pub connections_accepted: Counter,
    /// Physical partition splits committed.
    pub splits: Counter,
    /// The latest of them.
    pub recent_splits: RecentSplits,
    /// Compactions of the data key space that ran the purge filter.
    pub compactions: Counter,
    /// Entries the purge filter dropped or rewrote (tombstones, expired cells, shadowed rows).
    pub purged_entries: Counter,
    /// Partitions whose tombstones the sweeper removed.
    pub swept_partitions: Counter,
    /// Point reads the embedded store's row cache answered, and those it sent to the store.
    pub row_cache_hits: Counter,
    pub row_cache_misses: Counter,
    /// Statements slower than `log.slow_query_ms`.
    pub slow_queries: Counter,
    /// HTTP requests answered by the metrics/dashboard listener.
    pub http_requests: Counter,
    /// Requests this node sent on to the owner of their partition (cluster mode): a driver
    /// that routes token-aware keeps this near zero.
    pub forwarded_requests: Counter,
}

static GLOBAL: Registry = Registry::new();

/// The process's registry.
pub fn global() -> &'static Registry {
    &GLOBAL
}

impl Registry {
    const fn new() -> Registry {
        #[allow(clippy::declare_interior_mutable_const)]
        const C: Counter = Counter::new();
        #[allow(clippy::declare_interior_mutable_const)]
        const ROW: [Counter; 4] = [C; 4];
        #[allow(clippy::declare_interior_mutable_const)]
        const H: Histogram = Histogram::new();
        Registry {
            requests: [ROW; 4],
            latency: [H; 4],
            ru_charged_micro: Counter::new(),
            connections_open: Gauge::new(),
            connections_accepted: Counter::new(),
            splits: Counter::new(),
            recent_splits: RecentSplits::new(),
            compactions: Counter::new(),
            purged_entries: Counter::new(),
            swept_partitions: Counter::new(),
            row_cache_hits: Counter::new(),
            row_cache_misses: Counter::new(),
            slow_queries: Counter::new(),
            http_requests: Counter::new(),
            forwarded_requests: Counter::new(),
        }
    }

    /// Records one completed request.
    pub fn request(&self, op: Operation, outcome: Outcome, elapsed: std::time::Duration) {
        self.requests[op as usize][outcome as usize].inc();
        self.latency[op as usize].observe(elapsed);
    }

    pub fn requests(&self, op: Operation, outcome: Outcome) -> u64 {
        self.requests[op as usize][outcome as usize].get()
    }

    pub fn latency(&self, op: Operation) -> &Histogram {
        &self.latency[op as usize]
    }

    /// Adds a request's charge (negative or NaN charges are ignored).
    pub fn charge_ru(&self, ru: f64) {
        if ru > 0.0 {
            self.ru_charged_micro
                .add((ru * MICRO_RU_PER_RU).round() as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_by_operation_and_outcome() {
        let r = Registry::new();
        r.request(
            Operation::Execute,
            Outcome::Throttled,
            std::time::Duration::from_millis(3),
        );
        r.request(
            Operation::Execute,
            Outcome::Success,
            std::time::Duration::from_micros(50),
        );
        assert_eq!(r.requests(Operation::Execute, Outcome::Throttled), 1);
        assert_eq!(r.requests(Operation::Execute, Outcome::Success), 1);
        assert_eq!(r.requests(Operation::Query, Outcome::Success), 0);
        assert_eq!(r.latency(Operation::Execute).count(), 2);
        r.charge_ru(1.25);
        r.charge_ru(-3.0);
        assert_eq!(r.ru_charged_micro.get(), 1_250_000);
    }
}
