//! Writes spanning owners (cluster mode): a write (a LOGGED or UNLOGGED batch, an `IN` on the
//! partition key) whose physical partitions have different owners answers
//! `ClientError::Spans` at its coordinator, which sends the same request to every owner
//! (itself included, over the same internal connections as forwarding, `forward.rs`) with
//! custom payload `ringgate-only-partitions` (`query::write::only_partitions`): each owner
//! computes the whole write and applies only its partitions' mutations.
//!
//! Every part gets the same write timestamp (the client's, else one the coordinator draws
//! once), so a part sent twice writes the same cells (last-write-wins): the parts and a
//! replay of the whole write are idempotent (list appends and `now()` excepted, see the
//! README). A LOGGED batch is first stored in the cluster batch log (`batchlog.rs`) and its
//! entry deleted once every part succeeded; a coordinator that dies in between leaves the entry,
//! and another node replays it.
//!
//! The answer: all parts applied: the normal result, `RequestCharge` the sum of the parts'.
//! No part applied (each answered an error that means "not done"): the first part's error.
//! Otherwise (some applied, or an outcome is unknown): for a LOGGED batch a WriteTimeout of
//! type BATCH, as Cassandra answers once the batchlog holds the batch (the replay finishes
//! it); for the others the first failed part's answer (an unlogged write may apply in part,
//! as in Cassandra).
//!
//! Test hook: `RINGGATE_TEST_FANOUT_PAUSE_MS` sends the parts one after the other, sleeping
//! that long between them, so a kill -9 test can land between parts.

use super::forward::{forward_part, unavailable};
use super::peer::Answer;
use super::Shared;
use crate::protocol::frame::Opcode;
use crate::protocol::request::RequestEnvelope;
use crate::protocol::response::{error_code, ErrorExtra, ErrorResponse, Response, ResponseExtras};
use crate::protocol::types::read_int;
use crate::query::trace::Tracer;
use crate::query::write::only_partitions;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// A spanning write's partitions: (storage id, partition id, owner; None for this node).
pub type Parts = Vec<(u64, u64, Option<String>)>;

/// A write spanning owners, as the engine answered it (`ClientError::Spans`).
pub struct Spanning {
    pub parts: Parts,
    /// A LOGGED batch (a BATCH request, or a `BEGIN BATCH` statement): logged first.
    pub logged: bool,
}

/// Sends `env` to every owner of `parts` and merges their answers (module doc). `ts`: the write
/// timestamp of every part when the request has none of its own.
pub async fn fan_out(
    shared: &Arc<Shared>,
    env: &Arc<RequestEnvelope>,
    keyspace: Option<String>,
    ts: i64,
    spanning: Spanning,
    tracer: Option<Arc<Tracer>>,
) -> (Response, ResponseExtras) {
    let Some(cluster) = shared.engine.node.cluster.as_ref() else {
        return error(unavailable("not a cluster".into()));
    };
    let owners = by_owner(cluster.name(), &spanning.parts);
    let entry = match spanning.logged && !super::batchlog::is_replay(env) {
        true => match super::batchlog::write(shared, env, keyspace.as_deref(), ts).await {
            Ok(key) => Some(key),
            Err(e) => return error(e),
        },
        false => None,
    };
    let answers = send(shared, env, keyspace, ts, owners, tracer).await;
    let merged = merge(answers, spanning.logged);
    if merged.entry_done {
        if let Some(key) = entry {
            super::batchlog::delete(shared, key).await;
        }
    }
    (merged.response, merged.extras)
}

/// The partitions a forwarded part applies (None: not a part).
pub fn only_partitions(
    env: &RequestEnvelope,
) -> Option<crate::query::Result<only_partitions::OnlyPartitions>> {
    let v = super::forward::payload_value(env, only_partitions::PAYLOAD_KEY)?;
    super::forward::is_forwarded(env).then(|| only_partitions::decode(v.clone()))
}

fn error(e: ErrorResponse) -> (Response, ResponseExtras) {
    (Response::Error(e), ResponseExtras::NONE)
}

/// Per owner (this node's own name for `None`), the payload entries: every partition of the
/// write, flagged where that owner applies it.
fn by_owner(me: &str, parts: &[(u64, u64, Option<String>)]) -> BTreeMap<String, Bytes> {
    let owner = |o: &Option<String>| o.clone().unwrap_or_else(|| me.to_string());
    let mut names: Vec<String> = parts.iter().map(|(_, _, o)| owner(o)).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let flagged: Vec<_> = parts
                .iter()
                .map(|(sid, pid, o)| ((*sid, *pid), owner(o) == name))
                .collect();
            (name, only_partitions::encode(&flagged))
        })
        .collect()
}

/// Each owner's answer (or why there is none), in owner order.
async fn send(
    shared: &Arc<Shared>,
    env: &Arc<RequestEnvelope>,
    keyspace: Option<String>,
    ts: i64,
    owners: BTreeMap<String, Bytes>,
    tracer: Option<Arc<Tracer>>,
) -> Vec<Result<Answer, ErrorResponse>> {
    let part = move |owner: String, only: Bytes| {
        let (shared, env, ks, t) = (
            Arc::clone(shared),
            Arc::clone(env),
            keyspace.clone(),
            tracer.clone(),
        );
        async move {
            let extra = [(only_partitions::PAYLOAD_KEY.to_string(), only)];
            forward_part(&shared, &env, ks, || ts, &owner, t.as_deref(), &extra).await
        }
    };
    let pause_ms = pause_ms();
    if pause_ms > 0 {
        let mut out = Vec::new();
        for (i, (owner, only)) in owners.into_iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(pause_ms)).await;
            }
            out.push(part(owner, only).await);
        }
        return out;
    }
    let tasks: Vec<_> = owners
        .into_iter()
        .map(|(owner, only)| tokio::spawn(part(owner, only)))
        .collect();
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(t.await.unwrap_or_else(|e| {
            Err(ErrorResponse::new(
                error_code::SERVER,
                format!("a part of the write failed: {e}"),
            ))
        }));
    }
    out
}

fn pause_ms() -> u64 {
    static PAUSE: OnceLock<u64> = OnceLock::new();
    *PAUSE.get_or_init(|| {
        std::env::var("RINGGATE_TEST_FANOUT_PAUSE_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    })
}

/// What one part did.
#[derive(Debug, PartialEq)]
enum Done {
    Applied,
    /// An error that means nothing of the part was applied.
    NotApplied,
    /// It may have been applied (a timeout, a lost connection).
    Unknown,
}

fn done(a: &Result<Answer, ErrorResponse>) -> Done {
    match a {
        Ok(a) if a.opcode != Opcode::Error => Done::Applied,
        Ok(a) => match read_int(&mut a.body.clone()) {
            Ok(error_code::WRITE_TIMEOUT) => Done::Unknown,
            _ => Done::NotApplied,
        },
        Err(e) if e.code == error_code::WRITE_TIMEOUT => Done::Unknown,
        Err(_) => Done::NotApplied,
    }
}

struct Merged {
    response: Response,
    extras: ResponseExtras,
    /// The batch log entry may go: every part applied, or none did.
    entry_done: bool,
}

/// The client's answer from the parts' answers (module doc).
fn merge(answers: Vec<Result<Answer, ErrorResponse>>, logged: bool) -> Merged {
    let mut charge_ru = 0.0;
    let mut warnings: Vec<String> = Vec::new();
    for a in answers.iter().flatten() {
        charge_ru += charge_of(a);
        for w in &a.warnings {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
    }
    let dones: Vec<Done> = answers.iter().map(done).collect();
    let all = |d: Done| dones.iter().all(|x| *x == d);
    let entry_done = all(Done::Applied) || all(Done::NotApplied);
    let extras = ResponseExtras {
        tracing_id: None,
        warnings,
        custom_payload: vec![(
            "RequestCharge".to_string(),
            Bytes::copy_from_slice(&charge_ru.to_be_bytes()),
        )],
        request_charge: None,
    };
    let first_failed = dones.iter().position(|d| *d != Done::Applied);
    let response = match first_failed {
        None => relayed(answers.into_iter().next()),
        Some(_) if logged && !entry_done => Response::Error(ErrorResponse::with_extra(
            "Operation timed out - received only 0 responses (a part of the batch failed; \
             the batch is in the batch log and will be applied)",
            ErrorExtra::WriteTimeout {
                cl: 0x0001,
                received: 0,
                block_for: 1,
                write_type: "BATCH".into(),
                contentions: None,
            },
        )),
        Some(i) => relayed(answers.into_iter().nth(i)),
    };
    Merged {
        response,
        extras,
        entry_done,
    }
}

fn relayed(a: Option<Result<Answer, ErrorResponse>>) -> Response {
    match a {
        Some(Ok(a)) => Response::Relayed {
            opcode: a.opcode,
            body: a.body,
        },
        Some(Err(e)) => Response::Error(e),
        None => Response::Error(unavailable("a write with no parts".into())),
    }
}

/// A part's `RequestCharge` (an 8-byte big-endian double), 0 without one.
fn charge_of(a: &Answer) -> f64 {
    a.custom_payload
        .iter()
        .find(|(k, _)| k == "RequestCharge")
        .and_then(|(_, v)| <[u8; 8]>::try_from(&v[..]).ok())
        .map_or(0.0, f64::from_be_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::request::{batch_kind, Batch, Request};

    fn batch(kind: u8) -> Request {
        Request::Batch(Batch {
            kind,
            statements: Vec::new(),
            consistency: 1,
            serial_consistency: None,
            timestamp: None,
            keyspace: None,
            now_in_seconds: None,
        })
    }

    fn ok(charge: f64, warning: &str) -> Result<Answer, ErrorResponse> {
        Ok(Answer {
            opcode: Opcode::Result,
            warnings: vec![warning.to_string()],
            custom_payload: vec![(
                "RequestCharge".into(),
                Bytes::copy_from_slice(&charge.to_be_bytes()),
            )],
            body: Bytes::from_static(b"\x00\x00\x00\x01"),
        })
    }

    fn failed(e: ErrorResponse) -> Result<Answer, ErrorResponse> {
        let mut body = bytes::BytesMut::new();
        e.encode(&mut body, 4).unwrap();
        Ok(Answer {
            opcode: Opcode::Error,
            warnings: Vec::new(),
            custom_payload: Vec::new(),
            body: body.freeze(),
        })
    }

    fn code(r: &Response) -> i32 {
        match r {
            Response::Error(e) => e.code,
            Response::Relayed { opcode, body } if *opcode == Opcode::Error => {
                read_int(&mut body.clone()).unwrap()
            }
            _ => 0,
        }
    }

    /// Each owner gets every partition, flagged where it applies it; this node's are under
    /// its own name.
    #[test]
    fn every_owner_gets_its_partitions_flagged() {
        let parts = vec![(1, 1, None), (1, 2, Some("b".into())), (2, 9, None)];
        let owners = by_owner("a", &parts);
        assert_eq!(owners.keys().collect::<Vec<_>>(), ["a", "b"]);
        let a = only_partitions::decode(owners["a"].clone()).unwrap();
        let b = only_partitions::decode(owners["b"].clone()).unwrap();
        assert_eq!((a[&(1, 1)], a[&(1, 2)], a[&(2, 9)]), (true, false, true));
        assert_eq!((b[&(1, 1)], b[&(1, 2)], b[&(2, 9)]), (false, true, false));
    }

    /// All applied: the result, charges summed, warnings once. None applied: the first error,
    /// the log entry may go. Mixed or unknown: a LOGGED batch times out (its entry stays), an
    /// unlogged one answers the failed part's error.
    #[test]
    fn answers_merge_as_cassandra_answers() {
        let logged = batch(batch_kind::LOGGED);
        let m = merge(vec![ok(2.5, "w"), ok(4.0, "w")], true);
        assert_eq!(charge_of_extras(&m.extras), 6.5);
        assert_eq!(m.extras.warnings, vec!["w".to_string()]);
        assert!(matches!(
            m.response,
            Response::Relayed {
                opcode: Opcode::Result,
                ..
            }
        ));
        assert!(m.entry_done);

        let invalid = || failed(ErrorResponse::invalid("bad"));
        let m = merge(vec![invalid(), invalid()], true);
        assert_eq!(code(&m.response), error_code::INVALID);
        assert!(m.entry_done);

        for answers in [
            vec![ok(1.0, "w"), invalid()],
            vec![ok(1.0, "w"), Err(lost(&logged))],
            vec![invalid(), Err(lost(&logged))],
        ] {
            let m = merge(answers, true);
            assert_eq!(code(&m.response), error_code::WRITE_TIMEOUT);
            assert!(!m.entry_done);
        }

        let unlogged = batch(batch_kind::UNLOGGED);
        let m = merge(vec![ok(1.0, "w"), invalid()], false);
        assert_eq!(code(&m.response), error_code::INVALID);
        assert_eq!(charge_of_extras(&m.extras), 1.0);
        let m = merge(vec![Err(lost(&unlogged)), ok(1.0, "w")], false);
        match m.response {
            Response::Error(e) => assert!(
                matches!(&e.extra, ErrorExtra::WriteTimeout { write_type, .. } if write_type == "UNLOGGED_BATCH"),
                "{e:?}"
            ),
            _ => panic!("not a timeout"),
        }
    }

    /// A part that got no answer, as forwarding answers it.
    fn lost(req: &Request) -> ErrorResponse {
        let e = crate::server::peer::PeerError::Lost {
            addr: "b".into(),
            why: "killed".into(),
        };
        crate::server::forward::peer_error(req, false, e)
    }

    fn charge_of_extras(x: &ResponseExtras) -> f64 {
        charge_of(&Answer {
            opcode: Opcode::Result,
            warnings: Vec::new(),
            custom_payload: x.custom_payload.clone(),
            body: Bytes::new(),
        })
    }
}
