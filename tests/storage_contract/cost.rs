//! What a conditional commit through a handle costs against a plain store batch (run by hand:
//! `cargo test --release --test storage_contract cost -- --ignored --nocapture`). No assertion
//! on time: it prints the figures for docs/ARCHITECTURE.md.

use super::support::*;
use bytes::Bytes;
use ringgate::storage::{Condition, PartitionCommit, Space, WriteBatch};
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
        c.require(Condition::Unchanged { key: k(i), read })
            .put(k(i), vec![3u8; 100]);
        h.commit(c).unwrap();
    }
    let conditional = per_commit_ns(start);
    println!(
        "per commit: store batch {plain} ns, handle {handle} ns, read + conditional handle \
         commit {conditional} ns"
    );
}
