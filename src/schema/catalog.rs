//! The catalog: the current schema snapshot, its persistence and serialized DDL.
//!
//! Cluster mode (the metadata store is shared: etcd): DDL is a compare-and-swap on the
//! schema document's revision. It reads the stored document (adopting it first when another
//! node changed it), runs the change, and commits only if the document is still at that
//! revision; on `Conflict` it reads again and re-runs the change (so the DDL closure must be
//! re-runnable), at most [`MAX_DDL_ATTEMPTS`] times. Two nodes creating one table: the loser
//! re-runs on the winner's schema and answers AlreadyExists (nothing with IF NOT EXISTS).
//! [`Catalog::refresh`] (called by the node's follower, `query/follow.rs`) adopts a document
//! another node wrote: the `before_adopt` hook loads the new partition maps first (a table
//! is never visible without its map), then the schema becomes current and the changes
//! (diffed, `diff.rs`) go to [`Catalog::subscribe`]rs, which push SCHEMA_CHANGE events.

use super::{ColumnDef, ColumnKind, KeyspaceDef, Schema, SchemaError, TableOptions};
use crate::cql::types::{CqlType, UdtDef};
use crate::storage::{MetaStore, Space, StorageError, Store, WriteBatch};
use arc_swap::ArcSwap;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use uuid::Uuid;

/// Key of the schema document in the metadata space.
const SCHEMA_KEY: &[u8] = b"schema";
/// Storage ids below this are reserved.
const FIRST_STORAGE_ID: u64 = 16;
/// DDL attempts against concurrent changes from other nodes before giving up (each lost
/// attempt means another node's DDL committed, so this bounds only a storm of DDL).
pub const MAX_DDL_ATTEMPTS: usize = 32;
/// Schema changes queued for subscribers that lag (they miss older ones).
const CHANGES_QUEUED: usize = 1024;

/// Runs before a schema written by another node becomes current (loads its partition maps).
pub type BeforeAdopt = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

pub struct Catalog {
    current: ArcSwap<Schema>,
    /// Serializes DDL and adoption (schema changes are rare; reads never take it).
    ddl: Mutex<()>,
    store: Arc<dyn Store>,
    /// The metadata store's revision of the current document (0 for a store only this
    /// process writes).
    revision: AtomicI64,
    before_adopt: OnceLock<BeforeAdopt>,
    changes: tokio::sync::broadcast::Sender<super::ddl::SchemaChange>,
}

impl Catalog {
    /// Loads the persisted schema (or starts empty) and adds the built-in system keyspaces.
    pub fn open(store: Arc<dyn Store>) -> Result<Catalog, SchemaError> {
        let stored = store
            .metadata()
            .meta_get_versioned(SCHEMA_KEY)
            .map_err(server_error)?;
        let (schema, revision) = match stored {
            Some((doc, revision)) => (with_system(decode(&doc)?), revision),
            None => (with_system(empty()), 0),
        };
        warn_oversized_types(&schema);
        Ok(Catalog {
            current: ArcSwap::from_pointee(schema),
            ddl: Mutex::new(()),
            store,
            revision: AtomicI64::new(revision),
            before_adopt: OnceLock::new(),
            changes: tokio::sync::broadcast::channel(CHANGES_QUEUED).0,
        })
    }

    /// The current schema snapshot.
    pub fn schema(&self) -> Arc<Schema> {
        self.current.load_full()
    }

    /// Sets what runs before a schema another node wrote becomes current (once).
    pub fn set_before_adopt(&self, hook: BeforeAdopt) {
        let _ = self.before_adopt.set(hook);
    }

    /// Schema changes made by other nodes, as this node adopts them.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<super::ddl::SchemaChange> {
        self.changes.subscribe()
    }

    /// Applies a schema change: `f` edits a copy of the schema and returns its result; the new
    /// schema gets a new version, is persisted atomically, then becomes current. `extra` ops are
    /// committed in the same atomic batch (e.g. a new table's physical partition map). With a
    /// shared metadata store `f` may run more than once (see the module doc).
    pub fn update<T>(
        &self,
        mut f: impl FnMut(&mut Schema, &mut WriteBatch) -> Result<T, SchemaError>,
    ) -> Result<T, SchemaError> {
        let _guard = self.ddl.lock();
        let meta = self.store.metadata();
        for _ in 0..MAX_DDL_ATTEMPTS {
            let revision = self.adopt_stored(meta)?;
            let mut next = (*self.current.load_full()).clone();
            let mut batch = WriteBatch::default();
            let out = f(&mut next, &mut batch)?;
            next.version = Uuid::new_v4();
            batch.put(Space::Meta, SCHEMA_KEY, encode(&next)?);
            match crate::storage::commit_meta_if(meta, SCHEMA_KEY, revision, batch) {
                Ok(()) => {
                    self.current.store(Arc::new(next));
                    return Ok(out);
                }
                Err(StorageError::Conflict { .. }) => continue,
                Err(e) => return Err(server_error(e)),
            }
        }
        Err(SchemaError::Server(format!(
            "the schema changed concurrently {MAX_DDL_ATTEMPTS} times: try the statement again"
        )))
    }

    /// Adopts the stored schema if another node changed it; true if it did. Once it returns
    /// Ok, this node's schema includes every change committed before the call.
    pub fn refresh(&self) -> Result<bool, SchemaError> {
        let before = self.revision.load(Ordering::Acquire);
        if !self.behind()? {
            return Ok(false);
        }
        let _guard = self.ddl.lock();
        Ok(self.adopt_stored(self.store.metadata())? != before)
    }

    /// Whether the stored schema's revision moved past the one adopted here (a shared store
    /// only; the revision alone is read, not the document).
    pub fn behind(&self) -> Result<bool, SchemaError> {
        let meta = self.store.metadata();
        if !meta.is_shared() {
            return Ok(false);
        }
        let stored = meta.meta_revision(SCHEMA_KEY).map_err(server_error)?;
        Ok(stored != self.revision.load(Ordering::Acquire))
    }

    /// With a shared store: reads the stored document and, if it is not the one in memory,
    /// makes it current (maps first, then the schema, then the change events). Returns the
    /// revision the next commit must compare. The caller holds `ddl`.
    fn adopt_stored(&self, meta: &dyn MetaStore) -> Result<i64, SchemaError> {
        if !meta.is_shared() {
            return Ok(0);
        }
        let Some((doc, revision)) = meta.meta_get_versioned(SCHEMA_KEY).map_err(server_error)?
        else {
            return Ok(0);
        };
        if revision == self.revision.load(Ordering::Acquire) {
            return Ok(revision);
        }
        let next = with_system(decode(&doc)?);
        let old = self.current.load_full();
        if next.version != old.version {
            if let Some(hook) = self.before_adopt.get() {
                hook().map_err(SchemaError::Server)?;
            }
            let changes = super::diff::changes(&old, &next);
            self.current.store(Arc::new(next));
            for c in changes {
                let _ = self.changes.send(c);
            }
        }
        self.revision.store(revision, Ordering::Release);
        Ok(revision)
    }
}

fn server_error(e: StorageError) -> SchemaError {
    SchemaError::Server(e.to_string())
}

fn empty() -> Schema {
    Schema {
        keyspaces: BTreeMap::new(),
        version: Uuid::new_v4(),
        next_storage_id: FIRST_STORAGE_ID,
    }
}

/// Adds the built-in system keyspaces (never stored).
fn with_system(mut schema: Schema) -> Schema {
    for ks in super::system::keyspaces() {
        schema.keyspaces.insert(ks.name.clone(), Arc::new(ks));
    }
    schema
}

#[derive(Serialize, Deserialize)]
struct StoredSchema {
    version: Uuid,
    next_storage_id: u64,
    keyspaces: Vec<StoredKeyspace>,
}

#[derive(Serialize, Deserialize)]
struct StoredKeyspace {
    name: String,
    replication: BTreeMap<String, String>,
    durable_writes: bool,
    #[serde(default)]
    cosmosdb_provisioned_throughput: Option<i64>,
    #[serde(default)]
    cosmosdb_autoscale_max_throughput: Option<i64>,
    /// In creation order (a type may use earlier ones).
    types: Vec<StoredType>,
    tables: Vec<StoredTable>,
}

#[derive(Serialize, Deserialize)]
struct StoredType {
    name: String,
    fields: Vec<(String, String)>,
}

#[derive(Serialize, Deserialize)]
struct StoredColumn {
    name: String,
    ty: String,
    kind: ColumnKind,
    position: usize,
    desc: bool,
    id: u32,
}

#[derive(Serialize, Deserialize)]
struct StoredTable {
    name: String,
    id: Uuid,
    storage_id: u64,
    columns: Vec<StoredColumn>,
    options: TableOptions,
    next_column_id: u32,
    #[serde(default)]
    dropped: Vec<(String, String, i64)>,
    #[serde(default)]
    indexes: Vec<super::IndexDef>,
}

fn encode(schema: &Schema) -> Result<Vec<u8>, SchemaError> {
    let stored = StoredSchema {
        version: schema.version,
        next_storage_id: schema.next_storage_id,
        keyspaces: schema
            .keyspaces
            .values()
            .filter(|k| !k.system)
            .map(|k| StoredKeyspace {
                name: k.name.clone(),
                replication: k.replication.clone(),
                durable_writes: k.durable_writes,
                cosmosdb_provisioned_throughput: k.cosmosdb_provisioned_throughput,
                cosmosdb_autoscale_max_throughput: k.cosmosdb_autoscale_max_throughput,
                types: types_in_dependency_order(&k.types)
                    .iter()
                    .map(|t| stored_type(t))
                    .collect(),
                tables: k.tables.values().map(|t| stored_table(t)).collect(),
            })
            .collect(),
    };
    serde_json::to_vec(&stored).map_err(|e| SchemaError::Server(e.to_string()))
}

fn stored_type(t: &UdtDef) -> StoredType {
    StoredType {
        name: t.name.clone(),
        fields: t
            .fields
            .iter()
            .map(|(n, ty)| (n.clone(), type_string(ty)))
            .collect(),
    }
}

fn stored_table(t: &super::TableDef) -> StoredTable {
    StoredTable {
        name: t.name.clone(),
        id: t.id,
        storage_id: t.storage_id,
        columns: t
            .columns
            .iter()
            .map(|c| StoredColumn {
                name: c.name.clone(),
                ty: type_string(&c.ty),
                kind: c.kind,
                position: c.position,
                desc: c.desc,
                id: c.id,
            })
            .collect(),
        options: t.options.clone(),
        next_column_id: t.next_column_id,
        dropped: t.dropped.clone(),
        indexes: t.indexes.clone(),
    }
}

/// A table's stored form, for comparing two versions of it (`diff.rs`).
pub(super) fn table_fingerprint(t: &super::TableDef) -> Vec<u8> {
    serde_json::to_vec(&stored_table(t)).unwrap_or_default()
}

/// A user type's stored form, for comparing two versions of it.
pub(super) fn type_fingerprint(t: &UdtDef) -> Vec<u8> {
    serde_json::to_vec(&stored_type(t)).unwrap_or_default()
}

/// Type strings in the stored schema: user types are written by (quoted) name and resolved
/// against the keyspace's types on load.
/// Types stored before DDL bounded them (`cql::type_size`) still load (loading does not walk
/// them deeply), but are named in the log: DDL can no longer create them.
fn warn_oversized_types(schema: &Schema) {
    use crate::cql::type_size::check;
    for ks in schema.keyspaces.values() {
        for u in ks.types.values() {
            if let Err(why) = check(&CqlType::Udt(Arc::clone(u))) {
                tracing::warn!(keyspace = %ks.name, r#type = %u.name, "stored user type beyond the limits: {why}");
            }
        }
        for t in ks.tables.values() {
            for c in t.columns.iter().filter(|c| check(&c.ty).is_err()) {
                tracing::warn!(keyspace = %ks.name, table = %t.name, column = %c.name, "stored column type beyond the limits");
            }
        }
    }
}

fn type_string(ty: &CqlType) -> String {
    ty.to_string()
}

/// Orders types so that each comes after the types it uses.
fn types_in_dependency_order(types: &BTreeMap<String, Arc<UdtDef>>) -> Vec<Arc<UdtDef>> {
    fn uses(ty: &CqlType, out: &mut Vec<String>) {
        match ty {
            CqlType::Udt(u) => out.push(u.name.clone()),
            CqlType::List(t) | CqlType::Set(t) | CqlType::Frozen(t) | CqlType::Vector(t, _) => {
                uses(t, out)
            }
            CqlType::Map(k, v) => {
                uses(k, out);
                uses(v, out);
            }
            CqlType::Tuple(items) => items.iter().for_each(|t| uses(t, out)),
            _ => {}
        }
    }
    let mut done: Vec<Arc<UdtDef>> = Vec::new();
    let mut pending: Vec<&Arc<UdtDef>> = types.values().collect();
    while !pending.is_empty() {
        let before = pending.len();
        pending.retain(|t| {
            let mut deps = Vec::new();
            t.fields.iter().for_each(|(_, ty)| uses(ty, &mut deps));
            if deps.iter().all(|d| done.iter().any(|x| &x.name == d)) {
                done.push(Arc::clone(t));
                false
            } else {
                true
            }
        });
        if pending.len() == before {
            // A cycle cannot be created through CQL; keep the rest in name order.
            done.extend(pending.drain(..).cloned());
        }
    }
    done
}

fn decode(doc: &[u8]) -> Result<Schema, SchemaError> {
    let stored: StoredSchema = serde_json::from_slice(doc)
        .map_err(|e| SchemaError::Server(format!("stored schema is unreadable: {e}")))?;
    let mut schema = Schema {
        keyspaces: BTreeMap::new(),
        version: stored.version,
        next_storage_id: stored.next_storage_id.max(FIRST_STORAGE_ID),
    };
    for sk in stored.keyspaces {
        let mut types: BTreeMap<String, Arc<UdtDef>> = BTreeMap::new();
        for st in sk.types {
            let mut fields = Vec::with_capacity(st.fields.len());
            for (n, t) in st.fields {
                fields.push((n, parse_stored_type(&t, &types)?));
            }
            types.insert(
                st.name.clone(),
                Arc::new(UdtDef {
                    keyspace: sk.name.clone(),
                    name: st.name,
                    fields,
                }),
            );
        }
        let mut tables = BTreeMap::new();
        for t in sk.tables {
            let mut columns = Vec::with_capacity(t.columns.len());
            for c in t.columns {
                columns.push(ColumnDef {
                    ty: parse_stored_type(&c.ty, &types)?,
                    name: c.name,
                    kind: c.kind,
                    position: c.position,
                    desc: c.desc,
                    id: c.id,
                });
            }
            let mut table = super::ddl::assemble_table(
                sk.name.clone(),
                t.name.clone(),
                t.id,
                t.storage_id,
                columns,
                t.options,
                t.next_column_id,
                t.dropped,
            );
            table.indexes = t.indexes;
            tables.insert(t.name, Arc::new(table));
        }
        schema.keyspaces.insert(
            sk.name.clone(),
            Arc::new(KeyspaceDef {
                name: sk.name,
                replication: sk.replication,
                durable_writes: sk.durable_writes,
                cosmosdb_provisioned_throughput: sk.cosmosdb_provisioned_throughput,
                cosmosdb_autoscale_max_throughput: sk.cosmosdb_autoscale_max_throughput,
                tables,
                types,
                system: false,
                is_virtual: false,
            }),
        );
    }
    Ok(schema)
}

fn parse_stored_type(
    s: &str,
    types: &BTreeMap<String, Arc<UdtDef>>,
) -> Result<CqlType, SchemaError> {
    CqlType::parse(s, &|name| types.get(name).cloned())
        .map_err(|e| SchemaError::Server(format!("stored schema has a bad type '{s}': {e}")))
}
