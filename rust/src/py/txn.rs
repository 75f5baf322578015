//! Transaction-log bindings (PIP-160): packing a batch of serialized records into one entry, splitting
//! an entry back into records, and the per-column record kernels.
use super::bulk::run;
use super::codec::ByteInput;
use super::errors::IntoPyResult;
use crate::bulk::txn;
use crate::codec::txn::{batched_entry_size, pack_batched_entry, split_entry};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_arrow::PyArray;

/// One batched entry (`0E 01 00 01` + `Batched...Entry`) from serialized records, in one copy.
#[pyfunction]
fn pack_batched_txn_entry<'py>(py: Python<'py>, records: Vec<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyBytes>> {
    let inputs = records.iter().map(ByteInput::new).collect::<PyResult<Vec<_>>>()?;
    let slices: Vec<&[u8]> = inputs.iter().map(|i| i.as_slice()).collect();
    let mut out = Vec::with_capacity(batched_entry_size(slices.iter().copied()));
    pack_batched_entry(slices.iter().copied(), &mut out);
    Ok(PyBytes::new(py, &out))
}

/// `(batched, [record bytes, ...])` of one transaction-log or pending-ack entry.
#[pyfunction]
fn split_txn_entry<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<(bool, Vec<Bound<'py, PyBytes>>)> {
    let input = ByteInput::new(data)?;
    let d = input.as_slice();
    let e = split_entry(d).py_err(py)?;
    Ok((e.batched, e.records.iter().map(|r| PyBytes::new(py, &d[r.clone()])).collect()))
}

#[pyfunction]
fn bulk_explode_transaction_log<'py>(py: Python<'py>, entries: PyArray) -> PyResult<Bound<'py, PyAny>> {
    run(py, entries, txn::explode_transaction_log)
}

#[pyfunction]
fn bulk_explode_pending_ack_log<'py>(py: Python<'py>, entries: PyArray) -> PyResult<Bound<'py, PyAny>> {
    run(py, entries, txn::explode_pending_ack_log)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pack_batched_txn_entry, m)?)?;
    m.add_function(wrap_pyfunction!(split_txn_entry, m)?)?;
    m.add_function(wrap_pyfunction!(bulk_explode_transaction_log, m)?)?;
    m.add_function(wrap_pyfunction!(bulk_explode_pending_ack_log, m)?)?;
    Ok(())
}
