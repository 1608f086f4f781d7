//! The CQL lexer and parser on arbitrary text: errors, never panics or stack overflows.
#![no_main]

#[path = "../bodies/cql.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
