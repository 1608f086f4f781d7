//! Every native CQL type through the Rust `scylla` driver: bound values and CQL literals
//! round-trip byte for byte, and bind values of the wrong shape are rejected.

mod common;

use common::Server;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::value::{
    CqlDate, CqlDecimal, CqlDuration, CqlTime, CqlTimestamp, CqlTimeuuid, CqlValue, CqlVarint,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// (type, CQL literal, the value the driver must read back; also bound as-is).
fn cases() -> Vec<(&'static str, &'static str, CqlValue)> {
    let uuid = uuid::Uuid::parse_str("123e4567-e89b-42d3-a456-556642440000").unwrap();
    let tu = uuid::Uuid::parse_str("50554d6e-29bb-11e5-b345-feff819cdc9f").unwrap();
    vec![
        ("ascii", "'abc'", CqlValue::Ascii("abc".into())),
        ("ascii", "''", CqlValue::Ascii(String::new())),
        ("bigint", "-9223372036854775808", CqlValue::BigInt(i64::MIN)),
        ("bigint", "9223372036854775807", CqlValue::BigInt(i64::MAX)),
        ("blob", "0x00ff", CqlValue::Blob(vec![0, 0xff])),
        ("blob", "0x", CqlValue::Blob(vec![])),
        ("boolean", "false", CqlValue::Boolean(false)),
        ("date", "'1970-01-01'", CqlValue::Date(CqlDate(1 << 31))),
        ("date", "0", CqlValue::Date(CqlDate(0))),
        ("date", "4294967295", CqlValue::Date(CqlDate(u32::MAX))),
        (
            "decimal",
            "-1.5",
            CqlValue::Decimal(CqlDecimal::from_signed_be_bytes_and_exponent(vec![0xf1], 1)),
        ),
        ("double", "-Infinity", CqlValue::Double(f64::NEG_INFINITY)),
        (
            "double",
            "1.7976931348623157E308",
            CqlValue::Double(f64::MAX),
        ),
        (
            "duration",
            "-1y2mo3d",
            CqlValue::Duration(CqlDuration {
                months: -14,
                days: -3,
                nanoseconds: 0,
            }),
        ),
        ("float", "3.4028235E38", CqlValue::Float(f32::MAX)),
        (
            "inet",
            "'127.0.0.1'",
            CqlValue::Inet(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        ),
        (
            "inet",
            "'::1'",
            CqlValue::Inet(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        ),
        ("int", "-2147483648", CqlValue::Int(i32::MIN)),
        ("smallint", "32767", CqlValue::SmallInt(i16::MAX)),
        ("tinyint", "-128", CqlValue::TinyInt(i8::MIN)),
        (
            "text",
            "'héllo ✓ 日本語'",
            CqlValue::Text("héllo ✓ 日本語".into()),
        ),
        ("text", "''", CqlValue::Text(String::new())),
        (
            "time",
            "'23:59:59.999999999'",
            CqlValue::Time(CqlTime(86_399_999_999_999)),
        ),
        (
            "timestamp",
            "'2011-02-03T04:05:06.789Z'",
            CqlValue::Timestamp(CqlTimestamp(1_296_705_906_789)),
        ),
        (
            "timestamp",
            "-1000",
            CqlValue::Timestamp(CqlTimestamp(-1000)),
        ),
        (
            "timeuuid",
            "50554d6e-29bb-11e5-b345-feff819cdc9f",
            CqlValue::Timeuuid(CqlTimeuuid::from_bytes(*tu.as_bytes())),
        ),
        (
            "uuid",
            "123e4567-e89b-42d3-a456-556642440000",
            CqlValue::Uuid(uuid),
        ),
        (
            "varint",
            "-98765432109876543210987654321",
            CqlValue::Varint(CqlVarint::from_signed_bytes_be(
                (-98765432109876543210987654321i128).to_be_bytes()[3..].to_vec(),
            )),
        ),
        (
            "varint",
            "128",
            CqlValue::Varint(CqlVarint::from_signed_bytes_be(vec![0, 0x80])),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_driver_round_trips_every_native_type() {
    let server = Server::start(&[]);
    let session: Session = SessionBuilder::new()
        .known_node(&server.addr)
        .build()
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\n{}", server.log_text()));
    session
        .query_unpaged(
            "CREATE KEYSPACE ty WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &[],
        )
        .await
        .expect("create keyspace");
    let mut types: Vec<&str> = cases().iter().map(|c| c.0).collect();
    types.dedup();
    let cols: Vec<String> = types.iter().map(|t| format!("c_{t} {t}")).collect();
    session
        .query_unpaged(
            format!("CREATE TABLE ty.t (k int PRIMARY KEY, {})", cols.join(", ")),
            &[],
        )
        .await
        .expect("create table");
    session.await_schema_agreement().await.expect("agreement");

    for (i, (ty, literal, want)) in cases().into_iter().enumerate() {
        let k = i as i32 * 2;
        session
            .query_unpaged(
                format!("INSERT INTO ty.t (k, c_{ty}) VALUES ({k}, {literal})"),
                &[],
            )
            .await
            .unwrap_or_else(|e| panic!("insert {ty} {literal}: {e}"));
        let insert = session
            .prepare(format!("INSERT INTO ty.t (k, c_{ty}) VALUES (?, ?)"))
            .await
            .expect("prepare");
        session
            .execute_unpaged(&insert, (k + 1, want.clone()))
            .await
            .unwrap_or_else(|e| panic!("bind {ty} {want:?}: {e}"));
        let select = session
            .prepare(format!("SELECT c_{ty} FROM ty.t WHERE k = ?"))
            .await
            .expect("prepare select");
        for key in [k, k + 1] {
            let rows = session
                .execute_unpaged(&select, (key,))
                .await
                .expect("select")
                .into_rows_result()
                .expect("rows");
            let (got,): (Option<CqlValue>,) = rows.first_row().expect("a row");
            assert_eq!(got.as_ref(), Some(&want), "{ty} {literal} (key {key})");
        }
        // null
        session
            .execute_unpaged(&insert, (k + 1, None::<CqlValue>))
            .await
            .expect("bind null");
        let rows = session
            .execute_unpaged(&select, (k + 1,))
            .await
            .expect("select")
            .into_rows_result()
            .expect("rows");
        let (got,): (Option<CqlValue>,) = rows.first_row().expect("a row");
        assert_eq!(got, None, "{ty} null");
    }

    // A value the column type does not admit: the server's error, nothing written.
    let err = session
        .query_unpaged("INSERT INTO ty.t (k, c_int) VALUES (9999, 2147483648)", &[])
        .await
        .expect_err("overflow must fail");
    assert!(
        format!("{err}").contains("Unable to make int from '2147483648'"),
        "{err}"
    );
    let rows = session
        .query_unpaged("SELECT k FROM ty.t WHERE k = 9999", &[])
        .await
        .expect("select")
        .into_rows_result()
        .expect("rows");
    assert_eq!(rows.rows_num(), 0);
}

/// Collections (frozen and not, nested), tuples, UDTs and vectors through the scylla driver:
/// CQL literals read back as the expected values, and the same values bound round-trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_driver_round_trips_composite_types() {
    let server = Server::start(&[]);
    let session: Session = SessionBuilder::new()
        .known_node(&server.addr)
        .build()
        .await
        .unwrap_or_else(|e| panic!("connect: {e}\n{}", server.log_text()));
    for ddl in [
        "CREATE KEYSPACE co WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        "CREATE TYPE co.addr (street text, zip int)",
        "CREATE TABLE co.t (k int PRIMARY KEY, l list<int>, s set<text>, m map<text, frozen<list<int>>>, \
         tu tuple<int, text, frozen<set<int>>>, u addr, fu frozen<addr>, vf vector<float, 3>, \
         vt vector<text, 2>, lu list<frozen<addr>>)",
    ] {
        session.query_unpaged(ddl, &[]).await.expect(ddl);
    }
    session.await_schema_agreement().await.expect("agreement");
    let text = |s: &str| CqlValue::Text(s.into());
    let addr = |street: Option<&str>, zip: Option<i32>| CqlValue::UserDefinedType {
        keyspace: "co".into(),
        name: "addr".into(),
        fields: vec![
            ("street".into(), street.map(text)),
            ("zip".into(), zip.map(CqlValue::Int)),
        ],
    };
    let cases: Vec<(&str, &str, CqlValue)> = vec![
        (
            "l",
            "[3, -2147483648, 3]",
            CqlValue::List(vec![
                CqlValue::Int(3),
                CqlValue::Int(i32::MIN),
                CqlValue::Int(3),
            ]),
        ),
        (
            "s",
            "{'b', '', 'é'}",
            CqlValue::Set(vec![text(""), text("b"), text("é")]),
        ),
        (
            "m",
            "{'a': [1, 2], 'b': []}",
            CqlValue::Map(vec![
                (
                    text("a"),
                    CqlValue::List(vec![CqlValue::Int(1), CqlValue::Int(2)]),
                ),
                (text("b"), CqlValue::List(vec![])),
            ]),
        ),
        (
            "tu",
            "(1, null, {2})",
            CqlValue::Tuple(vec![
                Some(CqlValue::Int(1)),
                None,
                Some(CqlValue::Set(vec![CqlValue::Int(2)])),
            ]),
        ),
        ("u", "{street: 'x'}", addr(Some("x"), None)),
        ("fu", "{zip: -1}", addr(None, Some(-1))),
        (
            "vf",
            "[1.5, -0.0, 3e38]",
            CqlValue::Vector(vec![
                CqlValue::Float(1.5),
                CqlValue::Float(-0.0),
                CqlValue::Float(3e38),
            ]),
        ),
        (
            "vt",
            "['', 'ü']",
            CqlValue::Vector(vec![text(""), text("ü")]),
        ),
        (
            "lu",
            "[{street: 's', zip: 1}, {zip: null}]",
            CqlValue::List(vec![addr(Some("s"), Some(1)), addr(None, None)]),
        ),
    ];
    for (i, (col, literal, want)) in cases.into_iter().enumerate() {
        let k = i as i32 * 2;
        session
            .query_unpaged(
                format!("INSERT INTO co.t (k, {col}) VALUES ({k}, {literal})"),
                &[],
            )
            .await
            .unwrap_or_else(|e| panic!("insert {col} {literal}: {e}"));
        let insert = session
            .prepare(format!("INSERT INTO co.t (k, {col}) VALUES (?, ?)"))
            .await
            .expect("prepare");
        session
            .execute_unpaged(&insert, (k + 1, want.clone()))
            .await
            .unwrap_or_else(|e| panic!("bind {col} {want:?}: {e}"));
        for key in [k, k + 1] {
            let rows = session
                .query_unpaged(format!("SELECT {col} FROM co.t WHERE k = {key}"), &[])
                .await
                .expect("select")
                .into_rows_result()
                .expect("rows");
            let (got,): (Option<CqlValue>,) = rows.first_row().expect("a row");
            assert_eq!(got.as_ref(), Some(&want), "{col} {literal} (key {key})");
        }
    }
}
