//! Scan bindings: the head of an entry-log record, for the metadata pass of `pulsarkit.scan`.
use crate::bookkeeper::entrylog::head::{record_head as core_record_head, Head};
use pyo3::prelude::*;

/// `(start, end, digest length)`: the head is `buf[start:end]`; `start` -1: read the record to at
/// least `end` bytes and ask again with that digest length; None: not that entry or no Pulsar entry.
#[pyfunction]
#[pyo3(signature = (buf, ledger_id, entry_id, digest_length=None))]
fn record_head(
    buf: &[u8],
    ledger_id: i64,
    entry_id: i64,
    digest_length: Option<usize>,
) -> PyResult<Option<(i64, usize, usize)>> {
    Ok(match core_record_head(buf, ledger_id, entry_id, digest_length) {
        Head::At { start, end, digest_len } => Some((start as i64, end, digest_len)),
        Head::Need { len, digest_len } => Some((-1, len, digest_len)),
        Head::Invalid => None,
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(record_head, m)?)?;
    Ok(())
}
