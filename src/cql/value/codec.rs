//! Building and reading the serialized form of composite values (collections, tuples, UDTs,
//! vectors). Readers return slices of their input and never allocate in proportion to a count
//! read from the value (a hostile count cannot make them reserve memory).

use std::cmp::Ordering;

use super::{compare, vint, ValueError};
use crate::cql::types::CqlType;

/// Appends `[int len][bytes]`, or `[int -1]` for a null.
fn put_value(out: &mut Vec<u8>, v: Option<&[u8]>) {
    match v {
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
    }
}

/// A list value from already-serialized elements, in the order given. `None` writes a null
/// element (`[int -1]`); Cassandra's validation rejects those in stored lists, but the
/// protocol can carry them (for `IN` lists).
pub fn encode_list(elems: &[Option<&[u8]>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        4 + elems
            .iter()
            .map(|e| 4 + e.map_or(0, |b| b.len()))
            .sum::<usize>(),
    );
    out.extend_from_slice(&(elems.len() as i32).to_be_bytes());
    for e in elems {
        put_value(&mut out, *e);
    }
    out
}

/// A set value: the elements sorted by the element type's comparator, duplicates (elements
/// that compare equal) removed, keeping the first occurrence as Cassandra's `TreeSet` does.
pub fn encode_set(elem_ty: &CqlType, elems: &[&[u8]]) -> Vec<u8> {
    let mut sorted: Vec<&[u8]> = elems.to_vec();
    // stable: among equal elements the first given stays first
    sorted.sort_by(|a, b| compare(elem_ty, a, b));
    sorted.dedup_by(|later, earlier| compare(elem_ty, earlier, later) == Ordering::Equal);
    let list: Vec<Option<&[u8]>> = sorted.into_iter().map(Some).collect();
    encode_list(&list)
}

/// A map value: entries sorted by the key type's comparator. For keys that compare equal the
/// first key's bytes are kept with the *last* value given (Cassandra's `TreeMap.put`).
pub fn encode_map(key_ty: &CqlType, entries: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut sorted: Vec<(&[u8], &[u8])> = entries.to_vec();
    sorted.sort_by(|a, b| compare(key_ty, a.0, b.0));
    let mut merged: Vec<(&[u8], &[u8])> = Vec::with_capacity(sorted.len());
    for (k, v) in sorted {
        match merged.last_mut() {
            Some(last) if compare(key_ty, last.0, k) == Ordering::Equal => last.1 = v,
            _ => merged.push((k, v)),
        }
    }
    let mut out = Vec::new();
    out.extend_from_slice(&(merged.len() as i32).to_be_bytes());
    for (k, v) in merged {
        put_value(&mut out, Some(k));
        put_value(&mut out, Some(v));
    }
    out
}

/// A tuple value: each component as `[int len][bytes]`, `[int -1]` for a null.
pub fn encode_tuple(components: &[Option<&[u8]>]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in components {
        put_value(&mut out, *c);
    }
    out
}

/// A UDT value: the fields in declaration order, serialized like a tuple.
pub fn encode_udt(fields: &[Option<&[u8]>]) -> Vec<u8> {
    encode_tuple(fields)
}

/// A vector value. Elements of a fixed-size type (`boolean`, `int`, `bigint`, `float`,
/// `double`, `uuid`, `timeuuid`, `timestamp`) are concatenated; other elements are each
/// prefixed with their length as an unsigned VInt (Cassandra 5.0's `VectorType`).
pub fn encode_vector(elem_ty: &CqlType, elems: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    let fixed = fixed_len(elem_ty).is_some();
    for e in elems {
        if !fixed {
            vint::put_unsigned(e.len() as u64, &mut out);
        }
        out.extend_from_slice(e);
    }
    out
}

/// The serialized size of types Cassandra's `VectorType` treats as fixed-length.
pub(crate) fn fixed_len(ty: &CqlType) -> Option<usize> {
    Some(match ty.unfrozen() {
        CqlType::Boolean => 1,
        CqlType::Int | CqlType::Float => 4,
        CqlType::Bigint | CqlType::Double | CqlType::Timestamp => 8,
        CqlType::Uuid | CqlType::Timeuuid => 16,
        // a vector of fixed-size elements is itself fixed-size (Cassandra's VectorType)
        CqlType::Vector(elem, n) => fixed_len(elem)?.checked_mul(*n as usize)?,
        _ => return None,
    })
}

/// Why a composite value could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// Fewer bytes than the lengths announce.
    Truncated,
    /// A negative element count.
    NegativeCount,
    /// Bytes left after the last element.
    Trailing,
}

pub(crate) fn read_i32(v: &[u8], pos: usize) -> Option<i32> {
    let b = v.get(pos..pos.checked_add(4)?)?;
    Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Iterates over the `[int len][bytes]` items of a collection (list/set elements, or map keys
/// and values alternately), yielding `None` for a null item. It stops after the announced
/// number of items or at the first malformed item.
#[derive(Debug, Clone)]
pub struct ElementIter<'a> {
    data: &'a [u8],
    pos: usize,
    remaining: u64,
    failed: bool,
}

impl<'a> ElementIter<'a> {
    fn new(data: &'a [u8], pos: usize, items: u64) -> Self {
        ElementIter {
            data,
            pos,
            remaining: items,
            failed: false,
        }
    }

    /// True when every announced item was read and no byte is left over.
    pub fn is_complete(&self) -> bool {
        !self.failed && self.remaining == 0 && self.pos == self.data.len()
    }

    pub(crate) fn next_item(&mut self) -> Option<Result<Option<&'a [u8]>, Malformed>> {
        if self.failed || self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let Some(len) = read_i32(self.data, self.pos) else {
            self.failed = true;
            return Some(Err(Malformed::Truncated));
        };
        self.pos += 4;
        if len < 0 {
            return Some(Ok(None));
        }
        let end = self.pos + len as usize;
        if end > self.data.len() {
            self.failed = true;
            return Some(Err(Malformed::Truncated));
        }
        let item = &self.data[self.pos..end];
        self.pos = end;
        Some(Ok(Some(item)))
    }
}

impl<'a> Iterator for ElementIter<'a> {
    type Item = Result<Option<&'a [u8]>, ValueError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_item()
            .map(|r| r.map_err(|_| ValueError::marshal("Not enough bytes to read a collection")))
    }
}

fn items(v: &[u8], per_entry: u64) -> Result<ElementIter<'_>, Malformed> {
    let n = read_i32(v, 0).ok_or(Malformed::Truncated)?;
    if n < 0 {
        return Err(Malformed::NegativeCount);
    }
    Ok(ElementIter::new(v, 4, n as u64 * per_entry))
}

/// The elements of a serialized list or set, as slices of `v` (`None` for a null element).
/// Check [`ElementIter::is_complete`] after iterating to detect trailing bytes.
pub fn collection_elements(v: &[u8]) -> Result<ElementIter<'_>, ValueError> {
    items(v, 1).map_err(|e| match e {
        Malformed::NegativeCount => {
            ValueError::marshal("The data cannot be deserialized as a list")
        }
        _ => ValueError::marshal("Not enough bytes to read a list"),
    })
}

/// A map entry: key and value, slices of the map value.
pub type MapEntry<'a> = (&'a [u8], &'a [u8]);

/// The entries of a serialized map as `(key, value)` slices of `v`.
pub fn map_entries(v: &[u8]) -> Result<Vec<MapEntry<'_>>, ValueError> {
    let mut it = items(v, 2).map_err(|e| match e {
        Malformed::NegativeCount => ValueError::marshal("The data cannot be deserialized as a map"),
        _ => ValueError::marshal("Not enough bytes to read a map"),
    })?;
    let mut out = Vec::new();
    loop {
        let k = match it.next_item() {
            None => break,
            Some(Ok(Some(k))) => k,
            Some(Ok(None)) => return Err(ValueError::marshal("Null value read when not allowed")),
            Some(Err(_)) => return Err(ValueError::marshal("Not enough bytes to read a map")),
        };
        let val = match it.next_item() {
            Some(Ok(Some(x))) => x,
            Some(Ok(None)) => return Err(ValueError::marshal("Null value read when not allowed")),
            _ => return Err(ValueError::marshal("Not enough bytes to read a map")),
        };
        out.push((k, val));
    }
    if !it.is_complete() {
        return Err(ValueError::marshal(
            "Unexpected extraneous bytes after map value",
        ));
    }
    Ok(out)
}

/// The components of a serialized tuple or UDT (`None` for a null component). A value may
/// have fewer components than its type (fields added later); it never has more.
pub fn tuple_components(v: &[u8]) -> Result<Vec<Option<&[u8]>>, ValueError> {
    parse_tuple(v, usize::MAX)
        .map_err(|_| ValueError::marshal("Not enough bytes to read a tuple component"))
}

/// The elements of a serialized `vector<elem_ty, dimension>`.
pub fn vector_elements<'a>(
    elem_ty: &CqlType,
    dimension: u32,
    v: &'a [u8],
) -> Result<Vec<&'a [u8]>, ValueError> {
    parse_vector(elem_ty, dimension, v).map_err(|_| {
        ValueError::marshal(format!(
            "Not enough bytes to read a vector<{elem_ty}, {dimension}>"
        ))
    })
}

/// All items of a list/set (`per_entry` 1) or map (`per_entry` 2), requiring the exact length.
pub(crate) fn parse_items(v: &[u8], per_entry: u64) -> Result<Vec<Option<&[u8]>>, Malformed> {
    let mut it = items(v, per_entry)?;
    let mut out = Vec::new();
    while let Some(item) = it.next_item() {
        out.push(item?);
    }
    if it.pos != v.len() {
        return Err(Malformed::Trailing);
    }
    Ok(out)
}

/// Tuple components, at most `max` of them, requiring the exact length.
pub(crate) fn parse_tuple(v: &[u8], max: usize) -> Result<Vec<Option<&[u8]>>, Malformed> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < v.len() {
        if out.len() == max {
            return Err(Malformed::Trailing);
        }
        let len = read_i32(v, pos).ok_or(Malformed::Truncated)?;
        pos += 4;
        if len < 0 {
            out.push(None);
            continue;
        }
        let end = pos + len as usize;
        if end > v.len() {
            return Err(Malformed::Truncated);
        }
        out.push(Some(&v[pos..end]));
        pos = end;
    }
    Ok(out)
}

/// Vector elements, requiring exactly `dimension` of them and no trailing byte.
pub(crate) fn parse_vector<'a>(
    elem_ty: &CqlType,
    dimension: u32,
    v: &'a [u8],
) -> Result<Vec<&'a [u8]>, Malformed> {
    let mut out = Vec::new();
    if let Some(size) = fixed_len(elem_ty) {
        let total = size as u64 * dimension as u64;
        if (v.len() as u64) < total {
            return Err(Malformed::Truncated);
        }
        if (v.len() as u64) > total {
            return Err(Malformed::Trailing);
        }
        out.extend(v.chunks(size));
        return Ok(out);
    }
    let mut rest = v;
    for _ in 0..dimension {
        if rest.is_empty() {
            return Err(Malformed::Truncated);
        }
        let len = vint::get_unsigned(&mut rest).ok_or(Malformed::Truncated)?;
        if len > rest.len() as u64 {
            return Err(Malformed::Truncated);
        }
        let (elem, tail) = rest.split_at(len as usize);
        out.push(elem);
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(Malformed::Trailing);
    }
    Ok(out)
}
