//! Provisioned throughput: token-bucket refill, the burst bank, retry-after and server-side
//! retry, by moving the clock.

use super::support::{open, TestEngine};
use ringgate::query::QueryError;

/// An engine (with `settings`) and table `ks.t` provisioned at 400 RU/s, one physical
/// partition.
fn provisioned(settings: &[&str]) -> TestEngine {
    let mut t = open(settings);
    t.ok(
        "CREATE TABLE ks.t (k int PRIMARY KEY, v blob) WITH cosmosdb_provisioned_throughput = 400",
    );
    t
}

fn insert(k: i32, value_bytes: usize) -> String {
    format!(
        "INSERT INTO ks.t (k, v) VALUES ({k}, 0x{})",
        "ab".repeat(value_bytes)
    )
}

/// Small writes until one is rejected: the RU admitted and the rejection's retry-after.
fn drain(t: &mut TestEngine, first_key: i32) -> (f64, u64) {
    let mut admitted_ru = 0.0;
    for k in first_key..first_key + 1000 {
        match t.run_charged(&insert(k, 10)) {
            (Ok(_), ru) => admitted_ru += ru,
            (Err(QueryError::Overloaded { retry_after_ms, .. }), ru) => {
                assert_eq!(ru, 0.0, "a rejected request consumes nothing");
                return (admitted_ru, retry_after_ms);
            }
            (Err(e), _) => panic!("{e}"),
        }
    }
    panic!("never throttled");
}

#[test]
fn a_full_bucket_admits_one_second_and_refills_at_the_provisioned_rate() {
    let mut t = provisioned(&["throughput.burst=false"]);
    let (ru, wait_ms) = drain(&mut t, 0);
    // The bucket starts with one second of budget; requests run while it is positive, so
    // the last one may take it into debt by at most its own cost (~6 RU).
    assert!((400.0..410.0).contains(&ru), "{ru}");
    assert!((1..=25).contains(&wait_ms), "{wait_ms}");
    // Time has not moved: still rejected, with the same wait.
    match t.run(&insert(5000, 10)) {
        Err(QueryError::Overloaded { retry_after_ms, .. }) => assert_eq!(retry_after_ms, wait_ms),
        other => panic!("{other:?}"),
    }
    // Honouring retry-after is enough.
    t.advance_ms(wait_ms);
    t.ok(&insert(5000, 10));
    // A second later, one more second of budget (and no more: no burst).
    t.advance_ms(1000);
    let (ru, _) = drain(&mut t, 10_000);
    assert!((400.0 - 12.0..410.0).contains(&ru), "{ru}");
}

#[test]
fn idle_seconds_are_banked_for_bursts() {
    let mut t = provisioned(&["throughput.burst=true"]);
    let (first, _) = drain(&mut t, 0);
    assert!(first < 410.0, "nothing banked yet: {first}");
    // Ten idle seconds: the bucket refills to one second's budget, the other nine go to the
    // bank, which pays for requests beyond the rate.
    t.advance_ms(10_000);
    let (burst, _) = drain(&mut t, 10_000);
    assert!(burst > 2.0 * 400.0, "{burst}");
    assert!(burst < 10.0 * 400.0 + 10.0, "{burst}");
}

#[test]
fn a_large_write_puts_the_bucket_in_debt_for_its_cost() {
    let mut t = provisioned(&["throughput.burst=false"]);
    // About 465 RU (1 MiB): admitted on a full bucket, which then owes ~65 RU.
    let (res, ru) = t.run_charged(&insert(1, 1 << 20));
    res.unwrap();
    assert!((400.0..600.0).contains(&ru), "{ru}");
    let wait_ms = match t.run(&insert(2, 10)) {
        Err(QueryError::Overloaded { retry_after_ms, .. }) => retry_after_ms,
        other => panic!("{other:?}"),
    };
    let debt = ru - 400.0;
    let expected_ms = (debt / 400.0 * 1000.0).ceil() as u64;
    assert!(
        wait_ms.abs_diff(expected_ms) <= 1,
        "{wait_ms} vs {expected_ms}"
    );
    t.advance_ms(wait_ms);
    t.ok(&insert(2, 10));
}

#[test]
fn server_side_retry_holds_a_request_then_times_it_out() {
    let mut t = provisioned(&[
        "throughput.burst=false",
        "throughput.server_side_retry=true",
        "throughput.server_side_retry_max_ms=100",
    ]);
    t.ok(&insert(1, 1 << 20)); // ~65 RU of debt: 163 ms at 400 RU/s
    let wait_ms = match t.run(&insert(2, 10)) {
        Err(QueryError::Held { retry_after_ms }) => retry_after_ms,
        other => panic!("{other:?}"),
    };
    // The wait is capped by what is left of the limit.
    assert_eq!(wait_ms, 100);
    let held_since = t.clock.instant();
    t.advance_ms(wait_ms);
    let mut ctx = ringgate::query::RequestCtx::default();
    ctx.set_held_since(held_since);
    match t.run_with(&insert(2, 10), ctx) {
        Err(QueryError::WriteTimeout(msg, _)) => {
            assert!(msg.contains("server-side retry"), "{msg}")
        }
        other => panic!("{other:?}"),
    }
    // Nothing of the timed-out write was stored.
    t.advance_ms(1000);
    assert!(t.rows("SELECT k FROM ks.t WHERE k = 2").is_empty());
}
