//! Arrow kernels: one call per column of entries, one output row per input row (or per message for
//! `explode`). A corrupt entry yields nulls plus a message in the `error` column, never a dropped row.
pub mod assemble;
pub mod compaction;
pub mod json;
#[cfg(any(test, feature = "fuzzing"))]
pub mod reference;
pub mod txn;

use crate::codec::batch::{entry_messages, parse_entry, payload_body, scan_batch_refs, RecordRef};
use crate::codec::compression::Codec;
use crate::codec::entry::{
    decode_broker_entry_metadata, locate_broker_entry_metadata, message_index, parse_layout, EntryLayout,
};
use crate::codec::metascan::{scan_metadata, MetaFields};
use crate::error::{Error, Result};
use arrow_array::builder::*;
use arrow_array::types::{GenericBinaryType, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, BinaryViewArray, GenericByteArray, OffsetSizeTrait, PrimitiveArray, RecordBatch};
use arrow_buffer::Buffer;
use arrow_schema::{Field, Schema};
use std::sync::Arc;

use crate::columns::{Bool, Bools, Dense, Prim, PushMap, PushVar, RowValidity, Strs, Var};

/// A column of entry bytes, whichever binary layout it came in.
pub enum EntryColumn<'a> {
    Binary(&'a GenericByteArray<GenericBinaryType<i32>>),
    LargeBinary(&'a GenericByteArray<GenericBinaryType<i64>>),
    BinaryView(&'a BinaryViewArray),
}

impl<'a> EntryColumn<'a> {
    pub fn from_array(a: &'a dyn Array) -> Result<Self> {
        let any = a.as_any();
        if let Some(b) = any.downcast_ref::<GenericByteArray<GenericBinaryType<i32>>>() {
            return Ok(EntryColumn::Binary(b));
        }
        if let Some(b) = any.downcast_ref::<GenericByteArray<GenericBinaryType<i64>>>() {
            return Ok(EntryColumn::LargeBinary(b));
        }
        if let Some(b) = any.downcast_ref::<BinaryViewArray>() {
            return Ok(EntryColumn::BinaryView(b));
        }
        Err(Error::InvalidArgument(format!(
            "expected an Arrow binary, large_binary or binary_view array of entries, got {}",
            a.data_type()
        )))
    }
    pub fn len(&self) -> usize {
        match self {
            EntryColumn::Binary(a) => a.len(),
            EntryColumn::LargeBinary(a) => a.len(),
            EntryColumn::BinaryView(a) => a.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    #[inline]
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        match self {
            EntryColumn::Binary(a) => a.is_valid(i).then(|| a.value(i)),
            EntryColumn::LargeBinary(a) => a.is_valid(i).then(|| a.value(i)),
            EntryColumn::BinaryView(a) => a.is_valid(i).then(|| a.value(i)),
        }
    }
    /// Hints the CPU to start loading the first `bytes` of entry `i`. Kernels that read only an entry's
    /// head touch one or two cache lines per entry, far apart, so without this they wait on memory latency.
    #[inline(always)]
    pub fn prefetch(&self, i: usize, bytes: usize) {
        if i < self.len() {
            if let Some(d) = self.get(i) {
                prefetch_head(d, bytes);
            }
        }
    }
    /// Bytes of the rows in this (possibly sliced) column; `values()` would be the whole parent buffer.
    fn total_bytes(&self) -> usize {
        fn span<O: OffsetSizeTrait>(o: &[O]) -> usize {
            (o[o.len() - 1] - o[0]).as_usize()
        }
        match self {
            EntryColumn::Binary(a) => span(a.value_offsets()),
            EntryColumn::LargeBinary(a) => span(a.value_offsets()),
            EntryColumn::BinaryView(a) => a.total_buffer_bytes_used(),
        }
    }
    fn is_large(&self) -> bool {
        matches!(self, EntryColumn::LargeBinary(_))
    }
    /// The bytes of the values themselves: for views, the sum of their lengths (views may share bytes, so
    /// this can pass the buffers' size).
    fn value_bytes(&self) -> usize {
        match self {
            EntryColumn::BinaryView(a) => a.views().iter().map(|&v| v as u32 as usize).sum(),
            _ => self.total_bytes(),
        }
    }
}

/// Hints the CPU to start loading the first `bytes` of `d` (see [`EntryColumn::prefetch`]).
#[inline(always)]
fn prefetch_head(d: &[u8], bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let n = d.len().min(bytes);
        let mut off = 0;
        while off < n {
            // SAFETY: prefetch is only a hint and never faults; the address is inside `d` anyway.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(d.as_ptr().add(off) as *const i8)
            };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (d, bytes);
}

/// How many entries ahead the head-reading kernels prefetch: enough to cover memory latency.
const PREFETCH_AHEAD: usize = 8;

/// A kernel's output batch from its columns, each named beside its array (so names and arrays cannot
/// drift apart, and a field's type is its array's).
fn batch(cols: Vec<(Field, ArrayRef)>) -> RecordBatch {
    let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = cols.into_iter().unzip();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).expect("kernel builds consistent columns")
}

/// A nullable output column.
fn nullable(name: &str, array: ArrayRef) -> (Field, ArrayRef) {
    (Field::new(name, array.data_type().clone(), true), array)
}

/// An output column no row leaves null (row indexes, positions).
fn required(name: &str, array: ArrayRef) -> (Field, ArrayRef) {
    (Field::new(name, array.data_type().clone(), false), array)
}

/// The `error` column (utf8) every kernel ends with.
fn error_column(array: ArrayRef) -> (Field, ArrayRef) {
    nullable("error", array)
}

/// Verifies the client checksum of each entry.
/// Columns: `has_checksum` (bool), `checksum_ok` (bool, null without a checksum), `error`.
pub fn verify_checksums(col: &EntryColumn) -> RecordBatch {
    let n = col.len();
    let mut has = BooleanBuilder::with_capacity(n);
    let mut ok = BooleanBuilder::with_capacity(n);
    let mut err = StringBuilder::with_capacity(n, 0);
    for i in 0..n {
        let Some(d) = col.get(i) else {
            has.append_null();
            ok.append_null();
            err.append_null();
            continue;
        };
        match parse_layout(d) {
            Ok(l) => {
                has.append_value(l.checksum.is_some());
                match l.verify_checksum(d) {
                    Ok(Some(_)) => ok.append_value(true),
                    Ok(None) => ok.append_null(),
                    Err(_) => ok.append_value(false),
                }
                err.append_null();
            }
            Err(e) => {
                has.append_null();
                ok.append_null();
                err.append_value(e.to_string());
            }
        }
    }
    batch(vec![
        nullable("has_checksum", Arc::new(has.finish())),
        nullable("checksum_ok", Arc::new(ok.finish())),
        error_column(Arc::new(err.finish())),
    ])
}

/// Peeks broker entry metadata. Columns: `broker_timestamp`, `index` (int64, null when absent), `error`.
pub fn peek_broker_entry_metadata(col: &EntryColumn) -> RecordBatch {
    let n = col.len();
    let mut ts = Int64Builder::with_capacity(n);
    let mut idx = Int64Builder::with_capacity(n);
    let mut err = StringBuilder::with_capacity(n, 0);
    for i in 0..n {
        col.prefetch(i + PREFETCH_AHEAD, 64);
        let r = col.get(i).map(|d| {
            let (range, _) = locate_broker_entry_metadata(d)?;
            range.map(|r| decode_broker_entry_metadata(&d[r.clone()], r.start)).transpose()
        });
        match r {
            None | Some(Ok(None)) => {
                ts.append_null();
                idx.append_null();
                err.append_null();
            }
            Some(Ok(Some(b))) => {
                ts.append_option(b.broker_timestamp.map(|v| v as i64));
                idx.append_option(b.index.map(|v| v as i64));
                err.append_null();
            }
            Some(Err(e)) => {
                ts.append_null();
                idx.append_null();
                err.append_value(e.to_string());
            }
        }
    }
    batch(vec![
        nullable("broker_timestamp", Arc::new(ts.finish())),
        nullable("index", Arc::new(idx.finish())),
        error_column(Arc::new(err.finish())),
    ])
}

/// Strips broker entry metadata. Columns: `entry` (large_binary for large_binary input and for a
/// binary_view input whose values pass 2 GiB, which 32-bit offsets cannot hold; binary otherwise), `error`.
/// Entries without it are passed through unchanged.
pub fn strip_broker_entry_metadata(col: &EntryColumn) -> RecordBatch {
    if col.is_large() || col.value_bytes() > i32::MAX as usize {
        strip_into::<i64>(col)
    } else {
        strip_into::<i32>(col)
    }
}

/// Zero-copy strip: a `binary_view` column whose views point into the input's values buffer just past
/// each entry's broker entry metadata, so no entry bytes are copied. Inputs whose values buffer
/// exceeds the 4 GiB a view offset can address, and `binary_view` inputs, are copied instead.
pub fn strip_broker_entry_metadata_view(col: &EntryColumn) -> RecordBatch {
    let (values, offsets): (Buffer, Vec<usize>) = match col {
        EntryColumn::Binary(a) => (a.values().clone(), a.value_offsets().iter().map(|&o| o as usize).collect()),
        EntryColumn::LargeBinary(a) if a.values().len() <= u32::MAX as usize => {
            (a.values().clone(), a.value_offsets().iter().map(|&o| o as usize).collect())
        }
        _ => {
            let mut out = BinaryViewBuilder::with_capacity(col.len());
            let err = strip_rows(col, |_, v| match v {
                Some((d, skip)) => out.append_value(&d[skip..]),
                None => out.append_null(),
            });
            return strip_batch(Arc::new(out.finish()), err);
        }
    };
    let mut out = BinaryViewBuilder::with_capacity(col.len());
    let block = out.append_block(values);
    let err = strip_rows(col, |i, v| match v {
        Some((_, skip)) => {
            let start = offsets[i] + skip;
            out.try_append_view(block, start as u32, (offsets[i + 1] - start) as u32)
                .expect("view lies inside the input buffer");
        }
        None => out.append_null(),
    });
    strip_batch(Arc::new(out.finish()), err)
}

fn strip_into<O: OffsetSizeTrait>(col: &EntryColumn) -> RecordBatch {
    let mut out = GenericBinaryBuilder::<O>::with_capacity(col.len(), col.total_bytes());
    let err = strip_rows(col, |_, v| match v {
        Some((d, skip)) => out.append_value(&d[skip..]),
        None => out.append_null(),
    });
    strip_batch(Arc::new(out.finish()), err)
}

/// The row walk every strip variant shares: `emit(row, Some((entry, bytes to skip)))` for a readable
/// entry, `emit(row, None)` for a null or corrupt one; returns the `error` column.
fn strip_rows<'a>(col: &EntryColumn<'a>, mut emit: impl FnMut(usize, Option<(&'a [u8], usize)>)) -> ArrayRef {
    let n = col.len();
    let mut err = StringBuilder::with_capacity(n, 0);
    for i in 0..n {
        match col.get(i).map(|d| locate_broker_entry_metadata(d).map(|(_, skip)| (d, skip))) {
            None => {
                emit(i, None);
                err.append_null();
            }
            Some(Ok(row)) => {
                emit(i, Some(row));
                err.append_null();
            }
            Some(Err(e)) => {
                emit(i, None);
                err.append_value(e.to_string());
            }
        }
    }
    Arc::new(err.finish())
}

fn strip_batch(entries: ArrayRef, err: ArrayRef) -> RecordBatch {
    batch(vec![nullable("entry", entries), error_column(err)])
}

struct Decoded<'a> {
    data: &'a [u8],
    layout: EntryLayout,
    bem_ts: Option<u64>,
    bem_index: Option<u64>,
    checksum_ok: Option<bool>,
    meta: MetaFields,
}

#[inline(always)]
fn decode_one(d: &[u8], verify: bool) -> Result<Decoded<'_>> {
    let layout = parse_layout(d)?;
    let (bem_ts, bem_index) = match &layout.broker_entry_metadata {
        Some(r) => {
            let b = decode_broker_entry_metadata(&d[r.clone()], r.start)?;
            (b.broker_timestamp, b.index)
        }
        None => (None, None),
    };
    let checksum_ok = if verify && layout.checksum.is_some() { Some(layout.verify_checksum(d).is_ok()) } else { None };
    let meta = scan_metadata(&d[layout.metadata.clone()]).map_err(|e| e.shifted(layout.metadata.start))?;
    Ok(Decoded { data: d, layout, bem_ts, bem_index, checksum_ok, meta })
}

fn utf8<'a>(d: &Decoded<'a>, r: &Option<std::ops::Range<usize>>, what: &str) -> Result<Option<&'a str>> {
    match r {
        None => Ok(None),
        Some(r) => {
            let base = d.layout.metadata.start;
            let data: &'a [u8] = d.data;
            let bytes = &data[base + r.start..base + r.end];
            // Names and keys are nearly always ASCII, which a word-at-a-time check settles without
            // the general decoder's call.
            if bytes.is_ascii() {
                // SAFETY: ASCII bytes are UTF-8.
                return Ok(Some(unsafe { std::str::from_utf8_unchecked(bytes) }));
            }
            std::str::from_utf8(bytes)
                .map(Some)
                .map_err(|_| Error::corrupt(base + r.start, format!("{what} is not valid UTF-8")))
        }
    }
}

fn raw<'a>(d: &Decoded<'a>, r: &Option<std::ops::Range<usize>>) -> Option<&'a [u8]> {
    let base = d.layout.metadata.start;
    let data: &'a [u8] = d.data;
    r.as_ref().map(|r| &data[base + r.start..base + r.end])
}

/// The metadata's strings, each checked as UTF-8, and its codec: an entry whose metadata fails these
/// does not decode (`decode_metadata` gives it an `error`).
#[allow(clippy::type_complexity)]
#[inline(always)]
fn meta_strings<'a>(
    dec: &Decoded<'a>,
) -> Result<(Option<&'a str>, Option<&'a str>, Option<&'a str>, Option<&'a str>, Codec)> {
    let m = &dec.meta;
    Ok((
        utf8(dec, &m.producer_name, "producer_name")?,
        utf8(dec, &m.partition_key, "partition_key")?,
        utf8(dec, &m.uuid, "uuid")?,
        utf8(dec, &m.replicated_from, "replicated_from")?,
        Codec::from_wire(m.compression)?,
    ))
}

/// Decodes framing, broker entry metadata and the commonly used MessageMetadata fields into columns.
pub fn decode_metadata(col: &EntryColumn, verify_checksum: bool) -> Result<RecordBatch> {
    // One loop per input layout, so reading a row is inlined offsets, not a match and a call per row.
    match col {
        EntryColumn::Binary(a) => decode_metadata_rows(a.len(), |i| a.is_valid(i).then(|| a.value(i)), verify_checksum),
        EntryColumn::LargeBinary(a) => {
            decode_metadata_rows(a.len(), |i| a.is_valid(i).then(|| a.value(i)), verify_checksum)
        }
        EntryColumn::BinaryView(a) => {
            decode_metadata_rows(a.len(), |i| a.is_valid(i).then(|| a.value(i)), verify_checksum)
        }
    }
}

/// The first entry whose metadata, decoded as [`decode_metadata`] decodes it, has a transaction id (None:
/// none has; an entry that does not decode has none, as its row there is null). The reader's check of a
/// batch read before its topic's metadata pass: it stops at the first such entry and builds no columns.
pub fn first_transactional(col: &EntryColumn) -> Option<usize> {
    (0..col.len()).find(|&i| {
        col.get(i).and_then(|d| decode_one(d, false).ok()).is_some_and(|dec| {
            (dec.meta.txnid_most_bits.is_some() || dec.meta.txnid_least_bits.is_some()) && meta_strings(&dec).is_ok()
        })
    })
}

/// [`decode_metadata`] over rows `0..n` read by `get`.
///
/// Columns every decoded row has a value in ([`Dense`]) take one store per row and share the rows'
/// validity, built once; columns whose values are optional ([`Prim`] slots) are written only where a
/// value is present.
#[inline(always)]
fn decode_metadata_rows<'a>(
    n: usize,
    get: impl Fn(usize) -> Option<&'a [u8]>,
    verify_checksum: bool,
) -> Result<RecordBatch> {
    let mut rows = RowValidity::new(n);
    let mut b_ts = Prim::<Int64Type>::new(n);
    let mut b_idx = Prim::<Int64Type>::new(n);
    let mut has_ck = Dense::<Bool>::new(n);
    let mut ck_ok = Bools::new(n);
    let mut producer = Strs::dense(n, n * 16);
    let mut seq = Dense::<Int64Type>::new(n);
    let mut hseq = Dense::<Int64Type>::new(n);
    let mut publish = Dense::<Int64Type>::new(n);
    let mut event = Prim::<Int64Type>::new(n);
    let mut num = Dense::<Int32Type>::new(n);
    let mut is_batch = Dense::<Bool>::new(n);
    let mut compression = Strs::dense(n, n * 4);
    let mut usize_ = Dense::<Int64Type>::new(n);
    let mut psize = Dense::<Int64Type>::new(n);
    let mut pkey = Strs::new(n, n * 8);
    let mut okey = Var::new(n, 0);
    let mut nprops = Dense::<Int32Type>::new(n);
    let mut uuid = Strs::new(n, 0);
    let mut chunk_id = Prim::<Int32Type>::new(n);
    let mut nchunks = Prim::<Int32Type>::new(n);
    let mut chunk_total = Prim::<Int32Type>::new(n);
    let mut marker = Prim::<Int32Type>::new(n);
    let mut deliver_at = Prim::<Int64Type>::new(n);
    let mut txn_most = Prim::<Int64Type>::new(n);
    let mut txn_least = Prim::<Int64Type>::new(n);
    let mut schema_version = Var::new(n, 0);
    let mut replicated_from = Strs::new(n, 0);
    let mut encrypted = Dense::<Bool>::new(n);
    let mut err = Strs::new(n, 0);

    // A row that cannot be decoded is null in every column, with the reason (if any) in `error`.
    // Optional slots start null; dense columns take a default under the rows' null, variable-width
    // columns an empty value (under the rows' null, or their own).
    macro_rules! null_row {
        ($i:expr, $e:expr) => {{
            rows.push(false);
            for c in [&mut seq, &mut hseq, &mut publish, &mut usize_, &mut psize] {
                c.skip();
            }
            for c in [&mut num, &mut nprops] {
                c.skip();
            }
            for c in [&mut has_ck, &mut is_batch, &mut encrypted] {
                c.skip();
            }
            producer.skip();
            compression.skip();
            for c in [&mut pkey, &mut uuid, &mut replicated_from] {
                c.push($i, None);
            }
            for c in [&mut okey, &mut schema_version] {
                c.push($i, None);
            }
            let e: Option<Error> = $e;
            err.push($i, e.map(|e| e.to_string()).as_deref());
        }};
    }

    for i in 0..n {
        if i + PREFETCH_AHEAD < n {
            if let Some(d) = get(i + PREFETCH_AHEAD) {
                prefetch_head(d, 256);
            }
        }
        // Matched step by step rather than through one combined Result, so the decoded fields are not
        // moved around (they are a few hundred bytes per row).
        let Some(d) = get(i) else {
            null_row!(i, None);
            continue;
        };
        let dec = match decode_one(d, verify_checksum) {
            Ok(dec) => dec,
            Err(e) => {
                null_row!(i, Some(e));
                continue;
            }
        };
        let m = &dec.meta;
        let (p, k, u, rf, codec) = match meta_strings(&dec) {
            Ok(s) => s,
            Err(e) => {
                null_row!(i, Some(e));
                continue;
            }
        };
        // Required fields: scan_metadata refuses metadata without them, so the defaults are never used.
        let (p, sequence_id, publish_time) =
            (p.unwrap_or_default(), m.sequence_id.unwrap_or(0), m.publish_time.unwrap_or(0));
        rows.push(true);
        b_ts.set(i, dec.bem_ts.map(|v| v as i64));
        b_idx.set(i, dec.bem_index.map(|v| v as i64));
        has_ck.push(dec.layout.checksum.is_some());
        ck_ok.set(i, dec.checksum_ok);
        producer.push_value(p);
        seq.push(sequence_id as i64);
        hseq.push(m.highest_sequence_id as i64);
        publish.push(publish_time as i64);
        event.set(i, (m.event_time != 0).then_some(m.event_time as i64));
        num.push(m.num_messages_in_batch.unwrap_or(1));
        is_batch.push(m.num_messages_in_batch.is_some());
        compression.push_value(codec.name());
        usize_.push(i64::from(m.uncompressed_size));
        psize.push(dec.layout.payload.len() as i64);
        pkey.push(i, k);
        okey.push(i, raw(&dec, &m.ordering_key));
        nprops.push(m.num_properties as i32);
        uuid.push(i, u);
        chunk_id.set(i, m.chunk_id);
        nchunks.set(i, m.num_chunks_from_msg);
        chunk_total.set(i, m.total_chunk_msg_size);
        marker.set(i, m.marker_type);
        deliver_at.set(i, m.deliver_at_time);
        txn_most.set(i, m.txnid_most_bits.map(|v| v as i64));
        txn_least.set(i, m.txnid_least_bits.map(|v| v as i64));
        schema_version.push(i, raw(&dec, &m.schema_version));
        replicated_from.push(i, rf);
        encrypted.push(m.encrypted);
        err.push(i, None);
    }
    let rows = rows.finish();
    let rows = &rows;
    Ok(batch(vec![
        nullable("broker_timestamp", b_ts.finish()),
        nullable("index", b_idx.finish()),
        nullable("has_checksum", has_ck.finish(rows)),
        nullable("checksum_ok", ck_ok.finish()),
        nullable("producer_name", producer.finish(Some(rows))?),
        nullable("sequence_id", seq.finish(rows)),
        nullable("highest_sequence_id", hseq.finish(rows)),
        nullable("publish_time", publish.finish(rows)),
        nullable("event_time", event.finish()),
        nullable("num_messages", num.finish(rows)),
        nullable("is_batch", is_batch.finish(rows)),
        nullable("compression", compression.finish(Some(rows))?),
        nullable("uncompressed_size", usize_.finish(rows)),
        nullable("payload_size", psize.finish(rows)),
        nullable("partition_key", pkey.finish(None)?),
        nullable("ordering_key", okey.finish(None)?),
        nullable("num_properties", nprops.finish(rows)),
        nullable("uuid", uuid.finish(None)?),
        nullable("chunk_id", chunk_id.finish()),
        nullable("num_chunks_from_msg", nchunks.finish()),
        nullable("total_chunk_msg_size", chunk_total.finish()),
        nullable("marker_type", marker.finish()),
        nullable("deliver_at_time", deliver_at.finish()),
        nullable("txnid_most_bits", txn_most.finish()),
        nullable("txnid_least_bits", txn_least.finish()),
        nullable("schema_version", schema_version.finish(None)?),
        nullable("replicated_from", replicated_from.finish(None)?),
        nullable("encrypted", encrypted.finish(rows)),
        error_column(err.finish(None)?),
    ]))
}

/// The output columns of [`explode_messages`], appended row by row.
struct ExplodeRows {
    entry_index: Vec<i64>,
    batch_index: Prim<Int32Type>,
    payload: PushVar<i64>,
    key: PushVar<i32>,
    okey: PushVar<i32>,
    props: PushMap,
    event: Prim<Int64Type>,
    publish: Prim<Int64Type>,
    producer: PushVar<i32>,
    seq: Prim<Int64Type>,
    null_value: Bools,
    compacted_out: Bools,
    b_ts: Prim<Int64Type>,
    msg_index: Prim<Int64Type>,
    err: PushVar<i32>,
}

/// What every message of one entry shares.
struct EntryCommon<'a> {
    row: i64,
    publish_time: i64,
    producer: &'a str,
    broker_timestamp: Option<i64>,
    broker_index: Option<u64>,
    batch_size: Option<i64>,
}

/// One message's own fields, borrowed.
/// `key` and the properties are UTF-8 (checked by the batch scan, or Strings already); the string
/// columns check their whole buffers once more when they are built.
struct MessageFields<'a, P: Iterator<Item = (&'a [u8], &'a [u8])>> {
    batch_index: i32,
    payload: &'a [u8],
    key: Option<&'a [u8]>,
    ordering_key: Option<&'a [u8]>,
    properties: P,
    event_time: Option<u64>,
    sequence_id: u64,
    null_value: bool,
    compacted_out: bool,
}

impl ExplodeRows {
    fn new(size: OutputSize) -> Self {
        let n = size.rows;
        let (mut payload, mut producer) = (PushVar::new(n, 0), PushVar::new(n, 0));
        // Sized up front (see `OutputSize`): growing by doubling would copy the values again and fault
        // in every larger buffer. A refused reservation only means growing as needed.
        let _ = payload.reserve(size.bytes);
        let _ = producer.reserve(size.producer_bytes);
        ExplodeRows {
            entry_index: Vec::with_capacity(n),
            batch_index: Prim::with_capacity(n),
            payload,
            key: PushVar::new(n, 0),
            okey: PushVar::new(n, 0),
            props: PushMap::new(n),
            event: Prim::with_capacity(n),
            publish: Prim::with_capacity(n),
            producer,
            seq: Prim::with_capacity(n),
            null_value: Bools::with_capacity(n),
            compacted_out: Bools::with_capacity(n),
            b_ts: Prim::with_capacity(n),
            msg_index: Prim::with_capacity(n),
            err: PushVar::new(n, 0),
        }
    }

    #[inline(always)]
    fn message<'a>(&mut self, c: &EntryCommon<'_>, m: MessageFields<'a, impl Iterator<Item = (&'a [u8], &'a [u8])>>) {
        self.entry_index.push(c.row);
        self.batch_index.push(Some(m.batch_index));
        self.payload.push(Some(m.payload));
        self.key.push(m.key);
        self.okey.push(m.ordering_key);
        self.props.push(Some(m.properties));
        self.event.push(m.event_time.map(|v| v as i64));
        self.publish.push(Some(c.publish_time));
        self.producer.push(Some(c.producer.as_bytes()));
        self.seq.push(Some(m.sequence_id as i64));
        self.null_value.push(Some(m.null_value));
        self.compacted_out.push(Some(m.compacted_out));
        self.b_ts.push(c.broker_timestamp);
        self.msg_index.push(c.broker_index.map(|x| message_index(x, c.batch_size, i64::from(m.batch_index))));
        self.err.push(None);
    }

    /// Every record of a canonical batch, column by column: what [`Self::message`] gives for each in
    /// turn, with each column's loop on its own (its length in a register, fills for the values the
    /// messages share) rather than ~25 interleaved vector pushes per message.
    fn batch(
        &mut self,
        c: &EntryCommon<'_>,
        body: &[u8],
        recs: &[RecordRef],
        props: &[(std::ops::Range<usize>, std::ops::Range<usize>)],
        entry_sequence_id: u64,
        entry_event_time: Option<u64>,
    ) {
        let k = recs.len();
        let range = |r: &Option<std::ops::Range<usize>>| r.clone().map(|r| &body[r]);
        self.entry_index.resize(self.entry_index.len() + k, c.row);
        self.batch_index.push_all(0..k as i32);
        for r in recs {
            self.payload.push(Some(&body[r.payload.clone()]));
        }
        for r in recs {
            self.key.push(range(&r.key));
        }
        for r in recs {
            self.okey.push(range(&r.ordering_key));
        }
        if recs.iter().all(|r| r.properties.is_empty()) {
            self.props.push_empty(k);
        } else {
            for r in recs {
                self.props
                    .push(Some(props[r.properties.clone()].iter().map(|(k, v)| (&body[k.clone()], &body[v.clone()]))));
            }
        }
        self.event.push_each(recs, |r| r.event_time.or(entry_event_time).filter(|&t| t != 0).map(|v| v as i64));
        self.publish.push_repeat(Some(c.publish_time), k);
        self.producer.push_repeat(Some(c.producer.as_bytes()), k);
        self.seq.push_all(recs.iter().map(|r| r.sequence_id.unwrap_or(entry_sequence_id) as i64));
        self.null_value.push_all(recs.iter().map(|r| r.null_value));
        self.compacted_out.push_all(recs.iter().map(|r| r.compacted_out));
        self.b_ts.push_repeat(c.broker_timestamp, k);
        match c.broker_index {
            Some(x) => self.msg_index.push_all((0..k).map(|bi| message_index(x, c.batch_size, bi as i64))),
            None => self.msg_index.push_repeat(None, k),
        }
        self.err.push_repeat(None, k);
    }

    /// A corrupt entry, or a null input row (with no error), gives one all-null row, so row
    /// counts stay traceable to the input.
    fn failed(&mut self, row: usize, error: Option<String>) {
        self.entry_index.push(row as i64);
        self.batch_index.push(None);
        self.payload.push(None);
        self.key.push(None);
        self.okey.push(None);
        self.props.push(None::<std::iter::Empty<(&[u8], &[u8])>>);
        for b in [&mut self.event, &mut self.publish, &mut self.seq, &mut self.b_ts, &mut self.msg_index] {
            b.push(None);
        }
        self.producer.push(None);
        self.null_value.push(None);
        self.compacted_out.push(None);
        self.err.push(error.as_deref().map(str::as_bytes));
    }
}

/// What explode will emit for a batch of entries, to size its columns up front: payload bytes (each
/// entry's stored payload, or its declared uncompressed size within the limit), rows (a batch's
/// declared size) and producer-name bytes (one name per row).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct OutputSize {
    pub(crate) bytes: usize,
    pub(crate) rows: usize,
    pub(crate) producer_bytes: usize,
}

/// A batched message takes at least its 4-byte metadata size and that metadata's required
/// `payload_size` (2 bytes).
const MIN_BATCHED_MESSAGE: usize = 6;
/// The most rows reserved up front: ~100 MB across the rows' columns.
const MAX_RESERVED_ROWS: usize = 1 << 20;

impl OutputSize {
    /// One entry's share: its `stored` payload bytes and its metadata, when that decodes.
    pub(crate) fn add(&mut self, stored: usize, meta: Option<&MetaFields>, limit: usize) {
        let Some(m) = meta else {
            (self.bytes, self.rows) = (self.bytes.saturating_add(stored), self.rows.saturating_add(1));
            return;
        };
        let bytes = if m.compression != 0 { (m.uncompressed_size as usize).min(limit) } else { stored };
        let rows = match m.num_messages_in_batch {
            Some(k) if k > 1 => (k as usize).min(bytes / MIN_BATCHED_MESSAGE).max(1),
            _ => 1,
        };
        let producer = m.producer_name.as_ref().map_or(0, |r| r.len());
        self.bytes = self.bytes.saturating_add(bytes);
        self.rows = self.rows.saturating_add(rows);
        self.producer_bytes = self.producer_bytes.saturating_add(producer.saturating_mul(rows));
    }

    /// Declared sizes are input, so they only size reservations, each capped by the batch's `input`
    /// bytes over `entries` entries: payload bytes at 64x, rows at one per 2 input bytes (plus one per
    /// entry) and [`MAX_RESERVED_ROWS`] (the row columns' reservations cannot fail gracefully, and a view
    /// array's bytes count each view), producer names at 16x. Past a cap the columns grow as they need.
    pub(crate) fn capped(self, entries: usize, input: usize) -> Self {
        OutputSize {
            bytes: self.bytes.min(input.saturating_mul(64)),
            rows: self.rows.min((input / 2).saturating_add(entries)).min(MAX_RESERVED_ROWS),
            producer_bytes: self.producer_bytes.min(input.saturating_mul(16)),
        }
    }
}

/// [`OutputSize`] of the entries `rows` of `col`.
fn output_estimate(col: &EntryColumn, rows: impl Iterator<Item = usize>, limit: usize) -> OutputSize {
    let (mut size, mut entries) = (OutputSize::default(), 0usize);
    for i in rows {
        entries += 1;
        // a null or unparsable entry is one row too (all null, or its error)
        let Some((d, layout)) = col.get(i).and_then(|d| Some((d, parse_layout(d).ok()?))) else {
            size.add(0, None, limit);
            continue;
        };
        size.add(layout.payload.len(), scan_metadata(&d[layout.metadata.clone()]).ok().as_ref(), limit);
    }
    size.capped(entries, col.total_bytes())
}

/// Scratch buffers reused from entry to entry by [`explode_entry`].
#[derive(Default)]
struct ExplodeScratch {
    recs: Vec<RecordRef>,
    prop_ranges: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>,
    body: Vec<u8>,
}

/// Declared bytes [`decompress_ahead`] holds at once at most: a batch's entries past it are
/// decompressed one at a time as they are exploded.
const AHEAD_BYTES: usize = 64 << 20;
/// The most threads [`decompress_ahead`] starts for one batch, whatever it is asked for.
const MAX_DECODE_THREADS: usize = 64;
/// Compressed bytes below which a batch is not split over threads: starting one costs more than it saves.
/// None in tests and fuzzing, so that their small batches take the threaded path too.
const AHEAD_MIN_STORED: usize = if cfg!(any(test, feature = "fuzzing")) { 0 } else { 256 << 10 };

/// One entry's compressed payload, to be decompressed ahead of its explode ([`decompress_ahead`]).
pub(crate) struct Compressed<'a> {
    pub codec: i32,
    /// The declared uncompressed size (a successful decompression has exactly this many bytes).
    pub size: usize,
    pub data: &'a [u8],
}

/// The entries' decompressed payloads, made on `threads` threads (the calling one among them), in the
/// items' order; None where an item is None, past [`AHEAD_BYTES`], or fails to decompress (its explode
/// then decompresses it again and reports the error as it would have). The explode itself is one pass
/// in order; decompression (ZSTD most of all) is the part that splits, so a second core takes half.
pub(crate) fn decompress_ahead(items: &[Option<Compressed>], threads: usize, limit: usize) -> Vec<Option<Vec<u8>>> {
    let mut out: Vec<Option<Vec<u8>>> = Vec::new();
    out.resize_with(items.len(), || None);
    let threads = threads.min(MAX_DECODE_THREADS); // a caller's count, never a thread per entry past this
    if threads < 2 {
        return out;
    }
    let (mut picked, mut declared, mut stored) = (Vec::new(), 0usize, 0usize);
    for (k, c) in items.iter().enumerate() {
        let Some(c) = c else { continue };
        if c.size > limit || declared + c.size > AHEAD_BYTES {
            continue;
        }
        (declared, stored) = (declared + c.size, stored + c.data.len());
        picked.push(k);
    }
    #[allow(clippy::absurd_extreme_comparisons)] // the minimum is 0 in tests and fuzzing
    if stored < AHEAD_MIN_STORED {
        return out;
    }
    // contiguous groups of about equal compressed bytes
    let mut groups: Vec<&[usize]> = Vec::with_capacity(threads);
    let (mut start, mut acc) = (0, 0usize);
    for (j, &k) in picked.iter().enumerate() {
        acc += items[k].as_ref().map_or(0, |c| c.data.len());
        if groups.len() + 1 < threads && acc * threads >= stored * (groups.len() + 1) {
            groups.push(&picked[start..=j]);
            start = j + 1;
        }
    }
    groups.push(&picked[start..]);
    let run = |group: &[usize]| -> Vec<(usize, Vec<u8>)> {
        let mut done = Vec::with_capacity(group.len());
        for &k in group {
            let c = items[k].as_ref().expect("picked items are Some");
            let Ok(codec) = Codec::from_wire(c.codec) else { continue };
            let mut body = Vec::new();
            if crate::codec::compression::decompress_into(codec, c.data, c.size, limit, &mut body).is_ok() {
                done.push((k, body));
            }
        }
        done
    };
    let results: Vec<Vec<(usize, Vec<u8>)>> = std::thread::scope(|s| {
        let spawned: Vec<_> = groups[1..]
            .iter()
            .map(|&g| (g, std::thread::Builder::new().name("pulsarkit-decompress".into()).spawn_scoped(s, || run(g))))
            .collect();
        let mut results = vec![run(groups[0])];
        for (g, handle) in spawned {
            // a thread the system would not start, or one that failed: its group decompressed here
            results.push(handle.ok().and_then(|h| h.join().ok()).unwrap_or_else(|| run(g)));
        }
        results
    });
    for (k, body) in results.into_iter().flatten() {
        out[k] = Some(body);
    }
    out
}

/// Explodes entries into one row per message, decompressing and splitting batches.
/// `entry_index` points back at the input row, so callers can carry ledger/entry ids along.
/// A corrupt entry yields exactly one row with `batch_index` null and the `error` set.
pub fn explode_messages(
    col: &EntryColumn,
    include_compacted_out: bool,
    verify_checksum: bool,
    limit: usize,
) -> Result<RecordBatch> {
    let n = col.len();
    let mut out = ExplodeRows::new(output_estimate(col, 0..n, limit));
    let mut scratch = ExplodeScratch::default();
    for i in 0..n {
        let Some(d) = col.get(i) else {
            out.failed(i, None);
            continue;
        };
        if let Err(e) = explode_entry(&mut out, i, d, include_compacted_out, verify_checksum, limit, &mut scratch, None)
        {
            out.failed(i, Some(e.to_string()));
        }
    }
    out.finish()
}

/// The messages of entry `row` (bytes `d`) appended to `out`; on an error nothing is appended.
///
/// Batches in the canonical encoding are split in place ([`scan_batch_refs`]: borrowed ranges, each
/// byte copied once into the output); anything else goes through [`entry_messages`], the
/// single-entry decoder, which gives the same rows or the exact error. `ahead`: the entry's payload
/// already decompressed ([`decompress_ahead`]), used instead of decompressing it again.
#[allow(clippy::too_many_arguments)]
fn explode_entry(
    out: &mut ExplodeRows,
    row: usize,
    d: &[u8],
    include_compacted_out: bool,
    verify_checksum: bool,
    limit: usize,
    scratch: &mut ExplodeScratch,
    ahead: Option<&[u8]>,
) -> Result<()> {
    let p = parse_entry(d, verify_checksum)?;
    let md = &p.metadata;
    let bem = || {
        p.layout
            .broker_entry_metadata
            .as_ref()
            .map(|r| decode_broker_entry_metadata(&d[r.clone()], r.start))
            .transpose()
    };
    let common = |bem: Option<crate::codec::proto::BrokerEntryMetadata>| EntryCommon {
        row: row as i64,
        publish_time: md.publish_time as i64,
        producer: &md.producer_name,
        broker_timestamp: bem.as_ref().and_then(|b| b.broker_timestamp).map(|v| v as i64),
        broker_index: bem.as_ref().and_then(|b| b.index),
        batch_size: md.num_messages_in_batch.map(i64::from),
    };
    let nonzero = |t: Option<u64>| t.filter(|&t| t != 0);
    let ExplodeScratch { recs, prop_ranges, body: buf } = scratch;
    if md.compacted_batch_indexes.is_empty() {
        let body = match ahead {
            Some(body) => Ok(body),
            None => payload_body(d, &p, limit, buf),
        };
        if let Ok(body) = body {
            match md.num_messages_in_batch {
                None => {
                    // A single message: the whole body, its fields from the entry's metadata.
                    out.message(
                        &common(bem()?),
                        MessageFields {
                            batch_index: -1,
                            payload: body,
                            key: md.partition_key.as_deref().map(str::as_bytes),
                            ordering_key: md.ordering_key.as_deref(),
                            properties: md.properties.iter().map(|kv| (kv.key.as_bytes(), kv.value.as_bytes())),
                            event_time: nonzero(md.event_time),
                            sequence_id: md.sequence_id,
                            null_value: md.null_value.unwrap_or(false),
                            compacted_out: false,
                        },
                    );
                    return Ok(());
                }
                Some(count) if scan_batch_refs(body, count, recs, prop_ranges) => {
                    let c = common(bem()?);
                    if include_compacted_out || !recs.iter().any(|r| r.compacted_out) {
                        out.batch(&c, body, recs, prop_ranges, md.sequence_id, md.event_time);
                        return Ok(());
                    }
                    for (bi, r) in recs.iter().enumerate() {
                        if r.compacted_out && !include_compacted_out {
                            continue;
                        }
                        let range = |r: &Option<std::ops::Range<usize>>| r.clone().map(|r| &body[r]);
                        out.message(
                            &c,
                            MessageFields {
                                batch_index: bi as i32,
                                payload: &body[r.payload.clone()],
                                key: range(&r.key),
                                ordering_key: range(&r.ordering_key),
                                properties: prop_ranges[r.properties.clone()]
                                    .iter()
                                    .map(|(k, v)| (&body[k.clone()], &body[v.clone()])),
                                // a message without its own event time keeps the entry's, as in MessageImpl.create
                                event_time: nonzero(r.event_time.or(md.event_time)),
                                sequence_id: r.sequence_id.unwrap_or(md.sequence_id),
                                null_value: r.null_value,
                                compacted_out: r.compacted_out,
                            },
                        );
                    }
                    return Ok(());
                }
                Some(_) => {}
            }
        }
    }
    // Everything else (PIP-429 retained-index batches, non-canonical encodings, errors): the
    // single-entry decoder, whose result or error is the reference.
    let msgs = entry_messages(d, &p, include_compacted_out, limit)?;
    let c = common(bem()?);
    for m in &msgs {
        out.message(
            &c,
            MessageFields {
                batch_index: m.batch_index,
                payload: &m.payload,
                key: m.key.as_deref().map(str::as_bytes),
                ordering_key: m.ordering_key.as_deref(),
                properties: m.properties.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())),
                event_time: m.event_time,
                sequence_id: m.sequence_id,
                null_value: m.null_value,
                compacted_out: m.compacted_out,
            },
        );
    }
    Ok(())
}

impl ExplodeRows {
    fn finish(self) -> Result<RecordBatch> {
        let o = self;
        Ok(batch(vec![
            required("entry_index", Arc::new(PrimitiveArray::<Int64Type>::from(o.entry_index))),
            nullable("batch_index", o.batch_index.finish()),
            nullable("payload", o.payload.binary()?),
            nullable("key", o.key.utf8()?),
            nullable("ordering_key", o.okey.binary()?),
            nullable("properties", o.props.finish()?),
            nullable("event_time", o.event.finish()),
            nullable("publish_time", o.publish.finish()),
            nullable("producer_name", o.producer.utf8()?),
            nullable("sequence_id", o.seq.finish()),
            nullable("null_value", o.null_value.finish()),
            nullable("compacted_out", o.compacted_out.finish()),
            nullable("broker_timestamp", o.b_ts.finish()),
            nullable("index", o.msg_index.finish()),
            error_column(o.err.utf8()?),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_are_counted_one_by_one_for_the_strip_output_type() {
        // 33 views of one 64 MiB block: 2.1 GB of values in a 64 MiB buffer (never touched: zeroed pages)
        let block = Buffer::from_vec(vec![0u8; 64 << 20]);
        let mut b = arrow_array::builder::BinaryViewBuilder::new();
        let blk = b.append_block(block);
        for _ in 0..33 {
            b.try_append_view(blk, 0, 64 << 20).unwrap();
        }
        let arr = b.finish();
        let col = EntryColumn::from_array(&arr).unwrap();
        assert_eq!(col.value_bytes(), 33 << 26);
        let small = arrow_array::BinaryViewArray::from_iter_values([b"abc".as_slice()]);
        let out = strip_broker_entry_metadata(&EntryColumn::from_array(&small).unwrap());
        assert_eq!(out.column(0).data_type(), &arrow_schema::DataType::Binary);
    }

    fn meta(compression: i32, uncompressed_size: u32, batch: Option<i32>, producer: usize) -> MetaFields {
        MetaFields {
            compression,
            uncompressed_size,
            num_messages_in_batch: batch,
            producer_name: Some(0..producer),
            ..MetaFields::default()
        }
    }

    #[test]
    fn output_size_counts_a_batchs_declared_messages_and_decompressed_bytes() {
        let mut s = OutputSize::default();
        s.add(300, Some(&meta(1, 4000, Some(100), 12)), 1 << 20); // LZ4, 100 messages
        s.add(50, Some(&meta(0, 0, None, 12)), 1 << 20); // one plain message
        s.add(70, None, 1 << 20); // metadata that does not decode: its stored bytes, one row
        assert_eq!(s, OutputSize { bytes: 4000 + 50 + 70, rows: 102, producer_bytes: 12 * 101 });
        assert_eq!(s.capped(3, 1000), s);
        // 100 bytes of input reserve at most 100 / 2 + 3 rows (past it the columns grow)
        assert_eq!(s.capped(3, 100).rows, 53);
    }

    #[test]
    fn declared_sizes_only_reserve_what_the_input_can_hold() {
        let mut s = OutputSize::default();
        // a billion messages declared in 600 bytes: at most one per 6 bytes
        s.add(10, Some(&meta(1, 600, Some(1_000_000_000), 0)), 1 << 20);
        assert_eq!(s.rows, 100);
        // an uncompressed size past the limit counts as the limit
        let mut t = OutputSize::default();
        t.add(10, Some(&meta(2, u32::MAX, Some(i32::MAX), 1000)), 1 << 20);
        assert_eq!(t.bytes, 1 << 20);
        let c = t.capped(1, 100);
        assert_eq!(c, OutputSize { bytes: 6400, rows: 1 + 100 / 2, producer_bytes: 1600 });
        // however large the input (a view array counts the bytes of each view)
        let huge = OutputSize { bytes: 0, rows: usize::MAX, producer_bytes: 0 };
        assert_eq!(huge.capped(1, usize::MAX).rows, MAX_RESERVED_ROWS);
        // a negative or absent batch size is one row
        let mut u = OutputSize::default();
        u.add(10, Some(&meta(0, 0, Some(-5), 0)), 1 << 20);
        u.add(10, Some(&meta(0, 0, Some(0), 0)), 1 << 20);
        assert_eq!(u.rows, 2);
    }

    #[test]
    fn a_batch_of_entries_is_estimated_at_its_exploded_rows() {
        use crate::codec::batch::encode_batch;
        use crate::codec::proto::{MessageMetadata, SingleMessageMetadata};
        use arrow_array::BinaryArray;
        let md = MessageMetadata { producer_name: "producer-1".into(), publish_time: 1, ..Default::default() };
        // payloads that do not compress, as most real ones barely do
        let mut rng = crate::fuzz::Rng::new(7);
        let payloads: Vec<Vec<u8>> = (0..351).map(|_| (0..100).map(|_| rng.next_u64() as u8).collect()).collect();
        let mut next = payloads.iter();
        let entries: Vec<Vec<u8>> = [(Codec::Lz4, 300), (Codec::Zstd, 50), (Codec::None, 1)]
            .iter()
            .map(|&(codec, n)| {
                let smm = SingleMessageMetadata { payload_size: 100, ..Default::default() };
                let msgs: Vec<(SingleMessageMetadata, &[u8])> =
                    next.by_ref().take(n).map(|p| (smm.clone(), &p[..])).collect();
                encode_batch(&md, &msgs, codec, true).unwrap()
            })
            .collect();
        let arr = BinaryArray::from_iter_values(&entries);
        let col = EntryColumn::from_array(&arr).unwrap();
        let size = output_estimate(&col, 0..col.len(), 1 << 20);
        let out = explode_messages(&col, false, true, 1 << 20).unwrap();
        assert_eq!((size.rows, out.num_rows()), (351, 351));
        // the columns were sized for them: none grew
        let mut rows = ExplodeRows::new(size);
        let reserved = rows.entry_index.capacity();
        let mut scratch = ExplodeScratch::default();
        for (i, e) in entries.iter().enumerate() {
            explode_entry(&mut rows, i, e, false, true, 1 << 20, &mut scratch, None).unwrap();
        }
        assert_eq!((rows.entry_index.len(), rows.entry_index.capacity()), (351, reserved));
        // each message's 4-byte size and metadata on top of its payload: an over-estimate, never short
        assert!((351 * 100..351 * 120).contains(&size.bytes), "{size:?}");
        assert_eq!(size.producer_bytes, 351 * "producer-1".len());
    }

    #[test]
    fn decompress_ahead_gives_each_payload_in_order_or_leaves_it_to_the_explode() {
        use crate::codec::compression::compress;
        let mut rng = crate::fuzz::Rng::new(11);
        let bodies: Vec<Vec<u8>> =
            (0..40).map(|i| (0..(50 + i * 37)).map(|_| rng.next_u64() as u8 % 7).collect()).collect();
        let codecs = [Codec::Lz4, Codec::Zstd, Codec::Zlib, Codec::Snappy];
        let stored: Vec<Vec<u8>> =
            bodies.iter().enumerate().map(|(i, b)| compress(codecs[i % 4], b).unwrap()).collect();
        let mut items: Vec<Option<Compressed>> = stored
            .iter()
            .enumerate()
            .map(|(i, d)| Some(Compressed { codec: codecs[i % 4] as i32, size: bodies[i].len(), data: d }))
            .collect();
        items[3] = None; // not compressed
        items[5].as_mut().unwrap().size += 1; // declares a size it does not inflate to
        items[7].as_mut().unwrap().codec = 99; // no such codec
        let corrupt = vec![0xffu8; 64];
        items[9] = Some(Compressed { codec: Codec::Zstd as i32, size: 10, data: &corrupt });
        for threads in [2, 3, 8, 64, usize::MAX] {
            let got = decompress_ahead(&items, threads, 1 << 20);
            assert_eq!(got.len(), items.len());
            for (i, g) in got.iter().enumerate() {
                match i {
                    3 | 5 | 7 | 9 => assert!(g.is_none(), "item {i} on {threads} threads"),
                    _ => assert_eq!(g.as_deref(), Some(&bodies[i][..]), "item {i} on {threads} threads"),
                }
            }
        }
        // one thread: nothing ahead; past the limit: left to the explode, which reports it
        assert!(decompress_ahead(&items, 1, 1 << 20).iter().all(Option::is_none));
        let small = decompress_ahead(&items, 2, 100);
        assert!(small
            .iter()
            .enumerate()
            .all(|(i, g)| g.is_none() == (i == 3 || bodies[i].len() > 100 || i == 5 || i == 7 || i == 9)));
    }
}
