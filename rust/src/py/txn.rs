//! Transaction-log bindings (PIP-160): packing a batch of serialized records into one entry, splitting
//! an entry back into records, and the per-column record kernels.
use super::buffer::ByteBuffer;
use super::bulk::column_kernel;
use super::errors::IntoPyResult;
use crate::bulk::txn;
use crate::codec::txn::{batched_entry_size, pack_batched_entry, split_entry};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_arrow::PyArray;

/// One batched entry (`0E 01 00 01` + `Batched...Entry`) from serialized records, in one copy.
#[pyfunction]
fn pack_batched_txn_entry<'py>(py: Python<'py>, records: Vec<ByteBuffer<'py>>) -> PyResult<Bound<'py, PyBytes>> {
    let slices = || records.iter().map(|r| &**r);
    let mut out = Vec::with_capacity(batched_entry_size(slices()));
    pack_batched_entry(slices(), &mut out);
    Ok(PyBytes::new(py, &out))
}

/// `(batched, [record bytes, ...])` of one transaction-log or pending-ack entry.
#[pyfunction]
fn split_txn_entry<'py>(py: Python<'py>, data: ByteBuffer<'py>) -> PyResult<(bool, Vec<Bound<'py, PyBytes>>)> {
    let d = &*data;
    let e = split_entry(d).py_err(py)?;
    Ok((e.batched, e.records.iter().map(|r| PyBytes::new(py, &d[r.clone()])).collect()))
}

column_kernel!(bulk_explode_transaction_log, txn::explode_transaction_log);
column_kernel!(bulk_explode_pending_ack_log, txn::explode_pending_ack_log);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_all!(m, fn pack_batched_txn_entry, split_txn_entry, bulk_explode_transaction_log,
        bulk_explode_pending_ack_log);
    Ok(())
}
