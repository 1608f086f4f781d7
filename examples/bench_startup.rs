//! Startup time with many logical partitions, for `scripts/bench --startup N`.
//!
//! Usage: bench_startup RINGGATE_BIN N [DATA_DIR]
//!
//! With DATA_DIR, the data directory is kept there, and one left by an earlier run is
//! reused as it is (restarts only: for profiling a start). `BENCH_STARTUP_LOG`: the server's
//! log level (default warn).
//!
//! Starts the server on a scratch data directory, creates a table (bigint key) with one row,
//! stops it, bulk-loads N more rows straight into its store (copies of that row under N more
//! keys, as N written partitions leave them: the table has no clustering columns, so startup
//! counts its sizes from its rows, `partition/derived_sizes.rs`; going through CQL would take
//! minutes for 10,000,000), starts it again and measures the time from
//! spawning the process to the answer of its first query (a point read of the row), then how
//! long until `system_views.physical_partitions` counts every logical partition (the counters
//! may be rebuilt in the background after the server answers).

use ringgate::storage::{EmbeddedStore, Space, Store, SyncMode, WriteBatch};
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use std::ops::Bound;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const BATCH_ROWS: u64 = 100_000;
const READY_TIMEOUT: Duration = Duration::from_secs(300);

#[path = "../tests/common/ports.rs"]
mod ports;
use ports::free_port;

/// The server process, killed if the bench panics (it would outlive us otherwise).
struct Server(Option<Child>);

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn(bin: &str, dir: &Path, port: u16) -> Server {
    let log = std::env::var("BENCH_STARTUP_LOG").unwrap_or_else(|_| "warn".into());
    Server(Some(
        Command::new(bin)
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .arg("--data-dir")
            .arg(dir)
            .args(["--log-level", &log, "--set", "http.enabled=false"])
            .spawn()
            .expect("spawn server"),
    ))
}

fn stop(mut server: Server) {
    let mut child = server.0.take().expect("running");
    // SIGTERM: a clean shutdown, as an operator's restart does.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().expect("wait for server");
}

/// Connects as soon as the port accepts and returns the session.
async fn connect(port: u16, started: Instant) -> Session {
    let addr = format!("127.0.0.1:{port}");
    loop {
        assert!(started.elapsed() < READY_TIMEOUT, "server not up");
        if std::net::TcpStream::connect(&addr).is_ok() {
            if let Ok(s) = SessionBuilder::new().known_node(&addr).build().await {
                return s;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn run(s: &Session, cql: &str) -> scylla::response::query_result::QueryResult {
    s.query_unpaged(cql, &[])
        .await
        .unwrap_or_else(|e| panic!("{cql}: {e}"))
}

async fn query(s: &Session, cql: &str) -> scylla::response::query_result::QueryRowsResult {
    run(s, cql).await.into_rows_result().expect("rows")
}

fn storage_id(store: &EmbeddedStore) -> u64 {
    let (prefix, end) = (b"pmap/", b"pmap0");
    let ids: Vec<u64> = store
        .metadata()
        .meta_scan(Bound::Included(&prefix[..]), Bound::Excluded(&end[..]))
        .map(|item| {
            let (k, _) = item.expect("meta scan");
            u64::from_be_bytes(k[prefix.len()..].try_into().expect("8-byte storage id"))
        })
        .collect();
    assert_eq!(ids.len(), 1, "expected one table, found {ids:?}");
    ids[0]
}

/// Rows for keys 1..=n, each a copy of the real row's value (key 0).
fn bulk_load(dir: &Path, n: u64) {
    use ringgate::format::keys::{partition_prefix, KIND_ROW};
    let store = EmbeddedStore::open(dir, SyncMode::None).expect("open store");
    let sid = storage_id(&store);
    let (table, next) = (sid.to_be_bytes(), (sid + 1).to_be_bytes());
    let mut rows = store.scan(
        Space::Data,
        Bound::Included(&table),
        Bound::Excluded(&next),
        false,
    );
    let (_, value) = rows.next().expect("the real row").expect("scan");
    assert!(rows.next().is_none(), "expected one row");
    let mut batch = WriteBatch::default();
    for i in 1..=n {
        let pk = (i as i64).to_be_bytes();
        let mut key = partition_prefix(sid, ringgate::tokens::token_of(&pk), &pk);
        key.push(KIND_ROW);
        batch.put(Space::Data, key, value.clone());
        if batch.ops.len() as u64 == BATCH_ROWS {
            store.commit(std::mem::take(&mut batch)).expect("commit");
        }
    }
    store.commit(batch).expect("commit");
    store.flush().expect("flush");
}

async fn first_read(s: &Session) {
    let v = query(s, "SELECT v FROM startup.kv WHERE k = 0")
        .await
        .single_row::<(i32,)>()
        .expect("the row");
    assert_eq!(v.0, 42);
}

async fn counted_partitions(s: &Session) -> i64 {
    query(
        s,
        "SELECT logical_partitions FROM system_views.physical_partitions WHERE keyspace_name = 'startup'",
    )
    .await
    .rows::<(Option<i64>,)>()
    .expect("typed rows")
    .map(|r| r.expect("row").0.unwrap_or(0))
    .sum()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (bin, n, kept) = match &args[..] {
        [_, bin, n] => (bin, n, None),
        [_, bin, n, dir] => (bin, n, Some(std::path::PathBuf::from(dir))),
        _ => {
            eprintln!("usage: bench_startup RINGGATE_BIN N [DATA_DIR]");
            std::process::exit(2);
        }
    };
    let n: u64 = n.parse().expect("N is a number");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = kept.unwrap_or_else(|| tmp.path().join("db"));
    let port = free_port();
    if !dir.exists() {
        load(bin, &dir, port, n).await;
        // The bulk load leaves its records in the store's journal (a server writing them over
        // time would have flushed them); the first start replays it into memtables. Measured
        // and reported, then the next start is the one an operator's restart sees.
        let started = Instant::now();
        let server = spawn(bin, &dir, port);
        let s = connect(port, started).await;
        first_read(&s).await;
        println!(
            "first start after the bulk load (replays its journal): answered {:.2} s after start",
            started.elapsed().as_secs_f64()
        );
        drop(s);
        stop(server);
    }
    restart(bin, &dir, port, n).await;
}

/// A server with one row, stopped, then `n` size records more.
async fn load(bin: &str, dir: &Path, port: u16, n: u64) {
    let server = spawn(bin, dir, port);
    let s = connect(port, Instant::now()).await;
    run(&s, "CREATE KEYSPACE startup WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").await;
    run(&s, "CREATE TABLE startup.kv (k bigint PRIMARY KEY, v int)").await;
    run(&s, "INSERT INTO startup.kv (k, v) VALUES (0, 42)").await;
    drop(s);
    stop(server);

    let load = Instant::now();
    bulk_load(dir, n);
    println!("loaded {n} rows in {:.1} s", load.elapsed().as_secs_f64());
}

/// Starts the server over the loaded directory and times its first answers.
async fn restart(bin: &str, dir: &Path, port: u16, n: u64) {
    let started = Instant::now();
    let server = spawn(bin, dir, port);
    let s = connect(port, started).await;
    first_read(&s).await;
    let first = started.elapsed();
    println!(
        "startup with {} logical partitions: first query answered {:.2} s after start",
        n + 1,
        first.as_secs_f64()
    );
    loop {
        if counted_partitions(&s).await == n as i64 + 1 {
            break;
        }
        assert!(
            started.elapsed() < READY_TIMEOUT,
            "partitions never counted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "every logical partition counted {:.2} s after start",
        started.elapsed().as_secs_f64()
    );
    drop(s);
    stop(server);
}
