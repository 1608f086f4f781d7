//! A cluster node for these tests: an engine opened by `server::startup::open` in cluster mode.

use ringgate::clock::Clock;
use ringgate::config::Config;
use ringgate::partition::handles::Placement;
use ringgate::query::{Engine, Outcome, QueryError, QueryOptions, Session};
use ringgate::storage::handle::{PartitionCommit, PartitionHandle};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The lease of the test nodes (etcd's unit is a second; 3 s leaves renewals slack on a
/// loaded machine).
pub const LEASE_MS: u64 = 3000;

/// Generous bound for a state the nodes should reach within a few rounds (a loaded machine).
pub const SETTLE: Duration = Duration::from_secs(30);

/// The etcd and PostgreSQL a test's nodes share (None: a binary is missing; SKIPPED said).
pub struct Backing {
    pub etcd: crate::etcd::Etcd,
    pub pg_url: String,
    rt: tokio::runtime::Runtime,
}

impl Backing {
    pub fn start(test: &str) -> Option<Backing> {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let etcd = rt.block_on(crate::etcd::Etcd::start(test))?;
        let Some(server) = crate::pg::server() else {
            eprintln!("SKIPPED {test}: no PostgreSQL binaries");
            return None;
        };
        Some(Backing {
            etcd,
            pg_url: server.new_database(test),
            rt,
        })
    }

    /// The `--set` settings of cluster node `name` over this etcd and database.
    pub fn node_settings(&self, name: &str) -> Vec<String> {
        vec![
            "cluster_name=t".into(),
            "storage.backend=\"postgres\"".into(),
            format!("storage.postgres.url=\"{}\"", self.pg_url),
            "storage.postgres.pool_size=8".into(),
            format!("cluster.etcd=[\"{}\"]", self.etcd.endpoint()),
            format!("cluster.node_name=\"{name}\""),
            format!("cluster.lease_ms={LEASE_MS}"),
        ]
    }

    /// Runs an etcd call of the test (on the backing's own runtime).
    pub fn block_on<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.rt.block_on(f)
    }
}

pub struct Node {
    pub name: String,
    pub engine: Arc<Engine>,
    session: Session,
    _dir: tempfile::TempDir,
}

impl Node {
    /// Starts node `name` (joins the cluster; its ownership loop starts).
    pub fn start(b: &Backing, name: &str, port: u16) -> Node {
        Node::start_with(b, name, port, &[])
    }

    /// `start` with more `--set` settings.
    pub fn start_with(b: &Backing, name: &str, port: u16, extra: &[&str]) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let mut sets = b.node_settings(name);
        sets.push(format!("data_dir={}", dir.path().display()));
        sets.push("throughput.enforce=false".into());
        sets.extend(extra.iter().map(|s| s.to_string()));
        let cfg = Config::load(None, &sets).unwrap();
        let listen = format!("127.0.0.1:{port}").parse().unwrap();
        let opened = ringgate::server::startup::open(&cfg, listen, Clock::system()).unwrap();
        Node {
            name: name.into(),
            engine: opened.engine,
            session: Session::default(),
            _dir: dir,
        }
    }

    /// The first node, which creates table ks.t (k int PRIMARY KEY, v int) before the others
    /// start (they load the schema at startup; 17a shares later DDL); the table's storage id.
    pub fn first(b: &Backing, name: &str, port: u16) -> (Node, u64) {
        let mut n = Node::start(b, name, port);
        n.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
        n.ok("CREATE TABLE ks.t (k int PRIMARY KEY, v int)");
        let sid = n.storage_id("ks", "t");
        (n, sid)
    }

    pub fn run(&mut self, q: &str) -> Result<Outcome, QueryError> {
        self.engine
            .query(&mut self.session, q, &QueryOptions::default())
    }

    pub fn ok(&mut self, q: &str) -> Outcome {
        self.run(q)
            .unwrap_or_else(|e| panic!("{}: {q}: {e}", self.name))
    }

    /// `ok`, retried every 10 ms while the statement's partition has no owner (a split's
    /// children before they are taken; server/ forwarding retries the same way).
    pub fn ok_when_owned(&mut self, q: &str) -> Outcome {
        let deadline = Instant::now() + SETTLE;
        loop {
            match self.run(q) {
                Err(QueryError::NotOwner { owner: None, .. }) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                other => return other.unwrap_or_else(|e| panic!("{}: {q}: {e}", self.name)),
            }
        }
    }

    /// Rows a SELECT returns.
    pub fn count(&mut self, q: &str) -> i32 {
        match self.ok(q) {
            Outcome::Rows(r) => r.count,
            _ => panic!("{q}: expected rows"),
        }
    }

    /// The single int cell of a one-row, one-column SELECT (None: no row or null).
    pub fn int(&mut self, q: &str) -> Option<i32> {
        let Outcome::Rows(rows) = self.ok(q) else {
            panic!("{q}: expected rows");
        };
        let cells = crate::shared::cells::cells(&rows.content);
        let cell = cells.into_iter().next()??;
        Some(i32::from_be_bytes(cell[..].try_into().unwrap()))
    }

    /// Stops renewing the node's lease while the node runs on (a pause, as far as etcd knows).
    pub fn stop_renewing(&self) {
        self.engine
            .node
            .cluster
            .as_ref()
            .unwrap()
            .lease()
            .stop_keepalive();
    }

    pub fn storage_id(&self, ks: &str, table: &str) -> u64 {
        self.engine.schema().table(ks, table).unwrap().storage_id
    }

    /// Each partition's placement as this node sees it, in token order: (partition id, placement).
    pub fn placements(&self, sid: u64) -> Vec<(u64, Placement)> {
        let map = self.engine.maps.get(sid).unwrap();
        (map.parts.iter())
            .map(|p| (p.id, self.engine.handles.placement(sid, p)))
            .collect()
    }

    /// How many partitions this node sees served by node `owner` (forwarded there).
    pub fn served_by(&self, sid: u64, owner: &str) -> usize {
        (self.placements(sid).iter())
            .filter(|(_, pl)| matches!(pl, Placement::Remote(o) if o == owner))
            .count()
    }

    pub fn local(&self, sid: u64) -> Vec<u64> {
        (self.placements(sid).into_iter())
            .filter(|(_, pl)| *pl == Placement::Local)
            .map(|(id, _)| id)
            .collect()
    }

    /// The epoch of each partition this node serves.
    pub fn epochs(&self, sid: u64) -> Vec<(u64, u64)> {
        let map = self.engine.maps.get(sid).unwrap();
        (map.parts.iter())
            .filter_map(|p| Some((p.id, self.engine.handles.owner_handle(p)?.epoch())))
            .collect()
    }
}

/// Commits one write through `h` (a key at the start of its partition's range); the key.
pub fn late_commit(
    h: &dyn PartitionHandle,
) -> (Vec<u8>, Result<(), ringgate::storage::StorageError>) {
    // Token bytes of all zeros after the range's start: in range for the first partition too,
    // whose start is the bare table prefix.
    let key = [&h.partition().range.lo[..], &[0u8; 8], b"late"].concat();
    let mut commit = PartitionCommit::default();
    commit.put(key.clone(), &b"x"[..]);
    (key, h.commit(commit))
}

/// Polls `f` every 50 ms until it is true; the time it took, or None after `limit`.
pub fn until(limit: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// A read of key `k` that any node answers from the shared store: a token range, which
/// runs where it arrives (a single-partition SELECT runs on the partition's owner and is
/// `NotOwner` elsewhere, forwarded by the server, which these in-process engines lack).
pub fn read_anywhere(k: impl std::fmt::Display) -> String {
    format!("SELECT v FROM ks.t WHERE token(k) >= token({k}) AND token(k) <= token({k})")
}
