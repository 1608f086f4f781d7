//! The dashboard: `/` is one self-contained page (`dashboard.html`: inline CSS and script, no
//! CDN, works offline) that fetches `/api/tables` every 2 seconds and draws, per table, the
//! token ring with its physical partitions (share of the ring, bytes against the split
//! threshold, normalized RU against the budget, throttling), the hottest and largest logical
//! partitions, and the throughput in force; and the recent splits.
//!
//! `/api/tables` is bounded like `/metrics`: the `http.metrics_max_tables` busiest tables, at
//! most `http.metrics_max_partitions` partitions each, `TOP_KEYS` hottest and largest keys per
//! table; the largest are found among the first `MAX_SIZE_RECORDS` size records of the table
//! (`largest_complete` says whether that was all of them).

use super::exporter::SeriesLimits;
use super::snapshot::{tables, TableSnap};
use crate::partition::sizes::scan_table;
use crate::partition::views::key_text;
use crate::query::Engine;
use serde::Serialize;

pub const PAGE: &str = include_str!("dashboard.html");

/// Logical partitions listed per table as hottest and as largest.
const TOP_KEYS: usize = 10;
/// Size records read per table per refresh to find the largest logical partitions.
const MAX_SIZE_RECORDS: usize = 100_000;

#[derive(Serialize)]
struct Key {
    partition_key: String,
    #[serde(serialize_with = "super::snapshot::as_text")]
    token: i64,
    partition_id: u64,
    /// RU (hottest) or bytes (largest).
    value: f64,
}

#[derive(Serialize)]
struct TableView {
    #[serde(flatten)]
    snap: TableSnap,
    bytes: i64,
    logical_partitions: i64,
    partitions_omitted: usize,
    hottest: Vec<Key>,
    largest: Vec<Key>,
    largest_complete: bool,
}

#[derive(Serialize)]
struct Page {
    split_threshold_bytes: u64,
    tables_omitted: usize,
    tables: Vec<TableView>,
    recent_splits: Vec<serde_json::Value>,
}

/// The JSON behind the page.
pub fn api_tables(engine: &Engine, limits: SeriesLimits) -> String {
    let all = tables(engine);
    let omitted = all.len().saturating_sub(limits.tables);
    let schema = engine.schema();
    let mut names = std::collections::HashMap::new();
    let views: Vec<TableView> = all
        .into_iter()
        .take(limits.tables)
        .map(|mut snap| {
            names.insert(snap.storage_id, format!("{}.{}", snap.keyspace, snap.table));
            let def = schema.table(&snap.keyspace, &snap.table).cloned();
            let (hottest, largest, complete) = match &def {
                Some(t) => {
                    let (l, c) = largest(engine, t, &snap);
                    (hottest(engine, t), l, c)
                }
                None => (Vec::new(), Vec::new(), true),
            };
            let (bytes, logical) = (snap.bytes(), snap.logical_partitions());
            let partitions_omitted = snap.parts.len().saturating_sub(limits.partitions);
            snap.parts.truncate(limits.partitions);
            TableView {
                snap,
                bytes,
                logical_partitions: logical,
                partitions_omitted,
                hottest,
                largest,
                largest_complete: complete,
            }
        })
        .collect();
    let splits = crate::metrics::global()
        .recent_splits
        .newest_first()
        .into_iter()
        .map(|e| {
            let mut v = serde_json::to_value(&e).unwrap_or_default();
            v["table"] = names.get(&e.storage_id).cloned().unwrap_or_default().into();
            v
        })
        .collect();
    let page = Page {
        split_threshold_bytes: engine.limits.partitions.physical_split_bytes,
        tables_omitted: omitted,
        tables: views,
        recent_splits: splits,
    };
    serde_json::to_string(&page).unwrap_or_else(|_| "{}".into())
}

/// The table's hottest logical partitions from its physical partitions' sketches.
fn hottest(engine: &Engine, t: &crate::schema::TableDef) -> Vec<Key> {
    let Some(map) = engine.maps.get(t.storage_id) else {
        return Vec::new();
    };
    let mut all: Vec<Key> = map
        .parts
        .iter()
        .flat_map(|p| {
            p.stats.hot.top().into_iter().map(|s| Key {
                partition_key: key_text(t, &s.pk),
                token: s.token,
                partition_id: p.id,
                value: s.ru,
            })
        })
        .filter(|k| k.value >= 0.005)
        .collect();
    all.sort_by(|a, b| b.value.total_cmp(&a.value));
    all.truncate(TOP_KEYS);
    all
}

/// The table's largest logical partitions among its first `MAX_SIZE_RECORDS` size records, and
/// whether those were all.
fn largest(engine: &Engine, t: &crate::schema::TableDef, snap: &TableSnap) -> (Vec<Key>, bool) {
    let Some(map) = engine.maps.get(t.storage_id) else {
        return (Vec::new(), true);
    };
    let mut records = scan_table(&engine.handles, t.storage_id, &map);
    let first = records
        .by_ref()
        .take(MAX_SIZE_RECORDS)
        .filter_map(|r| r.ok());
    let top = crate::partition::sizes::largest(first, TOP_KEYS);
    let complete = records.next().is_none();
    let owner = |token: i64| {
        snap.parts
            .iter()
            .find(|p| token > p.token_start && token <= p.token_end)
            .map_or(0, |p| p.id)
    };
    let keys = top
        .into_iter()
        .map(|(bytes, token, pk)| Key {
            partition_key: key_text(t, &pk),
            token,
            partition_id: owner(token),
            value: bytes as f64,
        })
        .collect();
    (keys, complete)
}
