//! Conversions between the query layer's results and the protocol's responses.

use crate::cql::types::CqlType;
use crate::protocol::request::{QueryParams, Request, RequestEnvelope, Value, Values};
use crate::protocol::response::{
    ColumnSpec, ColumnType, EncodedColumns, ErrorExtra, ErrorResponse, Prepared as PPrepared,
    ResultBody, Rows as PRows, RowsMetadata, SchemaChange as PSchemaChange, SchemaChangeTarget,
    SchemaChangeType,
};
use crate::query::{Binds, BoundValue, Outcome, Prepared, QueryError, QueryOptions, ResultColumn};
use crate::schema::ddl::{ChangeKind, ChangeTarget, SchemaChange};

pub fn column_type(ty: &CqlType) -> ColumnType {
    match ty {
        CqlType::Ascii => ColumnType::Ascii,
        CqlType::Bigint => ColumnType::Bigint,
        CqlType::Blob => ColumnType::Blob,
        CqlType::Boolean => ColumnType::Boolean,
        CqlType::Counter => ColumnType::Counter,
        CqlType::Date => ColumnType::Date,
        CqlType::Decimal => ColumnType::Decimal,
        CqlType::Double => ColumnType::Double,
        CqlType::Duration => ColumnType::Duration,
        CqlType::Float => ColumnType::Float,
        CqlType::Inet => ColumnType::Inet,
        CqlType::Int => ColumnType::Int,
        CqlType::Smallint => ColumnType::Smallint,
        CqlType::Text => ColumnType::Varchar,
        CqlType::Time => ColumnType::Time,
        CqlType::Timestamp => ColumnType::Timestamp,
        CqlType::Timeuuid => ColumnType::Timeuuid,
        CqlType::Tinyint => ColumnType::Tinyint,
        CqlType::Uuid => ColumnType::Uuid,
        CqlType::Varint => ColumnType::Varint,
        CqlType::Custom(c) => ColumnType::Custom(c.clone()),
        CqlType::List(t) => ColumnType::List(Box::new(column_type(t))),
        CqlType::Set(t) => ColumnType::Set(Box::new(column_type(t))),
        CqlType::Map(k, v) => ColumnType::Map(Box::new(column_type(k)), Box::new(column_type(v))),
        CqlType::Tuple(items) => ColumnType::Tuple(items.iter().map(column_type).collect()),
        CqlType::Udt(u) => ColumnType::Udt {
            keyspace: u.keyspace.clone(),
            name: u.name.clone(),
            fields: u
                .fields
                .iter()
                .map(|(n, t)| (n.clone(), column_type(t)))
                .collect(),
        },
        CqlType::Vector(t, n) => ColumnType::Custom(format!(
            "org.apache.cassandra.db.marshal.VectorType({},{n})",
            marshal_class(t)
        )),
        CqlType::Frozen(t) => column_type(t),
    }
}

/// Cassandra's marshal class name of a type (used for vector element types).
fn marshal_class(ty: &CqlType) -> String {
    let base = "org.apache.cassandra.db.marshal.";
    let simple = match ty.unfrozen() {
        CqlType::Ascii => "AsciiType",
        CqlType::Bigint => "LongType",
        CqlType::Blob => "BytesType",
        CqlType::Boolean => "BooleanType",
        CqlType::Double => "DoubleType",
        CqlType::Float => "FloatType",
        CqlType::Int => "Int32Type",
        CqlType::Text => "UTF8Type",
        CqlType::Timestamp => "TimestampType",
        CqlType::Uuid => "UUIDType",
        CqlType::Timeuuid => "TimeUUIDType",
        CqlType::Smallint => "ShortType",
        CqlType::Tinyint => "ByteType",
        CqlType::Varint => "IntegerType",
        CqlType::Decimal => "DecimalType",
        CqlType::Date => "SimpleDateType",
        CqlType::Time => "TimeType",
        CqlType::Inet => "InetAddressType",
        CqlType::Duration => "DurationType",
        CqlType::Counter => "CounterColumnType",
        composite => {
            let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
            let list = |ts: &[&CqlType]| {
                ts.iter()
                    .map(|t| marshal_class(t))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let inner = match composite {
                CqlType::List(t) => format!("ListType({})", list(&[t])),
                CqlType::Set(t) => format!("SetType({})", list(&[t])),
                CqlType::Map(k, v) => format!("MapType({})", list(&[k, v])),
                CqlType::Tuple(items) => {
                    format!("TupleType({})", list(&items.iter().collect::<Vec<_>>()))
                }
                CqlType::Vector(t, n) => format!("VectorType({},{n})", list(&[t])),
                CqlType::Udt(u) => format!(
                    "UserType({},{}{})",
                    u.keyspace,
                    hex(&u.name),
                    u.fields
                        .iter()
                        .map(|(n, t)| format!(",{}:{}", hex(n), marshal_class(t)))
                        .collect::<String>()
                ),
                CqlType::Custom(c) => return c.clone(),
                _ => "BytesType".into(),
            };
            return if ty.is_frozen() {
                format!("{base}FrozenType({base}{inner})")
            } else {
                format!("{base}{inner}")
            };
        }
    };
    format!("{base}{simple}")
}

pub fn specs(cols: &[ResultColumn]) -> Vec<ColumnSpec> {
    cols.iter()
        .map(|c| ColumnSpec {
            keyspace: c.keyspace.clone(),
            table: c.table.clone(),
            name: c.name.clone(),
            ty: column_type(&c.ty),
        })
        .collect()
}

pub fn schema_change(c: &SchemaChange) -> PSchemaChange {
    PSchemaChange {
        change_type: match c.change {
            ChangeKind::Created => SchemaChangeType::Created,
            ChangeKind::Updated => SchemaChangeType::Updated,
            ChangeKind::Dropped => SchemaChangeType::Dropped,
        },
        target: match &c.target {
            ChangeTarget::Keyspace(k) => SchemaChangeTarget::Keyspace(k.clone()),
            ChangeTarget::Table(k, t) => SchemaChangeTarget::Table {
                keyspace: k.clone(),
                name: t.clone(),
            },
            ChangeTarget::Type(k, t) => SchemaChangeTarget::Type {
                keyspace: k.clone(),
                name: t.clone(),
            },
        },
    }
}

/// The result body of an outcome; `encoded`: its rows' columns already encoded for the
/// response's version (a prepared SELECT's, `call.rs`).
pub fn outcome(o: Outcome, skip_metadata: bool, encoded: Option<EncodedColumns>) -> ResultBody {
    match o {
        Outcome::Void => ResultBody::Void,
        Outcome::SetKeyspace(k) => ResultBody::SetKeyspace(k),
        Outcome::SchemaChange(c) => ResultBody::SchemaChange(schema_change(&c)),
        Outcome::Rows(r) => ResultBody::Rows(PRows {
            metadata: RowsMetadata {
                columns: match encoded {
                    Some(_) => Vec::new(),
                    None => specs(&r.columns),
                },
                encoded,
                paging_state: r.paging_state,
                no_metadata: skip_metadata,
                new_metadata_id: None,
            },
            rows_count: r.count,
            rows_content: r.content.freeze(),
        }),
    }
}

/// A prepared statement's result columns encoded for `version`, made once per version (see
/// `EncodedColumns`); None when they cannot be encoded (then each response tries and fails).
pub fn encoded_columns(p: &Prepared, version: u8) -> Option<EncodedColumns> {
    let make = || EncodedColumns::new(&specs(&p.result_columns), version).ok();
    p.encoded_columns.get_or_make(version, make).cloned()
}

/// The v5 result metadata id: a digest of the result columns.
pub fn result_metadata_id(p: &Prepared) -> bytes::Bytes {
    use md5::{Digest, Md5};
    let mut h = Md5::new();
    for c in p.result_columns.iter() {
        h.update(c.name.as_bytes());
        h.update(c.ty.to_string().as_bytes());
    }
    bytes::Bytes::copy_from_slice(&h.finalize())
}

pub fn prepared(p: &Prepared, version: u8) -> ResultBody {
    ResultBody::Prepared(PPrepared {
        id: p.id.clone(),
        result_metadata_id: (version >= 5).then(|| result_metadata_id(p)),
        bind_columns: specs(&p.bind_columns),
        pk_indexes: p.pk_indexes.clone(),
        result: RowsMetadata {
            encoded: None,
            columns: specs(&p.result_columns),
            paging_state: None,
            no_metadata: p.result_columns.is_empty(),
            new_metadata_id: None,
        },
    })
}

pub fn error(e: &QueryError) -> ErrorResponse {
    match e {
        QueryError::AlreadyExists {
            message,
            keyspace,
            table,
        } => ErrorResponse::with_extra(
            message.clone(),
            ErrorExtra::AlreadyExists {
                keyspace: keyspace.clone(),
                table: table.clone(),
            },
        ),
        QueryError::Unprepared(id) => ErrorResponse::unprepared(e.to_string(), id.clone()),
        // The connection waits and retries held requests; should one reach here, it is a 429.
        QueryError::Held { retry_after_ms } => ErrorResponse::new(
            e.code(),
            QueryError::overloaded(*retry_after_ms).to_string(),
        ),
        // Consistency ONE, no replica alive (a forwarded NotOwner that found no owner).
        QueryError::Unavailable(m)
        | QueryError::NotOwner { message: m, .. }
        | QueryError::Spans { message: m, .. } => ErrorResponse::with_extra(
            m.clone(),
            ErrorExtra::Unavailable {
                cl: 0x0001,
                required: 1,
                alive: 0,
            },
        ),
        // Consistency ONE, no replica answered in time.
        QueryError::WriteTimeout(m, write_type) => ErrorResponse::with_extra(
            m.clone(),
            ErrorExtra::WriteTimeout {
                cl: 0x0001,
                received: 0,
                block_for: 1,
                write_type: write_type.as_str().into(),
                contentions: None,
            },
        ),
        QueryError::ReadTimeout(m) => ErrorResponse::with_extra(
            m.clone(),
            ErrorExtra::ReadTimeout {
                cl: 0x0001,
                received: 0,
                block_for: 1,
                data_present: false,
            },
        ),
        QueryError::FunctionFailure {
            message,
            function,
            arg_types,
        } => ErrorResponse::with_extra(
            message.clone(),
            ErrorExtra::FunctionFailure {
                keyspace: "system".into(),
                function: function.clone(),
                arg_types: arg_types.clone(),
            },
        ),
        // The code and the text are all these carry.
        QueryError::Syntax(_)
        | QueryError::Invalid(_)
        | QueryError::Config(_)
        | QueryError::Unauthorized(_)
        | QueryError::Server(_)
        | QueryError::Overloaded { .. } => ErrorResponse::new(e.code(), e.to_string()),
    }
}

// Requests' parameters as the engine takes them.

pub(super) fn binds(values: &Values) -> Binds {
    let conv = |v: &Value| match v {
        Value::Null => BoundValue::Null,
        Value::Unset => BoundValue::Unset,
        Value::Set(b) => BoundValue::Value(b.clone()),
    };
    match values {
        Values::None => Binds::None,
        Values::Positional(v) => Binds::Positional(v.iter().map(conv).collect()),
        Values::Named(v) => Binds::Named(v.iter().map(|(n, x)| (n.clone(), conv(x))).collect()),
    }
}

pub(super) fn options(p: &QueryParams) -> QueryOptions {
    QueryOptions {
        binds: binds(&p.values),
        page_size: p.page_size,
        paging_state: p.paging_state.clone(),
        timestamp: p.timestamp,
        // SERIAL (0x0008) and LOCAL_SERIAL (0x0009) reads.
        serial: matches!(p.consistency, 0x0008 | 0x0009),
        keyspace: p.keyspace.clone(),
        ..Default::default()
    }
}

/// The options of a QUERY/EXECUTE/BATCH (PREPARE: none).
pub(super) fn request_options(env: &RequestEnvelope) -> QueryOptions {
    match &env.request {
        Request::Query(q) => options(&q.params),
        Request::Execute(e) => options(&e.params),
        Request::Batch(b) => QueryOptions {
            timestamp: b.timestamp,
            keyspace: b.keyspace.clone(),
            batch_kind: Some(match b.kind {
                crate::protocol::request::batch_kind::UNLOGGED => {
                    crate::cql::ast::BatchKind::Unlogged
                }
                crate::protocol::request::batch_kind::COUNTER => {
                    crate::cql::ast::BatchKind::Counter
                }
                _ => crate::cql::ast::BatchKind::Logged,
            }),
            ..Default::default()
        },
        _ => QueryOptions::default(),
    }
}
