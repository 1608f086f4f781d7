//! Ownership of a physical partition: contenders racing for it (exactly one wins each round,
//! epochs strictly increase), and fencing of a node whose lease expired (it cannot renew its
//! old epoch; the next owner's epoch is higher).

use super::support::{eventually, lease, Etcd, TTL_MS};
use ringgate::cluster::{ownership, ControlError};
use std::time::Duration;

const SID: u64 = 7;
const PID: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contenders_race_one_winner_per_round_epochs_increase() {
    let Some(etcd) = Etcd::start("contenders_race").await else {
        return;
    };
    // Two nodes, each with its own client and lease.
    let (ca, cb) = (etcd.control("rg/"), etcd.control("rg/"));
    let (la, lb) = (lease(&ca).await, lease(&cb).await);
    let mut last_epoch = 0;
    let mut wins = [0; 2];
    for round in 0..100 {
        let (ra, rb) = tokio::join!(
            ownership::take(&ca, &la, "a", SID, PID),
            ownership::take(&cb, &lb, "b", SID, PID)
        );
        let (winner, loser, w) = match (ra, rb) {
            (Ok(w), Err(l)) => (w, l, 0),
            (Err(l), Ok(w)) => (w, l, 1),
            other => panic!("round {round}: not exactly one winner: {other:?}"),
        };
        wins[w] += 1;
        match loser {
            ControlError::Taken { owner, epoch, .. } => {
                assert_eq!(
                    (owner.as_str(), epoch),
                    (winner.node.as_str(), winner.epoch)
                );
            }
            e => panic!("round {round}: the loser got {e:?}, not Taken"),
        }
        assert!(
            winner.epoch > last_epoch,
            "round {round}: epoch {} after {last_epoch}",
            winner.epoch
        );
        last_epoch = winner.epoch;
        let owner = ownership::owner_of(&ca, SID, PID).await.unwrap().unwrap();
        assert_eq!(
            (owner.node, owner.epoch),
            (winner.node.clone(), winner.epoch)
        );
        ownership::release(&ca, &winner).await.unwrap();
    }
    assert_eq!(
        ownership::epoch_of(&ca, SID, PID).await.unwrap(),
        last_epoch
    );
    eprintln!("contenders_race: wins a/b = {wins:?}, last epoch {last_epoch}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_owner_cannot_renew_its_old_epoch() {
    let Some(etcd) = Etcd::start("expired_owner_cannot_renew").await else {
        return;
    };
    let (ca, cb) = (etcd.control("rg/"), etcd.control("rg/"));
    let (la, lb) = (lease(&ca).await, lease(&cb).await);
    let old = ownership::take(&ca, &la, "a", SID, PID).await.unwrap();
    ownership::renew(&ca, &old).await.unwrap();
    assert!(matches!(
        ownership::take(&cb, &lb, "b", SID, PID).await,
        Err(ControlError::Taken { epoch, .. }) if epoch == old.epoch
    ));

    // Another partition owned by b stays listed throughout.
    let other = ownership::take(&cb, &lb, "b", SID, PID + 1).await.unwrap();
    let listed = ownership::owners(&cb).await.unwrap();
    assert_eq!(
        listed.keys().collect::<Vec<_>>(),
        [&(SID, PID), &(SID, PID + 1)]
    );
    assert_eq!(listed[&(SID, PID)].node, "a");

    // a stops renewing (paused, partitioned): b observes the ownership vanish.
    la.stop_keepalive();
    let freed = eventually(Duration::from_millis(10 * TTL_MS), || async {
        ownership::owner_of(&cb, SID, PID).await.unwrap().is_none()
    })
    .await;
    assert!(freed, "a's ownership outlived its lease");
    let listed = ownership::owners(&cb).await.unwrap();
    assert_eq!(listed.keys().collect::<Vec<_>>(), [&(SID, PID + 1)]);
    assert_eq!(listed[&(SID, PID + 1)].epoch, other.epoch);
    let lost = ControlError::Lost {
        storage_id: SID,
        partition_id: PID,
        epoch: old.epoch,
    };
    assert_eq!(ownership::renew(&ca, &old).await, Err(lost.clone()));

    let b = ownership::take(&cb, &lb, "b", SID, PID).await.unwrap();
    assert_eq!(b.epoch, old.epoch + 1);
    // a comes back with a new lease: it cannot take the partition while b holds it, and its
    // old ownership stays lost even after b leaves; taking again gives a newer epoch.
    let la2 = lease(&ca).await;
    assert!(matches!(
        ownership::take(&ca, &la2, "a", SID, PID).await,
        Err(ControlError::Taken { .. })
    ));
    ownership::release(&cb, &b).await.unwrap();
    assert_eq!(ownership::renew(&ca, &old).await, Err(lost.clone()));
    assert_eq!(ownership::release(&ca, &old).await, Err(lost));
    let again = ownership::take(&ca, &la2, "a", SID, PID).await.unwrap();
    assert_eq!(again.epoch, old.epoch + 2);
    // The old record's value and the new one differ only by epoch and lease: renewing the
    // old one still fails.
    assert!(ownership::renew(&ca, &old).await.is_err());
    ownership::renew(&ca, &again).await.unwrap();
}
