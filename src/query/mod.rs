//! Query planning and execution: binds values, routes every read and write to physical
//! partitions, executes, and pages results.

pub mod aggregate;
pub mod arith;
pub mod bind;
pub mod changefeed;
pub mod cluster_views;
pub mod clustering;
pub mod complex;
pub mod eval;
pub mod follow;
pub mod functions;
pub mod index;
pub mod index_cluster;
pub mod long;
pub mod lwt;
pub mod maintenance;
pub mod not_offered;
pub mod partition_moves;
pub mod purge;
pub mod purge_pass;
pub mod select;
mod select_rules;
pub mod storage_groups;
pub mod trace;
pub mod write;

/// The table format (`crate::format`) under the name the query layer has always used.
pub use crate::format as row;

use crate::cql::ast::{self, Statement};
use crate::cql::types::CqlType;
use crate::partition::map::PartitionMaps;
use crate::schema::ddl::SchemaChange;
use crate::schema::system::NodeInfo;
use crate::schema::{Catalog, Schema, TableDef};
use crate::storage::{Store, WriteBatch};
use bytes::{Bytes, BytesMut};
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::Arc;

/// The error a client sees (`crate::error`), under the name the query layer has always used.
pub use crate::error::ClientError as QueryError;
pub use crate::error::WriteType;

pub fn invalid(msg: impl Into<String>) -> QueryError {
    QueryError::Invalid(msg.into())
}

pub type Result<T> = std::result::Result<T, QueryError>;

/// A bound value from the client.
#[derive(Debug, Clone, PartialEq)]
pub enum BoundValue {
    Null,
    Unset,
    Value(Bytes),
}

/// The values of a request's bind markers.
#[derive(Debug, Clone, Default)]
pub enum Binds {
    #[default]
    None,
    Positional(Vec<BoundValue>),
    Named(Vec<(String, BoundValue)>),
}

/// What a request accumulates while it runs, besides its outcome: warnings for the client and
/// the request units it consumed. Reported on success and on error alike.
#[derive(Debug, Default)]
pub struct RequestCtx {
    warnings: Mutex<Vec<String>>,
    /// Request units consumed so far (f64 bits).
    charge: std::sync::atomic::AtomicU64,
    /// Set when the client asked for tracing.
    tracer: Option<Arc<trace::Tracer>>,
    /// When server-side retry first held this request (set by the connection on re-runs).
    held_since: Option<std::time::Instant>,
    /// Admitted over a budget that is not enforced: its consumption is not debited from it
    /// (`throttle::Admitted::OverUnenforced`).
    over_budget: std::sync::atomic::AtomicBool,
    /// When the statement began and the slow query threshold (`log.slow_query_ms`): a read
    /// that is already slow once it has read records its routing for the slow query log
    /// (`note_if_slow`), so other statements pay one clock read, not a routing description.
    slow_watch: Option<(std::time::Instant, std::time::Duration)>,
    slow_routing: Mutex<Option<String>>,
    /// Cluster mode: this request is one owner's part of a write spanning owners; it applies
    /// only these partitions' mutations (`write::only_partitions`).
    only_partitions: Option<Arc<write::OnlyPartitions>>,
}

impl Clone for RequestCtx {
    fn clone(&self) -> Self {
        let c = RequestCtx::default();
        *c.warnings.lock() = self.warnings.lock().clone();
        c.add_charge(self.charge());
        c.over_budget
            .store(self.over_budget(), std::sync::atomic::Ordering::Relaxed);
        RequestCtx {
            tracer: self.tracer.clone(),
            held_since: self.held_since,
            slow_watch: self.slow_watch,
            only_partitions: self.only_partitions.clone(),
            ..c
        }
    }
}

impl RequestCtx {
    /// Adds a warning for the client (sent with the response's WARNING flag).
    pub fn warn(&self, msg: impl Into<String>) {
        self.warnings.lock().push(msg.into());
    }
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock())
    }
    /// Adds request units to the charge of this request.
    pub fn add_charge(&self, ru: f64) {
        use std::sync::atomic::Ordering;
        let _ = self
            .charge
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| {
                Some((f64::from_bits(bits) + ru).to_bits())
            });
    }
    /// Watches for slowness: the statement began at `began`; slower than `threshold` is slow.
    pub fn watch_slow(&mut self, began: std::time::Instant, threshold: std::time::Duration) {
        self.slow_watch = Some((began, threshold));
    }
    /// Records the statement's routing when it is already slow (the text is only built then).
    pub fn note_if_slow(&self, routing: impl FnOnce() -> String) {
        if let Some((began, threshold)) = self.slow_watch {
            if began.elapsed() >= threshold {
                *self.slow_routing.lock() = Some(routing());
            }
        }
    }
    /// The routing `note_if_slow` recorded, if any.
    pub fn slow_routing(&self) -> Option<String> {
        self.slow_routing.lock().clone()
    }
    /// Starts tracing this request.
    pub fn start_trace(&mut self) -> Arc<trace::Tracer> {
        let t = Arc::new(trace::Tracer::new());
        self.tracer = Some(Arc::clone(&t));
        t
    }
    /// Records a trace event; the message is only built when the request is traced.
    pub fn trace(&self, activity: impl FnOnce() -> String) {
        if let Some(t) = &self.tracer {
            t.event(activity());
        }
    }
    pub fn is_traced(&self) -> bool {
        self.tracer.is_some()
    }
    /// Continues the trace of an earlier attempt of the same request (server-side retry).
    pub fn continue_trace(&mut self, tracer: Arc<trace::Tracer>) {
        self.tracer = Some(tracer);
    }
    /// Marks the request as held by server-side retry since `t`.
    pub fn set_held_since(&mut self, t: std::time::Instant) {
        self.held_since = Some(t);
    }
    pub fn held_since(&self) -> Option<std::time::Instant> {
        self.held_since
    }
    /// Records how the request was admitted on its throughput budgets.
    pub fn admitted(&self, how: crate::partition::throttle::Admitted) {
        if how == crate::partition::throttle::Admitted::OverUnenforced {
            self.over_budget
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    /// Whether the request's consumption is debited from its budgets (not when it ran over a
    /// budget that is not enforced, as Cosmos DB would have rejected it).
    pub fn debits_budget(&self) -> bool {
        !self.over_budget()
    }
    fn over_budget(&self) -> bool {
        self.over_budget.load(std::sync::atomic::Ordering::Relaxed)
    }
    /// Makes this request one owner's part of a spanning write (`write::only_partitions`).
    pub fn set_only_partitions(&mut self, only: write::OnlyPartitions) {
        self.only_partitions = Some(Arc::new(only));
    }
    pub fn only_partitions(&self) -> Option<&write::OnlyPartitions> {
        self.only_partitions.as_deref()
    }
    /// Request units consumed so far.
    pub fn charge(&self) -> f64 {
        f64::from_bits(self.charge.load(std::sync::atomic::Ordering::Acquire))
    }
}

/// Per-request options from the protocol.
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    /// Warnings and request charge gathered while the request runs.
    pub ctx: RequestCtx,
    pub binds: Binds,
    pub page_size: Option<i32>,
    pub paging_state: Option<Bytes>,
    /// The client's default timestamp (microseconds).
    pub timestamp: Option<i64>,
    pub serial: bool,
    pub keyspace: Option<String>,
    /// The type of a protocol BATCH.
    pub batch_kind: Option<ast::BatchKind>,
    /// Cluster mode: the other nodes' rows of the per-node virtual table this SELECT reads
    /// (`cluster_views.rs`), merged with this node's.
    pub peer_rows: Option<Arc<cluster_views::PeerRows>>,
}

/// Per-connection state.
#[derive(Debug, Default, Clone)]
pub struct Session {
    pub keyspace: Option<String>,
    /// Logged in as a user (`auth.enabled`); false is Cassandra's anonymous user.
    pub logged_in: bool,
    /// Last server-side write timestamp handed out (strictly increasing per connection, also
    /// across concurrent requests of the connection).
    pub clock: Arc<std::sync::atomic::AtomicI64>,
}

impl Session {
    /// A fresh timestamp in microseconds, strictly greater than the previous one.
    pub fn next_timestamp(&mut self, clock: &crate::clock::Clock) -> i64 {
        use std::sync::atomic::Ordering;
        let now = clock.now_micros();
        let prev = self
            .clock
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |last| {
                Some(now.max(last + 1))
            })
            .unwrap_or(now);
        now.max(prev + 1)
    }
}

/// One column of a result set.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultColumn {
    pub keyspace: String,
    pub table: String,
    pub name: String,
    pub ty: CqlType,
}

/// What a result's rows buffer starts with when its first cell arrives.
const FIRST_ROWS_BYTES: usize = 512;

/// Rows encoded as the protocol's cells ([int length][bytes], -1 for null), row after row.
#[derive(Debug)]
pub struct Rows {
    pub columns: Arc<Vec<ResultColumn>>,
    pub content: BytesMut,
    pub count: i32,
    pub paging_state: Option<Bytes>,
}

impl Rows {
    pub fn new(columns: Arc<Vec<ResultColumn>>) -> Rows {
        Rows {
            columns,
            content: BytesMut::new(),
            count: 0,
            paging_state: None,
        }
    }
    pub fn push_cell(&mut self, v: Option<&[u8]>) {
        if self.content.capacity() == 0 {
            // Room for a point read's row at once: growing from empty took two or three
            // reallocations (8, 16, 32, ... bytes) per prepared point read.
            self.content.reserve(FIRST_ROWS_BYTES);
        }
        match v {
            Some(b) => {
                self.content
                    .extend_from_slice(&(b.len() as i32).to_be_bytes());
                self.content.extend_from_slice(b);
            }
            None => self.content.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
}

/// The outcome of a statement.
#[derive(Debug)]
pub enum Outcome {
    Void,
    Rows(Rows),
    SetKeyspace(String),
    SchemaChange(SchemaChange),
}

/// One statement of a protocol BATCH.
pub struct BatchItem<'a> {
    pub parsed: &'a ast::Parsed,
    /// The keyspace the statement was prepared in, if any.
    pub keyspace: Option<String>,
    pub binds: Binds,
}

/// What PREPARE worked out for a statement that does not depend on its bound values, valid
/// for the schema version it was described under: an EXECUTE of a SELECT under that version
/// answers with these result columns instead of building them again. (The prepared statement
/// cache bounds these with its statements, in entries and bytes; a schema change makes them
/// stale, and PREPARE describes the statement again.)
#[derive(Clone, Copy)]
pub struct Described<'a> {
    pub schema_version: uuid::Uuid,
    pub result_columns: &'a Arc<Vec<ResultColumn>>,
    /// A SELECT's bind-independent plan, kept by its first EXECUTE under this version.
    pub shape: &'a select::ShapeCell,
}

/// A prepared statement.
#[derive(Debug)]
pub struct Prepared {
    pub id: Bytes,
    pub query: String,
    pub keyspace: Option<String>,
    pub parsed: ast::Parsed,
    /// (keyspace, table, name, type) of each bind marker.
    pub bind_columns: Vec<ResultColumn>,
    /// For each partition key column, the index of the marker that binds it.
    pub pk_indexes: Vec<u16>,
    /// Result columns (empty for statements without rows).
    pub result_columns: Arc<Vec<ResultColumn>>,
    /// The schema version the metadata above was described under.
    pub schema_version: uuid::Uuid,
    /// A SELECT's projection and GROUP BY, planned by its first EXECUTE under
    /// `schema_version` (`select/shape.rs`).
    pub select_shape: select::ShapeCell,
    /// `result_columns` as a response encodes them, per protocol version, made by the first
    /// EXECUTE that answers with them (`server/call.rs`).
    pub encoded_columns: crate::protocol::response::EncodedColumnsCache,
}

impl Prepared {
    /// Estimated memory: the text, its syntax tree (about as large again) and the metadata
    /// (a result column counted three times: its description, its kept projection and its
    /// encoded specs).
    fn cost_bytes(&self) -> usize {
        let columns = self.bind_columns.len() + 3 * self.result_columns.len();
        2 * self.query.len() + 128 * columns + 512
    }
}

const PREPARED_SHARDS: usize = 16;
const PREPARED_PER_SHARD: usize = 4096;
/// Estimated bytes of prepared statements one shard keeps (see `Prepared::cost_bytes`); a
/// statement larger than this is refused, like Cassandra's prepared statement cache does.
const PREPARED_SHARD_BYTES: usize = 8 << 20;

/// One shard of the prepared statement cache, with the estimated bytes it holds.
#[derive(Default)]
struct PreparedShard {
    map: HashMap<Bytes, Arc<Prepared>>,
    bytes: usize,
}

impl PreparedShard {
    /// Inserts `p`, first evicting arbitrary entries (clients re-prepare on UNPREPARED) until
    /// both the count and the byte budget have room.
    fn insert(&mut self, id: Bytes, p: Arc<Prepared>) {
        if let Some(old) = self.map.remove(&id) {
            self.bytes -= old.cost_bytes();
        }
        while !self.map.is_empty()
            && (self.map.len() >= PREPARED_PER_SHARD
                || self.bytes + p.cost_bytes() > PREPARED_SHARD_BYTES)
        {
            let k = self.map.keys().next().cloned().expect("non-empty");
            let gone = self.map.remove(&k).expect("present");
            self.bytes -= gone.cost_bytes();
        }
        self.bytes += p.cost_bytes();
        self.map.insert(id, p);
    }
}

/// Tunables of the query layer.
#[derive(Debug, Clone)]
pub struct EngineLimits {
    /// Largest value accepted in a cell.
    pub max_value_bytes: usize,
    /// Rows per page when the client sets no page size.
    pub default_page_rows: usize,
    /// Stop a page after this many bytes of rows.
    pub max_page_bytes: usize,
    /// Warn the client about batches (spanning partitions) above this many bytes.
    pub batch_warn_bytes: usize,
    /// Reject batches (spanning partitions) above this many bytes.
    pub batch_fail_bytes: usize,
    /// Physical partition split size, logical partition and row limits.
    pub partitions: crate::partition::sizes::PartitionLimits,
    /// Provisioned throughput and rate limiting.
    pub throughput: crate::partition::throttle::ThroughputLimits,
    /// Every user table records the change feed, not only those `WITH cdc = true`.
    pub changefeed_all_tables: bool,
    /// Physical partitions a new table starts with at least (`cluster.initial_partitions` in
    /// cluster mode).
    pub initial_partitions: u64,
}

impl Default for EngineLimits {
    fn default() -> Self {
        EngineLimits {
            max_value_bytes: 256 << 20,
            default_page_rows: 5000,
            max_page_bytes: 8 << 20,
            batch_warn_bytes: 5 << 10,
            batch_fail_bytes: 50 << 10,
            partitions: Default::default(),
            throughput: Default::default(),
            changefeed_all_tables: false,
            initial_partitions: 1,
        }
    }
}

const LOCK_STRIPES: usize = 4096;

/// The query engine shared by all connections.
pub struct Engine {
    pub catalog: Catalog,
    pub maps: Arc<PartitionMaps>,
    /// Queues storage-driven splits for the background splitter.
    pub splitter: crate::partition::split::Splitter,
    pub store: Arc<dyn Store>,
    /// This process's handles on the physical partitions it writes (`partition::handles`).
    pub handles: Arc<crate::partition::handles::Handles>,
    pub node: NodeInfo,
    pub limits: EngineLimits,
    /// Where the engine reads time (system, or manual in tests); `limits.throughput.clock`
    /// is the same clock.
    pub clock: crate::clock::Clock,
    /// Recently finished traced requests (system_traces).
    pub traces: trace::TraceStore,
    prepared: Vec<RwLock<PreparedShard>>,
    /// Counts the prepared statement cache's inserts (each may evict): a connection may keep
    /// the statements it looked up while this is unchanged (`prepared_generation`).
    prepared_inserts: std::sync::atomic::AtomicU64,
    /// Write serialization per logical partition (striped): read-merge-write is atomic.
    locks: Vec<Mutex<()>>,
    /// Test hook (`set_skip_write_locks_for_tests`).
    skip_write_locks: std::sync::atomic::AtomicBool,
    /// Partitions whose expired partition/range tombstones await the sweeper (purge.rs).
    pub(crate) sweep_queue: Arc<purge::SweepQueue>,
}

impl Engine {
    pub fn new(
        store: Arc<dyn Store>,
        node: NodeInfo,
        limits: EngineLimits,
    ) -> std::result::Result<Engine, String> {
        Engine::with_clock(store, node, limits, crate::clock::Clock::system())
    }

    /// An engine that reads time from `clock` (`server::startup` wires one from settings).
    pub fn with_clock(
        store: Arc<dyn Store>,
        node: NodeInfo,
        mut limits: EngineLimits,
        clock: crate::clock::Clock,
    ) -> std::result::Result<Engine, String> {
        limits.throughput.clock = clock.clone();
        let catalog = Catalog::open(Arc::clone(&store)).map_err(|e| e.to_string())?;
        let maps = Arc::new(PartitionMaps::open(Arc::clone(&store)).map_err(|e| e.to_string())?);
        maps.set_min_initial_partitions(limits.initial_partitions);
        use crate::partition::handles::Handles;
        let handles = Arc::new(match &node.cluster {
            Some(c) => Handles::cluster(Arc::clone(&store), Arc::clone(c)),
            None => Handles::start(Arc::clone(&store)).map_err(|e| e.to_string())?,
        });
        let splitter = crate::partition::split::Splitter::start(
            Arc::clone(&maps),
            Arc::clone(&handles),
            limits.partitions.physical_split_bytes,
        );
        let engine = Engine {
            catalog,
            maps,
            splitter,
            handles,
            store,
            node,
            limits,
            clock,
            traces: trace::TraceStore::default(),
            prepared: (0..PREPARED_SHARDS)
                .map(|_| RwLock::new(PreparedShard::default()))
                .collect(),
            prepared_inserts: Default::default(),
            locks: (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            skip_write_locks: Default::default(),
            sweep_queue: Arc::default(),
        };
        engine.ensure_maps().map_err(|e| e.to_string())?;
        // Logged writes a crash interrupted are finished before sizes are counted. A cluster
        // node writes no such entries (`batch_log::commit_parts`): its LOGGED batches are
        // logged and replayed as requests by `server::batchlog`.
        if engine.node.cluster.is_none() {
            let mut apply =
                |part| write::by_partition::replay_part(&engine.maps, &engine.handles, part);
            let replayed = crate::storage::batch_log::replay(&*engine.store, &mut apply)
                .map_err(|e| e.to_string())?;
            if replayed > 0 {
                tracing::info!("replayed {replayed} batch log entries");
            }
        }
        // A cluster node counts each partition when it takes it over (`partition::ownership`).
        if engine.node.cluster.is_none() {
            let splitter = engine.splitter.clone();
            crate::partition::sizes::rebuild(&engine.handles, &engine.maps, move |sid, p| {
                splitter.check(sid, p)
            })
            .map_err(|e| e.to_string())?;
        }
        if let Some(node) = &engine.node.cluster {
            crate::partition::ownership::start(node, &engine.maps, &engine.handles);
        }
        Ok(engine)
    }

    /// This process's handle on the physical partition of table `storage_id` that owns
    /// `token`: every table-data read goes through one (`partition::handles`).
    pub(crate) fn handle_at(
        &self,
        storage_id: u64,
        token: crate::tokens::Token,
    ) -> crate::storage::Result<Arc<dyn crate::storage::PartitionHandle>> {
        let map = self.maps.get(storage_id).ok_or_else(|| {
            crate::storage::StorageError::Corrupt(format!(
                "no partition map for table {storage_id}"
            ))
        })?;
        self.handles
            .read(storage_id, map.route(token))
            .map(Arc::clone)
    }

    /// Every user table has a partition map (repairs a crash between schema and map writes,
    /// which cannot happen as they commit together, and maps for tables of older versions).
    fn ensure_maps(&self) -> Result<()> {
        let schema = self.catalog.schema();
        for ks in schema.keyspaces.values().filter(|k| !k.system) {
            for t in ks.tables.values() {
                if self.maps.get(t.storage_id).is_none() {
                    let mut batch = WriteBatch::default();
                    // A table of an older version may hold size records.
                    let records = crate::partition::derived_sizes::SizeSource::Records;
                    let map = self.maps.initial_layout(
                        (t.storage_id, records),
                        write::table_throughput(&schema, t),
                        &mut batch,
                    );
                    crate::storage::commit_meta(self.store.metadata(), batch)?;
                    self.maps.install(t.storage_id, map);
                }
            }
        }
        Ok(())
    }

    pub fn schema(&self) -> Arc<Schema> {
        self.catalog.schema()
    }

    pub(crate) fn lock_stripe(&self, storage_id: u64, pk: &[u8]) -> usize {
        (crate::fast_hash::hash_of(&(storage_id, pk)) as usize) % LOCK_STRIPES
    }

    pub(crate) fn stripe(&self, i: usize) -> &Mutex<()> {
        &self.locks[i]
    }

    /// Locks write stripe `i`, unless the test hook below turned the stripes off.
    pub(crate) fn write_lock(&self, i: usize) -> Option<parking_lot::MutexGuard<'_, ()>> {
        if self
            .skip_write_locks
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return None;
        }
        Some(self.locks[i].lock())
    }

    /// Whether writers take this process's lock stripes (always, but for the test hook below).
    pub(crate) fn takes_write_locks(&self) -> bool {
        !self
            .skip_write_locks
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Test hook: writes and lightweight transactions stop taking this process's lock
    /// stripes, as writers in other processes over a shared backend would not share them;
    /// only the conditional commits then keep read-merge-write exact (`tests/engine_races.rs`).
    #[doc(hidden)]
    pub fn set_skip_write_locks_for_tests(&self, skip: bool) {
        self.skip_write_locks
            .store(skip, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a QUERY may run long (`long.rs`); only SELECT and CREATE texts are parsed for it.
    pub fn query_may_run_long(&self, text: &str, session: &Session) -> bool {
        let head = text.trim_start().get(..6).unwrap_or("");
        if !head.eq_ignore_ascii_case("select") && !head.eq_ignore_ascii_case("create") {
            return false;
        }
        crate::cql::parse(text)
            .is_ok_and(|p| long::may_run_long(&self.schema(), session.keyspace.as_deref(), &p))
    }

    /// Whether an EXECUTE of a prepared statement may run long (`long.rs`).
    pub fn prepared_may_run_long(&self, p: &Prepared, session: &Session) -> bool {
        let schema = self.schema();
        // A point read under the version it was described under: short, without looking its
        // table up again (about 320 instructions of a prepared point read, callgrind).
        if p.schema_version == schema.version
            && p.select_shape
                .get()
                .is_some_and(select::Shape::reads_one_partition)
            && !matches!(&p.parsed.statement, ast::Statement::Select(s) if s.allow_filtering)
        {
            return false;
        }
        let ks = p.keyspace.as_deref().or(session.keyspace.as_deref());
        long::may_run_long(&schema, ks, &p.parsed)
    }

    /// Parses and runs a QUERY.
    pub fn query(&self, session: &mut Session, text: &str, opts: &QueryOptions) -> Result<Outcome> {
        opts.ctx.trace(|| format!("Parsing {text}"));
        let parsed = crate::cql::parse(text).map_err(|e| QueryError::Syntax(e.to_string()))?;
        let ks = opts.keyspace.clone().or_else(|| session.keyspace.clone());
        self.run_statement(session, &parsed, ks.as_deref(), opts, None)
    }

    /// PREPARE: parses, types the bind markers, and caches the statement.
    pub fn prepare(
        &self,
        session: &Session,
        text: &str,
        keyspace: Option<&str>,
    ) -> Result<Arc<Prepared>> {
        let ks = keyspace
            .map(str::to_string)
            .or_else(|| session.keyspace.clone());
        let id = prepared_id(ks.as_deref(), text);
        let shard = &self.prepared[id[0] as usize % PREPARED_SHARDS];
        let schema = self.schema();
        if let Some(p) = shard.read().map.get(&id) {
            // Prepared under an older schema (ALTER TABLE/TYPE since): describe it again.
            if p.schema_version == schema.version {
                return Ok(Arc::clone(p));
            }
        }
        let parsed = crate::cql::parse(text).map_err(|e| QueryError::Syntax(e.to_string()))?;
        let info = bind::describe_statement(&schema, ks.as_deref(), &parsed)?;
        let prepared = Arc::new(Prepared {
            id: id.clone(),
            query: text.to_string(),
            keyspace: ks,
            parsed,
            bind_columns: info.bind_columns,
            pk_indexes: info.pk_indexes,
            result_columns: Arc::new(info.result_columns),
            schema_version: schema.version,
            select_shape: Default::default(),
            encoded_columns: Default::default(),
        });
        let size = prepared.cost_bytes();
        if size > PREPARED_SHARD_BYTES {
            return Err(QueryError::Invalid(format!(
                "Prepared statement of size {size} bytes is larger than allowed maximum of {} MiB: {}",
                PREPARED_SHARD_BYTES >> 20,
                crate::protocol::response::quote_capped(text)
            )));
        }
        shard.write().insert(id, Arc::clone(&prepared));
        // After the insert: a connection that still sees the old count looked up before it.
        self.prepared_inserts
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        Ok(prepared)
    }

    /// Changes whenever the prepared statement cache gains (and so may lose) a statement:
    /// while it is unchanged, every statement `get_prepared` gave is still the cache's.
    pub fn prepared_generation(&self) -> u64 {
        self.prepared_inserts
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// The prepared statement cache: (statements, estimated bytes), for the metrics.
    pub fn prepared_cache_figures(&self) -> (usize, usize) {
        self.prepared.iter().fold((0, 0), |(n, b), shard| {
            let s = shard.read();
            (n + s.map.len(), b + s.bytes)
        })
    }

    pub fn get_prepared(&self, id: &[u8]) -> Result<Arc<Prepared>> {
        let first = *id.first().unwrap_or(&0) as usize;
        self.prepared[first % PREPARED_SHARDS]
            .read()
            .map
            .get(id)
            .cloned()
            .ok_or_else(|| QueryError::Unprepared(Bytes::copy_from_slice(id)))
    }

    /// EXECUTE of a prepared statement.
    pub fn execute(
        &self,
        session: &mut Session,
        p: &Prepared,
        opts: &QueryOptions,
    ) -> Result<Outcome> {
        let ks = p.keyspace.clone().or_else(|| session.keyspace.clone());
        let described = Described {
            schema_version: p.schema_version,
            result_columns: &p.result_columns,
            shape: &p.select_shape,
        };
        self.run_statement(session, &p.parsed, ks.as_deref(), opts, Some(described))
    }

    /// A protocol BATCH: statements (parsed text or prepared) each with its own values.
    pub fn batch(
        &self,
        session: &mut Session,
        items: &[BatchItem],
        opts: &QueryOptions,
    ) -> Result<Outcome> {
        let ts = write::statement_timestamp(self, session, opts);
        let schema = self.schema();
        let mut binds = Vec::with_capacity(items.len());
        let mut keyspaces = Vec::with_capacity(items.len());
        for item in items {
            let ks = item
                .keyspace
                .clone()
                .or_else(|| opts.keyspace.clone())
                .or_else(|| session.keyspace.clone());
            binds.push(bind::BoundValues::new(
                &item.binds,
                item.parsed,
                &schema,
                ks.as_deref(),
            )?);
            keyspaces.push(ks);
        }
        let ctxs: Vec<eval::Ctx> = binds
            .iter()
            .map(|b| eval::Ctx {
                binds: b,
                max_value_bytes: self.limits.max_value_bytes,
                now_micros: self.clock.now_micros(),
            })
            .collect();
        let stmts: Vec<write::BatchStmt> = items
            .iter()
            .zip(&ctxs)
            .zip(&keyspaces)
            .map(|((item, ctx), ks)| write::BatchStmt {
                st: &item.parsed.statement,
                ctx,
                keyspace: ks.as_deref(),
            })
            .collect();
        let kind = opts.batch_kind.unwrap_or(ast::BatchKind::Logged);
        write::run_batch(self, &schema, kind, None, &stmts, ts, &opts.ctx)
    }

    /// Runs a statement; `described`: what PREPARE worked out for it, which holds for the
    /// schema version it names.
    fn run_statement(
        &self,
        session: &mut Session,
        parsed: &ast::Parsed,
        keyspace: Option<&str>,
        opts: &QueryOptions,
        described: Option<Described>,
    ) -> Result<Outcome> {
        let binds = bind::BoundValues::new(&opts.binds, parsed, &self.schema(), keyspace)?;
        // Writes to the acting system_views tables (maintenance, partition_moves,
        // storage_groups) evaluate their values in this context.
        let view_ctx = || eval::Ctx {
            binds: &binds,
            max_value_bytes: self.limits.max_value_bytes,
            now_micros: self.clock.now_micros(),
        };
        match &parsed.statement {
            Statement::Select(s) => {
                select::execute(self, keyspace, s, &binds, opts, described).map(Outcome::Rows)
            }
            st if maintenance::targets(st, keyspace).is_some() => {
                let ins = maintenance::targets(st, keyspace).expect("checked");
                maintenance::run(self, ins, &view_ctx())
            }
            st if partition_moves::targets(st, keyspace).is_some() => {
                let ins = partition_moves::targets(st, keyspace).expect("checked");
                partition_moves::run(self, ins, &view_ctx())
            }
            st if storage_groups::targets(st, keyspace).is_some() => {
                let ins = storage_groups::targets(st, keyspace).expect("checked");
                storage_groups::run(self, ins, &view_ctx())
            }
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => {
                let ts = write::statement_timestamp(self, session, opts);
                write::execute_single(self, keyspace, &parsed.statement, &binds, ts, &opts.ctx)
            }
            Statement::Batch(b) => {
                let ts = write::statement_timestamp(self, session, opts);
                write::execute_batch(self, keyspace, b, &binds, ts, &opts.ctx)
            }
            Statement::Use(name) => {
                opts.ctx.add_charge(crate::partition::ru::FIXED_RU);
                self.schema().require_keyspace(name)?;
                session.keyspace = Some(name.clone());
                Ok(Outcome::SetKeyspace(name.clone()))
            }
            Statement::Describe(d) => {
                opts.ctx.add_charge(crate::partition::ru::FIXED_RU);
                let schema = self.schema();
                let res = crate::schema::describe::describe(&schema, keyspace, d, &self.node)?;
                let cols: Vec<ResultColumn> = res
                    .columns
                    .into_iter()
                    .map(|(name, ty)| ResultColumn {
                        keyspace: String::new(),
                        table: String::new(),
                        name,
                        ty,
                    })
                    .collect();
                let mut rows = Rows::new(Arc::new(cols));
                for r in &res.rows {
                    for c in r {
                        rows.push_cell(c.as_deref());
                    }
                    rows.count += 1;
                }
                Ok(Outcome::Rows(rows))
            }
            Statement::NotOffered(n) => {
                opts.ctx.add_charge(crate::partition::ru::FIXED_RU);
                not_offered::execute(&self.schema(), session, keyspace, n)
            }
            other => {
                opts.ctx.add_charge(crate::partition::ru::FIXED_RU);
                write::execute_ddl(self, keyspace, other)
            }
        }
    }
}

/// Cassandra's prepared statement id: MD5 of the keyspace and the query text.
fn prepared_id(keyspace: Option<&str>, text: &str) -> Bytes {
    use md5::{Digest, Md5};
    let mut h = Md5::new();
    if let Some(k) = keyspace {
        h.update(k.as_bytes());
    }
    h.update(text.as_bytes());
    Bytes::copy_from_slice(&h.finalize())
}

/// The position of a table's column by name, with Cassandra's error for an unknown one.
pub fn require_column_index(table: &TableDef, name: &str) -> Result<usize> {
    table.column_index(name).ok_or_else(|| {
        invalid(format!(
            "Undefined column name {name} in table {}.{}",
            table.keyspace, table.name
        ))
    })
}

/// A table's column by name, with Cassandra's error for an unknown one.
pub fn require_column<'a>(table: &'a TableDef, name: &str) -> Result<&'a crate::schema::ColumnDef> {
    Ok(&table.columns[require_column_index(table, name)?])
}

/// Resolves a possibly-qualified table name against the current keyspace, for a statement
/// that reads or writes the table's rows (see `check_column_types`).
pub fn resolve_table<'a>(
    schema: &'a Schema,
    keyspace: Option<&str>,
    name: &ast::QualifiedName,
) -> Result<&'a Arc<TableDef>> {
    let t = resolve_table_any(schema, keyspace, name)?;
    check_column_types(t)?;
    Ok(t)
}

/// `resolve_table` for statements that never walk the column types (TRUNCATE).
pub fn resolve_table_any<'a>(
    schema: &'a Schema,
    keyspace: Option<&str>,
    name: &ast::QualifiedName,
) -> Result<&'a Arc<TableDef>> {
    let ks = name.keyspace.as_deref().or(keyspace).ok_or_else(|| {
        invalid("No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename")
    })?;
    schema.require_table(ks, &name.name)
}

/// Refuses a table with a column type beyond the limits of `cql::type_size`. DDL cannot create
/// one, but a schema stored by an older version can hold one; statements on its rows walk the
/// column types recursively (result and bind metadata, validation, comparison), so they are
/// refused with the reason instead of exhausting the stack or expanding a shared type graph.
/// The table can still be truncated, lose the column (ALTER TABLE DROP) or be dropped.
/// `type_size::check` is iterative and stops at the limits; scalar columns are skipped (the
/// common case costs a match per column).
fn check_column_types(t: &TableDef) -> Result<()> {
    use crate::cql::types::CqlType as T;
    let composite = |ty: &T| {
        matches!(
            ty.unfrozen(),
            T::List(_) | T::Set(_) | T::Map(..) | T::Tuple(_) | T::Udt(_) | T::Vector(..)
        )
    };
    for c in t.columns.iter().filter(|c| composite(&c.ty)) {
        crate::cql::type_size::check(&c.ty).map_err(|why| {
            invalid(format!(
                "Table {}.{} cannot be read or written: column {}: {why} (stored by an older version; \
                 drop the column or the table)",
                t.keyspace, t.name, c.name
            ))
        })?;
    }
    Ok(())
}

pub fn resolve_keyspace<'a>(
    keyspace: Option<&'a str>,
    q: &'a ast::QualifiedName,
) -> Result<&'a str> {
    q.keyspace.as_deref().or(keyspace).ok_or_else(|| {
        invalid("No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename")
    })
}

/// An engine over a new embedded store in `dir`, with default limits (unit tests).
#[cfg(test)]
pub(crate) fn test_engine(dir: &std::path::Path) -> Engine {
    use crate::schema::system::{host_id, node_tokens};
    use crate::storage::{EmbeddedStore, SyncMode};
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir, SyncMode::None).unwrap());
    let node = NodeInfo {
        listen: "127.0.0.1:9042".parse().unwrap(),
        host_id: host_id(&*store).unwrap(),
        cluster_name: "t".into(),
        data_center: "dc".into(),
        rack: "r".into(),
        tokens: node_tokens(1),
        native_protocol_version: "5".into(),
        cluster: None,
    };
    Engine::new(store, node, EngineLimits::default()).unwrap()
}

#[cfg(test)]
mod prepared_cache_tests {
    use super::*;

    fn prepared(id: u32, text_bytes: usize) -> Arc<Prepared> {
        Arc::new(Prepared {
            id: Bytes::copy_from_slice(&id.to_be_bytes()),
            query: "x".repeat(text_bytes),
            keyspace: None,
            parsed: crate::cql::parse("SELECT * FROM t").unwrap(),
            bind_columns: Vec::new(),
            pk_indexes: Vec::new(),
            result_columns: Arc::default(),
            schema_version: uuid::Uuid::nil(),
            select_shape: Default::default(),
            encoded_columns: Default::default(),
        })
    }

    #[test]
    fn a_shard_keeps_its_statements_within_its_byte_budget() {
        let mut shard = PreparedShard::default();
        for i in 0..100 {
            let p = prepared(i, 1 << 20);
            shard.insert(p.id.clone(), p);
            assert!(shard.bytes <= PREPARED_SHARD_BYTES, "{}", shard.bytes);
        }
        assert!((1..=4).contains(&shard.map.len()), "{}", shard.map.len());
        let total: usize = shard.map.values().map(|p| p.cost_bytes()).sum();
        assert_eq!(shard.bytes, total);
        // Re-preparing the same id replaces it without counting it twice.
        let again = prepared(99, 1 << 20);
        shard.insert(again.id.clone(), again);
        assert_eq!(
            shard.bytes,
            shard.map.values().map(|p| p.cost_bytes()).sum::<usize>()
        );
    }
}
