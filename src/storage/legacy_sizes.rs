//! An on-disk upgrade of the embedded store: data directories written before the sizes space
//! kept the logical partitions' size records in `meta` under `lsize/` followed by the same key.
//! [`move_records`] moves them to the sizes space when the store opens, before anything reads
//! them (a storage-format upgrade: the layers above see only `Space::Sizes` through partition
//! handles).

use super::{Result, Space, Store, WriteBatch};
use std::ops::Bound;

/// The prefix of the records in `meta` (before the size record's own key).
pub(super) const LEGACY_PREFIX: &[u8] = b"lsize/";

/// Moves the records to `Space::Sizes`. Each batch of 1,000 records inserts the new keys and
/// deletes the old ones atomically, so a crash at any point leaves every record in exactly one
/// place and the next open finishes the move; once none is left this is one empty scan.
/// Returns how many records moved.
pub(super) fn move_records(store: &dyn Store) -> Result<usize> {
    const BATCH_RECORDS: usize = 1000;
    let hi = super::prefix_successor(LEGACY_PREFIX).expect("prefix has no 0xff");
    let mut moved = 0;
    loop {
        let mut batch = WriteBatch::default();
        let legacy = store.scan(
            Space::Meta,
            Bound::Included(LEGACY_PREFIX),
            Bound::Excluded(&hi[..]),
            false,
        );
        for item in legacy.take(BATCH_RECORDS) {
            let (k, v) = item?;
            batch.put(Space::Sizes, k.slice(LEGACY_PREFIX.len()..), v);
            batch.delete(Space::Meta, k);
        }
        let n = batch.ops.len() / 2;
        if n > 0 {
            store.commit(batch)?;
        }
        moved += n;
        if n < BATCH_RECORDS {
            return Ok(moved);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{EmbeddedStore, SyncMode};

    /// Legacy `lsize/` records move to the sizes space, also when an earlier start moved part
    /// of them before it died (the state a crash between batches leaves).
    #[test]
    fn legacy_records_move_once_and_resume() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path(), SyncMode::None).unwrap();
        const RECORDS: u64 = 2500;
        let key = |t: u64| [&9u64.to_be_bytes()[..], &t.to_be_bytes(), b"pk"].concat();
        let mut batch = WriteBatch::default();
        for t in 0..RECORDS {
            let v = (t + 1).to_be_bytes().to_vec();
            if t < 700 {
                // Already moved by the interrupted start.
                batch.put(Space::Sizes, key(t), v);
            } else {
                batch.put(Space::Meta, [LEGACY_PREFIX, &key(t)].concat(), v);
            }
        }
        batch.put(Space::Meta, &b"pmap-next-id"[..], &b"x"[..]);
        store.commit(batch).unwrap();

        assert_eq!(move_records(&store).unwrap(), 1800);
        assert_eq!(move_records(&store).unwrap(), 0);
        let all = Bound::Unbounded;
        let records: Vec<_> = store
            .scan(Space::Sizes, all, all, false)
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(records.len(), RECORDS as usize);
        for (t, (k, v)) in records.iter().enumerate() {
            assert_eq!(
                (&k[..], &v[..]),
                (&key(t as u64)[..], &(t as u64 + 1).to_be_bytes()[..])
            );
        }
        // Other metadata stays.
        assert!(store.get(Space::Meta, b"pmap-next-id").unwrap().is_some());
    }
}
