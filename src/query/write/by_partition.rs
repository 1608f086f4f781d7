//! Splits a write's storage batch into one batch per physical partition, so that each commit
//! touches one partition (several are made atomic together by `storage::batch_log`).
//!
//! Row and index ops belong to the partition of the row they were written for (the caller
//! says which, op by op); size records carry their table and token in their key. Index entries
//! are not in the partition's key range yet: they travel with their row's part.

use crate::partition::map::PartitionMaps;
use crate::storage::{Space, WriteBatch};
use crate::tokens::Token;
use std::collections::HashMap;

/// (table storage id, physical partition id); ops of neither kind go to `OTHER`.
type Group = (u64, u64);
const OTHER: Group = (u64::MAX, u64::MAX);

/// `owners[i]`: (storage id, token) of the row op `i` was written for; ops past its end are
/// size records (or other records, kept together in a part of their own).
pub(super) fn split(
    maps: &PartitionMaps,
    batch: WriteBatch,
    owners: &[(u64, Token)],
) -> Vec<WriteBatch> {
    let mut index: HashMap<Group, usize> = HashMap::new();
    let mut parts: Vec<WriteBatch> = Vec::new();
    for (i, op) in batch.ops.into_iter().enumerate() {
        let group = match owners.get(i) {
            Some(&(sid, token)) => partition_of(maps, sid, token),
            None if op.space == Space::Sizes => match table_and_token(&op.key) {
                Some((sid, token)) => partition_of(maps, sid, token),
                None => OTHER,
            },
            None => OTHER,
        };
        let at = *index.entry(group).or_insert_with(|| {
            parts.push(WriteBatch::default());
            parts.len() - 1
        });
        parts[at].ops.push(op);
    }
    parts
}

fn partition_of(maps: &PartitionMaps, sid: u64, token: Token) -> Group {
    match maps.get(sid) {
        Some(map) => (sid, map.route(token).id),
        None => (sid, u64::MAX),
    }
}

/// A size record key starts `[storage id u64 BE][token u64 BE, sign bit flipped]`.
fn table_and_token(key: &[u8]) -> Option<(u64, Token)> {
    let sid = u64::from_be_bytes(key.get(..8)?.try_into().ok()?);
    let flipped = u64::from_be_bytes(key.get(8..16)?.try_into().ok()?);
    Some((sid, (flipped ^ (1 << 63)) as i64))
}
