//! A node that stops renewing its lease but keeps running (paused, partitioned from etcd):
//! it stops serving by its own clock, the other node takes over, and nothing it writes
//! afterwards lands: a newer value is never overwritten by the old owner.

use crate::support::{late_commit, read_anywhere, until, Backing, Node, LEASE_MS, SETTLE};
use ringgate::query::QueryError;
use ringgate::storage::handle::{PartitionCommit, PartitionRef};
use ringgate::storage::StorageError;

#[test]
fn a_paused_owner_stops_serving_and_never_writes_after_takeover() {
    let Some(b) = Backing::start("ownership_pause") else {
        return;
    };
    let (mut a, sid) = Node::first(&b, "a", 19011);
    let mut p = Node::start(&b, "p", 19012);
    // Each node also knows the other's partitions (its ownership loop learns them a round
    // later): a refusal names the owner only then.
    let spread = until(SETTLE, || {
        a.local(sid).len() == 4 && p.local(sid).len() == 4 && a.served_by(sid, "p") == 4
    });
    assert!(spread.is_some(), "{:?} {:?}", a.local(sid), p.local(sid));

    // A key p serves, written by p; a refuses it (NotOwner) and writes nothing.
    let k: i32 = (0..100)
        .find(|k| {
            p.run(&format!("INSERT INTO ks.t (k, v) VALUES ({k}, 1)"))
                .is_ok()
        })
        .expect("p serves half the ring");
    let refused = a.run(&format!("INSERT INTO ks.t (k, v) VALUES ({k}, 9)"));
    assert!(
        matches!(refused, Err(QueryError::NotOwner { owner: Some(ref o), .. }) if o == "p"),
        "{refused:?}"
    );
    assert_eq!(a.int(&read_anywhere(k)), Some(1));
    let map = p.engine.maps.get(sid).unwrap();
    let part = map
        .route(ringgate::tokens::token_of(&k.to_be_bytes()))
        .clone();
    let old = p
        .engine
        .handles
        .owner_handle(&part)
        .expect("p's owner handle");

    p.stop_renewing();
    let stopped = until(SETTLE, || p.local(sid).is_empty()).expect("p stops serving");
    let taken = until(SETTLE, || a.local(sid).len() == 8).expect("a takes everything over");
    eprintln!(
        "PAUSE: p stopped serving {} ms after it stopped renewing its lease; a served all 8 \
         partitions {} ms after p stopped renewing (lease {LEASE_MS} ms)",
        stopped.as_millis(),
        (stopped + taken).as_millis()
    );

    // The new owner writes a newer value; the paused node's writes fail, through the engine
    // (Unavailable while its lease is lost, NotOwner once it has joined again) and through its
    // old owner handle (Fenced by PostgreSQL).
    a.ok(&format!("INSERT INTO ks.t (k, v) VALUES ({k}, 2)"));
    let late = p.run(&format!("INSERT INTO ks.t (k, v) VALUES ({k}, 3)"));
    assert!(
        matches!(
            late,
            Err(QueryError::NotOwner { .. } | QueryError::Unavailable(_))
        ),
        "{late:?}"
    );
    let (_, late) = late_commit(&*old);
    assert!(matches!(late, Err(StorageError::Fenced { .. })), "{late:?}");
    assert_eq!(a.int(&read_anywhere(k)), Some(2));
    assert_eq!(p.int(&read_anywhere(k)), Some(2));
}

/// Reads of a partition served elsewhere go through a read-only PostgreSQL handle: its commit
/// fails even where the epoch check alone would pass (a partition never opened has epoch 0,
/// the read-only handle's own), and writes nothing.
#[test]
fn a_read_only_handle_never_commits() {
    let Some(b) = Backing::start("ownership_read_only") else {
        return;
    };
    let a = Node::start(&b, "a", 19021);
    let parts = a
        .engine
        .store
        .partitions()
        .expect("PostgreSQL hands out handles");
    let r = PartitionRef::new(4242, 1, i64::MIN, i64::MAX);
    let ro = parts.read_only(r.clone()).unwrap();
    let key = [&r.range.lo[..], b"k"].concat();
    let mut commit = PartitionCommit::default();
    commit.put(key.clone(), &b"x"[..]);
    let refused = ro.commit(commit);
    assert!(
        matches!(refused, Err(StorageError::NotOwner { owner: None, .. })),
        "{refused:?}"
    );
    assert_eq!(ro.get(&key).unwrap(), None);
    assert_eq!(
        parts.current_epoch(4242, 1).unwrap(),
        0,
        "nothing fenced either"
    );
}
