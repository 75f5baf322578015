//! Topic compaction's byte work, as Pulsar's two-phase compactor does it.
//!
//! Phase one reads every message's key, id and payload size (batches opened; an encrypted batch is
//! one unit keyed by the entry's key; markers skipped) into the latest position per key; an empty
//! payload is a tombstone that removes its key. Phase two rewrites each batch keeping only the
//! latest messages (`RawBatchConverter.rebatchMessage`), then frames each kept entry as a raw message
//! of the compacted ledger (`[i32 id size][MessageIdData][i32 size][entry]`). PIP-429: the rewritten
//! batch lists its retained indexes in `compacted_batch_indexes` (MessageMetadata field 31), which
//! is also how the last message id of a compacted ledger is answered without decompressing.
use crate::codec::batch::{
    append_record, indexed_batch_records, parse_entry, uncompressed_payload, BatchRecord, ParsedEntry,
};
use crate::codec::compression::{self, Codec};
use crate::codec::entry::encode_metadata_and_payload;
use crate::codec::proto::{MessageIdData, SingleMessageMetadata};
use crate::codec::wire::Reader;
use crate::error::{Error, Result};
use prost::Message as _;
use std::collections::HashMap;

/// What phase one needs of one message. `batch_index` is -1 for an entry taken whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionRecord {
    pub batch_index: i32,
    pub key: Option<String>,
    pub payload_size: i64,
    pub event_time: u64,
}

/// A batch's records with their real batch indexes.
type IndexedRecords = Vec<(i32, BatchRecord)>;

fn body_records(data: &[u8], e: &ParsedEntry, limit: usize) -> Result<(Vec<u8>, IndexedRecords)> {
    let body = uncompressed_payload(data, e, limit)?;
    let recs = indexed_batch_records(&body, e)?;
    Ok((body, recs))
}

/// Phase one's view of an entry: None for a marker, else its messages (compacted-out ones left out).
pub fn compaction_records(data: &[u8], limit: usize) -> Result<Option<Vec<CompactionRecord>>> {
    let e = parse_entry(data, false)?;
    let md = &e.metadata;
    if md.marker_type.is_some() {
        return Ok(None);
    }
    let encrypted = !md.encryption_keys.is_empty();
    if md.num_messages_in_batch.is_some() && !encrypted {
        let (_, recs) = body_records(data, &e, limit)?;
        return Ok(Some(
            recs.into_iter()
                .filter(|(_, r)| !r.metadata.compacted_out.unwrap_or(false))
                .map(|(i, r)| CompactionRecord {
                    batch_index: i,
                    key: r.metadata.partition_key,
                    payload_size: i64::from(r.metadata.payload_size),
                    event_time: r.metadata.event_time.unwrap_or(0),
                })
                .collect(),
        ));
    }
    let size = match md.uncompressed_size {
        Some(s) => i64::from(s),
        None => e.layout.payload.len() as i64,
    };
    Ok(Some(vec![CompactionRecord {
        batch_index: -1,
        key: md.partition_key.clone(),
        payload_size: size,
        event_time: md.event_time.unwrap_or(0),
    }]))
}

/// A message's id as the compactor keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MessagePosition {
    pub ledger_id: i64,
    pub entry_id: i64,
    pub batch_index: i32,
}

/// Phase one's result: the latest message per key (`latestForKey`), by publishing order or by event time.
#[derive(Debug, Clone, Default)]
pub struct LatestForKey {
    /// key -> (position, payload size, event time); a size of 0 is a tombstone, dropped by `finish`.
    map: HashMap<String, (MessagePosition, i64, u64)>,
    pub event_time_order: bool,
    /// Messages seen (all keys, tombstones and keyless ones included).
    pub messages: u64,
    pub keyless: u64,
}

impl LatestForKey {
    pub fn new(event_time_order: bool) -> Self {
        LatestForKey { event_time_order, ..Default::default() }
    }

    /// Adds one message in reading order. Keyless messages are not keys (phase two keeps or drops
    /// them by `retain_null_key`).
    pub fn add(&mut self, key: Option<&str>, pos: MessagePosition, payload_size: i64, event_time: u64) {
        self.messages += 1;
        let Some(k) = key else {
            self.keyless += 1;
            return;
        };
        match self.map.get_mut(k) {
            Some(v) => {
                // EventTimeOrderCompactor: a message older by event time does not replace a newer one. Event
                // times compare as Java longs (as Spark's phase one compares them too): one past i64::MAX is
                // negative, older than any other.
                if !self.event_time_order || event_time as i64 >= v.2 as i64 {
                    *v = (pos, payload_size, event_time);
                }
            }
            None => {
                self.map.insert(k.to_owned(), (pos, payload_size, event_time));
            }
        }
    }

    /// Adds every message of an entry.
    pub fn add_entry(&mut self, ledger_id: i64, entry_id: i64, data: &[u8], limit: usize) -> Result<()> {
        if let Some(recs) = compaction_records(data, limit)? {
            for r in recs {
                let pos = MessagePosition { ledger_id, entry_id, batch_index: r.batch_index };
                self.add(r.key.as_deref(), pos, r.payload_size, r.event_time);
            }
        }
        Ok(())
    }

    /// Whether `pos` is the retained message of `key` (a tombstone retains nothing).
    pub fn is_latest(&self, key: &str, pos: MessagePosition) -> bool {
        matches!(self.map.get(key), Some((p, size, _)) if *p == pos && *size > 0)
    }

    /// Retained (key, position), tombstones dropped, ordered by position.
    pub fn retained(&self) -> Vec<(&str, MessagePosition)> {
        let mut v: Vec<(&str, MessagePosition)> =
            self.map.iter().filter(|(_, (_, s, _))| *s > 0).map(|(k, (p, _, _))| (k.as_str(), *p)).collect();
        v.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0)));
        v
    }

    /// Keys whose latest message is a tombstone.
    pub fn tombstones(&self) -> usize {
        self.map.values().filter(|(_, s, _)| *s <= 0).count()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Inserts a retained key directly (a result aggregated elsewhere, e.g. on Spark).
    pub fn insert(&mut self, key: String, pos: MessagePosition) {
        self.map.insert(key, (pos, 1, 0));
    }
}

/// How phase two writes a partly retained batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchFormat {
    /// Every index kept: dropped messages become `compacted_out` placeholders, and
    /// `compacted_batch_indexes` lists the retained ones. Readable by every client.
    Placeholders,
    /// Only the retained messages (PIP-429's smaller payload). Clients that predate PIP-429 cannot read it.
    RetainedOnly,
}

/// The smallest record a placeholder takes: its 4-byte size and `compacted_out = true` (2 bytes).
const PLACEHOLDER_BYTES: usize = 6;

/// `RawBatchConverter.rebatchMessage`: the batch with only the messages `keep(index, key)` accepts
/// (non-empty payload; keyless ones by `retain_null_key`), re-compressed with the batch's codec and
/// prefixed with the original broker entry metadata; None when nothing is kept.
pub fn rebatch(
    data: &[u8],
    keep: impl Fn(i32, &str) -> bool,
    retain_null_key: bool,
    format: BatchFormat,
    limit: usize,
) -> Result<Option<Vec<u8>>> {
    // the whole entry parsed as phase one parses it: one broker entry metadata prefix, not a second
    let e = parse_entry(data, false)?;
    let (bem, headers_start) = (e.layout.broker_entry_metadata.is_some(), e.layout.headers_start);
    let n = e.metadata.num_messages_in_batch.ok_or_else(|| {
        Error::invalid("rebatch needs a batched entry (num_messages_in_batch is not set)".to_string())
    })?;
    let (body, recs) = body_records(data, &e, limit)?;
    // A batch holding only its retained messages declares how many it had: placeholders for the rest are
    // at least 6 bytes each, so a forged count of 2^31 in a 34-byte entry would be 12 GB of output.
    let missing = usize::try_from(i64::from(n) - recs.len() as i64).unwrap_or(0);
    if format == BatchFormat::Placeholders && missing.saturating_mul(PLACEHOLDER_BYTES) > limit {
        return Err(Error::LimitExceeded {
            what: format!("placeholders for the {missing} messages a compacted batch no longer holds"),
            size: missing.saturating_mul(PLACEHOLDER_BYTES) as u64,
            limit: limit as u64,
        });
    }
    let mut retained = Vec::new();
    let mut out = Vec::with_capacity(body.len());
    let mut next = 0i32;
    let placeholder = SingleMessageMetadata { compacted_out: Some(true), ..Default::default() };
    for (i, r) in &recs {
        let payload = &body[r.payload.clone()];
        let keep_it = !r.metadata.compacted_out.unwrap_or(false)
            && match r.metadata.partition_key.as_deref() {
                None => retain_null_key,
                Some(k) => keep(*i, k) && !payload.is_empty(),
            };
        if format == BatchFormat::Placeholders {
            while next < *i {
                append_record(&mut out, &placeholder, &[])?; // an index the input had already dropped
                next += 1;
            }
            next = i + 1;
        }
        if keep_it {
            retained.push(*i);
            append_record(&mut out, &r.metadata, payload)?;
        } else if format == BatchFormat::Placeholders {
            append_record(&mut out, &placeholder, &[])?;
        }
    }
    if retained.is_empty() {
        return Ok(None);
    }
    if format == BatchFormat::Placeholders {
        while next < n {
            append_record(&mut out, &placeholder, &[])?;
            next += 1;
        }
    }
    let mut md = e.metadata.clone();
    md.compacted_batch_indexes = retained;
    md.uncompressed_size =
        Some(u32::try_from(out.len()).map_err(|_| Error::invalid("rebatched payload over 4 GiB".to_string()))?);
    let codec = Codec::from_wire(md.compression.unwrap_or(0))?;
    let compressed = compression::compress(codec, &out)?;
    let rebuilt = encode_metadata_and_payload(&md.encode_to_vec(), &compressed, true)?;
    let mut entry = Vec::with_capacity(headers_start + rebuilt.len());
    if bem {
        entry.extend_from_slice(&data[..headers_start]);
    }
    entry.extend_from_slice(&rebuilt);
    Ok(Some(entry))
}

/// What phase one retained, as phase two asks it.
#[derive(Debug, Clone, Copy)]
pub enum Retained<'a> {
    /// The latest message per key (phase one run here).
    Latest(&'a LatestForKey),
    /// This entry's retained batch indexes (-1 for an entry taken whole): phase one aggregated
    /// elsewhere, e.g. on Spark, and joined back to the entries.
    Indexes(&'a [i32]),
}

impl Retained<'_> {
    /// Whether message `batch_index` of entry `id`, keyed `key`, is retained.
    fn keeps(&self, id: &MessageIdData, batch_index: i32, key: &str) -> bool {
        match self {
            Retained::Latest(latest) => {
                let (ledger_id, entry_id) = (id.ledger_id as i64, id.entry_id as i64);
                latest.is_latest(key, MessagePosition { ledger_id, entry_id, batch_index })
            }
            Retained::Indexes(kept) => kept.contains(&batch_index),
        }
    }
}

/// Phase two for one topic entry: the compacted-ledger entry to write (a raw message), or None when
/// nothing of it is retained. Markers are skipped; a batch is rebatched; an entry taken whole (not
/// batched, or an encrypted batch) is kept when it is retained, or keyless with `retain_null_key`.
pub fn compact_entry(
    retained: Retained<'_>,
    id: &MessageIdData,
    data: &[u8],
    retain_null_key: bool,
    format: BatchFormat,
    limit: usize,
) -> Result<Option<Vec<u8>>> {
    let keep = |i: i32, k: &str| retained.keeps(id, i, k);
    let e = parse_entry(data, false)?;
    let md = &e.metadata;
    if md.marker_type.is_some() {
        return Ok(None);
    }
    let kept = if md.num_messages_in_batch.is_some() && md.encryption_keys.is_empty() {
        rebatch(data, keep, retain_null_key, format, limit)?
    } else {
        let keep_it = match md.partition_key.as_deref() {
            None => retain_null_key,
            Some(k) => keep(-1, k),
        };
        keep_it.then(|| data.to_vec())
    };
    kept.map(|entry| encode_raw_message(id, &entry)).transpose()
}

/// A compacted-ledger entry (`RawMessageImpl.serialize`): `[i32 idSize][MessageIdData][i32 size][entry]`.
pub fn encode_raw_message(id: &MessageIdData, entry: &[u8]) -> Result<Vec<u8>> {
    let idb = id.encode_to_vec();
    let size = i32::try_from(entry.len()).map_err(|_| Error::invalid("entry over 2 GiB".to_string()))?;
    let mut out = Vec::with_capacity(8 + idb.len() + entry.len());
    out.extend_from_slice(&(idb.len() as i32).to_be_bytes());
    out.extend_from_slice(&idb);
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(entry);
    Ok(out)
}

/// Splits a compacted-ledger entry into its message id and the entry bytes.
pub fn decode_raw_message(data: &[u8]) -> Result<(MessageIdData, &[u8])> {
    let mut r = Reader::new(data);
    let id_range = r.len_prefixed("raw message id")?;
    let id = MessageIdData::decode(&data[id_range.clone()])
        .map_err(|e| Error::corrupt(id_range.start, format!("invalid MessageIdData: {e}")))?;
    let entry = r.len_prefixed("raw message entry")?;
    if r.remaining() != 0 {
        return Err(Error::corrupt(r.pos(), format!("{} bytes follow the raw message", r.remaining())));
    }
    Ok((id, &data[entry]))
}

/// `getLastMessagePosition` on the last entry of a compacted ledger: (batch index, publish time).
/// A batch of one (or none) gives -1; `compacted_batch_indexes` its last element; an encrypted
/// batch `batch_size - 1` (it is never opened); otherwise the last index not compacted out.
pub fn last_message_position(entry: &[u8], limit: usize) -> Result<(i32, u64)> {
    let e = parse_entry(entry, false)?;
    let md = &e.metadata;
    let n = md.num_messages_in_batch.unwrap_or(0);
    let idx = if n <= 1 {
        -1
    } else if let Some(&last) = md.compacted_batch_indexes.last() {
        last
    } else if !md.encryption_keys.is_empty() {
        n - 1
    } else {
        let (_, recs) = body_records(entry, &e, limit)?;
        recs.iter().rev().find(|(_, r)| !r.metadata.compacted_out.unwrap_or(false)).map(|(i, _)| *i).ok_or_else(
            || Error::corrupt(e.layout.headers_start, "the compacted entry holds no message that is not compacted out"),
        )?
    };
    Ok((idx, md.publish_time))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::batch::{encode_batch, encode_single, entry_messages};
    use crate::codec::proto::MessageMetadata;

    fn md() -> MessageMetadata {
        MessageMetadata { producer_name: "p".into(), sequence_id: 0, publish_time: 1000, ..Default::default() }
    }

    fn smm(key: Option<&str>) -> SingleMessageMetadata {
        SingleMessageMetadata { partition_key: key.map(str::to_owned), ..Default::default() }
    }

    fn batch(msgs: &[(Option<&str>, &[u8])], codec: Codec) -> Vec<u8> {
        let v: Vec<(SingleMessageMetadata, &[u8])> = msgs.iter().map(|(k, p)| (smm(*k), *p)).collect();
        encode_batch(&md(), &v, codec, true).unwrap()
    }

    const LIMIT: usize = 1 << 24;

    #[test]
    fn phase_one_keys_ids_sizes_and_tombstones() {
        let b = batch(&[(Some("a"), b"1"), (Some("b"), b"2"), (Some("a"), b""), (None, b"x")], Codec::Lz4);
        let recs = compaction_records(&b, LIMIT).unwrap().unwrap();
        assert_eq!(
            recs.iter().map(|r| (r.batch_index, r.payload_size)).collect::<Vec<_>>(),
            [(0, 1), (1, 1), (2, 0), (3, 1)]
        );
        let mut l = LatestForKey::new(false);
        l.add_entry(5, 0, &b, LIMIT).unwrap();
        assert!(l.is_latest("b", MessagePosition { ledger_id: 5, entry_id: 0, batch_index: 1 }));
        assert!(!l.is_latest("a", MessagePosition { ledger_id: 5, entry_id: 0, batch_index: 2 })); // tombstone
        assert_eq!((l.retained().len(), l.tombstones(), l.keyless), (1, 1, 1));
    }

    #[test]
    fn event_time_order_keeps_the_newest_event() {
        let mut l = LatestForKey::new(true);
        let p = |e| MessagePosition { ledger_id: 1, entry_id: e, batch_index: -1 };
        l.add(Some("k"), p(0), 3, 200);
        l.add(Some("k"), p(1), 3, 100);
        assert!(l.is_latest("k", p(0)));
    }

    #[test]
    fn event_times_compare_as_java_longs() {
        // 2^63 is Long.MIN_VALUE to the Java compactor (and to Spark's max): any later time is newer
        let mut l = LatestForKey::new(true);
        let p = |e| MessagePosition { ledger_id: 1, entry_id: e, batch_index: -1 };
        l.add(Some("k"), p(0), 3, 1 << 63);
        l.add(Some("k"), p(1), 3, 4);
        assert!(l.is_latest("k", p(1)));
        l.add(Some("k"), p(2), 3, u64::MAX); // -1: older than 4
        assert!(l.is_latest("k", p(1)));
    }

    #[test]
    fn rebatch_placeholders_keep_indexes_and_list_the_retained() {
        let b = batch(&[(Some("a"), b"1"), (Some("b"), b"2"), (Some("a"), b"3"), (None, b"x")], Codec::Zstd);
        let out = rebatch(&b, |i, _| i != 0, false, BatchFormat::Placeholders, LIMIT).unwrap().unwrap();
        let e = parse_entry(&out, true).unwrap();
        assert_eq!(e.metadata.compacted_batch_indexes, vec![1, 2]);
        assert_eq!(e.metadata.num_messages_in_batch, Some(4));
        let msgs = entry_messages(&out, &e, false, LIMIT).unwrap();
        assert_eq!(
            msgs.iter().map(|m| (m.batch_index, m.payload.clone())).collect::<Vec<_>>(),
            [(1, b"2".to_vec()), (2, b"3".to_vec())]
        );
        assert_eq!(last_message_position(&out, LIMIT).unwrap(), (2, 1000));
    }

    #[test]
    fn rebatch_retained_only_is_smaller_and_reads_back_with_real_indexes() {
        let b = batch(&[(Some("a"), b"1"), (Some("b"), b"2"), (Some("c"), b"3")], Codec::None);
        let out = rebatch(&b, |i, _| i == 1, false, BatchFormat::RetainedOnly, LIMIT).unwrap().unwrap();
        let e = parse_entry(&out, true).unwrap();
        let msgs = entry_messages(&out, &e, false, LIMIT).unwrap();
        assert_eq!(msgs.iter().map(|m| m.batch_index).collect::<Vec<_>>(), [1]);
        let recs = compaction_records(&out, LIMIT).unwrap().unwrap();
        assert_eq!(recs.iter().map(|r| r.batch_index).collect::<Vec<_>>(), [1]);
        // placeholders for a retained-only input restore every index
        let again = rebatch(&out, |_, _| true, false, BatchFormat::Placeholders, LIMIT).unwrap().unwrap();
        let e2 = parse_entry(&again, true).unwrap();
        let all = entry_messages(&again, &e2, true, LIMIT).unwrap();
        assert_eq!(
            all.iter().map(|m| (m.batch_index, m.compacted_out)).collect::<Vec<_>>(),
            [(0, true), (1, false), (2, true)]
        );
    }

    #[test]
    fn nothing_kept_drops_the_entry_and_null_keys_follow_retain() {
        let b = batch(&[(Some("a"), b"1"), (None, b"x")], Codec::None);
        assert!(rebatch(&b, |_, _| false, false, BatchFormat::Placeholders, LIMIT).unwrap().is_none());
        let kept = rebatch(&b, |_, _| false, true, BatchFormat::Placeholders, LIMIT).unwrap().unwrap();
        let e = parse_entry(&kept, true).unwrap();
        assert_eq!(e.metadata.compacted_batch_indexes, vec![1]);
    }

    #[test]
    fn broker_entry_metadata_is_kept() {
        let b = batch(&[(Some("a"), b"1"), (Some("b"), b"2")], Codec::Snappy);
        let with_bem = crate::codec::entry::add_broker_entry_metadata(&b, Some(77), Some(9)).unwrap();
        let out = rebatch(&with_bem, |i, _| i == 0, false, BatchFormat::Placeholders, LIMIT).unwrap().unwrap();
        let bem = crate::codec::entry::peek_broker_entry_metadata(&out).unwrap().unwrap();
        assert_eq!((bem.broker_timestamp, bem.index), (Some(77), Some(9)));
    }

    #[test]
    fn phase_two_refuses_a_second_broker_entry_metadata_as_phase_one_does() {
        // a BEM prefix before an entry that carries one already: no reader takes the inner one for headers
        let b = batch(&[(Some("a"), b"1"), (Some("b"), b"2")], Codec::None);
        let once = crate::codec::entry::add_broker_entry_metadata(&b, Some(1), Some(2)).unwrap();
        let mut twice = vec![0x0e, 0x02, 0, 0, 0, 2, 0x10, 0x05];
        twice.extend_from_slice(&once);
        let single =
            encode_single(&MessageMetadata { partition_key: Some("k".into()), ..md() }, b"v", Codec::None, true);
        let once_single = crate::codec::entry::add_broker_entry_metadata(&single.unwrap(), None, Some(3)).unwrap();
        let mut twice_single = twice[..8].to_vec();
        twice_single.extend_from_slice(&once_single);
        let id = MessageIdData { ledger_id: 1, entry_id: 2, ..Default::default() };
        for entry in [&twice, &twice_single] {
            assert!(compaction_records(entry, LIMIT).is_err());
            for kept in [&[0, 1][..], &[-1]] {
                let r = compact_entry(Retained::Indexes(kept), &id, entry, true, BatchFormat::Placeholders, LIMIT);
                assert!(matches!(r, Err(Error::Corrupt { offset: 8, .. })), "{r:?}");
            }
            assert!(last_message_position(entry, LIMIT).is_err());
        }
        assert!(rebatch(&twice, |_, _| true, false, BatchFormat::RetainedOnly, LIMIT).is_err());
        // one prefix is kept as it was
        let out = rebatch(&once, |i, _| i == 1, false, BatchFormat::RetainedOnly, LIMIT).unwrap().unwrap();
        assert_eq!(out[..8], once[..8]);
    }

    #[test]
    fn raw_message_round_trip_and_last_position_of_single_and_encrypted() {
        let id = MessageIdData { ledger_id: 3, entry_id: 4, partition: Some(-1), ..Default::default() };
        let single = encode_single(&md(), b"v", Codec::None, true).unwrap();
        let raw = encode_raw_message(&id, &single).unwrap();
        let (back, entry) = decode_raw_message(&raw).unwrap();
        assert_eq!((back.ledger_id, back.entry_id, entry), (3, 4, single.as_slice()));
        assert_eq!(last_message_position(&single, LIMIT).unwrap().0, -1);
        assert!(decode_raw_message(&raw[..raw.len() - 1]).is_err());
        let mut enc = md();
        enc.num_messages_in_batch = Some(5);
        enc.encryption_keys.push(crate::codec::proto::EncryptionKeys {
            key: "k".into(),
            value: b"v".to_vec().into(),
            ..Default::default()
        });
        let e = encode_metadata_and_payload(&enc.encode_to_vec(), b"opaque", true).unwrap();
        assert_eq!(last_message_position(&e, LIMIT).unwrap().0, 4);
        let recs = compaction_records(&e, LIMIT).unwrap().unwrap();
        assert_eq!(recs[0].batch_index, -1); // an encrypted batch is one unit
    }
}
