//! End-to-end tests with the Rust `scylla` driver (protocol v4) against a real server process.

mod common;

use common::Server;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;

async fn connect(server: &Server) -> Session {
    SessionBuilder::new()
        .known_node(&server.addr)
        .build()
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\n{}", server.log_text()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_driver_connects_creates_and_round_trips() {
    let server = Server::start(&[]);
    let session = connect(&server).await;
    session
        .query_unpaged(
            "CREATE KEYSPACE rs WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &[],
        )
        .await
        .expect("create keyspace");
    session
        .query_unpaged(
            "CREATE TABLE rs.events (tenant text, seq int, at timestamp, body blob, PRIMARY KEY ((tenant), seq)) WITH CLUSTERING ORDER BY (seq DESC)",
            &[],
        )
        .await
        .expect("create table");
    session
        .await_schema_agreement()
        .await
        .expect("schema agreement");

    let insert = session
        .prepare("INSERT INTO rs.events (tenant, seq, at, body) VALUES (?, ?, ?, ?)")
        .await
        .expect("prepare");
    assert!(
        insert.is_token_aware(),
        "partition key indexes must be in the prepared metadata"
    );
    for seq in 0..20i32 {
        let body = vec![seq as u8; 3];
        session
            .execute_unpaged(
                &insert,
                (
                    "acme",
                    seq,
                    scylla::value::CqlTimestamp(1_700_000_000_000 + seq as i64),
                    body,
                ),
            )
            .await
            .expect("insert");
    }
    let select = session
        .prepare("SELECT seq, body FROM rs.events WHERE tenant = ? AND seq >= ?")
        .await
        .expect("prepare select");
    let rows = session
        .execute_unpaged(&select, ("acme", 15i32))
        .await
        .expect("select")
        .into_rows_result()
        .expect("rows");
    let got: Vec<(i32, Vec<u8>)> = rows
        .rows::<(i32, Vec<u8>)>()
        .expect("typed rows")
        .map(|r| r.expect("row"))
        .collect();
    // Clustering order is DESC.
    assert_eq!(
        got,
        (15..20)
            .rev()
            .map(|s| (s, vec![s as u8; 3]))
            .collect::<Vec<_>>()
    );

    // The token the server reports equals the driver's own Murmur3 computation.
    let token_rows = session
        .query_unpaged(
            "SELECT token(tenant) FROM rs.events WHERE tenant = 'acme' LIMIT 1",
            &[],
        )
        .await
        .expect("token")
        .into_rows_result()
        .expect("rows");
    let (server_token,): (i64,) = token_rows.first_row().expect("a row");
    let driver_token = session
        .get_cluster_state()
        .compute_token("rs", "events", &("acme",))
        .expect("driver token");
    assert_eq!(server_token, driver_token.value());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_survive_kill_9() {
    let mut server = Server::start(&[]);
    {
        let session = connect(&server).await;
        session
            .query_unpaged(
                "CREATE KEYSPACE d WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
                &[],
            )
            .await
            .expect("ks");
        session
            .query_unpaged("CREATE TABLE d.kv (k bigint PRIMARY KEY, v text)", &[])
            .await
            .expect("table");
        let insert = session
            .prepare("INSERT INTO d.kv (k, v) VALUES (?, ?)")
            .await
            .expect("prepare");
        for k in 0..500i64 {
            session
                .execute_unpaged(&insert, (k, format!("v{k}")))
                .await
                .expect("insert");
        }
    }
    server.kill9_restart();
    let session = connect(&server).await;
    let rows = session
        .query_unpaged("SELECT k, v FROM d.kv", &[])
        .await
        .expect("select")
        .into_rows_result()
        .expect("rows");
    let mut got: Vec<(i64, String)> = rows
        .rows::<(i64, String)>()
        .expect("typed")
        .map(|r| r.expect("row"))
        .collect();
    got.sort();
    assert_eq!(got.len(), 500);
    assert!(got.iter().all(|(k, v)| *v == format!("v{k}")));
}
