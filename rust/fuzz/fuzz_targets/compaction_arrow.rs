#![no_main]
//! Compaction's Arrow kernels against phase one's records and Spark's aggregation. See `pulsarkit::fuzz::fuzz_compaction_arrow`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pulsarkit::fuzz::fuzz_compaction_arrow(data);
});
