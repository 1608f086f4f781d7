//! Clustering key slices: the key ranges within a partition for = / IN prefixes and a slice,
//! and the bound arithmetic (tighter, max_lo, min_hi) that intersects them.

use super::*;

/// Clustering key ranges (relative to a partition's row prefix) for = / IN prefixes and a slice.
pub(crate) fn clustering_slices(
    t: &TableDef,
    prefix_vals: &[Vec<Bytes>],
    slice: Option<&(usize, Vec<(Operator, Bytes)>)>,
) -> Vec<KeyRange> {
    if prefix_vals.is_empty() && slice.is_none() {
        // The whole partition (every point read of a table without clustering columns): what
        // the general path yields for the one empty prefix, without its allocations (about
        // 690 of such a read's ~23,600 instructions, callgrind).
        return vec![(Bound::Included(Vec::new()), Bound::Unbounded)];
    }
    general_slices(t, prefix_vals, slice)
}

fn general_slices(
    t: &TableDef,
    prefix_vals: &[Vec<Bytes>],
    slice: Option<&(usize, Vec<(Operator, Bytes)>)>,
) -> Vec<KeyRange> {
    let types: Vec<(&CqlType, bool)> = t.clustering_columns().map(|c| (&c.ty, c.desc)).collect();
    // Every combination of the = / IN values of the prefix columns.
    let mut prefixes: Vec<Vec<u8>> = crate::query::write::combinations(prefix_vals)
        .iter()
        .map(|vals| {
            let mut k = Vec::new();
            row::encode_clustering_prefix(&types, vals, &mut k);
            k
        })
        .collect();
    prefixes.sort();
    prefixes.dedup();
    let mut out = Vec::new();
    for p in prefixes {
        let mut lo: Bound<Vec<u8>> = Bound::Included(p.clone());
        let mut hi: Bound<Vec<u8>> = match prefix_successor(&p) {
            Some(s) if !p.is_empty() => Bound::Excluded(s),
            _ => Bound::Unbounded,
        };
        if let Some((ci, bounds)) = slice {
            let col = &t.columns[*ci];
            for (op, v) in bounds {
                let mut k = p.clone();
                row::encode_clustering_prefix(&[(&col.ty, col.desc)], &[&v[..]], &mut k);
                let after = prefix_successor(&k)
                    .map(Bound::Included)
                    .unwrap_or(Bound::Unbounded);
                let op = if col.desc { flip(*op) } else { *op };
                match op {
                    Operator::Gt => lo = max_lo(lo, after),
                    Operator::Ge => lo = max_lo(lo, Bound::Included(k)),
                    Operator::Lt => hi = min_hi(hi, Bound::Excluded(k)),
                    Operator::Le => {
                        hi = min_hi(
                            hi,
                            prefix_successor(&k)
                                .map(Bound::Excluded)
                                .unwrap_or(Bound::Unbounded),
                        )
                    }
                    _ => {}
                }
            }
        }
        out.push((lo, hi));
    }
    out
}

pub(super) fn flip(op: Operator) -> Operator {
    match op {
        Operator::Gt => Operator::Lt,
        Operator::Ge => Operator::Le,
        Operator::Lt => Operator::Gt,
        Operator::Le => Operator::Ge,
        o => o,
    }
}

pub(super) fn bound_key(b: &Bound<Vec<u8>>) -> Option<&Vec<u8>> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}

/// The tighter of two bounds on the same side of a range: the greater for a lower bound, the
/// smaller for an upper bound; on equal keys an exclusive bound is the tighter.
pub(super) fn tighter(a: Bound<Vec<u8>>, b: Bound<Vec<u8>>, lower: bool) -> Bound<Vec<u8>> {
    match (bound_key(&a), bound_key(&b)) {
        (None, _) => b,
        (_, None) => a,
        (Some(x), Some(y)) => match (x.cmp(y), lower) {
            (Ordering::Less, true) | (Ordering::Greater, false) => b,
            (Ordering::Greater, true) | (Ordering::Less, false) => a,
            (Ordering::Equal, _) => {
                if matches!(a, Bound::Excluded(_)) {
                    a
                } else {
                    b
                }
            }
        },
    }
}

pub(crate) fn max_lo(a: Bound<Vec<u8>>, b: Bound<Vec<u8>>) -> Bound<Vec<u8>> {
    tighter(a, b, true)
}

pub(crate) fn min_hi(a: Bound<Vec<u8>>, b: Bound<Vec<u8>>) -> Bound<Vec<u8>> {
    tighter(a, b, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_partition_shortcut_is_what_the_general_path_yields() {
        let mut seen = [false; 2];
        for ks in crate::schema::system::keyspaces() {
            for t in ks.tables.values() {
                seen[usize::from(t.clustering.is_empty())] = true;
                assert_eq!(
                    clustering_slices(t, &[], None),
                    general_slices(t, &[], None),
                    "{}.{}",
                    t.keyspace,
                    t.name
                );
            }
        }
        assert_eq!(
            seen,
            [true, true],
            "tables with and without clustering columns"
        );
    }
}
