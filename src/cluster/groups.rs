//! Storage groups: the PostgreSQL servers that hold physical partitions (issue 17).
//!
//! Registry: metadata key `groups/<name>` (in `MetaStore`, so under `meta/` in etcd) = JSON
//! [`GroupSpec`]: how to reach the group's database. A list of hosts is kept so that a group
//! can be a primary with standbys (issue 18): with more than one host the connection asks for
//! `target_session_attrs=read-write`, so the client finds whichever host is the primary.
//! Registering is a compare-and-swap on the key being absent: the first registration wins, a
//! later one under the same name changes nothing (a node's own settings register its group at
//! startup, `server::startup`; an operator adds others through `system_views.storage_groups`).
//!
//! Data per group: `group-bytes/<node>` = JSON {group: bytes}, on the node's lease, written by
//! the node's ownership loop (`partition::ownership`) from the size counters of the partitions
//! it owns (owners keep exact counters). A group's data is the sum over live nodes; a dead
//! node's record goes with its lease, and the partitions' new owners publish them again.
//! Placement of new partitions (`least_data_first`) and `system_views.storage_groups` read it.

use super::{ClusterNode, Control, ControlError};
use crate::storage::handle::MetaStore;
use crate::storage::{Result, StorageError};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::Bound;

/// The group of partitions whose map entry names none (maps written before groups existed)
/// and the group a node registers when `storage.group` is not set.
pub const DEFAULT_GROUP: &str = "default";
/// Registry key prefix in the metadata store.
const REGISTRY: &[u8] = b"groups/";
/// Per-node data records, on the node's lease.
const BYTES_PREFIX: &str = "group-bytes/";
/// Far above any real cluster (a group is a database server).
pub const MAX_GROUPS: usize = 256;
const MAX_NAME_BYTES: usize = 64;
const MAX_HOSTS: usize = 16;

/// How to reach a group's database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupSpec {
    /// `host:port` of each server (a Unix socket directory as host works too).
    pub hosts: Vec<String>,
    pub dbname: String,
    pub user: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub password: String,
}

/// Names are what a CQL text literal and an etcd key carry without quoting.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && (name.bytes()).all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    match ok {
        true => Ok(()),
        false => Err(format!(
            "a storage group name is 1 to {MAX_NAME_BYTES} characters among letters, digits, \
             '_' and '-' (got {name:?})"
        )),
    }
}

impl GroupSpec {
    /// The group a libpq connection string (URL or `key=value` form) reaches.
    pub fn from_connection_string(s: &str) -> std::result::Result<GroupSpec, String> {
        use std::str::FromStr;
        let c = tokio_postgres::Config::from_str(s).map_err(|e| e.to_string())?;
        let ports = c.get_ports();
        let hosts = (c.get_hosts().iter().enumerate())
            .map(|(i, h)| {
                let host = match h {
                    tokio_postgres::config::Host::Tcp(h) => h.clone(),
                    #[cfg(unix)]
                    tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
                };
                let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
                format!("{host}:{port}")
            })
            .collect();
        let spec = GroupSpec {
            hosts,
            dbname: c.get_dbname().unwrap_or("postgres").to_string(),
            user: c.get_user().unwrap_or("postgres").to_string(),
            password: (c.get_password())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .unwrap_or_default(),
        };
        spec.check()?;
        Ok(spec)
    }

    pub fn check(&self) -> std::result::Result<(), String> {
        if self.hosts.is_empty() || self.hosts.len() > MAX_HOSTS {
            return Err(format!("a storage group has 1 to {MAX_HOSTS} hosts"));
        }
        for h in &self.hosts {
            let port = h.rsplit_once(':').map(|(_, p)| p.parse::<u16>());
            if !matches!(port, Some(Ok(_))) {
                return Err(format!("storage group host {h:?} is not host:port"));
            }
        }
        if self.dbname.is_empty() || self.user.is_empty() {
            return Err("a storage group needs a database name and a user".into());
        }
        Ok(())
    }

    /// The libpq key=value connection string; several hosts ask for the read-write one.
    pub fn connection_string(&self) -> String {
        let quote = |v: &str| format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"));
        let (hosts, ports): (Vec<&str>, Vec<&str>) = (self.hosts.iter())
            .filter_map(|h| h.rsplit_once(':'))
            .unzip();
        let mut s = format!(
            "host={} port={} user={} dbname={}",
            quote(&hosts.join(",")),
            quote(&ports.join(",")),
            quote(&self.user),
            quote(&self.dbname)
        );
        if !self.password.is_empty() {
            s.push_str(&format!(" password={}", quote(&self.password)));
        }
        if self.hosts.len() > 1 {
            s.push_str(" target_session_attrs=read-write");
        }
        s
    }
}

fn registry_key(name: &str) -> Vec<u8> {
    [REGISTRY, name.as_bytes()].concat()
}

/// Registers group `name` unless one of that name exists; true if this call registered it.
pub fn register(meta: &dyn MetaStore, name: &str, spec: &GroupSpec) -> Result<bool> {
    check_name(name).map_err(StorageError::Io)?;
    spec.check().map_err(StorageError::Io)?;
    if lookup(meta, name)?.is_some() {
        return Ok(false);
    }
    if list(meta)?.len() >= MAX_GROUPS {
        return Err(StorageError::Io(format!(
            "at most {MAX_GROUPS} storage groups"
        )));
    }
    let key = registry_key(name);
    let value = serde_json::to_vec(spec).expect("a group spec serializes");
    let writes = vec![(Bytes::from(key.clone()), Some(Bytes::from(value)))];
    match meta.meta_commit_if(&key, 0, writes) {
        Ok(()) => Ok(true),
        Err(StorageError::Conflict { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The registered group `name`.
pub fn lookup(meta: &dyn MetaStore, name: &str) -> Result<Option<GroupSpec>> {
    match meta.meta_get(&registry_key(name))? {
        Some(v) => decode(name, &v).map(Some),
        None => Ok(None),
    }
}

fn decode(name: &str, v: &[u8]) -> Result<GroupSpec> {
    serde_json::from_slice(v)
        .map_err(|e| StorageError::Corrupt(format!("storage group {name}: {e}")))
}

/// Every registered group, by name.
pub fn list(meta: &dyn MetaStore) -> Result<BTreeMap<String, GroupSpec>> {
    let end = crate::storage::prefix_successor(REGISTRY).expect("prefix has a successor");
    let mut out = BTreeMap::new();
    for item in meta.meta_scan(Bound::Included(REGISTRY), Bound::Excluded(&end[..])) {
        let (k, v) = item?;
        let name = String::from_utf8_lossy(&k[REGISTRY.len()..]).into_owned();
        let spec = decode(&name, &v)?;
        out.insert(name, spec);
        if out.len() > MAX_GROUPS {
            return Err(StorageError::Corrupt(format!(
                "more than {MAX_GROUPS} storage groups registered"
            )));
        }
    }
    Ok(out)
}

/// Records the bytes this node's owned partitions hold per group, on its lease.
pub async fn publish_bytes(
    control: &Control,
    lease: i64,
    node: &str,
    bytes: &BTreeMap<String, i64>,
) -> std::result::Result<(), ControlError> {
    let key = control.key(&format!("{BYTES_PREFIX}{node}"));
    let value = serde_json::to_vec(bytes).expect("a map serializes");
    control.client.put(&key, &value, lease).await?;
    Ok(())
}

/// Every group's bytes: the sum of what the live nodes published.
pub async fn bytes(control: &Control) -> std::result::Result<BTreeMap<String, i64>, ControlError> {
    let kvs = control
        .scan_prefix(BYTES_PREFIX, 500, super::members::MAX_MEMBERS)
        .await?;
    let mut sum = BTreeMap::new();
    for kv in kvs {
        let Ok(per_node) = serde_json::from_slice::<BTreeMap<String, i64>>(&kv.value) else {
            continue;
        };
        for (group, b) in per_node {
            *sum.entry(group).or_insert(0) += b;
        }
    }
    Ok(sum)
}

/// Registered groups ordered for placement: least data first, ties by name.
pub fn least_data_first(node: &ClusterNode, meta: &dyn MetaStore) -> Result<Vec<String>> {
    let names: Vec<String> = list(meta)?.into_keys().collect();
    let ctl = node.control().clone();
    let bytes = node
        .block_on(async move { bytes(&ctl).await })
        .map_err(StorageError::Unavailable)?
        .map_err(|e| StorageError::Unavailable(e.to_string()))?;
    Ok(order(names, &bytes))
}

fn order(names: Vec<String>, bytes: &BTreeMap<String, i64>) -> Vec<String> {
    let mut v: Vec<(i64, String)> = (names.into_iter())
        .map(|n| (bytes.get(&n).copied().unwrap_or(0), n))
        .collect();
    v.sort();
    v.into_iter().map(|(_, n)| n).collect()
}

/// The group of each of `n` new partitions: round the groups, least data first, so the
/// initial partitions are spread evenly and the emptiest groups get the extra ones.
pub fn spread(n: usize, ordered: &[String]) -> Vec<String> {
    match ordered.is_empty() {
        true => vec![DEFAULT_GROUP.to_string(); n],
        false => (0..n).map(|i| ordered[i % ordered.len()].clone()).collect(),
    }
}

/// The groups of a split's two children: each, the larger first, goes to the group with the
/// least data, counting the parent's bytes out of its group and each child placed in (ties:
/// the parent's group, so balanced groups move nothing, then by name). `bytes`: each group's
/// bytes (what [`bytes`] sums); `names`: the registered groups.
pub fn place_children(
    names: &[String],
    bytes: &BTreeMap<String, i64>,
    parent: (&str, i64),
    children: [i64; 2],
) -> [String; 2] {
    let mut load: BTreeMap<&str, i64> = (names.iter())
        .map(|n| (n.as_str(), bytes.get(n).copied().unwrap_or(0).max(0)))
        .collect();
    let own = load.entry(parent.0).or_insert(0);
    *own = (*own - parent.1.max(0)).max(0);
    let mut order = [0, 1];
    if children[1] > children[0] {
        order = [1, 0];
    }
    let mut out = [String::new(), String::new()];
    for i in order {
        let g = (load.iter())
            .min_by_key(|(n, b)| (**b, **n != parent.0, **n))
            .map(|(n, _)| *n)
            .unwrap_or(parent.0);
        *load.entry(g).or_insert(0) += children[i].max(0);
        out[i] = g.to_string();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_connection_strings() {
        assert!(check_name("default").is_ok());
        assert!(check_name("g-2_b").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("a b").is_err());
        assert!(check_name(&"x".repeat(65)).is_err());
        let s = GroupSpec::from_connection_string("postgresql://u:pw@10.0.0.1:5433/db").unwrap();
        assert_eq!(s.hosts, vec!["10.0.0.1:5433"]);
        assert_eq!((s.user.as_str(), s.dbname.as_str()), ("u", "db"));
        let two = GroupSpec {
            hosts: vec!["a:1".into(), "b:2".into()],
            ..s.clone()
        };
        let c = two.connection_string();
        assert!(c.contains("host='a,b' port='1,2'"), "{c}");
        assert!(c.contains("target_session_attrs=read-write"), "{c}");
        let back = GroupSpec::from_connection_string(&c).unwrap();
        assert_eq!(back, two);
        assert!(!s.connection_string().contains("target_session_attrs"));
        let bad = GroupSpec {
            hosts: vec!["nohost".into()],
            ..s
        };
        assert!(bad.check().is_err());
    }

    #[test]
    fn split_children_go_to_the_least_data() {
        let names = vec!["a".to_string(), "b".into()];
        // Parent (600) in a, b empty: the larger child stays (a is 0 without the parent,
        // a tie the parent's group wins), the other goes to b.
        let bytes = BTreeMap::from([("a".to_string(), 600)]);
        assert_eq!(
            place_children(&names, &bytes, ("a", 600), [400, 200]),
            ["a", "b"]
        );
        // a holds 1,000 more: both children go to b.
        let bytes = BTreeMap::from([("a".to_string(), 1600)]);
        assert_eq!(
            place_children(&names, &bytes, ("a", 600), [300, 300]),
            ["b", "b"]
        );
        // Equal without the parent: one child each.
        let bytes = BTreeMap::from([("a".to_string(), 700), ("b".to_string(), 500)]);
        let both =
            |bytes: &BTreeMap<String, i64>| place_children(&names, bytes, ("a", 200), [100, 100]);
        assert_eq!(both(&bytes), ["a", "b"]);
        // The parent's group holds less even with both children: both stay.
        let bytes = BTreeMap::from([("a".to_string(), 600), ("b".to_string(), 900)]);
        assert_eq!(both(&bytes), ["a", "a"]);
        // One group: nothing moves.
        let one = vec!["a".to_string()];
        assert_eq!(
            place_children(&one, &bytes, ("a", 200), [100, 100]),
            ["a", "a"]
        );
    }

    #[test]
    fn least_data_first_then_by_name_and_spread() {
        let names = vec!["b".to_string(), "a".into(), "c".into()];
        let bytes = BTreeMap::from([("a".to_string(), 500), ("b".to_string(), 10)]);
        let o = order(names, &bytes);
        assert_eq!(o, vec!["c", "b", "a"]);
        assert_eq!(spread(4, &o), vec!["c", "b", "a", "c"]);
        assert_eq!(spread(2, &[]), vec![DEFAULT_GROUP, DEFAULT_GROUP]);
    }
}
