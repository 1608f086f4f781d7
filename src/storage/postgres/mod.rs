//! The PostgreSQL backend: ringgate's storage (`Store`, the per-partition contract and
//! `MetaStore`) in tables of one PostgreSQL database, through tokio-postgres.
//!
//! Files: `pool.rs` (connections, each driven by the thread waiting on it), `schema.rs`
//! (tables and their version), `errors.rs` (error mapping, the transaction wrapper), `scan.rs`
//! (gets, paged scans), `write.rs` (a transaction's writes to one table), `store.rs` (`Store`,
//! `MetaStore`), `handle.rs` (partition handles, snapshots, owner epochs), `commit_fn.rs` (a partition
//! commit as one call of a server-side function), `moving.rs` (what moving a partition to
//! another group reads and deletes).

mod commit_fn;
mod errors;
mod handle;
mod moving;
mod pool;
mod scan;
mod schema;
mod store;
mod write;

pub use store::{PgConfig, PostgresStore};

use crate::storage::Space;

const DATA: &str = "ringgate_data";
const SIZES: &str = "ringgate_sizes";

fn table_of(space: Space) -> &'static str {
    match space {
        Space::Data => DATA,
        Space::Sizes => SIZES,
        Space::Meta => "ringgate_meta",
    }
}
