//! Splits a write's storage batch into one commit per physical partition, each for that
//! partition's handle, so that every commit touches one partition (several are made atomic
//! together by `storage::batch_log`).
//!
//! Row ops belong to the partition of the row they were written for (the caller says which, op
//! by op): the row's own keys (they start with the table's storage id) are range-checked data
//! writes; its secondary-index entries (they start with the index's storage id) are *local*
//! writes owned through the row's token. Size records carry their table and token in their key.

use crate::partition::handles::Handles;
use crate::partition::map::PartitionMaps;
use crate::storage::batch_log::{Part, Parts};
use crate::storage::handle::{Condition, LocalWrite, PartitionCommit};
use crate::storage::{Result, Space, StorageError, WriteBatch};
use crate::tokens::Token;
use smallvec::SmallVec;

/// `owners[i]`: (storage id, token) of the row op `i` was written for; ops past its end are
/// size records. `conditions`: (storage id, token, condition) for the rows read and merged.
pub(crate) fn split(
    maps: &PartitionMaps,
    handles: &Handles,
    batch: WriteBatch,
    owners: &[(u64, Token)],
    conditions: impl IntoIterator<Item = (u64, Token, Condition)>,
) -> Result<Parts> {
    let mut parts = Building::default();
    for (i, op) in batch.ops.into_iter().enumerate() {
        let (sid, token) = match (owners.get(i), op.space) {
            (Some(&owner), _) => owner,
            (None, Space::Sizes) => table_and_token(&op.key).ok_or_else(|| odd(&op.key))?,
            (None, _) => return Err(odd(&op.key)),
        };
        let c = parts.of(maps, handles, sid, token)?;
        match op.space {
            Space::Sizes => c.sizes.push((op.key, op.value)),
            _ if op.key.starts_with(&sid.to_be_bytes()) => c.writes.push((op.key, op.value)),
            _ => c.local.push(LocalWrite {
                token,
                key: op.key,
                value: op.value,
            }),
        }
    }
    for (sid, token, cond) in conditions {
        parts.of(maps, handles, sid, token)?.conditions.push(cond);
    }
    // Every commit path comes through here: nothing commits on a node that does not own all
    // of its partitions (cluster mode; statements were checked already, before their reads).
    crate::partition::placement::require_local(
        handles,
        parts.placed.iter().map(|(sid, p)| (*sid, &**p)),
    )?;
    Ok(parts.list)
}

/// The commits being built, one per physical partition. A write touches one or a few
/// partitions: looked up by a linear search (a hash map cost more than the search). Inline
/// room for one partition and table: a point write builds its commit without allocating a
/// list.
#[derive(Default)]
struct Building {
    list: Parts,
    /// (storage id, partition) of each entry of `list`.
    placed: SmallVec<
        [(
            u64,
            std::sync::Arc<crate::partition::map::PhysicalPartition>,
        ); 1],
    >,
    /// The map of each table seen (looked up once per table, not once per op).
    maps: SmallVec<[(u64, std::sync::Arc<crate::partition::map::PartitionMap>); 1]>,
    /// The entry the last op went to.
    last: usize,
}

impl Building {
    fn of(
        &mut self,
        maps: &PartitionMaps,
        handles: &Handles,
        sid: u64,
        token: Token,
    ) -> Result<&mut PartitionCommit> {
        // The partition of the op before, mostly (a point write's row, size record and
        // condition are all in one): no map lookup, route or search.
        if let Some((s, p)) = self.placed.get(self.last) {
            if *s == sid && p.contains(token) {
                return Ok(&mut self.list[self.last].commit);
            }
        }
        let map = match self.maps.iter().find(|(s, _)| *s == sid) {
            Some((_, m)) => m,
            None => {
                let m = maps.get(sid).ok_or_else(|| {
                    StorageError::Corrupt(format!("no partition map for table {sid}"))
                })?;
                self.maps.push((sid, m));
                &self.maps[self.maps.len() - 1].1
            }
        };
        let p = map.route(token);
        let at = match self
            .placed
            .iter()
            .position(|(s, q)| *s == sid && q.id == p.id)
        {
            Some(at) => at,
            None => {
                self.list.push(Part {
                    handle: handles.get(sid, p)?,
                    commit: PartitionCommit::default(),
                });
                self.placed.push((sid, std::sync::Arc::clone(p)));
                self.list.len() - 1
            }
        };
        self.last = at;
        Ok(&mut self.list[at].commit)
    }
}

/// Commits one part of a batch log entry a crash interrupted (`batch_log::replay`): one
/// physical partition's final writes, as a plain batch. Each row key and size record names its
/// table and token; index entries are owned through the part's first of those (a part never
/// spans partitions, and no split ran since: splits wait for the writer's partition locks).
/// A part whose table is gone is skipped (its data is being deleted).
pub(crate) fn replay_part(
    maps: &PartitionMaps,
    handles: &Handles,
    batch: WriteBatch,
) -> Result<()> {
    let owner_of = |op: &crate::storage::Op| match op.space {
        Space::Sizes => table_and_token(&op.key),
        _ => table_and_token(&op.key).filter(|(sid, _)| maps.get(*sid).is_some()),
    };
    let owners: Vec<Option<(u64, Token)>> = batch.ops.iter().map(owner_of).collect();
    let Some(anchor) = owners.iter().flatten().next().copied() else {
        return Ok(());
    };
    if maps.get(anchor.0).is_none() {
        return Ok(());
    }
    let owners: Vec<(u64, Token)> = owners.into_iter().map(|o| o.unwrap_or(anchor)).collect();
    for part in split(maps, handles, batch, &owners, Vec::new())? {
        match part.handle {
            Some(h) => h.commit(part.commit)?,
            None => {
                return Err(StorageError::Io(
                    "no partition handle to replay into".into(),
                ))
            }
        }
    }
    Ok(())
}

fn odd(key: &[u8]) -> StorageError {
    StorageError::Corrupt(format!(
        "write of {} key bytes belongs to no partition",
        key.len()
    ))
}

/// A size record key starts `[storage id u64 BE][token u64 BE, sign bit flipped]`.
fn table_and_token(key: &[u8]) -> Option<(u64, Token)> {
    let sid = u64::from_be_bytes(key.get(..8)?.try_into().ok()?);
    Some((sid, crate::format::keys::key_token(key)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{EmbeddedStore, Store, SyncMode};
    use std::ops::Bound::Unbounded;
    use std::sync::Arc;

    fn data_key(sid: u64, token: Token, tail: &[u8]) -> Vec<u8> {
        let flipped = ((token as u64) ^ (1 << 63)).to_be_bytes();
        [&sid.to_be_bytes()[..], &flipped, tail].concat()
    }

    /// A logged part (a row, its index entry, its size record) replays through the handle of
    /// the partition that owns the row, the index entry as a local write owned through the
    /// row's token; a part of a table that no longer has a map is skipped.
    #[test]
    fn replayed_parts_go_to_their_partition_with_their_index_entries() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(EmbeddedStore::open(dir.path(), SyncMode::None).unwrap());
        let maps = PartitionMaps::open(Arc::clone(&store)).unwrap();
        let handles = Handles::start(Arc::clone(&store)).unwrap();
        let (sid, index_sid) = (20u64, 21u64);
        let mut meta = WriteBatch::default();
        // 40,000 RU/s: four partitions, so the row's is not the whole ring.
        let map = maps.initial_layout((sid, Default::default()), Some(40_000), &mut meta);
        crate::storage::commit_meta(store.metadata(), meta).unwrap();
        maps.install(sid, Arc::clone(&map));
        assert!(map.parts.len() >= 4);
        let token: Token = 5_000_000_000_000_000_000;
        let row = data_key(sid, token, b"pk\x01");
        let entry = [&index_sid.to_be_bytes()[..], b"value", &row[8..]].concat();
        let size = data_key(sid, token, b"pk");
        let mut part = WriteBatch::default();
        part.put(Space::Data, entry.clone(), Vec::new());
        part.put(Space::Data, row.clone(), b"row".to_vec());
        part.put(Space::Sizes, size.clone(), 9u64.to_be_bytes().to_vec());
        replay_part(&maps, &handles, part).unwrap();

        let owner = map.route(token);
        let h = handles.read(sid, owner).unwrap();
        assert_eq!(h.get(&row).unwrap().as_deref(), Some(&b"row"[..]));
        assert!(h.get_size(&size).unwrap().is_some());
        let prefix = [&index_sid.to_be_bytes()[..], b"value"].concat();
        let local: Vec<_> = h.scan_local(&prefix, Unbounded, Unbounded, false).collect();
        assert_eq!(local.len(), 1);
        // No other partition's index range holds it.
        for p in map.parts.iter().filter(|p| p.id != owner.id) {
            let other = handles.read(sid, p).unwrap();
            assert_eq!(
                other
                    .scan_local(&prefix, Unbounded, Unbounded, false)
                    .count(),
                0
            );
        }

        let mut gone = WriteBatch::default();
        gone.put(Space::Data, data_key(99, token, b"x"), b"row".to_vec());
        replay_part(&maps, &handles, gone).unwrap();
        let all = store.scan(Space::Data, Unbounded, Unbounded, false).count();
        assert_eq!(
            all, 2,
            "the row and its entry; nothing of the dropped table"
        );
    }
}
