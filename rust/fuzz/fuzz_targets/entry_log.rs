#![no_main]
//! See `pulsarkit::fuzz::fuzz_entry_log`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pulsarkit::fuzz::fuzz_entry_log(data);
});
