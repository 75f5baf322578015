//! CRC-32C (Castagnoli), the checksum of Pulsar frames and BookKeeper's CRC32C digest.
//! crc-fast picks the widest carry-less-multiply path the CPU has at run time.
use crc_fast::{CrcAlgorithm, Digest};

/// Standard CRC-32C of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(data)
}

/// Continues a finished CRC over more bytes, like circe's `resumeChecksum`:
/// `crc32c_resume(crc32c(a), b) == crc32c(a ++ b)`, and a `prev` of 0 starts afresh.
pub fn crc32c_resume(prev: u32, data: &[u8]) -> u32 {
    if prev == 0 {
        return crc32c(data);
    }
    // crc-fast keeps the register before the final xor, so undo that xor to resume.
    let mut d = Digest::new_with_init_state(CrcAlgorithm::Crc32Iscsi, u64::from(!prev));
    d.update(data);
    d.finalize() as u32
}

/// The code path the CPU dispatch chose (for build_info and benchmark reports).
pub fn crc32c_implementation() -> String {
    crc_fast::get_calculator_target(CrcAlgorithm::Crc32Iscsi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors() {
        assert_eq!(crc32c(b"data"), 0xaed8_7dd1);
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b"datadata"), 0x9e84_fa2f);
        assert_eq!(crc32c_resume(crc32c(b"data"), b"data"), 0x9e84_fa2f);
        assert_eq!(crc32c(b""), 0);
    }
}
