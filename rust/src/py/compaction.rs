//! Topic-compaction bindings: phase one's `LatestForKey` fed one Arrow batch of entries per call,
//! phase two writing the compacted ledger's entries per batch, and the last message position.
use super::buffer::ByteBuffer;
use super::errors::{IntoPyBytes, IntoPyResult};
use crate::bulk::compaction::{self as kernels, PositionedEntries};
use crate::codec::compaction::{self as core, BatchFormat, LatestForKey as CoreLatest, MessagePosition};
use crate::codec::compression::DEFAULT_DECOMPRESSION_LIMIT;
use crate::codec::proto::MessageIdData;
use crate::error::Result;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_arrow::{PyArray, PyRecordBatch};

/// Runs `f` over the positioned entry columns (checked in the core) with the GIL released.
fn with_positioned<T: Send>(
    py: Python<'_>,
    [entries, ledger_ids, entry_ids]: [PyArray; 3],
    f: impl FnOnce(&PositionedEntries) -> Result<T> + Send,
) -> PyResult<T> {
    let (e, l, n) = (entries.into_inner().0, ledger_ids.into_inner().0, entry_ids.into_inner().0);
    let input = PositionedEntries::new(e.as_ref(), l.as_ref(), n.as_ref()).py_err(py)?;
    py.detach(|| f(&input)).py_err(py)
}

fn batch_format(retained_only: bool) -> BatchFormat {
    if retained_only {
        BatchFormat::RetainedOnly
    } else {
        BatchFormat::Placeholders
    }
}

/// Phase one's map: the latest message per key.
#[pyclass(module = "pulsarkit._native", name = "LatestForKey")]
struct PyLatestForKey {
    inner: CoreLatest,
}

#[pymethods]
impl PyLatestForKey {
    #[new]
    #[pyo3(signature = (event_time_order=false))]
    fn new(event_time_order: bool) -> Self {
        PyLatestForKey { inner: CoreLatest::new(event_time_order) }
    }

    /// Adds every message of a batch of entries, in order (null entries are an error).
    #[pyo3(signature = (entries, ledger_ids, entry_ids, max_uncompressed_size=DEFAULT_DECOMPRESSION_LIMIT))]
    fn add_entries(
        &mut self,
        py: Python<'_>,
        entries: PyArray,
        ledger_ids: PyArray,
        entry_ids: PyArray,
        max_uncompressed_size: usize,
    ) -> PyResult<()> {
        let inner = &mut self.inner;
        with_positioned(py, [entries, ledger_ids, entry_ids], |input| {
            kernels::add_entries(inner, input, max_uncompressed_size)
        })
    }

    /// Inserts one retained key (a phase one computed elsewhere, e.g. aggregated on Spark).
    fn insert(&mut self, key: String, ledger_id: i64, entry_id: i64, batch_index: i32) {
        self.inner.insert(key, MessagePosition { ledger_id, entry_id, batch_index });
    }

    /// Retained keys as a RecordBatch (key, ledger_id, entry_id, batch_index), ordered by position.
    fn retained<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        PyRecordBatch::new(kernels::retained_batch(&self.inner)).into_pyarrow(py)
    }

    #[getter]
    fn messages(&self) -> u64 {
        self.inner.messages
    }

    #[getter]
    fn keyless(&self) -> u64 {
        self.inner.keyless
    }

    #[getter]
    fn tombstones(&self) -> usize {
        self.inner.tombstones()
    }

    #[getter]
    fn event_time_order(&self) -> bool {
        self.inner.event_time_order
    }

    fn __len__(&self) -> usize {
        self.inner.retained().len()
    }

    /// Phase two over a batch of topic entries: the compacted ledger's entries (raw messages) for
    /// those that retain anything, as a RecordBatch (ledger_id, entry_id, raw_message).
    #[pyo3(signature = (entries, ledger_ids, entry_ids, partition=-1, retain_null_key=false, retained_only=false, max_uncompressed_size=DEFAULT_DECOMPRESSION_LIMIT))]
    #[allow(clippy::too_many_arguments)]
    fn compact_entries<'py>(
        &self,
        py: Python<'py>,
        entries: PyArray,
        ledger_ids: PyArray,
        entry_ids: PyArray,
        partition: i32,
        retain_null_key: bool,
        retained_only: bool,
        max_uncompressed_size: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (inner, format) = (&self.inner, batch_format(retained_only));
        let out = with_positioned(py, [entries, ledger_ids, entry_ids], |input| {
            kernels::compact_entries(inner, input, partition, retain_null_key, format, max_uncompressed_size)
        })?;
        PyRecordBatch::new(out).into_pyarrow(py)
    }
}

/// (batch index, publish time) of the last message of a compacted ledger's last entry (`getLastMessagePosition`).
#[pyfunction]
#[pyo3(signature = (entry, max_uncompressed_size=DEFAULT_DECOMPRESSION_LIMIT))]
fn last_message_position(py: Python<'_>, entry: ByteBuffer<'_>, max_uncompressed_size: usize) -> PyResult<(i32, u64)> {
    core::last_message_position(&entry, max_uncompressed_size).py_err(py)
}

/// A compacted-ledger entry: `[i32 idSize][MessageIdData][i32 size][entry]`.
#[pyfunction]
#[pyo3(signature = (ledger_id, entry_id, entry, partition=-1, batch_index=None))]
fn encode_raw_message<'py>(
    py: Python<'py>,
    ledger_id: u64,
    entry_id: u64,
    entry: ByteBuffer<'py>,
    partition: i32,
    batch_index: Option<i32>,
) -> PyResult<Bound<'py, PyBytes>> {
    let id = MessageIdData { ledger_id, entry_id, partition: Some(partition), batch_index, ..Default::default() };
    core::encode_raw_message(&id, &entry).py_bytes(py)
}

/// (ledger_id, entry_id, partition, batch_index, entry) of a compacted-ledger entry.
#[pyfunction]
fn decode_raw_message<'py>(
    py: Python<'py>,
    data: ByteBuffer<'py>,
) -> PyResult<(u64, u64, i32, i32, Bound<'py, PyBytes>)> {
    let (id, entry) = core::decode_raw_message(&data).py_err(py)?;
    Ok((id.ledger_id, id.entry_id, id.partition.unwrap_or(-1), id.batch_index.unwrap_or(-1), PyBytes::new(py, entry)))
}

/// `RawBatchConverter.rebatchMessage` keeping the listed batch indexes (None when nothing is kept).
#[pyfunction]
#[pyo3(signature = (entry, keep, retain_null_key=false, retained_only=false, max_uncompressed_size=DEFAULT_DECOMPRESSION_LIMIT))]
fn rebatch_entry<'py>(
    py: Python<'py>,
    entry: ByteBuffer<'py>,
    keep: Vec<i32>,
    retain_null_key: bool,
    retained_only: bool,
    max_uncompressed_size: usize,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let format = batch_format(retained_only);
    let out =
        core::rebatch(&entry, |i, _| keep.contains(&i), retain_null_key, format, max_uncompressed_size).py_err(py)?;
    Ok(out.map(|b| PyBytes::new(py, &b)))
}

#[pyfunction]
#[pyo3(signature = (entries, max_uncompressed_size=DEFAULT_DECOMPRESSION_LIMIT))]
fn bulk_compaction_keys<'py>(
    py: Python<'py>,
    entries: PyArray,
    max_uncompressed_size: usize,
) -> PyResult<Bound<'py, PyAny>> {
    super::bulk::run(py, entries, |c| Ok(kernels::compaction_keys(c, max_uncompressed_size)))
}

/// Phase two with the retained batch indexes of each entry given (see `bulk::compaction::compact_entries_by_indexes`).
#[pyfunction]
#[pyo3(signature = (entries, ledger_ids, entry_ids, kept, partition=-1, retain_null_key=false, retained_only=false, max_uncompressed_size=DEFAULT_DECOMPRESSION_LIMIT))]
#[allow(clippy::too_many_arguments)]
fn bulk_compact_by_indexes<'py>(
    py: Python<'py>,
    entries: PyArray,
    ledger_ids: PyArray,
    entry_ids: PyArray,
    kept: PyArray,
    partition: i32,
    retain_null_key: bool,
    retained_only: bool,
    max_uncompressed_size: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let (kept, format) = (kept.into_inner().0, batch_format(retained_only));
    let out = with_positioned(py, [entries, ledger_ids, entry_ids], |input| {
        let k = kept.as_ref();
        kernels::compact_entries_by_indexes(input, k, partition, retain_null_key, format, max_uncompressed_size)
    })?;
    PyRecordBatch::new(out).into_pyarrow(py)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_all!(m, fn bulk_compact_by_indexes, last_message_position, encode_raw_message, decode_raw_message,
        rebatch_entry, bulk_compaction_keys; class PyLatestForKey);
    Ok(())
}
