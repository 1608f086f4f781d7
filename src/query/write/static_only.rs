//! Cassandra's rule for writes that modify only static columns (StatementRestrictions): such
//! an UPDATE or DELETE names no row, so restricting clustering columns in it is refused
//! rather than silently writing only the partition's static row.

use super::*;

/// Refuses clustering restrictions on an UPDATE/DELETE whose assigned or deleted columns and
/// column conditions are all static (a DELETE of whole rows modifies regular columns; IF
/// EXISTS concerns no column, as in Cassandra). `stripped`: the statement's conditions when
/// the conditional path has taken them off it.
pub(crate) fn check_static_only(
    table: &TableDef,
    st: &Statement,
    stripped: Option<&Conditions>,
) -> Result<()> {
    let (kind, mut columns, rels, conds): (&str, Vec<&str>, &[Relation], _) = match st {
        Statement::Update(u) => (
            "UPDATE",
            u.assignments.iter().map(Assignment::column).collect(),
            &u.where_clause,
            &u.conditions,
        ),
        Statement::Delete(d) => (
            "DELETE",
            d.targets.iter().map(deleted_column).collect(),
            &d.where_clause,
            &d.conditions,
        ),
        _ => return Ok(()),
    };
    if let Some(Conditions::Columns(cs)) = stripped.or(conds.as_ref()) {
        columns.extend(cs.iter().map(|c| c.column.as_str()));
    }
    let is_static = |name: &&str| {
        table
            .column(name)
            .is_some_and(|c| c.kind == ColumnKind::Static)
    };
    if columns.is_empty() || !columns.iter().all(is_static) {
        return Ok(());
    }
    let restricts_clustering = rels.iter().any(|r| match &r.lhs {
        RelationLhs::Column(c) => table
            .column(c)
            .is_some_and(|c| c.kind == ColumnKind::Clustering),
        RelationLhs::Tuple(_) => true,
        _ => false,
    });
    if restricts_clustering {
        return Err(invalid(format!(
            "Invalid restrictions on clustering columns since the {kind} statement modifies only static columns"
        )));
    }
    Ok(())
}

fn deleted_column(t: &DeleteTarget) -> &str {
    match t {
        DeleteTarget::Column(name)
        | DeleteTarget::Element(name, _)
        | DeleteTarget::Field(name, _) => name,
    }
}
