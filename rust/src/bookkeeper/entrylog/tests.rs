//! Entry-log writer, reader and scanner tests, including corruption and a writer→reader proptest.
use super::arrow::{ArrowScanOptions, DigestMode, MultiLogScan, PayloadType};
use super::format::*;
use super::reader::{list_log_ids, metadata_by_scan, read_metadata, PayloadRead};
use super::scan::{scan_all, IssueKind, ScanOptions, Scanner};
use super::writer::read_last_id;
use super::*;
use crate::bookkeeper::digest::{DigestType, Digester, LedgerRun};
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::Array;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "pulsarkit-entrylog-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `[lid][eid]` + filler, like BookKeeper's `EntryLogTestUtils.makeEntry`.
fn make_entry(lid: i64, eid: i64, size: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(size.max(16));
    v.extend_from_slice(&lid.to_be_bytes());
    v.extend_from_slice(&eid.to_be_bytes());
    v.resize(size.max(16), 0xdd);
    v
}

fn opts(limit: u64) -> WriterOptions {
    WriterOptions { log_size_limit: limit, fsync: false, ..Default::default() }
}

fn write_log(dir: &Path, entries: &[(i64, i64, usize)], seal: bool) -> Vec<u64> {
    let mut w = EntryLogWriter::open(dir, WriterOptions { seal_on_close: seal, ..opts(1 << 30) }).unwrap();
    let locs = entries.iter().map(|&(l, e, n)| w.append(l, &make_entry(l, e, n)).unwrap()).collect();
    w.close().unwrap();
    locs
}

fn read_file(dir: &Path, id: u64) -> Vec<u8> {
    std::fs::read(dir.join(log_file_name(id))).unwrap()
}

#[test]
fn write_read_scan_and_ledgers_map() {
    let t = TempDir::new();
    let entries = [(1, 0, 26), (3, 0, 26), (1, 1, 26), (2, 0, 100)];
    let locs = write_log(&t.0, &entries, true);
    assert_eq!(locs[0], make_location(0, 1028));
    assert_eq!(locs[1], make_location(0, 1028 + 30));
    assert_eq!(read_last_id(&t.0), Some(0));
    assert_eq!(std::fs::read_to_string(t.0.join("lastId")).unwrap(), "0\n");

    let mut r = EntryLogReader::new(&t.0);
    for (&(l, e, n), &loc) in entries.iter().zip(&locs) {
        assert_eq!(r.read(loc, Some(l), Some(e)).unwrap(), make_entry(l, e, n));
    }
    let err = r.read(locs[0], Some(1), Some(5)).unwrap_err();
    assert!(matches!(err, crate::Error::Corrupt { offset: 1028, .. }), "{err}");

    let f = EntryLogFile::open(&t.0.join("0.log")).unwrap();
    let h = f.header().unwrap();
    assert_eq!((h.version, h.ledgers_count, h.format), (1, 3, LogFormat::Default));
    assert_eq!(h.ledgers_map_offset as u64, 1024 + 30 * 3 + 104);
    let m = f.metadata(ScanOptions::default(), true).unwrap();
    assert!(m.from_index, "{:?}", m.fallback_reason);
    assert_eq!(m.metadata.ledgers, BTreeMap::from([(1, 60), (2, 104), (3, 30)]));
    assert_eq!((m.metadata.total_size, m.metadata.remaining_size), (194, 194));
    let (scanned, summary) = metadata_by_scan(f.source(), 0, ScanOptions::default()).unwrap();
    assert_eq!(scanned, m.metadata);
    assert!(summary.issues.is_empty(), "{:?}", summary.issues);
    // Without the index the same accounting comes from a scan, with no fallback reason.
    let by_scan = f.metadata(ScanOptions::default(), false).unwrap();
    assert_eq!((by_scan.from_index, by_scan.fallback_reason.as_deref()), (false, None));
    assert_eq!(by_scan.metadata, m.metadata);
    assert_eq!(summary.ledgers_map_offset, Some(h.ledgers_map_offset as u64));

    let (recs, _) = scan_all(f.source(), 0, ScanOptions::default()).unwrap();
    let got: Vec<_> = recs.iter().map(|(o, l, e, d)| (*o + 4, *l, *e, d.len())).collect();
    let want: Vec<_> = entries.iter().zip(&locs).map(|(&(l, e, n), &loc)| (loc & 0xffff_ffff, l, e, n)).collect();
    assert_eq!(got, want);
}

#[test]
fn open_takes_a_directory_or_one_file() {
    let t = TempDir::new();
    let locs = write_log(&t.0, &[(7, 0, 30)], true);
    let mut dir = EntryLogReader::open(&t.0, None).unwrap();
    assert_eq!(dir.read(locs[0], Some(7), Some(0)).unwrap(), make_entry(7, 0, 30));
    // One file: its id from the name unless given (a copy under another name keeps its log id).
    let copy = t.0.join("copy.bin");
    std::fs::copy(t.0.join("0.log"), &copy).unwrap();
    assert!(EntryLogReader::open(&copy, None).is_err());
    let mut one = EntryLogReader::open(&copy, Some(0)).unwrap();
    assert_eq!(one.log_ids().unwrap(), vec![0]);
    assert_eq!(one.read(locs[0], Some(7), Some(0)).unwrap(), make_entry(7, 0, 30));
}

#[test]
fn scan_modes_by_name() {
    assert!(matches!(DigestMode::from_name("auto", b""), Ok(DigestMode::Auto { mac: None })));
    assert!(matches!(DigestMode::from_name("AUTO", b"pw"), Ok(DigestMode::Auto { mac: Some(_) })));
    assert!(matches!(DigestMode::from_name("crc32", b""), Ok(DigestMode::Fixed(_))));
    assert!(matches!(DigestMode::from_name("sha", b""), Err(crate::Error::InvalidArgument(_))));
    assert_eq!(PayloadType::from_name("binary_view").unwrap(), PayloadType::BinaryView);
    assert!(matches!(PayloadType::from_name("view"), Err(crate::Error::InvalidArgument(_))));
}

#[test]
fn unsealed_log_has_no_map_and_metadata_scans() {
    let t = TempDir::new();
    write_log(&t.0, &[(5, 0, 40), (5, 1, 40)], false);
    let f = EntryLogFile::open(&t.0.join("0.log")).unwrap();
    assert_eq!(f.header().unwrap().ledgers_map_offset, 0);
    let m = f.metadata(ScanOptions::default(), true).unwrap();
    assert!(!m.from_index);
    assert!(m.fallback_reason.unwrap().contains("no ledgers map"));
    assert_eq!(m.metadata.ledgers, BTreeMap::from([(5, 88)]));
}

#[test]
fn rotation_last_id_and_reopen() {
    let t = TempDir::new();
    let mut w = EntryLogWriter::open(&t.0, WriterOptions { write_buffer_size: 100, ..opts(1024 + 3 * 104) }).unwrap();
    let mut locs = Vec::new();
    for e in 0..10 {
        locs.push((e, w.append(7, &make_entry(7, e, 100)).unwrap()));
        // Read-your-writes from the buffer and from the file.
        assert_eq!(w.read(locs.last().unwrap().1, Some(7), Some(e)).unwrap(), make_entry(7, e, 100));
    }
    assert_eq!(w.rotated_log_ids(), &[0, 1, 2]);
    assert_eq!(w.current_log_id(), Some(3));
    w.flush().unwrap();
    drop(w);
    assert_eq!(list_log_ids(&t.0).unwrap(), vec![0, 1, 2, 3]);
    for (e, loc) in &locs {
        assert_eq!(split_location(*loc).0, (*e / 3) as u64);
    }
    for id in 0..3 {
        let f = EntryLogFile::open(&t.0.join(log_file_name(id))).unwrap();
        let m = f.metadata(ScanOptions::default(), true).unwrap();
        assert!(m.from_index);
        assert_eq!(m.metadata.ledgers, BTreeMap::from([(7, 312)]));
    }
    // Log 3 has no map: metadata falls back to a scan.
    let f = EntryLogFile::open(&t.0.join("3.log")).unwrap();
    assert!(!f.metadata(ScanOptions::default(), true).unwrap().from_index);
    // A second writer continues after the highest id and never touches old logs.
    std::fs::remove_file(t.0.join("lastId")).unwrap();
    let mut w = EntryLogWriter::open(&t.0, opts(1 << 20)).unwrap();
    let loc = w.append(8, &make_entry(8, 0, 20)).unwrap();
    assert_eq!(split_location(loc), (4, 1028));
    w.close().unwrap();
    assert_eq!(read_last_id(&t.0), Some(4));
    let mut r = EntryLogReader::new(&t.0);
    for (e, loc) in &locs {
        assert_eq!(r.read(*loc, Some(7), Some(*e)).unwrap(), make_entry(7, *e, 100));
    }
}

#[test]
fn big_entries_bypass_the_buffer() {
    let t = TempDir::new();
    let mut w = EntryLogWriter::open(&t.0, WriterOptions { write_buffer_size: 64, ..opts(1 << 20) }).unwrap();
    let a = w.append(1, &make_entry(1, 0, 30)).unwrap();
    let b = w.append(1, &make_entry(1, 1, 5000)).unwrap();
    let c = w.append(1, &make_entry(1, 2, 30)).unwrap();
    assert_eq!(w.read(b, Some(1), Some(1)).unwrap(), make_entry(1, 1, 5000));
    assert_eq!(w.read(c, Some(1), Some(2)).unwrap(), make_entry(1, 2, 30));
    w.close().unwrap();
    let mut r = EntryLogReader::new(&t.0);
    assert_eq!(r.read(a, None, None).unwrap(), make_entry(1, 0, 30));
    assert_eq!(r.read(b, None, None).unwrap(), make_entry(1, 1, 5000));
}

#[test]
fn writer_rejects_bad_entries() {
    let t = TempDir::new();
    let mut w = EntryLogWriter::open(&t.0, opts(1 << 20)).unwrap();
    assert!(w.append(1, &make_entry(2, 0, 20)).is_err());
    assert!(w.append(1, &[0u8; 10]).is_err());
    assert!(w.append(-1, &make_entry(-1, 0, 20)).is_err());
    assert!(EntryLogWriter::open(&t.0, opts(10)).is_err());
    assert!(EntryLogWriter::open(&t.0, WriterOptions { header_version: 7, ..opts(1 << 20) }).is_err());
}

#[test]
fn truncated_tail_is_reported_with_offset() {
    // BookKeeper's testCorruptEntryLog: drop the last 10 bytes.
    let t = TempDir::new();
    write_log(&t.0, &[(1, 0, 26), (3, 0, 26), (1, 1, 26)], false);
    let mut img = read_file(&t.0, 0);
    img.truncate(img.len() - 10);
    let (recs, s) = scan_all(&img, 0, ScanOptions::default()).unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!(s.issues.len(), 1);
    let i = &s.issues[0];
    assert_eq!((i.kind, i.offset, i.length), (IssueKind::TornTail, 1084, 20));
    assert!(i.message.contains("torn tail"), "{}", i.message);
    let m = read_metadata(&img, 0, ScanOptions::default(), true).unwrap();
    assert_eq!(m.metadata.ledgers, BTreeMap::from([(1, 30), (3, 30)]));
    // Cut inside the length field.
    img.truncate(1084 + 2);
    let (recs, s) = scan_all(&img, 0, ScanOptions::default()).unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!((s.issues[0].kind, s.issues[0].offset), (IssueKind::TornTail, 1084));
}

#[test]
fn short_files_and_zeroed_headers() {
    let (recs, s) = scan_all(vec![0u8; 10], 0, ScanOptions::default()).unwrap();
    assert!(recs.is_empty());
    assert_eq!(s.issues[0].kind, IssueKind::TruncatedHeader);
    let h = LogHeader::new_default_bytes(1);
    let (_, s) = scan_all(h[..500].to_vec(), 0, ScanOptions::default()).unwrap();
    assert_eq!((s.issues[0].kind, s.issues[0].offset), (IssueKind::TruncatedHeader, 500));

    let t = TempDir::new();
    write_log(&t.0, &[(1, 0, 26), (2, 0, 26)], true);
    let mut img = read_file(&t.0, 0);
    img[..1024].fill(0);
    let (recs, s) = scan_all(&img, 0, ScanOptions::default()).unwrap();
    assert_eq!(recs.len(), 2, "a zeroed header must not hide records");
    assert_eq!(s.issues.len(), 1);
    assert_eq!((s.issues[0].kind, s.issues[0].offset), (IssueKind::BadHeader, 0));
    assert!(s.issues[0].message.contains("zeroed"));
    let m = read_metadata(&img, 0, ScanOptions::default(), true).unwrap();
    assert!(!m.from_index);
    assert_eq!(m.metadata.ledgers, BTreeMap::from([(1, 30), (2, 30)]));
}

#[test]
fn a_header_uninitialised_past_its_version_is_read_as_bookkeeper_reads_it() {
    // BookKeeper 4.16 (Pulsar 3.0.7) sets only the fingerprint and version of a new log's header; the rest is
    // whatever its buffer held (here, as in a real standalone's log, bytes of a jar's directory) until the
    // log is closed with its ledgers map. Such a log is scanned, with no issue.
    let t = TempDir::new();
    write_log(&t.0, &[(1, 0, 26), (2, 0, 26), (2, 1, 26)], false);
    let mut img = read_file(&t.0, 0);
    let junk = b"tors/WadlGeneratorJAXBGrammarGenerator$1.classPK\x01\x02\x14\x00";
    for (i, b) in img[8..1024].iter_mut().enumerate() {
        *b = junk[i % junk.len()];
    }
    let (recs, s) = scan_all(&img, 0, ScanOptions::default()).unwrap();
    assert_eq!(recs.len(), 3);
    assert!(s.issues.is_empty(), "{:?}", s.issues);
    let m = read_metadata(&img, 0, ScanOptions::default(), true).unwrap();
    assert!(!m.from_index);
    assert!(m.fallback_reason.unwrap().contains("outside"));
    assert_eq!(m.metadata.ledgers, BTreeMap::from([(1, 30), (2, 60)]));
    // The same junk in a log closed with its map, past the fields the close writes, changes nothing.
    let t = TempDir::new();
    write_log(&t.0, &[(1, 0, 26), (2, 0, 26), (2, 1, 26)], true);
    let mut img = read_file(&t.0, 0);
    for (i, b) in img[20..1024].iter_mut().enumerate() {
        *b = junk[i % junk.len()];
    }
    let (_, s) = scan_all(&img, 0, ScanOptions::default()).unwrap();
    assert!(s.issues.is_empty(), "{:?}", s.issues);
    assert!(read_metadata(&img, 0, ScanOptions::default(), true).unwrap().from_index);
    // Junk that could not be a map's offset (inside the header, negative, past 2^31) is no issue either; an
    // offset a map could have, with no map in the file, is.
    let t = TempDir::new();
    write_log(&t.0, &[(1, 0, 26), (2, 0, 26), (2, 1, 26)], false);
    let open = read_file(&t.0, 0);
    for (off, reported) in [(7i64, false), (-3, false), (1 << 40, false), (1100, true), (5_000_000, true)] {
        let mut img = open.clone();
        img[8..16].copy_from_slice(&off.to_be_bytes());
        let (recs, s) = scan_all(&img, 0, ScanOptions::default()).unwrap();
        assert_eq!(recs.len(), 3);
        let kinds: Vec<_> = s.issues.iter().map(|i| (i.kind, i.offset)).collect();
        assert_eq!(kinds, if reported { vec![(IssueKind::BadHeader, 8)] } else { vec![] }, "offset {off}");
    }
}

#[test]
fn a_log_cut_before_its_ledgers_map_is_reported() {
    // Closed with its map (header: map at X), then cut at X or at an earlier record boundary: no torn tail,
    // so the header naming a map the file does not reach is what says the log lost its end.
    let t = TempDir::new();
    write_log(&t.0, &[(1, 0, 26), (2, 0, 26), (2, 1, 26)], true);
    let closed = read_file(&t.0, 0);
    let map_at = i64::from_be_bytes(closed[8..16].try_into().unwrap()) as usize;
    for cut in [map_at, map_at - 30] {
        let (recs, s) = scan_all(&closed[..cut], 0, ScanOptions::default()).unwrap();
        assert_eq!(recs.len(), if cut == map_at { 3 } else { 2 });
        assert_eq!(s.issues.len(), 1, "cut at {cut}: {:?}", s.issues);
        assert_eq!((s.issues[0].kind, s.issues[0].offset), (IssueKind::BadHeader, 8));
        assert!(s.issues[0].message.contains("past the end of the file"), "{}", s.issues[0].message);
    }
}

#[test]
fn lying_headers_fall_back_to_scan() {
    let t = TempDir::new();
    write_log(&t.0, &[(1, 0, 26), (2, 0, 26), (2, 1, 26)], true);
    let good = read_file(&t.0, 0);
    let want = BTreeMap::from([(1, 30), (2, 60)]);
    let patch = |off: usize, bytes: &[u8]| {
        let mut v = good.clone();
        v[off..off + bytes.len()].copy_from_slice(bytes);
        v
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (patch(16, &0i32.to_be_bytes()), "0 ledgers"), // zero ledgers although records exist
        (patch(16, &5i32.to_be_bytes()), "header says 5"), // wrong count
        (patch(8, &1054i64.to_be_bytes()), "ledgers-map"), // offset pointing at an entry
        (patch(8, &999_999i64.to_be_bytes()), "outside"), // offset past the end
        (patch(8, &0i64.to_be_bytes()), "no ledgers map"), // offset cleared
        (patch(4, &0i32.to_be_bytes()), "version 0"),  // V0 header
        (patch(1024 + 90 + 32, &99i64.to_be_bytes()), "accounts for"), // map sizes that do not add up
    ];
    for (img, why) in cases {
        let m = read_metadata(&img, 0, ScanOptions::default(), true).unwrap();
        assert!(!m.from_index, "{why}");
        let reason = m.fallback_reason.unwrap();
        assert!(reason.contains(why), "{why}: {reason}");
        assert_eq!(m.metadata.ledgers, want, "{why}");
    }
    // The scan reports a header that disagrees with the map it found.
    let (_, s) = scan_all(patch(16, &5i32.to_be_bytes()), 0, ScanOptions::default()).unwrap();
    assert_eq!((s.issues[0].kind, s.issues[0].offset), (IssueKind::BadHeader, 16));
    let (_, s) = scan_all(patch(8, &1054i64.to_be_bytes()), 0, ScanOptions::default()).unwrap();
    assert_eq!((s.issues[0].kind, s.issues[0].offset), (IssueKind::BadHeader, 8));
}

#[test]
fn bad_lengths_resync_on_the_next_record() {
    let t = TempDir::new();
    let entries: Vec<(i64, i64, usize)> = (0..6).map(|e| (4, e, 50)).collect();
    write_log(&t.0, &entries, false);
    let good = read_file(&t.0, 0);
    // Record k starts at 1024 + 54k.
    for bad_len in [3i32, -7, 1_000_000_000, 0x7fff_fff0, 54 + 20] {
        let mut img = good.clone();
        img[1024 + 54 * 2..1024 + 54 * 2 + 4].copy_from_slice(&bad_len.to_be_bytes());
        let (recs, s) = scan_all(&img, 0, ScanOptions::default()).unwrap();
        let eids: Vec<i64> = recs.iter().map(|r| r.2).collect();
        if bad_len == 54 + 20 {
            // A plausible wrong length swallows bytes of the next record; the one after is found again.
            assert_eq!(eids[..2], [0, 1]);
            assert!(eids.ends_with(&[4, 5]), "{eids:?}");
        } else {
            assert_eq!(eids, vec![0, 1, 3, 4, 5], "len {bad_len}");
            assert_eq!(s.issues.len(), 1, "{:?}", s.issues);
            let i = &s.issues[0];
            assert_eq!((i.kind, i.offset, i.length), (IssueKind::CorruptRecord, 1132, 54), "len {bad_len}");
        }
    }
    // Without resync the rest is reported as unreadable, not silently dropped.
    let mut img = good.clone();
    img[1132..1136].copy_from_slice(&3i32.to_be_bytes());
    let (recs, s) = scan_all(&img, 0, ScanOptions { resync: false, ..Default::default() }).unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!((s.issues[0].offset, s.issues[0].length), (1132, good.len() as u64 - 1132));
}

#[test]
fn zeroed_region_and_zero_tail() {
    let t = TempDir::new();
    let entries: Vec<(i64, i64, usize)> = (0..5).map(|e| (9, e, 60)).collect();
    write_log(&t.0, &entries, false);
    let good = read_file(&t.0, 0);
    let mut img = good.clone();
    img[1024 + 64..1024 + 64 * 3].fill(0); // records 1 and 2
    let (recs, s) = scan_all(&img, 0, ScanOptions::default()).unwrap();
    assert_eq!(recs.iter().map(|r| r.2).collect::<Vec<_>>(), vec![0, 3, 4]);
    assert_eq!(s.issues.len(), 1);
    assert_eq!((s.issues[0].kind, s.issues[0].offset, s.issues[0].length), (IssueKind::CorruptRecord, 1088, 128));
    // Zeros after the last record: a tail that never reached the disk.
    let mut img = good.clone();
    img.extend_from_slice(&[0u8; 5000]);
    let (recs, s) = scan_all(&img, 0, ScanOptions::default()).unwrap();
    assert_eq!(recs.len(), 5);
    assert_eq!(
        (s.issues[0].kind, s.issues[0].offset, s.issues[0].length),
        (IssueKind::ZeroTail, good.len() as u64, 5000)
    );
}

/// An image laid out as DirectEntryLogger writes it: 4 KiB header with the dummy record, records
/// in 4 KiB blocks padded with 0xF0, ledgers map, zero-filled preallocated tail.
fn direct_image(entries: &[(i64, i64, usize)], with_map: bool, tail: usize) -> (Vec<u8>, Vec<u64>) {
    let mut img = LogHeader::new_default_bytes(1);
    img.resize(4096, 0);
    img[1024..1028].copy_from_slice(&DIRECT_DUMMY_LEN.to_be_bytes());
    img[1028..1036].copy_from_slice(&(-1i64).to_be_bytes());
    let mut locs = Vec::new();
    let mut ledgers = BTreeMap::new();
    for (i, &(l, e, n)) in entries.iter().enumerate() {
        locs.push(img.len() as u64 + 4);
        img.extend_from_slice(&(n.max(16) as i32).to_be_bytes());
        img.extend_from_slice(&make_entry(l, e, n));
        *ledgers.entry(l).or_insert(0u64) += n.max(16) as u64 + 4;
        if i % 2 == 1 {
            let pad = (4096 - img.len() % 4096) % 4096;
            img.extend(std::iter::repeat(0xF0).take(pad));
        }
    }
    let pad = (4096 - img.len() % 4096) % 4096;
    img.extend(std::iter::repeat(0xF0).take(pad));
    if with_map {
        let off = img.len() as i64;
        img.extend_from_slice(&encode_ledgers_map(&ledgers));
        let pad = (4096 - img.len() % 4096) % 4096;
        img.extend(std::iter::repeat(0xF0).take(pad));
        img[8..16].copy_from_slice(&off.to_be_bytes());
        img[16..20].copy_from_slice(&(ledgers.len() as i32).to_be_bytes());
    }
    img.extend(std::iter::repeat(0).take(tail));
    (img, locs)
}

#[test]
fn direct_entry_logger_files() {
    let entries = [(1, 0, 100), (2, 0, 3000), (1, 1, 5000), (3, 0, 16), (3, 1, 200)];
    for with_map in [false, true] {
        let (img, locs) = direct_image(&entries, with_map, 3 * 4096);
        let (recs, s) = scan_all(&img, 0, ScanOptions::default()).unwrap();
        assert_eq!(s.format, LogFormat::Direct);
        assert!(s.issues.is_empty(), "{:?}", s.issues);
        assert!(s.zero_tail_offset.is_some());
        let got: Vec<_> = recs.iter().map(|r| (r.0 + 4, r.1, r.2, r.3.clone())).collect();
        let want: Vec<_> = entries.iter().zip(&locs).map(|(&(l, e, n), &p)| (p, l, e, make_entry(l, e, n))).collect();
        assert_eq!(got, want);
        for (&(l, e, n), &p) in entries.iter().zip(&locs) {
            assert_eq!(reader::read_entry_at(&img, p, Some(l), Some(e), 1 << 20).unwrap(), make_entry(l, e, n));
        }
        let m = read_metadata(&img, 0, ScanOptions::default(), true).unwrap();
        assert_eq!(m.from_index, with_map, "{:?}", m.fallback_reason);
        assert_eq!(m.metadata.ledgers, BTreeMap::from([(1, 5108), (2, 3004), (3, 224)]));
    }
    // Broken padding is corruption, reported; the following block is still read.
    let (mut img, _) = direct_image(&entries, false, 4096);
    let i = img.iter().position(|&b| b == 0xF0).unwrap();
    img[i + 10] = 0x11;
    let (recs, s) = scan_all(&img, 0, ScanOptions::default()).unwrap();
    assert_eq!(recs.len(), 5, "{:?}", s.issues);
    assert_eq!(s.issues.len(), 1);
    assert_eq!((s.issues[0].kind, s.issues[0].offset), (IssueKind::CorruptRecord, i as u64));
}

#[test]
fn arrow_scan_verifies_digests_and_reports_issues() {
    let t = TempDir::new();
    let crc = Digester::new(DigestType::Crc32c, b"");
    let mut w = EntryLogWriter::open(&t.0, opts(1 << 20)).unwrap();
    let mut payloads = Vec::new();
    for e in 0..20i64 {
        let p = format!("payload-{e}").into_bytes();
        let stored = crc.pack(3, e, e - 1, (e + 1) * 10, &p);
        w.append(3, &stored).unwrap();
        payloads.push(p);
    }
    w.close().unwrap();
    let path = t.0.join("0.log");
    let mut img = std::fs::read(&path).unwrap();
    let n = img.len();
    // Flip a payload byte of entry 5, then cut the file inside the ledgers map.
    let first = 1024 + 4;
    let rec = 4 + 36 + 9;
    img[first + 5 * rec + 37] ^= 0x40;
    img.truncate(n - 7);
    std::fs::write(&path, &img).unwrap();
    let mut scan = MultiLogScan::new(vec![(path.clone(), 0)], ArrowScanOptions { batch_rows: 8, ..Default::default() });
    let mut batches = Vec::new();
    while let Some(b) = scan.next_batch().unwrap() {
        assert!(b.num_rows() <= 8);
        batches.push(b);
    }
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 22);
    let mut oks = Vec::new();
    let mut issue_rows = Vec::new();
    for b in &batches {
        let ok = b.column_by_name("digest_ok").unwrap().as_boolean();
        let eid = b.column_by_name("entry_id").unwrap().as_primitive::<Int64Type>();
        let pl = b.column_by_name("payload").unwrap().as_binary::<i32>();
        let issue = b.column_by_name("issue").unwrap().as_string::<i32>();
        for i in 0..b.num_rows() {
            if issue.is_valid(i) {
                issue_rows.push(issue.value(i).to_string());
            } else {
                oks.push((eid.value(i), ok.value(i)));
                if eid.value(i) != 5 {
                    assert_eq!(pl.value(i), payloads[eid.value(i) as usize].as_slice());
                }
            }
        }
    }
    assert_eq!(oks.iter().filter(|(_, ok)| !ok).map(|(e, _)| *e).collect::<Vec<_>>(), vec![5]);
    assert_eq!(issue_rows, vec!["torn_tail", "bad_header"]);
    let s = &scan.summaries()[0].1;
    assert_eq!(s.records, 20);

    // Auto-detection finds CRC32C; DUMMY gives null digest_ok.
    for (mode, want_type) in [
        (DigestMode::Auto { mac: None }, Some("CRC32C")),
        (DigestMode::Fixed(Digester::new(DigestType::Dummy, b"")), Some("DUMMY")),
    ] {
        let mut scan = MultiLogScan::new(
            vec![(path.clone(), 0)],
            ArrowScanOptions { digest: mode, include_issues: false, ..Default::default() },
        );
        let b = scan.next_batch().unwrap().unwrap();
        assert_eq!(b.num_rows(), 20);
        let dt = b.column_by_name("digest_type").unwrap().as_string::<i32>();
        assert_eq!(dt.is_valid(0).then(|| dt.value(0)), want_type);
        assert!(scan.next_batch().unwrap().is_none());
    }
}

#[test]
fn arrow_batches_hold_at_most_batch_rows_issue_rows_included() {
    // more issues than a batch holds: they continue in the next batches, in order
    let t = TempDir::new();
    let crc = Digester::new(DigestType::Crc32c, b"");
    let mut img = LogHeader::new_default_bytes(1);
    for e in 0..4i64 {
        // each entry followed by a record of a negative ledger id: a skipped record, an issue each
        for lid in [3, -5] {
            let stored = crc.pack(lid, e, e - 1, e, b"payload");
            img.extend_from_slice(&(stored.len() as u32).to_be_bytes());
            img.extend_from_slice(&stored);
        }
    }
    let path = t.0.join("0.log");
    std::fs::write(&path, &img).unwrap();
    let (recs, s) = scan_all(&img[..], 0, ScanOptions::default()).unwrap();
    assert_eq!((recs.len(), s.issues.len()), (4, 4), "{:?}", s.issues);
    for batch_rows in [1, 2, 3, 5] {
        let opts = ArrowScanOptions { batch_rows, ..Default::default() };
        let mut scan = MultiLogScan::new(vec![(path.clone(), 0), (path.clone(), 1)], opts);
        let (mut rows, mut issues) = (Vec::new(), Vec::new());
        while let Some(b) = scan.next_batch().unwrap() {
            assert!(b.num_rows() <= batch_rows, "{} rows in a batch of {batch_rows}", b.num_rows());
            let (log, issue) = (b.column(0).as_primitive::<Int64Type>(), b.column_by_name("issue").unwrap());
            for i in 0..b.num_rows() {
                rows.push((log.value(i), issue.is_valid(i)));
                if issue.is_valid(i) {
                    issues.push((log.value(i), issue.as_string::<i32>().value(i).to_string()));
                }
            }
        }
        let want: Vec<(i64, bool)> = (0..2).flat_map(|l| [(l, false); 4].into_iter().chain([(l, true); 4])).collect();
        assert_eq!(rows, want, "batch_rows {batch_rows}");
        let kinds: Vec<(i64, String)> =
            (0..2).flat_map(|l| s.issues.iter().map(move |i| (l, i.kind.name().to_string()))).collect();
        assert_eq!(issues, kinds);
    }
}

#[test]
fn mapped_scans_and_zero_copy_payloads_match_copied_ones() {
    let t = TempDir::new();
    let crc = Digester::new(DigestType::Crc32c, b"");
    let mut w = EntryLogWriter::open(&t.0, opts(1600)).unwrap();
    for e in 0..50i64 {
        // Payloads of 0..=40 bytes: short ones are inlined in the views, long ones point at the file.
        let p = vec![e as u8; (e % 41) as usize];
        w.append(2, &crc.pack(2, e, e - 1, e, &p)).unwrap();
    }
    w.close().unwrap();
    let logs: Vec<(PathBuf, u64)> =
        list_log_ids(&t.0).unwrap().into_iter().map(|id| (t.0.join(log_file_name(id)), id)).collect();
    assert!(logs.len() > 2);
    for (path, id) in &logs {
        let a = scan_all(FileSource::open(path).unwrap(), *id, ScanOptions::default()).unwrap();
        let b = scan_all(MmapSource::open(path).unwrap(), *id, ScanOptions::default()).unwrap();
        assert_eq!(a, b);
    }
    let collect = |pt: PayloadType| {
        let mut scan = MultiLogScan::new(
            logs.clone(),
            ArrowScanOptions { payload_type: pt, batch_rows: 16, ..Default::default() },
        );
        let mut out = Vec::new();
        while let Some(b) = scan.next_batch().unwrap() {
            assert_eq!(b.schema(), super::arrow::schema_for(pt));
            let col = b.column_by_name("payload").unwrap();
            let ok = b.column_by_name("digest_ok").unwrap().as_boolean();
            for i in 0..b.num_rows() {
                assert!(ok.value(i));
                out.push(match pt {
                    PayloadType::Binary => col.as_binary::<i32>().value(i).to_vec(),
                    PayloadType::BinaryView => col.as_binary_view().value(i).to_vec(),
                });
            }
        }
        out
    };
    let copied = collect(PayloadType::Binary);
    assert_eq!(copied.len(), 50);
    assert_eq!(copied, collect(PayloadType::BinaryView));
    assert_eq!(copied[40], vec![40u8; 40]);
}

/// An in-memory image read through the scanner's copy window, like a file.
struct Windowed<'a>(&'a [u8]);

impl Source for Windowed<'_> {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        Source::read_exact_at(self.0, buf, offset)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn writer_reader_round_trip(
        entries in proptest::collection::vec((0i64..5, 16usize..400), 1..60),
        limit in 1100u64..6000,
        wbs in 1usize..800,
        seal in any::<bool>(),
    ) {
        let t = TempDir::new();
        let mut w = EntryLogWriter::open(&t.0, WriterOptions {
            log_size_limit: limit, write_buffer_size: wbs, fsync: false, seal_on_close: seal, ..Default::default()
        }).unwrap();
        let mut next = [0i64; 5];
        let mut written = Vec::new();
        for &(l, n) in &entries {
            let e = next[l as usize];
            next[l as usize] += 1;
            let data = make_entry(l, e, n);
            let loc = w.append(l, &data).unwrap();
            written.push((loc, l, e, data));
        }
        w.close().unwrap();
        let mut r = EntryLogReader::new(&t.0);
        for (loc, l, e, data) in &written {
            prop_assert_eq!(&r.read(*loc, Some(*l), Some(*e)).unwrap(), data);
        }
        let mut scanned = Vec::new();
        let mut expected_meta: BTreeMap<u64, BTreeMap<i64, u64>> = BTreeMap::new();
        for (loc, l, _, d) in &written {
            *expected_meta.entry(loc >> 32).or_default().entry(*l).or_default() += d.len() as u64 + 4;
        }
        for id in list_log_ids(&t.0).unwrap() {
            let f = EntryLogFile::open(&t.0.join(log_file_name(id))).unwrap();
            let mut s = f.scanner(ScanOptions::default()).unwrap();
            while let Some(rec) = s.next_record().unwrap() {
                scanned.push((rec.location(id), rec.ledger_id, rec.entry_id, rec.data.to_vec()));
            }
            prop_assert!(s.summary().issues.is_empty(), "{:?}", s.summary().issues);
            let m = f.metadata(ScanOptions::default(), true).unwrap();
            prop_assert_eq!(m.from_index, seal || w.rotated_log_ids().contains(&id));
            prop_assert_eq!(&m.metadata.ledgers, &expected_meta[&id]);
            let h = f.header().unwrap();
            if m.from_index {
                prop_assert!(h.ledgers_map_offset as u64 <= limit.max(1024 + 4 + 400));
            }
        }
        prop_assert_eq!(scanned, written);
    }

    #[test]
    fn corruption_never_panics_and_keeps_the_prefix(
        sizes in proptest::collection::vec(16usize..200, 1..20),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut img = LogHeader::new_default_bytes(1);
        let mut starts = Vec::new();
        for (e, &n) in sizes.iter().enumerate() {
            starts.push(img.len());
            img.extend_from_slice(&(n as i32).to_be_bytes());
            img.extend_from_slice(&make_entry(1, e as i64, n));
        }
        let mut first_bad = img.len();
        for (i, v) in &flips {
            let p = 1024 + i.index(img.len() - 1024);
            if img[p] != *v {
                img[p] = *v;
                first_bad = first_bad.min(p);
            }
        }
        let mut clean_cut = false;
        if truncate {
            let c = 1024 + cut.index(img.len() - 1024);
            img.truncate(c);
            first_bad = first_bad.min(c);
            // A cut exactly between records leaves a valid, shorter log.
            clean_cut = c == 1024 || starts.contains(&c);
        }
        let (recs, summary) = scan_all(&img, 0, ScanOptions::default()).unwrap();
        // The windowed (file) path sees exactly what the in-memory path sees.
        prop_assert_eq!(&scan_all(Windowed(&img), 0, ScanOptions::default()).unwrap(), &(recs.clone(), summary.clone()));
        // Every record that ends before the first damaged byte comes back unchanged.
        let intact = starts.iter().enumerate().filter(|(e, &s)| s + 4 + sizes[*e] <= first_bad).count();
        prop_assert!(recs.len() >= intact);
        for (e, r) in recs.iter().take(intact).enumerate() {
            prop_assert_eq!(r.0 as usize, starts[e]);
            prop_assert_eq!(&r.3, &make_entry(1, e as i64, sizes[e]));
        }
        // Damage that changes the framing is reported, or shows as a record that differs from
        // every one written (which the bookie digest then catches).
        if recs.len() < sizes.len() && !clean_cut {
            let originals: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(e, &n)| make_entry(1, e as i64, n)).collect();
            prop_assert!(!summary.issues.is_empty() || recs.iter().any(|r| !originals.contains(&r.3)));
        }
        let _ = read_metadata(&img, 0, ScanOptions::default(), true).unwrap();
    }

    /// A heads-only scan (what a map-less log's metadata reads) sees the records and issues a whole
    /// scan sees, with records past its small window and damage anywhere.
    #[test]
    fn heads_only_scans_see_what_whole_scans_see(
        sizes in proptest::collection::vec(prop_oneof![16usize..300, 10_000usize..60_000], 1..24),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in proptest::option::of(any::<prop::sample::Index>()),
        chunk in prop_oneof![Just(64usize << 10), Just(4usize << 20)],
    ) {
        let mut img = LogHeader::new_default_bytes(1);
        for (e, &n) in sizes.iter().enumerate() {
            img.extend_from_slice(&(n as i32).to_be_bytes());
            img.extend_from_slice(&make_entry(1 + (e % 3) as i64, e as i64, n));
        }
        for (i, v) in &flips {
            let p = 1024 + i.index(img.len() - 1024);
            img[p] = *v;
        }
        if let Some(c) = cut {
            img.truncate(1024 + c.index(img.len() - 1024));
        }
        let opts = ScanOptions { chunk_size: chunk, ..ScanOptions::default() };
        let (recs, summary) = scan_all(Windowed(&img), 0, opts.clone()).unwrap();
        let mut s = Scanner::new(Windowed(&img), 0, opts.clone()).unwrap();
        let mut heads = Vec::new();
        while let Some(h) = s.next_head().unwrap() {
            heads.push(h);
        }
        let whole: Vec<_> = recs.iter().map(|r| (r.0, r.1, r.2, r.3.len())).collect();
        prop_assert_eq!(heads, whole);
        prop_assert_eq!(s.summary(), summary.clone());
        let (by_scan, scanned) = metadata_by_scan(Windowed(&img), 0, opts).unwrap();
        let mut expected: BTreeMap<i64, u64> = BTreeMap::new();
        for r in &recs {
            *expected.entry(r.1).or_default() += r.3.len() as u64 + 4;
        }
        prop_assert_eq!(&by_scan.ledgers, &expected);
        prop_assert_eq!(scanned, summary);
    }
}

#[test]
fn read_payloads_verifies_each_entry_and_reports_each_fault_apart() {
    let t = TempDir::new();
    let d = Digester::new(DigestType::Crc32c, b"");
    let run = LedgerRun { ledger_id: 9, first_entry_id: 0, last_add_confirmed: -1, length: 0 };
    let stored = d.pack_many(run, &[b"zero".as_slice(), b"one", b"two", b"three"]);
    let mut w = EntryLogWriter::open(&t.0, opts(1 << 30)).unwrap();
    let mut locs: Vec<i64> = stored.iter().map(|e| w.append_stored(e).unwrap() as i64).collect();
    w.close().unwrap();
    // entry 2's payload damaged on disk; entry 1 not read (the caller's journal or pruned entry)
    let mut bytes = read_file(&t.0, 0);
    let at = (locs[2] as u64 & 0xFFFF_FFFF) as usize + 32 + 4;
    bytes[at] ^= 0xFF;
    std::fs::write(t.0.join(log_file_name(0)), bytes).unwrap();
    locs[1] = -1;
    let mut r = EntryLogReader::new(&t.0);
    let got = r.read_payloads(&locs, 9, 0, &d, usize::MAX).unwrap();
    assert_eq!(got[0].payload(), Some(&b"zero"[..]));
    assert!(matches!(got[1], PayloadRead::NotRead));
    let stored_two = 32 + 4 + 3;
    assert!(
        matches!(&got[2], PayloadRead::Bad { error: crate::Error::DigestMismatch { .. }, stored_len: Some(n) } if *n == stored_two)
    );
    assert_eq!(got[3].payload(), Some(&b"three"[..]));
    // the read stops after the entry that reaches max_bytes, and always takes one location
    assert_eq!(r.read_payloads(&locs, 9, 0, &d, 0).unwrap().len(), 1);
    assert_eq!(r.read_payloads(&locs, 9, 0, &d, 1).unwrap().len(), 1);
    assert_eq!(r.read_payloads(&locs, 9, 0, &d, 41).unwrap().len(), 3); // 40 bytes, not read, 39 bytes
                                                                        // an entry id that does not match what the location holds is that entry's error, not read
    let got = r.read_payloads(&locs[3..], 9, 7, &d, usize::MAX).unwrap();
    assert!(matches!(got[0], PayloadRead::Bad { stored_len: None, .. }));
    // a missing log ends the read
    std::fs::remove_file(t.0.join(log_file_name(0))).unwrap();
    let mut r = EntryLogReader::new(&t.0);
    assert!(matches!(r.read_payloads(&locs[..1], 9, 0, &d, usize::MAX), Err(crate::Error::Io { .. })));
}

/// What one [`PayloadRead`] says, comparable: the payload, the error, the stored length.
type Said = (Option<Vec<u8>>, Option<String>, Option<usize>);

/// What one [`PayloadRead`] says, comparable.
fn said(p: &PayloadRead) -> Said {
    match p {
        PayloadRead::Payload { .. } => (p.payload().map(<[u8]>::to_vec), None, None),
        PayloadRead::NotRead => (None, None, None),
        PayloadRead::Bad { error, stored_len } => (None, Some(error.to_string()), *stored_len),
    }
}

/// [`EntryLogReader::read_payloads`] as it was before blocks: each entry read by itself.
fn each_alone(r: &mut EntryLogReader, locs: &[i64], d: &Digester, limit: usize) -> Result<Vec<Said>, String> {
    let (mut held, mut want) = (0usize, Vec::new());
    for (i, &loc) in locs.iter().enumerate() {
        if held >= limit && !want.is_empty() {
            break;
        }
        if loc < 0 {
            want.push((None, None, None));
            continue;
        }
        want.push(match r.read(loc as u64, Some(9), Some(i as i64)) {
            Ok(raw) => {
                held += raw.len();
                match d.verify(&raw, Some(9), Some(i as i64)) {
                    Ok(e) => (Some(e.payload.to_vec()), None, None),
                    Err(error) => (None, Some(error.to_string()), Some(raw.len())),
                }
            }
            Err(e @ crate::Error::Io { .. }) => return Err(e.to_string()),
            Err(error) => (None, Some(error.to_string()), None),
        });
    }
    Ok(want)
}

fn in_blocks(r: &mut EntryLogReader, locs: &[i64], d: &Digester, limit: usize) -> Result<Vec<Said>, String> {
    r.read_payloads(locs, 9, 0, d, limit).map(|got| got.iter().map(said).collect()).map_err(|e| e.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Entries read a block at a time say exactly what each read by itself says: small and large
    /// entries, another ledger's entries in between, several logs, a damaged byte, locations not read,
    /// pointing into a record, before the first record or past the end, a log cut short when the
    /// readers opened it (still being written) and the byte limit.
    #[test]
    fn read_payloads_in_blocks_says_what_each_read_says(
        sizes in prop::collection::vec(prop_oneof![4 => 1usize..600, 1 => 15_000usize..40_000], 1..60),
        other in prop::collection::vec(any::<bool>(), 60),
        log_limit in prop_oneof![Just(1u64 << 30), Just(48_000u64)],
        damage in prop::option::of((0usize..60, any::<u8>())),
        skip in prop::collection::vec(any::<bool>(), 60),
        moved in prop::option::of((0usize..60, prop_oneof![1i64..64, Just(-1_000_000), Just(1 << 30)])),
        cut in prop::option::of(1usize..2000),
        limit in prop_oneof![Just(usize::MAX), 0usize..200_000],
    ) {
        let t = TempDir::new();
        let d = Digester::new(DigestType::Crc32c, b"");
        let payloads: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| vec![i as u8; n]).collect();
        let refs: Vec<&[u8]> = payloads.iter().map(|p| &p[..]).collect();
        let stored = d.pack_many(LedgerRun { ledger_id: 9, first_entry_id: 0, last_add_confirmed: -1, length: 0 }, &refs);
        let noise = d.pack_many(LedgerRun { ledger_id: 5, first_entry_id: 0, last_add_confirmed: -1, length: 0 }, &refs);
        let mut w = EntryLogWriter::open(&t.0, opts(log_limit)).unwrap();
        let mut locs = Vec::new();
        for (i, e) in stored.iter().enumerate() {
            if other[i] {
                w.append_stored(&noise[i]).unwrap(); // another ledger's entry in between
            }
            locs.push(w.append_stored(e).unwrap() as i64);
        }
        w.close().unwrap();
        let last_log = list_log_ids(&t.0).unwrap().into_iter().max().unwrap();
        if let Some((i, x)) = damage {
            let loc = locs[i % locs.len()] as u64;
            let mut bytes = read_file(&t.0, loc >> 32);
            let at = (loc & 0xFFFF_FFFF) as usize + 40;
            if at < bytes.len() {
                bytes[at] ^= x | 1;
                std::fs::write(t.0.join(log_file_name(loc >> 32)), bytes).unwrap();
            }
        }
        for (i, l) in locs.iter_mut().enumerate() {
            if skip[i] && i % 3 == 0 {
                *l = -1;
            }
        }
        if let Some((i, by)) = moved {
            let i = i % locs.len();
            if locs[i] >= 0 {
                // into a record, before the first one, or past the end of the log
                locs[i] = (locs[i] & !0xFFFF_FFFF) | ((locs[i] & 0xFFFF_FFFF) + by).clamp(0, 0xFFFF_FFFF);
            }
        }
        // the last log cut short while both readers open it, then written whole again (a log still
        // being written: the length each reader knows is the one it saw)
        let full = read_file(&t.0, last_log);
        let (mut blocks, mut alone) = (EntryLogReader::new(&t.0), EntryLogReader::new(&t.0));
        if let Some(c) = cut {
            let keep = full.len().saturating_sub(c).max(1024);
            std::fs::write(t.0.join(log_file_name(last_log)), &full[..keep]).unwrap();
            blocks.file(last_log).unwrap();
            alone.file(last_log).unwrap();
            std::fs::write(t.0.join(log_file_name(last_log)), &full).unwrap();
        }
        prop_assert_eq!(in_blocks(&mut blocks, &locs, &d, limit), each_alone(&mut alone, &locs, &d, limit));
        // a missing log ends both reads with the same error
        std::fs::remove_file(t.0.join(log_file_name(last_log))).unwrap();
        let (mut blocks, mut alone) = (EntryLogReader::new(&t.0), EntryLogReader::new(&t.0));
        prop_assert_eq!(in_blocks(&mut blocks, &locs, &d, limit), each_alone(&mut alone, &locs, &d, limit));
    }
}

#[test]
fn small_adjacent_entries_are_one_block_and_large_ones_end_it() {
    let t = TempDir::new();
    let d = Digester::new(DigestType::Crc32c, b"");
    let sizes = [100usize, 200, 50, 300, 20_000, 100, 100, 100];
    let payloads: Vec<Vec<u8>> = sizes.iter().map(|&n| vec![1u8; n]).collect();
    let refs: Vec<&[u8]> = payloads.iter().map(|p| &p[..]).collect();
    let stored = d.pack_many(LedgerRun { ledger_id: 9, first_entry_id: 0, last_add_confirmed: -1, length: 0 }, &refs);
    let mut w = EntryLogWriter::open(&t.0, opts(1 << 30)).unwrap();
    let mut locs: Vec<i64> = stored.iter().map(|e| w.append_stored(e).unwrap() as i64).collect();
    w.close().unwrap();
    let mut r = EntryLogReader::new(&t.0);
    // entries 0-4 follow each other closely (the 20 KB entry too: its position is 304 bytes on); entry
    // 5 is 20 KB after entry 4's position: a run of its own
    let (log, end, block) = r.block_from(&locs, 0);
    assert_eq!((log, end, block.is_some()), (0, 5, true));
    let (_, end, block) = r.block_from(&locs, 5);
    assert_eq!((end, block.is_some()), (8, true));
    // one entry: read by itself; a location not read ends a run
    assert_eq!(r.block_from(&locs, 7).1, 8);
    assert!(r.block_from(&locs, 7).2.is_none());
    locs[2] = -1;
    assert_eq!(r.block_from(&locs, 0).1, 2);
    // a run whose block cannot be read (before the first record): each entry by itself, no block
    let bad = [2i64, 3, 4];
    assert_eq!(r.block_from(&bad, 0).1, 3);
    assert!(r.block_from(&bad, 0).2.is_none());
}

#[test]
fn a_copying_scan_caps_its_batches_below_what_32_bit_offsets_hold() {
    let opts = |payload_type, batch_bytes| ArrowScanOptions { payload_type, batch_bytes, ..Default::default() };
    let scan = MultiLogScan::new(vec![], opts(PayloadType::Binary, usize::MAX));
    assert_eq!(scan.batch_bytes(), super::arrow::BINARY_BATCH_BYTES_MAX);
    assert_eq!(MultiLogScan::new(vec![], opts(PayloadType::Binary, 5)).batch_bytes(), 5);
    assert_eq!(MultiLogScan::new(vec![], opts(PayloadType::BinaryView, usize::MAX)).batch_bytes(), usize::MAX);
}

#[test]
fn ledgers_map_sizes_that_wrap_around_fall_back_to_scan() {
    // Three ledgers of 30 bytes; the map claims 2^63-1, 2^63-1 and 92: a sum that wraps to exactly the
    // 90 bytes of records, which an unchecked sum would accept.
    let t = TempDir::new();
    write_log(&t.0, &[(1, 0, 26), (2, 0, 26), (3, 0, 26)], true);
    let mut img = read_file(&t.0, 0);
    let pairs = 1024 + 90 + 24;
    for (k, size) in [(0, i64::MAX), (1, i64::MAX), (2, 92)] {
        assert_eq!(i64::from_be_bytes(img[pairs + 16 * k..pairs + 16 * k + 8].try_into().unwrap()), k as i64 + 1);
        img[pairs + 16 * k + 8..pairs + 16 * k + 16].copy_from_slice(&size.to_be_bytes());
    }
    let m = read_metadata(&img, 0, ScanOptions::default(), true).unwrap();
    assert!(!m.from_index && m.fallback_reason.unwrap().contains("accounts for"));
    assert_eq!(m.metadata.ledgers, BTreeMap::from([(1, 30), (2, 30), (3, 30)]));
}
