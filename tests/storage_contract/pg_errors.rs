//! The PostgreSQL backend's errors, through a real server: no server is `Unavailable`
//! (retryable); a connection cut right after COMMIT was sent is `Unknown` (not retryable) and
//! the commit may well have been applied; the pool recovers with a new connection. A read-only
//! server (a primary demoted in a failover) is `Unavailable`, and the pool drops the
//! connection instead of reusing it; another server's pool (another storage group) keeps its
//! connections. A connection the server closed while it sat idle in the pool is never used
//! (the next commit succeeds), and the backend works from inside an async context.

use super::support::*;
use bytes::Bytes;
use ringgate::storage::postgres::{PgConfig, PostgresStore};
use ringgate::storage::{PartitionCommit, PartitionHandle, PartitionStore, StorageError};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn config(url: String) -> PgConfig {
    PgConfig { url, pool_size: 2 }
}

#[test]
fn no_server_is_unavailable() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("host=127.0.0.1 port={port} user=postgres dbname=none");
    let err = PostgresStore::open(&config(url))
        .err()
        .expect("no server there");
    assert!(matches!(err, StorageError::Unavailable(_)), "{err}");
    assert!(err.is_retryable());
}

/// Forwards connections to PostgreSQL; once armed, cuts the connection that sends a COMMIT
/// right after forwarding it (so the server commits, the client never hears back).
struct CutAtCommit {
    port: u16,
    armed: Arc<AtomicBool>,
}

impl CutAtCommit {
    fn start(upstream: u16) -> CutAtCommit {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let armed = Arc::new(AtomicBool::new(false));
        let arm = Arc::clone(&armed);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let server = TcpStream::connect(("127.0.0.1", upstream)).unwrap();
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let mute = Arc::new(AtomicBool::new(false));
                let m2 = Arc::clone(&mute);
                std::thread::spawn(move || answers(s2, c2, m2));
                let arm = Arc::clone(&arm);
                std::thread::spawn(move || requests(client, server, arm, mute));
            }
        });
        CutAtCommit { port, armed }
    }
}

/// Client to server; the armed cut mutes the answers before it forwards the commit: a COMMIT
/// statement, or the Bind of a prepared statement (a partition commit is one call of
/// `ringgate_commit`, prepared on the connection's first commit).
fn requests(mut from: TcpStream, mut to: TcpStream, armed: Arc<AtomicBool>, mute: Arc<AtomicBool>) {
    let mut buf = [0u8; 16 << 10];
    while let Ok(n) = from.read(&mut buf) {
        let commit = buf[..n].windows(6).any(|w| w == b"COMMIT") || buf[..n].first() == Some(&b'B');
        let cut = commit && armed.swap(false, Ordering::SeqCst);
        if cut {
            mute.store(true, Ordering::SeqCst);
        }
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
        if cut {
            // Let the server commit, then lose the answer.
            std::thread::sleep(std::time::Duration::from_millis(300));
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// Server to client, until muted.
fn answers(mut from: TcpStream, mut to: TcpStream, mute: Arc<AtomicBool>) {
    let mut buf = [0u8; 16 << 10];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || mute.load(Ordering::SeqCst) || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
}

#[test]
fn a_commit_whose_answer_is_lost_is_unknown() {
    let Some(pg) = super::pg::server() else {
        return;
    };
    let url = pg.new_database("contract-unknown");
    let direct = PostgresStore::open(&config(url.clone())).unwrap();
    let proxy = CutAtCommit::start(pg.port);
    let via = url.replace(
        &format!("port={}", pg.port),
        &format!("port={}", proxy.port),
    );
    let store = PostgresStore::open(&config(via)).unwrap();
    let h = store.open_partition(parts()[1].clone(), 1).unwrap();
    let (k1, k2) = (Bytes::from(key(1, b"a")), Bytes::from(key(2, b"b")));

    let mut c = PartitionCommit::default();
    c.put(k1.clone(), "before");
    h.commit(c).unwrap();

    proxy.armed.store(true, Ordering::SeqCst);
    let mut c = PartitionCommit::default();
    c.put(k2.clone(), "unknown");
    let err = h.commit(c).unwrap_err();
    assert!(matches!(err, StorageError::Unknown(_)), "{err}");
    assert!(!err.is_retryable());
    // "Unknown" is not "failed": PostgreSQL got the COMMIT and applied it.
    let other = direct.open_partition(parts()[1].clone(), 1).unwrap();
    assert_eq!(
        other.get(&k2).unwrap(),
        Some(Bytes::from_static(b"unknown"))
    );

    // The broken connection is gone; the next commit gets a new one.
    let mut c = PartitionCommit::default();
    c.put(k1.clone(), "after");
    h.commit(c).unwrap();
    assert_eq!(other.get(&k1).unwrap(), Some(Bytes::from_static(b"after")));
}

/// Database `db` as on a demoted primary: every new session is read-only; the pooled ones
/// are cut.
fn demote(pg: &super::pg::PgServer, db: &str) {
    pg.sql(
        "postgres",
        &format!("ALTER DATABASE {db} SET default_transaction_read_only = on"),
    );
    cut_sessions(pg, db);
}

/// A store on a new database named after `name`: the database's name, the store, and its
/// partition `parts()[1]`.
fn one_partition(
    pg: &super::pg::PgServer,
    name: &str,
) -> (String, PostgresStore, Arc<dyn PartitionHandle>) {
    let url = pg.new_database(name);
    let db = url.rsplit("dbname=").next().unwrap().to_string();
    let store = PostgresStore::open(&config(url)).unwrap();
    let h = store.open_partition(parts()[1].clone(), 1).unwrap();
    (db, store, h)
}

/// Commits `value` to one key of `h`.
fn put(h: &Arc<dyn PartitionHandle>, value: &'static str) -> Result<(), StorageError> {
    let mut c = PartitionCommit::default();
    c.put(Bytes::from(key(1, b"a")), value);
    h.commit(c)
}

#[test]
fn a_read_only_server_is_unavailable_and_its_connections_are_dropped() {
    let Some(pg) = super::pg::server() else {
        return;
    };
    let (db, _store, h) = one_partition(pg, "contract-read-only");
    let put = |v: &'static str| put(&h, v);
    put("before").unwrap();

    demote(pg, &db);
    let err = put("refused").unwrap_err();
    assert!(matches!(err, StorageError::Unavailable(_)), "{err}");
    assert!(err.is_retryable());

    // The read-only session is not reused: the next commit gets a new, read-write one.
    pg.sql(
        "postgres",
        &format!("ALTER DATABASE {db} SET default_transaction_read_only = off"),
    );
    put("after").unwrap();
    assert_eq!(
        h.get(&key(1, b"a")).unwrap(),
        Some(Bytes::from_static(b"after"))
    );
}

/// The backend pids of the sessions connected to database `db`.
fn sessions(pg: &super::pg::PgServer, db: &str) -> std::collections::BTreeSet<String> {
    let sql = format!("SELECT pid FROM pg_stat_activity WHERE datname = '{db}'");
    pg.query("postgres", &sql)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_demotion_drops_only_the_demoted_servers_connections() {
    let Some(pg) = super::pg::server() else {
        return;
    };
    let (url_a, url_b) = (pg.new_database("demoted-a"), pg.new_database("demoted-b"));
    let db = |url: &str| url.rsplit("dbname=").next().unwrap().to_string();
    let (db_a, db_b) = (db(&url_a), db(&url_b));
    let (a, b) = (
        PostgresStore::open(&config(url_a)).unwrap(),
        PostgresStore::open(&config(url_b)).unwrap(),
    );
    let (ha, hb) = (
        a.open_partition(parts()[1].clone(), 1).unwrap(),
        b.open_partition(parts()[1].clone(), 1).unwrap(),
    );
    put(&ha, "before").unwrap();
    put(&hb, "before").unwrap();
    let b_before = sessions(pg, &db_b);
    assert!(!b_before.is_empty());

    // A's server is demoted; B's is not.
    demote(pg, &db_a);
    let err = put(&ha, "refused").unwrap_err();
    assert!(matches!(err, StorageError::Unavailable(_)), "{err}");

    // B's pooled connection is reused: no new session was opened on B's database.
    put(&hb, "after").unwrap();
    let opened: Vec<_> = sessions(pg, &db_b).difference(&b_before).cloned().collect();
    assert!(opened.is_empty(), "B reconnected: new sessions {opened:?}");
    assert_eq!(
        hb.get(&key(1, b"a")).unwrap(),
        Some(Bytes::from_static(b"after"))
    );
}

/// Ends every session of database `db` (as a restart or failover of the server does) and
/// waits until they are gone.
fn cut_sessions(pg: &super::pg::PgServer, db: &str) {
    pg.sql(
        "postgres",
        &format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}'"),
    );
    for _ in 0..100 {
        if sessions(pg, db).is_empty() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the sessions of {db} did not end");
}

#[test]
fn a_connection_the_server_closed_while_idle_is_not_used() {
    let Some(pg) = super::pg::server() else {
        return;
    };
    let (db, _store, h) = one_partition(pg, "closed-idle");
    let put = |v: &'static str| put(&h, v);
    for round in 0..3 {
        put("before").unwrap();
        cut_sessions(pg, &db);
        // Sent on a closed connection a commit would fail, of unknown outcome.
        put("after").unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(
            h.get(&key(1, b"a")).unwrap(),
            Some(Bytes::from_static(b"after"))
        );
    }
}

#[test]
fn the_backend_works_inside_an_async_context() {
    let Some(pg) = super::pg::server() else {
        return;
    };
    let (_db, _store, h) = one_partition(pg, "async-context");
    // As startup code under the server's `block_on` uses it: no runtime may be entered there.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let read = rt.block_on(async {
        put(&h, "inside").unwrap();
        h.get(&key(1, b"a")).unwrap()
    });
    assert_eq!(read, Some(Bytes::from_static(b"inside")));
}
