//! Lazy MessageMetadata reading for bulk work: one pass over the wire fields, keeping only the
//! columns bulk jobs ask for, with strings left as borrowed byte ranges.
use crate::codec::wire::{expect_field, walk_fields_from, Value};
use crate::error::{Error, Result};
use std::ops::Range;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaFields {
    pub producer_name: Option<Range<usize>>,
    pub sequence_id: Option<u64>,
    pub publish_time: Option<u64>,
    pub num_properties: u32,
    pub partition_key: Option<Range<usize>>,
    pub compression: i32,
    pub uncompressed_size: u32,
    pub num_messages_in_batch: Option<i32>,
    pub event_time: u64,
    pub ordering_key: Option<Range<usize>>,
    pub deliver_at_time: Option<i64>,
    pub marker_type: Option<i32>,
    pub txnid_least_bits: Option<u64>,
    pub txnid_most_bits: Option<u64>,
    pub highest_sequence_id: u64,
    pub null_value: bool,
    pub uuid: Option<Range<usize>>,
    pub num_chunks_from_msg: Option<i32>,
    pub total_chunk_msg_size: Option<i32>,
    pub chunk_id: Option<i32>,
    pub schema_version: Option<Range<usize>>,
    pub replicated_from: Option<Range<usize>>,
    pub encrypted: bool,
    pub num_compacted_batch_indexes: u32,
}

/// Scans MessageMetadata bytes; ranges are relative to `buf`. Required fields are checked.
///
/// Writers (Pulsar's LightProto, protobuf libraries) emit fields in field-number order, so the fields
/// are first read in that order, each key compared with the one expected next ([`in_order`]: a
/// predictable branch per field, where a general match is a mispredicted jump per field); the first
/// field out of that order, and everything after it, goes through the general walk. Both paths apply
/// each field with [`visit`], so the result (and any error) is the general walk's.
#[inline]
pub fn scan_metadata(buf: &[u8]) -> Result<MetaFields> {
    let mut m = MetaFields::default();
    let pos = in_order(buf, &mut m);
    if pos < buf.len() {
        walk_fields_from(buf, pos, |field, v| visit(&mut m, field, v))?;
    }
    check_required(m)
}

/// [`scan_metadata`] by the general walk alone: the reference the in-order path is tested against.
#[cfg(any(test, feature = "fuzzing"))]
pub fn scan_metadata_general(buf: &[u8]) -> Result<MetaFields> {
    let mut m = MetaFields::default();
    walk_fields_from(buf, 0, |field, v| visit(&mut m, field, v))?;
    check_required(m)
}

/// Reads the fields [`visit`] knows while they come in field-number order; returns where the first
/// other field (or an incomplete one) starts, `buf.len()` when all were read.
#[inline(always)]
fn in_order(buf: &[u8], m: &mut MetaFields) -> usize {
    let mut pos = 0usize;
    // (field, wire type, key bytes, repeated): keys of fields 16+ take two bytes.
    macro_rules! fields {
        ($(($field:expr, $wt:expr, $key:expr, $rep:expr)),* $(,)?) => {$(
            while let Some(v) = expect_field::<$wt>(buf, &mut pos, $key) {
                // Cannot fail: the key fixes the wire type this field expects.
                let _ = visit(m, $field, v);
                if !$rep {
                    break;
                }
            }
        )*};
    }
    fields!(
        (1, 2, &[0x0a], false),
        (2, 0, &[0x10], false),
        (3, 0, &[0x18], false),
        (4, 2, &[0x22], true),
        (5, 2, &[0x2a], false),
        (6, 2, &[0x32], false),
        (8, 0, &[0x40], false),
        (9, 0, &[0x48], false),
        (11, 0, &[0x58], false),
        (12, 0, &[0x60], false),
        (13, 2, &[0x6a], true),
        (16, 2, &[0x82, 0x01], false),
        (18, 2, &[0x92, 0x01], false),
        (19, 0, &[0x98, 0x01], false),
        (20, 0, &[0xa0, 0x01], false),
        (22, 0, &[0xb0, 0x01], false),
        (23, 0, &[0xb8, 0x01], false),
        (24, 0, &[0xc0, 0x01], false),
        (25, 0, &[0xc8, 0x01], false),
        (26, 2, &[0xd2, 0x01], false),
        (27, 0, &[0xd8, 0x01], false),
        (28, 0, &[0xe0, 0x01], false),
        (29, 0, &[0xe8, 0x01], false),
        (31, 0, &[0xf8, 0x01], true),
    );
    pos
}

/// Applies one field to `m`: the single definition of what each MessageMetadata field means here.
#[inline(always)]
fn visit(m: &mut MetaFields, field: u32, v: Value) -> Result<()> {
    let wrong = || Error::corrupt(0, format!("MessageMetadata field {field} has the wrong wire type"));
    match (field, v) {
        (1, Value::Bytes(r)) => m.producer_name = Some(r),
        (2, Value::Varint(x)) => m.sequence_id = Some(x),
        (3, Value::Varint(x)) => m.publish_time = Some(x),
        (4, Value::Bytes(_)) => m.num_properties += 1,
        (5, Value::Bytes(r)) => m.replicated_from = Some(r),
        (6, Value::Bytes(r)) => m.partition_key = Some(r),
        (8, Value::Varint(x)) => m.compression = x as i32,
        (9, Value::Varint(x)) => m.uncompressed_size = x as u32,
        (11, Value::Varint(x)) => m.num_messages_in_batch = Some(x as i32),
        (12, Value::Varint(x)) => m.event_time = x,
        (13, Value::Bytes(_)) => m.encrypted = true,
        (16, Value::Bytes(r)) => m.schema_version = Some(r),
        (18, Value::Bytes(r)) => m.ordering_key = Some(r),
        (19, Value::Varint(x)) => m.deliver_at_time = Some(x as i64),
        (20, Value::Varint(x)) => m.marker_type = Some(x as i32),
        (22, Value::Varint(x)) => m.txnid_least_bits = Some(x),
        (23, Value::Varint(x)) => m.txnid_most_bits = Some(x),
        (24, Value::Varint(x)) => m.highest_sequence_id = x,
        (25, Value::Varint(x)) => m.null_value = x != 0,
        (26, Value::Bytes(r)) => m.uuid = Some(r),
        (27, Value::Varint(x)) => m.num_chunks_from_msg = Some(x as i32),
        (28, Value::Varint(x)) => m.total_chunk_msg_size = Some(x as i32),
        (29, Value::Varint(x)) => m.chunk_id = Some(x as i32),
        (31, Value::Varint(_)) => m.num_compacted_batch_indexes += 1,
        (1..=6 | 8 | 9 | 11 | 12 | 13 | 16 | 18..=20 | 22..=29 | 31, _) => return Err(wrong()),
        _ => {}
    }
    Ok(())
}

#[inline(always)]
fn check_required(m: MetaFields) -> Result<MetaFields> {
    if m.producer_name.is_none() || m.sequence_id.is_none() || m.publish_time.is_none() {
        let missing: Vec<&str> = [
            (m.producer_name.is_none(), "producer_name"),
            (m.sequence_id.is_none(), "sequence_id"),
            (m.publish_time.is_none(), "publish_time"),
        ]
        .iter()
        .filter(|(miss, _)| *miss)
        .map(|(_, n)| *n)
        .collect();
        return Err(Error::corrupt(0, format!("MessageMetadata lacks required field(s) {}", missing.join(", "))));
    }
    Ok(m)
}
