//! The read of a write's read-merge-write: the stored row a mutation merges with, and the stamp
//! of that read for its `Unchanged` condition (`storage::write_stamps`).
//!
//! A row of a logical partition that has no size record is not read at all: a size record
//! exists for every logical partition with any stored key (header or row), kept in the same
//! atomic commit as its data, and the physical partition's memo (`partition::size_memo`), once
//! complete, holds every record. For a write of a new partition key, which a point-write load
//! mostly is, that skips a memtable search and a filter probe of every disk table (about 6%
//! of a prepared point write in callgrind, more of its time: the search is cache misses).
//!
//! The memo's answer is exact only while no other writer of the partition key is between its
//! commit and its memo update (`sizes::Accounting::commit` updates the memo after it commits).
//! So the shortcut is taken only when this process's write lock stripes are held (every writer
//! of a row takes its partition key's stripe until its memo update is done) and the store is
//! this process's alone (no `shared_data`). The stamp is taken before the memo is asked, so a
//! write that begins on the key's stripe after it makes the commit read the key after all.

use super::*;
use crate::partition::derived_sizes::{self, SizeSource};
use crate::partition::size_memo;
use crate::storage::handle::ReadStamp;
use crate::storage::StorageError;

/// What a write read of its row.
pub(super) struct RowRead {
    /// The stored value (None: absent).
    pub(super) stored: Option<Bytes>,
    /// The stamp to commit its condition with.
    pub(super) stamp: Option<ReadStamp>,
    /// The size record of the row's logical partition, when the memo was asked (0: none):
    /// exact until the write commits, since the caller holds the partition's stripe; or,
    /// where records are derived from rows, what the row read says (its commit's condition
    /// holds the row as read).
    pub(super) recorded: Option<u64>,
}

/// The stored value of `m`'s row, the stamp to commit its condition with, and what the memo
/// said of its logical partition's size record.
pub(super) fn read_row(engine: &Engine, m: &Mutation, token: Token) -> Result<RowRead> {
    let sid = m.table.storage_id;
    let map = engine
        .maps
        .get(sid)
        .ok_or_else(|| StorageError::Corrupt(format!("no partition map for table {sid}")))?;
    let p = map.route(token);
    let handle = engine.handles.read(sid, p)?;
    let mut recorded = None;
    if engine.takes_write_locks() && engine.store.shared_data().is_none() {
        if let Some(stamp) = handle.stamp(&m.key) {
            recorded = p.stats.memo.get(&size_memo::key(token, &m.pk));
            if recorded == Some(0) {
                return Ok(RowRead {
                    stored: None,
                    stamp: Some(stamp),
                    recorded,
                });
            }
        }
    }
    if recorded.is_none() && p.sizes == SizeSource::Rows {
        // The row is most of its partition's derived record (`derived_sizes.rs`): exact at
        // the commit, whose condition holds the row unchanged (no write of such a table puts
        // a header).
        if let Some((stored, stamp, size)) = derived_sizes::read_with_size(&**handle, &m.key)? {
            return Ok(RowRead {
                stored,
                stamp,
                recorded: Some(size),
            });
        }
    }
    let (stored, stamp) = handle.get_stamped(&m.key)?;
    Ok(RowRead {
        stored,
        stamp,
        recorded,
    })
}
