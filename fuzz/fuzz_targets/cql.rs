//! The CQL lexer and parser on arbitrary text: errors, never panics or stack overflows.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = ringgate::cql::lexer::tokenize(text);
    let _ = ringgate::cql::parse(text);
    let _ = ringgate::cql::parse_many(text);
});
