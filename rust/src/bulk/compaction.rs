//! Compaction kernels over Arrow columns: phase one's rows (one per message: key, position, size),
//! the retained map as a batch, and phase two over a column of topic entries.
use super::{batch, error_column, nullable, required, EntryColumn};
use crate::codec::compaction::{compact_entry, compaction_records, BatchFormat, LatestForKey, Retained};
use crate::codec::proto::MessageIdData;
use crate::columns::column_too_large;
use crate::error::{Error, Result};
use arrow_array::builder::*;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, PrimitiveArray, RecordBatch};
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
    batch(vec![
        required("entry_index", Arc::new(entry_index.finish())),
        nullable("batch_index", Arc::new(batch_index.finish())),
        nullable("key", Arc::new(key.finish())),
        nullable("payload_size", Arc::new(size.finish())),
        nullable("event_time", Arc::new(event.finish())),
        error_column(Arc::new(err.finish())),
    ])
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
    batch(vec![
        required("key", Arc::new(key.finish())),
        required("ledger_id", Arc::new(l.finish())),
        required("entry_id", Arc::new(e.finish())),
        required("batch_index", Arc::new(b.finish())),
    ])
}

/// A column of topic entries with the position of each (phase one's and two's input).
pub struct PositionedEntries<'a> {
    entries: EntryColumn<'a>,
    ledger_ids: &'a PrimitiveArray<Int64Type>,
    entry_ids: &'a PrimitiveArray<Int64Type>,
}

impl<'a> PositionedEntries<'a> {
    /// Entries (binary, large_binary or binary_view) with int64 ledger and entry ids of the same length.
    pub fn new(entries: &'a dyn Array, ledger_ids: &'a dyn Array, entry_ids: &'a dyn Array) -> Result<Self> {
        fn ids<'b>(a: &'b dyn Array, what: &str) -> Result<&'b PrimitiveArray<Int64Type>> {
            a.as_primitive_opt::<Int64Type>()
                .ok_or_else(|| Error::invalid(format!("{what} must be an Arrow int64 array, not {}", a.data_type())))
        }
        let (l, n) = (ids(ledger_ids, "ledger_ids")?, ids(entry_ids, "entry_ids")?);
        if l.len() != entries.len() || n.len() != entries.len() {
            return Err(Error::invalid(format!(
                "entries, ledger_ids and entry_ids differ in length ({}, {}, {})",
                entries.len(),
                l.len(),
                n.len()
            )));
        }
        Ok(PositionedEntries { entries: EntryColumn::from_array(entries)?, ledger_ids: l, entry_ids: n })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entries' bytes.
    pub fn column(&self) -> &EntryColumn<'a> {
        &self.entries
    }

    /// The ledger and entry ids, row by row (a null id reads as its slot's value).
    pub fn ids(&self) -> (&'a [i64], &'a [i64]) {
        (self.ledger_ids.values(), self.entry_ids.values())
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Row `i` as (ledger id, entry id, bytes); a null entry is an error naming its position.
    fn entry(&self, i: usize) -> Result<(i64, i64, &'a [u8])> {
        let (l, n) = (self.ledger_ids.value(i), self.entry_ids.value(i));
        let d = self.entries.get(i).ok_or_else(|| Error::invalid(format!("entry {l}:{n} is null")))?;
        Ok((l, n, d))
    }

    /// The compacted ledger's id of row `i` (a position must be given and not negative).
    fn message_id(&self, i: usize, partition: i32) -> Result<MessageIdData> {
        let (l, n) = (self.ledger_ids.value(i), self.entry_ids.value(i));
        if l < 0 || n < 0 || self.ledger_ids.is_null(i) || self.entry_ids.is_null(i) {
            return Err(Error::invalid(format!("entry {i} has no valid position ({l}:{n})")));
        }
        Ok(MessageIdData { ledger_id: l as u64, entry_id: n as u64, partition: Some(partition), ..Default::default() })
    }
}

/// The same error, saying which entry it is about (a corrupt entry fails the whole call).
fn naming_entry(e: Error, ledger_id: i64, entry_id: i64) -> Error {
    match e {
        Error::Corrupt { offset, what } => {
            Error::Corrupt { offset, what: format!("entry {ledger_id}:{entry_id}: {what}") }
        }
        other => other,
    }
}

/// Phase one over a column: every message of every entry added to `latest`, in row order. A null or
/// corrupt entry fails the call (as it fails Pulsar's compaction run), naming the entry; the messages
/// of the rows before it stay added.
pub fn add_entries(latest: &mut LatestForKey, input: &PositionedEntries, limit: usize) -> Result<()> {
    for i in 0..input.len() {
        let (l, n, d) = input.entry(i)?;
        latest.add_entry(l, n, d, limit).map_err(|e| naming_entry(e, l, n))?;
    }
    Ok(())
}

/// Phase two over a column of topic entries with their positions: one output row per entry that
/// retains anything, with its raw-message bytes for the compacted ledger. A corrupt entry fails the
/// call (as it fails Pulsar's compaction run), naming the entry.
pub fn compact_entries(
    latest: &LatestForKey,
    input: &PositionedEntries,
    partition: i32,
    retain_null_key: bool,
    format: BatchFormat,
    limit: usize,
) -> Result<RecordBatch> {
    let mut l = Int64Builder::new();
    let mut e = Int64Builder::new();
    let mut raw = BinaryBuilder::new();
    for i in 0..input.len() {
        let (li, ei, d) = input.entry(i)?;
        let id = input.message_id(i, partition)?;
        let out = compact_entry(Retained::Latest(latest), &id, d, retain_null_key, format, limit)
            .map_err(|x| naming_entry(x, li, ei))?;
        if let Some(r) = out {
            raw_fits(&raw, r.len())?;
            l.append_value(li);
            e.append_value(ei);
            raw.append_value(r);
        }
    }
    Ok(batch(vec![
        required("ledger_id", Arc::new(l.finish())),
        required("entry_id", Arc::new(e.finish())),
        required("raw_message", Arc::new(raw.finish())),
    ]))
}

/// Phase two with phase one's answer joined to each row: `kept` (list<int32>) lists the retained
/// batch indexes of each entry (-1 for an entry taken whole; null or empty for none). One output row
/// per input row, `raw_message` null where nothing is retained, so the caller keeps its own row order
/// and partitioning; a bad entry is an `error` row, not a failed call.
pub fn compact_entries_by_indexes(
    input: &PositionedEntries,
    kept: &dyn Array,
    partition: i32,
    retain_null_key: bool,
    format: BatchFormat,
    limit: usize,
) -> Result<RecordBatch> {
    let kept = kept
        .as_list_opt::<i32>()
        .ok_or_else(|| Error::invalid(format!("kept must be an Arrow list<int32> array, not {}", kept.data_type())))?;
    let n = input.len();
    if kept.len() != n {
        return Err(Error::invalid(format!("kept has {} rows for {n} entries", kept.len())));
    }
    let mut raw = BinaryBuilder::new();
    let mut err = StringBuilder::new();
    for i in 0..n {
        let indexes: Vec<i32> = if kept.is_null(i) {
            Vec::new()
        } else {
            let v = kept.value(i);
            let a = v
                .as_primitive_opt::<Int32Type>()
                .ok_or_else(|| Error::invalid(format!("kept must be a list of int32, not {}", v.data_type())))?;
            a.iter().flatten().collect()
        };
        let res = input.entry(i).and_then(|(_, _, d)| {
            let id = input.message_id(i, partition)?;
            compact_entry(Retained::Indexes(&indexes), &id, d, retain_null_key, format, limit)
        });
        match res {
            Ok(r) => {
                raw_fits(&raw, r.as_ref().map_or(0, |r| r.len()))?;
                raw.append_option(r);
                err.append_null();
            }
            Err(e) => {
                let (li, ei) = (input.ledger_ids.value(i), input.entry_ids.value(i));
                raw.append_null();
                err.append_value(format!("entry {li}:{ei}: {e}"));
            }
        }
    }
    Ok(batch(vec![nullable("raw_message", Arc::new(raw.finish())), error_column(Arc::new(err.finish()))]))
}

/// Whether `more` bytes still fit the `raw_message` column (32-bit offsets): past 2 GiB the call fails with
/// `LimitExceeded` instead of the builder's panic, and the caller passes fewer entries.
fn raw_fits(raw: &BinaryBuilder, more: usize) -> Result<()> {
    let size = raw.values_slice().len() + more;
    if size > i32::MAX as usize {
        return Err(column_too_large("the raw messages of one call (pass fewer entries)", size));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::batch::encode_batch;
    use crate::codec::compaction::MessagePosition;
    use crate::codec::compression::Codec;
    use crate::codec::proto::{MessageMetadata, SingleMessageMetadata};
    use arrow_array::{BinaryArray, Int64Array, ListArray};

    const LIMIT: usize = 1 << 24;

    #[test]
    fn raw_messages_past_2_gib_are_an_error_not_a_panic() {
        let mut raw = BinaryBuilder::new();
        raw.append_value(b"abc");
        assert!(raw_fits(&raw, i32::MAX as usize - 3).is_ok());
        assert!(matches!(raw_fits(&raw, i32::MAX as usize - 2), Err(Error::LimitExceeded { .. })));
    }

    fn entry(keys: &[(&str, &[u8])]) -> Vec<u8> {
        let md = MessageMetadata { producer_name: "p".into(), publish_time: 1, ..Default::default() };
        let msgs: Vec<(SingleMessageMetadata, &[u8])> = keys
            .iter()
            .map(|(k, p)| (SingleMessageMetadata { partition_key: Some(k.to_string()), ..Default::default() }, *p))
            .collect();
        encode_batch(&md, &msgs, Codec::None, true).unwrap()
    }

    #[test]
    fn add_entries_feeds_every_row_in_order_and_names_a_bad_entry() {
        let (a, b) = (entry(&[("k", b"1"), ("j", b"2")]), entry(&[("k", b"3")]));
        let entries = BinaryArray::from_iter([Some(a.as_slice()), Some(b.as_slice())]);
        let (l, n) = (Int64Array::from(vec![7, 7]), Int64Array::from(vec![0, 1]));
        let input = PositionedEntries::new(&entries, &l, &n).unwrap();
        let mut latest = LatestForKey::new(false);
        add_entries(&mut latest, &input, LIMIT).unwrap();
        assert_eq!(latest.messages, 3);
        assert!(latest.is_latest("k", MessagePosition { ledger_id: 7, entry_id: 1, batch_index: 0 }));
        assert!(latest.is_latest("j", MessagePosition { ledger_id: 7, entry_id: 0, batch_index: 1 }));

        let bad = BinaryArray::from_iter([Some(a.as_slice()), Some(&b"\x0e\x01junk"[..]), None]);
        let (l, n) = (Int64Array::from(vec![7, 7, 7]), Int64Array::from(vec![0, 1, 2]));
        let err = add_entries(&mut LatestForKey::new(false), &PositionedEntries::new(&bad, &l, &n).unwrap(), LIMIT)
            .unwrap_err();
        assert!(matches!(&err, Error::Corrupt { what, .. } if what.starts_with("entry 7:1: ")), "{err}");
        let nulls = BinaryArray::from_iter([None::<&[u8]>]);
        let (l, n) = (Int64Array::from(vec![7]), Int64Array::from(vec![2]));
        let err = add_entries(&mut LatestForKey::new(false), &PositionedEntries::new(&nulls, &l, &n).unwrap(), LIMIT)
            .unwrap_err();
        assert_eq!(err.to_string(), "entry 7:2 is null");
    }

    #[test]
    fn positioned_entries_check_types_and_lengths() {
        let entries = BinaryArray::from_iter([Some(&b"x"[..])]);
        let ids = Int64Array::from(vec![1]);
        let short = Int64Array::from(Vec::<i64>::new());
        let wrong = arrow_array::Int32Array::from(vec![1]);
        assert!(PositionedEntries::new(&entries, &ids, &short).err().unwrap().to_string().contains("differ in length"));
        assert!(PositionedEntries::new(&entries, &wrong, &ids)
            .err()
            .unwrap()
            .to_string()
            .starts_with("ledger_ids must"));
        assert!(PositionedEntries::new(&ids, &ids, &ids).err().unwrap().to_string().contains("binary"));
    }

    #[test]
    fn both_phase_twos_agree_and_by_indexes_reports_per_row() {
        let (a, b) = (entry(&[("k", b"1"), ("j", b"2")]), entry(&[("k", b"3")]));
        let entries = BinaryArray::from_iter([Some(a.as_slice()), Some(b.as_slice()), None]);
        let (l, n) = (Int64Array::from(vec![7, 7, 7]), Int64Array::from(vec![0, 1, 2]));
        let input = PositionedEntries::new(&entries, &l, &n).unwrap();
        let (e2, l2, n2) = (entries.slice(0, 2), l.slice(0, 2), n.slice(0, 2));
        let two = PositionedEntries::new(&e2, &l2, &n2).unwrap();
        let mut latest = LatestForKey::new(false);
        add_entries(&mut latest, &two, LIMIT).unwrap();
        let by_latest = compact_entries(&latest, &two, -1, false, BatchFormat::Placeholders, LIMIT).unwrap();
        assert_eq!(by_latest.num_rows(), 2);
        let kept = ListArray::from_iter_primitive::<Int32Type, _, _>([Some(vec![Some(1)]), Some(vec![Some(0)]), None]);
        let by_idx = compact_entries_by_indexes(&input, &kept, -1, false, BatchFormat::Placeholders, LIMIT).unwrap();
        assert_eq!(by_idx.column(0).as_binary::<i32>().slice(0, 2), *by_latest.column(2).as_binary::<i32>());
        assert_eq!(by_idx.column(1).as_string::<i32>().value(2), "entry 7:2: entry 7:2 is null");
        assert!(compact_entries(&latest, &input, -1, false, BatchFormat::Placeholders, LIMIT).is_err());
        let not_a_list = Int64Array::from(vec![1, 2, 3]);
        let err = compact_entries_by_indexes(&input, &not_a_list, -1, false, BatchFormat::Placeholders, LIMIT);
        assert!(err.unwrap_err().to_string().starts_with("kept must be an Arrow list<int32> array"));
    }
}
