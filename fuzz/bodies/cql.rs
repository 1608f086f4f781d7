//! The CQL lexer and parser on arbitrary text: errors, never panics or stack overflows.
//!
//! The body of fuzz target `cql` (`fuzz_targets/cql.rs`), shared with its bounded run in
//! `cargo test` (`tests/fuzz_bounded.rs`).

/// Runs one input: returns, or panics on a finding.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = ringgate::cql::lexer::tokenize(text);
    let _ = ringgate::cql::parse(text);
    let _ = ringgate::cql::parse_many(text);
}
