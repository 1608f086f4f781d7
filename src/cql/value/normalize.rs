//! Cassandra's form of a set or map value a client sent (a bound value): elements sorted by
//! their type's order without duplicates, map entries sorted by key with one entry per key
//! (the first key's bytes, the last value), at any depth inside lists, tuples and UDTs.
//! Cassandra reaches that form by decoding the value into a `TreeSet` / `TreeMap`
//! (`Sets.Value.fromSerialized`, `Maps.Value.fromSerialized`) and re-encoding it (the
//! collection serializers sort); literals get it from [`encode_set`] / [`encode_map`]. Frozen
//! values are compared and stored whole, so `{1, 2}` bound as `[2, 1, 1]` must be the same
//! value as the literal `{1, 2}`.

use super::codec::{collection_elements, encode_list, encode_map, encode_set, encode_tuple};
use super::codec::{map_entries, tuple_components};
use crate::cql::types::CqlType;

/// True when values of `ty` may hold a set or a map.
fn holds_sorted(ty: &CqlType) -> bool {
    match ty.unfrozen() {
        CqlType::Set(_) | CqlType::Map(..) => true,
        CqlType::List(e) => holds_sorted(e),
        CqlType::Tuple(ts) => ts.iter().any(holds_sorted),
        CqlType::Udt(u) => u.fields.iter().any(|(_, t)| holds_sorted(t)),
        _ => false,
    }
}

/// The normalized form of the (validated) value `v` of type `ty`; None when `v` already has
/// it (or cannot be read: validation reports that).
pub fn normalize(ty: &CqlType, v: &[u8]) -> Option<Vec<u8>> {
    if !holds_sorted(ty) {
        return None;
    }
    let out = normalized(ty, v)?;
    (out != v).then_some(out)
}

/// Each item normalized: its new bytes, or None to keep it as it is.
fn items<'a>(
    ty: &CqlType,
    vals: impl Iterator<Item = &'a [u8]>,
) -> Vec<(&'a [u8], Option<Vec<u8>>)> {
    vals.map(|x| (x, normalize(ty, x))).collect()
}

fn pick<'a>(item: &'a (&'a [u8], Option<Vec<u8>>)) -> &'a [u8] {
    item.1.as_deref().unwrap_or(item.0)
}

/// `parts` (list elements or tuple components) encoded again with each one normalized
/// (`type_of`: the type of part `i`).
fn rebuild<'t>(
    parts: &[Option<&[u8]>],
    type_of: impl Fn(usize) -> Option<&'t CqlType>,
    encode: fn(&[Option<&[u8]>]) -> Vec<u8>,
) -> Vec<u8> {
    let fixed: Vec<Option<Vec<u8>>> = parts
        .iter()
        .enumerate()
        .map(|(i, x)| x.zip(type_of(i)).and_then(|(x, t)| normalize(t, x)))
        .collect();
    let refs: Vec<Option<&[u8]>> = parts
        .iter()
        .zip(&fixed)
        .map(|(x, f)| f.as_deref().or(*x))
        .collect();
    encode(&refs)
}

fn normalized(ty: &CqlType, v: &[u8]) -> Option<Vec<u8>> {
    let ty = ty.unfrozen();
    Some(match ty {
        CqlType::Set(e) => {
            let elems: Vec<&[u8]> = collection_elements(v)
                .ok()?
                .filter_map(|r| r.ok().flatten())
                .collect();
            let elems = items(e, elems.into_iter());
            encode_set(e, &elems.iter().map(pick).collect::<Vec<_>>())
        }
        CqlType::Map(k, val) => {
            let entries = map_entries(v).ok()?;
            let keys = items(k, entries.iter().map(|(a, _)| *a));
            let vals = items(val, entries.iter().map(|(_, b)| *b));
            let pairs: Vec<(&[u8], &[u8])> =
                keys.iter().map(pick).zip(vals.iter().map(pick)).collect();
            encode_map(k, &pairs)
        }
        CqlType::List(e) => {
            let elems: Vec<Option<&[u8]>> = collection_elements(v)
                .ok()?
                .collect::<Result<_, _>>()
                .ok()?;
            rebuild(&elems, |_| Some(&**e), encode_list)
        }
        CqlType::Tuple(ts) => rebuild(&tuple_components(v).ok()?, |i| ts.get(i), encode_tuple),
        CqlType::Udt(u) => rebuild(
            &tuple_components(v).ok()?,
            |i| u.fields.get(i).map(|(_, t)| t),
            encode_tuple,
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(v: i32) -> [u8; 4] {
        v.to_be_bytes()
    }

    #[test]
    fn sets_and_maps_are_sorted_and_deduplicated_at_any_depth() {
        let set = CqlType::Frozen(Box::new(CqlType::Set(Box::new(CqlType::Int))));
        let raw = encode_list(&[Some(&int(3)), Some(&int(1)), Some(&int(3))]);
        let want = encode_list(&[Some(&int(1)), Some(&int(3))]);
        assert_eq!(normalize(&set, &raw), Some(want.clone()));
        assert_eq!(normalize(&set, &want), None);
        let map = CqlType::Map(Box::new(CqlType::Int), Box::new(CqlType::Text));
        let mut raw = Vec::new();
        raw.extend_from_slice(&3i32.to_be_bytes());
        for (k, v) in [(2, "b"), (1, "a"), (2, "c")] {
            raw.extend_from_slice(&4i32.to_be_bytes());
            raw.extend_from_slice(&int(k));
            raw.extend_from_slice(&(v.len() as i32).to_be_bytes());
            raw.extend_from_slice(v.as_bytes());
        }
        let got = normalize(&map, &raw).expect("changed");
        assert_eq!(
            map_entries(&got).unwrap(),
            vec![(&int(1)[..], &b"a"[..]), (&int(2)[..], &b"c"[..])]
        );
        // a set inside a list inside a tuple
        let nested = CqlType::Tuple(vec![CqlType::Int, CqlType::List(Box::new(set.clone()))]);
        let inner = encode_list(&[Some(&int(2)), Some(&int(1))]);
        let raw = encode_tuple(&[Some(&int(7)), Some(&encode_list(&[Some(&inner)]))]);
        let sorted = encode_list(&[Some(&int(1)), Some(&int(2))]);
        let want = encode_tuple(&[Some(&int(7)), Some(&encode_list(&[Some(&sorted)]))]);
        assert_eq!(normalize(&nested, &raw), Some(want));
        // types without sets or maps are left alone
        assert_eq!(
            normalize(&CqlType::List(Box::new(CqlType::Int)), &raw),
            None
        );
    }
}
