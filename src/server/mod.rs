//! The CQL server: listener, TLS, connection limits and graceful shutdown.

pub mod auth;
mod auth_guard;
mod batchlog;
mod call;
mod cluster_events;
mod connection;
pub mod convert;
pub(crate) mod deadline;
mod fanout;
mod forward;
mod gathered;
mod handshake;
pub mod http;
mod out_budget;
mod panic_guard;
mod peer;
mod prepared_memo;
mod quickack;
mod request_metrics;
mod slow_log;
mod spanning;
pub mod startup;

use crate::config::Config;
use crate::protocol::response::Event;
use crate::query::Engine;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, watch, OwnedSemaphorePermit, Semaphore};

/// State shared by all connections.
pub struct Shared {
    pub engine: Arc<Engine>,
    pub config: Arc<Config>,
    /// Schema, topology and status changes, pushed to connections that REGISTERed for them.
    pub events: broadcast::Sender<Arc<Event>>,
    /// Slots for requests that may run long (scans), run on blocking threads; more wait for a
    /// slot without holding a thread (see `query::long`).
    pub long_requests: Arc<Semaphore>,
    /// Connections still in their handshake, oldest first (closed to make room).
    handshakes: Arc<handshake::Handshakes>,
    /// The configured users, for constant-time password checks.
    authenticator: auth::Authenticator,
    /// Failed logins per peer IP (slows down guessing).
    auth_guard: auth_guard::AuthGuard,
    /// Response bytes queued but not yet written, across connections.
    unsent: Arc<out_budget::GlobalOut>,
    /// Internal connections to the other nodes (cluster forwarding).
    peers: peer::PeerPool,
}

/// The user internal connections log in as when peers ask (`auth.enabled`): the first configured.
fn peer_login(config: &Config) -> Option<(String, String)> {
    let (user, pass) = config.auth.users.iter().next()?;
    config.auth.enabled.then(|| (user.clone(), pass.clone()))
}

/// Long requests running at once: enough to keep both cores of a small machine busy with
/// scans while leaving the runtime's threads to short requests and new connections.
fn long_request_slots() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (2 * cores).max(4)
}

fn tls_acceptor(cfg: &Config) -> Result<tokio_rustls::TlsAcceptor, String> {
    use tokio_rustls::rustls;
    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    };
    let certs: Vec<_> = rustls_pemfile::certs(&mut &read(&cfg.tls.cert)?[..])
        .collect::<Result<_, _>>()
        .map_err(|e| format!("bad certificate {}: {e}", cfg.tls.cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "no certificate found in {}",
            cfg.tls.cert.display()
        ));
    }
    let key = rustls_pemfile::private_key(&mut &read(&cfg.tls.key)?[..])
        .map_err(|e| format!("bad private key {}: {e}", cfg.tls.key.display()))?
        .ok_or_else(|| format!("no private key found in {}", cfg.tls.key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("TLS setup failed: {e}"))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Runs the server until `shutdown` fires, then drains connections.
pub async fn run(
    listener: TcpListener,
    engine: Arc<Engine>,
    config: Arc<Config>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), String> {
    let tls = if config.tls.enabled {
        Some(tls_acceptor(&config)?)
    } else {
        None
    };
    let (events, _) = broadcast::channel(1024);
    let shared = Arc::new(Shared {
        engine,
        config: Arc::clone(&config),
        events,
        long_requests: Arc::new(Semaphore::new(long_request_slots())),
        handshakes: Arc::default(),
        authenticator: auth::Authenticator::new(&config.auth),
        auth_guard: auth_guard::AuthGuard::default(),
        unsent: out_budget::GlobalOut::new(config.limits.max_unsent_bytes.0 as usize),
        peers: peer::PeerPool::new(peer_login(&config)),
    });
    cluster_events::start(&shared);
    batchlog::start(&shared);
    let max_conns = config.limits.max_connections;
    let conns = Arc::new(Semaphore::new(max_conns));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (sock, peer) = match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                // Keep room for clients that can log in: close the oldest handshake.
                let evicted = conns.available_permits() <= config.limits.reserved_connections
                    && shared.handshakes.evict_oldest();
                let permit = match Arc::clone(&conns).try_acquire_owned() {
                    Ok(p) => Some(p),
                    Err(_) if evicted => wait_for_slot(&conns).await,
                    Err(_) => None,
                };
                let Some(permit) = permit else {
                    tracing::warn!(%peer, max_conns, "connection refused: limits.max_connections reached");
                    drop(sock);
                    continue;
                };
                let _ = sock.set_nodelay(true);
                let shared = Arc::clone(&shared);
                let rx = shutdown.clone();
                let tls = tls.clone();
                let pending = shared.handshakes.register();
                tokio::spawn(async move {
                    handle(sock, peer, tls, shared, rx, pending).await;
                    drop(permit);
                });
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    // Wait (bounded) for connections to finish their in-flight requests.
    let drained = tokio::time::timeout(
        Duration::from_secs(10),
        conns.acquire_many(max_conns as u32),
    )
    .await;
    if drained.is_err() {
        tracing::warn!("some connections did not finish within 10 s of shutdown");
    }
    Ok(())
}

/// All slots taken: an evicted handshake frees one shortly; wait a little for it.
async fn wait_for_slot(conns: &Arc<Semaphore>) -> Option<OwnedSemaphorePermit> {
    let freed = Arc::clone(conns).acquire_owned();
    match tokio::time::timeout(Duration::from_millis(500), freed).await {
        Ok(Ok(p)) => Some(p),
        _ => None,
    }
}

/// Counts a connection in the metrics while it is open.
struct OpenConnection;

impl OpenConnection {
    fn new() -> OpenConnection {
        let m = crate::metrics::global();
        m.connections_accepted.inc();
        m.connections_open.add(1);
        OpenConnection
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        crate::metrics::global().connections_open.add(-1);
    }
}

async fn handle(
    sock: tokio::net::TcpStream,
    peer: SocketAddr,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    pending: handshake::Pending,
) {
    tracing::debug!(%peer, "connection opened");
    let _open = OpenConnection::new();
    match tls {
        Some(acceptor) => {
            let startup = Duration::from_millis(shared.config.limits.startup_timeout_ms);
            let accepted = tokio::select! {
                r = tokio::time::timeout(startup, acceptor.accept(sock)) => r,
                _ = pending.evicted() => {
                    tracing::debug!(%peer, "closed in its TLS handshake to make room");
                    return;
                }
            };
            match accepted {
                Ok(Ok(stream)) => connection::serve(stream, peer, shared, shutdown, pending).await,
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        }
        None => connection::serve(sock, peer, shared, shutdown, pending).await,
    }
    tracing::debug!(%peer, "connection closed");
}
