//! Aggregates over computed inputs (`min(writetime(v))`, `max(v + 1)`) and functions and
//! operations over aggregates (`toDate(min(ts))`, `max(v) - min(v)`), as Cassandra allows.
//! Each aggregate accumulates its input row by row; when its group ends the selector around
//! them is evaluated once with their results in place (`SExpr::AggRef`).
//!
//! Planning collects the aggregates a selector holds in a per-thread list while
//! `plan_sexpr` walks it (planning one selector is synchronous, on one thread); outside that
//! walk, or inside an aggregate's own argument, an aggregate is refused with Cassandra's
//! message.

use super::*;
use crate::query::aggregate::{result_type, AggKind};
use std::cell::RefCell;

/// One aggregate: its kind, its input per row and the input's type.
pub(super) type AggInput = (AggKind, SExpr, CqlType);

/// A selector with aggregates inside: the aggregates, and the selector over their results.
#[derive(Debug, Clone)]
pub(super) struct AggCall {
    pub(super) aggs: Vec<AggInput>,
    pub(super) expr: SExpr,
}

thread_local! {
    /// The aggregates of the selector being planned (None: aggregates are not allowed here).
    static COLLECTING: RefCell<Option<Vec<AggInput>>> = const { RefCell::new(None) };
}

const NESTED: &str = "aggregate functions cannot be used as arguments of aggregate functions";

/// The aggregate `e` calls, if it is an aggregate call.
pub(super) fn aggregate_kind(e: &SelectorExpr) -> Option<AggKind> {
    match e {
        SelectorExpr::CountAll => Some(AggKind::CountRows),
        SelectorExpr::Function { name, args, .. } if args.len() == 1 => {
            if name == "count" && matches!(args[0], SelectorExpr::Term(_)) {
                return Some(AggKind::CountRows);
            }
            AggKind::from_name(name)
        }
        _ => None,
    }
}

/// True when `e` is or holds an aggregate call.
pub(super) fn holds_aggregate(e: &SelectorExpr) -> bool {
    aggregate_kind(e).is_some()
        || match e {
            SelectorExpr::Function { args, .. } => args.iter().any(holds_aggregate),
            SelectorExpr::Cast(s, _) | SelectorExpr::Negate(s) | SelectorExpr::Field(s, _) => {
                holds_aggregate(s)
            }
            SelectorExpr::Binary(_, l, r) => holds_aggregate(l) || holds_aggregate(r),
            _ => false,
        }
}

/// Plans a selector holding aggregates.
pub(super) fn plan_agg_call(
    t: &TableDef,
    ctx: Option<&Ctx>,
    e: &SelectorExpr,
) -> Result<(AggCall, String, CqlType)> {
    let outer = COLLECTING.with(|c| c.replace(Some(Vec::new())));
    let planned = plan_sexpr(t, ctx, e);
    let aggs = COLLECTING.with(|c| c.replace(outer)).unwrap_or_default();
    let (expr, name, ty) = planned?;
    Ok((AggCall { aggs, expr }, name, ty))
}

/// Plans the aggregate call `e` met while planning a selector: a reference to its result.
pub(super) fn plan_aggregate(
    t: &TableDef,
    ctx: Option<&Ctx>,
    e: &SelectorExpr,
    kind: AggKind,
) -> Result<(SExpr, String, CqlType)> {
    // Its argument may not hold aggregates: nothing is collected while planning it.
    let Some(mut aggs) = COLLECTING.with(|c| c.take()) else {
        return Err(invalid(NESTED));
    };
    let planned = aggregate_input(t, ctx, e, kind).map(|(x, ty, name, rt)| {
        aggs.push((kind, x, ty));
        (SExpr::AggRef(aggs.len() - 1), name, rt)
    });
    COLLECTING.with(|c| *c.borrow_mut() = Some(aggs));
    planned
}

/// An aggregate's input selector and type, and the aggregate's name and result type.
fn aggregate_input(
    t: &TableDef,
    ctx: Option<&Ctx>,
    e: &SelectorExpr,
    kind: AggKind,
) -> Result<(SExpr, CqlType, String, CqlType)> {
    let (SelectorExpr::Function { name, args, .. }, false) = (e, kind == AggKind::CountRows) else {
        return Ok((
            SExpr::Const(None),
            CqlType::Bigint,
            "count".into(),
            CqlType::Bigint,
        ));
    };
    let (x, n, ty) = plan_sexpr(t, ctx, &args[0])?;
    let rt = result_type(kind, &ty).ok_or_else(|| invalid(no_signature(name, &n, &ty)))?;
    Ok((x, ty, format!("system.{name}({n})"), rt))
}

/// Cassandra's message for an aggregate over an input type it does not take.
pub(super) fn no_signature(name: &str, input: &str, ty: &CqlType) -> String {
    format!(
        "Invalid call to function {name}, none of its type signatures match (known type signatures: system.{name} : (numeric type) -> numeric type) for column {input} of type {ty}"
    )
}

/// The selector's value once its aggregates have their results.
pub(super) fn finish_agg_call(
    call: &AggCall,
    results: &[Option<Vec<u8>>],
    t: &TableDef,
    now: i64,
    err: &std::cell::RefCell<Option<crate::query::QueryError>>,
) -> Option<Vec<u8>> {
    let expr = substitute(&call.expr, results);
    let rc = RowCtx::of_values(t, &[], now, err);
    eval_sexpr(&expr, &rc)
}

/// `e` with each aggregate reference replaced by its result (aggregates are only planned
/// inside calls, casts and operations, see `holds_aggregate`).
fn substitute(e: &SExpr, results: &[Option<Vec<u8>>]) -> SExpr {
    let sub = |x: &SExpr| substitute(x, results);
    match e {
        SExpr::AggRef(j) => SExpr::Const(results.get(*j).cloned().flatten().map(Bytes::from)),
        SExpr::Call(name, args, types) => {
            SExpr::Call(name.clone(), args.iter().map(sub).collect(), types.clone())
        }
        SExpr::Cast(x, from, to) => SExpr::Cast(Box::new(sub(x)), from.clone(), to.clone()),
        SExpr::Field(x, i) => SExpr::Field(Box::new(sub(x)), *i),
        SExpr::Neg(x, ty) => SExpr::Neg(Box::new(sub(x)), ty.clone()),
        SExpr::Op(op, operands, ret) => {
            let (l, lt, r, rt) = &**operands;
            SExpr::Op(
                *op,
                Box::new((sub(l), lt.clone(), sub(r), rt.clone())),
                ret.clone(),
            )
        }
        other => other.clone(),
    }
}
