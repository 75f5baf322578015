//! The layout of a stored entry (a SEND's headersAndPayload, optionally prefixed with broker entry
//! metadata), checksum verification, and the broker entry metadata operations of PIP-70.
//!
//! ```text
//! [0x0e02][u32 bem_size][BrokerEntryMetadata]   optional
//! [0x0e01][u32 crc32c]                           optional; covers everything after it
//! [u32 metadata_size][MessageMetadata][payload]
//! ```
use crate::codec::crc::{crc32c, crc32c_resume};
use crate::codec::proto::BrokerEntryMetadata;
use crate::codec::wire::{expect_field, walk_fields_from, Reader, Value};
use crate::error::{Error, Result};
use prost::Message as _;
use std::ops::Range;

pub const MAGIC_CRC32C: u16 = 0x0e01;
pub const MAGIC_BROKER_ENTRY_METADATA: u16 = 0x0e02;
pub const CHECKSUM_SIZE: usize = 4;
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 5 * 1024 * 1024;
pub const MESSAGE_SIZE_FRAME_PADDING: usize = 10 * 1024;

/// Where each part of an entry lies. All ranges index the entry bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryLayout {
    /// The BrokerEntryMetadata protobuf bytes, without the magic and size.
    pub broker_entry_metadata: Option<Range<usize>>,
    /// Offset of the first byte after the broker entry metadata (where the client's bytes start).
    pub headers_start: usize,
    /// The stored client checksum, if the 0x0e01 magic is present.
    pub checksum: Option<u32>,
    /// Offset where the bytes covered by the checksum start (the metadata size field).
    pub checksummed_start: usize,
    pub metadata: Range<usize>,
    pub payload: Range<usize>,
}

impl EntryLayout {
    /// Checks the stored checksum. `Ok(None)` when the entry carries none.
    pub fn verify_checksum(&self, data: &[u8]) -> Result<Option<u32>> {
        let Some(stored) = self.checksum else { return Ok(None) };
        let computed = crc32c(&data[self.checksummed_start..]);
        if computed != stored {
            return Err(Error::ChecksumMismatch {
                offset: (self.checksummed_start - CHECKSUM_SIZE) as u64,
                stored,
                computed,
            });
        }
        Ok(Some(stored))
    }
}

/// Locates the broker entry metadata prefix, if any: (protobuf range, offset after it).
pub fn locate_broker_entry_metadata(data: &[u8]) -> Result<(Option<Range<usize>>, usize)> {
    let mut r = Reader::new(data);
    if r.peek_u16() != Some(MAGIC_BROKER_ENTRY_METADATA) {
        return Ok((None, 0));
    }
    r.u16("broker entry metadata magic")?;
    let range = r.len_prefixed("broker entry metadata")?;
    Ok((Some(range), r.pos()))
}

/// Parses the framing of an entry without decoding MessageMetadata.
#[inline]
pub fn parse_layout(data: &[u8]) -> Result<EntryLayout> {
    match layout_fast(data) {
        Some(l) => Ok(l),
        None => parse_layout_general(data),
    }
}

/// The layout of a well-formed entry in straight-line reads: the same result as
/// [`parse_layout_general`] wherever that succeeds, `None` wherever it fails (it then gives the error).
#[inline(always)]
fn layout_fast(data: &[u8]) -> Option<EntryLayout> {
    let be16 = |at: usize| data.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let be32 = |at: usize| data.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let mut p = 0;
    let mut bem = None;
    if be16(0) == Some(MAGIC_BROKER_ENTRY_METADATA) {
        let n = be32(2)?;
        if n > data.len() - 6 {
            return None;
        }
        bem = Some(6..6 + n);
        p = 6 + n;
    }
    let headers_start = p;
    let mut checksum = None;
    if be16(p) == Some(MAGIC_CRC32C) {
        checksum = Some(be32(p + 2)? as u32);
        p += 6;
    }
    let checksummed_start = p;
    let n = be32(p)?;
    if n > data.len() - (p + 4) {
        return None;
    }
    let metadata = p + 4..p + 4 + n;
    let payload = metadata.end..data.len();
    Some(EntryLayout { broker_entry_metadata: bem, headers_start, checksum, checksummed_start, metadata, payload })
}

/// [`parse_layout`] by the general reader, with its exact errors.
pub fn parse_layout_general(data: &[u8]) -> Result<EntryLayout> {
    let (bem, headers_start) = locate_broker_entry_metadata(data)?;
    let mut r = Reader::at(data, headers_start);
    let checksum = if r.peek_u16() == Some(MAGIC_CRC32C) {
        r.u16("checksum magic")?;
        Some(r.u32("crc32c checksum")?)
    } else {
        None
    };
    let checksummed_start = r.pos();
    if r.remaining() < 4 {
        return Err(Error::corrupt(
            r.pos(),
            format!("expected a 4-byte metadata size, only {} bytes remain", r.remaining()),
        ));
    }
    let metadata = r.len_prefixed("message metadata")?;
    let payload = r.pos()..data.len();
    Ok(EntryLayout { broker_entry_metadata: bem, headers_start, checksum, checksummed_start, metadata, payload })
}

/// Decodes broker entry metadata protobuf bytes strictly (unknown wire types are corruption).
/// PIP-70: the index of one message of an entry whose broker entry metadata holds `entry_index` (the
/// index of the entry's last message): `entry_index - batch_size + batch_index + 1` for a batch of
/// `batch_size`, the entry's own index otherwise; wrapping like Java's long arithmetic, since the
/// index is any u64 the input holds.
pub fn message_index(entry_index: u64, batch_size: Option<i64>, batch_index: i64) -> i64 {
    match batch_size {
        Some(n) => (entry_index as i64).wrapping_sub(n).wrapping_add(batch_index.max(0) + 1),
        None => entry_index as i64,
    }
}

/// What the broker's publish path needs from a SEND's headersAndPayload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishFields {
    pub has_broker_entry_metadata: bool,
    pub chunk_id: Option<i32>,
    pub num_chunks_from_msg: Option<i32>,
    pub is_marker: bool,
}

/// The publish path's one pass over an entry: checksum verified (`ChecksumMismatch` otherwise),
/// MessageMetadata's required fields and wire types checked, the fields the broker acts on.
pub fn publish_fields(d: &[u8]) -> Result<PublishFields> {
    let layout = parse_layout(d)?;
    layout.verify_checksum(d)?;
    let m = crate::codec::metascan::scan_metadata(&d[layout.metadata.clone()])
        .map_err(|e| e.shifted(layout.metadata.start))?;
    Ok(PublishFields {
        has_broker_entry_metadata: layout.broker_entry_metadata.is_some(),
        chunk_id: m.chunk_id,
        num_chunks_from_msg: m.num_chunks_from_msg,
        is_marker: m.marker_type.is_some(),
    })
}

/// The broker's own encoding (timestamp, then index) is read in order; any other field, and what
/// follows it, by the general walk (as in `scan_metadata`).
#[inline]
pub fn decode_broker_entry_metadata(bytes: &[u8], base: usize) -> Result<BrokerEntryMetadata> {
    let mut out = BrokerEntryMetadata::default();
    let mut pos = 0;
    if let Some(Value::Varint(x)) = expect_field::<0>(bytes, &mut pos, &[0x08]) {
        out.broker_timestamp = Some(x);
    }
    if let Some(Value::Varint(x)) = expect_field::<0>(bytes, &mut pos, &[0x10]) {
        out.index = Some(x);
    }
    if pos < bytes.len() {
        bem_walk(bytes, pos, &mut out).map_err(|e| e.shifted(base))?;
    }
    Ok(out)
}

/// [`decode_broker_entry_metadata`] by the general walk alone: the reference its in-order path is
/// tested against.
#[cfg(any(test, feature = "fuzzing"))]
pub fn decode_broker_entry_metadata_general(bytes: &[u8], base: usize) -> Result<BrokerEntryMetadata> {
    let mut out = BrokerEntryMetadata::default();
    bem_walk(bytes, 0, &mut out).map_err(|e| e.shifted(base))?;
    Ok(out)
}

fn bem_walk(bytes: &[u8], start: usize, out: &mut BrokerEntryMetadata) -> Result<()> {
    walk_fields_from(bytes, start, |field, v| {
        match (field, v) {
            (1, Value::Varint(x)) => out.broker_timestamp = Some(x),
            (2, Value::Varint(x)) => out.index = Some(x),
            (1 | 2, _) => {
                return Err(Error::corrupt(0, format!("broker entry metadata field {field} has the wrong wire type")))
            }
            _ => {}
        }
        Ok(())
    })
}

/// PIP-70 peek: the broker entry metadata of `data`, if present. Does not touch MessageMetadata.
pub fn peek_broker_entry_metadata(data: &[u8]) -> Result<Option<BrokerEntryMetadata>> {
    match locate_broker_entry_metadata(data)? {
        (Some(r), _) => Ok(Some(decode_broker_entry_metadata(&data[r.clone()], r.start)?)),
        (None, _) => Ok(None),
    }
}

/// PIP-70 strip: the bytes a consumer gets when broker entry metadata is not exposed.
pub fn strip_broker_entry_metadata(data: &[u8]) -> Result<&[u8]> {
    let (_, start) = locate_broker_entry_metadata(data)?;
    Ok(&data[start..])
}

/// Serialized `[0x0e02][u32 size][BrokerEntryMetadata]` prefix.
pub fn broker_entry_metadata_prefix(broker_timestamp: Option<u64>, index: Option<u64>) -> Vec<u8> {
    let bem = BrokerEntryMetadata { broker_timestamp, index };
    let body = bem.encode_to_vec();
    let mut out = Vec::with_capacity(6 + body.len());
    out.extend_from_slice(&MAGIC_BROKER_ENTRY_METADATA.to_be_bytes());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// PIP-70 add: prepends broker entry metadata. Entries that already carry it are refused, because
/// readers skip exactly one prefix and a second would hide the client's bytes.
pub fn add_broker_entry_metadata(data: &[u8], broker_timestamp: Option<u64>, index: Option<u64>) -> Result<Vec<u8>> {
    if data.len() >= 2 && u16::from_be_bytes([data[0], data[1]]) == MAGIC_BROKER_ENTRY_METADATA {
        return Err(Error::corrupt(0, "entry already starts with broker entry metadata (magic 0x0e02)"));
    }
    let mut out = broker_entry_metadata_prefix(broker_timestamp, index);
    out.reserve(data.len());
    out.extend_from_slice(data);
    Ok(out)
}

/// `[0x0e01][crc32c][u32 md_size][md][payload]` when `checksum`, else `[u32 md_size][md][payload]`,
/// exactly as `Commands.serializeMetadataAndPayload` writes it.
pub fn encode_metadata_and_payload(metadata: &[u8], payload: &[u8], checksum: bool) -> Result<Vec<u8>> {
    let md_len = u32::try_from(metadata.len()).map_err(|_| Error::InvalidArgument("metadata too large".into()))?;
    let total = metadata.len() + payload.len() + 4 + if checksum { 6 } else { 0 };
    let mut out = Vec::with_capacity(total);
    if checksum {
        out.extend_from_slice(&MAGIC_CRC32C.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
    }
    let covered = out.len();
    out.extend_from_slice(&md_len.to_be_bytes());
    out.extend_from_slice(metadata);
    if checksum {
        // Same order as Pulsar: CRC the header tail, then resume over the payload.
        let head = crc32c(&out[covered..]);
        let crc = crc32c_resume(head, payload);
        out[2..6].copy_from_slice(&crc.to_be_bytes());
    }
    out.extend_from_slice(payload);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn worked_example() {
        let md = hex("0a0170 1000 18e807 4802");
        let e = encode_metadata_and_payload(&md, b"hi", true).unwrap();
        assert_eq!(e, hex("0e01 9be0d6b3 0000000a 0a01701000 18e8074802 6869"));
        let with_bem = add_broker_entry_metadata(&e, Some(1000), Some(0)).unwrap();
        assert_eq!(&with_bem[..11], &hex("0e02 00000005 08e8071000")[..]);
        let l = parse_layout(&with_bem).unwrap();
        assert_eq!(l.checksum, Some(0x9be0d6b3));
        l.verify_checksum(&with_bem).unwrap();
        assert_eq!(&with_bem[l.payload.clone()], b"hi");
        let bem = peek_broker_entry_metadata(&with_bem).unwrap().unwrap();
        assert_eq!((bem.broker_timestamp, bem.index), (Some(1000), Some(0)));
        assert_eq!(strip_broker_entry_metadata(&with_bem).unwrap(), &e[..]);
    }

    #[test]
    fn checksum_mismatch_reports_offset() {
        let md = hex("0a0170 1000 18e807 4802");
        let mut e = encode_metadata_and_payload(&md, b"hi", true).unwrap();
        *e.last_mut().unwrap() ^= 1;
        let l = parse_layout(&e).unwrap();
        match l.verify_checksum(&e) {
            Err(Error::ChecksumMismatch { offset: 2, stored: 0x9be0d6b3, .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}
