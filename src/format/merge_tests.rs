//! Property test of the last-write-wins merge (`RowData::merge`) against a simple model.
//!
//! Random writes to one row (cells, cell tombstones, TTL'd cells, row markers, row
//! deletions, range tombstones, collection elements and collection deletions), with
//! timestamps, expiries and local deletion times drawn from small sets so that ties are
//! common. Each write is a one-write `RowData`; whatever the order and grouping they are
//! merged in, the result is the same (commutative, associative), merging a result again
//! changes nothing (idempotent), and it equals the model's row: what reads see at any `now`
//! follows.
//!
//! The model states Cassandra's rules as orders, not as a pairwise contest:
//! * a cell (or collection element) is the greatest of its writes by (timestamp, kind:
//!   live < expiring < tombstone (`Cells.reconcile`, CASSANDRA-14592), local deletion time
//!   (a tombstone's seconds; an expiring cell's expiry in milliseconds), value bytes, TTL);
//! * the row marker by (timestamp, expiring over not, expiry) as `LivenessInfo.supersedes`;
//! * a row, collection or range deletion by (timestamp, local deletion time) as
//!   `DeletionTime.supersedes`; range tombstones per (start, end);
//! * a row deletion at `d` removes the marker, cells, elements and collection deletions at or
//!   below `d`; a collection deletion at `c` removes the column's elements at or below `c`; a
//!   collection column with neither deletion nor elements left is gone.

use super::row::*;
use bytes::Bytes;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// One write to the row.
#[derive(Debug, Clone)]
enum Op {
    Cell {
        col: u32,
        ts: i64,
        value: Vec<u8>,
    },
    Expiring {
        col: u32,
        ts: i64,
        value: Vec<u8>,
        ttl_secs: i32,
        expiry_ms: i64,
    },
    CellTombstone {
        col: u32,
        ts: i64,
        deletion_secs: i32,
    },
    Marker {
        ts: i64,
        ttl_secs: i32,
        expiry_ms: i64,
    },
    RowDeletion {
        ts: i64,
        deletion_secs: i32,
    },
    Range {
        lo: u8,
        hi: Option<u8>,
        ts: i64,
        deletion_secs: i32,
    },
    Elem {
        col: u32,
        path: u8,
        ts: i64,
        value: Option<Vec<u8>>,
        expiry_ms: i64,
        deletion_secs: i32,
    },
    CollectionDeletion {
        col: u32,
        ts: i64,
        deletion_secs: i32,
    },
}

/// Expiries around `NOW_MS`, several within one second (milliseconds matter).
const NOW_MS: i64 = 1_000_000;
const EXPIRIES_MS: [i64; 4] = [NOW_MS - 500, NOW_MS + 200, NOW_MS + 700, NOW_MS + 3000];
const SIMPLE_COLS: u32 = 3;
/// Collection columns come after the simple ones.
const COMPLEX_COLS: [u32; 2] = [10, 11];

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0u8..3, 0..2)
}

fn ts() -> impl Strategy<Value = i64> {
    0i64..4
}

fn deletion_secs() -> impl Strategy<Value = i32> {
    990i32..1002
}

fn op() -> impl Strategy<Value = Op> {
    let col = 0..SIMPLE_COLS;
    let ccol = prop::sample::select(COMPLEX_COLS.to_vec());
    let expiry = prop::sample::select(EXPIRIES_MS.to_vec());
    prop_oneof![
        (col.clone(), ts(), value()).prop_map(|(col, ts, value)| Op::Cell { col, ts, value }),
        (col.clone(), ts(), value(), 1i32..3, expiry.clone()).prop_map(
            |(col, ts, value, ttl_secs, expiry_ms)| Op::Expiring {
                col,
                ts,
                value,
                ttl_secs,
                expiry_ms
            }
        ),
        (col, ts(), deletion_secs()).prop_map(|(col, ts, deletion_secs)| Op::CellTombstone {
            col,
            ts,
            deletion_secs
        }),
        (ts(), 0i32..3, prop::option::of(expiry.clone())).prop_map(|(ts, ttl_secs, e)| {
            match e {
                Some(expiry_ms) => Op::Marker {
                    ts,
                    ttl_secs: ttl_secs.max(1),
                    expiry_ms,
                },
                None => Op::Marker {
                    ts,
                    ttl_secs: 0,
                    expiry_ms: 0,
                },
            }
        }),
        (ts(), deletion_secs())
            .prop_map(|(ts, deletion_secs)| Op::RowDeletion { ts, deletion_secs }),
        (0u8..2, prop::option::of(2u8..4), ts(), deletion_secs()).prop_map(
            |(lo, hi, ts, deletion_secs)| Op::Range {
                lo,
                hi,
                ts,
                deletion_secs
            }
        ),
        (
            ccol.clone(),
            0u8..3,
            ts(),
            prop::option::of(value()),
            prop::option::of(expiry),
            deletion_secs()
        )
            .prop_map(|(col, path, ts, value, e, deletion_secs)| {
                let expiry_ms = if value.is_some() { e.unwrap_or(0) } else { 0 };
                Op::Elem {
                    col,
                    path,
                    ts,
                    value,
                    expiry_ms,
                    deletion_secs,
                }
            }),
        (ccol, ts(), deletion_secs()).prop_map(|(col, ts, deletion_secs)| {
            Op::CollectionDeletion {
                col,
                ts,
                deletion_secs,
            }
        }),
    ]
}

/// The one-write row of an op.
fn row_of(op: &Op) -> RowData {
    let mut r = RowData::default();
    let cell = |col, ts, value: Option<&Vec<u8>>, ttl, expiry, local_deletion| Cell {
        col,
        timestamp_micros: ts,
        ttl_secs: ttl,
        expiry_ms: expiry,
        value: value.map(|v| Bytes::from(v.clone())),
        deletion_secs: local_deletion,
    };
    match op {
        Op::Cell { col, ts, value } => r.cells.push(cell(*col, *ts, Some(value), 0, 0, 0)),
        Op::Expiring {
            col,
            ts,
            value,
            ttl_secs,
            expiry_ms,
        } => r
            .cells
            .push(cell(*col, *ts, Some(value), *ttl_secs, *expiry_ms, 0)),
        Op::CellTombstone {
            col,
            ts,
            deletion_secs,
        } => r.cells.push(cell(*col, *ts, None, 0, 0, *deletion_secs)),
        Op::Marker {
            ts,
            ttl_secs,
            expiry_ms,
        } => {
            r.marker = Some(Marker {
                timestamp_micros: *ts,
                ttl_secs: *ttl_secs,
                expiry_ms: *expiry_ms,
            })
        }
        Op::RowDeletion { ts, deletion_secs } => r.deletion = Some((*ts, *deletion_secs)),
        Op::Range {
            lo,
            hi,
            ts,
            deletion_secs,
        } => r.ranges.push(RangeTombstone {
            lo: vec![*lo],
            hi: hi.map(|h| vec![h]),
            timestamp_micros: *ts,
            deletion_secs: *deletion_secs,
        }),
        Op::Elem {
            col,
            path,
            ts,
            value,
            expiry_ms,
            deletion_secs,
        } => r.complex.push(ComplexCell {
            col: *col,
            deletion: None,
            elems: vec![Elem {
                path: Bytes::from(vec![*path]),
                timestamp_micros: *ts,
                ttl_secs: if *expiry_ms != 0 { 1 } else { 0 },
                expiry_ms: *expiry_ms,
                value: value.as_ref().map(|v| Bytes::from(v.clone())),
                deletion_secs: if value.is_none() { *deletion_secs } else { 0 },
            }],
        }),
        Op::CollectionDeletion {
            col,
            ts,
            deletion_secs,
        } => r.complex.push(ComplexCell {
            col: *col,
            deletion: Some((*ts, *deletion_secs)),
            elems: Vec::new(),
        }),
    }
    r
}

/// The order cells and elements reconcile by (see the module documentation).
fn cell_rank(ts: i64, value: &Option<Bytes>, ttl: i32, expiry: i64, ldt: i32) -> impl Ord {
    let (kind, when) = match (value, expiry) {
        (None, _) => (2, i64::from(ldt)),
        (Some(_), 0) => (0, 0),
        (Some(_), e) => (1, e),
    };
    (ts, kind, when, value.clone(), ttl)
}

fn marker_rank(m: &Marker) -> impl Ord {
    (
        m.timestamp_micros,
        m.expiry_ms != 0,
        m.expiry_ms,
        m.ttl_secs,
    )
}

/// A collection column in the model: its deletion and its elements by path.
type ModelCollection = (Option<(i64, i32)>, BTreeMap<Bytes, Elem>);

/// The model: the row every merge of `ops` must give.
fn model(ops: &[Op]) -> RowData {
    let rows: Vec<RowData> = ops.iter().map(row_of).collect();
    let deletion = rows.iter().filter_map(|r| r.deletion).max();
    let dts = deletion.map(|d| d.0);
    let above = |ts: i64| dts.is_none_or(|d| ts > d);
    let marker = rows
        .iter()
        .filter_map(|r| r.marker)
        .max_by_key(|m| (marker_rank(m), 0))
        .filter(|m| above(m.timestamp_micros));
    let mut cells: BTreeMap<u32, Cell> = BTreeMap::new();
    for c in rows.iter().flat_map(|r| &r.cells) {
        let rank = |c: &Cell| {
            cell_rank(
                c.timestamp_micros,
                &c.value,
                c.ttl_secs,
                c.expiry_ms,
                c.deletion_secs,
            )
        };
        let e = cells.entry(c.col).or_insert_with(|| c.clone());
        if rank(c) > rank(e) {
            *e = c.clone();
        }
    }
    let mut ranges: BTreeMap<(Vec<u8>, Option<Vec<u8>>), RangeTombstone> = BTreeMap::new();
    for r in rows.iter().flat_map(|r| &r.ranges) {
        let e = ranges
            .entry((r.lo.clone(), r.hi.clone()))
            .or_insert_with(|| r.clone());
        if (r.timestamp_micros, r.deletion_secs) > (e.timestamp_micros, e.deletion_secs) {
            *e = r.clone();
        }
    }
    let mut complex: BTreeMap<u32, ModelCollection> = BTreeMap::new();
    for c in rows.iter().flat_map(|r| &r.complex) {
        let (del, elems) = complex.entry(c.col).or_default();
        *del = (*del).max(c.deletion);
        for x in &c.elems {
            let rank = |x: &Elem| {
                cell_rank(
                    x.timestamp_micros,
                    &x.value,
                    x.ttl_secs,
                    x.expiry_ms,
                    x.deletion_secs,
                )
            };
            let e = elems.entry(x.path.clone()).or_insert_with(|| x.clone());
            if rank(x) > rank(e) {
                *e = x.clone();
            }
        }
    }
    RowData {
        marker,
        deletion,
        cells: cells
            .into_values()
            .filter(|c| above(c.timestamp_micros))
            .collect(),
        ranges: ranges.into_values().collect(),
        complex: complex
            .into_iter()
            .filter_map(|(col, (del, elems))| {
                let del = del.filter(|d| above(d.0));
                let shadow = del.map(|d| d.0).max(dts);
                let elems: Vec<Elem> = elems
                    .into_values()
                    .filter(|e| shadow.is_none_or(|s| e.timestamp_micros > s))
                    .collect();
                (del.is_some() || !elems.is_empty()).then_some(ComplexCell {
                    col,
                    deletion: del,
                    elems,
                })
            })
            .collect(),
        pending: Vec::new(),
    }
}

/// Range tombstones are a set; the merge keeps them in arrival order.
fn normalized(mut r: RowData) -> RowData {
    r.ranges.sort_by(|a, b| (&a.lo, &a.hi).cmp(&(&b.lo, &b.hi)));
    r
}

fn merge_all(rows: impl IntoIterator<Item = RowData>) -> RowData {
    let mut acc = RowData::default();
    for r in rows {
        acc.merge(r);
    }
    normalized(acc)
}

/// `ops` in the order of `keys` (a random permutation), cut into groups at `cuts`; each group
/// merged on its own, then the groups merged last to first.
fn regrouped(ops: &[Op], keys: &[u32], cuts: &[bool]) -> RowData {
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&i| keys[i % keys.len()]);
    let mut groups: Vec<RowData> = Vec::new();
    let mut cur = RowData::default();
    for (n, &i) in order.iter().enumerate() {
        cur.merge(row_of(&ops[i]));
        if cuts[n % cuts.len()] {
            groups.push(std::mem::take(&mut cur));
        }
    }
    groups.push(cur);
    merge_all(groups.into_iter().rev())
}

/// What a read at `now_ms` sees: the live simple cells, the live elements per collection,
/// whether the row exists.
type Seen = (Vec<(u32, Bytes)>, Vec<(u32, Bytes, Bytes)>, bool);

fn seen(r: &RowData, now_ms: i64) -> Seen {
    let cells = r
        .cells
        .iter()
        .filter(|c| c.is_live(now_ms))
        .map(|c| (c.col, c.value.clone().expect("live")))
        .collect();
    let elems = r
        .complex
        .iter()
        .flat_map(|c| {
            c.live(now_ms)
                .map(move |e| (c.col, e.path.clone(), e.value.clone().expect("live")))
        })
        .collect();
    (cells, elems, r.is_live(now_ms))
}

/// What a read sees according to the model's own liveness rule: a value that has not expired.
fn seen_in_model(m: &RowData, now_ms: i64) -> Seen {
    let live = |v: &Option<Bytes>, expiry: i64| v.is_some() && (expiry == 0 || now_ms < expiry);
    let cells: Vec<(u32, Bytes)> = m
        .cells
        .iter()
        .filter(|c| live(&c.value, c.expiry_ms))
        .map(|c| (c.col, c.value.clone().expect("live")))
        .collect();
    let elems: Vec<(u32, Bytes, Bytes)> = m
        .complex
        .iter()
        .flat_map(|c| c.elems.iter().map(move |e| (c.col, e)))
        .filter(|(_, e)| live(&e.value, e.expiry_ms))
        .map(|(col, e)| (col, e.path.clone(), e.value.clone().expect("live")))
        .collect();
    let marker = m
        .marker
        .is_some_and(|mk| mk.expiry_ms == 0 || now_ms < mk.expiry_ms);
    let exists = marker || !cells.is_empty() || !elems.is_empty();
    (cells, elems, exists)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn merge_is_order_and_grouping_free_and_equals_the_model(
        ops in prop::collection::vec(op(), 1..14),
        keys in prop::collection::vec(any::<u32>(), 14),
        cuts in prop::collection::vec(any::<bool>(), 1..14),
    ) {
        let expected = normalized(model(&ops));
        let in_order = merge_all(ops.iter().map(row_of));
        prop_assert_eq!(&in_order, &expected);
        // Any order, any grouping.
        prop_assert_eq!(&regrouped(&ops, &keys, &cuts), &expected);
        prop_assert_eq!(&merge_all(ops.iter().rev().map(row_of)), &expected);
        // Idempotent: the result merged into itself, and every write merged again.
        let mut again = in_order.clone();
        again.merge(in_order.clone());
        prop_assert_eq!(&normalized(again.clone()), &expected);
        for op in &ops {
            again.merge(row_of(op));
        }
        prop_assert_eq!(&normalized(again), &expected);
        // Reads at any time see what the model says.
        for now_ms in [NOW_MS - 1000, NOW_MS, NOW_MS + 200, NOW_MS + 500, NOW_MS + 5000] {
            prop_assert_eq!(seen(&in_order, now_ms), seen_in_model(&expected, now_ms));
        }
    }

    #[test]
    fn the_encoding_keeps_the_merged_row(ops in prop::collection::vec(op(), 1..14)) {
        let merged = merge_all(ops.iter().map(row_of));
        let mut buf = Vec::new();
        merged.encode(&mut buf);
        let decoded = RowData::decode(&Bytes::from(buf)).expect("decodes");
        prop_assert_eq!(normalized(decoded), merged);
    }
}
