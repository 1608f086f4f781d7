//! Query tracing (the protocol's tracing flag, cqlsh `TRACING ON`, the drivers' `trace=True`).
//!
//! A traced request records timestamped events while it runs; when it completes, the session
//! and its events are kept in a bounded in-memory store that answers `system_traces.sessions`
//! and `system_traces.events` (the most recent sessions; they do not survive a restart).
//!
//! Cluster mode: a forwarded traced request is traced on its owner too, whose events come back
//! with the answer (`encode_events`/`decode_events`, a custom payload) and join the
//! coordinator's session with the owner as their `source`; any node answers for any session
//! by asking the others (`query/cluster_views.rs`).

use crate::schema::TableDef;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;
use uuid::Uuid;

/// How many finished sessions are kept.
const MAX_SESSIONS: usize = 4096;
/// Events kept per session (a runaway scan cannot grow a trace without bound).
const MAX_EVENTS: usize = 1024;
/// Bytes of text all kept sessions may hold (query strings can be megabytes each): older
/// sessions go first.
const MAX_SESSION_BYTES: usize = 64 << 20;
/// Bytes of one activity sent between nodes (ours are one line each).
const MAX_ACTIVITY_BYTES: usize = 4096;

/// Reads events written by `Tracer::encode_events`: their source and (elapsed µs, activity)
/// each, at most `MAX_EVENTS`; None when malformed.
pub fn decode_events(mut b: &[u8]) -> Option<(SocketAddr, Vec<(i32, String)>)> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (b.get(..n)?, b.get(n..)?);
        *b = rest;
        Some(head)
    }
    let ip_len = *take(&mut b, 1)?.first()? as usize;
    let ip: IpAddr = match take(&mut b, ip_len)? {
        &[a, b2, c, d] => IpAddr::from([a, b2, c, d]),
        v6 => IpAddr::from(<[u8; 16]>::try_from(v6).ok()?),
    };
    let port = u16::from_be_bytes(take(&mut b, 2)?.try_into().ok()?);
    let mut events = Vec::new();
    while !b.is_empty() && events.len() < MAX_EVENTS {
        let elapsed = i32::from_be_bytes(take(&mut b, 4)?.try_into().ok()?);
        let len = u32::from_be_bytes(take(&mut b, 4)?.try_into().ok()?) as usize;
        if len > MAX_ACTIVITY_BYTES {
            return None;
        }
        let text = String::from_utf8_lossy(take(&mut b, len)?).into_owned();
        events.push((elapsed, text));
    }
    Some((SocketAddr::new(ip, port), events))
}

#[derive(Debug, Clone)]
pub struct TraceEvent {
    pub event_id: [u8; 16],
    pub elapsed_us: i32,
    pub activity: String,
    /// The node the event happened on when not this one (a forwarded request's owner).
    pub source: Option<SocketAddr>,
}

/// Records the events of one traced request.
#[derive(Debug)]
pub struct Tracer {
    pub session_id: [u8; 16],
    start: Instant,
    started_at_ms: i64,
    events: Mutex<Vec<TraceEvent>>,
}

impl Tracer {
    pub fn new() -> Tracer {
        Tracer {
            session_id: super::eval::new_timeuuid(),
            start: Instant::now(),
            started_at_ms: crate::clock::system_micros() / 1000,
            events: Mutex::new(Vec::new()),
        }
    }

    /// The activities recorded so far that start with `prefix` (the slow query log reads the
    /// routing of a traced statement).
    pub fn activities_starting(&self, prefix: &str) -> Vec<String> {
        let ev = self.events.lock();
        ev.iter()
            .filter(|e| e.activity.starts_with(prefix))
            .map(|e| e.activity.clone())
            .collect()
    }

    pub fn event(&self, activity: String) {
        let mut ev = self.events.lock();
        if ev.len() < MAX_EVENTS {
            ev.push(TraceEvent {
                event_id: super::eval::new_timeuuid(),
                elapsed_us: self.start.elapsed().as_micros().min(i32::MAX as u128) as i32,
                activity,
                source: None,
            });
        }
    }

    /// Adds events another node recorded for this request (`decode_events`).
    pub fn add_remote(&self, source: SocketAddr, events: Vec<(i32, String)>) {
        let mut ev = self.events.lock();
        for (elapsed_us, activity) in events {
            if ev.len() >= MAX_EVENTS {
                break;
            }
            ev.push(TraceEvent {
                event_id: super::eval::new_timeuuid(),
                elapsed_us,
                activity,
                source: Some(source),
            });
        }
    }

    /// The events so far in the wire format of `decode_events`, recorded at `source`: what an
    /// owner sends back with a forwarded traced request instead of keeping a session.
    pub fn encode_events(&self, source: SocketAddr) -> Bytes {
        let ev = self.events.lock();
        let mut out = Vec::new();
        let (ip, port) = (inet(source.ip()), source.port());
        out.push(ip.len() as u8);
        out.extend_from_slice(&ip);
        out.extend_from_slice(&port.to_be_bytes());
        for e in ev.iter() {
            let text = e.activity.as_bytes();
            let text = &text[..text.len().min(MAX_ACTIVITY_BYTES)];
            out.extend_from_slice(&e.elapsed_us.to_be_bytes());
            out.extend_from_slice(&(text.len() as u32).to_be_bytes());
            out.extend_from_slice(text);
        }
        Bytes::from(out)
    }

    /// Completes the session.
    pub fn finish(
        &self,
        client: IpAddr,
        command: &str,
        request: &str,
        parameters: BTreeMap<String, String>,
    ) -> TraceSession {
        let duration = self.start.elapsed().as_micros().min(i32::MAX as u128) as i32;
        TraceSession {
            session_id: self.session_id,
            client,
            command: command.to_string(),
            duration_us: duration.max(1),
            parameters,
            request: request.to_string(),
            started_at_ms: self.started_at_ms,
            events: std::mem::take(&mut *self.events.lock()),
        }
    }
}

impl Default for Tracer {
    fn default() -> Self {
        Tracer::new()
    }
}

#[derive(Debug, Clone)]
pub struct TraceSession {
    pub session_id: [u8; 16],
    pub client: IpAddr,
    pub command: String,
    pub duration_us: i32,
    pub parameters: BTreeMap<String, String>,
    pub request: String,
    pub started_at_ms: i64,
    pub events: Vec<TraceEvent>,
}

/// Recently finished trace sessions.
#[derive(Default)]
pub struct TraceStore {
    /// The sessions, oldest first, and the bytes they hold (`TraceSession::bytes`).
    sessions: Mutex<(VecDeque<Arc<TraceSession>>, usize)>,
}

impl TraceSession {
    /// The text this session holds, roughly what it costs in memory.
    fn bytes(&self) -> usize {
        let params: usize = self.parameters.iter().map(|(k, v)| k.len() + v.len()).sum();
        let events: usize = self.events.iter().map(|e| e.activity.len() + 32).sum();
        self.command.len() + self.request.len() + params + events + 128
    }
}

fn inet(ip: IpAddr) -> Bytes {
    match ip {
        IpAddr::V4(a) => Bytes::copy_from_slice(&a.octets()),
        IpAddr::V6(a) => Bytes::copy_from_slice(&a.octets()),
    }
}

fn text(s: &str) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(s.as_bytes()))
}

impl TraceStore {
    /// Sessions kept and the bytes they hold, for the metrics.
    pub fn figures(&self) -> (usize, usize) {
        let guard = self.sessions.lock();
        (guard.0.len(), guard.1)
    }

    pub fn record(&self, s: TraceSession) {
        let mut guard = self.sessions.lock();
        let (q, bytes) = &mut *guard;
        *bytes += s.bytes();
        q.push_back(Arc::new(s));
        while q.len() > MAX_SESSIONS || *bytes > MAX_SESSION_BYTES {
            let gone = q.pop_front().expect("non-empty");
            *bytes -= gone.bytes();
        }
    }

    /// Rows of system_traces.sessions or system_traces.events, in column order of `table`.
    pub fn rows(
        &self,
        table: &TableDef,
        node_addr: IpAddr,
        node_port: u16,
    ) -> Vec<Vec<Option<Bytes>>> {
        let sessions: Vec<Arc<TraceSession>> = self.sessions.lock().0.iter().cloned().collect();
        let mut out = Vec::new();
        let fill = |cells: &[(&str, Option<Bytes>)]| -> Vec<Option<Bytes>> {
            let mut r = vec![None; table.columns.len()];
            for (name, v) in cells {
                if let Some(i) = table.column_index(name) {
                    r[i] = v.clone();
                }
            }
            r
        };
        match table.name.as_str() {
            "sessions" => {
                let mut sorted = sessions;
                sorted.sort_by_key(|s| s.session_id);
                for s in sorted {
                    let mut params = Vec::new();
                    params.extend_from_slice(&(s.parameters.len() as i32).to_be_bytes());
                    for (k, v) in &s.parameters {
                        params.extend_from_slice(&(k.len() as i32).to_be_bytes());
                        params.extend_from_slice(k.as_bytes());
                        params.extend_from_slice(&(v.len() as i32).to_be_bytes());
                        params.extend_from_slice(v.as_bytes());
                    }
                    out.push(fill(&[
                        ("session_id", Some(Bytes::copy_from_slice(&s.session_id))),
                        ("client", Some(inet(s.client))),
                        ("command", text(&s.command)),
                        ("coordinator", Some(inet(node_addr))),
                        (
                            "coordinator_port",
                            Some(Bytes::copy_from_slice(&(node_port as i32).to_be_bytes())),
                        ),
                        (
                            "duration",
                            Some(Bytes::copy_from_slice(&s.duration_us.to_be_bytes())),
                        ),
                        ("parameters", Some(Bytes::from(params))),
                        ("request", text(&s.request)),
                        (
                            "started_at",
                            Some(Bytes::copy_from_slice(&s.started_at_ms.to_be_bytes())),
                        ),
                    ]));
                }
            }
            "events" => {
                let mut sorted = sessions;
                sorted.sort_by_key(|s| s.session_id);
                for s in sorted {
                    for e in &s.events {
                        let (addr, port) = e
                            .source
                            .map_or((node_addr, node_port), |a| (a.ip(), a.port()));
                        out.push(fill(&[
                            ("session_id", Some(Bytes::copy_from_slice(&s.session_id))),
                            ("event_id", Some(Bytes::copy_from_slice(&e.event_id))),
                            ("activity", text(&e.activity)),
                            ("source", Some(inet(addr))),
                            (
                                "source_elapsed",
                                Some(Bytes::copy_from_slice(&e.elapsed_us.to_be_bytes())),
                            ),
                            (
                                "source_port",
                                Some(Bytes::copy_from_slice(&(port as i32).to_be_bytes())),
                            ),
                            ("thread", text("ringgate-request")),
                        ]));
                    }
                }
            }
            _ => {}
        }
        out
    }

    pub fn session_uuid(id: &[u8; 16]) -> Uuid {
        Uuid::from_bytes(*id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(request_bytes: usize) -> TraceSession {
        Tracer::new().finish(
            "127.0.0.1".parse().unwrap(),
            "QUERY",
            &"x".repeat(request_bytes),
            BTreeMap::new(),
        )
    }

    #[test]
    fn kept_sessions_are_bounded_in_bytes_not_only_in_count() {
        let store = TraceStore::default();
        for _ in 0..100 {
            store.record(session(4 << 20));
        }
        let (q, bytes) = &*store.sessions.lock();
        assert!(*bytes <= MAX_SESSION_BYTES, "{bytes}");
        assert_eq!(*bytes, q.iter().map(|s| s.bytes()).sum::<usize>());
        assert!((10..=16).contains(&q.len()), "{}", q.len());
    }

    /// An owner's events travel to the coordinator with their source, elapsed times and text.
    #[test]
    fn events_round_trip_between_nodes() {
        let owner = Tracer::new();
        owner.event("Read 3 stored rows".into());
        owner.event("é".repeat(10));
        let src: SocketAddr = "10.0.0.7:9043".parse().unwrap();
        let (from, events) = decode_events(&owner.encode_events(src)).unwrap();
        assert_eq!(from, src);
        let texts: Vec<&str> = events.iter().map(|e| e.1.as_str()).collect();
        assert_eq!(texts, ["Read 3 stored rows", &"é".repeat(10)]);
        let coordinator = Tracer::new();
        coordinator.add_remote(from, events);
        let s = coordinator.finish("127.0.0.1".parse().unwrap(), "QUERY", "q", BTreeMap::new());
        assert_eq!(s.events[0].source, Some(src));
        assert!(decode_events(&[4, 1, 2]).is_none());
        let v6: SocketAddr = "[::1]:9042".parse().unwrap();
        assert_eq!(
            decode_events(&Tracer::new().encode_events(v6)).unwrap().0,
            v6
        );
    }
}
