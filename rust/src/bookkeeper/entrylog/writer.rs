//! A DefaultEntryLogger-compatible writer.
//!
//! Appends `[int32 len][entry]` records to the active log `<hex id>.log`, buffering up to
//! `write_buffer_size` bytes; [`EntryLogWriter::flush`] writes the buffer and fsyncs, after which
//! every entry appended before it survives a crash. When the next record would take the log past
//! `log_size_limit` the log is rotated: the ledgers map is appended, the header is patched with its
//! offset and ledger count, the file is fsynced and closed, and a new log is started. Like
//! BookKeeper, a writer never appends to a log that existed before it was opened: it allocates a
//! new id above every existing log and the `lastId` file, so a torn tail left by a crash stays in
//! an old log, where the scanner reports it.
use super::format::*;
use super::reader::{read_entry_at, EntryLogReader};
use super::{LogError, LogResult, Source};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Rotate before a record would take the log past this size (BookKeeper's `logSizeLimit`).
    pub log_size_limit: u64,
    /// Bytes buffered in memory before they are written to the file.
    pub write_buffer_size: usize,
    /// fsync on flush, on rotation and when a log or `lastId` is created.
    pub fsync: bool,
    /// Append the ledgers map when the writer is closed, as on rotation (BookKeeper's
    /// DefaultEntryLogger leaves the active log without one; readers then scan it).
    pub seal_on_close: bool,
    /// Header version of new logs: 1 (with ledgers map) or 0 (legacy, never gets a map).
    pub header_version: i32,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            log_size_limit: DEFAULT_LOG_SIZE_LIMIT,
            write_buffer_size: 64 << 10,
            fsync: true,
            seal_on_close: true,
            header_version: HEADER_V1,
        }
    }
}

#[derive(Debug)]
struct ActiveLog {
    log_id: u64,
    path: PathBuf,
    file: File,
    /// Logical end of the log: file plus buffer.
    pos: u64,
    /// Bytes already in the file.
    written: u64,
    buf: Vec<u8>,
    ledgers: BTreeMap<i64, u64>,
    entries: u64,
}

impl ActiveLog {
    fn drain(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.file.write_all(&self.buf)?;
            self.written += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }
}

/// The file written so far, as a read source.
struct Written<'a>(&'a File, u64);

impl Source for Written<'_> {
    fn len(&self) -> u64 {
        self.1
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
}

/// Writes entry logs into one directory (a ledger dir's `current/`).
#[derive(Debug)]
pub struct EntryLogWriter {
    dir: PathBuf,
    opts: WriterOptions,
    active: Option<ActiveLog>,
    next_id: u64,
    rotated: Vec<u64>,
    reader: EntryLogReader,
}

/// Finishes a log whose records end at `pos`: appends the ledgers map (version-1 headers), makes it
/// durable, then points the header at it. Returns the new end of the file. The compactor's
/// `.compacting` logs are sealed the same way as rotated ones.
pub fn seal_log(
    file: &File,
    pos: u64,
    ledgers: &BTreeMap<i64, u64>,
    header_version: i32,
    fsync: bool,
) -> io::Result<u64> {
    let mut end = pos;
    if header_version >= HEADER_V1 && !ledgers.is_empty() {
        let map = encode_ledgers_map(ledgers);
        file.write_all_at(&map, pos)?;
        end += map.len() as u64;
        // The map is durable before the header points at it.
        if fsync {
            file.sync_data()?;
        }
        let mut patch = [0u8; 12];
        patch[..8].copy_from_slice(&(pos as i64).to_be_bytes());
        patch[8..].copy_from_slice(&(ledgers.len() as i32).to_be_bytes());
        file.write_all_at(&patch, LEDGERS_MAP_OFFSET_POSITION)?;
    }
    if fsync {
        file.sync_data()?;
    }
    Ok(end)
}

/// Reads `lastId` (`hex(id)\n`); `None` when absent or unreadable.
pub fn read_last_id(dir: &Path) -> Option<u64> {
    let s = std::fs::read_to_string(dir.join(LAST_ID_FILE)).ok()?;
    u64::from_str_radix(s.trim(), 16).ok()
}

pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Largest id among `<hex>.log` and compaction leftovers (`<hex>.log.<hex>.compacted`,
/// `<hex>.log.compacting`), so a new log never reuses one.
fn max_existing_id(dir: &Path) -> LogResult<Option<u64>> {
    let mut best: Option<u64> = None;
    for e in std::fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
        let e = e.map_err(|e| LogError::io(dir, e))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let mut ids = Vec::new();
        if let Some(id) = parse_log_file_name(name) {
            ids.push(id);
        } else if let Some((a, rest)) = name.split_once(".log.") {
            ids.extend(u64::from_str_radix(a, 16).ok());
            if let Some(b) = rest.strip_suffix(".compacted") {
                ids.extend(u64::from_str_radix(b, 16).ok());
            }
        }
        for id in ids {
            best = Some(best.map_or(id, |b: u64| b.max(id)));
        }
    }
    Ok(best)
}

impl EntryLogWriter {
    /// Opens a writer over `dir` (created if absent). Nothing is written until the first append.
    pub fn open(dir: &Path, opts: WriterOptions) -> LogResult<Self> {
        if opts.log_size_limit < HEADER_SIZE || opts.log_size_limit > i32::MAX as u64 {
            return Err(LogError::invalid(format!(
                "log_size_limit {} outside {HEADER_SIZE}..={}",
                opts.log_size_limit,
                i32::MAX
            )));
        }
        if opts.header_version != HEADER_V0 && opts.header_version != HEADER_V1 {
            return Err(LogError::invalid(format!("header_version must be 0 or 1, not {}", opts.header_version)));
        }
        std::fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
        let last = match (read_last_id(dir), max_existing_id(dir)?) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Ok(EntryLogWriter {
            dir: dir.to_path_buf(),
            opts,
            active: None,
            next_id: last.map_or(0, |l| l + 1),
            rotated: Vec::new(),
            reader: EntryLogReader::new(dir),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn options(&self) -> &WriterOptions {
        &self.opts
    }
    /// Id of the log being written, if one has been started.
    pub fn current_log_id(&self) -> Option<u64> {
        self.active.as_ref().map(|a| a.log_id)
    }
    /// Logs this writer rotated (complete, with their ledgers map).
    pub fn rotated_log_ids(&self) -> &[u64] {
        &self.rotated
    }
    /// Logical size of the active log (header, records and buffered bytes).
    pub fn current_log_size(&self) -> u64 {
        self.active.as_ref().map_or(0, |a| a.pos)
    }
    /// Bytes per ledger in the active log so far.
    pub fn current_ledgers(&self) -> BTreeMap<i64, u64> {
        self.active.as_ref().map(|a| a.ledgers.clone()).unwrap_or_default()
    }

    fn io_err(&self, e: io::Error) -> LogError {
        match &self.active {
            Some(a) => LogError::io(&a.path, e),
            None => LogError::io(&self.dir, e),
        }
    }

    fn write_last_id(&self, id: u64) -> io::Result<()> {
        let tmp = self.dir.join(format!("{LAST_ID_FILE}.tmp"));
        {
            let mut f = File::create(&tmp)?;
            f.write_all(format!("{id:x}\n").as_bytes())?;
            if self.opts.fsync {
                f.sync_all()?;
            }
        }
        std::fs::rename(&tmp, self.dir.join(LAST_ID_FILE))
    }

    fn start_log(&mut self) -> LogResult<()> {
        let mut id = self.next_id;
        loop {
            if id > i32::MAX as u64 {
                id = 0; // BookKeeper wraps ids to stay within 31 bits
            }
            let p = self.dir.join(log_file_name(id));
            if !p.exists() {
                break;
            }
            id += 1;
        }
        let path = self.dir.join(log_file_name(id));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| LogError::io(&path, e))?;
        file.write_all(&LogHeader::new_default_bytes(self.opts.header_version)).map_err(|e| LogError::io(&path, e))?;
        self.write_last_id(id).map_err(|e| LogError::io(&self.dir, e))?;
        if self.opts.fsync {
            file.sync_data().map_err(|e| LogError::io(&path, e))?;
            sync_dir(&self.dir).map_err(|e| LogError::io(&self.dir, e))?;
        }
        self.next_id = id + 1;
        self.active = Some(ActiveLog {
            log_id: id,
            path,
            file,
            pos: HEADER_SIZE,
            written: HEADER_SIZE,
            buf: Vec::with_capacity(self.opts.write_buffer_size.min(16 << 20)),
            ledgers: BTreeMap::new(),
            entries: 0,
        });
        Ok(())
    }

    /// Appends one stored entry (it must start with `ledger_id` and an entry id) and returns its
    /// location `(log_id << 32) | position after the length field`. Durable after [`flush`](Self::flush).
    pub fn append(&mut self, ledger_id: i64, entry: &[u8]) -> LogResult<u64> {
        if ledger_id < 0 {
            return Err(LogError::invalid(format!("ledger id {ledger_id} is negative")));
        }
        if entry.len() < MIN_SANE_ENTRY_SIZE {
            return Err(LogError::invalid(format!(
                "an entry needs at least {MIN_SANE_ENTRY_SIZE} bytes (ledger id, entry id), got {}",
                entry.len()
            )));
        }
        let stored = i64::from_be_bytes(entry[..8].try_into().unwrap());
        if stored != ledger_id {
            return Err(LogError::invalid(format!("entry bytes start with ledger id {stored}, not {ledger_id}")));
        }
        if entry.len() as u64 > i32::MAX as u64 - HEADER_SIZE - 4 {
            return Err(LogError::invalid(format!("entry of {} bytes cannot be framed", entry.len())));
        }
        let rec = 4 + entry.len() as u64;
        if let Some(a) = &self.active {
            if a.entries > 0 && a.pos + rec > self.opts.log_size_limit {
                self.rotate()?;
            }
        }
        if self.active.is_none() {
            self.start_log()?;
        }
        let wbs = self.opts.write_buffer_size;
        let a = self.active.as_mut().unwrap();
        let r: io::Result<()> = (|| {
            if entry.len() >= wbs {
                a.drain()?;
                a.file.write_all(&(entry.len() as i32).to_be_bytes())?;
                a.file.write_all(entry)?;
                a.written += rec;
            } else {
                a.buf.extend_from_slice(&(entry.len() as i32).to_be_bytes());
                a.buf.extend_from_slice(entry);
                if a.buf.len() >= wbs {
                    a.drain()?;
                }
            }
            Ok(())
        })();
        if let Err(e) = r {
            return Err(self.io_err(e));
        }
        let a = self.active.as_mut().unwrap();
        let loc = make_location(a.log_id, a.pos + 4);
        a.pos += rec;
        a.entries += 1;
        *a.ledgers.entry(ledger_id).or_insert(0) += rec;
        Ok(loc)
    }

    /// [`Self::append`] for stored entry bytes, whose first 8 bytes are the ledger id.
    pub fn append_stored(&mut self, entry: &[u8]) -> LogResult<u64> {
        let Some(id) = entry.get(..8) else {
            return Err(LogError::invalid(format!(
                "an entry needs at least {MIN_SANE_ENTRY_SIZE} bytes (ledger id, entry id), got {}",
                entry.len()
            )));
        };
        self.append(i64::from_be_bytes(id.try_into().unwrap()), entry)
    }

    /// Writes buffered records and fsyncs the active log: everything appended so far is durable.
    pub fn flush(&mut self) -> LogResult<()> {
        let fsync = self.opts.fsync;
        if let Some(a) = self.active.as_mut() {
            let r = a.drain().and_then(|_| if fsync { a.file.sync_data() } else { Ok(()) });
            if let Err(e) = r {
                return Err(self.io_err(e));
            }
        }
        Ok(())
    }

    /// Finishes the active log now (ledgers map, header patch, fsync); the next append starts a
    /// new one. Returns the id of the finished log, if there was one.
    pub fn rotate(&mut self) -> LogResult<Option<u64>> {
        let Some(mut a) = self.active.take() else {
            return Ok(None);
        };
        let id = a.log_id;
        self.seal(&mut a).map_err(|e| LogError::io(&a.path, e))?;
        self.rotated.push(id);
        Ok(Some(id))
    }

    fn seal(&self, a: &mut ActiveLog) -> io::Result<()> {
        a.drain()?;
        a.pos = seal_log(&a.file, a.pos, &a.ledgers, self.opts.header_version, self.opts.fsync)?;
        a.written = a.pos;
        Ok(())
    }

    /// Reads the entry at `location`, from this writer's buffer when not yet written.
    pub fn read(&mut self, location: u64, ledger_id: Option<i64>, entry_id: Option<i64>) -> LogResult<Vec<u8>> {
        let (log_id, pos) = split_location(location);
        if let Some(a) = self.active.as_ref().filter(|a| a.log_id == log_id) {
            if pos >= 4 && pos - 4 >= a.written && pos < a.pos {
                let b = &a.buf[(pos - 4 - a.written) as usize..];
                let len = i32::from_be_bytes(b[..4].try_into().unwrap());
                if len < MIN_SANE_ENTRY_SIZE as i32 || 4 + len as usize > b.len() {
                    return Err(LogError::corrupt_at(pos - 4, format!("no record starts at position {pos}")));
                }
                let data = &b[4..4 + len as usize];
                let lid = i64::from_be_bytes(data[..8].try_into().unwrap());
                let eid = i64::from_be_bytes(data[8..16].try_into().unwrap());
                if ledger_id.is_some_and(|l| l != lid) || entry_id.is_some_and(|e| e != eid) {
                    return Err(LogError::corrupt_at(
                        pos,
                        format!("position {pos} holds ledger {lid} entry {eid}, expected {ledger_id:?}/{entry_id:?}"),
                    ));
                }
                return Ok(data.to_vec());
            }
            let src = Written(&a.file, a.written);
            return match read_entry_at(&src, pos, ledger_id, entry_id, usize::MAX) {
                Err(e @ LogError::Io { .. }) => Err(e.with_path(&a.path)),
                other => other,
            };
        }
        self.reader.read(location, ledger_id, entry_id)
    }

    /// Flushes and closes; with `seal_on_close` the active log gets its ledgers map.
    pub fn close(&mut self) -> LogResult<()> {
        if self.opts.seal_on_close {
            self.rotate()?;
        } else {
            self.flush()?;
            self.active = None;
        }
        Ok(())
    }
}

impl Drop for EntryLogWriter {
    fn drop(&mut self) {
        // Best effort: hand buffered bytes to the OS; durability needs an explicit flush.
        if let Some(a) = self.active.as_mut() {
            let _ = a.drain();
        }
    }
}
