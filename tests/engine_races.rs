//! Writers that do not share this process's lock stripes (as nodes over one backend will not):
//! the per-partition handles' conditional commits alone keep read-merge-write and lightweight
//! transactions exact, and a newer owner fences an older one.

#[allow(dead_code)]
#[path = "storage_contract/pg.rs"]
mod pg;
#[path = "shared/mod.rs"]
mod shared;

use ringgate::query::{Engine, EngineLimits, Outcome, QueryError, QueryOptions, Session};
use ringgate::storage::{EmbeddedStore, Store, SyncMode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

fn engine(store: &Arc<dyn Store>) -> Arc<Engine> {
    let node = shared::node::test_node(&**store);
    let limits = EngineLimits {
        throughput: ringgate::partition::throttle::ThroughputLimits {
            enforce: ringgate::partition::throttle::Enforce::Off,
            ..Default::default()
        },
        ..Default::default()
    };
    Arc::new(Engine::new(Arc::clone(store), node, limits).unwrap())
}

fn open(dir: &std::path::Path) -> Arc<dyn Store> {
    Arc::new(EmbeddedStore::open(dir, SyncMode::None).unwrap())
}

fn run(e: &Engine, q: &str) -> Result<Outcome, QueryError> {
    e.query(&mut Session::default(), q, &QueryOptions::default())
}

/// The cells of a result, in order (None: null).
fn cells(out: &Outcome) -> Vec<Option<Vec<u8>>> {
    let Outcome::Rows(rows) = out else {
        panic!("expected rows");
    };
    shared::cells::cells(&rows.content)
}

fn setup(e: &Engine) {
    run(
        e,
        "CREATE KEYSPACE r WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    )
    .unwrap();
    run(e, "CREATE TABLE r.l (k int PRIMARY KEY, l list<int>)").unwrap();
    run(e, "CREATE TABLE r.c (k int PRIMARY KEY, v int)").unwrap();
}

#[test]
fn list_appends_from_writers_without_shared_locks_are_all_kept() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(&open(dir.path()));
    setup(&e);
    e.set_skip_write_locks_for_tests(true);
    const THREADS: usize = 4;
    const APPENDS: usize = 150;
    let start = Arc::new(Barrier::new(THREADS));
    let acked: usize = (0..THREADS)
        .map(|t| {
            let (e, start) = (Arc::clone(&e), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                let mut acked = 0;
                for i in 0..APPENDS {
                    let q = format!("UPDATE r.l SET l = l + [{}] WHERE k = 1", t * 1000 + i);
                    match run(&e, &q) {
                        Ok(_) => acked += 1,
                        // Contention past the retries: Cassandra's answer, nothing written.
                        Err(QueryError::WriteTimeout(..)) => {}
                        Err(other) => panic!("{q}: {other}"),
                    }
                }
                acked
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .sum();
    assert!(
        acked > THREADS * APPENDS / 2,
        "only {acked} appends acknowledged"
    );
    let out = run(&e, "SELECT l FROM r.l WHERE k = 1").unwrap();
    let list = cells(&out)[0].clone().unwrap();
    let len = i32::from_be_bytes(list[..4].try_into().unwrap()) as usize;
    // No lost update: every acknowledged append is in the list, nothing else is.
    assert_eq!(len, acked);
}

#[test]
fn racing_conditional_inserts_apply_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(&open(dir.path()));
    setup(&e);
    e.set_skip_write_locks_for_tests(true);
    for round in 0..200 {
        let start = Arc::new(Barrier::new(2));
        let applied: Vec<(i32, bool)> = (0..2)
            .map(|t| {
                let (e, start) = (Arc::clone(&e), Arc::clone(&start));
                std::thread::spawn(move || {
                    start.wait();
                    let q = format!("INSERT INTO r.c (k, v) VALUES ({round}, {t}) IF NOT EXISTS");
                    let out = run(&e, &q).unwrap();
                    (t, cells(&out)[0].as_deref() == Some(&[1][..]))
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        let winners: Vec<i32> = applied.iter().filter(|x| x.1).map(|x| x.0).collect();
        assert_eq!(winners.len(), 1, "round {round}: {applied:?}");
        let out = run(&e, &format!("SELECT v FROM r.c WHERE k = {round}")).unwrap();
        let v = cells(&out)[0].clone().unwrap();
        assert_eq!(i32::from_be_bytes(v[..].try_into().unwrap()), winners[0]);
    }
}

/// A read of a partition's static cell and one row sees a write of both whole or not at all
/// (Cassandra isolates a single-partition write), also while that write lands and whether the
/// read looks the header and the row up one by one (a point read, `query/select/points.rs`)
/// or reads the header on its own before a scan (a slice, a reversed read): what it reads is
/// one state of the partition. Every write sets the static and the row to the same number.
#[test]
fn a_read_sees_a_write_of_statics_and_a_row_whole() {
    let dir = tempfile::tempdir().unwrap();
    reads_see_statics_and_a_row_whole(&engine(&open(dir.path())), 4_000);
}

/// The same on PostgreSQL, where a read's statements each see the table as it is then: a
/// header read with a slice's first page in one statement (`PartitionHandle::get_and_scan`),
/// an index read's keys in one (`get_together`).
#[test]
fn a_read_on_postgresql_sees_a_write_of_statics_and_a_row_whole() {
    let Some(pg) = pg::server() else { return };
    let config = ringgate::storage::postgres::PgConfig {
        url: pg.new_database("races-isolation"),
        pool_size: 8,
    };
    let store: Arc<dyn Store> =
        Arc::new(ringgate::storage::postgres::PostgresStore::open(&config).unwrap());
    reads_see_statics_and_a_row_whole(&engine(&store), 1_000);
}

fn reads_see_statics_and_a_row_whole(e: &Engine, writes: i32) {
    setup(e);
    run(
        e,
        "CREATE TABLE r.s (k int, c int, s int static, v int, w int, PRIMARY KEY (k, c))",
    )
    .unwrap();
    run(e, "CREATE INDEX ON r.s (w)").unwrap();
    run(e, "INSERT INTO r.s (k, c, s, v, w) VALUES (1, 1, 0, 0, 1)").unwrap();
    const READS: [&str; 5] = [
        "SELECT s, v FROM r.s WHERE k = 1 AND c = 1",
        "SELECT s, v FROM r.s WHERE k = 1 AND c >= 1",
        "SELECT s, v FROM r.s WHERE k = 1 ORDER BY c DESC",
        "SELECT s, v FROM r.s WHERE k = 1",
        // Through the index on `w`: the entry, then the row and its partition's header.
        "SELECT s, v FROM r.s WHERE w = 1",
    ];
    let written = AtomicBool::new(false);
    let (reads, torn) = std::thread::scope(|scope| {
        scope.spawn(|| {
            for i in 1..=writes {
                let q = format!("INSERT INTO r.s (k, c, s, v, w) VALUES (1, 1, {i}, {i}, 1)");
                run(e, &q).unwrap();
            }
            written.store(true, Ordering::SeqCst);
        });
        let reader = scope.spawn(|| {
            let (mut reads, mut torn) = ([0u64; READS.len()], Vec::new());
            for q in (0..READS.len()).cycle() {
                if written.load(Ordering::SeqCst) {
                    break;
                }
                let row = cells(&run(e, READS[q]).unwrap());
                if row[0] != row[1] {
                    torn.push((READS[q], row));
                }
                reads[q] += 1;
            }
            (reads, torn)
        });
        reader.join().unwrap()
    });
    assert!(reads.iter().all(|&n| n > 0), "{reads:?}");
    assert!(
        torn.is_empty(),
        "{} of {reads:?} reads torn, e.g. {:?}",
        torn.len(),
        &torn[..torn.len().min(3)]
    );
}

/// The rows one write sets in one partition are read whole through a secondary index too:
/// an index read looks a partition's hits up together (`query/select/read.rs::IndexRows`).
/// Every write (a batch of one partition) sets both rows' `v` to the same number.
#[test]
fn an_index_read_sees_the_rows_of_a_write_whole() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(&open(dir.path()));
    setup(&e);
    run(
        &e,
        "CREATE TABLE r.i (k int, c int, v int, w int, PRIMARY KEY (k, c))",
    )
    .unwrap();
    run(&e, "CREATE INDEX ON r.i (w)").unwrap();
    let write = |i: i32| {
        format!(
            "BEGIN UNLOGGED BATCH INSERT INTO r.i (k, c, v, w) VALUES (1, 1, {i}, 1); \
             INSERT INTO r.i (k, c, v, w) VALUES (1, 2, {i}, 1); APPLY BATCH"
        )
    };
    run(&e, &write(0)).unwrap();
    const WRITES: i32 = 4_000;
    let written = AtomicBool::new(false);
    let (reads, torn) = std::thread::scope(|scope| {
        scope.spawn(|| {
            for i in 1..=WRITES {
                run(&e, &write(i)).unwrap();
            }
            written.store(true, Ordering::SeqCst);
        });
        let reader = scope.spawn(|| {
            let (mut reads, mut torn) = (0u64, Vec::new());
            while !written.load(Ordering::SeqCst) {
                let v = cells(&run(&e, "SELECT v FROM r.i WHERE w = 1").unwrap());
                if v.len() != 2 || v[0] != v[1] {
                    torn.push(v);
                }
                reads += 1;
            }
            (reads, torn)
        });
        reader.join().unwrap()
    });
    assert!(reads > 0);
    assert!(
        torn.is_empty(),
        "{} of {reads} reads torn, e.g. {:?}",
        torn.len(),
        &torn[..torn.len().min(3)]
    );
}

#[test]
fn a_newer_owner_fences_the_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let old = engine(&store);
    setup(&old);
    run(&old, "INSERT INTO r.c (k, v) VALUES (1, 1)").unwrap();
    // A second engine over the same store takes the next owner epoch; its first write opens
    // the partition and fences the first engine's handle.
    let new = engine(&store);
    run(&new, "INSERT INTO r.c (k, v) VALUES (1, 2)").unwrap();
    let err = run(&old, "INSERT INTO r.c (k, v) VALUES (1, 3)").unwrap_err();
    assert!(err.to_string().contains("is owned by epoch 2"), "{err}");
    let out = run(&new, "SELECT v FROM r.c WHERE k = 1").unwrap();
    assert_eq!(cells(&out)[0].as_deref(), Some(&2i32.to_be_bytes()[..]));
}
