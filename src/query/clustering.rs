//! The rows of a partition that the WHERE clause of an UPDATE or DELETE names: Cassandra's
//! clustering restrictions for modifications, single-column and multi-column alike.
//!
//! In clustering order the restrictions must be a run of `=` / `IN` (on one column, or on a
//! tuple of consecutive columns: `(c1, c2) = (1, 2)`, `(c1, c2) IN ((1, 2), (3, 4))`), then at
//! most a slice (`<`, `<=`, `>`, `>=`, one bound per side, on the next column or on a tuple
//! starting there; DELETE only). The run gives the clustering prefixes (one tuple of values per
//! combination); the slice gives key ranges inside each prefix.
//!
//! A multi-column slice compares values column by column with each column's type, whatever
//! the clustering order (Cassandra 5.0), so `(c1, c2) > (1, 2)` is the union of `c1 > 1` and
//! `c1 = 1 AND c2 > 2`: each part is one key range in stored order, and two bounds are the
//! pairwise intersections of their parts.

use super::eval::Ctx;
use super::select::{self, KeyRange};
use super::write::{combinations, in_product_exceeded, in_values, key_value, MAX_IN_PRODUCT};
use super::{invalid, Result};
use crate::cql::ast::{Operator, Relation, RelationLhs};
use crate::schema::{ColumnKind, TableDef};
use bytes::Bytes;
use std::ops::Bound;

/// The clustering restrictions of a modification, validated.
#[derive(Debug)]
pub(crate) struct Restricted {
    /// How many leading clustering columns `=` / `IN` restrict.
    pub len: usize,
    /// The candidate values of those columns, one tuple of `len` values each (a single empty
    /// tuple when `len` is 0; none for an empty IN).
    pub prefixes: Vec<Vec<Bytes>>,
    /// The slice after the prefix: at most one bound per side, each an operator and the values
    /// of the columns from position `len` on.
    pub bounds: Vec<(Operator, Vec<Bytes>)>,
}

/// One relation on clustering columns: the position of its first column, how many columns it
/// covers, whether it is multi-column, and what it says.
struct Part {
    start: usize,
    width: usize,
    multi: bool,
    what: What,
}

enum What {
    /// `=` or `IN`: the candidate tuples.
    Eq {
        tuples: Vec<Vec<Bytes>>,
        is_in: bool,
    },
    Slice(Operator, Vec<Bytes>),
}

impl Restricted {
    /// Reads and validates the relations on clustering columns (others are left to the caller).
    pub fn from_where(t: &TableDef, rels: &[Relation], ctx: &Ctx) -> Result<Restricted> {
        let parts = parts(t, rels, ctx)?;
        check_overlaps(t, &parts)?;
        let mut len = 0;
        let mut prefixes: Vec<Vec<Bytes>> = vec![Vec::new()];
        while let Some(p) = parts
            .iter()
            .find(|p| p.start == len && matches!(p.what, What::Eq { .. }))
        {
            let What::Eq { tuples, .. } = &p.what else {
                unreachable!("found by its kind")
            };
            // Each combination is a row key to write: bounded as for reads (write.rs).
            let product = prefixes.len().saturating_mul(tuples.len());
            if product > MAX_IN_PRODUCT {
                return Err(in_product_exceeded("clustering key", product));
            }
            prefixes = combinations([&prefixes, tuples])
                .into_iter()
                .map(|pair| pair.concat())
                .collect();
            len += p.width;
        }
        let mut bounds: Vec<(Operator, Vec<Bytes>)> = Vec::new();
        for p in &parts {
            match &p.what {
                What::Eq { .. } if p.start < len => {}
                What::Slice(op, vals) if p.start == len => {
                    let lower = matches!(op, Operator::Gt | Operator::Ge);
                    if bounds
                        .iter()
                        .any(|(o, _)| matches!(o, Operator::Gt | Operator::Ge) == lower)
                    {
                        return Err(invalid(format!(
                            "More than one restriction was found for the {} bound on {}",
                            if lower { "start" } else { "end" },
                            names(t, p)
                        )));
                    }
                    bounds.push((*op, vals.clone()));
                }
                _ => return Err(out_of_order(t, &parts, p, len)),
            }
        }
        Ok(Restricted {
            len,
            prefixes,
            bounds,
        })
    }

    /// The names of the clustering columns `=` / `IN` leave unrestricted.
    pub fn missing(&self, t: &TableDef) -> Vec<String> {
        t.clustering_columns()
            .skip(self.len)
            .map(|c| c.name.clone())
            .collect()
    }

    /// The clustering key ranges (relative to the partition's row prefix) of every prefix with
    /// the slice applied, sorted and disjoint.
    pub fn ranges(&self, t: &TableDef) -> Vec<KeyRange> {
        let mut out = Vec::new();
        for prefix in &self.prefixes {
            let whole = single_valued(prefix);
            let mut ranges = select::clustering_slices(t, &whole, None);
            for (op, vals) in &self.bounds {
                let parts = bound_ranges(t, prefix, *op, vals);
                ranges = ranges
                    .iter()
                    .flat_map(|a| parts.iter().filter_map(move |b| intersect(a, b)))
                    .collect();
            }
            out.extend(ranges);
        }
        out.sort_by(|a, b| lower_key(&a.0).cmp(lower_key(&b.0)));
        out
    }
}

/// Each value as the only candidate of its column (the form `clustering_slices` takes).
fn single_valued(vals: &[Bytes]) -> Vec<Vec<Bytes>> {
    vals.iter().map(|v| vec![v.clone()]).collect()
}

/// The key ranges of one slice bound `(c_len, ..) op (vals)` inside `prefix`: for each column
/// of the tuple, the rows equal to the bound on the columns before it and beyond it on it
/// (strictly, but for the last column of an inclusive bound).
fn bound_ranges(t: &TableDef, prefix: &[Bytes], op: Operator, vals: &[Bytes]) -> Vec<KeyRange> {
    let strict = match op {
        Operator::Ge => Operator::Gt,
        Operator::Le => Operator::Lt,
        o => o,
    };
    (0..vals.len())
        .flat_map(|i| {
            let mut eq: Vec<Bytes> = prefix.to_vec();
            eq.extend_from_slice(&vals[..i]);
            let ci = t.clustering[prefix.len() + i];
            let op_i = if i + 1 == vals.len() { op } else { strict };
            let slice = (ci, vec![(op_i, vals[i].clone())]);
            select::clustering_slices(t, &single_valued(&eq), Some(&slice))
        })
        .collect()
}

/// The intersection of two key ranges, None when it is empty.
fn intersect(a: &KeyRange, b: &KeyRange) -> Option<KeyRange> {
    let lo = select::max_lo(a.0.clone(), b.0.clone());
    let hi = select::min_hi(a.1.clone(), b.1.clone());
    let empty = match (&lo, &hi) {
        (Bound::Included(l), Bound::Included(h)) => l > h,
        (Bound::Included(l) | Bound::Excluded(l), Bound::Included(h) | Bound::Excluded(h)) => {
            l >= h
        }
        _ => false,
    };
    (!empty).then_some((lo, hi))
}

fn lower_key(b: &Bound<Vec<u8>>) -> &[u8] {
    match b {
        Bound::Included(k) | Bound::Excluded(k) => k,
        Bound::Unbounded => &[],
    }
}

/// The relations on clustering columns, evaluated.
fn parts(t: &TableDef, rels: &[Relation], ctx: &Ctx) -> Result<Vec<Part>> {
    let mut out = Vec::new();
    for r in rels {
        let part = match &r.lhs {
            RelationLhs::Column(name) => {
                let Some(col) = t.column(name).filter(|c| c.kind == ColumnKind::Clustering) else {
                    continue;
                };
                let what = match r.op {
                    Operator::Eq | Operator::In => What::Eq {
                        tuples: in_or_eq(r, col, ctx)?,
                        is_in: r.op == Operator::In,
                    },
                    Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge => {
                        let v = super::eval::eval(&r.rhs, &col.ty, name, ctx)?;
                        What::Slice(r.op, vec![key_value(v, col)?])
                    }
                    op => {
                        return Err(invalid(format!(
                        "Unsupported \"{}\" relation on clustering column {name} in a modification",
                        op.as_str()
                    )))
                    }
                };
                Part {
                    start: col.position,
                    width: 1,
                    multi: false,
                    what,
                }
            }
            RelationLhs::Tuple(names) => {
                let (idx, tuples) = select::tuple_values(t, names, r, ctx)?;
                let what = match r.op {
                    Operator::Eq | Operator::In => What::Eq {
                        tuples,
                        is_in: r.op == Operator::In,
                    },
                    op => What::Slice(op, tuples.into_iter().next().unwrap_or_default()),
                };
                Part {
                    start: t.columns[idx[0]].position,
                    width: idx.len(),
                    multi: true,
                    what,
                }
            }
            _ => continue,
        };
        out.push(part);
    }
    Ok(out)
}

/// The candidate values of a single-column `=` / `IN`, each as a 1-tuple.
fn in_or_eq(r: &Relation, col: &crate::schema::ColumnDef, ctx: &Ctx) -> Result<Vec<Vec<Bytes>>> {
    let vals = if r.op == Operator::Eq {
        vec![super::eval::eval(&r.rhs, &col.ty, &col.name, ctx)?]
    } else {
        in_values(&r.rhs, &col.ty, &col.name, ctx)?
    };
    vals.into_iter()
        .map(|v| Ok(vec![key_value(v, col)?]))
        .collect()
}

/// Cassandra's errors for two relations on one column: single and multi-column mixed, or an
/// `=` / `IN` with anything else.
fn check_overlaps(t: &TableDef, parts: &[Part]) -> Result<()> {
    for (i, a) in parts.iter().enumerate() {
        for b in &parts[i + 1..] {
            let common = a.start.max(b.start);
            if common >= (a.start + a.width).min(b.start + b.width) {
                continue;
            }
            if a.multi != b.multi {
                return Err(invalid(
                    "Mixing single column relations and multi column relations on clustering columns is not allowed",
                ));
            }
            let eq = [a, b].into_iter().find_map(|p| match p.what {
                What::Eq { is_in, .. } => Some(is_in),
                What::Slice(..) => None,
            });
            if let Some(is_in) = eq {
                let name = &t.columns[t.clustering[common]].name;
                return Err(invalid(format!(
                    "{name} cannot be restricted by more than one relation if it includes {}",
                    if is_in { "a IN" } else { "an Equal" }
                )));
            }
        }
    }
    Ok(())
}

/// The error for a relation that does not continue the restricted prefix at `len`.
fn out_of_order(t: &TableDef, parts: &[Part], p: &Part, len: usize) -> super::QueryError {
    let name = |pos: usize| t.columns[t.clustering[pos]].name.as_str();
    let sliced = parts
        .iter()
        .any(|q| q.start == len && matches!(q.what, What::Slice(..)));
    if sliced {
        invalid(format!(
            "Clustering column \"{}\" cannot be restricted (preceding column \"{}\" is restricted by a non-EQ relation)",
            name(p.start),
            name(len)
        ))
    } else {
        invalid(format!(
            "PRIMARY KEY column \"{}\" cannot be restricted as preceding column \"{}\" is not restricted",
            name(p.start),
            name(len)
        ))
    }
}

/// The column name(s) of a relation as Cassandra prints them in errors.
fn names(t: &TableDef, p: &Part) -> String {
    let cols: Vec<&str> = (p.start..p.start + p.width)
        .map(|pos| t.columns[t.clustering[pos]].name.as_str())
        .collect();
    if p.multi {
        format!("({})", cols.join(", "))
    } else {
        cols.join(", ")
    }
}
