#![no_main]
//! Bookie entries under every digest type: parse, verify, detect, single-byte changes. See `pulsarkit::fuzz::fuzz_bookie_entry`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pulsarkit::fuzz::fuzz_bookie_entry(data);
});
