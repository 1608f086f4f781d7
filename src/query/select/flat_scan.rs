//! The fast path of scans over tables without clustering or static columns that select plain
//! columns (full scans and token-range scans: cqlsh COPY TO, Spark, migration tools): each
//! stored row goes from its key and value bytes straight into the response body, without the
//! general row model (no `DecodedKey`, `RowData`, `PartitionRows` or `Output::emit` per row).
//!
//! Eligible queries ([`FlatScan::of`]): no clustering or static columns, no filters, no
//! aggregates, GROUP BY, JSON or PER PARTITION LIMIT (DISTINCT is one), and every selector a
//! partition key column, a regular column of a single-cell type, or `token(...)` of the key.
//! Such a table stores no partition header (its DELETE deletes the row), so no partition
//! deletion or range tombstone can shadow a row, and each partition is one row.
//!
//! Within an eligible scan a stored item takes this path when its key is a plain row key
//! (`keys::plain_row_key`) and its value a plain version-1 row (`plain_row::live_cells`).
//! Anything else (a partition header of an older version, a row holding collection cells of a
//! dropped column) is read by the general path, which also reads every later item of a
//! partition it started: it may have met that partition's header. Both paths answer the same
//! (`tests/engine/flat_scan.rs` compares them over random rows).

use super::*;
use crate::format::plain_row;

/// What one selector of an eligible scan reads.
#[derive(Clone, Copy)]
enum Slot {
    /// Partition key component (its position; the whole key for a one-column key).
    Key(usize),
    /// A regular column's cell (by column id).
    Cell(u32),
    /// `token(...)` of the partition key.
    Token,
}

/// An eligible scan's selectors and per-row scratch buffers (reused from row to row).
pub(super) struct FlatScan {
    slots: Vec<Slot>,
    /// (column id, selector) of the selected cells, by column id (cells are stored in column
    /// id order, so one walk over both finds every selected cell).
    by_col: Vec<(u32, usize)>,
    /// Components of the partition key (1: the key is the value itself).
    key_parts: usize,
    /// Per selector the place of its cell's value in the stored row value, for the current row.
    found: Vec<Option<std::ops::Range<usize>>>,
    /// A partition key holding 0x00 bytes, unescaped.
    key_buf: Vec<u8>,
}

impl FlatScan {
    /// The fast path for a scan of `t` by `plan` into `out`, if the query is eligible (see
    /// the module documentation).
    pub(super) fn of(t: &TableDef, plan: &Plan, out: &Output) -> Option<FlatScan> {
        let plain_query = plan.filters.is_empty()
            && out.agg.is_none()
            && !out.aggregating
            && !out.json
            && out.per_partition.is_none();
        if !plain_query || !t.clustering.is_empty() || t.has_static() {
            return None;
        }
        let slots = out
            .proj
            .iter()
            .map(|(p, _, _)| slot(t, p))
            .collect::<Option<Vec<_>>>()?;
        let mut by_col: Vec<(u32, usize)> = (slots.iter().enumerate())
            .filter_map(|(i, s)| match s {
                Slot::Cell(col) => Some((*col, i)),
                _ => None,
            })
            .collect();
        by_col.sort_unstable();
        Some(FlatScan {
            found: vec![None; slots.len()],
            slots,
            by_col,
            key_parts: t.partition_key.len(),
            key_buf: Vec::new(),
        })
    }

    /// Reads one stored item into `out`; None when it is not a plain row (the general path
    /// reads it; nothing was written or counted).
    pub(super) fn row(&mut self, out: &mut Output, key: &[u8], value: &[u8]) -> Option<Flow> {
        let (token, pk) = row::plain_row_key(key, &mut self.key_buf)?;
        self.found.fill(None);
        let (by_col, found) = (&self.by_col[..], &mut self.found);
        let mut next = 0; // the first entry of `by_col` not passed yet
        let live = plain_row::live_cells(value, out.now, |col, at| {
            while let Some(&(c, i)) = by_col.get(next).filter(|(c, _)| *c <= col) {
                if c == col {
                    found[i] = Some(at.clone());
                }
                next += 1;
            }
        })?;
        out.scanned(token, key.len() + value.len());
        if !live {
            return Some(Flow::Continue);
        }
        let token_bytes = token.to_be_bytes();
        let start = out.rows.content.len();
        for (slot, f) in self.slots.iter().zip(&self.found) {
            let cell = match slot {
                Slot::Key(_) if self.key_parts == 1 => Some(pk),
                Slot::Key(i) => crate::tokens::composite_part(pk, self.key_parts, *i),
                Slot::Cell(_) => f.clone().map(|at| &value[at]),
                Slot::Token => Some(&token_bytes[..]),
            };
            out.rows.push_cell(cell);
        }
        if start == 0 {
            reserve_page(out);
        }
        Some(out.row_done())
    }
}

/// The most a page's response body is given after its first row, in bytes (past it, it grows
/// by doubling as it fills).
const PAGE_RESERVE_BYTES: usize = 1 << 20;

/// Makes room in the response body, which holds one row, for the rows the page may still take
/// at that row's size (a body grown by doubling from empty copied itself a dozen times).
fn reserve_page(out: &mut Output) {
    let body = &mut out.rows.content;
    let rows = out.page_rows.min(out.remaining.unwrap_or(usize::MAX));
    let bytes = body.len().saturating_mul(rows);
    let want = bytes.min(out.page_bytes).min(PAGE_RESERVE_BYTES);
    body.reserve(want.saturating_sub(body.len()));
}

/// What selector `p` reads, if an eligible scan can answer it.
fn slot(t: &TableDef, p: &Proj) -> Option<Slot> {
    match p {
        Proj::Token => Some(Slot::Token),
        Proj::Column(i) => {
            let c = &t.columns[*i];
            match c.kind {
                ColumnKind::PartitionKey => Some(Slot::Key(c.position)),
                ColumnKind::Regular if !c.ty.is_multi_cell() => Some(Slot::Cell(c.id)),
                _ => None,
            }
        }
        _ => None,
    }
}
