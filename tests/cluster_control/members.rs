//! Membership: registered records list as live members, a second process with the same name is
//! refused, and a watcher sees joins and leaves (revoked lease, expired lease).

use super::support::{lease, Etcd, TTL_MS};
use ringgate::cluster::{members, ControlError, Member, MemberEvent, MemberWatch};
use std::time::Duration;

fn member(name: &str, port: u16) -> Member {
    Member {
        name: name.into(),
        host_id: format!("00000000-0000-4000-8000-{port:012}"),
        advertise: format!("127.0.0.1:{port}"),
        data_center: "datacenter1".into(),
        rack: "rack1".into(),
        started_at_ms: 1_700_000_000_000,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_join_and_leave() {
    let Some(etcd) = Etcd::start("members_join_and_leave").await else {
        return;
    };
    let ctl = etcd.control("ringgate/c1");
    let (mut watch, now) = MemberWatch::start(ctl.clone(), Duration::from_millis(100))
        .await
        .unwrap();
    assert!(now.is_empty());

    let (la, lb) = (lease(&ctl).await, lease(&ctl).await);
    members::register(&ctl, &la, &member("a", 9042))
        .await
        .unwrap();
    members::register(&ctl, &lb, &member("b", 9043))
        .await
        .unwrap();
    let listed = members::list(&ctl).await.unwrap();
    assert_eq!(listed.keys().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(listed["b"], member("b", 9043));
    let mut joined = watch.next().await.unwrap();
    joined.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        joined,
        [
            MemberEvent::Joined(member("a", 9042)),
            MemberEvent::Joined(member("b", 9043))
        ]
    );

    // Same name, another live lease: refused. Same lease: re-registered.
    let other = lease(&ctl).await;
    let dup = members::register(&ctl, &other, &member("a", 9999)).await;
    assert_eq!(dup, Err(ControlError::NameTaken("a".into())));
    members::register(&ctl, &la, &member("a", 9044))
        .await
        .unwrap();
    assert_eq!(
        watch.next().await.unwrap(),
        [MemberEvent::Changed(member("a", 9044))]
    );

    // A clean leave (revoke) and a death (renewal stops, the TTL passes).
    la.revoke().await.unwrap();
    assert_eq!(watch.next().await.unwrap(), [MemberEvent::Left("a".into())]);
    lb.stop_keepalive();
    let left = tokio::time::timeout(Duration::from_millis(10 * TTL_MS), watch.next()).await;
    assert_eq!(
        left.expect("b leaves after its TTL").unwrap(),
        [MemberEvent::Left("b".into())]
    );
    assert!(members::list(&ctl).await.unwrap().is_empty());
}
