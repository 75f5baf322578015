"""A topic's schema history as one table schema, and its messages decoded into it.

The table's types are the **newest** version's (the last one not recording a deletion); a message is decoded with
the version it names (``MessageMetadata.schema_version``) and resolved into the newest: Avro's resolution rules for
``AVRO`` and ``JSON``, field numbers for ``PROTOBUF_NATIVE``, the same type for primitives, both sides for
``KEY_VALUE`` (same encoding). Two versions that cannot be resolved raise :class:`SchemaEvolutionError` naming both,
when a message of the older one is decoded. A message without a version on a topic with a schema was written by a
producer without one (Pulsar allows it unless the namespace enforces schemas; the Java client's ``AUTO_CONSUME``
then gives its bytes): it is an error row, as is a version the history lacks, a payload its version does not
decode, or an encrypted message; a null value is a null ``value``. Rows are never dropped."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa

from ...lazy import deferred
from .info import BYTES_TYPES, SchemaEvolutionError, SchemaInfo, key_value_parts, split_inline
from .primitive import PRIMITIVES, PrimitiveCodec
from .record import AvroCodec, JsonCodec, ProtobufCodec, ProtobufNativeCodec

pc = deferred("pyarrow.compute")


class Codec(Protocol):
    """Payloads of one schema version decoded as the table's type."""

    type: pa.DataType

    def decode(self, payloads: pa.Array) -> tuple[pa.Array, list[str | None]]: ...


_RECORDS = {"AVRO": AvroCodec, "JSON": JsonCodec, "PROTOBUF_NATIVE": ProtobufNativeCodec, "PROTOBUF": ProtobufCodec}


class KeyValueCodec:
    """``KEY_VALUE``: its key and value decoded by their own codecs (``INLINE`` from the payload, ``SEPARATED``
    with the key from the message's key)."""

    def __init__(self, writer: SchemaInfo, reader: SchemaInfo) -> None:
        wk, wv, wenc = key_value_parts(writer)
        rk, rv, renc = key_value_parts(reader)
        if wenc != renc:
            raise SchemaEvolutionError(f"KEY_VALUE {writer.label} is {wenc}, {reader.label} is {renc}")
        self.encoding = renc
        self.key = make_codec(_label(wk, writer, "key"), _label(rk, reader, "key"))
        self.value = make_codec(_label(wv, writer, "value"), _label(rv, reader, "value"))
        self.key_type, self.type = self.key.type, self.value.type

    def decode_kv(self, payloads: pa.Array, keys: pa.Array) -> tuple[pa.Array, pa.Array, list[str | None]]:
        n = len(payloads)
        errors: list[str | None] = [None] * n
        if self.encoding == "INLINE":
            kb: list[bytes | None] = []
            vb: list[bytes | None] = []
            for i, p in enumerate(payloads.to_pylist()):
                k = v = None
                if p is not None:
                    try:
                        k, v = split_inline(p)
                    except Exception as e:  # noqa: BLE001 - SchemaDecodeError, the only one raised
                        errors[i] = str(e)
                kb.append(k)
                vb.append(v)
            key_raw, value_raw = pa.array(kb, pa.binary()), pa.array(vb, pa.binary())
        else:
            kb = []
            for i, k in enumerate(keys.to_pylist()):
                try:  # Pulsar's SEPARATED producers put the key's bytes in the message key, base64
                    kb.append(None if k is None else base64.b64decode(k, validate=True))
                except (binascii.Error, ValueError):
                    errors[i] = f"KEY_VALUE SEPARATED: the message key {k[:40]!r} is not base64"
                    kb.append(None)
            key_raw, value_raw = pa.array(kb, pa.binary()), payloads
        key_vals, key_err = self.key.decode(key_raw)
        values, value_err = self.value.decode(value_raw)
        for i in range(n):
            errors[i] = errors[i] or _side("key", key_err[i]) or _side("value", value_err[i])
        return key_vals, values, errors

    def decode(self, payloads: pa.Array) -> tuple[pa.Array, list[str | None]]:
        _, values, errors = self.decode_kv(payloads, pa.nulls(len(payloads), pa.string()))
        return values, errors


def _side(side: str, e: str | None) -> str | None:
    return None if e is None else f"KEY_VALUE {side}: {e}"


def _label(part: SchemaInfo, whole: SchemaInfo, side: str) -> SchemaInfo:
    v = whole.version
    return SchemaInfo(part.type, part.definition, part.properties, v) if v is not None else part


class _ErrorCodec:
    """A type no codec reads: every payload an error row (its bytes stay in ``payload``)."""

    def __init__(self, type_: pa.DataType, why: str) -> None:
        self.type, self.why = type_, why

    def decode(self, payloads: pa.Array) -> tuple[pa.Array, list[str | None]]:
        errors = [None if p is None else self.why for p in payloads.to_pylist()]
        return pa.nulls(len(payloads), self.type), errors


def make_codec(writer: SchemaInfo, reader: SchemaInfo) -> Codec | KeyValueCodec:
    """The decoder of ``writer``'s payloads as values of ``reader``'s type (raises :class:`SchemaEvolutionError`)."""
    wt, rt = writer.type, reader.type
    if wt in BYTES_TYPES and rt in BYTES_TYPES:
        return PrimitiveCodec("BYTES")
    if wt != rt:
        raise SchemaEvolutionError(f"schema {writer.label} cannot be read as {reader.label}: the types differ")
    if rt == "KEY_VALUE":
        return KeyValueCodec(writer, reader)
    if rt in _RECORDS:
        return _RECORDS[rt](writer, reader)
    if rt in PRIMITIVES:
        return PrimitiveCodec(rt, writer.properties)
    return _ErrorCodec(pa.binary(), f"schema type {rt} is not one pulsarkit decodes")


@dataclass(frozen=True)
class Decoded:
    """One column of messages decoded: ``key`` (KEY_VALUE topics only, else None), ``value``, each row's
    ``schema_version`` number and ``decode_error``."""

    key: pa.Array | None
    value: pa.Array
    schema_version: pa.Array
    decode_error: pa.Array


class TopicSchema:
    """A topic's schema versions (in version order) as one table schema (see the module doc)."""

    def __init__(self, versions: Sequence[tuple[SchemaInfo, bool]]) -> None:
        """``versions``: each version with whether it records the schema's deletion."""
        self._history = tuple(versions)
        self.versions = {info.version: info for info, deleted in versions if not deleted}
        live = [info for info, deleted in versions if not deleted]
        self.newest = live[-1] if live else SchemaInfo("NONE")
        self._codecs: dict[int, Codec | KeyValueCodec] = {}
        top = (
            self._codec(self.newest.version)
            if self.newest.version is not None
            else make_codec(self.newest, self.newest)
        )
        self.is_key_value = isinstance(top, KeyValueCodec)
        self.key_type = top.key_type if isinstance(top, KeyValueCodec) else None
        self.value_type = top.type

    def __reduce__(self) -> tuple[type[TopicSchema], tuple[tuple[tuple[SchemaInfo, bool], ...]]]:
        # pickled as its history (a Spark task's copy builds its own decoders): codecs may hold what does not pickle
        return (TopicSchema, (self._history,))

    def _codec(self, version: int) -> Codec | KeyValueCodec:
        if version not in self._codecs:
            self._codecs[version] = make_codec(self.versions[version], self.newest)
        return self._codecs[version]

    def decode(
        self,
        payloads: pa.Array,
        schema_versions: pa.Array,
        keys: pa.Array,
        null_value: pa.Array | None = None,
        encrypted: pa.Array | None = None,
    ) -> Decoded:
        """Each message's payload (binary) with the version it names (``schema_version``: the 8 stored bytes)
        and its key (``KEY_VALUE`` ``SEPARATED``), into the table's types."""
        payloads = _combine(payloads).cast(pa.binary())
        n = len(payloads)
        numbers, errors = _version_numbers(_combine(schema_versions))
        keys = _combine(keys)
        skip = np.zeros(n, dtype=bool)
        if null_value is not None:
            skip |= pc.fill_null(_combine(null_value), False).to_numpy(zero_copy_only=False)
        if encrypted is not None:
            enc = pc.fill_null(_combine(encrypted), False).to_numpy(zero_copy_only=False)
            for i in np.flatnonzero(enc):
                errors[i] = "encrypted: pulsarkit has no keys"
            skip |= enc
        # rows grouped by version column-wise: one numpy pass per distinct version, not per row
        failed = np.array([e is not None for e in errors], dtype=bool) if any(errors) else np.zeros(n, dtype=bool)
        valid = numbers.is_valid().to_numpy(zero_copy_only=False)
        nums = pc.fill_null(numbers, 0).to_numpy(zero_copy_only=False)
        groups: dict[int | None, np.ndarray] = {}
        unversioned = np.flatnonzero(~valid & ~failed)
        if self.newest.version is not None:
            why = f"written without a schema version (a producer without a schema); not decoded as {self.newest.type}"
            for i in unversioned[~skip[unversioned]]:
                errors[i] = why
                failed[i] = True
        elif len(unversioned):
            groups[None] = unversioned
        for v in np.unique(nums[valid & ~failed]).tolist():
            rows = np.flatnonzero(valid & ~failed & (nums == v))
            if v in self.versions:
                groups[v] = rows
            else:
                for i in rows:
                    errors[i] = f"schema version {v} is not in the topic's schema history"
                failed[rows] = True
        pieces_k: list[pa.Array] = []
        pieces_v: list[pa.Array] = []
        where = np.full(n, -1, dtype=np.int64)
        offset = 0
        for v, rows in groups.items():
            idx = pa.array(rows, pa.int64())
            codec = self._codec(v) if v is not None else make_codec(self.newest, self.newest)
            sub = payloads.take(idx)
            if skip[rows].any():  # a null value decodes to null (a SEPARATED key still decodes)
                sub = pc.if_else(pa.array(skip[rows]), pa.scalar(None, pa.binary()), sub)
            if isinstance(codec, KeyValueCodec):
                kv, vv, errs = codec.decode_kv(sub, keys.take(idx))
                pieces_k.append(kv)
            else:
                vv, errs = codec.decode(sub)
            pieces_v.append(vv)
            for j in np.flatnonzero([e is not None for e in errs]) if any(errs) else ():
                errors[rows[j]] = errs[j]
                failed[rows[j]] = True
            where[rows] = np.arange(offset, offset + len(rows))
            offset += len(rows)
        take = pa.array(where, mask=(where < 0) | failed)
        value = _assemble(pieces_v, self.value_type, take)
        key = _assemble(pieces_k, self.key_type, take) if self.key_type is not None else None
        return Decoded(key, value, numbers, pa.array(errors, pa.string()))


def _combine(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def _assemble(pieces: list[pa.Array], type_: pa.DataType, take: pa.Array) -> pa.Array:
    pieces = [p if p.type == type_ else p.cast(type_) for p in pieces]
    whole = pa.concat_arrays(pieces) if pieces else pa.array([], type_)
    if not len(whole):
        return pa.nulls(len(take), type_)
    return whole.take(take)


def _version_numbers(raw: pa.Array) -> tuple[pa.Array, list[str | None]]:
    """The version each 8-byte ``schema_version`` names (None for none), and an error for any other size."""
    n = len(raw)
    errors: list[str | None] = [None] * n
    raw = raw.cast(pa.binary())
    lengths = pc.binary_length(raw)
    good = pc.fill_null(pc.equal(lengths, 8), False).to_numpy(zero_copy_only=False)
    other = pc.fill_null(pc.and_(pc.not_equal(lengths, 8), pc.not_equal(lengths, 0)), False)
    for i in pc.indices_nonzero(other).to_pylist():
        errors[i] = f"schema_version of {lengths[i].as_py()} bytes (a version is 8)"
    sub = raw.filter(pa.array(good))
    if len(sub):
        offsets = np.frombuffer(sub.buffers()[1], dtype=np.int32, count=len(sub) + 1, offset=sub.offset * 4)
        vals = np.frombuffer(sub.buffers()[2], dtype=">i8", count=len(sub), offset=int(offsets[0])).astype(np.int64)
    else:
        vals = np.zeros(0, dtype=np.int64)
    idx = np.cumsum(good) - 1
    numbers = pa.array(vals, pa.int64()).take(pa.array(idx, mask=~good)) if len(vals) else pa.nulls(n, pa.int64())
    return numbers, errors


__all__ = ["Codec", "Decoded", "KeyValueCodec", "TopicSchema", "make_codec"]
