//! A node that has joined the cluster but whose ownership loop does not run yet (still
//! opening) is handed nothing: its share would be unowned until it is up.

use crate::support::{until, Backing, Node, LEASE_MS, SETTLE};
use ringgate::cluster::{ClusterNode, Member, NodeOptions};
use std::time::Duration;

#[test]
fn a_member_not_ready_is_handed_nothing() {
    let Some(b) = Backing::start("ownership_ready") else {
        return;
    };
    let (a, sid) = Node::first(&b, "a", 19081);
    until(SETTLE, || a.local(sid).len() == 8).expect("a takes every partition");
    let member = Member {
        name: "z".into(),
        host_id: "00000000-0000-0000-0000-00000000000z".into(),
        advertise: "127.0.0.1:19082".into(),
        data_center: "dc1".into(),
        rack: "rack1".into(),
        started_at_ms: 0,
    };
    let z = ClusterNode::join(NodeOptions {
        endpoints: vec![b.etcd.endpoint()],
        root: "ringgate/t/".into(),
        member,
        lease_ms: LEASE_MS,
    })
    .unwrap();
    let seen = until(SETTLE, || {
        a.engine
            .node
            .cluster
            .as_ref()
            .unwrap()
            .members()
            .contains_key("z")
    });
    seen.expect("a lists z");
    // Three rounds of a (lease/5 each): without the readiness check a hands z its half in one.
    std::thread::sleep(Duration::from_millis(3 * LEASE_MS / 5));
    assert_eq!(
        a.local(sid).len(),
        8,
        "a handed partitions to a node that cannot take them"
    );
    drop(z);
}
