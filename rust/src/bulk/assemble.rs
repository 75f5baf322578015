//! A message read's batch of entries turned into rows of the one message schema
//! (`pulsarkit.scan.schema`: `MESSAGE_FIELDS`, `marker` when asked, then `_ord`) in one pass: each
//! entry's metadata decoded, its transaction's state looked up, read-committed and the time filters
//! applied before anything is decompressed, then the plain entries exploded and every column built.
//! The entries this does not turn into rows (markers, chunks, encrypted entries: per-entry rules;
//! entries that do not decode) are named in a second, per-entry batch for the caller.
use super::compaction::PositionedEntries;
use super::{
    decode_one, decompress_ahead, explode_entry, meta_strings, raw, Compressed, ExplodeRows, ExplodeScratch, OutputSize,
};
use crate::codec::compression::Codec;
use crate::columns::{column_too_large, Prim, PushMap, PushVar};
use crate::error::{Error, Result};
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Int32Array, Int64Array, Int8Array, RecordBatch, StringArray,
};
use arrow_buffer::{BooleanBuffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{Field, Schema};
use std::sync::Arc;

/// `status` of an entry whose rows (if any: read-committed and the time filters may drop it) are in
/// the rows batch.
pub const PLAIN: i8 = 0;
/// `status` of a marker, a chunk or an encrypted entry: no rows here, the caller's per-entry rules.
pub const SPECIAL: i8 = 1;
/// `status` of an entry whose metadata does not decode (`error` says why).
pub const NOT_AN_ENTRY: i8 = 2;
/// `status` of a plain entry whose messages do not decode (`error` says why): no rows, none of it.
pub const UNDECODABLE: i8 = 3;
/// `status` of a null entry (one the caller could not read).
pub const UNREAD: i8 = 4;

/// The transactions' states a read knows, sorted by `(most, least)` as unsigned; a transaction not
/// in it has the state `unknown`.
pub struct TxnStates<'a> {
    most: &'a [i64],
    least: &'a [i64],
    states: &'a StringArray,
    unknown: &'a str,
}

impl<'a> TxnStates<'a> {
    pub fn new(most: &'a [i64], least: &'a [i64], states: &'a StringArray, unknown: &'a str) -> Result<Self> {
        if most.len() != least.len() || most.len() != states.len() {
            return Err(Error::invalid("the transaction keys and states differ in length"));
        }
        let key = |i: usize| (most[i] as u64, least[i] as u64);
        if (1..most.len()).any(|i| key(i - 1) >= key(i)) {
            return Err(Error::invalid("the transaction keys are not sorted (as unsigned) and distinct"));
        }
        Ok(TxnStates { most, least, states, unknown })
    }

    fn state(&self, most: u64, least: u64) -> &'a str {
        let key = |i: usize| (self.most[i] as u64, self.least[i] as u64);
        let (mut lo, mut hi) = (0, self.most.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match key(mid).cmp(&(most, least)) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal if self.states.is_valid(mid) => return self.states.value(mid),
                std::cmp::Ordering::Equal => return self.unknown,
            }
        }
        self.unknown
    }
}

/// The entry time a filter tests (every row of an entry carries its entry's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeColumn {
    PublishTime,
    BrokerTimestamp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    In,
    Gt,
    Ge,
    Lt,
    Le,
}

/// A pushed-down filter on an entry time: `column op values` (one value but for `in`); an absent time
/// passes no filter.
#[derive(Debug, Clone)]
pub struct TimeFilter {
    column: TimeColumn,
    op: Op,
    values: Vec<i64>,
}

impl TimeFilter {
    pub fn new(column: &str, op: &str, values: Vec<i64>) -> Result<Self> {
        let column = match column {
            "publish_time" => TimeColumn::PublishTime,
            "broker_timestamp" => TimeColumn::BrokerTimestamp,
            c => return Err(Error::invalid(format!("no time filter on column {c:?}"))),
        };
        let op = match op {
            "=" => Op::Eq,
            "in" => Op::In,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "<" => Op::Lt,
            "<=" => Op::Le,
            o => return Err(Error::invalid(format!("no time filter with operator {o:?}"))),
        };
        if op != Op::In && values.len() != 1 {
            return Err(Error::invalid("a time filter other than 'in' takes one value"));
        }
        Ok(TimeFilter { column, op, values })
    }

    fn passes(&self, publish_time: Option<i64>, broker_timestamp: Option<i64>) -> bool {
        let v = match self.column {
            TimeColumn::PublishTime => publish_time,
            TimeColumn::BrokerTimestamp => broker_timestamp,
        };
        let Some(v) = v else { return false };
        match self.op {
            Op::In => self.values.contains(&v),
            Op::Eq => v == self.values[0],
            Op::Gt => v > self.values[0],
            Op::Ge => v >= self.values[0],
            Op::Lt => v < self.values[0],
            Op::Le => v <= self.values[0],
        }
    }
}

/// The longest transaction state or schema version reserved for every row ahead of the explode.
const REPEATED_VALUE_RESERVED: usize = 16;

/// What a batch's rows need besides its entries.
pub struct BatchContext<'a> {
    pub topic: Option<&'a str>,
    pub partition: i32,
    /// Add the `marker` column (null on every row here: markers are the caller's).
    pub markers: bool,
    pub txn: TxnStates<'a>,
    /// Read-committed: no rows of an entry whose transaction is known and not committed.
    pub committed: bool,
    pub time_filters: &'a [TimeFilter],
    /// Decompression limit per payload.
    pub limit: usize,
    /// Threads a batch's payloads are decompressed on, this one among them (1: this one alone).
    pub threads: usize,
}

/// What a plain entry's rows carry besides its messages.
struct Plain<'a> {
    row: usize,
    state: Option<&'a str>,
    most: i64,
    least: i64,
    schema_version: Option<&'a [u8]>,
    /// Its compressed payload, when it is one ([`decompress_ahead`]).
    compressed: Option<Compressed<'a>>,
}

/// The rows of a batch of entries and, one row per entry, `status` ([`PLAIN`], [`SPECIAL`],
/// [`NOT_AN_ENTRY`], [`UNDECODABLE`], [`UNREAD`]; never null), `error` and `batch_size` (the entry's
/// `num_messages_in_batch`, null when it is no batch or does not decode).
///
/// Rows follow the entries' order, a batch's messages in order, compacted-out messages left out;
/// columns as the message schema says: `payload` null for a null value, `event_time` 0 null,
/// `encrypted` false, the transaction's bits and state only where the entry has a transaction, `_ord`
/// the entry's index in the batch.
pub fn assemble_messages(input: &PositionedEntries, cx: &BatchContext) -> Result<(RecordBatch, RecordBatch)> {
    let (col, n) = (input.column(), input.len());
    let (ledger_ids, entry_ids) = input.ids();
    let mut status: Vec<i8> = vec![UNREAD; n];
    let mut errors: Vec<Option<String>> = vec![None; n];
    let mut batch_size: Vec<Option<i32>> = vec![None; n];
    let mut plain: Vec<Plain> = Vec::with_capacity(n);
    // the rows' columns sized from the metadata decoded here, not grown message by message
    let mut size = OutputSize::default();
    for i in 0..n {
        col.prefetch(i + super::PREFETCH_AHEAD, 256);
        let Some(d) = col.get(i) else { continue };
        let dec = match decode_one(d, false) {
            Ok(dec) => dec,
            Err(e) => {
                (status[i], errors[i]) = (NOT_AN_ENTRY, Some(e.to_string()));
                continue;
            }
        };
        if let Err(e) = meta_strings(&dec) {
            (status[i], errors[i]) = (NOT_AN_ENTRY, Some(e.to_string()));
            continue;
        }
        let m = &dec.meta;
        batch_size[i] = m.num_messages_in_batch;
        // Markers.isServerOnlyMarker: any entry with the field, whatever its value, is the broker's
        let marker = m.marker_type.is_some();
        let chunk = m.uuid.is_some() && m.num_chunks_from_msg.is_some_and(|c| c > 1);
        if marker || chunk || m.encrypted {
            status[i] = SPECIAL;
            continue;
        }
        status[i] = PLAIN;
        let (most, least) = (m.txnid_most_bits, m.txnid_least_bits);
        let state = (most.is_some() || least.is_some()).then(|| cx.txn.state(most.unwrap_or(0), least.unwrap_or(0)));
        if cx.committed && state.is_some_and(|s| s != "COMMITTED") {
            continue; // dropped whole, before it is decompressed
        }
        let (publish, broker) = (m.publish_time.map(|v| v as i64), dec.bem_ts.map(|v| v as i64));
        if !cx.time_filters.iter().all(|f| f.passes(publish, broker)) {
            continue;
        }
        let (most, least) = (most.unwrap_or(0) as i64, least.unwrap_or(0) as i64);
        size.add(dec.layout.payload.len(), Some(m), cx.limit);
        // ZLIB and ZSTD only: LZ4 and Snappy decode at about memory speed, and decompressing them ahead into
        // buffers of their own made a read of small LZ4 messages slower (bench/RESULTS.md)
        let slow = m.compression == Codec::Zlib as i32 || m.compression == Codec::Zstd as i32;
        let compressed = (slow && m.num_compacted_batch_indexes == 0).then(|| Compressed {
            codec: m.compression,
            size: m.uncompressed_size as usize,
            data: &d[dec.layout.payload.clone()],
        });
        plain.push(Plain { row: i, state, most, least, schema_version: raw(&dec, &m.schema_version), compressed });
    }
    let mut ahead = {
        let items: Vec<Option<Compressed>> = plain.iter_mut().map(|p| p.compressed.take()).collect();
        decompress_ahead(&items, cx.threads, cx.limit)
    };

    let size = size.capped(plain.len(), col.total_bytes());
    let mut out = ExplodeRows::new(size);
    let mut scratch = ExplodeScratch::default();
    let est = size.rows; // the rows estimated
    let (mut ledger, mut entry, mut ord) = (
        Prim::<Int64Type>::with_capacity(est),
        Prim::<Int64Type>::with_capacity(est),
        Prim::<Int64Type>::with_capacity(est),
    );
    let (mut txn_most, mut txn_least) = (Prim::<Int64Type>::with_capacity(est), Prim::<Int64Type>::with_capacity(est));
    // each row repeats its entry's state and schema version: reserved for every row at the longest one when
    // that is as short as real ones are (a state's name, an 8-byte version), longer ones grown as pushed (a
    // version's length is the input's); capacity no row fills is never touched, so it costs no memory
    let longest = |f: fn(&Plain) -> Option<usize>| {
        plain.iter().filter_map(f).max().filter(|&n| n <= REPEATED_VALUE_RESERVED).unwrap_or(0)
    };
    let (state_len, version_len) = (longest(|p| p.state.map(str::len)), longest(|p| p.schema_version.map(<[u8]>::len)));
    let (mut txn_state, mut schema_version) =
        (PushVar::<i32>::new(est, est * state_len), PushVar::<i32>::new(est, est * version_len));
    for (p, ahead) in plain.iter().zip(ahead.iter_mut()) {
        let d = col.get(p.row).expect("a plain entry is not null");
        let before = out.entry_index.len();
        // verified as the single-entry read verifies it (the client checksum)
        let body = ahead.take(); // freed once copied into the rows
        if let Err(e) = explode_entry(&mut out, p.row, d, false, true, cx.limit, &mut scratch, body.as_deref()) {
            (status[p.row], errors[p.row]) = (UNDECODABLE, Some(e.to_string()));
            continue;
        }
        let k = out.entry_index.len() - before;
        ledger.push_repeat(Some(ledger_ids[p.row]), k);
        entry.push_repeat(Some(entry_ids[p.row]), k);
        ord.push_repeat(Some(p.row as i64), k);
        let has = p.state.is_some();
        txn_most.push_repeat(has.then_some(p.most), k);
        txn_least.push_repeat(has.then_some(p.least), k);
        txn_state.push_repeat(p.state.map(str::as_bytes), k);
        schema_version.push_repeat(p.schema_version, k);
    }

    let k = out.entry_index.len();
    let mut topic = PushVar::<i32>::new(k, cx.topic.map_or(0, |t| t.len() * k));
    topic.push_repeat(cx.topic.map(str::as_bytes), k);
    let mut partition = Prim::<Int32Type>::with_capacity(k);
    partition.push_repeat(Some(cx.partition), k);
    let null_value = out.null_value.finish();
    let nv = null_value.as_any().downcast_ref::<BooleanArray>().expect("null_value is boolean");
    // Java's getData() is null for a null value (the bytes stay in the buffer, unreferenced)
    let payload_nulls = (nv.true_count() > 0).then(|| NullBuffer::new(!nv.values()));
    let (offsets, values, _) = out.payload.parts()?;
    let offsets: Vec<i32> = offsets
        .iter()
        .map(|&o| i32::try_from(o))
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| column_too_large("the payloads of one batch (read smaller batches)", values.len()))?;
    let payload = BinaryArray::try_new(OffsetBuffer::new(ScalarBuffer::from(offsets)), values, payload_nulls)
        .expect("offsets are consistent");
    let event = out.event.finish();
    let event = zero_is_null(event.as_any().downcast_ref::<Int64Array>().expect("event_time is int64"));
    let map_fields = PushMap::named("key", "value");

    let mut cols: Vec<(&str, ArrayRef)> = vec![
        ("topic", topic.utf8()?),
        ("partition", partition.finish()),
        ("ledger_id", ledger.finish()),
        ("entry_id", entry.finish()),
        ("batch_index", out.batch_index.finish()),
        ("key", out.key.utf8()?),
        ("properties", out.props.finish_named(map_fields)?),
        ("payload", Arc::new(payload)),
        ("publish_time", out.publish.finish()),
        ("event_time", Arc::new(event)),
        ("sequence_id", out.seq.finish()),
        ("producer_name", out.producer.utf8()?),
        ("null_value", null_value.clone()),
        ("encrypted", Arc::new(BooleanArray::new(BooleanBuffer::new_unset(k), None))),
        ("broker_timestamp", out.b_ts.finish()),
        ("broker_index", out.msg_index.finish()),
        ("txn_most_bits", txn_most.finish()),
        ("txn_least_bits", txn_least.finish()),
        ("txn_state", txn_state.utf8()?),
        ("schema_version", schema_version.binary()?),
    ];
    if cx.markers {
        cols.push(("marker", Arc::new(StringArray::new_null(k))));
    }
    cols.push(("_ord", ord.finish()));
    let rows = nullable_batch(cols);
    let info = nullable_batch(vec![
        ("status", Arc::new(Int8Array::from(status))),
        ("error", Arc::new(StringArray::from(errors))),
        ("batch_size", Arc::new(Int32Array::from(batch_size))),
    ]);
    Ok((rows, info))
}

/// `v`, with 0 null (a message without an event time).
fn zero_is_null(v: &Int64Array) -> Int64Array {
    if !v.iter().any(|x| x == Some(0)) {
        return v.clone();
    }
    let valid: Vec<bool> = v.iter().map(|x| x.is_some_and(|t| t != 0)).collect();
    Int64Array::new(v.values().clone(), Some(NullBuffer::from(valid)))
}

/// A batch of nullable columns (as `pyarrow.schema` makes every field).
fn nullable_batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
    let fields: Vec<Field> = cols.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), true)).collect();
    let arrays = cols.into_iter().map(|(_, a)| a).collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).expect("columns of one length")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txn_states_looks_up_as_unsigned_and_defaults() {
        // sorted as unsigned: -1 (u64::MAX) after 5
        let (most, least) = ([1i64, 1, 5, -1], [1i64, 2, 0, 3]);
        let states = StringArray::from(vec![Some("COMMITTED"), Some("ABORTED"), None, Some("OPEN")]);
        let t = TxnStates::new(&most, &least, &states, "UNKNOWN").unwrap();
        assert_eq!(t.state(1, 2), "ABORTED");
        assert_eq!(t.state(u64::MAX, 3), "OPEN");
        assert_eq!(t.state(5, 0), "UNKNOWN");
        assert_eq!(t.state(2, 2), "UNKNOWN");
        let (most, least) = ([-1i64, 1], [0i64, 0]);
        let states = StringArray::from(vec!["A", "B"]);
        assert!(TxnStates::new(&most, &least, &states, "UNKNOWN").is_err());
    }

    #[test]
    fn time_filters_never_pass_an_absent_time() {
        let f = TimeFilter::new("broker_timestamp", "<=", vec![10]).unwrap();
        assert!(f.passes(Some(99), Some(10)));
        assert!(!f.passes(Some(1), Some(11)));
        assert!(!f.passes(Some(1), None));
        let f = TimeFilter::new("publish_time", "in", vec![3, 4]).unwrap();
        assert!(f.passes(Some(4), None) && !f.passes(Some(5), None));
        assert!(TimeFilter::new("publish_time", "startswith", vec![1]).is_err());
        assert!(TimeFilter::new("event_time", "=", vec![1]).is_err());
        assert!(TimeFilter::new("publish_time", ">", vec![1, 2]).is_err());
    }
}
