//! Request messages (spec section 4.1): decoding for the server, encoding for clients and tests.
//!
//! [`decode_request`] takes a frame header and its (already decompressed) body and returns a
//! [`RequestEnvelope`]. Bound values are `Bytes` slices of the body. Every failure is a
//! [`RequestError`] whose `Display` text is suitable for a Protocol error (0x000A) sent back on
//! the request's stream; such errors do not break the connection's framing.
//!
//! Layout differences by version: QUERY/EXECUTE/BATCH flags are a `[byte]` before v5 and an
//! `[int]` in v5 (which adds the keyspace 0x80 and now_in_seconds 0x100 flags); v5 PREPARE has
//! a flags `[int]` with an optional keyspace; v5 EXECUTE carries the result metadata id.

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};

use super::frame::{flags, FrameHeader, Opcode, HEADER_LEN};
pub use super::types::Value;
use super::types::*;

/// QUERY/EXECUTE/BATCH parameter flags.
pub mod query_flags {
    /// Values are present.
    pub const VALUES: u32 = 0x01;
    /// Skip the result metadata in the RESULT.
    pub const SKIP_METADATA: u32 = 0x02;
    /// A page size is present.
    pub const PAGE_SIZE: u32 = 0x04;
    /// A paging state is present.
    pub const PAGING_STATE: u32 = 0x08;
    /// A serial consistency is present.
    pub const SERIAL_CONSISTENCY: u32 = 0x10;
    /// A default timestamp is present.
    pub const DEFAULT_TIMESTAMP: u32 = 0x20;
    /// Values are preceded by names.
    pub const NAMES_FOR_VALUES: u32 = 0x40;
    /// v5: a keyspace is present.
    pub const KEYSPACE: u32 = 0x80;
    /// v5: now_in_seconds is present.
    pub const NOW_IN_SECONDS: u32 = 0x100;
}

/// v5 PREPARE flag: a keyspace follows the query.
pub const PREPARE_WITH_KEYSPACE: u32 = 0x01;

/// Bound values of a QUERY or EXECUTE.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Values {
    /// No values (flag 0x01 unset).
    #[default]
    None,
    /// Values in bind-marker order.
    Positional(Vec<Value>),
    /// Values with the names of their markers (flag 0x40).
    Named(Vec<(String, Value)>),
}

impl Values {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Values::None => 0,
            Values::Positional(v) => v.len(),
            Values::Named(v) => v.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The `<query_parameters>` of QUERY and EXECUTE.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryParams {
    /// Consistency level code (see [`super::types::consistency`]).
    pub consistency: u16,
    /// Bound values.
    pub values: Values,
    /// Flag 0x02: the client wants the RESULT rows without column metadata.
    pub skip_metadata: bool,
    /// Flag 0x04: requested page size (a value <= 0 means no paging).
    pub page_size: Option<i32>,
    /// Flag 0x08: paging state returned by a previous page (`None` if absent or null).
    pub paging_state: Option<Bytes>,
    /// Flag 0x10: serial consistency for conditional updates.
    pub serial_consistency: Option<u16>,
    /// Flag 0x20: default timestamp in microseconds.
    pub timestamp: Option<i64>,
    /// v5 flag 0x80: keyspace to run the query in.
    pub keyspace: Option<String>,
    /// v5 flag 0x100: "now" in seconds, for testing TTLs.
    pub now_in_seconds: Option<i32>,
}

/// A QUERY request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The CQL text.
    pub query: String,
    /// Its parameters.
    pub params: QueryParams,
}

/// A PREPARE request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepare {
    /// The CQL text to prepare.
    pub query: String,
    /// v5: keyspace the statement is prepared in.
    pub keyspace: Option<String>,
}

/// An EXECUTE request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execute {
    /// Prepared statement id (`[short bytes]`).
    pub id: Bytes,
    /// v5: result metadata id the client holds (always present in v5, `None` before).
    pub result_metadata_id: Option<Bytes>,
    /// Parameters.
    pub params: QueryParams,
}

/// What a batch statement runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchStatementKind {
    /// Kind 0: a CQL string.
    Query(String),
    /// Kind 1: a prepared statement id.
    Prepared(Bytes),
}

/// One statement of a BATCH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchStatement {
    /// Query text or prepared id.
    pub kind: BatchStatementKind,
    /// Positional bound values.
    pub values: Vec<Value>,
}

/// Batch types.
pub mod batch_kind {
    /// Logged batch.
    pub const LOGGED: u8 = 0;
    /// Unlogged batch.
    pub const UNLOGGED: u8 = 1;
    /// Counter batch.
    pub const COUNTER: u8 = 2;
}

/// A BATCH request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// 0 logged, 1 unlogged, 2 counter (see [`batch_kind`]).
    pub kind: u8,
    /// The statements.
    pub statements: Vec<BatchStatement>,
    /// Consistency level code.
    pub consistency: u16,
    /// Flag 0x10.
    pub serial_consistency: Option<u16>,
    /// Flag 0x20: default timestamp in microseconds.
    pub timestamp: Option<i64>,
    /// v5 flag 0x80.
    pub keyspace: Option<String>,
    /// v5 flag 0x100.
    pub now_in_seconds: Option<i32>,
}

/// A decoded request message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// STARTUP with its options (`CQL_VERSION`, `COMPRESSION`, `DRIVER_NAME`, ...).
    Startup(HashMap<String, String>),
    /// OPTIONS.
    Options,
    /// QUERY.
    Query(Query),
    /// PREPARE.
    Prepare(Prepare),
    /// EXECUTE.
    Execute(Execute),
    /// BATCH.
    Batch(Batch),
    /// REGISTER with the event types (`TOPOLOGY_CHANGE`, `STATUS_CHANGE`, `SCHEMA_CHANGE`).
    Register(Vec<String>),
    /// AUTH_RESPONSE with its SASL token (`None` if null).
    AuthResponse(Option<Bytes>),
}

impl Request {
    /// The opcode this request travels under.
    pub fn opcode(&self) -> Opcode {
        match self {
            Request::Startup(_) => Opcode::Startup,
            Request::Options => Opcode::Options,
            Request::Query(_) => Opcode::Query,
            Request::Prepare(_) => Opcode::Prepare,
            Request::Execute(_) => Opcode::Execute,
            Request::Batch(_) => Opcode::Batch,
            Request::Register(_) => Opcode::Register,
            Request::AuthResponse(_) => Opcode::AuthResponse,
        }
    }
}

/// A decoded request with its frame-level information.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestEnvelope {
    /// Protocol version of the frame.
    pub version: u8,
    /// Stream id to answer on.
    pub stream: i16,
    /// Header flag 0x02: the client asks for tracing.
    pub tracing: bool,
    /// Header flag 0x04: the custom payload that preceded the message.
    pub custom_payload: Option<Vec<(String, Bytes)>>,
    /// The message.
    pub request: Request,
}

/// A request that cannot be decoded. All variants should be answered with a Protocol error
/// (0x000A) carrying `to_string()` on the request's stream; the connection stays usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Malformed body (truncated, bad UTF-8, bad length, unknown consistency, ...).
    #[error("{0}")]
    Decode(#[from] DecodeError),
    /// The frame has the response direction bit set.
    #[error("Wrong message direction: expected a request, got a response frame (opcode {0:#04x})")]
    WrongDirection(u8),
    /// The opcode is not a request (a response opcode or an unknown byte).
    #[error("Unknown or unexpected opcode {0:#04x} for a request")]
    UnexpectedOpcode(u8),
    /// A BATCH with a type other than 0, 1, 2.
    #[error("Invalid BATCH message type {0}")]
    InvalidBatchType(u8),
    /// A batch statement kind other than 0 or 1.
    #[error("Invalid query kind in BATCH messages. Must be 0 or 1 but got {0}")]
    InvalidBatchStatementKind(u8),
    /// BATCH with the names-for-values flag, which Cassandra does not support.
    #[error("Names for bind variables in batch is not supported")]
    NamedBatchValues,
    /// A default timestamp of `i64::MIN`, which Cassandra rejects.
    #[error("Out of bound timestamp, must be in [{min}, {max}] (got {got})", min = i64::MIN + 1, max = i64::MAX)]
    TimestampOutOfBounds {
        /// The timestamp received.
        got: i64,
    },
}

impl RequestError {
    /// The error code to answer with: always Protocol error (0x000A).
    pub fn error_code(&self) -> i32 {
        super::response::error_code::PROTOCOL
    }
}

/// Reads QUERY/EXECUTE/BATCH flags: a byte before v5, an int in v5.
fn read_flags(buf: &mut Bytes, version: u8) -> DecodeResult<u32> {
    if version >= 5 {
        Ok(read_int(buf)? as u32)
    } else {
        Ok(read_byte(buf)?.into())
    }
}

fn read_timestamp(buf: &mut Bytes) -> Result<i64, RequestError> {
    let ts = read_long(buf)?;
    if ts == i64::MIN {
        return Err(RequestError::TimestampOutOfBounds { got: ts });
    }
    Ok(ts)
}

fn read_query_params(buf: &mut Bytes, version: u8) -> Result<QueryParams, RequestError> {
    let consistency = read_consistency(buf)?;
    let flags = read_flags(buf, version)?;
    let has = |f: u32| flags & f != 0;
    let values = if has(query_flags::VALUES) {
        let n = read_short(buf)? as usize;
        if has(query_flags::NAMES_FOR_VALUES) {
            // Each named value takes at least a 2-byte name length and a 4-byte value length.
            if n.saturating_mul(6) > buf.len() {
                return Err(DecodeError::TooManyElements {
                    what: "named [value] list",
                    count: n,
                    remaining: buf.len(),
                }
                .into());
            }
            let mut named = Vec::with_capacity(n);
            for _ in 0..n {
                let name = read_string(buf)?;
                let value = read_value(buf)?;
                named.push((name, value));
            }
            Values::Named(named)
        } else {
            Values::Positional(read_values(buf, n)?)
        }
    } else {
        Values::None
    };
    let mut params = QueryParams {
        consistency,
        values,
        skip_metadata: has(query_flags::SKIP_METADATA),
        ..QueryParams::default()
    };
    if has(query_flags::PAGE_SIZE) {
        params.page_size = Some(read_int(buf)?);
    }
    if has(query_flags::PAGING_STATE) {
        params.paging_state = read_bytes(buf)?;
    }
    if has(query_flags::SERIAL_CONSISTENCY) {
        params.serial_consistency = Some(read_consistency(buf)?);
    }
    if has(query_flags::DEFAULT_TIMESTAMP) {
        params.timestamp = Some(read_timestamp(buf)?);
    }
    if version >= 5 {
        if has(query_flags::KEYSPACE) {
            params.keyspace = Some(read_string(buf)?);
        }
        if has(query_flags::NOW_IN_SECONDS) {
            params.now_in_seconds = Some(read_int(buf)?);
        }
    }
    Ok(params)
}

fn read_batch(buf: &mut Bytes, version: u8) -> Result<Batch, RequestError> {
    let kind = read_byte(buf)?;
    if kind > batch_kind::COUNTER {
        return Err(RequestError::InvalidBatchType(kind));
    }
    let n = read_short(buf)? as usize;
    // A statement takes at least 1 (kind) + 2 (short bytes id) + 2 (value count) bytes.
    if n.saturating_mul(5) > buf.len() {
        return Err(DecodeError::TooManyElements {
            what: "BATCH statement list",
            count: n,
            remaining: buf.len(),
        }
        .into());
    }
    let mut statements = Vec::with_capacity(n);
    for _ in 0..n {
        let stmt_kind = match read_byte(buf)? {
            0 => BatchStatementKind::Query(read_long_string(buf)?),
            1 => BatchStatementKind::Prepared(read_short_bytes(buf)?),
            other => return Err(RequestError::InvalidBatchStatementKind(other)),
        };
        let count = read_short(buf)? as usize;
        let values = read_values(buf, count)?;
        statements.push(BatchStatement {
            kind: stmt_kind,
            values,
        });
    }
    let consistency = read_consistency(buf)?;
    let flags = read_flags(buf, version)?;
    if flags & query_flags::NAMES_FOR_VALUES != 0 {
        return Err(RequestError::NamedBatchValues);
    }
    let mut batch = Batch {
        kind,
        statements,
        consistency,
        serial_consistency: None,
        timestamp: None,
        keyspace: None,
        now_in_seconds: None,
    };
    if flags & query_flags::SERIAL_CONSISTENCY != 0 {
        batch.serial_consistency = Some(read_consistency(buf)?);
    }
    if flags & query_flags::DEFAULT_TIMESTAMP != 0 {
        batch.timestamp = Some(read_timestamp(buf)?);
    }
    if version >= 5 {
        if flags & query_flags::KEYSPACE != 0 {
            batch.keyspace = Some(read_string(buf)?);
        }
        if flags & query_flags::NOW_IN_SECONDS != 0 {
            batch.now_in_seconds = Some(read_int(buf)?);
        }
    }
    Ok(batch)
}

/// Decodes a request frame body.
///
/// `body` must already be decompressed (pre-v5 frames with the COMPRESSION flag); the
/// COMPRESSION flag itself is ignored here. If the CUSTOM_PAYLOAD flag is set, the `[bytes map]`
/// that precedes the message is decoded into `custom_payload`. Bytes after the end of the
/// message are ignored, as the spec asks. Response frames and non-request opcodes are errors.
pub fn decode_request(header: &FrameHeader, body: Bytes) -> Result<RequestEnvelope, RequestError> {
    if header.is_response {
        return Err(RequestError::WrongDirection(header.opcode.as_u8()));
    }
    let mut buf = body;
    let custom_payload = if header.has_flag(flags::CUSTOM_PAYLOAD) {
        Some(read_bytes_map(&mut buf)?)
    } else {
        None
    };
    let version = header.version;
    let buf = &mut buf;
    let request = match header.opcode {
        Opcode::Startup => Request::Startup(read_string_map(buf)?.into_iter().collect()),
        Opcode::Options => Request::Options,
        Opcode::Query => {
            let query = read_long_string(buf)?;
            let params = read_query_params(buf, version)?;
            Request::Query(Query { query, params })
        }
        Opcode::Prepare => {
            let query = read_long_string(buf)?;
            let mut keyspace = None;
            if version >= 5 {
                let flags = read_int(buf)? as u32;
                if flags & PREPARE_WITH_KEYSPACE != 0 {
                    keyspace = Some(read_string(buf)?);
                }
            }
            Request::Prepare(Prepare { query, keyspace })
        }
        Opcode::Execute => {
            let id = read_short_bytes(buf)?;
            let result_metadata_id = if version >= 5 {
                Some(read_short_bytes(buf)?)
            } else {
                None
            };
            let params = read_query_params(buf, version)?;
            Request::Execute(Execute {
                id,
                result_metadata_id,
                params,
            })
        }
        Opcode::Batch => Request::Batch(read_batch(buf, version)?),
        Opcode::Register => Request::Register(read_string_list(buf)?),
        Opcode::AuthResponse => Request::AuthResponse(read_bytes(buf)?),
        other => return Err(RequestError::UnexpectedOpcode(other.as_u8())),
    };
    Ok(RequestEnvelope {
        version,
        stream: header.stream,
        tracing: header.has_flag(flags::TRACING),
        custom_payload,
        request,
    })
}

// ---------------------------------------------------------------------------------------------
// Encoding (clients, tests)
// ---------------------------------------------------------------------------------------------

fn write_flags(out: &mut BytesMut, version: u8, flags: u32) -> Result<(), EncodeError> {
    if version >= 5 {
        out.put_u32(flags);
    } else {
        let b = u8::try_from(flags)
            .map_err(|_| EncodeError::Invalid("v5-only query flags used before v5"))?;
        out.put_u8(b);
    }
    Ok(())
}

fn write_query_params(out: &mut BytesMut, version: u8, p: &QueryParams) -> Result<(), EncodeError> {
    use query_flags::*;
    let mut f = 0u32;
    match &p.values {
        Values::None => {}
        Values::Positional(_) => f |= VALUES,
        Values::Named(_) => f |= VALUES | NAMES_FOR_VALUES,
    }
    if p.skip_metadata {
        f |= SKIP_METADATA;
    }
    if p.page_size.is_some() {
        f |= PAGE_SIZE;
    }
    if p.paging_state.is_some() {
        f |= PAGING_STATE;
    }
    if p.serial_consistency.is_some() {
        f |= SERIAL_CONSISTENCY;
    }
    if p.timestamp.is_some() {
        f |= DEFAULT_TIMESTAMP;
    }
    if p.keyspace.is_some() {
        f |= KEYSPACE;
    }
    if p.now_in_seconds.is_some() {
        f |= NOW_IN_SECONDS;
    }
    write_consistency(out, p.consistency);
    write_flags(out, version, f)?;
    match &p.values {
        Values::None => {}
        Values::Positional(vs) => {
            write_short_count(out, vs.len(), "[value] list")?;
            for v in vs {
                write_value(out, v)?;
            }
        }
        Values::Named(vs) => {
            write_short_count(out, vs.len(), "[value] list")?;
            for (name, v) in vs {
                write_string(out, name)?;
                write_value(out, v)?;
            }
        }
    }
    if let Some(ps) = p.page_size {
        write_int(out, ps);
    }
    if let Some(state) = &p.paging_state {
        write_bytes(out, Some(state))?;
    }
    if let Some(sc) = p.serial_consistency {
        write_consistency(out, sc);
    }
    if let Some(ts) = p.timestamp {
        write_long(out, ts);
    }
    if let Some(ks) = &p.keyspace {
        write_string(out, ks)?;
    }
    if let Some(now) = p.now_in_seconds {
        write_int(out, now);
    }
    Ok(())
}

fn write_request_body(out: &mut BytesMut, version: u8, req: &Request) -> Result<(), EncodeError> {
    match req {
        Request::Startup(options) => {
            let mut pairs: Vec<(&str, &str)> = options
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            pairs.sort();
            write_string_map(out, &pairs)?;
        }
        Request::Options => {}
        Request::Query(q) => {
            write_long_string(out, &q.query)?;
            write_query_params(out, version, &q.params)?;
        }
        Request::Prepare(p) => {
            write_long_string(out, &p.query)?;
            if version >= 5 {
                match &p.keyspace {
                    Some(ks) => {
                        write_int(out, PREPARE_WITH_KEYSPACE as i32);
                        write_string(out, ks)?;
                    }
                    None => write_int(out, 0),
                }
            } else if p.keyspace.is_some() {
                return Err(EncodeError::Invalid("PREPARE keyspace needs protocol v5"));
            }
        }
        Request::Execute(e) => {
            write_short_bytes(out, &e.id)?;
            if version >= 5 {
                let id = e
                    .result_metadata_id
                    .as_ref()
                    .ok_or(EncodeError::Invalid("v5 EXECUTE needs result_metadata_id"))?;
                write_short_bytes(out, id)?;
            }
            write_query_params(out, version, &e.params)?;
        }
        Request::Batch(b) => {
            write_byte(out, b.kind);
            write_short_count(out, b.statements.len(), "BATCH statement list")?;
            for s in &b.statements {
                match &s.kind {
                    BatchStatementKind::Query(q) => {
                        write_byte(out, 0);
                        write_long_string(out, q)?;
                    }
                    BatchStatementKind::Prepared(id) => {
                        write_byte(out, 1);
                        write_short_bytes(out, id)?;
                    }
                }
                write_short_count(out, s.values.len(), "[value] list")?;
                for v in &s.values {
                    write_value(out, v)?;
                }
            }
            write_consistency(out, b.consistency);
            let mut f = 0u32;
            if b.serial_consistency.is_some() {
                f |= query_flags::SERIAL_CONSISTENCY;
            }
            if b.timestamp.is_some() {
                f |= query_flags::DEFAULT_TIMESTAMP;
            }
            if b.keyspace.is_some() {
                f |= query_flags::KEYSPACE;
            }
            if b.now_in_seconds.is_some() {
                f |= query_flags::NOW_IN_SECONDS;
            }
            write_flags(out, version, f)?;
            if let Some(sc) = b.serial_consistency {
                write_consistency(out, sc);
            }
            if let Some(ts) = b.timestamp {
                write_long(out, ts);
            }
            if let Some(ks) = &b.keyspace {
                write_string(out, ks)?;
            }
            if let Some(now) = b.now_in_seconds {
                write_int(out, now);
            }
        }
        Request::Register(events) => write_string_list(out, events)?,
        Request::AuthResponse(token) => write_bytes(out, token.as_deref())?,
    }
    Ok(())
}

/// Encodes a request frame (header and uncompressed body) and appends it to `out`, as a client
/// would send it. Sets the TRACING flag if `tracing`, and CUSTOM_PAYLOAD with the `[bytes map]`
/// first in the body if `custom_payload` is given. STARTUP options are written in sorted key
/// order. On error `out` is left as it was.
pub fn encode_request(
    out: &mut BytesMut,
    version: u8,
    stream: i16,
    tracing: bool,
    custom_payload: Option<&[(String, Bytes)]>,
    req: &Request,
) -> Result<(), EncodeError> {
    let start = out.len();
    let result = (|| {
        let mut fl = 0u8;
        if tracing {
            fl |= flags::TRACING;
        }
        if custom_payload.is_some() {
            fl |= flags::CUSTOM_PAYLOAD;
        }
        FrameHeader {
            version,
            is_response: false,
            flags: fl,
            stream,
            opcode: req.opcode(),
            body_len: 0,
        }
        .encode(out);
        if let Some(cp) = custom_payload {
            write_bytes_map(out, cp)?;
        }
        write_request_body(out, version, req)?;
        let len = out.len() - start - HEADER_LEN;
        let len = u32::try_from(len).map_err(|_| EncodeError::TooLong {
            what: "frame body",
            len,
            max: u32::MAX as usize,
        })?;
        out[start + 5..start + 9].copy_from_slice(&len.to_be_bytes());
        Ok(())
    })();
    if result.is_err() {
        out.truncate(start);
    }
    result
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::frame::decode_envelope;
    use super::*;

    fn b(v: &[u8]) -> Bytes {
        Bytes::copy_from_slice(v)
    }

    /// Encodes with `encode_request`, then decodes with `decode_envelope` + `decode_request`.
    fn round_trip(version: u8, req: &Request) -> RequestEnvelope {
        let mut out = BytesMut::new();
        encode_request(&mut out, version, 3, false, None, req).unwrap();
        let (h, body) = decode_envelope(&mut out, 1 << 20).unwrap().unwrap();
        assert!(out.is_empty());
        let env = decode_request(&h, body).unwrap();
        assert_eq!(env.stream, 3);
        assert_eq!(env.version, version);
        assert_eq!(&env.request, req, "v{version}");
        env
    }

    pub(crate) fn sample_params(version: u8) -> QueryParams {
        QueryParams {
            consistency: consistency::LOCAL_QUORUM,
            values: Values::Positional(vec![
                Value::Set(b(b"\x00\x00\x00\x01")),
                Value::Null,
                Value::Unset,
            ]),
            skip_metadata: true,
            page_size: Some(5000),
            paging_state: Some(b(b"state")),
            serial_consistency: Some(consistency::LOCAL_SERIAL),
            timestamp: Some(1_700_000_000_000_000),
            keyspace: (version >= 5).then(|| "ks".to_string()),
            now_in_seconds: (version >= 5).then_some(1234),
        }
    }

    /// One of every request kind, with most options set.
    pub(crate) fn sample_requests(version: u8) -> Vec<Request> {
        let mut startup = HashMap::new();
        startup.insert("CQL_VERSION".to_string(), "3.0.0".to_string());
        startup.insert("COMPRESSION".to_string(), "lz4".to_string());
        vec![
            Request::Startup(startup),
            Request::Options,
            Request::Query(Query {
                query: "SELECT * FROM ks.t WHERE k = ?".into(),
                params: sample_params(version),
            }),
            Request::Query(Query {
                query: "INSERT INTO t (a, b) VALUES (:a, :b)".into(),
                params: QueryParams {
                    consistency: consistency::ONE,
                    values: Values::Named(vec![
                        ("a".into(), Value::Set(b(b"x"))),
                        ("b".into(), Value::Null),
                    ]),
                    ..QueryParams::default()
                },
            }),
            Request::Query(Query {
                query: "SELECT now() FROM system.local".into(),
                params: QueryParams::default(),
            }),
            Request::Prepare(Prepare {
                query: "SELECT * FROM t WHERE k = ?".into(),
                keyspace: (version >= 5).then(|| "app".to_string()),
            }),
            Request::Execute(Execute {
                id: b(&[0xAB; 16]),
                result_metadata_id: (version >= 5).then(|| b(&[0xCD; 16])),
                params: sample_params(version),
            }),
            Request::Batch(Batch {
                kind: batch_kind::UNLOGGED,
                statements: vec![
                    BatchStatement {
                        kind: BatchStatementKind::Query("INSERT INTO t (k) VALUES (?)".into()),
                        values: vec![Value::Set(b(b"\x01"))],
                    },
                    BatchStatement {
                        kind: BatchStatementKind::Prepared(b(&[1, 2, 3])),
                        values: vec![Value::Null, Value::Unset, Value::Set(Bytes::new())],
                    },
                    BatchStatement {
                        kind: BatchStatementKind::Query("DELETE FROM t WHERE k = 1".into()),
                        values: vec![],
                    },
                ],
                consistency: consistency::QUORUM,
                serial_consistency: Some(consistency::SERIAL),
                timestamp: Some(-5),
                keyspace: (version >= 5).then(|| "ks".to_string()),
                now_in_seconds: (version >= 5).then_some(99),
            }),
            Request::Register(vec![
                "TOPOLOGY_CHANGE".into(),
                "STATUS_CHANGE".into(),
                "SCHEMA_CHANGE".into(),
            ]),
            Request::AuthResponse(Some(b(b"\x00cassandra\x00cassandra"))),
            Request::AuthResponse(None),
        ]
    }

    #[test]
    fn every_request_kind_round_trips_in_every_version() {
        for version in 3..=5 {
            for req in sample_requests(version) {
                round_trip(version, &req);
            }
        }
    }

    #[test]
    fn hand_built_v4_query_frame() {
        // QUERY "SELECT 1" at ONE with values [int 7], page size 100; stream 2.
        let mut frame = BytesMut::from(&b"\x04\x00\x00\x02\x07"[..]);
        let body: &[u8] = b"\x00\x00\x00\x08SELECT 1\x00\x01\x05\x00\x01\x00\x00\x00\x04\x00\x00\x00\x07\x00\x00\x00\x64";
        frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
        frame.extend_from_slice(body);
        let (h, body) = decode_envelope(&mut frame, 1024).unwrap().unwrap();
        let env = decode_request(&h, body.clone()).unwrap();
        let Request::Query(q) = env.request else {
            panic!("not a query")
        };
        assert_eq!(q.query, "SELECT 1");
        assert_eq!(q.params.consistency, consistency::ONE);
        assert_eq!(q.params.page_size, Some(100));
        assert!(!q.params.skip_metadata);
        let Values::Positional(vals) = q.params.values else {
            panic!()
        };
        let Value::Set(v) = &vals[0] else { panic!() };
        assert_eq!(&v[..], b"\x00\x00\x00\x07");
        // Zero copy: the value points into the frame body.
        let range = body.as_ptr() as usize..body.as_ptr() as usize + body.len();
        assert!(range.contains(&(v.as_ptr() as usize)));
    }

    #[test]
    fn hand_built_v5_execute_and_prepare() {
        // v5 EXECUTE: id, result metadata id, consistency, int flags (values|keyspace|now).
        let body: &[u8] = b"\x00\x02id\x00\x03rid\x00\x01\x00\x00\x01\x81\x00\x01\xff\xff\xff\xfe\x00\x02ks\x00\x00\x00\x2a";
        let h = FrameHeader {
            version: 5,
            is_response: false,
            flags: 0,
            stream: 1,
            opcode: Opcode::Execute,
            body_len: body.len() as u32,
        };
        let env = decode_request(&h, b(body)).unwrap();
        let Request::Execute(e) = env.request else {
            panic!()
        };
        assert_eq!(&e.id[..], b"id");
        assert_eq!(e.result_metadata_id.as_deref(), Some(&b"rid"[..]));
        assert_eq!(e.params.values, Values::Positional(vec![Value::Unset]));
        assert_eq!(e.params.keyspace.as_deref(), Some("ks"));
        assert_eq!(e.params.now_in_seconds, Some(42));
        // v5 PREPARE with keyspace flag.
        let body: &[u8] = b"\x00\x00\x00\x01?\x00\x00\x00\x01\x00\x03app";
        let h = FrameHeader {
            opcode: Opcode::Prepare,
            body_len: body.len() as u32,
            ..h
        };
        let env = decode_request(&h, b(body)).unwrap();
        assert_eq!(
            env.request,
            Request::Prepare(Prepare {
                query: "?".into(),
                keyspace: Some("app".into())
            })
        );
        // The same PREPARE body read as v4 ignores the trailing bytes.
        let env = decode_request(&FrameHeader { version: 4, ..h }, b(body)).unwrap();
        assert_eq!(
            env.request,
            Request::Prepare(Prepare {
                query: "?".into(),
                keyspace: None
            })
        );
    }

    #[test]
    fn flags_tracing_and_custom_payload() {
        let payload = vec![("RequestCharge".to_string(), b(&2.5f64.to_be_bytes()))];
        let req = Request::Query(Query {
            query: "SELECT 1".into(),
            params: QueryParams::default(),
        });
        let mut out = BytesMut::new();
        encode_request(&mut out, 4, 9, true, Some(&payload), &req).unwrap();
        assert_eq!(out[1], flags::TRACING | flags::CUSTOM_PAYLOAD);
        let (h, body) = decode_envelope(&mut out, 1024).unwrap().unwrap();
        let env = decode_request(&h, body).unwrap();
        assert!(env.tracing);
        assert_eq!(env.custom_payload, Some(payload));
        assert_eq!(env.request, req);
    }

    #[test]
    fn truncated_bodies_are_errors() {
        for version in 3..=5 {
            for req in sample_requests(version) {
                let mut out = BytesMut::new();
                encode_request(&mut out, version, 0, false, None, &req).unwrap();
                let (h, body) = decode_envelope(&mut out, 1 << 20).unwrap().unwrap();
                for cut in 0..body.len() {
                    let r = decode_request(&h, body.slice(..cut));
                    assert!(
                        r.is_err(),
                        "v{version} {:?} cut at {cut} decoded: {r:?}",
                        h.opcode
                    );
                }
            }
        }
    }

    fn header(version: u8, opcode: Opcode) -> FrameHeader {
        FrameHeader {
            version,
            is_response: false,
            flags: 0,
            stream: 0,
            opcode,
            body_len: 0,
        }
    }

    #[test]
    fn protocol_violations() {
        let h = header(4, Opcode::Result);
        assert_eq!(
            decode_request(&h, Bytes::new()),
            Err(RequestError::UnexpectedOpcode(8))
        );
        let h = header(4, Opcode::Unknown(0x42));
        assert!(decode_request(&h, Bytes::new())
            .unwrap_err()
            .to_string()
            .contains("0x42"));
        let h = FrameHeader {
            is_response: true,
            ..header(4, Opcode::Options)
        };
        assert_eq!(
            decode_request(&h, Bytes::new()),
            Err(RequestError::WrongDirection(5))
        );
        // Invalid UTF-8 in the query string.
        let h = header(4, Opcode::Query);
        let err = decode_request(&h, b(b"\x00\x00\x00\x02\xc3\x28\x00\x01\x00")).unwrap_err();
        assert_eq!(
            err,
            RequestError::Decode(DecodeError::InvalidUtf8 {
                what: "[long string]"
            })
        );
        assert_eq!(err.to_string(), "Invalid UTF-8 in [long string]");
        // Unknown consistency.
        let err = decode_request(&h, b(b"\x00\x00\x00\x01x\x00\x20\x00")).unwrap_err();
        assert_eq!(
            err,
            RequestError::Decode(DecodeError::UnknownConsistency(0x20))
        );
        // [value] length -3.
        let err = decode_request(
            &h,
            b(b"\x00\x00\x00\x01x\x00\x01\x01\x00\x01\xff\xff\xff\xfd"),
        )
        .unwrap_err();
        assert!(matches!(
            err,
            RequestError::Decode(DecodeError::InvalidLength { len: -3, .. })
        ));
        // Timestamp i64::MIN.
        let err = decode_request(
            &h,
            b(b"\x00\x00\x00\x01x\x00\x01\x20\x80\x00\x00\x00\x00\x00\x00\x00"),
        )
        .unwrap_err();
        assert_eq!(err, RequestError::TimestampOutOfBounds { got: i64::MIN });
    }

    #[test]
    fn batch_violations() {
        let h = header(4, Opcode::Batch);
        assert_eq!(
            decode_request(&h, b(b"\x03\x00\x00\x00\x01\x00")),
            Err(RequestError::InvalidBatchType(3))
        );
        assert_eq!(
            decode_request(&h, b(b"\x00\x00\x01\x02\x00\x00\x00\x00\x00\x01\x00")),
            Err(RequestError::InvalidBatchStatementKind(2))
        );
        // Names flag (0x40) rejected.
        assert_eq!(
            decode_request(&h, b(b"\x01\x00\x00\x00\x01\x40")),
            Err(RequestError::NamedBatchValues)
        );
        // 65535 statements declared in a tiny body.
        assert!(matches!(
            decode_request(&h, b(b"\x01\xff\xff\x00")),
            Err(RequestError::Decode(DecodeError::TooManyElements {
                count: 65535,
                ..
            }))
        ));
        // v4 bodies written with v5-only fields cannot be encoded.
        let mut out = BytesMut::from(&b"keep"[..]);
        let req = Request::Prepare(Prepare {
            query: "x".into(),
            keyspace: Some("k".into()),
        });
        assert!(encode_request(&mut out, 4, 0, false, None, &req).is_err());
        assert_eq!(&out[..], b"keep", "output restored on error");
    }
}
