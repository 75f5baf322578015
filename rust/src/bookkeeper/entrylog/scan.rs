//! Sequential scan of one entry log, DefaultEntryLogger or DirectEntryLogger format.
//!
//! BookKeeper's own scanner stops quietly at a short read and steps over any non-positive length
//! one byte at a time. This one follows the same framing but accounts for every byte: anything that
//! is not a record, the ledgers map, the direct logger's dummy record, its 0xF0 block padding or
//! its zero-filled preallocated tail is reported as a [`ScanIssue`] with its offset and length.
//! After corruption it resynchronises on the next offset where a chain of plausible records starts,
//! so one bad length does not hide the good entries behind it.
use super::format::*;
use super::{LogResult, Source};
use std::cmp::{max, min};

/// Tuning of a scan. The defaults suit whole-file scans.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// First offset to read (a record boundary); defaults to 1024.
    pub start: Option<u64>,
    /// No record starting at or after this offset is returned; defaults to the file length.
    pub stop: Option<u64>,
    /// Records longer than this are treated as corrupt lengths (BookKeeper's default frame limit is
    /// 5 MiB, so real entries are far below the default).
    pub max_record_size: usize,
    /// Look for the next valid record after corruption instead of giving up on the rest of the file.
    pub resync: bool,
    /// Bytes read from the file per refill of the scan window.
    pub chunk_size: usize,
}

pub const DEFAULT_MAX_RECORD_SIZE: usize = 64 << 20;

/// Bytes read at a record's header when only heads are wanted ([`Scanner::next_head`]): a window of
/// small records at once, a sixth of a typical 100 KB batch entry.
const HEAD_WINDOW: usize = 16 << 10;

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            start: None,
            stop: None,
            max_record_size: DEFAULT_MAX_RECORD_SIZE,
            resync: true,
            chunk_size: 4 << 20,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IssueKind {
    /// The file is shorter than the 1024-byte header: it holds no records.
    TruncatedHeader,
    /// Wrong fingerprint (e.g. a zeroed header), unknown version, or header fields that contradict
    /// the ledgers map found in the file.
    BadHeader,
    /// The last record is cut short by the end of the file (a crash while writing).
    TornTail,
    /// A zero-filled tail in a DefaultEntryLogger file (space never written, e.g. lost on a crash).
    ZeroTail,
    /// Bytes that do not frame as records (bad length, zeroed region); `length` bytes were skipped.
    CorruptRecord,
    /// A well-framed record that is not a ledger entry (negative ledger id, unknown meta record).
    SkippedRecord,
    /// A ledgers-map record that does not decode.
    BadLedgersMap,
}

impl IssueKind {
    pub fn name(self) -> &'static str {
        match self {
            IssueKind::TruncatedHeader => "truncated_header",
            IssueKind::BadHeader => "bad_header",
            IssueKind::TornTail => "torn_tail",
            IssueKind::ZeroTail => "zero_tail",
            IssueKind::CorruptRecord => "corrupt_record",
            IssueKind::SkippedRecord => "skipped_record",
            IssueKind::BadLedgersMap => "bad_ledgers_map",
        }
    }
}

/// Something in a log that is not a readable record, with where it is and how many bytes it spans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanIssue {
    pub kind: IssueKind,
    pub offset: u64,
    pub length: u64,
    pub message: String,
}

/// One record: `offset` is where its length field starts (BookKeeper's scan offset and readlog
/// `ByteOffset`); its location is `(log_id << 32) | (offset + 4)`. `data` is the stored entry,
/// starting with ledger id and entry id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub offset: u64,
    pub ledger_id: i64,
    pub entry_id: i64,
    pub data: &'a [u8],
}

impl Record<'_> {
    pub fn location(&self, log_id: u64) -> u64 {
        make_location(log_id, self.offset + 4)
    }
    /// The length field: bytes of `data`.
    pub fn size(&self) -> usize {
        self.data.len()
    }
}

/// What a finished (or stopped) scan saw.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanSummary {
    pub log_id: u64,
    pub file_size: u64,
    pub format: LogFormat,
    pub header: Option<LogHeader>,
    pub records: u64,
    /// Σ (len + 4) of the records returned.
    pub record_bytes: u64,
    /// Offset just after the last good record or ledgers-map record.
    pub data_end: u64,
    /// Offset of the first ledgers-map record met, if any.
    pub ledgers_map_offset: Option<u64>,
    /// Ledgers listed by the ledgers-map records met.
    pub ledgers_map: Vec<(i64, i64)>,
    /// Start of a DirectEntryLogger file's zero-filled (preallocated) tail.
    pub zero_tail_offset: Option<u64>,
    pub issues: Vec<ScanIssue>,
}

#[inline]
fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes(b[..4].try_into().unwrap())
}
#[inline]
fn be_i64(b: &[u8]) -> i64 {
    i64::from_be_bytes(b[..8].try_into().unwrap())
}

/// Lowest entry id that can appear in a record (BookKeeper's meta entries go down to -0x8000).
const MIN_PLAUSIBLE_ENTRY_ID: i64 = -0x8000;

/// A sequential scanner. Call [`Scanner::next_record`] until `None`, then [`Scanner::summary`].
pub struct Scanner<S: Source> {
    src: S,
    log_id: u64,
    file_len: u64,
    header: Option<LogHeader>,
    format: LogFormat,
    pos: u64,
    stop: u64,
    opts: ScanOptions,
    win: Vec<u8>,
    win_start: u64,
    win_len: usize,
    issues: Vec<ScanIssue>,
    records: u64,
    record_bytes: u64,
    data_end: u64,
    map_offset: Option<u64>,
    map_entries: Vec<(i64, i64)>,
    zero_tail: Option<u64>,
    full_scan: bool,
    done: bool,
}

impl<S: Source> Scanner<S> {
    /// Reads and checks the header; header problems become issues, not errors.
    pub fn new(src: S, log_id: u64, opts: ScanOptions) -> LogResult<Self> {
        let file_len = src.len();
        let mut s = Scanner {
            src,
            log_id,
            file_len,
            header: None,
            format: LogFormat::Default,
            pos: HEADER_SIZE,
            stop: file_len,
            full_scan: opts.start.is_none() && opts.stop.is_none(),
            opts,
            win: Vec::new(),
            win_start: 0,
            win_len: 0,
            issues: Vec::new(),
            records: 0,
            record_bytes: 0,
            data_end: HEADER_SIZE,
            map_offset: None,
            map_entries: Vec::new(),
            zero_tail: None,
            done: false,
        };
        s.opts.chunk_size = s.opts.chunk_size.max(64 << 10);
        s.opts.max_record_size = s.opts.max_record_size.max(MIN_SANE_ENTRY_SIZE);
        let head_len = min(file_len, HEADER_SIZE + 12) as usize;
        if head_len < 20 {
            let message = format!("file of {file_len} bytes is shorter than the 20-byte entry log header");
            s.end_in_header(0, file_len, message);
            return Ok(s);
        }
        s.fill(0, head_len)?;
        let head = s.bytes(0, head_len);
        let header = LogHeader::parse(head)?;
        let zeroed = head[..min(head_len, HEADER_SIZE as usize)].iter().all(|&b| b == 0);
        s.format = header.format;
        if zeroed {
            s.issue(IssueKind::BadHeader, 0, min(file_len, HEADER_SIZE), "entry log header is zeroed".into());
        } else if !header.fingerprint_ok() {
            s.issue(
                IssueKind::BadHeader,
                0,
                4,
                format!("fingerprint is {:02x?}, expected \"BKLO\"", header.fingerprint),
            );
        } else if header.version != HEADER_V0 && header.version != HEADER_V1 {
            s.issue(IssueKind::BadHeader, 4, 4, format!("unknown header version {}", header.version));
        }
        s.header = Some(header);
        if file_len < HEADER_SIZE {
            s.end_in_header(file_len, 0, format!("file of {file_len} bytes ends inside the {HEADER_SIZE}-byte header"));
            return Ok(s);
        }
        s.pos = s.opts.start.unwrap_or(HEADER_SIZE).max(HEADER_SIZE);
        s.data_end = s.pos;
        s.stop = s.opts.stop.map_or(file_len, |e| e.min(file_len));
        Ok(s)
    }

    pub fn log_id(&self) -> u64 {
        self.log_id
    }
    pub fn header(&self) -> Option<&LogHeader> {
        self.header.as_ref()
    }
    pub fn format(&self) -> LogFormat {
        self.format
    }
    pub fn file_len(&self) -> u64 {
        self.file_len
    }
    /// Offset of the next byte the scan will look at.
    pub fn position(&self) -> u64 {
        self.pos
    }
    pub fn is_done(&self) -> bool {
        self.done
    }
    pub fn issues(&self) -> &[ScanIssue] {
        &self.issues
    }
    /// Removes and returns the issues found so far (for streaming consumers).
    pub fn take_issues(&mut self) -> Vec<ScanIssue> {
        std::mem::take(&mut self.issues)
    }

    /// The next entry record, or `None` at the end. Errors are I/O errors only; format problems
    /// are recorded as issues.
    pub fn next_record(&mut self) -> LogResult<Option<Record<'_>>> {
        let Some((off, len)) = self.advance(true)? else {
            return Ok(None);
        };
        let data = self.bytes(off + 4, len);
        Ok(Some(Record { offset: off, ledger_id: be_i64(data), entry_id: be_i64(&data[8..]), data }))
    }

    /// The next entry record's offset, ledger id, entry id and length (ids included, as in
    /// [`Record::data`]) without reading the rest of it: the same records and issues as
    /// [`Self::next_record`], for accounting that needs no entry bytes. A file source reads a small
    /// window at each header, so the bodies of large records are skipped (a map-less entry log's
    /// metadata: 750 MB of log read in 0.15 s whole, bench/RESULTS.md, issue 24, "start-up").
    pub fn next_head(&mut self) -> LogResult<Option<(u64, i64, i64, usize)>> {
        let Some((off, len)) = self.advance(false)? else {
            return Ok(None);
        };
        let h = self.bytes(off + 4, 16);
        Ok(Some((off, be_i64(h), be_i64(&h[8..]), len)))
    }

    /// Runs the scan to the end, calling `f` for each record.
    pub fn for_each(&mut self, mut f: impl FnMut(&Record<'_>)) -> LogResult<()> {
        while let Some(r) = self.next_record()? {
            f(&r);
        }
        Ok(())
    }

    /// What the scan saw; call after `next_record` returned `None` for a complete report.
    pub fn summary(&self) -> ScanSummary {
        ScanSummary {
            log_id: self.log_id,
            file_size: self.file_len,
            format: self.format,
            header: self.header.clone(),
            records: self.records,
            record_bytes: self.record_bytes,
            data_end: self.data_end,
            ledgers_map_offset: self.map_offset,
            ledgers_map: self.map_entries.clone(),
            zero_tail_offset: self.zero_tail,
            issues: self.issues.clone(),
        }
    }

    fn issue(&mut self, kind: IssueKind, offset: u64, length: u64, message: String) {
        self.issues.push(ScanIssue { kind, offset, length, message });
    }

    /// A file too short to hold its header: the issue, and a scan that is over (no data region).
    fn end_in_header(&mut self, offset: u64, length: u64, message: String) {
        self.issue(IssueKind::TruncatedHeader, offset, length, message);
        self.done = true;
        self.data_end = self.file_len;
    }

    /// Makes `[pos, pos + n)` available in the window (the caller checked it is inside the file).
    fn fill(&mut self, pos: u64, n: usize) -> LogResult<()> {
        self.fill_by(pos, n, self.opts.chunk_size)
    }

    /// [`Self::fill`] reading `chunk` bytes (or `n`, if more) when it reads.
    fn fill_by(&mut self, pos: u64, n: usize, chunk: usize) -> LogResult<()> {
        if self.src.as_slice().is_some() {
            return Ok(());
        }
        if pos >= self.win_start && pos + n as u64 <= self.win_start + self.win_len as u64 {
            return Ok(());
        }
        let want = max(n as u64, chunk as u64).min(self.file_len - pos) as usize;
        debug_assert!(want >= n);
        if self.win.len() < want {
            self.win.resize(want, 0);
        }
        self.win_len = 0;
        self.src.read_exact_at(&mut self.win[..want], pos)?;
        self.win_start = pos;
        self.win_len = want;
        Ok(())
    }

    #[inline]
    fn bytes(&self, pos: u64, n: usize) -> &[u8] {
        if let Some(all) = self.src.as_slice() {
            return &all[pos as usize..pos as usize + n];
        }
        let s = (pos - self.win_start) as usize;
        &self.win[s..s + n]
    }

    fn finish(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        if !self.full_scan {
            return;
        }
        // A header that names a ledgers map must agree with the map the scan found, unless the offset it names
        // cannot be one (inside the header, or past what BookKeeper's 32-bit map positions reach) and the log has
        // no map: BookKeeper 4.16 (Pulsar 3.0) writes a new log's header from an uninitialised buffer, only the
        // fingerprint and version set, and fills in the map's offset and count when it closes the log with its
        // map; until then they hold whatever that memory held (real data: bytes of a jar's directory;
        // apache/bookkeeper#4607, fixed in 4.16.7 and 4.17.2), and BookKeeper, finding no map there, scans the
        // log. A possible offset with no map there is reported: the log may have been cut before its map.
        let Some(h) = self.header.clone() else { return };
        let off = h.ledgers_map_offset;
        let impossible = off < self.format.data_start() as i64 || off > i32::MAX as i64;
        if h.version < HEADER_V1 || off == 0 || (self.map_offset.is_none() && impossible) {
            return;
        }
        match self.map_offset {
            Some(off) if off as i64 == h.ledgers_map_offset => {
                if h.ledgers_count as i64 != self.map_entries.len() as i64 {
                    self.issue(
                        IssueKind::BadHeader,
                        LEDGERS_COUNT_POSITION,
                        4,
                        format!(
                            "header says {} ledgers, the ledgers map at {off} lists {}",
                            h.ledgers_count,
                            self.map_entries.len()
                        ),
                    );
                }
            }
            found => self.issue(
                IssueKind::BadHeader,
                LEDGERS_MAP_OFFSET_POSITION,
                8,
                match found {
                    Some(off) => {
                        format!("header points to a ledgers map at {}, the map is at {off}", h.ledgers_map_offset)
                    }
                    None if off as u64 >= self.file_len => format!(
                        "header points to a ledgers map at {off}, past the end of the file ({} bytes): cut short?",
                        self.file_len
                    ),
                    None => format!("header points to a ledgers map at {off}, the file has none"),
                },
            ),
        }
    }

    /// Moves to the next entry record; returns its (offset, data length), window filled.
    /// The next entry record's offset and length; with `body`, its bytes are in the window too.
    fn advance(&mut self, body: bool) -> LogResult<Option<(u64, usize)>> {
        loop {
            if self.done {
                return Ok(None);
            }
            let pos = self.pos;
            if pos >= self.stop {
                self.finish();
                return Ok(None);
            }
            let avail = self.file_len - pos;
            if avail < 4 {
                self.fill(pos, avail as usize)?;
                let tail = self.bytes(pos, avail as usize);
                if self.format == LogFormat::Direct && tail.iter().all(|&b| b == 0) {
                    self.on_zero(pos)?;
                } else if tail.iter().all(|&b| b == DIRECT_PADDING_BYTE) {
                    self.pos = self.file_len;
                } else {
                    self.issue(
                        IssueKind::TornTail,
                        pos,
                        avail,
                        format!("file ends {avail} bytes into the length field of a record at offset {pos}"),
                    );
                    self.finish();
                }
                continue;
            }
            let hn = min(avail, 20) as usize;
            self.fill_by(pos, hn, if body { self.opts.chunk_size } else { HEAD_WINDOW })?;
            let h = self.bytes(pos, hn);
            let len = be_i32(h);
            if len == 0 {
                self.on_zero(pos)?;
                continue;
            }
            if len < 0 {
                if h[..4] == [DIRECT_PADDING_BYTE; 4] && self.skip_padding(pos)? {
                    continue;
                }
                self.corrupt_from(pos, pos + 1, format!("negative record length {len} at offset {pos}"))?;
                continue;
            }
            let len = len as u64;
            if len < MIN_SANE_ENTRY_SIZE as u64 {
                self.corrupt_from(
                    pos,
                    pos + 1,
                    format!("record length {len} at offset {pos} is below the minimum of {MIN_SANE_ENTRY_SIZE}"),
                )?;
                continue;
            }
            if len > avail - 4 {
                self.past_eof(pos, len)?;
                continue;
            }
            if len > self.opts.max_record_size as u64 {
                self.corrupt_from(
                    pos,
                    pos + 1,
                    format!(
                        "record length {len} at offset {pos} exceeds max_record_size {}",
                        self.opts.max_record_size
                    ),
                )?;
                continue;
            }
            let lid = be_i64(&h[4..]);
            let eid = be_i64(&h[12..]);
            let next = pos + 4 + len;
            if lid == INVALID_LID {
                if eid == LEDGERS_MAP_ENTRY_ID {
                    self.on_map_record(pos, len as usize)?;
                } else if !(pos == HEADER_SIZE && len == DIRECT_DUMMY_LEN as u64) {
                    self.issue(
                        IssueKind::SkippedRecord,
                        pos,
                        4 + len,
                        format!("record at offset {pos} has ledger id -1 and entry id {eid}: not an entry"),
                    );
                }
                self.pos = next;
                self.data_end = next;
                continue;
            }
            if lid < 0 {
                self.issue(
                    IssueKind::SkippedRecord,
                    pos,
                    4 + len,
                    format!("record at offset {pos} has negative ledger id {lid} (entry id {eid})"),
                );
                self.pos = next;
                continue;
            }
            if body {
                self.fill(pos, 4 + len as usize)?;
            }
            self.pos = next;
            self.data_end = next;
            self.records += 1;
            self.record_bytes += 4 + len;
            return Ok(Some((pos, len as usize)));
        }
    }

    fn on_map_record(&mut self, pos: u64, len: usize) -> LogResult<()> {
        self.fill(pos, 4 + len)?;
        let mut entries = Vec::new();
        let body = self.bytes(pos + 4, len);
        match decode_ledgers_map_record(body, pos + 4, &mut entries) {
            Ok(_) => {
                self.map_offset.get_or_insert(pos);
                self.map_entries.extend(entries);
            }
            Err(e) => {
                self.issue(IssueKind::BadLedgersMap, pos, 4 + len as u64, e.to_string());
            }
        }
        Ok(())
    }

    /// 0xF0 padding up to the next 4 KiB boundary (DirectEntryLogger). False if the fill is not
    /// all padding.
    fn skip_padding(&mut self, pos: u64) -> LogResult<bool> {
        let next = min((pos / DIRECT_ALIGNMENT + 1) * DIRECT_ALIGNMENT, self.file_len);
        let n = (next - pos) as usize;
        self.fill(pos, n)?;
        if self.bytes(pos, n).iter().all(|&b| b == DIRECT_PADDING_BYTE) {
            self.pos = next;
            return Ok(true);
        }
        Ok(false)
    }

    /// First non-zero byte at or after `pos`, reading through the window.
    fn find_nonzero(&mut self, pos: u64) -> LogResult<Option<u64>> {
        let mut p = pos;
        while p < self.file_len {
            let n = min(self.file_len - p, self.opts.chunk_size as u64) as usize;
            self.fill(p, n)?;
            let s = self.bytes(p, n);
            let mut i = 0;
            // Word at a time: zero tails can be as long as the log size limit.
            while i + 8 <= s.len() && u64::from_ne_bytes(s[i..i + 8].try_into().unwrap()) == 0 {
                i += 8;
            }
            if let Some(k) = s[i..].iter().position(|&b| b != 0) {
                return Ok(Some(p + (i + k) as u64));
            }
            p += n as u64;
        }
        Ok(None)
    }

    fn on_zero(&mut self, pos: u64) -> LogResult<()> {
        match self.find_nonzero(pos)? {
            None => {
                if self.format == LogFormat::Direct {
                    self.zero_tail = Some(pos);
                } else {
                    self.issue(
                        IssueKind::ZeroTail,
                        pos,
                        self.file_len - pos,
                        format!(
                            "the last {} bytes (from offset {pos}) are zeros: space that was never written",
                            self.file_len - pos
                        ),
                    );
                }
                self.finish();
            }
            Some(nz) => {
                // A length field may begin with up to three zero bytes.
                let from = max(pos + 1, nz.saturating_sub(3));
                self.corrupt_from(pos, from, format!("{} zero bytes at offset {pos}", nz - pos))?;
            }
        }
        Ok(())
    }

    fn past_eof(&mut self, pos: u64, len: u64) -> LogResult<()> {
        let avail = self.file_len - pos - 4;
        if self.opts.resync {
            if let Some(q) = self.find_resync(pos + 1)? {
                self.issue(
                    IssueKind::CorruptRecord,
                    pos,
                    q - pos,
                    format!(
                        "record at offset {pos} declares {len} bytes but only {avail} remain; the next valid record is at {q}"
                    ),
                );
                self.pos = q;
                return Ok(());
            }
        }
        self.issue(
            IssueKind::TornTail,
            pos,
            self.file_len - pos,
            format!("record at offset {pos} declares {len} bytes but the file ends after {avail}: torn tail"),
        );
        self.finish();
        Ok(())
    }

    /// Reports `[bad, next valid record)` as corrupt and moves there, or gives up on the rest.
    fn corrupt_from(&mut self, bad: u64, from: u64, reason: String) -> LogResult<()> {
        if self.opts.resync {
            if let Some(q) = self.find_resync(from)? {
                self.issue(
                    IssueKind::CorruptRecord,
                    bad,
                    q - bad,
                    format!("{reason}; skipped {} bytes to the next valid record at {q}", q - bad),
                );
                self.pos = q;
                return Ok(());
            }
        }
        let rest = self.file_len - bad;
        self.issue(
            IssueKind::CorruptRecord,
            bad,
            rest,
            format!("{reason}; no valid record follows, the last {rest} bytes are unreadable"),
        );
        self.finish();
        Ok(())
    }

    /// Whether a record could start at `q`, judged from its first 20 bytes.
    fn plausible(&self, q: u64, h: &[u8]) -> bool {
        let len = be_i32(h) as i64;
        if len < MIN_SANE_ENTRY_SIZE as i64 || len as u64 > self.opts.max_record_size as u64 {
            return false;
        }
        if q + 4 + len as u64 > self.file_len {
            return false;
        }
        let lid = be_i64(&h[4..]);
        let eid = be_i64(&h[12..]);
        (lid >= 0 && eid >= MIN_PLAUSIBLE_ENTRY_ID) || (lid == INVALID_LID && eid == LEDGERS_MAP_ENTRY_ID)
    }

    /// Up to three plausible records in a row from `q`, or fewer ending exactly at the end of the
    /// data (end of file, zero tail, block padding).
    fn chain_ok(&self, q: u64) -> LogResult<bool> {
        let mut p = q;
        let mut h = [0u8; 20];
        for i in 0..3 {
            let avail = self.file_len - p;
            if avail == 0 {
                return Ok(i > 0);
            }
            if avail < 20 {
                let mut t = vec![0u8; avail as usize];
                self.src.read_exact_at(&mut t, p)?;
                return Ok(i > 0 && (t.iter().all(|&b| b == 0) || t.iter().all(|&b| b == DIRECT_PADDING_BYTE)));
            }
            self.src.read_exact_at(&mut h, p)?;
            if i > 0 && (h[..4] == [0; 4] || h[..4] == [DIRECT_PADDING_BYTE; 4]) {
                return Ok(true);
            }
            if !self.plausible(p, &h) {
                return Ok(false);
            }
            p += 4 + be_i32(&h) as u64;
        }
        Ok(true)
    }

    fn find_resync(&mut self, from: u64) -> LogResult<Option<u64>> {
        let mut q = from;
        while q + 20 <= self.file_len {
            self.fill(q, 20)?;
            let h: [u8; 20] = self.bytes(q, 20).try_into().unwrap();
            if self.plausible(q, &h) && self.chain_ok(q)? {
                return Ok(Some(q));
            }
            q += 1;
        }
        Ok(None)
    }
}

/// A record copied out of the scan window: (offset, ledger id, entry id, data).
pub type OwnedRecord = (u64, i64, i64, Vec<u8>);

/// Scans a whole log and returns its records plus the summary.
pub fn scan_all<S: Source>(src: S, log_id: u64, opts: ScanOptions) -> LogResult<(Vec<OwnedRecord>, ScanSummary)> {
    let mut s = Scanner::new(src, log_id, opts)?;
    let mut out = Vec::new();
    while let Some(r) = s.next_record()? {
        out.push((r.offset, r.ledger_id, r.entry_id, r.data.to_vec()));
    }
    Ok((out, s.summary()))
}
