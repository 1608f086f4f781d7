//! The stored row codec and storage keys: whatever bytes a row value or key holds, decoding
//! returns an error, never panics (a corrupt record must not take the server down).
#![no_main]

#[path = "../bodies/row.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
