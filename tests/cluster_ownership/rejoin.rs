//! A node whose lease etcd dropped (revoked here; expired after a long pause in life) joins
//! again on a new lease (`lease_generation` moves on): it drops every partition at once and
//! takes them again with newer epochs; its handles of the old generation are fenced.

use crate::support::{late_commit, until, Backing, Node, SETTLE};
use ringgate::storage::StorageError;
use std::collections::BTreeMap;
use std::time::Instant;

#[test]
fn a_node_whose_lease_is_gone_takes_its_partitions_again_with_new_epochs() {
    let Some(b) = Backing::start("ownership_rejoin") else {
        return;
    };
    let (mut a, sid) = Node::first(&b, "a", 19031);
    until(SETTLE, || a.local(sid).len() == 8).expect("a takes every partition");
    a.ok("INSERT INTO ks.t (k, v) VALUES (1, 1)");
    let cluster = a.engine.node.cluster.clone().unwrap();
    let before: BTreeMap<u64, u64> = a.epochs(sid).into_iter().collect();
    let map = a.engine.maps.get(sid).unwrap();
    let old: Vec<_> = (map.parts.iter())
        .map(|p| a.engine.handles.owner_handle(p).unwrap())
        .collect();
    let generation = cluster.lease_generation();

    let revoked = Instant::now();
    b.block_on(b.etcd.client().lease_revoke(cluster.lease().id()))
        .unwrap();
    let again = until(SETTLE, || {
        let now: BTreeMap<u64, u64> = a.epochs(sid).into_iter().collect();
        now.len() == 8 && now.iter().all(|(pid, e)| *e > before[pid])
    });
    again.expect("a takes its partitions again with newer epochs");
    eprintln!(
        "REJOIN: a served all 8 partitions again, with new epochs, {} ms after its lease was revoked",
        revoked.elapsed().as_millis()
    );
    assert!(cluster.lease_generation() > generation);
    for h in old {
        let (_, late) = late_commit(&*h);
        assert!(matches!(late, Err(StorageError::Fenced { .. })), "{late:?}");
    }
    a.ok("INSERT INTO ks.t (k, v) VALUES (1, 2)");
    assert_eq!(a.int("SELECT v FROM ks.t WHERE k = 1"), Some(2));
}
