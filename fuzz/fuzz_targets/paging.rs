//! Paging states come back from clients: decoding must refuse garbage, and what it accepts must
//! encode back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(again) = ringgate::query::select::paging_state_roundtrip(data) {
        assert_eq!(&again[..], data);
    }
});
