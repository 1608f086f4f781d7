//! Decoded answers of the gateway. The proto3 JSON mapping writes int64 as strings and omits
//! zero values (an absent `succeeded` is false, an absent `kvs` is empty, a keepalive answer
//! without `TTL` means the lease is gone), so every field is read leniently.

use super::{b64, EtcdError};
use serde_json::Value;

/// A key's state as etcd returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    /// 0: not attached to a lease.
    pub lease: i64,
}

#[derive(Debug, Clone, Default)]
pub struct RangeResponse {
    pub kvs: Vec<KeyValue>,
    /// More keys match than `limit` allowed.
    pub more: bool,
    /// The store's revision the read saw.
    pub revision: i64,
}

/// The answer to one operation of a transaction's chosen branch.
#[derive(Debug, Clone)]
pub enum OpResponse {
    Range(RangeResponse),
    Put,
    Delete { deleted: i64 },
}

#[derive(Debug, Clone)]
pub struct TxnResponse {
    pub succeeded: bool,
    pub responses: Vec<OpResponse>,
    pub revision: i64,
}

/// An int64 field: a JSON string (proto3 mapping) or number; absent is 0.
pub(super) fn int(v: &Value, field: &str) -> Result<i64, EtcdError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(0),
        Some(Value::String(s)) => s.parse().map_err(|_| bad(field, v)),
        Some(Value::Number(n)) => n.as_i64().ok_or_else(|| bad(field, v)),
        Some(_) => Err(bad(field, v)),
    }
}

pub(super) fn bytes(v: &Value, field: &str) -> Result<Vec<u8>, EtcdError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => b64::decode(s).ok_or_else(|| bad(field, v)),
        Some(_) => Err(bad(field, v)),
    }
}

fn bad(field: &str, v: &Value) -> EtcdError {
    let mut text = v.to_string();
    text.truncate(200);
    EtcdError::Protocol(format!("field {field:?} unreadable in {text}"))
}

pub(super) fn revision(v: &Value) -> Result<i64, EtcdError> {
    v.get("header").map_or(Ok(0), |h| int(h, "revision"))
}

impl KeyValue {
    pub(super) fn from_json(v: &Value) -> Result<KeyValue, EtcdError> {
        Ok(KeyValue {
            key: bytes(v, "key")?,
            value: bytes(v, "value")?,
            create_revision: int(v, "create_revision")?,
            mod_revision: int(v, "mod_revision")?,
            version: int(v, "version")?,
            lease: int(v, "lease")?,
        })
    }
}

impl RangeResponse {
    pub(super) fn from_json(v: &Value) -> Result<RangeResponse, EtcdError> {
        let kvs = match v.get("kvs") {
            Some(Value::Array(a)) => a
                .iter()
                .map(KeyValue::from_json)
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        let more = v.get("more").and_then(Value::as_bool).unwrap_or(false);
        Ok(RangeResponse {
            kvs,
            more,
            revision: revision(v)?,
        })
    }
}

impl TxnResponse {
    pub(super) fn from_json(v: &Value) -> Result<TxnResponse, EtcdError> {
        let mut responses = Vec::new();
        for r in v
            .get("responses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            responses.push(if let Some(range) = r.get("response_range") {
                OpResponse::Range(RangeResponse::from_json(range)?)
            } else if let Some(d) = r.get("response_delete_range") {
                OpResponse::Delete {
                    deleted: int(d, "deleted")?,
                }
            } else {
                OpResponse::Put
            });
        }
        Ok(TxnResponse {
            succeeded: v.get("succeeded").and_then(Value::as_bool).unwrap_or(false),
            responses,
            revision: revision(v)?,
        })
    }

    /// The keys read by the `n`th operation of the chosen branch (a `Get`).
    pub fn range(&self, n: usize) -> Option<&RangeResponse> {
        match self.responses.get(n) {
            Some(OpResponse::Range(r)) => Some(r),
            _ => None,
        }
    }
}
