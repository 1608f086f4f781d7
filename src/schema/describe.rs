//! Server-side DESCRIBE (Cassandra 4.0+): the statements are answered with rows of
//! `keyspace_name, type, name[, create_statement]`, and the CQL they print recreates the object.

use super::system::{NodeInfo, VRow, PARTITIONER};
use super::{ColumnKind, IndexDef, KeyspaceDef, PartitionKeyKind, Schema, SchemaError, TableDef};
use crate::cql::ast::{Describe, DescribeTarget, QualifiedName};
use crate::cql::types::{quote_ident, CqlType, UdtDef};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt::Write;

/// A DESCRIBE answer: result columns and rows.
pub struct DescribeResult {
    pub columns: Vec<(String, CqlType)>,
    pub rows: Vec<VRow>,
}

fn quote_str(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn map_literal(m: &BTreeMap<String, String>, first: Option<&str>) -> String {
    let mut items: Vec<String> = Vec::with_capacity(m.len());
    if let Some(f) = first {
        if let Some(v) = m.get(f) {
            items.push(format!("{}: {}", quote_str(f), quote_str(v)));
        }
    }
    for (k, v) in m {
        if Some(k.as_str()) != first {
            items.push(format!("{}: {}", quote_str(k), quote_str(v)));
        }
    }
    format!("{{{}}}", items.join(", "))
}

fn qualified(ks: &str, name: &str) -> String {
    format!("{}.{}", quote_ident(ks), quote_ident(name))
}

pub fn create_keyspace_cql(ks: &KeyspaceDef) -> String {
    if ks.is_virtual {
        return format!(
            "/*\nWarning: Keyspace {} is a virtual keyspace and cannot be recreated with CQL.\nStructure, for reference:\nVIRTUAL KEYSPACE {};\n*/",
            quote_ident(&ks.name),
            quote_ident(&ks.name)
        );
    }
    let mut s = format!(
        "CREATE KEYSPACE {} WITH replication = {}  AND durable_writes = {}",
        quote_ident(&ks.name),
        map_literal(&ks.replication, Some("class")),
        ks.durable_writes
    );
    if let Some(t) = ks.cosmosdb_provisioned_throughput {
        let _ = write!(s, "  AND cosmosdb_provisioned_throughput = {t}");
    }
    if let Some(t) = ks.cosmosdb_autoscale_max_throughput {
        let _ = write!(s, "  AND cosmosdb_autoscale_max_throughput = {t}");
    }
    s.push(';');
    s
}

pub fn create_type_cql(u: &UdtDef) -> String {
    let fields: Vec<String> = u
        .fields
        .iter()
        .map(|(n, t)| format!("    {} {}", quote_ident(n), t))
        .collect();
    format!(
        "CREATE TYPE {} (\n{}\n);",
        qualified(&u.keyspace, &u.name),
        fields.join(",\n")
    )
}

pub fn create_table_cql(t: &TableDef, is_virtual: bool) -> String {
    let mut s = String::new();
    let single_pk = t.partition_key.len() == 1 && t.clustering.is_empty();
    let kw = if is_virtual {
        "VIRTUAL TABLE"
    } else {
        "CREATE TABLE"
    };
    let _ = writeln!(s, "{kw} {} (", qualified(&t.keyspace, &t.name));
    for c in &t.columns {
        let _ = write!(s, "    {} {}", quote_ident(&c.name), c.ty);
        if c.kind == ColumnKind::Static {
            s.push_str(" static");
        }
        if single_pk && c.kind == ColumnKind::PartitionKey {
            s.push_str(" PRIMARY KEY");
        }
        s.push_str(",\n");
    }
    if single_pk {
        // Drop the last ",\n" and close.
        s.truncate(s.len() - 2);
        s.push('\n');
    } else {
        let pk: Vec<String> = t.pk_columns().map(|c| quote_ident(&c.name)).collect();
        let pk = if pk.len() == 1 {
            pk[0].clone()
        } else {
            format!("({})", pk.join(", "))
        };
        let mut parts = vec![pk];
        parts.extend(t.clustering_columns().map(|c| quote_ident(&c.name)));
        let _ = writeln!(s, "    PRIMARY KEY ({})", parts.join(", "));
    }
    s.push(')');
    let mut opts: Vec<String> = Vec::new();
    if !t.clustering.is_empty() {
        let order: Vec<String> = t
            .clustering_columns()
            .map(|c| {
                format!(
                    "{} {}",
                    quote_ident(&c.name),
                    if c.desc { "DESC" } else { "ASC" }
                )
            })
            .collect();
        opts.push(format!("CLUSTERING ORDER BY ({})", order.join(", ")));
    }
    let o = &t.options;
    if is_virtual {
        opts.push(format!("comment = {}", quote_str(&o.comment)));
    } else {
        opts.push(format!(
            "additional_write_policy = {}",
            quote_str(&o.additional_write_policy)
        ));
        opts.push(format!(
            "bloom_filter_fp_chance = {:?}",
            o.bloom_filter_fp_chance
        ));
        opts.push(format!("caching = {}", map_literal(&o.caching, None)));
        opts.push(format!("cdc = {}", o.cdc));
        opts.push(format!("comment = {}", quote_str(&o.comment)));
        opts.push(format!(
            "compaction = {}",
            map_literal(&o.compaction, Some("class"))
        ));
        opts.push(format!(
            "compression = {}",
            map_literal(&o.compression, None)
        ));
        opts.push(format!("memtable = {}", quote_str(&o.memtable)));
        opts.push(format!("crc_check_chance = {:?}", o.crc_check_chance));
        opts.push(format!("default_time_to_live = {}", o.default_time_to_live));
        let ext: Vec<String> = o
            .extensions
            .iter()
            .map(|(k, v)| {
                format!(
                    "{}: 0x{}",
                    quote_str(k),
                    v.bytes().map(|b| format!("{b:02x}")).collect::<String>()
                )
            })
            .collect();
        opts.push(format!("extensions = {{{}}}", ext.join(", ")));
        opts.push(format!("gc_grace_seconds = {}", o.gc_grace_seconds));
        opts.push(format!("max_index_interval = {}", o.max_index_interval));
        opts.push(format!(
            "memtable_flush_period_in_ms = {}",
            o.memtable_flush_period_in_ms
        ));
        opts.push(format!("min_index_interval = {}", o.min_index_interval));
        opts.push(format!("read_repair = {}", quote_str(&o.read_repair)));
        opts.push(format!(
            "speculative_retry = {}",
            quote_str(&o.speculative_retry)
        ));
        if let Some(n) = o.cosmosdb_provisioned_throughput {
            opts.push(format!("cosmosdb_provisioned_throughput = {n}"));
        }
        if let Some(n) = o.cosmosdb_autoscale_max_throughput {
            opts.push(format!("cosmosdb_autoscale_max_throughput = {n}"));
        }
        for (name, value) in o.cell_level_options() {
            if let Some(b) = value {
                opts.push(format!("{name} = {b}"));
            }
        }
        if o.partition_key_kind == PartitionKeyKind::MultiHash {
            opts.push("partition_key_kind = 'MultiHash'".into());
        }
    }
    s.push_str(" WITH ");
    s.push_str(&opts.join("\n    AND "));
    s.push(';');
    if is_virtual {
        format!(
            "/*\nWarning: Table {} is a virtual table and cannot be recreated with CQL.\nStructure, for reference:\n{}\n*/",
            qualified(&t.keyspace, &t.name),
            s
        )
    } else {
        s
    }
}

fn text(s: &str) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(s.as_bytes()))
}

fn listing_columns() -> Vec<(String, CqlType)> {
    vec![
        ("keyspace_name".into(), CqlType::Text),
        ("type".into(), CqlType::Text),
        ("name".into(), CqlType::Text),
    ]
}

fn element_columns() -> Vec<(String, CqlType)> {
    let mut c = listing_columns();
    c.push(("create_statement".into(), CqlType::Text));
    c
}

fn element(ks: &str, kind: &str, name: &str, cql: String) -> VRow {
    vec![text(ks), text(kind), text(name), text(&cql)]
}

fn keyspace_elements(ks: &KeyspaceDef, only: bool, out: &mut Vec<VRow>) {
    out.push(element(
        &ks.name,
        "keyspace",
        &ks.name,
        create_keyspace_cql(ks),
    ));
    if only {
        return;
    }
    for u in ks.types.values() {
        out.push(element(&ks.name, "type", &u.name, create_type_cql(u)));
    }
    for t in ks.tables.values() {
        out.push(element(
            &ks.name,
            "table",
            &t.name,
            create_table_cql(t, ks.is_virtual),
        ));
        index_elements(t, out);
    }
}

pub fn create_index_cql(t: &TableDef, ix: &crate::schema::IndexDef) -> String {
    format!(
        "CREATE INDEX {} ON {} ({});",
        quote_ident(&ix.name),
        qualified(&t.keyspace, &t.name),
        ix.target()
    )
}

fn index_elements(t: &TableDef, out: &mut Vec<VRow>) {
    for ix in &t.indexes {
        out.push(element(
            &t.keyspace,
            "index",
            &ix.name,
            create_index_cql(t, ix),
        ));
    }
}

fn is_system_name(name: &str) -> bool {
    matches!(
        name,
        "system"
            | "system_schema"
            | "system_auth"
            | "system_traces"
            | "system_distributed"
            | "system_virtual_schema"
            | "system_views"
    )
}

/// Answers a DESCRIBE statement.
pub fn describe(
    schema: &Schema,
    current_keyspace: Option<&str>,
    stmt: &Describe,
    node: &NodeInfo,
) -> Result<DescribeResult, SchemaError> {
    let mut rows = Vec::new();
    let columns = match &stmt.target {
        DescribeTarget::Cluster => describe_cluster(node, current_keyspace, &mut rows),
        DescribeTarget::Keyspaces => {
            for k in schema.keyspaces.values() {
                rows.push(vec![text(&k.name), text("keyspace"), text(&k.name)]);
            }
            listing_columns()
        }
        DescribeTarget::Tables | DescribeTarget::Types => {
            list_tables_or_types(schema, current_keyspace, &stmt.target, &mut rows)
        }
        DescribeTarget::Functions | DescribeTarget::Aggregates => listing_columns(),
        DescribeTarget::Keyspace(name) => {
            let name = match name {
                Some(n) => n.clone(),
                None => current_keyspace.map(str::to_string).ok_or_else(|| {
                    SchemaError::Invalid("No keyspace specified and no current keyspace".into())
                })?,
            };
            keyspace_elements(keyspace_named(schema, &name)?, stmt.only, &mut rows);
            element_columns()
        }
        DescribeTarget::Table(q) => describe_table(schema, current_keyspace, q, &mut rows)?,
        DescribeTarget::Type(q) => {
            let k = element_keyspace(schema, q, current_keyspace)?;
            let u = k.types.get(&q.name).ok_or_else(|| {
                not_found(format!(
                    "User defined type '{}' not found in '{}'",
                    q.name, k.name
                ))
            })?;
            rows.push(element(&k.name, "type", &u.name, create_type_cql(u)));
            element_columns()
        }
        // None of these can exist here (`query/not_offered.rs`).
        DescribeTarget::Function(q) => {
            let k = element_keyspace(schema, q, current_keyspace)?;
            let (name, ks) = (&q.name, &k.name);
            return Err(not_found(format!(
                "User defined function '{name}' not found in '{ks}'"
            )));
        }
        DescribeTarget::Aggregate(q) => {
            let k = element_keyspace(schema, q, current_keyspace)?;
            let (name, ks) = (&q.name, &k.name);
            return Err(not_found(format!(
                "User defined aggregate '{name}' not found in '{ks}'"
            )));
        }
        DescribeTarget::Index(q) => describe_index(schema, current_keyspace, q, &mut rows)?,
        DescribeTarget::MaterializedView(q) => {
            let k = element_keyspace(schema, q, current_keyspace)?;
            let (name, ks) = (&q.name, &k.name);
            return Err(not_found(format!(
                "Materialized view '{name}' not found in '{ks}'"
            )));
        }
        DescribeTarget::Schema | DescribeTarget::FullSchema => {
            let full = stmt.target == DescribeTarget::FullSchema;
            for k in schema.keyspaces.values() {
                if full || !is_system_name(&k.name) {
                    keyspace_elements(k, false, &mut rows);
                }
            }
            element_columns()
        }
        DescribeTarget::Name(q) => {
            return describe_name(schema, current_keyspace, stmt.only, q);
        }
    };
    Ok(DescribeResult { columns, rows })
}

/// Why a DESCRIBE fails: its object does not exist.
fn not_found(what: String) -> SchemaError {
    SchemaError::Invalid(what)
}

/// The keyspace a DESCRIBE of one element looks in (given, or the current one), which must
/// exist: Cassandra checks it before it looks for the element.
fn element_keyspace<'s>(
    schema: &'s Schema,
    q: &QualifiedName,
    current_keyspace: Option<&str>,
) -> Result<&'s KeyspaceDef, SchemaError> {
    keyspace_named(schema, &keyspace_of(q, current_keyspace)?)
}

/// Keyspace `ks`, with Cassandra's DESCRIBE message when there is none.
fn keyspace_named<'s>(schema: &'s Schema, ks: &str) -> Result<&'s KeyspaceDef, SchemaError> {
    (schema.keyspace(ks).map(|k| &**k))
        .ok_or_else(|| not_found(format!("'{ks}' not found in keyspaces")))
}

/// The keyspace of a name: given, or the current one.
fn keyspace_of(q: &QualifiedName, current_keyspace: Option<&str>) -> Result<String, SchemaError> {
    q.keyspace
        .clone()
        .or_else(|| current_keyspace.map(str::to_string))
        .ok_or_else(|| {
            SchemaError::Invalid("No keyspace specified and no current keyspace".to_string())
        })
}

/// DESCRIBE CLUSTER: name, partitioner, snitch (and the ring's ownership within a keyspace).
fn describe_cluster(
    node: &NodeInfo,
    current_keyspace: Option<&str>,
    rows: &mut Vec<VRow>,
) -> Vec<(String, CqlType)> {
    let mut cols = vec![
        ("cluster".to_string(), CqlType::Text),
        ("partitioner".to_string(), CqlType::Text),
        ("snitch".to_string(), CqlType::Text),
    ];
    let mut r = vec![
        text(&node.cluster_name),
        text(PARTITIONER),
        text("org.apache.cassandra.locator.SimpleSnitch"),
    ];
    if current_keyspace.is_some() {
        cols.push((
            "range_ownership".to_string(),
            CqlType::Map(
                Box::new(CqlType::Text),
                Box::new(CqlType::Frozen(Box::new(CqlType::List(Box::new(
                    CqlType::Text,
                ))))),
            ),
        ));
        r.push(Some(range_ownership(node)));
    }
    rows.push(r);
    cols
}

/// DESCRIBE TABLES / TYPES: the names, of the current keyspace if there is one.
fn list_tables_or_types(
    schema: &Schema,
    current_keyspace: Option<&str>,
    target: &DescribeTarget,
    rows: &mut Vec<VRow>,
) -> Vec<(String, CqlType)> {
    let kind = if *target == DescribeTarget::Tables {
        "table"
    } else {
        "type"
    };
    for k in schema.keyspaces.values() {
        if current_keyspace.is_some_and(|c| c != k.name) {
            continue;
        }
        let names: Vec<&String> = if kind == "table" {
            k.tables.keys().collect()
        } else {
            k.types.keys().collect()
        };
        for n in names {
            rows.push(vec![text(&k.name), text(kind), text(n)]);
        }
    }
    listing_columns()
}

/// DESCRIBE TABLE: its CREATE TABLE and its indexes.
fn describe_table(
    schema: &Schema,
    current_keyspace: Option<&str>,
    q: &QualifiedName,
    rows: &mut Vec<VRow>,
) -> Result<Vec<(String, CqlType)>, SchemaError> {
    let k = element_keyspace(schema, q, current_keyspace)?;
    let t = k.tables.get(&q.name).ok_or_else(|| {
        let (name, ks) = (&q.name, &k.name);
        not_found(format!("Table '{name}' not found in keyspace '{ks}'"))
    })?;
    table_elements(k, t, rows);
    Ok(element_columns())
}

/// A table's element and its indexes' elements.
fn table_elements(k: &KeyspaceDef, t: &TableDef, rows: &mut Vec<VRow>) {
    let cql = create_table_cql(t, k.is_virtual);
    rows.push(element(&k.name, "table", &t.name, cql));
    index_elements(t, rows);
}

/// An index's element: Cassandra looks for the table holding it first, and names that in its
/// message when there is none.
fn describe_index(
    schema: &Schema,
    current_keyspace: Option<&str>,
    q: &QualifiedName,
    rows: &mut Vec<VRow>,
) -> Result<Vec<(String, CqlType)>, SchemaError> {
    let k = element_keyspace(schema, q, current_keyspace)?;
    let (t, ix) = find_index(k, &q.name).ok_or_else(|| {
        let (name, ks) = (&q.name, &k.name);
        not_found(format!(
            "Table for existing index '{name}' not found in '{ks}'"
        ))
    })?;
    rows.push(element(&k.name, "index", &ix.name, create_index_cql(t, ix)));
    Ok(element_columns())
}

fn find_index<'k>(k: &'k KeyspaceDef, name: &str) -> Option<(&'k TableDef, &'k IndexDef)> {
    (k.tables.values()).find_map(|t| t.indexes.iter().find(|i| i.name == name).map(|i| (&**t, i)))
}

/// DESCRIBE <name>, as Cassandra resolves it: a keyspace; else, in the given keyspace (or the
/// current one, or without one the keyspace of that name), a table, an index or (here too) a
/// user type.
fn describe_name(
    schema: &Schema,
    current_keyspace: Option<&str>,
    only: bool,
    q: &QualifiedName,
) -> Result<DescribeResult, SchemaError> {
    let mut rows = Vec::new();
    if q.keyspace.is_none() {
        if let Some(k) = schema.keyspace(&q.name) {
            keyspace_elements(k, only, &mut rows);
            return Ok(DescribeResult {
                columns: element_columns(),
                rows,
            });
        }
    }
    let ks = (q.keyspace.as_deref().or(current_keyspace)).unwrap_or(&q.name);
    let k = keyspace_named(schema, ks)?;
    if let Some(t) = k.tables.get(&q.name) {
        table_elements(k, t, &mut rows);
    } else if let Some((t, ix)) = find_index(k, &q.name) {
        rows.push(element(ks, "index", &ix.name, create_index_cql(t, ix)));
    } else if let Some(u) = k.types.get(&q.name) {
        rows.push(element(ks, "type", &u.name, create_type_cql(u)));
    } else {
        let name = &q.name;
        return Err(not_found(format!("'{name}' not found in keyspace '{ks}'")));
    }
    Ok(DescribeResult {
        columns: element_columns(),
        rows,
    })
}

/// map<text, frozen<list<text>>>: each token of this node -> [its address:port].
fn range_ownership(node: &NodeInfo) -> Bytes {
    let addr = format!("{}:{}", node.listen.ip(), 7000);
    let mut tokens: Vec<String> = node.tokens.iter().map(|t| t.to_string()).collect();
    tokens.sort();
    let mut out = Vec::new();
    out.extend_from_slice(&(tokens.len() as i32).to_be_bytes());
    for t in &tokens {
        out.extend_from_slice(&(t.len() as i32).to_be_bytes());
        out.extend_from_slice(t.as_bytes());
        let mut list = Vec::new();
        list.extend_from_slice(&1i32.to_be_bytes());
        list.extend_from_slice(&(addr.len() as i32).to_be_bytes());
        list.extend_from_slice(addr.as_bytes());
        out.extend_from_slice(&(list.len() as i32).to_be_bytes());
        out.extend_from_slice(&list);
    }
    Bytes::from(out)
}
