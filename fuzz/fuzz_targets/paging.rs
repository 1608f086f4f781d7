//! Paging states come back from clients: decoding must refuse garbage, and what it accepts must
//! encode back to the same bytes.
#![no_main]

#[path = "../bodies/paging.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
