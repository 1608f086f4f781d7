//! Load generator for `scripts/bench`: prepared point writes then reads of a bigint key and a
//! blob value, many requests in flight over a few connections, through the Rust driver.
//!
//! Usage: bench [HOST:PORT] [OPS] [CONCURRENCY] [VALUE_BYTES]

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn percentile(sorted: &[u64], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    Duration::from_micros(sorted[i])
}

async fn phase(
    name: &str,
    session: &Arc<Session>,
    stmt: &scylla::statement::prepared::PreparedStatement,
    ops: u64,
    concurrency: u64,
    value: &Arc<Vec<u8>>,
    write: bool,
) {
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (session, stmt, next, value) = (
            Arc::clone(session),
            stmt.clone(),
            Arc::clone(&next),
            Arc::clone(value),
        );
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= ops {
                    break;
                }
                let key = i as i64;
                let t = Instant::now();
                let res = if write {
                    session
                        .execute_unpaged(&stmt, (key, value.as_slice()))
                        .await
                        .map(|_| ())
                } else {
                    session.execute_unpaged(&stmt, (key,)).await.map(|_| ())
                };
                if let Err(e) = res {
                    eprintln!("request failed: {e}");
                    std::process::exit(1);
                }
                lat.push(t.elapsed().as_micros() as u64);
            }
            lat
        }));
    }
    let mut all = Vec::with_capacity(ops as usize);
    for t in tasks {
        all.extend(t.await.expect("task"));
    }
    let secs = start.elapsed().as_secs_f64();
    all.sort_unstable();
    println!(
        "{name:6} {ops} ops in {secs:.2} s: {:.0} ops/s, p50 {:?}, p99 {:?}",
        ops as f64 / secs,
        percentile(&all, 0.50),
        percentile(&all, 0.99)
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:9042".into());
    let ops: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let concurrency: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(256);
    let value_bytes: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(100);
    let session = Arc::new(
        SessionBuilder::new()
            .known_node(&addr)
            .build()
            .await
            .expect("connect"),
    );
    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS bench WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &[],
        )
        .await
        .expect("create keyspace");
    session
        .query_unpaged(
            "CREATE TABLE IF NOT EXISTS bench.kv (k bigint PRIMARY KEY, v blob)",
            &[],
        )
        .await
        .expect("create table");
    let insert = session
        .prepare("INSERT INTO bench.kv (k, v) VALUES (?, ?)")
        .await
        .expect("prepare insert");
    let select = session
        .prepare("SELECT v FROM bench.kv WHERE k = ?")
        .await
        .expect("prepare select");
    let value = Arc::new(vec![0xabu8; value_bytes]);
    println!("ringgate bench: {ops} ops, {concurrency} in flight, {value_bytes}-byte values, against {addr}");
    phase("write", &session, &insert, ops, concurrency, &value, true).await;
    phase("read", &session, &select, ops, concurrency, &value, false).await;
}
