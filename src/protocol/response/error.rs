//! ERROR responses (spec v4 section 9, v5 section 8).

use std::net::IpAddr;

use bytes::{Bytes, BytesMut};

use super::super::types::*;

/// Error codes.
pub mod error_code {
    /// Server error: something unexpected happened.
    pub const SERVER: i32 = 0x0000;
    /// Protocol error: a client message violated the protocol.
    pub const PROTOCOL: i32 = 0x000A;
    /// Authentication failed.
    pub const BAD_CREDENTIALS: i32 = 0x0100;
    /// Not enough replicas alive (extra: `Unavailable`).
    pub const UNAVAILABLE: i32 = 0x1000;
    /// The coordinator is overloaded (Cosmos DB's rate limiting surfaces as this).
    pub const OVERLOADED: i32 = 0x1001;
    /// The coordinator is bootstrapping.
    pub const IS_BOOTSTRAPPING: i32 = 0x1002;
    /// Truncation failed.
    pub const TRUNCATE_ERROR: i32 = 0x1003;
    /// A write timed out (extra: `WriteTimeout`).
    pub const WRITE_TIMEOUT: i32 = 0x1100;
    /// A read timed out (extra: `ReadTimeout`).
    pub const READ_TIMEOUT: i32 = 0x1200;
    /// A read failed (extra: `ReadFailure`).
    pub const READ_FAILURE: i32 = 0x1300;
    /// A user-defined function failed (extra: `FunctionFailure`).
    pub const FUNCTION_FAILURE: i32 = 0x1400;
    /// A write failed (extra: `WriteFailure`).
    pub const WRITE_FAILURE: i32 = 0x1500;
    /// v5: a CAS write's outcome is unknown (extra: `CasWriteUnknown`).
    pub const CAS_WRITE_UNKNOWN: i32 = 0x1700;
    /// Syntax error in the query.
    pub const SYNTAX: i32 = 0x2000;
    /// The user lacks a permission.
    pub const UNAUTHORIZED: i32 = 0x2100;
    /// The query is syntactically correct but invalid.
    pub const INVALID: i32 = 0x2200;
    /// Configuration problem.
    pub const CONFIG: i32 = 0x2300;
    /// Keyspace or table already exists (extra: `AlreadyExists`).
    pub const ALREADY_EXISTS: i32 = 0x2400;
    /// Unknown prepared statement id (extra: `Unprepared`).
    pub const UNPREPARED: i32 = 0x2500;
}

/// The code-specific part of an ERROR body. The encoder checks that it matches the code.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ErrorExtra {
    /// Nothing after the message.
    #[default]
    None,
    /// `UNAVAILABLE`: `<cl><required><alive>`.
    Unavailable {
        /// Consistency level.
        cl: u16,
        /// Replicas required.
        required: i32,
        /// Replicas alive.
        alive: i32,
    },
    /// `WRITE_TIMEOUT`: `<cl><received><blockfor><writeType>` and, in v5 for `CAS`, `<contentions>`.
    WriteTimeout {
        /// Consistency level.
        cl: u16,
        /// Acknowledgements received.
        received: i32,
        /// Acknowledgements required.
        block_for: i32,
        /// `SIMPLE`, `BATCH`, `UNLOGGED_BATCH`, `COUNTER`, `BATCH_LOG`, `CAS`, `VIEW` or `CDC`.
        write_type: String,
        /// v5 only: number of contentions, written when set (Cassandra sets it for `CAS`).
        contentions: Option<u16>,
    },
    /// `READ_TIMEOUT`: `<cl><received><blockfor><data_present>`.
    ReadTimeout {
        /// Consistency level.
        cl: u16,
        /// Responses received.
        received: i32,
        /// Responses required.
        block_for: i32,
        /// Whether the replica asked for data responded.
        data_present: bool,
    },
    /// `READ_FAILURE`. v3/v4: `<cl><received><blockfor><numfailures><data_present>`;
    /// v5: `<cl><received><blockfor><reason_map><data_present>`.
    ReadFailure {
        /// Consistency level.
        cl: u16,
        /// Responses received.
        received: i32,
        /// Responses required.
        block_for: i32,
        /// Written as `<numfailures>` before v5.
        num_failures: i32,
        /// Written as the v5 `<reason_map>` (endpoint, failure code).
        reasons: Vec<(IpAddr, u16)>,
        /// Whether the replica asked for data responded.
        data_present: bool,
    },
    /// `WRITE_FAILURE`. v3/v4: `<cl><received><blockfor><numfailures><writeType>`;
    /// v5: `<cl><received><blockfor><reason_map><writeType>`.
    WriteFailure {
        /// Consistency level.
        cl: u16,
        /// Acknowledgements received.
        received: i32,
        /// Acknowledgements required.
        block_for: i32,
        /// Written as `<numfailures>` before v5.
        num_failures: i32,
        /// Written as the v5 `<reason_map>`.
        reasons: Vec<(IpAddr, u16)>,
        /// Write type, as for `WriteTimeout`.
        write_type: String,
    },
    /// `FUNCTION_FAILURE`: `<keyspace><function><arg_types>`.
    FunctionFailure {
        /// Keyspace of the function.
        keyspace: String,
        /// Function name.
        function: String,
        /// CQL types of its arguments.
        arg_types: Vec<String>,
    },
    /// `ALREADY_EXISTS`: `<ks><table>` (table empty for a keyspace).
    AlreadyExists {
        /// Keyspace.
        keyspace: String,
        /// Table, or `""` when the keyspace itself exists.
        table: String,
    },
    /// `UNPREPARED`: the unknown id as `[short bytes]`.
    Unprepared {
        /// The id the client sent.
        id: Bytes,
    },
    /// v5 `CAS_WRITE_UNKNOWN`: `<cl><received><blockfor>`.
    CasWriteUnknown {
        /// Consistency level.
        cl: u16,
        /// Acknowledgements received.
        received: i32,
        /// Acknowledgements required.
        block_for: i32,
    },
}

impl ErrorExtra {
    /// The error code this extra belongs to (`None` for `ErrorExtra::None`).
    pub fn code(&self) -> Option<i32> {
        use error_code::*;
        Some(match self {
            ErrorExtra::None => return None,
            ErrorExtra::Unavailable { .. } => UNAVAILABLE,
            ErrorExtra::WriteTimeout { .. } => WRITE_TIMEOUT,
            ErrorExtra::ReadTimeout { .. } => READ_TIMEOUT,
            ErrorExtra::ReadFailure { .. } => READ_FAILURE,
            ErrorExtra::WriteFailure { .. } => WRITE_FAILURE,
            ErrorExtra::FunctionFailure { .. } => FUNCTION_FAILURE,
            ErrorExtra::AlreadyExists { .. } => ALREADY_EXISTS,
            ErrorExtra::Unprepared { .. } => UNPREPARED,
            ErrorExtra::CasWriteUnknown { .. } => CAS_WRITE_UNKNOWN,
        })
    }
}

/// Longest error message sent: messages quote client input (identifiers, literals), and a
/// 10 MB identifier must neither travel back whole nor overflow the `[string]` length (u16).
pub const MAX_ERROR_MESSAGE_BYTES: usize = 4096;
/// Longest piece of client input a message quotes before `...`.
pub const MAX_QUOTE_BYTES: usize = 200;

/// `s` cut to at most `max_bytes` (at a character boundary) with `...` appended when cut.
pub fn capped(s: &str, max_bytes: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max_bytes {
        return s.into();
    }
    let mut end = max_bytes;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end]).into()
}

/// Client input to quote in an error message, capped at `MAX_QUOTE_BYTES`.
pub fn quote_capped(s: &str) -> std::borrow::Cow<'_, str> {
    capped(s, MAX_QUOTE_BYTES)
}

/// An ERROR response: `<code><message>` then the code-specific extra.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorResponse {
    /// One of [`error_code`].
    pub code: i32,
    /// Human-readable message.
    pub message: String,
    /// Code-specific content; must be `None` or match `code`.
    pub extra: ErrorExtra,
}

impl ErrorResponse {
    /// An error without extra content.
    pub fn new(code: i32, message: impl Into<String>) -> ErrorResponse {
        ErrorResponse {
            code,
            message: message.into(),
            extra: ErrorExtra::None,
        }
    }

    /// An error whose code is taken from `extra`.
    pub fn with_extra(message: impl Into<String>, extra: ErrorExtra) -> ErrorResponse {
        ErrorResponse {
            code: extra.code().unwrap_or(error_code::SERVER),
            message: message.into(),
            extra,
        }
    }

    /// A Protocol error (0x000A).
    pub fn protocol(message: impl Into<String>) -> ErrorResponse {
        ErrorResponse::new(error_code::PROTOCOL, message)
    }

    /// A Server error (0x0000).
    pub fn server(message: impl Into<String>) -> ErrorResponse {
        ErrorResponse::new(error_code::SERVER, message)
    }

    /// An Invalid error (0x2200).
    pub fn invalid(message: impl Into<String>) -> ErrorResponse {
        ErrorResponse::new(error_code::INVALID, message)
    }

    /// A Syntax error (0x2000).
    pub fn syntax(message: impl Into<String>) -> ErrorResponse {
        ErrorResponse::new(error_code::SYNTAX, message)
    }

    /// The Protocol error Cassandra sends for an unsupported version; drivers downgrade on it.
    pub fn unsupported_version(version: u8) -> ErrorResponse {
        ErrorResponse::protocol(format!(
            "Invalid or unsupported protocol version ({version}); supported versions are ({})",
            super::super::frame::SUPPORTED_VERSIONS_TEXT
        ))
    }

    /// An Unprepared error (0x2500) for `id`.
    pub fn unprepared(message: impl Into<String>, id: Bytes) -> ErrorResponse {
        ErrorResponse::with_extra(message, ErrorExtra::Unprepared { id })
    }

    /// An Already_exists error (0x2400); `table` is `""` for a keyspace.
    pub fn already_exists(
        message: impl Into<String>,
        keyspace: &str,
        table: &str,
    ) -> ErrorResponse {
        ErrorResponse::with_extra(
            message,
            ErrorExtra::AlreadyExists {
                keyspace: keyspace.to_string(),
                table: table.to_string(),
            },
        )
    }

    /// Writes `<code><message><extra>` for `version`.
    pub(crate) fn encode(&self, out: &mut BytesMut, version: u8) -> Result<(), EncodeError> {
        if let Some(code) = self.extra.code() {
            if code != self.code {
                return Err(EncodeError::Invalid(
                    "error extra does not match the error code",
                ));
            }
        }
        write_int(out, self.code);
        write_string(out, &capped(&self.message, MAX_ERROR_MESSAGE_BYTES))?;
        match &self.extra {
            ErrorExtra::None => {}
            ErrorExtra::Unavailable {
                cl,
                required,
                alive,
            } => {
                write_consistency(out, *cl);
                write_int(out, *required);
                write_int(out, *alive);
            }
            ErrorExtra::WriteTimeout {
                cl,
                received,
                block_for,
                write_type,
                contentions,
            } => {
                write_consistency(out, *cl);
                write_int(out, *received);
                write_int(out, *block_for);
                write_string(out, write_type)?;
                if let (true, Some(c)) = (version >= 5, contentions) {
                    write_short(out, *c);
                }
            }
            ErrorExtra::ReadTimeout {
                cl,
                received,
                block_for,
                data_present,
            } => {
                write_consistency(out, *cl);
                write_int(out, *received);
                write_int(out, *block_for);
                write_byte(out, u8::from(*data_present));
            }
            ErrorExtra::ReadFailure {
                cl,
                received,
                block_for,
                num_failures,
                reasons,
                data_present,
            } => {
                write_consistency(out, *cl);
                write_int(out, *received);
                write_int(out, *block_for);
                write_failures(out, version, *num_failures, reasons)?;
                write_byte(out, u8::from(*data_present));
            }
            ErrorExtra::WriteFailure {
                cl,
                received,
                block_for,
                num_failures,
                reasons,
                write_type,
            } => {
                write_consistency(out, *cl);
                write_int(out, *received);
                write_int(out, *block_for);
                write_failures(out, version, *num_failures, reasons)?;
                write_string(out, write_type)?;
            }
            ErrorExtra::FunctionFailure {
                keyspace,
                function,
                arg_types,
            } => {
                write_string(out, keyspace)?;
                write_string(out, function)?;
                write_string_list(out, arg_types)?;
            }
            ErrorExtra::AlreadyExists { keyspace, table } => {
                write_string(out, keyspace)?;
                write_string(out, table)?;
            }
            ErrorExtra::Unprepared { id } => write_short_bytes(out, id)?,
            ErrorExtra::CasWriteUnknown {
                cl,
                received,
                block_for,
            } => {
                write_consistency(out, *cl);
                write_int(out, *received);
                write_int(out, *block_for);
            }
        }
        Ok(())
    }
}

/// `<numfailures>` before v5, `<reason_map>` in v5.
fn write_failures(
    out: &mut BytesMut,
    version: u8,
    num: i32,
    reasons: &[(IpAddr, u16)],
) -> Result<(), EncodeError> {
    if version >= 5 {
        write_int_count(out, reasons.len(), "<reason_map>")?;
        for (ip, code) in reasons {
            write_inetaddr(out, ip);
            write_short(out, *code);
        }
    } else {
        write_int(out, num);
    }
    Ok(())
}
