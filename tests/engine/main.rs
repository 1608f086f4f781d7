//! The engine test tier: the engine opened in-process with the server's own startup wiring
//! (`ringgate::server::startup::open`) and a manual clock, CQL text executed through the API
//! the connections use. Time-dependent behaviour (TTL expiry, gc_grace, throttling) is tested
//! by moving the clock, never by sleeping. One file per behaviour; one test binary (each
//! links the whole crate).

mod derived_sizes;
mod equal_clustering;
mod flat_scan;
mod gc_grace;
mod index_build;
#[allow(dead_code)]
#[path = "../storage_contract/pg.rs"]
mod pg;
mod point_plan;
mod point_reads;
mod prepared;
mod schema_diff;
#[path = "../shared/mod.rs"]
mod shared;
mod stored_types;
mod support;
mod throttle;
mod ttl;
