//! The schema: keyspaces, tables, columns and user types, persisted in the store's metadata
//! space, plus the built-in system keyspaces and their virtual tables.
//!
//! Readers take an `Arc<Schema>` snapshot (lock-free); DDL builds a new snapshot, persists it
//! atomically, and swaps it in.

pub mod catalog;
pub mod ddl;
pub mod describe;
pub mod diff;
mod peers;
pub mod system;

use crate::cql::types::{CqlType, UdtDef};
use std::collections::BTreeMap;
use std::sync::Arc;
use uuid::Uuid;

pub use catalog::Catalog;

/// The error a client sees (`crate::error`), under the name the schema layer uses: schema
/// operations fail with Invalid, AlreadyExists, Config, Syntax or Server.
pub use crate::error::ClientError as SchemaError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnKind {
    PartitionKey,
    Clustering,
    Regular,
    Static,
}

impl ColumnKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            ColumnKind::PartitionKey => "partition_key",
            ColumnKind::Clustering => "clustering",
            ColumnKind::Regular => "regular",
            ColumnKind::Static => "static",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDef {
    pub name: String,
    pub ty: CqlType,
    pub kind: ColumnKind,
    /// Position within the partition key or clustering columns; 0 for others.
    pub position: usize,
    /// Clustering columns only: descending order.
    pub desc: bool,
    /// Stable id used in stored rows; never reused within a table.
    pub id: u32,
}

/// How the partition key is hashed onto the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum PartitionKeyKind {
    /// Cassandra's Murmur3 over the whole key.
    #[default]
    Hash,
    /// Hierarchical: each level hashed separately (see docs).
    MultiHash,
}

/// Table options (Cassandra's, shown by DESCRIBE and system_schema.tables) plus Cosmos DB's.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct TableOptions {
    pub additional_write_policy: String,
    pub bloom_filter_fp_chance: f64,
    pub caching: BTreeMap<String, String>,
    pub cdc: bool,
    pub comment: String,
    pub compaction: BTreeMap<String, String>,
    pub compression: BTreeMap<String, String>,
    pub memtable: String,
    pub crc_check_chance: f64,
    pub default_time_to_live: i32,
    pub extensions: BTreeMap<String, String>,
    pub gc_grace_seconds: i32,
    pub max_index_interval: i32,
    pub memtable_flush_period_in_ms: i32,
    pub min_index_interval: i32,
    pub read_repair: String,
    pub speculative_retry: String,
    pub cosmosdb_provisioned_throughput: Option<i64>,
    pub cosmosdb_autoscale_max_throughput: Option<i64>,
    /// Cosmos DB's cell-level options, kept only to be shown again: ringgate always keeps
    /// timestamps, tombstones and TTLs per cell, so these change nothing (None = not given).
    pub cosmosdb_cell_level_timestamp: Option<bool>,
    pub cosmosdb_cell_level_timestamp_tombstones: Option<bool>,
    pub cosmosdb_cell_level_timetolive: Option<bool>,
    pub partition_key_kind: PartitionKeyKind,
}

fn map_of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            additional_write_policy: "99p".into(),
            bloom_filter_fp_chance: 0.01,
            caching: map_of(&[("keys", "ALL"), ("rows_per_partition", "NONE")]),
            cdc: false,
            comment: String::new(),
            compaction: map_of(&[
                (
                    "class",
                    "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy",
                ),
                ("max_threshold", "32"),
                ("min_threshold", "4"),
            ]),
            compression: map_of(&[
                ("chunk_length_in_kb", "16"),
                ("class", "org.apache.cassandra.io.compress.LZ4Compressor"),
            ]),
            memtable: "default".into(),
            crc_check_chance: 1.0,
            default_time_to_live: 0,
            extensions: BTreeMap::new(),
            gc_grace_seconds: 864000,
            max_index_interval: 2048,
            memtable_flush_period_in_ms: 0,
            min_index_interval: 128,
            read_repair: "BLOCKING".into(),
            speculative_retry: "99p".into(),
            cosmosdb_provisioned_throughput: None,
            cosmosdb_autoscale_max_throughput: None,
            cosmosdb_cell_level_timestamp: None,
            cosmosdb_cell_level_timestamp_tombstones: None,
            cosmosdb_cell_level_timetolive: None,
            partition_key_kind: PartitionKeyKind::Hash,
        }
    }
}

impl TableOptions {
    /// Cosmos DB's cell-level options by name, for DESCRIBE and system_schema.tables.
    pub fn cell_level_options(&self) -> [(&'static str, Option<bool>); 3] {
        [
            (
                "cosmosdb_cell_level_timestamp",
                self.cosmosdb_cell_level_timestamp,
            ),
            (
                "cosmosdb_cell_level_timestamp_tombstones",
                self.cosmosdb_cell_level_timestamp_tombstones,
            ),
            (
                "cosmosdb_cell_level_timetolive",
                self.cosmosdb_cell_level_timetolive,
            ),
        ]
    }
}

/// What a secondary index indexes of its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexKind {
    /// The value of a regular, static or clustering column (or a frozen collection whole).
    Value,
    /// The elements of a list or set, or the values of a map.
    Values,
    /// The keys of a map.
    Keys,
    /// The (key, value) entries of a map.
    Entries,
    /// A frozen collection as a whole (`full(c)`).
    Full,
}

/// A secondary index.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IndexDef {
    pub name: String,
    pub column: String,
    pub kind: IndexKind,
    /// Prefix of the index entries in the data space.
    pub storage_id: u64,
}

impl IndexDef {
    /// The target as Cassandra writes it in `options['target']` and DESCRIBE.
    pub fn target(&self) -> String {
        let c = crate::cql::types::quote_ident(&self.column);
        match self.kind {
            IndexKind::Value => c,
            IndexKind::Values => format!("values({c})"),
            IndexKind::Keys => format!("keys({c})"),
            IndexKind::Entries => format!("entries({c})"),
            IndexKind::Full => format!("full({c})"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct TableDef {
    pub keyspace: String,
    pub name: String,
    /// system_schema.tables.id
    pub id: Uuid,
    /// Prefix of the table's keys in the data space.
    pub storage_id: u64,
    /// All columns: partition key, clustering, then the others sorted by name.
    pub columns: Vec<ColumnDef>,
    /// Indexes into `columns`.
    pub partition_key: Vec<usize>,
    pub clustering: Vec<usize>,
    pub options: TableOptions,
    pub next_column_id: u32,
    /// Built-in system table (not stored, answered by `system`).
    pub virtual_table: bool,
    /// (name, type string, dropped_time micros) of dropped columns.
    pub dropped: Vec<(String, String, i64)>,
    /// Secondary indexes, maintained on every write.
    pub indexes: Vec<IndexDef>,
}

impl TableDef {
    pub fn column(&self, name: &str) -> Option<&ColumnDef> {
        self.columns.iter().find(|c| c.name == name)
    }
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }
    pub fn pk_columns(&self) -> impl Iterator<Item = &ColumnDef> {
        self.partition_key.iter().map(|&i| &self.columns[i])
    }
    pub fn clustering_columns(&self) -> impl Iterator<Item = &ColumnDef> {
        self.clustering.iter().map(|&i| &self.columns[i])
    }
    /// Regular and static columns.
    pub fn value_columns(&self) -> impl Iterator<Item = &ColumnDef> {
        self.columns
            .iter()
            .filter(|c| matches!(c.kind, ColumnKind::Regular | ColumnKind::Static))
    }
    pub fn is_counter_table(&self) -> bool {
        self.value_columns().any(|c| c.ty.is_counter())
    }
    pub fn has_static(&self) -> bool {
        self.columns.iter().any(|c| c.kind == ColumnKind::Static)
    }
    /// Whether the table's partitions may have a stored header (static cells, partition and
    /// range deletions). One without clustering columns never has: it can have no static
    /// columns, and DELETE of its partition deletes the one row, a deletion kept in the row
    /// (`query/write/delete.rs`, since the first stored format); so reads need not look one
    /// up. Tested: `a_flat_table_stores_no_partition_header`.
    pub fn stores_headers(&self) -> bool {
        !self.clustering.is_empty()
    }
}

#[derive(Debug, Clone)]
pub struct KeyspaceDef {
    pub name: String,
    pub replication: BTreeMap<String, String>,
    pub durable_writes: bool,
    pub cosmosdb_provisioned_throughput: Option<i64>,
    pub cosmosdb_autoscale_max_throughput: Option<i64>,
    pub tables: BTreeMap<String, Arc<TableDef>>,
    pub types: BTreeMap<String, Arc<UdtDef>>,
    /// Built-in system keyspace (not stored, not droppable).
    pub system: bool,
    /// Virtual keyspace (listed in system_virtual_schema instead of system_schema).
    pub is_virtual: bool,
}

/// An immutable snapshot of the whole schema.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    pub keyspaces: BTreeMap<String, Arc<KeyspaceDef>>,
    pub version: Uuid,
    pub next_storage_id: u64,
}

impl Schema {
    pub fn keyspace(&self, name: &str) -> Option<&Arc<KeyspaceDef>> {
        self.keyspaces.get(name)
    }
    pub fn table(&self, keyspace: &str, name: &str) -> Option<&Arc<TableDef>> {
        self.keyspaces.get(keyspace)?.tables.get(name)
    }
    /// Looks a table up with Cassandra's errors for a missing keyspace or table.
    pub fn require_table(&self, keyspace: &str, name: &str) -> Result<&Arc<TableDef>, SchemaError> {
        let ks = self
            .keyspaces
            .get(keyspace)
            .ok_or_else(|| SchemaError::Invalid(format!("Keyspace '{keyspace}' does not exist")))?;
        ks.tables
            .get(name)
            .ok_or_else(|| SchemaError::Invalid(format!("unconfigured table {name}")))
    }
    pub fn require_keyspace(&self, keyspace: &str) -> Result<&Arc<KeyspaceDef>, SchemaError> {
        self.keyspaces
            .get(keyspace)
            .ok_or_else(|| SchemaError::Invalid(format!("Keyspace '{keyspace}' does not exist")))
    }
}
