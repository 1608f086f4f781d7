//! The ownership loop's part in partition moves (`moves.rs`): every round, at most one move or
//! cleanup runs per node (each on a blocking thread). A round first collects the one that
//! finished and says what the loop must change about the partition (its owner handle is now
//! the target group's; or, when a switch's outcome stayed unknown, give the partition up),
//! then starts the next piece of work for a partition this node owns: a copy a finished move
//! left behind, once [`CLEANUP_GRACE_MS`] passed (other nodes may read it until they followed
//! the new map), before a requested move (`cluster::moves` records, read from etcd each round).

use super::handles::Handles;
use super::map::PartitionMaps;
use super::moves::{Move, Moved};
use super::ownership::Owned;
use crate::cluster::moves::{self as records, Outcome};
use crate::cluster::ClusterNode;
use crate::storage::handle::PartitionHandle;
use std::collections::HashMap;
use std::sync::Arc;

/// A source group's copy is deleted this long after the switch: every node follows the new
/// map within its follower's interval (200 ms) unless it is cut off, and then its lease runs
/// out first.
pub const CLEANUP_GRACE_MS: u64 = 5_000;

/// What the ownership loop must change after a move ended.
pub enum Apply {
    /// The partition's owner handle is now this one (the target group's).
    Handle((u64, u64), Arc<dyn PartitionHandle>),
    /// Give the partition up (release it): the move's switch outcome is unknown.
    GiveUp((u64, u64)),
}

enum Work {
    Move { to: String },
    Cleanup { group: String },
}

enum Done {
    Moved(Moved),
    Cleaned(Result<u64, String>),
}

struct Running {
    key: (u64, u64),
    from: String,
    work: Work,
    task: tokio::task::JoinHandle<Done>,
}

#[derive(Default)]
pub struct Runner {
    running: Option<Running>,
}

impl Runner {
    /// One round (see the module doc); errors reading etcd are logged and retried next round.
    pub(super) async fn round(
        &mut self,
        node: &Arc<ClusterNode>,
        maps: &Arc<PartitionMaps>,
        handles: &Arc<Handles>,
        owned: &HashMap<(u64, u64), Owned>,
    ) -> Option<Apply> {
        let mut apply = None;
        if let Some(r) = self.running.take() {
            if !r.task.is_finished() {
                self.running = Some(r);
                return None;
            }
            let (key, from, work) = (r.key, r.from, r.work);
            match r.task.await {
                Ok(done) => apply = finished(node, key, &from, work, done).await,
                Err(e) => tracing::warn!(error = %e, "a partition move task failed"),
            }
        }
        if let Err(e) = self.start_next(node, maps, handles, owned).await {
            tracing::debug!(error = %e, "reading partition move records failed; next round");
        }
        apply
    }

    async fn start_next(
        &mut self,
        node: &Arc<ClusterNode>,
        maps: &Arc<PartitionMaps>,
        handles: &Arc<Handles>,
        owned: &HashMap<(u64, u64), Owned>,
    ) -> Result<(), crate::cluster::ControlError> {
        let ctl = node.control();
        let now = records::now_ms();
        for (sid, pid, group, c) in records::cleanups(ctl).await? {
            let Some(o) = owned.get(&(sid, pid)) else {
                continue;
            };
            if o.part.group_name() == group {
                // Moved back meanwhile: that move replaced the old copy with the live one.
                records::cleaned(ctl, sid, pid, &group).await?;
            } else if now.saturating_sub(c.since_ms) >= CLEANUP_GRACE_MS {
                self.start(node, maps, handles, (sid, o), Work::Cleanup { group });
                return Ok(());
            }
        }
        for (sid, pid, req) in records::requests(ctl).await? {
            let Some(o) = owned.get(&(sid, pid)) else {
                continue;
            };
            if o.part.group_name() == req.to {
                let outcome = outcome(o.part.group_name(), &req.to, "already in that group");
                records::finish(ctl, sid, pid, &outcome).await?;
                continue;
            }
            self.start(node, maps, handles, (sid, o), Work::Move { to: req.to });
            return Ok(());
        }
        Ok(())
    }

    fn start(
        &mut self,
        node: &Arc<ClusterNode>,
        maps: &Arc<PartitionMaps>,
        handles: &Arc<Handles>,
        (sid, o): (u64, &Owned),
        work: Work,
    ) {
        let m = Move {
            node: Arc::clone(node),
            maps: Arc::clone(maps),
            handles: Arc::clone(handles),
            storage_id: sid,
            part: Arc::clone(&o.part),
            own: o.own.clone(),
            to: match &work {
                Work::Move { to } => to.clone(),
                Work::Cleanup { group } => group.clone(),
            },
        };
        let cleanup = matches!(work, Work::Cleanup { .. });
        let wake = Arc::clone(handles.ownership_wake());
        let task = crate::storage::blocking::spawn(move || {
            let done = match cleanup {
                true => Done::Cleaned(super::moves::cleanup(&m, &m.to)),
                false => Done::Moved(m.run()),
            };
            wake.notify_one();
            done
        });
        self.running = Some(Running {
            key: (sid, o.part.id),
            from: o.part.group_name().to_string(),
            work,
            task,
        });
    }
}

fn outcome(from: &str, to: &str, detail: &str) -> Outcome {
    Outcome {
        from: from.to_string(),
        to: to.to_string(),
        moved: false,
        detail: detail.to_string(),
        finished_ms: records::now_ms(),
    }
}

/// Records how the work ended; what the loop must change.
async fn finished(
    node: &ClusterNode,
    (sid, pid): (u64, u64),
    from: &str,
    work: Work,
    done: Done,
) -> Option<Apply> {
    let ctl = node.control();
    let (to, moved) = match (work, done) {
        (Work::Cleanup { group }, Done::Cleaned(r)) => {
            match r {
                Ok(n) => {
                    tracing::info!(storage_id = sid, partition = pid, group = %group, records = n, "a moved partition's old copy is deleted");
                    let _ = records::cleaned(ctl, sid, pid, &group).await;
                }
                Err(e) => {
                    tracing::warn!(storage_id = sid, partition = pid, group = %group, error = %e, "deleting a moved partition's old copy failed; retrying later")
                }
            }
            return None;
        }
        (Work::Move { to }, Done::Moved(m)) => (to, m),
        _ => return None,
    };
    let (detail, apply) = match moved {
        Moved::Switched(h) => return Some(Apply::Handle((sid, pid), h)),
        Moved::Failed(detail) => (detail, None),
        Moved::Unknown(detail) => (detail, Some(Apply::GiveUp((sid, pid)))),
    };
    tracing::warn!(storage_id = sid, partition = pid, to = %to, detail = %detail, "partition move failed");
    if let Err(e) = records::finish(ctl, sid, pid, &outcome(from, &to, &detail)).await {
        tracing::warn!(error = %e, "recording a failed partition move failed");
    }
    apply
}
