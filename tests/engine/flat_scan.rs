//! Scans of tables without clustering columns (`query/select/flat_scan.rs`) read each plain row
//! straight from its stored bytes. They must answer exactly as the general path does: the same
//! rows and cells, page after page with the same paging states, and the same request units,
//! over random rows with TTLs (some expired), deleted cells and rows, rows without a marker,
//! collection cells (rows the general path reads), keys holding 0x00 bytes, composite keys,
//! and rows in disk tables under newer writes in the memtable.
//!
//! The oracle is the same query with one more selector, `writetime(v)`, which the fast path
//! does not take (it sends the query down the general path); that last column is dropped
//! before comparing.

use super::support::{open, TestEngine};
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ringgate::query::{Outcome, QueryOptions};

/// One page: its rows (cells, None: null), its paging state and the request units charged.
type Page = (Vec<Vec<Option<Vec<u8>>>>, Option<Bytes>, f64);

/// Every page of `q` at `page_size` rows (bounded: a scan that never ends fails).
fn pages(t: &mut TestEngine, q: &str, page_size: Option<i32>, drop_last: bool) -> Vec<Page> {
    let mut out: Vec<Page> = Vec::new();
    let mut state = None;
    loop {
        let opts = QueryOptions {
            page_size,
            paging_state: state,
            ..Default::default()
        };
        let res = t.engine.query(&mut t.session, q, &opts);
        let Outcome::Rows(rows) = res.unwrap_or_else(|e| panic!("{q}: {e}")) else {
            panic!("{q}: expected rows");
        };
        let width = rows.columns.len();
        let cells = crate::shared::cells::cells(&rows.content);
        let mut page: Vec<Vec<_>> = cells.chunks(width).map(|c| c.to_vec()).collect();
        if drop_last {
            page.iter_mut().for_each(|r| drop(r.pop()));
        }
        state = rows.paging_state.clone();
        out.push((page, rows.paging_state, opts.ctx.charge()));
        assert!(out.len() < 5_000, "{q}: too many pages");
        if state.is_none() {
            return out;
        }
    }
}

/// `q` (selectors, then the rest) answers as its oracle at several page sizes; returns the
/// rows it read.
fn same_as_general(t: &mut TestEngine, selectors: &str, rest: &str) -> usize {
    let fast = format!("SELECT {selectors} {rest}");
    let general = format!("SELECT {selectors}, writetime(v) {rest}");
    let mut rows = 0;
    for page_size in [None, Some(1), Some(3), Some(64)] {
        let a = pages(t, &fast, page_size, false);
        let b = pages(t, &general, page_size, true);
        assert_eq!(a, b, "{fast} (page size {page_size:?})");
        rows = a.iter().map(|p| p.0.len()).sum();
    }
    rows
}

/// Random writes to `ks.f` over `keys` keys (bigint keys near 0 hold 0x00 bytes).
pub(crate) fn write_random(t: &mut TestEngine, rng: &mut StdRng, writes: usize, keys: i64) {
    for _ in 0..writes {
        let k = rng.gen_range(-keys..keys) * if rng.gen_bool(0.2) { 1 << 40 } else { 1 };
        let ttl = if rng.gen_bool(0.3) {
            format!(" USING TTL {}", rng.gen_range(1..4))
        } else {
            String::new()
        };
        let v = rng.gen_range(0..1000);
        let q = match rng.gen_range(0..7) {
            0 | 1 => format!("INSERT INTO ks.f (k, v, t) VALUES ({k}, {v}, 't{v}'){ttl}"),
            2 => format!("UPDATE ks.f{ttl} SET v = {v} WHERE k = {k}"),
            3 => format!("UPDATE ks.f{ttl} SET b = 0x00ff{v:04x} WHERE k = {k}"),
            4 => format!("DELETE v FROM ks.f WHERE k = {k}"),
            5 => format!("DELETE FROM ks.f WHERE k = {k}"),
            _ => format!("UPDATE ks.f SET l = l + [{v}] WHERE k = {k}"),
        };
        t.ok(&q);
    }
}

#[test]
fn scans_of_random_rows_answer_as_the_general_path() {
    let mut t = open(&[]);
    t.ok("CREATE TABLE ks.f (k bigint PRIMARY KEY, v int, t text, b blob, l list<int>)");
    let mut rng = StdRng::seed_from_u64(15);
    write_random(&mut t, &mut rng, 600, 150);
    t.store.compact().unwrap();
    write_random(&mut t, &mut rng, 300, 150);
    let queries = [
        ("k, v, t, b", "FROM ks.f"),
        ("v, k, token(k)", "FROM ks.f"),
        (
            "b",
            "FROM ks.f WHERE token(k) > -3000000000000000000 AND token(k) <= 4000000000000000000",
        ),
        ("k, v", "FROM ks.f LIMIT 17"),
        ("t, t, k", "FROM ks.f WHERE token(k) >= 0"),
    ];
    let before: Vec<usize> = (queries.iter())
        .map(|(s, r)| same_as_general(&mut t, s, r))
        .collect();
    assert!(before[0] > 50, "{before:?}");
    // Some TTLs run out.
    t.advance_ms(2_000);
    let after = same_as_general(&mut t, queries[0].0, queries[0].1);
    assert!(after < before[0], "{after} {before:?}");
    t.advance_ms(2_000);
    for (s, r) in queries {
        same_as_general(&mut t, s, r);
    }
}

#[test]
fn composite_keys_and_dropped_collections_answer_as_the_general_path() {
    let mut t = open(&[]);
    t.ok("CREATE TABLE ks.c (a int, b blob, v int, w text, m map<int, int>, PRIMARY KEY ((a, b)))");
    for i in 0..60 {
        // Components holding 0x00 bytes, and one empty.
        let b = match i {
            1 => "0x".to_string(),
            _ if i % 3 == 0 => format!("0x{:02x}", i + 0x10),
            _ => format!("0x00{i:02x}00"),
        };
        t.ok(&format!(
            "INSERT INTO ks.c (a, b, v, w) VALUES ({}, {b}, {i}, 'w{i}')",
            i % 7
        ));
        if i % 4 == 0 {
            t.ok(&format!(
                "UPDATE ks.c SET m = m + {{{i}: 1}} WHERE a = {} AND b = {b}",
                i % 7
            ));
        }
        if i % 5 == 0 {
            t.ok(&format!(
                "DELETE v FROM ks.c WHERE a = {} AND b = {b}",
                i % 7
            ));
        }
    }
    let rows = same_as_general(&mut t, "a, b, v, w", "FROM ks.c");
    assert_eq!(rows, 60);
    same_as_general(
        &mut t,
        "b, token(a, b), v",
        "FROM ks.c WHERE token(a, b) > 0",
    );
    // The rows keep their (now dropped) collection cells: the general path reads them.
    t.ok("ALTER TABLE ks.c DROP m");
    t.store.compact().unwrap();
    assert_eq!(same_as_general(&mut t, "w, a, b, v", "FROM ks.c"), 60);
}
