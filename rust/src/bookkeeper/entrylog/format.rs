//! Constants and small codecs of BookKeeper's entry-log files (DefaultEntryLogger and
//! DirectEntryLogger): file names, the header, record framing and the ledgers map.
use crate::error::{Error, Result};
use std::collections::BTreeMap;

/// Size of the DefaultEntryLogger header; records start here.
pub const HEADER_SIZE: u64 = 1024;
/// Size of the DirectEntryLogger header (`Buffer.ALIGNMENT`).
pub const DIRECT_HEADER_SIZE: u64 = 4096;
/// DirectEntryLogger writes in blocks of this size and pads each flushed block.
pub const DIRECT_ALIGNMENT: u64 = 4096;
/// Fill byte of DirectEntryLogger's block padding (read as a negative length).
pub const DIRECT_PADDING_BYTE: u8 = 0xF0;
/// Length of the dummy record DirectEntryLogger puts at offset 1024 so legacy scanners jump to 4096.
pub const DIRECT_DUMMY_LEN: i32 = (DIRECT_HEADER_SIZE - HEADER_SIZE - 4) as i32;
pub const FINGERPRINT: &[u8; 4] = b"BKLO";
pub const HEADER_V0: i32 = 0;
/// Version with a ledgers map (the current one).
pub const HEADER_V1: i32 = 1;
pub const HEADER_VERSION_POSITION: u64 = 4;
pub const LEDGERS_MAP_OFFSET_POSITION: u64 = 8;
pub const LEDGERS_COUNT_POSITION: u64 = 16;
/// Ledger id of ledgers-map (and dummy) records.
pub const INVALID_LID: i64 = -1;
/// Entry id of ledgers-map records.
pub const LEDGERS_MAP_ENTRY_ID: i64 = -2;
pub const LEDGERS_MAP_MAX_BATCH_SIZE: usize = 10_000;
/// `[len][-1][-2][n]`: 4 + 8 + 8 + 4 bytes.
pub const LEDGERS_MAP_HEADER_SIZE: usize = 24;
pub const LEDGERS_MAP_ENTRY_SIZE: usize = 16;
/// Smallest record BookKeeper accepts on read: ledger id and entry id.
pub const MIN_SANE_ENTRY_SIZE: usize = 16;
/// Default `logSizeLimit` (1 GiB), also its maximum.
pub const DEFAULT_LOG_SIZE_LIMIT: u64 = 1 << 30;
/// Name of the file holding the last allocated log id.
pub const LAST_ID_FILE: &str = "lastId";

/// `Long.toHexString(id) + ".log"`.
pub fn log_file_name(log_id: u64) -> String {
    format!("{log_id:x}.log")
}

/// The log id of a `<hex>.log` file name (BookKeeper parses the part before the first dot).
pub fn parse_log_file_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".log")?;
    if stem.is_empty() || stem.len() > 16 || !stem.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(stem, 16).ok()
}

/// `(logId << 32) | position after the length field`.
#[inline]
pub fn make_location(log_id: u64, pos: u64) -> u64 {
    (log_id << 32) | (pos & 0xffff_ffff)
}

/// (log id, position of the entry's ledger id) of a location.
#[inline]
pub fn split_location(location: u64) -> (u64, u64) {
    (location >> 32, location & 0xffff_ffff)
}

/// Which writer produced a file, judged from its first 4 KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// DefaultEntryLogger: 1 KiB header, records back to back.
    Default,
    /// DirectEntryLogger: 4 KiB header with a dummy record at 1024, 4 KiB blocks padded with 0xF0,
    /// zero-filled (preallocated) tail.
    Direct,
}

impl LogFormat {
    pub fn name(self) -> &'static str {
        match self {
            LogFormat::Default => "default",
            LogFormat::Direct => "direct",
        }
    }
    pub fn data_start(self) -> u64 {
        match self {
            LogFormat::Default => HEADER_SIZE,
            LogFormat::Direct => DIRECT_HEADER_SIZE,
        }
    }
}

/// The header fields as stored; nothing here is trusted until checked against the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogHeader {
    pub fingerprint: [u8; 4],
    pub version: i32,
    pub ledgers_map_offset: i64,
    pub ledgers_count: i32,
    pub format: LogFormat,
}

impl LogHeader {
    pub fn fingerprint_ok(&self) -> bool {
        &self.fingerprint == FINGERPRINT
    }

    /// Parses the first bytes of a file (at least 20; up to 1036 to recognise the direct dummy record).
    pub fn parse(head: &[u8]) -> Result<LogHeader> {
        if head.len() < 20 {
            return Err(Error::corrupt(
                head.len(),
                format!("entry log header needs 20 bytes, file has {}", head.len()),
            ));
        }
        let direct = head.len() >= HEADER_SIZE as usize + 12
            && i32::from_be_bytes(head[1024..1028].try_into().unwrap()) == DIRECT_DUMMY_LEN
            && i64::from_be_bytes(head[1028..1036].try_into().unwrap()) == INVALID_LID;
        Ok(LogHeader {
            fingerprint: head[0..4].try_into().unwrap(),
            version: i32::from_be_bytes(head[4..8].try_into().unwrap()),
            ledgers_map_offset: i64::from_be_bytes(head[8..16].try_into().unwrap()),
            ledgers_count: i32::from_be_bytes(head[16..20].try_into().unwrap()),
            format: if direct { LogFormat::Direct } else { LogFormat::Default },
        })
    }

    /// The 1024-byte header of a new DefaultEntryLogger file (no map yet).
    pub fn new_default_bytes(version: i32) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_SIZE as usize];
        h[0..4].copy_from_slice(FINGERPRINT);
        h[4..8].copy_from_slice(&version.to_be_bytes());
        h
    }
}

/// Per-log accounting, as BookKeeper's `EntryLogMetadata`: bytes per ledger count `len + 4`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EntryLogMetadata {
    pub log_id: u64,
    pub total_size: u64,
    pub remaining_size: u64,
    pub ledgers: BTreeMap<i64, u64>,
}

impl EntryLogMetadata {
    pub fn new(log_id: u64) -> Self {
        EntryLogMetadata { log_id, ..Default::default() }
    }
    pub fn add_ledger_size(&mut self, ledger_id: i64, size: u64) {
        self.total_size += size;
        self.remaining_size += size;
        *self.ledgers.entry(ledger_id).or_insert(0) += size;
    }
    /// Drops a ledger's bytes from `remaining_size` (a deleted ledger), like `removeLedgerIf`.
    pub fn remove_ledger(&mut self, ledger_id: i64) -> Option<u64> {
        let s = self.ledgers.remove(&ledger_id)?;
        self.remaining_size -= s;
        Some(s)
    }
    /// `remaining / total`, 0 for an empty log.
    pub fn usage(&self) -> f64 {
        if self.total_size == 0 {
            0.0
        } else {
            self.remaining_size as f64 / self.total_size as f64
        }
    }
}

/// The ledgers-map records for `ledgers` (ledger id → bytes), in batches of at most 10 000.
/// Each is a complete framed record `[len][-1][-2][n] n×[ledgerId, bytes]`.
pub fn encode_ledgers_map(ledgers: &BTreeMap<i64, u64>) -> Vec<u8> {
    let items: Vec<(&i64, &u64)> = ledgers.iter().collect();
    let mut out = Vec::with_capacity(ledgers.len() * LEDGERS_MAP_ENTRY_SIZE + LEDGERS_MAP_HEADER_SIZE);
    for chunk in items.chunks(LEDGERS_MAP_MAX_BATCH_SIZE) {
        let len = (LEDGERS_MAP_HEADER_SIZE - 4 + chunk.len() * LEDGERS_MAP_ENTRY_SIZE) as i32;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&INVALID_LID.to_be_bytes());
        out.extend_from_slice(&LEDGERS_MAP_ENTRY_ID.to_be_bytes());
        out.extend_from_slice(&(chunk.len() as i32).to_be_bytes());
        for (l, s) in chunk {
            out.extend_from_slice(&l.to_be_bytes());
            out.extend_from_slice(&(**s as i64).to_be_bytes());
        }
    }
    out
}

/// One ledgers-map record body (after its length field): `[-1][-2][n] n×[ledgerId, bytes]`.
/// `offset` is the file offset of the body, for error messages.
pub fn decode_ledgers_map_record(body: &[u8], offset: u64, out: &mut Vec<(i64, i64)>) -> Result<usize> {
    let at = |d: u64| (offset + d) as usize;
    if body.len() < LEDGERS_MAP_HEADER_SIZE - 4 {
        return Err(Error::corrupt(at(0), format!("ledgers-map record of {} bytes is shorter than 20", body.len())));
    }
    let lid = i64::from_be_bytes(body[0..8].try_into().unwrap());
    let eid = i64::from_be_bytes(body[8..16].try_into().unwrap());
    if lid != INVALID_LID || eid != LEDGERS_MAP_ENTRY_ID {
        return Err(Error::corrupt(
            at(0),
            format!("ledgers-map record has ledger {lid} entry {eid}, expected {INVALID_LID}/{LEDGERS_MAP_ENTRY_ID}"),
        ));
    }
    let n = i32::from_be_bytes(body[16..20].try_into().unwrap());
    if n < 0 || n as usize > LEDGERS_MAP_MAX_BATCH_SIZE {
        return Err(Error::corrupt(
            at(16),
            format!("ledgers-map batch count {n} outside 0..={LEDGERS_MAP_MAX_BATCH_SIZE}"),
        ));
    }
    let n = n as usize;
    if body.len() != 20 + n * LEDGERS_MAP_ENTRY_SIZE {
        return Err(Error::corrupt(
            at(16),
            format!("ledgers-map record of {} bytes cannot hold its {n} ledgers ({} bytes)", body.len(), 20 + n * 16),
        ));
    }
    for i in 0..n {
        let p = 20 + i * 16;
        out.push((
            i64::from_be_bytes(body[p..p + 8].try_into().unwrap()),
            i64::from_be_bytes(body[p + 8..p + 16].try_into().unwrap()),
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(log_file_name(0), "0.log");
        assert_eq!(log_file_name(500), "1f4.log");
        assert_eq!(parse_log_file_name("1f4.log"), Some(500));
        assert_eq!(parse_log_file_name("1F4.log"), Some(500));
        assert_eq!(parse_log_file_name("x.log"), None);
        assert_eq!(parse_log_file_name("a.log.b.compacted"), None);
        assert_eq!(parse_log_file_name(".log"), None);
        assert_eq!(split_location(make_location(3, 1028)), (3, 1028));
    }

    #[test]
    fn ledgers_map_round_trip_in_batches() {
        let mut m = BTreeMap::new();
        for l in 0..25_001i64 {
            m.insert(l, (l as u64) * 3 + 40);
        }
        let bytes = encode_ledgers_map(&m);
        assert_eq!(bytes.len(), 3 * 24 + 25_001 * 16);
        let mut pos = 0usize;
        let mut out = Vec::new();
        let mut batches = 0;
        while pos < bytes.len() {
            let len = i32::from_be_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
            decode_ledgers_map_record(&bytes[pos + 4..pos + 4 + len], pos as u64 + 4, &mut out).unwrap();
            pos += 4 + len;
            batches += 1;
        }
        assert_eq!(batches, 3);
        let back: BTreeMap<i64, u64> = out.into_iter().map(|(l, s)| (l, s as u64)).collect();
        assert_eq!(back, m);
    }

    #[test]
    fn header_parse() {
        let h = LogHeader::parse(&LogHeader::new_default_bytes(1)).unwrap();
        assert!(h.fingerprint_ok());
        assert_eq!((h.version, h.ledgers_map_offset, h.ledgers_count, h.format), (1, 0, 0, LogFormat::Default));
        assert!(LogHeader::parse(&[0u8; 10]).is_err());
        let mut d = LogHeader::new_default_bytes(1);
        d.resize(4096, 0);
        d[1024..1028].copy_from_slice(&DIRECT_DUMMY_LEN.to_be_bytes());
        d[1028..1036].copy_from_slice(&(-1i64).to_be_bytes());
        assert_eq!(LogHeader::parse(&d).unwrap().format, LogFormat::Direct);
    }
}
