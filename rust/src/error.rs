//! One error type for the whole core. Every variant that comes from input bytes says what was
//! expected and where, so the Python exception can carry the offset; file-system failures keep the
//! path and the OS error number. The bindings turn each variant into one Python exception class, in
//! one place (`py/errors.rs`).
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Bytes that do not follow the format. `offset` is from the start of the buffer (or file) handed in.
    #[error("corrupt input at offset {offset}: {what}")]
    Corrupt { offset: u64, what: String },
    /// A stored CRC32C that does not match the bytes it covers.
    #[error("checksum mismatch at offset {offset}: stored crc32c 0x{stored:08x}, computed 0x{computed:08x}")]
    ChecksumMismatch { offset: u64, stored: u32, computed: u32 },
    /// A bookie entry whose stored digest does not match its header and payload
    /// (`DigestManager.verifyDigestAndReturnData`).
    #[error(
        "{digest} digest mismatch for ledger {ledger_id} entry {entry_id}: stored {}, computed {}",
        hex(stored),
        hex(computed)
    )]
    DigestMismatch {
        digest: &'static str,
        ledger_id: i64,
        entry_id: i64,
        offset: u64,
        stored: Vec<u8>,
        computed: Vec<u8>,
    },
    /// A compression type that Pulsar does not define (or one this build does not know).
    #[error("unsupported compression type {0}")]
    UnsupportedCompression(String),
    /// A compressed payload that does not inflate to exactly the declared size.
    #[error("{codec} decompression failed: {what}")]
    Decompression { codec: &'static str, what: String },
    /// A declared or produced size above the configured ceiling (decompression bombs, huge frames).
    #[error("{what} of {size} bytes exceeds the limit of {limit} bytes")]
    LimitExceeded { what: String, size: u64, limit: u64 },
    /// A caller passed something that cannot be encoded or done.
    #[error("{0}")]
    InvalidArgument(String),
    /// The file system refused (kept as kind, errno and message so the error stays comparable).
    #[error("{}{message}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    Io { path: Option<PathBuf>, kind: io::ErrorKind, errno: Option<i32>, message: String },
}

pub type Result<T> = std::result::Result<T, Error>;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Error {
    pub fn corrupt(offset: usize, what: impl Into<String>) -> Self {
        Error::Corrupt { offset: offset as u64, what: what.into() }
    }

    /// Corruption at a file offset.
    pub fn corrupt_at(offset: u64, what: impl Into<String>) -> Self {
        Error::Corrupt { offset, what: what.into() }
    }

    pub fn invalid(what: impl Into<String>) -> Self {
        Error::InvalidArgument(what.into())
    }

    /// A file-system error on `path`.
    pub fn io(path: &Path, source: io::Error) -> Self {
        Error::from(source).with_path(path)
    }

    /// The same I/O error, naming `path` (other errors are returned unchanged).
    pub fn with_path(self, path: &Path) -> Self {
        match self {
            Error::Io { kind, errno, message, .. } => {
                Error::Io { path: Some(path.to_path_buf()), kind, errno, message }
            }
            other => other,
        }
    }

    /// The byte offset the error refers to, when it has one.
    pub fn offset(&self) -> Option<u64> {
        match self {
            Error::Corrupt { offset, .. }
            | Error::ChecksumMismatch { offset, .. }
            | Error::DigestMismatch { offset, .. } => Some(*offset),
            _ => None,
        }
    }

    /// The same error, with its offset moved by `base` (for errors found inside a sub-slice).
    pub fn shifted(self, base: usize) -> Self {
        let base = base as u64;
        match self {
            Error::Corrupt { offset, what } => Error::Corrupt { offset: offset + base, what },
            Error::ChecksumMismatch { offset, stored, computed } => {
                Error::ChecksumMismatch { offset: offset + base, stored, computed }
            }
            other => other,
        }
    }
}

impl From<io::Error> for Error {
    fn from(source: io::Error) -> Self {
        Error::Io { path: None, kind: source.kind(), errno: source.raw_os_error(), message: source.to_string() }
    }
}
