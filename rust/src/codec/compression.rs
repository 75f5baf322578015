//! Pulsar's four payload codecs, byte-compatible with the Java and C++ clients:
//! LZ4 raw block, zlib-wrapped deflate, a standard zstd frame, raw (unframed) snappy.
//! Decoders produce exactly `uncompressed_size` bytes and never allocate above `limit`.
use crate::codec::entry::{DEFAULT_MAX_MESSAGE_SIZE, MESSAGE_SIZE_FRAME_PADDING};
use crate::error::{Error, Result};

/// Default ceiling for one decompressed payload: Pulsar's max message size plus frame padding.
pub const DEFAULT_DECOMPRESSION_LIMIT: usize = DEFAULT_MAX_MESSAGE_SIZE + MESSAGE_SIZE_FRAME_PADDING;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    None = 0,
    Lz4 = 1,
    Zlib = 2,
    Zstd = 3,
    Snappy = 4,
}

impl Codec {
    pub const ALL: [Codec; 5] = [Codec::None, Codec::Lz4, Codec::Zlib, Codec::Zstd, Codec::Snappy];

    pub fn from_wire(v: i32) -> Result<Codec> {
        Ok(match v {
            0 => Codec::None,
            1 => Codec::Lz4,
            2 => Codec::Zlib,
            3 => Codec::Zstd,
            4 => Codec::Snappy,
            other => return Err(Error::UnsupportedCompression(format!("{other} (wire value)"))),
        })
    }

    pub fn from_name(name: &str) -> Result<Codec> {
        Ok(match name.to_ascii_uppercase().as_str() {
            "NONE" => Codec::None,
            "LZ4" => Codec::Lz4,
            "ZLIB" => Codec::Zlib,
            "ZSTD" => Codec::Zstd,
            "SNAPPY" => Codec::Snappy,
            _ => {
                return Err(Error::UnsupportedCompression(format!(
                    "{name:?}; expected NONE, LZ4, ZLIB, ZSTD or SNAPPY"
                )))
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "NONE",
            Codec::Lz4 => "LZ4",
            Codec::Zlib => "ZLIB",
            Codec::Zstd => "ZSTD",
            Codec::Snappy => "SNAPPY",
        }
    }
}

/// Compresses as the Pulsar producer does (zstd level 3, zlib default level, complete zlib stream).
pub fn compress(codec: Codec, data: &[u8]) -> Result<Vec<u8>> {
    match codec {
        Codec::None => Ok(data.to_vec()),
        Codec::Lz4 => Ok(lz4_flex::block::compress(data)),
        Codec::Zlib => {
            use std::io::Write;
            let mut enc = flate2::write::ZlibEncoder::new(
                Vec::with_capacity(data.len() / 2 + 16),
                flate2::Compression::default(),
            );
            enc.write_all(data).and_then(|_| enc.finish()).map_err(|e| Error::InvalidArgument(format!("zlib: {e}")))
        }
        Codec::Zstd => zstd_compress(data).map_err(|e| Error::InvalidArgument(format!("zstd: {e}"))),
        Codec::Snappy => {
            snap::raw::Encoder::new().compress_vec(data).map_err(|e| Error::InvalidArgument(format!("snappy: {e}")))
        }
    }
}

/// Decompresses to exactly `uncompressed_size` bytes. NONE returns the input unchanged (as Pulsar
/// does, ignoring the size). Anything that would produce more or fewer bytes is an error.
pub fn decompress(codec: Codec, data: &[u8], uncompressed_size: usize, limit: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    decompress_into(codec, data, uncompressed_size, limit, &mut out)?;
    Ok(out)
}

/// [`decompress`] into `out` (cleared first, left holding exactly the output), so a caller that
/// decompresses entry after entry reuses one buffer instead of faulting in fresh pages each time.
pub fn decompress_into(
    codec: Codec,
    data: &[u8],
    uncompressed_size: usize,
    limit: usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    out.clear();
    if codec == Codec::None {
        if data.len() > limit {
            return Err(Error::LimitExceeded {
                what: "uncompressed payload".into(),
                size: data.len() as u64,
                limit: limit as u64,
            });
        }
        out.extend_from_slice(data);
        return Ok(());
    }
    if uncompressed_size > limit {
        return Err(Error::LimitExceeded {
            what: format!("declared uncompressed size for {}", codec.name()),
            size: uncompressed_size as u64,
            limit: limit as u64,
        });
    }
    let err = |what: String| Error::Decompression { codec: codec.name(), what };
    // The declared size is input, not a fact: no allocation is sized by it beyond what `data` could
    // really inflate to, and an allocation the system refuses is an error, never an abort (so a
    // raised `limit` cannot take the process down).
    let most = max_output(codec, data.len());
    if uncompressed_size > most {
        return Err(err(format!(
            "{} bytes cannot inflate to the declared {uncompressed_size} bytes (at most {most})",
            data.len()
        )));
    }
    if codec == Codec::Zstd {
        return zstd_decompress(data, uncompressed_size, out).map_err(|e| match e {
            ZstdFailure::Alloc => alloc_failed(uncompressed_size + 1, codec),
            ZstdFailure::Decode(what) => err(what),
        });
    }
    zeroed(uncompressed_size, codec, out)?;
    match codec {
        Codec::None | Codec::Zstd => unreachable!(),
        Codec::Lz4 => {
            let n = lz4_flex::block::decompress_into(data, out).map_err(|e| err(e.to_string()))?;
            if n != uncompressed_size {
                return Err(err(format!("produced {n} bytes, expected {uncompressed_size}")));
            }
        }
        Codec::Zlib => inflate_exact(data, out).map_err(err)?,
        Codec::Snappy => {
            let claimed = snap::raw::decompress_len(data).map_err(|e| err(e.to_string()))?;
            if claimed != uncompressed_size {
                return Err(err(format!("stream declares {claimed} bytes, metadata says {uncompressed_size}")));
            }
            let n = snap::raw::Decoder::new().decompress(data, out).map_err(|e| err(e.to_string()))?;
            if n != uncompressed_size {
                return Err(err(format!("produced {n} bytes, expected {uncompressed_size}")));
            }
        }
    }
    Ok(())
}

thread_local! {
    // As for decompression: building a compression context per entry was 19% of rebatching ZSTD
    // batches (the Java comparison's profile); one per thread, reused.
    static ZSTD_CCTX: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// ZSTD level 3 (what Pulsar's `CompressionCodecZstd` uses), with this thread's context.
fn zstd_compress(data: &[u8]) -> std::io::Result<Vec<u8>> {
    ZSTD_CCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Compressor::new(3)?);
        }
        let c = slot.as_mut().expect("set above");
        let r = c.compress(data);
        if r.is_err() {
            *slot = None; // never reuse a context an error left in an unknown state
        }
        r
    })
}

enum ZstdFailure {
    Alloc,
    Decode(String),
}

thread_local! {
    // A zstd decompression context is a few hundred KiB to set up; one per thread, reused, is what
    // made ZSTD batches cost twice LZ4's per entry when each call built its own.
    static ZSTD_DCTX: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

fn zstd_decompress(data: &[u8], uncompressed_size: usize, buf: &mut Vec<u8>) -> std::result::Result<(), ZstdFailure> {
    // The frame's own content size may be absent; decompress into a buffer one byte larger than
    // declared so "too much output" is detected rather than truncated.
    buf.try_reserve_exact(uncompressed_size + 1).map_err(|_| ZstdFailure::Alloc)?;
    let n = ZSTD_DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new().map_err(|e| ZstdFailure::Decode(e.to_string()))?);
        }
        let dec = slot.as_mut().expect("set above");
        let r = dec.decompress_to_buffer(data, buf);
        if r.is_err() {
            *slot = None; // a context left mid-frame by bad input is not reused
        }
        r.map_err(|e| ZstdFailure::Decode(e.to_string()))
    })?;
    if n != uncompressed_size {
        return Err(ZstdFailure::Decode(format!("produced {n} bytes, expected {uncompressed_size}")));
    }
    Ok(())
}

/// The most bytes `n` input bytes of `codec` can decode to: LZ4 blocks expand at most ~255x (a
/// match length byte per 255 bytes), deflate ~1032x, raw Snappy 64 bytes per 2-byte copy, zstd ~32K
/// per byte (RLE blocks of 128 KiB behind a 3-byte header, plus one block of slack).
fn max_output(codec: Codec, n: usize) -> usize {
    let (ratio, slack) = match codec {
        Codec::None => (1, 0),
        Codec::Lz4 => (255, 64),
        Codec::Zlib => (1032, 64),
        Codec::Snappy => (32, 64),
        Codec::Zstd => (32_768, 131_072),
    };
    n.saturating_mul(ratio).saturating_add(slack)
}

fn alloc_failed(size: usize, codec: Codec) -> Error {
    Error::Decompression { codec: codec.name(), what: format!("cannot allocate {size} bytes for the output") }
}

/// `v` (empty) made `size` zero bytes, or an error when the allocation is refused.
fn zeroed(size: usize, codec: Codec, v: &mut Vec<u8>) -> Result<()> {
    v.try_reserve_exact(size).map_err(|_| alloc_failed(size, codec))?;
    v.resize(size, 0);
    Ok(())
}

/// Inflates a zlib stream into `out`, which must end up exactly full. Accepts both complete streams
/// (C++ client) and the Java client's sync-flushed streams that have no final block or Adler-32.
fn inflate_exact(data: &[u8], out: &mut [u8]) -> std::result::Result<(), String> {
    use flate2::{Decompress, FlushDecompress, Status};
    let mut d = Decompress::new(true);
    let mut spare = [0u8; 1];
    loop {
        let in_pos = d.total_in() as usize;
        let out_pos = d.total_out() as usize;
        let status = if out_pos < out.len() {
            d.decompress(&data[in_pos..], &mut out[out_pos..], FlushDecompress::Sync)
        } else {
            // Output is full: any further output byte means the stream is larger than declared.
            d.decompress(&data[in_pos..], &mut spare, FlushDecompress::Sync)
        }
        .map_err(|e| format!("invalid zlib stream at input byte {}: {e}", d.total_in()))?;
        let produced = d.total_out() as usize;
        if produced > out.len() {
            return Err(format!("stream inflates to more than the declared {} bytes", out.len()));
        }
        let progressed = d.total_in() as usize != in_pos || produced != out_pos;
        match status {
            Status::StreamEnd => break,
            _ if !progressed => break,
            _ => {}
        }
    }
    let produced = d.total_out() as usize;
    if produced != out.len() {
        return Err(format!("stream inflates to {produced} bytes, expected {}", out.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_size_the_input_cannot_reach_is_an_error_not_an_allocation() {
        // 12 bytes claiming a terabyte, under a limit raised to match: refused before allocating.
        for codec in [Codec::Lz4, Codec::Zlib, Codec::Zstd, Codec::Snappy] {
            let data = compress(codec, b"hello, world").unwrap();
            match decompress(codec, &data, 1 << 40, usize::MAX) {
                Err(Error::Decompression { .. }) => {}
                other => panic!("{codec:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn highly_compressible_data_still_inflates_within_the_bounds() {
        let big = vec![7u8; 4 << 20];
        for codec in [Codec::Lz4, Codec::Zlib, Codec::Zstd, Codec::Snappy] {
            let data = compress(codec, &big).unwrap();
            assert_eq!(decompress(codec, &data, big.len(), usize::MAX).unwrap(), big, "{codec:?}");
        }
    }

    #[test]
    fn round_trip_each_codec() {
        let data: Vec<u8> = (0..5000u32).flat_map(|i| format!("message-{i};").into_bytes()).collect();
        for c in Codec::ALL {
            let z = compress(c, &data).unwrap();
            assert_eq!(decompress(c, &z, data.len(), DEFAULT_DECOMPRESSION_LIMIT).unwrap(), data, "{c:?}");
            if c != Codec::None {
                assert!(decompress(c, &z, data.len() - 1, DEFAULT_DECOMPRESSION_LIMIT).is_err(), "{c:?} short");
                assert!(decompress(c, &z, data.len() + 1, DEFAULT_DECOMPRESSION_LIMIT).is_err(), "{c:?} long");
                assert!(matches!(decompress(c, &z, data.len(), 100), Err(Error::LimitExceeded { .. })));
            }
        }
    }

    #[test]
    fn java_style_sync_flushed_zlib() {
        use flate2::{Compress, Compression, FlushCompress};
        let data = b"hello hello hello hello pulsar".repeat(20);
        let mut c = Compress::new(Compression::default(), true);
        let mut out = vec![0u8; 1024];
        c.compress(&data, &mut out, FlushCompress::Sync).unwrap();
        out.truncate(c.total_out() as usize);
        assert_eq!(&out[out.len() - 4..], &[0, 0, 0xff, 0xff]);
        assert_eq!(decompress(Codec::Zlib, &out, data.len(), 1 << 20).unwrap(), data);
    }

    #[test]
    fn empty_inputs() {
        for c in Codec::ALL {
            let z = compress(c, b"").unwrap();
            assert_eq!(decompress(c, &z, 0, 10).unwrap(), b"");
        }
    }
}
