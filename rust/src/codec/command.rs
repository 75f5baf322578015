//! Pulsar command frames: `[u32 total][u32 cmd_size][BaseCommand]` optionally followed by a
//! headersAndPayload, and an incremental decoder that accepts any split of the byte stream.
use crate::codec::entry::{DEFAULT_MAX_MESSAGE_SIZE, MESSAGE_SIZE_FRAME_PADDING};
use crate::error::{Error, Result};

/// Netty's LengthFieldBasedFrameDecoder limit in the broker and clients.
pub const DEFAULT_MAX_FRAME_SIZE: usize = DEFAULT_MAX_MESSAGE_SIZE + MESSAGE_SIZE_FRAME_PADDING;

/// Frames a serialized BaseCommand, with the headersAndPayload (already starting with its
/// checksum magic, if any) appended when given.
pub fn encode_frame(command: &[u8], headers_and_payload: Option<&[u8]>) -> Result<Vec<u8>> {
    let hp = headers_and_payload.unwrap_or(&[]);
    let total = 4u64 + command.len() as u64 + hp.len() as u64;
    let total = u32::try_from(total)
        .map_err(|_| Error::InvalidArgument(format!("frame of {total} bytes does not fit a u32 size")))?;
    let mut out = Vec::with_capacity(4 + total as usize);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&(command.len() as u32).to_be_bytes());
    out.extend_from_slice(command);
    out.extend_from_slice(hp);
    Ok(out)
}

/// One decoded frame: the BaseCommand bytes and the headersAndPayload, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub command: Vec<u8>,
    pub headers_and_payload: Option<Vec<u8>>,
}

/// Splits a byte stream into frames. Once it reports corruption it stays failed: the stream
/// position is lost, exactly as a Netty decoder closes the connection.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    start: usize,
    consumed: u64,
    max_frame_size: usize,
    failed: Option<Error>,
}

impl FrameDecoder {
    pub fn new(max_frame_size: usize) -> Self {
        FrameDecoder { buf: Vec::new(), start: 0, consumed: 0, max_frame_size, failed: None }
    }

    /// Bytes received but not yet part of a complete frame.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Feeds bytes and returns every frame completed by them. When a bad frame follows good ones
    /// in the same call, the good ones are returned and the error comes with the next call (as
    /// Netty delivers decoded frames before the exception), so no split of the stream loses frames.
    pub fn feed(&mut self, data: &[u8]) -> Result<Vec<Frame>> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        self.buf.extend_from_slice(data);
        let mut frames = Vec::new();
        loop {
            let avail = self.buf.len() - self.start;
            if avail < 4 {
                break;
            }
            let s = self.start;
            let at = self.consumed as usize;
            let total = u32::from_be_bytes(self.buf[s..s + 4].try_into().unwrap()) as usize;
            if total > self.max_frame_size {
                return self.fail(
                    frames,
                    Error::LimitExceeded {
                        what: format!("frame at stream offset {at}"),
                        size: total as u64,
                        limit: self.max_frame_size as u64,
                    },
                );
            }
            if total < 4 {
                return self.fail(
                    frames,
                    Error::corrupt(at, format!("frame size {total} cannot hold the 4-byte command size")),
                );
            }
            if avail < 4 + total {
                break;
            }
            let cmd_size = u32::from_be_bytes(self.buf[s + 4..s + 8].try_into().unwrap()) as usize;
            if cmd_size > total - 4 {
                return self.fail(
                    frames,
                    Error::corrupt(
                        at + 4,
                        format!("command size {cmd_size} exceeds the {} bytes left in the frame", total - 4),
                    ),
                );
            }
            let cmd = self.buf[s + 8..s + 8 + cmd_size].to_vec();
            let rest = &self.buf[s + 8 + cmd_size..s + 4 + total];
            frames.push(Frame { command: cmd, headers_and_payload: (!rest.is_empty()).then(|| rest.to_vec()) });
            self.start += 4 + total;
            self.consumed += 4 + total as u64;
        }
        // Compact once the consumed prefix dominates, so memory stays bounded by one frame.
        if self.start > 0 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(frames)
    }

    fn fail(&mut self, frames: Vec<Frame>, e: Error) -> Result<Vec<Frame>> {
        self.failed = Some(e.clone());
        if frames.is_empty() {
            Err(e)
        } else {
            Ok(frames)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_split_gives_the_same_frames() {
        let mut stream = Vec::new();
        let f1 = encode_frame(&[8, 18, 146, 1, 0], None).unwrap();
        let f2 = encode_frame(&[8, 6], Some(b"\x0e\x01abcd")).unwrap();
        stream.extend_from_slice(&f1);
        stream.extend_from_slice(&f2);
        for split in 0..=stream.len() {
            let mut d = FrameDecoder::new(DEFAULT_MAX_FRAME_SIZE);
            let mut got = d.feed(&stream[..split]).unwrap();
            got.extend(d.feed(&stream[split..]).unwrap());
            assert_eq!(got.len(), 2);
            assert_eq!(got[1].headers_and_payload.as_deref(), Some(&b"\x0e\x01abcd"[..]));
            assert_eq!(d.buffered(), 0);
        }
    }

    #[test]
    fn oversized_frame_is_refused_before_buffering() {
        let mut d = FrameDecoder::new(100);
        assert!(matches!(d.feed(&[0, 0, 1, 0]), Err(Error::LimitExceeded { .. })));
        assert!(d.feed(&[]).is_err());
    }
}
