//! Bindings for single-entry codec work: CRC, entry parse/encode, PIP-70 helpers, compression,
//! command frames.
use super::buffer::ByteBuffer;
use super::errors::{frame_to_py, IntoPyBytes, IntoPyResult};
use crate::codec::batch;
use crate::codec::command::{self, FrameDecoder as CoreFrameDecoder};
use crate::codec::compression::{self, Codec};
use crate::codec::entry;
use crate::codec::metascan::scan_metadata;
use crate::codec::proto::{MessageMetadata, SingleMessageMetadata};
use crate::error::Error;
use prost::Message as _;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

#[pyfunction]
#[pyo3(signature = (data, crc=0))]
fn crc32c(py: Python<'_>, data: ByteBuffer<'_>, crc: u32) -> u32 {
    data.detach_if_large(py, |s| crate::codec::crc::crc32c_resume(crc, s))
}

/// The framing of one entry (`parse_entry_layout`).
#[pyclass(frozen, get_all, module = "pulsarkit._native")]
pub struct EntryLayoutInfo {
    has_broker_entry_metadata: bool,
    broker_timestamp: Option<u64>,
    index: Option<u64>,
    checksum: Option<u32>,
    metadata_start: usize,
    metadata_end: usize,
    payload_start: usize,
}

record_repr!(EntryLayoutInfo: has_broker_entry_metadata, broker_timestamp, index, checksum, metadata_start,
    metadata_end, payload_start);

/// Framing of one entry. Verifies the checksum when asked and checks MessageMetadata's required
/// fields and wire types.
#[pyfunction]
#[pyo3(signature = (data, verify_checksum=true))]
fn parse_entry_layout(py: Python<'_>, data: ByteBuffer<'_>, verify_checksum: bool) -> PyResult<EntryLayoutInfo> {
    let d = &*data;
    let layout = entry::parse_layout(d).py_err(py)?;
    if verify_checksum {
        layout.verify_checksum(d).py_err(py)?;
    }
    scan_metadata(&d[layout.metadata.clone()]).map_err(|e| e.shifted(layout.metadata.start)).py_err(py)?;
    let bem = match &layout.broker_entry_metadata {
        Some(r) => Some(entry::decode_broker_entry_metadata(&d[r.clone()], r.start).py_err(py)?),
        None => None,
    };
    Ok(EntryLayoutInfo {
        has_broker_entry_metadata: bem.is_some(),
        broker_timestamp: bem.as_ref().and_then(|b| b.broker_timestamp),
        index: bem.as_ref().and_then(|b| b.index),
        checksum: layout.checksum,
        metadata_start: layout.metadata.start,
        metadata_end: layout.metadata.end,
        payload_start: layout.payload.start,
    })
}

/// What the broker's publish path needs from a SEND's headersAndPayload (`publish_fields`).
#[pyclass(frozen, get_all, module = "pulsarkit._native")]
pub struct PublishFields {
    has_broker_entry_metadata: bool,
    chunk_id: Option<i32>,
    num_chunks_from_msg: Option<i32>,
    is_marker: bool,
}

record_repr!(PublishFields: has_broker_entry_metadata, chunk_id, num_chunks_from_msg, is_marker);

/// The publish path's one pass: checksum verified (ChecksumMismatchError otherwise), metadata checked.
#[pyfunction]
fn publish_fields(py: Python<'_>, data: ByteBuffer<'_>) -> PyResult<PublishFields> {
    let f = entry::publish_fields(&data).py_err(py)?;
    Ok(PublishFields {
        has_broker_entry_metadata: f.has_broker_entry_metadata,
        chunk_id: f.chunk_id,
        num_chunks_from_msg: f.num_chunks_from_msg,
        is_marker: f.is_marker,
    })
}

/// One message of an entry, as a consumer receives it (`entry_messages`).
#[pyclass(frozen, get_all, module = "pulsarkit._native")]
pub struct MessageRecord {
    batch_index: i32,
    payload: Py<PyBytes>,
    key: Option<String>,
    partition_key_b64_encoded: bool,
    ordering_key: Option<Py<PyBytes>>,
    properties: Py<PyDict>,
    event_time: Option<u64>,
    sequence_id: u64,
    null_value: bool,
    null_partition_key: bool,
    compacted_out: bool,
    /// PIP-70 index of this message (None without broker entry metadata or an index).
    index: Option<i64>,
}

record_repr!(MessageRecord: batch_index, key, sequence_id, index);

/// Messages of an entry as [`MessageRecord`]s: decompressed, the batch split, with their PIP-70 index.
#[pyfunction]
#[pyo3(signature = (data, include_compacted_out=false, verify_checksum=true, max_uncompressed_size=compression::DEFAULT_DECOMPRESSION_LIMIT))]
fn entry_messages(
    py: Python<'_>,
    data: ByteBuffer<'_>,
    include_compacted_out: bool,
    verify_checksum: bool,
    max_uncompressed_size: usize,
) -> PyResult<Vec<MessageRecord>> {
    let d = &*data;
    let (msgs, entry_index, batch_size) = py
        .detach(|| {
            let p = batch::parse_entry(d, verify_checksum)?;
            let bem = match &p.layout.broker_entry_metadata {
                Some(r) => Some(entry::decode_broker_entry_metadata(&d[r.clone()], r.start)?),
                None => None,
            };
            let batch_size = p.metadata.num_messages_in_batch.map(i64::from);
            let msgs = batch::entry_messages(d, &p, include_compacted_out, max_uncompressed_size)?;
            Ok::<_, crate::Error>((msgs, bem.and_then(|b| b.index), batch_size))
        })
        .py_err(py)?;
    msgs.into_iter()
        .map(|m| {
            let props = PyDict::new(py);
            for (k, v) in &m.properties {
                props.set_item(k, v)?;
            }
            Ok(MessageRecord {
                batch_index: m.batch_index,
                payload: PyBytes::new(py, &m.payload).unbind(),
                key: m.key,
                partition_key_b64_encoded: m.partition_key_b64_encoded,
                ordering_key: m.ordering_key.map(|o| PyBytes::new(py, &o).unbind()),
                properties: props.unbind(),
                event_time: m.event_time,
                sequence_id: m.sequence_id,
                null_value: m.null_value,
                null_partition_key: m.null_partition_key,
                compacted_out: m.compacted_out,
                index: entry_index.map(|x| entry::message_index(x, batch_size, i64::from(m.batch_index))),
            })
        })
        .collect()
}

/// The encode bindings' `compression` and serialized `metadata` arguments, decoded.
fn encode_args(py: Python<'_>, compression: &str, metadata: &[u8]) -> PyResult<(Codec, MessageMetadata)> {
    let codec = Codec::from_name(compression).py_err(py)?;
    Ok((codec, batch::decode_message_metadata(metadata, 0).py_err(py)?))
}

/// `[0x0e01][crc][size][metadata][payload]` from serialized MessageMetadata and a raw payload.
#[pyfunction]
#[pyo3(signature = (metadata, payload, checksum=true))]
fn encode_metadata_and_payload<'py>(
    py: Python<'py>,
    metadata: ByteBuffer<'py>,
    payload: ByteBuffer<'py>,
    checksum: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    entry::encode_metadata_and_payload(&metadata, &payload, checksum).py_bytes(py)
}

/// A non-batched entry; sets uncompressed_size and (when compressing) compression.
#[pyfunction]
#[pyo3(signature = (metadata, payload, compression="NONE", checksum=true))]
fn encode_single<'py>(
    py: Python<'py>,
    metadata: ByteBuffer<'py>,
    payload: ByteBuffer<'py>,
    compression: &str,
    checksum: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let (codec, md) = encode_args(py, compression, &metadata)?;
    let ps = &*payload;
    py.detach(|| batch::encode_single(&md, ps, codec, checksum)).py_bytes(py)
}

/// A batched entry from serialized MessageMetadata and (serialized SingleMessageMetadata, payload) pairs.
#[pyfunction]
#[pyo3(signature = (metadata, messages, compression="NONE", checksum=true))]
fn encode_batch<'py>(
    py: Python<'py>,
    metadata: ByteBuffer<'py>,
    messages: Vec<(ByteBuffer<'py>, ByteBuffer<'py>)>,
    compression: &str,
    checksum: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let (codec, md) = encode_args(py, compression, &metadata)?;
    let pairs = messages
        .iter()
        .map(|(smm, payload)| {
            let smm = SingleMessageMetadata::decode(&**smm)
                .map_err(|e| Error::invalid(format!("invalid SingleMessageMetadata: {e}")))
                .py_err(py)?;
            Ok((smm, &**payload))
        })
        .collect::<PyResult<Vec<_>>>()?;
    py.detach(|| batch::encode_batch(&md, &pairs, codec, checksum)).py_bytes(py)
}

#[pyfunction]
#[pyo3(signature = (data, broker_timestamp=None, index=None))]
fn add_broker_entry_metadata<'py>(
    py: Python<'py>,
    data: ByteBuffer<'py>,
    broker_timestamp: Option<u64>,
    index: Option<u64>,
) -> PyResult<Bound<'py, PyBytes>> {
    entry::add_broker_entry_metadata(&data, broker_timestamp, index).py_bytes(py)
}

/// (broker_timestamp, index) or None when the entry has no broker entry metadata.
#[pyfunction]
fn peek_broker_entry_metadata(py: Python<'_>, data: ByteBuffer<'_>) -> PyResult<Option<(Option<u64>, Option<u64>)>> {
    Ok(entry::peek_broker_entry_metadata(&data).py_err(py)?.map(|b| (b.broker_timestamp, b.index)))
}

#[pyfunction]
fn strip_broker_entry_metadata<'py>(py: Python<'py>, data: ByteBuffer<'py>) -> PyResult<Bound<'py, PyBytes>> {
    entry::strip_broker_entry_metadata(&data).py_bytes(py)
}

#[pyfunction]
fn compress<'py>(py: Python<'py>, codec: &str, data: ByteBuffer<'py>) -> PyResult<Bound<'py, PyBytes>> {
    let c = Codec::from_name(codec).py_err(py)?;
    let s = &*data;
    py.detach(|| compression::compress(c, s)).py_bytes(py)
}

#[pyfunction]
#[pyo3(signature = (codec, data, uncompressed_size, limit=compression::DEFAULT_DECOMPRESSION_LIMIT))]
fn decompress<'py>(
    py: Python<'py>,
    codec: &str,
    data: ByteBuffer<'py>,
    uncompressed_size: usize,
    limit: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let c = Codec::from_name(codec).py_err(py)?;
    let s = &*data;
    py.detach(|| compression::decompress(c, s, uncompressed_size, limit)).py_bytes(py)
}

#[pyfunction]
#[pyo3(signature = (command, headers_and_payload=None))]
fn encode_frame<'py>(
    py: Python<'py>,
    command: ByteBuffer<'py>,
    headers_and_payload: Option<ByteBuffer<'py>>,
) -> PyResult<Bound<'py, PyBytes>> {
    command::encode_frame(&command, headers_and_payload.as_deref()).py_bytes(py)
}

/// Incremental splitter of a Pulsar connection's byte stream into (command, headersAndPayload) pairs.
#[pyclass(module = "pulsarkit._native")]
struct RawFrameDecoder {
    inner: CoreFrameDecoder,
}

#[pymethods]
impl RawFrameDecoder {
    #[new]
    #[pyo3(signature = (max_frame_size=command::DEFAULT_MAX_FRAME_SIZE))]
    fn new(max_frame_size: usize) -> Self {
        RawFrameDecoder { inner: CoreFrameDecoder::new(max_frame_size) }
    }

    fn feed<'py>(&mut self, py: Python<'py>, data: ByteBuffer<'py>) -> PyResult<Bound<'py, PyList>> {
        let frames = self.inner.feed(&data).map_err(|e| frame_to_py(py, e))?;
        let out = PyList::empty(py);
        for f in frames {
            out.append((PyBytes::new(py, &f.command), f.headers_and_payload.map(|h| PyBytes::new(py, &h))))?;
        }
        Ok(out)
    }

    #[getter]
    fn buffered(&self) -> usize {
        self.inner.buffered()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_all!(m, fn crc32c, parse_entry_layout, entry_messages, publish_fields, encode_metadata_and_payload,
        encode_single, encode_batch, add_broker_entry_metadata, peek_broker_entry_metadata,
        strip_broker_entry_metadata, compress, decompress, encode_frame;
        class RawFrameDecoder, EntryLayoutInfo, PublishFields, MessageRecord);
    m.add("DEFAULT_DECOMPRESSION_LIMIT", compression::DEFAULT_DECOMPRESSION_LIMIT)?;
    m.add("DEFAULT_MAX_FRAME_SIZE", command::DEFAULT_MAX_FRAME_SIZE)?;
    Ok(())
}
