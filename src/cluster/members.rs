//! Membership: `members/<node name>` = JSON [`Member`], attached to the node's lease, so a
//! node that stops renewing leaves by itself after the TTL. Changes are observed by polling
//! at a bounded interval ([`MemberWatch`]); `etcd::Watch` (a stream) can replace it later without
//! changing the callers.

use super::{Control, ControlError, NodeLease, Result};
use crate::etcd::{Compare, Op, Txn};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// At most this many members are listed (a bound, far above any real cluster).
pub const MAX_MEMBERS: usize = 10_000;
const PAGE: i64 = 500;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    pub name: String,
    pub host_id: String,
    /// `host:port` clients and peers use.
    pub advertise: String,
    pub data_center: String,
    pub rack: String,
    pub started_at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberEvent {
    Joined(Member),
    /// The member's record changed (e.g. it restarted with a new lease).
    Changed(Member),
    Left(String),
    /// The member's owned end tokens changed (published by ownership, `ClusterNode`): drivers
    /// refresh their token maps on the TOPOLOGY_CHANGE MOVED_NODE it becomes.
    Moved(String),
}

fn member_key(ctl: &Control, name: &str) -> Vec<u8> {
    ctl.key(&format!("members/{name}"))
}

/// Registers `member` on `lease`. A record of the same name held by another live lease is a
/// `NameTaken` error (two processes configured with one name); one on this lease is replaced.
pub async fn register(ctl: &Control, lease: &NodeLease, member: &Member) -> Result<()> {
    let key = member_key(ctl, &member.name);
    let value = serde_json::to_vec(member).expect("a member serializes");
    let put = Op::put(key.clone(), value, lease.id());
    let mine = [
        Compare::absent(key.clone()),
        Compare::lease(key.clone(), lease.id()),
    ];
    for cond in mine {
        if ctl
            .client
            .txn(&Txn::when(vec![cond]).then(vec![put.clone()]))
            .await?
            .succeeded
        {
            return Ok(());
        }
    }
    Err(ControlError::NameTaken(member.name.clone()))
}

/// Deletes the record if it is still this lease's.
pub async fn deregister(ctl: &Control, lease: &NodeLease, name: &str) -> Result<()> {
    let key = member_key(ctl, name);
    let txn = Txn::when(vec![Compare::lease(key.clone(), lease.id())]).then(vec![Op::delete(key)]);
    ctl.client.txn(&txn).await?;
    Ok(())
}

/// The live members, by name.
pub async fn list(ctl: &Control) -> Result<BTreeMap<String, Member>> {
    let mut out = BTreeMap::new();
    for kv in ctl.scan_prefix("members/", PAGE, MAX_MEMBERS).await? {
        let m: Member = serde_json::from_slice(&kv.value).map_err(|e| ControlError::Corrupt {
            key: String::from_utf8_lossy(&kv.key).into_owned(),
            detail: e.to_string(),
        })?;
        out.insert(m.name.clone(), m);
    }
    Ok(out)
}

/// Joins and leaves, by comparing listings taken at most `interval` apart.
#[derive(Debug)]
pub struct MemberWatch {
    ctl: Control,
    known: BTreeMap<String, Member>,
    interval: Duration,
}

impl MemberWatch {
    /// Starts from the current members (returned too).
    pub async fn start(ctl: Control, interval: Duration) -> Result<(MemberWatch, Vec<Member>)> {
        let known = list(&ctl).await?;
        let now = known.values().cloned().collect();
        Ok((
            MemberWatch {
                ctl,
                known,
                interval,
            },
            now,
        ))
    }

    /// Waits for the next change (polling every `interval`) and returns it.
    pub async fn next(&mut self) -> Result<Vec<MemberEvent>> {
        loop {
            let events = self.poll().await?;
            if !events.is_empty() {
                return Ok(events);
            }
            tokio::time::sleep(self.interval).await;
        }
    }

    /// The changes since the last call (possibly none).
    pub async fn poll(&mut self) -> Result<Vec<MemberEvent>> {
        let now = list(&self.ctl).await?;
        let mut events = Vec::new();
        for (name, m) in &now {
            match self.known.get(name) {
                None => events.push(MemberEvent::Joined(m.clone())),
                Some(old) if old != m => events.push(MemberEvent::Changed(m.clone())),
                Some(_) => {}
            }
        }
        let left = self.known.keys().filter(|n| !now.contains_key(*n));
        events.extend(left.map(|n| MemberEvent::Left(n.clone())));
        self.known = now;
        Ok(events)
    }
}
