//! Reading one page of a table's feed: its entries after the consumer's position, up to the
//! clock's safe bound, within the query's scope, each row read through its physical
//! partition's handle.
//!
//! Bounded: a page stops after `max_scanned` entries (in scope or not), so a page over a long
//! run of entries outside the scope is empty but moves the position on; the caller bounds rows
//! and bytes (its `emit` answers whether the page is full).

use super::keys;
use super::paging::FeedPosition;
use crate::format::keys::{decode_key, partition_prefix, KIND_HEADER};
use crate::query::{Engine, Result};
use crate::storage::{Space, StorageError};
use crate::tokens::Token;
use bytes::Bytes;
use std::ops::Bound;

/// Which rows a feed query reads: token ranges (lo exclusive, hi inclusive) and, when not
/// empty, only these partition keys.
pub struct Scope {
    pub ranges: Vec<(i128, i128)>,
    pub keys: Vec<Bytes>,
}

impl Scope {
    fn holds(&self, token: Token, pk: &[u8]) -> bool {
        let t = token as i128;
        self.ranges.iter().any(|&(lo, hi)| t > lo && t <= hi)
            && (self.keys.is_empty() || self.keys.iter().any(|k| &k[..] == pk))
    }
}

/// One feed entry in scope, with what is stored now.
pub struct Found<'a> {
    pub token: Token,
    /// The data key of the row (or partition header) the entry is for.
    pub key: &'a [u8],
    pub pk: &'a [u8],
    pub kind: u8,
    /// The row's current value (None: gone, purged).
    pub value: Option<Bytes>,
    /// Its partition's header (for a header entry, the same as `value`).
    pub header: Option<Bytes>,
}

/// How a page ended.
pub struct PageEnd {
    /// Where the next page starts.
    pub position: FeedPosition,
    /// Entries in scope read per physical partition: (id, start, end, entries).
    pub partitions: Vec<(u64, Token, Token, u64)>,
    pub scanned: usize,
    /// The page read every entry up to the safe bound (it stopped for neither rows nor the cap).
    pub caught_up: bool,
}

/// Reads entries after `pos` up to sequence `safe`, calling `emit` for each in scope until it
/// answers true (page full) or `max_scanned` entries were read.
pub fn read_page(
    engine: &Engine,
    storage_id: u64,
    scope: &Scope,
    pos: FeedPosition,
    safe: u64,
    max_scanned: usize,
    emit: &mut dyn FnMut(&Found) -> Result<bool>,
) -> Result<PageEnd> {
    let prefix = keys::feed_prefix(storage_id);
    let from = [&prefix[..], &pos.after].concat();
    let to = [&prefix[..], &safe.saturating_add(1).to_be_bytes()[..]].concat();
    let mut end = PageEnd {
        position: pos,
        partitions: Vec::new(),
        scanned: 0,
        caught_up: true,
    };
    if from >= to {
        return Ok(end);
    }
    let lower = match end.position.inclusive {
        true => Bound::Included(&from[..]),
        false => Bound::Excluded(&from[..]),
    };
    let map = engine.maps.get(storage_id);
    for entry in engine
        .store
        .scan(Space::Data, lower, Bound::Excluded(&to[..]), false)
    {
        if end.scanned >= max_scanned {
            end.caught_up = false;
            break;
        }
        let (k, _) = entry?;
        end.scanned += 1;
        end.position.after = k[prefix.len()..].to_vec();
        end.position.inclusive = false;
        if visit(
            engine,
            map.as_deref(),
            storage_id,
            scope,
            &k[prefix.len()..],
            &mut end,
            emit,
        )? {
            end.caught_up = false;
            break;
        }
    }
    Ok(end)
}

/// One feed entry (`suffix`: `[seq][tail]`): emitted when in scope and still the row's latest;
/// true when `emit` says the page is full.
fn visit(
    engine: &Engine,
    map: Option<&crate::partition::map::PartitionMap>,
    storage_id: u64,
    scope: &Scope,
    suffix: &[u8],
    end: &mut PageEnd,
    emit: &mut dyn FnMut(&Found) -> Result<bool>,
) -> Result<bool> {
    let Some((seq, tail)) = keys::split_entry(suffix) else {
        return Ok(false);
    };
    let key = [&storage_id.to_be_bytes()[..], tail].concat();
    let Ok(dk) = decode_key(&key, &[]) else {
        return Ok(false);
    };
    if !scope.holds(dk.token, &dk.pk) {
        return Ok(false);
    }
    let (value, header) = read_row(engine, map, storage_id, &key, &dk, end)?;
    // Read after the row: if the row's latest entry is still this one, the row read is this
    // entry's version (row and reverse record change in one commit, and a reader never sees
    // its row write before its reverse record: `PartitionCommit::local`). If not, the row
    // changed since the scan began and its newer entry returns it.
    let reverse = (engine.store).get(Space::Data, &keys::reverse_key(storage_id, tail))?;
    if reverse.as_deref() != Some(&seq.to_be_bytes()[..]) {
        return Ok(false);
    }
    emit(&Found {
        token: dk.token,
        key: &key,
        pk: &dk.pk,
        kind: dk.kind,
        value,
        header,
    })
}

/// The row's value and its partition header, read through the partition's handle (the store
/// when it offers none), counted per physical partition.
fn read_row(
    engine: &Engine,
    map: Option<&crate::partition::map::PartitionMap>,
    storage_id: u64,
    key: &[u8],
    dk: &crate::format::keys::DecodedKey,
    end: &mut PageEnd,
) -> Result<(Option<Bytes>, Option<Bytes>)> {
    let mut header_key = partition_prefix(storage_id, dk.token, &dk.pk);
    header_key.push(KIND_HEADER);
    let handle = match map {
        Some(map) => {
            let p = map.route(dk.token);
            match end.partitions.iter_mut().find(|x| x.0 == p.id) {
                Some(x) => x.3 += 1,
                None => end.partitions.push((p.id, p.start, p.end, 1)),
            }
            // A partition retired by a split since `map` was read: its keys are still where
            // they were, so the store reads them.
            engine.handles.get(storage_id, p).ok().flatten()
        }
        None => None,
    };
    let get = |k: &[u8]| -> std::result::Result<Option<Bytes>, StorageError> {
        match &handle {
            Some(h) => h.get(k),
            None => engine.store.get(Space::Data, k),
        }
    };
    let value = get(key)?;
    let header = if dk.kind == KIND_HEADER {
        value.clone()
    } else {
        get(&header_key)?
    };
    Ok((value, header))
}
