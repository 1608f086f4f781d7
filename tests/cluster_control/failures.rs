//! etcd failing under the client: kill -9 in the middle of a stream of writes, a stopped
//! (SIGSTOP) etcd, a dead endpoint in the list. Every call returns a typed error within its
//! deadline (never hangs), retryable ones say so, and the client recovers when etcd is back.

use super::support::{lease, Etcd};
use ringgate::cluster::{ownership, EtcdMetaStore};
use ringgate::etcd::{EtcdClient, EtcdError};
use ringgate::storage::{MetaStore, StorageError};
use std::time::Duration;

/// Far above every deadline of a call (2 s request, 0.3 s connect): reaching it means a hang.
const HANG: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_mid_writes_gives_retryable_errors_then_recovers() {
    let Some(mut etcd) = Etcd::start("kill9_mid_writes").await else {
        return;
    };
    let ctl = etcd.control("rg/");
    let writer = {
        let client = ctl.client.clone();
        tokio::spawn(async move {
            let mut acked = 0u64;
            loop {
                match client
                    .put(format!("rg/w/{acked}").as_bytes(), b"v", 0)
                    .await
                {
                    Ok(_) => acked += 1,
                    Err(e) => return (acked, e),
                }
            }
        })
    };
    // Let some writes land, then kill -9 while they run.
    let client = ctl.client.clone();
    while client
        .range(b"rg/w/", Some(b"rg/w0"), 0)
        .await
        .unwrap()
        .kvs
        .len()
        < 20
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    etcd.kill9();
    let (acked, err) = tokio::time::timeout(HANG, writer)
        .await
        .expect("the writer hung")
        .unwrap();
    assert!(acked >= 20);
    assert!(err.is_retryable(), "{err:?}");
    assert!(
        matches!(
            err,
            EtcdError::Unavailable { .. }
                | EtcdError::Timeout { .. }
                | EtcdError::Interrupted { .. }
        ),
        "{err:?}"
    );

    // Every primitive fails typed and retryable while etcd is down.
    let e = tokio::time::timeout(HANG, ctl.client.get(b"x"))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(e, EtcdError::Unavailable { .. }) && !e.may_have_applied(),
        "{e:?}"
    );
    let e = tokio::time::timeout(HANG, ctl.client.lease_grant(2))
        .await
        .unwrap()
        .unwrap_err();
    assert!(e.is_retryable());
    let meta_ctl = ctl.clone();
    let meta = tokio::task::spawn_blocking(move || {
        let store = EtcdMetaStore::new(&meta_ctl).unwrap();
        (
            store.meta_get(b"schema"),
            store
                .meta_scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
                .next(),
        )
    });
    let (get, scan) = tokio::time::timeout(HANG, meta)
        .await
        .expect("meta store hung")
        .unwrap();
    assert!(matches!(get, Err(StorageError::Unavailable(_))), "{get:?}");
    assert!(
        matches!(scan, Some(Err(StorageError::Unavailable(_)))),
        "{scan:?}"
    );

    // etcd back on the same data: every acknowledged write is there.
    etcd.spawn().await;
    let n = ctl
        .client
        .range(b"rg/w/", Some(b"rg/w0"), 0)
        .await
        .unwrap()
        .kvs
        .len() as u64;
    assert!(n >= acked, "{n} keys after restart, {acked} acknowledged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_etcd_times_out_typed() {
    let Some(etcd) = Etcd::start("stopped_etcd_times_out_typed").await else {
        return;
    };
    let ctl = etcd.control("rg/");
    let lease = lease(&ctl).await;
    etcd.signal(libc::SIGSTOP);
    // Connections are accepted by the kernel, answers never come: the request deadline ends it.
    let took = tokio::time::timeout(HANG, ownership::take(&ctl, &lease, "a", 1, 1)).await;
    let err = took.expect("take hung on a stopped etcd").unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    let e = tokio::time::timeout(HANG, ctl.client.put(b"k", b"v", 0))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(e, EtcdError::Timeout { .. }) && e.may_have_applied(),
        "{e:?}"
    );
    etcd.signal(libc::SIGCONT);
    ctl.client.put(b"k", b"v", 0).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_endpoint_fails_over_to_the_next() {
    let Some(etcd) = Etcd::start("dead_endpoint_fails_over").await else {
        return;
    };
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let endpoints = [format!("http://{dead}"), etcd.endpoint()];
    let client = EtcdClient::new(&endpoints, super::support::options()).unwrap();
    client.put(b"k", b"v", 0).await.unwrap();
    assert_eq!(client.get(b"k").await.unwrap().unwrap().value, b"v");
    let only_dead = EtcdClient::new(&endpoints[..1], super::support::options()).unwrap();
    assert!(matches!(
        only_dead.get(b"k").await,
        Err(EtcdError::Unavailable { .. })
    ));
}
