//! Secondary indexes: entries kept in the data space, maintained in the same atomic batch as
//! every row change, and read back for `WHERE col = ?` queries without ALLOW FILTERING.
//!
//! Entry key: `[index storage id: u64 BE][indexed value, order-preserving key encoding]
//! [the row's key without the table's storage id]`, empty value. The row key tail holds token,
//! partition key, kind and clustering, so a lookup of one value walks its rows in token order
//! (Cassandra's order for index queries) and rebuilds each row key exactly. Readers re-check the
//! row itself, so an entry left behind by an expired cell never yields a wrong row.

use super::row::{self, RowData, KIND_ROW};
use super::Engine;
use crate::cql::types::CqlType;
use crate::cql::value;
use crate::schema::{ColumnKind, IndexDef, IndexKind, TableDef};
use crate::storage::handle::{LocalWrite, PartitionCommit};
use crate::storage::{Space, WriteBatch};
use std::collections::BTreeSet;

/// The key prefix of all entries of `index` for the indexed value `v`.
pub fn value_prefix(index: &IndexDef, ty: &CqlType, v: &[u8]) -> Vec<u8> {
    let mut k = index.storage_id.to_be_bytes().to_vec();
    value::encode_key(ty, v, false, &mut k);
    k
}

/// The type of the values an index stores for its column.
pub fn indexed_type(index: &IndexDef, col_ty: &CqlType) -> CqlType {
    match (index.kind, col_ty.unfrozen()) {
        (IndexKind::Values, CqlType::List(e) | CqlType::Set(e)) => (**e).clone(),
        (IndexKind::Values, CqlType::Map(_, v)) => (**v).clone(),
        (IndexKind::Keys, CqlType::Map(k, _)) => (**k).clone(),
        (IndexKind::Entries, CqlType::Map(k, v)) => {
            CqlType::Tuple(vec![(**k).clone(), (**v).clone()])
        }
        _ => col_ty.clone(),
    }
}

/// The indexed values of one stored row (empty if the column is null or the cell not live).
fn values_of(
    table: &TableDef,
    index: &IndexDef,
    row_key: &[u8],
    data: &RowData,
    now: i64,
) -> Vec<Vec<u8>> {
    let Some(col) = table.column(&index.column) else {
        return Vec::new();
    };
    match col.kind {
        ColumnKind::Regular => match data.cell(col.id).filter(|c| c.is_live(now)) {
            Some(c) => match (&c.value, index.kind) {
                (Some(v), IndexKind::Value | IndexKind::Full) => vec![v.to_vec()],
                (Some(v), kind) => collection_values(&col.ty, kind, v),
                _ => Vec::new(),
            },
            None => Vec::new(),
        },
        ColumnKind::Clustering => {
            if !data.is_live(now) {
                return Vec::new();
            }
            let types: Vec<(&CqlType, bool)> = table
                .clustering_columns()
                .map(|c| (&c.ty, c.desc))
                .collect();
            match row::decode_key(row_key, &types) {
                Ok(dk) => dk
                    .clustering
                    .get(col.position)
                    .map(|b| b.to_vec())
                    .into_iter()
                    .collect(),
                Err(_) => Vec::new(),
            }
        }
        ColumnKind::PartitionKey => {
            if !data.is_live(now) {
                return Vec::new();
            }
            match row::decode_key(row_key, &[]) {
                Ok(dk) => crate::tokens::split_composite(&dk.pk, table.partition_key.len())
                    .and_then(|parts| parts.get(col.position).map(|p| p.to_vec()))
                    .into_iter()
                    .collect(),
                Err(_) => Vec::new(),
            }
        }
        ColumnKind::Static => Vec::new(),
    }
}

/// The values a collection index stores for one collection: its elements (list, set), map values
/// or keys, or map entries as (key, value) tuples.
fn collection_values(ty: &CqlType, kind: IndexKind, v: &[u8]) -> Vec<Vec<u8>> {
    match (kind, ty.unfrozen()) {
        (IndexKind::Values, CqlType::List(_) | CqlType::Set(_)) => value::collection_elements(v)
            .map(|it| {
                it.filter_map(|e| e.ok().flatten().map(<[u8]>::to_vec))
                    .collect()
            })
            .unwrap_or_default(),
        (IndexKind::Values, CqlType::Map(..)) => value::map_entries(v)
            .map(|es| es.iter().map(|(_, x)| x.to_vec()).collect())
            .unwrap_or_default(),
        (IndexKind::Keys, CqlType::Map(..)) => value::map_entries(v)
            .map(|es| es.iter().map(|(k, _)| k.to_vec()).collect())
            .unwrap_or_default(),
        (IndexKind::Entries, CqlType::Map(..)) => value::map_entries(v)
            .map(|es| {
                es.iter()
                    .map(|(k, x)| value::encode_tuple(&[Some(k), Some(x)]))
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Entry keys of a row for every index of its table.
fn entry_keys(table: &TableDef, row_key: &[u8], data: &RowData, now: i64) -> BTreeSet<Vec<u8>> {
    let mut out = BTreeSet::new();
    for ix in &table.indexes {
        let Some(col) = table.column(&ix.column) else {
            continue;
        };
        let ty = indexed_type(ix, &col.ty);
        for v in values_of(table, ix, row_key, data, now) {
            let mut k = value_prefix(ix, &ty, &v);
            k.extend_from_slice(&row_key[8..]);
            out.insert(k);
        }
    }
    out
}

/// Largest indexed value (Cassandra's `FBUtilities.MAX_UNSIGNED_SHORT`, exclusive).
const MAX_INDEXED_VALUE_BYTES: usize = 65_535;

/// Refuses a row holding a value too large to index, with Cassandra's message
/// (`CassandraIndex.validateIndexedValue`), before its write or an index build stores it.
pub fn check_indexed_sizes(
    table: &TableDef,
    row_key: &[u8],
    data: &RowData,
    now: i64,
) -> super::Result<()> {
    if table.indexes.is_empty() {
        return Ok(());
    }
    let mut data = data.clone();
    super::complex::materialize(&mut data, table, None, now);
    for ix in &table.indexes {
        for v in values_of(table, ix, row_key, &data, now) {
            if v.len() >= MAX_INDEXED_VALUE_BYTES {
                return Err(super::invalid(format!(
                    "Cannot index value of size {} for index {} on {}.{}({}) (maximum allowed size={MAX_INDEXED_VALUE_BYTES})",
                    v.len(),
                    ix.name,
                    table.keyspace,
                    table.name,
                    ix.column
                )));
            }
        }
    }
    Ok(())
}

/// Adds the index changes of one row write (old -> new) to `batch`.
pub fn maintain(
    table: &TableDef,
    row_key: &[u8],
    old: &RowData,
    new: &RowData,
    now: i64,
    batch: &mut WriteBatch,
) {
    if table.indexes.is_empty() || row_key.len() < 17 || row_token(row_key).is_none() {
        return;
    }
    let (mut old, mut new) = (old.clone(), new.clone());
    super::complex::materialize(&mut old, table, None, now);
    super::complex::materialize(&mut new, table, None, now);
    let before = entry_keys(table, row_key, &old, now);
    let after = entry_keys(table, row_key, &new, now);
    for k in before.difference(&after) {
        batch.delete(Space::Data, k.clone());
    }
    for k in after.difference(&before) {
        batch.put(Space::Data, k.clone(), Vec::new());
    }
}

/// Times an index build starts over through the current partition map after a split fenced
/// one of the partitions it was writing (entries are idempotent puts: starting over is safe).
const BUILD_ATTEMPTS: usize = 4;

/// Writes the entries of every existing row of the table for a new index: each physical
/// partition's rows are read through its handle and their entries committed to it as local
/// writes owned through the row's token, in commits of at most 1,000 entries. A partition that
/// split meanwhile answers `Fenced`; the build then starts over through the current map, at
/// most `BUILD_ATTEMPTS` times.
pub fn build(engine: &Engine, table: &TableDef, index: &IndexDef) -> super::Result<()> {
    for attempt in 1..=BUILD_ATTEMPTS {
        if build_once(engine, table, index)? {
            return Ok(());
        }
        tracing::info!(index = %index.name, attempt, "index build fenced by a split; starting over through the current partition map");
    }
    Err(crate::error::ClientError::Server(format!(
        "Building index {} did not finish: the table's physical partitions split during each of {BUILD_ATTEMPTS} attempts",
        index.name
    )))
}

/// Test hook: `RINGGATE_TEST_INDEX_BUILD_PAUSE_MS` sleeps that long before each commit of an
/// index build, so that a test can split the table meanwhile (`tests/python/test_index_build.py`).
fn build_pause() {
    static PAUSE_MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    crate::clock::test_pause("RINGGATE_TEST_INDEX_BUILD_PAUSE_MS", &PAUSE_MS);
}

/// One pass of `build`; false when a commit was fenced (a partition split meanwhile).
fn build_once(engine: &Engine, table: &TableDef, index: &IndexDef) -> super::Result<bool> {
    let Some(map) = engine.maps.get(table.storage_id) else {
        return Ok(true);
    };
    for p in &map.parts {
        if !build_partition(engine, table, index, p)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Writes the entries of one physical partition's rows for `index` through its handle; false
/// when a commit was fenced (the partition split meanwhile).
pub(super) fn build_partition(
    engine: &Engine,
    table: &TableDef,
    index: &IndexDef,
    p: &crate::partition::map::PhysicalPartition,
) -> super::Result<bool> {
    const BATCH: usize = 1000;
    let mut single = table.clone();
    single.indexes = vec![index.clone()];
    let now = engine.clock.now_millis();
    let commit = |handle: &dyn crate::storage::PartitionHandle, c: PartitionCommit| {
        build_pause();
        match handle.commit(c) {
            Ok(_) => Ok(true),
            Err(crate::storage::StorageError::Fenced { .. }) => Ok(false),
            Err(e) => Err(crate::error::ClientError::from(e)),
        }
    };
    let handle = engine.handles.read(table.storage_id, p)?;
    let mut pending = PartitionCommit::default();
    let all = std::ops::Bound::Unbounded;
    for item in handle.scan(all, all, false) {
        let (k, v) = item?;
        let Some(token) = row_token(&k) else {
            continue;
        };
        let mut data = RowData::decode(&v)?;
        check_indexed_sizes(&single, &k, &data, now)?;
        super::complex::materialize(&mut data, table, None, now);
        for e in entry_keys(&single, &k, &data, now) {
            pending.local.push(LocalWrite {
                token,
                key: e.into(),
                value: Some(bytes::Bytes::new()),
            });
        }
        if pending.local.len() >= BATCH && !commit(&**handle, std::mem::take(&mut pending))? {
            return Ok(false);
        }
    }
    commit(&**handle, pending)
}

/// The token of a stored row's key (None for headers and other records).
fn row_token(key: &[u8]) -> Option<crate::tokens::Token> {
    row::decode_key(key, &[])
        .ok()
        .filter(|d| d.kind == KIND_ROW)
        .map(|d| d.token)
}

/// The row key an index entry points to.
pub fn row_key_of_entry(
    table: &TableDef,
    index: &IndexDef,
    ty: &CqlType,
    entry: &[u8],
) -> Option<Vec<u8>> {
    let mut rest = entry.get(8..)?;
    value::decode_key(ty, &mut rest, false).ok()?;
    let _ = index;
    let mut k = table.storage_id.to_be_bytes().to_vec();
    k.extend_from_slice(rest);
    Some(k)
}
