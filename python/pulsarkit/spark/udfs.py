"""Column UDFs over entry bytes: one pulsarkit bulk kernel call per Arrow batch, one value per row.

Use them in any column expression::

    from pulsarkit.spark import udfs
    df.select("ledger_id", "entry_id", udfs.publish_time("entry"), udfs.strip_bem("entry").alias("entry"))

``flavour`` picks how Spark hands the batch over:

* ``"arrow"``: ``pyspark.sql.functions.arrow_udf`` (Spark >= 4.1). The binary column arrives as a
  ``pyarrow`` array and goes to the Rust kernel without a copy.
* ``"pandas"``: ``pandas_udf`` (Spark 3.x and 4.0). Spark builds a pandas Series of ``bytes``
  (one Python object per row) that is turned back into one Arrow array for the same kernel call;
  correct everywhere, slower for small entries.
* ``"auto"`` (default): ``"arrow"`` when this Spark has ``arrow_udf``, else ``"pandas"``.

Undecodable entries give null (``entry_error`` says why, with the byte offset); null entries give
null. A UDF cannot add an error column to its row, so use :func:`entry_metadata` (a struct with an
``error`` field) or the DataFrame transforms in :mod:`pulsarkit.spark.transforms` when you need both.
"""

# No ``from __future__ import annotations``: PySpark reads the UDF type hints as real objects.

import functools
from typing import Any

import pyarrow as pa

from .. import bulk
from ._schema import kernel_arrow_schema, spark_fields, spark_type, to_spark_arrow

FLAVOURS = ("auto", "arrow", "pandas")


class Extract:
    """Picklable kernel call: one bulk kernel over an Arrow array of entries, keeping one output
    column (``column``) or all of them as a struct (``column=None``)."""

    def __init__(self, kernel: str, column: Any = None, **kwargs: Any) -> None:
        self.kernel = kernel
        self.column = column
        self.kwargs = kwargs

    def __call__(self, entries: Any) -> Any:
        if isinstance(entries, pa.ChunkedArray):
            entries = entries.combine_chunks()
        out = getattr(bulk, self.kernel)(entries, **self.kwargs)
        if self.column is not None:
            return to_spark_arrow(out.column(self.column))
        return to_spark_arrow(pa.StructArray.from_arrays(out.columns, fields=list(out.schema)))

    def return_type(self) -> Any:
        schema = kernel_arrow_schema(self.kernel, **self.kwargs)
        if self.column is not None:
            return spark_type(schema.field(self.column).type)
        from pyspark.sql.types import StructType

        return StructType(spark_fields(schema))


def arrow_udf_available() -> bool:
    import pyspark.sql.functions as F

    return hasattr(F, "arrow_udf")


def _resolve(flavour: str) -> str:
    if flavour not in FLAVOURS:
        raise ValueError(f"flavour must be one of {FLAVOURS}, not {flavour!r}")
    if flavour == "auto":
        return "arrow" if arrow_udf_available() else "pandas"
    return flavour


def _arrow_flavour(name: str, extract: Extract) -> Any:
    from pyspark.sql.functions import arrow_udf

    def run(entries: pa.Array) -> pa.Array:
        return extract(entries)

    run.__name__ = run.__qualname__ = name
    # PySpark's overloads want a functionType, which at run time it takes from the type hints (as here)
    return arrow_udf(run, extract.return_type())  # type: ignore[call-overload]


def _pandas_flavour(name: str, extract: Extract) -> Any:
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    # Object dtype with Python ints keeps int64 exact (the default float64 would round ids and
    # sequence numbers above 2**53).
    if extract.column is not None:

        def run(entries: pd.Series) -> pd.Series:
            arr = extract(pa.array(entries, type=pa.binary(), from_pandas=True))
            return arr.to_pandas(integer_object_nulls=True)

    else:

        def run(entries: pd.Series) -> pd.DataFrame:
            arr = extract(pa.array(entries, type=pa.binary(), from_pandas=True))
            return pa.RecordBatch.from_struct_array(arr).to_pandas(integer_object_nulls=True)

    run.__name__ = run.__qualname__ = name
    # as arrow_udf: the functionType is taken from the type hints
    return pandas_udf(run, extract.return_type())  # type: ignore[call-overload]


@functools.cache
def make_udf(name: str, kernel: str, column: Any = None, flavour: str = "auto", **kwargs: Any) -> Any:
    """A Spark UDF applying ``Extract(kernel, column, **kwargs)`` per batch, in the given flavour."""
    extract = Extract(kernel, column, **kwargs)
    if _resolve(flavour) == "arrow":
        return _arrow_flavour(name, extract)
    return _pandas_flavour(name, extract)


def broker_timestamp(col: Any, flavour: str = "auto") -> Any:
    """PIP-70 broker timestamp (ms) of each entry; null when the entry has none."""
    return make_udf("broker_timestamp", "peek_broker_entry_metadata", "broker_timestamp", flavour)(col)


def broker_index(col: Any, flavour: str = "auto") -> Any:
    """PIP-70 index of each entry (the index of its last message); null when absent."""
    return make_udf("broker_index", "peek_broker_entry_metadata", "index", flavour)(col)


def strip_bem(col: Any, flavour: str = "auto") -> Any:
    """Each entry without its broker entry metadata, as a consumer receives it (unchanged without one)."""
    return make_udf("strip_bem", "strip_broker_entry_metadata", "entry", flavour)(col)


def checksum_ok(col: Any, flavour: str = "auto") -> Any:
    """Whether the stored CRC32C matches; null for entries without a checksum or undecodable ones."""
    return make_udf("checksum_ok", "verify_checksums", "checksum_ok", flavour)(col)


def metadata_field(col: Any, field: str, flavour: str = "auto", verify_checksum: bool = False) -> Any:
    """Any one column of :func:`pulsarkit.bulk.decode_metadata` (e.g. ``"sequence_id"``)."""
    schema = kernel_arrow_schema("decode_metadata", verify_checksum=verify_checksum)
    if field not in schema.names:
        raise ValueError(f"unknown metadata field {field!r}; fields are {schema.names}")
    return make_udf(field, "decode_metadata", field, flavour, verify_checksum=verify_checksum)(col)


def publish_time(col: Any, flavour: str = "auto") -> Any:
    """MessageMetadata ``publish_time`` (ms) of each entry."""
    return metadata_field(col, "publish_time", flavour)


def producer_name(col: Any, flavour: str = "auto") -> Any:
    return metadata_field(col, "producer_name", flavour)


def sequence_id(col: Any, flavour: str = "auto") -> Any:
    return metadata_field(col, "sequence_id", flavour)


def num_messages(col: Any, flavour: str = "auto") -> Any:
    """Messages in the entry (``num_messages_in_batch``, 1 outside a batch)."""
    return metadata_field(col, "num_messages", flavour)


def entry_error(col: Any, flavour: str = "auto") -> Any:
    """Why an entry cannot be decoded (message with byte offset), or null. A readable entry with a
    wrong checksum is not an error here: see :func:`checksum_ok`."""
    return metadata_field(col, "error", flavour)


def entry_metadata(col: Any, flavour: str = "auto", verify_checksum: bool = False) -> Any:
    """A struct with every :func:`pulsarkit.bulk.decode_metadata` column, ``error`` included."""
    return make_udf("entry_metadata", "decode_metadata", None, flavour, verify_checksum=verify_checksum)(col)
