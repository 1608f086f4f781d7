//! Cluster ownership with real processes (issue 17): engines opened in this process exactly
//! as `ringgate serve` opens them in cluster mode (`server::startup::open` with `cluster.*`
//! settings), over one real etcd (one per test, `tests/cluster_control/support.rs`) and one
//! real PostgreSQL (one per test binary, a database per test, `tests/storage_contract/pg.rs`).
//! Without the binaries the tests print SKIPPED and pass, unless RINGGATE_REQUIRE_ETCD /
//! RINGGATE_REQUIRE_POSTGRES is set.
#![allow(dead_code)]

#[path = "../common/mod.rs"]
mod common;
#[path = "../cluster_control/support.rs"]
mod etcd;
mod groups;
mod kill9;
mod pause;
#[path = "../storage_contract/pg.rs"]
mod pg;
mod ready;
mod rejoin;
mod reload;
#[path = "../shared/mod.rs"]
mod shared;
mod splits;
mod support;
mod takeover;
