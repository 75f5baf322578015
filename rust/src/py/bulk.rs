//! Arrow bindings: each function takes any Arrow array (PyCapsule interface) of entry bytes and
//! returns a pyarrow RecordBatch, doing all per-row work in one GIL-released native call.
use super::errors::IntoPyResult;
use crate::bulk::{self, EntryColumn};
use crate::codec::compression::DEFAULT_DECOMPRESSION_LIMIT;
use crate::error::Error;
use arrow_array::RecordBatch;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_arrow::{PyArray, PyRecordBatch};

pub(super) fn run<'py>(
    py: Python<'py>,
    entries: PyArray,
    f: impl FnOnce(&EntryColumn) -> RecordBatch + Send,
) -> PyResult<Bound<'py, PyAny>> {
    let (array, _field) = entries.into_inner();
    let col = EntryColumn::from_array(array.as_ref()).py_err(py)?;
    let out = py.detach(|| f(&col));
    PyRecordBatch::new(out).into_pyarrow(py)
}

/// A binding `name(entries)` for a kernel that takes nothing but the column.
macro_rules! column_kernel {
    ($name:ident, $kernel:path) => {
        #[pyfunction]
        fn $name<'py>(py: Python<'py>, entries: PyArray) -> PyResult<Bound<'py, PyAny>> {
            $crate::py::bulk::run(py, entries, $kernel)
        }
    };
}
pub(super) use column_kernel;

column_kernel!(bulk_verify_checksums, bulk::verify_checksums);
column_kernel!(bulk_peek_broker_entry_metadata, bulk::peek_broker_entry_metadata);

#[pyfunction]
#[pyo3(signature = (entries, output="binary"))]
fn bulk_strip_broker_entry_metadata<'py>(
    py: Python<'py>,
    entries: PyArray,
    output: &str,
) -> PyResult<Bound<'py, PyAny>> {
    match output {
        "binary" => run(py, entries, bulk::strip_broker_entry_metadata),
        "binary_view" => run(py, entries, bulk::strip_broker_entry_metadata_view),
        other => Err(Error::invalid(format!("output must be 'binary' or 'binary_view', not {other:?}"))).py_err(py),
    }
}

#[pyfunction]
#[pyo3(signature = (entries, verify_checksum=false))]
fn bulk_decode_metadata<'py>(py: Python<'py>, entries: PyArray, verify_checksum: bool) -> PyResult<Bound<'py, PyAny>> {
    run(py, entries, |c| bulk::decode_metadata(c, verify_checksum))
}

#[pyfunction]
#[pyo3(signature = (entries, include_compacted_out=false, verify_checksum=true, max_uncompressed_size=DEFAULT_DECOMPRESSION_LIMIT))]
fn bulk_explode_messages<'py>(
    py: Python<'py>,
    entries: PyArray,
    include_compacted_out: bool,
    verify_checksum: bool,
    max_uncompressed_size: usize,
) -> PyResult<Bound<'py, PyAny>> {
    run(py, entries, |c| bulk::explode_messages(c, include_compacted_out, verify_checksum, max_uncompressed_size))
}

/// A batch of the message schema as JSON lines (bytes), rendered with the GIL released.
#[pyfunction]
fn bulk_json_lines<'py>(py: Python<'py>, batch: PyRecordBatch) -> PyResult<Bound<'py, PyBytes>> {
    let batch = batch.into_inner();
    let out = py.detach(|| bulk::json::json_lines(&batch)).py_err(py)?;
    Ok(PyBytes::new(py, &out))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_all!(m, fn bulk_verify_checksums, bulk_peek_broker_entry_metadata, bulk_strip_broker_entry_metadata,
        bulk_decode_metadata, bulk_explode_messages, bulk_json_lines);
    Ok(())
}
