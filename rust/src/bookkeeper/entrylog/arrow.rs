//! Many entry logs into Arrow record batches, the bookie digest verified in the same pass.
//!
//! One row per entry record, plus (optionally) one row per [`ScanIssue`] with `issue` and `error`
//! set and the entry columns null, so that nothing a scan skipped goes unseen. Batches are bounded
//! by rows and by payload bytes.
use super::format::make_location;
use super::scan::{Record, ScanIssue, ScanOptions, ScanSummary, Scanner};
use super::{AnySource, FileSource, LogResult, MmapSource};
use crate::bookkeeper::digest::{detect_digest_type, DigestType, Digester, BOOKIE_HEADER_SIZE};
use crate::columns::{Bools, Prim, PushVar};
use crate::error::{Error, Result};
use arrow_array::builder::BinaryViewBuilder;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

/// How the bookie digest of each entry is checked.
#[derive(Debug, Clone)]
pub enum DigestMode {
    /// Every entry uses this type (Pulsar's default is CRC32C).
    Fixed(Digester),
    /// Per ledger, the first of CRC32C, CRC32, MAC (with the given password) that verifies; entries
    /// of a ledger whose type is still unknown get a null `digest_type` and `digest_ok = false`.
    Auto { mac: Option<Digester> },
}

impl DigestMode {
    /// `"AUTO"` (any case; the MAC candidate only with a password) or a digest type's name.
    pub fn from_name(name: &str, password: &[u8]) -> Result<Self> {
        if name.eq_ignore_ascii_case("auto") {
            Ok(DigestMode::Auto { mac: (!password.is_empty()).then(|| Digester::new(DigestType::Mac, password)) })
        } else {
            Ok(DigestMode::Fixed(Digester::new(DigestType::from_name(name)?, password)))
        }
    }
}

/// Arrow type of the `payload` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadType {
    /// `binary`: payloads copied out of the file (read with positional reads).
    Binary,
    /// `binary_view`: views into the memory-mapped file, no copy. Batches keep the mapping alive;
    /// the file must not be truncated while they exist (see [`MmapSource`]).
    BinaryView,
}

impl PayloadType {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "binary" => Ok(PayloadType::Binary),
            "binary_view" => Ok(PayloadType::BinaryView),
            other => Err(Error::invalid(format!("payload_type must be \"binary\" or \"binary_view\", not {other:?}"))),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ArrowScanOptions {
    pub digest: DigestMode,
    /// A batch is cut after this many rows...
    pub batch_rows: usize,
    /// ...or once its payloads reach this many bytes (0: the default for the payload type).
    pub batch_bytes: usize,
    /// Add a row per scan issue (torn tail, corrupt region, bad header...).
    pub include_issues: bool,
    pub payload_type: PayloadType,
    pub scan: ScanOptions,
}

impl Default for ArrowScanOptions {
    fn default() -> Self {
        ArrowScanOptions {
            digest: DigestMode::Fixed(Digester::new(DigestType::Crc32c, b"")),
            batch_rows: 8192,
            // 8 MiB: larger batches page-fault fresh output buffers (16 KiB entries: 169 ms at 64 MiB,
            // 68 ms at 8 MiB for 200 MiB of entries) while small ones add per-batch calls. Copying scans
            // do best at BINARY_BATCH_BYTES (the Python API's default for them).
            batch_bytes: 8 << 20,
            include_issues: true,
            payload_type: PayloadType::Binary,
            scan: ScanOptions::default(),
        }
    }
}

/// Batch size that suits a copying (`binary`) scan: the output buffer of a batch freed by the
/// consumer is reused, still in cache, by the next one; at 8 MiB every byte copied goes to memory.
/// 200 MiB of logs, CRC32C verified, against a plain 1 MiB-read loop: 1 KiB entries 0.35x -> 0.5x,
/// 16 KiB entries 0.35x -> 0.5-0.6x (with the window below).
pub const BINARY_BATCH_BYTES: usize = 1 << 20;
/// The largest `batch_bytes` a copying scan takes (see `MultiLogScan::new`).
pub const BINARY_BATCH_BYTES_MAX: usize = 1 << 30;
/// The read window of a copying scan (see [`MultiLogScan::new`]).
pub const BINARY_SCAN_CHUNK: usize = 256 << 10;

/// The columns of every batch (payload as `binary`).
pub fn schema() -> SchemaRef {
    schema_for(PayloadType::Binary)
}

/// The columns of every batch for a payload type.
pub fn schema_for(payload: PayloadType) -> SchemaRef {
    let payload_type = match payload {
        PayloadType::Binary => DataType::Binary,
        PayloadType::BinaryView => DataType::BinaryView,
    };
    Arc::new(Schema::new(vec![
        Field::new("log_id", DataType::Int64, false),
        Field::new("offset", DataType::Int64, false),
        Field::new("location", DataType::Int64, true),
        Field::new("ledger_id", DataType::Int64, true),
        Field::new("entry_id", DataType::Int64, true),
        Field::new("last_add_confirmed", DataType::Int64, true),
        Field::new("ledger_length", DataType::Int64, true),
        Field::new("size", DataType::Int64, false),
        Field::new("digest_type", DataType::Utf8, true),
        Field::new("digest_ok", DataType::Boolean, true),
        Field::new("payload", payload_type, true),
        Field::new("issue", DataType::Utf8, true),
        Field::new("error", DataType::Utf8, true),
    ]))
}

enum Payload {
    Binary(PushVar<i32>),
    /// Views into mapped files; `block` is the builder block of the file in use (by scan index).
    View {
        b: BinaryViewBuilder,
        block: Option<(usize, u32)>,
    },
}

/// The file a record comes from, for zero-copy payload views.
struct FileRef<'a> {
    index: usize,
    map: Option<&'a std::sync::Arc<memmap2::Mmap>>,
}

impl Payload {
    fn append_null(&mut self) {
        match self {
            Payload::Binary(b) => b.push(None),
            Payload::View { b, .. } => b.append_null(),
        }
    }

    /// Appends `data`, found at `file_offset` in the file, as a view when the file is mapped.
    fn append(&mut self, data: &[u8], file_offset: u64, file: &FileRef<'_>) {
        match self {
            Payload::Binary(b) => b.push(Some(data)),
            Payload::View { b, block } => {
                if let Some(map) = file.map.filter(|m| m.len() < u32::MAX as usize && !m.is_empty()) {
                    let id = match block {
                        Some((idx, id)) if *idx == file.index => *id,
                        _ => {
                            // SAFETY: the pointer and length describe the live mapping, which the
                            // buffer keeps alive through the Arc it owns.
                            let buf = unsafe {
                                Buffer::from_custom_allocation(
                                    std::ptr::NonNull::new(map.as_ptr() as *mut u8).expect("non-empty mapping"),
                                    map.len(),
                                    map.clone(),
                                )
                            };
                            let id = b.append_block(buf);
                            *block = Some((file.index, id));
                            id
                        }
                    };
                    if b.try_append_view(id, file_offset as u32, data.len() as u32).is_ok() {
                        return;
                    }
                }
                b.append_value(data);
            }
        }
    }

    fn finish(self) -> Result<ArrayRef> {
        Ok(match self {
            Payload::Binary(b) => b.binary()?,
            Payload::View { mut b, .. } => Arc::new(b.finish()),
        })
    }
}

struct Cols {
    log_id: Prim<Int64Type>,
    offset: Prim<Int64Type>,
    location: Prim<Int64Type>,
    ledger_id: Prim<Int64Type>,
    entry_id: Prim<Int64Type>,
    lac: Prim<Int64Type>,
    ledger_length: Prim<Int64Type>,
    size: Prim<Int64Type>,
    digest_type: PushVar<i32>,
    digest_ok: Bools,
    payload: Payload,
    payload_type: PayloadType,
    issue: PushVar<i32>,
    error: PushVar<i32>,
    rows: usize,
    bytes: usize,
}

impl Cols {
    fn new(rows: usize, bytes: usize, payload_type: PayloadType) -> Self {
        Cols {
            log_id: Prim::with_capacity(rows),
            offset: Prim::with_capacity(rows),
            location: Prim::with_capacity(rows),
            ledger_id: Prim::with_capacity(rows),
            entry_id: Prim::with_capacity(rows),
            lac: Prim::with_capacity(rows),
            ledger_length: Prim::with_capacity(rows),
            size: Prim::with_capacity(rows),
            digest_type: PushVar::new(rows, rows * 6),
            digest_ok: Bools::with_capacity(rows),
            payload: match payload_type {
                PayloadType::Binary => Payload::Binary(PushVar::new(rows, bytes)),
                PayloadType::BinaryView => Payload::View { b: BinaryViewBuilder::with_capacity(rows), block: None },
            },
            payload_type,
            issue: PushVar::new(rows, 0),
            error: PushVar::new(rows, 0),
            rows: 0,
            bytes: 0,
        }
    }

    fn push_record(
        &mut self,
        log_id: u64,
        r: &Record<'_>,
        mode: &DigestMode,
        known: &mut HashMap<i64, DigestType>,
        file: &FileRef<'_>,
    ) {
        let d = r.data;
        self.log_id.push(Some(log_id as i64));
        self.offset.push(Some(r.offset as i64));
        self.location.push(Some(make_location(log_id, r.offset + 4) as i64));
        self.ledger_id.push(Some(r.ledger_id));
        self.entry_id.push(Some(r.entry_id));
        self.size.push(Some(d.len() as i64));
        self.issue.push(None);
        if d.len() < BOOKIE_HEADER_SIZE {
            self.lac.push(None);
            self.ledger_length.push(None);
            self.digest_type.push(None);
            self.digest_ok.push(None);
            self.payload.append_null();
            self.error.push_str(&format!(
                "record of {} bytes is shorter than the {BOOKIE_HEADER_SIZE}-byte bookie entry header",
                d.len()
            ));
            self.rows += 1;
            return;
        }
        self.lac.push(Some(i64::from_be_bytes(d[16..24].try_into().unwrap())));
        self.ledger_length.push(Some(i64::from_be_bytes(d[24..32].try_into().unwrap())));
        let kind = match mode {
            DigestMode::Fixed(g) => Some((g.kind(), Some(g))),
            DigestMode::Auto { mac } => match known.get(&r.ledger_id) {
                Some(&t) => Some((t, None)),
                None => detect_digest_type(d, mac.as_ref()).map(|t| {
                    known.insert(r.ledger_id, t);
                    (t, None)
                }),
            },
        };
        let Some((t, fixed)) = kind else {
            self.digest_type.push(None);
            self.digest_ok.push(Some(false));
            self.payload.append_null();
            self.error.push_str("no digest type (CRC32C, CRC32, MAC) verifies this entry");
            self.rows += 1;
            return;
        };
        let n = t.digest_len();
        self.digest_type.push(Some(t.name().as_bytes()));
        if d.len() < BOOKIE_HEADER_SIZE + n {
            self.digest_ok.push(Some(false));
            self.payload.append_null();
            self.error.push_str(&format!(
                "record of {} bytes cannot hold the bookie header and a {}-byte {} digest",
                d.len(),
                n,
                t.name()
            ));
            self.rows += 1;
            return;
        }
        let payload = &d[BOOKIE_HEADER_SIZE + n..];
        if t == DigestType::Dummy {
            self.digest_ok.push(None);
        } else {
            let ok = match (fixed, mode) {
                (Some(g), _) => {
                    g.compute(&d[..BOOKIE_HEADER_SIZE], payload).as_bytes()
                        == &d[BOOKIE_HEADER_SIZE..BOOKIE_HEADER_SIZE + n]
                }
                (None, DigestMode::Auto { mac }) => {
                    let tmp;
                    let g = match (t, mac) {
                        (DigestType::Mac, Some(m)) => m,
                        _ => {
                            tmp = Digester::new(t, b"");
                            &tmp
                        }
                    };
                    g.compute(&d[..BOOKIE_HEADER_SIZE], payload).as_bytes()
                        == &d[BOOKIE_HEADER_SIZE..BOOKIE_HEADER_SIZE + n]
                }
                (None, DigestMode::Fixed(_)) => unreachable!(),
            };
            self.digest_ok.push(Some(ok));
        }
        self.payload.append(payload, r.offset + 4 + (BOOKIE_HEADER_SIZE + n) as u64, file);
        self.error.push(None);
        self.bytes += payload.len();
        self.rows += 1;
    }

    fn push_issue(&mut self, log_id: u64, i: &ScanIssue) {
        self.log_id.push(Some(log_id as i64));
        self.offset.push(Some(i.offset as i64));
        self.location.push(None);
        self.ledger_id.push(None);
        self.entry_id.push(None);
        self.lac.push(None);
        self.ledger_length.push(None);
        self.size.push(Some(i.length as i64));
        self.digest_type.push(None);
        self.digest_ok.push(None);
        self.payload.append_null();
        self.issue.push_str(i.kind.name());
        self.error.push_str(&i.message);
        self.rows += 1;
    }

    fn finish(self) -> Result<RecordBatch> {
        let cols: Vec<ArrayRef> = vec![
            self.log_id.finish(),
            self.offset.finish(),
            self.location.finish(),
            self.ledger_id.finish(),
            self.entry_id.finish(),
            self.lac.finish(),
            self.ledger_length.finish(),
            self.size.finish(),
            self.digest_type.utf8()?,
            self.digest_ok.finish(),
            self.payload.finish()?,
            self.issue.utf8()?,
            self.error.utf8()?,
        ];
        Ok(RecordBatch::try_new(schema_for(self.payload_type), cols).expect("columns match the schema"))
    }
}

struct Current {
    path: PathBuf,
    index: usize,
    scanner: Scanner<AnySource>,
    map: Option<std::sync::Arc<memmap2::Mmap>>,
}

/// Scans a list of logs in order, producing bounded record batches.
pub struct MultiLogScan {
    logs: Vec<(PathBuf, u64)>,
    next_log: usize,
    cur: Option<Current>,
    opts: ArrowScanOptions,
    known: HashMap<i64, DigestType>,
    summaries: Vec<(PathBuf, ScanSummary)>,
    /// Issue rows of a finished log not yet in a batch (a log can have more than a batch holds).
    pending: VecDeque<(u64, ScanIssue)>,
}

impl MultiLogScan {
    /// `logs` are (path, log id) pairs, scanned in the order given.
    pub fn new(logs: Vec<(PathBuf, u64)>, mut opts: ArrowScanOptions) -> Self {
        opts.batch_rows = opts.batch_rows.max(1);
        if opts.batch_bytes == 0 {
            opts.batch_bytes = match opts.payload_type {
                PayloadType::Binary => BINARY_BATCH_BYTES,
                PayloadType::BinaryView => ArrowScanOptions::default().batch_bytes,
            };
        }
        if opts.payload_type == PayloadType::Binary {
            // The payload column has 32-bit offsets: a batch stops past 1 GiB, so the entry that ends it
            // (BookKeeper's are a few MB) cannot take the column past 2 GiB.
            opts.batch_bytes = opts.batch_bytes.min(BINARY_BATCH_BYTES_MAX);
            // A copying scan reads each window and copies its payloads out: a window that stays in L2
            // is read back from cache (200 MiB of 1 KiB / 16 KiB entries: ~10% faster than 4 MiB windows).
            opts.scan.chunk_size = opts.scan.chunk_size.min(BINARY_SCAN_CHUNK);
        }
        MultiLogScan {
            logs,
            next_log: 0,
            cur: None,
            opts,
            known: HashMap::new(),
            summaries: Vec::new(),
            pending: VecDeque::new(),
        }
    }

    /// The batch size in bytes this scan uses (after the defaults and caps of [`MultiLogScan::new`]).
    pub fn batch_bytes(&self) -> usize {
        self.opts.batch_bytes
    }

    /// Summaries of the logs finished so far, issues included.
    pub fn summaries(&self) -> &[(PathBuf, ScanSummary)] {
        &self.summaries
    }

    /// The next batch, or `None` when every log has been read. I/O errors (a missing file) are
    /// errors; format problems are issue rows and summary entries.
    pub fn next_batch(&mut self) -> LogResult<Option<RecordBatch>> {
        let rows = self.opts.batch_rows;
        let bytes = self.opts.batch_bytes;
        let mut c = Cols::new(rows.min(65536), bytes.min(8 << 20), self.opts.payload_type);
        while c.rows < rows && c.bytes < bytes {
            // a finished log's issues first, as many as the batch still holds
            if let Some((log_id, i)) = self.pending.pop_front() {
                c.push_issue(log_id, &i);
                continue;
            }
            if self.cur.is_none() {
                let Some((path, id)) = self.logs.get(self.next_log).cloned() else {
                    break;
                };
                let index = self.next_log;
                self.next_log += 1;
                let (src, map) = if self.opts.payload_type == PayloadType::BinaryView {
                    let m = MmapSource::open(&path)?;
                    let map = m.mapping().clone();
                    (AnySource::Mmap(m), Some(map))
                } else {
                    (AnySource::File(FileSource::open(&path)?), None)
                };
                let scanner = Scanner::new(src, id, self.opts.scan.clone())?;
                self.cur = Some(Current { path, index, scanner, map });
            }
            let cur = self.cur.as_mut().unwrap();
            let log_id = cur.scanner.log_id();
            let file = FileRef { index: cur.index, map: cur.map.as_ref() };
            match cur.scanner.next_record()? {
                Some(r) => c.push_record(log_id, &r, &self.opts.digest, &mut self.known, &file),
                None => {
                    let Current { path, mut scanner, .. } = self.cur.take().unwrap();
                    let issues = scanner.take_issues();
                    if self.opts.include_issues {
                        self.pending.extend(issues.iter().map(|i| (log_id, i.clone())));
                    }
                    let mut s = scanner.summary();
                    s.issues = issues;
                    self.summaries.push((path, s));
                }
            }
        }
        if c.rows == 0 {
            return Ok(None);
        }
        Ok(Some(c.finish()?))
    }
}
