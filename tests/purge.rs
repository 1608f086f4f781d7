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
    };
    // Loads tables without throughput: account request units, never throttle.
    let limits = EngineLimits {
        throughput: ringgate::partition::throttle::ThroughputLimits {
            enforce: false,
            ..Default::default()
        },
        ..Default::default()
    };
    let e = Arc::new(Engine::new(Arc::clone(&store), node, limits).unwrap());
    ringgate::query::purge::install(&e);
    (store, e)
}

fn run(e: &Engine, s: &mut Session, q: &str) {
    e.query(s, q, &QueryOptions::default())
        .unwrap_or_else(|err| panic!("{q}: {err}"));
}

fn data_keys(store: &dyn Store) -> usize {
    store
        .scan(Space::Data, Bound::Unbounded, Bound::Unbounded, false)
        .count()
}

#[test]
fn expired_and_deleted_rows_leave_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (store, e) = engine(dir.path());
    let mut s = Session::default();
    run(
        &e,
        &mut s,
        "CREATE KEYSPACE p WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    );
    run(
        &e,
        &mut s,
        "CREATE TABLE p.t (k int, c int, v text, PRIMARY KEY (k, c)) WITH gc_grace_seconds = 0",
    );
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
    std::thread::sleep(std::time::Duration::from_millis(2100));
    store.compact().unwrap();
    // Only the live row of p.t and the 50 rows of p.keep (gc_grace_seconds 10 days) remain.
    assert_eq!(data_keys(&*store), 1 + 50);
}

#[test]
fn rows_shadowed_by_a_partition_deletion_leave_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (store, e) = engine(dir.path());
    let mut s = Session::default();
    run(
        &e,
        &mut s,
        "CREATE KEYSPACE p WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    );
    run(
        &e,
        &mut s,
        "CREATE TABLE p.t (k int, c int, v text, PRIMARY KEY (k, c)) WITH gc_grace_seconds = 0",
    );
    for i in 0..20 {
        run(
            &e,
            &mut s,
            &format!("INSERT INTO p.t (k, c, v) VALUES (1, {i}, 'x')"),
        );
    }
    run(&e, &mut s, "DELETE FROM p.t WHERE k = 1 AND c >= 10");
    store.compact().unwrap();
    // The header (holding the range tombstone) and the 10 rows it does not cover.
    assert_eq!(data_keys(&*store), 1 + 10);
    run(&e, &mut s, "DELETE FROM p.t WHERE k = 1");
    store.compact().unwrap();
    assert_eq!(data_keys(&*store), 1, "only the partition header is left");
}
