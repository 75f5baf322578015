#![no_main]
//! The snappy decompressor: `[u24 declared size][compressed]`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pulsarkit::fuzz::fuzz_decompress_codec(pulsarkit::codec::compression::Codec::Snappy, data);
});
