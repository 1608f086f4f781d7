//! Provisioned throughput and rate limiting per physical partition.
//!
//! A table's throughput (its own `cosmosdb_provisioned_throughput` or autoscale max, else its
//! keyspace's) is divided evenly among its physical partitions, at most 10,000 RU/s each. Each
//! partition has a token bucket holding up to one second of its budget. A request is admitted
//! while the bucket is positive and its full charge is then debited (the bucket may go into
//! debt, so requests costing more than one second of budget still run); an over-budget request
//! gets Overloaded (0x1001) with Cosmos DB's message and `RetryAfterMs` = the time until the
//! bucket is positive again. Writes are admitted before anything is stored.
//!
//! Burst (`throughput.burst`): budget unused beyond the one-second bucket is banked, up to five
//! minutes of it; a request finding the bucket empty may spend the bank at up to 3,000 RU/s.
//!
//! Tables with no throughput anywhere (neither table nor keyspace) are accounted against
//! `throughput.default_table_ru` but not throttled (see README: so that bulk loads of tables
//! created without throughput keep working).

use super::map::{PhysicalPartition, RU_PER_PHYSICAL_PARTITION};
use crate::query::QueryError;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Settings `throughput.*`.
#[derive(Debug, Clone)]
pub struct ThroughputLimits {
    pub default_table_ru: u64,
    pub burst: bool,
    pub server_side_retry: bool,
    pub enforce: bool,
}

impl Default for ThroughputLimits {
    fn default() -> Self {
        ThroughputLimits {
            default_table_ru: 400,
            burst: true,
            server_side_retry: false,
            enforce: true,
        }
    }
}

/// Burst spending rate and bank size (Cosmos DB's figures).
pub const BURST_RU_PER_SEC: f64 = 3000.0;
pub const BURST_BANK_SECONDS: f64 = 300.0;
/// Longest server-side retry.
pub const SERVER_RETRY_MAX: Duration = Duration::from_secs(60);

/// The RU/s budget of each physical partition of a table.
pub fn partition_rate(table_ru: i64, partitions: usize) -> f64 {
    (table_ru as f64 / partitions.max(1) as f64).min(RU_PER_PHYSICAL_PARTITION as f64)
}

/// One partition's token bucket.
#[derive(Debug, Default)]
pub struct Bucket {
    inner: Mutex<State>,
    pub throttled: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    started: bool,
    tokens: f64,
    bank: f64,
    last: Option<Instant>,
    /// Bank spending in the current second: (second start, RU).
    burst_window: Option<(Instant, f64)>,
}

impl State {
    fn refill(&mut self, rate: f64, burst: bool, now: Instant) {
        if !self.started {
            self.started = true;
            self.tokens = rate;
            self.last = Some(now);
            return;
        }
        let dt = self
            .last
            .map_or(0.0, |l| now.saturating_duration_since(l).as_secs_f64());
        self.last = Some(now);
        self.tokens += rate * dt;
        if self.tokens > rate {
            if burst {
                self.bank = (self.bank + self.tokens - rate).min(rate * BURST_BANK_SECONDS);
            }
            self.tokens = rate;
        }
    }
}

impl Bucket {
    /// Admits a request if the bucket (or the burst bank) has budget left; otherwise the
    /// milliseconds until it will.
    pub fn admit(&self, rate: f64, burst: bool) -> Result<(), u64> {
        let now = Instant::now();
        let mut s = self.inner.lock();
        s.refill(rate, burst, now);
        if s.tokens > 0.0 {
            return Ok(());
        }
        if burst && s.bank > 0.0 && rate < BURST_RU_PER_SEC {
            let spent = match s.burst_window {
                Some((start, ru)) if now.duration_since(start) < Duration::from_secs(1) => ru,
                _ => {
                    s.burst_window = Some((now, 0.0));
                    0.0
                }
            };
            if spent < BURST_RU_PER_SEC - rate {
                // Move budget from the bank into the bucket to cover the debt and admit.
                let need = (-s.tokens + 1.0).min(s.bank);
                s.bank -= need;
                s.tokens += need;
                if let Some((_, ru)) = &mut s.burst_window {
                    *ru += need;
                }
                if s.tokens > 0.0 {
                    return Ok(());
                }
            }
        }
        let ms = ((-s.tokens + 0.001) / rate.max(1.0) * 1000.0)
            .ceil()
            .max(1.0) as u64;
        Err(ms)
    }

    /// Debits what a request consumed.
    pub fn debit(&self, rate: f64, burst: bool, ru: f64) {
        let mut s = self.inner.lock();
        s.refill(rate, burst, Instant::now());
        s.tokens -= ru;
    }
}

/// Cosmos DB's 429 message, as the Cassandra API returns it inside Overloaded.
pub fn overloaded(retry_after_ms: u64) -> QueryError {
    let id = uuid::Uuid::new_v4();
    QueryError::Overloaded(format!(
        "Request rate is large: ActivityID={id}, RetryAfterMs={retry_after_ms}, Additional details='Response status code does not indicate success: TooManyRequests (429); Substatus: 3200; ActivityId: {id}; Reason: (Message: {{\"Errors\":[\"Request rate is large. More Request Units may be needed, so no changes were made. Please retry this request later. Learn more: http://aka.ms/cosmosdb-error-429\"]}});"
    ))
}

/// Admits a request on the given partitions (each with its RU/s), waiting with server-side
/// retry or failing with Overloaded. `rate` None: no throughput provisioned (accounting only).
pub fn admit(
    limits: &ThroughputLimits,
    parts: &[(&PhysicalPartition, Option<f64>)],
) -> Result<(), QueryError> {
    if !limits.enforce {
        return Ok(());
    }
    let started = Instant::now();
    loop {
        let mut wait = 0u64;
        let mut throttled_on = None;
        for (p, rate) in parts {
            let Some(rate) = rate else { continue };
            if let Err(ms) = p.stats.bucket.admit(*rate, limits.burst) {
                if ms > wait {
                    wait = ms;
                    throttled_on = Some(*p);
                }
            }
        }
        let Some(p) = throttled_on else {
            return Ok(());
        };
        if limits.server_side_retry {
            if started.elapsed() + Duration::from_millis(wait) <= SERVER_RETRY_MAX {
                std::thread::sleep(Duration::from_millis(wait));
                continue;
            }
            p.stats.bucket.throttled.fetch_add(1, Ordering::Relaxed);
            return Err(QueryError::Server(format!(
                "Request timed out: server-side retry waited {} ms for throughput (RetryAfterMs={wait})",
                started.elapsed().as_millis()
            )));
        }
        p.stats.bucket.throttled.fetch_add(1, Ordering::Relaxed);
        return Err(overloaded(wait));
    }
}

/// The provisioned RU/s that applies to a table: its own throughput (or autoscale max), else its
/// keyspace's; None when neither has any.
pub fn provisioned_ru(schema: &crate::schema::Schema, t: &crate::schema::TableDef) -> Option<i64> {
    t.options
        .cosmosdb_provisioned_throughput
        .or(t.options.cosmosdb_autoscale_max_throughput)
        .or_else(|| {
            schema.keyspace(&t.keyspace).and_then(|k| {
                k.cosmosdb_provisioned_throughput
                    .or(k.cosmosdb_autoscale_max_throughput)
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_goes_into_debt_and_reports_the_wait() {
        let b = Bucket::default();
        assert!(b.admit(1000.0, false).is_ok());
        b.debit(1000.0, false, 1500.0);
        let ms = b.admit(1000.0, false).unwrap_err();
        assert!((400..=510).contains(&ms), "{ms}");
        assert_eq!(partition_rate(40_000, 4), 10_000.0);
        assert_eq!(partition_rate(100_000, 4), 10_000.0);
        assert_eq!(partition_rate(1000, 2), 500.0);
    }
}
