//! The exception hierarchy, rooted at `pulsarkit.PulsarkitError` (a ValueError). Offsets, stored and
//! computed checksums travel as attributes so callers need not parse messages.
use crate::error::Error;
use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyType};
use pyo3::IntoPyObjectExt;

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
    DigestMismatchError,
    ChecksumMismatchError,
    "A bookie entry whose stored digest (CRC32C, CRC32 or HMAC-SHA1) does not match its header and payload."
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
    m.add("DigestMismatchError", py.get_type::<DigestMismatchError>())?;
    Ok(())
}

/// Converts a core error into the matching Python exception: the one place where that happens.
/// `offset` is an int (or None); `stored`/`computed` are ints for CRC32C and bytes for bookie
/// digests; I/O errors are `OSError(errno, strerror, filename)`, so Python picks the subclass
/// (`FileNotFoundError`, `PermissionError`, ...).
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let class = match &e {
        Error::Corrupt { .. } => py.get_type::<CorruptEntryError>(),
        Error::ChecksumMismatch { .. } => py.get_type::<ChecksumMismatchError>(),
        Error::DigestMismatch { .. } => py.get_type::<DigestMismatchError>(),
        Error::UnsupportedCompression(_) => py.get_type::<UnsupportedCompressionError>(),
        Error::Decompression { .. } => py.get_type::<DecompressionError>(),
        Error::LimitExceeded { .. } => py.get_type::<LimitExceededError>(),
        Error::InvalidArgument(_) => py.get_type::<PulsarkitError>(),
        Error::Io { path, errno, message, .. } => return os_error(py, path.as_deref(), *errno, message),
    };
    exception(class, e)
}

/// Frame-level corruption is reported as CorruptFrameError.
pub fn frame_to_py(py: Python<'_>, e: Error) -> PyErr {
    match e {
        Error::Corrupt { .. } => exception(py.get_type::<CorruptFrameError>(), e),
        other => to_py(py, other),
    }
}

/// The exception object of `class` for `e`, built whole: its message and every attribute the
/// error has are set before it is handed out, so no caller sees (or patches) a half-made one.
fn exception(class: Bound<'_, PyType>, e: Error) -> PyErr {
    let build = || -> PyResult<Bound<'_, PyAny>> {
        let py = class.py();
        let mut attrs = vec![("offset", e.offset().into_bound_py_any(py)?)];
        match &e {
            Error::ChecksumMismatch { stored, computed, .. } => {
                attrs.push(("stored", stored.into_bound_py_any(py)?));
                attrs.push(("computed", computed.into_bound_py_any(py)?));
            }
            Error::DigestMismatch { stored, computed, ledger_id, entry_id, .. } => {
                attrs.push(("stored", PyBytes::new(py, stored).into_any()));
                attrs.push(("computed", PyBytes::new(py, computed).into_any()));
                attrs.push(("ledger_id", ledger_id.into_bound_py_any(py)?));
                attrs.push(("entry_id", entry_id.into_bound_py_any(py)?));
            }
            _ => {}
        }
        let value = class.call1((e.to_string(),))?;
        for (name, v) in attrs {
            value.setattr(name, v)?;
        }
        Ok(value)
    };
    build().map_or_else(|failed| failed, PyErr::from_value)
}

fn os_error(py: Python<'_>, path: Option<&std::path::Path>, errno: Option<i32>, message: &str) -> PyErr {
    let name = path.map(|p| p.to_string_lossy().to_string());
    if let Some(code) = errno {
        let built = py
            .import("os")
            .and_then(|os| os.getattr("strerror")?.call1((code,)))
            .and_then(|msg| py.get_type::<PyOSError>().call1((code, msg, name.clone())));
        if let Ok(v) = built {
            return PyErr::from_value(v);
        }
    }
    match name {
        Some(n) => PyOSError::new_err(format!("{n}: {message}")),
        None => PyOSError::new_err(message.to_string()),
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

/// A core result of bytes as a Python `bytes` object (or the matching exception).
pub trait IntoPyBytes {
    fn py_bytes(self, py: Python<'_>) -> PyResult<Bound<'_, PyBytes>>;
}

impl<B: AsRef<[u8]>> IntoPyBytes for crate::error::Result<B> {
    fn py_bytes(self, py: Python<'_>) -> PyResult<Bound<'_, PyBytes>> {
        Ok(PyBytes::new(py, self.py_err(py)?.as_ref()))
    }
}
