//! The one helper that opens an engine for these tests.

use ringgate::clock::Clock;
use ringgate::config::Config;
use ringgate::query::{Engine, Outcome, QueryError, QueryOptions, RequestCtx, Session};
use ringgate::storage::{Space, Store};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

/// An engine over a fresh data directory, with a manual clock and one client session.
pub struct TestEngine {
    pub engine: Arc<Engine>,
    pub store: Arc<dyn Store>,
    pub clock: Clock,
    pub session: Session,
    _dir: tempfile::TempDir,
}

/// A whole second, so that expiries (milliseconds, rounded up) and local deletion times
/// (seconds) fall exactly where the tests expect them.
const START_MICROS: i64 = 1_800_000_000_000_000;

/// Opens an engine as `ringgate serve` would with these `--set` settings (`key=value`), and
/// creates keyspace `ks`.
pub fn open(settings: &[&str]) -> TestEngine {
    let dir = tempfile::tempdir().unwrap();
    let mut sets = vec![format!("data_dir={}", dir.path().display())];
    sets.extend(settings.iter().map(|s| s.to_string()));
    let cfg = Config::load(None, &sets).unwrap();
    let clock = Clock::manual(START_MICROS);
    let opened =
        ringgate::server::startup::open(&cfg, "127.0.0.1:9042".parse().unwrap(), clock.clone())
            .unwrap();
    let mut t = TestEngine {
        engine: opened.engine,
        store: opened.store,
        clock,
        session: Session::default(),
        _dir: dir,
    };
    t.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
    t
}

impl TestEngine {
    /// Runs one statement as a QUERY request.
    pub fn run(&mut self, q: &str) -> Result<Outcome, QueryError> {
        self.run_with(q, RequestCtx::default())
    }

    /// Runs one statement with the given request context (e.g. held by server-side retry).
    pub fn run_with(&mut self, q: &str, ctx: RequestCtx) -> Result<Outcome, QueryError> {
        let opts = QueryOptions {
            ctx,
            ..Default::default()
        };
        self.engine.query(&mut self.session, q, &opts)
    }

    /// Runs one statement; also returns the request units it was charged.
    pub fn run_charged(&mut self, q: &str) -> (Result<Outcome, QueryError>, f64) {
        let opts = QueryOptions::default();
        let res = self.engine.query(&mut self.session, q, &opts);
        (res, opts.ctx.charge())
    }

    pub fn ok(&mut self, q: &str) -> Outcome {
        self.run(q).unwrap_or_else(|e| panic!("{q}: {e}"))
    }

    /// The rows of a SELECT, each a list of cells (None: null).
    pub fn rows(&mut self, q: &str) -> Vec<Vec<Option<Vec<u8>>>> {
        let Outcome::Rows(rows) = self.ok(q) else {
            panic!("{q}: expected rows");
        };
        let width = rows.columns.len();
        let cells = crate::shared::cells::cells(&rows.content);
        assert_eq!(cells.len(), width * rows.count as usize, "{q}");
        cells.chunks(width.max(1)).map(|c| c.to_vec()).collect()
    }

    /// The rows of a SELECT whose columns are all ints (None: null).
    pub fn ints(&mut self, q: &str) -> Vec<Vec<Option<i32>>> {
        self.rows(q)
            .into_iter()
            .map(|r| {
                r.into_iter()
                    .map(|c| c.map(|b| i32::from_be_bytes(b[..].try_into().unwrap())))
                    .collect()
            })
            .collect()
    }

    pub fn advance_ms(&self, ms: u64) {
        self.clock.advance(Duration::from_millis(ms));
    }

    /// Entries in the data space (rows and partition headers of every table).
    pub fn data_keys(&self) -> usize {
        self.store
            .scan(Space::Data, Bound::Unbounded, Bound::Unbounded, false)
            .count()
    }
}
