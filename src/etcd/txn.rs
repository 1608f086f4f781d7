//! Transactions (`/v3/kv/txn`): compares, then the success or the failure operations, as one
//! atomic step of etcd's Raft log. JSON shapes follow etcd's `etcdserverpb` messages in the
//! proto3 JSON mapping (int64 as strings, bytes as base64, zero values omitted).

use super::b64;
use serde_json::{json, Value};

/// etcd refuses a transaction with more operations than this (`--max-txn-ops`, default 128).
pub const MAX_TXN_OPS: usize = 128;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Equal,
    NotEqual,
    Greater,
    Less,
}

/// What a compare looks at. A missing key has version, create and mod revision 0 and no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Version(i64),
    CreateRevision(i64),
    ModRevision(i64),
    Value(Vec<u8>),
    Lease(i64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compare {
    pub key: Vec<u8>,
    pub cmp: Cmp,
    pub target: Target,
}

impl Compare {
    /// The key does not exist.
    pub fn absent(key: impl Into<Vec<u8>>) -> Compare {
        Compare {
            key: key.into(),
            cmp: Cmp::Equal,
            target: Target::CreateRevision(0),
        }
    }
    /// The key was last written at `rev` (0: the key does not exist).
    pub fn mod_revision(key: impl Into<Vec<u8>>, rev: i64) -> Compare {
        Compare {
            key: key.into(),
            cmp: Cmp::Equal,
            target: Target::ModRevision(rev),
        }
    }
    pub fn value(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Compare {
        Compare {
            key: key.into(),
            cmp: Cmp::Equal,
            target: Target::Value(value.into()),
        }
    }
    pub fn lease(key: impl Into<Vec<u8>>, lease: i64) -> Compare {
        Compare {
            key: key.into(),
            cmp: Cmp::Equal,
            target: Target::Lease(lease),
        }
    }

    fn to_json(&self) -> Value {
        let result = match self.cmp {
            Cmp::Equal => "EQUAL",
            Cmp::NotEqual => "NOT_EQUAL",
            Cmp::Greater => "GREATER",
            Cmp::Less => "LESS",
        };
        let (target, field, operand) = match &self.target {
            Target::Version(v) => ("VERSION", "version", json!(v.to_string())),
            Target::CreateRevision(v) => ("CREATE", "create_revision", json!(v.to_string())),
            Target::ModRevision(v) => ("MOD", "mod_revision", json!(v.to_string())),
            Target::Value(v) => ("VALUE", "value", json!(b64::encode(v))),
            Target::Lease(v) => ("LEASE", "lease", json!(v.to_string())),
        };
        json!({"key": b64::encode(&self.key), "result": result, "target": target, field: operand})
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `lease` 0: not attached to a lease.
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        lease: i64,
    },
    /// `range_end` None: the key alone.
    Delete {
        key: Vec<u8>,
        range_end: Option<Vec<u8>>,
    },
    Get {
        key: Vec<u8>,
    },
}

impl Op {
    pub fn put(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>, lease: i64) -> Op {
        Op::Put {
            key: key.into(),
            value: value.into(),
            lease,
        }
    }
    pub fn delete(key: impl Into<Vec<u8>>) -> Op {
        Op::Delete {
            key: key.into(),
            range_end: None,
        }
    }
    pub fn get(key: impl Into<Vec<u8>>) -> Op {
        Op::Get { key: key.into() }
    }

    /// Bytes of keys and values (what counts against etcd's request size limit).
    pub fn payload_bytes(&self) -> usize {
        match self {
            Op::Put { key, value, .. } => key.len() + value.len(),
            Op::Delete { key, range_end } => key.len() + range_end.as_ref().map_or(0, Vec::len),
            Op::Get { key } => key.len(),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Op::Put { key, value, lease } => json!({"request_put": {
                "key": b64::encode(key), "value": b64::encode(value), "lease": lease.to_string()}}),
            Op::Delete { key, range_end } => {
                let mut r = json!({"key": b64::encode(key)});
                if let Some(end) = range_end {
                    r["range_end"] = json!(b64::encode(end));
                }
                json!({ "request_delete_range": r })
            }
            Op::Get { key } => json!({"request_range": {"key": b64::encode(key)}}),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Txn {
    pub compare: Vec<Compare>,
    pub success: Vec<Op>,
    pub failure: Vec<Op>,
}

impl Txn {
    pub fn when(compare: Vec<Compare>) -> Txn {
        Txn {
            compare,
            ..Txn::default()
        }
    }
    pub fn then(mut self, ops: Vec<Op>) -> Txn {
        self.success = ops;
        self
    }
    pub fn otherwise(mut self, ops: Vec<Op>) -> Txn {
        self.failure = ops;
        self
    }

    pub(super) fn to_json(&self) -> Value {
        let list = |ops: &[Op]| ops.iter().map(Op::to_json).collect::<Vec<_>>();
        json!({
            "compare": self.compare.iter().map(Compare::to_json).collect::<Vec<_>>(),
            "success": list(&self.success),
            "failure": list(&self.failure),
        })
    }
}
