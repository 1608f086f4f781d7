//! `[cluster]`: cluster mode's settings (issue 17). Parsed, validated and shown by
//! `--print-config`; `server::startup` acts on them.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cluster {
    /// etcd endpoints (`http://host:port` or `host:port`); any given means cluster mode.
    pub etcd: Vec<String>,
    /// This node's name in the cluster (`members/<name>`); empty: the host name.
    pub node_name: String,
    /// The `host:port` clients and peers use to reach this node's CQL listener; empty: the
    /// `listen` address.
    pub advertise: String,
    /// TTL of the node's etcd lease (whole seconds in etcd, so rounded up): a node that stops
    /// renewing loses its memberships and partitions this long after its last renewal.
    pub lease_ms: u64,
    /// Physical partitions a new table starts with in cluster mode (more if its throughput
    /// asks), in equal token ranges, so that its ownership spreads over the nodes at once.
    pub initial_partitions: u64,
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster {
            etcd: Vec::new(),
            node_name: String::new(),
            advertise: String::new(),
            lease_ms: 5000,
            initial_partitions: 8,
        }
    }
}

/// Most initial partitions of a table (each is an owner record and a lease-bound key in etcd).
const MAX_INITIAL_PARTITIONS: u64 = 1024;

/// Node names become etcd key segments: keep them to a safe alphabet.
const MAX_NODE_NAME_BYTES: usize = 64;

impl Cluster {
    pub fn enabled(&self) -> bool {
        !self.etcd.is_empty()
    }

    pub(super) fn validate(&self) -> Result<(), String> {
        for e in &self.etcd {
            crate::etcd::parse_endpoint(e).map_err(|e| format!("cluster.etcd: {e}"))?;
        }
        if !(1000..=600_000).contains(&self.lease_ms) {
            return Err("cluster.lease_ms must be between 1000 and 600000".into());
        }
        if !(1..=MAX_INITIAL_PARTITIONS).contains(&self.initial_partitions) {
            return Err(format!(
                "cluster.initial_partitions must be between 1 and {MAX_INITIAL_PARTITIONS}"
            ));
        }
        let name_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if self.node_name.len() > MAX_NODE_NAME_BYTES || !self.node_name.chars().all(name_ok) {
            return Err(format!(
                "cluster.node_name must be at most {MAX_NODE_NAME_BYTES} letters, digits, '-', '_' or '.'"
            ));
        }
        if !self.advertise.is_empty() && self.advertise.parse::<std::net::SocketAddr>().is_err() {
            let host_port = self.advertise.rsplit_once(':');
            if !host_port.is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok()) {
                return Err(format!(
                    "cluster.advertise {:?}: expected host:port",
                    self.advertise
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Cluster;

    #[test]
    fn validates_each_setting() {
        let ok = Cluster {
            etcd: vec!["http://127.0.0.1:2379".into()],
            ..Cluster::default()
        };
        assert!(ok.validate().is_ok() && ok.enabled());
        assert!(!Cluster::default().enabled());
        let bad = [
            Cluster {
                etcd: vec!["127.0.0.1".into()],
                ..Cluster::default()
            },
            Cluster {
                etcd: vec!["https://a:1".into()],
                ..Cluster::default()
            },
            Cluster {
                lease_ms: 10,
                ..Cluster::default()
            },
            Cluster {
                initial_partitions: 0,
                ..Cluster::default()
            },
            Cluster {
                node_name: "a/b".into(),
                ..Cluster::default()
            },
            Cluster {
                advertise: "nohost".into(),
                ..Cluster::default()
            },
        ];
        for b in bad {
            assert!(b.validate().is_err(), "{b:?}");
        }
    }

    #[test]
    fn loads_from_overrides_and_prints() {
        let set = |s: &[&str]| {
            let o: Vec<String> = s.iter().map(|x| x.to_string()).collect();
            super::super::Settings::load(None, &o, &[])
        };
        let s = set(&[
            "cluster.etcd=[\"http://10.0.0.1:2379\", \"10.0.0.2:2379\"]",
            "cluster.lease_ms=3000",
        ])
        .unwrap();
        assert!(s.config.cluster.enabled());
        assert_eq!(s.config.cluster.lease_ms, 3000);
        let printed = s.describe();
        assert!(
            printed.contains("cluster.lease_ms = 3000  # --set"),
            "{printed}"
        );
        assert!(
            printed.contains("cluster.node_name = \"\"  # default"),
            "{printed}"
        );
        let e = set(&["cluster.etcd=[\"nope\"]"]).unwrap_err();
        assert!(
            e.contains("cluster.etcd") && e.contains("not an etcd endpoint"),
            "{e}"
        );
        assert!(set(&["cluster.lease_ms=\"x\""])
            .unwrap_err()
            .contains("cluster.lease_ms"));
    }
}
