//! The error a client sees: one type for every layer (schema, partition, query, server), each
//! variant knowing its CQL error code (`code`), its text in `Display` (Cassandra's wording, or
//! Cosmos DB's where ringgate answers as the Cassandra API does, e.g. the 429 of Overloaded).
//!
//! A leaf: it imports only `protocol` (for the codes), so any layer can return it.
//! `query::QueryError` and `schema::SchemaError` are this type under the names their callers
//! know; the server turns it into an ERROR frame (`server::convert::error`), adding the extra
//! fields a code carries (write type, already-existing table, failed function).

use crate::protocol::response::error_code;
use bytes::Bytes;

/// Errors a client sees; each maps to one CQL error code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// 0x2000 (Cassandra also reports unknown properties as syntax errors).
    #[error("{0}")]
    Syntax(String),
    /// 0x2200
    #[error("{0}")]
    Invalid(String),
    /// 0x2400, with the keyspace and table (empty for a keyspace) that exist.
    #[error("{message}")]
    AlreadyExists {
        message: String,
        keyspace: String,
        table: String,
    },
    /// 0x2300
    #[error("{0}")]
    Config(String),
    /// 0x2500, with the statement id the client sent.
    #[error("Prepared query with ID {} not found (either the query was not prepared on this host (maybe the host has been restarted?) or you have prepared too many queries and it has been evicted from the internal cache)", hex(.0))]
    Unprepared(Bytes),
    /// 0x2100
    #[error("{0}")]
    Unauthorized(String),
    /// 0x0000
    #[error("{0}")]
    Server(String),
    /// 0x1001: over the provisioned throughput (Cosmos DB's 429), in Cosmos DB's words; the
    /// client may retry after `retry_after_ms`. `activity_id` is the id Cosmos DB gives each
    /// request (random here), printed twice as Cosmos DB does.
    #[error("Request rate is large: ActivityID={activity_id}, RetryAfterMs={retry_after_ms}, Additional details='Response status code does not indicate success: TooManyRequests (429); Substatus: 3200; ActivityId: {activity_id}; Reason: (Message: {{\"Errors\":[\"Request rate is large. More Request Units may be needed, so no changes were made. Please retry this request later. Learn more: http://aka.ms/cosmosdb-error-429\"]}});")]
    Overloaded {
        retry_after_ms: u64,
        activity_id: uuid::Uuid,
    },
    /// 0x1000: the data cannot be reached now (a storage backend or the cluster's control plane
    /// is down, a partition has no live owner); nothing was done, a retry may succeed.
    #[error("{0}")]
    Unavailable(String),
    /// 0x1000 to a client, but first an instruction to the server (cluster mode): the physical
    /// partition is owned by node `owner` (None: by no live node right now), so the request
    /// goes to it (`server::forward`). Nothing was read or written for the request.
    #[error("{message}")]
    NotOwner {
        message: String,
        owner: Option<String>,
    },
    /// 0x1000 to a client, but first an instruction to the server (cluster mode): the write
    /// commits to physical partitions owned by different nodes; `parts` names each one as
    /// (storage id, partition id, owner: None for this node). The coordinator sends the request
    /// to every owner with the partitions it applies (`server::spanning`); `logged`: a LOGGED
    /// batch, which goes through the cluster batch log first. Nothing was read or written for
    /// the request.
    #[error("{message}")]
    Spans {
        message: String,
        parts: Vec<(u64, u64, Option<String>)>,
        logged: bool,
    },
    /// 0x1100: a write held by server-side retry past its limit, with its protocol write type.
    #[error("{0}")]
    WriteTimeout(String, WriteType),
    /// 0x1200: a read held by server-side retry past its limit.
    #[error("{0}")]
    ReadTimeout(String),
    /// Over an enforced budget with server-side retry: nothing was read or written; the caller
    /// (the connection) runs the request again after `retry_after_ms` (`RequestCtx::held_since`).
    /// A caller that cannot wait answers it as Overloaded (0x1001).
    #[error("Request rate is large: RetryAfterMs={retry_after_ms}")]
    Held { retry_after_ms: u64 },
    /// 0x1400: a (system) function failed, e.g. an integer division by zero.
    #[error("{message}")]
    FunctionFailure {
        message: String,
        function: String,
        arg_types: Vec<String>,
    },
}

impl ClientError {
    /// The CQL error code of the ERROR frame this error becomes.
    pub fn code(&self) -> i32 {
        match self {
            ClientError::Syntax(_) => error_code::SYNTAX,
            ClientError::Invalid(_) => error_code::INVALID,
            ClientError::AlreadyExists { .. } => error_code::ALREADY_EXISTS,
            ClientError::Config(_) => error_code::CONFIG,
            ClientError::Unprepared(_) => error_code::UNPREPARED,
            ClientError::Unauthorized(_) => error_code::UNAUTHORIZED,
            ClientError::Server(_) => error_code::SERVER,
            ClientError::Overloaded { .. } | ClientError::Held { .. } => error_code::OVERLOADED,
            ClientError::Unavailable(_)
            | ClientError::NotOwner { .. }
            | ClientError::Spans { .. } => error_code::UNAVAILABLE,
            ClientError::WriteTimeout(..) => error_code::WRITE_TIMEOUT,
            ClientError::ReadTimeout(_) => error_code::READ_TIMEOUT,
            ClientError::FunctionFailure { .. } => error_code::FUNCTION_FAILURE,
        }
    }

    /// Cosmos DB's 429 for a request that may retry after `retry_after_ms`, with a new
    /// activity id.
    pub fn overloaded(retry_after_ms: u64) -> ClientError {
        ClientError::Overloaded {
            retry_after_ms,
            activity_id: uuid::Uuid::new_v4(),
        }
    }
}

/// The kind of write a WriteTimeout reports (the protocol's `writeType` string).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteType {
    Simple,
    Batch,
    UnloggedBatch,
    Counter,
    Cas,
}

impl WriteType {
    /// The protocol's name of the write type.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteType::Simple => "SIMPLE",
            WriteType::Batch => "BATCH",
            WriteType::UnloggedBatch => "UNLOGGED_BATCH",
            WriteType::Counter => "COUNTER",
            WriteType::Cas => "CAS",
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
