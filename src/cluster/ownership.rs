//! Ownership of physical partitions.
//!
//! Keys (under the control root): `owner/<storage id>/<partition id>` = JSON [`Owner`]
//! `{node, epoch}`, attached to the owner's lease; `epoch/<storage id>/<partition id>` = the
//! last epoch handed out, decimal, on no lease. Taking ownership is one transaction:
//! "the owner key is absent and the epoch key's mod revision is still the one read" then
//! "write epoch + 1 to both". The epoch key outlives every owner, so epochs never go backwards
//! even after an owner's lease (and its owner key) vanished; two contenders that read the same
//! epoch cannot both win, since the first write changes the mod revision the second compares.
//!
//! `ready/<node name>` (empty, on the node's lease): the node's ownership loop runs, so it will
//! take what is assigned to it. Assignment counts only ready nodes: a node that has joined but
//! is still opening (loading schema and maps, counting sizes) gets nothing handed off to it,
//! which would leave those partitions unowned until it is up.
//!
//! A node whose lease expired cannot keep or renew its old epoch: [`renew`] compares the owner
//! key's whole value (node and epoch) and lease, and the key is gone with the lease; it must
//! [`take`] again, which yields a newer epoch. The storage backend fences by that epoch.

use super::{Control, ControlError, NodeLease, Result};
use crate::etcd::{Compare, Op, Txn};
use serde::{Deserialize, Serialize};

/// A `take` that loses the race on the epoch key alone (no owner appeared) reads and tries
/// again this many times before answering `Contended`.
const TAKE_ATTEMPTS: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub node: String,
    pub epoch: u64,
}

/// What the owner holds: enough to renew and release exactly its own record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    pub storage_id: u64,
    pub partition_id: u64,
    pub node: String,
    pub epoch: u64,
    pub lease: i64,
}

impl Ownership {
    fn record(&self) -> Vec<u8> {
        let owner = Owner {
            node: self.node.clone(),
            epoch: self.epoch,
        };
        serde_json::to_vec(&owner).expect("an owner serializes")
    }

    fn lost(&self) -> ControlError {
        ControlError::Lost {
            storage_id: self.storage_id,
            partition_id: self.partition_id,
            epoch: self.epoch,
        }
    }
}

fn owner_key(ctl: &Control, sid: u64, pid: u64) -> Vec<u8> {
    ctl.key(&format!("owner/{sid}/{pid}"))
}

fn epoch_key(ctl: &Control, sid: u64, pid: u64) -> Vec<u8> {
    ctl.key(&format!("epoch/{sid}/{pid}"))
}

fn corrupt(key: &[u8], detail: impl ToString) -> ControlError {
    ControlError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        detail: detail.to_string(),
    }
}

fn parse_owner(key: &[u8], value: &[u8]) -> Result<Owner> {
    serde_json::from_slice(value).map_err(|e| corrupt(key, e))
}

/// The last epoch handed out for the partition (0: never owned) and the epoch key's mod
/// revision (0: absent).
async fn read_epoch(ctl: &Control, key: &[u8]) -> Result<(u64, i64)> {
    let Some(kv) = ctl.client.get(key).await? else {
        return Ok((0, 0));
    };
    let text = std::str::from_utf8(&kv.value).map_err(|e| corrupt(key, e))?;
    let epoch = text.parse().map_err(|e| corrupt(key, e))?;
    Ok((epoch, kv.mod_revision))
}

/// Takes the partition for `node` on `lease` with the next epoch, if nobody owns it.
/// `Taken` names the current owner.
pub async fn take(
    ctl: &Control,
    lease: &NodeLease,
    node: &str,
    storage_id: u64,
    partition_id: u64,
) -> Result<Ownership> {
    let (okey, ekey) = (
        owner_key(ctl, storage_id, partition_id),
        epoch_key(ctl, storage_id, partition_id),
    );
    for _ in 0..TAKE_ATTEMPTS {
        let (epoch, epoch_rev) = read_epoch(ctl, &ekey).await?;
        let next = epoch + 1;
        let mine = Ownership {
            storage_id,
            partition_id,
            node: node.to_string(),
            epoch: next,
            lease: lease.id(),
        };
        let txn = Txn::when(vec![
            Compare::absent(okey.clone()),
            Compare::mod_revision(ekey.clone(), epoch_rev),
        ])
        .then(vec![
            Op::put(okey.clone(), mine.record(), lease.id()),
            Op::put(ekey.clone(), next.to_string(), 0),
        ])
        .otherwise(vec![Op::get(okey.clone())]);
        let r = ctl.client.txn(&txn).await?;
        if r.succeeded {
            return Ok(mine);
        }
        if let Some(kv) = r.range(0).and_then(|g| g.kvs.first()) {
            let owner = parse_owner(&okey, &kv.value)?;
            return Err(ControlError::Taken {
                storage_id,
                partition_id,
                owner: owner.node,
                epoch: owner.epoch,
            });
        }
    }
    Err(ControlError::Contended(
        String::from_utf8_lossy(&ekey).into_owned(),
    ))
}

/// Confirms the ownership still stands: the owner key holds exactly this node and epoch, on
/// this lease. `Lost` otherwise (expired lease, or another owner since).
pub async fn renew(ctl: &Control, own: &Ownership) -> Result<()> {
    let key = owner_key(ctl, own.storage_id, own.partition_id);
    let txn = Txn::when(vec![
        Compare::value(key.clone(), own.record()),
        Compare::lease(key, own.lease),
    ]);
    match ctl.client.txn(&txn).await?.succeeded {
        true => Ok(()),
        false => Err(own.lost()),
    }
}

/// Gives the partition up (the epoch key stays). `Lost` when it was no longer ours.
pub async fn release(ctl: &Control, own: &Ownership) -> Result<()> {
    let key = owner_key(ctl, own.storage_id, own.partition_id);
    let txn = Txn::when(vec![
        Compare::value(key.clone(), own.record()),
        Compare::lease(key.clone(), own.lease),
    ])
    .then(vec![Op::delete(key)]);
    match ctl.client.txn(&txn).await?.succeeded {
        true => Ok(()),
        false => Err(own.lost()),
    }
}

/// What holds while `own` stands: the owner key holds exactly its record, on its lease. Joined
/// to another transaction (a partition move's switch), it makes that apply only while this
/// node still owns the partition at this epoch.
pub fn still_owned(ctl: &Control, own: &Ownership) -> Vec<Compare> {
    let key = owner_key(ctl, own.storage_id, own.partition_id);
    vec![
        Compare::value(key.clone(), own.record()),
        Compare::lease(key, own.lease),
    ]
}

/// Hands out the next epoch of a partition `own` still owns, leaving the owner record as it
/// is: a move opens the partition in its new group with it (fencing any earlier copy there),
/// and anyone taking the partition later gets a newer one still.
pub async fn next_epoch(ctl: &Control, own: &Ownership) -> Result<u64> {
    let ekey = epoch_key(ctl, own.storage_id, own.partition_id);
    for _ in 0..TAKE_ATTEMPTS {
        let (epoch, epoch_rev) = read_epoch(ctl, &ekey).await?;
        let mut compare = still_owned(ctl, own);
        compare.push(Compare::mod_revision(ekey.clone(), epoch_rev));
        let txn = Txn::when(compare).then(vec![Op::put(ekey.clone(), (epoch + 1).to_string(), 0)]);
        if ctl.client.txn(&txn).await?.succeeded {
            return Ok(epoch + 1);
        }
        if renew(ctl, own).await.is_err() {
            return Err(own.lost());
        }
    }
    Err(ControlError::Contended(
        String::from_utf8_lossy(&ekey).into_owned(),
    ))
}

/// The current owner, if any (None once the owner's lease expired).
pub async fn owner_of(ctl: &Control, storage_id: u64, partition_id: u64) -> Result<Option<Owner>> {
    let key = owner_key(ctl, storage_id, partition_id);
    match ctl.client.get(&key).await? {
        Some(kv) => Ok(Some(parse_owner(&key, &kv.value)?)),
        None => Ok(None),
    }
}

/// The last epoch handed out (0: never owned).
pub async fn epoch_of(ctl: &Control, storage_id: u64, partition_id: u64) -> Result<u64> {
    Ok(read_epoch(ctl, &epoch_key(ctl, storage_id, partition_id))
        .await?
        .0)
}

/// At most this many owner records are listed (a bound far above any real partition count).
pub const MAX_OWNERS: usize = 1_000_000;

/// Every current owner by (storage id, partition id), read at one revision: what a node polls
/// to see partitions freed by an expired lease (absent here) and who owns the rest.
pub async fn owners(ctl: &Control) -> Result<std::collections::BTreeMap<(u64, u64), Owner>> {
    let mut out = std::collections::BTreeMap::new();
    for kv in ctl.scan_prefix("owner/", 1000, MAX_OWNERS).await? {
        let key = String::from_utf8_lossy(&kv.key).into_owned();
        let ids = key
            .rsplit('/')
            .take(2)
            .map(str::parse::<u64>)
            .collect::<Vec<_>>();
        let (Some(Ok(pid)), Some(Ok(sid))) = (ids.first().cloned(), ids.get(1).cloned()) else {
            return Err(corrupt(
                &kv.key,
                "expected owner/<storage id>/<partition id>",
            ));
        };
        out.insert((sid, pid), parse_owner(&kv.key, &kv.value)?);
    }
    Ok(out)
}

fn ready_key(ctl: &Control, node: &str) -> Vec<u8> {
    ctl.key(&format!("ready/{node}"))
}

/// Announces that `node`'s ownership loop runs (until its lease ends).
pub async fn mark_ready(ctl: &Control, lease: &NodeLease, node: &str) -> Result<()> {
    ctl.client
        .put(&ready_key(ctl, node), b"", lease.id())
        .await?;
    Ok(())
}

/// The nodes whose ownership loop runs.
pub async fn ready(ctl: &Control) -> Result<std::collections::BTreeSet<String>> {
    let prefix = String::from_utf8_lossy(&ctl.key("ready/")).into_owned();
    let keys = ctl
        .scan_prefix("ready/", 1000, super::members::MAX_MEMBERS)
        .await?;
    Ok((keys.iter())
        .map(|kv| String::from_utf8_lossy(&kv.key)[prefix.len()..].to_string())
        .collect())
}
