//! Watches (`POST /v3/watch`, a stream): every change of a key or range from a revision on, in
//! revision order, as batches. The first message only confirms the watch (`created`); a
//! watch from a revision etcd has compacted away fails with `Compacted` (list again, then
//! watch from the listing's revision + 1). The stream has no deadline of its own (it is idle
//! while nothing changes): callers bound each `next` with their own timeout when they need
//! to notice a silent etcd; a killed etcd ends it with `Interrupted`.

use super::stream::LineStream;
use super::types::{int, revision, KeyValue};
use super::EtcdError;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Put,
    Delete,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchEvent {
    pub kind: EventKind,
    /// For a delete: the key and the deletion's mod revision, no value.
    pub kv: KeyValue,
}

#[derive(Debug, Clone)]
pub struct WatchBatch {
    /// The store's revision when the batch was sent.
    pub revision: i64,
    pub events: Vec<WatchEvent>,
}

pub struct Watch {
    pub(super) lines: LineStream,
    pub(super) endpoint: String,
}

impl Watch {
    /// The next message as JSON (`result` unwrapped), with gateway errors and the end of the
    /// stream as typed errors.
    pub(super) async fn message(&mut self) -> Result<Value, EtcdError> {
        let line = self.lines.next_line().await.map_err(|e| match e {
            super::http::HttpError::Malformed(m) => EtcdError::Protocol(m),
            other => EtcdError::Interrupted {
                endpoint: self.endpoint.clone(),
                detail: format!("{other:?}"),
            },
        })?;
        let Some(line) = line else {
            let detail = "the watch stream ended".to_string();
            return Err(EtcdError::Interrupted {
                endpoint: self.endpoint.clone(),
                detail,
            });
        };
        let v: Value = serde_json::from_slice(&line)
            .map_err(|e| EtcdError::Protocol(format!("watch message: {e}")))?;
        if let Some(err) = v.get("error") {
            let message = (err.get("message").and_then(Value::as_str)).unwrap_or("watch error");
            return Err(EtcdError::Server {
                code: int(err, "grpc_code").unwrap_or(2),
                message: message.into(),
            });
        }
        let result = v.get("result").cloned().unwrap_or(Value::Null);
        let compacted = int(&result, "compact_revision")?;
        if compacted > 0 {
            return Err(EtcdError::Compacted {
                revision: compacted,
            });
        }
        if result.get("canceled").and_then(Value::as_bool) == Some(true) {
            let reason = result
                .get("cancel_reason")
                .and_then(Value::as_str)
                .unwrap_or("");
            return Err(EtcdError::Server {
                code: 1,
                message: format!("watch canceled: {reason}"),
            });
        }
        Ok(result)
    }

    /// The next batch of changes (waits until there is one).
    pub async fn next(&mut self) -> Result<WatchBatch, EtcdError> {
        loop {
            let result = self.message().await?;
            let events = match result.get("events") {
                Some(Value::Array(a)) => a.iter().map(event).collect::<Result<Vec<_>, _>>()?,
                _ => Vec::new(),
            };
            if !events.is_empty() {
                return Ok(WatchBatch {
                    revision: revision(&result)?,
                    events,
                });
            }
        }
    }
}

fn event(v: &Value) -> Result<WatchEvent, EtcdError> {
    let kind = match v.get("type").and_then(Value::as_str) {
        Some("DELETE") => EventKind::Delete,
        _ => EventKind::Put,
    };
    let kv = KeyValue::from_json(v.get("kv").unwrap_or(&Value::Null))?;
    Ok(WatchEvent { kind, kv })
}
