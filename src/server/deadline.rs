//! Server-side request timeouts, as Cassandra's `write_request_timeout` and
//! `read_request_timeout`: a point read or a write that waits on its storage (a PostgreSQL
//! server, or a disk flush with `storage.sync = "fsync"`) longer than `limits.read_timeout_ms`
//! / `limits.write_timeout_ms` is answered ReadTimeout / WriteTimeout. The outcome of such a
//! write is unknown (it may still commit), which is what WriteTimeout tells the client; it is
//! never reported as a failure.
//!
//! Why the server must do it: a commit can hang without an error, e.g. while a synchronous
//! standby does not confirm, or a storage server is cut off without a reset. The client would
//! otherwise wait for its own driver's timeout (10 s in the Python driver) with no
//! Cassandra answer, and a peer that forwarded the request would wait its 8 s deadline
//! (`peer::REQUEST_MS`, above both defaults, so the client hears the owner's timeout).
//!
//! The storage call goes on after the answer, on its blocking thread: the request's slot in
//! its connection stays taken until it ends (`Lingering`), so a client cannot pile up more
//! stuck calls than its in-flight limit. Scans, DDL and requests that never wait (the
//! embedded store without fsync) are not timed.

use super::call::Produced;
use crate::cql::ast::Statement;
use crate::error::WriteType;
use crate::protocol::request::Request;
use crate::protocol::response::{ErrorExtra, ErrorResponse};
use crate::query::Prepared;
use std::time::Duration;

/// A storage call still running after its request was answered at the deadline.
pub(super) type Lingering = tokio::task::JoinHandle<Produced>;

/// Which deadline a request has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timed {
    Read,
    Write(WriteType),
}

impl Timed {
    /// The request's deadline kind; None: not timed (DDL, USE, PREPARE, ...).
    pub(super) fn of(req: &Request, prepared: Option<&Prepared>) -> Option<Timed> {
        match req {
            Request::Batch(_) => Some(Timed::Write(super::forward::write_type(req))),
            Request::Execute(_) => prepared.and_then(|p| of_statement(&p.parsed.statement)),
            Request::Query(q) => of_text(&q.query),
            _ => None,
        }
    }

    /// Its duration under the server's limits.
    pub(super) fn limit(self, limits: &crate::config::Limits) -> Duration {
        Duration::from_millis(match self {
            Timed::Read => limits.read_timeout_ms,
            Timed::Write(_) => limits.write_timeout_ms,
        })
    }

    /// Cassandra's answer for a request that waited `waited`: no replica answered in time.
    pub(super) fn error(self, waited: Duration) -> ErrorResponse {
        let message = format!(
            "Operation timed out - received only 0 responses (storage did not answer within {} ms)",
            waited.as_millis()
        );
        let extra = match self {
            Timed::Read => ErrorExtra::ReadTimeout {
                cl: 0x0001,
                received: 0,
                block_for: 1,
                data_present: false,
            },
            Timed::Write(write_type) => ErrorExtra::WriteTimeout {
                cl: 0x0001,
                received: 0,
                block_for: 1,
                write_type: write_type.as_str().into(),
                contentions: None,
            },
        };
        ErrorResponse::with_extra(message, extra)
    }
}

fn of_statement(s: &Statement) -> Option<Timed> {
    let write = |conditional: bool| {
        let t = if conditional {
            WriteType::Cas
        } else {
            WriteType::Simple
        };
        Some(Timed::Write(t))
    };
    match s {
        Statement::Select(_) => Some(Timed::Read),
        Statement::Insert(i) => write(i.if_not_exists),
        Statement::Update(u) => write(u.conditions.is_some()),
        Statement::Delete(d) => write(d.conditions.is_some()),
        Statement::Batch(_) => Some(Timed::Write(WriteType::Batch)),
        _ => None,
    }
}

/// A QUERY's kind from its first keyword (the text is parsed later, where it runs; a
/// conditional write is reported as SIMPLE here).
fn of_text(query: &str) -> Option<Timed> {
    let word: String = (query.trim_start().chars())
        .take_while(|c| c.is_ascii_alphabetic())
        .take(7) // one more than the longest keyword: "selected" is not "select"
        .collect::<String>()
        .to_ascii_lowercase();
    match word.as_str() {
        "select" => Some(Timed::Read),
        "insert" | "update" | "delete" => Some(Timed::Write(WriteType::Simple)),
        "begin" => Some(Timed::Write(WriteType::Batch)),
        _ => None,
    }
}

/// Waits for a storage call on the blocking pool, at most `limit` when timed: the call's
/// answer, or the timeout's with the call still running. None if the call died.
pub(super) async fn wait(
    task: tokio::task::JoinHandle<Produced>,
    timed: Option<(Timed, Duration)>,
) -> Option<(Produced, Option<Lingering>)> {
    let Some((kind, limit)) = timed else {
        return task.await.ok().map(|p| (p, None));
    };
    let mut task = task;
    match tokio::time::timeout(limit, &mut task).await {
        Ok(done) => done.ok().map(|p| (p, None)),
        Err(_) => {
            let answer = Produced::answer(crate::protocol::response::Response::Error(
                kind.error(limit),
            ));
            Some((answer, Some(task)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_texts_are_told_by_their_first_word() {
        assert_eq!(of_text("  SELECT * FROM t"), Some(Timed::Read));
        assert_eq!(of_text("select*from t"), Some(Timed::Read));
        assert_eq!(
            of_text("insert into t (k) values (1)"),
            Some(Timed::Write(WriteType::Simple))
        );
        assert_eq!(
            of_text("BEGIN BATCH INSERT ... APPLY BATCH"),
            Some(Timed::Write(WriteType::Batch))
        );
        assert_eq!(of_text("CREATE TABLE t (k int PRIMARY KEY)"), None);
        assert_eq!(of_text("selected"), None);
        assert_eq!(of_text("TRUNCATE t"), None);
        assert_eq!(of_text(""), None);
    }

    #[test]
    fn conditional_writes_time_out_as_cas() {
        let kind = |q: &str| of_statement(&crate::cql::parser::parse(q).expect("parses").statement);
        assert_eq!(
            kind("INSERT INTO t (k) VALUES (1) IF NOT EXISTS"),
            Some(Timed::Write(WriteType::Cas))
        );
        assert_eq!(
            kind("UPDATE t SET v = 1 WHERE k = 1 IF v = 0"),
            Some(Timed::Write(WriteType::Cas))
        );
        assert_eq!(
            kind("DELETE FROM t WHERE k = 1"),
            Some(Timed::Write(WriteType::Simple))
        );
        assert_eq!(kind("SELECT * FROM t WHERE k = 1"), Some(Timed::Read));
        assert_eq!(kind("USE ks"), None);
    }

    #[test]
    fn timeouts_carry_cassandras_extras() {
        let e = Timed::Write(WriteType::Cas).error(Duration::from_millis(5000));
        assert!(e.message.contains("5000 ms"), "{}", e.message);
        assert!(
            matches!(e.extra, ErrorExtra::WriteTimeout { ref write_type, .. } if write_type == "CAS")
        );
        let r = Timed::Read.error(Duration::from_millis(10));
        assert!(matches!(r.extra, ErrorExtra::ReadTimeout { .. }));
    }
}
