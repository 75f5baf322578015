#![no_main]
//! An entry log scanned into Arrow batches, copied and mapped, against the plain record scan. See `pulsarkit::fuzz::fuzz_entry_log_arrow`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pulsarkit::fuzz::fuzz_entry_log_arrow(data);
});
