"""The Arrow types of decoded rows (``--decode schema``) as Delta and Iceberg tables store them.

The Parquet export keeps the decoders' Arrow types as they are. Delta and Iceberg (format v2) have fewer types;
each decoded column is cast, nested fields included, by these rules (:func:`table_schema`):

- timestamps: microseconds, the type's time zone kept (``UTC``: Delta ``timestamp``, Iceberg ``timestamptz``; none:
  Delta ``timestamp_ntz``, Iceberg ``timestamp``); **nanoseconds are truncated to the microsecond at or before**
  (the floor, as Java's ``Instant.truncatedTo(MICROS)``; Pulsar's ``INSTANT``, ``LOCAL_DATE_TIME``, Avro's
  ``*-nanos``): neither format stores nanoseconds;
- times of day: Iceberg ``time`` (microseconds, nanoseconds truncated); Delta has no time type: int64 microseconds
  since midnight (nanoseconds truncated);
- unsigned integers: the next wider signed type (``uint64``: ``decimal(20, 0)``, every value exact); Iceberg has
  no 8- or 16-bit integers: ``int32``; half floats: ``float32``; dictionary-encoded: their values;
- Delta has no fixed-size binary: ``binary``;
- what neither can hold (decimals wider than 38 digits, the null type, unions, durations) is refused, naming the
  column.

Every other type (structs, lists, maps, strings, binary, booleans, the other integers and floats, dates, decimals)
is stored as it is, and nulls stay nulls."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from .protocol import ExportRefused

#: the formats whose tables take decoded rows through these rules
TABLE_FORMATS = ("delta", "iceberg")


def _unit(t: pa.DataType, to: str, where: str) -> pa.DataType:
    """Step one: every type one the format stores (Delta's times still time64, made int64 in step two)."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _unit(f.type, to, f"{where}.{f.name}"), f.nullable) for f in t])
    if pa.types.is_map(t):
        key = pa.field(t.key_field.name, _unit(t.key_type, to, where + " (key)"), False)
        item = t.item_field
        return pa.map_(key, pa.field(item.name, _unit(item.type, to, where + " (value)"), item.nullable))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        vf = t.value_field
        return pa.list_(pa.field(vf.name, _unit(vf.type, to, where + "[]"), vf.nullable))
    if pa.types.is_dictionary(t):
        return _unit(t.value_type, to, where)
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=t.tz)
    if pa.types.is_time(t):
        return pa.time64("us")
    if pa.types.is_unsigned_integer(t):
        return {8: pa.int16(), 16: pa.int32(), 32: pa.int64()}.get(t.bit_width, pa.decimal128(20, 0))
    if to == "iceberg" and t in (pa.int8(), pa.int16()):
        return pa.int32()
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_fixed_size_binary(t) and to == "delta":
        return pa.binary()
    if pa.types.is_decimal(t) and t.precision > 38:
        raise ExportRefused(f"column {where}: {t} has more digits than a {to} table's decimals (38)")
    if pa.types.is_null(t) or pa.types.is_union(t) or pa.types.is_duration(t) or pa.types.is_interval(t):
        raise ExportRefused(f"column {where}: a {to} table has no type for {t}")
    return t


def _delta_times(t: pa.DataType) -> pa.DataType:
    """Step two, Delta: a time of day (time64[us] after step one) as its microseconds (a same-width cast)."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _delta_times(f.type), f.nullable) for f in t])
    if pa.types.is_map(t):
        item = t.item_field
        return pa.map_(
            pa.field(t.key_field.name, _delta_times(t.key_type), False),
            pa.field(item.name, _delta_times(item.type), item.nullable),
        )
    if pa.types.is_list(t):
        vf = t.value_field
        return pa.list_(pa.field(vf.name, _delta_times(vf.type), vf.nullable))
    return pa.int64() if pa.types.is_time(t) else t


def table_schema(schema: pa.Schema, to: str) -> pa.Schema:
    """``schema`` (decoded rows) as a ``to`` table stores it (the module doc's rules); refuses a type it cannot hold."""
    one = pa.schema([pa.field(f.name, _unit(f.type, to, f.name), f.nullable) for f in schema])
    if to != "delta":
        return one
    return pa.schema([pa.field(f.name, _delta_times(f.type), f.nullable) for f in one])


def _has_ns(t: pa.DataType) -> bool:
    if pa.types.is_timestamp(t):
        return t.unit == "ns"
    if pa.types.is_struct(t):
        return any(_has_ns(f.type) for f in t)
    if pa.types.is_map(t):
        return _has_ns(t.key_type) or _has_ns(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_ns(t.value_type)
    return False


def _floor_ns(a: pa.Array) -> pa.Array:
    """``a`` with its nanosecond timestamps floored to the microsecond (a cast alone rounds toward 1970)."""
    t = a.type
    if not _has_ns(t):
        return a
    if pa.types.is_timestamp(t):
        return pc.floor_temporal(a, unit="microsecond")
    mask = a.is_null() if a.null_count else None
    if pa.types.is_struct(t):
        return pa.StructArray.from_arrays([_floor_ns(c) for c in a.flatten()], fields=list(t), mask=mask)
    if pa.types.is_map(t):
        return pa.MapArray.from_arrays(a.offsets, _floor_ns(a.keys), _floor_ns(a.items), type=t, mask=mask)
    return type(a).from_arrays(a.offsets, _floor_ns(a.values), type=t, mask=mask)


def to_table_types(table: pa.Table, to: str) -> pa.Table:
    """``table``'s rows cast to :func:`table_schema` (nanoseconds floored, then cast exactly)."""
    one = pa.schema([pa.field(f.name, _unit(f.type, to, f.name), f.nullable) for f in table.schema])
    if any(_has_ns(f.type) for f in table.schema):
        cols = [pa.chunked_array([_floor_ns(c) for c in col.chunks], col.type) for col in table.columns]
        table = pa.Table.from_arrays(cols, schema=table.schema)
    table = table.cast(one, safe=False)  # times of day: nanoseconds truncated (never negative: the floor too)
    return table.cast(table_schema(table.schema, to)) if to == "delta" else table


__all__ = ["TABLE_FORMATS", "table_schema", "to_table_types"]
