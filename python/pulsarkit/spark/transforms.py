"""DataFrame transforms over a column of entry bytes, built on ``DataFrame.mapInArrow``.

Each Arrow batch Spark hands to Python goes through exactly one pulsarkit bulk kernel (GIL released,
no per-row Python). Rows are never dropped: an entry that cannot be decoded keeps its row, with
nulls in the decoded columns and a message (with the byte offset) in the ``error`` column; a null
entry gives nulls and a null ``error``.

``mapInArrow`` exists since Spark 3.3, so these transforms also serve Spark 3.x users; pandas must
be installed because PySpark requires it for every Arrow-based API.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from .. import bulk
from ..codec.entry import DEFAULT_DECOMPRESSION_LIMIT
from ._schema import KERNELS, kernel_arrow_schema, spark_fields, to_spark_arrow

# One output column: ("in", input column position) or ("k", kernel column name).
_Source = tuple[str, Any]


class BatchKernel:
    """Picklable ``mapInArrow`` function: one kernel call per batch, then the output columns assembled
    from input columns and kernel columns.

    With ``explode`` the input columns are repeated per output row through the kernel's
    ``entry_index`` (batch-relative, so it is not itself exposed).
    """

    def __init__(
        self,
        kernel: str,
        kwargs: dict[str, Any],
        entry_pos: int,
        layout: Sequence[_Source],
        names: Sequence[str],
        explode: bool = False,
    ) -> None:
        if kernel not in KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}")
        self.kernel = kernel
        self.kwargs = dict(kwargs)
        self.entry_pos = entry_pos
        self.layout = list(layout)
        self.names = list(names)
        self.explode = explode

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        out = getattr(bulk, self.kernel)(batch.column(self.entry_pos), **self.kwargs)
        take = out.column("entry_index") if self.explode else None
        arrays = []
        for src, key in self.layout:
            if src == "in":
                col = batch.column(key)
                arrays.append(col if take is None else col.take(take))
            else:
                arrays.append(to_spark_arrow(out.column(key)))
        return pa.RecordBatch.from_arrays(arrays, names=self.names)

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield self.apply(batch)


def _entry_position(df: Any, entry_col: str) -> int:
    from pyspark.sql.types import BinaryType

    names = df.columns
    if entry_col not in names:
        raise ValueError(f"no column {entry_col!r} in {names}")
    pos = names.index(entry_col)
    dtype = df.schema.fields[pos].dataType
    if not isinstance(dtype, BinaryType):
        raise TypeError(f"column {entry_col!r} must be binary, not {dtype.simpleString()}")
    return pos


def _check_unique(names: Sequence[str], hint: str) -> None:
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"output columns would repeat {dup}; {hint}")


def _run(df: Any, fn: BatchKernel, fields: list[Any]) -> Any:
    from pyspark.sql.types import StructType

    _check_unique(fn.names, "pass prefix= (or rename the input columns)")
    return df.mapInArrow(fn, StructType(fields))


def _append(df: Any, entry_col: str, kernel: str, prefix: str, **kwargs: Any) -> Any:
    """All input columns, then every kernel column (named ``prefix + name``)."""
    pos = _entry_position(df, entry_col)
    ks = kernel_arrow_schema(kernel, **kwargs)
    layout: list[_Source] = [("in", i) for i in range(len(df.columns))] + [("k", n) for n in ks.names]
    knames = [prefix + n for n in ks.names]
    fn = BatchKernel(kernel, kwargs, pos, layout, list(df.columns) + knames)
    return _run(df, fn, list(df.schema.fields) + spark_fields(ks, knames))


def decode_metadata(df: Any, entry_col: str = "entry", verify_checksum: bool = False, prefix: str = "") -> Any:
    """``df`` plus one column per decoded field of each entry: broker entry metadata
    (``broker_timestamp``, ``index``), ``has_checksum``/``checksum_ok`` (``checksum_ok`` is only
    computed with ``verify_checksum``), the MessageMetadata fields (``publish_time``,
    ``producer_name``, ``sequence_id``, ``num_messages``, ``compression``, ...) and ``error``."""
    return _append(df, entry_col, "decode_metadata", prefix, verify_checksum=verify_checksum)


def verify_checksums(df: Any, entry_col: str = "entry", prefix: str = "") -> Any:
    """``df`` plus ``has_checksum``, ``checksum_ok`` (null without a checksum) and ``error``."""
    return _append(df, entry_col, "verify_checksums", prefix)


def peek_broker_entry_metadata(df: Any, entry_col: str = "entry", prefix: str = "") -> Any:
    """``df`` plus the PIP-70 ``broker_timestamp`` and ``index`` (null when absent) and ``error``."""
    return _append(df, entry_col, "peek_broker_entry_metadata", prefix)


def strip_broker_entry_metadata(
    df: Any, entry_col: str = "entry", output_col: str | None = None, error_col: str = "error"
) -> Any:
    """The entries as a consumer receives them (PIP-70 header removed, other entries unchanged).

    The stripped bytes replace ``entry_col`` in place, or go to a new ``output_col``; ``error_col``
    is appended. A corrupt header gives a null entry and the error, so keep the original with
    ``output_col`` if you need it.
    """
    pos = _entry_position(df, entry_col)
    ks = kernel_arrow_schema("strip_broker_entry_metadata")
    fields = list(df.schema.fields)
    layout: list[_Source] = [("in", i) for i in range(len(fields))]
    names = list(df.columns)
    entry_field, error_field = spark_fields(ks, [output_col or entry_col, error_col])
    if output_col is None or output_col == entry_col:
        layout[pos] = ("k", "entry")
        fields[pos] = entry_field
    else:
        layout.append(("k", "entry"))
        names.append(output_col)
        fields.append(entry_field)
    layout.append(("k", "error"))
    names.append(error_col)
    fields.append(error_field)
    return _run(df, BatchKernel("strip_broker_entry_metadata", {}, pos, layout, names), fields)


def explode_messages(
    df: Any,
    entry_col: str = "entry",
    keep: Sequence[str] | None = None,
    prefix: str = "",
    include_compacted_out: bool = False,
    verify_checksum: bool = True,
    max_uncompressed_size: int = DEFAULT_DECOMPRESSION_LIMIT,
) -> Any:
    """One row per message: the ``keep`` columns of its entry (default: every column but
    ``entry_col``, e.g. ``ledger_id``, ``entry_id``), then ``batch_index`` (-1 outside a batch),
    ``payload`` (decompressed), ``key``, ``ordering_key``, ``properties``, ``event_time``,
    ``publish_time``, ``producer_name``, ``sequence_id``, ``null_value``, ``compacted_out``,
    ``broker_timestamp``, ``index`` (the message's PIP-70 index) and ``error``.

    A null entry gives one row of nulls; an entry that fails to decode (bad checksum with
    ``verify_checksum``, corrupt bytes, payload over ``max_uncompressed_size``) gives one row whose
    ``error`` says why.
    """
    kwargs = dict(
        include_compacted_out=include_compacted_out,
        verify_checksum=verify_checksum,
        max_uncompressed_size=max_uncompressed_size,
    )
    return _explode(df, "explode_messages", entry_col, keep, prefix, kwargs)


def _explode(
    df: Any, kernel: str, entry_col: str, keep: Sequence[str] | None, prefix: str, kwargs: dict[str, Any]
) -> Any:
    pos = _entry_position(df, entry_col)
    keep = [c for c in df.columns if c != entry_col] if keep is None else list(keep)
    missing = [c for c in keep if c not in df.columns]
    if missing:
        raise ValueError(f"keep names unknown columns {missing}; columns are {df.columns}")
    ks = kernel_arrow_schema(kernel, **kwargs)
    kcols = [n for n in ks.names if n != "entry_index"]
    kschema = pa.schema([ks.field(n) for n in kcols])
    in_fields = {f.name: (i, f) for i, f in enumerate(df.schema.fields)}
    layout: list[_Source] = [("in", in_fields[c][0]) for c in keep] + [("k", n) for n in kcols]
    names = list(keep) + [prefix + n for n in kcols]
    fn = BatchKernel(kernel, kwargs, pos, layout, names, explode=True)
    return _run(df, fn, [in_fields[c][1] for c in keep] + spark_fields(kschema, names[len(keep) :]))


def explode_transaction_log(
    df: Any, entry_col: str = "entry", keep: Sequence[str] | None = None, prefix: str = ""
) -> Any:
    """One row per transaction-coordinator record (PIP-160 batches opened): the ``keep`` columns,
    then the columns of :func:`pulsarkit.bulk.explode_transaction_log` (txn ids as decimal(20,0),
    Spark having no unsigned longs)."""
    return _explode(df, "explode_transaction_log", entry_col, keep, prefix, {})


def explode_pending_ack_log(
    df: Any, entry_col: str = "entry", keep: Sequence[str] | None = None, prefix: str = ""
) -> Any:
    """One row per pending-ack store record: the ``keep`` columns, then the columns of
    :func:`pulsarkit.bulk.explode_pending_ack_log`."""
    return _explode(df, "explode_pending_ack_log", entry_col, keep, prefix, {})
