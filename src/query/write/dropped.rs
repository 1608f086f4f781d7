//! Deleting the data of dropped or truncated tables in the background, in bounded batches,
//! with a marker so a restart finishes the job.

use super::*;

/// The storage ids holding a table's data: its rows and its index entries.
pub(super) fn table_storage_ids(t: &TableDef) -> Vec<u64> {
    std::iter::once(t.storage_id)
        .chain(t.indexes.iter().map(|i| i.storage_id))
        .collect()
}

pub(super) fn purge_key(storage_id: u64) -> Vec<u8> {
    let mut k = b"purge/".to_vec();
    k.extend_from_slice(&storage_id.to_be_bytes());
    k
}

pub(super) fn purge_marker(storage_id: u64, batch: &mut WriteBatch) {
    batch.put(Space::Meta, purge_key(storage_id), Vec::new());
}

/// Deletes the data of a dropped or truncated table in the background, in bounded batches;
/// the purge marker makes a restart finish the job.
pub fn spawn_purge(engine: &Engine, storage_id: u64) {
    let store = Arc::clone(&engine.store);
    std::thread::spawn(move || {
        if let Err(e) = purge(&*store, storage_id) {
            tracing::warn!(storage_id, error = %e, "purging table data failed; will retry at restart");
        }
    });
}

pub(super) fn purge(
    store: &dyn crate::storage::Store,
    storage_id: u64,
) -> crate::storage::Result<()> {
    let lo = storage_id.to_be_bytes();
    let hi = (storage_id + 1).to_be_bytes();
    crate::storage::delete_range(store, Space::Data, &lo, &hi)?;
    crate::partition::sizes::purge(store, storage_id)?;
    crate::query::changefeed::keys::purge(store, storage_id)?;
    let mut batch = WriteBatch::default();
    batch.delete(Space::Meta, purge_key(storage_id));
    store.commit(batch)
}

/// Finishes purges interrupted by a restart.
pub fn resume_purges(engine: &Engine) -> Result<()> {
    let prefix = b"purge/";
    let end = crate::storage::prefix_successor(prefix).expect("successor");
    let ids: Vec<u64> = engine
        .store
        .scan(
            Space::Meta,
            std::ops::Bound::Included(&prefix[..]),
            std::ops::Bound::Excluded(&end[..]),
            false,
        )
        .filter_map(|r| r.ok())
        .filter_map(|(k, _)| {
            k.get(prefix.len()..)
                .and_then(|b| b.try_into().ok())
                .map(u64::from_be_bytes)
        })
        .collect();
    for id in ids {
        spawn_purge(engine, id);
    }
    Ok(())
}
