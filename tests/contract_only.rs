//! The engine runs on the per-partition contract alone: over a store whose global `Store`
//! get, scan and commit panic (every key space), every statement kind still works, because
//! every layer above storage reaches table data through partition handles (`PartitionStore`)
//! and metadata through `MetaStore`; `Store` keeps only maintenance hooks (flush, compaction
//! and its filter, backup). A backend that implements the two (the PostgreSQL one of the
//! cluster work) can run the engine.

#[path = "shared/mod.rs"]
mod shared;

use bytes::Bytes;
use ringgate::query::{Engine, EngineLimits, Outcome, QueryOptions, Session};
use ringgate::storage::{
    EmbeddedStore, MetaStore, PartitionStore, Result, ScanIter, Space, Store, SyncMode, WriteBatch,
};
use std::ops::Bound;
use std::sync::Arc;

/// Delegates to the embedded store's partition and metadata stores and maintenance hooks, and
/// panics on every global read or write.
struct ContractOnly(Arc<EmbeddedStore>);

impl Store for ContractOnly {
    fn get(&self, space: Space, _key: &[u8]) -> Result<Option<Bytes>> {
        panic!("global Store::get of {space:?}: use a partition handle or the MetaStore")
    }
    fn scan(&self, space: Space, _: Bound<&[u8]>, _: Bound<&[u8]>, _: bool) -> ScanIter {
        panic!("global Store::scan of {space:?}: use a partition handle or the MetaStore")
    }
    fn commit(&self, batch: WriteBatch) -> Result<()> {
        let spaces: Vec<Space> = batch.ops.iter().map(|op| op.space).collect();
        panic!("global Store::commit of {spaces:?}: use a partition handle or the MetaStore")
    }
    fn flush(&self) -> Result<()> {
        self.0.flush()
    }
    fn metadata(&self) -> &dyn MetaStore {
        &*self.0
    }
    fn partitions(&self) -> Option<&dyn PartitionStore> {
        Some(&*self.0)
    }
    fn set_purge_filter(&self, filter: ringgate::storage::PurgeFilterFactory) {
        self.0.set_purge_filter(filter)
    }
    fn compact(&self) -> Result<()> {
        self.0.compact()
    }
}

fn engine(store: &Arc<dyn Store>, split_bytes: u64) -> Arc<Engine> {
    let node = shared::node::test_node(&**store);
    let mut limits = EngineLimits {
        throughput: ringgate::partition::throttle::ThroughputLimits {
            enforce: ringgate::partition::throttle::Enforce::Off,
            ..Default::default()
        },
        ..Default::default()
    };
    limits.partitions.physical_split_bytes = split_bytes;
    Arc::new(Engine::new(Arc::clone(store), node, limits).unwrap())
}

fn run(e: &Engine, q: &str) -> Outcome {
    e.query(&mut Session::default(), q, &QueryOptions::default())
        .unwrap_or_else(|err| panic!("{q}: {err}"))
}

/// The rows of a result as int cells (None: null), and its paging state.
fn int_rows(out: &Outcome, columns: usize) -> (Vec<Vec<Option<i32>>>, Option<Vec<u8>>) {
    let Outcome::Rows(rows) = out else {
        panic!("expected rows, got {out:?}");
    };
    let cells: Vec<Option<i32>> = shared::cells::cells(&rows.content)
        .into_iter()
        .map(|c| {
            c.map(|v| match v.len() {
                4 => i32::from_be_bytes(v[..].try_into().unwrap()),
                8 => i64::from_be_bytes(v[..].try_into().unwrap()) as i32,
                _ => panic!("not an int: {v:?}"),
            })
        })
        .collect();
    let rows_out = cells.chunks(columns).map(|c| c.to_vec()).collect();
    (rows_out, rows.paging_state.as_ref().map(|p| p.to_vec()))
}

fn select(e: &Engine, q: &str, columns: usize) -> Vec<Vec<Option<i32>>> {
    int_rows(&run(e, q), columns).0
}

/// All rows of `q`, read in pages of `page` rows; returns the rows and how many pages.
fn paged(e: &Engine, q: &str, columns: usize, page: i32) -> (Vec<Vec<Option<i32>>>, usize) {
    let (mut all, mut pages, mut state) = (Vec::new(), 0, None);
    loop {
        let opts = QueryOptions {
            page_size: Some(page),
            paging_state: state.take().map(Bytes::from),
            ..Default::default()
        };
        let out = e
            .query(&mut Session::default(), q, &opts)
            .unwrap_or_else(|err| panic!("{q}: {err}"));
        let (rows, next) = int_rows(&out, columns);
        all.extend(rows);
        pages += 1;
        match next {
            Some(s) => state = Some(s),
            None => return (all, pages),
        }
        assert!(pages < 10_000, "paging does not end");
    }
}

fn open(dir: &std::path::Path) -> Arc<dyn Store> {
    let inner = Arc::new(EmbeddedStore::open(dir, SyncMode::None).unwrap());
    Arc::new(ContractOnly(inner))
}

#[test]
fn every_statement_runs_through_partition_handles_and_the_metadata_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    // Small splits: the table below splits while it is written.
    let e = engine(&store, 16 << 10);
    ringgate::query::purge::install(&e);
    run(
        &e,
        "CREATE KEYSPACE c WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    );
    run(
        &e,
        "CREATE TABLE c.t (k int, c int, v int, s int static, PRIMARY KEY (k, c))",
    );
    run(&e, "CREATE TABLE c.l (k int PRIMARY KEY, v int)");
    for k in 0..40 {
        for c in 0..10 {
            run(
                &e,
                &format!(
                    "INSERT INTO c.t (k, c, v, s) VALUES ({k}, {c}, {}, {k})",
                    k % 5
                ),
            );
        }
    }
    // The data went over the split threshold: the table now has several physical partitions.
    let sid = e.schema().keyspaces["c"].tables["t"].storage_id;
    let wait_ms = std::time::Instant::now();
    while e.maps.get(sid).unwrap().parts.len() < 3 {
        assert!(wait_ms.elapsed().as_secs() < 30, "the table never split");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // An explicit split through the maintenance path too (throughput-driven).
    run(
        &e,
        "ALTER TABLE c.t WITH cosmosdb_provisioned_throughput = 80000",
    );
    assert!(e.maps.get(sid).unwrap().parts.len() >= 8);

    // Point reads (the one-seek path and a reversed slice), partition rows, aggregates.
    assert_eq!(
        select(&e, "SELECT v FROM c.t WHERE k = 7 AND c = 3", 1),
        vec![vec![Some(2)]]
    );
    let rev = select(&e, "SELECT c FROM c.t WHERE k = 7 ORDER BY c DESC", 1);
    assert_eq!(
        rev,
        (0..10).rev().map(|c| vec![Some(c)]).collect::<Vec<_>>()
    );
    assert_eq!(
        select(&e, "SELECT count(*) FROM c.t WHERE k IN (1, 2, 3)", 1),
        vec![vec![Some(30)]]
    );
    // A full scan, paged across the physical partitions, in token order.
    let (all, pages) = paged(&e, "SELECT k, c FROM c.t", 2, 7);
    assert_eq!(all.len(), 400);
    assert!(pages > 50, "{pages} pages");
    let mut seen: Vec<_> = all.clone();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 400, "a page repeated or skipped rows");
    assert_eq!(
        select(&e, "SELECT count(*), sum(v) FROM c.t", 2),
        vec![vec![Some(400), Some(800)]]
    );

    // A secondary index over existing rows (built per partition), then maintained by writes,
    // queried across the partitions' local indexes, paged.
    run(&e, "CREATE INDEX ON c.t (v)");
    let (by_v, pages) = paged(&e, "SELECT k, c FROM c.t WHERE v = 3", 2, 9);
    assert_eq!(by_v.len(), 80);
    assert!(pages >= 9, "{pages} pages");
    assert!(by_v.iter().all(|r| r[0].unwrap() % 5 == 3));
    run(&e, "UPDATE c.t SET v = 3 WHERE k = 0 AND c = 0");
    run(&e, "DELETE FROM c.t WHERE k = 8 AND c = 9");
    assert_eq!(
        paged(&e, "SELECT k FROM c.t WHERE v = 3", 1, 50).0.len(),
        80
    );

    // LWT, read-merge-write, batches (one and several physical partitions).
    run(&e, "INSERT INTO c.l (k, v) VALUES (1, 1) IF NOT EXISTS");
    run(&e, "UPDATE c.l SET v = 2 WHERE k = 1 IF v = 1");
    assert_eq!(
        select(&e, "SELECT v FROM c.l WHERE k = 1", 1),
        vec![vec![Some(2)]]
    );
    run(
        &e,
        "BEGIN BATCH INSERT INTO c.l (k, v) VALUES (2, 2); INSERT INTO c.l (k, v) VALUES (3, 3); \
         INSERT INTO c.t (k, c, v) VALUES (100, 0, 3) APPLY BATCH",
    );
    assert_eq!(
        select(&e, "SELECT count(*) FROM c.l", 1),
        vec![vec![Some(3)]]
    );
    assert_eq!(
        paged(&e, "SELECT k FROM c.t WHERE v = 3", 1, 50).0.len(),
        81
    );

    // The tombstone sweeper and the size views read and commit through handles too.
    run(&e, "DELETE FROM c.t WHERE k = 9");
    ringgate::query::purge::sweep_table(&e, "c", "t").unwrap();
    run(&e, "SELECT * FROM system_views.logical_partitions");

    // TRUNCATE and DROP delete the data through the partition store.
    run(&e, "TRUNCATE c.l");
    assert_eq!(
        select(&e, "SELECT count(*) FROM c.l", 1),
        vec![vec![Some(0)]]
    );
    run(&e, "DROP TABLE c.t");
    // The background deletion finishes (its marker goes), with no global data access.
    let waited = std::time::Instant::now();
    while store
        .metadata()
        .meta_scan(Bound::Included(b"purge/"), Bound::Excluded(b"purge0"))
        .next()
        .is_some()
    {
        assert!(
            waited.elapsed().as_secs() < 30,
            "table data deletion never ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop(e);

    // A restart (replaying the batch log, rebuilding the sizes) over the same contract.
    let e = engine(&store, 16 << 10);
    assert_eq!(
        select(&e, "SELECT v FROM c.l WHERE k = 1", 1),
        Vec::<Vec<Option<i32>>>::new()
    );
}
