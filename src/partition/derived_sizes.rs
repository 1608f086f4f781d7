//! Size records derived from rows: where a physical partition's logical partition sizes come
//! from when its table has no clustering columns ([`SizeSource::Rows`]).
//!
//! A table without clustering columns (and so without static columns) stores at most one row
//! per logical partition, under `[storage id][token][escaped key][0x02]`; a header (`0x01`) only
//! if some older write put one there. The partition's size, the sum over its stored keys of key
//! length + value length, can then be read from those keys themselves, and a separate size
//! record (`Space::Sizes`, `sizes.rs`) would be a second memtable insert on every write (a
//! skiplist search of its own, mostly cache misses), a second memtable to flush and compact:
//! without it a prepared point write at 4 x 32 in `scripts/bench` costs the server 20-24 us of
//! CPU instead of 31-33 (two alternating runs each). So such partitions keep none: the
//! write path checks limits and updates the counters and the memo exactly as before, and only
//! leaves the record out of the batch (`Accounting::prepare`); whoever reads records
//! (`sizes::scan_range_after`, `sizes::recorded_at`: startup counts, splits, takeovers, the
//! sweeper's recounts, `system_views`, the dashboard) reads them from here.
//!
//! The choice is per partition, persisted with its map (`map.rs`), inherited by split children
//! and moved partitions: tables created before this existed keep their records (a map without
//! the field reads as `Records`), so no data directory needs a migration.
//!
//! Order: a size record's key `[storage id][token][key bytes]` sorts as the data keys of its
//! partition do (the escape keeps the order of the key bytes, its terminator `0x00 0x01` sorting
//! below any continuation), so a scan of derived records yields them in record order, and a
//! caller resuming after a record key resumes after every data key of that partition.

use super::sizes::SizeRecord;
use crate::format::keys::{decode_key, partition_prefix, prefix_successor_or_empty};
use crate::format::keys::{KIND_HEADER, KIND_ROW};
use crate::storage::handle::ReadStamp;
use crate::storage::{PartitionHandle, ScanIter, StorageError};
use crate::tokens::Token;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::ops::Bound;

/// Where a physical partition's size records come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SizeSource {
    /// Records in `Space::Sizes`, written with every change (tables with clustering columns,
    /// and every table created before derived records).
    #[default]
    Records,
    /// Derived from the partition's data keys (see the module doc).
    Rows,
}

impl SizeSource {
    /// What a new table's partitions use.
    pub fn for_new_table(table: &crate::schema::TableDef) -> SizeSource {
        match table.clustering.is_empty() {
            true => SizeSource::Rows,
            false => SizeSource::Records,
        }
    }

    pub fn is_records(&self) -> bool {
        *self == SizeSource::Records
    }
}

/// The records of the data keys in `(lower, upper)`, one per logical partition, in order.
/// The bounds are size-record bounds: an included `[storage id]` or `[storage id][token]`
/// prefix, or an excluded whole record key, which excludes every data key of its partition.
pub fn scan(
    handle: &dyn PartitionHandle,
    lower: Bound<&[u8]>,
    upper: Bound<&[u8]>,
) -> impl Iterator<Item = Result<SizeRecord, StorageError>> {
    let after;
    let lower = match lower {
        // After a record: after every data key of its partition.
        Bound::Excluded(k) if k.len() >= 16 => {
            let token = token_of(k);
            let prefix = partition_prefix(storage_id_of(k), token, &k[16..]);
            after = prefix_successor_or_empty(prefix);
            match &after {
                Some(a) => Bound::Included(&a[..]),
                None => Bound::Excluded(k),
            }
        }
        b => b,
    };
    Grouped {
        keys: handle.scan(lower, upper, false),
        pending: None,
    }
}

/// The derived size of one logical partition (0: it stores nothing): its row and its header,
/// by two point reads where the backend prefers them (`with_row`; they consult bloom filters,
/// a range scan seeks into every disk table), else by one scan of its keys.
pub fn lookup(
    handle: &dyn PartitionHandle,
    storage_id: u64,
    token: Token,
    pk: &[u8],
) -> Result<u64, StorageError> {
    let prefix = partition_prefix(storage_id, token, pk);
    if handle.prefers_point_reads() {
        let mut row_key = prefix.clone();
        row_key.push(KIND_ROW);
        let row = handle.get(&row_key)?;
        // Always a plain row key (built from the prefix); were it not, the scan below answers.
        if let Some(bytes) = with_row(handle, &row_key, row.as_deref())? {
            return Ok(bytes);
        }
    }
    let end = prefix_successor_or_empty(prefix.clone());
    let upper = match &end {
        Some(e) => Bound::Excluded(&e[..]),
        None => Bound::Unbounded,
    };
    let mut bytes = 0u64;
    for item in handle.scan(Bound::Included(&prefix[..]), upper, false) {
        let (k, v) = item?;
        bytes += (k.len() + v.len()) as u64;
    }
    Ok(bytes)
}

/// The derived size of the logical partition of `row_key`, a write just read as `stored`
/// (None: absent): the row's bytes plus its header's, read now; None when `row_key` is not a
/// row without clustering values (the caller looks the size up).
pub fn with_row(
    handle: &dyn PartitionHandle,
    row_key: &[u8],
    stored: Option<&[u8]>,
) -> Result<Option<u64>, StorageError> {
    let Some(header_key) = header_of_plain_row(row_key) else {
        return Ok(None);
    };
    let header = handle.get(&header_key)?;
    Ok(Some(size_of(
        row_key,
        stored,
        &header_key,
        header.as_deref(),
    )))
}

/// A row as a write read it: its stored value (None: absent), the stamp of the read, and its
/// logical partition's derived size.
pub type RowWithSize = (Option<Bytes>, Option<ReadStamp>, u64);

/// A write's read of `row_key` (a row without clustering values, else None: the caller reads
/// it alone): its stored value, the stamp to commit its condition with, and the derived size
/// of its logical partition (as [`with_row`]). Where the backend reads several keys in one
/// access (`get_together`: PostgreSQL, a statement less per write) the row and its header are
/// read together, without a stamp (such a backend gives none; the commit then compares by
/// reading the row again); else the row with a stamp, then its header.
pub fn read_with_size(
    handle: &dyn PartitionHandle,
    row_key: &[u8],
) -> Result<Option<RowWithSize>, StorageError> {
    let Some(header_key) = header_of_plain_row(row_key) else {
        return Ok(None);
    };
    let keys = [row_key.to_vec(), header_key];
    let (row, stamp, header) = match handle.get_together(&keys) {
        Some(read) => {
            let [row, header]: [Option<Bytes>; 2] = (read?.try_into())
                .map_err(|_| StorageError::Corrupt("two keys read, not two values".into()))?;
            (row, None, header)
        }
        None => {
            let (row, stamp) = handle.get_stamped(row_key)?;
            (row, stamp, handle.get(&keys[1])?)
        }
    };
    let size = size_of(row_key, row.as_deref(), &keys[1], header.as_deref());
    Ok(Some((row, stamp, size)))
}

/// The header key of the logical partition of `row_key`, when it is a row without clustering
/// values.
fn header_of_plain_row(row_key: &[u8]) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    crate::format::keys::plain_row_key(row_key, &mut buf)?;
    let mut header_key = row_key.to_vec();
    *header_key.last_mut().expect("a row key") = KIND_HEADER;
    Some(header_key)
}

/// A logical partition's derived size from its row and its header as stored (None: absent).
fn size_of(row_key: &[u8], row: Option<&[u8]>, header_key: &[u8], header: Option<&[u8]>) -> u64 {
    let header = header.map_or(0, |v| header_key.len() + v.len());
    let row = row.map_or(0, |v| row_key.len() + v.len());
    (header + row) as u64
}

fn storage_id_of(k: &[u8]) -> u64 {
    u64::from_be_bytes(k[..8].try_into().expect("8 bytes"))
}

fn token_of(k: &[u8]) -> Token {
    crate::format::keys::key_token(k).expect("8 bytes")
}

/// Data keys grouped by logical partition (a header and a row of one key are one record).
struct Grouped {
    keys: ScanIter,
    /// The record being summed, with its partition's key prefix (`partition_prefix`).
    pending: Option<(SizeRecord, Vec<u8>)>,
}

impl Iterator for Grouped {
    type Item = Result<SizeRecord, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let Some(item) = self.keys.next() else {
                return self.pending.take().map(|(r, _)| Ok(r));
            };
            let (k, v) = match item {
                Ok(kv) => kv,
                Err(e) => return Some(Err(e)),
            };
            let bytes = (k.len() + v.len()) as i64;
            if let Some((r, prefix)) = &mut self.pending {
                if k.starts_with(prefix) && k.len() == prefix.len() + 1 {
                    r.bytes += bytes;
                    continue;
                }
            }
            // A key that does not decode is left out, as an undecodable record is.
            let Ok(d) = decode_key(&k, &[]) else { continue };
            let record = SizeRecord {
                storage_id: storage_id_of(&k),
                token: d.token,
                pk: d.pk.to_vec(),
                bytes,
            };
            let prefix = k[..d.prefix_len].to_vec();
            if let Some((done, _)) = self.pending.replace((record, prefix)) {
                return Some(Ok(done));
            }
        }
    }
}
