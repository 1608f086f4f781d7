//! Key formats of the change feed (see the module doc of `changefeed`).
//!
//! Both kinds start with 0xFF, a byte no table or index storage id starts with (they are
//! counters from 1), so they never mix with data keys, and the compaction purge filter, which
//! looks tables up by the first 8 key bytes, leaves them alone.

use crate::storage::PartitionStore;

const FEED: [u8; 2] = [0xFF, 0x01];
const REVERSE: [u8; 2] = [0xFF, 0x02];

/// The prefix of all feed entries of table `storage_id`.
pub fn feed_prefix(storage_id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(18);
    k.extend_from_slice(&FEED);
    k.extend_from_slice(&storage_id.to_be_bytes());
    k
}

/// `[feed prefix][seq][tail]`.
pub fn feed_key(storage_id: u64, seq: u64, tail: &[u8]) -> Vec<u8> {
    let mut k = feed_prefix(storage_id);
    k.reserve(8 + tail.len());
    k.extend_from_slice(&seq.to_be_bytes());
    k.extend_from_slice(tail);
    k
}

/// The reverse record of a row (`tail`: its data key without the storage id).
pub fn reverse_key(storage_id: u64, tail: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(10 + tail.len());
    k.extend_from_slice(&REVERSE);
    k.extend_from_slice(&storage_id.to_be_bytes());
    k.extend_from_slice(tail);
    k
}

/// A feed entry's key without its prefix: `[seq][tail]` split, None when too short.
pub fn split_entry(suffix: &[u8]) -> Option<(u64, &[u8])> {
    let seq = u64::from_be_bytes(suffix.get(..8)?.try_into().ok()?);
    Some((seq, &suffix[8..]))
}

/// Deletes the feed entries and reverse records of a dropped or truncated table.
pub fn drop_data(parts: &dyn PartitionStore, storage_id: u64) -> crate::storage::Result<()> {
    for tag in [FEED, REVERSE] {
        let mut prefix = tag.to_vec();
        prefix.extend_from_slice(&storage_id.to_be_bytes());
        parts.drop_prefix(&prefix)?;
    }
    Ok(())
}
