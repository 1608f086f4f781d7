//! LIMIT and PER PARTITION LIMIT: their values (bind markers, Cassandra's errors for null and
//! values below 1) and DISTINCT's one row per partition.

use super::*;

/// The per-partition row limit: PER PARTITION LIMIT n, or one row per partition for DISTINCT
/// (which may select only partition key and static columns).
pub(super) fn per_partition_limit(
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
                Proj::Token | Proj::Agg(..) | Proj::AggOf(..) => true,
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
pub(super) fn limit_value(
    term: Option<&Term>,
    name: &str,
    what: &str,
    ctx: &Ctx,
) -> Result<Option<usize>> {
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
