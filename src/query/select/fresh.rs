//! Cluster mode: reads of partitions this node does not own see every write acknowledged
//! before they began.
//!
//! Such a read goes through the storage group the partition map here names
//! (`partition::handles`). A move switches a partition to another group in one etcd
//! transaction that also rewrites the maps' change key, and writes acknowledged after it land
//! in the new group only. A node whose follower (a poll every 200 ms) has not seen the switch
//! yet would read the old group's copy: complete up to the switch, without those writes. So a
//! read that reads elsewhere notes the change key's revision its maps follow before it routes
//! (`PartitionMaps::followed_revision`) and reads the key again when it is done (one
//! linearizable etcd read, `PartitionMaps::unchanged_since`). Unchanged: no switch came between,
//! and one before the read began is in the maps it routed by. Changed (a switch, a split, any
//! map rewrite): the maps are reloaded and the read runs again, at most [`MAX_READS`] times.
//!
//! Reads of partitions this node owns need none of it: their owner switches its own handles
//! while commits wait (`partition::moves`). Nor do single nodes (`Handles::all_local`). A read
//! run again is admitted and charged again (it did the work twice); that happens only when a
//! map changed during it. While etcd cannot be read, such reads fail as unavailable: whether a
//! switch came between cannot be known then.

use super::plan::{Plan, Target};
use super::Engine;
use crate::partition::handles::Placement;
use crate::partition::map::{PartitionMap, PhysicalPartition};
use crate::tokens::MIN_TOKEN;
use std::sync::Arc;

/// Runs of one read at most while maps keep changing under it; then it fails as unavailable
/// (the client may retry).
pub(super) const MAX_READS: usize = 4;

/// The partitions of `map` holding tokens in `(lo, hi]` (the empty key's MIN token belongs to
/// the first partition).
pub(super) fn parts_in(
    map: &PartitionMap,
    lo: i128,
    hi: i128,
) -> impl Iterator<Item = &Arc<PhysicalPartition>> {
    let lo_tok = lo.max(MIN_TOKEN as i128 - 1);
    (map.parts.iter()).filter(move |p| (p.end as i128) > lo_tok && (p.start as i128) < hi)
}

/// Whether `plan` reads a partition that this node does not own (through the group its map
/// names).
pub(super) fn reads_elsewhere(
    engine: &Engine,
    sid: u64,
    plan: &Plan,
    map: Option<&PartitionMap>,
) -> bool {
    let Some(map) = map.filter(|_| !engine.handles.all_local()) else {
        return false;
    };
    let elsewhere =
        |p: &Arc<PhysicalPartition>| engine.handles.placement(sid, p) != Placement::Local;
    match &plan.target {
        Target::Partitions(_) => plan.tokens.iter().any(|&t| elsewhere(map.route(t))),
        Target::Range(lo, hi) | Target::Index { lo, hi, .. } => {
            parts_in(map, *lo, *hi).any(elsewhere)
        }
        Target::Ranges(ranges) => {
            (ranges.iter()).any(|&(lo, hi)| parts_in(map, lo, hi).any(elsewhere))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::MAX_TOKEN;

    /// Three partitions: (MIN, -100], (-100, 100], (100, MAX].
    fn map() -> PartitionMap {
        let part = |id, start, end| {
            Arc::new(PhysicalPartition {
                id,
                start,
                end,
                group: None,
                sizes: Default::default(),
                stats: Default::default(),
            })
        };
        PartitionMap {
            parts: vec![
                part(1, MIN_TOKEN, -100),
                part(2, -100, 100),
                part(3, 100, MAX_TOKEN),
            ],
        }
    }

    fn ids(lo: i128, hi: i128) -> Vec<u64> {
        parts_in(&map(), lo, hi).map(|p| p.id).collect()
    }

    /// (lo, hi] picks every partition holding one of its tokens, no other: a range ending on a
    /// partition's end stays out of the next one, and one starting below the ring (the empty
    /// key's MIN token included) starts in the first.
    #[test]
    fn parts_in_picks_the_partitions_holding_tokens_of_the_range() {
        assert_eq!(ids(MIN_TOKEN as i128 - 1, MAX_TOKEN as i128), [1, 2, 3]);
        assert_eq!(ids(i128::MIN, -150), [1]);
        assert_eq!(ids(-200, -100), [1]);
        assert_eq!(ids(-100, 100), [2]);
        assert_eq!(ids(-101, -99), [1, 2]);
        assert_eq!(ids(100, 101), [3]);
        assert_eq!(ids(99, 100), [2]);
        assert_eq!(ids(MAX_TOKEN as i128 - 1, MAX_TOKEN as i128), [3]);
    }
}
