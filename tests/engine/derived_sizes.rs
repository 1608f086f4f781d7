//! Tables without clustering columns keep no size records: their partitions derive them from
//! their rows (`partition/derived_sizes.rs`). What the records would have said is what the
//! write path's accounting says (the counters and the memo, kept from each write's old and new
//! sizes, exactly as records are): after random inserts, updates, deletions, TTLs, expiry with
//! compaction and the sweeper, a recount as at a restart, a split, and writes without memos,
//! every partition's counters and memo equal the records derived from its rows; a table with
//! clustering columns keeps its records.

use super::support::{open, TestEngine};
use rand::rngs::StdRng;
use rand::SeedableRng;
use ringgate::partition::derived_sizes::SizeSource;
use ringgate::partition::sizes::{recorded_at, recount, scan_range, size_key};
use ringgate::storage::Space;
use std::ops::Bound;
use std::sync::atomic::Ordering;

fn storage_id(t: &TestEngine, table: &str) -> u64 {
    t.engine.schema().keyspaces["ks"].tables[table].storage_id
}

/// Size records stored in `Space::Sizes` for table `sid`.
fn stored_records(t: &TestEngine, sid: u64) -> usize {
    let (lo, hi) = (sid.to_be_bytes(), (sid + 1).to_be_bytes());
    let range = (Bound::Included(&lo[..]), Bound::Excluded(&hi[..]));
    t.store.scan(Space::Sizes, range.0, range.1, false).count()
}

/// Asserts that every partition of `table` uses `source` and that its counters and memo (if
/// on) equal its records; returns the table's (bytes, logical partitions).
fn assert_exact(t: &TestEngine, table: &str, source: SizeSource) -> (i64, i64) {
    let sid = storage_id(t, table);
    let map = t.engine.maps.get(sid).unwrap();
    let mut total = (0i64, 0i64);
    for p in &map.parts {
        assert_eq!(p.sizes, source, "{table} partition {}", p.id);
        let handle = t.engine.handles.read(sid, p).unwrap();
        let (mut bytes, mut logical) = (0i64, 0i64);
        for r in scan_range(&**handle, sid, p) {
            let r = r.unwrap();
            assert!(r.bytes > 0, "{table}: an empty record");
            let key = size_key(sid, r.token, &r.pk);
            if p.stats.memo.is_on() {
                assert_eq!(p.stats.memo.get(&key[8..]), Some(r.bytes as u64), "{table}");
            }
            bytes += r.bytes;
            logical += 1;
        }
        if p.stats.memo.is_on() {
            assert_eq!(p.stats.memo.records(), Some(logical as usize), "{table}");
        }
        assert_eq!(p.stats.bytes.load(Ordering::SeqCst), bytes, "{table}");
        assert_eq!(p.stats.logical.load(Ordering::SeqCst), logical, "{table}");
        total = (total.0 + bytes, total.1 + logical);
    }
    total
}

/// As at a restart: counters and memos lost, then counted again from the records.
fn recount_all(t: &TestEngine, table: &str) {
    let sid = storage_id(t, table);
    for p in &t.engine.maps.get(sid).unwrap().parts {
        p.stats.bytes.store(0, Ordering::SeqCst);
        p.stats.logical.store(0, Ordering::SeqCst);
        p.stats.memo.off();
        let handle = t.engine.handles.read(sid, p).unwrap();
        assert!(recount(&**handle, sid, p, &mut usize::MAX.clone()).unwrap());
    }
}

/// Creates the flat table `ks.f` (random `writes` over `keys` keys, some with TTLs) and `ks.c`
/// (clustering columns, 40 rows in 7 partitions); asserts that `ks.f` keeps no records and
/// derives exact sizes, and that `ks.c` keeps its records; returns `ks.f`'s (bytes,
/// logical partitions).
fn write_both(t: &mut TestEngine, rng: &mut StdRng, writes: usize, keys: i64) -> (i64, i64) {
    t.ok("CREATE TABLE ks.f (k bigint PRIMARY KEY, v int, t text, b blob, l list<int>) WITH gc_grace_seconds = 0");
    t.ok("CREATE TABLE ks.c (k bigint, c int, v int, PRIMARY KEY (k, c))");
    super::flat_scan::write_random(t, rng, writes, keys);
    for k in 0..40 {
        t.ok(&format!(
            "INSERT INTO ks.c (k, c, v) VALUES ({}, {k}, 1)",
            k % 7
        ));
    }
    let written = assert_exact(t, "f", SizeSource::Rows);
    assert!(written.1 as usize > writes / 8, "{written:?}");
    assert_eq!(stored_records(t, storage_id(t, "f")), 0);
    assert_eq!(assert_exact(t, "c", SizeSource::Records).1, 7);
    assert_eq!(stored_records(t, storage_id(t, "c")), 7);
    written
}

#[test]
fn a_flat_table_derives_its_sizes_exactly_through_writes_expiry_recounts_and_splits() {
    let mut t = open(&[]);
    let mut rng = StdRng::seed_from_u64(17);
    let written = write_both(&mut t, &mut rng, 600, 150);

    // Expiry: the compaction purges the expired rows, the sweeper brings the counters down.
    t.advance_ms(5_000);
    t.store.compact().unwrap();
    ringgate::query::purge::sweep_tombstones(&t.engine).unwrap();
    let expired = assert_exact(&t, "f", SizeSource::Rows);
    assert!(expired.1 < written.1, "{expired:?} after {written:?}");

    recount_all(&t, "f");
    assert_eq!(assert_exact(&t, "f", SizeSource::Rows), expired);

    t.ok("ALTER TABLE ks.f WITH cosmosdb_provisioned_throughput = 30000");
    assert_eq!(
        t.engine.maps.get(storage_id(&t, "f")).unwrap().parts.len(),
        3
    );
    assert_eq!(assert_exact(&t, "f", SizeSource::Rows), expired);
    super::flat_scan::write_random(&mut t, &mut rng, 300, 150);
    assert_exact(&t, "f", SizeSource::Rows);

    // Without memos (over their memory budget, or after a failed commit) writes take the old
    // sizes from the rows they read.
    let sid = storage_id(&t, "f");
    for p in &t.engine.maps.get(sid).unwrap().parts {
        p.stats.memo.off();
    }
    super::flat_scan::write_random(&mut t, &mut rng, 300, 150);
    let unmemoized = assert_exact(&t, "f", SizeSource::Rows);
    // Without a memo, one partition's size is looked up from its rows (point reads here).
    let (maps, handles) = (&t.engine.maps, &t.engine.handles);
    for p in &maps.get(sid).unwrap().parts {
        for r in scan_range(&**handles.read(sid, p).unwrap(), sid, p) {
            let r = r.unwrap();
            let key = size_key(sid, r.token, &r.pk);
            assert_eq!(
                recorded_at(maps, handles, sid, r.token, &key).unwrap(),
                r.bytes as u64
            );
        }
    }
    let absent = 1_000_000_000i64.to_be_bytes();
    let token = ringgate::tokens::token_of(&absent);
    let key = size_key(sid, token, &absent);
    assert_eq!(recorded_at(maps, handles, sid, token, &key).unwrap(), 0);
    recount_all(&t, "f");
    assert_eq!(assert_exact(&t, "f", SizeSource::Rows), unmemoized);
    assert_eq!(stored_records(&t, sid), 0);
}

/// On PostgreSQL a write of such a table reads its row and the row's header in one statement
/// (`derived_sizes::read_with_size`): the sizes the writes keep are those its rows derive, and a
/// table with clustering columns keeps its records.
#[test]
fn a_flat_table_on_postgresql_derives_its_sizes_exactly() {
    let Some(pg) = super::pg::server() else {
        return;
    };
    let url = format!("storage.postgres.url={}", pg.new_database("engine-derived"));
    let mut t = open(&["storage.backend=postgres", &url]);
    let mut rng = StdRng::seed_from_u64(19);
    let written = write_both(&mut t, &mut rng, 400, 100);
    recount_all(&t, "f");
    assert_eq!(assert_exact(&t, "f", SizeSource::Rows), written);
}
