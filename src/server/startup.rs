//! The startup wiring from settings to a running engine, shared by `ringgate serve` and the
//! engine test tier (`tests/engine/`), so that tests run what the server runs: the store,
//! the catalog and partition maps (`Engine::with_clock` also starts the splitter and the
//! owner handles and replays the batch log), the purge filter and tombstone sweeper,
//! unfinished purges of dropped tables, and the limits taken from `Config`.
//!
//! Cluster mode (`cluster.etcd` set, issue 17): table data on PostgreSQL (required), metadata
//! on etcd (`cluster::ClusterStore`), and this node joined as a member (`cluster::ClusterNode`)
//! before the engine opens; its host id is kept in etcd under its node name.

use crate::clock::Clock;
use crate::cluster::{ClusterNode, ClusterStore, EtcdMetaStore, Member, NodeOptions};
use crate::config::{Backend, Config};
use crate::query::{Engine, EngineLimits};
use crate::schema::system::NodeInfo;
use crate::storage::postgres::{PgConfig, PostgresStore};
use crate::storage::{EmbeddedStore, Store};
use std::net::SocketAddr;
use std::sync::Arc;

/// A store and the engine over it.
pub struct Opened {
    pub store: Arc<dyn Store>,
    pub engine: Arc<Engine>,
}

/// Opens the store in `cfg.data_dir` and the engine over it. `listen` is the address clients
/// reach (system.local, system.peers); `clock` is where the engine reads time.
pub fn open(cfg: &Config, listen: SocketAddr, clock: Clock) -> Result<Opened, String> {
    // Process-wide, and before the engine counts partitions into their memos.
    let memo_bytes = usize::try_from(cfg.partitions.size_memo_bytes.0).unwrap_or(usize::MAX);
    crate::partition::size_memo::BUDGET.set_limit_bytes(memo_bytes);
    let (store, host_id, cluster) = match cfg.cluster.enabled() {
        false => {
            let store = open_store(cfg)?;
            let host_id = crate::schema::system::host_id(&*store).map_err(|e| e.to_string())?;
            (store, host_id, None)
        }
        true => open_cluster(cfg, listen)?,
    };
    let placer = cluster
        .as_ref()
        .map(|n| placer(n, &store, &cfg.storage.group));
    let node = NodeInfo {
        listen,
        host_id,
        cluster_name: cfg.cluster_name.clone(),
        data_center: cfg.data_center.clone(),
        rack: cfg.rack.clone(),
        tokens: crate::schema::system::node_tokens(16),
        native_protocol_version: "5".into(),
        cluster,
    };
    let limits = engine_limits(cfg, &clock);
    let engine = Arc::new(Engine::with_clock(Arc::clone(&store), node, limits, clock)?);
    if let Some(p) = placer {
        engine.maps.set_placer(p);
    }
    crate::query::purge::install(&engine);
    let purge_every = std::time::Duration::from_secs(cfg.storage.postgres.purge_every_secs);
    let purge_pace = cfg.storage.postgres.purge_bytes_per_second.0;
    crate::query::purge_pass::start(&engine, purge_every, purge_pace);
    crate::query::follow::install(&engine);
    crate::query::write::resume_drop_data(&engine).map_err(|e| e.to_string())?;
    Ok(Opened { store, engine })
}

/// The configured backend: the embedded store in the data directory, or PostgreSQL.
fn open_store(cfg: &Config) -> Result<Arc<dyn Store>, String> {
    Ok(match cfg.storage.backend {
        Backend::Embedded => Arc::new(
            EmbeddedStore::open_with_cache(
                &cfg.data_dir,
                cfg.storage.sync,
                cfg.storage.block_cache_bytes.0,
            )
            .map_err(|e| e.to_string())?
            .with_min_free_bytes(&cfg.data_dir, cfg.storage.min_free_bytes.0)
            .with_row_cache_bytes(cfg.storage.row_cache_bytes.0),
        ),
        Backend::Postgres => {
            let pg = &cfg.storage.postgres;
            let config = PgConfig {
                url: pg.connection_string(),
                pool_size: pg.pool_size,
            };
            tracing::info!("storage: PostgreSQL ({} connections at most)", pg.pool_size);
            Arc::new(PostgresStore::open(&config).map_err(|e| format!("storage.postgres: {e}"))?)
        }
    })
}

type ClusterParts = (Arc<dyn Store>, uuid::Uuid, Option<Arc<ClusterNode>>);

/// Cluster mode: the PostgreSQL data store and the etcd metadata store as one, this node's
/// host id (kept in etcd under `host_id/<node name>`), and the node joined as a member.
fn open_cluster(cfg: &Config, listen: SocketAddr) -> Result<ClusterParts, String> {
    if cfg.storage.backend != Backend::Postgres {
        return Err(
            "cluster mode (cluster.etcd) needs storage.backend = \"postgres\": the nodes \
                    share their data through it"
                .into(),
        );
    }
    let c = &cfg.cluster;
    let name = node_name(cfg)?;
    let root = format!("ringgate/{}/", cfg.cluster_name);
    let client = crate::etcd::EtcdClient::new(&c.etcd, crate::etcd::ClientOptions::default())
        .map_err(|e| format!("cluster.etcd: {e}"))?;
    let control = crate::cluster::Control::new(Arc::new(client), &root);
    let meta = Arc::new(EtcdMetaStore::new(&control).map_err(|e| e.to_string())?);
    let host_id = crate::schema::system::host_id_at(&*meta, format!("host_id/{name}").as_bytes())
        .map_err(|e| format!("cluster.etcd: {e}"))?;
    let advertise = match c.advertise.is_empty() {
        true => listen.to_string(),
        false => c.advertise.clone(),
    };
    let member = Member {
        name: name.clone(),
        host_id: host_id.to_string(),
        advertise,
        data_center: cfg.data_center.clone(),
        rack: cfg.rack.clone(),
        started_at_ms: crate::clock::Clock::system().now_millis() as u64,
    };
    crate::partition::handles::set_test_placement_owner(&name);
    let node = ClusterNode::join(NodeOptions {
        endpoints: c.etcd.clone(),
        root,
        member,
        lease_ms: c.lease_ms,
    })?;
    tracing::info!(
        "cluster mode: node {name}, {} live members",
        node.members().len()
    );
    let data = open_store(cfg)?;
    register_own_group(cfg, &meta)?;
    let group = &cfg.storage.group;
    let pool = cfg.storage.postgres.pool_size;
    let store: Arc<dyn Store> = Arc::new(ClusterStore::new(group, data, pool, meta));
    Ok((store, host_id, Some(node)))
}

/// Registers this node's `storage.postgres` server as storage group `storage.group` unless a
/// group of that name exists (the first node of a cluster registers the default group).
fn register_own_group(cfg: &Config, meta: &EtcdMetaStore) -> Result<(), String> {
    use crate::cluster::groups;
    let name = &cfg.storage.group;
    let spec = groups::GroupSpec::from_connection_string(&cfg.storage.postgres.connection_string())
        .map_err(|e| format!("storage.postgres: {e}"))?;
    if groups::register(meta, name, &spec).map_err(|e| format!("storage group {name}: {e}"))? {
        tracing::info!(group = %name, hosts = ?spec.hosts, "storage group registered");
    }
    Ok(())
}

/// Where new partitions go: the registered groups, least data first; this node's own group
/// when they cannot be read (a DDL then still succeeds, on a group that exists).
fn placer(
    node: &Arc<ClusterNode>,
    store: &Arc<dyn Store>,
    own: &str,
) -> crate::partition::map::Placer {
    let (node, store, own) = (Arc::clone(node), Arc::clone(store), own.to_string());
    Arc::new(
        move || match crate::cluster::groups::least_data_first(&node, store.metadata()) {
            Ok(order) if !order.is_empty() => order,
            Ok(_) => vec![own.clone()],
            Err(e) => {
                tracing::warn!(error = %e, "storage groups unreadable: new partitions go to this node's group");
                vec![own.clone()]
            }
        },
    )
}

/// `cluster.node_name`, or the host name when it is empty.
fn node_name(cfg: &Config) -> Result<String, String> {
    if !cfg.cluster.node_name.is_empty() {
        return Ok(cfg.cluster.node_name.clone());
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    match host.is_empty() {
        true => Err("cluster.node_name is empty and the host name cannot be read: set it".into()),
        false => Ok(host),
    }
}

/// The engine's limits from the settings.
fn engine_limits(cfg: &Config, clock: &Clock) -> EngineLimits {
    EngineLimits {
        max_value_bytes: cfg.limits.max_value_bytes.0 as usize,
        max_page_bytes: cfg.limits.max_page_bytes.0 as usize,
        batch_warn_bytes: cfg.batch.size_warn_threshold.0 as usize,
        batch_fail_bytes: cfg.batch.size_fail_threshold.0 as usize,
        partitions: crate::partition::sizes::PartitionLimits {
            physical_split_bytes: cfg.partitions.physical_split_bytes.0,
            logical_max_bytes: cfg.partitions.logical_max_bytes.0,
            row_max_bytes: cfg.partitions.row_max_bytes.0,
        },
        throughput: crate::partition::throttle::ThroughputLimits {
            default_table_ru: cfg.throughput.default_table_ru,
            burst: cfg.throughput.burst,
            server_side_retry: cfg.throughput.server_side_retry,
            server_side_retry_max: std::time::Duration::from_millis(
                cfg.throughput.server_side_retry_max_ms,
            ),
            enforce: cfg.throughput.enforce.0,
            clock: clock.clone(),
        },
        changefeed_all_tables: cfg.changefeed.all_tables,
        initial_partitions: match cfg.cluster.enabled() {
            true => cfg.cluster.initial_partitions,
            false => 1,
        },
        ..EngineLimits::default()
    }
}
