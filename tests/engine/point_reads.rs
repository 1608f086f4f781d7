//! Point reads (`query/select/points.rs`): a read that names a whole primary key (or a
//! partition of a table without clustering columns) looks its header and row up with `get`
//! instead of scanning. It must see exactly what the scan sees: row and partition tombstones,
//! range tombstones, TTL expiry, static cells, missing partitions, limits, paging and the
//! request units charged, also with the rows in disk tables and their deletions in the
//! memtable. The scan is the oracle: `c >= x AND c <= x` (a slice) and `token(k) = ...`
//! read the same rows through the range scan.

use super::support::{open, TestEngine};
use ringgate::query::{Outcome, QueryOptions};

const CLUSTERED: &str =
    "CREATE TABLE ks.p (k int, c int, s int static, v int, w int, PRIMARY KEY (k, c))";
const FLAT: &str = "CREATE TABLE ks.n (k int PRIMARY KEY, v int, w int)";

/// Moves every table's data into disk tables (memtable flushed, then one major compaction).
fn to_disk(t: &TestEngine) {
    t.store.compact().unwrap();
}

#[test]
fn a_deleted_row_reads_as_absent_with_its_row_in_a_disk_table() {
    let mut t = open(&[]);
    t.ok(CLUSTERED);
    t.ok(FLAT);
    t.ok("INSERT INTO ks.p (k, c, v) VALUES (1, 1, 10)");
    t.ok("INSERT INTO ks.p (k, c, v) VALUES (1, 2, 20)");
    t.ok("INSERT INTO ks.n (k, v) VALUES (1, 10)");
    t.ok("INSERT INTO ks.n (k, v) VALUES (2, 20)");
    to_disk(&t);
    // The tombstones stay in the memtable, the rows they delete in the disk table.
    t.ok("DELETE FROM ks.p WHERE k = 1 AND c = 1");
    t.ok("DELETE FROM ks.n WHERE k = 1");
    t.ok("DELETE v FROM ks.n WHERE k = 2");
    assert!(t
        .ints("SELECT v FROM ks.p WHERE k = 1 AND c = 1")
        .is_empty());
    assert_eq!(
        t.ints("SELECT v FROM ks.p WHERE k = 1 AND c = 2"),
        [[Some(20)]]
    );
    assert!(t.ints("SELECT v FROM ks.n WHERE k = 1").is_empty());
    // The row lost its only cell but keeps its marker (INSERT wrote one).
    assert_eq!(
        t.ints("SELECT k, v FROM ks.n WHERE k = 2"),
        [[Some(2), None]]
    );
}

#[test]
fn a_partition_deletion_shadows_older_rows_only() {
    let mut t = open(&[]);
    t.ok(CLUSTERED);
    t.ok(FLAT);
    t.ok("INSERT INTO ks.p (k, c, v) VALUES (1, 1, 10) USING TIMESTAMP 100");
    t.ok("INSERT INTO ks.p (k, c, v) VALUES (1, 2, 20) USING TIMESTAMP 300");
    to_disk(&t);
    t.ok("DELETE FROM ks.p USING TIMESTAMP 200 WHERE k = 1");
    assert!(t
        .ints("SELECT v FROM ks.p WHERE k = 1 AND c = 1")
        .is_empty());
    assert_eq!(
        t.ints("SELECT v FROM ks.p WHERE k = 1 AND c = 2"),
        [[Some(20)]]
    );
    // A range tombstone in the header shadows the rows of its range.
    t.ok("INSERT INTO ks.p (k, c, v) VALUES (2, 1, 1)");
    t.ok("INSERT INTO ks.p (k, c, v) VALUES (2, 5, 5)");
    t.ok("DELETE FROM ks.p WHERE k = 2 AND c >= 0 AND c < 3");
    assert!(t
        .ints("SELECT v FROM ks.p WHERE k = 2 AND c = 1")
        .is_empty());
    assert_eq!(
        t.ints("SELECT v FROM ks.p WHERE k = 2 AND c = 5"),
        [[Some(5)]]
    );
    // A row written after the deletion, with a newer timestamp, reads again.
    t.ok("INSERT INTO ks.n (k, v) VALUES (3, 30) USING TIMESTAMP 100");
    to_disk(&t);
    t.ok("DELETE FROM ks.n USING TIMESTAMP 200 WHERE k = 3");
    assert!(t.ints("SELECT v FROM ks.n WHERE k = 3").is_empty());
    t.ok("INSERT INTO ks.n (k, v) VALUES (3, 31) USING TIMESTAMP 300");
    assert_eq!(t.ints("SELECT v FROM ks.n WHERE k = 3"), [[Some(31)]]);
}

/// Point reads of a table without clustering columns look up no header
/// (`select/points.rs`): every way to delete or write its partition must keep its state in
/// the one row key.
#[test]
fn a_flat_table_stores_no_partition_header() {
    let mut t = open(&[]);
    t.ok(FLAT);
    let stmts = [
        "INSERT INTO ks.n (k, v) VALUES (1, 1) USING TTL 100",
        "UPDATE ks.n SET w = 2 WHERE k = 1",
        "DELETE w FROM ks.n WHERE k = 1",
        "DELETE FROM ks.n USING TIMESTAMP 5 WHERE k = 1",
        "DELETE FROM ks.n WHERE k = 1",
        "DELETE FROM ks.n WHERE k = 1 IF EXISTS",
        "INSERT INTO ks.n (k, v) VALUES (1, 3) IF NOT EXISTS",
        "UPDATE ks.n SET v = 4 WHERE k = 1 IF v = 3",
        "BEGIN BATCH DELETE FROM ks.n WHERE k = 1; INSERT INTO ks.n (k, w) VALUES (2, 2); APPLY BATCH",
        "DELETE FROM ks.n WHERE k IN (1, 2, 3)",
    ];
    for stmt in stmts {
        t.ok(stmt);
        // One stored key per partition written (k = 1, 2, 3 at most), each a row.
        assert!(t.data_keys() <= 3, "after {stmt}: {} keys", t.data_keys());
    }
    let table = t.engine.schema().table("ks", "n").cloned().unwrap();
    for k in 1..=3i32 {
        let pk = bytes::Bytes::from(k.to_be_bytes().to_vec());
        let header = ringgate::format::header_key(&table, &pk);
        let stored = t
            .store
            .get(ringgate::storage::Space::Data, &header)
            .unwrap();
        assert!(stored.is_none(), "partition {k} has a header");
    }
}

#[test]
fn an_expired_ttl_hides_the_row_and_its_cells() {
    let mut t = open(&[]);
    t.ok(CLUSTERED);
    t.ok(FLAT);
    t.ok("INSERT INTO ks.n (k, v) VALUES (1, 1) USING TTL 10");
    t.ok("INSERT INTO ks.n (k, v) VALUES (2, 2)");
    t.ok("UPDATE ks.n USING TTL 10 SET w = 5 WHERE k = 2");
    t.ok("INSERT INTO ks.p (k, c, v) VALUES (1, 1, 1) USING TTL 10");
    t.ok("UPDATE ks.p USING TTL 10 SET s = 7 WHERE k = 1");
    t.ok("INSERT INTO ks.p (k, c, v) VALUES (1, 2, 2)");
    to_disk(&t);
    t.advance_ms(9_999);
    assert_eq!(t.ints("SELECT v FROM ks.n WHERE k = 1"), [[Some(1)]]);
    assert_eq!(
        t.ints("SELECT s, v FROM ks.p WHERE k = 1 AND c = 1"),
        [[Some(7), Some(1)]]
    );
    t.advance_ms(1);
    assert!(t.ints("SELECT v FROM ks.n WHERE k = 1").is_empty());
    assert_eq!(
        t.ints("SELECT v, w FROM ks.n WHERE k = 2"),
        [[Some(2), None]]
    );
    assert!(t
        .ints("SELECT v FROM ks.p WHERE k = 1 AND c = 1")
        .is_empty());
    // The static cell expired with the same TTL; the other row lives on without it.
    assert_eq!(
        t.ints("SELECT s, v FROM ks.p WHERE k = 1 AND c = 2"),
        [[None, Some(2)]]
    );
}

#[test]
fn static_cells_come_with_the_row_and_a_static_only_partition_has_no_row() {
    let mut t = open(&[]);
    t.ok(CLUSTERED);
    t.ok("INSERT INTO ks.p (k, s) VALUES (1, 5)");
    // A whole primary key names a row: a partition with static cells only has none (as
    // Cassandra: the static-only row comes with whole-partition reads only).
    assert!(t
        .ints("SELECT s, v FROM ks.p WHERE k = 1 AND c = 1")
        .is_empty());
    assert_eq!(
        t.ints("SELECT s, v FROM ks.p WHERE k = 1"),
        [[Some(5), None]]
    );
    t.ok("INSERT INTO ks.p (k, c, v) VALUES (1, 1, 10)");
    to_disk(&t);
    t.ok("UPDATE ks.p SET s = 6 WHERE k = 1");
    assert_eq!(
        t.ints("SELECT k, c, s, v FROM ks.p WHERE k = 1 AND c = 1"),
        [[Some(1), Some(1), Some(6), Some(10)]]
    );
}

#[test]
fn a_missing_partition_or_row_reads_nothing() {
    let mut t = open(&[]);
    t.ok(CLUSTERED);
    t.ok(FLAT);
    assert!(t.ints("SELECT v FROM ks.n WHERE k = 1").is_empty());
    assert!(t
        .ints("SELECT v FROM ks.p WHERE k = 1 AND c = 1")
        .is_empty());
    t.ok("INSERT INTO ks.p (k, c, v) VALUES (1, 2, 2)");
    t.ok("INSERT INTO ks.n (k, v) VALUES (2, 2)");
    to_disk(&t);
    assert!(t.ints("SELECT v FROM ks.n WHERE k = 1").is_empty());
    assert!(t
        .ints("SELECT v FROM ks.p WHERE k = 1 AND c = 1")
        .is_empty());
    assert!(t
        .ints("SELECT v FROM ks.p WHERE k = 2 AND c = 2")
        .is_empty());
    assert_eq!(
        t.ints("SELECT v FROM ks.n WHERE k IN (1, 2, 3)"),
        [[Some(2)]]
    );
}

#[test]
fn in_lists_read_in_order_with_limits_and_pages() {
    let mut t = open(&[]);
    t.ok(CLUSTERED);
    for c in 0..6 {
        t.ok(&format!("INSERT INTO ks.p (k, c, v) VALUES (1, {c}, {c})"));
    }
    to_disk(&t);
    t.ok("DELETE FROM ks.p WHERE k = 1 AND c = 3");
    let q = "SELECT c FROM ks.p WHERE k = 1 AND c IN (5, 1, 3, 4, 9)";
    assert_eq!(t.ints(q), [[Some(1)], [Some(4)], [Some(5)]]);
    assert_eq!(
        t.ints(&format!("{q} ORDER BY c DESC")),
        [[Some(5)], [Some(4)], [Some(1)]]
    );
    assert_eq!(
        t.ints(&format!("{q} ORDER BY c DESC LIMIT 2")),
        [[Some(5)], [Some(4)]]
    );
    // Pages of one row: each page stops after a row; the next resumes after it.
    for (order, want) in [("ASC", [1, 4, 5]), ("DESC", [5, 4, 1])] {
        let pages = paged(&mut t, &format!("{q} ORDER BY c {order}"), 1);
        assert_eq!(pages, want.map(|c| vec![c]), "{order}");
    }
}

/// The int cells of a query read page by page (`page_size` rows each): one list per page.
fn paged(t: &mut TestEngine, q: &str, page_size: i32) -> Vec<Vec<i32>> {
    let mut pages = Vec::new();
    let mut state = None;
    loop {
        let opts = QueryOptions {
            page_size: Some(page_size),
            paging_state: state.take(),
            ..Default::default()
        };
        let Outcome::Rows(rows) = t.engine.query(&mut t.session, q, &opts).unwrap() else {
            panic!("{q}: expected rows");
        };
        let cells = crate::shared::cells::cells(&rows.content);
        let page: Vec<i32> = cells
            .into_iter()
            .map(|c| i32::from_be_bytes(c.unwrap()[..].try_into().unwrap()))
            .collect();
        if !page.is_empty() {
            pages.push(page);
        }
        match rows.paging_state {
            Some(s) => state = Some(s),
            None => return pages,
        }
    }
}

/// A small deterministic generator (no dependency on a seeded crate's stream).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Random writes, deletions (row, partition, range, cell), TTLs, static cells and flushes to
/// disk tables, with the clock moving; after each step every whole-key read answers as the
/// same read through the range scan, and is charged the same request units.
#[test]
fn point_reads_answer_and_charge_as_the_scan_does() {
    let mut t = open(&[]);
    t.ok(CLUSTERED);
    t.ok(FLAT);
    let mut rng = Lcg(15);
    let mut ts = 1_000i64;
    for step in 0..160 {
        let (k, c, x) = (rng.below(3), rng.below(4), rng.below(100));
        ts += 1 + rng.below(3) as i64;
        // Timestamps sometimes go back: older writes lose to newer deletions.
        let at = ts - rng.below(4) as i64;
        let ttl = if rng.below(3) == 0 { " AND TTL 5" } else { "" };
        let stmt = match rng.below(10) {
            0 => format!("DELETE FROM ks.p USING TIMESTAMP {at} WHERE k = {k} AND c = {c}"),
            1 => format!("DELETE FROM ks.p USING TIMESTAMP {at} WHERE k = {k}"),
            2 => format!(
                "DELETE FROM ks.p USING TIMESTAMP {at} WHERE k = {k} AND c >= {c} AND c < {}",
                c + 2
            ),
            3 => format!("UPDATE ks.p USING TIMESTAMP {at}{ttl} SET s = {x} WHERE k = {k}"),
            4 => format!(
                "UPDATE ks.p USING TIMESTAMP {at}{ttl} SET w = {x} WHERE k = {k} AND c = {c}"
            ),
            5 => format!("DELETE FROM ks.n USING TIMESTAMP {at} WHERE k = {k}"),
            6 => format!("UPDATE ks.n USING TIMESTAMP {at}{ttl} SET w = {x} WHERE k = {k}"),
            7 => format!("INSERT INTO ks.n (k, v) VALUES ({k}, {x}) USING TIMESTAMP {at}{ttl}"),
            _ => format!(
                "INSERT INTO ks.p (k, c, v) VALUES ({k}, {c}, {x}) USING TIMESTAMP {at}{ttl}"
            ),
        };
        t.ok(&stmt);
        if rng.below(20) == 0 {
            to_disk(&t);
        }
        t.advance_ms(rng.below(1_500));
        for k in 0..3 {
            let point = format!("SELECT k, v, w FROM ks.n WHERE k = {k}");
            let scan = format!(
                "SELECT k, v, w FROM ks.n WHERE token(k) >= token({k}) AND token(k) <= token({k})"
            );
            same(&mut t, &point, &scan, step, &stmt);
            for c in 0..4 {
                let cols = "SELECT k, c, s, v, w FROM ks.p WHERE k =";
                let point = format!("{cols} {k} AND c = {c}");
                let scan = format!("{cols} {k} AND c >= {c} AND c <= {c}");
                same(&mut t, &point, &scan, step, &stmt);
            }
            let point = format!("SELECT c, v FROM ks.p WHERE k = {k} AND c IN (0, 1, 2, 3)");
            let scan = format!("SELECT c, v FROM ks.p WHERE k = {k} AND c >= 0 AND c <= 3");
            same(&mut t, &point, &scan, step, &stmt);
        }
    }
}

fn same(t: &mut TestEngine, point: &str, scan: &str, step: usize, after: &str) {
    let (p, p_ru) = t.run_charged(point);
    let (s, s_ru) = t.run_charged(scan);
    let cells = |o: Outcome| match o {
        Outcome::Rows(r) => crate::shared::cells::cells(&r.content),
        _ => panic!("expected rows"),
    };
    assert_eq!(
        cells(p.unwrap()),
        cells(s.unwrap()),
        "step {step}, after {after}: {point}"
    );
    assert_eq!(p_ru, s_ru, "step {step}, after {after}: RU of {point}");
}
