//! What a conditional commit through a handle costs against a plain store batch (run by hand:
//! `cargo test --release --test storage_contract cost -- --ignored --nocapture`). No assertion
//! on time: it prints the figures for docs/ARCHITECTURE.md.

use super::support::*;
use bytes::Bytes;
use ringgate::storage::{Condition, PartitionCommit, Space, WriteBatch};
use std::ops::Bound::{Excluded, Included};
use std::time::Instant;

const COMMITS: usize = 20_000;

fn per_commit_ns(start: Instant) -> u128 {
    start.elapsed().as_nanos() / COMMITS as u128
}

#[test]
#[ignore]
fn cost_of_a_conditional_commit() {
    each_backend("contract-cost", cost_of_a_conditional_commit_on);
}

fn cost_of_a_conditional_commit_on(dir: &TempDir) {
    let store = open(dir);
    let h = store.open_partition(parts()[1].clone(), 1).unwrap();
    let k = |i: usize| Bytes::from(key((i % 200) as i64 - 99, &i.to_be_bytes()));

    let start = Instant::now();
    for i in 0..COMMITS {
        let mut b = WriteBatch::default();
        b.put(Space::Data, k(i), vec![1u8; 100]);
        store.commit(b).unwrap();
    }
    let plain = per_commit_ns(start);

    let start = Instant::now();
    for i in 0..COMMITS {
        let mut c = PartitionCommit::default();
        c.put(k(i), vec![2u8; 100]);
        h.commit(c).unwrap();
    }
    let handle = per_commit_ns(start);

    let start = Instant::now();
    for i in 0..COMMITS {
        let read = h.get(&k(i)).unwrap();
        let mut c = PartitionCommit::default();
        c.require(Condition::Unchanged {
            key: k(i),
            read,
            stamp: None,
        })
        .put(k(i), vec![3u8; 100]);
        h.commit(c).unwrap();
    }
    let conditional = per_commit_ns(start);
    println!(
        "per commit: store batch {plain} ns, handle {handle} ns, read + conditional handle \
         commit {conditional} ns"
    );
}

/// What a read through a handle costs against the same read through `Store` (the engine reads
/// only through handles now): point gets and 5-key scans, interleaved in rounds so that load
/// on the machine falls on both alike.
#[test]
#[ignore]
fn cost_of_reads_through_a_handle() {
    const READS: usize = 50_000;
    const ROUNDS: usize = 4;
    let dir = TempDir::embedded("contract-read-cost");
    let store = open(&dir);
    let h = store.open_partition(parts()[1].clone(), 1).unwrap();
    let k = |i: usize| Bytes::from(key((i % 200) as i64 - 99, &i.to_be_bytes()));
    let mut b = WriteBatch::default();
    for i in 0..2_000 {
        b.put(Space::Data, k(i), vec![1u8; 100]);
    }
    store.commit(b).unwrap();
    let time_ns = |f: &dyn Fn(usize)| {
        let start = Instant::now();
        for i in 0..READS {
            f(i);
        }
        start.elapsed().as_nanos() / READS as u128
    };
    let store_get = |i: usize| assert!(store.get(Space::Data, &k(i % 2_000)).unwrap().is_some());
    let handle_get = |i: usize| assert!(h.get(&k(i % 2_000)).unwrap().is_some());
    // One token's keys i, i + 200, ... below i + 1,000: five keys.
    let bounds = |i: usize| (k(i % 1_000), k(i % 1_000 + 1_000));
    let store_scan = |i: usize| {
        let (lo, hi) = bounds(i);
        let n = store
            .scan(Space::Data, Included(&lo[..]), Excluded(&hi[..]), false)
            .take(10)
            .count();
        assert!(n > 0);
    };
    let handle_scan = |i: usize| {
        let (lo, hi) = bounds(i);
        assert!(
            h.scan(Included(&lo[..]), Excluded(&hi[..]), false)
                .take(10)
                .count()
                > 0
        );
    };
    let mut ns = [0u128; 4];
    for _ in 0..ROUNDS {
        ns[0] += time_ns(&store_get);
        ns[1] += time_ns(&handle_get);
        ns[2] += time_ns(&store_scan);
        ns[3] += time_ns(&handle_scan);
    }
    let [sg, hg, ss, hs] = ns.map(|n| n / ROUNDS as u128);
    println!(
        "per read: get store {sg} ns, handle {hg} ns; 5-key scan store {ss} ns, handle {hs} ns"
    );
}
