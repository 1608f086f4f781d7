//! writetime(), maxwritetime() and ttl() of an element, slice or field of a column, and of
//! any column inside other selectors (functions, operations), as Cassandra 5.0
//! (`Selectable.WritetimeOrTTL`, `ColumnTimestamps`):
//! - a frozen value is one cell: every part of it shares the column's timestamp and TTL;
//! - a non-frozen set, map or UDT has a cell per element or field: `m[k]` and `u.f` (and
//!   anything selected inside them, `u.f.g`) are that cell's, a slice `s[a..b]` is a list with
//!   an entry per element in the range (maxwritetime: the newest);
//! - whatever is selected, the result is null when the selected value is null (an element
//!   that is not there, an empty slice);
//! - list elements and slices are refused (`Element selection is only allowed on sets and
//!   maps, but l is a list`), as Cassandra does, by planning the selected value.
//!
//! A TTL list holds a null entry for each element without a TTL, as Cassandra 5.0 sends it
//! (`CollectionSerializer.pack` of null buffers). The Python driver's pure-Python decoder
//! reads such entries as None; its Cython decoder cannot (with Cassandra as with us).

use super::*;

/// A timing selector over a sub-selection of column `col` (or the whole column).
#[derive(Debug, Clone)]
pub(super) struct TimingSel {
    col: usize,
    timing: Timing,
    /// The selected value: the timing is null when it is.
    value: SExpr,
    /// Which cells of a non-frozen column (None: the whole column).
    cells: Option<CellSel>,
    /// The selection ends in a slice: an empty one has no timestamp.
    slice: bool,
}

#[derive(Debug, Clone)]
enum CellSel {
    /// The element whose path is this (a set element, a map key or a UDT field).
    Path(Bytes),
    /// The elements whose paths lie within these bounds (inclusive; None: unbounded).
    Range(Option<Bytes>, Option<Bytes>),
}

impl TimingSel {
    /// The column and timing of a whole-column selector.
    pub(super) fn column_timing(&self) -> (usize, Timing) {
        (self.col, self.timing)
    }
}

impl CellSel {
    fn holds(&self, path: &[u8]) -> bool {
        match self {
            CellSel::Path(p) => p[..] == *path,
            CellSel::Range(lo, hi) => {
                lo.as_ref().is_none_or(|l| path >= &l[..])
                    && hi.as_ref().is_none_or(|h| path <= &h[..])
            }
        }
    }
}

/// The timing kind, its function name and the type of one timing value.
pub(super) fn timing_kind(
    e: &SelectorExpr,
) -> Option<(Timing, &'static str, CqlType, &SelectorExpr)> {
    Some(match e {
        SelectorExpr::WriteTime(s) => (Timing::WriteTime, "writetime", CqlType::Bigint, &**s),
        SelectorExpr::MaxWriteTime(s) => {
            (Timing::MaxWriteTime, "maxwritetime", CqlType::Bigint, &**s)
        }
        SelectorExpr::Ttl(s) => (Timing::Ttl, "ttl", CqlType::Int, &**s),
        _ => None?,
    })
}

/// The column a timing selector's argument selects from (its innermost `Column`).
fn base_column(e: &SelectorExpr) -> Option<&str> {
    match e {
        SelectorExpr::Column(c) => Some(c),
        SelectorExpr::Field(s, _) | SelectorExpr::Element(s, _) | SelectorExpr::Slice(s, ..) => {
            base_column(s)
        }
        _ => None,
    }
}

/// The sub-selection applied directly to the column in a planned selection (its innermost
/// field, element or slice), as the cells it addresses in a non-frozen column.
fn first_step(x: &SExpr) -> Option<CellSel> {
    let (inner, here) = match x {
        SExpr::Field(inner, i) => (inner, CellSel::Path(complex::field_path(*i))),
        SExpr::Element(inner, ty, key) => {
            let kt = match ty.unfrozen() {
                CqlType::Map(k, _) | CqlType::Set(k) => k,
                _ => return None,
            };
            (inner, CellSel::Path(complex::key_path(kt, key)))
        }
        SExpr::Slice(inner, ty, lo, hi) => {
            let kt = match ty.unfrozen() {
                CqlType::Map(k, _) | CqlType::Set(k) => k,
                _ => return None,
            };
            let path = |b: &Option<Bytes>| b.as_ref().map(|v| complex::key_path(kt, v));
            (inner, CellSel::Range(path(lo), path(hi)))
        }
        _ => return None,
    };
    match &**inner {
        SExpr::Col(_) => Some(here),
        deeper => first_step(deeper),
    }
}

/// Plans `writetime(x)`, `maxwritetime(x)` or `ttl(x)`: the selector, its name and type.
pub(super) fn plan_timing(
    t: &TableDef,
    ctx: Option<&Ctx>,
    e: &SelectorExpr,
) -> Result<(TimingSel, String, CqlType)> {
    let (timing, fname, one, arg) = timing_kind(e).expect("a timing selector");
    let c = base_column(arg).ok_or_else(|| invalid(format!("Invalid argument to {fname}")))?;
    let col = column_index(t, c)?;
    if matches!(
        t.columns[col].kind,
        ColumnKind::PartitionKey | ColumnKind::Clustering
    ) {
        return Err(invalid(format!(
            "Cannot use selection function {fname} on PRIMARY KEY part {c}"
        )));
    }
    let (value, name, _) = plan_sexpr(t, ctx, arg)?;
    let multi = t.columns[col].ty.is_multi_cell();
    let cells = if multi { first_step(&value) } else { None };
    // One value per cell selected: a list for a whole non-frozen column or a slice of one.
    let many = multi && !matches!(cells, Some(CellSel::Path(_))) && timing != Timing::MaxWriteTime;
    let ty = if many {
        CqlType::List(Box::new(one))
    } else {
        one
    };
    let slice = matches!(value, SExpr::Slice(..));
    Ok((
        TimingSel {
            col,
            timing,
            value,
            cells,
            slice,
        },
        format!("{fname}({name})"),
        ty,
    ))
}

/// A timing selector's value in one row.
pub(super) fn eval_timing(s: &TimingSel, rc: &RowCtx) -> Option<Vec<u8>> {
    if rc.values.is_some() {
        return None; // a system table's values have no cells
    }
    let v = eval_sexpr(&s.value, rc)?;
    if s.slice && v.get(..4) == Some(&[0, 0, 0, 0]) {
        return None; // an empty slice
    }
    let Some(sel) = &s.cells else {
        return timing_value(rc.t, s.col, s.timing, rc.row, rc.statics, rc.now)
            .map(|x| x.bytes().to_vec());
    };
    let col = &rc.t.columns[s.col];
    let src = if col.kind == ColumnKind::Static {
        rc.statics
    } else {
        rc.row
    };
    let cc = src.complex_cell(col.id)?;
    let now = rc.now;
    let of = |e: &row::Elem| match s.timing {
        Timing::Ttl => (e.expiry_ms != 0).then(|| {
            ttl_left(e.expiry_ms, e.ttl_secs, now)
                .to_be_bytes()
                .to_vec()
        }),
        _ => Some(e.timestamp_micros.to_be_bytes().to_vec()),
    };
    let mut picked = cc.live(now).filter(|e| sel.holds(&e.path)).peekable();
    picked.peek()?;
    match (sel, s.timing) {
        (CellSel::Path(_), _) => picked.next().and_then(of),
        (CellSel::Range(..), Timing::MaxWriteTime) => picked
            .map(|e| e.timestamp_micros)
            .max()
            .map(|ts| ts.to_be_bytes().to_vec()),
        (CellSel::Range(..), _) => {
            let items: Vec<Option<Vec<u8>>> = picked.map(of).collect();
            let refs: Vec<Option<&[u8]>> = items.iter().map(|x| x.as_deref()).collect();
            Some(value::encode_list(&refs))
        }
    }
}
