#![no_main]
//! Batch splitter: `[i32 count][uncompressed batch]`, checked against append_record and entry_messages.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pulsarkit::fuzz::fuzz_batch_decode(data);
});
