//! Expired and deleted data leaves the store after gc_grace_seconds (compaction purge filter).

use ringgate::query::{Engine, EngineLimits, QueryOptions, Session};
use ringgate::schema::system::NodeInfo;
use ringgate::storage::{EmbeddedStore, Space, Store, SyncMode};
use std::ops::Bound;
use std::sync::Arc;

fn engine(dir: &std::path::Path) -> (Arc<dyn Store>, Arc<Engine>) {
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir, SyncMode::None).unwrap());
    let node = NodeInfo {
        listen: "127.0.0.1:9042".parse().unwrap(),
        host_id: ringgate::schema::system::host_id(&*store).unwrap(),
        cluster_name: "t".into(),
        data_center: "dc".into(),
        rack: "r".into(),
        tokens: ringgate::schema::system::node_tokens(1),
        native_protocol_version: "5".into(),
        cluster: None,
    };
    // Loads tables without throughput: account request units, never throttle.
    let limits = EngineLimits {
        throughput: ringgate::partition::throttle::ThroughputLimits {
            enforce: ringgate::partition::throttle::Enforce::Off,
            ..Default::default()
        },
        ..Default::default()
    };
    let e = Arc::new(Engine::new(Arc::clone(&store), node, limits).unwrap());
    ringgate::query::purge::install(&e);
    (store, e)
}

/// An engine with keyspace `p` and table `p.t (k, c, v)` with the given gc_grace_seconds.
fn setup(dir: &std::path::Path, gc_grace: u32) -> (Arc<dyn Store>, Arc<Engine>, Session) {
    let (store, e) = engine(dir);
    let mut s = Session::default();
    run(
        &e,
        &mut s,
        "CREATE KEYSPACE p WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    );
    run(
        &e,
        &mut s,
        &format!(
            "CREATE TABLE p.t (k int, c int, v text, PRIMARY KEY (k, c)) WITH gc_grace_seconds = {gc_grace}"
        ),
    );
    (store, e, s)
}

fn run(e: &Engine, s: &mut Session, q: &str) {
    e.query(s, q, &QueryOptions::default())
        .unwrap_or_else(|err| panic!("{q}: {err}"));
}

/// The size records of table `p.t` (bytes per logical partition), in token order.
fn size_records(_store: &dyn Store, e: &Engine) -> Vec<u64> {
    let sid = e.schema().keyspaces["p"].tables["t"].storage_id;
    let map = e.maps.get(sid).unwrap();
    ringgate::partition::sizes::scan_table(&e.handles, sid, &map)
        .map(|r| r.unwrap().bytes as u64)
        .collect()
}

fn data_keys(store: &dyn Store) -> usize {
    store
        .scan(Space::Data, Bound::Unbounded, Bound::Unbounded, false)
        .count()
}

#[test]
fn expired_and_deleted_rows_leave_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (store, e, mut s) = setup(dir.path(), 0);
    run(
        &e,
        &mut s,
        "CREATE TABLE p.keep (k int PRIMARY KEY, v text)",
    );
    for i in 0..50 {
        run(
            &e,
            &mut s,
            &format!("INSERT INTO p.t (k, c, v) VALUES (1, {i}, 'expiring') USING TTL 1"),
        );
        run(
            &e,
            &mut s,
            &format!("INSERT INTO p.t (k, c, v) VALUES (2, {i}, 'deleted')"),
        );
        run(
            &e,
            &mut s,
            &format!("INSERT INTO p.keep (k, v) VALUES ({i}, 'kept')"),
        );
    }
    run(
        &e,
        &mut s,
        "INSERT INTO p.t (k, c, v) VALUES (3, 0, 'live')",
    );
    for i in 0..50 {
        run(
            &e,
            &mut s,
            &format!("DELETE FROM p.t WHERE k = 2 AND c = {i}"),
        );
    }
    let before = data_keys(&*store);
    assert_eq!(before, 50 + 50 + 50 + 1);
    assert_eq!(size_records(&*store, &e).len(), 3);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    store.compact().unwrap();
    // Only the live row of p.t and the 50 rows of p.keep (gc_grace_seconds 10 days) remain.
    assert_eq!(data_keys(&*store), 1 + 50);
    // The sweeper recounts the partitions the compaction purged: the two emptied ones lose
    // their size records, the live one keeps its size.
    ringgate::query::purge::sweep_tombstones(&e).unwrap();
    let sizes = size_records(&*store, &e);
    assert_eq!(sizes.len(), 1, "{sizes:?}");
    assert!(sizes[0] > 0 && sizes[0] < 200, "one small row: {sizes:?}");
}

#[test]
fn rows_shadowed_by_a_partition_deletion_leave_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (store, e, mut s) = setup(dir.path(), 0);
    for i in 0..20 {
        run(
            &e,
            &mut s,
            &format!("INSERT INTO p.t (k, c, v) VALUES (1, {i}, 'x')"),
        );
    }
    run(&e, &mut s, "DELETE FROM p.t WHERE k = 1 AND c >= 10");
    store.compact().unwrap();
    // The compaction drops the covered rows; the range tombstone waits for the sweeper.
    assert_eq!(data_keys(&*store), 1 + 10);
    assert_eq!(ringgate::query::purge::sweep_tombstones(&e).unwrap(), 1);
    assert_eq!(data_keys(&*store), 10, "the emptied header is gone");
    run(&e, &mut s, "DELETE FROM p.t WHERE k = 1");
    // written after the partition deletion: survives it and its purge
    run(
        &e,
        &mut s,
        "INSERT INTO p.t (k, c, v) VALUES (1, 99, 'after')",
    );
    assert_eq!(ringgate::query::purge::sweep_tombstones(&e).unwrap(), 0);
    store.compact().unwrap();
    assert_eq!(ringgate::query::purge::sweep_tombstones(&e).unwrap(), 1);
    store.compact().unwrap();
    assert_eq!(
        data_keys(&*store),
        1,
        "only the row written after the deletion is left"
    );
    let out = e
        .query(
            &mut s,
            "SELECT c, v FROM p.t WHERE k = 1",
            &QueryOptions::default(),
        )
        .unwrap();
    assert!(format!("{out:?}").contains("after"));
}

#[test]
fn tombstones_within_gc_grace_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (store, e, mut s) = setup(dir.path(), 3600);
    for i in 0..5 {
        run(
            &e,
            &mut s,
            &format!("INSERT INTO p.t (k, c, v) VALUES (1, {i}, 'x')"),
        );
    }
    run(&e, &mut s, "DELETE FROM p.t WHERE k = 1");
    store.compact().unwrap();
    assert_eq!(ringgate::query::purge::sweep_tombstones(&e).unwrap(), 0);
    // The partition deletion stays (it may still have to shadow data); what it shadows in the
    // same compaction is gone.
    assert_eq!(data_keys(&*store), 1);
}

#[test]
fn a_large_partition_is_swept_in_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let (store, e, mut s) = setup(dir.path(), 0);
    // More rows than one chunk rewrites, in two partitions; written before the deletion and
    // flushed into their own run, so the compaction that drops the deletion is not needed.
    for i in 0..2500 {
        run(
            &e,
            &mut s,
            &format!("INSERT INTO p.t (k, c, v) VALUES (1, {i}, 'x')"),
        );
    }
    run(
        &e,
        &mut s,
        "INSERT INTO p.t (k, c, v) VALUES (2, 0, 'other')",
    );
    run(&e, &mut s, "DELETE FROM p.t WHERE k = 1 AND c >= 100");
    run(&e, &mut s, "DELETE FROM p.t WHERE k = 1 AND c < 50");
    assert_eq!(data_keys(&*store), 2500 + 1 + 1);
    assert_eq!(
        ringgate::query::purge::sweep_table(&e, "p", "t").unwrap(),
        1,
        "one partition had tombstones"
    );
    // Left: rows 50..100 of partition 1 and the row of partition 2; no header.
    assert_eq!(data_keys(&*store), 50 + 1);
    let sizes = size_records(&*store, &e);
    assert_eq!(sizes.len(), 2);
    let out = e
        .query(
            &mut s,
            "SELECT count(*) FROM p.t WHERE k = 1",
            &QueryOptions::default(),
        )
        .unwrap();
    let ringgate::query::Outcome::Rows(r) = out else {
        panic!("not rows")
    };
    assert!(r.content.ends_with(&50i64.to_be_bytes()), "{r:?}");
}
