//! Settings: a TOML file, then `--set key=value` overrides by dotted name, then the CLI flags.
//! Every setting has a default; an unknown or mistyped setting is an error that names it.

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

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
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// "none": acknowledged writes survive `kill -9`; "fsync": they also survive power loss.
    pub sync: crate::storage::SyncMode,
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
    /// Reject over-budget requests; false keeps accounting only.
    pub enforce: bool,
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
        }
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
        }
    }
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            sync: crate::storage::SyncMode::None,
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
            enforce: true,
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

impl Config {
    /// Builds the configuration: file (optional), then `--set` overrides in order.
    pub fn load(file: Option<&std::path::Path>, overrides: &[String]) -> Result<Config, String> {
        let mut doc: toml::Table = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
                text.parse()
                    .map_err(|e| format!("config file {}: {e}", path.display()))?
            }
            None => toml::Table::new(),
        };
        for o in overrides {
            let (key, value) = o
                .split_once('=')
                .ok_or_else(|| format!("--set {o}: expected KEY=VALUE"))?;
            let path: Vec<&str> = key.trim().split('.').collect();
            if path.iter().any(|p| p.is_empty()) {
                return Err(format!("--set {o}: bad setting name '{key}'"));
            }
            let mut table = &mut doc;
            for part in &path[..path.len() - 1] {
                let entry = table
                    .entry(part.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                table = entry
                    .as_table_mut()
                    .ok_or_else(|| format!("--set {o}: '{part}' is not a section"))?;
            }
            table.insert(
                path[path.len() - 1].to_string(),
                parse_override_value(value.trim()),
            );
        }
        let text = toml::to_string(&doc).map_err(|e| e.to_string())?;
        let cfg: Config = toml::from_str(&text)
            .map_err(|e| format!("invalid setting: {}", e.message().trim()))
            .map_err(|m| {
                // toml's message names the field; add the section for nested keys.
                m.replace("unknown field", "unknown setting")
            })?;
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<(), String> {
        if self.limits.max_connections == 0 {
            return Err("limits.max_connections must be at least 1".into());
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
        if self.throughput.server_side_retry_max_ms > 600_000 {
            return Err(
                "throughput.server_side_retry_max_ms must be at most 600000 (10 minutes)".into(),
            );
        }
        Ok(())
    }
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
    fn overrides_and_errors() {
        let c = Config::load(
            None,
            &[
                "auth.enabled=true".into(),
                "auth.users.cassandra=cassandra".into(),
                "partitions.physical_split_bytes=4MiB".into(),
                "storage.sync=fsync".into(),
                "listen=127.0.0.1:19042".into(),
            ],
        )
        .unwrap();
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
