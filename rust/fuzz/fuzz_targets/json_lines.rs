#![no_main]
//! The message read's rows as JSON lines, read back by a strict JSON reader. See `pulsarkit::fuzz::fuzz_json_lines`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pulsarkit::fuzz::fuzz_json_lines(data);
});
