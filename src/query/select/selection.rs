//! The selection of a SELECT: the output columns (`Proj`), computed selectors (`SExpr`)
//! planned from the statement and evaluated per row, the result columns' metadata, and the
//! `[json]` text of a row.

use super::*;

/// One output column.
#[derive(Debug, Clone)]
pub(super) enum Proj {
    Column(usize),
    Token,
    /// writetime(), maxwritetime() or ttl() of a column.
    Timing(usize, Timing),
    ToJson(Box<Proj>, CqlType),
    /// An aggregate over the rows (of a group): count(*), count(c), min, max, sum, avg.
    Agg(crate::query::aggregate::AggKind, Option<usize>),
    /// Functions, CAST, field and element selection.
    Expr(Box<SExpr>),
    /// Aggregates of computed inputs, or a selector over aggregates (`agg_expr.rs`).
    AggOf(Box<AggCall>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timing {
    WriteTime,
    MaxWriteTime,
    Ttl,
}

/// A computed selector.
#[derive(Debug, Clone)]
pub(super) enum SExpr {
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
    /// writetime(), maxwritetime() or ttl() of (part of) a column.
    Timing(Box<TimingSel>),
    /// The result of aggregate `i` of the selector (`agg_expr.rs`; replaced by a constant
    /// before the selector is evaluated).
    AggRef(usize),
}

pub(super) struct RowCtx<'a, 'r> {
    pub(super) t: &'a TableDef,
    pub(super) pk_parts: &'a [&'r [u8]],
    pub(super) ck: &'r [Bytes],
    pub(super) row: &'r RowData,
    pub(super) statics: &'r RowData,
    pub(super) now: i64,
    /// The first failure of an operation (division by zero): the query fails with it.
    pub(super) err: &'a std::cell::RefCell<Option<crate::query::QueryError>>,
    /// A virtual (system) table's row: its column values by column index, read instead of the
    /// stored row.
    pub(super) values: Option<&'r [Option<Bytes>]>,
}

/// A row with no stored cells.
static NO_ROW: RowData = RowData {
    marker: None,
    deletion: None,
    cells: Vec::new(),
    ranges: Vec::new(),
    complex: Vec::new(),
    pending: Vec::new(),
};

impl<'a, 'r> RowCtx<'a, 'r> {
    /// A stored row's context.
    pub(super) fn stored(
        t: &'a TableDef,
        pk_parts: &'a [&'r [u8]],
        ck: &'r [Bytes],
        (row, statics): (&'r RowData, &'r RowData),
        now: i64,
        err: &'a std::cell::RefCell<Option<crate::query::QueryError>>,
    ) -> Self {
        RowCtx {
            t,
            pk_parts,
            ck,
            row,
            statics,
            now,
            err,
            values: None,
        }
    }

    /// The context of values given by column index (a system table's row; none: only
    /// constants can be evaluated).
    pub(super) fn of_values(
        t: &'a TableDef,
        values: &'r [Option<Bytes>],
        now: i64,
        err: &'a std::cell::RefCell<Option<crate::query::QueryError>>,
    ) -> Self {
        RowCtx {
            t,
            pk_parts: &[],
            ck: &[],
            row: &NO_ROW,
            statics: &NO_ROW,
            now,
            err,
            values: Some(values),
        }
    }
}

pub(super) fn eval_sexpr(e: &SExpr, rc: &RowCtx) -> Option<Vec<u8>> {
    match e {
        SExpr::Col(i) => match rc.values {
            Some(vals) => vals.get(*i).cloned().flatten().map(|v| v.to_vec()),
            None => column_value(rc.t, *i, rc.pk_parts, rc.ck, rc.row, rc.statics, rc.now)
                .map(|v| v.to_vec()),
        },
        SExpr::Const(v) => v.as_ref().map(|b| b.to_vec()),
        SExpr::Call(name, args, types) => {
            let vals: Vec<Option<Vec<u8>>> = args.iter().map(|a| eval_sexpr(a, rc)).collect();
            if name == "token" {
                return super::token_selector::token_value(rc.t, &vals);
            }
            let refs: Vec<Option<&[u8]>> = vals.iter().map(|v| v.as_deref()).collect();
            match crate::query::functions::call(name, types, &refs) {
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
            crate::query::functions::cast(from, to, &v)
        }
        SExpr::Op(op, operands, ret) => {
            let (l, lt, r, rt) = &**operands;
            let (a, b) = (eval_sexpr(l, rc), eval_sexpr(r, rc));
            match crate::query::arith::apply(*op, lt, a.as_deref(), rt, b.as_deref(), ret) {
                Ok(v) => v,
                Err(e) => {
                    rc.err.borrow_mut().get_or_insert(e);
                    None
                }
            }
        }
        SExpr::Timing(sel) => eval_timing(sel, rc),
        SExpr::AggRef(_) => None,
        SExpr::Neg(inner, ty) => {
            let v = eval_sexpr(inner, rc);
            match crate::query::arith::negate(ty, v.as_deref()) {
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
pub(super) fn plan_sexpr(
    t: &TableDef,
    ctx: Option<&Ctx>,
    e: &SelectorExpr,
) -> Result<(SExpr, String, CqlType)> {
    Ok(match e {
        _ if aggregate_kind(e).is_some() => {
            plan_aggregate(t, ctx, e, aggregate_kind(e).expect("checked"))?
        }
        SelectorExpr::Column(c) => {
            let i = column_index(t, c)?;
            (SExpr::Col(i), c.clone(), t.columns[i].ty.clone())
        }
        SelectorExpr::Function { name, args, .. } if name == "token" => {
            super::token_selector::plan_token(t, ctx, args)?
        }
        // FunctionResolver: fromJson() needs a receiver type, which a selection has not.
        SelectorExpr::Function { name, .. } if name == "fromjson" => {
            return Err(invalid(
                "fromJson() cannot be used in the selection clause of a SELECT statement",
            ))
        }
        SelectorExpr::Function { name, args, .. } => {
            let mut planned = Vec::with_capacity(args.len());
            let mut types = Vec::with_capacity(args.len());
            let mut names = Vec::with_capacity(args.len());
            for a in args {
                let (x, n, ty) = match a {
                    SelectorExpr::Term(Term::Literal(l)) => {
                        let ty = crate::query::eval::arg_type(name, &Term::Literal(l.clone()));
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
                        let ty = crate::query::eval::arg_type(name, term);
                        selection_marker(term, ty, name, ctx)?
                    }
                    other => plan_sexpr(t, ctx, other)?,
                };
                planned.push(x);
                types.push(ty);
                names.push(n);
            }
            let ret = crate::query::functions::return_type(name, &types).map_err(invalid)?;
            (
                SExpr::Call(name.clone(), planned, types),
                format!("system.{name}({})", names.join(", ")),
                ret,
            )
        }
        SelectorExpr::WriteTime(_) | SelectorExpr::MaxWriteTime(_) | SelectorExpr::Ttl(_) => {
            let (sel, name, ty) = plan_timing(t, ctx, e)?;
            (SExpr::Timing(Box::new(sel)), name, ty)
        }
        SelectorExpr::Cast(inner, to) => {
            let (x, n, from) = plan_sexpr(t, ctx, inner)?;
            let to_ty = match to {
                crate::cql::ast::TypeExpr::Native(name) => CqlType::native_from_name(name),
                _ => None,
            }
            .ok_or_else(|| invalid(format!("{to:?} is not a valid target type for CAST")))?;
            if !crate::query::functions::cast_allowed(&from, &to_ty) {
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
                    SelectorExpr::Term(term) => crate::query::eval::term_text(term),
                    SelectorExpr::Column(c) => c.clone(),
                    _ => "(...)".into(),
                };
                return Err(invalid(format!(
                    "Ambiguous '{}' operation with args {} and {}: use type hint to disambiguate, example '(int) ?'",
                    crate::query::arith::symbol(*op),
                    text(l),
                    text(r)
                )));
            }
            let (lx, ln, lt) = plan_operand(t, ctx, l)?;
            let (rx, rn, rt) = plan_operand(t, ctx, r)?;
            let ret =
                crate::query::arith::result_type(*op, &lt, &rt, (&ln, &rn)).map_err(invalid)?;
            (
                SExpr::Op(*op, Box::new((lx, lt, rx, rt)), ret.clone()),
                format!("{ln} {} {rn}", crate::query::arith::symbol(*op)),
                ret,
            )
        }
        SelectorExpr::Negate(inner) => {
            let (x, n, ty) = plan_operand(t, ctx, inner)?;
            if !crate::query::arith::is_numeric(&ty) {
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
pub(super) fn plan_operand(
    t: &TableDef,
    ctx: Option<&Ctx>,
    e: &SelectorExpr,
) -> Result<(SExpr, String, CqlType)> {
    match e {
        SelectorExpr::Term(term @ Term::Literal(l)) => {
            let text = crate::query::eval::term_text(term);
            let Some(ty) = crate::query::arith::literal_type(l) else {
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
            crate::query::eval::term_text(term)
        ))),
        other => plan_sexpr(t, ctx, other),
    }
}

/// A bind marker (or other term) in a selection, of type `ty`: its bound value at execution,
/// a typed placeholder when only describing the statement.
pub(super) fn selection_marker(
    term: &Term,
    ty: CqlType,
    receiver: &str,
    ctx: Option<&Ctx>,
) -> Result<(SExpr, String, CqlType)> {
    let text = crate::query::eval::term_text(term);
    let v = match ctx {
        Some(ctx) => eval(term, &ty, receiver, ctx)?.bytes().cloned(),
        None => None,
    };
    Ok((SExpr::Const(v), text, ty))
}

pub(super) const FILTERING_MSG: &str = "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING";

pub(super) fn column_index(t: &TableDef, name: &str) -> Result<usize> {
    crate::query::require_column_index(t, name)
}

pub(super) fn plan_projection(
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

pub(super) fn plan_selector(
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
            Proj::Agg(crate::query::aggregate::AggKind::CountRows, None),
            "count".into(),
            CqlType::Bigint,
        ),
        // A whole column's timing is read straight from its cell; anything else (elements,
        // fields, slices) is a computed selector (`timing.rs`).
        SelectorExpr::WriteTime(arg) | SelectorExpr::MaxWriteTime(arg) | SelectorExpr::Ttl(arg)
            if matches!(**arg, SelectorExpr::Column(_)) =>
        {
            let (sel, name, ty) = plan_timing(t, ctx, e)?;
            let (col, timing) = sel.column_timing();
            (Proj::Timing(col, timing), name, ty)
        }
        SelectorExpr::Function { name, args, .. }
            if name == "token" && super::token_selector::is_row_token(t, args) =>
        {
            let pk: Vec<&str> = t.pk_columns().map(|c| c.name.as_str()).collect();
            (
                Proj::Token,
                format!("system.token({})", pk.join(", ")),
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
                Proj::Agg(crate::query::aggregate::AggKind::CountRows, None),
                "count".into(),
                CqlType::Bigint,
            )
        }
        SelectorExpr::Function { name, args, .. }
            if crate::query::aggregate::AggKind::from_name(name).is_some() && args.len() == 1 =>
        {
            let kind = crate::query::aggregate::AggKind::from_name(name).expect("checked");
            let SelectorExpr::Column(c) = &args[0] else {
                let (call, n, ty) = plan_agg_call(t, ctx, e)?;
                return Ok((Proj::AggOf(Box::new(call)), n, ty));
            };
            let i = column_index(t, c)?;
            let ty = t.columns[i].ty.clone();
            let rt = crate::query::aggregate::result_type(kind, &ty)
                .ok_or_else(|| invalid(no_signature(name, c, &ty)))?;
            (Proj::Agg(kind, Some(i)), format!("system.{name}({c})"), rt)
        }
        other if holds_aggregate(other) => {
            let (call, n, ty) = plan_agg_call(t, ctx, other)?;
            (Proj::AggOf(Box::new(call)), n, ty)
        }
        other => {
            let (x, n, ty) = plan_sexpr(t, ctx, other)?;
            (Proj::Expr(Box::new(x)), n, ty)
        }
    })
}

/// The `[json]` text of one row whose cells (`[int len][bytes]` each) are `cells`.
pub(super) fn row_json(proj: &[(Proj, String, CqlType)], mut cells: &[u8]) -> String {
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
