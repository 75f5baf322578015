#![no_main]
//! Frame decoder fed whole and in random pieces: `[k][k split bytes][stream]`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pulsarkit::fuzz::fuzz_frame_decoder(data);
});
