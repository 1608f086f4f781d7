//! Statement shapes: what the other statements users send cost the server, beside the point
//! phases' plain insert and read. Each shape runs prepared for the phase time, 4 connections x
//! 32 in flight, against ringgate alone (the canned server answers every statement alike);
//! printed: requests/s, the server's CPU time per request and per row written or asked for
//! (`BENCH_SERVER_PID`: a figure a busy machine disturbs less than the rates).
//!
//! The shapes run in the table's order on one server, so each finds the data the earlier ones
//! left (updates and deletes hit inserted keys, slices read the appended partitions); the first
//! pays for the server's fresh heap (docs/PERFORMANCE.md), which later ones do not.

use super::{connect, ddl, rate_of, server_cpu_secs, Histogram, Settings};
use scylla::client::session::Session;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const CONNECTIONS: usize = 4;
const IN_FLIGHT: usize = 128;
/// Partitions the clustered shapes write and read (rows appended in turn to each).
const PARTITIONS: i64 = 1_000;
/// Rows a slice asks for, and rows of the unlogged batch (one partition).
const ROWS: i64 = 10;

const TABLES: [&str; 4] = [
    "CREATE TABLE IF NOT EXISTS bench.shape_kv (k bigint PRIMARY KEY, v blob)",
    "CREATE TABLE IF NOT EXISTS bench.shape_wide (p bigint, c bigint, v blob, PRIMARY KEY (p, c))",
    "CREATE TABLE IF NOT EXISTS bench.shape_counts (k bigint PRIMARY KEY, n counter)",
    "CREATE TABLE IF NOT EXISTS bench.shape_wide_row (k bigint PRIMARY KEY, a text, b int, \
     c double, d timestamp, e uuid, f list<int>, g map<text, int>)",
];

/// A shape: its name, its statement, how a request binds key `k`, and rows per request.
struct Shape {
    name: &'static str,
    cql: &'static str,
    bind: Bind,
    rows: i64,
}

/// How a request of a shape binds its values from a request number `k` (counting from 0 in
/// each shape), the shape's own key range from `base` on, and the number of keys the first
/// shape inserted, `inserted` (keys 0 to `inserted` - 1).
#[derive(Clone, Copy)]
enum Bind {
    /// (base + k, value): a new key each request.
    KeyValue,
    /// (value, an inserted key).
    ValueInserted,
    /// (an inserted key,).
    Inserted,
    /// (base + k,): a new key each request.
    Fresh,
    /// (k mod PARTITIONS, k, value): appends to the partitions in turn.
    Append,
    /// ROWS rows (k mod PARTITIONS, k * ROWS + i, value) in one unlogged batch.
    BatchOnePartition,
    /// Two new keys (base + 2k and base + 2k + 1) in one logged batch.
    LoggedTwo,
    /// (k mod PARTITIONS,): a partition.
    Partition,
    /// (k mod PARTITIONS, a clustering value): a partition and where its slice starts.
    PartitionFrom,
}

const SHAPES: [Shape; 13] = [
    shape(
        "insert",
        "INSERT INTO bench.shape_kv (k, v) VALUES (?, ?)",
        Bind::KeyValue,
        1,
    ),
    shape(
        "insert with TTL",
        "INSERT INTO bench.shape_kv (k, v) VALUES (?, ?) USING TTL 86400",
        Bind::KeyValue,
        1,
    ),
    shape(
        "update",
        "UPDATE bench.shape_kv SET v = ? WHERE k = ?",
        Bind::ValueInserted,
        1,
    ),
    shape(
        "insert IF NOT EXISTS",
        "INSERT INTO bench.shape_kv (k, v) VALUES (?, ?) IF NOT EXISTS",
        Bind::KeyValue,
        1,
    ),
    shape(
        "counter increment",
        "UPDATE bench.shape_counts SET n = n + 1 WHERE k = ?",
        Bind::Inserted,
        1,
    ),
    shape(
        "8 columns, 2 collections",
        "INSERT INTO bench.shape_wide_row (k, a, b, c, d, e, f, g) VALUES (?, 'some text', 42, \
         3.5, '2024-01-01', 5b6962dd-3f90-4c93-8f61-eabfa4a803e2, [1, 2, 3], {'a': 1, 'b': 2})",
        Bind::Fresh,
        1,
    ),
    shape(
        "clustered append",
        "INSERT INTO bench.shape_wide (p, c, v) VALUES (?, ?, ?)",
        Bind::Append,
        1,
    ),
    shape(
        "unlogged batch, 1 partition",
        "INSERT INTO bench.shape_wide (p, c, v) VALUES (?, ?, ?)",
        Bind::BatchOnePartition,
        ROWS,
    ),
    shape(
        "logged batch, 2 partitions",
        "INSERT INTO bench.shape_kv (k, v) VALUES (?, ?)",
        Bind::LoggedTwo,
        2,
    ),
    shape(
        "slice of 10 rows",
        "SELECT c, v FROM bench.shape_wide WHERE p = ? AND c >= ? LIMIT 10",
        Bind::PartitionFrom,
        ROWS,
    ),
    shape(
        "last 10 rows (DESC)",
        "SELECT c, v FROM bench.shape_wide WHERE p = ? ORDER BY c DESC LIMIT 10",
        Bind::Partition,
        ROWS,
    ),
    shape(
        "point read",
        "SELECT v FROM bench.shape_kv WHERE k = ?",
        Bind::Inserted,
        1,
    ),
    shape(
        "delete",
        "DELETE FROM bench.shape_kv WHERE k = ?",
        Bind::Inserted,
        1,
    ),
];

const fn shape(name: &'static str, cql: &'static str, bind: Bind, rows: i64) -> Shape {
    Shape {
        name,
        cql,
        bind,
        rows,
    }
}

/// Runs every shape, in order, and prints the table.
pub(super) async fn shapes(ringgate: &str, s: &Settings) {
    let session = connect(ringgate, CONNECTIONS).await;
    for cql in TABLES {
        ddl(&session, cql).await;
    }
    println!();
    println!(
        "statement shapes: prepared, {CONNECTIONS} connections x {} in flight, {:.1} s each, in order on one server",
        IN_FLIGHT / CONNECTIONS,
        s.phase.as_secs_f64()
    );
    println!("| statement | requests/s | server CPU us/request | us/row |");
    println!("|---|---|---|---|");
    let mut inserted = 1;
    for (i, shape) in SHAPES.iter().enumerate() {
        let keys = Keys {
            base: (i as i64) << 40,
            inserted,
        };
        let stmt = (session.prepare(shape.cql).await)
            .unwrap_or_else(|e| panic!("prepare {}: {e}", shape.cql));
        let cpu_before = server_cpu_secs();
        let (rate, hist) = run_shape(&session, &stmt, shape.bind, keys, s).await;
        let requests = hist.total();
        if shape.name == "insert" {
            inserted = requests as i64;
        }
        let cpu = match (cpu_before, server_cpu_secs()) {
            (Some(a), Some(b)) => {
                let us = (b - a) * 1e6 / requests as f64;
                (format!("{us:.1}"), format!("{:.1}", us / shape.rows as f64))
            }
            _ => ("-".into(), "-".into()),
        };
        println!("| {} | {rate:.0} | {} | {} |", shape.name, cpu.0, cpu.1);
    }
}

/// A shape's keys (see [`Bind`]).
#[derive(Clone, Copy)]
struct Keys {
    base: i64,
    inserted: i64,
}

/// One shape for the phase time: requests/s and the latency histogram (its total: the
/// requests answered).
async fn run_shape(
    session: &Arc<Session>,
    stmt: &PreparedStatement,
    bind: Bind,
    keys: Keys,
    s: &Settings,
) -> (f64, Histogram) {
    let start = Instant::now();
    let deadline = start + s.phase;
    let next = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for _ in 0..IN_FLIGHT {
        let (session, stmt, next) = (Arc::clone(session), stmt.clone(), Arc::clone(&next));
        handles.push(tokio::spawn(async move {
            let batch = batch_of(bind, &stmt);
            let mut hist = Histogram::new();
            while Instant::now() < deadline {
                let k = next.fetch_add(1, Ordering::Relaxed) as i64;
                let t0 = Instant::now();
                if let Err(e) = request(&session, &stmt, &batch, bind, k, keys).await {
                    eprintln!("request failed: {e}");
                    std::process::exit(1);
                }
                hist.record(t0.elapsed());
            }
            hist
        }));
    }
    rate_of(handles, start).await
}

/// The batch a batch shape sends (its statement repeated), else an empty one.
fn batch_of(bind: Bind, stmt: &PreparedStatement) -> Batch {
    let (kind, n) = match bind {
        Bind::BatchOnePartition => (BatchType::Unlogged, ROWS),
        Bind::LoggedTwo => (BatchType::Logged, 2),
        _ => (BatchType::Unlogged, 0),
    };
    let mut batch = Batch::new(kind);
    for _ in 0..n {
        batch.append_statement(stmt.clone());
    }
    batch
}

async fn request(
    session: &Session,
    stmt: &PreparedStatement,
    batch: &Batch,
    bind: Bind,
    k: i64,
    Keys { base, inserted }: Keys,
) -> Result<(), scylla::errors::ExecutionError> {
    let value = &[0xabu8; 100][..];
    let some = k % inserted;
    match bind {
        Bind::KeyValue => session
            .execute_unpaged(stmt, (base + k, value))
            .await
            .map(drop),
        Bind::ValueInserted => session.execute_unpaged(stmt, (value, some)).await.map(drop),
        Bind::Inserted => session.execute_unpaged(stmt, (some,)).await.map(drop),
        Bind::Fresh => session.execute_unpaged(stmt, (base + k,)).await.map(drop),
        Bind::Append => {
            let row = (k % PARTITIONS, k, value);
            session.execute_unpaged(stmt, row).await.map(drop)
        }
        Bind::Partition => session
            .execute_unpaged(stmt, (k % PARTITIONS,))
            .await
            .map(drop),
        Bind::PartitionFrom => {
            // Appends gave partition p the clustering values p, p + PARTITIONS, ...
            let from = k % PARTITIONS + (k * 7919 % 64) * PARTITIONS;
            session
                .execute_unpaged(stmt, (k % PARTITIONS, from))
                .await
                .map(drop)
        }
        Bind::BatchOnePartition => {
            let rows: Vec<_> = (0..ROWS)
                .map(|i| (k % PARTITIONS, -(k * ROWS + i) - 1, value))
                .collect();
            session.batch(batch, rows).await.map(drop)
        }
        Bind::LoggedTwo => {
            let keys = [base + 2 * k, base + 2 * k + 1];
            session
                .batch(batch, &keys.map(|k| (k, value))[..])
                .await
                .map(drop)
        }
    }
}
