//! One QUERY/PREPARE/EXECUTE/BATCH on its way through the engine (`Call`), once the
//! connection (`connection.rs`, which only frames) has decoded it: where it runs (the runtime
//! thread, the blocking pool, a long-request slot), server-side retry of throttled requests,
//! cluster routing (forwarded to its partition's owner, `forward.rs`; fanned out to several
//! owners, `spanning.rs`), tracing and the request charge of its answer.

use super::{convert, Shared};
use crate::protocol::request::{BatchStatementKind, Request, RequestEnvelope, Values};
use crate::protocol::response::{Event, Response, ResponseExtras, ResultBody};
use crate::query::{BatchItem, Outcome, Prepared, QueryOptions, Session};
use bytes::Bytes;
use std::sync::Arc;

/// One QUERY/PREPARE/EXECUTE/BATCH on its way through the engine.
pub(super) struct Call {
    pub(super) shared: Arc<Shared>,
    pub(super) env: Arc<RequestEnvelope>,
    pub(super) session: Session,
    pub(super) version: u8,
    pub(super) peer: std::net::IpAddr,
    pub(super) joined: Option<u64>,
    /// An EXECUTE's statement, looked up once for where it runs and what it runs (None: not
    /// an EXECUTE, or unknown here: `run` answers Unprepared).
    prepared: Option<Arc<Prepared>>,
}

impl Call {
    /// `prepared`: an EXECUTE's statement, looked up by the connection (None: not an
    /// EXECUTE, or unknown).
    pub(super) fn new(
        shared: Arc<Shared>,
        env: Arc<RequestEnvelope>,
        session: Session,
        (peer, joined): (std::net::IpAddr, Option<u64>),
        prepared: Option<Arc<Prepared>>,
    ) -> Call {
        Call {
            version: env.version,
            shared,
            env,
            session,
            peer,
            joined,
            prepared,
        }
    }

    /// Runs the request until it is answered. Server-side retry: a request held because its
    /// budget is spent did nothing yet; it waits on a timer (no thread, no connection slot) and
    /// runs again. Where it runs: on the blocking pool for fsync commits (every write waits for
    /// a disk flush) and, within `Shared::long_requests` slots, for requests that may run long;
    /// else on the runtime thread (point reads and writes: a hand-off would cost them more than
    /// they take). None if the blocking task died. A request answered at its deadline
    /// (`deadline.rs`) comes with its storage call, still running.
    pub(super) async fn run(self) -> Option<(Produced, Option<super::deadline::Lingering>)> {
        let engine = &self.shared.engine;
        // Requests that wait for a disk flush or for PostgreSQL (whose client blocks the calling
        // thread, `storage/postgres/pool.rs`) run on the blocking pool.
        let storage = &self.shared.config.storage;
        let fsync = storage.sync == crate::storage::SyncMode::Fsync
            || storage.backend == crate::config::Backend::Postgres;
        let long = match &self.env.request {
            Request::Query(q) => engine.query_may_run_long(&q.query, &self.session),
            Request::Execute(_) => (self.prepared.as_ref())
                .is_some_and(|p| engine.prepared_may_run_long(p, &self.session)),
            _ => false,
        };
        let mut hold = Hold {
            peer_rows: super::fanout::gather(
                &self.shared,
                &self.env,
                self.session.keyspace.as_deref(),
            )
            .await,
            ..Hold::default()
        };
        let this = Arc::new(self);
        let first = std::time::Instant::now();
        loop {
            let mut produced = if long {
                let slot = Arc::clone(&this.shared.long_requests)
                    .acquire_owned()
                    .await
                    .ok()?;
                let (call, h) = (Arc::clone(&this), hold.clone());
                let p = crate::storage::blocking::spawn(move || call.attempt(&h)).await;
                drop(slot);
                p.ok()?
            } else if fsync {
                let (call, h) = (Arc::clone(&this), hold.clone());
                let task = crate::storage::blocking::spawn(move || call.attempt(&h));
                let (p, lingering) = super::deadline::wait(task, this.deadline()).await?;
                if lingering.is_some() {
                    return Some((p, lingering));
                }
                p
            } else {
                this.attempt(&hold)
            };
            match produced.not_owner.take() {
                Some(Route::Owners(parts, logged)) => {
                    let p = Box::pin(this.fanned_out(parts, logged, produced.tracer)).await;
                    return Some((p, None));
                }
                Some(Route::Owner(None) | Route::Await)
                    if super::forward::may_wait_for_owner(&this.shared, first) =>
                {
                    hold.tracer = produced.tracer;
                    let wait = super::forward::UNOWNED_RETRY_MS;
                    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
                    continue;
                }
                Some(Route::Await) => return Some((produced, None)),
                // Boxed: forwarding's and fan-out's state would otherwise be inline in every
                // request task's future, which tokio copies when it creates and completes it.
                Some(Route::Owner(owner)) => {
                    let tracer = produced.tracer.clone();
                    let (p, moved) = Box::pin(this.forwarded(owner, produced.tracer)).await;
                    if !moved || !super::forward::may_wait_for_owner(&this.shared, first) {
                        return Some((p, None));
                    }
                    hold.tracer = tracer;
                    let wait = super::forward::UNOWNED_RETRY_MS;
                    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
                    continue;
                }
                None => {}
            }
            let Some(wait_ms) = produced.held_ms else {
                return Some((produced, None));
            };
            hold.since.get_or_insert_with(std::time::Instant::now);
            hold.tracer = produced.tracer;
            tokio::time::sleep(std::time::Duration::from_millis(wait_ms)).await;
        }
    }

    /// How long a request on the blocking pool may wait for its storage (`deadline.rs`);
    /// None: not timed (scans run on long-request slots, not here; DDL, USE, ...).
    fn deadline(&self) -> Option<(super::deadline::Timed, std::time::Duration)> {
        let timed = super::deadline::Timed::of(&self.env.request, self.prepared.as_deref())?;
        Some((timed, timed.limit(&self.shared.config.limits)))
    }

    /// Whether the request may run in its connection's read loop instead of a task of its own
    /// (`connection.rs`): an EXECUTE of a prepared single-partition SELECT or an INSERT, UPDATE
    /// or DELETE, on the embedded store without fsync, outside cluster mode (no forwarding,
    /// no peers to ask) and not traced. Such a request never waits: it reads or commits
    /// through the store's memtables and journal buffer and returns, in about what a task
    /// spawn and its wake-up cost (5-8% of the server's CPU for point requests); a request
    /// that waits for a disk flush or for PostgreSQL keeps the blocking pool (`run`).
    pub(super) fn runs_inline(&self) -> bool {
        let storage = &self.shared.config.storage;
        let Some(p) = &self.prepared else {
            return false;
        };
        if self.env.tracing
            || storage.sync != crate::storage::SyncMode::None
            || storage.backend != crate::config::Backend::Embedded
            || self.shared.engine.node.cluster.is_some()
        {
            return false;
        }
        use crate::cql::ast::Statement;
        match &p.parsed.statement {
            Statement::Select(_) => !self.shared.engine.prepared_may_run_long(p, &self.session),
            Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => true,
            _ => false,
        }
    }

    /// Runs a request that [`Call::runs_inline`] on the calling thread, once. None when it was
    /// held by server-side retry (it read and wrote nothing): `run` then runs it in a task, which
    /// can wait on a timer.
    pub(super) fn run_inline(&self) -> Option<Produced> {
        let produced = self.attempt(&Hold::default());
        (produced.held_ms.is_none() && produced.not_owner.is_none()).then_some(produced)
    }

    /// The answer of the partition's owner (`forward.rs`), or Unavailable when it has none;
    /// true when the owner answered that the partition had moved on (nothing ran there).
    async fn forwarded(
        &self,
        owner: Option<String>,
        tracer: Option<Arc<crate::query::trace::Tracer>>,
    ) -> (Produced, bool) {
        let (response, mut extras) = match &owner {
            Some(node) => {
                let mut session = self.session.clone();
                let clock = &self.shared.engine.clock;
                let keyspace = self.session.keyspace.clone();
                let ts = move || session.next_timestamp(clock);
                let t = tracer.as_deref();
                super::forward::forward(&self.shared, &self.env, keyspace, ts, node, t).await
            }
            None => (super::forward::no_owner(), ResponseExtras::NONE),
        };
        let payload = &mut extras.custom_payload;
        let before = payload.len();
        payload.retain(|(k, _)| k != super::forward::NOT_OWNER_KEY);
        let moved = payload.len() != before;
        (self.relayed(response, extras, tracer), moved)
    }

    /// Another node's answer (forwarded, fanned out), with this node's trace of the request.
    fn relayed(
        &self,
        response: Response,
        mut extras: ResponseExtras,
        tracer: Option<Arc<crate::query::trace::Tracer>>,
    ) -> Produced {
        if let Some(t) = &tracer {
            record_trace(&self.shared.engine, t, &self.env, self.peer);
            extras.tracing_id = Some(t.session_id);
        }
        Produced {
            response,
            keyspace: None,
            extras,
            held_ms: None,
            tracer: None,
            not_owner: None,
        }
    }

    /// The merged answer of every owner of a write spanning owners (`spanning.rs`).
    async fn fanned_out(
        &self,
        parts: super::spanning::Parts,
        logged: bool,
        tracer: Option<Arc<crate::query::trace::Tracer>>,
    ) -> Produced {
        let ts = self
            .session
            .clone()
            .next_timestamp(&self.shared.engine.clock);
        let keyspace = self.session.keyspace.clone();
        let (shared, env) = (&self.shared, &self.env);
        let t = tracer.clone();
        let spanning = super::spanning::Spanning { parts, logged };
        let (response, extras) =
            super::spanning::fan_out(shared, env, keyspace, ts, spanning, t).await;
        self.relayed(response, extras, tracer)
    }

    fn attempt(&self, hold: &Hold) -> Produced {
        if rejoined_since(&self.shared, self.joined) {
            let e = "this node lost its cluster lease while the request waited; reconnect";
            return Produced::answer(Response::Error(super::forward::unavailable(e.into())));
        }
        let mut session = self.session.clone();
        // The last resort for bugs: a panic is answered with a Server error (panic_guard.rs).
        super::panic_guard::answer_panics(self.env.request.opcode(), || {
            super::panic_guard::test_panic(&self.env.request);
            execute(
                &self.shared,
                &mut session,
                (&self.env, self.prepared.as_ref()),
                self.version,
                self.peer,
                hold,
            )
        })
        .unwrap_or_else(|e| Produced::answer(Response::Error(e)))
    }
}

/// Cluster mode: whether the node joined again on a new lease since `joined` (a generation).
/// A node that lost its lease (paused, cut off from etcd) was replaced as owner; the requests
/// its clients sent meanwhile wait in its sockets and must never run once it has joined again
/// (their partitions' new owners may hold newer values): such a connection is closed (its
/// client gets errors, then reconnects) and requests already running answer Unavailable.
/// Until it joins again, every write or forward answers Unavailable (`Handles::require_lease`).
pub(super) fn rejoined_since(shared: &Shared, joined: Option<u64>) -> bool {
    match (joined, &shared.engine.node.cluster) {
        (Some(g), Some(node)) => node.lease_generation() != g,
        _ => false,
    }
}

/// What every attempt of a request shares: since when server-side retry held it, its trace so
/// far, and the other nodes' rows of the per-node table it reads (`fanout.rs`).
#[derive(Clone, Default)]
struct Hold {
    since: Option<std::time::Instant>,
    tracer: Option<Arc<crate::query::trace::Tracer>>,
    peer_rows: Option<Arc<crate::query::cluster_views::PeerRows>>,
}

/// What a request produced besides its response body.
pub(super) struct Produced {
    pub(super) response: Response,
    /// The keyspace a USE switched to.
    pub(super) keyspace: Option<String>,
    pub(super) extras: ResponseExtras,
    /// Held by server-side retry: run it again after this many milliseconds.
    held_ms: Option<u64>,
    /// The request's trace, carried into the next attempt of a held request.
    tracer: Option<Arc<crate::query::trace::Tracer>>,
    /// Cluster mode: where the request goes instead of running here.
    not_owner: Option<Route>,
}

impl Produced {
    /// A plain answer: no keyspace change, extras, hold or route.
    pub(super) fn answer(response: Response) -> Produced {
        Produced {
            response,
            keyspace: None,
            extras: ResponseExtras::NONE,
            held_ms: None,
            tracer: None,
            not_owner: None,
        }
    }
}

/// Cluster mode: a request for partitions this node does not own (alone).
enum Route {
    /// Owned by another node, `Some(name)` (None: by no live node now): forwarded there
    /// (`forward.rs`).
    Owner(Option<String>),
    /// A write over partitions of several owners: sent to each (`spanning.rs`); a LOGGED batch
    /// (true) through the cluster batch log.
    Owners(super::spanning::Parts, bool),
    /// A part of a write spanning owners, sent here by its coordinator, for a partition that no
    /// node serves yet as this node sees it (its owner, maybe this node, is still opening it,
    /// e.g. right after CREATE TABLE): it runs again here after a wait, within the same window
    /// as a coordinator's wait for an owner; then the answer it carries (nothing ran) goes back.
    /// A part cannot be sent on: its coordinator merges the owners' answers.
    Await,
}

/// Runs a QUERY/PREPARE/EXECUTE/BATCH.
fn execute(
    shared: &Shared,
    session: &mut Session,
    (env, prepared): (&RequestEnvelope, Option<&Arc<Prepared>>),
    version: u8,
    client: std::net::IpAddr,
    hold: &Hold,
) -> Produced {
    let engine = &shared.engine;
    let began = std::time::Instant::now();
    let mut opts = convert::request_options(env);
    // A forwarded traced request is traced here too, its events sent back (`forward.rs`).
    let for_coordinator = super::forward::wants_trace(env);
    let tracer = (env.tracing || for_coordinator).then(|| match &hold.tracer {
        Some(t) => {
            opts.ctx.continue_trace(Arc::clone(t));
            Arc::clone(t)
        }
        None => opts.ctx.start_trace(),
    });
    if let Some(since) = hold.since {
        opts.ctx.set_held_since(since);
    }
    if let Some(peers) = &hold.peer_rows {
        opts.ctx.trace(|| match &peers.asked[..] {
            [] => "Asked no other member".to_string(),
            asked => format!("Asked the other member(s): {}", asked.join(", ")),
        });
        opts.ctx
            .trace(|| format!("Merging the rows of {} other node(s)", peers.nodes.len()));
        peers.warnings.iter().for_each(|w| opts.ctx.warn(w.clone()));
        opts.peer_rows = Some(Arc::clone(peers));
    }
    let slow_ms = shared.config.log.slow_query_ms;
    if slow_ms > 0 {
        opts.ctx
            .watch_slow(began, std::time::Duration::from_millis(slow_ms));
    }
    let result = match super::spanning::only_partitions(env) {
        Some(Err(e)) => Err(e),
        Some(Ok(only)) => {
            opts.ctx.set_only_partitions(only);
            run(shared, session, (env, prepared), version, &opts)
        }
        None => run(shared, session, (env, prepared), version, &opts),
    };
    if let Err(crate::query::QueryError::Held { retry_after_ms }) = &result {
        opts.ctx.trace(|| {
            format!("Held by server-side retry: throughput budget spent, running again in {retry_after_ms} ms")
        });
        return Produced {
            response: Response::Ready,
            keyspace: None,
            extras: ResponseExtras::NONE,
            held_ms: Some(*retry_after_ms),
            tracer,
            not_owner: None,
        };
    }
    let route = match &result {
        Err(crate::query::QueryError::NotOwner { owner, .. }) => Some(Route::Owner(owner.clone())),
        Err(crate::query::QueryError::Spans { parts, logged, .. }) => {
            Some(Route::Owners(parts.clone(), *logged))
        }
        _ => None,
    };
    if route.is_some() && super::forward::forwardable(shared, env) {
        return Produced {
            response: Response::Ready,
            keyspace: None,
            extras: ResponseExtras::NONE,
            held_ms: None,
            tracer,
            not_owner: route,
        };
    }
    // A forwarded request whose partition changed owner on the way (a split's children, a
    // takeover): nothing ran; the coordinator looks again (`forward::NOT_OWNER_KEY`).
    let moved_away = matches!(route, Some(Route::Owner(_))) && super::forward::is_forwarded(env);
    let awaits_owner = matches!(route, Some(Route::Owner(None)))
        && super::spanning::only_partitions(env).is_some();
    let (response, keyspace) = match result {
        Ok((body, ks)) => (Response::Result(body), ks),
        Err(e) => (Response::Error(convert::error(&e)), None),
    };
    let charge = opts.ctx.charge();
    crate::metrics::global().charge_ru(charge);
    super::slow_log::check(
        engine,
        shared.config.log.slow_query_ms,
        super::slow_log::Finished {
            env,
            keyspace: session.keyspace.as_deref(),
            began,
            charge_ru: charge,
            response: &response,
            tracer: tracer.as_deref(),
            routing: opts.ctx.slow_routing(),
        },
    );
    let mut extras = ResponseExtras {
        tracing_id: tracer
            .as_ref()
            .filter(|_| env.tracing)
            .map(|t| t.session_id),
        warnings: opts.ctx.take_warnings(),
        custom_payload: Vec::new(),
        // The request charge (Cosmos DB's custom payload) on every response, errors included
        // (what was consumed before the error) and zero charges (PREPARE); left out later for
        // clients that cannot parse payloads (see `State::payloads`).
        request_charge: Some(charge.to_be_bytes()),
    };
    if moved_away {
        (extras.custom_payload).push((super::forward::NOT_OWNER_KEY.into(), Bytes::new()));
    }
    match &tracer {
        Some(t) if for_coordinator => extras
            .custom_payload
            .push(super::forward::trace_payload(engine, t)),
        Some(t) => record_trace(engine, t, env, client),
        None => {}
    }
    Produced {
        response,
        keyspace,
        extras,
        held_ms: None,
        tracer: None,
        not_owner: awaits_owner.then_some(Route::Await),
    }
}

/// Runs the request through the engine: the result body and the keyspace a USE chose.
fn run(
    shared: &Shared,
    session: &mut Session,
    (env, prepared): (&RequestEnvelope, Option<&Arc<Prepared>>),
    version: u8,
    opts: &QueryOptions,
) -> Result<(ResultBody, Option<String>), crate::query::QueryError> {
    let engine = &shared.engine;
    match &env.request {
        Request::Query(q) => {
            let out = engine.query(session, &q.query, opts)?;
            Ok(finish(shared, out, q.params.skip_metadata, None))
        }
        Request::Prepare(p) => {
            let prepared = engine.prepare(session, &p.query, p.keyspace.as_deref())?;
            Ok((convert::prepared(&prepared, version), None))
        }
        Request::Execute(e) => {
            let prepared = match prepared {
                Some(p) => Arc::clone(p),
                None => engine.get_prepared(&e.id)?,
            };
            let out = engine.execute(session, &prepared, opts)?;
            // Rows answered with the columns PREPARE described reuse their encoding.
            let described = match &out {
                Outcome::Rows(r) => Arc::ptr_eq(&r.columns, &prepared.result_columns),
                _ => false,
            };
            let encoded = described
                .then(|| convert::encoded_columns(&prepared, version))
                .flatten();
            Ok(finish(shared, out, e.params.skip_metadata, encoded))
        }
        Request::Batch(b) => run_batch(shared, session, b, opts),
        _ => Err(crate::query::QueryError::Server(
            "unexpected request".into(),
        )),
    }
}

/// A BATCH: its statements parsed or looked up, then run in the batch's order.
fn run_batch(
    shared: &Shared,
    session: &mut Session,
    b: &crate::protocol::request::Batch,
    opts: &QueryOptions,
) -> Result<(ResultBody, Option<String>), crate::query::QueryError> {
    let engine = &shared.engine;
    let mut owned = Vec::new();
    let mut prepared = Vec::new();
    for s in &b.statements {
        match &s.kind {
            BatchStatementKind::Query(text) => {
                let parsed = crate::cql::parse(text)
                    .map_err(|e| crate::query::QueryError::Syntax(e.to_string()))?;
                owned.push((parsed, s.values.clone()));
            }
            BatchStatementKind::Prepared(id) => {
                prepared.push((engine.get_prepared(id)?, s.values.clone()));
            }
        }
    }
    let mut items: Vec<BatchItem> = Vec::new();
    // Keep the statement order of the batch.
    let (mut oi, mut pi) = (0, 0);
    for s in &b.statements {
        match &s.kind {
            BatchStatementKind::Query(_) => {
                let (p, v) = &owned[oi];
                oi += 1;
                items.push(BatchItem {
                    parsed: p,
                    keyspace: None,
                    binds: convert::binds(&Values::Positional(v.clone())),
                });
            }
            BatchStatementKind::Prepared(_) => {
                let (p, v) = &prepared[pi];
                pi += 1;
                items.push(BatchItem {
                    parsed: &p.parsed,
                    keyspace: p.keyspace.clone(),
                    binds: convert::binds(&Values::Positional(v.clone())),
                });
            }
        }
    }
    let out = engine.batch(session, &items, opts)?;
    Ok(finish(shared, out, false, None))
}

/// Records a traced request's session (system_traces).
fn record_trace(
    engine: &crate::query::Engine,
    t: &crate::query::trace::Tracer,
    env: &RequestEnvelope,
    client: std::net::IpAddr,
) {
    let (request, text, consistency) = match &env.request {
        Request::Query(q) => (
            "Execute CQL3 query",
            q.query.clone(),
            Some(q.params.consistency),
        ),
        Request::Execute(e) => (
            "Execute CQL3 prepared query",
            engine
                .get_prepared(&e.id)
                .map(|p| p.query.clone())
                .unwrap_or_default(),
            Some(e.params.consistency),
        ),
        Request::Prepare(p) => ("Preparing CQL3 query", p.query.clone(), None),
        Request::Batch(b) => (
            "Execute batch of CQL3 queries",
            String::new(),
            Some(b.consistency),
        ),
        _ => ("", String::new(), None),
    };
    t.event("Request complete".to_string());
    let mut params = std::collections::BTreeMap::new();
    if !text.is_empty() {
        params.insert("query".to_string(), text);
    }
    if let Some(cl) = consistency {
        params.insert(
            "consistency_level".to_string(),
            crate::protocol::types::consistency::name(cl)
                .unwrap_or("ONE")
                .to_string(),
        );
    }
    let command = match &env.request {
        Request::Prepare(_) => "PREPARE",
        _ => "QUERY",
    };
    engine
        .traces
        .record(t.finish(client, command, request, params));
}

/// The extras of a response that consumed nothing (READY, AUTH_SUCCESS): a zero charge for
/// clients that read payloads, nothing for the others.
pub(super) fn zero_charge(payloads: bool) -> ResponseExtras {
    ResponseExtras {
        request_charge: payloads.then(|| 0f64.to_be_bytes()),
        ..ResponseExtras::NONE
    }
}

fn finish(
    shared: &Shared,
    out: Outcome,
    skip_metadata: bool,
    encoded: Option<crate::protocol::response::EncodedColumns>,
) -> (ResultBody, Option<String>) {
    let ks = match &out {
        Outcome::SetKeyspace(k) => Some(k.clone()),
        _ => None,
    };
    if let Outcome::SchemaChange(c) = &out {
        let _ = shared
            .events
            .send(Arc::new(Event::SchemaChange(convert::schema_change(c))));
    }
    (convert::outcome(out, skip_metadata, encoded), ks)
}
