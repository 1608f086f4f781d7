//! Paging states come back from clients: decoding must refuse garbage, and what it accepts must
//! encode back to the same bytes.
//!
//! The body of fuzz target `paging` (`fuzz_targets/paging.rs`), shared with its bounded run in
//! `cargo test` (`tests/fuzz_bounded.rs`).

/// Runs one input: returns, or panics on a finding.
pub fn run(data: &[u8]) {
    if let Some(again) = ringgate::query::select::paging_state_roundtrip(data) {
        assert_eq!(&again[..], data);
    }
}
