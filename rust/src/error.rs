//! One error type for the whole core. Every variant that comes from input bytes says what was
//! expected and where, so the Python exception can carry the offset.
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Bytes that do not follow the format. `offset` is from the start of the buffer handed in.
    Corrupt { offset: usize, what: String },
    /// A stored CRC32C that does not match the bytes it covers.
    ChecksumMismatch { offset: usize, stored: u32, computed: u32 },
    /// A compression type that Pulsar does not define (or one this build does not know).
    UnsupportedCompression(String),
    /// A compressed payload that does not inflate to exactly the declared size.
    Decompression { codec: &'static str, what: String },
    /// A declared or produced size above the configured ceiling (decompression bombs, huge frames).
    LimitExceeded { what: String, size: u64, limit: u64 },
    /// A caller passed something that cannot be encoded.
    InvalidArgument(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn corrupt(offset: usize, what: impl Into<String>) -> Self {
        Error::Corrupt { offset, what: what.into() }
    }

    /// The byte offset the error refers to, when it has one.
    pub fn offset(&self) -> Option<usize> {
        match self {
            Error::Corrupt { offset, .. } | Error::ChecksumMismatch { offset, .. } => Some(*offset),
            _ => None,
        }
    }

    /// The same error, with its offset moved by `base` (for errors found inside a sub-slice).
    pub fn shifted(self, base: usize) -> Self {
        match self {
            Error::Corrupt { offset, what } => Error::Corrupt { offset: offset + base, what },
            Error::ChecksumMismatch { offset, stored, computed } => {
                Error::ChecksumMismatch { offset: offset + base, stored, computed }
            }
            other => other,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Corrupt { offset, what } => write!(f, "corrupt input at offset {offset}: {what}"),
            Error::ChecksumMismatch { offset, stored, computed } => write!(
                f,
                "checksum mismatch at offset {offset}: stored crc32c 0x{stored:08x}, computed 0x{computed:08x}"
            ),
            Error::UnsupportedCompression(c) => write!(f, "unsupported compression type {c}"),
            Error::Decompression { codec, what } => write!(f, "{codec} decompression failed: {what}"),
            Error::LimitExceeded { what, size, limit } => {
                write!(f, "{what} of {size} bytes exceeds the limit of {limit} bytes")
            }
            Error::InvalidArgument(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for Error {}
