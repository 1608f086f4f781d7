//! One physical partition's share of a range read (`read.rs::read_ranges`: token ranges, whole
//! tables), read so that each logical partition in it is one state of the store: Cassandra
//! isolates a write to one partition, and a page of a token-range scan (cqlsh COPY, Spark)
//! shows each partition's rows as of one moment.
//!
//! The embedded store's scan reads one snapshot; a page resumed inside a partition reads that
//! partition's header from the same snapshot (a cheap one) instead of apart from its rows.
//!
//! On PostgreSQL (`scans_read_in_parts`) every statement reads a state of its own. The share
//! is read in statements of `get_and_scans` with no key, each sized to what the page still
//! wants (and bounded in bytes), the first one with the header of the partition the page
//! resumes inside. Where one statement ends and the next begins between two partitions,
//! nothing is split; where the next begins inside the partition the last one ended in, a write
//! of it could have come between them, and the query runs again from snapshots
//! (`Output::snapshot_reads`: each share read in one REPEATABLE READ transaction), as a
//! partition read that needs a second access does (`read.rs::scan_partition`): only when a
//! page holds more than one statement reads (1 MiB). A table without clustering columns keeps
//! each partition in one key, which any statement reads whole: its shares are read as plain
//! scans, without the byte-bounded statement's cost (about 0.5 us a row in PostgreSQL,
//! `storage/postgres/scan.rs`).

use super::read::as_ref;
use super::{row, Result};
use crate::storage::{Entry, PartitionHandle, PartitionSnapshot, ScanIter, StorageError};
use bytes::Bytes;
use std::ops::Bound;
use std::sync::Arc;

/// What a share yields next.
pub(super) enum Step {
    Entry(Entry),
    Done,
    /// A statement boundary fell inside a partition: run the query again from snapshots.
    RunAgain,
}

pub(super) struct RangeShare<'a> {
    handle: &'a dyn PartitionHandle,
    snapshot: Option<Arc<dyn PartitionSnapshot>>,
    /// Read in statements of `get_and_scans` (PostgreSQL outside a snapshot).
    together: bool,
    upper: Bound<Vec<u8>>,
    iter: ScanIter,
    /// The last key read, where a next statement goes on (kept when `together` only).
    last: Option<Bytes>,
    /// After a statement ended: the partition prefix of its last key, which the next
    /// statement's first key must not continue.
    split: Option<Vec<u8>>,
    /// The header a resumed page asked for, read with the first statement: (key, value).
    header: Option<(Vec<u8>, Option<Bytes>)>,
}

impl<'a> RangeShare<'a> {
    /// The share `(lower, upper)` of `handle`'s partition; `one_key`: each partition of the
    /// table is one key (no clustering columns); `resumed_header`: the header key of the
    /// partition the page resumes inside, when it lies in this share; `wanted`: the entries
    /// the page still wants.
    pub(super) fn open(
        handle: &'a dyn PartitionHandle,
        (snapshot_reads, one_key): (bool, bool),
        (lower, upper): (Bound<Vec<u8>>, Bound<Vec<u8>>),
        resumed_header: Option<Vec<u8>>,
        wanted: usize,
    ) -> Result<RangeShare<'a>> {
        let in_parts = handle.scans_read_in_parts() && !one_key;
        let snapshot = match in_parts {
            true => snapshot_reads,
            false => resumed_header.is_some() && handle.cheap_snapshots(),
        };
        let snapshot = snapshot.then(|| handle.snapshot());
        let together = in_parts && snapshot.is_none();
        let (lo, hi) = (as_ref(&lower), as_ref(&upper));
        let (iter, header) = match &snapshot {
            _ if together => {
                let (value, iter) =
                    read_together(handle, resumed_header.as_deref(), (lo, hi), wanted)?;
                (iter, resumed_header.map(|k| (k, value)))
            }
            Some(s) => (s.scan(lo, hi, false), None),
            None => (handle.scan(lo, hi, false), None),
        };
        Ok(RangeShare {
            handle,
            snapshot,
            together,
            upper,
            iter,
            last: None,
            split: None,
            header,
        })
    }

    /// The next entry; `wanted`: the entries the page still wants (asked when a statement
    /// ended and another is to be read).
    pub(super) fn next(&mut self, wanted: impl Fn() -> usize) -> Result<Step> {
        loop {
            let (k, v) = match self.iter.next() {
                None => return Ok(Step::Done),
                Some(Err(StorageError::ReadAgain)) => {
                    // Never before an entry: a statement reads at least one.
                    let Some(last) = self.last.take() else {
                        return Ok(Step::RunAgain);
                    };
                    let prefix_len = row::decode_key(&last, &[])?.prefix_len;
                    self.split = Some(last[..prefix_len].to_vec());
                    let bounds = (Bound::Excluded(&last[..]), as_ref(&self.upper));
                    self.iter = read_together(self.handle, None, bounds, wanted())?.1;
                    continue;
                }
                Some(item) => item?,
            };
            if let Some(prefix) = self.split.take() {
                if k.starts_with(&prefix) {
                    return Ok(Step::RunAgain);
                }
            }
            if self.together {
                self.last = Some(k.clone());
            }
            return Ok(Step::Entry((k, v)));
        }
    }

    /// The header stored under `key`, for a page resumed inside its partition: the one read
    /// with the first statement, else one read from the share's snapshot or the store.
    pub(super) fn header(&mut self, key: &[u8]) -> Result<Option<Bytes>> {
        if let Some((_, value)) = self.header.take_if(|(k, _)| k[..] == *key) {
            return Ok(value);
        }
        let value = match &self.snapshot {
            Some(s) => s.get(key)?,
            None => self.handle.get(key)?,
        };
        Ok(value)
    }
}

/// One statement of `get_and_scans`: `key`'s value (if asked) and the scan of `bounds`.
fn read_together(
    handle: &dyn PartitionHandle,
    key: Option<&[u8]>,
    bounds: (Bound<&[u8]>, Bound<&[u8]>),
    wanted: usize,
) -> Result<(Option<Bytes>, ScanIter)> {
    let Some(read) = handle.get_and_scans(key, &[bounds], false, wanted) else {
        // A backend without the one access: two, as before it.
        let value = key.map(|k| handle.get(k)).transpose()?.flatten();
        return Ok((value, handle.scan(bounds.0, bounds.1, false)));
    };
    let (value, mut scans) = read?;
    Ok((value, scans.pop().expect("a scan per slice")))
}
