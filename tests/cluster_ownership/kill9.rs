//! A real `ringgate serve` process in cluster mode, written to through the `scylla` driver and
//! killed with SIGKILL: the in-process node takes its partitions over, and every write the
//! process acknowledged reads back.

use crate::common::Server;
use crate::support::{until, Backing, Node, LEASE_MS, SETTLE};
use std::time::Instant;

#[test]
fn a_killed_process_partitions_are_taken_over_and_its_acknowledged_writes_kept() {
    let Some(b) = Backing::start("ownership_kill9") else {
        return;
    };
    let (mut a, sid) = Node::first(&b, "a", 19061);
    until(SETTLE, || a.local(sid).len() == 8).expect("a takes every partition");
    let sets = b.node_settings("p");
    let args: Vec<String> = sets
        .iter()
        .flat_map(|s| ["--set".into(), s.clone()])
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let p = Server::start(&args);
    let spread = until(SETTLE, || {
        a.local(sid).len() == 4 && a.served_by(sid, "p") == 4
    });
    assert!(
        spread.is_some(),
        "{:?}\n{}",
        a.placements(sid),
        p.log_text()
    );

    // Writes through the process: those to its partitions are acknowledged; the others are
    // refused (Unavailable: not forwarded in this branch) and must not land either.
    let acked: Vec<i32> = b.block_on(async {
        let s = scylla::client::session_builder::SessionBuilder::new()
            .known_node(&p.addr)
            .build()
            .await
            .unwrap_or_else(|e| panic!("connect: {e}\n{}", p.log_text()));
        let mut acked = Vec::new();
        for k in 0..200i32 {
            let q = format!("INSERT INTO ks.t (k, v) VALUES ({k}, {k})");
            if s.query_unpaged(q, &[]).await.is_ok() {
                acked.push(k);
            }
        }
        acked
    });
    assert!(!acked.is_empty() && acked.len() < 200, "{}", acked.len());

    drop(p); // SIGKILL, and reaped
    let killed = Instant::now();
    until(SETTLE, || a.local(sid).len() == 8).expect("a takes the killed process's partitions");
    eprintln!(
        "KILL9: the killed process's 4 partitions were served again {} ms after SIGKILL \
         (lease {LEASE_MS} ms)",
        killed.elapsed().as_millis()
    );
    for k in 0..200 {
        let rows = a.count(&format!("SELECT v FROM ks.t WHERE k = {k}"));
        assert_eq!(rows, acked.contains(&k) as i32, "k={k}");
    }
}
