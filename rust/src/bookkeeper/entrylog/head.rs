//! The head of an entry-log record: its Pulsar entry up to the end of the MessageMetadata (broker
//! entry metadata included), without the payload. What a reader decodes to learn an entry's
//! metadata (transactions, chunks, times) from a short positioned read at the entry's location.
//!
//! A record in an entry log is `[u32 length][ledger id][entry id][LAC][ledger length][digest]
//! [Pulsar entry]`, the Pulsar entry `[0x0e02 u32 BrokerEntryMetadata]? [0x0e01 u32 crc32c]?
//! [u32 metadata size][MessageMetadata][payload]`. The bytes are untrusted: every length is
//! checked against the buffer, and the verdict is only a position, never a read past the end.

/// Bytes before the digest: the record's length field and the bookie header (ids, LAC, length).
pub const RECORD_HEADER: usize = 4 + 32;
/// A MessageMetadata larger than this is not believed (the broker's limit is far below).
pub const MAX_METADATA_SIZE: u32 = 1 << 24;
/// The digest lengths tried, in order, when the ledger's digest type is unknown: CRC32C, CRC32,
/// MAC, DUMMY.
pub const DIGEST_CANDIDATES: [usize; 4] = [4, 8, 20, 0];

const MAGIC_CHECKSUM: [u8; 2] = [0x0e, 0x01];
const MAGIC_BROKER_ENTRY_METADATA: [u8; 2] = [0x0e, 0x02];

/// What [`record_head`] found in a buffer holding the start of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// The head is `buf[start..end]`; `digest_len` is the digest length used.
    At { start: usize, end: usize, digest_len: usize },
    /// The buffer is too short: read it to at least `len` bytes (within the record) and ask again
    /// with `digest_len`.
    Need { len: usize, digest_len: usize },
    /// Not that entry, or not a Pulsar entry: read it whole instead.
    Invalid,
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4).map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    b.get(at..at + 8).map(|s| u64::from_be_bytes(s.try_into().expect("8 bytes")))
}

/// Where the MessageMetadata of the record in `buf` ends (an offset into `buf`), given the digest
/// length; `Some(n)` with `n > buf.len()` when at least `n` bytes are needed to tell; `None` when
/// the bytes are no Pulsar entry.
pub fn head_end(buf: &[u8], digest_len: usize) -> Option<usize> {
    let mut p = RECORD_HEADER + digest_len;
    if buf.len() < p + 2 {
        return Some(p + 2);
    }
    if buf[p..p + 2] == MAGIC_BROKER_ENTRY_METADATA {
        let Some(n) = be_u32(buf, p + 2) else { return Some(p + 6) };
        p = p.checked_add(6 + n as usize)?;
        if buf.len() < p + 2 {
            return Some(p + 2);
        }
    }
    if buf[p..p + 2] == MAGIC_CHECKSUM {
        p += 6; // magic and CRC32C; an entry without a checksum has neither
    }
    let Some(n) = be_u32(buf, p) else { return Some(p + 4) };
    if n >= MAX_METADATA_SIZE {
        return None;
    }
    Some(p + 4 + n as usize)
}

/// The head of entry `(ledger_id, entry_id)` in `buf`, which starts at the record's length field.
/// `digest_len` None: the digest whose length puts a Pulsar magic right after it (first of
/// [`DIGEST_CANDIDATES`]). [`Head::Invalid`] when the record is not that entry, its length does not
/// hold the head, or the bytes are no Pulsar entry. The digest is not verified.
pub fn record_head(buf: &[u8], ledger_id: i64, entry_id: i64, digest_len: Option<usize>) -> Head {
    if buf.len() < RECORD_HEADER + 6 {
        return Head::Invalid;
    }
    let size = be_u32(buf, 0).expect("checked") as usize;
    let ids = (be_u64(buf, 4).expect("checked") as i64, be_u64(buf, 12).expect("checked") as i64);
    if ids != (ledger_id, entry_id) {
        return Head::Invalid;
    }
    let dlen = match digest_len {
        // a caller's length that no digest type has is no head (and `RECORD_HEADER + d` cannot wrap)
        Some(d) if !DIGEST_CANDIDATES.contains(&d) => return Head::Invalid,
        Some(d) => d,
        None => {
            let magic_at = |d: usize| {
                buf.get(RECORD_HEADER + d..RECORD_HEADER + d + 2)
                    .is_some_and(|m| m == MAGIC_CHECKSUM || m == MAGIC_BROKER_ENTRY_METADATA)
            };
            match DIGEST_CANDIDATES.into_iter().find(|&d| magic_at(d)) {
                Some(d) => d,
                None => return Head::Invalid,
            }
        }
    };
    let record_end = 4 + size;
    match head_end(buf, dlen) {
        None => Head::Invalid,
        Some(end) if end > record_end => Head::Invalid,
        Some(end) if end > buf.len() => Head::Need { len: end, digest_len: dlen },
        Some(end) => Head::At { start: RECORD_HEADER + dlen, end, digest_len: dlen },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(lid: i64, eid: i64, digest: &[u8], entry: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&lid.to_be_bytes());
        body.extend_from_slice(&eid.to_be_bytes());
        body.extend_from_slice(&(-1i64).to_be_bytes());
        body.extend_from_slice(&(entry.len() as i64).to_be_bytes());
        body.extend_from_slice(digest);
        body.extend_from_slice(entry);
        let mut out = (body.len() as u32).to_be_bytes().to_vec();
        out.extend(body);
        out
    }

    fn entry(bem: Option<&[u8]>, checksum: bool, md: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut e = Vec::new();
        if let Some(b) = bem {
            e.extend_from_slice(&MAGIC_BROKER_ENTRY_METADATA);
            e.extend_from_slice(&(b.len() as u32).to_be_bytes());
            e.extend_from_slice(b);
        }
        if checksum {
            e.extend_from_slice(&MAGIC_CHECKSUM);
            e.extend_from_slice(&[1, 2, 3, 4]);
        }
        e.extend_from_slice(&(md.len() as u32).to_be_bytes());
        e.extend_from_slice(md);
        e.extend_from_slice(payload);
        e
    }

    #[test]
    fn finds_the_head_with_and_without_broker_entry_metadata() {
        let md = [0x0a, 0x01, b'p'];
        for (bem, checksum) in [(None, true), (Some(&[8u8, 1][..]), true), (None, false), (Some(&[8u8, 1][..]), false)]
        {
            let e = entry(bem, checksum, &md, b"payload");
            let head_len = e.len() - b"payload".len();
            let r = record(7, 3, &[0; 4], &e);
            // a known digest, and one detected (CRC32C's 4 bytes; without a checksum magic or broker
            // entry metadata, the first candidate must see one, so only entries that have one detect)
            let want = Head::At { start: 40, end: 40 + head_len, digest_len: 4 };
            assert_eq!(record_head(&r, 7, 3, Some(4)), want);
            if bem.is_some() || checksum {
                assert_eq!(record_head(&r, 7, 3, None), want);
            }
            // every shorter prefix asks for more, and what it asks for is enough or asks again
            for cut in RECORD_HEADER + 6..40 + head_len {
                match record_head(&r[..cut], 7, 3, Some(4)) {
                    Head::Need { len, digest_len: 4 } => assert!(len > cut && len <= 40 + head_len),
                    other => panic!("prefix {cut}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn rejects_other_entries_and_bad_lengths() {
        let e = entry(None, true, &[0x0a, 0x01, b'p'], b"x");
        let r = record(7, 3, &[0; 8], &e);
        assert_eq!(record_head(&r, 7, 4, Some(8)), Head::Invalid);
        assert_eq!(record_head(&r, 8, 3, Some(8)), Head::Invalid);
        assert_eq!(record_head(&r, 7, 3, None), Head::At { start: 44, end: r.len() - 1, digest_len: 8 });
        assert_eq!(record_head(&r[..20], 7, 3, Some(8)), Head::Invalid);
        // a digest length no digest type has (and one that would wrap an offset)
        assert_eq!(record_head(&r, 7, 3, Some(7)), Head::Invalid);
        assert_eq!(record_head(&r, 7, 3, Some(usize::MAX - 2)), Head::Invalid);
        // metadata size beyond the record, or absurd
        let mut big = r.clone();
        big[44 + 6..44 + 10].copy_from_slice(&1000u32.to_be_bytes());
        assert_eq!(record_head(&big, 7, 3, Some(8)), Head::Invalid);
        big[44 + 6..44 + 10].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(record_head(&big, 7, 3, Some(8)), Head::Invalid);
        // a broker entry metadata size that overflows
        let mut b = record(7, 3, &[0; 4], &entry(Some(&[1, 2]), true, &[1], b""));
        b[40 + 2..40 + 6].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(record_head(&b, 7, 3, Some(4)), Head::Invalid | Head::Need { .. }));
    }
}
