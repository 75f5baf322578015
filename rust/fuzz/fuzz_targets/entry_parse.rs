#![no_main]
//! Entry layout, checksum, PIP-70 peek/strip/add, metadata scan vs full decode, messages.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pulsarkit::fuzz::fuzz_entry_parse(data);
});
