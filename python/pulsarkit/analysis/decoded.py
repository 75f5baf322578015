"""Messages decoded with their topic's schema (``decode="schema"``): the message rows of the one reader with typed
``key``/``value`` columns, from the topic's schema history in the data directory (:mod:`.schemas`) and the schema
decoders (:mod:`pulsarkit.codec.schema`).

A decoded row is the message row (:data:`pulsarkit.scan.MESSAGE_FIELDS`, ``payload`` kept) with:

- ``schema_version``: the version number the message names (int64; null when it names none),
- ``value``: the payload as the table's type, the newest schema version's (a struct for a record; the bytes for a
  topic without a schema),
- ``key``: for a ``KEY_VALUE`` topic the typed key (its raw message key then in ``partition_key``); for any other
  topic the message key as read,
- ``decode_error``: why the message did not decode (null when it did); such a row keeps its ``payload`` and has a
  null ``value``: never dropped, never guessed.

Every topic read together must share one schema (a partitioned topic's partitions do); evolution and the rules for
messages without a version are :mod:`pulsarkit.codec.schema.topic`'s.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from ..codec.schema import SchemaInfo, TopicSchema
from ..errors import PulsarkitError
from ..scan.datadir import DataDir
from ..scan.schema import message_fields
from .schemas import schema_history, schema_id

#: the ``decode`` modes of a message read: the payload's bytes, or decoded with the topic's schema
DECODE_MODES = ("bytes", "schema")


def history_versions(dd: DataDir, topics: Iterable[str]) -> list[tuple[SchemaInfo, bool]]:
    """The versions of the one schema of ``topics`` (each with whether it records a deletion), in version order;
    topics of different schemas are an error naming two of them."""
    topics = list(topics)
    ids = sorted({schema_id(t) for t in topics})
    if len(ids) > 1:
        raise PulsarkitError(f"decode='schema' reads topics of one schema at a time, not {ids[0]} and {ids[1]}")
    history = schema_history(dd, topics)
    return [(SchemaInfo(s.type, s.definition, dict(s.properties), s.version), s.deleted) for s in history]


def topic_schema(dd: DataDir, topic: str) -> TopicSchema:
    """The schema history of ``topic`` (its registry's every version) as one table schema."""
    return TopicSchema(history_versions(dd, [topic]))


def decoded_fields(ts: TopicSchema, markers: bool = False) -> list[tuple[str, pa.DataType]]:
    """The decoded rows' columns (see the module doc)."""
    out: list[tuple[str, pa.DataType]] = []
    for name, ty in message_fields(markers):
        if name == "schema_version":
            ty = pa.int64()
        if name == "key" and ts.key_type is not None:
            out += [("key", ts.key_type), ("partition_key", pa.string())]
            continue
        out.append((name, ty))
    return [*out, ("value", ts.value_type), ("decode_error", pa.string())]


def decoded_schema(ts: TopicSchema, markers: bool = False) -> pa.Schema:
    return pa.schema([pa.field(n, t) for n, t in decoded_fields(ts, markers)])


def decode_batch(batch: pa.RecordBatch | pa.Table, ts: TopicSchema) -> pa.RecordBatch:
    """One batch of message rows (the one message schema) decoded with ``ts``."""
    if isinstance(batch, pa.Table):
        batch = (
            batch.combine_chunks().to_batches()[0] if batch.num_rows else pa.RecordBatch.from_pylist([], batch.schema)
        )
    d = ts.decode(
        batch.column("payload"),
        batch.column("schema_version"),
        batch.column("key"),
        null_value=batch.column("null_value"),
        encrypted=batch.column("encrypted"),
    )
    cols: dict[str, pa.Array] = {name: batch.column(name) for name in batch.schema.names}
    cols["schema_version"] = d.schema_version
    if d.key is not None:
        cols["partition_key"] = batch.column("key")
        cols["key"] = d.key
    cols["value"], cols["decode_error"] = d.value, d.decode_error
    schema = decoded_schema(ts, "marker" in batch.schema.names)
    return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)


def decode_batches(dd: DataDir, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Batches of message rows decoded with their topic's schema; every topic must share one schema id."""
    ts: TopicSchema | None = None
    first: str | None = None
    for b in batches:
        if not b.num_rows:
            continue
        topics = set(b.column("topic").to_pylist())
        for t in topics:
            if first is None:
                first, ts = t, topic_schema(dd, t)
            elif schema_id(t) != schema_id(first):
                raise PulsarkitError(
                    f"decode='schema' reads topics of one schema at a time: {first} and {t} have their own"
                )
        assert ts is not None
        yield decode_batch(b, ts)


def decoded_table(dd: DataDir, topic: str, batches: Iterable[pa.RecordBatch], markers: bool = False) -> pa.Table:
    """:func:`decode_batches` as one table (its schema from ``topic``'s even when there are no rows)."""
    ts = topic_schema(dd, topic)
    return pa.Table.from_batches(list(decode_batches(dd, batches)), schema=decoded_schema(ts, markers))


def json_value(v: Any, type_: pa.DataType) -> Any:
    """A decoded value (``as_py``) of Arrow type ``type_`` as JSON data: bytes in base64, times in ISO 8601,
    decimals as text, maps as objects."""
    if v is None:
        return None
    if pa.types.is_map(type_):
        return {str(k): json_value(x, type_.item_type) for k, x in v}
    if pa.types.is_struct(type_):
        return {f.name: json_value(v[f.name], f.type) for f in type_}
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return [json_value(x, type_.value_type) for x in v]
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return str(v)
    return v


__all__ = [
    "DECODE_MODES",
    "decode_batch",
    "decode_batches",
    "decoded_fields",
    "decoded_schema",
    "decoded_table",
    "history_versions",
    "json_value",
    "topic_schema",
]
