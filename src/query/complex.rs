//! Non-frozen collections and UDTs: their per-element cells (`row::ComplexCell`), built from
//! whole values and collection operations on write, and assembled into values on read.

use super::row::{Cell, ComplexCell, Elem, RowData};
use crate::cql::types::CqlType;
use crate::cql::value;
use crate::schema::TableDef;
use bytes::Bytes;
use std::sync::atomic::{AtomicI64, Ordering};

/// Timestamp, TTL and expiry of the elements a write creates.
#[derive(Debug, Clone, Copy)]
pub struct ElemParams {
    pub timestamp_micros: i64,
    pub ttl_secs: i32,
    pub expiry_ms: i64,
    /// Milliseconds since the epoch.
    pub now: i64,
}

impl ElemParams {
    pub fn elem(&self, path: Bytes, value: Option<Bytes>) -> Elem {
        let live = value.is_some();
        Elem {
            path,
            timestamp_micros: self.timestamp_micros,
            ttl_secs: if live { self.ttl_secs } else { 0 },
            expiry_ms: if live { self.expiry_ms } else { 0 },
            value,
            deletion_secs: if live { 0 } else { super::row::secs(self.now) },
        }
    }
}

static LIST_CLOCK: AtomicI64 = AtomicI64::new(0);

/// `n` increasing list position ids, each greater than every id handed out before (append
/// order). Prepends use their negation, so later prepends come first.
fn list_ids(n: usize) -> i64 {
    let now = crate::clock::system_micros().saturating_mul(1000);
    let n = n as i64;
    let mut cur = LIST_CLOCK.load(Ordering::Relaxed);
    loop {
        let start = cur.saturating_add(1).max(now);
        match LIST_CLOCK.compare_exchange_weak(
            cur,
            start.saturating_add(n),
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => return start,
            Err(actual) => cur = actual,
        }
    }
}

fn list_path(id: i64) -> Bytes {
    Bytes::copy_from_slice(&((id as u64) ^ (1 << 63)).to_be_bytes())
}

/// The path of a set element or map key of type `ty`.
pub fn key_path(ty: &CqlType, v: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(v.len() + 4);
    value::encode_key(ty, v, false, &mut out);
    Bytes::from(out)
}

/// The path of UDT field `i`.
pub fn field_path(i: usize) -> Bytes {
    Bytes::copy_from_slice(&(i as u16).to_be_bytes())
}

/// The UDT field a [`field_path`] names (None: not a field path).
pub fn field_index(path: &[u8]) -> Option<usize> {
    <[u8; 2]>::try_from(path)
        .ok()
        .map(|b| u16::from_be_bytes(b) as usize)
}

/// Elements of list items appended (or prepended) in the order given.
pub fn list_elems(items: Vec<Bytes>, prepend: bool, p: &ElemParams) -> Vec<Elem> {
    let n = items.len();
    let start = list_ids(n);
    let mut out: Vec<Elem> = items
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let id = if prepend {
                // the first item gets the most negative id
                -(start + (n - 1 - i) as i64)
            } else {
                start + i as i64
            };
            p.elem(list_path(id), Some(v))
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The elements of a whole serialized value of the multi-cell type `ty` (a list, set, map or
/// UDT), sorted by path. The value was validated.
pub fn elems_of_value(ty: &CqlType, v: &Bytes, p: &ElemParams) -> Vec<Elem> {
    let mut out = Vec::new();
    match ty {
        CqlType::List(_) => {
            let items: Vec<Bytes> = value::collection_elements(v)
                .map(|it| {
                    it.filter_map(|r| r.ok().flatten())
                        .map(|e| v.slice_ref(e))
                        .collect::<Vec<Bytes>>()
                })
                .unwrap_or_default();
            return list_elems(items, false, p);
        }
        CqlType::Set(et) => {
            if let Ok(it) = value::collection_elements(v) {
                for e in it.filter_map(|r| r.ok().flatten()) {
                    out.push(p.elem(key_path(et, e), Some(Bytes::new())));
                }
            }
        }
        CqlType::Map(kt, _) => {
            if let Ok(entries) = value::map_entries(v) {
                for (k, val) in entries {
                    out.push(p.elem(key_path(kt, k), Some(v.slice_ref(val))));
                }
            }
        }
        CqlType::Udt(_) => {
            if let Ok(fields) = value::tuple_components(v) {
                for (i, f) in fields.into_iter().enumerate() {
                    out.push(p.elem(field_path(i), f.map(|f| v.slice_ref(f))));
                }
            }
        }
        _ => {}
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out.dedup_by(|a, b| a.path == b.path);
    out
}

/// The value of a complex cell's live elements, or None if there are none.
pub fn assemble(ty: &CqlType, c: &ComplexCell, now: i64) -> Option<Bytes> {
    let mut live = c.live(now).peekable();
    live.peek()?;
    let v = match ty {
        CqlType::List(_) => {
            let items: Vec<Option<&[u8]>> = live.map(|e| e.value.as_deref()).collect();
            value::encode_list(&items)
        }
        CqlType::Set(et) => {
            let keys: Vec<Vec<u8>> = live
                .filter_map(|e| value::decode_key(et, &mut &e.path[..], false).ok())
                .collect();
            let refs: Vec<Option<&[u8]>> = keys.iter().map(|k| Some(&k[..])).collect();
            value::encode_list(&refs)
        }
        CqlType::Map(kt, _) => {
            let mut out = Vec::new();
            let mut n = 0i32;
            out.extend_from_slice(&[0; 4]);
            for e in live {
                let (Ok(k), Some(val)) = (
                    value::decode_key(kt, &mut &e.path[..], false),
                    e.value.as_deref(),
                ) else {
                    continue;
                };
                out.extend_from_slice(&(k.len() as i32).to_be_bytes());
                out.extend_from_slice(&k);
                out.extend_from_slice(&(val.len() as i32).to_be_bytes());
                out.extend_from_slice(val);
                n += 1;
            }
            out[..4].copy_from_slice(&n.to_be_bytes());
            out
        }
        CqlType::Udt(u) => {
            let mut fields: Vec<Option<&[u8]>> = vec![None; u.fields.len()];
            for e in live {
                if let Some(f) = field_index(&e.path).and_then(|i| fields.get_mut(i)) {
                    *f = e.value.as_deref();
                }
            }
            // trailing null fields are left out, as Cassandra serializes them
            while fields.last() == Some(&None) {
                fields.pop();
            }
            value::encode_udt(&fields)
        }
        _ => return None,
    };
    Some(Bytes::from(v))
}

/// Adds to a row read from storage a simple cell per complex cell holding its assembled value
/// (shadowed by the partition deletion `pdel`), so that the read path sees every column as one
/// cell. The complex cells stay (shadowed too) for per-element writetime() and ttl().
pub fn materialize(row: &mut RowData, t: &TableDef, pdel: Option<(i64, i32)>, now: i64) {
    for i in 0..row.complex.len() {
        let c = &mut row.complex[i];
        c.shadow(pdel.map(|d| d.0));
        let Some(col) = t.columns.iter().find(|x| x.id == c.col) else {
            continue;
        };
        let Some(v) = assemble(&col.ty, c, now) else {
            continue;
        };
        let ts = c.live(now).map(|e| e.timestamp_micros).max().unwrap_or(0);
        let cell = Cell {
            col: c.col,
            timestamp_micros: ts,
            ttl_secs: 0,
            expiry_ms: 0,
            value: Some(v),
            deletion_secs: 0,
        };
        match row.cells.binary_search_by_key(&c.col, |x| x.col) {
            Ok(i) => row.cells[i] = cell,
            Err(i) => row.cells.insert(i, cell),
        }
    }
}
