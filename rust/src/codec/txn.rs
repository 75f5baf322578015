//! Pulsar's transaction logs as stored in ledgers (PIP-160): the coordinator's log and the
//! pending-ack stores. An entry is either one record, or `0E 01 00 01` followed by a `Batched...Entry`
//! whose field 1 repeats the records. Records are read with the bounds-checked walker so every error
//! carries the offset of the bad byte within the entry.
use crate::codec::wire::{read_varint, walk_fields, Value};
use crate::error::{Error, Result};
use std::ops::Range;

/// The first short of a batched entry (`TxnLogBufferedWriter.BATCHED_ENTRY_DATA_PREFIX_MAGIC_NUMBER`).
pub const BATCHED_ENTRY_MAGIC: u16 = 0x0e01;
/// The only batched-entry version Pulsar writes.
pub const BATCHED_ENTRY_VERSION: u16 = 0x0001;
/// Bytes before the batch protobuf.
pub const BATCHED_ENTRY_PREFIX_LEN: usize = 4;

/// Where the records of one entry are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnLogEntry {
    /// True for a PIP-160 batch (even a batch of one record).
    pub batched: bool,
    /// Byte ranges of the records within the entry.
    pub records: Vec<Range<usize>>,
}

/// Splits an entry into its records. Pulsar itself never checks the version short; a version
/// other than 1 is reported rather than guessed at, since its layout would be unknown.
pub fn split_entry(data: &[u8]) -> Result<TxnLogEntry> {
    if data.len() < 2 || u16::from_be_bytes([data[0], data[1]]) != BATCHED_ENTRY_MAGIC {
        #[allow(clippy::single_range_in_vec_init)] // one record spanning the whole entry, not a range of them
        return Ok(TxnLogEntry { batched: false, records: vec![0..data.len()] });
    }
    if data.len() < BATCHED_ENTRY_PREFIX_LEN {
        return Err(Error::corrupt(2, "batched transaction-log entry: expected a 2-byte version after 0x0e01"));
    }
    let version = u16::from_be_bytes([data[2], data[3]]);
    if version != BATCHED_ENTRY_VERSION {
        return Err(Error::corrupt(2, format!("batched transaction-log entry version {version}, expected 1")));
    }
    let body = &data[BATCHED_ENTRY_PREFIX_LEN..];
    let mut records = Vec::new();
    walk_fields(body, |field, v| {
        match (field, v) {
            (1, Value::Bytes(r)) => records.push(r.start + BATCHED_ENTRY_PREFIX_LEN..r.end + BATCHED_ENTRY_PREFIX_LEN),
            (1, _) => return Err(Error::corrupt(0, "batched entry field 1 is not length-delimited")),
            _ => {} // unknown fields are skipped, as protobuf does
        }
        Ok(())
    })
    .map_err(|e| e.shifted(BATCHED_ENTRY_PREFIX_LEN))?;
    Ok(TxnLogEntry { batched: true, records })
}

/// Writes `0E 01 00 01` and the `Batched...Entry` of already serialized records (`TxnLogBufferedWriter.doFlush`).
pub fn pack_batched_entry<'a>(records: impl IntoIterator<Item = &'a [u8]>, out: &mut Vec<u8>) {
    out.extend_from_slice(&BATCHED_ENTRY_MAGIC.to_be_bytes());
    out.extend_from_slice(&BATCHED_ENTRY_VERSION.to_be_bytes());
    for r in records {
        out.push(0x0a); // field 1, length-delimited
        put_varint(out, r.len() as u64);
        out.extend_from_slice(r);
    }
}

/// The size `pack_batched_entry` will write, so callers can allocate once.
pub fn batched_entry_size<'a>(records: impl IntoIterator<Item = &'a [u8]>) -> usize {
    BATCHED_ENTRY_PREFIX_LEN + records.into_iter().map(|r| 1 + varint_len(r.len() as u64) + r.len()).sum::<usize>()
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// One `TransactionMetadataEntry`; string fields are byte ranges of the record, checked as UTF-8.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxnMetadataRecord {
    pub op: Option<i32>,
    pub txnid_least_bits: u64,
    pub txnid_most_bits: u64,
    pub expected_status: Option<i32>,
    pub new_status: Option<i32>,
    pub partitions: Vec<Range<usize>>,
    /// (topic, subscription)
    pub subscriptions: Vec<(Range<usize>, Range<usize>)>,
    pub timeout_ms: Option<u64>,
    pub start_time: Option<u64>,
    pub last_modification_time: Option<u64>,
    pub max_local_txn_id: Option<u64>,
    pub owner: Option<Range<usize>>,
    pub is_timeout: Option<bool>,
}

fn utf8_range(buf: &[u8], r: Range<usize>, field: &str) -> Result<Range<usize>> {
    std::str::from_utf8(&buf[r.clone()])
        .map_err(|e| Error::corrupt(r.start + e.valid_up_to(), format!("{field} is not valid UTF-8")))?;
    Ok(r)
}

fn wrong(message: &str, field: u32) -> Error {
    Error::corrupt(0, format!("{message} field {field} has the wrong wire type"))
}

/// Decodes a `TransactionMetadataEntry` (ranges are relative to `buf`).
pub fn decode_txn_metadata(buf: &[u8]) -> Result<TxnMetadataRecord> {
    const M: &str = "TransactionMetadataEntry";
    let mut r = TxnMetadataRecord::default();
    // The visitor only collects; nested messages and strings are checked after the walk, where
    // their offsets are absolute (the walker makes visitor errors relative to the field's key).
    let mut subs = Vec::new();
    walk_fields(buf, |field, v| {
        match (field, v) {
            (1, Value::Varint(x)) => r.op = Some(x as i32),
            (2, Value::Varint(x)) => r.txnid_least_bits = x,
            (3, Value::Varint(x)) => r.txnid_most_bits = x,
            (4, Value::Varint(x)) => r.expected_status = Some(x as i32),
            (5, Value::Varint(x)) => r.new_status = Some(x as i32),
            (6, Value::Bytes(b)) => r.partitions.push(b),
            (7, Value::Bytes(b)) => subs.push(b),
            (8, Value::Varint(x)) => r.timeout_ms = Some(x),
            (9, Value::Varint(x)) => r.start_time = Some(x),
            (10, Value::Varint(x)) => r.last_modification_time = Some(x),
            (11, Value::Varint(x)) => r.max_local_txn_id = Some(x),
            (12, Value::Bytes(b)) => r.owner = Some(b),
            (13, Value::Varint(x)) => r.is_timeout = Some(x != 0),
            (1..=13, _) => return Err(wrong(M, field)),
            _ => {}
        }
        Ok(())
    })?;
    for p in &r.partitions {
        utf8_range(buf, p.clone(), "partition")?;
    }
    if let Some(o) = &r.owner {
        utf8_range(buf, o.clone(), "owner")?;
    }
    for b in subs {
        let (mut topic, mut name) = (None, None);
        walk_fields(&buf[b.clone()], |f, v| {
            match (f, v) {
                (1, Value::Bytes(x)) => topic = Some(x),
                (2, Value::Bytes(x)) => name = Some(x),
                (1 | 2, _) => return Err(wrong("Subscription", f)),
                _ => {}
            }
            Ok(())
        })
        .map_err(|e| e.shifted(b.start))?;
        let (Some(t), Some(s)) = (topic, name) else {
            return Err(Error::corrupt(b.start, "Subscription lacks its required topic or subscription"));
        };
        let t = utf8_range(buf, t.start + b.start..t.end + b.start, "subscription topic")?;
        let s = utf8_range(buf, s.start + b.start..s.end + b.start, "subscription name")?;
        r.subscriptions.push((t, s));
    }
    Ok(r)
}

/// One `PendingAckMetadata`: a position acked in a transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingAckPosition {
    pub ledger_id: u64,
    pub entry_id: u64,
    pub ack_set: Vec<i64>,
    pub batch_size: Option<i32>,
}

/// One `PendingAckMetadataEntry`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingAckRecord {
    pub op: Option<i32>,
    pub ack_type: Option<i32>,
    pub txnid_least_bits: Option<u64>,
    pub txnid_most_bits: Option<u64>,
    pub positions: Vec<PendingAckPosition>,
}

/// Decodes a `PendingAckMetadataEntry`.
pub fn decode_pending_ack(buf: &[u8]) -> Result<PendingAckRecord> {
    const M: &str = "PendingAckMetadataEntry";
    let mut r = PendingAckRecord::default();
    let mut positions = Vec::new();
    walk_fields(buf, |field, v| {
        match (field, v) {
            (1, Value::Varint(x)) => r.op = Some(x as i32),
            (2, Value::Varint(x)) => r.ack_type = Some(x as i32),
            (3, Value::Varint(x)) => r.txnid_least_bits = Some(x),
            (4, Value::Varint(x)) => r.txnid_most_bits = Some(x),
            (5, Value::Bytes(b)) => positions.push(b),
            (1..=5, _) => return Err(wrong(M, field)),
            _ => {}
        }
        Ok(())
    })?;
    for b in positions {
        r.positions.push(decode_pending_ack_position(&buf[b.clone()]).map_err(|e| e.shifted(b.start))?);
    }
    Ok(r)
}

fn decode_pending_ack_position(buf: &[u8]) -> Result<PendingAckPosition> {
    let (mut ledger, mut entry) = (None, None);
    let mut p = PendingAckPosition::default();
    let mut packed = Vec::new();
    walk_fields(buf, |field, v| {
        match (field, v) {
            (1, Value::Varint(x)) => ledger = Some(x),
            (2, Value::Varint(x)) => entry = Some(x),
            (3, Value::Varint(x)) => p.ack_set.push(x as i64),
            // A packed encoding is accepted too, as every protobuf parser does.
            (3, Value::Bytes(b)) => packed.push(b),
            (4, Value::Varint(x)) => p.batch_size = Some(x as i32),
            (1..=4, _) => return Err(wrong("PendingAckMetadata", field)),
            _ => {}
        }
        Ok(())
    })?;
    for b in packed {
        let run = &buf[b.clone()];
        let mut pos = 0;
        while pos < run.len() {
            p.ack_set.push(read_varint(run, &mut pos).map_err(|e| e.shifted(b.start))? as i64);
        }
    }
    match (ledger, entry) {
        (Some(l), Some(e)) => {
            p.ledger_id = l;
            p.entry_id = e;
            Ok(p)
        }
        _ => Err(Error::corrupt(0, "PendingAckMetadata lacks its required ledgerId or entryId")),
    }
}

/// Name of a `TransactionMetadataOp`.
pub fn txn_op_name(op: i32) -> Option<&'static str> {
    ["NEW", "ADD_PARTITION", "ADD_SUBSCRIPTION", "UPDATE"].get(usize::try_from(op).ok()?).copied()
}

/// Name of a `TxnStatus`.
pub fn txn_status_name(s: i32) -> Option<&'static str> {
    ["OPEN", "COMMITTING", "COMMITTED", "ABORTING", "ABORTED"].get(usize::try_from(s).ok()?).copied()
}

/// Name of a `PendingAckOp`.
pub fn pending_ack_op_name(op: i32) -> Option<&'static str> {
    match op {
        1 => Some("ACK"),
        2 => Some("COMMIT"),
        3 => Some("ABORT"),
        _ => None,
    }
}

/// Name of a `CommandAck.AckType`.
pub fn ack_type_name(t: i32) -> Option<&'static str> {
    match t {
        0 => Some("Individual"),
        1 => Some("Cumulative"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::proto::{Subscription, TransactionMetadataEntry};
    use prost::Message;

    fn record(i: u64) -> Vec<u8> {
        TransactionMetadataEntry {
            metadata_op: Some(1),
            txnid_least_bits: Some(i),
            txnid_most_bits: Some(7),
            partitions: vec![format!("persistent://t/n/p{i}")],
            subscriptions: vec![Subscription { topic: "t".into(), subscription: "s".into() }],
            timeout_ms: Some(60_000),
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn batched_entry_round_trips_and_starts_with_the_prefix() {
        let recs: Vec<Vec<u8>> = (0..3).map(record).collect();
        let mut out = Vec::new();
        pack_batched_entry(recs.iter().map(Vec::as_slice), &mut out);
        assert_eq!(&out[..4], &[0x0e, 0x01, 0x00, 0x01]);
        assert_eq!(out.len(), batched_entry_size(recs.iter().map(Vec::as_slice)));
        let e = split_entry(&out).unwrap();
        assert!(e.batched);
        let back: Vec<&[u8]> = e.records.iter().map(|r| &out[r.clone()]).collect();
        assert_eq!(back, recs.iter().map(Vec::as_slice).collect::<Vec<_>>());
        let d = decode_txn_metadata(back[2]).unwrap();
        assert_eq!((d.txnid_most_bits, d.txnid_least_bits, d.op), (7, 2, Some(1)));
        assert_eq!(&back[2][d.partitions[0].clone()], b"persistent://t/n/p2");
    }

    #[test]
    fn a_plain_entry_is_one_record() {
        let r = record(5);
        let e = split_entry(&r).unwrap();
        assert!(!e.batched);
        assert_eq!(e.records, vec![0..r.len()]);
    }

    #[test]
    fn an_unknown_version_is_reported_not_guessed() {
        let e = split_entry(&[0x0e, 0x01, 0x00, 0x02, 0x0a, 0x00]).unwrap_err();
        assert_eq!(e.offset(), Some(2));
        assert!(e.to_string().contains("version 2"));
        assert!(split_entry(&[0x0e, 0x01, 0x00]).is_err());
    }

    #[test]
    fn errors_point_into_the_entry() {
        // batch with one record declaring 9 bytes but holding 1
        let e = split_entry(&[0x0e, 0x01, 0x00, 0x01, 0x0a, 0x09, 0x08]).unwrap_err();
        assert_eq!(e.offset(), Some(5));
    }

    #[test]
    fn pending_ack_accepts_packed_and_unpacked_ack_sets_and_checks_required_fields() {
        let entry = crate::fuzz::pending_ack_entry((1, 3), (10, 4), vec![-1, 5], 70);
        let d = decode_pending_ack(&entry.encode_to_vec()).unwrap();
        assert_eq!(d.positions[0].ack_set, vec![-1, 5]);
        assert_eq!(d.positions[0].batch_size, Some(70));
        // packed: field 3 as one length-delimited run
        let packed = [0x2a, 0x07, 0x08, 0x0a, 0x10, 0x04, 0x1a, 0x01, 0x05];
        assert_eq!(decode_pending_ack(&packed).unwrap().positions[0].ack_set, vec![5]);
        // ledgerId without entryId
        let e = decode_pending_ack(&[0x2a, 0x02, 0x08, 0x0a]).unwrap_err();
        assert!(e.to_string().contains("required"), "{e}");
        assert_eq!(e.offset(), Some(2));
    }

    #[test]
    fn varint_len_matches_encoding() {
        for v in [0u64, 1, 127, 128, 16383, 16384, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v), "{v}");
        }
    }
}
