//! Clustering values that Cassandra compares as equal while their bytes differ name one row.
//!
//! Cassandra's clustering comparator compares by value: `decimal` 1.0 and 1.00, `varint` 0x01
//! and 0x0001, a tuple with and without trailing nulls, NaNs with other payloads, `boolean`
//! 0x01 and 0x02 are the same clustering, so a write of one updates the row of the other. The
//! key encoding (`cql::value::key`) keeps the exact bytes after the order part (a row reads back
//! the bytes it was written with), so two such values would be two storage keys. Before a
//! write is merged, and before a conditional write reads its row, the key is replaced by the
//! key already stored (or already written by the same batch) for the same order part: the row
//! keeps the bytes it was first written with, as Cassandra's memtable keeps the existing
//! clustering when it merges an update into a row. Rows stored before this rule existed stay
//! where they are and read as before (both rows, as they were written).
//!
//! Only tables with such a clustering type pay the lookup (one short seek in the partition).
//! Partition keys are left alone: Cassandra hashes a partition key's bytes as sent, so 1.0 and
//! 1.00 are two partitions there too.

use super::*;
use crate::format::{self, KIND_ROW};
use std::ops::Bound;

/// Stored keys looked at under one order part: more than one means rows stored before this
/// rule (two serializations of one value), of which the first is used.
const MAX_CANDIDATES: usize = 8;

/// Whether values of `ty` can compare equal while their bytes differ (their key has a suffix).
fn may_alias(ty: &CqlType) -> bool {
    match ty {
        CqlType::Boolean
        | CqlType::Float
        | CqlType::Double
        | CqlType::Decimal
        | CqlType::Varint
        | CqlType::Tuple(_)
        | CqlType::Udt(_) => true,
        CqlType::List(e) | CqlType::Set(e) | CqlType::Vector(e, _) | CqlType::Frozen(e) => {
            may_alias(e)
        }
        CqlType::Map(k, v) => may_alias(k) || may_alias(v),
        _ => false,
    }
}

/// The key prefix every stored key of the same row as `key` starts with (its partition, the
/// row kind and the order parts of all its clustering values); None when `key` is not a row key
/// of a table whose clustering values can alias.
pub(crate) fn order_prefix(table: &TableDef, key: &[u8]) -> Option<Vec<u8>> {
    if !table.clustering_columns().any(|c| may_alias(&c.ty)) {
        return None;
    }
    let types = format::clustering_types(table);
    let decoded = format::decode_key(key, &types).ok()?;
    if decoded.kind != KIND_ROW {
        return None;
    }
    let mut prefix = format::partition_prefix(table.storage_id, decoded.token, &decoded.pk);
    prefix.push(KIND_ROW);
    format::encode_clustering_prefix(&types, &decoded.clustering, &mut prefix);
    Some(prefix)
}

/// The stored key of the row `key` names: `key` itself unless the partition holds the row under
/// another serialization of its clustering values (then that key).
pub(crate) fn stored_row_key(engine: &Engine, table: &TableDef, key: Vec<u8>) -> Result<Vec<u8>> {
    let Some(prefix) = order_prefix(table, &key) else {
        return Ok(key);
    };
    let token = format::key_token(&key).expect("a row key has a token");
    let end = format::prefix_successor_or_empty(prefix.clone());
    let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    let handle = engine.handle_at(table.storage_id, token)?;
    let mut first = None;
    for entry in handle
        .scan(Bound::Included(&prefix), upper, false)
        .take(MAX_CANDIDATES)
    {
        let (stored, _) = entry?;
        if stored[..] == key[..] {
            return Ok(key);
        }
        first.get_or_insert(stored);
    }
    Ok(first.map_or(key, |k| k.to_vec()))
}
