//! Bookie GC bindings: one GIL-released call per entry log for the transactional compactor's copy
//! (phases one and two), and the recovery scan of a `.compacted` copy.
use super::errors::IntoPyResult;
use crate::bookkeeper::digest::{DigestType, Digester};
use crate::bookkeeper::entrylog::compact::{self, locations_batch, CompactedLog};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3_arrow::PyRecordBatch;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// Copies the live records of log `src_log_id` into `<dst>.log.compacting`, verifying each entry of a
/// ledger given with `(digest type, password)`, then seals it and renames it to
/// `<dst>.log.<src>.compacted`. Returns a dict: `compacted_path` (None when nothing was live),
/// `locations` (RecordBatch ledger_id, entry_id, location), `entries`, `bytes`, `dropped_entries`,
/// `dropped_bytes`.
#[pyfunction]
#[pyo3(signature = (directory, src_log_id, dst_log_id, live, fsync=true))]
fn compact_entry_log<'py>(
    py: Python<'py>,
    directory: PathBuf,
    src_log_id: u64,
    dst_log_id: u64,
    live: HashMap<i64, Option<(String, Vec<u8>)>>,
    fsync: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let mut digesters: BTreeMap<i64, Option<Digester>> = BTreeMap::new();
    for (lid, d) in live {
        let dg = match d {
            Some((kind, password)) => Some(Digester::new(DigestType::from_name(&kind).py_err(py)?, &password)),
            None => None,
        };
        digesters.insert(lid, dg);
    }
    let out: CompactedLog =
        py.detach(|| compact::compact_log(&directory, src_log_id, dst_log_id, &digesters, fsync)).py_err(py)?;
    let d = PyDict::new(py);
    d.set_item("src_log_id", out.src_log_id)?;
    d.set_item("dst_log_id", out.dst_log_id)?;
    d.set_item("compacted_path", out.compacted_path.as_ref().map(|p| p.to_string_lossy().into_owned()))?;
    d.set_item("locations", PyRecordBatch::new(locations_batch(&out.locations)).into_pyarrow(py)?)?;
    d.set_item("entries", out.entries)?;
    d.set_item("bytes", out.bytes)?;
    d.set_item("dropped_entries", out.dropped_entries)?;
    d.set_item("dropped_bytes", out.dropped_bytes)?;
    Ok(d)
}

/// Locations of every record of a `.compacted` copy against its final log id (crash recovery).
#[pyfunction]
fn compacted_locations<'py>(py: Python<'py>, path: PathBuf, dst_log_id: u64) -> PyResult<Bound<'py, PyAny>> {
    let locs = py.detach(|| compact::compacted_locations(&path, dst_log_id)).py_err(py)?;
    PyRecordBatch::new(locations_batch(&locs)).into_pyarrow(py)
}

/// `(dst, src)` log ids of a `<dst>.log.<src>.compacted` file name (hex), or None.
#[pyfunction]
fn parse_compacted_name(name: &str) -> Option<(u64, u64)> {
    compact::parse_compacted_name(name)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_all!(m, fn compact_entry_log, compacted_locations, parse_compacted_name);
    Ok(())
}
