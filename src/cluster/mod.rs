//! Cluster mode's control plane on etcd (issue 17): the primitives the layers above build on
//! (`server::startup` joins the node; `partition::ownership` takes and hands off partitions).
//!
//! - `lease.rs`: a node's lease, kept alive in the background; the node knows locally when it
//!   must consider it lost (last successful renewal + TTL), before etcd deletes its keys.
//! - `members.rs`: `members/<node name>` = JSON {host id, advertise address, data centre, rack,
//!   started at}, attached to the node's lease; listing; polling for joins and leaves.
//! - `ownership.rs`: `owner/<storage id>/<partition id>` = JSON {node, epoch} attached to the
//!   owner's lease, and `epoch/<storage id>/<partition id>` = the last epoch handed out (decimal,
//!   no lease: it outlives owners, so epochs never go backwards); taking ownership is one
//!   transaction that checks the owner key absent and the epoch key unchanged.
//! - `assignment.rs`: who should own each partition (by end token), computed alike by every
//!   node from the live members: balanced, stable under joins and leaves.
//! - `meta.rs`: `storage::MetaStore` on etcd under `meta/`, plus a compare-and-swap commit.
//! - `groups.rs`: storage groups (the PostgreSQL servers holding physical partitions):
//!   `meta/groups/<name>` = how to reach one; `group-bytes/<node>` = the bytes of the
//!   partitions the node owns, per group, on its lease; least-data-first placement.
//! - `store.rs`: `ClusterStore`, one PostgreSQL store per group plus the etcd metadata
//!   (`merge.rs`: one ordered scan over the groups' scans).
//! - `moves.rs`: moving partitions between groups: requests, outcomes, copies left to delete,
//!   and the switch transaction (fenced by the owner record and the map's revision).
//! - `schema_versions.rs`: `schema-version/<node name>` = the schema version the node serves,
//!   on its lease (system.peers shows it; drivers wait for agreement on it).
//!
//! Every key is under the `Control`'s root prefix (e.g. `ringgate/<cluster name>/`), so several
//! clusters (and tests) can share one etcd.
//!
//! Layer: above `storage` (it implements `storage::MetaStore`) and the `etcd` leaf, below
//! `schema`: `partition` (ownership) and `server` (membership) will use it, and nothing here
//! needs the schema or the partition maps (they are opaque values to `meta.rs`), so imports
//! stay one-way.

pub mod assignment;
pub mod groups;
pub mod lease;
pub mod members;
mod merge;
pub mod meta;
pub mod moves;
pub mod node;
pub mod ownership;
pub mod ring;
pub mod schema_versions;
pub mod store;

use crate::etcd::{EtcdClient, EtcdError};
use std::sync::Arc;

pub use lease::NodeLease;
pub use members::{Member, MemberEvent, MemberWatch};
pub use meta::EtcdMetaStore;
pub use node::{ClusterNode, NodeOptions};
pub use ownership::{Owner, Ownership};
pub use ring::{Ring, RingMember};
pub use store::ClusterStore;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error(transparent)]
    Etcd(#[from] EtcdError),
    /// Another node owns the partition now.
    #[error("partition {storage_id}/{partition_id} is owned by {owner} (epoch {epoch})")]
    Taken {
        storage_id: u64,
        partition_id: u64,
        owner: String,
        epoch: u64,
    },
    /// This node's ownership (or lease) is gone: a newer epoch may exist; it must take the
    /// partition again (with a new epoch) before it writes.
    #[error("ownership of partition {storage_id}/{partition_id} at epoch {epoch} is lost")]
    Lost {
        storage_id: u64,
        partition_id: u64,
        epoch: u64,
    },
    /// The node name is registered by a live node with another lease.
    #[error("node name {0:?} is already registered by a live node")]
    NameTaken(String),
    /// Another node changed the same key at the same moment; trying again can succeed.
    #[error("concurrent change of {0}; try again")]
    Contended(String),
    #[error("bad control record at {key}: {detail}")]
    Corrupt { key: String, detail: String },
}

impl ControlError {
    pub fn is_retryable(&self) -> bool {
        match self {
            ControlError::Etcd(e) => e.is_retryable(),
            ControlError::Contended(_) => true,
            _ => false,
        }
    }
}

pub type Result<T> = std::result::Result<T, ControlError>;

/// An etcd client and the root prefix of one cluster's keys.
#[derive(Debug, Clone)]
pub struct Control {
    pub client: Arc<EtcdClient>,
    root: String,
}

impl Control {
    /// `root` is prepended to every key (a trailing `/` is added when missing).
    pub fn new(client: Arc<EtcdClient>, root: &str) -> Control {
        let mut root = root.to_string();
        if !root.is_empty() && !root.ends_with('/') {
            root.push('/');
        }
        Control { client, root }
    }

    pub fn key(&self, rest: &str) -> Vec<u8> {
        format!("{}{rest}", self.root).into_bytes()
    }

    /// All keys under `rest` (a prefix) at one revision, at most `page` per request; more than
    /// `max_keys` is an error (the callers' key spaces are small by design).
    pub async fn scan_prefix(
        &self,
        rest: &str,
        page: i64,
        max_keys: usize,
    ) -> Result<Vec<crate::etcd::KeyValue>> {
        let prefix = self.key(rest);
        let end = crate::etcd::prefix_end(&prefix);
        let mut from = prefix.clone();
        let mut out = Vec::new();
        let mut revision = 0;
        loop {
            let r = self
                .client
                .range_at(&from, Some(&end), page, revision)
                .await?;
            revision = r.revision;
            if let Some(last) = r.kvs.last() {
                from = [&last.key[..], &[0]].concat();
            }
            out.extend(r.kvs);
            if out.len() > max_keys {
                return Err(ControlError::Corrupt {
                    key: String::from_utf8_lossy(&prefix).into_owned(),
                    detail: format!("more than {max_keys} keys"),
                });
            }
            if !r.more {
                return Ok(out);
            }
        }
    }
}
