//! Each node's schema version: `schema-version/<node name>` = the version (UUID text) of the
//! schema it serves, on the node's lease (gone with the node). system.peers shows it, so a
//! driver's schema agreement waits until every node has adopted a change, not only the node
//! that made it. Written by the schema follower (`query/follow.rs`) when its version changes
//! or the node's lease is replaced; read when system.peers / peers_v2 are queried.

use super::{ClusterNode, ControlError};
use std::collections::BTreeMap;

const PREFIX: &str = "schema-version/";
/// Far above any real cluster (members are bounded the same way).
const MAX_NODES: usize = super::members::MAX_MEMBERS;

/// Records this node's schema version on its current lease.
pub fn publish(node: &ClusterNode, version: &str) -> Result<(), String> {
    let key = node.control().key(&format!("{PREFIX}{}", node.name()));
    let (client, lease, value) = (
        node.control().client.clone(),
        node.lease().id(),
        version.to_string(),
    );
    node.block_on(async move { client.put(&key, value.as_bytes(), lease).await })?
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Every live node's published schema version, by node name.
pub fn read(node: &ClusterNode) -> Result<BTreeMap<String, String>, String> {
    let ctl = node.control().clone();
    let kvs = node
        .block_on(async move { ctl.scan_prefix(PREFIX, 500, MAX_NODES).await })?
        .map_err(|e: ControlError| e.to_string())?;
    let root = node.control().key(PREFIX).len();
    Ok(kvs
        .into_iter()
        .filter_map(|kv| {
            let name = String::from_utf8(kv.key.get(root..)?.to_vec()).ok()?;
            Some((name, String::from_utf8(kv.value).ok()?))
        })
        .collect())
}
