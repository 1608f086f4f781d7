//! Response messages (spec section 4.2) and their encoder.
//!
//! [`encode_response`] writes one complete frame (header and body) into the caller's buffer:
//! it reserves the 9-byte header, writes the body in place and patches the length. Only when
//! compression is on is the body first written to a scratch buffer and compressed into `out`.

mod error;
mod event;
mod result;

#[cfg(test)]
pub(crate) mod testing;

pub use error::{
    capped, error_code, quote_capped, ErrorExtra, ErrorResponse, MAX_ERROR_MESSAGE_BYTES,
    MAX_QUOTE_BYTES,
};
pub use event::{
    Event, SchemaChange, SchemaChangeTarget, SchemaChangeType, StatusChangeType, TopologyChangeType,
};
pub use result::{
    metadata_flags, result_kind, type_id, ColumnSpec, ColumnType, EncodedColumns,
    EncodedColumnsCache, Prepared, ResultBody, Rows, RowsMetadata, RowsWriter,
};

use bytes::{Bytes, BytesMut};

use super::compression::{compress_body, Compression};
use super::frame::{flags, FrameHeader, Opcode, HEADER_LEN};
use super::types::*;

/// A response message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// ERROR.
    Error(ErrorResponse),
    /// READY (empty body).
    Ready,
    /// AUTHENTICATE with the authenticator class name
    /// (e.g. `org.apache.cassandra.auth.PasswordAuthenticator`).
    Authenticate(String),
    /// SUPPORTED: a `[string multimap]` of STARTUP options and their values. Drivers need at
    /// least `CQL_VERSION` and `COMPRESSION` (which may be empty).
    Supported(Vec<(String, Vec<String>)>),
    /// RESULT.
    Result(ResultBody),
    /// EVENT (sent on stream -1).
    Event(Event),
    /// AUTH_CHALLENGE with a SASL token.
    AuthChallenge(Option<Bytes>),
    /// AUTH_SUCCESS with a final token.
    AuthSuccess(Option<Bytes>),
    /// A message body another node produced (cluster forwarding), sent on as it is: the body
    /// after the frame-level extras (tracing id, warnings, custom payload), which are the
    /// relaying node's own (`ResponseExtras`). Bodies of RESULT and ERROR are laid out alike
    /// in v3 to v5 except for a few rare error extras (read/write failure reasons).
    Relayed { opcode: Opcode, body: Bytes },
}

impl Response {
    /// The opcode of this response.
    pub fn opcode(&self) -> Opcode {
        match self {
            Response::Error(_) => Opcode::Error,
            Response::Ready => Opcode::Ready,
            Response::Authenticate(_) => Opcode::Authenticate,
            Response::Supported(_) => Opcode::Supported,
            Response::Result(_) => Opcode::Result,
            Response::Event(_) => Opcode::Event,
            Response::AuthChallenge(_) => Opcode::AuthChallenge,
            Response::AuthSuccess(_) => Opcode::AuthSuccess,
            Response::Relayed { opcode, .. } => *opcode,
        }
    }

    fn encode_body(&self, out: &mut BytesMut, version: u8) -> Result<(), EncodeError> {
        match self {
            Response::Error(e) => e.encode(out, version),
            Response::Ready => Ok(()),
            Response::Authenticate(class) => write_string(out, class),
            Response::Supported(map) => write_string_multimap(out, map),
            Response::Result(r) => r.encode(out, version),
            Response::Event(e) => e.encode(out),
            Response::AuthChallenge(token) | Response::AuthSuccess(token) => {
                write_bytes(out, token.as_deref())
            }
            Response::Relayed { body, .. } => {
                out.extend_from_slice(body);
                Ok(())
            }
        }
    }
}

/// Frame-level additions to a response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResponseExtras {
    /// Tracing session id; sets the TRACING flag and is written first in the body.
    pub tracing_id: Option<[u8; 16]>,
    /// Warnings; if non-empty, sets the WARNING flag and follows the tracing id (v4+ only).
    pub warnings: Vec<String>,
    /// Custom payload; if non-empty, sets CUSTOM_PAYLOAD and follows the warnings (v4+ only).
    pub custom_payload: Vec<(String, Bytes)>,
    /// Cosmos DB's `RequestCharge` (a big-endian double): the custom payload's first entry when
    /// set (it sets CUSTOM_PAYLOAD too). Kept apart from `custom_payload` so that the charge
    /// every answer carries costs no allocation (three were about 2% of a point read).
    pub request_charge: Option<[u8; 8]>,
}

impl ResponseExtras {
    /// No extras.
    pub const NONE: ResponseExtras = ResponseExtras {
        tracing_id: None,
        warnings: Vec::new(),
        custom_payload: Vec::new(),
        request_charge: None,
    };
}

/// The custom payload map: the request charge first (if set), then `custom_payload`.
fn write_payload(body: &mut BytesMut, extras: &ResponseExtras) -> Result<(), EncodeError> {
    let charge = extras.request_charge.as_ref();
    let n = extras.custom_payload.len() + usize::from(charge.is_some());
    write_short_count(body, n, "[bytes map]")?;
    if let Some(c) = charge {
        write_string(body, "RequestCharge")?;
        write_bytes(body, Some(c))?;
    }
    for (k, v) in &extras.custom_payload {
        write_string(body, k)?;
        write_bytes(body, Some(v))?;
    }
    Ok(())
}

/// Encodes one response frame and appends it to `out`.
///
/// - `version` is the connection's protocol version (3, 4 or 5); the header carries
///   `0x80 | version`. For a version error, reply with a version the client knows (e.g. 4).
/// - `stream` is the request's stream id; for `Response::Event` it is ignored and -1 is used.
/// - `extras` adds the tracing id, warnings and custom payload in the order the spec puts them
///   (warnings and custom payload are dropped for v3, which lacks them).
/// - `compression` compresses the body and sets the COMPRESSION flag for v3/v4. Pass
///   `Compression::None` for frames that must not be compressed (before STARTUP completes). It is
///   ignored for v5, where compression belongs to the segment layer ([`super::v5`]).
///
/// On error nothing is appended (`out` is restored).
pub fn encode_response(
    out: &mut BytesMut,
    version: u8,
    stream: i16,
    resp: &Response,
    extras: &ResponseExtras,
    compression: Compression,
) -> Result<(), EncodeError> {
    let start = out.len();
    let result = encode_frame(out, version, stream, resp, extras, compression);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn encode_frame(
    out: &mut BytesMut,
    version: u8,
    stream: i16,
    resp: &Response,
    extras: &ResponseExtras,
    compression: Compression,
) -> Result<(), EncodeError> {
    let start = out.len();
    let warnings = version >= 4 && !extras.warnings.is_empty();
    let payload =
        version >= 4 && (extras.request_charge.is_some() || !extras.custom_payload.is_empty());
    let compress = version < 5 && compression != Compression::None;
    let mut fl = 0u8;
    if extras.tracing_id.is_some() {
        fl |= flags::TRACING;
    }
    if warnings {
        fl |= flags::WARNING;
    }
    if payload {
        fl |= flags::CUSTOM_PAYLOAD;
    }
    if compress {
        fl |= flags::COMPRESSION;
    }
    let stream = if matches!(resp, Response::Event(_)) {
        -1
    } else {
        stream
    };
    FrameHeader {
        version,
        is_response: true,
        flags: fl,
        stream,
        opcode: resp.opcode(),
        body_len: 0,
    }
    .encode(out);

    let write_body = |body: &mut BytesMut| -> Result<(), EncodeError> {
        if let Some(id) = &extras.tracing_id {
            write_uuid(body, id);
        }
        if warnings {
            write_string_list(body, &extras.warnings)?;
        }
        if payload {
            write_payload(body, extras)?;
        }
        resp.encode_body(body, version)
    };
    if compress {
        let mut scratch = BytesMut::new();
        write_body(&mut scratch)?;
        compress_body(compression, &scratch, out)
            .map_err(|e| EncodeError::Compression(e.to_string()))?;
    } else {
        write_body(out)?;
    }
    let len = out.len() - start - HEADER_LEN;
    let len = i32::try_from(len).map_err(|_| EncodeError::TooLong {
        what: "frame body",
        len,
        max: i32::MAX as usize,
    })?;
    out[start + 5..start + HEADER_LEN].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
