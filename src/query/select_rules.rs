//! Cassandra 5.0's rules for the WHERE and ORDER BY clauses of a SELECT that are checked before
//! planning: forms Cassandra refuses (with its messages) even though the planner could answer
//! them by filtering.
//!
//! - `!=` is not a relation Cassandra 5.0 supports: `Unsupported "!=" relation: v != 3`.
//! - A non-frozen collection takes CONTAINS / CONTAINS KEY only, a non-frozen UDT nothing.
//! - Slices on duration columns (durations have no order), also tuples/UDTs holding one.
//! - DISTINCT may be restricted by partition key and static columns only.
//! - ORDER BY names clustering columns in their declared order (columns skipped must be
//!   restricted by `=`), all in the clustering order or all reversed.

use super::{invalid, Result};
use crate::cql::ast::{Operator, Order, Relation, RelationLhs, Select};
use crate::cql::types::CqlType;
use crate::schema::{ColumnKind, TableDef};

/// `token(...)` in a relation names the partition key columns in order; otherwise the
/// problem is narrowed down as Cassandra's `ColumnsExpression.Kind.TOKEN.validateColumns`
/// does (missing components, duplicates, other columns, order).
fn check_token_columns(t: &TableDef, cols: &[String]) -> Result<()> {
    for c in cols {
        crate::query::require_column_index(t, c)?;
    }
    let pk: Vec<&str> = t.pk_columns().map(|c| c.name.as_str()).collect();
    let given: Vec<&str> = cols.iter().map(String::as_str).collect();
    if given == pk {
        return Ok(());
    }
    let message = if !pk.iter().all(|p| given.contains(p)) {
        "The token() function must be applied to all partition key components or none of them"
            .to_string()
    } else if (1..given.len()).any(|i| given[..i].contains(&given[i])) {
        "The token() function contains duplicate partition key components".to_string()
    } else if !given.iter().all(|g| pk.contains(g)) {
        "The token() function must contains only partition key components".to_string()
    } else {
        format!(
            "The token function arguments must be in the partition key order: {}",
            pk.join(", ")
        )
    };
    Err(invalid(message))
}

/// Checks a SELECT's relations and ordering against Cassandra's rules.
pub(crate) fn check(t: &TableDef, sel: &Select) -> Result<()> {
    for r in &sel.where_clause {
        check_relation(t, r)?;
    }
    if sel.distinct {
        check_distinct(t, &sel.where_clause)?;
    }
    check_order_by(t, sel)
}

fn check_relation(t: &TableDef, r: &Relation) -> Result<()> {
    if let RelationLhs::Token(cols) = &r.lhs {
        return check_token_columns(t, cols);
    }
    let RelationLhs::Column(name) = &r.lhs else {
        return Ok(());
    };
    if r.op == Operator::Ne {
        return Err(invalid(format!(
            "Unsupported \"!=\" relation: {name} != {}",
            super::eval::term_text(&r.rhs)
        )));
    }
    // Operator.validateFor: a non-frozen collection is restricted by CONTAINS (KEY) only, a
    // non-frozen UDT by nothing.
    if let Some(c) = t.column(name) {
        match &c.ty {
            CqlType::Udt(_) => {
                return Err(invalid(format!(
                    "Non-frozen UDT column '{name}' ({}) cannot be restricted by any relation",
                    c.ty
                )))
            }
            CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..)
                if !matches!(r.op, Operator::Contains | Operator::ContainsKey) =>
            {
                return Err(invalid(format!(
                    "Collection column '{name}' ({}) cannot be restricted by a '{}' relation",
                    c.ty,
                    r.op.as_str()
                )))
            }
            _ => {}
        }
    }
    let slice = matches!(
        r.op,
        Operator::Lt | Operator::Le | Operator::Gt | Operator::Ge
    );
    if slice && t.column(name).is_some_and(|c| c.ty.references_duration()) {
        return Err(invalid(
            "Slice restrictions are not supported on duration columns",
        ));
    }
    Ok(())
}

fn check_distinct(t: &TableDef, rels: &[Relation]) -> Result<()> {
    let refused = rels.iter().any(|r| match &r.lhs {
        RelationLhs::Tuple(_) => true,
        RelationLhs::Column(c) | RelationLhs::Element(c, _) => t
            .column(c)
            .is_some_and(|c| matches!(c.kind, ColumnKind::Clustering | ColumnKind::Regular)),
        RelationLhs::Token(_) | RelationLhs::Function(_) => false,
    });
    if refused {
        return Err(invalid(
            "SELECT DISTINCT with WHERE clause only supports restriction by partition key and/or static columns.",
        ));
    }
    Ok(())
}

/// Whether clustering column `name` is restricted by a single-column `=`.
fn restricted_by_eq(rels: &[Relation], name: &str) -> bool {
    rels.iter()
        .any(|r| r.op == Operator::Eq && matches!(&r.lhs, RelationLhs::Column(c) if c == name))
}

fn check_order_by(t: &TableDef, sel: &Select) -> Result<()> {
    let mut next = 0;
    let mut reversed: Option<bool> = None;
    for (name, dir) in &sel.order_by {
        let Some(col) = t.column(name) else {
            return Err(invalid(format!("Undefined column name {name}")));
        };
        if col.kind != ColumnKind::Clustering {
            return Err(invalid(format!(
                "Order by is currently only supported on the clustered columns of the PRIMARY KEY, got {name}"
            )));
        }
        while next < col.position {
            let skipped = &t.columns[t.clustering[next]].name;
            if !restricted_by_eq(&sel.where_clause, skipped) {
                return Err(invalid(
                    "Order by currently only supports the ordering of columns following their declared order in the PRIMARY KEY",
                ));
            }
            next += 1;
        }
        if col.position < next {
            return Err(invalid(
                "Order by currently only supports the ordering of columns following their declared order in the PRIMARY KEY",
            ));
        }
        next = col.position + 1;
        let this = (*dir == Order::Desc) != col.desc;
        if reversed.is_some_and(|r| r != this) {
            return Err(invalid("Unsupported order by relation"));
        }
        reversed = Some(this);
    }
    Ok(())
}
