//! Bookie entries as the BookKeeper client packs them (`DigestManager`):
//! `[ledgerId i64][entryId i64][lastAddConfirmed i64][length i64][digest N][payload]`, big-endian,
//! where the digest covers the 32-byte header and then the payload. This is exactly what a bookie
//! stores in its entry logs, whatever wire protocol carried it.
use crate::error::{Error, Result};
use hmac::{Hmac, Mac};
use sha1::{Digest as _, Sha1};

/// Size of the `[ledgerId][entryId][lac][length]` header that precedes the digest.
pub const BOOKIE_HEADER_SIZE: usize = 32;
/// The longest digest (HMAC-SHA1).
pub const MAX_DIGEST_SIZE: usize = 20;

/// BookKeeper's digest types, with the numbers of `LedgerMetadataFormat.DigestType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DigestType {
    Crc32,
    Mac,
    Crc32c,
    Dummy,
}

impl DigestType {
    pub const ALL: [DigestType; 4] = [DigestType::Crc32c, DigestType::Crc32, DigestType::Mac, DigestType::Dummy];

    /// Accepts BookKeeper's names (`CRC32C`, `CRC32`, `MAC`, `HMAC`, `DUMMY`), any case.
    pub fn from_name(name: &str) -> Result<Self> {
        match name.to_ascii_uppercase().as_str() {
            "CRC32C" => Ok(DigestType::Crc32c),
            "CRC32" => Ok(DigestType::Crc32),
            "MAC" | "HMAC" | "HMACSHA1" | "HMAC-SHA1" => Ok(DigestType::Mac),
            "DUMMY" | "NONE" => Ok(DigestType::Dummy),
            other => Err(Error::InvalidArgument(format!(
                "unknown digest type {other:?}: expected CRC32C, CRC32, MAC or DUMMY"
            ))),
        }
    }

    /// The client-API name (`DigestType.name()` in Java).
    pub fn name(self) -> &'static str {
        match self {
            DigestType::Crc32 => "CRC32",
            DigestType::Mac => "MAC",
            DigestType::Crc32c => "CRC32C",
            DigestType::Dummy => "DUMMY",
        }
    }

    /// The value in ledger metadata (`DataFormats.LedgerMetadataFormat.DigestType`).
    pub fn proto_value(self) -> i32 {
        match self {
            DigestType::Crc32 => 1,
            DigestType::Mac => 2,
            DigestType::Crc32c => 3,
            DigestType::Dummy => 4,
        }
    }

    pub fn from_proto_value(v: i32) -> Result<Self> {
        match v {
            1 => Ok(DigestType::Crc32),
            2 => Ok(DigestType::Mac),
            3 => Ok(DigestType::Crc32c),
            4 => Ok(DigestType::Dummy),
            _ => Err(Error::InvalidArgument(format!("unknown digest type number {v}"))),
        }
    }

    /// Bytes the digest occupies after the 32-byte header.
    pub fn digest_len(self) -> usize {
        match self {
            DigestType::Crc32 => 8,
            DigestType::Mac => 20,
            DigestType::Crc32c => 4,
            DigestType::Dummy => 0,
        }
    }
}

/// A computed digest (at most 20 bytes, no allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestValue {
    bytes: [u8; MAX_DIGEST_SIZE],
    len: u8,
}

impl DigestValue {
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// Packs and verifies entries for one digest type and password. Cheap to clone; for MAC the key
/// SHA-1("mac" ‖ password) is derived once here.
#[derive(Clone)]
pub struct Digester {
    kind: DigestType,
    mac: Option<Hmac<Sha1>>,
}

impl std::fmt::Debug for Digester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Digester").field("kind", &self.kind).finish()
    }
}

/// The 32-byte header of a stored entry, big-endian.
pub fn bookie_header(ledger_id: i64, entry_id: i64, last_add_confirmed: i64, length: i64) -> [u8; BOOKIE_HEADER_SIZE] {
    let mut h = [0u8; BOOKIE_HEADER_SIZE];
    h[0..8].copy_from_slice(&ledger_id.to_be_bytes());
    h[8..16].copy_from_slice(&entry_id.to_be_bytes());
    h[16..24].copy_from_slice(&last_add_confirmed.to_be_bytes());
    h[24..32].copy_from_slice(&length.to_be_bytes());
    h
}

/// BookKeeper's `MacDigestManager.genDigest("mac", password)`.
pub fn mac_key(password: &[u8]) -> [u8; 20] {
    let mut h = Sha1::new();
    h.update(b"mac");
    h.update(password);
    h.finalize().into()
}

/// BookKeeper's `DigestManager.generateMasterKey(password)` = SHA-1("ledger" ‖ password): the master
/// key a bookie keeps per ledger (LedgerData.masterKey), not used for digests.
pub fn master_key(password: &[u8]) -> [u8; 20] {
    let mut h = Sha1::new();
    h.update(b"ledger");
    h.update(password);
    h.finalize().into()
}

/// The fields of a stored bookie entry; `payload` borrows from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BookieEntry<'a> {
    pub ledger_id: i64,
    pub entry_id: i64,
    pub last_add_confirmed: i64,
    /// Cumulative ledger length including this entry.
    pub length: i64,
    pub digest: &'a [u8],
    pub payload: &'a [u8],
    /// Offset of the payload in the stored bytes (32 + digest length).
    pub payload_offset: usize,
}

fn be_i64(b: &[u8]) -> i64 {
    i64::from_be_bytes(b[..8].try_into().unwrap())
}

/// Splits stored entry bytes without checking the digest. Any `digest_len` is taken: one no buffer can
/// hold is the short-entry error (the sum saturates instead of overflowing into a slice panic).
pub fn parse_bookie_entry(data: &[u8], digest_len: usize) -> Result<BookieEntry<'_>> {
    let need = BOOKIE_HEADER_SIZE.saturating_add(digest_len);
    if data.len() < need {
        return Err(Error::corrupt(
            data.len(),
            format!(
                "bookie entry of {} bytes is shorter than its {BOOKIE_HEADER_SIZE}-byte header and {digest_len}-byte digest",
                data.len()
            ),
        ));
    }
    Ok(BookieEntry {
        ledger_id: be_i64(&data[0..]),
        entry_id: be_i64(&data[8..]),
        last_add_confirmed: be_i64(&data[16..]),
        length: be_i64(&data[24..]),
        digest: &data[BOOKIE_HEADER_SIZE..need],
        payload: &data[need..],
        payload_offset: need,
    })
}

/// Consecutive entries of one ledger as a `LedgerHandle` packs them: entry ids from
/// `first_entry_id`, each entry's LAC the previous entry id (the first's `last_add_confirmed`),
/// `length` accumulating each payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedgerRun {
    pub ledger_id: i64,
    pub first_entry_id: i64,
    pub last_add_confirmed: i64,
    pub length: i64,
}

impl Digester {
    /// `password` matters only for MAC (it keys the HMAC), as in BookKeeper.
    pub fn new(kind: DigestType, password: &[u8]) -> Self {
        let mac = (kind == DigestType::Mac)
            .then(|| Hmac::<Sha1>::new_from_slice(&mac_key(password)).expect("HMAC takes keys of any length"));
        Digester { kind, mac }
    }

    pub fn kind(&self) -> DigestType {
        self.kind
    }

    pub fn digest_len(&self) -> usize {
        self.kind.digest_len()
    }

    /// The digest of `header ‖ payload`, as BookKeeper's client computes it.
    pub fn compute(&self, header: &[u8], payload: &[u8]) -> DigestValue {
        let mut v = DigestValue { bytes: [0; MAX_DIGEST_SIZE], len: self.kind.digest_len() as u8 };
        match self.kind {
            DigestType::Crc32c => {
                let c = crate::codec::crc::crc32c_resume(crate::codec::crc::crc32c(header), payload);
                v.bytes[..4].copy_from_slice(&c.to_be_bytes());
            }
            DigestType::Crc32 => {
                let mut h = crc32fast::Hasher::new();
                h.update(header);
                h.update(payload);
                // Written as a long: four zero bytes, then the CRC.
                v.bytes[..8].copy_from_slice(&u64::from(h.finalize()).to_be_bytes());
            }
            DigestType::Mac => {
                let mut m = self.mac.clone().expect("MAC digester has a key");
                m.update(header);
                m.update(payload);
                v.bytes.copy_from_slice(&m.finalize().into_bytes());
            }
            DigestType::Dummy => {}
        }
        v
    }

    /// Stored bytes for one entry: header, digest, payload.
    pub fn pack(&self, ledger_id: i64, entry_id: i64, last_add_confirmed: i64, length: i64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(BOOKIE_HEADER_SIZE + self.digest_len() + payload.len());
        self.pack_into(&mut out, ledger_id, entry_id, last_add_confirmed, length, payload);
        out
    }

    /// Appends the stored bytes of one entry to `out`.
    pub fn pack_into(&self, out: &mut Vec<u8>, ledger_id: i64, entry_id: i64, lac: i64, length: i64, payload: &[u8]) {
        let h = bookie_header(ledger_id, entry_id, lac, length);
        let d = self.compute(&h, payload);
        out.extend_from_slice(&h);
        out.extend_from_slice(d.as_bytes());
        out.extend_from_slice(payload);
    }

    /// The stored bytes of a [`LedgerRun`]'s entries.
    pub fn pack_many<P: AsRef<[u8]>>(&self, run: LedgerRun, payloads: &[P]) -> Vec<Vec<u8>> {
        self.heads_many(run, payloads)
            .into_iter()
            .zip(payloads)
            .map(|((h, d), p)| [&h[..], d.as_bytes(), p.as_ref()].concat())
            .collect()
    }

    /// What [`Self::pack_many`] puts before each payload (header, digest), without copying the
    /// payloads: a caller that allocates the output itself (a Python `bytes`) copies each once.
    pub fn heads_many<P: AsRef<[u8]>>(
        &self,
        run: LedgerRun,
        payloads: &[P],
    ) -> Vec<([u8; BOOKIE_HEADER_SIZE], DigestValue)> {
        let LedgerRun { ledger_id, first_entry_id, last_add_confirmed, length } = run;
        let (mut lac, mut len) = (last_add_confirmed, length);
        payloads
            .iter()
            .enumerate()
            .map(|(i, p)| {
                // a Java long's arithmetic, as the LedgerHandle's: wrapping, never a panic
                let eid = first_entry_id.wrapping_add(i as i64);
                len = len.wrapping_add(p.as_ref().len() as i64);
                let h = bookie_header(ledger_id, eid, lac, len);
                let d = self.compute(&h, p.as_ref());
                lac = eid;
                (h, d)
            })
            .collect()
    }

    /// True when the stored digest matches; an error only when the bytes are too short to hold
    /// the header and digest.
    pub fn check<'a>(&self, data: &'a [u8]) -> Result<(BookieEntry<'a>, bool)> {
        let e = parse_bookie_entry(data, self.digest_len())?;
        let d = self.compute(&data[..BOOKIE_HEADER_SIZE], e.payload);
        Ok((e, d.as_bytes() == e.digest))
    }

    /// Parses and verifies stored bytes like `DigestManager.verifyDigestAndReturnData`: the digest
    /// must match and, when given, the ledger and entry ids too.
    pub fn verify<'a>(&self, data: &'a [u8], ledger_id: Option<i64>, entry_id: Option<i64>) -> Result<BookieEntry<'a>> {
        let (e, ok) = self.check(data)?;
        if !ok {
            return Err(Error::DigestMismatch {
                digest: self.kind.name(),
                ledger_id: e.ledger_id,
                entry_id: e.entry_id,
                offset: BOOKIE_HEADER_SIZE as u64,
                stored: e.digest.to_vec(),
                computed: self.compute(&data[..BOOKIE_HEADER_SIZE], e.payload).as_bytes().to_vec(),
            });
        }
        if let Some(l) = ledger_id.filter(|&l| l != e.ledger_id) {
            return Err(Error::corrupt(0, format!("entry has ledger id {}, expected {l}", e.ledger_id)));
        }
        if let Some(x) = entry_id.filter(|&x| x != e.entry_id) {
            return Err(Error::corrupt(8, format!("entry has entry id {}, expected {x}", e.entry_id)));
        }
        Ok(e)
    }
}

/// Which digest type a stored entry was packed with, found by trying CRC32C, CRC32 and (when a
/// password is given) MAC in turn. `None` when none matches; DUMMY cannot be told from corruption.
pub fn detect_digest_type(data: &[u8], mac: Option<&Digester>) -> Option<DigestType> {
    if data.len() < BOOKIE_HEADER_SIZE {
        return None;
    }
    let header = &data[..BOOKIE_HEADER_SIZE];
    let body = &data[BOOKIE_HEADER_SIZE..];
    if body.len() >= 4 {
        let c = crate::codec::crc::crc32c_resume(crate::codec::crc::crc32c(header), &body[4..]);
        if body[..4] == c.to_be_bytes() {
            return Some(DigestType::Crc32c);
        }
    }
    if body.len() >= 8 && body[..4] == [0; 4] {
        let mut h = crc32fast::Hasher::new();
        h.update(header);
        h.update(&body[8..]);
        if body[4..8] == h.finalize().to_be_bytes() {
            return Some(DigestType::Crc32);
        }
    }
    if let Some(m) = mac {
        if body.len() >= 20 && m.compute(header, &body[20..]).as_bytes() == &body[..20] {
            return Some(DigestType::Mac);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_many_chains_lac_and_length_like_a_ledger_handle() {
        let d = Digester::new(DigestType::Crc32c, b"");
        let run = LedgerRun { ledger_id: 7, first_entry_id: 3, last_add_confirmed: 2, length: 100 };
        let out = d.pack_many(run, &[b"ab".as_slice(), b"cde".as_slice()]);
        let a = d.verify(&out[0], Some(7), Some(3)).unwrap();
        let b = d.verify(&out[1], Some(7), Some(4)).unwrap();
        assert_eq!((a.last_add_confirmed, a.length, a.payload), (2, 102, b"ab".as_slice()));
        assert_eq!((b.last_add_confirmed, b.length, b.payload), (3, 105, b"cde".as_slice()));
    }

    #[test]
    fn verify_reports_digest_mismatch_with_both_digests() {
        let d = Digester::new(DigestType::Crc32c, b"");
        let mut e = d.pack(1, 0, -1, 3, b"abc");
        let n = e.len();
        e[n - 1] ^= 1;
        match d.verify(&e, None, None) {
            Err(Error::DigestMismatch { ledger_id: 1, entry_id: 0, offset: 32, stored, computed, .. }) => {
                assert_eq!(stored.len(), 4);
                assert_ne!(stored, computed);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn lengths_and_names() {
        for t in DigestType::ALL {
            assert_eq!(DigestType::from_name(t.name()).unwrap(), t);
            assert_eq!(DigestType::from_proto_value(t.proto_value()).unwrap(), t);
        }
        assert_eq!(DigestType::from_name("hmac").unwrap(), DigestType::Mac);
        assert!(DigestType::from_name("sha256").is_err());
    }

    #[test]
    fn crc32c_covers_header_then_payload() {
        let d = Digester::new(DigestType::Crc32c, b"");
        let e = d.pack(7, 3, 2, 100, b"hello");
        assert_eq!(e.len(), 32 + 4 + 5);
        let mut whole = e[..32].to_vec();
        whole.extend_from_slice(b"hello");
        assert_eq!(&e[32..36], &crate::codec::crc::crc32c(&whole).to_be_bytes());
        let p = d.verify(&e, Some(7), Some(3)).unwrap();
        assert_eq!((p.ledger_id, p.entry_id, p.last_add_confirmed, p.length, p.payload), (7, 3, 2, 100, &b"hello"[..]));
    }

    #[test]
    fn crc32_is_a_long() {
        let d = Digester::new(DigestType::Crc32, b"");
        let e = d.pack(1, 0, -1, 3, b"abc");
        assert_eq!(&e[32..36], &[0, 0, 0, 0]);
        let mut whole = e[..32].to_vec();
        whole.extend_from_slice(b"abc");
        assert_eq!(&e[36..40], &crc32fast::hash(&whole).to_be_bytes());
        assert!(d.verify(&e, None, None).is_ok());
    }

    #[test]
    fn mac_depends_on_password() {
        let a = Digester::new(DigestType::Mac, b"secret");
        let b = Digester::new(DigestType::Mac, b"other");
        let e = a.pack(1, 0, -1, 3, b"abc");
        assert_eq!(e.len(), 32 + 20 + 3);
        assert!(a.verify(&e, None, None).is_ok());
        assert!(b.verify(&e, None, None).is_err());
        assert_eq!(detect_digest_type(&e, Some(&a)), Some(DigestType::Mac));
        assert_eq!(detect_digest_type(&e, None), None);
    }

    #[test]
    fn dummy_and_errors() {
        let d = Digester::new(DigestType::Dummy, b"");
        let e = d.pack(1, 2, 1, 3, b"abc");
        assert_eq!(e.len(), 35);
        assert!(d.verify(&e, Some(1), Some(2)).is_ok());
        assert!(d.verify(&e, Some(2), None).is_err());
        assert!(d.verify(&e, None, Some(3)).is_err());
        assert!(parse_bookie_entry(&e[..20], 0).is_err());
    }

    #[test]
    fn pack_many_wraps_ids_and_length_as_java_longs() {
        let d = Digester::new(DigestType::Crc32c, b"");
        let run = LedgerRun { ledger_id: 1, first_entry_id: i64::MAX, last_add_confirmed: 5, length: i64::MAX - 1 };
        let out = d.pack_many(run, &[b"ab".as_slice(), b"c".as_slice()]);
        let a = d.verify(&out[0], Some(1), Some(i64::MAX)).unwrap();
        let b = d.verify(&out[1], Some(1), Some(i64::MIN)).unwrap();
        assert_eq!((a.last_add_confirmed, a.length), (5, i64::MIN));
        assert_eq!((b.last_add_confirmed, b.length), (i64::MAX, i64::MIN + 1));
    }

    #[test]
    fn a_digest_length_past_usize_is_a_short_entry_not_a_panic() {
        let e = Digester::new(DigestType::Crc32c, b"").pack(1, 0, -1, 3, b"abc");
        for dl in [usize::MAX, usize::MAX - 31, usize::MAX - 32] {
            match parse_bookie_entry(&e, dl) {
                Err(Error::Corrupt { offset, .. }) => assert_eq!(offset, e.len() as u64),
                other => panic!("{dl}: {other:?}"),
            }
        }
    }

    #[test]
    fn detects_flipped_bits_and_types() {
        for t in [DigestType::Crc32c, DigestType::Crc32] {
            let d = Digester::new(t, b"");
            let mut e = d.pack(5, 6, 5, 99, b"payload bytes");
            assert_eq!(detect_digest_type(&e, None), Some(t));
            let n = e.len();
            e[n - 1] ^= 1;
            assert!(d.verify(&e, None, None).is_err());
            assert!(!d.check(&e).unwrap().1);
        }
    }
}
