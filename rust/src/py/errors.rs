//! The exception hierarchy, rooted at `pulsarkit.PulsarkitError` (a ValueError). Offsets, stored and
//! computed checksums travel as attributes so callers need not parse messages.
use crate::error::Error;
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(pulsarkit, PulsarkitError, PyValueError, "Root of every pulsarkit error.");
create_exception!(
    pulsarkit,
    CorruptEntryError,
    PulsarkitError,
    "Bytes that do not follow the expected format; `offset` says where."
);
create_exception!(
    pulsarkit,
    ChecksumMismatchError,
    CorruptEntryError,
    "A stored CRC32C does not match the bytes it covers."
);
create_exception!(pulsarkit, UnsupportedCompressionError, PulsarkitError, "A compression type Pulsar does not define.");
create_exception!(
    pulsarkit,
    DecompressionError,
    CorruptEntryError,
    "A payload that does not decompress to exactly its declared size."
);
create_exception!(
    pulsarkit,
    LimitExceededError,
    PulsarkitError,
    "A size above the configured limit (decompression bombs, oversized frames)."
);
create_exception!(
    pulsarkit,
    CorruptFrameError,
    CorruptEntryError,
    "A command frame stream that cannot be split into frames."
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("PulsarkitError", py.get_type::<PulsarkitError>())?;
    m.add("CorruptEntryError", py.get_type::<CorruptEntryError>())?;
    m.add("ChecksumMismatchError", py.get_type::<ChecksumMismatchError>())?;
    m.add("UnsupportedCompressionError", py.get_type::<UnsupportedCompressionError>())?;
    m.add("DecompressionError", py.get_type::<DecompressionError>())?;
    m.add("LimitExceededError", py.get_type::<LimitExceededError>())?;
    m.add("CorruptFrameError", py.get_type::<CorruptFrameError>())?;
    Ok(())
}

/// Converts a core error into the matching Python exception, with attributes set.
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let msg = e.to_string();
    let err = match &e {
        Error::Corrupt { .. } => CorruptEntryError::new_err(msg),
        Error::ChecksumMismatch { .. } => ChecksumMismatchError::new_err(msg),
        Error::UnsupportedCompression(_) => UnsupportedCompressionError::new_err(msg),
        Error::Decompression { .. } => DecompressionError::new_err(msg),
        Error::LimitExceeded { .. } => LimitExceededError::new_err(msg),
        Error::InvalidArgument(_) => PulsarkitError::new_err(msg),
    };
    let v = err.value(py);
    let _ = v.setattr("offset", e.offset());
    if let Error::ChecksumMismatch { stored, computed, .. } = e {
        let _ = v.setattr("stored", stored);
        let _ = v.setattr("computed", computed);
    }
    err
}

/// Frame-level corruption is reported as CorruptFrameError.
pub fn frame_to_py(py: Python<'_>, e: Error) -> PyErr {
    match e {
        Error::Corrupt { offset, .. } => {
            let err = CorruptFrameError::new_err(e.to_string());
            let _ = err.value(py).setattr("offset", offset);
            err
        }
        other => to_py(py, other),
    }
}

pub trait IntoPyResult<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for crate::error::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
