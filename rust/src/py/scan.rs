//! Scan bindings: the head of an entry-log record, for the metadata pass of `pulsarkit.scan`.
use super::buffer::ByteBuffer;
use crate::bookkeeper::entrylog::head::{record_head as core_record_head, Head};
use pyo3::prelude::*;

/// `(start, end, digest length)`: the head is `buf[start:end]`; `start` -1: read the record to at
/// least `end` bytes and ask again with that digest length; None: not that entry or no Pulsar entry.
#[pyfunction]
#[pyo3(signature = (buf, ledger_id, entry_id, digest_length=None))]
fn record_head(
    py: Python<'_>,
    buf: ByteBuffer<'_>,
    ledger_id: i64,
    entry_id: i64,
    digest_length: Option<usize>,
) -> Option<(i64, usize, usize)> {
    match buf.detach_if_large(py, |b| core_record_head(b, ledger_id, entry_id, digest_length)) {
        Head::At { start, end, digest_len } => Some((start as i64, end, digest_len)),
        Head::Need { len, digest_len } => Some((-1, len, digest_len)),
        Head::Invalid => None,
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_all!(m, fn record_head);
    Ok(())
}
