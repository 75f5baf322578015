"""Arrow-native bulk kernels over columns of entry bytes.

Each function takes any Arrow array of entries (pyarrow ``binary``/``large_binary``/``binary_view``,
or anything with ``__arrow_c_array__``; chunked arrays are processed chunk by chunk) and returns a
``pyarrow.RecordBatch`` (or Table for chunked input). One native call per array, GIL released.
Corrupt entries give nulls and a message in the ``error`` column; no row is ever dropped.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from . import _native
from .codec.entry import DEFAULT_DECOMPRESSION_LIMIT


def _apply(entries: Any, fn: Any, *args: Any) -> Any:
    if isinstance(entries, pa.ChunkedArray):
        batches = [fn(c, *args) for c in entries.chunks]
        if not batches:
            batches = [fn(pa.array([], pa.binary()), *args)]
        return pa.Table.from_batches(batches)
    return fn(entries, *args)


def verify_checksums(entries: Any) -> Any:
    """Columns ``has_checksum``, ``checksum_ok`` (null without a checksum), ``error``."""
    return _apply(entries, _native.bulk_verify_checksums)


def peek_broker_entry_metadata(entries: Any) -> Any:
    """Columns ``broker_timestamp``, ``index`` (null when absent), ``error``."""
    return _apply(entries, _native.bulk_peek_broker_entry_metadata)


def strip_broker_entry_metadata(entries: Any, output: str = "binary") -> Any:
    """Columns ``entry`` (the bytes a consumer gets: ``large_binary`` for a ``large_binary`` input, or a
    ``binary_view`` one whose values pass 2 GiB; else ``binary``) and ``error``.

    ``output="binary_view"`` copies nothing: each view points into the input column's buffer just
    past the broker entry metadata (keep the input alive as long as the result)."""
    return _apply(entries, _native.bulk_strip_broker_entry_metadata, output)


def decode_metadata(entries: Any, verify_checksum: bool = False) -> Any:
    """One row per entry: broker entry metadata, checksum status and MessageMetadata fields
    (``publish_time``, ``producer_name``, ``sequence_id``, ``highest_sequence_id``, ``num_messages``,
    ``compression``, ``uncompressed_size``, ``partition_key``, ``event_time``, chunk fields, ...)."""
    return _apply(entries, _native.bulk_decode_metadata, verify_checksum)


def first_transactional(entries: Any) -> int | None:
    """The index of the first entry whose metadata has a transaction id (as :func:`decode_metadata` decodes
    it; an entry that does not decode has none), or None: a check that stops there and builds no columns."""
    if isinstance(entries, pa.ChunkedArray):
        seen = 0
        for c in entries.chunks:
            if (i := _native.bulk_first_transactional(c)) is not None:
                return seen + i
            seen += len(c)
        return None
    return _native.bulk_first_transactional(entries)


def explode_messages(
    entries: Any,
    include_compacted_out: bool = False,
    verify_checksum: bool = True,
    max_uncompressed_size: int = DEFAULT_DECOMPRESSION_LIMIT,
) -> Any:
    """One row per message: ``entry_index`` (the input row), ``batch_index``, ``payload``, ``key``,
    ``ordering_key``, ``properties``, ``event_time``, ``publish_time``, ``producer_name``,
    ``sequence_id``, ``null_value``, ``compacted_out``, ``broker_timestamp``, ``index``, ``error``."""
    return _apply(entries, _native.bulk_explode_messages, include_compacted_out, verify_checksum, max_uncompressed_size)


def json_lines(batch: Any) -> bytes:
    """A record batch (or table) of the one message schema (``scan.schema.MESSAGE_FIELDS``, ``marker``
    optional) as JSON lines: each row exactly as ``json.dumps(scan.schema.json_record(row))`` prints
    it, plus a newline; ASCII only. One native call per batch, no Python object per message."""
    if isinstance(batch, pa.Table):
        return b"".join(_native.bulk_json_lines(b) for b in batch.to_batches())
    return _native.bulk_json_lines(batch)


def explode_transaction_log(entries: Any) -> Any:
    """One row per ``TransactionMetadataEntry`` of a column of transaction-coordinator log entries
    (PIP-160 batches opened): ``entry_index``, ``batched``, ``batch_size``, ``batch_index``,
    ``record_bytes``, ``op``, ``txnid_most_bits``, ``txnid_least_bits``, ``expected_status``,
    ``new_status``, ``partitions``, ``subscriptions``, ``timeout_ms``, ``start_time``,
    ``last_modification_time``, ``max_local_txn_id``, ``owner``, ``is_timeout``, ``error``.
    An entry that does not decode gives one row with the ``error``."""
    return _apply(entries, _native.bulk_explode_transaction_log)


def explode_pending_ack_log(entries: Any) -> Any:
    """One row per ``PendingAckMetadataEntry`` of a column of pending-ack store entries: the same
    position columns as :func:`explode_transaction_log`, then ``op``, ``ack_type``,
    ``txnid_most_bits``, ``txnid_least_bits``, ``positions`` (ledger_id, entry_id, ack_set,
    batch_size), ``error``."""
    return _apply(entries, _native.bulk_explode_pending_ack_log)


def explode_table(
    table: Any, entry_column: str = "entry", keep: list[str] | None = None, kernel: Any = None, **kw: Any
) -> Any:
    """Explodes the ``entry_column`` of a table or batch, carrying the ``keep`` columns (e.g.
    ``ledger_id``, ``entry_id``) onto each output row. ``kernel`` is :func:`explode_messages` by
    default, or :func:`explode_transaction_log` / :func:`explode_pending_ack_log`."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    col = table.column(entry_column).combine_chunks()
    out = (kernel or explode_messages)(col, **kw)
    if isinstance(out, pa.Table):
        out = out.combine_chunks().to_batches()[0] if out.num_rows else out
    idx = out.column("entry_index")
    cols = {name: table.column(name).take(idx) for name in (keep or [])}
    result = pa.Table.from_batches([out]) if isinstance(out, pa.RecordBatch) else out
    for name, c in cols.items():
        result = result.append_column(name, c)
    return result
