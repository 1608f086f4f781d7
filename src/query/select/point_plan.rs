//! The plan of a point read, worked out from a template kept with the statement's shape
//! (`shape.rs`) instead of by the general planner (`plan.rs`).
//!
//! Why: a prepared `SELECT ... WHERE k = ?` planned from scratch on every EXECUTE: relations
//! checked and looked up by name, the key's values gathered per column and combined, filters,
//! index use, clustering slices and order worked out. That was about 3,200 of a point read's
//! ~19,300 instructions (callgrind, 4 x 32, keys in the memtable), of which only the key's
//! binding and its token depend on the request.
//!
//! Which statements: every relation is `column = term` on a primary key column, each column at
//! most once, every partition key column given and the clustering columns given a prefix of
//! them, on a stored table. For those the general planner reads one partition (no token
//! bounds, no filters, no index, no ALLOW FILTERING question), and this module builds the same
//! plan: the same binding functions in the same order (partition key values in the WHERE
//! clause's order, then clustering values in clustering order), so a bad value gets the same
//! error. ORDER BY is worked out once, when the template is made; a statement whose ORDER BY
//! is refused gets no template, and the general planner refuses it per request as before.

use super::*;

/// What a point read's plan needs from the statement, bind-independent.
#[derive(Debug)]
pub(crate) struct PointTemplate {
    /// For each partition key column restricted (in the WHERE clause's order): the relation's
    /// index and the column's position in the partition key.
    partition: Vec<(usize, usize)>,
    /// The relation restricting each of the first clustering columns, in clustering order.
    clustering: Vec<usize>,
    reversed: bool,
}

/// The template of `sel` on `t`, if it is a point read (see the module doc).
pub(super) fn point_template(t: &TableDef, sel: &Select) -> Option<PointTemplate> {
    if t.virtual_table {
        return None;
    }
    let mut partition = Vec::with_capacity(t.partition_key.len());
    let mut clustering: Vec<Option<usize>> = vec![None; t.clustering.len()];
    for (i, r) in sel.where_clause.iter().enumerate() {
        let RelationLhs::Column(name) = &r.lhs else {
            return None;
        };
        if r.op != Operator::Eq {
            return None;
        }
        let col = t.column(name)?;
        let slot = match col.kind {
            ColumnKind::PartitionKey => {
                if partition.iter().any(|&(_, p)| p == col.position) {
                    return None;
                }
                partition.push((i, col.position));
                continue;
            }
            ColumnKind::Clustering => clustering.get_mut(col.position)?,
            _ => return None,
        };
        if slot.replace(i).is_some() {
            return None;
        }
    }
    if partition.len() != t.partition_key.len() {
        return None;
    }
    let given = clustering.iter().take_while(|c| c.is_some()).count();
    if clustering[given..].iter().any(Option::is_some) {
        return None;
    }
    Some(PointTemplate {
        partition,
        clustering: clustering.into_iter().flatten().collect(),
        reversed: reversed_order(t, sel, true).ok()?,
    })
}

impl PointTemplate {
    /// The plan of one request: what `plan::plan` answers for this statement, from its values.
    pub(super) fn plan(
        &self,
        t: &TableDef,
        sel: &Select,
        ctx: &Ctx,
        static_rows: bool,
    ) -> Result<Plan> {
        let key = self.partition_key(t, sel, ctx)?;
        let mut prefix_vals = Vec::with_capacity(self.clustering.len());
        for (&r, &ci) in self.clustering.iter().zip(&t.clustering) {
            let col = &t.columns[ci];
            prefix_vals.push(vec![eval_one(
                &sel.where_clause[r].rhs,
                &col.ty,
                &col.name,
                ctx,
            )?]);
        }
        let slices = clustering_slices(t, &prefix_vals, None);
        let limit = limit_value(sel.limit.as_ref(), "[limit]", "LIMIT", ctx)?;
        let points = names_whole_rows(t, prefix_vals.len(), false, &slices);
        let tokens = vec![table_token(t, &key)];
        Ok(Plan {
            target: Target::Partitions(vec![key]),
            slices,
            filters: Vec::new(),
            limit,
            reversed: self.reversed,
            static_rows,
            points,
            tokens,
        })
    }

    /// The partition key bound from the request, checked as `key_values` and
    /// `named_partitions` check it (`write::partition_key_of`).
    fn partition_key(&self, t: &TableDef, sel: &Select, ctx: &Ctx) -> Result<Bytes> {
        let mut parts: smallvec::SmallVec<[Bytes; 4]> =
            smallvec::smallvec![Bytes::new(); self.partition.len()];
        for &(r, pos) in &self.partition {
            // The relation names this column exactly (`TableDef::column`).
            let col = &t.columns[t.partition_key[pos]];
            let v = eval(&sel.where_clause[r].rhs, &col.ty, &col.name, ctx)?;
            parts[pos] = crate::query::write::key_value(v, col)?;
        }
        partition_key_of(&parts)
    }
}
