//! Watches: every change of a prefix arrives in revision order (puts, deletes, and the deletes
//! of an expired lease's keys); a watch from an earlier revision replays history; a killed etcd
//! ends the watch with a typed, retryable error instead of leaving it silent.

use super::support::{lease, Etcd, TTL_MS};
use ringgate::etcd::{EtcdError, EventKind, Watch};
use std::time::Duration;

/// The next `n` events as (kind, key), failing if they take longer than `limit`.
async fn events(w: &mut Watch, n: usize, limit: Duration) -> Vec<(EventKind, String)> {
    let mut out = Vec::new();
    let mut last_rev = 0;
    while out.len() < n {
        let batch = tokio::time::timeout(limit, w.next())
            .await
            .expect("no event in time")
            .unwrap();
        for e in batch.events {
            assert!(e.kv.mod_revision > last_rev, "events out of order");
            last_rev = e.kv.mod_revision;
            out.push((e.kind, String::from_utf8(e.kv.key).unwrap()));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_sees_puts_deletes_and_expiry() {
    let Some(etcd) = Etcd::start("watch_sees_puts_deletes_and_expiry").await else {
        return;
    };
    let client = etcd.client();
    let start = client.put(b"w/seed", b"0", 0).await.unwrap();
    let mut w = client.watch(b"w/", Some(b"w0"), 0).await.unwrap();
    let l = lease(&etcd.control("")).await;
    client.put(b"w/a", b"1", 0).await.unwrap();
    client.put(b"other", b"x", 0).await.unwrap();
    client.put(b"w/b", b"2", l.id()).await.unwrap();
    client.delete(b"w/a", None).await.unwrap();
    l.stop_keepalive();
    let got = events(&mut w, 4, Duration::from_millis(10 * TTL_MS)).await;
    use EventKind::*;
    let want = [(Put, "w/a"), (Put, "w/b"), (Delete, "w/a"), (Delete, "w/b")];
    assert_eq!(got, want.map(|(k, s)| (k, s.to_string())));

    // From an earlier revision: the history again, starting with the seed.
    let mut replay = client.watch(b"w/", Some(b"w0"), start).await.unwrap();
    let got = events(&mut replay, 5, Duration::from_secs(10)).await;
    assert_eq!(got[0], (Put, "w/seed".to_string()));
    assert_eq!(got[1..], want.map(|(k, s)| (k, s.to_string())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_etcd_ends_a_watch_typed() {
    let Some(mut etcd) = Etcd::start("killed_etcd_ends_a_watch_typed").await else {
        return;
    };
    let client = etcd.client();
    let mut w = client.watch(b"k", None, 0).await.unwrap();
    client.put(b"k", b"1", 0).await.unwrap();
    events(&mut w, 1, Duration::from_secs(10)).await;
    etcd.kill9();
    let e = tokio::time::timeout(Duration::from_secs(30), w.next())
        .await
        .expect("the watch hung");
    let e = e.unwrap_err();
    assert!(
        matches!(e, EtcdError::Interrupted { .. }) && e.is_retryable(),
        "{e:?}"
    );
    let again = client.watch(b"k", None, 0).await;
    assert!(
        matches!(again, Err(EtcdError::Unavailable { .. })),
        "{:?}",
        again.err()
    );
}
