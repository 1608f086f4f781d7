//! Acting on placement (cluster mode, design decision 5): a statement commits only on the node
//! that owns every physical partition it commits to, and a single-partition read runs on the
//! partition's owner (so the owner's throughput bucket charges it). Checked before anything is
//! read for the statement or committed: the caller answers `StorageError::NotOwner` and the
//! connection forwards the request to the owner (`server::forward`).
//!
//! A statement spanning partitions of different owners answers `StorageError::Spans` naming
//! every partition's owner: the connection sends the request to each owner with the
//! partitions it applies (`server::spanning`; LOGGED batches through the cluster batch log,
//! `server::batchlog`).

use super::handles::{Handles, Placement};
use super::map::PhysicalPartition;
use crate::storage::StorageError;

/// Ok when every partition `(storage id, partition)` is `Local`; otherwise NotOwner naming the
/// one owner they all have (None while any has no live owner: the caller waits and retries),
/// or Spans naming each one's owner when they have different owners.
pub fn require_local<'a>(
    handles: &Handles,
    parts: impl IntoIterator<Item = (u64, &'a PhysicalPartition)> + Clone,
) -> Result<(), StorageError> {
    handles.require_lease()?;
    // Every partition local (always, on a single node): no list of owners to build (it was
    // 2% of a point write, checked twice).
    let local = |(sid, p): (u64, &PhysicalPartition)| handles.placement(sid, p) == Placement::Local;
    if parts.clone().into_iter().all(local) {
        return Ok(());
    }
    decide(
        parts
            .into_iter()
            .map(|(sid, p)| (sid, p.id, handles.placement(sid, p))),
    )
}

/// Spans naming every partition's owner (None: this node), whoever they are, or NotOwner with
/// no owner while any has none: a write that must go through the cluster batch log.
pub fn require_one_place<'a>(
    handles: &Handles,
    parts: impl IntoIterator<Item = (u64, &'a PhysicalPartition)>,
) -> Result<(), StorageError> {
    handles.require_lease()?;
    let placed = parts
        .into_iter()
        .map(|(sid, p)| (sid, p.id, handles.placement(sid, p)));
    Err(StorageError::Spans {
        parts: owners(placed)?,
    })
}

/// (storage id, partition id, owner: None for this node) of each partition; NotOwner with no
/// owner while any has no live owner (the caller waits and retries).
fn owners(
    placed: impl IntoIterator<Item = (u64, u64, Placement)>,
) -> Result<Vec<(u64, u64, Option<String>)>, StorageError> {
    let mut parts = Vec::new();
    for (sid, pid, placement) in placed {
        match placement {
            Placement::Local => parts.push((sid, pid, None)),
            Placement::Remote(node) => parts.push((sid, pid, Some(node))),
            Placement::Unowned => {
                return Err(StorageError::NotOwner {
                    storage_id: sid,
                    partition_id: pid,
                    owner: None,
                })
            }
        }
    }
    Ok(parts)
}

/// `require_local` over (storage id, partition id, placement) of each partition.
fn decide(placed: impl IntoIterator<Item = (u64, u64, Placement)>) -> Result<(), StorageError> {
    let parts = owners(placed)?;
    let Some((storage_id, partition_id, first)) = parts.first().cloned() else {
        return Ok(());
    };
    if parts.iter().any(|(_, _, o)| *o != first) {
        return Err(StorageError::Spans { parts });
    }
    match first {
        None => Ok(()),
        Some(node) => Err(StorageError::NotOwner {
            storage_id,
            partition_id,
            owner: Some(node),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Placement::*;

    fn owner_of(r: Result<(), StorageError>) -> Result<Option<String>, String> {
        match r {
            Ok(()) => Err("local".into()),
            Err(StorageError::NotOwner { owner, .. }) => Ok(owner),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn one_owner_is_named_mixed_owners_are_listed() {
        assert!(decide([(1, 1, Local), (2, 5, Local)]).is_ok());
        assert!(decide(Vec::new()).is_ok());
        let b = || Remote("b".to_string());
        assert_eq!(
            owner_of(decide([(1, 1, b()), (1, 2, b())])),
            Ok(Some("b".into()))
        );
        // Unowned anywhere: wait for the takeover (owner None), whatever the others are.
        assert_eq!(owner_of(decide([(1, 1, b()), (1, 2, Unowned)])), Ok(None));
        assert_eq!(owner_of(decide([(1, 1, Local), (1, 2, Unowned)])), Ok(None));
        let spans = |r| match r {
            Err(StorageError::Spans { parts }) => parts,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            spans(decide([(1, 1, Local), (1, 2, b())])),
            vec![(1, 1, None), (1, 2, Some("b".into()))]
        );
        let c = Remote("c".into());
        assert_eq!(
            spans(decide([(1, 1, b()), (2, 2, c), (1, 3, b())])),
            vec![
                (1, 1, Some("b".into())),
                (2, 2, Some("c".into())),
                (1, 3, Some("b".into()))
            ]
        );
    }
}
