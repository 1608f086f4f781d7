//! A plain row read in place: a version-1 value (`row.rs` has the format: no complex cells,
//! no range tombstones) walked over its bytes, telling whether the row is live and where each
//! live cell's value lies, without building a `RowData` (no cell list, no `Bytes` per cell).
//! Scans of tables without clustering columns read their rows this way
//! (`query::select::flat_scan`); anything else is `None` here and goes through
//! [`RowData::decode`](super::RowData::decode), which gives the same answer (tests compare
//! both on random rows).
//!
//! Liveness is the general path's: the row marker or a cell that is not a tombstone and has
//! not expired (`expiry == 0 || expiry > now`, milliseconds). The row's own deletion is not
//! applied on reads (a stored row is the merge of its writes, which already dropped what the
//! deletion shadows), so it is skipped.

use super::row::{
    CELL_EXPIRING, CELL_EXPIRY_MS, CELL_TOMBSTONE, ROW_DELETION, ROW_MARKER, ROW_MARKER_MS, VERSION,
};
use std::ops::Range;

/// Walks the cells of the version-1 row `value`, calling `live(column id, value bytes)` for
/// each live cell, in column id order (the value bytes are `value[range]`). Returns whether the
/// row is live, or None when `value` is not a plain version-1 row value or does not decode.
pub fn live_cells(
    value: &[u8],
    now_ms: i64,
    mut live: impl FnMut(u32, Range<usize>),
) -> Option<bool> {
    let mut r = Reader { b: value, at: 0 };
    if r.byte()? != VERSION {
        return None;
    }
    let flags = r.byte()?;
    let mut row_live = false;
    if flags & ROW_MARKER != 0 {
        r.skip(12)?; // timestamp, ttl
        let expiry = r.expiry(flags & ROW_MARKER_MS != 0)?;
        row_live = unexpired(expiry, now_ms);
    }
    if flags & ROW_DELETION != 0 {
        r.skip(12)?; // timestamp, local deletion time
    }
    let cells = r.varint()?;
    for _ in 0..cells {
        let col = u32::try_from(r.varint()?).ok()?;
        let cell_flags = r.byte()?;
        r.skip(8)?; // timestamp
        let expiry = if cell_flags & CELL_EXPIRING != 0 {
            r.skip(4)?; // ttl
            r.expiry(cell_flags & CELL_EXPIRY_MS != 0)?
        } else {
            0
        };
        if cell_flags & CELL_TOMBSTONE != 0 {
            r.skip(4)?; // local deletion time
            continue;
        }
        let len = usize::try_from(r.varint()?).ok()?;
        let at = r.at;
        r.skip(len)?;
        if unexpired(expiry, now_ms) {
            row_live = true;
            live(col, at..at + len);
        }
    }
    // Bytes left would be range tombstones: a partition header's, not a row's.
    (r.at == value.len()).then_some(row_live)
}

fn unexpired(expiry_ms: i64, now_ms: i64) -> bool {
    expiry_ms == 0 || expiry_ms > now_ms
}

/// A cursor over a value's bytes; every read is bounds-checked (None past the end).
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let bytes = self.b.get(self.at..self.at.checked_add(N)?)?;
        self.at += N;
        bytes.try_into().ok()
    }

    fn byte(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        let end = self.at.checked_add(n)?;
        (end <= self.b.len()).then(|| self.at = end)
    }

    /// An expiry: i64 milliseconds, or (`ms` false: rows of earlier versions) i32 seconds.
    fn expiry(&mut self, ms: bool) -> Option<i64> {
        if ms {
            self.take::<8>().map(i64::from_be_bytes)
        } else {
            self.take::<4>()
                .map(|b| i64::from(i32::from_be_bytes(b)) * 1000)
        }
    }

    /// A varint of at most 10 bytes (`row.rs`'s `put_varint`).
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::row::*;
    use super::live_cells;
    use bytes::Bytes;
    use proptest::prelude::*;

    const NOW_MS: i64 = 1_000_000;
    /// Never, expired, not yet expired.
    const EXPIRIES_MS: [i64; 3] = [0, NOW_MS - 500, NOW_MS + 200];

    /// Whether a row is live, and its live cells (column id, value).
    type Read = (bool, Vec<(u32, Vec<u8>)>);

    /// What the general path reads: `RowData::decode`, `is_live` and the live cells' values.
    fn general(value: &[u8]) -> Read {
        let row = RowData::decode(&Bytes::copy_from_slice(value)).unwrap();
        let cells = (row.cells.iter().filter(|c| c.is_live(NOW_MS)))
            .map(|c| (c.col, c.value.as_deref().unwrap().to_vec()))
            .collect();
        (row.is_live(NOW_MS), cells)
    }

    fn plain(value: &[u8]) -> Option<Read> {
        let mut cells = Vec::new();
        let live = live_cells(value, NOW_MS, |col, at| {
            cells.push((col, value[at].to_vec()))
        })?;
        Some((live, cells))
    }

    fn cell() -> impl Strategy<Value = Cell> {
        let value = prop::collection::vec(any::<u8>(), 0..200);
        (any::<bool>(), 0..3usize, value, 1..1000i32).prop_map(|(tomb, e, value, ttl)| Cell {
            col: 0,
            timestamp_micros: 7,
            ttl_secs: if EXPIRIES_MS[e] == 0 { 0 } else { ttl },
            expiry_ms: if tomb { 0 } else { EXPIRIES_MS[e] },
            value: (!tomb).then(|| Bytes::from(value)),
            deletion_secs: if tomb { 900 } else { 0 },
        })
    }

    fn row() -> impl Strategy<Value = RowData> {
        let marker = prop::option::of((0..3usize, 1..100i32)).prop_map(|m| {
            m.map(|(e, ttl)| Marker {
                timestamp_micros: 5,
                ttl_secs: ttl,
                expiry_ms: EXPIRIES_MS[e],
            })
        });
        // Column ids past 127 take two varint bytes.
        let cells = prop::collection::btree_map(0..300u32, cell(), 0..6);
        let deletion = prop::option::of(Just((3i64, 800i32)));
        (marker, deletion, cells).prop_map(|(marker, deletion, cells)| RowData {
            marker,
            deletion,
            cells: (cells.into_iter())
                .map(|(col, c)| Cell { col, ..c })
                .collect(),
            ..Default::default()
        })
    }

    proptest! {
        /// A plain row reads as the general path reads it: liveness and every live cell.
        #[test]
        fn plain_rows_read_as_the_general_path(row in row()) {
            let mut value = Vec::new();
            row.encode(&mut value);
            prop_assert_eq!(plain(&value), Some(general(&value)));
            // Truncated values are refused, never misread.
            for end in 0..value.len() {
                prop_assert_eq!(plain(&value[..end]), None);
            }
        }
    }

    #[test]
    fn rows_with_complex_cells_or_range_tombstones_are_not_plain() {
        let mut row = RowData {
            cells: vec![Cell {
                col: 1,
                timestamp_micros: 1,
                ttl_secs: 0,
                expiry_ms: 0,
                value: Some(Bytes::from_static(b"v")),
                deletion_secs: 0,
            }],
            ..Default::default()
        };
        row.complex.push(ComplexCell {
            col: 2,
            deletion: Some((1, 1)),
            elems: Vec::new(),
        });
        let mut value = Vec::new();
        row.encode(&mut value);
        assert_eq!(plain(&value), None);
        row.complex.clear();
        row.ranges.push(RangeTombstone {
            lo: vec![1],
            hi: None,
            timestamp_micros: 1,
            deletion_secs: 1,
        });
        value.clear();
        row.encode(&mut value);
        assert_eq!(plain(&value), None);
    }

    /// Rows written before expiries were milliseconds hold i32 seconds.
    #[test]
    fn seconds_expiries_of_older_rows_read_as_the_general_path() {
        for (marker_secs, cell_secs) in [(0i32, 999i32), (999, 0), (1001, 1001), (0, 0)] {
            let mut v = vec![1, ROW_MARKER];
            v.extend_from_slice(&5i64.to_be_bytes());
            v.extend_from_slice(&10i32.to_be_bytes());
            v.extend_from_slice(&marker_secs.to_be_bytes());
            v.push(1); // one cell
            v.push(4); // column id
            v.push(if cell_secs == 0 { 0 } else { CELL_EXPIRING });
            v.extend_from_slice(&6i64.to_be_bytes());
            if cell_secs != 0 {
                v.extend_from_slice(&10i32.to_be_bytes());
                v.extend_from_slice(&cell_secs.to_be_bytes());
            }
            v.extend_from_slice(&[2, b'h', b'i']);
            assert_eq!(plain(&v), Some(general(&v)), "{marker_secs} {cell_secs}");
        }
    }
}
