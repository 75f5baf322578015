//! Reading entry logs: one file ([`EntryLogFile`]) or a directory of them ([`EntryLogReader`]).
use super::format::*;
use super::scan::{ScanIssue, ScanOptions, ScanSummary, Scanner};
use super::{FileSource, LogError, LogResult, Source};
use crate::bookkeeper::digest::Digester;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// A log's ledger accounting and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataReport {
    pub metadata: EntryLogMetadata,
    /// True when read from the ledgers map named in the header, false when built by a scan.
    pub from_index: bool,
    /// Why the ledgers map was not used (missing, empty, inconsistent), when it was not.
    pub fallback_reason: Option<String>,
    /// Issues met by the fallback scan (empty when the map was used).
    pub issues: Vec<ScanIssue>,
}

/// Reads the ledgers map a header points to and checks it against the file. `Err` carries the
/// reason to fall back to a scan.
pub fn metadata_from_index<S: Source>(src: &S, log_id: u64) -> std::result::Result<EntryLogMetadata, String> {
    let file_len = src.len();
    let mut head = vec![0u8; (HEADER_SIZE + 12).min(file_len) as usize];
    src.read_exact_at(&mut head, 0).map_err(|e| format!("cannot read the header: {e}"))?;
    let h = LogHeader::parse(&head).map_err(|e| e.to_string())?;
    if !h.fingerprint_ok() {
        return Err("the header has no BKLO fingerprint".into());
    }
    if h.version < HEADER_V1 {
        return Err(format!("header version {} has no ledgers map", h.version));
    }
    if h.ledgers_map_offset == 0 {
        return Err("no ledgers map (the log was not rotated or closed cleanly)".into());
    }
    if h.ledgers_count <= 0 {
        return Err(format!("header says {} ledgers while naming a ledgers map", h.ledgers_count));
    }
    let data_start = h.format.data_start();
    let map_off = h.ledgers_map_offset;
    if map_off < data_start as i64 || map_off as u64 >= file_len || map_off > i32::MAX as i64 {
        return Err(format!("ledgers map offset {map_off} lies outside the data of a {file_len}-byte file"));
    }
    let mut pos = map_off as u64;
    let mut entries: Vec<(i64, i64)> = Vec::new();
    let mut rec = Vec::new();
    let max_rec = LEDGERS_MAP_HEADER_SIZE - 4 + LEDGERS_MAP_MAX_BATCH_SIZE * LEDGERS_MAP_ENTRY_SIZE;
    while pos + 4 <= file_len {
        let mut lb = [0u8; 4];
        src.read_exact_at(&mut lb, pos).map_err(|e| format!("cannot read the ledgers map at {pos}: {e}"))?;
        let len = i32::from_be_bytes(lb);
        if len <= 0 {
            break;
        }
        let len = len as usize;
        if len > max_rec || pos + 4 + len as u64 > file_len {
            return Err(format!("ledgers-map record at {pos} has impossible length {len}"));
        }
        rec.resize(len, 0);
        src.read_exact_at(&mut rec, pos + 4).map_err(|e| format!("cannot read the ledgers map at {pos}: {e}"))?;
        decode_ledgers_map_record(&rec, pos + 4, &mut entries).map_err(|e| e.to_string())?;
        if entries.len() > h.ledgers_count as usize {
            return Err(format!("ledgers map lists more than the {} ledgers the header says", h.ledgers_count));
        }
        pos += 4 + len as u64;
    }
    if entries.len() != h.ledgers_count as usize {
        return Err(format!("ledgers map lists {} ledgers, the header says {}", entries.len(), h.ledgers_count));
    }
    if h.format == LogFormat::Default && pos < file_len {
        return Err(format!("{} bytes follow the ledgers map", file_len - pos));
    }
    let mut meta = EntryLogMetadata::new(log_id);
    let mut ledgers = BTreeMap::new();
    for (l, s) in entries {
        if l < 0 || s <= 0 {
            return Err(format!("ledgers map has ledger {l} with {s} bytes"));
        }
        if ledgers.insert(l, s as u64).is_some() {
            return Err(format!("ledgers map lists ledger {l} twice"));
        }
    }
    let region = map_off as u64 - data_start;
    // checked: forged sizes near 2^63 would wrap to exactly the region and pass the check below
    let total = ledgers.values().try_fold(0u64, |t, &s| t.checked_add(s));
    let Some(total) = total.filter(|&t| t <= region) else {
        return Err(format!("ledgers map accounts for more bytes than the {region} bytes of records before it"));
    };
    // Default logs hold records back to back, so their sizes must add up to the data region exactly;
    // direct logs pad blocks, so the sum can only be smaller.
    let fits = match h.format {
        LogFormat::Default => total == region,
        LogFormat::Direct => total <= region,
    };
    if !fits {
        return Err(format!("ledgers map accounts for {total} bytes but {region} bytes of records precede it"));
    }
    for (l, s) in ledgers {
        meta.add_ledger_size(l, s);
    }
    Ok(meta)
}

/// Ledger accounting from a scan: `len + 4` per entry record, as BookKeeper counts it.
pub fn metadata_by_scan<S: Source>(
    src: S,
    log_id: u64,
    opts: ScanOptions,
) -> LogResult<(EntryLogMetadata, ScanSummary)> {
    let mut s = Scanner::new(src, log_id, ScanOptions { start: None, stop: None, ..opts })?;
    let mut meta = EntryLogMetadata::new(log_id);
    while let Some((_, ledger_id, _, len)) = s.next_head()? {
        meta.add_ledger_size(ledger_id, len as u64 + 4);
    }
    Ok((meta, s.summary()))
}

/// With `use_index`, the ledgers map when it is present and consistent, a scan otherwise (the
/// reason given); without, always a scan (no fallback reason: none was tried).
pub fn read_metadata<S: Source>(src: S, log_id: u64, opts: ScanOptions, use_index: bool) -> LogResult<MetadataReport> {
    let fallback_reason = if use_index {
        match metadata_from_index(&src, log_id) {
            Ok(metadata) => {
                return Ok(MetadataReport { metadata, from_index: true, fallback_reason: None, issues: Vec::new() })
            }
            Err(reason) => Some(reason),
        }
    } else {
        None
    };
    let (metadata, summary) = metadata_by_scan(src, log_id, opts)?;
    Ok(MetadataReport { metadata, from_index: false, fallback_reason, issues: summary.issues })
}

/// Reads the entry at `pos` (the position after its length field), checking the length against the
/// file and, when given, the ledger and entry ids. `file_len` bounds every read.
pub fn read_entry_at<S: Source>(
    src: &S,
    pos: u64,
    ledger_id: Option<i64>,
    entry_id: Option<i64>,
    max_record_size: usize,
) -> LogResult<Vec<u8>> {
    let file_len = src.len();
    if pos < HEADER_SIZE + 4 {
        return Err(LogError::corrupt_at(pos, format!("position {pos} lies inside the entry log header")));
    }
    if pos + MIN_SANE_ENTRY_SIZE as u64 > file_len {
        return Err(LogError::corrupt_at(
            pos,
            format!("position {pos} is past the end of the {file_len}-byte entry log"),
        ));
    }
    let mut hb = [0u8; 20];
    src.read_exact_at(&mut hb, pos - 4)?;
    let len = i32::from_be_bytes(hb[0..4].try_into().unwrap());
    if len < MIN_SANE_ENTRY_SIZE as i32 {
        return Err(LogError::corrupt_at(pos - 4, format!("entry at position {pos} has invalid length {len}")));
    }
    let len = len as u64;
    if len > max_record_size as u64 || pos + len > file_len {
        return Err(LogError::corrupt_at(
            pos - 4,
            format!("entry at position {pos} declares {len} bytes, the file holds {} after it", file_len - pos),
        ));
    }
    let lid = i64::from_be_bytes(hb[4..12].try_into().unwrap());
    let eid = i64::from_be_bytes(hb[12..20].try_into().unwrap());
    if ledger_id.is_some_and(|l| l != lid) || entry_id.is_some_and(|e| e != eid) {
        return Err(LogError::corrupt_at(
            pos,
            format!(
                "position {pos} holds ledger {lid} entry {eid}, expected ledger {} entry {}",
                ledger_id.map_or("?".into(), |l| l.to_string()),
                entry_id.map_or("?".into(), |e| e.to_string())
            ),
        ));
    }
    let mut out = vec![0u8; len as usize];
    src.read_exact_at(&mut out, pos)?;
    Ok(out)
}

/// A stretch of an entry log read at once: consecutive small entries (what an unbatched topic
/// stores) are then one read of the file, not two each (the record's header, then the entry).
#[derive(Debug)]
pub struct Block {
    start: u64,
    bytes: Vec<u8>,
}

/// A file's reads served from a [`Block`] where it holds the bytes asked for.
struct BlockSource<'a> {
    block: &'a Block,
    file: &'a FileSource,
}

impl Source for BlockSource<'_> {
    fn len(&self) -> u64 {
        self.file.len()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let b = self.block;
        match offset.checked_sub(b.start).map(|at| at as usize) {
            Some(at) if at.checked_add(buf.len()).is_some_and(|end| end <= b.bytes.len()) => {
                buf.copy_from_slice(&b.bytes[at..at + buf.len()]);
                Ok(())
            }
            _ => self.file.read_exact_at(buf, offset),
        }
    }
}

/// Entries whose positions follow each other in one log by at most this much (small entries) are read
/// a block at a time; a larger one is read by itself (copying it through a block would cost more than
/// the read saved).
const SMALL_ENTRY: u64 = 16 << 10;
/// The most a run's positions span (its block reaches [`SMALL_ENTRY`] further).
const READ_AHEAD: u64 = 256 << 10;

/// One entry-log file.
#[derive(Debug)]
pub struct EntryLogFile {
    path: PathBuf,
    log_id: u64,
    src: FileSource,
}

impl EntryLogFile {
    /// Opens `<hex id>.log`; the log id comes from the name.
    pub fn open(path: &Path) -> LogResult<Self> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let log_id = parse_log_file_name(name)
            .ok_or_else(|| LogError::invalid(format!("{}: not an entry log name (<hex id>.log)", path.display())))?;
        Self::open_with_id(path, log_id)
    }

    /// Opens a file under any name, with the log id given.
    pub fn open_with_id(path: &Path, log_id: u64) -> LogResult<Self> {
        Ok(EntryLogFile { path: path.to_path_buf(), log_id, src: FileSource::open(path)? })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn log_id(&self) -> u64 {
        self.log_id
    }
    pub fn len(&self) -> u64 {
        self.src.len()
    }
    pub fn is_empty(&self) -> bool {
        self.src.len() == 0
    }
    pub fn source(&self) -> &FileSource {
        &self.src
    }

    /// The header as stored (not validated; see [`Scanner`] for checks).
    pub fn header(&self) -> LogResult<LogHeader> {
        let n = (HEADER_SIZE + 12).min(self.src.len()) as usize;
        let mut head = vec![0u8; n];
        self.src.read_exact_at(&mut head, 0).map_err(|e| LogError::io(&self.path, e))?;
        LogHeader::parse(&head)
    }

    /// Reads the entry at `pos` (location & 0xffffffff). A log still being written is re-measured
    /// when the position lies past the length seen at open.
    pub fn read_entry(&mut self, pos: u64, ledger_id: Option<i64>, entry_id: Option<i64>) -> LogResult<Vec<u8>> {
        self.read_entry_in(None, pos, ledger_id, entry_id)
    }

    /// [`Self::read_entry`] with its reads served from `block` where it holds them (the same bytes:
    /// a read outside it goes to the file).
    pub fn read_entry_in(
        &mut self,
        block: Option<&Block>,
        pos: u64,
        ledger_id: Option<i64>,
        entry_id: Option<i64>,
    ) -> LogResult<Vec<u8>> {
        if pos + MIN_SANE_ENTRY_SIZE as u64 > self.src.len() {
            self.src.refresh_len().map_err(|e| LogError::io(&self.path, e))?;
        }
        // Reads by location trust the index, so any length the file can hold is accepted.
        let got = match block {
            Some(block) => {
                read_entry_at(&BlockSource { block, file: &self.src }, pos, ledger_id, entry_id, i32::MAX as usize)
            }
            None => read_entry_at(&self.src, pos, ledger_id, entry_id, i32::MAX as usize),
        };
        match got {
            Err(e @ LogError::Io { .. }) => Err(e.with_path(&self.path)),
            other => other,
        }
    }

    /// Bytes `[start, end)` of the file in one read, clipped to the length known (a log still being
    /// written is re-measured only as [`Self::read_entry`] does); None when that read fails (the
    /// entries are then read one by one, each failing as it would).
    pub fn read_block(&mut self, start: u64, end: u64) -> Option<Block> {
        let end = end.min(self.src.len());
        let mut bytes = vec![0u8; end.checked_sub(start)? as usize];
        self.src.read_exact_at(&mut bytes, start).ok()?;
        Some(Block { start, bytes })
    }

    /// A sequential scanner over a snapshot of the file.
    pub fn scanner(&self, opts: ScanOptions) -> LogResult<Scanner<&FileSource>> {
        Scanner::new(&self.src, self.log_id, opts)
    }

    /// The ledgers map (with `use_index`), or a scan when it is missing, empty or inconsistent
    /// (see [`read_metadata`]).
    pub fn metadata(&self, opts: ScanOptions, use_index: bool) -> LogResult<MetadataReport> {
        read_metadata(&self.src, self.log_id, opts, use_index)
    }
}

/// The entry logs of one directory (a ledger dir's `current/`), read by location. Files are
/// opened on first use and kept open (up to `max_open`).
#[derive(Debug)]
pub struct EntryLogReader {
    dir: PathBuf,
    single: Option<u64>,
    open: HashMap<u64, EntryLogFile>,
    max_open: usize,
}

impl EntryLogReader {
    pub fn new(dir: &Path) -> Self {
        EntryLogReader { dir: dir.to_path_buf(), single: None, open: HashMap::new(), max_open: 256 }
    }

    /// A reader over a directory of logs, or over one file (`log_id` as in [`Self::for_file`]).
    pub fn open(path: &Path, log_id: Option<u64>) -> LogResult<Self> {
        if path.is_dir() {
            Ok(EntryLogReader::new(path))
        } else {
            EntryLogReader::for_file(path, log_id)
        }
    }

    /// A reader over one file; its log id is taken from the name unless given.
    pub fn for_file(path: &Path, log_id: Option<u64>) -> LogResult<Self> {
        let f = match log_id {
            Some(id) => EntryLogFile::open_with_id(path, id)?,
            None => EntryLogFile::open(path)?,
        };
        let id = f.log_id();
        let mut r = EntryLogReader {
            dir: path.parent().unwrap_or(Path::new(".")).to_path_buf(),
            single: Some(id),
            open: HashMap::new(),
            max_open: 1,
        };
        r.open.insert(id, f);
        Ok(r)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Log ids present, ascending.
    pub fn log_ids(&self) -> LogResult<Vec<u64>> {
        if let Some(id) = self.single {
            return Ok(vec![id]);
        }
        list_log_ids(&self.dir)
    }

    pub fn path_of(&self, log_id: u64) -> PathBuf {
        match (self.single, self.open.get(&log_id)) {
            (Some(_), Some(f)) => f.path().to_path_buf(),
            _ => self.dir.join(log_file_name(log_id)),
        }
    }

    /// The open file for `log_id`.
    pub fn file(&mut self, log_id: u64) -> LogResult<&mut EntryLogFile> {
        if !self.open.contains_key(&log_id) {
            if let Some(only) = self.single {
                return Err(LogError::invalid(format!("this reader holds only log {only:x}, not {log_id:x}")));
            }
            if self.open.len() >= self.max_open {
                self.open.clear();
            }
            let f = EntryLogFile::open_with_id(&self.dir.join(log_file_name(log_id)), log_id)?;
            self.open.insert(log_id, f);
        }
        Ok(self.open.get_mut(&log_id).unwrap())
    }

    /// Forgets an open file (after it was deleted or replaced).
    pub fn evict(&mut self, log_id: u64) {
        if self.single.is_none() {
            self.open.remove(&log_id);
        }
    }

    /// The entry at `location`, checked against the expected ids when given.
    pub fn read(&mut self, location: u64, ledger_id: Option<i64>, entry_id: Option<i64>) -> LogResult<Vec<u8>> {
        let (log_id, pos) = split_location(location);
        self.file(log_id)?.read_entry(pos, ledger_id, entry_id)
    }

    /// The payloads of consecutive entries of one ledger, `locations[i]` holding entry
    /// `first_entry_id + i`: each read, its ids checked and its digest verified, as one
    /// [`Self::read`] and [`Digester::verify`] per entry would. A negative location is not read
    /// ([`PayloadRead::NotRead`]: the caller's pruned or journal entry). A bad entry is its own
    /// [`PayloadRead::Bad`]; an I/O error (a log missing or unreadable) ends the read and is
    /// returned as the outer error. The read stops early, after the entry that brings the bytes read
    /// to `max_bytes` (at least one location is always taken), so what it holds stays bounded
    /// whatever the entries' sizes; the caller continues from `out.len()`.
    pub fn read_payloads(
        &mut self,
        locations: &[i64],
        ledger_id: i64,
        first_entry_id: i64,
        digester: &Digester,
        max_bytes: usize,
    ) -> LogResult<Vec<PayloadRead>> {
        let mut out = Vec::with_capacity(locations.len());
        let mut held = 0usize;
        // (log, end of the run, its block: None when the run is one entry or its read failed)
        let mut block: Option<(u64, usize, Option<Block>)> = None;
        for (i, &loc) in locations.iter().enumerate() {
            if held >= max_bytes && !out.is_empty() {
                break;
            }
            if loc < 0 {
                out.push(PayloadRead::NotRead);
                continue;
            }
            let eid = first_entry_id + i as i64;
            let (log_id, pos) = split_location(loc as u64);
            if !matches!(block, Some((l, upto, _)) if l == log_id && i < upto) {
                block = Some(self.block_from(locations, i));
            }
            let b = block.as_ref().and_then(|(_, _, b)| b.as_ref());
            let got = self.file(log_id).and_then(|f| f.read_entry_in(b, pos, Some(ledger_id), Some(eid)));
            match got {
                Ok(stored) => {
                    held += stored.len();
                    // the payload is the stored entry's tail: kept in place, not copied out
                    let start =
                        digester.verify(&stored, Some(ledger_id), Some(eid)).map(|e| stored.len() - e.payload.len());
                    out.push(match start {
                        Ok(start) => PayloadRead::Payload { stored, start },
                        Err(error) => PayloadRead::Bad { error, stored_len: Some(stored.len()) },
                    })
                }
                Err(e @ crate::Error::Io { .. }) => return Err(e),
                Err(error) => out.push(PayloadRead::Bad { error, stored_len: None }),
            }
        }
        Ok(out)
    }

    /// The run of entries from `locations[i]` (not negative): each in the same log, after the one before
    /// by at most [`SMALL_ENTRY`], within [`READ_AHEAD`] of the first; its block reaches [`SMALL_ENTRY`]
    /// past the run's last position. Returns the log, the end of the run and the block: None for a run
    /// of one (read by itself) or when the block's read fails (each entry is then read by itself).
    pub(super) fn block_from(&mut self, locations: &[i64], i: usize) -> (u64, usize, Option<Block>) {
        let (log_id, first) = split_location(locations[i] as u64);
        let (mut last, mut j) = (first, i + 1);
        while let Some(&next) = locations.get(j) {
            let Ok(next) = u64::try_from(next) else { break };
            let (l, p) = split_location(next);
            if l != log_id || p <= last || p - last > SMALL_ENTRY || p - first > READ_AHEAD {
                break;
            }
            (last, j) = (p, j + 1);
        }
        if j - i < 2 {
            return (log_id, j, None);
        }
        // from the first record's length to a small entry past the last one's position
        let b = first.checked_sub(4).and_then(|start| self.file(log_id).ok()?.read_block(start, last + SMALL_ENTRY));
        (log_id, j, b)
    }
}

/// One entry of [`EntryLogReader::read_payloads`].
#[derive(Debug)]
pub enum PayloadRead {
    /// The verified payload: `stored[start..]`, the entry as stored after its header and digest.
    Payload { stored: Vec<u8>, start: usize },
    /// A negative location: not read.
    NotRead,
    /// The entry could not be read (`stored_len` None) or was read and failed its check
    /// (`stored_len`: the stored bytes' length).
    Bad { error: crate::Error, stored_len: Option<usize> },
}

impl PayloadRead {
    /// The verified payload, if this entry has one.
    pub fn payload(&self) -> Option<&[u8]> {
        match self {
            PayloadRead::Payload { stored, start } => Some(&stored[*start..]),
            _ => None,
        }
    }
}

/// Ids of the `<hex>.log` files in `dir`, ascending.
pub fn list_log_ids(dir: &Path) -> LogResult<Vec<u64>> {
    let mut ids = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
        let e = e.map_err(|e| LogError::io(dir, e))?;
        if let Some(id) = e.file_name().to_str().and_then(parse_log_file_name) {
            if e.file_type().map(|t| t.is_file()).unwrap_or(false) {
                ids.push(id);
            }
        }
    }
    ids.sort_unstable();
    Ok(ids)
}
