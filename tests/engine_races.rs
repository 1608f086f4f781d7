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

/// `setup`, and a table `r.w` of wide partitions (clustering column `c`, value `v`), `rows`
/// rows in partition `k` = 1 with `v` = `value(c)` and a kilobyte of padding each: 1,100 rows
/// are more than one PostgreSQL statement reads of a slice (1 MiB, `get_and_scans`).
fn setup_wide(e: &Engine, rows: i32, value: impl Fn(i32) -> i32) {
    setup(e);
    let create = "CREATE TABLE r.w (k int, c int, v int, pad text, PRIMARY KEY (k, c))";
    run(e, create).unwrap();
    let pad = "x".repeat(1000);
    for c in 0..rows {
        let v = value(c);
        let q = format!("INSERT INTO r.w (k, c, v, pad) VALUES (1, {c}, {v}, '{pad}')");
        run(e, &q).unwrap();
    }
}

/// An engine over a fresh database of the test PostgreSQL server (None: no server here).
fn pg_engine(name: &str, pool_size: usize) -> Option<Arc<Engine>> {
    let pg = pg::server()?;
    let config = ringgate::storage::postgres::PgConfig {
        url: pg.new_database(name),
        pool_size,
    };
    let store: Arc<dyn Store> =
        Arc::new(ringgate::storage::postgres::PostgresStore::open(&config).unwrap());
    Some(engine(&store))
}

/// Runs `writes` (statements) one after the other on one thread while another cycles through
/// `reads` until they are done; asserts that every read ran and that `whole(read, cells)` held
/// for every result.
fn race(
    e: &Engine,
    writes: impl Iterator<Item = String> + Send,
    reads: &[&str],
    whole: impl Fn(usize, &[Option<Vec<u8>>]) -> bool + Sync,
) {
    let written = AtomicBool::new(false);
    let (counts, torn) = std::thread::scope(|scope| {
        scope.spawn(|| {
            for q in writes {
                run(e, &q).unwrap();
            }
            written.store(true, Ordering::SeqCst);
        });
        let reader = scope.spawn(|| {
            let (mut counts, mut torn) = (vec![0u64; reads.len()], Vec::new());
            for q in (0..reads.len()).cycle() {
                if written.load(Ordering::SeqCst) {
                    break;
                }
                let got = cells(&run(e, reads[q]).unwrap());
                if !whole(q, &got) {
                    torn.push((reads[q], got));
                }
                counts[q] += 1;
            }
            (counts, torn)
        });
        reader.join().unwrap()
    });
    assert!(counts.iter().all(|&n| n > 0), "{counts:?}");
    assert!(
        torn.is_empty(),
        "{} of {counts:?} reads torn, e.g. {:?}",
        torn.len(),
        &torn[..torn.len().min(3)]
    );
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
/// header read with a slice's first page in one statement (`PartitionHandle::get_and_scans`),
/// an index read's keys in one (`get_together`).
#[test]
fn a_read_on_postgresql_sees_a_write_of_statics_and_a_row_whole() {
    if let Some(e) = pg_engine("races-isolation", 8) {
        reads_see_statics_and_a_row_whole(&e, 1_000);
    }
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
    let writes =
        (1..=writes).map(|i| format!("INSERT INTO r.s (k, c, s, v, w) VALUES (1, 1, {i}, {i}, 1)"));
    race(e, writes, &READS, |_, row| row[0] == row[1]);
}

/// 300 batches, each setting `v` of the first and the last of `rows` rows of partition 1 of
/// `r.w` to the same number.
fn first_and_last_rows_set(rows: usize) -> impl Iterator<Item = String> + Send {
    (1..=300).map(move |i| {
        format!(
            "BEGIN UNLOGGED BATCH UPDATE r.w SET v = {i} WHERE k = 1 AND c = 0; \
             UPDATE r.w SET v = {i} WHERE k = 1 AND c = {}; APPLY BATCH",
            rows - 1
        )
    })
}

/// A read of one partition on PostgreSQL sees a write of its first and last rows whole, also
/// with more rows than one statement reads (a scan pages through the table with statements of
/// their own; `get_and_scans` reads up to 1 MiB of a slice): reads that need more than
/// one statement read one snapshot (`query/select/read.rs::scan_partition`). Every write (a
/// batch of one partition) sets both rows' `v` to the same number; the reads cover the whole
/// partition, a slice, a reversed read and two slices.
#[test]
fn a_wide_read_on_postgresql_sees_a_write_of_its_first_and_last_rows_whole() {
    let Some(e) = pg_engine("races-wide", 8) else {
        return;
    };
    const ROWS: usize = 1_100;
    setup_wide(&e, ROWS as i32, |_| 0);
    const READS: [&str; 4] = [
        "SELECT v FROM r.w WHERE k = 1",
        "SELECT v FROM r.w WHERE k = 1 AND c >= 0",
        "SELECT v FROM r.w WHERE k = 1 ORDER BY c DESC",
        "SELECT v FROM r.w WHERE k = 1 AND c IN (0, 1099)",
    ];
    let writes = first_and_last_rows_set(ROWS);
    race(&e, writes, &READS, |q, v| {
        let want = if q == 3 { 2 } else { ROWS };
        v.len() == want && v.first() == v.last()
    });
}

/// A query whose partition read runs again from snapshots on PostgreSQL (it reads more than
/// one statement reads, 1 MiB of a slice) answers as the first run would have: every row once, in order,
/// across CQL pages, aggregates counted once, other partitions of an `IN` read whole.
#[test]
fn a_wide_read_on_postgresql_run_again_answers_each_row_once() {
    let Some(e) = pg_engine("races-wide-rerun", 4) else {
        return;
    };
    setup_wide(&e, 1_100, |c| c);
    for c in 0..3 {
        run(
            &e,
            &format!("INSERT INTO r.w (k, c, v) VALUES (2, {c}, {c})"),
        )
        .unwrap();
    }
    let ints = |q: &str, page_size: Option<i32>| paged_ints(&e, q, page_size);
    let wide: Vec<i32> = (0..1_100).collect();
    for page in [None, Some(7), Some(100), Some(5000)] {
        assert_eq!(
            ints("SELECT v FROM r.w WHERE k = 1", page),
            wide,
            "{page:?}"
        );
        let back: Vec<i32> = wide.iter().rev().copied().collect();
        let q = "SELECT v FROM r.w WHERE k = 1 ORDER BY c DESC";
        assert_eq!(ints(q, page), back, "{page:?}");
        let both: Vec<i32> = wide.iter().copied().chain(0..3).collect();
        assert_eq!(
            ints("SELECT v FROM r.w WHERE k IN (1, 2)", page),
            both,
            "{page:?}"
        );
    }
    assert_eq!(
        ints("SELECT count(*) FROM r.w WHERE k = 1", None),
        vec![1_100]
    );
    assert_eq!(
        ints("SELECT sum(v) FROM r.w WHERE k = 1", None),
        vec![1_099 * 1_100 / 2]
    );
    let q = "SELECT v FROM r.w WHERE k = 1 AND c >= 10 LIMIT 70";
    assert_eq!(ints(q, Some(30)), (10..80).collect::<Vec<i32>>());
}

/// Token-range and whole-table reads on PostgreSQL see a write of one partition whole too
/// (`query/select/range_share.rs`): the wide partition's 1,100 one-kilobyte rows are more
/// than one statement reads, and a statement ending inside it makes the query run again
/// from snapshots. Every write sets its first and last rows' `v` to the same number.
#[test]
fn a_range_read_on_postgresql_sees_a_write_of_its_first_and_last_rows_whole() {
    let Some(e) = pg_engine("races-range", 8) else {
        return;
    };
    const ROWS: usize = 1_100;
    setup_wide(&e, ROWS as i32, |_| 0);
    const READS: [&str; 3] = [
        "SELECT v FROM r.w",
        "SELECT v FROM r.w WHERE token(k) >= -9223372036854775808",
        "SELECT v FROM r.w WHERE token(k) > -9223372036854775807 AND token(k) <= 9223372036854775807",
    ];
    let writes = first_and_last_rows_set(ROWS);
    race(&e, writes, &READS, |_, v| {
        v.len() == ROWS && v.first() == v.last()
    });
}

/// A range read on PostgreSQL that runs again from snapshots, or goes on in another statement
/// between two partitions, answers every row once and in token order at every page size:
/// the wide partition (more than a statement reads), small ones around it, and a table of
/// 1,000 partitions of one or two one-kilobyte rows (1.5 MB: its statements end between
/// partitions and inside them).
#[test]
fn a_range_read_on_postgresql_answers_each_row_once() {
    let Some(e) = pg_engine("races-range-rerun", 4) else {
        return;
    };
    setup_wide(&e, 1_100, |c| c);
    for k in 2..40 {
        for c in 0..3 {
            let q = format!("INSERT INTO r.w (k, c, v) VALUES ({k}, {c}, {c})");
            run(&e, &q).unwrap();
        }
    }
    let create = "CREATE TABLE r.s (k int, c int, v int, pad text, PRIMARY KEY (k, c))";
    run(&e, create).unwrap();
    let pad = "y".repeat(1000);
    let rows_of = |k: i32| 1 + k % 2;
    for k in 0..1_000 {
        for c in 0..rows_of(k) {
            let q = format!("INSERT INTO r.s (k, c, v, pad) VALUES ({k}, {c}, {c}, '{pad}')");
            run(&e, &q).unwrap();
        }
    }
    // Rows as (k, v) pairs.
    let pairs = |q: &str, page| -> Vec<(i32, i32)> {
        let flat = paged_ints(&e, q, page);
        flat.chunks(2).map(|p| (p[0], p[1])).collect()
    };
    // Each partition once, its rows together and in clustering order (`v` = `c`).
    let whole = |rows: &[(i32, i32)], partitions: usize, rows_of: &dyn Fn(i32) -> i32| {
        let mut keys: Vec<i32> = rows.iter().map(|&(k, _)| k).collect();
        keys.dedup();
        assert_eq!(keys.len(), partitions, "each partition once");
        for k in keys {
            let got: Vec<i32> = (rows.iter().filter(|&&(key, _)| key == k))
                .map(|&(_, v)| v)
                .collect();
            assert_eq!(got, (0..rows_of(k)).collect::<Vec<i32>>(), "partition {k}");
        }
    };
    let wide = pairs("SELECT k, v FROM r.w", None);
    whole(&wide, 39, &|k| if k == 1 { 1_100 } else { 3 });
    let small = pairs("SELECT k, v FROM r.s", None);
    whole(&small, 1_000, &rows_of);
    for page in [Some(7), Some(100), Some(1_000), Some(5_000)] {
        assert_eq!(pairs("SELECT k, v FROM r.w", page), wide, "{page:?}");
        assert_eq!(pairs("SELECT k, v FROM r.s", page), small, "{page:?}");
    }
    assert_eq!(
        paged_ints(&e, "SELECT count(*) FROM r.w", None),
        vec![1_100 + 38 * 3]
    );
    let q = "SELECT k, v FROM r.w WHERE token(k) >= -9223372036854775808 LIMIT 1050";
    assert_eq!(pairs(q, Some(300)), wide[..1_050].to_vec());
}

/// The int (or bigint) cells of every page of `q` read with `page_size`, in order.
fn paged_ints(e: &Engine, q: &str, page_size: Option<i32>) -> Vec<i32> {
    let (mut all, mut state) = (Vec::new(), None);
    loop {
        let opts = QueryOptions {
            page_size,
            paging_state: state.take(),
            ..Default::default()
        };
        let out = e.query(&mut Session::default(), q, &opts).unwrap();
        let Outcome::Rows(rows) = &out else {
            panic!("{q}: expected rows")
        };
        all.extend(cells(&out).into_iter().map(|c| {
            let c = c.unwrap();
            match c.len() {
                8 => i64::from_be_bytes(c[..].try_into().unwrap()) as i32,
                _ => i32::from_be_bytes(c[..].try_into().unwrap()),
            }
        }));
        match rows.paging_state.clone() {
            Some(s) => state = Some(s),
            None => return all,
        }
    }
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
    let reads = ["SELECT v FROM r.i WHERE w = 1"];
    race(&e, (1..=4_000).map(write), &reads, |_, v| {
        v.len() == 2 && v[0] == v[1]
    });
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
