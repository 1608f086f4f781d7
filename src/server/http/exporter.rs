//! `/metrics`: the Prometheus text format (version 0.0.4), named as Cassandra exporters name
//! theirs (snake case, `_total` for counters, `_seconds`/`_bytes` units; labels `keyspace`,
//! `table`, `partition_id`).
//!
//! Bounded series: the process-wide families are a fixed set (operations x outcomes, histogram
//! buckets). Per-table families list at most `http.metrics_max_tables` tables and per-partition
//! families at most `http.metrics_max_partitions` physical partitions, the busiest first (RU in
//! the last second, then RU since start, then bytes); `ringgate_metrics_omitted{kind}` says how
//! many were left out. So a scrape has at most about 90 + 5 x tables + 7 x partitions series.

use super::snapshot::{PartSnap, TableSnap};
use crate::metrics::{global, Operation, Outcome, BUCKET_BOUNDS_SECONDS, MICRO_RU_PER_RU};
use crate::query::Engine;
use std::fmt::Write;

/// A per-table or per-partition family: name, help, and the value of one table or partition.
type Family<T> = (&'static str, &'static str, fn(&T) -> f64);

/// What the exporter lists per table and per partition at most.
#[derive(Debug, Clone, Copy)]
pub struct SeriesLimits {
    pub tables: usize,
    pub partitions: usize,
}

/// The whole `/metrics` body.
pub fn render(engine: &Engine, limits: SeriesLimits) -> String {
    let mut out = Text::default();
    requests(&mut out);
    process(&mut out, engine);
    let tables = super::snapshot::tables(engine);
    let total_parts: usize = tables.iter().map(|t| t.parts.len()).sum();
    let listed = &tables[..tables.len().min(limits.tables)];
    let parts = busiest_parts(listed, limits.partitions);
    out.family(
        "ringgate_tables",
        "gauge",
        "User tables.",
        [(String::new(), tables.len() as f64)],
    );
    out.family(
        "ringgate_physical_partitions",
        "gauge",
        "Physical partitions of all user tables.",
        [(String::new(), total_parts as f64)],
    );
    out.family(
        "ringgate_metrics_omitted",
        "gauge",
        "Tables and physical partitions left out of the per-table and per-partition series (http.metrics_max_tables / http.metrics_max_partitions).",
        [
            (label(&[("kind", "table")]), (tables.len() - listed.len()) as f64),
            (
                label(&[("kind", "partition")]),
                (total_parts - parts.len()) as f64,
            ),
        ],
    );
    per_table(&mut out, listed);
    per_partition(&mut out, &parts);
    out.0
}

/// The Prometheus text being built.
#[derive(Default)]
struct Text(String);

impl Text {
    /// One metric family: HELP, TYPE and its samples (`labels` is `{...}` or empty).
    fn family(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        samples: impl IntoIterator<Item = (String, f64)>,
    ) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(self.0, "{name}{labels} {}", number(v));
        }
    }
}

/// A sample value: integers without a fraction, NaN and infinities as Prometheus spells them.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// `{a="x",b="y"}` with values escaped as the text format requires.
fn label(pairs: &[(&str, &str)]) -> String {
    let body: Vec<String> = pairs
        .iter()
        .map(|(k, v)| {
            let v = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{k}=\"{v}\"")
        })
        .collect();
    format!("{{{}}}", body.join(","))
}

fn requests(out: &mut Text) {
    let g = global();
    let samples = Operation::ALL.iter().flat_map(|&op| {
        Outcome::ALL.iter().map(move |&oc| {
            (
                label(&[("operation", op.name()), ("outcome", oc.name())]),
                g.requests(op, oc) as f64,
            )
        })
    });
    out.family(
        "ringgate_requests_total",
        "counter",
        "CQL requests by operation and outcome.",
        samples.collect::<Vec<_>>(),
    );
    let name = "ringgate_request_duration_seconds";
    let _ = writeln!(
        out.0,
        "# HELP {name} CQL request latency, from decoding to the response being queued."
    );
    let _ = writeln!(out.0, "# TYPE {name} histogram");
    for op in Operation::ALL {
        let h = g.latency(op);
        let counts = h.cumulative();
        let les = BUCKET_BOUNDS_SECONDS
            .iter()
            .map(|b| number(*b))
            .chain(["+Inf".to_string()]);
        for (le, c) in les.zip(counts) {
            let l = label(&[("operation", op.name()), ("le", &le)]);
            let _ = writeln!(out.0, "{name}_bucket{l} {c}");
        }
        let l = label(&[("operation", op.name())]);
        let _ = writeln!(out.0, "{name}_sum{l} {}", number(h.sum_seconds()));
        let _ = writeln!(out.0, "{name}_count{l} {}", h.count());
    }
    out.family(
        "ringgate_request_units_total",
        "counter",
        "Request units charged to requests.",
        [(
            String::new(),
            g.ru_charged_micro.get() as f64 / MICRO_RU_PER_RU,
        )],
    );
}

fn process(out: &mut Text, engine: &Engine) {
    let g = global();
    let one = |v: f64| [(String::new(), v)];
    out.family(
        "ringgate_connections",
        "gauge",
        "Open CQL connections.",
        one(g.connections_open.get() as f64),
    );
    let counters: [(&str, &str, u64); 10] = [
        (
            "ringgate_connections_accepted_total",
            "CQL connections accepted.",
            g.connections_accepted.get(),
        ),
        (
            "ringgate_partition_splits_total",
            "Physical partition splits.",
            g.splits.get(),
        ),
        (
            "ringgate_compactions_total",
            "Compactions of table data (each runs the purge filter).",
            g.compactions.get(),
        ),
        (
            "ringgate_purged_entries_total",
            "Entries compactions dropped or rewrote (tombstones, expired cells, shadowed rows).",
            g.purged_entries.get(),
        ),
        (
            "ringgate_row_cache_hits_total",
            "Point reads the embedded store's row cache answered (storage.row_cache_bytes).",
            g.row_cache_hits.get(),
        ),
        (
            "ringgate_row_cache_misses_total",
            "Point reads the row cache sent to the store.",
            g.row_cache_misses.get(),
        ),
        (
            "ringgate_swept_partitions_total",
            "Partitions the tombstone sweeper cleaned.",
            g.swept_partitions.get(),
        ),
        (
            "ringgate_forwarded_requests_total",
            "Requests sent on to the node that owns their partition (cluster mode).",
            g.forwarded_requests.get(),
        ),
        (
            "ringgate_slow_queries_total",
            "Statements slower than log.slow_query_ms.",
            g.slow_queries.get(),
        ),
        (
            "ringgate_http_requests_total",
            "Requests to this HTTP listener.",
            g.http_requests.get(),
        ),
    ];
    for (name, help, v) in counters {
        out.family(name, "counter", help, one(v as f64));
    }
    let (statements, bytes) = engine.prepared_cache_figures();
    out.family(
        "ringgate_prepared_statements",
        "gauge",
        "Statements in the prepared statement cache.",
        one(statements as f64),
    );
    out.family(
        "ringgate_prepared_cache_bytes",
        "gauge",
        "Estimated bytes held by the prepared statement cache.",
        one(bytes as f64),
    );
    let (sessions, trace_bytes) = engine.traces.figures();
    out.family(
        "ringgate_trace_sessions",
        "gauge",
        "Tracing sessions kept in memory (system_traces).",
        one(sessions as f64),
    );
    out.family(
        "ringgate_trace_bytes",
        "gauge",
        "Estimated bytes held by the tracing sessions kept in memory.",
        one(trace_bytes as f64),
    );
    if let Some(rss) = resident_bytes() {
        out.family(
            "ringgate_process_resident_memory_bytes",
            "gauge",
            "Resident memory of the server process.",
            one(rss as f64),
        );
    }
    let memos = &crate::partition::size_memo::BUDGET;
    out.family(
        "ringgate_size_memo_bytes",
        "gauge",
        "Bytes the physical partitions' size memos hold (partitions.size_memo_bytes).",
        one(memos.used_bytes() as f64),
    );
    out.family(
        "ringgate_size_memo_limit_bytes",
        "gauge",
        "What the size memos may hold together (partitions.size_memo_bytes).",
        one(memos.limit_bytes() as f64),
    );
    out.family(
        "ringgate_size_memos_over_budget_total",
        "counter",
        "Size memos turned off for passing partitions.size_memo_bytes: their partitions' writes of new keys read the store first.",
        one(memos.over_budget() as f64),
    );
    out.family(
        "ringgate_physical_partition_split_threshold_bytes",
        "gauge",
        "A physical partition splits when its data passes this (partitions.physical_split_bytes).",
        one(engine.limits.partitions.physical_split_bytes as f64),
    );
}

/// Resident set size from /proc/self/statm (Linux); None elsewhere.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

fn per_table(out: &mut Text, tables: &[TableSnap]) {
    let l = |t: &TableSnap| label(&[("keyspace", &t.keyspace), ("table", &t.table)]);
    let fams: [Family<TableSnap>; 5] = [
        (
            "ringgate_table_provisioned_ru",
            "Provisioned RU/s of the table (autoscale: its maximum; else its keyspace's or the default).",
            |t| t.provisioned_ru as f64,
        ),
        (
            "ringgate_table_consumed_ru",
            "RU the table consumed in the last complete second.",
            |t| t.consumed_ru(),
        ),
        ("ringgate_table_bytes", "Stored bytes of the table.", |t| {
            t.bytes() as f64
        }),
        (
            "ringgate_table_logical_partitions",
            "Logical partitions (partition keys) of the table.",
            |t| t.logical_partitions() as f64,
        ),
        (
            "ringgate_table_physical_partitions",
            "Physical partitions of the table.",
            |t| t.parts.len() as f64,
        ),
    ];
    for (name, help, f) in fams {
        out.family(
            name,
            "gauge",
            help,
            tables.iter().map(|t| (l(t), f(t))).collect::<Vec<_>>(),
        );
    }
}

/// The partitions of the listed tables (in table then token order), or, when there are more
/// than `limit`, the `limit` busiest.
fn busiest_parts(tables: &[TableSnap], limit: usize) -> Vec<(&TableSnap, &PartSnap)> {
    let mut all: Vec<(&TableSnap, &PartSnap)> = tables
        .iter()
        .flat_map(|t| t.parts.iter().map(move |p| (t, p)))
        .collect();
    if all.len() > limit {
        all.sort_by(|a, b| {
            b.1.consumed_ru
                .total_cmp(&a.1.consumed_ru)
                .then(b.1.ru_total.total_cmp(&a.1.ru_total))
                .then(b.1.bytes.cmp(&a.1.bytes))
        });
        all.truncate(limit);
    }
    all
}

fn per_partition(out: &mut Text, parts: &[(&TableSnap, &PartSnap)]) {
    const NORMALIZED_HELP: &str = "RU consumed in the last second over the partition's RU/s \
        budget, at most 1 (Cosmos DB's Normalized RU Consumption).";
    const WOULD_HELP: &str = "Requests over a budget that does not reject (what Cosmos DB \
        would have rate-limited).";
    let gauges: [Family<PartSnap>; 4] = [
        (
            "ringgate_partition_bytes",
            "Stored bytes of the physical partition.",
            |p| p.bytes as f64,
        ),
        (
            "ringgate_partition_logical_partitions",
            "Logical partitions in the physical partition.",
            |p| p.logical_partitions as f64,
        ),
        (
            "ringgate_partition_consumed_ru",
            "RU the physical partition consumed in the last complete second.",
            |p| p.consumed_ru,
        ),
        (
            "ringgate_partition_normalized_ru_consumption",
            NORMALIZED_HELP,
            |p| p.normalized_ru,
        ),
    ];
    let counters: [Family<PartSnap>; 3] = [
        (
            "ringgate_partition_request_units_total",
            "RU the physical partition consumed since it was created or the server started.",
            |p| p.ru_total,
        ),
        (
            "ringgate_partition_throttled_requests_total",
            "Requests rejected over the budget the partition draws on.",
            |p| p.throttled_requests as f64,
        ),
        ("ringgate_partition_would_throttle_total", WOULD_HELP, |p| {
            p.would_throttle as f64
        }),
    ];
    let kinds = gauges.iter().map(|f| ("gauge", f));
    for (kind, (name, help, f)) in kinds.chain(counters.iter().map(|f| ("counter", f))) {
        let samples = parts.iter().map(|(t, p)| {
            let id = p.id.to_string();
            let l = label(&[
                ("keyspace", &t.keyspace),
                ("table", &t.table),
                ("partition_id", &id),
            ]);
            (l, f(p))
        });
        out.family(name, kind, help, samples.collect::<Vec<_>>());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped() {
        assert_eq!(
            label(&[("table", "a\"b\\c\nd")]),
            "{table=\"a\\\"b\\\\c\\nd\"}"
        );
    }

    #[test]
    fn numbers_use_prometheus_spellings() {
        assert_eq!(number(3.0), "3");
        assert_eq!(number(0.25), "0.25");
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(f64::NAN), "NaN");
    }
}
