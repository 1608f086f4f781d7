//! Storage contract: a reader that sees a commit's row write sees the commit's local records
//! too (read the row first, then the local record). The change feed relies on it: it emits an
//! entry only if the row's reverse record (a local record) still names the entry after the row
//! was read, and a reverse record older than the row read would emit one version twice.

use super::support::*;
use bytes::Bytes;
use ringgate::storage::handle::{LocalWrite, PartitionHandle};
use ringgate::storage::{PartitionCommit, Space};
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn a_row_write_is_never_seen_before_its_local_records() {
    each_backend(
        "contract-visibility",
        a_row_write_is_never_seen_before_its_local_records_on,
    );
}

fn version(v: Option<Bytes>) -> u64 {
    v.map_or(0, |b| u64::from_be_bytes(b[..].try_into().unwrap()))
}

/// Commits `commit(v)` through `h` for versions 1 to `commits` on another thread, while
/// `check(round)` runs here, round after round, until the last commit has returned.
fn while_committing(
    h: &dyn PartitionHandle,
    commits: u64,
    commit: impl Fn(u64) -> PartitionCommit + Send + Sync,
    mut check: impl FnMut(u64),
) {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for v in 1..=commits {
                h.commit(commit(v)).unwrap();
            }
            done.store(true, Ordering::SeqCst);
        });
        let mut round = 0u64;
        while !done.load(Ordering::SeqCst) {
            check(round);
            round += 1;
        }
    });
}

fn a_row_write_is_never_seen_before_its_local_records_on(dir: &TempDir) {
    // Enough commits for the embedded store to show a row-first order (it did in every run
    // of 2,000, after a few hundred at most), few enough for PostgreSQL's round trips.
    const COMMITS: u64 = 2_000;
    let store = open(dir);
    let h = store.open_partition(parts()[1].clone(), 1).unwrap();
    let row = Bytes::from(key(5, b"row"));
    let local = Bytes::from_static(b"\xff\x02local");
    let commit = |v: u64| {
        let value = Bytes::copy_from_slice(&v.to_be_bytes());
        let mut c = PartitionCommit::default();
        c.put(row.clone(), value.clone());
        c.local.push(LocalWrite {
            token: 5,
            key: local.clone(),
            value: Some(value),
        });
        c
    };
    while_committing(&*h, COMMITS, commit, |reads| {
        let seen_row = version(h.get(&row).unwrap());
        let seen_local = version(store.get(Space::Data, &local).unwrap());
        assert!(
            seen_local >= seen_row,
            "after {reads} reads: row at version {seen_row}, its local record at {seen_local}"
        );
    });
    assert_eq!(version(h.get(&row).unwrap()), COMMITS);
}

/// Writers of a few keys commit version after version on condition that the key is unchanged
/// since they read it (as the engine writes rows); readers check that a read never returns a
/// version older than one acknowledged before it began, nor older than one any read returned
/// before it began (the embedded store's row cache must keep both).
#[test]
fn reads_are_never_older_than_acknowledged_writes_or_earlier_reads() {
    each_backend(
        "contract-monotonic",
        reads_are_never_older_than_acknowledged_writes_or_earlier_reads_on,
    );
}

fn reads_are_never_older_than_acknowledged_writes_or_earlier_reads_on(dir: &TempDir) {
    use ringgate::storage::{Condition, StorageError};
    use std::sync::atomic::AtomicU64;
    const KEYS: usize = 4;
    const COMMITS_PER_WRITER: usize = 1_000;
    let store = open(dir);
    let h = store.open_partition(parts()[1].clone(), 1).unwrap();
    let keys: Vec<Bytes> = (0..KEYS).map(|i| Bytes::from(key(5, &[i as u8]))).collect();
    let acked: Vec<AtomicU64> = (0..KEYS).map(|_| AtomicU64::new(0)).collect();
    let seen: Vec<AtomicU64> = (0..KEYS).map(|_| AtomicU64::new(0)).collect();
    let writers_done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..2 {
            let (h, keys, acked, done) = (&h, &keys, &acked, &writers_done);
            s.spawn(move || {
                for n in 0..COMMITS_PER_WRITER {
                    let i = (n * 3 + w) % KEYS;
                    loop {
                        let (read, stamp) = h.get_stamped(&keys[i]).unwrap();
                        let next = version(read.clone()) + 1;
                        let mut c = PartitionCommit::default();
                        c.require(Condition::Unchanged {
                            key: keys[i].clone(),
                            read,
                            stamp,
                        })
                        .put(keys[i].clone(), Bytes::copy_from_slice(&next.to_be_bytes()));
                        match h.commit(c) {
                            Ok(()) => {
                                acked[i].fetch_max(next, Ordering::SeqCst);
                                break;
                            }
                            Err(StorageError::Conflict { .. }) => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        for _ in 0..2 {
            let (h, keys, acked, seen, done) = (&h, &keys, &acked, &seen, &writers_done);
            s.spawn(move || {
                while done.load(Ordering::SeqCst) < 2 {
                    for i in 0..KEYS {
                        let floor = acked[i].load(Ordering::SeqCst);
                        let earlier = seen[i].load(Ordering::SeqCst);
                        let got = version(h.get(&keys[i]).unwrap());
                        assert!(
                            got >= floor,
                            "key {i}: read {got} after {floor} was acknowledged"
                        );
                        assert!(
                            got >= earlier,
                            "key {i}: read {got} after a read of {earlier}"
                        );
                        seen[i].fetch_max(got, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    let total: u64 = keys.iter().map(|k| version(h.get(k).unwrap())).sum();
    assert_eq!(total, 2 * COMMITS_PER_WRITER as u64);
}

/// A key read (and so cached) through a handle, then deleted by a plain storage batch (as
/// DROP TABLE's range deletion and the batch log's replay write): the next read finds it gone.
#[test]
fn a_write_outside_the_handles_is_seen_by_the_next_read() {
    each_backend(
        "contract-plain-write",
        a_write_outside_the_handles_is_seen_by_the_next_read_on,
    );
}

fn a_write_outside_the_handles_is_seen_by_the_next_read_on(dir: &TempDir) {
    use ringgate::storage::WriteBatch;
    let store = open(dir);
    let h = store.open_partition(parts()[1].clone(), 1).unwrap();
    let k = Bytes::from(key(5, b"row"));
    let mut c = PartitionCommit::default();
    c.put(k.clone(), "v1");
    h.commit(c).unwrap();
    assert_eq!(h.get(&k).unwrap().as_deref(), Some(&b"v1"[..]));
    let mut batch = WriteBatch::default();
    batch.put(Space::Data, k.clone(), "v2");
    store.commit(batch).unwrap();
    assert_eq!(h.get(&k).unwrap().as_deref(), Some(&b"v2"[..]));
    ringgate::storage::delete_range(&*store, Space::Data, &key(0, b""), &key(10, b"")).unwrap();
    assert_eq!(h.get(&k).unwrap(), None);
}

/// A commit of several keys of one partition (as a single-partition batch writes its rows) is
/// seen whole or not at all by a scan of the partition (Cassandra: batches are isolated within
/// a partition).
#[test]
fn a_scan_sees_a_commit_whole_or_not_at_all() {
    each_backend(
        "contract-scan-isolation",
        a_scan_sees_a_commit_whole_or_not_at_all_on,
    );
}

fn a_scan_sees_a_commit_whole_or_not_at_all_on(dir: &TempDir) {
    const KEYS: u8 = 8;
    const COMMITS: u64 = 1_000;
    let store = open(dir);
    let h = store.open_partition(parts()[1].clone(), 1).unwrap();
    let commit = |v: u64| {
        let mut c = PartitionCommit::default();
        for i in 0..KEYS {
            c.put(key(5, &[i]), Bytes::copy_from_slice(&v.to_be_bytes()));
        }
        c
    };
    let (lo, hi) = (key(5, b""), key(6, b""));
    while_committing(&*h, COMMITS, commit, |scans| {
        let range = (
            std::ops::Bound::Included(&lo[..]),
            std::ops::Bound::Excluded(&hi[..]),
        );
        let versions: Vec<u64> = (h.scan(range.0, range.1, scans % 2 == 1))
            .map(|r| version(Some(r.unwrap().1)))
            .collect();
        assert!(
            versions.is_empty() || versions.iter().all(|&v| v == versions[0]),
            "scan {scans}: one commit seen in part: {versions:?}"
        );
    });
}
