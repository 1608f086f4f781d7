//! Dropping data: deleting the data of dropped or truncated tables (and dropped indexes) in
//! the background, through `PartitionStore::drop_data`, with a marker so a restart finishes
//! the job. ("Drop data" is this only; "purge" is the compaction filter's work after
//! gc_grace_seconds and "sweep" the sweeper's, both in `query/purge.rs`.)
//!
//! The marker is `meta` `purge/[storage id u64 BE]`: the key keeps the name earlier versions
//! wrote, so their unfinished deletions resume.

use super::*;

/// The storage ids holding a table's data: its rows and its index entries.
pub(super) fn table_storage_ids(t: &TableDef) -> Vec<u64> {
    std::iter::once(t.storage_id)
        .chain(t.indexes.iter().map(|i| i.storage_id))
        .collect()
}

const MARKER_PREFIX: &[u8] = b"purge/";

pub(super) fn drop_data_key(storage_id: u64) -> Vec<u8> {
    let mut k = MARKER_PREFIX.to_vec();
    k.extend_from_slice(&storage_id.to_be_bytes());
    k
}

pub(super) fn drop_data_marker(storage_id: u64, batch: &mut WriteBatch) {
    batch.put(Space::Meta, drop_data_key(storage_id), Vec::new());
}

/// Deletes the data of a dropped or truncated table in the background, in bounded batches;
/// the marker makes a restart finish the job.
pub fn spawn_drop_data(engine: &Engine, storage_id: u64) {
    let store = Arc::clone(&engine.store);
    std::thread::spawn(move || {
        if let Err(e) = drop_data(&*store, storage_id) {
            tracing::warn!(storage_id, error = %e, "deleting dropped table data failed; will retry at restart");
        }
    });
}

fn drop_data(store: &dyn crate::storage::Store, storage_id: u64) -> crate::storage::Result<()> {
    let parts = store.partitions().ok_or_else(|| {
        crate::storage::StorageError::Io("the store offers no per-partition handles".into())
    })?;
    parts.drop_data(storage_id)?;
    crate::query::changefeed::keys::drop_data(parts, storage_id)?;
    drop_index_built(store, storage_id)?;
    let marker = drop_data_key(storage_id).into();
    store.metadata().meta_commit(vec![(marker, None)])
}

/// Deletes the cluster's per-partition build records of a dropped index
/// (`query::index_cluster`; none for a table's own storage id).
fn drop_index_built(
    store: &dyn crate::storage::Store,
    storage_id: u64,
) -> crate::storage::Result<()> {
    let prefix = crate::query::index_cluster::built_prefix(storage_id);
    let end = crate::storage::prefix_successor(&prefix).expect("successor");
    let keys: Vec<_> = store
        .metadata()
        .meta_scan(
            std::ops::Bound::Included(&prefix[..]),
            std::ops::Bound::Excluded(&end[..]),
        )
        .map(|r| r.map(|(k, _)| (k, None)))
        .collect::<crate::storage::Result<_>>()?;
    if keys.is_empty() {
        return Ok(());
    }
    store.metadata().meta_commit(keys)
}

/// Finishes data deletions interrupted by a restart.
pub fn resume_drop_data(engine: &Engine) -> Result<()> {
    let prefix = MARKER_PREFIX;
    let end = crate::storage::prefix_successor(prefix).expect("successor");
    let ids: Vec<u64> = engine
        .store
        .metadata()
        .meta_scan(
            std::ops::Bound::Included(prefix),
            std::ops::Bound::Excluded(&end[..]),
        )
        .filter_map(|r| r.ok())
        .filter_map(|(k, _)| {
            k.get(prefix.len()..)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
        })
        .collect();
    for id in ids {
        spawn_drop_data(engine, id);
    }
    Ok(())
}
