//! PostgreSQL backend: local records (secondary-index entries) keep the token their writer
//! named in `ringgate_data.token`, so a partition's local records are found by token range (what
//! moving a partition needs); a later write of the same key through `Store` keeps it.

use super::support::*;
use bytes::Bytes;
use ringgate::storage::handle::LocalWrite;
use ringgate::storage::postgres::{PgConfig, PostgresStore};
use ringgate::storage::{PartitionCommit, PartitionStore, Space, Store, WriteBatch};

/// `SELECT k FROM ringgate_data WHERE token > lo AND token <= hi`, through a connection of
/// the test's own.
fn keys_by_token(url: &str, lo: i64, hi: i64) -> Vec<Vec<u8>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        let sql = "SELECT k FROM ringgate_data WHERE token > $1 AND token <= $2 ORDER BY k";
        let rows = client.query(sql, &[&lo, &hi]).await.unwrap();
        rows.iter().map(|r| r.get(0)).collect()
    })
}

#[test]
fn local_records_are_found_by_token_range() {
    let Some(pg) = super::pg::server() else {
        return;
    };
    let url = pg.new_database("contract-local");
    let config = PgConfig {
        url: url.clone(),
        pool_size: 2,
    };
    let store = PostgresStore::open(&config).unwrap();
    let h = store.open_partition(parts()[1].clone(), 1).unwrap();
    // Index entries live outside the row key range: any key, owned through the row's token.
    let (a, b) = (
        Bytes::from_static(b"\x07idx-a"),
        Bytes::from_static(b"\x07idx-b"),
    );
    let mut c = PartitionCommit::default();
    c.put(key(5, b"row"), "row");
    for (k, token) in [(&a, 5), (&b, 60)] {
        c.local.push(LocalWrite {
            token,
            key: k.clone(),
            value: Some(Bytes::from_static(b"")),
        });
    }
    h.commit(c).unwrap();
    assert_eq!(keys_by_token(&url, -100, 100), vec![a.to_vec(), b.to_vec()]);
    assert_eq!(keys_by_token(&url, 50, 100), vec![b.to_vec()]);
    // A plain storage batch (no token) rewriting the entry keeps its token.
    let mut batch = WriteBatch::default();
    batch.put(Space::Data, a.clone(), "again");
    store.commit(batch).unwrap();
    assert_eq!(keys_by_token(&url, 0, 10), vec![a.to_vec()]);
    // Row keys carry no token.
    assert_eq!(
        store.get(Space::Data, &key(5, b"row")).unwrap().unwrap(),
        "row"
    );
    assert_eq!(keys_by_token(&url, i64::MIN, i64::MAX).len(), 2);
}
