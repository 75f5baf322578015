"""Arrow <-> Spark type plumbing shared by the transforms and the UDFs.

Output schemas are derived from the kernels themselves (each kernel run once on an empty column), so
a column added to a Rust kernel shows up in Spark without touching this package.
"""

from __future__ import annotations

import functools
from typing import Any

import pyarrow as pa

from .. import bulk

#: Kernels the Spark layer may call, by name (resolved on the executors, so only names are pickled).
KERNELS = (
    "decode_metadata",
    "explode_messages",
    "verify_checksums",
    "peek_broker_entry_metadata",
    "strip_broker_entry_metadata",
    "explode_transaction_log",
    "explode_pending_ack_log",
)


def spark_arrow_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type Spark reads back unchanged for ``t``.

    Spark has no unsigned integers and Spark < 4 rejects 64-bit-offset and view layouts, so those map
    to the nearest type Spark knows; nested types are mapped recursively.
    """
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_uint8(t):
        return pa.int16()
    if pa.types.is_uint16(t):
        return pa.int32()
    if pa.types.is_uint32(t):
        return pa.int64()
    if pa.types.is_uint64(t):
        return pa.decimal128(20, 0)
    if pa.types.is_map(t):
        return pa.map_(spark_arrow_type(t.key_type), t.item_field.with_type(spark_arrow_type(t.item_type)))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return pa.list_(t.value_field.with_type(spark_arrow_type(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(spark_arrow_type(f.type)) for f in t])
    return t


def to_spark_arrow(col: Any) -> Any:
    """Casts a kernel output column to :func:`spark_arrow_type`.

    A binary column whose values exceed 2 GiB cannot use 32-bit offsets; it is then passed on as
    ``large_binary``, which Spark 4 reads as ``BinaryType`` too.
    """
    target = spark_arrow_type(col.type)
    if target == col.type:
        return col
    try:
        return col.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return col


@functools.cache
def kernel_arrow_schema(kernel: str, **kwargs: Any) -> pa.Schema:
    """The Arrow schema a bulk kernel produces, mapped to what Spark accepts."""
    out = getattr(bulk, kernel)(pa.array([], pa.binary()), **kwargs)
    return pa.schema([f.with_type(spark_arrow_type(f.type)) for f in out.schema])


def spark_type(t: pa.DataType) -> Any:
    from pyspark.sql.pandas.types import from_arrow_type

    return from_arrow_type(spark_arrow_type(t))


def spark_fields(schema: pa.Schema, names: list[str] | None = None) -> list[Any]:
    """Spark ``StructField`` s for the Arrow fields (optionally renamed)."""
    from pyspark.sql.types import StructField

    names = names or schema.names
    return [StructField(n, spark_type(f.type), nullable=f.nullable) for n, f in zip(names, schema)]
