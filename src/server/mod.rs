//! The CQL server: listener, TLS, connection limits and graceful shutdown.

pub mod auth;
mod connection;
pub mod convert;
mod panic_guard;

use crate::config::Config;
use crate::protocol::response::Event;
use crate::query::Engine;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, watch, Semaphore};

/// State shared by all connections.
pub struct Shared {
    pub engine: Arc<Engine>,
    pub config: Arc<Config>,
    /// Schema changes, pushed to connections that REGISTERed for them.
    pub events: broadcast::Sender<Arc<Event>>,
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
    });
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
                let Ok(permit) = Arc::clone(&conns).try_acquire_owned() else {
                    tracing::warn!(%peer, max_conns, "connection refused: limits.max_connections reached");
                    drop(sock);
                    continue;
                };
                let _ = sock.set_nodelay(true);
                let shared = Arc::clone(&shared);
                let rx = shutdown.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    handle(sock, peer, tls, shared, rx).await;
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

async fn handle(
    sock: tokio::net::TcpStream,
    peer: SocketAddr,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) {
    tracing::debug!(%peer, "connection opened");
    match tls {
        Some(acceptor) => {
            match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(sock)).await {
                Ok(Ok(stream)) => connection::serve(stream, peer, shared, shutdown).await,
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        }
        None => connection::serve(sock, peer, shared, shutdown).await,
    }
    tracing::debug!(%peer, "connection closed");
}
