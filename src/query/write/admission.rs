//! Admission and charging of writes: the throughput that applies to a table, admission on
//! the budgets of the physical partitions a write touches, and the charge for the read of a
//! conditional write.

use super::*;
use smallvec::SmallVec;

/// The provisioned throughput that applies to a table (its own, else none).
pub fn table_throughput(_schema: &Schema, t: &TableDef) -> Option<i64> {
    t.options
        .cosmosdb_provisioned_throughput
        .or(t.options.cosmosdb_autoscale_max_throughput)
}

/// Splits a table's physical partitions until there are enough for its throughput
/// (ceil(RU / 10,000)); called after ALTER TABLE.
pub(super) fn ensure_throughput_layout(engine: &Engine, ks: &str, table: &str) -> Result<()> {
    let schema = engine.schema();
    let Some(t) = schema.keyspace(ks).and_then(|k| k.tables.get(table)) else {
        return Ok(());
    };
    let n = crate::partition::map::partitions_for_throughput(table_throughput(&schema, t));
    crate::partition::split::ensure_partitions(&engine.maps, &engine.handles, t.storage_id, n)?;
    Ok(())
}

/// Admits a write on the throughput budgets of the physical partitions it touches (before
/// anything is read or stored); returns each table's budget, which its commit is charged to
/// (`apply_once`; worked out once per write, not once per attempt).
/// `write_type` is the protocol's (`SIMPLE`, `BATCH`, ...), for a server-side retry timeout.
pub(crate) fn admit_writes(
    engine: &Engine,
    muts: &[Mutation],
    write_type: WriteType,
    rctx: Option<&crate::query::RequestCtx>,
) -> Result<TableBudgets> {
    let (budgets, parts) = write_partitions(engine, muts);
    // A LOGGED batch over several partitions in cluster mode (not already one owner's part of
    // it) goes through the cluster batch log even when one node owns them all: a node that dies
    // mid-commit leaves it to be replayed by another (`server::batchlog`).
    let cluster_logged = engine.node.cluster.is_some()
        && write_type == WriteType::Batch
        && rctx.is_some_and(|c| c.only_partitions().is_none());
    require_owner(engine, muts, cluster_logged)?;
    let gates: SmallVec<[_; 1]> = parts.iter().map(|(p, b)| b.gate(p)).collect();
    let how = crate::partition::throttle::admit(
        &engine.limits.throughput,
        crate::partition::throttle::Access::Write(write_type),
        &gates,
        rctx.and_then(|c| c.held_since()),
    )?;
    if let Some(c) = rctx {
        c.admitted(how);
    }
    Ok(budgets)
}

/// Cluster mode: only the owner of every partition the mutations touch commits (and charges)
/// them; checked before anything is read (see `partition::placement`). `logged`: several
/// partitions are answered as spanning owners even when they have one (see `admit_writes`).
fn require_owner(engine: &Engine, muts: &[Mutation], logged: bool) -> Result<()> {
    if engine.handles.all_local() {
        return Ok(());
    }
    let mut parts: SmallVec<[(u64, Arc<crate::partition::map::PhysicalPartition>); 1]> =
        SmallVec::new();
    for m in muts {
        let sid = m.table.storage_id;
        let Some(map) = engine.maps.get(sid) else {
            continue;
        };
        let p = map.route(m.token);
        if !parts.iter().any(|(s, q)| *s == sid && Arc::ptr_eq(q, p)) {
            parts.push((sid, Arc::clone(p)));
        }
    }
    let placed = parts.iter().map(|(s, p)| (*s, &**p));
    if logged && parts.len() > 1 {
        crate::partition::placement::require_one_place(&engine.handles, placed)?;
    } else {
        crate::partition::placement::require_local(&engine.handles, placed)?;
    }
    Ok(())
}

/// Whether a request's consumption is debited from its budgets (requests without a context are
/// internal and always are).
pub(super) fn debits_budget(rctx: Option<&crate::query::RequestCtx>) -> bool {
    rctx.is_none_or(|c| c.debits_budget())
}

/// Charges the read of a conditional write (`read`: stored keys and bytes read) to the request,
/// the partition's consumption and heat, and its throughput budget.
pub(crate) fn charge_read(
    engine: &Engine,
    rctx: Option<&crate::query::RequestCtx>,
    t: &TableDef,
    pk: &[u8],
    read: (u64, u64),
) {
    let ru = crate::partition::ru::read_cost(read.0, read.1);
    if let Some(c) = rctx {
        c.add_charge(ru);
    }
    let Some(map) = engine.maps.get(t.storage_id) else {
        return;
    };
    let token = table_token(t, pk);
    let p = map.route(token);
    // One clock reading for both (a point read's request pays for every reading).
    let now = crate::partition::ru::unix_now();
    p.stats.consumed.add_at(ru, now);
    p.stats.hot.record_at(token, pk, ru, now);
    let schema = engine.schema();
    let budget = crate::partition::throttle::table_budget(
        &engine.maps,
        &schema,
        t,
        &map,
        &engine.limits.throughput,
    );
    if debits_budget(rctx) {
        budget.charge(&engine.limits.throughput, p, ru);
    }
}

pub(super) type Budget = crate::partition::throttle::TableBudget;
/// Each table's throughput budget, by storage id. Inline room for one: a point write's lists
/// cost no allocation (these were 4 of a point write's ~45).
pub(crate) type TableBudgets = SmallVec<[(u64, Budget); 1]>;
pub(super) type PartBudgets =
    SmallVec<[(Arc<crate::partition::map::PhysicalPartition>, Budget); 1]>;
type TableMaps = SmallVec<[Arc<crate::partition::map::PartitionMap>; 1]>;

/// Each table's throughput budget and the physical partitions the mutations touch with theirs.
pub(super) fn write_partitions(engine: &Engine, muts: &[Mutation]) -> (TableBudgets, PartBudgets) {
    let (budgets, maps) = table_budgets(engine, muts);
    let mut parts = PartBudgets::new();
    for m in muts {
        let sid = m.table.storage_id;
        let Some((map, (_, budget))) = maps.iter().zip(&budgets).find(|(_, (s, _))| *s == sid)
        else {
            continue;
        };
        let p = map.route(m.token);
        if !parts.iter().any(|(q, _)| Arc::ptr_eq(q, p)) {
            parts.push((Arc::clone(p), budget.clone()));
        }
    }
    (budgets, parts)
}

/// The throughput budget of each table the mutations write (tables without a map have none),
/// with its map.
pub(super) fn table_budgets(engine: &Engine, muts: &[Mutation]) -> (TableBudgets, TableMaps) {
    let schema = engine.schema();
    let (mut budgets, mut maps) = (TableBudgets::new(), TableMaps::new());
    for m in muts {
        let sid = m.table.storage_id;
        if budgets.iter().any(|(s, _)| *s == sid) {
            continue;
        }
        let Some(map) = engine.maps.get(sid) else {
            continue;
        };
        let b = crate::partition::throttle::table_budget(
            &engine.maps,
            &schema,
            &m.table,
            &map,
            &engine.limits.throughput,
        );
        budgets.push((sid, b));
        maps.push(map);
    }
    (budgets, maps)
}
