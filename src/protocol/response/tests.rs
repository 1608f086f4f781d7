use std::net::{IpAddr, SocketAddr};

use bytes::{Bytes, BytesMut};

use super::testing::{decode_response_frame, DecodedResponse};
use super::*;
use crate::protocol::compression::Compression;
use crate::protocol::frame::{flags, Opcode};
use crate::protocol::types::consistency;

fn b(v: &[u8]) -> Bytes {
    Bytes::copy_from_slice(v)
}

fn spec(ks: &str, table: &str, name: &str, ty: ColumnType) -> ColumnSpec {
    ColumnSpec {
        keyspace: ks.into(),
        table: table.into(),
        name: name.into(),
        ty,
    }
}

fn encode(
    version: u8,
    stream: i16,
    resp: &Response,
    extras: &ResponseExtras,
    c: Compression,
) -> BytesMut {
    let mut out = BytesMut::new();
    encode_response(&mut out, version, stream, resp, extras, c).unwrap();
    out
}

fn round_trip(
    version: u8,
    resp: &Response,
    extras: &ResponseExtras,
    c: Compression,
) -> DecodedResponse {
    let mut out = encode(version, 7, resp, extras, c);
    let d = decode_response_frame(&mut out, c).unwrap();
    assert!(out.is_empty(), "exactly one frame");
    assert_eq!(d.header.version, version);
    assert!(d.header.is_response);
    assert_eq!(d.header.opcode, resp.opcode());
    d
}

/// Column types that every version encodes natively.
fn all_native_types() -> Vec<ColumnType> {
    use ColumnType::*;
    vec![
        Custom("org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType,3)".into()),
        Ascii,
        Bigint,
        Blob,
        Boolean,
        Counter,
        Decimal,
        Double,
        Float,
        Int,
        Timestamp,
        Uuid,
        Varchar,
        Varint,
        Timeuuid,
        Inet,
        List(Box::new(Varchar)),
        Map(Box::new(Varchar), Box::new(List(Box::new(Int)))),
        Set(Box::new(Uuid)),
        Udt {
            keyspace: "ks".into(),
            name: "address".into(),
            fields: vec![("street".into(), Varchar), ("zip".into(), Int)],
        },
        Tuple(vec![Int, Varchar, Tuple(vec![Blob])]),
    ]
}

fn rows_sample(version: u8) -> Rows {
    let columns: Vec<ColumnSpec> = all_native_types()
        .into_iter()
        .enumerate()
        .map(|(i, ty)| spec("ks", "t", &format!("c{i}"), ty))
        .collect();
    let mut w = RowsWriter::new(columns.len());
    for row in 0..3u8 {
        for col in 0..columns.len() {
            if col == 1 {
                w.push_null().unwrap();
            } else {
                w.push_value(Some(&[row, col as u8])).unwrap();
            }
        }
    }
    w.into_rows(RowsMetadata {
        encoded: None,
        columns,
        paging_state: Some(b(b"next")),
        no_metadata: false,
        new_metadata_id: (version >= 5).then(|| b(b"meta2")),
    })
    .unwrap()
}

/// One of every response kind for `version`, shaped so that decoding gives back the same value.
pub(crate) fn sample_responses(version: u8) -> Vec<Response> {
    let v5 = version >= 5;
    let reasons: Vec<(IpAddr, u16)> = if v5 {
        vec![
            ("10.0.0.1".parse().unwrap(), 1),
            ("::2".parse().unwrap(), 2),
        ]
    } else {
        vec![]
    };
    let errors = vec![
        ErrorResponse::server("boom"),
        ErrorResponse::protocol("bad frame"),
        ErrorResponse::new(
            error_code::OVERLOADED,
            "Request rate is large: RetryAfterMs=500",
        ),
        ErrorResponse::with_extra(
            "Cannot achieve consistency level QUORUM",
            ErrorExtra::Unavailable {
                cl: consistency::QUORUM,
                required: 2,
                alive: 1,
            },
        ),
        ErrorResponse::with_extra(
            "write timeout",
            ErrorExtra::WriteTimeout {
                cl: consistency::ONE,
                received: 0,
                block_for: 1,
                write_type: "SIMPLE".into(),
                contentions: None,
            },
        ),
        ErrorResponse::with_extra(
            "cas timeout",
            ErrorExtra::WriteTimeout {
                cl: consistency::SERIAL,
                received: 0,
                block_for: 1,
                write_type: "CAS".into(),
                contentions: v5.then_some(3),
            },
        ),
        ErrorResponse::with_extra(
            "read timeout",
            ErrorExtra::ReadTimeout {
                cl: consistency::LOCAL_ONE,
                received: 1,
                block_for: 1,
                data_present: true,
            },
        ),
        ErrorResponse::with_extra(
            "read failure",
            ErrorExtra::ReadFailure {
                cl: consistency::ALL,
                received: 1,
                block_for: 3,
                num_failures: 2,
                reasons: reasons.clone(),
                data_present: false,
            },
        ),
        ErrorResponse::with_extra(
            "write failure",
            ErrorExtra::WriteFailure {
                cl: consistency::ALL,
                received: 1,
                block_for: 3,
                num_failures: 2,
                reasons,
                write_type: "BATCH".into(),
            },
        ),
        ErrorResponse::with_extra(
            "udf failed",
            ErrorExtra::FunctionFailure {
                keyspace: "ks".into(),
                function: "f".into(),
                arg_types: vec!["int".into(), "text".into()],
            },
        ),
        ErrorResponse::already_exists("Cannot add existing table", "ks", "t"),
        ErrorResponse::unprepared("Prepared query with ID ab not found", b(&[0xab; 16])),
        ErrorResponse::with_extra(
            "cas unknown",
            ErrorExtra::CasWriteUnknown {
                cl: consistency::SERIAL,
                received: 1,
                block_for: 2,
            },
        ),
    ];
    let mut out: Vec<Response> = errors.into_iter().map(Response::Error).collect();
    let table_change = SchemaChange {
        change_type: SchemaChangeType::Created,
        target: SchemaChangeTarget::Table {
            keyspace: "ks".into(),
            name: "t".into(),
        },
    };
    out.extend([
        Response::Ready,
        Response::Authenticate("org.apache.cassandra.auth.PasswordAuthenticator".into()),
        Response::Supported(vec![
            ("CQL_VERSION".into(), vec!["3.4.7".into()]),
            ("COMPRESSION".into(), vec!["lz4".into(), "snappy".into()]),
            (
                "PROTOCOL_VERSIONS".into(),
                vec!["3/v3".into(), "4/v4".into(), "5/v5".into()],
            ),
        ]),
        Response::Result(ResultBody::Void),
        Response::Result(ResultBody::Rows(rows_sample(version))),
        Response::Result(ResultBody::Rows(Rows::default())),
        Response::Result(ResultBody::SetKeyspace("ks".into())),
        Response::Result(ResultBody::Prepared(Prepared {
            id: b(&[1; 16]),
            result_metadata_id: v5.then(|| b(&[2; 16])),
            bind_columns: vec![
                spec("ks", "t", "k", ColumnType::Int),
                spec("ks", "t", "c", ColumnType::Varchar),
            ],
            pk_indexes: if version >= 4 { vec![0] } else { vec![] },
            result: RowsMetadata {
                columns: vec![
                    spec("ks", "t", "v", ColumnType::Blob),
                    spec("ks", "u", "w", ColumnType::Bigint),
                ],
                ..RowsMetadata::default()
            },
        })),
        Response::Result(ResultBody::Prepared(Prepared {
            id: b(b"x"),
            result_metadata_id: v5.then(|| b(b"")),
            bind_columns: vec![],
            pk_indexes: vec![],
            result: RowsMetadata::default(),
        })),
        Response::Result(ResultBody::SchemaChange(table_change.clone())),
        Response::Event(Event::TopologyChange {
            change: TopologyChangeType::NewNode,
            addr: "127.0.0.2:9042".parse().unwrap(),
        }),
        Response::Event(Event::StatusChange {
            change: StatusChangeType::Down,
            addr: "[fe80::1]:9042".parse().unwrap(),
        }),
        Response::AuthChallenge(Some(b(b"challenge"))),
        Response::AuthChallenge(None),
        Response::AuthSuccess(None),
        Response::AuthSuccess(Some(Bytes::new())),
    ]);
    for target in [
        SchemaChangeTarget::Keyspace("ks".into()),
        SchemaChangeTarget::Type {
            keyspace: "ks".into(),
            name: "address".into(),
        },
        SchemaChangeTarget::Function {
            keyspace: "ks".into(),
            name: "f".into(),
            arg_types: vec!["int".into()],
        },
        SchemaChangeTarget::Aggregate {
            keyspace: "ks".into(),
            name: "a".into(),
            arg_types: vec![],
        },
    ] {
        out.push(Response::Event(Event::SchemaChange(SchemaChange {
            change_type: SchemaChangeType::Dropped,
            target,
        })));
    }
    out
}

#[test]
fn every_response_kind_round_trips_in_every_version() {
    for version in 3..=5 {
        for resp in sample_responses(version) {
            let d = round_trip(version, &resp, &ResponseExtras::NONE, Compression::None);
            assert_eq!(d.response, resp, "v{version}");
            assert_eq!(d.extras, ResponseExtras::default());
            assert_eq!(d.header.flags, 0);
            let expected_stream = if matches!(resp, Response::Event(_)) {
                -1
            } else {
                7
            };
            assert_eq!(d.header.stream, expected_stream);
        }
    }
}

#[test]
fn compressed_responses_round_trip() {
    for c in [Compression::Lz4, Compression::Snappy] {
        for resp in sample_responses(4) {
            let d = round_trip(4, &resp, &ResponseExtras::NONE, c);
            assert!(d.header.has_flag(flags::COMPRESSION));
            assert_eq!(d.response, resp, "{c:?}");
        }
    }
    // v5 never sets the frame compression flag: compression is done by segments.
    let out = encode(
        5,
        0,
        &Response::Ready,
        &ResponseExtras::NONE,
        Compression::Lz4,
    );
    assert_eq!(&out[..], b"\x85\x00\x00\x00\x02\x00\x00\x00\x00");
}

#[test]
fn extras_are_written_in_spec_order() {
    let extras = ResponseExtras {
        tracing_id: Some([0x11; 16]),
        warnings: vec!["Aggregation query used without partition key".into()],
        custom_payload: vec![("RequestCharge".into(), b(&2.83f64.to_be_bytes()))],
        request_charge: None,
    };
    let resp = Response::Result(ResultBody::Void);
    let out = encode(4, 1, &resp, &extras, Compression::None);
    assert_eq!(
        out[1],
        flags::TRACING | flags::WARNING | flags::CUSTOM_PAYLOAD
    );
    let body = &out[9..];
    assert_eq!(&body[..16], &[0x11; 16], "tracing id first");
    assert_eq!(&body[16..20], b"\x00\x01\x00\x2c", "then the warnings list");
    let d = round_trip(4, &resp, &extras, Compression::None);
    assert_eq!(d.extras, extras);
    assert_eq!(d.response, resp);
    // Compressed, the extras are inside the compressed body.
    let d = round_trip(4, &resp, &extras, Compression::Lz4);
    assert_eq!(d.extras, extras);
    // v3 has no warnings or custom payload.
    let d = round_trip(3, &resp, &extras, Compression::None);
    assert_eq!(d.header.flags, flags::TRACING);
    assert_eq!(d.extras.tracing_id, Some([0x11; 16]));
    assert!(d.extras.warnings.is_empty());
}

#[test]
fn the_request_charge_is_the_first_custom_payload_entry() {
    let charge = 2.83f64.to_be_bytes();
    let other = ("trace".to_string(), b(b"t"));
    let resp = Response::Result(ResultBody::Void);
    for rest in [vec![], vec![other.clone()]] {
        let as_field = ResponseExtras {
            request_charge: Some(charge),
            custom_payload: rest.clone(),
            ..ResponseExtras::NONE
        };
        let mut in_payload = vec![("RequestCharge".to_string(), b(&charge))];
        in_payload.extend(rest);
        let as_entry = ResponseExtras {
            custom_payload: in_payload.clone(),
            ..ResponseExtras::NONE
        };
        for version in [4, 5] {
            let got = encode(version, 3, &resp, &as_field, Compression::None);
            let want = encode(version, 3, &resp, &as_entry, Compression::None);
            assert_eq!(got, want, "v{version}");
            let d = round_trip(version, &resp, &as_field, Compression::None);
            assert_eq!(d.extras.custom_payload, in_payload);
        }
        // v3 has no custom payload.
        let v3 = encode(3, 3, &resp, &as_field, Compression::None);
        assert_eq!(v3[1] & flags::CUSTOM_PAYLOAD, 0);
    }
}

#[test]
fn exact_bytes_of_small_frames() {
    let out = encode(
        4,
        0,
        &Response::Ready,
        &ResponseExtras::NONE,
        Compression::None,
    );
    assert_eq!(&out[..], b"\x84\x00\x00\x00\x02\x00\x00\x00\x00");
    let out = encode(
        4,
        3,
        &Response::Result(ResultBody::Void),
        &ResponseExtras::NONE,
        Compression::None,
    );
    assert_eq!(
        &out[..],
        b"\x84\x00\x00\x03\x08\x00\x00\x00\x04\x00\x00\x00\x01"
    );
    let resp = Response::Error(ErrorResponse::unsupported_version(66));
    let out = encode(4, 5, &resp, &ResponseExtras::NONE, Compression::None);
    let msg =
        b"Invalid or unsupported protocol version (66); supported versions are (3/v3, 4/v4, 5/v5)";
    let mut expected = b"\x84\x00\x00\x05\x00".to_vec();
    expected.extend_from_slice(&(4 + 2 + msg.len() as u32).to_be_bytes());
    expected.extend_from_slice(b"\x00\x00\x00\x0a");
    expected.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    expected.extend_from_slice(msg);
    assert_eq!(&out[..], &expected[..]);
    // Events go on stream -1 whatever stream is passed.
    let ev = Response::Event(Event::StatusChange {
        change: StatusChangeType::Up,
        addr: SocketAddr::from(([127, 0, 0, 1], 9042)),
    });
    let out = encode(4, 42, &ev, &ResponseExtras::NONE, Compression::None);
    assert_eq!(&out[2..4], b"\xff\xff");
    assert_eq!(
        &out[9..],
        b"\x00\x0dSTATUS_CHANGE\x00\x02UP\x04\x7f\x00\x00\x01\x00\x00\x23\x52"
    );
}

#[test]
fn rows_metadata_flags() {
    let cols = vec![
        spec("ks", "t", "a", ColumnType::Int),
        spec("ks", "t", "b", ColumnType::Varchar),
    ];
    let mut out = BytesMut::new();
    RowsMetadata {
        columns: cols.clone(),
        ..RowsMetadata::default()
    }
    .encode(&mut out, 4)
    .unwrap();
    // Global table spec: flags 1, count 2, "ks", "t", then name + type per column.
    assert_eq!(
        &out[..],
        b"\x00\x00\x00\x01\x00\x00\x00\x02\x00\x02ks\x00\x01t\x00\x01a\x00\x09\x00\x01b\x00\x0d"
    );
    // Mixed tables: no global spec, every column carries its table.
    out.clear();
    let mixed = vec![cols[0].clone(), spec("ks", "u", "c", ColumnType::Int)];
    RowsMetadata {
        columns: mixed,
        ..RowsMetadata::default()
    }
    .encode(&mut out, 4)
    .unwrap();
    assert_eq!(&out[..4], b"\x00\x00\x00\x00");
    assert_eq!(&out[8..18], b"\x00\x02ks\x00\x01t\x00\x01a");
    // No metadata with paging state: flags 6, count, paging state, nothing else.
    out.clear();
    RowsMetadata {
        encoded: None,
        columns: cols.clone(),
        paging_state: Some(b(b"p")),
        no_metadata: true,
        new_metadata_id: None,
    }
    .encode(&mut out, 4)
    .unwrap();
    assert_eq!(
        &out[..],
        b"\x00\x00\x00\x06\x00\x00\x00\x02\x00\x00\x00\x01p"
    );
    // v5 metadata changed: flags 1|8, count, new id, then the specs.
    out.clear();
    let md = RowsMetadata {
        encoded: None,
        columns: cols.clone(),
        paging_state: None,
        no_metadata: false,
        new_metadata_id: Some(b(b"id")),
    };
    md.encode(&mut out, 5).unwrap();
    assert_eq!(
        &out[..14],
        b"\x00\x00\x00\x09\x00\x00\x00\x02\x00\x02id\x00\x02"
    );
    // ... which v4 does not know about.
    out.clear();
    md.encode(&mut out, 4).unwrap();
    assert_eq!(&out[..4], b"\x00\x00\x00\x01");
    // Metadata_changed with No_metadata is refused.
    let bad = RowsMetadata {
        no_metadata: true,
        ..md
    };
    assert!(bad.encode(&mut BytesMut::new(), 5).is_err());
}

#[test]
fn rows_metadata_with_encoded_columns_encodes_as_with_the_columns() {
    let global = vec![
        spec("ks", "t", "a", ColumnType::Int),
        spec(
            "ks",
            "t",
            "b",
            ColumnType::List(Box::new(ColumnType::Varchar)),
        ),
    ];
    let mixed = vec![global[0].clone(), spec("ks", "u", "c", ColumnType::Blob)];
    for cols in [global, mixed, Vec::new()] {
        for version in 3..=5 {
            for (paging_state, no_metadata) in [(None, false), (Some(b(b"p")), false), (None, true)]
            {
                let plain = RowsMetadata {
                    columns: cols.clone(),
                    paging_state: paging_state.clone(),
                    no_metadata,
                    ..RowsMetadata::default()
                };
                let encoded = RowsMetadata {
                    columns: Vec::new(),
                    encoded: Some(EncodedColumns::new(&cols, version).unwrap()),
                    ..plain.clone()
                };
                let (mut want, mut got) = (BytesMut::new(), BytesMut::new());
                plain.encode(&mut want, version).unwrap();
                encoded.encode(&mut got, version).unwrap();
                assert_eq!(
                    got, want,
                    "v{version} {cols:?} {paging_state:?} {no_metadata}"
                );
            }
        }
    }
    // Columns encoded for one version are refused by another.
    let v4 = RowsMetadata {
        encoded: Some(EncodedColumns::new(&[spec("k", "t", "a", ColumnType::Int)], 4).unwrap()),
        ..RowsMetadata::default()
    };
    assert!(v4.encode(&mut BytesMut::new(), 5).is_err());
}

#[test]
fn encoded_columns_cache_keeps_one_encoding_per_version() {
    let cache = EncodedColumnsCache::default();
    let cols = [spec("ks", "t", "a", ColumnType::Int)];
    let made = std::cell::Cell::new(0);
    let make = |v| {
        made.set(made.get() + 1);
        EncodedColumns::new(&cols, v).ok()
    };
    for version in [4, 5, 4, 3, 5] {
        let got = cache.get_or_make(version, || make(version)).unwrap();
        assert_eq!(got.version, version);
    }
    assert_eq!(made.get(), 3, "made once per version");
    assert!(cache.get_or_make(2, || make(2)).is_none());
    assert!(cache.get_or_make(6, || make(6)).is_none());
    // A making that gives another version's encoding is not kept.
    let other = EncodedColumnsCache::default();
    assert!(other.get_or_make(4, || make(5)).is_none());
    assert_eq!(other.get_or_make(4, || make(4)).unwrap().version, 4);
}

#[test]
fn no_metadata_rows_decode_with_cells() {
    let mut w = RowsWriter::new(2);
    w.push_value(Some(b"a")).unwrap();
    w.push_with(|buf| buf.extend_from_slice(b"written in place"))
        .unwrap();
    w.push_null().unwrap();
    w.push_value(Some(b"")).unwrap();
    assert!(w.is_row_complete());
    let rows = w
        .into_rows(RowsMetadata {
            columns: vec![
                spec("ks", "t", "a", ColumnType::Blob),
                spec("ks", "t", "b", ColumnType::Blob),
            ],
            no_metadata: true,
            ..RowsMetadata::default()
        })
        .unwrap();
    assert_eq!(rows.rows_count, 2);
    assert_eq!(
        &rows.rows_content[..],
        b"\x00\x00\x00\x01a\x00\x00\x00\x10written in place\xff\xff\xff\xff\x00\x00\x00\x00"
    );
    let resp = Response::Result(ResultBody::Rows(rows.clone()));
    let d = round_trip(4, &resp, &ResponseExtras::NONE, Compression::None);
    let Response::Result(ResultBody::Rows(got)) = d.response else {
        panic!()
    };
    assert!(got.metadata.no_metadata);
    assert!(got.metadata.columns.is_empty());
    assert_eq!(got.rows_count, 2);
    assert_eq!(got.rows_content, rows.rows_content);
}

#[test]
fn rows_writer_guards() {
    let mut w = RowsWriter::new(2);
    w.push_value(Some(b"x")).unwrap();
    assert!(!w.is_row_complete());
    assert_eq!(w.rows_count(), 0);
    assert!(w.clone().finish().is_err(), "incomplete row");
    w.push_null().unwrap();
    assert_eq!(w.rows_count(), 1);
    assert_eq!(w.content_len(), 5 + 4);
    let mut empty = RowsWriter::new(0);
    assert!(empty.push_value(Some(b"x")).is_err());
    empty.push_empty_row().unwrap();
    assert_eq!(empty.finish().unwrap(), (1, Bytes::new()));
}

#[test]
fn prepared_layout_v4() {
    let p = Prepared {
        id: b(b"ID"),
        result_metadata_id: None,
        bind_columns: vec![spec("ks", "t", "k", ColumnType::Int)],
        pk_indexes: vec![0],
        result: RowsMetadata::default(),
    };
    let out = encode(
        4,
        0,
        &Response::Result(ResultBody::Prepared(p.clone())),
        &ResponseExtras::NONE,
        Compression::None,
    );
    let expected: &[u8] = b"\x00\x00\x00\x04\x00\x02ID\
        \x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\
        \x00\x02ks\x00\x01t\x00\x01k\x00\x09\
        \x00\x00\x00\x00\x00\x00\x00\x00";
    assert_eq!(&out[9..], expected);
    // v5 needs the result metadata id.
    let mut buf = BytesMut::from(&b"keep"[..]);
    let r = encode_response(
        &mut buf,
        5,
        0,
        &Response::Result(ResultBody::Prepared(p)),
        &ResponseExtras::NONE,
        Compression::None,
    );
    assert!(r.is_err());
    assert_eq!(&buf[..], b"keep", "output restored on error");
}

#[test]
fn legacy_types_for_old_versions() {
    let cols = vec![
        spec("ks", "t", "d", ColumnType::Duration),
        spec(
            "ks",
            "t",
            "s",
            ColumnType::List(Box::new(ColumnType::Smallint)),
        ),
        spec("ks", "t", "x", ColumnType::Date),
    ];
    let resp = Response::Result(ResultBody::Rows(Rows {
        metadata: RowsMetadata {
            columns: cols.clone(),
            ..RowsMetadata::default()
        },
        ..Rows::default()
    }));
    let custom = |s: &str| ColumnType::Custom(format!("org.apache.cassandra.db.marshal.{s}"));
    let types = |v: u8| {
        let Response::Result(ResultBody::Rows(r)) =
            round_trip(v, &resp, &ResponseExtras::NONE, Compression::None).response
        else {
            panic!()
        };
        r.metadata
            .columns
            .into_iter()
            .map(|c| c.ty)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        types(5),
        vec![cols[0].ty.clone(), cols[1].ty.clone(), ColumnType::Date]
    );
    assert_eq!(
        types(4),
        vec![custom("DurationType"), cols[1].ty.clone(), ColumnType::Date]
    );
    assert_eq!(
        types(3),
        vec![
            custom("DurationType"),
            ColumnType::List(Box::new(custom("ShortType"))),
            custom("SimpleDateType")
        ]
    );
}

#[test]
fn error_layouts_differ_by_version() {
    let e = ErrorResponse::with_extra(
        "f",
        ErrorExtra::ReadFailure {
            cl: consistency::ONE,
            received: 0,
            block_for: 1,
            num_failures: 1,
            reasons: vec![("1.2.3.4".parse().unwrap(), 0)],
            data_present: true,
        },
    );
    let resp = Response::Error(e);
    let v4 = encode(4, 0, &resp, &ResponseExtras::NONE, Compression::None);
    assert_eq!(
        &v4[9 + 7..],
        b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01\x01"
    );
    let v5 = encode(5, 0, &resp, &ResponseExtras::NONE, Compression::None);
    assert_eq!(
        &v5[9 + 7..],
        b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01\x04\x01\x02\x03\x04\x00\x00\x01"
    );
    // A mismatched code/extra is refused.
    let bad = Response::Error(ErrorResponse {
        code: error_code::SERVER,
        message: "x".into(),
        extra: ErrorExtra::Unprepared { id: b(b"1") },
    });
    assert!(encode_response(
        &mut BytesMut::new(),
        4,
        0,
        &bad,
        &ResponseExtras::NONE,
        Compression::None
    )
    .is_err());
}

#[test]
fn too_long_strings_fail_cleanly() {
    let resp = Response::Result(ResultBody::SetKeyspace("k".repeat(70_000)));
    let mut out = BytesMut::new();
    let err = encode_response(
        &mut out,
        4,
        0,
        &resp,
        &ResponseExtras::NONE,
        Compression::None,
    )
    .unwrap_err();
    assert!(matches!(
        err,
        crate::protocol::types::EncodeError::TooLong { .. }
    ));
    assert!(out.is_empty());
}

#[test]
fn decoder_sees_opcodes() {
    assert_eq!(Response::Ready.opcode(), Opcode::Ready);
    assert_eq!(Response::AuthSuccess(None).opcode(), Opcode::AuthSuccess);
}
