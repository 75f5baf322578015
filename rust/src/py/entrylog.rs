//! Bindings for BookKeeper entry logs and bookie entry digests. File work runs with the GIL released.
use super::buffer::ByteBuffer;
use super::errors::{to_py, IntoPyBytes, IntoPyResult};
use crate::bookkeeper::digest::{self, DigestType, Digester, LedgerRun};
use crate::bookkeeper::entrylog::arrow::{self as logarrow, ArrowScanOptions, DigestMode, MultiLogScan, PayloadType};
use crate::bookkeeper::entrylog::reader::PayloadRead;
use crate::bookkeeper::entrylog::scan::{ScanIssue, ScanOptions, ScanSummary, Scanner, DEFAULT_MAX_RECORD_SIZE};
use crate::bookkeeper::entrylog::{
    EntryLogFile, EntryLogMetadata, EntryLogReader, EntryLogWriter, FileSource, LogHeader, LogResult, MetadataReport,
    WriterOptions,
};
use pyo3::exceptions::{PyStopIteration, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use pyo3_arrow::{PyRecordBatch, PySchema};
use std::path::PathBuf;

fn digest_type(py: Python<'_>, name: &str) -> PyResult<DigestType> {
    DigestType::from_name(name).map_err(|e| to_py(py, e))
}

fn digester(py: Python<'_>, digest_type_name: &str, password: &[u8]) -> PyResult<Digester> {
    Ok(Digester::new(digest_type(py, digest_type_name)?, password))
}

// ---------------------------------------------------------------------------------------------
// Digests

#[pyfunction]
fn bookie_digest_len(py: Python<'_>, digest_type_name: &str) -> PyResult<usize> {
    Ok(digest_type(py, digest_type_name)?.digest_len())
}

/// Stored bytes `[ledgerId][entryId][lac][length][digest][payload]`.
#[pyfunction]
#[pyo3(signature = (digest_type_name, password, ledger_id, entry_id, last_add_confirmed, length, payload))]
#[allow(clippy::too_many_arguments)]
fn bookie_pack<'py>(
    py: Python<'py>,
    digest_type_name: &str,
    password: &[u8],
    ledger_id: i64,
    entry_id: i64,
    last_add_confirmed: i64,
    length: i64,
    payload: ByteBuffer<'py>,
) -> PyResult<Bound<'py, PyBytes>> {
    let d = digester(py, digest_type_name, password)?;
    let out = d.pack(ledger_id, entry_id, last_add_confirmed, length, &payload);
    Ok(PyBytes::new(py, &out))
}

/// Packs consecutive entries of one ledger: returns a list of stored entries, with entry ids from
/// `first_entry_id`, LAC = previous entry id (starting at `last_add_confirmed`) and cumulative length.
#[pyfunction]
#[pyo3(signature = (digest_type_name, password, ledger_id, first_entry_id, last_add_confirmed, length, payloads))]
#[allow(clippy::too_many_arguments)]
fn bookie_pack_many<'py>(
    py: Python<'py>,
    digest_type_name: &str,
    password: &[u8],
    ledger_id: i64,
    first_entry_id: i64,
    last_add_confirmed: i64,
    length: i64,
    payloads: Vec<ByteBuffer<'py>>,
) -> PyResult<Bound<'py, PyList>> {
    let d = digester(py, digest_type_name, password)?;
    let slices: Vec<&[u8]> = payloads.iter().map(|p| &**p).collect();
    // Digests with the GIL released; then each entry is copied once, straight into its bytes object
    // (packing into Vecs first cost a second copy and its page faults: most of the time for 1 KiB entries).
    let run = LedgerRun { ledger_id, first_entry_id, last_add_confirmed, length };
    let heads = py.detach(|| d.heads_many(run, &slices));
    let out = PyList::empty(py);
    for ((h, dv), p) in heads.iter().zip(&slices) {
        let (hl, dl) = (h.len(), dv.as_bytes().len());
        out.append(PyBytes::new_with(py, hl + dl + p.len(), |b| {
            b[..hl].copy_from_slice(h);
            b[hl..hl + dl].copy_from_slice(dv.as_bytes());
            b[hl + dl..].copy_from_slice(p);
            Ok(())
        })?)?;
    }
    Ok(out)
}

/// The header of a stored bookie entry and where its payload starts (`bookie_parse`, `bookie_verify`).
#[pyclass(frozen, get_all, module = "pulsarkit._native")]
pub struct BookieEntryHeader {
    ledger_id: i64,
    entry_id: i64,
    last_add_confirmed: i64,
    length: i64,
    payload_offset: usize,
}

record_repr!(BookieEntryHeader: ledger_id, entry_id, last_add_confirmed, length, payload_offset);

impl From<digest::BookieEntry<'_>> for BookieEntryHeader {
    fn from(e: digest::BookieEntry<'_>) -> Self {
        BookieEntryHeader {
            ledger_id: e.ledger_id,
            entry_id: e.entry_id,
            last_add_confirmed: e.last_add_confirmed,
            length: e.length,
            payload_offset: e.payload_offset,
        }
    }
}

/// One record of an entry log (`RawRecordScan`): where it is, whose it is, its bytes.
#[pyclass(frozen, get_all, module = "pulsarkit._native")]
pub struct RawLogRecord {
    offset: u64,
    ledger_id: i64,
    entry_id: i64,
    data: Py<PyBytes>,
}

record_repr!(RawLogRecord: offset, ledger_id, entry_id);

/// The header fields without checking the digest.
#[pyfunction]
fn bookie_parse(py: Python<'_>, data: ByteBuffer<'_>, digest_type_name: &str) -> PyResult<BookieEntryHeader> {
    let t = digest_type(py, digest_type_name)?;
    let e = digest::parse_bookie_entry(&data, t.digest_len()).py_err(py)?;
    Ok(e.into())
}

/// Verifies like `DigestManager.verifyDigestAndReturnData` (digest, then the ids when given).
#[pyfunction]
#[pyo3(signature = (data, digest_type_name, password=b"".as_slice(), ledger_id=None, entry_id=None))]
fn bookie_verify(
    py: Python<'_>,
    data: ByteBuffer<'_>,
    digest_type_name: &str,
    password: &[u8],
    ledger_id: Option<i64>,
    entry_id: Option<i64>,
) -> PyResult<BookieEntryHeader> {
    let g = digester(py, digest_type_name, password)?;
    Ok(data.detach_if_large(py, |s| g.verify(s, ledger_id, entry_id)).py_err(py)?.into())
}

/// The digest type a stored entry verifies with (CRC32C, CRC32, or MAC when a password is given).
#[pyfunction]
#[pyo3(signature = (data, password=None))]
fn bookie_detect_digest(data: ByteBuffer<'_>, password: Option<&[u8]>) -> Option<&'static str> {
    let mac = password.map(|p| Digester::new(DigestType::Mac, p));
    digest::detect_digest_type(&data, mac.as_ref()).map(|t| t.name())
}

#[pyfunction]
fn bookie_mac_key<'py>(py: Python<'py>, password: &[u8]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &digest::mac_key(password))
}

#[pyfunction]
fn bookie_master_key<'py>(py: Python<'py>, password: &[u8]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &digest::master_key(password))
}

// ---------------------------------------------------------------------------------------------
// Dicts for headers, issues, summaries, metadata

fn header_dict<'py>(py: Python<'py>, h: &LogHeader) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("fingerprint", PyBytes::new(py, &h.fingerprint))?;
    d.set_item("fingerprint_ok", h.fingerprint_ok())?;
    d.set_item("version", h.version)?;
    d.set_item("ledgers_map_offset", h.ledgers_map_offset)?;
    d.set_item("ledgers_count", h.ledgers_count)?;
    d.set_item("format", h.format.name())?;
    Ok(d)
}

fn issue_dict<'py>(py: Python<'py>, i: &ScanIssue) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("kind", i.kind.name())?;
    d.set_item("offset", i.offset)?;
    d.set_item("length", i.length)?;
    d.set_item("message", &i.message)?;
    Ok(d)
}

fn summary_dict<'py>(py: Python<'py>, s: &ScanSummary, path: Option<&PathBuf>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    if let Some(p) = path {
        d.set_item("path", p.to_string_lossy().to_string())?;
    }
    d.set_item("log_id", s.log_id)?;
    d.set_item("file_size", s.file_size)?;
    d.set_item("format", s.format.name())?;
    d.set_item("header", s.header.as_ref().map(|h| header_dict(py, h)).transpose()?)?;
    d.set_item("records", s.records)?;
    d.set_item("record_bytes", s.record_bytes)?;
    d.set_item("data_end", s.data_end)?;
    d.set_item("ledgers_map_offset", s.ledgers_map_offset)?;
    d.set_item("ledgers_map", s.ledgers_map.clone())?;
    d.set_item("zero_tail_offset", s.zero_tail_offset)?;
    let issues = PyList::empty(py);
    for i in &s.issues {
        issues.append(issue_dict(py, i)?)?;
    }
    d.set_item("issues", issues)?;
    Ok(d)
}

fn metadata_dict<'py>(py: Python<'py>, m: &EntryLogMetadata) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("log_id", m.log_id)?;
    d.set_item("total_size", m.total_size)?;
    d.set_item("remaining_size", m.remaining_size)?;
    let l = PyDict::new(py);
    for (k, v) in &m.ledgers {
        l.set_item(k, v)?;
    }
    d.set_item("ledgers", l)?;
    Ok(d)
}

fn report_dict<'py>(py: Python<'py>, r: &MetadataReport) -> PyResult<Bound<'py, PyDict>> {
    let d = metadata_dict(py, &r.metadata)?;
    d.set_item("from_index", r.from_index)?;
    d.set_item("fallback_reason", r.fallback_reason.as_deref())?;
    let issues = PyList::empty(py);
    for i in &r.issues {
        issues.append(issue_dict(py, i)?)?;
    }
    d.set_item("issues", issues)?;
    Ok(d)
}

/// A log's metadata report as a dict (the ledgers map, or a scan; see `EntryLogFile::metadata`), read
/// with the GIL released.
fn file_metadata<'py>(
    py: Python<'py>,
    f: &EntryLogFile,
    use_index: bool,
    max_record_size: usize,
    resync: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = scan_options(None, None, max_record_size, resync);
    let r = py.detach(|| f.metadata(opts, use_index)).py_err(py)?;
    report_dict(py, &r)
}

/// One entry read by location (a writer's or a reader's), the GIL released, as `bytes`.
fn read_bytes<'py>(py: Python<'py>, read: impl FnOnce() -> LogResult<Vec<u8>> + Send) -> PyResult<Bound<'py, PyBytes>> {
    py.detach(read).py_bytes(py)
}

fn scan_options(start: Option<u64>, stop: Option<u64>, max_record_size: usize, resync: bool) -> ScanOptions {
    ScanOptions { start, stop, max_record_size, resync, ..ScanOptions::default() }
}

// ---------------------------------------------------------------------------------------------
// Writer

#[pyclass(module = "pulsarkit._native")]
struct RawEntryLogWriter {
    inner: EntryLogWriter,
    closed: bool,
}

impl RawEntryLogWriter {
    fn check_open(&self) -> PyResult<()> {
        if self.closed {
            return Err(PyValueError::new_err("entry log writer is closed"));
        }
        Ok(())
    }
}

#[pymethods]
impl RawEntryLogWriter {
    #[new]
    #[pyo3(signature = (directory, log_size_limit, write_buffer_size, fsync, seal_on_close, header_version))]
    fn new(
        py: Python<'_>,
        directory: PathBuf,
        log_size_limit: u64,
        write_buffer_size: usize,
        fsync: bool,
        seal_on_close: bool,
        header_version: i32,
    ) -> PyResult<Self> {
        let opts = WriterOptions { log_size_limit, write_buffer_size, fsync, seal_on_close, header_version };
        let inner = py.detach(|| EntryLogWriter::open(&directory, opts)).py_err(py)?;
        Ok(RawEntryLogWriter { inner, closed: false })
    }

    fn append(&mut self, py: Python<'_>, ledger_id: i64, data: ByteBuffer<'_>) -> PyResult<u64> {
        self.check_open()?;
        self.inner.append(ledger_id, &data).py_err(py)
    }

    /// Appends stored entries (each starting with its ledger id) in one call; returns their locations.
    fn append_entries<'py>(&mut self, py: Python<'py>, entries: Vec<ByteBuffer<'py>>) -> PyResult<Vec<u64>> {
        self.check_open()?;
        let slices: Vec<&[u8]> = entries.iter().map(|d| &**d).collect();
        let w = &mut self.inner;
        py.detach(|| slices.iter().map(|d| w.append_stored(d)).collect::<Result<Vec<_>, _>>()).py_err(py)
    }

    /// Appends (ledger_id, data) pairs in one call; returns their locations.
    fn append_many<'py>(&mut self, py: Python<'py>, entries: Vec<(i64, ByteBuffer<'py>)>) -> PyResult<Vec<u64>> {
        self.check_open()?;
        let slices: Vec<(i64, &[u8])> = entries.iter().map(|(l, d)| (*l, &**d)).collect();
        let w = &mut self.inner;
        py.detach(|| slices.iter().map(|(l, d)| w.append(*l, d)).collect::<Result<Vec<_>, _>>()).py_err(py)
    }

    fn flush(&mut self, py: Python<'_>) -> PyResult<()> {
        self.check_open()?;
        let w = &mut self.inner;
        py.detach(|| w.flush()).py_err(py)
    }

    fn rotate(&mut self, py: Python<'_>) -> PyResult<Option<u64>> {
        self.check_open()?;
        let w = &mut self.inner;
        py.detach(|| w.rotate()).py_err(py)
    }

    #[pyo3(signature = (location, ledger_id=None, entry_id=None))]
    fn read<'py>(
        &mut self,
        py: Python<'py>,
        location: u64,
        ledger_id: Option<i64>,
        entry_id: Option<i64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let w = &mut self.inner;
        read_bytes(py, || w.read(location, ledger_id, entry_id))
    }

    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        if self.closed {
            return Ok(());
        }
        let w = &mut self.inner;
        py.detach(|| w.close()).py_err(py)?;
        self.closed = true;
        Ok(())
    }

    #[getter]
    fn closed(&self) -> bool {
        self.closed
    }
    #[getter]
    fn directory(&self) -> PathBuf {
        self.inner.dir().to_path_buf()
    }
    #[getter]
    fn current_log_id(&self) -> Option<u64> {
        self.inner.current_log_id()
    }
    #[getter]
    fn current_log_size(&self) -> u64 {
        self.inner.current_log_size()
    }
    #[getter]
    fn rotated_log_ids(&self) -> Vec<u64> {
        self.inner.rotated_log_ids().to_vec()
    }
    #[getter]
    fn current_ledgers(&self) -> Vec<(i64, u64)> {
        self.inner.current_ledgers().into_iter().collect()
    }
    #[getter]
    fn log_size_limit(&self) -> u64 {
        self.inner.options().log_size_limit
    }
}

// ---------------------------------------------------------------------------------------------
// Reader and record scan

#[pyclass(module = "pulsarkit._native")]
struct RawEntryLogReader {
    inner: EntryLogReader,
}

#[pymethods]
impl RawEntryLogReader {
    /// A directory of logs, or one file (`log_id` defaults to the id in its name).
    #[new]
    #[pyo3(signature = (path, log_id=None))]
    fn new(py: Python<'_>, path: PathBuf, log_id: Option<u64>) -> PyResult<Self> {
        Ok(RawEntryLogReader { inner: EntryLogReader::open(&path, log_id).py_err(py)? })
    }

    fn log_ids(&self, py: Python<'_>) -> PyResult<Vec<u64>> {
        self.inner.log_ids().py_err(py)
    }

    fn path_of(&self, log_id: u64) -> PathBuf {
        self.inner.path_of(log_id)
    }

    #[pyo3(signature = (location, ledger_id=None, entry_id=None))]
    fn read<'py>(
        &mut self,
        py: Python<'py>,
        location: u64,
        ledger_id: Option<i64>,
        entry_id: Option<i64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let r = &mut self.inner;
        read_bytes(py, || r.read(location, ledger_id, entry_id))
    }

    /// The verified payloads of consecutive entries of one ledger (see the core's `read_payloads`):
    /// per location `bytes`, `None` for a negative location, or `(message, stored length or None)`
    /// for a bad entry, for the locations taken before `max_bytes` was reached; a missing or
    /// unreadable log raises `OSError`.
    #[pyo3(signature = (locations, ledger_id, first_entry_id, digest_type_name, password, max_bytes=usize::MAX))]
    #[allow(clippy::too_many_arguments)]
    fn read_payloads<'py>(
        &mut self,
        py: Python<'py>,
        locations: Vec<i64>,
        ledger_id: i64,
        first_entry_id: i64,
        digest_type_name: &str,
        password: &[u8],
        max_bytes: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let d = digester(py, digest_type_name, password)?;
        let r = &mut self.inner;
        let got = py.detach(|| r.read_payloads(&locations, ledger_id, first_entry_id, &d, max_bytes)).py_err(py)?;
        let out = PyList::empty(py);
        for g in got {
            match g {
                PayloadRead::Payload { stored, start } => out.append(PyBytes::new(py, &stored[start..]))?,
                PayloadRead::NotRead => out.append(py.None())?,
                PayloadRead::Bad { error, stored_len } => out.append((error.to_string(), stored_len))?,
            }
        }
        Ok(out)
    }

    fn header<'py>(&mut self, py: Python<'py>, log_id: u64) -> PyResult<Bound<'py, PyDict>> {
        let h = self.inner.file(log_id).and_then(|f| f.header()).py_err(py)?;
        header_dict(py, &h)
    }

    fn file_size(&mut self, py: Python<'_>, log_id: u64) -> PyResult<u64> {
        Ok(self.inner.file(log_id).py_err(py)?.len())
    }

    /// The ledgers map when present and consistent (`use_index`), a scan otherwise.
    #[pyo3(signature = (log_id, use_index=true, max_record_size=DEFAULT_MAX_RECORD_SIZE, resync=true))]
    fn metadata<'py>(
        &mut self,
        py: Python<'py>,
        log_id: u64,
        use_index: bool,
        max_record_size: usize,
        resync: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let f = self.inner.file(log_id).py_err(py)?;
        file_metadata(py, f, use_index, max_record_size, resync)
    }

    /// Drops a cached open file (after the log was deleted or replaced).
    fn evict(&mut self, log_id: u64) {
        self.inner.evict(log_id)
    }

    #[pyo3(signature = (log_id, start=None, stop=None, max_record_size=DEFAULT_MAX_RECORD_SIZE, resync=true))]
    fn scan(
        &mut self,
        py: Python<'_>,
        log_id: u64,
        start: Option<u64>,
        stop: Option<u64>,
        max_record_size: usize,
        resync: bool,
    ) -> PyResult<RawRecordScan> {
        let path = self.inner.path_of(log_id);
        let src = FileSource::open(&path).py_err(py)?;
        let sc = Scanner::new(src, log_id, scan_options(start, stop, max_record_size, resync)).py_err(py)?;
        Ok(RawRecordScan { inner: sc, path })
    }
}

/// Records of one log: iterate for (offset, ledger_id, entry_id, data) tuples.
#[pyclass(module = "pulsarkit._native")]
struct RawRecordScan {
    inner: Scanner<FileSource>,
    path: PathBuf,
}

impl RawRecordScan {
    fn next_record(&mut self, py: Python<'_>) -> PyResult<Option<RawLogRecord>> {
        Ok(self.inner.next_record().py_err(py)?.map(|r| RawLogRecord {
            offset: r.offset,
            ledger_id: r.ledger_id,
            entry_id: r.entry_id,
            data: PyBytes::new(py, r.data).unbind(),
        }))
    }
}

#[pymethods]
impl RawRecordScan {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<RawLogRecord> {
        self.next_record(py)?.ok_or_else(|| PyStopIteration::new_err(()))
    }

    /// Up to `n` records as a list (empty at the end); fewer Python calls than iterating.
    fn next_chunk<'py>(&mut self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for _ in 0..n {
            match self.next_record(py)? {
                Some(r) => out.append(r)?,
                None => break,
            }
        }
        Ok(out)
    }

    #[getter]
    fn log_id(&self) -> u64 {
        self.inner.log_id()
    }

    #[getter]
    fn position(&self) -> u64 {
        self.inner.position()
    }

    #[getter]
    fn done(&self) -> bool {
        self.inner.is_done()
    }

    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        summary_dict(py, &self.inner.summary(), Some(&self.path))
    }
}

// ---------------------------------------------------------------------------------------------
// Arrow scan

#[pyclass(module = "pulsarkit._native")]
struct RawArrowLogScan {
    inner: MultiLogScan,
}

#[pymethods]
impl RawArrowLogScan {
    /// `logs`: (path, log_id) pairs. `digest_type_name` is a digest type or "AUTO";
    /// `payload_type` is "binary" (copied) or "binary_view" (zero-copy views into mapped files).
    #[new]
    #[pyo3(signature = (logs, digest_type_name, password, batch_rows, batch_bytes, include_issues, max_record_size, resync, payload_type="binary"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        logs: Vec<(PathBuf, u64)>,
        digest_type_name: &str,
        password: &[u8],
        batch_rows: usize,
        batch_bytes: usize,
        include_issues: bool,
        max_record_size: usize,
        resync: bool,
        payload_type: &str,
    ) -> PyResult<Self> {
        let opts = ArrowScanOptions {
            digest: DigestMode::from_name(digest_type_name, password).py_err(py)?,
            batch_rows,
            batch_bytes,
            include_issues,
            payload_type: PayloadType::from_name(payload_type).py_err(py)?,
            scan: scan_options(None, None, max_record_size, resync),
        };
        Ok(RawArrowLogScan { inner: MultiLogScan::new(logs, opts) })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = &mut self.inner;
        match py.detach(|| s.next_batch()).py_err(py)? {
            Some(b) => PyRecordBatch::new(b).into_pyarrow(py),
            None => Err(PyStopIteration::new_err(())),
        }
    }

    fn summaries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for (p, s) in self.inner.summaries() {
            out.append(summary_dict(py, s, Some(p))?)?;
        }
        Ok(out)
    }
}

#[pyfunction]
#[pyo3(signature = (payload_type="binary"))]
fn entry_log_schema<'py>(py: Python<'py>, payload_type: &str) -> PyResult<Bound<'py, PyAny>> {
    PySchema::new(logarrow::schema_for(PayloadType::from_name(payload_type).py_err(py)?)).into_pyarrow(py)
}

/// Metadata of one file without a reader object (CLI convenience).
#[pyfunction]
#[pyo3(signature = (path, log_id, use_index=true, max_record_size=DEFAULT_MAX_RECORD_SIZE))]
fn entry_log_metadata<'py>(
    py: Python<'py>,
    path: PathBuf,
    log_id: u64,
    use_index: bool,
    max_record_size: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let f = EntryLogFile::open_with_id(&path, log_id).py_err(py)?;
    let d = file_metadata(py, &f, use_index, max_record_size, true)?;
    d.set_item("path", path.to_string_lossy().to_string())?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_all!(m, fn bookie_digest_len, bookie_pack, bookie_pack_many, bookie_parse, bookie_verify,
        bookie_detect_digest, bookie_mac_key, bookie_master_key, entry_log_schema, entry_log_metadata;
        class BookieEntryHeader, RawLogRecord, RawEntryLogWriter, RawEntryLogReader, RawRecordScan,
        RawArrowLogScan);
    m.add("ENTRY_LOG_DEFAULT_MAX_RECORD_SIZE", DEFAULT_MAX_RECORD_SIZE)?;
    m.add("ENTRY_LOG_DEFAULT_SIZE_LIMIT", crate::bookkeeper::entrylog::format::DEFAULT_LOG_SIZE_LIMIT)?;
    Ok(())
}
