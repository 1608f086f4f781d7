//! system.local's tokens and address, system.peers and system.peers_v2 in cluster mode: the
//! ring drivers are shown (`ClusterNode::ring`, `cluster/ring.rs`: the live members whose
//! ownership loops run, so a node is listed once it has its share) but this node, with host
//! id, data centre, rack, address and port from its `advertise`, the schema version it
//! published (`cluster::schema_versions`; the nil UUID until it has, so a driver's schema
//! agreement waits for it) and its tokens: the end tokens of the physical partitions assigned
//! to it, or, while it has none, one token derived from its host id, so a driver never sees a
//! node without tokens. A single node has no peers.
//!
//! Several nodes may share an IP (a local cluster on 127.0.0.1): peers_v2 tells them apart by
//! port, and drivers read it first; system.peers (no port) lists them all under one IP.

use super::system::{inet, int, row, text, text_list, uuid, NodeInfo, VRow, RELEASE_VERSION};
use super::TableDef;
use crate::cluster::RingMember;
use std::net::SocketAddr;
use uuid::Uuid;

/// This node's tokens as system.local shows them (sorted text).
pub fn local_tokens(node: &NodeInfo) -> Vec<String> {
    let tokens = match &node.cluster {
        Some(c) => member_tokens(c.ring().get(c.name()), &c.member().host_id),
        None => node.tokens.clone(),
    };
    sorted_text(tokens)
}

/// The address clients reach this node at: its `advertise` in cluster mode.
pub fn local_rpc_address(node: &NodeInfo) -> SocketAddr {
    match &node.cluster {
        Some(c) => c.member().advertise.parse().unwrap_or(node.listen),
        None => node.listen,
    }
}

fn sorted_text(tokens: Vec<i64>) -> Vec<String> {
    let mut out: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
    out.sort();
    out
}

fn member_tokens(m: Option<&RingMember>, host_id: &str) -> Vec<i64> {
    match m {
        Some(m) if !m.tokens.is_empty() => m.tokens.clone(),
        _ => vec![host_id_token(host_id)],
    }
}

/// The first 8 bytes of the host id as a token (distinct per node, stable across restarts).
fn host_id_token(host_id: &str) -> i64 {
    let id = Uuid::parse_str(host_id).unwrap_or_default();
    i64::from_be_bytes(id.as_bytes()[..8].try_into().expect("16-byte uuid"))
}

pub fn peer_rows(node: &NodeInfo, t: &TableDef, v2: bool) -> Vec<VRow> {
    let Some(c) = &node.cluster else {
        return Vec::new();
    };
    let versions = match crate::cluster::schema_versions::read(c) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the nodes' schema versions");
            Default::default()
        }
    };
    let ring = c.ring();
    let others = ring.values().filter(|m| m.member.name != c.name());
    others
        .filter_map(|rm| {
            let m = &rm.member;
            let addr: SocketAddr = m.advertise.parse().ok()?;
            let host_id = Uuid::parse_str(&m.host_id).ok()?;
            let version = (versions.get(&m.name))
                .and_then(|v| Uuid::parse_str(v).ok())
                .unwrap_or_default();
            let tokens = sorted_text(member_tokens(Some(rm), &m.host_id));
            let port = int(addr.port() as i32);
            let mut cells = vec![
                ("peer", inet(addr.ip())),
                ("data_center", text(&m.data_center)),
                ("host_id", uuid(&host_id)),
                ("rack", text(&m.rack)),
                ("release_version", text(RELEASE_VERSION)),
                ("schema_version", uuid(&version)),
                ("tokens", text_list(&tokens)),
            ];
            match v2 {
                true => cells.extend([
                    ("peer_port", port.clone()),
                    ("native_address", inet(addr.ip())),
                    ("native_port", port),
                ]),
                false => cells.push(("rpc_address", inet(addr.ip()))),
            }
            Some(row(t, &cells))
        })
        .collect()
}
