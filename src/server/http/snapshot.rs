//! A point-in-time reading of every user table's physical partitions, taken when `/metrics` is
//! scraped (and by the dashboard): the same figures `system_views.physical_partitions` and
//! `system_views.throughput` show, read from the same atomics, and ranked so that the exporter
//! can list the busiest ones first and stop at its limits.

use crate::partition::throttle::{provisioned, table_budget};
use crate::query::Engine;
use std::sync::atomic::Ordering;

/// Tokens as JSON strings: JavaScript numbers cannot hold every 64-bit integer.
pub fn as_text<S: serde::Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// One physical partition.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PartSnap {
    pub id: u64,
    #[serde(serialize_with = "as_text")]
    pub token_start: i64,
    #[serde(serialize_with = "as_text")]
    pub token_end: i64,
    pub bytes: i64,
    pub logical_partitions: i64,
    /// RU consumed during the last complete second.
    pub consumed_ru: f64,
    /// RU consumed since the partition was created (or the server started).
    pub ru_total: f64,
    /// RU/s of the budget the partition draws on.
    pub budget_ru: f64,
    /// consumed_ru / budget_ru, capped at 1 (Cosmos DB's normalized RU consumption).
    pub normalized_ru: f64,
    pub throttled_requests: u64,
    pub would_throttle: u64,
}

/// One user table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TableSnap {
    #[serde(skip)]
    pub storage_id: u64,
    pub keyspace: String,
    pub table: String,
    /// Provisioned RU/s (for autoscale its maximum), and whether it is autoscale.
    pub provisioned_ru: i64,
    pub autoscale: bool,
    /// "table", "keyspace" or "default".
    pub throughput_source: &'static str,
    pub enforced: bool,
    pub parts: Vec<PartSnap>,
}

impl TableSnap {
    pub fn bytes(&self) -> i64 {
        self.parts.iter().map(|p| p.bytes).sum()
    }
    pub fn logical_partitions(&self) -> i64 {
        self.parts.iter().map(|p| p.logical_partitions).sum()
    }
    pub fn consumed_ru(&self) -> f64 {
        self.parts.iter().map(|p| p.consumed_ru).sum()
    }
    /// How busy the table is, for ranking: recent RU, then RU ever, then size.
    fn rank_key(&self) -> (f64, f64, i64) {
        let total: f64 = self.parts.iter().map(|p| p.ru_total).sum();
        (self.consumed_ru(), total, self.bytes())
    }
}

/// Every user table, the busiest first (see `TableSnap::rank_key`), ties in name order.
pub fn tables(engine: &Engine) -> Vec<TableSnap> {
    let schema = engine.schema();
    let limits = &engine.limits.throughput;
    let mut out = Vec::new();
    for ks in schema.keyspaces.values().filter(|k| !k.system) {
        for t in ks.tables.values().filter(|t| !t.virtual_table) {
            let Some(map) = engine.maps.get(t.storage_id) else {
                continue;
            };
            let prov = provisioned(&schema, t, limits.default_table_ru);
            let budget = table_budget(&engine.maps, &schema, t, &map, limits);
            let parts = map
                .parts
                .iter()
                .map(|p| {
                    let (bucket, rate) = budget.bucket(p);
                    let consumed = p.stats.consumed.last_second();
                    PartSnap {
                        id: p.id,
                        token_start: p.start,
                        token_end: p.end,
                        bytes: p.stats.bytes.load(Ordering::Relaxed),
                        logical_partitions: p.stats.logical.load(Ordering::Relaxed),
                        consumed_ru: consumed,
                        ru_total: p.stats.consumed.total(),
                        budget_ru: rate,
                        normalized_ru: if rate > 0.0 {
                            (consumed / rate).min(1.0)
                        } else {
                            0.0
                        },
                        throttled_requests: bucket.throttled.load(Ordering::Relaxed),
                        would_throttle: bucket.would_throttle.load(Ordering::Relaxed),
                    }
                })
                .collect();
            out.push(TableSnap {
                storage_id: t.storage_id,
                keyspace: t.keyspace.clone(),
                table: t.name.clone(),
                provisioned_ru: prov.ru,
                autoscale: prov.autoscale,
                throughput_source: match prov.source {
                    crate::partition::throttle::Source::Table => "table",
                    crate::partition::throttle::Source::Keyspace => "keyspace",
                    crate::partition::throttle::Source::Default => "default",
                },
                enforced: budget.enforced,
                parts,
            });
        }
    }
    out.sort_by(|a, b| {
        let (x, y) = (a.rank_key(), b.rank_key());
        y.0.total_cmp(&x.0)
            .then(y.1.total_cmp(&x.1))
            .then(y.2.cmp(&x.2))
    });
    out
}
