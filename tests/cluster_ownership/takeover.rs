//! Partitions spread over the nodes, follow a join, and are taken over when a node dies:
//! with new epochs, the dead node's owner handles fenced in PostgreSQL, every acknowledged
//! write readable.

use crate::support::{late_commit, read_anywhere, until, Backing, Node, LEASE_MS, SETTLE};
use ringgate::partition::handles::Placement;
use ringgate::query::QueryError;
use ringgate::storage::StorageError;
use std::collections::{BTreeMap, BTreeSet};

fn counts(nodes: &[&Node], sid: u64) -> Vec<usize> {
    let mut c: Vec<usize> = nodes.iter().map(|n| n.local(sid).len()).collect();
    c.sort();
    c
}

/// Every partition served by exactly one of `nodes`, and the others see it as `Remote(owner)`.
fn consistent(nodes: &[&Node], sid: u64) -> bool {
    let mut owner: BTreeMap<u64, &str> = BTreeMap::new();
    for n in nodes {
        for id in n.local(sid) {
            if owner.insert(id, &n.name).is_some() {
                return false;
            }
        }
    }
    let all = nodes[0].placements(sid);
    owner.len() == all.len()
        && nodes.iter().all(|n| {
            n.placements(sid).into_iter().all(|(id, pl)| match pl {
                Placement::Local => owner[&id] == n.name,
                Placement::Remote(o) => owner[&id] == o,
                Placement::Unowned => false,
            })
        })
}

/// Inserts k in `keys` through `n`; the keys acknowledged. A refusal must be NotOwner (the
/// partition is served elsewhere), nothing else.
fn insert(n: &mut Node, keys: impl Iterator<Item = i32>) -> Vec<i32> {
    let mut acked = Vec::new();
    for k in keys {
        match n.run(&format!("INSERT INTO ks.t (k, v) VALUES ({k}, {k})")) {
            Ok(_) => acked.push(k),
            Err(QueryError::NotOwner { .. }) => {}
            Err(e) => panic!("{}: insert {k}: {e}", n.name),
        }
    }
    acked
}

#[test]
fn partitions_spread_follow_joins_and_are_taken_over() {
    let Some(b) = Backing::start("ownership_takeover") else {
        return;
    };
    let (mut a, sid) = Node::first(&b, "a", 19001);
    assert_eq!(a.placements(sid).len(), 8, "cluster.initial_partitions");
    let alone = until(SETTLE, || a.local(sid).len() == 8).expect("a takes every partition");
    eprintln!("one node took 8 partitions in {alone:?}");
    let mut acked = insert(&mut a, 0..200);
    assert_eq!(acked.len(), 200, "a serves every partition");

    // A join: the newcomer gets its share; the schema exists before it starts (17a shares
    // later DDL).
    let bn = Node::start(&b, "b", 19002);
    let t = until(SETTLE, || {
        counts(&[&a, &bn], sid) == [4, 4] && consistent(&[&a, &bn], sid)
    });
    eprintln!("b got its share in {:?}", t.expect("4 and 4"));
    let mut c = Node::start(&b, "c", 19003);
    let nodes = [&a, &bn, &c];
    let t = until(SETTLE, || {
        counts(&nodes, sid) == [2, 3, 3] && consistent(&nodes, sid)
    });
    eprintln!("c got its share in {:?}", t.expect("3, 3 and 2"));
    let published = until(SETTLE, || {
        let by_node = a.engine.node.cluster.as_ref().unwrap().tokens_by_node();
        let all: BTreeSet<i64> = by_node.values().flatten().copied().collect();
        by_node.len() == 3 && all.len() == 8 && by_node.values().map(Vec::len).sum::<usize>() == 8
    });
    assert!(
        published.is_some(),
        "each node's end tokens, disjoint, all 8"
    );

    // Writes through c land where c owns the partition, and only there.
    let through_c = insert(&mut c, 200..400);
    assert!(
        !through_c.is_empty() && through_c.len() < 200,
        "{}",
        through_c.len()
    );
    acked.extend(&through_c);

    // c dies: its lease is no longer renewed (the process is gone as far as etcd knows).
    let map = c.engine.maps.get(sid).unwrap();
    let old: Vec<_> = (map.parts.iter())
        .filter_map(|p| Some((p.id, c.engine.handles.owner_handle(p)?)))
        .collect();
    assert_eq!(old.len(), c.local(sid).len());
    drop(map);
    drop(c);
    let nodes = [&a, &bn];
    let died = std::time::Instant::now();
    let ctl = b.etcd.control("ringgate/t/");
    let freed = until(SETTLE, || {
        let owners = b
            .block_on(ringgate::cluster::ownership::owners(&ctl))
            .unwrap();
        owners.values().all(|o| o.node != "c")
    });
    let freed = freed.expect("etcd expires c's lease");
    let served = until(SETTLE, || counts(&nodes, sid).iter().sum::<usize>() == 8);
    served.expect("a and b take c's partitions over");
    let served = died.elapsed();
    until(SETTLE, || consistent(&nodes, sid)).expect("a and b agree on the owners");
    eprintln!(
        "TAKEOVER: etcd deleted c's owner keys {} ms after its death (lease {LEASE_MS} ms); \
         its {} partitions were served again after {} ms, with both survivors agreeing after {} ms",
        freed.as_millis(),
        old.len(),
        served.as_millis(),
        died.elapsed().as_millis()
    );
    let rebalanced = until(SETTLE, || counts(&nodes, sid) == [4, 4]);
    assert!(rebalanced.is_some(), "{:?}", counts(&nodes, sid));

    // New epochs; c's owner handles are fenced in PostgreSQL: nothing lands.
    let epochs: BTreeMap<u64, u64> = a.epochs(sid).into_iter().chain(bn.epochs(sid)).collect();
    for (pid, h) in &old {
        assert!(
            epochs[pid] > h.epoch(),
            "partition {pid}: {} then {}",
            h.epoch(),
            epochs[pid]
        );
        let (key, late) = late_commit(&**h);
        match late {
            Err(StorageError::Fenced { epoch, current, .. }) => assert!(current > epoch),
            other => panic!("partition {pid}: the dead owner's commit gave {other:?}"),
        }
        let map = a.engine.maps.get(sid).unwrap();
        let p = map.parts.iter().find(|p| p.id == *pid).unwrap();
        let read = a.engine.handles.read(sid, p).unwrap().get(&key).unwrap();
        assert!(read.is_none(), "partition {pid}: a fenced commit wrote");
    }

    // Every acknowledged write reads back through both survivors.
    for n in [&mut a] {
        for k in &acked {
            assert_eq!(n.count(&read_anywhere(k)), 1, "k={k}");
        }
    }
    let mut bn = bn;
    for k in &acked {
        assert_eq!(bn.count(&read_anywhere(k)), 1, "k={k}");
    }
    // And the survivors write every key again (each through the owner of its partition).
    let again: usize = [&mut a, &mut bn]
        .into_iter()
        .map(|n| insert(n, 0..400).len())
        .sum();
    assert_eq!(again, 400);
}

/// Many partitions: a dead node's share is taken over together, not one after another (the
/// time is printed; the bound asserted is only the generous settle time).
#[test]
fn a_dead_nodes_many_partitions_are_taken_over_together() {
    let Some(b) = Backing::start("ownership_many") else {
        return;
    };
    let many = ["cluster.initial_partitions=256"];
    let mut a = Node::start_with(&b, "a", 19071, &many);
    a.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    a.ok("CREATE TABLE ks.t (k int PRIMARY KEY, v int)");
    let sid = a.storage_id("ks", "t");
    let alone = until(SETTLE, || a.local(sid).len() == 256).expect("a takes 256 partitions");
    let c = Node::start(&b, "c", 19072);
    let t = until(SETTLE, || {
        a.local(sid).len() == 128 && c.local(sid).len() == 128
    });
    let joined = t.expect("128 and 128");
    drop(c);
    let died = std::time::Instant::now();
    until(SETTLE, || a.local(sid).len() == 256).expect("a takes c's 128 over");
    eprintln!(
        "MANY: one node took 256 partitions in {} ms; a joining node its 128 in {} ms; after \
         its death they were served again in {} ms (lease {LEASE_MS} ms)",
        alone.as_millis(),
        joined.as_millis(),
        died.elapsed().as_millis()
    );
}
