//! Compaction kernels over Arrow columns: phase one's rows (one per message: key, position, size),
//! the retained map as a batch, and phase two over a column of topic entries.
use super::{batch, err_field, EntryColumn};
use crate::codec::compaction::{
    compact_entry, compact_entry_by_indexes, compaction_records, BatchFormat, LatestForKey,
};
use crate::codec::proto::MessageIdData;
use crate::error::{Error, Result};
use arrow_array::builder::*;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ListArray, PrimitiveArray, RecordBatch};
use arrow_schema::{DataType, Field};
use std::sync::Arc;

/// One row per message phase one sees (markers give none): `entry_index`, `batch_index` (-1 for an
/// entry taken whole), `key`, `payload_size` (0 = tombstone), `event_time`, `error` (one row for an
/// entry that does not decode).
pub fn compaction_keys(col: &EntryColumn, limit: usize) -> RecordBatch {
    let n = col.len();
    let mut entry_index = Int64Builder::with_capacity(n);
    let mut batch_index = Int32Builder::with_capacity(n);
    let mut key = StringBuilder::new();
    let mut size = Int64Builder::with_capacity(n);
    let mut event = Int64Builder::with_capacity(n);
    let mut err = StringBuilder::new();
    for i in 0..n {
        match col.get(i).map(|d| compaction_records(d, limit)) {
            Some(Ok(Some(recs))) => {
                for r in recs {
                    entry_index.append_value(i as i64);
                    batch_index.append_value(r.batch_index);
                    key.append_option(r.key);
                    size.append_value(r.payload_size);
                    event.append_value(r.event_time as i64);
                    err.append_null();
                }
            }
            Some(Ok(None)) => {} // a marker: not a message
            other => {
                entry_index.append_value(i as i64);
                batch_index.append_null();
                key.append_null();
                size.append_null();
                event.append_null();
                match other {
                    Some(Err(e)) => err.append_value(e.to_string()),
                    _ => err.append_value("null entry"),
                }
            }
        }
    }
    let f = |name: &str, dt: DataType| Field::new(name, dt, true);
    batch(
        vec![
            Field::new("entry_index", DataType::Int64, false),
            f("batch_index", DataType::Int32),
            f("key", DataType::Utf8),
            f("payload_size", DataType::Int64),
            f("event_time", DataType::Int64),
            err_field(),
        ],
        vec![
            Arc::new(entry_index.finish()),
            Arc::new(batch_index.finish()),
            Arc::new(key.finish()),
            Arc::new(size.finish()),
            Arc::new(event.finish()),
            Arc::new(err.finish()),
        ],
    )
}

/// The retained keys with their positions, ordered by position.
pub fn retained_batch(latest: &LatestForKey) -> RecordBatch {
    let retained = latest.retained();
    let mut key = StringBuilder::new();
    let mut l = Int64Builder::with_capacity(retained.len());
    let mut e = Int64Builder::with_capacity(retained.len());
    let mut b = Int32Builder::with_capacity(retained.len());
    for (k, p) in retained {
        key.append_value(k);
        l.append_value(p.ledger_id);
        e.append_value(p.entry_id);
        b.append_value(p.batch_index);
    }
    batch(
        vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("ledger_id", DataType::Int64, false),
            Field::new("entry_id", DataType::Int64, false),
            Field::new("batch_index", DataType::Int32, false),
        ],
        vec![Arc::new(key.finish()), Arc::new(l.finish()), Arc::new(e.finish()), Arc::new(b.finish())],
    )
}

/// Phase two over a column of topic entries with their positions: one output row per entry that
/// retains anything, with its raw-message bytes for the compacted ledger. A corrupt entry fails the
/// call (as it fails Pulsar's compaction run), naming the entry.
#[allow(clippy::too_many_arguments)]
pub fn compact_entries(
    latest: &LatestForKey,
    col: &EntryColumn,
    ledger_ids: &PrimitiveArray<Int64Type>,
    entry_ids: &PrimitiveArray<Int64Type>,
    partition: i32,
    retain_null_key: bool,
    format: BatchFormat,
    limit: usize,
) -> Result<RecordBatch> {
    let n = col.len();
    let mut l = Int64Builder::new();
    let mut e = Int64Builder::new();
    let mut raw = BinaryBuilder::new();
    for i in 0..n {
        let (li, ei) = (ledger_ids.value(i), entry_ids.value(i));
        let d = col.get(i).ok_or_else(|| Error::invalid(format!("entry {li}:{ei} is null")))?;
        if li < 0 || ei < 0 || ledger_ids.is_null(i) || entry_ids.is_null(i) {
            return Err(Error::invalid(format!("entry {i} has no valid position ({li}:{ei})")));
        }
        let id = MessageIdData {
            ledger_id: li as u64,
            entry_id: ei as u64,
            partition: Some(partition),
            ..Default::default()
        };
        let out = compact_entry(latest, &id, d, retain_null_key, format, limit).map_err(|x| match x {
            Error::Corrupt { offset, what } => Error::Corrupt { offset, what: format!("entry {li}:{ei}: {what}") },
            other => other,
        })?;
        if let Some(r) = out {
            l.append_value(li);
            e.append_value(ei);
            raw.append_value(r);
        }
    }
    Ok(batch(
        vec![
            Field::new("ledger_id", DataType::Int64, false),
            Field::new("entry_id", DataType::Int64, false),
            Field::new("raw_message", DataType::Binary, false),
        ],
        vec![Arc::new(l.finish()), Arc::new(e.finish()), Arc::new(raw.finish())],
    ))
}

/// Phase two with phase one's answer joined to each row: `kept` lists the retained batch indexes of
/// each entry (-1 for an entry taken whole; null or empty for none). One output row per input row,
/// `raw_message` null where nothing is retained, so the caller keeps its own row order and partitioning.
#[allow(clippy::too_many_arguments)]
pub fn compact_entries_by_indexes(
    col: &EntryColumn,
    ledger_ids: &PrimitiveArray<Int64Type>,
    entry_ids: &PrimitiveArray<Int64Type>,
    kept: &ListArray,
    partition: i32,
    retain_null_key: bool,
    format: BatchFormat,
    limit: usize,
) -> Result<RecordBatch> {
    let n = col.len();
    if kept.len() != n {
        return Err(Error::invalid(format!("kept has {} rows for {n} entries", kept.len())));
    }
    let mut raw = BinaryBuilder::new();
    let mut err = StringBuilder::new();
    for i in 0..n {
        let (li, ei) = (ledger_ids.value(i), entry_ids.value(i));
        let indexes: Vec<i32> = if kept.is_null(i) {
            Vec::new()
        } else {
            let v = kept.value(i);
            let a = v
                .as_primitive_opt::<Int32Type>()
                .ok_or_else(|| Error::invalid(format!("kept must be a list of int32, not {}", v.data_type())))?;
            a.iter().flatten().collect()
        };
        let res = col.get(i).ok_or_else(|| Error::invalid(format!("entry {li}:{ei} is null"))).and_then(|d| {
            let id = MessageIdData {
                ledger_id: li as u64,
                entry_id: ei as u64,
                partition: Some(partition),
                ..Default::default()
            };
            compact_entry_by_indexes(&indexes, &id, d, retain_null_key, format, limit)
        });
        match res {
            Ok(r) => {
                raw.append_option(r);
                err.append_null();
            }
            Err(e) => {
                raw.append_null();
                err.append_value(format!("entry {li}:{ei}: {e}"));
            }
        }
    }
    Ok(batch(
        vec![Field::new("raw_message", DataType::Binary, true), err_field()],
        vec![Arc::new(raw.finish()), Arc::new(err.finish())],
    ))
}
