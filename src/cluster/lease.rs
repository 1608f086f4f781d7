//! A node's lease: granted with the cluster's TTL and renewed in the background every third
//! of it. The node's keys (membership, ownership) are attached to it, so they vanish when the
//! node stops renewing (dies, pauses, loses etcd).
//!
//! The node judges the lease lost by its own clock: renewal sent at `t` and answered means
//! the lease lives until at least `t + TTL`; past that deadline without a newer answer,
//! [`NodeLease::is_valid`] is false (until a renewal is answered again: while the lease exists
//! nobody else can hold its keys). So a paused node that wakes up stops writing before it could
//! learn from etcd that its keys are gone (the PostgreSQL epoch check is the backstop). A lease
//! etcd reports gone (keepalive without a TTL) is lost for good.

use super::Result;
use crate::etcd::EtcdClient;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug)]
struct State {
    base: Instant,
    /// Milliseconds after `base` until which the lease is known to live.
    valid_until_ms: AtomicU64,
    lost: AtomicBool,
}

impl State {
    fn now_ms(&self) -> u64 {
        self.base.elapsed().as_millis() as u64
    }
}

#[derive(Debug)]
pub struct NodeLease {
    client: Arc<EtcdClient>,
    id: i64,
    ttl_ms: u64,
    state: Arc<State>,
    keepalive: parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl NodeLease {
    /// Grants a lease of `ttl_ms` (rounded up to whole seconds, etcd's unit) and starts
    /// renewing it on the current tokio runtime.
    pub async fn grant(client: Arc<EtcdClient>, ttl_ms: u64) -> Result<NodeLease> {
        let ttl_s = ttl_ms.div_ceil(1000).max(1) as i64;
        let sent = Instant::now();
        let lease = client.lease_grant(ttl_s).await?;
        let ttl_ms = lease.ttl_s as u64 * 1000;
        let state = Arc::new(State {
            base: sent,
            valid_until_ms: AtomicU64::new(ttl_ms),
            lost: AtomicBool::new(false),
        });
        let task = tokio::spawn(renew(client.clone(), lease.id, ttl_ms, state.clone()));
        Ok(NodeLease {
            client,
            id: lease.id,
            ttl_ms,
            state,
            keepalive: parking_lot::Mutex::new(Some(task)),
        })
    }

    pub fn id(&self) -> i64 {
        self.id
    }

    /// The TTL etcd granted.
    pub fn ttl_ms(&self) -> u64 {
        self.ttl_ms
    }

    /// Whether the lease is certainly still alive (see the module doc).
    pub fn is_valid(&self) -> bool {
        !self.state.lost.load(Ordering::Acquire)
            && self.state.now_ms() < self.state.valid_until_ms.load(Ordering::Acquire)
    }

    /// Whether etcd reported the lease gone (or it was revoked): it cannot come back; the node
    /// needs a new lease (and takes its partitions again with new epochs).
    pub fn is_lost(&self) -> bool {
        self.state.lost.load(Ordering::Acquire)
    }

    /// Stops renewing without revoking: etcd deletes the lease's keys after the TTL, as when
    /// the node dies (or pauses: tests stop a live node's lease this way).
    pub fn stop_keepalive(&self) {
        if let Some(task) = self.keepalive.lock().take() {
            task.abort();
        }
    }

    /// Ends the lease now (a clean shutdown): its keys go at once.
    pub async fn revoke(self) -> Result<()> {
        self.stop_keepalive();
        self.state.lost.store(true, Ordering::Release);
        Ok(self.client.lease_revoke(self.id).await?)
    }
}

impl Drop for NodeLease {
    fn drop(&mut self) {
        self.stop_keepalive();
    }
}

async fn renew(client: Arc<EtcdClient>, id: i64, ttl_ms: u64, state: Arc<State>) {
    let period = Duration::from_millis((ttl_ms / 3).max(100));
    loop {
        tokio::time::sleep(period).await;
        let sent_ms = state.now_ms();
        match client.lease_keepalive(id).await {
            Ok(Some(ttl_s)) => {
                let until = sent_ms + ttl_s as u64 * 1000;
                state.valid_until_ms.fetch_max(until, Ordering::AcqRel);
            }
            Ok(None) => {
                tracing::warn!(lease = id, "etcd lease expired: this node's keys are gone");
                state.lost.store(true, Ordering::Release);
                return;
            }
            // Keep trying: the lease may outlive an etcd leader change. `is_valid` turns false
            // by the clock meanwhile.
            Err(e) => tracing::warn!(lease = id, error = %e, "etcd lease renewal failed"),
        }
    }
}
