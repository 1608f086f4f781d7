//! Evaluating terms (literals, bind markers, collection literals, functions) to serialized values
//! of a known receiver type.

use super::arith;
use super::bind::BoundValues;
use super::functions;
use super::{invalid, BoundValue, Result};
use crate::cql::ast::{Literal, Term};
use crate::cql::types::CqlType;
use crate::cql::value;
use bytes::Bytes;

/// An evaluated value.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Null,
    Unset,
    Value(Bytes),
}

impl Val {
    pub fn bytes(&self) -> Option<&Bytes> {
        match self {
            Val::Value(b) => Some(b),
            _ => None,
        }
    }
}

/// The context terms are evaluated in.
pub struct Ctx<'a> {
    pub binds: &'a BoundValues<'a>,
    pub max_value_bytes: usize,
    /// The statement's time (`Engine::clock`), read once: `currentTimestamp()` and TTLs of
    /// one statement agree, as a Cassandra query's timestamp does.
    pub now_micros: i64,
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as i32).to_be_bytes());
}

const NULL_IN_COLLECTION: &str = "null is not supported inside collections";

/// Evaluates `term` as a value of type `ty` for the receiver named `receiver` (a column name,
/// used in error messages).
pub fn eval(term: &Term, ty: &CqlType, receiver: &str, ctx: &Ctx) -> Result<Val> {
    match term {
        Term::Literal(Literal::Null) => Ok(Val::Null),
        Term::Literal(l) => {
            let bytes =
                value::literal_to_bytes(ty, l).map_err(|e| invalid(e.for_column(receiver)))?;
            sized(Bytes::from(bytes), receiver, ctx)
        }
        Term::Bind { index, name } => match ctx.binds.get(*index, name.as_deref(), receiver)? {
            BoundValue::Null => Ok(Val::Null),
            BoundValue::Unset => Ok(Val::Unset),
            BoundValue::Value(b) => {
                value::validate(ty, b).map_err(|e| invalid(e.for_column(receiver)))?;
                // sets and maps in Cassandra's sorted, duplicate-free form, as literals are
                match value::normalize(ty, b) {
                    Some(n) => sized(Bytes::from(n), receiver, ctx),
                    None => sized(b.clone(), receiver, ctx),
                }
            }
        },
        Term::TypeHint(_, inner) => eval(inner, ty, receiver, ctx),
        Term::List(items) | Term::Set(items) => eval_list_or_set(term, items, ty, receiver, ctx),
        Term::Map(pairs) => eval_map(pairs, ty, receiver, ctx),
        Term::Tuple(items) => eval_tuple(items, ty, receiver, ctx),
        Term::Udt(fields) => eval_udt(fields, ty, receiver, ctx),
        Term::Function { name, args, .. } => eval_function(name, args, ty, receiver, ctx),
        Term::Binary(op, a, b) => eval_binary(*op, a, b, ty, receiver, ctx),
        Term::Negate(inner) => eval_negate(inner, ty, receiver, ctx),
    }
}

/// A value, unless it is larger than a cell may be.
fn sized(v: Bytes, receiver: &str, ctx: &Ctx) -> Result<Val> {
    if v.len() > ctx.max_value_bytes {
        return Err(invalid(format!(
            "Value for {receiver} is too large: {} bytes, the maximum is {}",
            v.len(),
            ctx.max_value_bytes
        )));
    }
    Ok(Val::Value(v))
}

/// A list or set literal (also a vector's, and `{}` for an empty map).
fn eval_list_or_set(
    term: &Term,
    items: &[Term],
    ty: &CqlType,
    receiver: &str,
    ctx: &Ctx,
) -> Result<Val> {
    let set_literal = matches!(term, Term::Set(_));
    let (elem, is_set) = match ty.unfrozen() {
        CqlType::List(e) if !set_literal => (e, false),
        CqlType::Set(e) if set_literal || items.is_empty() => (e, true),
        CqlType::Map(_, _) if items.is_empty() => {
            return Ok(Val::Value(Bytes::from_static(&[0, 0, 0, 0])))
        }
        CqlType::Vector(e, n) if !set_literal => {
            if items.len() != *n as usize {
                return Err(invalid(format!(
                    "Invalid vector literal for {receiver} of type {ty}; expected {n} elements, but given {}",
                    items.len()
                )));
            }
            let mut elems = Vec::with_capacity(items.len());
            for i in items {
                let v = match (i, eval(i, e, receiver, ctx)) {
                    (Term::Literal(l), Err(_)) if *l != Literal::Null => {
                        return Err(invalid(format!(
                            "Invalid vector literal for {receiver}: value {} is not of type {e}",
                            term_text(i)
                        )))
                    }
                    (_, v) => v?,
                };
                match v {
                    Val::Value(b) => elems.push(b),
                    _ => {
                        return Err(invalid(format!(
                            "null is not supported inside vectors ({receiver})"
                        )))
                    }
                }
            }
            let refs: Vec<&[u8]> = elems.iter().map(|b| &b[..]).collect();
            return Ok(Val::Value(Bytes::from(value::encode_vector(e, &refs))));
        }
        _ => {
            return Err(invalid(format!(
                "Invalid {} literal for {receiver} of type {ty}",
                if matches!(term, Term::List(_)) {
                    "list"
                } else {
                    "set"
                }
            )))
        }
    };
    let mut elems: Vec<Bytes> = Vec::with_capacity(items.len());
    for i in items {
        match eval(i, elem, receiver, ctx)? {
            Val::Value(b) => elems.push(b),
            Val::Null => return Err(invalid(NULL_IN_COLLECTION)),
            // Lists/Sets.DelayedValue.bind: an unset element leaves the whole
            // collection unset (the assignment is skipped).
            Val::Unset => return Ok(Val::Unset),
        }
    }
    if is_set {
        elems.sort_by(|a, b| value::compare(elem, a, b));
        elems.dedup_by(|a, b| value::compare(elem, a, b).is_eq());
    }
    let mut out = Vec::new();
    put_len(&mut out, elems.len());
    for e in &elems {
        put_len(&mut out, e.len());
        out.extend_from_slice(e);
    }
    sized(Bytes::from(out), receiver, ctx)
}

fn eval_map(pairs: &[(Term, Term)], ty: &CqlType, receiver: &str, ctx: &Ctx) -> Result<Val> {
    let CqlType::Map(kt, vt) = ty.unfrozen() else {
        return Err(invalid(format!(
            "Invalid map literal for {receiver} of type {ty}"
        )));
    };
    let mut entries: Vec<(Bytes, Bytes)> = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        // Maps.DelayedValue.bind: an unset key is refused, an unset value leaves the
        // whole map unset.
        let k = match eval(k, kt, receiver, ctx)? {
            Val::Value(k) => k,
            Val::Null => return Err(invalid(NULL_IN_COLLECTION)),
            Val::Unset => return Err(invalid("unset value is not supported for map keys")),
        };
        let v = match eval(v, vt, receiver, ctx)? {
            Val::Value(v) => v,
            Val::Null => return Err(invalid(NULL_IN_COLLECTION)),
            Val::Unset => return Ok(Val::Unset),
        };
        entries.push((k, v));
    }
    // Sorted by key; the last value of a repeated key wins.
    entries.reverse();
    entries.sort_by(|a, b| value::compare(kt, &a.0, &b.0));
    entries.dedup_by(|a, b| value::compare(kt, &a.0, &b.0).is_eq());
    let mut out = Vec::new();
    put_len(&mut out, entries.len());
    for (k, v) in &entries {
        put_len(&mut out, k.len());
        out.extend_from_slice(k);
        put_len(&mut out, v.len());
        out.extend_from_slice(v);
    }
    sized(Bytes::from(out), receiver, ctx)
}

fn eval_tuple(items: &[Term], ty: &CqlType, receiver: &str, ctx: &Ctx) -> Result<Val> {
    let CqlType::Tuple(types) = ty.unfrozen() else {
        return Err(invalid(format!(
            "Invalid tuple type literal for {receiver} of type {ty}"
        )));
    };
    if items.len() > types.len() {
        return Err(invalid(format!(
            "Invalid tuple literal for {receiver}: too many elements. Type {ty} expects {} but got {}",
            types.len(),
            items.len()
        )));
    }
    let mut out = Vec::new();
    for (n, (i, t)) in items.iter().zip(types).enumerate() {
        // A constant that is not of the component's type (Tuples.Literal.validateAssignableTo).
        let v = eval(i, t, receiver, ctx).map_err(|e| match i {
            Term::Literal(l) if *l != Literal::Null => invalid(format!(
                "Invalid tuple literal for {receiver}: component {n} is not of type {t}"
            )),
            _ => e,
        })?;
        match v {
            Val::Value(b) => {
                put_len(&mut out, b.len());
                out.extend_from_slice(&b);
            }
            // A tuple is written whole: an unset field cannot keep the stored one.
            Val::Unset => {
                return Err(invalid(format!(
                    "Invalid unset value for tuple field number {n}"
                )))
            }
            Val::Null => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    sized(Bytes::from(out), receiver, ctx)
}

fn eval_udt(fields: &[(String, Term)], ty: &CqlType, receiver: &str, ctx: &Ctx) -> Result<Val> {
    let CqlType::Udt(u) = ty.unfrozen() else {
        return Err(invalid(format!(
            "Invalid user type literal for {receiver} of type {ty}"
        )));
    };
    for (f, _) in fields {
        if !u.fields.iter().any(|(n, _)| n == f) {
            return Err(invalid(format!(
                "Unknown field '{f}' in value of user defined type {}",
                u.name
            )));
        }
    }
    let mut out = Vec::new();
    for (fname, fty) in &u.fields {
        match fields.iter().find(|(n, _)| n == fname) {
            Some((_, t)) => match eval(t, fty, receiver, ctx)? {
                Val::Value(b) => {
                    put_len(&mut out, b.len());
                    out.extend_from_slice(&b);
                }
                // A frozen UDT is written whole: an unset field cannot keep the
                // stored one (a non-frozen UDT's fields are cells of their own).
                Val::Unset if !ty.is_multi_cell() => {
                    return Err(invalid(format!(
                        "Invalid unset value for field '{fname}' of user defined type {}",
                        u.name
                    )))
                }
                _ => out.extend_from_slice(&(-1i32).to_be_bytes()),
            },
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    sized(Bytes::from(out), receiver, ctx)
}

/// An arithmetic operation, typed by its operands and checked against the receiver.
fn eval_binary(
    op: crate::cql::ast::BinaryOp,
    a: &Term,
    b: &Term,
    ty: &CqlType,
    receiver: &str,
    ctx: &Ctx,
) -> Result<Val> {
    let (lt, rt) = operand_types(a, b, ty);
    let (an, bn) = (term_text(a), term_text(b));
    let ret = arith::result_type(op, &lt, &rt, (&an, &bn)).map_err(invalid)?;
    if !functions::value_compatible(ty, &ret) {
        return Err(invalid(format!(
            "Type error: cannot assign result of operation {an} {} {bn} (type {ret}) to {receiver} (type {ty})",
            arith::symbol(op)
        )));
    }
    let l = operand(eval(a, &lt, receiver, ctx)?, receiver)?;
    let r = operand(eval(b, &rt, receiver, ctx)?, receiver)?;
    Ok(
        match arith::apply(op, &lt, l.as_deref(), &rt, r.as_deref(), &ret)? {
            Some(v) => Val::Value(Bytes::from(v)),
            None => Val::Null,
        },
    )
}

fn eval_negate(inner: &Term, ty: &CqlType, receiver: &str, ctx: &Ctx) -> Result<Val> {
    // the negation of a number is of the number's type: the receiver's
    if !arith::is_numeric(ty) {
        return Err(invalid(format!(
            "Type error: cannot assign result of operation -{} to {receiver} (type {ty})",
            term_text(inner)
        )));
    }
    let v = operand(eval(inner, ty, receiver, ctx)?, receiver)?;
    Ok(match arith::negate(ty, v.as_deref())? {
        Some(v) => Val::Value(Bytes::from(v)),
        None => Val::Null,
    })
}

/// A version 1 (time-based) uuid for now(), with a random node and clock sequence.
pub fn new_timeuuid() -> [u8; 16] {
    use std::sync::atomic::{AtomicU64, Ordering};
    // 100ns intervals since 1582-10-15, strictly increasing across the process so that uuids
    // generated in the same microsecond still sort in generation order.
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = (crate::clock::system_micros() as u64) * 10 + 0x01B2_1DD2_1381_4000;
    let prev = LAST
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |last| {
            Some(now.max(last + 1))
        })
        .unwrap_or(now);
    let ts = now.max(prev + 1);
    let mut b = [0u8; 16];
    let rnd: [u8; 8] = rand::random();
    b[0..4].copy_from_slice(&((ts & 0xFFFF_FFFF) as u32).to_be_bytes());
    b[4..6].copy_from_slice(&(((ts >> 32) & 0xFFFF) as u16).to_be_bytes());
    b[6..8].copy_from_slice(&((((ts >> 48) & 0x0FFF) as u16) | 0x1000).to_be_bytes());
    b[8] = (rnd[0] & 0x3F) | 0x80;
    b[9..16].copy_from_slice(&rnd[1..8]);
    b
}

fn eval_function(
    name: &str,
    args: &[Term],
    ty: &CqlType,
    receiver: &str,
    ctx: &Ctx,
) -> Result<Val> {
    let no_args = |v: Vec<u8>| -> Result<Val> {
        if !args.is_empty() {
            return Err(invalid(format!("Invalid number of arguments in call to function system.{name}: 0 required but {} provided", args.len())));
        }
        Ok(Val::Value(Bytes::from(v)))
    };
    match name {
        // FunctionResolver: toJson() needs its argument's type, known in selections only.
        "tojson" => Err(invalid(
            "toJson() may only be used within the selection clause of SELECT statements",
        )),
        "now" | "currenttimeuuid" => no_args(new_timeuuid().to_vec()),
        "uuid" => no_args(uuid::Uuid::new_v4().as_bytes().to_vec()),
        "currenttimestamp" => no_args((ctx.now_micros / 1000).to_be_bytes().to_vec()),
        "currentdate" => {
            let days = ctx.now_micros / 86_400_000_000 + (1i64 << 31);
            no_args((days as u32).to_be_bytes().to_vec())
        }
        "currenttime" => {
            let nanos = (ctx.now_micros % 86_400_000_000) * 1000;
            no_args(nanos.to_be_bytes().to_vec())
        }
        "fromjson" => from_json(args, ty, receiver, ctx),
        _ => {
            let types: Vec<CqlType> = args.iter().map(|a| arg_type(name, a)).collect();
            let ret = functions::return_type(name, &types).map_err(invalid)?;
            if !functions::value_compatible(ty, &ret) {
                return Err(invalid(format!(
                    "Type error: cannot assign result of function system.{name} (type {ret}) to {receiver} (type {ty})"
                )));
            }
            let mut vals = Vec::with_capacity(args.len());
            for (a, t) in args.iter().zip(&types) {
                vals.push(eval(a, t, receiver, ctx)?);
            }
            let refs: Vec<Option<&[u8]>> = vals.iter().map(|v| v.bytes().map(|b| &b[..])).collect();
            match functions::call(name, &types, &refs).map_err(invalid)? {
                Some(v) => Ok(Val::Value(Bytes::from(v))),
                None => Ok(Val::Null),
            }
        }
    }
}

/// `fromJson(text)`: the JSON text decoded as the receiver's type (its return type is the
/// receiver's, as in Cassandra); JSON `null` is null. Failures are Cassandra's FunctionFailure.
fn from_json(args: &[Term], ty: &CqlType, receiver: &str, ctx: &Ctx) -> Result<Val> {
    let [arg] = args else {
        return Err(invalid(format!(
            "Invalid number of arguments in call to function system.fromjson: 1 required but {} provided",
            args.len()
        )));
    };
    // FunctionExecutionException's text; a value the type cannot take is a MarshalException
    // passed on whole (its Java class name included), as FromJsonFct does.
    let failure = |detail: String| super::QueryError::FunctionFailure {
        message: format!("execution of 'system.fromjson[text]' failed: {detail}"),
        function: "system.fromjson".into(),
        arg_types: vec!["text".into()],
    };
    let marshal = |e: String| {
        failure(format!(
            "org.apache.cassandra.serializers.MarshalException: {e}"
        ))
    };
    let text = match eval(arg, &CqlType::Text, receiver, ctx)? {
        Val::Value(b) => String::from_utf8_lossy(&b).into_owned(),
        other => return Ok(other),
    };
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| failure(format!("Could not decode JSON string '{text}': {e}")))?;
    match value::from_json(ty, &json) {
        Ok(b) => {
            value::validate(ty, &b).map_err(|e| marshal(e.to_string()))?;
            Ok(Val::Value(Bytes::from(b)))
        }
        Err(value::ValueError::Null(_)) => Ok(Val::Null),
        Err(e) => Err(marshal(e.for_column(receiver))),
    }
}

/// The type a function argument term is evaluated as.
pub fn arg_type(fname: &str, arg: &Term) -> CqlType {
    if fname.starts_with("blobas") {
        return CqlType::Blob;
    }
    if fname == "fromjson" {
        return CqlType::Text;
    }
    if let Some(t) = fname
        .strip_suffix("asblob")
        .and_then(CqlType::native_from_name)
    {
        return t;
    }
    match fname {
        "dateof" | "unixtimestampof" => CqlType::Timeuuid,
        _ => match arg {
            Term::Literal(Literal::Uuid(_)) => CqlType::Timeuuid,
            Term::Literal(_) | Term::Bind { .. } => CqlType::Timestamp,
            other => term_type(other).unwrap_or(CqlType::Timestamp),
        },
    }
}

/// An operand value: null stays null (the operation gives null), unset is an error.
fn operand(v: Val, receiver: &str) -> Result<Option<Bytes>> {
    match v {
        Val::Value(b) => Ok(Some(b)),
        Val::Null => Ok(None),
        Val::Unset => Err(invalid(format!(
            "Invalid unset value for argument in call to an operation on {receiver}"
        ))),
    }
}

/// The type a term has on its own (without a receiver): literals get Cassandra's preferred
/// type, functions their return type; bind markers have none.
pub fn term_type(t: &Term) -> Option<CqlType> {
    match t {
        Term::Literal(l) => arith::literal_type(l),
        Term::TypeHint(crate::cql::ast::TypeExpr::Native(n), _) => CqlType::native_from_name(n),
        Term::Function { name, args, .. } => {
            let types: Vec<CqlType> = args.iter().map(|a| arg_type(name, a)).collect();
            functions::return_type(name, &types).ok()
        }
        Term::Negate(inner) => term_type(inner),
        Term::Binary(op, a, b) => {
            let (lt, rt) = (term_type(a)?, term_type(b)?);
            arith::result_type(*op, &lt, &rt, ("", "")).ok()
        }
        _ => None,
    }
}

/// The types the operands of `a op b` are evaluated as when the result goes to a receiver of
/// type `receiver`: literals and bind markers take the receiver's type where they can (the
/// only candidate operation Cassandra finds), other terms keep their own type; with a
/// timestamp or date receiver the right operand is a duration.
pub fn operand_types(a: &Term, b: &Term, receiver: &CqlType) -> (CqlType, CqlType) {
    let recv = receiver.unfrozen();
    let temporal = matches!(recv, CqlType::Timestamp | CqlType::Date);
    let side = |t: &Term, right: bool| -> CqlType {
        let own = term_type(t);
        let adopt = |want: &CqlType| -> CqlType {
            match t {
                Term::Bind { .. } => want.clone(),
                Term::Literal(l) => match (l, want) {
                    (Literal::Integer(_), w) if arith::is_numeric(w) => w.clone(),
                    (Literal::Float(_), CqlType::Float | CqlType::Double | CqlType::Decimal) => {
                        want.clone()
                    }
                    (
                        Literal::String(_),
                        CqlType::Timestamp | CqlType::Date | CqlType::Text | CqlType::Ascii,
                    ) => want.clone(),
                    _ => own.clone().unwrap_or_else(|| want.clone()),
                },
                _ => own.clone().unwrap_or_else(|| want.clone()),
            }
        };
        if temporal {
            adopt(if right { &CqlType::Duration } else { recv })
        } else {
            adopt(recv)
        }
    };
    (side(a, false), side(b, true))
}

/// A term as written, for error messages.
pub fn term_text(t: &Term) -> String {
    match t {
        Term::Literal(l) => match l {
            Literal::String(s) => format!("'{}'", s.replace('\'', "''")),
            Literal::Integer(s) | Literal::Float(s) | Literal::Uuid(s) | Literal::Duration(s) => {
                s.clone()
            }
            Literal::Boolean(b) => b.to_string(),
            Literal::Blob(b) => format!(
                "0x{}",
                b.iter().map(|x| format!("{x:02x}")).collect::<String>()
            ),
            Literal::Null => "null".into(),
        },
        Term::Bind { name: Some(n), .. } => format!(":{n}"),
        Term::Bind { .. } => "?".into(),
        Term::Function { name, args, .. } => format!(
            "{name}({})",
            args.iter().map(term_text).collect::<Vec<_>>().join(", ")
        ),
        Term::Negate(x) => format!("-{}", term_text(x)),
        Term::Binary(op, a, b) => {
            format!("{} {} {}", term_text(a), arith::symbol(*op), term_text(b))
        }
        Term::TypeHint(_, x) => term_text(x),
        _ => "(...)".into(),
    }
}
