//! The ownership loop of a cluster node: which physical partitions this node serves.
//!
//! Every lease/5 (at least 100 ms), on the cluster node's runtime, one round:
//! 1. Lease check: when the lease is no longer valid by this node's clock, or it was replaced
//!    (`lease_generation` moved on: etcd reported it gone), every partition stops being served
//!    at once (its owner keys are gone, or will be before anyone else can take them).
//! 2. Reads the owner records (`cluster::ownership::owners`), then the live members
//!    (`cluster::members::list`) that are ready (their ownership loop runs:
//!    `cluster::ownership::ready`; this node marks itself on its first round) and every
//!    table's map, and computes who should own each partition (`cluster::assignment`, keyed by
//!    end token).
//! 3. Takes each partition assigned here that has no owner: the etcd transaction hands out
//!    epoch + 1, `PartitionStore::open_partition(part, epoch)` then fences the previous owner in
//!    PostgreSQL (it waits for that owner's commits in flight; none lands after it), the
//!    partition's size counters are rebuilt from its own records, this node adopts the
//!    cluster's current schema if it had not yet, and only then is it served
//!    (`Placement::Local`; the throughput bucket starts full).
//! 4. Hands off each partition it owns that is assigned to another ready node: stops serving
//!    first (`Unowned` until the other node took it), then deletes the owner key; the other
//!    node takes it at once (the deletion wakes its loop). Owned partitions gone from the maps
//!    (split parents, dropped tables) are released too.
//! 5. Marks the rest `Remote(owner)` or `Unowned`, and publishes the ring drivers are shown:
//!    the ready members with their assigned end tokens (`ClusterNode::publish_ring`, for
//!    system.local / system.peers and topology events; `cluster::ring` says why assigned).
//!
//! A round also starts at once when an owner key changes (an etcd watch on `owner/`): a dead
//! node's partitions are taken as soon as etcd expires its lease, a handed-off one as soon as
//! its old owner released it, and every node sees a new owner (`Remote(node)`, where requests
//! are forwarded) as soon as it took it, instead of up to a round interval later. Wake-ups
//! coalesce (`Notify` keeps one), so a burst of changes costs one or two rounds. A split
//! wakes it too (`Handles::ownership_wake`): its children are taken at once.
//!
//! Blocking work (PostgreSQL) runs on tokio's blocking pool, never on the runtime's one worker
//! that renews the lease. A failure in a round is logged and the next round tries again.

use super::handles::{Handles, Placement};
use super::map::{PartitionMaps, PhysicalPartition};
use crate::cluster::{assignment, ownership, ClusterNode, ControlError, Ownership};
use crate::storage::handle::PartitionHandle;
use crate::storage::StorageError;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// At most this many partitions are being taken at once: their etcd and PostgreSQL round
/// trips overlap, so a dead node's share of many partitions is not taken one after another.
const TAKES_AT_ONCE: usize = 16;

/// A partition this node took: its etcd record and the owner handle opened with its epoch.
pub(super) struct Owned {
    pub(super) own: Ownership,
    pub(super) handle: Arc<dyn PartitionHandle>,
    /// The map's object for the partition when it was taken or last counted: a map reloaded
    /// from etcd may bring a new one, with fresh (zero) counters.
    pub(super) part: Arc<PhysicalPartition>,
}

struct Loop {
    node: Weak<ClusterNode>,
    maps: Weak<PartitionMaps>,
    handles: Weak<Handles>,
    generation: u64,
    owned: HashMap<(u64, u64), Owned>,
    /// The per-group bytes last published (`cluster::groups`), with the lease generation and
    /// when: published again when they change, at most every [`GROUP_BYTES_EVERY`].
    group_bytes: Option<(u64, std::time::Instant, BTreeMap<String, i64>)>,
    /// Partition moves between storage groups (`move_runner.rs`).
    moves: super::move_runner::Runner,
}

/// Group bytes change with every write; placement needs them only roughly.
const GROUP_BYTES_EVERY: Duration = Duration::from_secs(2);

/// Starts the loop on the node's runtime; it ends when the node, the maps or the handles are
/// dropped.
pub fn start(node: &Arc<ClusterNode>, maps: &Arc<PartitionMaps>, handles: &Arc<Handles>) {
    let l = Loop {
        node: Arc::downgrade(node),
        maps: Arc::downgrade(maps),
        handles: Arc::downgrade(handles),
        generation: node.lease_generation(),
        owned: HashMap::new(),
        group_bytes: None,
        moves: Default::default(),
    };
    let wake = Arc::clone(handles.ownership_wake());
    node.spawn(watch_releases(Arc::downgrade(node), Arc::clone(&wake)));
    node.spawn(run(l, wake));
}

/// Wakes the loop whenever an owner key changes (see the module doc). A broken watch is
/// opened again after a pause; the rounds go on meanwhile. Ends with the node.
async fn watch_releases(node: Weak<ClusterNode>, wake: Arc<tokio::sync::Notify>) {
    loop {
        let Some(n) = node.upgrade() else { return };
        let (client, prefix) = (n.control().client.clone(), n.control().key("owner/"));
        drop(n);
        let end = crate::etcd::prefix_end(&prefix);
        match client.watch(&prefix, Some(&end), 0).await {
            Ok(mut w) => {
                while w.next().await.is_ok() {
                    wake.notify_one();
                }
            }
            Err(e) => tracing::debug!(error = %e, "watching partition owners failed; retrying"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A fifth of the lease: a partition freed by an expired lease is taken within a fifth of a
/// lease of its owner key's deletion.
fn round_interval(lease_ms: u64) -> Duration {
    Duration::from_millis((lease_ms / 5).max(100))
}

async fn run(mut l: Loop, wake: Arc<tokio::sync::Notify>) {
    loop {
        let (Some(node), Some(maps), Some(handles)) =
            (l.node.upgrade(), l.maps.upgrade(), l.handles.upgrade())
        else {
            return;
        };
        let interval = round_interval(node.lease_ms());
        if let Err(e) = l.round(&node, &maps, &handles).await {
            tracing::warn!(error = %e, "partition ownership round failed; retrying");
        }
        drop((node, maps, handles));
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = wake.notified() => {}
        }
    }
}

impl Loop {
    async fn round(
        &mut self,
        node: &Arc<ClusterNode>,
        maps: &Arc<PartitionMaps>,
        handles: &Arc<Handles>,
    ) -> Result<(), String> {
        let lease = node.lease();
        let generation = node.lease_generation();
        if generation != self.generation || !lease.is_valid() {
            self.lose_all(maps, handles);
            self.generation = generation;
            if !lease.is_valid() {
                return Ok(());
            }
        }
        // Owners before members: a lease that expires in between leaves its owner records
        // here (served as Remote this round) but not its member, and its deletion wakes the
        // next round. Members are listed afresh, not taken from the node's cache (refreshed
        // every lease/5), so that a dead node's partitions are reassigned at once.
        let owners = ownership::owners(node.control())
            .await
            .map_err(|e| e.to_string())?;
        let members = crate::cluster::members::list(node.control())
            .await
            .map_err(|e| e.to_string())?;
        let ready = self.ready(node, &lease).await?;
        let tables = maps.all();
        // The initial layout's end tokens count even before a table uses them: every new
        // table starts with those ranges, so their owners are known (and published to drivers)
        // before the table exists, and drivers route its rows well from its first write.
        let ends: Vec<i64> = (tables.iter())
            .flat_map(|(_, m)| m.parts.iter().map(|p| p.end))
            .chain(maps.initial_end_tokens())
            .collect();
        let test_owner = std::env::var("RINGGATE_TEST_PLACEMENT_OWNER").ok();
        let names: Vec<&str> = (members.keys())
            .filter(|m| ready.contains(*m))
            // Test hook (`handles::set_test_placement_owner`): that node owns everything.
            .filter(|m| {
                test_owner
                    .as_deref()
                    .is_none_or(|o| o.is_empty() || o == m.as_str())
            })
            .map(String::as_str)
            .collect();
        let want = assignment::assign(&ends, &names);
        self.release_gone(node, &tables).await;
        let me = node.name();
        let mut to_take = Vec::new();
        for (sid, map) in &tables {
            for p in &map.parts {
                let served = handles.served(*sid, p).map_err(|e| e.to_string())?;
                let owner = owners.get(&(*sid, p.id));
                let assigned = want.get(&p.end).copied();
                if self.owned.contains_key(&(*sid, p.id)) {
                    self.keep_or_hand_off(node, *sid, p, owner, assigned).await;
                    continue;
                }
                match owner {
                    Some(o) if o.node != me => served.elsewhere(Placement::Remote(o.node.clone())),
                    Some(o) => {
                        served.elsewhere(Placement::Unowned);
                        self.release_stale(node, *sid, p.id, o.epoch).await;
                    }
                    None if assigned == Some(me) => to_take.push((*sid, Arc::clone(p))),
                    None => served.elsewhere(Placement::Unowned),
                }
            }
        }
        self.take_all(node, maps, handles, to_take).await;
        if let Some(a) = self.moves.round(node, maps, handles, &self.owned).await {
            self.apply(node, a).await;
        }
        self.publish(node, &members, &ready, &want);
        self.publish_group_bytes(node, generation).await
    }

    /// Publishes the bytes of the partitions this node owns per storage group (their owner
    /// keeps exact counters), for placement and `system_views.storage_groups`.
    async fn publish_group_bytes(
        &mut self,
        node: &ClusterNode,
        generation: u64,
    ) -> Result<(), String> {
        let mut bytes: BTreeMap<String, i64> = BTreeMap::new();
        for o in self.owned.values() {
            let b = o
                .part
                .stats
                .bytes
                .load(std::sync::atomic::Ordering::Relaxed);
            *bytes.entry(o.part.group_name().to_string()).or_insert(0) += b.max(0);
        }
        let fresh = match &self.group_bytes {
            Some((g, at, last)) => {
                *g == generation && (*last == bytes || at.elapsed() < GROUP_BYTES_EVERY)
            }
            None => false,
        };
        if fresh {
            return Ok(());
        }
        let lease = node.lease().id();
        crate::cluster::groups::publish_bytes(node.control(), lease, node.name(), &bytes)
            .await
            .map_err(|e| e.to_string())?;
        self.group_bytes = Some((generation, std::time::Instant::now(), bytes));
        Ok(())
    }

    /// What a move that ended changes (`move_runner.rs`).
    async fn apply(&mut self, node: &ClusterNode, a: super::move_runner::Apply) {
        use super::move_runner::Apply;
        match a {
            Apply::Handle(key, h) => {
                if let Some(o) = self.owned.get_mut(&key) {
                    o.handle = h;
                }
            }
            Apply::GiveUp(key) => {
                let Some(o) = self.owned.remove(&key) else {
                    return;
                };
                if let Some(s) = o.part.stats.handle.served() {
                    s.elsewhere(Placement::Unowned);
                }
                let _ = ownership::release(node.control(), &o.own).await;
                tracing::warn!(
                    storage_id = key.0,
                    partition = key.1,
                    "gave a partition up: its move's outcome is unknown; its next owner reads the map"
                );
            }
        }
    }

    /// Takes the partitions, [`TAKES_AT_ONCE`] at a time.
    async fn take_all(
        &mut self,
        node: &Arc<ClusterNode>,
        maps: &Arc<PartitionMaps>,
        handles: &Arc<Handles>,
        mut todo: Vec<(u64, Arc<PhysicalPartition>)>,
    ) {
        let mut running = tokio::task::JoinSet::new();
        loop {
            while running.len() < TAKES_AT_ONCE {
                let Some((sid, p)) = todo.pop() else { break };
                let (n, m, h) = (Arc::clone(node), Arc::clone(maps), Arc::clone(handles));
                running.spawn(take(n, m, h, sid, p));
            }
            match running.join_next().await {
                Some(Ok(Some(o))) => {
                    self.owned.insert((o.own.storage_id, o.own.partition_id), o);
                }
                Some(_) => {}
                None => return,
            }
        }
    }

    /// The nodes whose loops run (`cluster::ownership::ready`), this one included: it marks
    /// itself ready when it is not listed (its first round, or a new lease).
    async fn ready(
        &self,
        node: &ClusterNode,
        lease: &crate::cluster::NodeLease,
    ) -> Result<std::collections::BTreeSet<String>, String> {
        let mut ready = ownership::ready(node.control())
            .await
            .map_err(|e| e.to_string())?;
        if !ready.contains(node.name()) {
            ownership::mark_ready(node.control(), lease, node.name())
                .await
                .map_err(|e| e.to_string())?;
            ready.insert(node.name().to_string());
        }
        Ok(ready)
    }

    /// Stops serving everything (the lease is gone): commits through the owner handles fail
    /// from now on, before any other node can hold the partitions.
    fn lose_all(&mut self, maps: &PartitionMaps, handles: &Handles) {
        if self.owned.is_empty() {
            return;
        }
        tracing::warn!(
            partitions = self.owned.len(),
            "this node's lease is lost: it stops serving every partition it owned"
        );
        for (sid, map) in maps.all() {
            for p in &map.parts {
                if self.owned.contains_key(&(sid, p.id)) {
                    if let Ok(s) = handles.served(sid, p) {
                        s.elsewhere(Placement::Unowned);
                    }
                }
            }
        }
        self.owned.clear();
    }

    /// A record naming this node for a partition it does not serve: left by a round that
    /// dropped everything while the lease was only late (still alive in etcd, and renewed
    /// again since), so nobody else could ever take it. Deleted if it is on the current lease
    /// (no-op otherwise: a record on a lease etcd dropped is gone already); the assigned node
    /// then takes it with a newer epoch.
    async fn release_stale(&self, node: &ClusterNode, sid: u64, pid: u64, epoch: u64) {
        let stale = Ownership {
            storage_id: sid,
            partition_id: pid,
            node: node.name().to_string(),
            epoch,
            lease: node.lease().id(),
        };
        if ownership::release(node.control(), &stale).await.is_ok() {
            tracing::info!(
                storage_id = sid,
                partition = pid,
                epoch,
                "released a stale ownership record"
            );
        }
    }

    /// Releases owned partitions no longer in any map (split parents, dropped tables).
    async fn release_gone(
        &mut self,
        node: &ClusterNode,
        tables: &[(u64, Arc<super::map::PartitionMap>)],
    ) {
        let live: std::collections::HashSet<(u64, u64)> = (tables.iter())
            .flat_map(|(sid, m)| m.parts.iter().map(move |p| (*sid, p.id)))
            .collect();
        let gone: Vec<(u64, u64)> = (self.owned.keys())
            .filter(|k| !live.contains(k))
            .copied()
            .collect();
        for key in gone {
            if let Some(o) = self.owned.remove(&key) {
                let _ = ownership::release(node.control(), &o.own).await;
            }
        }
    }

    /// An owned partition: still ours in etcd (else it is lost), and still assigned here (else
    /// handed off to the node it is assigned to, which is live and ready: the assignment only
    /// names such members).
    async fn keep_or_hand_off(
        &mut self,
        node: &ClusterNode,
        sid: u64,
        p: &Arc<PhysicalPartition>,
        owner: Option<&crate::cluster::Owner>,
        assigned: Option<&str>,
    ) {
        let key = (sid, p.id);
        let Some(mine) = self.owned.get(&key) else {
            return;
        };
        let Some(served) = p.stats.handle.served() else {
            return;
        };
        let still = owner.is_some_and(|o| o.node == node.name() && o.epoch == mine.own.epoch);
        if !still {
            tracing::warn!(
                storage_id = sid,
                partition = p.id,
                "partition ownership lost"
            );
            let to = owner.map_or(Placement::Unowned, |o| Placement::Remote(o.node.clone()));
            served.elsewhere(to);
            self.owned.remove(&key);
            return;
        }
        match assigned {
            Some(a) if a != node.name() => {
                // Unowned, not Remote(a), until a has taken it (the owner key's change wakes
                // the next round): a request sent to a before then would find it unowned
                // there, while here it waits and retries (server/ forwarding).
                served.elsewhere(Placement::Unowned);
                let o = self.owned.remove(&key).expect("checked above");
                match ownership::release(node.control(), &o.own).await {
                    Ok(()) => tracing::info!(
                        storage_id = sid,
                        partition = p.id,
                        to = a,
                        "partition handed off"
                    ),
                    Err(e) => {
                        tracing::warn!(storage_id = sid, partition = p.id, error = %e, "releasing a partition failed")
                    }
                }
            }
            // A map reloaded from etcd brings new partition objects: count and serve them too.
            // A partition moved to another group is a new object too: its handle is the one
            // the move switched the old object to (`moves.rs`); until the switch is seen
            // there, it is not served.
            _ if !Arc::ptr_eq(&mine.part, p) => {
                let old = mine.part.stats.handle.served().cloned();
                let switched = old.as_ref().and_then(|s| s.owner());
                let h = switched.unwrap_or_else(|| Arc::clone(&mine.handle));
                if h.partition()
                    .group
                    .as_deref()
                    .unwrap_or(crate::cluster::groups::DEFAULT_GROUP)
                    != p.group_name()
                {
                    return;
                }
                if let Some(mine) = self.owned.get_mut(&key) {
                    mine.handle = Arc::clone(&h);
                }
                let part = Arc::clone(p);
                let counted = crate::storage::blocking::spawn(move || {
                    // Commits still routed through the old object (requests that read the map
                    // before it changed) finish first and later ones are refused (they route
                    // again through the new map), so the count below sees all of them.
                    if let Some(old) = old {
                        let _no_commit = old.freeze();
                        old.elsewhere(Placement::Unowned);
                    }
                    super::sizes::rebuild_partition(&*h, sid, &part)
                })
                .await;
                if let (Ok(Ok(())), Some(mine)) = (counted, self.owned.get_mut(&key)) {
                    served.serve(Arc::clone(&mine.handle));
                    mine.part = Arc::clone(p);
                }
            }
            _ => {}
        }
    }

    /// The ring drivers are shown (`cluster::ring`): the ready members, each with the end
    /// tokens assigned to it this round (every table's partitions and the initial layout's).
    fn publish(
        &self,
        node: &ClusterNode,
        members: &BTreeMap<String, crate::cluster::Member>,
        ready: &std::collections::BTreeSet<String>,
        want: &BTreeMap<i64, &str>,
    ) {
        let mut ring: crate::cluster::Ring = (members.iter())
            .filter(|(name, _)| ready.contains(*name))
            .map(|(name, m)| {
                let member = crate::cluster::RingMember {
                    member: m.clone(),
                    tokens: Vec::new(),
                };
                (name.clone(), member)
            })
            .collect();
        for (end, who) in want {
            if let Some(m) = ring.get_mut(*who) {
                m.tokens.push(*end);
            }
        }
        node.publish_ring(ring);
    }
}

/// Takes an unowned partition assigned here (step 3 of the module doc); what this node then
/// owns, or None (taken by another node first, or failed: logged).
async fn take(
    node: Arc<ClusterNode>,
    maps: Arc<PartitionMaps>,
    handles: Arc<Handles>,
    sid: u64,
    p: Arc<PhysicalPartition>,
) -> Option<Owned> {
    let lease = node.lease();
    let taken = ownership::take(node.control(), &lease, node.name(), sid, p.id).await;
    let own = match taken {
        Ok(own) => own,
        Err(ControlError::Taken { owner, .. }) => {
            if let Some(s) = p.stats.handle.served() {
                s.elsewhere(Placement::Remote(owner));
            }
            return None;
        }
        Err(e) => {
            tracing::warn!(storage_id = sid, partition = p.id, error = %e, "taking a partition failed");
            return None;
        }
    };
    let (h, part, epoch) = (handles, Arc::clone(&p), own.epoch);
    let opened = crate::storage::blocking::spawn(move || {
        current_group(&maps, sid, &part)?;
        open_and_count(&h, sid, &part, epoch)
    })
    .await;
    let handle = match opened {
        Ok(Ok(handle)) if lease.is_valid() => handle,
        other => {
            let e = match other {
                Ok(Err(e)) => e.to_string(),
                Err(e) => e.to_string(),
                Ok(Ok(_)) => "the lease expired meanwhile".into(),
            };
            tracing::warn!(storage_id = sid, partition = p.id, error = %e, "opening a taken partition failed; releasing it");
            let _ = ownership::release(node.control(), &own).await;
            return None;
        }
    };
    if let Some(s) = p.stats.handle.served() {
        s.serve(Arc::clone(&handle));
    }
    tracing::info!(storage_id = sid, partition = p.id, epoch, "partition taken");
    Some(Owned {
        own,
        handle,
        part: p,
    })
}

/// After a take: the maps followed (a move's switch changed the map before its owner's
/// record could go, so it is seen now), and the partition still in the group `p` names;
/// otherwise the take is given up (the next round sees the new map's object).
fn current_group(
    maps: &PartitionMaps,
    sid: u64,
    p: &PhysicalPartition,
) -> Result<(), StorageError> {
    maps.follow()?;
    let now = maps.get(sid).and_then(|m| {
        let q = m.parts.iter().find(|q| q.id == p.id)?;
        Some(q.group_name().to_string())
    });
    match now {
        Some(g) if g == p.group_name() => Ok(()),
        _ => Err(StorageError::Unavailable(format!(
            "partition {} of table storage {sid} moved or changed meanwhile",
            p.id
        ))),
    }
}

/// Opens the partition as owner `epoch` (fencing the previous owner), counts its data and
/// brings this node's schema up to the cluster's (after the take: every index the previous
/// owner built entries for is adopted before this node writes; `Handles::catch_up_schema`).
fn open_and_count(
    handles: &Handles,
    sid: u64,
    p: &PhysicalPartition,
    epoch: u64,
) -> Result<Arc<dyn PartitionHandle>, StorageError> {
    let handle = handles.open_owner(p.reference(sid), epoch)?;
    super::sizes::rebuild_partition(&*handle, sid, p)?;
    handles.catch_up_schema()?;
    Ok(handle)
}
