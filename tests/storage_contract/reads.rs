//! Storage contract: a partition handle's get, ordered scans both ways (clamped to its range),
//! and a snapshot shared by several reads.

use super::support::*;
use bytes::Bytes;
use ringgate::storage::{PartitionCommit, Space, WriteBatch};
use std::ops::Bound;

fn keys(it: ringgate::storage::ScanIter) -> Vec<Vec<u8>> {
    it.map(|r| r.unwrap().0.to_vec()).collect()
}

#[test]
fn get_and_scans_both_ways_stay_in_the_partition() {
    each_backend(
        "contract-reads",
        get_and_scans_both_ways_stay_in_the_partition_on,
    );
}

fn get_and_scans_both_ways_stay_in_the_partition_on(dir: &TempDir) {
    let store = open(dir);
    // Rows in all three partitions, written through the plain store (as existing data is).
    let mut b = WriteBatch::default();
    for t in [-500i64, -100, -99, 0, 100, 101, 500] {
        b.put(Space::Data, key(t, b"r"), t.to_string());
    }
    // Another table's keys on either side.
    b.put(Space::Data, key_of(SID - 1, 0, b"r"), "other");
    b.put(Space::Data, key_of(SID + 1, 0, b"r"), "other");
    store.commit(b).unwrap();

    let [left, mid, right] = parts();
    let mid = store.open_partition(mid, 1).unwrap();
    assert_eq!(
        mid.get(&key(0, b"r")).unwrap(),
        Some(Bytes::from_static(b"0"))
    );
    assert_eq!(mid.get(&key(1, b"r")).unwrap(), None);
    let all = keys(mid.scan(Bound::Unbounded, Bound::Unbounded, false));
    assert_eq!(all, vec![key(-99, b"r"), key(0, b"r"), key(100, b"r")]);
    let rev = keys(mid.scan(Bound::Unbounded, Bound::Unbounded, true));
    assert_eq!(rev, vec![key(100, b"r"), key(0, b"r"), key(-99, b"r")]);
    let from_zero = keys(mid.scan(
        Bound::Excluded(&key(-99, b"r")),
        Bound::Included(&key(500, b"r")),
        true,
    ));
    assert_eq!(from_zero, vec![key(100, b"r"), key(0, b"r")]);

    let left = store.open_partition(left, 1).unwrap();
    assert_eq!(
        keys(left.scan(Bound::Unbounded, Bound::Unbounded, false)),
        vec![key(-500, b"r"), key(-100, b"r")]
    );
    let right = store.open_partition(right, 1).unwrap();
    assert_eq!(
        keys(right.scan(Bound::Unbounded, Bound::Unbounded, true)),
        vec![key(500, b"r"), key(101, b"r")]
    );
}

#[test]
fn a_snapshot_serves_several_reads_at_one_point_in_time() {
    each_backend(
        "contract-snapshot",
        a_snapshot_serves_several_reads_at_one_point_in_time_on,
    );
}

fn a_snapshot_serves_several_reads_at_one_point_in_time_on(dir: &TempDir) {
    let store = open(dir);
    let h = store.open_partition(parts()[1].clone(), 1).unwrap();
    let mut c = PartitionCommit::default();
    c.put(key(1, b"a"), "1").put(key(2, b"b"), "2");
    h.commit(c).unwrap();

    let snap = h.snapshot();
    let mut c = PartitionCommit::default();
    c.put(key(1, b"a"), "changed")
        .delete(key(2, b"b"))
        .put(key(3, b"c"), "3");
    h.commit(c).unwrap();

    // The snapshot still shows the first commit, to every read made through it.
    assert_eq!(
        snap.get(&key(1, b"a")).unwrap(),
        Some(Bytes::from_static(b"1"))
    );
    assert_eq!(
        snap.get(&key(2, b"b")).unwrap(),
        Some(Bytes::from_static(b"2"))
    );
    let seen = keys(snap.scan(Bound::Unbounded, Bound::Unbounded, false));
    assert_eq!(seen, vec![key(1, b"a"), key(2, b"b")]);
    let seen = keys(snap.scan(Bound::Unbounded, Bound::Unbounded, true));
    assert_eq!(seen, vec![key(2, b"b"), key(1, b"a")]);
    // The handle reads the present.
    let now = keys(h.scan(Bound::Unbounded, Bound::Unbounded, false));
    assert_eq!(now, vec![key(1, b"a"), key(3, b"c")]);
}

#[test]
fn keys_read_together_come_back_in_their_order() {
    each_backend(
        "contract-together",
        keys_read_together_come_back_in_their_order_on,
    );
}

/// `get_together`: where a backend has it (PostgreSQL), every key's value in the keys' order
/// (absent keys None, a key asked twice answered twice), and a key outside the partition is
/// refused; where it has not (the embedded store), None, and the reads stamp instead.
fn keys_read_together_come_back_in_their_order_on(dir: &TempDir) {
    let store = open(dir);
    let h = store.open_partition(parts()[1].clone(), 1).unwrap();
    let mut c = PartitionCommit::default();
    c.put(key(1, b"a"), "1").put(key(2, b"b"), "2");
    h.commit(c).unwrap();
    let asked = [key(2, b"b"), key(1, b"x"), key(1, b"a"), key(2, b"b")];
    let Some(got) = h.get_together(&asked) else {
        assert!(
            matches!(dir, TempDir::Embedded(_)),
            "PostgreSQL reads keys together"
        );
        return;
    };
    let want: Vec<Option<Bytes>> = [Some("2"), None, Some("1"), Some("2")]
        .iter()
        .map(|v| v.map(Bytes::from))
        .collect();
    assert_eq!(got.unwrap(), want);
    assert_eq!(h.get_together(&[]).unwrap().unwrap(), vec![]);
    let outside = [key(1, b"a"), key(500, b"r")];
    let err = h.get_together(&outside).unwrap().unwrap_err();
    assert!(
        err.to_string().contains("is outside physical partition"),
        "{err}"
    );
}

#[test]
fn a_key_and_a_scan_are_read_together() {
    each_backend("contract-get-scan", a_key_and_a_scan_are_read_together_on);
}

/// `get_and_scans`: where a backend has it (PostgreSQL), the key's value (None if absent or
/// not asked for) and the keys of each scan in its order, both ways, for one slice and for three (the last
/// empty), read by one access: all of them when they are fewer than `first_entries`, else at
/// least that many followed by `ReadAgain` (as for a slice of more bytes than the access
/// reads); a key outside the partition is refused. Where it has not (the embedded store),
/// None.
fn a_key_and_a_scan_are_read_together_on(dir: &TempDir) {
    let store = open(dir);
    let h = store.open_partition(parts()[1].clone(), 1).unwrap();
    let mut c = PartitionCommit::default();
    c.put(key(0, b"h"), "header");
    for i in 0..150u8 {
        c.put(key(1, &[b'r', i]), i.to_string());
    }
    for i in 0..12u8 {
        c.put(key(2, &[b'b', i]), vec![i; 200 << 10]);
    }
    h.commit(c).unwrap();
    let (lo, hi) = (key(1, b"r"), key(1, b"s"));
    let rows = (Bound::Included(&lo[..]), Bound::Excluded(&hi[..]));
    let all: Vec<_> = (0..150u8).map(|i| key(1, &[b'r', i])).collect();
    let (a, b) = (key(1, &[b'r', 10]), key(1, &[b'r', 20]));
    let (none_lo, none_hi) = (key(3, b"r"), key(4, b"r"));
    let three = [
        (Bound::Included(&a[..]), Bound::Excluded(&b[..])),
        rows,
        (Bound::Included(&none_lo[..]), Bound::Included(&none_hi[..])),
    ];
    let want_three = [all[10..20].to_vec(), all.clone(), Vec::new()];
    let (header, absent) = (key(0, b"h"), key(0, b"absent"));
    for (reverse, asked, value) in [
        (false, Some(&header[..]), Some(Bytes::from("header"))),
        (true, Some(&header[..]), Some(Bytes::from("header"))),
        (false, Some(&absent[..]), None),
        (false, None, None),
        (true, None, None),
    ] {
        for first in [200, 10] {
            for (slices, want) in [
                (&[rows][..], &want_three[1..2]),
                (&three[..], &want_three[..]),
            ] {
                let Some(read) = h.get_and_scans(asked, slices, reverse, first) else {
                    assert!(
                        matches!(dir, TempDir::Embedded(_)),
                        "PostgreSQL reads both at once"
                    );
                    return;
                };
                let (got, scans) = read.unwrap();
                assert_eq!(got, value);
                assert_eq!(scans.len(), want.len());
                for (scan, want) in scans.into_iter().zip(want) {
                    let mut want = want.clone();
                    if reverse {
                        want.reverse();
                    }
                    let (read, again) = read_once(scan);
                    match want.len() > first {
                        true => assert!(again && read.len() >= first && want.starts_with(&read)),
                        false => assert_eq!((read, again), (want, false), "reverse: {reverse}"),
                    }
                }
            }
        }
    }
    // More bytes than one access reads: a first part, then `ReadAgain`, with a key and
    // without.
    let (lo, hi) = (key(2, b"b"), key(2, b"c"));
    let big = [(Bound::Included(&lo[..]), Bound::Excluded(&hi[..]))];
    for asked in [None, Some(&header[..])] {
        let (_, scans) = h.get_and_scans(asked, &big, false, 1000).unwrap().unwrap();
        let (read, again) = read_once(scans.into_iter().next().unwrap());
        let all: Vec<_> = (0..12u8).map(|i| key(2, &[b'b', i])).collect();
        assert!(
            again && !read.is_empty() && all.starts_with(&read),
            "{}",
            read.len()
        );
    }
    let outside = h.get_and_scans(Some(&key(500, b"r")), &[rows], false, 100);
    let err = outside.unwrap().err().expect("refused");
    assert!(
        err.to_string().contains("is outside physical partition"),
        "{err}"
    );
}

/// The keys a scan yields before it ends, and whether it ended with `ReadAgain`.
fn read_once(scan: ringgate::storage::ScanIter) -> (Vec<Vec<u8>>, bool) {
    let mut read = Vec::new();
    for item in scan {
        match item {
            Ok((k, _)) => read.push(k.to_vec()),
            Err(ringgate::storage::StorageError::ReadAgain) => return (read, true),
            Err(e) => panic!("{e}"),
        }
    }
    (read, false)
}
