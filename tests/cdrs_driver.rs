//! End-to-end test with the `cdrs-tokio` driver (fixed protocol v4, no OPTIONS, STARTUP with
//! CQL_VERSION 3.0.0, reads system.local without WHERE and `toJson(replication)`), with and
//! without password authentication.

mod common;

use cdrs_tokio::authenticators::{NoneAuthenticatorProvider, StaticPasswordAuthenticatorProvider};
use cdrs_tokio::cluster::session::{Session, SessionBuilder, TcpSessionBuilder};
use cdrs_tokio::cluster::{NodeTcpConfigBuilder, TcpConnectionManager};
use cdrs_tokio::load_balancing::RoundRobinLoadBalancingStrategy;
use cdrs_tokio::query_values;
use cdrs_tokio::transport::TransportTcp;
use cdrs_tokio::types::IntoRustByName;
use common::Server;
use std::sync::Arc;

type CdrsSession = Session<
    TransportTcp,
    TcpConnectionManager,
    RoundRobinLoadBalancingStrategy<TransportTcp, TcpConnectionManager>,
>;

async fn connect(
    server: &Server,
    auth: Arc<dyn cdrs_tokio::authenticators::SaslAuthenticatorProvider + Send + Sync>,
) -> Result<CdrsSession, String> {
    let config = NodeTcpConfigBuilder::new()
        .with_contact_point(server.addr.clone().into())
        .with_authenticator_provider(auth)
        .build()
        .await
        .map_err(|e| e.to_string())?;
    TcpSessionBuilder::new(RoundRobinLoadBalancingStrategy::new(), config)
        .build()
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdrs_connects_and_queries() {
    let server = Server::start(&[]);
    let session = connect(&server, Arc::new(NoneAuthenticatorProvider))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\n{}", server.log_text()));
    session
        .query("CREATE KEYSPACE c WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        .await
        .expect("keyspace");
    session
        .query("CREATE TABLE c.t (id int PRIMARY KEY, name text)")
        .await
        .expect("table");
    session
        .query_with_values(
            "INSERT INTO c.t (id, name) VALUES (?, ?)",
            query_values!(7i32, "seven"),
        )
        .await
        .expect("insert");
    let rows = session
        .query("SELECT id, name FROM c.t WHERE id = 7")
        .await
        .expect("select")
        .response_body()
        .expect("body")
        .into_rows()
        .expect("rows");
    assert_eq!(rows.len(), 1);
    let name: String = rows[0].get_r_by_name("name").expect("name");
    assert_eq!(name, "seven");

    // What cdrs itself reads for its metadata.
    let rows = session
        .query(
            "SELECT keyspace_name, toJson(replication) AS replication FROM system_schema.keyspaces",
        )
        .await
        .expect("toJson")
        .response_body()
        .expect("body")
        .into_rows()
        .expect("rows");
    let c = rows
        .iter()
        .find(|r| {
            let name: Option<String> = r.get_r_by_name("keyspace_name").ok();
            name.as_deref() == Some("c")
        })
        .expect("keyspace c listed");
    let replication: String = c.get_r_by_name("replication").expect("replication");
    let json: serde_json::Value = serde_json::from_str(&replication).expect("valid JSON");
    assert_eq!(json["class"], "org.apache.cassandra.locator.SimpleStrategy");
    assert_eq!(json["replication_factor"], "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdrs_password_authentication() {
    let server = Server::start(&[
        "--set",
        "auth.enabled=true",
        "--set",
        "auth.users.app=s3cret",
    ]);
    let ok = connect(
        &server,
        Arc::new(StaticPasswordAuthenticatorProvider::new("app", "s3cret")),
    )
    .await
    .unwrap_or_else(|e| panic!("connect: {e}\n{}", server.log_text()));
    ok.query("SELECT release_version FROM system.local")
        .await
        .expect("query after login");
    // Wrong passwords are covered by tests/python/test_auth.py: cdrs retries a refused login
    // forever, which a test cannot bound cleanly.
}
