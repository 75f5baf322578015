//! The one conversion of a byte argument: bytes are borrowed from `bytes`, `bytearray`, `memoryview`
//! or any C-contiguous byte buffer, never copied (extracting a `Vec<u8>` would go through the
//! sequence protocol one byte at a time).
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::ops::Deref;

/// Single-entry work on inputs of at least this size releases the GIL; below it the release costs
/// more than it frees.
const DETACH_THRESHOLD: usize = 64 * 1024;

/// Borrowed input bytes; a binding takes `data: ByteBuffer<'_>` and uses it as a `&[u8]`.
pub enum ByteBuffer<'py> {
    Bytes(Bound<'py, PyBytes>),
    Buffer(PyBuffer<u8>),
}

impl<'py> FromPyObject<'_, 'py> for ByteBuffer<'py> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(b) = obj.cast::<PyBytes>() {
            return Ok(ByteBuffer::Bytes(b.to_owned()));
        }
        let buf = PyBuffer::<u8>::get(&obj).map_err(|_| {
            PyTypeError::new_err(format!(
                "expected bytes, bytearray, memoryview or another byte buffer, got {}",
                obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
            ))
        })?;
        if !buf.is_c_contiguous() {
            return Err(PyTypeError::new_err("byte buffer must be C-contiguous"));
        }
        Ok(ByteBuffer::Buffer(buf))
    }
}

impl Deref for ByteBuffer<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            ByteBuffer::Bytes(b) => b.as_bytes(),
            // SAFETY: a C-contiguous buffer of u8 of len_bytes bytes, kept alive (and its exporter
            // locked against resizing) by the PyBuffer this borrows from.
            ByteBuffer::Buffer(b) => unsafe { std::slice::from_raw_parts(b.buf_ptr() as *const u8, b.len_bytes()) },
        }
    }
}

impl ByteBuffer<'_> {
    /// `f` over the bytes, with the GIL released when there are enough of them for the release to pay
    /// (`DETACH_THRESHOLD`); batch work detaches always.
    pub fn detach_if_large<'a, T: Send>(&'a self, py: Python<'_>, f: impl FnOnce(&'a [u8]) -> T + Send) -> T {
        let s: &'a [u8] = self;
        if s.len() >= DETACH_THRESHOLD {
            py.detach(|| f(s))
        } else {
            f(s)
        }
    }
}
