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
//! Where the budget comes from (`TableBudget`): a table's own throughput (manual, or autoscale
//! with its maximum as the budget); else its keyspace's shared throughput, one set of buckets
//! (`SharedPool`, ceil(RU / 10,000) of them, each owning an equal token range) for all the
//! keyspace's tables without their own; else `throughput.default_table_ru` (400 RU/s, as Cosmos
//! DB gives a table created through CQL without throughput).
//!
//! Which budgets reject (`throughput.enforce`, `Enforce`): `provisioned` (the default) only
//! budgets a user provisioned (table or keyspace throughput); a default-budget table is accounted
//! but never rejected, so loading data works out of the box. `all` rejects on every budget (full
//! Cosmos DB fidelity), `off` on none. A request over a budget that is not enforced runs, is
//! counted in its bucket's `would_throttle` (what Cosmos DB would have rate-limited) and does not
//! draw on the bucket, as a rejected request would not: the count stays the share Cosmos DB would
//! reject instead of every request once the bucket is in debt.
//!
//! Server-side retry does not wait here: `admit` answers `QueryError::Held` with the wait, and the
//! connection awaits a timer and runs the request again (nothing was read or written before
//! admission), so a held request occupies no thread; after `server_side_retry_max_ms` (measured
//! from `held_since`, the first time it was held) it gets WriteTimeout / ReadTimeout.
//!
//! Autoscale: the budget is the maximum N; the "current" throughput shown in
//! `system_views.throughput` is the recent peak consumption rounded up to 100, between 10% and
//! 100% of N.

use super::map::{PhysicalPartition, RU_PER_PHYSICAL_PARTITION};
use crate::error::{ClientError as QueryError, WriteType};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Settings `throughput.*`.
#[derive(Debug, Clone)]
pub struct ThroughputLimits {
    pub default_table_ru: u64,
    pub burst: bool,
    pub server_side_retry: bool,
    /// Longest a request is held by server-side retry before it times out.
    pub server_side_retry_max: Duration,
    pub enforce: Enforce,
    /// The clock buckets refill and retries are held by (the engine's, `Engine::with_clock`).
    pub clock: crate::clock::Clock,
}

/// Which budgets reject over-budget requests (`throughput.enforce`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Enforce {
    /// Budgets a user provisioned (table or keyspace throughput); default-budget tables are
    /// accounted only.
    #[default]
    Provisioned,
    /// Every budget, the default 400 RU/s too (Cosmos DB's behaviour).
    All,
    /// None: account request units, never reject.
    Off,
}

impl Enforce {
    /// Whether a budget from `source` rejects.
    pub fn applies_to(self, source: Source) -> bool {
        match self {
            Enforce::All => true,
            Enforce::Off => false,
            Enforce::Provisioned => source != Source::Default,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Enforce::Provisioned => "provisioned",
            Enforce::All => "all",
            Enforce::Off => "off",
        }
    }
}

impl Default for ThroughputLimits {
    fn default() -> Self {
        ThroughputLimits {
            default_table_ru: 400,
            burst: true,
            server_side_retry: false,
            server_side_retry_max: SERVER_RETRY_MAX,
            enforce: Enforce::Provisioned,
            clock: crate::clock::Clock::system(),
        }
    }
}

/// Burst spending rate and bank size (Cosmos DB's figures).
pub const BURST_RU_PER_SEC: f64 = 3000.0;
pub const BURST_BANK_SECONDS: f64 = 300.0;
/// Longest server-side retry (Cosmos DB's 60 s; setting `throughput.server_side_retry_max_ms`).
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
    /// Requests over this budget that ran because it is not enforced (Cosmos DB would have
    /// rate-limited them).
    pub would_throttle: AtomicU64,
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
    pub fn admit(&self, rate: f64, burst: bool, now: Instant) -> Result<(), u64> {
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
    pub fn debit(&self, rate: f64, burst: bool, ru: f64, now: Instant) {
        let mut s = self.inner.lock();
        s.refill(rate, burst, now);
        s.tokens -= ru;
    }
}

/// What kind of request is admitted: a timeout under server-side retry answers WriteTimeout for
/// writes (with the protocol's write type: `SIMPLE`, `BATCH`, `UNLOGGED_BATCH`, `COUNTER`,
/// `CAS`) and ReadTimeout for reads, as Cosmos DB does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write(WriteType),
}

/// One budget a request is admitted on: a bucket, its RU/s, and whether it rejects.
#[derive(Debug, Clone, Copy)]
pub struct Gate<'a> {
    pub bucket: &'a Bucket,
    pub rate: f64,
    pub enforced: bool,
}

/// How a request was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// Within every budget.
    Within,
    /// Over a budget that is not enforced: it runs, counted in `would_throttle`, and its
    /// consumption is not debited from the budget.
    OverUnenforced,
}

/// Admits a request on the given budgets, or fails with Overloaded; with server-side retry,
/// with `QueryError::Held` (the caller waits and runs the request again, passing when it was
/// first held as `held_since`) until the retry limit, then with Write/ReadTimeout.
pub fn admit(
    limits: &ThroughputLimits,
    access: Access,
    gates: &[Gate],
    held_since: Option<Instant>,
) -> Result<Admitted, QueryError> {
    let mut wait = 0u64;
    let mut throttled_on = None;
    let mut over_unenforced = false;
    let now = limits.clock.instant();
    for g in gates {
        if let Err(ms) = g.bucket.admit(g.rate, limits.burst, now) {
            if !g.enforced {
                over_unenforced = true;
            } else if ms > wait {
                wait = ms;
                throttled_on = Some(g.bucket);
            }
        }
    }
    let Some(b) = throttled_on else {
        if !over_unenforced {
            return Ok(Admitted::Within);
        }
        for g in gates.iter().filter(|g| !g.enforced) {
            g.bucket.would_throttle.fetch_add(1, Ordering::Relaxed);
        }
        return Ok(Admitted::OverUnenforced);
    };
    if !limits.server_side_retry {
        b.throttled.fetch_add(1, Ordering::Relaxed);
        return Err(QueryError::overloaded(wait));
    }
    let held_ms = held_since.map_or(0, |t| now.saturating_duration_since(t).as_millis() as u64);
    let max_ms = limits.server_side_retry_max.as_millis() as u64;
    if held_ms < max_ms {
        return Err(QueryError::Held {
            retry_after_ms: wait.min(max_ms - held_ms),
        });
    }
    b.throttled.fetch_add(1, Ordering::Relaxed);
    let message = format!(
        "Request timed out: server-side retry held the request for {held_ms} ms (throughput.server_side_retry_max_ms) and the provisioned throughput still did not allow it (RetryAfterMs={wait}); raise the throughput or lower the request rate"
    );
    Err(match access {
        Access::Read => QueryError::ReadTimeout(message),
        Access::Write(write_type) => QueryError::WriteTimeout(message, write_type),
    })
}

/// The throughput settings that apply to a table, and where they come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provisioned {
    /// The budget in RU/s (for autoscale its maximum).
    pub ru: i64,
    pub autoscale: bool,
    pub source: Source,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The table's own `cosmosdb_*_throughput`.
    Table,
    /// Its keyspace's, shared by the keyspace's tables without their own.
    Keyspace,
    /// Neither: `throughput.default_table_ru`.
    Default,
}

/// The throughput that applies to a table: its own, else its keyspace's (shared), else the
/// default.
pub fn provisioned(
    schema: &crate::schema::Schema,
    t: &crate::schema::TableDef,
    default_ru: u64,
) -> Provisioned {
    let of = |manual: Option<i64>, auto: Option<i64>, source| {
        manual
            .map(|ru| Provisioned {
                ru,
                autoscale: false,
                source,
            })
            .or(auto.map(|ru| Provisioned {
                ru,
                autoscale: true,
                source,
            }))
    };
    of(
        t.options.cosmosdb_provisioned_throughput,
        t.options.cosmosdb_autoscale_max_throughput,
        Source::Table,
    )
    .or_else(|| {
        schema.keyspace(&t.keyspace).and_then(|k| {
            of(
                k.cosmosdb_provisioned_throughput,
                k.cosmosdb_autoscale_max_throughput,
                Source::Keyspace,
            )
        })
    })
    .unwrap_or(Provisioned {
        ru: default_ru as i64,
        autoscale: false,
        source: Source::Default,
    })
}

/// Autoscale's current throughput: the recent peak consumption rounded up to 100 RU/s, between
/// 10% and 100% of the maximum.
pub fn autoscale_current(max: i64, recent_peak: f64) -> i64 {
    let floor = (max / 10).max(100);
    let peak = ((recent_peak / 100.0).ceil() as i64).saturating_mul(100);
    peak.clamp(floor, max.max(floor))
}

/// A keyspace's shared throughput: one bucket (and consumption) per equal token range, shared
/// by all the keyspace's tables without throughput of their own.
#[derive(Debug)]
pub struct SharedPool {
    pub keyspace: String,
    pub provisioned: Provisioned,
    pub parts: Vec<PoolPart>,
}

#[derive(Debug, Default)]
pub struct PoolPart {
    pub bucket: Bucket,
    pub consumed: super::ru::Consumption,
}

impl SharedPool {
    pub fn new(keyspace: &str, provisioned: Provisioned) -> SharedPool {
        let n = super::map::partitions_for_throughput(Some(provisioned.ru));
        SharedPool {
            keyspace: keyspace.to_string(),
            provisioned,
            parts: (0..n).map(|_| PoolPart::default()).collect(),
        }
    }
    pub fn rate(&self) -> f64 {
        partition_rate(self.provisioned.ru, self.parts.len())
    }
    /// The pool part a physical partition of a member table draws on (by its end token).
    pub fn part_for(&self, p: &PhysicalPartition) -> &PoolPart {
        let n = self.parts.len() as i128;
        let span = crate::tokens::MAX_TOKEN as i128 - crate::tokens::MIN_TOKEN as i128 + 1;
        let i = ((p.end as i128 - crate::tokens::MIN_TOKEN as i128) * n / span).clamp(0, n - 1);
        &self.parts[i as usize]
    }
}

/// Where a table's requests are admitted and debited.
#[derive(Debug, Clone)]
pub struct TableBudget {
    /// RU/s of each of the table's physical partitions (its own or default throughput).
    pub rate: f64,
    /// The keyspace's pool, when the table shares its keyspace's throughput.
    pub shared: Option<std::sync::Arc<SharedPool>>,
    /// Whether the budget rejects (`throughput.enforce` and where the budget comes from).
    pub enforced: bool,
}

impl TableBudget {
    /// The bucket and RU/s that a physical partition of the table draws on.
    pub fn bucket<'a>(&'a self, p: &'a PhysicalPartition) -> (&'a Bucket, f64) {
        match &self.shared {
            Some(pool) => (&pool.part_for(p).bucket, pool.rate()),
            None => (&p.stats.bucket, self.rate),
        }
    }
    /// The budget a request on a physical partition of the table is admitted on.
    pub fn gate<'a>(&'a self, p: &'a PhysicalPartition) -> Gate<'a> {
        let (bucket, rate) = self.bucket(p);
        Gate {
            bucket,
            rate,
            enforced: self.enforced,
        }
    }
    /// Records what a request consumed on a partition and debits its bucket.
    pub fn charge(&self, limits: &ThroughputLimits, p: &PhysicalPartition, ru: f64) {
        if let Some(pool) = &self.shared {
            pool.part_for(p).consumed.add(ru);
        }
        let (b, rate) = self.bucket(p);
        b.debit(rate, limits.burst, ru, limits.clock.instant());
    }
}

/// The budget of a table with the given partition map.
pub fn table_budget(
    maps: &super::map::PartitionMaps,
    schema: &crate::schema::Schema,
    t: &crate::schema::TableDef,
    map: &super::map::PartitionMap,
    limits: &ThroughputLimits,
) -> TableBudget {
    let prov = provisioned(schema, t, limits.default_table_ru);
    let enforced = limits.enforce.applies_to(prov.source);
    match prov.source {
        Source::Keyspace => {
            let pool = maps.shared_pool(schema, &t.keyspace, prov);
            TableBudget {
                rate: pool.rate(),
                shared: Some(pool),
                enforced,
            }
        }
        _ => TableBudget {
            rate: partition_rate(prov.ru, map.parts.len()),
            shared: None,
            enforced,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_goes_into_debt_and_reports_the_wait() {
        let b = Bucket::default();
        let now = Instant::now();
        assert!(b.admit(1000.0, false, now).is_ok());
        b.debit(1000.0, false, 1500.0, now);
        let ms = b.admit(1000.0, false, now).unwrap_err();
        assert!((400..=510).contains(&ms), "{ms}");
        assert_eq!(partition_rate(40_000, 4), 10_000.0);
        assert_eq!(partition_rate(100_000, 4), 10_000.0);
        assert_eq!(partition_rate(1000, 2), 500.0);
    }

    #[test]
    fn autoscale_scales_between_a_tenth_and_the_max() {
        assert_eq!(autoscale_current(1000, 0.0), 100);
        assert_eq!(autoscale_current(20_000, 0.0), 2000);
        assert_eq!(autoscale_current(10_000, 2345.6), 2400);
        assert_eq!(autoscale_current(10_000, 2400.0), 2400);
        assert_eq!(autoscale_current(1000, 5000.0), 1000);
    }

    #[test]
    fn shared_pool_parts_cover_the_ring() {
        use crate::tokens::{MAX_TOKEN, MIN_TOKEN};
        let prov = Provisioned {
            ru: 25_000,
            autoscale: false,
            source: Source::Keyspace,
        };
        let pool = SharedPool::new("ks", prov);
        assert_eq!(pool.parts.len(), 3);
        assert!((pool.rate() - 25_000.0 / 3.0).abs() < 1e-9);
        let part = |start, end| PhysicalPartition {
            id: 0,
            start,
            end,
            group: None,
            sizes: Default::default(),
            stats: Default::default(),
        };
        let index = |p: &PhysicalPartition| {
            let q = pool.part_for(p);
            pool.parts.iter().position(|x| std::ptr::eq(x, q)).unwrap()
        };
        assert_eq!(index(&part(MIN_TOKEN, MIN_TOKEN + 10)), 0);
        assert_eq!(index(&part(-10, 0)), 1);
        assert_eq!(index(&part(0, MAX_TOKEN)), 2);
    }

    #[test]
    fn server_side_retry_holds_then_times_out_with_the_right_kind() {
        let limits = ThroughputLimits {
            server_side_retry: true,
            server_side_retry_max: Duration::from_millis(30),
            burst: false,
            ..Default::default()
        };
        let b = Bucket::default();
        let now = Instant::now();
        b.admit(400.0, false, now).unwrap();
        b.debit(400.0, false, 4000.0, now); // ten seconds in debt
        let gate = |enforced| Gate {
            bucket: &b,
            rate: 400.0,
            enforced,
        };
        // Held: the caller is told how long to wait, capped by what is left of the limit.
        match admit(&limits, Access::Read, &[gate(true)], None) {
            Err(QueryError::Held { retry_after_ms }) => assert_eq!(retry_after_ms, 30),
            other => panic!("{other:?}"),
        }
        let long_ago = Instant::now() - Duration::from_millis(40);
        match admit(
            &limits,
            Access::Write(WriteType::Cas),
            &[gate(true)],
            Some(long_ago),
        ) {
            Err(QueryError::WriteTimeout(m, WriteType::Cas)) => {
                assert!(m.contains("server-side retry"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            admit(&limits, Access::Read, &[gate(true)], Some(long_ago)),
            Err(QueryError::ReadTimeout(_))
        ));
        assert_eq!(b.throttled.load(Ordering::Relaxed), 2);
        // Not enforced: admitted and counted as what Cosmos DB would have throttled.
        assert_eq!(
            admit(&limits, Access::Read, &[gate(false)], None).unwrap(),
            Admitted::OverUnenforced
        );
        assert_eq!(b.would_throttle.load(Ordering::Relaxed), 1);
        assert_eq!(b.throttled.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn enforce_modes_pick_the_budgets_that_reject() {
        use Source::*;
        let on = |e: Enforce| [Table, Keyspace, Default].map(|s| e.applies_to(s));
        assert_eq!(on(Enforce::Provisioned), [true, true, false]);
        assert_eq!(on(Enforce::All), [true, true, true]);
        assert_eq!(on(Enforce::Off), [false, false, false]);
    }
}
