//! Events that do not come from a request on this node, sent to the connections that
//! REGISTERed for them (`Shared::events`):
//! - SCHEMA_CHANGE for schema changes other nodes made, as this node adopts them
//!   (`Catalog::subscribe`; changes made here go out with their request's result);
//! - cluster mode, from changes of the ring drivers are shown (`ClusterNode::subscribe`,
//!   `cluster/ring.rs`: members appear there once ready, with their share of the tokens):
//!   TOPOLOGY_CHANGE NEW_NODE and STATUS_CHANGE UP when a node appears, STATUS_CHANGE UP when
//!   one's record changed (a restart), STATUS_CHANGE DOWN and TOPOLOGY_CHANGE REMOVED_NODE when
//!   one leaves (its lease ended: stopped or dead), TOPOLOGY_CHANGE MOVED_NODE when only its
//!   tokens changed (drivers that follow it read system.peers again). The address is the
//!   node's `advertise` (its CQL address), the one system.peers_v2 shows, so a driver finds
//!   the host the event is about.

use super::Shared;
use crate::cluster::MemberEvent;
use crate::protocol::response::{Event, StatusChangeType, TopologyChangeType};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;

/// Starts the forwarding tasks on the server's runtime; they end with the channels.
pub fn start(shared: &Arc<Shared>) {
    let mut schema = shared.engine.catalog.subscribe();
    let events = shared.events.clone();
    tokio::spawn(async move {
        loop {
            match schema.recv().await {
                Ok(c) => {
                    let ev = Event::SchemaChange(super::convert::schema_change(&c));
                    let _ = events.send(Arc::new(ev));
                }
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            }
        }
    });
    if let Some(node) = shared.engine.node.cluster.clone() {
        let mut members = node.subscribe();
        let mut known: HashMap<String, SocketAddr> = (node.ring().values())
            .filter_map(|m| Some((m.member.name.clone(), m.member.advertise.parse().ok()?)))
            .collect();
        let events = shared.events.clone();
        tokio::spawn(async move {
            loop {
                let e = match members.recv().await {
                    Ok(e) => e,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                };
                for ev in member_events(&mut known, e) {
                    let _ = events.send(Arc::new(ev));
                }
            }
        });
    }
}

/// The protocol events of one member event; `known` maps names to addresses (a leaving
/// member's event carries only its name).
fn member_events(known: &mut HashMap<String, SocketAddr>, e: MemberEvent) -> Vec<Event> {
    let topology = |change, addr| Event::TopologyChange { change, addr };
    let status = |change, addr| Event::StatusChange { change, addr };
    match e {
        MemberEvent::Joined(m) => {
            let Ok(addr) = m.advertise.parse::<SocketAddr>() else {
                return Vec::new();
            };
            known.insert(m.name, addr);
            vec![
                topology(TopologyChangeType::NewNode, addr),
                status(StatusChangeType::Up, addr),
            ]
        }
        MemberEvent::Changed(m) => {
            let Ok(addr) = m.advertise.parse::<SocketAddr>() else {
                return Vec::new();
            };
            let moved = known.insert(m.name, addr).filter(|old| *old != addr);
            let mut out = Vec::new();
            if let Some(old) = moved {
                out.push(topology(TopologyChangeType::RemovedNode, old));
                out.push(topology(TopologyChangeType::NewNode, addr));
            }
            out.push(status(StatusChangeType::Up, addr));
            out
        }
        MemberEvent::Moved(name) => match known.get(&name) {
            Some(addr) => vec![topology(TopologyChangeType::MovedNode, *addr)],
            None => Vec::new(),
        },
        MemberEvent::Left(name) => match known.remove(&name) {
            Some(addr) => vec![
                status(StatusChangeType::Down, addr),
                topology(TopologyChangeType::RemovedNode, addr),
            ],
            None => Vec::new(),
        },
    }
}
