//! The ring drivers are shown: system.local / system.peers rows and the TOPOLOGY_CHANGE /
//! STATUS_CHANGE events all come from one value, published by the ownership loop each round
//! ([`super::ClusterNode::publish_ring`]): the live members whose ownership loops run (ready),
//! each with the end tokens of the physical partitions assigned to it (and of the initial
//! layout's ranges), the assignment ownership converges to within a round or two.
//!
//! Why one value, and why the assignment rather than the current owners: the Python driver
//! (3.x) builds its token map only when it connects and when its host set changes (a host
//! added or removed); it ignores MOVED_NODE for a host it knows. So whatever the driver reads
//! right after a NEW_NODE or REMOVED_NODE is what it routes by until the next one. A node is
//! therefore announced (and listed) only once it is ready, in the same publication that gives
//! it its share, and the tokens never have holes: a partition between owners (handed off, or
//! freed by a dead node and not yet taken) still shows under the node it is assigned to.

use super::{Member, MemberEvent};
use std::collections::BTreeMap;

/// One member as drivers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingMember {
    pub member: Member,
    /// Sorted end tokens assigned to it (empty when there are fewer ranges than nodes).
    pub tokens: Vec<i64>,
}

/// By node name.
pub type Ring = BTreeMap<String, RingMember>;

/// The events that take a driver from `old` to `new`: a member that appeared joined, one
/// whose record changed (a restart on another address) changed, one that is gone left, and
/// one whose tokens alone changed moved.
pub fn changes(old: &Ring, new: &Ring) -> Vec<MemberEvent> {
    let mut out = Vec::new();
    for (name, m) in new {
        match old.get(name) {
            None => out.push(MemberEvent::Joined(m.member.clone())),
            Some(o) if o.member != m.member => out.push(MemberEvent::Changed(m.member.clone())),
            Some(o) if o.tokens != m.tokens => out.push(MemberEvent::Moved(name.clone())),
            Some(_) => {}
        }
    }
    let gone = old.keys().filter(|n| !new.contains_key(*n));
    out.extend(gone.map(|n| MemberEvent::Left(n.clone())));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, port: u16) -> Member {
        Member {
            name: name.into(),
            host_id: format!("00000000-0000-0000-0000-00000000000{port}"),
            advertise: format!("127.0.0.1:{port}"),
            data_center: "datacenter1".into(),
            rack: "rack1".into(),
            started_at_ms: 0,
        }
    }

    fn ring(entries: &[(&str, u16, &[i64])]) -> Ring {
        (entries.iter())
            .map(|(n, p, t)| {
                let m = RingMember {
                    member: member(n, *p),
                    tokens: t.to_vec(),
                };
                (n.to_string(), m)
            })
            .collect()
    }

    #[test]
    fn a_ready_node_joins_with_its_share_and_the_others_move() {
        let old = ring(&[("a", 1, &[1, 2, 3, 4])]);
        let new = ring(&[("a", 1, &[1, 2]), ("b", 2, &[3, 4])]);
        assert_eq!(
            changes(&old, &new),
            vec![
                MemberEvent::Moved("a".into()),
                MemberEvent::Joined(member("b", 2))
            ]
        );
    }

    #[test]
    fn a_gone_node_leaves_and_an_unchanged_ring_says_nothing() {
        let old = ring(&[("a", 1, &[1, 2]), ("b", 2, &[3, 4])]);
        let new = ring(&[("a", 1, &[1, 2, 3, 4])]);
        assert_eq!(
            changes(&old, &new),
            vec![
                MemberEvent::Moved("a".into()),
                MemberEvent::Left("b".into())
            ]
        );
        assert!(changes(&new, &new).is_empty());
    }

    #[test]
    fn a_new_record_is_a_change_even_with_new_tokens() {
        let old = ring(&[("a", 1, &[1])]);
        let new = ring(&[("a", 9, &[2])]);
        assert_eq!(
            changes(&old, &new),
            vec![MemberEvent::Changed(member("a", 9))]
        );
    }
}
