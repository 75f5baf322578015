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
is stored as it is, and nulls stay nulls.

**Evolution** (:func:`evolved_schema`): when a topic's newest schema version changes between two runs, the next
run's table schema is the union of the table's and the new one, by column (and nested field) name: a new field is
added, nullable (the earlier rows hold nulls); a field the new version no longer has stays, nullable, and the new
rows hold nulls there (Avro's resolution); Iceberg widens ``int`` to ``long``, ``float`` to ``double`` and a
decimal's precision (same scale), as its schema evolution allows. Every other change (a type narrowed, or changed to
another kind, a map's key type, and any widening in Delta, which deltalake cannot do) is refused, naming the column
and both types (:class:`Incompatible`)."""

from __future__ import annotations

import pyarrow as pa

from ..lazy import deferred
from .protocol import ExportRefused

pc = deferred("pyarrow.compute")

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


class Incompatible(ExportRefused):
    """A change of a column's type that a table cannot evolve to: ``column`` (a dotted path), the table's type and
    the new one, and why."""

    def __init__(self, column: str, old: pa.DataType, new: pa.DataType, why: str) -> None:
        self.column, self.old, self.new, self.why = column, old, new, why
        super().__init__(f"column {column}: the table's {old} cannot become {new} ({why})")


def _plain(t: pa.DataType) -> pa.DataType:
    """``t`` without what a table's reader gives differently from what was written: large strings, binaries and
    lists, the names of list items and map entries, a UTC zone's spelling, nested fields' metadata."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain(f.type), f.nullable) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_plain(t.key_type), pa.field("value", _plain(t.item_type), t.item_field.nullable))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(pa.field("item", _plain(t.value_type), t.value_field.nullable))
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_timestamp(t) and t.tz is not None:
        return pa.timestamp(t.unit, tz="UTC")  # both formats store an instant: "+00:00", "Etc/UTC" are one zone
    return t


#: the widenings Iceberg's schema evolution allows (a decimal's precision is checked apart)
_ICEBERG_WIDENS = {(pa.int32(), pa.int64()), (pa.float32(), pa.float64())}


def _merge_fields(old: list[pa.Field], new: list[pa.Field], to: str, where: str) -> list[pa.Field]:
    """The table's fields in their order (those the new rows lack made nullable), then the new ones (nullable)."""
    theirs = {f.name: f for f in new}
    out = []
    for f in old:
        path = f"{where}.{f.name}" if where else f.name
        if f.name in theirs:
            n = theirs[f.name]
            out.append(pa.field(f.name, _merge(f.type, n.type, to, path), f.nullable or n.nullable))
        else:
            out.append(pa.field(f.name, _plain(f.type), True))
    mine = {f.name for f in old}
    return out + [pa.field(f.name, _plain(f.type), True) for f in new if f.name not in mine]


def _merge(old: pa.DataType, new: pa.DataType, to: str, where: str) -> pa.DataType:
    o, n = _plain(old), _plain(new)
    if o == n:
        return o
    if pa.types.is_struct(o) and pa.types.is_struct(n):
        return pa.struct(_merge_fields(list(o), list(n), to, where))
    if pa.types.is_list(o) and pa.types.is_list(n):
        item = _merge(o.value_type, n.value_type, to, where + "[]")
        return pa.list_(pa.field("item", item, o.value_field.nullable or n.value_field.nullable))
    if pa.types.is_map(o) and pa.types.is_map(n):
        if o.key_type != n.key_type:
            raise Incompatible(where + " (key)", o.key_type, n.key_type, "a map's key type does not change")
        item = _merge(o.item_type, n.item_type, to, where + " (value)")
        return pa.map_(o.key_type, pa.field("value", item, o.item_field.nullable or n.item_field.nullable))
    wider = (o, n) in _ICEBERG_WIDENS or (
        pa.types.is_decimal(o) and pa.types.is_decimal(n) and o.scale == n.scale and o.precision < n.precision
    )
    if wider and to == "iceberg":
        return n
    if wider:
        raise Incompatible(where, o, n, "a widening a Delta table written by deltalake cannot make")
    if (n, o) in _ICEBERG_WIDENS or (pa.types.is_decimal(o) and pa.types.is_decimal(n)):
        raise Incompatible(where, o, n, "the type is narrowed")
    raise Incompatible(where, o, n, f"no {to} schema evolution changes one to the other")


def same_schema(stored: pa.Schema, new: pa.Schema) -> bool:
    """Whether ``new`` (a run's :func:`table_schema`) is the table's ``stored`` schema (as its reader gives it),
    column order aside."""
    plain = {f.name: (_plain(f.type), f.nullable) for f in stored}
    return plain == {f.name: (_plain(f.type), f.nullable) for f in new}


def evolved_schema(stored: pa.Schema, new: pa.Schema, to: str) -> pa.Schema:
    """The schema a ``to`` table of schema ``stored`` evolves to for rows of schema ``new`` (the module doc's rules);
    raises :class:`Incompatible` for a change it cannot make."""
    return pa.schema(_merge_fields(list(stored), list(new), to, ""))


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table``'s rows as ``schema`` (an :func:`evolved_schema` of theirs): the columns and nested fields they lack
    null, the widened ones cast (exactly: every cast here widens)."""
    cols = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(cols, schema=schema)


__all__ = [
    "TABLE_FORMATS",
    "Incompatible",
    "conform",
    "evolved_schema",
    "same_schema",
    "table_schema",
    "to_table_types",
]
