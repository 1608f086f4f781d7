//! The `ringgate` binary.

use clap::{Parser, Subcommand};
use ringgate::config::{Config, Settings};
use ringgate::storage::EmbeddedStore;
use std::path::PathBuf;
use std::sync::Arc;

/// mimalloc instead of the system allocator: a request allocates and frees many small buffers
/// (decoded values, rows, response bodies) across threads; glibc's malloc/free took about a
/// third of a point read's instructions, mimalloc's fast paths a fraction of that (see
/// `allocator.rs` for how it is called).
#[global_allocator]
static GLOBAL: ringgate::allocator::Allocator = ringgate::allocator::Allocator;

#[derive(Parser)]
#[command(
    name = "ringgate",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("RINGGATE_COMMIT"), ")"),
    about = "A Cassandra-compatible partitioned data gateway"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the CQL server.
    Serve {
        /// Address to listen on (default 127.0.0.1:9042).
        #[arg(long)]
        listen: Option<String>,
        /// Data directory (default ./ringgate-data).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// TOML configuration file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override one setting by its dotted name, e.g. --set auth.enabled=true (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Log level (trace, debug, info, warn, error); RUST_LOG takes precedence.
        #[arg(long)]
        log_level: Option<String>,
        /// Print the effective settings with where each comes from, and exit.
        #[arg(long)]
        print_config: bool,
    },
    /// Make a new data directory holding exactly the state of a backup (`ringgate admin backup`).
    Restore {
        /// The backup directory.
        #[arg(long)]
        from: PathBuf,
        /// The data directory to create (new or empty); start `ringgate serve --data-dir` on it.
        #[arg(long)]
        data_dir: PathBuf,
    },
    /// Look after a running server over CQL (nodetool-like); `ringgate admin --help`.
    Admin(ringgate::admin::AdminArgs),
}

fn main() {
    let cli = Cli::parse();
    let (listen, data_dir, config, set, log_level, print_config) = match cli.command {
        Command::Serve {
            listen,
            data_dir,
            config,
            set,
            log_level,
            print_config,
        } => (listen, data_dir, config, set, log_level, print_config),
        Command::Restore { from, data_dir } => restore(&from, &data_dir),
        Command::Admin(args) => match &args.command {
            // Offline: works on files of this machine, like `ringgate restore`.
            ringgate::admin::AdminCommand::Restore { from, data_dir } => restore(from, data_dir),
            _ => std::process::exit(ringgate::admin::run(args)),
        },
    };
    let flags: Vec<(&'static str, &str, String)> = [
        ("--listen", "listen", listen),
        (
            "--data-dir",
            "data_dir",
            data_dir.map(|d| d.display().to_string()),
        ),
        ("--log-level", "log_level", log_level),
    ]
    .into_iter()
    .filter_map(|(flag, key, v)| v.map(|v| (flag, key, v)))
    .collect();
    let settings = match Settings::load(config.as_deref(), &set, &flags) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ringgate: {e}");
            std::process::exit(2);
        }
    };
    if print_config {
        print!("{}", settings.describe());
        return;
    }
    let cfg = settings.config;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        // The storage engine's own info lines are noise for users.
        tracing_subscriber::EnvFilter::new(format!("{},fjall=warn,lsm_tree=warn", cfg.log_level))
    });
    // Colour only for a terminal: a log file or a pipe gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(ansi)
        .init();
    if let Err(e) = serve(cfg) {
        tracing::error!("{e}");
        std::process::exit(1);
    }
}

fn serve(cfg: Config) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    // Before anything else touches the directory: one server per data directory.
    let dir_lock = ringgate::storage::dir_lock::lock(&cfg.data_dir)?;
    rt.block_on(async move {
        // Bound before the CQL port and the store's opening: once that port takes connections,
        // so does this one (clients and tests may scrape at once; they wait in the backlog).
        let http = match cfg.http.enabled {
            true => Some(tokio::net::TcpListener::bind(&cfg.http.listen).await.map_err(|e| {
                format!(
                    "cannot listen on {} (http.listen): {e}; choose another address or set http.enabled=false",
                    cfg.http.listen
                )
            })?),
            false => None,
        };
        let listener = tokio::net::TcpListener::bind(&cfg.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", cfg.listen))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let ringgate::server::startup::Opened { store, engine } =
            ringgate::server::startup::open(&cfg, addr, ringgate::clock::Clock::system())?;
        tracing::info!(
            "ringgate listening on {addr} (CQL native protocol v3-v5{}), data in {}",
            if cfg.tls.enabled { ", TLS" } else { "" },
            dir_lock.dir.display()
        );
        let (tx, rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("shutting down: no new connections, finishing in-flight requests");
            let _ = tx.send(true);
        });
        if let Some(http) = http {
            let http_addr = http.local_addr().map_err(|e| e.to_string())?;
            tracing::info!("metrics on http://{http_addr}/metrics, dashboard on http://{http_addr}/");
            let limits = ringgate::server::http::SeriesLimits {
                tables: cfg.http.metrics_max_tables,
                partitions: cfg.http.metrics_max_partitions,
            };
            tokio::spawn(ringgate::server::http::run(
                http,
                Arc::clone(&engine),
                limits,
                rx.clone(),
            ));
        }
        let cfg = Arc::new(cfg);
        let cluster = engine.node.cluster.clone();
        ringgate::server::run(listener, engine, cfg, rx).await?;
        store.flush().map_err(|e| e.to_string())?;
        if let Some(node) = cluster {
            // Ownerships and the member record go now, not after the lease's TTL.
            node.leave();
        }
        drop(dir_lock);
        tracing::info!("storage flushed; bye");
        Ok(())
    })
}

/// `ringgate restore`: exits 0 when the data directory is ready, 1 with the reason if not.
fn restore(from: &std::path::Path, data_dir: &std::path::Path) -> ! {
    match EmbeddedStore::restore(from, data_dir) {
        Ok(m) => {
            let entries: u64 = m.spaces.values().map(|s| s.entries).sum();
            println!(
                "restored {entries} entries (backup taken at {} ms since the epoch) into {}",
                m.created_at_ms,
                data_dir.display()
            );
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("ringgate restore: {e}");
            std::process::exit(1)
        }
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
