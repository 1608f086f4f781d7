//! Test-only decoder of response frames, written from the spec independently of the encoder, so
//! that tests can check what the encoder produced by decoding it back.

use bytes::{Bytes, BytesMut};

use super::super::compression::{decompress_body, Compression};
use super::super::frame::{decode_envelope, flags, FrameHeader, Opcode};
use super::super::types::*;
use super::*;

/// Test decoder error.
#[derive(Debug)]
#[allow(dead_code)] // the fields are for Debug output in failed assertions
pub(crate) enum TestDecodeError {
    Decode(DecodeError),
    Bad(String),
}

impl From<DecodeError> for TestDecodeError {
    fn from(e: DecodeError) -> Self {
        TestDecodeError::Decode(e)
    }
}

type R<T> = Result<T, TestDecodeError>;

fn bad<T>(msg: impl Into<String>) -> R<T> {
    Err(TestDecodeError::Bad(msg.into()))
}

/// A decoded response frame.
#[derive(Debug)]
pub(crate) struct DecodedResponse {
    pub header: FrameHeader,
    pub extras: ResponseExtras,
    pub response: Response,
}

/// Decodes one complete response frame from `buf` (decompressing with `compression` when the
/// COMPRESSION flag is set before v5). Fails if `buf` does not hold a whole frame.
pub(crate) fn decode_response_frame(
    buf: &mut BytesMut,
    compression: Compression,
) -> R<DecodedResponse> {
    let (header, body) = match decode_envelope(buf, 1 << 30) {
        Ok(Some(f)) => f,
        Ok(None) => return bad("incomplete frame"),
        Err(e) => return bad(e.to_string()),
    };
    if !header.is_response {
        return bad("not a response frame");
    }
    let body = if header.has_flag(flags::COMPRESSION) && header.version < 5 {
        decompress_body(compression, &body, 1 << 30)
            .map_err(|e| TestDecodeError::Bad(e.to_string()))?
    } else {
        body
    };
    let (extras, response) = decode_response(&header, body)?;
    Ok(DecodedResponse {
        header,
        extras,
        response,
    })
}

/// Decodes an (uncompressed) response body.
pub(crate) fn decode_response(
    header: &FrameHeader,
    mut body: Bytes,
) -> R<(ResponseExtras, Response)> {
    let buf = &mut body;
    let version = header.version;
    let mut extras = ResponseExtras::default();
    if header.has_flag(flags::TRACING) {
        extras.tracing_id = Some(read_uuid(buf)?);
    }
    if header.has_flag(flags::WARNING) {
        extras.warnings = read_string_list(buf)?;
    }
    if header.has_flag(flags::CUSTOM_PAYLOAD) {
        extras.custom_payload = read_bytes_map(buf)?;
    }
    let response = match header.opcode {
        Opcode::Error => Response::Error(decode_error(buf, version)?),
        Opcode::Ready => Response::Ready,
        Opcode::Authenticate => Response::Authenticate(read_string(buf)?),
        Opcode::Supported => Response::Supported(read_string_multimap(buf)?),
        Opcode::Result => Response::Result(decode_result(buf, version)?),
        Opcode::Event => Response::Event(decode_event(buf)?),
        Opcode::AuthChallenge => Response::AuthChallenge(read_bytes(buf)?),
        Opcode::AuthSuccess => Response::AuthSuccess(read_bytes(buf)?),
        other => return bad(format!("not a response opcode: {other:?}")),
    };
    if !buf.is_empty() && !matches!(response, Response::Result(ResultBody::Rows(_))) {
        return bad(format!("{} trailing bytes", buf.len()));
    }
    Ok((extras, response))
}

fn read_failures(buf: &mut Bytes, version: u8) -> R<(i32, Vec<(std::net::IpAddr, u16)>)> {
    if version >= 5 {
        let n = read_int(buf)?;
        if n < 0 || n as usize > buf.len() {
            return bad("bad reason map size");
        }
        let mut reasons = Vec::new();
        for _ in 0..n {
            let ip = read_inetaddr(buf)?;
            let code = read_short(buf)?;
            reasons.push((ip, code));
        }
        Ok((n, reasons))
    } else {
        Ok((read_int(buf)?, Vec::new()))
    }
}

fn decode_error(buf: &mut Bytes, version: u8) -> R<ErrorResponse> {
    let code = read_int(buf)?;
    let message = read_string(buf)?;
    let extra = match code {
        error_code::UNAVAILABLE => ErrorExtra::Unavailable {
            cl: read_consistency(buf)?,
            required: read_int(buf)?,
            alive: read_int(buf)?,
        },
        error_code::WRITE_TIMEOUT => {
            let cl = read_consistency(buf)?;
            let received = read_int(buf)?;
            let block_for = read_int(buf)?;
            let write_type = read_string(buf)?;
            let contentions = if version >= 5 && write_type == "CAS" {
                Some(read_short(buf)?)
            } else {
                None
            };
            ErrorExtra::WriteTimeout {
                cl,
                received,
                block_for,
                write_type,
                contentions,
            }
        }
        error_code::READ_TIMEOUT => ErrorExtra::ReadTimeout {
            cl: read_consistency(buf)?,
            received: read_int(buf)?,
            block_for: read_int(buf)?,
            data_present: read_byte(buf)? != 0,
        },
        error_code::READ_FAILURE => {
            let cl = read_consistency(buf)?;
            let received = read_int(buf)?;
            let block_for = read_int(buf)?;
            let (num_failures, reasons) = read_failures(buf, version)?;
            ErrorExtra::ReadFailure {
                cl,
                received,
                block_for,
                num_failures,
                reasons,
                data_present: read_byte(buf)? != 0,
            }
        }
        error_code::WRITE_FAILURE => {
            let cl = read_consistency(buf)?;
            let received = read_int(buf)?;
            let block_for = read_int(buf)?;
            let (num_failures, reasons) = read_failures(buf, version)?;
            ErrorExtra::WriteFailure {
                cl,
                received,
                block_for,
                num_failures,
                reasons,
                write_type: read_string(buf)?,
            }
        }
        error_code::FUNCTION_FAILURE => ErrorExtra::FunctionFailure {
            keyspace: read_string(buf)?,
            function: read_string(buf)?,
            arg_types: read_string_list(buf)?,
        },
        error_code::ALREADY_EXISTS => ErrorExtra::AlreadyExists {
            keyspace: read_string(buf)?,
            table: read_string(buf)?,
        },
        error_code::UNPREPARED => ErrorExtra::Unprepared {
            id: read_short_bytes(buf)?,
        },
        error_code::CAS_WRITE_UNKNOWN => ErrorExtra::CasWriteUnknown {
            cl: read_consistency(buf)?,
            received: read_int(buf)?,
            block_for: read_int(buf)?,
        },
        _ => ErrorExtra::None,
    };
    Ok(ErrorResponse {
        code,
        message,
        extra,
    })
}

/// Decodes an `[option]` column type, with a nesting limit.
pub(crate) fn decode_type(buf: &mut Bytes, depth: usize) -> R<ColumnType> {
    if depth > 32 {
        return bad("type nesting too deep");
    }
    use type_id::*;
    let id = read_short(buf)?;
    Ok(match id {
        CUSTOM => ColumnType::Custom(read_string(buf)?),
        ASCII => ColumnType::Ascii,
        BIGINT => ColumnType::Bigint,
        BLOB => ColumnType::Blob,
        BOOLEAN => ColumnType::Boolean,
        COUNTER => ColumnType::Counter,
        DECIMAL => ColumnType::Decimal,
        DOUBLE => ColumnType::Double,
        FLOAT => ColumnType::Float,
        INT => ColumnType::Int,
        TIMESTAMP => ColumnType::Timestamp,
        UUID => ColumnType::Uuid,
        VARCHAR => ColumnType::Varchar,
        VARINT => ColumnType::Varint,
        TIMEUUID => ColumnType::Timeuuid,
        INET => ColumnType::Inet,
        DATE => ColumnType::Date,
        TIME => ColumnType::Time,
        SMALLINT => ColumnType::Smallint,
        TINYINT => ColumnType::Tinyint,
        DURATION => ColumnType::Duration,
        LIST => ColumnType::List(Box::new(decode_type(buf, depth + 1)?)),
        SET => ColumnType::Set(Box::new(decode_type(buf, depth + 1)?)),
        MAP => {
            let k = decode_type(buf, depth + 1)?;
            let v = decode_type(buf, depth + 1)?;
            ColumnType::Map(Box::new(k), Box::new(v))
        }
        UDT => {
            let keyspace = read_string(buf)?;
            let name = read_string(buf)?;
            let n = read_short(buf)?;
            let mut fields = Vec::new();
            for _ in 0..n {
                let f = read_string(buf)?;
                fields.push((f, decode_type(buf, depth + 1)?));
            }
            ColumnType::Udt {
                keyspace,
                name,
                fields,
            }
        }
        TUPLE => {
            let n = read_short(buf)?;
            let mut types = Vec::new();
            for _ in 0..n {
                types.push(decode_type(buf, depth + 1)?);
            }
            ColumnType::Tuple(types)
        }
        other => return bad(format!("unknown type id {other:#x}")),
    })
}

fn decode_specs(buf: &mut Bytes, global: bool, count: i32) -> R<Vec<ColumnSpec>> {
    if count < 0 || count as usize > buf.len() {
        return bad("bad column count");
    }
    let table = if global {
        Some((read_string(buf)?, read_string(buf)?))
    } else {
        None
    };
    let mut cols = Vec::new();
    for _ in 0..count {
        let (keyspace, table) = match &table {
            Some((k, t)) => (k.clone(), t.clone()),
            None => (read_string(buf)?, read_string(buf)?),
        };
        let name = read_string(buf)?;
        let ty = decode_type(buf, 0)?;
        cols.push(ColumnSpec {
            keyspace,
            table,
            name,
            ty,
        });
    }
    Ok(cols)
}

/// Decodes rows metadata. With No_metadata, `columns` comes back empty and the count is returned
/// separately.
pub(crate) fn decode_rows_metadata(buf: &mut Bytes, version: u8) -> R<(RowsMetadata, i32)> {
    use metadata_flags::*;
    let flags = read_int(buf)?;
    let count = read_int(buf)?;
    let paging_state = if flags & HAS_MORE_PAGES != 0 {
        read_bytes(buf)?
    } else {
        None
    };
    let new_metadata_id = if version >= 5 && flags & METADATA_CHANGED != 0 {
        Some(read_short_bytes(buf)?)
    } else {
        None
    };
    let no_metadata = flags & NO_METADATA != 0;
    let columns = if no_metadata {
        Vec::new()
    } else {
        decode_specs(buf, flags & GLOBAL_TABLES_SPEC != 0, count)?
    };
    Ok((
        RowsMetadata {
            encoded: None,
            columns,
            paging_state,
            no_metadata,
            new_metadata_id,
        },
        count,
    ))
}

fn decode_result(buf: &mut Bytes, version: u8) -> R<ResultBody> {
    Ok(match read_int(buf)? {
        result_kind::VOID => ResultBody::Void,
        result_kind::ROWS => {
            let (metadata, count) = decode_rows_metadata(buf, version)?;
            let rows_count = read_int(buf)?;
            let rows_content = buf.split_to(buf.len());
            // Check the content really is rows_count * count cells.
            let mut cells = rows_content.clone();
            for _ in 0..(rows_count as i64 * count as i64) {
                read_bytes(&mut cells)?;
            }
            if !cells.is_empty() {
                return bad("rows content longer than its cells");
            }
            ResultBody::Rows(Rows {
                metadata,
                rows_count,
                rows_content,
            })
        }
        result_kind::SET_KEYSPACE => ResultBody::SetKeyspace(read_string(buf)?),
        result_kind::PREPARED => {
            let id = read_short_bytes(buf)?;
            let result_metadata_id = if version >= 5 {
                Some(read_short_bytes(buf)?)
            } else {
                None
            };
            let flags = read_int(buf)?;
            let count = read_int(buf)?;
            let mut pk_indexes = Vec::new();
            if version >= 4 {
                let pk_count = read_int(buf)?;
                if pk_count < 0 || pk_count as usize > buf.len() {
                    return bad("bad pk count");
                }
                for _ in 0..pk_count {
                    pk_indexes.push(read_short(buf)?);
                }
            }
            let bind_columns =
                decode_specs(buf, flags & metadata_flags::GLOBAL_TABLES_SPEC != 0, count)?;
            let (result, _) = decode_rows_metadata(buf, version)?;
            ResultBody::Prepared(Prepared {
                id,
                result_metadata_id,
                bind_columns,
                pk_indexes,
                result,
            })
        }
        result_kind::SCHEMA_CHANGE => ResultBody::SchemaChange(decode_schema_change(buf)?),
        other => return bad(format!("unknown result kind {other}")),
    })
}

fn decode_schema_change(buf: &mut Bytes) -> R<SchemaChange> {
    let change_type = match read_string(buf)?.as_str() {
        "CREATED" => SchemaChangeType::Created,
        "UPDATED" => SchemaChangeType::Updated,
        "DROPPED" => SchemaChangeType::Dropped,
        other => return bad(format!("bad change type {other}")),
    };
    let target = match read_string(buf)?.as_str() {
        "KEYSPACE" => SchemaChangeTarget::Keyspace(read_string(buf)?),
        "TABLE" => SchemaChangeTarget::Table {
            keyspace: read_string(buf)?,
            name: read_string(buf)?,
        },
        "TYPE" => SchemaChangeTarget::Type {
            keyspace: read_string(buf)?,
            name: read_string(buf)?,
        },
        "FUNCTION" => SchemaChangeTarget::Function {
            keyspace: read_string(buf)?,
            name: read_string(buf)?,
            arg_types: read_string_list(buf)?,
        },
        "AGGREGATE" => SchemaChangeTarget::Aggregate {
            keyspace: read_string(buf)?,
            name: read_string(buf)?,
            arg_types: read_string_list(buf)?,
        },
        other => return bad(format!("bad target {other}")),
    };
    Ok(SchemaChange {
        change_type,
        target,
    })
}

fn decode_event(buf: &mut Bytes) -> R<Event> {
    Ok(match read_string(buf)?.as_str() {
        "TOPOLOGY_CHANGE" => {
            let change = match read_string(buf)?.as_str() {
                "NEW_NODE" => TopologyChangeType::NewNode,
                "REMOVED_NODE" => TopologyChangeType::RemovedNode,
                "MOVED_NODE" => TopologyChangeType::MovedNode,
                other => return bad(format!("bad topology change {other}")),
            };
            Event::TopologyChange {
                change,
                addr: read_inet(buf)?,
            }
        }
        "STATUS_CHANGE" => {
            let change = match read_string(buf)?.as_str() {
                "UP" => StatusChangeType::Up,
                "DOWN" => StatusChangeType::Down,
                other => return bad(format!("bad status change {other}")),
            };
            Event::StatusChange {
                change,
                addr: read_inet(buf)?,
            }
        }
        "SCHEMA_CHANGE" => Event::SchemaChange(decode_schema_change(buf)?),
        other => return bad(format!("bad event type {other}")),
    })
}
