//! The client: endpoints tried in turn (starting from the last one that answered), a deadline
//! per request, bounded answers, and typed errors that say whether the request may have been
//! applied.

use super::http::{self, HttpError};
use super::stream::LineStream;
use super::txn::{Txn, MAX_TXN_OPS};
use super::types::{int, RangeResponse, TxnResponse};
use super::watch::Watch;
use super::{b64, EtcdError};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Deadline of one request on one endpoint, connect included.
    pub request_timeout_ms: u64,
    /// Deadline of a connect: shorter, so that a dead endpoint leaves time for the next.
    pub connect_timeout_ms: u64,
    /// Largest answer accepted.
    pub max_response_bytes: usize,
    /// Largest request sent (etcd's `--max-request-bytes` defaults to 1.5 MiB of protobuf;
    /// base64 in JSON adds a third, which the gateway removes).
    pub max_request_bytes: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            request_timeout_ms: 3000,
            connect_timeout_ms: 500,
            max_response_bytes: 32 << 20,
            max_request_bytes: 2 << 20,
        }
    }
}

/// A lease as granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub id: i64,
    pub ttl_s: i64,
}

#[derive(Debug)]
pub struct EtcdClient {
    /// `host:port` each.
    endpoints: Vec<String>,
    preferred: AtomicUsize,
    opts: ClientOptions,
}

/// `http://host:port` or `host:port` (TLS to etcd is not supported yet).
pub fn parse_endpoint(text: &str) -> Result<String, EtcdError> {
    let t = text.trim();
    if t.starts_with("https://") {
        return Err(EtcdError::Config(format!(
            "{t}: TLS to etcd is not supported yet"
        )));
    }
    let hostport = t.strip_prefix("http://").unwrap_or(t).trim_end_matches('/');
    let ok = hostport
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && !h.contains('/') && p.parse::<u16>().is_ok());
    if !ok {
        return Err(EtcdError::Config(format!(
            "{t:?} is not an etcd endpoint (expected http://host:port or host:port)"
        )));
    }
    Ok(hostport.to_string())
}

impl EtcdClient {
    pub fn new(endpoints: &[String], opts: ClientOptions) -> Result<EtcdClient, EtcdError> {
        if endpoints.is_empty() {
            return Err(EtcdError::Config("no etcd endpoint given".into()));
        }
        let endpoints = endpoints
            .iter()
            .map(|e| parse_endpoint(e))
            .collect::<Result<_, _>>()?;
        Ok(EtcdClient {
            endpoints,
            preferred: AtomicUsize::new(0),
            opts,
        })
    }

    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// Posts `body` to `path`, trying each endpoint once. Only a failed connect moves on to the
    /// next endpoint: once a request was sent, resending it could apply it twice, so a lost
    /// answer is `Timeout` (outcome unknown) for the caller to resolve.
    async fn call(&self, path: &str, body: &Value) -> Result<Value, EtcdError> {
        let body = body.to_string().into_bytes();
        if body.len() > self.opts.max_request_bytes {
            return Err(EtcdError::TooLarge {
                bytes: body.len(),
                limit_bytes: self.opts.max_request_bytes,
            });
        }
        let (stream, at) = self.connect_any().await?;
        let endpoint = &self.endpoints[at];
        let limit = self.opts.max_response_bytes;
        let deadline = Duration::from_millis(self.opts.request_timeout_ms);
        let answer =
            tokio::time::timeout(deadline, http::post(stream, endpoint, path, &body, limit));
        match answer.await {
            Ok(Ok(response)) => decode(endpoint, response),
            Ok(Err(e)) => Err(transport(endpoint, e)),
            Err(_) => Err(EtcdError::Timeout {
                endpoint: endpoint.clone(),
                after_ms: self.opts.request_timeout_ms,
            }),
        }
    }

    /// A connection to the first endpoint that accepts one, starting from the last that did.
    async fn connect_any(&self) -> Result<(tokio::net::TcpStream, usize), EtcdError> {
        let n = self.endpoints.len();
        let first = self.preferred.load(Ordering::Relaxed);
        let mut errors = Vec::new();
        for i in 0..n {
            let at = (first + i) % n;
            let endpoint = &self.endpoints[at];
            let connect = Duration::from_millis(self.opts.connect_timeout_ms);
            match tokio::time::timeout(connect, http::connect(endpoint)).await {
                Ok(Ok(s)) => {
                    self.preferred.store(at, Ordering::Relaxed);
                    return Ok((s, at));
                }
                Ok(Err(HttpError::Connect(e))) => errors.push(format!("{endpoint}: {e}")),
                Ok(Err(e)) => errors.push(format!("{endpoint}: {e:?}")),
                Err(_) => errors.push(format!("{endpoint}: connect timed out")),
            }
        }
        Err(EtcdError::Unavailable {
            detail: errors.join("; "),
        })
    }

    /// Watches `[key, range_end)` (None: `key` alone) from `start_revision` (0: from now on).
    /// Returns once etcd confirmed the watch (within the request deadline).
    pub async fn watch(
        &self,
        key: &[u8],
        range_end: Option<&[u8]>,
        start_revision: i64,
    ) -> Result<Watch, EtcdError> {
        let req = with_range(
            json!({"start_revision": start_revision.to_string()}),
            key,
            range_end,
        );
        let body = json!({ "create_request": req }).to_string().into_bytes();
        let (stream, at) = self.connect_any().await?;
        let endpoint = self.endpoints[at].clone();
        let setup = async {
            let sent = http::send(stream, &endpoint, "/v3/watch", &body).await;
            let (r, status, framing) = sent.map_err(|e| transport(&endpoint, e))?;
            let lines = LineStream::new(r, framing, self.opts.max_response_bytes);
            let mut w = Watch {
                lines,
                endpoint: endpoint.clone(),
            };
            if status != 200 {
                let text = w.lines.next_line().await.ok().flatten().unwrap_or_default();
                let message = String::from_utf8_lossy(&text).into_owned();
                return Err(EtcdError::Server {
                    code: 2,
                    message: format!("HTTP {status}: {message}"),
                });
            }
            let first = w.message().await?;
            if first.get("created").and_then(Value::as_bool) != Some(true) {
                return Err(EtcdError::Protocol(format!("watch not created: {first}")));
            }
            Ok(w)
        };
        let deadline = Duration::from_millis(self.opts.request_timeout_ms);
        match tokio::time::timeout(deadline, setup).await {
            Ok(r) => r,
            Err(_) => Err(EtcdError::Timeout {
                endpoint,
                after_ms: self.opts.request_timeout_ms,
            }),
        }
    }

    /// Keys in `[key, range_end)` (`range_end` None: `key` alone), at most `limit` (0: all).
    pub async fn range(
        &self,
        key: &[u8],
        range_end: Option<&[u8]>,
        limit: i64,
    ) -> Result<RangeResponse, EtcdError> {
        self.range_at(key, range_end, limit, 0).await
    }

    /// As [`range`](Self::range), reading the store as of `revision` (0: the latest), so that
    /// the pages of one scan see one state.
    pub async fn range_at(
        &self,
        key: &[u8],
        range_end: Option<&[u8]>,
        limit: i64,
        revision: i64,
    ) -> Result<RangeResponse, EtcdError> {
        let req = with_range(
            json!({"limit": limit.to_string(),
            "revision": revision.to_string()}),
            key,
            range_end,
        );
        RangeResponse::from_json(&self.call("/v3/kv/range", &req).await?)
    }

    /// The mod revision of `key` without its value (None: absent): a cheap "did it change".
    pub async fn mod_revision(&self, key: &[u8]) -> Result<Option<i64>, EtcdError> {
        let req = with_range(json!({"limit": "1", "keys_only": true}), key, None);
        let r = RangeResponse::from_json(&self.call("/v3/kv/range", &req).await?)?;
        Ok(r.kvs.first().map(|kv| kv.mod_revision))
    }

    pub async fn get(&self, key: &[u8]) -> Result<Option<super::KeyValue>, EtcdError> {
        Ok(self.range(key, None, 1).await?.kvs.into_iter().next())
    }

    /// Writes `key`; `lease` 0: no lease. Returns the revision of the write.
    pub async fn put(&self, key: &[u8], value: &[u8], lease: i64) -> Result<i64, EtcdError> {
        let req = json!({"key": b64::encode(key), "value": b64::encode(value), "lease": lease.to_string()});
        super::types::revision(&self.call("/v3/kv/put", &req).await?)
    }

    /// Deletes `[key, range_end)` (None: `key` alone); returns how many keys went.
    pub async fn delete(&self, key: &[u8], range_end: Option<&[u8]>) -> Result<i64, EtcdError> {
        let req = with_range(json!({}), key, range_end);
        int(&self.call("/v3/kv/deleterange", &req).await?, "deleted")
    }

    pub async fn txn(&self, txn: &Txn) -> Result<TxnResponse, EtcdError> {
        let ops = txn.success.len().max(txn.failure.len());
        if ops > MAX_TXN_OPS {
            return Err(EtcdError::TooManyOps {
                ops,
                limit: MAX_TXN_OPS,
            });
        }
        TxnResponse::from_json(&self.call("/v3/kv/txn", &txn.to_json()).await?)
    }

    /// A new lease of `ttl_s` seconds (etcd may raise it to its minimum).
    pub async fn lease_grant(&self, ttl_s: i64) -> Result<Lease, EtcdError> {
        let v = self
            .call("/v3/lease/grant", &json!({"TTL": ttl_s.to_string()}))
            .await?;
        Ok(Lease {
            id: int(&v, "ID")?,
            ttl_s: int(&v, "TTL")?,
        })
    }

    /// Renews the lease: its TTL again, or None when the lease no longer exists.
    pub async fn lease_keepalive(&self, id: i64) -> Result<Option<i64>, EtcdError> {
        let v = self
            .call("/v3/lease/keepalive", &json!({"ID": id.to_string()}))
            .await?;
        let ttl = int(v.get("result").unwrap_or(&Value::Null), "TTL")?;
        Ok((ttl > 0).then_some(ttl))
    }

    /// Seconds left, or None when the lease no longer exists.
    pub async fn lease_time_to_live(&self, id: i64) -> Result<Option<i64>, EtcdError> {
        let v = self
            .call("/v3/lease/timetolive", &json!({"ID": id.to_string()}))
            .await?;
        let ttl = int(&v, "TTL")?;
        Ok((ttl >= 0).then_some(ttl))
    }

    /// Ends the lease now: its keys are deleted. A lease already gone is not an error.
    pub async fn lease_revoke(&self, id: i64) -> Result<(), EtcdError> {
        match self
            .call("/v3/lease/revoke", &json!({"ID": id.to_string()}))
            .await
        {
            Err(EtcdError::Server {
                code: GRPC_NOT_FOUND,
                ..
            })
            | Ok(_) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

const GRPC_NOT_FOUND: i64 = 5;

/// `req` with the key range `[key, range_end)` (None: `key` alone) in the gateway's fields.
fn with_range(mut req: Value, key: &[u8], range_end: Option<&[u8]>) -> Value {
    req["key"] = json!(b64::encode(key));
    if let Some(end) = range_end {
        req["range_end"] = json!(b64::encode(end));
    }
    req
}

fn transport(endpoint: &str, e: HttpError) -> EtcdError {
    match e {
        HttpError::Connect(e) => EtcdError::Unavailable {
            detail: format!("{endpoint}: {e}"),
        },
        // The request was (partly) sent: its outcome is unknown.
        HttpError::Io(e) => EtcdError::Interrupted {
            endpoint: endpoint.to_string(),
            detail: e.to_string(),
        },
        HttpError::Malformed(m) => EtcdError::Protocol(format!("{endpoint}: {m}")),
    }
}

/// A 200 answer's JSON, or the gateway's error object (`{"error", "code", "message"}`).
fn decode(endpoint: &str, r: http::Response) -> Result<Value, EtcdError> {
    let v: Value = serde_json::from_slice(&r.body).map_err(|e| {
        EtcdError::Protocol(format!(
            "{endpoint}: HTTP {} with unreadable JSON: {e}",
            r.status
        ))
    })?;
    if r.status == 200 && v.get("error").is_none() {
        return Ok(v);
    }
    let message = (v.get("message").or(v.get("error")))
        .and_then(Value::as_str)
        .unwrap_or("no message")
        .to_string();
    Err(EtcdError::Server {
        code: int(&v, "code").unwrap_or(2),
        message,
    })
}
