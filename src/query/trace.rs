//! Query tracing (the protocol's tracing flag, cqlsh `TRACING ON`, the drivers' `trace=True`).
//!
//! A traced request records timestamped events while it runs; when it completes, the session
//! and its events are kept in a bounded in-memory store that answers `system_traces.sessions`
//! and `system_traces.events` (the most recent sessions; they do not survive a restart).

use crate::schema::TableDef;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
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

#[derive(Debug, Clone)]
pub struct TraceEvent {
    pub event_id: [u8; 16],
    pub elapsed_us: i32,
    pub activity: String,
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
            });
        }
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
                        out.push(fill(&[
                            ("session_id", Some(Bytes::copy_from_slice(&s.session_id))),
                            ("event_id", Some(Bytes::copy_from_slice(&e.event_id))),
                            ("activity", text(&e.activity)),
                            ("source", Some(inet(node_addr))),
                            (
                                "source_elapsed",
                                Some(Bytes::copy_from_slice(&e.elapsed_us.to_be_bytes())),
                            ),
                            (
                                "source_port",
                                Some(Bytes::copy_from_slice(&(node_port as i32).to_be_bytes())),
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
}
