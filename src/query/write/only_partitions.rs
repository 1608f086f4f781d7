//! The part of a write one owner applies (cluster mode): a write spanning physical partitions
//! of different owners is sent by its coordinator to every owner (`server::spanning`), each with
//! the list of the write's partitions and which of them it applies. The owner computes the
//! whole write as usual (same statements, values and timestamp), then keeps only the mutations
//! of its partitions, here, before admission checks ownership and charges.
//!
//! Payload format (`ringgate-only-partitions`): per partition `[storage id u64 BE][partition id
//! u64 BE][1: this owner applies it | 0: another owner does]`, at most `MAX_PARTITIONS`.
//!
//! Why the whole list and not only the owner's own partitions: a mutation whose partition is
//! in no entry means the partition map changed since the coordinator routed the write (a
//! split gives new partition ids); dropping it silently would lose it, so the part answers
//! Unavailable (nothing applied) and the coordinator's client retries.

use super::Mutation;
use crate::query::{Engine, QueryError, Result};
use bytes::{Buf, BufMut, Bytes};
use std::collections::HashMap;

/// Custom payload key of the partitions a forwarded part applies.
pub const PAYLOAD_KEY: &str = "ringgate-only-partitions";
/// Most partitions one spanning write lists (a batch is bounded by the batch size limits; this
/// bounds the payload whatever a peer sends).
pub const MAX_PARTITIONS: usize = 65_536;
const ENTRY_BYTES: usize = 17;

/// (storage id, partition id) -> whether this owner applies it.
pub type OnlyPartitions = HashMap<(u64, u64), bool>;

/// The payload value naming each partition and whether the receiver applies it.
pub fn encode(parts: &[((u64, u64), bool)]) -> Bytes {
    let mut out = Vec::with_capacity(parts.len() * ENTRY_BYTES);
    for ((sid, pid), mine) in parts {
        out.put_u64(*sid);
        out.put_u64(*pid);
        out.put_u8(u8::from(*mine));
    }
    Bytes::from(out)
}

/// The payload value read back; a malformed one is the sender's bug (Invalid).
pub fn decode(mut v: Bytes) -> Result<OnlyPartitions> {
    if !v.len().is_multiple_of(ENTRY_BYTES) || v.len() / ENTRY_BYTES > MAX_PARTITIONS {
        return Err(QueryError::Invalid(format!(
            "malformed {PAYLOAD_KEY} payload of {} bytes",
            v.len()
        )));
    }
    let mut out = HashMap::with_capacity(v.len() / ENTRY_BYTES);
    while v.has_remaining() {
        let key = (v.get_u64(), v.get_u64());
        out.insert(key, v.get_u8() == 1);
    }
    Ok(out)
}

/// The mutations of the partitions this owner applies.
pub(super) fn keep(
    engine: &Engine,
    muts: Vec<Mutation>,
    only: &OnlyPartitions,
) -> Result<Vec<Mutation>> {
    keep_by(muts, only, |m| {
        let sid = m.table.storage_id;
        let map = engine.maps.get(sid)?;
        Some((sid, map.route(m.token).id))
    })
}

/// `keep` with the (storage id, partition id) of each mutation from `partition_of` (None: its
/// table has no map, e.g. it is being dropped: kept, admission decides as for any write).
fn keep_by<M>(
    muts: Vec<M>,
    only: &OnlyPartitions,
    partition_of: impl Fn(&M) -> Option<(u64, u64)>,
) -> Result<Vec<M>> {
    let mut kept = Vec::with_capacity(muts.len());
    for m in muts {
        let Some((sid, pid)) = partition_of(&m) else {
            kept.push(m);
            continue;
        };
        match only.get(&(sid, pid)) {
            Some(true) => kept.push(m),
            Some(false) => {}
            None => {
                return Err(QueryError::Unavailable(format!(
                    "physical partition {pid} of table storage {sid} is not one the coordinator \
                     routed this write to (the partition layout changed); try again"
                )))
            }
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The payload round-trips; a truncated one is refused.
    #[test]
    fn payload_round_trips() {
        let v = encode(&[((1, 2), true), ((u64::MAX, 0), false)]);
        let d = decode(v.clone()).unwrap();
        assert_eq!(d.len(), 2);
        assert!(d[&(1, 2)]);
        assert!(!d[&(u64::MAX, 0)]);
        assert!(decode(v.slice(1..)).is_err());
        assert!(decode(Bytes::new()).unwrap().is_empty());
    }

    /// Only the mutations of the receiver's partitions are kept, in order; a mutation of a
    /// partition the coordinator did not route (a changed layout) fails the whole part before
    /// anything is applied; one of a table without a map is kept (admission decides).
    #[test]
    fn keeps_only_the_owners_partitions() {
        // (storage id, partition id or 0 for "no map", name)
        let part = |m: &(u64, u64, &str)| (m.1 != 0).then_some((m.0, m.1));
        let only: OnlyPartitions = [((7, 1), true), ((7, 2), false), ((8, 1), true)].into();
        let muts = vec![
            (7, 1, "a"),
            (7, 2, "b"),
            (8, 1, "c"),
            (8, 0, "d"),
            (7, 1, "e"),
        ];
        let kept = keep_by(muts, &only, part).unwrap();
        let names: Vec<_> = kept.iter().map(|m| m.2).collect();
        assert_eq!(names, ["a", "c", "d", "e"]);

        match keep_by(vec![(7, 1, "a"), (7, 3, "z")], &only, part) {
            Err(QueryError::Unavailable(m)) => assert!(m.contains("layout changed"), "{m}"),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a stray partition was accepted"),
        }
    }
}
