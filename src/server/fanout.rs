//! Cluster-wide reads of per-node virtual tables (`query/cluster_views.rs`): before a SELECT on
//! `system_traces.*` or a partition view of `system_views` runs on the node it arrived at, that
//! node asks every other live member for its rows, over the peer connections (`peer.rs`), as
//! `SELECT * FROM <table>` (a trace read restricted to one session asks for that session only)
//! with the custom payload `ringgate-local-only` (the member answers with its own rows and asks
//! no one). The rows reach the engine in `QueryOptions::peer_rows`, which merges them with this
//! node's before the client's WHERE, projection, LIMIT and paging apply.
//!
//! Bounds: every member is asked at once and waited for at most `PEER_DEADLINE_MS`; a member
//! gives at most `MAX_ROWS_PER_PEER` rows (one page) and all answers at most
//! `MAX_MERGED_BYTES`. A member that does not answer in time, answers an error or is cut, or
//! whose leg fails here, is left out with a warning in the response (the read does not fail:
//! a dead node must not hide the survivors' rows); a traced read names the members it asked.
//! Paging: each page asks again and pages the merged rows by position, as a single node pages
//! these tables (rows that change between pages may shift).
//!
//! Not in cluster mode, for requests forwarded or marked local-only, and for every other
//! statement this does nothing (a SELECT is parsed only if its text or keyspace names a
//! `system_` keyspace).

use super::peer::Answer;
use super::Shared;
use crate::protocol::frame::Opcode;
use crate::protocol::request::{Query, QueryParams, Request, RequestEnvelope, Values};
use crate::protocol::types::{read_bytes, read_int, read_short, read_string};
use crate::query::cluster_views::{PeerRows, Target, VRow};
use crate::query::{Binds, BoundValue};
use crate::schema::TableDef;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;

/// Custom payload key of a fan-out leg: answer with this node's rows only.
pub const LOCAL_ONLY_KEY: &str = "ringgate-local-only";
/// How long a member may take to answer a leg.
const PEER_DEADLINE_MS: u64 = 2_000;
/// Rows one member returns (a leg's page size).
const MAX_ROWS_PER_PEER: i32 = 20_000;
/// Bytes of answers merged from all members.
const MAX_MERGED_BYTES: usize = 32 << 20;
/// Nesting of a column type in an answer's metadata (ours are at most map<text, text>).
const MAX_TYPE_DEPTH: usize = 8;

/// Whether `env` is another node's fan-out leg.
pub fn is_local_only(env: &RequestEnvelope) -> bool {
    let payload = env.custom_payload.as_deref().unwrap_or_default();
    payload.iter().any(|(k, _)| k == LOCAL_ONLY_KEY)
}

/// The other members' rows for `env` when it reads a per-node table in cluster mode (None:
/// nothing to gather). `keyspace`: the session's.
pub async fn gather(
    shared: &Arc<Shared>,
    env: &RequestEnvelope,
    keyspace: Option<&str>,
) -> Option<Arc<PeerRows>> {
    let cluster = shared.engine.node.cluster.as_ref()?;
    if is_local_only(env) || super::forward::is_forwarded(env) {
        return None;
    }
    let target = target(shared, env, keyspace)?;
    let schema = shared.engine.schema();
    let table = schema.table(&target.keyspace, &target.table)?;
    let leg = Arc::new(leg_request(&target));
    let payload = Arc::new(vec![(
        LOCAL_ONLY_KEY.to_string(),
        Bytes::from(cluster.name().to_string()),
    )]);
    let mut legs = tokio::task::JoinSet::new();
    // Each leg's node by task id: a leg whose task fails (a panic) is named too.
    let mut names = std::collections::HashMap::new();
    for m in cluster
        .members()
        .values()
        .filter(|m| m.name != cluster.name())
    {
        let (shared, leg, payload) = (Arc::clone(shared), Arc::clone(&leg), Arc::clone(&payload));
        let addr = m.advertise.clone();
        let id = legs.spawn(async move {
            let deadline = Duration::from_millis(PEER_DEADLINE_MS);
            let answer =
                tokio::time::timeout(deadline, shared.peers.request(&addr, &payload, &leg));
            let answer = match answer.await {
                Err(_) => Err(format!("no answer within {PEER_DEADLINE_MS} ms")),
                Ok(a) => a.map_err(|e| e.to_string()),
            };
            answer
        });
        names.insert(id.id(), m.name.clone());
    }
    let mut out = PeerRows {
        asked: names.values().cloned().collect(),
        ..PeerRows::default()
    };
    out.asked.sort();
    let mut bytes = 0usize;
    for (node, answer) in settle(legs, names).await {
        let what = format!("{}.{}", target.keyspace, target.table);
        let left_out = |why: String| format!("rows of {what} from node {node} are left out: {why}");
        match answer.and_then(|a| rows_of(table, a, &mut bytes)) {
            Ok((rows, more)) => {
                if more {
                    out.warnings.push(left_out(format!(
                        "it has more than {MAX_ROWS_PER_PEER} (only those are shown)"
                    )));
                }
                out.nodes.push((node, rows));
            }
            Err(why) => out.warnings.push(left_out(why)),
        }
    }
    out.nodes.sort_by(|a, b| a.0.cmp(&b.0));
    Some(Arc::new(out))
}

/// Every leg's node and answer, as they finish; a leg whose task failed (panicked) answers
/// an error, so that its node is named among those left out.
async fn settle<T: 'static>(
    mut legs: tokio::task::JoinSet<Result<T, String>>,
    mut names: std::collections::HashMap<tokio::task::Id, String>,
) -> Vec<(String, Result<T, String>)> {
    let mut out = Vec::with_capacity(legs.len());
    while let Some(done) = legs.join_next_with_id().await {
        let (id, answer) = match done {
            Ok((id, answer)) => (id, answer),
            Err(e) => (e.id(), Err(format!("its request failed ({e})"))),
        };
        out.push((names.remove(&id).unwrap_or_default(), answer));
    }
    out
}

/// The per-node table a QUERY or EXECUTE reads, if any.
fn target(shared: &Shared, env: &RequestEnvelope, keyspace: Option<&str>) -> Option<Target> {
    use crate::query::cluster_views::target;
    match &env.request {
        Request::Query(q) => {
            let ks = q.params.keyspace.as_deref().or(keyspace);
            let named = (q.query.as_bytes().windows(7)).any(|w| w.eq_ignore_ascii_case(b"system_"))
                || ks.is_some_and(|k| k.starts_with("system_"));
            if !named {
                return None;
            }
            let parsed = crate::cql::parse(&q.query).ok()?;
            target(&parsed, ks, &binds(&q.params.values))
        }
        Request::Execute(e) => {
            let p = shared.engine.get_prepared(&e.id).ok()?;
            let ks = p.keyspace.as_deref().or(keyspace);
            target(&p.parsed, ks, &binds(&e.params.values))
        }
        _ => None,
    }
}

/// Positional values (what a trace read's session id may be bound as).
fn binds(values: &Values) -> Binds {
    match values {
        Values::Positional(v) => Binds::Positional(
            v.iter()
                .map(|x| match x {
                    crate::protocol::request::Value::Set(b) => BoundValue::Value(b.clone()),
                    _ => BoundValue::Null,
                })
                .collect(),
        ),
        _ => Binds::None,
    }
}

fn leg_request(target: &Target) -> Request {
    Request::Query(Query {
        query: target.leg_cql(),
        params: QueryParams {
            consistency: crate::protocol::types::consistency::ONE,
            page_size: Some(MAX_ROWS_PER_PEER),
            ..Default::default()
        },
    })
}

/// A member's rows in `t`'s column order, and whether it had more; counts the answer's bytes
/// into `bytes` and refuses it past `MAX_MERGED_BYTES`.
fn rows_of(t: &TableDef, a: Answer, bytes: &mut usize) -> Result<(Vec<VRow>, bool), String> {
    if a.opcode != Opcode::Result {
        let mut body = a.body;
        let _ = read_int(&mut body);
        let why = read_string(&mut body).unwrap_or_default();
        return Err(format!("it answered an error: {why}"));
    }
    *bytes += a.body.len();
    if *bytes > MAX_MERGED_BYTES {
        return Err(format!(
            "the answers exceed {MAX_MERGED_BYTES} bytes together"
        ));
    }
    decode_rows(t, a.body).map_err(|e| format!("malformed answer: {e}"))
}

/// A RESULT Rows body (protocol v4, with metadata) as rows of `t`, mapped by column name.
fn decode_rows(t: &TableDef, mut b: Bytes) -> Result<(Vec<VRow>, bool), String> {
    let e = |e: crate::protocol::types::DecodeError| e.to_string();
    if read_int(&mut b).map_err(e)? != 2 {
        return Err("not a Rows result".into());
    }
    let flags = read_int(&mut b).map_err(e)?;
    let count = read_int(&mut b).map_err(e)?;
    let more = flags & 0x0002 != 0;
    if more {
        read_bytes(&mut b).map_err(e)?;
    }
    if flags & 0x0004 != 0 {
        return Err("no column metadata".into());
    }
    let global = flags & 0x0001 != 0;
    if global {
        read_string(&mut b).map_err(e)?;
        read_string(&mut b).map_err(e)?;
    }
    let mut columns = Vec::new();
    for _ in 0..count.max(0) {
        if !global {
            read_string(&mut b).map_err(e)?;
            read_string(&mut b).map_err(e)?;
        }
        columns.push(t.column_index(&read_string(&mut b).map_err(e)?));
        skip_type(&mut b, 0)?;
    }
    let rows = read_int(&mut b).map_err(e)?.max(0) as usize;
    let mut out = Vec::with_capacity(rows.min(MAX_ROWS_PER_PEER as usize));
    for _ in 0..rows {
        let mut r = vec![None; t.columns.len()];
        for c in &columns {
            let v = read_bytes(&mut b).map_err(e)?;
            if let Some(i) = c {
                r[*i] = v;
            }
        }
        out.push(r);
    }
    Ok((out, more))
}

/// Skips a column type [option] (protocol spec section 4.2.5.2).
fn skip_type(b: &mut Bytes, depth: usize) -> Result<(), String> {
    let e = |e: crate::protocol::types::DecodeError| e.to_string();
    if depth > MAX_TYPE_DEPTH {
        return Err("column type nested too deeply".into());
    }
    match read_short(b).map_err(e)? {
        0x0000 => drop(read_string(b).map_err(e)?),
        0x0020 | 0x0022 => skip_type(b, depth + 1)?,
        0x0021 => {
            skip_type(b, depth + 1)?;
            skip_type(b, depth + 1)?;
        }
        0x0030 => {
            read_string(b).map_err(e)?;
            read_string(b).map_err(e)?;
            for _ in 0..read_short(b).map_err(e)? {
                read_string(b).map_err(e)?;
                skip_type(b, depth + 1)?;
            }
        }
        0x0031 => {
            for _ in 0..read_short(b).map_err(e)? {
                skip_type(b, depth + 1)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::response::{ColumnSpec, ColumnType, ResultBody, RowsMetadata, RowsWriter};
    use bytes::BytesMut;

    /// A member's Rows answer maps to the table's columns by name, whatever their order,
    /// types (nested ones skipped) or per-column table specs; unknown columns are dropped and
    /// a paging state says the member had more.
    #[test]
    fn a_members_rows_map_to_the_table_by_column_name() {
        let kss = crate::schema::system::keyspaces();
        let ks = kss.iter().find(|k| k.name == "system_traces").unwrap();
        let t = &ks.tables["sessions"];
        let spec = |table: &str, name: &str, ty| ColumnSpec {
            keyspace: "system_traces".into(),
            table: table.into(),
            name: name.into(),
            ty,
        };
        let map = ColumnType::Map(Box::new(ColumnType::Varchar), Box::new(ColumnType::Varchar));
        let nested = ColumnType::Tuple(vec![
            ColumnType::Int,
            ColumnType::List(Box::new(ColumnType::Int)),
        ]);
        let columns = vec![
            spec("sessions", "parameters", map),
            spec("other", "not_a_column", nested),
            spec("sessions", "command", ColumnType::Varchar),
        ];
        let mut w = RowsWriter::new(3);
        for v in [&b"\x00\x00\x00\x00"[..], b"x", b"QUERY"] {
            w.push_value(Some(v)).unwrap();
        }
        let rows = w
            .into_rows(RowsMetadata {
                columns,
                paging_state: Some(Bytes::from_static(b"more")),
                ..Default::default()
            })
            .unwrap();
        let mut body = BytesMut::new();
        ResultBody::Rows(rows).encode(&mut body, 4).unwrap();
        let (got, more) = decode_rows(t, body.freeze()).unwrap();
        assert!(more);
        assert_eq!(got.len(), 1);
        let cell = |name: &str| got[0][t.column_index(name).unwrap()].as_deref();
        assert_eq!(cell("command"), Some(&b"QUERY"[..]));
        assert_eq!(cell("parameters"), Some(&b"\x00\x00\x00\x00"[..]));
        assert_eq!(cell("session_id"), None);
        assert!(decode_rows(t, Bytes::from_static(b"\x00\x00\x00\x01")).is_err());
    }

    /// A leg whose task panics still names its node, with an error, beside the others.
    #[tokio::test]
    async fn a_leg_that_panics_is_named_with_an_error() {
        let mut legs = tokio::task::JoinSet::new();
        let mut names = std::collections::HashMap::new();
        let ok = legs.spawn(async { Ok::<u32, String>(7) });
        names.insert(ok.id(), "good".to_string());
        let bad = legs.spawn(async { panic!("leg failed") });
        names.insert(bad.id(), "broken".to_string());
        let mut got = settle(legs, names).await;
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(got[0].0, "broken");
        let why = got[0].1.as_ref().unwrap_err();
        assert!(why.contains("its request failed"), "{why}");
        assert_eq!(got[1], ("good".to_string(), Ok(7)));
    }
}
