//! Cluster-wide reads of node-local virtual tables (cluster mode).
//!
//! `system_traces.*` (each node keeps the sessions it coordinated) and the partition views of
//! `system_views` (sizes, RU and throttle figures live with each physical partition's owner)
//! are per node. A SELECT on one of them (`target`) gets every other live member's rows first
//! (`server/fanout.rs` sends `SELECT * FROM <table>` marked local-only), and the node it
//! arrived at merges them with its own (`merge`) before filtering, projecting and paging the
//! merged rows like its own: the client's WHERE, LIMIT, aggregates and paging work unchanged.
//!
//! Merging, per table:
//! - traces: the union, each session and event once (a session lives on its coordinator).
//! - `physical_partitions`: one row per partition, the one from the node its `owner` column
//!   names when that node answered (it has the live figures), else this node's (the map is
//!   shared, the figures are the owner's last known here: zero for a partition never served).
//! - `throughput`: one row per table, consumption and throttle counters summed over nodes,
//!   normalized consumption the largest.
//! - `hot_partitions` / `logical_partitions`: the union, one row per logical partition (the
//!   largest figure), ranked again per table and cut to the view's length.

use crate::cql::ast::{Literal, Operator, Parsed, RelationLhs, Statement, Term};
use crate::partition::views::{HOTTEST_LOGICAL, LARGEST_LOGICAL};
use crate::query::{Binds, BoundValue};
use crate::schema::TableDef;
use bytes::Bytes;
use std::collections::HashMap;

pub type VRow = Vec<Option<Bytes>>;

/// The rows other nodes returned for one cluster-wide read, and what could not be read.
#[derive(Debug, Default)]
pub struct PeerRows {
    /// Each answering node's name and its rows, in the table's column order.
    pub nodes: Vec<(String, Vec<VRow>)>,
    /// One line per node that did not answer or answered partly (sent as warnings).
    pub warnings: Vec<String>,
    /// The members asked, by name, sorted (traced: a node not among them was not a member
    /// when the read began, so it is neither merged nor warned about).
    pub asked: Vec<String>,
}

/// A SELECT that reads a per-node virtual table: what to ask the other nodes for.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub keyspace: String,
    pub table: String,
    /// A trace read restricted to one session: the other nodes are asked for that one only.
    pub session_id: Option<uuid::Uuid>,
}

impl Target {
    /// The statement each other node runs (all columns, so rows merge by column).
    pub fn leg_cql(&self) -> String {
        let mut q = format!("SELECT * FROM {}.{}", self.keyspace, self.table);
        if let Some(id) = self.session_id {
            q.push_str(&format!(" WHERE session_id = {id}"));
        }
        q
    }
}

/// Whether `keyspace.table` holds per-node rows that a cluster read gathers from every node.
pub fn per_node(keyspace: &str, table: &str) -> bool {
    matches!(
        (keyspace, table),
        ("system_traces", "sessions" | "events")
            | (
                "system_views",
                "physical_partitions" | "throughput" | "hot_partitions" | "logical_partitions"
            )
    )
}

/// The per-node table a statement reads, if any (`keyspace`: the session's).
pub fn target(parsed: &Parsed, keyspace: Option<&str>, binds: &Binds) -> Option<Target> {
    let Statement::Select(sel) = &parsed.statement else {
        return None;
    };
    let ks = sel
        .table
        .keyspace
        .as_deref()
        .or(keyspace)?
        .to_ascii_lowercase();
    let table = sel.table.name.to_ascii_lowercase();
    if !per_node(&ks, &table) {
        return None;
    }
    let session_id = match ks.as_str() {
        "system_traces" => sel.where_clause.iter().find_map(|r| match (&r.lhs, r.op) {
            (RelationLhs::Column(c), Operator::Eq) if c == "session_id" => uuid_of(&r.rhs, binds),
            _ => None,
        }),
        _ => None,
    };
    Some(Target {
        keyspace: ks,
        table,
        session_id,
    })
}

fn uuid_of(term: &Term, binds: &Binds) -> Option<uuid::Uuid> {
    match term {
        Term::Literal(Literal::Uuid(s)) => s.parse().ok(),
        Term::Bind { index, name: None } => match binds {
            Binds::Positional(v) => match v.get(*index)? {
                BoundValue::Value(b) => uuid::Uuid::from_slice(b).ok(),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// This node's rows of `t` merged with the other nodes' (see the module doc); `me` is this
/// node's name.
pub fn merge(t: &TableDef, local: Vec<VRow>, me: &str, peers: &PeerRows) -> Vec<VRow> {
    let col = |name: &str| t.column_index(name);
    let nodes = std::iter::once((me, local)).chain(
        peers
            .nodes
            .iter()
            .map(|(n, rows)| (n.as_str(), rows.clone())),
    );
    match t.name.as_str() {
        "sessions" => union(nodes, &[col("session_id")]),
        "events" => {
            let mut rows = union(nodes, &[col("session_id"), col("event_id")]);
            let (s, e) = (col("session_id"), col("event_id"));
            rows.sort_by_key(|r| (cell(r, s).to_vec(), event_time(cell(r, e))));
            rows
        }
        "physical_partitions" => by_owner(t, nodes),
        "throughput" => summed(t, nodes),
        "hot_partitions" => ranked(t, nodes, "consumed_ru", HOTTEST_LOGICAL, double),
        "logical_partitions" => ranked(t, nodes, "bytes", LARGEST_LOGICAL, |b| bigint(b) as f64),
        _ => nodes.flat_map(|(_, rows)| rows).collect(),
    }
}

fn cell(r: &VRow, i: Option<usize>) -> &[u8] {
    i.and_then(|i| r.get(i)?.as_deref()).unwrap_or(&[])
}

fn double(b: &[u8]) -> f64 {
    b.try_into().map(f64::from_be_bytes).unwrap_or(0.0)
}

fn bigint(b: &[u8]) -> i64 {
    b.try_into().map(i64::from_be_bytes).unwrap_or(0)
}

/// A timeuuid's time, so events sort in the order they happened, not by their bytes.
fn event_time(b: &[u8]) -> u64 {
    uuid::Uuid::from_slice(b)
        .ok()
        .and_then(|u| u.get_timestamp())
        .map_or(0, |ts| {
            let (secs, nanos) = ts.to_unix();
            secs * 1_000_000_000 + u64::from(nanos)
        })
}

fn key(r: &VRow, cols: &[Option<usize>]) -> Vec<Vec<u8>> {
    cols.iter().map(|&c| cell(r, c).to_vec()).collect()
}

/// Every node's rows, each key once (the first node's row: this node's first).
fn union<'a>(
    nodes: impl Iterator<Item = (&'a str, Vec<VRow>)>,
    cols: &[Option<usize>],
) -> Vec<VRow> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (_, rows) in nodes {
        for r in rows {
            if seen.insert(key(&r, cols)) {
                out.push(r);
            }
        }
    }
    out
}

/// One row per physical partition: the row from the node its `owner` names, else the first
/// node's (this node's), keeping this node's order and adding partitions only others know.
fn by_owner<'a>(t: &TableDef, nodes: impl Iterator<Item = (&'a str, Vec<VRow>)>) -> Vec<VRow> {
    let cols = ["keyspace_name", "table_name", "partition_id"].map(|c| t.column_index(c));
    let owner = t.column_index("owner");
    let mut order: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut chosen: HashMap<Vec<Vec<u8>>, (bool, VRow)> = HashMap::new();
    for (node, rows) in nodes {
        for r in rows {
            let k = key(&r, &cols);
            let from_owner = cell(&r, owner) == node.as_bytes();
            match chosen.get(&k) {
                None => {
                    order.push(k.clone());
                    chosen.insert(k, (from_owner, r));
                }
                Some((false, _)) if from_owner => {
                    chosen.insert(k, (true, r));
                }
                Some(_) => {}
            }
        }
    }
    order
        .into_iter()
        .filter_map(|k| chosen.remove(&k).map(|(_, r)| r))
        .collect()
}

/// One row per table: counters and consumption summed over nodes, normalized consumption the
/// largest, the rest (provisioning, the map's partition count) this node's.
fn summed<'a>(t: &TableDef, nodes: impl Iterator<Item = (&'a str, Vec<VRow>)>) -> Vec<VRow> {
    let cols = ["keyspace_name", "table_name"].map(|c| t.column_index(c));
    let consumed = t.column_index("consumed_ru");
    let counters = ["throttled_requests", "would_throttle"].map(|c| t.column_index(c));
    let normalized = t.column_index("normalized_ru_consumption");
    let mut order = Vec::new();
    let mut merged: HashMap<Vec<Vec<u8>>, VRow> = HashMap::new();
    for (_, rows) in nodes {
        for r in rows {
            let k = key(&r, &cols);
            let Some(m) = merged.get_mut(&k) else {
                order.push(k.clone());
                merged.insert(k, r);
                continue;
            };
            let ru = double(cell(m, consumed)) + double(cell(&r, consumed));
            set(m, consumed, ru.to_be_bytes());
            for c in counters {
                let n = bigint(cell(m, c)) + bigint(cell(&r, c));
                set(m, c, n.to_be_bytes());
            }
            let most = double(cell(m, normalized)).max(double(cell(&r, normalized)));
            set(m, normalized, most.to_be_bytes());
        }
    }
    order
        .into_iter()
        .filter_map(|k| merged.remove(&k))
        .collect()
}

fn set<const N: usize>(r: &mut VRow, i: Option<usize>, v: [u8; N]) {
    if let Some(c) = i.and_then(|i| r.get_mut(i)) {
        *c = Some(Bytes::copy_from_slice(&v));
    }
}

/// One row per logical partition (its largest `figure` over nodes), ranked again per table by
/// that figure, `keep` per table.
fn ranked<'a>(
    t: &TableDef,
    nodes: impl Iterator<Item = (&'a str, Vec<VRow>)>,
    figure: &str,
    keep: usize,
    value: fn(&[u8]) -> f64,
) -> Vec<VRow> {
    let table_cols = ["keyspace_name", "table_name"].map(|c| t.column_index(c));
    let pk = t.column_index("partition_key");
    let (fig, rank) = (t.column_index(figure), t.column_index("rank"));
    let mut best: HashMap<Vec<Vec<u8>>, VRow> = HashMap::new();
    for (_, rows) in nodes {
        for r in rows {
            let mut k = key(&r, &table_cols);
            k.push(cell(&r, pk).to_vec());
            let better = best
                .get(&k)
                .is_none_or(|b| value(cell(&r, fig)) > value(cell(b, fig)));
            if better {
                best.insert(k, r);
            }
        }
    }
    let mut all: Vec<VRow> = best.into_values().collect();
    all.sort_by(|a, b| {
        key(a, &table_cols)
            .cmp(&key(b, &table_cols))
            .then(value(cell(b, fig)).total_cmp(&value(cell(a, fig))))
            .then(cell(a, pk).cmp(cell(b, pk)))
    });
    let mut out = Vec::new();
    let (mut current, mut n) = (None, 0i32);
    for mut r in all {
        let k = key(&r, &table_cols);
        if current.as_ref() != Some(&k) {
            (current, n) = (Some(k), 0);
        }
        n += 1;
        if n as usize <= keep {
            set(&mut r, rank, n.to_be_bytes());
            out.push(r);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(ks: &str, name: &str) -> std::sync::Arc<TableDef> {
        let kss = crate::schema::system::keyspaces();
        let k = kss.iter().find(|k| k.name == ks).unwrap();
        std::sync::Arc::clone(&k.tables[name])
    }

    fn row(t: &TableDef, cells: &[(&str, Bytes)]) -> VRow {
        let mut r = vec![None; t.columns.len()];
        for (c, v) in cells {
            r[t.column_index(c).unwrap()] = Some(v.clone());
        }
        r
    }

    fn txt(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn num(v: i64) -> Bytes {
        Bytes::copy_from_slice(&v.to_be_bytes())
    }

    /// Each partition once, from the node its owner column names; a partition whose owner did
    /// not answer keeps this node's row; one only a peer knows is added.
    #[test]
    fn physical_partitions_come_from_their_owners() {
        let t = table("system_views", "physical_partitions");
        let p = |id: i64, owner: &str, bytes: i64| {
            row(
                &t,
                &[
                    ("keyspace_name", txt("app")),
                    ("table_name", txt("t")),
                    ("partition_id", num(id)),
                    ("owner", txt(owner)),
                    ("bytes", num(bytes)),
                ],
            )
        };
        let local = vec![p(1, "n1", 10), p(2, "n2", 0), p(3, "n3", 0)];
        let peers = PeerRows {
            nodes: vec![(
                "n2".into(),
                vec![p(1, "n1", 0), p(2, "n2", 20), p(4, "n2", 5)],
            )],
            warnings: Vec::new(),
            asked: vec!["n2".into()],
        };
        let merged = merge(&t, local, "n1", &peers);
        let b = t.column_index("bytes");
        let got: Vec<i64> = merged.iter().map(|r| bigint(cell(r, b))).collect();
        assert_eq!(got, [10, 20, 0, 5]);
    }

    /// Hot partitions from all nodes are ranked again, each logical partition once.
    #[test]
    fn hot_partitions_are_ranked_again() {
        let t = table("system_views", "hot_partitions");
        let h = |pk: &str, ru: f64| {
            row(
                &t,
                &[
                    ("keyspace_name", txt("app")),
                    ("table_name", txt("t")),
                    ("partition_key", txt(pk)),
                    ("consumed_ru", Bytes::copy_from_slice(&ru.to_be_bytes())),
                ],
            )
        };
        let peers = PeerRows {
            nodes: vec![("n2".into(), vec![h("b", 9.0), h("a", 1.0)])],
            warnings: Vec::new(),
            asked: vec!["n2".into()],
        };
        let merged = merge(&t, vec![h("a", 5.0), h("c", 2.0)], "n1", &peers);
        let (pk, rank) = (t.column_index("partition_key"), t.column_index("rank"));
        let got: Vec<(&[u8], i32)> = merged
            .iter()
            .map(|r| {
                let n = cell(r, rank).try_into().map(i32::from_be_bytes).unwrap();
                (cell(r, pk), n)
            })
            .collect();
        assert_eq!(got, [(&b"b"[..], 1), (b"a", 2), (b"c", 3)]);
    }

    /// A trace read restricted to one session asks the others for that session only.
    #[test]
    fn a_session_read_asks_for_that_session() {
        let id = "6f0b3a2e-2b1c-11ef-8000-000000000001";
        let parsed = crate::cql::parse(&format!(
            "SELECT activity FROM system_traces.events WHERE session_id = {id}"
        ))
        .unwrap();
        let t = target(&parsed, None, &Binds::None).unwrap();
        assert_eq!(
            t.leg_cql(),
            format!("SELECT * FROM system_traces.events WHERE session_id = {id}")
        );
        let parsed = crate::cql::parse("SELECT * FROM physical_partitions").unwrap();
        assert!(target(&parsed, Some("system_views"), &Binds::None).is_some());
        let parsed = crate::cql::parse("SELECT * FROM system_views.maintenance").unwrap();
        assert!(target(&parsed, None, &Binds::None).is_none());
    }
}
