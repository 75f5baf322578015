"""The one message schema (flat Arrow rows, payload as bytes), the entries' schema, and the filters a
scan pushes down."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from ..codec.columns import column, scalar
from ..lazy import deferred
from .prefetch import WriteBehind

pc = deferred("pyarrow.compute")

MASK = (1 << 64) - 1
_FALSE = scalar(False, pa.bool_())  # not pa.scalar: codec.columns says why
Pos = tuple[int, int]

#: The one message schema: one row per message, flat. ``txn_most_bits``/``txn_least_bits`` are Java
#: longs (as ``TxnID`` prints them); ``payload`` is the bytes (null for a null value or an encrypted
#: message); ``schema_version`` is ``MessageMetadata.schema_version`` as stored (8 bytes naming the version of
#: the topic's schema the message was written with, null when it names none; ``codec/schema`` decodes by it).
#: :func:`json_record` renders a row as ``pulsarkit messages`` prints it.
MESSAGE_FIELDS: list[tuple[str, pa.DataType]] = [
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("ledger_id", pa.int64()),
    ("entry_id", pa.int64()),
    ("batch_index", pa.int32()),
    ("key", pa.string()),
    ("properties", pa.map_(pa.string(), pa.string())),
    ("payload", pa.binary()),
    ("publish_time", pa.int64()),
    ("event_time", pa.int64()),
    ("sequence_id", pa.int64()),
    ("producer_name", pa.string()),
    ("null_value", pa.bool_()),
    ("encrypted", pa.bool_()),
    ("broker_timestamp", pa.int64()),
    ("broker_index", pa.int64()),
    ("txn_most_bits", pa.int64()),
    ("txn_least_bits", pa.int64()),
    ("txn_state", pa.string()),
    ("schema_version", pa.binary()),
]
MARKER_FIELD = ("marker", pa.string())

#: One row per entry of a managed ledger: its topic (managed ledger), what the ledger holds
#: (``topic``, ``transaction_log``, ``pending_ack``; a deleted ledger's kind), the ids, the entry bytes
#: (what the BookKeeper client wrote, digest verified) and, for an unreadable entry, ``error``.
ENTRY_FIELDS: list[tuple[str, pa.DataType]] = [
    ("topic", pa.string()),
    ("kind", pa.string()),
    ("ledger_id", pa.int64()),
    ("entry_id", pa.int64()),
    ("payload", pa.binary()),
    ("error", pa.string()),
]


#: Columns written to Parquet without a dictionary: the payload and the per-message ids are nearly
#: all distinct, so a dictionary is built and then abandoned (bench/RESULTS.md, "after": 22-37% less
#: CPU writing topics A and C, files no larger). The codec stays Parquet's default (Snappy).
NO_DICTIONARY = ("payload", "entry_id", "sequence_id", "broker_index")
#: The ids that grow message by message, delta-encoded (DELTA_BINARY_PACKED, which every current Parquet
#: reader decodes): topic A's sequence ids encode in a third of the CPU of plain values and Snappy.
DELTA_ENCODED = ("entry_id", "sequence_id", "broker_index")
#: The payload's Snappy is kept when it shrinks a sample of the first rows' payloads below this share; above
#: it (random or already compressed payloads: the benchmark's three topics at 0.99) the column is written
#: uncompressed: topic A's writer spends 0.085 s less of its 0.5 s, for a file 1% larger.
PAYLOAD_SNAPPY_BELOW = 0.9
#: Payload bytes sampled for that decision.
PAYLOAD_SAMPLE_BYTES = 1 << 20


def parquet_options(schema: pa.Schema, first: pa.RecordBatch | pa.Table | None = None) -> dict[str, Any]:
    """``pyarrow.parquet.ParquetWriter`` options for message rows of ``schema``: no dictionary for
    :data:`NO_DICTIONARY`, the growing ids delta-encoded, no statistics for the payload (nobody filters on
    its minimum), and Snappy for every column but the payload when ``first`` (the first rows the file will
    hold) shows Snappy cannot shrink it (:data:`PAYLOAD_SNAPPY_BELOW`)."""
    names = schema.names
    out: dict[str, Any] = {
        "use_dictionary": [n for n in names if n not in NO_DICTIONARY],
        "column_encoding": {n: "DELTA_BINARY_PACKED" for n in DELTA_ENCODED if n in names},
        "write_statistics": [n for n in _leaf_columns(schema) if n != "payload"],
    }
    if "payload" in names and first is not None and not _payload_compresses(first):
        # per leaf column (a map is two): a codec dict leaves out a column uncompressed
        out["compression"] = {n: "none" if n == "payload" else "snappy" for n in _leaf_columns(schema)}
    return out


def _leaf_columns(schema: pa.Schema) -> list[str]:
    """The Parquet leaf column paths ``schema`` is written as (pyarrow's compliant nested types: a map's
    ``name.key_value.key`` and ``.value``, a list's ``name.list.element``, a struct's ``name.field``)."""

    def leaves(name: str, t: pa.DataType) -> list[str]:
        if pa.types.is_map(t):
            return leaves(f"{name}.key_value.key", t.key_type) + leaves(f"{name}.key_value.value", t.item_type)
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return leaves(f"{name}.list.element", t.value_type)
        if pa.types.is_struct(t):
            return [p for i in range(t.num_fields) for p in leaves(f"{name}.{t.field(i).name}", t.field(i).type)]
        return [name]

    return [p for f in schema for p in leaves(f.name, f.type)]


def _payload_compresses(first: pa.RecordBatch | pa.Table) -> bool:
    """Whether Snappy shrinks a sample of the payloads of ``first`` below :data:`PAYLOAD_SNAPPY_BELOW`
    (no payload bytes at all: yes, Snappy stays)."""
    col = first.column("payload")
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    sample, size = [], 0
    if not pa.types.is_binary(col.type):  # not the message schema's payload: Snappy stays
        return True
    for arr in chunks:
        if size >= PAYLOAD_SAMPLE_BYTES or not len(arr) or arr.buffers()[2] is None:
            continue
        offsets = memoryview(arr.buffers()[1]).cast("i")  # binary: int32 offsets
        lo, hi = offsets[arr.offset], offsets[arr.offset + len(arr)]
        hi = min(hi, lo + PAYLOAD_SAMPLE_BYTES - size)
        sample.append(arr.buffers()[2][lo:hi])
        size += hi - lo
    if size < 4096:  # too little to tell
        return True
    raw = b"".join(b.to_pybytes() for b in sample)
    return len(pa.compress(raw, codec="snappy", asbytes=True)) < PAYLOAD_SNAPPY_BELOW * len(raw)


#: Arrow bytes gathered into one Parquet row group. An open ``ParquetWriter`` keeps 17-25 KiB of metadata per
#: row group it wrote (outside pyarrow's pool, statistics or not) until it closes: with each read batch (about
#: 1-6 MB) its own row group, ``messages --format parquet`` over 10.8 GB of entry logs peaked at 640 MiB and
#: ``export`` at 419 MiB, against 192 and 207 MiB at 1.1 GB (bench/RESULTS.md, issue 24, ``memory``). One group
#: is written while the next gathers, so their size is the writer's share of the peak: 16 MiB against 32 MiB took
#: 40 MiB off every command's peak and up to 10% off its wall time; 8 MiB was slower (bench/RESULTS.md, "Fresh memory
#: is time").
ROW_GROUP_BYTES = 16 << 20


class RowGroups:
    """Record batches (or tables) gathered and written to ``writer`` (a ``pyarrow.parquet.ParquetWriter``) as
    tables of about :data:`ROW_GROUP_BYTES`, each one row group (a few read batches each, not a row group per
    batch). Each group is encoded and written behind the caller (:class:`~.prefetch.WriteBehind`: pyarrow's
    writer releases the GIL, and so does the native read), its error raised by the next :meth:`add` or
    :meth:`flush`. :meth:`flush` writes what is gathered and waits: call it before the writer closes, or use it as
    a context manager inside the writer's (on an error it only waits)."""

    def __init__(self, writer: Any, limit: int = ROW_GROUP_BYTES) -> None:
        self._limit = limit
        self._batches: list[pa.RecordBatch | pa.Table] = []
        self._bytes = 0
        # one row group whatever the rows (write_table would cut at 1 Mi rows)
        self._behind = WriteBehind(
            lambda t: writer.write_table(t, row_group_size=max(t.num_rows, 1)), "pulsarkit-row-group"
        )

    def __enter__(self) -> RowGroups:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> None:
        if kind is not None:  # the writer closes next: what is gathered is dropped, the write in flight waited for
            self._batches, self._bytes = [], 0
        else:
            self._submit()
        self._behind.__exit__(kind, *rest)

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        self._batches.append(batch)
        self._bytes += batch.nbytes
        if self._bytes >= self._limit:
            self._submit()

    def flush(self) -> None:
        self._submit()
        self._behind.wait()

    def _submit(self) -> None:
        try:
            self._behind.wait()
        except BaseException:
            self._batches, self._bytes = [], 0
            raise
        if self._batches:
            parts, self._batches, self._bytes = self._batches, [], 0
            self._behind(pa.concat_tables(p if isinstance(p, pa.Table) else pa.Table.from_batches([p]) for p in parts))


def message_fields(markers: bool = False) -> list[tuple[str, pa.DataType]]:
    return MESSAGE_FIELDS + ([MARKER_FIELD] if markers else [])


def json_record(row: dict[str, Any]) -> dict[str, Any]:
    """A row of the message schema as the JSON record ``pulsarkit messages`` prints: the ids in
    ``message_id``, broker entry metadata and the transaction as objects (None when the entry has
    none), the transaction's bits unsigned (as stored), the payload in base64."""
    ts, index = row["broker_timestamp"], row["broker_index"]
    out = {
        "topic": row["topic"],
        "message_id": {
            "ledger_id": row["ledger_id"],
            "entry_id": row["entry_id"],
            "batch_index": row["batch_index"],
            "partition": row["partition"],
        },
        "key": row["key"],
        "properties": dict(row["properties"] or ()),
        "payload_b64": None if row["payload"] is None else base64.b64encode(row["payload"]).decode("ascii"),
        "publish_time": row["publish_time"],
        "event_time": row["event_time"],
        "sequence_id": row["sequence_id"],
        "producer_name": row["producer_name"],
        "null_value": row["null_value"],
        "encrypted": row["encrypted"],
        "broker_entry_metadata": None if ts is None and index is None else {"broker_timestamp": ts, "index": index},
        "txn": None
        if row["txn_state"] is None
        else {
            "most_bits": (row["txn_most_bits"] or 0) & MASK,
            "least_bits": (row["txn_least_bits"] or 0) & MASK,
            "state": row["txn_state"],
        },
    }
    if "marker" in row:
        out["marker"] = row["marker"]
    return out


def arrow_schema(fields: Sequence[tuple[str, pa.DataType]]) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in fields])


# ------------------------------------------------------------------------------------------ filters

#: Pushed-down filters: (column, op, value), op one of = in > >= < <= startswith; ANDed.
Filter = tuple[str, str, Any]
PUSHABLE = {"topic": ("=", "in", "startswith"), "ledger_id": ("=", "in", ">", ">=", "<", "<="),
            "publish_time": ("=", "in", ">", ">=", "<", "<="),
            "broker_timestamp": ("=", "in", ">", ">=", "<", "<=")}  # fmt: skip
#: The columns whose filters prune entries: every row of an entry has its entry's publish time and
#: broker timestamp (a chunked message the completing chunk's).
TIME_COLUMNS = ("publish_time", "broker_timestamp")


def _test(op: str, v: Any, ref: Any) -> bool:
    if v is None:
        return False
    if op == "=":
        return bool(v == ref)
    if op == "in":
        return v in ref
    if op == "startswith":
        return str(v).startswith(ref)
    return bool({">": v > ref, ">=": v >= ref, "<": v < ref, "<=": v <= ref}[op])


def passes(filters: Iterable[Filter], column: str, v: Any) -> bool:
    return all(_test(op, v, ref) for c, op, ref in filters if c == column)


def filter_mask(table: pa.Table, filters: Iterable[Filter], columns: Sequence[str]) -> Any:
    """A boolean mask of the rows passing the filters on ``columns`` (None when none applies)."""
    m = None
    for c, op, ref in filters:
        if c not in columns:
            continue
        col = table.column(c)
        if op == "in":
            x = pc.is_in(col, value_set=column(list(ref), col.type))
        elif op == "startswith":
            x = pc.starts_with(col, ref)
        else:
            fn = {"=": pc.equal, ">": pc.greater, ">=": pc.greater_equal, "<": pc.less, "<=": pc.less_equal}[op]
            x = fn(col, column([ref], col.type)[0])
        x = pc.fill_null(x, _FALSE)
        m = x if m is None else pc.and_(m, x)
    return m
