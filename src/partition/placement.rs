//! Acting on placement (cluster mode, design decision 5): a statement commits only on the node
//! that owns every physical partition it commits to, and a single-partition read runs on the
//! partition's owner (so the owner's throughput bucket charges it). Checked before anything is
//! read for the statement or committed: the caller answers `StorageError::NotOwner` and the
//! connection forwards the request to the owner (`server::forward`).
//!
//! Why a statement spanning partitions of different owners is refused (Unavailable) instead of
//! forwarded in pieces: a batch must commit atomically, and splitting it per owner needs a
//! distributed commit; until then the client splits such statements by partition key.

use super::handles::{Handles, Placement};
use super::map::PhysicalPartition;
use crate::storage::StorageError;

/// Ok when every partition `(storage id, partition)` is `Local`; otherwise NotOwner naming the
/// one owner they all have (None while any has no live owner: the caller waits and retries),
/// or Unavailable when they have different owners.
pub fn require_local<'a>(
    handles: &Handles,
    parts: impl IntoIterator<Item = (u64, &'a PhysicalPartition)>,
) -> Result<(), StorageError> {
    handles.require_lease()?;
    decide(
        parts
            .into_iter()
            .map(|(sid, p)| (sid, p.id, handles.placement(sid, p))),
    )
}

/// `require_local` over (storage id, partition id, placement) of each partition.
fn decide(placed: impl IntoIterator<Item = (u64, u64, Placement)>) -> Result<(), StorageError> {
    let mut remote: Option<(u64, u64, String)> = None;
    let mut unowned: Option<(u64, u64)> = None;
    let (mut local, mut owners) = (false, 0usize);
    for (sid, pid, placement) in placed {
        match placement {
            Placement::Local => local = true,
            Placement::Unowned => unowned = unowned.or(Some((sid, pid))),
            Placement::Remote(node) => match &remote {
                Some((_, _, n)) if *n == node => {}
                _ => {
                    owners += 1;
                    remote.get_or_insert((sid, pid, node));
                }
            },
        }
    }
    if let Some((storage_id, partition_id)) = unowned {
        return Err(StorageError::NotOwner {
            storage_id,
            partition_id,
            owner: None,
        });
    }
    match remote {
        None => Ok(()),
        Some((storage_id, partition_id, node)) if !local && owners == 1 => {
            Err(StorageError::NotOwner {
                storage_id,
                partition_id,
                owner: Some(node),
            })
        }
        Some(_) => Err(StorageError::Unavailable(
            "the statement touches physical partitions owned by different nodes, which \
             cluster mode does not support yet; split it by partition key"
                .into(),
        )),
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
    fn one_owner_is_named_mixed_owners_are_unavailable() {
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
        for mixed in [
            vec![(1, 1, Local), (1, 2, b())],
            vec![(1, 1, b()), (1, 2, Remote("c".into())), (1, 3, b())],
        ] {
            let e = owner_of(decide(mixed)).unwrap_err();
            assert!(e.contains("owned by different nodes"), "{e}");
        }
    }
}
