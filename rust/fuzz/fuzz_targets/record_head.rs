#![no_main]
//! See `pulsarkit::fuzz::fuzz_record_head`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pulsarkit::fuzz::fuzz_record_head(data);
});
