//! `ringgate admin`: looks after a running server over CQL, like nodetool does over JMX. It
//! reads `system.local` and the `system_views` partition views, and runs server-side actions by
//! writing `system_views.maintenance` (`query/maintenance.rs`), so it needs nothing but the CQL
//! port and the credentials and TLS options cqlsh takes. Output is a table for people, or JSON
//! with `--json` (an array of objects per table of results).

mod commands;
mod moves;
mod render;
mod wire;

use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct AdminArgs {
    /// The server's CQL address.
    #[arg(long, default_value = "127.0.0.1:9042", global = true)]
    pub host: String,
    /// Login name (PasswordAuthenticator).
    #[arg(short = 'u', long, global = true)]
    pub username: Option<String>,
    /// Password.
    #[arg(short = 'p', long, global = true)]
    pub password: Option<String>,
    /// Connect with TLS (needs --certfile: the certificate(s) to trust, PEM).
    #[arg(long, global = true)]
    pub ssl: bool,
    /// PEM file of the certificate(s) to trust with --ssl.
    #[arg(long, global = true)]
    pub certfile: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Longest wait for the server's answer, in seconds (compactions and backups take long).
    #[arg(long, default_value_t = 3600, global = true)]
    pub timeout_secs: u64,
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// The node: cluster, data center, version, tables, physical partitions, data size.
    Status,
    /// Every user table with its throughput and consumption (system_views.throughput).
    Tables,
    /// The physical partitions of KEYSPACE.TABLE (system_views.physical_partitions).
    Partitions { table: String },
    /// The hottest and the largest logical partitions of KEYSPACE.TABLE.
    Hot { table: String },
    /// The cluster's storage groups (system_views.storage_groups): hosts, physical
    /// partitions placed there, bytes.
    Groups,
    /// Register a PostgreSQL server as storage group NAME (cluster mode): new tables'
    /// partitions go to the groups with the least data.
    AddGroup {
        name: String,
        /// host:port; several, comma-separated, for a primary with standbys.
        #[arg(long)]
        hosts: String,
        #[arg(long, default_value = "ringgate")]
        dbname: String,
        #[arg(long, default_value = "postgres")]
        user: String,
        #[arg(long, default_value = "")]
        pg_password: String,
    },
    /// Move physical partition PARTITION_ID of KEYSPACE.TABLE to storage group GROUP online
    /// (cluster mode; system_views.partition_moves), and wait until its owner has moved it.
    Move {
        table: String,
        partition_id: i64,
        group: String,
    },
    /// Move partitions between the storage groups until they hold about equal data (e.g.
    /// after add-group), one at a time.
    Rebalance,
    /// Compact table data now (drops expired and deleted data past gc_grace_seconds).
    Compact,
    /// Remove the tombstones of KEYSPACE.TABLE and the rows they shadow now.
    GarbageCollect { table: String },
    /// Make everything committed durable on disk.
    Flush,
    /// Back up every table, as of one point in time, while writes continue; restore with
    /// `ringgate restore --from DIR --data-dir NEW`.
    Backup {
        /// A new or empty directory on the server's machine (relative: to this directory).
        #[arg(long)]
        to: PathBuf,
    },
    /// Make a new data directory holding exactly the state of a backup: offline, on this
    /// machine, no server needed (the same as `ringgate restore`).
    Restore {
        /// The backup directory.
        #[arg(long)]
        from: PathBuf,
        /// The data directory to create (new or empty); start `ringgate serve --data-dir` on it.
        #[arg(long)]
        data_dir: PathBuf,
    },
}

/// Runs the command; the process exit code (0 ok, 1 failed, printed on stderr).
pub fn run(args: AdminArgs) -> i32 {
    match commands::run(&args) {
        Ok(out) => {
            print!("{out}");
            0
        }
        Err(e) => {
            eprintln!("ringgate admin: {e}");
            1
        }
    }
}
