//! The built-in system keyspaces and the rows of their virtual tables.
//!
//! System tables are ordinary `TableDef`s (so they appear in system_schema and in the drivers'
//! metadata) whose rows are produced here from the schema and the node's identity.

use super::{ColumnDef, ColumnKind, KeyspaceDef, Schema, TableDef, TableOptions};
use crate::cql::types::CqlType;
use crate::tokens::Token;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use uuid::Uuid;

/// What this node reports about itself in system.local.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub listen: SocketAddr,
    pub host_id: Uuid,
    pub cluster_name: String,
    pub data_center: String,
    pub rack: String,
    pub tokens: Vec<Token>,
    pub native_protocol_version: String,
    /// Cluster mode: this node's membership and what it knows of the others (None: a
    /// single node).
    pub cluster: Option<Arc<crate::cluster::ClusterNode>>,
}

pub const RELEASE_VERSION: &str = "5.0.0";
pub const CQL_VERSION: &str = "3.4.7";
pub const PARTITIONER: &str = "org.apache.cassandra.dht.Murmur3Partitioner";

struct Spec {
    name: &'static str,
    pk: &'static [&'static str],
    ck: &'static [&'static str],
    /// (name, type) of every column, key columns included.
    cols: &'static [(&'static str, &'static str)],
}

const fn spec(
    name: &'static str,
    pk: &'static [&'static str],
    ck: &'static [&'static str],
    cols: &'static [(&'static str, &'static str)],
) -> Spec {
    Spec { name, pk, ck, cols }
}

const SYSTEM: &[Spec] = &[
    spec(
        "local",
        &["key"],
        &[],
        &[
            ("key", "text"),
            ("bootstrapped", "text"),
            ("broadcast_address", "inet"),
            ("broadcast_port", "int"),
            ("cluster_name", "text"),
            ("cql_version", "text"),
            ("data_center", "text"),
            ("gossip_generation", "int"),
            ("host_id", "uuid"),
            ("listen_address", "inet"),
            ("listen_port", "int"),
            ("native_protocol_version", "text"),
            ("partitioner", "text"),
            ("rack", "text"),
            ("release_version", "text"),
            ("rpc_address", "inet"),
            ("rpc_port", "int"),
            ("schema_version", "uuid"),
            ("tokens", "set<text>"),
            ("truncated_at", "map<uuid, blob>"),
        ],
    ),
    spec(
        "peers",
        &["peer"],
        &[],
        &[
            ("peer", "inet"),
            ("data_center", "text"),
            ("host_id", "uuid"),
            ("preferred_ip", "inet"),
            ("rack", "text"),
            ("release_version", "text"),
            ("rpc_address", "inet"),
            ("schema_version", "uuid"),
            ("tokens", "set<text>"),
        ],
    ),
    spec(
        "peers_v2",
        &["peer"],
        &["peer_port"],
        &[
            ("peer", "inet"),
            ("peer_port", "int"),
            ("data_center", "text"),
            ("host_id", "uuid"),
            ("native_address", "inet"),
            ("native_port", "int"),
            ("preferred_ip", "inet"),
            ("preferred_port", "int"),
            ("rack", "text"),
            ("release_version", "text"),
            ("schema_version", "uuid"),
            ("tokens", "set<text>"),
        ],
    ),
    // Cassandra's built secondary indexes: `table_name` holds the keyspace name (its schema
    // says so too); `value` is unused. Our indexes are built by CREATE INDEX before it answers,
    // so every index in the schema is listed.
    spec(
        "IndexInfo",
        &["table_name"],
        &["index_name"],
        &[
            ("table_name", "text"),
            ("index_name", "text"),
            ("value", "blob"),
        ],
    ),
    spec(
        "size_estimates",
        &["keyspace_name"],
        &["table_name", "range_start", "range_end"],
        &[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("range_start", "text"),
            ("range_end", "text"),
            ("mean_partition_size", "bigint"),
            ("partitions_count", "bigint"),
        ],
    ),
];

const SYSTEM_SCHEMA: &[Spec] = &[
    spec(
        "keyspaces",
        &["keyspace_name"],
        &[],
        &[
            ("keyspace_name", "text"),
            ("durable_writes", "boolean"),
            ("replication", "frozen<map<text, text>>"),
        ],
    ),
    spec(
        "tables",
        &["keyspace_name"],
        &["table_name"],
        &[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("additional_write_policy", "text"),
            ("allow_auto_snapshot", "boolean"),
            ("bloom_filter_fp_chance", "double"),
            ("caching", "frozen<map<text, text>>"),
            ("cdc", "boolean"),
            ("comment", "text"),
            ("compaction", "frozen<map<text, text>>"),
            ("compression", "frozen<map<text, text>>"),
            ("cosmosdb_autoscale_max_throughput", "int"),
            ("cosmosdb_cell_level_timestamp", "boolean"),
            ("cosmosdb_cell_level_timestamp_tombstones", "boolean"),
            ("cosmosdb_cell_level_timetolive", "boolean"),
            ("cosmosdb_provisioned_throughput", "int"),
            ("crc_check_chance", "double"),
            ("default_time_to_live", "int"),
            ("extensions", "frozen<map<text, blob>>"),
            ("flags", "frozen<set<text>>"),
            ("gc_grace_seconds", "int"),
            ("id", "uuid"),
            ("incremental_backups", "boolean"),
            ("max_index_interval", "int"),
            ("memtable", "text"),
            ("memtable_flush_period_in_ms", "int"),
            ("min_index_interval", "int"),
            ("partition_key_kind", "text"),
            ("read_repair", "text"),
            ("speculative_retry", "text"),
        ],
    ),
    spec(
        "columns",
        &["keyspace_name"],
        &["table_name", "column_name"],
        &[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("column_name", "text"),
            ("clustering_order", "text"),
            ("column_name_bytes", "blob"),
            ("kind", "text"),
            ("position", "int"),
            ("type", "text"),
        ],
    ),
    spec(
        "types",
        &["keyspace_name"],
        &["type_name"],
        &[
            ("keyspace_name", "text"),
            ("type_name", "text"),
            ("field_names", "frozen<list<text>>"),
            ("field_types", "frozen<list<text>>"),
        ],
    ),
    spec(
        "functions",
        &["keyspace_name"],
        &["function_name", "argument_types"],
        &[
            ("keyspace_name", "text"),
            ("function_name", "text"),
            ("argument_types", "frozen<list<text>>"),
            ("argument_names", "frozen<list<text>>"),
            ("body", "text"),
            ("called_on_null_input", "boolean"),
            ("language", "text"),
            ("return_type", "text"),
        ],
    ),
    spec(
        "aggregates",
        &["keyspace_name"],
        &["aggregate_name", "argument_types"],
        &[
            ("keyspace_name", "text"),
            ("aggregate_name", "text"),
            ("argument_types", "frozen<list<text>>"),
            ("final_func", "text"),
            ("initcond", "text"),
            ("return_type", "text"),
            ("state_func", "text"),
            ("state_type", "text"),
        ],
    ),
    spec(
        "triggers",
        &["keyspace_name"],
        &["table_name", "trigger_name"],
        &[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("trigger_name", "text"),
            ("options", "frozen<map<text, text>>"),
        ],
    ),
    spec(
        "indexes",
        &["keyspace_name"],
        &["table_name", "index_name"],
        &[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("index_name", "text"),
            ("kind", "text"),
            ("options", "frozen<map<text, text>>"),
        ],
    ),
    spec(
        "views",
        &["keyspace_name"],
        &["view_name"],
        &[
            ("keyspace_name", "text"),
            ("view_name", "text"),
            ("base_table_id", "uuid"),
            ("base_table_name", "text"),
            ("bloom_filter_fp_chance", "double"),
            ("caching", "frozen<map<text, text>>"),
            ("comment", "text"),
            ("compaction", "frozen<map<text, text>>"),
            ("compression", "frozen<map<text, text>>"),
            ("crc_check_chance", "double"),
            ("default_time_to_live", "int"),
            ("extensions", "frozen<map<text, blob>>"),
            ("gc_grace_seconds", "int"),
            ("id", "uuid"),
            ("include_all_columns", "boolean"),
            ("max_index_interval", "int"),
            ("memtable_flush_period_in_ms", "int"),
            ("min_index_interval", "int"),
            ("read_repair", "text"),
            ("speculative_retry", "text"),
            ("where_clause", "text"),
        ],
    ),
    spec(
        "dropped_columns",
        &["keyspace_name"],
        &["table_name", "column_name"],
        &[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("column_name", "text"),
            ("dropped_time", "timestamp"),
            ("kind", "text"),
            ("type", "text"),
        ],
    ),
];

const SYSTEM_VIRTUAL_SCHEMA: &[Spec] = &[
    spec(
        "keyspaces",
        &["keyspace_name"],
        &[],
        &[("keyspace_name", "text")],
    ),
    spec(
        "tables",
        &["keyspace_name"],
        &["table_name"],
        &[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("comment", "text"),
        ],
    ),
    spec(
        "columns",
        &["keyspace_name"],
        &["table_name", "column_name"],
        &[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("column_name", "text"),
            ("clustering_order", "text"),
            ("column_name_bytes", "blob"),
            ("kind", "text"),
            ("position", "int"),
            ("type", "text"),
        ],
    ),
];

const SYSTEM_TRACES: &[Spec] = &[
    spec(
        "sessions",
        &["session_id"],
        &[],
        &[
            ("session_id", "uuid"),
            ("client", "inet"),
            ("command", "text"),
            ("coordinator", "inet"),
            ("coordinator_port", "int"),
            ("duration", "int"),
            ("parameters", "map<text, text>"),
            ("request", "text"),
            ("started_at", "timestamp"),
        ],
    ),
    spec(
        "events",
        &["session_id"],
        &["event_id"],
        &[
            ("session_id", "uuid"),
            ("event_id", "timeuuid"),
            ("activity", "text"),
            ("source", "inet"),
            ("source_elapsed", "int"),
            ("source_port", "int"),
            ("thread", "text"),
        ],
    ),
];

const SYSTEM_AUTH: &[Spec] = &[spec(
    "roles",
    &["role"],
    &[],
    &[
        ("role", "text"),
        ("can_login", "boolean"),
        ("is_superuser", "boolean"),
        ("member_of", "set<text>"),
        ("salted_hash", "text"),
    ],
)];

/// The maintenance commands run by writing to `system_views.maintenance` (`query/maintenance.rs`):
/// name, the columns it takes, what it does. Reading the table lists them.
pub const MAINTENANCE_COMMANDS: &[(&str, &str, &str)] = &[
    ("flush", "", "makes everything committed durable on disk"),
    ("compact", "", "compacts table data now (drops expired and deleted data past gc_grace_seconds)"),
    (
        "garbage-collect",
        "keyspace_name, table_name",
        "removes the table's tombstones and the rows they shadow now (the tombstone sweeper)",
    ),
    (
        "backup",
        "target",
        "writes a consistent backup of every table (one point in time) to the directory target, new or empty, on the server's machine",
    ),
];

/// Rows come from `partition::views` (`maintenance`: `MAINTENANCE_COMMANDS`).
const SYSTEM_VIEWS: &[Spec] = &[
    spec(
        "maintenance",
        &["command"],
        &[],
        &[
            ("command", "text"),
            ("arguments", "text"),
            ("description", "text"),
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("target", "text"),
        ],
    ),
    // Storage groups (cluster mode, `query/storage_groups.rs`): reading lists them, an INSERT
    // of name, hosts, dbname, user_name (and password, never shown) registers one.
    spec(
        "storage_groups",
        &["name"],
        &[],
        &[
            ("name", "text"),
            ("hosts", "text"),
            ("dbname", "text"),
            ("user_name", "text"),
            ("password", "text"),
            ("physical_partitions", "bigint"),
            ("bytes", "bigint"),
        ],
    ),
    // Partition moves between storage groups (cluster mode, `query/partition_moves.rs`):
    // an INSERT of keyspace_name, table_name, partition_id, to_group requests one; reading
    // lists pending requests and the last outcome per partition.
    spec(
        "partition_moves",
        &["keyspace_name"],
        &["table_name", "partition_id"],
        &[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("partition_id", "bigint"),
            ("to_group", "text"),
            ("from_group", "text"),
            ("state", "text"),
            ("detail", "text"),
        ],
    ),
    spec(
        "physical_partitions",
        &["keyspace_name"],
        &["table_name", "partition_id"],
        &[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("partition_id", "bigint"),
            ("owner", "text"),
            ("storage_group", "text"),
            ("token_start", "bigint"),
            ("token_end", "bigint"),
            ("bytes", "bigint"),
            ("logical_partitions", "bigint"),
            ("provisioned_ru", "double"),
            ("consumed_ru", "double"),
            ("normalized_ru_consumption", "double"),
            ("throttled_requests", "bigint"),
            ("would_throttle", "bigint"),
        ],
    ),
    spec(
        "throughput",
        &["keyspace_name"],
        &["table_name"],
        &[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("provisioned_ru", "bigint"),
            ("autoscale_max_ru", "bigint"),
            ("current_ru", "bigint"),
            ("consumed_ru", "double"),
            ("source", "text"),
            ("enforced", "boolean"),
            ("normalized_ru_consumption", "double"),
            ("physical_partitions", "int"),
            ("throttled_requests", "bigint"),
            ("would_throttle", "bigint"),
        ],
    ),
    spec(
        "hot_partitions",
        &["keyspace_name"],
        &["table_name", "rank"],
        &[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("rank", "int"),
            ("partition_key", "text"),
            ("token", "bigint"),
            ("partition_id", "bigint"),
            ("consumed_ru", "double"),
        ],
    ),
    spec(
        "logical_partitions",
        &["keyspace_name"],
        &["table_name", "rank"],
        &[
            ("keyspace_name", "text"),
            ("table_name", "text"),
            ("rank", "int"),
            ("partition_key", "text"),
            ("token", "bigint"),
            ("bytes", "bigint"),
            ("partition_id", "bigint"),
        ],
    ),
];

fn build_table(keyspace: &str, s: &Spec) -> TableDef {
    let columns = s
        .cols
        .iter()
        .enumerate()
        .map(|(i, (name, ty))| {
            let (kind, position) = if let Some(p) = s.pk.iter().position(|k| k == name) {
                (ColumnKind::PartitionKey, p)
            } else if let Some(p) = s.ck.iter().position(|k| k == name) {
                (ColumnKind::Clustering, p)
            } else {
                (ColumnKind::Regular, 0)
            };
            ColumnDef {
                name: name.to_string(),
                ty: CqlType::parse(ty, &|_| None).expect("system column types are valid"),
                kind,
                position,
                desc: false,
                id: i as u32,
            }
        })
        .collect::<Vec<_>>();
    let n = columns.len() as u32;
    let mut t = super::ddl::assemble_table(
        keyspace.to_string(),
        s.name.to_string(),
        // Stable ids derived from the names, so drivers see the same id across restarts.
        Uuid::new_v5(
            &Uuid::NAMESPACE_OID,
            format!("{keyspace}.{}", s.name).as_bytes(),
        ),
        0,
        columns,
        TableOptions::default(),
        n,
        Vec::new(),
    );
    t.virtual_table = true;
    t
}

fn build_keyspace(name: &str, specs: &[Spec], is_virtual: bool) -> KeyspaceDef {
    let mut replication = BTreeMap::new();
    replication.insert(
        "class".to_string(),
        "org.apache.cassandra.locator.LocalStrategy".to_string(),
    );
    KeyspaceDef {
        name: name.to_string(),
        replication,
        durable_writes: true,
        cosmosdb_provisioned_throughput: None,
        cosmosdb_autoscale_max_throughput: None,
        tables: specs
            .iter()
            .map(|s| (s.name.to_string(), Arc::new(build_table(name, s))))
            .collect(),
        types: BTreeMap::new(),
        system: true,
        is_virtual,
    }
}

/// The built-in keyspaces.
pub fn keyspaces() -> Vec<KeyspaceDef> {
    vec![
        build_keyspace("system", SYSTEM, false),
        build_keyspace("system_schema", SYSTEM_SCHEMA, false),
        build_keyspace("system_auth", SYSTEM_AUTH, false),
        build_keyspace("system_traces", SYSTEM_TRACES, false),
        build_keyspace("system_virtual_schema", SYSTEM_VIRTUAL_SCHEMA, true),
        build_keyspace("system_views", SYSTEM_VIEWS, true),
    ]
}

// ------------------------------------------------------------------ value encoding

/// One row of a virtual table: a cell per column of the table, in column order.
pub type VRow = Vec<Option<Bytes>>;

pub(super) fn text(s: &str) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(s.as_bytes()))
}
pub(super) fn int(v: i32) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(&v.to_be_bytes()))
}
fn bigint(v: i64) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(&v.to_be_bytes()))
}
fn boolean(v: bool) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(&[v as u8]))
}
fn double(v: f64) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(&v.to_be_bytes()))
}
pub(super) fn uuid(u: &Uuid) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(u.as_bytes()))
}
pub(super) fn inet(ip: IpAddr) -> Option<Bytes> {
    Some(match ip {
        IpAddr::V4(a) => Bytes::copy_from_slice(&a.octets()),
        IpAddr::V6(a) => Bytes::copy_from_slice(&a.octets()),
    })
}
fn put_elem(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as i32).to_be_bytes());
    out.extend_from_slice(b);
}
/// list<text> or set<text> (the caller sorts sets).
pub(super) fn text_list<S: AsRef<str>>(items: &[S]) -> Option<Bytes> {
    let mut out = Vec::new();
    out.extend_from_slice(&(items.len() as i32).to_be_bytes());
    for i in items {
        put_elem(&mut out, i.as_ref().as_bytes());
    }
    Some(Bytes::from(out))
}
fn text_map(m: &BTreeMap<String, String>) -> Option<Bytes> {
    let mut out = Vec::new();
    out.extend_from_slice(&(m.len() as i32).to_be_bytes());
    for (k, v) in m {
        put_elem(&mut out, k.as_bytes());
        put_elem(&mut out, v.as_bytes());
    }
    Some(Bytes::from(out))
}

/// Fills a row by column name; columns not named stay null.
pub(super) fn row(table: &TableDef, cells: &[(&str, Option<Bytes>)]) -> VRow {
    let mut r = vec![None; table.columns.len()];
    for (name, v) in cells {
        if let Some(i) = table.column_index(name) {
            r[i] = v.clone();
        }
    }
    r
}

/// The rows of a built-in table, or None if `table` is not one.
pub fn virtual_rows(schema: &Schema, node: &NodeInfo, table: &TableDef) -> Option<Vec<VRow>> {
    let t = table;
    let rows = match (t.keyspace.as_str(), t.name.as_str()) {
        ("system", "local") => local_rows(schema, node, t),
        ("system", "peers") => super::peers::peer_rows(node, t, false),
        ("system", "peers_v2") => super::peers::peer_rows(node, t, true),
        ("system", "size_estimates") => vec![],
        ("system", "IndexInfo") => index_info_rows(schema, t),
        ("system_schema", "keyspaces") => schema
            .keyspaces
            .values()
            .filter(|k| !k.is_virtual)
            .map(|k| {
                row(
                    t,
                    &[
                        ("keyspace_name", text(&k.name)),
                        ("durable_writes", boolean(k.durable_writes)),
                        ("replication", text_map(&k.replication)),
                    ],
                )
            })
            .collect(),
        ("system_schema", "tables") => schema
            .keyspaces
            .values()
            .filter(|k| !k.is_virtual)
            .flat_map(|k| k.tables.values())
            .map(|tb| table_row(t, tb))
            .collect(),
        ("system_schema", "columns") => schema
            .keyspaces
            .values()
            .filter(|k| !k.is_virtual)
            .flat_map(|k| k.tables.values())
            .flat_map(|tb| column_rows(t, tb))
            .collect(),
        ("system_virtual_schema", "columns") => schema
            .keyspaces
            .values()
            .filter(|k| k.is_virtual)
            .flat_map(|k| k.tables.values())
            .flat_map(|tb| column_rows(t, tb))
            .collect(),
        ("system_schema", "types") => type_rows(schema, t),
        ("system_schema", "indexes") => index_rows(schema, t),
        ("system_schema", "dropped_columns") => dropped_column_rows(schema, t),
        ("system_virtual_schema", "keyspaces") => schema
            .keyspaces
            .values()
            .filter(|k| k.is_virtual)
            .map(|k| row(t, &[("keyspace_name", text(&k.name))]))
            .collect(),
        ("system_virtual_schema", "tables") => virtual_table_rows(schema, t),
        ("system_views", "maintenance") => maintenance_rows(t),
        ("system" | "system_schema" | "system_auth" | "system_traces" | "system_views", _) => {
            vec![]
        }
        _ => return None,
    };
    Some(rows)
}

/// system.local: this node.
fn local_rows(schema: &Schema, node: &NodeInfo, t: &TableDef) -> Vec<VRow> {
    let tokens = super::peers::local_tokens(node);
    let rpc = super::peers::local_rpc_address(node);
    vec![row(
        t,
        &[
            ("key", text("local")),
            ("bootstrapped", text("COMPLETED")),
            ("broadcast_address", inet(node.listen.ip())),
            ("broadcast_port", int(7000)),
            ("cluster_name", text(&node.cluster_name)),
            ("cql_version", text(CQL_VERSION)),
            ("data_center", text(&node.data_center)),
            ("gossip_generation", int(1)),
            ("host_id", uuid(&node.host_id)),
            ("listen_address", inet(node.listen.ip())),
            ("listen_port", int(7000)),
            (
                "native_protocol_version",
                text(&node.native_protocol_version),
            ),
            ("partitioner", text(PARTITIONER)),
            ("rack", text(&node.rack)),
            ("release_version", text(RELEASE_VERSION)),
            ("rpc_address", inet(rpc.ip())),
            ("rpc_port", int(rpc.port() as i32)),
            ("schema_version", uuid(&schema.version)),
            ("tokens", text_list(&tokens)),
        ],
    )]
}

/// system.IndexInfo: one partition per keyspace, its index names.
fn index_info_rows(schema: &Schema, t: &TableDef) -> Vec<VRow> {
    schema
        .keyspaces
        .values()
        .flat_map(|k| {
            // One partition per keyspace, its rows in clustering (index name) order.
            let mut names: Vec<&str> = k
                .tables
                .values()
                .flat_map(|tb| tb.indexes.iter().map(|ix| ix.name.as_str()))
                .collect();
            names.sort_unstable();
            names
                .into_iter()
                .map(|name| {
                    row(
                        t,
                        &[("table_name", text(&k.name)), ("index_name", text(name))],
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// system_schema.types.
fn type_rows(schema: &Schema, t: &TableDef) -> Vec<VRow> {
    schema
        .keyspaces
        .values()
        .flat_map(|k| k.types.values())
        .map(|u| {
            let names: Vec<&str> = u.fields.iter().map(|(n, _)| n.as_str()).collect();
            let types: Vec<String> = u.fields.iter().map(|(_, t)| t.to_string()).collect();
            row(
                t,
                &[
                    ("keyspace_name", text(&u.keyspace)),
                    ("type_name", text(&u.name)),
                    ("field_names", text_list(&names)),
                    ("field_types", text_list(&types)),
                ],
            )
        })
        .collect()
}

/// system_schema.indexes.
fn index_rows(schema: &Schema, t: &TableDef) -> Vec<VRow> {
    schema
        .keyspaces
        .values()
        .flat_map(|k| k.tables.values())
        .flat_map(|tb| {
            tb.indexes.iter().map(move |ix| {
                let mut opts = BTreeMap::new();
                opts.insert("target".to_string(), ix.target());
                row(
                    t,
                    &[
                        ("keyspace_name", text(&tb.keyspace)),
                        ("table_name", text(&tb.name)),
                        ("index_name", text(&ix.name)),
                        ("kind", text("COMPOSITES")),
                        ("options", text_map(&opts)),
                    ],
                )
            })
        })
        .collect()
}

/// system_schema.dropped_columns.
fn dropped_column_rows(schema: &Schema, t: &TableDef) -> Vec<VRow> {
    schema
        .keyspaces
        .values()
        .flat_map(|k| k.tables.values())
        .flat_map(|tb| {
            tb.dropped.iter().map(move |(name, ty, when)| {
                row(
                    t,
                    &[
                        ("keyspace_name", text(&tb.keyspace)),
                        ("table_name", text(&tb.name)),
                        ("column_name", text(name)),
                        ("dropped_time", bigint(when / 1000)),
                        ("kind", text("regular")),
                        ("type", text(ty)),
                    ],
                )
            })
        })
        .collect()
}

/// system_virtual_schema.tables.
fn virtual_table_rows(schema: &Schema, t: &TableDef) -> Vec<VRow> {
    schema
        .keyspaces
        .values()
        .filter(|k| k.is_virtual)
        .flat_map(|k| k.tables.values())
        .map(|tb| {
            row(
                t,
                &[
                    ("keyspace_name", text(&tb.keyspace)),
                    ("table_name", text(&tb.name)),
                    ("comment", text(&tb.options.comment)),
                ],
            )
        })
        .collect()
}

/// system_views.maintenance: the commands `ringgate admin` sends.
fn maintenance_rows(t: &TableDef) -> Vec<VRow> {
    MAINTENANCE_COMMANDS
        .iter()
        .map(|(name, args, what)| {
            row(
                t,
                &[
                    ("command", text(name)),
                    ("arguments", text(args)),
                    ("description", text(what)),
                ],
            )
        })
        .collect()
}

fn table_row(t: &TableDef, tb: &TableDef) -> VRow {
    let o = &tb.options;
    let mut flags = vec!["compound"];
    if tb.is_counter_table() {
        flags.push("counter");
    }
    let mut ext = Vec::new();
    ext.extend_from_slice(&(o.extensions.len() as i32).to_be_bytes());
    for (k, v) in &o.extensions {
        put_elem(&mut ext, k.as_bytes());
        put_elem(&mut ext, v.as_bytes());
    }
    let mut r = row(
        t,
        &[
            ("keyspace_name", text(&tb.keyspace)),
            ("table_name", text(&tb.name)),
            ("additional_write_policy", text(&o.additional_write_policy)),
            ("allow_auto_snapshot", boolean(true)),
            ("bloom_filter_fp_chance", double(o.bloom_filter_fp_chance)),
            ("caching", text_map(&o.caching)),
            ("cdc", boolean(o.cdc)),
            ("comment", text(&o.comment)),
            ("compaction", text_map(&o.compaction)),
            ("compression", text_map(&o.compression)),
            (
                "cosmosdb_autoscale_max_throughput",
                o.cosmosdb_autoscale_max_throughput
                    .and_then(|v| int(v as i32)),
            ),
            (
                "cosmosdb_provisioned_throughput",
                o.cosmosdb_provisioned_throughput
                    .and_then(|v| int(v as i32)),
            ),
            ("crc_check_chance", double(o.crc_check_chance)),
            ("default_time_to_live", int(o.default_time_to_live)),
            ("extensions", Some(Bytes::from(ext))),
            ("flags", text_list(&flags)),
            ("gc_grace_seconds", int(o.gc_grace_seconds)),
            ("id", uuid(&tb.id)),
            ("incremental_backups", boolean(true)),
            ("max_index_interval", int(o.max_index_interval)),
            ("memtable", text(&o.memtable)),
            (
                "memtable_flush_period_in_ms",
                int(o.memtable_flush_period_in_ms),
            ),
            ("min_index_interval", int(o.min_index_interval)),
            (
                "partition_key_kind",
                text(match o.partition_key_kind {
                    super::PartitionKeyKind::Hash => "Hash",
                    super::PartitionKeyKind::MultiHash => "MultiHash",
                }),
            ),
            ("read_repair", text(&o.read_repair)),
            ("speculative_retry", text(&o.speculative_retry)),
        ],
    );
    // Cosmos DB's cell-level options: null when the table did not set them.
    for (name, value) in o.cell_level_options() {
        if let Some(i) = t.column_index(name) {
            r[i] = value.and_then(boolean);
        }
    }
    r
}

fn column_rows<'a>(t: &'a TableDef, tb: &'a TableDef) -> impl Iterator<Item = VRow> + 'a {
    tb.columns.iter().map(move |c| {
        let (order, position) = match c.kind {
            ColumnKind::Clustering => (if c.desc { "desc" } else { "asc" }, c.position as i32),
            ColumnKind::PartitionKey => ("none", c.position as i32),
            _ => ("none", -1),
        };
        row(
            t,
            &[
                ("keyspace_name", text(&tb.keyspace)),
                ("table_name", text(&tb.name)),
                ("column_name", text(&c.name)),
                ("clustering_order", text(order)),
                (
                    "column_name_bytes",
                    Some(Bytes::copy_from_slice(c.name.as_bytes())),
                ),
                ("kind", text(c.kind.as_str())),
                ("position", int(position)),
                ("type", text(&c.ty.to_string())),
            ],
        )
    })
}

/// This node's host id: created once and kept in the store's metadata.
pub fn host_id(store: &dyn crate::storage::Store) -> crate::storage::Result<Uuid> {
    host_id_at(store.metadata(), b"host_id")
}

/// The host id kept under `key` of `meta` (made and stored on first use): cluster nodes share
/// one metadata store, so each keeps its own under its name.
pub fn host_id_at(
    meta: &dyn crate::storage::MetaStore,
    key: &[u8],
) -> crate::storage::Result<Uuid> {
    if let Some(b) = meta.meta_get(key)? {
        if let Ok(u) = Uuid::from_slice(&b) {
            return Ok(u);
        }
    }
    let id = Uuid::new_v4();
    let key = bytes::Bytes::copy_from_slice(key);
    meta.meta_commit(vec![(key, Some(id.as_bytes().to_vec().into()))])?;
    Ok(id)
}

/// `n` tokens evenly spaced over the ring (what a single node with num_tokens = n owns).
pub fn node_tokens(n: usize) -> Vec<Token> {
    let n = n.max(1) as i128;
    (0..n)
        .map(|i| (i64::MIN as i128 + (u64::MAX as i128 + 1) * (i + 1) / n - 1) as i64)
        .collect()
}
