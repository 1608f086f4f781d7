//! Cell values of a row: column values (regular, static, key parts), writetime()/ttl()
//! values, and the per-row filter check.

use super::*;

/// Whole seconds left until `expiry` (ms), rounded up, never more than the TTL.
pub(super) fn ttl_left(expiry_ms: i64, ttl_secs: i32, now_ms: i64) -> i32 {
    ((expiry_ms - now_ms + 999) / 1000).min(i64::from(ttl_secs)) as i32
}

/// writetime(), maxwritetime() or ttl() of column `i` of a row; for non-frozen collections
/// and UDTs writetime() and ttl() are lists with one entry per live element (a null TTL for
/// an element without one).
pub(super) fn timing_value(
    t: &TableDef,
    i: usize,
    timing: Timing,
    row: &RowData,
    statics: &RowData,
    now: i64,
) -> Option<TimingValue> {
    let col = &t.columns[i];
    if col.ty.is_multi_cell() && timing != Timing::MaxWriteTime {
        let src = if col.kind == ColumnKind::Static {
            statics
        } else {
            row
        };
        let cc = src.complex_cell(col.id).filter(|c| c.is_live(now))?;
        let of = |e: &row::Elem| match timing {
            Timing::Ttl => (e.expiry_ms != 0).then(|| {
                ttl_left(e.expiry_ms, e.ttl_secs, now)
                    .to_be_bytes()
                    .to_vec()
            }),
            _ => Some(e.timestamp_micros.to_be_bytes().to_vec()),
        };
        let items: Vec<Option<Vec<u8>>> = match &col.ty {
            // A UDT has an entry per field, null for the fields that are not set.
            CqlType::Udt(u) => {
                let mut items = vec![None; u.fields.len()];
                for e in cc.live(now) {
                    if let Some(slot) = complex::field_index(&e.path).and_then(|f| items.get_mut(f))
                    {
                        *slot = of(e);
                    }
                }
                items
            }
            _ => cc.live(now).map(of).collect(),
        };
        let refs: Vec<Option<&[u8]>> = items.iter().map(|x| x.as_deref()).collect();
        return Some(TimingValue::List(crate::cql::value::encode_list(&refs)));
    }
    let c = cell_of(t, i, row, statics, now)?;
    match timing {
        Timing::Ttl => {
            (c.expiry_ms != 0).then(|| TimingValue::int(ttl_left(c.expiry_ms, c.ttl_secs, now)))
        }
        _ => Some(TimingValue::Fixed(c.timestamp_micros.to_be_bytes(), 8)),
    }
}

/// A timing selector's value, without allocating for the single-cell cases.
pub(super) enum TimingValue {
    /// Big-endian bytes and their length (4 for an int, 8 for a bigint).
    Fixed([u8; 8], usize),
    List(Vec<u8>),
}

impl TimingValue {
    pub(super) fn int(v: i32) -> Self {
        let mut b = [0; 8];
        b[..4].copy_from_slice(&v.to_be_bytes());
        TimingValue::Fixed(b, 4)
    }

    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            TimingValue::Fixed(b, n) => &b[..*n],
            TimingValue::List(v) => v,
        }
    }
}

pub(super) fn cell_of<'r>(
    t: &TableDef,
    i: usize,
    row: &'r RowData,
    statics: &'r RowData,
    now: i64,
) -> Option<&'r row::Cell> {
    let col = &t.columns[i];
    let src = if col.kind == ColumnKind::Static {
        statics
    } else {
        row
    };
    src.cell(col.id).filter(|c| c.is_live(now))
}

pub(crate) fn column_value<'r>(
    t: &TableDef,
    i: usize,
    pk_parts: &[&'r [u8]],
    ck: &'r [Bytes],
    row: &'r RowData,
    statics: &'r RowData,
    now: i64,
) -> Option<&'r [u8]> {
    let col = &t.columns[i];
    match col.kind {
        ColumnKind::PartitionKey => pk_parts.get(col.position).copied(),
        ColumnKind::Clustering => ck.get(col.position).map(|b| &b[..]),
        _ => cell_of(t, i, row, statics, now).and_then(|c| c.value.as_deref()),
    }
}

pub(super) fn passes(
    t: &TableDef,
    filters: &[Filter],
    pk: &[u8],
    ck: &[Bytes],
    row: &RowData,
    statics: &RowData,
    now: i64,
) -> bool {
    if filters.is_empty() {
        return true;
    }
    let pk_parts: Vec<&[u8]> = if t.partition_key.len() == 1 {
        vec![pk]
    } else {
        split_composite(pk, t.partition_key.len()).unwrap_or_default()
    };
    filters.iter().all(|f| {
        if let Some((cols, _)) = &f.tuple {
            let vals: Vec<Option<&[u8]>> = cols
                .iter()
                .map(|&c| column_value(t, c, &pk_parts, ck, row, statics, now))
                .collect();
            return f.matches_tuple(t, &vals);
        }
        let v = column_value(t, f.col, &pk_parts, ck, row, statics, now);
        f.matches(&t.columns[f.col].ty, v)
    })
}
