//! BookKeeper's `TransactionalEntryLogCompactor`, phases one and two, and the file-name rules of its
//! recovery: the live records of one entry log are copied into `<dst>.log.compacting`, each entry's
//! digest checked on the way; the copy is sealed (ledgers map, fsync), hard-linked to
//! `<dst>.log.<src>.compacted` (hex ids, as DirectEntryLogger parses them; BK #4804 was a recovery
//! that named them in decimal) and the `.compacting` name removed. Phase three (index update, the
//! final `<dst>.log` name, deleting the source) belongs to the ledger storage, which owns the index.
use super::format::*;
use super::scan::{ScanOptions, Scanner};
use super::writer::{seal_log, sync_dir};
use super::{FileSource, LogError, LogResult};
use crate::bookkeeper::digest::Digester;
use crate::error::Error;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What phase one and two did to one log.
#[derive(Debug, Clone, Default)]
pub struct CompactedLog {
    pub src_log_id: u64,
    pub dst_log_id: u64,
    /// `<dst>.log.<src>.compacted`; None when no live record was left (the source can simply go).
    pub compacted_path: Option<PathBuf>,
    /// (ledger id, entry id, new location) of every copied entry.
    pub locations: Vec<(i64, i64, u64)>,
    pub entries: u64,
    /// Bytes of the copied records (length fields included), as the ledgers map counts them.
    pub bytes: u64,
    /// Records of ledgers no longer live, left behind.
    pub dropped_entries: u64,
    pub dropped_bytes: u64,
}

/// Bytes gathered before each write of the copy.
const WRITE_BUFFER: usize = 4 << 20;

pub fn compacting_name(dst: u64) -> String {
    format!("{dst:x}.log.compacting")
}

pub fn compacted_name(dst: u64, src: u64) -> String {
    format!("{dst:x}.log.{src:x}.compacted")
}

/// `(dst, src)` of a `<dst>.log.<src>.compacted` name (hex, as BookKeeper writes them).
pub fn parse_compacted_name(name: &str) -> Option<(u64, u64)> {
    let (dst, rest) = name.split_once(".log.")?;
    let src = rest.strip_suffix(".compacted")?;
    fn hex(s: &str) -> Option<u64> {
        (!s.is_empty() && s.len() <= 16 && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u64::from_str_radix(s, 16).ok())
            .flatten()
    }
    Some((hex(dst)?, hex(src)?))
}

/// Phases one and two for log `src` in `dir`: the records of the ledgers in `live` are copied (in
/// log order) into a new log `dst`. A ledger mapped to a digester has every copied entry verified
/// first; a mismatch stops the compaction with the error and removes the partial copy, so damaged
/// data is reported, never dropped or carried along silently. A scan issue in the source (a torn or
/// corrupt record) also stops it: compacting a damaged log could lose entries the index still names.
pub fn compact_log(
    dir: &Path,
    src: u64,
    dst: u64,
    live: &BTreeMap<i64, Option<Digester>>,
    fsync: bool,
) -> LogResult<CompactedLog> {
    let src_path = dir.join(log_file_name(src));
    let tmp_path = dir.join(compacting_name(dst));
    let mut out = CompactedLog { src_log_id: src, dst_log_id: dst, ..Default::default() };
    let mut scanner = Scanner::new(FileSource::open(&src_path)?, src, ScanOptions::default())?;
    let mut file: Option<File> = None;
    let mut pos = HEADER_SIZE;
    let mut ledgers: BTreeMap<i64, u64> = BTreeMap::new();
    let mut buf: Vec<u8> = Vec::with_capacity(WRITE_BUFFER + (64 << 10));
    let mut buf_start = HEADER_SIZE;
    let result: LogResult<()> = (|| {
        while let Some(rec) = scanner.next_record()? {
            let size = 4 + rec.data.len() as u64;
            let Some(digester) = live.get(&rec.ledger_id) else {
                out.dropped_entries += 1;
                out.dropped_bytes += size;
                continue;
            };
            if let Some(d) = digester {
                d.verify(rec.data, Some(rec.ledger_id), Some(rec.entry_id)).map_err(|e| match e {
                    Error::Corrupt { offset, what } => Error::corrupt_at(
                        rec.offset + 4 + offset,
                        format!("{}: ledger {} entry {}: {what}", src_path.display(), rec.ledger_id, rec.entry_id),
                    ),
                    other => other,
                })?;
            }
            if file.is_none() {
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&tmp_path)
                    .map_err(|e| LogError::io(&tmp_path, e))?;
                f.write_all_at(&LogHeader::new_default_bytes(HEADER_V1), 0).map_err(|e| LogError::io(&tmp_path, e))?;
                file = Some(f);
            }
            // Records are gathered into large writes: one syscall per record would dominate.
            buf.extend_from_slice(&(rec.data.len() as i32).to_be_bytes());
            buf.extend_from_slice(rec.data);
            if buf.len() >= WRITE_BUFFER {
                file.as_ref().unwrap().write_all_at(&buf, buf_start).map_err(|e| LogError::io(&tmp_path, e))?;
                buf_start += buf.len() as u64;
                buf.clear();
            }
            out.locations.push((rec.ledger_id, rec.entry_id, make_location(dst, pos + 4)));
            *ledgers.entry(rec.ledger_id).or_insert(0) += size;
            pos += size;
            out.entries += 1;
            out.bytes += size;
        }
        if let Some(issue) = scanner.issues().iter().find(|i| i.kind.name() != "zero_tail") {
            return Err(Error::corrupt_at(
                issue.offset,
                format!("{}: {} ({}); the log is not compacted", src_path.display(), issue.message, issue.kind.name()),
            ));
        }
        if let Some(f) = &file {
            f.write_all_at(&buf, buf_start).map_err(|e| LogError::io(&tmp_path, e))?;
            seal_log(f, pos, &ledgers, HEADER_V1, fsync).map_err(|e| LogError::io(&tmp_path, e))?;
        }
        Ok(())
    })();
    if let Err(e) = result {
        drop(file);
        let _ = std::fs::remove_file(&tmp_path);
        return Err(e);
    }
    if file.is_some() {
        // Phase two: the copy gets its durable "done" name, then the in-progress name goes.
        let done = dir.join(compacted_name(dst, src));
        std::fs::hard_link(&tmp_path, &done).map_err(|e| LogError::io(&done, e))?;
        std::fs::remove_file(&tmp_path).map_err(|e| LogError::io(&tmp_path, e))?;
        if fsync {
            sync_dir(dir).map_err(|e| LogError::io(dir, e))?;
        }
        out.compacted_path = Some(done);
    }
    Ok(out)
}

/// Recovery of a `.compacted` copy (phase three after a crash): the locations of every record in it,
/// computed against its final log id `dst` (BookKeeper rescans the copy: location = offset + 4).
pub fn compacted_locations(path: &Path, dst: u64) -> LogResult<Vec<(i64, i64, u64)>> {
    let mut scanner = Scanner::new(FileSource::open(path)?, dst, ScanOptions::default())?;
    let mut out = Vec::new();
    while let Some(rec) = scanner.next_record()? {
        out.push((rec.ledger_id, rec.entry_id, make_location(dst, rec.offset + 4)));
    }
    if let Some(issue) = scanner.issues().iter().find(|i| i.kind.name() != "zero_tail") {
        return Err(Error::corrupt_at(issue.offset, format!("{}: {}", path.display(), issue.message)));
    }
    Ok(out)
}

/// Locations as the Arrow batch (`ledger_id`, `entry_id`, `location`) that phase three's index
/// update takes, one row per entry, in the order given.
pub fn locations_batch(locs: &[(i64, i64, u64)]) -> RecordBatch {
    let ledger_ids: ArrayRef = Arc::new(Int64Array::from_iter_values(locs.iter().map(|x| x.0)));
    let entry_ids: ArrayRef = Arc::new(Int64Array::from_iter_values(locs.iter().map(|x| x.1)));
    let locations: ArrayRef = Arc::new(UInt64Array::from_iter_values(locs.iter().map(|x| x.2)));
    let schema = Schema::new(vec![
        Field::new("ledger_id", DataType::Int64, false),
        Field::new("entry_id", DataType::Int64, false),
        Field::new("location", DataType::UInt64, false),
    ]);
    RecordBatch::try_new(Arc::new(schema), vec![ledger_ids, entry_ids, locations]).expect("three equal columns")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bookkeeper::digest::DigestType;
    use crate::bookkeeper::entrylog::{EntryLogWriter, WriterOptions};

    fn write_log(dir: &Path) -> u64 {
        let mut w = EntryLogWriter::open(dir, WriterOptions { fsync: false, ..Default::default() }).unwrap();
        let d = Digester::new(DigestType::Crc32c, b"");
        for e in 0..10i64 {
            for lid in [1i64, 2, 3] {
                w.append(lid, &d.pack(lid, e, e - 1, 0, format!("payload {lid}/{e}").as_bytes())).unwrap();
            }
        }
        let id = w.current_log_id().unwrap();
        w.close().unwrap();
        id
    }

    #[test]
    fn copies_only_live_ledgers_and_names_the_files_in_hex() {
        let dir = tempfile_dir();
        let src = write_log(&dir);
        let dst = 0x1f;
        let live: BTreeMap<i64, Option<Digester>> =
            [(1, Some(Digester::new(DigestType::Crc32c, b""))), (3, None)].into_iter().collect();
        let out = compact_log(&dir, src, dst, &live, false).unwrap();
        assert_eq!((out.entries, out.dropped_entries), (20, 10));
        let path = out.compacted_path.unwrap();
        assert_eq!(path.file_name().unwrap().to_str().unwrap(), format!("1f.log.{src:x}.compacted"));
        assert_eq!(parse_compacted_name(path.file_name().unwrap().to_str().unwrap()), Some((dst, src)));
        assert!(!dir.join(compacting_name(dst)).exists());
        let again = compacted_locations(&path, dst).unwrap();
        assert_eq!(again, out.locations);
        let b = locations_batch(&again);
        assert_eq!((b.num_rows(), b.schema().field(2).name().as_str()), (20, "location"));
        let loc = b.column(2).as_any().downcast_ref::<UInt64Array>().unwrap();
        assert_eq!(loc.values().to_vec(), again.iter().map(|x| x.2).collect::<Vec<_>>());
        // the copy carries a ledgers map for exactly the live ledgers
        let md = crate::bookkeeper::entrylog::reader::read_metadata(
            FileSource::open(&path).unwrap(),
            dst,
            ScanOptions::default(),
            true,
        )
        .unwrap();
        assert_eq!(md.metadata.ledgers.keys().copied().collect::<Vec<_>>(), vec![1, 3]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_digest_mismatch_stops_the_compaction_and_leaves_no_copy() {
        let dir = tempfile_dir();
        let src = write_log(&dir);
        let live: BTreeMap<i64, Option<Digester>> =
            [(2, Some(Digester::new(DigestType::Crc32, b"")))].into_iter().collect();
        let e = compact_log(&dir, src, 0x20, &live, false).unwrap_err();
        assert!(matches!(e, Error::DigestMismatch { .. } | Error::Corrupt { .. }), "{e}");
        assert!(!dir.join(compacting_name(0x20)).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn nothing_live_writes_nothing() {
        let dir = tempfile_dir();
        let src = write_log(&dir);
        let out = compact_log(&dir, src, 0x21, &BTreeMap::new(), false).unwrap();
        assert!(out.compacted_path.is_none() && out.entries == 0 && out.dropped_entries == 30);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "pulsarkit-compact-{}-{}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
