//! The reference [`super::decode_metadata`] is tested against (fuzz targets, property tests): the
//! same columns built row by row with Arrow's builders from the general readers (every field through
//! the general protobuf walk, the framing through the general reader, `from_utf8` on every string),
//! as the kernel was before its fast paths.
use super::{batch, error_column, nullable, EntryColumn};
use crate::codec::compression::Codec;
use crate::codec::entry::{decode_broker_entry_metadata_general, parse_layout_general};
use crate::codec::metascan::scan_metadata_general;
use crate::error::{Error, Result};
use arrow_array::builder::{BinaryBuilder, BooleanBuilder, Int32Builder, Int64Builder, StringBuilder};
use arrow_array::RecordBatch;
use std::sync::Arc;

/// What one decoded row holds, in output column order.
struct Row<'a> {
    b_ts: Option<i64>,
    b_idx: Option<i64>,
    has_ck: bool,
    ck_ok: Option<bool>,
    producer: &'a str,
    seq: i64,
    hseq: i64,
    publish: i64,
    event: Option<i64>,
    num: i32,
    is_batch: bool,
    compression: &'static str,
    usize_: i64,
    psize: i64,
    pkey: Option<&'a str>,
    okey: Option<&'a [u8]>,
    nprops: i32,
    uuid: Option<&'a str>,
    chunk_id: Option<i32>,
    nchunks: Option<i32>,
    chunk_total: Option<i32>,
    marker: Option<i32>,
    deliver_at: Option<i64>,
    txn_most: Option<i64>,
    txn_least: Option<i64>,
    schema_version: Option<&'a [u8]>,
    replicated_from: Option<&'a str>,
    encrypted: bool,
}

fn row(d: &[u8], verify: bool) -> Result<Row<'_>> {
    let layout = parse_layout_general(d)?;
    let (b_ts, b_idx) = match &layout.broker_entry_metadata {
        Some(r) => {
            let b = decode_broker_entry_metadata_general(&d[r.clone()], r.start)?;
            (b.broker_timestamp, b.index)
        }
        None => (None, None),
    };
    let ck_ok = (verify && layout.checksum.is_some()).then(|| layout.verify_checksum(d).is_ok());
    let base = layout.metadata.start;
    let md = &d[layout.metadata.clone()];
    let m = scan_metadata_general(md).map_err(|e| e.shifted(base))?;
    let bytes = |r: &Option<std::ops::Range<usize>>| r.clone().map(|r| &md[r]);
    let text = |r: &Option<std::ops::Range<usize>>, what: &str| -> Result<Option<&str>> {
        match r {
            None => Ok(None),
            Some(r) => std::str::from_utf8(&md[r.clone()])
                .map(Some)
                .map_err(|_| Error::corrupt(base + r.start, format!("{what} is not valid UTF-8"))),
        }
    };
    let producer = text(&m.producer_name, "producer_name")?;
    let pkey = text(&m.partition_key, "partition_key")?;
    let uuid = text(&m.uuid, "uuid")?;
    let replicated_from = text(&m.replicated_from, "replicated_from")?;
    let codec = Codec::from_wire(m.compression)?;
    Ok(Row {
        b_ts: b_ts.map(|v| v as i64),
        b_idx: b_idx.map(|v| v as i64),
        has_ck: layout.checksum.is_some(),
        ck_ok,
        producer: producer.expect("required"),
        seq: m.sequence_id.expect("required") as i64,
        hseq: m.highest_sequence_id as i64,
        publish: m.publish_time.expect("required") as i64,
        event: (m.event_time != 0).then_some(m.event_time as i64),
        num: m.num_messages_in_batch.unwrap_or(1),
        is_batch: m.num_messages_in_batch.is_some(),
        compression: codec.name(),
        usize_: i64::from(m.uncompressed_size),
        psize: layout.payload.len() as i64,
        pkey,
        okey: bytes(&m.ordering_key),
        nprops: m.num_properties as i32,
        uuid,
        chunk_id: m.chunk_id,
        nchunks: m.num_chunks_from_msg,
        chunk_total: m.total_chunk_msg_size,
        marker: m.marker_type,
        deliver_at: m.deliver_at_time,
        txn_most: m.txnid_most_bits.map(|v| v as i64),
        txn_least: m.txnid_least_bits.map(|v| v as i64),
        schema_version: bytes(&m.schema_version),
        replicated_from,
        encrypted: m.encrypted,
    })
}

/// [`super::decode_metadata`], the plain way.
pub fn decode_metadata(col: &EntryColumn, verify: bool) -> RecordBatch {
    let n = col.len();
    let (mut b_ts, mut b_idx) = (Int64Builder::new(), Int64Builder::new());
    let (mut has_ck, mut ck_ok) = (BooleanBuilder::new(), BooleanBuilder::new());
    let mut producer = StringBuilder::new();
    let (mut seq, mut hseq, mut publish, mut event) =
        (Int64Builder::new(), Int64Builder::new(), Int64Builder::new(), Int64Builder::new());
    let (mut num, mut is_batch, mut compression) = (Int32Builder::new(), BooleanBuilder::new(), StringBuilder::new());
    let (mut usize_, mut psize) = (Int64Builder::new(), Int64Builder::new());
    let (mut pkey, mut okey, mut nprops, mut uuid) =
        (StringBuilder::new(), BinaryBuilder::new(), Int32Builder::new(), StringBuilder::new());
    let (mut chunk_id, mut nchunks, mut chunk_total, mut marker) =
        (Int32Builder::new(), Int32Builder::new(), Int32Builder::new(), Int32Builder::new());
    let (mut deliver_at, mut txn_most, mut txn_least) = (Int64Builder::new(), Int64Builder::new(), Int64Builder::new());
    let (mut schema_version, mut replicated_from) = (BinaryBuilder::new(), StringBuilder::new());
    let (mut encrypted, mut err) = (BooleanBuilder::new(), StringBuilder::new());
    for i in 0..n {
        let r = col.get(i).map(|d| row(d, verify));
        let Some(Ok(r)) = r else {
            for b in [&mut b_ts, &mut b_idx, &mut seq, &mut hseq, &mut publish, &mut event, &mut usize_, &mut psize] {
                b.append_null();
            }
            for b in [&mut deliver_at, &mut txn_most, &mut txn_least] {
                b.append_null();
            }
            for b in [&mut num, &mut nprops, &mut chunk_id, &mut nchunks, &mut chunk_total, &mut marker] {
                b.append_null();
            }
            for b in [&mut has_ck, &mut ck_ok, &mut is_batch, &mut encrypted] {
                b.append_null();
            }
            for b in [&mut producer, &mut compression, &mut pkey, &mut uuid, &mut replicated_from] {
                b.append_null();
            }
            okey.append_null();
            schema_version.append_null();
            err.append_option(r.map(|e| e.err().expect("failed row").to_string()));
            continue;
        };
        b_ts.append_option(r.b_ts);
        b_idx.append_option(r.b_idx);
        has_ck.append_value(r.has_ck);
        ck_ok.append_option(r.ck_ok);
        producer.append_value(r.producer);
        seq.append_value(r.seq);
        hseq.append_value(r.hseq);
        publish.append_value(r.publish);
        event.append_option(r.event);
        num.append_value(r.num);
        is_batch.append_value(r.is_batch);
        compression.append_value(r.compression);
        usize_.append_value(r.usize_);
        psize.append_value(r.psize);
        pkey.append_option(r.pkey);
        okey.append_option(r.okey);
        nprops.append_value(r.nprops);
        uuid.append_option(r.uuid);
        chunk_id.append_option(r.chunk_id);
        nchunks.append_option(r.nchunks);
        chunk_total.append_option(r.chunk_total);
        marker.append_option(r.marker);
        deliver_at.append_option(r.deliver_at);
        txn_most.append_option(r.txn_most);
        txn_least.append_option(r.txn_least);
        schema_version.append_option(r.schema_version);
        replicated_from.append_option(r.replicated_from);
        encrypted.append_value(r.encrypted);
        err.append_null();
    }
    batch(vec![
        nullable("broker_timestamp", Arc::new(b_ts.finish())),
        nullable("index", Arc::new(b_idx.finish())),
        nullable("has_checksum", Arc::new(has_ck.finish())),
        nullable("checksum_ok", Arc::new(ck_ok.finish())),
        nullable("producer_name", Arc::new(producer.finish())),
        nullable("sequence_id", Arc::new(seq.finish())),
        nullable("highest_sequence_id", Arc::new(hseq.finish())),
        nullable("publish_time", Arc::new(publish.finish())),
        nullable("event_time", Arc::new(event.finish())),
        nullable("num_messages", Arc::new(num.finish())),
        nullable("is_batch", Arc::new(is_batch.finish())),
        nullable("compression", Arc::new(compression.finish())),
        nullable("uncompressed_size", Arc::new(usize_.finish())),
        nullable("payload_size", Arc::new(psize.finish())),
        nullable("partition_key", Arc::new(pkey.finish())),
        nullable("ordering_key", Arc::new(okey.finish())),
        nullable("num_properties", Arc::new(nprops.finish())),
        nullable("uuid", Arc::new(uuid.finish())),
        nullable("chunk_id", Arc::new(chunk_id.finish())),
        nullable("num_chunks_from_msg", Arc::new(nchunks.finish())),
        nullable("total_chunk_msg_size", Arc::new(chunk_total.finish())),
        nullable("marker_type", Arc::new(marker.finish())),
        nullable("deliver_at_time", Arc::new(deliver_at.finish())),
        nullable("txnid_most_bits", Arc::new(txn_most.finish())),
        nullable("txnid_least_bits", Arc::new(txn_least.finish())),
        nullable("schema_version", Arc::new(schema_version.finish())),
        nullable("replicated_from", Arc::new(replicated_from.finish())),
        nullable("encrypted", Arc::new(encrypted.finish())),
        error_column(Arc::new(err.finish())),
    ])
}

/// Panics unless `got` is `want` column for column: the same type, validity and values, and the same
/// buffers byte for byte (zeros under the nulls of fixed-width columns, as the builders write).
pub fn assert_same_columns(got: &RecordBatch, want: &RecordBatch) {
    assert_eq!(got.schema(), want.schema());
    for (k, (g, w)) in got.columns().iter().zip(want.columns()).enumerate() {
        let name = got.schema().field(k).name().clone();
        assert_eq!(g.as_ref(), w.as_ref(), "column {name}");
        let (g, w) = (g.to_data(), w.to_data());
        assert_eq!(g.nulls().map(|b| b.inner().clone()), w.nulls().map(|b| b.inner().clone()), "nulls of {name}");
        let bits = |d: &arrow_data::ArrayData| d.buffers().iter().map(|b| b.as_slice().to_vec()).collect::<Vec<_>>();
        assert_eq!(bits(&g), bits(&w), "buffers of {name}");
    }
}
