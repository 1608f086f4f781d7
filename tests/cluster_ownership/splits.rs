//! Splits in cluster mode: only the owner splits a partition; the children are assigned and
//! taken like any partition, and the retired parent's ownership is released.

use crate::support::{until, Backing, Node, SETTLE};
use ringgate::partition::handles::Placement;
use ringgate::query::Outcome;
use ringgate::storage::handle::RETIRED_EPOCH;

#[test]
fn only_the_owner_splits_and_children_are_taken() {
    let Some(b) = Backing::start("ownership_splits") else {
        return;
    };
    let split = [
        "partitions.physical_split_bytes=\"64KiB\"",
        "partitions.logical_max_bytes=\"32KiB\"",
    ];
    let mut a = Node::start_with(&b, "a", 19051, &split);
    a.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    a.ok("CREATE TABLE ks.t (k int PRIMARY KEY, s text)");
    let sid = a.storage_id("ks", "t");
    let other = Node::start_with(&b, "b", 19052, &split);
    until(SETTLE, || {
        a.local(sid).len() == 4 && other.served_by(sid, "a") == 4
    })
    .expect("4 and 4, and b knows a's");

    // b asked to split a partition a owns: nothing happens.
    let map = other.engine.maps.get(sid).unwrap();
    let of_a = (map.parts.iter())
        .find(|p| other.engine.handles.placement(sid, p) == Placement::Remote("a".into()))
        .unwrap();
    let r = ringgate::partition::split::split_one(
        &other.engine.maps,
        &other.engine.handles,
        sid,
        of_a.id,
        None,
    );
    assert!(matches!(r, Ok(None)), "{:?}", r.map(|c| c.is_some()));
    assert_eq!(other.engine.maps.get(sid).unwrap().parts.len(), 8);
    drop(map);

    // b leaves; a (alone, so no other node writes the map meanwhile) splits what it owns.
    other.engine.node.cluster.as_ref().unwrap().leave();
    drop(other);
    until(SETTLE, || a.local(sid).len() == 8).expect("a takes b's share");
    let parents = a.engine.maps.get(sid).unwrap();
    let big = "x".repeat(2000);
    for k in 0..400 {
        a.ok_when_owned(&format!("INSERT INTO ks.t (k, s) VALUES ({k}, '{big}{k}')"));
    }
    let split_done = until(SETTLE, || {
        let m = a.engine.maps.get(sid).unwrap();
        m.parts.len() > 8 && a.local(sid).len() == m.parts.len()
    });
    assert!(
        split_done.is_some(),
        "{} partitions",
        a.engine.maps.get(sid).unwrap().parts.len()
    );
    let now = a.engine.maps.get(sid).unwrap();
    let ctl = b.etcd.control("ringgate/t/");
    let retired: Vec<u64> = (parents.parts.iter())
        .filter(|p| !now.parts.iter().any(|q| q.id == p.id))
        .map(|p| p.id)
        .collect();
    assert!(!retired.is_empty());
    let released = until(SETTLE, || {
        let owners = b
            .block_on(ringgate::cluster::ownership::owners(&ctl))
            .unwrap();
        retired.iter().all(|pid| !owners.contains_key(&(sid, *pid)))
    });
    assert!(released.is_some(), "the retired parents' owner records go");
    let parts = a.engine.store.partitions().unwrap();
    for pid in &retired {
        assert_eq!(parts.current_epoch(sid, *pid).unwrap(), RETIRED_EPOCH);
    }
    // The splitter may split a child again meanwhile: its children are taken a moment later.
    for k in 0..400 {
        let Outcome::Rows(rows) = a.ok_when_owned(&format!("SELECT s FROM ks.t WHERE k = {k}"))
        else {
            panic!("rows expected");
        };
        assert_eq!(rows.count, 1, "k={k}");
    }
    // Writes go on into the children.
    a.ok("INSERT INTO ks.t (k, s) VALUES (1000, 'after')");
}
