//! Settings: a TOML file, then `--set key=value` overrides by dotted name, then the CLI flags.
//! Every setting has a default; an unknown or mistyped setting is an error that names it by its
//! dotted name (and, from the file, its line): `throughput.foo: unknown setting`,
//! `throughput.default_table_ru: expected an integer, got "abc"`. `Settings::sources` records
//! where each effective value came from, for `ringgate serve --print-config`.

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

mod cluster_settings;
pub use cluster_settings::Cluster;

/// A byte size: an integer, or a string with a KiB/MiB/GiB (or KB/MB/GB, B) suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn parse(s: &str) -> Result<ByteSize, String> {
        let s = s.trim();
        let split = s
            .find(|c: char| !c.is_ascii_digit() && c != '_')
            .unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let n: u64 = num.replace('_', "").parse().map_err(|_| {
            format!("invalid size '{s}': expected a number with an optional KiB/MiB/GiB suffix")
        })?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1 << 10,
            "m" | "mb" | "mib" => 1 << 20,
            "g" | "gb" | "gib" => 1 << 30,
            "t" | "tb" | "tib" => 1 << 40,
            other => {
                return Err(format!(
                    "invalid size unit '{other}' in '{s}': use KiB, MiB or GiB"
                ))
            }
        };
        n.checked_mul(mult)
            .map(ByteSize)
            .ok_or_else(|| format!("size '{s}' is too large"))
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) => Ok(ByteSize(n)),
            Raw::Str(s) => ByteSize::parse(&s).map_err(serde::de::Error::custom),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address the CQL listener binds.
    pub listen: String,
    /// Where the embedded store keeps its files.
    pub data_dir: PathBuf,
    /// Reported in system.local and DESCRIBE CLUSTER.
    pub cluster_name: String,
    pub data_center: String,
    pub rack: String,
    /// tracing level filter when RUST_LOG is not set.
    pub log_level: String,
    pub limits: Limits,
    pub storage: StorageConfig,
    pub auth: Auth,
    pub tls: Tls,
    pub partitions: Partitions,
    pub throughput: Throughput,
    pub batch: BatchLimits,
    pub protocol: Protocol,
    pub http: Http,
    pub log: Log,
    pub cluster: Cluster,
    pub changefeed: Changefeed,
}

/// The change feed (`COSMOS_CHANGEFEED_START_TIME()` queries).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Changefeed {
    /// Every user table records its feed, as on Cosmos DB; otherwise only tables created or
    /// altered `WITH cdc = true` (recording costs point writes about a fifth of their rate).
    pub all_tables: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest frame body accepted (native_transport_max_frame_size).
    pub max_frame_bytes: ByteSize,
    /// Concurrent client connections; more are refused.
    pub max_connections: usize,
    /// Requests in flight per connection before the server stops reading from it.
    pub max_in_flight_per_connection: usize,
    /// Largest single value in a write.
    pub max_value_bytes: ByteSize,
    /// A page stops after this many bytes of rows.
    pub max_page_bytes: ByteSize,
    /// A connection that has not sent STARTUP this long after it was accepted (TLS handshake
    /// included) is closed.
    pub startup_timeout_ms: u64,
    /// With `auth.enabled`: a connection not logged in this long after its STARTUP is closed.
    pub auth_timeout_ms: u64,
    /// A connection that sends nothing this long while none of its requests is running is
    /// closed; 0 (the default, as Cassandra) never closes idle connections. Drivers keep pooled
    /// connections alive with OPTIONS heartbeats (every 30 s by default), so a value above
    /// that only closes clients that went silent.
    pub idle_timeout_ms: u64,
    /// When fewer connection slots than this are free, each new connection closes the oldest
    /// connection still in its handshake (not yet ready for queries), so that clients that can
    /// log in are served even when silent sockets hold the other slots.
    pub reserved_connections: usize,
    /// A connection's requests wait before executing while this many bytes of its responses
    /// are not yet written to the client (it is not reading them).
    pub max_unsent_bytes_per_connection: ByteSize,
    /// Across all connections: past this, requests of connections with unsent bytes wait.
    pub max_unsent_bytes: ByteSize,
    /// Request body bytes (after decompression) a connection's requests in flight may hold;
    /// past it the server stops reading from the connection until some complete.
    pub max_in_flight_request_bytes: ByteSize,
    /// A write (INSERT, UPDATE, DELETE, BATCH) that waits for its storage (PostgreSQL, or a
    /// disk flush with `storage.sync = "fsync"`) this long is answered with a WriteTimeout
    /// (its outcome is unknown: it may still commit), as Cassandra's write_request_timeout.
    pub write_timeout_ms: u64,
    /// The same for a single-partition SELECT: ReadTimeout. Scans are not timed.
    pub read_timeout_ms: u64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// "none": acknowledged writes survive `kill -9`; "fsync": they also survive power loss.
    pub sync: crate::storage::SyncMode,
    /// Writes are refused while the data directory's file system has less free space than
    /// this (room for the flushes and compactions already owed; 0 turns the check off).
    pub min_free_bytes: ByteSize,
    /// The embedded store's block cache: disk table blocks kept decompressed in memory
    /// (filled by the blocks reads take; scans and point reads of data beyond it read and
    /// decompress blocks again).
    pub block_cache_bytes: ByteSize,
    /// The embedded store's row cache: point reads of rows answered from memory, filled by
    /// reads and writes, never stale (0 turns it off; `storage/row_cache.rs`).
    pub row_cache_bytes: ByteSize,
    /// "embedded" (fjall in `data_dir`) or "postgres" (tables in the database of
    /// `storage.postgres`; `data_dir` then holds only the server's lock file).
    pub backend: Backend,
    pub postgres: Postgres,
    /// Cluster mode: the storage group (`cluster::groups`) this node's `storage.postgres`
    /// server is registered as at startup, if no group of that name is registered yet.
    pub group: String,
}

/// Which storage engine holds the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Embedded,
    Postgres,
}

/// Connection settings of `storage.backend = "postgres"`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Postgres {
    /// A libpq connection string (`postgresql://user:password@host:port/dbname` or
    /// `host=... port=...`); when set, the fields below are ignored.
    pub url: String,
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub dbname: String,
    /// Connections the server opens at most (requests beyond it wait for one).
    pub pool_size: usize,
    /// Seconds between purge passes over the data this node owns (`query::purge_pass`:
    /// PostgreSQL has no compactions to drop expired and deleted data); 0: none.
    pub purge_every_secs: u64,
    /// Bytes a background purge pass reads per second at most (0: no limit).
    pub purge_bytes_per_second: ByteSize,
}

impl Postgres {
    /// The connection string: `url`, or one built from the separate fields.
    pub fn connection_string(&self) -> String {
        if !self.url.is_empty() {
            return self.url.clone();
        }
        let quote = |v: &str| format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"));
        let mut s = format!(
            "host={} port={} user={} dbname={}",
            quote(&self.host),
            self.port,
            quote(&self.user),
            quote(&self.dbname)
        );
        if !self.password.is_empty() {
            s.push_str(&format!(" password={}", quote(&self.password)));
        }
        s
    }
}

impl Default for Postgres {
    fn default() -> Self {
        Postgres {
            url: String::new(),
            host: "127.0.0.1".into(),
            port: 5432,
            user: "postgres".into(),
            password: String::new(),
            dbname: "ringgate".into(),
            pool_size: 16,
            purge_every_secs: 3600,
            purge_bytes_per_second: ByteSize(16 << 20),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Auth {
    /// Require PasswordAuthenticator logins.
    pub enabled: bool,
    /// user name -> password
    pub users: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Tls {
    pub enabled: bool,
    /// PEM certificate chain.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Partitions {
    /// A physical partition splits when its data passes this size.
    pub physical_split_bytes: ByteSize,
    /// The most data one partition key (logical partition) may hold.
    pub logical_max_bytes: ByteSize,
    /// The largest row (entity).
    pub row_max_bytes: ByteSize,
    /// Memory all physical partitions' size memos may hold together (`partition/size_memo.rs`:
    /// a write of a partition key the memo knows absent skips reading its row); a memo that
    /// would pass it turns off, and its partition's writes of new keys read the store first.
    pub size_memo_bytes: ByteSize,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Throughput {
    /// RU/s of a table without provisioned throughput.
    pub default_table_ru: u64,
    /// Bank unused throughput (up to 5 minutes, spent at up to 3,000 RU/s).
    pub burst: bool,
    /// Hold over-budget requests until they fit (up to 60 s) instead of rejecting them.
    pub server_side_retry: bool,
    /// Longest a request is held by server-side retry before it times out (milliseconds).
    pub server_side_retry_max_ms: u64,
    /// Which budgets reject over-budget requests: "provisioned", "all" or "off" (true and false
    /// are read as "all" and "off").
    pub enforce: Enforce,
}

/// `throughput.enforce`: the throttle's mode, read from a string or a boolean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enforce(pub crate::partition::throttle::Enforce);

impl Serialize for Enforce {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.name())
    }
}

impl<'de> Deserialize<'de> for Enforce {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use crate::partition::throttle::Enforce as E;
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Str(String),
        }
        let mode = match Raw::deserialize(d)? {
            Raw::Bool(true) => E::All,
            Raw::Bool(false) => E::Off,
            Raw::Str(s) => match s.as_str() {
                "provisioned" => E::Provisioned,
                "all" | "true" => E::All,
                "off" | "false" => E::Off,
                other => {
                    return Err(serde::de::Error::custom(format!(
                        "expected \"provisioned\", \"all\" or \"off\", got \"{other}\""
                    )))
                }
            },
        };
        Ok(Enforce(mode))
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BatchLimits {
    /// Warn the client above this batch size.
    pub size_warn_threshold: ByteSize,
    /// Reject batches above this size.
    pub size_fail_threshold: ByteSize,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Protocol {
    /// Which connections get the `RequestCharge` custom payload on their responses.
    pub request_charge: RequestCharge,
}

/// The HTTP listener: Prometheus `/metrics` and the dashboard.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Http {
    pub enabled: bool,
    /// Address the HTTP listener binds (port 0: any free port, named in the log).
    pub listen: String,
    /// Tables that get per-table series in `/metrics` (the busiest first); bounds the series.
    pub metrics_max_tables: usize,
    /// Physical partitions that get per-partition series in `/metrics` (the busiest first).
    pub metrics_max_partitions: usize,
}

/// Logging beyond the level: the slow query log.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Log {
    /// Statements that take longer than this are logged with their routing, rows and charge
    /// (0: none).
    pub slow_query_ms: u64,
}

/// Which clients get Cosmos DB's `RequestCharge` custom payload. A driver that does not read the
/// payload flag misreads every response carrying one (cdrs-tokio 9 hangs), so by default only
/// clients that show they read payloads get it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestCharge {
    /// Clients that name themselves in STARTUP (DRIVER_NAME) or send a payload themselves.
    #[default]
    Named,
    /// Every client.
    All,
    /// No client.
    None,
}

impl RequestCharge {
    /// Whether a connection gets the payload; `named`: its client named itself in STARTUP or
    /// sent a payload.
    pub fn sent(self, named: bool) -> bool {
        match self {
            RequestCharge::Named => named,
            RequestCharge::All => true,
            RequestCharge::None => false,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: "127.0.0.1:9042".into(),
            data_dir: PathBuf::from("./ringgate-data"),
            cluster_name: "ringgate".into(),
            data_center: "datacenter1".into(),
            rack: "rack1".into(),
            log_level: "info".into(),
            limits: Limits::default(),
            storage: StorageConfig::default(),
            auth: Auth::default(),
            tls: Tls::default(),
            partitions: Partitions::default(),
            throughput: Throughput::default(),
            batch: BatchLimits::default(),
            protocol: Protocol::default(),
            http: Http::default(),
            log: Log::default(),
            cluster: Cluster::default(),
            changefeed: Changefeed::default(),
        }
    }
}

impl Default for Http {
    fn default() -> Self {
        Http {
            enabled: true,
            listen: "127.0.0.1:9180".into(),
            metrics_max_tables: 100,
            metrics_max_partitions: 1000,
        }
    }
}

impl Default for Log {
    fn default() -> Self {
        Log { slow_query_ms: 500 }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_bytes: ByteSize(256 << 20),
            max_connections: 1024,
            max_in_flight_per_connection: 2048,
            max_value_bytes: ByteSize(128 << 20),
            max_page_bytes: ByteSize(8 << 20),
            startup_timeout_ms: 10_000,
            auth_timeout_ms: 10_000,
            idle_timeout_ms: 0,
            reserved_connections: 32,
            max_unsent_bytes_per_connection: ByteSize(32 << 20),
            max_unsent_bytes: ByteSize(512 << 20),
            max_in_flight_request_bytes: ByteSize(64 << 20),
            write_timeout_ms: 5_000,
            read_timeout_ms: 5_000,
        }
    }
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            sync: crate::storage::SyncMode::None,
            min_free_bytes: ByteSize(256 << 20),
            block_cache_bytes: ByteSize(crate::storage::DEFAULT_BLOCK_CACHE_BYTES),
            row_cache_bytes: ByteSize(crate::storage::row_cache::DEFAULT_ROW_CACHE_BYTES),
            backend: Backend::Embedded,
            postgres: Postgres::default(),
            group: crate::cluster::groups::DEFAULT_GROUP.into(),
        }
    }
}

impl Default for Tls {
    fn default() -> Self {
        Tls {
            enabled: false,
            cert: PathBuf::new(),
            key: PathBuf::new(),
        }
    }
}

impl Default for Partitions {
    fn default() -> Self {
        Partitions {
            physical_split_bytes: ByteSize(30 << 30),
            logical_max_bytes: ByteSize(20 << 30),
            row_max_bytes: ByteSize(2 << 20),
            size_memo_bytes: ByteSize(crate::partition::size_memo::MEMORY_BYTES as u64),
        }
    }
}

impl Default for Throughput {
    fn default() -> Self {
        Throughput {
            default_table_ru: 400,
            burst: true,
            server_side_retry: false,
            server_side_retry_max_ms: 60_000,
            enforce: Enforce(crate::partition::throttle::Enforce::Provisioned),
        }
    }
}

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            size_warn_threshold: ByteSize(5 << 10),
            size_fail_threshold: ByteSize(50 << 10),
        }
    }
}

/// Parses a `--set` value: a TOML scalar (true, 42, 1.5, "quoted") or else a bare string.
fn parse_override_value(raw: &str) -> toml::Value {
    match format!("v = {raw}").parse::<toml::Table>() {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| toml::Value::String(raw.into())),
        Err(_) => toml::Value::String(raw.to_string()),
    }
}

/// Where an effective setting came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingSource {
    Default,
    /// The configuration file and the line of the key.
    File(PathBuf, usize),
    /// A `--set KEY=VALUE`.
    Set,
    /// A command-line flag (`--listen`, `--data-dir`, `--log-level`).
    Flag(&'static str),
}

impl std::fmt::Display for SettingSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SettingSource::Default => write!(f, "default"),
            SettingSource::File(p, line) => write!(f, "{}:{line}", p.display()),
            SettingSource::Set => write!(f, "--set"),
            SettingSource::Flag(name) => write!(f, "{name}"),
        }
    }
}

/// The effective configuration and where each setting given came from.
#[derive(Debug, Clone)]
pub struct Settings {
    pub config: Config,
    /// Dotted name -> source, for settings not at their default.
    pub sources: BTreeMap<String, SettingSource>,
}

impl Settings {
    /// Every effective setting as `name = value  # source`, one a line, in name order.
    pub fn describe(&self) -> String {
        let value = toml::Value::try_from(&self.config).unwrap_or(toml::Value::Boolean(false));
        let mut leaves = Vec::new();
        flatten("", &value, &mut leaves);
        let mut out = String::new();
        for (name, v) in leaves {
            let source = self
                .sources
                .iter()
                .filter(|(k, _)| name == **k || name.starts_with(&format!("{k}.")))
                .map(|(_, s)| s.to_string())
                .next_back()
                .unwrap_or_else(|| SettingSource::Default.to_string());
            // Passwords are not printed (nor the PostgreSQL URL, which may hold one).
            let secret = name == "storage.postgres.password" || name == "storage.postgres.url";
            let v = if name.starts_with("auth.users.") || (secret && v != "\"\"") {
                "\"<hidden>\"".to_string()
            } else {
                v
            };
            out.push_str(&format!("{name} = {v}  # {source}\n"));
        }
        out
    }
}

/// The leaves of a TOML value as (dotted name, TOML text); an empty table is one leaf `{}`.
fn flatten(prefix: &str, v: &toml::Value, out: &mut Vec<(String, String)>) {
    match v {
        toml::Value::Table(t) if !t.is_empty() => {
            for (k, x) in t {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&name, x, out);
            }
        }
        toml::Value::Table(_) => out.push((prefix.to_string(), "{}".into())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// The line (1-based) of each key a TOML file sets, by dotted name: `[section]` headers and
/// `key = value` lines (keys of inline tables are found by their table's name).
fn key_lines(text: &str) -> BTreeMap<String, usize> {
    let mut lines = BTreeMap::new();
    let mut section = String::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if let Some(h) = l.strip_prefix('[') {
            section = h
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim()
                .to_string();
            lines.entry(section.clone()).or_insert(i + 1);
        } else if let Some((k, _)) = l.split_once('=').filter(|_| !l.starts_with('#')) {
            let key: Vec<&str> = k.split('.').map(|p| p.trim().trim_matches('"')).collect();
            let key = key.join(".");
            let name = if section.is_empty() {
                key
            } else {
                format!("{section}.{key}")
            };
            lines.insert(name, i + 1);
        }
    }
    lines
}

/// The source of a setting from the file: its own line, else its nearest section's.
fn file_line(lines: &BTreeMap<String, usize>, name: &str) -> usize {
    let mut n = name;
    loop {
        if let Some(l) = lines.get(n) {
            return *l;
        }
        match n.rsplit_once('.') {
            Some((head, _)) => n = head,
            None => return 0,
        }
    }
}

/// Sets a dotted name in a TOML table, creating sections on the way.
fn set_path(doc: &mut toml::Table, name: &str, value: toml::Value) -> Result<(), String> {
    let path: Vec<&str> = name.split('.').collect();
    if path.iter().any(|p| p.is_empty()) {
        return Err(format!("bad setting name '{name}'"));
    }
    let mut table = doc;
    for part in &path[..path.len() - 1] {
        let entry = table
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        table = entry
            .as_table_mut()
            .ok_or_else(|| format!("{part}: not a section"))?;
    }
    table.insert(path[path.len() - 1].to_string(), value);
    Ok(())
}

/// Checks a document against the defaults' shape: every key must be a known setting (tables
/// that are empty by default, `auth.users`, take any keys), and each value must deserialize on
/// its own; the first error names its setting.
fn check_keys(
    doc: &toml::Table,
    defaults: &toml::Table,
    prefix: &str,
) -> Result<(), (String, String)> {
    for (k, v) in doc {
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match (defaults.get(k), v) {
            (None, _) => return Err((name, "unknown setting".into())),
            (Some(toml::Value::Table(d)), toml::Value::Table(t)) if !d.is_empty() => {
                check_keys(t, d, &name)?
            }
            (Some(toml::Value::Table(d)), _) if !d.is_empty() => {
                return Err((name, "expected a section of settings".into()))
            }
            _ => {
                let mut one = toml::Table::new();
                set_path(&mut one, &name, v.clone()).map_err(|e| (name.clone(), e))?;
                if let Err(e) = toml::Value::Table(one).try_into::<Config>() {
                    return Err((name, friendly(e.message())));
                }
            }
        }
    }
    Ok(())
}

/// serde's type errors as a user reads them: `invalid type: string "abc", expected u64` ->
/// `expected an integer, got "abc"`; other messages unchanged.
fn friendly(message: &str) -> String {
    let m = message.trim();
    let Some(rest) = m.strip_prefix("invalid type: ") else {
        return m.to_string();
    };
    let Some((got, expected)) = rest.rsplit_once(", expected ") else {
        return m.to_string();
    };
    let got = got
        .split_once(' ')
        .map_or(got, |(_, v)| v)
        .trim_matches('`');
    let expected = match expected {
        "u64" | "usize" | "u32" | "i64" | "i32" | "u16" => "an integer",
        "a boolean" => "true or false",
        "a string" => "a string",
        other => other,
    };
    format!("expected {expected}, got {got}")
}

impl Config {
    /// Builds the configuration: file (optional), then `--set` overrides in order.
    pub fn load(file: Option<&std::path::Path>, overrides: &[String]) -> Result<Config, String> {
        Settings::load(file, overrides, &[]).map(|s| s.config)
    }
}

impl Settings {
    /// Builds the configuration: file (optional), then `--set` overrides in order, then flags
    /// (flag name, dotted setting, value); records where each setting came from.
    pub fn load(
        file: Option<&std::path::Path>,
        overrides: &[String],
        flags: &[(&'static str, &str, String)],
    ) -> Result<Settings, String> {
        let defaults = match toml::Value::try_from(Config::default()) {
            Ok(toml::Value::Table(t)) => t,
            _ => return Err("cannot describe the default settings".into()),
        };
        let mut sources = BTreeMap::new();
        let mut doc = toml::Table::new();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
            let parsed: toml::Table = text.parse().map_err(|e: toml::de::Error| {
                let line = e
                    .span()
                    .map_or(0, |s| text[..s.start].matches('\n').count() + 1);
                format!("{}:{line}: {}", path.display(), e.message().trim())
            })?;
            let lines = key_lines(&text);
            check_keys(&parsed, &defaults, "").map_err(|(name, msg)| {
                format!(
                    "{}:{}: {name}: {msg}",
                    path.display(),
                    file_line(&lines, &name)
                )
            })?;
            let mut leaves = Vec::new();
            flatten("", &toml::Value::Table(parsed.clone()), &mut leaves);
            for (name, _) in leaves {
                let line = file_line(&lines, &name);
                sources.insert(name, SettingSource::File(path.to_path_buf(), line));
            }
            doc = parsed;
        }
        for o in overrides {
            let (key, value) = o
                .split_once('=')
                .ok_or_else(|| format!("--set {o}: expected KEY=VALUE"))?;
            let key = key.trim();
            let mut one = toml::Table::new();
            set_path(&mut one, key, parse_override_value(value.trim()))
                .map_err(|e| format!("--set {o}: {e}"))?;
            check_keys(&one, &defaults, "")
                .map_err(|(name, msg)| format!("--set {o}: {name}: {msg}"))?;
            set_path(&mut doc, key, parse_override_value(value.trim()))
                .map_err(|e| format!("--set {o}: {e}"))?;
            sources.insert(key.to_string(), SettingSource::Set);
        }
        for (flag, key, value) in flags {
            set_path(&mut doc, key, toml::Value::String(value.clone()))?;
            sources.insert(key.to_string(), SettingSource::Flag(flag));
        }
        let config: Config = toml::Value::Table(doc)
            .try_into()
            .map_err(|e: toml::de::Error| format!("invalid setting: {}", friendly(e.message())))?;
        config.validate()?;
        Ok(Settings { config, sources })
    }
}

impl Config {
    fn validate(&self) -> Result<(), String> {
        if self.storage.postgres.pool_size == 0 {
            return Err("storage.postgres.pool_size must be at least 1".into());
        }
        crate::cluster::groups::check_name(&self.storage.group)
            .map_err(|e| format!("storage.group: {e}"))?;
        if self.limits.max_connections == 0 {
            return Err("limits.max_connections must be at least 1".into());
        }
        if self.limits.startup_timeout_ms == 0 || self.limits.auth_timeout_ms == 0 {
            return Err(
                "limits.startup_timeout_ms and limits.auth_timeout_ms must be at least 1".into(),
            );
        }
        if self.limits.max_in_flight_request_bytes.0 == 0
            || self.limits.max_in_flight_request_bytes.0 > u32::MAX as u64
        {
            return Err("limits.max_in_flight_request_bytes must be between 1 and 4GiB".into());
        }
        if self.limits.write_timeout_ms == 0 || self.limits.read_timeout_ms == 0 {
            return Err(
                "limits.write_timeout_ms and limits.read_timeout_ms must be at least 1".into(),
            );
        }
        if self.limits.max_in_flight_per_connection == 0 {
            return Err("limits.max_in_flight_per_connection must be at least 1".into());
        }
        if self.limits.max_frame_bytes.0 < 1024 || self.limits.max_frame_bytes.0 > (1 << 31) - 1 {
            return Err("limits.max_frame_bytes must be between 1KiB and 2GiB".into());
        }
        if self.auth.enabled && self.auth.users.is_empty() {
            return Err("auth.enabled = true needs at least one user in [auth.users]".into());
        }
        if self.tls.enabled
            && (self.tls.cert.as_os_str().is_empty() || self.tls.key.as_os_str().is_empty())
        {
            return Err("tls.enabled = true needs tls.cert and tls.key".into());
        }
        if self.throughput.default_table_ru < 400 {
            return Err("throughput.default_table_ru must be at least 400".into());
        }
        if self.throughput.default_table_ru > 1_000_000 {
            return Err("throughput.default_table_ru must be at most 1000000".into());
        }
        validate_log_level(&self.log_level)?;
        self.cluster.validate()?;
        if self.throughput.server_side_retry_max_ms > 600_000 {
            return Err(
                "throughput.server_side_retry_max_ms must be at most 600000 (10 minutes)".into(),
            );
        }
        Ok(())
    }
}

/// A log level, or a filter of directives (`info,ringgate=debug`); a bare word that is not a
/// level is refused (tracing would read it as a target name and log nothing).
fn validate_log_level(level: &str) -> Result<(), String> {
    const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];
    let is_level = LEVELS.contains(&level.to_ascii_lowercase().as_str());
    let is_filter = level.contains('=')
        && tracing_subscriber::EnvFilter::builder()
            .parse(level)
            .is_ok();
    if is_level || is_filter {
        return Ok(());
    }
    Err(format!(
        "log_level: expected one of trace, debug, info, warn, error, off (or a filter such as \"info,ringgate=debug\"), got \"{level}\""
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(ByteSize::parse("4MiB").unwrap().0, 4 << 20);
        assert_eq!(ByteSize::parse("1 KiB").unwrap().0, 1024);
        assert_eq!(ByteSize::parse("30GiB").unwrap().0, 30 << 30);
        assert_eq!(ByteSize::parse("123").unwrap().0, 123);
        assert!(ByteSize::parse("4 parsecs").is_err());
        assert!(ByteSize::parse("MiB").is_err());
    }

    #[test]
    fn postgres_backend_settings() {
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let c = Config::load(None, &[]).unwrap();
        assert_eq!(c.storage.backend, Backend::Embedded);
        let s = Settings::load(
            None,
            &set(&[
                "storage.backend=postgres",
                "storage.postgres.port=5433",
                "storage.postgres.password=it's",
            ]),
            &[],
        )
        .unwrap();
        assert_eq!(s.config.storage.backend, Backend::Postgres);
        assert_eq!(
            s.config.storage.postgres.connection_string(),
            "host='127.0.0.1' port=5433 user='postgres' dbname='ringgate' password='it\\'s'"
        );
        let shown = s.describe();
        assert!(
            shown.contains("storage.postgres.password = \"<hidden>\""),
            "{shown}"
        );
        assert!(!shown.contains("it's"), "{shown}");
        let url = "storage.postgres.url=postgresql://u:secret@h/db";
        let s = Settings::load(None, &set(&[url]), &[]).unwrap();
        assert_eq!(
            s.config.storage.postgres.connection_string(),
            "postgresql://u:secret@h/db"
        );
        assert!(!s.describe().contains("secret"));
        let e = Config::load(None, &set(&["storage.backend=mysql"])).unwrap_err();
        assert!(e.contains("mysql"), "{e}");
        let e = Config::load(None, &set(&["storage.postgres.pool_size=0"])).unwrap_err();
        assert!(e.contains("storage.postgres.pool_size"), "{e}");
    }

    #[test]
    fn overrides_and_errors() {
        let c = Config::load(
            None,
            &[
                "auth.enabled=true".into(),
                "auth.users.cassandra=cassandra".into(),
                "partitions.physical_split_bytes=4MiB".into(),
                "storage.sync=fsync".into(),
                "storage.block_cache_bytes=64MiB".into(),
                "storage.row_cache_bytes=0".into(),
                "listen=127.0.0.1:19042".into(),
            ],
        )
        .unwrap();
        assert_eq!(c.storage.block_cache_bytes.0, 64 << 20);
        assert_eq!(c.storage.row_cache_bytes.0, 0);
        assert!(c.auth.enabled);
        assert_eq!(c.auth.users["cassandra"], "cassandra");
        assert_eq!(c.partitions.physical_split_bytes.0, 4 << 20);
        assert_eq!(c.storage.sync, crate::storage::SyncMode::Fsync);
        assert_eq!(c.listen, "127.0.0.1:19042");
        let e = Config::load(None, &["auth.enabeld=true".into()]).unwrap_err();
        assert!(e.contains("enabeld"), "{e}");
        let e = Config::load(None, &["nosuch=1".into()]).unwrap_err();
        assert!(e.contains("nosuch"), "{e}");
        let e = Config::load(None, &["auth.enabled=maybe".into()]).unwrap_err();
        assert!(e.contains("enabled") || e.contains("bool"), "{e}");
        let e = Config::load(None, &["storage.sync=sometimes".into()]).unwrap_err();
        assert!(e.contains("sometimes"), "{e}");
    }

    #[test]
    fn errors_name_the_setting() {
        let e = Config::load(None, &["throughput.default_table_ru=abc".into()]).unwrap_err();
        assert_eq!(
            e,
            "--set throughput.default_table_ru=abc: throughput.default_table_ru: expected an integer, got \"abc\""
        );
        let e = Config::load(None, &["throughput.foo=1".into()]).unwrap_err();
        assert!(e.ends_with("throughput.foo: unknown setting"), "{e}");
        let e = Config::load(None, &["log_level=verbose".into()]).unwrap_err();
        assert!(e.starts_with("log_level: expected one of trace"), "{e}");
        assert!(Config::load(None, &["log_level=info,ringgate=debug".into()]).is_ok());
    }

    #[test]
    fn file_errors_name_the_setting_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ringgate.toml");
        let load = |text: &str| {
            std::fs::write(&path, text).unwrap();
            Settings::load(Some(&path), &[], &[])
        };
        let e = load("listen = \"127.0.0.1:1\"\n\n[throughput]\ndefault_table_ru = \"abc\"\n")
            .unwrap_err();
        assert_eq!(
            e,
            format!(
                "{}:4: throughput.default_table_ru: expected an integer, got \"abc\"",
                path.display()
            )
        );
        let e = load("[throughput]\nburst = true\nfoo = 1\n").unwrap_err();
        assert!(e.ends_with(":3: throughput.foo: unknown setting"), "{e}");
        let e = load("[throughput\n").unwrap_err();
        assert!(
            e.contains("ringgate.toml:1: ") || e.contains("ringgate.toml:2: "),
            "{e}"
        );
    }

    #[test]
    fn enforce_modes_and_sources() {
        use crate::partition::throttle::Enforce as E;
        let mode = |v: &str| {
            Config::load(None, &[format!("throughput.enforce={v}")]).map(|c| c.throughput.enforce.0)
        };
        assert_eq!(
            Config::load(None, &[]).unwrap().throughput.enforce.0,
            E::Provisioned
        );
        assert_eq!(mode("all").unwrap(), E::All);
        assert_eq!(mode("true").unwrap(), E::All);
        assert_eq!(mode("false").unwrap(), E::Off);
        assert_eq!(mode("off").unwrap(), E::Off);
        assert!(mode("sometimes")
            .unwrap_err()
            .contains("\"provisioned\", \"all\" or \"off\""));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.toml");
        std::fs::write(&path, "# comment\n[throughput]\nburst = false\n").unwrap();
        let s = Settings::load(
            Some(&path),
            &[
                "throughput.enforce=off".into(),
                "auth.users.bob=secret".into(),
            ],
            &[("--data-dir", "data_dir", "/tmp/x".into())],
        )
        .unwrap();
        let text = s.describe();
        assert!(
            text.contains(&format!(
                "throughput.burst = false  # {}:3\n",
                path.display()
            )),
            "{text}"
        );
        assert!(
            text.contains("throughput.enforce = \"off\"  # --set\n"),
            "{text}"
        );
        assert!(
            text.contains("data_dir = \"/tmp/x\"  # --data-dir\n"),
            "{text}"
        );
        assert!(
            text.contains("listen = \"127.0.0.1:9042\"  # default\n"),
            "{text}"
        );
        assert!(
            text.contains("auth.users.bob = \"<hidden>\"  # --set\n"),
            "{text}"
        );
        assert!(!text.contains("secret"), "{text}");
    }

    #[test]
    fn request_charge_modes() {
        let c = Config::load(None, &[]).unwrap();
        assert_eq!(c.protocol.request_charge, RequestCharge::Named);
        let c = Config::load(None, &["protocol.request_charge=all".into()]).unwrap();
        assert_eq!(c.protocol.request_charge, RequestCharge::All);
        let c = Config::load(None, &["protocol.request_charge=none".into()]).unwrap();
        assert!(!c.protocol.request_charge.sent(true));
        assert!(RequestCharge::All.sent(false) && !RequestCharge::Named.sent(false));
        let e = Config::load(None, &["protocol.request_charge=some".into()]).unwrap_err();
        assert!(e.contains("some"), "{e}");
    }
}
