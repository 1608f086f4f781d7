//! Virtual tables over the partition maps: `system_views.physical_partitions`,
//! `system_views.logical_partitions` (the largest logical partitions of each table),
//! `system_views.throughput`, `system_views.hot_partitions` (the logical partitions consuming
//! the most RU recently, from each physical partition's sketch, `hot.rs`) and
//! `system.size_estimates`.
//!
//! In cluster mode each node's figures are those of the partitions it owns; a read merges
//! every node's rows (`query/cluster_views.rs`), and `physical_partitions.owner` names the node
//! serving each partition (null while none does, and on a single node).

use super::handles::{Handles, Placement};
use super::map::PartitionMaps;
use super::sizes::{largest, scan_table};
use super::throttle::{autoscale_current, provisioned, table_budget, Source, ThroughputLimits};
use crate::schema::{Schema, TableDef};
use crate::tokens::split_composite;
use bytes::Bytes;
use std::sync::atomic::Ordering;

/// Logical partitions listed per table in `system_views.logical_partitions`.
pub const LARGEST_LOGICAL: usize = 20;
/// Logical partitions listed per table in `system_views.hot_partitions`.
pub const HOTTEST_LOGICAL: usize = 20;

type VRow = Vec<Option<Bytes>>;

fn text(s: &str) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(s.as_bytes()))
}
fn bigint(v: i64) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(&v.to_be_bytes()))
}
fn double(v: f64) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(&v.to_be_bytes()))
}
fn int(v: i32) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(&v.to_be_bytes()))
}

fn row(table: &TableDef, cells: &[(&str, Option<Bytes>)]) -> VRow {
    let mut r = vec![None; table.columns.len()];
    for (name, v) in cells {
        if let Some(i) = table.column_index(name) {
            r[i] = v.clone();
        }
    }
    r
}

/// User tables with their storage ids, in keyspace/table order.
fn user_tables(schema: &Schema) -> Vec<&TableDef> {
    schema
        .keyspaces
        .values()
        .filter(|k| !k.system)
        .flat_map(|k| k.tables.values().map(|t| &**t))
        .filter(|t| !t.virtual_table)
        .collect()
}

/// The partition key as text: the CQL literal of each component, joined by ':'.
pub fn key_text(t: &TableDef, pk: &[u8]) -> String {
    let types: Vec<_> = t.partition_key.iter().map(|&i| &t.columns[i].ty).collect();
    if types.len() == 1 {
        return crate::cql::value::to_cql_literal(types[0], pk);
    }
    match split_composite(pk, types.len()) {
        Some(parts) => parts
            .iter()
            .zip(&types)
            .map(|(p, ty)| crate::cql::value::to_cql_literal(ty, p))
            .collect::<Vec<_>>()
            .join(":"),
        None => pk.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

/// The rows of a partition virtual table, or None if `table` is not one. `me`: this node's
/// name in cluster mode (a partition's `owner` in `physical_partitions`; None: a single node).
pub fn rows(
    maps: &PartitionMaps,
    handles: &Handles,
    schema: &Schema,
    table: &TableDef,
    limits: &ThroughputLimits,
    me: Option<&str>,
) -> Option<Vec<VRow>> {
    let t = table;
    let mut out = Vec::new();
    match (t.keyspace.as_str(), t.name.as_str()) {
        ("system_views", "physical_partitions") => {
            for ut in user_tables(schema) {
                let Some(map) = maps.get(ut.storage_id) else {
                    continue;
                };
                let budget = table_budget(maps, schema, ut, &map, limits);
                for p in &map.parts {
                    let consumed = p.stats.consumed.last_second();
                    let (bucket, rate) = budget.bucket(p);
                    let owner = match (me, handles.placement(ut.storage_id, p)) {
                        (Some(me), Placement::Local) => text(me),
                        (Some(_), Placement::Remote(node)) => text(&node),
                        _ => None,
                    };
                    out.push(row(
                        t,
                        &[
                            ("keyspace_name", text(&ut.keyspace)),
                            ("table_name", text(&ut.name)),
                            ("provisioned_ru", double(rate)),
                            ("consumed_ru", double(consumed)),
                            (
                                "normalized_ru_consumption",
                                double((consumed / rate).min(1.0)),
                            ),
                            (
                                "throttled_requests",
                                bigint(bucket.throttled.load(Ordering::Relaxed) as i64),
                            ),
                            (
                                "would_throttle",
                                bigint(bucket.would_throttle.load(Ordering::Relaxed) as i64),
                            ),
                            ("partition_id", bigint(p.id as i64)),
                            ("owner", owner),
                            ("storage_group", me.and_then(|_| text(p.group_name()))),
                            ("token_start", bigint(p.start)),
                            ("token_end", bigint(p.end)),
                            ("bytes", bigint(p.stats.bytes.load(Ordering::Relaxed))),
                            (
                                "logical_partitions",
                                bigint(p.stats.logical.load(Ordering::Relaxed)),
                            ),
                        ],
                    ));
                }
            }
        }
        ("system_views", "throughput") => {
            for ut in user_tables(schema) {
                let Some(map) = maps.get(ut.storage_id) else {
                    continue;
                };
                let prov = provisioned(schema, ut, limits.default_table_ru);
                let budget = table_budget(maps, schema, ut, &map, limits);
                // The table's own consumption, and the budget's (the whole pool when shared).
                let consumed: f64 = map
                    .parts
                    .iter()
                    .map(|p| p.stats.consumed.last_second())
                    .sum();
                let buckets: Vec<&super::throttle::Bucket> = match &budget.shared {
                    Some(pool) => pool.parts.iter().map(|x| &x.bucket).collect(),
                    None => map.parts.iter().map(|p| &p.stats.bucket).collect(),
                };
                let (normalized, peak) = match &budget.shared {
                    Some(pool) => (
                        pool.parts
                            .iter()
                            .map(|x| x.consumed.last_second() / pool.rate())
                            .fold(0.0f64, f64::max),
                        super::ru::recent_peak(pool.parts.iter().map(|x| &x.consumed)),
                    ),
                    None => (
                        map.parts
                            .iter()
                            .map(|p| p.stats.consumed.last_second() / budget.rate)
                            .fold(0.0f64, f64::max),
                        super::ru::recent_peak(map.parts.iter().map(|p| &p.stats.consumed)),
                    ),
                };
                let count = |f: fn(&super::throttle::Bucket) -> u64| {
                    bigint(buckets.iter().map(|b| f(b)).sum::<u64>() as i64)
                };
                let current = if prov.autoscale {
                    autoscale_current(prov.ru, peak)
                } else {
                    prov.ru
                };
                let source = match prov.source {
                    Source::Table => "table",
                    Source::Keyspace => "keyspace",
                    Source::Default => "default",
                };
                out.push(row(
                    t,
                    &[
                        ("keyspace_name", text(&ut.keyspace)),
                        ("table_name", text(&ut.name)),
                        ("provisioned_ru", bigint(prov.ru)),
                        (
                            "autoscale_max_ru",
                            prov.autoscale.then_some(prov.ru).and_then(bigint),
                        ),
                        ("current_ru", bigint(current)),
                        ("consumed_ru", double(consumed)),
                        ("source", text(source)),
                        (
                            "enforced",
                            Some(Bytes::copy_from_slice(&[budget.enforced as u8])),
                        ),
                        ("normalized_ru_consumption", double(normalized.min(1.0))),
                        ("physical_partitions", int(map.parts.len() as i32)),
                        (
                            "throttled_requests",
                            count(|b| b.throttled.load(Ordering::Relaxed)),
                        ),
                        (
                            "would_throttle",
                            count(|b| b.would_throttle.load(Ordering::Relaxed)),
                        ),
                    ],
                ));
            }
        }
        ("system_views", "hot_partitions") => {
            for ut in user_tables(schema) {
                let Some(map) = maps.get(ut.storage_id) else {
                    continue;
                };
                let mut all: Vec<(u64, super::hot::Slot)> = map
                    .parts
                    .iter()
                    .flat_map(|p| p.stats.hot.top().into_iter().map(|s| (p.id, s)))
                    .filter(|(_, s)| s.ru >= 0.005)
                    .collect();
                all.sort_by(|a, b| b.1.ru.total_cmp(&a.1.ru));
                for (rank, (pid, s)) in all.into_iter().take(HOTTEST_LOGICAL).enumerate() {
                    out.push(row(
                        t,
                        &[
                            ("keyspace_name", text(&ut.keyspace)),
                            ("table_name", text(&ut.name)),
                            ("rank", int(rank as i32 + 1)),
                            ("partition_key", text(&key_text(ut, &s.pk))),
                            ("token", bigint(s.token)),
                            ("partition_id", bigint(pid as i64)),
                            ("consumed_ru", double(s.ru)),
                        ],
                    ));
                }
            }
        }
        ("system_views", "logical_partitions") => {
            for ut in user_tables(schema) {
                let Some(map) = maps.get(ut.storage_id) else {
                    continue;
                };
                let records = scan_table(handles, ut.storage_id, &map).filter_map(|r| r.ok());
                let top = largest(records, LARGEST_LOGICAL);
                for (rank, (bytes, token, pk)) in top.into_iter().enumerate() {
                    out.push(row(
                        t,
                        &[
                            ("keyspace_name", text(&ut.keyspace)),
                            ("table_name", text(&ut.name)),
                            ("rank", int(rank as i32 + 1)),
                            ("partition_key", text(&key_text(ut, &pk))),
                            ("token", bigint(token)),
                            ("bytes", bigint(bytes)),
                            ("partition_id", bigint(map.route(token).id as i64)),
                        ],
                    ));
                }
            }
        }
        ("system", "size_estimates") => {
            for ut in user_tables(schema) {
                let Some(map) = maps.get(ut.storage_id) else {
                    continue;
                };
                for p in &map.parts {
                    let bytes = p.stats.bytes.load(Ordering::Relaxed).max(0);
                    let count = p.stats.logical.load(Ordering::Relaxed).max(0);
                    out.push(row(
                        t,
                        &[
                            ("keyspace_name", text(&ut.keyspace)),
                            ("table_name", text(&ut.name)),
                            ("range_start", text(&p.start.to_string())),
                            ("range_end", text(&p.end.to_string())),
                            (
                                "mean_partition_size",
                                bigint(if count > 0 { bytes / count } else { 0 }),
                            ),
                            ("partitions_count", bigint(count)),
                        ],
                    ));
                }
            }
        }
        _ => return None,
    }
    Some(out)
}
