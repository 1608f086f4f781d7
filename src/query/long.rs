//! Which statements may run long: the connection runs those on a bounded pool of blocking
//! threads so that a big scan cannot hold a runtime thread that short requests (point reads
//! and writes, which stay on the runtime: a thread hand-off would cost them more than they
//! take) and new connections need.
//!
//! Long: a SELECT that does not name every partition key column with `=` or `IN` (a scan of
//! the ring, a token range, a hierarchical key prefix, a secondary index), a SELECT with ALLOW
//! FILTERING, reads of `system_views` (some walk every table's size records), and CREATE INDEX
//! (it indexes the table's existing rows), and writes to `system_views.maintenance`. Everything else (writes, batches, other DDL,
//! single-partition reads) is short.

use crate::cql::ast::{Operator, Parsed, RelationLhs, Statement};
use crate::schema::Schema;

/// Whether a statement may run long (see the module doc).
pub fn may_run_long(schema: &Schema, keyspace: Option<&str>, parsed: &Parsed) -> bool {
    let sel = match &parsed.statement {
        Statement::Select(sel) => sel,
        Statement::CreateIndex { .. } => return true,
        // Maintenance commands (compactions, backups) take as long as they take.
        st if super::maintenance::targets(st, keyspace).is_some() => return true,
        // Registering a storage group connects to it.
        st if super::storage_groups::targets(st, keyspace).is_some() => return true,
        // Requesting a partition move writes to etcd.
        st if super::partition_moves::targets(st, keyspace).is_some() => return true,
        _ => return false,
    };
    if sel.allow_filtering {
        return true;
    }
    let Some(ks) = sel.table.keyspace.as_deref().or(keyspace) else {
        return false;
    };
    if ks == "system_views" {
        return true;
    }
    let Some(t) = schema.table(ks, &sel.table.name) else {
        return false; // the error is the planner's to report
    };
    if t.virtual_table {
        return false;
    }
    t.partition_key.iter().any(|&i| {
        let name = &t.columns[i].name;
        !sel.where_clause.iter().any(|r| {
            matches!(&r.lhs, RelationLhs::Column(c) if c == name)
                && matches!(r.op, Operator::Eq | Operator::In)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_are_long_and_key_lookups_are_not() {
        let schema = crate::schema::Schema::default();
        let parse = |q: &str| crate::cql::parse(q).unwrap();
        // Unknown tables, writes and system tables are short; system_views may scan.
        assert!(!may_run_long(&schema, None, &parse("SELECT * FROM ks.t")));
        assert!(!may_run_long(
            &schema,
            None,
            &parse("INSERT INTO ks.t (a) VALUES (1)")
        ));
        assert!(may_run_long(
            &schema,
            None,
            &parse("SELECT * FROM ks.t ALLOW FILTERING")
        ));
        assert!(may_run_long(
            &schema,
            None,
            &parse("SELECT * FROM system_views.logical_partitions")
        ));
    }
}
