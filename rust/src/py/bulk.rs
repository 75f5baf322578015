//! Arrow bindings: each function takes any Arrow array (PyCapsule interface) of entry bytes and
//! returns a pyarrow RecordBatch, doing all per-row work in one GIL-released native call.
use super::errors::IntoPyResult;
use crate::bulk::compaction::PositionedEntries;
use crate::bulk::{self, assemble, EntryColumn};
use crate::codec::compression::DEFAULT_DECOMPRESSION_LIMIT;
use crate::error::{Error, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch, StringArray};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_arrow::{PyArray, PyRecordBatch};

pub(super) fn run<'py>(
    py: Python<'py>,
    entries: PyArray,
    f: impl FnOnce(&EntryColumn) -> Result<RecordBatch> + Send,
) -> PyResult<Bound<'py, PyAny>> {
    let (array, _field) = entries.into_inner();
    let col = EntryColumn::from_array(array.as_ref()).py_err(py)?;
    let out = py.detach(|| f(&col)).py_err(py)?;
    PyRecordBatch::new(out).into_pyarrow(py)
}

/// A binding `name(entries)` for a kernel that takes nothing but the column.
macro_rules! column_kernel {
    ($name:ident, $kernel:path) => {
        #[pyfunction]
        fn $name<'py>(py: Python<'py>, entries: PyArray) -> PyResult<Bound<'py, PyAny>> {
            $crate::py::bulk::run(py, entries, |c| Ok($kernel(c)))
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
        "binary" => run(py, entries, |c| Ok(bulk::strip_broker_entry_metadata(c))),
        "binary_view" => run(py, entries, |c| Ok(bulk::strip_broker_entry_metadata_view(c))),
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

/// A message read's batch: `(rows, per_entry)` (`bulk::assemble::assemble_messages`), all of it with
/// the GIL released. `txn`: the known transactions' `(most, least, state)` arrays, sorted, and the
/// state of any other; `time_filters`: `(column, op, values)`.
#[pyfunction]
#[pyo3(signature = (entries, ledger_ids, entry_ids, topic, partition, markers, txn, committed, time_filters,
    max_uncompressed_size=DEFAULT_DECOMPRESSION_LIMIT, threads=1))]
#[allow(clippy::too_many_arguments)]
fn bulk_assemble_messages<'py>(
    py: Python<'py>,
    entries: PyArray,
    ledger_ids: PyArray,
    entry_ids: PyArray,
    topic: Option<String>,
    partition: i32,
    markers: bool,
    txn: (PyArray, PyArray, PyArray, String),
    committed: bool,
    time_filters: Vec<(String, String, Vec<i64>)>,
    max_uncompressed_size: usize,
    threads: usize,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let (e, l, n) = (entries.into_inner().0, ledger_ids.into_inner().0, entry_ids.into_inner().0);
    let input = PositionedEntries::new(e.as_ref(), l.as_ref(), n.as_ref()).py_err(py)?;
    let (most, least, states, unknown) = txn;
    let (most, least, states) = (most.into_inner().0, least.into_inner().0, states.into_inner().0);
    fn int64<'a>(a: &'a dyn Array, what: &str) -> crate::error::Result<&'a [i64]> {
        a.as_primitive_opt::<Int64Type>()
            .map(|a| a.values().as_ref())
            .ok_or_else(|| Error::invalid(format!("{what} must be an Arrow int64 array, not {}", a.data_type())))
    }
    let states = states
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| Error::invalid("the transaction states must be an Arrow string array"))
        .py_err(py)?;
    let txn = assemble::TxnStates::new(
        int64(most.as_ref(), "the transactions' most bits").py_err(py)?,
        int64(least.as_ref(), "the transactions' least bits").py_err(py)?,
        states,
        &unknown,
    )
    .py_err(py)?;
    let time_filters = time_filters
        .into_iter()
        .map(|(c, op, v)| assemble::TimeFilter::new(&c, &op, v))
        .collect::<crate::error::Result<Vec<_>>>()
        .py_err(py)?;
    let cx = assemble::BatchContext {
        topic: topic.as_deref(),
        partition,
        markers,
        txn,
        committed,
        time_filters: &time_filters,
        limit: max_uncompressed_size,
        threads: threads.max(1),
    };
    let (rows, info) = py.detach(|| assemble::assemble_messages(&input, &cx)).py_err(py)?;
    Ok((PyRecordBatch::new(rows).into_pyarrow(py)?, PyRecordBatch::new(info).into_pyarrow(py)?))
}

/// The index of the first entry with a transaction id (`bulk::first_transactional`), or None.
#[pyfunction]
fn bulk_first_transactional(py: Python<'_>, entries: PyArray) -> PyResult<Option<usize>> {
    let (array, _field) = entries.into_inner();
    let col = EntryColumn::from_array(array.as_ref()).py_err(py)?;
    Ok(py.detach(|| bulk::first_transactional(&col)))
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
        bulk_decode_metadata, bulk_explode_messages, bulk_assemble_messages, bulk_json_lines, bulk_first_transactional);
    Ok(())
}
