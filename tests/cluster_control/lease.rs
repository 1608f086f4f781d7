//! A kept-alive lease keeps its keys well past its TTL; once renewal stops, etcd deletes them
//! after the TTL and the holder's own view turns invalid.

use super::support::{eventually, lease, Etcd, TTL_MS};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_keeps_keys_past_the_ttl() {
    let Some(etcd) = Etcd::start("keepalive_keeps_keys_past_the_ttl").await else {
        return;
    };
    let ctl = etcd.control("t/");
    let lease = lease(&ctl).await;
    ctl.client.put(b"t/k", b"v", lease.id()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(3 * lease.ttl_ms())).await;
    let kv = ctl
        .client
        .get(b"t/k")
        .await
        .unwrap()
        .expect("the key outlives three TTLs");
    assert_eq!(kv.lease, lease.id());
    assert!(lease.is_valid());
    assert!(ctl
        .client
        .lease_time_to_live(lease.id())
        .await
        .unwrap()
        .is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_keepalive_lets_keys_vanish() {
    let Some(etcd) = Etcd::start("stopped_keepalive_lets_keys_vanish").await else {
        return;
    };
    let ctl = etcd.control("t/");
    let lease = lease(&ctl).await;
    ctl.client.put(b"t/k", b"v", lease.id()).await.unwrap();
    ctl.client.put(b"t/other", b"v", 0).await.unwrap();
    lease.stop_keepalive();
    let client = ctl.client.clone();
    let gone = eventually(Duration::from_millis(10 * TTL_MS), || {
        let client = client.clone();
        async move { client.get(b"t/k").await.unwrap().is_none() }
    })
    .await;
    assert!(gone, "the leased key stays after renewal stopped");
    assert!(
        !lease.is_valid(),
        "the holder still believes in an expired lease"
    );
    assert_eq!(
        ctl.client.lease_time_to_live(lease.id()).await.unwrap(),
        None
    );
    assert_eq!(ctl.client.lease_keepalive(lease.id()).await.unwrap(), None);
    assert!(
        ctl.client.get(b"t/other").await.unwrap().is_some(),
        "a key without lease stays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoke_deletes_keys_at_once() {
    let Some(etcd) = Etcd::start("revoke_deletes_keys_at_once").await else {
        return;
    };
    let ctl = etcd.control("t/");
    let lease = lease(&ctl).await;
    let id = lease.id();
    ctl.client.put(b"t/k", b"v", id).await.unwrap();
    lease.revoke().await.unwrap();
    assert!(ctl.client.get(b"t/k").await.unwrap().is_none());
    // Revoking again (a lease already gone) is not an error.
    ctl.client.lease_revoke(id).await.unwrap();
}
