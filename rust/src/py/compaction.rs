//! Topic-compaction bindings: phase one's `LatestForKey` fed one Arrow batch of entries per call,
//! phase two writing the compacted ledger's entries per batch, and the last message position.
use super::codec::ByteInput;
use super::errors::IntoPyResult;
use crate::bulk::{compaction as kernels, EntryColumn};
use crate::codec::compaction::{self as core, BatchFormat, LatestForKey as CoreLatest, MessagePosition};
use crate::codec::compression::DEFAULT_DECOMPRESSION_LIMIT;
use crate::codec::proto::MessageIdData;
use crate::error::{Error, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, PrimitiveArray};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3_arrow::{PyArray, PyRecordBatch};

fn ids(a: &ArrayRef, what: &str) -> Result<PrimitiveArray<Int64Type>> {
    a.as_primitive_opt::<Int64Type>()
        .cloned()
        .ok_or_else(|| Error::invalid(format!("{what} must be an Arrow int64 array, not {}", a.data_type())))
}

fn columns(
    entries: PyArray,
    ledger_ids: PyArray,
    entry_ids: PyArray,
) -> Result<(ArrayRef, PrimitiveArray<Int64Type>, PrimitiveArray<Int64Type>)> {
    let (e, _) = entries.into_inner();
    let l = ids(&ledger_ids.into_inner().0, "ledger_ids")?;
    let n = ids(&entry_ids.into_inner().0, "entry_ids")?;
    if l.len() != e.len() || n.len() != e.len() {
        return Err(Error::invalid(format!(
            "entries, ledger_ids and entry_ids differ in length ({}, {}, {})",
            e.len(),
            l.len(),
            n.len()
        )));
    }
    Ok((e, l, n))
}

fn at(e: Error, l: i64, n: i64) -> Error {
    match e {
        Error::Corrupt { offset, what } => Error::Corrupt { offset, what: format!("entry {l}:{n}: {what}") },
        other => other,
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
        let (e, l, n) = columns(entries, ledger_ids, entry_ids).py_err(py)?;
        let col = EntryColumn::from_array(e.as_ref()).py_err(py)?;
        let inner = &mut self.inner;
        py.detach(|| {
            for i in 0..col.len() {
                let (li, ni) = (l.value(i), n.value(i));
                let d = col.get(i).ok_or_else(|| Error::invalid(format!("entry {li}:{ni} is null")))?;
                inner.add_entry(li, ni, d, max_uncompressed_size).map_err(|x| at(x, li, ni))?;
            }
            Ok(())
        })
        .py_err(py)
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
        let (e, l, n) = columns(entries, ledger_ids, entry_ids).py_err(py)?;
        let col = EntryColumn::from_array(e.as_ref()).py_err(py)?;
        let format = if retained_only { BatchFormat::RetainedOnly } else { BatchFormat::Placeholders };
        let inner = &self.inner;
        let out = py
            .detach(|| {
                kernels::compact_entries(inner, &col, &l, &n, partition, retain_null_key, format, max_uncompressed_size)
            })
            .py_err(py)?;
        PyRecordBatch::new(out).into_pyarrow(py)
    }
}

/// (batch index, publish time) of the last message of a compacted ledger's last entry (`getLastMessagePosition`).
#[pyfunction]
#[pyo3(signature = (entry, max_uncompressed_size=DEFAULT_DECOMPRESSION_LIMIT))]
fn last_message_position(
    py: Python<'_>,
    entry: &Bound<'_, PyAny>,
    max_uncompressed_size: usize,
) -> PyResult<(i32, u64)> {
    let input = ByteInput::new(entry)?;
    core::last_message_position(input.as_slice(), max_uncompressed_size).py_err(py)
}

/// A compacted-ledger entry: `[i32 idSize][MessageIdData][i32 size][entry]`.
#[pyfunction]
#[pyo3(signature = (ledger_id, entry_id, entry, partition=-1, batch_index=None))]
fn encode_raw_message<'py>(
    py: Python<'py>,
    ledger_id: u64,
    entry_id: u64,
    entry: &Bound<'py, PyAny>,
    partition: i32,
    batch_index: Option<i32>,
) -> PyResult<Bound<'py, PyBytes>> {
    let input = ByteInput::new(entry)?;
    let id = MessageIdData { ledger_id, entry_id, partition: Some(partition), batch_index, ..Default::default() };
    Ok(PyBytes::new(py, &core::encode_raw_message(&id, input.as_slice()).py_err(py)?))
}

/// (ledger_id, entry_id, partition, batch_index, entry) of a compacted-ledger entry.
#[pyfunction]
fn decode_raw_message<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<(u64, u64, i32, i32, Bound<'py, PyBytes>)> {
    let input = ByteInput::new(data)?;
    let (id, entry) = core::decode_raw_message(input.as_slice()).py_err(py)?;
    Ok((id.ledger_id, id.entry_id, id.partition.unwrap_or(-1), id.batch_index.unwrap_or(-1), PyBytes::new(py, entry)))
}

/// `RawBatchConverter.rebatchMessage` keeping the listed batch indexes (None when nothing is kept).
#[pyfunction]
#[pyo3(signature = (entry, keep, retain_null_key=false, retained_only=false, max_uncompressed_size=DEFAULT_DECOMPRESSION_LIMIT))]
fn rebatch_entry<'py>(
    py: Python<'py>,
    entry: &Bound<'py, PyAny>,
    keep: Vec<i32>,
    retain_null_key: bool,
    retained_only: bool,
    max_uncompressed_size: usize,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let input = ByteInput::new(entry)?;
    let format = if retained_only { BatchFormat::RetainedOnly } else { BatchFormat::Placeholders };
    let out = core::rebatch(input.as_slice(), |i, _| keep.contains(&i), retain_null_key, format, max_uncompressed_size)
        .py_err(py)?;
    Ok(out.map(|b| PyBytes::new(py, &b)))
}

#[pyfunction]
#[pyo3(signature = (entries, max_uncompressed_size=DEFAULT_DECOMPRESSION_LIMIT))]
fn bulk_compaction_keys<'py>(
    py: Python<'py>,
    entries: PyArray,
    max_uncompressed_size: usize,
) -> PyResult<Bound<'py, PyAny>> {
    super::bulk::run(py, entries, |c| kernels::compaction_keys(c, max_uncompressed_size))
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
    let (e, l, n) = columns(entries, ledger_ids, entry_ids).py_err(py)?;
    let (k, _) = kept.into_inner();
    let kept = k
        .as_list_opt::<i32>()
        .cloned()
        .ok_or_else(|| Error::invalid(format!("kept must be an Arrow list<int32> array, not {}", k.data_type())))
        .py_err(py)?;
    let col = EntryColumn::from_array(e.as_ref()).py_err(py)?;
    let format = if retained_only { BatchFormat::RetainedOnly } else { BatchFormat::Placeholders };
    let out = py
        .detach(|| {
            kernels::compact_entries_by_indexes(
                &col,
                &l,
                &n,
                &kept,
                partition,
                retain_null_key,
                format,
                max_uncompressed_size,
            )
        })
        .py_err(py)?;
    PyRecordBatch::new(out).into_pyarrow(py)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bulk_compact_by_indexes, m)?)?;
    m.add_class::<PyLatestForKey>()?;
    m.add_function(wrap_pyfunction!(last_message_position, m)?)?;
    m.add_function(wrap_pyfunction!(encode_raw_message, m)?)?;
    m.add_function(wrap_pyfunction!(decode_raw_message, m)?)?;
    m.add_function(wrap_pyfunction!(rebatch_entry, m)?)?;
    m.add_function(wrap_pyfunction!(bulk_compaction_keys, m)?)?;
    Ok(())
}
