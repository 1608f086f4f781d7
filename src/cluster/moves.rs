//! Moving physical partitions between storage groups (issue 18): the records in etcd. The
//! copy itself is `partition::moves`.
//!
//! - `move/<storage id>/<partition id>` = JSON [`Request`]: move the partition to group `to`
//!   (written by `system_views.partition_moves`, i.e. `ringgate admin move` or `rebalance`, or
//!   by a split placing a child). The partition's owner runs it and deletes it.
//! - `moved/<storage id>/<partition id>` = JSON [`Outcome`]: how the last move of the
//!   partition ended (the view shows it).
//! - `move-cleanup/<storage id>/<partition id>/<group>` = JSON [`Cleanup`]: the copy a move left
//!   in its source group, deleted by the partition's owner once every node has had time to
//!   follow the new map (until then a scan on another node may still read it). Written by the
//!   switch itself, so a node that dies right after a move leaves the work to the next owner.
//!
//! The switch is one transaction: if the owner record is still the mover's (same epoch, same
//! lease) and the table's map key is still at the revision the new map was built from, it
//! writes the new map and the maps-changed key (other nodes reload), the cleanup record and
//! the outcome, and deletes the request. A node taking the partition over later reads the map
//! after its take (`partition::ownership`), so it opens the group the switch wrote.

use super::{ownership, Control, ControlError, Ownership, Result};
use crate::etcd::{Compare, Op, Txn};
use serde::{Deserialize, Serialize};

/// At most this many pending requests (or outcomes, or cleanups) are listed.
pub const MAX_RECORDS: usize = 100_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub to: String,
    pub requested_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub from: String,
    pub to: String,
    pub moved: bool,
    /// What happened (rows copied and the pause, or why it failed).
    pub detail: String,
    pub finished_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cleanup {
    pub since_ms: u64,
}

pub fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| d.as_millis() as u64)
}

fn request_key(ctl: &Control, sid: u64, pid: u64) -> Vec<u8> {
    ctl.key(&format!("move/{sid}/{pid}"))
}

fn outcome_key(ctl: &Control, sid: u64, pid: u64) -> Vec<u8> {
    ctl.key(&format!("moved/{sid}/{pid}"))
}

fn cleanup_key(ctl: &Control, sid: u64, pid: u64, group: &str) -> Vec<u8> {
    ctl.key(&format!("move-cleanup/{sid}/{pid}/{group}"))
}

fn json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("a record serializes")
}

fn corrupt(key: &[u8], detail: impl ToString) -> ControlError {
    ControlError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        detail: detail.to_string(),
    }
}

/// Records a request to move the partition to group `to` (replacing an earlier one).
pub async fn request(ctl: &Control, sid: u64, pid: u64, to: &str) -> Result<()> {
    let r = Request {
        to: to.to_string(),
        requested_ms: now_ms(),
    };
    ctl.client
        .put(&request_key(ctl, sid, pid), &json(&r), 0)
        .await?;
    Ok(())
}

/// The ids after `prefix/` in a key, and the rest (`<sid>/<pid>[/<rest>]`).
fn ids(key: &[u8], prefix: &[u8]) -> Option<(u64, u64, String)> {
    let tail = std::str::from_utf8(key.get(prefix.len()..)?).ok()?;
    let mut parts = tail.splitn(3, '/');
    let sid = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    Some((sid, pid, parts.next().unwrap_or("").to_string()))
}

async fn list<T: for<'de> Deserialize<'de>>(
    ctl: &Control,
    prefix: &str,
) -> Result<Vec<(u64, u64, String, T)>> {
    let full = ctl.key(prefix);
    let mut out = Vec::new();
    for kv in ctl.scan_prefix(prefix, 1000, MAX_RECORDS).await? {
        let (sid, pid, rest) = ids(&kv.key, &full).ok_or_else(|| corrupt(&kv.key, "bad key"))?;
        let v = serde_json::from_slice(&kv.value).map_err(|e| corrupt(&kv.key, e))?;
        out.push((sid, pid, rest, v));
    }
    Ok(out)
}

/// Pending requests: (storage id, partition id, request).
pub async fn requests(ctl: &Control) -> Result<Vec<(u64, u64, Request)>> {
    let all = list::<Request>(ctl, "move/").await?;
    Ok(all.into_iter().map(|(s, p, _, r)| (s, p, r)).collect())
}

/// The last outcome of each partition moved (or tried).
pub async fn outcomes(ctl: &Control) -> Result<Vec<(u64, u64, Outcome)>> {
    let all = list::<Outcome>(ctl, "moved/").await?;
    Ok(all.into_iter().map(|(s, p, _, o)| (s, p, o)).collect())
}

/// Copies left behind: (storage id, partition id, group, record).
pub async fn cleanups(ctl: &Control) -> Result<Vec<(u64, u64, String, Cleanup)>> {
    list::<Cleanup>(ctl, "move-cleanup/").await
}

/// Records how a request ended without a switch (failed, or nothing to move) and deletes it.
pub async fn finish(ctl: &Control, sid: u64, pid: u64, outcome: &Outcome) -> Result<()> {
    let txn = Txn::when(vec![]).then(vec![
        Op::put(outcome_key(ctl, sid, pid), json(outcome), 0),
        Op::delete(request_key(ctl, sid, pid)),
    ]);
    ctl.client.txn(&txn).await?;
    Ok(())
}

/// The copy in `group` is gone.
pub async fn cleaned(ctl: &Control, sid: u64, pid: u64, group: &str) -> Result<()> {
    ctl.client
        .delete(&cleanup_key(ctl, sid, pid, group), None)
        .await?;
    Ok(())
}

/// A table's new map: its key in the metadata store (`meta/` relative), the revision it was
/// built from, its value; and the maps-changed key and value that make other nodes reload.
#[derive(Debug, Clone)]
pub struct NewMap {
    pub key: Vec<u8>,
    pub revision: i64,
    pub value: Vec<u8>,
    pub changed_key: Vec<u8>,
    pub changed_value: Vec<u8>,
}

/// The switch (see the module doc); false when the ownership or the map changed meanwhile
/// (nothing written).
pub async fn switch(
    ctl: &Control,
    own: &Ownership,
    map: &NewMap,
    outcome: &Outcome,
) -> Result<bool> {
    let meta = |k: &[u8]| [&ctl.key("meta/")[..], k].concat();
    let (sid, pid) = (own.storage_id, own.partition_id);
    let mut compare = ownership::still_owned(ctl, own);
    compare.push(Compare::mod_revision(meta(&map.key), map.revision));
    let cleanup = Cleanup { since_ms: now_ms() };
    let txn = Txn::when(compare).then(vec![
        Op::put(meta(&map.key), map.value.clone(), 0),
        Op::put(meta(&map.changed_key), map.changed_value.clone(), 0),
        Op::put(cleanup_key(ctl, sid, pid, &outcome.from), json(&cleanup), 0),
        Op::put(outcome_key(ctl, sid, pid), json(outcome), 0),
        Op::delete(request_key(ctl, sid, pid)),
    ]);
    Ok(ctl.client.txn(&txn).await?.succeeded)
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_parse_back() {
        assert_eq!(
            super::ids(b"r/move-cleanup/7/12/g2", b"r/move-cleanup/"),
            Some((7, 12, "g2".to_string()))
        );
        assert_eq!(
            super::ids(b"r/move/7/12", b"r/move/"),
            Some((7, 12, String::new()))
        );
        assert_eq!(super::ids(b"r/move/x/12", b"r/move/"), None);
    }
}
