//! Recognizing a change feed query: the predicates `COSMOS_CHANGEFEED_START_TIME() = <time>`
//! (Cosmos DB's) and `CHANGEFEED_DELETES() = true` (ringgate's: deleted rows appear too).
//!
//! They are taken out of the SELECT; what is left is planned as any SELECT, and its target
//! becomes the feed's scope (`pk = ...`, `pk IN (...)`, `token(pk) > a AND token(pk) <= b`).

use crate::cql::ast::{Operator, Relation, RelationLhs, Select};
use crate::cql::types::CqlType;
use crate::query::eval::{eval, Ctx, Val};
use crate::query::{invalid, Result};

const START_TIME: &str = "cosmos_changefeed_start_time";
const DELETES: &str = "changefeed_deletes";

/// What a change feed query asks beyond its SELECT.
#[derive(Debug, Clone)]
pub struct FeedQuery {
    /// The first sequence (µs since the epoch) the feed returns, on a first page.
    pub start_micros: u64,
    /// Deleted rows appear, with their primary key and null columns.
    pub deletes: bool,
}

/// The type of a feed predicate's value (for bind markers), None for other functions.
pub fn bind_type(function: &str) -> Option<CqlType> {
    match function.to_ascii_lowercase().as_str() {
        START_TIME => Some(CqlType::Timestamp),
        DELETES => Some(CqlType::Boolean),
        _ => None,
    }
}

/// The feed query and the SELECT without its feed predicates, or None for an ordinary SELECT.
pub fn detect(sel: &Select, ctx: &Ctx) -> Result<Option<(FeedQuery, Select)>> {
    let is_feed =
        |r: &Relation| matches!(&r.lhs, RelationLhs::Function(f) if bind_type(f).is_some());
    if !sel.where_clause.iter().any(is_feed) {
        return Ok(None);
    }
    let mut start_micros = None;
    let mut deletes = false;
    for r in sel.where_clause.iter().filter(|r| is_feed(r)) {
        let RelationLhs::Function(f) = &r.lhs else {
            continue;
        };
        let f = f.to_ascii_lowercase();
        if r.op != Operator::Eq {
            return Err(invalid(format!("{f}() only supports the = operator")));
        }
        let ty = bind_type(&f).unwrap_or(CqlType::Blob);
        let v = match eval(&r.rhs, &ty, &f, ctx)? {
            Val::Value(b) => b,
            _ => return Err(invalid(format!("Invalid null value for {f}()"))),
        };
        match f.as_str() {
            START_TIME => {
                let ms =
                    i64::from_be_bytes(v[..].try_into().map_err(|_| invalid("bad timestamp"))?);
                start_micros = Some((ms.max(0) as u64).saturating_mul(1000));
            }
            _ => deletes = v.first().is_some_and(|&b| b != 0),
        }
    }
    let Some(start_micros) = start_micros else {
        return Err(invalid(format!(
            "{DELETES}() needs COSMOS_CHANGEFEED_START_TIME() = <time>"
        )));
    };
    if !sel.group_by.is_empty() || sel.distinct || !sel.order_by.is_empty() {
        return Err(invalid(
            "Change feed queries support no GROUP BY, DISTINCT or ORDER BY",
        ));
    }
    let mut rest = sel.clone();
    rest.where_clause.retain(|r| !is_feed(r));
    Ok(Some((
        FeedQuery {
            start_micros,
            deletes,
        },
        rest,
    )))
}
