//! Lazy MessageMetadata reading for bulk work: one pass over the wire fields, keeping only the
//! columns bulk jobs ask for, with strings left as borrowed byte ranges.
use crate::codec::wire::{walk_fields, Value};
use crate::error::{Error, Result};
use std::ops::Range;

#[derive(Debug, Clone, Default)]
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
#[inline]
pub fn scan_metadata(buf: &[u8]) -> Result<MetaFields> {
    let mut m = MetaFields::default();
    walk_fields(buf, |field, v| {
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
    })?;
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
