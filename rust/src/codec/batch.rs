//! Batch payloads: `num_messages_in_batch` records of `[u32 size][SingleMessageMetadata][payload]`,
//! the whole concatenation compressed together. Also the entry-to-messages decoding of a consumer.
use crate::codec::compression::{self, Codec};
use crate::codec::entry::{parse_layout, EntryLayout};
use crate::codec::proto::{KeyValue, MessageMetadata, SingleMessageMetadata};
use crate::codec::wire::Reader;
use crate::error::{Error, Result};
use prost::Message as _;
use std::ops::Range;

/// One record of a batch: its metadata and where its payload lies in the uncompressed batch.
#[derive(Debug, Clone)]
pub struct BatchRecord {
    pub metadata: SingleMessageMetadata,
    pub payload: Range<usize>,
}

/// Splits an uncompressed batch into exactly `num_messages` records. Missing records, negative
/// sizes and trailing bytes are all corruption: nothing is dropped silently.
pub fn decode_batch(batch: &[u8], num_messages: i32) -> Result<Vec<BatchRecord>> {
    if num_messages < 0 {
        return Err(Error::corrupt(0, format!("negative num_messages_in_batch {num_messages}")));
    }
    // Each record needs at least 4 + 2 bytes, so the count is bounded by the input before allocating.
    let mut out = Vec::with_capacity((num_messages as usize).min(batch.len() / 6 + 1));
    let mut r = Reader::new(batch);
    for i in 0..num_messages {
        let size_at = r.pos();
        let md_range = r.len_prefixed("single message metadata").map_err(|e| annotate(e, i, num_messages))?;
        let md_bytes = &batch[md_range.clone()];
        let metadata = SingleMessageMetadata::decode(md_bytes).map_err(|e| {
            Error::corrupt(md_range.start, format!("message {i} of the batch: invalid SingleMessageMetadata: {e}"))
        })?;
        // prost cannot tell a missing required field from a zero; Java rejects the record.
        if !has_field(md_bytes, 3) {
            return Err(Error::corrupt(
                md_range.start,
                format!("message {i} of the batch: SingleMessageMetadata lacks required payload_size"),
            ));
        }
        if metadata.payload_size < 0 {
            return Err(Error::corrupt(
                size_at,
                format!("message {i} of the batch has negative payload_size {}", metadata.payload_size),
            ));
        }
        let payload = r
            .range(metadata.payload_size as usize, "batched message payload")
            .map_err(|e| annotate(e, i, num_messages))?;
        out.push(BatchRecord { metadata, payload });
    }
    if r.remaining() != 0 {
        return Err(Error::corrupt(
            r.pos(),
            format!("{} bytes follow the last of {num_messages} batched messages", r.remaining()),
        ));
    }
    Ok(out)
}

/// The records of a batch with their real batch indexes: every record (compacted-out placeholders
/// included), or, for a PIP-429 batch holding only retained messages, those with the indexes listed
/// in `compacted_batch_indexes`. A corrupt record is reported at the entry's payload (the batch is
/// no slice of the entry once decompressed), naming its byte in the uncompressed batch.
pub fn indexed_batch_records(body: &[u8], e: &ParsedEntry) -> Result<Vec<(i32, BatchRecord)>> {
    records_of_body(body, e).map_err(|err| match err {
        Error::Corrupt { offset, what } => Error::Corrupt {
            offset: e.layout.payload.start as u64,
            what: format!("in the uncompressed batch at byte {offset}: {what}"),
        },
        other => other,
    })
}

fn records_of_body(body: &[u8], e: &ParsedEntry) -> Result<Vec<(i32, BatchRecord)>> {
    let md = &e.metadata;
    let n = md.num_messages_in_batch.unwrap_or(1);
    let retained = &md.compacted_batch_indexes;
    if retained.is_empty() || retained.len() as i64 == i64::from(n) {
        return Ok(decode_batch(body, n)?.into_iter().enumerate().map(|(i, r)| (i as i32, r)).collect());
    }
    // Fewer indexes than messages: either every record is still there (placeholders, pulsarkit's
    // default output) or only the retained ones are (the PIP's smaller format). The bytes decide.
    match decode_batch(body, n) {
        Ok(all) => Ok(all.into_iter().enumerate().map(|(i, r)| (i as i32, r)).collect()),
        Err(_) => {
            let recs = decode_batch(body, retained.len() as i32)?;
            let mut prev = -1;
            for &i in retained {
                if i < 0 || i >= n {
                    return Err(Error::corrupt(
                        e.layout.metadata.start,
                        format!("compacted_batch_indexes holds {i}, outside a batch of {n}"),
                    ));
                }
                // phase two lists what it kept in batch order: a repeat or a step back names no message
                if i <= prev {
                    return Err(Error::corrupt(
                        e.layout.metadata.start,
                        format!("compacted_batch_indexes holds {i} after {prev}: not strictly increasing"),
                    ));
                }
                prev = i;
            }
            Ok(retained.iter().copied().zip(recs).collect())
        }
    }
}

fn has_field(buf: &[u8], number: u32) -> bool {
    let mut found = false;
    let _ = crate::codec::wire::walk_fields(buf, |f, _| {
        found |= f == number;
        Ok(())
    });
    found
}

fn annotate(e: Error, i: i32, n: i32) -> Error {
    match e {
        Error::Corrupt { offset, what } => {
            Error::Corrupt { offset, what: format!("message {i} of {n} in the batch: {what}") }
        }
        other => other,
    }
}

/// Appends one record, as `Commands.serializeSingleMessageInBatchWithPayload` does (it sets payload_size).
pub fn append_record(batch: &mut Vec<u8>, metadata: &SingleMessageMetadata, payload: &[u8]) -> Result<()> {
    let mut md = metadata.clone();
    md.payload_size = i32::try_from(payload.len()).map_err(|_| Error::InvalidArgument("payload over 2 GiB".into()))?;
    let len = md.encoded_len();
    batch.reserve(4 + len + payload.len());
    batch.extend_from_slice(&(len as u32).to_be_bytes());
    md.encode(batch).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    batch.extend_from_slice(payload);
    Ok(())
}

/// A message as a consumer sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecodedMessage {
    pub batch_index: i32,
    pub payload: Vec<u8>,
    pub key: Option<String>,
    pub partition_key_b64_encoded: bool,
    pub ordering_key: Option<Vec<u8>>,
    pub properties: Vec<(String, String)>,
    pub event_time: Option<u64>,
    pub sequence_id: u64,
    pub null_value: bool,
    pub null_partition_key: bool,
    pub compacted_out: bool,
}

/// A parsed entry: layout and full MessageMetadata.
#[derive(Debug, Clone)]
pub struct ParsedEntry {
    pub layout: EntryLayout,
    pub metadata: MessageMetadata,
}

pub fn parse_entry(data: &[u8], verify_checksum: bool) -> Result<ParsedEntry> {
    let layout = parse_layout(data)?;
    if verify_checksum {
        layout.verify_checksum(data)?;
    }
    let md = &data[layout.metadata.clone()];
    // prost fills absent required fields with defaults; hold every reader to the scan's checks
    // (required fields, wire types) so explode/messages agree with Entry.parse and decode_metadata.
    crate::codec::metascan::scan_metadata(md).map_err(|e| e.shifted(layout.metadata.start))?;
    let metadata = decode_message_metadata(md, layout.metadata.start)?;
    Ok(ParsedEntry { layout, metadata })
}

pub fn decode_message_metadata(bytes: &[u8], base: usize) -> Result<MessageMetadata> {
    MessageMetadata::decode(bytes).map_err(|e| Error::corrupt(base, format!("invalid MessageMetadata: {e}")))
}

fn props(kvs: &[KeyValue]) -> Vec<(String, String)> {
    kvs.iter().map(|kv| (kv.key.clone(), kv.value.clone())).collect()
}

fn nonzero(v: Option<u64>) -> Option<u64> {
    v.filter(|&t| t != 0)
}

/// The uncompressed payload of an entry (a whole batch for batched entries).
pub fn uncompressed_payload(data: &[u8], e: &ParsedEntry, limit: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    uncompressed_payload_into(data, e, limit, &mut out)?;
    Ok(out)
}

fn uncompressed_payload_into(data: &[u8], e: &ParsedEntry, limit: usize, out: &mut Vec<u8>) -> Result<()> {
    let codec = Codec::from_wire(e.metadata.compression.unwrap_or(0))?;
    let size = e.metadata.uncompressed_size.unwrap_or(0) as usize;
    compression::decompress_into(codec, &data[e.layout.payload.clone()], size, limit, out).map_err(|err| match err {
        Error::Decompression { codec, what } => {
            Error::Decompression { codec, what: format!("{what} (payload at offset {})", e.layout.payload.start) }
        }
        other => other,
    })
}

/// Decodes an entry into the messages a consumer would receive. Batched messages marked
/// `compacted_out` are dropped unless `include_compacted_out`, as `ConsumerImpl` does.
pub fn entry_messages(
    data: &[u8],
    e: &ParsedEntry,
    include_compacted_out: bool,
    limit: usize,
) -> Result<Vec<DecodedMessage>> {
    let md = &e.metadata;
    let body = uncompressed_payload(data, e, limit)?;
    if md.num_messages_in_batch.is_none() {
        return Ok(vec![DecodedMessage {
            batch_index: -1,
            payload: body,
            key: md.partition_key.clone(),
            partition_key_b64_encoded: md.partition_key_b64_encoded.unwrap_or(false),
            ordering_key: md.ordering_key.as_ref().map(|b| b.to_vec()),
            properties: props(&md.properties),
            event_time: nonzero(md.event_time),
            sequence_id: md.sequence_id,
            null_value: md.null_value.unwrap_or(false),
            null_partition_key: md.null_partition_key.unwrap_or(false),
            compacted_out: false,
        }]);
    }
    let records = indexed_batch_records(&body, e)?;
    let mut out = Vec::with_capacity(records.len());
    for (i, rec) in records {
        let s = rec.metadata;
        let compacted_out = s.compacted_out.unwrap_or(false);
        if compacted_out && !include_compacted_out {
            continue;
        }
        out.push(DecodedMessage {
            batch_index: i,
            payload: body[rec.payload].to_vec(),
            key: s.partition_key,
            partition_key_b64_encoded: s.partition_key_b64_encoded.unwrap_or(false),
            ordering_key: s.ordering_key.map(|b| b.to_vec()),
            properties: props(&s.properties),
            // MessageImpl.create: a message without its own event time keeps the entry's (the key is cleared)
            event_time: nonzero(s.event_time.or(md.event_time)),
            sequence_id: s.sequence_id.unwrap_or(md.sequence_id),
            null_value: s.null_value.unwrap_or(false),
            null_partition_key: s.null_partition_key.unwrap_or(false),
            compacted_out,
        });
    }
    Ok(out)
}

/// A batch record as borrowed ranges of the uncompressed body: what [`scan_batch_refs`] gives the
/// bulk kernels so they copy each byte once, straight into Arrow buffers.
#[derive(Debug, Clone, Default)]
pub struct RecordRef {
    pub payload: Range<usize>,
    pub key: Option<Range<usize>>,
    pub ordering_key: Option<Range<usize>>,
    /// Indexes into the property ranges vector the scan filled.
    pub properties: Range<usize>,
    pub event_time: Option<u64>,
    pub sequence_id: Option<u64>,
    pub null_value: bool,
    pub compacted_out: bool,
}

/// The entry's payload with codecs undone: borrowed from `data` when there is nothing to undo, else
/// decompressed into `scratch` (reused from entry to entry).
pub fn payload_body<'a>(data: &'a [u8], e: &ParsedEntry, limit: usize, scratch: &'a mut Vec<u8>) -> Result<&'a [u8]> {
    if e.metadata.compression.unwrap_or(0) == 0 {
        let body = &data[e.layout.payload.clone()];
        // The same limit the copying path applies (compression::decompress on NONE).
        if body.len() > limit {
            return Err(Error::LimitExceeded {
                what: "uncompressed payload".into(),
                size: body.len() as u64,
                limit: limit as u64,
            });
        }
        return Ok(body);
    }
    uncompressed_payload_into(data, e, limit, scratch)?;
    Ok(scratch)
}

/// Splits an uncompressed batch of `n` records into borrowed ranges without allocating per record.
/// Returns false for anything but the canonical encoding Pulsar's producers write (unknown fields,
/// unexpected wire types, invalid UTF-8, a bool other than 0/1, missing or negative sizes, trailing
/// bytes...): the caller then decodes the entry with [`entry_messages`], which gives the exact
/// result or error. So this never changes what a batch decodes to, only how fast.
pub fn scan_batch_refs(
    body: &[u8],
    n: i32,
    recs: &mut Vec<RecordRef>,
    props: &mut Vec<(Range<usize>, Range<usize>)>,
) -> bool {
    recs.clear();
    props.clear();
    if n < 0 {
        return false;
    }
    let mut pos = 0usize;
    for _ in 0..n {
        let Some(size) = body.get(pos..pos + 4) else { return false };
        let size = u32::from_be_bytes(size.try_into().unwrap()) as usize;
        let start = pos + 4;
        let Some(end) = start.checked_add(size).filter(|&e| e <= body.len()) else { return false };
        let Some(mut rec) = scan_single_metadata(body, start, end, props) else { return false };
        let Some(pend) = end.checked_add(rec.payload.end).filter(|&e| e <= body.len()) else { return false };
        rec.payload = end..pend;
        recs.push(rec);
        pos = pend;
    }
    pos == body.len()
}

/// `SingleMessageMetadata` in `body[start..end]`; `payload` comes back as `0..payload_size`.
#[inline]
fn scan_single_metadata(
    body: &[u8],
    start: usize,
    end: usize,
    props: &mut Vec<(Range<usize>, Range<usize>)>,
) -> Option<RecordRef> {
    let buf = &body[..end];
    let mut pos = start;
    let mut rec = RecordRef { properties: props.len()..props.len(), ..Default::default() };
    let mut payload_size: Option<usize> = None;
    let varint = |pos: &mut usize| strict_varint(buf, pos);
    let bool_of = |v: u64| if v <= 1 { Some(v == 1) } else { None };
    while pos < end {
        let key = varint(&mut pos)?;
        let (field, wire) = (key >> 3, key & 7);
        match (field, wire) {
            (1, 2) => {
                let r = len_delimited(buf, &mut pos)?;
                props.push(scan_key_value(buf, r)?);
            }
            (2, 2) => rec.key = Some(utf8_range(buf, len_delimited(buf, &mut pos)?)?),
            (3, 0) => {
                let v = varint(&mut pos)?;
                payload_size = Some(usize::try_from(v).ok().filter(|&s| s <= i32::MAX as usize)?);
            }
            (4, 0) => rec.compacted_out = bool_of(varint(&mut pos)?)?,
            (5, 0) => rec.event_time = Some(varint(&mut pos)?),
            (6, 0) | (10, 0) => {
                bool_of(varint(&mut pos)?)?;
            }
            (7, 2) => rec.ordering_key = Some(len_delimited(buf, &mut pos)?),
            (8, 0) => rec.sequence_id = Some(varint(&mut pos)?),
            (9, 0) => rec.null_value = bool_of(varint(&mut pos)?)?,
            _ => return None,
        }
    }
    rec.properties.end = props.len();
    rec.payload = 0..payload_size?;
    Some(rec)
}

/// A varint as prost reads it; None where prost would refuse it (a tenth byte above 1 overflows
/// 64 bits), so the slow path reports the error.
#[inline(always)]
fn strict_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let b = *buf.get(*pos)?;
    if b < 0x80 {
        *pos += 1;
        return Some(u64::from(b));
    }
    let mut v: u64 = 0;
    for i in 0..10 {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if i == 9 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

#[inline(always)]
fn len_delimited(buf: &[u8], pos: &mut usize) -> Option<Range<usize>> {
    let len = usize::try_from(strict_varint(buf, pos)?).ok()?;
    let start = *pos;
    let end = start.checked_add(len).filter(|&e| e <= buf.len())?;
    *pos = end;
    Some(start..end)
}

#[inline]
fn utf8_range(buf: &[u8], r: Range<usize>) -> Option<Range<usize>> {
    std::str::from_utf8(&buf[r.clone()]).ok().map(|_| r)
}

/// A `KeyValue` with exactly its two required strings, once each (anything else: the slow path).
#[inline]
fn scan_key_value(buf: &[u8], r: Range<usize>) -> Option<(Range<usize>, Range<usize>)> {
    let sub = &buf[..r.end];
    let mut pos = r.start;
    let (mut k, mut v) = (None, None);
    while pos < r.end {
        let key = strict_varint(sub, &mut pos)?;
        let slot = match key {
            0x0a if k.is_none() => &mut k,
            0x12 if v.is_none() => &mut v,
            _ => return None,
        };
        *slot = Some(utf8_range(sub, len_delimited(sub, &mut pos)?)?);
    }
    Some((k?, v?))
}

/// Builds a batched entry as the Java producer does: records concatenated, compressed together,
/// `num_messages_in_batch`, `uncompressed_size` and (only when compressing) `compression` set.
pub fn encode_batch(
    metadata: &MessageMetadata,
    messages: &[(SingleMessageMetadata, &[u8])],
    codec: Codec,
    checksum: bool,
) -> Result<Vec<u8>> {
    let mut batch = Vec::new();
    for (smm, payload) in messages {
        append_record(&mut batch, smm, payload)?;
    }
    let mut md = metadata.clone();
    md.num_messages_in_batch =
        Some(i32::try_from(messages.len()).map_err(|_| Error::InvalidArgument("too many messages".into()))?);
    md.uncompressed_size =
        Some(u32::try_from(batch.len()).map_err(|_| Error::InvalidArgument("batch over 4 GiB".into()))?);
    md.compression = if codec == Codec::None { None } else { Some(codec as i32) };
    let body = compression::compress(codec, &batch)?;
    crate::codec::entry::encode_metadata_and_payload(&md.encode_to_vec(), &body, checksum)
}

/// Builds a single (non-batched) entry; compresses the payload when `codec` is not NONE.
pub fn encode_single(metadata: &MessageMetadata, payload: &[u8], codec: Codec, checksum: bool) -> Result<Vec<u8>> {
    let mut md = metadata.clone();
    md.uncompressed_size =
        Some(u32::try_from(payload.len()).map_err(|_| Error::InvalidArgument("payload over 4 GiB".into()))?);
    md.compression = if codec == Codec::None { None } else { Some(codec as i32) };
    let body = compression::compress(codec, payload)?;
    crate::codec::entry::encode_metadata_and_payload(&md.encode_to_vec(), &body, checksum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::compression::DEFAULT_DECOMPRESSION_LIMIT;

    fn md() -> MessageMetadata {
        MessageMetadata { producer_name: "p".into(), sequence_id: 7, publish_time: 1000, ..Default::default() }
    }

    #[test]
    fn batch_round_trip_every_codec() {
        let payloads: Vec<Vec<u8>> = (0..10).map(|i| vec![i as u8; i * 3]).collect();
        let msgs: Vec<(SingleMessageMetadata, &[u8])> = payloads
            .iter()
            .enumerate()
            .map(|(i, p)| {
                (
                    SingleMessageMetadata {
                        sequence_id: Some(7 + i as u64),
                        partition_key: Some(format!("k{i}")),
                        ..Default::default()
                    },
                    &p[..],
                )
            })
            .collect();
        for c in Codec::ALL {
            let e = encode_batch(&md(), &msgs, c, true).unwrap();
            let p = parse_entry(&e, true).unwrap();
            let m = entry_messages(&e, &p, false, DEFAULT_DECOMPRESSION_LIMIT).unwrap();
            assert_eq!(m.len(), 10);
            for (i, msg) in m.iter().enumerate() {
                assert_eq!(msg.payload, payloads[i]);
                assert_eq!(msg.batch_index, i as i32);
                assert_eq!(msg.sequence_id, 7 + i as u64);
                assert_eq!(msg.key.as_deref(), Some(format!("k{i}").as_str()));
            }
        }
    }

    #[test]
    fn record_without_payload_size_is_an_error() {
        // [u32 0][empty SingleMessageMetadata]: decodes in prost as payload_size 0, Java rejects it.
        let e = decode_batch(&[0, 0, 0, 0], 1).unwrap_err();
        assert!(e.to_string().contains("payload_size"), "{e}");
    }

    #[test]
    fn trailing_bytes_and_missing_records_are_errors() {
        let mut b = Vec::new();
        append_record(&mut b, &SingleMessageMetadata::default(), b"abc").unwrap();
        assert!(decode_batch(&b, 2).is_err());
        b.push(0);
        let e = decode_batch(&b, 1).unwrap_err();
        assert_eq!(e.offset(), Some((b.len() - 1) as u64));
        assert!(decode_batch(&b, -1).is_err());
    }
}
