//! Storage contract: a handle only touches its partition's key range. Commits and conditions
//! naming a key outside it fail with `OutOfRange` and write nothing; token edges map to the
//! right keys.

use super::support::*;
use ringgate::storage::{Condition, KeyRange, PartitionCommit, StorageError};

#[test]
fn commits_outside_the_range_are_refused_whole() {
    each_backend(
        "contract-ranges",
        commits_outside_the_range_are_refused_whole_on,
    );
}

fn commits_outside_the_range_are_refused_whole_on(dir: &TempDir) {
    let store = open(dir);
    let [left, mid, _] = parts();
    let h = store.open_partition(mid, 1).unwrap();
    let inside = key(100, b"in");
    let outside = key(101, b"out");
    let mut c = PartitionCommit::default();
    c.put(inside.clone(), "v").put(outside.clone(), "v");
    let err = h.commit(c).unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::OutOfRange {
                partition_id: 2,
                ..
            }
        ),
        "{err}"
    );
    assert!(!err.is_retryable());
    assert_eq!(h.get(&inside).unwrap(), None);

    let mut c = PartitionCommit::default();
    c.require(Condition::Absent(key(-100, b"c").into()))
        .put(inside.clone(), "v");
    assert!(matches!(h.commit(c), Err(StorageError::OutOfRange { .. })));
    assert_eq!(h.get(&inside).unwrap(), None);
    assert!(matches!(
        h.get(&outside),
        Err(StorageError::OutOfRange { .. })
    ));
    // Another table's key at the same token is outside too.
    let mut c = PartitionCommit::default();
    c.put(key_of(SID + 1, 0, b"x"), "v");
    assert!(matches!(h.commit(c), Err(StorageError::OutOfRange { .. })));

    let l = store.open_partition(left, 1).unwrap();
    let mut c = PartitionCommit::default();
    c.put(key(-100, b"edge"), "v");
    l.commit(c).unwrap();
}

#[test]
fn token_ranges_map_to_key_ranges() {
    // (start, end]: start excluded, end included, whatever the key's tail.
    let r = KeyRange::of_tokens(SID, -100, 100);
    assert!(!r.contains(&key(-100, b"\xff\xff")));
    assert!(r.contains(&key(-99, b"")));
    assert!(r.contains(&key(100, b"\xff\xff\xff")));
    assert!(!r.contains(&key(101, b"")));
    // The whole ring of one table, and nothing of its neighbours.
    let ring = KeyRange::of_tokens(SID, i64::MIN, i64::MAX);
    assert!(ring.contains(&key(i64::MIN, b"")));
    assert!(ring.contains(&key(i64::MIN + 1, b"")));
    assert!(!KeyRange::of_tokens(SID, i64::MIN + 1, 5).contains(&key(i64::MIN + 1, b"")));
    assert!(ring.contains(&key(i64::MAX, b"\xff")));
    assert!(!ring.contains(&key_of(SID + 1, i64::MIN + 1, b"")));
    assert!(!ring.contains(&key_of(SID - 1, i64::MAX, b"")));
}
