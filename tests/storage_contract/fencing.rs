//! Storage contract: owner epochs. A newer epoch opening a partition fences older handles
//! (their commits fail with `Fenced`, nothing written); epochs survive a restart; a retired
//! partition (a split parent) is fenced for good while its children get handles of their own.

use super::support::*;
use bytes::Bytes;
use ringgate::storage::{PartitionCommit, PartitionRef, StorageError};

fn put(k: &[u8], v: &str) -> PartitionCommit {
    let mut c = PartitionCommit::default();
    c.put(k.to_vec(), v.to_string());
    c
}

#[test]
fn a_newer_epoch_fences_older_handles() {
    each_backend("contract-fencing", a_newer_epoch_fences_older_handles_on);
}

fn a_newer_epoch_fences_older_handles_on(dir: &TempDir) {
    let store = open(dir);
    let part = parts()[1].clone();
    let k = key(3, b"k");
    let old = store.open_partition(part.clone(), 1).unwrap();
    old.commit(put(&k, "old")).unwrap();

    let new = store.open_partition(part.clone(), 2).unwrap();
    let err = old.commit(put(&k, "stale")).unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::Fenced {
                epoch: 1,
                current: 2,
                ..
            }
        ),
        "{err}"
    );
    assert!(!err.is_retryable());
    assert_eq!(new.get(&k).unwrap(), Some(Bytes::from_static(b"old")));
    new.commit(put(&k, "new")).unwrap();

    // An older epoch cannot open it any more; the current one can reopen it.
    assert!(matches!(
        store.open_partition(part.clone(), 1),
        Err(StorageError::Fenced { current: 2, .. })
    ));
    store.open_partition(part.clone(), 2).unwrap();
    // Other partitions are not affected.
    let left = store.open_partition(parts()[0].clone(), 1).unwrap();
    left.commit(put(&key(-1000, b"k"), "left")).unwrap();
}

#[test]
fn epochs_survive_a_restart() {
    each_backend("contract-fencing-restart", epochs_survive_a_restart_on);
}

fn epochs_survive_a_restart_on(dir: &TempDir) {
    let part = parts()[2].clone();
    {
        let store = open(dir);
        store.open_partition(part.clone(), 5).unwrap();
    }
    let store = open(dir);
    assert_eq!(store.current_epoch(SID, part.partition_id).unwrap(), 5);
    assert!(matches!(
        store.open_partition(part.clone(), 4),
        Err(StorageError::Fenced { current: 5, .. })
    ));
    let h = store.open_partition(part, 6).unwrap();
    h.commit(put(&key(1000, b"k"), "v")).unwrap();
}

/// A split: the parent is retired (its handles fenced, it cannot be reopened, across a
/// restart too), each child is opened with its own handle over its half of the range.
#[test]
fn a_split_retires_the_parent_and_children_get_handles() {
    each_backend(
        "contract-fencing-split",
        a_split_retires_the_parent_and_children_get_handles_on,
    );
}

fn a_split_retires_the_parent_and_children_get_handles_on(dir: &TempDir) {
    let parent = parts()[1].clone();
    let (lk, rk) = (key(-50, b"k"), key(50, b"k"));
    {
        let store = open(dir);
        let h = store.open_partition(parent.clone(), 3).unwrap();
        h.commit(put(&lk, "l")).unwrap();
        h.commit(put(&rk, "r")).unwrap();

        let left = PartitionRef::new(SID, 10, -100, 0);
        let right = PartitionRef::new(SID, 11, 0, 100);
        store.retire_partition(SID, parent.partition_id).unwrap();
        assert!(matches!(
            h.commit(put(&lk, "late")),
            Err(StorageError::Fenced { .. })
        ));
        let l = store.open_partition(left, 3).unwrap();
        let r = store.open_partition(right, 3).unwrap();
        assert_eq!(l.get(&lk).unwrap(), Some(Bytes::from_static(b"l")));
        assert!(matches!(
            l.commit(put(&rk, "x")),
            Err(StorageError::OutOfRange { .. })
        ));
        r.commit(put(&rk, "r2")).unwrap();
    }
    let store = open(dir);
    assert!(matches!(
        store.open_partition(parent, u64::MAX - 1),
        Err(StorageError::Fenced { .. })
    ));
}
