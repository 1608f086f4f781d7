//! This process as a cluster member: its etcd client and key root, its lease (replaced by a
//! new one when etcd reports it gone), its membership record, and what it knows of the other
//! members, kept current by a background task on the node's own runtime.
//!
//! Why its own runtime (one thread): renewing the lease must not wait behind client requests
//! on the server's runtime; a node that cannot renew loses every partition it owns.
//!
//! What the layers above read from here: [`ClusterNode::members`] (forwarding addresses),
//! [`ClusterNode::lease`] and [`ClusterNode::lease_generation`] (ownership takes partitions
//! on the current lease; a new generation means every earlier ownership is gone), and
//! [`ClusterNode::ring`], which ownership publishes (`ring.rs`: the ready members and their
//! assigned end tokens) and system.local / system.peers show, with
//! [`ClusterNode::subscribe`] for its changes (TOPOLOGY_CHANGE / STATUS_CHANGE events).

use super::{members, Control, ControlError, Member, MemberEvent, MemberWatch, NodeLease, Ring};
use crate::etcd::{ClientOptions, EtcdClient};
use arc_swap::ArcSwap;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a node needs to join.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    pub endpoints: Vec<String>,
    /// Root of the cluster's keys in etcd (`ringgate/<cluster name>/`).
    pub root: String,
    /// This node's record (name, host id, advertise address, data centre, rack).
    pub member: Member,
    pub lease_ms: u64,
}

/// Member events queued for subscribers that lag (a subscriber that falls further behind
/// misses events; the ring itself is always current).
const EVENTS_QUEUED: usize = 256;

pub struct ClusterNode {
    control: Control,
    member: Member,
    lease_ms: u64,
    lease: ArcSwap<NodeLease>,
    generation: AtomicU64,
    members: ArcSwap<BTreeMap<String, Member>>,
    ring: ArcSwap<Ring>,
    events: tokio::sync::broadcast::Sender<MemberEvent>,
    /// Some until drop.
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for ClusterNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterNode")
            .field("name", &self.member.name)
            .finish()
    }
}

impl ClusterNode {
    /// Grants the lease, registers the member (refused while a live node holds the name) and
    /// starts the background task. Blocks the caller until joined.
    pub fn join(opts: NodeOptions) -> Result<Arc<ClusterNode>, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cluster")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the cluster runtime: {e}"))?;
        let client = EtcdClient::new(&opts.endpoints, ClientOptions::default())
            .map_err(|e| format!("cluster.etcd: {e}"))?;
        let control = Control::new(Arc::new(client), &opts.root);
        let (ctl, member, lease_ms) = (control.clone(), opts.member.clone(), opts.lease_ms);
        let joined = block(&runtime, async move {
            let lease = NodeLease::grant(ctl.client.clone(), lease_ms).await?;
            members::register(&ctl, &lease, &member).await?;
            let (watch, now) = MemberWatch::start(ctl, poll_interval(lease_ms)).await?;
            Ok::<_, ControlError>((lease, watch, now))
        })?;
        let (lease, watch, now) = joined.map_err(|e| format!("cannot join the cluster: {e}"))?;
        let node = Arc::new(ClusterNode {
            control,
            member: opts.member,
            lease_ms: opts.lease_ms,
            lease: ArcSwap::from_pointee(lease),
            generation: AtomicU64::new(1),
            members: ArcSwap::from_pointee(now.into_iter().map(|m| (m.name.clone(), m)).collect()),
            ring: ArcSwap::default(),
            events: tokio::sync::broadcast::channel(EVENTS_QUEUED).0,
            runtime: Some(runtime),
        });
        let weak = Arc::downgrade(&node);
        node.rt().spawn(watch_loop(weak, watch));
        Ok(node)
    }

    fn rt(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("the runtime lives until drop")
    }

    pub fn control(&self) -> &Control {
        &self.control
    }

    pub fn name(&self) -> &str {
        &self.member.name
    }

    /// This node's own record.
    pub fn member(&self) -> &Member {
        &self.member
    }

    pub fn lease_ms(&self) -> u64 {
        self.lease_ms
    }

    /// The current lease; ownership is taken on it.
    pub fn lease(&self) -> Arc<NodeLease> {
        self.lease.load_full()
    }

    /// Counts leases: it changes when etcd reported the previous lease gone and the node
    /// joined again on a new one.
    pub fn lease_generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The live members (this node included), as last listed.
    pub fn members(&self) -> Arc<BTreeMap<String, Member>> {
        self.members.load_full()
    }

    /// The record of member `name`: from the list kept current every poll interval or, when it
    /// is not there (it joined or came back since the last poll), from etcd at once (the list is
    /// replaced by what etcd said). None when etcd has no such member or did not answer.
    pub async fn member_now(self: &Arc<Self>, name: &str) -> Option<Member> {
        if let Some(m) = self.members().get(name) {
            return Some(m.clone());
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        let node = Arc::clone(self);
        self.rt().spawn(async move {
            let listed = members::list(&node.control).await;
            if let Ok(now) = &listed {
                node.members.store(Arc::new(now.clone()));
            }
            let _ = tx.send(listed.ok());
        });
        rx.await.ok().flatten()?.get(name).cloned()
    }

    /// Changes of the ring drivers are shown, from now on (`ring.rs`).
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<MemberEvent> {
        self.events.subscribe()
    }

    /// The ring drivers are shown: ready members and their assigned end tokens (`ring.rs`).
    pub fn ring(&self) -> Arc<Ring> {
        self.ring.load_full()
    }

    /// Each ready node's assigned end tokens.
    pub fn tokens_by_node(&self) -> BTreeMap<String, Vec<i64>> {
        (self.ring.load().iter())
            .map(|(n, m)| (n.clone(), m.tokens.clone()))
            .collect()
    }

    /// Publishes the ring (ownership, every round) and announces what changed.
    pub fn publish_ring(&self, ring: Ring) {
        let old = self.ring.swap(Arc::new(ring));
        for e in super::ring::changes(&old, &self.ring.load()) {
            let _ = self.events.send(e);
        }
    }

    /// Runs `f` on the node's runtime and waits for it (from any thread, also from a worker of
    /// another runtime).
    pub fn block_on<T: Send + 'static>(
        &self,
        f: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, String> {
        block(self.rt(), f)
    }

    /// Spawns `f` on the node's runtime (background tasks of the layers above: ownership).
    pub fn spawn(&self, f: impl Future<Output = ()> + Send + 'static) {
        self.rt().spawn(f);
    }

    /// Leaves the cluster at once (a clean shutdown): the lease is revoked, so the member
    /// record and every ownership on it go now instead of after the TTL.
    pub fn leave(&self) {
        let lease = self.lease();
        let client = self.control.client.clone();
        let _ = self.block_on(async move { client.lease_revoke(lease.id()).await });
    }
}

impl Drop for ClusterNode {
    /// Dropped from async code (the server's shutdown): a runtime must not block there.
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

fn block<T: Send + 'static>(
    rt: &tokio::runtime::Runtime,
    f: impl Future<Output = T> + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    rt.spawn(async move {
        let _ = tx.send(f.await);
    });
    rx.recv()
        .map_err(|_| "the cluster runtime stopped".to_string())
}

/// How often members are listed: a fifth of the lease, between 100 ms and 1 s, so a join or
/// a death is seen well within a lease.
fn poll_interval(lease_ms: u64) -> Duration {
    Duration::from_millis((lease_ms / 5).clamp(100, 1000))
}

/// Lists members every poll interval and keeps the latest list; replaces a lease etcd reported
/// gone (registering again on the new one). Ends with the node.
async fn watch_loop(node: std::sync::Weak<ClusterNode>, mut watch: MemberWatch) {
    loop {
        let Some(n) = node.upgrade() else { return };
        let interval = poll_interval(n.lease_ms);
        if n.lease().is_lost() {
            rejoin(&n).await;
        }
        // Drivers hear of members through the ring (`publish_ring`), not from here: a
        // member is announced once it is ready, with its share.
        match watch.poll().await {
            Ok(events) if !events.is_empty() => {
                if let Ok(now) = members::list(&n.control).await {
                    n.members.store(Arc::new(now));
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "listing cluster members failed"),
        }
        drop(n);
        tokio::time::sleep(interval).await;
    }
}

/// A new lease and the member record on it; the generation moves on, so ownership knows
/// every partition taken on the old lease is gone.
async fn rejoin(n: &ClusterNode) {
    let grant = NodeLease::grant(n.control.client.clone(), n.lease_ms).await;
    let lease = match grant {
        Ok(l) => l,
        Err(e) => return tracing::warn!(error = %e, "cannot renew this node's etcd lease"),
    };
    if let Err(e) = members::register(&n.control, &lease, &n.member).await {
        return tracing::warn!(error = %e, "cannot register this node again");
    }
    n.lease.store(Arc::new(lease));
    n.generation.fetch_add(1, Ordering::AcqRel);
    tracing::warn!(node = %n.member.name, "joined the cluster again on a new lease");
}
