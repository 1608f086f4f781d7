//! Load generator for `scripts/bench`, through the Rust driver (`scylla` crate).
//!
//! Usage: bench [--quick] RINGGATE_ADDR CANNED_ADDR
//!
//! 1. Prepared point writes and reads (bigint key, 100-byte blob value) in two shapes, 4
//!    connections x 32 requests in flight and 64 connections x 4, each phase run for a fixed
//!    time against the canned-answer server (`bench_echo`, the protocol-loop limit: same client,
//!    same machine, no work per request) and then against ringgate; ringgate's throughput is
//!    printed as a fraction of the canned one, with p50/p99/p999 latency.
//! 2. A token-range scan: a table of bigint key / int value rows read as 256 token ranges, 16 in
//!    parallel, page size 5,000 (rows/s), right after it was loaded and again at rest (after a
//!    major compaction, the `compact` maintenance command); the row count is checked.
//! 3. Wide partitions: prepared reads of a 100-row clustering slice at a random place in a
//!    1,000-row partition and in a 1,000,000-row one (4 connections x 8 in flight), each phase
//!    for the phase time; the wide partition's rate as a fraction of the narrow one's (1.0: no
//!    work proportional to the partition). The row count of each answer is checked.
//! 4. Statement shapes (`shapes.rs`): the server's CPU per request of TTL and conditional
//!    inserts, updates, counters, deletes, collections, clustered appends, batches, slices and
//!    reversed slices, each for the phase time.
//!
//! `--quick` runs every phase briefly on a small table (for scripts/test: it keeps the benchmark
//! working, its figures mean little).
//!
//! For profiling one phase: `BENCH_ONLY=ringgate-write|ringgate-read|canned-read|...|scan|wide|shapes` runs
//! only that phase (a comma-separated list: those; point phases in the first shape),
//! `BENCH_SKIP=scan,wide,shapes` leaves those phases out (every shape runs), `BENCH_SHAPE=64x4` runs
//! the point phases in that shape alone, `BENCH_PHASE_SECS` sets the phase time and
//! `BENCH_READ_KEYS=N` lets reads take keys below N written by an earlier run;
//! `BENCH_VALUE_BYTES` sets the value size (default 100); `BENCH_SCAN_LOADED=1` scans without
//! loading first (the scan table of an earlier run on the same server: scans under `perf`);
//! `BENCH_SERVER_PID` (set by `scripts/bench`) prints the server's CPU time per point request
//! of each phase on stderr, a figure a busy machine disturbs less than the rates.

mod shapes;

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::client::PoolSize;
use scylla::errors::TranslationError;
use scylla::policies::address_translator::{AddressTranslator, UntranslatedPeer};
use scylla::response::{PagingState, PagingStateResponse};
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SHAPES: [(usize, usize); 2] = [(4, 32), (64, 4)];
const SCAN_RANGES: i128 = 256;
const SCAN_PARALLEL: usize = 16;
const SCAN_PAGE_ROWS: i32 = 5_000;
const LOAD_BATCH_ROWS: u64 = 50;
const LOAD_IN_FLIGHT: u64 = 64;
const NARROW_ROWS: u64 = 1_000;
const SLICE_ROWS: u64 = 100;
const WIDE_SHAPE: (usize, usize) = (4, 8);

struct Settings {
    phase: Duration,
    scan_rows: u64,
    /// Rows of the wide partition.
    wide_rows: u64,
    /// `BENCH_ONLY`: run only this phase.
    only: Option<String>,
    /// `BENCH_SKIP`: phases not to run (`scan`, `wide`, `shapes`), every point shape still runs.
    skip: Option<String>,
    /// `BENCH_READ_KEYS`: keys already stored (reads take keys below it).
    read_keys: u64,
    /// `BENCH_VALUE_BYTES`: the written blob's size (default 100).
    value_bytes: usize,
}

impl Settings {
    fn runs(&self, phase: &str) -> bool {
        let listed =
            |list: &Option<String>| list.as_ref().map(|l| l.split(',').any(|p| p == phase));
        listed(&self.only).unwrap_or(true) && !listed(&self.skip).unwrap_or(false)
    }
}

/// `BENCH_SHAPE`: `CONNECTIONSxIN_FLIGHT`, e.g. `64x4`.
fn parse_shape(s: &str) -> (usize, usize) {
    let parsed = s
        .split_once('x')
        .and_then(|(c, d)| Some((c.parse().ok()?, d.parse().ok()?)));
    match parsed {
        Some((c, d)) if c > 0 && d > 0 => (c, d),
        _ => panic!("BENCH_SHAPE={s}: want CONNECTIONSxIN_FLIGHT, e.g. 64x4"),
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Latencies in a log-linear histogram (bounded memory): exact below 1,024 µs, then 64 steps
/// per power of two (under 1.6% error).
#[derive(Clone)]
struct Histogram {
    counts: Vec<u64>,
}

impl Histogram {
    const LINEAR: u64 = 1024;
    const STEPS: u64 = 64;

    fn new() -> Histogram {
        Histogram {
            counts: vec![0; (Self::LINEAR + 54 * Self::STEPS) as usize],
        }
    }

    fn bucket(us: u64) -> usize {
        if us < Self::LINEAR {
            return us as usize;
        }
        let exp = 63 - us.leading_zeros() as u64; // >= 10
        let frac = (us >> (exp - 6)) & (Self::STEPS - 1);
        (Self::LINEAR + (exp - 10) * Self::STEPS + frac) as usize
    }

    fn lower_bound_us(bucket: usize) -> u64 {
        let b = bucket as u64;
        if b < Self::LINEAR {
            return b;
        }
        let exp = (b - Self::LINEAR) / Self::STEPS + 10;
        let frac = (b - Self::LINEAR) % Self::STEPS;
        (1 << exp) + (frac << (exp - 6))
    }

    fn record(&mut self, d: Duration) {
        let b = Self::bucket(d.as_micros() as u64).min(self.counts.len() - 1);
        self.counts[b] += 1;
    }

    fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    fn percentile(&self, p: f64) -> Duration {
        let want = ((self.total() as f64) * p).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Duration::from_micros(Self::lower_bound_us(b));
            }
        }
        Duration::ZERO
    }
}

async fn connect(addr: &str, conns: usize) -> Arc<Session> {
    let mut builder = SessionBuilder::new()
        .known_node(addr)
        .pool_size(PoolSize::PerHost(NonZeroUsize::new(conns).expect("> 0")));
    if let Some(nodes) = cluster_nodes(addr).await {
        builder = builder.address_translator(Arc::new(nodes));
    }
    let session = builder
        .build()
        .await
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    Arc::new(session)
}

/// `BENCH_CLUSTER_NODES` (comma-separated CQL addresses, set by `scripts/bench --cluster`):
/// each node's host id -> its address, when `addr` is one of them. The scylla driver reaches a
/// peer at its `rpc_address` with the port of the node it was given (it does not read
/// `peers_v2.native_port`), which is right for real clusters (one port, an address per node)
/// but not for nodes sharing 127.0.0.1 on different ports.
async fn cluster_nodes(addr: &str) -> Option<ByHostId> {
    let list = std::env::var("BENCH_CLUSTER_NODES").ok()?;
    let nodes: Vec<&str> = list.split(',').collect();
    if !nodes.contains(&addr) {
        return None;
    }
    let mut by_id = std::collections::HashMap::new();
    for node in nodes {
        let one = SessionBuilder::new()
            .known_node(node)
            .build()
            .await
            .unwrap_or_else(|e| panic!("connect to {node}: {e}"));
        let rows = one
            .query_unpaged("SELECT host_id FROM system.local", &[])
            .await
            .unwrap_or_else(|e| panic!("host id of {node}: {e}"))
            .into_rows_result()
            .expect("rows");
        let (id,) = rows.first_row::<(uuid::Uuid,)>().expect("one host id");
        by_id.insert(id, node.parse().expect("a socket address"));
    }
    Some(ByHostId(by_id))
}

struct ByHostId(std::collections::HashMap<uuid::Uuid, std::net::SocketAddr>);

#[async_trait::async_trait]
impl AddressTranslator for ByHostId {
    async fn translate_address(
        &self,
        peer: &UntranslatedPeer,
    ) -> Result<std::net::SocketAddr, TranslationError> {
        let addr = peer.untranslated_address();
        (self.0.get(&peer.host_id()).copied()).ok_or(TranslationError::NoRuleForAddress(addr))
    }
}

async fn ddl(session: &Session, cql: &str) {
    session
        .query_unpaged(cql, &[])
        .await
        .unwrap_or_else(|e| panic!("{cql}: {e}"));
}

/// Runs point writes or reads for the phase time with `tasks` requests in flight; returns ops/s and
/// the latency histogram. Writes count up from `keys`; reads take keys below it.
async fn point_phase(
    session: &Arc<Session>,
    stmt: &PreparedStatement,
    tasks: usize,
    s: &Settings,
    write: bool,
    keys: &Arc<AtomicU64>,
) -> (f64, Histogram) {
    let start = Instant::now();
    let deadline = start + s.phase;
    let value_bytes = s.value_bytes;
    let written = keys.load(Ordering::Relaxed).max(1);
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (session, stmt, keys) = (Arc::clone(session), stmt.clone(), Arc::clone(keys));
        handles.push(tokio::spawn(async move {
            let value = vec![0xabu8; value_bytes];
            let mut hist = Histogram::new();
            let mut i = t as u64;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                let res = if write {
                    let key = keys.fetch_add(1, Ordering::Relaxed) as i64;
                    session.execute_unpaged(&stmt, (key, &value[..])).await
                } else {
                    i = (i + 7919) % written;
                    session.execute_unpaged(&stmt, (i as i64,)).await
                };
                if let Err(e) = res {
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

/// The tasks' merged latencies and their requests per second since `start`.
async fn rate_of(
    handles: Vec<tokio::task::JoinHandle<Histogram>>,
    start: Instant,
) -> (f64, Histogram) {
    let mut hist = Histogram::new();
    for h in handles {
        hist.merge(&h.await.expect("task"));
    }
    (hist.total() as f64 / start.elapsed().as_secs_f64(), hist)
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

/// `BENCH_SERVER_PID`: that process's CPU time (user + system) in seconds.
fn server_cpu_secs() -> Option<f64> {
    let pid = std::env::var("BENCH_SERVER_PID").ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may hold spaces), from field 3 on: utime is 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0) // USER_HZ is 100 on Linux
}

/// One shape: writes then reads, each against the canned server and then ringgate.
async fn point_shape(ringgate: &str, canned: &str, (conns, depth): (usize, usize), s: &Settings) {
    let mut sessions = Vec::new();
    for (name, addr) in [("canned", canned), ("ringgate", ringgate)] {
        if !s.runs(&format!("{name}-write")) && !s.runs(&format!("{name}-read")) {
            continue;
        }
        let session = connect(addr, conns).await;
        let insert = session
            .prepare("INSERT INTO bench.kv (k, v) VALUES (?, ?)")
            .await
            .expect("prepare insert");
        let select = session
            .prepare("SELECT v FROM bench.kv WHERE k = ?")
            .await
            .expect("prepare select");
        // Reads take keys this server's writes stored (the canned server stores almost none).
        let keys = Arc::new(AtomicU64::new(s.read_keys));
        sessions.push((name, session, insert, select, keys));
    }
    for write in [true, false] {
        let mut canned_rate = 0.0;
        for (name, session, insert, select, keys) in &sessions {
            let op = if write { "write" } else { "read" };
            if !s.runs(&format!("{name}-{op}")) {
                continue;
            }
            let stmt = if write { insert } else { select };
            let tasks = conns * depth;
            let cpu_before = server_cpu_secs();
            let (rate, h) = point_phase(session, stmt, tasks, s, write, keys).await;
            if let (Some(a), Some(b), "ringgate") = (cpu_before, server_cpu_secs(), *name) {
                // On a shared machine a robuster A/B figure than the rate.
                let us = (b - a) * 1e6 / (rate * s.phase.as_secs_f64());
                eprintln!("{conns} x {depth} {op}: server CPU {us:.1} us/request");
            }
            let fraction = if *name == "canned" {
                canned_rate = rate;
                String::new()
            } else if canned_rate > 0.0 {
                format!("{:.2}", rate / canned_rate)
            } else {
                String::new() // the canned phase did not run (BENCH_ONLY)
            };
            println!(
                "| {conns} x {depth} | {op} | {name} | {rate:.0} | {} | {} | {} | {fraction} |",
                ms(h.percentile(0.50)),
                ms(h.percentile(0.99)),
                ms(h.percentile(0.999)),
            );
        }
    }
}

/// Rows `0..rows` through `insert`, in batches of `LOAD_BATCH_ROWS` with `in_flight` batches at
/// once; `row(i)` gives row i's values (batches past the end repeat the last row: an overwrite).
async fn load_rows<V>(
    session: &Arc<Session>,
    insert: &str,
    rows: u64,
    in_flight: u64,
    row: fn(u64) -> V,
) where
    V: scylla::serialize::row::SerializeRow + Send + Sync + 'static,
{
    let insert = session.prepare(insert).await.expect("prepare load insert");
    let mut batch = Batch::new(BatchType::Unlogged);
    for _ in 0..LOAD_BATCH_ROWS {
        batch.append_statement(insert.clone());
    }
    let (batch, next) = (Arc::new(batch), Arc::new(AtomicU64::new(0)));
    let mut handles = Vec::new();
    for _ in 0..in_flight {
        let (session, batch, next) = (Arc::clone(session), Arc::clone(&batch), Arc::clone(&next));
        handles.push(tokio::spawn(async move {
            loop {
                let first = next.fetch_add(LOAD_BATCH_ROWS, Ordering::Relaxed);
                if first >= rows {
                    break;
                }
                let values: Vec<V> = (first..first + LOAD_BATCH_ROWS)
                    .map(|i| row(i.min(rows - 1)))
                    .collect();
                session.batch(&batch, values).await.expect("load batch");
            }
        }));
    }
    for h in handles {
        h.await.expect("load task");
    }
}

async fn load_scan_table(session: &Arc<Session>, rows: u64) {
    ddl(
        session,
        "CREATE TABLE IF NOT EXISTS bench.scan (k bigint PRIMARY KEY, v int)",
    )
    .await;
    let insert = "INSERT INTO bench.scan (k, v) VALUES (?, ?)";
    load_rows(session, insert, rows, LOAD_IN_FLIGHT, |k| {
        (k as i64, k as i32)
    })
    .await;
}

/// The `i`th of `SCAN_RANGES` equal token ranges (start, end].
fn token_range(i: i128) -> (i64, i64) {
    let width = (1i128 << 64) / SCAN_RANGES;
    let start = i64::MIN as i128 + i * width;
    let end = if i == SCAN_RANGES - 1 {
        i64::MAX as i128
    } else {
        start + width
    };
    (start as i64, end as i64)
}

async fn scan_range(session: &Session, stmt: &PreparedStatement, range: (i64, i64)) -> u64 {
    let mut rows = 0;
    let mut paging = PagingState::start();
    loop {
        let (result, next) = session
            .execute_single_page(stmt, range, paging)
            .await
            .expect("scan page");
        let result = result.into_rows_result().expect("rows");
        for row in result.rows::<(i64, i32)>().expect("row type") {
            let (k, v) = row.expect("row");
            assert_eq!(k as i32, v, "scan read a wrong value");
            rows += 1;
        }
        match next {
            PagingStateResponse::HasMorePages { state } => paging = state,
            PagingStateResponse::NoMorePages => return rows,
        }
    }
}

async fn scan(ringgate: &str, s: &Settings) {
    let session = connect(ringgate, 1).await;
    let t = Instant::now();
    if std::env::var_os("BENCH_SCAN_LOADED").is_none() {
        load_scan_table(&session, s.scan_rows).await;
    }
    let load_secs = t.elapsed().as_secs_f64();
    let mut stmt = session
        .prepare("SELECT k, v FROM bench.scan WHERE token(k) > ? AND token(k) <= ?")
        .await
        .expect("prepare scan");
    stmt.set_page_size(SCAN_PAGE_ROWS);
    let what = format!(
        "{} rows (bigint key, int value; loaded in {load_secs:.1} s) read as {SCAN_RANGES} token ranges, {SCAN_PARALLEL} in parallel, page size {SCAN_PAGE_ROWS}",
        s.scan_rows
    );
    let secs = timed_scan(&session, &stmt, s.scan_rows).await;
    println!(
        "scan: {what}: {secs:.2} s, {:.0} rows/s (right after the load: its flushes and compactions run beside the scan)",
        s.scan_rows as f64 / secs
    );
    // The same table at rest: every flush and compaction done (a major compaction, the
    // `compact` maintenance command), as a table an export reads some time after it was written.
    let t = Instant::now();
    ddl(
        &session,
        "INSERT INTO system_views.maintenance (command) VALUES ('compact')",
    )
    .await;
    let compact_secs = t.elapsed().as_secs_f64();
    let secs = timed_scan(&session, &stmt, s.scan_rows).await;
    println!(
        "scan: {what}: {secs:.2} s, {:.0} rows/s (at rest, after a major compaction of {compact_secs:.1} s)",
        s.scan_rows as f64 / secs
    );
}

/// Reads the whole scan table as `SCAN_RANGES` token ranges, `SCAN_PARALLEL` at a time, checks
/// that every row came once, and returns the seconds it took.
async fn timed_scan(session: &Arc<Session>, stmt: &PreparedStatement, expect_rows: u64) -> f64 {
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..SCAN_PARALLEL {
        let (session, stmt, next) = (Arc::clone(session), stmt.clone(), Arc::clone(&next));
        handles.push(tokio::spawn(async move {
            let mut rows = 0;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as i128;
                if i >= SCAN_RANGES {
                    return rows;
                }
                rows += scan_range(&session, &stmt, token_range(i)).await;
            }
        }));
    }
    let mut rows = 0;
    for h in handles {
        rows += h.await.expect("scan task");
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(rows, expect_rows, "the scan must return every row once");
    secs
}

#[tokio::main]
async fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.first().is_some_and(|a| a == "--quick");
    if quick {
        args.remove(0);
    }
    let (Some(ringgate), Some(canned)) = (args.first(), args.get(1)) else {
        eprintln!("usage: bench [--quick] RINGGATE_ADDR CANNED_ADDR");
        std::process::exit(2);
    };
    let (phase_ms, scan_rows, wide_rows) = if quick {
        (300, 20_000, 20_000)
    } else {
        (5_000, 1_000_000, 1_000_000)
    };
    let settings = Settings {
        phase: Duration::from_millis(env_u64("BENCH_PHASE_SECS").map_or(phase_ms, |s| s * 1000)),
        scan_rows,
        wide_rows,
        only: std::env::var("BENCH_ONLY").ok(),
        skip: std::env::var("BENCH_SKIP").ok(),
        read_keys: env_u64("BENCH_READ_KEYS").unwrap_or(0),
        value_bytes: env_u64("BENCH_VALUE_BYTES").unwrap_or(100) as usize,
    };
    // On both: the canned server relays DDL to its own backend, which is not the measured
    // server under `scripts/bench --cluster`.
    for addr in [ringgate, canned] {
        let setup = connect(addr, 1).await;
        ddl(&setup, "CREATE KEYSPACE IF NOT EXISTS bench WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").await;
        ddl(
            &setup,
            "CREATE TABLE IF NOT EXISTS bench.kv (k bigint PRIMARY KEY, v blob)",
        )
        .await;
    }
    println!(
        "prepared point requests, {}-byte values, {:.1} s per phase; fraction = ringgate / canned",
        settings.value_bytes,
        settings.phase.as_secs_f64()
    );
    println!(
        "| connections x in flight | op | server | ops/s | p50 ms | p99 ms | p999 ms | fraction |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let shapes: Vec<(usize, usize)> = match std::env::var("BENCH_SHAPE").ok() {
        Some(s) => vec![parse_shape(&s)],
        None if settings.only.is_some() => SHAPES[..1].to_vec(),
        None => SHAPES.to_vec(),
    };
    for shape in shapes {
        if !matches!(settings.only.as_deref(), Some("scan" | "wide" | "shapes")) {
            point_shape(ringgate, canned, shape, &settings).await;
        }
    }
    if settings.runs("scan") {
        scan(ringgate, &settings).await;
    }
    if settings.runs("wide") {
        wide(ringgate, &settings).await;
    }
    if settings.runs("shapes") {
        shapes::shapes(ringgate, &settings).await;
    }
}

/// Slice reads of `SLICE_ROWS` rows at random places of partition `k` (`rows` rows).
async fn slice_phase(
    session: &Arc<Session>,
    stmt: &PreparedStatement,
    k: i64,
    rows: u64,
    s: &Settings,
) -> (f64, Histogram) {
    let start = Instant::now();
    let deadline = start + s.phase;
    let mut handles = Vec::new();
    for t in 0..WIDE_SHAPE.0 * WIDE_SHAPE.1 {
        let (session, stmt) = (Arc::clone(session), stmt.clone());
        handles.push(tokio::spawn(async move {
            let mut hist = Histogram::new();
            let mut i = t as u64;
            while Instant::now() < deadline {
                i = (i + 7919) % (rows - SLICE_ROWS + 1);
                let t0 = Instant::now();
                let (lo, hi) = (i as i64, (i + SLICE_ROWS) as i64);
                let res = session
                    .execute_unpaged(&stmt, (k, lo, hi))
                    .await
                    .unwrap_or_else(|e| panic!("slice read: {e}"));
                let n = res.into_rows_result().expect("rows").rows_num();
                assert_eq!(n as u64, SLICE_ROWS, "slice of partition {k} at {lo}");
                hist.record(t0.elapsed());
            }
            hist
        }));
    }
    rate_of(handles, start).await
}

async fn wide(ringgate: &str, s: &Settings) {
    let session = connect(ringgate, WIDE_SHAPE.0).await;
    ddl(
        &session,
        "CREATE TABLE IF NOT EXISTS bench.wide (k bigint, c bigint, v int, PRIMARY KEY (k, c))",
    )
    .await;
    let load = Instant::now();
    // Single-partition batches: the server applies them one at a time per partition.
    let insert = "INSERT INTO bench.wide (k, c, v) VALUES (?, ?, ?)";
    load_rows(&session, insert, NARROW_ROWS, 8, |c| {
        (1i64, c as i64, c as i32)
    })
    .await;
    load_rows(&session, insert, s.wide_rows, 8, |c| {
        (2i64, c as i64, c as i32)
    })
    .await;
    println!(
        "wide partitions: {SLICE_ROWS}-row slices, {} x {} in flight (loaded in {:.1} s)",
        WIDE_SHAPE.0,
        WIDE_SHAPE.1,
        load.elapsed().as_secs_f64()
    );
    println!("| partition rows | ops/s | p50 ms | p99 ms | p999 ms | fraction |");
    println!("|---|---|---|---|---|---|");
    let stmt = session
        .prepare("SELECT c, v FROM bench.wide WHERE k = ? AND c >= ? AND c < ?")
        .await
        .expect("prepare slice");
    let mut narrow_rate = 0.0;
    for (k, rows) in [(1, NARROW_ROWS), (2, s.wide_rows)] {
        let (rate, h) = slice_phase(&session, &stmt, k, rows, s).await;
        let fraction = if k == 1 {
            narrow_rate = rate;
            String::new()
        } else {
            format!("{:.2}", rate / narrow_rate)
        };
        println!(
            "| {rows} | {rate:.0} | {} | {} | {} | {fraction} |",
            ms(h.percentile(0.50)),
            ms(h.percentile(0.99)),
            ms(h.percentile(0.999)),
        );
    }
}
