//! Row values of tables: the row model (marker, cells, complex cells, range tombstones), its
//! last-write-wins merge, and the value encoding.
//!
//! Value: version byte 1, flags (0x01 row marker, 0x02 deletion, 0x04 marker expiry in
//! milliseconds), the marker (timestamp i64, ttl i32, expiry: i64 milliseconds since the epoch
//! with flag 0x04, else i32 seconds; 0 = never), the deletion (timestamp i64, local deletion
//! time i32 seconds), then a varint count of cells, each: varint column id, flags (0x01
//! tombstone, 0x02 expiring, 0x04 expiry in milliseconds), timestamp i64, [ttl i32, expiry i64
//! milliseconds (i32 seconds without 0x04)], and for live cells a varint length and the value
//! bytes (for tombstones: local deletion time i32 seconds). Cells are sorted by column id.
//! Writers always set 0x04; seconds expiries are read from rows of earlier versions.
//!
//! Version 2 (written only when the row has complex cells; version 1 rows stay readable and
//! are still written for rows without them) appends the complex cells of non-frozen
//! collections and UDTs: a varint count, each: varint column id, flags (0x01 collection
//! deletion), [deletion timestamp i64, local deletion time i32], a varint count of elements,
//! each: varint path length, path bytes, then the element exactly like a simple cell (flags,
//! timestamp, [ttl, expiry], value or local deletion time). Elements are sorted by path: for
//! lists an 8-byte order-preserving position id, for sets and maps the element/key's
//! order-preserving key (`value::encode_key`), for UDTs the field index (u16 BE).

use super::CorruptRow;
use bytes::{Buf, BufMut, Bytes};

pub(super) const VERSION: u8 = 1;
/// Rows with complex cells (see the module documentation).
const VERSION_COMPLEX: u8 = 2;
/// Row liveness info (the row marker written by INSERT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub timestamp_micros: i64,
    pub ttl_secs: i32,
    /// Milliseconds since the epoch at which it expires; 0 = never.
    pub expiry_ms: i64,
}

impl Marker {
    /// Cassandra's `LivenessInfo.supersedes`: the newer timestamp; on a tie an expiring marker
    /// beats one that never expires, and of two alike the later expiry. Expiries compare in
    /// milliseconds (Cassandra's are seconds), then the TTL: markers that differ in anything
    /// are ordered, so the merge does not depend on the order writes arrive in.
    fn supersedes(&self, other: &Marker) -> bool {
        if self.timestamp_micros != other.timestamp_micros {
            return self.timestamp_micros > other.timestamp_micros;
        }
        if (self.expiry_ms == 0) != (other.expiry_ms == 0) {
            return self.expiry_ms != 0;
        }
        (self.expiry_ms, self.ttl_secs) > (other.expiry_ms, other.ttl_secs)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub col: u32,
    pub timestamp_micros: i64,
    pub ttl_secs: i32,
    pub expiry_ms: i64,
    /// None: a tombstone (deleted at `ts`).
    pub value: Option<Bytes>,
    /// For tombstones: when it was written (seconds), for purging after gc_grace_seconds.
    pub deletion_secs: i32,
}

impl Cell {
    pub fn is_live(&self, now_ms: i64) -> bool {
        self.value.is_some() && (self.expiry_ms == 0 || self.expiry_ms > now_ms)
    }
}

/// The stored content of a row (or of a partition header).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowData {
    pub marker: Option<Marker>,
    /// (timestamp, local deletion time): everything at or below the timestamp is deleted.
    pub deletion: Option<(i64, i32)>,
    /// Sorted by column id.
    pub cells: Vec<Cell>,
    /// Range tombstones (partition headers only): clustering key ranges deleted at a timestamp.
    pub ranges: Vec<RangeTombstone>,
    /// Non-frozen collections and UDTs, sorted by column id.
    pub complex: Vec<ComplexCell>,
    /// Read-before-write operations of an update (never stored): applied to the current row
    /// by [`RowData::apply_pending`].
    pub pending: Vec<Pending>,
}

/// One element of a non-frozen collection or UDT (see the module documentation for paths).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elem {
    pub path: Bytes,
    pub timestamp_micros: i64,
    pub ttl_secs: i32,
    pub expiry_ms: i64,
    /// None: a tombstone.
    pub value: Option<Bytes>,
    pub deletion_secs: i32,
}

impl Elem {
    pub fn is_live(&self, now_ms: i64) -> bool {
        self.value.is_some() && (self.expiry_ms == 0 || self.expiry_ms > now_ms)
    }
}

/// The cells of one non-frozen collection or UDT column.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ComplexCell {
    pub col: u32,
    /// (timestamp, local deletion time): elements at or below the timestamp are deleted.
    pub deletion: Option<(i64, i32)>,
    /// Sorted by path.
    pub elems: Vec<Elem>,
}

/// A deletion (timestamp, local deletion time) that supersedes `cur`, as Cassandra's
/// `DeletionTime.supersedes`: the newer timestamp, on a tie the later local deletion time.
fn deletion_supersedes(new: (i64, i32), cur: Option<(i64, i32)>) -> bool {
    cur.is_none_or(|cur| new > cur)
}

impl ComplexCell {
    fn merge(&mut self, update: ComplexCell) {
        if let Some(d) = update.deletion {
            if deletion_supersedes(d, self.deletion) {
                self.deletion = Some(d);
            }
        }
        if !update.elems.is_empty() {
            let old = std::mem::take(&mut self.elems);
            self.elems = merge_sorted(
                old,
                update.elems,
                |x, y| x.path.cmp(&y.path),
                |x, y| newer_wins(x.into(), y.into()),
            );
        }
        self.shadow(None);
    }

    /// Drops elements deleted by the collection deletion or by `other` (a row or partition
    /// deletion timestamp).
    pub fn shadow(&mut self, other: Option<i64>) {
        let dts = match (self.deletion.map(|d| d.0), other) {
            (Some(a), Some(b)) => a.max(b),
            (a, b) => match a.or(b) {
                Some(t) => t,
                None => return,
            },
        };
        self.elems.retain(|e| e.timestamp_micros > dts);
    }

    pub fn is_live(&self, now_ms: i64) -> bool {
        self.elems.iter().any(|e| e.is_live(now_ms))
    }

    /// The live elements.
    pub fn live(&self, now_ms: i64) -> impl Iterator<Item = &Elem> {
        self.elems.iter().filter(move |e| e.is_live(now_ms))
    }
}

/// A read-before-write operation on the current row (never stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    /// `c = c + delta` on a counter column.
    CounterAdd {
        col: u32,
        delta: i64,
        timestamp_micros: i64,
    },
    /// `l[index] = value` (None: `DELETE l[index]`).
    ListSet {
        col: u32,
        index: i64,
        value: Option<Bytes>,
        timestamp_micros: i64,
        ttl_secs: i32,
        expiry_ms: i64,
    },
    /// `l = l - [values]`.
    ListRemove {
        col: u32,
        values: Vec<Bytes>,
        timestamp_micros: i64,
    },
}

/// A deleted range of clustering keys: every row whose clustering key bytes (the part of the row
/// key after the kind byte) fall in `[lo, hi)` (`hi` None: to the end) loses what is written at or
/// below `ts`. Stored after the cells of a partition header (absent in older values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeTombstone {
    pub lo: Vec<u8>,
    pub hi: Option<Vec<u8>>,
    pub timestamp_micros: i64,
    /// When it was written (seconds), for purging after gc_grace_seconds.
    pub deletion_secs: i32,
}

impl RangeTombstone {
    pub fn covers(&self, clustering: &[u8]) -> bool {
        clustering >= &self.lo[..] && self.hi.as_ref().is_none_or(|h| clustering < &h[..])
    }
}

impl RowData {
    /// Live if its marker or any cell is live.
    pub fn is_live(&self, now_ms: i64) -> bool {
        self.marker
            .is_some_and(|m| m.expiry_ms == 0 || m.expiry_ms > now_ms)
            || self.cells.iter().any(|c| c.is_live(now_ms))
            || self.complex.iter().any(|c| c.is_live(now_ms))
    }

    pub fn complex_cell(&self, col: u32) -> Option<&ComplexCell> {
        self.complex
            .binary_search_by_key(&col, |c| c.col)
            .ok()
            .map(|i| &self.complex[i])
    }

    fn complex_mut(&mut self, col: u32) -> &mut ComplexCell {
        let i = match self.complex.binary_search_by_key(&col, |c| c.col) {
            Ok(i) => i,
            Err(i) => {
                self.complex.insert(
                    i,
                    ComplexCell {
                        col,
                        ..Default::default()
                    },
                );
                i
            }
        };
        &mut self.complex[i]
    }

    /// Applies read-before-write operations to this (current, merged) row. Errors are the
    /// client's (a list index out of bounds).
    pub fn apply_pending(&mut self, pending: Vec<Pending>, now_ms: i64) -> Result<(), String> {
        for p in pending {
            match p {
                Pending::CounterAdd {
                    col,
                    delta,
                    timestamp_micros: ts,
                } => {
                    let cur = self
                        .cell(col)
                        .filter(|c| c.is_live(now_ms))
                        .and_then(|c| c.value.as_deref())
                        .and_then(|v| <[u8; 8]>::try_from(v).ok())
                        .map_or(0, i64::from_be_bytes);
                    let old_ts = self.cell(col).map_or(i64::MIN, |c| c.timestamp_micros);
                    let cell = Cell {
                        col,
                        timestamp_micros: ts.max(old_ts.saturating_add(1)),
                        ttl_secs: 0,
                        expiry_ms: 0,
                        value: Some(Bytes::copy_from_slice(
                            &cur.wrapping_add(delta).to_be_bytes(),
                        )),
                        deletion_secs: 0,
                    };
                    match self.cells.binary_search_by_key(&col, |c| c.col) {
                        Ok(i) => self.cells[i] = cell,
                        Err(i) => self.cells.insert(i, cell),
                    }
                }
                Pending::ListSet {
                    col,
                    index,
                    value,
                    timestamp_micros: ts,
                    ttl_secs: ttl,
                    expiry_ms: expiry,
                } => {
                    let cc = self.complex_mut(col);
                    let size = cc.live(now_ms).count();
                    let Some(path) = usize::try_from(index)
                        .ok()
                        .and_then(|i| cc.live(now_ms).nth(i))
                        .map(|e| e.path.clone())
                    else {
                        return Err(format!(
                            "List index {index} out of bound, list has size {size}"
                        ));
                    };
                    let local_deletion = if value.is_none() { secs(now_ms) } else { 0 };
                    cc.merge(ComplexCell {
                        col,
                        deletion: None,
                        elems: vec![Elem {
                            path,
                            timestamp_micros: ts,
                            ttl_secs: if value.is_some() { ttl } else { 0 },
                            expiry_ms: if value.is_some() { expiry } else { 0 },
                            value,
                            deletion_secs: local_deletion,
                        }],
                    });
                }
                Pending::ListRemove {
                    col,
                    values,
                    timestamp_micros: ts,
                } => {
                    let Ok(i) = self.complex.binary_search_by_key(&col, |c| c.col) else {
                        continue;
                    };
                    let cc = &mut self.complex[i];
                    let doomed: Vec<Elem> = cc
                        .live(now_ms)
                        .filter(|e| {
                            e.value
                                .as_ref()
                                .is_some_and(|v| values.iter().any(|x| x == v))
                        })
                        .map(|e| Elem {
                            path: e.path.clone(),
                            timestamp_micros: ts,
                            ttl_secs: 0,
                            expiry_ms: 0,
                            value: None,
                            deletion_secs: secs(now_ms),
                        })
                        .collect();
                    cc.merge(ComplexCell {
                        col,
                        deletion: None,
                        elems: doomed,
                    });
                }
            }
        }
        self.complex
            .retain(|c| c.deletion.is_some() || !c.elems.is_empty());
        Ok(())
    }

    pub fn cell(&self, col: u32) -> Option<&Cell> {
        self.cells
            .binary_search_by_key(&col, |c| c.col)
            .ok()
            .map(|i| &self.cells[i])
    }

    /// Bytes this row's data occupies (for accounting).
    pub fn encoded_len(&self) -> usize {
        let mut n = 2 + 16 + 12 + 5;
        for c in &self.cells {
            n += 5 + 1 + 8 + 8 + 5 + c.value.as_ref().map_or(4, |v| v.len());
        }
        for c in &self.complex {
            n += 5 + 1 + 12 + 5;
            for e in &c.elems {
                n += 5 + e.path.len() + 1 + 8 + 8 + 5 + e.value.as_ref().map_or(4, |v| v.len());
            }
        }
        n
    }

    /// Merges a newer write into this row with last-write-wins per cell: the higher timestamp
    /// wins; on a tie Cassandra's reconcile rule decides (see [`newer_wins`]).
    pub fn merge(&mut self, update: RowData) {
        if let Some(d) = update.deletion {
            if deletion_supersedes(d, self.deletion) {
                self.deletion = Some(d);
            }
        }
        if let Some(m) = update.marker {
            if self.marker.is_none_or(|cur| m.supersedes(&cur)) {
                self.marker = Some(m);
            }
        }
        if !update.cells.is_empty() {
            let old = std::mem::take(&mut self.cells);
            self.cells = merge_sorted(
                old,
                update.cells,
                |x, y| x.col.cmp(&y.col),
                |x, y| newer_wins(x.into(), y.into()),
            );
        }
        for r in update.ranges {
            match self
                .ranges
                .iter_mut()
                .find(|x| x.lo == r.lo && x.hi == r.hi)
            {
                Some(x)
                    if !deletion_supersedes(
                        (r.timestamp_micros, r.deletion_secs),
                        Some((x.timestamp_micros, x.deletion_secs)),
                    ) => {}
                Some(x) => *x = r,
                None => self.ranges.push(r),
            }
        }
        for c in update.complex {
            match self.complex.binary_search_by_key(&c.col, |x| x.col) {
                Ok(i) => self.complex[i].merge(c),
                Err(i) => self.complex.insert(i, c),
            }
        }
        self.pending.extend(update.pending);
        self.apply_deletion();
    }

    /// Removes what a deletion at `dts` shadows (a partition deletion or a range tombstone).
    pub fn shadow_at(&mut self, dts: i64) {
        if self.marker.is_some_and(|m| m.timestamp_micros <= dts) {
            self.marker = None;
        }
        self.cells.retain(|c| c.timestamp_micros > dts);
        if self.deletion.is_some_and(|(ts, _)| ts <= dts) {
            self.deletion = None;
        }
        for c in &mut self.complex {
            c.shadow(Some(dts));
        }
    }

    /// The newest range tombstone timestamp covering a row's clustering key bytes.
    pub fn range_deletion(&self, clustering: &[u8]) -> Option<i64> {
        self.ranges
            .iter()
            .filter(|r| r.covers(clustering))
            .map(|r| r.timestamp_micros)
            .max()
    }

    /// Drops what the row deletion shadows.
    fn apply_deletion(&mut self) {
        if let Some((dts, _)) = self.deletion {
            if self.marker.is_some_and(|m| m.timestamp_micros <= dts) {
                self.marker = None;
            }
            self.cells.retain(|c| c.timestamp_micros > dts);
            for c in &mut self.complex {
                c.shadow(Some(dts));
                if c.deletion.is_some_and(|d| d.0 <= dts) {
                    c.deletion = None;
                }
            }
            self.complex
                .retain(|c| c.deletion.is_some() || !c.elems.is_empty());
        }
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(if self.complex.is_empty() {
            VERSION
        } else {
            VERSION_COMPLEX
        });
        let mut flags = 0;
        if self.marker.is_some() {
            flags |= ROW_MARKER | ROW_MARKER_MS;
        }
        if self.deletion.is_some() {
            flags |= ROW_DELETION;
        }
        out.push(flags);
        if let Some(m) = self.marker {
            out.put_i64(m.timestamp_micros);
            out.put_i32(m.ttl_secs);
            out.put_i64(m.expiry_ms);
        }
        if let Some((ts, ldt)) = self.deletion {
            out.put_i64(ts);
            out.put_i32(ldt);
        }
        put_varint(out, self.cells.len() as u64);
        for c in &self.cells {
            put_varint(out, c.col as u64);
            put_cell(
                out,
                c.timestamp_micros,
                c.ttl_secs,
                c.expiry_ms,
                c.value.as_deref(),
                c.deletion_secs,
            );
        }
        if !self.complex.is_empty() {
            put_varint(out, self.complex.len() as u64);
        }
        for c in &self.complex {
            put_varint(out, c.col as u64);
            out.push(u8::from(c.deletion.is_some()));
            if let Some((ts, ldt)) = c.deletion {
                out.put_i64(ts);
                out.put_i32(ldt);
            }
            put_varint(out, c.elems.len() as u64);
            for e in &c.elems {
                put_varint(out, e.path.len() as u64);
                out.extend_from_slice(&e.path);
                put_cell(
                    out,
                    e.timestamp_micros,
                    e.ttl_secs,
                    e.expiry_ms,
                    e.value.as_deref(),
                    e.deletion_secs,
                );
            }
        }
        if !self.ranges.is_empty() {
            put_varint(out, self.ranges.len() as u64);
            for r in &self.ranges {
                put_varint(out, r.lo.len() as u64);
                out.extend_from_slice(&r.lo);
                match &r.hi {
                    Some(h) => {
                        put_varint(out, h.len() as u64 + 1);
                        out.extend_from_slice(h);
                    }
                    None => put_varint(out, 0),
                }
                out.put_i64(r.timestamp_micros);
                out.put_i32(r.deletion_secs);
            }
        }
    }

    /// Decodes a stored row; values are slices of `buf` (no copies).
    pub fn decode(buf: &Bytes) -> Result<RowData, CorruptRow> {
        let mut row = RowData::default();
        Self::decode_into(buf, &mut row)?;
        Ok(row)
    }

    /// `decode` into `row`, replacing what it held but keeping its buffers (scans decode every
    /// row into one, instead of allocating its cell list per row).
    pub fn decode_into(buf: &Bytes, row: &mut RowData) -> Result<(), CorruptRow> {
        row.marker = None;
        row.deletion = None;
        row.cells.clear();
        row.ranges.clear();
        row.complex.clear();
        row.pending.clear();
        let mut b = buf.clone();
        let need = |b: &Bytes, n: usize| {
            if b.remaining() < n {
                Err(CorruptRow("truncated"))
            } else {
                Ok(())
            }
        };
        need(&b, 2)?;
        let version = b.get_u8();
        if version != VERSION && version != VERSION_COMPLEX {
            return Err(CorruptRow("unknown row format version"));
        }
        let flags = b.get_u8();
        if flags & ROW_MARKER != 0 {
            need(&b, 16)?;
            let (ts, ttl) = (b.get_i64(), b.get_i32());
            let expiry = if flags & ROW_MARKER_MS != 0 {
                need(&b, 8)?;
                b.get_i64()
            } else {
                i64::from(b.get_i32()) * 1000
            };
            row.marker = Some(Marker {
                timestamp_micros: ts,
                ttl_secs: ttl,
                expiry_ms: expiry,
            });
        }
        if flags & ROW_DELETION != 0 {
            need(&b, 12)?;
            row.deletion = Some((b.get_i64(), b.get_i32()));
        }
        let n = get_varint(&mut b)?;
        if n > b.remaining() as u64 {
            return Err(CorruptRow("cell count"));
        }
        row.cells.reserve(n as usize);
        for _ in 0..n {
            let col = u32::try_from(get_varint(&mut b)?).map_err(|_| CorruptRow("column id"))?;
            let (ts, ttl, expiry, value, local_deletion) = get_cell(&mut b)?;
            row.cells.push(Cell {
                col,
                timestamp_micros: ts,
                ttl_secs: ttl,
                expiry_ms: expiry,
                value,
                deletion_secs: local_deletion,
            });
        }
        if version == VERSION_COMPLEX {
            let n = get_varint(&mut b)?;
            if n > b.remaining() as u64 {
                return Err(CorruptRow("complex cell count"));
            }
            for _ in 0..n {
                let col =
                    u32::try_from(get_varint(&mut b)?).map_err(|_| CorruptRow("column id"))?;
                need(&b, 1)?;
                let deletion = if b.get_u8() & 1 != 0 {
                    need(&b, 12)?;
                    Some((b.get_i64(), b.get_i32()))
                } else {
                    None
                };
                let m = get_varint(&mut b)?;
                if m > b.remaining() as u64 {
                    return Err(CorruptRow("element count"));
                }
                let mut elems = Vec::with_capacity(m as usize);
                for _ in 0..m {
                    let plen = get_varint(&mut b)? as usize;
                    need(&b, plen)?;
                    let path = b.split_to(plen);
                    let (ts, ttl, expiry, value, local_deletion) = get_cell(&mut b)?;
                    elems.push(Elem {
                        path,
                        timestamp_micros: ts,
                        ttl_secs: ttl,
                        expiry_ms: expiry,
                        value,
                        deletion_secs: local_deletion,
                    });
                }
                row.complex.push(ComplexCell {
                    col,
                    deletion,
                    elems,
                });
            }
        }
        if b.has_remaining() {
            let n = get_varint(&mut b)?;
            if n > b.remaining() as u64 {
                return Err(CorruptRow("range tombstone count"));
            }
            for _ in 0..n {
                let len = get_varint(&mut b)? as usize;
                need(&b, len)?;
                let lo = b.split_to(len).to_vec();
                let hlen = get_varint(&mut b)? as usize;
                let hi = if hlen == 0 {
                    None
                } else {
                    need(&b, hlen - 1)?;
                    Some(b.split_to(hlen - 1).to_vec())
                };
                need(&b, 12)?;
                row.ranges.push(RangeTombstone {
                    lo,
                    hi,
                    timestamp_micros: b.get_i64(),
                    deletion_secs: b.get_i32(),
                });
            }
        }
        Ok(())
    }
}

/// One side of a last-write-wins contest: a cell's or element's timestamp, value (None: a
/// tombstone), expiry (milliseconds, 0 = never) and local deletion time (tombstones).
#[derive(Clone, Copy)]
struct Contender<'a> {
    timestamp_micros: i64,
    value: &'a Option<Bytes>,
    ttl_secs: i32,
    expiry_ms: i64,
    deletion_secs: i32,
}

impl Contender<'_> {
    /// Cassandra's local deletion time: a tombstone's (seconds), an expiring cell's expiry
    /// (here in milliseconds: two expiries within one second stay ordered), None for a live
    /// cell that never expires. Only compared between two tombstones or two expiring cells.
    fn deletion_time(&self) -> Option<i64> {
        match (self.value, self.expiry_ms) {
            (None, _) => Some(i64::from(self.deletion_secs)),
            (Some(_), 0) => None,
            (Some(_), e) => Some(e),
        }
    }
}

/// Last write wins between a stored cell (or element) and a new one, as Cassandra's
/// `Cells.reconcile`: the newer timestamp; on a tie a tombstone or an expiring cell beats a
/// cell that never expires (CASSANDRA-14592: the result must not depend on the clock), a
/// tombstone beats an expiring cell, then the later local deletion time, then the greater
/// value, then (where Cassandra keeps either) the greater TTL, so that the winner never
/// depends on which of the two is `old`. Returns whether `new` wins.
fn newer_wins(old: Contender, new: Contender) -> bool {
    if new.timestamp_micros != old.timestamp_micros {
        return new.timestamp_micros > old.timestamp_micros;
    }
    let (old_dt, new_dt) = (old.deletion_time(), new.deletion_time());
    match (old_dt, new_dt) {
        (None, None) => {}
        (None, Some(_)) => return true,
        (Some(_), None) => return false,
        (Some(a), Some(b)) => {
            let (old_tomb, new_tomb) = (old.value.is_none(), new.value.is_none());
            if old_tomb != new_tomb {
                return new_tomb;
            }
            if a != b {
                return b > a;
            }
        }
    }
    match (old.value, new.value) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(a), Some(b)) => (b, new.ttl_secs) > (a, old.ttl_secs),
    }
}

impl<'a> From<&'a Cell> for Contender<'a> {
    fn from(c: &'a Cell) -> Self {
        Contender {
            timestamp_micros: c.timestamp_micros,
            value: &c.value,
            ttl_secs: c.ttl_secs,
            expiry_ms: c.expiry_ms,
            deletion_secs: c.deletion_secs,
        }
    }
}

impl<'a> From<&'a Elem> for Contender<'a> {
    fn from(e: &'a Elem) -> Self {
        Contender {
            timestamp_micros: e.timestamp_micros,
            value: &e.value,
            ttl_secs: e.ttl_secs,
            expiry_ms: e.expiry_ms,
            deletion_secs: e.deletion_secs,
        }
    }
}

/// Merges two lists sorted by `cmp` (`old` stored, `new` the update) into one sorted list;
/// of two entries with the same key the one `newer(old, new)` picks stays.
fn merge_sorted<T>(
    old: Vec<T>,
    new: Vec<T>,
    cmp: impl Fn(&T, &T) -> std::cmp::Ordering,
    newer: impl Fn(&T, &T) -> bool,
) -> Vec<T> {
    use std::cmp::Ordering;
    let mut merged = Vec::with_capacity(old.len() + new.len());
    let mut a = old.into_iter().peekable();
    let mut b = new.into_iter().peekable();
    loop {
        let order = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => cmp(x, y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => break,
        };
        match order {
            Ordering::Equal => {
                let (x, y) = (a.next().expect("peeked"), b.next().expect("peeked"));
                merged.push(if newer(&x, &y) { y } else { x });
            }
            Ordering::Less => merged.push(a.next().expect("peeked")),
            Ordering::Greater => merged.push(b.next().expect("peeked")),
        }
    }
    merged
}

pub(super) const ROW_MARKER: u8 = 0x01;
pub(super) const ROW_DELETION: u8 = 0x02;
/// The marker's expiry is i64 milliseconds (rows written before had i32 seconds).
pub(super) const ROW_MARKER_MS: u8 = 0x04;
pub(super) const CELL_TOMBSTONE: u8 = 0x01;
pub(super) const CELL_EXPIRING: u8 = 0x02;
/// The cell's expiry is i64 milliseconds (cells written before had i32 seconds).
pub(super) const CELL_EXPIRY_MS: u8 = 0x04;

/// Seconds of a millisecond time (local deletion times are in seconds).
pub fn secs(ms: i64) -> i32 {
    (ms / 1000) as i32
}

/// The body of a simple cell or collection element (see the module documentation).
fn put_cell(out: &mut Vec<u8>, ts: i64, ttl: i32, expiry: i64, value: Option<&[u8]>, ldt: i32) {
    let mut flags = if value.is_none() { CELL_TOMBSTONE } else { 0 };
    if expiry != 0 {
        flags |= CELL_EXPIRING | CELL_EXPIRY_MS;
    }
    out.push(flags);
    out.put_i64(ts);
    if expiry != 0 {
        out.put_i32(ttl);
        out.put_i64(expiry);
    }
    match value {
        Some(v) => {
            put_varint(out, v.len() as u64);
            out.extend_from_slice(v);
        }
        None => out.put_i32(ldt),
    }
}

/// (timestamp, ttl, expiry in milliseconds, value, local deletion time) of a cell or element.
type CellBody = (i64, i32, i64, Option<Bytes>, i32);

/// Decodes what [`put_cell`] wrote (and the seconds-expiry cells of older rows).
fn get_cell(b: &mut Bytes) -> Result<CellBody, CorruptRow> {
    let need = |b: &Bytes, n: usize| {
        if b.remaining() < n {
            Err(CorruptRow("truncated"))
        } else {
            Ok(())
        }
    };
    need(b, 9)?;
    let flags = b.get_u8();
    let ts = b.get_i64();
    let (ttl, expiry) = if flags & CELL_EXPIRING == 0 {
        (0, 0)
    } else if flags & CELL_EXPIRY_MS != 0 {
        need(b, 12)?;
        (b.get_i32(), b.get_i64())
    } else {
        need(b, 8)?;
        (b.get_i32(), i64::from(b.get_i32()) * 1000)
    };
    if flags & CELL_TOMBSTONE != 0 {
        need(b, 4)?;
        Ok((ts, ttl, expiry, None, b.get_i32()))
    } else {
        let len = get_varint(b)? as usize;
        need(b, len)?;
        Ok((ts, ttl, expiry, Some(b.split_to(len)), 0))
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &mut Bytes) -> Result<u64, CorruptRow> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        if !b.has_remaining() {
            return Err(CorruptRow("truncated varint"));
        }
        let byte = b.get_u8();
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(CorruptRow("varint too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(col: u32, ts: i64, v: Option<&'static [u8]>) -> Cell {
        Cell {
            col,
            timestamp_micros: ts,
            ttl_secs: 0,
            expiry_ms: 0,
            value: v.map(Bytes::from_static),
            deletion_secs: 0,
        }
    }

    #[test]
    fn row_round_trip() {
        let row = RowData {
            marker: Some(Marker {
                timestamp_micros: 5,
                ttl_secs: 10,
                expiry_ms: 99,
            }),
            deletion: Some((3, 7)),
            cells: vec![cell(1, 4, Some(b"abc")), cell(9, 6, None)],
            ranges: vec![
                RangeTombstone {
                    lo: vec![1, 2],
                    hi: None,
                    timestamp_micros: 8,
                    deletion_secs: 9,
                },
                RangeTombstone {
                    lo: vec![],
                    hi: Some(vec![0]),
                    timestamp_micros: 10,
                    deletion_secs: 11,
                },
            ],
            ..Default::default()
        };
        let mut base = Vec::new();
        RowData {
            ranges: Vec::new(),
            ..row.clone()
        }
        .encode(&mut base);
        let mut buf = Vec::new();
        row.encode(&mut buf);
        assert_eq!(
            buf[0], 1,
            "rows without complex cells keep format version 1"
        );
        assert_eq!(RowData::decode(&Bytes::from(buf.clone())).unwrap(), row);
        for i in (0..buf.len()).filter(|&i| i != base.len()) {
            assert!(RowData::decode(&Bytes::from(buf[..i].to_vec())).is_err());
        }
    }

    #[test]
    fn seconds_expiries_of_earlier_rows_read_as_milliseconds() {
        // Version 1 as written before millisecond expiry_ms: a marker and one expiring cell with
        // i32 second deadlines (flag 0x04 unset).
        let mut old = vec![1u8, ROW_MARKER];
        old.put_i64(5);
        old.put_i32(10);
        old.put_i32(1_700_000_000);
        put_varint(&mut old, 1);
        put_varint(&mut old, 3);
        old.push(CELL_EXPIRING);
        old.put_i64(5);
        old.put_i32(10);
        old.put_i32(1_700_000_010);
        put_varint(&mut old, 1);
        old.push(b'x');
        let row = RowData::decode(&Bytes::from(old)).unwrap();
        assert_eq!(row.marker.unwrap().expiry_ms, 1_700_000_000_000);
        assert_eq!(row.cells[0].expiry_ms, 1_700_000_010_000);
        assert_eq!(row.cells[0].value.as_deref(), Some(&b"x"[..]));
        // Re-encoded, the deadline keeps its millisecond precision.
        let mut c = row.clone();
        c.cells[0].expiry_ms += 1;
        let mut buf = Vec::new();
        c.encode(&mut buf);
        let back = RowData::decode(&Bytes::from(buf)).unwrap();
        assert_eq!(back.cells[0].expiry_ms, 1_700_000_010_001);
        assert!(back.cells[0].is_live(1_700_000_010_000));
        assert!(!back.cells[0].is_live(1_700_000_010_001));
    }

    fn elem(path: &'static [u8], ts: i64, v: Option<&'static [u8]>) -> Elem {
        Elem {
            path: Bytes::from_static(path),
            timestamp_micros: ts,
            ttl_secs: 0,
            expiry_ms: 0,
            value: v.map(Bytes::from_static),
            deletion_secs: 0,
        }
    }

    #[test]
    fn complex_cells_round_trip_and_merge() {
        let mut row = RowData {
            cells: vec![cell(1, 4, Some(b"abc"))],
            complex: vec![ComplexCell {
                col: 2,
                deletion: Some((9, 1)),
                elems: vec![elem(b"a", 10, Some(b"x")), elem(b"b", 11, None)],
            }],
            ..Default::default()
        };
        let mut buf = Vec::new();
        row.encode(&mut buf);
        assert_eq!(buf[0], 2);
        assert_eq!(RowData::decode(&Bytes::from(buf.clone())).unwrap(), row);
        for i in 0..buf.len() {
            assert!(RowData::decode(&Bytes::from(buf[..i].to_vec())).is_err());
        }
        // per-element last write wins; a newer collection deletion drops older elements
        row.merge(RowData {
            complex: vec![ComplexCell {
                col: 2,
                deletion: None,
                elems: vec![elem(b"a", 9, Some(b"old")), elem(b"c", 12, Some(b"z"))],
            }],
            ..Default::default()
        });
        let c = row.complex_cell(2).unwrap();
        assert_eq!(c.elems.len(), 3);
        assert_eq!(c.elems[0].value.as_deref(), Some(&b"x"[..]));
        row.merge(RowData {
            complex: vec![ComplexCell {
                col: 2,
                deletion: Some((11, 2)),
                elems: vec![],
            }],
            ..Default::default()
        });
        let c = row.complex_cell(2).unwrap();
        assert_eq!(c.elems, vec![elem(b"c", 12, Some(b"z"))]);
        // counters add up; list index out of bounds is an error
        row.apply_pending(
            vec![
                Pending::CounterAdd {
                    col: 5,
                    delta: 3,
                    timestamp_micros: 1,
                },
                Pending::CounterAdd {
                    col: 5,
                    delta: -5,
                    timestamp_micros: 1,
                },
            ],
            0,
        )
        .unwrap();
        assert_eq!(
            row.cell(5).unwrap().value.as_deref(),
            Some(&(-2i64).to_be_bytes()[..])
        );
        let err = row.apply_pending(
            vec![Pending::ListSet {
                col: 2,
                index: 1,
                value: None,
                timestamp_micros: 20,
                ttl_secs: 0,
                expiry_ms: 0,
            }],
            0,
        );
        assert_eq!(
            err.unwrap_err(),
            "List index 1 out of bound, list has size 1"
        );
    }

    #[test]
    fn last_write_wins() {
        let mut row = RowData {
            cells: vec![cell(1, 10, Some(b"a")), cell(2, 10, Some(b"b"))],
            ..Default::default()
        };
        row.merge(RowData {
            cells: vec![
                cell(1, 9, Some(b"old")),
                cell(2, 10, None),
                cell(3, 1, Some(b"c")),
            ],
            ..Default::default()
        });
        assert_eq!(row.cell(1).unwrap().value.as_deref(), Some(&b"a"[..]));
        assert_eq!(row.cell(2).unwrap().value, None, "tombstone wins a tie");
        assert_eq!(row.cell(3).unwrap().value.as_deref(), Some(&b"c"[..]));
        row.merge(RowData {
            deletion: Some((5, 0)),
            ..Default::default()
        });
        assert!(row.cell(3).is_none(), "deletion shadows older cells");
        assert!(row.cell(1).is_some(), "and not newer ones");
    }
}
