//! Storage contract: commits with conditions (key absent, key unchanged since read) apply all
//! or nothing; two writers racing on one key: exactly one wins, the other gets `Conflict`.

use super::support::*;
use bytes::Bytes;
use ringgate::storage::{Condition, PartitionCommit, StorageError};
use std::sync::{Arc, Barrier};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[test]
fn absent_and_unchanged_conditions() {
    each_backend("contract-conditions", absent_and_unchanged_conditions_on);
}

fn absent_and_unchanged_conditions_on(dir: &TempDir) {
    let store = open(dir);
    let h = store.open_partition(parts()[1].clone(), 1).unwrap();
    let k = Bytes::from(key(5, b"k"));
    let other = Bytes::from(key(6, b"o"));

    let mut c = PartitionCommit::default();
    c.require(Condition::Absent(k.clone())).put(k.clone(), "v1");
    h.commit(c).unwrap();

    // Absent no longer holds: Conflict, and the other write of that commit is not applied.
    let mut c = PartitionCommit::default();
    c.require(Condition::Absent(k.clone()))
        .put(k.clone(), "v2")
        .put(other.clone(), "x");
    let err = h.commit(c).unwrap_err();
    assert!(matches!(err, StorageError::Conflict { .. }), "{err}");
    assert!(err.is_retryable());
    assert_eq!(h.get(&k).unwrap(), Some(b("v1")));
    assert_eq!(h.get(&other).unwrap(), None);

    // Unchanged with what was read: holds (with the backend's stamp of the read, if any).
    let (read, stamp) = h.get_stamped(&k).unwrap();
    assert_eq!(read, Some(b("v1")));
    let mut c = PartitionCommit::default();
    c.require(Condition::Unchanged {
        key: k.clone(),
        read: read.clone(),
        stamp,
    })
    .put(k.clone(), "v2");
    h.commit(c).unwrap();

    // The same (stale) read and stamp again: Conflict, nothing written.
    let mut c = PartitionCommit::default();
    c.require(Condition::Unchanged {
        key: k.clone(),
        read,
        stamp,
    })
    .put(k.clone(), "v3");
    assert!(matches!(h.commit(c), Err(StorageError::Conflict { .. })));
    assert_eq!(h.get(&k).unwrap(), Some(b("v2")));

    // Unchanged-absent on a key that is absent holds; on a deleted key too.
    let mut c = PartitionCommit::default();
    c.require(Condition::Unchanged {
        key: other.clone(),
        read: None,
        stamp: None,
    })
    .delete(k.clone());
    h.commit(c).unwrap();
    assert_eq!(h.get(&k).unwrap(), None);
}

/// Both writers read the key, then commit "read value + their name" on condition that it is
/// unchanged; a barrier lines them up. Every round exactly one wins.
#[test]
fn two_writers_race_on_one_key_exactly_one_wins() {
    each_backend(
        "contract-race",
        two_writers_race_on_one_key_exactly_one_wins_on,
    );
}

fn two_writers_race_on_one_key_exactly_one_wins_on(dir: &TempDir) {
    const ROUNDS: usize = 200;
    let store = open(dir);
    let part = parts()[1].clone();
    let handles = [
        store.open_partition(part.clone(), 1).unwrap(),
        store.open_partition(part, 1).unwrap(),
    ];
    let k = Bytes::from(key(7, b"counter"));
    for round in 0..ROUNDS {
        let barrier = Arc::new(Barrier::new(2));
        let results: Vec<_> = std::thread::scope(|s| {
            let joins: Vec<_> = handles
                .iter()
                .enumerate()
                .map(|(who, h)| {
                    let (k, barrier) = (k.clone(), Arc::clone(&barrier));
                    s.spawn(move || {
                        // Stamped reads: a stamp must not let both commits pass.
                        let (read, stamp) = h.get_stamped(&k).unwrap();
                        barrier.wait();
                        let mut c = PartitionCommit::default();
                        c.require(Condition::Unchanged {
                            key: k.clone(),
                            read,
                            stamp,
                        })
                        .put(k, format!("round {round} by {who}"));
                        h.commit(c)
                    })
                })
                .collect();
            joins.into_iter().map(|j| j.join().unwrap()).collect()
        });
        let won: Vec<usize> = (0..2).filter(|&i| results[i].is_ok()).collect();
        assert_eq!(won.len(), 1, "round {round}: {results:?}");
        let lost = 1 - won[0];
        assert!(
            matches!(results[lost], Err(StorageError::Conflict { .. })),
            "round {round}: {results:?}"
        );
        let now = handles[0].get(&k).unwrap();
        assert_eq!(now, Some(b(&format!("round {round} by {}", won[0]))));
    }
}
