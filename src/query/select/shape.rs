//! The part of a SELECT's plan that depends only on the statement and the schema, kept with a
//! prepared statement so each EXECUTE does not work it out again.
//!
//! Why: a prepared point read planned its projection (column lookups by name, types and names
//! cloned) on every EXECUTE, about 700 of its ~25,600 instructions (callgrind, 4 x 32). What
//! is kept: the projection, the GROUP BY columns, whether the query selects whole partitions,
//! and that the WHERE clause passed the rules that need no values (`select_rules::check`).
//! Valid only under the schema version the statement was described under
//! (`Described::schema_version`: any DDL makes a new version, and an EXECUTE under another one
//! plans from scratch) and for the table it was planned for. Only a selection of plain columns
//! (or `*`) is kept: other selectors may hold bind markers (`selection_marker`), whose values
//! differ per request. Bound: one shape per prepared statement, counted in the prepared
//! statement cache's byte estimate (`Prepared::cost_bytes`).

use super::*;
use std::sync::OnceLock;

/// A prepared SELECT's bind-independent plan (see the module doc).
#[derive(Debug)]
pub struct Shape {
    /// The table planned for (the statement names it; the check guards a keyspace mix-up).
    storage_id: u64,
    pub(super) proj: Vec<(Proj, String, CqlType)>,
    pub(super) group_cols: Vec<usize>,
    /// `Plan::static_rows` (`selects_whole_partitions`).
    pub(super) static_rows: bool,
    /// A point read's plan template (`point_plan.rs`).
    pub(super) point: Option<PointTemplate>,
}

impl Shape {
    /// Whether the statement is a point read (`point_plan.rs`): it names one partition.
    pub fn reads_one_partition(&self) -> bool {
        self.point.is_some()
    }
}

/// Where a prepared statement keeps its shape: empty until its first EXECUTE under its own
/// schema version.
pub type ShapeCell = OnceLock<Shape>;

/// Whether the projection of `sel` holds no per-request values: `*` or plain columns.
fn keepable(sel: &Select) -> bool {
    match &sel.selection {
        Selection::All => true,
        Selection::List(items) => items
            .iter()
            .all(|s| matches!(s.expr, SelectorExpr::Column(_))),
    }
}

/// The projection and GROUP BY columns of `sel` on `t`: the kept ones if `cell` (valid for
/// this schema version: the caller checks) holds them for `t`, else planned, and kept when
/// they hold no per-request values.
pub(super) fn shape_of<'a>(
    t: &TableDef,
    sel: &Select,
    ctx: &Ctx,
    cell: Option<&'a ShapeCell>,
    planned: &'a mut Option<Shape>,
) -> Result<&'a Shape> {
    if let Some(s) = cell.and_then(OnceLock::get) {
        if s.storage_id == t.storage_id {
            return Ok(s);
        }
    }
    let shape = Shape {
        storage_id: t.storage_id,
        proj: plan_projection(t, Some(ctx), sel)?,
        group_cols: group_by_columns(t, sel)?,
        static_rows: selects_whole_partitions(t, sel),
        point: point_template(t, sel),
    };
    // The WHERE clause's bind-independent rules, after the selection's (Cassandra prepares the
    // selection first): a kept shape has passed them, so `plan` does not check them again.
    crate::query::select_rules::check(t, sel)?;
    match cell.filter(|_| keepable(sel)) {
        Some(cell) => match cell.set(shape) {
            Ok(()) => Ok(cell.get().expect("just set")),
            // Another request kept one first (or one for another table): this one stays local.
            Err(shape) => Ok(planned.insert(shape)),
        },
        None => Ok(planned.insert(shape)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn select(text: &str) -> Select {
        match crate::cql::parse(text).unwrap().statement {
            crate::cql::ast::Statement::Select(s) => s,
            _ => panic!("not a SELECT: {text}"),
        }
    }

    #[test]
    fn only_plain_column_projections_are_kept() {
        assert!(keepable(&select("SELECT * FROM t WHERE k = ?")));
        assert!(keepable(&select("SELECT k, v AS x FROM t WHERE k = ?")));
        // A computed selector may hold a bind marker, whose value differs per EXECUTE.
        assert!(!keepable(&select("SELECT k, v + ? FROM t WHERE k = ?")));
        assert!(!keepable(&select("SELECT count(*) FROM t WHERE k = ?")));
    }
}
