#![no_main]
//! Every bulk Arrow kernel against the single-entry functions, row by row.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pulsarkit::fuzz::fuzz_bulk(data);
});
