//! Fuzz targets, seed corpora and a byte mutator, shared by the libFuzzer crate (`rust/fuzz`), the
//! bounded stable-Rust driver (`tests/fuzz_bounded.rs`) and the property tests.
//!
//! Each `fuzz_*` function takes arbitrary bytes, runs a parser on them and cross-checks the result
//! against the other parsers and encoders. Parser errors are fine; a panic (a parser bug or a broken
//! invariant, reported through `assert!`) is the failure a fuzzer looks for. Every target returns
//! whether the input was accepted, so a feedback-less driver can keep inputs that got deep.
use crate::bulk::{self, EntryColumn};
use crate::codec::batch::{append_record, decode_batch, entry_messages, parse_entry};
use crate::codec::command::{encode_frame, Frame, FrameDecoder};
use crate::codec::compression::{compress, decompress, Codec};
use crate::codec::crc::crc32c;
use crate::codec::entry::{
    add_broker_entry_metadata, decode_broker_entry_metadata, decode_broker_entry_metadata_general,
    encode_metadata_and_payload, parse_layout, parse_layout_general, peek_broker_entry_metadata,
    strip_broker_entry_metadata, MAGIC_BROKER_ENTRY_METADATA,
};
use crate::codec::metascan::{scan_metadata, scan_metadata_general};
use crate::codec::proto::{BaseCommand, CommandPing, CommandSend, KeyValue, MessageMetadata, SingleMessageMetadata};
use crate::error::Error;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, BinaryArray, BinaryViewArray, LargeBinaryArray, RecordBatch};
use prost::Message as _;

/// Decompression ceiling inside the targets: large enough for every seed, small enough that a
/// declared size cannot make a run slow.
pub const FUZZ_LIMIT: usize = 1 << 20;
/// Frame ceiling inside the frame target.
pub const FUZZ_MAX_FRAME: usize = 1 << 20;

/// Two decoders agree: the same value, or errors with the same message (which includes the offset).
fn assert_same_result<T: PartialEq + std::fmt::Debug>(got: &Result<T, Error>, want: &Result<T, Error>) {
    match (got, want) {
        (Ok(g), Ok(w)) => assert_eq!(g, w),
        (Err(g), Err(w)) => assert_eq!((g.to_string(), g.offset()), (w.to_string(), w.offset())),
        _ => panic!("fast path gave {got:?}, general path {want:?}"),
    }
}

/// An error from a parser must point inside (or just past) the buffer it was given, and parsers
/// never report caller errors for input bytes.
fn check_err(e: &Error, len: usize, what: &str) {
    if let Some(o) = e.offset() {
        assert!(o <= len as u64, "{what}: error offset {o} beyond input of {len} bytes: {e}");
    }
    assert!(!matches!(e, Error::InvalidArgument(_)), "{what}: parser raised a caller error for input bytes: {e}");
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

// ---------------------------------------------------------------------------------------------
// Targets
// ---------------------------------------------------------------------------------------------

/// Entry layout, checksum, broker entry metadata (peek/strip/add), the lazy metadata scan against
/// the full protobuf decode, and the consumer's view of the entry (batches, codecs).
pub fn fuzz_entry_parse(data: &[u8]) -> bool {
    let n = data.len();
    let strip = strip_broker_entry_metadata(data);
    let peek = peek_broker_entry_metadata(data);
    assert_same_result(&parse_layout(data), &parse_layout_general(data));
    let layout = match parse_layout(data) {
        Ok(l) => l,
        Err(e) => {
            check_err(&e, n, "parse_layout");
            if let Err(se) = &strip {
                check_err(se, n, "strip");
            }
            if let Err(pe) = &peek {
                check_err(pe, n, "peek");
            }
            assert!(parse_entry(data, false).is_err(), "parse_entry accepted what parse_layout refused");
            return false;
        }
    };
    // The layout partitions the buffer in order.
    if let Some(b) = &layout.broker_entry_metadata {
        assert_eq!(b.start, 6);
        assert_eq!(b.end, layout.headers_start);
    } else {
        assert_eq!(layout.headers_start, 0);
    }
    let ck_len = if layout.checksum.is_some() { 6 } else { 0 };
    assert_eq!(layout.checksummed_start, layout.headers_start + ck_len);
    assert_eq!(layout.metadata.start, layout.checksummed_start + 4);
    assert!(layout.metadata.start <= layout.metadata.end);
    assert_eq!(layout.metadata.end, layout.payload.start);
    assert_eq!(layout.payload.end, n);
    assert_eq!(be_u32(&data[layout.checksummed_start..]) as usize, layout.metadata.len());

    // Checksum verification agrees with a direct CRC of the covered bytes.
    match layout.verify_checksum(data) {
        Ok(Some(c)) => assert_eq!(crc32c(&data[layout.checksummed_start..]), c),
        Ok(None) => assert!(layout.checksum.is_none()),
        Err(Error::ChecksumMismatch { offset, stored, computed }) => {
            assert_eq!(offset, (layout.headers_start + 2) as u64);
            assert_eq!(Some(stored), layout.checksum);
            assert_eq!(computed, crc32c(&data[layout.checksummed_start..]));
            assert_ne!(stored, computed);
        }
        Err(e) => panic!("verify_checksum returned an unexpected error: {e}"),
    }

    // PIP-70 strip/peek/add agree with the layout.
    let stripped = strip.expect("strip failed on an entry whose layout parsed");
    assert_eq!(stripped, &data[layout.headers_start..]);
    match (&layout.broker_entry_metadata, peek) {
        (None, Ok(None)) => {
            let added = add_broker_entry_metadata(data, Some(n as u64), Some(7)).expect("add on an entry without BEM");
            assert_eq!(strip_broker_entry_metadata(&added).unwrap(), data);
            let bem = peek_broker_entry_metadata(&added).unwrap().unwrap();
            assert_eq!((bem.broker_timestamp, bem.index), (Some(n as u64), Some(7)));
            assert_eq!(added.len(), n + 6 + bem.encoded_len());
        }
        (Some(r), Ok(Some(bem))) => {
            assert_eq!(bem, decode_broker_entry_metadata(&data[r.clone()], r.start).unwrap());
            // Re-adding the same values to the stripped entry gives the same metadata back.
            if stripped.len() >= 2 && u16::from_be_bytes([stripped[0], stripped[1]]) == MAGIC_BROKER_ENTRY_METADATA {
                assert!(add_broker_entry_metadata(stripped, bem.broker_timestamp, bem.index).is_err());
            } else {
                let again = add_broker_entry_metadata(stripped, bem.broker_timestamp, bem.index).unwrap();
                assert_eq!(peek_broker_entry_metadata(&again).unwrap(), Some(bem));
                assert_eq!(strip_broker_entry_metadata(&again).unwrap(), stripped);
            }
        }
        (Some(_), Err(e)) => check_err(&e, n, "peek"),
        (l, p) => panic!("layout BEM {l:?} but peek gave {p:?}"),
    }

    // The lazy scan and the full decode agree on what they both read.
    let md_bytes = &data[layout.metadata.clone()];
    let scan = scan_metadata(md_bytes);
    // The in-order paths read what the general walks read, and fail where and as they fail.
    assert_same_result(&scan, &scan_metadata_general(md_bytes));
    if let Some(r) = &layout.broker_entry_metadata {
        let bytes = &data[r.clone()];
        assert_same_result(
            &decode_broker_entry_metadata(bytes, r.start),
            &decode_broker_entry_metadata_general(bytes, r.start),
        );
    }
    let full = MessageMetadata::decode(md_bytes);
    if let Err(e) = &scan {
        check_err(e, md_bytes.len(), "scan_metadata");
    }
    if let (Ok(s), Ok(f)) = (&scan, &full) {
        assert_eq!(s.sequence_id, Some(f.sequence_id));
        assert_eq!(s.publish_time, Some(f.publish_time));
        assert_eq!(s.num_messages_in_batch, f.num_messages_in_batch);
        assert_eq!(s.compression, f.compression.unwrap_or(0));
        assert_eq!(s.uncompressed_size, f.uncompressed_size.unwrap_or(0));
        assert_eq!(s.num_properties as usize, f.properties.len());
        assert_eq!(s.highest_sequence_id, f.highest_sequence_id.unwrap_or(0));
        assert_eq!(s.chunk_id, f.chunk_id);
        let pn = s.producer_name.clone().map(|r| &md_bytes[r]);
        assert_eq!(pn, Some(f.producer_name.as_bytes()));
    }

    let parsed = match parse_entry(data, false) {
        Ok(p) => p,
        Err(e) => {
            check_err(&e, n, "parse_entry");
            return false;
        }
    };
    assert_eq!(parsed.layout, layout);
    assert!(scan.is_ok(), "parse_entry accepted metadata that scan_metadata refuses");
    let with_ck = parse_entry(data, true);
    assert_eq!(with_ck.is_ok(), layout.verify_checksum(data).is_ok());

    let all = entry_messages(data, &parsed, true, FUZZ_LIMIT);
    let kept = entry_messages(data, &parsed, false, FUZZ_LIMIT);
    match (&all, &kept) {
        (Ok(all), Ok(kept)) => {
            match parsed.metadata.num_messages_in_batch {
                None => assert_eq!(all.len(), 1),
                Some(k) => assert_eq!(all.len(), k as usize),
            }
            let expect: Vec<_> = all.iter().filter(|m| !m.compacted_out).cloned().collect();
            assert_eq!(&expect, kept);
            // Re-encoding what was decoded gives the same messages back.
            reencode_round_trip(&parsed.metadata, all, layout.checksum.is_some());
        }
        (Err(a), Err(k)) => {
            assert_eq!(a, k);
            check_err(a, n, "entry_messages");
        }
        (a, k) => panic!("include_compacted_out changed success: {a:?} vs {k:?}"),
    }
    all.is_ok()
}

fn to_smm(m: &crate::codec::batch::DecodedMessage) -> SingleMessageMetadata {
    SingleMessageMetadata {
        properties: m.properties.iter().map(|(k, v)| KeyValue { key: k.clone(), value: v.clone() }).collect(),
        partition_key: m.key.clone(),
        payload_size: 0,
        compacted_out: m.compacted_out.then_some(true),
        event_time: m.event_time,
        partition_key_b64_encoded: m.partition_key_b64_encoded.then_some(true),
        ordering_key: m.ordering_key.clone().map(Into::into),
        sequence_id: Some(m.sequence_id),
        null_value: m.null_value.then_some(true),
        null_partition_key: m.null_partition_key.then_some(true),
    }
}

fn reencode_round_trip(md: &MessageMetadata, msgs: &[crate::codec::batch::DecodedMessage], checksum: bool) {
    let codec = Codec::from_wire(md.compression.unwrap_or(0)).expect("decoded entries have a known codec");
    let e = if md.num_messages_in_batch.is_some() {
        // a message shown without an event time under an entry that has one had its own 0 (else it inherits)
        let own = |m: &crate::codec::batch::DecodedMessage| {
            let mut s = to_smm(m);
            if s.event_time.is_none() && md.event_time.is_some_and(|t| t != 0) {
                s.event_time = Some(0);
            }
            s
        };
        let smms: Vec<(SingleMessageMetadata, &[u8])> = msgs.iter().map(|m| (own(m), &m.payload[..])).collect();
        crate::codec::batch::encode_batch(md, &smms, codec, checksum).expect("re-encode batch")
    } else {
        crate::codec::batch::encode_single(md, &msgs[0].payload, codec, checksum).expect("re-encode single")
    };
    let p = parse_entry(&e, true).expect("re-encoded entry parses");
    let again = entry_messages(&e, &p, true, 1 << 30).expect("re-encoded entry decodes");
    assert_eq!(again.len(), msgs.len());
    for (a, b) in again.iter().zip(msgs) {
        assert_eq!(a.payload, b.payload);
        assert_eq!(a.key, b.key);
        assert_eq!(a.ordering_key, b.ordering_key);
        assert_eq!(a.properties, b.properties);
        assert_eq!(a.batch_index, b.batch_index);
        assert_eq!(a.compacted_out, b.compacted_out);
        assert_eq!(a.null_value, b.null_value);
        if md.num_messages_in_batch.is_some() {
            assert_eq!(a.sequence_id, b.sequence_id);
            assert_eq!(a.event_time, b.event_time);
        }
    }
}

/// The batch splitter: `[i32 num_messages][uncompressed batch]`. Accepted batches re-encode with
/// `append_record` to the same records, and the same batch inside an entry decodes the same way.
pub fn fuzz_batch_decode(data: &[u8]) -> bool {
    if data.len() < 4 {
        return false;
    }
    let count = be_u32(data) as i32;
    let body = &data[4..];
    let res = decode_batch(body, count);
    // The same bytes as the payload of a batched entry, with a codec picked from the input.
    let codec = Codec::ALL[body.len() % Codec::ALL.len()];
    let md = MessageMetadata {
        producer_name: "fuzz".into(),
        sequence_id: 1,
        publish_time: 2,
        num_messages_in_batch: Some(count),
        uncompressed_size: Some(body.len() as u32),
        compression: (codec != Codec::None).then_some(codec as i32),
        ..Default::default()
    };
    let z = compress(codec, body).expect("compress");
    let entry = encode_metadata_and_payload(&md.encode_to_vec(), &z, true).unwrap();
    let p = parse_entry(&entry, true).expect("a freshly encoded entry parses");
    let via_entry = entry_messages(&entry, &p, true, FUZZ_LIMIT.max(body.len()));
    match res {
        Err(e) => {
            check_err(&e, body.len(), "decode_batch");
            let ee = via_entry.expect_err("entry_messages accepted a batch decode_batch refused");
            check_err(&ee, entry.len(), "entry_messages");
            false
        }
        Ok(recs) => {
            assert_eq!(recs.len(), count as usize);
            let mut rebuilt = Vec::with_capacity(body.len());
            let mut end = 0;
            for r in &recs {
                assert!(r.payload.start >= end && r.payload.end <= body.len());
                assert_eq!(r.payload.len(), r.metadata.payload_size as usize);
                end = r.payload.end;
                append_record(&mut rebuilt, &r.metadata, &body[r.payload.clone()]).unwrap();
            }
            assert_eq!(end, body.len(), "records must cover the batch");
            let again = decode_batch(&rebuilt, count).expect("re-encoded batch decodes");
            assert_eq!(again.len(), recs.len());
            for (a, b) in again.iter().zip(&recs) {
                assert_eq!(a.metadata, b.metadata);
                assert_eq!(&rebuilt[a.payload.clone()], &body[b.payload.clone()]);
            }
            let msgs = via_entry.expect("entry_messages refused a batch decode_batch accepted");
            assert_eq!(msgs.len(), recs.len());
            for (m, r) in msgs.iter().zip(&recs) {
                assert_eq!(m.payload, &body[r.payload.clone()]);
                assert_eq!(m.key, r.metadata.partition_key);
            }
            true
        }
    }
}

/// One codec: `[u24 declared uncompressed size][compressed bytes]`. A success has exactly the
/// declared size; failures are decompression or limit errors; compress/decompress round-trips.
pub fn fuzz_decompress_codec(codec: Codec, data: &[u8]) -> bool {
    if data.len() < 3 {
        return false;
    }
    let size = (usize::from(data[0]) << 16) | (usize::from(data[1]) << 8) | usize::from(data[2]);
    let body = &data[3..];
    let ok = match decompress(codec, body, size, FUZZ_LIMIT) {
        Ok(out) => {
            if codec == Codec::None {
                assert_eq!(out, body);
            } else {
                assert_eq!(out.len(), size, "{codec:?} produced a size other than declared");
                assert!(size <= FUZZ_LIMIT);
            }
            // A stream that decoded re-encodes and decodes to the same bytes.
            let z = compress(codec, &out).unwrap();
            assert_eq!(decompress(codec, &z, out.len(), FUZZ_LIMIT.max(out.len())).unwrap(), out);
            true
        }
        Err(Error::Decompression { .. }) => false,
        Err(Error::LimitExceeded { size: s, limit, .. }) => {
            assert!(s > limit && limit == FUZZ_LIMIT as u64);
            false
        }
        Err(e) => panic!("{codec:?} decompress returned an unexpected error kind: {e}"),
    };
    // Every input is also valid uncompressed data: it must survive a round trip.
    let z = compress(codec, body).unwrap();
    assert_eq!(decompress(codec, &z, body.len(), FUZZ_LIMIT.max(body.len())).unwrap(), body, "{codec:?} round trip");
    ok
}

/// All codecs: the first byte picks one (values above 4 must be refused as unsupported).
pub fn fuzz_decompress(data: &[u8]) -> bool {
    let Some((&c, rest)) = data.split_first() else { return false };
    match Codec::from_wire(i32::from(c % 6)) {
        Ok(codec) => fuzz_decompress_codec(codec, rest),
        Err(Error::UnsupportedCompression(_)) => false,
        Err(e) => panic!("from_wire: {e}"),
    }
}

/// The incremental frame decoder: `[k][k split bytes][stream]`. Feeding the stream whole and in
/// pieces gives the same frames and the same error; frames re-encode to the bytes consumed.
pub fn fuzz_frame_decoder(data: &[u8]) -> bool {
    let Some((&k, rest)) = data.split_first() else { return false };
    let k = usize::from(k % 8).min(rest.len());
    let (splits, stream) = rest.split_at(k);
    let mut cuts: Vec<usize> = splits.iter().map(|&b| usize::from(b) * stream.len() / 256).collect();
    cuts.sort_unstable();

    let (whole, whole_err) = drain(&mut FrameDecoder::new(FUZZ_MAX_FRAME), &[stream]);
    let mut pieces = Vec::new();
    let mut prev = 0;
    for &c in &cuts {
        pieces.push(&stream[prev..c]);
        prev = c;
    }
    pieces.push(&stream[prev..]);
    let mut dec = FrameDecoder::new(FUZZ_MAX_FRAME);
    let (split, split_err) = drain(&mut dec, &pieces);
    assert_eq!(whole, split, "frames depend on how the stream was split");
    assert_eq!(whole_err, split_err, "error depends on how the stream was split");

    let mut consumed = Vec::new();
    for f in &whole {
        consumed.extend(encode_frame(&f.command, f.headers_and_payload.as_deref()).unwrap());
    }
    assert_eq!(&stream[..consumed.len()], &consumed[..], "frames do not re-encode to the stream");
    match &whole_err {
        None => assert_eq!(dec.buffered(), stream.len() - consumed.len()),
        Some(e) => {
            check_err(e, stream.len(), "frame decoder");
            // A failed decoder stays failed.
            assert_eq!(dec.feed(b"\0\0\0\x04\0\0\0\0").unwrap_err(), *e);
        }
    }
    // Each frame's command is what a protobuf decoder would be handed; it must not panic.
    for f in &whole {
        let _ = BaseCommand::decode(&f.command[..]);
    }
    whole_err.is_none() && !whole.is_empty()
}

/// Feeds `pieces`, then an empty feed (which surfaces an error deferred behind good frames).
fn drain(dec: &mut FrameDecoder, pieces: &[&[u8]]) -> (Vec<Frame>, Option<Error>) {
    let mut frames = Vec::new();
    for p in pieces.iter().copied().chain(std::iter::once(&[][..])) {
        match dec.feed(p) {
            Ok(f) => frames.extend(f),
            Err(e) => return (frames, Some(e)),
        }
    }
    (frames, None)
}

/// Rows of a column from `[flags][null mask]([u16 len][row])*`. Flags pick the Arrow layout
/// (bits 0-1), include_compacted_out (bit 2) and checksum verification (bit 3); for the message
/// assembly, read-committed (bit 4), the marker column (bit 5) and a publish-time filter (bit 6).
pub fn bulk_rows(data: &[u8]) -> (u8, Vec<Option<&[u8]>>) {
    if data.len() < 2 {
        return (0, Vec::new());
    }
    let (flags, mask) = (data[0], data[1]);
    let mut rows = Vec::new();
    let mut rest = &data[2..];
    while rest.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let row = &rest[2..2 + len];
        rest = &rest[2 + len..];
        let null = mask & (1 << (rows.len() % 8)) != 0;
        rows.push((!null).then_some(row));
    }
    (flags, rows)
}

/// Encodes rows in the `bulk_rows` format (for seeds).
pub fn bulk_input(flags: u8, null_mask: u8, rows: &[&[u8]]) -> Vec<u8> {
    let mut out = vec![flags, null_mask];
    for r in rows {
        let r = &r[..r.len().min(u16::MAX as usize)];
        out.extend_from_slice(&(r.len() as u16).to_be_bytes());
        out.extend_from_slice(r);
    }
    out
}

/// Builds the Arrow column `flags` asks for.
pub fn bulk_array(flags: u8, rows: &[Option<&[u8]>]) -> ArrayRef {
    match flags & 3 {
        1 => std::sync::Arc::new(LargeBinaryArray::from_iter(rows.iter().copied())),
        2 => std::sync::Arc::new(BinaryViewArray::from_iter(rows.iter().copied())),
        _ => std::sync::Arc::new(BinaryArray::from_iter(rows.iter().copied())),
    }
}

/// The single-entry view of an entry's messages (what `Entry.parse(...).messages()` does): framing,
/// broker entry metadata, MessageMetadata, then the messages; the oracle the bulk kernels are held to.
fn single_entry_messages(
    d: &[u8],
    verify: bool,
    include_compacted_out: bool,
) -> Result<Vec<crate::codec::batch::DecodedMessage>, Error> {
    let p = parse_entry(d, verify)?;
    peek_broker_entry_metadata(d)?;
    entry_messages(d, &p, include_compacted_out, FUZZ_LIMIT)
}

/// Every bulk kernel over a column built from the input, each checked row by row against the
/// single-entry functions: same row count, an error exactly where the single call fails.
pub fn fuzz_bulk(data: &[u8]) -> bool {
    let (flags, rows) = bulk_rows(data);
    let include = flags & 4 != 0;
    let verify = flags & 8 != 0;
    let arr = bulk_array(flags, &rows);
    let col = EntryColumn::from_array(arr.as_ref()).expect("binary column");
    let n = rows.len();

    let errs = |b: &RecordBatch| b.column_by_name("error").unwrap().as_string::<i32>().clone();

    let vc = bulk::verify_checksums(&col);
    assert_eq!(vc.num_rows(), n);
    let vc_err = errs(&vc);
    let has = vc.column(0).as_boolean();
    let ok = vc.column(1).as_boolean();
    for (i, r) in rows.iter().enumerate() {
        match r.map(parse_layout) {
            None => assert!(vc_err.is_null(i) && has.is_null(i)),
            Some(Err(e)) => assert_eq!(vc_err.value(i), e.to_string()),
            Some(Ok(l)) => {
                assert!(vc_err.is_null(i));
                assert_eq!(has.value(i), l.checksum.is_some());
                let d = r.unwrap();
                match l.verify_checksum(d) {
                    Ok(Some(_)) => assert!(ok.value(i)),
                    Ok(None) => assert!(ok.is_null(i)),
                    Err(_) => assert!(!ok.value(i)),
                }
            }
        }
    }

    let pk = bulk::peek_broker_entry_metadata(&col);
    assert_eq!(pk.num_rows(), n);
    let pk_err = errs(&pk);
    let ts = pk.column(0).as_primitive::<Int64Type>();
    let ix = pk.column(1).as_primitive::<Int64Type>();
    for (i, r) in rows.iter().enumerate() {
        match r.map(peek_broker_entry_metadata) {
            None | Some(Ok(None)) => assert!(pk_err.is_null(i) && ts.is_null(i) && ix.is_null(i)),
            Some(Ok(Some(b))) => {
                assert!(pk_err.is_null(i));
                assert_eq!(ts.is_valid(i).then(|| ts.value(i) as u64), b.broker_timestamp);
                assert_eq!(ix.is_valid(i).then(|| ix.value(i) as u64), b.index);
            }
            Some(Err(e)) => assert_eq!(pk_err.value(i), e.to_string()),
        }
    }

    let st = bulk::strip_broker_entry_metadata(&col);
    assert_eq!(st.num_rows(), n);
    let st_err = errs(&st);
    let st_col = EntryColumn::from_array(st.column(0).as_ref()).unwrap();
    for (i, r) in rows.iter().enumerate() {
        match r.map(strip_broker_entry_metadata) {
            None => assert!(st_err.is_null(i) && st_col.get(i).is_none()),
            Some(Ok(s)) => assert_eq!(st_col.get(i), Some(s)),
            Some(Err(e)) => assert_eq!(st_err.value(i), e.to_string()),
        }
    }

    let dm = bulk::decode_metadata(&col, verify).expect("fuzz batches are far below 2 GiB");
    // The kernel's fast paths give exactly the columns of the plain row-by-row decode.
    bulk::reference::assert_same_columns(&dm, &bulk::reference::decode_metadata(&col, verify));
    assert_eq!(dm.num_rows(), n);
    // The reader's transaction check stops at the first row the decode gives a transaction id.
    let plain_dm = bulk::decode_metadata(&col, false).expect("fuzz batches are far below 2 GiB");
    let (most, least) =
        (plain_dm.column_by_name("txnid_most_bits").unwrap(), plain_dm.column_by_name("txnid_least_bits").unwrap());
    assert_eq!(bulk::first_transactional(&col), (0..n).find(|&i| most.is_valid(i) || least.is_valid(i)));
    let dm_err = errs(&dm);
    let seq = dm.column_by_name("sequence_id").unwrap().as_primitive::<Int64Type>();
    let publish = dm.column_by_name("publish_time").unwrap().as_primitive::<Int64Type>();
    let num = dm.column_by_name("num_messages").unwrap().as_primitive::<Int32Type>();
    let ck_ok = dm.column_by_name("checksum_ok").unwrap().as_boolean();
    for (i, r) in rows.iter().enumerate() {
        let Some(d) = r else {
            assert!(dm_err.is_null(i) && seq.is_null(i));
            continue;
        };
        match parse_layout(d) {
            Err(e) => assert_eq!(dm_err.value(i), e.to_string()),
            Ok(l) => {
                let scan = scan_metadata(&d[l.metadata.clone()]);
                if dm_err.is_valid(i) {
                    continue; // stricter than the layout (UTF-8, codec, BEM): checked below via parse_entry
                }
                let s = scan.expect("decode_metadata accepted metadata scan_metadata refuses");
                assert_eq!(seq.value(i) as u64, s.sequence_id.unwrap());
                assert_eq!(publish.value(i) as u64, s.publish_time.unwrap());
                assert_eq!(num.value(i), s.num_messages_in_batch.unwrap_or(1));
                if verify && l.checksum.is_some() {
                    assert_eq!(ck_ok.value(i), l.verify_checksum(d).is_ok());
                } else {
                    assert!(ck_ok.is_null(i));
                }
            }
        }
    }

    let ex = bulk::explode_messages(&col, include, verify, FUZZ_LIMIT).expect("fuzz batches are far below 2 GiB");
    let ex_err = errs(&ex);
    let eidx = ex.column(0).as_primitive::<Int64Type>();
    let bidx = ex.column(1).as_primitive::<Int32Type>();
    let payload = ex.column(2).as_binary::<i64>();
    let key = ex.column(3).as_string::<i32>();
    let okey = ex.column(4).as_binary::<i32>();
    let props = ex.column(5).as_map();
    let event = ex.column(6).as_primitive::<Int64Type>();
    let seq = ex.column(9).as_primitive::<Int64Type>();
    let null_value = ex.column(10).as_boolean();
    let compacted_out = ex.column(11).as_boolean();
    let mut row = 0usize;
    let mut any_ok = false;
    for (i, r) in rows.iter().enumerate() {
        let single = r.map(|d| single_entry_messages(d, verify, include));
        match single {
            None => {
                assert_eq!(eidx.value(row), i as i64);
                assert!(ex_err.is_null(row) && bidx.is_null(row) && payload.is_null(row));
                row += 1;
            }
            Some(Err(e)) => {
                assert_eq!(eidx.value(row), i as i64);
                assert!(ex_err.is_valid(row), "explode accepted row {i}; the single-entry path says {e}");
                // Row-level errors from the column never lie about where the bytes are.
                check_err(&e, r.unwrap().len(), "explode");
                row += 1;
            }
            Some(Ok(msgs)) => {
                any_ok = true;
                // An entry whose messages decode also has decodable metadata columns.
                assert!(
                    dm_err.is_null(i),
                    "decode_metadata refused row {i} that explode accepted: {}",
                    dm_err.value(i)
                );
                for m in msgs {
                    assert_eq!(eidx.value(row), i as i64);
                    assert!(ex_err.is_null(row));
                    assert_eq!(bidx.value(row), m.batch_index);
                    assert_eq!(payload.value(row), &m.payload[..]);
                    // Every column equals the single-entry decoder's message (the kernel splits
                    // canonical batches itself and must agree with it byte for byte).
                    assert_eq!(key.is_valid(row).then(|| key.value(row)), m.key.as_deref());
                    assert_eq!(okey.is_valid(row).then(|| okey.value(row)), m.ordering_key.as_deref());
                    let kv = props.value(row);
                    let (ks, vs) = (kv.column(0).as_string::<i32>(), kv.column(1).as_string::<i32>());
                    let got: Vec<(&str, &str)> = (0..kv.len()).map(|j| (ks.value(j), vs.value(j))).collect();
                    let want: Vec<(&str, &str)> = m.properties.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                    assert_eq!(got, want);
                    assert_eq!(event.is_valid(row).then(|| event.value(row) as u64), m.event_time);
                    assert_eq!(seq.value(row) as u64, m.sequence_id);
                    assert_eq!(null_value.value(row), m.null_value);
                    assert_eq!(compacted_out.value(row), m.compacted_out);
                    row += 1;
                }
            }
        }
    }
    assert_eq!(row, ex.num_rows(), "explode produced rows that no entry accounts for");
    check_assemble(flags, &rows, arr.as_ref());
    any_ok
}

/// The message read's per-batch kernel (`assemble_messages`) over the same entries, checked entry by
/// entry against the single-entry view: a plain entry's rows are its messages (none when
/// read-committed or the time filter drops it), an entry refused there is refused here, no other
/// entry has rows. Flags: 16 read-committed (no transaction is known, so any transaction's entry is
/// dropped), 32 the marker column, 64 a publish-time filter.
fn check_assemble(flags: u8, rows: &[Option<&[u8]>], arr: &dyn Array) {
    use crate::bulk::assemble::{
        assemble_messages, BatchContext, TimeFilter, TxnStates, NOT_AN_ENTRY, PLAIN, SPECIAL, UNDECODABLE, UNREAD,
    };
    use crate::bulk::compaction::PositionedEntries;
    use arrow_array::types::Int8Type;
    use arrow_array::{Int64Array, StringArray};
    const AFTER: i64 = 1_700_000_000_001;
    let n = rows.len() as i64;
    let (ledgers, entries) =
        (Int64Array::from_iter_values((0..n).map(|i| 5 + i / 3)), Int64Array::from_iter_values(0..n));
    let input = PositionedEntries::new(arr, &ledgers, &entries).expect("ids as long as the entries");
    let no_states = StringArray::from(Vec::<Option<&str>>::new());
    let (committed, by_time) = (flags & 16 != 0, flags & 64 != 0);
    let filters = if by_time { vec![TimeFilter::new("publish_time", ">", vec![AFTER]).unwrap()] } else { vec![] };
    let context = |threads| BatchContext {
        topic: Some("persistent://public/default/fuzz"),
        partition: 3,
        markers: flags & 32 != 0,
        txn: TxnStates::new(&[], &[], &no_states, "UNKNOWN").unwrap(),
        committed,
        time_filters: &filters,
        limit: FUZZ_LIMIT,
        threads,
    };
    let cx = context(1);
    let (got, info) = assemble_messages(&input, &cx).expect("a fuzz input is far below 2 GiB of payloads");
    // the payloads decompressed on three threads ahead of the explode: the same rows, the same verdicts
    let threaded = assemble_messages(&input, &context(3)).expect("as on one thread");
    assert_eq!((&threaded.0, &threaded.1), (&got, &info), "decompressing on threads changed the read");
    assert_eq!(info.num_rows(), rows.len());
    assert_eq!(got.column_by_name("marker").is_some(), cx.markers);
    let status = info.column(0).as_primitive::<Int8Type>();
    let error = info.column(1).as_string::<i32>();
    let batch_size = info.column(2).as_primitive::<Int32Type>();
    let column = |name: &str| got.column_by_name(name).unwrap_or_else(|| panic!("no {name} column")).clone();
    let (ord, ledger, entry, seq) = (column("_ord"), column("ledger_id"), column("entry_id"), column("sequence_id"));
    let (ord, ledger, entry, seq) = (
        ord.as_primitive::<Int64Type>(),
        ledger.as_primitive::<Int64Type>(),
        entry.as_primitive::<Int64Type>(),
        seq.as_primitive::<Int64Type>(),
    );
    let (bidx, payload) = (column("batch_index"), column("payload"));
    let (bidx, payload) = (bidx.as_primitive::<Int32Type>(), payload.as_binary::<i32>());
    let mut row = 0usize;
    for (i, r) in rows.iter().enumerate() {
        let start = row;
        while row < got.num_rows() && ord.value(row) == i as i64 {
            row += 1;
        }
        let k = row - start;
        let s = status.value(i);
        let Some(d) = r else {
            assert_eq!((s, k), (UNREAD, 0), "a null entry is unread and has no rows");
            continue;
        };
        let single = single_entry_messages(d, true, false);
        // What decides an entry's fate before anything is decompressed: its metadata as the kernel scans it
        // (also there when the checksum or the payload is bad, as for a marker or an encrypted entry)
        let meta = parse_layout(d).ok().and_then(|l| scan_metadata(&d[l.metadata.clone()]).ok());
        assert_ne!(s, UNREAD, "entry {i} is there, yet unread");
        if s == NOT_AN_ENTRY {
            assert!(single.is_err(), "assemble refused entry {i} ({}); the single-entry view reads it", error.value(i));
            assert!(k == 0 && error.is_valid(i) && batch_size.is_null(i));
            continue;
        }
        let m = meta.unwrap_or_else(|| panic!("entry {i} has status {s}, but its metadata does not scan"));
        assert_eq!(batch_size.is_valid(i).then(|| batch_size.value(i)), m.num_messages_in_batch);
        let special = m.marker_type.is_some()
            || (m.uuid.is_some() && m.num_chunks_from_msg.is_some_and(|c| c > 1))
            || m.encrypted;
        assert_eq!(s == SPECIAL, special, "entry {i}: status {s} against what its metadata says");
        let dropped = (committed && (m.txnid_most_bits.is_some() || m.txnid_least_bits.is_some()))
            || (by_time && !m.publish_time.is_some_and(|t| t as i64 > AFTER));
        match s {
            SPECIAL => assert_eq!(k, 0, "a marker, chunk or encrypted entry has no rows here"),
            // dropped before it is decompressed: no rows, whatever its payload holds
            PLAIN if dropped => assert!(k == 0 && error.is_null(i), "entry {i} was dropped yet has {k} rows"),
            PLAIN => {
                let msgs = single.unwrap_or_else(|e| panic!("assemble exploded entry {i}; the single-entry view: {e}"));
                assert!(error.is_null(i));
                assert_eq!(k, msgs.len(), "entry {i}: rows against the single-entry view's messages");
                for (j, msg) in msgs.iter().enumerate() {
                    let at = start + j;
                    assert_eq!(bidx.value(at), msg.batch_index);
                    assert_eq!(
                        payload.is_valid(at).then(|| payload.value(at)),
                        (!msg.null_value).then_some(&msg.payload[..])
                    );
                    assert_eq!(seq.value(at) as u64, msg.sequence_id);
                    assert_eq!((ledger.value(at), entry.value(at)), (ledgers.value(i), entries.value(i)));
                }
            }
            UNDECODABLE => {
                assert!(!dropped, "entry {i} was decompressed although its filters drop it");
                assert!(
                    single.is_err(),
                    "assemble found entry {i} undecodable ({}); the single-entry view reads it",
                    error.value(i)
                );
                assert!(k == 0 && error.is_valid(i));
            }
            other => panic!("entry {i}: unknown status {other}"),
        }
    }
    assert_eq!(row, got.num_rows(), "assemble produced rows out of entry order or for no entry");
}

// ---------------------------------------------------------------------------------------------
// Seeds: valid inputs of every shape, so mutations start from bytes that get deep.
// ---------------------------------------------------------------------------------------------

fn sample_metadata(seq: u64) -> MessageMetadata {
    MessageMetadata {
        producer_name: format!("producer-{seq}"),
        sequence_id: seq,
        publish_time: 1_700_000_000_000 + seq,
        properties: vec![KeyValue { key: "k".into(), value: "v".into() }],
        partition_key: (seq % 2 == 0).then(|| format!("key-{seq}")),
        event_time: Some(42),
        ..Default::default()
    }
}

fn sample_smms() -> Vec<(SingleMessageMetadata, Vec<u8>)> {
    (0..4u64)
        .map(|i| {
            let smm = SingleMessageMetadata {
                properties: (0..i).map(|j| KeyValue { key: format!("p{j}"), value: "x".repeat(j as usize) }).collect(),
                partition_key: (i != 1).then(|| format!("k{i}")),
                ordering_key: (i == 2).then(|| vec![1u8, 2, 3].into()),
                event_time: (i == 3).then_some(99),
                sequence_id: Some(10 + i),
                compacted_out: (i == 1).then_some(true),
                null_value: (i == 3).then_some(true),
                ..Default::default()
            };
            (smm, format!("payload number {i} ").repeat(i as usize + 1).into_bytes())
        })
        .collect()
}

/// Valid entries: single and batched, every codec, with and without checksum and broker entry
/// metadata, plus Pulsar's worked example.
pub fn sample_entries() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let smms = sample_smms();
    let pairs: Vec<(SingleMessageMetadata, &[u8])> = smms.iter().map(|(s, p)| (s.clone(), &p[..])).collect();
    for (ci, codec) in Codec::ALL.into_iter().enumerate() {
        let md = sample_metadata(ci as u64);
        let single =
            crate::codec::batch::encode_single(&md, &b"hello pulsar ".repeat(ci + 1), codec, ci % 2 == 0).unwrap();
        let batch = crate::codec::batch::encode_batch(&md, &pairs, codec, ci % 2 == 1).unwrap();
        out.push(add_broker_entry_metadata(&batch, Some(1_700_000_000_123), Some(ci as u64 * 4 + 3)).unwrap());
        out.push(add_broker_entry_metadata(&single, None, Some(ci as u64)).unwrap());
        out.push(single);
        out.push(batch);
    }
    let empty = MessageMetadata { producer_name: "p".into(), sequence_id: 0, publish_time: 1000, ..Default::default() };
    out.push(crate::codec::batch::encode_single(&empty, b"", Codec::None, true).unwrap());
    // The fact sheet's worked example: metadata {p, 0, 1000, uncompressed_size 2}, payload "hi".
    let ex = encode_metadata_and_payload(&[0x0a, 0x01, 0x70, 0x10, 0x00, 0x18, 0xe8, 0x07, 0x48, 0x02], b"hi", true)
        .unwrap();
    out.push(add_broker_entry_metadata(&ex, Some(1000), Some(0)).unwrap());
    out.push(ex);
    let chunk = MessageMetadata {
        uuid: Some("producer-7".into()),
        chunk_id: Some(0),
        num_chunks_from_msg: Some(2),
        total_chunk_msg_size: Some(10),
        ..sample_metadata(7)
    };
    out.push(crate::codec::batch::encode_single(&chunk, b"01234", Codec::None, true).unwrap());
    // a transaction's batch: what read-committed drops while its transaction is not known committed
    let txn = MessageMetadata { txnid_most_bits: Some(1), txnid_least_bits: Some(9), ..sample_metadata(8) };
    out.push(crate::codec::batch::encode_batch(&txn, &pairs, Codec::Lz4, true).unwrap());
    out
}

pub fn seeds_entry_parse() -> Vec<Vec<u8>> {
    sample_entries()
}

pub fn seeds_batch_decode() -> Vec<Vec<u8>> {
    let smms = sample_smms();
    let mut out = Vec::new();
    for k in 0..=smms.len() {
        let mut b = (k as u32).to_be_bytes().to_vec();
        for (s, p) in &smms[..k] {
            append_record(&mut b, s, p).unwrap();
        }
        out.push(b);
    }
    out
}

pub fn seeds_decompress_codec(codec: Codec) -> Vec<Vec<u8>> {
    let texts: [Vec<u8>; 4] = [
        Vec::new(),
        b"a".to_vec(),
        b"The quick brown fox jumps over the lazy dog. ".repeat(12),
        (0..2000u32).map(|i| (i * 7 % 251) as u8).collect(),
    ];
    let mut out = Vec::new();
    for t in &texts {
        let mut v = (t.len() as u32).to_be_bytes()[1..].to_vec();
        v.extend(compress(codec, t).unwrap());
        out.push(v);
    }
    if codec == Codec::Zlib {
        // The Java client's form: sync-flushed, no final block, no Adler-32.
        use flate2::{Compress, Compression, FlushCompress};
        let t = &texts[2];
        let mut c = Compress::new(Compression::default(), true);
        let mut z = vec![0u8; t.len() + 64];
        c.compress(t, &mut z, FlushCompress::Sync).unwrap();
        z.truncate(c.total_out() as usize);
        let mut v = (t.len() as u32).to_be_bytes()[1..].to_vec();
        v.extend(z);
        out.push(v);
    }
    out
}

pub fn seeds_decompress() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for c in Codec::ALL {
        for s in seeds_decompress_codec(c) {
            let mut v = vec![c as u8];
            v.extend(s);
            out.push(v);
        }
    }
    out
}

/// A stream of frames: PING, and SENDs carrying sample entries.
pub fn sample_stream() -> Vec<u8> {
    let mut s = Vec::new();
    let ping = BaseCommand { r#type: 18, ping: Some(CommandPing {}), ..Default::default() };
    s.extend(encode_frame(&ping.encode_to_vec(), None).unwrap());
    for (i, e) in sample_entries().into_iter().take(4).enumerate() {
        let send = BaseCommand {
            r#type: 6,
            send: Some(CommandSend { producer_id: 1, sequence_id: i as u64, ..Default::default() }),
            ..Default::default()
        };
        s.extend(encode_frame(&send.encode_to_vec(), Some(&e)).unwrap());
    }
    s
}

pub fn seeds_frame_decoder() -> Vec<Vec<u8>> {
    let stream = sample_stream();
    let mut out = Vec::new();
    for splits in [&[][..], &[128][..], &[1, 50, 200][..], &[0, 3, 9, 27, 81, 243, 255][..]] {
        let mut v = vec![splits.len() as u8];
        v.extend_from_slice(splits);
        v.extend_from_slice(&stream);
        out.push(v);
    }
    out
}

pub fn seeds_bulk() -> Vec<Vec<u8>> {
    let entries = sample_entries();
    let rows: Vec<&[u8]> = entries.iter().map(|e| &e[..]).collect();
    let mut out = Vec::new();
    for (flags, mask) in [(0u8, 0u8), (1 | 4 | 32, 0x10), (2 | 8 | 16, 0), (8 | 4 | 64, 0x81)] {
        out.push(bulk_input(flags, mask, &rows));
        out.push(bulk_input(flags, mask, &rows[..3]));
    }
    out
}

/// Entry-log record heads (what a reader reads at an entry's location to decode its metadata): the
/// verdict is a position inside the buffer, a length beyond it (never one that shrinks), or invalid;
/// a head found must parse as the start of a Pulsar entry the same way [`parse_layout`] reads it.
pub fn fuzz_record_head(data: &[u8]) -> bool {
    use crate::bookkeeper::entrylog::head::{record_head, Head};
    let ids = |at: usize| data.get(at..at + 8).map(|s| i64::from_be_bytes(s.try_into().unwrap())).unwrap_or(0);
    let (lid, eid) = (ids(4), ids(12));
    let mut accepted = false;
    for digest in [None, Some(0), Some(4), Some(8), Some(20)] {
        match record_head(data, lid, eid, digest) {
            Head::At { start, end, digest_len } => {
                assert!(start == 36 + digest_len && start <= end && end <= data.len());
                assert!(digest.is_none() || digest == Some(digest_len));
                accepted = true;
            }
            Head::Need { len, digest_len } => {
                assert!(len > data.len());
                assert!(digest.is_none() || digest == Some(digest_len));
            }
            Head::Invalid => {}
        }
    }
    accepted
}

/// Records holding the sample entries, behind each digest length.
pub fn seeds_record_head() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (i, e) in sample_entries().iter().enumerate() {
        let dlen = [4usize, 8, 20, 0][i % 4];
        let mut body = Vec::new();
        for v in [7i64, i as i64, -1, e.len() as i64] {
            body.extend_from_slice(&v.to_be_bytes());
        }
        body.extend(vec![0u8; dlen]);
        body.extend_from_slice(e);
        let mut r = (body.len() as u32).to_be_bytes().to_vec();
        r.extend(body);
        out.push(r);
    }
    out
}

/// An entry log's bytes (log id 0): its ledgers map against a scan of its records, the scan's records
/// and issues inside the file, nothing lost without an issue.
pub fn fuzz_entry_log(data: &[u8]) -> bool {
    use crate::bookkeeper::entrylog::reader::read_metadata;
    use crate::bookkeeper::entrylog::scan::scan_all;
    use crate::bookkeeper::entrylog::ScanOptions;
    let n = data.len() as u64;
    let scanned = match scan_all(data, 0, ScanOptions::default()) {
        Ok((recs, summary)) => {
            let mut end = 0;
            for (off, _, _, d) in &recs {
                assert!(*off >= end && off + 4 + d.len() as u64 <= n, "record at {off} overlaps or passes the end");
                end = off + 4 + d.len() as u64;
            }
            for i in &summary.issues {
                assert!(i.offset <= n && i.offset.saturating_add(i.length) <= n.max(i.offset), "issue {i:?} outside");
            }
            assert_eq!(summary.records, recs.len() as u64);
            assert_eq!(summary.record_bytes, recs.iter().map(|r| 4 + r.3.len() as u64).sum::<u64>());
            Some(recs)
        }
        Err(e) => {
            check_err(&e, data.len(), "scan_all");
            None
        }
    };
    for use_index in [true, false] {
        match read_metadata(data, 0, ScanOptions::default(), use_index) {
            Ok(m) => {
                let md = &m.metadata;
                let sum = md.ledgers.values().try_fold(0u64, |t, &s| t.checked_add(s));
                assert_eq!(sum, Some(md.total_size), "ledger sizes do not add up to the total");
                assert!(md.total_size <= n, "{} bytes of ledgers in a {n}-byte file", md.total_size);
                if !m.from_index {
                    // built by the scan: exactly the records the scan returns
                    let recs = scanned.as_ref().expect("the scan ran");
                    let mut want = std::collections::BTreeMap::new();
                    for (_, lid, _, d) in recs.iter().filter(|r| r.1 >= 0) {
                        *want.entry(*lid).or_insert(0u64) += 4 + d.len() as u64;
                    }
                    assert_eq!(md.ledgers, want, "scanned metadata differs from the scan");
                }
            }
            Err(e) => check_err(&e, data.len(), "read_metadata"),
        }
    }
    scanned.is_some_and(|r| !r.is_empty())
}

/// Logs with and without a ledgers map, of one and several ledgers, and one cut short.
pub fn seeds_entry_log() -> Vec<Vec<u8>> {
    use crate::bookkeeper::entrylog::format::HEADER_SIZE;
    let mut out = Vec::new();
    for (ledgers, sealed) in [(vec![1i64], false), (vec![1, 2, 3], true), (vec![5, 5, 9], true)] {
        let recs: Vec<Vec<u8>> = ledgers
            .iter()
            .enumerate()
            .map(|(k, &lid)| [&lid.to_be_bytes()[..], &(k as i64).to_be_bytes(), &vec![0xdd; 10 + 7 * k]].concat())
            .collect();
        out.push(entry_log_image(&recs, sealed));
    }
    let cut = out[1][..HEADER_SIZE as usize + 30].to_vec();
    out.push(cut);
    out
}

/// A named target with its seed corpus.
#[derive(Clone, Copy)]
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]) -> bool,
    pub seeds: fn() -> Vec<Vec<u8>>,
}

/// Transaction-log entries: the split against the record decoders and both Arrow kernels, which
/// must agree on how many records an entry holds and on whether it decodes.
pub fn fuzz_txn_log(data: &[u8]) -> bool {
    use crate::codec::txn::{decode_pending_ack, decode_txn_metadata, pack_batched_entry, split_entry};
    let n = data.len();
    let arr = BinaryArray::from(vec![data]);
    let col = EntryColumn::from_array(&arr).unwrap();
    let tl = bulk::txn::explode_transaction_log(&col);
    let pa = bulk::txn::explode_pending_ack_log(&col);
    let split = match split_entry(data) {
        Ok(s) => s,
        Err(e) => {
            check_err(&e, n, "split_entry");
            assert_eq!(tl.num_rows(), 1);
            assert_eq!(pa.num_rows(), 1);
            return false;
        }
    };
    for r in &split.records {
        assert!(r.end <= n);
    }
    let txn_ok = split.records.iter().all(|r| match decode_txn_metadata(&data[r.clone()]) {
        Ok(_) => true,
        Err(e) => {
            check_err(&e, r.len(), "decode_txn_metadata");
            false
        }
    });
    let pa_ok = split.records.iter().all(|r| decode_pending_ack(&data[r.clone()]).is_ok());
    let errors = |b: &RecordBatch| b.column_by_name("error").unwrap().null_count() != b.num_rows();
    assert_eq!(!errors(&tl), txn_ok, "kernel and decoder disagree on a transaction-log entry");
    assert_eq!(!errors(&pa), pa_ok, "kernel and decoder disagree on a pending-ack entry");
    if txn_ok {
        assert_eq!(tl.num_rows(), split.records.len()); // an empty batch has no record rows
    }
    if split.batched {
        // Re-packing the records gives an entry that splits into the same records.
        let recs: Vec<&[u8]> = split.records.iter().map(|r| &data[r.clone()]).collect();
        let mut again = Vec::new();
        pack_batched_entry(recs.iter().copied(), &mut again);
        let back = split_entry(&again).unwrap();
        assert_eq!(back.records.len(), recs.len());
    }
    txn_ok || pa_ok
}

/// Compaction over arbitrary entries: phase one's records, rebatching (keep all, keep none, keep
/// even indexes, both formats) read back with the same retained messages, the last message position,
/// and raw-message framing round trips.
pub fn fuzz_compaction(data: &[u8]) -> bool {
    use crate::codec::compaction::{
        compaction_records, decode_raw_message, encode_raw_message, last_message_position, rebatch, BatchFormat,
    };
    use crate::codec::proto::MessageIdData;
    let n = data.len();
    if let Err(e) = decode_raw_message(data) {
        check_err(&e, n, "decode_raw_message");
    }
    let recs = match compaction_records(data, FUZZ_LIMIT) {
        Ok(r) => r,
        Err(e) => {
            check_err(&e, n, "compaction_records");
            return false;
        }
    };
    let id = MessageIdData { ledger_id: 3, entry_id: 4, partition: Some(-1), ..Default::default() };
    let raw = encode_raw_message(&id, data).unwrap();
    let (back, entry) = decode_raw_message(&raw).unwrap();
    assert_eq!((back.ledger_id, back.entry_id, entry), (3, 4, data));
    let _ = last_message_position(data, FUZZ_LIMIT);
    let Some(recs) = recs else { return true };
    if recs.iter().all(|r| r.batch_index < 0) {
        return true; // taken whole (not a batch, or an encrypted one): phase two copies it, no rebatch
    }
    for format in [BatchFormat::Placeholders, BatchFormat::RetainedOnly] {
        match rebatch(data, |i, _| i % 2 == 0, false, format, FUZZ_LIMIT) {
            Ok(Some(out)) => {
                let again = compaction_records(&out, FUZZ_LIMIT).expect("a rebatched entry decodes").unwrap();
                let want: Vec<i32> = recs
                    .iter()
                    .filter(|r| r.batch_index % 2 == 0 && r.key.is_some() && r.payload_size > 0)
                    .map(|r| r.batch_index)
                    .collect();
                assert_eq!(again.iter().map(|r| r.batch_index).collect::<Vec<_>>(), want);
                let (last, _) = last_message_position(&out, FUZZ_LIMIT).expect("last position of a rebatched entry");
                assert!(want.contains(&last) || last == -1);
            }
            Ok(None) => {}
            Err(e) => check_err(&e, n, "rebatch"),
        }
    }
    true
}

/// A pending-ack store record (an individual ACK) of transaction `(most, least)` for one position
/// `(ledger, entry)` with its ack set and batch size: the one such fixture of the seeds and the tests.
pub fn pending_ack_entry(
    (most, least): (u64, u64),
    (ledger_id, entry_id): (u64, u64),
    ack_set: Vec<i64>,
    batch_size: i32,
) -> crate::codec::proto::transaction::PendingAckMetadataEntry {
    use crate::codec::proto::transaction;
    transaction::PendingAckMetadataEntry {
        pending_ack_op: Some(1),
        ack_type: Some(0),
        txnid_least_bits: Some(least),
        txnid_most_bits: Some(most),
        pending_ack_metadata: vec![transaction::PendingAckMetadata {
            ledger_id,
            entry_id,
            ack_set,
            batch_size: Some(batch_size),
        }],
    }
}

pub fn seeds_txn_log() -> Vec<Vec<u8>> {
    use crate::codec::proto::TransactionMetadataEntry;
    use crate::codec::txn::pack_batched_entry;
    let rec = |i: u64| {
        TransactionMetadataEntry {
            metadata_op: Some((i % 4) as i32),
            txnid_least_bits: Some(i),
            txnid_most_bits: Some(1),
            partitions: vec![format!("persistent://t/n/p{i}")],
            timeout_ms: Some(1000),
            ..Default::default()
        }
        .encode_to_vec()
    };
    let pa = pending_ack_entry((0, 1), (5, 6), vec![-2, 7], 70).encode_to_vec();
    let recs: Vec<Vec<u8>> = (0..4).map(rec).collect();
    let mut batched = Vec::new();
    pack_batched_entry(recs.iter().map(Vec::as_slice), &mut batched);
    let mut pa_batched = Vec::new();
    pack_batched_entry([pa.as_slice(), pa.as_slice()], &mut pa_batched);
    vec![batched, rec(9), pa, pa_batched]
}

pub fn seeds_compaction() -> Vec<Vec<u8>> {
    sample_entries()
}

// ---------------------------------------------------------------------------------------------
// Bookie entries: header, digest managers
// ---------------------------------------------------------------------------------------------

/// The password of the MAC digests in the bookie-entry and Arrow entry-log targets.
const FUZZ_MAC_PASSWORD: &[u8] = b"fuzz-secret";

/// A bookie entry's digest the plain way, over the header and payload concatenated (the digesters
/// stream them): CRC32C, CRC32 as a big-endian long, HMAC-SHA1 keyed by SHA-1("mac" ‖ password), none.
fn reference_digest(
    t: crate::bookkeeper::digest::DigestType,
    password: &[u8],
    header: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    use crate::bookkeeper::digest::DigestType;
    use hmac::Mac as _;
    use sha1::Digest as _;
    let whole = [header, payload].concat();
    match t {
        DigestType::Crc32c => crc32c(&whole).to_be_bytes().to_vec(),
        DigestType::Crc32 => u64::from(crc32fast::hash(&whole)).to_be_bytes().to_vec(),
        DigestType::Mac => {
            let key = sha1::Sha1::digest([b"mac".as_slice(), password].concat());
            let mut m = hmac::Hmac::<sha1::Sha1>::new_from_slice(&key).unwrap();
            m.update(&whole);
            m.finalize().into_bytes().to_vec()
        }
        DigestType::Dummy => Vec::new(),
    }
}

/// Whether stored bytes hold a header, a digest of type `t` and a payload the digest covers (the plain way).
fn reference_verifies(t: crate::bookkeeper::digest::DigestType, password: &[u8], data: &[u8]) -> bool {
    let dl = t.digest_len();
    data.len() >= 32 + dl && reference_digest(t, password, &data[..32], &data[32 + dl..]) == data[32..32 + dl]
}

/// The digest type detection answers: the first of CRC32C, CRC32 and (with a password) MAC that verifies.
fn reference_detect(data: &[u8], password: Option<&[u8]>) -> Option<crate::bookkeeper::digest::DigestType> {
    use crate::bookkeeper::digest::DigestType;
    [DigestType::Crc32c, DigestType::Crc32, DigestType::Mac]
        .into_iter()
        .find(|&t| (t != DigestType::Mac || password.is_some()) && reference_verifies(t, password.unwrap_or(b""), data))
}

/// Bookie entries (`[flags][password length][password][stored bytes]`) under every digest type:
/// 1. the stored bytes as given: the split lies inside them and agrees with the bytes, a short entry is a
///    typed error at its end, the digest check and verification agree with the digest computed the plain
///    way (a mismatch names both digests), detection names the first type that verifies, with any digest
///    length (`usize::MAX` included);
/// 2. an entry packed from their header and payload verifies (with its ids), packs the same alone and in a
///    ledger run, and any single-byte change of its header, digest or payload fails verification with a
///    `DigestMismatch` (a CRC catches every burst of 8 bits; HMAC-SHA1 any change), except under DUMMY,
///    which has no digest: there the ids are still checked and any other change reads back as changed.
pub fn fuzz_bookie_entry(data: &[u8]) -> bool {
    use crate::bookkeeper::digest::{
        detect_digest_type, parse_bookie_entry, DigestType, Digester, LedgerRun, BOOKIE_HEADER_SIZE,
    };
    if data.len() < 2 {
        return false;
    }
    let flags = data[0];
    let pw_len = usize::from(data[1] & 15).min(data.len() - 2);
    let password = if flags & 1 != 0 { &data[2..2 + pw_len] } else { FUZZ_MAC_PASSWORD };
    let stored = &data[2 + pw_len..];
    let n = stored.len();
    let i64_at = |b: &[u8], at: usize| i64::from_be_bytes(b[at..at + 8].try_into().unwrap());

    // 1. The stored bytes as given.
    for dl in [0, 1, 4, 8, 20, n.saturating_sub(31), n, n + 1, usize::MAX - 31, usize::MAX] {
        match parse_bookie_entry(stored, dl) {
            Ok(e) => {
                assert!(n >= BOOKIE_HEADER_SIZE + dl);
                assert_eq!(
                    (e.ledger_id, e.entry_id, e.last_add_confirmed, e.length),
                    (i64_at(stored, 0), i64_at(stored, 8), i64_at(stored, 16), i64_at(stored, 24))
                );
                assert_eq!(e.payload_offset, BOOKIE_HEADER_SIZE + dl);
                assert_eq!(e.digest, &stored[BOOKIE_HEADER_SIZE..e.payload_offset]);
                assert_eq!(e.payload, &stored[e.payload_offset..]);
            }
            Err(e) => {
                assert!(n < BOOKIE_HEADER_SIZE.saturating_add(dl), "a {n}-byte entry refused with a {dl}-byte digest");
                assert!(matches!(e, Error::Corrupt { offset, .. } if offset == n as u64), "{e:?}");
            }
        }
    }
    let mut verified_any = false;
    for t in DigestType::ALL {
        let g = Digester::new(t, password);
        let dl = t.digest_len();
        let want = reference_verifies(t, password, stored);
        match g.check(stored) {
            Ok((e, ok)) => {
                assert_eq!(ok, want, "{t:?}: check against the plain digest");
                assert_eq!(e, parse_bookie_entry(stored, dl).unwrap());
            }
            Err(e) => {
                assert!(n < BOOKIE_HEADER_SIZE + dl);
                check_err(&e, n, "check");
            }
        }
        match g.verify(stored, None, None) {
            Ok(e) => {
                assert!(want);
                // the ids are checked after the digest, against the header's
                let (l, x) = (e.ledger_id, e.entry_id);
                assert!(g.verify(stored, Some(l), Some(x)).is_ok());
                let other = g.verify(stored, Some(l.wrapping_add(1)), Some(x)).unwrap_err();
                assert!(matches!(other, Error::Corrupt { offset: 0, .. }), "{other:?}");
                let other = g.verify(stored, Some(l), Some(x.wrapping_sub(1))).unwrap_err();
                assert!(matches!(other, Error::Corrupt { offset: 8, .. }), "{other:?}");
                verified_any |= t != DigestType::Dummy;
            }
            Err(Error::DigestMismatch { digest, ledger_id, entry_id, offset, stored: s, computed }) => {
                assert!(!want && t != DigestType::Dummy);
                assert_eq!((digest, offset), (t.name(), BOOKIE_HEADER_SIZE as u64));
                assert_eq!((ledger_id, entry_id), (i64_at(stored, 0), i64_at(stored, 8)));
                assert_eq!(s, &stored[32..32 + dl]);
                assert_eq!(computed, reference_digest(t, password, &stored[..32], &stored[32 + dl..]));
                assert_ne!(s, computed);
            }
            Err(e) => {
                assert!(n < BOOKIE_HEADER_SIZE + dl, "{t:?}: {e}");
                check_err(&e, n, "verify");
            }
        }
    }
    let mac = Digester::new(DigestType::Mac, password);
    for with_mac in [false, true] {
        let got = detect_digest_type(stored, with_mac.then_some(&mac));
        assert_eq!(got, reference_detect(stored, with_mac.then_some(password)), "detected digest type");
    }

    // 2. Entries packed from the header and payload of the stored bytes.
    if n < BOOKIE_HEADER_SIZE {
        return verified_any;
    }
    let (lid, eid, lac, length) = (i64_at(stored, 0), i64_at(stored, 8), i64_at(stored, 16), i64_at(stored, 24));
    let payload = &stored[BOOKIE_HEADER_SIZE..];
    // up to 8 payload bytes to change, spread over the payload, and a nonzero change per position
    let spots: Vec<usize> = (0..8usize.min(payload.len())).map(|k| k * payload.len() / 8).collect();
    let delta = |p: usize| [1u8, 0x80, 0xff, 0x5a, flags | 1][p % 5];
    for t in DigestType::ALL {
        let g = Digester::new(t, password);
        let dl = t.digest_len();
        let packed = g.pack(lid, eid, lac, length, payload);
        assert_eq!(
            packed,
            [&stored[..32], &reference_digest(t, password, &stored[..32], payload)[..], payload].concat()
        );
        let e = g.verify(&packed, Some(lid), Some(eid)).expect("a packed entry verifies");
        assert_eq!((e.last_add_confirmed, e.length, e.payload), (lac, length, payload));
        if t != DigestType::Dummy {
            let m = (t == DigestType::Mac).then_some(&mac);
            let found = detect_digest_type(&packed, m).expect("a packed entry's digest type is found");
            assert!(reference_verifies(found, password, &packed));
        }
        // a run of entries cut from the payload, packed as a ledger handle packs them
        let cut = usize::from(flags >> 4) * payload.len() / 16;
        let parts = [&payload[..cut], &payload[cut..]];
        let run = LedgerRun { ledger_id: lid, first_entry_id: eid, last_add_confirmed: lac, length };
        let many = g.pack_many(run, &parts);
        let second = (eid.wrapping_add(1), eid, length.wrapping_add(cut as i64).wrapping_add(parts[1].len() as i64));
        assert_eq!(many[0], g.pack(lid, eid, lac, length.wrapping_add(cut as i64), parts[0]));
        assert_eq!(many[1], g.pack(lid, second.0, second.1, second.2, parts[1]));
        assert!(g.verify(&many[1], Some(lid), Some(second.0)).is_ok());
        // shorter than the header and digest: a typed error at the end of the bytes
        for k in [0, BOOKIE_HEADER_SIZE - 1, BOOKIE_HEADER_SIZE + dl - 1] {
            if k < BOOKIE_HEADER_SIZE + dl {
                let err = g.verify(&packed[..k], None, None).unwrap_err();
                assert!(matches!(err, Error::Corrupt { offset, .. } if offset == k as u64), "{err:?}");
            }
        }
        let positions = (0..BOOKIE_HEADER_SIZE + dl).chain(spots.iter().map(|s| BOOKIE_HEADER_SIZE + dl + s));
        for p in positions {
            let mut m = packed.clone();
            m[p] ^= delta(p);
            match (t, g.verify(&m, Some(lid), Some(eid))) {
                (DigestType::Dummy, r) if p < 16 => {
                    let err = r.expect_err("DUMMY checks the ids");
                    let at = if p < 8 { 0 } else { 8 };
                    assert!(matches!(err, Error::Corrupt { offset, .. } if offset == at), "{err:?}");
                }
                (DigestType::Dummy, r) => {
                    // nothing covers the rest: it reads back as changed
                    let e = r.expect("DUMMY verifies what no digest covers");
                    assert_eq!((e.last_add_confirmed, e.length, e.payload), (i64_at(&m, 16), i64_at(&m, 24), &m[32..]));
                }
                (_, Err(Error::DigestMismatch { offset, stored: s, computed, .. })) => {
                    assert_eq!(offset, BOOKIE_HEADER_SIZE as u64);
                    assert_eq!(s, &m[32..32 + dl]);
                    assert_ne!(s, computed);
                }
                (_, r) => panic!("{t:?}: byte {p} of a packed entry changed, yet verify gave {r:?}"),
            }
        }
    }
    verified_any
}

/// Entries packed with each digest type (MAC under the default and a given password), one not a
/// multiple of anything, one with an empty payload.
pub fn seeds_bookie_entry() -> Vec<Vec<u8>> {
    use crate::bookkeeper::digest::{DigestType, Digester};
    let mut out = Vec::new();
    for (i, t) in [DigestType::Crc32c, DigestType::Crc32, DigestType::Mac].into_iter().enumerate() {
        for (flags, pw) in [(0x30u8, &b""[..]), (0x81, b"pw")] {
            let g = Digester::new(t, if flags & 1 != 0 { pw } else { FUZZ_MAC_PASSWORD });
            let payload = sample_entries().swap_remove(i * 3);
            let mut v = vec![flags, pw.len() as u8];
            v.extend_from_slice(pw);
            v.extend(g.pack(7, i as i64, i as i64 - 1, 100 + payload.len() as i64, &payload));
            out.push(v);
        }
        let mut v = vec![0xf0, 0];
        v.extend(Digester::new(t, FUZZ_MAC_PASSWORD).pack(1, 0, -1, 0, b""));
        out.push(v);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Entry logs into Arrow
// ---------------------------------------------------------------------------------------------

/// An entry log's image: the default header (version 1), then each stored entry (starting with its
/// ledger id) as a record, and, when `sealed`, the ledgers map with the header pointing at it.
pub fn entry_log_image(records: &[Vec<u8>], sealed: bool) -> Vec<u8> {
    use crate::bookkeeper::entrylog::format::{encode_ledgers_map, LogHeader};
    let mut img = LogHeader::new_default_bytes(1);
    let mut sizes = std::collections::BTreeMap::new();
    for rec in records {
        let lid = i64::from_be_bytes(rec[..8].try_into().unwrap());
        img.extend_from_slice(&(rec.len() as u32).to_be_bytes());
        img.extend_from_slice(rec);
        *sizes.entry(lid).or_insert(0u64) += 4 + rec.len() as u64;
    }
    if sealed {
        let at = img.len() as i64;
        img.extend(encode_ledgers_map(&sizes));
        img[8..16].copy_from_slice(&at.to_be_bytes());
        img[16..20].copy_from_slice(&(sizes.len() as i32).to_be_bytes());
    }
    img
}

/// One row of the Arrow entry-log scan, owned (a record's `error` is only compared for presence: `"!"`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct LogRow {
    log_id: i64,
    offset: i64,
    location: Option<i64>,
    ledger_id: Option<i64>,
    entry_id: Option<i64>,
    lac: Option<i64>,
    ledger_length: Option<i64>,
    size: i64,
    digest_type: Option<String>,
    digest_ok: Option<bool>,
    payload: Option<Vec<u8>>,
    issue: Option<String>,
    error: Option<String>,
}

/// The rows of one batch of the Arrow scan, and the bytes of its payloads.
fn arrow_log_rows(
    b: &RecordBatch,
    payload_type: crate::bookkeeper::entrylog::arrow::PayloadType,
) -> (Vec<LogRow>, usize) {
    use crate::bookkeeper::entrylog::arrow::{schema_for, PayloadType};
    assert_eq!(b.schema(), schema_for(payload_type));
    let int = |name: &str, i: usize| {
        let a = b.column_by_name(name).unwrap().as_primitive::<Int64Type>();
        a.is_valid(i).then(|| a.value(i))
    };
    let text = |name: &str, i: usize| {
        let a = b.column_by_name(name).unwrap().as_string::<i32>();
        a.is_valid(i).then(|| a.value(i).to_string())
    };
    let ok = b.column_by_name("digest_ok").unwrap().as_boolean();
    let payload = b.column_by_name("payload").unwrap();
    let mut bytes = 0;
    let rows = (0..b.num_rows())
        .map(|i| {
            let p = payload.is_valid(i).then(|| match payload_type {
                PayloadType::Binary => payload.as_binary::<i32>().value(i).to_vec(),
                PayloadType::BinaryView => payload.as_binary_view().value(i).to_vec(),
            });
            bytes += p.as_ref().map_or(0, Vec::len);
            let issue = text("issue", i);
            let mut error = text("error", i);
            if issue.is_none() {
                if let Some(e) = &error {
                    assert!(!e.is_empty(), "a record's error says nothing");
                    error = Some("!".into());
                }
            }
            LogRow {
                log_id: int("log_id", i).expect("log_id is required"),
                offset: int("offset", i).expect("offset is required"),
                location: int("location", i),
                ledger_id: int("ledger_id", i),
                entry_id: int("entry_id", i),
                lac: int("last_add_confirmed", i),
                ledger_length: int("ledger_length", i),
                size: int("size", i).expect("size is required"),
                digest_type: text("digest_type", i),
                digest_ok: ok.is_valid(i).then(|| ok.value(i)),
                payload: p,
                issue,
                error,
            }
        })
        .collect();
    (rows, bytes)
}

/// A scratch file of this process and thread in the temporary directory, for the targets that need a
/// real file (each run writes it, and removes it when done).
fn fuzz_scratch_file(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join("pulsarkit-fuzz");
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let thread = format!("{:?}", std::thread::current().id()).replace(|c: char| !c.is_ascii_alphanumeric(), "");
    dir.join(format!("{name}-{}-{thread}", std::process::id()))
}

/// An entry log's bytes, written to a file and scanned into Arrow batches (`MultiLogScan`, what
/// `scan_entry_logs` runs) as two logs (ids 3 and 9), both copied (`binary`, through the scanner's read
/// window) and mapped (`binary_view`), with options the input picks (from a CRC of its bytes): digest
/// CRC32C/CRC32/MAC/DUMMY or AUTO with and without a password, rows and bytes per batch, issue rows,
/// resync, the largest record. The rows must be the plain in-memory record scan's (`scan_all`, as
/// `fuzz_entry_log` checks it): the same records in order with their ids, offsets, locations, header
/// fields and payload bytes, the digest checked the plain way (AUTO: per ledger, the first type that
/// verifies), then each log's issues; the summaries are the plain scan's; every batch holds at most
/// `batch_rows` rows, and only the last stops short of both of its bounds.
pub fn fuzz_entry_log_arrow(data: &[u8]) -> bool {
    use crate::bookkeeper::digest::{DigestType, Digester, BOOKIE_HEADER_SIZE};
    use crate::bookkeeper::entrylog::arrow::{ArrowScanOptions, DigestMode, MultiLogScan, PayloadType};
    use crate::bookkeeper::entrylog::scan::{scan_all, ScanOptions, DEFAULT_MAX_RECORD_SIZE};
    let h = crc32c(data);
    let pw = FUZZ_MAC_PASSWORD;
    let (digest, fixed, auto_mac) = match h % 6 {
        k @ 0..=3 => {
            let t = [DigestType::Crc32c, DigestType::Crc32, DigestType::Mac, DigestType::Dummy][k as usize];
            (DigestMode::Fixed(Digester::new(t, pw)), Some(t), false)
        }
        4 => (DigestMode::Auto { mac: None }, None, false),
        _ => (DigestMode::Auto { mac: Some(Digester::new(DigestType::Mac, pw)) }, None, true),
    };
    let batch_rows = [1, 2, 3, 5, 64, 8192][(h >> 3) as usize % 6];
    let batch_bytes = [0, 1, 100, 4096][(h >> 6) as usize % 4];
    let include_issues = (h >> 8) % 4 != 0;
    let scan = ScanOptions {
        resync: (h >> 10) % 2 == 0,
        max_record_size: [DEFAULT_MAX_RECORD_SIZE, 4096, 1 << 16][(h >> 11) as usize % 3],
        // the smallest read window (64 KiB), so a larger log is read in several
        chunk_size: 0,
        ..ScanOptions::default()
    };

    // The plain way: the in-memory scan, then each record's digest.
    let plain = scan_all(data, 0, scan.clone());
    let path = fuzz_scratch_file("entry-log");
    std::fs::write(&path, data).expect("the scratch file is written");
    let logs = vec![(path.clone(), 3u64), (path.clone(), 9u64)];
    let mut want = Vec::new();
    let mut known = std::collections::HashMap::new();
    if let Ok((recs, summary)) = &plain {
        for &(_, log_id) in &logs {
            for (offset, lid, eid, d) in recs {
                let mut row = LogRow {
                    log_id: log_id as i64,
                    offset: *offset as i64,
                    location: Some(((log_id << 32) | (offset + 4)) as i64),
                    ledger_id: Some(*lid),
                    entry_id: Some(*eid),
                    lac: None,
                    ledger_length: None,
                    size: d.len() as i64,
                    digest_type: None,
                    digest_ok: None,
                    payload: None,
                    issue: None,
                    error: Some("!".into()),
                };
                if d.len() >= BOOKIE_HEADER_SIZE {
                    row.lac = Some(i64::from_be_bytes(d[16..24].try_into().unwrap()));
                    row.ledger_length = Some(i64::from_be_bytes(d[24..32].try_into().unwrap()));
                    let t = fixed.or_else(|| match known.get(lid) {
                        Some(&t) => Some(t),
                        None => {
                            let t = reference_detect(d, auto_mac.then_some(pw));
                            if let Some(t) = t {
                                known.insert(*lid, t);
                            }
                            t
                        }
                    });
                    row.digest_ok = Some(false);
                    if let Some(t) = t {
                        row.digest_type = Some(t.name().to_string());
                        let start = BOOKIE_HEADER_SIZE + t.digest_len();
                        if d.len() >= start {
                            row.digest_ok = (t != DigestType::Dummy).then(|| reference_verifies(t, pw, d));
                            row.payload = Some(d[start..].to_vec());
                            row.error = None;
                        }
                    }
                }
                want.push(row);
            }
            if include_issues {
                for i in &summary.issues {
                    want.push(LogRow {
                        log_id: log_id as i64,
                        offset: i.offset as i64,
                        location: None,
                        ledger_id: None,
                        entry_id: None,
                        lac: None,
                        ledger_length: None,
                        size: i.length as i64,
                        digest_type: None,
                        digest_ok: None,
                        payload: None,
                        issue: Some(i.kind.name().to_string()),
                        error: Some(i.message.clone()),
                    });
                }
            }
        }
    }

    for payload_type in [PayloadType::Binary, PayloadType::BinaryView] {
        let opts = ArrowScanOptions {
            digest: digest.clone(),
            batch_rows,
            batch_bytes,
            include_issues,
            payload_type,
            scan: scan.clone(),
        };
        let mut s = MultiLogScan::new(logs.clone(), opts);
        let bytes_bound = s.batch_bytes();
        let mut got = Vec::new();
        let mut last_full = true;
        let failed = loop {
            match s.next_batch() {
                Ok(Some(b)) => {
                    assert!(last_full, "{payload_type:?}: a batch stopped short of its bounds before the last");
                    assert!(b.num_rows() > 0, "an empty batch");
                    assert!(b.num_rows() <= batch_rows, "{} rows in a batch of at most {batch_rows}", b.num_rows());
                    let (rows, bytes) = arrow_log_rows(&b, payload_type);
                    last_full = rows.len() >= batch_rows || bytes >= bytes_bound;
                    got.extend(rows);
                }
                Ok(None) => break None,
                Err(e) => break Some(e),
            }
        };
        match (&plain, failed) {
            (Ok((_, summary)), None) => {
                assert_eq!(got.len(), want.len(), "{payload_type:?}: rows of the Arrow scan against the plain scan");
                for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(g, w, "{payload_type:?}: row {k} of the Arrow scan against the plain scan");
                }
                let sums = s.summaries();
                assert_eq!(sums.len(), logs.len());
                for ((p, sm), (lp, id)) in sums.iter().zip(&logs) {
                    assert_eq!(p, lp);
                    let mut w = summary.clone();
                    w.log_id = *id;
                    assert_eq!(sm, &w, "{payload_type:?}: summary of log {id} against the plain scan's");
                }
            }
            (Err(pe), Some(e)) => assert_eq!(pe.to_string(), e.to_string()),
            (p, f) => panic!("{payload_type:?}: the plain scan gave {p:?}, the Arrow scan {f:?}"),
        }
    }
    let _ = std::fs::remove_file(&path);
    plain.is_ok_and(|(recs, _)| !recs.is_empty())
}

/// The entry-log target's logs, and logs of real bookie entries: each digest type, a damaged digest, a
/// record too short for a header, one larger than the scan's 64 KiB read window, one cut short.
pub fn seeds_entry_log_arrow() -> Vec<Vec<u8>> {
    use crate::bookkeeper::digest::{DigestType, Digester};
    let mut out = seeds_entry_log();
    let entries = sample_entries();
    let mut recs = Vec::new();
    for (i, e) in entries.iter().take(12).enumerate() {
        let t = [DigestType::Crc32c, DigestType::Crc32, DigestType::Mac, DigestType::Dummy][i / 3];
        let lid = 3 + (i / 3) as i64;
        recs.push(Digester::new(t, FUZZ_MAC_PASSWORD).pack(lid, (i % 3) as i64, (i % 3) as i64 - 1, 100, e));
    }
    let mut bad = recs[1].clone();
    let n = bad.len();
    bad[n - 1] ^= 0x20;
    recs.push(bad);
    let mut short = 8i64.to_be_bytes().to_vec();
    short.extend_from_slice(&0i64.to_be_bytes());
    short.extend_from_slice(b"0123456789");
    recs.push(short);
    out.push(entry_log_image(&recs, true));
    out.push(entry_log_image(&recs[..7], false));
    let crc = Digester::new(DigestType::Crc32c, b"");
    let big: Vec<Vec<u8>> = (0..30).map(|e| crc.pack(2, e, e - 1, 3000 * (e + 1), &vec![e as u8; 3000])).collect();
    let img = entry_log_image(&big, true);
    out.push(img[..img.len() - 9].to_vec());
    out.push(img);
    out
}

// ---------------------------------------------------------------------------------------------
// Compaction over Arrow
// ---------------------------------------------------------------------------------------------

/// Topic compaction's Arrow kernels over a column of entries (`bulk_rows`; flags: bits 0-1 the layout,
/// 4 `retain_null_key`, 8 event-time order, 16 the retained-only batch format, 32 partition 2 instead
/// of -1, 64 a null entry id on the last entry: no valid position for phase two), at positions
/// `(5 + i / 3, i)`, in reading order as a topic's are:
/// * `compaction_keys` gives, row by row, phase one's records of each entry (`compaction_records`), an
///   error row where it fails or the entry is null, nothing for a marker;
/// * `add_entries` fails at the first such entry (named), after adding every message before it, and
///   leaves what the Spark job aggregates from those rows (`spark/compaction.py`: the greatest
///   (event time,) position per key; a payload of 0 a tombstone): the same retained batch
///   (`retained_batch`), messages, keyless messages and tombstones;
/// * phase two by the latest map (`compact_entries`) and by each entry's retained batch indexes joined
///   back (`compact_entries_by_indexes`, Spark's) write the same raw messages, and fail at the same
///   entry; each raw message frames the entry's position and, read back, holds exactly the messages
///   retained (or keyless, with `retain_null_key`), the entry itself when it is taken whole.
pub fn fuzz_compaction_arrow(data: &[u8]) -> bool {
    use crate::bulk::compaction::{
        add_entries, compact_entries, compact_entries_by_indexes, compaction_keys, retained_batch, PositionedEntries,
    };
    use crate::codec::compaction::{compaction_records, decode_raw_message, BatchFormat, LatestForKey};
    use crate::codec::entry::locate_broker_entry_metadata;
    use arrow_array::{Int64Array, ListArray};
    use std::collections::BTreeMap;
    let (flags, rows) = bulk_rows(data);
    let (retain_null_key, event_time_order) = (flags & 4 != 0, flags & 8 != 0);
    let format = if flags & 16 != 0 { BatchFormat::RetainedOnly } else { BatchFormat::Placeholders };
    let partition = if flags & 32 != 0 { 2 } else { -1 };
    let n = rows.len();
    let arr = bulk_array(flags, &rows);
    let col = EntryColumn::from_array(arr.as_ref()).expect("binary column");
    let ledger = |i: usize| 5 + i as i64 / 3;
    let entry = |i: usize| i as i64;
    let ledgers = Int64Array::from_iter_values((0..n).map(ledger));
    let no_id = (flags & 64 != 0 && n > 0).then(|| arrow_buffer::NullBuffer::from_iter((0..n).map(|i| i + 1 < n)));
    let entries = Int64Array::new((0..n).map(entry).collect(), no_id);
    let input = PositionedEntries::new(arr.as_ref(), &ledgers, &entries).expect("ids as long as the entries");

    // Phase one, row by row against the plain records.
    let plain: Vec<Option<Result<Option<Vec<_>>, Error>>> =
        rows.iter().map(|r| r.map(|d| compaction_records(d, FUZZ_LIMIT))).collect();
    let keys = compaction_keys(&col, FUZZ_LIMIT);
    let k_entry = keys.column(0).as_primitive::<Int64Type>();
    let k_index = keys.column(1).as_primitive::<Int32Type>();
    let k_key = keys.column(2).as_string::<i32>();
    let k_size = keys.column(3).as_primitive::<Int64Type>();
    let k_event = keys.column(4).as_primitive::<Int64Type>();
    let k_err = keys.column(5).as_string::<i32>();
    let mut row = 0;
    for (i, p) in plain.iter().enumerate() {
        match p {
            Some(Ok(Some(recs))) => {
                for r in recs {
                    assert_eq!(k_entry.value(row), i as i64);
                    assert!(k_err.is_null(row));
                    assert_eq!(k_index.value(row), r.batch_index);
                    assert_eq!(k_key.is_valid(row).then(|| k_key.value(row)), r.key.as_deref());
                    assert_eq!(k_size.value(row), r.payload_size);
                    assert_eq!(k_event.value(row), r.event_time as i64);
                    row += 1;
                }
            }
            Some(Ok(None)) => {}
            other => {
                assert_eq!(k_entry.value(row), i as i64);
                assert!(k_index.is_null(row) && k_key.is_null(row) && k_size.is_null(row));
                let want = match other {
                    Some(Err(e)) => e.to_string(),
                    _ => "null entry".to_string(),
                };
                assert_eq!(k_err.value(row), want);
                row += 1;
            }
        }
    }
    assert_eq!(row, keys.num_rows(), "compaction_keys has rows no entry accounts for");

    // Spark's phase one over the rows before the first error: per key the greatest
    // ((event time,) ledger, entry, batch index, size).
    let first_bad = plain.iter().position(|p| !matches!(p, Some(Ok(_))));
    let good = first_bad.unwrap_or(n);
    let mut agg: BTreeMap<&str, (i64, i64, i64, i32, i64)> = BTreeMap::new();
    let (mut messages, mut keyless) = (0u64, 0u64);
    for (i, p) in plain[..good].iter().enumerate() {
        for r in p.as_ref().unwrap().as_ref().unwrap().iter().flatten() {
            messages += 1;
            let Some(k) = r.key.as_deref() else {
                keyless += 1;
                continue;
            };
            let et = if event_time_order { r.event_time as i64 } else { 0 };
            let v = (et, ledger(i), entry(i), r.batch_index, r.payload_size);
            let slot = agg.entry(k).or_insert(v);
            *slot = (*slot).max(v);
        }
    }
    let mut latest = LatestForKey::new(event_time_order);
    match (add_entries(&mut latest, &input, FUZZ_LIMIT), first_bad) {
        (Ok(()), None) => {}
        (Err(e), Some(i)) => {
            let (l, x) = (ledger(i), entry(i));
            let want = match &plain[i] {
                Some(Err(Error::Corrupt { offset, what })) => {
                    Error::Corrupt { offset: *offset, what: format!("entry {l}:{x}: {what}") }
                }
                Some(Err(other)) => other.clone(),
                _ => Error::invalid(format!("entry {l}:{x} is null")),
            };
            assert_eq!(e, want, "add_entries failed otherwise than at entry {i}");
        }
        (r, bad) => panic!("add_entries gave {r:?}, the first bad entry is {bad:?}"),
    }
    let mut retained: Vec<(&str, (i64, i64, i32))> =
        agg.iter().filter(|(_, v)| v.4 > 0).map(|(k, v)| (*k, (v.1, v.2, v.3))).collect();
    retained.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)));
    let rb = retained_batch(&latest);
    let got: Vec<(&str, (i64, i64, i32))> = (0..rb.num_rows())
        .map(|j| {
            let int = |c: usize| rb.column(c).as_primitive::<Int64Type>().value(j);
            (
                rb.column(0).as_string::<i32>().value(j),
                (int(1), int(2), rb.column(3).as_primitive::<Int32Type>().value(j)),
            )
        })
        .collect();
    assert_eq!(got, retained, "the latest map's retained keys against Spark's aggregation");
    assert_eq!((latest.messages, latest.keyless), (messages, keyless));
    assert_eq!(latest.tombstones(), agg.values().filter(|v| v.4 <= 0).count());

    // Phase two, by the map and by the indexes joined back (null where an entry retains nothing).
    let kept_of = |i: usize| -> Vec<i32> {
        retained.iter().filter(|(_, p)| (p.0, p.1) == (ledger(i), entry(i))).map(|(_, p)| p.2).collect()
    };
    let kept = ListArray::from_iter_primitive::<Int32Type, _, _>((0..n).map(|i| {
        let k = kept_of(i);
        (!k.is_empty()).then(|| k.into_iter().map(Some).collect::<Vec<_>>())
    }));
    let by_idx = compact_entries_by_indexes(&input, &kept, partition, retain_null_key, format, FUZZ_LIMIT)
        .expect("the columns have the right types and lengths");
    assert_eq!(by_idx.num_rows(), n);
    let raw = by_idx.column(0).as_binary::<i32>();
    let err = by_idx.column(1).as_string::<i32>();
    let stop = (0..n).find(|&i| err.is_valid(i));
    let upto = stop.unwrap_or(n);
    let prefix = |k: usize| (arr.slice(0, k), ledgers.slice(0, k), entries.slice(0, k));
    let (pe, pl, pn) = prefix(upto);
    let head = PositionedEntries::new(pe.as_ref(), &pl, &pn).unwrap();
    let by_latest = compact_entries(&latest, &head, partition, retain_null_key, format, FUZZ_LIMIT)
        .unwrap_or_else(|e| panic!("phase two by the map failed before the entry the indexes fail at ({stop:?}): {e}"));
    let want: Vec<(i64, i64, &[u8])> =
        (0..upto).filter(|&i| raw.is_valid(i)).map(|i| (ledger(i), entry(i), raw.value(i))).collect();
    let got: Vec<(i64, i64, &[u8])> = (0..by_latest.num_rows())
        .map(|j| {
            let int = |c: usize| by_latest.column(c).as_primitive::<Int64Type>().value(j);
            (int(0), int(1), by_latest.column(2).as_binary::<i32>().value(j))
        })
        .collect();
    assert_eq!(got, want, "phase two by the map and by the retained indexes differ");
    if let Some(s) = stop {
        let (l, x) = (ledger(s), entry(s));
        assert!(err.value(s).starts_with(&format!("entry {l}:{x}: ")), "{}", err.value(s));
        let (pe, pl, pn) = prefix(s + 1);
        let upto_bad = PositionedEntries::new(pe.as_ref(), &pl, &pn).unwrap();
        assert!(
            compact_entries(&latest, &upto_bad, partition, retain_null_key, format, FUZZ_LIMIT).is_err(),
            "phase two by the map takes entry {s}, which fails by the indexes: {}",
            err.value(s)
        );
    }
    // Each entry's raw message against its plain records.
    for i in 0..n {
        let recs = match &plain[i] {
            Some(Ok(recs)) => recs,
            p => {
                assert!(err.is_valid(i), "entry {i} fails phase one ({p:?}) yet phase two writes it");
                continue;
            }
        };
        if err.is_valid(i) {
            continue;
        }
        let recs = recs.as_deref().unwrap_or(&[]);
        let keep = kept_of(i);
        let want: Vec<i32> = recs
            .iter()
            .filter(|r| if r.key.is_none() { retain_null_key } else { keep.contains(&r.batch_index) })
            .map(|r| r.batch_index)
            .collect();
        if want.is_empty() {
            assert!(raw.is_null(i), "entry {i} retains nothing, yet phase two writes it");
            continue;
        }
        assert!(raw.is_valid(i), "entry {i} retains {want:?}, yet phase two writes nothing");
        let d = rows[i].unwrap();
        let (id, out) = decode_raw_message(raw.value(i)).expect("a raw message decodes");
        assert_eq!((id.ledger_id as i64, id.entry_id as i64, id.partition), (ledger(i), entry(i), Some(partition)));
        if want == [-1] {
            assert_eq!(out, d, "an entry taken whole is copied as it is");
            continue;
        }
        let again = compaction_records(out, 4 * FUZZ_LIMIT).expect("a rebatched entry decodes").expect("no marker");
        assert_eq!(again.iter().map(|r| r.batch_index).collect::<Vec<_>>(), want, "entry {i}: retained indexes");
        for r in &again {
            let o = recs.iter().find(|o| o.batch_index == r.batch_index).unwrap();
            assert_eq!((&r.key, r.payload_size, r.event_time), (&o.key, o.payload_size, o.event_time));
        }
        let (_, hs) = locate_broker_entry_metadata(d).unwrap();
        let (_, ho) = locate_broker_entry_metadata(out).unwrap();
        assert_eq!(&out[..ho], &d[..hs], "entry {i}: the broker entry metadata is kept");
    }
    first_bad.is_none() && !retained.is_empty()
}

/// Batches of keyed messages: a key rewritten, a tombstone, keyless messages, event times out of order
/// (one past `i64::MAX`).
fn compaction_sample_entries() -> Vec<Vec<u8>> {
    let msg = |key: Option<&str>, event: Option<u64>, payload: &'static [u8]| {
        (SingleMessageMetadata { partition_key: key.map(Into::into), event_time: event, ..Default::default() }, payload)
    };
    let md = sample_metadata(1);
    let batches = [
        vec![msg(Some("a"), Some(5), b"a1"), msg(Some("b"), Some(9), b"b1"), msg(None, None, b"n1")],
        vec![msg(Some("a"), Some(3), b"a2"), msg(Some("b"), Some(10), b""), msg(Some("c"), None, b"c1")],
        vec![msg(Some("c"), Some(1), b"c2"), msg(None, Some(2), b"n2"), msg(Some("a"), Some(7), b"")],
        // an event time past i64::MAX: a negative Java long, older than any other
        vec![msg(Some("d"), Some(1 << 63), b"d1"), msg(Some("d"), Some(4), b"d2")],
    ];
    let mut out: Vec<Vec<u8>> = batches
        .iter()
        .zip(Codec::ALL)
        .map(|(b, c)| crate::codec::batch::encode_batch(&md, b, c, true).unwrap())
        .collect();
    let single = MessageMetadata { partition_key: Some("b".into()), ..sample_metadata(2) };
    out.push(crate::codec::batch::encode_single(&single, b"b2", Codec::None, true).unwrap());
    out
}

pub fn seeds_compaction_arrow() -> Vec<Vec<u8>> {
    let keyed = compaction_sample_entries();
    let sample = sample_entries();
    let mut rows: Vec<&[u8]> = keyed.iter().map(|e| &e[..]).collect();
    let mut out = Vec::new();
    for flags in [0u8, 4 | 8, 16 | 1 | 64, 2 | 32 | 4 | 16] {
        out.push(bulk_input(flags, 0, &rows));
    }
    rows.extend(sample.iter().map(|e| &e[..]));
    out.push(bulk_input(8, 0, &rows));
    out.push(bulk_input(16 | 4 | 2, 0, &rows));
    out
}

// ---------------------------------------------------------------------------------------------
// JSON lines
// ---------------------------------------------------------------------------------------------

/// A JSON value as a strict RFC 8259 reader reads it; a number keeps its text (compared exactly).
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

/// A strict JSON reader (no trailing commas, no leading zeros, no raw control characters, no lone
/// surrogates): the check of `bulk::json`, which writes JSON without a JSON library.
struct JsonReader<'a> {
    b: &'a [u8],
    at: usize,
}

impl JsonReader<'_> {
    fn parse(line: &[u8]) -> Result<Json, String> {
        let mut r = JsonReader { b: line, at: 0 };
        let v = r.value()?;
        r.ws();
        if r.at != line.len() {
            return Err(format!("bytes after the value at {}", r.at));
        }
        Ok(v)
    }

    fn ws(&mut self) {
        while self.b.get(self.at).is_some_and(|c| b" \t\n\r".contains(c)) {
            self.at += 1;
        }
    }

    fn eat(&mut self, lit: &[u8]) -> bool {
        let ok = self.b[self.at..].starts_with(lit);
        if ok {
            self.at += lit.len();
        }
        ok
    }

    fn value(&mut self) -> Result<Json, String> {
        self.ws();
        let at = self.at;
        match self.b.get(at) {
            Some(b'{') => {
                self.at += 1;
                let mut fields = Vec::new();
                self.ws();
                if self.eat(b"}") {
                    return Ok(Json::Obj(fields));
                }
                loop {
                    self.ws();
                    let Json::Str(k) = self.value()? else { return Err(format!("a key that is no string at {at}")) };
                    self.ws();
                    if !self.eat(b":") {
                        return Err(format!("no ':' at {}", self.at));
                    }
                    fields.push((k, self.value()?));
                    self.ws();
                    if self.eat(b"}") {
                        return Ok(Json::Obj(fields));
                    }
                    if !self.eat(b",") {
                        return Err(format!("no ',' or '}}' at {}", self.at));
                    }
                }
            }
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                self.ws();
                if self.eat(b"]") {
                    return Ok(Json::Arr(items));
                }
                loop {
                    items.push(self.value()?);
                    self.ws();
                    if self.eat(b"]") {
                        return Ok(Json::Arr(items));
                    }
                    if !self.eat(b",") {
                        return Err(format!("no ',' or ']' at {}", self.at));
                    }
                }
            }
            Some(b'"') => self.string().map(Json::Str),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ if self.eat(b"null") => Ok(Json::Null),
            _ if self.eat(b"true") => Ok(Json::Bool(true)),
            _ if self.eat(b"false") => Ok(Json::Bool(false)),
            _ => Err(format!("no value at {at}")),
        }
    }

    fn number(&mut self) -> Result<Json, String> {
        let start = self.at;
        let digits = |r: &mut Self| {
            let s = r.at;
            while r.b.get(r.at).is_some_and(u8::is_ascii_digit) {
                r.at += 1;
            }
            r.at - s
        };
        self.eat(b"-");
        let int_at = self.at;
        match digits(self) {
            0 => return Err(format!("a number without digits at {start}")),
            n if n > 1 && self.b[int_at] == b'0' => return Err(format!("a leading zero at {start}")),
            _ => {}
        }
        if self.eat(b".") && digits(self) == 0 {
            return Err(format!("no digits after the point at {start}"));
        }
        if self.eat(b"e") || self.eat(b"E") {
            let _ = self.eat(b"+") || self.eat(b"-");
            if digits(self) == 0 {
                return Err(format!("no exponent digits at {start}"));
            }
        }
        Ok(Json::Num(String::from_utf8(self.b[start..self.at].to_vec()).unwrap()))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let h = self.b.get(self.at..self.at + 4).ok_or("a cut \\u escape")?;
        let s = std::str::from_utf8(h).map_err(|_| "a \\u escape that is no hex")?;
        if !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!("\\u{s} is no hex"));
        }
        self.at += 4;
        Ok(u32::from_str_radix(s, 16).unwrap())
    }

    fn string(&mut self) -> Result<String, String> {
        let start = self.at;
        self.at += 1;
        let mut out = String::new();
        loop {
            let Some(&c) = self.b.get(self.at) else { return Err(format!("a string from {start} never ends")) };
            self.at += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.b.get(self.at) else { return Err("a cut escape".into()) };
                    self.at += 1;
                    out.push(match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let u = self.hex4()?;
                            let cp = match u {
                                0xd800..=0xdbff => {
                                    if !self.eat(b"\\u") {
                                        return Err(format!("a lone high surrogate {u:04x}"));
                                    }
                                    let lo = self.hex4()?;
                                    if !(0xdc00..=0xdfff).contains(&lo) {
                                        return Err(format!("{u:04x} followed by {lo:04x}, no low surrogate"));
                                    }
                                    0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00)
                                }
                                0xdc00..=0xdfff => return Err(format!("a lone low surrogate {u:04x}")),
                                u => u,
                            };
                            char::from_u32(cp).ok_or("no character")?
                        }
                        e => return Err(format!("an unknown escape \\{}", e as char)),
                    });
                }
                0..=0x1f => return Err(format!("a raw control character {c:#04x} in a string")),
                _ => {
                    // a UTF-8 sequence: copied whole (the line is checked to be UTF-8)
                    let len = match c {
                        0xc0..=0xdf => 2,
                        0xe0..=0xef => 3,
                        0xf0..=0xf7 => 4,
                        _ => 1,
                    };
                    let end = (self.at - 1 + len).min(self.b.len());
                    out.push_str(std::str::from_utf8(&self.b[self.at - 1..end]).map_err(|e| e.to_string())?);
                    self.at = end;
                }
            }
        }
    }
}

/// A value as Python's `json.dumps` prints it (`", "` and `": "`, `ensure_ascii`): what a line must be.
fn python_json(v: &Json, out: &mut String) {
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Num(n) => out.push_str(n),
        Json::Str(s) => {
            out.push('"');
            for ch in s.chars() {
                match ch {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    '\u{8}' => out.push_str("\\b"),
                    '\u{c}' => out.push_str("\\f"),
                    ' '..='~' => out.push(ch),
                    _ => {
                        let mut units = [0u16; 2];
                        for u in ch.encode_utf16(&mut units) {
                            out.push_str(&format!("\\u{u:04x}"));
                        }
                    }
                }
            }
            out.push('"');
        }
        Json::Arr(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python_json(x, out);
            }
            out.push(']');
        }
        Json::Obj(fields) => {
            out.push('{');
            for (i, (k, x)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python_json(&Json::Str(k.clone()), out);
                out.push_str(": ");
                python_json(x, out);
            }
            out.push('}');
        }
    }
}

/// Padded standard base64, decoded the plain way (None for anything else).
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = s.as_bytes();
    if b.len() % 4 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    for (q, quad) in b.chunks(4).enumerate() {
        let last = q + 1 == b.len() / 4;
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut v = 0u32;
        for &c in &quad[..4 - pad] {
            v = (v << 6) | ALPHABET.iter().position(|&a| a == c)? as u32;
        }
        v <<= 6 * pad as u32;
        let bytes = [(v >> 16) as u8, (v >> 8) as u8, v as u8];
        // the bits a padded quad leaves over must be zero (canonical base64)
        if bytes[3 - pad..].iter().any(|&x| x != 0) {
            return None;
        }
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

/// The rows of the message read (`assemble_messages`, as `check_assemble` sets it up, here with one
/// committed and one aborted transaction known, and the topic from flags bits 2-3: plain, with
/// characters JSON escapes, or null) rendered by `bulk_json_lines`: every line is strict JSON, exactly
/// as Python's `json.dumps(json_record(row))` prints it, with the fields of `json_record` in order (the
/// marker column, when there, filled with the keys' strings) and
/// the batch's values: integers exact (transaction bits unsigned), the base64 payload decoding to the
/// payload's bytes (null for a null value), properties as `dict(pairs)` makes them (first place, last
/// value), broker entry metadata and the transaction as objects or null; a slice of the batch renders
/// as the same slice of lines.
pub fn fuzz_json_lines(data: &[u8]) -> bool {
    use crate::bulk::assemble::{assemble_messages, BatchContext, TimeFilter, TxnStates};
    use crate::bulk::compaction::PositionedEntries;
    use crate::bulk::json::json_lines;
    use arrow_array::{Int64Array, StringArray};
    let (flags, rows) = bulk_rows(data);
    let arr = bulk_array(flags, &rows);
    let n = rows.len() as i64;
    let (ledgers, entries) =
        (Int64Array::from_iter_values((0..n).map(|i| 5 + i / 3)), Int64Array::from_iter_values(0..n));
    let input = PositionedEntries::new(arr.as_ref(), &ledgers, &entries).expect("ids as long as the entries");
    let states = StringArray::from(vec![Some("COMMITTED"), Some("ABORTED")]);
    let (most, least) = ([1i64, -1], [9i64, 2]);
    let filters = if flags & 64 != 0 {
        vec![TimeFilter::new("publish_time", ">", vec![1_700_000_000_001]).unwrap()]
    } else {
        vec![]
    };
    let topic =
        [Some("persistent://public/default/fuzz"), Some("persistent://t/n/tøpic \"q\" \\ \u{1}\u{7f}\u{2028}😀"), None]
            [usize::from(flags >> 2) % 4 % 3];
    let cx = BatchContext {
        topic,
        partition: if flags & 128 != 0 { -1 } else { 7 },
        markers: flags & 32 != 0,
        txn: TxnStates::new(&most, &least, &states, "UNKNOWN").unwrap(),
        committed: flags & 16 != 0,
        time_filters: &filters,
        limit: FUZZ_LIMIT,
        threads: 1,
    };
    let (mut batch, _) = assemble_messages(&input, &cx).expect("a fuzz input is far below 2 GiB of payloads");
    if let Ok(at) = batch.schema().index_of("marker") {
        // the caller fills in markers: rendered from the keys' strings here
        let mut cols = batch.columns().to_vec();
        cols[at] = batch.column_by_name("key").unwrap().clone();
        batch = RecordBatch::try_new(batch.schema(), cols).expect("the marker column is a nullable string");
    }
    let out = json_lines(&batch).expect("a message batch renders");
    assert!(out.is_ascii(), "a JSON line with a byte beyond ASCII");
    let text = std::str::from_utf8(&out).unwrap();
    let lines: Vec<&str> = text.split_terminator('\n').collect();
    assert!(out.is_empty() || out.ends_with(b"\n"));
    assert_eq!(lines.len(), batch.num_rows(), "one line per row");

    let int = |name: &str, i: usize| -> Option<i64> {
        let a = batch.column_by_name(name).unwrap();
        a.is_valid(i).then(|| match a.data_type() {
            arrow_schema::DataType::Int32 => i64::from(a.as_primitive::<Int32Type>().value(i)),
            _ => a.as_primitive::<Int64Type>().value(i),
        })
    };
    let string = |name: &str, i: usize| {
        let a = batch.column_by_name(name).unwrap().as_string::<i32>();
        a.is_valid(i).then(|| a.value(i).to_string())
    };
    let boolean = |name: &str, i: usize| {
        let a = batch.column_by_name(name).unwrap().as_boolean();
        a.is_valid(i).then(|| a.value(i))
    };
    let num = |v: Option<i64>| v.map_or(Json::Null, |v| Json::Num(v.to_string()));
    let text_or_null = |v: Option<String>| v.map_or(Json::Null, Json::Str);
    let props = batch.column_by_name("properties").unwrap().as_map();
    let payload = batch.column_by_name("payload").unwrap().as_binary::<i32>();
    for (i, line) in lines.iter().enumerate() {
        let v = JsonReader::parse(line.as_bytes()).unwrap_or_else(|e| panic!("line {i} is no JSON ({e}): {line}"));
        let mut again = String::new();
        python_json(&v, &mut again);
        assert_eq!(&again, line, "line {i} is not as Python's json.dumps prints it");
        let Json::Obj(fields) = v else { panic!("line {i} is no object") };
        let (ts, index) = (int("broker_timestamp", i), int("broker_index", i));
        let mut want = vec![
            ("topic", text_or_null(string("topic", i))),
            (
                "message_id",
                Json::Obj(vec![
                    ("ledger_id".into(), num(int("ledger_id", i))),
                    ("entry_id".into(), num(int("entry_id", i))),
                    ("batch_index".into(), num(int("batch_index", i))),
                    ("partition".into(), num(int("partition", i))),
                ]),
            ),
            ("key", text_or_null(string("key", i))),
            ("properties", {
                // dict(pairs): a repeated key keeps its first place and takes its last value
                let mut d: Vec<(String, Json)> = Vec::new();
                if props.is_valid(i) {
                    let kv = props.value(i);
                    let (ks, vs) = (kv.column(0).as_string::<i32>(), kv.column(1).as_string::<i32>());
                    for j in 0..kv.len() {
                        let val = vs.is_valid(j).then(|| vs.value(j).to_string());
                        match d.iter_mut().find(|(k, _)| k == ks.value(j)) {
                            Some(slot) => slot.1 = text_or_null(val),
                            None => d.push((ks.value(j).to_string(), text_or_null(val))),
                        }
                    }
                }
                Json::Obj(d)
            }),
            ("payload_b64", Json::Null),
            ("publish_time", num(int("publish_time", i))),
            ("event_time", num(int("event_time", i))),
            ("sequence_id", num(int("sequence_id", i))),
            ("producer_name", text_or_null(string("producer_name", i))),
            ("null_value", boolean("null_value", i).map_or(Json::Null, Json::Bool)),
            ("encrypted", boolean("encrypted", i).map_or(Json::Null, Json::Bool)),
            (
                "broker_entry_metadata",
                if ts.is_none() && index.is_none() {
                    Json::Null
                } else {
                    Json::Obj(vec![("broker_timestamp".into(), num(ts)), ("index".into(), num(index))])
                },
            ),
            (
                "txn",
                match string("txn_state", i) {
                    None => Json::Null,
                    Some(state) => {
                        let bits = |name: &str| Json::Num((int(name, i).unwrap_or(0) as u64).to_string());
                        Json::Obj(vec![
                            ("most_bits".into(), bits("txn_most_bits")),
                            ("least_bits".into(), bits("txn_least_bits")),
                            ("state".into(), Json::Str(state)),
                        ])
                    }
                },
            ),
        ];
        if batch.column_by_name("marker").is_some() {
            want.push(("marker", text_or_null(string("marker", i))));
        }
        let names: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, want.iter().map(|(k, _)| *k).collect::<Vec<_>>(), "line {i}: the fields of json_record");
        for ((k, got), (_, w)) in fields.iter().zip(&want) {
            if k == "payload_b64" {
                let p = payload.is_valid(i).then(|| payload.value(i));
                match (got, p) {
                    (Json::Null, None) => {}
                    (Json::Str(s), Some(p)) => {
                        assert_eq!(base64_decode(s).as_deref(), Some(p), "line {i}: the payload's base64")
                    }
                    (g, p) => panic!("line {i}: payload_b64 {g:?} for the payload {p:?}"),
                }
            } else {
                assert_eq!(got, w, "line {i}: field {k}");
            }
        }
    }
    // a slice of the batch (offsets into its columns' buffers) renders as the same lines
    let len = batch.num_rows();
    if len > 0 {
        let (a, k) = (usize::from(flags) % len, len / 2);
        let k = k.min(len - a);
        let sliced = json_lines(&batch.slice(a, k)).expect("a slice renders");
        let want: String = lines[a..a + k].iter().map(|l| format!("{l}\n")).collect();
        assert_eq!(std::str::from_utf8(&sliced).unwrap(), want, "a slice of the batch renders otherwise");
    }
    len > 0
}

/// Valid entries (the bulk seeds' rows) with properties and keys JSON must escape, one repeated
/// property key, and a committed and an aborted transaction.
pub fn seeds_json_lines() -> Vec<Vec<u8>> {
    let mut entries = sample_entries();
    let odd = SingleMessageMetadata {
        properties: vec![
            KeyValue { key: "k\"\\\n\u{0}".into(), value: "é€😀\u{7f}\u{1f}".into() },
            KeyValue { key: "dup".into(), value: "first".into() },
            KeyValue { key: "x".into(), value: "".into() },
            KeyValue { key: "dup".into(), value: "last".into() },
        ],
        partition_key: Some("clé \t\u{8}\u{c}\r/".into()),
        ..Default::default()
    };
    let pairs = [(odd.clone(), &b"\x00\xff\xfe"[..]), (odd, b"ab"), (SingleMessageMetadata::default(), b"abc")];
    let md = MessageMetadata { producer_name: "prod\u{2028}ucer".into(), ..sample_metadata(3) };
    entries.push(crate::codec::batch::encode_batch(&md, &pairs, Codec::Zstd, true).unwrap());
    for (most, least) in [(1u64, 9u64), (u64::MAX, 2)] {
        let txn = MessageMetadata { txnid_most_bits: Some(most), txnid_least_bits: Some(least), ..sample_metadata(4) };
        entries.push(crate::codec::batch::encode_single(&txn, b"in a transaction", Codec::None, true).unwrap());
    }
    let rows: Vec<&[u8]> = entries.iter().map(|e| &e[..]).collect();
    let mut out = Vec::new();
    for (flags, mask) in [(0u8, 0u8), (1 | 4 | 32, 0x10), (2 | 8 | 16, 0), (64 | 128, 0x81)] {
        out.push(bulk_input(flags, mask, &rows));
    }
    out
}

/// The decompression target of one codec (a `fn` pointer cannot capture the codec, so each is its own closure).
macro_rules! decompress_target {
    ($name:literal, $codec:expr) => {
        Target { name: $name, run: |d| fuzz_decompress_codec($codec, d), seeds: || seeds_decompress_codec($codec) }
    };
}

pub fn targets() -> Vec<Target> {
    vec![
        Target { name: "entry_parse", run: fuzz_entry_parse, seeds: seeds_entry_parse },
        Target { name: "batch_decode", run: fuzz_batch_decode, seeds: seeds_batch_decode },
        decompress_target!("decompress_lz4", Codec::Lz4),
        decompress_target!("decompress_zlib", Codec::Zlib),
        decompress_target!("decompress_zstd", Codec::Zstd),
        decompress_target!("decompress_snappy", Codec::Snappy),
        Target { name: "frame_decoder", run: fuzz_frame_decoder, seeds: seeds_frame_decoder },
        Target { name: "bulk", run: fuzz_bulk, seeds: seeds_bulk },
        Target { name: "txn_log", run: fuzz_txn_log, seeds: seeds_txn_log },
        Target { name: "compaction", run: fuzz_compaction, seeds: seeds_compaction },
        Target { name: "record_head", run: fuzz_record_head, seeds: seeds_record_head },
        Target { name: "entry_log", run: fuzz_entry_log, seeds: seeds_entry_log },
        Target { name: "entry_log_arrow", run: fuzz_entry_log_arrow, seeds: seeds_entry_log_arrow },
        Target { name: "bookie_entry", run: fuzz_bookie_entry, seeds: seeds_bookie_entry },
        Target { name: "compaction_arrow", run: fuzz_compaction_arrow, seeds: seeds_compaction_arrow },
        Target { name: "json_lines", run: fuzz_json_lines, seeds: seeds_json_lines },
    ]
}

// ---------------------------------------------------------------------------------------------
// Mutator
// ---------------------------------------------------------------------------------------------

/// xorshift64*: small, seedable, good enough to pick mutations.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform-ish in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// Length-field values that break parsers: empty, one, around signed and unsigned overflow.
pub const BOUNDARY_U32: [u32; 12] =
    [0, 1, 2, 4, 6, 0x7f, 0x80, 0xffff, 0x7fff_ffff, 0x8000_0000, 0xffff_fffe, 0xffff_ffff];
pub const BOUNDARY_VARINT: [u64; 10] = [0, 1, 0x7f, 0x80, 0x3fff, 0x7fff_ffff, 0xffff_ffff, 1 << 32, 1 << 63, u64::MAX];
const INTERESTING_BYTES: [u8; 10] = [0x00, 0x01, 0x02, 0x0e, 0x7f, 0x80, 0xff, 0x08, 0x0a, 0x12];

fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Writes `bytes` over `buf` at `at`, growing it if they run past the end.
fn overwrite(buf: &mut Vec<u8>, at: usize, bytes: &[u8]) {
    let at = at.min(buf.len());
    let end = at + bytes.len();
    if end > buf.len() {
        buf.resize(end, 0);
    }
    buf[at..end].copy_from_slice(bytes);
}

/// Applies 1-4 random mutations to `input`: bit flips, byte sets, truncations, extensions,
/// big-endian length overwrites with boundary values, varint overwrites, magic insertion, range
/// insert/delete/duplicate, and splices with another corpus member. Output is at most `max_len`.
pub fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>], max_len: usize) -> Vec<u8> {
    let mut b = input.to_vec();
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let len = b.len();
        let pos = if len == 0 { 0 } else { rng.below(len) };
        match rng.below(13) {
            0 if len > 0 => b[pos] ^= 1 << rng.below(8),
            1 if len > 0 => {
                b[pos] = if rng.chance(2) {
                    rng.next_u64() as u8
                } else {
                    INTERESTING_BYTES[rng.below(INTERESTING_BYTES.len())]
                }
            }
            2 => b.truncate(if len == 0 { 0 } else { rng.below(len + 1) }),
            3 => {
                let n = 1 + rng.below(64);
                if rng.chance(2) || len == 0 {
                    b.extend((0..n).map(|_| rng.next_u64() as u8));
                } else {
                    let start = rng.below(len);
                    let end = (start + n).min(len);
                    let chunk = b[start..end].to_vec();
                    b.extend_from_slice(&chunk);
                }
            }
            4 => {
                let v = if rng.chance(4) {
                    (len as u32).wrapping_add(rng.below(5) as u32).wrapping_sub(2)
                } else {
                    BOUNDARY_U32[rng.below(BOUNDARY_U32.len())]
                };
                overwrite(&mut b, pos, &v.to_be_bytes());
            }
            5 => {
                let mut v = Vec::new();
                write_varint(&mut v, BOUNDARY_VARINT[rng.below(BOUNDARY_VARINT.len())]);
                overwrite(&mut b, pos, &v);
            }
            6 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                let cut_self = if len == 0 { 0 } else { rng.below(len + 1) };
                let cut_other = if other.is_empty() { 0 } else { rng.below(other.len() + 1) };
                b.truncate(cut_self);
                b.extend_from_slice(&other[cut_other..]);
            }
            7 => {
                let n = 1 + rng.below(16);
                let ins: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                b.splice(pos..pos, ins);
            }
            8 if len > 0 => {
                let end = (pos + 1 + rng.below(16)).min(len);
                b.drain(pos..end);
            }
            9 if len > 0 => {
                let end = (pos + 1 + rng.below(32)).min(len);
                let chunk = b[pos..end].to_vec();
                let at = rng.below(len + 1);
                b.splice(at..at, chunk);
            }
            10 => {
                let magic: [u8; 2] = if rng.chance(2) { [0x0e, 0x01] } else { [0x0e, 0x02] };
                overwrite(&mut b, pos, &magic);
            }
            11 if len >= 4 => {
                let at = rng.below(len - 3);
                let v = be_u32(&b[at..]).wrapping_add(rng.below(9) as u32).wrapping_sub(4);
                b[at..at + 4].copy_from_slice(&v.to_be_bytes());
            }
            _ if len > 0 => b[pos] = b[pos].wrapping_add(1 + rng.below(3) as u8),
            _ => b.push(rng.next_u64() as u8),
        }
    }
    b.truncate(max_len);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_is_accepted() {
        for t in targets() {
            for (i, s) in (t.seeds)().iter().enumerate() {
                assert!((t.run)(s), "seed {i} of {} is not accepted", t.name);
            }
        }
    }

    /// `scripts/fuzz.sh --libfuzzer` runs what `cargo fuzz list` lists: each target's `[[bin]]` in
    /// rust/fuzz/Cargo.toml, a thin wrapper in rust/fuzz/fuzz_targets/<name>.rs.
    #[test]
    fn every_target_has_its_libfuzzer_binary() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let all = targets();
        for t in &all {
            let bin = format!("[[bin]]\nname = \"{0}\"\npath = \"fuzz_targets/{0}.rs\"\n", t.name);
            assert!(manifest.contains(&bin), "rust/fuzz/Cargo.toml has no [[bin]] for {}", t.name);
            let src = std::fs::read_to_string(dir.join("fuzz_targets").join(format!("{}.rs", t.name)))
                .unwrap_or_else(|e| panic!("fuzz_targets/{}.rs: {e}", t.name));
            assert!(
                src.contains("pulsarkit::fuzz::fuzz_"),
                "fuzz_targets/{}.rs runs no pulsarkit::fuzz target",
                t.name
            );
        }
        assert_eq!(manifest.matches("[[bin]]").count(), all.len(), "a [[bin]] for no target of targets()");
    }

    #[test]
    fn mutator_respects_max_len_and_is_deterministic() {
        let corpus = seeds_entry_parse();
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for i in 0..2000 {
            let x = mutate(&mut a, &corpus[i % corpus.len()], &corpus, 300);
            assert!(x.len() <= 300);
            assert_eq!(x, mutate(&mut b, &corpus[i % corpus.len()], &corpus, 300));
        }
    }
}
