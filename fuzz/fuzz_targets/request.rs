//! Request bodies of every opcode and version (QUERY, EXECUTE, BATCH, STARTUP, ...), with the
//! header built from the first bytes so the fuzzer need not find a valid envelope first.
#![no_main]

#[path = "../bodies/request.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
