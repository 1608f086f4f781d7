//! The slow query log: a statement that took longer than `log.slow_query_ms` to execute (from
//! the start of its last attempt to its response; time held by server-side retry is not
//! counted) is logged once, at WARN, with its text (at most `MAX_STATEMENT_CHARS`), keyspace,
//! duration, rows returned, RU charge and outcome, and, for reads, their routing over the
//! physical partitions: from the trace when the client traced it, otherwise recorded by the
//! read itself when it is already slow once it has read (`RequestCtx::note_if_slow`; building
//! it for every request would cost every request). Counted in `ringgate_slow_queries_total`.

use crate::protocol::request::{Request, RequestEnvelope};
use crate::protocol::response::{Response, ResultBody};
use crate::query::{trace::Tracer, Engine};
use std::time::{Duration, Instant};

/// Longest statement text logged; longer ones are cut (with their length noted).
const MAX_STATEMENT_CHARS: usize = 1000;

/// What a finished statement reports to the slow query log.
pub struct Finished<'a> {
    pub env: &'a RequestEnvelope,
    pub keyspace: Option<&'a str>,
    pub began: Instant,
    pub charge_ru: f64,
    pub response: &'a Response,
    pub tracer: Option<&'a Tracer>,
    /// The routing an untraced read recorded because it was already slow (`note_if_slow`).
    pub routing: Option<String>,
}

/// Logs the statement if it was slower than `threshold_ms` (0: the log is off).
pub fn check(engine: &Engine, threshold_ms: u64, f: Finished) {
    let elapsed = f.began.elapsed();
    if threshold_ms == 0 || elapsed < Duration::from_millis(threshold_ms) {
        return;
    }
    crate::metrics::global().slow_queries.inc();
    let rows = match f.response {
        Response::Result(ResultBody::Rows(r)) => r.rows_count as i64,
        _ => 0,
    };
    let outcome = match f.response {
        Response::Error(e) => format!("error {:#06x}", e.code),
        _ => "ok".to_string(),
    };
    let routing = match (f.tracer, f.routing) {
        (Some(t), _) => t.activities_starting("Routing:").join("; "),
        (None, Some(r)) => r,
        (None, None) => "not recorded (a write, or not a table read)".to_string(),
    };
    tracing::warn!(
        elapsed_ms = elapsed.as_millis() as u64,
        rows,
        ru = f.charge_ru,
        keyspace = f.keyspace.unwrap_or(""),
        outcome,
        routing,
        "slow query: {}",
        statement(engine, f.env)
    );
}

/// The statement's text, cut to `MAX_STATEMENT_CHARS`.
fn statement(engine: &Engine, env: &RequestEnvelope) -> String {
    let text = match &env.request {
        Request::Query(q) => q.query.clone(),
        Request::Execute(e) => engine
            .get_prepared(&e.id)
            .map(|p| p.query.clone())
            .unwrap_or_else(|_| "(prepared statement no longer cached)".into()),
        Request::Batch(b) => format!("BATCH of {} statements", b.statements.len()),
        Request::Prepare(p) => format!("PREPARE {}", p.query),
        _ => String::new(),
    };
    let chars = text.chars().count();
    if chars <= MAX_STATEMENT_CHARS {
        return text;
    }
    let cut: String = text.chars().take(MAX_STATEMENT_CHARS).collect();
    format!("{cut}... ({chars} characters)")
}
