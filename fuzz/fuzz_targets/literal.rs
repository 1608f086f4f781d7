//! Literal parsing and value validation: a CQL constant of some type is parsed to bytes, which
//! must then validate and print; arbitrary bytes are validated and printed for every type.
#![no_main]

#[path = "../bodies/literal.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
