//! JSON lines of the one message schema (`scan/schema.py` `MESSAGE_FIELDS`, plus `marker` when the
//! batch has it), rendered straight from the Arrow columns: byte for byte what Python's
//! `json.dumps(json_record(row))` prints (`", "`/`": "` separators, ASCII only with lowercase `\uXXXX`
//! escapes, the payload in padded standard base64), without a Python object per message.
use crate::error::{Error, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, BooleanArray, MapArray, PrimitiveArray, RecordBatch};
use arrow_schema::DataType;
use base64::Engine as _;
use std::collections::HashMap;

/// A string column in any of Arrow's string layouts.
enum Str<'a> {
    Utf8(&'a arrow_array::StringArray),
    Large(&'a arrow_array::LargeStringArray),
    View(&'a arrow_array::StringViewArray),
}

impl<'a> Str<'a> {
    fn of(a: &'a dyn Array, name: &str) -> Result<Self> {
        Ok(match a.data_type() {
            DataType::Utf8 => Str::Utf8(a.as_string::<i32>()),
            DataType::LargeUtf8 => Str::Large(a.as_string::<i64>()),
            DataType::Utf8View => Str::View(a.as_string_view()),
            t => return Err(Error::invalid(format!("column {name}: expected a string column, not {t}"))),
        })
    }

    fn get(&self, i: usize) -> Option<&'a str> {
        match self {
            Str::Utf8(a) => a.is_valid(i).then(|| a.value(i)),
            Str::Large(a) => a.is_valid(i).then(|| a.value(i)),
            Str::View(a) => a.is_valid(i).then(|| a.value(i)),
        }
    }
}

/// A binary column in any of Arrow's binary layouts.
enum Bin<'a> {
    Binary(&'a arrow_array::BinaryArray),
    Large(&'a arrow_array::LargeBinaryArray),
    View(&'a arrow_array::BinaryViewArray),
}

impl<'a> Bin<'a> {
    fn of(a: &'a dyn Array, name: &str) -> Result<Self> {
        Ok(match a.data_type() {
            DataType::Binary => Bin::Binary(a.as_binary::<i32>()),
            DataType::LargeBinary => Bin::Large(a.as_binary::<i64>()),
            DataType::BinaryView => Bin::View(a.as_binary_view()),
            t => return Err(Error::invalid(format!("column {name}: expected a binary column, not {t}"))),
        })
    }

    fn get(&self, i: usize) -> Option<&'a [u8]> {
        match self {
            Bin::Binary(a) => a.is_valid(i).then(|| a.value(i)),
            Bin::Large(a) => a.is_valid(i).then(|| a.value(i)),
            Bin::View(a) => a.is_valid(i).then(|| a.value(i)),
        }
    }
}

/// An integer column (int32 or int64), read as i64.
enum Int<'a> {
    I32(&'a PrimitiveArray<Int32Type>),
    I64(&'a PrimitiveArray<Int64Type>),
}

impl<'a> Int<'a> {
    fn of(a: &'a dyn Array, name: &str) -> Result<Self> {
        Ok(match a.data_type() {
            DataType::Int32 => Int::I32(a.as_primitive::<Int32Type>()),
            DataType::Int64 => Int::I64(a.as_primitive::<Int64Type>()),
            t => return Err(Error::invalid(format!("column {name}: expected an integer column, not {t}"))),
        })
    }

    fn get(&self, i: usize) -> Option<i64> {
        match self {
            Int::I32(a) => a.is_valid(i).then(|| a.value(i) as i64),
            Int::I64(a) => a.is_valid(i).then(|| a.value(i)),
        }
    }
}

fn bools<'a>(a: &'a dyn Array, name: &str) -> Result<&'a BooleanArray> {
    a.as_boolean_opt().ok_or_else(|| Error::invalid(format!("column {name}: expected a boolean column")))
}

fn bool_at(a: &BooleanArray, i: usize) -> Option<bool> {
    a.is_valid(i).then(|| a.value(i))
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A JSON string as Python's `json.dumps` writes it with `ensure_ascii=True`: printable ASCII
/// (space to `~`) as is except `"` and `\`, the five short escapes, everything else `\uXXXX`
/// (lowercase hex; a character beyond the BMP as its UTF-16 surrogate pair).
pub fn push_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let b = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if (b' '..=b'~').contains(&c) && c != b'"' && c != b'\\' {
            i += 1;
            continue;
        }
        out.extend_from_slice(&b[start..i]);
        if c < 0x80 {
            match c {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                _ => push_u16(out, c as u16),
            }
            i += 1;
        } else {
            // a multi-byte character: `s` is valid UTF-8, so it decodes
            let ch = s[i..].chars().next().expect("a character at a char boundary");
            let cp = ch as u32;
            if cp >= 0x10000 {
                let v = cp - 0x10000;
                push_u16(out, 0xd800 | (v >> 10) as u16);
                push_u16(out, 0xdc00 | (v & 0x3ff) as u16);
            } else {
                push_u16(out, cp as u16);
            }
            i += ch.len_utf8();
        }
        start = i;
    }
    out.extend_from_slice(&b[start..]);
    out.push(b'"');
}

fn push_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&[
        b'\\',
        b'u',
        HEX[(v >> 12) as usize & 15],
        HEX[(v >> 8) as usize & 15],
        HEX[(v >> 4) as usize & 15],
        HEX[v as usize & 15],
    ]);
}

fn push_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => push_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

fn push_int(out: &mut Vec<u8>, buf: &mut itoa::Buffer, v: Option<i64>) {
    match v {
        Some(v) => out.extend_from_slice(buf.format(v).as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
}

fn push_bool(out: &mut Vec<u8>, v: Option<bool>) {
    out.extend_from_slice(match v {
        Some(true) => b"true",
        Some(false) => b"false",
        None => b"null",
    });
}

/// The columns of a message batch, found by name.
struct Columns<'a> {
    topic: Str<'a>,
    partition: Int<'a>,
    ledger_id: Int<'a>,
    entry_id: Int<'a>,
    batch_index: Int<'a>,
    key: Str<'a>,
    properties: &'a MapArray,
    prop_keys: Str<'a>,
    prop_values: Str<'a>,
    payload: Bin<'a>,
    publish_time: Int<'a>,
    event_time: Int<'a>,
    sequence_id: Int<'a>,
    producer_name: Str<'a>,
    null_value: &'a BooleanArray,
    encrypted: &'a BooleanArray,
    broker_timestamp: Int<'a>,
    broker_index: Int<'a>,
    txn_most_bits: Int<'a>,
    txn_least_bits: Int<'a>,
    txn_state: Str<'a>,
    marker: Option<Str<'a>>,
}

impl<'a> Columns<'a> {
    fn of(b: &'a RecordBatch) -> Result<Self> {
        let col = |name: &str| -> Result<&'a dyn Array> {
            b.column_by_name(name)
                .map(|a| a.as_ref())
                .ok_or_else(|| Error::invalid(format!("not a message batch: no column {name}")))
        };
        let properties = col("properties")?
            .as_map_opt()
            .ok_or_else(|| Error::invalid("column properties: expected a map column"))?;
        Ok(Columns {
            topic: Str::of(col("topic")?, "topic")?,
            partition: Int::of(col("partition")?, "partition")?,
            ledger_id: Int::of(col("ledger_id")?, "ledger_id")?,
            entry_id: Int::of(col("entry_id")?, "entry_id")?,
            batch_index: Int::of(col("batch_index")?, "batch_index")?,
            key: Str::of(col("key")?, "key")?,
            prop_keys: Str::of(properties.keys().as_ref(), "properties' keys")?,
            prop_values: Str::of(properties.values().as_ref(), "properties' values")?,
            properties,
            payload: Bin::of(col("payload")?, "payload")?,
            publish_time: Int::of(col("publish_time")?, "publish_time")?,
            event_time: Int::of(col("event_time")?, "event_time")?,
            sequence_id: Int::of(col("sequence_id")?, "sequence_id")?,
            producer_name: Str::of(col("producer_name")?, "producer_name")?,
            null_value: bools(col("null_value")?, "null_value")?,
            encrypted: bools(col("encrypted")?, "encrypted")?,
            broker_timestamp: Int::of(col("broker_timestamp")?, "broker_timestamp")?,
            broker_index: Int::of(col("broker_index")?, "broker_index")?,
            txn_most_bits: Int::of(col("txn_most_bits")?, "txn_most_bits")?,
            txn_least_bits: Int::of(col("txn_least_bits")?, "txn_least_bits")?,
            txn_state: Str::of(col("txn_state")?, "txn_state")?,
            marker: match b.column_by_name("marker") {
                Some(a) => Some(Str::of(a.as_ref(), "marker")?),
                None => None,
            },
        })
    }

    /// A row's properties as `dict(pairs)` makes them: a repeated key keeps its first place and its
    /// last value.
    fn properties(&self, out: &mut Vec<u8>, i: usize, seen: &mut HashMap<&'a str, usize>) {
        out.push(b'{');
        if self.properties.is_valid(i) {
            let offs = self.properties.value_offsets();
            let (a, z) = (offs[i] as usize, offs[i + 1] as usize);
            let key = |j: usize| self.prop_keys.get(j).unwrap_or("");
            // the common case: no key repeated (checked pairwise for a few, hashed beyond)
            let unique = if z - a <= 16 {
                (a..z).all(|j| (j + 1..z).all(|k| key(j) != key(k)))
            } else {
                seen.clear();
                (a..z).all(|j| seen.insert(key(j), j).is_none())
            };
            let mut first = true;
            for j in a..z {
                let k = key(j);
                let v = if unique {
                    j
                } else {
                    if (a..j).any(|p| key(p) == k) {
                        continue; // printed at its first place
                    }
                    (j..z).rev().find(|&p| key(p) == k).unwrap_or(j)
                };
                if !first {
                    out.extend_from_slice(b", ");
                }
                first = false;
                push_str(out, k);
                out.extend_from_slice(b": ");
                push_opt_str(out, self.prop_values.get(v));
            }
        }
        out.push(b'}');
    }
}

/// Every row of a batch of the message schema as one JSON line each (`\n`-terminated).
pub fn json_lines(batch: &RecordBatch) -> Result<Vec<u8>> {
    let c = Columns::of(batch)?;
    let n = batch.num_rows();
    let b64 = base64::engine::general_purpose::STANDARD;
    let payload_bytes: usize = (0..n).filter_map(|i| c.payload.get(i)).map(|p| p.len()).sum();
    let mut out = Vec::with_capacity(n * 420 + payload_bytes / 3 * 4 + 16);
    let mut ib = itoa::Buffer::new();
    let mut seen = HashMap::new();
    for i in 0..n {
        out.extend_from_slice(b"{\"topic\": ");
        push_opt_str(&mut out, c.topic.get(i));
        out.extend_from_slice(b", \"message_id\": {\"ledger_id\": ");
        push_int(&mut out, &mut ib, c.ledger_id.get(i));
        out.extend_from_slice(b", \"entry_id\": ");
        push_int(&mut out, &mut ib, c.entry_id.get(i));
        out.extend_from_slice(b", \"batch_index\": ");
        push_int(&mut out, &mut ib, c.batch_index.get(i));
        out.extend_from_slice(b", \"partition\": ");
        push_int(&mut out, &mut ib, c.partition.get(i));
        out.extend_from_slice(b"}, \"key\": ");
        push_opt_str(&mut out, c.key.get(i));
        out.extend_from_slice(b", \"properties\": ");
        c.properties(&mut out, i, &mut seen);
        out.extend_from_slice(b", \"payload_b64\": ");
        match c.payload.get(i) {
            Some(p) => {
                out.push(b'"');
                let at = out.len();
                out.resize(at + p.len().div_ceil(3) * 4, 0);
                let w = b64.encode_slice(p, &mut out[at..]).expect("room for the base64 of the payload");
                out.truncate(at + w);
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b", \"publish_time\": ");
        push_int(&mut out, &mut ib, c.publish_time.get(i));
        out.extend_from_slice(b", \"event_time\": ");
        push_int(&mut out, &mut ib, c.event_time.get(i));
        out.extend_from_slice(b", \"sequence_id\": ");
        push_int(&mut out, &mut ib, c.sequence_id.get(i));
        out.extend_from_slice(b", \"producer_name\": ");
        push_opt_str(&mut out, c.producer_name.get(i));
        out.extend_from_slice(b", \"null_value\": ");
        push_bool(&mut out, bool_at(c.null_value, i));
        out.extend_from_slice(b", \"encrypted\": ");
        push_bool(&mut out, bool_at(c.encrypted, i));
        out.extend_from_slice(b", \"broker_entry_metadata\": ");
        let (ts, index) = (c.broker_timestamp.get(i), c.broker_index.get(i));
        if ts.is_none() && index.is_none() {
            out.extend_from_slice(b"null");
        } else {
            out.extend_from_slice(b"{\"broker_timestamp\": ");
            push_int(&mut out, &mut ib, ts);
            out.extend_from_slice(b", \"index\": ");
            push_int(&mut out, &mut ib, index);
            out.push(b'}');
        }
        out.extend_from_slice(b", \"txn\": ");
        match c.txn_state.get(i) {
            None => out.extend_from_slice(b"null"),
            Some(state) => {
                // the bits unsigned, as stored (a missing half is 0)
                out.extend_from_slice(b"{\"most_bits\": ");
                out.extend_from_slice(ib.format(c.txn_most_bits.get(i).unwrap_or(0) as u64).as_bytes());
                out.extend_from_slice(b", \"least_bits\": ");
                out.extend_from_slice(ib.format(c.txn_least_bits.get(i).unwrap_or(0) as u64).as_bytes());
                out.extend_from_slice(b", \"state\": ");
                push_str(&mut out, state);
                out.push(b'}');
            }
        }
        if let Some(m) = &c.marker {
            out.extend_from_slice(b", \"marker\": ");
            push_opt_str(&mut out, m.get(i));
        }
        out.extend_from_slice(b"}\n");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(x: &str) -> String {
        let mut o = Vec::new();
        push_str(&mut o, x);
        String::from_utf8(o).unwrap()
    }

    /// Python's `json.dumps(str)` (ensure_ascii), written the slow obvious way.
    fn reference(x: &str) -> String {
        let mut o = String::from("\"");
        for ch in x.chars() {
            match ch {
                '"' => o.push_str("\\\""),
                '\\' => o.push_str("\\\\"),
                '\n' => o.push_str("\\n"),
                '\r' => o.push_str("\\r"),
                '\t' => o.push_str("\\t"),
                '\u{8}' => o.push_str("\\b"),
                '\u{c}' => o.push_str("\\f"),
                ' '..='~' => o.push(ch),
                _ => {
                    let mut units = [0u16; 2];
                    for u in ch.encode_utf16(&mut units) {
                        o.push_str(&format!("\\u{u:04x}"));
                    }
                }
            }
        }
        o.push('"');
        o
    }

    #[test]
    fn strings_as_python_prints_them() {
        assert_eq!(s("abc"), "\"abc\"");
        assert_eq!(s("a\"b\\c\n\r\t\u{8}\u{c}"), "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\"");
        assert_eq!(s("\u{0}\u{1f}\u{7f}"), "\"\\u0000\\u001f\\u007f\"");
        assert_eq!(s("é€"), "\"\\u00e9\\u20ac\"");
        assert_eq!(s("😀"), "\"\\ud83d\\ude00\"");
        assert_eq!(s(""), "\"\"");
    }

    proptest! {
        #[test]
        fn strings_match_the_reference(x in any::<String>()) {
            prop_assert_eq!(s(&x), reference(&x));
        }
    }
}
