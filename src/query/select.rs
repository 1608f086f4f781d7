//! SELECT: planning (which partitions, which clustering slices, what to filter), routing to
//! physical partitions, reading, projecting and paging.

use super::bind::BoundValues;
use super::complex;
use super::eval::{eval, Ctx, Val};
use super::row::{self, RowData, KIND_HEADER, KIND_ROW};
use super::write::{in_values, key_values, table_token};
use super::{invalid, resolve_table, Engine, QueryOptions, Result, ResultColumn, Rows};
use crate::cql::ast::{Operator, Relation, RelationLhs, Select, Selection, SelectorExpr, Term};
use crate::cql::types::CqlType;
use crate::cql::value;
use crate::partition::token::{partition_key_bytes, split_composite, Token, MAX_TOKEN, MIN_TOKEN};
use crate::schema::{ColumnKind, TableDef};
use crate::storage::{prefix_successor, Space};
use bytes::{BufMut, Bytes, BytesMut};
use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

/// A range of storage keys.
pub(crate) type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// One output column.
#[derive(Debug, Clone)]
enum Proj {
    Column(usize),
    Token,
    /// writetime(), maxwritetime() or ttl() of a column.
    Timing(usize, Timing),
    ToJson(Box<Proj>, CqlType),
    /// An aggregate over the rows (of a group): count(*), count(c), min, max, sum, avg.
    Agg(super::aggregate::AggKind, Option<usize>),
    /// Functions, CAST, field and element selection.
    Expr(Box<SExpr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timing {
    WriteTime,
    MaxWriteTime,
    Ttl,
}

/// A computed selector.
#[derive(Debug, Clone)]
enum SExpr {
    Col(usize),
    Const(Option<Bytes>),
    Call(String, Vec<SExpr>, Vec<CqlType>),
    Field(Box<SExpr>, usize),
    /// A map value or set element by key.
    Element(Box<SExpr>, CqlType, Bytes),
    /// The elements/entries of a set or map whose keys are within the bounds (inclusive).
    Slice(Box<SExpr>, CqlType, Option<Bytes>, Option<Bytes>),
    Cast(Box<SExpr>, CqlType, CqlType),
    /// `l op r` with the operand types and the result type.
    Op(
        crate::cql::ast::BinaryOp,
        Box<(SExpr, CqlType, SExpr, CqlType)>,
        CqlType,
    ),
    Neg(Box<SExpr>, CqlType),
}

struct RowCtx<'a, 'r> {
    t: &'a TableDef,
    pk_parts: &'a [&'r [u8]],
    ck: &'r [Bytes],
    row: &'r RowData,
    statics: &'r RowData,
    now: i64,
    /// The first failure of an operation (division by zero): the query fails with it.
    err: &'a std::cell::RefCell<Option<super::QueryError>>,
    /// A virtual (system) table's row: its column values by column index, read instead of the
    /// stored row.
    values: Option<&'r [Option<Bytes>]>,
}

fn eval_sexpr(e: &SExpr, rc: &RowCtx) -> Option<Vec<u8>> {
    match e {
        SExpr::Col(i) => match rc.values {
            Some(vals) => vals.get(*i).cloned().flatten().map(|v| v.to_vec()),
            None => column_value(rc.t, *i, rc.pk_parts, rc.ck, rc.row, rc.statics, rc.now)
                .map(|v| v.to_vec()),
        },
        SExpr::Const(v) => v.as_ref().map(|b| b.to_vec()),
        SExpr::Call(name, args, types) => {
            let vals: Vec<Option<Vec<u8>>> = args.iter().map(|a| eval_sexpr(a, rc)).collect();
            let refs: Vec<Option<&[u8]>> = vals.iter().map(|v| v.as_deref()).collect();
            match super::functions::call(name, types, &refs) {
                Ok(v) => v,
                Err(e) => {
                    // Cassandra fails the query (blobAsBigint(0x01)): InvalidRequest.
                    rc.err.borrow_mut().get_or_insert(invalid(e));
                    None
                }
            }
        }
        SExpr::Field(inner, i) => {
            let v = eval_sexpr(inner, rc)?;
            field_value(&v, *i).map(|f| f.to_vec())
        }
        SExpr::Element(inner, ty, key) => {
            let v = eval_sexpr(inner, rc)?;
            match ty.unfrozen() {
                CqlType::Map(kt, _) => map_value(kt, &v, key).map(|x| x.to_vec()),
                CqlType::Set(et) => value::collection_elements(&v)
                    .ok()?
                    .filter_map(|r| r.ok().flatten())
                    .find(|x| value::compare(et, x, key) == Ordering::Equal)
                    .map(|x| x.to_vec()),
                _ => None,
            }
        }
        SExpr::Slice(inner, ty, lo, hi) => {
            let v = eval_sexpr(inner, rc)?;
            let kt = match ty.unfrozen() {
                CqlType::Map(k, _) | CqlType::Set(k) => k,
                _ => return None,
            };
            let inside = |k: &[u8]| {
                lo.as_ref()
                    .is_none_or(|l| value::compare(kt, k, l) != Ordering::Less)
                    && hi
                        .as_ref()
                        .is_none_or(|h| value::compare(kt, k, h) != Ordering::Greater)
            };
            if matches!(ty.unfrozen(), CqlType::Map(..)) {
                let entries: Vec<(&[u8], &[u8])> = value::map_entries(&v)
                    .ok()?
                    .into_iter()
                    .filter(|(k, _)| inside(k))
                    .collect();
                Some(value::encode_map(kt, &entries))
            } else {
                let elems: Vec<&[u8]> = value::collection_elements(&v)
                    .ok()?
                    .filter_map(|r| r.ok().flatten())
                    .filter(|k| inside(k))
                    .collect();
                Some(value::encode_set(kt, &elems))
            }
        }
        SExpr::Cast(inner, from, to) => {
            let v = eval_sexpr(inner, rc)?;
            super::functions::cast(from, to, &v)
        }
        SExpr::Op(op, operands, ret) => {
            let (l, lt, r, rt) = &**operands;
            let (a, b) = (eval_sexpr(l, rc), eval_sexpr(r, rc));
            match super::arith::apply(*op, lt, a.as_deref(), rt, b.as_deref(), ret) {
                Ok(v) => v,
                Err(e) => {
                    rc.err.borrow_mut().get_or_insert(e);
                    None
                }
            }
        }
        SExpr::Neg(inner, ty) => {
            let v = eval_sexpr(inner, rc);
            match super::arith::negate(ty, v.as_deref()) {
                Ok(v) => v,
                Err(e) => {
                    rc.err.borrow_mut().get_or_insert(e);
                    None
                }
            }
        }
    }
}

/// Plans a selector as a computed expression.
fn plan_sexpr(
    t: &TableDef,
    ctx: Option<&Ctx>,
    e: &SelectorExpr,
) -> Result<(SExpr, String, CqlType)> {
    Ok(match e {
        SelectorExpr::Column(c) => {
            let i = column_index(t, c)?;
            (SExpr::Col(i), c.clone(), t.columns[i].ty.clone())
        }
        SelectorExpr::Function { name, args, .. } => {
            let mut planned = Vec::with_capacity(args.len());
            let mut types = Vec::with_capacity(args.len());
            let mut names = Vec::with_capacity(args.len());
            for a in args {
                let (x, n, ty) = match a {
                    SelectorExpr::Term(Term::Literal(l)) => {
                        let ty = super::eval::arg_type(name, &Term::Literal(l.clone()));
                        let v = match l {
                            crate::cql::ast::Literal::Null => None,
                            l => Some(Bytes::from(
                                value::literal_to_bytes(&ty, l)
                                    .map_err(|e| invalid(e.for_column(name)))?,
                            )),
                        };
                        let text = v
                            .as_ref()
                            .map_or("null".into(), |b| value::to_cql_literal(&ty, b));
                        (SExpr::Const(v), text, ty)
                    }
                    SelectorExpr::Term(term) => {
                        // a bind marker (maybe with a type hint) as the function's argument type
                        let ty = super::eval::arg_type(name, term);
                        selection_marker(term, ty, name, ctx)?
                    }
                    other => plan_sexpr(t, ctx, other)?,
                };
                planned.push(x);
                types.push(ty);
                names.push(n);
            }
            let ret = super::functions::return_type(name, &types).map_err(invalid)?;
            (
                SExpr::Call(name.clone(), planned, types),
                format!("system.{name}({})", names.join(", ")),
                ret,
            )
        }
        SelectorExpr::Cast(inner, to) => {
            let (x, n, from) = plan_sexpr(t, ctx, inner)?;
            let to_ty = match to {
                crate::cql::ast::TypeExpr::Native(name) => CqlType::native_from_name(name),
                _ => None,
            }
            .ok_or_else(|| invalid(format!("{to:?} is not a valid target type for CAST")))?;
            if !super::functions::cast_allowed(&from, &to_ty) {
                return Err(invalid(format!("{from} cannot be cast to {to_ty}")));
            }
            (
                SExpr::Cast(Box::new(x), from, to_ty.clone()),
                format!("cast({n} as {to_ty})"),
                to_ty,
            )
        }
        SelectorExpr::Field(inner, f) => {
            let (x, n, ty) = plan_sexpr(t, ctx, inner)?;
            let CqlType::Udt(u) = ty.unfrozen() else {
                return Err(invalid(format!(
                    "Invalid field selection: {n} of type {ty} is not a user type"
                )));
            };
            let Some(i) = u.fields.iter().position(|(name, _)| name == f) else {
                return Err(invalid(format!("{} has no field {f}", u.name)));
            };
            let fty = u.fields[i].1.clone();
            (SExpr::Field(Box::new(x), i), format!("{n}.{f}"), fty)
        }
        SelectorExpr::Element(inner, key) => {
            let (x, n, ty) = plan_sexpr(t, ctx, inner)?;
            let (kt, rt) = match ty.unfrozen() {
                CqlType::Map(k, v) => ((**k).clone(), (**v).clone()),
                CqlType::Set(e) => ((**e).clone(), (**e).clone()),
                _ => {
                    return Err(invalid(format!(
                        "Element selection is only allowed on sets and maps, but {n} is a {}",
                        match ty.unfrozen() {
                            CqlType::List(_) => "list",
                            _ => "non-collection",
                        }
                    )))
                }
            };
            let Term::Literal(l) = key else {
                return Err(invalid("Only constants are supported as element selectors"));
            };
            let k = value::literal_to_bytes(&kt, l).map_err(|e| invalid(e.for_column(&n)))?;
            let text = value::to_cql_literal(&kt, &k);
            (
                SExpr::Element(Box::new(x), ty.clone(), Bytes::from(k)),
                format!("{n}[{text}]"),
                rt,
            )
        }
        SelectorExpr::Slice(inner, lo, hi) => {
            let (x, n, ty) = plan_sexpr(t, ctx, inner)?;
            let kt = match ty.unfrozen() {
                CqlType::Map(k, _) | CqlType::Set(k) => (**k).clone(),
                _ => {
                    return Err(invalid(format!(
                        "Slice selection is only allowed on sets and maps, but {n} is a {}",
                        match ty.unfrozen() {
                            CqlType::List(_) => "list",
                            _ => "non-collection",
                        }
                    )))
                }
            };
            let bound = |b: &Option<Term>| -> Result<(Option<Bytes>, String)> {
                match b {
                    None => Ok((None, String::new())),
                    Some(Term::Literal(l)) => {
                        let k = value::literal_to_bytes(&kt, l)
                            .map_err(|e| invalid(e.for_column(&n)))?;
                        let text = value::to_cql_literal(&kt, &k);
                        Ok((Some(Bytes::from(k)), text))
                    }
                    Some(_) => Err(invalid("Only constants are supported as slice bounds")),
                }
            };
            let (lo, lt) = bound(lo)?;
            let (hi, ht) = bound(hi)?;
            (
                SExpr::Slice(Box::new(x), ty.clone(), lo, hi),
                format!("{n}[{lt}..{ht}]"),
                ty,
            )
        }
        SelectorExpr::Binary(op, l, r) => {
            let is_marker = |e: &SelectorExpr| matches!(e, SelectorExpr::Term(Term::Bind { .. }));
            if is_marker(l) || is_marker(r) {
                let text = |e: &SelectorExpr| match e {
                    SelectorExpr::Term(term) => super::eval::term_text(term),
                    SelectorExpr::Column(c) => c.clone(),
                    _ => "(...)".into(),
                };
                return Err(invalid(format!(
                    "Ambiguous '{}' operation with args {} and {}: use type hint to disambiguate, example '(int) ?'",
                    super::arith::symbol(*op),
                    text(l),
                    text(r)
                )));
            }
            let (lx, ln, lt) = plan_operand(t, ctx, l)?;
            let (rx, rn, rt) = plan_operand(t, ctx, r)?;
            let ret = super::arith::result_type(*op, &lt, &rt, (&ln, &rn)).map_err(invalid)?;
            (
                SExpr::Op(*op, Box::new((lx, lt, rx, rt)), ret.clone()),
                format!("{ln} {} {rn}", super::arith::symbol(*op)),
                ret,
            )
        }
        SelectorExpr::Negate(inner) => {
            let (x, n, ty) = plan_operand(t, ctx, inner)?;
            if !super::arith::is_numeric(&ty) {
                return Err(invalid(format!(
                    "the '-' operation is not supported on {n} of type {ty}"
                )));
            }
            let ty = if matches!(ty, CqlType::Counter) {
                CqlType::Bigint
            } else {
                ty
            };
            (SExpr::Neg(Box::new(x), ty.clone()), format!("-{n}"), ty)
        }
        // A literal or a type-hinted term as a selector (`SELECT 5 AS v`, `(int) ?`): a constant
        // of the literal's preferred type or of the hint.
        SelectorExpr::Term(Term::Literal(_) | Term::TypeHint(..)) => plan_operand(t, ctx, e)?,
        other => {
            return Err(invalid(format!(
                "This selector is not supported yet: {other:?}"
            )))
        }
    })
}

/// An operand of an operation in a selection: constants get Cassandra's preferred type for
/// literals (int, bigint or varint; double; duration ...) and keep their text as the name.
fn plan_operand(
    t: &TableDef,
    ctx: Option<&Ctx>,
    e: &SelectorExpr,
) -> Result<(SExpr, String, CqlType)> {
    match e {
        SelectorExpr::Term(term @ Term::Literal(l)) => {
            let text = super::eval::term_text(term);
            let Some(ty) = super::arith::literal_type(l) else {
                return Ok((SExpr::Const(None), text, CqlType::Int));
            };
            let v = value::literal_to_bytes(&ty, l).map_err(|e| invalid(e.for_column(&text)))?;
            Ok((SExpr::Const(Some(Bytes::from(v))), text, ty))
        }
        SelectorExpr::Term(term @ Term::TypeHint(crate::cql::ast::TypeExpr::Native(n), _)) => {
            let ty = CqlType::native_from_name(n)
                .ok_or_else(|| invalid(format!("Unknown type {n}")))?;
            selection_marker(term, ty, "operation", ctx)
        }
        SelectorExpr::Term(term) => Err(invalid(format!(
            "Ambiguous operation with argument {}: use type hint to disambiguate, example '(int) ?'",
            super::eval::term_text(term)
        ))),
        other => plan_sexpr(t, ctx, other),
    }
}

/// A bind marker (or other term) in a selection, of type `ty`: its bound value at execution,
/// a typed placeholder when only describing the statement.
fn selection_marker(
    term: &Term,
    ty: CqlType,
    receiver: &str,
    ctx: Option<&Ctx>,
) -> Result<(SExpr, String, CqlType)> {
    let text = super::eval::term_text(term);
    let v = match ctx {
        Some(ctx) => eval(term, &ty, receiver, ctx)?.bytes().cloned(),
        None => None,
    };
    Ok((SExpr::Const(v), text, ty))
}

const FILTERING_MSG: &str = "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING";

fn column_index(t: &TableDef, name: &str) -> Result<usize> {
    super::require_column_index(t, name)
}

fn plan_projection(
    t: &TableDef,
    ctx: Option<&Ctx>,
    sel: &Select,
) -> Result<Vec<(Proj, String, CqlType)>> {
    let mut out = Vec::new();
    match &sel.selection {
        Selection::All => {
            for (i, c) in t.columns.iter().enumerate() {
                out.push((Proj::Column(i), c.name.clone(), c.ty.clone()));
            }
        }
        Selection::List(items) => {
            for s in items {
                let (p, name, ty) = plan_selector(t, ctx, &s.expr)?;
                out.push((p, s.alias.clone().unwrap_or(name), ty));
            }
        }
    }
    Ok(out)
}

fn plan_selector(
    t: &TableDef,
    ctx: Option<&Ctx>,
    e: &SelectorExpr,
) -> Result<(Proj, String, CqlType)> {
    Ok(match e {
        SelectorExpr::Column(c) => {
            let i = column_index(t, c)?;
            (Proj::Column(i), c.clone(), t.columns[i].ty.clone())
        }
        SelectorExpr::CountAll => (
            Proj::Agg(super::aggregate::AggKind::CountRows, None),
            "count".into(),
            CqlType::Bigint,
        ),
        SelectorExpr::WriteTime(c) | SelectorExpr::MaxWriteTime(c) | SelectorExpr::Ttl(c) => {
            let i = column_index(t, c)?;
            let col = &t.columns[i];
            let (timing, fname, ty) = match e {
                SelectorExpr::WriteTime(_) => (Timing::WriteTime, "writetime", CqlType::Bigint),
                SelectorExpr::MaxWriteTime(_) => {
                    (Timing::MaxWriteTime, "maxwritetime", CqlType::Bigint)
                }
                _ => (Timing::Ttl, "ttl", CqlType::Int),
            };
            if matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
                return Err(invalid(format!(
                    "Cannot use selection function {fname} on PRIMARY KEY part {c}"
                )));
            }
            // Cassandra 5.0: one timestamp or TTL per element of a non-frozen collection or
            // UDT, as a list (maxwritetime stays one value: the newest).
            let ty = if col.ty.is_multi_cell() && timing != Timing::MaxWriteTime {
                CqlType::List(Box::new(ty))
            } else {
                ty
            };
            (Proj::Timing(i, timing), format!("{fname}({c})"), ty)
        }
        SelectorExpr::Function { name, args, .. } if name == "token" => {
            let cols: Vec<&str> = args
                .iter()
                .map(|a| match a {
                    SelectorExpr::Column(c) => Ok(c.as_str()),
                    _ => Err(invalid(
                        "token() takes the partition key columns as arguments",
                    )),
                })
                .collect::<Result<_>>()?;
            let pk: Vec<&str> = t.pk_columns().map(|c| c.name.as_str()).collect();
            if cols != pk {
                return Err(invalid(format!(
                    "Type error: token() requires the partition key columns in order: {}",
                    pk.join(", ")
                )));
            }
            (
                Proj::Token,
                format!("system.token({})", cols.join(", ")),
                CqlType::Bigint,
            )
        }
        SelectorExpr::Function { name, args, .. } if name == "tojson" && args.len() == 1 => {
            let (p, n, ty) = plan_selector(t, ctx, &args[0])?;
            (
                Proj::ToJson(Box::new(p), ty),
                format!("system.tojson({n})"),
                CqlType::Text,
            )
        }
        SelectorExpr::Function { name, args, .. }
            if name == "count" && args.len() == 1 && matches!(args[0], SelectorExpr::Term(_)) =>
        {
            (
                Proj::Agg(super::aggregate::AggKind::CountRows, None),
                "count".into(),
                CqlType::Bigint,
            )
        }
        SelectorExpr::Function { name, args, .. }
            if super::aggregate::AggKind::from_name(name).is_some() && args.len() == 1 =>
        {
            let kind = super::aggregate::AggKind::from_name(name).expect("checked");
            let SelectorExpr::Column(c) = &args[0] else {
                return Err(invalid(format!(
                    "Aggregate {name} takes a column as its argument"
                )));
            };
            let i = column_index(t, c)?;
            let ty = t.columns[i].ty.clone();
            let rt = super::aggregate::result_type(kind, &ty).ok_or_else(|| {
                invalid(format!(
                    "Invalid call to function {name}, none of its type signatures match (known type signatures: system.{name} : (numeric type) -> numeric type) for column {c} of type {ty}"
                ))
            })?;
            (Proj::Agg(kind, Some(i)), format!("system.{name}({c})"), rt)
        }
        other => {
            let (x, n, ty) = plan_sexpr(t, ctx, other)?;
            (Proj::Expr(Box::new(x)), n, ty)
        }
    })
}

/// The `[json]` text of one row whose cells (`[int len][bytes]` each) are `cells`.
fn row_json(proj: &[(Proj, String, CqlType)], mut cells: &[u8]) -> String {
    let mut out = String::from("{");
    for (i, (_, name, ty)) in proj.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let key = if name.contains('(') {
            name.clone()
        } else {
            crate::cql::types::quote_ident(name)
        };
        out.push_str(&serde_json::Value::String(key).to_string());
        out.push_str(": ");
        let len = cells
            .get(..4)
            .map_or(-1, |b| i32::from_be_bytes(b.try_into().expect("4 bytes")));
        cells = cells.get(4..).unwrap_or_default();
        if len < 0 {
            out.push_str("null");
        } else {
            let (v, rest) = cells.split_at((len as usize).min(cells.len()));
            cells = rest;
            out.push_str(&value::to_json(ty, v));
        }
    }
    out.push('}');
    out
}

/// The result columns of a SELECT (for PREPARE and for the rows' metadata).
pub fn result_columns(t: &TableDef, sel: &Select) -> Result<Vec<ResultColumn>> {
    if sel.json {
        return Ok(vec![ResultColumn {
            keyspace: t.keyspace.clone(),
            table: t.name.clone(),
            name: "[json]".into(),
            ty: CqlType::Text,
        }]);
    }
    Ok(plan_projection(t, None, sel)?
        .into_iter()
        .map(|(_, name, ty)| ResultColumn {
            keyspace: t.keyspace.clone(),
            table: t.name.clone(),
            name,
            ty,
        })
        .collect())
}

/// A restriction evaluated per row.
struct Filter {
    col: usize,
    op: Operator,
    values: Vec<Bytes>,
    /// A multi-column restriction `(c1, c2) op (v1, v2)`: the columns (the first is `col`) and
    /// one tuple per value (several for IN).
    tuple: Option<(Vec<usize>, Vec<Vec<Bytes>>)>,
    /// `m[k] = v`: `values` holds the key and the value of the map entry.
    entry: bool,
}

/// Lexicographic comparison of a row's values with a tuple, column by column.
fn compare_tuple(
    t: &TableDef,
    cols: &[usize],
    row: &[Option<&[u8]>],
    tuple: &[Bytes],
) -> Option<Ordering> {
    for ((&ci, v), x) in cols.iter().zip(row).zip(tuple) {
        let o = value::compare(&t.columns[ci].ty, (*v)?, x);
        if o != Ordering::Equal {
            return Some(o);
        }
    }
    Some(Ordering::Equal)
}

impl Filter {
    fn matches_tuple(&self, t: &TableDef, row: &[Option<&[u8]>]) -> bool {
        let Some((cols, tuples)) = &self.tuple else {
            return false;
        };
        let cmp = |tuple: &Vec<Bytes>| compare_tuple(t, cols, row, tuple);
        match self.op {
            Operator::Eq | Operator::In => tuples.iter().any(|x| cmp(x) == Some(Ordering::Equal)),
            Operator::Lt => cmp(&tuples[0]) == Some(Ordering::Less),
            Operator::Le => matches!(cmp(&tuples[0]), Some(Ordering::Less | Ordering::Equal)),
            Operator::Gt => cmp(&tuples[0]) == Some(Ordering::Greater),
            Operator::Ge => matches!(cmp(&tuples[0]), Some(Ordering::Greater | Ordering::Equal)),
            _ => false,
        }
    }

    fn matches(&self, ty: &CqlType, v: Option<&[u8]>) -> bool {
        let Some(v) = v else { return false };
        if self.entry {
            let CqlType::Map(kt, vt) = ty.unfrozen() else {
                return false;
            };
            return value::map_entries(v)
                .map(|es| {
                    es.iter().any(|(k, x)| {
                        value::compare(kt, k, &self.values[0]) == Ordering::Equal
                            && value::compare(vt, x, &self.values[1]) == Ordering::Equal
                    })
                })
                .unwrap_or(false);
        }
        match self.op {
            Operator::Eq | Operator::In => self
                .values
                .iter()
                .any(|x| value::compare(ty, v, x) == Ordering::Equal),
            Operator::Ne => self
                .values
                .iter()
                .all(|x| value::compare(ty, v, x) != Ordering::Equal),
            Operator::Lt => value::compare(ty, v, &self.values[0]) == Ordering::Less,
            Operator::Le => value::compare(ty, v, &self.values[0]) != Ordering::Greater,
            Operator::Gt => value::compare(ty, v, &self.values[0]) == Ordering::Greater,
            Operator::Ge => value::compare(ty, v, &self.values[0]) != Ordering::Less,
            Operator::Contains | Operator::ContainsKey => contains(ty, self.op, v, &self.values[0]),
            _ => false,
        }
    }
}

/// The value of the entry with key `key` (of type `kt`) in serialized map `v`.
pub(crate) fn map_value<'a>(kt: &CqlType, v: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    value::map_entries(v)
        .ok()?
        .into_iter()
        .find(|(k, _)| value::compare(kt, k, key) == Ordering::Equal)
        .map(|(_, x)| x)
}

/// Field (component) `i` of a serialized UDT or tuple; None when null or absent.
pub(crate) fn field_value(v: &[u8], i: usize) -> Option<&[u8]> {
    value::tuple_components(v).ok()?.get(i).copied().flatten()
}

/// Whether collection `v` of type `ty` holds `x`: as an element of a list or set or a value of
/// a map (CONTAINS), or as a key of a map (CONTAINS KEY).
pub(crate) fn contains(ty: &CqlType, op: Operator, v: &[u8], x: &[u8]) -> bool {
    let same = |t: &CqlType, e: &[u8]| value::compare(t, e, x) == Ordering::Equal;
    match (op, ty.unfrozen()) {
        (Operator::Contains, CqlType::List(e) | CqlType::Set(e)) => value::collection_elements(v)
            .is_ok_and(|mut it| it.any(|i| i.ok().flatten().is_some_and(|i| same(e, i)))),
        (Operator::Contains, CqlType::Map(_, vt)) => {
            value::map_entries(v).is_ok_and(|es| es.iter().any(|(_, i)| same(vt, i)))
        }
        (Operator::ContainsKey, CqlType::Map(kt, _)) => {
            value::map_entries(v).is_ok_and(|es| es.iter().any(|(k, _)| same(kt, k)))
        }
        _ => false,
    }
}

/// The type CONTAINS (a list or set element, a map value) or CONTAINS KEY (a map key)
/// compares with; None for other operators and for types without one.
pub(crate) fn contains_operand(ty: &CqlType, op: Operator) -> Option<CqlType> {
    match (op, ty.unfrozen()) {
        (Operator::Contains, CqlType::List(e) | CqlType::Set(e) | CqlType::Map(_, e)) => {
            Some((**e).clone())
        }
        (Operator::ContainsKey, CqlType::Map(k, _)) => Some((**k).clone()),
        _ => None,
    }
}

/// The element type CONTAINS (or the key type CONTAINS KEY) compares with, or Cassandra's
/// error for a column that has none.
pub(crate) fn contains_type(col: &crate::schema::ColumnDef, op: Operator) -> Result<CqlType> {
    if let Some(t) = contains_operand(&col.ty, op) {
        return Ok(t);
    }
    match op {
        Operator::Contains => Err(invalid(format!(
            "Cannot use CONTAINS on non-collection column {}",
            col.name
        ))),
        _ => Err(invalid(format!(
            "Cannot use CONTAINS KEY on non-map column {}",
            col.name
        ))),
    }
}

/// Every column restriction as a row filter (virtual tables are filtered in memory).
fn all_filters(t: &TableDef, sel: &Select, ctx: &Ctx) -> Result<Vec<Filter>> {
    let mut out = Vec::new();
    for r in &sel.where_clause {
        let RelationLhs::Column(name) = &r.lhs else {
            return Err(invalid(
                "Only column restrictions are supported on system tables",
            ));
        };
        let ci = column_index(t, name)?;
        let ty = &t.columns[ci].ty;
        let values = match r.op {
            Operator::In => in_values(&r.rhs, ty, name, ctx)?
                .into_iter()
                .filter_map(|v| v.bytes().cloned())
                .collect(),
            Operator::Eq
            | Operator::Ne
            | Operator::Lt
            | Operator::Le
            | Operator::Gt
            | Operator::Ge => {
                vec![eval_one(&r.rhs, ty, name, ctx)?]
            }
            other => {
                return Err(invalid(format!(
                    "Operator {} is not supported on system tables",
                    other.as_str()
                )))
            }
        };
        out.push(Filter {
            col: ci,
            op: r.op,
            values,
            tuple: None,
            entry: false,
        });
    }
    Ok(out)
}

/// `m[k] = v` on a map column: rows whose map holds that entry.
fn entry_filter(t: &TableDef, c: &str, key: &Term, r: &Relation, ctx: &Ctx) -> Result<Filter> {
    let ci = column_index(t, c)?;
    let CqlType::Map(kt, vt) = t.columns[ci].ty.unfrozen() else {
        return Err(invalid(format!("Column {c} cannot be used as a map")));
    };
    if r.op != Operator::Eq {
        return Err(invalid(format!(
            "Only EQ relations are supported on map entries (column {c})"
        )));
    }
    Ok(Filter {
        col: ci,
        op: Operator::Eq,
        values: vec![eval_one(key, kt, c, ctx)?, eval_one(&r.rhs, vt, c, ctx)?],
        tuple: None,
        entry: true,
    })
}

/// A multi-column restriction `(c1, c2) op (v1, v2)` on consecutive clustering columns.
fn tuple_filter(t: &TableDef, cols: &[String], r: &Relation, ctx: &Ctx) -> Result<Filter> {
    let (idx, tuples) = tuple_values(t, cols, r, ctx)?;
    Ok(Filter {
        col: idx[0],
        op: r.op,
        values: Vec::new(),
        tuple: Some((idx, tuples)),
        entry: false,
    })
}

/// The columns (indexes, in clustering order) and values of a multi-column relation
/// `(c1, c2) op (v1, v2)`: one tuple, or one per IN element; with Cassandra's errors for
/// columns that are not consecutive clustering columns and for malformed tuples.
pub(crate) fn tuple_values(
    t: &TableDef,
    cols: &[String],
    r: &Relation,
    ctx: &Ctx,
) -> Result<(Vec<usize>, Vec<Vec<Bytes>>)> {
    let idx: Vec<usize> = cols
        .iter()
        .map(|c| column_index(t, c))
        .collect::<Result<_>>()?;
    for (n, &ci) in idx.iter().enumerate() {
        let c = &t.columns[ci];
        if c.kind != ColumnKind::Clustering {
            return Err(invalid(format!(
                "Multi-column relations can only be applied to clustering columns but was applied to: {}",
                c.name
            )));
        }
        if n > 0 && c.position != t.columns[idx[n - 1]].position + 1 {
            return Err(invalid(
                "Clustering columns must appear in the PRIMARY KEY order in multi-column relations",
            ));
        }
    }
    let types: Vec<CqlType> = idx.iter().map(|&i| t.columns[i].ty.clone()).collect();
    let tuple_ty = CqlType::Tuple(types.clone());
    let name = format!("({})", cols.join(","));
    let one = |term: &Term| -> Result<Vec<Bytes>> {
        match term {
            Term::Tuple(items) if items.len() == types.len() => items
                .iter()
                .zip(&types)
                .zip(cols)
                .map(|((it, ty), c)| eval_one(it, ty, c, ctx))
                .collect(),
            Term::Tuple(items) => Err(invalid(format!(
                "Expected {} elements in value tuple, but got {}: {name}",
                types.len(),
                items.len()
            ))),
            other => {
                let b = eval_one(other, &tuple_ty, &name, ctx)?;
                let parts = value::tuple_components(&b)
                    .map_err(|e| invalid(format!("Invalid tuple value for {name}: {e}")))?;
                if parts.len() != types.len() {
                    return Err(invalid(format!("Invalid tuple value for {name}")));
                }
                parts
                    .into_iter()
                    .map(|p| {
                        p.map(Bytes::copy_from_slice).ok_or_else(|| {
                            invalid(format!("Invalid null value in tuple for {name}"))
                        })
                    })
                    .collect()
            }
        }
    };
    let tuples = match (r.op, &r.rhs) {
        (Operator::In, Term::List(items)) => items.iter().map(one).collect::<Result<Vec<_>>>()?,
        (Operator::In, other) => {
            let list_ty = CqlType::List(Box::new(tuple_ty.clone()));
            let b = eval_one(other, &list_ty, &name, ctx)?;
            let elems = super::write::split_list(&b)
                .ok_or_else(|| invalid(format!("Invalid list value for IN on {name}")))?;
            elems
                .iter()
                .map(|e| {
                    value::tuple_components(e)
                        .map_err(|x| invalid(format!("Invalid tuple value for {name}: {x}")))?
                        .into_iter()
                        .map(|p| {
                            p.map(Bytes::copy_from_slice).ok_or_else(|| {
                                invalid(format!("Invalid null value in tuple for {name}"))
                            })
                        })
                        .collect::<Result<Vec<_>>>()
                })
                .collect::<Result<Vec<_>>>()?
        }
        (Operator::Eq | Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge, term) => {
            vec![one(term)?]
        }
        (op, _) => {
            return Err(invalid(format!(
                "Unsupported operator {} in a multi-column relation",
                op.as_str()
            )))
        }
    };
    Ok((idx, tuples))
}

/// The per-partition row limit: PER PARTITION LIMIT n, or one row per partition for DISTINCT
/// (which may select only partition key and static columns).
fn per_partition_limit(
    t: &TableDef,
    sel: &Select,
    proj: &[(Proj, String, CqlType)],
    ctx: &Ctx,
) -> Result<Option<usize>> {
    if sel.distinct {
        for (p, name, _) in proj {
            let ok = match p {
                Proj::Column(i) => {
                    matches!(
                        t.columns[*i].kind,
                        ColumnKind::PartitionKey | ColumnKind::Static
                    )
                }
                Proj::Token | Proj::Agg(..) => true,
                _ => false,
            };
            if !ok {
                return Err(invalid(format!(
                    "SELECT DISTINCT queries must only request partition key columns and/or static columns (not {name})"
                )));
            }
        }
        let selected: Vec<usize> = proj
            .iter()
            .filter_map(|(p, _, _)| match p {
                Proj::Column(i) => Some(*i),
                _ => None,
            })
            .collect();
        let missing: Vec<&str> = t
            .partition_key
            .iter()
            .filter(|i| !selected.contains(i))
            .map(|&i| t.columns[i].name.as_str())
            .collect();
        // With the partition key restricted by = / IN (no key range) Cassandra lets DISTINCT
        // select static columns alone.
        let pk_restricted = t.pk_columns().all(|c| {
            sel.where_clause.iter().any(|r| {
                matches!(r.op, Operator::Eq | Operator::In)
                    && matches!(&r.lhs, RelationLhs::Column(n) if *n == c.name)
            })
        });
        if !missing.is_empty() && !pk_restricted && !matches!(sel.selection, Selection::All) {
            return Err(invalid(format!(
                "SELECT DISTINCT queries must request all the partition key columns (missing {})",
                missing.join(", ")
            )));
        }
        if sel.per_partition_limit.is_some() {
            return Err(invalid(
                "PER PARTITION LIMIT is not allowed with SELECT DISTINCT queries",
            ));
        }
        return Ok(Some(1));
    }
    limit_value(
        sel.per_partition_limit.as_ref(),
        "[per_partition_limit]",
        "PER PARTITION LIMIT",
        ctx,
    )
}

/// The value of LIMIT / PER PARTITION LIMIT (`what`): None without one or when its bind value
/// is unset (Cassandra: no limit); null and values below 1 are Cassandra's errors.
fn limit_value(term: Option<&Term>, name: &str, what: &str, ctx: &Ctx) -> Result<Option<usize>> {
    let Some(term) = term else {
        return Ok(None);
    };
    let v = match eval(term, &CqlType::Int, name, ctx)? {
        Val::Value(v) => v,
        Val::Unset => return Ok(None),
        Val::Null => {
            return Err(invalid(format!(
                "Invalid null value of {}",
                what.to_lowercase()
            )))
        }
    };
    let n = i32::from_be_bytes(
        v[..]
            .try_into()
            .map_err(|_| invalid(format!("Invalid {}", what.to_lowercase())))?,
    );
    if n <= 0 {
        return Err(invalid(format!("{what} must be strictly positive")));
    }
    Ok(Some(n as usize))
}

/// For a MultiHash table whose WHERE gives a prefix of the key levels (= or IN on levels 1..k,
/// k below the number of levels), the token ranges holding those prefixes, intersected with
/// (token_lo, token_hi]; None when the restriction is not such a prefix.
fn multihash_prefix_ranges(
    t: &TableDef,
    pk_vals: &[Option<Vec<Bytes>>],
    token_lo: i128,
    token_hi: i128,
) -> Option<Vec<(i128, i128)>> {
    if t.options.partition_key_kind != crate::schema::PartitionKeyKind::MultiHash {
        return None;
    }
    let given = pk_vals.iter().take_while(|v| v.is_some()).count();
    if given == 0 || given == pk_vals.len() || pk_vals[given..].iter().any(|v| v.is_some()) {
        return None;
    }
    let mut ranges: Vec<(i128, i128)> =
        super::write::combinations(pk_vals[..given].iter().flatten())
            .iter()
            .map(|prefix| {
                let (a, b) = crate::partition::token::multihash_prefix_range(prefix, pk_vals.len());
                ((a as i128).max(token_lo), (b as i128).min(token_hi))
            })
            .filter(|(a, b)| a < b)
            .collect();
    ranges.sort_unstable();
    ranges.dedup();
    // Merge overlapping ranges (prefixes whose hashes collide).
    let mut merged: Vec<(i128, i128)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    Some(merged)
}

/// How a read is routed over the table's physical partitions, for traces: single-partition,
/// targeted (N of M) or fan-out, with the partitions read.
fn routing(engine: &Engine, t: &TableDef, target: &Target) -> String {
    let Some(map) = engine.maps.get(t.storage_id) else {
        return "Routing: table has no partition map".to_string();
    };
    let total = map.parts.len();
    let list = |ids: &[u64]| {
        ids.iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let over_ranges = |ranges: &[(i128, i128)]| -> Vec<u64> {
        let mut ids: Vec<u64> = map
            .parts
            .iter()
            .filter(|p| {
                ranges
                    .iter()
                    .any(|&(lo, hi)| (p.end as i128) > lo && (p.start as i128) < hi)
            })
            .map(|p| p.id)
            .collect();
        ids.dedup();
        ids
    };
    // A scan of the whole ring fans out; a key prefix or token range is targeted at the
    // partitions overlapping it (all of them, if it overlaps all).
    let describe = |ids: Vec<u64>, what: &str, targeted: bool| {
        if !targeted {
            format!(
                "Routing: fan-out to all {total} physical partitions ({what}): ids [{}]",
                list(&ids)
            )
        } else {
            format!(
                "Routing: targeted, {} of {total} physical partitions ({what}): ids [{}]",
                ids.len(),
                list(&ids)
            )
        }
    };
    match target {
        Target::Partitions(keys) => {
            let mut ids: Vec<u64> = keys
                .iter()
                .map(|k| map.route(table_token(t, k)).id)
                .collect();
            ids.sort_unstable();
            ids.dedup();
            if keys.len() == 1 {
                // The id and the position in token order, so "4 of 1" cannot be misread.
                let token = table_token(t, &keys[0]);
                let p = map.route(token);
                let position = map.parts.iter().position(|q| q.id == p.id).unwrap_or(0) + 1;
                format!(
                    "Routing: single-partition, physical partition id {} ({position} of {total}, tokens ({}, {}]), token {token}",
                    p.id, p.start, p.end
                )
            } else {
                format!(
                    "Routing: targeted, {} of {total} physical partitions for {} partition keys: ids [{}]",
                    ids.len(),
                    keys.len(),
                    list(&ids)
                )
            }
        }
        Target::Range(lo, hi) => {
            let full = *lo < MIN_TOKEN as i128 && *hi >= MAX_TOKEN as i128;
            describe(
                over_ranges(&[(*lo, *hi)]),
                if full { "full scan" } else { "token range" },
                !full,
            )
        }
        Target::Ranges(ranges) => describe(over_ranges(ranges), "key prefix", true),
        Target::Index { index, .. } => {
            let ids: Vec<u64> = map.parts.iter().map(|p| p.id).collect();
            describe(ids, &format!("secondary index {}", index.name), false)
        }
    }
}

/// GROUP BY columns: a prefix of the primary key (partition key columns, then clustering columns,
/// in order).
fn group_by_columns(t: &TableDef, sel: &Select) -> Result<Vec<usize>> {
    let key_order: Vec<usize> = t
        .partition_key
        .iter()
        .chain(&t.clustering)
        .copied()
        .collect();
    let mut out = Vec::with_capacity(sel.group_by.len());
    for (n, name) in sel.group_by.iter().enumerate() {
        let i = column_index(t, name)?;
        if key_order.get(n) != Some(&i) {
            return Err(invalid(
                "Group by currently only support groups of columns following their declared order in the PRIMARY KEY",
            ));
        }
        out.push(i);
    }
    if !out.is_empty() && out.len() < t.partition_key.len() {
        return Err(invalid(format!(
            "Group by is not supported on only a part of the partition key (missing {})",
            t.partition_key[out.len()..]
                .iter()
                .map(|&i| t.columns[i].name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(out)
}

/// Where to read: named partitions, or a token range (lo exclusive, hi inclusive).
enum Target {
    Partitions(Vec<Bytes>),
    Range(i128, i128),
    /// Several token ranges (lo exclusive, hi inclusive), sorted and disjoint: the ranges of the
    /// key prefixes a query gives on a hierarchical (MultiHash) table.
    Ranges(Vec<(i128, i128)>),
    /// The rows a secondary index lists for one value, within a token range.
    Index {
        index: crate::schema::IndexDef,
        ty: CqlType,
        value: Bytes,
        lo: i128,
        hi: i128,
    },
}

struct Plan {
    target: Target,
    /// Key range of rows inside a partition (relative to the partition prefix + KIND_ROW).
    slices: Vec<KeyRange>,
    filters: Vec<Filter>,
    limit: Option<usize>,
    reversed: bool,
    /// Whether a partition with no matching row yields its static-only row: Cassandra does so
    /// only when the query selects whole partitions (no restriction on clustering or regular
    /// columns) or is DISTINCT.
    static_rows: bool,
}

/// Cassandra's `queriesFullPartitions` (or DISTINCT): no relation names a clustering column or
/// a regular (non-static) column.
fn selects_whole_partitions(t: &TableDef, sel: &Select) -> bool {
    if sel.distinct {
        return true;
    }
    !sel.where_clause.iter().any(|r| match &r.lhs {
        RelationLhs::Tuple(_) => true,
        RelationLhs::Column(c) | RelationLhs::Element(c, _) => t
            .column(c)
            .is_some_and(|c| matches!(c.kind, ColumnKind::Clustering | ColumnKind::Regular)),
        RelationLhs::Token(_) => false,
    })
}

fn eval_one(term: &Term, ty: &CqlType, name: &str, ctx: &Ctx) -> Result<Bytes> {
    match eval(term, ty, name, ctx)? {
        Val::Value(b) => Ok(b),
        Val::Null => Err(invalid(format!(
            "Invalid null value in condition for column {name}"
        ))),
        Val::Unset => Err(invalid(format!("Invalid unset value for column {name}"))),
    }
}

fn plan(t: &TableDef, sel: &Select, ctx: &Ctx) -> Result<Plan> {
    super::select_rules::check(t, sel)?;
    let mut filters = Vec::new();
    let mut need_filtering = false;
    let mut token_lo: i128 = MIN_TOKEN as i128 - 1;
    let mut token_hi: i128 = MAX_TOKEN as i128;
    let mut has_token = false;
    let mut tuple_filters: Vec<Filter> = Vec::new();
    let mut entry_filters: Vec<Filter> = Vec::new();
    // Validate every relation first.
    for r in &sel.where_clause {
        match &r.lhs {
            RelationLhs::Column(c) => {
                column_index(t, c)?;
            }
            RelationLhs::Token(cols) => {
                let pk: Vec<&str> = t.pk_columns().map(|c| c.name.as_str()).collect();
                if cols.iter().map(String::as_str).collect::<Vec<_>>() != pk {
                    return Err(invalid(format!(
                        "The token function arguments must be in the partition key order: {}",
                        pk.join(", ")
                    )));
                }
                has_token = true;
                let v = match &r.rhs {
                    // token(k1, k2) > token(?, ?): the token of a partition key given as terms
                    Term::Function { name, args, .. } if name == "token" => {
                        let pk_cols: Vec<_> = t.pk_columns().collect();
                        if args.len() != pk_cols.len() {
                            return Err(invalid(format!(
                                "Invalid number of arguments in call to function system.token: {} required but {} provided",
                                pk_cols.len(),
                                args.len()
                            )));
                        }
                        let mut parts = Vec::with_capacity(args.len());
                        for (a, c) in args.iter().zip(&pk_cols) {
                            parts.push(eval_one(a, &c.ty, &c.name, ctx)?);
                        }
                        let refs: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
                        let pk = partition_key_bytes(&refs);
                        Bytes::copy_from_slice(&table_token(t, &pk).to_be_bytes())
                    }
                    other => eval_one(other, &CqlType::Bigint, "partition key token", ctx)?,
                };
                let tok = i64::from_be_bytes(
                    v[..]
                        .try_into()
                        .map_err(|_| invalid("Invalid token value"))?,
                ) as i128;
                match r.op {
                    Operator::Gt => token_lo = token_lo.max(tok),
                    Operator::Ge => token_lo = token_lo.max(tok - 1),
                    Operator::Le => {
                        // Cassandra: a range ending at the minimum token runs to the end of the ring.
                        if tok != MIN_TOKEN as i128 {
                            token_hi = token_hi.min(tok)
                        }
                    }
                    Operator::Lt => token_hi = token_hi.min(tok - 1),
                    Operator::Eq => {
                        token_lo = token_lo.max(tok - 1);
                        token_hi = token_hi.min(tok);
                    }
                    _ => {
                        return Err(invalid(format!(
                            "Unsupported operator {} on token()",
                            r.op.as_str()
                        )))
                    }
                }
            }
            RelationLhs::Tuple(cols) => tuple_filters.push(tuple_filter(t, cols, r, ctx)?),
            RelationLhs::Element(c, key) => entry_filters.push(entry_filter(t, c, key, r, ctx)?),
        }
    }
    // Partition key: all components by = / IN.
    let pk_vals = key_values(t, &sel.where_clause, ctx, &t.partition_key)?;
    let pk_given = pk_vals.iter().filter(|v| v.is_some()).count();
    let target = if pk_given == t.partition_key.len() {
        if has_token {
            return Err(invalid(
                "Columns of the partition key cannot be restricted by both token() and = or IN",
            ));
        }
        let mut keys = Vec::new();
        let cols: Vec<Vec<Bytes>> = pk_vals.into_iter().map(|v| v.unwrap_or_default()).collect();
        let mut combos: Vec<Vec<Bytes>> = vec![Vec::new()];
        for vals in &cols {
            combos = combos
                .into_iter()
                .flat_map(|p| {
                    vals.iter().map(move |v| {
                        let mut p = p.clone();
                        p.push(v.clone());
                        p
                    })
                })
                .collect();
        }
        // Cassandra reads IN partitions in partition key order (by each component's comparator),
        // without duplicates.
        let pk_types: Vec<&CqlType> = t.pk_columns().map(|c| &c.ty).collect();
        combos.sort_by(|a, b| {
            a.iter()
                .zip(b)
                .zip(&pk_types)
                .map(|((x, y), ty)| value::compare(ty, x, y))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal)
        });
        for parts in combos {
            let refs: Vec<&[u8]> = parts.iter().map(|b| &b[..]).collect();
            let k = Bytes::from(partition_key_bytes(&refs));
            super::write::check_partition_key(&k)?;
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        Target::Partitions(keys)
    } else if let Some(ranges) = multihash_prefix_ranges(t, &pk_vals, token_lo, token_hi) {
        // A prefix of a hierarchical key: only the token ranges holding it are read; the given
        // levels are re-checked per row (hashes of different prefixes can share a range).
        Target::Ranges(ranges)
    } else {
        if pk_given > 0 {
            if !sel.allow_filtering {
                let miss: Vec<&str> = t
                    .pk_columns()
                    .zip(&pk_vals)
                    .filter(|(_, v)| v.is_none())
                    .map(|(c, _)| c.name.as_str())
                    .collect();
                return Err(invalid(format!(
                    "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING (partition key parts {} are not restricted)",
                    miss.join(", ")
                )));
            }
            need_filtering = true;
        }
        Target::Range(token_lo, token_hi)
    };
    // Clustering: = / IN on a prefix, then at most one slice column.
    let single_partition = matches!(target, Target::Partitions(_));
    let mut prefix_vals: Vec<Vec<Bytes>> = Vec::new();
    let mut slice_col: Option<(usize, Vec<(Operator, Bytes)>)> = None;
    for (pos, &ci) in t.clustering.iter().enumerate() {
        let col = &t.columns[ci];
        let rels: Vec<&Relation> = sel
            .where_clause
            .iter()
            .filter(|r| matches!(&r.lhs, RelationLhs::Column(c) if *c == col.name))
            .collect();
        if rels.is_empty() {
            break;
        }
        let eq = rels
            .iter()
            .find(|r| matches!(r.op, Operator::Eq | Operator::In));
        if let Some(r) = eq {
            if slice_col.is_some() {
                break;
            }
            let vals = if r.op == Operator::Eq {
                vec![eval_one(&r.rhs, &col.ty, &col.name, ctx)?]
            } else {
                in_values(&r.rhs, &col.ty, &col.name, ctx)?
                    .into_iter()
                    .filter_map(|v| v.bytes().cloned())
                    .collect()
            };
            prefix_vals.push(vals);
            let _ = pos;
        } else {
            let mut bounds = Vec::new();
            for r in rels {
                if !matches!(
                    r.op,
                    Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge
                ) {
                    continue;
                }
                bounds.push((r.op, eval_one(&r.rhs, &col.ty, &col.name, ctx)?));
            }
            slice_col = Some((ci, bounds));
            break;
        }
    }
    let used_ck = prefix_vals.len() + usize::from(slice_col.is_some());
    // Everything not used for key access becomes a filter.
    for r in &sel.where_clause {
        let RelationLhs::Column(name) = &r.lhs else {
            continue;
        };
        let ci = column_index(t, name)?;
        let col = &t.columns[ci];
        let used = match col.kind {
            ColumnKind::PartitionKey => matches!(target, Target::Partitions(_)),
            ColumnKind::Clustering => col.position < used_ck && single_partition,
            _ => false,
        };
        if used {
            continue;
        }
        match col.kind {
            ColumnKind::Clustering if !single_partition => {}
            // A slice of a partition key column reads every partition (Cassandra: ALLOW
            // FILTERING); = / IN of hierarchical key levels are read through token ranges.
            ColumnKind::PartitionKey => {
                if !matches!(r.op, Operator::Eq | Operator::In) {
                    need_filtering = true;
                }
            }
            _ => need_filtering = true,
        }
        if col.kind == ColumnKind::Clustering && col.position >= used_ck {
            need_filtering = true;
        }
        let values = match r.op {
            Operator::In => in_values(&r.rhs, &col.ty, name, ctx)?
                .into_iter()
                .filter_map(|v| v.bytes().cloned())
                .collect(),
            Operator::Eq
            | Operator::Ne
            | Operator::Lt
            | Operator::Le
            | Operator::Gt
            | Operator::Ge => {
                vec![eval_one(&r.rhs, &col.ty, name, ctx)?]
            }
            Operator::Contains | Operator::ContainsKey => {
                vec![eval_one(&r.rhs, &contains_type(col, r.op)?, name, ctx)?]
            }
            other => {
                return Err(invalid(format!(
                    "Operator {} is not supported yet",
                    other.as_str()
                )))
            }
        };
        filters.push(Filter {
            col: ci,
            op: r.op,
            values,
            tuple: None,
            entry: false,
        });
    }
    if !single_partition && (used_ck > 0 || !tuple_filters.is_empty()) {
        need_filtering = true;
    }
    if let Some(f) = tuple_filters.first() {
        // A multi-column restriction must follow the clustering columns restricted before it.
        let first = t.columns[f.col].position;
        if first > used_ck {
            need_filtering = true;
        }
    }
    filters.extend(tuple_filters);
    if !entry_filters.is_empty() {
        need_filtering = true;
    }
    filters.extend(entry_filters);
    let (target, need_filtering) = use_index(
        t,
        target,
        &filters,
        need_filtering,
        single_partition,
        used_ck + pk_given,
        sel.allow_filtering,
    );
    if need_filtering && !sel.allow_filtering {
        return Err(invalid(FILTERING_MSG));
    }
    let slices = if single_partition {
        clustering_slices(t, &prefix_vals, slice_col.as_ref())
    } else {
        vec![(Bound::Unbounded, Bound::Unbounded)]
    };
    let limit = limit_value(sel.limit.as_ref(), "[limit]", "LIMIT", ctx)?;
    let mut reversed = false;
    if let Some((first, dir)) = sel.order_by.first() {
        let ci = column_index(t, first)?;
        let col = &t.columns[ci];
        if col.kind != ColumnKind::Clustering {
            return Err(invalid(format!(
                "Order by is currently only supported on the clustered columns of the PRIMARY KEY, got {first}"
            )));
        }
        if !single_partition {
            return Err(invalid(
                "ORDER BY is only supported when the partition key is restricted by an EQ or an IN.",
            ));
        }
        reversed = (*dir == crate::cql::ast::Order::Desc) != col.desc;
    }
    Ok(Plan {
        target,
        slices,
        filters,
        limit,
        reversed,
        static_rows: selects_whole_partitions(t, sel),
    })
}

/// A secondary index on a column restricted by `=` serves the query: a scan becomes an index
/// lookup, and within one partition the restriction needs no ALLOW FILTERING. Returns the target
/// and whether the query still filters.
fn use_index(
    t: &TableDef,
    target: Target,
    filters: &[Filter],
    need_filtering: bool,
    single_partition: bool,
    key_restrictions: usize,
    allow_filtering: bool,
) -> (Target, bool) {
    use crate::schema::IndexKind;
    if !need_filtering || t.indexes.is_empty() {
        return (target, need_filtering);
    }
    // The index that answers a filter: `=` on a value index, CONTAINS on a values index,
    // CONTAINS KEY on a keys index.
    let index_for = |f: &Filter| -> Option<&crate::schema::IndexDef> {
        if f.tuple.is_some() {
            return None;
        }
        t.indexes.iter().find(|x| {
            x.column == t.columns[f.col].name
                && match f.op {
                    Operator::Eq if f.entry => x.kind == IndexKind::Entries,
                    Operator::Eq => matches!(x.kind, IndexKind::Value | IndexKind::Full),
                    Operator::Contains => x.kind == IndexKind::Values,
                    Operator::ContainsKey => x.kind == IndexKind::Keys,
                    _ => false,
                }
        })
    };
    let indexed = |f: &Filter| index_for(f).is_some();
    if single_partition {
        // Filtering only on indexed columns is what the index is for.
        let still = filters
            .iter()
            .any(|f| !indexed(f) && t.columns[f.col].kind != ColumnKind::PartitionKey);
        return (target, still);
    }
    let Target::Range(lo, hi) = target else {
        return (target, need_filtering);
    };
    let Some(f) = filters.iter().find(|f| indexed(f)) else {
        return (Target::Range(lo, hi), need_filtering);
    };
    let others = filters.len() > 1 || key_restrictions > 0;
    if others && !allow_filtering {
        return (Target::Range(lo, hi), need_filtering);
    }
    let col = &t.columns[f.col];
    if col.kind == ColumnKind::Static {
        // Index entries are kept for rows only, and a static value belongs to the partition:
        // the query is answered by a scan that checks each partition's static value (every row
        // of a matching partition, or its static-only row), with the index's permission.
        return (Target::Range(lo, hi), others);
    }
    let index = index_for(f).expect("checked above").clone();
    let ty = super::index::indexed_type(&index, &col.ty);
    (
        Target::Index {
            index,
            ty,
            value: if f.entry {
                Bytes::from(value::encode_tuple(&[
                    Some(&f.values[0]),
                    Some(&f.values[1]),
                ]))
            } else {
                f.values[0].clone()
            },
            lo,
            hi,
        },
        others,
    )
}

/// Clustering key ranges (relative to a partition's row prefix) for = / IN prefixes and a slice.
pub(crate) fn clustering_slices(
    t: &TableDef,
    prefix_vals: &[Vec<Bytes>],
    slice: Option<&(usize, Vec<(Operator, Bytes)>)>,
) -> Vec<KeyRange> {
    let types: Vec<(&CqlType, bool)> = t.clustering_columns().map(|c| (&c.ty, c.desc)).collect();
    // Every combination of the = / IN values of the prefix columns.
    let mut prefixes: Vec<Vec<u8>> = super::write::combinations(prefix_vals)
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

fn flip(op: Operator) -> Operator {
    match op {
        Operator::Gt => Operator::Lt,
        Operator::Ge => Operator::Le,
        Operator::Lt => Operator::Gt,
        Operator::Le => Operator::Ge,
        o => o,
    }
}

fn bound_key(b: &Bound<Vec<u8>>) -> Option<&Vec<u8>> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}

/// The tighter of two bounds on the same side of a range: the greater for a lower bound, the
/// smaller for an upper bound; on equal keys an exclusive bound is the tighter.
fn tighter(a: Bound<Vec<u8>>, b: Bound<Vec<u8>>, lower: bool) -> Bound<Vec<u8>> {
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

/// For the paging fuzz target: a client's paging state decoded and encoded again (None when
/// it is refused).
#[doc(hidden)]
pub fn paging_state_roundtrip(b: &[u8]) -> Option<Bytes> {
    PagingState::decode(b).ok().map(|p| p.encode())
}

/// Where a paged query stopped.
#[derive(Debug, Default)]
struct PagingState {
    /// Index into the partition list (partition-list queries).
    partition: u32,
    /// Storage key of the last row returned (empty: start of the partition).
    last_key: Vec<u8>,
    /// Rows still allowed by LIMIT.
    remaining: Option<u32>,
    /// Rows already returned from the partition of `last_key` (PER PARTITION LIMIT).
    partition_rows: u32,
    /// Resume at `last_key` itself (GROUP BY stopped before a row it did not consume).
    inclusive: bool,
}

const PAGING_VERSION: u8 = 2;

impl PagingState {
    fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(16 + self.last_key.len());
        b.put_u8(PAGING_VERSION);
        b.put_u32(self.partition);
        b.put_u32(self.remaining.map_or(u32::MAX, |r| r));
        b.put_u32(self.partition_rows | if self.inclusive { 1 << 31 } else { 0 });
        b.put_u32(self.last_key.len() as u32);
        b.extend_from_slice(&self.last_key);
        b.freeze()
    }
    fn decode(b: &[u8]) -> Result<PagingState> {
        let bad = || invalid("Invalid value for the paging state");
        if b.len() < 17 || b[0] != PAGING_VERSION {
            return Err(bad());
        }
        let int = |at: usize| -> Result<u32> {
            Ok(u32::from_be_bytes(
                b[at..at + 4].try_into().map_err(|_| bad())?,
            ))
        };
        let (partition, remaining, partition_rows) = (int(1)?, int(5)?, int(9)?);
        let len = int(13)? as usize;
        if b.len() != 17 + len {
            return Err(bad());
        }
        Ok(PagingState {
            partition,
            remaining: (remaining != u32::MAX).then_some(remaining),
            partition_rows: partition_rows & !(1 << 31),
            inclusive: partition_rows & (1 << 31) != 0,
            last_key: b[17..].to_vec(),
        })
    }

    /// The bound a resumed scan starts from (ascending) or ends at (descending).
    fn resume_bound(&self) -> Bound<Vec<u8>> {
        if self.inclusive {
            Bound::Included(self.last_key.clone())
        } else {
            Bound::Excluded(self.last_key.clone())
        }
    }
}

/// Collects output rows and decides when a page is full.
struct Output<'a> {
    rows: Rows,
    proj: &'a [(Proj, String, CqlType)],
    table: &'a TableDef,
    page_rows: usize,
    page_bytes: usize,
    remaining: Option<usize>,
    now: i64,
    /// Aggregate queries: the groups being accumulated.
    agg: Option<Aggregation>,
    /// The last emit stopped before consuming its row: resume at that row.
    resume_inclusive: bool,
    /// SELECT JSON: each row becomes one `[json]` text cell (for aggregates, each group's
    /// row when it is written).
    json: bool,
    /// An aggregate query (`agg` is taken out while a row is accumulated).
    aggregating: bool,
    /// PER PARTITION LIMIT (DISTINCT is a limit of one).
    per_partition: Option<usize>,
    /// The partition the per-partition count is for, and its count.
    cur_pk: Option<Bytes>,
    cur_count: usize,
    /// The table's partition map and what the scan read per physical partition (for RU).
    map: Option<Arc<crate::partition::map::PartitionMap>>,
    meter: Vec<(Arc<crate::partition::map::PhysicalPartition>, u64, u64)>,
    /// A selector failed (an operation's division by zero): the query fails with it.
    error: std::cell::RefCell<Option<super::QueryError>>,
}

/// Aggregation state: one group at a time (rows arrive in primary key order, so a GROUP BY on
/// a primary key prefix sees each group's rows together).
struct Aggregation {
    /// GROUP BY columns (a prefix of the primary key); empty: one group for the whole result.
    group_cols: Vec<usize>,
    key: Option<Vec<Option<Bytes>>>,
    /// One accumulator per output column that is an aggregate.
    accs: Vec<Option<super::aggregate::Accumulator>>,
    /// The cells of the group's first row (values of the non-aggregate selectors).
    first: BytesMut,
    rows: usize,
    /// Groups written so far.
    groups: usize,
}

impl Aggregation {
    fn new(proj: &[(Proj, String, CqlType)], t: &TableDef, group_cols: Vec<usize>) -> Aggregation {
        Aggregation {
            group_cols,
            key: None,
            accs: Self::fresh(proj, t),
            first: BytesMut::new(),
            rows: 0,
            groups: 0,
        }
    }
    fn fresh(
        proj: &[(Proj, String, CqlType)],
        t: &TableDef,
    ) -> Vec<Option<super::aggregate::Accumulator>> {
        proj.iter()
            .map(|(p, _, _)| match p {
                Proj::Agg(kind, col) => Some(super::aggregate::Accumulator::new(
                    *kind,
                    col.map_or(&CqlType::Bigint, |c| &t.columns[c].ty),
                )),
                _ => None,
            })
            .collect()
    }
}

enum Flow {
    Continue,
    /// Page full or limit reached; `bool`: more rows may follow.
    Stop(bool),
}

impl Output<'_> {
    /// Counts one stored row read (RU are charged for what is read, not only returned).
    fn scanned(&mut self, token: Token, bytes: usize) {
        let Some(map) = &self.map else {
            return;
        };
        match self.meter.last_mut() {
            Some((p, rows, b)) if p.contains(token) => {
                *rows += 1;
                *b += bytes as u64;
            }
            _ => self
                .meter
                .push((Arc::clone(map.route(token)), 1, bytes as u64)),
        }
    }

    fn emit(
        &mut self,
        token: Token,
        pk: &[u8],
        ck: &[Bytes],
        row: &RowData,
        statics: &RowData,
    ) -> Flow {
        if let Some(limit) = self.per_partition {
            if self.cur_pk.as_deref() != Some(pk) {
                self.cur_pk = Some(Bytes::copy_from_slice(pk));
                self.cur_count = 0;
            }
            // With GROUP BY the limit counts groups (a row starting a new one), as Cassandra.
            let counts = match &self.agg {
                Some(agg) if self.aggregating => {
                    agg.rows == 0 || agg.key.as_ref() != Some(&self.group_key(pk, ck, row, statics))
                }
                _ => true,
            };
            if counts {
                if self.cur_count >= limit {
                    return Flow::Continue;
                }
                self.cur_count += 1;
            }
        }
        if self.agg.is_some() {
            return self.aggregate_row(token, pk, ck, row, statics);
        }
        self.project(token, pk, ck, row, statics);
        if self.error.borrow().is_some() {
            return Flow::Stop(false);
        }
        self.row_done()
    }

    /// The paging state to resume after (or, when the last emit did not consume its row, at)
    /// `key`.
    fn page_state(&self, partition: u32, key: Vec<u8>) -> Bytes {
        PagingState {
            partition,
            last_key: key,
            remaining: self.remaining.map(|r| r as u32),
            partition_rows: self.cur_count as u32,
            inclusive: self.resume_inclusive,
        }
        .encode()
    }

    /// Feeds one row to the current group; a row of a new group first writes the finished group.
    fn aggregate_row(
        &mut self,
        token: Token,
        pk: &[u8],
        ck: &[Bytes],
        row: &RowData,
        statics: &RowData,
    ) -> Flow {
        let t = self.table;
        let pk_parts: Vec<&[u8]> = if t.partition_key.len() == 1 {
            vec![pk]
        } else {
            split_composite(pk, t.partition_key.len()).unwrap_or_default()
        };
        let key = self.group_key(pk, ck, row, statics);
        let mut agg = self.agg.take().expect("aggregate query");
        if agg.rows > 0 && agg.key.as_ref() != Some(&key) {
            self.agg = Some(agg);
            if let Flow::Stop(more) = self.flush_group() {
                // This row starts the next group: the next page starts with it.
                self.resume_inclusive = true;
                return Flow::Stop(more);
            }
            agg = self.agg.take().expect("aggregate query");
        }
        if agg.rows == 0 {
            agg.key = Some(key);
            let start = self.rows.content.len();
            self.project(token, pk, ck, row, statics);
            agg.first = self.rows.content.split_off(start);
            if self.error.borrow().is_some() {
                self.agg = Some(agg);
                return Flow::Stop(false);
            }
        }
        for ((p, _, _), acc) in self.proj.iter().zip(agg.accs.iter_mut()) {
            if let (Proj::Agg(_, col), Some(acc)) = (p, acc) {
                let v = col.and_then(|c| column_value(t, c, &pk_parts, ck, row, statics, self.now));
                acc.add(v);
            }
        }
        agg.rows += 1;
        self.agg = Some(agg);
        Flow::Continue
    }

    /// Feeds one row of a system or virtual table (cells by column index) to the aggregation,
    /// as `aggregate_row` does for stored rows. These tables are small and answered in one
    /// page, so a finished group is written without stopping for the page size.
    fn aggregate_cells<'r>(&mut self, get: &dyn Fn(usize) -> Option<&'r [u8]>) {
        let mut agg = self.agg.take().expect("aggregate query");
        let key: Vec<Option<Bytes>> = agg
            .group_cols
            .iter()
            .map(|&c| get(c).map(Bytes::copy_from_slice))
            .collect();
        if agg.rows > 0 && agg.key.as_ref() != Some(&key) {
            self.agg = Some(agg);
            let _ = self.flush_group();
            agg = self.agg.take().expect("aggregate query");
        }
        if agg.rows == 0 {
            agg.key = Some(key);
            let start = self.rows.content.len();
            for (p, _, _) in self.proj {
                match p {
                    Proj::Column(i) => self.rows.push_cell(get(*i)),
                    _ => self.rows.push_cell(None),
                }
            }
            agg.first = self.rows.content.split_off(start);
        }
        for ((p, _, _), acc) in self.proj.iter().zip(agg.accs.iter_mut()) {
            if let (Proj::Agg(_, col), Some(acc)) = (p, acc) {
                acc.add(col.and_then(get));
            }
        }
        agg.rows += 1;
        self.agg = Some(agg);
    }

    /// Writes the current group's row (for a query without GROUP BY, also when no row matched).
    /// The GROUP BY values of a row (empty without GROUP BY).
    fn group_key(
        &self,
        pk: &[u8],
        ck: &[Bytes],
        row: &RowData,
        statics: &RowData,
    ) -> Vec<Option<Bytes>> {
        let Some(agg) = &self.agg else {
            return Vec::new();
        };
        let t = self.table;
        let pk_parts: Vec<&[u8]> = if t.partition_key.len() == 1 {
            vec![pk]
        } else {
            split_composite(pk, t.partition_key.len()).unwrap_or_default()
        };
        agg.group_cols
            .iter()
            .map(|&c| {
                column_value(t, c, &pk_parts, ck, row, statics, self.now)
                    .map(Bytes::copy_from_slice)
            })
            .collect()
    }

    fn flush_group(&mut self) -> Flow {
        let mut agg = self.agg.take().expect("aggregate query");
        if agg.rows == 0 && (!agg.group_cols.is_empty() || agg.groups > 0) {
            self.agg = Some(agg);
            return Flow::Continue;
        }
        let first = std::mem::take(&mut agg.first);
        let mut cells = &first[..];
        let row_start = self.rows.content.len();
        for ((p, _, _), acc) in self.proj.iter().zip(&agg.accs) {
            // The first row's cell of this column (a placeholder for aggregates).
            let cell: Option<&[u8]> = if cells.len() >= 4 {
                let len = i32::from_be_bytes(cells[..4].try_into().expect("4 bytes"));
                let (c, rest) = if len < 0 {
                    (None, &cells[4..])
                } else {
                    let end = (4 + len as usize).min(cells.len());
                    (Some(&cells[4..end]), &cells[end..])
                };
                cells = rest;
                c
            } else {
                None
            };
            match (p, acc) {
                (Proj::Agg(..), Some(acc)) => self.rows.push_cell(acc.finish().as_deref()),
                _ => self.rows.push_cell(cell),
            }
        }
        self.row_as_json_from(row_start);
        agg.accs = Aggregation::fresh(self.proj, self.table);
        agg.rows = 0;
        agg.key = None;
        agg.groups += 1;
        self.agg = Some(agg);
        self.row_done()
    }

    /// Writes the cells of one row's selectors into the result.
    fn project(&mut self, token: Token, pk: &[u8], ck: &[Bytes], row: &RowData, statics: &RowData) {
        let t = self.table;
        let pk_parts: Vec<&[u8]> = if t.partition_key.len() == 1 {
            vec![pk]
        } else {
            split_composite(pk, t.partition_key.len()).unwrap_or_default()
        };
        let row_start = self.rows.content.len();
        for (p, _, _) in self.proj {
            let tok_bytes;
            let v: Option<&[u8]> = match p {
                Proj::Column(i) => column_value(t, *i, &pk_parts, ck, row, statics, self.now),
                Proj::Token => {
                    tok_bytes = token.to_be_bytes();
                    Some(&tok_bytes[..])
                }
                Proj::Timing(i, timing) => {
                    let v = timing_value(t, *i, *timing, row, statics, self.now);
                    self.rows.push_cell(v.as_ref().map(TimingValue::bytes));
                    continue;
                }
                Proj::ToJson(inner, ty) => {
                    let raw = match &**inner {
                        Proj::Column(i) => {
                            column_value(t, *i, &pk_parts, ck, row, statics, self.now)
                        }
                        _ => None,
                    };
                    let json = match raw {
                        Some(b) => value::to_json(ty, b),
                        None => "null".to_string(),
                    };
                    self.rows.push_cell(Some(json.as_bytes()));
                    continue;
                }
                Proj::Agg(..) => None,
                Proj::Expr(e) => {
                    let rc = RowCtx {
                        t,
                        pk_parts: &pk_parts,
                        ck,
                        row,
                        statics,
                        now: self.now,
                        err: &self.error,
                        values: None,
                    };
                    let v = eval_sexpr(e, &rc);
                    self.rows.push_cell(v.as_deref());
                    continue;
                }
            };
            self.rows.push_cell(v);
        }
        if !self.aggregating {
            self.row_as_json_from(row_start);
        }
    }

    /// SELECT JSON: turns the cells written from `row_start` on (one row) into its JSON cell.
    fn row_as_json_from(&mut self, row_start: usize) {
        if self.json {
            let json = row_json(self.proj, &self.rows.content[row_start..]);
            self.rows.content.truncate(row_start);
            self.rows.push_cell(Some(json.as_bytes()));
        }
    }

    /// Counts a written row against LIMIT and the page.
    fn row_done(&mut self) -> Flow {
        self.rows.count += 1;
        if let Some(r) = &mut self.remaining {
            *r -= 1;
            if *r == 0 {
                return Flow::Stop(false);
            }
        }
        if self.rows.count as usize >= self.page_rows || self.rows.content.len() >= self.page_bytes
        {
            return Flow::Stop(true);
        }
        Flow::Continue
    }
}

/// Whole seconds left until `expiry` (ms), rounded up, never more than the TTL.
fn ttl_left(expiry: i64, ttl: i32, now: i64) -> i32 {
    ((expiry - now + 999) / 1000).min(i64::from(ttl)) as i32
}

/// writetime(), maxwritetime() or ttl() of column `i` of a row; for non-frozen collections
/// and UDTs writetime() and ttl() are lists with one entry per live element (a null TTL for
/// an element without one).
fn timing_value(
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
            Timing::Ttl => {
                (e.expiry != 0).then(|| ttl_left(e.expiry, e.ttl, now).to_be_bytes().to_vec())
            }
            _ => Some(e.ts.to_be_bytes().to_vec()),
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
        Timing::Ttl => (c.expiry != 0).then(|| TimingValue::int(ttl_left(c.expiry, c.ttl, now))),
        _ => Some(TimingValue::Fixed(c.ts.to_be_bytes(), 8)),
    }
}

/// A timing selector's value, without allocating for the single-cell cases.
enum TimingValue {
    /// Big-endian bytes and their length (4 for an int, 8 for a bigint).
    Fixed([u8; 8], usize),
    List(Vec<u8>),
}

impl TimingValue {
    fn int(v: i32) -> Self {
        let mut b = [0; 8];
        b[..4].copy_from_slice(&v.to_be_bytes());
        TimingValue::Fixed(b, 4)
    }

    fn bytes(&self) -> &[u8] {
        match self {
            TimingValue::Fixed(b, n) => &b[..*n],
            TimingValue::List(v) => v,
        }
    }
}

fn cell_of<'r>(
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

fn passes(
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

/// The rows of one partition at a time, as the read loops meet them: each row is shadowed by
/// the partition header (partition deletion, range tombstones), gets its collections assembled,
/// and is emitted if it is live and passes the filters. A partition none of whose rows passed
/// emits its statics-only row (partition-list reads).
struct PartitionRows<'a> {
    t: &'a TableDef,
    filters: &'a [Filter],
    /// [`Plan::static_rows`].
    static_rows: bool,
    /// The current partition's header (static cells, deletion, range tombstones), materialized.
    header: RowData,
    /// A row of the current partition passed (or an earlier page did: resuming inside it).
    matched: bool,
}

impl<'a> PartitionRows<'a> {
    fn new(t: &'a TableDef, plan: &'a Plan) -> Self {
        PartitionRows {
            t,
            filters: &plan.filters,
            static_rows: plan.static_rows,
            header: RowData::default(),
            matched: false,
        }
    }

    /// Starts a partition whose header is the stored value `header` (None: it has none).
    fn start(&mut self, header: Option<&Bytes>, now: i64, resumed: bool) -> Result<()> {
        self.header = match header {
            Some(b) => RowData::decode(b)?,
            None => RowData::default(),
        };
        complex::materialize(&mut self.header, self.t, None, now);
        self.matched = resumed;
        Ok(())
    }

    /// Starts a partition, reading its header stored under `header_key`.
    fn load(&mut self, engine: &Engine, header_key: &[u8], now: i64, resumed: bool) -> Result<()> {
        let header = engine.store.get(Space::Data, header_key)?;
        self.start(header.as_ref(), now, resumed)
    }

    /// Feeds one stored row (`value`) of the current partition; `ranges_key`: its clustering
    /// key bytes, for the range tombstones (None: they are not applied).
    fn row(
        &mut self,
        out: &mut Output,
        dk: &row::DecodedKey,
        ranges_key: Option<&[u8]>,
        value: &Bytes,
    ) -> Result<Flow> {
        let now = out.now;
        let mut data = RowData::decode(value)?;
        if let Some((dts, _)) = self.header.deletion {
            data.shadow_at(dts);
        }
        if let (Some(ck), false) = (ranges_key, self.header.ranges.is_empty()) {
            if let Some(dts) = self.header.range_deletion(ck) {
                data.shadow_at(dts);
            }
        }
        complex::materialize(&mut data, self.t, None, now);
        let (pk, ck) = (&dk.pk[..], &dk.clustering[..]);
        if !data.is_live(now) || !passes(self.t, self.filters, pk, ck, &data, &self.header, now) {
            return Ok(Flow::Continue);
        }
        self.matched = true;
        Ok(out.emit(dk.token, pk, ck, &data, &self.header))
    }

    /// Ends the partition: if none of its rows passed, its live static cells make a row.
    fn statics(&self, out: &mut Output, token: Token, pk: &[u8]) -> Flow {
        let now = out.now;
        if self.matched
            || !self.static_rows
            || !self.t.has_static()
            || !self.header.cells.iter().any(|c| c.is_live(now))
        {
            return Flow::Continue;
        }
        let mut statics = self.header.clone();
        if let Some((dts, _)) = self.header.deletion {
            statics.shadow_at(dts);
        }
        let none = RowData::default();
        if statics.is_live(now) && passes(self.t, self.filters, pk, &[], &none, &statics, now) {
            return out.emit(token, pk, &[], &none, &statics);
        }
        Flow::Continue
    }
}

/// Whether a partition read finds its header in the scan of its first slice: forward, not
/// resumed, and the first slice starts at the partition's first row (nothing lies between the
/// header and that row, so the scan reads no extra rows).
fn one_seek(plan: &Plan, resumed: bool) -> bool {
    !plan.reversed
        && !resumed
        && plan.slices.first().is_some_and(|(lo, _)| match lo {
            Bound::Unbounded => true,
            Bound::Included(k) => k.is_empty(),
            Bound::Excluded(_) => false,
        })
}

/// The storage key of the header of the partition whose key prefix is `prefix`.
fn header_key(mut prefix: Vec<u8>) -> Vec<u8> {
    prefix.push(KIND_HEADER);
    prefix
}

pub fn execute(
    engine: &Engine,
    keyspace: Option<&str>,
    sel: &Select,
    binds: &BoundValues,
    opts: &QueryOptions,
) -> Result<Rows> {
    let schema = engine.schema();
    let t = resolve_table(&schema, keyspace, &sel.table)?;
    if sel.json && t.virtual_table {
        return Err(invalid("SELECT JSON is not supported on system tables"));
    }
    let ctx = Ctx {
        binds,
        max_value_bytes: engine.limits.max_value_bytes,
    };
    let proj = plan_projection(t, Some(&ctx), sel)?;
    let group_cols = group_by_columns(t, sel)?;
    let aggregating =
        !group_cols.is_empty() || proj.iter().any(|(p, _, _)| matches!(p, Proj::Agg(..)));
    // Without GROUP BY an aggregate query answers one row: it is not paged.
    let count_only = aggregating && group_cols.is_empty();
    let columns = Arc::new(result_columns(t, sel)?);
    let mut plan = plan(t, sel, &ctx)?;
    if t.virtual_table {
        plan.filters = all_filters(t, sel, &ctx)?;
    }
    let per_partition = per_partition_limit(t, sel, &proj, &ctx)?;
    if !t.virtual_table {
        opts.ctx.trace(|| routing(engine, t, &plan.target));
    }
    let paging = match &opts.paging_state {
        Some(b) if !count_only => Some(PagingState::decode(b)?),
        _ => None,
    };
    let page_rows = match opts.page_size {
        Some(n) if n > 0 && !count_only => n as usize,
        _ => usize::MAX,
    };
    let remaining = match (&paging, plan.limit) {
        (Some(p), Some(_)) => p.remaining.map(|r| r as usize),
        (_, l) => l,
    };
    let mut out = Output {
        rows: Rows::new(columns),
        proj: &proj,
        table: t,
        page_rows,
        page_bytes: if page_rows == usize::MAX {
            usize::MAX
        } else {
            engine.limits.max_page_bytes
        },
        remaining,
        now: super::now_millis(),
        agg: aggregating.then(|| Aggregation::new(&proj, t, group_cols)),
        resume_inclusive: false,
        json: sel.json,
        aggregating,
        per_partition,
        cur_pk: None,
        cur_count: 0,
        map: engine.maps.get(t.storage_id),
        meter: Vec::new(),
        error: Default::default(),
    };
    if let (Some(_), Some(p)) = (out.per_partition, &paging) {
        // Resuming inside a partition: the rows it already returned count against its limit.
        if let Ok(dk) = row::decode_key(&p.last_key, &[]) {
            out.cur_pk = Some(dk.pk);
            out.cur_count = p.partition_rows as usize;
        }
    }
    if t.virtual_table {
        opts.ctx.add_charge(crate::partition::ru::FIXED_RU);
        read_virtual(engine, &schema, t, &plan, &mut out, paging)?;
    } else {
        let budget = admit_read(engine, &schema, t, &plan, out.map.as_deref(), opts)?;
        let res = read_stored(engine, t, &plan, &mut out, paging);
        let (rows, bytes) = out
            .meter
            .iter()
            .fold((0, 0), |(r, b), (_, r2, b2)| (r + r2, b + b2));
        opts.ctx
            .add_charge(crate::partition::ru::read_cost(rows, bytes));
        if opts.serial {
            // A SERIAL read is a Paxos round: charged a read plus a (minimal) write.
            let extra = crate::partition::ru::write_key_cost(0, 0);
            opts.ctx.add_charge(extra);
            if let (Some(b), Some((p, _, _))) = (&budget, out.meter.first()) {
                p.stats.consumed.add(extra);
                if opts.ctx.debits_budget() {
                    b.charge(&engine.limits.throughput, p, extra);
                }
            }
        }
        crate::partition::ru::charge_partitions(&out.meter);
        // A single-partition read counts towards that logical partition's heat.
        if let (Target::Partitions(keys), [(p, rows, bytes)]) = (&plan.target, &out.meter[..]) {
            if let [k] = &keys[..] {
                p.stats.hot.record(
                    table_token(t, k),
                    k,
                    crate::partition::ru::read_cost(*rows, *bytes),
                );
            }
        }
        if let Some(budget) = budget.as_ref().filter(|_| opts.ctx.debits_budget()) {
            for (p, rows, bytes) in &out.meter {
                budget.charge(
                    &engine.limits.throughput,
                    p,
                    crate::partition::ru::read_cost(*rows, *bytes),
                );
            }
        }
        res?;
    }
    if let Some(e) = out.error.take() {
        return Err(e);
    }
    if out.agg.is_some() && out.rows.paging_state.is_none() && out.remaining != Some(0) {
        // The last group (or, without GROUP BY, the one result row) ends with the rows.
        let _ = out.flush_group();
    }
    Ok(out.rows)
}

/// Admits a read on the throughput budgets of the physical partitions it targets; returns
/// the table's budget.
fn admit_read(
    engine: &Engine,
    schema: &crate::schema::Schema,
    t: &TableDef,
    plan: &Plan,
    map: Option<&crate::partition::map::PartitionMap>,
    opts: &QueryOptions,
) -> Result<Option<crate::partition::throttle::TableBudget>> {
    use crate::partition::throttle;
    let Some(map) = map else {
        return Ok(None);
    };
    let budget = throttle::table_budget(&engine.maps, schema, t, map, &engine.limits.throughput);
    let mut parts: Vec<&crate::partition::map::PhysicalPartition> = Vec::new();
    match &plan.target {
        Target::Partitions(keys) => {
            for k in keys {
                let p = map.route(table_token(t, k));
                if !parts.iter().any(|q| q.id == p.id) {
                    parts.push(p);
                }
            }
        }
        Target::Range(lo, hi) | Target::Index { lo, hi, .. } => parts.extend(
            map.parts
                .iter()
                .filter(|p| (p.end as i128) > *lo && (p.start as i128) < *hi)
                .map(|p| &**p),
        ),
        Target::Ranges(ranges) => parts.extend(
            map.parts
                .iter()
                .filter(|p| {
                    ranges
                        .iter()
                        .any(|&(lo, hi)| (p.end as i128) > lo && (p.start as i128) < hi)
                })
                .map(|p| &**p),
        ),
    }
    let mut gates: Vec<_> = parts.iter().map(|p| budget.gate(p)).collect();
    // Shared pools: one bucket may serve several partitions; ask it once.
    gates.dedup_by(|a, b| std::ptr::eq(a.bucket, b.bucket));
    let access = if opts.serial {
        // A SERIAL read runs a Paxos round (it writes), so it is admitted as a write.
        throttle::Access::Write("CAS")
    } else {
        throttle::Access::Read
    };
    let how = throttle::admit(
        &engine.limits.throughput,
        access,
        &gates,
        opts.ctx.held_since(),
    )?;
    opts.ctx.admitted(how);
    Ok(Some(budget))
}

fn read_virtual(
    engine: &Engine,
    schema: &crate::schema::Schema,
    t: &TableDef,
    plan: &Plan,
    out: &mut Output,
    paging: Option<PagingState>,
) -> Result<()> {
    let rows = if t.keyspace == "system_traces" {
        engine
            .traces
            .rows(t, engine.node.listen.ip(), engine.node.listen.port())
    } else {
        crate::partition::views::rows(
            &engine.maps,
            &*engine.store,
            schema,
            t,
            &engine.limits.throughput,
        )
        .or_else(|| crate::schema::system::virtual_rows(schema, &engine.node, t))
        .unwrap_or_default()
    };
    let start = paging.map_or(0, |p| p.partition as usize);
    let mut idx = 0usize;
    for r in rows.iter() {
        let get = |i: usize| r.get(i).and_then(|c| c.as_deref());
        let ok = plan
            .filters
            .iter()
            .all(|f| f.matches(&t.columns[f.col].ty, get(f.col)));
        if !ok {
            continue;
        }
        idx += 1;
        if idx <= start {
            continue;
        }
        if out.agg.is_some() {
            out.aggregate_cells(&get);
            continue;
        }
        for (p, _, _) in out.proj {
            match p {
                Proj::Column(i) => out.rows.push_cell(get(*i)),
                Proj::ToJson(inner, ty) => {
                    let json = match &**inner {
                        Proj::Column(i) => get(*i).map(|b| value::to_json(ty, b)),
                        _ => None,
                    }
                    .unwrap_or_else(|| "null".into());
                    out.rows.push_cell(Some(json.as_bytes()));
                }
                Proj::Expr(e) => {
                    let none = RowData::default();
                    let rc = RowCtx {
                        t,
                        pk_parts: &[],
                        ck: &[],
                        row: &none,
                        statics: &none,
                        now: out.now,
                        err: &out.error,
                        values: Some(r),
                    };
                    let v = eval_sexpr(e, &rc);
                    out.rows.push_cell(v.as_deref());
                }
                _ => out.rows.push_cell(None),
            }
        }
        out.rows.count += 1;
        let limit_hit = out.remaining.as_mut().map(|r| {
            *r -= 1;
            *r == 0
        });
        if limit_hit == Some(true) {
            return Ok(());
        }
        if out.rows.count as usize >= out.page_rows {
            out.rows.paging_state = Some(out.page_state(idx as u32, Vec::new()));
            return Ok(());
        }
    }
    Ok(())
}

/// Reads rows of a stored table, routed through the physical partition map.
fn read_stored(
    engine: &Engine,
    t: &TableDef,
    plan: &Plan,
    out: &mut Output,
    paging: Option<PagingState>,
) -> Result<()> {
    let ck_types: Vec<(&CqlType, bool)> = t.clustering_columns().map(|c| (&c.ty, c.desc)).collect();
    let sid = t.storage_id;
    match &plan.target {
        Target::Partitions(keys) => {
            let mut reader = PartitionRows::new(t, plan);
            let start = paging.as_ref().map_or(0, |p| p.partition as usize);
            for (i, pk) in keys.iter().enumerate().skip(start) {
                let token = table_token(t, pk);
                // Route through the map (the physical partition owns this key's range).
                let _owner = engine.maps.get(sid).map(|m| m.route(token).id);
                let prefix = row::partition_prefix(sid, token, pk);
                let resume = paging
                    .as_ref()
                    .filter(|p| p.partition as usize == i && !p.last_key.is_empty());
                let header_key = header_key(prefix.clone());
                // One seek: the header sorts just before the rows, so a forward read whose
                // first slice starts at the first row scans from the header on and meets it
                // first (or learns there is none). Others read the header on its own.
                let mut header_pending = one_seek(plan, resume.is_some());
                if !header_pending {
                    reader.load(engine, &header_key, out.now, resume.is_some())?;
                }
                let mut rows_prefix = prefix;
                rows_prefix.push(KIND_ROW);
                let mut slices: Vec<&KeyRange> = plan.slices.iter().collect();
                if plan.reversed {
                    slices.reverse();
                }
                for (lo, hi) in slices {
                    let abs = |b: &Bound<Vec<u8>>, is_hi: bool| -> Bound<Vec<u8>> {
                        match b {
                            Bound::Included(k) => Bound::Included([&rows_prefix[..], k].concat()),
                            Bound::Excluded(k) => Bound::Excluded([&rows_prefix[..], k].concat()),
                            Bound::Unbounded => {
                                if is_hi {
                                    Bound::Excluded(
                                        prefix_successor(&rows_prefix)
                                            .expect("row prefix has a successor"),
                                    )
                                } else {
                                    Bound::Included(rows_prefix.clone())
                                }
                            }
                        }
                    };
                    let mut lo = if header_pending {
                        Bound::Included(header_key.clone())
                    } else {
                        abs(lo, false)
                    };
                    let mut hi = abs(hi, true);
                    if let Some(p) = resume {
                        if plan.reversed {
                            hi = min_hi(hi, p.resume_bound());
                        } else {
                            lo = max_lo(lo, p.resume_bound());
                        }
                    }
                    let iter =
                        engine
                            .store
                            .scan(Space::Data, as_ref(&lo), as_ref(&hi), plan.reversed);
                    for item in iter {
                        let (k, v) = item?;
                        if header_pending {
                            header_pending = false;
                            let found = k[..] == header_key[..];
                            reader.start(found.then_some(&v), out.now, false)?;
                            if found {
                                continue;
                            }
                        }
                        out.scanned(token, k.len() + v.len());
                        let dk = row::decode_key(&k, &ck_types)?;
                        let ck = k.get(rows_prefix.len()..).unwrap_or(&[]);
                        if let Flow::Stop(more) = reader.row(out, &dk, Some(ck), &v)? {
                            if more {
                                out.rows.paging_state = Some(out.page_state(i as u32, k.to_vec()));
                            }
                            return Ok(());
                        }
                    }
                    if header_pending {
                        // The first slice's scan met neither header nor row.
                        header_pending = false;
                        reader.start(None, out.now, false)?;
                    }
                }
                if let Flow::Stop(more) = reader.statics(out, token, pk) {
                    if more && i + 1 < keys.len() {
                        out.rows.paging_state = Some(out.page_state(i as u32 + 1, Vec::new()));
                    }
                    return Ok(());
                }
            }
            Ok(())
        }
        Target::Index {
            index,
            ty,
            value,
            lo,
            hi,
        } => read_index(engine, t, plan, out, paging, (index, ty, value), (*lo, *hi)),
        Target::Range(lo, hi) => read_ranges(engine, t, plan, out, paging, &[(*lo, *hi)]),
        Target::Ranges(ranges) => read_ranges(engine, t, plan, out, paging, ranges),
    }
}

/// Reads token ranges (lo exclusive, hi inclusive), sorted and disjoint, through the physical
/// partitions that overlap them, in token order.
fn read_ranges(
    engine: &Engine,
    t: &TableDef,
    plan: &Plan,
    out: &mut Output,
    paging: Option<PagingState>,
    ranges: &[(i128, i128)],
) -> Result<()> {
    let ck_types: Vec<(&CqlType, bool)> = t.clustering_columns().map(|c| (&c.ty, c.desc)).collect();
    let sid = t.storage_id;
    let Some(map) = engine.maps.get(sid) else {
        return Ok(());
    };
    let resume = paging.as_ref().filter(|p| !p.last_key.is_empty());
    // The partition being read: token, key and key prefix.
    let mut cur: Option<(Token, Bytes, Vec<u8>)> = None;
    let mut reader = PartitionRows::new(t, plan);
    // Ends the partition being read: its static row if none of its rows passed. A page that
    // fills up there resumes after all of the partition's keys.
    let end_partition =
        |reader: &PartitionRows, out: &mut Output, cur: &Option<(Token, Bytes, Vec<u8>)>| -> bool {
            let Some((token, pk, prefix)) = cur else {
                return false;
            };
            match reader.statics(out, *token, pk) {
                Flow::Continue => false,
                Flow::Stop(more) => {
                    if more {
                        let mut after = prefix.clone();
                        after.push(KIND_ROW + 1);
                        out.rows.paging_state = Some(out.page_state(0, after));
                    }
                    true
                }
            }
        };
    for &(lo, hi) in ranges {
        if lo >= hi {
            continue;
        }
        let lo_tok = lo.max(MIN_TOKEN as i128 - 1);
        // (lo, hi] over the ring; the empty key's MIN token belongs to the first partition.
        let parts: Vec<_> = map
            .parts
            .iter()
            .filter(|p| (p.end as i128) > lo_tok && (p.start as i128) < hi)
            .cloned()
            .collect();
        for p in parts {
            let a = (p.start as i128).max(lo_tok); // exclusive
            let b = (p.end as i128).min(hi); // inclusive
            if a >= b {
                continue;
            }
            let mut lo_key = sid.to_be_bytes().to_vec();
            if a >= MIN_TOKEN as i128 {
                lo_key.extend_from_slice(&row::token_bytes((a + 1) as i64));
            }
            let hi_key: Bound<Vec<u8>> = if b >= MAX_TOKEN as i128 {
                Bound::Excluded((sid + 1).to_be_bytes().to_vec())
            } else {
                let mut k = sid.to_be_bytes().to_vec();
                k.extend_from_slice(&row::token_bytes((b + 1) as i64));
                Bound::Excluded(k)
            };
            let mut lo_b = Bound::Included(lo_key);
            if let Some(p) = resume {
                lo_b = max_lo(lo_b, p.resume_bound());
            }
            for item in engine
                .store
                .scan(Space::Data, as_ref(&lo_b), as_ref(&hi_key), false)
            {
                let (k, v) = item?;
                let dk = row::decode_key(&k, &ck_types)?;
                out.scanned(dk.token, k.len() + v.len());
                if cur.as_ref().is_none_or(|(_, pk, _)| *pk != dk.pk) {
                    if end_partition(&reader, out, &cur) {
                        return Ok(());
                    }
                    let prefix = row::partition_prefix(sid, dk.token, &dk.pk);
                    // Resuming inside this partition: an earlier page returned its rows.
                    let resumed = resume.is_some_and(|p| p.last_key.starts_with(&prefix));
                    if dk.kind != KIND_HEADER {
                        // The header sorts before the rows, so a scan that reaches the
                        // partition's first key without meeting one knows there is none; only
                        // a scan resumed mid-partition started past it and fetches it.
                        if resumed {
                            reader.load(engine, &header_key(prefix.clone()), out.now, true)?;
                        } else {
                            reader.start(None, out.now, false)?;
                        }
                    }
                    cur = Some((dk.token, dk.pk.clone(), prefix));
                }
                if dk.kind == KIND_HEADER {
                    reader.start(Some(&v), out.now, false)?;
                    continue;
                }
                let ck_start = cur.as_ref().map_or(0, |c| c.2.len() + 1);
                let ck = k.get(ck_start..).unwrap_or(&[]);
                if let Flow::Stop(more) = reader.row(out, &dk, Some(ck), &v)? {
                    if more {
                        out.rows.paging_state = Some(out.page_state(0, k.to_vec()));
                    }
                    return Ok(());
                }
            }
        }
    }
    end_partition(&reader, out, &cur);
    Ok(())
}

/// Reads the rows an index lists for one value, in token order, re-checking each row.
fn read_index(
    engine: &Engine,
    t: &TableDef,
    plan: &Plan,
    out: &mut Output,
    paging: Option<PagingState>,
    (index, ty, value): (&crate::schema::IndexDef, &CqlType, &Bytes),
    (lo, hi): (i128, i128),
) -> Result<()> {
    if lo >= hi {
        return Ok(());
    }
    let ck_types: Vec<(&CqlType, bool)> = t.clustering_columns().map(|c| (&c.ty, c.desc)).collect();
    let prefix = super::index::value_prefix(index, ty, value);
    let mut lo_key = prefix.clone();
    if lo >= MIN_TOKEN as i128 {
        lo_key.extend_from_slice(&row::token_bytes((lo + 1) as i64));
    }
    let hi_key: Bound<Vec<u8>> = if hi >= MAX_TOKEN as i128 {
        prefix_successor(&prefix)
            .map(Bound::Excluded)
            .unwrap_or(Bound::Unbounded)
    } else {
        let mut k = prefix.clone();
        k.extend_from_slice(&row::token_bytes((hi + 1) as i64));
        Bound::Excluded(k)
    };
    let mut lo_b = Bound::Included(lo_key);
    if let Some(p) = paging.as_ref().filter(|p| !p.last_key.is_empty()) {
        lo_b = max_lo(lo_b, p.resume_bound());
    }
    let mut cur_pk: Option<Bytes> = None;
    let mut ck_start = 0;
    let mut reader = PartitionRows::new(t, plan);
    for item in engine
        .store
        .scan(Space::Data, as_ref(&lo_b), as_ref(&hi_key), false)
    {
        let (entry, _) = item?;
        let Some(row_key) = super::index::row_key_of_entry(t, index, ty, &entry) else {
            continue;
        };
        let Some(v) = engine.store.get(Space::Data, &row_key)? else {
            continue;
        };
        let dk = row::decode_key(&row_key, &ck_types)?;
        out.scanned(dk.token, row_key.len() + v.len());
        if cur_pk.as_ref() != Some(&dk.pk) {
            cur_pk = Some(dk.pk.clone());
            let hk = header_key(row::partition_prefix(t.storage_id, dk.token, &dk.pk));
            ck_start = hk.len();
            reader.load(engine, &hk, out.now, false)?;
        }
        let ck = row_key.get(ck_start..).unwrap_or(&[]);
        if let Flow::Stop(more) = reader.row(out, &dk, Some(ck), &v)? {
            if more {
                out.rows.paging_state = Some(out.page_state(0, entry.to_vec()));
            }
            return Ok(());
        }
    }
    Ok(())
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(&k[..]),
        Bound::Excluded(k) => Bound::Excluded(&k[..]),
        Bound::Unbounded => Bound::Unbounded,
    }
}
