//! A map installed again with new partition objects (a map reloaded from etcd may bring them):
//! the owner serves through them too, with counters rebuilt from the partition's records
//! (derived from its rows: the table has no clustering columns).

use crate::support::{until, Backing, Node, SETTLE};

#[test]
fn a_reloaded_map_is_served_and_counted_again() {
    use ringgate::partition::derived_sizes::SizeSource;
    use ringgate::partition::map::{PartitionMap, PhysicalPartition};
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    let Some(b) = Backing::start("ownership_reload") else {
        return;
    };
    let (mut a, sid) = Node::first(&b, "a", 19041);
    until(SETTLE, || a.local(sid).len() == 8).expect("a takes every partition");
    for k in 0..50 {
        a.ok(&format!("INSERT INTO ks.t (k, v) VALUES ({k}, {k})"));
    }
    let old = a.engine.maps.get(sid).unwrap();
    // (logical partitions, bytes) of each partition.
    let logical = |m: &PartitionMap| -> Vec<(i64, i64)> {
        (m.parts.iter())
            .map(|p| {
                let s = &p.stats;
                (
                    s.logical.load(Ordering::SeqCst),
                    s.bytes.load(Ordering::SeqCst),
                )
            })
            .collect()
    };
    assert_eq!(logical(&old).iter().map(|c| c.0).sum::<i64>(), 50);
    // A table without clustering columns: the counters are rebuilt from its rows on PostgreSQL
    // (`partition/derived_sizes.rs`), and must come back as the writes left them.
    assert!(old.parts.iter().all(|p| p.sizes == SizeSource::Rows));
    let fresh = PartitionMap {
        parts: (old.parts.iter())
            .map(|p| {
                Arc::new(PhysicalPartition {
                    id: p.id,
                    start: p.start,
                    end: p.end,
                    group: p.group.clone(),
                    sizes: p.sizes,
                    stats: Default::default(),
                })
            })
            .collect(),
    };
    a.engine.maps.install(sid, Arc::new(fresh));
    let served = until(SETTLE, || {
        let now = a.engine.maps.get(sid).unwrap();
        a.local(sid).len() == 8 && logical(&now) == logical(&old)
    });
    assert!(
        served.is_some(),
        "{:?}",
        logical(&a.engine.maps.get(sid).unwrap())
    );
    a.ok("INSERT INTO ks.t (k, v) VALUES (1000, 1)");
}
