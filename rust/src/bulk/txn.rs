//! Transaction-log kernels: a column of coordinator-log or pending-ack-store entries becomes one row
//! per record (PIP-160 batches opened). An entry that does not decode gives one row with the error,
//! since Pulsar's replay fails on the whole entry too.
use super::{batch, error_column, nullable, required, EntryColumn};
use crate::codec::txn::{
    ack_type_name, decode_pending_ack, decode_txn_metadata, pending_ack_op_name, split_entry, txn_op_name,
    txn_status_name, PendingAckRecord, TxnLogEntry, TxnMetadataRecord,
};
use crate::error::Result;
use arrow_array::builder::*;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Fields};
use std::sync::Arc;

fn enum_name(v: Option<i32>, name: fn(i32) -> Option<&'static str>) -> Option<String> {
    // An enum value Pulsar does not define is kept visible rather than dropped.
    v.map(|x| name(x).map(str::to_owned).unwrap_or_else(|| format!("UNKNOWN({x})")))
}

/// The columns every record row starts with.
struct RowHead {
    entry_index: Int64Builder,
    batched: BooleanBuilder,
    batch_size: Int32Builder,
    batch_index: Int32Builder,
    record_bytes: Int32Builder,
    err: StringBuilder,
}

impl RowHead {
    fn new(n: usize) -> Self {
        RowHead {
            entry_index: Int64Builder::with_capacity(n),
            batched: BooleanBuilder::with_capacity(n),
            batch_size: Int32Builder::with_capacity(n),
            batch_index: Int32Builder::with_capacity(n),
            record_bytes: Int32Builder::with_capacity(n),
            err: StringBuilder::new(),
        }
    }
    fn record(&mut self, i: usize, e: &TxnLogEntry, k: usize) {
        self.entry_index.append_value(i as i64);
        self.batched.append_value(e.batched);
        self.batch_size.append_value(e.records.len() as i32);
        self.batch_index.append_value(k as i32);
        self.record_bytes.append_value(e.records[k].len() as i32);
        self.err.append_null();
    }
    /// The row of an entry that gave no record: null (`outcome` None) or not decoded (its error).
    fn failed<T>(&mut self, i: usize, outcome: Option<Result<T>>) {
        let error = match outcome {
            Some(Err(e)) => Some(e.to_string()),
            _ => None,
        };
        self.entry_index.append_value(i as i64);
        self.batched.append_null();
        self.batch_size.append_null();
        self.batch_index.append_null();
        self.record_bytes.append_null();
        self.err.append_option(error);
    }
    /// The head's columns and, apart, the `error` column (the last of a kernel's).
    fn finish(mut self) -> (Vec<(Field, ArrayRef)>, (Field, ArrayRef)) {
        let cols = vec![
            required("entry_index", Arc::new(self.entry_index.finish())),
            nullable("batched", Arc::new(self.batched.finish())),
            nullable("batch_size", Arc::new(self.batch_size.finish())),
            nullable("batch_index", Arc::new(self.batch_index.finish())),
            nullable("record_bytes", Arc::new(self.record_bytes.finish())),
        ];
        (cols, error_column(Arc::new(self.err.finish())))
    }
}

fn decode_all<T>(d: &[u8], one: fn(&[u8]) -> Result<T>) -> Result<(TxnLogEntry, Vec<T>)> {
    let e = split_entry(d)?;
    let recs = e.records.iter().map(|r| one(&d[r.clone()]).map_err(|x| x.shifted(r.start))).collect::<Result<_>>()?;
    Ok((e, recs))
}

fn s<'a>(d: &'a [u8], base: usize, r: &std::ops::Range<usize>) -> &'a str {
    // Ranges were checked as UTF-8 by the decoder.
    std::str::from_utf8(&d[base + r.start..base + r.end]).unwrap_or_default()
}

/// One row per `TransactionMetadataEntry` of a column of coordinator-log entries.
pub fn explode_transaction_log(col: &EntryColumn) -> RecordBatch {
    let n = col.len();
    let mut head = RowHead::new(n);
    let mut op = StringBuilder::new();
    let (mut most, mut least) = (UInt64Builder::with_capacity(n), UInt64Builder::with_capacity(n));
    let (mut expected, mut new_status) = (StringBuilder::new(), StringBuilder::new());
    let mut partitions = ListBuilder::new(StringBuilder::new());
    let sub_fields = Fields::from(vec![
        Field::new("topic", DataType::Utf8, false),
        Field::new("subscription", DataType::Utf8, false),
    ]);
    let mut subs = ListBuilder::new(StructBuilder::new(
        sub_fields,
        vec![Box::new(StringBuilder::new()) as Box<dyn ArrayBuilder>, Box::new(StringBuilder::new())],
    ));
    let mut times: [UInt64Builder; 4] = std::array::from_fn(|_| UInt64Builder::with_capacity(n));
    let mut owner = StringBuilder::new();
    let mut is_timeout = BooleanBuilder::with_capacity(n);

    for i in 0..n {
        match col.get(i).map(|d| decode_all(d, decode_txn_metadata).map(|x| (d, x))) {
            Some(Ok((d, (e, recs)))) => {
                for (k, r) in recs.iter().enumerate() {
                    let base = e.records[k].start;
                    let TxnMetadataRecord { txnid_least_bits, txnid_most_bits, .. } = *r;
                    head.record(i, &e, k);
                    op.append_option(enum_name(r.op, txn_op_name));
                    most.append_value(txnid_most_bits);
                    least.append_value(txnid_least_bits);
                    expected.append_option(enum_name(r.expected_status, txn_status_name));
                    new_status.append_option(enum_name(r.new_status, txn_status_name));
                    for p in &r.partitions {
                        partitions.values().append_value(s(d, base, p));
                    }
                    partitions.append(true);
                    let sb = subs.values();
                    for (t, name) in &r.subscriptions {
                        sb.field_builder::<StringBuilder>(0).expect("topic").append_value(s(d, base, t));
                        sb.field_builder::<StringBuilder>(1).expect("subscription").append_value(s(d, base, name));
                        sb.append(true);
                    }
                    subs.append(true);
                    for (b, v) in
                        times.iter_mut().zip([r.timeout_ms, r.start_time, r.last_modification_time, r.max_local_txn_id])
                    {
                        b.append_option(v);
                    }
                    owner.append_option(r.owner.as_ref().map(|o| s(d, base, o)));
                    is_timeout.append_option(r.is_timeout);
                }
            }
            other => {
                head.failed(i, other);
                op.append_null();
                most.append_null();
                least.append_null();
                expected.append_null();
                new_status.append_null();
                partitions.append(false);
                subs.append(false);
                for b in &mut times {
                    b.append_null();
                }
                owner.append_null();
                is_timeout.append_null();
            }
        }
    }
    let (mut cols, err) = head.finish();
    cols.extend([
        nullable("op", Arc::new(op.finish())),
        nullable("txnid_most_bits", Arc::new(most.finish())),
        nullable("txnid_least_bits", Arc::new(least.finish())),
        nullable("expected_status", Arc::new(expected.finish())),
        nullable("new_status", Arc::new(new_status.finish())),
        nullable("partitions", Arc::new(partitions.finish())),
        nullable("subscriptions", Arc::new(subs.finish())),
    ]);
    for (name, mut b) in
        ["timeout_ms", "start_time", "last_modification_time", "max_local_txn_id"].into_iter().zip(times)
    {
        cols.push(nullable(name, Arc::new(b.finish())));
    }
    cols.extend([
        nullable("owner", Arc::new(owner.finish())),
        nullable("is_timeout", Arc::new(is_timeout.finish())),
        err,
    ]);
    batch(cols)
}

/// One row per `PendingAckMetadataEntry` of a column of pending-ack-store entries.
pub fn explode_pending_ack_log(col: &EntryColumn) -> RecordBatch {
    let n = col.len();
    let mut head = RowHead::new(n);
    let (mut op, mut ack_type) = (StringBuilder::new(), StringBuilder::new());
    let (mut most, mut least) = (UInt64Builder::with_capacity(n), UInt64Builder::with_capacity(n));
    let pos_fields = Fields::from(vec![
        Field::new("ledger_id", DataType::Int64, false),
        Field::new("entry_id", DataType::Int64, false),
        Field::new("ack_set", DataType::List(Arc::new(Field::new("item", DataType::Int64, true))), true),
        Field::new("batch_size", DataType::Int32, true),
    ]);
    let mut positions = ListBuilder::new(StructBuilder::new(
        pos_fields,
        vec![
            Box::new(Int64Builder::new()) as Box<dyn ArrayBuilder>,
            Box::new(Int64Builder::new()),
            Box::new(ListBuilder::new(Int64Builder::new())),
            Box::new(Int32Builder::new()),
        ],
    ));

    for i in 0..n {
        match col.get(i).map(|d| decode_all(d, decode_pending_ack)) {
            Some(Ok((e, recs))) => {
                for (k, r) in recs.iter().enumerate() {
                    let PendingAckRecord { txnid_least_bits, txnid_most_bits, .. } = *r;
                    head.record(i, &e, k);
                    op.append_option(enum_name(r.op, pending_ack_op_name));
                    ack_type.append_option(enum_name(r.ack_type, ack_type_name));
                    most.append_option(txnid_most_bits);
                    least.append_option(txnid_least_bits);
                    let sb = positions.values();
                    for p in &r.positions {
                        sb.field_builder::<Int64Builder>(0).expect("ledger_id").append_value(p.ledger_id as i64);
                        sb.field_builder::<Int64Builder>(1).expect("entry_id").append_value(p.entry_id as i64);
                        let acks = sb.field_builder::<ListBuilder<Int64Builder>>(2).expect("ack_set");
                        acks.values().append_slice(&p.ack_set);
                        acks.append(true);
                        sb.field_builder::<Int32Builder>(3).expect("batch_size").append_option(p.batch_size);
                        sb.append(true);
                    }
                    positions.append(true);
                }
            }
            other => {
                head.failed(i, other);
                op.append_null();
                ack_type.append_null();
                most.append_null();
                least.append_null();
                positions.append(false);
            }
        }
    }
    let (mut cols, err) = head.finish();
    cols.extend([
        nullable("op", Arc::new(op.finish())),
        nullable("ack_type", Arc::new(ack_type.finish())),
        nullable("txnid_most_bits", Arc::new(most.finish())),
        nullable("txnid_least_bits", Arc::new(least.finish())),
        nullable("positions", Arc::new(positions.finish())),
        err,
    ]);
    batch(cols)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::proto::TransactionMetadataEntry;
    use crate::codec::txn::pack_batched_entry;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, UInt64Type};
    use arrow_array::{Array, BinaryArray};
    use prost::Message;

    #[test]
    fn batched_plain_and_damaged_entries_each_give_their_rows() {
        let rec = |i: u64| {
            TransactionMetadataEntry {
                metadata_op: Some(3),
                txnid_least_bits: Some(i),
                new_status: Some(2),
                ..Default::default()
            }
            .encode_to_vec()
        };
        let mut batched = Vec::new();
        let recs: Vec<Vec<u8>> = (0..3).map(rec).collect();
        pack_batched_entry(recs.iter().map(Vec::as_slice), &mut batched);
        let plain = rec(9);
        let bad = vec![0x0e, 0x01, 0x00, 0x01, 0x0a, 0x05];
        let arr = BinaryArray::from(vec![Some(batched.as_slice()), Some(plain.as_slice()), Some(bad.as_slice()), None]);
        let out = explode_transaction_log(&EntryColumn::from_array(&arr).unwrap());
        assert_eq!(out.num_rows(), 6);
        let least = out.column_by_name("txnid_least_bits").unwrap().as_primitive::<UInt64Type>();
        assert_eq!((0..4).map(|i| least.value(i)).collect::<Vec<_>>(), vec![0, 1, 2, 9]);
        let bi = out.column_by_name("batch_index").unwrap().as_primitive::<Int32Type>();
        assert_eq!((bi.value(2), bi.value(3)), (2, 0));
        let err = out.column_by_name("error").unwrap().as_string::<i32>();
        assert!(err.value(4).contains("offset 5"), "{}", err.value(4));
        assert!(err.is_null(5) && bi.is_null(5));
        assert_eq!(out.column_by_name("new_status").unwrap().as_string::<i32>().value(0), "COMMITTED");
    }

    #[test]
    fn pending_ack_rows_carry_their_positions() {
        let e = crate::fuzz::pending_ack_entry((0, 4), (12, 3), vec![-3], 10).encode_to_vec();
        let arr = BinaryArray::from(vec![e.as_slice()]);
        let out = explode_pending_ack_log(&EntryColumn::from_array(&arr).unwrap());
        assert_eq!(out.num_rows(), 1);
        let pos = out.column_by_name("positions").unwrap().as_list::<i32>().value(0);
        let st = pos.as_struct();
        assert_eq!(st.column(0).as_primitive::<arrow_array::types::Int64Type>().value(0), 12);
        assert_eq!(out.column_by_name("op").unwrap().as_string::<i32>().value(0), "ACK");
    }
}
