//! Bounds-checked reading of big-endian frame integers and of raw protobuf fields.
//! Every length taken from input is checked against what remains before it is used.
use crate::error::{Error, Result};
use std::ops::Range;

/// A cursor over a byte slice whose reads fail (never panic) past the end.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    pub fn at(buf: &'a [u8], pos: usize) -> Self {
        Reader { buf, pos: pos.min(buf.len()) }
    }
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }
    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    #[inline]
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::corrupt(
                self.pos,
                format!("expected {n} bytes of {what}, only {} remain", self.remaining()),
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    #[inline]
    pub fn range(&mut self, n: usize, what: &str) -> Result<Range<usize>> {
        let start = self.pos;
        self.take(n, what)?;
        Ok(start..start + n)
    }
    #[inline]
    pub fn u16(&mut self, what: &str) -> Result<u16> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    #[inline]
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    #[inline]
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.take(8, what)?;
        Ok(u64::from_be_bytes(b.try_into().unwrap()))
    }
    #[inline]
    pub fn peek_u16(&self) -> Option<u16> {
        if self.remaining() >= 2 {
            Some(u16::from_be_bytes([self.buf[self.pos], self.buf[self.pos + 1]]))
        } else {
            None
        }
    }
    /// A u32 length prefix, checked against the bytes that follow it.
    #[inline]
    pub fn len_prefixed(&mut self, what: &str) -> Result<Range<usize>> {
        let at = self.pos;
        let n = self.u32(what)? as usize;
        if n > self.remaining() {
            return Err(Error::corrupt(at, format!("{what} declares {n} bytes, only {} remain", self.remaining())));
        }
        self.range(n, what)
    }
}

/// One raw protobuf field value.
#[derive(Debug, Clone)]
pub enum Value {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    /// Byte range of a length-delimited value, relative to the walked buffer.
    Bytes(Range<usize>),
}

#[inline(always)]
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<u64> {
    // Fast path: field keys and most small values are a single byte.
    if let Some(&b) = buf.get(*pos) {
        if b < 0x80 {
            *pos += 1;
            return Ok(u64::from(b));
        }
    }
    let start = *pos;
    let mut v: u64 = 0;
    for i in 0..10 {
        let Some(&b) = buf.get(*pos) else {
            return Err(Error::corrupt(start, "truncated varint"));
        };
        *pos += 1;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(Error::corrupt(start, "varint longer than 10 bytes"))
}

/// The field at `*pos` if its key is exactly the one-or-two-byte `key` (wire type `WT`, 0 or 2) and its
/// value is complete: the value, with `*pos` moved past it. Anything else (another key, a truncated
/// or overlong value) gives `None` and leaves `*pos` alone, so a caller expecting fields in a known
/// order can hand the rest to [`walk_fields_from`], which reads them (or reports them) exactly.
#[inline(always)]
pub fn expect_field<const WT: u8>(buf: &[u8], pos: &mut usize, key: &[u8]) -> Option<Value> {
    let rest = buf.get(*pos..)?;
    if !rest.starts_with(key) {
        return None;
    }
    let mut p = *pos + key.len();
    let v = read_varint(buf, &mut p).ok()?;
    let v = if WT == 0 {
        Value::Varint(v)
    } else {
        if v > (buf.len() - p) as u64 {
            return None;
        }
        let r = p..p + v as usize;
        p = r.end;
        Value::Bytes(r)
    };
    *pos = p;
    Some(v)
}

/// Calls `f(field_number, value)` for each field of a protobuf message, in wire order.
/// Groups (wire types 3/4) are rejected: Pulsar's messages never use them.
#[inline]
pub fn walk_fields(buf: &[u8], f: impl FnMut(u32, Value) -> Result<()>) -> Result<()> {
    walk_fields_from(buf, 0, f)
}

/// [`walk_fields`] from offset `start` (a field boundary), for decoders that read a prefix of the
/// fields themselves; offsets in errors stay relative to `buf`.
#[inline]
pub fn walk_fields_from(buf: &[u8], start: usize, mut f: impl FnMut(u32, Value) -> Result<()>) -> Result<()> {
    let mut pos = start;
    while pos < buf.len() {
        let at = pos;
        let key = read_varint(buf, &mut pos)?;
        let field = (key >> 3) as u32;
        if field == 0 || key >> 3 > u64::from(u32::MAX >> 3) {
            return Err(Error::corrupt(at, format!("invalid protobuf field number in key {key}")));
        }
        let v = match key & 7 {
            0 => Value::Varint(read_varint(buf, &mut pos)?),
            1 => {
                let b = buf.get(pos..pos + 8).ok_or_else(|| Error::corrupt(pos, "truncated fixed64"))?;
                pos += 8;
                Value::Fixed64(u64::from_le_bytes(b.try_into().unwrap()))
            }
            2 => {
                let len_at = pos;
                let n = read_varint(buf, &mut pos)?;
                if n > (buf.len() - pos) as u64 {
                    return Err(Error::corrupt(
                        len_at,
                        format!("field {field} declares {n} bytes, only {} remain", buf.len() - pos),
                    ));
                }
                let r = pos..pos + n as usize;
                pos += n as usize;
                Value::Bytes(r)
            }
            5 => {
                let b = buf.get(pos..pos + 4).ok_or_else(|| Error::corrupt(pos, "truncated fixed32"))?;
                pos += 4;
                Value::Fixed32(u32::from_le_bytes(b.try_into().unwrap()))
            }
            wt => return Err(Error::corrupt(at, format!("unsupported protobuf wire type {wt} for field {field}"))),
        };
        // Errors raised by the visitor are relative to the field's key.
        f(field, v).map_err(|e| e.shifted(at))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_never_reads_past_end() {
        let mut r = Reader::new(&[0, 0, 0, 9, 1, 2]);
        let e = r.len_prefixed("metadata").unwrap_err();
        assert_eq!(e.offset(), Some(0));
        assert!(e.to_string().contains("declares 9 bytes, only 2 remain"));
    }

    #[test]
    fn walk_rejects_truncation() {
        // field 1, length 5, but only 2 bytes follow
        let e = walk_fields(&[0x0a, 0x05, b'a', b'b'], |_, _| Ok(())).unwrap_err();
        assert_eq!(e.offset(), Some(1));
    }
}
