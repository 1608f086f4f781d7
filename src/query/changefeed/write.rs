//! Adding a row write's feed records to its batch: the new entry, the reverse record, and the
//! deletion of the row's previous entry (the feed keeps the latest version of each row).
//!
//! The caller adds them right after the row's own write, so `write::by_partition` gives them
//! the row's token: they commit as local records in the row's partition commit.

use super::keys;
use crate::storage::{Space, Store, WriteBatch};

/// Whether writes to `table` record the change feed: Cassandra's change data capture option,
/// `WITH cdc = true`, or every user table with the setting `changefeed.all_tables` (off by
/// default: the feed costs point writes ~20% of their throughput, measured with
/// scripts/bench's write phase; Cosmos DB applications that read the feed of tables created
/// without `cdc` turn it on).
pub fn records(engine: &crate::query::Engine, table: &crate::schema::TableDef) -> bool {
    table.options.cdc
        || (engine.limits.changefeed_all_tables && !table.keyspace.starts_with("system"))
}

/// Records that data key `row_key` of table `storage_id` was written by the write with
/// sequence `seq`. Reads the row's reverse record (under the row's lock stripe, and the row's
/// own `Unchanged` condition covers it: both change only together).
pub fn record(
    store: &dyn Store,
    storage_id: u64,
    row_key: &[u8],
    seq: u64,
    batch: &mut WriteBatch,
) -> crate::storage::Result<()> {
    let tail = &row_key[8..];
    let reverse = keys::reverse_key(storage_id, tail);
    if let Some(old) = store.get(Space::Data, &reverse)? {
        if let Ok(b) = <[u8; 8]>::try_from(&old[..]) {
            let old_seq = u64::from_be_bytes(b);
            if old_seq == seq {
                // The same write already recorded it (several mutations of one key).
                return Ok(());
            }
            batch.delete(Space::Data, keys::feed_key(storage_id, old_seq, tail));
        }
    }
    batch.put(
        Space::Data,
        keys::feed_key(storage_id, seq, tail),
        Vec::new(),
    );
    batch.put(Space::Data, reverse, seq.to_be_bytes().to_vec());
    Ok(())
}

/// The sequence of a write of `muts` (None: none of their tables records a feed).
pub fn ticket(
    engine: &crate::query::Engine,
    muts: &[crate::query::write::Mutation],
) -> crate::storage::Result<Option<super::clock::Ticket>> {
    let mut sids: Vec<u64> = (muts.iter())
        .filter(|m| records(engine, &m.table))
        .map(|m| m.table.storage_id)
        .collect();
    sids.sort_unstable();
    sids.dedup();
    if sids.is_empty() {
        return Ok(None);
    }
    super::clock::ticket(&*engine.store, &sids).map(Some)
}
