//! The metadata store on etcd (`cluster::EtcdMetaStore`, `storage::MetaStore`): reads, ordered
//! scans with bounds, atomic commits, the compare-and-swap two nodes use to create the same
//! table (one wins, the other sees the table), and the size limit.

use super::support::Etcd;
use bytes::Bytes;
use ringgate::cluster::meta::MAX_META_COMMIT_BYTES;
use ringgate::cluster::EtcdMetaStore;
use ringgate::storage::{MetaStore, StorageError};
use std::ops::Bound;
use std::sync::{Arc, Barrier};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn put(k: &str, v: &str) -> (Bytes, Option<Bytes>) {
    (b(k), Some(b(v)))
}

fn keys(store: &EtcdMetaStore, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Vec<String> {
    (store.meta_scan(lo, hi))
        .map(|e| String::from_utf8(e.unwrap().0.to_vec()).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_store_reads_scans_and_commits() {
    let Some(etcd) = Etcd::start("meta_store_reads_scans_and_commits").await else {
        return;
    };
    let ctl = etcd.control("rg/c1");
    // Neighbours outside the store's prefix `rg/c1/meta/` (the first is its range end).
    ctl.client.put(b"rg/c1/meta0", b"x", 0).await.unwrap();
    ctl.client
        .put(b"rg/c2/meta/pmap/001", b"x", 0)
        .await
        .unwrap();
    tokio::task::spawn_blocking(move || {
        let store = EtcdMetaStore::new(&ctl).unwrap();
        // 40 keys: more than one scan page.
        let writes: Vec<_> = (0..40)
            .map(|i| put(&format!("pmap/{i:03}"), &format!("v{i}")))
            .collect();
        store.meta_commit(writes).unwrap();
        store
            .meta_commit(vec![put("schema", "{}"), put("host_id", "h")])
            .unwrap();
        assert_eq!(store.meta_get(b"pmap/007").unwrap(), Some(b("v7")));
        assert_eq!(store.meta_get(b"nope").unwrap(), None);
        let all = keys(&store, Bound::Unbounded, Bound::Unbounded);
        assert_eq!(all.len(), 42);
        assert!(all.windows(2).all(|w| w[0] < w[1]), "scan is ordered");
        let some = keys(
            &store,
            Bound::Excluded(b"pmap/010"),
            Bound::Included(b"pmap/013"),
        );
        assert_eq!(some, ["pmap/011", "pmap/012", "pmap/013"]);
        let some = keys(
            &store,
            Bound::Included(b"pmap/038"),
            Bound::Excluded(b"pmap/040"),
        );
        assert_eq!(some, ["pmap/038", "pmap/039"]);
        store
            .meta_commit(vec![(b("pmap/000"), None), put("pmap/001", "x")])
            .unwrap();
        assert_eq!(store.meta_get(b"pmap/000").unwrap(), None);
        assert_eq!(store.meta_get(b"pmap/001").unwrap(), Some(b("x")));
        assert_eq!(keys(&store, Bound::Unbounded, Bound::Unbounded).len(), 41);
        // The revision alone (what the schema follower polls) moves with every write.
        let (_, rev) = store.meta_get_versioned(b"pmap/001").unwrap().unwrap();
        assert_eq!(store.meta_revision(b"pmap/001").unwrap(), rev);
        assert_eq!(store.meta_revision(b"pmap/000").unwrap(), 0);
        store.meta_commit(vec![put("pmap/001", "y")]).unwrap();
        assert!(store.meta_revision(b"pmap/001").unwrap() > rev);
    })
    .await
    .unwrap();
}

/// Creates table `name` in the schema document (a list of names) unless it exists: read
/// versioned, append, commit if unchanged; a conflict reads again. Returns whether this call
/// created it.
fn create_table(store: &EtcdMetaStore, name: &str) -> bool {
    for _ in 0..100 {
        let (doc, rev) = store
            .meta_get_versioned(b"schema")
            .unwrap()
            .unwrap_or_default();
        let mut tables: Vec<String> = if doc.is_empty() {
            Vec::new()
        } else {
            serde_json::from_slice(&doc).unwrap()
        };
        if tables.iter().any(|t| t == name) {
            return false; // AlreadyExists
        }
        tables.push(name.to_string());
        let doc = Bytes::from(serde_json::to_vec(&tables).unwrap());
        match store.meta_commit_if(b"schema", rev, vec![(b("schema"), Some(doc))]) {
            Ok(()) => return true,
            Err(StorageError::Conflict { .. }) => continue,
            Err(e) => panic!("{e}"),
        }
    }
    panic!("no progress in 100 attempts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creators_one_wins() {
    let Some(etcd) = Etcd::start("concurrent_creators_one_wins").await else {
        return;
    };
    // Two nodes: each its own client and store.
    let stores = [etcd.control("rg/c1"), etcd.control("rg/c1")]
        .map(|c| Arc::new(EtcdMetaStore::new(&c).unwrap()));
    const ROUNDS: usize = 50;
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = (stores.iter().cloned())
        .map(|store| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                (0..ROUNDS)
                    .map(|i| {
                        barrier.wait();
                        create_table(&store, &format!("t{i}"))
                    })
                    .collect::<Vec<bool>>()
            })
        })
        .collect();
    let results: Vec<Vec<bool>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    for (i, (a, b)) in results[0].iter().zip(&results[1]).enumerate() {
        assert!(a ^ b, "round {i}: created {} times", *a as u8 + *b as u8);
    }
    let doc = stores[0].meta_get(b"schema").unwrap().unwrap();
    let tables: Vec<String> = serde_json::from_slice(&doc).unwrap();
    assert_eq!(tables.len(), ROUNDS, "one entry per table: {tables:?}");
    let stale = stores[0].meta_commit_if(b"schema", 1, vec![put("schema", "[]")]);
    assert!(
        matches!(stale, Err(StorageError::Conflict { .. })),
        "{stale:?}"
    );
    let wins0 = results[0].iter().filter(|w| **w).count();
    eprintln!("concurrent_creators_one_wins: node 0 created {wins0} of {ROUNDS}");
    tokio::task::spawn_blocking(move || drop(stores))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_commit_is_refused_whole() {
    let Some(etcd) = Etcd::start("oversized_commit_is_refused_whole").await else {
        return;
    };
    let ctl = etcd.control("rg/c1");
    tokio::task::spawn_blocking(move || {
        let store = EtcdMetaStore::new(&ctl).unwrap();
        let big = Bytes::from(vec![b'x'; MAX_META_COMMIT_BYTES]);
        let e = store
            .meta_commit(vec![put("a", "1"), (b("schema"), Some(big))])
            .unwrap_err();
        assert!(!e.is_retryable());
        assert!(e.to_string().contains("exceeds"), "{e}");
        assert_eq!(
            store.meta_get(b"a").unwrap(),
            None,
            "nothing of it is written"
        );
        // Just under the limit goes through (etcd's own limit is 1.5 MiB).
        let fits = Bytes::from(vec![b'y'; MAX_META_COMMIT_BYTES - 6]);
        store
            .meta_commit(vec![(b("schema"), Some(fits.clone()))])
            .unwrap();
        assert_eq!(store.meta_get(b"schema").unwrap(), Some(fits));
    })
    .await
    .unwrap();
}
