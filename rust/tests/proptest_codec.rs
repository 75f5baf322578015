//! Property tests: every encoder/decoder pair of the core round-trips on generated inputs, and every
//! parser survives arbitrary and mutated bytes (the fuzz targets double as invariant checkers).
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, BinaryArray};
use proptest::prelude::*;
use prost::Message as _;
use pulsarkit::bulk::{self, EntryColumn};
use pulsarkit::codec::batch::{append_record, decode_batch, encode_batch, encode_single, entry_messages, parse_entry};
use pulsarkit::codec::command::{encode_frame, FrameDecoder, DEFAULT_MAX_FRAME_SIZE};
use pulsarkit::codec::compaction::{last_message_position, rebatch, BatchFormat};
use pulsarkit::codec::compression::{compress, decompress, Codec, DEFAULT_DECOMPRESSION_LIMIT};
use pulsarkit::codec::crc::{crc32c, crc32c_resume};
use pulsarkit::codec::entry::{
    add_broker_entry_metadata, peek_broker_entry_metadata, strip_broker_entry_metadata, MAGIC_BROKER_ENTRY_METADATA,
};
use pulsarkit::codec::proto::{BrokerEntryMetadata, KeyValue, MessageMetadata, SingleMessageMetadata};
use pulsarkit::codec::proto::{Subscription, TransactionMetadataEntry};
use pulsarkit::codec::txn::{batched_entry_size, decode_txn_metadata, pack_batched_entry, split_entry};
use pulsarkit::error::Error;
use pulsarkit::fuzz;

fn codec() -> impl Strategy<Value = Codec> {
    prop::sample::select(Codec::ALL.to_vec())
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

/// Payloads that are sometimes compressible (repeats) and sometimes not.
fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![bytes(300), (bytes(8), 0usize..100).prop_map(|(b, n)| b.repeat(n))]
}

fn props() -> impl Strategy<Value = Vec<KeyValue>> {
    prop::collection::vec((".{0,6}", ".{0,6}"), 0..3)
        .prop_map(|v| v.into_iter().map(|(key, value)| KeyValue { key, value }).collect())
}

fn metadata() -> impl Strategy<Value = MessageMetadata> {
    (
        ".{0,12}",
        any::<u64>(),
        any::<u64>(),
        props(),
        prop::option::of(".{0,10}"),
        prop::option::of(1u64..),
        prop::option::of(bytes(8)),
    )
        .prop_map(|(producer_name, sequence_id, publish_time, properties, partition_key, event_time, ok)| {
            MessageMetadata {
                producer_name,
                sequence_id,
                publish_time,
                properties,
                partition_key,
                event_time,
                ordering_key: ok.map(Into::into),
                ..Default::default()
            }
        })
}

/// One batched message: arbitrary keys, properties, ordering keys, event times, flags, payloads.
fn single_message() -> impl Strategy<Value = (SingleMessageMetadata, Vec<u8>)> {
    (
        props(),
        prop::option::of(".{0,10}"),
        prop::option::of(bytes(8)),
        prop::option::of(1u64..),
        prop::option::of(any::<u64>()),
        any::<[bool; 4]>(),
        payload(),
    )
        .prop_map(
            |(properties, partition_key, ok, event_time, sequence_id, [null_value, compacted_out, b64, null_pk], p)| {
                let smm = SingleMessageMetadata {
                    properties,
                    partition_key,
                    payload_size: 0,
                    compacted_out: compacted_out.then_some(true),
                    event_time,
                    partition_key_b64_encoded: b64.then_some(true),
                    ordering_key: ok.map(Into::into),
                    sequence_id,
                    null_value: null_value.then_some(true),
                    null_partition_key: null_pk.then_some(true),
                };
                (smm, p)
            },
        )
}

/// A valid entry: single or batched, any codec, with or without checksum and broker entry metadata.
fn txn_record() -> impl Strategy<Value = TransactionMetadataEntry> {
    (
        prop::option::of(0i32..4),
        prop::option::of(any::<u64>()),
        prop::option::of(any::<u64>()),
        prop::option::of(0i32..5),
        prop::collection::vec("[a-z:/0-9-]{0,30}", 0..4),
        prop::collection::vec(("[a-z]{1,8}", "[a-z]{1,8}"), 0..3),
        prop::option::of(any::<u64>()),
    )
        .prop_map(|(op, least, most, status, partitions, subs, timeout)| TransactionMetadataEntry {
            metadata_op: op,
            txnid_least_bits: least,
            txnid_most_bits: most,
            new_status: status,
            partitions,
            subscriptions: subs.into_iter().map(|(topic, subscription)| Subscription { topic, subscription }).collect(),
            timeout_ms: timeout,
            ..Default::default()
        })
}

fn entry() -> impl Strategy<Value = Vec<u8>> {
    (
        metadata(),
        prop::collection::vec(single_message(), 0..5),
        codec(),
        any::<bool>(),
        prop::option::of((prop::option::of(any::<u64>()), prop::option::of(any::<u64>()))),
    )
        .prop_map(|(md, msgs, c, checksum, bem)| {
            let e = if msgs.is_empty() {
                encode_single(&md, b"single payload", c, checksum).unwrap()
            } else {
                let pairs: Vec<(SingleMessageMetadata, &[u8])> =
                    msgs.iter().map(|(s, p)| (s.clone(), &p[..])).collect();
                encode_batch(&md, &pairs, c, checksum).unwrap()
            };
            match bem {
                Some((ts, idx)) => add_broker_entry_metadata(&e, ts, idx).unwrap(),
                None => e,
            }
        })
}

/// A valid entry, sometimes corrupted (truncated, a byte changed, or length fields overwritten).
fn maybe_corrupt_entry() -> impl Strategy<Value = Vec<u8>> {
    (entry(), 0u8..4, any::<prop::sample::Index>(), any::<u8>(), any::<u64>()).prop_map(|(mut e, how, at, b, seed)| {
        match how {
            0 => {}
            1 => e.truncate(at.index(e.len() + 1)),
            2 => {
                let i = at.index(e.len());
                e[i] ^= b | 1;
            }
            _ => {
                let mut rng = fuzz::Rng::new(seed);
                e = fuzz::mutate(&mut rng, &e, &[], 1 << 16);
            }
        }
        e
    })
}

/// One raw MessageMetadata field: its number (every field the scan reads, a few it skips, and an
/// unknown one), a wire type (usually the field's own, sometimes another) and a value.
fn raw_field() -> impl Strategy<Value = (u32, u8, u64, Vec<u8>)> {
    let number = prop::sample::select(vec![
        1u32, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 18, 19, 20, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
        99,
    ]);
    let text = prop_oneof![4 => "[a-z0-9-]{0,20}".prop_map(String::into_bytes), 1 => bytes(6)];
    (number, prop::option::weighted(0.9, Just(())), any::<u64>().prop_map(|v| v >> (v % 64)), text).prop_map(
        |(f, own, v, b)| {
            let strings = [1u32, 4, 5, 6, 7, 13, 14, 16, 18, 26];
            let own_wt = if strings.contains(&f) { 2 } else { 0 };
            (f, if own.is_some() { own_wt } else { 2 - own_wt }, v, b)
        },
    )
}

fn encode_raw(fields: &[(u32, u8, u64, Vec<u8>)]) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let mut out = Vec::new();
    for (f, wt, v, b) in fields {
        varint(&mut out, u64::from(*f) << 3 | u64::from(*wt));
        if *wt == 0 {
            varint(&mut out, *v);
        } else {
            varint(&mut out, b.len() as u64);
            out.extend_from_slice(b);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// The metadata scan's in-order path (fields in field-number order, as writers emit them) and
    /// `decode_metadata`'s fast paths give what the general walk gives for any order, repeat, wire
    /// type or truncation of the fields: the same fields, or the same error at the same offset.
    #[test]
    fn metadata_fast_paths_match_the_general_walk(
        mut fields in prop::collection::vec(raw_field(), 0..24),
        sorted in any::<bool>(),
        cut in any::<prop::sample::Index>(),
        truncate in prop::bool::weighted(0.2),
        bem in prop::option::of((any::<u64>(), any::<u64>())),
        checksum in any::<bool>(),
    ) {
        if sorted {
            fields.sort_by_key(|f| f.0);
        }
        let mut md = encode_raw(&fields);
        if truncate && !md.is_empty() {
            md.truncate(cut.index(md.len()));
        }
        let fast = pulsarkit::codec::metascan::scan_metadata(&md);
        let general = pulsarkit::codec::metascan::scan_metadata_general(&md);
        match (&fast, &general) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(a), Err(b)) => prop_assert_eq!((a.to_string(), a.offset()), (b.to_string(), b.offset())),
            _ => prop_assert!(false, "fast {:?} vs general {:?}", fast, general),
        }
        let mut e = pulsarkit::codec::entry::encode_metadata_and_payload(&md, b"payload", checksum).unwrap();
        if let Some((ts, idx)) = bem {
            e = add_broker_entry_metadata(&e, Some(ts), Some(idx)).unwrap();
        }
        let arr = BinaryArray::from_iter([Some(&e[..]), None, Some(&e[..e.len() / 2])]);
        let col = EntryColumn::from_array(&arr).unwrap();
        for verify in [false, true] {
            bulk::reference::assert_same_columns(
                &bulk::decode_metadata(&col, verify).unwrap(),
                &bulk::reference::decode_metadata(&col, verify),
            );
        }
    }

    #[test]
    fn crc32c_resumes(a in bytes(200), b in bytes(200)) {
        let whole: Vec<u8> = a.iter().chain(&b).copied().collect();
        prop_assert_eq!(crc32c(&whole), crc32c_resume(crc32c(&a), &b));
        prop_assert_eq!(crc32c_resume(0, &whole), crc32c(&whole));
    }

    #[test]
    fn codecs_round_trip(c in codec(), data in payload()) {
        let z = compress(c, &data).unwrap();
        prop_assert_eq!(&decompress(c, &z, data.len(), DEFAULT_DECOMPRESSION_LIMIT).unwrap(), &data);
        if c != Codec::None {
            // Any other declared size is refused, never truncated or padded.
            let wrong = decompress(c, &z, data.len() + 1, DEFAULT_DECOMPRESSION_LIMIT);
            prop_assert!(matches!(wrong, Err(Error::Decompression { .. })), "{:?}", wrong);
            if !data.is_empty() {
                prop_assert!(decompress(c, &z, data.len() - 1, DEFAULT_DECOMPRESSION_LIMIT).is_err());
                let limited = decompress(c, &z, data.len(), data.len() - 1);
                prop_assert!(matches!(limited, Err(Error::LimitExceeded { .. })), "{:?}", limited);
            }
        }
    }

    #[test]
    fn single_entries_round_trip(md in metadata(), data in payload(), c in codec(), checksum in any::<bool>()) {
        let e = encode_single(&md, &data, c, checksum).unwrap();
        let p = parse_entry(&e, true).unwrap();
        prop_assert_eq!(p.layout.checksum.is_some(), checksum);
        prop_assert_eq!(&p.metadata.producer_name, &md.producer_name);
        prop_assert_eq!(p.metadata.sequence_id, md.sequence_id);
        prop_assert_eq!(p.metadata.publish_time, md.publish_time);
        prop_assert_eq!(p.metadata.uncompressed_size, Some(data.len() as u32));
        prop_assert_eq!(p.metadata.compression, (c != Codec::None).then_some(c as i32));
        prop_assert_eq!(p.metadata.num_messages_in_batch, None);
        let m = entry_messages(&e, &p, false, DEFAULT_DECOMPRESSION_LIMIT).unwrap();
        prop_assert_eq!(m.len(), 1);
        prop_assert_eq!(&m[0].payload, &data);
        prop_assert_eq!(m[0].batch_index, -1);
        prop_assert_eq!(&m[0].key, &md.partition_key);
        prop_assert_eq!(m[0].event_time, md.event_time);
        prop_assert_eq!(m[0].ordering_key.as_deref(), md.ordering_key.as_deref());
        prop_assert_eq!(m[0].properties.len(), md.properties.len());
    }

    #[test]
    fn batches_round_trip(md in metadata(), msgs in prop::collection::vec(single_message(), 1..8), c in codec(), checksum in any::<bool>()) {
        let pairs: Vec<(SingleMessageMetadata, &[u8])> = msgs.iter().map(|(s, p)| (s.clone(), &p[..])).collect();
        let e = encode_batch(&md, &pairs, c, checksum).unwrap();
        let p = parse_entry(&e, true).unwrap();
        prop_assert_eq!(p.metadata.num_messages_in_batch, Some(msgs.len() as i32));
        let all = entry_messages(&e, &p, true, DEFAULT_DECOMPRESSION_LIMIT).unwrap();
        prop_assert_eq!(all.len(), msgs.len());
        for (i, (m, (s, payload))) in all.iter().zip(&msgs).enumerate() {
            prop_assert_eq!(m.batch_index, i as i32);
            prop_assert_eq!(&m.payload, payload);
            prop_assert_eq!(&m.key, &s.partition_key);
            prop_assert_eq!(m.ordering_key.as_deref(), s.ordering_key.as_deref());
            let kv: Vec<(String, String)> = s.properties.iter().map(|k| (k.key.clone(), k.value.clone())).collect();
            prop_assert_eq!(&m.properties, &kv);
            // MessageImpl.create: the entry's event time unless the message has its own
            prop_assert_eq!(m.event_time, s.event_time.or(md.event_time).filter(|&t| t != 0));
            prop_assert_eq!(m.sequence_id, s.sequence_id.unwrap_or(md.sequence_id));
            prop_assert_eq!(m.null_value, s.null_value.unwrap_or(false));
            prop_assert_eq!(m.compacted_out, s.compacted_out.unwrap_or(false));
            prop_assert_eq!(m.partition_key_b64_encoded, s.partition_key_b64_encoded.unwrap_or(false));
            prop_assert_eq!(m.null_partition_key, s.null_partition_key.unwrap_or(false));
        }
        // A consumer drops compacted-out records and keeps the rest in order.
        let kept = entry_messages(&e, &p, false, DEFAULT_DECOMPRESSION_LIMIT).unwrap();
        let expect: Vec<_> = all.into_iter().filter(|m| !m.compacted_out).collect();
        prop_assert_eq!(kept, expect);
    }

    #[test]
    fn batch_records_round_trip(msgs in prop::collection::vec(single_message(), 0..8), extra in 1usize..4) {
        let mut b = Vec::new();
        for (s, p) in &msgs {
            append_record(&mut b, s, p).unwrap();
        }
        let recs = decode_batch(&b, msgs.len() as i32).unwrap();
        prop_assert_eq!(recs.len(), msgs.len());
        for (r, (s, p)) in recs.iter().zip(&msgs) {
            prop_assert_eq!(&b[r.payload.clone()], &p[..]);
            let mut expect = s.clone();
            expect.payload_size = p.len() as i32;
            prop_assert_eq!(&r.metadata, &expect);
        }
        // Claiming more records than present, or leaving bytes over, is corruption.
        prop_assert!(decode_batch(&b, msgs.len() as i32 + extra as i32).is_err());
        if !msgs.is_empty() {
            prop_assert!(decode_batch(&b, msgs.len() as i32 - 1).is_err());
        }
    }

    #[test]
    fn broker_entry_metadata_add_peek_strip(e in entry(), ts in prop::option::of(any::<u64>()), idx in prop::option::of(any::<u64>())) {
        let base = strip_broker_entry_metadata(&e).unwrap().to_vec();
        prop_assume!(base.len() < 2 || u16::from_be_bytes([base[0], base[1]]) != MAGIC_BROKER_ENTRY_METADATA);
        let added = add_broker_entry_metadata(&base, ts, idx).unwrap();
        let bem = BrokerEntryMetadata { broker_timestamp: ts, index: idx };
        prop_assert_eq!(added.len(), base.len() + 6 + bem.encoded_len());
        prop_assert_eq!(strip_broker_entry_metadata(&added).unwrap(), &base[..]);
        prop_assert_eq!(peek_broker_entry_metadata(&added).unwrap(), Some(bem));
        prop_assert_eq!(peek_broker_entry_metadata(&base).unwrap(), None);
        // A second prefix is refused; the client's bytes still parse with the same checksum.
        prop_assert!(add_broker_entry_metadata(&added, ts, idx).is_err());
        prop_assert_eq!(parse_entry(&added, true).unwrap().metadata, parse_entry(&base, true).unwrap().metadata);
    }

    #[test]
    fn frames_survive_any_split(
        frames in prop::collection::vec((bytes(40), prop::option::of(prop::collection::vec(any::<u8>(), 1..300))), 0..6),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let mut stream = Vec::new();
        for (cmd, hp) in &frames {
            stream.extend(encode_frame(cmd, hp.as_deref()).unwrap());
        }
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        at.sort_unstable();
        let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE);
        let mut got = Vec::new();
        let mut prev = 0;
        for c in at.into_iter().chain(std::iter::once(stream.len())) {
            got.extend(d.feed(&stream[prev..c]).unwrap());
            prev = c;
        }
        prop_assert_eq!(d.buffered(), 0);
        prop_assert_eq!(got.len(), frames.len());
        for (g, (cmd, hp)) in got.iter().zip(&frames) {
            prop_assert_eq!(&g.command, cmd);
            prop_assert_eq!(&g.headers_and_payload, hp);
        }
    }

    /// Every bulk kernel agrees with the single-entry functions row by row, corrupt rows included
    /// (an error in the row, never a dropped or extra row). The checks live in `fuzz::fuzz_bulk`.
    #[test]
    fn bulk_kernels_agree_with_single_entry(rows in prop::collection::vec(maybe_corrupt_entry(), 0..6), flags in any::<u8>(), mask in any::<u8>()) {
        let refs: Vec<&[u8]> = rows.iter().map(|r| &r[..]).collect();
        fuzz::fuzz_bulk(&fuzz::bulk_input(flags, mask, &refs));
    }

    /// PIP-70 per-message index for any stored u64 index, with Java's wrapping long arithmetic.
    #[test]
    fn explode_index_for_any_stored_index(
        index in prop_oneof![any::<u64>(), 0u64..8, (1u64 << 63)..(1u64 << 63) + 8, Just(u64::MAX)],
        n in 1usize..5,
    ) {
        let md = MessageMetadata { producer_name: "p".into(), sequence_id: 0, publish_time: 1, ..Default::default() };
        let msgs: Vec<(SingleMessageMetadata, &[u8])> = (0..n).map(|_| (SingleMessageMetadata::default(), &b"x"[..])).collect();
        let e = add_broker_entry_metadata(&encode_batch(&md, &msgs, Codec::None, true).unwrap(), None, Some(index)).unwrap();
        let arr = BinaryArray::from_iter_values([e]);
        let out = bulk::explode_messages(&EntryColumn::from_array(&arr).unwrap(), false, true, DEFAULT_DECOMPRESSION_LIMIT).unwrap();
        prop_assert_eq!(out.num_rows(), n);
        let idx = out.column_by_name("index").unwrap().as_primitive::<Int64Type>();
        let bi = out.column_by_name("batch_index").unwrap().as_primitive::<Int32Type>();
        for r in 0..n {
            prop_assert_eq!(bi.value(r), r as i32);
            prop_assert_eq!(idx.value(r), (index as i64).wrapping_sub(n as i64).wrapping_add(r as i64 + 1));
        }
    }

    /// Transaction-log records: packed into a PIP-160 entry, split and decoded back field by field.
    #[test]
    fn txn_records_round_trip(recs in prop::collection::vec(txn_record(), 0..20)) {
        let enc: Vec<Vec<u8>> = recs.iter().map(|r| r.encode_to_vec()).collect();
        let mut entry = Vec::new();
        pack_batched_entry(enc.iter().map(Vec::as_slice), &mut entry);
        prop_assert_eq!(entry.len(), batched_entry_size(enc.iter().map(Vec::as_slice)));
        let split = split_entry(&entry).unwrap();
        prop_assert!(split.batched);
        prop_assert_eq!(split.records.len(), recs.len());
        for (r, range) in recs.iter().zip(&split.records) {
            let d = decode_txn_metadata(&entry[range.clone()]).unwrap();
            let text = |x: &std::ops::Range<usize>| String::from_utf8(entry[range.start + x.start..range.start + x.end].to_vec()).unwrap();
            prop_assert_eq!(d.op, r.metadata_op);
            prop_assert_eq!((d.txnid_most_bits, d.txnid_least_bits), (r.txnid_most_bits.unwrap_or(0), r.txnid_least_bits.unwrap_or(0)));
            prop_assert_eq!(d.new_status, r.new_status);
            prop_assert_eq!(d.partitions.iter().map(text).collect::<Vec<_>>(), r.partitions.clone());
            prop_assert_eq!(d.subscriptions.len(), r.subscriptions.len());
            prop_assert_eq!(d.timeout_ms, r.timeout_ms);
        }
    }

    /// Compaction: rebatching a batch keeps exactly the chosen messages under their own indexes, in
    /// both formats, and the kept entry's last message position is the last kept index.
    #[test]
    fn rebatch_keeps_exactly_the_chosen_messages(
        md in metadata(), msgs in prop::collection::vec(single_message(), 1..8), c in codec(), keep in any::<u8>(), only in any::<bool>()
    ) {
        let pairs: Vec<(SingleMessageMetadata, &[u8])> = msgs.iter().map(|(s, p)| (s.clone(), &p[..])).collect();
        let b = encode_batch(&md, &pairs, c, true).unwrap();
        let keep_it = |i: i32| keep >> (i % 8) & 1 == 1;
        let format = if only { BatchFormat::RetainedOnly } else { BatchFormat::Placeholders };
        let want: Vec<i32> = msgs.iter().enumerate()
            .filter(|(i, (s, p))| !s.compacted_out.unwrap_or(false) && s.partition_key.is_some() && !p.is_empty() && keep_it(*i as i32))
            .map(|(i, _)| i as i32).collect();
        match rebatch(&b, |i, _| keep_it(i), false, format, DEFAULT_DECOMPRESSION_LIMIT).unwrap() {
            None => prop_assert!(want.is_empty()),
            Some(out) => {
                let e = parse_entry(&out, true).unwrap();
                prop_assert_eq!(&e.metadata.compacted_batch_indexes, &want);
                let got: Vec<i32> = entry_messages(&out, &e, false, DEFAULT_DECOMPRESSION_LIMIT).unwrap().iter().map(|m| m.batch_index).collect();
                prop_assert_eq!(&got, &want);
                let last = last_message_position(&out, DEFAULT_DECOMPRESSION_LIMIT).unwrap().0;
                prop_assert_eq!(last, if msgs.len() <= 1 { -1 } else { *want.last().unwrap() });
            }
        }
    }

    /// Arbitrary bytes through every target: errors are fine, panics are not.
    #[test]
    fn garbage_never_panics(data in bytes(600)) {
        for t in fuzz::targets() {
            (t.run)(&data);
        }
    }

    /// Mutated valid inputs (deeper than random bytes) through every target.
    #[test]
    fn mutated_seeds_never_panic(seed in any::<u64>(), which in any::<prop::sample::Index>()) {
        let mut rng = fuzz::Rng::new(seed);
        for t in fuzz::targets() {
            let seeds = (t.seeds)();
            let s = &seeds[which.index(seeds.len())];
            let m = fuzz::mutate(&mut rng, s, &seeds, 1 << 16);
            (t.run)(&m);
        }
    }
}

#[test]
fn java_style_zlib_and_size_mismatch_errors_carry_no_panic() {
    // Declared sizes far above the limit are refused before any allocation.
    for c in [Codec::Lz4, Codec::Zlib, Codec::Zstd, Codec::Snappy] {
        let z = compress(c, b"abc").unwrap();
        assert!(matches!(decompress(c, &z, usize::MAX, DEFAULT_DECOMPRESSION_LIMIT), Err(Error::LimitExceeded { .. })));
    }
    let arr = BinaryArray::from_iter([None, Some(&b""[..]), Some(&b"\x0e\x02\xff\xff\xff\xff"[..])]);
    let col = EntryColumn::from_array(&arr).unwrap();
    let out = bulk::explode_messages(&col, false, true, DEFAULT_DECOMPRESSION_LIMIT).unwrap();
    assert_eq!(out.num_rows(), 3);
    let err = out.column_by_name("error").unwrap().as_string::<i32>();
    assert!(err.is_null(0) && err.is_valid(1) && err.is_valid(2));
}
